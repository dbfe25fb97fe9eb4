//! Connections to one node.
//!
//! - Shared connections (`conns_per_node` per protocol): one task each owns a TcpStream;
//!   requests are written pipelined and replies matched FIFO to oneshot senders. A request
//!   is a batch: a client sends all the commands of one read batch that go to a node as
//!   one request, and gets their replies back as one contiguous chunk ([`Replies`]), so a
//!   channel send, a wake-up and an allocation are paid per batch, not per command. A
//!   client always uses the same shared connection of a node (sticky by client id) so its
//!   own commands to that node stay in order.
//! - Dedicated connections (at most `max_dedicated_per_node`, idle ones kept for reuse)
//!   for blocking commands and transactions: the client task drives them directly. When
//!   all are taken, clients queue for one (up to `dedicated_wait`) instead of failing.
//! - One subscriber connection ([`super::hub`]) shared by every subscribed client.
//!
//! What every connection knows of the node ([`NodeInfo`]) and the handshake ([`connect`])
//! live in [`super::link`], which the hub uses too.
//!
//! A node listed with replicas is served by its current primary ([`super::failover`]):
//! when the primary moves, shared connections finish what they wrote to the old one and
//! reconnect to the new one; idle dedicated connections are dropped, busy ones refuse
//! further writes and stop waiting for a blocking command's reply.
//!
//! A node that is down fails pending and new requests at once with
//! `ERR node <id> is unavailable: <reason>` (never its URL: it may hold a password); the
//! connection tasks reconnect with backoff (100 ms doubling to 2 s) and check an idle
//! connection with PING every second. Keys are never remapped to another node.

use super::config::{NodeSpec, ProxyConfig};
use super::link::{connect, send, Follow, NodeInfo, NodeStream, NodeWrite};
use super::resp;
use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::time::{sleep_until, Instant};

/// A node's reply (raw frame) or the full error text when it could not answer.
pub type NodeResult = Result<Bytes, String>;

/// The replies to one request of `count` commands: `frames` holds, in order, the complete
/// reply frames that came; when the connection failed first, `error` (the full error text)
/// answers each command after them.
#[derive(Debug, Default)]
pub struct Replies {
    pub frames: Bytes,
    pub error: Option<String>,
}

impl Replies {
    fn failed(e: String) -> Replies {
        Replies {
            frames: Bytes::new(),
            error: Some(e),
        }
    }
}

pub type BatchWait = oneshot::Receiver<Replies>;

/// The reply to a request of one command.
pub struct Wait(BatchWait);

impl std::future::Future for Wait {
    type Output = Result<NodeResult, oneshot::error::RecvError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx).map(|r| {
            r.map(|r| match r.error {
                Some(e) if r.frames.is_empty() => Err(e),
                _ => Ok(r.frames),
            })
        })
    }
}

const CONNECTING: u8 = 0;
const UP: u8 = 1;
const DOWN: u8 = 2;

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(2);
const HEALTH_EVERY: Duration = Duration::from_secs(1);
/// Idle dedicated connections kept per protocol.
const IDLE_DEDICATED: usize = 8;
/// Bytes written to a node in one batch before writing.
const WRITE_BATCH: usize = 1 << 20;

struct Req {
    /// `count` encoded commands.
    bytes: Bytes,
    count: usize,
    reply: oneshot::Sender<Replies>,
}

struct ConnHandle {
    tx: mpsc::UnboundedSender<Req>,
    state: Arc<AtomicU8>,
}

pub struct Node {
    pub info: Arc<NodeInfo>,
    /// Shared connections; `[0]` RESP2, `[1]` RESP3 (HELLO 3 sent on connect).
    shared: [Vec<ConnHandle>; 2],
    idle: [Mutex<Vec<Dedicated>>; 2],
    dedicated_slots: Arc<Semaphore>,
    max_dedicated: usize,
    /// How long a blocking or transaction client queues for a dedicated connection.
    dedicated_wait: Duration,
    /// Clients queued for a dedicated connection: a released one is then closed rather
    /// than kept idle, so its slot goes to them.
    queued: AtomicU64,
    /// The node's subscriber connection, shared by all subscribed clients.
    pub hub: super::hub::Hub,
}

/// `up`, `connecting` or `down` for INFO.
pub fn state_name(node: &Node) -> &'static str {
    let states = node
        .shared
        .iter()
        .flatten()
        .map(|c| c.state.load(Ordering::Relaxed));
    let mut connecting = false;
    for s in states {
        match s {
            UP => return "up",
            CONNECTING => connecting = true,
            _ => {}
        }
    }
    if connecting {
        "connecting"
    } else {
        "down"
    }
}

impl Node {
    /// Starts the node's shared connection tasks (on the current tokio runtime).
    pub fn start(spec: NodeSpec, cfg: &ProxyConfig) -> Node {
        let info = Arc::new(NodeInfo::new(spec, cfg));
        super::failover::start(&info);
        let conns = cfg.conns_per_node.max(1);
        let make = |resp3: bool| -> Vec<ConnHandle> {
            (0..conns)
                .map(|_| {
                    let (tx, rx) = mpsc::unbounded_channel();
                    let state = Arc::new(AtomicU8::new(CONNECTING));
                    tokio::spawn(shared_conn(info.clone(), resp3, rx, state.clone()));
                    ConnHandle { tx, state }
                })
                .collect()
        };
        Node {
            shared: [make(false), make(true)],
            idle: [Mutex::new(Vec::new()), Mutex::new(Vec::new())],
            dedicated_slots: Arc::new(Semaphore::new(cfg.max_dedicated_per_node.max(1))),
            max_dedicated: cfg.max_dedicated_per_node.max(1),
            dedicated_wait: cfg.dedicated_wait,
            queued: AtomicU64::new(0),
            hub: super::hub::Hub::start(info.clone()),
            info,
        }
    }

    pub fn id(&self) -> &str {
        &self.info.spec.id
    }

    /// (shared connections up, shared connections in all) over both protocols.
    pub fn shared_up(&self) -> (usize, usize) {
        let all = self.shared.iter().flatten();
        let up = all
            .clone()
            .filter(|c| c.state.load(Ordering::Relaxed) == UP)
            .count();
        (up, all.count())
    }

    /// Dedicated connections held by clients (blocking commands, transactions, pub/sub).
    pub fn dedicated_in_use(&self) -> usize {
        self.max_dedicated
            .saturating_sub(self.dedicated_slots.available_permits())
    }

    /// Sends one encoded command on the client's sticky shared connection.
    pub fn send(&self, resp3: bool, sticky: u64, bytes: Bytes) -> Wait {
        Wait(self.send_batch(resp3, sticky, bytes, 1))
    }

    /// Sends `count` encoded commands (in order) on the client's sticky shared connection;
    /// their replies come back together.
    pub fn send_batch(&self, resp3: bool, sticky: u64, bytes: Bytes, count: usize) -> BatchWait {
        self.info
            .requests
            .fetch_add(count as u64, Ordering::Relaxed);
        let conns = &self.shared[resp3 as usize];
        let first = (sticky % conns.len() as u64) as usize;
        // The sticky connection unless it is down and another is usable.
        let pick = (0..conns.len())
            .map(|i| &conns[(first + i) % conns.len()])
            .find(|c| c.state.load(Ordering::Relaxed) != DOWN);
        let (tx, rx) = oneshot::channel();
        let req = Req {
            bytes,
            count,
            reply: tx,
        };
        match pick {
            Some(c) => {
                if let Err(mpsc::error::SendError(req)) = c.tx.send(req) {
                    let e = self.info.unavailable("shutting down");
                    let _ = req.reply.send(Replies::failed(e));
                }
            }
            None => {
                self.info.errors.fetch_add(count as u64, Ordering::Relaxed);
                let reason = self.info.last_error();
                let _ = req
                    .reply
                    .send(Replies::failed(self.info.unavailable(&reason)));
            }
        }
        rx
    }

    /// True when every shared connection is down (a dedicated connection would fail too).
    fn is_down(&self) -> bool {
        state_name(self) == "down"
    }

    /// A dedicated connection (reused when idle, else a new one).
    pub async fn dedicated(&self, resp3: bool) -> Result<Dedicated, String> {
        self.info.requests.fetch_add(1, Ordering::Relaxed);
        if self.is_down() {
            self.info.errors.fetch_add(1, Ordering::Relaxed);
            let reason = self.info.last_error();
            return Err(self.info.unavailable(&reason));
        }
        let generation = self.info.generation.load(Ordering::Relaxed);
        loop {
            let Some(d) = self.idle[resp3 as usize].lock().pop() else {
                break;
            };
            if d.generation == generation {
                return Ok(d);
            }
        }
        let permit = self.slot().await?;
        let (stream, buf, follow) = connect(&self.info, resp3).await.map_err(|e| {
            self.info.errors.fetch_add(1, Ordering::Relaxed);
            self.info.unavailable(&e)
        })?;
        Ok(Dedicated {
            info: self.info.clone(),
            follow,
            stream,
            buf,
            resp3,
            generation,
            scan: resp::Scanner::default(),
            timeout: self.info.command_timeout,
            _permit: permit,
        })
    }

    /// A slot in the dedicated pool; when all are taken, waits in line (FIFO) for one, for
    /// `dedicated_wait`.
    async fn slot(&self) -> Result<OwnedSemaphorePermit, String> {
        let slots = self.dedicated_slots.clone();
        if let Ok(p) = slots.clone().try_acquire_owned() {
            return Ok(p);
        }
        self.queued.fetch_add(1, Ordering::Relaxed);
        let _unqueue = Unqueue(&self.queued);
        // One released just before we queued may sit idle, holding its slot.
        for idle in &self.idle {
            idle.lock().clear();
        }
        match tokio::time::timeout(self.dedicated_wait, slots.acquire_owned()).await {
            Ok(Ok(p)) => Ok(p),
            _ => {
                self.info.errors.fetch_add(1, Ordering::Relaxed);
                Err(format!(
                    "ERR too many blocking or transaction clients on node {}: none of its {} dedicated connections (max-dedicated-per-node) came free within {} ms (dedicated-wait-ms)",
                    self.id(),
                    self.max_dedicated,
                    self.dedicated_wait.as_millis()
                ))
            }
        }
    }

    /// Returns a dedicated connection in a clean state (no MULTI/WATCH/pending reply).
    pub fn release(&self, d: Dedicated) {
        if self.queued.load(Ordering::Relaxed) > 0 {
            return;
        }
        let mut idle = self.idle[d.resp3 as usize].lock();
        if idle.len() < IDLE_DEDICATED {
            idle.push(d);
        }
    }
}

/// Leaves the dedicated-connection queue however the wait ends (also when cancelled).
struct Unqueue<'a>(&'a AtomicU64);

impl Drop for Unqueue<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection owned by one client for a while.
pub struct Dedicated {
    info: Arc<NodeInfo>,
    follow: Follow,
    stream: NodeStream,
    buf: BytesMut,
    resp3: bool,
    generation: u64,
    scan: resp::Scanner,
    /// For replies that should come at once (not for blocking commands).
    timeout: Duration,
    _permit: OwnedSemaphorePermit,
}

impl Dedicated {
    /// Writes a request; refused once the node's primary moved away from this connection's
    /// address (a transaction WATCHed there, say, must not run on the old primary).
    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        if self.follow.has_moved() {
            return Err(MOVED.into());
        }
        send(&mut self.stream, bytes)
            .await
            .map_err(|e| e.to_string())
    }

    /// Reads one reply that should come at once (the command timeout applies).
    pub async fn read_prompt_reply(&mut self) -> Result<Bytes, String> {
        let t = self.timeout;
        tokio::time::timeout(t, self.read_frame(false))
            .await
            .unwrap_or_else(|_| Err("command timed out".into()))
    }

    /// Reads one reply (no timeout: blocking commands may wait for as long as they asked,
    /// but not past a move of the node's primary, where the keys they wait on now live).
    /// Cancel-safe.
    pub async fn read_reply(&mut self) -> Result<Bytes, String> {
        self.read_frame(true).await
    }

    async fn read_frame(&mut self, until_moved: bool) -> Result<Bytes, String> {
        loop {
            match self.scan.scan(&self.buf) {
                Ok(Some(n)) => {
                    self.info.check_reply(&self.buf[..n]);
                    return Ok(self.buf.split_to(n).freeze());
                }
                Ok(None) => {}
                Err(e) => return Err(format!("bad reply: {}", e.0)),
            }
            let got = tokio::select! {
                // A reply already there wins over the move.
                biased;
                got = self.stream.read_buf(&mut self.buf) => got,
                () = self.follow.moved(), if until_moved => return Err(MOVED.into()),
            };
            match got {
                Ok(0) => return Err("connection closed by the node".into()),
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

/// Why a connection made to the old primary gives up.
const MOVED: &str = "its primary moved";

/// A request written and awaiting its replies.
struct Sent {
    /// `None`: the proxy's own health PING.
    reply: Option<oneshot::Sender<Replies>>,
    count: usize,
    at: Instant,
}

/// What a connection has read: the first `taken` bytes of `buf` are the `got` complete
/// replies of the oldest request so far (they go out together once all have come).
struct Inbox {
    buf: BytesMut,
    taken: usize,
    got: usize,
    scan: resp::Scanner,
}

impl Inbox {
    fn new(buf: BytesMut) -> Inbox {
        Inbox {
            buf,
            taken: 0,
            got: 0,
            scan: resp::Scanner::default(),
        }
    }

    /// Hands every request whose replies have all come its chunk of them.
    fn dispatch(
        &mut self,
        info: &NodeInfo,
        pending: &mut VecDeque<Sent>,
        now: Instant,
    ) -> Result<(), String> {
        loop {
            let n = match self.scan.scan(&self.buf[self.taken..]) {
                Ok(Some(n)) => n,
                Ok(None) => return Ok(()),
                Err(e) => return Err(format!("bad reply: {}", e.0)),
            };
            if matches!(self.buf[self.taken], b'-' | b'!') {
                info.errors.fetch_add(1, Ordering::Relaxed);
                info.error_replies.fetch_add(1, Ordering::Relaxed);
                info.check_reply(&self.buf[self.taken..]);
            }
            self.taken += n;
            self.got += 1;
            if pending.front().is_some_and(|s| self.got < s.count) {
                continue;
            }
            let frames = self.buf.split_to(self.taken).freeze();
            self.taken = 0;
            self.got = 0;
            // A reply nobody waits for (the health PING, a client that went away, or one
            // the node sent unasked) is dropped.
            if let Some(sent) = pending.pop_front() {
                info.latency.record(now.saturating_duration_since(sent.at));
                if let Some(tx) = sent.reply {
                    info.in_flight
                        .fetch_sub(sent.count as u64, Ordering::Relaxed);
                    let _ = tx.send(Replies {
                        frames,
                        error: None,
                    });
                }
            }
        }
    }
}

/// One shared connection's life: connect, serve until it breaks, fail what was pending,
/// back off (failing new requests at once), reconnect. When the node's primary moves, it
/// stops writing, waits for the replies of what it wrote, and reconnects at once: requests
/// not yet written wait for the new connection instead of failing.
async fn shared_conn(
    info: Arc<NodeInfo>,
    resp3: bool,
    mut rx: mpsc::UnboundedReceiver<Req>,
    state: Arc<AtomicU8>,
) {
    let mut backoff = BACKOFF_MIN;
    let mut pending: VecDeque<Sent> = VecDeque::new();
    // A request taken off the queue just as the primary moved: the next connection's first.
    let mut held: Option<Req> = None;
    loop {
        // The replies of the oldest request that came before the connection broke.
        let mut partial = (Bytes::new(), 0);
        let mut follow = None;
        // What the primary was before connecting, for a failed connect to wait on.
        let before = info.follow();
        let reason = match connect(&info, resp3).await {
            Ok((stream, buf, f)) => {
                state.store(UP, Ordering::Relaxed);
                // Backoff grows only after a failure: this connection replaces a lost one.
                if backoff != BACKOFF_MIN {
                    info.reconnects.fetch_add(1, Ordering::Relaxed);
                }
                backoff = BACKOFF_MIN;
                let mut inbox = Inbox::new(buf);
                let f = follow.insert(f);
                let link = Serving {
                    info: &info,
                    rx: &mut rx,
                    pending: &mut pending,
                    held: &mut held,
                    follow: f,
                };
                match link.serve(stream, &mut inbox).await {
                    Stop::Shutdown => return,
                    Stop::Moved => continue,
                    Stop::Broke(reason) => {
                        partial = (inbox.buf.split_to(inbox.taken).freeze(), inbox.got);
                        reason
                    }
                }
            }
            Err(reason) => reason,
        };
        info.mark_failed(&reason);
        state.store(DOWN, Ordering::Relaxed);
        let err = info.unavailable(&reason);
        for sent in pending.drain(..) {
            let (frames, got) = std::mem::take(&mut partial);
            if let Some(tx) = sent.reply {
                info.in_flight
                    .fetch_sub(sent.count as u64, Ordering::Relaxed);
                info.errors
                    .fetch_add(sent.count.saturating_sub(got) as u64, Ordering::Relaxed);
                let _ = tx.send(Replies {
                    frames,
                    error: Some(err.clone()),
                });
            }
        }
        if let Some(req) = held.take() {
            info.errors.fetch_add(req.count as u64, Ordering::Relaxed);
            let _ = req.reply.send(Replies::failed(err.clone()));
        }
        let until = Instant::now() + backoff;
        // The primary moved since: no reason to wait before trying it.
        let mut follow = follow.unwrap_or(before);
        let moved = follow.moved();
        tokio::pin!(moved);
        loop {
            tokio::select! {
                // A move first: requests queued meanwhile go to the new primary.
                biased;
                () = &mut moved => break,
                _ = sleep_until(until) => break,
                req = rx.recv() => match req {
                    Some(req) => {
                        info.errors.fetch_add(req.count as u64, Ordering::Relaxed);
                        let _ = req.reply.send(Replies::failed(err.clone()));
                    }
                    None => return,
                },
            }
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// Why [`Serving::serve`] returned.
enum Stop {
    /// The proxy is shutting down.
    Shutdown,
    /// The connection failed: why.
    Broke(String),
    /// The primary moved and everything written has been answered: reconnect at once.
    Moved,
}

/// What a shared connection's serving borrows from its task.
struct Serving<'a> {
    info: &'a NodeInfo,
    rx: &'a mut mpsc::UnboundedReceiver<Req>,
    pending: &'a mut VecDeque<Sent>,
    held: &'a mut Option<Req>,
    follow: &'a mut Follow,
}

impl Serving<'_> {
    /// Writes `first` and whatever else is queued (up to a batch) as one write.
    async fn write(
        &mut self,
        wr: &mut NodeWrite,
        out: &mut Vec<u8>,
        first: Req,
    ) -> Result<(), String> {
        out.clear();
        let now = Instant::now();
        let mut next = Some(first);
        let mut count = 0;
        while let Some(req) = next {
            out.extend_from_slice(&req.bytes);
            count += req.count;
            self.pending.push_back(Sent {
                reply: Some(req.reply),
                count: req.count,
                at: now,
            });
            next = if out.len() < WRITE_BATCH {
                self.rx.try_recv().ok()
            } else {
                None
            };
        }
        self.info
            .in_flight
            .fetch_add(count as u64, Ordering::Relaxed);
        send(wr, out).await.map_err(|e| e.to_string())?;
        if out.capacity() > WRITE_BATCH * 2 {
            *out = Vec::with_capacity(16 * 1024);
        }
        Ok(())
    }

    /// Serves a connected stream until it breaks, the primary moves or the proxy stops.
    async fn serve(mut self, stream: NodeStream, inbox: &mut Inbox) -> Stop {
        let info = self.info;
        let (mut rd, mut wr) = stream.into_split();
        let mut out: Vec<u8> = Vec::with_capacity(16 * 1024);
        if let Some(req) = self.held.take() {
            if let Err(e) = self.write(&mut wr, &mut out, req).await {
                return Stop::Broke(e);
            }
        }
        let mut last_reply = Instant::now();
        let mut health = tokio::time::interval(HEALTH_EVERY);
        health.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // One timer for the oldest request's deadline, re-armed when it fires before it (a
        // deadline only moves later as replies come): not a timer registered per loop turn.
        let timer = sleep_until(Instant::now() + info.command_timeout);
        tokio::pin!(timer);
        // The primary moved: nothing more is written, the replies owed are awaited.
        let mut draining = false;
        loop {
            if draining && self.pending.is_empty() {
                return Stop::Moved;
            }
            tokio::select! {
                req = self.rx.recv(), if !draining => {
                    let Some(req) = req else { return Stop::Shutdown };
                    if self.follow.has_moved() {
                        *self.held = Some(req);
                        draining = true;
                        continue;
                    }
                    if let Err(e) = self.write(&mut wr, &mut out, req).await {
                        return Stop::Broke(e);
                    }
                }
                n = rd.read_buf(&mut inbox.buf) => {
                    match n {
                        Ok(0) => return Stop::Broke("connection closed by the node".into()),
                        Err(e) => return Stop::Broke(e.to_string()),
                        Ok(_) => {}
                    }
                    last_reply = Instant::now();
                    if let Err(e) = inbox.dispatch(info, self.pending, last_reply) {
                        return Stop::Broke(e);
                    }
                }
                () = &mut timer, if !self.pending.is_empty() => {
                    let deadline = self.pending.front().map(|s| s.at + info.command_timeout);
                    match deadline {
                        // Replies are matched by order: a missing one poisons the connection.
                        Some(d) if d <= Instant::now() => {
                            return Stop::Broke("command timed out".into())
                        }
                        Some(d) => timer.as_mut().reset(d),
                        None => {}
                    }
                }
                _ = health.tick(), if !draining => {
                    if self.pending.is_empty() && last_reply.elapsed() >= HEALTH_EVERY {
                        if let Err(e) = send(&mut wr, b"*1\r\n$4\r\nPING\r\n").await {
                            return Stop::Broke(e.to_string());
                        }
                        self.pending.push_back(Sent { reply: None, count: 1, at: Instant::now() });
                    }
                }
                () = self.follow.moved(), if !draining && self.follow.can_move() => draining = true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> NodeInfo {
        let spec = NodeSpec::parse("n=redis://127.0.0.1:1").unwrap();
        NodeInfo::new(spec, &ProxyConfig::default())
    }

    fn sent(count: usize) -> (Sent, oneshot::Receiver<Replies>) {
        let (tx, rx) = oneshot::channel();
        let s = Sent {
            reply: Some(tx),
            count,
            at: Instant::now(),
        };
        (s, rx)
    }

    /// Each request gets exactly its own replies, in one chunk, however the bytes arrive;
    /// a reply nobody waits for (the health PING) is dropped in its place.
    #[test]
    fn replies_go_back_per_request_in_one_chunk() {
        let stream: &[u8] = b"+OK\r\n$3\r\nabc\r\n-ERR x\r\n+PONG\r\n:1\r\n*2\r\n:1\r\n$-1\r\n";
        for step in [1, 2, 7, stream.len()] {
            let info = info();
            let (s1, mut rx1) = sent(3);
            let (s2, mut rx2) = sent(2);
            let mut pending: VecDeque<Sent> = VecDeque::from([
                s1,
                Sent {
                    reply: None,
                    count: 1,
                    at: Instant::now(),
                },
                s2,
            ]);
            // As `serve` counts them when written (the health PING is not counted).
            info.in_flight.store(5, Ordering::Relaxed);
            let mut inbox = Inbox::new(BytesMut::new());
            for piece in stream.chunks(step) {
                inbox.buf.extend_from_slice(piece);
                inbox.dispatch(&info, &mut pending, Instant::now()).unwrap();
            }
            let r1 = rx1.try_recv().unwrap();
            assert_eq!(&r1.frames[..], b"+OK\r\n$3\r\nabc\r\n-ERR x\r\n");
            assert!(r1.error.is_none());
            let r2 = rx2.try_recv().unwrap();
            assert_eq!(&r2.frames[..], b":1\r\n*2\r\n:1\r\n$-1\r\n");
            assert!(pending.is_empty() && inbox.buf.is_empty());
            assert_eq!(info.errors.load(Ordering::Relaxed), 1);
            assert_eq!(info.error_replies.load(Ordering::Relaxed), 1);
            assert_eq!(info.in_flight.load(Ordering::Relaxed), 0);
            assert_eq!(info.latency.count(), 3);
        }
    }

    /// Replies of a request still coming are held (and counted) until the last one: what a
    /// failed connection hands out with its error.
    #[test]
    fn a_request_in_progress_keeps_what_came() {
        let info = info();
        let (s, mut rx) = sent(3);
        let mut pending = VecDeque::from([s]);
        let mut inbox = Inbox::new(BytesMut::from(&b"+OK\r\n:7\r\n$5\r\nab"[..]));
        inbox.dispatch(&info, &mut pending, Instant::now()).unwrap();
        assert!(rx.try_recv().is_err());
        assert_eq!(
            (inbox.got, &inbox.buf[..inbox.taken]),
            (2, &b"+OK\r\n:7\r\n"[..])
        );
        // A bad reply poisons the connection.
        inbox.buf.extend_from_slice(b"cde\r\n?\r\n");
        assert!(inbox.dispatch(&info, &mut pending, Instant::now()).is_err());
        assert_eq!(rx.try_recv().unwrap().frames.len(), 20);
    }

    /// A one-command request's reply, or its error, through `Wait`.
    #[tokio::test]
    async fn wait_gives_the_reply_or_the_error() {
        let (tx, rx) = oneshot::channel();
        tx.send(Replies {
            frames: Bytes::from_static(b"+OK\r\n"),
            error: None,
        })
        .unwrap();
        assert_eq!(Wait(rx).await.unwrap().unwrap(), &b"+OK\r\n"[..]);
        let (tx, rx) = oneshot::channel();
        tx.send(Replies::failed("ERR node n is unavailable: x".into()))
            .unwrap();
        assert_eq!(
            Wait(rx).await.unwrap(),
            Err("ERR node n is unavailable: x".to_string())
        );
        let (tx, rx) = oneshot::channel::<Replies>();
        drop(tx);
        assert!(Wait(rx).await.is_err());
    }
}
