//! Client management through real connections: CLIENT KILL closes the target, CLIENT PAUSE
//! WRITE holds writes but not reads, CLIENT REPLY OFF/SKIP, names in CLIENT LIST, and the
//! `timeout` parameter closing idle clients.

mod common;

use common::{Conn, Frame};
use std::time::Duration;

fn int(f: Frame) -> i64 {
    match f {
        Frame::Int(i) => i,
        other => panic!("not an integer: {other}"),
    }
}

fn text(f: Frame) -> String {
    match f {
        Frame::Bulk(b) | Frame::Verbatim(_, b) => String::from_utf8_lossy(&b).into_owned(),
        Frame::Simple(s) => s,
        other => panic!("not text: {other}"),
    }
}

#[test]
fn client_kill_closes_the_target_only() {
    let server = respite::TestServer::start().expect("start");
    let mut a = Conn::connect(server.port()).expect("a");
    let mut b = Conn::connect(server.port()).expect("b");
    let id = int(a.cmd("CLIENT ID"));
    assert_eq!(b.cmd(&format!("CLIENT KILL ID {id}")), Frame::Int(1));
    assert!(
        a.call(&[b"PING".to_vec()]).is_err(),
        "killed client still answered"
    );
    assert_eq!(b.cmd("PING"), Frame::Simple("PONG".into()));
    assert_eq!(
        b.cmd("CLIENT KILL 1.2.3.4:5"),
        Frame::Error("ERR No such client".into())
    );
    assert_eq!(b.cmd(&format!("CLIENT KILL ID {id}")), Frame::Int(0));
}

#[test]
fn client_pause_write_holds_writes_not_reads() {
    let server = respite::TestServer::start().expect("start");
    let mut admin = Conn::connect(server.port()).expect("admin");
    let mut writer = Conn::connect(server.port()).expect("writer");
    let mut reader = Conn::connect(server.port()).expect("reader");
    assert_eq!(
        admin.cmd("CLIENT PAUSE 100000 WRITE"),
        Frame::Simple("OK".into())
    );
    writer.send_line("SET k v").expect("send");
    writer.set_timeout(Duration::from_millis(200));
    assert!(
        writer.read().is_err(),
        "a write ran during CLIENT PAUSE WRITE"
    );
    assert_eq!(reader.cmd("GET k"), Frame::NullBulk, "reads are not paused");
    assert_eq!(admin.cmd("CLIENT UNPAUSE"), Frame::Simple("OK".into()));
    writer.set_timeout(Duration::from_secs(10));
    assert_eq!(
        writer.read().expect("held write"),
        Frame::Simple("OK".into())
    );
    assert_eq!(reader.cmd("GET k"), Frame::Bulk(b"v".to_vec()));
}

#[test]
fn client_reply_off_and_skip() {
    let server = respite::TestServer::start().expect("start");
    let mut c = Conn::connect(server.port()).expect("c");
    c.send_line("CLIENT REPLY OFF").expect("send");
    c.send_line("SET a 1").expect("send");
    c.send_line("CLIENT REPLY SKIP").expect("send");
    c.send_line("CLIENT REPLY ON").expect("send");
    // Only the last ON is answered.
    assert_eq!(c.read().expect("reply"), Frame::Simple("OK".into()));
    c.send_line("CLIENT REPLY SKIP").expect("send");
    c.send_line("GET a").expect("send");
    c.send_line("GET a").expect("send");
    assert_eq!(c.read().expect("reply"), Frame::Bulk(b"1".to_vec()));
}

#[test]
fn client_names_show_in_client_list() {
    let server = respite::TestServer::start().expect("start");
    let mut c = Conn::connect(server.port()).expect("c");
    assert_eq!(c.cmd("CLIENT SETNAME worker-7"), Frame::Simple("OK".into()));
    assert_eq!(c.cmd("CLIENT GETNAME"), Frame::Bulk(b"worker-7".to_vec()));
    let list = text(c.cmd("CLIENT LIST"));
    assert!(list.contains("name=worker-7"), "{list}");
    assert!(list.contains("cmd=client|list"), "{list}");
    let info = text(c.cmd("CLIENT INFO"));
    assert!(info.contains("name=worker-7"), "{info}");
}

#[test]
fn timeout_closes_idle_clients() {
    let server = respite::TestServer::start().expect("start");
    let mut admin = Conn::connect(server.port()).expect("admin");
    assert_eq!(
        admin.cmd("CONFIG SET timeout 1"),
        Frame::Simple("OK".into())
    );
    let mut idle = Conn::connect(server.port()).expect("idle");
    assert_eq!(idle.cmd("PING"), Frame::Simple("PONG".into()));
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        idle.call(&[b"PING".to_vec()]).is_err(),
        "idle client was not closed"
    );
    let mut fresh = Conn::connect(server.port()).expect("fresh");
    assert_eq!(
        fresh.cmd("CONFIG SET timeout 0"),
        Frame::Simple("OK".into())
    );
}

/// CLIENT NO-TOUCH (Redis 7.2, newer than the 7.0 oracle, so checked against its source's
/// rules on a manual clock): lookups by a no-touch client leave the key's idle time alone,
/// except TOUCH itself; other clients and RESET restore touching.
#[test]
fn client_no_touch_leaves_idle_times_alone() {
    let server = respite::TestServer::builder()
        .manual_clock()
        .start()
        .expect("start");
    let mut a = Conn::connect(server.port()).expect("a");
    let idle = |c: &mut Conn, key: &str| int(c.cmd(&format!("OBJECT IDLETIME {key}")));
    a.cmd("SET k v");
    a.cmd("RPUSH l x");
    assert_eq!(text(a.cmd("CLIENT NO-TOUCH ON")), "OK");
    server.advance(Duration::from_secs(10));
    a.cmd("GET k");
    a.cmd("RPUSH l y");
    a.cmd("EVAL \"return redis.call('GET', KEYS[1])\" 1 k");
    assert_eq!(idle(&mut a, "k"), 10, "reads by a no-touch client");
    assert_eq!(
        idle(&mut a, "l"),
        10,
        "in-place writes by a no-touch client"
    );
    assert!(text(a.cmd("CLIENT INFO")).contains("flags=T"));
    a.cmd("TOUCH l");
    assert_eq!(idle(&mut a, "l"), 0, "TOUCH still touches");
    server.advance(Duration::from_secs(5));
    let mut b = Conn::connect(server.port()).expect("b");
    b.cmd("GET k");
    assert_eq!(idle(&mut a, "k"), 0, "another client touches");
    server.advance(Duration::from_secs(5));
    assert_eq!(text(a.cmd("RESET")), "RESET");
    assert!(!text(a.cmd("CLIENT INFO")).contains("flags=T"));
    a.cmd("GET k");
    assert_eq!(idle(&mut a, "k"), 0, "RESET ends NO-TOUCH");
}
