//! Scripting through redis-rs: S3 locks with fencing tokens via `redis::Script` (EVALSHA
//! with the load-and-retry fallback), and a runaway script answered with BUSY and stopped
//! by SCRIPT KILL while other clients keep working.

#[macro_use]
mod common;

use common::{
    c, connect, killed_reply, lua_script, q, real_server, spawn_runaway, until_busy, Proto,
};

/// Each successful acquisition returns a strictly larger fencing token, whether the
/// previous holder released or its lease expired; renew/release need the current owner.
async fn lock_fencing_tokens_increase(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let acquire = lua_script("lock_acquire.lua");
    let release = lua_script("lock_release.lua");
    let (lock, fence) = ("{lock:a}:held", "{lock:a}:fence");
    let mut last = 0i64;
    for round in 0..5 {
        let owner = format!("owner{round}");
        let token: Option<i64> = acquire
            .key(lock)
            .key(fence)
            .arg(&owner)
            .arg(60_000)
            .invoke_async(&mut con)
            .await
            .expect("acquire");
        let token = token.expect("free lock is acquired");
        assert!(token > last, "fencing token {token} not above {last}");
        last = token;
        let again: Option<i64> = acquire
            .key(lock)
            .key(fence)
            .arg("intruder")
            .arg(60_000)
            .invoke_async(&mut con)
            .await
            .expect("acquire");
        assert_eq!(again, None, "a held lock was acquired twice");
        let wrong: i64 = release
            .key(lock)
            .arg("intruder")
            .arg(token)
            .invoke_async(&mut con)
            .await
            .expect("release");
        assert_eq!(wrong, 0, "a non-owner released the lock");
        let ok: i64 = release
            .key(lock)
            .arg(&owner)
            .arg(token)
            .invoke_async(&mut con)
            .await
            .expect("release");
        assert_eq!(ok, 1);
    }
}

/// Past lua-time-limit other clients get BUSY; SCRIPT KILL stops a script that has not
/// written, and the server serves everyone again.
async fn runaway_script_is_busy_then_killed(proto: Proto) {
    let server = real_server();
    let mut admin = connect(&server, proto).await;
    let _: String = q(&mut admin, &c(&["CONFIG", "SET", "lua-time-limit", "100"])).await;
    let runaway = spawn_runaway(&server, proto, c(&["EVAL", "while true do end", "0"])).await;
    let mut other = connect(&server, proto).await;
    until_busy(&mut other).await;
    let killed: String = q(&mut other, &c(&["SCRIPT", "KILL"])).await;
    assert_eq!(killed, "OK");
    let err = killed_reply(runaway).await;
    assert!(err.to_string().contains("Script killed"), "{err}");
    let v: Option<String> = q(&mut other, &c(&["GET", "k"])).await;
    assert_eq!(v, None);
    let _: String = q(&mut admin, &c(&["CONFIG", "SET", "lua-time-limit", "5000"])).await;
}

both_protocols!(
    lock_fencing_tokens_increase,
    runaway_script_is_busy_then_killed
);
