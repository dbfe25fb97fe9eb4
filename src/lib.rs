//! respite: a server that speaks the Redis protocol.
//!
//! Architecture (dependencies point one way, top to bottom):
//! - [`protocol`]: RESP request parser and reply writer; imports nothing above it.
//! - [`types`]: pure data structures (glob, placement, hash/list/set/zset/stream).
//! - [`clock`], [`config`]: time source and settings.
//! - [`engine`]: sharded in-memory keyspace with expiry and locking; the element-level
//!   changes each write makes and the journal they go to when durable.
//! - [`persist`]: the redb store of record (`--engine redb`): layout, load, committer.
//! - [`script`]: Lua scripting (sandbox, `redis.*`, libraries).
//! - [`cmd`]: the command table (data) and one file per command family.
//! - [`server`]: listener and connections (pipelined read → dispatch → batched write),
//!   blocking, pub/sub, keyspace notifications.
//!
//! For tests, [`TestServer`] starts an in-process server on an ephemeral loopback port with
//! the memory engine and (optionally) a manual clock.

pub mod clock;
pub mod cmd;
pub mod config;
pub mod engine;
pub mod persist;
pub mod protocol;
pub mod proxy;
pub mod script;
pub mod server;
pub mod types;

use std::net::SocketAddr;
use std::sync::Arc;

/// The Redis version we report to clients (they feature-detect on it).
pub const REDIS_VERSION: &str = "7.2.4";
pub const RESPITE_VERSION: &str = env!("CARGO_PKG_VERSION");

pub use clock::Clock;
pub use config::Config;

/// Runs a server with `config` until SIGINT/SIGTERM or SHUTDOWN; blocks the caller.
pub fn run(config: Config) -> std::io::Result<()> {
    let threads = if config.threads == 0 {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    } else {
        config.threads
    };
    let rt = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()?
    };
    rt.block_on(async move {
        let listeners = server::bind(&config)?;
        let clock = if config.manual_clock {
            Clock::manual()
        } else {
            Clock::system()
        };
        let print_port = config.print_port;
        let running = server::start(config, clock, listeners)?;
        let port = running.addrs.first().map(|a| a.port()).unwrap_or(0);
        if print_port {
            use std::io::Write;
            let mut out = std::io::stdout();
            let _ = writeln!(out, "{port}");
            let _ = out.flush();
        }
        tracing::info!(
            "respite {} ready to accept connections on port {port}",
            RESPITE_VERSION
        );
        wait_for_shutdown(&running.shared).await;
        tracing::info!("shutting down");
        if let Some(p) = running.shared.persist.get() {
            // The final durable commit (SIGTERM, SIGINT, SHUTDOWN).
            p.shutdown();
        }
        Ok(())
    })
}

async fn wait_for_shutdown(srv: &server::state::Shared) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {},
            _ = term.recv() => {},
            _ = srv.shutdown.notified() => {},
        }
    }
    #[cfg(not(unix))]
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = srv.shutdown.notified() => {},
    }
}

/// An in-process server for tests: memory engine, loopback, ephemeral port; stops on drop.
pub struct TestServer {
    addr: SocketAddr,
    shared: Arc<server::state::Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Options for [`TestServer`].
#[derive(Default)]
pub struct TestServerBuilder {
    config: Config,
    manual_clock: bool,
}

impl TestServerBuilder {
    /// Time moves only through [`TestServer::clock`] (`advance_ms` / `set_ms`).
    pub fn manual_clock(mut self) -> Self {
        self.manual_clock = true;
        self
    }
    pub fn password(mut self, p: &str) -> Self {
        self.config.requirepass = Some(p.to_string());
        self
    }
    pub fn port(mut self, port: u16) -> Self {
        self.config.port = port;
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
    /// Any redis.conf parameter, as at start-up.
    pub fn param(mut self, name: &str, value: &str) -> Self {
        self.config
            .params
            .push((name.to_string(), value.to_string()));
        self
    }

    pub fn start(self) -> std::io::Result<TestServer> {
        let mut config = self.config;
        if config.port == 6379 {
            config.port = 0;
        }
        config.bind = vec!["127.0.0.1".into()];
        let clock = if self.manual_clock {
            Clock::manual()
        } else {
            Clock::system()
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("respite-test".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                rt.block_on(async move {
                    match server::bind(&config).and_then(|ls| server::start(config, clock, ls)) {
                        Ok(running) => {
                            let _ = tx.send(Ok((running.addrs[0], running.shared.clone())));
                            let _ = stop_rx.await;
                            if let Some(p) = running.shared.persist.get() {
                                p.shutdown();
                            }
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e));
                        }
                    }
                });
                rt.shutdown_background();
            })?;
        let (addr, shared) = rx.recv().map_err(std::io::Error::other)??;
        Ok(TestServer {
            addr,
            shared,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }
}

impl TestServer {
    pub fn builder() -> TestServerBuilder {
        TestServerBuilder::default()
    }
    /// Starts with defaults (system clock).
    pub fn start() -> std::io::Result<TestServer> {
        Self::builder().start()
    }
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    pub fn port(&self) -> u16 {
        self.addr.port()
    }
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }
    pub fn clock(&self) -> &Clock {
        &self.shared.clock
    }
    /// Advances a manual clock and runs an expiry sweep at the new time.
    pub fn advance_ms(&self, ms: u64) {
        self.shared.clock.advance_ms(ms);
        let (_, ready) = self
            .shared
            .ks
            .sweep_ready(self.shared.clock.now_ms(), usize::MAX);
        if !ready.is_empty() {
            crate::cmd::blocking::serve_ready(&self.shared, ready);
        }
    }
    pub fn shared(&self) -> &Arc<server::state::Shared> {
        &self.shared
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
