//! The durable engine's storage-failure path (issue 6), through the committer's injection
//! seam (`Persistence::fail_next_commits`): while commits fail, writes are refused with
//! Redis's `-MISCONF Errors writing to the AOF file: ...`, reads go on and INFO persistence
//! says `aof_last_write_status:err`; once a commit succeeds again writes are accepted, and
//! nothing acknowledged is lost across a restart. Under `appendfsync always` a write whose
//! commit fails never gets its reply: the connection is closed instead.

mod common;

use common::{durable_server, frame, Raw, HANG_GUARD};
use respite::TestServer;
use std::path::Path;
use std::time::{Duration, Instant};

const MISCONF: &str = "-MISCONF Errors writing to the AOF file: ";

fn server(dir: &Path, fsync: &str) -> TestServer {
    durable_server(dir, fsync)
}

fn fail_next_commits(server: &TestServer, n: u64) {
    server
        .shared()
        .persist
        .get()
        .expect("durable engine")
        .fail_next_commits(n);
}

/// Reads one reply line (simple string, error or integer) from `raw`.
async fn line(raw: &mut Raw) -> String {
    let mut out = Vec::new();
    loop {
        let b = raw.read_n(1).await;
        out.push(b[0]);
        if out.ends_with(b"\r\n") {
            return String::from_utf8_lossy(&out[..out.len() - 2]).into_owned();
        }
    }
}

/// Sends one command and returns its one-line reply.
async fn cmd(raw: &mut Raw, args: &[&[u8]]) -> String {
    raw.send(&frame(args)).await;
    line(raw).await
}

/// Sends GET and returns the value (None for nil).
async fn get(raw: &mut Raw, key: &str) -> Option<String> {
    raw.send(&frame(&[b"GET", key.as_bytes()])).await;
    let head = line(raw).await;
    if head == "$-1" {
        return None;
    }
    let n: usize = head
        .strip_prefix('$')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("GET {key}: {head}"));
    let body = raw.read_n(n + 2).await;
    Some(String::from_utf8_lossy(&body[..n]).into_owned())
}

/// The `INFO persistence` field `name`.
async fn info(raw: &mut Raw, name: &str) -> String {
    info_in(raw, "persistence", name).await
}

async fn info_in(raw: &mut Raw, section: &str, name: &str) -> String {
    raw.send(&frame(&[b"INFO", section.as_bytes()])).await;
    let head = line(raw).await;
    let n: usize = head[1..].parse().expect("INFO bulk length");
    let body = raw.read_n(n + 2).await;
    let text = String::from_utf8_lossy(&body).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_string))
        .unwrap_or_else(|| panic!("INFO {section} has no {name}:\n{text}"))
}

/// Writes `key{i}` until a write is refused; returns the keys acknowledged meanwhile.
async fn write_until_refused(raw: &mut Raw, prefix: &str) -> (Vec<String>, String) {
    let deadline = Instant::now() + HANG_GUARD;
    let mut acked = Vec::new();
    for i in 0.. {
        let key = format!("{prefix}{i}");
        let r = cmd(raw, &[b"SET", key.as_bytes(), key.as_bytes()]).await;
        if r != "+OK" {
            return (acked, r);
        }
        acked.push(key);
        assert!(Instant::now() < deadline, "writes were never refused");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    unreachable!()
}

/// Retries a write until it is accepted again; returns the acknowledged key.
async fn write_until_accepted(raw: &mut Raw, key: &str) -> Duration {
    let start = Instant::now();
    loop {
        let r = cmd(raw, &[b"SET", key.as_bytes(), key.as_bytes()]).await;
        if r == "+OK" {
            return start.elapsed();
        }
        assert!(r.starts_with(MISCONF), "refused with {r}");
        assert!(start.elapsed() < HANG_GUARD, "writes never accepted again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everysec_refuses_writes_while_commits_fail_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut acked: Vec<String> = Vec::new();
    {
        let srv = server(dir.path(), "everysec");
        let mut raw = Raw::connect(srv.addr()).await;
        assert_eq!(cmd(&mut raw, &[b"SET", b"before", b"before"]).await, "+OK");
        acked.push("before".into());
        // Let it be committed before the failures start.
        assert_eq!(cmd(&mut raw, &[b"SAVE"]).await, "+OK");
        assert_eq!(info(&mut raw, "aof_last_write_status").await, "ok");

        fail_next_commits(&srv, 6);
        // The writes accepted before the failure shows stay queued for the retries.
        let (before_failure, refusal) = write_until_refused(&mut raw, "queued:").await;
        assert!(
            !before_failure.is_empty(),
            "the first write after the failure is accepted (it has not failed yet)"
        );
        acked.extend(before_failure);
        assert!(
            refusal.starts_with(MISCONF),
            "write refused with {refusal:?}, want the {MISCONF:?} prefix"
        );
        assert!(refusal.contains("injected"), "names the cause: {refusal}");

        // Reads and non-write commands work meanwhile; the refusal is per write.
        assert_eq!(get(&mut raw, "before").await.as_deref(), Some("before"));
        assert_eq!(get(&mut raw, "queued:0").await.as_deref(), Some("queued:0"));
        assert_eq!(cmd(&mut raw, &[b"PING"]).await, "+PONG");
        assert_eq!(cmd(&mut raw, &[b"EXISTS", b"before"]).await, ":1");
        let r = cmd(&mut raw, &[b"INCR", b"counter"]).await;
        assert!(r.starts_with(MISCONF), "INCR while failing: {r}");
        let r = cmd(&mut raw, &[b"DEL", b"before"]).await;
        assert!(r.starts_with(MISCONF), "DEL while failing: {r}");
        assert_eq!(info(&mut raw, "aof_last_write_status").await, "err");
        assert!(info(&mut raw, "respite_last_error")
            .await
            .contains("injected"));
        // Another connection is refused too.
        let mut other = Raw::connect(srv.addr()).await;
        let r = cmd(&mut other, &[b"HSET", b"h", b"f", b"v"]).await;
        assert!(r.starts_with(MISCONF), "HSET on another connection: {r}");
        assert_eq!(get(&mut other, "before").await.as_deref(), Some("before"));

        // The committer retries; once the injected failures are used up, writes resume.
        write_until_accepted(&mut raw, "after").await;
        acked.push("after".into());
        assert_eq!(info(&mut raw, "aof_last_write_status").await, "ok");
        assert_eq!(info(&mut raw, "respite_last_error").await, "");
        let failed: u64 = info(&mut raw, "respite_failed_commits")
            .await
            .parse()
            .expect("failed commits");
        assert_eq!(failed, 6, "every injected failure was a failed commit");
        assert_eq!(cmd(&mut other, &[b"HSET", b"h", b"f", b"v"]).await, ":1");
        assert_eq!(cmd(&mut raw, &[b"INCR", b"counter"]).await, ":1");
        // A read of a key written while failing is the queued value.
        for k in &acked {
            assert_eq!(get(&mut raw, k).await.as_deref(), Some(k.as_str()));
        }
    }
    // Restart: nothing acknowledged was lost, refused writes left no trace.
    let srv = server(dir.path(), "everysec");
    let mut raw = Raw::connect(srv.addr()).await;
    for k in &acked {
        assert_eq!(
            get(&mut raw, k).await.as_deref(),
            Some(k.as_str()),
            "{k} lost"
        );
    }
    assert_eq!(get(&mut raw, "counter").await.as_deref(), Some("1"));
    assert_eq!(cmd(&mut raw, &[b"HLEN", b"h"]).await, ":1");
    assert_eq!(
        cmd(&mut raw, &[b"DBSIZE"]).await,
        format!(":{}", acked.len() + 2)
    );
    assert_eq!(info(&mut raw, "aof_last_write_status").await, "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_closes_the_connection_instead_of_replying_to_an_unsaved_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let srv = server(dir.path(), "always");
        let mut raw = Raw::connect(srv.addr()).await;
        assert_eq!(cmd(&mut raw, &[b"SET", b"saved", b"1"]).await, "+OK");

        fail_next_commits(&srv, 10);
        // The write's commit fails: no reply, the connection is closed.
        raw.send(&frame(&[b"SET", b"unsaved", b"1"])).await;
        let got = raw.read_to_close().await;
        assert!(
            got.is_empty(),
            "an unsaved write was answered: {:?}",
            String::from_utf8_lossy(&got)
        );

        // Meanwhile writes are refused and reads work.
        let mut raw = Raw::connect(srv.addr()).await;
        let r = cmd(&mut raw, &[b"SET", b"refused", b"1"]).await;
        assert!(r.starts_with(MISCONF), "write while failing: {r}");
        assert_eq!(get(&mut raw, "saved").await.as_deref(), Some("1"));
        assert_eq!(info(&mut raw, "aof_last_write_status").await, "err");
        assert_eq!(info(&mut raw, "respite_appendfsync").await, "always");

        // A pipeline whose read comes before a refused write gets both replies.
        raw.send(
            &[
                frame(&[b"GET", b"saved"]),
                frame(&[b"SET", b"refused", b"2"]),
            ]
            .concat(),
        )
        .await;
        assert_eq!(line(&mut raw).await, "$1");
        assert_eq!(line(&mut raw).await, "1");
        assert!(line(&mut raw).await.starts_with(MISCONF));

        // Recovery: the retried commit holds the unanswered write; new writes are durable
        // before they are answered again.
        write_until_accepted(&mut raw, "later").await;
        assert_eq!(info(&mut raw, "aof_last_write_status").await, "ok");
        assert_eq!(get(&mut raw, "unsaved").await.as_deref(), Some("1"));
    }
    let srv = server(dir.path(), "always");
    let mut raw = Raw::connect(srv.addr()).await;
    assert_eq!(get(&mut raw, "saved").await.as_deref(), Some("1"));
    assert_eq!(get(&mut raw, "later").await.as_deref(), Some("later"));
    // Not acknowledged, but it was queued, and a failed commit's changes are retried.
    assert_eq!(get(&mut raw, "unsaved").await.as_deref(), Some("1"));
    assert_eq!(get(&mut raw, "refused").await, None);
}

/// A client served by another client's push (BLPOP woken by RPUSH) under `always` is answered
/// only once the pop is durable: if that commit fails, it gets no reply either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_holds_a_served_blocked_reply_until_the_pop_is_durable() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let srv = server(dir.path(), "always");
        let mut admin = Raw::connect(srv.addr()).await;
        let mut waiter = Raw::connect(srv.addr()).await;
        waiter.send(&frame(&[b"BLPOP", b"q", b"0"])).await;
        let deadline = Instant::now() + HANG_GUARD;
        while info_in(&mut admin, "clients", "blocked_clients").await != "1" {
            assert!(Instant::now() < deadline, "BLPOP never blocked");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }

        fail_next_commits(&srv, 10);
        let mut pusher = Raw::connect(srv.addr()).await;
        pusher.send(&frame(&[b"RPUSH", b"q", b"job"])).await;
        let got = waiter.read_to_close().await;
        assert!(
            got.is_empty(),
            "a pop whose commit failed was answered: {:?}",
            String::from_utf8_lossy(&got)
        );
        assert!(pusher.read_to_close().await.is_empty());
        write_until_accepted(&mut admin, "later").await;
    }
    // The retried commit holds both the push and the pop.
    let srv = server(dir.path(), "always");
    let mut raw = Raw::connect(srv.addr()).await;
    assert_eq!(cmd(&mut raw, &[b"LLEN", b"q"]).await, ":0");
}

/// Backpressure: while the checkpointer is behind by the unapplied-changes limit, writers
/// hold their replies and read nothing more (the keyspace stops growing); once it catches
/// up every write completes and nothing is lost.
#[tokio::test]
async fn writers_wait_while_the_checkpoint_backlog_is_full() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), "everysec");
    let p = srv.shared().persist.get().expect("durable").clone();
    p.set_unapplied_limit(500);
    // Hold the checkpointer: jobs run on its thread.
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (started_tx, started) = std::sync::mpsc::channel::<()>();
    let job = {
        let p = p.clone();
        std::thread::spawn(move || {
            p.with_store(move |_| {
                started_tx.send(()).unwrap();
                held.recv().ok();
            })
        })
    };
    started.recv_timeout(HANG_GUARD).expect("checkpointer held");

    let client = redis::Client::open(srv.url()).unwrap();
    // No response timeout: the replies are held for as long as the checkpointer is.
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    let mut con = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap();
    let writer = tokio::spawn(async move {
        let mut pipe = redis::pipe();
        for i in 0..5000 {
            pipe.cmd("SET").arg(format!("k{i}")).arg(i).ignore();
        }
        pipe.query_async::<()>(&mut con).await
    });
    let start = Instant::now();
    while p.stats.throttled.load(std::sync::atomic::Ordering::Relaxed) == 0 {
        assert!(
            start.elapsed() < HANG_GUARD,
            "the writer was never held back"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Held: no more writes are read while the backlog is full.
    let held_at = srv.shared().ks.dbsize(0);
    assert!(held_at < 5000, "held after {held_at} writes");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(srv.shared().ks.dbsize(0), held_at);
    assert!(!writer.is_finished());

    release.send(()).unwrap();
    job.join().unwrap();
    tokio::time::timeout(HANG_GUARD, writer)
        .await
        .expect("the writer resumed")
        .unwrap()
        .unwrap();
    assert_eq!(srv.shared().ks.dbsize(0), 5000);
    drop(srv);
    let srv = server(dir.path(), "everysec");
    assert_eq!(
        srv.shared().ks.dbsize(0),
        5000,
        "nothing lost across a restart"
    );
    assert_eq!(srv.get("k4999").as_deref(), Some("4999"));
}
