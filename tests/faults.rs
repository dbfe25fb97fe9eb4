//! The test double's faults and observation as a real client (redis-rs) sees them: injected
//! errors, delayed replies, dropped connections and reconnects, refused connections,
//! pause/resume, the command log, and the RESPITE admin family over the real binary.

mod common;

use common::{connect_url, durable_server, try_q as q, ServerProcess, HANG_GUARD};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cmd;
use respite::TestServer;
use std::time::{Duration, Instant};

fn server() -> TestServer {
    TestServer::builder()
        .param("enable-test-commands", "yes")
        .start()
        .expect("start")
}

fn err_text(e: &redis::RedisError) -> String {
    format!("{}: {}", e.code().unwrap_or(""), e.detail().unwrap_or(""))
}

#[tokio::test]
async fn injected_errors_reach_the_client() {
    let srv = server();
    let mut c = connect_url(&srv.url()).await;
    srv.fail_next(2, "READONLY You can't write against a read only replica.");
    for _ in 0..2 {
        let e = q::<String>(&mut c, cmd("SET").arg("k").arg("v"))
            .await
            .expect_err("should fail");
        assert_eq!(e.code(), Some("READONLY"), "{e}");
        assert!(err_text(&e).contains("read only replica"), "{e}");
    }
    // The failed commands did not run; the third one does.
    let v: Option<String> = q(&mut c, cmd("GET").arg("k")).await.unwrap();
    assert_eq!(v, None);
    let ok: String = q(&mut c, cmd("SET").arg("k").arg("v")).await.unwrap();
    assert_eq!(ok, "OK");
}

#[tokio::test]
async fn matching_rules_fail_only_their_commands() {
    let srv = server();
    let mut c = connect_url(&srv.url()).await;
    srv.fail_matching(Some("get"), Some("user:*"), 1, "boom");
    let _: () = q(&mut c, cmd("SET").arg("user:1").arg("x")).await.unwrap();
    let other: Option<String> = q(&mut c, cmd("GET").arg("other")).await.unwrap();
    assert_eq!(other, None);
    let e = q::<Option<String>>(&mut c, cmd("GET").arg("user:1"))
        .await
        .expect_err("matching GET fails");
    assert_eq!(e.code(), Some("ERR"));
    assert_eq!(e.detail(), Some("boom"));
    let v: Option<String> = q(&mut c, cmd("GET").arg("user:1")).await.unwrap();
    assert_eq!(v.as_deref(), Some("x"), "the rule was used up");
}

#[tokio::test]
async fn delayed_replies_take_at_least_the_delay() {
    let srv = server();
    let mut c = connect_url(&srv.url()).await;
    srv.delay_replies(Duration::from_millis(200));
    let t = Instant::now();
    let pong: String = q(&mut c, &cmd("PING")).await.unwrap();
    assert_eq!(pong, "PONG");
    assert!(
        t.elapsed() >= Duration::from_millis(200),
        "{:?}",
        t.elapsed()
    );
    srv.delay_replies(Duration::ZERO);
    let _: String = q(&mut c, &cmd("PING")).await.unwrap();
}

#[tokio::test]
async fn a_client_with_a_response_timeout_sees_the_delay_as_a_timeout() {
    let srv = server();
    let client = redis::Client::open(srv.url()).unwrap();
    let cfg =
        redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_millis(100)));
    let mut c = client
        .get_multiplexed_async_connection_with_config(&cfg)
        .await
        .unwrap();
    srv.delay_replies(Duration::from_millis(500));
    let e = q::<String>(&mut c, &cmd("PING"))
        .await
        .expect_err("timeout");
    assert!(e.is_timeout(), "{e}");
}

#[tokio::test]
async fn dropped_connections_reconnect_with_connection_manager() {
    let srv = server();
    let client = redis::Client::open(srv.url()).unwrap();
    let cfg = ConnectionManagerConfig::new()
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(Duration::from_millis(100))
        .set_number_of_retries(3);
    let mut cm: ConnectionManager = client
        .get_connection_manager_with_config(cfg)
        .await
        .unwrap();
    let _: () = q(&mut cm, cmd("SET").arg("k").arg("1")).await.unwrap();
    assert!(srv.wait_for_command("set", HANG_GUARD).await);
    let accepted = srv.connections_accepted();
    srv.drop_connections();
    let start = Instant::now();
    loop {
        match q::<Option<String>>(&mut cm, cmd("GET").arg("k")).await {
            Ok(v) => {
                assert_eq!(v.as_deref(), Some("1"));
                break;
            }
            Err(e) => {
                assert!(start.elapsed() < HANG_GUARD, "never reconnected: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    // The manager may notice the drop in the background before the GET (then the GET just
    // works) or through the GET's error; either way it had to connect again.
    assert!(srv.connections_accepted() > accepted, "no new connection");
}

#[tokio::test]
async fn refused_connections_are_accepted_after_the_window() {
    let srv = server();
    srv.refuse_connections(Duration::from_millis(300));
    let client = redis::Client::open(srv.url()).unwrap();
    let start = Instant::now();
    let first = client.get_multiplexed_async_connection().await;
    // (Only meaningful if the attempt really fell inside the window on a loaded machine.)
    if start.elapsed() < Duration::from_millis(250) {
        assert!(first.is_err(), "connected during the refusal window");
    }
    loop {
        if let Ok(mut c) = client.get_multiplexed_async_connection().await {
            let pong: String = q(&mut c, &cmd("PING")).await.unwrap();
            assert_eq!(pong, "PONG");
            break;
        }
        assert!(start.elapsed() < HANG_GUARD, "never accepted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(start.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn pause_holds_commands_until_resume() {
    let srv = server();
    let mut c = connect_url(&srv.url()).await;
    let _: String = q(&mut c, &cmd("PING")).await.unwrap();
    srv.pause();
    let mut c2 = c.clone();
    let pending = tokio::spawn(async move {
        let a: i64 = cmd("INCR").arg("n").query_async(&mut c2).await.unwrap();
        let b: i64 = cmd("INCR").arg("n").query_async(&mut c2).await.unwrap();
        (a, b)
    });
    // The command arrived (it is logged) but nothing answers it.
    assert!(srv.wait_for_command("incr", HANG_GUARD).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!pending.is_finished(), "answered while paused");
    srv.resume();
    let (a, b) = tokio::time::timeout(HANG_GUARD, pending)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((a, b), (1, 2));
}

#[tokio::test]
async fn command_log_records_arguments_per_connection() {
    let srv = server();
    let mut c = connect_url(&srv.url()).await;
    let id: u64 = q(&mut c, cmd("CLIENT").arg("ID")).await.unwrap();
    let _: () = q(&mut c, cmd("SET").arg("k").arg(b"v\x00w")).await.unwrap();
    let _: Option<String> = q(&mut c, cmd("GET").arg("k")).await.unwrap();
    assert!(srv.wait_for_command("get", HANG_GUARD).await);
    let mine = srv.commands_of(id);
    let set = mine
        .iter()
        .find(|a| a[0].eq_ignore_ascii_case(b"set"))
        .expect("SET logged");
    assert_eq!(set[1..], [&b"k"[..], &b"v\x00w"[..]]);
    assert_eq!(srv.command_count("SET"), 1);
    assert!(srv.connection_count() >= 1);
    // wait_for_command times out on commands that never come.
    assert!(
        !srv.wait_for_command("hgetall", Duration::from_millis(50))
            .await
    );
    srv.reset_command_log();
    assert!(srv.command_log().is_empty());
}

#[tokio::test]
async fn connection_manager_reconnects_across_restarts() {
    let srv = server();
    let client = redis::Client::open(srv.url()).unwrap();
    let mut cm = client.get_connection_manager().await.unwrap();
    let _: () = q(&mut cm, cmd("SET").arg("k").arg("1")).await.unwrap();
    srv.restart(true);
    let start = Instant::now();
    let v = loop {
        match q::<Option<String>>(&mut cm, cmd("GET").arg("k")).await {
            Ok(v) => break v,
            Err(_) => assert!(start.elapsed() < HANG_GUARD),
        }
    };
    assert_eq!(v.as_deref(), Some("1"), "keep_data keeps the key");
    srv.restart(false);
    let v = loop {
        match q::<Option<String>>(&mut cm, cmd("GET").arg("k")).await {
            Ok(v) => break v,
            Err(_) => assert!(start.elapsed() < HANG_GUARD),
        }
    };
    assert_eq!(v, None, "a cleared restart loses the key");
}

fn info_field(c: &mut redis::Connection, section: &str, field: &str) -> String {
    let info: String = cmd("INFO").arg(section).query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
        .to_string()
}

/// A restart is a new instance on the same port: connections drop, connects are refused
/// while it is down, and everything but the data (and the clock) starts afresh.
#[test]
fn restart_closes_the_port_and_starts_a_fresh_instance() {
    let srv = TestServer::builder()
        .manual_clock()
        .param("enable-test-commands", "yes")
        .start()
        .unwrap();
    let client = redis::Client::open(srv.url()).unwrap();
    let mut c = client.get_connection().unwrap();
    let _: () = cmd("SET")
        .arg("k")
        .arg("1")
        .arg("PX")
        .arg(5000)
        .query(&mut c)
        .unwrap();
    let _: () = cmd("HSET")
        .arg("h")
        .arg("f")
        .arg("v")
        .query(&mut c)
        .unwrap();
    let _: () = cmd("CONFIG")
        .arg("SET")
        .arg("hz")
        .arg("50")
        .query(&mut c)
        .unwrap();
    let _: String = cmd("SCRIPT")
        .arg("LOAD")
        .arg("return 1")
        .query(&mut c)
        .unwrap();
    let run_id = info_field(&mut c, "server", "run_id");
    let refused = std::thread::scope(|s| {
        let restarting = s.spawn(|| srv.restart_after(true, Duration::from_secs(1)));
        // The old instance closes this connection when it stops ...
        let start = Instant::now();
        while cmd("PING").query::<String>(&mut c).is_ok() {
            assert!(
                start.elapsed() < HANG_GUARD,
                "the connection outlived the restart"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // ... and nothing listens until the new one starts.
        let refused = std::net::TcpStream::connect(srv.addr()).map_err(|e| e.kind());
        restarting.join().unwrap();
        refused
    });
    assert_eq!(
        refused.err(),
        Some(std::io::ErrorKind::ConnectionRefused),
        "a connect while down must be refused"
    );
    let mut c = client.get_connection().unwrap();
    let v: Option<String> = cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v.as_deref(), Some("1"));
    let ttl: i64 = cmd("PTTL").arg("k").query(&mut c).unwrap();
    assert_eq!(ttl, 5000, "the TTL carries over on the same (manual) clock");
    srv.assert_hash("h", &[("f", "v")]);
    let hz: Vec<String> = cmd("CONFIG").arg("GET").arg("hz").query(&mut c).unwrap();
    assert_eq!(hz, ["hz", "10"], "CONFIG SET does not survive a restart");
    let loaded: Vec<i64> = cmd("SCRIPT")
        .arg("EXISTS")
        .arg("e0e1f9fabfc9d4800c877a703b823ac0578ff8db")
        .query(&mut c)
        .unwrap();
    assert_eq!(loaded, [0], "the script cache starts empty");
    assert_ne!(info_field(&mut c, "server", "run_id"), run_id);
    let id: i64 = cmd("CLIENT").arg("ID").query(&mut c).unwrap();
    assert_eq!(id, 1, "client ids start again");
    assert_eq!(
        info_field(&mut c, "stats", "total_connections_received"),
        "1"
    );
    // The clock still moves only when told, and expires the kept key on time.
    srv.advance(Duration::from_millis(5001));
    srv.assert_missing("k");

    srv.restart(false);
    let mut c = client.get_connection().unwrap();
    let n: i64 = cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 0, "a cleared restart starts empty");
}

/// On the durable engine a restart reopens the files: the final commit, the log replay and
/// the load all run; a cleared restart deletes them.
#[test]
fn durable_restart_reloads_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let srv = durable_server(dir.path(), "everysec");
    let client = redis::Client::open(srv.url()).unwrap();
    let mut c = client.get_connection().unwrap();
    for i in 0..100 {
        let _: () = cmd("HSET")
            .arg("h")
            .arg(i)
            .arg(i * 2)
            .query(&mut c)
            .unwrap();
    }
    let _: () = cmd("RPUSH")
        .arg("l")
        .arg("a")
        .arg("b")
        .query(&mut c)
        .unwrap();
    let _: () = cmd("HDEL").arg("h").arg(7).query(&mut c).unwrap();
    srv.restart(true);
    let loaded = info_field(
        &mut client.get_connection().unwrap(),
        "persistence",
        "loading",
    );
    assert_eq!(loaded, "0");
    assert_eq!(srv.hgetall("h").len(), 99);
    assert_eq!(srv.hget("h", "8").as_deref(), Some("16"));
    srv.assert_list("l", &["a", "b"]);
    assert!(dir.path().join("respite.redb").exists());

    srv.restart(false);
    srv.assert_missing("h");
    let mut c = client.get_connection().unwrap();
    let n: i64 = cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 0);
    // The new (empty) store is durable as the old one was.
    let _: () = cmd("SET").arg("after").arg("1").query(&mut c).unwrap();
    srv.restart(true);
    srv.assert_str("after", "1");
}

#[tokio::test]
async fn respite_commands_are_refused_without_the_flag() {
    let b = ServerProcess::respite(&[]);
    let mut c = connect_url(&b.url()).await;
    let e = q::<i64>(&mut c, cmd("RESPITE").arg("CLOCK").arg("GET"))
        .await
        .expect_err("refused");
    assert_eq!(
        err_text(&e),
        "ERR: RESPITE commands are disabled; start respite with --enable-test-commands"
    );
}

#[tokio::test]
async fn respite_commands_work_with_the_flag() {
    let b = ServerProcess::respite(&["--enable-test-commands"]);
    let mut c = connect_url(&b.url()).await;
    // Clock: a key with a TTL expires when the manual clock passes it. Freeze the clock
    // first (ADVANCE 0 switches to manual): set with the real clock running, the real time
    // before the switch would count too.
    let ok: String = q(&mut c, cmd("RESPITE").arg("CLOCK").arg("ADVANCE").arg(0))
        .await
        .unwrap();
    assert_eq!(ok, "OK");
    let _: () = q(&mut c, cmd("SET").arg("k").arg("v").arg("PX").arg(5000))
        .await
        .unwrap();
    let ok: String = q(&mut c, cmd("RESPITE").arg("CLOCK").arg("ADVANCE").arg(4999))
        .await
        .unwrap();
    assert_eq!(ok, "OK");
    let v: Option<String> = q(&mut c, cmd("GET").arg("k")).await.unwrap();
    assert_eq!(v.as_deref(), Some("v"));
    let _: String = q(&mut c, cmd("RESPITE").arg("CLOCK").arg("ADVANCE").arg(2))
        .await
        .unwrap();
    let v: Option<String> = q(&mut c, cmd("GET").arg("k")).await.unwrap();
    assert_eq!(v, None);
    let _: String = q(
        &mut c,
        cmd("RESPITE").arg("CLOCK").arg("SET").arg(1_000_000),
    )
    .await
    .unwrap();
    let now: i64 = q(&mut c, cmd("RESPITE").arg("CLOCK").arg("GET"))
        .await
        .unwrap();
    assert_eq!(now, 1_000_000);
    let time: Vec<String> = q(&mut c, &cmd("TIME")).await.unwrap();
    assert_eq!(time[0], "1000");
    let _: String = q(&mut c, cmd("RESPITE").arg("CLOCK").arg("REAL"))
        .await
        .unwrap();
    let _: String = q(&mut c, cmd("RESPITE").arg("SEED").arg(7)).await.unwrap();

    // Faults.
    let _: String = q(
        &mut c,
        cmd("RESPITE")
            .arg("FAULT")
            .arg("FAIL")
            .arg(1)
            .arg("CMD")
            .arg("get")
            .arg("ERR")
            .arg("LOADING not yet"),
    )
    .await
    .unwrap();
    let _: () = q(&mut c, cmd("SET").arg("a").arg("1")).await.unwrap();
    let e = q::<Option<String>>(&mut c, cmd("GET").arg("a"))
        .await
        .expect_err("injected");
    assert_eq!(e.code(), Some("LOADING"));
    let _: String = q(&mut c, cmd("RESPITE").arg("FAULT").arg("DELAY").arg(150))
        .await
        .unwrap();
    let t = Instant::now();
    let _: String = q(&mut c, &cmd("PING")).await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(150));
    let _: String = q(&mut c, cmd("RESPITE").arg("FAULT").arg("CLEAR"))
        .await
        .unwrap();

    // Log and connections.
    let n: i64 = q(&mut c, cmd("RESPITE").arg("LOG").arg("COUNT").arg("set"))
        .await
        .unwrap();
    assert_eq!(n, 2);
    let last: Vec<(i64, Vec<String>)> = q(&mut c, cmd("RESPITE").arg("LOG").arg("GET").arg(2))
        .await
        .unwrap();
    // The log is written on receipt: LOG GET sees itself last.
    assert_eq!(last[0].1, ["RESPITE", "LOG", "COUNT", "set"]);
    assert_eq!(last[1].1, ["RESPITE", "LOG", "GET", "2"]);
    let conns: std::collections::HashMap<String, i64> =
        q(&mut c, cmd("RESPITE").arg("CONNECTIONS")).await.unwrap();
    assert_eq!(conns["connected"], 1);
    assert!(conns["accepted"] >= 1);
    let e = q::<String>(&mut c, cmd("RESPITE").arg("NOPE"))
        .await
        .expect_err("unknown");
    assert!(err_text(&e).contains("unknown subcommand"), "{e}");
}

#[test]
fn enable_test_commands_from_a_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("respite.conf");
    std::fs::write(&path, "enable-test-commands yes\n").unwrap();
    let b = ServerProcess::respite(&[path.to_str().unwrap()]);
    let client = redis::Client::open(b.url()).unwrap();
    let mut c = client.get_connection().unwrap();
    let ms: i64 = cmd("RESPITE")
        .arg("CLOCK")
        .arg("GET")
        .query(&mut c)
        .unwrap();
    assert!(ms > 0);
}

/// PAUSE / RESUME / DROP / REFUSE over the protocol: RESPITE commands are never held, so one
/// connection can lift a pause that holds another.
#[tokio::test]
async fn faults_over_the_protocol() {
    let b = ServerProcess::respite(&["--enable-test-commands"]);
    let mut admin = connect_url(&b.url()).await;
    let mut user = connect_url(&b.url()).await;
    let _: String = q(&mut admin, cmd("RESPITE").arg("FAULT").arg("PAUSE"))
        .await
        .unwrap();
    let mut u2 = user.clone();
    let held = tokio::spawn(async move {
        let r: redis::RedisResult<String> = cmd("PING").query_async(&mut u2).await;
        r
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!held.is_finished(), "answered while paused");
    let n: i64 = q(
        &mut admin,
        cmd("RESPITE").arg("LOG").arg("COUNT").arg("ping"),
    )
    .await
    .unwrap();
    assert_eq!(n, 1, "the held command was read");
    let _: String = q(&mut admin, cmd("RESPITE").arg("FAULT").arg("RESUME"))
        .await
        .unwrap();
    let pong = tokio::time::timeout(HANG_GUARD, held)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(pong.unwrap(), "PONG");

    let _: String = q(
        &mut admin,
        cmd("RESPITE").arg("FAULT").arg("REFUSE").arg(60_000),
    )
    .await
    .unwrap();
    let client = redis::Client::open(b.url()).unwrap();
    assert!(client.get_multiplexed_async_connection().await.is_err());
    let _: String = q(&mut admin, cmd("RESPITE").arg("FAULT").arg("CLEAR"))
        .await
        .unwrap();
    let mut fresh = connect_url(&b.url()).await;
    let _: String = q(&mut fresh, &cmd("PING")).await.unwrap();

    // DROP closes every connection, the caller's included (after its reply).
    let _: String = q(&mut admin, cmd("RESPITE").arg("FAULT").arg("DROP"))
        .await
        .unwrap();
    let start = Instant::now();
    while q::<String>(&mut user, &cmd("PING")).await.is_ok() {
        assert!(start.elapsed() < HANG_GUARD, "connection survived DROP");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// An injected failure is a rejection, as Redis rejects a command before running it: inside
/// MULTI it dooms the transaction, and a failed EXEC discards it.
#[test]
fn injected_errors_inside_multi_abort_the_transaction() {
    let srv = server();
    let client = redis::Client::open(srv.url()).unwrap();
    let mut c = client.get_connection().unwrap();
    let run = |c: &mut redis::Connection, args: &[&str]| -> Result<redis::Value, String> {
        let mut command = cmd(args[0]);
        args[1..].iter().for_each(|a| {
            command.arg(*a);
        });
        command.query(c).map_err(|e| err_text(&e))
    };
    let oom = "OOM command not allowed when used memory > 'maxmemory'.";
    srv.fail_matching(Some("incr"), None, 1, oom);
    run(&mut c, &["MULTI"]).unwrap();
    run(&mut c, &["SET", "a", "1"]).unwrap();
    let e = run(&mut c, &["INCR", "n"]).unwrap_err();
    assert!(e.starts_with("OOM"), "{e}");
    let e = run(&mut c, &["EXEC"]).unwrap_err();
    assert_eq!(
        e,
        "EXECABORT: Transaction discarded because of previous errors."
    );
    assert_eq!(srv.get("a"), None, "nothing queued ran");

    srv.fail_matching(
        Some("exec"),
        None,
        1,
        "READONLY You can't write against a read only replica.",
    );
    run(&mut c, &["MULTI"]).unwrap();
    run(&mut c, &["SET", "a", "1"]).unwrap();
    let e = run(&mut c, &["EXEC"]).unwrap_err();
    assert_eq!(
        e,
        "EXECABORT: Transaction discarded because of: READONLY You can't write against a read only replica."
    );
    // The transaction is gone: the connection is out of MULTI, and nothing ran.
    let e = run(&mut c, &["EXEC"]).unwrap_err();
    assert_eq!(e, "ERR: EXEC without MULTI");
    assert_eq!(srv.get("a"), None);
}

/// The blocking wait, for tests without an async runtime.
#[test]
fn wait_for_command_blocking_sees_a_command_from_another_thread() {
    let srv = server();
    let url = srv.url();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        let _: () = cmd("LPUSH").arg("q").arg("job").query(&mut c).unwrap();
    });
    assert!(srv.wait_for_command_blocking("lpush", HANG_GUARD));
    sender.join().unwrap();
    assert!(!srv.wait_for_command_blocking("rpop", Duration::from_millis(20)));
    assert_eq!(srv.lrange("q", 0, -1), ["job"]);
}
