//! DUMP / RESTORE against a real redis-server 7.0 (RDB 10):
//! - every type and encoding crosses both ways (redis DUMP → respite RESTORE, respite DUMP →
//!   redis RESTORE) and reads back the same, with the same `OBJECT ENCODING`; where Redis's
//!   bytes are deterministic respite's DUMP equals redis-server's byte for byte;
//! - load-time conversions follow the configured thresholds on both servers;
//! - a seeded random round trip (respite DUMP → respite RESTORE) over many values;
//! - fuzzing: random bytes, truncations and bit flips with a valid CRC only ever give
//!   `Bad data format` (or OK), never a panic or a hang;
//! - a RESTOREd key survives a restart of the durable engine; the `restore` event fires.

mod common;

use common::{durable_server, Conn, Frame, Rng, ServerProcess};
use respite::types::rdb::{self, value};
use respite::TestServer;

/// Each thread's live heap bytes and their peak, so the fuzz test can bound what one
/// RESTORE allocates: a bound on work that, unlike a time limit, cannot flake.
mod heap {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    pub struct Counting;

    thread_local! {
        // `const` and `Copy`: no lazy initialisation, so no allocation from inside alloc.
        static LIVE: Cell<usize> = const { Cell::new(0) };
        static PEAK: Cell<usize> = const { Cell::new(0) };
    }

    fn grew(n: usize) {
        let _ = LIVE.try_with(|l| {
            let v = l.get() + n;
            l.set(v);
            let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
        });
    }

    fn shrank(n: usize) {
        // Memory allocated on another thread may be freed here: never below zero.
        let _ = LIVE.try_with(|l| l.set(l.get().saturating_sub(n)));
    }

    // SAFETY: every call is forwarded unchanged to System, which upholds GlobalAlloc.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            let p = unsafe { System.alloc(l) }; // SAFETY: our caller's contract, passed on.
            if !p.is_null() {
                grew(l.size());
            }
            p
        }

        unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
            let p = unsafe { System.alloc_zeroed(l) }; // SAFETY: as for alloc.
            if !p.is_null() {
                grew(l.size());
            }
            p
        }

        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            unsafe { System.dealloc(p, l) }; // SAFETY: p came from System with layout l.
            shrank(l.size());
        }

        unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
            let q = unsafe { System.realloc(p, l, new) }; // SAFETY: p came from System.
            if !q.is_null() {
                grew(new);
                shrank(l.size());
            }
            q
        }
    }

    /// `f`'s result and the most heap this thread had live during `f` beyond what was live
    /// before it (what `f` returns counts: it is still live at the end).
    pub fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
        let base = LIVE.with(Cell::get);
        PEAK.with(|p| p.set(base));
        let r = f();
        (r, PEAK.with(Cell::get).saturating_sub(base))
    }
}

#[global_allocator]
static HEAP: heap::Counting = heap::Counting;

type Cmd = Vec<Vec<u8>>;

fn cmd(parts: &[&[u8]]) -> Cmd {
    parts.iter().map(|p| p.to_vec()).collect()
}

fn s(parts: &[&str]) -> Cmd {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

fn call(c: &mut Conn, args: &[&[u8]]) -> Frame {
    c.call(&cmd(args)).expect("reply")
}

fn bulk(f: Frame) -> Vec<u8> {
    match f {
        Frame::Bulk(b) => b,
        other => panic!("expected a bulk reply, got {other:?}"),
    }
}

/// The value of `key` in a comparable form: unordered replies sorted.
fn read_back(c: &mut Conn, key: &[u8]) -> Vec<Vec<u8>> {
    let ty = match call(c, &[b"TYPE", key]) {
        Frame::Simple(t) => t,
        other => panic!("TYPE: {other:?}"),
    };
    let (args, sort): (Vec<&[u8]>, bool) = match ty.as_str() {
        "string" => (vec![b"GET", key], false),
        "list" => (vec![b"LRANGE", key, b"0", b"-1"], false),
        "hash" => (vec![b"HGETALL", key], true),
        "set" => (vec![b"SMEMBERS", key], true),
        "zset" => (vec![b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"], false),
        "stream" => (vec![b"XRANGE", key, b"-", b"+"], false),
        "none" => return vec![b"<none>".to_vec()],
        t => panic!("type {t}"),
    };
    let mut out = vec![ty.into_bytes()];
    let frame = call(c, &args);
    let mut items: Vec<Vec<u8>> = match frame {
        Frame::Bulk(b) => vec![b],
        Frame::Array(a) if sort && ty_is_hash(&args) => a
            .chunks(2)
            .map(|p| {
                format!(
                    "{}={}",
                    p[0],
                    p.get(1).map(|f| f.to_string()).unwrap_or_default()
                )
            })
            .map(String::into_bytes)
            .collect(),
        Frame::Array(a) => a.iter().map(|f| f.to_string().into_bytes()).collect(),
        other => panic!("read back: {other:?}"),
    };
    if sort {
        items.sort();
    }
    out.extend(items);
    out
}

fn ty_is_hash(args: &[&[u8]]) -> bool {
    args[0] == b"HGETALL"
}

fn encoding(c: &mut Conn, key: &[u8]) -> Frame {
    call(c, &[b"OBJECT", b"ENCODING", key])
}

struct Servers {
    redis: Conn,
    ours: Conn,
    _redis: ServerProcess,
    _ours: TestServer,
}

fn servers() -> Servers {
    let rs = ServerProcess::redis();
    let ts = TestServer::builder().start().expect("respite starts");
    Servers {
        redis: Conn::connect(rs.port).unwrap(),
        ours: Conn::connect(ts.port()).unwrap(),
        _redis: rs,
        _ours: ts,
    }
}

struct Scenario {
    name: &'static str,
    setup: Vec<Cmd>,
    /// Redis's DUMP bytes are deterministic and respite must produce them exactly.
    exact: bool,
}

fn push_all(verb: &str, key: &str, items: impl IntoIterator<Item = String>) -> Cmd {
    let mut c = s(&[verb, key]);
    c.extend(items.into_iter().map(String::into_bytes));
    c
}

fn scenarios() -> Vec<Scenario> {
    let sc = |name, setup, exact| Scenario { name, setup, exact };
    let binary: Vec<u8> = (0..300u32).map(|i| (i * 7 % 256) as u8).collect();
    vec![
        sc("embstr", vec![s(&["SET", "k", "hello"])], true),
        sc("empty string", vec![s(&["SET", "k", ""])], true),
        sc("int", vec![s(&["SET", "k", "-1234"])], true),
        sc("int64", vec![s(&["SET", "k", "12345678901"])], true),
        sc(
            "raw",
            vec![s(&["SET", "k", &"xyz0123456789".repeat(4)])],
            true,
        ),
        sc(
            "lzf",
            vec![s(&["SET", "k", &"hello world ".repeat(50)])],
            true,
        ),
        sc("binary", vec![cmd(&[b"SET", b"k", &binary])], true),
        sc(
            "list small",
            vec![s(&["RPUSH", "k", "a", "1", "-5", "99999999999", "x y"])],
            true,
        ),
        sc(
            "list long elements",
            vec![push_all(
                "RPUSH",
                "k",
                (0..30).map(|i| format!("{i}{}", "x".repeat(1500))),
            )],
            true,
        ),
        sc(
            "list ints",
            vec![push_all(
                "RPUSH",
                "k",
                (0..3000).map(|i| (i * 37).to_string()),
            )],
            true,
        ),
        // The first node's boundary differs between 7.0 and 7.2 near 8 KB: content only.
        sc(
            "list 2000",
            vec![push_all(
                "RPUSH",
                "k",
                (0..2000).map(|i| format!("element-{i}")),
            )],
            false,
        ),
        sc(
            "hash listpack",
            vec![s(&["HSET", "k", "a", "1", "b", "hello", "c", "-70000"])],
            true,
        ),
        sc(
            "hash long value",
            vec![s(&["HSET", "k", "a", "1", "b", &"v".repeat(100)])],
            false,
        ),
        sc(
            "hash many",
            vec![push_all(
                "HSET",
                "k",
                (0..600).flat_map(|i| [format!("f{i}"), format!("v{i}")]),
            )],
            false,
        ),
        sc(
            "intset 16",
            vec![s(&["SADD", "k", "3", "1", "2", "-7"])],
            true,
        ),
        sc(
            "intset 32",
            vec![s(&["SADD", "k", "1", "70000", "-70000"])],
            true,
        ),
        sc(
            "intset 64",
            vec![s(&["SADD", "k", "1", "9999999999", "-5"])],
            true,
        ),
        sc(
            "set ints many",
            vec![push_all("SADD", "k", (0..600).map(|i| i.to_string()))],
            false,
        ),
        sc("set strings", vec![s(&["SADD", "k", "a", "b", "c"])], false),
        sc(
            "set strings many",
            vec![push_all("SADD", "k", (0..300).map(|i| format!("m{i}")))],
            false,
        ),
        sc(
            "zset listpack",
            vec![s(&[
                "ZADD", "k", "1", "a", "2.5", "b", "-3", "c", "inf", "d",
            ])],
            true,
        ),
        sc(
            "zset fractions",
            vec![s(&["ZADD", "k", "0.1", "a", "1e-7", "b", "3.3", "c"])],
            false,
        ),
        sc(
            "zset skiplist",
            vec![s(&["ZADD", "k", "1", "a", "2", &"m".repeat(70)])],
            true,
        ),
        sc(
            "zset skiplist many",
            vec![push_all(
                "ZADD",
                "k",
                (0..300).flat_map(|i| [(i % 17).to_string(), format!("m{i}")]),
            )],
            true,
        ),
    ]
}

/// Every scenario crosses both ways and reads back the same on each server.
#[test]
fn dumps_cross_between_redis_and_respite() {
    let mut sv = servers();
    let mut failures = Vec::new();
    for sc in scenarios() {
        for c in [&mut sv.redis, &mut sv.ours] {
            call(c, &[b"FLUSHALL"]);
            for step in &sc.setup {
                let r = c.call(step).unwrap();
                assert!(!matches!(r, Frame::Error(_)), "{}: {r:?}", sc.name);
            }
        }
        let from_redis = bulk(call(&mut sv.redis, &[b"DUMP", b"k"]));
        let from_ours = bulk(call(&mut sv.ours, &[b"DUMP", b"k"]));
        if sc.exact && from_redis != from_ours {
            failures.push(format!("{}: DUMP bytes differ", sc.name));
        }
        let ok = Frame::Simple("OK".into());
        let r = call(&mut sv.ours, &[b"RESTORE", b"r", b"0", &from_redis]);
        assert_eq!(r, ok, "{}: respite RESTORE of redis's DUMP", sc.name);
        let r = call(&mut sv.redis, &[b"RESTORE", b"r", b"0", &from_ours]);
        assert_eq!(r, ok, "{}: redis RESTORE of respite's DUMP", sc.name);
        for (side, c) in [("respite", &mut sv.ours), ("redis", &mut sv.redis)] {
            if read_back(c, b"k") != read_back(c, b"r") {
                failures.push(format!("{}: {side} reads a different value back", sc.name));
            }
            if encoding(c, b"k") != encoding(c, b"r") {
                failures.push(format!("{}: {side} encoding changed", sc.name));
            }
        }
        if sc.exact {
            // Restoring Redis's bytes and dumping them again gives Redis's bytes.
            let again = bulk(call(&mut sv.ours, &[b"DUMP", b"r"]));
            if again != from_redis {
                failures.push(format!("{}: DUMP after RESTORE differs", sc.name));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A restored value takes the encoding the current thresholds give it, on both servers.
#[test]
fn load_time_conversions_follow_config() {
    let mut sv = servers();
    let cases: Vec<(Vec<Cmd>, Cmd)> = vec![
        (
            vec![s(&["HSET", "k", "a", "1", "b", "2", "c", "3"])],
            s(&["CONFIG", "SET", "hash-max-listpack-entries", "2"]),
        ),
        (
            vec![s(&["HSET", "k", "a", "12345"])],
            s(&["CONFIG", "SET", "hash-max-listpack-value", "3"]),
        ),
        (
            vec![s(&["ZADD", "k", "1", "a", "2", "b", "3", "c"])],
            s(&["CONFIG", "SET", "zset-max-listpack-entries", "2"]),
        ),
        (
            vec![s(&["ZADD", "k", "1", "a", "2", &"b".repeat(80)])],
            s(&["CONFIG", "SET", "zset-max-listpack-value", "100"]),
        ),
        (
            vec![s(&["SADD", "k", "1", "2", "3", "4"])],
            s(&["CONFIG", "SET", "set-max-intset-entries", "3"]),
        ),
        (
            vec![push_all("RPUSH", "k", (0..50).map(|i| format!("e{i}")))],
            s(&["CONFIG", "SET", "list-max-listpack-size", "8"]),
        ),
    ];
    for (setup, config) in cases {
        let mut enc = Vec::new();
        for c in [&mut sv.redis, &mut sv.ours] {
            call(c, &[b"FLUSHALL"]);
            call(c, &[b"CONFIG", b"RESETSTAT"]);
            for st in &setup {
                c.call(st).unwrap();
            }
            let p = bulk(call(c, &[b"DUMP", b"k"]));
            let before = c
                .call(&s(&[
                    "CONFIG",
                    "GET",
                    std::str::from_utf8(&config[2]).unwrap(),
                ]))
                .unwrap();
            assert!(!matches!(c.call(&config).unwrap(), Frame::Error(_)));
            assert_eq!(
                call(c, &[b"RESTORE", b"r", b"0", &p]),
                Frame::Simple("OK".into())
            );
            enc.push((encoding(c, b"r"), read_back(c, b"r") == read_back(c, b"k")));
            // Restore the default.
            if let Frame::Array(a) = before {
                if let Some(Frame::Bulk(v)) = a.get(1) {
                    c.call(&cmd(&[b"CONFIG", b"SET", &config[2], v])).unwrap();
                }
            }
        }
        let (redis, ours) = (&enc[0], &enc[1]);
        assert!(redis.1 && ours.1, "{config:?}: value changed");
        // Lists: Redis 7.0 reports every list as quicklist.
        if setup[0][0] != b"RPUSH" {
            assert_eq!(redis.0, ours.0, "{:?}", String::from_utf8_lossy(&config[2]));
        } else {
            assert_eq!(ours.0, Frame::Bulk(b"quicklist".to_vec()));
        }
    }
}

/// Random values of every type survive respite DUMP → respite RESTORE unchanged.
#[test]
fn random_values_round_trip() {
    let ts = TestServer::builder().start().unwrap();
    let mut c = Conn::connect(ts.port()).unwrap();
    let mut rng = Rng::seeded(20261130);
    let elem = |rng: &mut Rng| -> Vec<u8> {
        match rng.below(6) {
            0 => (rng.next() as i64 >> rng.below(64))
                .to_string()
                .into_bytes(),
            1 => (rng.below(300)).to_string().into_bytes(),
            2 => (0..rng.below(100)).map(|_| rng.next() as u8).collect(),
            3 => b"ab".repeat(rng.below(200)),
            4 => format!("member:{}", rng.below(1000)).into_bytes(),
            _ => vec![b'z'; rng.below(5000)],
        }
    };
    for round in 0..300 {
        call(&mut c, &[b"FLUSHALL"]);
        let n = 1 + match rng.below(4) {
            0 => rng.below(5),
            1 => rng.below(150),
            2 => rng.below(700),
            _ => rng.below(3000),
        };
        let kind = rng.below(5);
        for _ in 0..n {
            let (a, b) = (elem(&mut rng), elem(&mut rng));
            let score = match rng.below(4) {
                0 => (rng.below(100) as i64 - 50).to_string(),
                1 => format!("{}", (rng.next() % 10000) as f64 / 7.0),
                2 => "inf".into(),
                _ => format!("{}", rng.below(1 << 20)),
            };
            let args: Vec<&[u8]> = match kind {
                0 => vec![b"SET", b"k", &a],
                1 => vec![
                    if rng.below(2) == 0 {
                        b"RPUSH"
                    } else {
                        b"LPUSH"
                    },
                    b"k",
                    &a,
                ],
                2 => vec![b"HSET", b"k", &a, &b],
                3 => vec![b"SADD", b"k", &a],
                _ => vec![b"ZADD", b"k", score.as_bytes(), &a],
            };
            call(&mut c, &args);
            if kind == 0 {
                break;
            }
        }
        let p = bulk(call(&mut c, &[b"DUMP", b"k"]));
        let r = call(&mut c, &[b"RESTORE", b"r", b"0", &p]);
        assert_eq!(r, Frame::Simple("OK".into()), "round {round}");
        assert_eq!(
            read_back(&mut c, b"k"),
            read_back(&mut c, b"r"),
            "round {round}"
        );
        assert_eq!(
            encoding(&mut c, b"k"),
            encoding(&mut c, b"r"),
            "round {round}"
        );
        let enc = encoding(&mut c, b"k");
        if !matches!(&enc, Frame::Bulk(e) if e == b"hashtable") {
            assert_eq!(
                bulk(call(&mut c, &[b"DUMP", b"r"])),
                p,
                "round {round}: bytes"
            );
        }
    }
}

/// Valid payloads of every shape, for mutation.
fn seed_payloads() -> Vec<Vec<u8>> {
    let ts = TestServer::builder().start().unwrap();
    let mut c = Conn::connect(ts.port()).unwrap();
    let mut out = Vec::new();
    for sc in scenarios() {
        call(&mut c, &[b"FLUSHALL"]);
        for st in &sc.setup {
            c.call(st).unwrap();
        }
        out.push(bulk(call(&mut c, &[b"DUMP", b"k"])));
    }
    // A stream with deletions, a group, a PEL and consumers.
    call(&mut c, &[b"FLUSHALL"]);
    for i in 1..=30 {
        let id = format!("{i}-1");
        call(
            &mut c,
            &[
                b"XADD",
                b"k",
                id.as_bytes(),
                b"f",
                b"v",
                b"n",
                id.as_bytes(),
            ],
        );
    }
    for st in [
        s(&["XDEL", "k", "3-1", "4-1"]),
        s(&["XGROUP", "CREATE", "k", "g", "0"]),
        s(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "5",
            "STREAMS",
            "k",
            ">",
        ]),
        s(&["XGROUP", "CREATECONSUMER", "k", "g", "bob"]),
    ] {
        c.call(&st).unwrap();
    }
    out.push(bulk(call(&mut c, &[b"DUMP", b"k"])));
    out
}

/// Reframes a mutated body with a valid footer, so it reaches the object parser.
fn reframe(ty: u8, body: &[u8]) -> Vec<u8> {
    rdb::payload(ty, body)
}

#[test]
fn fuzzed_payloads_only_fail_cleanly() {
    let seeds = seed_payloads();
    let lim = value::Limits::default();
    let mut rng = Rng::seeded(7);
    let mut tried = 0usize;
    let mut check = |p: &[u8]| {
        let (r, peak) = heap::peak_of(|| value::restore(p, &lim));
        assert!(
            matches!(r, Ok(_) | Err(value::RestoreError::Bad)),
            "framed payload refused as {r:?}"
        );
        // The work a payload can cause is bounded by its size: a length or count it claims
        // is checked against the bytes left before anything is allocated for it (LZF alone
        // may expand 132x). Measured: at most 80 KiB + 32x here; a claimed length trusted
        // for an allocation costs megabytes to gigabytes.
        assert!(
            peak <= 256 * 1024 + 256 * p.len(),
            "restoring {} bytes allocated {peak}: {:?}",
            p.len(),
            &p[..p.len().min(64)]
        );
        tried += 1;
    };
    for seed in &seeds {
        let (ty, body) = rdb::verify(seed).unwrap();
        let body = body.to_vec();
        for cut in (0..body.len()).step_by(1 + body.len() / 300) {
            check(&reframe(ty, &body[..cut]));
        }
        for _ in 0..400 {
            let mut m = body.clone();
            for _ in 0..1 + rng.below(4) {
                if m.is_empty() {
                    break;
                }
                let i = rng.below(m.len());
                match rng.below(3) {
                    0 => m[i] ^= 1 << rng.below(8),
                    1 => m[i] = rng.next() as u8,
                    _ => m[i] = [0, 0xff, 0x7f, 0x80, 0x40, 0xc3][rng.below(6)],
                }
            }
            check(&reframe(ty, &m));
        }
    }
    let types = [
        0u8, 1, 2, 3, 4, 5, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 255,
    ];
    for _ in 0..20_000 {
        let len = rng.below(64);
        let body: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        check(&reframe(types[rng.below(types.len())], &body));
    }
    assert!(tried > 20_000);

    // Through the server: the reply is OK or exactly Redis's error.
    let ts = TestServer::builder().start().unwrap();
    let mut c = Conn::connect(ts.port()).unwrap();
    for seed in seeds.iter().take(10) {
        let (ty, body) = rdb::verify(seed).unwrap();
        for cut in 0..body.len().min(40) {
            let r = call(
                &mut c,
                &[
                    b"RESTORE",
                    b"f",
                    b"0",
                    &reframe(ty, &body[..cut]),
                    b"REPLACE",
                ],
            );
            assert!(
                r == Frame::Simple("OK".into()) || r == Frame::Error("ERR Bad data format".into()),
                "{r:?}"
            );
        }
    }
    assert_eq!(call(&mut c, &[b"PING"]), Frame::Simple("PONG".into()));
}

#[test]
fn restored_key_survives_durable_restart() {
    let dir = tempfile::tempdir().unwrap();
    let payload = {
        let ts = TestServer::builder().start().unwrap();
        let mut c = Conn::connect(ts.port()).unwrap();
        call(&mut c, &[b"HSET", b"h", b"a", b"1", b"b", b"2"]);
        bulk(call(&mut c, &[b"DUMP", b"h"]))
    };
    {
        let ts = durable_server(dir.path(), "always");
        let mut c = Conn::connect(ts.port()).unwrap();
        let ok = Frame::Simple("OK".into());
        assert_eq!(call(&mut c, &[b"RESTORE", b"k", b"0", &payload]), ok);
        assert_eq!(
            call(&mut c, &[b"RESTORE", b"t", b"100000000", &payload]),
            ok
        );
    }
    let ts = durable_server(dir.path(), "always");
    let mut c = Conn::connect(ts.port()).unwrap();
    let expect = vec![
        b"hash".to_vec(),
        b"\"a\"=\"1\"".to_vec(),
        b"\"b\"=\"2\"".to_vec(),
    ];
    assert_eq!(read_back(&mut c, b"k"), expect);
    assert_eq!(read_back(&mut c, b"t"), expect);
    let ttl = call(&mut c, &[b"TTL", b"t"]);
    assert!(matches!(ttl, Frame::Int(t) if t > 99_000), "{ttl:?}");
    assert_eq!(bulk(call(&mut c, &[b"DUMP", b"k"])), payload);
}

#[test]
fn restore_notifies() {
    let ts = TestServer::builder().start().unwrap();
    let mut sub = Conn::connect(ts.port()).unwrap();
    let mut c = Conn::connect(ts.port()).unwrap();
    call(
        &mut c,
        &[b"CONFIG", b"SET", b"notify-keyspace-events", b"KEAn"],
    );
    call(&mut sub, &[b"PSUBSCRIBE", b"__keyevent@0__:*"]);
    call(&mut c, &[b"SET", b"s", b"v"]);
    let p = bulk(call(&mut c, &[b"DUMP", b"s"]));
    // SET's events: `new` and `set`.
    for _ in 0..2 {
        let _ = sub.read().unwrap();
    }
    call(&mut c, &[b"RESTORE", b"k", b"0", &p]);
    // `new` (class n) comes from dbAdd, then the command's own event.
    let events: Vec<String> = (0..2).map(|_| sub.read().unwrap().to_string()).collect();
    assert!(events[0].contains("__keyevent@0__:new"), "{events:?}");
    assert!(events[1].contains("__keyevent@0__:restore"), "{events:?}");
}

/// Streams cross both ways too (entries, deletions, trimming, consumer groups and PELs).
/// Needs the real `src/types/rdb/stream.rs` from the rdb-stream branch.
#[test]
fn streams_cross_between_redis_and_respite() {
    let mut sv = servers();
    let many: Vec<String> = (1..=250).map(|i| i.to_string()).collect();
    let scenarios: Vec<Vec<Cmd>> = vec![
        vec![s(&["XADD", "k", "1-1", "a", "1", "b", "hello"])],
        many.iter()
            .map(|i| s(&["XADD", "k", &format!("{i}-0"), "f", i, "g", "x"]))
            .collect(),
        vec![
            s(&["XADD", "k", "1-1", "a", "1"]),
            s(&["XADD", "k", "2-1", "b", "2"]),
            s(&["XADD", "k", "3-1", "a", "3"]),
            s(&["XDEL", "k", "2-1"]),
            s(&["XGROUP", "CREATE", "k", "g1", "0"]),
            s(&[
                "XREADGROUP",
                "GROUP",
                "g1",
                "alice",
                "COUNT",
                "1",
                "STREAMS",
                "k",
                ">",
            ]),
            s(&["XGROUP", "CREATE", "k", "g2", "$"]),
            s(&["XGROUP", "CREATECONSUMER", "k", "g2", "bob"]),
        ],
        vec![s(&["XADD", "k", "5-5", "a", "1"]), s(&["XDEL", "k", "5-5"])],
    ];
    for (n, setup) in scenarios.iter().enumerate() {
        for c in [&mut sv.redis, &mut sv.ours] {
            call(c, &[b"FLUSHALL"]);
            for st in setup {
                let r = c.call(st).unwrap();
                assert!(!matches!(r, Frame::Error(_)), "scenario {n}: {r:?}");
            }
        }
        let from_redis = bulk(call(&mut sv.redis, &[b"DUMP", b"k"]));
        let from_ours = bulk(call(&mut sv.ours, &[b"DUMP", b"k"]));
        let ok = Frame::Simple("OK".into());
        assert_eq!(
            call(&mut sv.ours, &[b"RESTORE", b"r", b"0", &from_redis]),
            ok,
            "{n}"
        );
        assert_eq!(
            call(&mut sv.redis, &[b"RESTORE", b"r", b"0", &from_ours]),
            ok,
            "{n}"
        );
        for c in [&mut sv.ours, &mut sv.redis] {
            assert_eq!(read_back(c, b"k"), read_back(c, b"r"), "scenario {n}");
            // The servers ran the setup moments apart: clock fields (delivery and seen
            // times) legitimately differ between a key and one restored from the other side.
            let full = |c: &mut Conn, key: &[u8]| {
                mask_times(call(c, &[b"XINFO", b"STREAM", key, b"FULL"]))
            };
            assert_eq!(
                full(c, b"k"),
                full(c, b"r"),
                "scenario {n}: XINFO STREAM FULL"
            );
        }
    }
}

/// Unix-millisecond timestamps replaced by 0, and 7.2's `active-time` too: RDB 10 does not
/// carry it, so a loaded consumer's active time is its seen time (where a consumer that
/// never read reports -1).
fn mask_times(f: Frame) -> Frame {
    match f {
        Frame::Int(v) if v > 1_000_000_000_000 => Frame::Int(0),
        Frame::Array(a) => {
            let mut out: Vec<Frame> = a.into_iter().map(mask_times).collect();
            for i in 1..out.len() {
                if out[i - 1] == Frame::Bulk(b"active-time".to_vec()) {
                    out[i] = Frame::Int(0);
                }
            }
            Frame::Array(out)
        }
        Frame::Map(m) => Frame::Map(m.into_iter().map(|(k, v)| (k, mask_times(v))).collect()),
        other => other,
    }
}

/// Strings of 21 bytes to 70 KB, compressible and not: respite's DUMP (LZF included) is
/// redis-server's byte for byte.
#[test]
fn string_dumps_equal_redis_byte_for_byte() {
    let mut sv = servers();
    let mut rng = Rng::seeded(42);
    for i in 0..600 {
        let len = 21 + rng.below(if i % 10 == 0 { 70_000 } else { 2_000 });
        // Runs of a small alphabet compress; every fourth value is noise that does not.
        let alphabet = if i % 4 == 0 { 256 } else { 1 + rng.below(8) };
        let v: Vec<u8> = (0..len).map(|_| rng.below(alphabet) as u8).collect();
        for c in [&mut sv.redis, &mut sv.ours] {
            call(c, &[b"SET", b"k", &v]);
        }
        let want = bulk(call(&mut sv.redis, &[b"DUMP", b"k"]));
        let got = bulk(call(&mut sv.ours, &[b"DUMP", b"k"]));
        assert_eq!(got, want, "value {i} of {len} bytes");
    }
}
