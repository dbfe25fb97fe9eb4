//! Redis 7.4's additions outside hash-field expiration (tests/hfe*.rs): respite reports 7.4
//! (HELLO, INFO), so what 7.4 added must be there. Redis 7.0 cannot be the oracle; the
//! expectations come from Redis 7.4.1's sources and tests (db.c `scanGenericCommand`,
//! eval.c `luaScriptsLRUAdd`, server.c's INFO, networking.c's CLIENT LIST).

use redis::{Connection, Value};
use respite::TestServer;

fn conn(srv: &TestServer) -> Connection {
    redis::Client::open(srv.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

fn info_field(c: &mut Connection, section: &str, name: &str) -> String {
    let info: String = redis::cmd("INFO").arg(section).query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in INFO {section}"))
        .to_string()
}

#[test]
fn reports_version_7_4() {
    let srv = TestServer::start().unwrap();
    let mut c = conn(&srv);
    assert_eq!(info_field(&mut c, "server", "redis_version"), "7.4.1");
    let v: i64 = redis::cmd("EVAL")
        .arg("return redis.REDIS_VERSION_NUM")
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(v, 0x070401);
}

#[test]
fn hscan_novalues_gives_field_names_and_other_scans_refuse_it() {
    let srv = TestServer::start().unwrap();
    let mut c = conn(&srv);
    let _: () = redis::cmd("HSET")
        .arg(&["h", "f1", "v1", "f2", "v2"])
        .query(&mut c)
        .unwrap();
    let (cursor, mut fields): (String, Vec<String>) = redis::cmd("HSCAN")
        .arg(&["h", "0", "NOVALUES"])
        .query(&mut c)
        .unwrap();
    fields.sort();
    assert_eq!(
        (cursor.as_str(), fields),
        ("0", vec!["f1".into(), "f2".into()])
    );
    // With MATCH and COUNT around it, in any order.
    let (_, fields): (String, Vec<String>) = redis::cmd("HSCAN")
        .arg(&["h", "0", "novalues", "MATCH", "*2", "COUNT", "10"])
        .query(&mut c)
        .unwrap();
    assert_eq!(fields, ["f2"]);
    let _: () = redis::cmd("SADD").arg(&["s", "m"]).query(&mut c).unwrap();
    let _: () = redis::cmd("ZADD")
        .arg(&["z", "1", "m"])
        .query(&mut c)
        .unwrap();
    for cmd in [
        vec!["SCAN", "0", "NOVALUES"],
        vec!["SSCAN", "s", "0", "NOVALUES"],
        vec!["ZSCAN", "z", "0", "NOVALUES"],
    ] {
        let e = redis::cmd(cmd[0])
            .arg(&cmd[1..])
            .query::<Value>(&mut c)
            .unwrap_err();
        assert_eq!(
            e.detail(),
            Some("NOVALUES option can only be used in HSCAN"),
            "{cmd:?}"
        );
    }
}

#[test]
fn lua_os_clock_is_the_only_os_function() {
    let srv = TestServer::start().unwrap();
    let mut c = conn(&srv);
    let r: Vec<String> = redis::cmd("EVAL")
        .arg(
            "local t = os.clock() local n = 0 for k in pairs(os) do n = n + 1 end \
             return {type(t), tostring(t >= 0), tostring(n), type(os.time)}",
        )
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(r, ["number", "true", "1", "nil"]);
    // Sealed as the other libraries are.
    let e = redis::cmd("EVAL")
        .arg("os.clock = nil")
        .arg(0)
        .query::<Value>(&mut c)
        .unwrap_err();
    assert!(
        e.to_string().contains("Attempt to modify a readonly table"),
        "{e}"
    );
}

#[test]
fn eval_scripts_are_evicted_past_500_and_loaded_ones_stay() {
    let srv = TestServer::start().unwrap();
    let mut c = conn(&srv);
    let loaded: String = redis::cmd("SCRIPT")
        .arg(&["LOAD", "return 'loaded'"])
        .query(&mut c)
        .unwrap();
    let sha = |i: usize| -> String {
        let mut cmd = redis::cmd("SCRIPT");
        cmd.arg("LOAD").arg(format!("return {i}"));
        // SCRIPT LOAD of an EVAL'd script returns the SHA1 without changing its kind.
        cmd.query(&mut conn(&srv)).unwrap()
    };
    let mut pipe = redis::pipe();
    for i in 0..500 {
        pipe.cmd("EVAL").arg(format!("return {i}")).arg(0).ignore();
    }
    let () = pipe.query(&mut c).unwrap();
    assert_eq!(info_field(&mut c, "stats", "evicted_scripts"), "0");
    // Script 0 runs again (EVALSHA counts as a use): script 1 becomes the oldest.
    let first = sha(0);
    let v: i64 = redis::cmd("EVALSHA")
        .arg(&first)
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(v, 0);
    let second = sha(1);
    let _: i64 = redis::cmd("EVAL")
        .arg("return 500")
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(info_field(&mut c, "stats", "evicted_scripts"), "1");
    let exists: Vec<i64> = redis::cmd("SCRIPT")
        .arg(&["EXISTS", first.as_str(), second.as_str(), loaded.as_str()])
        .query(&mut c)
        .unwrap();
    assert_eq!(exists, [1, 0, 1]);
    let e = redis::cmd("EVALSHA")
        .arg(&second)
        .arg(0)
        .query::<Value>(&mut c)
        .unwrap_err();
    assert_eq!(e.code(), Some("NOSCRIPT"));
    assert_eq!(
        info_field(&mut c, "memory", "number_of_cached_scripts"),
        "501"
    );
    let () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
    assert_eq!(info_field(&mut c, "stats", "evicted_scripts"), "0");
}

#[test]
fn info_and_client_list_show_watchers_and_subscribers() {
    let srv = TestServer::start().unwrap();
    let mut a = conn(&srv);
    let mut b = conn(&srv);
    let mut sub = conn(&srv);
    let () = redis::cmd("WATCH")
        .arg(&["k1", "k2"])
        .query(&mut a)
        .unwrap();
    let () = redis::cmd("WATCH").arg(&["k2"]).query(&mut b).unwrap();
    let _: Value = redis::cmd("SUBSCRIBE").arg("ch").query(&mut sub).unwrap();
    let mut c = conn(&srv);
    assert_eq!(info_field(&mut c, "clients", "watching_clients"), "2");
    assert_eq!(info_field(&mut c, "clients", "total_watched_keys"), "2");
    assert_eq!(info_field(&mut c, "clients", "pubsub_clients"), "1");
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
    let mut watches: Vec<&str> = list
        .lines()
        .map(|l| {
            let w = l.split(' ').find(|f| f.starts_with("watch=")).expect(l);
            assert!(l.contains(&format!(" multi=-1 {w} qbuf=")), "{l}");
            w
        })
        .collect();
    watches.sort();
    assert_eq!(watches, ["watch=0", "watch=0", "watch=1", "watch=2"]);
    let () = redis::cmd("UNWATCH").query(&mut a).unwrap();
    assert_eq!(info_field(&mut c, "clients", "watching_clients"), "1");
    assert_eq!(info_field(&mut c, "clients", "total_watched_keys"), "1");
}

#[test]
fn query_buffer_disconnections_are_counted() {
    use std::io::{Read, Write};
    let srv = TestServer::start().unwrap();
    let mut c = conn(&srv);
    let f = "client_query_buffer_limit_disconnections";
    assert_eq!(info_field(&mut c, "stats", f), "0");
    let () = redis::cmd("CONFIG")
        .arg(&["SET", "client-query-buffer-limit", "1048576"])
        .query(&mut c)
        .unwrap();
    let mut s = std::net::TcpStream::connect(("127.0.0.1", srv.port())).unwrap();
    // One argument larger than the limit, sent but never finished.
    let _ = s.write_all(b"*2\r\n$3\r\nSET\r\n$4000000\r\n");
    let _ = s.write_all(&vec![b'x'; 1_200_000]);
    let mut buf = [0u8; 64];
    // The server closes the connection without a reply.
    assert!(matches!(s.read(&mut buf), Ok(0) | Err(_)));
    assert_eq!(info_field(&mut c, "stats", f), "1");
    assert_eq!(
        info_field(&mut c, "stats", "client_output_buffer_limit_disconnections"),
        "0"
    );
}

#[test]
fn keyspace_counts_hashes_with_field_deadlines() {
    let srv = TestServer::start().unwrap();
    let mut c = conn(&srv);
    let () = redis::cmd("HSET")
        .arg(&["h1", "a", "1", "b", "2"])
        .query(&mut c)
        .unwrap();
    let () = redis::cmd("HSET")
        .arg(&["h2", "a", "1"])
        .query(&mut c)
        .unwrap();
    assert_eq!(
        info_field(&mut c, "keyspace", "db0"),
        "keys=2,expires=0,avg_ttl=0,subexpiry=0"
    );
    let _: Value = redis::cmd("HEXPIRE")
        .arg(&["h1", "100", "FIELDS", "1", "a"])
        .query(&mut c)
        .unwrap();
    assert_eq!(
        info_field(&mut c, "keyspace", "db0"),
        "keys=2,expires=0,avg_ttl=0,subexpiry=1"
    );
}
