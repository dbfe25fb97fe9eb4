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
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What connection tasks and clients share about a node.
pub struct NodeInfo {
    pub spec: NodeSpec,
    connect_timeout: Duration,
    pub(super) command_timeout: Duration,
    pub requests: AtomicU64,
    pub errors: AtomicU64,
    /// Round trips on shared connections (write of the batch → its reply).
    pub latency: Histogram,
    /// Connection failures (each one is followed by a reconnect attempt).
    pub failures: AtomicU64,
    last_error: Mutex<String>,
    /// Bumped whenever a connection to the node fails: idle dedicated connections made
    /// before are not reused.
    pub(super) generation: AtomicU64,
}

impl NodeInfo {
    pub fn new(spec: NodeSpec, cfg: &ProxyConfig) -> NodeInfo {
        NodeInfo {
            spec,
            connect_timeout: cfg.connect_timeout,
            command_timeout: cfg.command_timeout,
            requests: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            latency: Histogram::default(),
            failures: AtomicU64::new(0),
            last_error: Mutex::new(String::new()),
            generation: AtomicU64::new(0),
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
pub(super) async fn connect(info: &NodeInfo, resp3: bool) -> Result<(TcpStream, BytesMut), String> {
    let spec = &info.spec;
    let stream = tokio::time::timeout(info.connect_timeout, TcpStream::connect(spec.addr()))
        .await
        .map_err(|_| "connect timed out".to_string())?
        .map_err(|e| e.to_string())?;
    let _ = stream.set_nodelay(true);
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
        stream.write_all(&hello).await.map_err(|e| e.to_string())?;
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
