//! The stream type (Redis `t_stream.c` semantics, pure data): entries ordered by ID with
//! O(log n) lookup and range, Redis's listpack node boundaries (so `MAXLEN ~`/`MINID ~`
//! drop exactly the entries Redis drops), the counters Redis keeps (last ID, first ID,
//! max deleted ID, entries added) and consumer groups (see [`group`]).
//!
//! Entries live in one ordered map; the node table only keeps, per listpack node Redis
//! would have, its live/deleted counts, byte size, master fields and last ID. Every change
//! touches single elements of these maps.

pub mod group;
pub mod id;
pub(crate) mod lp;
mod rax;

pub use group::{Consumer, Group, Nack};
pub use id::{IdRules, ParsedId, StreamId};

use bytes::Bytes;
use std::collections::BTreeMap;
use std::ops::Bound;

/// Fields and values of one entry, flattened (`f1 v1 f2 v2 ...`).
pub type Fields = Box<[Bytes]>;

/// Node size limits (`stream-node-max-bytes`, `stream-node-max-entries`; 0 = unlimited).
#[derive(Clone, Copy, Debug)]
pub struct NodeLimits {
    pub max_bytes: u64,
    pub max_entries: u64,
}

impl Default for NodeLimits {
    fn default() -> Self {
        NodeLimits {
            max_bytes: 4096,
            max_entries: 100,
        }
    }
}

/// Largest listpack Redis lets a node grow to, whatever the configuration says.
const LISTPACK_MAX_SIZE: u64 = 1 << 30;

/// One listpack node as Redis would hold it.
#[derive(Clone, Debug, PartialEq)]
struct Node {
    /// Live entries.
    count: u64,
    /// Entries flagged deleted but still inside the listpack.
    deleted: u64,
    /// The listpack's byte size.
    bytes: usize,
    /// Field names of the node's first entry (entries with the same fields omit theirs).
    master_fields: Box<[Bytes]>,
    /// ID of the last entry appended (possibly deleted since).
    last: StreamId,
}

/// One listpack node seen from outside (see [`Stream::node_views`]).
pub(crate) struct NodeView<'a> {
    pub master: StreamId,
    pub master_fields: &'a [Bytes],
    pub entries: std::collections::btree_map::Range<'a, StreamId, Fields>,
}

/// How XADD names the new entry.
#[derive(Clone, Copy, Debug)]
pub enum NewId {
    /// `*`: from the clock (`streamNextID`).
    Auto,
    /// An explicit ID; `seq_given` false for `<ms>-*`.
    Explicit(ParsedId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendError {
    /// The ID is not greater than the last one (`EDOM`).
    NotGreater,
    /// The fields and values are too large for a listpack (`ERANGE`).
    TooLarge,
}

/// A trimming request (XADD/XTRIM `MAXLEN|MINID [=|~] x [LIMIT n]`).
#[derive(Clone, Copy, Debug)]
pub struct Trim {
    pub strategy: TrimBy,
    pub approx: bool,
    /// Maximum entries to remove (0 = no limit).
    pub limit: u64,
}

#[derive(Clone, Copy, Debug)]
pub enum TrimBy {
    MaxLen(u64),
    MinId(StreamId),
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Stream {
    entries: BTreeMap<StreamId, Fields>,
    nodes: BTreeMap<StreamId, Node>,
    /// Sum of the nodes' byte sizes (memory accounting).
    lp_bytes: usize,
    pub last_id: StreamId,
    /// First live entry's ID when the stream was last trimmed/deleted from (Redis's
    /// `first_id`, reported as `recorded-first-entry-id`).
    pub first_id: StreamId,
    pub max_deleted: StreamId,
    pub entries_added: u64,
    /// Consumer groups by name (byte order, as Redis's radix tree).
    pub groups: BTreeMap<Bytes, Group>,
}

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Rough heap footprint.
    pub fn approx_size(&self) -> usize {
        let groups: usize = self.groups.values().map(Group::approx_size).sum();
        self.lp_bytes + self.entries.len() * 48 + self.nodes.len() * 64 + groups
    }

    /// Number of listpack nodes (`radix-tree-keys`).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Nodes of Redis's radix tree holding the listpacks (`radix-tree-nodes`).
    pub fn radix_tree_nodes(&self) -> usize {
        let keys: Vec<[u8; 16]> = self.nodes.keys().map(StreamId::encode).collect();
        rax::node_count(&keys)
    }

    pub fn get(&self, id: &StreamId) -> Option<&Fields> {
        self.entries.get(id)
    }

    pub fn contains(&self, id: &StreamId) -> bool {
        self.entries.contains_key(id)
    }

    /// Live entries from `start` to `end` inclusive, forwards or backwards.
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
    ) -> Box<dyn Iterator<Item = (&StreamId, &Fields)> + '_> {
        if start > end {
            return Box::new(std::iter::empty());
        }
        let r = self.entries.range(start..=end);
        if rev {
            Box::new(r.rev())
        } else {
            Box::new(r)
        }
    }

    /// First live entry.
    pub fn first(&self) -> Option<(&StreamId, &Fields)> {
        self.entries.iter().next()
    }

    /// Last live entry (`streamLastValidID`).
    pub fn last(&self) -> Option<(&StreamId, &Fields)> {
        self.entries.iter().next_back()
    }

    /// Appends an entry (`streamAppendItem`). `fields` is `f1 v1 f2 v2 ...`; `now_ms`
    /// feeds `*` IDs.
    pub fn append(
        &mut self,
        new_id: NewId,
        fields: &[Bytes],
        now_ms: u64,
        limits: NodeLimits,
    ) -> Result<StreamId, AppendError> {
        self.append_fields(new_id, fields.into(), now_ms, limits)
    }

    /// [`Stream::append`] of fields the caller already owns (XADD: no second copy).
    pub fn append_fields(
        &mut self,
        new_id: NewId,
        fields: Fields,
        now_ms: u64,
        limits: NodeLimits,
    ) -> Result<StreamId, AppendError> {
        let last = self.last_id;
        let id = match new_id {
            NewId::Auto => {
                if now_ms > last.ms {
                    StreamId::new(now_ms, 0)
                } else {
                    last.incr().ok_or(AppendError::NotGreater)?
                }
            }
            NewId::Explicit(p) if p.seq_given => p.id,
            NewId::Explicit(p) => {
                if last.ms == p.id.ms {
                    if last.seq == u64::MAX {
                        return Err(AppendError::NotGreater);
                    }
                    StreamId::new(last.ms, last.seq + 1)
                } else {
                    p.id
                }
            }
        };
        if id <= last {
            return Err(AppendError::NotGreater);
        }
        let total: u64 = fields.iter().map(|f| f.len() as u64).sum();
        if total > LISTPACK_MAX_SIZE {
            return Err(AppendError::TooLarge);
        }
        let numfields = fields.len() / 2;
        let mut max_bytes = limits.max_bytes;
        if max_bytes == 0 || max_bytes > LISTPACK_MAX_SIZE {
            max_bytes = LISTPACK_MAX_SIZE;
        }
        let field_names = || fields.iter().step_by(2);
        // The tail node, if the entry fits it: its master ID and whether the entry has the
        // master's field names.
        let tail = self.nodes.last_key_value().and_then(|(master, n)| {
            let fits = (n.bytes as u64).saturating_add(total) < max_bytes
                && (limits.max_entries == 0 || n.count + n.deleted < limits.max_entries);
            let same = || {
                n.master_fields.len() == numfields
                    && n.master_fields
                        .iter()
                        .zip(field_names())
                        .all(|(a, b)| a == b)
            };
            fits.then(|| (*master, same()))
        });
        let (master, same_fields) = tail.unwrap_or((id, true));
        // flags, ms and seq deltas, [numfields + field names], values, lp-count.
        let mut add = lp::int(if same_fields { 2 } else { 0 })
            + lp::int(id.ms.wrapping_sub(master.ms) as i64)
            + lp::int(id.seq.wrapping_sub(master.seq) as i64);
        let mut lp_count = numfields + 3;
        if !same_fields {
            add += lp::int(numfields as i64);
            add += field_names().map(|f| lp::string(f)).sum::<usize>();
            lp_count += numfields + 1;
        }
        add += fields
            .iter()
            .skip(1)
            .step_by(2)
            .map(|v| lp::string(v))
            .sum::<usize>();
        add += lp::int(lp_count as i64);
        if tail.is_some() {
            let mut e = self.nodes.last_entry().expect("tail node");
            let node = e.get_mut();
            let before = node.bytes;
            node.bytes =
                node.bytes + lp::int(node.count as i64 + 1) - lp::int(node.count as i64) + add;
            node.count += 1;
            node.last = id;
            self.lp_bytes = self.lp_bytes - before + node.bytes;
        } else {
            let master_fields: Box<[Bytes]> = field_names().cloned().collect();
            let bytes = lp::EMPTY
                + lp::int(1)
                + lp::int(0)
                + lp::int(numfields as i64)
                + master_fields.iter().map(|f| lp::string(f)).sum::<usize>()
                + lp::int(0)
                + add;
            let node = Node {
                count: 1,
                deleted: 0,
                bytes,
                master_fields,
                last: id,
            };
            self.nodes.insert(id, node);
            self.lp_bytes += bytes;
        }
        self.entries.insert(id, fields);
        self.entries_added += 1;
        self.last_id = id;
        if self.entries.len() == 1 {
            self.first_id = id;
        }
        Ok(id)
    }

    /// The node holding `id` (the greatest master ID not above it).
    fn node_of(&self, id: &StreamId) -> Option<StreamId> {
        self.nodes.range(..=*id).next_back().map(|(k, _)| *k)
    }

    /// Flags one live entry deleted inside its node, dropping the node when it was the
    /// node's last live entry (`streamIteratorRemoveEntry`).
    fn remove_entry(&mut self, id: &StreamId) -> bool {
        if self.entries.remove(id).is_none() {
            return false;
        }
        let Some(master) = self.node_of(id) else {
            return true;
        };
        let node = self.nodes.get_mut(&master).expect("node exists");
        if node.count <= 1 {
            self.lp_bytes -= node.bytes;
            self.nodes.remove(&master);
        } else {
            let before = node.bytes;
            node.bytes = node.bytes + lp::int(node.count as i64 - 1) - lp::int(node.count as i64)
                + lp::int(node.deleted as i64 + 1)
                - lp::int(node.deleted as i64);
            node.count -= 1;
            node.deleted += 1;
            self.lp_bytes = self.lp_bytes - before + node.bytes;
        }
        true
    }

    /// XDEL: deletes the given IDs; returns how many existed.
    pub fn delete(&mut self, ids: &[StreamId]) -> u64 {
        let mut deleted = 0;
        let mut first_entry = false;
        for id in ids {
            if self.remove_entry(id) {
                if *id == self.first_id {
                    first_entry = true;
                }
                if *id > self.max_deleted {
                    self.max_deleted = *id;
                }
                deleted += 1;
            }
        }
        if deleted > 0 {
            if self.entries.is_empty() {
                self.first_id = StreamId::MIN;
            } else if first_entry {
                self.first_id = self.first_live();
            }
        }
        deleted
    }

    /// Live entry IDs of the node starting at `master` (up to the next node's master).
    fn node_ids(&self, master: StreamId, next: Option<StreamId>) -> Vec<StreamId> {
        let upper = match next {
            Some(n) => Bound::Excluded(n),
            None => Bound::Unbounded,
        };
        self.entries
            .range((Bound::Included(master), upper))
            .map(|(k, _)| *k)
            .collect()
    }

    fn first_live(&self) -> StreamId {
        self.entries.keys().next().copied().unwrap_or(StreamId::MAX)
    }

    /// Trims from the head (`streamTrim`); returns the number of entries removed.
    pub fn trim(&mut self, t: Trim) -> u64 {
        let mut deleted: u64 = 0;
        // Always the head node: every node before it is gone.
        while let Some((&master, node)) = self.nodes.first_key_value() {
            let len = self.entries.len() as u64;
            if let TrimBy::MaxLen(max) = t.strategy {
                if len <= max {
                    break;
                }
            }
            let entries = node.count;
            if t.limit != 0 && deleted + entries > t.limit {
                break;
            }
            let remove_node = match t.strategy {
                TrimBy::MaxLen(max) => len - entries >= max,
                TrimBy::MinId(min) => node.last < min,
            };
            if remove_node {
                let (_, node) = self.nodes.pop_first().expect("head node");
                self.lp_bytes -= node.bytes;
                // The node's entries are all the entries below the next node's master.
                match self.nodes.first_key_value().map(|(k, _)| *k) {
                    Some(next) => {
                        let rest = self.entries.split_off(&next);
                        drop(std::mem::replace(&mut self.entries, rest));
                    }
                    None => self.entries.clear(),
                }
                deleted += entries;
                continue;
            }
            if t.approx {
                break;
            }
            let next = self.nodes.keys().nth(1).copied();
            // Flag entries deleted inside this node until the target is met.
            let ids = self.node_ids(master, next);
            let mut from_node = 0u64;
            for id in ids {
                let stop = match t.strategy {
                    TrimBy::MaxLen(max) => self.entries.len() as u64 <= max,
                    TrimBy::MinId(min) => id >= min,
                };
                if stop {
                    break;
                }
                self.entries.remove(&id);
                from_node += 1;
            }
            let node = self.nodes.get_mut(&master).expect("node exists");
            let before = node.bytes;
            let (c, d) = (node.count, node.deleted);
            node.bytes = node.bytes + lp::int((c - from_node) as i64) - lp::int(c as i64)
                + lp::int((d + from_node) as i64)
                - lp::int(d as i64);
            node.count -= from_node;
            node.deleted += from_node;
            self.lp_bytes = self.lp_bytes - before + node.bytes;
            deleted += from_node;
            break;
        }
        if self.entries.is_empty() {
            self.first_id = StreamId::MIN;
        } else if deleted > 0 {
            self.first_id = self.first_live();
        }
        deleted
    }

    /// Whether a tombstone may lie in `start..=end` (`streamRangeHasTombstones`).
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.entries.is_empty() || self.max_deleted.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted {
            // The latest tombstone is before the first entry.
            return false;
        }
        start <= self.max_deleted && self.max_deleted <= end
    }

    /// `streamEstimateDistanceFromFirstEverEntry`: the read counter of `id`, if knowable.
    pub fn estimate_distance(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.entries.is_empty() && id <= self.last_id {
            return Some(self.entries_added);
        }
        if id == self.last_id {
            return Some(self.entries_added);
        }
        if id > self.last_id {
            return None;
        }
        let len = self.entries.len() as u64;
        if self.max_deleted.is_zero() || self.max_deleted < self.first_id {
            if id < self.first_id {
                return Some(self.entries_added - len);
            }
            if id == self.first_id {
                return Some(self.entries_added - len + 1);
            }
        }
        None
    }

    /// A group's lag (`streamReplyWithCGLag`); `None` when it cannot be known.
    pub fn lag(&self, g: &Group) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != group::INVALID_ENTRIES_READ
            && !self.range_has_tombstones(g.last_id, StreamId::MAX)
        {
            return Some(self.entries_added.wrapping_sub(g.entries_read as u64));
        }
        self.estimate_distance(g.last_id)
            .map(|read| self.entries_added.wrapping_sub(read))
    }

    /// Advances `group`'s last-delivered ID and read counter past `id`, as each entry
    /// delivered by XREADGROUP does (`streamReplyWithRange`).
    pub fn advance_group(&mut self, group: &[u8], id: StreamId) {
        let Some(g) = self.groups.get(group) else {
            return;
        };
        if id <= g.last_id {
            return;
        }
        let read = g.entries_read;
        // Redis 7.2: counting on is safe when no tombstone lies at or after `id` (-1 is
        // "unknown", SCG_INVALID_ENTRIES_READ).
        let new_read = if read != group::INVALID_ENTRIES_READ
            && !self.range_has_tombstones(id, StreamId::MAX)
        {
            // Wraps at i64::MAX as the C counter does (`XGROUP SETID … ENTRIESREAD` and RESTORE
            // accept any non-negative value).
            Some(read.wrapping_add(1))
        } else if self.entries_added > 0 {
            Some(self.estimate_distance(id).map_or(-1, |d| d as i64))
        } else {
            None
        };
        let g = self.groups.get_mut(group).expect("group exists");
        if let Some(r) = new_read {
            g.entries_read = r;
        }
        g.last_id = id;
    }

    /// The listpack nodes in ID order, as an RDB payload stores them (`rdb::stream::save`):
    /// master ID, master field names and the node's live entries.
    pub(crate) fn node_views(&self) -> impl Iterator<Item = NodeView<'_>> {
        let mut it = self.nodes.iter().peekable();
        std::iter::from_fn(move || {
            let (master, node) = it.next()?;
            let upper = match it.peek() {
                Some((next, _)) => Bound::Excluded(**next),
                None => Bound::Unbounded,
            };
            Some(NodeView {
                master: *master,
                master_fields: &node.master_fields,
                entries: self.entries.range((Bound::Included(*master), upper)),
            })
        })
    }

    /// Appends a listpack node read from an RDB payload (`rdb::stream::load`), keeping
    /// the payload's node boundaries as Redis's RESTORE does. `live` holds the node's
    /// live entries in increasing ID order, `deleted` counts its tombstones, `bytes` is
    /// the listpack's size and `last` its last entry's ID (live or deleted). Returns
    /// false, changing nothing, unless every ID lies in `master..=last` and above every
    /// ID of the nodes already present. The counters (`last_id`, ...) are left to the
    /// caller.
    pub(crate) fn push_loaded_node(
        &mut self,
        master: StreamId,
        master_fields: Box<[Bytes]>,
        live: Vec<(StreamId, Fields)>,
        deleted: u64,
        bytes: usize,
        last: StreamId,
    ) -> bool {
        let after_tail = self
            .nodes
            .iter()
            .next_back()
            .is_none_or(|(_, n)| n.last < master);
        let mut prev: Option<StreamId> = None;
        let ordered = live.iter().all(|(id, _)| {
            let ok = *id >= master && *id <= last && prev.is_none_or(|p| p < *id);
            prev = Some(*id);
            ok
        });
        if !after_tail || master > last || !ordered {
            return false;
        }
        let node = Node {
            count: live.len() as u64,
            deleted,
            bytes,
            master_fields,
            last,
        };
        self.nodes.insert(master, node);
        self.lp_bytes += bytes;
        self.entries.extend(live);
        true
    }

    /// `XSETID`'s checks pass: sets the counters.
    pub fn set_id(&mut self, id: StreamId, entries_added: Option<u64>, max_deleted: StreamId) {
        self.last_id = id;
        if let Some(n) = entries_added {
            self.entries_added = n;
        }
        if !max_deleted.is_zero() {
            self.max_deleted = max_deleted;
        }
    }
}

#[cfg(test)]
mod tests;
