//! Workload scenarios from SCENARIOS.md driven through the real redis-rs client against an
//! in-process respite, each under RESP2 and RESP3.
//!
//! - S1 expiring key/value state: TTLs run on the manual clock (deterministic, no sleeping),
//!   plus one real-time check. Not yet here: sets/sorted sets with TTL (those families come
//!   later) and the restart-on-redb part (no redb engine yet).
//! - S8 connection behaviour: connection counting in INFO, reconnect after a restart.

#[macro_use]
mod common;

use common::{c, connect, manual_server, q, real_server, url_for_port, Proto, HANG_GUARD};
use std::collections::HashSet;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// S1. Expiring key/value state
// ---------------------------------------------------------------------------------------

/// `SET k v PX 30`, 80 ms of real time later `GET` is nil and `EXISTS` is 0.
async fn set_px_expires_in_real_time(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let ok: String = q(&mut con, &c(&["SET", "k", "v", "PX", "30"])).await;
    assert_eq!(ok, "OK");
    tokio::time::sleep(Duration::from_millis(80)).await;
    let v: Option<String> = q(&mut con, &c(&["GET", "k"])).await;
    assert_eq!(v, None);
    let n: i64 = q(&mut con, &c(&["EXISTS", "k"])).await;
    assert_eq!(n, 0);
}

/// The same on the manual clock, including the boundary: a key is expired only once the
/// clock is strictly past its deadline (Redis: `now > when`).
async fn set_px_expires_on_the_manual_clock(proto: Proto) {
    let server = manual_server();
    let mut con = connect(&server, proto).await;
    let _: String = q(&mut con, &c(&["SET", "k", "v", "PX", "30"])).await;
    server.advance_ms(29);
    let v: Option<String> = q(&mut con, &c(&["GET", "k"])).await;
    assert_eq!(v.as_deref(), Some("v"));
    server.advance_ms(1);
    let pttl: i64 = q(&mut con, &c(&["PTTL", "k"])).await;
    assert_eq!(
        pttl, 0,
        "at the deadline the key still exists with 0 ms left"
    );
    server.advance_ms(1);
    let v: Option<String> = q(&mut con, &c(&["GET", "k"])).await;
    assert_eq!(v, None);
    let n: i64 = q(&mut con, &c(&["EXISTS", "k"])).await;
    assert_eq!(n, 0);
}

/// `SET` without TTL, `PEXPIRE k 30` returns 1, and the key is gone 80 ms later.
async fn pexpire_expires_a_persistent_key(proto: Proto) {
    let server = manual_server();
    let mut con = connect(&server, proto).await;
    let _: String = q(&mut con, &c(&["SET", "k", "v"])).await;
    let pttl: i64 = q(&mut con, &c(&["PTTL", "k"])).await;
    assert_eq!(pttl, -1);
    let set: i64 = q(&mut con, &c(&["PEXPIRE", "k", "30"])).await;
    assert_eq!(set, 1);
    let pttl: i64 = q(&mut con, &c(&["PTTL", "k"])).await;
    assert_eq!(pttl, 30);
    server.advance_ms(80);
    let v: Option<String> = q(&mut con, &c(&["GET", "k"])).await;
    assert_eq!(v, None);
    let n: i64 = q(&mut con, &c(&["EXISTS", "k"])).await;
    assert_eq!(n, 0);
    // PEXPIRE on a missing (here: expired) key does nothing.
    let set: i64 = q(&mut con, &c(&["PEXPIRE", "k", "30"])).await;
    assert_eq!(set, 0);
}

/// `PEXPIRE k 0` (or a negative time) deletes the key at once, without the clock moving.
async fn pexpire_zero_deletes_at_once(proto: Proto) {
    let server = manual_server();
    let mut con = connect(&server, proto).await;
    let _: String = q(&mut con, &c(&["SET", "k", "v"])).await;
    let _: String = q(&mut con, &c(&["SET", "neg", "v"])).await;
    let set: i64 = q(&mut con, &c(&["PEXPIRE", "k", "0"])).await;
    assert_eq!(set, 1);
    let set: i64 = q(&mut con, &c(&["PEXPIRE", "neg", "-5"])).await;
    assert_eq!(set, 1);
    let n: i64 = q(&mut con, &c(&["EXISTS", "k", "neg"])).await;
    assert_eq!(n, 0);
    let v: Option<String> = q(&mut con, &c(&["GET", "k"])).await;
    assert_eq!(v, None);
    let pttl: i64 = q(&mut con, &c(&["PTTL", "k"])).await;
    assert_eq!(pttl, -2);
}

/// `GETDEL` returns the value once, then nil: a one-shot token (TTL or not).
async fn getdel_is_a_one_shot_token(proto: Proto) {
    let server = manual_server();
    let mut con = connect(&server, proto).await;
    let _: String = q(&mut con, &c(&["SET", "token", "t-123"])).await;
    let _: String = q(&mut con, &c(&["SET", "leased", "t-456", "PX", "1000"])).await;
    let first: Option<String> = q(&mut con, &c(&["GETDEL", "token"])).await;
    assert_eq!(first.as_deref(), Some("t-123"));
    let second: Option<String> = q(&mut con, &c(&["GETDEL", "token"])).await;
    assert_eq!(second, None);
    let get: Option<String> = q(&mut con, &c(&["GET", "token"])).await;
    assert_eq!(get, None);
    let leased: Option<String> = q(&mut con, &c(&["GETDEL", "leased"])).await;
    assert_eq!(leased.as_deref(), Some("t-456"));
    let pttl: i64 = q(&mut con, &c(&["PTTL", "leased"])).await;
    assert_eq!(pttl, -2);
    // An expired token cannot be redeemed.
    let _: String = q(&mut con, &c(&["SET", "short", "t-789", "PX", "10"])).await;
    server.advance_ms(11);
    let expired: Option<String> = q(&mut con, &c(&["GETDEL", "short"])).await;
    assert_eq!(expired, None);
}

/// `MGET` over many keys returns values in request order with nils for missing (and
/// expired) keys.
async fn mget_keeps_order_with_nils(proto: Proto) {
    let server = manual_server();
    let mut con = connect(&server, proto).await;
    let mut pipe = redis::pipe();
    for i in (0..200).step_by(2) {
        pipe.cmd("SET").arg(format!("m:{i}")).arg(format!("v{i}"));
    }
    // Every 10th stored key gets a short TTL and expires before the MGET.
    for i in (0..200).step_by(10) {
        pipe.cmd("PEXPIRE").arg(format!("m:{i}")).arg(5);
    }
    let _: () = tokio::time::timeout(HANG_GUARD, pipe.query_async(&mut con))
        .await
        .expect("pipeline hung")
        .expect("pipeline");
    server.advance_ms(6);
    let mut mget = redis::cmd("MGET");
    for i in 0..200 {
        mget.arg(format!("m:{i}"));
    }
    let got: Vec<Option<String>> = q(&mut con, &mget).await;
    let want: Vec<Option<String>> = (0..200)
        .map(|i| (i % 2 == 0 && i % 10 != 0).then(|| format!("v{i}")))
        .collect();
    assert_eq!(got, want);
}

/// `DEL k1 k2 …` returns how many existed (expired keys do not count); `EXISTS` counts
/// every argument, repeats included.
async fn del_counts_existing_keys(proto: Proto) {
    let server = manual_server();
    let mut con = connect(&server, proto).await;
    for k in ["k1", "k2", "k3"] {
        let _: String = q(&mut con, &c(&["SET", k, "v"])).await;
    }
    let _: String = q(&mut con, &c(&["SET", "k4", "v", "PX", "10"])).await;
    server.advance_ms(11);
    let n: i64 = q(&mut con, &c(&["EXISTS", "k1", "k1", "k2", "k4", "nope"])).await;
    assert_eq!(n, 3);
    let n: i64 = q(&mut con, &c(&["DEL", "k1", "k2", "k3", "k4", "nope", "k1"])).await;
    assert_eq!(n, 3);
    let n: i64 = q(&mut con, &c(&["EXISTS", "k1", "k2", "k3"])).await;
    assert_eq!(n, 0);
    let n: i64 = q(&mut con, &c(&["DEL", "k1"])).await;
    assert_eq!(n, 0);
}

/// `PTTL`/`TTL` report the remaining time: -1 without TTL, -2 when missing; TTL rounds
/// to the nearest second as Redis does (`(ms + 500) / 1000`).
async fn ttl_and_pttl_report_remaining_time(proto: Proto) {
    let server = manual_server();
    let mut con = connect(&server, proto).await;
    let _: String = q(&mut con, &c(&["SET", "k", "v", "EX", "30"])).await;
    let _: String = q(&mut con, &c(&["SET", "plain", "v"])).await;
    let pttl: i64 = q(&mut con, &c(&["PTTL", "k"])).await;
    assert_eq!(pttl, 30_000);
    let ttl: i64 = q(&mut con, &c(&["TTL", "k"])).await;
    assert_eq!(ttl, 30);
    server.advance_ms(1_500);
    let pttl: i64 = q(&mut con, &c(&["PTTL", "k"])).await;
    assert_eq!(pttl, 28_500);
    let ttl: i64 = q(&mut con, &c(&["TTL", "k"])).await;
    assert_eq!(ttl, 29, "28.5 s rounds up");
    server.advance_ms(27_901);
    let pttl: i64 = q(&mut con, &c(&["PTTL", "k"])).await;
    assert_eq!(pttl, 599);
    let ttl: i64 = q(&mut con, &c(&["TTL", "k"])).await;
    assert_eq!(ttl, 1, "0.599 s rounds up to 1");
    for cmd in ["TTL", "PTTL"] {
        let plain: i64 = q(&mut con, &c(&[cmd, "plain"])).await;
        assert_eq!(plain, -1, "{cmd} of a key without TTL");
        let missing: i64 = q(&mut con, &c(&[cmd, "missing"])).await;
        assert_eq!(missing, -2, "{cmd} of a missing key");
    }
    server.advance_ms(600);
    let ttl: i64 = q(&mut con, &c(&["TTL", "k"])).await;
    assert_eq!(ttl, -2, "expired");
}

/// A value written with a 30 s TTL by one connection is read, TTL included, by another.
async fn ttl_value_is_visible_from_another_connection(proto: Proto) {
    let server = manual_server();
    let mut writer = connect(&server, proto).await;
    let mut reader = connect(&server, proto).await;
    let _: String = q(&mut writer, &c(&["SET", "shared", "state", "EX", "30"])).await;
    let v: Option<String> = q(&mut reader, &c(&["GET", "shared"])).await;
    assert_eq!(v.as_deref(), Some("state"));
    server.advance_ms(10_000);
    let ttl: i64 = q(&mut reader, &c(&["TTL", "shared"])).await;
    assert!((1..=30).contains(&ttl), "ttl {ttl}");
    assert_eq!(ttl, 20);
    server.advance_ms(20_001);
    let v: Option<String> = q(&mut reader, &c(&["GET", "shared"])).await;
    assert_eq!(v, None);
}

/// `SCAN 0 MATCH prefix:* COUNT 100` iterated to cursor 0 returns every matching key at
/// least once, and only matching keys.
async fn scan_match_visits_every_matching_key(proto: Proto) {
    let server = manual_server();
    let mut con = connect(&server, proto).await;
    let mut pipe = redis::pipe();
    for i in 0..500 {
        pipe.cmd("SET").arg(format!("prefix:{i}")).arg(i).ignore();
        pipe.cmd("SET").arg(format!("other:{i}")).arg(i).ignore();
    }
    let _: () = tokio::time::timeout(HANG_GUARD, pipe.query_async(&mut con))
        .await
        .expect("pipeline hung")
        .expect("pipeline");
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    let mut rounds = 0;
    loop {
        let (next, keys): (String, Vec<String>) = q(
            &mut con,
            &c(&["SCAN", &cursor, "MATCH", "prefix:*", "COUNT", "100"]),
        )
        .await;
        for k in keys {
            assert!(k.starts_with("prefix:"), "{k} does not match");
            seen.insert(k);
        }
        rounds += 1;
        assert!(rounds < 10_000, "SCAN does not terminate");
        if next == "0" {
            break;
        }
        cursor = next;
    }
    let want: HashSet<String> = (0..500).map(|i| format!("prefix:{i}")).collect();
    assert_eq!(seen, want);
}

/// Expired keys are reclaimed without being accessed (active expiry), so DBSIZE drops.
async fn expired_keys_are_reclaimed_without_access(proto: Proto) {
    let server = manual_server();
    let mut con = connect(&server, proto).await;
    let mut pipe = redis::pipe();
    for i in 0..100 {
        pipe.cmd("SET")
            .arg(format!("e:{i}"))
            .arg("v")
            .arg("PX")
            .arg(30)
            .ignore();
        pipe.cmd("SET").arg(format!("p:{i}")).arg("v").ignore();
    }
    let _: () = tokio::time::timeout(HANG_GUARD, pipe.query_async(&mut con))
        .await
        .expect("pipeline hung")
        .expect("pipeline");
    let n: i64 = q(&mut con, &c(&["DBSIZE"])).await;
    assert_eq!(n, 200);
    server.advance_ms(31);
    let n: i64 = q(&mut con, &c(&["DBSIZE"])).await;
    assert_eq!(n, 100);
}

both_protocols!(
    set_px_expires_in_real_time,
    set_px_expires_on_the_manual_clock,
    pexpire_expires_a_persistent_key,
    pexpire_zero_deletes_at_once,
    getdel_is_a_one_shot_token,
    mget_keeps_order_with_nils,
    del_counts_existing_keys,
    ttl_and_pttl_report_remaining_time,
    ttl_value_is_visible_from_another_connection,
    scan_match_visits_every_matching_key,
    expired_keys_are_reclaimed_without_access,
);

// ---------------------------------------------------------------------------------------
// S8. Connection behaviour
// ---------------------------------------------------------------------------------------

async fn connections_received(con: &mut redis::aio::MultiplexedConnection) -> i64 {
    let info: String = q(con, &c(&["INFO", "stats"])).await;
    common::info_field(&info, "total_connections_received")
        .unwrap_or_else(|| panic!("no total_connections_received in INFO:\n{info}"))
}

/// 200 commands over one connection do not change `total_connections_received`; a new
/// connection does.
async fn commands_do_not_count_as_connections(proto: Proto) {
    let server = manual_server();
    let mut con = connect(&server, proto).await;
    let before = connections_received(&mut con).await;
    assert!(before >= 1);
    for i in 0..100 {
        let _: String = q(&mut con, &c(&["SET", &format!("k{i}"), "v"])).await;
    }
    let mut pipe = redis::pipe();
    for i in 0..100 {
        pipe.cmd("GET").arg(format!("k{i}"));
    }
    let got: Vec<String> = tokio::time::timeout(HANG_GUARD, pipe.query_async(&mut con))
        .await
        .expect("pipeline hung")
        .expect("pipeline");
    assert_eq!(got.len(), 100);
    assert_eq!(connections_received(&mut con).await, before);
    let mut other = connect(&server, proto).await;
    // Make sure the server has taken the new connection in before asking.
    let _: String = q(&mut other, &c(&["PING"])).await;
    assert_eq!(connections_received(&mut con).await, before + 1);
    assert_eq!(connections_received(&mut other).await, before + 1);
}

/// A client with reconnect logic (redis-rs `ConnectionManager`) keeps working after the
/// server restarts on the same port: commands fail while it is down and succeed again
/// once it is back.
async fn client_reconnects_after_restart(proto: Proto) {
    let server = real_server();
    let port = server.port();
    let client = redis::Client::open(url_for_port(port, proto)).expect("valid url");
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(Duration::from_millis(100))
        .set_number_of_retries(2)
        .set_connection_timeout(Some(Duration::from_secs(1)))
        .set_response_timeout(Some(Duration::from_secs(2)));
    let mut cm = tokio::time::timeout(
        HANG_GUARD,
        client.get_connection_manager_with_config(config),
    )
    .await
    .expect("connect hung")
    .expect("connect");
    let ok: String = q(&mut cm, &c(&["SET", "before", "1"])).await;
    assert_eq!(ok, "OK");

    drop(server);
    for _ in 0..3 {
        let r = tokio::time::timeout(
            HANG_GUARD,
            c(&["GET", "before"]).query_async::<Option<String>>(&mut cm),
        )
        .await
        .expect("command hung while the server is down");
        assert!(r.is_err(), "command succeeded with the server down: {r:?}");
    }

    let server = respite::TestServer::builder()
        .port(port)
        .start()
        .unwrap_or_else(|e| panic!("restart on port {port}: {e}"));
    let back = Instant::now();
    loop {
        let r = tokio::time::timeout(
            HANG_GUARD,
            c(&["SET", "after", "2"]).query_async::<String>(&mut cm),
        )
        .await
        .expect("command hung after restart");
        if r.is_ok() {
            break;
        }
        assert!(back.elapsed() < HANG_GUARD, "client never recovered: {r:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    eprintln!("recovered {:?} after the restart", back.elapsed());
    // A fresh (memory) server: the old key is gone, the new one is there.
    let old: Option<String> = q(&mut cm, &c(&["GET", "before"])).await;
    assert_eq!(old, None);
    let new: Option<String> = q(&mut cm, &c(&["GET", "after"])).await;
    assert_eq!(new.as_deref(), Some("2"));
    drop(server);
}

both_protocols!(
    commands_do_not_count_as_connections,
    client_reconnects_after_restart,
);
