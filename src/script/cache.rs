//! The server's script bodies by SHA1, with Redis 7.4's eviction of EVAL scripts: a client
//! that sends a new script on every EVAL would otherwise grow the cache (and every
//! interpreter's compiled copies) without bound. Scripts that EVAL added are kept in LRU
//! order and at most [`EVAL_SCRIPTS_MAX`] of them; SCRIPT LOAD's are never evicted. As in
//! Redis 7.4, a script first added by EVAL stays evictable when SCRIPT LOAD names it later.
//!
//! The LRU clock is a stamp per script that each run stores (one atomic store, no lock on
//! the EVALSHA path); eviction scans the evictable stamps for the oldest, which is cheap at
//! 500 and happens only when EVAL adds a new script.

use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Redis's `LRU_LIST_LENGTH` (eval.c, 7.4).
pub const EVAL_SCRIPTS_MAX: usize = 500;

/// A script's last-use stamp; present only on evictable (EVAL-added) scripts.
pub type Stamp = Arc<AtomicU64>;

struct Entry {
    body: Bytes,
    lru: Option<Stamp>,
}

#[derive(Default)]
struct Inner {
    map: HashMap<String, Entry>,
    evictable: usize,
}

#[derive(Default)]
pub struct ScriptCache {
    inner: Mutex<Inner>,
    clock: AtomicU64,
    /// Scripts evicted since start: interpreters compare it with what they last saw and
    /// drop compiled copies of scripts that are gone.
    evictions: AtomicU64,
}

impl ScriptCache {
    pub fn body(&self, sha: &str) -> Option<Bytes> {
        self.inner.lock().map.get(sha).map(|e| e.body.clone())
    }

    /// The body and stamp of a cached script.
    pub fn get(&self, sha: &str) -> Option<(Bytes, Option<Stamp>)> {
        let g = self.inner.lock();
        g.map.get(sha).map(|e| (e.body.clone(), e.lru.clone()))
    }

    pub fn contains(&self, sha: &str) -> bool {
        self.inner.lock().map.contains_key(sha)
    }

    /// Adds a script unless cached already; returns its stamp (`None`: never evicted) and
    /// how many scripts were evicted to make room.
    pub fn insert(&self, sha: &str, body: Bytes, from_eval: bool) -> (Option<Stamp>, u64) {
        let mut g = self.inner.lock();
        if let Some(e) = g.map.get(sha) {
            return (e.lru.clone(), 0);
        }
        let mut evicted = 0;
        if from_eval {
            while g.evictable >= EVAL_SCRIPTS_MAX {
                let oldest = g
                    .map
                    .iter()
                    .filter_map(|(k, e)| Some((e.lru.as_ref()?.load(Ordering::Relaxed), k)))
                    .min()
                    .map(|(_, k)| k.clone());
                let Some(k) = oldest else { break };
                g.map.remove(&k);
                g.evictable -= 1;
                evicted += 1;
            }
            g.evictable += 1;
        }
        let lru = from_eval.then(|| Arc::new(AtomicU64::new(self.tick())));
        g.map.insert(
            sha.to_string(),
            Entry {
                body,
                lru: lru.clone(),
            },
        );
        drop(g);
        if evicted > 0 {
            self.evictions.fetch_add(evicted, Ordering::Release);
        }
        (lru, evicted)
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Marks a script as just used.
    pub fn touch(&self, lru: &AtomicU64) {
        lru.store(self.tick(), Ordering::Relaxed);
    }

    pub fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Acquire)
    }

    /// Keeps only the entries of `map` whose script is still cached.
    pub fn retain_cached<V, S>(&self, map: &mut HashMap<String, V, S>) {
        let g = self.inner.lock();
        map.retain(|k, _| g.map.contains_key(k));
    }

    /// SCRIPT FLUSH.
    pub fn clear(&self) {
        *self.inner.lock() = Inner::default();
    }

    /// Cached scripts and their bytes (SHA1 and body), for INFO.
    pub fn usage(&self) -> (usize, u64) {
        let g = self.inner.lock();
        let bytes = g.map.iter().map(|(k, e)| (k.len() + e.body.len()) as u64);
        (g.map.len(), bytes.sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(i: usize) -> String {
        format!("{i:040}")
    }

    #[test]
    fn eval_scripts_are_evicted_least_recently_used_first() {
        let c = ScriptCache::default();
        let (loaded, _) = c.insert("loaded", Bytes::from_static(b"x"), false);
        assert!(loaded.is_none());
        let mut stamps = Vec::new();
        for i in 0..EVAL_SCRIPTS_MAX {
            let (s, ev) = c.insert(&sha(i), Bytes::from_static(b"x"), true);
            assert_eq!(ev, 0);
            stamps.push(s.expect("evictable"));
        }
        // Script 0 is used again: script 1 is now the oldest.
        c.touch(&stamps[0]);
        let (_, ev) = c.insert(&sha(EVAL_SCRIPTS_MAX), Bytes::from_static(b"x"), true);
        assert_eq!(ev, 1);
        assert!(c.contains(&sha(0)) && !c.contains(&sha(1)));
        assert!(c.contains("loaded"), "SCRIPT LOAD's scripts stay");
        assert_eq!(c.evictions(), 1);
        assert_eq!(c.usage().0, EVAL_SCRIPTS_MAX + 1);
        // A second add of a cached script changes nothing.
        assert_eq!(c.insert(&sha(0), Bytes::new(), true).1, 0);
        let mut m: HashMap<String, ()> = [(sha(1), ()), (sha(2), ())].into_iter().collect();
        c.retain_cached(&mut m);
        assert_eq!(m.into_keys().collect::<Vec<_>>(), [sha(2)]);
    }
}
