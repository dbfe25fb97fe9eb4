//! Number and range parsing exactly as Redis's sorted-set code does it: C `strtod` (leading
//! spaces, hex floats, `inf`/`infinity`, text ending at a NUL byte) under the checks of
//! `string2d` (scores, weights), `zslParseRange` (score ranges), `zslParseLexRange` (lex
//! ranges) and `string2ld` (blocking timeouts).

use super::super::errors;
use super::super::strtod::{is_c_space, strtod};
use crate::num::parse_i64;
use crate::protocol::Reply;
use crate::types::zset::{LexBound, LexRange, ScoreRange};
use bytes::Bytes;

/// Redis `string2d`: the whole argument is one number, no leading space, no overflow or
/// underflow to zero, not NaN.
pub fn string2d(arg: &[u8]) -> Option<f64> {
    if let Some(v) = plain_integer(arg) {
        return Some(v);
    }
    if arg.is_empty() || is_c_space(arg[0]) {
        return None;
    }
    let r = strtod(arg);
    if r.used != arg.len() || (r.range_err && (r.value.is_infinite() || r.value == 0.0)) {
        return None;
    }
    Some(r.value).filter(|v| !v.is_nan())
}

/// The common score: an optionally signed run of at most 15 decimal digits (leading zeros
/// allowed, as redis-benchmark sends them), which strtod reads exactly (10^15 < 2^53), so
/// the value is what strtod would return, `-0` giving -0.0 included.
fn plain_integer(arg: &[u8]) -> Option<f64> {
    let digits = match arg.first()? {
        b'-' | b'+' => &arg[1..],
        _ => arg,
    };
    if digits.is_empty() || digits.len() > 15 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = digits
        .iter()
        .fold(0u64, |v, &d| v * 10 + u64::from(d - b'0')) as f64;
    Some(if arg[0] == b'-' { -v } else { v })
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
    fn integer_fast_path_is_strtod() {
        for arg in [
            &b"0"[..],
            b"-0",
            b"+0",
            b"-000",
            b"000000012345",
            b"-42",
            b"+42",
            b"999999999999999",
            b"-999999999999999",
        ] {
            let fast = plain_integer(arg).expect("plain integer");
            let slow = strtod(arg);
            assert_eq!(slow.used, arg.len());
            assert_eq!(fast.to_bits(), slow.value.to_bits(), "{arg:?}");
            assert_eq!(string2d(arg).map(f64::to_bits), Some(slow.value.to_bits()));
        }
        for other in [
            &b"-"[..],
            b"+",
            b"1000000000000000",
            b"1.0",
            b"1e3",
            b"0x1",
            b" 1",
        ] {
            assert_eq!(plain_integer(other), None, "{other:?}");
        }
    }

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
