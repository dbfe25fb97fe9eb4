//! The scenario scripts in `lua/` through redis-rs `Script` (EVALSHA, with SCRIPT LOAD and
//! retry on NOSCRIPT): S2 rate limiters, S4 semaphores and S6 two-phase commit, with the
//! concurrency counts SCENARIOS.md asks for; and the same scripts run against a real
//! redis-server and respite side by side, replies compared.

#[macro_use]
mod common;
use common::s6::{self, checkpoint, mark, prepare, promote, Group};

use common::values::{int, text};
use common::{
    admitted_by_user_limit, assert_saw_one_to, c, connect, connections, join_all, lua_script,
    lua_source, manual_server, q, real_server, Proto,
};
use redis::aio::MultiplexedConnection;
use redis::Value;

/// One fixed-window check: (admitted, second element, third element).
async fn window(
    con: &mut MultiplexedConnection,
    user: &str,
    apikey: &str,
    limits: (i64, i64),
) -> (bool, Value, Value) {
    let r: Vec<Value> = lua_script("ratelimit_fixed_window.lua")
        .key(format!("{{rl:{user}}}:user:w1"))
        .key(format!("{{rl:{user}}}:key:{apikey}:w1"))
        .arg(limits.0)
        .arg(limits.1)
        .arg(60_000)
        .invoke_async(con)
        .await
        .expect("fixed window");
    (int(&r[0]) == 1, r[1].clone(), r[2].clone())
}

/// S2: 128 concurrent checks against a user limit of 32 admit exactly 32; two API keys of
/// one user share the user's limit; an exhausted API key rejects without charging the user.
async fn fixed_window_limits(proto: Proto) {
    let server = real_server();
    let cons = connections(&server, proto, 16).await;
    let mut tasks = Vec::new();
    for i in 0..128 {
        let mut con = cons[i % cons.len()].clone();
        tasks.push(tokio::spawn(async move {
            window(&mut con, "u1", "k1", (32, 1000)).await
        }));
    }
    assert_eq!(admitted_by_user_limit(&join_all(tasks).await), 32);
    let mut con = cons[0].clone();
    let used: i64 = q(&mut con, &c(&["GET", "{rl:u1}:user:w1"])).await;
    assert_eq!(used, 32, "rejected checks must not increment");
    let ttl: i64 = q(&mut con, &c(&["PTTL", "{rl:u1}:user:w1"])).await;
    assert!(
        ttl > 0 && ttl <= 60_000,
        "window TTL set on first increment: {ttl}"
    );

    // Two API keys of one user share the user's limit of 5.
    let mut admitted = 0;
    for i in 0..10 {
        let key = if i % 2 == 0 { "a" } else { "b" };
        let (ok, ..) = window(&mut con, "u2", key, (5, 100)).await;
        admitted += ok as i64;
    }
    assert_eq!(admitted, 5);
    let a: i64 = q(&mut con, &c(&["GET", "{rl:u2}:key:a:w1"])).await;
    let b: i64 = q(&mut con, &c(&["GET", "{rl:u2}:key:b:w1"])).await;
    assert_eq!(a + b, 5);

    // An API-key limit names its scope and leaves the user counter alone.
    for _ in 0..2 {
        assert!(window(&mut con, "u3", "a", (100, 2)).await.0);
    }
    let (ok, scope, ttl) = window(&mut con, "u3", "a", (100, 2)).await;
    assert!(!ok);
    assert_eq!(text(&scope), "apikey");
    assert!(int(&ttl) > 0);
    let user: i64 = q(&mut con, &c(&["GET", "{rl:u3}:user:w1"])).await;
    assert_eq!(user, 2);
    assert!(window(&mut con, "u3", "b", (100, 2)).await.0);
}

/// One token-bucket request: (admitted, tokens left, retry-after ms).
async fn bucket(
    con: &mut MultiplexedConnection,
    key: &str,
    capacity: i64,
    refill: i64,
    interval: i64,
    cost: i64,
) -> (bool, i64, i64) {
    let r: (i64, i64, i64) = lua_script("ratelimit_token_bucket.lua")
        .key(key)
        .arg(capacity)
        .arg(refill)
        .arg(interval)
        .arg(cost)
        .invoke_async(con)
        .await
        .expect("token bucket");
    (r.0 == 1, r.1, r.2)
}

/// S2: a capacity-100, no-refill bucket hit 400 times from 8 connections admits exactly 100.
async fn token_bucket_without_refill_admits_capacity(proto: Proto) {
    let server = real_server();
    let cons = connections(&server, proto, 8).await;
    let mut tasks = Vec::new();
    for con in &cons {
        let mut con = con.clone();
        tasks.push(tokio::spawn(async move {
            let mut admitted = 0;
            for _ in 0..50 {
                admitted += bucket(&mut con, "{tb}:norefill", 100, 0, 1000, 1).await.0 as i64;
            }
            admitted
        }));
    }
    let mut admitted = 0;
    for t in tasks {
        admitted += t.await.expect("task");
    }
    assert_eq!(admitted, 100);
    let mut con = cons[0].clone();
    let (ok, left, retry) = bucket(&mut con, "{tb}:norefill", 100, 0, 1000, 1).await;
    assert_eq!((ok, left, retry), (false, 0, -1), "no refill: never retry");
}

/// S2: refill advances by whole intervals only (partial progress carries over); a denial
/// says when to retry; malformed state denies and heals after one interval. Manual clock.
async fn token_bucket_refills_and_heals(proto: Proto) {
    let server = manual_server();
    let mut con = connect(&server, proto).await;
    let key = "{tb}:refill";
    for i in 0..10 {
        assert_eq!(
            bucket(&mut con, key, 10, 2, 1000, 1).await,
            (true, 9 - i, 0)
        );
    }
    assert_eq!(
        bucket(&mut con, key, 10, 2, 1000, 1).await,
        (false, 0, 1000)
    );
    server.advance_ms(999);
    assert_eq!(bucket(&mut con, key, 10, 2, 1000, 1).await, (false, 0, 1));
    server.advance_ms(1);
    assert_eq!(bucket(&mut con, key, 10, 2, 1000, 1).await, (true, 1, 0));
    assert_eq!(bucket(&mut con, key, 10, 2, 1000, 1).await, (true, 0, 0));
    // 1.5 intervals: one refill now, and the half interval is not lost.
    server.advance_ms(1500);
    assert_eq!(bucket(&mut con, key, 10, 2, 1000, 2).await, (true, 0, 0));
    assert_eq!(bucket(&mut con, key, 10, 2, 1000, 1).await, (false, 0, 500));
    server.advance_ms(500);
    assert_eq!(bucket(&mut con, key, 10, 2, 1000, 2).await, (true, 0, 0));
    // A cost above what is left waits for enough whole intervals.
    assert_eq!(
        bucket(&mut con, key, 10, 2, 1000, 5).await,
        (false, 0, 3000)
    );
    // A cost above capacity can never be admitted.
    assert_eq!(bucket(&mut con, key, 10, 2, 1000, 11).await, (false, 0, -1));

    // Malformed state fails closed, then heals after one interval.
    let _: i64 = q(
        &mut con,
        &c(&["HSET", "{tb}:bad", "tokens", "lots", "ts", "0"]),
    )
    .await;
    let (ok, _, retry) = bucket(&mut con, "{tb}:bad", 10, 1, 1000, 1).await;
    assert!(!ok);
    assert_eq!(retry, 1000);
    server.advance_ms(500);
    assert_eq!(
        bucket(&mut con, "{tb}:bad", 10, 1, 1000, 1).await,
        (false, 0, 500)
    );
    server.advance_ms(501);
    assert_eq!(
        bucket(&mut con, "{tb}:bad", 10, 1, 1000, 1).await,
        (true, 9, 0)
    );
    // A key of another type is malformed state too.
    let _: String = q(&mut con, &c(&["SET", "{tb}:str", "x"])).await;
    assert!(!bucket(&mut con, "{tb}:str", 10, 1, 1000, 1).await.0);
    server.advance_ms(1001);
    assert!(bucket(&mut con, "{tb}:str", 10, 1, 1000, 1).await.0);
}

/// S7 through a script: 8 connections × 50 increments total exactly 400, each increment
/// seeing a distinct value.
async fn scripted_increments_total_400(proto: Proto) {
    let server = real_server();
    let cons = connections(&server, proto, 8).await;
    let incr = redis::Script::new("return redis.call('INCRBY', KEYS[1], ARGV[1])");
    let mut tasks = Vec::new();
    for con in &cons {
        let mut con = con.clone();
        let incr = incr.clone();
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            for _ in 0..50 {
                let v: i64 = incr
                    .key("{host}:counter")
                    .arg(1)
                    .invoke_async(&mut con)
                    .await
                    .expect("incr");
                seen.push(v);
            }
            seen
        }));
    }
    assert_saw_one_to(tasks, 400).await;
    let mut con = cons[0].clone();
    let total: i64 = q(&mut con, &c(&["GET", "{host}:counter"])).await;
    assert_eq!(total, 400);
}

async fn sem_acquire(
    con: &mut MultiplexedConnection,
    gate: &str,
    token: &str,
    limit: i64,
    lease: i64,
) -> (bool, i64) {
    let r: (i64, i64) = lua_script("semaphore_acquire.lua")
        .key(gate)
        .arg(token)
        .arg(limit)
        .arg(lease)
        .invoke_async(con)
        .await
        .expect("acquire");
    (r.0 == 1, r.1)
}

async fn sem_call(con: &mut MultiplexedConnection, script: &str, gate: &str, args: &[&str]) -> i64 {
    let s = lua_script(script);
    let mut inv = s.key(gate);
    for a in args {
        inv.arg(*a);
    }
    inv.invoke_async(con).await.expect(script)
}

/// S4: limit-1 gates refuse a second holder until release; gates are independent; renew
/// works only for a live lease; the count drops expired holders. Manual clock.
async fn semaphore_gates(proto: Proto) {
    let server = manual_server();
    let mut con = connect(&server, proto).await;
    assert_eq!(
        sem_acquire(&mut con, "gate:a", "t1", 1, 1000).await,
        (true, 1)
    );
    assert_eq!(
        sem_acquire(&mut con, "gate:a", "t2", 1, 1000).await,
        (false, 1)
    );
    assert_eq!(
        sem_acquire(&mut con, "gate:b", "t2", 1, 1000).await,
        (true, 1)
    );
    // Re-acquiring a held token re-leases it instead of taking a second slot.
    assert_eq!(
        sem_acquire(&mut con, "gate:a", "t1", 1, 1000).await,
        (true, 1)
    );
    assert_eq!(
        sem_call(&mut con, "semaphore_release.lua", "gate:a", &["t1"]).await,
        1
    );
    assert_eq!(
        sem_call(&mut con, "semaphore_release.lua", "gate:a", &["t1"]).await,
        0
    );
    assert_eq!(
        sem_acquire(&mut con, "gate:a", "t2", 1, 1000).await,
        (true, 1)
    );

    // Renew extends a live lease; an expired one cannot be renewed.
    assert_eq!(
        sem_acquire(&mut con, "gate:c", "x", 3, 1000).await,
        (true, 1)
    );
    assert_eq!(
        sem_acquire(&mut con, "gate:c", "y", 3, 1000).await,
        (true, 2)
    );
    server.advance_ms(600);
    assert_eq!(
        sem_call(&mut con, "semaphore_renew.lua", "gate:c", &["x", "1000"]).await,
        1
    );
    server.advance_ms(600);
    assert_eq!(
        sem_call(&mut con, "semaphore_renew.lua", "gate:c", &["y", "1000"]).await,
        0
    );
    assert_eq!(
        sem_call(&mut con, "semaphore_count.lua", "gate:c", &[]).await,
        1
    );
    let ttl: i64 = q(&mut con, &c(&["PTTL", "gate:c"])).await;
    assert_eq!(ttl, 400, "the gate lives as long as its last lease");
    server.advance_ms(401);
    assert_eq!(
        sem_call(&mut con, "semaphore_count.lua", "gate:c", &[]).await,
        0
    );
    let exists: i64 = q(&mut con, &c(&["EXISTS", "gate:c"])).await;
    assert_eq!(exists, 0);

    // 64 concurrent acquires on a limit-8 gate admit exactly 8.
    let cons = connections(&server, proto, 8).await;
    let mut tasks = Vec::new();
    for i in 0..64 {
        let mut con = cons[i % cons.len()].clone();
        tasks.push(tokio::spawn(async move {
            sem_acquire(&mut con, "gate:busy", &format!("h{i}"), 8, 10_000)
                .await
                .0
        }));
    }
    let mut admitted = 0;
    for t in tasks {
        admitted += t.await.expect("task") as i64;
    }
    assert_eq!(admitted, 8);
    assert_eq!(
        sem_call(&mut con, "semaphore_count.lua", "gate:busy", &[]).await,
        8
    );
}

/// The load path: the whole group in one MULTI/EXEC.
async fn load(con: &mut MultiplexedConnection, v: &str) -> Group {
    s6::sorted(s6::load_pipe(v).query_async(con).await.expect("load"))
}

/// S6 end to end: prepare (already / busy / conflict), mark-published, promote (refused
/// until published), the MULTI/EXEC load, the per-partition index, binary values verbatim.
async fn two_phase_commit(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    assert_eq!(
        prepare(&mut con, "7", "out1", "", 1).await,
        ["prepared", "1"]
    );
    let _: i64 = q(&mut con, &c(&["SADD", "staged:p0", "7"])).await;
    assert_eq!(
        prepare(&mut con, "7", "out1", "", 1).await,
        ["already", "1"]
    );
    assert_eq!(
        prepare(&mut con, "7", "out2", "", 1).await,
        ["busy", "out1"]
    );
    assert_eq!(promote(&mut con, "7", "out1").await, ["not-published"]);
    assert_eq!(mark(&mut con, "7", "out2").await, ["busy", "out1"]);
    assert_eq!(mark(&mut con, "7", "out1").await, ["published"]);
    let staged: Vec<String> = q(&mut con, &c(&["SMEMBERS", "staged:p0"])).await;
    assert_eq!(staged, ["7"]);
    let (cp, rev, prep) = load(&mut con, "7").await;
    assert!(cp.is_empty());
    assert_eq!(rev, None);
    assert!(prep.contains(&(b"c:blob".to_vec(), vec![0x00, 0xff, 0x80, 1, b'\r', b'\n'])));

    assert_eq!(promote(&mut con, "7", "out1").await, ["promoted", "1"]);
    let _: i64 = q(&mut con, &c(&["SREM", "staged:p0", "7"])).await;
    let (cp, rev, prep) = load(&mut con, "7").await;
    let mut want = checkpoint(1);
    want.sort();
    assert_eq!(cp, want, "binary fields and values come back verbatim");
    assert_eq!(rev.as_deref(), Some("1"));
    assert!(prep.is_empty());
    let ttl: i64 = q(&mut con, &c(&["PTTL", "{vehicle:7}:checkpoint"])).await;
    assert!(ttl > 3_590_000 && ttl <= 3_600_000, "{ttl}");
    let staged: Vec<String> = q(&mut con, &c(&["SMEMBERS", "staged:p0"])).await;
    assert!(staged.is_empty());

    // The next round must name the committed base revision.
    assert_eq!(
        prepare(&mut con, "7", "out3", "", 2).await,
        ["conflict", "1"]
    );
    assert_eq!(
        prepare(&mut con, "7", "out3", "1", 2).await,
        ["prepared", "2"]
    );
    assert_eq!(mark(&mut con, "7", "out3").await, ["published"]);
    assert_eq!(promote(&mut con, "7", "out3").await, ["promoted", "2"]);
    let (cp, rev, _) = load(&mut con, "7").await;
    let mut want = checkpoint(2);
    want.sort();
    assert_eq!(cp, want);
    assert_eq!(rev.as_deref(), Some("2"));
    assert_eq!(promote(&mut con, "7", "out3").await, ["missing"]);
}

/// The client-library invocation path by hand: EVALSHA first, NOSCRIPT, then EVAL (which
/// caches the body) and EVALSHA again.
async fn evalsha_falls_back_to_eval(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let body = lua_source("semaphore_count.lua");
    let sha = lua_script("semaphore_count.lua").get_hash().to_string();
    let err = c(&["EVALSHA", &sha, "1", "gate"])
        .query_async::<i64>(&mut con)
        .await
        .expect_err("not loaded yet");
    assert_eq!(err.code(), Some("NOSCRIPT"), "{err}");
    let n: i64 = q(&mut con, &c(&["EVAL", &body, "1", "gate"])).await;
    assert_eq!(n, 0);
    let n: i64 = q(&mut con, &c(&["EVALSHA", &sha, "1", "gate"])).await;
    assert_eq!(n, 0);
}

both_protocols!(
    fixed_window_limits,
    token_bucket_without_refill_admits_capacity,
    token_bucket_refills_and_heals,
    scripted_increments_total_400,
    semaphore_gates,
    two_phase_commit,
    evalsha_falls_back_to_eval,
);

/// The scenario scripts give the same replies on redis-server and on respite, step by
/// step (replies carrying times are compared by shape).
#[test]
fn scenario_scripts_match_redis() {
    use common::{Conn, Frame, ServerProcess};
    let redis = ServerProcess::redis();
    let respite = real_server();
    let mut ours = Conn::connect(respite.port()).expect("respite");
    let mut theirs = Conn::connect(redis.port).expect("redis");
    let arg = |s: &str| s.as_bytes().to_vec();
    let eval = |script: &str, keys: &[&str], args: &[Vec<u8>]| -> Vec<Vec<u8>> {
        let mut v = vec![arg("EVAL"), lua_source(script).into_bytes()];
        v.push(arg(&keys.len().to_string()));
        v.extend(keys.iter().map(|k| arg(k)));
        v.extend(args.iter().cloned());
        v
    };
    let mut prep_args = vec![arg("out1"), arg(""), arg("1")];
    for (f, v) in checkpoint(1) {
        prep_args.push(f);
        prep_args.push(v);
    }
    let p = ["{vehicle:1}:prepared", "{vehicle:1}:committed-revision"];
    let pc = [p[0], p[1], "{vehicle:1}:checkpoint"];
    let steps: Vec<(Vec<Vec<u8>>, bool)> = vec![
        (eval("twophase_prepare.lua", &p, &prep_args), true),
        (eval("twophase_prepare.lua", &p, &prep_args), true),
        (
            eval("twophase_promote.lua", &pc, &[arg("out1"), arg("1000000")]),
            true,
        ),
        (
            eval("twophase_mark_published.lua", &p[..1], &[arg("zzz")]),
            true,
        ),
        (
            eval("twophase_mark_published.lua", &p[..1], &[arg("out1")]),
            true,
        ),
        (
            eval("twophase_promote.lua", &pc, &[arg("out1"), arg("1000000")]),
            true,
        ),
        (vec![arg("HGETALL"), arg(pc[2])], true),
        (vec![arg("GET"), arg(p[1])], true),
        (eval("twophase_prepare.lua", &p, &prep_args), true),
        (
            eval(
                "semaphore_acquire.lua",
                &["g"],
                &[arg("a"), arg("1"), arg("5000")],
            ),
            true,
        ),
        (
            eval(
                "semaphore_acquire.lua",
                &["g"],
                &[arg("b"), arg("1"), arg("5000")],
            ),
            true,
        ),
        (
            eval("semaphore_renew.lua", &["g"], &[arg("a"), arg("5000")]),
            true,
        ),
        (
            eval("semaphore_renew.lua", &["g"], &[arg("b"), arg("5000")]),
            true,
        ),
        (eval("semaphore_count.lua", &["g"], &[]), true),
        (eval("semaphore_release.lua", &["g"], &[arg("a")]), true),
        (eval("semaphore_count.lua", &["g"], &[]), true),
        (
            eval(
                "lock_acquire.lua",
                &["{l}:h", "{l}:f"],
                &[arg("me"), arg("5000")],
            ),
            true,
        ),
        (
            eval(
                "lock_acquire.lua",
                &["{l}:h", "{l}:f"],
                &[arg("you"), arg("5000")],
            ),
            true,
        ),
        (
            eval(
                "lock_renew.lua",
                &["{l}:h"],
                &[arg("me"), arg("1"), arg("5000")],
            ),
            true,
        ),
        (
            eval("lock_release.lua", &["{l}:h"], &[arg("me"), arg("1")]),
            true,
        ),
        (
            eval(
                "ratelimit_fixed_window.lua",
                &["{r}:u", "{r}:k"],
                &[arg("1"), arg("9"), arg("60000")],
            ),
            true,
        ),
        (
            eval(
                "ratelimit_fixed_window.lua",
                &["{r}:u", "{r}:k"],
                &[arg("1"), arg("9"), arg("60000")],
            ),
            false,
        ),
        (
            eval(
                "ratelimit_token_bucket.lua",
                &["{b}"],
                &[arg("2"), arg("0"), arg("100"), arg("1")],
            ),
            true,
        ),
        (
            eval(
                "ratelimit_token_bucket.lua",
                &["{b}"],
                &[arg("2"), arg("0"), arg("100"), arg("5")],
            ),
            true,
        ),
        (vec![arg("HSET"), arg("{b}"), arg("tokens"), arg("x")], true),
        (
            eval(
                "ratelimit_token_bucket.lua",
                &["{b}"],
                &[arg("2"), arg("0"), arg("100"), arg("1")],
            ),
            false,
        ),
        (
            eval("ratelimit_token_bucket.lua", &["{b}:s"], &[arg("2")]),
            true,
        ),
    ];
    /// Integers in replies that carry times are compared by type only.
    fn shape(f: &Frame) -> Frame {
        match f {
            Frame::Int(_) => Frame::Int(0),
            Frame::Array(items) => Frame::Array(items.iter().map(shape).collect()),
            other => other.clone(),
        }
    }
    for (i, (cmd, exact)) in steps.iter().enumerate() {
        let a = ours.call(cmd).expect("respite reply");
        let b = theirs.call(cmd).expect("redis reply");
        let (a, b) = if *exact {
            (a, b)
        } else {
            (shape(&a), shape(&b))
        };
        let (a, b) = (a.to_string(), b.to_string());
        // Error texts name the script by SHA and line; those agree when the bodies do.
        assert_eq!(a, b, "step {i}: {:?}", String::from_utf8_lossy(&cmd[0]));
    }
}
