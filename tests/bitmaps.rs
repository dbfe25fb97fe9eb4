//! Bitmap commands beyond the differential cases: values built by SETBIT, BITFIELD and BITOP
//! survive a durable restart byte for byte (TTLs included), and WATCH from another client
//! sees a SETBIT/BITFIELD that changes the string but not one that leaves it alone.

mod common;

use common::{assert_keyevents_match_redis, durable_server, Conn, Frame, WatchProbe};

fn call(c: &mut Conn, args: &[&[u8]]) -> Frame {
    let v: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    c.call(&v).expect("reply")
}

fn get(c: &mut Conn, key: &str) -> Frame {
    c.cmd(&format!("GET {key}"))
}

#[test]
fn bitmaps_survive_a_durable_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = ["sb", "grown", "ttl", "bf", "bf_fail", "op", "int"];
    let before: Vec<Frame>;
    {
        let srv = durable_server(dir.path(), "always");
        let mut c = Conn::connect(srv.port()).expect("connect");
        for off in [0u32, 7, 9, 100, 1000, 4095] {
            assert_eq!(c.cmd(&format!("SETBIT sb {off} 1")), Frame::Int(0));
        }
        assert_eq!(c.cmd("SETBIT sb 7 0"), Frame::Int(1));
        call(&mut c, &[b"SET", b"grown", b"ab\x00c"]);
        for off in (0..20_000).step_by(3) {
            c.cmd(&format!("SETBIT grown {off} 1"));
        }
        c.cmd("SET ttl hello EX 1000");
        c.cmd("SETBIT ttl 64 1");
        c.cmd("BITFIELD bf SET u8 0 200 INCRBY i5 #3 -7 SET i64 64 -2 INCRBY u63 200 12345");
        c.cmd("BITFIELD bf OVERFLOW SAT INCRBY u8 0 100");
        // A write that fails on overflow still zero-pads the string.
        c.cmd("SET bf_fail x");
        c.cmd("BITFIELD bf_fail OVERFLOW FAIL INCRBY u8 64 300");
        c.cmd("BITOP XOR op sb bf");
        c.cmd("SET int 12345");
        c.cmd("SETBIT int 2 1");
        before = keys.iter().map(|k| get(&mut c, k)).collect();
        assert_eq!(c.cmd("STRLEN bf_fail"), Frame::Int(9));
        assert!(matches!(&before[1], Frame::Bulk(b) if b.len() == 2500));
    }
    let srv = durable_server(dir.path(), "always");
    let mut c = Conn::connect(srv.port()).expect("connect");
    let after: Vec<Frame> = keys.iter().map(|k| get(&mut c, k)).collect();
    assert_eq!(before, after);
    assert!(matches!(c.cmd("TTL ttl"), Frame::Int(t) if t > 900));
    assert_eq!(c.cmd("BITCOUNT sb"), Frame::Int(5));
    assert_eq!(
        c.cmd("BITFIELD bf GET u8 0"),
        Frame::Array(vec![Frame::Int(255)])
    );
    // Keep editing after the reload: still in place and still durable.
    c.cmd("SETBIT sb 5000 1");
    drop(c);
    drop(srv);
    let srv = durable_server(dir.path(), "always");
    let mut c = Conn::connect(srv.port()).expect("connect");
    assert_eq!(c.cmd("GETBIT sb 5000"), Frame::Int(1));
    assert_eq!(c.cmd("BITCOUNT sb"), Frame::Int(6));
}

#[test]
fn watch_sees_bit_writes_from_other_clients() {
    let mut w = WatchProbe::start();
    assert!(!w.exec_runs("SETBIT k 3 1"), "new key");
    assert!(!w.exec_runs("SETBIT k 4 1"), "bit flipped");
    assert!(w.exec_runs("SETBIT k 4 1"), "same bit");
    assert!(w.exec_runs("GETBIT k 4"), "read");
    assert!(!w.exec_runs("SETBIT k 100 0"), "grown");
    assert!(!w.exec_runs("BITFIELD k INCRBY u8 0 1"), "bitfield");
    assert!(w.exec_runs("BITFIELD k SET u8 0 25"), "same value");
    assert!(w.exec_runs("BITCOUNT k"), "bitcount");
    assert!(!w.exec_runs("BITOP NOT k k"), "bitop");
}

#[test]
fn keyspace_events_match_redis() {
    let script = [
        "SETBIT a 3 1",
        "SETBIT a 3 1",
        "SETBIT a 3 0",
        "SETBIT a 100 0",
        "BITFIELD b SET u8 0 7",
        "BITFIELD b SET u8 0 7",
        "BITFIELD b INCRBY u8 0 1 GET u8 0",
        "BITFIELD b GET u8 0",
        "BITFIELD c OVERFLOW FAIL INCRBY u2 0 9",
        "BITOP OR d a b",
        "BITOP AND d a b",
        "BITOP OR d nx1 nx2",
        "BITOP OR d nx1 nx2",
        "GETBIT a 3",
        "BITCOUNT a",
    ];
    assert_keyevents_match_redis("KEAn", &script, 8);
}
