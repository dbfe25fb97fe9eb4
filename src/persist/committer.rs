//! The committer (DESIGN.md §6): one thread takes everything the journal holds and applies
//! it to the store in one transaction — group commit across all connections.
//!
//! - `appendfsync always`: every commit is durable; writers wait for it before replying.
//! - `everysec` (the default): commits are not durable, plus a durable one at least every
//!   second (redb frees pages only at durable commits, so this also bounds file growth).
//! - `no`: non-durable commits, and a durable one every 30 s (the kernel's usual write-back
//!   horizon) and at shutdown.
//!
//! A failed commit keeps its changes (they are retried, in order, ahead of newer ones) and
//! marks the store failed: write commands are refused with `-MISCONF` until a commit
//! succeeds again; reads go on.

use super::{PersistError, Store};
use crate::config::ConfigStore;
use crate::engine::journal::Journal;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How often a failed store is retried.
const RETRY: Duration = Duration::from_millis(100);
/// Outside `always`, commits are at most this frequent: each redb transaction has a fixed
/// cost, and these modes promise nothing finer than a second anyway.
const BATCH_EVERY: Duration = Duration::from_millis(10);

/// Capacity of the batch buffer kept between commits (changes).
const KEEP_BATCH: usize = 1 << 16;

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
    pub commits: AtomicU64,
    pub durable_commits: AtomicU64,
    pub changes: AtomicU64,
    pub failed_commits: AtomicU64,
    /// Rows the committed transactions wrote (see `Store::rows_written`).
    pub rows_written: AtomicU64,
    /// Unix seconds of the last durable commit.
    pub last_durable_unix: AtomicU64,
}

/// The durable engine of a running server: the store, its journal and the committer thread.
pub struct Persistence {
    pub journal: Arc<Journal>,
    /// The `appendfsync` policy (an `Fsync`), refreshed by `CONFIG SET`; read before every
    /// commit and by every connection that wrote, so it is kept out of the config store.
    mode: AtomicU8,
    /// Where the store lives (the committer thread owns the store itself, so it is closed,
    /// and its file lock released, when the thread ends).
    pub path: std::path::PathBuf,
    /// The next this-many commits fail as if the disk did (tests of the error path).
    inject_failures: AtomicU64,
    pub stats: Stats,
    /// Set while the store fails: the error text for `-MISCONF`.
    failed: Mutex<Option<String>>,
    failing: AtomicBool,
    /// A durable commit was requested (SAVE, shutdown) up to this journal sequence number.
    /// Durable commits requested (SAVE, BGSAVE) and served so far.
    force_req: AtomicU64,
    force_done: AtomicU64,
    stop: AtomicBool,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Work that needs the store itself (DEBUG RELOAD's load), run by the committer thread.
    jobs: Mutex<Vec<Job>>,
}

type Job = Box<dyn FnOnce(&Store) + Send>;

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Persistence {
    /// Starts the committer thread for `store` under the `appendfsync` policy `mode`
    /// (`set_mode` changes it; the next commit follows).
    pub fn start(store: Store, mode: Fsync) -> std::io::Result<Arc<Persistence>> {
        let p = Arc::new(Persistence {
            mode: AtomicU8::new(mode.to_u8()),
            path: store.path().to_path_buf(),
            inject_failures: AtomicU64::new(0),
            journal: Arc::new(Journal::new()),
            stats: Stats::default(),
            failed: Mutex::new(None),
            failing: AtomicBool::new(false),
            force_req: AtomicU64::new(0),
            force_done: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            thread: Mutex::new(None),
            jobs: Mutex::new(Vec::new()),
        });
        p.stats
            .last_durable_unix
            .store(unix_secs(), Ordering::Relaxed);
        let me = p.clone();
        let handle = std::thread::Builder::new()
            .name("respite-committer".into())
            .spawn(move || me.run(&store))?;
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
    }

    /// The error text while the store fails (`None` when healthy).
    #[inline]
    pub fn failure(&self) -> Option<String> {
        if !self.failing.load(Ordering::Relaxed) {
            return None;
        }
        self.failed.lock().clone()
    }

    /// Requests a durable commit of everything appended so far and waits for it (SAVE,
    /// BGSAVE, shutdown); false if it did not happen within `timeout`.
    pub fn sync(&self, timeout: Duration) -> bool {
        let req = self.force_req.fetch_add(1, Ordering::AcqRel) + 1;
        self.journal.poke();
        // A durable commit after the request holds everything appended before it.
        self.journal
            .wait_for(|| self.force_done.load(Ordering::Acquire) >= req, timeout)
    }

    /// Final durable commit, then stops the committer thread.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::Release);
        self.journal.poke();
        if let Some(h) = self.thread.lock().take() {
            let _ = h.join();
        }
    }

    /// Runs `f` with the store on the committer thread (between commits) and returns its
    /// result; `None` if the committer has stopped.
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
        self.journal.poke();
        rx.recv_timeout(Duration::from_secs(600)).ok()
    }

    /// Makes the next `n` commits fail with an injected error.
    pub fn fail_next_commits(&self, n: u64) {
        self.inject_failures.store(n, Ordering::Release);
    }

    fn run(&self, store: &Store) {
        let mut last_durable = Instant::now();
        let mut last_commit = Instant::now();
        // Highest sequence number committed, and whether that commit was durable.
        let mut committed = 0u64;
        let mut durable_seq = 0u64;
        let mut batch = Vec::new();
        loop {
            let stopping = self.stop.load(Ordering::Acquire);
            for job in std::mem::take(&mut *self.jobs.lock()) {
                job(store);
            }
            let mode = self.mode();
            let wait = if self.failing.load(Ordering::Relaxed) {
                RETRY
            } else {
                match mode {
                    Fsync::Always => Duration::from_millis(100),
                    _ => mode
                        .durable_every()
                        .saturating_sub(last_durable.elapsed())
                        .max(Duration::from_millis(1)),
                }
            };
            if mode != Fsync::Always && !stopping {
                let since = last_commit.elapsed();
                if since < BATCH_EVERY {
                    std::thread::sleep(BATCH_EVERY - since);
                }
            }
            // Capped: a stop or job request made just before the wait is seen soon.
            let seq = if stopping {
                self.journal.take_into(&mut batch, Duration::ZERO)
            } else {
                self.journal
                    .take_into(&mut batch, wait.min(Duration::from_millis(100)))
            };
            let req = self.force_req.load(Ordering::Acquire);
            let forced = req > self.force_done.load(Ordering::Acquire);
            let due = last_durable.elapsed() >= mode.durable_every();
            let durable =
                mode == Fsync::Always || forced || stopping || (due && committed > durable_seq);
            if batch.is_empty() && !(durable && (committed > durable_seq || forced)) {
                if stopping {
                    return;
                }
                if due {
                    last_durable = Instant::now();
                }
                continue;
            }
            let n = batch.len() as u64;
            super::coalesce::coalesce(&mut batch);
            let injected = self
                .inject_failures
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                .is_ok();
            let result = if injected {
                Err(PersistError::Injected)
            } else if batch.is_empty() {
                store.sync()
            } else {
                store.apply(&batch, durable)
            };
            match result {
                Ok(()) => {
                    last_commit = Instant::now();
                    committed = seq;
                    self.stats.commits.fetch_add(1, Ordering::Relaxed);
                    self.stats.changes.fetch_add(n, Ordering::Relaxed);
                    self.stats
                        .rows_written
                        .store(store.rows_written(), Ordering::Relaxed);
                    if durable {
                        self.force_done.fetch_max(req, Ordering::AcqRel);
                        durable_seq = seq;
                        last_durable = Instant::now();
                        self.stats.durable_commits.fetch_add(1, Ordering::Relaxed);
                        self.stats
                            .last_durable_unix
                            .store(unix_secs(), Ordering::Relaxed);
                    }
                    self.journal.committed(seq, durable);
                    // Dropped here, on this thread; a rare huge batch does not pin its memory.
                    batch.clear();
                    if batch.capacity() > KEEP_BATCH {
                        batch = Vec::new();
                    }
                    if self.failing.swap(false, Ordering::AcqRel) {
                        *self.failed.lock() = None;
                        tracing::warn!("storage writes succeed again; accepting writes");
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
                        tracing::error!("final commit failed: {e}; unsaved changes are lost");
                        return;
                    }
                    std::thread::sleep(RETRY);
                }
            }
        }
    }

    fn fail(&self, e: &PersistError) {
        let text = e.to_string();
        if !self.failing.load(Ordering::Relaxed) {
            tracing::error!("storage commit failed: {text}; refusing writes until it recovers");
        }
        *self.failed.lock() = Some(text);
        self.failing.store(true, Ordering::Release);
    }
}
