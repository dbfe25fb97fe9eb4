//! The atomicity invariants of DESIGN.md §4, checked through redis-rs with concurrent
//! connections: single commands (multi-key included) and MULTI/EXEC are atomic with respect
//! to every other client, and WATCH sees writes and expiry. Loops are bounded by count,
//! never by wall-clock time.

#[macro_use]
mod common;

use common::{c, connect, manual_server, q, real_server, Proto};

/// S7: 8 connections × 50 INCR on one counter total exactly 400.
async fn concurrent_incr_is_exact(proto: Proto) {
    let server = real_server();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let mut con = connect(&server, proto).await;
        tasks.push(tokio::spawn(async move {
            for _ in 0..50 {
                let _: i64 = q(&mut con, &c(&["INCR", "counter"])).await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    let mut con = connect(&server, proto).await;
    let total: i64 = q(&mut con, &c(&["GET", "counter"])).await;
    assert_eq!(total, 400);
}

/// MSET over keys in different shards is seen all-or-nothing by concurrent MGETs.
async fn mset_is_atomic_across_shards(proto: Proto) {
    let server = real_server();
    let keys = ["alpha", "beta", "gamma", "delta", "{x}1", "{y}2"];
    let mut writer = connect(&server, proto).await;
    let writes = tokio::spawn(async move {
        for i in 0..300 {
            let v = i.to_string();
            let mut args = vec!["MSET"];
            for k in keys {
                args.push(k);
                args.push(&v);
            }
            let _: String = q(&mut writer, &c(&args)).await;
        }
    });
    let mut readers = Vec::new();
    for _ in 0..2 {
        let mut con = connect(&server, proto).await;
        readers.push(tokio::spawn(async move {
            for _ in 0..300 {
                let mut args = vec!["MGET"];
                args.extend(keys);
                let vals: Vec<Option<String>> = q(&mut con, &c(&args)).await;
                assert!(
                    vals.windows(2).all(|w| w[0] == w[1]),
                    "torn MSET seen: {vals:?}"
                );
            }
        }));
    }
    writes.await.expect("writer");
    for r in readers {
        r.await.expect("reader");
    }
}

/// Commands queued in MULTI/EXEC are applied together: readers never see x != y.
async fn exec_is_atomic(proto: Proto) {
    let server = real_server();
    let mut writer = connect(&server, proto).await;
    let writes = tokio::spawn(async move {
        for _ in 0..200 {
            let mut p = redis::pipe();
            p.atomic().cmd("INCR").arg("x").cmd("INCR").arg("y");
            let _: (i64, i64) = p.query_async(&mut writer).await.expect("exec");
        }
    });
    let mut con = connect(&server, proto).await;
    for _ in 0..300 {
        let vals: Vec<Option<i64>> = q(&mut con, &c(&["MGET", "x", "y"])).await;
        assert_eq!(vals[0], vals[1], "EXEC seen half-applied");
    }
    writes.await.expect("writer");
    let vals: Vec<i64> = q(&mut con, &c(&["MGET", "x", "y"])).await;
    assert_eq!(vals, vec![200, 200]);
}

/// A write by another client to a watched key makes EXEC return nil; unrelated writes don't.
async fn watch_sees_other_clients(proto: Proto) {
    let server = real_server();
    let mut a = connect(&server, proto).await;
    let mut b = connect(&server, proto).await;
    let _: String = q(&mut a, &c(&["WATCH", "w"])).await;
    let _: String = q(&mut b, &c(&["SET", "other", "1"])).await;
    let mut p = redis::pipe();
    p.atomic().cmd("SET").arg("w").arg("mine");
    let r: Option<(String,)> = p.query_async(&mut a).await.expect("exec");
    assert_eq!(
        r,
        Some(("OK".to_string(),)),
        "unrelated write must not abort"
    );

    let _: String = q(&mut a, &c(&["WATCH", "w"])).await;
    let _: String = q(&mut b, &c(&["SET", "w", "theirs"])).await;
    let r: Option<(String,)> = p.query_async(&mut a).await.expect("exec");
    assert_eq!(r, None, "write to a watched key must abort EXEC");
    let v: String = q(&mut a, &c(&["GET", "w"])).await;
    assert_eq!(v, "theirs");
}

/// A watched key that expires before EXEC aborts it (Redis 7); the manual clock makes it
/// deterministic.
async fn watch_sees_expiry(proto: Proto) {
    let server = manual_server();
    let mut a = connect(&server, proto).await;
    let _: String = q(&mut a, &c(&["SET", "k", "v", "PX", "100"])).await;
    let _: String = q(&mut a, &c(&["WATCH", "k"])).await;
    server.advance_ms(200);
    let mut p = redis::pipe();
    p.atomic().cmd("SET").arg("x").arg("1");
    let r: Option<(String,)> = p.query_async(&mut a).await.expect("exec");
    assert_eq!(r, None, "expiry of a watched key must abort EXEC");
}

both_protocols!(
    concurrent_incr_is_exact,
    mset_is_atomic_across_shards,
    exec_is_atomic,
    watch_sees_other_clients,
    watch_sees_expiry,
);
