//! A sorted set's member → score dict (`Table<f64, Alias>`): a chained hash table over a dense
//! slot vector, which ZSCAN walks as Redis walks `zset->dict`. (Sets and hashes use
//! [`super::flat`], whose slots hold short members inline; a sorted set's member lives in its
//! tree, and its slot keeps the hash bits that spare comparing aliased bytes.)
//!
//! Members live in `slots` (dense, so a uniformly random member is one index away and
//! iteration is a slice walk); `buckets` holds the head slot of each chain. Removal swaps the
//! last slot into the hole and relinks it. The bucket count is a power of two that grows and
//! shrinks as Redis's dict does (grow at load 1, shrink below 10% fill), with a whole rehash
//! at once (there is no second table, so SSCAN's reasoning is the simple single-table case).
//!
//! SSCAN uses Redis's reverse-binary cursor over buckets: a member present for a whole scan
//! is returned at least once, whatever inserts, deletes and resizes happen between calls.

use bytes::Bytes;
use std::sync::OnceLock;

/// What a slot stores as its member: something that reads as the member's bytes. A set owns
/// its members (`Bytes`); a sorted set's table holds aliases of the bytes its tree owns, so
/// each member is stored once, without a shared-ownership header.
pub trait Key {
    fn key(&self) -> &[u8];
}

impl Key for Bytes {
    #[inline]
    fn key(&self) -> &[u8] {
        self
    }
}

/// Slot numbers are `u32` (with the stored hash's low 32 bits, a slot is 8 bytes smaller
/// and a bucket 4): a table holds fewer than 2^32 members, as a key's value does.
const NIL: u32 = u32::MAX;
/// Redis's `DICT_HT_INITIAL_SIZE`.
const MIN_BUCKETS: usize = 4;
/// Redis's `HASHTABLE_MIN_FILL` (percent): below it the table shrinks.
const MIN_FILL: usize = 10;

/// One process-wide, randomly keyed hasher (members are client-controlled).
fn hash(m: &[u8]) -> u64 {
    static STATE: OnceLock<ahash::RandomState> = OnceLock::new();
    STATE.get_or_init(ahash::RandomState::new).hash_one(m)
}

#[derive(Clone, Debug)]
struct Slot<V, M> {
    /// The low 32 bits of the member's hash: enough for any bucket count a `u32` slot
    /// number allows, and a cheap filter before comparing members.
    hash: u32,
    next: u32,
    member: M,
    value: V,
}

#[derive(Clone, Debug)]
pub struct Table<V = (), M = Bytes> {
    slots: Vec<Slot<V, M>>,
    buckets: Vec<u32>,
    /// Sum of member lengths, for memory accounting.
    bytes: usize,
}

impl<V, M> Default for Table<V, M> {
    fn default() -> Self {
        Table {
            slots: Vec::new(),
            buckets: Vec::new(),
            bytes: 0,
        }
    }
}

/// A set of owned members: the shape the tests below exercise the table's core with.
#[cfg(test)]
impl Table<()> {
    /// Adds a member (copying it); false if it was already there.
    pub fn insert(&mut self, m: &[u8]) -> bool {
        let h = hash(m);
        if self.find(m, h).is_some() {
            return false;
        }
        self.push(Bytes::copy_from_slice(m), h, ());
        true
    }

    /// Adds a member known to be absent (conversions from the small encodings).
    pub fn insert_new(&mut self, m: Bytes) {
        self.insert_new_with(m, ());
    }

    /// Removes a member; false if absent.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        self.take(m).is_some()
    }

    /// One SSCAN step (Redis `dictScan` loop), see [`Table::scan_each`].
    pub fn scan(&self, cursor: u64, count: usize, out: &mut Vec<Bytes>) -> u64 {
        self.scan_each(cursor, count, |m, _| out.push(m.clone()))
    }
}

impl<V, M: Key> Table<V, M> {
    /// An empty table presized for `cap` members (Redis `dictExpand`).
    pub fn with_capacity(cap: usize) -> Table<V, M> {
        let mut t = Table {
            slots: Vec::with_capacity(cap.min(1 << 20)),
            buckets: Vec::new(),
            bytes: 0,
        };
        t.rebuild(bucket_count(cap));
        t
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn member_bytes(&self) -> usize {
        self.bytes
    }

    pub fn bucket_len(&self) -> usize {
        self.buckets.len()
    }

    #[inline]
    fn mask(&self) -> usize {
        self.buckets.len().wrapping_sub(1)
    }

    fn find(&self, m: &[u8], h: u64) -> Option<usize> {
        if self.buckets.is_empty() {
            return None;
        }
        let mut i = self.buckets[h as u32 as usize & self.mask()];
        while i != NIL {
            let s = &self.slots[i as usize];
            if s.hash == h as u32 && s.member.key() == m {
                return Some(i as usize);
            }
            i = s.next;
        }
        None
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        self.find(m, hash(m)).is_some()
    }

    /// The value of a member.
    pub fn value(&self, m: &[u8]) -> Option<&V> {
        self.find(m, hash(m)).map(|i| &self.slots[i].value)
    }

    pub fn value_mut(&mut self, m: &[u8]) -> Option<&mut V> {
        self.find(m, hash(m)).map(|i| &mut self.slots[i].value)
    }

    /// One lookup for a read-then-write: `Ok(slot)` of a present member, or `Err(hash)` to
    /// pass to [`Table::insert_hashed`] (valid until the table next changes).
    pub fn lookup(&self, m: &[u8]) -> Result<usize, u64> {
        let h = hash(m);
        self.find(m, h).ok_or(h)
    }

    /// The value in slot `i` (from [`Table::lookup`]).
    pub fn value_at(&self, i: usize) -> &V {
        &self.slots[i].value
    }

    pub fn value_at_mut(&mut self, i: usize) -> &mut V {
        &mut self.slots[i].value
    }

    /// Adds a member that [`Table::lookup`] found absent, with the hash it returned.
    pub fn insert_hashed(&mut self, m: M, h: u64, value: V) {
        debug_assert!(h == hash(m.key()) && self.find(m.key(), h).is_none());
        self.push(m, h, value);
    }

    /// Adds a member known to be absent, with its value.
    pub fn insert_new_with(&mut self, m: M, value: V) {
        let h = hash(m.key());
        debug_assert!(self.find(m.key(), h).is_none());
        self.push(m, h, value);
    }

    /// Removes a member; returns its value.
    pub fn take(&mut self, m: &[u8]) -> Option<V> {
        let i = self.find(m, hash(m))?;
        Some(self.remove_slot(i).value)
    }

    fn push(&mut self, member: M, h: u64, value: V) {
        if self.slots.len() >= self.buckets.len() {
            self.rebuild(bucket_count(self.slots.len() + 1));
        }
        if self.slots.len() == self.slots.capacity() {
            // Grown by half, not doubled: a big table's slack averages a sixth of its slots
            // instead of a third (the slots are most of a big set's memory).
            self.slots.reserve_exact((self.slots.len() / 2).max(4));
        }
        let h = h as u32;
        let b = h as usize & self.mask();
        self.bytes += member.key().len();
        let at = u32::try_from(self.slots.len()).expect("fewer than 2^32 members");
        self.slots.push(Slot {
            hash: h,
            next: self.buckets[b],
            member,
            value,
        });
        self.buckets[b] = at;
    }

    /// Removes the member in slot `i` and returns it.
    pub fn remove_at(&mut self, i: usize) -> M {
        self.remove_slot(i).member
    }

    fn remove_slot(&mut self, i: usize) -> Slot<V, M> {
        self.unlink(i, i);
        let last = self.slots.len() - 1;
        if i != last {
            // The last slot moves into the hole: point its chain at the new index.
            self.unlink(last, i);
        }
        let slot = self.slots.swap_remove(i);
        self.bytes -= slot.member.key().len();
        let size = self.buckets.len();
        if size > MIN_BUCKETS && self.slots.len() * 100 / size < MIN_FILL {
            self.rebuild(bucket_count(self.slots.len()));
        }
        slot
    }

    /// Replaces the link to slot `from` in its chain with `to` (`to == from` unlinks it).
    fn unlink(&mut self, from: usize, to: usize) {
        let replacement = if to == from {
            self.slots[from].next
        } else {
            to as u32
        };
        let b = self.slots[from].hash as usize & self.mask();
        let from = from as u32;
        if self.buckets[b] == from {
            self.buckets[b] = replacement;
            return;
        }
        let mut i = self.buckets[b];
        while i != NIL {
            let next = self.slots[i as usize].next;
            if next == from {
                self.slots[i as usize].next = replacement;
                return;
            }
            i = next;
        }
        debug_assert!(false, "slot {from} not in its chain");
    }

    fn rebuild(&mut self, buckets: usize) {
        self.buckets.clear();
        self.buckets.resize(buckets, NIL);
        let mask = buckets - 1;
        for (i, s) in self.slots.iter_mut().enumerate() {
            let b = s.hash as usize & mask;
            s.next = self.buckets[b];
            self.buckets[b] = i as u32;
        }
    }

    /// The member in slot `i` (slots are dense: `0..len`).
    pub fn get(&self, i: usize) -> &M {
        &self.slots[i].member
    }

    pub fn iter(&self) -> Iter<'_, V, M> {
        Iter(self.slots.iter())
    }

    /// One SCAN-family step (Redis `dictScan` loop): visits buckets from `cursor` in
    /// reverse-binary order, passing each entry to `f`, until at least `count` entries were
    /// visited, `count * 10` more buckets were visited, or the scan wrapped (next cursor 0).
    /// Returns the next cursor.
    pub fn scan_each(&self, cursor: u64, count: usize, mut f: impl FnMut(&M, &V)) -> u64 {
        if self.buckets.is_empty() {
            return 0;
        }
        let mask = self.mask() as u64;
        let mut v = cursor;
        let mut budget = count.saturating_mul(10);
        let mut seen = 0;
        loop {
            let mut i = self.buckets[(v & mask) as usize];
            while i != NIL {
                let s = &self.slots[i as usize];
                f(&s.member, &s.value);
                seen += 1;
                i = s.next;
            }
            // Increment the reversed cursor: high bits first, so a resize between calls
            // neither skips nor restarts buckets already covered.
            v |= !mask;
            v = v.reverse_bits().wrapping_add(1).reverse_bits();
            if v == 0 || budget == 0 || seen >= count {
                return v;
            }
            budget -= 1;
        }
    }

    #[cfg(test)]
    pub fn check(&self) {
        let mut seen = 0;
        for (b, &head) in self.buckets.iter().enumerate() {
            let mut i = head;
            while i != NIL {
                let s = &self.slots[i as usize];
                assert_eq!(s.hash as usize & self.mask(), b);
                assert_eq!(s.hash, hash(s.member.key()) as u32);
                seen += 1;
                i = s.next;
            }
        }
        assert_eq!(seen, self.slots.len());
        assert!(self.buckets.len().is_power_of_two());
        assert_eq!(
            self.bytes,
            self.slots
                .iter()
                .map(|s| s.member.key().len())
                .sum::<usize>()
        );
    }
}

/// Members in slot order.
pub struct Iter<'a, V = (), M = Bytes>(std::slice::Iter<'a, Slot<V, M>>);

impl<'a, V, M> Iterator for Iter<'a, V, M> {
    type Item = &'a M;
    #[inline]
    fn next(&mut self) -> Option<&'a M> {
        self.0.next().map(|s| &s.member)
    }
}

/// Buckets for `n` members: the next power of two, at least `MIN_BUCKETS`.
fn bucket_count(n: usize) -> usize {
    n.max(MIN_BUCKETS)
        .checked_next_power_of_two()
        .unwrap_or(1 << (usize::BITS - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_compact_and_grow_by_half() {
        // A sorted set's member → score slot: hash and link in 8 bytes, not 16.
        assert_eq!(std::mem::size_of::<Slot<f64, Bytes>>(), 48);
        let mut t: Table<f64> = Table::default();
        for i in 0..100_000u32 {
            t.insert_new_with(Bytes::from(i.to_string()), 0.0);
            // Never more than half again as many slots as members (doubling allows twice).
            assert!(
                t.slots.capacity() <= (t.len() * 3 / 2).max(8),
                "{}",
                t.len()
            );
        }
        t.check();
    }
    use std::collections::HashSet;

    fn key(i: usize) -> Vec<u8> {
        format!("member:{i:06}").into_bytes()
    }

    #[test]
    fn insert_remove_grow_shrink() {
        let mut t = Table::with_capacity(0);
        for i in 0..5000 {
            assert!(t.insert(&key(i)));
            assert!(!t.insert(&key(i)));
        }
        t.check();
        assert_eq!(t.len(), 5000);
        assert_eq!(t.bucket_len(), 8192);
        for i in (0..5000).step_by(2) {
            assert!(t.remove(&key(i)));
            assert!(!t.remove(&key(i)));
        }
        t.check();
        for i in 0..5000 {
            assert_eq!(t.contains(&key(i)), i % 2 == 1);
        }
        for i in (1..5000).step_by(2).skip(10) {
            assert!(t.remove(&key(i)));
        }
        t.check();
        assert_eq!(t.len(), 10);
        assert!(t.bucket_len() <= 128, "shrunk: {}", t.bucket_len());
        let got: HashSet<_> = t.iter().cloned().collect();
        assert_eq!(got.len(), 10);
    }

    #[test]
    fn remove_at_every_position() {
        let mut t = Table::with_capacity(16);
        for i in 0..16 {
            t.insert(&key(i));
        }
        let mut removed = HashSet::new();
        while !t.is_empty() {
            let i = removed.len() * 7 % t.len();
            assert!(removed.insert(t.remove_at(i)));
            t.check();
        }
        assert_eq!(removed.len(), 16);
    }

    fn full_scan(t: &Table, count: usize) -> Vec<Bytes> {
        let mut out = Vec::new();
        let mut c = 0;
        loop {
            c = t.scan(c, count, &mut out);
            if c == 0 {
                return out;
            }
        }
    }

    #[test]
    fn scan_returns_everything_once_without_churn() {
        let mut t = Table::with_capacity(0);
        for i in 0..1000 {
            t.insert(&key(i));
        }
        for count in [1, 7, 10, 5000] {
            let got = full_scan(&t, count);
            assert_eq!(got.len(), 1000);
            assert_eq!(got.iter().collect::<HashSet<_>>().len(), 1000);
        }
    }

    #[test]
    fn scan_covers_stable_members_under_churn() {
        // Members present throughout must be seen, while others come and go and the table
        // grows and shrinks between calls.
        let mut t = Table::with_capacity(0);
        for i in 0..300 {
            t.insert(format!("stable:{i}").as_bytes());
        }
        for i in 0..2000 {
            t.insert(format!("churn:{i}").as_bytes());
        }
        let mut seen = HashSet::new();
        let (mut cursor, mut step) = (0u64, 0usize);
        loop {
            let mut out = Vec::new();
            cursor = t.scan(cursor, 5, &mut out);
            seen.extend(out);
            if cursor == 0 {
                break;
            }
            step += 1;
            // Phase 1 shrinks the table (removes churn), phase 2 grows it again.
            if step < 150 {
                for j in 0..14 {
                    t.remove(format!("churn:{}", step * 14 + j).as_bytes());
                }
            } else {
                for j in 0..20 {
                    t.insert(format!("new:{step}:{j}").as_bytes());
                }
            }
            t.check();
            assert!(step < 100_000, "scan does not terminate");
        }
        for i in 0..300 {
            let m = Bytes::from(format!("stable:{i}"));
            assert!(seen.contains(&m), "missed {m:?}");
        }
    }
}
