//! Pure bit logic behind the bitmap commands (Redis `bitops.c`): argument parsing, ranges,
//! popcount, bit search, BITOP and the BITFIELD integer codec with its overflow rules.
//! Bit 0 is the most significant bit of the first byte, as in Redis.

use crate::num::parse_i64;

/// `getBitOffsetFromArgument`: a non-negative bit offset whose byte is below
/// `proto-max-bulk-len`. With `bits > 0` (BITFIELD), `#N` means `N * bits`.
pub fn parse_offset(arg: &[u8], bits: u32, max_bulk: u64) -> Option<u64> {
    let hash = bits > 0 && arg.first() == Some(&b'#');
    let mut off = parse_i64(if hash { &arg[1..] } else { arg })?;
    if hash {
        // Redis multiplies in a C long long; it wraps on overflow, so we do too.
        off = off.wrapping_mul(i64::from(bits));
    }
    if off < 0 || (off as u64 >> 3) >= max_bulk {
        return None;
    }
    Some(off as u64)
}

/// A BITFIELD type (`i1`..`i64`, `u1`..`u63`): (signed, bits). The digits are read as a C
/// string (up to a NUL byte), as Redis's `strlen` does.
pub fn parse_type(arg: &[u8]) -> Option<(bool, u32)> {
    let signed = match arg.first()? {
        b'i' => true,
        b'u' => false,
        _ => return None,
    };
    let rest = &arg[1..];
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    let bits = parse_i64(&rest[..end])?;
    let max = if signed { 64 } else { 63 };
    (1..=max).contains(&bits).then_some((signed, bits as u32))
}

/// Whole aligned words at a time: a 512 MB bitmap (SETBIT's last offset) is counted in 64 M
/// steps, which also keeps unoptimized test builds within their reply timeouts.
fn popcount(data: &[u8]) -> u64 {
    let (head, words, tail) = unsafe /* SAFETY: any bits are a valid u64; align_to leaves the ends as bytes */ {
        data.align_to::<u64>()
    };
    let mut n = 0u64;
    for w in words {
        n += u64::from(w.count_ones());
    }
    for b in head.iter().chain(tail) {
        n += u64::from(b.count_ones());
    }
    n
}

/// Index of the first byte of `data` that is not `skip`, scanning whole words where aligned.
fn first_not(data: &[u8], skip: u8) -> Option<usize> {
    let (head, words, _) = unsafe /* SAFETY: any bits are a valid u64; align_to leaves the ends as bytes */ {
        data.align_to::<u64>()
    };
    if let Some(i) = head.iter().position(|&b| b != skip) {
        return Some(i);
    }
    let skip_word = u64::from_ne_bytes([skip; 8]);
    let mut at = head.len();
    for &w in words {
        if w != skip_word {
            break;
        }
        at += 8;
    }
    data[at..].iter().position(|&b| b != skip).map(|i| at + i)
}

fn range(
    len: usize,
    mut start: i64,
    mut end: i64,
    bit_unit: bool,
) -> Option<(usize, usize, u8, u8)> {
    let mut total = len as i64;
    if bit_unit {
        total <<= 3;
    }
    if start < 0 {
        start += total;
    }
    if end < 0 {
        end += total;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    if start > end {
        return None;
    }
    let (mut first_mask, mut last_mask) = (0u8, 0u8);
    if bit_unit {
        // Bits of the edge bytes that lie outside the range.
        first_mask = !(0xffu16 >> (start & 7)) as u8;
        last_mask = ((1u16 << (7 - (end & 7))) - 1) as u8;
        start >>= 3;
        end >>= 3;
    }
    Some((start as usize, end as usize, first_mask, last_mask))
}

/// BITCOUNT over an explicit range.
pub fn count_range(data: &[u8], start: i64, end: i64, bit_unit: bool) -> u64 {
    // Both negative and crossed: Redis answers 0 before clamping.
    if start < 0 && end < 0 && start > end {
        return 0;
    }
    let Some((s, e, fm, lm)) = range(data.len(), start, end, bit_unit) else {
        return 0;
    };
    let mut n = popcount(&data[s..=e]);
    n -= u64::from((data[s] & fm).count_ones());
    n -= u64::from((data[e] & lm).count_ones());
    n
}

pub fn count_all(data: &[u8]) -> u64 {
    popcount(data)
}

/// First `bit` in the inclusive bit range of bytes `s..=e`, where `fm`/`lm` mask the bits of
/// the edge bytes that lie outside it.
fn find(data: &[u8], bit: bool, s: usize, e: usize, fm: u8, lm: u8) -> Option<u64> {
    // Out-of-range bits read as the value we are not looking for.
    let view = |i: usize| -> u8 {
        let mut b = data[i];
        let mut mask = 0;
        if i == s {
            mask |= fm;
        }
        if i == e {
            mask |= lm;
        }
        if bit {
            b &= !mask;
        } else {
            b |= mask;
        }
        if bit {
            b
        } else {
            !b
        }
    };
    let hit = |i: usize| {
        let b = view(i);
        (b != 0).then(|| i as u64 * 8 + u64::from(b.leading_zeros()))
    };
    if let Some(p) = hit(s) {
        return Some(p);
    }
    if e == s {
        return None;
    }
    let skip = if bit { 0 } else { 0xff };
    let inner = &data[s + 1..e];
    if let Some(i) = first_not(inner, skip) {
        return hit(s + 1 + i);
    }
    hit(e)
}

/// BITPOS on an existing string. `start`/`end` as given (None when absent).
pub fn bitpos(data: &[u8], bit: bool, start: Option<i64>, end: Option<i64>, bit_unit: bool) -> i64 {
    let len = data.len();
    let (s, e) = (start.unwrap_or(0), end.unwrap_or(len as i64 - 1));
    let Some((s, e, fm, lm)) = range(len, s, e, bit_unit) else {
        return -1;
    };
    match find(data, bit, s, e, fm, lm) {
        Some(p) => p as i64,
        None if bit || end.is_some() => -1,
        // Looking for a clear bit with no explicit end: the string is taken as padded with
        // zeros on the right, so the first bit past its last byte.
        None => (e as i64 + 1) * 8,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// BITOP over the sources (missing keys are empty strings): the result is as long as the
/// longest source, shorter ones read as zero-padded.
pub fn bitop(op: BitOp, srcs: &[&[u8]]) -> Vec<u8> {
    let max = srcs.iter().map(|s| s.len()).max().unwrap_or(0);
    let Some((first, rest)) = srcs.split_first() else {
        return Vec::new();
    };
    let mut out = vec![0u8; max];
    out[..first.len()].copy_from_slice(first);
    match op {
        BitOp::Not => out.iter_mut().for_each(|b| *b = !*b),
        BitOp::And => {
            for s in rest {
                for (o, b) in out.iter_mut().zip(s.iter()) {
                    *o &= b;
                }
                // Past a source's end its bytes are zero.
                out[s.len()..].iter_mut().for_each(|o| *o = 0);
            }
        }
        BitOp::Or | BitOp::Xor => {
            for s in rest {
                for (o, b) in out.iter_mut().zip(s.iter()) {
                    if op == BitOp::Or {
                        *o |= b;
                    } else {
                        *o ^= b;
                    }
                }
            }
        }
    }
    out
}

/// Byte at `i`, zero past the end (the buffer is read as zero-padded).
fn byte_at(p: &[u8], i: u64) -> u8 {
    usize::try_from(i)
        .ok()
        .and_then(|i| p.get(i))
        .copied()
        .unwrap_or(0)
}

pub fn get_unsigned(p: &[u8], offset: u64, bits: u32) -> u64 {
    let mut v = 0u64;
    for j in 0..u64::from(bits) {
        let o = offset + j;
        let bit = (byte_at(p, o >> 3) >> (7 - (o & 7))) & 1;
        v = (v << 1) | u64::from(bit);
    }
    v
}

pub fn get_signed(p: &[u8], offset: u64, bits: u32) -> i64 {
    let mut v = get_unsigned(p, offset, bits);
    if bits < 64 && v & (1u64 << (bits - 1)) != 0 {
        v |= u64::MAX << bits;
    }
    v as i64
}

/// Writes the low `bits` of `value`; bits past the buffer's end are dropped (callers grow
/// the buffer first, as Redis does).
pub fn set_unsigned(p: &mut [u8], offset: u64, bits: u32, value: u64) {
    for j in 0..u64::from(bits) {
        let bit = (value >> (u64::from(bits) - 1 - j)) & 1;
        let o = offset + j;
        let Some(b) = usize::try_from(o >> 3).ok().and_then(|i| p.get_mut(i)) else {
            continue;
        };
        let shift = 7 - (o & 7);
        *b = (*b & !(1 << shift)) | ((bit as u8) << shift);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// `checkUnsignedBitfieldOverflow`: None if `value + incr` fits in `bits` unsigned bits,
/// else the value to store (None inside for FAIL).
pub fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> Option<Option<u64>> {
    let max = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = value.wrapping_neg() as i64;
    let wrap = || {
        let mask = if bits >= 64 { 0 } else { u64::MAX << bits };
        value.wrapping_add(incr as u64) & !mask
    };
    let limit = if value > max || (incr > 0 && incr > maxincr) {
        max
    } else if incr < 0 && incr < minincr {
        0
    } else {
        return None;
    };
    Some(match ow {
        Overflow::Wrap => Some(wrap()),
        Overflow::Sat => Some(limit),
        Overflow::Fail => None,
    })
}

/// `checkSignedBitfieldOverflow`, same contract as [`unsigned_overflow`].
pub fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> Option<Option<i64>> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    let wrap = || {
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if c & (1u64 << (bits - 1)) != 0 {
                c |= mask;
            } else {
                c &= !mask;
            }
        }
        c as i64
    };
    let limit = if value > max
        || (bits != 64 && incr > maxincr)
        || (value >= 0 && incr > 0 && incr > maxincr)
    {
        max
    } else if value < min
        || (bits != 64 && incr < minincr)
        || (value < 0 && incr < 0 && incr < minincr)
    {
        min
    } else {
        return None;
    };
    Some(match ow {
        Overflow::Wrap => Some(wrap()),
        Overflow::Sat => Some(limit),
        Overflow::Fail => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: u64 = 512 * 1024 * 1024;

    #[test]
    fn offsets() {
        assert_eq!(parse_offset(b"7", 0, MAX), Some(7));
        assert_eq!(parse_offset(b"-1", 0, MAX), None);
        assert_eq!(parse_offset(b"#2", 0, MAX), None);
        assert_eq!(parse_offset(b"#2", 8, MAX), Some(16));
        assert_eq!(parse_offset(b"", 8, MAX), None);
        assert_eq!(parse_offset(b"4294967295", 0, MAX), Some(4294967295));
        assert_eq!(parse_offset(b"4294967296", 0, MAX), None);
    }

    #[test]
    fn types() {
        assert_eq!(parse_type(b"i64"), Some((true, 64)));
        assert_eq!(parse_type(b"u63"), Some((false, 63)));
        assert_eq!(parse_type(b"u64"), None);
        assert_eq!(parse_type(b"i0"), None);
        assert_eq!(parse_type(b"I8"), None);
        assert_eq!(parse_type(b"u8\0x"), Some((false, 8)));
        assert_eq!(parse_type(b"u"), None);
    }

    #[test]
    fn counting() {
        let d = b"foobar";
        assert_eq!(count_all(d), 26);
        assert_eq!(count_range(d, 0, 0, false), 4);
        assert_eq!(count_range(d, 1, 1, false), 6);
        assert_eq!(count_range(d, 5, 30, true), 17);
        assert_eq!(count_range(d, -2, -1, false), 7);
        assert_eq!(count_range(d, -1, -2, false), 0);
        assert_eq!(count_range(d, -100, -200, false), 0);
        assert_eq!(count_range(b"", 0, -1, false), 0);
    }

    #[test]
    fn word_scans_match_byte_scans_at_every_alignment() {
        let mut buf = [0u8; 80];
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37) ^ 0x5a;
        }
        for start in 0..9 {
            for len in 0..(80 - start) {
                let d = &buf[start..start + len];
                let naive: u64 = d.iter().map(|b| u64::from(b.count_ones())).sum();
                assert_eq!(popcount(d), naive, "start {start} len {len}");
            }
        }
        for skip in [0u8, 0xff] {
            for start in 0..9 {
                for hit in 0..44 {
                    let mut d = [skip; 48];
                    let expect = (hit < 48 - start).then_some(hit);
                    if let Some(h) = expect {
                        d[start + h] = 0x10;
                    }
                    assert_eq!(
                        first_not(&d[start..], skip),
                        expect,
                        "skip {skip} start {start} hit {hit}"
                    );
                }
            }
        }
    }

    #[test]
    fn positions() {
        assert_eq!(bitpos(b"\xff\xf0\x00", false, None, None, false), 12);
        assert_eq!(bitpos(b"\x00\xff\xf0", true, Some(0), None, false), 8);
        assert_eq!(bitpos(b"\x00\xff\xf0", true, Some(2), Some(-1), false), 16);
        assert_eq!(bitpos(b"\x00\x00\x00", true, None, None, false), -1);
        assert_eq!(bitpos(b"\xff\xff", false, None, None, false), 16);
        assert_eq!(bitpos(b"\xff\xff", false, Some(0), Some(-1), false), -1);
        assert_eq!(bitpos(b"\x00\xff\xf0", true, Some(7), Some(15), true), 8);
        assert_eq!(bitpos(b"\x00\xff\xf0", false, Some(7), Some(15), true), 7);
        assert_eq!(bitpos(b"", false, None, None, false), -1);
    }

    #[test]
    fn ops() {
        assert_eq!(bitop(BitOp::And, &[b"\xff\x0f", b"\x0f"]), b"\x0f\x00");
        assert_eq!(bitop(BitOp::Or, &[b"\xf0", b"\x0f\x01"]), b"\xff\x01");
        assert_eq!(bitop(BitOp::Xor, &[b"\xff", b"\x0f", b""]), b"\xf0");
        assert_eq!(bitop(BitOp::Not, &[b"\x0f"]), b"\xf0");
        assert!(bitop(BitOp::Or, &[b"", b""]).is_empty());
    }

    #[test]
    fn fields() {
        let mut p = [0u8; 2];
        set_unsigned(&mut p, 7, 5, 23);
        assert_eq!(p, [0b0000_0001, 0b0111_0000]);
        assert_eq!(get_unsigned(&p, 7, 5), 23);
        assert_eq!(get_signed(&p, 7, 5), -9);
        assert_eq!(get_unsigned(&p, 100, 8), 0);
        set_unsigned(&mut p, 0, 64, u64::MAX); // clipped to the buffer
        assert_eq!(p, [0xff, 0xff]);
    }

    #[test]
    fn overflow_rules() {
        use Overflow::*;
        assert_eq!(unsigned_overflow(200, 100, 8, Wrap), Some(Some(44)));
        assert_eq!(unsigned_overflow(200, 100, 8, Sat), Some(Some(255)));
        assert_eq!(unsigned_overflow(200, 100, 8, Fail), Some(None));
        assert_eq!(unsigned_overflow(5, -10, 8, Sat), Some(Some(0)));
        assert_eq!(unsigned_overflow(5, -10, 8, Wrap), Some(Some(251)));
        assert_eq!(unsigned_overflow(5, 10, 8, Wrap), None);
        assert_eq!(unsigned_overflow(u64::MAX, 0, 8, Wrap), Some(Some(255)));
        assert_eq!(signed_overflow(100, 100, 8, Wrap), Some(Some(-56)));
        assert_eq!(signed_overflow(100, 100, 8, Sat), Some(Some(127)));
        assert_eq!(signed_overflow(-100, -100, 8, Sat), Some(Some(-128)));
        assert_eq!(signed_overflow(i64::MAX, 1, 64, Wrap), Some(Some(i64::MIN)));
        assert_eq!(signed_overflow(i64::MIN, -1, 64, Sat), Some(Some(i64::MIN)));
        assert_eq!(signed_overflow(-5, 3, 64, Wrap), None);
        assert_eq!(signed_overflow(300, 0, 8, Wrap), Some(Some(44)));
    }
}
