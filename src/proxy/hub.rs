//! One node's subscriber connection, shared by every proxy client subscribed there.
//!
//! Messages carry their channel (or pattern), so one connection per node can serve all the
//! proxy's subscribers: the node is subscribed to the union of their channels, patterns and
//! shard channels, each name once, and every message is handed to the clients registered
//! for its name. A single task owns the connection and the registrations, so a message is
//! either dispatched before a client's (un)registration is processed or after it, never
//! in between.
//!
//! The first client of a name makes the hub send the node a (P|S)SUBSCRIBE; its request
//! completes when the node has confirmed it (later clients of a name whose confirmation is
//! still awaited wait for the same one). The last client leaving a name makes the hub
//! unsubscribe the node. If the connection breaks, the hub reconnects with backoff and
//! subscribes the node again to everything registered (messages published meanwhile are
//! lost, as they would be for a Redis client reconnecting). The connection opens on the
//! first subscription and speaks RESP2; RESP3 clients get the messages as `>` pushes.
//!
//! Below `pubsub.rs` (the client's side), which imports [`Kind`] and [`Incoming`] from here;
//! the node's address and handshake come from `link.rs`, not from `node.rs` (a `Node` owns
//! its hub).

use super::link::{connect, send, Follow, NodeInfo, NodeStream, NodeWrite};
use super::resp::{self, Frame};
use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{sleep_until, Instant};

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(2);
const HEALTH_EVERY: Duration = Duration::from_secs(1);
/// Names per (re)subscribe command sent to the node.
const NAMES_PER_COMMAND: usize = 1024;
/// Messages waiting for a slow subscriber beyond this disconnect it (Redis's
/// `client-output-buffer-limit pubsub 32mb` plays the same role).
pub const MAX_QUEUED: usize = 32 << 20;

/// A message frame for the client (already in its protocol), or why its subscriptions
/// broke (it is then disconnected).
pub type Incoming = Result<Bytes, String>;

/// The three kinds of subscription, each its own name space on the node.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl Kind {
    pub fn of(cmd: &str) -> Option<(Kind, bool)> {
        Some(match cmd {
            "subscribe" => (Kind::Channel, true),
            "unsubscribe" => (Kind::Channel, false),
            "psubscribe" => (Kind::Pattern, true),
            "punsubscribe" => (Kind::Pattern, false),
            "ssubscribe" => (Kind::Shard, true),
            "sunsubscribe" => (Kind::Shard, false),
            _ => return None,
        })
    }

    /// The (un)subscribe command names, as confirmations to the client carry them.
    pub(super) fn names(self) -> (&'static str, &'static str) {
        match self {
            Kind::Channel => ("subscribe", "unsubscribe"),
            Kind::Pattern => ("psubscribe", "punsubscribe"),
            Kind::Shard => ("ssubscribe", "sunsubscribe"),
        }
    }
}

/// Where a client's messages go.
#[derive(Clone)]
pub struct Sink {
    pub tx: mpsc::UnboundedSender<Incoming>,
    /// Bytes handed to the client task and not yet written to its socket.
    pub queued: Arc<AtomicUsize>,
    /// Woken when the client went over the limit: it is closed even while its writes
    /// are stuck on a client that does not read.
    pub overflow: Arc<tokio::sync::Notify>,
    pub resp3: bool,
}

enum Op {
    Sub {
        client: u64,
        sink: Sink,
        kind: Kind,
        names: Vec<Bytes>,
        done: oneshot::Sender<Result<(), String>>,
    },
    Unsub {
        client: u64,
        kind: Kind,
        names: Vec<Bytes>,
        done: oneshot::Sender<Result<(), String>>,
    },
    Leave {
        client: u64,
    },
}

/// A hub's answer to come.
pub struct Pending(oneshot::Receiver<Result<(), String>>);

impl Pending {
    pub async fn wait(self) -> Result<(), String> {
        self.0
            .await
            .unwrap_or_else(|_| Err("ERR the proxy is shutting down".into()))
    }
}

/// The handle clients use; the task runs until every handle is gone.
#[derive(Clone)]
pub struct Hub {
    tx: mpsc::UnboundedSender<Op>,
    /// Names the node is subscribed to for the proxy (for INFO).
    names: Arc<AtomicUsize>,
    counts: Arc<Mutex<Counts>>,
}

/// Clients per name, read by PUBLISH (the node counts the hub once per name).
#[derive(Default)]
struct Counts {
    /// Channels and shard channels.
    names: HashMap<Name, usize>,
    patterns: HashMap<Bytes, usize>,
}

impl Hub {
    pub fn start(info: Arc<NodeInfo>) -> Hub {
        let (tx, rx) = mpsc::unbounded_channel();
        let names = Arc::new(AtomicUsize::new(0));
        let counts = Arc::new(Mutex::new(Counts::default()));
        let task = Task {
            counts: counts.clone(),
            info,
            rx,
            subs: HashMap::new(),
            members: HashMap::new(),
            inflight: VecDeque::new(),
            next_cmd: 0,
            waiting: HashMap::new(),
            next_req: 0,
            names: names.clone(),
            leaving: Vec::new(),
        };
        tokio::spawn(task.run());
        Hub { tx, names, counts }
    }

    /// Receivers a PUBLISH (or SPUBLISH, `shard`) to `channel` on this node reaches beyond
    /// what the node counts: it counts the hub once per matching name, a single Redis
    /// would count every client.
    pub fn extra_receivers(&self, shard: bool, channel: &[u8]) -> i64 {
        let c = self.counts.lock();
        if c.names.is_empty() && c.patterns.is_empty() {
            return 0;
        }
        let kind = if shard { Kind::Shard } else { Kind::Channel };
        let direct = c
            .names
            .get(&(kind, Bytes::copy_from_slice(channel)))
            .map_or(0, |n| n - 1);
        let patterns: usize = if shard {
            0
        } else {
            c.patterns
                .iter()
                .filter(|(p, _)| crate::types::glob::glob_match(p, channel, false))
                .map(|(_, n)| n - 1)
                .sum()
        };
        (direct + patterns) as i64
    }

    pub fn names(&self) -> usize {
        self.names.load(Ordering::Relaxed)
    }

    /// Registers `client` for `names`; the answer is Ok once the node confirmed every one
    /// of them. (Sent at once, awaited by the caller: several hubs confirm in parallel.)
    pub fn subscribe(&self, client: u64, sink: Sink, kind: Kind, names: Vec<Bytes>) -> Pending {
        let (done, rx) = oneshot::channel();
        let _ = self.tx.send(Op::Sub {
            client,
            sink,
            kind,
            names,
            done,
        });
        Pending(rx)
    }

    /// Unregisters `client` from `names`: once the answer came, no message for them is
    /// queued to the client any more.
    pub fn unsubscribe(&self, client: u64, kind: Kind, names: Vec<Bytes>) -> Pending {
        let (done, rx) = oneshot::channel();
        let _ = self.tx.send(Op::Unsub {
            client,
            kind,
            names,
            done,
        });
        Pending(rx)
    }

    /// Drops every registration of `client` (it went away or sent RESET).
    pub fn leave(&self, client: u64) {
        let _ = self.tx.send(Op::Leave { client });
    }
}

type Name = (Kind, Bytes);

impl Counts {
    fn set(&mut self, (kind, name): &Name, n: usize) {
        fn put<K: std::hash::Hash + Eq>(m: &mut HashMap<K, usize>, k: K, n: usize) {
            if n == 0 {
                m.remove(&k);
            } else {
                m.insert(k, n);
            }
        }
        match kind {
            Kind::Pattern => put(&mut self.patterns, name.clone(), n),
            _ => put(&mut self.names, (*kind, name.clone()), n),
        }
    }
}

/// The clients of one name.
struct Entry {
    clients: HashMap<u64, Sink>,
    /// The command whose confirmation makes this name live on the node, while awaited.
    pending: Option<u64>,
}

/// A command sent to the node, awaiting its replies (one per name; one for PING; a single
/// error if the node refused the whole command).
struct Cmd {
    id: u64,
    left: usize,
    sent: Instant,
    /// Subscriptions it makes (removed again if the node refuses them).
    subscribes: Option<(Kind, Vec<Bytes>)>,
    /// Client requests waiting for it.
    waiters: Vec<u64>,
}

struct Waiting {
    left: usize,
    done: oneshot::Sender<Result<(), String>>,
    error: Option<String>,
}

struct Task {
    info: Arc<NodeInfo>,
    rx: mpsc::UnboundedReceiver<Op>,
    subs: HashMap<Name, Entry>,
    /// Each client's names, to drop them all when it leaves.
    members: HashMap<u64, HashSet<Name>>,
    inflight: VecDeque<Cmd>,
    next_cmd: u64,
    waiting: HashMap<u64, Waiting>,
    next_req: u64,
    names: Arc<AtomicUsize>,
    counts: Arc<Mutex<Counts>>,
    leaving: Vec<u64>,
}

fn command_name(kind: Kind, subscribe: bool) -> &'static [u8] {
    match (kind, subscribe) {
        (Kind::Channel, true) => b"SUBSCRIBE",
        (Kind::Channel, false) => b"UNSUBSCRIBE",
        (Kind::Pattern, true) => b"PSUBSCRIBE",
        (Kind::Pattern, false) => b"PUNSUBSCRIBE",
        (Kind::Shard, true) => b"SSUBSCRIBE",
        (Kind::Shard, false) => b"SUNSUBSCRIBE",
    }
}

/// What a frame from the node's subscriber connection is.
enum FromNode {
    /// A message for the clients of this name.
    Message(Name),
    /// The reply to the oldest command in flight.
    Reply,
    /// The node refused the oldest command in flight.
    Refused(String),
}

fn bulk_of(raw: &Bytes) -> Option<Bytes> {
    match resp::decode(raw) {
        Ok(Frame::Bulk(b)) => Some(b),
        _ => None,
    }
}

fn classify(frame: &Bytes) -> Result<FromNode, String> {
    match resp::decode(frame) {
        Ok(Frame::Array(kids)) if !kids.is_empty() => {
            let kind = bulk_of(&kids[0]).ok_or("unexpected subscriber frame")?;
            let name = |i: usize| kids.get(i).and_then(bulk_of);
            let msg = |kind, n: Option<Bytes>| {
                n.map(|n| FromNode::Message((kind, n)))
                    .ok_or_else(|| "bad message frame".to_string())
            };
            match &kind[..] {
                b"message" if kids.len() == 3 => msg(Kind::Channel, name(1)),
                b"pmessage" if kids.len() == 4 => msg(Kind::Pattern, name(1)),
                b"smessage" if kids.len() == 3 => msg(Kind::Shard, name(1)),
                b"subscribe" | b"unsubscribe" | b"psubscribe" | b"punsubscribe" | b"ssubscribe"
                | b"sunsubscribe" | b"pong" => Ok(FromNode::Reply),
                _ => Err("unexpected subscriber frame".into()),
            }
        }
        Ok(Frame::Status(_)) => Ok(FromNode::Reply),
        Ok(Frame::Error(e)) => Ok(FromNode::Refused(String::from_utf8_lossy(&e).into_owned())),
        _ => Err("unexpected subscriber frame".into()),
    }
}

impl Task {
    async fn run(mut self) {
        let mut backoff = BACKOFF_MIN;
        let mut first: Option<Op> = None;
        loop {
            if self.subs.is_empty() {
                // Nothing to subscribe again: connect when a client needs the node.
                loop {
                    match self.rx.recv().await {
                        None => return,
                        Some(op @ Op::Sub { .. }) => {
                            first = Some(op);
                            break;
                        }
                        Some(op) => self.apply(op, None),
                    }
                }
            }
            // What the primary was before connecting, for a failed connect to wait on.
            let mut follow = self.info.follow();
            let reason = match connect(&self.info, false).await {
                Ok((stream, buf, f)) => {
                    backoff = BACKOFF_MIN;
                    follow = f;
                    match self.serve(stream, buf, first.take(), &mut follow).await {
                        Some(reason) => reason,
                        None => return,
                    }
                }
                Err(reason) => reason,
            };
            tracing::info!(
                "subscriber connection to node {} lost: {reason}",
                self.info.spec.id
            );
            let err = self.info.unavailable(&reason);
            self.broken(&err);
            if let Some(op) = first.take() {
                self.apply(op, Some(&err));
            }
            let until = Instant::now() + backoff;
            // The primary moved since: no reason to wait before trying it.
            let moved = follow.moved();
            tokio::pin!(moved);
            loop {
                tokio::select! {
                    // A move first: subscriptions asked meanwhile go to the new primary.
                    biased;
                    () = &mut moved => break,
                    _ = sleep_until(until) => break,
                    op = self.rx.recv() => match op {
                        None => return,
                        Some(op) => self.apply(op, Some(&err)),
                    },
                }
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    /// Applies a client's request while there is no connection: subscriptions fail with
    /// the node's error `down`; the rest only changes the registrations (the reconnect
    /// subscribes the node to whatever is registered then).
    fn apply(&mut self, op: Op, down: Option<&str>) {
        let mut out = Vec::new();
        match op {
            Op::Sub { done, .. } => {
                let e = down.unwrap_or("ERR the node connection is not ready");
                let _ = done.send(Err(e.to_string()));
            }
            op => self.apply_connected(op, &mut out),
        }
        // Nothing was sent: no command is awaited, and an unsubscribe is done at once.
        for cmd in std::mem::take(&mut self.inflight) {
            self.finish(cmd, None);
        }
        for e in self.subs.values_mut() {
            e.pending = None;
        }
    }

    /// Fails everything in flight; registrations stay, to be subscribed again.
    fn broken(&mut self, err: &str) {
        for cmd in std::mem::take(&mut self.inflight) {
            self.finish(cmd, Some(err));
        }
        for e in self.subs.values_mut() {
            e.pending = None;
        }
    }

    /// Queues a command for the node.
    fn send(&mut self, out: &mut Vec<u8>, kind: Kind, subscribe: bool, names: Vec<Bytes>) -> u64 {
        let id = self.next_cmd;
        self.next_cmd += 1;
        out.push(b'*');
        out.extend_from_slice(itoa::Buffer::new().format(names.len() + 1).as_bytes());
        out.extend_from_slice(b"\r\n");
        for a in std::iter::once(command_name(kind, subscribe)).chain(names.iter().map(|n| &n[..]))
        {
            out.push(b'$');
            out.extend_from_slice(itoa::Buffer::new().format(a.len()).as_bytes());
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        if subscribe {
            for n in &names {
                if let Some(e) = self.subs.get_mut(&(kind, n.clone())) {
                    e.pending = Some(id);
                }
            }
        }
        self.inflight.push_back(Cmd {
            id,
            left: names.len(),
            sent: Instant::now(),
            subscribes: subscribe.then_some((kind, names)),
            waiters: Vec::new(),
        });
        id
    }

    fn apply_connected(&mut self, op: Op, out: &mut Vec<u8>) {
        match op {
            Op::Sub {
                client,
                sink,
                kind,
                names,
                done,
            } => {
                let mut deps: HashSet<u64> = HashSet::new();
                let mut fresh = Vec::new();
                let member = self.members.entry(client).or_default();
                for n in names {
                    let key = (kind, n);
                    member.insert(key.clone());
                    let e = self.subs.entry(key.clone()).or_insert_with(|| Entry {
                        clients: HashMap::new(),
                        pending: None,
                    });
                    let new = e.clients.is_empty();
                    e.clients.insert(client, sink.clone());
                    let n = e.clients.len();
                    self.counts.lock().set(&key, n);
                    if new {
                        fresh.push(key.1);
                    } else if let Some(c) = e.pending {
                        deps.insert(c);
                    }
                }
                for chunk in fresh.chunks(NAMES_PER_COMMAND) {
                    deps.insert(self.send(out, kind, true, chunk.to_vec()));
                }
                self.names.store(self.subs.len(), Ordering::Relaxed);
                self.wait_for(deps, done);
            }
            Op::Unsub {
                client,
                kind,
                names,
                done,
            } => {
                let gone: Vec<Name> = names.into_iter().map(|n| (kind, n)).collect();
                // Answered once the node has dropped the names nobody else wants: a PUBLISH
                // sent after the client's UNSUBSCRIBE reply must not count the proxy.
                let sent = self.remove(client, gone, out);
                self.wait_for(sent, done);
            }
            Op::Leave { client } => {
                if let Some(names) = self.members.get(&client) {
                    let names: Vec<Name> = names.iter().cloned().collect();
                    self.remove(client, names, out);
                }
            }
        }
    }

    /// Answers `done` once every command in `deps` has its replies (at once if none).
    fn wait_for(&mut self, deps: HashSet<u64>, done: oneshot::Sender<Result<(), String>>) {
        if deps.is_empty() {
            let _ = done.send(Ok(()));
            return;
        }
        let req = self.next_req;
        self.next_req += 1;
        let front = self.inflight.front().map_or(0, |c| c.id);
        for d in &deps {
            self.inflight[(d - front) as usize].waiters.push(req);
        }
        self.waiting.insert(
            req,
            Waiting {
                left: deps.len(),
                done,
                error: None,
            },
        );
    }

    /// Unregisters `client` from `names`; names nobody wants any more are unsubscribed.
    /// Returns the commands sent for them.
    fn remove(&mut self, client: u64, names: Vec<Name>, out: &mut Vec<u8>) -> HashSet<u64> {
        let mut idle: HashMap<Kind, Vec<Bytes>> = HashMap::new();
        if let Some(m) = self.members.get_mut(&client) {
            for n in &names {
                m.remove(n);
            }
            if m.is_empty() {
                self.members.remove(&client);
            }
        }
        for n in names {
            let Some(e) = self.subs.get_mut(&n) else {
                continue;
            };
            if e.clients.remove(&client).is_none() {
                continue;
            }
            self.counts.lock().set(&n, e.clients.len());
            if e.clients.is_empty() {
                self.subs.remove(&n);
                idle.entry(n.0).or_default().push(n.1);
            }
        }
        let mut sent = HashSet::new();
        for (kind, names) in idle {
            for chunk in names.chunks(NAMES_PER_COMMAND) {
                sent.insert(self.send(out, kind, false, chunk.to_vec()));
            }
        }
        self.names.store(self.subs.len(), Ordering::Relaxed);
        sent
    }

    /// A command got all its replies (or failed with `err`): its waiters are answered.
    fn finish(&mut self, cmd: Cmd, err: Option<&str>) {
        if let Some((kind, names)) = &cmd.subscribes {
            for n in names {
                if let Some(e) = self.subs.get_mut(&(*kind, n.clone())) {
                    if e.pending == Some(cmd.id) {
                        e.pending = None;
                    }
                }
            }
        }
        for req in cmd.waiters {
            let Some(w) = self.waiting.get_mut(&req) else {
                continue;
            };
            if let Some(e) = err {
                w.error.get_or_insert_with(|| e.to_string());
            }
            w.left -= 1;
            if w.left == 0 {
                let w = self.waiting.remove(&req).expect("present");
                let _ = w.done.send(match w.error {
                    Some(e) => Err(e),
                    None => Ok(()),
                });
            }
        }
    }

    /// The node refused a command (e.g. an ACL forbids a channel): the names it would
    /// have subscribed are not live, so their registrations go (every client waiting for
    /// them gets the node's error).
    fn refused(&mut self, cmd: Cmd, e: &str) {
        if let Some((kind, names)) = &cmd.subscribes {
            for n in names {
                let key = (*kind, n.clone());
                if self
                    .subs
                    .get(&key)
                    .is_some_and(|e| e.pending == Some(cmd.id))
                {
                    let e = self.subs.remove(&key).expect("present");
                    self.counts.lock().set(&key, 0);
                    for c in e.clients.keys() {
                        if let Some(m) = self.members.get_mut(c) {
                            m.remove(&key);
                        }
                    }
                }
            }
            self.members.retain(|_, m| !m.is_empty());
            self.names.store(self.subs.len(), Ordering::Relaxed);
        }
        self.finish(cmd, Some(e));
    }

    /// Hands a message to the clients of its name.
    fn dispatch(&mut self, name: &Name, frame: Bytes) {
        let Some(e) = self.subs.get(name) else {
            return;
        };
        let mut push: Option<Bytes> = None;
        for (&id, sink) in &e.clients {
            let f = if sink.resp3 {
                push.get_or_insert_with(|| {
                    // `*` and `>` aggregates have the same body.
                    let mut b = BytesMut::from(&frame[..]);
                    b[0] = b'>';
                    b.freeze()
                })
                .clone()
            } else {
                frame.clone()
            };
            let len = f.len();
            if sink.queued.fetch_add(len, Ordering::Relaxed) + len > MAX_QUEUED {
                let _ = sink
                    .tx
                    .send(Err("subscriber too slow: output limit reached".into()));
                sink.overflow.notify_one();
                self.leaving.push(id);
            } else if sink.tx.send(Ok(f)).is_err() {
                self.leaving.push(id);
            }
        }
    }

    /// Serves a connection; returns why it broke (None: every handle is gone).
    async fn serve(
        &mut self,
        stream: NodeStream,
        mut buf: BytesMut,
        first: Option<Op>,
        follow: &mut Follow,
    ) -> Option<String> {
        let (mut rd, mut wr) = stream.into_split();
        let mut out = Vec::new();
        // Everything registered (after a reconnect) is subscribed again.
        let mut again: HashMap<Kind, Vec<Bytes>> = HashMap::new();
        for (k, n) in self.subs.keys() {
            again.entry(*k).or_default().push(n.clone());
        }
        for (kind, names) in again {
            for chunk in names.chunks(NAMES_PER_COMMAND) {
                self.send(&mut out, kind, true, chunk.to_vec());
            }
        }
        if let Some(op) = first {
            self.apply_connected(op, &mut out);
        }
        let mut scan = resp::Scanner::default();
        let mut last_read = Instant::now();
        let mut health = tokio::time::interval(HEALTH_EVERY);
        health.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if let Err(e) = flush(&mut wr, &mut out).await {
                return Some(e);
            }
            let deadline = self
                .inflight
                .front()
                .map(|c| c.sent + self.info.command_timeout);
            tokio::select! {
                op = self.rx.recv() => {
                    self.apply_connected(op?, &mut out);
                    while let Ok(op) = self.rx.try_recv() {
                        self.apply_connected(op, &mut out);
                    }
                }
                n = rd.read_buf(&mut buf) => {
                    match n {
                        Ok(0) => return Some("connection closed by the node".into()),
                        Err(e) => return Some(e.to_string()),
                        Ok(_) => {}
                    }
                    last_read = Instant::now();
                    loop {
                        let n = match scan.scan(&buf) {
                            Ok(Some(n)) => n,
                            Ok(None) => break,
                            Err(e) => return Some(format!("bad reply: {}", e.0)),
                        };
                        let frame = buf.split_to(n).freeze();
                        if let Err(e) = self.frame(frame) {
                            return Some(e);
                        }
                    }
                    // Slow or gone subscribers found while dispatching.
                    for id in std::mem::take(&mut self.leaving) {
                        self.apply_connected(Op::Leave { client: id }, &mut out);
                    }
                }
                _ = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                    return Some("subscription not confirmed in time".into());
                }
                // Subscribed again at the new primary, where PUBLISH now goes.
                () = follow.moved(), if follow.can_move() => {
                    return Some("its primary moved".into())
                }
                _ = health.tick() => {
                    if self.inflight.is_empty() && last_read.elapsed() >= HEALTH_EVERY {
                        out.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
                        let id = self.next_cmd;
                        self.next_cmd += 1;
                        self.inflight.push_back(Cmd {
                            id,
                            left: 1,
                            sent: Instant::now(),
                            subscribes: None,
                            waiters: Vec::new(),
                        });
                    }
                }
            }
        }
    }

    /// One frame from the node.
    fn frame(&mut self, frame: Bytes) -> Result<(), String> {
        match classify(&frame)? {
            FromNode::Message(name) => self.dispatch(&name, frame),
            FromNode::Reply => {
                let front = self
                    .inflight
                    .front_mut()
                    .ok_or("a reply nobody asked for")?;
                front.left = front.left.saturating_sub(1);
                if front.left == 0 {
                    let cmd = self.inflight.pop_front().expect("present");
                    self.finish(cmd, None);
                }
            }
            FromNode::Refused(e) => {
                let cmd = self
                    .inflight
                    .pop_front()
                    .ok_or("an error nobody asked for")?;
                self.refused(cmd, &e);
            }
        }
        Ok(())
    }
}

async fn flush(wr: &mut NodeWrite, out: &mut Vec<u8>) -> Result<(), String> {
    if out.is_empty() {
        return Ok(());
    }
    let r = send(wr, out).await.map_err(|e| e.to_string());
    out.clear();
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classified(frame: &[u8]) -> Result<FromNode, String> {
        classify(&Bytes::copy_from_slice(frame))
    }

    #[test]
    fn node_frames() {
        let is_msg = |f: &[u8], kind: Kind, name: &[u8]| matches!(classified(f), Ok(FromNode::Message((k, n))) if k == kind && n == name);
        assert!(is_msg(
            b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nm\r\n",
            Kind::Channel,
            b"ch"
        ));
        assert!(is_msg(
            b"*4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nch\r\n$1\r\nm\r\n",
            Kind::Pattern,
            b"c*"
        ));
        assert!(is_msg(
            b"*3\r\n$8\r\nsmessage\r\n$1\r\ns\r\n$0\r\n\r\n",
            Kind::Shard,
            b"s"
        ));
        for reply in [
            &b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"[..],
            b"*3\r\n$12\r\npunsubscribe\r\n$2\r\nc*\r\n:0\r\n",
            b"*2\r\n$4\r\npong\r\n$0\r\n\r\n",
            b"+PONG\r\n",
        ] {
            assert!(matches!(classified(reply), Ok(FromNode::Reply)));
        }
        assert!(
            matches!(classified(b"-NOPERM no\r\n"), Ok(FromNode::Refused(e)) if e == "NOPERM no")
        );
        assert!(classified(b":1\r\n").is_err());
        assert!(classified(b"*2\r\n$7\r\nmessage\r\n$1\r\nc\r\n").is_err());
    }
}
