//! The sharding proxy (DESIGN.md §7): `respite proxy` lets existing clients use a fleet of
//! independent Redis/Valkey primaries as one server. Every key goes to the node that the
//! placement contract (§8, [`crate::types::placement`]) names for its hash tag.
//!
//! - [`config`]: nodes (stable id + URL, passwords redacted), placement, proxy settings;
//!   [`config_file`]: the `--config FILE` format.
//! - [`resp`]: node reply frames (length without copying, shallow decoding for merges).
//! - [`node`]: shared pipelined connections and dedicated ones, reconnects, health checks.
//! - [`failover`]: a node listed with replicas follows its primary.
//! - [`route`]: which node(s) serve a command (pure).
//! - [`scan`]: the fleet-wide SCAN cursor.
//! - [`client`], [`local`]: a client connection; commands answered by the proxy.
//! - [`cluster`]: CLUSTER for cluster-mode clients (the proxy as one node owning every slot).
//! - [`pubsub`], [`hub`]: a client's subscriptions; each node's one subscriber connection,
//!   multiplexing every client's subscriptions.
//! - [`stats`]: per-node and per-command latency histograms for INFO and `/metrics`;
//!   [`metrics`]: the Prometheus endpoint (`--metrics-port`).
//! - [`fleet`]: the swappable snapshot requests are routed by (node table, members,
//!   placement); [`online`]: growing/shrinking it while clients write, `PROXY RELOAD`.
//! - [`failover`]: following a node's primary among its addresses.

pub mod client;
pub mod cluster;
pub mod config;
pub mod config_file;
pub mod failover;
pub mod fleet;
pub mod hub;
pub mod link;
pub mod local;
pub mod metrics;
pub mod node;
pub mod online;
pub mod pubsub;
pub mod rebalance;
pub mod resp;
pub mod route;
pub mod scan;
pub mod session;
pub mod stats;
pub mod sync_client;

use bytes::Bytes;
use config::ProxyConfig;
use fleet::Fleet;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicU64};
use std::sync::Arc;
use std::time::Instant;
use tokio::net::TcpListener;

/// Script bodies remembered for the EVALSHA → NOSCRIPT → EVAL retry (bounded).
const MAX_SCRIPTS: usize = 10_000;

/// State shared by every client of one proxy.
pub struct Proxy {
    pub cfg: ProxyConfig,
    /// What requests are routed by; a client loads it once per read batch
    /// ([`session::Session::fleet`]) and an online move swaps it.
    pub fleet: arc_swap::ArcSwap<Fleet>,
    pub online: online::Online,
    /// A move found in the state file, carried on once the proxy runs ([`online::resume`]).
    restart_to: Mutex<Option<Vec<config::NodeSpec>>>,
    /// sha1 (lowercase hex) → body, from EVAL and SCRIPT LOAD.
    pub scripts: Mutex<HashMap<String, Bytes>>,
    pub next_client_id: AtomicU64,
    pub connected: AtomicU64,
    pub total_connections: AtomicU64,
    /// Connections refused by `maxclients`.
    pub rejected_connections: AtomicU64,
    pub commands: AtomicU64,
    /// Per command: arrival → reply ready (INFO latencystats, `/metrics`).
    pub command_latency: stats::CommandLatency,
    pub port: AtomicU16,
    pub started: Instant,
    /// The users clients authenticate as: `default` with `requirepass`, plus those of
    /// `aclfile`. Only authentication: commands are checked by the nodes, as the
    /// proxy's node credentials allow.
    pub users: crate::instance::acl::Acl,
}

impl Proxy {
    /// Starts the node connections (needs a tokio runtime).
    pub fn new(mut cfg: ProxyConfig) -> io::Result<Proxy> {
        cfg.validate().map_err(io::Error::other)?;
        cfg.prepare_tls().map_err(io::Error::other)?;
        let users = users(&cfg).map_err(io::Error::other)?;
        let (fleet, restart_to) = online::boot(&cfg).map_err(io::Error::other)?;
        Ok(Proxy {
            fleet: arc_swap::ArcSwap::from_pointee(fleet),
            online: online::Online::default(),
            restart_to: Mutex::new(restart_to),
            cfg,
            scripts: Mutex::new(HashMap::new()),
            next_client_id: AtomicU64::new(0),
            connected: AtomicU64::new(0),
            total_connections: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            commands: AtomicU64::new(0),
            command_latency: stats::CommandLatency::default(),
            port: AtomicU16::new(0),
            started: Instant::now(),
            users,
        })
    }

    /// The fleet now (for INFO and the like; a client routes by its batch's snapshot).
    pub fn fleet(&self) -> Arc<Fleet> {
        self.fleet.load_full()
    }

    pub fn remember_script(&self, body: &Bytes) {
        let sha = crate::script::sha1::sha1_hex(body);
        let mut scripts = self.scripts.lock();
        if scripts.len() < MAX_SCRIPTS || scripts.contains_key(&sha) {
            scripts.insert(sha, body.clone());
        }
    }
}

/// The proxy's users: `requirepass` for `default`, then the ACL file (which may redefine
/// `default`), read as Redis reads its `aclfile`.
fn users(cfg: &ProxyConfig) -> Result<crate::instance::acl::Acl, String> {
    let cat = crate::cmd::acl::catalog();
    let acl = crate::instance::acl::Acl::new(cat.cmds.len());
    acl.set_catalog(cat);
    if let Some(p) = &cfg.requirepass {
        acl.set_default_password(p.as_bytes());
    }
    if let Some(path) = &cfg.aclfile {
        acl.load_file(path)?;
    }
    Ok(acl)
}

/// Binds every configured address on `port` (0: one ephemeral port, reused for the others).
async fn bind(cfg: &ProxyConfig, mut port: u16) -> io::Result<Vec<TcpListener>> {
    let mut out = Vec::new();
    for addr in &cfg.bind {
        let host = if addr.contains(':') {
            format!("[{addr}]")
        } else {
            addr.clone()
        };
        let l = TcpListener::bind(format!("{host}:{port}")).await?;
        port = l.local_addr()?.port();
        out.push(l);
    }
    if out.is_empty() {
        return Err(io::Error::other(
            "the proxy needs at least one bind address",
        ));
    }
    Ok(out)
}

/// Where a started proxy listens.
#[derive(Clone, Copy, Debug)]
pub struct Addrs {
    /// The first client address.
    pub clients: SocketAddr,
    /// `/metrics`, when `metrics_port` is set.
    pub metrics: Option<SocketAddr>,
}

/// Starts the proxy on the current runtime; returns its addresses.
async fn start(cfg: ProxyConfig) -> io::Result<(Addrs, Arc<Proxy>)> {
    let listeners = bind(&cfg, cfg.port).await?;
    let addr = listeners[0].local_addr()?;
    let metrics = match cfg.metrics_port {
        Some(port) => bind(&cfg, port).await?,
        None => Vec::new(),
    };
    let addrs = Addrs {
        clients: addr,
        metrics: metrics.first().map(TcpListener::local_addr).transpose()?,
    };
    let tls = if cfg.tls_port != 0 {
        let server = crate::tls::server_config(&cfg.tls)
            .map_err(|e| io::Error::other(format!("Failed to configure TLS: {e}")))?;
        Some((bind(&cfg, cfg.tls_port).await?, server))
    } else {
        None
    };
    let proxy = Arc::new(Proxy::new(cfg)?);
    proxy
        .port
        .store(addr.port(), std::sync::atomic::Ordering::Relaxed);
    for l in metrics {
        tokio::spawn(metrics::serve(proxy.clone(), l));
    }
    let restart_to = proxy.restart_to.lock().take();
    online::resume(&proxy, restart_to);
    for l in listeners {
        let p = proxy.clone();
        tokio::spawn(async move {
            loop {
                match l.accept().await {
                    Ok((stream, _)) => {
                        tokio::spawn(client::serve(p.clone(), stream));
                    }
                    Err(e) => {
                        // Out of descriptors and the like: back off instead of spinning.
                        tracing::warn!("proxy accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                }
            }
        });
    }
    if let Some((listeners, server)) = tls {
        let handshaking = Arc::new(AtomicU64::new(0));
        for l in listeners {
            tokio::spawn(accept_tls(
                proxy.clone(),
                l,
                server.clone(),
                handshaking.clone(),
            ));
        }
    }
    Ok((addrs, proxy))
}

/// TLS clients: each handshake on its own task, bounded in time and, in number, by
/// `maxclients` (past it a new connection is closed at once); then served as plain ones.
async fn accept_tls(
    p: Arc<Proxy>,
    l: TcpListener,
    server: Arc<crate::tls::ServerConfig>,
    handshaking: Arc<AtomicU64>,
) {
    use std::sync::atomic::Ordering::Relaxed;
    let acceptor = crate::tls::TlsAcceptor::from(server);
    loop {
        let stream = match l.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("proxy accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        if handshaking.load(Relaxed) >= p.cfg.maxclients as u64 {
            p.rejected_connections.fetch_add(1, Relaxed);
            continue;
        }
        let _ = stream.set_nodelay(true);
        handshaking.fetch_add(1, Relaxed);
        let (p, acceptor, handshaking) = (p.clone(), acceptor.clone(), handshaking.clone());
        tokio::spawn(async move {
            let done =
                tokio::time::timeout(crate::tls::HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await;
            handshaking.fetch_sub(1, Relaxed);
            if let Ok(Ok(tls)) = done {
                client::serve_tls(p, tls).await;
            }
        });
    }
}

/// Runs `respite proxy` until SIGINT/SIGTERM; with port 0 prints the bound port on stdout.
pub fn run(cfg: ProxyConfig) -> io::Result<()> {
    let rt = match cfg.threads {
        1 => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
        0 => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?,
        n => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .enable_all()
            .build()?,
    };
    rt.block_on(async move {
        let print_port = cfg.port == 0;
        // Handlers before the port is printed: a harness may signal as soon as it reads it
        // (SIGHUP's default action would end the process).
        #[cfg(unix)]
        let (mut term, mut hup) = {
            use tokio::signal::unix::{signal, SignalKind};
            (
                signal(SignalKind::terminate())?,
                signal(SignalKind::hangup())?,
            )
        };
        let (Addrs { clients: addr, .. }, proxy) = start(cfg).await?;
        if print_port {
            use std::io::Write;
            let mut out = std::io::stdout();
            let _ = writeln!(out, "{}", addr.port());
            let _ = out.flush();
        }
        tracing::info!("respite proxy ready on port {}", addr.port());
        #[cfg(unix)]
        {
            loop {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => break,
                    _ = term.recv() => break,
                    // SIGHUP: the node list is read again (as PROXY RELOAD).
                    _ = hup.recv() => match online::reload(&proxy) {
                        Ok(s) => tracing::info!("SIGHUP: {s}"),
                        Err(e) => tracing::warn!("SIGHUP: {e}"),
                    },
                }
            }
        }
        #[cfg(not(unix))]
        let _ = (tokio::signal::ctrl_c().await, &proxy);
        tracing::info!("proxy shutting down");
        Ok(())
    })
}

/// An in-process proxy for tests and embedding: its own thread and runtime; stops on drop.
pub struct ProxyServer {
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    _service: crate::background::Background,
}

impl ProxyServer {
    pub fn start(cfg: ProxyConfig) -> io::Result<ProxyServer> {
        let (addrs, service) =
            crate::background::Background::spawn("respite-proxy", || start(cfg), drop)?;
        Ok(ProxyServer {
            addr: addrs.clients,
            metrics_addr: addrs.metrics,
            _service: service,
        })
    }

    /// Where `/metrics` is served (with `metrics_port` set).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
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
}
