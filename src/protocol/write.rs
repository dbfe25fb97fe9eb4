//! Hand-written RESP2/RESP3 encoder (DESIGN.md §9: 2–4× faster than a generic one).

use super::reply::Reply;
use crate::num::format_double;
use bytes::{BufMut, BytesMut};

fn put_int_line(out: &mut BytesMut, prefix: u8, n: i64) {
    let mut buf = itoa::Buffer::new();
    let s = buf.format(n);
    out.reserve(s.len() + 3);
    out.put_u8(prefix);
    out.put_slice(s.as_bytes());
    out.put_slice(b"\r\n");
}

/// `$<len>\r\n<bytes>\r\n`, with one capacity check for the whole of it.
pub fn put_bulk(out: &mut BytesMut, b: &[u8]) {
    let mut buf = itoa::Buffer::new();
    let len = buf.format(b.len()).as_bytes();
    out.reserve(len.len() + b.len() + 5);
    out.put_u8(b'$');
    out.put_slice(len);
    out.put_slice(b"\r\n");
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

/// Writes a status or error line, replacing CR/LF so the reply stays one line (as Redis
/// does).
fn put_line(out: &mut BytesMut, prefix: u8, s: &str) {
    let s = s.as_bytes();
    out.reserve(s.len() + 3);
    out.put_u8(prefix);
    if s.iter().any(|&c| c == b'\r' || c == b'\n') {
        for &c in s {
            out.put_u8(if c == b'\r' || c == b'\n' { b' ' } else { c });
        }
    } else {
        out.put_slice(s);
    }
    out.put_slice(b"\r\n");
}

pub fn write_reply(out: &mut BytesMut, r: &Reply, resp3: bool) {
    match r {
        Reply::Status(s) => put_line(out, b'+', s),
        Reply::Error(s) => put_line(out, b'-', s),
        Reply::Int(n) => put_int_line(out, b':', *n),
        Reply::Bulk(b) => put_bulk(out, b),
        Reply::Nil => out.put_slice(if resp3 { b"_\r\n" } else { b"$-1\r\n" }),
        Reply::NilArray => out.put_slice(if resp3 { b"_\r\n" } else { b"*-1\r\n" }),
        Reply::Array(items) => {
            put_int_line(out, b'*', items.len() as i64);
            for i in items {
                write_reply(out, i, resp3);
            }
        }
        Reply::Push(items) => {
            put_int_line(out, if resp3 { b'>' } else { b'*' }, items.len() as i64);
            for i in items {
                write_reply(out, i, resp3);
            }
        }
        Reply::Set(items) => {
            put_int_line(out, if resp3 { b'~' } else { b'*' }, items.len() as i64);
            for i in items {
                write_reply(out, i, resp3);
            }
        }
        Reply::Map(pairs) => {
            if resp3 {
                put_int_line(out, b'%', pairs.len() as i64);
            } else {
                put_int_line(out, b'*', pairs.len() as i64 * 2);
            }
            for (k, v) in pairs {
                write_reply(out, k, resp3);
                write_reply(out, v, resp3);
            }
        }
        Reply::Double(d) => {
            let s = format_double(*d);
            if resp3 {
                put_line(out, b',', &s);
            } else {
                put_bulk(out, s.as_bytes());
            }
        }
        Reply::Bool(b) => {
            if resp3 {
                out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" });
            } else {
                out.put_slice(if *b { b":1\r\n" } else { b":0\r\n" });
            }
        }
        Reply::Verbatim(b) => {
            if resp3 {
                put_int_line(out, b'=', b.len() as i64 + 4);
                out.put_slice(b"txt:");
                out.put_slice(b);
                out.put_slice(b"\r\n");
            } else {
                put_bulk(out, b);
            }
        }
        Reply::Raw(b) => out.put_slice(b),
        Reply::NoReply => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn enc(r: &Reply, resp3: bool) -> String {
        let mut b = BytesMut::new();
        write_reply(&mut b, r, resp3);
        String::from_utf8(b.to_vec()).unwrap()
    }

    #[test]
    fn encodes_both_protocols() {
        assert_eq!(enc(&Reply::Nil, false), "$-1\r\n");
        assert_eq!(enc(&Reply::Nil, true), "_\r\n");
        assert_eq!(
            enc(&Reply::Bulk(Bytes::from_static(b"ab")), false),
            "$2\r\nab\r\n"
        );
        let m = Reply::Map(vec![(Reply::bulk_static("a"), Reply::Int(1))]);
        assert_eq!(enc(&m, false), "*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&m, true), "%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&Reply::Double(1.5), true), ",1.5\r\n");
        assert_eq!(enc(&Reply::error("ERR a\r\nb"), false), "-ERR a  b\r\n");
    }

    #[test]
    fn doubles_print_like_redis() {
        assert_eq!(format_double(3.0), "3");
        assert_eq!(format_double(0.1), "0.1");
        assert_eq!(format_double(1e30), "1e+30");
        assert_eq!(format_double(1e17), "100000000000000000");
        assert_eq!(format_double(-0.0), "-0");
        assert_eq!(format_double(1.5e-7), "1.5e-7");
        assert_eq!(format_double(f64::INFINITY), "inf");
        assert_eq!(format_double(-2.5), "-2.5");
    }
}
