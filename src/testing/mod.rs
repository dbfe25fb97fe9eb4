//! respite as a test double: an in-process server with a controllable clock, seedable
//! randomness and direct inspection of the keyspace.
//!
//! ```
//! use respite::testing::TestServer;
//! use std::time::Duration;
//!
//! let srv = TestServer::builder().manual_clock().seed(7).start().unwrap();
//! srv.set_ex("session", "abc", Duration::from_millis(1000));
//! srv.advance(Duration::from_millis(1000));
//! srv.assert_str("session", "abc");
//! srv.advance(Duration::from_millis(1));
//! srv.assert_missing("session");
//! // Any client can connect to `srv.url()` (redis://127.0.0.1:PORT) meanwhile.
//! assert!(srv.url().starts_with("redis://127.0.0.1:"));
//! ```
//!
//! From `#[tokio::test]`, start with [`TestServer::start_async`] /
//! [`TestServerBuilder::start_async`]. Either way the server runs on its own thread and
//! tokio runtime, so it works under any test runtime (current-thread included) and its
//! work never competes with the test's own tasks; dropping it stops it and frees its port.
//!
//! ## Clock
//! By default the server reads the system clock. With [`TestServerBuilder::manual_clock`]
//! (or [`TestServerBuilder::clock_at`]) time moves only through [`TestServer::advance`] and
//! [`TestServer::set_time`]; both run the expiry sweep at the new time, so a key whose
//! deadline has passed is gone both lazily (on access) and from `DBSIZE`/`KEYS`. As in
//! Redis (`keyIsExpired`: `now > when`), a key is expired once the clock is strictly past
//! its deadline: after `SET k v PX 1000` it is still there at +1000 ms and gone at +1001 ms.
//! `TIME`, `EXPIREAT`/`PEXPIREAT`, `TTL`, idle times and stream auto-IDs follow the clock.
//! Blocking-command timeouts (`BLPOP k 5`, `XREAD BLOCK`) stay on real time: they are
//! tokio timers, so a client never hangs on a clock nobody advances.
//!
//! ## Determinism
//! [`TestServerBuilder::seed`] makes `SPOP`, `SRANDMEMBER`, `HRANDFIELD`, `ZRANDMEMBER`,
//! `RANDOMKEY` and Lua's `math.random` repeatable: two servers with the same seed and the
//! same commands give the same replies. [`TestServer::reseed`] restarts them mid-test.
//!
//! ## Inspection
//! Typed reads, seeding and assertions run the real commands in-process through the
//! dispatcher on a hidden internal session (db 0 unless [`TestServer::db`] selects another),
//! so they see and make exactly what clients do (journal included when durable). They leave
//! no trace a client could see: no client id is used up, and they count nowhere (`INFO
//! commandstats`, error stats, keyspace hits/misses, the command log) and touch no key's
//! access time (`OBJECT IDLETIME`).
//!
//! ## Restart
//! [`TestServer::restart`] stops the instance (listener closed, connections dropped) and
//! starts a new one on the same port, keeping or clearing the data, so client reconnect
//! logic meets a real restart: refused connects while it is down, a new `run_id`, fresh
//! client ids and counters.

mod faults;
mod inspect;

pub use inspect::{Db, Pending};

use crate::clock::Clock;
use crate::config::Config;
use crate::instance::state::Shared;
use crate::server;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// How long [`TestServer::restart`] keeps the port closed.
pub const RESTART_DOWNTIME: Duration = Duration::from_millis(100);

/// An in-process server for tests: memory engine, loopback, ephemeral port; stops on drop.
///
/// Derefs to [`Db`] for db 0, so `srv.get("k")`, `srv.set("k", "v")` work directly.
pub struct TestServer {
    addr: SocketAddr,
    current: Current,
    root: Db,
    /// What [`TestServer::restart`] starts again.
    spec: Spec,
    /// Dropping it stops the server (and waits until its port is free).
    service: parking_lot::Mutex<Option<crate::background::Background>>,
}

/// The running instance's state, shared by the server's handles ([`Db`]s included);
/// [`TestServer::restart`] replaces it with the new instance's.
#[derive(Clone)]
pub(crate) struct Current(Arc<parking_lot::RwLock<Arc<Shared>>>);

impl Current {
    pub(crate) fn get(&self) -> Arc<Shared> {
        self.0.read().clone()
    }
    fn set(&self, s: Arc<Shared>) {
        *self.0.write() = s;
    }
}

/// A test server's start-up settings.
struct Spec {
    config: Config,
    clock: Clock,
    seed: Option<u64>,
    resp3_only: bool,
    /// A TLS listener too ([`TestServerBuilder::tls`]): its port, 0 until first bound, then
    /// kept across restarts.
    tls_port: Option<Arc<std::sync::atomic::AtomicU16>>,
}

impl Spec {
    /// The durable engine's directory, as the server resolves it at start-up.
    fn dir(&self) -> std::path::PathBuf {
        let dir = self.config.params.iter().rev().find(|(k, _)| k == "dir");
        match dir {
            Some((_, d)) if !d.is_empty() => d.into(),
            _ => ".".into(),
        }
    }

    /// Starts an instance on `port` (0: ephemeral) and waits until it listens. With
    /// `adopt`, the new keyspace takes that (stopped) instance's contents before the first
    /// connection is accepted.
    fn launch(
        &self,
        port: u16,
        adopt: Option<Arc<Shared>>,
    ) -> std::io::Result<(SocketAddr, Arc<Shared>, crate::background::Background)> {
        let mut config = self.config.clone();
        // The test double allows DEBUG from loopback (the server's default is Redis's
        // "no"), so suites can DEBUG SLEEP against it; a `param` given by the test wins.
        config
            .params
            .insert(0, ("enable-debug-command".to_string(), "local".to_string()));
        config.port = port;
        config.bind = vec!["127.0.0.1".into()];
        let clock = self.clock.clone();
        let tls_port = self.tls_port.clone();
        let ((addr, shared), service) = crate::background::Background::spawn(
            "respite-test",
            move || async move {
                let prepare = move |new: &Arc<Shared>| {
                    if let Some(old) = adopt {
                        new.ks.take_contents(&old.ks);
                    }
                    Ok(())
                };
                let mut config = config;
                let mut ls = server::bind(&config)?;
                if let Some(port) = &tls_port {
                    use std::sync::atomic::Ordering::Relaxed;
                    let l =
                        tokio::net::TcpListener::bind(("127.0.0.1", port.load(Relaxed))).await?;
                    let bound = l.local_addr()?.port();
                    port.store(bound, Relaxed);
                    config
                        .params
                        .push(("tls-port".to_string(), bound.to_string()));
                    ls.tls.push(l);
                }
                let running = server::start_with(config, clock, ls, prepare)?;
                Ok(((running.addrs[0], running.shared.clone()), running))
            },
            |running: server::Running| {
                // The final durable commit of a redb test server.
                if let Some(p) = running.shared.persist.get() {
                    crate::cmd::server::saved_access::save_at_shutdown(&running.shared);
                    p.shutdown();
                }
            },
        )?;
        // Before the caller can connect, so the first command already draws seeded.
        if let Some(seed) = self.seed {
            crate::script::reseed(&shared, seed);
        }
        shared
            .resp3_only
            .store(self.resp3_only, std::sync::atomic::Ordering::Relaxed);
        // A test double records what it receives (`command_log`, `wait_for_command`); the
        // cost is a copy of each command's arguments into a bounded log.
        shared.faults.set_logging(true);
        Ok((addr, shared, service))
    }
}

/// Options for [`TestServer`].
#[derive(Default)]
pub struct TestServerBuilder {
    config: Config,
    manual_clock: bool,
    clock_at: Option<u64>,
    seed: Option<u64>,
    resp3_only: bool,
    port: Option<u16>,
    tls: bool,
}

impl TestServerBuilder {
    /// Time moves only through [`TestServer::advance`] / [`TestServer::set_time`]; it
    /// starts frozen at the current system time.
    pub fn manual_clock(mut self) -> Self {
        self.manual_clock = true;
        self
    }
    /// A manual clock starting at `unix_ms`.
    pub fn clock_at(mut self, unix_ms: u64) -> Self {
        self.manual_clock = true;
        self.clock_at = Some(unix_ms);
        self
    }
    /// Seeds every random choice (see the module docs).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }
    /// `requirepass`: clients must `AUTH` (or `HELLO 3 AUTH default pw`) first.
    pub fn password(mut self, p: &str) -> Self {
        self.config.requirepass = Some(p.to_string());
        self
    }
    /// The server speaks only RESP3: `HELLO 2` answers `-NOPROTO unsupported protocol
    /// version` (Redis's reply to a version it does not speak), and until a connection has
    /// sent `HELLO 3` every command but `HELLO`, `AUTH`, `QUIT` and `RESET` answers
    /// `-NOPROTO this test server speaks only RESP3: send HELLO 3 first`. A test then fails
    /// loudly if the client under test never negotiates RESP3 (or asks for RESP2).
    pub fn resp3_only(mut self) -> Self {
        self.resp3_only = true;
        self
    }
    /// An explicit port instead of an ephemeral one (0 also means ephemeral).
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }
    /// A TLS listener too, on an ephemeral loopback port ([`TestServer::tls_port`], the same
    /// after a restart), beside the plain one. Its certificate and options are the `tls-*`
    /// parameters given with [`TestServerBuilder::param`]: at least `tls-cert-file` and
    /// `tls-key-file`, and `tls-ca-cert-file` unless `tls-auth-clients` is `no`.
    pub fn tls(mut self) -> Self {
        self.tls = true;
        self
    }
    /// The durable engine (`--engine redb`) with its file in `dir`.
    pub fn redb(mut self, dir: &std::path::Path) -> Self {
        self.config.redb = true;
        self.config
            .params
            .push(("dir".to_string(), dir.display().to_string()));
        self
    }
    /// An ACL user, as a config file's `user NAME rule…` line (the words after `user`,
    /// split at spaces).
    pub fn acl_user(mut self, line: &str) -> Self {
        self.config.users.push(
            line.split_whitespace()
                .map(|w| bytes::Bytes::copy_from_slice(w.as_bytes()))
                .collect(),
        );
        self
    }
    /// Emulated cluster mode (`--cluster-mode emulated`): the server answers CLUSTER SLOTS,
    /// SHARDS, NODES… as a one-node Redis Cluster owning all 16 384 slots at this server's
    /// address, and refuses cross-slot requests with `-CROSSSLOT`, so cluster-mode clients
    /// (redis-py `RedisCluster`, ioredis `Cluster`, go-redis `ClusterClient`) can be tested
    /// against one in-process server.
    pub fn cluster_emulated(self) -> Self {
        self.param(crate::instance::state::CLUSTER_MODE_PARAM, "emulated")
    }
    /// Any redis.conf parameter, as at start-up.
    pub fn param(mut self, name: &str, value: &str) -> Self {
        self.config
            .params
            .push((name.to_string(), value.to_string()));
        self
    }

    /// Starts the server and waits until it accepts connections, without blocking the
    /// calling async runtime (the wait runs on tokio's blocking pool).
    pub async fn start_async(self) -> std::io::Result<TestServer> {
        tokio::task::spawn_blocking(move || self.start())
            .await
            .map_err(std::io::Error::other)?
    }

    /// Starts the server (on its own thread and runtime) and returns once it listens.
    pub fn start(self) -> std::io::Result<TestServer> {
        let clock = if self.manual_clock {
            Clock::manual()
        } else {
            Clock::system()
        };
        if let Some(ms) = self.clock_at {
            clock.set_ms(ms);
        }
        let spec = Spec {
            config: self.config,
            clock,
            seed: self.seed,
            resp3_only: self.resp3_only,
            tls_port: self
                .tls
                .then(|| Arc::new(std::sync::atomic::AtomicU16::new(0))),
        };
        let (addr, shared, service) = spec.launch(self.port.unwrap_or(0), None)?;
        let current = Current(Arc::new(parking_lot::RwLock::new(shared)));
        Ok(TestServer {
            addr,
            root: Db::new(current.clone(), 0),
            current,
            spec,
            service: parking_lot::Mutex::new(Some(service)),
        })
    }
}

impl TestServer {
    pub fn builder() -> TestServerBuilder {
        TestServerBuilder::default()
    }
    /// Starts with defaults (system clock, entropy seed), blocking the caller.
    pub fn start() -> std::io::Result<TestServer> {
        Self::builder().start()
    }
    /// [`TestServer::start`] for async tests.
    pub async fn start_async() -> std::io::Result<TestServer> {
        Self::builder().start_async().await
    }
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    /// The TLS port (`tls-port`; `None` when 0) of a server built with
    /// [`TestServerBuilder::tls`], or set since with CONFIG SET.
    pub fn tls_port(&self) -> Option<u16> {
        let port = self.shared().config.get("tls-port")?.parse().ok()?;
        (port != 0).then_some(port)
    }
    pub fn port(&self) -> u16 {
        self.addr.port()
    }
    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }
    /// The clock (kept across [`TestServer::restart`]).
    pub fn clock(&self) -> &Clock {
        &self.spec.clock
    }
    /// The server's current time in Unix milliseconds (manual or real).
    pub fn now_ms(&self) -> u64 {
        self.spec.clock.now_ms()
    }
    /// Moves a manual clock forward by `d` (whole milliseconds) and sweeps expired keys.
    ///
    /// # Panics
    /// On a real clock: time there is not ours to move.
    pub fn advance(&self, d: Duration) {
        self.expect_manual("advance");
        self.advance_ms(d.as_millis().try_into().unwrap_or(u64::MAX));
    }
    /// Sets a manual clock to `unix_ms` (backwards too) and sweeps expired keys.
    ///
    /// # Panics
    /// On a real clock.
    pub fn set_time(&self, unix_ms: u64) {
        self.expect_manual("set_time");
        self.spec.clock.set_ms(unix_ms);
        self.sweep();
    }
    /// Back to the system clock (from now on `advance`/`set_time` panic); sweeps at the
    /// real time, so keys the manual clock had not reached may expire now.
    pub fn real(&self) {
        self.spec.clock.set_manual(false);
        self.sweep();
    }
    /// Freezes the clock at the current system time (a manual clock from now on).
    pub fn manual(&self) {
        self.spec.clock.set_manual(true);
    }
    /// Advances a manual clock by `ms` and runs an expiry sweep at the new time (no effect
    /// on the time of a real clock, which is only swept).
    pub fn advance_ms(&self, ms: u64) {
        if self.spec.clock.is_manual() {
            self.spec.clock.advance_ms(ms);
        }
        self.sweep();
    }
    /// Restarts the server on the same port, as a process restart would: the listener
    /// closes and every connection drops, new connections are refused (connection refused)
    /// for [`RESTART_DOWNTIME`], then a new instance starts with the start-up settings.
    /// Everything a process keeps in memory starts afresh — configuration set since start,
    /// INFO counters, client ids, scripts, subscriptions, faults, the command log (the seed,
    /// if one was given, is applied again) — while the clock carries on. With `keep_data`
    /// the keyspace survives: handed over in memory, or on the durable engine reopened from
    /// its files (the final commit, log replay and load all run for real); without it the
    /// new instance starts empty (a durable server's files are deleted).
    ///
    /// Blocks the calling thread for the downtime (from an async test that is ~100 ms of its
    /// runtime; the server runs on its own).
    ///
    /// # Panics
    /// If the port cannot be bound again (another process took it meanwhile).
    pub fn restart(&self, keep_data: bool) {
        self.restart_after(keep_data, RESTART_DOWNTIME);
    }

    /// [`TestServer::restart`] with `downtime` between the stop and the new start.
    pub fn restart_after(&self, keep_data: bool, downtime: Duration) {
        let mut service = self.service.lock();
        // Stops the instance: listener closed, connections dropped, final durable commit.
        drop(service.take());
        let durable = self.spec.config.redb;
        let adopt = (keep_data && !durable).then(|| self.shared());
        if durable {
            // Nothing of the old instance may hold its files open during the reload.
            self.current.set(Arc::new(crate::cmd::new_shared(
                self.spec.config.clone(),
                self.spec.clock.clone(),
            )));
            if !keep_data {
                crate::persist::remove_files(&self.spec.dir()).expect("delete the durable files");
            }
        }
        std::thread::sleep(downtime);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let (_, shared, bg) = loop {
            match self.spec.launch(self.addr.port(), adopt.clone()) {
                Ok(started) => break started,
                // The old listener's socket can linger for a moment after its runtime stops.
                Err(e)
                    if e.kind() == std::io::ErrorKind::AddrInUse
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("restart on port {}: {e}", self.addr.port()),
            }
        };
        self.current.set(shared);
        *service = Some(bg);
    }

    /// Restarts every random choice from `seed` (see the module docs).
    pub fn reseed(&self, seed: u64) {
        crate::script::reseed(&self.shared(), seed);
    }
    /// The running instance's state (a new one after each [`TestServer::restart`]).
    pub fn shared(&self) -> Arc<Shared> {
        self.current.get()
    }

    fn expect_manual(&self, what: &str) {
        assert!(
            self.spec.clock.is_manual(),
            "TestServer::{what} needs a manual clock (builder().manual_clock())"
        );
    }

    /// Removes every key expired at the clock's time, waking blocked clients as the
    /// periodic sweep does.
    fn sweep(&self) {
        let srv = self.shared();
        let now = self.spec.clock.now_ms();
        let (_, ready) = srv.ks.sweep_ready(now, usize::MAX);
        if !ready.is_empty() {
            crate::cmd::blocking::serve_ready(&srv, ready);
        }
    }
}

impl std::ops::Deref for TestServer {
    type Target = Db;
    fn deref(&self) -> &Db {
        &self.root
    }
}
