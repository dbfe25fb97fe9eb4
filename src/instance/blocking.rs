//! Clients blocked on keys (BLPOP, BZPOPMIN, XREAD BLOCK…), DESIGN.md §4.
//!
//! A blocking command that finds nothing registers a [`Waiter`] on each of its keys and its
//! connection awaits the waiter's reply. A write that may satisfy waiters marks the key
//! ready (`Access::signal_ready`); once that write's locks are released the dispatcher
//! serves the waiters of each ready key in FIFO order of blocking (Redis's order) by
//! re-running each waiter's command without blocking. A waiter is served at most once: its
//! state moves from `WAITING` to `SERVED` or `TIMED_OUT` by compare-and-swap, and only the
//! winner of that race produces or consumes a reply.

use crate::protocol::Reply;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use tokio::sync::oneshot;

const WAITING: u8 = 0;
const SERVED: u8 = 1;
const GONE: u8 = 2;

pub struct Waiter {
    pub id: u64,
    pub db: usize,
    /// The command to re-run when a key becomes ready (possibly rewritten at block time,
    /// e.g. `XREAD … $` resolved to a concrete ID).
    pub args: Vec<Bytes>,
    /// The keys it waits on.
    pub keys: Vec<Bytes>,
    /// The blocked client's session id.
    pub client_id: u64,
    /// The blocked client (its serving runs as that client for stats and CLIENT LIST).
    pub handle: Arc<super::clients::ClientHandle>,
    /// The reply when its timeout fires (or CLIENT UNBLOCK … TIMEOUT).
    pub timeout_reply: Reply,
    /// Whether the blocked client speaks RESP3 (replies are encoded by its connection, but
    /// some commands shape replies by protocol).
    pub resp3: bool,
    /// How long the attempt that blocked ran, in µs: what its stats record at the end.
    /// (Set by whoever blocks it, right after [`Blocking::block`].)
    pub exec_us: std::sync::atomic::AtomicU64,
    state: AtomicU8,
    tx: Mutex<Option<oneshot::Sender<Reply>>>,
}

impl Waiter {
    pub fn is_waiting(&self) -> bool {
        self.state.load(Ordering::Acquire) == WAITING
    }

    /// Claims the waiter for serving; false if it already timed out, left or was served.
    pub fn claim(&self) -> bool {
        self.state
            .compare_exchange(WAITING, SERVED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Returns a claimed waiter to waiting (serving found nothing for it after all).
    pub fn unclaim(&self) {
        self.state.store(WAITING, Ordering::Release);
    }

    /// Delivers the reply of a claimed waiter.
    pub fn deliver(&self, reply: Reply) {
        if let Some(tx) = self.tx.lock().take() {
            let _ = tx.send(reply);
        }
    }

    /// XREADGROUP waits for its stream to go away too (Redis `unblock_on_nokey`).
    pub fn unblock_on_nokey(&self) -> bool {
        self.args
            .first()
            .is_some_and(|c| c.eq_ignore_ascii_case(b"xreadgroup"))
    }

    /// Gives up waiting (timeout, disconnect); false if a reply is already on its way.
    pub fn abandon(&self) -> bool {
        self.state
            .compare_exchange(WAITING, GONE, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

type Queues = HashMap<(usize, Bytes), VecDeque<Arc<Waiter>>, ahash::RandomState>;

#[derive(Default)]
pub struct Blocking {
    next_id: AtomicU64,
    /// (db, key) → waiters in blocking order.
    queues: Mutex<Queues>,
    /// Number of clients currently blocked (INFO `blocked_clients`).
    pub blocked: AtomicU64,
}

impl Blocking {
    /// Registers a waiter on every key; returns it and the receiver of its reply.
    pub fn block(
        &self,
        db: usize,
        keys: Vec<Bytes>,
        args: Vec<Bytes>,
        handle: Arc<super::clients::ClientHandle>,
        resp3: bool,
        timeout_reply: Reply,
    ) -> (Arc<Waiter>, oneshot::Receiver<Reply>) {
        let (tx, rx) = oneshot::channel();
        let w = Arc::new(Waiter {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            db,
            args,
            keys,
            client_id: handle.id,
            handle,
            timeout_reply,
            resp3,
            exec_us: Default::default(),
            state: AtomicU8::new(WAITING),
            tx: Mutex::new(Some(tx)),
        });
        let mut q = self.queues.lock();
        for k in &w.keys {
            q.entry((db, k.clone())).or_default().push_back(w.clone());
        }
        self.blocked.fetch_add(1, Ordering::Relaxed);
        (w, rx)
    }

    /// Removes a waiter from every queue it is in (after it was served or gave up).
    pub fn remove(&self, w: &Arc<Waiter>) {
        let mut q = self.queues.lock();
        for k in &w.keys {
            let key = (w.db, k.clone());
            if let Some(v) = q.get_mut(&key) {
                v.retain(|x| !Arc::ptr_eq(x, w));
                if v.is_empty() {
                    q.remove(&key);
                }
            }
        }
        self.blocked.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn is_empty(&self) -> bool {
        self.blocked.load(Ordering::Relaxed) == 0
    }

    /// The waiters of a key, oldest first, that are still waiting.
    pub fn waiters(&self, db: usize, key: &[u8]) -> Vec<Arc<Waiter>> {
        let q = self.queues.lock();
        q.get(&(db, Bytes::copy_from_slice(key)))
            .map(|v| v.iter().filter(|w| w.is_waiting()).cloned().collect())
            .unwrap_or_default()
    }

    /// The waiter of a blocked client (CLIENT UNBLOCK), if it is still waiting.
    pub fn of_client(&self, client_id: u64) -> Option<Arc<Waiter>> {
        let q = self.queues.lock();
        q.values()
            .flat_map(|v| v.iter())
            .find(|w| w.client_id == client_id && w.is_waiting())
            .cloned()
    }

    /// INFO's `total_blocking_keys` and `total_blocking_keys_on_nokey`: keys with a
    /// blocked client, and those among them with an XREADGROUP reader (Redis wakes those
    /// when the key is deleted or replaced, see `cmd::blocking::serve_ready`).
    pub fn key_counts(&self) -> (usize, usize) {
        let q = self.queues.lock();
        let nokey = q
            .values()
            .filter(|v| v.iter().any(|w| w.unblock_on_nokey()))
            .count();
        (q.len(), nokey)
    }

    /// The keys clients are blocked on in `db` (FLUSHDB/FLUSHALL and SWAPDB signal them so
    /// their waiters re-check, as Redis's `scanDatabaseFor{Deleted,Ready}Keys` do).
    pub fn keys_in_db(&self, db: usize) -> Vec<Bytes> {
        self.queues
            .lock()
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_and_single_claim() {
        let b = Blocking::default();
        let clients = crate::instance::clients::Clients::default();
        let addr: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
        let (h1, h2) = (
            clients.register(addr, addr, 0),
            clients.register(addr, addr, 0),
        );
        let (w1, _r1) = b.block(
            0,
            vec![Bytes::from_static(b"k")],
            vec![],
            h1,
            false,
            Reply::Nil,
        );
        let (w2, _r2) = b.block(
            0,
            vec![Bytes::from_static(b"k")],
            vec![],
            h2,
            false,
            Reply::Nil,
        );
        let ws = b.waiters(0, b"k");
        assert_eq!(
            ws.iter().map(|w| w.client_id).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert!(w1.claim());
        w1.unclaim();
        assert!(w1.claim());
        assert!(!w1.claim());
        assert!(!w1.abandon(), "a served waiter cannot also time out");
        assert!(w2.abandon());
        assert!(!w2.claim(), "a waiter that gave up is never served");
        b.remove(&w1);
        b.remove(&w2);
        assert!(b.waiters(0, b"k").is_empty());
        assert!(b.is_empty());
    }
}
