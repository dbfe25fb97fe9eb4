//! One shard of one database: the key map, its expiry index and WATCH registrations.

use super::value::{Entry, Value};
use ahash::RandomState;
use bytes::Bytes;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub type WatchFlag = Arc<AtomicBool>;

#[derive(Default)]
pub struct Shard {
    map: HashMap<Bytes, Entry, RandomState>,
    /// Ordered (deadline, key) index so the active sweep finds due keys without scanning.
    expires: BTreeSet<(u64, Bytes)>,
    /// Clients watching a key: their dirty flags are raised on every modification.
    watchers: HashMap<Bytes, Vec<WatchFlag>, RandomState>,
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

    pub fn is_expired(&self, key: &[u8], now: u64) -> bool {
        matches!(self.map.get(key), Some(e) if e.expire_at.is_some_and(|t| now > t))
    }

    /// Inserts or replaces a value, setting its deadline; returns the previous entry.
    pub fn insert(
        &mut self,
        key: Bytes,
        value: Value,
        expire_at: Option<u64>,
        now: u64,
    ) -> Option<Entry> {
        if let Some(t) = expire_at {
            self.expires.insert((t, key.clone()));
        }
        let old = self.map.insert(
            key.clone(),
            Entry {
                value,
                expire_at,
                lru_ms: now,
            },
        );
        if let Some(Entry {
            expire_at: Some(t), ..
        }) = &old
        {
            if Some(*t) != expire_at {
                self.expires.remove(&(*t, key));
            }
        }
        old
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
        let Some((k, e)) = self.map.get_key_value(key) else {
            return false;
        };
        let k = k.clone();
        let old = e.expire_at;
        if old == at {
            return true;
        }
        if let Some(t) = old {
            self.expires.remove(&(t, k.clone()));
        }
        if let Some(t) = at {
            self.expires.insert((t, k.clone()));
        }
        self.map.get_mut(key).expect("present").expire_at = at;
        true
    }

    /// Removes up to `limit` keys whose deadline has passed; returns them.
    pub fn sweep(&mut self, now: u64, limit: usize) -> Vec<Bytes> {
        let mut out = Vec::new();
        while out.len() < limit {
            let Some((t, _)) = self.expires.first() else {
                break;
            };
            if *t >= now {
                break;
            }
            let (_, k) = self.expires.pop_first().expect("non-empty");
            self.map.remove(&k);
            out.push(k);
        }
        out
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
}
