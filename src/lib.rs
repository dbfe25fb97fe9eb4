//! respite: a server that speaks the Redis protocol.
//!
//! # Module map
//!
//! Layers, bottom to top. A module imports only modules of a lower rank (peers of one rank
//! do not import each other); `tests/arrows.rs` reads this table and fails on any `crate::`
//! path that points up or sideways, and checks DESIGN.md §1 carries the same table.
//!
//! | rank | module | holds |
//! |---|---|---|
//! | 0 | [`num`], [`alloc`] | number ⇄ text as Redis reads and writes it (`string2ll`, `d2string`); the counting allocator behind `used_memory` |
//! | 1 | [`protocol`], [`types`], [`tls`] | RESP parser, `Reply` and its writer; pure data structures and the value types (`Value`, `Entry`, `StrVal`), RDB encoding; TLS configurations (rustls) and the byte streams connections run on |
//! | 2 | [`clock`], [`config`], [`background`] | time source; settings and `CONFIG`'s parameter table; a service on its own thread |
//! | 3 | [`engine`] | sharded keyspace, expiry, locking, the changes each write makes and their journal |
//! | 4 | [`persist`] | the redb store of record (`--engine redb`): layout, WAL, load, committer |
//! | 5 | [`instance`] | what a running server holds: shared state and stats, sessions, client / pub-sub / blocked-client registries, keyspace events, pause, faults; the error texts |
//! | 6 | [`script`] | Lua (sandbox, `redis.*`, libraries); reaches commands only through its `Host` seam |
//! | 7 | [`cmd`] | the command table (data), dispatch, one file per command family |
//! | 8 | [`server`], [`proxy`] | the network edge: listener and connection loop; the sharding proxy |
//! | 9 | [`testing`], [`fuzzing`] | the in-process test double; fuzz entry points |
//!
//! `lib.rs` itself (the embedding API, [`run`]) and `main.rs` sit above all of them; the
//! root's constants ([`REDIS_VERSION`]) may be read from any layer.
//!
//! For tests, [`testing::TestServer`] starts an in-process server on an ephemeral loopback
//! port with the memory engine, an optional manual clock and seed, and inspection helpers.

pub mod alloc;
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
pub mod tls;
pub mod types;

/// The Redis version we report to clients (they feature-detect on it). 7.4: Redis 7.2's
/// behaviour plus 7.4's additions (hash-field expiration, CLIENT KILL MAXAGE, XREAD `+`,
/// HSCAN NOVALUES, `os.clock`, the EVAL script LRU, the new INFO fields), which clients
/// such as redis-py and Jedis require before they enable client-side caching.
pub const REDIS_VERSION: &str = "7.4.1";
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
    // The default leaves half the cores to the kernel's network stack and to clients on the
    // same machine: on 2 cores one worker beat two on every benchmarked command, in
    // throughput and CPU per request (DESIGN.md §9).
    let threads = if config.threads == 0 {
        std::thread::available_parallelism()
            .map(|n| n.get() / 2)
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
            cmd::server::saved_access::save_at_shutdown(&running.shared);
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
