//! Number and range parsing exactly as Redis's sorted-set code does it: C `strtod` (leading
//! spaces, hex floats, `inf`/`infinity`, text ending at a NUL byte) under the checks of
//! `string2d` (scores, weights), `zslParseRange` (score ranges), `zslParseLexRange` (lex
//! ranges) and `string2ld` (blocking timeouts).

use super::super::errors;
use crate::protocol::parse::parse_i64;
use crate::protocol::Reply;
use crate::types::zset::{LexBound, LexRange, ScoreRange};
use bytes::Bytes;

/// Result of C `strtod` on a byte string: the value, how many bytes it consumed (0 when no
/// conversion happened) and whether it overflowed or underflowed to zero (`ERANGE`).
struct Strtod {
    value: f64,
    used: usize,
    range_err: bool,
}

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

fn strtod(s: &[u8]) -> Strtod {
    let none = Strtod {
        value: 0.0,
        used: 0,
        range_err: false,
    };
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let sign = |v: f64| if neg { -v } else { v };
    let rest = &s[i..];
    let starts =
        |word: &[u8]| rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word);
    if starts(b"infinity") {
        return Strtod {
            value: sign(f64::INFINITY),
            used: i + 8,
            range_err: false,
        };
    }
    if starts(b"inf") {
        return Strtod {
            value: sign(f64::INFINITY),
            used: i + 3,
            range_err: false,
        };
    }
    if starts(b"nan") {
        let mut used = i + 3;
        // "nan(n-char-sequence)" is consumed whole when the parenthesis closes.
        if s.get(used) == Some(&b'(') {
            let mut j = used + 1;
            while j < s.len() && (s[j].is_ascii_alphanumeric() || s[j] == b'_') {
                j += 1;
            }
            if s.get(j) == Some(&b')') {
                used = j + 1;
            }
        }
        return Strtod {
            value: f64::NAN,
            used,
            range_err: false,
        };
    }
    if (rest.starts_with(b"0x") || rest.starts_with(b"0X")) && hex_digits_follow(&rest[2..]) {
        let (v, used) = hex_float(&rest[2..]);
        let v = sign(v);
        let range_err = v.is_infinite() || (v == 0.0 && used.1);
        return Strtod {
            value: v,
            used: i + 2 + used.0,
            range_err,
        };
    }
    // Decimal: digits [. digits] [e [sign] digits], at least one mantissa digit.
    let mut j = 0;
    let mut mantissa_digits = 0;
    let mut nonzero = false;
    while j < rest.len() && rest[j].is_ascii_digit() {
        nonzero |= rest[j] != b'0';
        mantissa_digits += 1;
        j += 1;
    }
    if j < rest.len() && rest[j] == b'.' {
        j += 1;
        while j < rest.len() && rest[j].is_ascii_digit() {
            nonzero |= rest[j] != b'0';
            mantissa_digits += 1;
            j += 1;
        }
    }
    if mantissa_digits == 0 {
        return none;
    }
    if j < rest.len() && (rest[j] == b'e' || rest[j] == b'E') {
        let mut k = j + 1;
        if k < rest.len() && (rest[k] == b'+' || rest[k] == b'-') {
            k += 1;
        }
        if k < rest.len() && rest[k].is_ascii_digit() {
            while k < rest.len() && rest[k].is_ascii_digit() {
                k += 1;
            }
            j = k;
        }
    }
    // The slice is ASCII by construction; Rust's parser rounds correctly, like glibc.
    let text = std::str::from_utf8(&rest[..j]).unwrap_or("0");
    let v: f64 = text.parse().unwrap_or(0.0);
    Strtod {
        value: sign(v),
        used: i + j,
        range_err: v.is_infinite() || (v == 0.0 && nonzero),
    }
}

fn hex_digits_follow(s: &[u8]) -> bool {
    match s.first() {
        Some(c) if c.is_ascii_hexdigit() => true,
        Some(b'.') => s.get(1).is_some_and(|c| c.is_ascii_hexdigit()),
        _ => false,
    }
}

/// Hex float body after `0x`: returns the value and (bytes used, nonzero digits seen).
fn hex_float(s: &[u8]) -> (f64, (usize, bool)) {
    let mut mant: u64 = 0;
    let mut exp: i64 = 0;
    let mut sticky = false;
    let mut nonzero = false;
    let mut j = 0;
    let mut seen_dot = false;
    while j < s.len() {
        let c = s[j];
        if c == b'.' && !seen_dot {
            seen_dot = true;
            j += 1;
            continue;
        }
        let Some(d) = (c as char).to_digit(16) else {
            break;
        };
        nonzero |= d != 0;
        if mant >> 56 == 0 {
            mant = mant * 16 + u64::from(d);
            if seen_dot {
                exp -= 4;
            }
        } else {
            // Beyond 60 significant bits: keep only whether anything non-zero was dropped.
            sticky |= d != 0;
            if !seen_dot {
                exp += 4;
            }
        }
        j += 1;
    }
    if j < s.len() && (s[j] == b'p' || s[j] == b'P') {
        let mut k = j + 1;
        let eneg = match s.get(k) {
            Some(b'-') => {
                k += 1;
                true
            }
            Some(b'+') => {
                k += 1;
                false
            }
            _ => false,
        };
        if k < s.len() && s[k].is_ascii_digit() {
            let mut e: i64 = 0;
            while k < s.len() && s[k].is_ascii_digit() {
                e = (e * 10 + i64::from(s[k] - b'0')).min(1 << 20);
                k += 1;
            }
            exp += if eneg { -e } else { e };
            j = k;
        }
    }
    if sticky {
        mant |= 1;
    }
    let mut v = mant as f64;
    // Scale in steps that stay exact until the final one.
    let mut e = exp.clamp(-3000, 3000);
    while e > 0 {
        let step = e.min(1000);
        v *= 2f64.powi(step as i32);
        e -= step;
    }
    while e < 0 {
        let step = (-e).min(1000);
        v /= 2f64.powi(step as i32);
        e += step;
    }
    (v, (j, nonzero))
}

/// Redis `string2d`: the whole argument is one number, no leading space, no overflow or
/// underflow to zero, not NaN.
pub fn string2d(arg: &[u8]) -> Option<f64> {
    if arg.is_empty() || is_c_space(arg[0]) {
        return None;
    }
    let r = strtod(arg);
    if r.used != arg.len() || (r.range_err && (r.value.is_infinite() || r.value == 0.0)) {
        return None;
    }
    Some(r.value).filter(|v| !v.is_nan())
}

/// A score argument (`getDoubleFromObjectOrReply`).
pub fn score(arg: &[u8]) -> Result<f64, Reply> {
    string2d(arg).ok_or_else(|| errors::err(errors::NOT_FLOAT))
}

/// One end of a score range: optional `(`, then `strtod` up to the end or a NUL byte.
fn score_bound(arg: &[u8]) -> Option<(f64, bool)> {
    let (ex, body) = match arg.first() {
        Some(b'(') => (true, &arg[1..]),
        _ => (false, arg),
    };
    let r = strtod(body);
    if r.used < body.len() && body[r.used] != 0 {
        return None;
    }
    Some((r.value, ex)).filter(|(v, _)| !v.is_nan())
}

/// `zslParseRange`, with Redis's error.
pub fn score_range(min: &[u8], max: &[u8]) -> Result<ScoreRange, Reply> {
    match (score_bound(min), score_bound(max)) {
        (Some((min, minex)), Some((max, maxex))) => Ok(ScoreRange {
            min,
            max,
            minex,
            maxex,
        }),
        _ => Err(errors::err(errors::ZSET_MINMAX_NOT_FLOAT)),
    }
}

/// `zslParseLexRangeItem`.
fn lex_bound(arg: &[u8]) -> Option<LexBound> {
    // Redis reads the item as a C string after the first byte for `+`/`-`.
    let alone = arg.len() == 1 || arg.get(1) == Some(&0);
    match arg.first()? {
        b'+' if alone => Some(LexBound::PosInf),
        b'-' if alone => Some(LexBound::NegInf),
        b'(' => Some(LexBound::Excl(Bytes::copy_from_slice(&arg[1..]))),
        b'[' => Some(LexBound::Incl(Bytes::copy_from_slice(&arg[1..]))),
        _ => None,
    }
}

/// `zslParseLexRange`, with Redis's error.
pub fn lex_range(min: &[u8], max: &[u8]) -> Result<LexRange, Reply> {
    match (lex_bound(min), lex_bound(max)) {
        (Some(min), Some(max)) => Ok(LexRange { min, max }),
        _ => Err(errors::err(errors::ZSET_LEX_RANGE)),
    }
}

/// `getLongFromObjectOrReply`.
pub fn long(arg: &[u8]) -> Result<i64, Reply> {
    parse_i64(arg).ok_or_else(errors::not_int)
}

/// `getPositiveLongFromObjectOrReply` with its default message, which Redis also gives for
/// a non-integer.
pub fn positive_long(arg: &[u8]) -> Result<i64, Reply> {
    parse_i64(arg)
        .filter(|&n| n >= 0)
        .ok_or_else(|| errors::err(errors::MUST_BE_POSITIVE))
}

/// `getRangeLongFromObjectOrReply(1, LONG_MAX, msg)`: both failures reply `msg`.
pub fn long_at_least_one(arg: &[u8], msg: &'static str) -> Result<i64, Reply> {
    parse_i64(arg)
        .filter(|&n| n >= 1)
        .ok_or_else(|| errors::err(msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string2d_like_redis() {
        assert_eq!(string2d(b"1.5"), Some(1.5));
        assert_eq!(string2d(b"0x10"), Some(16.0));
        assert_eq!(string2d(b"0x1p3"), Some(8.0));
        assert_eq!(string2d(b"-0x.8"), Some(-0.5));
        assert_eq!(string2d(b"+inf"), Some(f64::INFINITY));
        assert_eq!(string2d(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(string2d(b"1e5"), Some(100000.0));
        assert_eq!(string2d(b".5"), Some(0.5));
        assert_eq!(string2d(b"5."), Some(5.0));
        assert_eq!(string2d(b"4.9e-324"), Some(4.9e-324));
        for bad in [
            &b""[..],
            b" 1",
            b"1 ",
            b"nan",
            b"1e400",
            b"1e-400",
            b"abc",
            b"1e",
            b"0x",
            b"1\x002",
            b".",
            b"--1",
        ] {
            assert_eq!(string2d(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn score_ranges_like_zsl_parse_range() {
        let r = |a: &[u8], b: &[u8]| score_range(a, b).ok();
        let got = r(b"(1", b"+inf").map(|x| (x.min, x.minex, x.max, x.maxex));
        assert_eq!(got, Some((1.0, true, f64::INFINITY, false)));
        // strtod accepts leading spaces, an empty string (0) and stops at a NUL byte.
        assert_eq!(r(b" 1", b"").map(|x| (x.min, x.max)), Some((1.0, 0.0)));
        assert_eq!(
            r(b"(", b"2\x00junk").map(|x| (x.min, x.max)),
            Some((0.0, 2.0))
        );
        assert_eq!(r(b"1e400", b"1").map(|x| x.min), Some(f64::INFINITY));
        assert!(r(b"1 ", b"2").is_none());
        assert!(r(b"nan", b"2").is_none());
        assert!(r(b"[1", b"2").is_none());
    }

    #[test]
    fn lex_ranges_like_zsl_parse_lex_range() {
        assert!(lex_range(b"-", b"+").is_ok());
        assert!(lex_range(b"+\x00x", b"[a").is_ok());
        assert!(lex_range(b"(", b"[").is_ok());
        assert!(lex_range(b"a", b"+").is_err());
        assert!(lex_range(b"", b"+").is_err());
        assert!(lex_range(b"-x", b"+").is_err());
    }
}
