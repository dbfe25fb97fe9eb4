//! Helpers shared by the integration tests: starting servers, redis-rs connections under
//! RESP2/RESP3, and a raw TCP client for byte-exact protocol checks.
//!
//! Each test binary includes this with `mod common;` and uses only part of it.
#![allow(dead_code)]

use respite::TestServer;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long any single wait may take before the test is declared hung. This is a guard
/// against deadlocks, not a performance threshold.
pub const HANG_GUARD: Duration = Duration::from_secs(10);

/// The protocol a redis-rs connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Resp2,
    Resp3,
}

/// Runs an `async fn(Proto)` scenario once per protocol: `both_protocols!(my_test);` makes
/// the tests `my_test::resp2` and `my_test::resp3` (needs `#[macro_use] mod common;`).
#[allow(unused_macros)]
macro_rules! both_protocols {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn resp2() {
                super::$name(crate::common::Proto::Resp2).await
            }
            #[tokio::test]
            async fn resp3() {
                super::$name(crate::common::Proto::Resp3).await
            }
        }
    )*};
}

/// A server with a manual clock: time moves only through `advance_ms`.
pub fn manual_server() -> TestServer {
    TestServer::builder()
        .manual_clock()
        .start()
        .expect("start test server")
}

/// A server on the system clock.
pub fn real_server() -> TestServer {
    TestServer::start().expect("start test server")
}

/// The redis-rs URL for `server` under `proto`.
pub fn url(server: &TestServer, proto: Proto) -> String {
    url_for_port(server.port(), proto)
}

pub fn url_for_port(port: u16, proto: Proto) -> String {
    match proto {
        Proto::Resp2 => format!("redis://127.0.0.1:{port}/"),
        Proto::Resp3 => format!("redis://127.0.0.1:{port}/?protocol=resp3"),
    }
}

/// A new multiplexed redis-rs connection (one TCP connection). Without redis-rs's own
/// timeouts (1 s to connect, 500 ms per reply): a debug server on a loaded 2-core CI box
/// can take longer than that to answer, and `HANG_GUARD` already catches real hangs.
pub async fn connect(server: &TestServer, proto: Proto) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(url(server, proto)).expect("valid url");
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(None)
        .set_response_timeout(None);
    tokio::time::timeout(
        HANG_GUARD,
        client.get_multiplexed_async_connection_with_config(&config),
    )
    .await
    .expect("connect hung")
    .expect("connect")
}

/// Runs `cmd` and converts the reply, panicking with the command on error.
pub async fn q<T: redis::FromRedisValue>(
    con: &mut impl redis::aio::ConnectionLike,
    cmd: &redis::Cmd,
) -> T {
    match tokio::time::timeout(HANG_GUARD, cmd.query_async::<T>(con)).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => panic!(
            "{:?} failed: {e}",
            String::from_utf8_lossy(&cmd.get_packed_command())
        ),
        Err(_) => panic!(
            "{:?} hung",
            String::from_utf8_lossy(&cmd.get_packed_command())
        ),
    }
}

/// Builds a command from string-ish arguments: `c(&["SET", "k", "v"])`.
pub fn c(args: &[&str]) -> redis::Cmd {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd
}

/// `field:value` from an INFO text (any section), parsed as an integer.
pub fn info_field(info: &str, field: &str) -> Option<i64> {
    info.lines().find_map(|l| {
        let (k, v) = l.trim_end_matches('\r').split_once(':')?;
        if k == field {
            v.parse().ok()
        } else {
            None
        }
    })
}

/// Where raw protocol tests connect: an in-process respite, or (when the environment
/// variable `RESPITE_ORACLE` is `host:port`) a real redis-server, to check that the
/// expected bytes in the tests are Redis's. `RESPITE_ORACLE_AUTH` names a redis-server
/// started with `--requirepass secret` for the authentication tests.
pub struct Target {
    pub addr: SocketAddr,
    /// `None` when the target is an external oracle.
    pub server: Option<TestServer>,
}

pub const ORACLE_PASSWORD: &str = "secret";

fn oracle_addr(var: &str) -> Option<SocketAddr> {
    let v = std::env::var(var).ok()?;
    Some(
        v.parse()
            .unwrap_or_else(|_| panic!("{var} must be host:port")),
    )
}

impl Target {
    pub fn start() -> Target {
        if let Some(addr) = oracle_addr("RESPITE_ORACLE") {
            return Target { addr, server: None };
        }
        let server = real_server();
        Target {
            addr: server.addr(),
            server: Some(server),
        }
    }

    /// A server requiring `ORACLE_PASSWORD`.
    pub fn start_with_password() -> Target {
        if let Some(addr) = oracle_addr("RESPITE_ORACLE_AUTH") {
            return Target { addr, server: None };
        }
        let server = TestServer::builder()
            .password(ORACLE_PASSWORD)
            .start()
            .expect("start test server");
        Target {
            addr: server.addr(),
            server: Some(server),
        }
    }

    pub fn is_oracle(&self) -> bool {
        self.server.is_none()
    }

    pub async fn raw(&self) -> Raw {
        Raw::connect(self.addr).await
    }
}

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

/// A key name no earlier run has used (tests may run against a long-lived oracle).
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}:{}:{nanos}:{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A RESP multibulk frame for `args`.
pub fn frame(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// RESP2 bulk string reply bytes.
pub fn bulk(b: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", b.len()).into_bytes();
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
    out
}

/// The body of `lua/<name>` (the scenario scripts shipped with respite).
pub fn lua_source(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("lua")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `lua/<name>` as a redis-rs `Script` (EVALSHA, then SCRIPT LOAD and EVALSHA on NOSCRIPT).
pub fn lua_script(name: &str) -> redis::Script {
    redis::Script::new(&lua_source(name))
}

/// `n` separate connections to `server`.
pub async fn connections(
    server: &TestServer,
    proto: Proto,
    n: usize,
) -> Vec<redis::aio::MultiplexedConnection> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(connect(server, proto).await);
    }
    out
}

/// A connection for commands that block (`connect` has no response timeout either).
pub async fn blocking_conn(server: &TestServer, proto: Proto) -> redis::aio::MultiplexedConnection {
    connect(server, proto).await
}

pub async fn until_blocked(con: &mut redis::aio::MultiplexedConnection, n: i64) {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        let info: String = q(con, &c(&["INFO", "clients"])).await;
        if info_field(&info, "blocked_clients") == Some(n) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never reached {n} blocked clients"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// S6: a checkpoint of ten fields, some binary, for revision `rev`.
pub fn checkpoint(rev: u8) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = (0..7)
        .map(|i| {
            (
                format!("f{i}").into_bytes(),
                format!("v{i}-r{rev}").into_bytes(),
            )
        })
        .collect();
    out.push((b"blob".to_vec(), vec![0x00, 0xff, 0x80, rev, b'\r', b'\n']));
    out.push((vec![0xfe, 0x00, b'k'], vec![0x80; 3]));
    out.push((b"empty".to_vec(), Vec::new()));
    out
}
