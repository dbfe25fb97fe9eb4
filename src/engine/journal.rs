//! The write journal of a durable keyspace (DESIGN.md §6): every command appends the changes
//! it made, in one piece, while it still holds its locks, so the journal's order is the order
//! in which commands took effect and a command (or a whole EXEC / script) is never split
//! across two commits. The committer takes everything appended so far and applies it in one
//! storage transaction (group commit).

use super::change::Change;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[derive(Default)]
pub struct Journal {
    pending: Mutex<Pending>,
    /// Signalled when changes are appended (the committer waits on it).
    appended: Condvar,
    /// Sequence number of the last change made durable-or-committed (see `Committed`).
    committed: AtomicU64,
    durable: AtomicU64,
    /// Signalled after every commit (writers under `appendfsync always` wait on it).
    commit_lock: Mutex<()>,
    commit_done: Condvar,
    /// The same, for async waiters (connections under `appendfsync always`).
    pub commit_notify: tokio::sync::Notify,
}

#[derive(Default)]
struct Pending {
    changes: Vec<Change>,
    /// Sequence number of the last change appended (1-based; 0 = none yet).
    seq: u64,
    /// `poke` was called since the committer last took: do not wait.
    poked: bool,
}

impl Journal {
    pub fn new() -> Journal {
        Journal::default()
    }

    /// Appends one command's changes; returns the sequence number of its last change.
    pub fn append(&self, changes: impl ExactSizeIterator<Item = Change>) -> u64 {
        let mut p = self.pending.lock();
        p.seq += changes.len() as u64;
        p.changes.extend(changes);
        let seq = p.seq;
        drop(p);
        self.appended.notify_one();
        seq
    }

    /// The sequence number of the last change appended so far.
    pub fn appended_seq(&self) -> u64 {
        self.pending.lock().seq
    }

    /// Waits up to `timeout` for changes, then takes all of them with the sequence number of
    /// the last one.
    pub fn take(&self, timeout: Duration) -> (Vec<Change>, u64) {
        let mut batch = Vec::new();
        let seq = self.take_into(&mut batch, timeout);
        (batch, seq)
    }

    /// `take` into `batch` (which must be empty): the two buffers swap, so the committer and
    /// the writers reuse their allocations instead of growing a fresh vector every commit.
    pub fn take_into(&self, batch: &mut Vec<Change>, timeout: Duration) -> u64 {
        debug_assert!(batch.is_empty());
        let mut p = self.pending.lock();
        if p.changes.is_empty() && !p.poked {
            self.appended.wait_for(&mut p, timeout);
        }
        p.poked = false;
        std::mem::swap(&mut p.changes, batch);
        p.seq
    }

    /// Waits up to `timeout` until at least `n` changes are pending.
    pub fn gather(&self, n: usize, timeout: Duration) {
        let deadline = std::time::Instant::now() + timeout;
        let mut p = self.pending.lock();
        while p.changes.len() < n && !p.poked {
            if self.appended.wait_until(&mut p, deadline).timed_out() {
                return;
            }
        }
    }

    /// Puts back changes whose commit failed, ahead of anything appended since.
    pub fn restore(&self, mut changes: Vec<Change>) {
        let mut p = self.pending.lock();
        changes.append(&mut p.changes);
        p.changes = changes;
    }

    /// Changes appended and not yet taken by the committer.
    pub fn pending_len(&self) -> usize {
        self.pending.lock().changes.len()
    }

    /// Records a commit up to `seq` (durable or not) and wakes the waiters.
    pub fn committed(&self, seq: u64, durable: bool) {
        self.committed.store(seq, Ordering::Release);
        if durable {
            self.durable.store(seq, Ordering::Release);
        }
        let _g = self.commit_lock.lock();
        self.commit_done.notify_all();
        self.commit_notify.notify_waiters();
    }

    /// Wakes everyone waiting for a commit (`wait_for` conditions that changed elsewhere).
    pub fn wake_waiters(&self) {
        let _g = self.commit_lock.lock();
        self.commit_done.notify_all();
        self.commit_notify.notify_waiters();
    }

    pub fn durable_seq(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    pub fn committed_seq(&self) -> u64 {
        self.committed.load(Ordering::Acquire)
    }

    /// Blocks until everything up to `seq` is durable, or `timeout` passes; true if it is.
    pub fn wait_durable(&self, seq: u64, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let mut g = self.commit_lock.lock();
        while self.durable_seq() < seq {
            if self.commit_done.wait_until(&mut g, deadline).timed_out() {
                return self.durable_seq() >= seq;
            }
        }
        true
    }

    /// Blocks until `done()` holds (checked after every commit) or `timeout` passes.
    pub fn wait_for(&self, done: impl Fn() -> bool, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let mut g = self.commit_lock.lock();
        while !done() {
            if self.commit_done.wait_until(&mut g, deadline).timed_out() {
                return done();
            }
        }
        true
    }

    /// Wakes the committer (a forced durable commit, a job or shutdown was requested). If
    /// it is not waiting yet, its next `take` returns at once.
    pub fn poke(&self) {
        let mut p = self.pending.lock();
        p.poked = true;
        self.appended.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn del(k: &str) -> Change {
        Change::Del {
            db: 0,
            key: Bytes::copy_from_slice(k.as_bytes()),
        }
    }

    #[test]
    fn sequence_numbers_and_restore_order() {
        let j = Journal::new();
        assert_eq!(j.append([del("a"), del("b")].into_iter()), 2);
        assert_eq!(j.append([del("c")].into_iter()), 3);
        let (taken, seq) = j.take(Duration::ZERO);
        assert_eq!((taken.len(), seq), (3, 3));
        j.append([del("d")].into_iter());
        j.restore(taken);
        let (again, seq) = j.take(Duration::ZERO);
        assert_eq!(seq, 4);
        let keys: Vec<_> = again
            .iter()
            .map(|c| match c {
                Change::Del { key, .. } => key.clone(),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(keys, ["a", "b", "c", "d"]);
        j.committed(4, true);
        assert!(j.wait_durable(4, Duration::ZERO));
        assert!(!j.wait_durable(5, Duration::from_millis(1)));
    }
}
