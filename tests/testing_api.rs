//! The test-double API (`respite::testing`): clock, seeding, inspection, assertions, and the
//! README's "Using respite in tests" example.

mod common;

use respite::testing::TestServer;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

fn panic_text(f: impl FnOnce()) -> String {
    let e = catch_unwind(AssertUnwindSafe(f)).expect_err("should panic");
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

// The README example, verbatim.
#[tokio::test]
async fn readme_example() -> redis::RedisResult<()> {
    let srv = respite::TestServer::builder()
        .manual_clock()
        .start_async()
        .await?;
    let client = redis::Client::open(srv.url())?;
    let mut con = client.get_multiplexed_async_connection().await?;

    redis::cmd("SET")
        .arg("greeting")
        .arg("hi")
        .arg("PX")
        .arg(1000)
        .exec_async(&mut con)
        .await?;
    srv.assert_str("greeting", "hi"); // inspect without a client

    srv.advance(Duration::from_millis(1001)); // expires exactly past its deadline
    let v: Option<String> = redis::cmd("GET")
        .arg("greeting")
        .query_async(&mut con)
        .await?;
    assert_eq!(v, None);
    srv.assert_missing("greeting");
    Ok(())
}

#[test]
fn manual_clock_expires_strictly_after_the_deadline() {
    let srv = TestServer::builder().clock_at(1_000_000).start().unwrap();
    assert_eq!(srv.run_text(&["SET", "k", "v", "PX", "1000"]), "OK");
    srv.advance(Duration::from_millis(999));
    srv.assert_str("k", "v");
    assert_eq!(srv.ttl("k"), Some(Duration::from_millis(1)));
    // Redis: expired when now > deadline, so at exactly +1000 ms it is still there.
    srv.advance(Duration::from_millis(1));
    srv.assert_str("k", "v");
    srv.advance(Duration::from_millis(1));
    srv.assert_missing("k");
    // Removed by the sweep too, not only lazily.
    assert_eq!(srv.shared().ks.dbsize(0), 0);
}

#[test]
fn sweep_removes_expired_keys_without_access() {
    let srv = TestServer::builder().manual_clock().start().unwrap();
    srv.set_ex("a", "1", Duration::from_millis(50));
    srv.set("b", "2");
    assert_eq!(srv.shared().ks.dbsize(0), 2);
    srv.advance(Duration::from_millis(51));
    assert_eq!(srv.shared().ks.dbsize(0), 1);
}

#[test]
fn set_time_time_and_expireat_follow_the_manual_clock() {
    let srv = TestServer::builder()
        .clock_at(1_700_000_000_123)
        .start()
        .unwrap();
    assert_eq!(srv.run_text(&["TIME"]), "1700000000 123000");
    srv.set("k", "v");
    srv.command(&[b"EXPIREAT", b"k", b"1700000010"]);
    assert_eq!(srv.ttl("k"), Some(Duration::from_millis(9877)));
    srv.set_time(1_700_000_010_000);
    srv.assert_str("k", "v");
    srv.set_time(1_700_000_010_001);
    srv.assert_missing("k");
    assert_eq!(srv.run_text(&["TIME"]), "1700000010 1000");
    // Stream auto-IDs take the clock's milliseconds.
    assert_eq!(srv.xadd("s", &[("f", "v")]), "1700000010001-0");
    assert_eq!(srv.xadd("s", &[("f", "w")]), "1700000010001-1");
}

#[test]
fn real_clock_and_switching_back() {
    let srv = TestServer::start().unwrap();
    let sys = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(srv.now_ms().abs_diff(sys) < 1000);
    let msg = panic_text(|| srv.advance(Duration::from_secs(1)));
    assert!(msg.contains("manual clock"), "{msg}");

    let m = TestServer::builder().clock_at(1_000).start().unwrap();
    m.set_ex("k", "v", Duration::from_secs(10));
    m.real(); // now decades past the deadline
    m.assert_missing("k");
    assert!(m.now_ms().abs_diff(sys) < 5000);
}

#[test]
fn seeded_servers_repeat_every_random_command() {
    fn run(seed: u64) -> Vec<String> {
        let srv = TestServer::builder().seed(seed).start().unwrap();
        let many: Vec<String> = (0..200).map(|i| format!("m{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        srv.sadd("s", &many);
        let fields: Vec<(&str, &str)> = many.iter().map(|m| (*m, "v")).collect();
        srv.hset("h", &fields);
        let scored: Vec<(f64, &str)> = many
            .iter()
            .enumerate()
            .map(|(i, m)| (i as f64, *m))
            .collect();
        srv.zadd("z", &scored);
        for m in &many[..50] {
            srv.set(m, "x");
        }
        let mut out = Vec::new();
        for cmd in [
            &["SRANDMEMBER", "s", "5"][..],
            &["SRANDMEMBER", "s", "-5"],
            &["SRANDMEMBER", "s"],
            &["SPOP", "s"],
            &["SPOP", "s", "3"],
            &["HRANDFIELD", "h", "4"],
            &["HRANDFIELD", "h", "-4"],
            &["HRANDFIELD", "h"],
            &["ZRANDMEMBER", "z", "4"],
            &["ZRANDMEMBER", "z", "-4", "WITHSCORES"],
            &["ZRANDMEMBER", "z"],
            &["RANDOMKEY"],
            &["RANDOMKEY"],
            &[
                "EVAL",
                "return {math.random(1000000), math.random(1000000)}",
                "0",
            ],
        ] {
            out.push(srv.run_text(cmd));
        }
        out
    }
    let a = run(42);
    assert_eq!(a[8].split(' ').count(), 4, "{a:?}");
    assert_eq!(a, run(42));
    assert_ne!(a, run(43));
}

#[test]
fn inspection_reads_and_seeds() {
    let srv = TestServer::start().unwrap();
    srv.set("s", "v");
    srv.hset("h", &[("f1", "a"), ("f2", "b")]);
    srv.sadd("set", &["x", "y"]);
    srv.rpush("l", &["1", "2", "3"]);
    srv.zadd("z", &[(1.5, "one"), (2.0, "two")]);
    assert_eq!(srv.get("s").as_deref(), Some("v"));
    assert_eq!(srv.get("nope"), None);
    assert_eq!(srv.hget("h", "f2").as_deref(), Some("b"));
    assert_eq!(srv.hgetall("h").len(), 2);
    assert!(srv.members("set").contains("y"));
    assert_eq!(srv.zscore("z", "one"), Some(1.5));
    assert_eq!(
        srv.zrange("z", 0, -1),
        vec![("one".to_string(), 1.5), ("two".to_string(), 2.0)]
    );
    assert_eq!(srv.lrange("l", 1, -1), vec!["2", "3"]);
    assert_eq!(srv.keys("*"), vec!["h", "l", "s", "set", "z"]);
    assert_eq!(srv.ttl("s"), None);

    let id = srv.xadd("st", &[("a", "1")]);
    let e = srv.stream_entries("st");
    assert_eq!(
        e,
        vec![(id.clone(), vec![("a".to_string(), "1".to_string())])]
    );
    srv.command(&[b"XGROUP", b"CREATE", b"st", b"g", b"0"]);
    srv.command(&[
        b"XREADGROUP",
        b"GROUP",
        b"g",
        b"c1",
        b"STREAMS",
        b"st",
        b">",
    ]);
    let p = srv.pending("st", "g");
    assert_eq!(p.len(), 1);
    assert_eq!(
        (p[0].id.as_str(), p[0].consumer.as_str(), p[0].deliveries),
        (id.as_str(), "c1", 1)
    );

    // Other dbs, and what a client sees.
    srv.db(2).set("k", "in2");
    srv.assert_missing("k");
    srv.db(2).assert_str("k", "in2");
    let mut con = redis::Client::open(srv.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let v: String = redis::cmd("HGET")
        .arg("h")
        .arg("f1")
        .query(&mut con)
        .unwrap();
    assert_eq!(v, "a");
    // The hidden session is no client.
    let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
    assert_eq!(clients.lines().count(), 1, "{clients}");

    srv.assert_hash("h", &[("f1", "a"), ("f2", "b")]);
    srv.assert_members("set", &["y", "x"]);
    srv.assert_list("l", &["1", "2", "3"]);
    srv.assert_zset("z", &[("one", 1.5), ("two", 2.0)]);
}

#[test]
fn assertion_failures_show_type_and_content() {
    let srv = TestServer::builder().manual_clock().start().unwrap();
    srv.hset("h", &[("f", "v")]);
    srv.set_ex("s", "actual", Duration::from_secs(5));
    let m = panic_text(|| srv.assert_str("h", "v"));
    assert_eq!(
        m,
        r#"key "h" in db 0: expected string "v", found hash {"f": "v"}"#
    );
    let m = panic_text(|| srv.assert_str("s", "other"));
    assert_eq!(
        m,
        r#"key "s" in db 0: expected string "other", found string "actual" (ttl 5000 ms)"#
    );
    let m = panic_text(|| srv.assert_missing("h"));
    assert!(
        m.contains(r#"expected missing, found hash {"f": "v"}"#),
        "{m}"
    );
    let m = panic_text(|| srv.assert_hash("nope", &[("f", "v")]));
    assert!(m.ends_with("found missing"), "{m}");
    let m = panic_text(|| {
        srv.get("h");
    });
    assert!(m.contains("WRONGTYPE"), "{m}");
}

#[test]
fn resp3_only_refuses_hello_2_and_password_is_required() {
    let srv = TestServer::builder()
        .resp3_only()
        .password("pw")
        .start()
        .unwrap();
    let mut s = std::net::TcpStream::connect(srv.addr()).unwrap();
    use std::io::{Read, Write};
    s.write_all(b"PING\r\nHELLO 2 AUTH default pw\r\nAUTH pw\r\nGET k\r\nHELLO 3\r\nGET k\r\n")
        .unwrap();
    let mut got = String::new();
    let mut buf = vec![0u8; 1024];
    // The last reply is RESP3's null.
    while !got.ends_with("_\r\n") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed after {got:?}");
        got.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let lines: Vec<&str> = got.split("\r\n").collect();
    assert!(lines[0].starts_with("-NOAUTH"), "{got}");
    assert_eq!(lines[1], "-NOPROTO unsupported protocol version");
    assert_eq!(lines[2], "+OK");
    assert_eq!(
        lines[3],
        "-NOPROTO this test server speaks only RESP3: send HELLO 3 first"
    );
    assert!(lines[4].starts_with('%'), "HELLO 3 answers a map: {got}");
    assert_eq!(lines.iter().rev().nth(1), Some(&"_"), "{got}");
}

/// A RESP3 client library works unchanged against a `resp3_only()` server.
#[tokio::test]
async fn resp3_only_serves_a_resp3_client() {
    let srv = TestServer::builder()
        .resp3_only()
        .start_async()
        .await
        .unwrap();
    let mut c = common::connect_url(&format!("{}?protocol=resp3", srv.url())).await;
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("f")
        .arg("v")
        .query_async(&mut c)
        .await
        .unwrap();
    let v: redis::Value = redis::cmd("HGETALL")
        .arg("h")
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(matches!(v, redis::Value::Map(_)), "{v:?}");
    // A RESP2 client does not get past its first command.
    let mut c = common::connect_url(&srv.url()).await;
    let e = redis::cmd("GET")
        .arg("h")
        .query_async::<Option<String>>(&mut c)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some("NOPROTO"), "{e}");
}

#[test]
fn explicit_port() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let srv = TestServer::builder().port(port).start().unwrap();
    assert_eq!(srv.port(), port);
    assert_eq!(srv.url(), format!("redis://127.0.0.1:{port}"));
    drop(srv);
    // Stopped on drop: the port is free again.
    std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
}

#[test]
fn lazy_expiry_at_the_clock_without_a_sweep() {
    let srv = TestServer::builder().clock_at(5_000).start().unwrap();
    srv.set_ex("k", "v", Duration::from_millis(10));
    // Move the clock alone (no sweep): the key is still stored, but reads see it gone.
    srv.clock().advance_ms(11);
    assert_eq!(srv.shared().ks.dbsize(0), 1);
    assert_eq!(srv.get("k"), None);
    assert_eq!(srv.shared().ks.dbsize(0), 0);
}

#[tokio::test]
async fn blocking_timeouts_stay_on_real_time() {
    let srv = TestServer::builder()
        .manual_clock()
        .start_async()
        .await
        .unwrap();
    let mut con = common::connect_url(&srv.url()).await;
    let t = std::time::Instant::now();
    // A frozen clock does not stop the 0.2 s timeout.
    let v: Option<(String, String)> = redis::cmd("BLPOP")
        .arg("q")
        .arg(0.2)
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(v, None);
    let waited = t.elapsed();
    assert!(waited >= Duration::from_millis(190), "{waited:?}");
}

/// The code blocks under "Using respite in tests" in the README are the files CI runs:
/// `readme_example` above (compared ignoring formatting, as rustfmt wraps it differently),
/// and the Python and Node examples that `scripts/test.sh` runs through `examples/run.sh`.
#[test]
fn readme_examples_are_the_tested_files() {
    let root = env!("CARGO_MANIFEST_DIR");
    let read = |p: &str| std::fs::read_to_string(format!("{root}/{p}")).expect(p);
    let readme = read("README.md");
    let section = &readme[readme
        .find("## Using respite in tests")
        .expect("README section")..];
    let block = |lang: &str| -> String {
        let open = format!("```{lang}\n");
        let start = section.find(&open).expect(lang) + open.len();
        let len = section[start..].find("```\n").expect("closing fence");
        section[start..start + len].to_string()
    };
    assert_eq!(block("python"), read("examples/python/test_respite.py"));
    assert_eq!(block("js"), read("examples/node/respite.test.mjs"));

    let squash = |s: &str| s.split_whitespace().collect::<String>();
    let this = read("tests/testing_api.rs");
    let start = this
        .find("#[tokio::test]\nasync fn readme_example")
        .unwrap();
    let end = start + this[start..].find("\n}\n").unwrap() + 3;
    // The file imports Duration at its top, as the README block does.
    let rust = block("rust").replace("use std::time::Duration;", "");
    assert!(this.contains("use std::time::Duration;"));
    assert_eq!(squash(&rust), squash(&this[start..end]));
}

/// Inspection runs commands in-process but leaves nothing a client could observe: no client
/// id used up, no commandstats, no keyspace hits or misses, no access-time update.
#[test]
fn inspection_leaves_no_trace() {
    let srv = TestServer::builder().manual_clock().start().unwrap();
    srv.set("k", "v");
    srv.advance(Duration::from_secs(10));
    assert_eq!(srv.get("k").as_deref(), Some("v"));
    assert_eq!(srv.get("missing"), None);
    let _ = srv.run_text(&["NOSUCHCOMMAND"]);
    let client = redis::Client::open(srv.url()).unwrap();
    let mut c = client.get_connection().unwrap();
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut c).unwrap();
    assert_eq!(id, 1, "the first client gets id 1, as on a fresh Redis");
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut c)
        .unwrap();
    assert!(!stats.contains("cmdstat_set"), "{stats}");
    assert!(!stats.contains("cmdstat_get"), "{stats}");
    let info: String = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
    for field in [
        "keyspace_hits:0",
        "keyspace_misses:0",
        "total_error_replies:0",
    ] {
        assert!(info.contains(field), "{field} in {info}");
    }
    // (OBJECT itself counts a keyspace hit, as in Redis: so it comes after INFO.)
    let idle: i64 = redis::cmd("OBJECT")
        .arg("IDLETIME")
        .arg("k")
        .query(&mut c)
        .unwrap();
    assert_eq!(idle, 10, "inspection does not touch the key");
}

/// INFO keyspace's `avg_ttl`: the mean remaining TTL in ms of the keys that have one (0
/// when none has), following the clock; keys without a TTL do not count.
#[test]
fn info_keyspace_avg_ttl_is_the_mean_remaining_ttl() {
    let srv = TestServer::builder().clock_at(1_000_000).start().unwrap();
    let line = |srv: &TestServer| {
        let info = srv.run_text(&["INFO", "keyspace"]);
        info.lines()
            .find(|l| l.starts_with("db0:"))
            .map(str::to_string)
            .unwrap_or_default()
    };
    srv.set("plain", "1");
    assert_eq!(line(&srv), "db0:keys=1,expires=0,avg_ttl=0,subexpiry=0");
    srv.set_ex("a", "1", Duration::from_millis(10_000));
    srv.set_ex("b", "1", Duration::from_millis(30_000));
    assert_eq!(line(&srv), "db0:keys=3,expires=2,avg_ttl=20000,subexpiry=0");
    srv.advance(Duration::from_millis(4_000));
    assert_eq!(line(&srv), "db0:keys=3,expires=2,avg_ttl=16000,subexpiry=0");
    assert_eq!(srv.run_text(&["PERSIST", "b"]), "1");
    assert_eq!(line(&srv), "db0:keys=3,expires=1,avg_ttl=6000,subexpiry=0");
}
