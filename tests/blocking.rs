//! Blocking list pops (DESIGN.md §4) through redis-rs against an in-process respite, each
//! under RESP2 and RESP3: FIFO wake-up order, a pushed element served exactly once,
//! sub-second timeouts, `0` waits for data, other connections keep being served, BLMOVE,
//! MULTI, and clients that leave while blocked.
//!
//! No wall-clock thresholds are asserted: waits are bounded only by `HANG_GUARD` (a
//! deadlock guard), and "still blocked" is checked by the server's own `blocked_clients`.

#[macro_use]
mod common;

use common::{
    blocked_clients, blocking_conn, c, connect, frame, joined, q, real_server, until_blocked,
    Proto, Raw, HANG_GUARD,
};
use redis::Value;
use respite::TestServer;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Runs a blocking command on its own connection in the background.
async fn spawn_blocking<T>(server: &TestServer, proto: Proto, args: &[&str]) -> JoinHandle<T>
where
    T: redis::FromRedisValue + Send + 'static,
{
    let mut con = blocking_conn(server, proto).await;
    let cmd = c(args);
    tokio::spawn(async move { q::<T>(&mut con, &cmd).await })
}

type Popped = Option<(String, String)>;

/// Three clients block on one key in turn; one push of three elements serves them in the
/// order they blocked, each with the next element from the head.
async fn fifo_wake_up_order(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let mut waiters = Vec::new();
    for i in 1..=3 {
        waiters.push(spawn_blocking::<Popped>(&server, proto, &["BLPOP", "k", "0"]).await);
        until_blocked(&mut con, i).await;
    }
    let n: i64 = q(&mut con, &c(&["RPUSH", "k", "a", "b", "c"])).await;
    assert_eq!(n, 3);
    let mut got = Vec::new();
    for w in waiters {
        got.push(joined(w).await);
    }
    let want: Vec<Popped> = ["a", "b", "c"]
        .iter()
        .map(|v| Some(("k".to_string(), v.to_string())))
        .collect();
    assert_eq!(got, want);
    let exists: i64 = q(&mut con, &c(&["EXISTS", "k"])).await;
    assert_eq!(exists, 0);
}

/// Pushes one at a time to a key several clients wait on: the first waiter takes the first
/// element, and so on (no later client overtakes an earlier one).
async fn fifo_one_push_at_a_time(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let mut waiters = Vec::new();
    for i in 1..=3 {
        waiters.push(spawn_blocking::<Popped>(&server, proto, &["BRPOP", "k", "0"]).await);
        until_blocked(&mut con, i).await;
    }
    for (i, w) in waiters.into_iter().enumerate() {
        let v = format!("v{i}");
        let _: i64 = q(&mut con, &c(&["LPUSH", "k", &v])).await;
        assert_eq!(joined(w).await, Some(("k".to_string(), v)));
    }
}

/// Five clients wait; three elements arrive: exactly three clients get one each, no
/// element twice, the other two stay blocked until two more elements come.
async fn pushed_element_served_exactly_once(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let mut waiters = Vec::new();
    for i in 1..=5 {
        waiters.push(spawn_blocking::<Popped>(&server, proto, &["BLPOP", "q", "0"]).await);
        until_blocked(&mut con, i).await;
    }
    for v in ["1", "2", "3"] {
        let _: i64 = q(&mut con, &c(&["RPUSH", "q", v])).await;
    }
    until_blocked(&mut con, 2).await;
    let len: i64 = q(&mut con, &c(&["LLEN", "q"])).await;
    assert_eq!(len, 0, "every pushed element went to a waiter");
    let _: i64 = q(&mut con, &c(&["RPUSH", "q", "4", "5"])).await;
    let mut got: Vec<String> = Vec::new();
    for w in waiters {
        let (key, v) = joined(w).await.expect("served, not timed out");
        assert_eq!(key, "q");
        got.push(v);
    }
    got.sort();
    assert_eq!(got, ["1", "2", "3", "4", "5"]);
    assert_eq!(blocked_clients(&mut con).await, 0);
}

/// Sub-second timeouts answer nil (a null array), never data; other forms too.
async fn timeouts_answer_nil(proto: Proto) {
    let server = real_server();
    let mut con = blocking_conn(&server, proto).await;
    let v: Value = q(&mut con, &c(&["BLPOP", "missing", "0.05"])).await;
    assert_eq!(v, Value::Nil);
    let v: Value = q(&mut con, &c(&["BRPOP", "a", "b", "0.02"])).await;
    assert_eq!(v, Value::Nil);
    let v: Value = q(&mut con, &c(&["BLMOVE", "a", "b", "LEFT", "RIGHT", "0.02"])).await;
    assert_eq!(v, Value::Nil);
    let v: Value = q(&mut con, &c(&["BRPOPLPUSH", "a", "b", "0.01"])).await;
    assert_eq!(v, Value::Nil);
    let v: Value = q(&mut con, &c(&["BLMPOP", "0.01", "2", "a", "b", "LEFT"])).await;
    assert_eq!(v, Value::Nil);
    // The connection is usable afterwards and nothing was left behind.
    let pong: String = q(&mut con, &c(&["PING"])).await;
    assert_eq!(pong, "PONG");
    assert_eq!(blocked_clients(&mut con).await, 0);
    let n: i64 = q(&mut con, &c(&["EXISTS", "a", "b", "missing"])).await;
    assert_eq!(n, 0);
}

/// A timed-out waiter does not take an element pushed afterwards.
async fn timed_out_waiter_takes_nothing(proto: Proto) {
    let server = real_server();
    let mut con = blocking_conn(&server, proto).await;
    let v: Popped = q(&mut con, &c(&["BLPOP", "k", "0.01"])).await;
    assert_eq!(v, None);
    let _: i64 = q(&mut con, &c(&["RPUSH", "k", "x"])).await;
    let len: i64 = q(&mut con, &c(&["LLEN", "k"])).await;
    assert_eq!(len, 1);
}

/// `0` blocks until data arrives, however long that takes.
async fn zero_blocks_until_data(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let w = spawn_blocking::<Popped>(&server, proto, &["BRPOP", "k", "0"]).await;
    until_blocked(&mut con, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!w.is_finished(), "BRPOP k 0 answered without data");
    assert_eq!(blocked_clients(&mut con).await, 1);
    let _: i64 = q(&mut con, &c(&["RPUSH", "k", "late"])).await;
    assert_eq!(joined(w).await, Some(("k".to_string(), "late".to_string())));
}

/// While one connection is blocked, others keep being served, including on other keys of
/// the same shard and on the blocked key itself (reads, non-list writes elsewhere).
async fn blocked_client_does_not_stall_others(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let w = spawn_blocking::<Popped>(&server, proto, &["BLPOP", "k", "0"]).await;
    until_blocked(&mut con, 1).await;
    let mut other = connect(&server, proto).await;
    for i in 0..50 {
        let v = i.to_string();
        let _: () = q(&mut other, &c(&["SET", "s", &v])).await;
        let got: String = q(&mut other, &c(&["GET", "s"])).await;
        assert_eq!(got, v);
        let _: i64 = q(&mut other, &c(&["LPUSH", "other", &v])).await;
    }
    let len: i64 = q(&mut other, &c(&["LLEN", "k"])).await;
    assert_eq!(len, 0);
    let pong: String = q(&mut con, &c(&["PING"])).await;
    assert_eq!(pong, "PONG");
    assert!(!w.is_finished());
    let _: i64 = q(&mut other, &c(&["RPUSH", "k", "done"])).await;
    assert_eq!(joined(w).await, Some(("k".into(), "done".into())));
}

/// BLPOP on several keys is served by a push to any of them.
async fn served_from_any_key(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let w = spawn_blocking::<Popped>(&server, proto, &["BLPOP", "a", "b", "c", "0"]).await;
    until_blocked(&mut con, 1).await;
    let _: i64 = q(&mut con, &c(&["RPUSH", "c", "x"])).await;
    assert_eq!(joined(w).await, Some(("c".into(), "x".into())));
}

/// BLMOVE moves the pushed element to its destination; a client blocked on that
/// destination is then served in turn.
async fn blmove_to_another_key(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let mover = spawn_blocking::<Option<String>>(
        &server,
        proto,
        &["BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"],
    )
    .await;
    until_blocked(&mut con, 1).await;
    let _: i64 = q(&mut con, &c(&["RPUSH", "src", "job"])).await;
    assert_eq!(joined(mover).await.as_deref(), Some("job"));
    let dst: Vec<String> = q(&mut con, &c(&["LRANGE", "dst", "0", "-1"])).await;
    assert_eq!(dst, ["job"]);
    let n: i64 = q(&mut con, &c(&["EXISTS", "src"])).await;
    assert_eq!(n, 0);

    // A chain: BRPOPLPUSH a → b, and a BLPOP waiting on b.
    let consumer = spawn_blocking::<Popped>(&server, proto, &["BLPOP", "b", "0"]).await;
    until_blocked(&mut con, 1).await;
    let relay =
        spawn_blocking::<Option<String>>(&server, proto, &["BRPOPLPUSH", "a", "b", "0"]).await;
    until_blocked(&mut con, 2).await;
    let _: i64 = q(&mut con, &c(&["LPUSH", "a", "msg"])).await;
    assert_eq!(joined(relay).await.as_deref(), Some("msg"));
    assert_eq!(joined(consumer).await, Some(("b".into(), "msg".into())));
    let n: i64 = q(&mut con, &c(&["EXISTS", "a", "b"])).await;
    assert_eq!(n, 0);
}

/// BLMPOP is served with its count.
async fn blmpop_served_with_count(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let w = spawn_blocking::<Option<(String, Vec<String>)>>(
        &server,
        proto,
        &["BLMPOP", "0", "2", "x", "y", "RIGHT", "COUNT", "2"],
    )
    .await;
    until_blocked(&mut con, 1).await;
    let _: i64 = q(&mut con, &c(&["RPUSH", "y", "1", "2", "3"])).await;
    assert_eq!(
        joined(w).await,
        Some(("y".to_string(), vec!["3".to_string(), "2".to_string()]))
    );
    let rest: Vec<String> = q(&mut con, &c(&["LRANGE", "y", "0", "-1"])).await;
    assert_eq!(rest, ["1"]);
}

/// Inside MULTI blocking commands do not block: they answer as a timeout would.
async fn blocking_inside_multi_does_not_block(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("BLPOP")
        .arg("missing")
        .arg(0)
        .cmd("BLMOVE")
        .arg("missing")
        .arg("d")
        .arg("LEFT")
        .arg("LEFT")
        .arg(0)
        .cmd("RPUSH")
        .arg("k")
        .arg("v")
        .cmd("BRPOP")
        .arg("k")
        .arg(0);
    let out: Vec<Value> = tokio::time::timeout(HANG_GUARD, pipe.query_async(&mut con))
        .await
        .expect("EXEC blocked")
        .expect("EXEC");
    assert_eq!(out.len(), 4);
    assert_eq!(out[0], Value::Nil);
    assert_eq!(out[1], Value::Nil);
    assert_eq!(out[2], Value::Int(1));
    let popped: (String, String) = redis::from_redis_value(out[3].clone()).expect("pair");
    assert_eq!(popped, ("k".into(), "v".into()));
    assert_eq!(blocked_clients(&mut con).await, 0);
}

/// A client that disconnects while blocked is forgotten: a later push stays in the list,
/// or goes to the next waiter.
async fn disconnect_while_blocked_loses_nothing(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let mut raw = Raw::connect(server.addr()).await;
    raw.send(&frame(&[b"BLPOP", b"k", b"0"])).await;
    until_blocked(&mut con, 1).await;
    drop(raw);
    until_blocked(&mut con, 0).await;
    let _: i64 = q(&mut con, &c(&["RPUSH", "k", "kept"])).await;
    let all: Vec<String> = q(&mut con, &c(&["LRANGE", "k", "0", "-1"])).await;
    assert_eq!(all, ["kept"]);

    // Two waiters; the first leaves; the push goes to the second.
    let mut raw = Raw::connect(server.addr()).await;
    raw.send(&frame(&[b"BLPOP", b"q", b"0"])).await;
    until_blocked(&mut con, 1).await;
    let w = spawn_blocking::<Popped>(&server, proto, &["BLPOP", "q", "0"]).await;
    until_blocked(&mut con, 2).await;
    drop(raw);
    until_blocked(&mut con, 1).await;
    let _: i64 = q(&mut con, &c(&["RPUSH", "q", "next"])).await;
    assert_eq!(joined(w).await, Some(("q".into(), "next".into())));
    let n: i64 = q(&mut con, &c(&["EXISTS", "q"])).await;
    assert_eq!(n, 0);
}

/// A waiter whose key is taken by someone else first stays blocked for the next element.
async fn waiter_stays_blocked_when_beaten(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let w = spawn_blocking::<Popped>(&server, proto, &["BLPOP", "k", "0"]).await;
    until_blocked(&mut con, 1).await;
    // Push and pop in one transaction: the key is signalled but empty when served.
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("RPUSH")
        .arg("k")
        .arg("x")
        .cmd("LPOP")
        .arg("k");
    let out: (i64, String) = tokio::time::timeout(HANG_GUARD, pipe.query_async(&mut con))
        .await
        .expect("EXEC hung")
        .expect("EXEC");
    assert_eq!(out, (1, "x".to_string()));
    assert_eq!(blocked_clients(&mut con).await, 1);
    assert!(!w.is_finished());
    let _: i64 = q(&mut con, &c(&["RPUSH", "k", "y"])).await;
    assert_eq!(joined(w).await, Some(("k".into(), "y".into())));
}

/// Concurrent producers and blocked consumers: every element is delivered exactly once.
async fn concurrent_producers_and_consumers(proto: Proto) {
    const PER: usize = 50;
    let server = real_server();
    let mut consumers = Vec::new();
    for _ in 0..4 {
        let mut con = blocking_conn(&server, proto).await;
        consumers.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..PER {
                let (_, v): (String, String) = q(&mut con, &c(&["BLPOP", "q", "0"])).await;
                got.push(v);
            }
            got
        }));
    }
    let mut producers = Vec::new();
    for p in 0..4 {
        let mut con = connect(&server, proto).await;
        producers.push(tokio::spawn(async move {
            for i in 0..PER {
                let v = format!("{p}:{i:03}");
                let _: i64 = q(&mut con, &c(&["RPUSH", "q", &v])).await;
            }
        }));
    }
    for p in producers {
        joined(p).await;
    }
    let mut all = Vec::new();
    for w in consumers {
        all.extend(joined(w).await);
    }
    all.sort();
    let mut want: Vec<String> = (0..4)
        .flat_map(|p| (0..PER).map(move |i| format!("{p}:{i:03}")))
        .collect();
    want.sort();
    assert_eq!(all, want);
    let mut con = connect(&server, proto).await;
    let len: i64 = q(&mut con, &c(&["LLEN", "q"])).await;
    assert_eq!(len, 0);
    assert_eq!(blocked_clients(&mut con).await, 0);
}

/// A key that became a list and then a string within one EXEC leaves BLPOP blocked (Redis
/// serves a waiter only if the key still holds the awaited type), and a later push serves it.
async fn key_of_another_type_keeps_waiter_blocked(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let waiter = spawn_blocking::<Popped>(&server, proto, &["BLPOP", "k", "0"]).await;
    until_blocked(&mut con, 1).await;
    let mut p = redis::pipe();
    p.atomic()
        .cmd("RPUSH")
        .arg("k")
        .arg("x")
        .cmd("DEL")
        .arg("k")
        .cmd("SET")
        .arg("k")
        .arg("s");
    let _: Value = p.query_async(&mut con).await.expect("exec");
    assert_eq!(
        blocked_clients(&mut con).await,
        1,
        "waiter must stay blocked"
    );
    let _: i64 = q(&mut con, &c(&["DEL", "k"])).await;
    let _: i64 = q(&mut con, &c(&["RPUSH", "k", "y"])).await;
    assert_eq!(joined(waiter).await, Some(("k".into(), "y".into())));
}

/// A list arriving under a watched-for key by RENAME (Redis `dbAdd`) serves the waiter.
async fn rename_onto_the_key_serves_the_waiter(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let waiter = spawn_blocking::<Popped>(&server, proto, &["BLPOP", "dst", "0"]).await;
    until_blocked(&mut con, 1).await;
    let _: i64 = q(&mut con, &c(&["RPUSH", "src", "a", "b"])).await;
    let _: String = q(&mut con, &c(&["RENAME", "src", "dst"])).await;
    assert_eq!(joined(waiter).await, Some(("dst".into(), "a".into())));
    let left: Vec<String> = q(&mut con, &c(&["LRANGE", "dst", "0", "-1"])).await;
    assert_eq!(left, vec!["b".to_string()]);
}

both_protocols!(
    rename_onto_the_key_serves_the_waiter,
    key_of_another_type_keeps_waiter_blocked,
    concurrent_producers_and_consumers,
    fifo_wake_up_order,
    fifo_one_push_at_a_time,
    pushed_element_served_exactly_once,
    timeouts_answer_nil,
    timed_out_waiter_takes_nothing,
    zero_blocks_until_data,
    blocked_client_does_not_stall_others,
    served_from_any_key,
    blmove_to_another_key,
    blmpop_served_with_count,
    blocking_inside_multi_does_not_block,
    disconnect_while_blocked_loses_nothing,
    waiter_stays_blocked_when_beaten,
);
