//! LZF, the compression Redis applies to long strings in RDB payloads.
//!
//! `compress` reproduces Redis's bundled liblzf 3.6 (`lzf_c.c` built with HLOG 16,
//! VERY_FAST, not ULTRA_FAST) step for step, including its hash function, the positions it
//! re-hashes after a match and its unrolled match-length loop, so `DUMP` output equals
//! redis-server's byte for byte. The hash table starts empty (a zero slot means "no
//! candidate", exactly as a slot pointing at offset 0 fails `ref > in_data` in C).
//!
//! Hand-written on purpose: no crate compresses as Redis does. `lzf` (a Rust port, marked
//! deprecated by its author) lacks the unrolled match loop and `lzf-sys` (C liblzf 3.8)
//! hashes multiplicatively; both produce other bytes on real values (benches/checksums.rs
//! has the numbers).

use super::Bad;

const HLOG: u32 = 16;
const HSIZE: usize = 1 << HLOG;
const MAX_LIT: usize = 1 << 5;
const MAX_OFF: usize = 1 << 13;
const MAX_REF: usize = (1 << 8) + (1 << 3);

#[inline]
fn idx(h: u32) -> usize {
    ((h >> (3 * 8 - HLOG)).wrapping_sub(h.wrapping_mul(5)) as usize) & (HSIZE - 1)
}

#[inline]
fn next(v: u32, p: &[u8], i: usize) -> u32 {
    (v << 8) | u32::from(p[i + 2])
}

/// Compresses `input`; `None` when the result would exceed `out_len` bytes (Redis then
/// stores the string uncompressed).
pub fn compress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    let in_len = input.len();
    if in_len == 0 || out_len == 0 {
        return None;
    }
    let mut htab = vec![0u32; HSIZE];
    // `op` indexes `out`; the byte at `op - lit - 1` is the pending literal-run header.
    let mut out = vec![0u8; out_len + 1];
    let out_end = out_len;
    let mut op = 1usize;
    let mut lit = 0usize;
    let mut ip = 0usize;

    if in_len >= 3 {
        let mut hval = (u32::from(input[0]) << 8) | u32::from(input[1]);
        while ip < in_len - 2 {
            hval = next(hval, input, ip);
            let slot = idx(hval);
            let r = htab[slot] as usize;
            htab[slot] = ip as u32;
            // In C: off = ip - ref - 1 (unsigned), ref > in_data, 3 bytes equal.
            let ok = r > 0
                && r < ip
                && ip - r - 1 < MAX_OFF
                && input[r + 2] == input[ip + 2]
                && input[r] == input[ip]
                && input[r + 1] == input[ip + 1];
            if ok {
                let off = ip - r - 1;
                let mut len = 2usize;
                let maxlen = (in_len - ip - len).min(MAX_REF);
                if op + 3 + 1 >= out_end && op - usize::from(lit == 0) + 3 + 1 >= out_end {
                    return None;
                }
                out[op - lit - 1] = (lit as u8).wrapping_sub(1);
                op -= usize::from(lit == 0);
                'matching: {
                    // liblzf's unrolled loop checks 16 more bytes without consulting
                    // maxlen whenever maxlen > 16; reproduce it, it changes lengths near
                    // the end of the input.
                    if maxlen > 16 {
                        for _ in 0..16 {
                            len += 1;
                            if input[r + len] != input[ip + len] {
                                break 'matching;
                            }
                        }
                    }
                    loop {
                        len += 1;
                        if !(len < maxlen && input[r + len] == input[ip + len]) {
                            break;
                        }
                    }
                }
                len -= 2;
                ip += 1;
                if len < 7 {
                    out[op] = ((off >> 8) + (len << 5)) as u8;
                    op += 1;
                } else {
                    out[op] = ((off >> 8) + (7 << 5)) as u8;
                    out[op + 1] = (len - 7) as u8;
                    op += 2;
                }
                out[op] = off as u8;
                op += 1;
                lit = 0;
                op += 1;
                ip += len + 1;
                if ip >= in_len - 2 {
                    break;
                }
                // VERY_FAST: hash the last two positions of the match.
                ip -= 2;
                hval = (u32::from(input[ip]) << 8) | u32::from(input[ip + 1]);
                hval = next(hval, input, ip);
                htab[idx(hval)] = ip as u32;
                ip += 1;
                hval = next(hval, input, ip);
                htab[idx(hval)] = ip as u32;
                ip += 1;
            } else {
                if op >= out_end {
                    return None;
                }
                lit += 1;
                out[op] = input[ip];
                op += 1;
                ip += 1;
                if lit == MAX_LIT {
                    out[op - lit - 1] = (lit - 1) as u8;
                    lit = 0;
                    op += 1;
                }
            }
        }
    }
    if op + 3 > out_end {
        return None;
    }
    while ip < in_len {
        lit += 1;
        out[op] = input[ip];
        op += 1;
        ip += 1;
        if lit == MAX_LIT {
            out[op - lit - 1] = (lit - 1) as u8;
            lit = 0;
            op += 1;
        }
    }
    out[op - lit - 1] = (lit as u8).wrapping_sub(1);
    op -= usize::from(lit == 0);
    out.truncate(op);
    Some(out)
}

/// Decompresses to exactly `out_len` bytes (`lzf_decompress` returning anything else, or a
/// zero length, is a load error in Redis).
pub fn decompress(input: &[u8], out_len: usize) -> Result<Vec<u8>, Bad> {
    // A back-reference of at most 3 bytes expands to at most 264: anything claiming more
    // than that ratio is corrupt, and refusing it up front bounds the allocation.
    if out_len == 0 || out_len > input.len().saturating_mul(MAX_REF / 2) + MAX_LIT {
        return Err(Bad);
    }
    let mut out = Vec::with_capacity(out_len);
    let mut ip = 0usize;
    while ip < input.len() {
        let ctrl = usize::from(input[ip]);
        ip += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            let lits = input.get(ip..ip + n).ok_or(Bad)?;
            if out.len() + n > out_len {
                return Err(Bad);
            }
            out.extend_from_slice(lits);
            ip += n;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += usize::from(*input.get(ip).ok_or(Bad)?);
                ip += 1;
            }
            len += 2;
            let lo = usize::from(*input.get(ip).ok_or(Bad)?);
            ip += 1;
            let back = ((ctrl & 0x1f) << 8) + lo + 1;
            if back > out.len() || out.len() + len > out_len {
                return Err(Bad);
            }
            // Overlapping copies repeat bytes, so copy one at a time.
            let start = out.len() - back;
            for i in 0..len {
                let b = out[start + i];
                out.push(b);
            }
        }
    }
    if out.len() != out_len {
        return Err(Bad);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_redis_output() {
        // redis-server 7.0: SET k <100 x 'a'>; DUMP k → c3 09 40 64 <9 bytes>.
        let c = compress(&[b'a'; 100], 96).unwrap();
        assert_eq!(c, b"\x01aa\xe0W\x00\x01aa");
        assert_eq!(decompress(&c, 100).unwrap(), vec![b'a'; 100]);
    }

    #[test]
    fn round_trips() {
        let mut seed = 0x1234_5678u64;
        for n in [3usize, 21, 50, 300, 5000, 70000] {
            let data: Vec<u8> = (0..n)
                .map(|i| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                    if (seed >> 60) < 10 {
                        b"abcdefgh"[i % 8]
                    } else {
                        (seed >> 56) as u8
                    }
                })
                .collect();
            if let Some(c) = compress(&data, n + 64) {
                assert_eq!(decompress(&c, n).unwrap(), data);
            }
        }
    }

    #[test]
    fn corrupt_input_is_refused() {
        assert!(decompress(b"\x05ab", 6).is_err());
        assert!(decompress(b"\x20\x00", 3).is_err());
        assert!(decompress(b"\x00a", 2).is_err());
        assert!(decompress(b"\x00a", 0).is_err());
        assert!(decompress(b"\xe0", 100).is_err());
    }
}
