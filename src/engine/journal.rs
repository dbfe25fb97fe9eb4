//! The write journal of a durable keyspace (DESIGN.md §6): every command appends the changes
//! it made, in one piece, while it still holds its locks, so the journal's order is the order
//! in which commands took effect and a command (or a whole EXEC / script) is never split
//! across two commits. The committer takes everything appended so far and applies it in one
//! storage transaction (group commit).

use super::change::Change;
use parking_lot::{Condvar, Mutex};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

#[derive(Default)]
pub struct Journal {
    pending: Mutex<Pending>,
    /// Signalled when changes are appended (the committer waits on it).
    appended: Condvar,
    /// Sequence number of the last change made durable-or-committed (see `Committed`).
    committed: AtomicU64,
    durable: AtomicU64,
    /// Signalled after every commit (blocking waiters: SAVE, tests).
    commit_lock: Mutex<()>,
    commit_done: Condvar,
    /// Signalled by [`Journal::wake_waiters`] (a checkpoint, a failure, a policy change):
    /// async waiters for conditions other than durability (the checkpoint backlog).
    pub commit_notify: tokio::sync::Notify,
    /// Connections under `appendfsync always` waiting for their writes to be durable:
    /// (sequence number, waker). A commit wakes exactly those it made durable, not every
    /// waiter (the others would only wake to wait again).
    durable_waiters: Mutex<Vec<(u64, Waker)>>,
    /// Bumped by [`Journal::wake_waiters`]: a [`DurableWait`] created before it resolves.
    wake_gen: AtomicU64,
}

#[derive(Default)]
struct Pending {
    changes: Vec<Change>,
    /// Sequence number of the last change appended (1-based; 0 = none yet).
    seq: u64,
    /// `poke` was called since the committer last took: do not wait.
    poked: bool,
    /// The committer waits for this many pending changes (`gather`); appends below it do
    /// not wake it. 0 = not gathering: any append wakes it (from `take`).
    want: usize,
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
        // While the committer gathers, only the append that completes its batch wakes it
        // (a wake-up per command would cost a futex call and a context switch each).
        let wake = p.changes.len() >= p.want;
        drop(p);
        if wake {
            self.appended.notify_one();
        }
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
        p.want = n;
        while p.changes.len() < n && !p.poked {
            if self.appended.wait_until(&mut p, deadline).timed_out() {
                break;
            }
        }
        p.want = 0;
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
        if durable {
            self.wake_durable(|s| s <= seq);
        }
        let _g = self.commit_lock.lock();
        self.commit_done.notify_all();
    }

    /// Wakes everyone waiting for a commit (`wait_for` conditions that changed elsewhere):
    /// blocking waiters, `commit_notify` and every [`DurableWait`].
    pub fn wake_waiters(&self) {
        self.wake_gen.fetch_add(1, Ordering::AcqRel);
        self.wake_durable(|_| true);
        let _g = self.commit_lock.lock();
        self.commit_done.notify_all();
        self.commit_notify.notify_waiters();
    }

    /// Wakes (and forgets) the durability waiters whose sequence number passes `done`.
    fn wake_durable(&self, done: impl Fn(u64) -> bool) {
        let mut ready: smallvec::SmallVec<[Waker; 16]> = smallvec::SmallVec::new();
        {
            let mut w = self.durable_waiters.lock();
            let mut i = 0;
            while i < w.len() {
                if done(w[i].0) {
                    ready.push(w.swap_remove(i).1);
                } else {
                    i += 1;
                }
            }
        }
        // Outside the lock: a woken task polled at once on another thread registers again.
        for waker in ready {
            waker.wake();
        }
    }

    /// A future that resolves once everything up to `seq` is durable, or at the next
    /// [`Journal::wake_waiters`] after it was created (the caller re-checks what changed:
    /// a failure, the policy). Create it before checking those conditions, then await it.
    pub fn durable(&self, seq: u64) -> DurableWait<'_> {
        DurableWait {
            journal: self,
            seq,
            gen: self.wake_gen.load(Ordering::Acquire),
            registered: false,
        }
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

/// See [`Journal::durable`].
pub struct DurableWait<'a> {
    journal: &'a Journal,
    seq: u64,
    gen: u64,
    registered: bool,
}

impl DurableWait<'_> {
    fn done(&self) -> bool {
        self.journal.durable_seq() >= self.seq
            || self.journal.wake_gen.load(Ordering::Acquire) != self.gen
    }
}

impl Future for DurableWait<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.done() {
            return Poll::Ready(());
        }
        let j = self.journal;
        let mut w = j.durable_waiters.lock();
        // Checked again under the lock: the committer publishes the durable sequence number
        // (and `wake_waiters` its generation) before it takes the lock to wake waiters, so
        // either this sees it or that wake-up sees this waiter.
        if self.done() {
            return Poll::Ready(());
        }
        let seq = self.seq;
        // Polled again without being woken (a spurious poll): refresh, do not duplicate.
        let known = self.registered
            && w.iter_mut().any(|(s, wk)| {
                let same = wk.will_wake(cx.waker());
                if same {
                    *s = seq;
                }
                same
            });
        if !known {
            w.push((seq, cx.waker().clone()));
        }
        drop(w);
        self.registered = true;
        Poll::Pending
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

    struct Count(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for Count {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Polls `f` once with a waker that counts its wake-ups.
    fn poll_counted(f: &mut DurableWait<'_>) -> (bool, std::sync::Arc<Count>) {
        let count = std::sync::Arc::new(Count(Default::default()));
        (poll_with(f, &count), count)
    }

    fn poll_with(f: &mut DurableWait<'_>, count: &std::sync::Arc<Count>) -> bool {
        let waker = Waker::from(count.clone());
        Pin::new(f)
            .poll(&mut Context::from_waker(&waker))
            .is_ready()
    }

    #[test]
    fn a_commit_wakes_only_the_waiters_it_made_durable() {
        let j = Journal::new();
        j.append([del("a"), del("b"), del("c")].into_iter());
        let (mut w1, mut w3) = (j.durable(1), j.durable(3));
        let (r1, c1) = poll_counted(&mut w1);
        let (r3, c3) = poll_counted(&mut w3);
        assert!(!r1 && !r3);
        j.committed(2, false); // not durable: nobody wakes
        assert_eq!(c1.0.load(Ordering::Relaxed), 0);
        j.committed(2, true);
        assert_eq!(c1.0.load(Ordering::Relaxed), 1);
        assert_eq!(c3.0.load(Ordering::Relaxed), 0, "3 is not durable yet");
        assert!(poll_counted(&mut w1).0);
        // A spurious poll does not register twice; a general wake-up reaches everyone.
        assert!(!poll_with(&mut w3, &c3));
        assert_eq!(j.durable_waiters.lock().len(), 1);
        j.wake_waiters();
        assert_eq!(c3.0.load(Ordering::Relaxed), 1);
        assert!(
            poll_counted(&mut w3).0,
            "woken by wake_waiters: the caller re-checks"
        );
        // Created after the wake-up and before the commit: waits for the commit.
        let mut w3 = j.durable(3);
        assert!(!poll_counted(&mut w3).0);
        j.committed(3, true);
        assert!(poll_counted(&mut w3).0);
        assert!(j.durable_waiters.lock().is_empty());
    }
}
