//! Streams through redis-rs, each under RESP2 and RESP3: the SCENARIOS.md S5 work queue
//! (consumer group, MAXLEN ~, delivery once, XINFO/XPENDING, XAUTOCLAIM, XACK, XDEL),
//! idle times on a manual clock, and blocking XREAD/XREADGROUP (independent timeouts,
//! XADD waking readers at once, `$` meaning "after now", group deletion, MULTI).
//!
//! No wall-clock upper thresholds are asserted: waits are bounded only by `HANG_GUARD`.

#[macro_use]
mod common;

use common::values::{
    any_reply as raw, any_text as text, entry_ids, fields, int_or_text as int, items, read_reply,
};
use common::{
    blocking_conn, c, connect, joined, manual_server, q, real_server, until_blocked, Proto,
};
use redis::Value;
use respite::TestServer;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

async fn spawn_raw(server: &TestServer, proto: Proto, args: &[&str]) -> JoinHandle<Value> {
    let mut con = blocking_conn(server, proto).await;
    let cmd = c(args);
    tokio::spawn(async move { raw(&mut con, &cmd).await })
}

/// S5 end to end on a manual clock.
async fn s5_work_queue(proto: Proto) {
    let server = manual_server();
    let mut con = connect(&server, proto).await;
    let ok: String = q(
        &mut con,
        &c(&["XGROUP", "CREATE", "s", "g", "0-0", "MKSTREAM"]),
    )
    .await;
    assert_eq!(ok, "OK");
    let again = raw(
        &mut con,
        &c(&["XGROUP", "CREATE", "s", "g", "0-0", "MKSTREAM"]),
    )
    .await;
    assert!(text(&again).contains("BUSYGROUP"), "{again:?}");
    let id1: String = q(
        &mut con,
        &c(&["XADD", "s", "MAXLEN", "~", "100", "*", "payload", "one"]),
    )
    .await;
    let id2: String = q(
        &mut con,
        &c(&["XADD", "s", "MAXLEN", "~", "100", "*", "payload", "two"]),
    )
    .await;
    assert!(id1 < id2 || id1.len() < id2.len());

    let read = c(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "COUNT",
        "10",
        "STREAMS",
        "s",
        ">",
    ]);
    let got = raw(&mut con, &read).await;
    assert_eq!(
        read_reply(&got),
        vec![("s".into(), vec![id1.clone(), id2.clone()])]
    );
    assert_eq!(raw(&mut con, &read).await, Value::Nil, "delivered once");

    let groups = items(&raw(&mut con, &c(&["XINFO", "GROUPS", "s"])).await);
    let g = fields(&groups[0]);
    assert_eq!(int(&g["pending"]), 2);
    assert_eq!(int(&g["lag"]), 0);
    assert_eq!(int(&g["entries-read"]), 2);

    let summary = items(&raw(&mut con, &c(&["XPENDING", "s", "g"])).await);
    assert_eq!(int(&summary[0]), 2);
    assert_eq!(text(&summary[1]), id1);
    assert_eq!(text(&summary[2]), id2);
    let owners = items(&summary[3]);
    assert_eq!(
        items(&owners[0]).iter().map(text).collect::<Vec<_>>(),
        ["c", "2"]
    );

    server.advance_ms(5000);
    let ext = items(
        &raw(
            &mut con,
            &c(&["XPENDING", "s", "g", "IDLE", "4000", "-", "+", "10"]),
        )
        .await,
    );
    assert_eq!(ext.len(), 2);
    for e in &ext {
        let e = items(e);
        assert_eq!(text(&e[1]), "c");
        assert_eq!(int(&e[2]), 5000, "idle time");
        assert_eq!(int(&e[3]), 1, "delivery count");
    }
    let none = raw(
        &mut con,
        &c(&["XPENDING", "s", "g", "IDLE", "6000", "-", "+", "10"]),
    )
    .await;
    assert!(items(&none).is_empty());

    let claimed = items(
        &raw(
            &mut con,
            &c(&["XAUTOCLAIM", "s", "g", "other", "1", "0-0", "COUNT", "10"]),
        )
        .await,
    );
    assert_eq!(text(&claimed[0]), "0-0");
    assert_eq!(entry_ids(&claimed[1]), vec![id1.clone(), id2.clone()]);
    assert!(items(&claimed[2]).is_empty());
    let ext = items(
        &raw(
            &mut con,
            &c(&["XPENDING", "s", "g", "-", "+", "10", "other"]),
        )
        .await,
    );
    assert_eq!(ext.len(), 2);
    assert_eq!(int(&items(&ext[0])[2]), 0);
    assert_eq!(int(&items(&ext[0])[3]), 2);

    let acked: i64 = q(&mut con, &c(&["XACK", "s", "g", &id1, &id2])).await;
    assert_eq!(acked, 2);
    let deleted: i64 = q(&mut con, &c(&["XDEL", "s", &id1, &id2])).await;
    assert_eq!(deleted, 2);
    let len: i64 = q(&mut con, &c(&["XLEN", "s"])).await;
    assert_eq!(len, 0);
    let summary = items(&raw(&mut con, &c(&["XPENDING", "s", "g"])).await);
    assert_eq!(int(&summary[0]), 0);
}

/// Consumers' idle and inactive times follow the manual clock.
async fn consumer_times(proto: Proto) {
    let server = manual_server();
    let mut con = connect(&server, proto).await;
    let _: String = q(
        &mut con,
        &c(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]),
    )
    .await;
    let _: i64 = q(
        &mut con,
        &c(&["XGROUP", "CREATECONSUMER", "s", "g", "idle"]),
    )
    .await;
    let _: String = q(&mut con, &c(&["XADD", "s", "1-1", "f", "v"])).await;
    let _ = raw(
        &mut con,
        &c(&["XREADGROUP", "GROUP", "g", "busy", "STREAMS", "s", ">"]),
    )
    .await;
    server.advance_ms(300);
    let list = items(&raw(&mut con, &c(&["XINFO", "CONSUMERS", "s", "g"])).await);
    let busy = fields(&list[0]);
    let idle = fields(&list[1]);
    assert_eq!(text(&busy["name"]), "busy");
    assert_eq!(int(&busy["idle"]), 300);
    assert_eq!(int(&busy["inactive"]), 300);
    assert_eq!(int(&busy["pending"]), 1);
    assert_eq!(int(&idle["idle"]), 300);
    assert_eq!(int(&idle["inactive"]), -1);
}

/// Four readers with different BLOCK timeouts each time out on their own schedule while
/// another connection keeps being served.
async fn independent_timeouts(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let _: String = q(
        &mut con,
        &c(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]),
    )
    .await;
    let mut waiters = Vec::new();
    for (i, ms) in [200u64, 400, 600, 800].into_iter().enumerate() {
        let mut bc = blocking_conn(&server, proto).await;
        let name = format!("c{i}");
        let ms_arg = ms.to_string();
        let cmd = c(&[
            "XREADGROUP",
            "GROUP",
            "g",
            &name,
            "BLOCK",
            &ms_arg,
            "STREAMS",
            "s",
            ">",
        ]);
        let start = Instant::now();
        waiters.push((
            ms,
            tokio::spawn(async move {
                let v = raw(&mut bc, &cmd).await;
                (v, start.elapsed())
            }),
        ));
    }
    until_blocked(&mut con, 4).await;
    let pong: String = q(&mut con, &c(&["PING"])).await;
    assert_eq!(pong, "PONG", "other connections are served meanwhile");
    for (ms, h) in waiters {
        let (v, took) = joined(h).await;
        assert_eq!(v, Value::Nil, "timeout reply");
        assert!(
            took >= Duration::from_millis(ms),
            "{ms} ms reader returned after {took:?}"
        );
    }
    until_blocked(&mut con, 0).await;
}

/// One XADD wakes a blocked XREAD and a blocked XREADGROUP at once; `$` readers get only
/// entries added after they blocked.
async fn xadd_wakes_readers(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let _: String = q(&mut con, &c(&["XADD", "s", "1-0", "old", "x"])).await;
    let _: String = q(&mut con, &c(&["XGROUP", "CREATE", "s", "g", "$"])).await;
    let r1 = spawn_raw(
        &server,
        proto,
        &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"],
    )
    .await;
    until_blocked(&mut con, 1).await;
    let r2 = spawn_raw(
        &server,
        proto,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
    )
    .await;
    until_blocked(&mut con, 2).await;
    let _: String = q(&mut con, &c(&["XADD", "s", "2-0", "new", "y"])).await;
    assert_eq!(
        read_reply(&joined(r1).await),
        vec![("s".into(), vec!["2-0".into()])]
    );
    assert_eq!(
        read_reply(&joined(r2).await),
        vec![("s".into(), vec!["2-0".into()])]
    );
    until_blocked(&mut con, 0).await;
    let pending = items(&raw(&mut con, &c(&["XPENDING", "s", "g"])).await);
    assert_eq!(int(&pending[0]), 1);
}

/// Readers of different groups on one stream are all served by one XADD.
async fn groups_served_independently(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    for g in ["g1", "g2"] {
        let _: String = q(&mut con, &c(&["XGROUP", "CREATE", "s", g, "$", "MKSTREAM"])).await;
    }
    let a = spawn_raw(
        &server,
        proto,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "a",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
    )
    .await;
    until_blocked(&mut con, 1).await;
    let b = spawn_raw(
        &server,
        proto,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "b",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
    )
    .await;
    until_blocked(&mut con, 2).await;
    let d = spawn_raw(
        &server,
        proto,
        &[
            "XREADGROUP",
            "GROUP",
            "g2",
            "d",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
    )
    .await;
    until_blocked(&mut con, 3).await;
    let _: String = q(&mut con, &c(&["XADD", "s", "5-0", "f", "v"])).await;
    assert_eq!(
        read_reply(&joined(a).await),
        vec![("s".into(), vec!["5-0".into()])]
    );
    assert_eq!(
        read_reply(&joined(d).await),
        vec![("s".into(), vec!["5-0".into()])]
    );
    // b's group already delivered 5-0 to a: b keeps waiting for the next entry.
    until_blocked(&mut con, 1).await;
    let _: String = q(&mut con, &c(&["XADD", "s", "6-0", "f", "v"])).await;
    assert_eq!(
        read_reply(&joined(b).await),
        vec![("s".into(), vec!["6-0".into()])]
    );
}

/// A destroyed group fails its blocked readers with the command's NOGROUP error; inside
/// MULTI a blocking read answers at once.
async fn group_destroyed_and_multi(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let _: String = q(
        &mut con,
        &c(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]),
    )
    .await;
    let r = spawn_raw(
        &server,
        proto,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
    )
    .await;
    until_blocked(&mut con, 1).await;
    let n: i64 = q(&mut con, &c(&["XGROUP", "DESTROY", "s", "g"])).await;
    assert_eq!(n, 1);
    let err = text(&joined(r).await);
    assert!(err.contains("NOGROUP"), "{err}");
    let _: String = q(&mut con, &c(&["MULTI"])).await;
    let _: String = q(&mut con, &c(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"])).await;
    let res = raw(&mut con, &c(&["EXEC"])).await;
    assert_eq!(items(&res), vec![Value::Nil]);
}

/// A stream replaced by another type fails its blocked XREADGROUP readers with Redis 7.2's
/// WRONGTYPE (their re-run's error), while a blocked XREAD keeps waiting for a stream.
async fn stream_replaced_while_blocked(proto: Proto) {
    let server = real_server();
    let mut con = connect(&server, proto).await;
    let _: String = q(
        &mut con,
        &c(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]),
    )
    .await;
    let grp = spawn_raw(
        &server,
        proto,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
    )
    .await;
    until_blocked(&mut con, 1).await;
    let plain = spawn_raw(
        &server,
        proto,
        &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"],
    )
    .await;
    until_blocked(&mut con, 2).await;
    let _: i64 = q(&mut con, &c(&["RPUSH", "l", "x"])).await;
    let _: String = q(&mut con, &c(&["RENAME", "l", "s"])).await;
    let err = text(&joined(grp).await);
    assert!(err.contains("WRONGTYPE"), "{err}");
    until_blocked(&mut con, 1).await;
    let _: i64 = q(&mut con, &c(&["DEL", "s"])).await;
    let _: String = q(&mut con, &c(&["XADD", "s", "1-0", "f", "v"])).await;
    assert_eq!(
        read_reply(&joined(plain).await),
        vec![("s".into(), vec!["1-0".into()])]
    );
}

/// Deleting the stream (DEL, or expiry found by a later access) fails blocked XREADGROUP
/// readers at once with their re-run's NOGROUP, as Redis 7.2's signalDeletedKeyAsReady does.
async fn stream_deleted_while_blocked(proto: Proto) {
    let server = common::manual_server();
    let mut con = connect(&server, proto).await;
    for (key, kill) in [("s1", "DEL"), ("s2", "PEXPIRE")] {
        let _: String = q(
            &mut con,
            &c(&["XGROUP", "CREATE", key, "g", "$", "MKSTREAM"]),
        )
        .await;
        let grp = spawn_raw(
            &server,
            proto,
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "c",
                "BLOCK",
                "0",
                "STREAMS",
                key,
                ">",
            ],
        )
        .await;
        until_blocked(&mut con, 1).await;
        if kill == "DEL" {
            let _: i64 = q(&mut con, &c(&["DEL", key])).await;
        } else {
            let _: i64 = q(&mut con, &c(&["PEXPIRE", key, "10"])).await;
            server.advance_ms(11);
            let _: i64 = q(&mut con, &c(&["EXISTS", key])).await;
        }
        let err = text(&joined(grp).await);
        assert!(err.contains("NOGROUP"), "{kill}: {err}");
        assert!(err.contains("No such key"), "{kill}: {err}");
        until_blocked(&mut con, 0).await;
    }
}

both_protocols!(
    stream_deleted_while_blocked,
    stream_replaced_while_blocked,
    s5_work_queue,
    consumer_times,
    independent_timeouts,
    xadd_wakes_readers,
    groups_served_independently,
    group_destroyed_and_multi,
);

/// `XGROUP SETID … ENTRIESREAD` takes any non-negative value; delivering past i64::MAX
/// wraps the counter as Redis's C counter does instead of panicking.
#[test]
fn entries_read_at_i64_max_does_not_overflow() {
    let srv = respite::TestServer::start().unwrap();
    assert!(srv
        .run_text(&["XADD", "s", "1-1", "f", "v"])
        .contains("1-1"));
    assert_eq!(
        srv.run_text(&[
            "XGROUP",
            "CREATE",
            "s",
            "g",
            "0",
            "ENTRIESREAD",
            "9223372036854775807"
        ]),
        "OK"
    );
    let read = srv.run_text(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]);
    assert!(read.contains("1-1"), "{read}");
    let info = srv.run_text(&["XINFO", "GROUPS", "s"]);
    // redis-server 7.0.15 answers exactly this (its counter wraps; lag = 1 - i64::MIN wraps).
    assert!(
        info.contains("entries-read -9223372036854775808 lag -9223372036854775807"),
        "{info}"
    );
}
