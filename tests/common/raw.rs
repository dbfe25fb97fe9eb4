//! The exact-bytes async client: write protocol bytes, expect exact bytes back.

use super::HANG_GUARD;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A raw TCP client: write bytes, expect exact bytes back.
pub struct Raw {
    pub stream: TcpStream,
    /// Bytes read but not consumed yet.
    pending: Vec<u8>,
}

/// Printable form of protocol bytes: ASCII as is, the rest escaped.
pub fn show(b: &[u8]) -> String {
    let mut s = String::new();
    for &c in b {
        match c {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s
}

/// Panics with the first difference between `got` and `want` and some context around it.
fn mismatch(got: &[u8], want: &[u8]) -> ! {
    let at = got
        .iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()));
    let from = at.saturating_sub(80);
    panic!(
        "reply differs at byte {at} (got {} bytes, want {}):\n  got:  ...{}\n  want: ...{}",
        got.len(),
        want.len(),
        show(&got[from..(at + 80).min(got.len())]),
        show(&want[from..(at + 80).min(want.len())]),
    );
}

impl Raw {
    pub async fn connect(addr: SocketAddr) -> Raw {
        let stream = tokio::time::timeout(HANG_GUARD, TcpStream::connect(addr))
            .await
            .expect("connect hung")
            .expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Raw {
            stream,
            pending: Vec::new(),
        }
    }

    pub async fn send(&mut self, data: &[u8]) {
        self.stream.write_all(data).await.expect("write");
    }

    /// Reads more bytes into `pending`; false at end of stream.
    async fn fill(&mut self) -> bool {
        let mut buf = vec![0u8; 64 * 1024];
        match tokio::time::timeout(HANG_GUARD, self.stream.read(&mut buf)).await {
            Ok(Ok(0)) => false,
            Ok(Ok(n)) => {
                self.pending.extend_from_slice(&buf[..n]);
                true
            }
            // A reset after the server closed with unread input still means closed.
            Ok(Err(_)) => false,
            Err(_) => panic!(
                "timed out waiting for the server; unread so far: {}",
                show(&self.pending)
            ),
        }
    }

    /// Reads exactly `n` bytes.
    pub async fn read_n(&mut self, n: usize) -> Vec<u8> {
        while self.pending.len() < n {
            if !self.fill().await {
                panic!(
                    "connection closed after {} of {n} bytes: {}",
                    self.pending.len(),
                    show(&self.pending)
                );
            }
        }
        self.pending.drain(..n).collect()
    }

    /// Reads `expected.len()` bytes and compares them, failing as soon as they differ.
    pub async fn expect(&mut self, expected: &[u8]) {
        loop {
            let n = self.pending.len().min(expected.len());
            if self.pending[..n] != expected[..n] {
                mismatch(&self.pending, expected);
            }
            if n == expected.len() {
                self.pending.drain(..n);
                return;
            }
            if !self.fill().await {
                mismatch(&self.pending, expected);
            }
        }
    }

    /// Reads until the server closes the connection; returns everything unread.
    pub async fn read_to_close(&mut self) -> Vec<u8> {
        while self.fill().await {}
        std::mem::take(&mut self.pending)
    }

    /// Expects exactly `expected` and then the server closing the connection.
    pub async fn expect_then_closed(&mut self, expected: &[u8]) {
        let got = self.read_to_close().await;
        if got != expected {
            mismatch(&got, expected);
        }
    }

    /// Sends `data` and expects exactly `expected` back.
    pub async fn roundtrip(&mut self, data: &[u8], expected: &[u8]) {
        self.send(data).await;
        self.expect(expected).await;
    }
}

/// A RESP multibulk frame for `args`.
pub fn frame(args: &[&[u8]]) -> Vec<u8> {
    respite::proxy::resp::command(args).to_vec()
}

/// RESP2 bulk string reply bytes.
pub fn bulk(b: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", b.len()).into_bytes();
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
    out
}
