//! Number ⇄ text as Redis writes and reads it: strict integers (`string2ll`) and doubles
//! (`d2string`, `fpconv`, `%.17g`). The bottom of the crate: protocol, types, engine and the
//! command families all convert numbers the same way, so it imports nothing.

pub mod dtoa;

/// Redis `string2ll`: strict decimal, optional leading '-', no spaces or '+'. Inline: the
/// request parser reads every length with it.
#[inline]
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

/// Formats a double the way Redis 7.2 prints it in replies (`d2string`, see [`dtoa`]).
pub fn format_double(d: f64) -> String {
    dtoa::d2string(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_integers() {
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b"01"), None);
        assert_eq!(parse_i64(b"-0"), None);
    }
}
