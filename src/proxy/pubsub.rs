//! Subscriptions through the proxy.
//!
//! PUBLISH/SPUBLISH go to the node owning the channel name (route.rs), so a client's
//! SUBSCRIBE/SSUBSCRIBE for a channel is made on that node, and PSUBSCRIBE on every node
//! (a pattern can match channels anywhere). Each node the client subscribes on gets one
//! dedicated connection whose reader task forwards messages to the client.
//!
//! The proxy keeps the client's channels and patterns itself and answers the
//! (un)subscribe confirmations locally, with the counts the client expects (channels +
//! patterns, shard channels apart, as Redis counts them); the nodes' own confirmations
//! (per-node counts, one per node for patterns) are not forwarded, but the proxy waits
//! for them before confirming: once the client holds its confirmation, a message
//! published afterwards (from any connection) reaches it, as with Redis. If a subscription
//! connection breaks, the client is disconnected so that its reconnect logic subscribes
//! again: silently losing messages would be worse.

use super::node::Node;
use super::resp::{self, Frame};
use bytes::{Bytes, BytesMut};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{mpsc, Notify};

/// How long a node may take to confirm a (un)subscribe.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(5);

/// Confirmations read from one node's subscription connection.
#[derive(Default)]
struct Confirmed {
    count: AtomicU64,
    notify: Notify,
}

impl Confirmed {
    /// A broken connection confirms everything: the client task gets the error instead.
    fn close(&self) {
        self.count.store(u64::MAX, Ordering::Release);
        self.notify.notify_waiters();
    }
}

/// The writing half of a node subscription connection and what it confirmed.
struct Writer {
    wr: OwnedWriteHalf,
    confirmed: Arc<Confirmed>,
    /// Confirmations asked for so far.
    expected: u64,
}

/// A frame from a node's subscription connection, or why it broke.
pub type Incoming = Result<Bytes, String>;

/// Messages waiting for a slow subscriber beyond this disconnect it (Redis's
/// client-output-buffer-limit for pubsub plays the same role).
const MAX_QUEUED: usize = 32 << 20;

#[derive(Default)]
pub struct PubSub {
    writers: HashMap<usize, Writer>,
    tx: Option<mpsc::UnboundedSender<Incoming>>,
    pub rx: Option<mpsc::UnboundedReceiver<Incoming>>,
    channels: BTreeSet<Bytes>,
    patterns: BTreeSet<Bytes>,
    shard: BTreeSet<Bytes>,
    /// Bytes handed to the client task and not yet written to the client.
    pub queued: Arc<AtomicUsize>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
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

    fn names(self) -> (&'static str, &'static str) {
        match self {
            Kind::Channel => ("subscribe", "unsubscribe"),
            Kind::Pattern => ("psubscribe", "punsubscribe"),
            Kind::Shard => ("ssubscribe", "sunsubscribe"),
        }
    }
}

/// What a RESP2 client may send while subscribed (Redis's rule).
pub fn allowed_when_subscribed(name: &str) -> bool {
    Kind::of(name).is_some() || matches!(name, "ping" | "quit" | "reset")
}

/// A confirmation or pong in the client's protocol (`>` push in RESP3, array in RESP2).
pub fn push(resp3: bool, items: &[Option<&[u8]>], count: Option<i64>) -> Bytes {
    let mut out = BytesMut::new();
    let n = items.len() + count.is_some() as usize;
    out.extend_from_slice(format!("{}{n}\r\n", if resp3 { '>' } else { '*' }).as_bytes());
    for it in items {
        match it {
            Some(b) => out.extend_from_slice(&resp::bulk(b)),
            None if resp3 => out.extend_from_slice(b"_\r\n"),
            None => out.extend_from_slice(b"$-1\r\n"),
        }
    }
    if let Some(c) = count {
        out.extend_from_slice(&resp::int(c));
    }
    out.freeze()
}

impl PubSub {
    /// Subscriptions counted by Redis for the RESP2 "subscribed mode".
    pub fn active(&self) -> bool {
        !(self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty())
    }

    fn set(&mut self, kind: Kind) -> &mut BTreeSet<Bytes> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    fn count(&self, kind: Kind) -> i64 {
        match kind {
            Kind::Shard => self.shard.len() as i64,
            _ => (self.channels.len() + self.patterns.len()) as i64,
        }
    }

    /// The node's subscription connection, opened on first use.
    async fn writer(
        &mut self,
        nodes: &[Node],
        node: usize,
        resp3: bool,
    ) -> Result<&mut Writer, String> {
        if !self.writers.contains_key(&node) {
            let d = nodes[node].dedicated(resp3).await?;
            let (stream, buf, permit) = d.into_parts();
            let (rd, wr) = stream.into_split();
            if self.tx.is_none() {
                let (tx, rx) = mpsc::unbounded_channel();
                self.tx = Some(tx);
                self.rx = Some(rx);
            }
            let tx = self.tx.clone().expect("set above");
            let id = nodes[node].id().to_string();
            let queued = self.queued.clone();
            let confirmed = Arc::new(Confirmed::default());
            let c = confirmed.clone();
            tokio::spawn(async move {
                let _permit = permit;
                forward(rd, buf, tx, id, queued, &c).await;
                c.close();
            });
            self.writers.insert(
                node,
                Writer {
                    wr,
                    confirmed,
                    expected: 0,
                },
            );
        }
        Ok(self.writers.get_mut(&node).expect("inserted above"))
    }

    /// Runs one (un)subscribe command; returns the confirmations for the client.
    pub async fn command(
        &mut self,
        nodes: &[Node],
        owner: impl Fn(&[u8]) -> usize,
        resp3: bool,
        kind: Kind,
        subscribe: bool,
        names: &[Bytes],
    ) -> Result<Bytes, String> {
        let (sub_name, unsub_name) = kind.names();
        // Unsubscribing from everything names the current set.
        let names: Vec<Bytes> = if names.is_empty() && !subscribe {
            self.set(kind).iter().cloned().collect()
        } else {
            names.to_vec()
        };
        // Which nodes hear about which names.
        let mut per_node: HashMap<usize, Vec<Bytes>> = HashMap::new();
        for n in &names {
            let targets: Vec<usize> = match kind {
                Kind::Pattern => (0..nodes.len()).collect(),
                _ => vec![owner(n)],
            };
            for t in targets {
                // Only nodes we are subscribed on need an unsubscribe.
                if subscribe || self.writers.contains_key(&t) {
                    per_node.entry(t).or_default().push(n.clone());
                }
            }
        }
        let cmd = if subscribe { sub_name } else { unsub_name };
        let mut waits = Vec::with_capacity(per_node.len());
        for (node, list) in per_node {
            let n = list.len() as u64;
            let mut args = vec![Bytes::from_static(cmd.as_bytes())];
            args.extend(list);
            let bytes = resp::command(&args);
            let w = self.writer(nodes, node, resp3).await?;
            w.wr.write_all(&bytes)
                .await
                .map_err(|e| nodes[node].info.unavailable(&e.to_string()))?;
            w.expected += n;
            waits.push((node, w.confirmed.clone(), w.expected));
        }
        // The node confirms one frame per name, in order.
        for (node, confirmed, expected) in waits {
            let wait = async {
                loop {
                    let notified = confirmed.notify.notified();
                    if confirmed.count.load(Ordering::Acquire) >= expected {
                        return;
                    }
                    notified.await;
                }
            };
            tokio::time::timeout(CONFIRM_TIMEOUT, wait)
                .await
                .map_err(|_| nodes[node].info.unavailable("subscription not confirmed"))?;
        }
        let mut out = BytesMut::new();
        if names.is_empty() {
            // Redis confirms an unsubscribe-all with nothing to drop as (nil, count).
            out.extend_from_slice(&push(
                resp3,
                &[Some(cmd.as_bytes()), None],
                Some(self.count(kind)),
            ));
        }
        for n in &names {
            if subscribe {
                self.set(kind).insert(n.clone());
            } else {
                self.set(kind).remove(n);
            }
            let c = self.count(kind);
            out.extend_from_slice(&push(resp3, &[Some(cmd.as_bytes()), Some(n)], Some(c)));
        }
        Ok(out.freeze())
    }
}

/// Node confirmations are answered by the proxy itself: counted, not forwarded.
fn is_confirmation(frame: &Bytes) -> bool {
    let Ok(Frame::Array(kids)) = resp::decode(frame) else {
        return false;
    };
    let Some(Ok(Frame::Bulk(kind))) = kids.first().map(resp::decode) else {
        return false;
    };
    matches!(
        &kind[..],
        b"subscribe"
            | b"unsubscribe"
            | b"psubscribe"
            | b"punsubscribe"
            | b"ssubscribe"
            | b"sunsubscribe"
    )
}

/// Reads a subscription connection and hands messages to the client task.
async fn forward(
    mut rd: tokio::net::tcp::OwnedReadHalf,
    mut buf: BytesMut,
    tx: mpsc::UnboundedSender<Incoming>,
    id: String,
    queued: Arc<AtomicUsize>,
    confirmed: &Confirmed,
) {
    use tokio::io::AsyncReadExt;
    let mut scan = resp::Scanner::default();
    loop {
        loop {
            match scan.scan(&buf) {
                Ok(Some(n)) => {
                    let f = buf.split_to(n).freeze();
                    if is_confirmation(&f) {
                        confirmed.count.fetch_add(1, Ordering::AcqRel);
                        confirmed.notify.notify_waiters();
                        continue;
                    }
                    if queued.fetch_add(f.len(), Ordering::Relaxed) + f.len() > MAX_QUEUED {
                        let _ = tx.send(Err("subscriber too slow: output limit reached".into()));
                        return;
                    }
                    if tx.send(Ok(f)).is_err() {
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    let _ = tx.send(Err(format!("bad reply from node {id}: {}", e.0)));
                    return;
                }
            }
        }
        match rd.read_buf(&mut buf).await {
            Ok(n) if n > 0 => {}
            _ => {
                let _ = tx.send(Err(format!("subscription connection to node {id} lost")));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confirmations() {
        assert_eq!(
            &push(false, &[Some(b"subscribe"), Some(b"ch")], Some(1))[..],
            b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
        );
        assert_eq!(
            &push(true, &[Some(b"unsubscribe"), None], Some(0))[..],
            b">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n"
        );
        assert!(is_confirmation(&push(
            true,
            &[Some(b"psubscribe"), Some(b"p*")],
            Some(2)
        )));
        assert!(!is_confirmation(&push(
            false,
            &[Some(b"message"), Some(b"c"), Some(b"m")],
            None
        )));
    }
}
