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
//! For tests, [`testing::TestServer`] starts an in-process server on an ephemeral loopback
//! port with the memory engine, an optional manual clock and seed, and inspection helpers.

pub mod background;
pub mod clock;
pub mod cmd;
pub mod config;
pub mod engine;
#[doc(hidden)]
pub mod fuzzing;
pub mod persist;
pub mod protocol;
pub mod proxy;
pub mod script;
pub mod server;
pub mod testing;
pub mod types;

/// The Redis version we report to clients (they feature-detect on it).
pub const REDIS_VERSION: &str = "7.2.4";
pub const RESPITE_VERSION: &str = env!("CARGO_PKG_VERSION");

pub use clock::Clock;
pub use config::Config;
pub use testing::{TestServer, TestServerBuilder};

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
