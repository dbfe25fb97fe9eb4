//! Server-wide shared state: keyspace, clock, config, clients and statistics.

use super::clients::Clients;
use crate::clock::Clock;
use crate::config::{Config, ConfigStore};
use crate::engine::Keyspace;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

#[derive(Default)]
pub struct CmdStat {
    pub calls: AtomicU64,
    pub usec: AtomicU64,
    pub rejected: AtomicU64,
    pub failed: AtomicU64,
}

impl CmdStat {
    pub fn reset(&self) {
        for c in [&self.calls, &self.usec, &self.rejected, &self.failed] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

#[derive(Default)]
pub struct Stats {
    pub total_connections: AtomicU64,
    pub total_commands: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub error_replies: AtomicU64,
    /// Successful SAVE/BGSAVE runs (INFO `rdb_saves`).
    pub rdb_saves: AtomicU64,
    /// Write-command calls counted at the last save, for `rdb_changes_since_last_save`.
    pub writes_at_last_save: AtomicU64,
    /// Error replies by code (`ERR`, `WRONGTYPE`…), for INFO errorstats.
    pub errors_by_code: parking_lot::Mutex<std::collections::BTreeMap<String, u64>>,
}

impl Stats {
    pub fn bump(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts an error reply under its code: the first word of the message, as Redis does
    /// for `errorstat_<CODE>`.
    pub fn record_error(&self, msg: &str) {
        let code = msg.split(' ').next().unwrap_or("ERR");
        let code = if code.is_empty() { "ERR" } else { code };
        *self
            .errors_by_code
            .lock()
            .entry(code.to_string())
            .or_insert(0) += 1;
    }

    /// CONFIG RESETSTAT: counters back to zero (INFO's totals and errorstats).
    pub fn reset(&self) {
        for c in [
            &self.total_connections,
            &self.total_commands,
            &self.rejected_connections,
            &self.net_input_bytes,
            &self.net_output_bytes,
            &self.error_replies,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        self.errors_by_code.lock().clear();
    }
}

/// The start-up parameter behind `--enable-test-commands`.
pub const TEST_COMMANDS_PARAM: &str = "enable-test-commands";

pub struct Shared {
    /// Clients blocked on keys (BLPOP & co.).
    pub blocking: super::blocking::Blocking,
    pub ks: Keyspace,
    pub clock: Clock,
    pub config: ConfigStore,
    pub startup: Config,
    pub clients: Clients,
    pub stats: Stats,
    /// Indexed like `cmd::registry()`'s ids.
    pub cmdstats: Vec<CmdStat>,
    pub started: Instant,
    pub started_unix_ms: u64,
    pub run_id: String,
    /// The port actually bound (after `--port 0`).
    pub port: AtomicU64,
    pub last_save_unix: AtomicU64,
    /// Set by SHUTDOWN; the listener stops accepting and the process exits.
    pub shutdown: tokio::sync::Notify,
    pub pause: super::pause::Pause,
    /// Channel, pattern and shard-channel subscribers.
    pub pubsub: super::pubsub::PubSub,
    /// The durable engine (`--engine redb`), set once at start-up.
    pub persist: std::sync::OnceLock<std::sync::Arc<crate::persist::Persistence>>,
    /// `--enable-test-commands` (config `enable-test-commands yes`): the RESPITE family.
    pub test_commands: bool,
    /// Injected faults (test double); connections check `faults.armed()` per command.
    pub faults: super::faults::Faults,
    /// Commands received, recorded while `faults.armed() & LOG` (test double).
    pub cmdlog: super::cmdlog::CommandLog,
    /// The generator behind SPOP, SRANDMEMBER, HRANDFIELD, ZRANDMEMBER and RANDOMKEY:
    /// seeded from entropy, or with a fixed seed by [`Shared::reseed`] so tests repeat.
    /// Commands hold it only while they draw.
    pub rng: parking_lot::Mutex<rand::rngs::SmallRng>,
    /// Set by [`Shared::reseed`]: RANDOMKEY then picks in key order, not hash order.
    pub seeded: std::sync::atomic::AtomicBool,
    /// Test servers started with `resp3_only()`: `HELLO 2` is refused (`NOPROTO`).
    pub resp3_only: std::sync::atomic::AtomicBool,
}

impl Shared {
    pub fn new(startup: Config, clock: Clock) -> Shared {
        let config = ConfigStore::default();
        let port_s = startup.port.to_string();
        let _ = config.set_initial("port", &port_s);
        let _ = config.set_initial("databases", &startup.databases.to_string());
        let _ = config.set_initial("maxclients", &startup.maxclients.to_string());
        let _ = config.set_initial("bind", &startup.bind.join(" "));
        if let Some(p) = &startup.requirepass {
            let _ = config.set_initial("requirepass", p);
        }
        let mut test_commands = false;
        for (k, v) in &startup.params {
            if k == TEST_COMMANDS_PARAM {
                test_commands = v.eq_ignore_ascii_case("yes");
                continue;
            }
            if let Err(e) = config.set_initial(k, v) {
                tracing::warn!("ignoring config {k}: {e}");
            }
        }
        let now = clock.now_ms();
        let run_id: String = (0..40)
            .map(|_| char::from_digit(rand::random::<u32>() % 16, 16).unwrap_or('0'))
            .collect();
        let srv = Shared {
            ks: Keyspace::new(startup.databases),
            cmdstats: (0..crate::cmd::registry().len())
                .map(|_| CmdStat::default())
                .collect(),
            clock,
            config,
            startup,
            clients: Clients::default(),
            stats: Stats::default(),
            started: Instant::now(),
            started_unix_ms: now,
            run_id,
            port: AtomicU64::new(0),
            last_save_unix: AtomicU64::new(now / 1000),
            shutdown: tokio::sync::Notify::new(),
            pause: Default::default(),
            blocking: Default::default(),
            pubsub: super::pubsub::PubSub::new(),
            persist: std::sync::OnceLock::new(),
            test_commands,
            faults: Default::default(),
            cmdlog: Default::default(),
            rng: parking_lot::Mutex::new(rand::SeedableRng::from_entropy()),
            resp3_only: false.into(),
            seeded: false.into(),
        };
        // A server that is a test double records what it receives from the start.
        srv.faults.set_logging(test_commands);
        srv
    }

    /// Makes every random choice repeatable: the command generator and Lua's `math.random`
    /// restart from `seed`.
    pub fn reseed(self: &std::sync::Arc<Self>, seed: u64) {
        *self.rng.lock() = rand::SeedableRng::seed_from_u64(seed);
        self.seeded.store(true, Ordering::Relaxed);
        // `math.randomseed` takes a C int; fold the high half in so every bit counts.
        crate::script::engine::scripts(self).reseed((seed ^ (seed >> 32)) as i32);
    }

    pub fn requirepass(&self) -> Option<String> {
        self.config.get("requirepass").filter(|p| !p.is_empty())
    }
}
