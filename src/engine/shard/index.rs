//! The key map's index: key hash → slot number, in 64-byte buckets that each hold ten
//! (16-bit tag, 4-byte slot number) pairs side by side.
//!
//! Why not `hashbrown::HashTable<u32>` (which this replaced): its control bytes and its
//! values live in two arrays, so a lookup at a random key took two cache misses before it
//! even reached the slot (perf annotate of SET at 100 k random keys: 16% and 28% of
//! `Keys::insert` on the two loads, 48% on the slot). Here one line holds both, and its
//! address is known from the hash alone, so a connection can prefetch it for a command it
//! has not run yet ([`Index::prefetch`]) and then the candidate slot
//! ([`Index::first_candidate`]).
//!
//! Open addressing over buckets: a key lives in its home bucket (low bits of the hash) or,
//! if that was full when it came, in the next bucket with room, and so on. Removal leaves
//! a tombstone only in a bucket that has been full (a probe may have passed it); a bucket
//! with an empty entry ends every probe. Tombstones go at the next resize.

use crate::types::prefetch_read;

/// Entries per bucket: 10 × (2 + 4) bytes + 4 of padding = one 64-byte line.
const WAYS: usize = 10;
/// Tags 0 and 1 mark an empty entry and a removed one; live tags are 2..=u16::MAX.
const EMPTY: u16 = 0;
const GONE: u16 = 1;

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Bucket {
    tags: [u16; WAYS],
    vals: [u32; WAYS],
    _pad: u32,
}

const EMPTY_BUCKET: Bucket = Bucket {
    tags: [EMPTY; WAYS],
    vals: [0; WAYS],
    _pad: 0,
};

/// An entry's place, from [`Index::find_pos`], for [`Index::set`] and [`Index::remove`].
#[derive(Clone, Copy, Debug)]
pub struct Pos {
    b: usize,
    j: usize,
}

#[derive(Default)]
pub struct Index {
    /// A power of two of buckets, or none.
    buckets: Box<[Bucket]>,
    /// Live entries.
    len: usize,
    /// Live entries and tombstones: what fills the table toward its load limit.
    used: usize,
}

/// The tag stored for hash `h`: its top 16 bits (the bucket comes from the low bits and
/// the keyspace's shard choice from bits 32..38, so the three are independent).
#[inline]
fn tag(h: u64) -> u16 {
    let t = (h >> 48) as u16;
    if t <= GONE {
        t | 2
    } else {
        t
    }
}

impl Bucket {
    /// Two bits set (bits `2j` and `2j + 1`) where entry `j` has tag `t`, and whether an
    /// entry is empty. SSE2 compares eight tags at a time (a scalar loop cost ~70
    /// instructions a bucket).
    #[inline]
    fn matches(&self, t: u16) -> (u32, bool) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::*;
            // SAFETY: SSE2 is part of x86_64; the loads read 16 and 4 bytes inside `tags`
            // (20 bytes, at the start of a 64-byte aligned bucket), unaligned loads.
            unsafe /* SAFETY: above */ {
                let p = self.tags.as_ptr();
                let lo = _mm_loadu_si128(p.cast::<__m128i>());
                let hi = _mm_cvtsi32_si128(std::ptr::read_unaligned(p.add(8).cast::<i32>()));
                let want = _mm_set1_epi16(t as i16);
                let zero = _mm_setzero_si128();
                let m = _mm_movemask_epi8(_mm_cmpeq_epi16(lo, want)) as u32
                    | ((_mm_movemask_epi8(_mm_cmpeq_epi16(hi, want)) as u32 & 0xf) << 16);
                let e = _mm_movemask_epi8(_mm_cmpeq_epi16(lo, zero)) as u32
                    | ((_mm_movemask_epi8(_mm_cmpeq_epi16(hi, zero)) as u32 & 0xf) << 16);
                (m, e != 0)
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let mut m = 0u32;
            let mut empty = false;
            for (j, &x) in self.tags.iter().enumerate() {
                m |= u32::from(x == t) * 3 << (2 * j);
                empty |= x == EMPTY;
            }
            (m, empty)
        }
    }

    #[inline]
    fn has_empty(&self) -> bool {
        self.tags.contains(&EMPTY)
    }
}

impl Index {
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Entries it has room for (live ones, tombstones and the empty ones a probe needs).
    pub fn capacity(&self) -> usize {
        self.buckets.len() * WAYS
    }

    /// Heap bytes.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val::<[Bucket]>(&self.buckets)
    }

    /// At most 7/8 of the entries are used, so every probe meets an empty entry.
    fn limit(buckets: usize) -> usize {
        buckets * WAYS * 7 / 8
    }

    #[inline]
    fn home(&self, h: u64) -> usize {
        h as usize & (self.buckets.len() - 1)
    }

    /// The entry whose tag matches `h`'s and whose value `eq` accepts.
    #[inline]
    pub fn find_pos(&self, h: u64, mut eq: impl FnMut(u32) -> bool) -> Option<Pos> {
        if self.buckets.is_empty() {
            return None;
        }
        let t = tag(h);
        let mask = self.buckets.len() - 1;
        let mut b = h as usize & mask;
        loop {
            let bk = &self.buckets[b];
            let (mut m, empty) = bk.matches(t);
            while m != 0 {
                let j = m.trailing_zeros() as usize / 2;
                if eq(bk.vals[j]) {
                    return Some(Pos { b, j });
                }
                m &= m - 1;
                m &= m - 1;
            }
            // Ends: the load limit leaves an empty entry somewhere.
            if empty {
                return None;
            }
            b = (b + 1) & mask;
        }
    }

    #[inline]
    pub fn find(&self, h: u64, eq: impl FnMut(u32) -> bool) -> Option<u32> {
        self.find_pos(h, eq).map(|p| self.buckets[p.b].vals[p.j])
    }

    /// Replaces the value at `p`.
    #[inline]
    pub fn set(&mut self, p: Pos, v: u32) {
        self.buckets[p.b].vals[p.j] = v;
    }

    /// Removes the entry at `p`.
    pub fn remove(&mut self, p: Pos) {
        let bk = &mut self.buckets[p.b];
        debug_assert!(bk.tags[p.j] > GONE);
        // A bucket with an empty entry was never full since the last resize, so no probe
        // runs past it: its entries can go back to empty.
        if bk.has_empty() {
            bk.tags[p.j] = EMPTY;
            self.used -= 1;
        } else {
            bk.tags[p.j] = GONE;
        }
        self.len -= 1;
    }

    /// Adds `v` under hash `h`; the caller knows no entry for its key is present.
    /// `hash` gives the hash of any value already stored (to move it on a resize).
    pub fn insert_unique(&mut self, h: u64, v: u32, hash: impl Fn(u32) -> u64) {
        if self.used >= Self::limit(self.buckets.len()) {
            // Mostly tombstones: clean up in place; else double.
            let n = if self.len * 2 >= Self::limit(self.buckets.len()) {
                (self.buckets.len() * 2).max(1)
            } else {
                self.buckets.len()
            };
            self.rehash(n, &hash);
        }
        let t = tag(h);
        let mask = self.buckets.len() - 1;
        let mut b = h as usize & mask;
        loop {
            let bk = &mut self.buckets[b];
            if let Some(j) = bk.tags.iter().position(|&x| x <= GONE) {
                if bk.tags[j] == EMPTY {
                    self.used += 1;
                }
                bk.tags[j] = t;
                bk.vals[j] = v;
                self.len += 1;
                return;
            }
            b = (b + 1) & mask;
        }
    }

    /// Shrinks to the smallest table that holds `n` entries, if smaller than now.
    pub fn shrink_to(&mut self, n: usize, hash: impl Fn(u32) -> u64) {
        let n = n.max(self.len);
        let mut want = 1usize;
        while Self::limit(want) < n {
            want *= 2;
        }
        if want < self.buckets.len() {
            self.rehash(want, &hash);
        }
    }

    /// Moves every live entry into a fresh table of `n` buckets (tombstones dropped).
    fn rehash(&mut self, n: usize, hash: &impl Fn(u32) -> u64) {
        debug_assert!(n.is_power_of_two() && Self::limit(n) > self.len);
        let old = std::mem::replace(&mut self.buckets, vec![EMPTY_BUCKET; n].into_boxed_slice());
        let mask = n - 1;
        for bk in old.iter() {
            for j in 0..WAYS {
                let t = bk.tags[j];
                if t <= GONE {
                    continue;
                }
                let v = bk.vals[j];
                let mut b = hash(v) as usize & mask;
                loop {
                    let nb = &mut self.buckets[b];
                    if let Some(k) = nb.tags.iter().position(|&x| x == EMPTY) {
                        nb.tags[k] = t;
                        nb.vals[k] = v;
                        break;
                    }
                    b = (b + 1) & mask;
                }
            }
        }
        self.used = self.len;
    }

    /// Asks the CPU to fetch `h`'s home bucket: the first cache miss of a lookup, started
    /// while earlier commands run. Only a hint; it reads nothing.
    #[inline]
    pub fn prefetch(&self, h: u64) {
        if !self.buckets.is_empty() {
            prefetch_read(&self.buckets[self.home(h)]);
        }
    }

    /// The value of the first entry of `h`'s home bucket with `h`'s tag, unchecked against
    /// the key: what a lookup will most likely visit next (for prefetching).
    #[inline]
    pub fn first_candidate(&self, h: u64) -> Option<u32> {
        if self.buckets.is_empty() {
            return None;
        }
        let bk = &self.buckets[self.home(h)];
        let (m, _) = bk.matches(tag(h));
        (m != 0).then(|| bk.vals[m.trailing_zeros() as usize / 2])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Values are their own keys; the hash is a mix of the value, with `spread` low bits
    /// (few bits crowd every key into a handful of buckets: long probes, full buckets).
    fn h(v: u32, spread: u32) -> u64 {
        let x = crate::types::placement::mix64(u64::from(v) + 1);
        (x & !((1u64 << 32) - 1)) | (x & ((1u64 << spread) - 1))
    }

    #[test]
    fn follows_a_model_under_random_changes() {
        for spread in [2u32, 6, 32] {
            let mut ix = Index::default();
            let mut model: HashMap<u32, ()> = HashMap::new();
            let mut rng = 0x9e37_79b9_7f4a_7c15u64;
            for step in 0..40_000u32 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let v = (rng % 3000) as u32;
                let hv = h(v, spread);
                let found = ix.find(hv, |x| x == v);
                assert_eq!(found.is_some(), model.contains_key(&v), "step {step}");
                match (rng >> 40) % 5 {
                    0..=2 if found.is_none() => {
                        ix.insert_unique(hv, v, |x| h(x, spread));
                        model.insert(v, ());
                    }
                    _ => {
                        if let Some(p) = ix.find_pos(hv, |x| x == v) {
                            ix.remove(p);
                            model.remove(&v);
                        }
                    }
                }
                if step % 997 == 0 {
                    ix.shrink_to(ix.len() * 2, |x| h(x, spread));
                }
                assert_eq!(ix.len(), model.len());
                assert!(ix.used <= Index::limit(ix.buckets.len()));
            }
            for v in 0..3000 {
                assert_eq!(
                    ix.find(h(v, spread), |x| x == v).is_some(),
                    model.contains_key(&v)
                );
            }
        }
    }

    #[test]
    fn set_renumbers_and_candidates_point_home() {
        let mut ix = Index::default();
        for v in 0..100u32 {
            ix.insert_unique(h(v, 32), v, |x| h(x, 32));
        }
        let p = ix.find_pos(h(7, 32), |x| x == 7).unwrap();
        ix.set(p, 1007);
        assert_eq!(ix.find(h(7, 32), |x| x == 1007), Some(1007));
        assert_eq!(ix.find(h(7, 32), |x| x == 7), None);
        // With a spread-out hash most keys sit first in their home bucket.
        let home = (0..100u32)
            .filter(|&v| v != 7 && ix.first_candidate(h(v, 32)) == Some(v))
            .count();
        assert!(home >= 90, "{home}");
        ix.prefetch(h(3, 32));
    }

    #[test]
    fn shrinking_and_tombstones_keep_the_table_small() {
        let mut ix = Index::default();
        for v in 0..10_000u32 {
            ix.insert_unique(h(v, 32), v, |x| h(x, 32));
        }
        let big = ix.bytes();
        for v in 0..9_990u32 {
            let p = ix.find_pos(h(v, 32), |x| x == v).unwrap();
            ix.remove(p);
        }
        ix.shrink_to(20, |x| h(x, 32));
        assert!(ix.bytes() * 100 < big, "{} of {big}", ix.bytes());
        for v in 9_990..10_000u32 {
            assert_eq!(ix.find(h(v, 32), |x| x == v), Some(v));
        }
        // Churn at a steady size never grows the table without bound (tombstones are
        // cleaned in place).
        let mut ix = Index::default();
        for v in 0..50u32 {
            ix.insert_unique(h(v, 32), v, |x| h(x, 32));
        }
        let steady = ix.bytes();
        for v in 50..100_000u32 {
            let old = v - 50;
            let p = ix.find_pos(h(old, 32), |x| x == old).unwrap();
            ix.remove(p);
            ix.insert_unique(h(v, 32), v, |x| h(x, 32));
        }
        assert!(ix.bytes() <= steady * 2, "{} vs {steady}", ix.bytes());
    }
}
