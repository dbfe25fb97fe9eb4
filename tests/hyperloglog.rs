//! HyperLogLog against a real redis-server 7.0: 100 000 random elements added in batches to
//! both servers give the same PFCOUNT (single key, union, PFMERGE) and the same raw bytes at
//! every checkpoint; an HLL (sparse and dense, cache valid and stale) survives a restart of
//! the durable engine byte for byte; PFADD/PFMERGE publish `pfadd` events.

mod common;

use common::{durable_server, Conn, Frame, Rng, ServerProcess};
use respite::TestServer;

/// Extra draws on the shared xorshift64* (`common::Rng`).
impl Rng {
    fn element(&mut self) -> Vec<u8> {
        let len = (self.next() % 24) as usize;
        (0..len).map(|_| self.next() as u8).collect()
    }
}

fn call(c: &mut Conn, args: &[&[u8]]) -> Frame {
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    c.call(&args).expect("reply")
}

fn pfadd(c: &mut Conn, key: &[u8], els: &[Vec<u8>]) -> Frame {
    let mut args = vec![b"PFADD".to_vec(), key.to_vec()];
    args.extend(els.iter().cloned());
    c.call(&args).expect("reply")
}

/// Sends the same command to both servers and asserts the replies are equal.
fn both(r: &mut Conn, s: &mut Conn, args: &[&[u8]]) -> Frame {
    let (a, b) = (call(r, args), call(s, args));
    assert_eq!(a, b, "{:?}", String::from_utf8_lossy(&args.concat()));
    a
}

#[test]
fn hundred_thousand_random_elements_match_redis() {
    let redis = ServerProcess::redis();
    let ts = TestServer::builder().start().expect("respite starts");
    let (mut r, mut s) = (
        Conn::connect(redis.port).unwrap(),
        Conn::connect(ts.port()).unwrap(),
    );
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let keys: [&[u8]; 3] = [b"h0", b"h1", b"h2"];
    let mut added = 0usize;
    let mut round = 0usize;
    let mut distinct = std::collections::HashSet::new();
    while added < 100_000 {
        // Small batches early keep the sparse phase (and its promotion) well exercised.
        let n = if added < 5_000 {
            1 + rng.next() % 40
        } else {
            500
        } as usize;
        let els: Vec<Vec<u8>> = (0..n).map(|_| rng.element()).collect();
        distinct.extend(els.iter().cloned());
        let key = keys[round % 3];
        let (a, b) = (pfadd(&mut r, key, &els), pfadd(&mut s, key, &els));
        assert_eq!(a, b, "PFADD after {added} elements");
        added += n;
        round += 1;
        if round.is_multiple_of(25) {
            both(&mut r, &mut s, &[b"PFCOUNT", key]);
            both(&mut r, &mut s, &[b"GET", key]);
            both(&mut r, &mut s, &[b"PFCOUNT", b"h0", b"h1", b"h2"]);
        }
    }
    let total = both(&mut r, &mut s, &[b"PFCOUNT", b"h0", b"h1", b"h2"]);
    let Frame::Int(total) = total else {
        panic!("PFCOUNT gave {total:?}")
    };
    // Short elements repeat, so the true cardinality is a little under 100 000.
    let exact = distinct.len() as f64;
    assert!(
        (total as f64 - exact).abs() < exact * 0.03,
        "estimate {total}, exact {exact}"
    );
    for key in keys {
        both(&mut r, &mut s, &[b"PFCOUNT", key]);
        both(&mut r, &mut s, &[b"GET", key]);
    }
    both(&mut r, &mut s, &[b"PFMERGE", b"all", b"h0", b"h1", b"h2"]);
    both(&mut r, &mut s, &[b"GET", b"all"]);
    assert_eq!(
        both(&mut r, &mut s, &[b"PFCOUNT", b"all"]),
        Frame::Int(total)
    );
    both(&mut r, &mut s, &[b"GET", b"all"]);
    both(&mut r, &mut s, &[b"DUMP", b"all"]);
}

fn bulk(f: Frame) -> Vec<u8> {
    match f {
        Frame::Bulk(b) => b,
        other => panic!("expected a bulk reply, got {other:?}"),
    }
}

#[test]
fn hll_survives_durable_restart() {
    let dir = tempfile::tempdir().unwrap();
    let start = || durable_server(dir.path(), "always");
    let mut rng = Rng(42);
    let els: Vec<Vec<u8>> = (0..3000).map(|_| rng.element()).collect();
    let keys: [&[u8]; 5] = [b"sparse", b"stale", b"dense", b"merged", b"empty"];
    let before: Vec<(Vec<u8>, Frame)> = {
        let ts = start();
        let mut c = Conn::connect(ts.port()).unwrap();
        pfadd(&mut c, b"sparse", &els[..200]);
        call(&mut c, &[b"PFCOUNT", b"sparse"]); // caches the cardinality in the value
        pfadd(&mut c, b"stale", &els[..50]);
        pfadd(&mut c, b"dense", &els);
        call(&mut c, &[b"PFCOUNT", b"dense"]);
        call(&mut c, &[b"PFMERGE", b"merged", b"sparse", b"stale"]);
        call(&mut c, &[b"PFMERGE", b"empty"]);
        call(&mut c, &[b"EXPIRE", b"merged", b"1000"]);
        // PFCOUNT of a key twice computes without storing: "stale" keeps its stale cache.
        keys.iter()
            .map(|k| {
                let v = bulk(call(&mut c, &[b"GET", k]));
                (v, call(&mut c, &[b"PFCOUNT", k, k]))
            })
            .collect()
    };
    let ts = start();
    let mut c = Conn::connect(ts.port()).unwrap();
    for (k, (value, count)) in keys.iter().zip(&before) {
        // GET first: the stored bytes, cached cardinalities included, came back unchanged.
        assert_eq!(&bulk(call(&mut c, &[b"GET", k])), value, "{k:?}");
        assert_eq!(&call(&mut c, &[b"PFCOUNT", k]), count, "{k:?}");
    }
    assert_eq!(before[2].0.len(), 16 + 12288, "dense after 3000 elements");
    let ttl = call(&mut c, &[b"TTL", b"merged"]);
    assert!(matches!(ttl, Frame::Int(t) if t > 900), "{ttl:?}");
    // And it keeps working after the reload.
    assert_eq!(pfadd(&mut c, b"stale", &els[50..60]), Frame::Int(1));
    drop(c);
    drop(ts);
    let ts = start();
    let mut c = Conn::connect(ts.port()).unwrap();
    let Frame::Int(n) = call(&mut c, &[b"PFCOUNT", b"stale"]) else {
        panic!("PFCOUNT")
    };
    assert!((55..65).contains(&n), "{n}");
}

#[test]
fn pfadd_and_pfmerge_notify() {
    let ts = TestServer::builder().start().unwrap();
    let mut sub = Conn::connect(ts.port()).unwrap();
    let mut c = Conn::connect(ts.port()).unwrap();
    call(
        &mut c,
        &[b"CONFIG", b"SET", b"notify-keyspace-events", b"E$n"],
    );
    call(&mut sub, &[b"PSUBSCRIBE", b"__keyevent@0__:*"]);
    call(&mut c, &[b"PFADD", b"k", b"a"]);
    call(&mut c, &[b"PFADD", b"k", b"a"]); // no change, no event
    call(&mut c, &[b"PFCOUNT", b"k"]); // updates the cache, no event
    call(&mut c, &[b"PFMERGE", b"d", b"k"]);
    call(&mut c, &[b"PFMERGE", b"d"]);
    let mut got = Vec::new();
    for _ in 0..5 {
        let (Frame::Push(v) | Frame::Array(v)) = sub.read().unwrap() else {
            panic!("expected a message")
        };
        let (Frame::Bulk(ch), Frame::Bulk(key)) = (&v[2], &v[3]) else {
            panic!("{v:?}")
        };
        got.push(format!(
            "{} {}",
            String::from_utf8_lossy(ch),
            String::from_utf8_lossy(key)
        ));
    }
    let expect = [
        "__keyevent@0__:new k",
        "__keyevent@0__:pfadd k",
        "__keyevent@0__:new d",
        "__keyevent@0__:pfadd d",
        "__keyevent@0__:pfadd d",
    ];
    assert_eq!(got, expect);
}
