//! SCENARIOS.md S4 (semaphores / admission gates) through redis-rs, written with
//! WATCH/MULTI/EXEC optimistic transactions until scripting lands: a sorted set per gate
//! holds holder tokens scored by lease expiry (ms on the server's manual clock).

#[macro_use]
mod common;

use common::{c, connect, manual_server, q, Proto};
use redis::aio::MultiplexedConnection;

/// Outcome of an acquire: admitted?, and the in-flight count after it.
async fn acquire(
    con: &mut MultiplexedConnection,
    gate: &str,
    token: &str,
    limit: i64,
    now: u64,
    lease: u64,
) -> (bool, i64) {
    loop {
        let _: String = q(con, &c(&["WATCH", gate])).await;
        let _: i64 = q(
            con,
            &c(&["ZREMRANGEBYSCORE", gate, "-inf", &format!("({now}")]),
        )
        .await;
        let live: i64 = q(con, &c(&["ZCARD", gate])).await;
        if live >= limit {
            let _: String = q(con, &c(&["UNWATCH"])).await;
            return (false, live);
        }
        let mut p = redis::pipe();
        p.atomic()
            .cmd("ZADD")
            .arg(gate)
            .arg(now + lease)
            .arg(token)
            .cmd("ZCARD")
            .arg(gate);
        let r: Option<(i64, i64)> = p.query_async(con).await.expect("exec");
        if let Some((_, n)) = r {
            return (true, n);
        }
        // Another client changed the gate between WATCH and EXEC: retry.
    }
}

/// Renews a live token's lease; false if the token is gone or expired.
async fn renew(
    con: &mut MultiplexedConnection,
    gate: &str,
    token: &str,
    now: u64,
    lease: u64,
) -> bool {
    let score: Option<f64> = q(con, &c(&["ZSCORE", gate, token])).await;
    match score {
        Some(s) if s as u64 >= now => {
            let r: i64 = q(
                con,
                &c(&["ZADD", gate, "XX", "CH", &(now + lease).to_string(), token]),
            )
            .await;
            r == 1
        }
        _ => false,
    }
}

async fn live_count(con: &mut MultiplexedConnection, gate: &str, now: u64) -> i64 {
    let _: i64 = q(
        con,
        &c(&["ZREMRANGEBYSCORE", gate, "-inf", &format!("({now}")]),
    )
    .await;
    q(con, &c(&["ZCARD", gate])).await
}

async fn gate_of_one_refuses_until_release(proto: Proto) {
    let server = manual_server();
    let mut con = connect(&server, proto).await;
    let now = server.clock().now_ms();
    assert_eq!(
        acquire(&mut con, "gate:a", "t1", 1, now, 1000).await,
        (true, 1)
    );
    assert_eq!(
        acquire(&mut con, "gate:a", "t2", 1, now, 1000).await,
        (false, 1)
    );
    // Gates keyed per resource have independent capacity.
    assert_eq!(
        acquire(&mut con, "gate:b", "t2", 1, now, 1000).await,
        (true, 1)
    );
    let removed: i64 = q(&mut con, &c(&["ZREM", "gate:a", "t1"])).await;
    assert_eq!(removed, 1);
    assert_eq!(
        acquire(&mut con, "gate:a", "t2", 1, now, 1000).await,
        (true, 1)
    );
}

async fn expired_holders_are_dropped_and_cannot_renew(proto: Proto) {
    let server = manual_server();
    let mut con = connect(&server, proto).await;
    let t0 = server.clock().now_ms();
    assert!(acquire(&mut con, "gate", "old", 2, t0, 100).await.0);
    assert!(acquire(&mut con, "gate", "live", 2, t0, 10_000).await.0);
    assert_eq!(
        acquire(&mut con, "gate", "third", 2, t0, 100).await,
        (false, 2)
    );
    server.advance_ms(500);
    let now = server.clock().now_ms();
    assert!(
        !renew(&mut con, "gate", "old", now, 100).await,
        "expired lease renews"
    );
    assert!(renew(&mut con, "gate", "live", now, 10_000).await);
    assert_eq!(live_count(&mut con, "gate", now).await, 1);
    assert_eq!(
        acquire(&mut con, "gate", "third", 2, now, 100).await,
        (true, 2)
    );
}

/// 16 clients race for a gate of limit 4: exactly 4 are admitted.
async fn concurrent_acquires_admit_exactly_the_limit(proto: Proto) {
    let server = manual_server();
    let now = server.clock().now_ms();
    let mut tasks = Vec::new();
    for i in 0..16 {
        let mut con = connect(&server, proto).await;
        tasks.push(tokio::spawn(async move {
            acquire(&mut con, "gate", &format!("t{i}"), 4, now, 60_000)
                .await
                .0
        }));
    }
    let mut admitted = 0;
    for t in tasks {
        if t.await.expect("task") {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 4);
    let mut con = connect(&server, proto).await;
    assert_eq!(live_count(&mut con, "gate", now).await, 4);
}

both_protocols!(
    gate_of_one_refuses_until_release,
    expired_holders_are_dropped_and_cannot_renew,
    concurrent_acquires_admit_exactly_the_limit,
);
