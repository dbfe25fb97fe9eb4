//! The committer and the checkpointer (DESIGN.md §6).
//!
//! The committer thread takes everything the journal holds (group commit across all
//! connections), coalesces it and appends it as one record to the write-ahead log
//! ([`super::wal`]); `appendfsync` decides when the log is fsynced:
//! - `always`: every record, before the replies of the writes in it leave;
//! - `everysec` (the default): records are written (they survive a process crash, like
//!   Redis's AOF `write`) and fsynced at least once a second;
//! - `no`: written, fsynced every 30 s and at shutdown.
//!
//! The checkpointer thread owns the redb store. It applies the logged batches to it in
//! durable transactions about once a second (or sooner when many changes wait), so a key
//! written many times costs one row per checkpoint and a B-tree page is copied once per
//! checkpoint rather than once per commit; the log is then trimmed.
//!
//! A failed log append keeps its changes (retried, in order, ahead of newer ones) and marks
//! the store failed: write commands are refused with `-MISCONF` until an append succeeds
//! again; reads go on. A failed checkpoint is retried; its batches stay queued (and logged).

use super::coalesce::{coalesce, coalesced_in_key_order};
use super::wal::Wal;
use super::{PersistError, Store};
use crate::config::ConfigStore;
use crate::engine::change::Change;
use crate::engine::journal::Journal;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How often a failed append or checkpoint is retried.
const RETRY: Duration = Duration::from_millis(100);
/// Outside `always`, log appends are at most this frequent (one write syscall per batch).
const BATCH_EVERY: Duration = Duration::from_millis(10);
/// Bounds on how long an `always` commit waits for the previous commit's writers to return.
const GATHER_MIN: Duration = Duration::from_micros(50);
const GATHER_MAX: Duration = Duration::from_micros(500);
/// Capacity of the batch buffer kept between commits (changes).
const KEEP_BATCH: usize = 1 << 16;
/// A checkpoint happens at least this often while batches wait...
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);
/// ...or as soon as this many changes wait; a checkpoint takes about this many (whole
/// batches), so each finishes within a bounded time and frees its changes.
const CHECKPOINT_CHANGES: usize = 200_000;
/// Backpressure: while this many logged changes wait for a checkpoint, connections that
/// wrote hold their replies (and read nothing more) until the checkpointer catches up.
/// Bounds the memory and log size the backlog takes when writes outrun the store.
pub const UNAPPLIED_LIMIT: u64 = 4 * CHECKPOINT_CHANGES as u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fsync {
    Always = 0,
    EverySec = 1,
    No = 2,
}

impl Fsync {
    pub fn parse(s: &str) -> Fsync {
        match s {
            "always" => Fsync::Always,
            "no" => Fsync::No,
            _ => Fsync::EverySec,
        }
    }

    fn to_u8(self) -> u8 {
        self as u8
    }

    fn from_u8(v: u8) -> Fsync {
        match v {
            0 => Fsync::Always,
            2 => Fsync::No,
            _ => Fsync::EverySec,
        }
    }

    fn durable_every(self) -> Duration {
        match self {
            Fsync::Always => Duration::ZERO,
            Fsync::EverySec => Duration::from_secs(1),
            Fsync::No => Duration::from_secs(30),
        }
    }
}

/// Counters for INFO persistence.
#[derive(Default)]
pub struct Stats {
    /// Log appends (group commits) and log fsyncs.
    pub commits: AtomicU64,
    pub durable_commits: AtomicU64,
    /// Changes appended to the log.
    pub changes: AtomicU64,
    pub failed_commits: AtomicU64,
    /// Checkpoints (durable redb transactions) and failed ones.
    pub checkpoints: AtomicU64,
    pub failed_checkpoints: AtomicU64,
    /// Changes logged but not yet checkpointed into the store.
    pub unapplied: AtomicU64,
    /// Times a connection held its replies because the backlog reached [`UNAPPLIED_LIMIT`].
    pub throttled: AtomicU64,
    /// Rows the checkpoints wrote (see `Store::rows_written`).
    pub rows_written: AtomicU64,
    /// Bytes in the write-ahead log.
    pub wal_bytes: AtomicU64,
    /// Unix seconds of the last log fsync.
    pub last_durable_unix: AtomicU64,
}

/// What the committer hands the checkpointer.
#[derive(Default)]
struct Handoff {
    /// Logged batches not yet applied, in log order, with their record numbers, and the
    /// last record number handed over.
    batches: std::collections::VecDeque<(u64, Vec<Change>)>,
    changes: usize,
    last_rec: u64,
    /// Checkpoint everything handed over so far, then report `force_done` = this.
    force: u64,
    stop: bool,
}

/// The durable engine of a running server: the journal, the committer (log) thread and the
/// checkpointer (store) thread.
pub struct Persistence {
    pub journal: Arc<Journal>,
    /// The `appendfsync` policy (an `Fsync`), refreshed by `CONFIG SET`; read before every
    /// commit and by every connection that wrote, so it is kept out of the config store.
    mode: AtomicU8,
    /// Where the store lives (the checkpointer thread owns the store itself, so it is
    /// closed, and its file lock released, when the thread ends).
    pub path: std::path::PathBuf,
    /// The next this-many log appends fail as if the disk did (tests of the error path).
    inject_failures: AtomicU64,
    /// See [`UNAPPLIED_LIMIT`].
    unapplied_limit: AtomicU64,
    pub stats: Stats,
    /// Set while the log or the store fails: the error text for `-MISCONF`.
    failed: Mutex<Option<String>>,
    failing: AtomicBool,
    /// Durable commits (log fsync + checkpoint) requested (SAVE, BGSAVE) and served so far.
    force_req: AtomicU64,
    force_done: AtomicU64,
    stop: AtomicBool,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Work that needs the store itself (DEBUG RELOAD's load), run by the checkpointer.
    jobs: Mutex<Vec<Job>>,
    handoff: Mutex<Handoff>,
    handoff_cv: Condvar,
    /// Batch vectors the checkpointer emptied, for the committer to hand over again (a
    /// fresh vector per commit, freed on the other thread, kept the allocator faulting in
    /// and zeroing fresh pages).
    spare: Mutex<Vec<Vec<Change>>>,
    /// The last log record the store holds (set by the checkpointer).
    applied: AtomicU64,
    checkpoint_failing: AtomicBool,
}

type Job = Box<dyn FnOnce(&Store) + Send>;

/// The checkpointer's nice value. It shares no lock with writers (they meet it only through
/// the backlog limit), so what a long checkpoint can take from a request is CPU: on a
/// 2-core box, a connection thread that was just woken waited for it (up to ~20 ms seen with
/// `perf sched latency`), sometimes mid-command with its shard locked. Background work
/// should yield to connection threads; at nice 10 it still gets about a tenth of a busy
/// core and every idle cycle (a saturating P16 SET load did not throttle writers).
const CHECKPOINT_NICE: libc::c_int = 10;

/// Lowers the calling thread's CPU priority to [`CHECKPOINT_NICE`] (Linux keeps a nice
/// value per thread; elsewhere this is a no-op). Failure only costs the latency benefit.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        let r = unsafe /* SAFETY: plain integer arguments; who 0 = the calling thread */ {
            libc::setpriority(libc::PRIO_PROCESS, 0, CHECKPOINT_NICE)
        };
        if r != 0 {
            tracing::debug!(
                "checkpointer priority unchanged: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Persistence {
    /// Starts the committer and checkpointer for `store` (recovered: see `wal::recover`),
    /// logging into `wal` under the `appendfsync` policy `mode` (`set_mode` changes it).
    pub fn start(store: Store, wal: Wal, mode: Fsync) -> std::io::Result<Arc<Persistence>> {
        let p = Arc::new(Persistence {
            mode: AtomicU8::new(mode.to_u8()),
            path: store.path().to_path_buf(),
            inject_failures: AtomicU64::new(0),
            unapplied_limit: AtomicU64::new(UNAPPLIED_LIMIT),
            journal: Arc::new(Journal::new()),
            stats: Stats::default(),
            failed: Mutex::new(None),
            failing: AtomicBool::new(false),
            force_req: AtomicU64::new(0),
            force_done: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            thread: Mutex::new(None),
            jobs: Mutex::new(Vec::new()),
            handoff: Mutex::new(Handoff::default()),
            handoff_cv: Condvar::new(),
            spare: Mutex::new(Vec::new()),
            applied: AtomicU64::new(0),
            checkpoint_failing: AtomicBool::new(false),
        });
        p.applied
            .store(wal.next_rec().saturating_sub(1), Ordering::Relaxed);
        p.stats
            .last_durable_unix
            .store(unix_secs(), Ordering::Relaxed);
        let me = p.clone();
        let checkpointer = std::thread::Builder::new()
            .name("respite-checkpt".into())
            .spawn(move || me.checkpoint_loop(&store))?;
        let me = p.clone();
        let handle = std::thread::Builder::new()
            .name("respite-committer".into())
            .spawn(move || {
                me.commit_loop(wal);
                me.handoff.lock().stop = true;
                me.handoff_cv.notify_all();
                let _ = checkpointer.join();
            })?;
        *p.thread.lock() = Some(handle);
        Ok(p)
    }

    pub fn fsync_mode(config: &ConfigStore) -> Fsync {
        Fsync::parse(&config.get("appendfsync").unwrap_or_default())
    }

    /// The `appendfsync` policy in force.
    #[inline]
    pub fn mode(&self) -> Fsync {
        Fsync::from_u8(self.mode.load(Ordering::Relaxed))
    }

    pub fn set_mode(&self, mode: Fsync) {
        self.mode.store(mode.to_u8(), Ordering::Relaxed);
        self.journal.poke();
        self.journal.wake_waiters();
    }

    /// The error text while the log or the store fails (`None` when healthy).
    #[inline]
    /// The checkpointer is behind by [`UNAPPLIED_LIMIT`] changes or more: writers wait.
    pub fn backlogged(&self) -> bool {
        let limit = self.unapplied_limit.load(Ordering::Relaxed);
        self.stats.unapplied.load(Ordering::Relaxed) >= limit
    }

    /// How many changes start a checkpoint, and about how many one takes: a quarter of the
    /// backlog limit ([`CHECKPOINT_CHANGES`] by default).
    fn checkpoint_changes(&self) -> usize {
        (self.unapplied_limit.load(Ordering::Relaxed) / 4).max(1) as usize
    }

    /// Replaces [`UNAPPLIED_LIMIT`], and so the checkpoint size (tests of the backpressure
    /// and of partial checkpoints use small ones).
    #[doc(hidden)]
    pub fn set_unapplied_limit(&self, changes: u64) {
        self.unapplied_limit.store(changes, Ordering::Relaxed);
        self.journal.wake_waiters();
    }

    pub fn failure(&self) -> Option<String> {
        if !self.failing.load(Ordering::Relaxed) {
            return None;
        }
        self.failed.lock().clone()
    }

    /// Makes everything appended so far durable in the log and checkpointed into the store,
    /// and waits for it (SAVE, BGSAVE, DEBUG RELOAD); false if that did not happen within
    /// `timeout`.
    pub fn sync(&self, timeout: Duration) -> bool {
        let req = self.force_req.fetch_add(1, Ordering::AcqRel) + 1;
        self.journal.poke();
        self.journal
            .wait_for(|| self.force_done.load(Ordering::Acquire) >= req, timeout)
    }

    /// Final log fsync and checkpoint, then stops both threads.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::Release);
        self.journal.poke();
        if let Some(h) = self.thread.lock().take() {
            let _ = h.join();
        }
    }

    /// Runs `f` with the store on the checkpointer thread (after a checkpoint of everything
    /// handed to it) and returns its result; `None` if the threads have stopped.
    pub fn with_store<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> R + Send + 'static,
    ) -> Option<R> {
        if self.stop.load(Ordering::Acquire) {
            return None;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        self.jobs.lock().push(Box::new(move |s: &Store| {
            let _ = tx.send(f(s));
        }));
        self.handoff_cv.notify_all();
        rx.recv_timeout(Duration::from_secs(600)).ok()
    }

    /// Makes the next `n` log appends fail with an injected error.
    pub fn fail_next_commits(&self, n: u64) {
        self.inject_failures.store(n, Ordering::Release);
    }

    fn commit_loop(&self, mut wal: Wal) {
        let mut last_sync = Instant::now();
        let mut last_commit = Instant::now();
        let mut batch = Vec::new();
        let mut checkpointed = 0u64;
        let mut last_n = 0usize;
        let mut last_fsync = Duration::ZERO;
        // The last durable-commit request (`force_req`) this loop served and handed to the
        // checkpointer. Compared with `force_done` instead, a request would keep the loop
        // committing nothing without waiting (and waking every SAVE waiter each time) until
        // the checkpointer finished: a core spun for the length of a checkpoint.
        let mut forced_upto = 0u64;
        loop {
            let stopping = self.stop.load(Ordering::Acquire);
            let mode = self.mode();
            if mode != Fsync::Always && !stopping {
                let since = last_commit.elapsed();
                if since < BATCH_EVERY {
                    std::thread::sleep(BATCH_EVERY - since);
                }
            }
            let wait = if self.failing.load(Ordering::Relaxed) {
                RETRY
            } else if mode == Fsync::Always {
                Duration::from_millis(100)
            } else {
                mode.durable_every()
                    .saturating_sub(last_sync.elapsed())
                    .clamp(Duration::from_millis(1), Duration::from_millis(100))
            };
            if mode == Fsync::Always && !stopping {
                // Group commit under `always`: the writers answered by the last fsync are
                // about to send their next writes; starting the next fsync before they
                // arrive would split them over two. Wait (at most half an fsync) until as
                // many writes wait as the last commit carried.
                let gather = (last_fsync / 2).clamp(GATHER_MIN, GATHER_MAX);
                self.journal.gather(last_n, gather);
            }
            // Read before taking the batch: a SAVE that arrives after the take must not be
            // answered by a commit of changes taken before its writes were all appended.
            let req = self.force_req.load(Ordering::Acquire);
            let forced = req > forced_upto;
            let seq = self.journal.take_into(
                &mut batch,
                if stopping || forced {
                    Duration::ZERO
                } else {
                    wait
                },
            );
            last_n = batch.len();
            // Trim the log behind the checkpointer.
            let applied = self.applied.load(Ordering::Acquire);
            if applied > checkpointed {
                match wal.checkpointed(applied) {
                    Ok(()) => checkpointed = applied,
                    Err(e) => tracing::warn!("trimming the write-ahead log: {e}"),
                }
                self.stats.wal_bytes.store(wal.bytes(), Ordering::Relaxed);
            }
            let due = last_sync.elapsed() >= mode.durable_every();
            let n = batch.len() as u64;
            let injected = n > 0
                && self
                    .inject_failures
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                    .is_ok();
            let appended = if injected {
                Err(PersistError::Injected)
            } else if n > 0 {
                coalesce(&mut batch);
                wal.append(&batch).map(Some)
            } else {
                Ok(None)
            };
            let durable = mode == Fsync::Always || forced || stopping || due;
            let result = appended.and_then(|rec| {
                if durable && wal.unsynced() {
                    let t = Instant::now();
                    wal.sync()?;
                    last_fsync = t.elapsed();
                    self.stats.durable_commits.fetch_add(1, Ordering::Relaxed);
                    self.stats
                        .last_durable_unix
                        .store(unix_secs(), Ordering::Relaxed);
                }
                Ok(rec)
            });
            match result {
                Ok(rec) => {
                    if durable {
                        last_sync = Instant::now();
                    }
                    if let Some(rec) = rec {
                        last_commit = Instant::now();
                        self.stats.commits.fetch_add(1, Ordering::Relaxed);
                        self.stats.changes.fetch_add(n, Ordering::Relaxed);
                        self.stats
                            .unapplied
                            .fetch_add(batch.len() as u64, Ordering::Relaxed);
                        // Handed over at its (coalesced) size: the big buffer stays here and
                        // cycles with the journal's, so neither regrows every commit.
                        let mut full = self.spare.lock().pop().unwrap_or_default();
                        full.append(&mut batch);
                        if batch.capacity() > KEEP_BATCH {
                            batch = Vec::new();
                        }
                        let mut h = self.handoff.lock();
                        h.changes += full.len();
                        h.batches.push_back((rec, full));
                        h.last_rec = rec;
                        if h.changes >= self.checkpoint_changes() {
                            self.handoff_cv.notify_all();
                        }
                    }
                    if forced || stopping {
                        let mut h = self.handoff.lock();
                        h.force = h.force.max(req);
                        forced_upto = req;
                        self.handoff_cv.notify_all();
                    }
                    self.journal.committed(seq, durable);
                    if self.failing.load(Ordering::Relaxed) && !self.store_failing() {
                        self.recovered();
                    }
                    if stopping && self.journal.pending_len() == 0 {
                        return;
                    }
                }
                Err(e) => {
                    self.stats.failed_commits.fetch_add(1, Ordering::Relaxed);
                    self.fail(&e);
                    self.journal.restore(std::mem::take(&mut batch));
                    if stopping {
                        tracing::error!("final log append failed: {e}; unsaved changes are lost");
                        return;
                    }
                    std::thread::sleep(RETRY);
                }
            }
        }
    }

    fn store_failing(&self) -> bool {
        self.checkpoint_failing.load(Ordering::Relaxed)
    }

    fn checkpoint_loop(&self, store: &Store) {
        lower_priority();
        let mut last = Instant::now();
        loop {
            let (batches, last_rec, force, stop) = {
                let mut h = self.handoff.lock();
                loop {
                    let due = !h.batches.is_empty()
                        && (last.elapsed() >= CHECKPOINT_EVERY
                            || h.changes >= self.checkpoint_changes());
                    let forced = h.force > self.force_done.load(Ordering::Acquire);
                    if due || forced || h.stop || !self.jobs.lock().is_empty() {
                        break;
                    }
                    let left = CHECKPOINT_EVERY.saturating_sub(last.elapsed());
                    self.handoff_cv
                        .wait_for(&mut h, left.max(Duration::from_millis(5)));
                }
                // A forced checkpoint (SAVE, DEBUG RELOAD, shutdown) takes everything.
                let all = h.stop || h.force > self.force_done.load(Ordering::Acquire);
                let mut taken = Vec::new();
                let mut n = 0;
                while let Some(b) = h.batches.pop_front() {
                    n += b.1.len();
                    taken.push(b);
                    if !all && n >= self.checkpoint_changes() {
                        break;
                    }
                }
                h.changes -= n;
                let last_rec = match (h.batches.is_empty(), taken.last()) {
                    (false, Some((rec, _))) => *rec,
                    _ => h.last_rec,
                };
                (taken, last_rec, h.force, h.stop)
            };
            let count: usize = batches.iter().map(|(_, b)| b.len()).sum();
            if count > 0 || last_rec > self.applied.load(Ordering::Acquire) {
                let (recs, changes): (Vec<u64>, Vec<Vec<Change>>) = batches.into_iter().unzip();
                let applied = store.apply_logged(coalesced_in_key_order(&changes), last_rec);
                match applied {
                    Ok(()) => {
                        last = Instant::now();
                        self.applied.store(last_rec, Ordering::Release);
                        self.stats.checkpoints.fetch_add(1, Ordering::Relaxed);
                        self.stats
                            .unapplied
                            .fetch_sub(count as u64, Ordering::Relaxed);
                        self.stats
                            .rows_written
                            .store(store.rows_written(), Ordering::Relaxed);
                        // Connections held back by the backlog look again.
                        self.journal.wake_waiters();
                        self.recycle(changes);
                        if self.checkpoint_failing.swap(false, Ordering::AcqRel) {
                            self.recovered();
                        }
                    }
                    Err(e) => {
                        self.stats
                            .failed_checkpoints
                            .fetch_add(1, Ordering::Relaxed);
                        self.checkpoint_failing.store(true, Ordering::Release);
                        self.fail(&e);
                        // Keep them, ahead of anything handed over since.
                        let mut h = self.handoff.lock();
                        h.changes += count;
                        for b in recs.into_iter().zip(changes).rev() {
                            h.batches.push_front(b);
                        }
                        drop(h);
                        if stop {
                            tracing::error!(
                                "final checkpoint failed: {e}; the write-ahead log keeps the \
                                 changes for the next start"
                            );
                            return;
                        }
                        std::thread::sleep(RETRY);
                        continue;
                    }
                }
            }
            // Taken first: a guard in the `for` expression would hold the lock while the
            // jobs run, and a `with_store` caller meanwhile would wait for it.
            let jobs = std::mem::take(&mut *self.jobs.lock());
            for job in jobs {
                job(store);
            }
            if force > self.force_done.load(Ordering::Acquire) {
                self.force_done.fetch_max(force, Ordering::AcqRel);
                self.journal.wake_waiters();
            }
            if stop {
                return;
            }
        }
    }

    /// Empties applied batch vectors and keeps some (up to [`KEEP_BATCH`] changes of
    /// capacity in all) for the committer's next hand-overs.
    fn recycle(&self, batches: Vec<Vec<Change>>) {
        let mut room = KEEP_BATCH.saturating_sub(self.spare.lock().iter().map(Vec::capacity).sum());
        let mut keep = Vec::new();
        for mut b in batches {
            if b.capacity() <= room {
                room -= b.capacity();
                b.clear();
                keep.push(b);
            }
        }
        self.spare.lock().append(&mut keep);
    }

    fn recovered(&self) {
        if self.failing.swap(false, Ordering::AcqRel) {
            *self.failed.lock() = None;
            tracing::warn!("storage writes succeed again; accepting writes");
        }
    }

    fn fail(&self, e: &PersistError) {
        let text = e.to_string();
        if !self.failing.load(Ordering::Relaxed) {
            tracing::error!("storage write failed: {text}; refusing writes until it recovers");
        }
        *self.failed.lock() = Some(text);
        self.failing.store(true, Ordering::Release);
        // Writers waiting for durability must see it.
        self.journal.wake_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persist::{wal, LoadOptions};
    use crate::types::value::StrVal;
    use bytes::Bytes;

    fn set(i: usize) -> Change {
        Change::StrSet {
            db: 0,
            key: Bytes::from(format!("k{i}")),
            value: StrVal::from_set(Bytes::from(format!("v{i}"))),
            expire_at: None,
        }
    }

    fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                copy_dir(&e.path(), &to.join(e.file_name()));
            } else {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }

    /// A checkpoint takes only part of the backlog when it is large; the record number it
    /// stores must be that of its last batch, so a crash right after it replays the rest.
    /// The crash image is a copy of the files taken while the checkpointer is held (it is
    /// the only writer of the store).
    #[test]
    fn a_crash_after_a_partial_checkpoint_replays_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let log = wal::Wal::create(dir.path(), 1).unwrap();
        let p = Persistence::start(store, log, Fsync::EverySec).unwrap();
        p.set_unapplied_limit(400); // checkpoints of ~100 changes
        let hold = |p: &Arc<Persistence>| {
            let (release, held) = std::sync::mpsc::channel::<()>();
            let (tx, started) = std::sync::mpsc::channel::<()>();
            let p = p.clone();
            let t = std::thread::spawn(move || {
                p.with_store(move |_| {
                    tx.send(()).unwrap();
                    held.recv().ok();
                })
            });
            started.recv().unwrap();
            (release, t)
        };
        let (release, t) = hold(&p);
        // Ten log records of 100 changes each, queued behind the held checkpointer.
        for r in 0..10 {
            p.journal.append((r * 100..(r + 1) * 100).map(set));
            while p.stats.changes.load(Ordering::Relaxed) < (r as u64 + 1) * 100 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        assert_eq!(p.stats.commits.load(Ordering::Relaxed), 10);
        // Let exactly one checkpoint run: the next job runs right after it.
        let (p2, next) = (p.clone(), std::sync::mpsc::channel::<()>());
        let (release2, held2) = next;
        let (tx2, started2) = std::sync::mpsc::channel::<()>();
        let t2 = std::thread::spawn(move || {
            p2.with_store(move |_| {
                tx2.send(()).unwrap();
                held2.recv().ok();
            })
        });
        // The second job must be queued before the first ends, or the checkpointer runs
        // every due checkpoint first (a thread spawn can lag on a loaded box).
        while p.jobs.lock().is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
        release.send(()).unwrap();
        t.join().unwrap();
        started2.recv().unwrap();
        assert_eq!(p.stats.checkpoints.load(Ordering::Relaxed), 1);
        assert_eq!(
            p.stats.unapplied.load(Ordering::Relaxed),
            900,
            "one batch applied"
        );
        let image = tempfile::tempdir().unwrap();
        copy_dir(dir.path(), image.path());
        release2.send(()).unwrap();
        t2.join().unwrap();
        p.shutdown();

        let store = Store::open(image.path()).unwrap();
        let opts = LoadOptions::new(0);
        let rec = wal::recover(&store, &opts).unwrap();
        assert_eq!(
            rec.records, 9,
            "the nine records after the checkpoint are replayed"
        );
        let mut keys = 0;
        store.load(&opts, |_, _, _, _| keys += 1).unwrap();
        assert_eq!(keys, 1000);
    }
}
