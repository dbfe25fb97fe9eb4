//! One node as every connection to it sees it: its spec, counters and last failure
//! ([`NodeInfo`]), and how to open a prepared connection to it ([`connect`]).
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
    connect_timeout: Duration,
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
}

impl NodeInfo {
    pub fn new(spec: NodeSpec, cfg: &ProxyConfig) -> NodeInfo {
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
        self.failures.fetch_add(1, Ordering::Relaxed);
        *self.last_error.lock() = reason.to_string();
        self.generation.fetch_add(1, Ordering::Relaxed);
    }
}

/// Connects and prepares a connection: AUTH, HELLO 3 for RESP3, SELECT db. Returns the
/// stream and any bytes read past the handshake replies. Errors never hold the URL.
pub(super) async fn connect(
    info: &NodeInfo,
    resp3: bool,
) -> Result<(NodeStream, BytesMut), String> {
    let spec = &info.spec;
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
                    let f = buf.split_to(n);
                    if f.first() == Some(&b'-') || f.first() == Some(&b'!') {
                        let text = String::from_utf8_lossy(&f[1..]).trim_end().to_string();
                        return Err(format!("handshake refused: {text}"));
                    }
                    got += 1;
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
