//! The durable engine's reload equivalence (issue 6): a seeded random command sequence over
//! every type and the generic key commands (RENAME, MOVE, COPY, SWAPDB, FLUSHDB, EXPIRE,
//! MULTI/EXEC, EVAL) runs against `--engine redb`; the server is stopped and a new one
//! loads the file; the canonical dump of every database must be identical — for each
//! `appendfsync` mode. `RESPITE_SEED` / `RESPITE_STEPS` widen it.

mod common;

use common::{durable_server, Conn, Frame};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use respite::TestServer;

const DBS: usize = 3;
const KEYS: &[&str] = &["a", "b", "{t}c", "{t}d", "e\x00\u{ff}"];

fn arg(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn key(rng: &mut StdRng) -> String {
    KEYS[rng.gen_range(0..KEYS.len())].to_string()
}

fn val(rng: &mut StdRng) -> String {
    match rng.gen_range(0..4) {
        0 => rng.gen_range(-5..50).to_string(),
        1 => format!("v{}", rng.gen_range(0..20)),
        2 => String::new(),
        _ => "bin\x00\r\n".to_string(),
    }
}

/// One random command (as argument vectors; most write).
fn command(rng: &mut StdRng, step: usize) -> Vec<Vec<String>> {
    let k = key(rng);
    let k2 = key(rng);
    let v = val(rng);
    let n = rng.gen_range(0..6).to_string();
    let s = |v: &[&str]| vec![v.iter().map(|x| x.to_string()).collect::<Vec<String>>()];
    match rng.gen_range(0..40) {
        0 => s(&["SET", &k, &v]),
        1 => s(&["SET", &k, &v, "PX", "100000000"]),
        2 => s(&["INCRBY", &k, &n]),
        3 => s(&["APPEND", &k, &v]),
        4 => s(&["SETRANGE", &k, &n, &v]),
        5 => s(&["DEL", &k]),
        6 => s(&["EXPIRE", &k, "1000000"]),
        7 => s(&["PERSIST", &k]),
        8 => s(&["RENAME", &k, &k2]),
        9 => s(&["COPY", &k, &k2, "REPLACE"]),
        10 => s(&["MOVE", &k, &rng.gen_range(0..DBS).to_string()]),
        11 => s(&["SELECT", &rng.gen_range(0..DBS).to_string()]),
        12 => s(&["HSET", &k, &format!("f{n}"), &v]),
        13 => s(&["HDEL", &k, &format!("f{n}")]),
        14 => s(&["HINCRBY", &k, &format!("f{n}"), "3"]),
        15 => s(&["RPUSH", &k, &v, "x"]),
        16 => s(&["LPUSH", &k, &v]),
        17 => s(&["LPOP", &k]),
        18 => s(&["RPOP", &k, "2"]),
        19 => s(&["LSET", &k, "0", &v]),
        20 => s(&["LREM", &k, "0", "x"]),
        21 => s(&["SADD", &k, &v, &n]),
        22 => s(&["SREM", &k, &n]),
        23 => s(&["SMOVE", &k, &k2, &n]),
        24 => s(&["ZADD", &k, &n, &format!("m{}", rng.gen_range(0..8))]),
        25 => s(&["ZINCRBY", &k, "1.5", &format!("m{}", rng.gen_range(0..8))]),
        26 => s(&["ZREM", &k, &format!("m{}", rng.gen_range(0..8))]),
        27 => s(&["ZPOPMIN", &k]),
        28 => s(&["XADD", &k, &format!("{}-1", step + 1), "f", &v]),
        29 => s(&["XADD", &k, "MAXLEN", "3", &format!("{}-2", step + 1), "g", &v]),
        30 => s(&["XDEL", &k, &format!("{}-1", rng.gen_range(0..step + 2))]),
        31 => s(&["XGROUP", "CREATE", &k, "g", "0", "MKSTREAM"]),
        32 => s(&[
            "XREADGROUP",
            "GROUP",
            "g",
            &format!("c{n}"),
            "COUNT",
            "2",
            "STREAMS",
            &k,
            ">",
        ]),
        33 => s(&["XACK", &k, "g", &format!("{}-1", rng.gen_range(0..step + 2))]),
        34 => {
            if rng.gen_range(0..4) == 0 {
                s(&["SWAPDB", "0", &rng.gen_range(1..DBS).to_string()])
            } else {
                s(&["SUNIONSTORE", &k, &k, &k2])
            }
        }
        35 => {
            if rng.gen_range(0..10) == 0 {
                s(&["FLUSHDB"])
            } else {
                s(&["HSETNX", &k, "only", &v])
            }
        }
        36 => vec![
            vec!["MULTI".into()],
            vec!["INCR".into(), k.clone()],
            vec!["RPUSH".into(), k2.clone(), v.clone()],
            vec!["EXEC".into()],
        ],
        37 => s(&[
            "EVAL",
            "redis.call('SET', KEYS[1], ARGV[1]); return redis.pcall('HSET', KEYS[2], 'f', ARGV[1])",
            "2",
            &k,
            &k2,
            &v,
        ]),
        38 => s(&["PEXPIREAT", &k, "1"]),
        _ => s(&["GETDEL", &k]),
    }
}

fn frames(c: &mut Conn, args: &[&str]) -> Frame {
    let a: Vec<Vec<u8>> = args.iter().map(|s| arg(s)).collect();
    c.call(&a).expect("reply")
}

fn strings(f: Frame) -> Vec<String> {
    match f {
        Frame::Array(v) | Frame::Set(v) => v.into_iter().map(|x| x.to_string()).collect(),
        Frame::Map(m) => m
            .into_iter()
            .flat_map(|(a, b)| [a.to_string(), b.to_string()])
            .collect(),
        other => vec![other.to_string()],
    }
}

/// Every key of every db with its type, content and absolute deadline.
fn dump(port: u16) -> Vec<String> {
    let mut c = Conn::connect(port).expect("connect");
    let mut out = Vec::new();
    for db in 0..DBS {
        frames(&mut c, &["SELECT", &db.to_string()]);
        // Keys are read back as raw bulk strings to keep binary names exact.
        let list = {
            let a = vec![arg("KEYS"), arg("*")];
            c.call(&a).expect("keys")
        };
        let mut names: Vec<Vec<u8>> = match list {
            Frame::Array(v) | Frame::Set(v) => v
                .into_iter()
                .filter_map(|f| match f {
                    Frame::Bulk(b) => Some(b),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        names.sort();
        for name in names {
            let mut q = |cmd: &[&[u8]]| {
                let a: Vec<Vec<u8>> = cmd.iter().map(|s| s.to_vec()).collect();
                c.call(&a).expect("reply")
            };
            let t = q(&[b"TYPE", &name]).to_string();
            let body = match t.as_str() {
                "+string" => q(&[b"GET", &name]).to_string(),
                "+hash" => {
                    let mut v = strings(q(&[b"HGETALL", &name]));
                    let mut pairs: Vec<String> =
                        v.chunks(2).map(|p| format!("{}={}", p[0], p[1])).collect();
                    pairs.sort();
                    v = pairs;
                    v.join(",")
                }
                "+list" => strings(q(&[b"LRANGE", &name, b"0", b"-1"])).join(","),
                "+set" => {
                    let mut v = strings(q(&[b"SMEMBERS", &name]));
                    v.sort();
                    v.join(",")
                }
                "+zset" => strings(q(&[b"ZRANGE", &name, b"0", b"-1", b"WITHSCORES"])).join(","),
                "+stream" => {
                    let entries = q(&[b"XRANGE", &name, b"-", b"+"]).to_string();
                    let groups = q(&[b"XINFO", b"GROUPS", &name]).to_string();
                    let pending = q(&[b"XPENDING", &name, b"g"]).to_string();
                    let last = q(&[b"XINFO", b"STREAM", &name]).to_string();
                    // XINFO STREAM's radix-tree sizes are rebuilt on load: keep the rest.
                    let last: String = last
                        .split("radix-tree")
                        .next()
                        .unwrap_or_default()
                        .to_string();
                    format!("{entries} {groups} {pending} {last}")
                }
                other => other.to_string(),
            };
            let at = q(&[b"PEXPIRETIME", &name]).to_string();
            out.push(format!(
                "db{db} {} {t} {body} exp={at}",
                String::from_utf8_lossy(&name)
            ));
        }
    }
    out
}

fn run(mode: &str, seed: u64, steps: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let before = {
        let server = durable_server(dir.path(), mode);
        let mut c = Conn::connect(server.port()).expect("connect");
        let mut rng = StdRng::seed_from_u64(seed);
        for step in 0..steps {
            for cmd in command(&mut rng, step) {
                let a: Vec<Vec<u8>> = cmd.iter().map(|s| arg(s)).collect();
                c.call(&a).expect("reply");
            }
        }
        dump(server.port())
    };
    let server = durable_server(dir.path(), mode);
    let after = dump(server.port());
    if before != after {
        let diff: Vec<String> = before
            .iter()
            .zip(after.iter())
            .filter(|(a, b)| a != b)
            .take(5)
            .map(|(a, b)| format!("before: {a}\n after: {b}"))
            .collect();
        panic!(
            "reload differs (mode {mode}, seed {seed}, {} vs {} keys):\n{}",
            before.len(),
            after.len(),
            diff.join("\n")
        );
    }
    assert!(!before.is_empty(), "the sequence left no keys to compare");
}

fn seeds() -> Vec<u64> {
    match std::env::var("RESPITE_SEED") {
        Ok(s) => vec![s.parse().expect("RESPITE_SEED")],
        Err(_) => vec![1, 2, 3],
    }
}

fn steps() -> usize {
    std::env::var("RESPITE_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600)
}

#[test]
fn reload_equivalence_always() {
    for seed in seeds() {
        run("always", seed, steps());
    }
}

#[test]
fn reload_equivalence_everysec() {
    for seed in seeds() {
        run("everysec", seed, steps());
    }
}

#[test]
fn reload_equivalence_no() {
    for seed in seeds() {
        run("no", seed, steps());
    }
}

/// DEBUG RELOAD rebuilds memory from the store: the dump is unchanged, and the server keeps
/// journaling afterwards (a later write survives a restart).
#[test]
fn debug_reload_rebuilds_from_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = TestServer::builder()
        .redb(dir.path())
        .param("enable-debug-command", "yes")
        .start()
        .expect("start");
    let mut c = Conn::connect(server.port()).expect("connect");
    let mut rng = StdRng::seed_from_u64(11);
    for step in 0..300 {
        for cmd in command(&mut rng, step) {
            let a: Vec<Vec<u8>> = cmd.iter().map(|s| arg(s)).collect();
            c.call(&a).expect("reply");
        }
    }
    frames(&mut c, &["SELECT", "0"]);
    let before = dump(server.port());
    assert_eq!(
        frames(&mut c, &["DEBUG", "RELOAD"]),
        Frame::Simple("OK".into())
    );
    assert_eq!(dump(server.port()), before);
    frames(&mut c, &["SET", "after-reload", "1"]);
    let mut before = dump(server.port());
    drop(c);
    drop(server);
    let server = TestServer::builder()
        .redb(dir.path())
        .start()
        .expect("restart");
    before.sort();
    let mut after = dump(server.port());
    after.sort();
    assert_eq!(after, before);
}

/// Under an LRU or LFU policy, keys' access data survive a clean restart and DEBUG RELOAD
/// of the durable engine, as Redis's RDB keeps `IDLE` and `FREQ` (fresh keys would show
/// idle 0 and frequency 5); under other policies nothing is kept, as Redis saves neither.
#[test]
fn lru_and_lfu_data_survive_a_restart() {
    let int = |f: Frame| match f {
        Frame::Int(n) => n,
        other => panic!("expected an integer, got {other:?}"),
    };
    let start = |dir: &std::path::Path, policy: &str| {
        TestServer::builder()
            .redb(dir)
            .manual_clock()
            .param("maxmemory-policy", policy)
            .param("lfu-log-factor", "0")
            .param("enable-debug-command", "yes")
            .start()
            .expect("start")
    };

    // LFU: with lfu-log-factor 0 every access adds one to the counter (new keys start at 5).
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path(), "allkeys-lfu");
    let mut c = Conn::connect(server.port()).expect("connect");
    frames(&mut c, &["SET", "hot", "1"]);
    frames(&mut c, &["SET", "cold", "1"]);
    for _ in 0..40 {
        frames(&mut c, &["GET", "hot"]);
    }
    assert_eq!(int(frames(&mut c, &["OBJECT", "FREQ", "hot"])), 45);
    drop(c);
    server.restart(true);
    let mut c = Conn::connect(server.port()).expect("reconnect");
    assert_eq!(int(frames(&mut c, &["OBJECT", "FREQ", "hot"])), 45);
    assert_eq!(int(frames(&mut c, &["OBJECT", "FREQ", "cold"])), 5);
    frames(&mut c, &["GET", "cold"]);
    assert_eq!(
        frames(&mut c, &["DEBUG", "RELOAD"]),
        Frame::Simple("OK".into())
    );
    assert_eq!(int(frames(&mut c, &["OBJECT", "FREQ", "hot"])), 45);
    assert_eq!(int(frames(&mut c, &["OBJECT", "FREQ", "cold"])), 6);
    drop(c);
    drop(server);

    // LRU, then a policy that keeps nothing.
    for (policy, kept) in [("allkeys-lru", true), ("noeviction", false)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = start(dir.path(), policy);
        let mut c = Conn::connect(server.port()).expect("connect");
        frames(&mut c, &["SET", "old", "1"]);
        server.advance(std::time::Duration::from_secs(100));
        frames(&mut c, &["SET", "new", "1"]);
        assert_eq!(int(frames(&mut c, &["OBJECT", "IDLETIME", "old"])), 100);
        drop(c);
        server.restart(true);
        let mut c = Conn::connect(server.port()).expect("reconnect");
        let idle = int(frames(&mut c, &["OBJECT", "IDLETIME", "old"]));
        assert_eq!(idle, if kept { 100 } else { 0 }, "{policy}");
        assert_eq!(
            int(frames(&mut c, &["OBJECT", "IDLETIME", "new"])),
            0,
            "{policy}"
        );
    }
}

/// SHUTDOWN saves keys' LRU/LFU data with the keyspace, as Redis's shutdown save does;
/// SHUTDOWN NOSAVE skips that save (the journal of every acknowledged write is still
/// committed), so the counters restart from a fresh key's.
#[test]
fn shutdown_nosave_skips_the_access_data_save() {
    use common::ServerProcess;
    for (how, freq) in [("SHUTDOWN", 45), ("SHUTDOWN NOSAVE", 5)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let conf = dir.path().join("respite.conf");
        std::fs::write(&conf, "maxmemory-policy allkeys-lfu\nlfu-log-factor 0\n").unwrap();
        let d = dir.path().to_str().expect("utf-8 path");
        let args = ["--engine", "redb", "--dir", d, conf.to_str().unwrap()];
        let mut p = ServerProcess::respite(&args);
        let mut c = p.conn();
        c.cmd("SET hot 1");
        for _ in 0..40 {
            c.cmd("GET hot");
        }
        let words: Vec<Vec<u8>> = how.split(' ').map(|w| w.as_bytes().to_vec()).collect();
        let _ = c.call(&words);
        assert!(
            p.exited(std::time::Duration::from_secs(10)).is_some(),
            "{how}: the server exits"
        );
        drop(c);
        let p = ServerProcess::respite(&args);
        let mut c = p.conn();
        assert_eq!(c.cmd("GET hot"), Frame::Bulk(b"1".to_vec()), "{how}");
        assert_eq!(c.cmd("OBJECT FREQ hot"), Frame::Int(freq + 1), "{how}");
    }
}
