//! Networking: the listener, per-connection loops and the state they share.

pub mod blocking;
pub mod clients;
pub mod conn;
pub mod notify;
pub mod pause;
pub mod pubsub;
pub mod session;
pub mod state;

use crate::clock::Clock;
use crate::config::Config;
use state::Shared;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket};

/// Binds every configured address (port 0 picks one free port, shared by all of them).
pub fn bind(config: &Config) -> std::io::Result<Vec<TcpListener>> {
    let mut out = Vec::new();
    let mut port = config.port;
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
}

/// Starts accepting on the listeners and the active-expiry task; returns immediately.
pub fn start(config: Config, clock: Clock, listeners: Vec<TcpListener>) -> Running {
    let shared = Arc::new(Shared::new(config, clock));
    notify::install(&shared);
    let addrs: Vec<SocketAddr> = listeners
        .iter()
        .filter_map(|l| l.local_addr().ok())
        .collect();
    if let Some(a) = addrs.first() {
        shared
            .port
            .store(a.port() as u64, std::sync::atomic::Ordering::Relaxed);
        let _ = shared.config.set_initial("port", &a.port().to_string());
    }
    for l in listeners {
        tokio::spawn(accept_loop(shared.clone(), l));
    }
    tokio::spawn(active_expiry(shared.clone()));
    Running { shared, addrs }
}

async fn accept_loop(srv: Arc<Shared>, listener: TcpListener) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(conn::serve(srv.clone(), stream, peer));
    }
}

/// Active expiry: every 100 ms remove keys whose deadline passed (bounded per shard so a
/// burst of expirations cannot stall the workers for long).
async fn active_expiry(srv: Arc<Shared>) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        srv.clock.resync();
        let now = srv.clock.now_ms();
        let (_, ready) = srv.ks.sweep_ready(now, 200);
        if !ready.is_empty() {
            crate::cmd::blocking::serve_ready(&srv, ready);
        }
    }
}
