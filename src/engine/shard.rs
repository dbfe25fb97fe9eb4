//! One shard of one database: the key map, its expiry index and WATCH registrations.
//!
//! Invariant (checked by `check_invariants` in tests): the slot table indexes every slot
//! exactly once, and `expires` holds exactly one `(deadline, slot)` pair for every entry
//! whose `expire_at` is `Some(deadline)`, and nothing else. Every mutation of a deadline or
//! of a slot's position goes through this type so they never drift.
//!
//! This file sits below `keyspace.rs` (which owns the databases of shards and the SCAN
//! cursor layout) and imports nothing from it: a key's position inside a shard
//! ([`scan_pos`]) lives here, next to the shard's part of a SCAN step.

use crate::types::placement::{fnv1a64, mix64};
use crate::types::value::{Entry, StrVal, Value};
use ahash::RandomState;
use bytes::Bytes;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

mod index;
mod slots;

pub use crate::types::prefetch_read;
use index::Index;
use slots::Chunked;

pub type WatchFlag = Arc<AtomicBool>;

/// Told of every key a write modifies while switched on (client-side caching: the server's
/// tracking table, `instance::tracking`). One per keyspace, shared by its shards: while
/// off (no client tracks), a modification costs one relaxed load here.
#[derive(Default)]
pub struct KeyHook {
    on: AtomicBool,
    f: std::sync::OnceLock<KeyListener>,
}

/// Called with each modified key, under its shard's lock (so it sees the modifications of
/// one key in order). It must not touch the keyspace.
pub type KeyListener = Box<dyn Fn(&[u8]) + Send + Sync>;

impl KeyHook {
    pub fn set_listener(&self, f: KeyListener) -> bool {
        self.f.set(f).is_ok()
    }

    pub fn switch(&self, on: bool) {
        self.on.store(on, Ordering::Relaxed);
    }

    #[inline]
    fn modified(&self, key: &[u8]) {
        if self.on.load(Ordering::Relaxed) {
            self.call(key);
        }
    }

    #[cold]
    fn call(&self, key: &[u8]) {
        if let Some(f) = self.f.get() {
            f(key);
        }
    }
}

/// Longest key stored inside its slot; longer ones get one exact-size allocation.
const INLINE_KEY: usize = 22;

/// A key's bytes: inline when short (most keys), else boxed. 24 bytes either way.
#[derive(Clone)]
enum Key {
    Inline { len: u8, buf: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

impl Key {
    fn new(k: &[u8]) -> Key {
        if k.len() <= INLINE_KEY {
            let mut buf = [0; INLINE_KEY];
            buf[..k.len()].copy_from_slice(k);
            Key::Inline {
                len: k.len() as u8,
                buf,
            }
        } else {
            Key::Heap(k.into())
        }
    }

    #[inline]
    fn as_slice(&self) -> &[u8] {
        match self {
            Key::Inline { len, buf } => &buf[..usize::from(*len)],
            Key::Heap(b) => b,
        }
    }
}

/// A key being looked up, laid out as a short [`Key`] is, so comparing it with a slot's
/// key is two fixed-size compares (no `memcmp` call, which took 7% of SET's time).
struct Probe<'k> {
    key: &'k [u8],
    inline: Option<(u8, [u8; INLINE_KEY])>,
}

impl<'k> Probe<'k> {
    #[inline]
    fn new(key: &'k [u8]) -> Self {
        let inline = (key.len() <= INLINE_KEY).then(|| {
            let mut buf = [0; INLINE_KEY];
            buf[..key.len()].copy_from_slice(key);
            (key.len() as u8, buf)
        });
        Probe { key, inline }
    }

    #[inline]
    fn is(&self, k: &Key) -> bool {
        match (k, &self.inline) {
            (Key::Inline { len, buf }, Some((l, b))) => len == l && buf == b,
            (Key::Heap(h), None) => **h == *self.key,
            _ => false,
        }
    }
}

/// One key and its entry, in the dense slot array.
#[derive(Clone)]
struct Slot {
    key: Key,
    entry: Entry,
}

/// The key map: entries in a dense array, found through a table of 4-byte slot numbers
/// (one probe, key compared in place: no per-key allocation, no per-bucket padding of a
/// fat entry at low load factors). Removal moves the last slot into the hole and renumbers
/// it. The expiry index holds `(deadline, slot number)`, so it never copies a key.
#[derive(Default)]
struct Keys {
    index: Index,
    slots: Chunked<Slot>,
    /// Ordered (deadline, slot) index so the active sweep finds due keys without scanning.
    expires: BTreeSet<(u64, u32)>,
    /// The sum of the deadlines in `expires`: INFO's `avg_ttl` in O(1) (Redis estimates it
    /// by sampling in its expiry cycle; this is the exact mean).
    deadline_sum: u128,
    /// Hashes with field deadlines (hash-field expiration): `(t, slot)` with `t` no later
    /// than the earliest field deadline of the hash in that slot, the active cycle's
    /// worklist (Redis's `db->hexpires`). At most one pair per slot, mirrored in `hfe_at`;
    /// a pair whose hash's deadlines moved later or went away is corrected when it comes
    /// due, as Redis corrects its global HFE index lazily.
    hfe: BTreeSet<(u64, u32)>,
    hfe_at: HashMap<u32, u64, RandomState>,
}

/// What the active cycle removed from one hash ([`Shard::sweep_fields`]).
pub struct FieldsExpired {
    pub key: Bytes,
    pub fields: Vec<Bytes>,
    /// The key's entry, when its last field went and the key with it.
    pub deleted: Option<Entry>,
}

/// A key's hash in every shard's index ([`key_hash`]'s seed).
fn key_hasher() -> &'static RandomState {
    static SEED: std::sync::OnceLock<RandomState> = std::sync::OnceLock::new();
    SEED.get_or_init(RandomState::new)
}

/// The hash a key is indexed by, in whichever shard and database: one random seed per
/// process (flood resistance, as Redis's seeded SipHash), shared by all shards so the
/// keyspace can hash a command's key once for its shard choice and its lookups.
#[inline]
pub fn key_hash(key: &[u8]) -> u64 {
    key_hasher().hash_one(key)
}

impl Keys {
    #[inline]
    fn hash(&self, key: &[u8]) -> u64 {
        key_hash(key)
    }

    #[inline]
    fn find(&self, key: &[u8]) -> Option<usize> {
        self.find_hashed(key, self.hash(key))
    }

    /// [`Keys::find`] with the key's [`key_hash`] already known.
    #[inline]
    fn find_hashed(&self, key: &[u8], h: u64) -> Option<usize> {
        let slots = &self.slots;
        let probe = Probe::new(key);
        self.index
            .find(h, |i| probe.is(&slots[i as usize].key))
            .map(|i| i as usize)
    }

    /// Stores `entry` under `key` (whose [`key_hash`] is `h`), replacing (and returning)
    /// any previous entry.
    fn insert(&mut self, key: &[u8], h: u64, entry: Entry) -> Option<Entry> {
        let new_at = entry.expire_at();
        let slots = &self.slots;
        let probe = Probe::new(key);
        if let Some(i) = self.index.find(h, |i| probe.is(&slots[i as usize].key)) {
            let old = std::mem::replace(&mut self.slots[i as usize].entry, entry);
            self.reindex(i, old.expire_at(), new_at);
            if !self.hfe_at.is_empty() {
                self.hfe_drop(i);
            }
            self.hfe_note(i);
            return Some(old);
        }
        let i = u32::try_from(self.slots.len()).expect("fewer than 2^32 keys per shard");
        self.slots.push(Slot {
            key: Key::new(key),
            entry,
        });
        let slots = &self.slots;
        self.index
            .insert_unique(h, i, |j| key_hash(slots[j as usize].key.as_slice()));
        if let Some(t) = new_at {
            self.add_deadline(t, i);
        }
        self.hfe_note(i);
        None
    }

    /// Enters slot `i` in the field-expiry worklist if it holds a hash with field deadlines
    /// (an entry stored whole: RENAME, MOVE, COPY, RESTORE, a load).
    #[inline]
    fn hfe_note(&mut self, i: u32) {
        if let Value::Hash(h) = &self.slots[i as usize].entry.value {
            if let Some(t) = h.min_ttl() {
                self.hfe_register(i, t);
            }
        }
    }

    /// Makes sure slot `i` comes due in the worklist no later than `t`.
    fn hfe_register(&mut self, i: u32, t: u64) {
        match self.hfe_at.get(&i) {
            Some(&d) if d <= t => return,
            Some(&d) => {
                self.hfe.remove(&(d, i));
            }
            None => {}
        }
        self.hfe_at.insert(i, t);
        self.hfe.insert((t, i));
    }

    fn hfe_drop(&mut self, i: u32) -> Option<u64> {
        let d = self.hfe_at.remove(&i)?;
        self.hfe.remove(&(d, i));
        Some(d)
    }

    fn add_deadline(&mut self, t: u64, i: u32) {
        if self.expires.insert((t, i)) {
            self.deadline_sum += t as u128;
        }
    }

    fn drop_deadline(&mut self, t: u64, i: u32) {
        if self.expires.remove(&(t, i)) {
            self.deadline_sum -= t as u128;
        }
    }

    /// Moves slot `i`'s index entry from deadline `old` to `new` (the slot already has `new`).
    fn reindex(&mut self, i: u32, old: Option<u64>, new: Option<u64>) {
        if old == new {
            return;
        }
        if let Some(t) = old {
            self.drop_deadline(t, i);
        }
        if let Some(t) = new {
            self.add_deadline(t, i);
        }
    }

    /// Removes slot `i`, moving the last slot into its place.
    fn remove_at(&mut self, i: usize) -> Slot {
        let h = self.hash(self.slots[i].key.as_slice());
        let n = i as u32;
        let at = self.index.find_pos(h, |j| j == n);
        self.index.remove(at.expect("every slot is indexed"));
        let slot = self.slots.swap_remove(i);
        if let Some(t) = slot.entry.expire_at() {
            self.drop_deadline(t, n);
        }
        let hfe = !self.hfe_at.is_empty();
        if hfe {
            self.hfe_drop(n);
        }
        if let Some(moved) = self.slots.get(i) {
            let last = self.slots.len() as u32;
            let h = self.hash(moved.key.as_slice());
            let at = moved.entry.expire_at();
            let p = self.index.find_pos(h, |j| j == last);
            self.index.set(p.expect("the moved slot is indexed"), n);
            if let Some(t) = at {
                self.drop_deadline(t, last);
                self.add_deadline(t, n);
            }
            if hfe {
                if let Some(d) = self.hfe_drop(last) {
                    self.hfe_register(n, d);
                }
            }
        }
        self.shrink();
        slot
    }

    /// Memory follows the keys down, as Redis frees each key's allocations on delete:
    /// eviction measures what a removal freed, and a table that kept its size would free
    /// nothing it can see (keys and small values live in the slots). Halves the slot array
    /// and the index once a quarter full, so an insert after a removal does not reallocate.
    fn shrink(&mut self) {
        self.slots.shrink();
        let (len, cap) = (self.index.len(), self.index.capacity());
        if cap > 16 && len <= cap / 4 {
            let slots = &self.slots;
            self.index
                .shrink_to(len * 2, |j| key_hash(slots[j as usize].key.as_slice()));
        }
    }
}

#[derive(Default)]
pub struct Shard {
    keys: Keys,
    /// Clients watching a key: their dirty flags are raised on every modification.
    watchers: HashMap<Bytes, Vec<WatchFlag>, RandomState>,
    /// The keyspace's modification hook (client-side caching).
    hook: Arc<KeyHook>,
}

/// A shard's former contents, detached by `take_data` so a lazy flush can free them on
/// another thread (`FLUSHALL ASYNC`).
pub struct ShardData {
    _keys: Keys,
}

/// A key's SCAN position in its shard: a hash of the whole key (not its tag), so keys of
/// one tag still spread out. It never changes, which is what makes the cursor safe.
pub fn scan_pos(key: &[u8]) -> u32 {
    (mix64(fnv1a64(key) ^ 0x9e37_79b9_7f4a_7c15) >> 32) as u32
}

/// The result of one shard's part of a SCAN step.
pub struct ScanStep {
    /// The position to resume from in this shard, or `None` when the shard is finished.
    pub next_pos: Option<u32>,
    /// Keys visited, expired ones included.
    pub visited: usize,
    /// Logically expired keys met (and removed) on the way.
    pub expired: usize,
}

impl Shard {
    pub fn len(&self) -> usize {
        self.keys.slots.len()
    }
    pub fn is_empty(&self) -> bool {
        self.keys.slots.is_empty()
    }
    pub fn expires_len(&self) -> usize {
        self.keys.expires.len()
    }
    /// The sum of the deadlines (ms) of the keys that have one, for a mean TTL.
    pub fn deadline_sum(&self) -> u128 {
        self.keys.deadline_sum
    }

    /// Raw lookup, ignoring expiry.
    #[inline]
    pub fn peek(&self, key: &[u8]) -> Option<&Entry> {
        self.keys.find(key).map(|i| &self.keys.slots[i].entry)
    }

    #[inline]
    pub fn peek_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        self.peek_mut_hashed(key, key_hash(key))
    }

    /// [`Shard::peek_mut`] of a key whose [`key_hash`] is `h`.
    #[inline]
    pub fn peek_mut_hashed(&mut self, key: &[u8], h: u64) -> Option<&mut Entry> {
        let i = self.keys.find_hashed(key, h)?;
        Some(&mut self.keys.slots[i].entry)
    }

    /// True if `key` is present but its deadline has passed (`now > deadline`).
    #[inline]
    pub fn is_expired(&self, key: &[u8], now: u64) -> bool {
        // Most shards of most workloads hold no deadline at all: skip the lookup.
        if self.keys.expires.is_empty() {
            return false;
        }
        matches!(self.peek(key), Some(e) if e.is_expired(now))
    }

    /// Inserts or replaces a value, setting its deadline and access time; returns the
    /// previous entry. The key is copied only when it is new: replacing the value of an
    /// existing key (the common `SET` case) allocates nothing.
    #[inline]
    pub fn insert(
        &mut self,
        key: &[u8],
        value: Value,
        expire_at: Option<u64>,
        now: u64,
    ) -> Option<Entry> {
        self.insert_hashed(key, key_hash(key), value, expire_at, now)
    }

    /// [`Shard::insert`] of a key whose [`key_hash`] is `h`.
    #[inline]
    pub fn insert_hashed(
        &mut self,
        key: &[u8],
        h: u64,
        value: Value,
        expire_at: Option<u64>,
        now: u64,
    ) -> Option<Entry> {
        self.keys.insert(key, h, Entry::new(value, expire_at, now))
    }

    /// Inserts or replaces a whole entry (value, deadline and access time kept as given:
    /// RENAME and MOVE carry an entry over); returns the previous entry.
    pub fn insert_entry(&mut self, key: &[u8], entry: Entry) -> Option<Entry> {
        self.keys.insert(key, key_hash(key), entry)
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let i = self.keys.find(key)?;
        Some(self.keys.remove_at(i).entry)
    }

    /// Sets or clears a key's deadline. Returns false if the key is absent.
    pub fn set_expire(&mut self, key: &[u8], at: Option<u64>) -> bool {
        let Some(i) = self.keys.find(key) else {
            return false;
        };
        let e = &mut self.keys.slots[i].entry;
        let old = e.expire_at();
        e.set_expire_at(at);
        self.keys.reindex(i as u32, old, at);
        true
    }

    /// Removes up to `limit` keys whose deadline has passed (`deadline < now`); returns them.
    pub fn sweep(&mut self, now: u64, limit: usize) -> Vec<Bytes> {
        self.sweep_noting(now, limit, |_, _| {})
    }

    /// As `sweep`, handing each removed key and entry to `removed` (to drop, or to free
    /// elsewhere).
    pub fn sweep_noting(
        &mut self,
        now: u64,
        limit: usize,
        mut removed: impl FnMut(&[u8], Entry),
    ) -> Vec<Bytes> {
        let mut out = Vec::new();
        while out.len() < limit {
            let i = match self.keys.expires.first() {
                Some(&(t, i)) if t < now => i,
                _ => break,
            };
            let Slot { key, entry } = self.keys.remove_at(i as usize);
            out.push(Bytes::copy_from_slice(key.as_slice()));
            removed(key.as_slice(), entry);
        }
        out
    }

    /// Makes sure the hash at `key` is visited by the active field expiry no later than `t`
    /// (a command gave one of its fields the deadline `t`).
    pub fn register_field_expiry(&mut self, key: &[u8], t: u64) {
        if let Some(i) = self.keys.find(key) {
            self.keys.hfe_register(i as u32, t);
        }
    }

    /// Hashes in the field-expiry worklist (tests).
    pub fn field_expiry_len(&self) -> usize {
        self.keys.hfe.len()
    }

    /// Active field expiry (Redis `activeExpireCycle`'s hash-field part): removes up to
    /// `quota` fields whose deadline passed (`deadline < now`) from the hashes that come due
    /// in the worklist, earliest first, and a hash whose last field went. Returns what it
    /// removed, hash by hash.
    pub fn sweep_fields(&mut self, now: u64, quota: usize) -> Vec<FieldsExpired> {
        let mut out = Vec::new();
        let mut left = quota;
        while left > 0 {
            let i = match self.keys.hfe.first() {
                Some(&(t, i)) if t < now => i,
                _ => break,
            };
            self.keys.hfe_drop(i);
            let slot = &mut self.keys.slots[i as usize];
            let Value::Hash(h) = &mut slot.entry.value else {
                continue;
            };
            let due = h.due(now, left);
            for f in &due {
                h.remove(f);
            }
            let (empty, next) = (h.is_empty(), h.min_ttl());
            let key = Bytes::copy_from_slice(slot.key.as_slice());
            left -= due.len();
            if empty && !due.is_empty() {
                let Slot { entry, .. } = self.keys.remove_at(i as usize);
                out.push(FieldsExpired {
                    key,
                    fields: due,
                    deleted: Some(entry),
                });
                continue;
            }
            if let Some(t) = next {
                self.keys.hfe_register(i, t);
            }
            if !due.is_empty() {
                out.push(FieldsExpired {
                    key,
                    fields: due,
                    deleted: None,
                });
            }
        }
        out
    }

    /// One shard's part of a SCAN step: the `want` keys with the lowest positions from
    /// `from` on (and any others sharing the last one's position) are visited, in one pass
    /// over the shard. Live ones are appended to `out` with their type names; logically
    /// expired ones are removed, not returned.
    pub fn scan_from(
        &mut self,
        from: u32,
        want: usize,
        now: u64,
        out: &mut Vec<(Bytes, &'static str)>,
    ) -> ScanStep {
        let slots = &self.keys.slots;
        let mut found: Vec<(u32, u32)> = slots
            .iter()
            .enumerate()
            .map(|(i, s)| (scan_pos(s.key.as_slice()), i as u32))
            .filter(|(p, _)| *p >= from)
            .collect();
        let want = want.max(1);
        let mut next_pos = None;
        if found.len() > want {
            found.select_nth_unstable_by_key(want - 1, |f| f.0);
            let last = found[want - 1].0;
            found.retain(|f| f.0 <= last);
            // Some key lies past `last`, so `last` < u32::MAX.
            next_pos = Some(last + 1);
        }
        let visited = found.len();
        let mut expired = Vec::new();
        for (_, i) in found {
            let s = &slots[i as usize];
            let k = Bytes::copy_from_slice(s.key.as_slice());
            if s.entry.is_expired(now) {
                expired.push(k);
            } else {
                out.push((k, s.entry.value.type_name()));
            }
        }
        for k in &expired {
            self.remove(k);
            self.signal(k);
        }
        ScanStep {
            next_pos,
            visited,
            expired: expired.len(),
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.keys.slots.iter().map(|s| (s.key.as_slice(), &s.entry))
    }

    /// Up to `n` entries drawn for eviction (Redis `dictGetSomeKeys` on the main or the
    /// expires dict), shown to `f`. `volatile`: only keys with a deadline, drawn at a random
    /// point of the deadline range (O(log n) each; denser deadline ranges are favoured, an
    /// approximation as Redis's sampling is); `soonest`: the keys with the nearest
    /// deadlines instead (`volatile-ttl`, whose best candidates those are). Otherwise
    /// uniform over the dense slots. Draws may repeat a key.
    pub fn sample(
        &self,
        n: usize,
        volatile: bool,
        soonest: bool,
        rng: &mut dyn FnMut() -> u64,
        f: &mut dyn FnMut(&[u8], &Entry),
    ) {
        let k = &self.keys;
        let mut show = |i: u32| {
            let s = &k.slots[i as usize];
            f(s.key.as_slice(), &s.entry);
        };
        if soonest {
            for &(_, i) in k.expires.iter().take(n) {
                show(i);
            }
        } else if volatile {
            let (Some(&(lo, _)), Some(&(hi, _))) = (k.expires.first(), k.expires.last()) else {
                return;
            };
            for _ in 0..n {
                let t = lo + rng() % (hi - lo).saturating_add(1).max(1);
                let at = k.expires.range((t, 0)..).next().or(k.expires.first());
                if let Some(&(_, i)) = at {
                    show(i);
                }
            }
        } else if !k.slots.is_empty() {
            let len = k.slots.len() as u64;
            for _ in 0..n {
                show((rng() % len) as u32);
            }
        }
    }

    /// Bytes of the key map's own structures (Redis's `overhead.hashtable.main` and
    /// `.expires`): slots (key, entry and the value's inline part), the slot table and
    /// the deadline index, estimated from their capacities.
    pub fn overhead(&self) -> (usize, usize) {
        let k = &self.keys;
        let main = k.slots.capacity() * std::mem::size_of::<Slot>() + k.index.bytes();
        // A B-tree of (u64, u32) pairs: 16 bytes per entry plus about half a node's slack.
        let expires = k.expires.len() * 24;
        (main, expires)
    }

    /// Starts fetching the index line where a key of hash `h` would be (the first cache
    /// miss of its lookup), for a command not run yet.
    #[inline]
    pub fn prefetch_bucket(&self, h: u64) {
        self.keys.index.prefetch(h);
        // The slot array's chunk headers, which the next stage reads to find the slot.
        if let Some(first) = self.keys.slots.headers() {
            prefetch_read(first);
        }
    }

    /// Starts fetching the slot the index line (fetched by [`Shard::prefetch_bucket`])
    /// most likely points `h` to: the second miss.
    #[inline]
    pub fn prefetch_slot(&self, h: u64) {
        if let Some(s) = self
            .keys
            .index
            .first_candidate(h)
            .and_then(|i| self.keys.slots.get(i as usize))
        {
            prefetch_read(s);
        }
    }

    /// The entry in the first slot whose tag matches `h` (a prefetch's guess, unchecked).
    #[inline]
    fn first_candidate_entry(&self, h: u64) -> Option<&Entry> {
        self.keys
            .index
            .first_candidate(h)
            .and_then(|i| self.keys.slots.get(i as usize))
            .map(|s| &s.entry)
    }

    /// Starts fetching the out-of-line part of the value in the slot [`Shard::prefetch_slot`]
    /// fetched (a string's bytes, a collection's header): the third miss, which GET reads
    /// and SET frees.
    #[inline]
    pub fn prefetch_value(&self, h: u64) {
        let Some(e) = self.first_candidate_entry(h) else {
            return;
        };
        match &e.value {
            Value::Str(StrVal::Bytes { data, .. }) => {
                if let Some(b) = data.first() {
                    prefetch_read(b);
                }
            }
            Value::Str(StrVal::Int(_)) => {}
            Value::List(b) => prefetch_read(&**b),
            Value::Hash(b) => prefetch_read(&**b),
            Value::Set(b) => prefetch_read(&**b),
            Value::ZSet(b) => prefetch_read(&**b),
            Value::Stream(b) => prefetch_read(&**b),
        }
    }

    /// Starts fetching where `member` would be in the set or hash at the slot
    /// [`Shard::prefetch_slot`] fetched: the miss of a big collection's lookup (SADD,
    /// HSET… on one hot key hit the cache for everything else).
    #[inline]
    pub fn prefetch_member(&self, h: u64, member: &[u8]) {
        let Some(e) = self.first_candidate_entry(h) else {
            return;
        };
        match &e.value {
            Value::Set(s) => s.prefetch_member(member),
            Value::Hash(hv) => hv.prefetch_field(member),
            _ => {}
        }
    }

    /// The `n`th entry (for RANDOMKEY): slots are dense, so this is O(1).
    pub fn nth(&self, n: usize) -> Option<(&[u8], &Entry)> {
        self.keys.slots.get(n).map(|s| (s.key.as_slice(), &s.entry))
    }

    pub fn clear(&mut self) -> usize {
        let n = self.len();
        self.keys = Keys::default();
        n
    }

    /// Empties the shard, handing back its contents to be dropped elsewhere.
    pub fn take_data(&mut self) -> ShardData {
        ShardData {
            _keys: std::mem::take(&mut self.keys),
        }
    }

    /// Exchanges contents (for SWAPDB), leaving WATCH registrations with the shard so
    /// watchers of the db index are the ones signalled.
    pub fn swap_data(&mut self, other: &mut Shard) {
        std::mem::swap(&mut self.keys, &mut other.keys);
    }

    pub fn watch(&mut self, key: Bytes, flag: WatchFlag) {
        self.watchers.entry(key).or_default().push(flag);
    }

    pub fn unwatch(&mut self, key: &[u8], flag: &WatchFlag) {
        if let Some(v) = self.watchers.get_mut(key) {
            v.retain(|f| !Arc::ptr_eq(f, flag));
            if v.is_empty() {
                self.watchers.remove(key);
            }
        }
    }

    /// Distinct watched keys (INFO `total_watched_keys`).
    pub fn watched_len(&self) -> usize {
        self.watchers.len()
    }

    /// How many clients WATCH `key` (tests: a closed connection must leave none behind).
    pub fn watchers_of(&self, key: &[u8]) -> usize {
        self.watchers.get(key).map_or(0, Vec::len)
    }

    /// A shard reporting its modifications to `hook`.
    pub fn with_hook(hook: Arc<KeyHook>) -> Shard {
        Shard {
            hook,
            ..Default::default()
        }
    }

    /// Marks watchers of `key` dirty and tells the hook (Redis `signalModifiedKey` →
    /// `touchWatchedKey`, `trackingInvalidateKey`).
    #[inline]
    pub fn signal(&mut self, key: &[u8]) {
        self.hook.modified(key);
        if self.watchers.is_empty() {
            return;
        }
        if let Some(v) = self.watchers.get(key) {
            for f in v {
                f.store(true, Ordering::Release);
            }
        }
    }

    /// Marks watchers of every key in the shard dirty (FLUSHDB, SWAPDB). Redis touches only
    /// keys that exist on one side; touching all watched keys here errs on aborting.
    pub fn signal_all(&mut self, only_existing: bool) {
        for (k, v) in &self.watchers {
            if !only_existing || self.keys.find(k).is_some() {
                for f in v {
                    f.store(true, Ordering::Release);
                }
            }
        }
    }

    /// Panics if the slot table, the slots and the expiry index disagree (tests only).
    #[cfg(test)]
    pub fn check_invariants(&self) {
        let k = &self.keys;
        assert_eq!(
            k.index.len(),
            k.slots.len(),
            "index and slots differ in size"
        );
        let mut with_ttl = 0;
        for (i, s) in k.slots.iter().enumerate() {
            let key = s.key.as_slice();
            assert_eq!(k.find(key), Some(i), "key {key:?} not indexed at its slot");
            if let Some(t) = s.entry.expire_at() {
                with_ttl += 1;
                assert!(
                    k.expires.contains(&(t, i as u32)),
                    "key {key:?} with deadline {t} missing from the index"
                );
            }
        }
        assert_eq!(
            with_ttl,
            k.expires.len(),
            "stale entries in the expiry index"
        );
        let sum: u128 = k.expires.iter().map(|&(t, _)| t as u128).sum();
        assert_eq!(
            sum, k.deadline_sum,
            "deadline sum out of step with the index"
        );
        // Every hash with field deadlines comes due no later than its earliest one.
        assert_eq!(k.hfe.len(), k.hfe_at.len(), "field worklist and its mirror");
        for (i, s) in k.slots.iter().enumerate() {
            if let Value::Hash(h) = &s.entry.value {
                if let Some(t) = h.min_ttl() {
                    let d = k.hfe_at.get(&(i as u32)).copied();
                    assert!(
                        d.is_some_and(|d| d <= t),
                        "hash at {i} not due by {t}: {d:?}"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::value::StrVal;

    fn v(s: &str) -> Value {
        Value::Str(StrVal::from_set(Bytes::copy_from_slice(s.as_bytes())))
    }

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn removing_keys_gives_the_table_memory_back() {
        let mut sh = Shard::default();
        for i in 0..1000 {
            sh.insert(format!("k{i}").as_bytes(), v("x"), Some(i), 0);
        }
        let full = sh.overhead().0;
        for i in 0..990 {
            assert!(sh.remove(format!("k{i}").as_bytes()).is_some());
        }
        sh.check_invariants();
        let (slots, index) = (sh.keys.slots.capacity(), sh.keys.index.capacity());
        // Ten keys left: at most a quarter-full array's worth each is kept, not 1000.
        assert!(slots <= 64 && index <= 64, "slots {slots}, index {index}");
        assert!(sh.overhead().0 * 10 < full);
        for i in 990..1000 {
            assert!(sh.peek(format!("k{i}").as_bytes()).is_some());
        }
    }

    #[test]
    fn expiry_index_follows_insert_replace_remove() {
        let mut sh = Shard::default();
        sh.insert(b"a", v("1"), Some(100), 0);
        sh.insert(b"b", v("1"), None, 0);
        sh.check_invariants();
        // Replace with another deadline, the same deadline, then none.
        sh.insert(b"a", v("2"), Some(200), 0);
        sh.check_invariants();
        sh.insert(b"a", v("3"), Some(200), 0);
        sh.check_invariants();
        sh.insert(b"a", v("4"), Some(300), 0);
        sh.check_invariants();
        sh.insert(b"a", v("4"), None, 0);
        sh.check_invariants();
        assert_eq!(sh.expires_len(), 0);
        sh.insert(b"c", v("x"), Some(5), 0);
        sh.insert(b"b", v("y"), Some(7), 0);
        sh.check_invariants();
        assert_eq!(sh.expires_len(), 2);
        assert!(sh.remove(b"c").is_some());
        assert!(sh.remove(b"c").is_none());
        sh.check_invariants();
        assert_eq!(sh.expires_len(), 1);
        assert_eq!(sh.deadline_sum(), 7);
    }

    #[test]
    fn insert_slice_returns_previous_entry() {
        let mut sh = Shard::default();
        assert!(sh.insert(b"k", v("1"), Some(9), 3000).is_none());
        let old = sh.insert(b"k", v("2"), None, 4999).expect("old");
        assert_eq!(old.value, v("1"));
        assert_eq!(old.expire_at(), Some(9));
        assert_eq!(old.lru_ms(), 3000);
        // Access times keep whole seconds (Redis's LRU clock resolution).
        assert_eq!(sh.peek(b"k").map(|e| e.lru_ms()), Some(4000));
        sh.check_invariants();
    }

    #[test]
    fn set_expire_keeps_index_consistent() {
        let mut sh = Shard::default();
        assert!(!sh.set_expire(b"nope", Some(1)));
        sh.insert(b"k", v("1"), None, 0);
        assert!(sh.set_expire(b"k", Some(10)));
        sh.check_invariants();
        assert!(sh.set_expire(b"k", Some(20)));
        sh.check_invariants();
        assert!(sh.set_expire(b"k", Some(20)));
        sh.check_invariants();
        assert!(sh.set_expire(b"k", None));
        sh.check_invariants();
        assert_eq!(sh.expires_len(), 0);
    }

    #[test]
    fn insert_entry_carries_deadline() {
        let mut sh = Shard::default();
        sh.insert(b"dst", v("old"), Some(50), 0);
        let e = Entry::new(v("new"), Some(70), 1000);
        let old = sh.insert_entry(b"dst", e).expect("replaced");
        assert_eq!(old.expire_at(), Some(50));
        sh.check_invariants();
        assert_eq!(sh.peek(b"dst").and_then(|e| e.expire_at()), Some(70));
    }

    #[test]
    fn swap_keeps_each_side_consistent() {
        let (mut a, mut b2) = (Shard::default(), Shard::default());
        a.insert(b"x", v("1"), Some(10), 0);
        b2.insert(b"y", v("1"), None, 0);
        a.swap_data(&mut b2);
        a.check_invariants();
        b2.check_invariants();
        assert!(a.peek(b"y").is_some() && b2.peek(b"x").is_some());
        assert_eq!((a.expires_len(), b2.expires_len()), (0, 1));
    }

    #[test]
    fn sweep_removes_only_past_deadlines() {
        let mut sh = Shard::default();
        sh.insert(b"due", v("1"), Some(99), 0);
        sh.insert(b"edge", v("1"), Some(100), 0);
        sh.insert(b"later", v("1"), Some(101), 0);
        sh.insert(b"keep", v("1"), None, 0);
        // A key is expired when now > deadline: at now=100, only "due".
        assert!(!sh.is_expired(b"edge", 100));
        assert!(sh.is_expired(b"due", 100));
        let gone = sh.sweep(100, usize::MAX);
        assert_eq!(gone, vec![b("due")]);
        sh.check_invariants();
        // The limit bounds the work.
        let gone = sh.sweep(1000, 1);
        assert_eq!(gone, vec![b("edge")]);
        let gone = sh.sweep(1000, 10);
        assert_eq!(gone, vec![b("later")]);
        assert_eq!(sh.len(), 1);
        sh.check_invariants();
    }

    /// A hash with fields `f0..n`, field `fi` due at `base + i` when `i` is in `timed`.
    fn timed_hash(n: u64, timed: &[u64], base: u64) -> Value {
        let mut h = crate::types::hash::HashValue::new();
        for i in 0..n {
            h.set(
                format!("f{i}").as_bytes(),
                b"v",
                crate::types::hash::Limits::DEFAULT,
            );
        }
        h.enable_ttls();
        for &i in timed {
            h.set_ttl(format!("f{i}").as_bytes(), Some(base + i));
        }
        Value::Hash(Box::new(h))
    }

    #[test]
    fn field_worklist_follows_inserts_moves_and_removals() {
        let mut sh = Shard::default();
        sh.insert(b"plain", v("1"), None, 0);
        sh.insert(b"h1", timed_hash(3, &[0, 2], 100), None, 0);
        sh.insert(b"h2", timed_hash(2, &[1], 50), None, 0);
        sh.insert(b"h3", timed_hash(2, &[], 0), None, 0);
        sh.check_invariants();
        assert_eq!(sh.field_expiry_len(), 2);
        // Removing a slot moves the last one (h3, then h2) into its place.
        sh.remove(b"plain");
        sh.check_invariants();
        sh.remove(b"h1");
        sh.check_invariants();
        assert_eq!(sh.field_expiry_len(), 1);
        // Replacing a hash with a string leaves a stale pair: dropped when it comes due.
        sh.insert(b"h1", timed_hash(2, &[0], 10), None, 0);
        sh.insert(b"h1", v("s"), None, 0);
        sh.check_invariants();
        // A command lowers a deadline in place, then tells the shard.
        if let Some(Value::Hash(h)) = sh.peek_mut(b"h2").map(|e| &mut e.value) {
            h.set_ttl(b"f0", Some(20));
        }
        sh.register_field_expiry(b"h2", 20);
        sh.check_invariants();
        // Nothing due before 20 (`deadline < now`).
        assert!(sh.sweep_fields(20, usize::MAX).is_empty());
        let done = sh.sweep_fields(21, usize::MAX);
        assert_eq!(done.len(), 1);
        assert_eq!(
            (done[0].key.clone(), done[0].fields.clone()),
            (b("h2"), vec![b("f0")])
        );
        assert!(done[0].deleted.is_none());
        sh.check_invariants();
        // The quota bounds the work; the last field takes the key with it.
        assert!(sh.sweep_fields(1000, 0).is_empty());
        let done = sh.sweep_fields(1000, usize::MAX);
        assert_eq!(done[0].fields, vec![b("f1")]);
        assert!(done[0].deleted.is_some());
        assert!(sh.peek(b"h2").is_none());
        assert_eq!(sh.field_expiry_len(), 0);
        sh.check_invariants();
        // Many due fields across hashes, a quota of 3 per call.
        for k in 0..4 {
            sh.insert(
                format!("m{k}").as_bytes(),
                timed_hash(4, &[0, 1, 2, 3], 0),
                None,
                0,
            );
        }
        let mut total = 0;
        for _ in 0..10 {
            let done = sh.sweep_fields(100, 3);
            let n: usize = done.iter().map(|d| d.fields.len()).sum();
            assert!(n <= 3);
            total += n;
            sh.check_invariants();
        }
        assert_eq!(total, 16);
        assert_eq!(
            sh.len(),
            2,
            "h1 (a string now) and h3 (no deadlines) are left"
        );
    }

    #[test]
    fn sample_draws_from_the_right_population() {
        let mut sh = Shard::default();
        let mut draws = Vec::new();
        let mut x = 1u64;
        let mut rng = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            x >> 11
        };
        // Empty: nothing, whatever is asked.
        sh.sample(5, false, false, &mut rng, &mut |k, _| {
            draws.push(k.to_vec())
        });
        sh.sample(5, true, false, &mut rng, &mut |k, _| draws.push(k.to_vec()));
        assert!(draws.is_empty());
        for i in 0..100u64 {
            let at = (i % 4 == 0).then_some(1000 + i);
            sh.insert(format!("k{i}").as_bytes(), v("1"), at, 0);
        }
        sh.sample(200, true, false, &mut rng, &mut |k, e| {
            assert!(e.expire_at().is_some(), "{k:?} has no deadline");
            draws.push(k.to_vec());
        });
        assert_eq!(draws.len(), 200);
        draws.sort();
        draws.dedup();
        assert!(draws.len() > 10, "volatile draws spread: {}", draws.len());
        let mut soonest = Vec::new();
        sh.sample(3, true, true, &mut rng, &mut |k, _| {
            soonest.push(k.to_vec())
        });
        assert_eq!(
            soonest,
            vec![b"k0".to_vec(), b"k4".to_vec(), b"k8".to_vec()]
        );
        let mut any = 0;
        sh.sample(50, false, false, &mut rng, &mut |_, _| any += 1);
        assert_eq!(any, 50);
    }

    #[test]
    fn scan_from_visits_want_keys_and_skips_expired() {
        let mut sh = Shard::default();
        for i in 0..200 {
            let deadline = (i % 10 == 0).then_some(5);
            sh.insert(format!("k{i}").as_bytes(), v("1"), deadline, 0);
        }
        let mut out = Vec::new();
        let mut from = 0;
        let (mut expired, mut visited, mut calls) = (0, 0, 0);
        loop {
            let step = sh.scan_from(from, 7, 10, &mut out);
            expired += step.expired;
            visited += step.visited;
            calls += 1;
            match step.next_pos {
                Some(n) => {
                    assert_eq!(
                        step.visited, 7,
                        "a step stops after the keys it was asked for"
                    );
                    assert!(n > from);
                    from = n;
                }
                None => break,
            }
        }
        assert_eq!(calls, 200_usize.div_ceil(7));
        assert_eq!((visited, expired), (200, 20));
        assert_eq!(out.len(), 180);
        assert!(out.iter().all(|(_, t)| *t == "string"));
        let mut names: Vec<_> = out.into_iter().map(|(k, _)| k).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 180);
        assert_eq!(sh.len(), 180);
        sh.check_invariants();
    }
}

#[cfg(test)]
mod model_tests {
    use super::*;
    use crate::types::value::StrVal;
    use rand::{rngs::SmallRng, Rng, SeedableRng};

    /// Random inserts, removals, deadline moves and sweeps against a plain map: the slot
    /// renumbering on removal must keep the table, the slots and the expiry index in step.
    #[test]
    fn slots_follow_a_model_map() {
        let mut rng = SmallRng::seed_from_u64(17);
        let mut sh = Shard::default();
        let mut model: std::collections::HashMap<Vec<u8>, (i64, Option<u64>)> = Default::default();
        for step in 0..20_000u64 {
            // Short keys stay inline, long ones go to the heap: use both.
            let n = rng.gen_range(0..300);
            let key = if n % 3 == 0 {
                format!("a-rather-long-key-name-that-is-boxed:{n}").into_bytes()
            } else {
                format!("k{n}").into_bytes()
            };
            let at = rng.gen_bool(0.5).then(|| rng.gen_range(0..1000));
            match rng.gen_range(0..10) {
                0..=4 => {
                    let v = step as i64;
                    let old = sh.insert(&key, Value::Str(StrVal::Int(v)), at, step * 1000);
                    let was = model.insert(key.clone(), (v, at));
                    assert_eq!(old.map(|e| e.expire_at()), was.map(|w| w.1));
                }
                5..=6 => {
                    let old = sh.remove(&key).map(|e| e.expire_at());
                    assert_eq!(old, model.remove(&key).map(|w| w.1));
                }
                7..=8 => {
                    let present = sh.set_expire(&key, at);
                    assert_eq!(present, model.contains_key(&key));
                    if let Some(m) = model.get_mut(&key) {
                        m.1 = at;
                    }
                }
                _ => {
                    let now = rng.gen_range(0..1000);
                    for k in sh.sweep(now, 5) {
                        let (_, at) = model.remove(&k[..]).expect("swept key existed");
                        assert!(at.is_some_and(|t| t < now));
                    }
                }
            }
            if step % 1000 == 0 {
                sh.check_invariants();
            }
        }
        sh.check_invariants();
        assert_eq!(sh.len(), model.len());
        for (k, (v, at)) in &model {
            let e = sh.peek(k).expect("model key present");
            assert_eq!(e.value, Value::Str(StrVal::Int(*v)));
            assert_eq!(e.expire_at(), *at);
        }
    }
}
