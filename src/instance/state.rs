//! Server-wide shared state: keyspace, clock, config, clients and statistics.

use super::clients::Clients;
use crate::clock::Clock;
use crate::config::{Config, ConfigStore};
use crate::engine::Keyspace;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
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
    /// EVAL scripts evicted from the script cache (INFO `evicted_scripts`, Redis 7.4).
    pub evicted_scripts: AtomicU64,
    /// Clients closed for their query buffer (Redis 7.4's INFO
    /// `client_query_buffer_limit_disconnections`; the output side is
    /// `PubSub::obuf_disconnections`).
    pub qbuf_limit_disconnections: AtomicU64,
    /// Socket reads and writes attempted on client connections (INFO
    /// `total_reads_processed`, `total_writes_processed`).
    pub reads_processed: AtomicU64,
    pub writes_processed: AtomicU64,
    /// The 100 ms task's rates and expire-cycle time.
    pub inst: super::metrics::Instantaneous,
    pub expire_cycle: super::metrics::ExpireCycle,
    /// Successful SAVE/BGSAVE runs (INFO `rdb_saves`).
    pub rdb_saves: AtomicU64,
    /// Write-command calls counted at the last save, for `rdb_changes_since_last_save`.
    pub writes_at_last_save: AtomicU64,
    /// Redis's dirty counter counts changes, not calls: what commands reported beyond one
    /// change per successful write call (-1 for a call that changed nothing, n-1 for n).
    pub dirty_extra: AtomicI64,
    /// Error replies by code (`ERR`, `WRONGTYPE`…), for INFO errorstats.
    pub errors_by_code: parking_lot::Mutex<std::collections::BTreeMap<String, u64>>,
}

impl Stats {
    pub fn bump(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts an error reply under its code, as Redis's `afterErrorReply` does: the code is
    /// the text before the first space within the reply's first 32 bytes (the `-` included),
    /// `ERR` when there is none. Codes are bounded as in Valkey 8: once [`ERRORSTATS_LIMIT`]
    /// codes are kept, a new code that is not one of the server's own goes to
    /// [`ERRORSTATS_OVERFLOW`] (Valkey applies this to script errors; here every code outside
    /// [`OWN_CODES`] comes from a script, `DEBUG ERROR` or an injected fault).
    pub fn record_error(&self, msg: &str) {
        let code = error_code(msg);
        let mut map = self.errors_by_code.lock();
        if let Some(n) = map.get_mut(code) {
            *n += 1;
            return;
        }
        let code = if map.len() >= ERRORSTATS_LIMIT && !OWN_CODES.contains(&code) {
            ERRORSTATS_OVERFLOW
        } else {
            code
        };
        *map.entry(code.to_string()).or_insert(0) += 1;
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
            &self.evicted_scripts,
            &self.qbuf_limit_disconnections,
            &self.reads_processed,
            &self.writes_processed,
            &self.expire_cycle.us,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        self.inst.reset();
        self.errors_by_code.lock().clear();
    }
}

/// Distinct error codes kept before new ones are counted together (Valkey's `ERRORSTATS_LIMIT`).
pub const ERRORSTATS_LIMIT: usize = 128;
/// The shared bucket past [`ERRORSTATS_LIMIT`] (INFO `errorstat_ERRORSTATS_OVERFLOW`).
pub const ERRORSTATS_OVERFLOW: &str = "ERRORSTATS_OVERFLOW";
/// Codes the server itself replies with: always counted under their own name, so a flood
/// of script-made codes cannot hide them. A finite set, so the map stays bounded.
pub const OWN_CODES: &[&str] = &[
    "ERR",
    "WRONGTYPE",
    "NOAUTH",
    "WRONGPASS",
    "NOPROTO",
    "NOPERM",
    "EXECABORT",
    "BUSY",
    "BUSYKEY",
    "BUSYGROUP",
    "NOGROUP",
    "NOSCRIPT",
    "NOTBUSY",
    "UNKILLABLE",
    "MISCONF",
    "OOM",
    "LOADING",
    "READONLY",
    "NOREPLICAS",
    "MASTERDOWN",
    "UNBLOCKED",
    "CROSSSLOT",
    "LUAERR",
    "MOVED",
    "ASK",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "INVALIDOBJ",
];

/// The errorstats code of an error reply `msg` (sent as `-msg`): Redis looks for the space
/// only within the first 32 bytes of `-msg`, so a code is at most 30 bytes.
pub fn error_code(msg: &str) -> &str {
    let head = &msg.as_bytes()[..msg.len().min(31)];
    match head.iter().position(|&c| c == b' ') {
        // The space is ASCII, so the cut is on a char boundary.
        Some(i) => &msg[..i],
        None => "ERR",
    }
}

/// Seconds of history behind INFO's `client_recent_max_input_buffer` and
/// `client_recent_max_output_buffer` (Redis's `CLIENTS_PEAK_MEM_USAGE_SLOTS`).
pub const PEAK_SLOTS: usize = 8;

/// The largest input and output buffers any client held in each of the last
/// [`PEAK_SLOTS`] seconds. Connections report as they read and write (Redis samples every
/// client from its cron); a report that is not a new maximum only loads.
#[derive(Default)]
pub struct ClientPeaks {
    slots: [PeakSlot; PEAK_SLOTS],
}

#[derive(Default)]
struct PeakSlot {
    /// Which second (since start, plus one: 0 is never used) this slot holds.
    second: AtomicU64,
    input: std::sync::atomic::AtomicUsize,
    output: std::sync::atomic::AtomicUsize,
}

impl ClientPeaks {
    /// Notes a client's input and output buffer sizes at `second` (since start).
    pub fn record(&self, second: u64, input: usize, output: usize) {
        let stamp = second + 1;
        let slot = &self.slots[second as usize % PEAK_SLOTS];
        let seen = slot.second.load(Ordering::Relaxed);
        if seen != stamp {
            if seen > stamp {
                return;
            }
            // The first report of a new second resets the slot (a concurrent report may
            // be lost: these are statistics).
            if slot
                .second
                .compare_exchange(seen, stamp, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                slot.input.store(0, Ordering::Relaxed);
                slot.output.store(0, Ordering::Relaxed);
            }
        }
        if input > slot.input.load(Ordering::Relaxed) {
            slot.input.fetch_max(input, Ordering::Relaxed);
        }
        if output > slot.output.load(Ordering::Relaxed) {
            slot.output.fetch_max(output, Ordering::Relaxed);
        }
    }

    /// The largest (input, output) reported within the last [`PEAK_SLOTS`] seconds.
    pub fn recent(&self, second: u64) -> (usize, usize) {
        let oldest = (second + 1).saturating_sub(PEAK_SLOTS as u64 - 1);
        self.slots
            .iter()
            .filter(|s| s.second.load(Ordering::Relaxed) >= oldest)
            .fold((0, 0), |(i, o), s| {
                (
                    i.max(s.input.load(Ordering::Relaxed)),
                    o.max(s.output.load(Ordering::Relaxed)),
                )
            })
    }
}

/// The start-up parameter behind `--enable-test-commands`.
pub const TEST_COMMANDS_PARAM: &str = "enable-test-commands";

/// The start-up parameter behind `--cluster-mode`: `emulated` (a one-node Redis Cluster,
/// `cmd::cluster`) or `no` (the default).
pub const CLUSTER_MODE_PARAM: &str = "cluster-mode";

pub struct Shared {
    /// ACL users and the ACL log.
    pub acl: super::acl::Acl,
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
    /// `DEBUG PAUSE-CRON`: the periodic work Redis's `serverCron` does (active expiry,
    /// client crons such as query buffer resizing, client eviction, rate samples) skips
    /// its turns while set.
    pub cron_paused: AtomicBool,
    /// `started` on the cheap clock: connections read the uptime twice per read batch.
    started_fast: crate::clock::Instant,
    /// Recent client buffer peaks (INFO clients).
    pub peaks: ClientPeaks,
    pub started_unix_ms: u64,
    pub run_id: String,
    /// The port actually bound (after `--port 0`).
    pub port: AtomicU64,
    pub last_save_unix: AtomicU64,
    /// Set by SHUTDOWN; the listener stops accepting and the process exits.
    pub shutdown: tokio::sync::Notify,
    /// SHUTDOWN NOSAVE asked for it: the exit skips the save of keys' LRU/LFU data (the
    /// durable engine's journal is not a save and is always committed).
    pub shutdown_nosave: std::sync::atomic::AtomicBool,
    pub pause: super::pause::Pause,
    /// Channel, pattern and shard-channel subscribers.
    pub pubsub: super::pubsub::PubSub,
    /// Client-side caching: who may cache which keys.
    pub tracking: super::tracking::Tracking,
    /// MONITOR clients (commands read `monitors.active()` once each).
    pub monitors: super::monitor::Monitors,
    /// The `normal` class of `client-output-buffer-limit`, for replies (connections read
    /// it only when a batch's replies outgrow Redis's 16 KB reply buffer).
    pub normal_obuf: super::obuf::LimitCell,
    /// Client eviction (`maxmemory-clients`): its counter and pacing.
    pub client_eviction: super::clients::Eviction,
    /// The durable engine (`--engine redb`), set once at start-up.
    pub persist: std::sync::OnceLock<std::sync::Arc<crate::persist::Persistence>>,
    /// `--enable-test-commands` (config `enable-test-commands yes`): the RESPITE family.
    pub test_commands: bool,
    /// `--cluster-mode emulated`: CLUSTER answers as a one-node cluster owning every slot,
    /// cross-slot requests are refused, `cluster-enabled` reads `yes`.
    pub cluster_emulated: bool,
    /// Injected faults (test double); connections check `faults.armed()` per command.
    pub faults: super::faults::Faults,
    /// Commands received, recorded while `faults.armed() & LOG` (test double).
    pub cmdlog: super::cmdlog::CommandLog,
    /// SLOWLOG's entries (COMMANDLOG's `slow` type), and COMMANDLOG's `large-request` and
    /// `large-reply` entries.
    pub slowlog: super::slowlog::SlowLog,
    pub large_requests: super::slowlog::SlowLog,
    pub large_replies: super::slowlog::SlowLog,
    /// The latency monitor's events and the per-command latency histograms.
    pub latency: super::latency::Monitor,
    pub histograms: super::latency::Histograms,
    /// When a call has more to record than its histogram sample (`cmd::observe`).
    pub observe_floor: super::latency::Floor,
    /// The generator behind SPOP, SRANDMEMBER, HRANDFIELD, ZRANDMEMBER and RANDOMKEY:
    /// seeded from entropy, or with a fixed seed by [`Shared::seed_rng`] so tests repeat.
    /// Commands hold it only while they draw.
    pub rng: parking_lot::Mutex<rand::rngs::SmallRng>,
    /// Set by [`Shared::seed_rng`]: RANDOMKEY then picks in key order, not hash order.
    pub seeded: std::sync::atomic::AtomicBool,
    /// Test servers started with `resp3_only()`: `HELLO 2` is refused (`NOPROTO`).
    pub resp3_only: std::sync::atomic::AtomicBool,
    /// The TLS listeners' configuration (`tls-port`), read at each TLS accept; CONFIG SET
    /// of a `tls-*` parameter replaces it for the connections accepted after.
    pub tls: parking_lot::RwLock<Option<std::sync::Arc<crate::tls::ServerConfig>>>,
    /// CONFIG SET port and tls-port hand the listeners they bound to the server.
    pub tcp_listen: Relisten,
    pub tls_listen: Relisten,
}

/// Where CONFIG SET hands a kind of listener (`port`, `tls-port`) it re-bound (none: that
/// kind is off) to the server's accept task, which replaces its listeners with them.
#[derive(Default)]
pub struct Relisten {
    /// Set by the server at start.
    pub tx:
        std::sync::OnceLock<tokio::sync::mpsc::UnboundedSender<(u64, Vec<std::net::TcpListener>)>>,
    /// Bumped by each change before it is handed over: a listener of an earlier generation
    /// closes what it accepts (the change is in force when CONFIG SET replies).
    pub generation: AtomicU64,
}

impl Relisten {
    pub fn hand_over(&self, listeners: Vec<std::net::TcpListener>) {
        let gen = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        if let Some(tx) = self.tx.get() {
            let _ = tx.send((gen, listeners));
        }
    }
}

impl Shared {
    /// `commands`: the size of the command table, whose ids index [`Shared::cmdstats`]
    /// (`cmd::new_shared` passes it).
    pub fn new(startup: Config, clock: Clock, commands: usize) -> Shared {
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
        let mut cluster_emulated = false;
        for (k, v) in &startup.params {
            if k == TEST_COMMANDS_PARAM {
                test_commands = v.eq_ignore_ascii_case("yes");
                continue;
            }
            if k == CLUSTER_MODE_PARAM {
                cluster_emulated = v.eq_ignore_ascii_case("emulated");
                continue;
            }
            if let Err(e) = config.set_initial(k, v) {
                tracing::warn!("ignoring config {k}: {e}");
            }
        }
        if cluster_emulated {
            // What CONFIG GET shows and what the scripts' `no-cluster` flag reads.
            let _ = config.set_initial("cluster-enabled", "yes");
        }
        let now = clock.now_ms();
        let run_id: String = (0..40)
            .map(|_| char::from_digit(rand::random::<u32>() % 16, 16).unwrap_or('0'))
            .collect();
        let acl = super::acl::Acl::new(commands);
        // `requirepass` is the default user's password (Redis
        // `ACLUpdateDefaultUserPassword`), from a flag, the file or `--set`.
        if let Some(p) = config.get("requirepass").filter(|p| !p.is_empty()) {
            acl.set_default_password(p.as_bytes());
        }
        let srv = Shared {
            acl,
            ks: Keyspace::new(startup.databases),
            cmdstats: (0..commands).map(|_| CmdStat::default()).collect(),
            clock,
            config,
            startup,
            clients: Clients::default(),
            stats: Stats::default(),
            started: Instant::now(),
            cron_paused: AtomicBool::new(false),
            started_fast: crate::clock::Instant::now(),
            peaks: ClientPeaks::default(),
            started_unix_ms: now,
            run_id,
            port: AtomicU64::new(0),
            last_save_unix: AtomicU64::new(now / 1000),
            shutdown: tokio::sync::Notify::new(),
            shutdown_nosave: Default::default(),
            pause: Default::default(),
            blocking: Default::default(),
            pubsub: super::pubsub::PubSub::new(),
            tracking: Default::default(),
            monitors: Default::default(),
            normal_obuf: Default::default(),
            client_eviction: Default::default(),
            persist: std::sync::OnceLock::new(),
            test_commands,
            cluster_emulated,
            faults: Default::default(),
            cmdlog: Default::default(),
            slowlog: Default::default(),
            large_requests: Default::default(),
            large_replies: Default::default(),
            latency: Default::default(),
            histograms: super::latency::Histograms::new(commands),
            observe_floor: Default::default(),
            rng: parking_lot::Mutex::new(rand::SeedableRng::from_entropy()),
            resp3_only: false.into(),
            tls: parking_lot::RwLock::new(None),
            tcp_listen: Relisten::default(),
            tls_listen: Relisten::default(),
            seeded: false.into(),
        };
        // A server that is a test double records what it receives from the start.
        srv.faults.set_logging(test_commands);
        srv.observe_floor.refresh(&srv.config);
        srv.normal_obuf.refresh(&srv.config, "normal");
        srv
    }

    /// Restarts the command generator from `seed` (the instance's part of
    /// `script::reseed`, which also reseeds Lua's `math.random`).
    pub fn seed_rng(&self, seed: u64) {
        *self.rng.lock() = rand::SeedableRng::seed_from_u64(seed);
        self.seeded.store(true, Ordering::Relaxed);
    }

    /// Whole seconds since start, the clock of [`ClientPeaks`].
    pub fn uptime_secs(&self) -> u64 {
        self.started_fast.elapsed().as_secs()
    }

    /// The TLS listeners' configuration from the `tls-*` parameters as they are now.
    pub fn tls_config(&self) -> Result<std::sync::Arc<crate::tls::ServerConfig>, String> {
        let get = |n: &str| self.config.get(n).unwrap_or_default();
        crate::tls::server_config(&crate::tls::Settings::from_params(get))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_come_from_the_first_32_bytes() {
        assert_eq!(error_code("WRONGTYPE Operation"), "WRONGTYPE");
        assert_eq!(error_code("nospace"), "ERR");
        let c30 = "C".repeat(30);
        assert_eq!(error_code(&format!("{c30} x")), c30);
        // 31 bytes before the space: with the `-` the space is byte 33, past the window.
        assert_eq!(error_code(&format!("{}C x", c30)), "ERR");
        assert_eq!(error_code(&"A".repeat(8_000_000)), "ERR");
        assert_eq!(error_code(" lead"), "");
    }

    #[test]
    fn client_peaks_cover_the_last_slots() {
        let p = ClientPeaks::default();
        p.record(0, 100, 5);
        p.record(3, 10, 50);
        assert_eq!(p.recent(3), (100, 50));
        assert_eq!(p.recent(7), (100, 50));
        // Second 0 has left the window; second 8 reuses its slot.
        assert_eq!(p.recent(8), (10, 50));
        p.record(8, 1, 1);
        assert_eq!(p.recent(8), (10, 50));
        assert_eq!(p.recent(11), (1, 1));
        assert_eq!(p.recent(100), (0, 0));
    }

    #[test]
    fn errorstats_are_capped_with_an_overflow_bucket() {
        let st = Stats::default();
        for i in 0..1000 {
            st.record_error(&format!("CODE{i} oops"));
        }
        st.record_error("WRONGTYPE Operation against a key");
        st.record_error("CODE1 again");
        let m = st.errors_by_code.lock();
        assert_eq!(m.len(), ERRORSTATS_LIMIT + 2);
        assert_eq!(m[ERRORSTATS_OVERFLOW], 1000 - ERRORSTATS_LIMIT as u64);
        assert_eq!(m["WRONGTYPE"], 1);
        assert_eq!(m["CODE1"], 2);
    }
}
