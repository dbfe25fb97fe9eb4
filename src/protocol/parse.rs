//! Request parser: RESP multibulk arrays of bulk strings and inline commands, with Redis's
//! limits and exact protocol error texts (networking.c: processMultibulkBuffer /
//! processInlineBuffer). Arguments are zero-copy slices of the read buffer.

use crate::num::parse_i64;
use bytes::{Buf, Bytes, BytesMut};

/// Longest inline request / header line Redis accepts before a complete line arrives.
pub const INLINE_MAX: usize = 64 * 1024;

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `proto-max-bulk-len` (default 512 MB).
    pub max_bulk_len: i64,
    /// Unauthenticated clients get Redis's tighter limits.
    pub authenticated: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            authenticated: true,
        }
    }
}

#[derive(Debug, PartialEq)]
pub enum Parsed {
    /// A complete command (possibly empty: Redis ignores empty lines and `*0`).
    Command(Vec<Bytes>),
    /// More bytes are needed; `hint` is how many more at least, when known.
    Incomplete { hint: usize },
}

/// A protocol error: Redis replies `-ERR Protocol error: <msg>` and closes the connection.
/// The message is bytes because Redis echoes the offending byte raw (`got '\xff'`).
#[derive(Debug, PartialEq, Eq, Clone)]
pub struct ParseError(pub Bytes);

impl ParseError {
    fn new(s: &'static str) -> Self {
        ParseError(Bytes::from_static(s.as_bytes()))
    }
    /// The whole error reply line, `-ERR Protocol error: <msg>\r\n`, with CR/LF in the
    /// message turned into spaces as Redis does.
    pub fn reply_line(&self) -> Vec<u8> {
        let mut out = b"-ERR Protocol error: ".to_vec();
        out.extend(
            self.0
                .iter()
                .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }),
        );
        out.extend_from_slice(b"\r\n");
        out
    }
}

fn find_cr(buf: &[u8], from: usize) -> Option<usize> {
    buf[from..]
        .iter()
        .position(|&c| c == b'\r')
        .map(|p| p + from)
}

/// Parses one command from the front of `buf`, consuming it when complete. A connection
/// should keep a [`Parser`] instead, so a frame arriving over many reads is not re-scanned.
pub fn parse_command(buf: &mut BytesMut, limits: Limits) -> Result<Parsed, ParseError> {
    Parser::default().parse(buf, limits)
}

/// Request parser for one connection. It remembers how far it got into a multibulk frame
/// that has not fully arrived (as Redis keeps `multibulklen`/`bulklen` per client), so each
/// read resumes there: re-parsing from the start made a large frame arriving in pieces
/// cost time quadratic in its size.
#[derive(Debug, Default)]
pub struct Parser {
    /// Arguments of the frame in progress not parsed yet (0: no frame in progress).
    remaining: usize,
    /// Where parsing resumes in the buffer (the frame starts at offset 0).
    pos: usize,
    /// Argument spans parsed so far; sliced out once the frame is complete.
    spans: Vec<(usize, usize)>,
}

/// Span vectors larger than this are not kept between frames.
const KEEP_SPANS: usize = 1024;

/// What [`Parser::parse_into`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// A complete command, now in the caller's vector (possibly empty).
    Command,
    /// More bytes are needed; `hint` is how many more at least, when known.
    Incomplete { hint: usize },
}

impl Parser {
    /// Parses one command from the front of `buf`, consuming it when complete. Between
    /// calls, `buf` may only grow at its end.
    pub fn parse(&mut self, buf: &mut BytesMut, limits: Limits) -> Result<Parsed, ParseError> {
        let mut args = Vec::new();
        Ok(match self.parse_into(buf, limits, &mut args)? {
            Next::Command => Parsed::Command(args),
            Next::Incomplete { hint } => Parsed::Incomplete { hint },
        })
    }

    /// [`Parser::parse`] into a vector the caller keeps (cleared first when a command is
    /// complete): a connection reuses one, saving an allocation per command.
    pub fn parse_into(
        &mut self,
        buf: &mut BytesMut,
        limits: Limits,
        args: &mut Vec<Bytes>,
    ) -> Result<Next, ParseError> {
        if buf.is_empty() {
            return Ok(Next::Incomplete { hint: 0 });
        }
        if self.remaining > 0 || buf[0] == b'*' {
            let r = self.parse_multibulk(buf, limits, args);
            if r.is_err() {
                self.reset();
            }
            r
        } else {
            match parse_inline(buf)? {
                Parsed::Command(v) => {
                    *args = v;
                    Ok(Next::Command)
                }
                Parsed::Incomplete { hint } => Ok(Next::Incomplete { hint }),
            }
        }
    }

    fn reset(&mut self) {
        self.remaining = 0;
        self.pos = 0;
        self.spans.clear();
        if self.spans.capacity() > KEEP_SPANS {
            self.spans = Vec::new();
        }
    }

    fn parse_multibulk(
        &mut self,
        buf: &mut BytesMut,
        limits: Limits,
        args: &mut Vec<Bytes>,
    ) -> Result<Next, ParseError> {
        let data: &[u8] = buf;
        if self.remaining == 0 {
            let (count, cr) = match simple_number(data, 1) {
                Some(found) => found,
                None => {
                    let Some(cr) = find_cr(data, 0) else {
                        if data.len() > INLINE_MAX {
                            return Err(ParseError::new("too big mbulk count string"));
                        }
                        return Ok(Next::Incomplete { hint: 0 });
                    };
                    (parse_i64(&data[1..cr]).unwrap_or(i64::MAX), cr)
                }
            };
            if cr + 1 >= data.len() {
                return Ok(Next::Incomplete { hint: 0 });
            }
            if count > i32::MAX as i64 {
                return Err(ParseError::new("invalid multibulk length"));
            }
            if !limits.authenticated && count > 10 {
                return Err(ParseError::new("unauthenticated multibulk length"));
            }
            if count <= 0 {
                let _ = buf.split_to(cr + 2);
                args.clear();
                return Ok(Next::Command);
            }
            self.remaining = count as usize;
            self.pos = cr + 2;
            self.spans.reserve(self.remaining.min(KEEP_SPANS));
        }
        while self.remaining > 0 {
            let pos = self.pos;
            if pos >= data.len() {
                return Ok(Next::Incomplete { hint: 0 });
            }
            let fast = match data[pos] {
                b'$' => simple_number(data, pos + 1),
                _ => None,
            };
            let (len, cr) = match fast {
                Some(found) => found,
                None => {
                    let Some(cr) = find_cr(data, pos) else {
                        if data.len() - pos > INLINE_MAX {
                            return Err(ParseError::new("too big bulk count string"));
                        }
                        return Ok(Next::Incomplete { hint: 0 });
                    };
                    if cr + 1 >= data.len() {
                        return Ok(Next::Incomplete { hint: 0 });
                    }
                    if data[pos] != b'$' {
                        let mut msg = b"expected '$', got '".to_vec();
                        msg.extend_from_slice(&[data[pos], b'\'']);
                        return Err(ParseError(msg.into()));
                    }
                    (parse_i64(&data[pos + 1..cr]).unwrap_or(-1), cr)
                }
            };
            if cr + 1 >= data.len() {
                return Ok(Next::Incomplete { hint: 0 });
            }
            let len = match len {
                n if n >= 0 && n <= limits.max_bulk_len => n as usize,
                _ => return Err(ParseError::new("invalid bulk length")),
            };
            if !limits.authenticated && len > 16384 {
                return Err(ParseError::new("unauthenticated bulk length"));
            }
            let start = cr + 2;
            // Redis skips the two bytes after the payload without checking they are CRLF.
            let end = start + len + 2;
            if end > data.len() {
                return Ok(Next::Incomplete {
                    hint: end - data.len(),
                });
            }
            self.spans.push((start, start + len));
            self.pos = end;
            self.remaining -= 1;
        }
        let mut frame = buf.split_to(self.pos).freeze();
        args.clear();
        args.reserve(self.spans.len());
        let (last, rest) = self.spans.split_last().expect("count > 0");
        args.extend(rest.iter().map(|&(s, e)| frame.slice(s..e)));
        // The last argument is the frame itself, cut down: one reference count less (an
        // empty one holds no buffer, as `slice` gives).
        if last.0 == last.1 {
            args.push(Bytes::new());
        } else {
            frame.truncate(last.1);
            frame.advance(last.0);
            args.push(frame);
        }
        self.reset();
        Ok(Next::Command)
    }
}

/// `<digits>\r` at `from`, the usual shape of a count or length line: its value and the
/// CR's index. `None` for anything else (a sign, a leading zero, more than 18 digits, no
/// CR yet): the caller then takes the general path, which tells those apart exactly as
/// `parse_i64` does. Both read the same value where this one answers.
#[inline]
fn simple_number(data: &[u8], from: usize) -> Option<(i64, usize)> {
    let mut v: i64 = 0;
    let end = data.len().min(from + 19);
    let mut i = from;
    while i < end {
        let c = data[i];
        if c == b'\r' {
            let n = i - from;
            if n == 0 || (n > 1 && data[from] == b'0') {
                return None;
            }
            return Some((v, i));
        }
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v * 10 + i64::from(d);
        i += 1;
    }
    None
}

/// A frame found by [`peek_keys`]: where it starts in the buffer and where its first three
/// arguments are (the command's name, most commands' key, a set's or hash's member).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peeked {
    pub at: usize,
    pub name: std::ops::Range<usize>,
    pub key: std::ops::Range<usize>,
    pub third: Option<std::ops::Range<usize>>,
}

/// Each complete multibulk frame at the front of `buf` that has at least two arguments,
/// for up to `max` frames; stops at the first frame that is incomplete, inline, or not a
/// plain array of bulk strings. Only a look-ahead for prefetching: it validates nothing
/// and consumes nothing, and [`Parser`] still parses every frame.
pub fn peek_keys(buf: &[u8], max: usize, out: &mut Vec<Peeked>) {
    let mut at = 0;
    while out.len() < max && at < buf.len() && buf[at] == b'*' {
        let Some((n, cr)) = simple_number(buf, at + 1) else {
            return;
        };
        let mut i = cr + 2;
        let (mut name, mut key, mut third) = (0..0, None, None);
        for k in 0..n {
            if buf.get(i) != Some(&b'$') {
                return;
            }
            let Some((len, cr)) = simple_number(buf, i + 1) else {
                return;
            };
            let start = cr + 2;
            let end = start + len as usize;
            if end + 2 > buf.len() {
                return;
            }
            match k {
                0 => name = start..end,
                1 => key = Some(start..end),
                2 => third = Some(start..end),
                _ => {}
            }
            i = end + 2;
        }
        if let Some(key) = key {
            out.push(Peeked {
                at,
                name,
                key,
                third,
            });
        }
        at = i;
    }
}

fn parse_inline(buf: &mut BytesMut) -> Result<Parsed, ParseError> {
    // Redis finds the line end with strchr, which stops at a NUL byte: a NUL before the
    // newline means "no complete line yet" (until the inline size limit is reached).
    let end = buf.iter().position(|&c| c == b'\n' || c == 0);
    let Some(nl) = end.filter(|&i| buf[i] == b'\n') else {
        if buf.len() > INLINE_MAX {
            return Err(ParseError::new("too big inline request"));
        }
        return Ok(Parsed::Incomplete { hint: 0 });
    };
    let line = buf.split_to(nl + 1);
    let mut l: &[u8] = &line[..nl];
    if l.last() == Some(&b'\r') {
        l = &l[..l.len() - 1];
    }
    match split_args(l) {
        Some(args) => Ok(Parsed::Command(args.into_iter().map(Bytes::from).collect())),
        None => Err(ParseError::new("unbalanced quotes in request")),
    }
}

fn hex_val(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Redis `sdssplitargs`: whitespace-separated words, "double quotes" with C escapes
/// (`\xHH`, `\n`, …) and 'single quotes' with only `\'`. `None` on unbalanced quotes or a
/// closing quote not followed by a space.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= n {
            return Some(out);
        }
        let mut cur = Vec::new();
        let (mut inq, mut insq) = (false, false);
        loop {
            if inq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && hex_val(line[i + 2]).is_some()
                    && hex_val(line[i + 3]).is_some()
                {
                    cur.push(hex_val(line[i + 2]).unwrap() * 16 + hex_val(line[i + 3]).unwrap());
                    i += 3;
                } else if c == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else if insq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => {
                        i += 1;
                        break;
                    }
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    c => cur.push(c),
                }
            }
            i += 1;
        }
        out.push(cur);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peek_keys_finds_each_frames_second_argument() {
        let buf = b"*3\r\n$3\r\nSET\r\n$2\r\nk1\r\n$1\r\nv\r\n*1\r\n$4\r\nPING\r\n\
*2\r\n$3\r\nGET\r\n$0\r\n\r\n*2\r\n$3\r\nGET\r\n$5\r\nk";
        let mut out = Vec::new();
        peek_keys(buf, 8, &mut out);
        type Shown<'a> = (usize, &'a [u8], &'a [u8], Option<&'a [u8]>);
        let keys: Vec<Shown> = out
            .iter()
            .map(|p| {
                let third = p.third.clone().map(|m| &buf[m]);
                (p.at, &buf[p.name.clone()], &buf[p.key.clone()], third)
            })
            .collect();
        // PING has no second argument; the last frame is incomplete.
        assert_eq!(
            keys,
            vec![
                (0, &b"SET"[..], &b"k1"[..], Some(&b"v"[..])),
                (42, &b"GET"[..], &b""[..], None)
            ]
        );
        // Every frame peeked is one the parser takes whole, at the same offset.
        let mut b = BytesMut::from(&buf[..]);
        let mut p = Parser::default();
        let mut args = Vec::new();
        let mut offsets = Vec::new();
        let total = b.len();
        loop {
            let start = total - b.len();
            let Ok(Next::Command) = p.parse_into(&mut b, Limits::default(), &mut args) else {
                break;
            };
            if args.len() > 1 {
                offsets.push(start);
            }
            args.clear();
        }
        assert_eq!(offsets, out.iter().map(|o| o.at).collect::<Vec<_>>());
        // Bounded, and garbage stops it without a panic.
        out.clear();
        peek_keys(buf, 1, &mut out);
        assert_eq!(out.len(), 1);
        for junk in [
            &b"*x\r\n"[..],
            b"*2\r\n:1\r\n",
            b"*-1\r\n",
            b"*2\r\n$99999999999999999\r\n",
            b"PING\r\n",
        ] {
            out.clear();
            peek_keys(junk, 8, &mut out);
            assert!(out.is_empty());
        }
    }

    fn parse(s: &[u8]) -> Result<Parsed, ParseError> {
        let mut b = BytesMut::from(s);
        parse_command(&mut b, Limits::default())
    }
    fn args(v: &[&str]) -> Parsed {
        Parsed::Command(
            v.iter()
                .map(|s| Bytes::copy_from_slice(s.as_bytes()))
                .collect(),
        )
    }

    #[test]
    fn multibulk() {
        assert_eq!(
            parse(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n").unwrap(),
            args(&["GET", "k"])
        );
        assert_eq!(
            parse(b"*2\r\n$3\r\nGET\r\n$1\r\n").unwrap(),
            Parsed::Incomplete { hint: 3 }
        );
        assert_eq!(
            parse(b"*1\r\n$5\r\nab").unwrap(),
            Parsed::Incomplete { hint: 5 }
        );
        assert_eq!(parse(b"*0\r\n").unwrap(), args(&[]));
        assert_eq!(parse(b"*-1\r\n").unwrap(), args(&[]));
    }

    #[test]
    fn length_lines_outside_the_fast_shape_read_as_parse_i64_reads_them() {
        // Leading zeros, signs, 19+ digits and stray bytes take the general path.
        for bad in [
            &b"$01"[..],
            b"$-0",
            b"$+3",
            b"$3x",
            b"$",
            b"$1234567890123456789012",
        ] {
            let mut f = b"*1\r\n".to_vec();
            f.extend_from_slice(bad);
            f.extend_from_slice(b"\r\nabc\r\n");
            assert_eq!(parse(&f).unwrap_err().0, "invalid bulk length", "{f:?}");
        }
        for bad in [&b"*01"[..], b"*+1", b"*1x", b"*"] {
            let mut f = bad.to_vec();
            f.extend_from_slice(b"\r\n$1\r\na\r\n");
            assert_eq!(
                parse(&f).unwrap_err().0,
                "invalid multibulk length",
                "{f:?}"
            );
        }
        // 18 digits still read exactly (then fail the size limit, not the number).
        assert_eq!(
            parse(b"*1\r\n$999999999999999999\r\n").unwrap_err().0,
            "invalid bulk length"
        );
        let big = Limits {
            max_bulk_len: i64::MAX,
            ..Limits::default()
        };
        let mut b = BytesMut::from(&b"*1\r\n$999999999999999999\r\nab"[..]);
        assert_eq!(
            parse_command(&mut b, big).unwrap(),
            Parsed::Incomplete {
                hint: 999_999_999_999_999_999 + 2 - 2
            }
        );
        assert_eq!(parse(b"*1\r\n$0\r\n\r\n").unwrap(), args(&[""]));
        assert_eq!(parse(b"*-0\r\n").unwrap_err().0, "invalid multibulk length");
        assert_eq!(parse(b"*3\r").unwrap(), Parsed::Incomplete { hint: 0 });
        assert_eq!(
            parse(b"*1\r\n$3\r").unwrap(),
            Parsed::Incomplete { hint: 0 }
        );
    }

    #[test]
    fn parse_into_reuses_the_callers_vector() {
        let mut p = Parser::default();
        let mut b = BytesMut::from(
            &b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n*1\r\n$4\r\nPING\r\nECHO x\r\n*0\r\n"[..],
        );
        let mut v = Vec::new();
        let mut seen = Vec::new();
        while let Next::Command = p.parse_into(&mut b, Limits::default(), &mut v).unwrap() {
            seen.push(v.clone());
        }
        let s = |a: &[&str]| {
            a.iter()
                .map(|x| Bytes::copy_from_slice(x.as_bytes()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            seen,
            vec![
                s(&["SET", "k", ""]),
                s(&["PING"]),
                s(&["ECHO", "x"]),
                s(&[])
            ]
        );
        assert!(b.is_empty());
    }

    #[test]
    fn errors_match_redis() {
        assert_eq!(parse(b"*x\r\n").unwrap_err().0, "invalid multibulk length");
        assert_eq!(
            parse(b"*1\r\nx3\r\n").unwrap_err().0,
            "expected '$', got 'x'"
        );
        assert_eq!(
            parse(b"*1\r\n$-3\r\n").unwrap_err().0,
            "invalid bulk length"
        );
        assert_eq!(
            parse(b"*1\r\n$600000000\r\n").unwrap_err().0,
            "invalid bulk length"
        );
        assert_eq!(
            parse(b"*3000000000\r\n").unwrap_err().0,
            "invalid multibulk length"
        );
        assert_eq!(
            parse(b"set \"a b\"c\r\n").unwrap_err().0,
            "unbalanced quotes in request"
        );
        let mut big = BytesMut::from(&vec![b'a'; INLINE_MAX + 1][..]);
        assert_eq!(
            parse_command(&mut big, Limits::default()).unwrap_err().0,
            "too big inline request"
        );
        let unauth = Limits {
            authenticated: false,
            ..Limits::default()
        };
        let mut b = BytesMut::from(&b"*11\r\n"[..]);
        assert_eq!(
            parse_command(&mut b, unauth).unwrap_err().0,
            "unauthenticated multibulk length"
        );
    }

    #[test]
    fn inline() {
        assert_eq!(parse(b"PING\r\n").unwrap(), args(&["PING"]));
        assert_eq!(
            parse(b"set a \"x\\x41\\n\" 'it\\'s'\n").unwrap(),
            args(&["set", "a", "xA\n", "it's"])
        );
        assert_eq!(parse(b"\r\n").unwrap(), args(&[]));
        assert_eq!(parse(b"PING").unwrap(), Parsed::Incomplete { hint: 0 });
    }

    #[test]
    fn error_lines_echo_raw_bytes() {
        // Redis prints the offending byte as it is, and maps CR/LF to spaces.
        assert_eq!(
            parse(b"*1\r\n\xff3\r\n").unwrap_err().reply_line(),
            b"-ERR Protocol error: expected '$', got '\xff'\r\n"
        );
        assert_eq!(
            parse(b"*1\r\n\r\n").unwrap_err().reply_line(),
            b"-ERR Protocol error: expected '$', got ' '\r\n"
        );
    }

    #[test]
    fn inline_nul_hides_the_newline() {
        // strchr in Redis stops at NUL: the line is never complete.
        assert_eq!(
            parse(b"PING\x00x\r\n").unwrap(),
            Parsed::Incomplete { hint: 0 }
        );
        let mut big = b"PING\x00\n".to_vec();
        big.resize(INLINE_MAX + 10, b'a');
        assert_eq!(parse(&big).unwrap_err().0, "too big inline request");
        assert_eq!(parse(b"PING\r\n\x00").unwrap(), args(&["PING"]));
    }

    #[test]
    fn resumes_a_frame_split_anywhere() {
        let frame = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\nPING\r\n";
        for cut in 1..frame.len() {
            let mut p = Parser::default();
            let mut b = BytesMut::from(&frame[..cut]);
            let first = p.parse(&mut b, Limits::default()).unwrap();
            b.extend_from_slice(&frame[cut..]);
            let got = match first {
                Parsed::Command(a) if !a.is_empty() => Parsed::Command(a),
                _ => p.parse(&mut b, Limits::default()).unwrap(),
            };
            assert_eq!(got, args(&["SET", "k", "hello"]), "cut at {cut}");
            assert_eq!(p.parse(&mut b, Limits::default()).unwrap(), args(&["PING"]));
            assert!(b.is_empty());
        }
    }

    #[test]
    fn error_mid_frame_resets_the_parser() {
        let mut p = Parser::default();
        let mut b = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n"[..]);
        assert_eq!(
            p.parse(&mut b, Limits::default()).unwrap(),
            Parsed::Incomplete { hint: 0 }
        );
        b.extend_from_slice(b"x1\r\n");
        assert_eq!(
            p.parse(&mut b, Limits::default()).unwrap_err().0,
            "expected '$', got 'x'"
        );
        let mut b = BytesMut::from(&b"PING\r\n"[..]);
        assert_eq!(p.parse(&mut b, Limits::default()).unwrap(), args(&["PING"]));
    }
}
