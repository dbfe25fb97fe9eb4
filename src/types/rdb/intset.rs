//! Intsets (intset.c): the sorted integer array Redis stores small all-integer sets in and
//! saves verbatim. Layout: element width (u32 LE: 2, 4 or 8), count (u32 LE), the values
//! ascending, little-endian, all at the width of the widest.

use super::Bad;

/// Encodes sorted, distinct values (`intsetAdd` picks the smallest width holding them all).
pub fn encode(values: &[i64]) -> Vec<u8> {
    let width: usize = match values
        .iter()
        .fold((0i64, 0i64), |(lo, hi), &v| (lo.min(v), hi.max(v)))
    {
        (lo, hi) if lo >= i64::from(i16::MIN) && hi <= i64::from(i16::MAX) => 2,
        (lo, hi) if lo >= i64::from(i32::MIN) && hi <= i64::from(i32::MAX) => 4,
        _ => 8,
    };
    let mut out = Vec::with_capacity(8 + width * values.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for &v in values {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

/// Decodes and validates (`intsetValidateIntegrity` with deep checks): a known width, the
/// exact byte size, strictly ascending values.
pub fn decode(b: &[u8]) -> Result<Vec<i64>, Bad> {
    let head = b.get(..8).ok_or(Bad)?;
    let width = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let count = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
    if !matches!(width, 2 | 4 | 8) || count.checked_mul(width) != Some(b.len() - 8) {
        return Err(Bad);
    }
    let mut out: Vec<i64> = Vec::with_capacity(count);
    for chunk in b[8..].chunks_exact(width) {
        let v = match width {
            2 => i64::from(i16::from_le_bytes([chunk[0], chunk[1]])),
            4 => i64::from(i32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]])),
            _ => {
                let mut a = [0u8; 8];
                a.copy_from_slice(chunk);
                i64::from_le_bytes(a)
            }
        };
        if out.last().is_some_and(|&p| p >= v) {
            return Err(Bad);
        }
        out.push(v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_and_round_trip() {
        // SADD s 1 2 3 on redis-server: 02000000 03000000 0100 0200 0300.
        assert_eq!(
            encode(&[1, 2, 3]),
            b"\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00\x03\x00"
        );
        for vals in [vec![-5i64, 70000], vec![i64::MIN, 0, i64::MAX], vec![]] {
            let e = encode(&vals);
            assert_eq!(decode(&e).unwrap(), vals);
        }
        assert!(decode(b"\x02\x00\x00\x00\x02\x00\x00\x00\x03\x00\x01\x00").is_err());
        assert!(decode(b"\x03\x00\x00\x00\x00\x00\x00\x00").is_err());
        assert!(decode(b"\x02\x00\x00\x00\x02\x00\x00\x00\x03\x00").is_err());
    }
}
