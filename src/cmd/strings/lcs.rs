//! Longest common subsequence, as Redis's `lcsCommand` computes it: the classic dynamic
//! programming table, then a walk back from the end that emits matching ranges. The walk's
//! tie-breaking decides which of several equally long answers is reported, so it follows
//! Redis step by step.

/// One matching range: `a[a.0..=a.1]` equals `b[b.0..=b.1]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    pub a: (u32, u32),
    pub b: (u32, u32),
    pub len: u32,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Lcs {
    pub len: u32,
    /// The subsequence itself (empty unless requested).
    pub seq: Vec<u8>,
    /// Matching ranges from the end of the strings backwards (only when requested).
    pub ranges: Vec<Range>,
}

/// Bytes the full table needs (what Redis allocates and bounds by `proto-max-bulk-len`).
pub fn table_bytes(alen: usize, blen: usize) -> u128 {
    (alen as u128 + 1) * (blen as u128 + 1) * 4
}

/// Computes the LCS of `a` and `b`. With `walk` false only the length is computed (in two
/// rows of memory); otherwise the subsequence and the ranges of at least `min_len` bytes.
/// `None` if the table cannot be allocated.
pub fn lcs(a: &[u8], b: &[u8], walk: bool, min_len: u64) -> Option<Lcs> {
    if !walk {
        return Some(Lcs {
            len: length_only(a, b),
            ..Lcs::default()
        });
    }
    let (alen, blen) = (a.len(), b.len());
    let w = blen + 1;
    let cells = (alen + 1).checked_mul(w)?;
    let mut t: Vec<u32> = Vec::new();
    t.try_reserve_exact(cells).ok()?;
    t.resize(cells, 0);
    for i in 1..=alen {
        for j in 1..=blen {
            t[i * w + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let len = t[alen * w + blen];
    let mut seq = vec![0u8; len as usize];
    let mut ranges = Vec::new();
    let mut idx = len as usize;
    // `as_ == alen` means "no open range", as in Redis.
    let (mut as_, mut ae, mut bs, mut be) = (alen, 0, 0, 0);
    let (mut i, mut j) = (alen, blen);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            seq[idx - 1] = a[i - 1];
            if as_ == alen {
                (as_, ae, bs, be) = (i - 1, i - 1, j - 1, j - 1);
            } else if as_ == i && bs == j {
                as_ -= 1;
                bs -= 1;
            } else {
                emit = true;
            }
            if as_ == 0 || bs == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if as_ != alen {
                emit = true;
            }
        }
        if emit {
            let mlen = (ae - as_ + 1) as u32;
            if min_len == 0 || mlen as u64 >= min_len {
                ranges.push(Range {
                    a: (as_ as u32, ae as u32),
                    b: (bs as u32, be as u32),
                    len: mlen,
                });
            }
            as_ = alen;
        }
    }
    Some(Lcs { len, seq, ranges })
}

fn length_only(a: &[u8], b: &[u8]) -> u32 {
    let mut prev = vec![0u32; b.len() + 1];
    let mut cur = vec![0u32; b.len() + 1];
    for &ca in a {
        for (j, &cb) in b.iter().enumerate() {
            cur[j + 1] = if ca == cb {
                prev[j] + 1
            } else {
                prev[j + 1].max(cur[j])
            };
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(a: (u32, u32), b: (u32, u32), len: u32) -> Range {
        Range { a, b, len }
    }

    #[test]
    fn redis_doc_example() {
        let x = lcs(b"ohmytext", b"mynewtext", true, 0).unwrap();
        assert_eq!(x.len, 6);
        assert_eq!(x.seq, b"mytext");
        assert_eq!(x.ranges, vec![r((4, 7), (5, 8), 4), r((2, 3), (0, 1), 2)]);
        let y = lcs(b"ohmytext", b"mynewtext", true, 4).unwrap();
        assert_eq!(y.ranges, vec![r((4, 7), (5, 8), 4)]);
        assert_eq!(lcs(b"ohmytext", b"mynewtext", false, 0).unwrap().len, 6);
    }

    #[test]
    fn empty_and_disjoint() {
        assert_eq!(lcs(b"", b"abc", true, 0).unwrap(), Lcs::default());
        assert_eq!(lcs(b"abc", b"xyz", true, 0).unwrap(), Lcs::default());
        assert_eq!(lcs(b"abc", b"", false, 0).unwrap().len, 0);
    }

    #[test]
    fn length_only_agrees_with_table() {
        let cases: [(&[u8], &[u8]); 4] = [
            (b"AGGTAB", b"GXTXAYB"),
            (b"abcabcabc", b"cbacbacba"),
            (b"\x00\xff\x00", b"\xff\x00\xff"),
            (b"aaaa", b"aa"),
        ];
        for (a, b) in cases {
            assert_eq!(lcs(a, b, true, 0).unwrap().len, length_only(a, b));
        }
        assert_eq!(length_only(b"AGGTAB", b"GXTXAYB"), 4);
    }
}
