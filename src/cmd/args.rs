//! Argument parsing helpers with Redis's error replies.

use super::errors;
use crate::protocol::parse::parse_i64;
use crate::protocol::Reply;

/// Case-insensitive ASCII comparison of an argument with an option name.
#[inline]
pub fn is(arg: &[u8], opt: &str) -> bool {
    arg.eq_ignore_ascii_case(opt.as_bytes())
}

/// Strict integer (`string2ll`), or `ERR value is not an integer or out of range`.
pub fn int(arg: &[u8]) -> Result<i64, Reply> {
    parse_i64(arg).ok_or_else(errors::not_int)
}

/// Redis `string2ld`/`strtold`-style float parse: no leading/trailing spaces, accepts
/// `inf`/`-inf`/`+inf` and exponent forms; rejects NaN.
pub fn parse_f64(arg: &[u8]) -> Option<f64> {
    if arg.is_empty() || arg.len() > 5120 {
        return None;
    }
    if arg[0].is_ascii_whitespace() || arg[arg.len() - 1].is_ascii_whitespace() {
        return None;
    }
    let s = std::str::from_utf8(arg).ok()?;
    let lower = s.to_ascii_lowercase();
    let v = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => {
            // Rust accepts forms strtod rejects (e.g. "infinity" handled above); reject
            // anything that is not plain decimal/exponent or hex-free text.
            if lower.contains("nan") || lower.contains("inf") || lower.starts_with("0x") {
                return None;
            }
            lower.parse::<f64>().ok()?
        }
    };
    if v.is_nan() {
        None
    } else {
        Some(v)
    }
}

/// Float argument, or `ERR value is not a valid float`.
pub fn float(arg: &[u8]) -> Result<f64, Reply> {
    parse_f64(arg).ok_or_else(|| errors::err(errors::NOT_FLOAT))
}

/// Database index for SELECT/MOVE/COPY/SWAPDB.
pub fn db_index(arg: &[u8], databases: usize) -> Result<usize, Reply> {
    let n = parse_i64(arg).ok_or_else(|| errors::err(errors::NOT_INT))?;
    if n < 0 || n as usize >= databases {
        return Err(errors::err(errors::DB_INDEX));
    }
    Ok(n as usize)
}

/// `addReplyHelp`: the container's usage line, the given lines, then `HELP`, all as status
/// strings.
pub fn help(container: &str, lines: &[&'static str]) -> Reply {
    let mut out = Vec::with_capacity(lines.len() + 3);
    out.push(Reply::Status(
        format!("{container} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:").into(),
    ));
    out.extend(lines.iter().map(|l| Reply::status(l)));
    out.push(Reply::status("HELP"));
    out.push(Reply::status("    Prints this help."));
    Reply::Array(out)
}

/// Redis `getTimeoutFromObjectOrReply` in milliseconds: a non-negative integer. Returns the
/// duration, not the deadline.
pub fn timeout_ms(arg: &[u8]) -> Result<u64, Reply> {
    let t = parse_i64(arg)
        .ok_or_else(|| errors::err("ERR timeout is not an integer or out of range"))?;
    if t < 0 {
        return Err(errors::err("ERR timeout is negative"));
    }
    Ok(t as u64)
}

/// Redis `getIntFromObjectOrReply`: a 64-bit integer that must also fit a C `int`. With
/// `msg`, both failures reply `msg`; without, they reply Redis's two distinct errors.
pub fn int32(arg: &[u8], msg: Option<&'static str>) -> Result<i32, Reply> {
    let fail = |default: &'static str| errors::err(msg.unwrap_or(default));
    let n = parse_i64(arg).ok_or_else(|| fail(errors::NOT_INT))?;
    i32::try_from(n).map_err(|_| fail(errors::INT_RANGE))
}

/// Database index the way MOVE and COPY ... DB read it: `int32` errors, then
/// `ERR DB index is out of range`.
pub fn db_id(arg: &[u8], databases: usize) -> Result<usize, Reply> {
    let n = int32(arg, None)?;
    usize::try_from(n)
        .ok()
        .filter(|&n| n < databases)
        .ok_or_else(|| errors::err(errors::DB_INDEX))
}

/// A SCAN-family cursor, parsed as Redis does with C `strtoul` (base 10): the text ends at
/// the first NUL byte, a leading sign is allowed (`-1` wraps to 2^64-1), an empty string is
/// 0, and leading whitespace, trailing garbage or overflow give `ERR invalid cursor`.
pub fn scan_cursor(arg: &[u8]) -> Result<u64, Reply> {
    let bad = || errors::err(errors::INVALID_CURSOR);
    let text = arg.split(|&b| b == 0).next().unwrap_or(&[]);
    if text.is_empty() {
        return Ok(0);
    }
    if matches!(text[0], b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r') {
        return Err(bad());
    }
    let (neg, digits) = match text[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    let mut n: u64 = 0;
    for d in digits {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or_else(bad)?;
    }
    Ok(if neg { n.wrapping_neg() } else { n })
}

/// Option comparison as Redis's `strcasecmp` on the argument: the argument's text ends at
/// its first NUL byte (`"count\0x"` is `COUNT`).
pub fn is_cstr(arg: &[u8], opt: &str) -> bool {
    let end = arg.iter().position(|&b| b == 0).unwrap_or(arg.len());
    is(&arg[..end], opt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_cursor_is_strtoul() {
        assert_eq!(scan_cursor(b"0").ok(), Some(0));
        assert_eq!(scan_cursor(b"").ok(), Some(0));
        assert_eq!(scan_cursor(b"+7").ok(), Some(7));
        assert_eq!(scan_cursor(b"-1").ok(), Some(u64::MAX));
        assert_eq!(scan_cursor(b"-0").ok(), Some(0));
        assert_eq!(scan_cursor(b"18446744073709551615").ok(), Some(u64::MAX));
        assert_eq!(scan_cursor(b"12\x00junk").ok(), Some(12));
        for bad in [
            &b"18446744073709551616"[..],
            b" 0",
            b"0 ",
            b"0x1",
            b"abc",
            b"-",
            b"+",
            b"1.5",
        ] {
            assert!(scan_cursor(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn int32_and_db_id() {
        assert_eq!(int32(b"-5", None).ok(), Some(-5));
        assert_eq!(
            int32(b"4294967296", None).err(),
            Some(errors::err(errors::INT_RANGE))
        );
        assert_eq!(
            int32(b"x", Some(errors::INVALID_FIRST_DB)).err(),
            Some(errors::err(errors::INVALID_FIRST_DB))
        );
        assert_eq!(db_id(b"15", 16).ok(), Some(15));
        assert_eq!(db_id(b"16", 16).err(), Some(errors::err(errors::DB_INDEX)));
        assert_eq!(db_id(b"-1", 16).err(), Some(errors::err(errors::DB_INDEX)));
        assert_eq!(db_id(b"x", 16).err(), Some(errors::not_int()));
    }
}
