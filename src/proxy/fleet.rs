//! The fleet a request is routed by: the node table, the members that hold keys and the
//! placement over them, swapped as a whole ([`Proxy::fleet`](super::Proxy)) when the node
//! list is reloaded or an online move ([`super::online`]) changes phase.
//!
//! Node indexes are stable for the life of the proxy: the table only grows (a node that
//! leaves stays in it, unused; a node whose URL changes is replaced in place), so a client
//! may keep per-node state across snapshots.

use super::config::{NodeSpec, Placement};
use super::node::Node;
use super::online::{Move, Phase};
use std::sync::Arc;

/// Rendezvous placement over some entries of the node table.
#[derive(Clone, Debug)]
pub struct Members {
    pub specs: Vec<NodeSpec>,
    placement: Placement,
    /// Table index of each member, in `specs` order.
    index: Vec<usize>,
    /// `index[i] == i` (the boot fleet): the lookup is skipped on the hot path.
    identity: bool,
}

impl Members {
    /// `index[i]` is the table index of `specs[i]`.
    pub fn new(specs: Vec<NodeSpec>, index: Vec<usize>) -> Members {
        Members {
            placement: Placement::new(&specs),
            specs,
            identity: index.iter().enumerate().all(|(i, &t)| i == t),
            index,
        }
    }

    /// Table index of the node owning `key`.
    #[inline]
    pub fn owner(&self, key: &[u8]) -> usize {
        let i = self.placement.owner(key);
        if self.identity {
            i
        } else {
            self.index[i]
        }
    }

    pub fn indexes(&self) -> &[usize] {
        &self.index
    }

    pub fn ids(&self) -> Vec<&str> {
        self.specs.iter().map(|s| s.id.as_str()).collect()
    }
}

/// One snapshot of the fleet; immutable, replaced as a whole.
pub struct Fleet {
    /// Every node the proxy has a connection pool for, by stable index.
    pub nodes: Vec<Arc<Node>>,
    /// Nodes that hold keys now, in table order: fan-outs (DBSIZE, KEYS, SCAN, FLUSHALL,
    /// SCRIPT…) go to these. During a move, the old and the new members together.
    pub members: Vec<usize>,
    /// The placement requests go by: the old one while a move catalogs keys, the new one
    /// once tags are moved on demand (after [`super::online::prepare`]).
    pub routing: Members,
    /// The move under way, if any, and its phase in this snapshot.
    pub moving: Option<(Arc<Move>, Phase)>,
}

impl Fleet {
    /// A fleet at rest: every member holds exactly the keys `routing` gives it.
    pub fn at_rest(nodes: Vec<Arc<Node>>, routing: Members) -> Fleet {
        let mut members = routing.indexes().to_vec();
        members.sort_unstable();
        Fleet {
            nodes,
            members,
            routing,
            moving: None,
        }
    }

    #[inline]
    pub fn owner(&self, key: &[u8]) -> usize {
        self.routing.owner(key)
    }

    /// The member answering keyless reads (FUNCTION LIST…): the first that is up.
    pub fn first_up(&self) -> usize {
        self.members
            .iter()
            .copied()
            .find(|&i| super::node::state_name(&self.nodes[i]) == "up")
            .or(self.members.first().copied())
            .unwrap_or(0)
    }
}
