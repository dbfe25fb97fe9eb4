//! SCENARIOS.md S2, S5 and S6 on the durable engine (issue 6), each interleaved with
//! restarts on the same directory: the state a scenario builds must be exactly what a new
//! server on that directory serves. RESP2 runs use `appendfsync always`, RESP3 runs
//! `appendfsync everysec` (a clean shutdown makes the final commit in both modes).
//! S1, S3, S4 and S7 on redb are in tests/durable_scenarios.rs.

#[macro_use]
mod common;
use common::s6::{self, checkpoint, mark, prepare, promote, Group, Pairs};

use common::values::{
    any_reply as raw, any_text as text, entry_ids, fields, int_or_text as int, items, read_reply,
};
use common::{
    admitted_by_user_limit, blocking_conn, c, connect, connections, durable_server, join_all,
    lua_script, q, until_blocked, Proto, HANG_GUARD,
};
use redis::aio::MultiplexedConnection;
use redis::Value;
use respite::TestServer;
use std::path::Path;
use std::time::Duration;

/// The fsync mode a protocol's run uses, so both modes are covered.
fn fsync_for(proto: Proto) -> &'static str {
    match proto {
        Proto::Resp2 => "always",
        Proto::Resp3 => "everysec",
    }
}

/// Stops `srv` (its final commit closes the file) and starts a new server on `dir`. The
/// old one must be gone first: two servers cannot hold one database file.
fn restart(srv: TestServer, dir: &Path, fsync: &str) -> TestServer {
    drop(srv);
    durable_server(dir, fsync)
}

// ---------------------------------------------------------------------------------------
// S2: rate limiting.

/// One fixed-window check: (admitted, second element, third element).
async fn window(con: &mut MultiplexedConnection, user: &str, apikey: &str) -> (bool, Value, Value) {
    let r: Vec<Value> = lua_script("ratelimit_fixed_window.lua")
        .key(format!("{{rl:{user}}}:user:w1"))
        .key(format!("{{rl:{user}}}:key:{apikey}:w1"))
        .arg(32)
        .arg(1000)
        .arg(60_000)
        .invoke_async(con)
        .await
        .expect("fixed window");
    (int(&r[0]) == 1, r[1].clone(), r[2].clone())
}

/// One token-bucket request (capacity 10, 1 token per minute): (admitted, left, retry).
async fn bucket(con: &mut MultiplexedConnection, key: &str, cost: i64) -> (bool, i64, i64) {
    let r: (i64, i64, i64) = lua_script("ratelimit_token_bucket.lua")
        .key(key)
        .arg(10)
        .arg(1)
        .arg(60_000)
        .arg(cost)
        .invoke_async(con)
        .await
        .expect("token bucket");
    (r.0 == 1, r.1, r.2)
}

async fn pttl(con: &mut MultiplexedConnection, key: &str) -> i64 {
    q(con, &c(&["PTTL", key])).await
}

/// S2: 128 concurrent fixed-window checks admit exactly 32; the counters, their window
/// TTLs and a token bucket's state survive two restarts, and the limits still hold after.
async fn rate_limits_survive_restarts(proto: Proto) {
    let fsync = fsync_for(proto);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut srv = durable_server(dir.path(), fsync);
    let cons = connections(&srv, proto, 16).await;
    let mut tasks = Vec::new();
    for i in 0..128 {
        let mut con = cons[i % cons.len()].clone();
        let key = if i % 2 == 0 { "a" } else { "b" };
        tasks.push(tokio::spawn(
            async move { window(&mut con, "u1", key).await },
        ));
    }
    assert_eq!(admitted_by_user_limit(&join_all(tasks).await), 32);
    drop(cons);
    let mut con = connect(&srv, proto).await;
    let (a, b): (i64, i64) = (
        q(&mut con, &c(&["GET", "{rl:u1}:key:a:w1"])).await,
        q(&mut con, &c(&["GET", "{rl:u1}:key:b:w1"])).await,
    );
    assert_eq!(a + b, 32, "two API keys share the user's limit");
    let user_ttl = pttl(&mut con, "{rl:u1}:user:w1").await;
    assert!(user_ttl > 0 && user_ttl <= 60_000, "{user_ttl}");

    // Token bucket: 10 - 3 - 3 - 3 leaves 1; a fourth request of 3 is denied.
    for left in [7, 4, 1] {
        assert_eq!(bucket(&mut con, "tb:1", 3).await, (true, left, 0));
    }
    let (ok, left, retry) = bucket(&mut con, "tb:1", 3).await;
    assert!(!ok && left == 1 && retry > 0, "{ok} {left} {retry}");
    let state: Vec<String> = q(&mut con, &c(&["HMGET", "tb:1", "tokens", "ts"])).await;
    let bucket_ttl = pttl(&mut con, "tb:1").await;
    assert!(bucket_ttl > 0, "{bucket_ttl}");

    for round in 0..2 {
        drop(con);
        srv = restart(srv, dir.path(), fsync);
        con = connect(&srv, proto).await;
        let used: i64 = q(&mut con, &c(&["GET", "{rl:u1}:user:w1"])).await;
        assert_eq!(used, 32, "user counter after restart {round}");
        let (a2, b2): (i64, i64) = (
            q(&mut con, &c(&["GET", "{rl:u1}:key:a:w1"])).await,
            q(&mut con, &c(&["GET", "{rl:u1}:key:b:w1"])).await,
        );
        assert_eq!((a2, b2), (a, b), "API-key counters after restart {round}");
        for key in ["{rl:u1}:user:w1", "{rl:u1}:key:a:w1", "{rl:u1}:key:b:w1"] {
            let ttl = pttl(&mut con, key).await;
            assert!(
                ttl > 0 && ttl <= user_ttl,
                "{key} window TTL kept across restart {round}: {ttl} (was {user_ttl})"
            );
        }
        // Still limited, and a rejection charges nothing.
        let (ok, scope, retry) = window(&mut con, "u1", "c").await;
        assert!(!ok);
        assert_eq!(text(&scope), "user");
        assert!(int(&retry) > 0);
        let c_count: Option<i64> = q(&mut con, &c(&["GET", "{rl:u1}:key:c:w1"])).await;
        assert_eq!(c_count, None);

        let got: Vec<String> = q(&mut con, &c(&["HMGET", "tb:1", "tokens", "ts"])).await;
        assert_eq!(got, state, "bucket state after restart {round}");
        let ttl = pttl(&mut con, "tb:1").await;
        assert!(
            ttl > 0 && ttl <= bucket_ttl,
            "bucket TTL {ttl} (was {bucket_ttl})"
        );
    }
    // The surviving bucket still has exactly one token.
    let (ok, left, retry) = bucket(&mut con, "tb:1", 3).await;
    assert!(!ok && left == 1 && retry > 0, "{ok} {left} {retry}");
    assert_eq!(bucket(&mut con, "tb:1", 1).await, (true, 0, 0));
    let (ok, left, _) = bucket(&mut con, "tb:1", 1).await;
    assert!(!ok && left == 0);
    drop(con);
    srv = restart(srv, dir.path(), fsync);
    let mut con = connect(&srv, proto).await;
    let tokens: String = q(&mut con, &c(&["HGET", "tb:1", "tokens"])).await;
    assert_eq!(tokens, "0");
}

// ---------------------------------------------------------------------------------------
// S5: work queues on streams with consumer groups.

/// A stream ID as (ms, seq), for ordering.
fn id_of(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').expect("stream id");
    (ms.parse().expect("id ms"), seq.parse().expect("id seq"))
}

fn read_cmd(consumer: &str) -> redis::Cmd {
    c(&[
        "XREADGROUP",
        "GROUP",
        "g",
        consumer,
        "COUNT",
        "10",
        "STREAMS",
        "s",
        ">",
    ])
}

/// `XINFO GROUPS s` for the one group: (pending, lag, entries-read, last-delivered-id).
async fn group_info(con: &mut MultiplexedConnection) -> (i64, i64, i64, String) {
    let groups = items(&raw(con, &c(&["XINFO", "GROUPS", "s"])).await);
    assert_eq!(groups.len(), 1, "{groups:?}");
    let g = fields(&groups[0]);
    assert_eq!(text(&g["name"]), "g");
    (
        int(&g["pending"]),
        int(&g["lag"]),
        int(&g["entries-read"]),
        text(&g["last-delivered-id"]),
    )
}

/// `XPENDING s g` summary: (count, smallest id, greatest id, [(consumer, count)]).
async fn pending_summary(
    con: &mut MultiplexedConnection,
) -> (i64, Option<String>, Option<String>, Vec<(String, String)>) {
    let s = items(&raw(con, &c(&["XPENDING", "s", "g"])).await);
    let id = |v: &Value| (*v != Value::Nil).then(|| text(v));
    let owners = match &s[3] {
        Value::Nil => Vec::new(),
        v => items(v)
            .iter()
            .map(|o| {
                let o = items(o);
                (text(&o[0]), text(&o[1]))
            })
            .collect(),
    };
    (int(&s[0]), id(&s[1]), id(&s[2]), owners)
}

/// Extended `XPENDING s g - + 10 [consumer]`: (id, consumer, idle, deliveries) rows.
async fn pending_rows(
    con: &mut MultiplexedConnection,
    consumer: Option<&str>,
) -> Vec<(String, String, i64, i64)> {
    let mut cmd = c(&["XPENDING", "s", "g", "-", "+", "10"]);
    if let Some(name) = consumer {
        cmd.arg(name);
    }
    items(&raw(con, &cmd).await)
        .iter()
        .map(|r| {
            let r = items(r);
            (text(&r[0]), text(&r[1]), int(&r[2]), int(&r[3]))
        })
        .collect()
}

/// S5 with restarts between its steps: the group, its last-delivered ID, the PEL (owners
/// and delivery counts), acknowledgements and deletions all survive; a blocked
/// XREADGROUP is woken by XADD and the delivery it got survives too.
async fn work_queue_survives_restarts(proto: Proto) {
    let fsync = fsync_for(proto);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut srv = durable_server(dir.path(), fsync);
    let mut con = connect(&srv, proto).await;
    let create = c(&["XGROUP", "CREATE", "s", "g", "0-0", "MKSTREAM"]);
    let ok: String = q(&mut con, &create).await;
    assert_eq!(ok, "OK");
    let mut ids = Vec::new();
    for payload in ["one", "two"] {
        let id: String = q(
            &mut con,
            &c(&["XADD", "s", "MAXLEN", "~", "100", "*", "payload", payload]),
        )
        .await;
        ids.push(id);
    }
    assert!(id_of(&ids[0]) < id_of(&ids[1]));
    let got = raw(&mut con, &read_cmd("c")).await;
    assert_eq!(read_reply(&got), vec![("s".into(), ids.clone())]);
    assert_eq!(raw(&mut con, &read_cmd("c")).await, Value::Nil);
    assert_eq!(group_info(&mut con).await, (2, 0, 2, ids[1].clone()));

    // Restart: the group, its delivery position and the PEL are all there.
    drop(con);
    srv = restart(srv, dir.path(), fsync);
    let mut con = connect(&srv, proto).await;
    let again = raw(&mut con, &create).await;
    assert!(text(&again).contains("BUSYGROUP"), "{again:?}");
    assert_eq!(
        group_info(&mut con).await,
        (2, 0, 2, ids[1].clone()),
        "XINFO GROUPS after restart"
    );
    assert_eq!(
        pending_summary(&mut con).await,
        (
            2,
            Some(ids[0].clone()),
            Some(ids[1].clone()),
            vec![("c".into(), "2".into())]
        )
    );
    assert_eq!(
        raw(&mut con, &read_cmd("c")).await,
        Value::Nil,
        "delivered once, also across a restart"
    );
    let rows = pending_rows(&mut con, None).await;
    assert_eq!(rows.len(), 2);
    for (row, id) in rows.iter().zip(&ids) {
        assert_eq!((&row.0, row.1.as_str(), row.3), (id, "c", 1));
        assert!(row.2 >= 0, "idle time {}", row.2);
    }
    let len: i64 = q(&mut con, &c(&["XLEN", "s"])).await;
    assert_eq!(len, 2);

    // XAUTOCLAIM to another consumer, then restart: the new owner and counts survive.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let claimed = items(
        &raw(
            &mut con,
            &c(&["XAUTOCLAIM", "s", "g", "other", "1", "0-0", "COUNT", "10"]),
        )
        .await,
    );
    assert_eq!(text(&claimed[0]), "0-0");
    assert_eq!(entry_ids(&claimed[1]), ids);
    assert!(items(&claimed[2]).is_empty());
    drop(con);
    srv = restart(srv, dir.path(), fsync);
    let mut con = connect(&srv, proto).await;
    let rows = pending_rows(&mut con, Some("other")).await;
    assert_eq!(
        rows.iter()
            .map(|r| (r.0.clone(), r.1.clone(), r.3))
            .collect::<Vec<_>>(),
        vec![
            (ids[0].clone(), "other".to_string(), 2),
            (ids[1].clone(), "other".to_string(), 2)
        ],
        "claimed entries after restart"
    );
    assert!(pending_rows(&mut con, Some("c")).await.is_empty());
    assert_eq!(
        pending_summary(&mut con).await.3,
        vec![("other".into(), "2".into())]
    );

    // XACK + XDEL, restart: nothing left, the group and the empty stream remain.
    let acked: i64 = q(&mut con, &c(&["XACK", "s", "g", &ids[0], &ids[1]])).await;
    assert_eq!(acked, 2);
    let deleted: i64 = q(&mut con, &c(&["XDEL", "s", &ids[0], &ids[1]])).await;
    assert_eq!(deleted, 2);
    drop(con);
    srv = restart(srv, dir.path(), fsync);
    let mut con = connect(&srv, proto).await;
    let len: i64 = q(&mut con, &c(&["XLEN", "s"])).await;
    assert_eq!(len, 0, "XLEN after restart");
    assert_eq!(pending_summary(&mut con).await, (0, None, None, vec![]));
    let (pending, _, _, last) = group_info(&mut con).await;
    assert_eq!((pending, last), (0, ids[1].clone()));
    let exists: i64 = q(&mut con, &c(&["EXISTS", "s"])).await;
    assert_eq!(exists, 1, "an emptied stream is still a key");

    // A blocked XREADGROUP woken by XADD; IDs keep growing past the deleted ones.
    let mut reader = blocking_conn(&srv, proto).await;
    let block = c(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ]);
    let waiter = tokio::spawn(async move { raw(&mut reader, &block).await });
    until_blocked(&mut con, 1).await;
    let id3: String = q(
        &mut con,
        &c(&["XADD", "s", "MAXLEN", "~", "100", "*", "payload", "three"]),
    )
    .await;
    assert!(id_of(&id3) > id_of(&ids[1]), "{id3} after {}", ids[1]);
    let woke = tokio::time::timeout(HANG_GUARD, waiter)
        .await
        .expect("blocked reader never woke")
        .expect("task");
    assert_eq!(read_reply(&woke), vec![("s".into(), vec![id3.clone()])]);
    until_blocked(&mut con, 0).await;
    drop(con);
    srv = restart(srv, dir.path(), fsync);
    let mut con = connect(&srv, proto).await;
    let len: i64 = q(&mut con, &c(&["XLEN", "s"])).await;
    assert_eq!(len, 1);
    assert_eq!(
        pending_summary(&mut con).await,
        (
            1,
            Some(id3.clone()),
            Some(id3.clone()),
            vec![("c".into(), "1".into())]
        )
    );
    assert_eq!(group_info(&mut con).await, (1, 0, 3, id3.clone()));
    assert_eq!(raw(&mut con, &read_cmd("c")).await, Value::Nil);
}

// ---------------------------------------------------------------------------------------
// S6: two-phase commit over a hash-tagged key group.

/// The load path: the whole group in one MULTI/EXEC (checkpoint, revision, prepared).
async fn load(con: &mut MultiplexedConnection, v: &str) -> Group {
    let group = tokio::time::timeout(HANG_GUARD, s6::load_pipe(v).query_async(con))
        .await
        .expect("load hung")
        .expect("load");
    s6::sorted(group)
}

/// The prepared record `prepare(.., output, base, rev)` writes, sorted.
fn prepared_record(output: &str, base: &str, rev: u8, phase: &str) -> Pairs {
    let mut out: Pairs = vec![
        (b"_output".to_vec(), output.as_bytes().to_vec()),
        (b"_base".to_vec(), base.as_bytes().to_vec()),
        (b"_revision".to_vec(), rev.to_string().into_bytes()),
        (b"_phase".to_vec(), phase.as_bytes().to_vec()),
    ];
    for (f, v) in checkpoint(rev) {
        let mut name = b"c:".to_vec();
        name.extend_from_slice(&f);
        out.push((name, v));
    }
    out.sort();
    out
}

fn sorted(mut pairs: Pairs) -> Pairs {
    pairs.sort();
    pairs
}

/// S6 with a restart after every step: prepare → restart → mark → restart → promote →
/// restart → load, binary fields verbatim, the checkpoint TTL and the staged index kept;
/// then a second round on the surviving committed revision.
async fn two_phase_commit_survives_restarts(proto: Proto) {
    let fsync = fsync_for(proto);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut srv = durable_server(dir.path(), fsync);
    let mut con = connect(&srv, proto).await;
    assert_eq!(
        prepare(&mut con, "7", "out1", "", 1).await,
        ["prepared", "1"]
    );
    let _: i64 = q(&mut con, &c(&["SADD", "staged:p0", "7", "9"])).await;

    drop(con);
    srv = restart(srv, dir.path(), fsync);
    let mut con = connect(&srv, proto).await;
    assert_eq!(
        load(&mut con, "7").await,
        (vec![], None, prepared_record("out1", "", 1, "prepared")),
        "prepared record after restart"
    );
    assert_eq!(
        prepare(&mut con, "7", "out1", "", 1).await,
        ["already", "1"]
    );
    assert_eq!(
        prepare(&mut con, "7", "out2", "", 1).await,
        ["busy", "out1"]
    );
    assert_eq!(promote(&mut con, "7", "out1").await, ["not-published"]);
    assert_eq!(mark(&mut con, "7", "out1").await, ["published"]);
    let _: i64 = q(&mut con, &c(&["SREM", "staged:p0", "9"])).await;

    drop(con);
    srv = restart(srv, dir.path(), fsync);
    let mut con = connect(&srv, proto).await;
    assert_eq!(
        load(&mut con, "7").await,
        (vec![], None, prepared_record("out1", "", 1, "published")),
        "published phase after restart"
    );
    let staged: Vec<String> = q(&mut con, &c(&["SMEMBERS", "staged:p0"])).await;
    assert_eq!(staged, ["7"], "staged index after restart");
    assert_eq!(promote(&mut con, "7", "out1").await, ["promoted", "1"]);
    let _: i64 = q(&mut con, &c(&["SREM", "staged:p0", "7"])).await;

    drop(con);
    srv = restart(srv, dir.path(), fsync);
    let mut con = connect(&srv, proto).await;
    let (cp, rev, prep) = load(&mut con, "7").await;
    assert_eq!(
        cp,
        sorted(checkpoint(1)),
        "binary fields come back verbatim"
    );
    assert_eq!(rev.as_deref(), Some("1"));
    assert!(prep.is_empty(), "prepared record deleted: {prep:?}");
    let ttl = pttl(&mut con, "{vehicle:7}:checkpoint").await;
    assert!(ttl > 3_500_000 && ttl <= 3_600_000, "checkpoint TTL {ttl}");
    let staged: i64 = q(&mut con, &c(&["EXISTS", "staged:p0"])).await;
    assert_eq!(staged, 0, "an emptied index set is gone");

    // Round two must name the surviving committed revision.
    assert_eq!(
        prepare(&mut con, "7", "out3", "", 2).await,
        ["conflict", "1"]
    );
    assert_eq!(
        prepare(&mut con, "7", "out3", "1", 2).await,
        ["prepared", "2"]
    );
    assert_eq!(mark(&mut con, "7", "out3").await, ["published"]);
    drop(con);
    srv = restart(srv, dir.path(), fsync);
    let mut con = connect(&srv, proto).await;
    assert_eq!(promote(&mut con, "7", "out3").await, ["promoted", "2"]);
    drop(con);
    srv = restart(srv, dir.path(), fsync);
    let mut con = connect(&srv, proto).await;
    let (cp, rev, prep) = load(&mut con, "7").await;
    assert_eq!(cp, sorted(checkpoint(2)));
    assert_eq!(rev.as_deref(), Some("2"));
    assert!(prep.is_empty());
    assert_eq!(promote(&mut con, "7", "out3").await, ["missing"]);
    drop(con);
    drop(srv);
}

both_protocols!(
    rate_limits_survive_restarts,
    work_queue_survives_restarts,
    two_phase_commit_survives_restarts,
);
