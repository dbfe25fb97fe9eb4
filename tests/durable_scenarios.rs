//! SCENARIOS.md on the durable engine (issue 6): S7 in full (raw bytes, signed INCRBY,
//! a token bucket script, 8 × 50 INCR = 400, all surviving a restart) under each
//! `appendfsync` mode; S1 deadlines across a restart (kept, or expired while down); S3
//! locks and S4 semaphores keeping their state across a restart; and `CONFIG SET
//! appendfsync` switching at run time. The SIGKILL half of S7 is tests/durable_crash.rs.

mod common;

use common::{assert_saw_one_to, c, connect, durable_server, lua_script, q, Proto};
use redis::aio::MultiplexedConnection;
use redis::Value;
use respite::TestServer;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

async fn cons(server: &TestServer, n: usize) -> Vec<MultiplexedConnection> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(connect(server, Proto::Resp2).await);
    }
    out
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

/// The `INFO persistence` field `name`, as text.
async fn info(con: &mut MultiplexedConnection, name: &str) -> String {
    let text: String = q(con, &c(&["INFO", "persistence"])).await;
    text.lines()
        .find_map(|l| {
            l.trim_end_matches('\r')
                .strip_prefix(&format!("{name}:"))
                .map(str::to_string)
        })
        .unwrap_or_else(|| panic!("INFO persistence has no {name}:\n{text}"))
}

async fn bucket(con: &mut MultiplexedConnection, key: &str, capacity: i64) -> (bool, i64, i64) {
    let r: (i64, i64, i64) = lua_script("ratelimit_token_bucket.lua")
        .key(key)
        .arg(capacity)
        .arg(0)
        .arg(1000)
        .arg(1)
        .invoke_async(con)
        .await
        .expect("token bucket");
    (r.0 == 1, r.1, r.2)
}

/// Every byte value, and a key that is not UTF-8 either.
fn all_bytes() -> Vec<u8> {
    (0..=255u8).chain((0..=255u8).rev()).collect()
}
const BIN_KEY: &[u8] = b"bin:\x00\xff\x80\r\n";

/// S7: raw bytes, signed INCRBY deltas, a token bucket, and 8 × 50 INCR = 400, then a
/// restart, after which everything is still there.
async fn host_state(fsync: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let srv = durable_server(dir.path(), fsync);
        let mut all = cons(&srv, 8).await;
        let con = &mut all[0];
        let bytes = all_bytes();
        let _: () = q(con, redis::cmd("SET").arg(BIN_KEY).arg(&bytes)).await;
        let _: i64 = q(con, redis::cmd("APPEND").arg(BIN_KEY).arg(b"\x00\x01")).await;
        let _: () = q(
            con,
            redis::cmd("HSET").arg("bin:h").arg(BIN_KEY).arg(&bytes),
        )
        .await;
        let mut total = 0i64;
        for d in [5i64, -12, 1 << 40, -(1 << 41), 7, 0, -1] {
            total += d;
            let v: i64 = q(con, &c(&["INCRBY", "host:delta", &d.to_string()])).await;
            assert_eq!(v, total);
        }
        let v: i64 = q(con, &c(&["DECRBY", "host:delta", "-3"])).await;
        assert_eq!(v, total + 3);
        let v: i64 = q(con, &c(&["INCRBY", "host:neg", "-9223372036854775808"])).await;
        assert_eq!(v, i64::MIN);

        // The token bucket: capacity 100, no refill, 400 hits from 8 connections.
        let mut tasks = Vec::new();
        for con in &all {
            let mut con = con.clone();
            tasks.push(tokio::spawn(async move {
                let mut admitted = 0;
                for _ in 0..50 {
                    admitted += bucket(&mut con, "host:bucket", 100).await.0 as i64;
                }
                admitted
            }));
        }
        let mut admitted = 0;
        for t in tasks {
            admitted += t.await.expect("task");
        }
        assert_eq!(admitted, 100);

        // 8 connections × 50 INCR on one counter.
        let mut tasks = Vec::new();
        for con in &all {
            let mut con = con.clone();
            tasks.push(tokio::spawn(async move {
                let mut seen = Vec::new();
                for _ in 0..50 {
                    seen.push(q::<i64>(&mut con, &c(&["INCR", "host:counter"])).await);
                }
                seen
            }));
        }
        assert_saw_one_to(tasks, 400).await;
    }
    let srv = durable_server(dir.path(), fsync);
    let mut con = connect(&srv, Proto::Resp2).await;
    let mut bytes = all_bytes();
    bytes.extend_from_slice(b"\x00\x01");
    let got: Vec<u8> = q(&mut con, redis::cmd("GET").arg(BIN_KEY)).await;
    assert_eq!(got, bytes, "raw bytes after restart ({fsync})");
    let got: Vec<u8> = q(&mut con, redis::cmd("HGET").arg("bin:h").arg(BIN_KEY)).await;
    assert_eq!(got, all_bytes());
    let expected = 5 - 12 + (1i64 << 40) - (1i64 << 41) + 7 - 1 + 3;
    let v: i64 = q(&mut con, &c(&["GET", "host:delta"])).await;
    assert_eq!(v, expected);
    let v: i64 = q(&mut con, &c(&["GET", "host:neg"])).await;
    assert_eq!(v, i64::MIN);
    let enc: String = q(&mut con, &c(&["OBJECT", "ENCODING", "host:counter"])).await;
    assert_eq!(enc, "int", "a counter reloads as an integer");
    let v: i64 = q(&mut con, &c(&["GET", "host:counter"])).await;
    assert_eq!(v, 400, "8 × 50 INCR after restart ({fsync})");
    assert_eq!(q::<i64>(&mut con, &c(&["INCR", "host:counter"])).await, 401);
    // The emptied bucket stays empty: no refill, and its state survived.
    assert_eq!(
        bucket(&mut con, "host:bucket", 100).await,
        (false, 0, -1),
        "token bucket after restart ({fsync})"
    );
    let r = c(&["INCRBY", "host:counter", "9223372036854775807"])
        .query_async::<i64>(&mut con)
        .await;
    assert!(r.is_err(), "overflow is an error, not a value: {r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s7_host_state_always() {
    host_state("always").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s7_host_state_everysec() {
    host_state("everysec").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s7_host_state_no() {
    host_state("no").await;
}

/// S1 across a restart: deadlines are absolute, so a key keeps its deadline while the
/// server is down, and a key whose deadline passed while down is gone when it comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_deadlines_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let far = now_ms() + 3_600_000;
    let soon = now_ms() + 300;
    {
        let srv = durable_server(dir.path(), "everysec");
        let mut all = cons(&srv, 2).await;
        let _: () = q(&mut all[0], &c(&["SET", "ttl:30s", "v", "EX", "30"])).await;
        // Written by one connection, read by another.
        let ttl: i64 = q(&mut all[1], &c(&["TTL", "ttl:30s"])).await;
        assert!((1..=30).contains(&ttl), "TTL {ttl}");
        let _: () = q(&mut all[0], &c(&["SET", "ttl:far", "v"])).await;
        let r: i64 = q(&mut all[0], &c(&["PEXPIREAT", "ttl:far", &far.to_string()])).await;
        assert_eq!(r, 1);
        let _: () = q(&mut all[0], &c(&["SET", "ttl:soon", "v"])).await;
        let _: i64 = q(
            &mut all[0],
            &c(&["PEXPIREAT", "ttl:soon", &soon.to_string()]),
        )
        .await;
        let _: i64 = q(&mut all[0], &c(&["SADD", "ttl:set", "a", "b"])).await;
        let _: i64 = q(
            &mut all[0],
            &c(&["PEXPIREAT", "ttl:set", &soon.to_string()]),
        )
        .await;
        let _: i64 = q(&mut all[0], &c(&["ZADD", "ttl:zset", "1", "a"])).await;
        let _: i64 = q(
            &mut all[0],
            &c(&["PEXPIREAT", "ttl:zset", &far.to_string()]),
        )
        .await;
        // A TTL set and then removed, a key deleted by PEXPIRE 0, a one-shot token used.
        let _: () = q(&mut all[0], &c(&["SET", "ttl:persisted", "v", "PX", "500"])).await;
        let _: i64 = q(&mut all[0], &c(&["PERSIST", "ttl:persisted"])).await;
        let _: () = q(&mut all[0], &c(&["SET", "ttl:zero", "v"])).await;
        let _: i64 = q(&mut all[0], &c(&["PEXPIRE", "ttl:zero", "0"])).await;
        let _: () = q(&mut all[0], &c(&["SET", "token", "once"])).await;
        let v: String = q(&mut all[0], &c(&["GETDEL", "token"])).await;
        assert_eq!(v, "once");
        let _: () = q(&mut all[0], &c(&["SET", "ttl:keep", "v1", "EX", "100"])).await;
        let _: () = q(&mut all[0], &c(&["SET", "ttl:keep", "v2", "KEEPTTL"])).await;
    }
    // Down until the short deadlines have passed.
    let wait = soon + 100 - now_ms();
    if wait > 0 {
        tokio::time::sleep(Duration::from_millis(wait as u64)).await;
    }
    let srv = durable_server(dir.path(), "everysec");
    let mut con = connect(&srv, Proto::Resp2).await;
    let ttl: i64 = q(&mut con, &c(&["TTL", "ttl:30s"])).await;
    assert!((1..=30).contains(&ttl), "TTL after restart {ttl}");
    let at: i64 = q(&mut con, &c(&["PEXPIRETIME", "ttl:far"])).await;
    assert_eq!(at, far, "the deadline itself is kept");
    let at: i64 = q(&mut con, &c(&["PEXPIRETIME", "ttl:zset"])).await;
    assert_eq!(at, far);
    for gone in ["ttl:soon", "ttl:set", "ttl:zero", "token"] {
        let n: i64 = q(&mut con, &c(&["EXISTS", gone])).await;
        assert_eq!(n, 0, "{gone} should be gone after restart");
    }
    let n: i64 = q(&mut con, &c(&["SCARD", "ttl:set"])).await;
    assert_eq!(n, 0);
    let ttl: i64 = q(&mut con, &c(&["PTTL", "ttl:persisted"])).await;
    assert_eq!(ttl, -1, "PERSIST survives");
    let v: String = q(&mut con, &c(&["GET", "ttl:keep"])).await;
    assert_eq!(v, "v2");
    let ttl: i64 = q(&mut con, &c(&["TTL", "ttl:keep"])).await;
    assert!((1..=100).contains(&ttl), "KEEPTTL survives: {ttl}");
    let n: i64 = q(&mut con, &c(&["DBSIZE"])).await;
    assert_eq!(n, 5, "ttl:30s ttl:far ttl:zset ttl:persisted ttl:keep");
}

async fn lock_acquire(con: &mut MultiplexedConnection, owner: &str) -> Option<i64> {
    lua_script("lock_acquire.lua")
        .key("{lock:a}")
        .key("{lock:a}:fence")
        .arg(owner)
        .arg(30_000)
        .invoke_async(con)
        .await
        .expect("lock acquire")
}

async fn lock_call(con: &mut MultiplexedConnection, script: &str, args: &[String]) -> i64 {
    let s = lua_script(script);
    let mut inv = s.key("{lock:a}");
    for a in args {
        inv.arg(a);
    }
    inv.invoke_async(con).await.expect(script)
}

async fn sem(con: &mut MultiplexedConnection, script: &str, gate: &str, args: &[&str]) -> Value {
    let s = lua_script(script);
    let mut inv = s.key(gate);
    for a in args {
        inv.arg(*a);
    }
    inv.invoke_async(con).await.expect(script)
}

/// S3 and S4 across restarts: the lock, its lease and its fencing counter, and the
/// semaphore's holders survive; the scripts are reloaded by redis-rs on NOSCRIPT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_s4_scripts_keep_their_state_across_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t2;
    {
        let srv = durable_server(dir.path(), "always");
        let mut con = connect(&srv, Proto::Resp2).await;
        let t1 = lock_acquire(&mut con, "o1").await.expect("free lock");
        assert_eq!(t1, 1);
        let args = ["o1".to_string(), t1.to_string()];
        assert_eq!(lock_call(&mut con, "lock_release.lua", &args).await, 1);
        t2 = lock_acquire(&mut con, "o2").await.expect("released lock");
        assert!(t2 > t1);
        assert_eq!(
            sem(
                &mut con,
                "semaphore_acquire.lua",
                "gate:a",
                &["h1", "2", "60000"]
            )
            .await,
            Value::Array(vec![Value::Int(1), Value::Int(1)])
        );
        assert_eq!(
            sem(
                &mut con,
                "semaphore_acquire.lua",
                "gate:a",
                &["h2", "2", "60000"]
            )
            .await,
            Value::Array(vec![Value::Int(1), Value::Int(2)])
        );
        assert_eq!(
            sem(
                &mut con,
                "semaphore_acquire.lua",
                "gate:b",
                &["h1", "1", "60000"]
            )
            .await,
            Value::Array(vec![Value::Int(1), Value::Int(1)])
        );
    }
    {
        let srv = durable_server(dir.path(), "everysec");
        let mut con = connect(&srv, Proto::Resp2).await;
        // The lock is still held by o2 with its lease; the script cache is not (NOSCRIPT →
        // SCRIPT LOAD → EVALSHA inside redis-rs).
        assert_eq!(
            lock_acquire(&mut con, "o3").await,
            None,
            "held across restart"
        );
        let ttl: i64 = q(&mut con, &c(&["PTTL", "{lock:a}"])).await;
        assert!(ttl > 0 && ttl <= 30_000, "lease {ttl}");
        let stale = ["o1".to_string(), "1".to_string()];
        assert_eq!(
            lock_call(
                &mut con,
                "lock_renew.lua",
                &[stale[0].clone(), stale[1].clone(), "30000".into()]
            )
            .await,
            0
        );
        let cur = ["o2".to_string(), t2.to_string()];
        assert_eq!(
            lock_call(
                &mut con,
                "lock_renew.lua",
                &[cur[0].clone(), cur[1].clone(), "30000".into()]
            )
            .await,
            1
        );
        assert_eq!(lock_call(&mut con, "lock_release.lua", &stale).await, 0);
        assert_eq!(lock_call(&mut con, "lock_release.lua", &cur).await, 1);
        // The gate is full (2 holders survived); another gate is independent.
        assert_eq!(
            sem(
                &mut con,
                "semaphore_acquire.lua",
                "gate:a",
                &["h3", "2", "60000"]
            )
            .await,
            Value::Array(vec![Value::Int(0), Value::Int(2)])
        );
        assert_eq!(
            sem(&mut con, "semaphore_count.lua", "gate:a", &[]).await,
            Value::Int(2)
        );
        assert_eq!(
            sem(&mut con, "semaphore_release.lua", "gate:a", &["h1"]).await,
            Value::Int(1)
        );
        assert_eq!(
            sem(
                &mut con,
                "semaphore_acquire.lua",
                "gate:b",
                &["h2", "1", "60000"]
            )
            .await,
            Value::Array(vec![Value::Int(0), Value::Int(1)])
        );
    }
    let srv = durable_server(dir.path(), "no");
    let mut con = connect(&srv, Proto::Resp2).await;
    // Fencing tokens keep increasing across restarts.
    let t3 = lock_acquire(&mut con, "o3")
        .await
        .expect("released before restart");
    assert!(t3 > t2, "fencing token {t3} after {t2}");
    assert_eq!(
        sem(
            &mut con,
            "semaphore_acquire.lua",
            "gate:a",
            &["h3", "2", "60000"]
        )
        .await,
        Value::Array(vec![Value::Int(1), Value::Int(2)]),
        "the release before the restart freed a slot"
    );
    let members: Vec<String> = q(&mut con, &c(&["ZRANGE", "gate:a", "0", "-1"])).await;
    let mut members = members;
    members.sort();
    assert_eq!(members, ["h2", "h3"]);
}

/// `CONFIG SET appendfsync` switches the durable engine's policy at run time; INFO
/// persistence reflects it and writes made under each policy survive a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appendfsync_switches_at_run_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let modes = ["always", "everysec", "no", "everysec", "always"];
    {
        let srv = durable_server(dir.path(), "everysec");
        let mut con = connect(&srv, Proto::Resp2).await;
        assert_eq!(info(&mut con, "respite_engine").await, "redb");
        assert_eq!(info(&mut con, "aof_enabled").await, "1");
        assert_eq!(info(&mut con, "respite_appendfsync").await, "everysec");
        for (i, mode) in modes.iter().enumerate() {
            let _: () = q(&mut con, &c(&["CONFIG", "SET", "appendfsync", mode])).await;
            let got: Vec<String> = q(&mut con, &c(&["CONFIG", "GET", "appendfsync"])).await;
            assert_eq!(got, ["appendfsync", mode]);
            assert_eq!(info(&mut con, "respite_appendfsync").await, *mode);
            let before: u64 = info(&mut con, "respite_durable_commits")
                .await
                .parse()
                .expect("durable commits");
            let _: () = q(&mut con, &c(&["SET", &format!("mode:{i}"), mode])).await;
            let _: i64 = q(&mut con, &c(&["RPUSH", "modes", mode])).await;
            if *mode == "always" {
                // The reply waited for a durable commit holding the write.
                let after: u64 = info(&mut con, "respite_durable_commits")
                    .await
                    .parse()
                    .expect("durable commits");
                assert!(after > before, "always: {before} → {after} durable commits");
                assert_eq!(info(&mut con, "respite_pending_changes").await, "0");
            }
        }
        let r = c(&["CONFIG", "SET", "appendfsync", "sometimes"])
            .query_async::<Value>(&mut con)
            .await;
        assert!(r.is_err(), "invalid appendfsync accepted");
        assert_eq!(info(&mut con, "respite_appendfsync").await, "always");
        // SAVE forces a durable commit whatever the policy.
        let _: () = q(&mut con, &c(&["CONFIG", "SET", "appendfsync", "no"])).await;
        let _: () = q(&mut con, &c(&["SET", "saved", "1"])).await;
        let before: u64 = info(&mut con, "respite_durable_commits")
            .await
            .parse()
            .expect("durable commits");
        let _: () = q(&mut con, &c(&["SAVE"])).await;
        let after: u64 = info(&mut con, "respite_durable_commits")
            .await
            .parse()
            .expect("durable commits");
        assert!(after > before, "SAVE made a durable commit");
        assert_eq!(info(&mut con, "respite_pending_changes").await, "0");
    }
    let srv = durable_server(dir.path(), "everysec");
    let mut con = connect(&srv, Proto::Resp2).await;
    for (i, mode) in modes.iter().enumerate() {
        let v: String = q(&mut con, &c(&["GET", &format!("mode:{i}")])).await;
        assert_eq!(v, *mode);
    }
    let got: Vec<String> = q(&mut con, &c(&["LRANGE", "modes", "0", "-1"])).await;
    assert_eq!(got, modes);
    let v: String = q(&mut con, &c(&["GET", "saved"])).await;
    assert_eq!(v, "1");
    // The start-up setting applies again after a restart.
    assert_eq!(info(&mut con, "respite_appendfsync").await, "everysec");
}
