//! One node as every connection to it sees it: its spec, counters and last failure
//! ([`NodeInfo`]), and how to open a prepared connection to it ([`connect`]).
//!
//! A node with several addresses (a primary and its replicas) is connected to at the
//! address its failover monitor ([`super::failover`]) last found to be the primary, and
//! only if that address still answers `ROLE` as a master on the new connection: a
//! connection is never made to a replica. [`Follow`] tells a connection when the primary
//! moved, so that it reconnects.
//!
//! It sits below both `node.rs` (the shared and dedicated connections) and `hub.rs` (the
//! subscriber connection, which a `Node` owns), so neither has to import the other.

use super::config::{NodeSpec, ProxyConfig};
use super::resp;
use super::stats::Histogram;
use bytes::BytesMut;
use parking_lot::Mutex;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};

type TlsIo = tokio_rustls::client::TlsStream<TcpStream>;

/// A connection to a node: plain (`redis://`) or TLS (`rediss://`). Which one is decided
/// once, at connect; every read and write after it only matches on it.
pub enum NodeStream {
    Plain(TcpStream),
    Tls(Box<TlsIo>),
}

/// The halves of a [`NodeStream`] (a TLS stream's share its session, through tokio's
/// split).
pub enum NodeRead {
    Plain(OwnedReadHalf),
    Tls(tokio::io::ReadHalf<Box<TlsIo>>),
}

pub enum NodeWrite {
    Plain(OwnedWriteHalf),
    Tls(tokio::io::WriteHalf<Box<TlsIo>>),
}

impl NodeStream {
    pub fn into_split(self) -> (NodeRead, NodeWrite) {
        match self {
            NodeStream::Plain(s) => {
                let (r, w) = s.into_split();
                (NodeRead::Plain(r), NodeWrite::Plain(w))
            }
            NodeStream::Tls(s) => {
                let (r, w) = tokio::io::split(s);
                (NodeRead::Tls(r), NodeWrite::Tls(w))
            }
        }
    }
}

macro_rules! delegate_read {
    ($t:ty, $($v:ident),+) => {
        impl AsyncRead for $t {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$v(s) => Pin::new(s).poll_read(cx, buf),)+
                }
            }
        }
    };
}

/// Writes are flushed by the callers that wait for a reply ([`send`]): a TLS record may
/// stay in the session after `write_all` while the socket is full.
macro_rules! delegate_write {
    ($t:ty, $($v:ident),+) => {
        impl AsyncWrite for $t {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    $(Self::$v(s) => Pin::new(s).poll_write(cx, buf),)+
                }
            }
            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$v(s) => Pin::new(s).poll_flush(cx),)+
                }
            }
            fn poll_shutdown(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
            ) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$v(s) => Pin::new(s).poll_shutdown(cx),)+
                }
            }
        }
    };
}

delegate_read!(NodeStream, Plain, Tls);
delegate_read!(NodeRead, Plain, Tls);
delegate_write!(NodeStream, Plain, Tls);
delegate_write!(NodeWrite, Plain, Tls);

/// `write_all` then `flush`: what a caller that then waits for the node's reply needs (a
/// plain socket's flush does nothing).
pub async fn send<W: AsyncWrite + Unpin>(wr: &mut W, bytes: &[u8]) -> io::Result<()> {
    wr.write_all(bytes).await?;
    wr.flush().await
}

/// What connection tasks and clients share about a node.
pub struct NodeInfo {
    pub spec: NodeSpec,
    pub(super) connect_timeout: Duration,
    pub(super) command_timeout: Duration,
    pub requests: AtomicU64,
    /// Failed requests: error replies (`-ERR…`, counted in `error_replies` too) and
    /// requests failed by the proxy (node down, connection broken, timed out).
    pub errors: AtomicU64,
    /// Error replies from the node on shared connections.
    pub error_replies: AtomicU64,
    /// Round trips on shared connections (write of the batch → its reply).
    pub latency: Histogram,
    /// Connection failures (each one is followed by a reconnect attempt).
    pub failures: AtomicU64,
    /// Shared connections established again after a failure.
    pub reconnects: AtomicU64,
    /// Requests written on shared connections whose replies have not come yet.
    pub in_flight: AtomicU64,
    last_error: Mutex<String>,
    /// Bumped whenever a connection to the node fails: idle dedicated connections made
    /// before are not reused.
    pub(super) generation: AtomicU64,
    /// A `rediss://` node's TLS client configuration.
    tls: Option<Arc<crate::tls::ClientConfig>>,
    /// Which address is the primary (a single-address node: always the first).
    pub(super) primary: watch::Sender<Primary>,
    /// Why there is no primary, while [`Primary::None`].
    pub(super) no_primary: Mutex<String>,
    /// Times the primary moved to another address.
    pub failovers: AtomicU64,
    /// Wakes the failover monitor to probe now (a `-READONLY` reply, a replica found).
    pub(super) suspect: Notify,
}

/// Which of a node's addresses is its primary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Primary {
    /// Not probed yet: connections wait for the first probe.
    Unknown,
    At(usize),
    /// No address answered as a primary: requests fail at once.
    None,
}

/// Watches a node's primary from the address a connection was made to.
pub(super) struct Follow {
    /// `None` for a single-address node: its primary never moves.
    rx: Option<watch::Receiver<Primary>>,
    at: Primary,
}

impl Follow {
    /// False for a single-address node (its `moved` never resolves: no need to poll it).
    pub(super) fn can_move(&self) -> bool {
        self.rx.is_some()
    }

    /// True when the primary is no longer the one this connection was made for.
    pub(super) fn has_moved(&self) -> bool {
        self.rx.as_ref().is_some_and(|rx| *rx.borrow() != self.at)
    }

    /// Resolves once the primary is no longer the one this connection was made for (at
    /// once if it already moved). Cancel-safe.
    pub(super) async fn moved(&mut self) {
        let Some(rx) = &mut self.rx else {
            return std::future::pending().await;
        };
        loop {
            if *rx.borrow_and_update() != self.at {
                return;
            }
            if rx.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }
}

impl NodeInfo {
    pub fn new(spec: NodeSpec, cfg: &ProxyConfig) -> NodeInfo {
        let spec_has_replicas = !spec.alternates.is_empty();
        NodeInfo {
            spec,
            connect_timeout: cfg.connect_timeout,
            command_timeout: cfg.command_timeout,
            requests: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            error_replies: AtomicU64::new(0),
            latency: Histogram::default(),
            failures: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            last_error: Mutex::new(String::new()),
            generation: AtomicU64::new(0),
            tls: cfg.node_tls.clone(),
            primary: watch::Sender::new(if spec_has_replicas {
                Primary::Unknown
            } else {
                Primary::At(0)
            }),
            no_primary: Mutex::new(String::new()),
            failovers: AtomicU64::new(0),
            suspect: Notify::new(),
        }
    }

    /// True when the node lists more than one address (it has a failover monitor).
    pub fn has_replicas(&self) -> bool {
        !self.spec.alternates.is_empty()
    }

    /// The address (`host:port`) of the current primary, `none` or `unknown`, for INFO.
    pub fn primary_addr(&self) -> String {
        match *self.primary.borrow() {
            Primary::At(i) => self
                .spec
                .addresses()
                .nth(i)
                .map_or_else(String::new, NodeSpec::addr),
            Primary::None => "none".into(),
            Primary::Unknown => "unknown".into(),
        }
    }

    /// A reply that says this address no longer takes writes (demoted, or not ready):
    /// the failover monitor should look again.
    pub(super) fn check_reply(&self, frame: &[u8]) {
        const SUSPECT: [&[u8]; 3] = [b"-READONLY", b"-LOADING", b"-MASTERDOWN"];
        if self.has_replicas() && SUSPECT.iter().any(|p| frame.starts_with(p)) {
            self.suspect.notify_one();
        }
    }

    /// A [`Follow`] from the primary as it is now.
    pub(super) fn follow(&self) -> Follow {
        if !self.has_replicas() {
            return Follow {
                rx: None,
                at: Primary::At(0),
            };
        }
        let mut rx = self.primary.subscribe();
        let at = *rx.borrow_and_update();
        Follow { rx: Some(rx), at }
    }

    /// The address to connect to now and a [`Follow`] made from the same look; waits (up
    /// to twice the connect timeout) for the first probe of a node with replicas.
    async fn target(&self) -> Result<(&NodeSpec, Follow), String> {
        if !self.has_replicas() {
            return Ok((&self.spec, self.follow()));
        }
        let mut rx = self.primary.subscribe();
        let first = rx.wait_for(|p| *p != Primary::Unknown);
        // The first probe connects and asks, each within the connect timeout.
        let at = match tokio::time::timeout(2 * self.connect_timeout, first).await {
            Ok(Ok(p)) => *p,
            _ => return Err("no primary found yet".into()),
        };
        match at {
            Primary::At(i) => {
                let spec = self.spec.addresses().nth(i).ok_or("no such address")?;
                Ok((spec, Follow { rx: Some(rx), at }))
            }
            _ => Err(self.no_primary.lock().clone()),
        }
    }

    /// The error every request for this node gets while it is down.
    pub fn unavailable(&self, reason: &str) -> String {
        format!("ERR node {} is unavailable: {reason}", self.spec.id)
    }

    /// Why the last connection failed ("" if none has); never holds the URL.
    pub fn last_error(&self) -> String {
        self.last_error.lock().clone()
    }

    pub(super) fn mark_failed(&self, reason: &str) {
        // A lost connection may be a lost primary: have the monitor look now (it probes
        // at most every 100 ms however many connections fail). With no primary known, its
        // own backoff paces it.
        if self.has_replicas() && matches!(*self.primary.borrow(), Primary::At(_)) {
            self.suspect.notify_one();
        }
        self.failures.fetch_add(1, Ordering::Relaxed);
        *self.last_error.lock() = reason.to_string();
        self.generation.fetch_add(1, Ordering::Relaxed);
    }
}

/// Connects to the node's primary and prepares the connection: AUTH, HELLO 3 for RESP3,
/// SELECT db, and (for a node with replicas) ROLE, which must say master. Returns the
/// stream, any bytes read past the handshake replies, and the [`Follow`] that tells when
/// the primary moves. Errors never hold the URL.
pub(super) async fn connect(
    info: &NodeInfo,
    resp3: bool,
) -> Result<(NodeStream, BytesMut, Follow), String> {
    let (spec, follow) = info.target().await?;
    let (stream, buf) = connect_to(info, spec, resp3, info.has_replicas()).await?;
    Ok((stream, buf, follow))
}

/// Connects to one address of a node and prepares the connection as [`connect`] says
/// (`role`: check that it is a master).
pub(super) async fn connect_to(
    info: &NodeInfo,
    spec: &NodeSpec,
    resp3: bool,
    role: bool,
) -> Result<(NodeStream, BytesMut), String> {
    let open = async {
        let tcp = TcpStream::connect(spec.addr())
            .await
            .map_err(|e| e.to_string())?;
        let _ = tcp.set_nodelay(true);
        if !spec.tls {
            return Ok(NodeStream::Plain(tcp));
        }
        // The node's certificate is checked against the CA for its host name, which is
        // also sent as SNI.
        let cfg = info
            .tls
            .clone()
            .ok_or_else(|| "no TLS configuration for a rediss:// node".to_string())?;
        let name = crate::tls::server_name(&spec.host)?;
        let tls = crate::tls::TlsConnector::from(cfg)
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake: {e}"))?;
        Ok::<_, String>(NodeStream::Tls(Box::new(tls)))
    };
    let stream = tokio::time::timeout(info.connect_timeout, open)
        .await
        .map_err(|_| "connect timed out".to_string())??;
    let mut hello: Vec<u8> = Vec::new();
    let mut expect = 0;
    if let Some(pw) = &spec.password {
        match &spec.user {
            Some(u) => resp::encode_command(&mut hello, &["AUTH", u, pw]),
            None => resp::encode_command(&mut hello, &["AUTH", pw]),
        }
        expect += 1;
    }
    if resp3 {
        resp::encode_command(&mut hello, &["HELLO", "3"]);
        expect += 1;
    }
    if spec.db != 0 {
        resp::encode_command(&mut hello, &["SELECT", &spec.db.to_string()]);
        expect += 1;
    }
    if role {
        resp::encode_command(&mut hello, &["ROLE"]);
        expect += 1;
    }
    let mut stream = stream;
    let mut buf = BytesMut::with_capacity(16 * 1024);
    if expect == 0 {
        return Ok((stream, buf));
    }
    let handshake = async {
        send(&mut stream, &hello).await.map_err(|e| e.to_string())?;
        let mut got = 0;
        while got < expect {
            match resp::frame_len(&buf) {
                Ok(Some(n)) => {
                    let f = buf.split_to(n).freeze();
                    if f.first() == Some(&b'-') || f.first() == Some(&b'!') {
                        let text = String::from_utf8_lossy(&f[1..]).trim_end().to_string();
                        return Err(format!("handshake refused: {text}"));
                    }
                    got += 1;
                    if role && got == expect {
                        let r = role_of(&f);
                        if r != "master" {
                            // The monitor's view is stale: have it look again.
                            info.suspect.notify_one();
                            return Err(format!("{} is not a primary (role {r})", spec.addr()));
                        }
                    }
                    continue;
                }
                Ok(None) => {}
                Err(e) => return Err(format!("bad reply: {}", e.0)),
            }
            match stream.read_buf(&mut buf).await {
                Ok(0) => return Err("connection closed by the node".to_string()),
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(())
    };
    tokio::time::timeout(info.command_timeout, handshake)
        .await
        .map_err(|_| "handshake timed out".to_string())??;
    Ok((stream, buf))
}

/// The first element of a `ROLE` reply (`master`, `slave`, `sentinel`), lowercase; `?` when
/// the reply is not one.
fn role_of(frame: &bytes::Bytes) -> String {
    let first = match resp::decode(frame) {
        Ok(resp::Frame::Array(kids)) => kids.into_iter().next(),
        _ => None,
    };
    match first.as_ref().map(resp::decode) {
        Some(Ok(resp::Frame::Bulk(b) | resp::Frame::Status(b))) => {
            String::from_utf8_lossy(&b).to_ascii_lowercase()
        }
        _ => "?".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles() {
        let master = bytes::Bytes::from_static(b"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n");
        assert_eq!(role_of(&master), "master");
        let replica = bytes::Bytes::from_static(
            b"*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n$9\r\nconnected\r\n:14\r\n",
        );
        assert_eq!(role_of(&replica), "slave");
        assert_eq!(role_of(&bytes::Bytes::from_static(b":1\r\n")), "?");
    }
}
