//! The hash value type: field → value, both binary.
//!
//! Two encodings, as Redis reports them in `OBJECT ENCODING`:
//! - `listpack` while small: a vector of pairs in insertion order, searched linearly (Redis's
//!   listpack; HGETALL/HKEYS/HVALS/HSCAN return insertion order and deleting keeps the order
//!   of the rest, which clients can observe, so we keep it).
//! - `hashtable` once it exceeds `hash-max-listpack-entries` entries or a field/value exceeds
//!   `hash-max-listpack-value` bytes. Like Redis, a hash never converts back.
//!
//! The `hashtable` form is a slot vector in insertion order (deleted slots become holes,
//! compacted once they outnumber live entries) plus an index from the field's 64-bit hash to
//! its slot. Every slot carries a sequence number that never changes and grows along the
//! vector, so an HSCAN cursor is simply "the next sequence number to visit": an element
//! present for a whole iteration is returned exactly once, whatever inserts, deletes and
//! compactions happen between calls.

use bytes::Bytes;
use rand::Rng;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// Redis's `LISTPACK_MAX_SAFETY_SIZE`: a listpack never grows past this.
const LISTPACK_MAX_SAFE: usize = 1 << 30;

/// Conversion thresholds (`hash-max-listpack-entries`, `hash-max-listpack-value`).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_entries: usize,
    pub max_value: usize,
}

impl Limits {
    /// Redis's defaults.
    pub const DEFAULT: Limits = Limits {
        max_entries: 512,
        max_value: 64,
    };
}

#[derive(Debug, Clone)]
pub struct HashValue {
    repr: Repr,
    /// Sum of field and value lengths, for memory accounting.
    bytes: usize,
}

#[derive(Debug, Clone)]
enum Repr {
    Listpack(Vec<(Bytes, Bytes)>),
    /// Boxed: keeps `Value` small for the common string keys.
    Table(Box<Table>),
}

impl Default for HashValue {
    fn default() -> Self {
        HashValue::new()
    }
}

impl PartialEq for HashValue {
    /// Same fields with the same values (encoding and order aside).
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .all(|(f, v)| other.get(f).is_some_and(|o| o == v))
    }
}

impl HashValue {
    pub fn new() -> HashValue {
        HashValue {
            repr: Repr::Listpack(Vec::new()),
            bytes: 0,
        }
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Listpack(v) => v.len(),
            Repr::Table(t) => t.live,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_listpack(&self) -> bool {
        matches!(self.repr, Repr::Listpack(_))
    }

    /// The name `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        match self.repr {
            Repr::Listpack(_) => "listpack",
            Repr::Table(_) => "hashtable",
        }
    }

    /// Rough heap footprint.
    pub fn approx_size(&self) -> usize {
        let per_entry = match &self.repr {
            Repr::Listpack(_) => 2 * std::mem::size_of::<Bytes>(),
            Repr::Table(_) => std::mem::size_of::<Slot>() + 16,
        };
        self.bytes + self.len() * per_entry
    }

    pub fn get(&self, field: &[u8]) -> Option<&Bytes> {
        match &self.repr {
            Repr::Listpack(v) => v.iter().find(|(f, _)| f[..] == *field).map(|(_, v)| v),
            Repr::Table(t) => t.get(field),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Pairs in the hash's order (insertion order).
    pub fn iter(&self) -> Iter<'_> {
        match &self.repr {
            Repr::Listpack(v) => Iter::Listpack(v.iter()),
            Repr::Table(t) => Iter::Table(t.slots.iter()),
        }
    }

    /// Redis `hashTypeTryConversion` before a write of `pairs` pairs whose arguments are
    /// `longest_arg` bytes at most and `total_len` bytes together: a write of more pairs than
    /// a listpack may hold converts up front (even if fields repeat, as Redis 7.2 does), as
    /// does any argument longer than `max_value` or a listpack that would pass its 1 GB
    /// safety size (approximated by the payload bytes).
    pub fn prepare(&mut self, pairs: usize, longest_arg: usize, total_len: usize, lim: Limits) {
        if !self.is_listpack() {
            return;
        }
        if pairs > lim.max_entries {
            self.convert(pairs);
        } else if longest_arg > lim.max_value
            || self.bytes.saturating_add(total_len) > LISTPACK_MAX_SAFE
        {
            self.convert(0);
        }
    }

    /// Sets `field` to `value` (copying both); true if the field is new.
    pub fn set(&mut self, field: &[u8], value: &[u8], lim: Limits) -> bool {
        self.set_with(field, NewValue::Copy(value), lim)
    }

    /// Sets `field` to an owned value (HINCRBY* results); true if the field is new.
    pub fn set_bytes(&mut self, field: &[u8], value: Bytes, lim: Limits) -> bool {
        self.set_with(field, NewValue::Owned(value), lim)
    }

    /// Redis `hashTypeSet`: a listpack converts before storing a field or value longer than
    /// `max_value`, and after growing past `max_entries`.
    fn set_with(&mut self, field: &[u8], value: NewValue, lim: Limits) -> bool {
        let value_len = value.len();
        if let Repr::Listpack(_) = self.repr {
            if field.len() > lim.max_value || value_len > lim.max_value {
                self.convert(0);
            }
        }
        let (added, old_len) = match &mut self.repr {
            Repr::Listpack(v) => match v.iter_mut().find(|(f, _)| f[..] == *field) {
                Some((_, slot)) => (false, value.store_over(slot)),
                None => {
                    v.push((Bytes::copy_from_slice(field), value.into_bytes()));
                    (true, 0)
                }
            },
            Repr::Table(t) => t.set(field, value),
        };
        self.bytes = self.bytes - old_len + value_len + if added { field.len() } else { 0 };
        if added && self.is_listpack() && self.len() > lim.max_entries {
            self.convert(0);
        }
        added
    }

    /// Removes a field; true if it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        let removed = match &mut self.repr {
            Repr::Listpack(v) => v
                .iter()
                .position(|(f, _)| f[..] == *field)
                .map(|i| v.remove(i)),
            Repr::Table(t) => t.remove(field),
        };
        match removed {
            Some((f, v)) => {
                self.bytes -= f.len() + v.len();
                true
            }
            None => false,
        }
    }

    /// A uniformly chosen pair, or `None` when empty.
    pub fn random<R: Rng + ?Sized>(&self, rng: &mut R) -> Option<(&Bytes, &Bytes)> {
        if self.is_empty() {
            return None;
        }
        match &self.repr {
            Repr::Listpack(v) => {
                let (f, val) = &v[rng.gen_range(0..v.len())];
                Some((f, val))
            }
            Repr::Table(t) => Some(t.random(rng)),
        }
    }

    /// `count` distinct pairs chosen uniformly (`count` < `len`), in random order.
    pub fn random_distinct<R: Rng + ?Sized>(
        &self,
        count: usize,
        rng: &mut R,
    ) -> Vec<(&Bytes, &Bytes)> {
        let count = count.min(self.len());
        match &self.repr {
            Repr::Listpack(v) => rand::seq::index::sample(rng, v.len(), count)
                .into_iter()
                .map(|i| (&v[i].0, &v[i].1))
                .collect(),
            Repr::Table(t) => t.random_distinct(count, rng),
        }
    }

    /// One HSCAN step from `cursor`: appends pairs to `out` and returns the next cursor (0
    /// when the iteration is complete). A listpack is returned whole with cursor 0, whatever
    /// the cursor, as Redis does. A table returns pairs until `count` fields were visited
    /// (Redis 7.2's `sampled`: one per entry, a field with its value counts once) or
    /// `1 + 10 * count` slots were visited (its `maxiterations`, holes being empty buckets).
    pub fn scan<'a>(
        &'a self,
        cursor: u64,
        count: usize,
        out: &mut Vec<(&'a Bytes, &'a Bytes)>,
    ) -> u64 {
        match &self.repr {
            Repr::Listpack(v) => {
                out.extend(v.iter().map(|(f, v)| (f, v)));
                0
            }
            Repr::Table(t) => t.scan(cursor, count, out),
        }
    }

    /// Switches to the `hashtable` encoding, sized for `extra` more fields.
    fn convert(&mut self, extra: usize) {
        if let Repr::Listpack(v) = &mut self.repr {
            let pairs = std::mem::take(v);
            let mut t = Table::with_capacity(pairs.len() + extra);
            for (f, val) in pairs {
                t.push_new(f, val);
            }
            self.repr = Repr::Table(Box::new(t));
        }
    }
}

pub enum Iter<'a> {
    Listpack(std::slice::Iter<'a, (Bytes, Bytes)>),
    Table(std::slice::Iter<'a, Slot>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a Bytes, &'a Bytes);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Listpack(it) => it.next().map(|(f, v)| (f, v)),
            Iter::Table(it) => it.find_map(|s| s.entry.as_ref().map(|(f, v)| (f, v))),
        }
    }
}

/// A value being stored: copied from a request, or already owned (HINCRBY* results).
enum NewValue<'a> {
    Copy(&'a [u8]),
    Owned(Bytes),
}

impl NewValue<'_> {
    fn len(&self) -> usize {
        match self {
            NewValue::Copy(s) => s.len(),
            NewValue::Owned(b) => b.len(),
        }
    }

    fn into_bytes(self) -> Bytes {
        match self {
            NewValue::Copy(s) => Bytes::copy_from_slice(s),
            NewValue::Owned(b) => b,
        }
    }

    /// Replaces `slot`'s value; returns the old value's length. A copied value of the old
    /// one's length overwrites the old buffer when nothing else shares it (an HSET of a
    /// field of fixed-width values then allocates and frees nothing).
    fn store_over(self, slot: &mut Bytes) -> usize {
        let old_len = slot.len();
        *slot = match self {
            NewValue::Copy(s) if s.len() == old_len => match std::mem::take(slot).try_into_mut() {
                Ok(mut buf) => {
                    buf.copy_from_slice(s);
                    buf.freeze()
                }
                Err(_) => Bytes::copy_from_slice(s),
            },
            v => v.into_bytes(),
        };
        old_len
    }
}

// ---- the hashtable encoding ----

/// One position of the slot vector; `entry` is `None` once deleted (a hole).
#[derive(Debug, Clone)]
pub struct Slot {
    /// Scan order: strictly increasing along the vector, never reused.
    seq: u64,
    entry: Option<(Bytes, Bytes)>,
}

/// Index value marking a deleted entry that a probe chain may still pass through.
const TOMB: u32 = u32::MAX;

/// Holes are compacted once they outnumber live entries (and are at least this many).
const MIN_HOLES_TO_COMPACT: usize = 64;

#[derive(Debug, Clone)]
struct Table {
    slots: Vec<Slot>,
    /// Field hash → slot position. Two fields with the same 64-bit hash are chained through
    /// `next_probe`: every chain passing a key continues at the same next key, so a lookup
    /// walks until an absent key; deleting from a chain's middle leaves a `TOMB`.
    index: HashMap<u64, u32, IdentityBuild>,
    live: usize,
    next_seq: u64,
}

impl Table {
    fn with_capacity(n: usize) -> Table {
        Table {
            slots: Vec::with_capacity(n),
            index: HashMap::with_capacity_and_hasher(n, IdentityBuild),
            live: 0,
            next_seq: 1,
        }
    }

    /// Finds a field: `Ok((index key, slot))`, or `Err(index key a new entry should use)`.
    #[inline]
    fn locate(&self, field: &[u8]) -> Result<(u64, usize), u64> {
        let mut h = field_hash(field);
        let mut free = None;
        loop {
            match self.index.get(&h) {
                None => return Err(free.unwrap_or(h)),
                Some(&TOMB) => {
                    free.get_or_insert(h);
                }
                Some(&s) => {
                    let hit = self.slots[s as usize]
                        .entry
                        .as_ref()
                        .is_some_and(|(f, _)| f[..] == *field);
                    if hit {
                        return Ok((h, s as usize));
                    }
                }
            }
            h = next_probe(h);
        }
    }

    fn get(&self, field: &[u8]) -> Option<&Bytes> {
        let (_, s) = self.locate(field).ok()?;
        self.slots[s].entry.as_ref().map(|(_, v)| v)
    }

    /// Returns (added, length of the replaced value).
    #[inline]
    fn set(&mut self, field: &[u8], value: NewValue) -> (bool, usize) {
        match self.locate(field) {
            Ok((_, s)) => {
                let old = self.slots[s]
                    .entry
                    .as_mut()
                    .map(|(_, v)| value.store_over(v));
                (false, old.unwrap_or(0))
            }
            Err(key) => {
                self.append(key, Bytes::copy_from_slice(field), value.into_bytes());
                (true, 0)
            }
        }
    }

    /// Appends a field known to be absent.
    fn push_new(&mut self, field: Bytes, value: Bytes) {
        match self.locate(&field) {
            Err(key) => self.append(key, field, value),
            Ok((_, s)) => self.slots[s].entry = Some((field, value)),
        }
    }

    fn append(&mut self, key: u64, field: Bytes, value: Bytes) {
        self.index.insert(key, self.slots.len() as u32);
        self.slots.push(Slot {
            seq: self.next_seq,
            entry: Some((field, value)),
        });
        self.next_seq += 1;
        self.live += 1;
    }

    fn remove(&mut self, field: &[u8]) -> Option<(Bytes, Bytes)> {
        let (key, s) = self.locate(field).ok()?;
        let pair = self.slots[s].entry.take();
        if self.index.contains_key(&next_probe(key)) {
            self.index.insert(key, TOMB);
        } else {
            self.index.remove(&key);
        }
        self.live -= 1;
        let holes = self.slots.len() - self.live;
        if holes >= MIN_HOLES_TO_COMPACT && holes > self.live {
            self.compact();
        }
        pair
    }

    /// Drops the holes (sequence numbers stay with their entries) and rebuilds the index.
    fn compact(&mut self) {
        self.slots.retain(|s| s.entry.is_some());
        self.slots.shrink_to(self.slots.len() * 2);
        self.index = HashMap::with_capacity_and_hasher(self.slots.len(), IdentityBuild);
        for i in 0..self.slots.len() {
            let key = match &self.slots[i].entry {
                Some((f, _)) => match self.locate(f) {
                    Err(key) => key,
                    Ok(_) => continue,
                },
                None => continue,
            };
            self.index.insert(key, i as u32);
        }
    }

    fn random<R: Rng + ?Sized>(&self, rng: &mut R) -> (&Bytes, &Bytes) {
        // Holes are at most half the slots (or a few dozen): a few tries on average.
        loop {
            if let Some((f, v)) = &self.slots[rng.gen_range(0..self.slots.len())].entry {
                return (f, v);
            }
        }
    }

    fn random_distinct<R: Rng + ?Sized>(&self, count: usize, rng: &mut R) -> Vec<(&Bytes, &Bytes)> {
        if count * 3 > self.live {
            // Many of them: sample positions among the live entries.
            let live: Vec<(&Bytes, &Bytes)> = self
                .slots
                .iter()
                .filter_map(|s| s.entry.as_ref().map(|(f, v)| (f, v)))
                .collect();
            return rand::seq::index::sample(rng, live.len(), count)
                .into_iter()
                .map(|i| live[i])
                .collect();
        }
        // Few of them: random slots until enough distinct live ones.
        let mut seen = std::collections::HashSet::with_capacity(count);
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            let i = rng.gen_range(0..self.slots.len());
            if let Some((f, v)) = &self.slots[i].entry {
                if seen.insert(i) {
                    out.push((f, v));
                }
            }
        }
        out
    }

    fn scan<'a>(&'a self, cursor: u64, count: usize, out: &mut Vec<(&'a Bytes, &'a Bytes)>) -> u64 {
        let count = count.max(1);
        let budget = count.saturating_mul(10).saturating_add(1);
        let mut i = self.slots.partition_point(|s| s.seq < cursor);
        let (mut visited, mut sampled) = (0, 0);
        while i < self.slots.len() && sampled < count && visited < budget {
            if let Some((f, v)) = &self.slots[i].entry {
                out.push((f, v));
                sampled += 1;
            }
            i += 1;
            visited += 1;
        }
        self.slots.get(i).map_or(0, |s| s.seq)
    }
}

/// The process-wide keyed hash of fields (random keys: colliding fields cannot be chosen
/// from outside).
fn field_hash(field: &[u8]) -> u64 {
    static STATE: OnceLock<ahash::RandomState> = OnceLock::new();
    STATE.get_or_init(ahash::RandomState::new).hash_one(field)
}

/// The next index key of a probe chain (a bijection, so chains never merge wrongly).
#[inline]
fn next_probe(h: u64) -> u64 {
    crate::types::placement::mix64(h.wrapping_add(0x9e37_79b9_7f4a_7c15))
}

/// The index keys are already well-mixed hashes: use them as they are.
#[derive(Clone, Copy, Debug, Default)]
struct IdentityBuild;

impl BuildHasher for IdentityBuild {
    type Hasher = IdentityHasher;
    fn build_hasher(&self) -> IdentityHasher {
        IdentityHasher(0)
    }
}

#[derive(Default)]
struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only u64 keys are hashed; fold anything else just in case.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;
    use std::collections::{BTreeMap, HashSet};

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn fields(h: &HashValue) -> Vec<String> {
        h.iter()
            .map(|(f, _)| String::from_utf8_lossy(f).into_owned())
            .collect()
    }

    fn small() -> Limits {
        Limits {
            max_entries: 4,
            max_value: 8,
        }
    }

    #[test]
    fn listpack_keeps_insertion_order() {
        let mut h = HashValue::new();
        assert!(h.set(b"b", b"1", Limits::DEFAULT));
        assert!(h.set(b"a", b"2", Limits::DEFAULT));
        assert!(h.set(b"c", b"3", Limits::DEFAULT));
        assert!(!h.set(b"b", b"9", Limits::DEFAULT));
        assert_eq!(fields(&h), ["b", "a", "c"]);
        assert_eq!(h.get(b"b"), Some(&b("9")));
        assert!(h.remove(b"a"));
        assert!(!h.remove(b"a"));
        assert_eq!(fields(&h), ["b", "c"]);
        assert_eq!(h.encoding(), "listpack");
        assert_eq!(h.len(), 2);
    }

    #[test]
    fn converts_by_entries_and_by_length_and_never_back() {
        let mut h = HashValue::new();
        for i in 0..4 {
            h.set(format!("f{i}").as_bytes(), b"v", small());
        }
        assert_eq!(h.encoding(), "listpack");
        h.set(b"f4", b"v", small());
        assert_eq!(h.encoding(), "hashtable");
        for i in 0..5 {
            assert!(h.remove(format!("f{i}").as_bytes()));
        }
        assert!(h.is_empty());
        assert_eq!(h.encoding(), "hashtable");

        let mut h = HashValue::new();
        h.set(b"f", b"123456789", small());
        assert_eq!(h.encoding(), "hashtable");
        let mut h = HashValue::new();
        h.set(b"123456789", b"v", small());
        assert_eq!(h.encoding(), "hashtable");
        // Updating an existing field to a long value converts too.
        let mut h = HashValue::new();
        h.set(b"f", b"v", small());
        h.set_bytes(b"f", b("123456789"), small());
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"f"), Some(&b("123456789")));
    }

    #[test]
    fn prepare_converts_before_big_writes() {
        let mut h = HashValue::new();
        h.prepare(5, 1, 5, small());
        assert_eq!(h.encoding(), "hashtable");
        let mut h = HashValue::new();
        h.prepare(4, 9, 9, small());
        assert_eq!(h.encoding(), "hashtable");
        let mut h = HashValue::new();
        h.prepare(4, 8, 8, small());
        assert_eq!(h.encoding(), "listpack");
        h.prepare(1, 8, LISTPACK_MAX_SAFE + 1, small());
        assert_eq!(h.encoding(), "hashtable");
        let mut h = HashValue::new();
        h.prepare(4, 8, 8, small());
        assert_eq!(h.encoding(), "listpack");
    }

    #[test]
    fn conversion_keeps_order_and_contents() {
        let mut h = HashValue::new();
        for i in 0..4 {
            h.set(
                format!("f{i}").as_bytes(),
                format!("v{i}").as_bytes(),
                small(),
            );
        }
        let before: Vec<_> = h.iter().map(|(f, v)| (f.clone(), v.clone())).collect();
        h.set(b"f9", b"x", small());
        let after: Vec<_> = h.iter().map(|(f, v)| (f.clone(), v.clone())).collect();
        assert_eq!(&after[..4], &before[..]);
        assert_eq!(after[4], (b("f9"), b("x")));
    }

    #[test]
    fn overwriting_a_value_never_changes_a_copy_held_elsewhere() {
        for big in [false, true] {
            let mut h = HashValue::new();
            let lim = Limits::DEFAULT;
            if big {
                h.convert(0);
            }
            assert!(h.set(b"f", b"aaa", lim));
            // Unshared: overwritten in place, same length.
            assert!(!h.set(b"f", b"bbb", lim));
            assert_eq!(h.get(b"f").map(|v| &v[..]), Some(&b"bbb"[..]));
            // A reply still holding the value keeps what it read.
            let held = h.get(b"f").cloned().expect("value");
            assert!(!h.set(b"f", b"ccc", lim));
            assert_eq!(&held[..], b"bbb");
            assert_eq!(h.get(b"f").map(|v| &v[..]), Some(&b"ccc"[..]));
            // Other lengths, empty values and owned values.
            assert!(!h.set(b"f", b"", lim));
            assert!(!h.set(b"f", b"", lim));
            assert!(!h.set_bytes(b"f", Bytes::from_static(b"dddd"), lim));
            assert!(!h.set(b"f", b"eeee", lim));
            assert_eq!(h.get(b"f").map(|v| &v[..]), Some(&b"eeee"[..]));
            // The byte accounting followed every overwrite.
            let mut fresh = HashValue::new();
            if big {
                fresh.convert(0);
            }
            fresh.set(b"f", b"eeee", lim);
            assert_eq!(h.approx_size(), fresh.approx_size());
        }
    }

    #[test]
    fn table_matches_a_model_under_churn() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut h = HashValue::new();
        let mut model = BTreeMap::new();
        for step in 0..50_000 {
            let f = format!("field:{}", rng.gen_range(0..2_000));
            if rng.gen_bool(0.55) {
                let v = format!("v{step}");
                let added = h.set(f.as_bytes(), v.as_bytes(), small());
                assert_eq!(added, model.insert(f, v).is_none());
            } else {
                assert_eq!(h.remove(f.as_bytes()), model.remove(&f).is_some());
            }
            assert_eq!(h.len(), model.len());
        }
        for (f, v) in &model {
            assert_eq!(h.get(f.as_bytes()).map(|x| &x[..]), Some(v.as_bytes()));
        }
        let mut got: Vec<_> = h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
        got.sort();
        let want: Vec<_> = model
            .iter()
            .map(|(f, v)| (f.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        assert_eq!(got, want);
        let bytes: usize = model.iter().map(|(f, v)| f.len() + v.len()).sum();
        assert_eq!(h.bytes, bytes);
    }

    #[test]
    fn index_chains_survive_colliding_keys() {
        // Force chains by planting index keys: fill the table, then check lookups still work
        // after tombstoning chain members.
        let mut t = Table::with_capacity(0);
        let mut names = Vec::new();
        for i in 0..300 {
            let f = b(&format!("k{i}"));
            names.push(f.clone());
            t.push_new(f, b("v"));
        }
        // Plant a fake occupant at the first probe key of k0's chain's successor to force a
        // walk: move k0 one step down its chain.
        let (key, s) = t.locate(b"k0").expect("present");
        t.index.insert(key, TOMB);
        t.index.insert(next_probe(key), s as u32);
        assert_eq!(t.get(b"k0"), Some(&b("v")));
        assert!(t.remove(b"k0").is_some());
        assert_eq!(t.get(b"k0"), None);
        for n in &names[1..] {
            assert_eq!(t.get(n), Some(&b("v")));
        }
    }

    /// Full HSCAN with `count`, calling `between` after each step.
    fn full_scan(
        h: &mut HashValue,
        count: usize,
        mut between: impl FnMut(&mut HashValue),
    ) -> Vec<Bytes> {
        let mut cursor = 0;
        let mut seen = Vec::new();
        let mut calls = 0;
        loop {
            let mut out = Vec::new();
            cursor = h.scan(cursor, count, &mut out);
            seen.extend(out.into_iter().map(|(f, _)| f.clone()));
            calls += 1;
            assert!(calls < 100_000, "scan does not terminate");
            if cursor == 0 {
                return seen;
            }
            between(h);
        }
    }

    #[test]
    fn scan_of_a_listpack_is_one_call() {
        let mut h = HashValue::new();
        h.set(b"a", b"1", Limits::DEFAULT);
        h.set(b"b", b"2", Limits::DEFAULT);
        let mut out = Vec::new();
        assert_eq!(h.scan(12345, 1, &mut out), 0);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn scan_returns_everything_exactly_once_without_changes() {
        let mut h = HashValue::new();
        for i in 0..1000 {
            h.set(format!("f{i}").as_bytes(), b"v", small());
        }
        let seen = full_scan(&mut h, 10, |_| {});
        assert_eq!(seen.len(), 1000);
        assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 1000);
    }

    #[test]
    fn scan_covers_stable_elements_under_churn() {
        let mut rng = SmallRng::seed_from_u64(42);
        let mut h = HashValue::new();
        for i in 0..2000 {
            h.set(format!("stable{i}").as_bytes(), b"v", small());
            h.set(format!("temp{i}").as_bytes(), b"v", small());
        }
        let mut next = 0u64;
        let seen = full_scan(&mut h, 20, |h| {
            // Between calls: delete many temporaries (forcing compactions), add new ones.
            for _ in 0..40 {
                let i = rng.gen_range(0..2000);
                h.remove(format!("temp{i}").as_bytes());
            }
            // Fewer additions than a call returns, or the scan chases the growth forever
            // (Redis gives no termination guarantee for a growing collection either).
            for _ in 0..3 {
                h.set(format!("new{next}").as_bytes(), b"v", small());
                next += 1;
            }
        });
        let seen: Vec<String> = seen
            .iter()
            .map(|f| String::from_utf8_lossy(f).into_owned())
            .collect();
        let set: HashSet<&String> = seen.iter().collect();
        assert_eq!(set.len(), seen.len(), "no element returned twice");
        for i in 0..2000 {
            assert!(set.contains(&format!("stable{i}")), "stable{i} missed");
        }
    }

    fn slot_count(h: &HashValue) -> usize {
        match &h.repr {
            Repr::Table(t) => t.slots.len(),
            Repr::Listpack(v) => v.len(),
        }
    }

    #[test]
    fn scan_survives_compactions() {
        let mut h = HashValue::new();
        for i in 0..3000 {
            h.set(format!("temp{i}").as_bytes(), b"v", small());
            if i % 15 == 0 {
                h.set(format!("stable{i}").as_bytes(), b"v", small());
            }
        }
        let mut next_temp = 0;
        let mut compactions = 0;
        let seen = full_scan(&mut h, 20, |h| {
            let before = slot_count(h);
            for _ in 0..100 {
                h.remove(format!("temp{next_temp}").as_bytes());
                next_temp += 1;
            }
            if slot_count(h) < before {
                compactions += 1;
            }
        });
        assert!(compactions > 0, "the test must cross a compaction");
        let set: HashSet<Bytes> = seen.iter().cloned().collect();
        assert_eq!(set.len(), seen.len(), "no element returned twice");
        for i in (0..3000).step_by(15) {
            assert!(set.contains(&b(&format!("stable{i}"))), "stable{i} missed");
        }
    }

    #[test]
    fn random_picks_are_members_and_distinct_when_asked() {
        let mut rng = SmallRng::seed_from_u64(1);
        for lim in [Limits::DEFAULT, small()] {
            let mut h = HashValue::new();
            for i in 0..100 {
                h.set(format!("f{i}").as_bytes(), b"v", lim);
            }
            for i in 0..90 {
                h.remove(format!("f{i}").as_bytes());
            }
            for _ in 0..200 {
                let (f, _) = h.random(&mut rng).expect("non-empty");
                assert!(h.contains(f));
            }
            for count in [1, 3, 5, 9] {
                let picks = h.random_distinct(count, &mut rng);
                assert_eq!(picks.len(), count);
                let set: HashSet<_> = picks.iter().map(|(f, _)| *f).collect();
                assert_eq!(set.len(), count);
            }
        }
        assert!(HashValue::new().random(&mut rng).is_none());
    }

    #[test]
    fn equality_ignores_encoding_and_order() {
        let mut a = HashValue::new();
        a.set(b"x", b"1", Limits::DEFAULT);
        a.set(b"y", b"2", Limits::DEFAULT);
        let mut b2 = HashValue::new();
        b2.set(b"y", b"2", small());
        b2.set(b"x", b"1", small());
        b2.prepare(10, 0, 0, small());
        assert_eq!(a, b2);
        b2.set(b"x", b"3", small());
        assert_ne!(a, b2);
    }
}
