//! Stream DUMP payloads against a real redis-server 7.0.15: respite's encoding of streams
//! built entry by entry must equal Redis's DUMP byte for byte, Redis's payloads must load
//! into the same stream, and respite's payloads must RESTORE into Redis with the same
//! content (including when XDEL left tombstones Redis keeps and respite does not).

mod common;

use common::{Conn, Frame, ServerProcess};
use respite::types::rdb::{self, stream as rs, Reader, Writer};
use respite::types::stream::{NewId, NodeLimits, ParsedId, Stream, StreamId};

fn call(c: &mut Conn, args: &[&[u8]]) -> Frame {
    c.call(&args.iter().map(|a| a.to_vec()).collect::<Vec<_>>())
        .expect("redis call")
}

fn ok(c: &mut Conn, args: &[&[u8]]) {
    let f = call(c, args);
    assert!(
        !matches!(f, Frame::Error(_)),
        "{:?} -> {f}",
        String::from_utf8_lossy(&args.concat())
    );
}

fn dump(c: &mut Conn, key: &str) -> Vec<u8> {
    match call(c, &[b"DUMP", key.as_bytes()]) {
        Frame::Bulk(b) => b,
        f => panic!("DUMP {key}: {f}"),
    }
}

fn save(s: &Stream) -> Vec<u8> {
    let mut w = Writer::new();
    rs::save(s, &mut w);
    rdb::payload(rdb::types::STREAM_LISTPACKS_2, &w.buf)
}

fn load(payload: &[u8]) -> Stream {
    let (ty, body) = rdb::verify(payload).expect("payload framing");
    let mut r = Reader::new(body);
    let s = rs::load(&mut r, ty).expect("stream payload loads");
    assert!(r.is_empty());
    s
}

/// The same stream built in Redis (XADD with explicit IDs) and through respite's API.
struct Both {
    c: Conn,
    key: String,
    s: Stream,
    limits: NodeLimits,
}

impl Both {
    fn new(c: Conn, key: &str, limits: NodeLimits) -> Both {
        Both {
            c,
            key: key.into(),
            s: Stream::new(),
            limits,
        }
    }

    fn xadd(&mut self, ms: u64, seq: u64, fields: &[&[u8]]) {
        let id = format!("{ms}-{seq}");
        let mut args: Vec<&[u8]> = vec![b"XADD", self.key.as_bytes(), id.as_bytes()];
        args.extend_from_slice(fields);
        ok(&mut self.c, &args);
        let p = ParsedId {
            id: StreamId::new(ms, seq),
            seq_given: true,
        };
        let f: Vec<bytes::Bytes> = fields
            .iter()
            .map(|f| bytes::Bytes::copy_from_slice(f))
            .collect();
        self.s
            .append(NewId::Explicit(p), &f, 0, self.limits)
            .expect("append");
    }

    /// Redis's DUMP equals respite's, and each side loads the other's payload.
    fn check_exact(&mut self) {
        let theirs = dump(&mut self.c, &self.key);
        let ours = save(&self.s);
        assert_eq!(
            ours, theirs,
            "DUMP of {} differs\nours:   {ours:02x?}\nredis:  {theirs:02x?}",
            self.key
        );
        assert_eq!(load(&theirs), self.s);
    }
}

fn redis() -> (ServerProcess, Conn) {
    let srv = ServerProcess::redis();
    let c = Conn::connect(srv.port).expect("connect");
    (srv, c)
}

#[test]
fn xadd_built_streams_dump_like_redis() {
    let (_srv, c) = redis();
    let mut b = Both::new(c, "s1", NodeLimits::default());
    let long = "abc".repeat(100);
    let huge = "z".repeat(5000);
    let bin = [0u8, 255, 10, 13, b'x'];
    b.xadd(1, 0, &[b"f", b"v"]);
    b.check_exact();
    b.xadd(1, 1, &[b"f", b"12"]);
    b.xadd(2, 0, &[b"f", b"-5", b"g", b""]);
    b.xadd(1_700_000_000_000, 7, &[b"name", long.as_bytes()]);
    b.xadd(1_700_000_000_001, 0, &[b"f", b"9223372036854775807"]);
    b.xadd(
        1_700_000_000_001,
        1,
        &[b"f", b"-9223372036854775808", b"0", b"01"],
    );
    b.xadd(1_700_000_000_002, 0, &[&bin, &bin]);
    b.check_exact();
    // An entry too big for the tail node opens a node; the next one another.
    b.xadd(1_700_000_000_003, 0, &[b"f", huge.as_bytes()]);
    b.xadd(1_700_000_000_003, 5, &[b"f", b"after"]);
    b.check_exact();
    // Hundreds of entries: nodes close at 100 entries.
    for i in 0..350u64 {
        let v = (i * 37).to_string();
        if i % 5 == 0 {
            b.xadd(
                1_800_000_000_000 + i,
                0,
                &[b"temp", v.as_bytes(), b"unit", b"c"],
            );
        } else {
            b.xadd(1_800_000_000_000 + i, i, &[b"temp", v.as_bytes()]);
        }
    }
    assert!(b.s.node_count() >= 5);
    b.check_exact();
}

#[test]
fn custom_node_limits_dump_like_redis() {
    let (_srv, mut c) = redis();
    ok(
        &mut c,
        &[b"CONFIG", b"SET", b"stream-node-max-entries", b"7"],
    );
    ok(
        &mut c,
        &[b"CONFIG", b"SET", b"stream-node-max-bytes", b"300"],
    );
    let limits = NodeLimits {
        max_bytes: 300,
        max_entries: 7,
    };
    let mut b = Both::new(c, "s2", limits);
    for i in 0..60u64 {
        let v = "w".repeat((i as usize * 13) % 50);
        b.xadd(100 + i / 3, i % 3, &[b"k", v.as_bytes(), b"n", b"1"]);
    }
    b.check_exact();
}

#[test]
fn xsetid_counters_dump_like_redis() {
    let (_srv, c) = redis();
    let mut b = Both::new(c, "s3", NodeLimits::default());
    b.xadd(5, 0, &[b"a", b"1"]);
    b.xadd(6, 0, &[b"a", b"2"]);
    ok(
        &mut b.c,
        &[
            b"XSETID",
            b"s3",
            b"90-3",
            b"ENTRIESADDED",
            b"40",
            b"MAXDELETEDID",
            b"7-1",
        ],
    );
    b.s.set_id(StreamId::new(90, 3), Some(40), StreamId::new(7, 1));
    b.check_exact();
}

/// Tombstones: Redis keeps deleted entries flagged inside its listpacks, respite does not,
/// so bytes differ, but each side's payload holds the same stream.
#[test]
fn deleted_entries_cross_restore() {
    let (_srv, c) = redis();
    let mut b = Both::new(c, "s4", NodeLimits::default());
    for i in 1..=250u64 {
        b.xadd(i, 0, &[b"f", i.to_string().as_bytes()]);
    }
    let gone: Vec<String> = [1u64, 2, 50, 101, 250]
        .iter()
        .map(|i| format!("{i}-0"))
        .collect();
    let mut args: Vec<&[u8]> = vec![b"XDEL", b"s4"];
    args.extend(gone.iter().map(|g| g.as_bytes()));
    ok(&mut b.c, &args);
    let ids: Vec<StreamId> = [1u64, 2, 50, 101, 250]
        .iter()
        .map(|&i| StreamId::new(i, 0))
        .collect();
    assert_eq!(b.s.delete(&ids), 5);

    let theirs = dump(&mut b.c, "s4");
    let from_redis = load(&theirs);
    let all = |s: &Stream| -> Vec<(StreamId, Vec<bytes::Bytes>)> {
        s.range(StreamId::MIN, StreamId::MAX, false)
            .map(|(id, f)| (*id, f.to_vec()))
            .collect()
    };
    assert_eq!(all(&from_redis), all(&b.s));
    assert_eq!(from_redis.last_id, b.s.last_id);
    assert_eq!(from_redis.first_id, b.s.first_id);
    assert_eq!(from_redis.max_deleted, b.s.max_deleted);
    assert_eq!(from_redis.entries_added, b.s.entries_added);
    // Redis's node layout is kept (tombstones counted), so the two agree on it.
    assert_eq!(from_redis.node_count(), b.s.node_count());
    assert_eq!(from_redis, b.s);

    // Ours restores into Redis with the same content.
    let ours = save(&b.s);
    ok(&mut b.c, &[b"RESTORE", b"mine", b"0", &ours]);
    let a = call(&mut b.c, &[b"XRANGE", b"s4", b"-", b"+"]);
    let m = call(&mut b.c, &[b"XRANGE", b"mine", b"-", b"+"]);
    assert_eq!(a, m);
    let info = |c: &mut Conn, k: &[u8]| call(c, &[b"XINFO", b"STREAM", k]);
    let (ia, im) = (info(&mut b.c, b"s4"), info(&mut b.c, b"mine"));
    // Same nodes (only their tombstones differ), counters and edges.
    assert_eq!(ia, im);
}

fn run(c: &mut Conn, line: &str) -> Frame {
    let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    let f = call(c, &args);
    assert!(!matches!(f, Frame::Error(_)), "{line} -> {f}");
    f
}

/// Consumer groups, PELs and consumers as Redis builds them: respite loads Redis's
/// payload and saves it back byte for byte, and that payload RESTOREs in Redis to the
/// same XINFO STREAM FULL.
#[test]
fn consumer_groups_round_trip_through_redis_payloads() {
    let (_srv, mut c) = redis();
    for i in 1..=120 {
        run(&mut c, &format!("XADD g {i}-1 f {i} g x"));
    }
    run(&mut c, "XGROUP CREATE g grp 0");
    run(&mut c, "XGROUP CREATE g late $ ENTRIESREAD 120");
    run(&mut c, "XGROUP CREATE g mid 50-1");
    run(&mut c, "XREADGROUP GROUP grp alice COUNT 5 STREAMS g >");
    run(&mut c, "XREADGROUP GROUP grp bob COUNT 3 STREAMS g >");
    run(&mut c, "XREADGROUP GROUP grp alice COUNT 2 STREAMS g 0");
    run(&mut c, "XACK g grp 2-1 7-1");
    run(&mut c, "XCLAIM g grp bob 0 3-1 RETRYCOUNT 9");
    run(&mut c, "XGROUP CREATECONSUMER g grp idle");
    run(&mut c, "XREADGROUP GROUP mid carol COUNT 1 STREAMS g >");
    run(&mut c, "XDEL g 4-1");

    let theirs = dump(&mut c, "g");
    let s = load(&theirs);
    assert_eq!(s.groups.len(), 3);
    let grp = &s.groups[&b"grp"[..]];
    assert_eq!(grp.entries_read, 8);
    assert_eq!(grp.pel.len(), 6);
    assert_eq!(grp.pel[&StreamId::new(3, 1)].consumer, &b"bob"[..]);
    assert_eq!(grp.pel[&StreamId::new(3, 1)].delivery_count, 9);
    assert_eq!(grp.consumers[&b"idle"[..]].pel.len(), 0);
    assert_eq!(s.groups[&b"late"[..]].entries_read, 120);
    // The tombstone of 4-1 is the only thing respite drops: the rest is Redis's bytes.
    let ours = save(&s);
    assert_ne!(ours, theirs);
    ok(&mut c, &[b"RESTORE", b"copy", b"0", &ours]);
    assert_eq!(dump(&mut c, "copy"), ours);
    let full = |c: &mut Conn, k: &str| run(c, &format!("XINFO STREAM {k} FULL"));
    assert_eq!(full(&mut c, "g"), full(&mut c, "copy"));
    assert_eq!(load(&ours), load(&dump(&mut c, "copy")));

    // Without tombstones the bytes are Redis's.
    run(&mut c, "XADD h 1-1 a 1");
    run(&mut c, "XADD h 2-1 a 2");
    run(&mut c, "XGROUP CREATE h g1 0");
    run(&mut c, "XREADGROUP GROUP g1 c1 STREAMS h >");
    run(&mut c, "XGROUP CREATECONSUMER h g1 c2");
    run(&mut c, "XGROUP CREATE h g0 $ ENTRIESREAD 0");
    run(&mut c, "XGROUP SETID h g0 1-1");
    let theirs = dump(&mut c, "h");
    assert_eq!(save(&load(&theirs)), theirs);
    assert_eq!(load(&theirs).groups[&b"g0"[..]].entries_read, -1);
}

/// XINFO STREAM FULL without what depends on the clock or on 7.0 vs 7.2: seen times and
/// delivery times zeroed, 7.2's `active-time` dropped.
fn normalize(f: Frame) -> Frame {
    match f {
        Frame::Array(v) => {
            let mut out = Vec::new();
            let mut it = v.into_iter().peekable();
            while let Some(x) = it.next() {
                match &x {
                    Frame::Bulk(k) if k == b"active-time" => {
                        it.next();
                        continue;
                    }
                    Frame::Bulk(k) if k == b"seen-time" => {
                        it.next();
                        out.push(x);
                        out.push(Frame::Int(0));
                        continue;
                    }
                    _ => out.push(normalize(x)),
                }
            }
            // Pending entries: [id, consumer, delivery-time, count] / [id, time, count].
            match out.as_mut_slice() {
                [Frame::Bulk(_), Frame::Bulk(_), t @ Frame::Int(_), Frame::Int(_)]
                | [Frame::Bulk(_), t @ Frame::Int(_), Frame::Int(_)] => *t = Frame::Int(0),
                _ => {}
            }
            Frame::Array(out)
        }
        f => f,
    }
}

/// Same commands on respite and Redis: XADD-built streams (explicit IDs, `~` trimming,
/// custom node sizes) DUMP to the same bytes; group states match once clock fields are
/// set aside; each server RESTOREs the other's payload to the same XRANGE and
/// XINFO STREAM FULL.
#[test]
fn dump_and_restore_commands_against_redis() {
    let (_redis, mut r) = redis();
    let srv = respite::TestServer::start().expect("respite");
    let mut m = Conn::connect(srv.port()).expect("connect respite");
    let both = |r: &mut Conn, m: &mut Conn, line: &str| {
        let (a, b) = (run(r, line), run(m, line));
        assert_eq!(a, b, "{line}");
    };
    for i in 1..=330u64 {
        let line = format!("XADD plain {i}-{} f {} name n{}", i % 4, i * 3, i % 7);
        both(&mut r, &mut m, &line);
        if i % 3 == 0 {
            both(&mut r, &mut m, &format!("XADD mixed {i}-0 only {i}"));
        } else {
            both(&mut r, &mut m, &format!("XADD mixed {i}-0 a {i} b bb"));
        }
        both(
            &mut r,
            &mut m,
            &format!("XADD capped MAXLEN ~ 150 {i}-0 v {i}"),
        );
        both(
            &mut r,
            &mut m,
            &format!("XADD floor MINID ~ {} {i}-0 v {i}", i / 2),
        );
    }
    both(&mut r, &mut m, "XTRIM plain MAXLEN ~ 200");
    for c in [&mut r, &mut m] {
        run(c, "CONFIG SET stream-node-max-entries 5");
        run(c, "CONFIG SET stream-node-max-bytes 120");
    }
    for i in 1..=40u64 {
        let v = "q".repeat((i as usize * 7) % 40);
        both(&mut r, &mut m, &format!("XADD small {i}-0 k {v} n {i}"));
    }
    both(&mut r, &mut m, "XADD nogroups 5-5 a 1");
    both(
        &mut r,
        &mut m,
        "XSETID nogroups 9-9 ENTRIESADDED 12 MAXDELETEDID 3-3",
    );
    for key in ["plain", "mixed", "capped", "floor", "small", "nogroups"] {
        assert_eq!(dump(&mut m, key), dump(&mut r, key), "DUMP {key}");
    }

    // Groups: the same state on both servers, clocks apart.
    for line in [
        "XGROUP CREATE plain grp 0",
        "XGROUP CREATE plain other $ ENTRIESREAD 330",
        "XREADGROUP GROUP grp alice COUNT 4 STREAMS plain >",
        "XREADGROUP GROUP grp bob COUNT 2 STREAMS plain >",
        "XACK plain grp 132-0",
        "XGROUP CREATECONSUMER plain grp idle",
        "XGROUP CREATE mixed g 0 MKSTREAM",
        "XGROUP CREATE empty g 0 MKSTREAM",
        "XGROUP CREATECONSUMER empty g c",
    ] {
        run(&mut r, line);
        run(&mut m, line);
    }
    run(&mut r, "XCLAIM plain grp bob 0 131-3 RETRYCOUNT 5");
    run(&mut m, "XCLAIM plain grp bob 0 131-3 RETRYCOUNT 5");
    let timeless = |p: &[u8]| {
        let mut s = load(p);
        for g in s.groups.values_mut() {
            for n in g.pel.values_mut() {
                n.delivery_time = 0;
            }
            for c in g.consumers.values_mut() {
                c.seen_time = 0;
                c.active_time = 0;
            }
        }
        save(&s)
    };
    for key in ["plain", "mixed", "empty"] {
        let (a, b) = (dump(&mut m, key), dump(&mut r, key));
        assert_eq!(
            timeless(&a),
            timeless(&b),
            "DUMP {key} (clock fields aside)"
        );
    }

    // Cross-RESTORE, then each server compares the copy with its own original.
    for key in [
        "plain", "mixed", "capped", "floor", "small", "nogroups", "empty",
    ] {
        let (from_m, from_r) = (dump(&mut m, key), dump(&mut r, key));
        let copy = format!("{key}-copy");
        ok(&mut r, &[b"RESTORE", copy.as_bytes(), b"0", &from_m]);
        ok(&mut m, &[b"RESTORE", copy.as_bytes(), b"0", &from_r]);
        for c in [&mut r, &mut m] {
            let range = |c: &mut Conn, k: &str| run(c, &format!("XRANGE {k} - +"));
            assert_eq!(range(c, key), range(c, &copy), "XRANGE {key}");
            let full = |c: &mut Conn, k: &str| normalize(run(c, &format!("XINFO STREAM {k} FULL")));
            assert_eq!(full(c, key), full(c, &copy), "XINFO STREAM {key} FULL");
            let info = |c: &mut Conn, k: &str| run(c, &format!("XINFO STREAM {k}"));
            assert_eq!(info(c, key), info(c, &copy), "XINFO STREAM {key}");
        }
        // And what respite restored from Redis dumps back to Redis's bytes (no tombstones).
        assert_eq!(dump(&mut m, &copy), from_r, "re-DUMP of {copy}");
    }
    // Garbage is refused, not a crash.
    let mut bad = dump(&mut r, "plain");
    let n = bad.len();
    bad[n / 2] ^= 0x5a;
    let f = call(&mut m, &[b"RESTORE", b"x", b"0", &bad]);
    assert!(matches!(f, Frame::Error(_)), "{f}");
}
