//! Blocked clients whose keys change under them, run as the same multi-client scenario
//! against a real redis-server (7.0.15) and against respite, comparing every reply.
//!
//! Redis 7.2 is the target. Where 7.0 and 7.2 differ the scenario states the 7.2 reply:
//! - a client blocked in XREADGROUP whose stream is deleted, replaced, flushed, swapped,
//!   moved, renamed or expired (or whose group is destroyed) is re-run by 7.2 and gets that
//!   re-run's error (`NOGROUP No such key …`, `WRONGTYPE …`) where 7.0 answered
//!   `UNBLOCKED the stream key no longer exists` (or its own NOGROUP text);
//! - 7.2 lets scripts call BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BZPOPMIN and BZPOPMAX (they
//!   run without blocking) where 7.0 refused them as `noscript`.
//!
//! "Blocked" is always observed through the server's own INFO `blocked_clients`; waits are
//! bounded by a generous guard, never asserted as durations.

mod common;

use common::{conn_info_int, info_field, until_blocked_sync, Conn, Frame, ServerProcess};
use respite::TestServer;

const NOGROUP: &str =
    "NOGROUP No such key 'mystream' or consumer group 'mygroup' in XREADGROUP with GROUP option";
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
/// Redis 7.0's answers that 7.2 replaced (see the module note).
const UNBLOCKED_70: &str = "UNBLOCKED the stream key no longer exists";
const NOGROUP_70: &str = "NOGROUP the consumer group this client was blocked on no longer exists";

fn words(line: &str) -> Vec<Vec<u8>> {
    line.split_whitespace()
        .map(|w| w.as_bytes().to_vec())
        .collect()
}

/// The servers under comparison.
struct Servers {
    redis: ServerProcess,
    respite: TestServer,
}

impl Servers {
    fn start() -> Servers {
        Servers {
            redis: ServerProcess::redis(),
            respite: TestServer::start().expect("start respite"),
        }
    }

    /// Runs `scenario` on both servers and compares the transcripts, after replacing in
    /// redis-server 7.0's transcript each reply that 7.2 changed (`subst`: 7.0 → 7.2).
    /// Returns respite's transcript.
    fn compare(
        &self,
        name: &str,
        subst: &[(&str, &str)],
        scenario: impl Fn(u16) -> Vec<Frame>,
    ) -> Vec<Frame> {
        let want: Vec<Frame> = scenario(self.redis.port)
            .into_iter()
            .map(|f| match &f {
                Frame::Error(e) => subst
                    .iter()
                    .find(|(old, _)| e == old)
                    .map_or(f.clone(), |(_, new)| Frame::Error(new.to_string())),
                _ => f,
            })
            .collect();
        let have = scenario(self.respite.port());
        assert_eq!(have, want, "{name}: respite (left) vs redis 7.2 (right)");
        have
    }
}

/// One client blocks with `block` (after `setup`), another runs `act`; returns every reply
/// of `setup` and `act`, then the blocked client's reply, then `after`'s replies. Keys are
/// flushed first (all dbs).
fn blocked_scenario(
    port: u16,
    setup: &[&str],
    block: &str,
    act: &[&str],
    after: &[&str],
) -> Vec<Frame> {
    let mut ctl = Conn::open(port);
    let mut out = Vec::new();
    ctl.cmd("FLUSHALL");
    for l in setup {
        out.push(ctl.cmd(l));
    }
    let mut rd = Conn::open(port);
    rd.send(&words(block)).unwrap();
    until_blocked_sync(&mut ctl, 1);
    for l in act {
        out.push(ctl.cmd(l));
    }
    out.push(rd.read().expect("the blocked client was never answered"));
    for l in after {
        out.push(ctl.cmd(l));
    }
    until_blocked_sync(&mut ctl, 0);
    out
}

/// A scenario's name, the commands that change the key, and 7.0 → 7.2 replacements.
type Case<'a> = (&'a str, &'a [&'a str], &'a [(&'a str, &'a str)]);

const GROUP_SETUP: &[&str] = &["XADD mystream 666 f v", "XGROUP CREATE mystream mygroup $"];
const READ_GROUP: &str = "XREADGROUP GROUP mygroup Alice BLOCK 0 STREAMS mystream >";

/// Every way a blocked XREADGROUP's stream can go away answers the reader with the 7.2
/// re-run's error: NOGROUP when the key is gone, WRONGTYPE when it holds something else.
#[test]
fn xreadgroup_unblocked_when_its_stream_goes_away() {
    let s = Servers::start();
    let gone = [(UNBLOCKED_70, NOGROUP), (NOGROUP_70, NOGROUP)];
    let replaced = [(UNBLOCKED_70, WRONGTYPE)];
    let cases: &[Case] = &[
        ("DEL", &["DEL mystream"], &gone),
        ("UNLINK", &["UNLINK mystream"], &gone),
        ("RENAME away", &["RENAME mystream other"], &gone),
        ("RENAMENX away", &["RENAMENX mystream other"], &gone),
        ("MOVE", &["MOVE mystream 3"], &gone),
        ("PEXPIREAT past", &["PEXPIREAT mystream 1"], &gone),
        ("EXPIRE negative", &["EXPIRE mystream -1"], &gone),
        ("SET over", &["SET mystream val1"], &replaced),
        (
            "MULTI DEL SADD",
            &["MULTI", "DEL mystream", "SADD mystream e1", "EXEC"],
            &replaced,
        ),
        (
            "RENAME a list over",
            &["RPUSH l a", "RENAME l mystream"],
            &replaced,
        ),
        (
            "RENAME a stream without the group over",
            &["XADD other 1 f v", "RENAME other mystream"],
            &gone,
        ),
        (
            "EVAL DEL",
            &["EVAL return(redis.call('DEL',KEYS[1])) 1 mystream"],
            &gone,
        ),
        (
            "EVAL SET",
            &["EVAL return(redis.call('SET',KEYS[1],'x')) 1 mystream"],
            &replaced,
        ),
    ];
    for (name, act, subst) in cases {
        let got = s.compare(name, subst, |port| {
            blocked_scenario(port, GROUP_SETUP, READ_GROUP, act, &["EXISTS mystream"])
        });
        let reader = &got[GROUP_SETUP.len() + act.len()];
        let want = if subst[0].1 == NOGROUP {
            NOGROUP
        } else {
            WRONGTYPE
        };
        assert_eq!(reader, &Frame::Error(want.into()), "{name}");
    }
}

/// FLUSHALL and FLUSHDB (sync or not) answer a reader blocked on a stream they emptied.
#[test]
fn xreadgroup_unblocked_by_flush() {
    let s = Servers::start();
    for flush in ["FLUSHALL", "FLUSHALL ASYNC", "FLUSHDB", "FLUSHDB SYNC"] {
        let got = s.compare(flush, &[(UNBLOCKED_70, NOGROUP)], |port| {
            blocked_scenario(port, GROUP_SETUP, READ_GROUP, &[flush], &["DBSIZE"])
        });
        assert_eq!(got[GROUP_SETUP.len() + 1], Frame::Error(NOGROUP.into()));
    }
}

/// RESTORE … REPLACE of a string over the stream (each server restores its own DUMP).
#[test]
fn xreadgroup_unblocked_by_restore_replace() {
    let s = Servers::start();
    s.compare("RESTORE REPLACE", &[(UNBLOCKED_70, WRONGTYPE)], |port| {
        let mut ctl = Conn::open(port);
        ctl.cmd("FLUSHALL");
        ctl.cmd("SET tmp hello");
        let Frame::Bulk(payload) = ctl.cmd("DUMP tmp") else {
            panic!("DUMP reply")
        };
        let mut out: Vec<Frame> = GROUP_SETUP.iter().map(|l| ctl.cmd(l)).collect();
        let mut rd = Conn::open(port);
        rd.send(&words(READ_GROUP)).unwrap();
        until_blocked_sync(&mut ctl, 1);
        let restore = [
            b"RESTORE".to_vec(),
            b"mystream".to_vec(),
            b"0".to_vec(),
            payload,
            b"REPLACE".to_vec(),
        ];
        out.push(ctl.call(&restore).unwrap());
        out.push(rd.read().expect("reader answered"));
        out.push(ctl.cmd("GET mystream"));
        out
    });
}

/// A stream whose TTL runs out (active expiry: nobody touches it) answers the reader.
#[test]
fn xreadgroup_unblocked_when_its_stream_expires() {
    let s = Servers::start();
    s.compare("PEXPIRE 50", &[(UNBLOCKED_70, NOGROUP)], |port| {
        blocked_scenario(
            port,
            GROUP_SETUP,
            READ_GROUP,
            &["PEXPIRE mystream 50"],
            &["EXISTS mystream"],
        )
    });
}

/// SWAPDB: the reader's db now has no such key (NOGROUP) or a list there (WRONGTYPE).
#[test]
fn xreadgroup_unblocked_by_swapdb() {
    let s = Servers::start();
    for (name, other, want) in [
        ("empty", None, NOGROUP),
        ("list", Some("LPUSH mystream e1"), WRONGTYPE),
    ] {
        s.compare(name, &[(UNBLOCKED_70, want)], |port| {
            let mut ctl = Conn::open(port);
            ctl.cmd("FLUSHALL");
            let mut out = vec![ctl.cmd("SELECT 4")];
            if let Some(l) = other {
                out.push(ctl.cmd(l));
            }
            out.push(ctl.cmd("SELECT 9"));
            out.extend(GROUP_SETUP.iter().map(|l| ctl.cmd(l)));
            let mut rd = Conn::open(port);
            out.push(rd.cmd("SELECT 9"));
            rd.send(&words(READ_GROUP)).unwrap();
            until_blocked_sync(&mut ctl, 1);
            out.push(ctl.cmd("SWAPDB 4 9"));
            out.push(rd.read().expect("reader answered"));
            out
        });
    }
}

/// XGROUP DESTROY answers the reader with 7.2's NOGROUP (its re-run's), counted as one
/// failed call of XREADGROUP and one NOGROUP error reply (stream-cgroups.tcl).
#[test]
fn xgroup_destroy_unblocks_xreadgroup_with_nogroup() {
    let s = Servers::start();
    s.compare("XGROUP DESTROY", &[(NOGROUP_70, NOGROUP)], |port| {
        let mut ctl = Conn::open(port);
        ctl.cmd("FLUSHALL");
        ctl.cmd("CONFIG RESETSTAT");
        blocked_scenario(
            port,
            &["XGROUP CREATE mystream mygroup $ MKSTREAM"],
            READ_GROUP,
            &["XGROUP DESTROY mystream mygroup"],
            &[],
        )
    });
    // Redis 7.2's statistics for it.
    let mut c = Conn::open(s.respite.port());
    let Frame::Bulk(stats) = c.cmd("INFO commandstats") else {
        panic!("INFO")
    };
    let line = String::from_utf8_lossy(&stats)
        .lines()
        .find(|l| l.starts_with("cmdstat_xreadgroup:"))
        .map(str::to_string)
        .expect("xreadgroup stats");
    assert!(
        line.contains("calls=1,") && line.ends_with("rejected_calls=0,failed_calls=1"),
        "{line}"
    );
    let Frame::Bulk(errs) = c.cmd("INFO errorstats") else {
        panic!("INFO")
    };
    assert!(
        String::from_utf8_lossy(&errs).contains("errorstat_NOGROUP:count=1"),
        "{}",
        String::from_utf8_lossy(&errs)
    );
    let Frame::Bulk(st) = c.cmd("INFO stats") else {
        panic!("INFO")
    };
    assert_eq!(
        info_field(&String::from_utf8_lossy(&st), "total_error_replies"),
        Some(1)
    );
}

/// Plain XREAD, BLPOP and BZPOPMIN readers keep waiting when their key is deleted or
/// replaced by another type, and are served once it holds their type again.
#[test]
fn other_readers_keep_waiting_when_their_key_changes_type() {
    let s = Servers::start();
    let cases: &[(&str, &[&str], &str, &[&str])] = &[
        (
            "XREAD, DEL",
            &["XADD mystream 666 f v"],
            "XREAD BLOCK 0 STREAMS mystream $",
            &["DEL mystream", "XADD mystream 667 f v"],
        ),
        (
            "XREAD, SET",
            &["XADD mystream 666 f v"],
            "XREAD BLOCK 0 STREAMS mystream $",
            &["SET mystream v", "DEL mystream", "XADD mystream 667 f v"],
        ),
        (
            "XREAD, FLUSHALL",
            &["XADD mystream 666 f v"],
            "XREAD BLOCK 0 STREAMS mystream 666",
            &["FLUSHALL", "XADD mystream 667 f v"],
        ),
        (
            "BLPOP, SET then list",
            &[],
            "BLPOP l 0",
            &["SET l str", "DEL l", "RPUSH l a"],
        ),
        (
            "BLPOP, zset renamed over",
            &[],
            "BLPOP l 0",
            &["ZADD z 1 m", "RENAME z l", "DEL l", "RPUSH l b"],
        ),
        (
            "BZPOPMIN, list renamed over",
            &[],
            "BZPOPMIN z 0",
            &["RPUSH l a", "RENAME l z", "FLUSHDB", "ZADD z 2 m"],
        ),
        (
            "BLMOVE, stream there",
            &[],
            "BLMOVE l d LEFT RIGHT 0",
            &[
                "XADD l 1 f v",
                "SWAPDB 0 1",
                "SWAPDB 0 1",
                "DEL l",
                "LPUSH l x",
            ],
        ),
    ];
    for (name, setup, block, act) in cases {
        s.compare(name, &[], |port| {
            blocked_scenario(port, setup, block, act, &["DBSIZE"])
        });
    }
}

/// A blocked BRPOPLPUSH touches neither key until served: a WATCH on its destination
/// survives (list.tcl `BRPOPLPUSH does not affect WATCH while still blocked`), and the push
/// that serves it does dirty the watch (`PUSH resulting from BRPOPLPUSH affect WATCH`).
/// Here EXEC's reply is read before the push, so the order of the two is not left to the
/// scheduling of two connections.
#[test]
fn blocked_brpoplpush_and_watch() {
    let s = Servers::start();
    for blocking in [
        "BRPOPLPUSH srclist dstlist 0",
        "BLMOVE srclist dstlist RIGHT LEFT 0",
    ] {
        s.compare(blocking, &[], |port| {
            let mut ctl = Conn::open(port);
            ctl.cmd("FLUSHALL");
            ctl.cmd("SET somekey somevalue");
            let mut rd = Conn::open(port);
            rd.send(&words(blocking)).unwrap();
            until_blocked_sync(&mut ctl, 1);
            let mut w = Conn::open(port);
            let mut out = vec![
                w.cmd("WATCH dstlist"),
                w.cmd("MULTI"),
                w.cmd("GET somekey"),
                w.cmd("EXEC"),
                w.cmd("WATCH dstlist"),
                w.cmd("MULTI"),
                w.cmd("GET somekey"),
            ];
            out.push(ctl.cmd("LPUSH srclist element"));
            out.push(rd.read().expect("served"));
            out.push(w.cmd("EXEC"));
            out.push(ctl.cmd("LRANGE dstlist 0 -1"));
            out
        });
    }
}

/// BRPOPLPUSH whose destination holds the wrong type: WRONGTYPE when served, the source
/// left as it was, and the next waiter served (list.tcl).
#[test]
fn brpoplpush_wrong_destination_type() {
    let s = Servers::start();
    s.compare("wrong destination", &[], |port| {
        let mut ctl = Conn::open(port);
        ctl.cmd("FLUSHALL");
        let mut out = vec![ctl.cmd("SET target1 nolist")];
        let mut rd1 = Conn::open(port);
        rd1.send(&words("BRPOPLPUSH blist target1 0")).unwrap();
        until_blocked_sync(&mut ctl, 1);
        let mut rd2 = Conn::open(port);
        rd2.send(&words("BRPOPLPUSH blist target2 0")).unwrap();
        until_blocked_sync(&mut ctl, 2);
        out.push(ctl.cmd("LPUSH blist foo"));
        out.push(rd1.read().unwrap());
        out.push(rd2.read().unwrap());
        out.push(ctl.cmd("LRANGE target2 0 -1"));
        out.push(ctl.cmd("EXISTS blist"));
        out
    });
}

/// Redis 7.2 runs the blocking pops inside scripts without blocking (7.0 refused six of
/// them as `noscript`): nil when there is nothing, the element otherwise. XREAD and
/// XREADGROUP with BLOCK are refused there (both versions, checked while parsing).
#[test]
fn blocking_commands_inside_scripts() {
    let s = Servers::start();
    let scripts: &[(&str, Option<Frame>)] = &[
        (
            "return redis.call('BLPOP',KEYS[1],0)",
            Some(Frame::NullBulk),
        ),
        (
            "return redis.call('BRPOP',KEYS[1],0)",
            Some(Frame::NullBulk),
        ),
        (
            "return redis.call('BLMOVE',KEYS[1],KEYS[2],'LEFT','RIGHT',0)",
            Some(Frame::NullBulk),
        ),
        (
            "return redis.call('BRPOPLPUSH',KEYS[1],KEYS[2],0)",
            Some(Frame::NullBulk),
        ),
        (
            "return redis.call('BZPOPMIN',KEYS[3],0)",
            Some(Frame::NullBulk),
        ),
        (
            "return redis.call('BZPOPMAX',KEYS[3],0)",
            Some(Frame::NullBulk),
        ),
        (
            "redis.call('RPUSH',KEYS[1],'a','b','c') return redis.call('BLPOP',KEYS[1],0)",
            Some(bulks(&["l", "a"])),
        ),
        (
            "return redis.call('BRPOP',KEYS[1],0)",
            Some(bulks(&["l", "c"])),
        ),
        (
            "return redis.call('BLMOVE',KEYS[1],KEYS[2],'LEFT','RIGHT',0)",
            Some(Frame::Bulk(b"b".to_vec())),
        ),
        (
            "redis.call('RPUSH',KEYS[1],'x') return redis.call('BRPOPLPUSH',KEYS[1],KEYS[2],0)",
            Some(Frame::Bulk(b"x".to_vec())),
        ),
        (
            "redis.call('ZADD',KEYS[3],1,'m',2,'n') return redis.call('BZPOPMIN',KEYS[3],0)",
            Some(bulks(&["z", "m", "1"])),
        ),
        (
            "return redis.call('BZPOPMAX',KEYS[3],0)",
            Some(bulks(&["z", "n", "2"])),
        ),
        (
            "return redis.pcall('BLPOP',KEYS[1],'x')",
            Some(Frame::Error(
                "ERR timeout is not a float or out of range".into(),
            )),
        ),
        (
            "return redis.call('LRANGE',KEYS[2],0,-1)",
            Some(bulks(&["x", "b"])),
        ),
        // Keys that are empty on both servers (7.0's refusals left the others apart).
        ("return redis.call('BLMPOP',0,1,'e1','LEFT')", None),
        ("return redis.call('BZMPOP',0,1,'e2','MIN')", None),
        (
            "return redis.pcall('XREAD','BLOCK',0,'STREAMS',KEYS[4],'$')",
            None,
        ),
        (
            "return redis.pcall('xread','COUNT','x','BLOCK',0,'STREAMS',KEYS[4],'$')",
            None,
        ),
        (
            "return redis.pcall('xreadgroup','GROUP','g','c','BLOCK','x','STREAMS',KEYS[4],'>')",
            None,
        ),
        ("return redis.pcall('XREAD','STREAMS',KEYS[4],'0')", None),
    ];
    let run = |port: u16| -> Vec<Frame> {
        let mut c = Conn::open(port);
        c.cmd("FLUSHALL");
        let mut out = Vec::new();
        for (body, _) in scripts {
            let args: Vec<Vec<u8>> = ["EVAL", body, "4", "l", "d", "z", "s"]
                .iter()
                .map(|a| a.as_bytes().to_vec())
                .collect();
            out.push(c.call(&args).unwrap());
        }
        out
    };
    let have = run(s.respite.port());
    let oracle = run(s.redis.port);
    for (i, (body, want72)) in scripts.iter().enumerate() {
        match want72 {
            Some(w) => assert_eq!(&have[i], w, "{body}"),
            None => assert_eq!(have[i], oracle[i], "{body}: respite vs redis"),
        }
    }
    // The XREAD refusal names the command as the script spelled it.
    assert!(
        matches!(&have[16], Frame::Error(e) if e == "ERR XREAD command is not allowed with BLOCK option from scripts"),
        "{:?}",
        have[16]
    );
    // A function too (FCALL runs as a script).
    let mut c = Conn::open(s.respite.port());
    c.cmd("FLUSHALL");
    let lib = "#!lua name=blk\nredis.register_function('pop', function(keys) return redis.call('BLPOP', keys[1], 0) end)";
    let load = [
        b"FUNCTION".to_vec(),
        b"LOAD".to_vec(),
        b"REPLACE".to_vec(),
        lib.as_bytes().to_vec(),
    ];
    assert_eq!(c.call(&load).unwrap(), Frame::Bulk(b"blk".to_vec()));
    assert_eq!(c.cmd("FCALL pop 1 l"), Frame::NullBulk);
    c.cmd("RPUSH l v");
    assert_eq!(c.cmd("FCALL pop 1 l"), bulks(&["l", "v"]));
    assert_eq!(conn_info_int(&mut c, "clients", "blocked_clients"), 0);
}

fn bulks(v: &[&str]) -> Frame {
    Frame::Array(
        v.iter()
            .map(|s| Frame::Bulk(s.as_bytes().to_vec()))
            .collect(),
    )
}

/// Inside MULTI/EXEC every blocking command answers at once, as on a timeout.
#[test]
fn blocking_commands_inside_multi() {
    let s = Servers::start();
    s.compare("MULTI", &[], |port| {
        let mut c = Conn::open(port);
        c.cmd("FLUSHALL");
        c.cmd("XGROUP CREATE s g $ MKSTREAM");
        let mut out = vec![c.cmd("MULTI")];
        for l in [
            "BLPOP l 0",
            "BRPOP l 0",
            "BLMOVE l d LEFT RIGHT 0",
            "BRPOPLPUSH l d 0",
            "BZPOPMIN z 0",
            "BZPOPMAX z 0",
            "BLMPOP 0 1 l LEFT",
            "BZMPOP 0 1 z MIN",
            "XREAD BLOCK 0 STREAMS s $",
            "XREADGROUP GROUP g c BLOCK 0 STREAMS s >",
            "RPUSH l a b",
            "BLMOVE l d LEFT RIGHT 0",
            "BLPOP l 0",
        ] {
            out.push(c.cmd(l));
        }
        out.push(c.cmd("EXEC"));
        out
    });
}

/// INFO clients' 7.2 fields (stream-cgroups.tcl): keys with a blocked client, and those
/// with an XREADGROUP reader, which Redis wakes when the key goes away.
#[test]
fn info_total_blocking_keys() {
    let s = TestServer::start().expect("start respite");
    let port = s.port();
    let mut ctl = Conn::open(port);
    let counts = |c: &mut Conn| {
        let Frame::Bulk(info) = c.cmd("INFO clients") else {
            panic!("INFO")
        };
        let info = String::from_utf8_lossy(&info);
        (
            info_field(&info, "total_blocking_keys"),
            info_field(&info, "total_blocking_keys_on_nokey"),
        )
    };
    assert_eq!(counts(&mut ctl), (Some(0), Some(0)));
    let mut rd2 = Conn::open(port);
    rd2.send(&words("BLPOP mystream 0")).unwrap();
    until_blocked_sync(&mut ctl, 1);
    assert_eq!(counts(&mut ctl), (Some(1), Some(0)));
    // BLPOP keeps waiting on a key that now holds a stream.
    ctl.cmd("XADD mystream 666 key value");
    ctl.cmd("XGROUP CREATE mystream mygroup $");
    let mut rd = Conn::open(port);
    rd.send(&words(
        "XREADGROUP GROUP mygroup c BLOCK 0 STREAMS mystream >",
    ))
    .unwrap();
    until_blocked_sync(&mut ctl, 2);
    assert_eq!(counts(&mut ctl), (Some(1), Some(1)));
    ctl.cmd("DEL mystream");
    assert_eq!(rd.read().unwrap(), Frame::Error(NOGROUP.into()));
    until_blocked_sync(&mut ctl, 1);
    assert_eq!(counts(&mut ctl), (Some(1), Some(0)));
    drop(rd2);
    until_blocked_sync(&mut ctl, 0);
    assert_eq!(counts(&mut ctl), (Some(0), Some(0)));
}

/// `calls` and `failed_calls` of one command in INFO commandstats (`usec` varies).
fn cmd_counts(c: &mut Conn, name: &str) -> Frame {
    let Frame::Bulk(stats) = c.cmd("INFO commandstats") else {
        panic!("INFO")
    };
    let text = String::from_utf8_lossy(&stats).into_owned();
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("cmdstat_{name}:")))
        .unwrap_or("");
    let keep: Vec<&str> = line
        .split([':', ','])
        .filter(|f| f.starts_with("calls=") || f.starts_with("failed_calls="))
        .collect();
    Frame::Simple(keep.join(","))
}

/// CLIENT UNBLOCK answers a blocked client as a timeout would, or with the UNBLOCKED error
/// (a failed call and an error reply); 0 for a client that is not blocked; its arguments
/// are checked as Redis checks them (list.tcl uses it).
#[test]
fn client_unblock() {
    let s = Servers::start();
    s.compare("CLIENT UNBLOCK", &[], |port| {
        let mut ctl = Conn::open(port);
        ctl.cmd("FLUSHALL");
        ctl.cmd("CONFIG RESETSTAT");
        let mut rd = Conn::open(port);
        let Frame::Int(id) = rd.cmd("CLIENT ID") else {
            panic!("CLIENT ID")
        };
        let mut out = Vec::new();
        for (block, how) in [
            ("BLPOP l 0", ""),
            ("BZPOPMIN z 0", " TIMEOUT"),
            ("XREAD BLOCK 0 STREAMS s $", " timeout"),
            ("BLMOVE l d LEFT RIGHT 0", " ERROR"),
            ("BRPOPLPUSH l d 0", ""),
        ] {
            rd.send(&words(block)).unwrap();
            until_blocked_sync(&mut ctl, 1);
            out.push(ctl.cmd(&format!("CLIENT UNBLOCK {id}{how}")));
            out.push(rd.read().expect("unblocked"));
            until_blocked_sync(&mut ctl, 0);
        }
        for bad in [
            format!("CLIENT UNBLOCK {id}"),
            format!("CLIENT UNBLOCK {id} ERROR"),
            "CLIENT UNBLOCK x".into(),
            "CLIENT UNBLOCK x foo".into(),
            "CLIENT UNBLOCK 1 ERROR x".into(),
            "CLIENT UNBLOCK -1".into(),
        ] {
            out.push(ctl.cmd(&bad));
        }
        out.push(rd.cmd("PING"));
        out
    });
    // Redis 7.2's statistics: each blocked command is one call; only the ERROR unblock
    // fails (7.0 also counted the timeouts as failed calls).
    let mut c = Conn::open(s.respite.port());
    for (name, want) in [
        ("blpop", "calls=1,failed_calls=0"),
        ("bzpopmin", "calls=1,failed_calls=0"),
        ("xread", "calls=1,failed_calls=0"),
        ("blmove", "calls=1,failed_calls=1"),
        ("brpoplpush", "calls=1,failed_calls=0"),
    ] {
        assert_eq!(
            cmd_counts(&mut c, name),
            Frame::Simple(want.into()),
            "{name}"
        );
    }
    let Frame::Bulk(errs) = c.cmd("INFO errorstats") else {
        panic!("INFO")
    };
    let errs = String::from_utf8_lossy(&errs).into_owned();
    assert!(errs.contains("errorstat_UNBLOCKED:count=1"), "{errs}");
}
