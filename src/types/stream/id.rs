//! Stream entry IDs (`<ms>-<seq>`) and Redis's parsing rules for them
//! (`streamGenericParseIDOrReply`, `string2ull`).

use std::fmt;

/// An entry ID: milliseconds and sequence, ordered as a 128-bit number.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    pub fn is_zero(&self) -> bool {
        self.ms == 0 && self.seq == 0
    }

    /// The successor (`streamIncrID`); `None` past the last possible ID.
    pub fn incr(self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                return None;
            }
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            Some(StreamId::new(self.ms, self.seq + 1))
        }
    }

    /// The predecessor (`streamDecrID`); `None` before 0-0.
    pub fn decr(self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                return None;
            }
            Some(StreamId::new(self.ms - 1, u64::MAX))
        } else {
            Some(StreamId::new(self.ms, self.seq - 1))
        }
    }

    /// The 128-bit big-endian form Redis uses as radix-tree key.
    pub fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.ms.to_be_bytes());
        b[8..].copy_from_slice(&self.seq.to_be_bytes());
        b
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// A parsed ID argument. `seq_given` is false for the `<ms>-*` form (XADD only).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ParsedId {
    pub id: StreamId,
    pub seq_given: bool,
}

/// How an ID argument may be written.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct IdRules {
    /// Sequence used when only `<ms>` is given.
    pub missing_seq: u64,
    /// `-` and `+` are refused (`streamParseStrictIDOrReply`).
    pub strict: bool,
    /// `<ms>-*` is accepted (XADD).
    pub seq_star: bool,
}

impl IdRules {
    pub const STRICT: IdRules = IdRules {
        missing_seq: 0,
        strict: true,
        seq_star: false,
    };
    pub const LOOSE: IdRules = IdRules {
        missing_seq: 0,
        strict: false,
        seq_star: false,
    };
}

/// Parses an ID as Redis does; `None` means "Invalid stream ID specified as stream command
/// argument". Redis copies the argument into a C buffer of 128 bytes, so longer arguments
/// fail and an embedded NUL ends the text.
pub fn parse(arg: &[u8], rules: IdRules) -> Option<ParsedId> {
    if arg.len() > 127 {
        return None;
    }
    let s = match arg.iter().position(|&b| b == 0) {
        Some(n) => &arg[..n],
        None => arg,
    };
    if rules.strict && (s == b"-" || s == b"+") {
        return None;
    }
    if s == b"-" {
        return Some(ParsedId {
            id: StreamId::MIN,
            seq_given: true,
        });
    }
    if s == b"+" {
        return Some(ParsedId {
            id: StreamId::MAX,
            seq_given: true,
        });
    }
    let (ms_part, seq_part) = match s.iter().position(|&b| b == b'-') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let ms = string2ull(ms_part)?;
    let (seq, seq_given) = match seq_part {
        Some(b"*") if rules.seq_star => (0, false),
        Some(p) => (string2ull(p)?, true),
        None => (rules.missing_seq, true),
    };
    Some(ParsedId {
        id: StreamId::new(ms, seq),
        seq_given,
    })
}

/// A range bound (`streamParseIntervalIDOrReply`): `(` makes it exclusive and strict.
/// Returns the ID and whether it was exclusive.
pub fn parse_interval(arg: &[u8], missing_seq: u64) -> Option<(StreamId, bool)> {
    if arg.len() > 1 && arg[0] == b'(' {
        let rules = IdRules {
            missing_seq,
            strict: true,
            seq_star: false,
        };
        return parse(&arg[1..], rules).map(|p| (p.id, true));
    }
    let rules = IdRules {
        missing_seq,
        strict: false,
        seq_star: false,
    };
    parse(arg, rules).map(|p| (p.id, false))
}

/// Redis's `string2ull`: `string2ll` when it works (negative values fail), else C's
/// `strtoull` over the whole text (leading blanks and a sign allowed; `-n` wraps around).
fn string2ull(s: &[u8]) -> Option<u64> {
    if let Some(v) = crate::num::parse_i64(s) {
        return u64::try_from(v).ok();
    }
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r') {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let digits = &s[i..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str, rules: IdRules) -> Option<(u64, u64, bool)> {
        parse(s.as_bytes(), rules).map(|p| (p.id.ms, p.id.seq, p.seq_given))
    }

    #[test]
    fn forms() {
        let star = IdRules {
            seq_star: true,
            ..IdRules::STRICT
        };
        assert_eq!(p("1-2", IdRules::STRICT), Some((1, 2, true)));
        assert_eq!(p("5", IdRules::STRICT), Some((5, 0, true)));
        assert_eq!(p("5-*", star), Some((5, 0, false)));
        assert_eq!(p("5-*", IdRules::STRICT), None);
        assert_eq!(p("-", IdRules::STRICT), None);
        assert_eq!(p("+", IdRules::LOOSE), Some((u64::MAX, u64::MAX, true)));
        assert_eq!(p("-", IdRules::LOOSE), Some((0, 0, true)));
        assert_eq!(p("", IdRules::LOOSE), None);
        assert_eq!(p("-5", IdRules::LOOSE), None);
        assert_eq!(p("1--1", IdRules::LOOSE), None);
        assert_eq!(p("1--0", IdRules::LOOSE), Some((1, 0, true)));
        assert_eq!(p("01-+2", IdRules::LOOSE), Some((1, 2, true)));
        assert_eq!(
            p("18446744073709551615-1", IdRules::LOOSE),
            Some((u64::MAX, 1, true))
        );
        assert_eq!(p("18446744073709551616", IdRules::LOOSE), None);
        assert_eq!(p("1-x", IdRules::LOOSE), None);
        assert_eq!(parse(&[b'7'; 128], IdRules::LOOSE), None);
    }

    #[test]
    fn intervals_and_steps() {
        assert_eq!(
            parse_interval(b"(1-1", 0),
            Some((StreamId::new(1, 1), true))
        );
        assert_eq!(parse_interval(b"(-", 0), None);
        assert_eq!(parse_interval(b"(", 0), None);
        assert_eq!(
            parse_interval(b"3", u64::MAX),
            Some((StreamId::new(3, u64::MAX), false))
        );
        assert_eq!(StreamId::MAX.incr(), None);
        assert_eq!(StreamId::MIN.decr(), None);
        assert_eq!(StreamId::new(1, u64::MAX).incr(), Some(StreamId::new(2, 0)));
        assert_eq!(StreamId::new(2, 0).decr(), Some(StreamId::new(1, u64::MAX)));
        assert_eq!(StreamId::new(3, 4).to_string(), "3-4");
    }
}
