//! Request parser: RESP multibulk arrays of bulk strings and inline commands, with Redis's
//! limits and exact protocol error texts (networking.c: processMultibulkBuffer /
//! processInlineBuffer). Arguments are zero-copy slices of the read buffer.

use bytes::{Bytes, BytesMut};

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
#[derive(Debug, PartialEq, Eq, Clone)]
pub struct ParseError(pub String);

impl ParseError {
    fn new(s: impl Into<String>) -> Self {
        ParseError(s.into())
    }
    pub fn reply_text(&self) -> String {
        format!("ERR Protocol error: {}", self.0)
    }
}

fn find_cr(buf: &[u8], from: usize) -> Option<usize> {
    buf[from..]
        .iter()
        .position(|&c| c == b'\r')
        .map(|p| p + from)
}

/// Redis `string2ll`: strict decimal, optional leading '-', no spaces or '+'.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits[0] == b'0' {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

/// Parses one command from the front of `buf`, consuming it when complete.
pub fn parse_command(buf: &mut BytesMut, limits: Limits) -> Result<Parsed, ParseError> {
    if buf.is_empty() {
        return Ok(Parsed::Incomplete { hint: 0 });
    }
    if buf[0] == b'*' {
        parse_multibulk(buf, limits)
    } else {
        parse_inline(buf)
    }
}

fn parse_multibulk(buf: &mut BytesMut, limits: Limits) -> Result<Parsed, ParseError> {
    let data: &[u8] = buf;
    let Some(cr) = find_cr(data, 0) else {
        if data.len() > INLINE_MAX {
            return Err(ParseError::new("too big mbulk count string"));
        }
        return Ok(Parsed::Incomplete { hint: 0 });
    };
    if cr + 1 >= data.len() {
        return Ok(Parsed::Incomplete { hint: 0 });
    }
    let count = match parse_i64(&data[1..cr]) {
        Some(n) if n <= i32::MAX as i64 => n,
        _ => return Err(ParseError::new("invalid multibulk length")),
    };
    if !limits.authenticated && count > 10 {
        return Err(ParseError::new("unauthenticated multibulk length"));
    }
    let mut pos = cr + 2;
    if count <= 0 {
        let _ = buf.split_to(pos);
        return Ok(Parsed::Command(Vec::new()));
    }
    // Record argument spans first; slice them out only once the frame is complete.
    let mut spans: Vec<(usize, usize)> = Vec::with_capacity(count.min(1024) as usize);
    for _ in 0..count {
        if pos >= data.len() {
            return Ok(Parsed::Incomplete { hint: 0 });
        }
        let Some(cr) = find_cr(data, pos) else {
            if data.len() - pos > INLINE_MAX {
                return Err(ParseError::new("too big bulk count string"));
            }
            return Ok(Parsed::Incomplete { hint: 0 });
        };
        if cr + 1 >= data.len() {
            return Ok(Parsed::Incomplete { hint: 0 });
        }
        if data[pos] != b'$' {
            return Err(ParseError(format!(
                "expected '$', got '{}'",
                data[pos] as char
            )));
        }
        let len = match parse_i64(&data[pos + 1..cr]) {
            Some(n) if n >= 0 && n <= limits.max_bulk_len => n as usize,
            _ => return Err(ParseError::new("invalid bulk length")),
        };
        if !limits.authenticated && len > 16384 {
            return Err(ParseError::new("unauthenticated bulk length"));
        }
        let start = cr + 2;
        // Redis skips the two bytes after the payload without checking they are CRLF.
        let end = start + len + 2;
        if end > data.len() {
            return Ok(Parsed::Incomplete {
                hint: end - data.len(),
            });
        }
        spans.push((start, start + len));
        pos = end;
    }
    let frame = buf.split_to(pos).freeze();
    Ok(Parsed::Command(
        spans.into_iter().map(|(s, e)| frame.slice(s..e)).collect(),
    ))
}

fn parse_inline(buf: &mut BytesMut) -> Result<Parsed, ParseError> {
    let Some(nl) = buf.iter().position(|&c| c == b'\n') else {
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
    fn strict_integers() {
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b"01"), None);
        assert_eq!(parse_i64(b"-0"), None);
    }
}
