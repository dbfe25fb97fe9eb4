//! The RDB encoding of streams (Redis `rdb.c` `rdbSaveObject`/`rdbLoadObject`, node layout
//! from `t_stream.c`).
//!
//! A stream is saved as its listpack nodes (key: the node's master ID as 16 big-endian
//! bytes; value: the listpack, through `rdbSaveRawString` so LZF may apply), then length,
//! last ID, first ID, max deleted ID and entries added, then the consumer groups: name,
//! last ID, entries read, the group PEL (raw IDs, delivery time, delivery count) and the
//! consumers (name, seen time, [active time in type 21], the IDs they own).
//!
//! Each node's listpack is: the master entry `count deleted nfields f1..fn 0`, then per
//! entry `flags ms-delta seq-delta v1..vn lp-count` when its field names are the master's
//! (flag SAMEFIELDS), else `flags ms-delta seq-delta nfields f1 v1 .. fn vn lp-count`.
//!
//! respite keeps Redis's node boundaries and sizes but not the entries Redis only flags
//! deleted, so a node is saved with its live entries (and a zero deleted count): for a
//! stream nobody deleted from (XADD, with or without `~` trimming) the bytes are Redis's.

use super::listpack::{self, Builder, Entry};
use super::types::{STREAM_LISTPACKS, STREAM_LISTPACKS_2, STREAM_LISTPACKS_3};
use super::{Bad, Reader, Writer};
use crate::types::stream::group::INVALID_ENTRIES_READ;
use crate::types::stream::{Consumer, Fields, Group, Nack, Stream, StreamId};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};

const FLAG_DELETED: i64 = 1;
const FLAG_SAMEFIELDS: i64 = 2;

/// Writes the body of a `STREAM_LISTPACKS_2` object.
pub fn save(s: &Stream, w: &mut Writer) {
    save_as(s, w, STREAM_LISTPACKS_2);
}

/// Writes the body in format 15 (Redis 5: no first/max-deleted IDs, no counters), 19
/// (Redis 7.0) or 21 (Redis 7.2: consumers' active times); 15 and 21 serve the tests.
fn save_as(s: &Stream, w: &mut Writer, rdb_type: u8) {
    let nodes: Vec<_> = s.node_views().collect();
    w.len(nodes.len() as u64);
    for node in nodes {
        let mut lp = Builder::new();
        let names = node.master_fields;
        lp.push_int(node.entries.clone().count() as i64);
        lp.push_int(0);
        lp.push_int(names.len() as i64);
        for f in names {
            lp.push_bytes(f);
        }
        lp.push_int(0);
        for (id, fields) in node.entries {
            let n = fields.len() / 2;
            let same = n == names.len() && fields.iter().step_by(2).eq(names.iter());
            lp.push_int(if same { FLAG_SAMEFIELDS } else { 0 });
            lp.push_int(id.ms.wrapping_sub(node.master.ms) as i64);
            lp.push_int(id.seq.wrapping_sub(node.master.seq) as i64);
            if same {
                for v in fields.iter().skip(1).step_by(2) {
                    lp.push_bytes(v);
                }
            } else {
                lp.push_int(n as i64);
                for f in fields.iter() {
                    lp.push_bytes(f);
                }
            }
            // Elements of the entry before this one, for walking backwards.
            let lp_count = if same { n + 3 } else { 2 * n + 4 };
            lp.push_int(lp_count as i64);
        }
        w.string(&node.master.encode());
        w.string(&lp.finish());
    }
    w.len(s.len() as u64);
    save_id(w, s.last_id);
    if rdb_type != STREAM_LISTPACKS {
        save_id(w, s.first_id);
        save_id(w, s.max_deleted);
        w.len(s.entries_added);
    }
    w.len(s.groups.len() as u64);
    for (name, g) in &s.groups {
        w.string(name);
        save_id(w, g.last_id);
        if rdb_type != STREAM_LISTPACKS {
            // Redis saves the signed counter through rdbSaveLen (-1 becomes 2^64 - 1).
            w.len(g.entries_read as u64);
        }
        w.len(g.pel.len() as u64);
        for (id, nack) in &g.pel {
            w.raw(&id.encode());
            w.millis(nack.delivery_time as u64);
            w.len(nack.delivery_count);
        }
        w.len(g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            w.string(cname);
            w.millis(c.seen_time as u64);
            if rdb_type == STREAM_LISTPACKS_3 {
                w.millis(c.active_time as u64);
            }
            w.len(c.pel.len() as u64);
            for id in &c.pel {
                w.raw(&id.encode());
            }
        }
    }
}

fn save_id(w: &mut Writer, id: StreamId) {
    w.len(id.ms);
    w.len(id.seq);
}

fn load_id(r: &mut Reader) -> Result<StreamId, Bad> {
    Ok(StreamId::new(r.len()?, r.len()?))
}

fn decode_id(b: &[u8]) -> Result<StreamId, Bad> {
    let (ms, seq) = (b.get(..8).ok_or(Bad)?, b.get(8..16).ok_or(Bad)?);
    let ms = u64::from_be_bytes(ms.try_into().map_err(|_| Bad)?);
    let seq = u64::from_be_bytes(seq.try_into().map_err(|_| Bad)?);
    Ok(StreamId::new(ms, seq))
}

/// Reads a stream object of type 15, 19 or 21, checking everything Redis's deep
/// sanitization checks and whatever else respite's invariants need (IDs increasing
/// through the nodes and not above the last ID, the length matching the live entries,
/// every PEL entry owned by exactly one consumer).
pub fn load(r: &mut Reader, rdb_type: u8) -> Result<Stream, Bad> {
    if !matches!(
        rdb_type,
        STREAM_LISTPACKS | STREAM_LISTPACKS_2 | STREAM_LISTPACKS_3
    ) {
        return Err(Bad);
    }
    let count = r.len()?;
    let mut raw: Vec<(StreamId, Vec<u8>)> = Vec::new();
    for _ in 0..count {
        let key = r.string()?;
        if key.len() != 16 {
            return Err(Bad);
        }
        let master = decode_id(&key)?;
        raw.push((master, r.string()?));
    }
    // Redis inserts the nodes into its radix tree, so their order in the payload is free.
    raw.sort_by_key(|(k, _)| *k);
    if raw.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(Bad);
    }
    let mut s = Stream::new();
    let mut tail = None;
    for (master, lp) in &raw {
        tail = Some(load_node(&mut s, *master, lp)?);
    }
    drop(raw);

    let length = r.len()?;
    let last_id = load_id(r)?;
    if length != s.len() as u64 || tail.is_some_and(|t| t > last_id) {
        return Err(Bad);
    }
    s.last_id = last_id;
    if rdb_type == STREAM_LISTPACKS {
        // As Redis migrates old payloads: no tombstones known, every entry counted.
        s.first_id = s.first().map_or(StreamId::MAX, |(id, _)| *id);
        s.entries_added = length;
    } else {
        s.first_id = load_id(r)?;
        s.max_deleted = load_id(r)?;
        s.entries_added = r.len()?;
        // Counters below the live length would make the read-counter arithmetic wrap.
        if s.entries_added < length {
            return Err(Bad);
        }
    }

    let groups = r.len()?;
    for _ in 0..groups {
        let name = Bytes::from(r.string()?);
        let last = load_id(r)?;
        let entries_read = if rdb_type == STREAM_LISTPACKS {
            s.estimate_distance(last)
                .and_then(|d| i64::try_from(d).ok())
                .unwrap_or(INVALID_ENTRIES_READ)
        } else {
            let v = r.len()? as i64;
            if v < INVALID_ENTRIES_READ {
                return Err(Bad);
            }
            v
        };
        let g = load_group(r, rdb_type, last, entries_read)?;
        if s.groups.insert(name, g).is_some() {
            return Err(Bad);
        }
    }
    Ok(s)
}

/// Decodes one node's listpack into `s`; returns the node's last ID (live or deleted).
fn load_node(s: &mut Stream, master: StreamId, lp: &[u8]) -> Result<StreamId, Bad> {
    let mut el = Elems(listpack::parse(lp)?.into_iter());
    let live_count = el.count()?;
    let deleted = el.count()?;
    let nfields = el.count()?;
    let mut names = Vec::new();
    for _ in 0..nfields {
        names.push(el.bytes()?);
    }
    let master_fields: Box<[Bytes]> = names.into_boxed_slice();
    if el.int()? != 0 {
        return Err(Bad);
    }
    let total = live_count.checked_add(deleted).ok_or(Bad)?;
    let mut live: Vec<(StreamId, Fields)> = Vec::new();
    let mut seen_deleted = 0u64;
    let mut last: Option<StreamId> = None;
    for _ in 0..total {
        let flags = el.int()?;
        let ms = master.ms.wrapping_add(el.int()? as u64);
        let seq = master.seq.wrapping_add(el.int()? as u64);
        let id = StreamId::new(ms, seq);
        if id < master || last.is_some_and(|l| l >= id) {
            return Err(Bad);
        }
        last = Some(id);
        let same = flags & FLAG_SAMEFIELDS != 0;
        let mut fields = Vec::new();
        let n = if same {
            for name in master_fields.iter() {
                fields.push(name.clone());
                fields.push(el.bytes()?);
            }
            master_fields.len() as u64
        } else {
            // Field-value pairs follow the field count.
            let n = el.count()?;
            for _ in 0..n {
                fields.push(el.bytes()?);
                fields.push(el.bytes()?);
            }
            n
        };
        let extra = if same { 3 } else { n.saturating_add(4) };
        if el.int()? as u64 != n.saturating_add(extra) {
            return Err(Bad);
        }
        if flags & FLAG_DELETED != 0 {
            seen_deleted += 1;
        } else {
            live.push((id, fields.into_boxed_slice()));
        }
    }
    if !el.is_empty() || live.len() as u64 != live_count || seen_deleted != deleted {
        return Err(Bad);
    }
    // Redis refuses empty listpacks; one with a master entry but no entries is kept.
    let last = last.unwrap_or(master);
    if !s.push_loaded_node(master, master_fields, live, deleted, lp.len(), last) {
        return Err(Bad);
    }
    Ok(last)
}

fn load_group(
    r: &mut Reader,
    rdb_type: u8,
    last: StreamId,
    entries_read: i64,
) -> Result<Group, Bad> {
    let mut g = Group::new(last, entries_read);
    // Owners are filled in from the consumers' PELs.
    let mut pel: BTreeMap<StreamId, (i64, u64, Option<Bytes>)> = BTreeMap::new();
    let n = r.len()?;
    for _ in 0..n {
        let id = decode_id(r.raw(16)?)?;
        let time = r.millis()? as i64;
        let count = r.len()?;
        if pel.insert(id, (time, count, None)).is_some() {
            return Err(Bad);
        }
    }
    let consumers = r.len()?;
    for _ in 0..consumers {
        let name = Bytes::from(r.string()?);
        let seen_time = r.millis()? as i64;
        // Before 7.2 only the seen time was saved; Redis takes it as the active time.
        let active_time = if rdb_type == STREAM_LISTPACKS_3 {
            r.millis()? as i64
        } else {
            seen_time
        };
        let mut own = BTreeSet::new();
        let n = r.len()?;
        for _ in 0..n {
            let id = decode_id(r.raw(16)?)?;
            let owner = &mut pel.get_mut(&id).ok_or(Bad)?.2;
            if owner.is_some() {
                return Err(Bad);
            }
            *owner = Some(name.clone());
            own.insert(id);
        }
        let c = Consumer {
            seen_time,
            active_time,
            pel: own,
        };
        if g.consumers.insert(name, c).is_some() {
            return Err(Bad);
        }
    }
    for (id, (delivery_time, delivery_count, owner)) in pel {
        let nack = Nack {
            consumer: owner.ok_or(Bad)?,
            delivery_time,
            delivery_count,
        };
        g.pel.insert(id, nack);
    }
    Ok(g)
}

/// A cursor over a node's listpack elements.
struct Elems<'a>(std::vec::IntoIter<Entry<'a>>);

impl<'a> Elems<'a> {
    fn next(&mut self) -> Result<Entry<'a>, Bad> {
        self.0.next().ok_or(Bad)
    }

    /// An integer element; strings holding a canonical integer count, as in Redis's
    /// `lpGetIntegerIfValid`.
    fn int(&mut self) -> Result<i64, Bad> {
        self.next()?.as_int().ok_or(Bad)
    }

    fn count(&mut self) -> Result<u64, Bad> {
        u64::try_from(self.int()?).map_err(|_| Bad)
    }

    fn bytes(&mut self) -> Result<Bytes, Bad> {
        Ok(Bytes::from(self.next()?.to_bytes()))
    }

    fn is_empty(&self) -> bool {
        self.0.len() == 0
    }
}

#[cfg(test)]
mod tests;
