//! Node replies on the wire. The proxy forwards replies to clients as raw bytes whenever no
//! merge is needed, so it only has to know where one reply ends ([`frame_len`], no copy);
//! the few replies it merges (MGET, DEL counts, KEYS, SCAN, SCRIPT EXISTS…) are decoded
//! one level deep by [`decode`], their children kept as raw slices of the reply.

use bytes::{BufMut, Bytes};

/// A reply the node sent that is not valid RESP: the connection cannot be resynchronised.
#[derive(Debug, PartialEq, Eq)]
pub struct BadFrame(pub &'static str);

/// Position of the `\r\n` ending the line that starts at `from`.
fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 1 < buf.len() {
        if buf[i] == b'\r' && buf[i + 1] == b'\n' {
            return Some(i);
        }
        i += 1;
    }
    None
}

fn parse_len(s: &[u8]) -> Result<i64, BadFrame> {
    crate::num::parse_i64(s).ok_or(BadFrame("bad length"))
}

/// Length of the complete RESP2/RESP3 frame at the front of `buf`, or `None` while
/// incomplete.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, BadFrame> {
    Scanner::default().scan(buf)
}

/// A frame scan that resumes where the previous call stopped, so a large reply arriving
/// over many reads is not re-scanned from its start each time (quadratic otherwise).
/// Iterative (a count of values still owed), so deep nesting cannot overflow the stack.
#[derive(Debug, Default)]
pub struct Scanner {
    /// Bytes of the frame already scanned (whole values only).
    pos: usize,
    /// Values still to read (0: no frame in progress, i.e. one to read).
    owed: u64,
}

impl Scanner {
    /// Length of the frame at the front of `buf` (which may only have grown at its end
    /// since the last call), or None while incomplete. Resets after a complete frame.
    pub fn scan(&mut self, buf: &[u8]) -> Result<Option<usize>, BadFrame> {
        if self.owed == 0 {
            self.pos = 0;
            self.owed = 1;
        }
        let r = self.scan_values(buf);
        if !matches!(r, Ok(None)) {
            *self = Scanner::default();
        }
        r
    }

    fn scan_values(&mut self, buf: &[u8]) -> Result<Option<usize>, BadFrame> {
        while self.owed > 0 {
            let pos = self.pos;
            if pos >= buf.len() {
                return Ok(None);
            }
            let Some(end) = line_end(buf, pos + 1) else {
                return Ok(None);
            };
            let head = buf[pos];
            let line = &buf[pos + 1..end];
            let mut next = end + 2;
            let mut owed = self.owed - 1;
            match head {
                b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => {}
                b'$' | b'!' | b'=' => {
                    let n = parse_len(line)?;
                    if n >= 0 {
                        let need = next
                            .checked_add(n as usize)
                            .and_then(|p| p.checked_add(2))
                            .ok_or(BadFrame("bulk too long"))?;
                        if buf.len() < need {
                            return Ok(None);
                        }
                        if &buf[need - 2..need] != b"\r\n" {
                            return Err(BadFrame("bulk not terminated"));
                        }
                        next = need;
                    } else if n != -1 {
                        return Err(BadFrame("bad bulk length"));
                    }
                }
                b'*' | b'~' | b'>' => {
                    let n = parse_len(line)?;
                    if n > 0 {
                        owed += n as u64;
                    } else if n < -1 {
                        return Err(BadFrame("bad aggregate length"));
                    }
                }
                b'%' => {
                    let n = parse_len(line)?;
                    if n > 0 {
                        owed += 2 * n as u64;
                    } else if n < 0 {
                        return Err(BadFrame("bad map length"));
                    }
                }
                // An attribute map comes before the value it describes.
                b'|' => {
                    let n = parse_len(line)?;
                    if n < 0 {
                        return Err(BadFrame("bad attribute length"));
                    }
                    owed += 2 * n as u64 + 1;
                }
                _ => return Err(BadFrame("unknown reply type")),
            }
            // Only whole values advance the saved position.
            self.pos = next;
            self.owed = owed;
        }
        Ok(Some(self.pos))
    }
}

/// One reply decoded one level deep.
#[derive(Debug, PartialEq, Eq, Clone)]
pub enum Frame {
    /// `+...` (without the prefix).
    Status(Bytes),
    /// `-...` or `!...`: the error text without the prefix.
    Error(Bytes),
    Int(i64),
    Bulk(Bytes),
    /// `$-1`, `*-1` or `_`.
    Nil,
    /// `*`, `~` or `>`: each child's raw bytes, forwardable as they are.
    Array(Vec<Bytes>),
    /// `%`: keys and values alternating, raw.
    Map(Vec<Bytes>),
    /// Anything else (doubles, booleans, verbatim, big numbers, attributes).
    Other,
}

impl Frame {
    pub fn is_error(&self) -> bool {
        matches!(self, Frame::Error(_))
    }
}

/// Decodes a complete frame (as delimited by [`frame_len`]).
pub fn decode(raw: &Bytes) -> Result<Frame, BadFrame> {
    let Some(end) = line_end(raw, 1) else {
        return Err(BadFrame("incomplete frame"));
    };
    let line = &raw[1..end];
    let body = end + 2;
    Ok(match raw[0] {
        b'+' => Frame::Status(raw.slice(1..end)),
        b'-' => Frame::Error(raw.slice(1..end)),
        b':' => Frame::Int(parse_len(line)?),
        b'_' => Frame::Nil,
        b'$' | b'!' => {
            let n = parse_len(line)?;
            if n < 0 {
                Frame::Nil
            } else {
                let stop = body
                    .checked_add(n as usize)
                    .filter(|&s| s <= raw.len())
                    .ok_or(BadFrame("short bulk"))?;
                let b = raw.slice(body..stop);
                if raw[0] == b'!' {
                    Frame::Error(b)
                } else {
                    Frame::Bulk(b)
                }
            }
        }
        b'*' | b'~' | b'>' | b'%' => {
            let n = parse_len(line)?;
            if n < 0 {
                return Ok(Frame::Nil);
            }
            let count = if raw[0] == b'%' { 2 * n } else { n } as usize;
            let mut kids = Vec::with_capacity(count.min(1024));
            let mut pos = body;
            for _ in 0..count {
                let len = frame_len(&raw[pos..])?.ok_or(BadFrame("short aggregate"))?;
                kids.push(raw.slice(pos..pos + len));
                pos += len;
            }
            if raw[0] == b'%' {
                Frame::Map(kids)
            } else {
                Frame::Array(kids)
            }
        }
        _ => Frame::Other,
    })
}

/// Encodes a request (array of bulk strings) for a node. (Piece by piece: a variant that
/// built each header on the stack to copy it once cost more instructions, 507 against 445
/// per SET in callgrind.)
pub fn encode_command<B: BufMut, A: AsRef<[u8]>>(out: &mut B, args: &[A]) {
    out.put_u8(b'*');
    out.put_slice(itoa::Buffer::new().format(args.len()).as_bytes());
    out.put_slice(b"\r\n");
    for a in args {
        let a = a.as_ref();
        out.put_u8(b'$');
        out.put_slice(itoa::Buffer::new().format(a.len()).as_bytes());
        out.put_slice(b"\r\n");
        out.put_slice(a);
        out.put_slice(b"\r\n");
    }
}

pub fn command<A: AsRef<[u8]>>(args: &[A]) -> Bytes {
    let mut out = Vec::new();
    encode_command(&mut out, args);
    out.into()
}

/// An array header followed by already-encoded children.
pub fn array_of(kids: &[Bytes]) -> Bytes {
    let mut out = Vec::with_capacity(16 + kids.iter().map(Bytes::len).sum::<usize>());
    out.push(b'*');
    out.extend_from_slice(itoa::Buffer::new().format(kids.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for k in kids {
        out.extend_from_slice(k);
    }
    out.into()
}

pub fn int(n: i64) -> Bytes {
    format!(":{n}\r\n").into()
}

pub fn bulk(b: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(b.len() + 16);
    encode_bulk(&mut out, b);
    out.into()
}

fn encode_bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.push(b'$');
    out.extend_from_slice(itoa::Buffer::new().format(b.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// `-<text>\r\n`, with CR/LF in the text made spaces (an error is one line).
pub fn error(text: &str) -> Bytes {
    let mut out = Vec::with_capacity(text.len() + 3);
    out.push(b'-');
    out.extend(
        text.bytes()
            .map(|c| if c == b'\r' || c == b'\n' { b' ' } else { c }),
    );
    out.extend_from_slice(b"\r\n");
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLES: &[&[u8]] = &[
        b"+OK\r\n",
        b"-ERR no\r\n",
        b":-12\r\n",
        b"$3\r\na\r\n\r\n",
        b"$-1\r\n",
        b"$0\r\n\r\n",
        b"*-1\r\n",
        b"*0\r\n",
        b"*3\r\n$1\r\na\r\n$-1\r\n:5\r\n",
        b"*2\r\n*2\r\n+a\r\n+b\r\n*0\r\n",
        b"_\r\n",
        b",3.5\r\n",
        b"#t\r\n",
        b"!5\r\nERR x\r\n",
        b"=7\r\ntxt:abc\r\n",
        b"(12345678901234567890\r\n",
        b"%2\r\n+a\r\n:1\r\n+b\r\n*1\r\n_\r\n",
        b"~2\r\n:1\r\n:2\r\n",
        b">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nm\r\n",
        b"|1\r\n+key\r\n+val\r\n:7\r\n",
    ];

    #[test]
    fn complete_frames_and_every_split() {
        for s in SAMPLES {
            assert_eq!(
                frame_len(s),
                Ok(Some(s.len())),
                "{:?}",
                String::from_utf8_lossy(s)
            );
            // Followed by more bytes: still just the first frame.
            let mut two = s.to_vec();
            two.extend_from_slice(b"+NEXT\r\n");
            assert_eq!(frame_len(&two), Ok(Some(s.len())));
            for cut in 0..s.len() {
                assert_eq!(
                    frame_len(&s[..cut]),
                    Ok(None),
                    "{:?} cut at {cut}",
                    String::from_utf8_lossy(s)
                );
            }
        }
    }

    #[test]
    fn resumed_scans_match_whole_scans() {
        for s in SAMPLES {
            let mut sc = Scanner::default();
            for cut in 0..s.len() {
                assert_eq!(sc.scan(&s[..cut]), Ok(None));
            }
            assert_eq!(sc.scan(s), Ok(Some(s.len())));
            // Reset: the next frame scans from the start.
            assert_eq!(sc.scan(b"+OK\r\n"), Ok(Some(5)));
        }
    }

    /// Arbitrary node bytes never panic the scanner or the decoder.
    #[test]
    fn garbage_never_panics() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let alphabet = b"+-:$*%~>|_,#!=(\r\n0123-1x";
        for _ in 0..20_000 {
            let mut v: Vec<u8> = if rng.gen_bool(0.5) {
                SAMPLES[rng.gen_range(0..SAMPLES.len())].to_vec()
            } else {
                Vec::new()
            };
            for _ in 0..rng.gen_range(0..24) {
                let b = alphabet[rng.gen_range(0..alphabet.len())];
                if v.is_empty() || rng.gen_bool(0.5) {
                    v.push(b);
                } else {
                    let i = rng.gen_range(0..v.len());
                    v[i] = b;
                }
            }
            if let Ok(Some(n)) = frame_len(&v) {
                let _ = decode(&Bytes::copy_from_slice(&v[..n]));
            }
            let _ = decode(&Bytes::from(v));
        }
    }

    #[test]
    fn bad_frames() {
        assert!(frame_len(b"?x\r\n").is_err());
        assert!(frame_len(b"$3\r\nabcde\r\n").is_err());
        assert!(frame_len(b"*-2\r\n").is_err());
        assert!(frame_len(b"$x\r\n").is_err());
    }

    #[test]
    fn deep_nesting_is_iterative() {
        let mut deep = b"*1\r\n".repeat(200_000);
        deep.extend_from_slice(b":1\r\n");
        assert_eq!(frame_len(&deep), Ok(Some(deep.len())));
    }

    #[test]
    fn decoding() {
        let d = |s: &'static [u8]| decode(&Bytes::from_static(s)).unwrap();
        assert_eq!(d(b"+OK\r\n"), Frame::Status(Bytes::from_static(b"OK")));
        assert_eq!(d(b"-ERR x\r\n"), Frame::Error(Bytes::from_static(b"ERR x")));
        assert_eq!(
            d(b"!5\r\nERR x\r\n"),
            Frame::Error(Bytes::from_static(b"ERR x"))
        );
        assert_eq!(d(b":42\r\n"), Frame::Int(42));
        assert_eq!(d(b"$-1\r\n"), Frame::Nil);
        assert_eq!(d(b"_\r\n"), Frame::Nil);
        assert_eq!(d(b"$2\r\nab\r\n"), Frame::Bulk(Bytes::from_static(b"ab")));
        assert_eq!(
            d(b"*3\r\n$1\r\na\r\n$-1\r\n*1\r\n:5\r\n"),
            Frame::Array(vec![
                Bytes::from_static(b"$1\r\na\r\n"),
                Bytes::from_static(b"$-1\r\n"),
                Bytes::from_static(b"*1\r\n:5\r\n"),
            ])
        );
        assert_eq!(d(b",1.5\r\n"), Frame::Other);
        assert!(matches!(d(b"%1\r\n+a\r\n:1\r\n"), Frame::Map(k) if k.len() == 2));
    }

    #[test]
    fn encoding() {
        assert_eq!(
            &command(&["GET", "k"])[..],
            b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
        );
        assert_eq!(&command::<&str>(&[])[..], b"*0\r\n");
        let big = vec![b'x'; 12345];
        let args: [&[u8]; 3] = [b"SET", b"", &big];
        let mut want = b"*3\r\n$3\r\nSET\r\n$0\r\n\r\n$12345\r\n".to_vec();
        want.extend_from_slice(&big);
        want.extend_from_slice(b"\r\n");
        assert_eq!(&command(&args)[..], &want[..]);
        // Into a reused buffer: appended after what is there.
        let mut buf = bytes::BytesMut::from(&b"+"[..]);
        encode_command(&mut buf, &["PING"]);
        assert_eq!(&buf[..], b"+*1\r\n$4\r\nPING\r\n");
        assert_eq!(&error("ERR a\r\nb")[..], b"-ERR a  b\r\n");
        let kids = [int(1), bulk(b"x")];
        assert_eq!(&array_of(&kids)[..], b"*2\r\n:1\r\n$1\r\nx\r\n");
    }
}
