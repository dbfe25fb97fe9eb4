//! Zipmaps (zipmap.c), decode only: the small-hash encoding of Redis ≤ 2.4, which Redis 7
//! still loads. Layout: pair count (1 byte, 254+ = "count it"), then per pair the field
//! length, field, value length, a "free" byte count, value and that many unused bytes; 255
//! ends it. Lengths are one byte below 254, else 254 followed by a u32 LE.

use super::Bad;

const BIGLEN: u8 = 254;
const END: u8 = 255;

/// A field and its value.
pub type Pair<'a> = (&'a [u8], &'a [u8]);

/// Parses and validates a zipmap into its pairs.
pub fn parse(zm: &[u8]) -> Result<Vec<Pair<'_>>, Bad> {
    let declared = *zm.first().ok_or(Bad)?;
    let mut p = 1usize;
    let take = |p: &mut usize, n: usize| -> Result<&[u8], Bad> {
        let end = p.checked_add(n).ok_or(Bad)?;
        let s = zm.get(*p..end).ok_or(Bad)?;
        *p = end;
        Ok(s)
    };
    let len = |p: &mut usize| -> Result<usize, Bad> {
        let b = take(p, 1)?[0];
        match b {
            END => Err(Bad),
            BIGLEN => {
                let l = take(p, 4)?;
                Ok(u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize)
            }
            b => Ok(usize::from(b)),
        }
    };
    let mut out = Vec::new();
    loop {
        if *zm.get(p).ok_or(Bad)? == END {
            p += 1;
            break;
        }
        let klen = len(&mut p)?;
        let field = take(&mut p, klen)?;
        let vlen = len(&mut p)?;
        let free = usize::from(take(&mut p, 1)?[0]);
        let value = take(&mut p, vlen)?;
        take(&mut p, free)?;
        out.push((field, value));
    }
    if p != zm.len() || (declared < BIGLEN && usize::from(declared) != out.len()) {
        return Err(Bad);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        // {"foo" => "bar", "k" => "vv"} with one free byte after "bar".
        let zm = b"\x02\x03foo\x03\x01barX\x01k\x02\x00vv\xff";
        assert_eq!(
            parse(zm).unwrap(),
            vec![(&b"foo"[..], &b"bar"[..]), (b"k", b"vv")]
        );
        for cut in 0..zm.len() {
            assert!(parse(&zm[..cut]).is_err());
        }
        assert!(parse(b"\x03\x03foo\x03\x01barX\x01k\x02\x00vv\xff").is_err());
        assert_eq!(
            parse(b"\xfe\x01a\x01\x00b\xff").unwrap(),
            vec![(&b"a"[..], &b"b"[..])]
        );
    }
}
