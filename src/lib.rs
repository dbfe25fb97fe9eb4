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
pub mod instance;
pub mod num;
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
///
/// Always a multi-thread runtime, `--threads 1` included (one worker): a long script or
/// DEBUG SLEEP hands its worker core to a fresh thread (`block_in_place`), so other clients
/// still get BUSY and can send SCRIPT KILL or SHUTDOWN NOSAVE. A current-thread runtime has
/// no core to hand over. Signals are taken on a thread of their own, and the end does not
/// wait for the workers: a runaway script or DEBUG SLEEP cannot hold the process.
pub fn run(config: Config) -> std::io::Result<()> {
    let threads = if config.threads == 0 {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    } else {
        config.threads
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()?;
    let result = rt.block_on(async move {
        let listeners = server::bind(&config)?;
        let clock = if config.manual_clock {
            Clock::manual()
        } else {
            Clock::system()
        };
        let print_port = config.print_port;
        let running = server::start(config, clock, listeners)?;
        let port = running.addrs.first().map(|a| a.port()).unwrap_or(0);
        watch_signals(running.shared.clone())?;
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
        // `block_on` polls this on the calling thread, not on a worker: SHUTDOWN's
        // notification wakes it however busy the workers are.
        running.shared.shutdown.notified().await;
        tracing::info!("shutting down");
        if let Some(p) = running.shared.persist.get() {
            // The final durable commit (SIGTERM, SIGINT, SHUTDOWN): everything acknowledged
            // is in the journal already; a script still running has acknowledged nothing.
            p.shutdown();
        }
        Ok(())
    });
    // A worker may be inside a script or DEBUG SLEEP that never yields: do not wait for it.
    rt.shutdown_background();
    result
}

/// SIGINT/SIGTERM, on a thread with its own small runtime: the server's workers may all be
/// busy (a script, DEBUG SLEEP), and a signal must still end the process. It ends it as
/// SHUTDOWN does.
fn watch_signals(srv: std::sync::Arc<instance::state::Shared>) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Registered here, before the port is printed: a signal sent once the server is up is
    // never missed.
    #[cfg(unix)]
    let (mut term, mut int) = {
        use tokio::signal::unix::{signal, SignalKind};
        let _guard = rt.enter();
        (
            signal(SignalKind::terminate())?,
            signal(SignalKind::interrupt())?,
        )
    };
    std::thread::Builder::new()
        .name("respite-signals".into())
        .spawn(move || {
            rt.block_on(async move {
                #[cfg(unix)]
                tokio::select! {
                    _ = int.recv() => {},
                    _ = term.recv() => {},
                }
                #[cfg(not(unix))]
                let _ = tokio::signal::ctrl_c().await;
            });
            tracing::warn!("received a termination signal");
            srv.shutdown.notify_one();
        })?;
    Ok(())
}
