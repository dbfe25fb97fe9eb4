//! Listpacks (listpack.c): the flat encoding Redis stores small hashes, sets, sorted sets,
//! list nodes and stream nodes in, and saves verbatim in RDB payloads.
//!
//! Layout: total bytes (u32 LE), element count (u16 LE, 65535 = "count it"), elements,
//! 0xFF. Each element is an encoding byte (+ data) followed by its back-length: the size of
//! encoding + data in 7-bit groups, most significant first, every byte but the first with
//! the high bit set (so it can be read backwards).

use super::Bad;

const EOF: u8 = 0xFF;
const HEADER: usize = 6;

/// Builds a listpack the way `lpAppend` / `lpAppendInteger` would.
#[derive(Debug, Clone)]
pub struct Builder {
    buf: Vec<u8>,
    count: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    pub fn new() -> Builder {
        Builder {
            buf: vec![0; HEADER],
            count: 0,
        }
    }

    /// Appends a string; a canonical int64 is stored as an integer, as `lpAppend` does.
    pub fn push_bytes(&mut self, s: &[u8]) {
        if let Some(v) = super::canonical_int(s) {
            return self.push_int(v);
        }
        let start = self.buf.len();
        let l = s.len();
        if l < 64 {
            self.buf.push(0x80 | l as u8);
        } else if l < 4096 {
            self.buf.push(0xE0 | (l >> 8) as u8);
            self.buf.push(l as u8);
        } else {
            self.buf.push(0xF0);
            self.buf.extend_from_slice(&(l as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        self.finish_entry(start);
    }

    pub fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        if (0..=127).contains(&v) {
            self.buf.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = (v as u64) & 0x1FFF;
            self.buf.push(0xC0 | (u >> 8) as u8);
            self.buf.push(u as u8);
        } else if let Ok(x) = i16::try_from(v) {
            self.buf.push(0xF1);
            self.buf.extend_from_slice(&x.to_le_bytes());
        } else if (-8_388_608..=8_388_607).contains(&v) {
            self.buf.push(0xF2);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if let Ok(x) = i32::try_from(v) {
            self.buf.push(0xF3);
            self.buf.extend_from_slice(&x.to_le_bytes());
        } else {
            self.buf.push(0xF4);
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
        self.finish_entry(start);
    }

    fn finish_entry(&mut self, start: usize) {
        let l = self.buf.len() - start;
        encode_backlen(&mut self.buf, l);
        self.count += 1;
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes the finished listpack will take (`lpBytes`).
    pub fn bytes(&self) -> usize {
        self.buf.len() + 1
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(EOF);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        let count = u16::try_from(self.count).unwrap_or(u16::MAX);
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// `lpEncodeBacklen`.
fn encode_backlen(buf: &mut Vec<u8>, l: usize) {
    let n = backlen_size(l);
    for i in (0..n).rev() {
        let group = ((l >> (7 * i)) & 127) as u8;
        buf.push(if i == n - 1 { group } else { group | 128 });
    }
}

fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// One listpack element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl Entry<'_> {
    /// The element as Redis returns it: integers in decimal.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Entry::Int(v) => itoa::Buffer::new().format(*v).as_bytes().to_vec(),
            Entry::Str(s) => s.to_vec(),
        }
    }

    /// The integer value: an integer element, or a string element holding one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Entry::Int(v) => Some(*v),
            Entry::Str(s) => super::canonical_int(s),
        }
    }
}

fn sign_extend(v: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

/// Parses and fully validates a listpack (header total, every element's length and
/// back-length, the terminator, and the count when the header records one).
pub fn parse(lp: &[u8]) -> Result<Vec<Entry<'_>>, Bad> {
    if lp.len() < HEADER + 1 {
        return Err(Bad);
    }
    let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize;
    let count = usize::from(u16::from_le_bytes([lp[4], lp[5]]));
    if total != lp.len() || lp[lp.len() - 1] != EOF {
        return Err(Bad);
    }
    let body = &lp[HEADER..lp.len() - 1];
    // Every element takes at least 2 bytes, which bounds the allocation.
    let mut out = Vec::with_capacity(count.min(body.len() / 2));
    let mut p = 0usize;
    let get = |a: usize, n: usize| -> Result<&[u8], Bad> {
        body.get(a..a.checked_add(n).ok_or(Bad)?).ok_or(Bad)
    };
    while p < body.len() {
        let b = body[p];
        let (entry, enc_len) = match b {
            0x00..=0x7F => (Entry::Int(i64::from(b)), 1),
            0x80..=0xBF => {
                let n = usize::from(b & 0x3F);
                (Entry::Str(get(p + 1, n)?), 1 + n)
            }
            0xC0..=0xDF => {
                let lo = get(p + 1, 1)?[0];
                let u = (u64::from(b & 0x1F) << 8) | u64::from(lo);
                (Entry::Int(sign_extend(u, 13)), 2)
            }
            0xE0..=0xEF => {
                let lo = get(p + 1, 1)?[0];
                let n = (usize::from(b & 0x0F) << 8) | usize::from(lo);
                (Entry::Str(get(p + 2, n)?), 2 + n)
            }
            0xF0 => {
                let l = get(p + 1, 4)?;
                let n = u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize;
                (Entry::Str(get(p + 5, n)?), 5 + n)
            }
            0xF1..=0xF4 => {
                let n = [2usize, 3, 4, 8][usize::from(b - 0xF1)];
                let d = get(p + 1, n)?;
                let mut le = [0u8; 8];
                le[..n].copy_from_slice(d);
                (
                    Entry::Int(sign_extend(u64::from_le_bytes(le), 8 * n as u32)),
                    1 + n,
                )
            }
            _ => return Err(Bad),
        };
        let bl = backlen_size(enc_len);
        let mut expect = Vec::with_capacity(5);
        encode_backlen(&mut expect, enc_len);
        if get(p + enc_len, bl)? != &expect[..] {
            return Err(Bad);
        }
        out.push(entry);
        p += enc_len + bl;
    }
    if count != usize::from(u16::MAX) && count != out.len() {
        return Err(Bad);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_redis() {
        // HSET h a 1 b hello on redis-server 7.0, the listpack inside its DUMP.
        let mut b = Builder::new();
        for e in [&b"a"[..], b"1", b"b", b"hello"] {
            b.push_bytes(e);
        }
        assert_eq!(
            b.finish(),
            b"\x16\x00\x00\x00\x04\x00\x81a\x02\x01\x01\x81b\x02\x85hello\x06\xff".to_vec()
        );
    }

    #[test]
    fn round_trip_all_encodings() {
        let ints = [
            0i64,
            127,
            128,
            -1,
            -4096,
            4095,
            4096,
            -32768,
            32767,
            40000,
            -8_388_608,
            8_388_607,
            1 << 30,
            i32::MIN as i64,
            1 << 40,
            i64::MIN,
            i64::MAX,
        ];
        let strs: Vec<Vec<u8>> = vec![
            vec![],
            b"x".to_vec(),
            vec![b'y'; 63],
            vec![b'z'; 64],
            vec![b'w'; 5000],
        ];
        let mut b = Builder::new();
        for &i in &ints {
            b.push_int(i);
        }
        for s in &strs {
            b.push_bytes(s);
        }
        b.push_bytes(b"-17");
        let bytes = b.bytes();
        let lp = b.finish();
        assert_eq!(lp.len(), bytes);
        let parsed = parse(&lp).unwrap();
        assert_eq!(parsed.len(), ints.len() + strs.len() + 1);
        for (i, &v) in ints.iter().enumerate() {
            assert_eq!(parsed[i], Entry::Int(v));
        }
        for (i, s) in strs.iter().enumerate() {
            assert_eq!(parsed[ints.len() + i], Entry::Str(s));
        }
        assert_eq!(parsed.last(), Some(&Entry::Int(-17)));
    }

    /// The size code streams use to place node boundaries must agree with this encoder.
    #[test]
    fn sizes_agree_with_stream_lp() {
        use crate::types::stream::lp;
        let mut samples: Vec<Vec<u8>> = vec![b"0".to_vec(), b"-0".to_vec(), b"007".to_vec()];
        for v in [
            0i64,
            127,
            128,
            -1,
            -4097,
            5000,
            40000,
            9_000_000,
            1 << 33,
            i64::MIN,
        ] {
            samples.push(v.to_string().into_bytes());
        }
        for n in [0usize, 1, 63, 64, 100, 4095, 4096, 16400] {
            samples.push(vec![b'q'; n]);
        }
        for s in &samples {
            let mut b = Builder::new();
            b.push_bytes(s);
            assert_eq!(
                b.bytes() - lp::EMPTY,
                lp::string(s),
                "{:?}",
                String::from_utf8_lossy(s)
            );
            assert_eq!(
                b.bytes() - lp::EMPTY,
                crate::types::list::lp_entry_size(s),
                "list {:?}",
                String::from_utf8_lossy(s)
            );
        }
        for v in [
            0i64,
            127,
            128,
            -1,
            -4096,
            -4097,
            32767,
            32768,
            1 << 23,
            1 << 31,
            i64::MAX,
        ] {
            let mut b = Builder::new();
            b.push_int(v);
            assert_eq!(b.bytes() - lp::EMPTY, lp::int(v));
        }
    }

    #[test]
    fn malformed_is_refused() {
        let mut b = Builder::new();
        b.push_bytes(b"hello");
        let lp = b.finish();
        for cut in 0..lp.len() {
            assert!(parse(&lp[..cut]).is_err());
        }
        let mut wrong = lp.clone();
        wrong[4] = 2;
        assert!(parse(&wrong).is_err());
        let mut wrong = lp.clone();
        wrong[lp.len() - 2] = 9;
        assert!(parse(&wrong).is_err());
    }
}
