//! Pub/Sub: the registry of channel, pattern and shard-channel subscribers, and each
//! subscribed client's delivery queue (its "outbox").
//!
//! Publishing never blocks and never touches the keyspace: it takes the registry's read
//! locks, appends to each receiver's outbox (a short mutex) and wakes the receiver's
//! connection task, which encodes and writes the messages in its client's protocol. So
//! `publish` is safe to call while keyspace locks are held (keyspace notifications).
//!
//! Slow subscribers: every outbox counts its undelivered bytes; one past the pub/sub class
//! of `client-output-buffer-limit` (hard limit, or soft limit for longer than the soft
//! seconds) is dropped and its client killed, as Redis closes such clients.

use super::clients::ClientHandle;
use super::obuf::{LimitCell, Limits};
use crate::protocol::Reply;
use crate::types::glob::glob_match;
use bytes::{Bytes, BytesMut};
use parking_lot::{Mutex, RwLock, RwLockReadGuard};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Notify;

/// The three subscription namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Pattern,
    Shard,
}

/// Something queued for a subscriber's connection, written in its protocol as a push
/// (RESP3) or an array (RESP2).
#[derive(Debug, Clone, PartialEq)]
pub enum Push {
    Message {
        channel: Bytes,
        payload: Bytes,
    },
    PMessage {
        pattern: Bytes,
        channel: Bytes,
        payload: Bytes,
    },
    SMessage {
        channel: Bytes,
        payload: Bytes,
    },
    /// A (un)subscribe confirmation: `subscribe`, channel, count. Queued ahead of the
    /// registration so no message on the channel can overtake it.
    Confirm {
        kind: &'static str,
        name: Option<Bytes>,
        count: i64,
    },
    /// Client-side caching: these keys may have changed (`None`: every key, after a
    /// flush). A RESP3 client gets `>2 invalidate [keys]`; a RESP2 redirection client, in
    /// Pub/Sub mode, a `message` on `__redis__:invalidate` whose payload is the array.
    Invalidate {
        keys: Option<Arc<[Bytes]>>,
    },
    /// The client a tracking client redirects to is gone (RESP3 only).
    RedirBroken {
        id: u64,
    },
}

/// The channel RESP2 redirection clients get invalidations on.
pub const INVALIDATE_CHANNEL: &str = "__redis__:invalidate";

/// Rough per-frame overhead in the output buffer (headers, CRLFs, the kind word).
const FRAME_OVERHEAD: usize = 48;

impl Push {
    /// Bytes this push holds in the output buffer, for the output buffer limit.
    pub fn size(&self) -> usize {
        FRAME_OVERHEAD
            + match self {
                Push::Message { channel, payload } | Push::SMessage { channel, payload } => {
                    channel.len() + payload.len()
                }
                Push::PMessage {
                    pattern,
                    channel,
                    payload,
                } => pattern.len() + channel.len() + payload.len(),
                Push::Confirm { name, .. } => name.as_ref().map_or(0, |n| n.len()),
                Push::Invalidate { keys } => keys
                    .as_ref()
                    .map_or(0, |k| k.iter().map(|k| k.len() + 16).sum()),
                Push::RedirBroken { .. } => 0,
            }
    }

    /// Writes the push as a RESP3 push frame or a RESP2 array, without building a `Reply`
    /// (this is the delivery hot path).
    pub fn encode(&self, out: &mut BytesMut, resp3: bool) {
        let (n, kind): (i64, &[u8]) = match self {
            Push::Invalidate { keys } => return encode_invalidate(out, keys.as_deref(), resp3),
            Push::RedirBroken { id } => {
                out.extend_from_slice(b">2\r\n$21\r\ntracking-redir-broken\r\n");
                return int_line(out, b':', *id as i64);
            }
            Push::Message { .. } => (3, b"message"),
            Push::SMessage { .. } => (3, b"smessage"),
            Push::PMessage { .. } => (4, b"pmessage"),
            Push::Confirm { kind, .. } => (3, kind.as_bytes()),
        };
        int_line(out, if resp3 { b'>' } else { b'*' }, n);
        bulk(out, kind);
        match self {
            Push::Message { channel, payload } | Push::SMessage { channel, payload } => {
                bulk(out, channel);
                bulk(out, payload);
            }
            Push::PMessage {
                pattern,
                channel,
                payload,
            } => {
                bulk(out, pattern);
                bulk(out, channel);
                bulk(out, payload);
            }
            Push::Confirm { name, count, .. } => {
                match name {
                    Some(n) => bulk(out, n),
                    None if resp3 => out.extend_from_slice(b"_\r\n"),
                    None => out.extend_from_slice(b"$-1\r\n"),
                }
                int_line(out, b':', *count);
            }
            // Written whole above.
            Push::Invalidate { .. } | Push::RedirBroken { .. } => {}
        }
    }

    pub fn into_reply(self) -> Reply {
        let b = Reply::bulk_static;
        Reply::Push(match self {
            Push::Message { channel, payload } => {
                vec![b("message"), Reply::Bulk(channel), Reply::Bulk(payload)]
            }
            Push::SMessage { channel, payload } => {
                vec![b("smessage"), Reply::Bulk(channel), Reply::Bulk(payload)]
            }
            Push::PMessage {
                pattern,
                channel,
                payload,
            } => vec![
                b("pmessage"),
                Reply::Bulk(pattern),
                Reply::Bulk(channel),
                Reply::Bulk(payload),
            ],
            Push::Confirm { kind, name, count } => {
                vec![b(kind), Reply::opt_bulk(name), Reply::Int(count)]
            }
            Push::Invalidate { keys } => vec![
                b("invalidate"),
                match keys {
                    Some(k) => Reply::Array(k.iter().cloned().map(Reply::Bulk).collect()),
                    None => Reply::Nil,
                },
            ],
            Push::RedirBroken { id } => vec![b("tracking-redir-broken"), Reply::Int(id as i64)],
        })
    }
}

/// An invalidation (tracking.c `sendTrackingMessage`): a push in RESP3, a Pub/Sub message
/// on [`INVALIDATE_CHANNEL`] in RESP2; the keys as an array, or a null for "all keys".
fn encode_invalidate(out: &mut BytesMut, keys: Option<&[Bytes]>, resp3: bool) {
    if resp3 {
        out.extend_from_slice(b">2\r\n$10\r\ninvalidate\r\n");
    } else {
        out.extend_from_slice(b"*3\r\n$7\r\nmessage\r\n");
        bulk(out, INVALIDATE_CHANNEL.as_bytes());
    }
    match keys {
        Some(keys) => {
            int_line(out, b'*', keys.len() as i64);
            for k in keys {
                bulk(out, k);
            }
        }
        None if resp3 => out.extend_from_slice(b"_\r\n"),
        None => out.extend_from_slice(b"$-1\r\n"),
    }
}

fn int_line(out: &mut BytesMut, prefix: u8, n: i64) {
    out.extend_from_slice(&[prefix]);
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn bulk(out: &mut BytesMut, b: &[u8]) {
    int_line(out, b'$', b.len() as i64);
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

#[derive(Default)]
struct Outbox {
    queue: VecDeque<Push>,
    bytes: usize,
    /// When the backlog first went over the soft limit (reset when it drops below).
    soft_since: Option<Instant>,
    /// Dropped for exceeding the limit: nothing more is queued.
    closed: bool,
}

/// What became of a push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Queued,
    /// Queued, and the backlog just went over the soft limit: the cron then watches it
    /// (see [`PubSub::enforce_idle_limits`]).
    QueuedOverSoft,
    /// This push crossed the output buffer limit: the subscriber is now closed.
    JustClosed,
    /// Closed earlier; dropped.
    Closed,
}

/// One subscribed client: its delivery queue and the wake-up for its connection task.
pub struct Subscriber {
    pub client_id: u64,
    pub handle: Arc<ClientHandle>,
    outbox: Mutex<Outbox>,
    notify: Notify,
    /// Bytes taken from the outbox that the connection is still writing: they count
    /// toward the output buffer limit too.
    inflight: AtomicUsize,
}

impl Subscriber {
    pub fn new(handle: Arc<ClientHandle>) -> Arc<Subscriber> {
        Arc::new(Subscriber {
            client_id: handle.id,
            handle,
            outbox: Mutex::new(Outbox::default()),
            notify: Notify::new(),
            inflight: AtomicUsize::new(0),
        })
    }

    /// Queues a push and wakes the connection. A subscriber over its output buffer limit is
    /// closed: its backlog freed, its client killed, and nothing more queued.
    pub fn push(&self, p: Push, limits: Limits) -> Delivery {
        let mut o = self.outbox.lock();
        if o.closed {
            return Delivery::Closed;
        }
        // Only the push that makes the queue non-empty wakes the connection: the later
        // ones find the wake-up already given (the queue empties only when the connection
        // drains it, after that wake-up), so a publisher's pipelined batch costs one
        // notify, not one per message.
        let first = o.queue.is_empty();
        o.bytes += p.size();
        o.queue.push_back(p);
        self.report(&o);
        let bytes = (o.bytes + self.inflight.load(Ordering::Relaxed)) as u64;
        let was_over_soft = o.soft_since.is_some();
        if limits.exceeded(bytes, limits.hard, &mut o.soft_since) {
            self.close_over_limit(o);
            return Delivery::JustClosed;
        }
        let over_soft = !was_over_soft && o.soft_since.is_some();
        drop(o);
        if first {
            self.notify.notify_one();
        }
        if over_soft {
            Delivery::QueuedOverSoft
        } else {
            Delivery::Queued
        }
    }

    /// The limits checked with no new message (Redis's clientsCron runs the check for every
    /// client): a backlog that stays over the soft limit past its seconds closes the client
    /// even when nothing more is published. Returns whether to keep watching it (still
    /// over the soft limit and open).
    fn check_idle(&self, limits: Limits) -> (bool, bool) {
        let mut o = self.outbox.lock();
        if o.closed || self.handle.is_killed() {
            return (false, false);
        }
        let bytes = (o.bytes + self.inflight.load(Ordering::Relaxed)) as u64;
        if limits.exceeded(bytes, limits.hard, &mut o.soft_since) {
            self.close_over_limit(o);
            return (false, true);
        }
        (o.soft_since.is_some(), false)
    }

    /// Over its output buffer limit: the backlog is freed, nothing more is queued, and the
    /// client is killed.
    fn close_over_limit(&self, mut o: parking_lot::MutexGuard<'_, Outbox>) {
        o.closed = true;
        o.queue = VecDeque::new();
        o.bytes = 0;
        self.report(&o);
        drop(o);
        tracing::warn!(
            "Client id={} scheduled to be closed ASAP for overcoming of output buffer limits.",
            self.client_id
        );
        self.handle.kill();
    }

    /// Mirrors the backlog into the client's memory figures (CLIENT LIST `oll`/`omem`).
    fn report(&self, o: &Outbox) {
        let m = &self.handle.mem;
        m.pushes.store(o.queue.len(), Ordering::Relaxed);
        m.push_bytes.store(o.bytes, Ordering::Relaxed);
    }

    /// Moves everything queued into `out` (in order).
    pub fn drain_into(&self, out: &mut Vec<Push>) {
        let mut o = self.outbox.lock();
        if o.queue.is_empty() {
            return;
        }
        out.extend(o.queue.drain(..));
        o.bytes = 0;
        self.report(&o);
    }

    /// Encodes everything queued onto `out`. `scratch` is the caller's reusable queue: the
    /// outbox is swapped out under its lock and encoded outside it, so publishers wait only
    /// for the swap.
    pub fn drain_encode(&self, scratch: &mut VecDeque<Push>, out: &mut BytesMut, resp3: bool) {
        {
            let mut o = self.outbox.lock();
            if o.queue.is_empty() {
                return;
            }
            std::mem::swap(&mut o.queue, scratch);
            // The bytes move to the connection's buffer: still counted until written.
            self.inflight.fetch_add(o.bytes, Ordering::Relaxed);
            o.bytes = 0;
            self.report(&o);
        }
        for p in scratch.drain(..) {
            p.encode(out, resp3);
        }
    }

    /// The connection wrote everything it had taken from the outbox.
    pub fn written(&self) {
        self.inflight.store(0, Ordering::Relaxed);
    }

    /// Bytes queued and not yet taken by the connection.
    pub fn pending_bytes(&self) -> usize {
        self.outbox.lock().bytes
    }

    pub fn is_closed(&self) -> bool {
        self.outbox.lock().closed
    }

    /// Resolves when something was queued since the last wake-up (a stored permit makes a
    /// push between two waits wake the next one at once). It then yields once to the
    /// runtime, so the publishers that are ready run first and one write carries their
    /// messages too (Redis writes a subscriber once per event-loop pass): fewer writes and
    /// wake-ups per message. Cancelled during that yield (the connection's `select!` took
    /// its read), it gives the permit back, so no queued message waits for the next push.
    pub async fn wait(&self) {
        self.notify.notified().await;
        struct Rearm<'a>(Option<&'a Notify>);
        impl Drop for Rearm<'_> {
            fn drop(&mut self) {
                if let Some(n) = self.0 {
                    n.notify_one();
                }
            }
        }
        let mut rearm = Rearm(Some(&self.notify));
        tokio::task::yield_now().await;
        rearm.0 = None;
    }
}

/// A connection's own view of its subscriptions (Redis's `c->pubsub_channels` & co.).
pub struct Subscriptions {
    pub sub: Arc<Subscriber>,
    pub channels: HashSet<Bytes, ahash::RandomState>,
    pub patterns: HashSet<Bytes, ahash::RandomState>,
    pub shard: HashSet<Bytes, ahash::RandomState>,
}

impl Subscriptions {
    pub fn new(handle: Arc<ClientHandle>) -> Subscriptions {
        Subscriptions {
            sub: Subscriber::new(handle),
            channels: Default::default(),
            patterns: Default::default(),
            shard: Default::default(),
        }
    }

    pub fn set(&mut self, kind: Kind) -> &mut HashSet<Bytes, ahash::RandomState> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// The count a confirmation reports: channels + patterns, or shard channels.
    pub fn count(&self, kind: Kind) -> i64 {
        match kind {
            Kind::Channel | Kind::Pattern => (self.channels.len() + self.patterns.len()) as i64,
            Kind::Shard => self.shard.len() as i64,
        }
    }

    /// What the client's subscription sets hold besides the names (Redis's
    /// `pubsubMemOverhead`, which also leaves the strings out): their tables' slots.
    pub fn mem_overhead(&self) -> usize {
        let slot = std::mem::size_of::<Bytes>() + 1;
        [&self.channels, &self.patterns, &self.shard]
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| s.capacity() * slot)
            .sum()
    }

    /// Subscribed to anything (Redis's `CLIENT_PUBSUB` flag).
    pub fn active(&self) -> bool {
        !(self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty())
    }
}

type Subs = Vec<Arc<Subscriber>>;
type Registry = HashMap<Bytes, Subs, ahash::RandomState>;

/// Copies of a registry: one per stripe, under its own lock on its own cache line.
/// Publishers only read, each its thread's copy, so publishers on different workers write
/// no shared cache line (one lock's reader count bounced between the cores on every
/// PUBLISH: half of `publish`'s time under perf). Writers, (un)subscribes, are rare: they
/// hold every stripe's lock and change each copy alike, so no reader sees a change on
/// one thread before another.
struct Striped {
    stripes: Box<[Stripe]>,
}

#[repr(align(64))]
#[derive(Default)]
struct Stripe(RwLock<Registry>);

const STRIPES: usize = 4;

impl Default for Striped {
    fn default() -> Striped {
        Striped {
            stripes: (0..STRIPES).map(|_| Stripe::default()).collect(),
        }
    }
}

impl Striped {
    fn read(&self) -> RwLockReadGuard<'_, Registry> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local! {
            static MINE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
        }
        self.stripes[MINE.with(|m| *m)].0.read()
    }

    /// Applies `f` to every copy (all locked); returns what it returned for the first.
    fn update<R>(&self, mut f: impl FnMut(&mut Registry) -> R) -> R {
        let mut all: Vec<_> = self.stripes.iter().map(|s| s.0.write()).collect();
        let mut copies = all.iter_mut();
        let first = f(copies.next().expect("stripes"));
        copies.for_each(|c| {
            f(c);
        });
        first
    }
}

/// Server-wide subscriptions.
#[derive(Default)]
pub struct PubSub {
    channels: Striped,
    patterns: Striped,
    shard: Striped,
    /// Number of distinct patterns, so a publish skips the pattern lock when there are none.
    npatterns: AtomicUsize,
    /// The pub/sub class of `client-output-buffer-limit`, refreshed from the config by
    /// subscribing connections (publishers have no config access).
    limits: LimitCell,
    /// INFO `client_output_buffer_limit_disconnections` (subscribers and normal clients).
    pub obuf_disconnections: AtomicU64,
    /// Subscribers whose backlog is over the soft limit: the cron checks them while no
    /// message arrives (`enforce_idle_limits`).
    over_soft: parking_lot::Mutex<Vec<Arc<Subscriber>>>,
}

impl PubSub {
    pub fn new() -> PubSub {
        let p = PubSub::default();
        // Redis's default pub/sub class until the config is first read.
        p.set_limits(Limits {
            hard: 32 * 1024 * 1024,
            soft: 8 * 1024 * 1024,
            soft_secs: 60,
        });
        p
    }

    pub fn set_limits(&self, l: Limits) {
        self.limits.set(l);
    }

    pub fn limits(&self) -> Limits {
        self.limits.get()
    }

    /// Re-reads the limits from the configuration.
    pub fn refresh_limits(&self, config: &crate::config::ConfigStore) {
        self.limits.refresh(config, "pubsub");
    }

    fn registry(&self, kind: Kind) -> &Striped {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shard,
        }
    }

    /// Adds a subscription; false if the subscriber already had it.
    pub fn subscribe(&self, kind: Kind, name: &Bytes, sub: &Arc<Subscriber>) -> bool {
        let (added, first) = self.registry(kind).update(|reg| {
            let subs = reg.entry(name.clone()).or_default();
            if subs.iter().any(|s| s.client_id == sub.client_id) {
                return (false, false);
            }
            subs.push(sub.clone());
            (true, subs.len() == 1)
        });
        if first && kind == Kind::Pattern {
            self.npatterns.fetch_add(1, Ordering::Relaxed);
        }
        added
    }

    /// Removes a subscription; false if the client did not have it.
    pub fn unsubscribe(&self, kind: Kind, name: &[u8], client_id: u64) -> bool {
        let (removed, last) = self.registry(kind).update(|reg| {
            let Some(subs) = reg.get_mut(name) else {
                return (false, false);
            };
            let Some(i) = subs.iter().position(|s| s.client_id == client_id) else {
                return (false, false);
            };
            subs.swap_remove(i);
            let last = subs.is_empty();
            if last {
                reg.remove(name);
            }
            (true, last)
        });
        if last && kind == Kind::Pattern {
            self.npatterns.fetch_sub(1, Ordering::Relaxed);
        }
        removed
    }

    /// Delivers to the channel's subscribers and to every matching pattern's; returns the
    /// number of receivers (a client counts once per matching subscription, as in Redis).
    pub fn publish(&self, channel: &[u8], message: &[u8]) -> usize {
        let limits = self.limits();
        // The channel's name is the registry's own key when it has subscribers (a count
        // bump, not a copy); the payload is copied once for all receivers.
        // The last receiver takes the copy itself: cloning a fresh `Bytes` would allocate
        // its shared header, one more allocation per message for the common single
        // subscriber.
        let patterns = self.npatterns.load(Ordering::Relaxed) > 0;
        let mut payload: Option<Bytes> = None;
        let mut name: Option<Bytes> = None;
        let mut n = 0;
        {
            let reg = self.channels.read();
            if let Some((key, subs)) = reg.get_key_value(channel) {
                name = Some(key.clone());
                let mut copy = Some(Bytes::copy_from_slice(message));
                for (i, s) in subs.iter().enumerate() {
                    let payload = match i + 1 == subs.len() && !patterns {
                        true => copy.take().unwrap_or_default(),
                        false => copy.clone().unwrap_or_default(),
                    };
                    let p = Push::Message {
                        channel: key.clone(),
                        payload,
                    };
                    self.deliver(s, p, limits);
                    n += 1;
                }
                payload = copy;
            }
        }
        if patterns {
            let reg = self.patterns.read();
            for (pattern, subs) in reg.iter() {
                if !glob_match(pattern, channel, false) {
                    continue;
                }
                let channel = name.get_or_insert_with(|| Bytes::copy_from_slice(channel));
                let payload = payload.get_or_insert_with(|| Bytes::copy_from_slice(message));
                for s in subs {
                    let p = Push::PMessage {
                        pattern: pattern.clone(),
                        channel: channel.clone(),
                        payload: payload.clone(),
                    };
                    self.deliver(s, p, limits);
                    n += 1;
                }
            }
        }
        n
    }

    /// SPUBLISH: shard-channel subscribers only.
    pub fn spublish(&self, channel: &[u8], message: &[u8]) -> usize {
        let limits = self.limits();
        let reg = self.shard.read();
        let Some(subs) = reg.get(channel) else {
            return 0;
        };
        let (channel, payload) = (
            Bytes::copy_from_slice(channel),
            Bytes::copy_from_slice(message),
        );
        for s in subs {
            let p = Push::SMessage {
                channel: channel.clone(),
                payload: payload.clone(),
            };
            self.deliver(s, p, limits);
        }
        subs.len()
    }

    fn deliver(&self, s: &Arc<Subscriber>, p: Push, limits: Limits) {
        match s.push(p, limits) {
            Delivery::JustClosed => {
                self.obuf_disconnections.fetch_add(1, Ordering::Relaxed);
            }
            Delivery::QueuedOverSoft => self.over_soft.lock().push(s.clone()),
            Delivery::Queued | Delivery::Closed => {}
        }
    }

    /// Closes the subscribers that stayed over the soft limit past its seconds with no new
    /// message (Redis's clientsCron `closeClientOnOutputBufferLimitReached`), and forgets
    /// the ones back under it. For the 100 ms cron.
    pub fn enforce_idle_limits(&self) {
        let mut watched = std::mem::take(&mut *self.over_soft.lock());
        if watched.is_empty() {
            return;
        }
        let limits = self.limits();
        watched.retain(|s| {
            // Held by this list alone: unsubscribed and its connection gone.
            if Arc::strong_count(s) == 1 {
                return false;
            }
            let (keep, closed) = s.check_idle(limits);
            if closed {
                self.obuf_disconnections.fetch_add(1, Ordering::Relaxed);
            }
            keep
        });
        let mut list = self.over_soft.lock();
        list.extend(watched);
        // One entry per subscriber (a push may have added one meanwhile).
        list.sort_by_key(|s| s.client_id);
        list.dedup_by_key(|s| s.client_id);
    }

    /// Subscriber counts of channels (NUMSUB / SHARDNUMSUB).
    pub fn numsub(&self, kind: Kind, name: &[u8]) -> usize {
        self.registry(kind).read().get(name).map_or(0, Vec::len)
    }

    /// Number of distinct patterns (NUMPAT).
    pub fn numpat(&self) -> usize {
        self.patterns.read().len()
    }

    /// Number of channels with subscribers (INFO pubsub_channels & co.).
    pub fn count(&self, kind: Kind) -> usize {
        self.registry(kind).read().len()
    }

    /// The names a client is subscribed to (a scan of the registry: for ACL changes,
    /// which are rare).
    pub fn subscribed_by(&self, kind: Kind, client_id: u64) -> Vec<Bytes> {
        self.registry(kind)
            .read()
            .iter()
            .filter(|(_, subs)| subs.iter().any(|s| s.client_id == client_id))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Channels with at least one subscriber, optionally filtered by a glob (PUBSUB
    /// CHANNELS / SHARDCHANNELS).
    pub fn channels(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Bytes> {
        self.registry(kind)
            .read()
            .keys()
            .filter(|c| pattern.is_none_or(|p| glob_match(p, c, false)))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(id: u64) -> Arc<ClientHandle> {
        let clients = crate::instance::clients::Clients::default();
        let a = "127.0.0.1:1".parse().unwrap();
        let mut h = None;
        for _ in 0..id {
            h = Some(clients.register(a, a, 0));
        }
        h.unwrap()
    }

    fn drained(s: &Subscriber) -> Vec<Push> {
        let mut v = Vec::new();
        s.drain_into(&mut v);
        v
    }

    #[test]
    fn channel_and_pattern_delivery() {
        let ps = PubSub::new();
        let a = Subscriber::new(handle(1));
        let b = Subscriber::new(handle(2));
        assert!(ps.subscribe(Kind::Channel, &Bytes::from_static(b"news"), &a));
        assert!(!ps.subscribe(Kind::Channel, &Bytes::from_static(b"news"), &a));
        assert!(ps.subscribe(Kind::Pattern, &Bytes::from_static(b"n*"), &a));
        assert!(ps.subscribe(Kind::Pattern, &Bytes::from_static(b"n*"), &b));
        assert_eq!(ps.publish(b"news", b"hi"), 3);
        assert_eq!(ps.publish(b"other", b"x"), 0);
        assert_eq!(
            drained(&a),
            vec![
                Push::Message {
                    channel: Bytes::from_static(b"news"),
                    payload: Bytes::from_static(b"hi")
                },
                Push::PMessage {
                    pattern: Bytes::from_static(b"n*"),
                    channel: Bytes::from_static(b"news"),
                    payload: Bytes::from_static(b"hi")
                }
            ]
        );
        assert_eq!(drained(&b).len(), 1);
        assert_eq!(ps.numsub(Kind::Channel, b"news"), 1);
        assert_eq!(ps.numpat(), 1);
        assert!(ps.unsubscribe(Kind::Pattern, b"n*", a.client_id));
        assert!(!ps.unsubscribe(Kind::Pattern, b"n*", a.client_id));
        assert_eq!(ps.publish(b"news", b"again"), 2);
        assert!(ps.unsubscribe(Kind::Pattern, b"n*", b.client_id));
        assert_eq!(ps.numpat(), 0);
        assert_eq!(ps.publish(b"news", b"last"), 1);
        assert_eq!(
            ps.channels(Kind::Channel, Some(b"ne*")),
            vec![Bytes::from("news")]
        );
        assert!(ps.channels(Kind::Channel, Some(b"x*")).is_empty());
    }

    /// Whether the subscriber's wake-up is pending (consumes it).
    fn woken(s: &Subscriber) -> bool {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::time::timeout(std::time::Duration::ZERO, s.notify.notified())
                .await
                .is_ok()
        })
    }

    #[test]
    fn one_wake_per_backlog() {
        let ps = PubSub::new();
        let a = Subscriber::new(handle(1));
        ps.subscribe(Kind::Channel, &Bytes::from_static(b"c"), &a);
        for m in [&b"1"[..], b"2", b"3"] {
            ps.publish(b"c", m);
        }
        assert!(woken(&a));
        // Pushes onto a backlog the connection was already woken for wake nothing more.
        ps.publish(b"c", b"4");
        assert!(!woken(&a));
        let got: Vec<Bytes> = drained(&a)
            .into_iter()
            .map(|p| match p {
                Push::Message { payload, .. } => payload,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(got, ["1", "2", "3", "4"].map(Bytes::from));
        // Drained: the next push wakes it again.
        ps.publish(b"c", b"5");
        assert!(woken(&a));
    }

    #[test]
    fn subscriptions_seen_from_every_thread() {
        let ps = Arc::new(PubSub::new());
        let a = Subscriber::new(handle(1));
        let chan = Bytes::from_static(b"c");
        let from_threads = |ps: &Arc<PubSub>| -> Vec<usize> {
            (0..2 * STRIPES)
                .map(|_| {
                    let ps = ps.clone();
                    std::thread::spawn(move || {
                        ps.publish(b"c", b"m") + ps.numsub(Kind::Channel, b"c")
                    })
                })
                .map(|t| t.join().unwrap())
                .collect()
        };
        assert!(ps.subscribe(Kind::Channel, &chan, &a));
        assert!(!ps.subscribe(Kind::Channel, &chan, &a));
        assert_eq!(from_threads(&ps), vec![2; 2 * STRIPES]);
        assert!(ps.unsubscribe(Kind::Channel, b"c", a.client_id));
        assert!(!ps.unsubscribe(Kind::Channel, b"c", a.client_id));
        assert_eq!(from_threads(&ps), vec![0; 2 * STRIPES]);
        assert!(ps.channels(Kind::Channel, None).is_empty());
        assert!(ps.subscribe(Kind::Pattern, &Bytes::from_static(b"c*"), &a));
        assert_eq!(ps.npatterns.load(Ordering::Relaxed), 1);
        assert!(ps.unsubscribe(Kind::Pattern, b"c*", a.client_id));
        assert_eq!(ps.npatterns.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn shard_channels_are_separate() {
        let ps = PubSub::new();
        let a = Subscriber::new(handle(1));
        ps.subscribe(Kind::Shard, &Bytes::from_static(b"s"), &a);
        assert_eq!(ps.publish(b"s", b"m"), 0);
        assert_eq!(ps.spublish(b"s", b"m"), 1);
        assert!(matches!(drained(&a)[..], [Push::SMessage { .. }]));
    }

    #[test]
    fn hard_limit_closes_and_frees() {
        let ps = PubSub::new();
        ps.set_limits(Limits {
            hard: 1000,
            soft: 0,
            soft_secs: 0,
        });
        let a = Subscriber::new(handle(1));
        ps.subscribe(Kind::Channel, &Bytes::from_static(b"c"), &a);
        let big = vec![b'x'; 400];
        assert_eq!(ps.publish(b"c", &big), 1);
        assert_eq!(ps.publish(b"c", &big), 1);
        assert!(!a.is_closed());
        ps.publish(b"c", &big);
        assert!(a.is_closed());
        assert_eq!(a.pending_bytes(), 0);
        assert!(a.handle.is_killed());
        assert_eq!(ps.obuf_disconnections.load(Ordering::Relaxed), 1);
        ps.publish(b"c", &big);
        assert_eq!(a.pending_bytes(), 0);
    }
}
