//! Test support shared by the differential suites: a minimal synchronous RESP2/RESP3
//! client that keeps every reply's exact shape, and a real `redis-server` child process.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A decoded reply, keeping the distinctions that matter when comparing servers.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    NullBulk,
    NullArray,
    Null,
    Array(Vec<Frame>),
    Map(Vec<(Frame, Frame)>),
    Set(Vec<Frame>),
    Double(f64),
    Bool(bool),
    Verbatim(String, Vec<u8>),
    BigNumber(String),
    Push(Vec<Frame>),
}

impl std::fmt::Display for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Frame::Simple(s) => write!(f, "+{s}"),
            Frame::Error(s) => write!(f, "-{s}"),
            Frame::Int(i) => write!(f, ":{i}"),
            Frame::Bulk(b) => write!(f, "{:?}", String::from_utf8_lossy(b)),
            Frame::NullBulk => write!(f, "(nil bulk)"),
            Frame::NullArray => write!(f, "(nil array)"),
            Frame::Null => write!(f, "(null)"),
            Frame::Array(v) | Frame::Set(v) | Frame::Push(v) => {
                let tag = match self {
                    Frame::Set(_) => "~",
                    Frame::Push(_) => ">",
                    _ => "*",
                };
                write!(f, "{tag}[")?;
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{x}")?;
                }
                write!(f, "]")
            }
            Frame::Map(v) => {
                write!(f, "%{{")?;
                for (i, (k, x)) in v.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{k}: {x}")?;
                }
                write!(f, "}}")
            }
            Frame::Double(d) => write!(f, ",{d}"),
            Frame::Bool(b) => write!(f, "#{b}"),
            Frame::Verbatim(t, b) => write!(f, "={t}:{:?}", String::from_utf8_lossy(b)),
            Frame::BigNumber(s) => write!(f, "({s})"),
        }
    }
}

pub struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Conn {
    pub fn connect(port: u16) -> std::io::Result<Conn> {
        let s = TcpStream::connect(("127.0.0.1", port))?;
        // A hang guard, not a performance bound: debug builds on 2 loaded cores (the
        // differential suites run side by side) can take seconds on a big case.
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        s.set_nodelay(true)?;
        Ok(Conn {
            r: BufReader::new(s.try_clone()?),
            w: s,
        })
    }

    /// How long `read` waits for a reply (default 30 s).
    pub fn set_timeout(&mut self, t: Duration) {
        let _ = self.w.set_read_timeout(Some(t));
    }

    /// Sends a command line (split on whitespace) without reading the reply.
    pub fn send_line(&mut self, line: &str) -> std::io::Result<()> {
        let args: Vec<Vec<u8>> = line
            .split_whitespace()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        self.send(&args)
    }

    pub fn send(&mut self, args: &[Vec<u8>]) -> std::io::Result<()> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.w.write_all(&out)
    }

    pub fn call(&mut self, args: &[Vec<u8>]) -> std::io::Result<Frame> {
        self.send(args)?;
        self.read()
    }

    pub fn cmd(&mut self, line: &str) -> Frame {
        let args: Vec<Vec<u8>> = line
            .split_whitespace()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        let port = self.w.peer_addr().map(|a| a.port()).unwrap_or(0);
        self.call(&args)
            .unwrap_or_else(|e| panic!("{line:?} to port {port}: {e}"))
    }

    fn line(&mut self) -> std::io::Result<String> {
        let mut buf = Vec::new();
        self.r.read_until(b'\n', &mut buf)?;
        if buf.len() < 2 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "eof",
            ));
        }
        buf.truncate(buf.len() - 2);
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    fn bytes(&mut self, n: usize) -> std::io::Result<Vec<u8>> {
        let mut b = vec![0; n + 2];
        self.r.read_exact(&mut b)?;
        b.truncate(n);
        Ok(b)
    }

    pub fn read(&mut self) -> std::io::Result<Frame> {
        let l = self.line()?;
        let (t, rest) = l.split_at(1);
        let num = |s: &str| s.parse::<i64>().unwrap_or(-1);
        Ok(match t {
            "+" => Frame::Simple(rest.into()),
            "-" => Frame::Error(rest.into()),
            ":" => Frame::Int(num(rest)),
            "$" if num(rest) < 0 => Frame::NullBulk,
            "$" => Frame::Bulk(self.bytes(num(rest) as usize)?),
            "*" if num(rest) < 0 => Frame::NullArray,
            "*" | "~" | ">" => {
                let n = num(rest);
                let mut v = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    v.push(self.read()?);
                }
                match t {
                    "~" => Frame::Set(v),
                    ">" => Frame::Push(v),
                    _ => Frame::Array(v),
                }
            }
            "%" | "|" => {
                let n = num(rest);
                let mut v = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let k = self.read()?;
                    v.push((k, self.read()?));
                }
                if t == "|" {
                    // Attributes precede the real reply; keep only the reply.
                    return self.read();
                }
                Frame::Map(v)
            }
            "_" => Frame::Null,
            "," => Frame::Double(match rest {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                _ => rest.parse().unwrap_or(f64::NAN),
            }),
            "#" => Frame::Bool(rest == "t"),
            "=" => {
                let b = self.bytes(num(rest) as usize)?;
                let (fmt, data) = b.split_at(4.min(b.len()));
                Frame::Verbatim(
                    String::from_utf8_lossy(&fmt[..3.min(fmt.len())]).into(),
                    data.to_vec(),
                )
            }
            "(" => Frame::BigNumber(rest.into()),
            _ => Frame::Error(format!("CLIENT-SIDE: unknown reply type {l:?}")),
        })
    }
}

/// A private redis-server process (Debian's), killed on drop.
pub struct RedisServer {
    child: Child,
    pub port: u16,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl RedisServer {
    /// Starts `redis-server` (or `$REDIS_SERVER`). Panics with a clear message if missing:
    /// the differential suites are the oracle and must not silently pass.
    pub fn start() -> RedisServer {
        let bin = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let port = free_port();
        let child = Command::new(&bin)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "no", "--daemonize", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {bin} ({e}): install Debian's redis-server (see .ci/run)")
            });
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut c) = Conn::connect(port) {
                if c.cmd("PING") == Frame::Simple("PONG".into()) {
                    break;
                }
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not start on port {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        RedisServer { child, port }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The keyspace events `script` produces on the server at `port` with
/// `notify-keyspace-events` set to `flags` (`event key` lines), read by a PSUBSCRIBE
/// connection up to a sentinel publication; for comparing a command's events with Redis's.
pub fn keyevents(port: u16, flags: &str, script: &[&str]) -> Vec<String> {
    let mut sub = Conn::connect(port).expect("connect");
    let mut c = Conn::connect(port).expect("connect");
    c.cmd("FLUSHALL");
    c.cmd(&format!("CONFIG SET notify-keyspace-events {flags}"));
    sub.cmd("PSUBSCRIBE __keyevent@0__:*");
    sub.cmd("SUBSCRIBE end");
    for line in script {
        c.cmd(line);
    }
    c.cmd("PUBLISH end x");
    c.cmd("CONFIG SET notify-keyspace-events \"\"");
    let mut out = Vec::new();
    loop {
        let Frame::Array(parts) = sub.read().expect("message") else {
            panic!("not a message");
        };
        let text: Vec<String> = parts
            .iter()
            .map(|p| match p {
                Frame::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                other => format!("{other:?}"),
            })
            .collect();
        if text.first().map(String::as_str) == Some("message") {
            break;
        }
        out.push(format!("{} {}", text[2], text[3]));
    }
    out
}

/// xorshift64*: deterministic across platforms and crate versions, so a failing seed
/// replays. Suites add their own draws in `impl Rng` blocks.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// WATCH on `k` by `a`, `cmd` by `b`, then a transaction on `a`: true if EXEC ran (so `cmd`
/// did not touch `k` as far as WATCH is concerned).
pub fn watched_exec_runs(a: &mut Conn, b: &mut Conn, cmd: &str) -> bool {
    assert_eq!(a.cmd("WATCH k"), Frame::Simple("OK".into()));
    b.cmd(cmd);
    a.cmd("MULTI");
    a.cmd("GET x");
    match a.cmd("EXEC") {
        Frame::NullArray | Frame::Null => false,
        Frame::Array(_) => true,
        other => panic!("EXEC: {other:?}"),
    }
}
