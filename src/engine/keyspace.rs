//! Databases, shard selection and the per-command [`Access`] view.

use super::shard::{Shard, WatchFlag};
use super::value::{Entry, Value};
use crate::types::placement::{mix64, tag_hash};
use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::sync::atomic::{AtomicU64, Ordering};

/// Shards per database (a power of two).
pub const SHARDS: usize = 64;
/// SCAN visits each shard in this many hash slices, so one call does not return a whole
/// shard; the cursor is `shard * SCAN_SLICES + slice`.
pub const SCAN_SLICES: usize = 16;

#[derive(Default)]
pub struct KeyspaceStats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub expired: AtomicU64,
}

pub struct Keyspace {
    gate: RwLock<()>,
    dbs: Box<[Box<[Mutex<Shard>]>]>,
    pub stats: KeyspaceStats,
}

pub fn shard_of(key: &[u8]) -> usize {
    (mix64(tag_hash(key)) as usize) & (SHARDS - 1)
}

/// Which SCAN slice of its shard a key falls in: a hash of the whole key (not its tag), so
/// keys of one tag still spread over slices.
pub fn scan_slice(key: &[u8]) -> usize {
    (mix64(crate::types::placement::fnv1a64(key) ^ 0x9e37_79b9_7f4a_7c15) as usize) % SCAN_SLICES
}

impl Keyspace {
    pub fn new(databases: usize) -> Keyspace {
        let dbs = (0..databases)
            .map(|_| (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect())
            .collect();
        Keyspace {
            gate: RwLock::new(()),
            dbs,
            stats: KeyspaceStats::default(),
        }
    }

    pub fn databases(&self) -> usize {
        self.dbs.len()
    }

    /// Shared access for a command on `db` touching `keys`: their shards are locked in
    /// ascending order (deadlock-free), nothing else is.
    pub fn shared<'a>(&'a self, db: usize, keys: &[&[u8]], now: u64) -> Access<'a> {
        let gate = Gate::Shared(self.gate.read());
        let mut idx: Vec<usize> = keys.iter().map(|k| shard_of(k)).collect();
        idx.sort_unstable();
        idx.dedup();
        let locked = idx
            .into_iter()
            .map(|s| (db * SHARDS + s, self.dbs[db][s].lock()))
            .collect();
        Access {
            ks: self,
            _gate: gate,
            locked,
            db,
            now,
            exclusive: false,
        }
    }

    /// Exclusive access to everything (EXEC, scripts, whole-keyspace commands).
    pub fn exclusive(&self, db: usize, now: u64) -> Access<'_> {
        let gate = Gate::Exclusive(self.gate.write());
        Access {
            ks: self,
            _gate: gate,
            locked: Vec::new(),
            db,
            now,
            exclusive: true,
        }
    }

    /// Shared gate only; the caller visits shards one at a time (SCAN, DBSIZE, sweep).
    pub fn with_shard<R>(&self, db: usize, shard: usize, f: impl FnOnce(&mut Shard) -> R) -> R {
        let _g = self.gate.read();
        f(&mut self.dbs[db][shard].lock())
    }

    pub fn dbsize(&self, db: usize) -> usize {
        let _g = self.gate.read();
        self.dbs[db].iter().map(|s| s.lock().len()).sum()
    }

    /// Keys and keys-with-deadline per database, for INFO keyspace.
    pub fn db_counts(&self, db: usize) -> (usize, usize) {
        let _g = self.gate.read();
        self.dbs[db].iter().fold((0, 0), |(k, e), s| {
            let s = s.lock();
            (k + s.len(), e + s.expires_len())
        })
    }

    /// Active expiry: removes due keys from every shard (bounded work per shard per call).
    /// Returns how many were removed.
    pub fn sweep(&self, now: u64, per_shard: usize) -> usize {
        let mut total = 0;
        for db in 0..self.dbs.len() {
            for s in 0..SHARDS {
                let _g = self.gate.read();
                let mut sh = self.dbs[db][s].lock();
                let gone = sh.sweep(now, per_shard);
                for k in &gone {
                    sh.signal(k);
                }
                total += gone.len();
            }
        }
        self.stats
            .expired
            .fetch_add(total as u64, Ordering::Relaxed);
        total
    }
}

enum Gate<'a> {
    Shared(#[allow(dead_code)] RwLockReadGuard<'a, ()>),
    Exclusive(#[allow(dead_code)] RwLockWriteGuard<'a, ()>),
}

/// A command's view of the keyspace: the shards it locked, the current db and "now".
/// All reads apply lazy expiry; all writes signal WATCHers.
pub struct Access<'a> {
    ks: &'a Keyspace,
    _gate: Gate<'a>,
    locked: Vec<(usize, MutexGuard<'a, Shard>)>,
    pub db: usize,
    pub now: u64,
    exclusive: bool,
}

impl<'a> Access<'a> {
    pub fn is_exclusive(&self) -> bool {
        self.exclusive
    }

    pub fn keyspace(&self) -> &'a Keyspace {
        self.ks
    }

    /// Locks (if not yet held) and returns a shard of a db. In shared mode only the shards
    /// locked up front should be reached; reaching another one means the command table's key
    /// positions are wrong, and we lock it anyway rather than fail.
    pub fn shard_at(&mut self, db: usize, s: usize) -> &mut Shard {
        let id = db * SHARDS + s;
        let pos = match self.locked.iter().position(|(i, _)| *i == id) {
            Some(p) => p,
            None => {
                debug_assert!(
                    self.exclusive,
                    "shard not locked up front: fix key positions"
                );
                self.locked.push((id, self.ks.dbs[db][s].lock()));
                self.locked.len() - 1
            }
        };
        &mut self.locked[pos].1
    }

    fn shard_in(&mut self, db: usize, key: &[u8]) -> &mut Shard {
        self.shard_at(db, shard_of(key))
    }

    /// Applies lazy expiry to `key` in `db`; true if it was removed.
    fn expire_if_needed(&mut self, db: usize, key: &[u8]) -> bool {
        let now = self.now;
        let sh = self.shard_in(db, key);
        if sh.is_expired(key, now) {
            sh.remove(key);
            sh.signal(key);
            self.ks.stats.expired.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Looks a key up in `db` (no hit/miss accounting, no LRU update).
    pub fn get_in(&mut self, db: usize, key: &[u8]) -> Option<&mut Entry> {
        self.expire_if_needed(db, key);
        self.shard_in(db, key).peek_mut(key)
    }

    /// Read lookup in the current db, counting keyspace hits/misses and touching LRU.
    pub fn get(&mut self, key: &[u8]) -> Option<&Entry> {
        let (db, now) = (self.db, self.now);
        self.expire_if_needed(db, key);
        let stats = &self.ks.stats;
        match self.shard_in(db, key).peek_mut(key) {
            Some(e) => {
                stats.hits.fetch_add(1, Ordering::Relaxed);
                e.lru_ms = now;
                Some(e)
            }
            None => {
                stats.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Lookup without touching stats or LRU (EXISTS-style checks, TYPE, TTL).
    pub fn peek(&mut self, key: &[u8]) -> Option<&Entry> {
        let db = self.db;
        self.get_in(db, key).map(|e| &*e)
    }

    pub fn exists(&mut self, key: &[u8]) -> bool {
        self.peek(key).is_some()
    }

    /// Lookup for modification: signals WATCHers, so call it only when about to write.
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let (db, now) = (self.db, self.now);
        self.expire_if_needed(db, key);
        let sh = self.shard_in(db, key);
        sh.signal(key);
        let e = sh.peek_mut(key)?;
        e.lru_ms = now;
        Some(e)
    }

    /// Stores a value with a deadline (None = persistent), replacing any previous value.
    pub fn set(&mut self, key: &[u8], value: Value, expire_at: Option<u64>) -> Option<Entry> {
        let db = self.db;
        self.set_in(db, key, value, expire_at)
    }

    pub fn set_in(
        &mut self,
        db: usize,
        key: &[u8],
        value: Value,
        expire_at: Option<u64>,
    ) -> Option<Entry> {
        let now = self.now;
        self.expire_if_needed(db, key);
        let sh = self.shard_in(db, key);
        sh.signal(key);
        sh.insert(Bytes::copy_from_slice(key), value, expire_at, now)
    }

    /// Replaces the value but keeps the key's deadline (KEEPTTL, in-place edits).
    pub fn set_keep_ttl(&mut self, key: &[u8], value: Value) {
        let ttl = self.peek(key).and_then(|e| e.expire_at);
        self.set(key, value, ttl);
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let db = self.db;
        self.remove_in(db, key)
    }

    pub fn remove_in(&mut self, db: usize, key: &[u8]) -> Option<Entry> {
        self.expire_if_needed(db, key);
        let sh = self.shard_in(db, key);
        let e = sh.remove(key)?;
        sh.signal(key);
        Some(e)
    }

    /// Sets or clears the deadline of an existing key; false if missing.
    pub fn set_expire(&mut self, key: &[u8], at: Option<u64>) -> bool {
        let db = self.db;
        self.expire_if_needed(db, key);
        let sh = self.shard_in(db, key);
        let ok = sh.set_expire(key, at);
        if ok {
            sh.signal(key);
        }
        ok
    }

    pub fn watch(&mut self, key: &[u8], flag: WatchFlag) {
        let db = self.db;
        self.shard_in(db, key)
            .watch(Bytes::copy_from_slice(key), flag);
    }

    pub fn unwatch_in(&mut self, db: usize, key: &[u8], flag: &WatchFlag) {
        self.shard_in(db, key).unwatch(key, flag);
    }

    /// Every live key of a db (exclusive mode).
    pub fn all_keys(&mut self, db: usize) -> Vec<Bytes> {
        let now = self.now;
        let mut out = Vec::new();
        for s in 0..SHARDS {
            let sh = self.shard_at(db, s);
            out.extend(
                sh.keys()
                    .filter(|(_, e)| e.expire_at.is_none_or(|t| now <= t))
                    .map(|(k, _)| k.clone()),
            );
        }
        out
    }

    /// Number of keys in a db (exclusive mode).
    pub fn dbsize_in(&mut self, db: usize) -> usize {
        (0..SHARDS).map(|s| self.shard_at(db, s).len()).sum()
    }

    /// Removes every key of a db, signalling watchers of keys that existed.
    pub fn flush_db(&mut self, db: usize) -> usize {
        (0..SHARDS)
            .map(|s| {
                let sh = self.shard_at(db, s);
                sh.signal_all(true);
                sh.clear()
            })
            .sum()
    }

    /// Exchanges two databases' contents (exclusive mode).
    pub fn swap_dbs(&mut self, a: usize, b: usize) {
        if a == b {
            return;
        }
        for s in 0..SHARDS {
            self.shard_at(a, s).signal_all(false);
            self.shard_at(b, s).signal_all(false);
            let ia = self
                .locked
                .iter()
                .position(|(i, _)| *i == a * SHARDS + s)
                .expect("locked");
            let ib = self
                .locked
                .iter()
                .position(|(i, _)| *i == b * SHARDS + s)
                .expect("locked");
            let (lo, hi) = (ia.min(ib), ia.max(ib));
            let (x, y) = self.locked.split_at_mut(hi);
            x[lo].1.swap_data(&mut y[0].1);
        }
    }
}
