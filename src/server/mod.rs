//! The network edge: the listener and the per-connection loops (pipelined read → dispatch →
//! batched write). What a running instance holds lives in [`crate::instance`], below the
//! commands; this module sits on top of both.

pub mod conn;

use crate::clock::Clock;
use crate::config::Config;
use crate::instance::notify;
use crate::instance::state::Shared;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket};

/// The listening sockets: plain (`port`) and TLS (`tls-port`), as Redis serves both at once.
pub struct Listeners {
    pub tcp: Vec<TcpListener>,
    pub tls: Vec<TcpListener>,
}

/// Binds every configured address on `port` (port 0 picks one free port, shared by all of
/// them) and, when `tls-port` is set, on that port for TLS clients.
pub fn bind(config: &Config) -> std::io::Result<Listeners> {
    let tcp = bind_port(config, config.port)?;
    let tls = match tls_port(config)? {
        0 => Vec::new(),
        port => bind_port(config, port)?,
    };
    Ok(Listeners { tcp, tls })
}

/// The start-up `tls-port` (0: no TLS listener, as in Redis).
fn tls_port(config: &Config) -> std::io::Result<u16> {
    let set = config.params.iter().rev().find(|(k, _)| k == "tls-port");
    match set {
        None => Ok(0),
        Some((_, v)) => v
            .parse()
            .map_err(|_| std::io::Error::other(format!("invalid tls-port '{v}'"))),
    }
}

fn bind_port(config: &Config, mut port: u16) -> std::io::Result<Vec<TcpListener>> {
    let mut out = Vec::new();
    for host in &config.bind {
        let host = host.trim_start_matches('-');
        let ip: std::net::IpAddr = host
            .parse()
            .map_err(|_| std::io::Error::other(format!("invalid bind address '{host}'")))?;
        let addr = SocketAddr::new(ip, port);
        let sock = if addr.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        sock.set_reuseaddr(true)?;
        sock.bind(addr)?;
        let l = sock.listen(511)?;
        port = l.local_addr()?.port();
        out.push(l);
    }
    Ok(out)
}

/// A running server's handle inside its runtime.
pub struct Running {
    pub shared: Arc<Shared>,
    pub addrs: Vec<SocketAddr>,
    /// The TLS listeners' addresses (none without `tls-port`).
    pub tls_addrs: Vec<SocketAddr>,
}

/// Starts accepting on the listeners and the active-expiry task; returns immediately.
pub fn start(config: Config, clock: Clock, listeners: Listeners) -> std::io::Result<Running> {
    start_with(config, clock, listeners, |_| Ok(()))
}

/// [`start`], running `prepare` on the new state after any durable load and before the
/// first connection is accepted (a test server's restart hands its keyspace over there).
pub fn start_with(
    config: Config,
    clock: Clock,
    listeners: Listeners,
    prepare: impl FnOnce(&Arc<Shared>) -> std::io::Result<()>,
) -> std::io::Result<Running> {
    let redb = config.redb;
    let shared = Arc::new(crate::cmd::new_shared(config, clock));
    // Redis exits when its start-up users do not load.
    crate::cmd::acl::load_at_startup(&shared).map_err(std::io::Error::other)?;
    if !listeners.tls.is_empty() {
        // As Redis, a TLS configuration that does not load stops the start.
        let cfg = shared
            .tls_config()
            .map_err(|e| std::io::Error::other(format!("Failed to configure TLS: {e}")))?;
        *shared.tls.write() = Some(cfg);
    }
    if redb {
        open_durable(&shared)?;
    }
    prepare(&shared)?;
    notify::install(&shared);
    crate::instance::tracking::install(&shared);
    let addrs: Vec<SocketAddr> = listeners
        .tcp
        .iter()
        .filter_map(|l| l.local_addr().ok())
        .collect();
    let tls_addrs: Vec<SocketAddr> = listeners
        .tls
        .iter()
        .filter_map(|l| l.local_addr().ok())
        .collect();
    if let Some(a) = addrs.first() {
        shared
            .port
            .store(a.port() as u64, std::sync::atomic::Ordering::Relaxed);
        let _ = shared.config.set_initial("port", &a.port().to_string());
    }
    relisten(shared.clone(), listeners.tcp, false);
    relisten(shared.clone(), listeners.tls, true);
    tokio::spawn(active_expiry(shared.clone()));
    tokio::spawn(eviction_timer(shared.clone()));
    Ok(Running {
        shared,
        addrs,
        tls_addrs,
    })
}

/// `--engine redb`: opens `<dir>/respite.redb`, loads it into the keyspace, then makes the
/// keyspace durable (every write from now on goes through the journal to the committer).
fn open_durable(srv: &Arc<Shared>) -> std::io::Result<()> {
    use crate::persist::{wal, LoadOptions, Persistence, Store};
    let dir = srv.config.get("dir").unwrap_or_default();
    let dir = if dir.is_empty() { ".".to_string() } else { dir };
    let dir = std::path::Path::new(&dir);
    std::fs::create_dir_all(dir)?;
    let err = |e: crate::persist::PersistError| std::io::Error::other(e.to_string());
    let store = Store::open(dir).map_err(err)?;
    let now = srv.clock.now_ms();
    let mut opts = LoadOptions::new(now);
    opts.zset_max_entries = srv.config.get_i64("zset-max-listpack-entries").max(0) as usize;
    opts.zset_max_value = srv.config.get_i64("zset-max-listpack-value").max(0) as usize;
    // Batches logged but not yet checkpointed (a crash, or a failed final checkpoint).
    let started = std::time::Instant::now();
    let rec = wal::recover(&store, &opts).map_err(err)?;
    if rec.records > 0 {
        tracing::info!(
            "replayed {} write-ahead log records ({} changes) in {:.3}s",
            rec.records,
            rec.changes,
            started.elapsed().as_secs_f64()
        );
    }
    let log = wal::Wal::create(dir, rec.next_rec).map_err(err)?;
    let stats = {
        let mut access = srv.ks.exclusive(0, now);
        let stats = store
            .load(&opts, |db, key, value, expire_at| {
                if db < srv.ks.databases() {
                    access.set_in(db, &key, value, expire_at);
                }
            })
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let saved =
            crate::cmd::server::saved_access::load(&store).map_err(std::io::Error::other)?;
        crate::cmd::server::saved_access::apply(srv, &saved, &mut access);
        stats
    };
    tracing::info!(
        "loaded {} keys ({} expired while down) from {} in {:.3}s",
        stats.keys,
        stats.expired,
        store.path().display(),
        stats.elapsed.as_secs_f64()
    );
    // The FUNCTION libraries too, before any client can FCALL (Redis loads them with the
    // keys from its RDB file).
    let codes = store.functions().map_err(err)?;
    if !codes.is_empty() {
        let n = crate::script::functions::load_saved(srv, &codes).map_err(|e| {
            std::io::Error::other(format!("a saved FUNCTION library failed to load: {e}"))
        })?;
        tracing::info!("loaded {n} FUNCTION libraries");
    }
    let p = Persistence::start(store, log, Persistence::fsync_mode(&srv.config))?;
    srv.ks.set_journal(p.journal.clone());
    let _ = srv.persist.set(p);
    Ok(())
}

/// Plain clients: accepted and served until CONFIG SET port replaces the listener.
async fn accept_loop(
    srv: Arc<Shared>,
    listener: TcpListener,
    gen: u64,
    mut stop: tokio::sync::watch::Receiver<u64>,
) {
    use std::sync::atomic::Ordering;
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            // Replaced by CONFIG SET port: the listener closes with this loop.
            _ = stop.changed() => return,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if srv.tcp_listen.generation.load(Ordering::Acquire) != gen {
            return;
        }
        let _ = stream.set_nodelay(true);
        tokio::spawn(conn::serve(srv.clone(), stream, peer));
    }
}

/// Runs one kind of listener (plain or TLS): those bound at start, at once (so they are
/// among the runtime's first tasks, as the accept loops were before CONFIG SET could
/// re-bind, and a stopping instance drops them early), then whichever CONFIG SET port /
/// tls-port binds (each set replaces the previous one, whose accept loops end: their
/// sockets close).
fn relisten(srv: Arc<Shared>, first: Vec<TcpListener>, tls: bool) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let kind = if tls {
        &srv.tls_listen
    } else {
        &srv.tcp_listen
    };
    let _ = kind.tx.set(tx);
    let handshaking = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (generation, _) = tokio::sync::watch::channel(0u64);
    let spawn_all =
        move |ls: Vec<TcpListener>, gen: u64, stop: &tokio::sync::watch::Sender<u64>| {
            for l in ls {
                let stop = stop.subscribe();
                if tls {
                    let h = handshaking.clone();
                    tokio::spawn(accept_tls_loop(srv.clone(), l, h, gen, stop));
                } else {
                    tokio::spawn(accept_loop(srv.clone(), l, gen, stop));
                }
            }
        };
    spawn_all(first, 0, &generation);
    tokio::spawn(async move {
        while let Some((gen, next)) = rx.recv().await {
            generation.send_replace(gen);
            let mut ls = Vec::new();
            for l in next {
                match TcpListener::from_std(l) {
                    Ok(l) => ls.push(l),
                    Err(e) => tracing::warn!("listener: {e}"),
                }
            }
            spawn_all(ls, gen, &generation);
        }
    });
}

/// Accepts TLS clients: each handshake runs on its own task (bounded by
/// [`crate::tls::HANDSHAKE_TIMEOUT`]), then the connection is served as a plain one is.
/// At most `maxclients` handshakes are in progress at once (a client connects only once its
/// handshake is done), so clients that never finish theirs cannot pile up; past it a new
/// connection is closed at once.
async fn accept_tls_loop(
    srv: Arc<Shared>,
    listener: TcpListener,
    handshaking: Arc<std::sync::atomic::AtomicUsize>,
    gen: u64,
    mut stop: tokio::sync::watch::Receiver<u64>,
) {
    use std::sync::atomic::Ordering;
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            // Replaced by CONFIG SET tls-port: the listener closes with this loop.
            _ = stop.changed() => return,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if srv.tls_listen.generation.load(Ordering::Acquire) != gen {
            return;
        }
        let Some(cfg) = srv.tls.read().clone() else {
            continue;
        };
        let max = srv.config.get_i64("maxclients").max(1) as usize;
        if handshaking.load(Ordering::Relaxed) >= max {
            srv.stats
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let _ = stream.set_nodelay(true);
        handshaking.fetch_add(1, Ordering::Relaxed);
        let (srv, handshaking) = (srv.clone(), handshaking.clone());
        tokio::spawn(async move {
            let laddr = stream.local_addr().unwrap_or(peer);
            #[cfg(unix)]
            let fd = {
                use std::os::unix::io::AsRawFd;
                stream.as_raw_fd() as i64
            };
            #[cfg(not(unix))]
            let fd = -1;
            let acceptor = crate::tls::TlsAcceptor::from(cfg);
            let done =
                tokio::time::timeout(crate::tls::HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await;
            handshaking.fetch_sub(1, Ordering::Relaxed);
            match done {
                Ok(Ok(tls)) => {
                    let stream = crate::tls::Tls::new(tls);
                    conn::serve_on(srv, stream, peer, laddr, fd).await;
                }
                Ok(Err(e)) => tracing::debug!("TLS handshake with {peer} failed: {e}"),
                Err(_) => tracing::debug!("TLS handshake with {peer} timed out"),
            }
        });
    }
}

/// INFO's instantaneous rates, sampled on the same 100 ms beat as Redis's `serverCron`.
fn sample_rates(srv: &Shared) {
    let s = &srv.stats;
    let get = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    // Milliseconds since start, plus one: 0 means "no sample yet".
    let now_ms = srv.started.elapsed().as_millis() as u64 + 1;
    s.inst.sample(
        now_ms,
        [
            get(&s.total_commands),
            get(&s.net_input_bytes),
            get(&s.net_output_bytes),
        ],
    );
}

/// Redis's `evictionTimeProc`: started when a command's eviction ran out of its time budget
/// still over `maxmemory`, it evicts a budget's worth per turn, letting the connections run
/// in between, until memory is under the limit or nothing is left to evict.
async fn eviction_timer(srv: Arc<Shared>) {
    use crate::cmd::refusals::{eviction_cycle, Cycle};
    loop {
        srv.ks.eviction_timer.started().await;
        loop {
            match eviction_cycle(&srv) {
                Cycle::Again => tokio::task::yield_now().await,
                Cycle::Later => tokio::time::sleep(Duration::from_millis(1)).await,
                Cycle::Done => break,
            }
        }
    }
}

/// Active expiry: every 100 ms remove keys whose deadline passed (bounded per shard so a
/// burst of expirations cannot stall the workers for long); and client eviction's round.
async fn active_expiry(srv: Arc<Shared>) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if srv.cron_paused.load(std::sync::atomic::Ordering::Relaxed) {
            continue;
        }
        srv.clock.resync();
        let now = srv.clock.now_ms();
        let started = std::time::Instant::now();
        let (_, ready) = srv.ks.sweep_ready(now, 200);
        // The latency monitor's `expire-cycle` event, as Redis times `activeExpireCycle`.
        let threshold = crate::config_num!(srv.config, "latency-monitor-threshold");
        let took = started.elapsed();
        srv.stats.expire_cycle.add(took.as_micros() as u64);
        let ms = took.as_millis() as u64;
        if threshold > 0 && ms >= threshold as u64 {
            srv.latency.add("expire-cycle", (now / 1000) as i64, ms);
        }
        if !ready.is_empty() {
            crate::cmd::blocking::serve_ready(&srv, ready);
        }
        // Client-side caching: the table's limit, and broadcasts of keys that expired.
        srv.tracking.cron(&srv);
        // Client eviction also covers clients that grow without reading (their output).
        crate::cmd::client::evict_clients(&srv);
        // Pub/sub soft output limits also expire while nothing is published.
        srv.pubsub.enforce_idle_limits();
        sample_rates(&srv);
    }
}
