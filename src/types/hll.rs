//! HyperLogLog as Redis stores it in a string (hyperloglog.c), byte for byte: a 16-byte
//! header (`HYLL`, encoding, 3 unused bytes, cached cardinality little endian whose top bit
//! marks it stale), then either 16384 dense 6-bit registers or the sparse run-length opcodes
//! ZERO `00xxxxxx`, XZERO `01xxxxxx yyyyyyyy` and VAL `1vvvvvxx`.
//!
//! The sparse algorithms follow Redis's step by step (including how they split and merge
//! opcodes and when they give up on a corrupted value) because the exact bytes are visible
//! through GET and DUMP. Reads past the end of the string see 0, as Redis reads the sds
//! terminator.

pub const HDR: usize = 16;
pub const P: u32 = 14;
pub const Q: usize = 64 - P as usize;
pub const REGISTERS: usize = 1 << P;
pub const DENSE_SIZE: usize = HDR + (REGISTERS * 6).div_ceil(8);
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const REGISTER_MAX: u8 = 63;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;
/// 0.5 / ln(2), the estimator's alpha for m → ∞.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
const SEED: u64 = 0xadc8_3b19;

/// The value is an HLL by its header but its sparse opcodes do not describe 16384 registers.
#[derive(Debug, PartialEq, Eq)]
pub struct Corrupt;

/// MurmurHash64A as Redis uses it (little-endian word reads on every arch).
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element maps to and the length of its `000..1` pattern (1..=Q+1).
pub fn pat_len(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, SEED);
    let index = (hash as usize) & (REGISTERS - 1);
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// An empty HLL: sparse, one XZERO covering every register.
pub fn new_sparse() -> Vec<u8> {
    let mut s = vec![0u8; HDR];
    s[..4].copy_from_slice(b"HYLL");
    s[4] = SPARSE;
    let mut left = REGISTERS;
    while left > 0 {
        let n = left.min(XZERO_MAX_LEN);
        s.extend_from_slice(&xzero(n));
        left -= n;
    }
    s
}

/// Redis's header checks (`isHLLObjectOrReply`) for a string's bytes.
pub fn is_hll(s: &[u8]) -> bool {
    s.len() >= HDR
        && &s[..4] == b"HYLL"
        && s[4] <= SPARSE
        && (s[4] != DENSE || s.len() == DENSE_SIZE)
}

pub fn is_dense(s: &[u8]) -> bool {
    s[4] == DENSE
}

pub fn invalidate_cache(s: &mut [u8]) {
    s[15] |= 0x80;
}

/// The cached cardinality, if still valid.
pub fn cached(s: &[u8]) -> Option<u64> {
    let card = u64::from_le_bytes(s[8..16].try_into().ok()?);
    (s[15] & 0x80 == 0).then_some(card)
}

pub fn store_cache(s: &mut [u8], card: u64) {
    s[8..16].copy_from_slice(&card.to_le_bytes());
}

// ---- opcodes ----

fn at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}
fn is_zero(b: u8) -> bool {
    b & 0xc0 == 0
}
fn is_xzero(b: u8) -> bool {
    b & 0xc0 == 0x40
}
fn is_val(b: u8) -> bool {
    b & 0x80 != 0
}
fn zero_len(b: u8) -> usize {
    (b & 0x3f) as usize + 1
}
fn xzero_len(b0: u8, b1: u8) -> usize {
    ((((b0 & 0x3f) as usize) << 8) | b1 as usize) + 1
}
fn val_value(b: u8) -> u8 {
    ((b >> 2) & 0x1f) + 1
}
fn val_len(b: u8) -> usize {
    (b & 3) as usize + 1
}
fn val(value: u8, len: usize) -> u8 {
    ((value - 1) << 2) | (len as u8 - 1) | 0x80
}
fn xzero(len: usize) -> [u8; 2] {
    let l = len - 1;
    [(l >> 8) as u8 | 0x40, l as u8]
}

/// A run of zero registers as Redis writes it when splitting an opcode.
fn push_zeros(seq: &mut Vec<u8>, len: usize) {
    if len > ZERO_MAX_LEN {
        seq.extend_from_slice(&xzero(len));
    } else {
        seq.push(len as u8 - 1);
    }
}

// ---- dense ----

fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let b0 = at(regs, byte) as u32;
    let b1 = at(regs, byte + 1) as u32;
    (((b0 >> fb) | (b1 << (8 - fb))) & REGISTER_MAX as u32) as u8
}

fn dense_put(regs: &mut [u8], i: usize, v: u8) {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let v = v as u32;
    regs[byte] &= !((REGISTER_MAX as u32) << fb) as u8;
    regs[byte] |= (v << fb) as u8;
    // The last register never spills into the next byte (fb is 2 there).
    if let Some(b) = regs.get_mut(byte + 1) {
        *b &= !((REGISTER_MAX as u32) >> (8 - fb)) as u8;
        *b |= (v >> (8 - fb)) as u8;
    }
}

fn dense_set(s: &mut [u8], i: usize, count: u8) -> bool {
    let regs = &mut s[HDR..];
    if count > dense_get(regs, i) {
        dense_put(regs, i, count);
        true
    } else {
        false
    }
}

// ---- sparse ----

/// Converts a sparse HLL to dense in place (a no-op when already dense).
pub fn sparse_to_dense(s: &mut Vec<u8>) -> Result<(), Corrupt> {
    if is_dense(s) {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HDR].copy_from_slice(&s[..HDR]);
    dense[4] = DENSE;
    let mut idx = 0usize;
    let mut p = HDR;
    while p < s.len() {
        let b = s[p];
        if is_zero(b) {
            idx += zero_len(b);
            p += 1;
        } else if is_xzero(b) {
            idx += xzero_len(b, at(s, p + 1));
            p += 2;
        } else {
            let (len, v) = (val_len(b), val_value(b));
            // Redis ≥ 7.0.x rejects a VAL past the last register (it used to stop there).
            if idx + len > REGISTERS {
                return Err(Corrupt);
            }
            for i in idx..idx + len {
                dense_put(&mut dense[HDR..], i, v);
            }
            idx += len;
            p += 1;
        }
    }
    if idx != REGISTERS {
        return Err(Corrupt);
    }
    *s = dense;
    Ok(())
}

/// `hllSparseSet`: raises register `index` to `count`, splitting the opcode that covers it,
/// merging equal neighbouring VALs, or promoting to dense when the value does not fit a VAL
/// or the string would grow past `max_bytes`.
fn sparse_set(s: &mut Vec<u8>, index: usize, count: u8, max_bytes: usize) -> Result<bool, Corrupt> {
    if count > VAL_MAX_VALUE {
        return promote(s, index, count);
    }
    let mut end = s.len();
    let (mut p, mut first, mut span) = (HDR, 0usize, 0usize);
    let mut prev = None;
    while p < end {
        let b = s[p];
        let mut oplen = 1;
        span = if is_zero(b) {
            zero_len(b)
        } else if is_val(b) {
            val_len(b)
        } else {
            oplen = 2;
            xzero_len(b, at(s, p + 1))
        };
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += oplen;
        first += span;
    }
    if span == 0 || p >= end {
        return Err(Corrupt);
    }
    let b = s[p];
    let oldlen = if is_xzero(b) { 2 } else { 1 };
    let has_next = p + oldlen < end;
    let runlen = span;

    let mut updated_in_place = false;
    if is_val(b) {
        if val_value(b) >= count {
            return Ok(false);
        }
        if runlen == 1 {
            s[p] = val(count, 1);
            updated_in_place = true;
        }
    } else if is_zero(b) && runlen == 1 {
        s[p] = val(count, 1);
        updated_in_place = true;
    }

    if !updated_in_place {
        let last = first + span - 1;
        let mut seq = Vec::with_capacity(5);
        if is_val(b) {
            let cur = val_value(b);
            if index != first {
                seq.push(val(cur, index - first));
            }
            seq.push(val(count, 1));
            if index != last {
                seq.push(val(cur, last - index));
            }
        } else {
            if index != first {
                push_zeros(&mut seq, index - first);
            }
            seq.push(val(count, 1));
            if index != last {
                push_zeros(&mut seq, last - index);
            }
        }
        let new_end = end + seq.len() - oldlen;
        if seq.len() > oldlen && new_end > max_bytes {
            return promote(s, index, count);
        }
        let tail_from = if has_next { p + oldlen } else { end };
        s.splice(p..tail_from, seq);
        // A truncated XZERO at the very end (its second byte was the terminator) leaves the
        // string one byte shorter than the sequence written, as in Redis.
        s.truncate(new_end);
        end = new_end;
    }

    // Merge adjacent VALs with the same value, scanning up to 5 opcodes from `prev`.
    let mut p = prev.unwrap_or(HDR);
    let mut scan = 5;
    while p < end && scan > 0 {
        scan -= 1;
        let b = s[p];
        if is_xzero(b) {
            p += 2;
            continue;
        } else if is_zero(b) {
            p += 1;
            continue;
        }
        if p + 1 < end && is_val(s[p + 1]) {
            let (v1, v2) = (val_value(b), val_value(s[p + 1]));
            let len = val_len(b) + val_len(s[p + 1]);
            if v1 == v2 && len <= VAL_MAX_LEN {
                s[p + 1] = val(v1, len);
                s.remove(p);
                end -= 1;
                continue;
            }
        }
        p += 1;
    }
    invalidate_cache(s);
    Ok(true)
}

fn promote(s: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    sparse_to_dense(s)?;
    Ok(dense_set(s, index, count))
}

/// Raises register `index` to `count` whatever the encoding. Ok(true) if it changed.
pub fn set_register(
    s: &mut Vec<u8>,
    index: usize,
    count: u8,
    max_bytes: usize,
) -> Result<bool, Corrupt> {
    if is_dense(s) {
        Ok(dense_set(s, index, count))
    } else {
        sparse_set(s, index, count, max_bytes)
    }
}

/// PFADD of one element. Ok(true) if a register changed.
pub fn add(s: &mut Vec<u8>, ele: &[u8], max_bytes: usize) -> Result<bool, Corrupt> {
    let (index, count) = pat_len(ele);
    set_register(s, index, count, max_bytes)
}

// ---- counting ----

/// Register histogram of a stored HLL.
fn histogram(s: &[u8]) -> Result<[u32; 64], Corrupt> {
    let mut h = [0u32; 64];
    let regs = &s[HDR..];
    if is_dense(s) {
        for i in 0..REGISTERS {
            h[dense_get(regs, i) as usize] += 1;
        }
        return Ok(h);
    }
    let mut idx = 0usize;
    let mut p = 0;
    while p < regs.len() {
        let b = regs[p];
        let (len, v, oplen) = if is_zero(b) {
            (zero_len(b), 0, 1)
        } else if is_xzero(b) {
            (xzero_len(b, at(regs, p + 1)), 0, 2)
        } else {
            (val_len(b), val_value(b), 1)
        };
        idx += len;
        h[v as usize] = h[v as usize].wrapping_add(len as u32);
        p += oplen;
    }
    if idx != REGISTERS {
        return Err(Corrupt);
    }
    Ok(h)
}

/// The cardinality estimate of a stored HLL (ignores the cache).
pub fn count(s: &[u8]) -> Result<u64, Corrupt> {
    Ok(estimate(&histogram(s)?))
}

/// `max[i] = max(max[i], register i)` for a stored HLL (PFCOUNT of several keys, PFMERGE).
pub fn merge_into(max: &mut [u8], s: &[u8]) -> Result<(), Corrupt> {
    let regs = &s[HDR..];
    if is_dense(s) {
        for (i, m) in max.iter_mut().enumerate().take(REGISTERS) {
            *m = (*m).max(dense_get(regs, i));
        }
        return Ok(());
    }
    let mut i = 0usize;
    let mut p = 0;
    while p < regs.len() {
        let b = regs[p];
        if is_zero(b) {
            i += zero_len(b);
            p += 1;
        } else if is_xzero(b) {
            i += xzero_len(b, at(regs, p + 1));
            p += 2;
        } else {
            let (len, v) = (val_len(b), val_value(b));
            if i + len > REGISTERS {
                return Err(Corrupt);
            }
            for m in &mut max[i..i + len] {
                *m = (*m).max(v);
            }
            i += len;
            p += 1;
        }
    }
    if i != REGISTERS {
        return Err(Corrupt);
    }
    Ok(())
}

/// The estimate for registers held one per byte (the result of `merge_into`).
pub fn count_raw(max: &[u8]) -> u64 {
    let mut h = [0u32; 64];
    for &r in max {
        h[(r & 63) as usize] += 1;
    }
    estimate(&h)
}

/// Ertl's improved estimator ("New cardinality estimation algorithms for HyperLogLog
/// sketches", arXiv:1702.01284), as Redis ≥ 5 computes it, operation for operation.
fn estimate(h: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - h[Q + 1] as f64) / m);
    for j in (1..=Q).rev() {
        z += h[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(h[0] as f64 / m);
    (ALPHA_INF * m * m / z).round() as u64
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let z_prev = z;
        z += x * y;
        y += y;
        if z_prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let z_prev = z;
        y *= 0.5;
        // gcc folds Redis's pow(1 - x, 2) into a multiplication.
        z -= (1.0 - x) * (1.0 - x) * y;
        if z_prev == z {
            return z / 3.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registers(s: &[u8]) -> Vec<u8> {
        let mut max = vec![0u8; REGISTERS];
        merge_into(&mut max, s).unwrap();
        max
    }

    #[test]
    fn hashes_and_sparse_bytes_match_redis() {
        // GET after `PFADD k a b c d` on redis-server 7.0 (cache invalidated).
        let mut s = new_sparse();
        for e in [&b"a"[..], b"b", b"c", b"d"] {
            assert_eq!(add(&mut s, e, 3000), Ok(true));
        }
        assert_eq!(
            &s[..],
            &b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80\x5c\x7b\x80\x44\x76\x80\x50\xb1\x84\x4b\xfb\x80\x42\x5a"[..]
        );
        assert_eq!(count(&s), Ok(4));
    }

    #[test]
    fn empty_hll_layout() {
        let s = new_sparse();
        assert_eq!(s, b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff");
        assert!(is_hll(&s));
        assert_eq!(count(&s), Ok(0));
        assert_eq!(cached(&s), Some(0));
    }

    #[test]
    fn header_checks() {
        assert!(!is_hll(b"HYLL"));
        assert!(!is_hll(b"HYLX\x01\0\0\0\0\0\0\0\0\0\0\0"));
        assert!(!is_hll(b"HYLL\x02\0\0\0\0\0\0\0\0\0\0\0"));
        assert!(!is_hll(b"HYLL\x00\0\0\0\0\0\0\0\0\0\0\0\x7f\xff"));
        assert!(is_hll(b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0"));
    }

    #[test]
    fn sparse_and_dense_agree() {
        let mut sparse = new_sparse();
        let mut dense = new_sparse();
        sparse_to_dense(&mut dense).unwrap();
        assert_eq!(dense.len(), DENSE_SIZE);
        for i in 0..3000u32 {
            let e = format!("ele:{i}");
            let a = add(&mut sparse, e.as_bytes(), 3000).unwrap();
            let b = add(&mut dense, e.as_bytes(), 3000).unwrap();
            assert_eq!(a, b, "element {i}");
            if i % 97 == 0 {
                assert_eq!(registers(&sparse), registers(&dense));
                assert_eq!(count(&sparse), count(&dense));
            }
        }
        // 3000 elements overflow 3000 bytes of sparse encoding.
        assert!(is_dense(&sparse));
        assert_eq!(sparse[16..], dense[16..]);
        let c = count(&sparse).unwrap();
        assert!((2900..3100).contains(&c), "{c}");
    }

    #[test]
    fn sparse_stays_within_limit_and_merges_vals() {
        let mut s = new_sparse();
        for i in 0..200u32 {
            add(&mut s, &i.to_le_bytes(), 3000).unwrap();
            assert!(s.len() <= 3000);
        }
        assert!(!is_dense(&s));
        // Set two adjacent registers to the same value: one VAL of length 2.
        let mut t = new_sparse();
        sparse_set(&mut t, 100, 3, 3000).unwrap();
        sparse_set(&mut t, 101, 3, 3000).unwrap();
        assert_eq!(
            &t[HDR..],
            &[0x40, 99, val(3, 2), 0x7f, (16384 - 103) as u8][..]
        );
        assert_eq!(t[HDR + 3], 0x40 | ((16384 - 103 - 1) >> 8) as u8);
    }

    #[test]
    fn corrupted_sparse_is_detected() {
        let mut s = new_sparse();
        s.truncate(HDR + 1); // XZERO cut in half: reads a 0 past the end
        assert_eq!(count(&s), Err(Corrupt));
        let mut s = new_sparse();
        s.push(0x80); // one register too many
        assert_eq!(count(&s), Err(Corrupt));
        let mut max = vec![0u8; REGISTERS];
        assert_eq!(merge_into(&mut max, &s), Err(Corrupt));
        assert_eq!(sparse_to_dense(&mut s.clone()), Err(Corrupt));
        let mut s = new_sparse();
        s.push(0x00); // a trailing ZERO is caught everywhere
        assert_eq!(count(&s), Err(Corrupt));
        assert_eq!(merge_into(&mut max, &s), Err(Corrupt));
        assert_eq!(sparse_to_dense(&mut s.clone()), Err(Corrupt));
        let mut empty = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0".to_vec();
        assert_eq!(add(&mut empty, b"a", 3000), Err(Corrupt));
    }

    #[test]
    fn estimator_matches_redis_values() {
        let mut s = new_sparse();
        for i in 0..1000u32 {
            add(&mut s, format!("{i}").as_bytes(), 3000).unwrap();
        }
        // Observed on redis-server 7.0 for the same elements: PFCOUNT 1001, STRLEN 1923.
        assert_eq!(count(&s), Ok(1001));
        assert_eq!(s.len(), 1923);
    }
}
