//! Hashes, sets and sorted sets on the durable engine (`--engine redb`): their in-place
//! writes are journaled element by element (`HashPut`, `SetRem`, `ZPut`, ...), and what the
//! journal holds must rebuild the same keyspace.
//!
//! - Reload equivalence: per family and per `appendfsync` mode, a seeded random command
//!   sequence (wrong types, emptied keys, lazy and active expiry, MULTI/EXEC, served
//!   BZPOPMIN) runs on a durable server; a canonical dump taken before a restart must equal
//!   the one taken after it.
//! - Element level: one HSET/SADD/ZADD/... on a 10 000-element collection writes a handful
//!   of rows (`respite_rows_written` in INFO persistence), not 10 000.

mod common;

use common::{conn_info_int, until_blocked_sync, Conn, Frame, Rng};
use respite::TestServer;
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
enum Family {
    Hash,
    Set,
    ZSet,
}

fn start(dir: &Path, mode: &str) -> TestServer {
    TestServer::builder()
        .redb(dir)
        .manual_clock()
        .param("appendfsync", mode)
        .start()
        .expect("durable server starts")
}

fn connect(server: &TestServer) -> Conn {
    Conn::connect(server.port()).expect("connect")
}

fn call(c: &mut Conn, args: &[String]) -> Frame {
    let raw: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
    c.call(&raw).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Errors a well-formed random command may legitimately get; anything else means the
/// generator (or the server) is broken.
fn check(args: &[String], reply: &Frame) {
    if let Frame::Error(e) = reply {
        let expected = [
            "WRONGTYPE",
            "not an integer",
            "not a valid float",
            "not a float",
            "overflow",
            "syntax error",
            "NaN",
            "XX and NX",
            "GT, LT",
            "INCR option",
        ];
        assert!(
            expected.iter().any(|x| e.contains(x)),
            "{args:?} -> unexpected error {e}"
        );
    }
    if let Frame::Array(items) = reply {
        for r in items {
            check(args, r);
        }
    }
}

fn bulk_text(f: &Frame) -> String {
    match f {
        Frame::Bulk(b) => format!("{:?}", String::from_utf8_lossy(b)),
        other => format!("{other}"),
    }
}

/// Canonical dump: per key (sorted), its type, content in a canonical order and deadline.
fn dump(c: &mut Conn) -> Vec<String> {
    let Frame::Array(keys) = c.cmd("KEYS *") else {
        panic!("KEYS reply");
    };
    let mut keys: Vec<Vec<u8>> = keys
        .into_iter()
        .map(|k| match k {
            Frame::Bulk(b) => b,
            other => panic!("key {other}"),
        })
        .collect();
    keys.sort();
    let mut out = Vec::new();
    for k in keys {
        let q = |c: &mut Conn, cmd: &str, extra: &[&str]| {
            let mut args = vec![cmd.as_bytes().to_vec(), k.clone()];
            args.extend(extra.iter().map(|e| e.as_bytes().to_vec()));
            c.call(&args).expect("dump command")
        };
        let ty = match q(c, "TYPE", &[]) {
            Frame::Simple(t) => t,
            other => panic!("TYPE {other}"),
        };
        let content = match (ty.as_str(), q(c, ty_read(&ty), ty_extra(&ty))) {
            ("hash", Frame::Array(flat)) => {
                let mut pairs: Vec<String> = flat
                    .chunks(2)
                    .map(|p| format!("{}={}", bulk_text(&p[0]), bulk_text(&p[1])))
                    .collect();
                pairs.sort();
                pairs.join(" ")
            }
            ("set", Frame::Array(m)) => {
                let mut m: Vec<String> = m.iter().map(bulk_text).collect();
                m.sort();
                m.join(" ")
            }
            ("zset", Frame::Array(m)) => m.iter().map(bulk_text).collect::<Vec<_>>().join(" "),
            (_, other) => format!("{other}"),
        };
        let at = q(c, "PEXPIRETIME", &[]);
        out.push(format!(
            "{:?} {ty} exp={at} {content}",
            String::from_utf8_lossy(&k)
        ));
    }
    out
}

fn ty_read(ty: &str) -> &'static str {
    match ty {
        "hash" => "HGETALL",
        "set" => "SMEMBERS",
        "zset" => "ZRANGE",
        _ => "GET",
    }
}

fn ty_extra(ty: &str) -> &'static [&'static str] {
    match ty {
        "zset" => &["0", "-1", "WITHSCORES"],
        _ => &[],
    }
}

const HASH_KEYS: &[&str] = &["h0", "h1", "h2", "h3"];
const SET_KEYS: &[&str] = &["s0", "s1", "s2", "s3"];
const ZSET_KEYS: &[&str] = &["z0", "z1", "z2", "z3"];
const FIELDS: &[&str] = &[
    "f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9", "f10", "f11", "a b",
];
const VALUES: &[&str] = &[
    "0",
    "1",
    "-7",
    "42",
    "1.5",
    "x",
    "hello world",
    "",
    "9223372036854775807",
    "3e2",
];
const MEMBERS: &[&str] = &[
    "1", "2", "3", "17", "-4", "100", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "x y", "0",
    "007",
];
const SCORES: &[&str] = &[
    "0", "1", "2", "-3", "1.5", "2.25", "10", "-1", "inf", "-inf", "+inf", "(1", "5",
];
const LEX: &[&str] = &["-", "+", "[a", "(c", "[e", "(h", "[1"];

/// A member long enough to turn a listpack/intset collection into its big encoding.
fn long_member() -> String {
    "L".repeat(80)
}

/// 1 to `max`.
fn n_of(rng: &mut Rng, max: usize) -> usize {
    rng.below(max) + 1
}

fn key_args(rng: &mut Rng, keys: &[&str]) -> String {
    rng.pick(keys).to_string()
}

/// One random command of `family` (or a generic one touching its keys).
fn command(rng: &mut Rng, family: Family) -> Vec<String> {
    let keys = match family {
        Family::Hash => HASH_KEYS,
        Family::Set => SET_KEYS,
        Family::ZSet => ZSET_KEYS,
    };
    let s = |x: &str| x.to_string();
    let key = key_args(rng, keys);
    // Generic commands: deadlines, deletion, replacement by another type.
    match rng.below(100) {
        0..=3 => return vec![s("EXPIRE"), key, (rng.below(40) + 1).to_string()],
        4 => return vec![s("PERSIST"), key],
        5 => return vec![s("DEL"), key],
        6 => return vec![s("SET"), key, s("plain")],
        7 => return vec![s("PEXPIRE"), key, (rng.below(30_000) + 1).to_string()],
        _ => {}
    }
    match family {
        Family::Hash => match rng.below(10) {
            0..=2 => {
                let mut a = vec![s(if rng.chance(80) { "HSET" } else { "HMSET" }), key];
                for _ in 0..n_of(rng, 3) {
                    a.push(s(rng.pick(FIELDS)));
                    a.push(if rng.chance(5) {
                        long_member()
                    } else {
                        s(rng.pick(VALUES))
                    });
                }
                a
            }
            3 => vec![s("HSETNX"), key, s(rng.pick(FIELDS)), s(rng.pick(VALUES))],
            4 | 5 => {
                let mut a = vec![s("HDEL"), key];
                for _ in 0..n_of(rng, 4) {
                    a.push(s(rng.pick(FIELDS)));
                }
                a
            }
            6 | 7 => vec![
                s("HINCRBY"),
                key,
                s(rng.pick(FIELDS)),
                (rng.below(11) as i64 - 5).to_string(),
            ],
            8 => vec![
                s("HINCRBYFLOAT"),
                key,
                s(rng.pick(FIELDS)),
                s(rng.pick(&["0.5", "-1.25", "3", "1e3", "-0.125"])),
            ],
            _ => vec![s("HGET"), key, s(rng.pick(FIELDS))],
        },
        Family::Set => match rng.below(12) {
            0..=3 => {
                let mut a = vec![s("SADD"), key];
                for _ in 0..n_of(rng, 4) {
                    a.push(if rng.chance(4) {
                        long_member()
                    } else {
                        s(rng.pick(MEMBERS))
                    });
                }
                a
            }
            4 | 5 => {
                let mut a = vec![s("SREM"), key];
                for _ in 0..n_of(rng, 4) {
                    a.push(s(rng.pick(MEMBERS)));
                }
                a
            }
            6 => vec![s("SPOP"), key],
            7 => vec![s("SPOP"), key, rng.below(4).to_string()],
            8 | 9 => vec![s("SMOVE"), key, key_args(rng, keys), s(rng.pick(MEMBERS))],
            10 => vec![
                s(rng.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"])),
                key,
                key_args(rng, keys),
                key_args(rng, keys),
            ],
            _ => vec![s("SISMEMBER"), key, s(rng.pick(MEMBERS))],
        },
        Family::ZSet => match rng.below(16) {
            0..=4 => {
                let mut a = vec![s("ZADD"), key];
                for opt in ["NX", "XX", "GT", "LT", "CH"] {
                    if rng.chance(12) {
                        a.push(s(opt));
                    }
                }
                let incr = rng.chance(10);
                if incr {
                    a.push(s("INCR"));
                }
                for _ in 0..if incr { 1 } else { n_of(rng, 3) } {
                    let score = rng.pick(SCORES);
                    a.push(s(score.trim_start_matches('(')));
                    a.push(if rng.chance(4) {
                        long_member()
                    } else {
                        s(rng.pick(MEMBERS))
                    });
                }
                a
            }
            5 => vec![
                s("ZINCRBY"),
                key,
                s(rng.pick(&["1", "-2", "0.5", "inf", "-inf"])),
                s(rng.pick(MEMBERS)),
            ],
            6 | 7 => {
                let mut a = vec![s("ZREM"), key];
                for _ in 0..n_of(rng, 3) {
                    a.push(s(rng.pick(MEMBERS)));
                }
                a
            }
            8 => {
                let mut a = vec![s(rng.pick(&["ZPOPMIN", "ZPOPMAX"])), key];
                if rng.chance(50) {
                    a.push(rng.below(4).to_string());
                }
                a
            }
            9 => vec![
                s("ZMPOP"),
                s("2"),
                key,
                key_args(rng, keys),
                s(rng.pick(&["MIN", "MAX"])),
                s("COUNT"),
                (rng.below(3) + 1).to_string(),
            ],
            10 => vec![
                s("ZREMRANGEBYSCORE"),
                key,
                s(rng.pick(SCORES)),
                s(rng.pick(SCORES)),
            ],
            11 => vec![
                s("ZREMRANGEBYRANK"),
                key,
                (rng.below(5) as i64 - 2).to_string(),
                (rng.below(5) as i64 - 2).to_string(),
            ],
            12 => vec![s("ZREMRANGEBYLEX"), key, s(rng.pick(LEX)), s(rng.pick(LEX))],
            13 => vec![
                s(rng.pick(&["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"])),
                key,
                s("2"),
                key_args(rng, keys),
                key_args(rng, keys),
            ],
            // Served at once (the key holds members) or answers nil at once (timeout
            // reached on the manual clock is not relied on: the key may be empty).
            14 => vec![s("ZPOPMIN"), key],
            _ => vec![s("ZSCORE"), key, s(rng.pick(MEMBERS))],
        },
    }
}

/// BZPOPMIN served by a later ZADD (a pop made by the wake-up path, not by a command).
fn served_bzpopmin(rng: &mut Rng, server: &TestServer, c: &mut Conn) {
    let key = rng.pick(ZSET_KEYS).to_string();
    let mut waiter = connect(server);
    call(c, &["DEL".into(), key.clone()]);
    waiter
        .send(&[b"BZPOPMIN".to_vec(), key.as_bytes().to_vec(), b"0".to_vec()])
        .expect("send BZPOPMIN");
    until_blocked_sync(c, 1);
    let mut zadd = vec!["ZADD".to_string(), key.clone()];
    // One member: the served pop empties the key; more: it leaves the rest.
    for (i, m) in ["a", "b", "c"].iter().take(rng.below(3) + 1).enumerate() {
        zadd.push(i.to_string());
        zadd.push(m.to_string());
    }
    call(c, &zadd);
    let got = waiter.read().expect("BZPOPMIN reply");
    let Frame::Array(v) = got else {
        panic!("BZPOPMIN reply {got}");
    };
    assert_eq!(v[1], Frame::Bulk(b"a".to_vec()), "lowest score served");
}

/// Runs a seeded random sequence on a durable server in `mode`, restarts it on the same
/// directory and compares the canonical dumps. Returns how many keys the dump had.
fn reload_equivalence(family: Family, mode: &str, seed: u64, steps: usize) -> usize {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path(), mode);
    let mut c = connect(&server);
    // Small thresholds, so the sequences cross encodings both ways of loading.
    for (p, v) in [
        ("hash-max-listpack-entries", "6"),
        ("set-max-intset-entries", "5"),
        ("set-max-listpack-entries", "6"),
        ("zset-max-listpack-entries", "6"),
    ] {
        assert_eq!(
            c.cmd(&format!("CONFIG SET {p} {v}")),
            Frame::Simple("OK".into())
        );
    }
    let mut rng = Rng::seeded(seed);
    let mut wrote = 0;
    for _ in 0..steps {
        match rng.below(100) {
            // Time passes: active expiry (sweep) or lazy expiry only.
            0..=2 => server.advance_ms(rng.below(20_000) as u64 + 5_000),
            3 => server.clock().advance_ms(rng.below(20_000) as u64 + 5_000),
            4..=7 => {
                // A transaction: keys created and then edited in place in one Access.
                assert_eq!(c.cmd("MULTI"), Frame::Simple("OK".into()));
                let n = rng.below(3) + 2;
                let mut queued = Vec::new();
                for _ in 0..n {
                    let args = command(&mut rng, family);
                    assert_eq!(call(&mut c, &args), Frame::Simple("QUEUED".into()));
                    queued.push(args);
                }
                let reply = c.cmd("EXEC");
                let Frame::Array(replies) = &reply else {
                    panic!("EXEC {reply}");
                };
                for (args, r) in queued.iter().zip(replies) {
                    check(args, r);
                }
            }
            8 if matches!(family, Family::ZSet) => served_bzpopmin(&mut rng, &server, &mut c),
            _ => {
                let args = command(&mut rng, family);
                let reply = call(&mut c, &args);
                check(&args, &reply);
                wrote += 1;
            }
        }
    }
    assert!(wrote > steps / 2);
    let before = dump(&mut c);
    let now = server.clock().now_ms();
    drop(c);
    drop(server);

    let server = start(dir.path(), mode);
    // The old manual clock ran ahead of real time; resume it where it stopped.
    server.clock().set_ms(now);
    let mut c = connect(&server);
    let after = dump(&mut c);
    if before != after {
        let diff: Vec<String> = before
            .iter()
            .filter(|l| !after.contains(l))
            .map(|l| format!("- {l}"))
            .chain(
                after
                    .iter()
                    .filter(|l| !before.contains(l))
                    .map(|l| format!("+ {l}")),
            )
            .collect();
        panic!(
            "{family:?} {mode} seed {seed}: reload differs:\n{}",
            diff.join("\n")
        );
    }
    after.len()
}

macro_rules! reload_tests {
    ($($name:ident: $family:expr, $mode:expr, $seed:expr;)*) => {$(
        #[test]
        fn $name() {
            let keys = reload_equivalence($family, $mode, $seed, 2_000);
            assert!(keys >= 2, "the sequence should leave some keys");
        }
    )*};
}

reload_tests! {
    hashes_reload_always: Family::Hash, "always", 1;
    hashes_reload_everysec: Family::Hash, "everysec", 2;
    hashes_reload_no: Family::Hash, "no", 3;
    sets_reload_always: Family::Set, "always", 4;
    sets_reload_everysec: Family::Set, "everysec", 5;
    sets_reload_no: Family::Set, "no", 6;
    zsets_reload_always: Family::ZSet, "always", 7;
    zsets_reload_everysec: Family::ZSet, "everysec", 8;
    zsets_reload_no: Family::ZSet, "no", 9;
}

/// (rows written, changes committed) once everything so far is durably committed.
fn counters(c: &mut Conn) -> (i64, i64) {
    assert_eq!(c.cmd("SAVE"), Frame::Simple("OK".into()));
    (
        conn_info_int(c, "persistence", "respite_rows_written"),
        conn_info_int(c, "persistence", "respite_committed_changes"),
    )
}

/// Rows and changes one command costs.
fn cost(c: &mut Conn, line: &str) -> (i64, i64) {
    let (r0, c0) = counters(c);
    let reply = c.cmd(line);
    assert!(!matches!(reply, Frame::Error(_)), "{line}: {reply}");
    let (r1, c1) = counters(c);
    (r1 - r0, c1 - c0)
}

#[test]
fn writes_to_big_collections_cost_rows_not_values() {
    const N: usize = 10_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path(), "everysec");
    let mut c = connect(&server);
    // Committing 30 000 elements takes a while in a debug build.
    c.set_timeout(Duration::from_secs(120));
    // (A SAVE before any write waits for a commit that never comes: see the report.)
    assert_eq!(c.cmd("SET warmup 1"), Frame::Simple("OK".into()));
    let (r0, _) = counters(&mut c);
    let mut hset = vec![b"HSET".to_vec(), b"big".to_vec()];
    let mut sadd = vec![b"SADD".to_vec(), b"bigs".to_vec()];
    let mut zadd = vec![b"ZADD".to_vec(), b"bigz".to_vec()];
    for i in 0..N {
        let f = format!("field:{i}").into_bytes();
        hset.push(f.clone());
        hset.push(b"some value".to_vec());
        sadd.push(f.clone());
        zadd.push(i.to_string().into_bytes());
        zadd.push(f);
    }
    for cmd in [&hset, &sadd, &zadd] {
        assert_eq!(c.call(cmd).expect("create"), Frame::Int(N as i64));
    }
    let t = Instant::now();
    let (r1, _) = counters(&mut c);
    eprintln!("commit of the collections: {:?}", t.elapsed());
    assert!(
        r1 - r0 >= 3 * N as i64,
        "creating the collections writes every element ({} rows)",
        r1 - r0
    );

    for line in [
        "HSET big field:5 changed",
        "HSET big newfield v",
        "HINCRBY big counter 3",
        "HINCRBYFLOAT big counter 0.5",
        "HSETNX big another v",
        "HDEL big field:7 field:8",
        "SADD bigs m1 m2",
        "SREM bigs field:1",
        "SPOP bigs",
        "SPOP bigs 3",
        "SMOVE bigs bigs2 field:2",
        "SMOVE bigs2 bigs field:2",
        "ZADD bigz 5.5 field:3",
        "ZADD bigz 1 newmember",
        "ZINCRBY bigz 2 field:4",
        "ZREM bigz field:9",
        "ZPOPMIN bigz 2",
        "ZPOPMAX bigz",
        "ZREMRANGEBYRANK bigz 0 1",
        "ZREMRANGEBYSCORE bigz 100 102",
        "BZPOPMIN bigz 0",
    ] {
        let (rows, changes) = cost(&mut c, line);
        assert!(
            (1..=8).contains(&rows),
            "{line}: {rows} rows written (a whole value would be ~{N})"
        );
        assert!(
            (1..=2).contains(&changes),
            "{line}: {changes} changes committed"
        );
    }
    // A field overwritten in place survives a restart with the rest of the hash.
    let expected = dump(&mut c);
    drop(c);
    drop(server);
    let server = start(dir.path(), "everysec");
    let mut c = connect(&server);
    assert_eq!(c.cmd("HGET big field:5"), Frame::Bulk(b"changed".to_vec()));
    assert_eq!(c.cmd("HLEN big"), Frame::Int(N as i64 + 1));
    assert_eq!(dump(&mut c), expected);
}

/// More seeds than CI runs (`cargo test --test durable_collections -- --ignored`).
#[test]
#[ignore]
fn reload_many_seeds() {
    for seed in 100..115 {
        for family in [Family::Hash, Family::Set, Family::ZSet] {
            reload_equivalence(family, "no", seed, 2_000);
        }
    }
}
