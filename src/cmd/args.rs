//! Argument parsing helpers with Redis's error replies.

use super::errors;
use crate::num::parse_i64;
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

/// Redis `getRangeLongFromObjectOrReply`: an integer in `min..=max`. With `msg`, both a
/// non-integer and an out-of-range value reply `msg`; without, Redis's two distinct errors.
pub fn long_in_range(
    arg: &[u8],
    min: i64,
    max: i64,
    msg: Option<&'static str>,
) -> Result<i64, Reply> {
    let n = parse_i64(arg).ok_or_else(|| errors::err(msg.unwrap_or(errors::NOT_INT)))?;
    if n < min || n > max {
        return Err(match msg {
            Some(m) => errors::err(m),
            None => Reply::error(format!(
                "ERR value is out of range, value must between {min} and {max}"
            )),
        });
    }
    Ok(n)
}

/// Redis `getPositiveLongFromObjectOrReply` (0 allowed).
pub fn positive_long(arg: &[u8], msg: Option<&'static str>) -> Result<i64, Reply> {
    long_in_range(
        arg,
        0,
        i64::MAX,
        Some(msg.unwrap_or(errors::MUST_BE_POSITIVE)),
    )
}

/// Redis `getTimeoutFromObjectOrReply` with `UNIT_SECONDS` (BLPOP, BLMOVE, BZPOPMIN…): a
/// `long double` number of seconds, scaled to milliseconds and rounded up (`ceill`).
/// `None` is 0, "block forever". `now_ms` bounds the deadline as Redis does.
pub fn timeout_secs(arg: &[u8], now_ms: u64) -> Result<Option<std::time::Duration>, Reply> {
    use crate::types::long_double::{self as ld, LongDouble, Parsed};
    let out_of_range = || errors::err(errors::TIMEOUT_OUT_OF_RANGE);
    let negative = || errors::err(errors::TIMEOUT_NEGATIVE);
    let v = match ld::parse(arg) {
        None => return Err(errors::err(errors::TIMEOUT_NOT_FLOAT)),
        Some(Parsed::Infinite) if arg.first() == Some(&b'-') => return Err(negative()),
        Some(Parsed::Infinite) => return Err(out_of_range()),
        Some(Parsed::Finite(v)) => v,
    };
    let is_zero = v.checked_add(LongDouble::ZERO) == Some(LongDouble::ZERO);
    // The exact decimal text (`%.17Lf`, trailing zeros trimmed) gives ceil(v * 1000).
    let text = v.to_human();
    let (neg, text) = match text.strip_prefix('-') {
        Some(t) => (true, t),
        None => (false, text.as_str()),
    };
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| {
        s.bytes().try_fold(0u128, |n, d| {
            n.checked_mul(10)?.checked_add(u128::from(d - b'0'))
        })
    };
    let ms_digits = &frac[..frac.len().min(3)];
    let whole = int.len() <= 30;
    let ms = digits(int)
        .filter(|_| whole)
        .and_then(|i| i.checked_mul(1000))
        .and_then(|i| {
            let f = digits(ms_digits)? * 10u128.pow(3 - ms_digits.len() as u32);
            i.checked_add(f)
        });
    // Digits below the millisecond, or a value too small to print: rounds up to 1 ms more.
    let below_ms = frac.len() > 3 || (text == "0" && !is_zero);
    let ms = match (neg, ms) {
        // ceil of a negative number is minus its truncation: -0.0005 s is 0 ms.
        (true, Some(0)) => 0,
        // Around -1 ms the long double product decides: 0.001 is stored a little below
        // 1/1000, so Redis computes ceill(-0.99999…) = 0 for every v with |v| <= 0.001L.
        (true, Some(1)) if !below_ms && !beyond_thousandth(v) => 0,
        (true, _) => return Err(negative()),
        (false, None) => return Err(out_of_range()),
        (false, Some(ms)) => ms + u128::from(below_ms),
    };
    if ms > (i64::MAX as u128).saturating_sub(u128::from(now_ms)) {
        return Err(out_of_range());
    }
    Ok((ms > 0).then(|| std::time::Duration::from_millis(ms as u64)))
}

/// Whether the negative `v` is below -0.001L (`long double` nearest to -1/1000), told from
/// the sign of `v + 0.001L`: the sum is exact and tiny, so it is doubled until its decimal
/// text shows the sign.
fn beyond_thousandth(v: crate::types::long_double::LongDouble) -> bool {
    use crate::types::long_double::{self as ld, LongDouble, Parsed};
    let Some(Parsed::Finite(t)) = ld::parse(b"0.001") else {
        return true;
    };
    let Some(mut r) = v.checked_add(t) else {
        return true;
    };
    if r == LongDouble::ZERO {
        return false;
    }
    for _ in 0..128 {
        match r.checked_add(r) {
            Some(d) => r = d,
            None => break,
        }
    }
    r.to_human().starts_with('-')
}

/// C `atoi`: leading spaces, an optional sign, digits up to the first other byte; what
/// does not fit an `int` saturates through `strtol` and is then truncated to 32 bits.
pub fn atoi(s: &[u8]) -> i32 {
    let (neg, mut i) = super::strtod::space_and_sign(s);
    let mut v: i64 = 0;
    while let Some(d) = s.get(i).filter(|c| c.is_ascii_digit()) {
        v = v.saturating_mul(10).saturating_add(i64::from(d - b'0'));
        i += 1;
    }
    (if neg { v.saturating_neg() } else { v }) as i32
}

#[cfg(test)]
mod timeout_tests {
    use super::*;
    use std::time::Duration;

    fn ms(arg: &str) -> Result<Option<u64>, Reply> {
        timeout_secs(arg.as_bytes(), 1_700_000_000_000).map(|d| d.map(|d| d.as_millis() as u64))
    }

    #[test]
    fn timeouts_are_seconds_rounded_up_to_ms() {
        assert_eq!(ms("0").ok(), Some(None));
        assert_eq!(ms("0.0").ok(), Some(None));
        assert_eq!(ms("-0").ok(), Some(None));
        assert_eq!(ms("1").ok(), Some(Some(1000)));
        assert_eq!(ms("0.01").ok(), Some(Some(10)));
        assert_eq!(ms("0.0101").ok(), Some(Some(11)));
        assert_eq!(ms("1e-30").ok(), Some(Some(1)));
        assert_eq!(ms("-0.0009").ok(), Some(None), "ceil(-0.9) is 0");
        assert_eq!(ms("0x10").ok(), Some(Some(16_000)));
        assert_eq!(ms("1.5e3").ok(), Some(Some(1_500_000)));
        assert_eq!(ms("-0.001").ok(), Some(None), "-0.001L * 1000 is above -1");
        assert_eq!(ms("-1e-3").ok(), Some(None));
        assert_eq!(ms("-0.00099999999999999999").ok(), Some(None));
        let neg = Err(errors::err(errors::TIMEOUT_NEGATIVE));
        assert_eq!(ms("-0.0010000000000000001"), neg);
        assert_eq!(ms("-0.0011"), neg);
        assert_eq!(ms("-0.002"), neg);
        assert_eq!(ms("-1"), neg);
        assert_eq!(ms("-inf"), neg);
        assert_eq!(ms("-1e300"), neg);
        let range = Err(errors::err(errors::TIMEOUT_OUT_OF_RANGE));
        assert_eq!(ms("inf"), range);
        assert_eq!(ms("1e300"), range);
        assert_eq!(
            ms("9223372036854775.807"),
            range,
            "now + timeout would overflow"
        );
        let bad = Err(errors::err(errors::TIMEOUT_NOT_FLOAT));
        for a in ["", "x", "nan", " 1", "1 ", "1x"] {
            assert_eq!(ms(a), bad, "{a:?}");
        }
        assert_eq!(
            timeout_secs(b"2.5", 0).ok(),
            Some(Some(Duration::from_millis(2500)))
        );
    }

    #[test]
    fn blocking_timeout_vectors() {
        use std::time::Duration;
        let t = |s: &[u8]| timeout_secs(s, 1_700_000_000_000);
        assert_eq!(t(b"0").ok(), Some(None));
        assert_eq!(t(b"-0.001").ok(), Some(None));
        assert_eq!(t(b"0.1").ok(), Some(Some(Duration::from_millis(100))));
        assert_eq!(t(b"1.0001").ok(), Some(Some(Duration::from_millis(1001))));
        assert!(t(b"-1").is_err());
        assert!(t(b"-0.002").is_err());
        assert!(t(b"abc").is_err());
        assert!(t(b"inf").is_err());
        assert!(t(b"-inf").is_err());
        assert!(t(b"nan").is_err());
        assert!(t(b"9223372036854775").is_err());
    }
}

#[cfg(test)]
mod atoi_tests {
    use super::atoi;

    #[test]
    fn atoi_is_c_atoi() {
        assert_eq!(atoi(b"6379"), 6379);
        assert_eq!(atoi(b"  +12ab"), 12);
        assert_eq!(atoi(b"-5"), -5);
        assert_eq!(atoi(b"abc"), 0);
        assert_eq!(atoi(b""), 0);
        // strtol saturates to LONG_MAX, whose low 32 bits are -1.
        assert_eq!(atoi(b"99999999999999999999999"), -1);
    }
}
