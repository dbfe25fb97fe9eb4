//! Redis's serialization format (RDB), as far as `DUMP` / `RESTORE` need it: the primitive
//! encodings (lengths, strings with their integer and LZF forms, doubles), the payload
//! framing (type byte, object, RDB version, CRC-64) and the compact containers Redis stores
//! verbatim (listpack, intset, ziplist). Pure code: no server types.
//!
//! Every reader returns `Result<_, Bad>` and checks each length against the bytes left
//! before allocating, so a hostile payload can only ever produce `-ERR Bad data format`.

pub mod intset;
pub mod listpack;
pub mod lzf;
pub mod stream;
pub mod value;
pub mod ziplist;
pub mod zipmap;

/// Malformed serialized data (`-ERR Bad data format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bad;

/// Why a payload's framing was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadError {
    /// Newer RDB version than we read, or the CRC does not match
    /// (`-ERR DUMP payload version or checksum are wrong`).
    VersionOrChecksum,
    /// The framing is intact but holds no object (`-ERR Bad data format`).
    Bad,
}

/// RDB version respite writes (Redis 7.0's; every type we emit exists in it)...
pub const RDB_VERSION: u16 = 10;
/// ...except a hash with field deadlines, whose types came with Redis 7.4's version: an
/// older server then refuses the payload on its version, not half-way through it.
pub const RDB_VERSION_HFE: u16 = 12;
/// Newest RDB version we accept (Redis 7.4's: its only new types are the hashes with
/// field deadlines, which we read).
pub const RDB_VERSION_MAX: u16 = 12;

/// Largest field deadline a payload may hold (Redis `EB_EXPIRE_TIME_MAX`, 2^48 - 1 ms).
pub const FIELD_DEADLINE_MAX: u64 = (1 << 48) - 1;

/// RDB object type bytes.
pub mod types {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
    pub const SET_LISTPACK: u8 = 20;
    pub const STREAM_LISTPACKS_3: u8 = 21;
    /// Hashes with field deadlines (Redis 7.4). The `_PRE_GA` forms are 7.4's release
    /// candidates' (absolute deadlines, no leading minimum).
    pub const HASH_METADATA_PRE_GA: u8 = 22;
    pub const HASH_LISTPACK_EX_PRE_GA: u8 = 23;
    pub const HASH_METADATA: u8 = 24;
    pub const HASH_LISTPACK_EX: u8 = 25;
}

/// CRC-64/Jones as Redis's crc64.c computes it (reflected, polynomial 0xad93d23594c935a9,
/// init 0, no final xor), continuing from `crc` (0 to start).
pub fn crc64(crc: u64, data: &[u8]) -> u64 {
    // The crate takes an initial value in the algorithm's unreflected form.
    let mut d = CRC64.digest_with_initial(crc.reverse_bits());
    d.update(data);
    d.finalize()
}

/// Slice-by-16 tables, built at compile time.
static CRC64: crc::Crc<u64, crc::Table<16>> =
    crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_REDIS);

/// A DUMP payload: type byte, object body, RDB version (u16 LE), CRC-64 (u64 LE) of all
/// preceding bytes.
pub fn payload(rdb_type: u8, body: &[u8]) -> Vec<u8> {
    let version = if rdb_type >= types::HASH_METADATA_PRE_GA {
        RDB_VERSION_HFE
    } else {
        RDB_VERSION
    };
    let mut out = Vec::with_capacity(body.len() + 11);
    out.push(rdb_type);
    out.extend_from_slice(body);
    out.extend_from_slice(&version.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Checks a payload's footer (`verifyDumpPayload`) and splits off its type byte.
pub fn verify(payload: &[u8]) -> Result<(u8, &[u8]), PayloadError> {
    let n = payload.len();
    if n < 10 {
        return Err(PayloadError::VersionOrChecksum);
    }
    let version = u16::from_le_bytes([payload[n - 10], payload[n - 9]]);
    if version > RDB_VERSION_MAX {
        return Err(PayloadError::VersionOrChecksum);
    }
    let mut crc = [0u8; 8];
    crc.copy_from_slice(&payload[n - 8..]);
    if crc64(0, &payload[..n - 8]) != u64::from_le_bytes(crc) {
        return Err(PayloadError::VersionOrChecksum);
    }
    match payload[..n - 10].split_first() {
        Some((&t, body)) => Ok((t, body)),
        None => Err(PayloadError::Bad),
    }
}

/// Serializer for RDB primitives.
#[derive(Debug, Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Writer {
        Writer::default()
    }

    pub fn byte(&mut self, b: u8) {
        self.buf.push(b);
    }

    pub fn raw(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// `rdbSaveLen`: 6-bit, 14-bit (big-endian), 32-bit or 64-bit (big-endian) forms.
    pub fn len(&mut self, len: u64) {
        if len < 1 << 6 {
            self.buf.push(len as u8);
        } else if len < 1 << 14 {
            self.buf.push(0x40 | (len >> 8) as u8);
            self.buf.push(len as u8);
        } else if len <= u64::from(u32::MAX) {
            self.buf.push(0x80);
            self.buf.extend_from_slice(&(len as u32).to_be_bytes());
        } else {
            self.buf.push(0x81);
            self.buf.extend_from_slice(&len.to_be_bytes());
        }
    }

    /// `rdbSaveRawString`: short canonical integers in the 32-bit range take the integer
    /// forms, strings over 20 bytes are LZF-compressed when that saves at least 4 bytes,
    /// everything else is length + bytes.
    pub fn string(&mut self, s: &[u8]) {
        if s.len() <= 11 {
            if let Some(v) = canonical_int(s) {
                if self.int_encoded(v) {
                    return;
                }
            }
        }
        if s.len() > 20 {
            if let Some(c) = lzf::compress(s, s.len() - 4) {
                self.buf.push(0xC3);
                self.len(c.len() as u64);
                self.len(s.len() as u64);
                self.buf.extend_from_slice(&c);
                return;
            }
        }
        self.len(s.len() as u64);
        self.buf.extend_from_slice(s);
    }

    /// An integer string value (`rdbSaveLongLongAsStringObject`): integer form when it fits
    /// 32 bits, else its decimal text.
    pub fn int_string(&mut self, v: i64) {
        if !self.int_encoded(v) {
            let mut b = itoa::Buffer::new();
            let s = b.format(v).as_bytes();
            self.len(s.len() as u64);
            self.buf.extend_from_slice(s);
        }
    }

    /// `rdbEncodeInteger`.
    fn int_encoded(&mut self, v: i64) -> bool {
        if let Ok(x) = i8::try_from(v) {
            self.buf.push(0xC0);
            self.buf.push(x as u8);
        } else if let Ok(x) = i16::try_from(v) {
            self.buf.push(0xC1);
            self.buf.extend_from_slice(&x.to_le_bytes());
        } else if let Ok(x) = i32::try_from(v) {
            self.buf.push(0xC2);
            self.buf.extend_from_slice(&x.to_le_bytes());
        } else {
            return false;
        }
        true
    }

    pub fn millis(&mut self, ms: u64) {
        self.buf.extend_from_slice(&ms.to_le_bytes());
    }

    pub fn binary_double(&mut self, d: f64) {
        self.buf.extend_from_slice(&d.to_le_bytes());
    }
}

/// The integer a string denotes when it is exactly that integer's decimal form (Redis's
/// `string2ll` + `ll2string` round trip).
pub fn canonical_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let v = crate::num::parse_i64(s)?;
    let mut b = itoa::Buffer::new();
    (b.format(v).as_bytes() == s).then_some(v)
}

/// A length field (`rdbLoadLen`) as read: a plain length or one of the special string
/// encodings (`RDB_ENCVAL`).
enum Len {
    Plain(u64),
    Encoded(u8),
}

/// Bounds-checked cursor over serialized bytes.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Reader<'a> {
        Reader { data, pos: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// Bytes not read yet: an upper bound for any element count still to come, used to
    /// refuse absurd counts before allocating.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    pub fn byte(&mut self) -> Result<u8, Bad> {
        let b = *self.data.get(self.pos).ok_or(Bad)?;
        self.pos += 1;
        Ok(b)
    }

    pub fn raw(&mut self, n: usize) -> Result<&'a [u8], Bad> {
        let end = self.pos.checked_add(n).ok_or(Bad)?;
        let s = self.data.get(self.pos..end).ok_or(Bad)?;
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Bad> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.raw(N)?);
        Ok(a)
    }

    fn len_or_enc(&mut self) -> Result<Len, Bad> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => Len::Plain(u64::from(b & 0x3F)),
            1 => Len::Plain((u64::from(b & 0x3F) << 8) | u64::from(self.byte()?)),
            2 => match b {
                0x80 => Len::Plain(u64::from(u32::from_be_bytes(self.array()?))),
                0x81 => Len::Plain(u64::from_be_bytes(self.array()?)),
                _ => return Err(Bad),
            },
            _ => Len::Encoded(b & 0x3F),
        })
    }

    /// `rdbLoadLen` (an encoded-string marker here is malformed).
    pub fn len(&mut self) -> Result<u64, Bad> {
        match self.len_or_enc()? {
            Len::Plain(n) => Ok(n),
            Len::Encoded(_) => Err(Bad),
        }
    }

    /// A length that counts items each taking at least `min_bytes` bytes: refused when the
    /// rest of the input cannot hold that many, so callers may allocate for it.
    pub fn count(&mut self, min_bytes: usize) -> Result<usize, Bad> {
        let n = usize::try_from(self.len()?).map_err(|_| Bad)?;
        if n.checked_mul(min_bytes.max(1))
            .is_none_or(|b| b > self.remaining())
        {
            return Err(Bad);
        }
        Ok(n)
    }

    /// `rdbGenericLoadStringObject`: raw, integer (8/16/32-bit) or LZF-compressed.
    pub fn string(&mut self) -> Result<Vec<u8>, Bad> {
        match self.len_or_enc()? {
            Len::Plain(n) => {
                let n = usize::try_from(n).map_err(|_| Bad)?;
                Ok(self.raw(n)?.to_vec())
            }
            Len::Encoded(0) => Ok(int_text(i64::from(self.byte()? as i8))),
            Len::Encoded(1) => Ok(int_text(i64::from(i16::from_le_bytes(self.array()?)))),
            Len::Encoded(2) => Ok(int_text(i64::from(i32::from_le_bytes(self.array()?)))),
            Len::Encoded(3) => {
                let clen = usize::try_from(self.len()?).map_err(|_| Bad)?;
                let ulen = usize::try_from(self.len()?).map_err(|_| Bad)?;
                let c = self.raw(clen)?;
                lzf::decompress(c, ulen)
            }
            Len::Encoded(_) => Err(Bad),
        }
    }

    pub fn millis(&mut self) -> Result<u64, Bad> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    pub fn binary_double(&mut self) -> Result<f64, Bad> {
        Ok(f64::from_le_bytes(self.array()?))
    }

    /// `rdbLoadDoubleValue` (the old ZSET type 3 score form): a length byte then that many
    /// bytes of `%.17g` text; 253/254/255 stand for NaN, +inf and -inf.
    pub fn text_double(&mut self) -> Result<f64, Bad> {
        match self.byte()? {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => {
                let s = std::str::from_utf8(self.raw(usize::from(n))?).map_err(|_| Bad)?;
                s.trim().parse::<f64>().map_err(|_| Bad)
            }
        }
    }
}

fn int_text(v: i64) -> Vec<u8> {
    itoa::Buffer::new().format(v).as_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_check_value() {
        // Redis's crc64.c self-test vector.
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        assert_eq!(crc64(0, b""), 0);
        // Continuing from a partial CRC equals one pass over the whole input.
        assert_eq!(crc64(crc64(0, b"1234"), b"56789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn payload_framing() {
        // DUMP of SET k "hello" on redis-server 7.0.
        let p = payload(0, b"\x05hello");
        assert_eq!(p, b"\x00\x05hello\x0a\x00cr\xdfve4 \x0a".to_vec());
        assert_eq!(verify(&p), Ok((0, &b"\x05hello"[..])));
        let mut bad = p.clone();
        bad[3] ^= 1;
        assert_eq!(verify(&bad), Err(PayloadError::VersionOrChecksum));
        assert_eq!(verify(b"short"), Err(PayloadError::VersionOrChecksum));
    }

    #[test]
    fn lengths_round_trip() {
        for n in [
            0u64,
            63,
            64,
            16383,
            16384,
            u32::MAX as u64,
            u32::MAX as u64 + 1,
        ] {
            let mut w = Writer::new();
            w.len(n);
            let mut r = Reader::new(&w.buf);
            assert_eq!(r.len(), Ok(n));
            assert!(r.is_empty());
        }
    }

    #[test]
    fn strings() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"12", b"\xc0\x0c"),
            (b"-129", b"\xc1\x7f\xff"),
            (b"100000", b"\xc2\xa0\x86\x01\x00"),
            (b"012", b"\x03012"),
            (b"12345678901", b"\x0b12345678901"),
            (b"", b"\x00"),
        ];
        for (s, enc) in cases {
            let mut w = Writer::new();
            w.string(s);
            assert_eq!(&w.buf[..], *enc, "{:?}", s);
            assert_eq!(Reader::new(enc).string().as_deref(), Ok(*s));
        }
        let long = vec![b'a'; 100];
        let mut w = Writer::new();
        w.string(&long);
        assert_eq!(w.buf[0], 0xC3);
        assert_eq!(Reader::new(&w.buf).string(), Ok(long));
        let mut w = Writer::new();
        w.int_string(1 << 40);
        assert_eq!(w.buf, b"\x0d1099511627776");
    }

    #[test]
    fn truncated_reads_fail() {
        assert_eq!(Reader::new(b"\x05hel").string(), Err(Bad));
        assert_eq!(Reader::new(b"\x80\x00").len(), Err(Bad));
        assert_eq!(
            Reader::new(b"\x81\xff\xff\xff\xff\xff\xff\xff\xff").string(),
            Err(Bad)
        );
        assert_eq!(Reader::new(b"\xc3\x01\x7f\x00").string(), Err(Bad));
        assert_eq!(Reader::new(b"\x82").len(), Err(Bad));
    }
}
