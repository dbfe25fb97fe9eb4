//! Registry of connected clients, for CLIENT LIST/INFO/KILL and INFO clients.

use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// What other connections may read or ask of a client.
pub struct ClientHandle {
    pub id: u64,
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    pub created_ms: u64,
    pub info: Mutex<ClientInfo>,
    /// Notified to ask the connection to close (CLIENT KILL, shutdown).
    pub kill: Notify,
    pub killed: std::sync::atomic::AtomicBool,
    /// Registry id of the last command (`usize::MAX` before the first). Atomics rather than
    /// fields of `info`, so the per-command bookkeeping takes no lock.
    pub last_cmd: std::sync::atomic::AtomicUsize,
    pub last_interaction_ms: AtomicU64,
    /// What the connection holds in memory, for CLIENT LIST and INFO clients.
    pub mem: ConnMem,
    /// Client-side caching invalidations queued for this connection by others.
    pub pushes: Pushes,
}

/// Most invalidation bytes a connection may have waiting: past this its client is closed
/// (a tracking client that never reads must not hold the server's memory; the normal
/// output buffer limits apply once they reach the connection's replies).
const PUSHES_CAP: usize = 64 * 1024 * 1024;

/// Invalidations other connections queued for this one (client-side caching). Its
/// connection writes them after the reply of the command it is running, as Redis sends a
/// client's own invalidations after its reply: an invalidation caused by a write that ran
/// after a read never reaches the client before that read's reply.
#[derive(Default)]
pub struct Pushes {
    queue: Mutex<std::collections::VecDeque<super::pubsub::Push>>,
    /// Set while the queue holds something: the connection checks it after each command
    /// with one relaxed load.
    pending: std::sync::atomic::AtomicBool,
    /// Wakes an idle connection.
    pub notify: Notify,
}

impl Pushes {
    #[inline]
    pub fn pending(&self) -> bool {
        self.pending.load(Ordering::Relaxed)
    }

    /// Queues `p` for `h`'s connection (this `Pushes` is `h.pushes`); a queue over its
    /// cap closes the client instead.
    pub fn push(h: &ClientHandle, p: super::pubsub::Push) {
        let me = &h.pushes;
        let size = p.size();
        let mut q = me.queue.lock();
        let bytes = h.mem.inval_bytes.load(Ordering::Relaxed) + size;
        if bytes > PUSHES_CAP {
            q.clear();
            h.mem.inval_bytes.store(0, Ordering::Relaxed);
            me.pending.store(false, Ordering::Relaxed);
            drop(q);
            if !h.is_killed() {
                tracing::warn!(
                    "Client id={} scheduled to be closed ASAP for overcoming of output buffer limits.",
                    h.id
                );
                h.kill();
            }
            return;
        }
        q.push_back(p);
        h.mem.inval_bytes.store(bytes, Ordering::Relaxed);
        let first = !me.pending.swap(true, Ordering::Relaxed);
        drop(q);
        if first {
            me.notify.notify_one();
        }
    }

    /// Encodes everything queued onto `out`, in `resp3` or RESP2.
    pub fn drain(h: &ClientHandle, out: &mut bytes::BytesMut, resp3: bool) {
        let me = &h.pushes;
        let taken = {
            let mut q = me.queue.lock();
            me.pending.store(false, Ordering::Relaxed);
            h.mem.inval_bytes.store(0, Ordering::Relaxed);
            std::mem::take(&mut *q)
        };
        for p in taken {
            p.encode(out, resp3);
        }
    }

    /// Drops whatever is queued (the connection is gone).
    pub fn clear(h: &ClientHandle) {
        h.pushes.queue.lock().clear();
        h.pushes.pending.store(false, Ordering::Relaxed);
        h.mem.inval_bytes.store(0, Ordering::Relaxed);
    }
}

/// A connection's buffers as its task last reported them (plain stores, no lock: the
/// connection updates them per command and per write, readers only sample them).
#[derive(Default)]
pub struct ConnMem {
    /// Unparsed input bytes (`qbuf`) and the input buffer's capacity.
    pub qbuf: AtomicUsize,
    pub qbuf_cap: AtomicUsize,
    /// Arguments of a command held while the client is blocked (`argv-mem`).
    pub argv: AtomicUsize,
    /// Argument bytes of the commands queued by MULTI (`multi-mem`), and how many
    /// commands (`multi`).
    pub multi: AtomicUsize,
    pub multi_cmds: AtomicUsize,
    /// Bytes of the session's WATCH list (its entries and their key copies): part of
    /// `multi-mem`, as Redis counts its watched-keys list there.
    pub watched: AtomicUsize,
    /// The subscription sets' overhead (`Subscriptions::mem_overhead`): in `tot-mem`.
    pub pubsub: AtomicUsize,
    /// The client's CLIENT TRACKING BCAST prefixes (their bytes and set entries): in
    /// `tot-mem`, as Redis counts its prefix tree's nodes.
    pub tracking_prefixes: AtomicUsize,
    /// Encoded replies not yet written to the socket, the write buffer's capacity, and the
    /// most it held since it was last reallocated (`rbp`).
    pub out_pending: AtomicUsize,
    pub out_cap: AtomicUsize,
    pub out_peak: AtomicUsize,
    /// Pub/Sub messages queued for the client and not yet encoded: count and bytes.
    pub pushes: AtomicUsize,
    pub push_bytes: AtomicUsize,
    /// MONITOR lines queued for the client and not yet taken: count and bytes.
    pub monitor_lines: AtomicUsize,
    pub monitor_bytes: AtomicUsize,
    /// Invalidations queued for the client and not yet encoded (bytes).
    pub inval_bytes: AtomicUsize,
}

/// Bytes of the write buffer that CLIENT LIST reports as the static reply buffer (`obl`);
/// what is pending beyond it counts as the reply list (`oll`/`omem`), as in Redis.
pub const REPLY_CHUNK: usize = 16 * 1024;

/// The CLIENT LIST memory fields of one connection (networking.c `catClientInfoString`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemView {
    pub qbuf: usize,
    pub qbuf_free: usize,
    pub argv_mem: usize,
    pub multi_mem: usize,
    pub rbs: usize,
    pub rbp: usize,
    pub obl: usize,
    pub oll: usize,
    pub omem: usize,
    pub tot_mem: usize,
}

/// What a connection costs besides its buffers: its task, session and registry entry.
const CONN_OVERHEAD: usize = 2048;

impl ConnMem {
    pub fn view(&self) -> MemView {
        let ld = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        let (qbuf, qcap) = (ld(&self.qbuf), ld(&self.qbuf_cap));
        let (pending, out_cap) = (ld(&self.out_pending), ld(&self.out_cap));
        let pushes = ld(&self.pushes) + ld(&self.monitor_lines);
        let push_bytes = ld(&self.push_bytes) + ld(&self.monitor_bytes) + ld(&self.inval_bytes);
        let obl = pending.min(REPLY_CHUNK);
        let rest = pending - obl;
        let omem = rest + push_bytes;
        let (argv_mem, multi_mem) = (ld(&self.argv), ld(&self.multi) + ld(&self.watched));
        MemView {
            qbuf,
            qbuf_free: qcap.saturating_sub(qbuf),
            argv_mem,
            multi_mem,
            rbs: out_cap.max(REPLY_CHUNK),
            rbp: ld(&self.out_peak),
            obl,
            oll: rest.div_ceil(REPLY_CHUNK) + pushes,
            omem,
            tot_mem: qcap.max(qbuf)
                + out_cap.max(pending)
                + push_bytes
                + argv_mem
                + multi_mem
                + ld(&self.pubsub)
                + ld(&self.tracking_prefixes)
                + CONN_OVERHEAD,
        }
    }

    /// Input held for INFO's `client_recent_max_input_buffer` (Redis counts the query
    /// buffer's allocation and the arguments).
    pub fn input_usage(&self) -> usize {
        self.qbuf_cap.load(Ordering::Relaxed) + self.argv.load(Ordering::Relaxed)
    }

    /// Output held, for `client_recent_max_output_buffer`.
    pub fn output_usage(&self) -> usize {
        let v = self.view();
        v.obl + v.omem
    }

    /// Everything the connection holds (`tot-mem`), for client eviction.
    pub fn total(&self) -> usize {
        self.view().tot_mem
    }
}

#[derive(Default, Clone)]
pub struct ClientInfo {
    pub name: Option<Bytes>,
    pub lib_name: Option<Bytes>,
    pub lib_ver: Option<Bytes>,
    pub db: usize,
    pub resp: u8,
    pub multi: i64,
    pub watch: usize,
    pub user: String,
    pub no_evict: bool,
    pub no_touch: bool,
    /// Socket descriptor for CLIENT LIST (`-1` until the connection reports it).
    pub fd: i64,
    /// Pub/Sub subscriptions (channels, patterns, shard channels), kept by the pubsub code.
    pub sub: usize,
    pub psub: usize,
    pub ssub: usize,
    /// Waiting in a blocking command (CLIENT LIST flag `b`).
    pub blocked: bool,
    /// A command held back by CLIENT PAUSE (flag `b` too, as Redis's postponed clients are
    /// blocked, but not counted in `blocked_clients`).
    pub postponed: bool,
    /// In MONITOR mode (flag `O`).
    pub monitor: bool,
    /// Blocked with a timeout (INFO `clients_in_timeout_table`).
    pub block_timeout: bool,
    /// Client-side caching: `instance::tracking`'s flags (0: not tracking) and the
    /// redirection client id, for CLIENT LIST (`t`, `R`, `B`, `redir=`).
    pub tracking: u8,
    pub redir: u64,
}

impl ClientInfo {
    /// Subscribed to anything: the client is of type `pubsub` (flag `P`).
    pub fn is_pubsub(&self) -> bool {
        self.sub + self.psub + self.ssub > 0
    }
}

impl ClientHandle {
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.kill.notify_one();
    }
    /// The command table id of the last command run (`usize::MAX` before any).
    pub fn last_cmd_id(&self) -> usize {
        self.last_cmd.load(Ordering::Relaxed)
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    /// Connected over loopback (what Redis calls a local client).
    pub fn is_local(&self) -> bool {
        self.addr.ip().is_loopback()
    }
}

/// Client eviction (`maxmemory-clients`): what INFO reports and how often the clients
/// are summed.
#[derive(Default)]
pub struct Eviction {
    /// INFO stats `evicted_clients`.
    pub evicted: AtomicU64,
    /// When the clients were last summed (microseconds on the server's clock), so a busy
    /// server sums them at most once per [`Eviction::EVERY_US`] unless a client grew a lot.
    pub last_check_us: AtomicU64,
    /// Over the limit with nothing left to evict was logged (until back under).
    pub warned: std::sync::atomic::AtomicBool,
    /// Each evictable client's memory bucket when last seen, and when it entered it.
    buckets: Mutex<std::collections::HashMap<u64, (usize, u64)>>,
    entered: AtomicU64,
}

/// Redis's client memory buckets (`CLIENT_MEM_USAGE_BUCKET_MIN_LOG`/`MAX_LOG`): one per
/// power of two from 32 KB to 8 GB, everything smaller in the first, larger in the last.
const BUCKET_MIN_LOG: u32 = 15;
const BUCKET_MAX_LOG: u32 = 33;

/// The bucket of a client holding `mem` bytes (Redis's `getMemUsageBucket`).
pub fn mem_bucket(mem: usize) -> usize {
    let bits = usize::BITS - mem.leading_zeros();
    (bits.clamp(BUCKET_MIN_LOG, BUCKET_MAX_LOG) - BUCKET_MIN_LOG) as usize
}

impl Eviction {
    pub const EVERY_US: u64 = 10_000;

    /// Orders eviction candidates (memory, client) as Redis's `evictClients` visits them:
    /// the largest bucket first and, within a bucket, the client that entered it first
    /// (Redis appends a client to its new bucket's list). A client is seen entering a
    /// bucket when a check finds it there and not before; clients gone are forgotten.
    pub fn order(&self, candidates: &mut [(usize, Arc<ClientHandle>)]) {
        let mut seen = self.buckets.lock();
        let mut keyed: Vec<(usize, u64)> = Vec::with_capacity(candidates.len());
        for (mem, h) in candidates.iter() {
            let b = mem_bucket(*mem);
            let e = seen.entry(h.id).or_insert((usize::MAX, 0));
            if e.0 != b {
                *e = (b, self.entered.fetch_add(1, Ordering::Relaxed));
            }
            keyed.push(*e);
        }
        if seen.len() > candidates.len() {
            let live: std::collections::HashSet<u64> =
                candidates.iter().map(|(_, h)| h.id).collect();
            seen.retain(|id, _| live.contains(id));
        }
        drop(seen);
        let mut idx: Vec<usize> = (0..candidates.len()).collect();
        idx.sort_by_key(|&i| (std::cmp::Reverse(keyed[i].0), keyed[i].1));
        let sorted: Vec<(usize, Arc<ClientHandle>)> =
            idx.iter().map(|&i| candidates[i].clone()).collect();
        candidates.clone_from_slice(&sorted);
    }
}

#[derive(Default)]
pub struct Clients {
    next_id: AtomicU64,
    map: Mutex<BTreeMap<u64, Arc<ClientHandle>>>,
}

impl Clients {
    pub fn register(&self, addr: SocketAddr, laddr: SocketAddr, now_ms: u64) -> Arc<ClientHandle> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let h = Self::handle(id, addr, laddr, now_ms);
        self.map.lock().insert(id, h.clone());
        h
    }

    /// A handle for an internal session (a test server's inspection): id 0, not listed and
    /// not counted, and no client id is used up, so clients see the ids a fresh Redis gives.
    pub fn detached(now_ms: u64) -> Arc<ClientHandle> {
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        Self::handle(0, addr, addr, now_ms)
    }

    fn handle(id: u64, addr: SocketAddr, laddr: SocketAddr, now_ms: u64) -> Arc<ClientHandle> {
        Arc::new(ClientHandle {
            id,
            addr,
            laddr,
            created_ms: now_ms,
            info: Mutex::new(ClientInfo {
                resp: 2,
                user: "default".into(),
                multi: -1,
                fd: -1,
                ..Default::default()
            }),
            kill: Notify::new(),
            killed: false.into(),
            last_cmd: std::sync::atomic::AtomicUsize::new(usize::MAX),
            last_interaction_ms: AtomicU64::new(now_ms),
            mem: ConnMem::default(),
            pushes: Pushes::default(),
        })
    }

    pub fn unregister(&self, id: u64) {
        self.map.lock().remove(&id);
    }

    pub fn count(&self) -> usize {
        self.map.lock().len()
    }

    pub fn all(&self) -> Vec<Arc<ClientHandle>> {
        self.map.lock().values().cloned().collect()
    }

    pub fn get(&self, id: u64) -> Option<Arc<ClientHandle>> {
        self.map.lock().get(&id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_redis_powers_of_two() {
        assert_eq!(mem_bucket(0), 0);
        assert_eq!(mem_bucket(32 * 1024 - 1), 0);
        assert_eq!(mem_bucket(32 * 1024), 1);
        assert_eq!(mem_bucket(64 * 1024 - 1), 1);
        assert_eq!(mem_bucket(64 * 1024), 2);
        assert_eq!(mem_bucket(usize::MAX), 18);
    }

    #[test]
    fn eviction_visits_larger_buckets_first_then_who_entered_first() {
        let clients = Clients::default();
        let addr = SocketAddr::from(([127, 0, 0, 1], 1));
        let [a, b, c, d] = [(); 4].map(|_| clients.register(addr, addr, 0));
        let ev = Eviction::default();
        let ids = |v: &[(usize, Arc<ClientHandle>)]| v.iter().map(|x| x.1.id).collect::<Vec<_>>();
        let mut v = vec![
            (10, a.clone()),
            (100 * 1024, b.clone()),
            (40 * 1024, c.clone()),
            (10, d.clone()),
        ];
        ev.order(&mut v);
        assert_eq!(ids(&v), [b.id, c.id, a.id, d.id]);
        // `a` grows into `c`'s bucket after it: still after `c`, though larger.
        let mut v = vec![
            (50 * 1024, a.clone()),
            (100 * 1024, b.clone()),
            (40 * 1024, c.clone()),
            (10, d.clone()),
        ];
        ev.order(&mut v);
        assert_eq!(ids(&v), [b.id, c.id, a.id, d.id]);
        // `c` leaves the bucket and comes back: now it entered after `a`.
        let mut v = vec![(50 * 1024, a.clone()), (10, c.clone())];
        ev.order(&mut v);
        let mut v = vec![
            (10, d.clone()),
            (40 * 1024, c.clone()),
            (50 * 1024, a.clone()),
            (100 * 1024, b.clone()),
        ];
        ev.order(&mut v);
        assert_eq!(ids(&v), [b.id, a.id, c.id, d.id]);
        ev.order(&mut [(10, d.clone())]);
        assert_eq!(ev.buckets.lock().len(), 1, "gone clients are forgotten");
    }
}
