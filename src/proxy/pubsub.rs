//! Subscriptions through the proxy (the client's side).
//!
//! PUBLISH/SPUBLISH go to the node owning the channel name (route.rs), so a client's
//! SUBSCRIBE/SSUBSCRIBE for a channel is registered with that node's subscriber hub, and
//! PSUBSCRIBE with every node's (a pattern can match channels anywhere). A hub
//! ([`super::hub`]) multiplexes every client's subscriptions over one connection per node
//! and queues each message to the clients of its name.
//!
//! The proxy keeps the client's channels and patterns itself and answers the
//! (un)subscribe confirmations locally, with the counts the client expects (channels +
//! patterns, shard channels apart, as Redis counts them). A subscription is confirmed once
//! the node confirmed it to the hub: from then on a message published (from any
//! connection) reaches the client, as with Redis. Messages queued before an unsubscribe
//! is processed are written before its confirmation, none after it.

use super::hub::{Hub, Incoming, Kind, Sink};
use super::node::Node;
use super::resp;
use bytes::{Bytes, BytesMut};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use tokio::sync::mpsc;

pub struct PubSub {
    client: u64,
    tx: Option<mpsc::UnboundedSender<Incoming>>,
    pub rx: Option<mpsc::UnboundedReceiver<Incoming>>,
    channels: BTreeSet<Bytes>,
    patterns: BTreeSet<Bytes>,
    shard: BTreeSet<Bytes>,
    /// Bytes handed to the client task and not yet written to the client.
    pub queued: Arc<AtomicUsize>,
    /// Set off by a hub when this client's queue went over its limit.
    pub overflow: Arc<tokio::sync::Notify>,
    /// Hubs that may hold registrations of this client (told to forget it on drop).
    joined: HashMap<usize, Hub>,
}

impl Drop for PubSub {
    fn drop(&mut self) {
        for hub in self.joined.values() {
            hub.leave(self.client);
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
    pub fn new(client: u64) -> PubSub {
        PubSub {
            client,
            tx: None,
            rx: None,
            channels: BTreeSet::new(),
            patterns: BTreeSet::new(),
            shard: BTreeSet::new(),
            queued: Arc::new(AtomicUsize::new(0)),
            overflow: Arc::new(tokio::sync::Notify::new()),
            joined: HashMap::new(),
        }
    }

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

    fn sink(&mut self, resp3: bool) -> Sink {
        if self.tx.is_none() {
            let (tx, rx) = mpsc::unbounded_channel();
            self.tx = Some(tx);
            self.rx = Some(rx);
        }
        Sink {
            tx: self.tx.clone().expect("set above"),
            queued: self.queued.clone(),
            overflow: self.overflow.clone(),
            resp3,
        }
    }

    /// Which nodes' hubs hear about each name.
    fn per_node(
        &self,
        nodes: &[std::sync::Arc<Node>],
        owner: impl Fn(&[u8]) -> usize,
        kind: Kind,
        names: &[Bytes],
    ) -> HashMap<usize, Vec<Bytes>> {
        let mut per_node: HashMap<usize, Vec<Bytes>> = HashMap::new();
        for n in names {
            match kind {
                Kind::Pattern => {
                    for t in 0..nodes.len() {
                        per_node.entry(t).or_default().push(n.clone());
                    }
                }
                _ => per_node.entry(owner(n)).or_default().push(n.clone()),
            }
        }
        per_node
    }

    /// Runs one (un)subscribe command; returns the confirmations for the client.
    pub async fn command(
        &mut self,
        nodes: &[std::sync::Arc<Node>],
        owner: impl Fn(&[u8]) -> usize,
        resp3: bool,
        kind: Kind,
        subscribe: bool,
        names: &[Bytes],
    ) -> Result<Bytes, String> {
        let (sub_name, unsub_name) = kind.names();
        let cmd = if subscribe { sub_name } else { unsub_name };
        // Unsubscribing from everything names the current set.
        let names: Vec<Bytes> = if names.is_empty() && !subscribe {
            self.set(kind).iter().cloned().collect()
        } else {
            names.to_vec()
        };
        if subscribe {
            // Only names new to this client need the hubs (Redis confirms the others
            // again with the same count).
            let mut fresh: Vec<Bytes> = Vec::new();
            for n in &names {
                if !self.set(kind).contains(n) && !fresh.contains(n) {
                    fresh.push(n.clone());
                }
            }
            let sink = self.sink(resp3);
            let per_node = self.per_node(nodes, &owner, kind, &fresh);
            let mut waits = Vec::with_capacity(per_node.len());
            for (node, list) in per_node {
                let hub = nodes[node].hub.clone();
                self.joined.entry(node).or_insert_with(|| hub.clone());
                waits.push((node, list, hub));
            }
            let asked: Vec<_> = waits
                .iter()
                .map(|(_, list, hub)| hub.subscribe(self.client, sink.clone(), kind, list.clone()))
                .collect();
            let mut failed = None;
            for a in asked {
                if let Err(e) = a.wait().await {
                    failed.get_or_insert(e);
                }
            }
            if let Some(e) = failed {
                // All or nothing, as one Redis does: drop what the other hubs registered.
                let undo: Vec<_> = waits
                    .iter()
                    .map(|(_, list, hub)| hub.unsubscribe(self.client, kind, list.clone()))
                    .collect();
                for u in undo {
                    let _ = u.wait().await;
                }
                return Err(e);
            }
        } else {
            let mine: Vec<Bytes> = names
                .iter()
                .filter(|n| self.set(kind).contains(*n))
                .cloned()
                .collect();
            let per_node = self.per_node(nodes, &owner, kind, &mine);
            let asked: Vec<_> = per_node
                .into_iter()
                .filter_map(|(node, list)| {
                    let hub = self.joined.get(&node)?;
                    Some(hub.unsubscribe(self.client, kind, list))
                })
                .collect();
            for a in asked {
                let _ = a.wait().await;
            }
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
    }
}
