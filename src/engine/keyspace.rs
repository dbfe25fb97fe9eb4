//! Databases, shard selection and the per-command [`Access`] view.

use super::change::Change;
use super::evict::Evictor;
use super::journal::Journal;
use super::shard::{key_hash, prefetch_read, KeyHook, Shard, WatchFlag};
use crate::background::lazyfree::{free_effort, LAZYFREE_THRESHOLD};
use crate::types::placement::hash_tag;
use crate::types::value::{Entry, Lfu, Value, LFU_INIT_VAL};
use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use smallvec::SmallVec;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Shards per database (a power of two).
pub const SHARDS: usize = 64;
/// SCAN walks each shard in the order of a 32-bit hash of its keys
/// ([`scan_pos`](super::shard::scan_pos)); the cursor is `shard << SCAN_POS_BITS | position`, so a call can stop after any key.
pub const SCAN_POS_BITS: u32 = 32;
/// How long a command waits on a held gate before asking whether to keep waiting.
const GATE_POLL: std::time::Duration = std::time::Duration::from_millis(2);

#[derive(Default)]
pub struct KeyspaceStats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub expired: AtomicU64,
    /// Hash fields removed because their deadline passed (INFO `expired_subkeys`).
    pub expired_subkeys: AtomicU64,
    /// Keys removed by `maxmemory` eviction (INFO `evicted_keys`).
    pub evicted: AtomicU64,
    /// Microseconds spent over `maxmemory` in finished episodes (INFO
    /// `total_eviction_exceeded_time`), and when the current one began (process-monotonic
    /// microseconds + 1; 0 while under the limit).
    pub eviction_exceeded_total_us: AtomicU64,
    pub eviction_exceeded_since_us: AtomicU64,
    /// Whether the last command's eviction check ended out of memory (Redis
    /// `pre_command_oom_state`, which scripts consult rather than evicting themselves).
    pub oom_before_command: std::sync::atomic::AtomicBool,
}

pub struct Keyspace {
    gate: RwLock<()>,
    dbs: Box<[Box<[Mutex<Shard>]>]>,
    pub stats: KeyspaceStats,
    /// Number of clients blocked on keys (kept by the blocking registry); while zero,
    /// `Access::signal_ready` costs one atomic load.
    pub blocked_clients: std::sync::atomic::AtomicUsize,
    /// Told of every key removed because its deadline passed (see [`ExpiryListener`]).
    expiry_listener: OnceLock<ExpiryListener>,
    /// Told of hash fields removed by the active cycle (see [`FieldExpiryListener`]).
    field_expiry_listener: OnceLock<FieldExpiryListener>,
    /// Told of every modified key while on (client-side caching), by every shard.
    pub key_hook: Arc<KeyHook>,
    /// Set when the keyspace is durable: every write appends its changes here.
    journal: OnceLock<Arc<Journal>>,
    /// 0 under LRU policies; under LFU ones `1 << 63 | decay_min << 32 | log_factor`, so
    /// an access reads the policy with one relaxed load ([`Keyspace::set_lfu`]).
    lfu: AtomicU64,
    /// Eviction's state between calls (pool, counts); `try_lock`ed, so one thread evicts
    /// at a time and the others carry on.
    pub evictor: Mutex<Evictor>,
    /// Redis's `evictionTimeProc`: eviction carried on between commands.
    pub eviction_timer: super::evict::EvictionTimer,
    /// Live heap bytes when the keyspace was made (Redis `used_memory_startup`); 0 when the
    /// counting allocator is not installed.
    pub startup_memory: u64,
    /// Where detached values and databases are dropped off the command path (UNLINK,
    /// FLUSHDB ASYNC, the `lazyfree-lazy-*` settings), with INFO's counts.
    pub lazyfree: crate::background::lazyfree::LazyFree,
}

const LFU_ON: u64 = 1 << 63;

/// A uniform draw in [0, 1) for LFU's logarithmic increment (Redis uses `rand()`): a
/// per-thread xorshift, no lock, no shared state.
fn lfu_rand() -> f64 {
    thread_local! {
        static STATE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    STATE.with(|st| {
        let mut x = st.get();
        if x == 0 {
            x = rand::random::<u64>() | 1;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        st.set(x);
        (x >> 11) as f64 / (1u64 << 53) as f64
    })
}

/// Called with `(db, key)` for each key removed because its deadline passed, by lazy expiry
/// and by the active sweep alike, while the key's shard is still locked (so it sees removals
/// in the order they happen). Set once at start-up; the server publishes keyspace
/// notifications through it. It must not touch the keyspace.
pub type ExpiryListener = Box<dyn Fn(usize, &[u8]) + Send + Sync>;

/// Called with `(db, key, key_deleted)` after the active cycle removed expired fields of the
/// hash at `key` (and the key itself when `key_deleted`), under the shard's lock: the
/// server publishes `hexpired` (and `del`) through it. It must not touch the keyspace.
pub type FieldExpiryListener = Box<dyn Fn(usize, &[u8], bool) + Send + Sync>;

/// The shard of a key: from the [`key_hash`] of its hash tag (DESIGN.md §8's tag rule, so
/// keys sharing a tag share a shard). A key without a tag (most) is its own tag, so the
/// one hash picks its shard and finds it in the shard's index ([`Access`] keeps it for
/// the command's key). ahash reads 8 bytes a step where the FNV-1a used before took one
/// (~150 instructions of a 16-byte key's request). The seed is per process, as Redis's:
/// SCAN and KEYS order differ from run to run.
#[inline]
pub fn shard_of(key: &[u8]) -> usize {
    let tag = if has_brace(key) { hash_tag(key) } else { key };
    shard_bits(key_hash(tag))
}

/// The shard for a tag's hash: bits the shard's index does not use (it takes the low bits
/// for the bucket, the top 7 for the control byte), so keys of one shard still spread
/// over its whole table.
#[inline]
fn shard_bits(h: u64) -> usize {
    ((h >> 32) as usize) & (SHARDS - 1)
}

/// Whether `key` holds a `{` (most keys have no hash tag), 8 bytes per step.
#[inline]
fn has_brace(key: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    const BRACES: u64 = u64::from_ne_bytes([b'{'; 8]);
    // A zero byte of `x ^ BRACES` is a `{`: the classic "has zero byte" test.
    let zero_byte = |w: u64| {
        let x = w ^ BRACES;
        x.wrapping_sub(ONES) & !x & HIGHS != 0
    };
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        if zero_byte(u64::from_ne_bytes(c.try_into().expect("8 bytes"))) {
            return true;
        }
    }
    let rest = chunks.remainder();
    let mut last = [0u8; 8];
    last[..rest.len()].copy_from_slice(rest);
    zero_byte(u64::from_ne_bytes(last))
}

impl Keyspace {
    pub fn new(databases: usize) -> Keyspace {
        let key_hook = Arc::new(KeyHook::default());
        let dbs = (0..databases)
            .map(|_| {
                (0..SHARDS)
                    .map(|_| Mutex::new(Shard::with_hook(key_hook.clone())))
                    .collect()
            })
            .collect();
        Keyspace {
            gate: RwLock::new(()),
            dbs,
            stats: KeyspaceStats::default(),
            blocked_clients: std::sync::atomic::AtomicUsize::new(0),
            expiry_listener: OnceLock::new(),
            field_expiry_listener: OnceLock::new(),
            key_hook,
            journal: OnceLock::new(),
            lfu: AtomicU64::new(0),
            evictor: Mutex::new(Evictor::new(rand::random())),
            eviction_timer: Default::default(),
            startup_memory: crate::alloc::used().unwrap_or(0),
            lazyfree: Default::default(),
        }
    }

    /// Switches access tracking between LRU (`None`) and LFU with its parameters (the
    /// `maxmemory-policy`, `lfu-log-factor` and `lfu-decay-time` settings).
    pub fn set_lfu(&self, lfu: Option<Lfu>) {
        let v = lfu.map_or(0, |l| {
            LFU_ON | (u64::from(l.decay_min.min(i32::MAX as u32)) << 32) | u64::from(l.log_factor)
        });
        self.lfu.store(v, Ordering::Relaxed);
    }

    pub fn lfu(&self) -> Option<Lfu> {
        let v = self.lfu.load(Ordering::Relaxed);
        (v != 0).then_some(Lfu {
            log_factor: v as u32,
            decay_min: ((v >> 32) as u32) & (i32::MAX as u32),
        })
    }

    /// Records an access to `e` under the current policy (Redis `lookupKey`'s LRU or
    /// `updateLFU`).
    #[inline]
    fn touch(&self, e: &mut Entry, now: u64) {
        if self.lfu.load(Ordering::Relaxed) == 0 {
            e.touch(now);
        } else if let Some(l) = self.lfu() {
            e.touch_lfu(now, l, lfu_rand());
        }
    }

    /// A new or replaced entry's access data under LFU (Redis: a new object starts at
    /// `LFU_INIT_VAL`; a replaced one's counter carries over, `dbSetValue`, counting the
    /// access the writing command's `lookupKeyWrite` made, which plain SET skips here). LRU
    /// needs nothing: the entry was stamped with `now`, as that lookup would have.
    #[inline]
    fn stamp_new(&self, sh: &mut Shard, key: &[u8], old: Option<&Entry>, now: u64) {
        let Some(lfu) = self.lfu() else {
            return;
        };
        if let Some(e) = sh.peek_mut(key) {
            match old {
                Some(o) => {
                    e.set_lru_raw(o.lru_raw());
                    e.touch_lfu(now, lfu, lfu_rand());
                }
                None => e.lfu_init(now, LFU_INIT_VAL),
            }
        }
    }

    /// The gate, shared, if no exclusive holder has it (eviction never waits).
    pub(super) fn try_gate(&self) -> Option<RwLockReadGuard<'_, ()>> {
        self.gate.try_read()
    }

    pub(super) fn shards_of(&self, db: usize) -> &[Mutex<Shard>] {
        &self.dbs[db]
    }

    /// A one-key view under a gate guard the caller already took.
    pub(super) fn shared_gated<'a>(
        &'a self,
        g: RwLockReadGuard<'a, ()>,
        db: usize,
        key: &'a [u8],
        now: u64,
    ) -> Access<'a> {
        self.shared_with(Gate::Shared(g), db, &[key], now)
    }

    /// Makes the keyspace durable: from now on every write appends its changes to `j`.
    pub fn set_journal(&self, j: Arc<Journal>) -> bool {
        self.journal.set(j).is_ok()
    }

    pub fn journal(&self) -> Option<&Arc<Journal>> {
        self.journal.get()
    }

    /// Installs the expiry listener; false (and `f` dropped) if one is already set.
    pub fn set_expiry_listener(&self, f: ExpiryListener) -> bool {
        self.expiry_listener.set(f).is_ok()
    }

    /// Installs the field expiry listener; false (and `f` dropped) if one is already set.
    pub fn set_field_expiry_listener(&self, f: FieldExpiryListener) -> bool {
        self.field_expiry_listener.set(f).is_ok()
    }

    #[inline]
    fn expired(&self, db: usize, key: &[u8]) {
        if let Some(f) = self.expiry_listener.get() {
            f(db, key);
        }
    }

    pub fn databases(&self) -> usize {
        self.dbs.len()
    }

    /// Moves every database's contents out of `other` (left empty) into this keyspace,
    /// whose own contents go to `other`: a test server's restart keeping its data. Neither
    /// keyspace may be in use (no journal records it; nobody watches `other` any more).
    pub fn take_contents(&self, other: &Keyspace) {
        for (mine, theirs) in self.dbs.iter().zip(other.dbs.iter()) {
            for (a, b) in mine.iter().zip(theirs.iter()) {
                a.lock().swap_data(&mut b.lock());
            }
        }
    }

    /// Where `key` lives, worked out once for the [`Keyspace::prefetch`] stages.
    #[inline]
    pub fn key_hint(key: &[u8]) -> KeyHint {
        let h = key_hash(key);
        let shard = if has_brace(key) {
            shard_of(key)
        } else {
            shard_bits(h)
        };
        KeyHint { shard, h }
    }

    /// One step of fetching, ahead of time, what a command on the hinted key in `db` will
    /// read: the dependent cache misses of its lookup (shard, index line, slot, value,
    /// member)
    /// overlap with the commands that run before it instead of stalling it one after
    /// another. Stage 5 (run five commands ahead) fetches the shard's lock and header,
    /// stage 4 its index line, stage 3 the slot that line points to, stage 2 the value's
    /// bytes or header, stage 1 where `member` (the command's third argument) would be in
    /// a big set or hash; 4 to 1 read the shard only if its lock is free at once (never
    /// waiting, never holding it past the prefetch). Only hints: nothing is read that the
    /// command does not read again under its own lock.
    #[inline]
    pub fn prefetch(&self, db: usize, hint: KeyHint, stage: u8, member: Option<&[u8]>) {
        let Some(m) = self.dbs.get(db).map(|d| &d[hint.shard]) else {
            return;
        };
        if stage >= 5 {
            prefetch_read(m);
        } else if stage == 1 && member.is_none() {
            // Nothing past the value to fetch for a command without a member.
        } else if let Some(sh) = m.try_lock() {
            match stage {
                4 => sh.prefetch_bucket(hint.h),
                3 => sh.prefetch_slot(hint.h),
                2 => sh.prefetch_value(hint.h),
                _ => sh.prefetch_member(hint.h, member.unwrap_or_default()),
            }
        }
    }

    /// Shared access for a command on `db` touching `keys`: their shards are locked in
    /// ascending order (deadlock-free), nothing else is.
    pub fn shared<'a>(&'a self, db: usize, keys: &[&'a [u8]], now: u64) -> Access<'a> {
        self.shared_with(Gate::Shared(self.gate.read()), db, keys, now)
    }

    /// As [`Keyspace::shared`], but while an exclusive holder keeps the gate, `waiting` is
    /// asked every few milliseconds whether to keep waiting; `None` once it says no. A
    /// command queued behind a runaway script must get to answer BUSY, not park forever.
    pub fn shared_or_give_up<'a>(
        &'a self,
        db: usize,
        keys: &[&'a [u8]],
        now: u64,
        mut waiting: impl FnMut() -> bool,
    ) -> Option<Access<'a>> {
        loop {
            if let Some(g) = self.gate.try_read_for(GATE_POLL) {
                return Some(self.shared_with(Gate::Shared(g), db, keys, now));
            }
            if !waiting() {
                return None;
            }
        }
    }

    /// As [`Keyspace::exclusive`], giving up like [`Keyspace::shared_or_give_up`].
    pub fn exclusive_or_give_up(
        &self,
        db: usize,
        now: u64,
        mut waiting: impl FnMut() -> bool,
    ) -> Option<Access<'_>> {
        loop {
            if let Some(g) = self.gate.try_write_for(GATE_POLL) {
                return Some(self.exclusive_with(Gate::Exclusive(g), db, now));
            }
            if !waiting() {
                return None;
            }
        }
    }

    fn shared_with<'a>(
        &'a self,
        gate: Gate<'a>,
        db: usize,
        keys: &[&'a [u8]],
        now: u64,
    ) -> Access<'a> {
        let mut hashed = None;
        let locked: SmallVec<[_; 2]> = if let [key] = keys {
            // The common single-key command: no index vector, and the key's hash is kept
            // for its lookups.
            let h = key_hash(key);
            hashed = Some((*key, h));
            let s = if has_brace(key) {
                shard_of(key)
            } else {
                shard_bits(h)
            };
            smallvec::smallvec![(db * SHARDS + s, self.dbs[db][s].lock())]
        } else {
            let mut idx: SmallVec<[usize; 8]> = keys.iter().map(|k| shard_of(k)).collect();
            idx.sort_unstable();
            idx.dedup();
            idx.into_iter()
                .map(|s| (db * SHARDS + s, self.dbs[db][s].lock()))
                .collect()
        };
        let single = if locked.len() == 1 { db } else { usize::MAX };
        Access {
            ks: self,
            _gate: gate,
            locked,
            single,
            hashed,
            ready: Vec::new(),
            db,
            now,
            exclusive: false,
            dirty: SmallVec::new(),
            changes: SmallVec::new(),
            quiet: false,
            unobserved: false,
            no_touch: false,
            garbage: Garbage::default(),
        }
    }

    /// A view holding neither the gate nor a shard, for a keyless command served while a
    /// script holds the keyspace (AUTH, HELLO, MULTI, SHUTDOWN… during BUSY). Its handler
    /// must not reach a shard: that would wait for the script's shard locks.
    pub fn ungated(&self, db: usize, now: u64) -> Access<'_> {
        // Non-exclusive with no shard locked: debug builds assert if a shard is reached.
        self.shared_with(Gate::None, db, &[], now)
    }

    /// Drops one WATCH registration without the gate, if the key's shard is free: a script
    /// holding the keyspace keeps the shards it touched locked until it ends. A
    /// registration is not data, so dropping it needs no exclusivity; false if the shard
    /// is held.
    pub fn try_unwatch(&self, db: usize, key: &[u8], flag: &WatchFlag) -> bool {
        match self.dbs[db][shard_of(key)].try_lock() {
            Some(mut sh) => {
                sh.unwatch(key, flag);
                true
            }
            None => false,
        }
    }

    /// Whether an exclusive holder (a script, EXEC…) has the keyspace right now.
    pub fn is_exclusively_held(&self) -> bool {
        self.gate.is_locked_exclusive()
    }

    /// Exclusive access to everything (EXEC, scripts, whole-keyspace commands).
    pub fn exclusive(&self, db: usize, now: u64) -> Access<'_> {
        self.exclusive_with(Gate::Exclusive(self.gate.write()), db, now)
    }

    fn exclusive_with<'a>(&'a self, gate: Gate<'a>, db: usize, now: u64) -> Access<'a> {
        Access {
            ks: self,
            _gate: gate,
            locked: SmallVec::new(),
            single: usize::MAX,
            hashed: None,
            ready: Vec::new(),
            db,
            now,
            exclusive: true,
            dirty: SmallVec::new(),
            changes: SmallVec::new(),
            quiet: false,
            unobserved: false,
            no_touch: false,
            garbage: Garbage::default(),
        }
    }

    /// Shared gate only; the caller visits shards one at a time (sweep, tests).
    ///
    /// This and `dbsize`/`db_counts` take the gate themselves: never call them while holding
    /// an `Access` (a recursive read of the gate deadlocks once a writer queues). Command
    /// handlers use `Access::visit_shard`, `Access::dbsize_in` and `Access::db_counts_in`.
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
        self.sweep_ready(now, per_shard).0
    }

    /// As `sweep`, also returning the expired streams that blocked clients may wait on
    /// (XREADGROUP readers are failed when their stream goes away): the caller serves them
    /// once it holds no lock.
    pub fn sweep_ready(&self, now: u64, per_shard: usize) -> (usize, Vec<(usize, Bytes)>) {
        let mut total = 0;
        let mut ready = Vec::new();
        let blocked = self.blocked_clients.load(Ordering::Relaxed) > 0;
        for db in 0..self.dbs.len() {
            for s in 0..SHARDS {
                // Never wait behind an exclusive holder (a long script, EXEC): a worker
                // parked here could leave no thread to answer BUSY or SCRIPT KILL.
                let Some(_g) = self.gate.try_read() else {
                    return (total, ready);
                };
                let mut sh = self.dbs[db][s].lock();
                let gone = sh.sweep_noting(now, per_shard, |k, e| {
                    if blocked && e.value.is_stream() {
                        ready.push((db, Bytes::copy_from_slice(k)));
                    }
                    self.lazyfree.free_expired(e);
                });
                for k in &gone {
                    sh.signal(k);
                    self.expired(db, k);
                }
                if let Some(j) = self.journal.get() {
                    if !gone.is_empty() {
                        j.append(gone.iter().map(|k| Change::Del { db, key: k.clone() }));
                    }
                }
                total += gone.len();
                self.sweep_fields(&mut sh, db, now, per_shard);
            }
        }
        self.stats
            .expired
            .fetch_add(total as u64, Ordering::Relaxed);
        (total, ready)
    }
}

impl Keyspace {
    /// The hash-field part of a shard's active expiry: removes due fields (at most `quota`),
    /// and a hash whose last field went; WATCH signalled, changes journaled, listener told.
    fn sweep_fields(&self, sh: &mut Shard, db: usize, now: u64, quota: usize) {
        let done = sh.sweep_fields(now, quota);
        if done.is_empty() {
            return;
        }
        let mut fields = 0;
        let journal = self.journal.get();
        let mut changes = Vec::new();
        for d in done {
            fields += d.fields.len();
            sh.signal(&d.key);
            let deleted = d.deleted.is_some();
            if let Some(f) = self.field_expiry_listener.get() {
                f(db, &d.key, deleted);
            }
            if let Some(e) = d.deleted {
                self.lazyfree.free_expired(e);
            }
            if journal.is_some() {
                changes.push(match deleted {
                    true => Change::Del { db, key: d.key },
                    false => Change::HashDel {
                        db,
                        key: d.key,
                        fields: d.fields,
                    },
                });
            }
        }
        if let Some(j) = journal {
            j.append(changes.into_iter());
        }
        self.stats
            .expired_subkeys
            .fetch_add(fields as u64, Ordering::Relaxed);
    }
}

/// A key's shard and hash, for [`Keyspace::prefetch`].
#[derive(Clone, Copy, Debug)]
pub struct KeyHint {
    shard: usize,
    h: u64,
}

enum Gate<'a> {
    Shared(#[allow(dead_code)] RwLockReadGuard<'a, ()>),
    Exclusive(#[allow(dead_code)] RwLockWriteGuard<'a, ()>),
    /// No gate at all (see [`Keyspace::ungated`]).
    None,
}

/// A command's view of the keyspace: the shards it locked, the current db and "now".
/// All reads apply lazy expiry; all writes signal WATCHers.
pub struct Access<'a> {
    ks: &'a Keyspace,
    _gate: Gate<'a>,
    /// Held shard guards, inline for the common one- or two-shard command.
    locked: SmallVec<[(usize, MutexGuard<'a, Shard>); 2]>,
    /// The db of the one shard a shared view holds, when it holds exactly one (every key
    /// the command touches is there: the locking rule); `usize::MAX` otherwise.
    single: usize,
    /// The key a one-key view was made for, with its [`key_hash`]: its lookups reuse it.
    /// (The borrow for `'a` means the same address and length are the same bytes.)
    hashed: Option<(&'a [u8], u64)>,
    /// Keys that received elements a blocked client may be waiting for (db, key).
    ready: Vec<(usize, Bytes)>,
    pub db: usize,
    pub now: u64,
    exclusive: bool,
    /// Durable keyspace only: keys this command wrote, turned into changes (their final
    /// state) when it ends, and the changes recorded so far, in order.
    /// Inline: most commands write one key.
    dirty: SmallVec<[(usize, Bytes); 1]>,
    changes: SmallVec<[Change; 1]>,
    /// Set by DEBUG RELOAD: what this access writes comes from the store itself.
    quiet: bool,
    /// Reads leave no trace: no keyspace hits/misses, no access-time update (a test
    /// server's inspection helpers).
    pub unobserved: bool,
    /// Lookups leave access times alone (`CLIENT NO-TOUCH ON`, except for TOUCH).
    pub no_touch: bool,
    /// Removed values to free once the locks are released ([`Access::drop_later`]).
    garbage: Garbage,
}

/// Values a command removed whose drop walks many allocations, kept until its locks are
/// released. Freeing a million-member set takes 5-25 ms; under its shard lock, every
/// command reaching that shard waited as long, and with it the other worker thread, so the
/// whole server stalled for the free (issue 17, `perf record` of scripts/bench_tail.sh).
#[derive(Default)]
pub struct Garbage {
    entries: Vec<Entry>,
    effort: usize,
}

impl Garbage {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The summed free effort of the values (the lazyfree thread's measure: elements).
    pub fn effort(&self) -> usize {
        self.effort
    }
}

impl Drop for Access<'_> {
    /// Appends the command's changes to the journal while its locks are still held (fields
    /// drop after this), so the journal's order is the order commands took effect in.
    /// Garbage nobody took is freed here, after the locks.
    fn drop(&mut self) {
        if !self.quiet {
            if let Some(j) = self.ks.journal.get() {
                self.materialize();
                if !self.changes.is_empty() {
                    j.append(self.changes.drain(..));
                }
            }
        }
        if !self.garbage.is_empty() {
            let garbage = std::mem::take(&mut self.garbage);
            self.locked.clear();
            self._gate = Gate::None;
            drop(garbage);
        }
    }
}

impl<'a> Access<'a> {
    /// Durable keyspace: notes that `key` in `db` was written.
    #[inline]
    fn mark_dirty(&mut self, db: usize, key: &[u8]) {
        if self.quiet || self.ks.journal.get().is_none() {
            return;
        }
        if !self.dirty.iter().any(|(d, k)| *d == db && k == key) {
            self.dirty.push((db, Bytes::copy_from_slice(key)));
        }
    }

    /// Turns the dirty keys into changes holding their current state.
    fn materialize(&mut self) {
        for (db, key) in std::mem::take(&mut self.dirty) {
            let change = self.state_of(db, key);
            self.changes.push(change);
        }
    }

    /// The change that stores `key`'s current state as a whole.
    fn state_of(&mut self, db: usize, key: Bytes) -> Change {
        let sh = self.shard_in(db, &key);
        match sh.peek(&key) {
            None => Change::Del { db, key },
            Some(e) => match &e.value {
                Value::Str(v) => Change::StrSet {
                    db,
                    key,
                    value: v.clone(),
                    expire_at: e.expire_at(),
                },
                other => Change::Put {
                    db,
                    key,
                    value: Box::new(other.clone()),
                    expire_at: e.expire_at(),
                },
            },
        }
    }

    /// Records a change that is not a key's final state (FLUSHDB, SWAPDB, a deadline, the
    /// FUNCTION libraries), after the keys written before it.
    pub fn record(&mut self, change: Change) {
        if self.quiet || self.ks.journal.get().is_none() {
            return;
        }
        self.materialize();
        self.changes.push(change);
    }

    pub fn is_exclusive(&self) -> bool {
        self.exclusive
    }

    /// Marks `key` (current db) as having new elements that blocked clients may take
    /// (Redis `signalKeyAsReady`): call after pushing to a list, adding to a zset, XADD…
    /// Waiters are served once this command's locks are released.
    #[inline]
    pub fn signal_ready(&mut self, key: &[u8]) {
        let db = self.db;
        self.signal_ready_in(db, key);
    }

    pub fn signal_ready_in(&mut self, db: usize, key: &[u8]) {
        if self.ks.blocked_clients.load(Ordering::Relaxed) == 0 {
            return;
        }
        if !self.ready.iter().any(|(d, k)| *d == db && k == key) {
            self.ready.push((db, Bytes::copy_from_slice(key)));
        }
    }

    /// The keys signalled ready so far (drained).
    #[inline]
    pub fn ready_is_empty(&self) -> bool {
        self.ready.is_empty()
    }

    pub fn take_ready(&mut self) -> Vec<(usize, Bytes)> {
        std::mem::take(&mut self.ready)
    }

    /// Frees `e`, a value this command removed from the keyspace, once the view's locks are
    /// released when dropping it is long (free effort past Redis's lazyfree threshold), at
    /// once otherwise. Still a synchronous free for the client (Redis's DEL): the command
    /// layer frees the garbage before it replies ([`Access::take_garbage`]).
    pub fn drop_later(&mut self, e: Entry) {
        let effort = free_effort(&e.value);
        if effort > LAZYFREE_THRESHOLD {
            self.garbage.entries.push(e);
            self.garbage.effort += effort;
        }
    }

    /// Whether [`Access::drop_later`] kept values to free after the locks.
    pub fn has_garbage(&self) -> bool {
        !self.garbage.is_empty()
    }

    /// The values [`Access::drop_later`] kept, for the caller to free after dropping the
    /// view (off the runtime's worker when they are big).
    pub fn take_garbage(&mut self) -> Garbage {
        std::mem::take(&mut self.garbage)
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
                self.single = usize::MAX;
                self.locked.len() - 1
            }
        };
        &mut self.locked[pos].1
    }

    /// Runs `f` on one shard of a db: the shard is used as held if the command locked it,
    /// otherwise locked just for `f`. Commands that visit shards one at a time (SCAN, DBSIZE)
    /// hold no other shard, so lock order cannot be violated; exclusive commands have the
    /// keyspace to themselves and avoid piling up hundreds of guards.
    pub fn visit_shard<R>(&mut self, db: usize, s: usize, f: impl FnOnce(&mut Shard) -> R) -> R {
        let id = db * SHARDS + s;
        if let Some(p) = self.locked.iter().position(|(i, _)| *i == id) {
            return f(&mut self.locked[p].1);
        }
        debug_assert!(
            self.exclusive || self.locked.is_empty(),
            "visiting a shard while holding others"
        );
        let mut guard = self.ks.dbs[db][s].lock();
        f(&mut guard)
    }

    #[inline]
    fn shard_in(&mut self, db: usize, key: &[u8]) -> &mut Shard {
        if self.single == db {
            // Shared mode holding one shard: every key this command may touch lives there
            // (the locking rule), so skip re-hashing the key on each access.
            debug_assert_eq!(
                self.locked[0].0 % SHARDS,
                shard_of(key),
                "key outside its lock"
            );
            return &mut self.locked[0].1;
        }
        self.shard_in_other(db, key)
    }

    #[inline(never)]
    fn shard_in_other(&mut self, db: usize, key: &[u8]) -> &mut Shard {
        self.shard_at(db, shard_of(key))
    }

    /// `key`'s [`key_hash`]: the one computed for the view's own key, else computed now.
    #[inline]
    fn hash_of(&self, key: &[u8]) -> u64 {
        match self.hashed {
            Some((k, h)) if std::ptr::eq(k, key) => h,
            _ => key_hash(key),
        }
    }

    /// Applies lazy expiry to `key` in `db`; true if it was removed.
    fn expire_if_needed(&mut self, db: usize, key: &[u8]) -> bool {
        let now = self.now;
        let sh = self.shard_in(db, key);
        if sh.is_expired(key, now) {
            let gone = sh.remove(key);
            sh.signal(key);
            self.ks.stats.expired.fetch_add(1, Ordering::Relaxed);
            self.ks.expired(db, key);
            if let Some(e) = gone {
                if e.value.is_stream() {
                    self.signal_ready_in(db, key);
                }
                if self.ks.lazyfree.lazy_expire() {
                    self.ks.lazyfree.free_entry(e);
                } else {
                    self.drop_later(e);
                }
            }
            self.mark_dirty(db, key);
            return true;
        }
        false
    }

    /// Looks a key up in `db` (no hit/miss accounting, no LRU update).
    pub fn get_in(&mut self, db: usize, key: &[u8]) -> Option<&mut Entry> {
        self.expire_if_needed(db, key);
        let h = self.hash_of(key);
        self.shard_in(db, key).peek_mut_hashed(key, h)
    }

    /// Read lookup in the current db, counting keyspace hits/misses and touching LRU.
    pub fn get(&mut self, key: &[u8]) -> Option<&Entry> {
        let (db, now, no_touch) = (self.db, self.now, self.no_touch);
        if self.unobserved {
            return self.get_in(db, key).map(|e| &*e);
        }
        self.expire_if_needed(db, key);
        let ks = self.ks;
        let stats = &ks.stats;
        let h = self.hash_of(key);
        match self.shard_in(db, key).peek_mut_hashed(key, h) {
            Some(e) => {
                stats.hits.fetch_add(1, Ordering::Relaxed);
                if !no_touch {
                    ks.touch(e, now);
                }
                Some(e)
            }
            None => {
                stats.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Read lookup that counts hits/misses but leaves the access time alone (Redis's
    /// `LOOKUP_NOTOUCH`: EXISTS, TYPE, TTL, OBJECT).
    pub fn get_notouch(&mut self, key: &[u8]) -> Option<&Entry> {
        let db = self.db;
        if self.unobserved {
            return self.get_in(db, key).map(|e| &*e);
        }
        let stats = &self.ks.stats;
        let found = self.get_in(db, key);
        let counter = if found.is_some() {
            &stats.hits
        } else {
            &stats.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found.map(|e| &*e)
    }

    /// Write lookup (Redis `lookupKeyWrite`): expires, touches the access time, no stats and
    /// no WATCH signal (callers signal through the mutation they then make, if any).
    pub fn lookup_write_in(&mut self, db: usize, key: &[u8]) -> Option<&mut Entry> {
        let (now, no_touch) = (self.now, self.no_touch);
        // Callers may modify the entry in place: the durable engine records its final state
        // (commands that record element-level changes use `lookup_elems_in` instead).
        self.mark_dirty(db, key);
        let ks = self.ks;
        let e = self.get_in(db, key)?;
        if !no_touch {
            ks.touch(e, now);
        }
        Some(e)
    }

    /// As [`Access::lookup_write_in`], for a command that records every in-place change
    /// itself with [`Access::elems`]: the key is not journaled as a whole.
    pub fn lookup_elems_in(&mut self, db: usize, key: &[u8]) -> Option<&mut Entry> {
        let (now, no_touch) = (self.now, self.no_touch);
        let ks = self.ks;
        let e = self.get_in(db, key)?;
        if !no_touch {
            ks.touch(e, now);
        }
        Some(e)
    }

    /// Reports that the entry found with `lookup_write_in` was modified in place: signals
    /// WATCHers and, on a durable keyspace, records the key's final state.
    pub fn modified_in(&mut self, db: usize, key: &[u8]) {
        self.shard_in(db, key).signal(key);
        self.mark_dirty(db, key);
    }

    /// The entry of a key the command already looked up (its one access, Redis
    /// `lookupKey`), to modify in place: WATCHers signalled and, on a durable keyspace, the
    /// key's final state recorded, but no second access counted.
    pub fn rewrite_in(&mut self, db: usize, key: &[u8]) -> Option<&mut Entry> {
        self.modified_in(db, key);
        self.get_in(db, key)
    }

    /// Signals WATCHers of an entry found with `lookup_elems_in` and modified in place (its
    /// changes were recorded with `elems`).
    pub fn signal_in(&mut self, db: usize, key: &[u8]) {
        self.shard_in(db, key).signal(key);
    }

    /// Lookup without touching stats or LRU (EXISTS-style checks, TYPE, TTL).
    pub fn peek(&mut self, key: &[u8]) -> Option<&Entry> {
        let db = self.db;
        self.get_in(db, key).map(|e| &*e)
    }

    pub fn exists(&mut self, key: &[u8]) -> bool {
        self.peek(key).is_some()
    }

    pub fn exists_in(&mut self, db: usize, key: &[u8]) -> bool {
        self.get_in(db, key).is_some()
    }

    /// Stops journaling this access's writes (DEBUG RELOAD rebuilding memory from the
    /// store): anything recorded so far is dropped.
    pub fn quiet(&mut self) {
        self.quiet = true;
        self.dirty.clear();
        self.changes.clear();
    }

    /// Durable keyspace: whether writes must record their changes (cheap; false for the
    /// memory engine, where element-level recording can be skipped entirely).
    #[inline]
    pub fn journaling(&self) -> bool {
        !self.quiet && self.ks.journal.get().is_some()
    }

    /// Like [`Access::get_mut`], for a command that records its own element-level changes
    /// with [`Access::elems`] (HSET of one field writes one row instead of the whole hash).
    /// Every modification made through the returned entry must be recorded; deleting or
    /// replacing the key goes through `remove`/`set` as usual.
    pub fn get_mut_elems(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let (db, now, no_touch) = (self.db, self.now, self.no_touch);
        self.expire_if_needed(db, key);
        let ks = self.ks;
        let sh = self.shard_in(db, key);
        sh.signal(key);
        let e = sh.peek_mut(key)?;
        if !no_touch {
            ks.touch(e, now);
        }
        Some(e)
    }

    /// Records an element-level change (durable keyspace only; a no-op otherwise). If the
    /// key was also written as a whole in this command, its state so far is recorded first,
    /// so the journal stays in order.
    pub fn elems(&mut self, change: Change) {
        if self.quiet || self.ks.journal.get().is_none() {
            return;
        }
        if let Some((db, key)) = change.target() {
            if let Some(i) = self.dirty.iter().position(|(d, k)| *d == db && k == key) {
                let (db, key) = self.dirty.remove(i);
                let whole = self.state_of(db, key);
                self.changes.push(whole);
            }
        }
        self.changes.push(change);
    }

    /// A key's entry with no side effects (no access recorded, no WATCH signal, no lazy
    /// expiry): for restoring saved access data after a load.
    pub fn peek_mut_in(&mut self, db: usize, key: &[u8]) -> Option<&mut Entry> {
        self.shard_in(db, key).peek_mut(key)
    }

    /// Lookup for modification: signals WATCHers, so call it only when about to write.
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let (db, now, no_touch) = (self.db, self.now, self.no_touch);
        self.expire_if_needed(db, key);
        self.mark_dirty(db, key);
        let ks = self.ks;
        let sh = self.shard_in(db, key);
        sh.signal(key);
        let e = sh.peek_mut(key)?;
        if !no_touch {
            ks.touch(e, now);
        }
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
        let wakes = value.wakes_waiters();
        if wakes {
            // Redis `dbAdd` signals list/zset/stream keys as ready (RENAME, COPY, stores).
            self.signal_ready_in(db, key);
        }
        self.expire_if_needed(db, key);
        self.mark_dirty(db, key);
        let ks = self.ks;
        let h = self.hash_of(key);
        let sh = self.shard_in(db, key);
        sh.signal(key);
        let old = sh.insert_hashed(key, h, value, expire_at, now);
        ks.stamp_new(sh, key, old.as_ref(), now);
        if !wakes && old.as_ref().is_some_and(|e| e.value.is_stream()) {
            self.signal_ready_in(db, key);
        }
        old
    }

    /// Stores a whole entry (value and deadline as they are), replacing any previous one:
    /// RENAME and MOVE carry an entry from one name or db to another.
    pub fn insert_entry_in(&mut self, db: usize, key: &[u8], entry: Entry) -> Option<Entry> {
        let wakes = entry.value.wakes_waiters();
        if wakes {
            self.signal_ready_in(db, key);
        }
        self.expire_if_needed(db, key);
        self.mark_dirty(db, key);
        let sh = self.shard_in(db, key);
        sh.signal(key);
        let old = sh.insert_entry(key, entry);
        if !wakes && old.as_ref().is_some_and(|e| e.value.is_stream()) {
            self.signal_ready_in(db, key);
        }
        old
    }

    /// Replaces the value but keeps the key's deadline (KEEPTTL, in-place edits).
    pub fn set_keep_ttl(&mut self, key: &[u8], value: Value) {
        let ttl = self.peek(key).and_then(|e| e.expire_at());
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
        self.mark_dirty(db, key);
        if e.value.is_stream() {
            // Redis `signalDeletedKeyAsReady`: blocked XREADGROUP clients learn the stream
            // is gone.
            self.signal_ready_in(db, key);
        }
        Some(e)
    }

    /// Makes sure the active cycle visits the hash at `key` no later than `t` (a command
    /// gave one of its fields that deadline).
    pub fn register_field_expiry_in(&mut self, db: usize, key: &[u8], t: u64) {
        self.shard_in(db, key).register_field_expiry(key, t);
    }

    /// Sets or clears the deadline of an existing key; false if missing.
    pub fn set_expire(&mut self, key: &[u8], at: Option<u64>) -> bool {
        let db = self.db;
        self.expire_if_needed(db, key);
        let sh = self.shard_in(db, key);
        let ok = sh.set_expire(key, at);
        if ok {
            sh.signal(key);
            let journaled = self.dirty.iter().any(|(d, k)| *d == db && k == key);
            if !journaled {
                self.record(Change::Expire {
                    db,
                    key: Bytes::copy_from_slice(key),
                    at,
                });
            }
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
            self.visit_shard(db, s, |sh| {
                out.extend(
                    sh.keys()
                        .filter(|(_, e)| !e.is_expired(now))
                        .map(|(k, _)| Bytes::copy_from_slice(k)),
                )
            });
        }
        out
    }

    /// Number of keys in a db, logically expired ones not yet removed included (as Redis's
    /// DBSIZE). Visits shards one at a time, so it needs no exclusive access.
    pub fn dbsize_in(&mut self, db: usize) -> usize {
        (0..SHARDS)
            .map(|s| self.visit_shard(db, s, |sh| sh.len()))
            .sum()
    }

    /// Keys and keys-with-deadline of a db (INFO keyspace from inside a command).
    pub fn db_counts_in(&mut self, db: usize) -> (usize, usize) {
        (0..SHARDS).fold((0, 0), |(k, e), s| {
            self.visit_shard(db, s, |sh| (k + sh.len(), e + sh.expires_len()))
        })
    }

    /// One SCAN step over `db` (see `SCAN_POS_BITS`): visits keys in (shard, position)
    /// order until `count` keys were visited (Redis 7.2's `sampled`: expired ones count,
    /// though they are removed, not returned) or the db is exhausted; keys sharing a position
    /// are taken together. Appends live keys with their type names to `out`; returns the
    /// next cursor, 0 when the iteration is over.
    ///
    /// Guarantee: a key present for the whole iteration is returned (exactly once), because
    /// its (shard, position) never changes and the cursor only moves forward over them.
    pub fn scan(
        &mut self,
        db: usize,
        cursor: u64,
        count: usize,
        out: &mut Vec<(Bytes, &'static str)>,
    ) -> u64 {
        const POS_MASK: u64 = (1 << SCAN_POS_BITS) - 1;
        if cursor >> SCAN_POS_BITS >= SHARDS as u64 {
            return 0;
        }
        let now = self.now;
        let count = count.max(1);
        let mut shard = (cursor >> SCAN_POS_BITS) as usize;
        let mut from = (cursor & POS_MASK) as u32;
        let mut visited = 0;
        while shard < SHARDS {
            let want = count - visited;
            let step = self.visit_shard(db, shard, |sh| sh.scan_from(from, want, now, out));
            self.ks
                .stats
                .expired
                .fetch_add(step.expired as u64, Ordering::Relaxed);
            visited += step.visited;
            if let Some(next) = step.next_pos {
                return (shard as u64) << SCAN_POS_BITS | u64::from(next);
            }
            shard += 1;
            from = 0;
            if visited >= count {
                break;
            }
        }
        if shard >= SHARDS {
            0
        } else {
            (shard as u64) << SCAN_POS_BITS
        }
    }

    /// A uniformly chosen live key of `db`; expired keys met on the way are removed
    /// (exclusive mode).
    pub fn random_key(&mut self, db: usize) -> Option<Bytes> {
        self.random_key_with(db, &mut rand::thread_rng())
    }

    /// [`Access::random_key`] drawing from `rng` (the server's, seedable one).
    pub fn random_key_with<R: rand::Rng + ?Sized>(
        &mut self,
        db: usize,
        rng: &mut R,
    ) -> Option<Bytes> {
        let now = self.now;
        loop {
            let sizes: Vec<usize> = (0..SHARDS)
                .map(|s| self.visit_shard(db, s, |sh| sh.len()))
                .collect();
            let total: usize = sizes.iter().sum();
            if total == 0 {
                return None;
            }
            let mut r = rng.gen_range(0..total);
            let s = sizes.iter().position(|&n| {
                if r < n {
                    true
                } else {
                    r -= n;
                    false
                }
            })?;
            let (key, expired) = self.visit_shard(db, s, |sh| {
                sh.nth(r)
                    .map(|(k, e)| (Bytes::copy_from_slice(k), e.is_expired(now)))
            })?;
            if !expired {
                return Some(key);
            }
            let ks = self.ks;
            let stream = self.visit_shard(db, s, |sh| {
                let gone = sh.remove(&key);
                sh.signal(&key);
                ks.expired(db, &key);
                gone.is_some_and(|e| e.value.is_stream())
            });
            if stream {
                // As in `expire_if_needed`: XREADGROUP readers learn the stream is gone.
                self.signal_ready_in(db, &key);
            }
            self.mark_dirty(db, &key);
            self.ks.stats.expired.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Removes every key of a db, signalling watchers of keys that existed.
    pub fn flush_db(&mut self, db: usize) -> usize {
        self.record(Change::FlushDb { db });
        (0..SHARDS)
            .map(|s| {
                self.visit_shard(db, s, |sh| {
                    sh.signal_all(true);
                    sh.clear()
                })
            })
            .sum()
    }

    /// Like `flush_db`, but the detached contents go to the lazyfree thread (`FLUSHDB
    /// ASYNC`, Redis `emptyDbAsync`): they count as one pending object per key, as Redis
    /// counts the entries of the dictionary it hands over. Returns the keys removed.
    pub fn flush_db_lazy(&mut self, db: usize) -> usize {
        self.record(Change::FlushDb { db });
        let mut removed = 0;
        let mut garbage = Vec::new();
        for s in 0..SHARDS {
            self.visit_shard(db, s, |sh| {
                if sh.is_empty() {
                    return;
                }
                sh.signal_all(true);
                removed += sh.len();
                garbage.push(sh.take_data());
            });
        }
        if !garbage.is_empty() {
            self.ks.lazyfree.free(garbage, removed);
        }
        removed
    }

    /// Exchanges two databases' contents (exclusive mode).
    pub fn swap_dbs(&mut self, a: usize, b: usize) {
        self.record(Change::SwapDb { a, b });
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::value::StrVal;
    use std::collections::HashSet;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    fn v(s: &str) -> Value {
        Value::Str(StrVal::from_set(Bytes::copy_from_slice(s.as_bytes())))
    }

    #[test]
    fn brace_scan_finds_every_position() {
        for len in 0..40 {
            let plain = vec![b'a'; len];
            assert!(!has_brace(&plain), "{len}");
            for at in 0..len {
                let mut k = plain.clone();
                k[at] = b'{';
                assert!(has_brace(&k), "{len} {at}");
                // Bytes next to `{` in value (`z` 0x7a, `|` 0x7c) and high bytes are not it.
                k[at] = [b'z', b'|', 0xfb, 0x7b ^ 0x80][at % 4];
                assert!(!has_brace(&k), "{len} {at}");
            }
        }
    }

    #[test]
    fn keys_sharing_a_tag_share_a_shard_and_others_spread() {
        assert_eq!(shard_of(b"{user1000}.following"), shard_of(b"user1000"));
        assert_eq!(shard_of(b"a{tag}b"), shard_of(b"{tag}zzzzzzzzzzzzzzzzzz"));
        let mut per = [0usize; SHARDS];
        for i in 0..64_000 {
            per[shard_of(format!("key:{i:012}").as_bytes())] += 1;
        }
        assert!(per.iter().all(|&n| (700..1300).contains(&n)), "{per:?}");
    }

    fn check_all(ks: &Keyspace) {
        for db in 0..ks.databases() {
            for s in 0..SHARDS {
                ks.with_shard(db, s, |sh| sh.check_invariants());
            }
        }
    }

    /// Runs a full SCAN of `db` with `count`, calling `between` after every step.
    fn full_scan(
        ks: &Keyspace,
        db: usize,
        count: usize,
        now: u64,
        mut between: impl FnMut(usize),
    ) -> Vec<Bytes> {
        let mut seen = Vec::new();
        let mut cursor = 0;
        let mut calls = 0;
        loop {
            let mut out = Vec::new();
            cursor = ks.shared(db, &[], now).scan(db, cursor, count, &mut out);
            seen.extend(out.into_iter().map(|(k, _)| k));
            calls += 1;
            assert!(calls <= 100_000, "SCAN does not terminate");
            if cursor == 0 {
                return seen;
            }
            between(calls);
        }
    }

    #[test]
    fn scan_returns_every_key_exactly_once() {
        let ks = Keyspace::new(2);
        {
            let mut a = ks.exclusive(0, 0);
            for i in 0..3000 {
                a.set(format!("key:{i:06}").as_bytes(), v("x"), None);
            }
            // Keys sharing a hash tag live in one shard but spread over its slices.
            for i in 0..300 {
                a.set(format!("{{tag}}:{i}").as_bytes(), v("x"), None);
            }
        }
        for count in [1, 10, 97, 100_000] {
            let seen = full_scan(&ks, 0, count, 0, |_| {});
            let uniq: HashSet<_> = seen.iter().cloned().collect();
            assert_eq!(uniq.len(), 3300, "count {count}");
            assert_eq!(seen.len(), 3300, "duplicates with count {count}");
        }
        // The other db is empty: a single call ends it.
        let mut out = Vec::new();
        assert_eq!(ks.shared(1, &[], 0).scan(1, 0, 10, &mut out), 0);
        assert!(out.is_empty());
    }

    #[test]
    fn scan_covers_stable_keys_under_churn() {
        let ks = Keyspace::new(1);
        let stable: Vec<Vec<u8>> = (0..2000)
            .map(|i| format!("stable:{i}").into_bytes())
            .collect();
        {
            let mut a = ks.exclusive(0, 0);
            for k in &stable {
                a.set(k, v("s"), None);
            }
            for i in 0..2000 {
                a.set(format!("churn:{i}").as_bytes(), v("c"), None);
            }
        }
        let seen = full_scan(&ks, 0, 25, 0, |call| {
            // Between calls, remove old churn keys and add new ones.
            let mut a = ks.exclusive(0, 0);
            for j in 0..20 {
                let n = call * 20 + j;
                a.remove(format!("churn:{n}").as_bytes());
                a.set(format!("new:{n}").as_bytes(), v("n"), None);
            }
        });
        let seen: HashSet<Vec<u8>> = seen.into_iter().map(|k| k.to_vec()).collect();
        for k in &stable {
            assert!(seen.contains(k), "missed {}", String::from_utf8_lossy(k));
        }
        check_all(&ks);
    }

    #[test]
    fn scan_concurrent_with_writers() {
        let ks = Arc::new(Keyspace::new(1));
        {
            let mut a = ks.exclusive(0, 0);
            for i in 0..1000 {
                a.set(format!("stable:{i}").as_bytes(), v("s"), None);
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (ks, stop) = (ks.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("churn:{}", i % 500);
                    if i.is_multiple_of(7) {
                        // Whole-keyspace writers interleave with the scanner too.
                        ks.exclusive(0, 0).remove(key.as_bytes());
                    } else {
                        let k = key.as_bytes();
                        ks.shared(0, &[k], 0).set(k, v("c"), None);
                    }
                    i += 1;
                }
            })
        };
        for _ in 0..5 {
            let seen: HashSet<Bytes> = full_scan(&ks, 0, 10, 0, |_| {}).into_iter().collect();
            let stable = seen.iter().filter(|k| k.starts_with(b"stable:")).count();
            assert_eq!(stable, 1000);
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().expect("writer");
        check_all(&ks);
    }

    #[test]
    fn scan_skips_and_removes_expired_keys() {
        let ks = Keyspace::new(1);
        {
            let mut a = ks.exclusive(0, 0);
            for i in 0..100 {
                let deadline = (i % 2 == 0).then_some(1000);
                a.set(format!("k{i}").as_bytes(), v("x"), deadline);
            }
        }
        // At the deadline keys are still live (expired only when now > deadline).
        assert_eq!(full_scan(&ks, 0, 10, 1000, |_| {}).len(), 100);
        let seen = full_scan(&ks, 0, 10, 1001, |_| {});
        assert_eq!(seen.len(), 50);
        assert_eq!(ks.dbsize(0), 50);
        assert_eq!(ks.stats.expired.load(Ordering::Relaxed), 50);
        check_all(&ks);
    }

    #[test]
    fn scan_cursor_past_the_end_finishes() {
        let ks = Keyspace::new(1);
        ks.exclusive(0, 0).set(b"k", v("x"), None);
        let mut out = Vec::new();
        let end = (SHARDS as u64) << SCAN_POS_BITS;
        assert_eq!(ks.shared(0, &[], 0).scan(0, end, 10, &mut out), 0);
        assert_eq!(ks.shared(0, &[], 0).scan(0, u64::MAX, 10, &mut out), 0);
        assert!(out.is_empty());
    }

    #[test]
    fn sweep_removes_due_keys_everywhere_and_signals_watchers() {
        let ks = Keyspace::new(3);
        let flag = Arc::new(AtomicBool::new(false));
        {
            let mut a = ks.exclusive(0, 0);
            for db in 0..3 {
                for i in 0..50 {
                    a.set_in(db, format!("d{i}").as_bytes(), v("x"), Some(100 + i));
                    a.set_in(db, format!("p{i}").as_bytes(), v("x"), None);
                }
            }
            a.db = 2;
            a.watch(b"d0", flag.clone());
        }
        // now=100: nothing is past its deadline yet.
        assert_eq!(ks.sweep(100, usize::MAX), 0);
        // now=110: deadlines 100..=109 are due in each db.
        assert_eq!(ks.sweep(110, usize::MAX), 30);
        assert!(flag.load(Ordering::Acquire));
        assert_eq!(ks.stats.expired.load(Ordering::Relaxed), 30);
        // A per-shard limit bounds one pass; repeated passes finish the job.
        let mut removed = 0;
        loop {
            let n = ks.sweep(10_000, 1);
            if n == 0 {
                break;
            }
            removed += n;
        }
        assert_eq!(removed, 120);
        for db in 0..3 {
            assert_eq!(ks.db_counts(db), (50, 0));
        }
        check_all(&ks);
    }

    #[test]
    fn expiry_listener_hears_lazy_sweep_and_random_key_removals() {
        let ks = Keyspace::new(2);
        let heard = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let h = heard.clone();
        assert!(ks.set_expiry_listener(Box::new(move |db, key| {
            h.lock().push((db, key.to_vec()))
        })));
        assert!(!ks.set_expiry_listener(Box::new(|_, _| {})));
        {
            let mut a = ks.exclusive(0, 0);
            a.set(b"lazy", v("x"), Some(5));
            a.set_in(1, b"swept", v("x"), Some(5));
            a.set(b"live", v("x"), None);
            a.now = 6;
            assert!(a.get(b"lazy").is_none());
            // Missing keys and live keys are not reported.
            assert!(a.get(b"nokey").is_none() && a.get(b"live").is_some());
        }
        assert_eq!(ks.sweep(6, usize::MAX), 1);
        {
            let mut a = ks.exclusive(0, 6);
            // Alone in its db, so RANDOMKEY is sure to meet it.
            a.set_in(1, b"rnd", v("x"), Some(5));
            assert!(a.random_key(1).is_none());
        }
        assert_eq!(
            *heard.lock(),
            vec![
                (0, b"lazy".to_vec()),
                (1, b"swept".to_vec()),
                (1, b"rnd".to_vec())
            ]
        );
    }

    #[test]
    fn lazy_expiry_on_access() {
        let ks = Keyspace::new(1);
        let mut a = ks.exclusive(0, 10);
        a.set(b"k", v("x"), Some(10));
        assert!(a.get(b"k").is_some());
        a.now = 11;
        assert!(a.get(b"k").is_none());
        assert_eq!(a.dbsize_in(0), 0);
        assert_eq!(ks.stats.expired.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn set_replaces_deadline_and_entry_moves_keep_it() {
        let ks = Keyspace::new(2);
        let mut a = ks.exclusive(0, 0);
        a.set(b"k", v("1"), Some(50));
        a.set(b"k", v("2"), Some(60));
        a.set_keep_ttl(b"k", v("3"));
        assert_eq!(a.peek(b"k").and_then(|e| e.expire_at()), Some(60));
        let e = a.remove(b"k").expect("present");
        a.insert_entry_in(1, b"moved", e);
        assert_eq!(a.get_in(1, b"moved").and_then(|e| e.expire_at()), Some(60));
        assert!(!a.set_expire(b"nope", Some(1)));
        drop(a);
        check_all(&ks);
    }

    #[test]
    fn swap_and_flush_keep_indexes_consistent() {
        let ks = Keyspace::new(3);
        {
            let mut a = ks.exclusive(0, 0);
            for i in 0..200 {
                a.set_in(0, format!("a{i}").as_bytes(), v("x"), Some(1000 + i));
                a.set_in(1, format!("b{i}").as_bytes(), v("x"), None);
            }
            a.swap_dbs(0, 1);
            assert_eq!(a.dbsize_in(0), 200);
            assert_eq!(a.db_counts_in(1), (200, 200));
            assert!(a.get_in(0, b"b7").is_some() && a.get_in(1, b"a7").is_some());
        }
        check_all(&ks);
        assert_eq!(ks.db_counts(1), (200, 200));
        {
            let mut a = ks.exclusive(0, 0);
            assert_eq!(a.flush_db_lazy(1), 200);
            assert_eq!(a.flush_db(0), 200);
            assert_eq!(a.flush_db(2), 0);
        }
        // One object per key of the flushed database, as Redis counts them.
        assert!(ks.lazyfree.wait_idle(std::time::Duration::from_secs(10)));
        assert_eq!((ks.lazyfree.pending(), ks.lazyfree.freed()), (0, 200));
        check_all(&ks);
        assert_eq!(ks.db_counts(0), (0, 0));
        assert_eq!(ks.db_counts(1), (0, 0));
    }

    #[test]
    fn random_key_returns_live_keys_only() {
        let ks = Keyspace::new(1);
        let mut a = ks.exclusive(0, 0);
        assert!(a.random_key(0).is_none());
        for i in 0..20 {
            a.set(format!("dead{i}").as_bytes(), v("x"), Some(5));
        }
        a.now = 6;
        assert!(a.random_key(0).is_none());
        assert_eq!(a.dbsize_in(0), 0);
        a.set(b"live", v("x"), None);
        for i in 0..20 {
            a.set(format!("dead{i}").as_bytes(), v("x"), Some(5));
        }
        for _ in 0..5 {
            assert_eq!(a.random_key(0).as_deref(), Some(&b"live"[..]));
        }
        drop(a);
        check_all(&ks);
    }

    #[test]
    fn random_key_reaches_every_key() {
        let ks = Keyspace::new(1);
        let mut a = ks.exclusive(0, 0);
        for i in 0..8 {
            a.set(format!("k{i}").as_bytes(), v("x"), None);
        }
        let mut seen = HashSet::new();
        for _ in 0..2000 {
            seen.insert(a.random_key(0).expect("non-empty"));
        }
        assert_eq!(seen.len(), 8);
    }

    #[test]
    fn notouch_lookup_counts_stats_but_keeps_lru() {
        let ks = Keyspace::new(1);
        let mut a = ks.exclusive(0, 100);
        a.set(b"k", v("x"), None);
        a.now = 5000;
        assert!(a.get_notouch(b"k").is_some());
        assert!(a.get_notouch(b"missing").is_none());
        assert_eq!(a.peek(b"k").map(|e| e.lru_ms()), Some(0));
        assert!(a.lookup_write_in(0, b"k").is_some());
        assert_eq!(a.peek(b"k").map(|e| e.lru_ms()), Some(5000));
        assert_eq!(ks.stats.hits.load(Ordering::Relaxed), 1);
        assert_eq!(ks.stats.misses.load(Ordering::Relaxed), 1);
    }
}
