//! Lazy freeing (Redis `lazyfree.c`): values and whole databases detached from the keyspace
//! are dropped on a thread of their own, so a command removing a million-member set answers
//! without walking it. INFO reports the objects queued and not yet freed
//! (`lazyfree_pending_objects`) and those freed so far (`lazyfreed_objects`, reset by
//! CONFIG RESETSTAT), counted as Redis counts them: one per value, one per key of a flushed
//! database.
//!
//! One thread per server (Redis's `BIO_LAZY_FREE` job queue), started on first use; it ends
//! when the server's [`LazyFree`] is dropped and the queue is drained.

use crate::types::value::{Entry, Value};
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, OnceLock};

/// Redis's `LAZYFREE_THRESHOLD`: a value whose free effort is at most this is dropped on
/// the spot (handing a few allocations to another thread costs more than freeing them).
pub const LAZYFREE_THRESHOLD: usize = 64;

/// The work dropping `v` takes (Redis `lazyfreeGetFreeEffort`): one for anything held in
/// a single allocation (strings and the compact encodings: listpack, intset), the quicklist
/// nodes of a list, the elements of a hash table or skiplist, and for a stream its radix
/// tree nodes plus each consumer group and its pending entries (the first group's count
/// standing for all, as Redis estimates it).
pub fn free_effort(v: &Value) -> usize {
    match v {
        Value::Str(_) => 1,
        Value::List(l) if l.quicklist_nodes() > 0 => l.quicklist_nodes(),
        Value::Set(s) if s.encoding() == "hashtable" => s.len(),
        Value::ZSet(z) if z.is_skiplist() => z.len(),
        Value::Hash(h) if !h.is_listpack() => h.len(),
        Value::Stream(s) => {
            // The tree has at least one node per listpack: past the threshold already,
            // no need to count the inner nodes (Redis keeps this estimate constant-time).
            let nodes = if s.node_count() > LAZYFREE_THRESHOLD {
                s.node_count()
            } else {
                s.radix_tree_nodes()
            };
            let groups = s
                .groups
                .values()
                .next()
                .map_or(0, |g| s.groups.len() * (1 + g.pel.len()));
            nodes + groups
        }
        _ => 1,
    }
}

/// Something to drop, and how many objects it counts for.
struct Job {
    garbage: Box<dyn Send>,
    objects: usize,
}

#[derive(Default)]
struct Counters {
    pending: AtomicUsize,
    freed: AtomicUsize,
    /// Held while `pending` is changed by the thread, so [`LazyFree::wait_idle`] can sleep.
    idle: Mutex<()>,
    done: Condvar,
}

impl Counters {
    fn finish(&self, objects: usize) {
        let _g = self.idle.lock();
        self.pending.fetch_sub(objects, Ordering::Relaxed);
        self.freed.fetch_add(objects, Ordering::Relaxed);
        self.done.notify_all();
    }
}

#[derive(Default)]
pub struct LazyFree {
    counters: Arc<Counters>,
    /// The queue to the thread; `None` inside when the thread could not be started (jobs
    /// are then dropped by the caller, still counted).
    queue: OnceLock<Option<Sender<Job>>>,
    /// `lazyfree-lazy-expire` (the command layer sets it from the config).
    lazy_expire: AtomicBool,
}

impl LazyFree {
    /// Queues `garbage` (counting as `objects`) for the lazyfree thread.
    pub fn free<T: Send + 'static>(&self, garbage: T, objects: usize) {
        self.counters.pending.fetch_add(objects, Ordering::Relaxed);
        let job = Job {
            garbage: Box::new(garbage),
            objects,
        };
        let job = match self.queue() {
            Some(tx) => match tx.send(job) {
                Ok(()) => return,
                Err(e) => e.0,
            },
            None => job,
        };
        // No thread to hand it to: free it here, as Redis would without its bio thread.
        drop(job.garbage);
        self.counters.finish(job.objects);
    }

    /// Redis `freeObjAsync`: a removed value worth more than [`LAZYFREE_THRESHOLD`] goes
    /// to the thread (one object); anything smaller is dropped here.
    pub fn free_entry(&self, e: Entry) {
        if free_effort(&e.value) > LAZYFREE_THRESHOLD {
            self.free(e, 1);
        }
    }

    pub fn set_lazy_expire(&self, on: bool) {
        self.lazy_expire.store(on, Ordering::Relaxed);
    }

    pub fn lazy_expire(&self) -> bool {
        self.lazy_expire.load(Ordering::Relaxed)
    }

    /// A value removed because its key expired (lazily or by the active sweep): freed as
    /// [`LazyFree::free_entry`] would under `lazyfree-lazy-expire`, here otherwise (Redis
    /// `deleteExpiredKeyAndPropagate`).
    pub fn free_expired(&self, e: Entry) {
        if self.lazy_expire() {
            self.free_entry(e);
        }
    }

    fn queue(&self) -> Option<&Sender<Job>> {
        self.queue
            .get_or_init(|| {
                let (tx, rx) = channel::<Job>();
                let counters = self.counters.clone();
                std::thread::Builder::new()
                    .name("lazyfree".into())
                    .spawn(move || {
                        for job in rx {
                            crate::alloc::drop_releasing(job.garbage);
                            counters.finish(job.objects);
                        }
                    })
                    .ok()
                    .map(|_| tx)
            })
            .as_ref()
    }

    /// INFO `lazyfree_pending_objects`.
    pub fn pending(&self) -> usize {
        self.counters.pending.load(Ordering::Relaxed)
    }

    /// INFO `lazyfreed_objects`.
    pub fn freed(&self) -> usize {
        self.counters.freed.load(Ordering::Relaxed)
    }

    /// CONFIG RESETSTAT (Redis `lazyfreeResetStats`): only the freed count; what is
    /// pending is still pending.
    pub fn reset_stats(&self) {
        self.counters.freed.store(0, Ordering::Relaxed);
    }

    /// Blocks until nothing is pending or `timeout` passes; true when idle (for tests).
    pub fn wait_idle(&self, timeout: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let mut g = self.counters.idle.lock();
        while self.pending() != 0 {
            if self.counters.done.wait_until(&mut g, deadline).timed_out() {
                return self.pending() == 0;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Drops signal a channel, so the test can hold the thread inside a drop.
    struct Gated(std::sync::mpsc::Receiver<()>);
    impl Drop for Gated {
        fn drop(&mut self) {
            let _ = self.0.recv_timeout(Duration::from_secs(10));
        }
    }

    #[test]
    fn counts_pending_then_freed() {
        let lf = LazyFree::default();
        let (open, gate) = std::sync::mpsc::channel();
        lf.free(Gated(gate), 1);
        lf.free(vec![0u8; 1000], 5);
        // The first job is held in its drop: both are pending.
        assert_eq!(lf.pending(), 6);
        assert_eq!(lf.freed(), 0);
        open.send(()).unwrap();
        assert!(lf.wait_idle(Duration::from_secs(10)));
        assert_eq!(lf.pending(), 0);
        assert_eq!(lf.freed(), 6);
        lf.reset_stats();
        assert_eq!(lf.freed(), 0);
    }

    #[test]
    fn reset_keeps_pending() {
        let lf = LazyFree::default();
        let (open, gate) = std::sync::mpsc::channel();
        lf.free(Gated(gate), 3);
        lf.reset_stats();
        assert_eq!(lf.pending(), 3);
        open.send(()).unwrap();
        assert!(lf.wait_idle(Duration::from_secs(10)));
        assert_eq!(lf.freed(), 3);
    }
}
