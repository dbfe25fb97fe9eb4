//! Ziplists (ziplist.c), decode only: Redis before 7.0 saved small lists, hashes and sorted
//! sets as ziplists, and 7.x still loads them. Layout: total bytes (u32 LE), offset of the
//! last entry (u32 LE), count (u16 LE, 65535 = "count it"), entries, 0xFF. An entry is the
//! previous entry's length (1 byte, or 0xFE + u32 LE), an encoding and its data.

use super::listpack::Entry;
use super::Bad;

/// Parses and validates a ziplist into its elements.
pub fn parse(zl: &[u8]) -> Result<Vec<Entry<'_>>, Bad> {
    if zl.len() < 11 {
        return Err(Bad);
    }
    let total = u32::from_le_bytes([zl[0], zl[1], zl[2], zl[3]]) as usize;
    let tail = u32::from_le_bytes([zl[4], zl[5], zl[6], zl[7]]) as usize;
    let count = usize::from(u16::from_le_bytes([zl[8], zl[9]]));
    if total != zl.len() || zl[total - 1] != 0xFF {
        return Err(Bad);
    }
    let end = total - 1;
    let mut out = Vec::with_capacity(count.min(end / 2));
    let mut p = 10usize;
    let mut prev_len = 0usize;
    let mut last_start = 10usize;
    let get = |a: usize, n: usize| -> Result<&[u8], Bad> {
        let stop = a.checked_add(n).ok_or(Bad)?;
        if stop > end {
            return Err(Bad);
        }
        Ok(&zl[a..stop])
    };
    while p < end {
        let start = p;
        let b = get(p, 1)?[0];
        let prev = if b < 254 {
            p += 1;
            usize::from(b)
        } else if b == 254 {
            let l = get(p + 1, 4)?;
            p += 5;
            u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize
        } else {
            return Err(Bad);
        };
        if prev != prev_len {
            return Err(Bad);
        }
        let e = get(p, 1)?[0];
        let (entry, used) = match e >> 6 {
            0 => {
                let n = usize::from(e & 0x3F);
                (Entry::Str(get(p + 1, n)?), 1 + n)
            }
            1 => {
                let n = (usize::from(e & 0x3F) << 8) | usize::from(get(p + 1, 1)?[0]);
                (Entry::Str(get(p + 2, n)?), 2 + n)
            }
            2 => {
                if e != 0x80 {
                    return Err(Bad);
                }
                let l = get(p + 1, 4)?;
                let n = u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize;
                (Entry::Str(get(p + 5, n)?), 5 + n)
            }
            _ => {
                let int = |n: usize| -> Result<i64, Bad> {
                    let d = get(p + 1, n)?;
                    let mut a = [0u8; 8];
                    a[..n].copy_from_slice(d);
                    let shift = 64 - 8 * n as u32;
                    Ok((i64::from_le_bytes(a) << shift) >> shift)
                };
                match e {
                    0xC0 => (Entry::Int(int(2)?), 3),
                    0xD0 => (Entry::Int(int(4)?), 5),
                    0xE0 => (Entry::Int(int(8)?), 9),
                    0xF0 => (Entry::Int(int(3)?), 4),
                    0xFE => (Entry::Int(int(1)?), 2),
                    0xF1..=0xFD => (Entry::Int(i64::from(e & 0x0F) - 1), 1),
                    _ => return Err(Bad),
                }
            }
        };
        p += used;
        prev_len = p - start;
        last_start = start;
        out.push(entry);
    }
    let expect_tail = if out.is_empty() { 10 } else { last_start };
    if tail != expect_tail || (count != usize::from(u16::MAX) && count != out.len()) {
        return Err(Bad);
    }
    Ok(out)
}

/// Builds a ziplist the way Redis 6 would (small strings and 16-bit integers), for tests and
/// fuzzing seeds.
pub(crate) fn build(items: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut prev = 0usize;
    let mut last = 10usize;
    for it in items {
        let start = body.len();
        last = 10 + start;
        body.push(prev as u8);
        match super::canonical_int(it) {
            Some(v) if (0..=12).contains(&v) => body.push(0xF1 + v as u8),
            Some(v) if i16::try_from(v).is_ok() => {
                body.push(0xC0);
                body.extend_from_slice(&(v as i16).to_le_bytes());
            }
            _ => {
                body.push(it.len() as u8);
                body.extend_from_slice(it);
            }
        }
        prev = body.len() - start;
    }
    let mut zl = Vec::new();
    zl.extend_from_slice(&((11 + body.len()) as u32).to_le_bytes());
    zl.extend_from_slice(&(last as u32).to_le_bytes());
    zl.extend_from_slice(&(items.len() as u16).to_le_bytes());
    zl.extend_from_slice(&body);
    zl.push(0xFF);
    zl
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        let zl = build(&[b"a", b"7", b"-300", b"hello"]);
        assert_eq!(
            parse(&zl).unwrap(),
            vec![
                Entry::Str(b"a"),
                Entry::Int(7),
                Entry::Int(-300),
                Entry::Str(b"hello")
            ]
        );
        for cut in 0..zl.len() {
            assert!(parse(&zl[..cut]).is_err());
        }
        assert_eq!(parse(&build(&[])).unwrap(), vec![]);
    }
}
