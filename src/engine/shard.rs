//! One shard of one database: the key map, its expiry index and WATCH registrations.
//!
//! Invariant (checked by `check_invariants` in tests): `expires` holds exactly one
//! `(deadline, key)` pair for every entry whose `expire_at` is `Some(deadline)`, and nothing
//! else. Every mutation of a deadline goes through this type so the two never drift.
//!
//! This file sits below `keyspace.rs` (which owns the databases of shards and the SCAN
//! cursor layout) and imports nothing from it: a key's position inside a shard
//! ([`scan_pos`]) lives here, next to the shard's part of a SCAN step.

use crate::types::placement::{fnv1a64, mix64};
use crate::types::value::{Entry, Value};
use ahash::RandomState;
use bytes::Bytes;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub type WatchFlag = Arc<AtomicBool>;

type Map = HashMap<Bytes, Entry, RandomState>;

#[derive(Default)]
pub struct Shard {
    map: Map,
    /// Ordered (deadline, key) index so the active sweep finds due keys without scanning.
    expires: BTreeSet<(u64, Bytes)>,
    /// Clients watching a key: their dirty flags are raised on every modification.
    watchers: HashMap<Bytes, Vec<WatchFlag>, RandomState>,
}

/// A shard's former contents, detached by `take_data` so a lazy flush can free them on
/// another thread (`FLUSHALL ASYNC`).
pub struct ShardData {
    _map: Map,
    _expires: BTreeSet<(u64, Bytes)>,
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
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    pub fn expires_len(&self) -> usize {
        self.expires.len()
    }

    /// Raw lookup, ignoring expiry.
    pub fn peek(&self, key: &[u8]) -> Option<&Entry> {
        self.map.get(key)
    }

    pub fn peek_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        self.map.get_mut(key)
    }

    /// True if `key` is present but its deadline has passed (`now > deadline`).
    #[inline]
    pub fn is_expired(&self, key: &[u8], now: u64) -> bool {
        // Most shards of most workloads hold no deadline at all: skip the lookup.
        if self.expires.is_empty() {
            return false;
        }
        matches!(self.map.get(key), Some(e) if e.is_expired(now))
    }

    /// Inserts or replaces a value, setting its deadline; returns the previous entry.
    pub fn insert(
        &mut self,
        key: Bytes,
        value: Value,
        expire_at: Option<u64>,
        now: u64,
    ) -> Option<Entry> {
        self.insert_entry(
            key,
            Entry {
                value,
                expire_at,
                lru_ms: now,
            },
        )
    }

    /// Like `insert`, but copies the key only when it is new: replacing the value of an
    /// existing key (the common `SET` case) allocates nothing.
    pub fn insert_slice(
        &mut self,
        key: &[u8],
        value: Value,
        expire_at: Option<u64>,
        now: u64,
    ) -> Option<Entry> {
        let Some(e) = self.map.get_mut(key) else {
            return self.insert(Bytes::copy_from_slice(key), value, expire_at, now);
        };
        let old = Entry {
            value: std::mem::replace(&mut e.value, value),
            expire_at: e.expire_at,
            lru_ms: e.lru_ms,
        };
        e.lru_ms = now;
        if old.expire_at != expire_at {
            e.expire_at = expire_at;
            self.reindex(key, old.expire_at, expire_at);
        }
        Some(old)
    }

    /// Inserts or replaces a whole entry (value, deadline and access time kept as given:
    /// RENAME and MOVE carry an entry over); returns the previous entry.
    pub fn insert_entry(&mut self, key: Bytes, entry: Entry) -> Option<Entry> {
        if let Some(t) = entry.expire_at {
            self.expires.insert((t, key.clone()));
        }
        let new_at = entry.expire_at;
        let old = self.map.insert(key.clone(), entry);
        if let Some(t) = old.as_ref().and_then(|o| o.expire_at) {
            if Some(t) != new_at {
                self.expires.remove(&(t, key));
            }
        }
        old
    }

    /// Moves `key`'s index entry from deadline `old` to `new` (the map is already updated).
    fn reindex(&mut self, key: &[u8], old: Option<u64>, new: Option<u64>) {
        let Some((k, _)) = self.map.get_key_value(key) else {
            return;
        };
        let k = k.clone();
        if let Some(t) = old {
            self.expires.remove(&(t, k.clone()));
        }
        if let Some(t) = new {
            self.expires.insert((t, k));
        }
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let (k, e) = self.map.remove_entry(key)?;
        if let Some(t) = e.expire_at {
            self.expires.remove(&(t, k));
        }
        Some(e)
    }

    /// Sets or clears a key's deadline. Returns false if the key is absent.
    pub fn set_expire(&mut self, key: &[u8], at: Option<u64>) -> bool {
        let Some(e) = self.map.get_mut(key) else {
            return false;
        };
        let old = e.expire_at;
        if old != at {
            e.expire_at = at;
            self.reindex(key, old, at);
        }
        true
    }

    /// Removes up to `limit` keys whose deadline has passed (`deadline < now`); returns them.
    pub fn sweep(&mut self, now: u64, limit: usize) -> Vec<Bytes> {
        self.sweep_noting(now, limit, |_, _| {})
    }

    /// As `sweep`, showing each removed key and value to `removed` first.
    pub fn sweep_noting(
        &mut self,
        now: u64,
        limit: usize,
        mut removed: impl FnMut(&Bytes, &Value),
    ) -> Vec<Bytes> {
        let mut out = Vec::new();
        while out.len() < limit {
            match self.expires.first() {
                Some((t, _)) if *t < now => {}
                _ => break,
            }
            let (_, k) = self.expires.pop_first().expect("non-empty");
            if let Some(e) = self.map.remove(&k) {
                removed(&k, &e.value);
            }
            out.push(k);
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
        let mut found: Vec<(u32, &Bytes, &Entry)> = self
            .map
            .iter()
            .map(|(k, e)| (scan_pos(k), k, e))
            .filter(|(p, _, _)| *p >= from)
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
        for (_, k, e) in found {
            if e.is_expired(now) {
                expired.push(k.clone());
            } else {
                out.push((k.clone(), e.value.type_name()));
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

    pub fn keys(&self) -> impl Iterator<Item = (&Bytes, &Entry)> {
        self.map.iter()
    }

    /// The `n`th entry in iteration order (for RANDOMKEY).
    pub fn nth(&self, n: usize) -> Option<(&Bytes, &Entry)> {
        self.map.iter().nth(n)
    }

    pub fn clear(&mut self) -> usize {
        let n = self.map.len();
        self.map = HashMap::default();
        self.expires.clear();
        n
    }

    /// Empties the shard, handing back its contents to be dropped elsewhere.
    pub fn take_data(&mut self) -> ShardData {
        ShardData {
            _map: std::mem::take(&mut self.map),
            _expires: std::mem::take(&mut self.expires),
        }
    }

    /// Exchanges contents (for SWAPDB), leaving WATCH registrations with the shard so
    /// watchers of the db index are the ones signalled.
    pub fn swap_data(&mut self, other: &mut Shard) {
        std::mem::swap(&mut self.map, &mut other.map);
        std::mem::swap(&mut self.expires, &mut other.expires);
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

    /// How many clients WATCH `key` (tests: a closed connection must leave none behind).
    pub fn watchers_of(&self, key: &[u8]) -> usize {
        self.watchers.get(key).map_or(0, Vec::len)
    }

    /// Marks watchers of `key` dirty (Redis `signalModifiedKey` → `touchWatchedKey`).
    #[inline]
    pub fn signal(&mut self, key: &[u8]) {
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
            if !only_existing || self.map.contains_key(k) {
                for f in v {
                    f.store(true, Ordering::Release);
                }
            }
        }
    }

    /// Panics if the expiry index and the map disagree (tests only).
    #[cfg(test)]
    pub fn check_invariants(&self) {
        let mut with_ttl = 0;
        for (k, e) in &self.map {
            if let Some(t) = e.expire_at {
                with_ttl += 1;
                assert!(
                    self.expires.contains(&(t, k.clone())),
                    "key {k:?} with deadline {t} missing from the index"
                );
            }
        }
        assert_eq!(
            with_ttl,
            self.expires.len(),
            "stale entries in the expiry index"
        );
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
    fn expiry_index_follows_insert_replace_remove() {
        let mut sh = Shard::default();
        sh.insert(b("a"), v("1"), Some(100), 0);
        sh.insert(b("b"), v("1"), None, 0);
        sh.check_invariants();
        // Replace with another deadline, the same deadline, then none.
        sh.insert(b("a"), v("2"), Some(200), 0);
        sh.check_invariants();
        sh.insert(b("a"), v("3"), Some(200), 0);
        sh.check_invariants();
        sh.insert_slice(b"a", v("4"), Some(300), 0);
        sh.check_invariants();
        sh.insert_slice(b"a", v("4"), None, 0);
        sh.check_invariants();
        assert_eq!(sh.expires_len(), 0);
        sh.insert_slice(b"c", v("x"), Some(5), 0);
        sh.insert_slice(b"b", v("y"), Some(7), 0);
        sh.check_invariants();
        assert_eq!(sh.expires_len(), 2);
        assert!(sh.remove(b"c").is_some());
        assert!(sh.remove(b"c").is_none());
        sh.check_invariants();
        assert_eq!(sh.expires_len(), 1);
    }

    #[test]
    fn insert_slice_returns_previous_entry() {
        let mut sh = Shard::default();
        assert!(sh.insert_slice(b"k", v("1"), Some(9), 3).is_none());
        let old = sh.insert_slice(b"k", v("2"), None, 4).expect("old");
        assert_eq!(old.value, v("1"));
        assert_eq!(old.expire_at(), Some(9));
        assert_eq!(sh.peek(b"k").map(|e| e.lru_ms), Some(4));
        sh.check_invariants();
    }

    #[test]
    fn set_expire_keeps_index_consistent() {
        let mut sh = Shard::default();
        assert!(!sh.set_expire(b"nope", Some(1)));
        sh.insert(b("k"), v("1"), None, 0);
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
        sh.insert(b("dst"), v("old"), Some(50), 0);
        let e = Entry {
            value: v("new"),
            expire_at: Some(70),
            lru_ms: 1,
        };
        let old = sh.insert_entry(b("dst"), e).expect("replaced");
        assert_eq!(old.expire_at(), Some(50));
        sh.check_invariants();
        assert_eq!(sh.peek(b"dst").and_then(|e| e.expire_at()), Some(70));
    }

    #[test]
    fn swap_keeps_each_side_consistent() {
        let (mut a, mut b2) = (Shard::default(), Shard::default());
        a.insert(b("x"), v("1"), Some(10), 0);
        b2.insert(b("y"), v("1"), None, 0);
        a.swap_data(&mut b2);
        a.check_invariants();
        b2.check_invariants();
        assert!(a.peek(b"y").is_some() && b2.peek(b"x").is_some());
        assert_eq!((a.expires_len(), b2.expires_len()), (0, 1));
    }

    #[test]
    fn sweep_removes_only_past_deadlines() {
        let mut sh = Shard::default();
        sh.insert(b("due"), v("1"), Some(99), 0);
        sh.insert(b("edge"), v("1"), Some(100), 0);
        sh.insert(b("later"), v("1"), Some(101), 0);
        sh.insert(b("keep"), v("1"), None, 0);
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

    #[test]
    fn scan_from_visits_want_keys_and_skips_expired() {
        let mut sh = Shard::default();
        for i in 0..200 {
            let deadline = (i % 10 == 0).then_some(5);
            sh.insert(b(&format!("k{i}")), v("1"), deadline, 0);
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
