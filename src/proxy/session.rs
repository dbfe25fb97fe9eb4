//! A proxy client's session, below the connection loop that runs it: who the client is
//! (id, name, RESP version, authenticated or not), how it reaches the nodes, and the reply
//! on its way ([`Pending`]).
//!
//! It sits under both `client.rs` (the connection loop, which owns a `Session`) and
//! `local.rs` (the commands the proxy answers itself, which see only the session), so the
//! loop can hand commands to `local` without `local` knowing the loop.

use super::fleet::Fleet;
use super::node::Wait;
use super::resp;
use super::route::Split;
use super::Proxy;
use bytes::Bytes;
use std::sync::Arc;

/// A reply on its way.
pub enum Pending {
    Ready(Bytes),
    /// The next reply of the client's batched commands to this node.
    Batched(usize),
    Wait(Wait),
    /// A split command: each node's wait with the key slots it serves.
    Split(Split, usize, Vec<(Wait, Vec<usize>)>),
    /// A fleet-wide command: one wait per node.
    Fan(Fan, Vec<Wait>),
    /// SCAN on node `.0` of `.1` nodes.
    Scan(usize, usize, Wait),
    /// PUBLISH: the node's count plus the proxy's subscribers it counted as one.
    Publish(Wait, i64),
}

#[derive(Clone, Copy, Debug)]
pub enum Fan {
    Sum,
    Concat,
    AllOk,
    /// SCRIPT LOAD: every node must succeed; the first reply is the answer.
    First,
    /// SCRIPT EXISTS: 1 only where every node has the script.
    And,
    /// CLUSTER GETKEYSINSLOT: the nodes' arrays concatenated, cut to this many elements.
    ConcatUpTo(usize),
}

pub struct Session {
    pub(super) p: Arc<Proxy>,
    pub id: u64,
    pub resp3: bool,
    pub authed: bool,
    pub name: Option<Bytes>,
    /// The fleet this read batch routes by: loaded at its first use, dropped when the
    /// batch is done ([`Session::release_fleet`]) so an online move can tell when no
    /// batch still uses an older one.
    pub(super) fleet: std::cell::OnceCell<Arc<Fleet>>,
}

impl Session {
    pub fn proxy(&self) -> &Proxy {
        &self.p
    }

    pub fn fleet(&self) -> &Arc<Fleet> {
        self.fleet.get_or_init(|| self.p.fleet.load_full())
    }

    pub fn release_fleet(&mut self) {
        self.fleet.take();
    }

    pub fn send(&self, node: usize, bytes: Bytes) -> Wait {
        self.fleet().nodes[node].send(self.resp3, self.id, bytes)
    }

    /// Sends to every member of the fleet.
    pub fn fan<A: AsRef<[u8]>>(&self, kind: Fan, args: &[A]) -> Pending {
        let bytes = resp::command(args);
        let waits = self
            .fleet()
            .members
            .iter()
            .map(|&n| self.send(n, bytes.clone()))
            .collect();
        Pending::Fan(kind, waits)
    }
}
