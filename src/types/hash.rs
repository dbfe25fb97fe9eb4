//! The hash value type: field → value, both binary.
//!
//! Two encodings, as Redis reports them in `OBJECT ENCODING`:
//! - `listpack` while small: a vector of pairs in insertion order, searched linearly (Redis's
//!   listpack; HGETALL/HKEYS/HVALS/HSCAN return insertion order and deleting keeps the order
//!   of the rest, which clients can observe, so we keep it).
//! - `hashtable` once it exceeds `hash-max-listpack-entries` entries or a field/value exceeds
//!   `hash-max-listpack-value` bytes. Like Redis, a hash never converts back.
//!
//! The `hashtable` form is the sets' open-addressed table ([`Flat`]) with a field and its
//! value in each slot, both inline up to 22 bytes: one probe finds the field and its value
//! (issue 17: the former slot vector behind a separate index took four cache misses per
//! HSET). Its order, like Redis's dict's, is the table's; HSCAN walks it with the table's
//! cursor, which returns an element present for a whole iteration exactly once, whatever
//! inserts, deletes and resizes happen between calls.
//!
//! Field deadlines (Redis 7.4 hash-field expiration, HEXPIRE and friends) live in a side
//! structure ([`Ttls`]) that exists only once a hash was given one: the table's slots, hot
//! for every hash, stay as they are. A field past its deadline stays stored until a command
//! or the active cycle removes it (Redis's lazy and active field expiry); HLEN counts it, as
//! Redis's does. A listpack with deadlines is Redis's `listpackex`: it keeps the fields that
//! have one first, ordered by deadline, and the others after them (an HGETALL shows it).

use crate::types::set::flat::{Flat, Small};
use bytes::Bytes;
use rand::Rng;
use std::collections::{BTreeSet, HashMap};

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
    /// Field deadlines; `None` until the hash is given one (then kept, as Redis keeps a
    /// `listpackex` or a dict's expiry metadata once made).
    ttls: Option<Box<Ttls>>,
}

/// Deadlines (Unix ms) of the fields that have one, by field and in time order.
#[derive(Debug, Clone, Default)]
struct Ttls {
    by_field: HashMap<Bytes, u64, ahash::RandomState>,
    by_time: BTreeSet<(u64, Bytes)>,
}

/// Redis's `HFE_MAX_ABS_TIME_MSEC` (`EB_EXPIRE_TIME_MAX >> 2`): the largest field deadline
/// a command may set, 2^46 - 1 ms.
pub const MAX_FIELD_DEADLINE: u64 = (1 << 46) - 1;

/// A field and its value in a table slot.
type Pair = (Small, Small);

#[derive(Debug, Clone)]
enum Repr {
    Listpack(Vec<(Bytes, Bytes)>),
    /// Boxed: keeps `Value` small for the common string keys.
    Table(Box<Flat<Pair>>),
}

impl Default for HashValue {
    fn default() -> Self {
        HashValue::new()
    }
}

impl PartialEq for HashValue {
    /// Same fields with the same values and deadlines (encoding and order aside).
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self.ttl_count() == other.ttl_count()
            && self
                .iter()
                .all(|(f, v)| other.get(f).is_some_and(|o| o == v) && self.ttl(f) == other.ttl(f))
    }
}

impl HashValue {
    /// Starts fetching where field `f` would be in a big hash (see `Flat::prefetch`).
    #[inline]
    pub fn prefetch_field(&self, f: &[u8]) {
        if let Repr::Table(t) = &self.repr {
            t.prefetch(f);
        }
    }

    pub fn new() -> HashValue {
        HashValue {
            repr: Repr::Listpack(Vec::new()),
            bytes: 0,
            ttls: None,
        }
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Listpack(v) => v.len(),
            Repr::Table(t) => t.len(),
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
            Repr::Listpack(_) if self.ttls.is_some() => "listpackex",
            Repr::Listpack(_) => "listpack",
            Repr::Table(_) => "hashtable",
        }
    }

    /// Whether this is a listpack with room for deadlines (Redis `listpackex`).
    pub fn is_listpack_ex(&self) -> bool {
        self.is_listpack() && self.ttls.is_some()
    }

    /// Rough heap footprint.
    pub fn approx_size(&self) -> usize {
        // A deadline costs its two index entries (the field's bytes are shared).
        let ttls = self.ttl_count() * 2 * (std::mem::size_of::<(u64, Bytes)>() + 8);
        ttls + match &self.repr {
            Repr::Listpack(v) => self.bytes + v.len() * 2 * std::mem::size_of::<Bytes>(),
            Repr::Table(t) => self.bytes + t.capacity() * std::mem::size_of::<Option<Pair>>(),
        }
    }

    // ---- field deadlines ----

    /// `field`'s deadline (Unix ms), if it has one.
    #[inline]
    pub fn ttl(&self, field: &[u8]) -> Option<u64> {
        let t = self.ttls.as_deref()?;
        if t.by_field.is_empty() {
            return None;
        }
        t.by_field.get(field).copied()
    }

    /// Whether any field has a deadline.
    #[inline]
    pub fn has_ttls(&self) -> bool {
        self.ttls.as_deref().is_some_and(|t| !t.by_field.is_empty())
    }

    /// How many fields have a deadline.
    pub fn ttl_count(&self) -> usize {
        self.ttls.as_deref().map_or(0, |t| t.by_field.len())
    }

    /// The earliest deadline of any field.
    pub fn min_ttl(&self) -> Option<u64> {
        self.ttls.as_deref()?.by_time.first().map(|(t, _)| *t)
    }

    /// Whether `field` is logically expired at `now` (Redis: its deadline is before `now`).
    #[inline]
    pub fn is_field_expired(&self, field: &[u8], now: u64) -> bool {
        self.ttl(field).is_some_and(|t| t < now)
    }

    /// Fields with their deadlines, earliest first.
    pub fn ttls(&self) -> impl Iterator<Item = (&[u8], u64)> {
        self.ttls
            .as_deref()
            .into_iter()
            .flat_map(|t| t.by_time.iter().map(|(at, f)| (&f[..], *at)))
    }

    /// Up to `limit` fields expired at `now`, earliest deadline first.
    pub fn due(&self, now: u64, limit: usize) -> Vec<Bytes> {
        let Some(t) = self.ttls.as_deref() else {
            return Vec::new();
        };
        t.by_time
            .iter()
            .take_while(|(at, _)| *at < now)
            .take(limit)
            .map(|(_, f)| f.clone())
            .collect()
    }

    /// Gives an existing `field` the deadline `at` (`None` clears it); false if there is no
    /// such field. A listpack moves the field to its deadline's place.
    pub fn set_ttl(&mut self, field: &[u8], at: Option<u64>) -> bool {
        if !self.contains(field) {
            return false;
        }
        let old = self.drop_ttl(field);
        if let Some(at) = at {
            let t = self.ttls.get_or_insert_with(Box::default);
            let f = Bytes::copy_from_slice(field);
            t.by_time.insert((at, f.clone()));
            t.by_field.insert(f, at);
        } else if self.ttls.is_none() {
            // HPERSIST-style clear on a plain hash: nothing to record.
            return true;
        }
        // Redis re-inserts a listpackex field whenever it sets a deadline, an unchanged one
        // too (it then goes before the others due at the same time).
        if at.is_some() || old.is_some() {
            self.place_in_listpack(field, at);
        }
        true
    }

    /// Makes room for deadlines (Redis converts a listpack to `listpackex` up front).
    pub fn enable_ttls(&mut self) {
        self.ttls.get_or_insert_with(Box::default);
    }

    /// Removes `field`'s deadline from the indexes; its old value.
    fn drop_ttl(&mut self, field: &[u8]) -> Option<u64> {
        let t = self.ttls.as_deref_mut()?;
        let (f, at) = t.by_field.remove_entry(field)?;
        t.by_time.remove(&(at, f));
        Some(at)
    }

    /// Listpack order with deadlines (Redis `listpackExAddInternal`): a field given a
    /// deadline goes before the first field with none or with a later or equal one; a field
    /// whose deadline was cleared goes last.
    fn place_in_listpack(&mut self, field: &[u8], at: Option<u64>) {
        let Repr::Listpack(v) = &mut self.repr else {
            return;
        };
        let Some(i) = v.iter().position(|(f, _)| f[..] == *field) else {
            return;
        };
        let pair = v.remove(i);
        let to = match at {
            None => v.len(),
            Some(at) => {
                let t = self.ttls.as_deref();
                v.iter()
                    .position(|(f, _)| {
                        t.and_then(|t| t.by_field.get(&f[..]))
                            .is_none_or(|&d| d >= at)
                    })
                    .unwrap_or(v.len())
            }
        };
        v.insert(to, pair);
    }

    /// Pairs not expired at `now`, in the hash's order.
    pub fn iter_live(&self, now: u64) -> impl Iterator<Item = (&[u8], &[u8])> {
        let check = self.has_ttls();
        self.iter()
            .filter(move |(f, _)| !check || !self.is_field_expired(f, now))
    }

    /// Fields not expired at `now`.
    pub fn len_live(&self, now: u64) -> usize {
        let Some(t) = self.ttls.as_deref() else {
            return self.len();
        };
        let expired = t.by_time.iter().take_while(|(at, _)| *at < now).count();
        self.len() - expired
    }

    /// Bytes of a hashtable's slot array (0 for a listpack).
    pub fn table_bytes(&self) -> usize {
        match &self.repr {
            Repr::Listpack(_) => 0,
            Repr::Table(t) => {
                std::mem::size_of::<Flat<Pair>>()
                    + t.capacity() * std::mem::size_of::<Option<Pair>>()
            }
        }
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match &self.repr {
            Repr::Listpack(v) => v.iter().find(|(f, _)| f[..] == *field).map(|(_, v)| &v[..]),
            Repr::Table(t) => t.get(field).map(|(_, v)| v.as_bytes()),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Pairs in the hash's order (insertion order for a listpack).
    pub fn iter(&self) -> Iter<'_> {
        match &self.repr {
            Repr::Listpack(v) => Iter::Listpack(v.iter()),
            Repr::Table(t) => Iter::Table(t.iter()),
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

    /// Sets `field` to `value` (copying both), clearing its deadline as HSET does; true if
    /// the field is new.
    pub fn set(&mut self, field: &[u8], value: &[u8], lim: Limits) -> bool {
        self.set_with(field, NewValue::Copy(value), lim, false)
    }

    /// Sets `field` to an owned value, clearing its deadline; true if the field is new.
    pub fn set_bytes(&mut self, field: &[u8], value: Bytes, lim: Limits) -> bool {
        self.set_with(field, NewValue::Owned(value), lim, false)
    }

    /// Sets `field` to an owned value keeping its deadline (HINCRBY*, HSETEX KEEPTTL: Redis
    /// `HASH_SET_KEEP_TTL`); true if the field is new.
    pub fn set_bytes_keep_ttl(&mut self, field: &[u8], value: Bytes, lim: Limits) -> bool {
        self.set_with(field, NewValue::Owned(value), lim, true)
    }

    /// Redis `hashTypeSet`: a listpack converts before storing a field or value longer than
    /// `max_value`, and after growing past `max_entries`. Overwriting a field clears its
    /// deadline unless `keep_ttl` (a listpack then moves it last, as Redis re-inserts it).
    fn set_with(&mut self, field: &[u8], value: NewValue, lim: Limits, keep_ttl: bool) -> bool {
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
            Repr::Table(t) => {
                let v = value.as_slice();
                let ((_, slot), added) = t.get_or_insert_with(field, |f| (f, Small::new(v)));
                if added {
                    (true, 0)
                } else {
                    let old = slot.as_bytes().len();
                    slot.set(v);
                    (false, old)
                }
            }
        };
        self.bytes = self.bytes - old_len + value_len + if added { field.len() } else { 0 };
        if !added && !keep_ttl && self.drop_ttl(field).is_some() {
            self.place_in_listpack(field, None);
        }
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
                .map(|i| v.remove(i))
                .map(|(f, v)| f.len() + v.len()),
            Repr::Table(t) => t
                .remove(field)
                .map(|(f, v)| f.as_bytes().len() + v.as_bytes().len()),
        };
        match removed {
            Some(n) => {
                self.bytes -= n;
                self.drop_ttl(field);
                true
            }
            None => false,
        }
    }

    /// A uniformly chosen pair, or `None` when empty.
    pub fn random<R: Rng + ?Sized>(&self, rng: &mut R) -> Option<(&[u8], &[u8])> {
        if self.is_empty() {
            return None;
        }
        match &self.repr {
            Repr::Listpack(v) => {
                let (f, val) = &v[rng.gen_range(0..v.len())];
                Some((f, val))
            }
            Repr::Table(t) => {
                let (f, v) = t.random(rng);
                Some((f.as_bytes(), v.as_bytes()))
            }
        }
    }

    /// `count` distinct pairs chosen uniformly (`count` < `len`), in random order.
    pub fn random_distinct<R: Rng + ?Sized>(
        &self,
        count: usize,
        rng: &mut R,
    ) -> Vec<(&[u8], &[u8])> {
        let count = count.min(self.len());
        match &self.repr {
            Repr::Listpack(v) => rand::seq::index::sample(rng, v.len(), count)
                .into_iter()
                .map(|i| (&v[i].0[..], &v[i].1[..]))
                .collect(),
            Repr::Table(t) => t
                .random_distinct(count, rng)
                .into_iter()
                .map(|(f, v)| (f.as_bytes(), v.as_bytes()))
                .collect(),
        }
    }

    /// One HSCAN step from `cursor`: appends pairs to `out` and returns the next cursor (0
    /// when the iteration is complete). A listpack is returned whole with cursor 0, whatever
    /// the cursor, as Redis does. A table returns whole homes until `count` fields were
    /// returned (Redis 7.2's `sampled`: a field with its value counts once) or `10 * count`
    /// more homes were visited (its `maxiterations`).
    pub fn scan<'a>(
        &'a self,
        cursor: u64,
        count: usize,
        out: &mut Vec<(&'a [u8], &'a [u8])>,
    ) -> u64 {
        match &self.repr {
            Repr::Listpack(v) => {
                out.extend(v.iter().map(|(f, v)| (&f[..], &v[..])));
                0
            }
            Repr::Table(t) => t.scan_each(cursor, count.max(1), |(f, v)| {
                out.push((f.as_bytes(), v.as_bytes()))
            }),
        }
    }

    /// Switches to the `hashtable` encoding, sized for `extra` more fields.
    fn convert(&mut self, extra: usize) {
        if let Repr::Listpack(v) = &mut self.repr {
            let pairs = std::mem::take(v);
            let mut t = Flat::with_capacity(pairs.len() + extra);
            for (f, val) in pairs {
                t.insert_new((Small::new(&f), Small::new(&val)));
            }
            self.repr = Repr::Table(Box::new(t));
        }
    }
}

pub enum Iter<'a> {
    Listpack(std::slice::Iter<'a, (Bytes, Bytes)>),
    Table(crate::types::set::flat::Iter<'a, Pair>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Listpack(it) => it.next().map(|(f, v)| (&f[..], &v[..])),
            Iter::Table(it) => it.next().map(|(f, v)| (f.as_bytes(), v.as_bytes())),
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
        self.as_slice().len()
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            NewValue::Copy(s) => s,
            NewValue::Owned(b) => b,
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
        assert_eq!(h.get(b"b"), Some(&b"9"[..]));
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
        assert_eq!(h.get(b"f"), Some(&b"123456789"[..]));
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
    fn conversion_keeps_contents() {
        let mut h = HashValue::new();
        for i in 0..4 {
            h.set(
                format!("f{i}").as_bytes(),
                format!("v{i}").as_bytes(),
                small(),
            );
        }
        let mut want: BTreeMap<Vec<u8>, Vec<u8>> =
            h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
        h.set(b"f9", b"x", small());
        assert_eq!(h.encoding(), "hashtable");
        want.insert(b"f9".to_vec(), b"x".to_vec());
        let after: BTreeMap<Vec<u8>, Vec<u8>> =
            h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
        assert_eq!(after, want);
    }

    #[test]
    fn overwriting_values_of_any_length() {
        for big in [false, true] {
            let mut h = HashValue::new();
            let lim = Limits::DEFAULT;
            if big {
                h.convert(0);
            }
            assert!(h.set(b"f", b"aaa", lim));
            // Same length: overwritten in place.
            assert!(!h.set(b"f", b"bbb", lim));
            assert_eq!(h.get(b"f"), Some(&b"bbb"[..]));
            let long = [b'l'; 40];
            assert!(!h.set(b"f", &long, lim));
            assert!(!h.set(b"f", &[b'm'; 40], lim));
            assert_eq!(h.get(b"f"), Some(&[b'm'; 40][..]));
            // Other lengths, empty values and owned values.
            assert!(!h.set(b"f", b"", lim));
            assert!(!h.set(b"f", b"", lim));
            assert!(!h.set_bytes(b"f", Bytes::from_static(b"dddd"), lim));
            assert!(!h.set(b"f", b"eeee", lim));
            assert_eq!(h.get(b"f"), Some(&b"eeee"[..]));
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
            assert_eq!(h.get(f.as_bytes()), Some(v.as_bytes()));
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
            seen.extend(out.into_iter().map(|(f, _)| Bytes::copy_from_slice(f)));
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
            Repr::Table(t) => t.capacity(),
            Repr::Listpack(v) => v.len(),
        }
    }

    #[test]
    fn scan_survives_shrinks() {
        let mut h = HashValue::new();
        for i in 0..3000 {
            h.set(format!("temp{i}").as_bytes(), b"v", small());
            if i % 15 == 0 {
                h.set(format!("stable{i}").as_bytes(), b"v", small());
            }
        }
        let mut next_temp = 0;
        let mut shrinks = 0;
        let seen = full_scan(&mut h, 20, |h| {
            let before = slot_count(h);
            for _ in 0..100 {
                h.remove(format!("temp{next_temp}").as_bytes());
                next_temp += 1;
            }
            if slot_count(h) < before {
                shrinks += 1;
            }
        });
        assert!(shrinks > 0, "the test must cross a shrink");
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
    fn field_deadlines_live_beside_the_fields() {
        for lim in [Limits::DEFAULT, small()] {
            let mut h = HashValue::new();
            for f in ["a", "b", "c", "d", "e"] {
                h.set(f.as_bytes(), b"v", lim);
            }
            assert!(h.ttls.is_none(), "no side structure until a deadline");
            assert!(!h.set_ttl(b"nosuch", Some(5)));
            assert!(h.set_ttl(b"b", Some(30)));
            assert!(h.set_ttl(b"d", Some(10)));
            assert_eq!((h.ttl(b"b"), h.ttl(b"a")), (Some(30), None));
            assert_eq!(h.min_ttl(), Some(10));
            assert_eq!(h.ttl_count(), 2);
            assert!(h.is_field_expired(b"d", 11) && !h.is_field_expired(b"d", 10));
            assert_eq!(h.due(31, 10), [b("d"), b("b")]);
            assert_eq!(h.due(31, 1), [b("d")]);
            assert_eq!(h.len_live(11), 4);
            assert_eq!(h.iter_live(31).count(), 3);
            // A listpack keeps the fields with deadlines first, earliest first.
            if h.is_listpack() {
                assert_eq!(h.encoding(), "listpackex");
                assert_eq!(fields(&h), ["d", "b", "a", "c", "e"]);
            }
            // Overwriting clears a deadline (moved last), unless kept; removing drops it.
            h.set(b"d", b"w", lim);
            assert_eq!(h.ttl(b"d"), None);
            if h.is_listpack() {
                assert_eq!(fields(&h), ["b", "a", "c", "e", "d"]);
            }
            h.set_bytes_keep_ttl(b"b", b("kept"), lim);
            assert_eq!(h.ttl(b"b"), Some(30));
            assert!(h.remove(b"b"));
            assert_eq!((h.ttl(b"b"), h.min_ttl(), h.ttl_count()), (None, None, 0));
            assert!(!h.has_ttls());
            // Equality looks at deadlines too.
            let mut other = h.clone();
            assert_eq!(h, other);
            other.set_ttl(b"a", Some(1));
            assert_ne!(h, other);
            // A conversion to a table keeps them.
            let mut big = other.clone();
            big.convert(0);
            assert_eq!(big.ttl(b"a"), Some(1));
            assert_eq!(big, other);
        }
    }

    /// redis-server 7.4.1's order: a field given a deadline (even the one it had) goes
    /// before every field due at the same time or later.
    #[test]
    fn listpackex_ties_go_first_as_in_redis() {
        let mut h = HashValue::new();
        for f in ["d", "x", "y"] {
            h.set(f.as_bytes(), b"v", Limits::DEFAULT);
        }
        h.set_ttl(b"x", Some(7));
        assert_eq!(fields(&h), ["x", "d", "y"]);
        h.set_ttl(b"y", Some(7));
        assert_eq!(fields(&h), ["y", "x", "d"]);
        h.set_ttl(b"x", Some(7));
        assert_eq!(fields(&h), ["x", "y", "d"]);
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
