//! Hash-field deadlines (HEXPIRE, HSETEX, HGETEX, ...) on the durable engine: they are
//! journaled element by element (`HashTtl`, and `HashPut` / `HashDel` for the values and the
//! fields the deadlines removed) and must survive a restart exactly, as must what the
//! active and lazy expiry of fields removed.
//!
//! - A restart keeps every field's deadline, set by each command that sets one, across
//!   both hash encodings, RENAME, COPY and RESTORE; fields then expire after the restart.
//! - Reload equivalence: a seeded random sequence of hash and hash-field-expiration
//!   commands (lazy and active expiry on a manual clock, MULTI/EXEC) gives the same
//!   canonical dump, deadlines included, before and after a restart, in both fsync modes.

mod common;

use common::{Conn, Frame, Rng};
use respite::TestServer;
use std::path::Path;

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

fn text(f: &Frame) -> String {
    match f {
        Frame::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        Frame::Simple(s) => s.clone(),
        other => format!("{other}"),
    }
}

/// Canonical dump: per key (sorted), its type and deadline; for a hash, its live fields
/// (sorted) with their values and deadlines (HPEXPIRETIME).
fn dump(c: &mut Conn) -> Vec<String> {
    let Frame::Array(keys) = c.cmd("KEYS *") else {
        panic!("KEYS reply");
    };
    let mut keys: Vec<String> = keys.iter().map(text).collect();
    keys.sort();
    let mut out = Vec::new();
    for k in keys {
        let ty = text(&call(c, &["TYPE".into(), k.clone()]));
        let at = call(c, &["PEXPIRETIME".into(), k.clone()]);
        let mut line = format!("{k:?} {ty} exp={at}");
        if ty == "hash" {
            let Frame::Array(flat) = call(c, &["HGETALL".into(), k.clone()]) else {
                panic!("HGETALL {k}");
            };
            let mut fields: Vec<(String, String)> =
                flat.chunks(2).map(|p| (text(&p[0]), text(&p[1]))).collect();
            fields.sort();
            for (f, v) in fields {
                let t = call(
                    c,
                    &[
                        "HPEXPIRETIME".into(),
                        k.clone(),
                        "FIELDS".into(),
                        "1".into(),
                        f.clone(),
                    ],
                );
                line.push_str(&format!(" {f:?}={v:?}@{t}"));
            }
        }
        out.push(line);
    }
    out
}

fn ok(c: &mut Conn, cmd: &str) {
    let r = c.cmd(cmd);
    assert!(!matches!(r, Frame::Error(_)), "{cmd}: {r}");
}

#[test]
fn restart_keeps_field_deadlines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path(), "everysec");
    let mut c = connect(&server);
    let now = server.now_ms();
    for (h, big) in [("small", false), ("big", true)] {
        let seed = if big {
            (0..600)
                .map(|i| format!("x{i} {i}"))
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            "x0 0".to_string()
        };
        ok(&mut c, &format!("HSET {h} a 1 b 2 c 3 d 4 e 5 n 10 {seed}"));
        ok(&mut c, &format!("HEXPIRE {h} 100 FIELDS 1 a"));
        ok(
            &mut c,
            &format!("HPEXPIREAT {h} {} FIELDS 1 b", now + 200_000),
        );
        ok(&mut c, &format!("HSETEX {h} EX 300 FIELDS 1 f 6"));
        ok(&mut c, &format!("HGETEX {h} PX 400000 FIELDS 1 c"));
        // Kept by HINCRBY, cleared by HSET and HPERSIST, gone with HDEL and HGETDEL.
        ok(&mut c, &format!("HPEXPIRE {h} 500000 FIELDS 1 n"));
        ok(&mut c, &format!("HINCRBY {h} n 5"));
        ok(&mut c, &format!("HEXPIRE {h} 600 FIELDS 2 d e"));
        ok(&mut c, &format!("HSET {h} d 44"));
        ok(&mut c, &format!("HPERSIST {h} FIELDS 1 e"));
        ok(&mut c, &format!("HSETEX {h} PX 700000 FIELDS 1 g 7"));
        ok(&mut c, &format!("HSETEX {h} KEEPTTL FIELDS 1 g 77"));
        ok(&mut c, &format!("HSETEX {h} EX 800 FIELDS 1 gone 0"));
        ok(&mut c, &format!("HDEL {h} gone"));
        ok(&mut c, &format!("HSETEX {h} EX 800 FIELDS 1 gone2 0"));
        ok(&mut c, &format!("HGETDEL {h} FIELDS 1 gone2"));
        // A deadline in the past deletes the field there and then.
        ok(&mut c, &format!("HPEXPIREAT {h} 1 FIELDS 1 x0"));
    }
    ok(&mut c, "COPY small small_copy");
    ok(&mut c, "HSET r f v g w");
    ok(&mut c, "HPEXPIRE r 900000 FIELDS 1 f");
    ok(&mut c, "RENAME r renamed");
    let Frame::Bulk(payload) = c.cmd("DUMP big") else {
        panic!("DUMP");
    };
    c.call(&[
        b"RESTORE".to_vec(),
        b"restored".to_vec(),
        b"0".to_vec(),
        payload,
    ])
    .expect("RESTORE");
    assert_eq!(
        c.cmd("OBJECT ENCODING small"),
        Frame::Bulk(b"listpackex".to_vec())
    );
    let before = dump(&mut c);
    assert!(
        before
            .iter()
            .any(|l| l.contains(&format!("\"n\"=\"15\"@*[:{}]", now + 500_000))),
        "HINCRBY kept the deadline: {before:?}"
    );
    drop(c);
    server.restart(true);
    let mut c = connect(&server);
    let after = dump(&mut c);
    assert_eq!(
        before, after,
        "the keyspace, deadlines included, survives a restart"
    );
    assert_eq!(
        c.cmd("OBJECT ENCODING big"),
        Frame::Bulk(b"hashtable".to_vec())
    );
    // The reloaded deadlines are live: the active cycle removes the due fields...
    server.advance_ms(350_000);
    assert_eq!(
        c.cmd("HTTL small FIELDS 4 a b f c"),
        Frame::Array(vec![
            Frame::Int(-2),
            Frame::Int(-2),
            Frame::Int(-2),
            Frame::Int(50)
        ])
    );
    assert_eq!(
        c.cmd("HLEN small"),
        Frame::Int(5),
        "removed, not just hidden"
    );
    // ... and what it removed stays removed through another restart.
    drop(c);
    server.restart(true);
    let mut c = connect(&server);
    assert_eq!(c.cmd("HLEN small"), Frame::Int(5));
    assert_eq!(c.cmd("HEXISTS small a"), Frame::Int(0));
    // Lazy expiry on the reloaded hash, journaled too.
    server.clock().advance_ms(10_000_000);
    assert_eq!(c.cmd("HGET renamed f"), Frame::NullBulk);
    assert_eq!(c.cmd("HLEN renamed"), Frame::Int(1));
    drop(c);
    server.restart(true);
    let mut c = connect(&server);
    assert_eq!(c.cmd("HLEN renamed"), Frame::Int(1));
    assert_eq!(c.cmd("HGET renamed g"), Frame::Bulk(b"w".to_vec()));
}

const KEYS: &[&str] = &["h0", "h1", "h2"];
const FIELDS: &[&str] = &["f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "a b"];
const VALUES: &[&str] = &["0", "1", "-7", "x", "", "hello world", "3.5"];

/// One random hash or hash-field-expiration command.
fn command(rng: &mut Rng) -> Vec<String> {
    let s = |x: &str| x.to_string();
    let key = s(rng.pick(KEYS));
    let fields = |rng: &mut Rng| -> Vec<String> {
        let n = rng.below(3) + 1;
        let mut v = vec![s("FIELDS"), n.to_string()];
        for _ in 0..n {
            v.push(s(rng.pick(FIELDS)));
        }
        v
    };
    let ttl = |rng: &mut Rng| (rng.below(30_000) + 1).to_string();
    let mut a = match rng.below(18) {
        0 | 1 => {
            let mut a = vec![s("HSET"), key];
            for _ in 0..rng.below(3) + 1 {
                a.push(s(rng.pick(FIELDS)));
                a.push(if rng.chance(5) {
                    "L".repeat(80)
                } else {
                    s(rng.pick(VALUES))
                });
            }
            a
        }
        2 => vec![s("HDEL"), key, s(rng.pick(FIELDS))],
        3 => vec![s("HINCRBY"), key, s(rng.pick(FIELDS)), s("3")],
        4 => vec![s("HSETNX"), key, s(rng.pick(FIELDS)), s("nx")],
        5 | 6 => {
            let mut a = vec![s(rng.pick(&["HPEXPIRE", "HEXPIRE"])), key, ttl(rng)];
            if rng.chance(40) {
                a.push(s(rng.pick(&["NX", "XX", "GT", "LT"])));
            }
            a
        }
        7 => vec![s("HPEXPIREAT"), key, s(rng.pick(&["1", "0"]))],
        8 => vec![s("HPERSIST"), key],
        9 | 10 => {
            let mut a = vec![s("HSETEX"), key];
            if rng.chance(30) {
                a.push(s(rng.pick(&["FNX", "FXX"])));
            }
            match rng.below(4) {
                0 => {}
                1 => a.push(s("KEEPTTL")),
                _ => {
                    a.push(s("PX"));
                    a.push(ttl(rng));
                }
            }
            let n = rng.below(2) + 1;
            a.push(s("FIELDS"));
            a.push(n.to_string());
            for _ in 0..n {
                a.push(s(rng.pick(FIELDS)));
                a.push(s(rng.pick(VALUES)));
            }
            return a;
        }
        11 => {
            let mut a = vec![s("HGETEX"), key];
            match rng.below(3) {
                0 => {}
                1 => a.push(s("PERSIST")),
                _ => {
                    a.push(s("PX"));
                    a.push(ttl(rng));
                }
            }
            a
        }
        12 => vec![s("HGETDEL"), key],
        13 => vec![s("HGET"), key, s(rng.pick(FIELDS))],
        14 => vec![s("HRANDFIELD"), key, s("3")],
        15 => vec![s("RENAME"), key, s(rng.pick(KEYS))],
        16 => vec![s("PEXPIRE"), key, ttl(rng)],
        _ => vec![s("HMGET"), key, s(rng.pick(FIELDS)), s(rng.pick(FIELDS))],
    };
    if matches!(
        a[0].as_str(),
        "HPEXPIRE" | "HEXPIRE" | "HPEXPIREAT" | "HPERSIST" | "HGETEX" | "HGETDEL"
    ) {
        a.extend(fields(rng));
    }
    a
}

/// Returns how many live fields with a deadline the dump held.
fn reload_equivalence(mode: &str, seed: u64, steps: usize) -> usize {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path(), mode);
    let mut c = connect(&server);
    ok(&mut c, "CONFIG SET hash-max-listpack-entries 5");
    let mut rng = Rng::seeded(seed);
    for step in 0..steps {
        match rng.below(100) {
            // Time passes: with the active cycle, or lazy expiry only.
            0..=3 => server.advance_ms(rng.below(20_000) as u64),
            4..=6 => server.clock().advance_ms(rng.below(20_000) as u64),
            7..=9 => {
                assert_eq!(c.cmd("MULTI"), Frame::Simple("OK".into()));
                let n = rng.below(3) + 2;
                for _ in 0..n {
                    let args = command(&mut rng);
                    call(&mut c, &args);
                }
                let r = c.cmd("EXEC");
                assert!(matches!(r, Frame::Array(_)), "EXEC {r}");
            }
            _ => {
                let args = command(&mut rng);
                let r = call(&mut c, &args);
                if let Frame::Error(e) = &r {
                    assert!(
                        ["WRONGTYPE", "not an integer", "no such key"]
                            .iter()
                            .any(|x| e.contains(x)),
                        "step {step}: {args:?} -> {e}"
                    );
                }
            }
        }
    }
    // Whatever is due goes now: a hash whose fields all expired but were not yet removed
    // would otherwise be listed or not depending on whether the timer swept it.
    server.advance_ms(0);
    let before = dump(&mut c);
    assert!(!before.is_empty(), "the sequence left keys");
    drop(c);
    server.restart(true);
    let mut c = connect(&server);
    let after = dump(&mut c);
    assert_eq!(before, after, "seed {seed}, {mode}");
    before
        .iter()
        .map(|l| l.matches("@*[:").count())
        .sum::<usize>()
        - before
            .iter()
            .map(|l| l.matches("@*[:-1]").count())
            .sum::<usize>()
}

#[test]
fn random_sequences_reload_identically() {
    let mut timed = 0;
    for seed in 1..=4 {
        timed += reload_equivalence("everysec", seed, 400);
    }
    timed += reload_equivalence("always", 99, 300);
    assert!(timed > 0, "the dumps held fields with deadlines");
}
