//! Choosing keys to evict under `maxmemory` (Redis evict.c): the policies, the sampled
//! eviction pool, and the removal of a chosen key through the same path as DEL.
//!
//! The loop that decides how much to free, the time limit and the statistics live with the
//! command layer (`cmd::refusals`); this holds what needs the shards.
//!
//! Incremental by construction: one round samples `maxmemory-samples` keys from one shard
//! of each database that has keys, so a call's work is bounded by the caller's loop and
//! no pass ever walks a whole database.

use super::keyspace::{Keyspace, SHARDS};
use crate::types::value::Entry;
use bytes::Bytes;
use std::sync::atomic::Ordering;

/// `maxmemory-policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    NoEviction,
    AllkeysLru,
    AllkeysLfu,
    AllkeysRandom,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
}

impl Policy {
    pub fn parse(name: &str) -> Option<Policy> {
        Some(match name {
            "noeviction" => Policy::NoEviction,
            "allkeys-lru" => Policy::AllkeysLru,
            "allkeys-lfu" => Policy::AllkeysLfu,
            "allkeys-random" => Policy::AllkeysRandom,
            "volatile-lru" => Policy::VolatileLru,
            "volatile-lfu" => Policy::VolatileLfu,
            "volatile-random" => Policy::VolatileRandom,
            "volatile-ttl" => Policy::VolatileTtl,
            _ => return None,
        })
    }

    /// Only keys with a deadline are candidates (Redis samples the `expires` dict).
    pub fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }

    pub fn lfu(self) -> bool {
        matches!(self, Policy::AllkeysLfu | Policy::VolatileLfu)
    }

    /// Chosen through the pool of best candidates (the others pick a random key).
    pub fn pooled(self) -> bool {
        !matches!(
            self,
            Policy::NoEviction | Policy::AllkeysRandom | Policy::VolatileRandom
        )
    }
}

/// Redis `evictionTimeProc` / `isEvictionProcRunning`: when a call runs out of its time
/// budget still over `maxmemory`, eviction goes on from a background task (the server's,
/// woken through `wake`) until memory is under the limit or nothing is left to evict.
/// While it runs, a command finding memory still over the limit is let through
/// (`EVICT_RUNNING`), not refused.
#[derive(Default)]
pub struct EvictionTimer {
    running: std::sync::atomic::AtomicBool,
    wake: tokio::sync::Notify,
}

impl EvictionTimer {
    /// Redis `startEvictionTimeProc`: wakes the task unless it already runs.
    pub fn start(&self) {
        if !self.running.swap(true, Ordering::AcqRel) {
            self.wake.notify_one();
        }
    }

    pub fn running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// The task's cycle ended (memory under the limit, or nothing to evict).
    pub fn stop(&self) {
        self.running.store(false, Ordering::Release);
    }

    /// Waits for the next [`EvictionTimer::start`].
    pub async fn started(&self) {
        self.wake.notified().await
    }
}

/// Redis `EVPOOL_SIZE`.
pub const POOL_SIZE: usize = 16;

struct Candidate {
    /// Higher is a better candidate: idle seconds (LRU), 255 - counter (LFU), or
    /// `u64::MAX - deadline` (TTL).
    score: u64,
    db: usize,
    key: Bytes,
}

/// How often the per-database key counts that steer sampling are refreshed (real time: a
/// test's frozen clock must not freeze them).
const COUNTS_MAX_AGE: std::time::Duration = std::time::Duration::from_millis(100);

/// What eviction keeps between calls: the pool (Redis keeps it across calls too, its
/// entries re-checked when used), the random policies' next database, the databases that
/// had keys when last counted, and a random stream.
pub struct Evictor {
    /// Ascending by score: the best candidate is last.
    pool: Vec<Candidate>,
    next_db: usize,
    /// (keys, keys with a deadline) per database, as of `counted_at`.
    counts: Vec<(usize, usize)>,
    counted_at: Option<std::time::Instant>,
    /// The policy the pool's scores were computed for.
    scored_for: Option<Policy>,
    rng: u64,
    /// `lazyfree-lazy-eviction`: evicted values go to the lazyfree thread (the caller
    /// sets it from the config before each eviction run).
    pub lazy: bool,
}

impl Evictor {
    pub fn new(seed: u64) -> Evictor {
        Evictor {
            pool: Vec::with_capacity(POOL_SIZE),
            next_db: 0,
            counts: Vec::new(),
            counted_at: None,
            scored_for: None,
            rng: seed | 1,
            lazy: false,
        }
    }

    pub fn reseed(&mut self, seed: u64) {
        self.rng = seed | 1;
        self.pool.clear();
    }

    fn next(&mut self) -> u64 {
        // xorshift64*: cheap and good enough to pick sample positions.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Redis `evictionPoolPopulate`'s insertion: keep the `POOL_SIZE` best, dropping the
    /// worst when full; a key already pooled is updated rather than pooled twice.
    fn offer(&mut self, score: u64, db: usize, key: &[u8]) {
        if let Some(i) = self.pool.iter().position(|c| c.db == db && c.key == key) {
            self.pool.remove(i);
        }
        let full = self.pool.len() == POOL_SIZE;
        if full && self.pool[0].score >= score {
            return;
        }
        let k = self.pool.partition_point(|c| c.score < score);
        self.pool.insert(
            k,
            Candidate {
                score,
                db,
                key: Bytes::copy_from_slice(key),
            },
        );
        if self.pool.len() > POOL_SIZE {
            self.pool.remove(0);
        }
    }

    /// Pool entries left (tests).
    pub fn pooled(&self) -> usize {
        self.pool.len()
    }
}

/// A key eviction removed.
pub struct Evicted {
    pub db: usize,
    pub key: Bytes,
    /// Blocked clients to wake (an evicted stream fails its XREADGROUP readers).
    pub ready: Vec<(usize, Bytes)>,
    /// The removed value's estimated size (used when live bytes are not counted).
    pub approx_bytes: usize,
}

/// The score of `e` under `policy` (higher: evict sooner).
fn score(policy: Policy, e: &Entry, now: u64, decay_min: u32) -> u64 {
    match policy {
        Policy::VolatileTtl => u64::MAX - e.expire_at().unwrap_or(u64::MAX),
        p if p.lfu() => 255 - u64::from(e.lfu_counter(now, decay_min)),
        _ => e.idle_secs(now),
    }
}

/// Why no key was evicted.
#[derive(Debug, PartialEq, Eq)]
pub enum NoKey {
    /// Nothing the policy may evict (Redis then answers OOM).
    Nothing,
    /// The keyspace is held exclusively (a script, EXEC) or another thread is evicting:
    /// try again later, never wait.
    Busy,
}

impl Keyspace {
    /// Per-database (keys, keys with a deadline), refreshed when older than
    /// `COUNTS_MAX_AGE` or when `fresh`: which databases sampling should visit.
    fn refresh_counts(&self, ev: &mut Evictor, fresh: bool) -> Result<(), NoKey> {
        let stale = ev
            .counted_at
            .is_none_or(|t| fresh || t.elapsed() >= COUNTS_MAX_AGE);
        if !stale {
            return Ok(());
        }
        let _g = self.try_gate().ok_or(NoKey::Busy)?;
        ev.counts = (0..self.databases())
            .map(|db| {
                self.shards_of(db).iter().fold((0, 0), |(k, e), s| {
                    let s = s.lock();
                    (k + s.len(), e + s.expires_len())
                })
            })
            .collect();
        ev.counted_at = Some(std::time::Instant::now());
        Ok(())
    }

    /// Runs `f` on the first shard of `db`, from a random one on, holding candidates
    /// (any key, or a key with a deadline when `volatile`).
    fn with_random_shard<R>(
        &self,
        ev: &mut Evictor,
        db: usize,
        volatile: bool,
        mut f: impl FnMut(&mut Evictor, &super::Shard) -> R,
    ) -> Option<R> {
        let start = (ev.next() as usize) % SHARDS;
        for i in 0..SHARDS {
            let sh = self.shards_of(db)[(start + i) % SHARDS].lock();
            let n = if volatile { sh.expires_len() } else { sh.len() };
            if n > 0 {
                return Some(f(ev, &sh));
            }
        }
        None
    }

    /// Picks and removes one key under `policy` (`samples` per database per round, as
    /// `maxmemory-samples`). Never blocks on the gate.
    pub fn evict_one(
        &self,
        ev: &mut Evictor,
        policy: Policy,
        samples: usize,
        decay_min: u32,
        now: u64,
    ) -> Result<Evicted, NoKey> {
        if policy == Policy::NoEviction {
            return Err(NoKey::Nothing);
        }
        let volatile = policy.volatile();
        if ev.scored_for != Some(policy) {
            // Scores of another policy do not compare with this one's.
            ev.pool.clear();
            ev.scored_for = Some(policy);
        }
        self.refresh_counts(ev, false)?;
        // A round that finds no candidate recounts once before giving up: the counts may
        // be up to `COUNTS_MAX_AGE` old.
        let mut recounted = false;
        // Pool entries may be ghosts (deleted or persisted since): bounded retries.
        for _ in 0..64 {
            let pick = if policy.pooled() {
                self.pool_round(ev, policy, samples, decay_min, now)?
            } else {
                self.random_pick(ev, volatile)?
            };
            let Some((db, key)) = pick else {
                if recounted {
                    return Err(NoKey::Nothing);
                }
                self.refresh_counts(ev, true)?;
                recounted = true;
                continue;
            };
            if let Some(done) = self.remove_evicted(db, key, volatile, ev.lazy, now)? {
                return Ok(done);
            }
        }
        Err(NoKey::Busy)
    }

    /// One `evictionPoolPopulate` over every database with candidates, then the best
    /// pooled key (removed from the pool). `None`: no database has candidates.
    fn pool_round(
        &self,
        ev: &mut Evictor,
        policy: Policy,
        samples: usize,
        decay_min: u32,
        now: u64,
    ) -> Result<Option<(usize, Bytes)>, NoKey> {
        let soonest = policy == Policy::VolatileTtl;
        let _g = self.try_gate().ok_or(NoKey::Busy)?;
        let mut any = false;
        for db in 0..self.databases() {
            let seen = self.sample_db(ev, db, samples, policy.volatile(), soonest, |e| {
                score(policy, e, now, decay_min)
            });
            if let Some(seen) = seen {
                any = true;
                for (s, k) in seen {
                    ev.offer(s, db, &k);
                }
            }
        }
        if !any && ev.pool.is_empty() {
            return Ok(None);
        }
        Ok(ev.pool.pop().map(|c| (c.db, c.key)))
    }

    /// The random policies: a random candidate of the next database that has one.
    fn random_pick(
        &self,
        ev: &mut Evictor,
        volatile: bool,
    ) -> Result<Option<(usize, Bytes)>, NoKey> {
        let _g = self.try_gate().ok_or(NoKey::Busy)?;
        let dbs = self.databases();
        for _ in 0..dbs {
            ev.next_db = (ev.next_db + 1) % dbs;
            let db = ev.next_db;
            if let Some((_, k)) = self
                .sample_db(ev, db, 1, volatile, false, |_| 0)
                .and_then(|mut seen| seen.pop())
            {
                return Ok(Some((db, k)));
            }
        }
        Ok(None)
    }

    /// The one sampling step both pickers share: `n` candidates (scored by `score`) of a
    /// random shard of `db` that has some; `None` when the counts or the shards show none.
    /// The caller holds the gate.
    fn sample_db(
        &self,
        ev: &mut Evictor,
        db: usize,
        n: usize,
        volatile: bool,
        soonest: bool,
        score: impl Fn(&Entry) -> u64,
    ) -> Option<smallvec::SmallVec<[(u64, Bytes); 8]>> {
        let (keys, expires) = ev.counts.get(db).copied().unwrap_or((0, 0));
        if (if volatile { expires } else { keys }) == 0 {
            return None;
        }
        self.with_random_shard(ev, db, volatile, |ev, sh| {
            let mut seen = smallvec::SmallVec::new();
            let mut rng = || ev.next();
            sh.sample(n, volatile, soonest, &mut rng, &mut |k, e| {
                seen.push((score(e), Bytes::copy_from_slice(k)))
            });
            seen
        })
    }

    /// Deletes a chosen key as DEL would (WATCH dirtied, blocked stream readers woken, a
    /// `Del` journaled on the durable engine); `None` for a ghost: gone, or (volatile
    /// policies) no longer carrying a deadline.
    fn remove_evicted(
        &self,
        db: usize,
        key: Bytes,
        volatile: bool,
        lazy: bool,
        now: u64,
    ) -> Result<Option<Evicted>, NoKey> {
        let g = self.try_gate().ok_or(NoKey::Busy)?;
        let mut a = self.shared_gated(g, db, &key, now);
        let candidate = a
            .get_in(db, &key)
            .is_some_and(|e| !volatile || e.expire_at().is_some());
        if !candidate {
            return Ok(None);
        }
        let Some(gone) = a.remove_in(db, &key) else {
            return Ok(None);
        };
        let approx_bytes = gone.value.approx_size() + key.len() + std::mem::size_of::<Entry>();
        let ready = a.take_ready();
        drop(a);
        // Freed after the shard lock is released, either way.
        if lazy {
            self.lazyfree.free_entry(gone);
        } else {
            drop(gone);
        }
        self.stats.evicted.fetch_add(1, Ordering::Relaxed);
        Ok(Some(Evicted {
            db,
            key,
            ready,
            approx_bytes,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::value::{StrVal, Value};

    fn v() -> Value {
        Value::Str(StrVal::from_set_slice(b"some value"))
    }

    #[test]
    fn pool_keeps_the_best_sixteen_in_order() {
        let mut ev = Evictor::new(7);
        for i in 0..100u64 {
            ev.offer((i * 37) % 101, 0, format!("k{i}").as_bytes());
        }
        assert_eq!(ev.pooled(), POOL_SIZE);
        let scores: Vec<u64> = ev.pool.iter().map(|c| c.score).collect();
        let mut sorted = scores.clone();
        sorted.sort();
        assert_eq!(scores, sorted);
        // The 16 best of the scores offered.
        let mut all: Vec<u64> = (0..100u64).map(|i| (i * 37) % 101).collect();
        all.sort();
        assert_eq!(scores, all[all.len() - POOL_SIZE..]);
        // Re-offering a pooled key does not duplicate it.
        let best = ev.pool.last().map(|c| c.key.clone()).unwrap();
        ev.offer(1000, 0, &best);
        assert_eq!(ev.pool.iter().filter(|c| c.key == best).count(), 1);
    }

    #[test]
    fn volatile_policies_evict_only_keys_with_a_deadline() {
        let ks = Keyspace::new(2);
        {
            let mut a = ks.exclusive(0, 0);
            for i in 0..200 {
                a.set_in(i % 2, format!("p{i}").as_bytes(), v(), None);
            }
            for i in 0..20 {
                a.set_in(1, format!("t{i}").as_bytes(), v(), Some(1_000_000 + i));
            }
        }
        for policy in [
            Policy::VolatileLru,
            Policy::VolatileLfu,
            Policy::VolatileRandom,
            Policy::VolatileTtl,
        ] {
            let mut ev = Evictor::new(3);
            let e = ks
                .evict_one(&mut ev, policy, 5, 1, 0)
                .expect("a volatile key");
            assert_eq!(e.db, 1);
            assert!(e.key.starts_with(b"t"), "{policy:?} evicted {:?}", e.key);
        }
        let mut ev = Evictor::new(3);
        let mut n = 4;
        while ks
            .evict_one(&mut ev, Policy::VolatileRandom, 5, 1, 0)
            .is_ok()
        {
            n += 1;
        }
        assert_eq!(n, 20);
        assert_eq!(ks.db_counts(0), (100, 0));
        assert_eq!(ks.db_counts(1), (100, 0));
        assert_eq!(
            ks.evict_one(&mut ev, Policy::VolatileTtl, 5, 1, 0).err(),
            Some(NoKey::Nothing)
        );
        assert_eq!(ks.stats.evicted.load(Ordering::Relaxed), 20);
    }

    #[test]
    fn volatile_ttl_takes_the_nearest_deadlines_first() {
        let ks = Keyspace::new(1);
        {
            let mut a = ks.exclusive(0, 0);
            for i in 0..500u64 {
                a.set(format!("k{i}").as_bytes(), v(), Some(10_000 + i * 10));
            }
        }
        let mut ev = Evictor::new(11);
        let mut got = Vec::new();
        for _ in 0..50 {
            let e = ks
                .evict_one(&mut ev, Policy::VolatileTtl, 5, 1, 0)
                .expect("key");
            let n: u64 = std::str::from_utf8(&e.key[1..]).unwrap().parse().unwrap();
            got.push(n);
        }
        // Each round pools the nearest deadlines of a 5-key sample, so a pick is only as
        // good as the pool: the very first ones may come from an unlucky sample (all 5
        // in the later half: 1 in 32). Over 400 seeds, at least 49 of the 50 picks were in
        // the soonest half and the median pick in the soonest seventh; with no ordering by
        // TTL, about 25 would be and the median would be near 250.
        let soon = got.iter().filter(|&&n| n < 250).count();
        let mut sorted = got.clone();
        sorted.sort_unstable();
        assert!(soon >= 45, "{got:?}");
        assert!(sorted[25] < 125, "{got:?}");
    }

    #[test]
    fn lru_prefers_idle_keys() {
        let ks = Keyspace::new(1);
        {
            let mut a = ks.exclusive(0, 0);
            for i in 0..1000 {
                a.set(format!("old{i}").as_bytes(), v(), None);
            }
            a.now = 100_000;
            for i in 0..1000 {
                a.set(format!("new{i}").as_bytes(), v(), None);
            }
        }
        let mut ev = Evictor::new(5);
        let mut old = 0;
        for _ in 0..200 {
            let e = ks
                .evict_one(&mut ev, Policy::AllkeysLru, 5, 1, 100_000)
                .expect("key");
            old += usize::from(e.key.starts_with(b"old"));
        }
        // With 5 samples a round and a pool of 16, an idle key wins nearly always; a
        // uniform pick would get about 100.
        assert!(old >= 190, "{old} of 200 were idle keys");
    }

    #[test]
    fn noeviction_and_empty_keyspace_have_nothing() {
        let ks = Keyspace::new(1);
        let mut ev = Evictor::new(1);
        assert_eq!(
            ks.evict_one(&mut ev, Policy::AllkeysLru, 5, 1, 0).err(),
            Some(NoKey::Nothing)
        );
        ks.exclusive(0, 0).set(b"k", v(), None);
        assert_eq!(
            ks.evict_one(&mut ev, Policy::NoEviction, 5, 1, 0).err(),
            Some(NoKey::Nothing)
        );
        // A fresh key is found even with counts taken before it existed.
        let e = ks
            .evict_one(&mut ev, Policy::AllkeysRandom, 5, 1, 0)
            .expect("k");
        assert_eq!(&e.key[..], b"k");
        assert_eq!(ks.dbsize(0), 0);
    }
}
