//! A minimal blocking RESP2 client over `std::net::TcpStream`, for offline tools
//! (`respite rebalance`) that talk to one node at a time and want explicit pipelining
//! without an async runtime: queue commands with [`SyncConn::send`], then [`SyncConn::read`]
//! their replies in order.
//!
//! Every error names the node by id and redacted URL, never by password.

use super::config::NodeSpec;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// One reply, RESP2 shapes only (we never send HELLO 3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resp {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    /// Nil bulk (`$-1`) and nil array (`*-1`).
    Nil,
    Array(Vec<Resp>),
}

impl Resp {
    /// The reply as an `Err` when it is an error reply.
    pub fn ok(self) -> Result<Resp, String> {
        match self {
            Resp::Error(e) => Err(e),
            r => Ok(r),
        }
    }
}

/// Replies nest only a few levels in what we send (SCAN is 2); a deeper reply is garbage and
/// must not overflow our stack.
const MAX_DEPTH: usize = 8;
/// Redis's own proto-max-bulk-len ceiling; a larger length means a broken stream, and we must
/// not try to allocate it.
const MAX_BULK: usize = 512 * 1024 * 1024;
const MAX_ARRAY: usize = 64 * 1024 * 1024;

pub struct SyncConn {
    reader: BufReader<TcpStream>,
    writer: BufWriter<TcpStream>,
    /// `id (redacted url)`, prefixed to every error.
    name: String,
    /// Set once the stream failed: replies would be out of step with requests afterwards,
    /// so the connection is unusable.
    broken: bool,
}

impl SyncConn {
    /// Connects, then AUTHs and SELECTs as the node's URL says. A node listed with
    /// replicas is reached at the address whose `ROLE` says master: never a replica.
    pub fn connect(node: &NodeSpec, timeout: Duration) -> Result<SyncConn, String> {
        if node.alternates.is_empty() {
            return Self::connect_one(node, timeout);
        }
        let mut why = Vec::new();
        for (i, addr) in node.addresses().enumerate() {
            let n = i + 1;
            let mut c = match Self::connect_one(addr, timeout) {
                Ok(c) => c,
                Err(e) => {
                    why.push(format!("#{n} {e}"));
                    continue;
                }
            };
            // ROLE's first element: `master`, `slave` or `sentinel`.
            match c.call(&[b"ROLE"]) {
                Ok(Resp::Array(kids)) => match kids.first() {
                    Some(Resp::Bulk(r)) if r == b"master" => return Ok(c),
                    Some(Resp::Bulk(r)) => {
                        why.push(format!("#{n} is a {}", String::from_utf8_lossy(r)))
                    }
                    _ => why.push(format!("#{n} gave an odd ROLE reply")),
                },
                Ok(Resp::Error(e)) => why.push(format!("#{n} ROLE failed: {e}")),
                Ok(_) => why.push(format!("#{n} gave an odd ROLE reply")),
                Err(e) => why.push(format!("#{n} {e}")),
            }
        }
        Err(format!(
            "node {}: no primary among its {} addresses ({})",
            node.id,
            why.len(),
            why.join("; ")
        ))
    }

    fn connect_one(node: &NodeSpec, timeout: Duration) -> Result<SyncConn, String> {
        let name = format!("node {} ({})", node.id, node.redacted_url());
        if node.tls {
            return Err(format!("{name}: this tool does not speak TLS (rediss://)"));
        }
        let fail = |e: io::Error| format!("{name}: {e}");
        let addrs: Vec<_> = node.addr().to_socket_addrs().map_err(fail)?.collect();
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
        let mut stream = None;
        for a in addrs {
            match TcpStream::connect_timeout(&a, timeout) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = e,
            }
        }
        let stream = stream.ok_or_else(|| format!("{name}: cannot connect: {last}"))?;
        // Generous I/O timeout: DUMP/RESTORE of a big key can take a while, but a hung node
        // must not hang the tool forever.
        let io_timeout = Some(timeout.max(Duration::from_secs(30)));
        stream.set_read_timeout(io_timeout).map_err(fail)?;
        stream.set_write_timeout(io_timeout).map_err(fail)?;
        let _ = stream.set_nodelay(true);
        let reader = BufReader::with_capacity(64 * 1024, stream.try_clone().map_err(fail)?);
        let mut conn = SyncConn {
            reader,
            writer: BufWriter::with_capacity(64 * 1024, stream),
            name,
            broken: false,
        };
        if let Some(pw) = &node.password {
            let reply = match &node.user {
                Some(u) => conn.call(&[b"AUTH", u.as_bytes(), pw.as_bytes()])?,
                None => conn.call(&[b"AUTH", pw.as_bytes()])?,
            };
            // The server's error never contains the password; ours doesn't either.
            if let Resp::Error(e) = reply {
                return Err(format!("{}: AUTH failed: {e}", conn.name));
            }
        }
        if node.db != 0 {
            let db = node.db.to_string();
            if let Resp::Error(e) = conn.call(&[b"SELECT", db.as_bytes()])? {
                return Err(format!("{}: SELECT {db} failed: {e}", conn.name));
            }
        }
        Ok(conn)
    }

    /// `node ID (redis://…)`, for error messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Queues one command (buffered; [`SyncConn::read`] flushes).
    pub fn send(&mut self, args: &[&[u8]]) -> Result<(), String> {
        if self.broken {
            return Err(format!("{}: connection lost earlier", self.name));
        }
        let r = write_command(&mut self.writer, args);
        r.map_err(|e| self.io_err(e))
    }

    /// Flushes queued commands and reads the next reply.
    pub fn read(&mut self) -> Result<Resp, String> {
        if self.broken {
            return Err(format!("{}: connection lost earlier", self.name));
        }
        if let Err(e) = self.writer.flush() {
            return Err(self.io_err(e));
        }
        match read_reply(&mut self.reader, 0) {
            Ok(r) => Ok(r),
            Err(e) => Err(self.io_err(e)),
        }
    }

    /// Sends one command and reads its reply.
    pub fn call(&mut self, args: &[&[u8]]) -> Result<Resp, String> {
        self.send(args)?;
        self.read()
    }

    fn io_err(&mut self, e: io::Error) -> String {
        self.broken = true;
        format!("{}: {e}", self.name)
    }
}

/// RESP array of bulk strings.
fn write_command(w: &mut impl Write, args: &[&[u8]]) -> io::Result<()> {
    write!(w, "*{}\r\n", args.len())?;
    for a in args {
        write!(w, "${}\r\n", a.len())?;
        w.write_all(a)?;
        w.write_all(b"\r\n")?;
    }
    Ok(())
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("protocol error: {msg}"))
}

fn read_line(r: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    // Status and error lines are short; cap them so a garbage stream cannot grow this forever.
    let n = r.take(64 * 1024).read_until(b'\n', &mut line)?;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed by the node",
        ));
    }
    if !line.ends_with(b"\r\n") {
        return Err(bad("line without CRLF"));
    }
    line.truncate(line.len() - 2);
    Ok(line)
}

fn parse_int(b: &[u8]) -> io::Result<i64> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("bad integer"))
}

/// Length prefix: `Ok(None)` for -1 (nil), an error for anything else negative or too large.
fn parse_len(b: &[u8], max: usize) -> io::Result<Option<usize>> {
    match parse_int(b)? {
        -1 => Ok(None),
        n => usize::try_from(n)
            .ok()
            .filter(|&n| n <= max)
            .map(Some)
            .ok_or_else(|| bad("bad length")),
    }
}

pub(crate) fn read_reply(r: &mut impl BufRead, depth: usize) -> io::Result<Resp> {
    if depth > MAX_DEPTH {
        return Err(bad("reply nested too deeply"));
    }
    let line = read_line(r)?;
    let (&kind, rest) = line.split_first().ok_or_else(|| bad("empty line"))?;
    let text = || String::from_utf8_lossy(rest).into_owned();
    Ok(match kind {
        b'+' => Resp::Status(text()),
        b'-' => Resp::Error(text()),
        b':' => Resp::Int(parse_int(rest)?),
        b'$' => match parse_len(rest, MAX_BULK)? {
            None => Resp::Nil,
            Some(n) => {
                let mut buf = vec![0; n + 2];
                r.read_exact(&mut buf)?;
                if !buf.ends_with(b"\r\n") {
                    return Err(bad("bulk string without CRLF"));
                }
                buf.truncate(n);
                Resp::Bulk(buf)
            }
        },
        b'*' => match parse_len(rest, MAX_ARRAY)? {
            None => Resp::Nil,
            Some(n) => {
                // Don't trust the count for preallocation: elements arrive one by one.
                let mut items = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    items.push(read_reply(r, depth + 1)?);
                }
                Resp::Array(items)
            }
        },
        _ => return Err(bad("unknown reply type")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> io::Result<Resp> {
        read_reply(&mut io::Cursor::new(bytes), 0)
    }

    #[test]
    fn replies() {
        assert_eq!(parse(b"+OK\r\n").unwrap(), Resp::Status("OK".into()));
        assert_eq!(parse(b"-ERR x\r\n").unwrap(), Resp::Error("ERR x".into()));
        assert_eq!(parse(b":-2\r\n").unwrap(), Resp::Int(-2));
        assert_eq!(parse(b"$-1\r\n").unwrap(), Resp::Nil);
        assert_eq!(parse(b"*-1\r\n").unwrap(), Resp::Nil);
        assert_eq!(
            parse(b"$5\r\na\r\nbc\r\n").unwrap(),
            Resp::Bulk(b"a\r\nbc".to_vec())
        );
        assert_eq!(
            parse(b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\nk\r\n").unwrap(),
            Resp::Array(vec![
                Resp::Bulk(b"0".to_vec()),
                Resp::Array(vec![Resp::Bulk(b"k".to_vec())])
            ])
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for g in [
            &b""[..],
            b"+OK",
            b"?x\r\n",
            b"\r\n",
            b":x\r\n",
            b"$-2\r\n",
            b"$99999999999999999999\r\n",
            b"$3\r\nab\r\n",
            b"$2\r\nabcd",
            b"*2\r\n:1\r\n",
            b"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n",
        ] {
            assert!(parse(g).is_err(), "{:?}", String::from_utf8_lossy(g));
        }
    }

    #[test]
    fn commands_are_arrays_of_bulk_strings() {
        let mut out = Vec::new();
        write_command(&mut out, &[b"SET", b"k", b""]).unwrap();
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }
}
