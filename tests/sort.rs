//! SORT beyond the differential cases: a STORE destination survives a durable restart (and an
//! empty result's deletion too), WATCH sees STORE writes but not plain sorts, and STORE
//! publishes the same keyspace events as redis-server 7.0.

mod common;

use common::{assert_keyevents_match_redis, durable_server, Conn, Frame, WatchProbe};
use respite::TestServer;

fn bulks(items: &[&str]) -> Frame {
    Frame::Array(
        items
            .iter()
            .map(|s| Frame::Bulk(s.as_bytes().to_vec()))
            .collect(),
    )
}

#[test]
fn store_survives_a_durable_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let srv = durable_server(dir.path(), "always");
        let mut c = Conn::connect(srv.port()).expect("connect");
        c.cmd("RPUSH src 3 1 2");
        c.cmd("MSET o_1 a o_2 b");
        assert_eq!(c.cmd("SORT src STORE dst"), Frame::Int(3));
        c.cmd("SET over x EX 1000");
        assert_eq!(
            c.cmd("SORT src DESC GET # GET o_* STORE over"),
            Frame::Int(6)
        );
        c.cmd("SET gone x");
        assert_eq!(c.cmd("SORT nokey STORE gone"), Frame::Int(0));
        // Store onto the source itself.
        c.cmd("SADD s c a b");
        assert_eq!(c.cmd("SORT s ALPHA STORE s"), Frame::Int(3));
        // A large result (quicklist-sized).
        let many: Vec<String> = (0..1000).rev().map(|i| i.to_string()).collect();
        c.cmd(&format!("RPUSH big {}", many.join(" ")));
        assert_eq!(c.cmd("SORT big STORE bigsorted"), Frame::Int(1000));
    }
    let srv = durable_server(dir.path(), "always");
    let mut c = Conn::connect(srv.port()).expect("connect");
    assert_eq!(c.cmd("LRANGE dst 0 -1"), bulks(&["1", "2", "3"]));
    assert_eq!(
        c.cmd("LRANGE over 0 -1"),
        bulks(&["3", "", "2", "b", "1", "a"])
    );
    assert_eq!(c.cmd("TTL over"), Frame::Int(-1));
    assert_eq!(c.cmd("EXISTS gone"), Frame::Int(0));
    assert_eq!(c.cmd("TYPE s"), Frame::Simple("list".into()));
    assert_eq!(c.cmd("LRANGE s 0 -1"), bulks(&["a", "b", "c"]));
    assert_eq!(c.cmd("LLEN bigsorted"), Frame::Int(1000));
    assert_eq!(c.cmd("LRANGE bigsorted 0 2"), bulks(&["0", "1", "2"]));
    assert_eq!(c.cmd("LINDEX bigsorted -1"), Frame::Bulk(b"999".to_vec()));
    // The sorted set SORT converted in place is still whole after a restart.
    drop(c);
    drop(srv);
    let srv = durable_server(dir.path(), "always");
    let mut c = Conn::connect(srv.port()).expect("connect");
    c.cmd("ZADD z 2 b 1 a");
    assert_eq!(c.cmd("SORT z ALPHA STORE zs"), Frame::Int(2));
    drop(c);
    drop(srv);
    let srv = durable_server(dir.path(), "always");
    let mut c = Conn::connect(srv.port()).expect("connect");
    assert_eq!(c.cmd("ZRANGE z 0 -1"), bulks(&["a", "b"]));
    assert_eq!(c.cmd("LRANGE zs 0 -1"), bulks(&["a", "b"]));
}

#[test]
fn watch_sees_store_but_not_reads() {
    let mut w = WatchProbe::start();
    w.b.cmd("RPUSH l 2 1");
    assert!(!w.exec_runs("SORT l STORE k"), "created");
    assert!(!w.exec_runs("SORT l STORE k"), "replaced");
    assert!(w.exec_runs("SORT k"), "sorting k reads it");
    assert!(w.exec_runs("SORT_RO k BY nosort"), "sort_ro");
    assert!(!w.exec_runs("SORT nokey STORE k"), "deleted");
    assert!(w.exec_runs("SORT nokey STORE k"), "nothing to delete");
    // A sorted set converted for SORT is not modified as far as WATCH goes.
    w.b.cmd("ZADD k 1 a");
    assert!(w.exec_runs("SORT k ALPHA"), "zset conversion");
}

#[test]
fn store_events_match_redis() {
    let script = [
        "RPUSH l 2 1",
        "SORT l STORE d",
        "SORT l DESC STORE d",
        "SORT l LIMIT 0 0 STORE d",
        "SORT l LIMIT 0 0 STORE d",
        "SET s x",
        "SORT l STORE s",
        "SORT l",
        "SORT_RO l",
    ];
    assert_keyevents_match_redis("KEA", &script, 5);
}

#[test]
fn store_wakes_a_blocked_pop() {
    let srv = TestServer::builder().start().expect("start");
    let mut a = Conn::connect(srv.port()).expect("connect");
    let mut b = Conn::connect(srv.port()).expect("connect");
    b.cmd("RPUSH src 3 1 2");
    a.send_line("BLPOP dst 5").expect("send");
    // Let BLPOP block before the store.
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(b.cmd("SORT src STORE dst"), Frame::Int(3));
    assert_eq!(a.read().expect("reply"), bulks(&["dst", "1"]));
    assert_eq!(b.cmd("LRANGE dst 0 -1"), bulks(&["2", "3"]));
}
