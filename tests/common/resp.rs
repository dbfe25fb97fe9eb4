//! Sync clients that keep each reply's exact shape: [`Conn`] decodes replies into
//! [`Frame`]s (RESP2 and RESP3 distinctions kept), [`Wire`] returns their exact bytes.

use super::PATIENCE;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

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

impl Frame {
    /// True for an error reply starting with `prefix`.
    pub fn is_error(&self, prefix: &str) -> bool {
        matches!(self, Frame::Error(e) if e.starts_with(prefix))
    }
}

pub struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Conn {
    /// [`Conn::connect`] to a loopback port, panicking if it cannot.
    pub fn open(port: u16) -> Conn {
        Conn::connect(port).unwrap_or_else(|e| panic!("connect to port {port}: {e}"))
    }

    pub fn connect(port: u16) -> std::io::Result<Conn> {
        let s = TcpStream::connect(("127.0.0.1", port))?;
        // A hang guard, not a performance bound.
        s.set_read_timeout(Some(PATIENCE))?;
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
    /// The socket, for writing raw bytes (whatever was read ahead is dropped).
    pub fn into_stream(self) -> TcpStream {
        self.w
    }

    pub fn send_line(&mut self, line: &str) -> std::io::Result<()> {
        let args: Vec<Vec<u8>> = line
            .split_whitespace()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        self.send(&args)
    }

    pub fn send(&mut self, args: &[Vec<u8>]) -> std::io::Result<()> {
        self.w.write_all(&respite::proxy::resp::command(args))
    }

    /// Sends several commands in one write (a pipeline the server reads in one batch),
    /// without reading the replies.
    pub fn send_all(&mut self, cmds: &[&[&str]]) -> std::io::Result<()> {
        let mut bytes = Vec::new();
        for args in cmds {
            bytes.extend_from_slice(&respite::proxy::resp::command(args));
        }
        self.w.write_all(&bytes)
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

/// A sync raw connection: commands sent without waiting, each reply returned as the
/// exact bytes the server wrote (framed by respite's own RESP scanner), or the stream read
/// until the peer closes.
pub struct Wire {
    pub s: TcpStream,
    buf: Vec<u8>,
}

impl Wire {
    /// Connects to `addr`; reads wait up to [`PATIENCE`].
    pub fn connect(addr: SocketAddr) -> Wire {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(PATIENCE)).expect("timeout");
        s.set_nodelay(true).expect("nodelay");
        Wire { s, buf: Vec::new() }
    }

    pub fn connect_port(port: u16) -> Wire {
        Wire::connect(SocketAddr::from(([127, 0, 0, 1], port)))
    }

    /// A connected socket made elsewhere (say, with a small receive buffer).
    pub fn from_stream(s: TcpStream) -> Wire {
        s.set_read_timeout(Some(PATIENCE)).expect("timeout");
        s.set_nodelay(true).expect("nodelay");
        Wire { s, buf: Vec::new() }
    }

    /// How long a read waits.
    pub fn set_timeout(&mut self, t: Duration) {
        self.s.set_read_timeout(Some(t)).expect("timeout");
    }

    /// Sends one command as a RESP array.
    pub fn send(&mut self, args: &[&str]) {
        self.write(&respite::proxy::resp::command(args));
    }

    /// Sends a command given as words (split on white space).
    pub fn send_line(&mut self, line: &str) {
        self.send(&line.split_whitespace().collect::<Vec<_>>());
    }

    /// Writes raw bytes (several commands in one write, a partial frame, …).
    pub fn write(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("write");
    }

    /// The next reply's exact bytes.
    pub fn frame_bytes(&mut self) -> Vec<u8> {
        loop {
            if let Some(n) = respite::proxy::resp::frame_len(&self.buf).expect("a valid frame") {
                return self.buf.drain(..n).collect();
            }
            let mut chunk = vec![0u8; 1 << 20];
            let n = self.s.read(&mut chunk).expect("a reply");
            assert!(n > 0, "the connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// The next reply, CRLF shown as spaces.
    pub fn frame(&mut self) -> String {
        String::from_utf8_lossy(&self.frame_bytes()).replace("\r\n", " ")
    }

    /// The next reply without its final CRLF, other CRLFs shown as spaces (for a simple
    /// reply: its line).
    pub fn line(&mut self) -> String {
        self.frame().trim_end().to_string()
    }

    /// Sends a command given as words and returns its reply's exact bytes as text.
    pub fn cmd(&mut self, line: &str) -> String {
        self.send_line(line);
        String::from_utf8(self.frame_bytes()).expect("a UTF-8 reply")
    }

    /// Sends a command and returns its reply as [`Wire::frame`] does.
    pub fn call(&mut self, args: &[&str]) -> String {
        self.send(args);
        self.frame()
    }

    /// True once the peer closed the connection (a reset counts) within the read
    /// timeout, reading any frames before that into the returned text.
    pub fn closed_after(&mut self) -> (bool, String) {
        let mut seen = String::from_utf8_lossy(&self.buf).into_owned();
        self.buf.clear();
        let mut chunk = [0u8; 4096];
        loop {
            match self.s.read(&mut chunk) {
                Ok(0) => return (true, seen),
                Ok(n) => seen.push_str(&String::from_utf8_lossy(&chunk[..n])),
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    return (false, seen)
                }
                Err(_) => return (true, seen),
            }
        }
    }

    /// Like [`Wire::closed_after`], waiting at most `t` for more.
    pub fn closed_after_timeout(&mut self, t: Duration) -> (bool, String) {
        self.set_timeout(t);
        let r = self.closed_after();
        self.set_timeout(PATIENCE);
        r
    }
}
