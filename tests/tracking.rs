//! Client-side caching (CLIENT TRACKING): Redis 7.2's tests/unit/tracking.tcl ported over
//! raw RESP2/RESP3 connections, a differential run against redis-server 7.0, and the
//! startup pipeline of rueidis-style clients. redis-py's own client-side cache is in
//! `tests/tracking_redis_py.rs`.

mod common;

use common::{Conn, Frame, ServerProcess};
use respite::TestServer;

fn server() -> TestServer {
    common::real_server()
}

fn b(s: &str) -> Frame {
    Frame::Bulk(s.as_bytes().to_vec())
}

fn ok() -> Frame {
    Frame::Simple("OK".into())
}

/// A RESP2 connection subscribed to `__redis__:invalidate`, and its client id.
fn redirect_client(port: u16) -> (Conn, i64) {
    let mut r = Conn::open(port);
    let Frame::Int(id) = r.cmd("CLIENT ID") else {
        panic!("CLIENT ID")
    };
    let sub = r.cmd("SUBSCRIBE __redis__:invalidate");
    assert_eq!(
        sub,
        Frame::Array(vec![
            b("subscribe"),
            b("__redis__:invalidate"),
            Frame::Int(1)
        ])
    );
    (r, id)
}

/// The keys of an invalidation: a RESP2 `message` on `__redis__:invalidate` or a RESP3
/// `invalidate` push; `None` for the null ("every key") form.
fn keys_of(f: &Frame) -> Option<Vec<String>> {
    let payload = match f {
        Frame::Array(v) if v.len() == 3 && v[0] == b("message") => {
            assert_eq!(v[1], b("__redis__:invalidate"), "{f}");
            &v[2]
        }
        Frame::Push(v) if v.len() == 2 && v[0] == b("invalidate") => &v[1],
        other => panic!("not an invalidation: {other}"),
    };
    match payload {
        Frame::Array(keys) => Some(
            keys.iter()
                .map(|k| match k {
                    Frame::Bulk(k) => String::from_utf8_lossy(k).into_owned(),
                    other => panic!("key {other}"),
                })
                .collect(),
        ),
        Frame::Null | Frame::NullBulk | Frame::NullArray => None,
        other => panic!("invalidation payload {other}"),
    }
}

fn next_keys(c: &mut Conn) -> Vec<String> {
    let f = c.read().expect("an invalidation");
    let mut k = keys_of(&f).unwrap_or_else(|| panic!("null invalidation: {f}"));
    k.sort();
    k
}

fn keys(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn resp3(port: u16) -> Conn {
    let mut c = Conn::open(port);
    assert!(matches!(c.cmd("HELLO 3"), Frame::Map(_)));
    c
}

#[test]
fn redirected_invalidations_cover_only_keys_read() {
    let srv = server();
    let (mut redir, id) = redirect_client(srv.port());
    let mut r = Conn::open(srv.port());
    assert_eq!(r.cmd(&format!("CLIENT TRACKING on REDIRECT {id}")), ok());
    r.cmd("SET a{t} 1");
    r.cmd("SET b{t} 1");
    r.cmd("GET a{t}");
    // Not read: not notified.
    r.cmd("INCR b{t}");
    r.cmd("INCR a{t}");
    assert_eq!(next_keys(&mut redir), keys(&["a{t}"]));
    // Read again, modified by another client.
    r.cmd("GET b{t}");
    Conn::open(srv.port()).cmd("DEL b{t}");
    assert_eq!(next_keys(&mut redir), keys(&["b{t}"]));
    assert_eq!(r.cmd("CLIENT TRACKING off"), ok());
}

#[test]
fn bcast_mode_with_and_without_prefixes() {
    let srv = server();
    let (mut redir, id) = redirect_client(srv.port());
    let mut r = Conn::open(srv.port());
    assert_eq!(
        r.cmd(&format!("CLIENT TRACKING on BCAST REDIRECT {id}")),
        ok()
    );
    r.cmd("MSET a{t} 1 b{t} 2 c{t} 3");
    assert_eq!(next_keys(&mut redir), keys(&["a{t}", "b{t}", "c{t}"]));
    r.cmd("CLIENT TRACKING off");
    assert_eq!(
        r.cmd(&format!(
            "CLIENT TRACKING on BCAST REDIRECT {id} PREFIX a: PREFIX b:"
        )),
        ok()
    );
    r.cmd("MULTI");
    for k in ["a:1{t}", "a:2{t}", "b:1{t}", "b:2{t}", "c:1{t}"] {
        assert_eq!(r.cmd(&format!("INCR {k}")), Frame::Simple("QUEUED".into()));
    }
    assert!(matches!(r.cmd("EXEC"), Frame::Array(_)));
    // One message per prefix, each with the prefix's keys of the whole transaction.
    let mut all = next_keys(&mut redir);
    all.extend(next_keys(&mut redir));
    all.sort();
    assert_eq!(all, keys(&["a:1{t}", "a:2{t}", "b:1{t}", "b:2{t}"]));
    // Adding a prefix keeps the others.
    assert_eq!(
        r.cmd(&format!("CLIENT TRACKING on BCAST REDIRECT {id} PREFIX c:")),
        ok()
    );
    r.cmd("INCR c:1234");
    assert_eq!(next_keys(&mut redir), keys(&["c:1234"]));
    let Frame::Array(v) = r.cmd("CLIENT TRACKINGINFO") else {
        panic!("CLIENT TRACKINGINFO")
    };
    assert_eq!(v[0], b("flags"));
    assert_eq!(v[1], Frame::Array(vec![b("on"), b("bcast")]));
    assert_eq!(v[5], Frame::Array(vec![b("a:"), b("b:"), b("c:")]));
}

#[test]
fn noloop_skips_the_clients_own_writes() {
    let srv = server();
    let (mut redir, id) = redirect_client(srv.port());
    let mut r = Conn::open(srv.port());
    let mut other = Conn::open(srv.port());
    r.cmd(&format!("CLIENT TRACKING on REDIRECT {id} NOLOOP"));
    r.cmd("MGET otherkey1{t} loopkey{t} otherkey2{t}");
    other.cmd("SET otherkey1{t} 1");
    r.cmd("SET loopkey{t} 1");
    other.cmd("SET otherkey2{t} 1");
    assert_eq!(next_keys(&mut redir), keys(&["otherkey1{t}"]));
    assert_eq!(next_keys(&mut redir), keys(&["otherkey2{t}"]));
    // BCAST too.
    r.cmd("CLIENT TRACKING off");
    r.cmd(&format!("CLIENT TRACKING on BCAST REDIRECT {id} NOLOOP"));
    other.cmd("SET otherkey1 1");
    r.cmd("SET loopkey 1");
    other.cmd("SET otherkey2 1");
    assert_eq!(next_keys(&mut redir), keys(&["otherkey1"]));
    assert_eq!(next_keys(&mut redir), keys(&["otherkey2"]));
}

#[test]
fn expired_keys_are_invalidated() {
    let srv = server();
    let (mut redir, id) = redirect_client(srv.port());
    let mut r = Conn::open(srv.port());
    r.cmd(&format!("CLIENT TRACKING on BCAST REDIRECT {id} NOLOOP"));
    r.cmd("SET mykey myval px 1");
    r.cmd("SET mykeyotherkey myval");
    // The active sweep removes it: the only key not written by the NOLOOP client itself.
    assert_eq!(next_keys(&mut redir), keys(&["mykey"]));
}

#[test]
fn lazily_expired_keys_are_invalidated() {
    let srv = common::manual_server();
    let (mut redir, id) = redirect_client(srv.port());
    let mut r = Conn::open(srv.port());
    // No active sweep (the clock moves without the test server's sweep, and the cron is
    // paused): the read itself expires the key.
    r.cmd("DEBUG PAUSE-CRON 1");
    r.cmd(&format!("CLIENT TRACKING on REDIRECT {id}"));
    r.cmd("SET lazy 1 px 100");
    assert_eq!(r.cmd("GET lazy"), b("1"));
    srv.clock().advance_ms(200);
    assert_eq!(r.cmd("GET lazy"), Frame::NullBulk);
    assert_eq!(next_keys(&mut redir), keys(&["lazy"]));
    // A RESP3 reader gets it after the reply of the read that expired it.
    let mut t = resp3(srv.port());
    t.cmd("CLIENT TRACKING on");
    t.cmd("MULTI");
    t.cmd("MSET x{t} 1 y{t} 2");
    t.cmd("PEXPIRE y{t} 100");
    t.cmd("GET y{t}");
    assert!(matches!(t.cmd("EXEC"), Frame::Array(_)));
    srv.clock().advance_ms(200);
    assert_eq!(
        t.cmd("MGET x{t} y{t}"),
        Frame::Array(vec![b("1"), Frame::Null])
    );
    assert_eq!(keys_of(&t.read().unwrap()), Some(keys(&["y{t}"])));
    r.cmd("DEBUG PAUSE-CRON 0");
}

#[test]
fn resp3_invalidations_follow_the_reply() {
    let srv = server();
    let mut r = resp3(srv.port());
    let mut other = Conn::open(srv.port());
    r.cmd("CLIENT TRACKING on");
    other.cmd("SET key1 1");
    assert_eq!(r.cmd("GET key1"), b("1"));
    other.cmd("SET key1 2");
    assert_eq!(keys_of(&r.read().unwrap()), Some(keys(&["key1"])));
    // The client's own write: the reply first, then the invalidation.
    r.cmd("HSET myhash f 1");
    r.cmd("HGET myhash f");
    assert_eq!(r.cmd("HDEL myhash f"), Frame::Int(1));
    assert_eq!(keys_of(&r.read().unwrap()), Some(keys(&["myhash"])));
    // Not interleaved with a transaction's reply.
    r.cmd("MSET a{t} 1 b{t} 2");
    r.cmd("GET a{t}");
    r.cmd("MULTI");
    r.cmd("INCR a{t}");
    r.cmd("GET b{t}");
    assert_eq!(r.cmd("EXEC"), Frame::Array(vec![Frame::Int(2), b("2")]));
    assert_eq!(keys_of(&r.read().unwrap()), Some(keys(&["a{t}"])));
    // A RESP3 client with replies off still gets them.
    r.cmd("GET key1");
    r.send_line("CLIENT REPLY off").unwrap();
    other.cmd("SET key1 3");
    assert_eq!(keys_of(&r.read().unwrap()), Some(keys(&["key1"])));
    assert_eq!(r.cmd("CLIENT REPLY on"), ok());
    assert_eq!(r.cmd("PING"), Frame::Simple("PONG".into()));
}

#[test]
fn switching_protocols_and_bcast() {
    let srv = server();
    let (mut redir, id) = redirect_client(srv.port());
    let mut r = Conn::open(srv.port());
    let mut other = Conn::open(srv.port());
    r.cmd(&format!("CLIENT TRACKING on REDIRECT {id}"));
    other.cmd("SET key1 1");
    r.cmd("GET key1");
    r.cmd("HELLO 3");
    other.cmd("SET key1 2");
    assert_eq!(next_keys(&mut redir), keys(&["key1"]));
    // After switching to BCAST, keys read before give nothing.
    r.cmd("CLIENT TRACKING off");
    r.cmd("CLIENT TRACKING on");
    other.cmd("SET key1 1");
    r.cmd("GET key1");
    r.cmd("CLIENT TRACKING off");
    r.cmd("CLIENT TRACKING on BCAST");
    other.cmd("INCR key1");
    assert_eq!(keys_of(&r.read().unwrap()), Some(keys(&["key1"])));
    assert_eq!(r.cmd("PING"), Frame::Simple("PONG".into()));
}

#[test]
fn scripts_track_the_keys_of_the_reads_they_run() {
    let srv = server();
    let mut r = resp3(srv.port());
    let mut other = Conn::open(srv.port());
    r.cmd("CLIENT TRACKING on");
    other.cmd("MSET key2{t} 1 key1{t} 1");
    r.call(&[
        b"EVAL".to_vec(),
        b"redis.call('set', 'key3{t}', 'bar')".to_vec(),
        b"2".to_vec(),
        b"key1{t}".to_vec(),
        b"key2{t}".to_vec(),
    ])
    .unwrap();
    other.cmd("MSET key2{t} 2 key1{t} 2");
    assert_eq!(r.cmd("PING"), Frame::Simple("PONG".into()));
    for eval in ["EVAL", "EVAL_RO"] {
        r.call(&[
            eval.as_bytes().to_vec(),
            b"redis.call('get', 'key2{t}')".to_vec(),
            b"2".to_vec(),
            b"key1{t}".to_vec(),
            b"key2{t}".to_vec(),
        ])
        .unwrap();
        other.cmd("MSET key2{t} 2 key3{t} 2");
        assert_eq!(keys_of(&r.read().unwrap()), Some(keys(&["key2{t}"])));
        assert_eq!(r.cmd("PING"), Frame::Simple("PONG".into()));
    }
}

#[test]
fn optin_and_optout() {
    let srv = server();
    let (mut redir, id) = redirect_client(srv.port());
    let mut r = Conn::open(srv.port());
    let mut other = Conn::open(srv.port());
    r.cmd(&format!("CLIENT TRACKING on OPTIN REDIRECT {id}"));
    other.cmd("SET key1 1");
    r.cmd("GET key1");
    other.cmd("SET key1 2");
    // CACHING yes lasts for the next command only (CLIENT subcommands aside).
    assert_eq!(r.cmd("CLIENT CACHING yes"), ok());
    r.cmd("CLIENT ID");
    r.cmd("GET key2");
    r.cmd("GET key3");
    other.cmd("MSET key3 1 key2 1");
    assert_eq!(next_keys(&mut redir), keys(&["key2"]));
    // In a transaction: the whole transaction.
    r.cmd("CLIENT CACHING yes");
    r.cmd("MULTI");
    r.cmd("GET t1");
    r.cmd("GET t2");
    r.cmd("EXEC");
    other.cmd("SET t2 x");
    assert_eq!(next_keys(&mut redir), keys(&["t2"]));
    r.cmd("CLIENT TRACKING off");
    r.cmd(&format!("CLIENT TRACKING on OPTOUT REDIRECT {id}"));
    r.cmd("CLIENT CACHING no");
    r.cmd("GET key1");
    r.cmd("GET key4");
    other.cmd("MSET key1 9 key4 9");
    assert_eq!(next_keys(&mut redir), keys(&["key4"]));
}

#[test]
fn broken_redirect_is_reported() {
    let srv = server();
    let (mut redir, id) = redirect_client(srv.port());
    let mut r = resp3(srv.port());
    let mut other = Conn::open(srv.port());
    r.cmd(&format!("CLIENT TRACKING on REDIRECT {id}"));
    other.cmd("SET key1 1");
    r.cmd("GET key1");
    assert_eq!(redir.cmd("QUIT"), ok());
    drop(redir);
    // The redirection client is gone once its id is unknown.
    common::wait_until("redirect client gone", || {
        let l = other.cmd("CLIENT LIST");
        let Frame::Bulk(l) = l else { return false };
        !String::from_utf8_lossy(&l).contains(&format!("id={id} "))
    });
    other.cmd("SET key1 2");
    assert_eq!(
        r.read().unwrap(),
        Frame::Push(vec![b("tracking-redir-broken"), Frame::Int(id)])
    );
    let info = r.cmd("CLIENT TRACKINGINFO");
    assert_eq!(
        info,
        Frame::Map(vec![
            (b("flags"), Frame::Set(vec![b("on"), b("broken_redirect")])),
            (b("redirect"), Frame::Int(id)),
            (b("prefixes"), Frame::Array(vec![])),
        ])
    );
    let Frame::Verbatim(_, line) = r.cmd("CLIENT INFO") else {
        panic!("CLIENT INFO")
    };
    let line = String::from_utf8_lossy(&line).into_owned();
    assert!(line.contains(" flags=tR "), "{line}");
    assert!(line.contains(&format!(" redir={id} ")), "{line}");
}

#[test]
fn flushes_send_the_null_invalidation() {
    let srv = server();
    let (mut redir, id) = redirect_client(srv.port());
    let mut r = Conn::open(srv.port());
    let mut other = Conn::open(srv.port());
    r.cmd(&format!("CLIENT TRACKING on REDIRECT {id}"));
    r.cmd("GET key1");
    r.cmd("GET key2");
    assert_eq!(
        common::conn_info_int(&mut other, "stats", "tracking_total_keys"),
        2
    );
    other.cmd("FLUSHALL ASYNC");
    assert_eq!(
        common::conn_info_int(&mut other, "stats", "tracking_total_keys"),
        0
    );
    let f = redir.read().unwrap();
    assert_eq!(
        f,
        Frame::Array(vec![
            b("message"),
            b("__redis__:invalidate"),
            Frame::NullBulk
        ])
    );
    r.cmd("GET key1");
    other.cmd("FLUSHDB");
    assert_eq!(keys_of(&redir.read().unwrap()), None);
    // RESP3, inside a transaction: after EXEC's reply.
    let mut t = resp3(srv.port());
    t.cmd("CLIENT TRACKING on");
    t.cmd("SET a{t} 1");
    t.cmd("GET a{t}");
    t.cmd("MULTI");
    t.cmd("FLUSHDB");
    assert_eq!(t.cmd("EXEC"), Frame::Array(vec![ok()]));
    assert_eq!(
        t.read().unwrap(),
        Frame::Push(vec![b("invalidate"), Frame::Null])
    );
}

#[test]
fn tracking_table_max_keys_evicts_with_invalidations() {
    let srv = server();
    let (mut redir, id) = redirect_client(srv.port());
    let mut r = Conn::open(srv.port());
    r.cmd(&format!("CLIENT TRACKING on REDIRECT {id}"));
    for i in 0..250 {
        r.cmd(&format!("GET key{i}"));
    }
    assert_eq!(r.cmd("CONFIG SET tracking-table-max-keys 1"), ok());
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..249 {
        let k = next_keys(&mut redir);
        assert_eq!(k.len(), 1);
        assert!(seen.insert(k[0].clone()), "{k:?} twice");
    }
    // Exactly 249: the next reply on the subscribed connection is its PING's.
    assert_eq!(redir.cmd("PING"), Frame::Array(vec![b("pong"), b("")]));
    assert_eq!(
        common::conn_info_int(&mut r, "stats", "tracking_total_keys"),
        1
    );
    r.cmd("CONFIG SET tracking-table-max-keys 1000000");
}

#[test]
fn info_getredir_and_trackinginfo() {
    let srv = server();
    let (_redir, id) = redirect_client(srv.port());
    let mut r = Conn::open(srv.port());
    let mut bc = Conn::open(srv.port());
    let mut other = Conn::open(srv.port());
    assert_eq!(r.cmd("CLIENT GETREDIR"), Frame::Int(-1));
    assert_eq!(
        r.cmd("CLIENT TRACKINGINFO"),
        Frame::Array(vec![
            b("flags"),
            Frame::Array(vec![b("off")]),
            b("redirect"),
            Frame::Int(-1),
            b("prefixes"),
            Frame::Array(vec![]),
        ])
    );
    r.cmd(&format!("CLIENT TRACKING on REDIRECT {id}"));
    other.cmd("SET key1 1");
    other.cmd("SET key2 2");
    r.cmd("GET key1");
    r.cmd("GET key2");
    assert_eq!(bc.cmd("CLIENT TRACKING on BCAST PREFIX prefix:"), ok());
    other.cmd("SET prefix:key1 1");
    other.cmd("SET prefix:key2 2");
    for (field, want) in [
        ("tracking_total_items", 2),
        ("tracking_total_keys", 2),
        ("tracking_total_prefixes", 1),
    ] {
        assert_eq!(
            common::conn_info_int(&mut other, "stats", field),
            want,
            "{field}"
        );
    }
    assert_eq!(
        common::conn_info_int(&mut other, "clients", "tracking_clients"),
        2
    );
    assert_eq!(r.cmd("CLIENT GETREDIR"), Frame::Int(id));
    let Frame::Bulk(line) = bc.cmd("CLIENT INFO") else {
        panic!("CLIENT INFO")
    };
    let line = String::from_utf8_lossy(&line).into_owned();
    assert!(
        line.contains(" flags=tB ") && line.contains(" redir=0 "),
        "{line}"
    );
    r.cmd("CLIENT TRACKING off");
    assert_eq!(r.cmd("CLIENT GETREDIR"), Frame::Int(-1));
    r.cmd("CLIENT TRACKING on");
    assert_eq!(r.cmd("CLIENT GETREDIR"), Frame::Int(0));
    let info = |c: &mut Conn| match c.cmd("CLIENT TRACKINGINFO") {
        Frame::Array(v) => v,
        other => panic!("{other}"),
    };
    let flags = |v: &[&str]| Frame::Array(v.iter().map(|s| b(s)).collect());
    r.cmd(&format!("CLIENT TRACKING on REDIRECT {id} noloop"));
    let v = info(&mut r);
    assert_eq!(v[1], flags(&["on", "noloop"]));
    assert_eq!(v[3], Frame::Int(id));
    r.cmd("CLIENT TRACKING off");
    r.cmd("CLIENT TRACKING on optin");
    assert_eq!(info(&mut r)[1], flags(&["on", "optin"]));
    r.cmd("CLIENT CACHING yes");
    assert_eq!(info(&mut r)[1], flags(&["on", "optin", "caching-yes"]));
    r.cmd("CLIENT TRACKING off");
    r.cmd("CLIENT TRACKING on optout");
    r.cmd("CLIENT CACHING no");
    assert_eq!(info(&mut r)[1], flags(&["on", "optout", "caching-no"]));
    r.cmd("CLIENT TRACKING off");
    r.cmd("CLIENT TRACKING on BCAST");
    assert_eq!(info(&mut r)[5], Frame::Array(vec![b("")]));
    // Closing the connections drops them from the count.
    drop(bc);
    r.cmd("RESET");
    common::wait_until("no tracking clients", || {
        common::conn_info_int(&mut other, "clients", "tracking_clients") == 0
    });
}

#[test]
fn a_blocked_client_served_later_gets_its_invalidation_after_the_reply() {
    let srv = server();
    let mut r = Conn::open(srv.port());
    let mut rd = resp3(srv.port());
    r.cmd("RPUSH list2{t} a");
    rd.cmd("CLIENT TRACKING on");
    rd.cmd("LRANGE list2{t} 0 -1");
    rd.send_line("BLMOVE list1{t} list2{t} left left 0")
        .unwrap();
    common::until_blocked_sync(&mut r, 1);
    r.cmd("RPUSH list1{t} foo");
    assert_eq!(rd.read().unwrap(), b("foo"));
    assert_eq!(keys_of(&rd.read().unwrap()), Some(keys(&["list2{t}"])));
}

#[test]
fn a_resp3_redirection_client_needs_no_subscription() {
    let srv = server();
    let mut target = resp3(srv.port());
    let Frame::Int(tid) = target.cmd("CLIENT ID") else {
        panic!()
    };
    let mut r = Conn::open(srv.port());
    r.cmd(&format!("CLIENT TRACKING on REDIRECT {tid}"));
    r.cmd("GET foo");
    target.send_line("CLIENT REPLY off").unwrap();
    Conn::open(srv.port()).cmd("SET foo bar2");
    assert_eq!(keys_of(&target.read().unwrap()), Some(keys(&["foo"])));
    assert_eq!(target.cmd("CLIENT REPLY on"), ok());
    assert_eq!(target.cmd("PING"), Frame::Simple("PONG".into()));
}

/// rueidis opens with HELLO 3 and CLIENT TRACKING on OPTIN in one pipeline, then reads
/// with CLIENT CACHING yes + the read command pipelined (its `DoCache`).
#[test]
fn rueidis_style_startup_pipeline() {
    let srv = server();
    let mut c = Conn::open(srv.port());
    c.send_all(&[
        &["HELLO", "3"],
        &["CLIENT", "TRACKING", "ON", "OPTIN"],
        &["CLIENT", "CACHING", "YES"],
        &["GET", "k"],
        &["PTTL", "k"],
    ])
    .unwrap();
    assert!(matches!(c.read().unwrap(), Frame::Map(_)));
    assert_eq!(c.read().unwrap(), ok());
    assert_eq!(c.read().unwrap(), ok());
    assert_eq!(c.read().unwrap(), Frame::Null);
    assert_eq!(c.read().unwrap(), Frame::Int(-2));
    Conn::open(srv.port()).cmd("SET k v");
    assert_eq!(keys_of(&c.read().unwrap()), Some(keys(&["k"])));
    // Its cached read: CACHING YES, then the reads in a transaction, all tracked.
    c.send_all(&[
        &["CLIENT", "CACHING", "YES"],
        &["MULTI"],
        &["PTTL", "k2"],
        &["GET", "k2"],
        &["EXEC"],
        &["GET", "k3"],
    ])
    .unwrap();
    for want in [
        ok(),
        ok(),
        Frame::Simple("QUEUED".into()),
        Frame::Simple("QUEUED".into()),
        Frame::Array(vec![Frame::Int(-2), Frame::Null]),
        Frame::Null,
    ] {
        assert_eq!(c.read().unwrap(), want);
    }
    // k3 was read after the transaction, without CACHING YES: not tracked.
    Conn::open(srv.port()).cmd("MSET k3 x k2 y");
    assert_eq!(keys_of(&c.read().unwrap()), Some(keys(&["k2"])));
    assert_eq!(c.cmd("PING"), Frame::Simple("PONG".into()));
}

/// Option errors, in Redis's order and words.
fn option_errors(port: u16) -> Vec<Frame> {
    let mut c = Conn::open(port);
    let mut out = Vec::new();
    for line in [
        "CLIENT TRACKING maybe",
        "CLIENT TRACKING on BOGUS",
        "CLIENT TRACKING on REDIRECT",
        "CLIENT TRACKING on REDIRECT x",
        "CLIENT TRACKING on REDIRECT 999999",
        "CLIENT TRACKING on PREFIX a",
        "CLIENT TRACKING on BCAST OPTIN",
        "CLIENT TRACKING on OPTIN OPTOUT",
        "CLIENT CACHING yes",
        "CLIENT TRACKING on BCAST PREFIX FOOBAR PREFIX FOO",
        "CLIENT TRACKING on BCAST PREFIX FOO PREFIX FOOBAR",
        "CLIENT TRACKING on BCAST PREFIX FOO PREFIX BAR",
        "CLIENT TRACKING on BCAST PREFIX FO",
        "CLIENT TRACKING on BCAST PREFIX BARB",
        "CLIENT TRACKING on BCAST PREFIX BAR",
        "CLIENT TRACKING on",
        "CLIENT TRACKINGINFO",
        "CLIENT CACHING yes",
        "CLIENT TRACKING off",
        "CLIENT TRACKING on OPTIN",
        "CLIENT TRACKING on OPTOUT",
        "CLIENT CACHING no",
        "CLIENT CACHING maybe",
        "CLIENT CACHING yes",
        "CLIENT TRACKINGINFO",
        "CLIENT GETREDIR",
        "CLIENT TRACKING off",
        "CLIENT TRACKING off",
        "CLIENT TRACKINGINFO",
    ] {
        out.push(c.cmd(line));
    }
    out
}

/// The same client's own invalidations, and the redirection messages, as redis-server 7.0
/// sends them (deterministic: each is read after the write that causes it).
fn own_flow(port: u16) -> Vec<Frame> {
    let mut out = Vec::new();
    let (mut redir, id) = redirect_client(port);
    let mut r = resp3(port);
    let mut other = Conn::open(port);
    out.push(r.cmd("CLIENT TRACKING on"));
    out.push(r.cmd("SET k 1"));
    out.push(r.cmd("GET k"));
    out.push(r.cmd("SET k 2"));
    out.push(r.read().unwrap());
    out.push(r.cmd("MGET k a b"));
    out.push(other.cmd("MSET a 1 b 2 k 3"));
    for _ in 0..3 {
        out.push(r.read().unwrap());
    }
    out.push(r.cmd("GET k"));
    out.push(other.cmd("FLUSHDB"));
    out.push(r.read().unwrap());
    out.push(r.cmd("CLIENT TRACKING off"));
    out.push(r.cmd(&format!("CLIENT TRACKING on BCAST PREFIX p: REDIRECT {id}")));
    out.push(other.cmd("MSET p:1 1 q:1 1 p:2 2"));
    out.push(redir.read().unwrap());
    r.cmd("HELLO 2");
    out.push(r.cmd("CLIENT TRACKING off"));
    out.push(r.cmd(&format!("CLIENT TRACKING on REDIRECT {id}")));
    out.push(r.cmd("GET z"));
    out.push(other.cmd("FLUSHALL"));
    out.push(redir.read().unwrap());
    out.push(r.cmd("GET z"));
    out.push(other.cmd("SET z 1"));
    out.push(redir.read().unwrap());
    out
}

#[test]
fn matches_redis_7_0() {
    let ours = server();
    let redis = ServerProcess::redis();
    assert_eq!(option_errors(ours.port()), option_errors(redis.port));
    assert_eq!(own_flow(ours.port()), own_flow(redis.port));
}

/// A key evicted by `maxmemory` is invalidated like a modified one (the respite binary:
/// its counting allocator is what `used_memory` and eviction measure).
#[test]
fn evicted_keys_are_invalidated() {
    let srv = ServerProcess::respite(&[]);
    let mut r = resp3(srv.port);
    let mut w = Conn::open(srv.port);
    r.cmd("CLIENT TRACKING on");
    w.cmd("CONFIG SET maxmemory-policy volatile-random");
    w.cmd("SETEX volatile-key 10000 x");
    assert_eq!(r.cmd("GET volatile-key"), b("x"));
    let used = common::conn_info_int(&mut w, "memory", "used_memory");
    w.cmd(&format!("CONFIG SET maxmemory {}", used + 100 * 1024));
    // 200 KB more: the next command evicts the only volatile key.
    w.cmd("SETBIT big-key 1600000 0");
    w.cmd("PING");
    assert_eq!(keys_of(&r.read().unwrap()), Some(keys(&["volatile-key"])));
    assert_eq!(w.cmd("EXISTS volatile-key"), Frame::Int(0));
    w.cmd("CONFIG SET maxmemory 0");
}
