//! Byte sizes of Redis listpack elements. Redis stores a stream as a radix tree of listpack
//! nodes and decides when to open a new node (and what `MAXLEN ~` may drop) from the tail
//! node's byte size; computing the same sizes lets us reproduce its node boundaries exactly.

/// Listpack header (total bytes u32 + element count u16) plus the end byte.
pub const EMPTY: usize = 7;

/// Bytes of the back-length trailer for an element whose encoding takes `l` bytes.
fn backlen(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// An integer element (`lpAppendInteger`).
pub fn int(v: i64) -> usize {
    let enc = match v {
        0..=127 => 1,
        -4096..=4095 => 2,
        -32768..=32767 => 3,
        -8388608..=8388607 => 4,
        -2147483648..=2147483647 => 5,
        _ => 9,
    };
    enc + backlen(enc)
}

/// A string element (`lpAppend`): strings that are canonical integers are stored as such.
pub fn string(s: &[u8]) -> usize {
    if s.len() <= 20 {
        if let Some(v) = crate::num::parse_i64(s) {
            return int(v);
        }
    }
    let l = s.len();
    let enc = if l < 64 {
        1 + l
    } else if l < 4096 {
        2 + l
    } else {
        5 + l
    };
    enc + backlen(enc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(int(0), 2);
        assert_eq!(int(127), 2);
        assert_eq!(int(128), 3);
        assert_eq!(int(-1), 3);
        assert_eq!(int(5000), 4);
        assert_eq!(int(1 << 40), 10);
        assert_eq!(string(b"abc"), 5);
        assert_eq!(string(b"12"), 2);
        assert_eq!(string(b"012"), 5);
        assert_eq!(string(&[b'a'; 100]), 102 + 1);
        assert_eq!(string(&[b'a'; 200]), 202 + 2);
    }
}
