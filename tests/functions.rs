//! Redis Functions through redis-rs: the S2 fixed-window rate limiter and the S3 lock with
//! fencing tokens (the `lua/` scenario scripts wrapped as one library) called with FCALL /
//! FCALL_RO; a runaway function answered with BUSY, shown by FUNCTION STATS and stopped by
//! FUNCTION KILL; FUNCTION LOAD REPLACE racing FCALLs from many connections; WATCH.

#[macro_use]
mod common;

use common::values::int;
use common::{
    c, connect, connections, killed_reply, lua_source, q, real_server, spawn_runaway, until_busy,
    Proto,
};
use redis::Value;

/// A library whose functions run the scenario scripts unchanged: each script body becomes
/// a local function of (KEYS, ARGV), registered under `name`.
fn scenario_library() -> String {
    let mut code = String::from("#!lua name=scenarios\n");
    let scripts = [
        ("fixed_window", "ratelimit_fixed_window.lua"),
        ("lock_acquire", "lock_acquire.lua"),
        ("lock_release", "lock_release.lua"),
        ("lock_renew", "lock_renew.lua"),
    ];
    for (name, file) in scripts {
        code.push_str(&format!(
            "local function {name}(KEYS, ARGV)\n{}\nend\nredis.register_function('{name}', {name})\n",
            lua_source(file)
        ));
    }
    // A read-only view of the lock, callable with FCALL_RO.
    code.push_str(
        "redis.register_function{function_name='lock_holder', flags={'no-writes'},\n\
         description='current holder and fencing token',\n\
         callback=function(keys) return redis.call('GET', keys[1]) end}\n",
    );
    code
}

async fn load_scenarios(con: &mut redis::aio::MultiplexedConnection) {
    let name: String = q(
        con,
        &c(&["FUNCTION", "LOAD", "REPLACE", &scenario_library()]),
    )
    .await;
    assert_eq!(name, "scenarios");
}

/// S2 through FCALL: 128 concurrent checks against a user limit of 32 admit exactly 32.
async fn rate_limiter_admits_exactly_the_limit(proto: Proto) {
    let server = real_server();
    let cons = connections(&server, proto, 16).await;
    load_scenarios(&mut cons[0].clone()).await;
    let mut tasks = Vec::new();
    for i in 0..128 {
        let mut con = cons[i % cons.len()].clone();
        tasks.push(tokio::spawn(async move {
            let r: Vec<Value> = redis::cmd("FCALL")
                .arg("fixed_window")
                .arg(2)
                .arg("{rl:u1}:user:w1")
                .arg(format!("{{rl:u1}}:key:k{}:w1", i % 2))
                .arg(32)
                .arg(1000)
                .arg(60_000)
                .query_async(&mut con)
                .await
                .expect("fcall");
            int(&r[0]) == 1
        }));
    }
    let mut admitted = 0;
    for t in tasks {
        admitted += i64::from(t.await.expect("task"));
    }
    assert_eq!(admitted, 32);
    let mut con = cons[0].clone();
    let used: i64 = q(&mut con, &c(&["GET", "{rl:u1}:user:w1"])).await;
    assert_eq!(used, 32);
    let ttl: i64 = q(&mut con, &c(&["PTTL", "{rl:u1}:user:w1"])).await;
    assert!(ttl > 0 && ttl <= 60_000, "{ttl}");
}

/// S3 through FCALL: each acquisition returns a larger fencing token; only the holder with
/// the current token renews or releases; FCALL_RO reads the holder, and refuses writers.
async fn lock_with_fencing_tokens(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    load_scenarios(&mut con).await;
    let (lock, fence) = ("{lock:a}:held", "{lock:a}:fence");
    let fcall = |f: &str, keys: &[&str], args: &[String]| {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(f).arg(keys.len()).arg(keys).arg(args);
        cmd
    };
    let mut last = 0;
    for round in 0..5 {
        let owner = format!("owner{round}");
        let token: Option<i64> = q(
            &mut con,
            &fcall(
                "lock_acquire",
                &[lock, fence],
                &[owner.clone(), "60000".into()],
            ),
        )
        .await;
        let token = token.expect("free lock is acquired");
        assert!(token > last, "fencing token {token} not above {last}");
        last = token;
        let again: Option<i64> = q(
            &mut con,
            &fcall(
                "lock_acquire",
                &[lock, fence],
                &["intruder".into(), "60000".into()],
            ),
        )
        .await;
        assert_eq!(again, None, "a held lock was acquired twice");
        let holder: String = q(&mut con, &c(&["FCALL_RO", "lock_holder", "1", lock])).await;
        assert_eq!(holder, format!("{owner}:{token}"));
        let renewed: i64 = q(
            &mut con,
            &fcall(
                "lock_renew",
                &[lock],
                &[owner.clone(), token.to_string(), "90000".into()],
            ),
        )
        .await;
        assert_eq!(renewed, 1);
        let wrong: i64 = q(
            &mut con,
            &fcall(
                "lock_release",
                &[lock],
                &["intruder".into(), token.to_string()],
            ),
        )
        .await;
        assert_eq!(wrong, 0, "a non-owner released the lock");
        let ok: i64 = q(
            &mut con,
            &fcall("lock_release", &[lock], &[owner, token.to_string()]),
        )
        .await;
        assert_eq!(ok, 1);
    }
    let refused = c(&["FCALL_RO", "lock_acquire", "2", lock, fence, "x", "1000"])
        .query_async::<Value>(&mut con)
        .await
        .expect_err("a writing function under FCALL_RO");
    assert!(
        refused
            .to_string()
            .contains("Can not execute a script with write flag using *_ro command."),
        "{refused}"
    );
}

/// Past lua-time-limit other clients get the FUNCTION KILL flavour of BUSY, SCRIPT KILL is
/// refused, FUNCTION STATS names the running function and its command, and FUNCTION KILL
/// stops it.
async fn runaway_function_is_busy_then_killed(proto: Proto) {
    let server = real_server();
    let mut admin = connect(&server, proto).await;
    let _: String = q(&mut admin, &c(&["CONFIG", "SET", "lua-time-limit", "100"])).await;
    let code = "#!lua name=spin\nredis.register_function('spin', function() while true do end end)";
    let _: String = q(&mut admin, &c(&["FUNCTION", "LOAD", code])).await;
    let runaway = spawn_runaway(&server, proto, c(&["FCALL", "spin", "0", "extra"])).await;
    let mut other = connect(&server, proto).await;
    let busy = until_busy(&mut other).await;
    assert!(busy.contains("You can only call FUNCTION KILL"), "{busy}");
    let script_kill = c(&["SCRIPT", "KILL"])
        .query_async::<Value>(&mut other)
        .await
        .expect_err("SCRIPT KILL of a function");
    assert!(
        script_kill.to_string().contains("FUNCTION KILL"),
        "{script_kill}"
    );
    let stats: Value = q(&mut other, &c(&["FUNCTION", "STATS"])).await;
    let shown = format!("{stats:?}");
    for word in [
        "running_script",
        "spin",
        "extra",
        "duration_ms",
        "libraries_count",
    ] {
        assert!(shown.contains(word), "{word} missing from {shown}");
    }
    let killed: String = q(&mut other, &c(&["FUNCTION", "KILL"])).await;
    assert_eq!(killed, "OK");
    let err = killed_reply(runaway).await;
    assert!(err.to_string().contains("Script killed"), "{err}");
    let stats: Value = q(&mut other, &c(&["FUNCTION", "STATS"])).await;
    assert!(!format!("{stats:?}").contains("spin"), "{stats:?}");
    let _: String = q(&mut admin, &c(&["CONFIG", "SET", "lua-time-limit", "5000"])).await;
}

/// FUNCTION LOAD REPLACE while FCALLs run on many connections (several worker threads,
/// each compiling libraries lazily): every call sees one whole version of the library.
async fn replace_while_calling(proto: Proto) {
    let server = real_server();
    let cons = connections(&server, proto, 8).await;
    let version = |v: i64| {
        format!(
            "#!lua name=ver\nredis.register_function('ver_a', function() return {v} end)\n\
             redis.register_function('ver_b', function() return {v} * 10 end)"
        )
    };
    let mut admin = cons[0].clone();
    let _: String = q(&mut admin, &c(&["FUNCTION", "LOAD", &version(0)])).await;
    let mut tasks = Vec::new();
    for (i, con) in cons.iter().enumerate() {
        let mut con = con.clone();
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            for _ in 0..100 {
                let f = if i % 2 == 0 { "ver_a" } else { "ver_b" };
                let v: i64 = q(&mut con, &c(&["FCALL", f, "0"])).await;
                seen.push(if i % 2 == 0 { v } else { v / 10 });
            }
            seen
        }));
    }
    for v in 1..=20 {
        let _: String = q(
            &mut admin,
            &c(&["FUNCTION", "LOAD", "REPLACE", &version(v)]),
        )
        .await;
    }
    for t in tasks {
        let seen = t.await.expect("task");
        assert!(seen.windows(2).all(|w| w[0] <= w[1]), "went back: {seen:?}");
        assert!(seen.iter().all(|v| (0..=20).contains(v)));
    }
    let last: i64 = q(&mut admin, &c(&["FCALL", "ver_b", "0"])).await;
    assert_eq!(last, 200);
    let _: String = q(&mut admin, &c(&["FUNCTION", "DELETE", "ver"])).await;
    let gone = c(&["FCALL", "ver_a", "0"])
        .query_async::<Value>(&mut admin)
        .await
        .expect_err("deleted function");
    assert!(gone.to_string().contains("Function not found"), "{gone}");
}

/// A key written by FCALL fails another client's WATCH; FCALL inside MULTI runs at EXEC.
async fn fcall_signals_watch(proto: Proto) {
    let server = real_server();
    let mut a = connect(&server, proto).await;
    let mut b = connect(&server, proto).await;
    let code = "#!lua name=w\nredis.register_function('setk', function(keys, args) \
                return redis.call('SET', keys[1], args[1]) end)";
    let _: String = q(&mut a, &c(&["FUNCTION", "LOAD", code])).await;
    let _: String = q(&mut a, &c(&["WATCH", "wk"])).await;
    let _: String = q(&mut b, &c(&["FCALL", "setk", "1", "wk", "other"])).await;
    let mut tx = redis::pipe();
    tx.atomic()
        .cmd("FCALL")
        .arg("setk")
        .arg(1)
        .arg("wk")
        .arg("mine");
    let r: Option<Vec<String>> = tx.query_async(&mut a).await.expect("exec");
    assert_eq!(r, None, "EXEC ran although FCALL changed a watched key");
    let r: Option<Vec<String>> = tx.query_async(&mut a).await.expect("exec");
    assert_eq!(r, Some(vec!["OK".to_string()]));
    let v: String = q(&mut a, &c(&["GET", "wk"])).await;
    assert_eq!(v, "mine");
}

/// FUNCTION DUMP of one server restores on another, with the same behaviour.
async fn dump_restores_elsewhere(proto: Proto) {
    let one = real_server();
    let two = real_server();
    let mut a = connect(&one, proto).await;
    let mut b = connect(&two, proto).await;
    load_scenarios(&mut a).await;
    let payload: Vec<u8> = q(&mut a, &c(&["FUNCTION", "DUMP"])).await;
    let ok: String = q(&mut b, redis::cmd("FUNCTION").arg("RESTORE").arg(&payload)).await;
    assert_eq!(ok, "OK");
    let token: i64 = q(
        &mut b,
        &c(&["FCALL", "lock_acquire", "2", "{l}:h", "{l}:f", "me", "1000"]),
    )
    .await;
    assert_eq!(token, 1);
    let again: Vec<u8> = q(&mut b, &c(&["FUNCTION", "DUMP"])).await;
    assert_eq!(again, payload);
}

both_protocols!(
    rate_limiter_admits_exactly_the_limit,
    lock_with_fencing_tokens,
    runaway_function_is_busy_then_killed,
    replace_while_calling,
    fcall_signals_watch,
    dump_restores_elsewhere,
);
