//! What the suites share beyond servers and clients: the key-event recorder, the WATCH
//! probe, the seeded RNG, waits on conditions, INFO parsing, unique key names, the Lua
//! scenario scripts and S6 checkpoints.

use super::clients::{c, q};
use super::resp::{Conn, Frame};
use super::{HANG_GUARD, PATIENCE};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Polls `cond` until it holds; panics with `what` after [`PATIENCE`].
/// A hang guard, never a bound on how fast anything must be.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    wait_until_every(what, Duration::from_millis(10), &mut cond)
}

/// [`wait_until`] polling every `every`.
pub fn wait_until_every(what: &str, every: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(every);
    }
}

/// `field:value` from an INFO text (any section), parsed as an integer.
pub fn info_field(info: &str, field: &str) -> Option<i64> {
    info.lines().find_map(|l| {
        let (k, v) = l.trim_end_matches('\r').split_once(':')?;
        if k == field {
            v.parse().ok()
        } else {
            None
        }
    })
}

/// `field:value` from an INFO text (any section), as text.
pub fn info_text<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|l| {
        let (k, v) = l.trim_end_matches('\r').split_once(':')?;
        (k == field).then_some(v)
    })
}

/// The INFO `section` field `field` of the server behind `c`, as text, if present.
pub fn conn_info_opt(c: &mut Conn, section: &str, field: &str) -> Option<String> {
    let info = match c.cmd(&format!("INFO {section}")) {
        Frame::Bulk(b) | Frame::Verbatim(_, b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("INFO {section}: {other}"),
    };
    info_text(&info, field).map(|v| v.trim().to_string())
}

/// The INFO `section` field `field` of the server behind `c`, as text.
pub fn conn_info(c: &mut Conn, section: &str, field: &str) -> String {
    conn_info_opt(c, section, field).unwrap_or_else(|| panic!("no {field} in INFO {section}"))
}

/// The INFO `section` field `field` of the server behind `c`, as an integer.
pub fn conn_info_int(c: &mut Conn, section: &str, field: &str) -> i64 {
    let v = conn_info(c, section, field);
    v.parse()
        .unwrap_or_else(|_| panic!("INFO {section} {field}:{v} is not an integer"))
}

/// Waits until the server behind `c` reports `n` blocked clients (sync clients).
pub fn until_blocked_sync(c: &mut Conn, n: i64) {
    wait_until_every(
        &format!("{n} blocked clients"),
        Duration::from_millis(2),
        || conn_info_int(c, "clients", "blocked_clients") == n,
    )
}

/// A key name no earlier run has used (tests may run against a long-lived oracle).
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}:{}:{nanos}:{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The body of `lua/<name>` (the scenario scripts shipped with respite).
pub fn lua_source(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("lua")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `lua/<name>` as a redis-rs `Script` (EVALSHA, then SCRIPT LOAD and EVALSHA on NOSCRIPT).
pub fn lua_script(name: &str) -> redis::Script {
    redis::Script::new(&lua_source(name))
}

/// The server's INFO `blocked_clients`.
pub async fn blocked_clients(con: &mut redis::aio::MultiplexedConnection) -> i64 {
    let info: String = q(con, &c(&["INFO", "clients"])).await;
    info_field(&info, "blocked_clients").expect("blocked_clients in INFO")
}

/// Waits until the server behind `con` reports `n` blocked clients.
pub async fn until_blocked(con: &mut redis::aio::MultiplexedConnection, n: i64) {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while blocked_clients(con).await != n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never reached {n} blocked clients"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Every task's result, in order (a task that panicked fails the test).
pub async fn join_all<T>(tasks: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await.expect("task"));
    }
    out
}

/// S7: the values the increments of all `tasks` saw are exactly `1..=n`, each once.
pub async fn assert_saw_one_to(tasks: Vec<tokio::task::JoinHandle<Vec<i64>>>, n: i64) {
    let mut seen = join_all(tasks).await.concat();
    seen.sort_unstable();
    assert_eq!(seen, (1..=n).collect::<Vec<i64>>());
}

/// S2: how many fixed-window checks (`(admitted, scope, _)` replies) were admitted; every
/// refusal must name the user limit.
pub fn admitted_by_user_limit(checks: &[(bool, redis::Value, redis::Value)]) -> usize {
    let mut admitted = 0;
    for (ok, scope, _) in checks {
        if *ok {
            admitted += 1;
        } else {
            assert_eq!(super::values::text(scope), "user");
        }
    }
    admitted
}

/// The result of a background task (say, a client blocked in a command), within
/// [`HANG_GUARD`].
pub async fn joined<T>(h: tokio::task::JoinHandle<T>) -> T {
    tokio::time::timeout(HANG_GUARD, h)
        .await
        .expect("blocked client never answered")
        .expect("task panicked")
}

/// The keyspace events `script` produces on the server at `port` with
/// `notify-keyspace-events` set to `flags` (`event key` lines), read by a PSUBSCRIBE
/// connection up to a sentinel publication; for comparing a command's events with Redis's.
pub fn keyevents(port: u16, flags: &str, script: &[&str]) -> Vec<String> {
    let mut sub = Conn::connect(port).expect("connect");
    let mut c = Conn::connect(port).expect("connect");
    c.cmd("FLUSHALL");
    c.cmd(&format!("CONFIG SET notify-keyspace-events {flags}"));
    sub.cmd("PSUBSCRIBE __keyevent@0__:*");
    sub.cmd("SUBSCRIBE end");
    for line in script {
        c.cmd(line);
    }
    c.cmd("PUBLISH end x");
    c.cmd("CONFIG SET notify-keyspace-events \"\"");
    let mut out = Vec::new();
    loop {
        let Frame::Array(parts) = sub.read().expect("message") else {
            panic!("not a message");
        };
        let text: Vec<String> = parts
            .iter()
            .map(|p| match p {
                Frame::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                other => format!("{other:?}"),
            })
            .collect();
        if text.first().map(String::as_str) == Some("message") {
            break;
        }
        out.push(format!("{} {}", text[2], text[3]));
    }
    out
}

/// xorshift64*: deterministic across platforms and crate versions, so a failing seed
/// replays. Suites add their own draws in `impl Rng` blocks.
pub struct Rng(pub u64);

impl Rng {
    /// A generator from any seed (0 included: the state is spread and made odd).
    pub fn seeded(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// Uniform-ish in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// The WATCH probe: an in-process server and two clients, `a` watching and `b` acting.
pub struct WatchProbe {
    pub server: respite::TestServer,
    pub a: Conn,
    pub b: Conn,
}

impl WatchProbe {
    pub fn start() -> WatchProbe {
        let server = respite::TestServer::start().expect("start");
        let a = Conn::connect(server.port()).expect("connect");
        let b = Conn::connect(server.port()).expect("connect");
        WatchProbe { server, a, b }
    }

    /// [`watched_exec_runs`]: true if `cmd` by `b` left `k` untouched as WATCH sees it.
    pub fn exec_runs(&mut self, cmd: &str) -> bool {
        watched_exec_runs(&mut self.a, &mut self.b, cmd)
    }
}

/// Asserts that `script` makes respite publish the keyspace events ([`keyevents`] with
/// `flags`) redis-server does, and at least `min` of them (so the script is a real probe).
pub fn assert_keyevents_match_redis(flags: &str, script: &[&str], min: usize) {
    let redis = super::ServerProcess::redis();
    let expected = keyevents(redis.port, flags, script);
    assert!(expected.len() >= min, "{expected:?}");
    let srv = respite::TestServer::start().expect("start");
    assert_eq!(keyevents(srv.port(), flags, script), expected);
}

/// WATCH on `k` by `a`, `cmd` by `b`, then a transaction on `a`: true if EXEC ran (so `cmd`
/// did not touch `k` as far as WATCH is concerned).
pub fn watched_exec_runs(a: &mut Conn, b: &mut Conn, cmd: &str) -> bool {
    assert_eq!(a.cmd("WATCH k"), Frame::Simple("OK".into()));
    b.cmd(cmd);
    a.cmd("MULTI");
    a.cmd("GET x");
    match a.cmd("EXEC") {
        Frame::NullArray | Frame::Null => false,
        Frame::Array(_) => true,
        other => panic!("EXEC: {other:?}"),
    }
}

/// Polls PING on one fresh connection until its reply satisfies `ok` (a wedged server
/// makes the read time out, which fails the test).
pub fn wait_ping(port: u16, what: &str, ok: impl Fn(&Frame) -> bool) {
    let mut c = Conn::connect(port).expect("connect");
    c.set_timeout(PATIENCE);
    let deadline = Instant::now() + PATIENCE;
    loop {
        let r = c.call(&[b"PING".to_vec()]).expect("PING reply");
        if ok(&r) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: last PING reply {r}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until PING answers BUSY (a script or function is past its busy threshold).
pub fn wait_busy(port: u16) {
    wait_ping(port, "waiting for BUSY", |r| r.is_error("BUSY "));
}

/// Waits until PING answers PONG.
pub fn wait_pong(port: u16) {
    wait_ping(port, "waiting for PONG", |r| {
        *r == Frame::Simple("PONG".into())
    })
}

/// Counts panics on the in-process server's worker threads (a panicking connection task
/// would otherwise just vanish): [`server_panics`] reads the count.
pub fn watch_server_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name() == Some("tokio-runtime-worker") {
                SERVER_PANICS.fetch_add(1, Ordering::Relaxed);
            }
            prev(info)
        }));
    });
}

static SERVER_PANICS: AtomicUsize = AtomicUsize::new(0);

/// Panics seen on server worker threads since [`watch_server_panics`].
pub fn server_panics() -> usize {
    SERVER_PANICS.load(Ordering::Relaxed)
}
