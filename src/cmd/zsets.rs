//! Sorted-set commands with Redis 7.2 (`t_zset.c`) semantics over
//! [`crate::types::zset::ZSet`]: `basic` (ZADD, ZINCRBY, ZREM, lookups, counts), `range`
//! (the ZRANGE family, ZRANGESTORE, ZREMRANGEBY*), `pop` (ZPOP*, ZMPOP and the blocking
//! forms), `setops` (ZUNION/ZINTER/ZDIFF[STORE], ZINTERCARD), `misc` (ZRANDMEMBER, ZSCAN);
//! `parse` holds Redis's number and range parsing.

mod basic;
mod misc;
mod parse;
mod pop;
mod range;
mod setops;
mod table;

pub use table::COMMANDS;

/// For GEOADD, which runs ZADD over a rewritten argument vector (Redis's `geoaddCommand`).
pub(crate) use basic::zadd;
/// Redis's `getDoubleFromObject` (GEO* coordinates and distances).
pub(crate) use parse::string2d;

/// For GEORADIUS STORE and GEOSEARCHSTORE: stores a result set built from scratch under
/// `dst` (or deletes `dst` when it is empty) like the ZSET *STORE commands; replies its size.
pub(crate) fn store_result(cx: &mut Cx, dst: &[u8], z: ZSet, event: &str) -> Reply {
    let z = finish_new(cx, z);
    store(cx, dst, z, event)
}

use super::{errors, Cx};
use crate::config::{lookup, ParamRef};
use crate::instance::notify;
use crate::instance::state::Shared;
use crate::protocol::Reply;
use crate::types::value::Value;
use crate::types::zset::ZSet;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::sync::OnceLock;

/// Read lookup (counts hits/misses): `None` if missing, WRONGTYPE for another type.
fn read<'c>(cx: &'c mut Cx, key: &[u8]) -> Result<Option<&'c ZSet>, Reply> {
    match cx.ks.get(key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::ZSet(z) => Ok(Some(z)),
            _ => Err(errors::wrongtype()),
        },
    }
}

/// Redis's `lookupKeyWrite`: no stats and no WATCH signal (see [`changed`]).
fn write<'c>(cx: &'c mut Cx, key: &[u8]) -> Result<Option<&'c mut ZSet>, Reply> {
    let db = cx.ks.db;
    match cx.ks.lookup_elems_in(db, key) {
        None => Ok(None),
        Some(e) => match &mut e.value {
            Value::ZSet(z) => Ok(Some(z)),
            _ => Err(errors::wrongtype()),
        },
    }
}

/// After an in-place change: signals WATCHers, and deletes the key if the set is now empty
/// (a key never holds an empty sorted set).
fn changed(cx: &mut Cx, key: &[u8], now_empty: bool) {
    if now_empty {
        cx.ks.remove(key);
    } else {
        let db = cx.ks.db;
        cx.ks.signal_in(db, key);
    }
}

/// Publishes a change's `event`, then `del` if the set went with it.
fn changed_events(cx: &Cx, key: &[u8], event: &str, now_empty: bool) {
    if let Some(ev) = cx.events() {
        ev.emit(notify::ZSET, event, key);
        if now_empty {
            ev.emit(notify::GENERIC, "del", key);
        }
    }
}

/// After members were added: also wakes clients blocked in BZPOP*/BZMPOP on the key.
fn grew(cx: &mut Cx, key: &[u8]) {
    changed(cx, key, false);
    cx.ks.signal_ready(key);
}

/// The `zset-max-listpack-*` thresholds.
#[derive(Clone, Copy)]
struct Limits {
    entries: usize,
    value: usize,
}

fn limits(srv: &Shared) -> Limits {
    static REFS: OnceLock<Option<(ParamRef, ParamRef)>> = OnceLock::new();
    let refs = REFS.get_or_init(|| {
        Some((
            lookup("zset-max-listpack-entries")?,
            lookup("zset-max-listpack-value")?,
        ))
    });
    match refs {
        Some((e, v)) => Limits {
            entries: srv.config.num(*e).max(0) as usize,
            value: srv.config.num(*v).max(0) as usize,
        },
        None => Limits {
            entries: 128,
            value: 64,
        },
    }
}

/// A result set built from scratch (store commands): `skiplist` unless it fits a listpack
/// (Redis's `zsetConvertToListpackIfNeeded`).
fn finish_new(cx: &Cx, mut z: ZSet) -> ZSet {
    let lim = limits(cx.srv);
    if z.len() <= lim.entries && z.max_member_len() <= lim.value {
        z.convert_to_listpack();
    }
    z
}

/// Stores a result set at `dst` (dropping any TTL), or deletes `dst` when it is empty;
/// replies with the result's size.
fn store(cx: &mut Cx, dst: &[u8], z: ZSet, event: &str) -> Reply {
    if z.is_empty() {
        if cx.ks.remove(dst).is_some() {
            cx.notify(notify::GENERIC, "del", dst);
        } else {
            // Nothing stored and nothing deleted: no change for the dirty counter.
            cx.changes(0);
        }
        return Reply::Int(0);
    }
    let n = z.len() as i64;
    let created = cx.ks.set(dst, Value::ZSet(Box::new(z)), None).is_none();
    cx.ks.signal_ready(dst);
    if let Some(ev) = cx.events() {
        ev.created(created, dst);
        ev.emit(notify::ZSET, event, dst);
    }
    Reply::Int(n)
}

/// Room kept in front of a pre-encoded member list for its `*<count>\r\n` header.
const HEAD_ROOM: usize = 24;

/// Member/score reply rows: members alone, or with scores (a flat array in RESP2, `[member,
/// score]` pairs in RESP3).
///
/// Members alone are encoded straight into RESP (an array of bulk strings reads the same in
/// RESP2 and RESP3, so this stays protocol-neutral): a `Reply` per member means a refcount
/// round trip per member plus the writer walking the replies again, which made
/// `ZRANGE key 0 9` cost ~1.45 µs of server CPU per request against ~0.98 µs encoded directly
/// (scripts/bench.sh zrange10, P16). A consumer that needs structure (scripts, later) can
/// read the bytes back with the request parser: they are exactly a command-shaped array.
struct Rows {
    items: Vec<Reply>,
    /// The pre-encoded members-only reply (`HEAD_ROOM` bytes reserved at the front) and
    /// its element count.
    raw: Option<(BytesMut, usize)>,
    withscores: bool,
    resp3: bool,
}

impl Rows {
    fn new(resp3: bool, withscores: bool, cap: usize) -> Rows {
        let cap = cap.min(1024);
        let (items, raw) = if withscores {
            let per = if resp3 { 1 } else { 2 };
            (Vec::with_capacity(cap * per), None)
        } else {
            let mut buf = BytesMut::with_capacity(HEAD_ROOM + cap * 24);
            buf.put_bytes(0, HEAD_ROOM);
            (Vec::new(), Some((buf, 0)))
        };
        Rows {
            items,
            raw,
            withscores,
            resp3,
        }
    }

    #[inline]
    fn push(&mut self, member: &Bytes, score: f64) {
        if let Some((buf, n)) = &mut self.raw {
            let mut digits = itoa::Buffer::new();
            let len = digits.format(member.len()).as_bytes();
            buf.reserve(len.len() + member.len() + 5);
            buf.put_u8(b'$');
            buf.put_slice(len);
            buf.put_slice(b"\r\n");
            buf.put_slice(member);
            buf.put_slice(b"\r\n");
            *n += 1;
            return;
        }
        let m = Reply::Bulk(member.clone());
        match (self.withscores, self.resp3) {
            (false, _) => self.items.push(m),
            (true, false) => {
                self.items.push(m);
                self.items.push(Reply::Double(score));
            }
            (true, true) => self.items.push(Reply::Array(vec![m, Reply::Double(score)])),
        }
    }

    fn reply(self) -> Reply {
        let Some((mut buf, n)) = self.raw else {
            return Reply::Array(self.items);
        };
        // The header goes right before the members, in the room kept for it.
        let mut digits = itoa::Buffer::new();
        let count = digits.format(n).as_bytes();
        let head = count.len() + 3;
        let at = HEAD_ROOM - head;
        buf[at] = b'*';
        buf[at + 1..at + 1 + count.len()].copy_from_slice(count);
        buf[HEAD_ROOM - 2..HEAD_ROOM].copy_from_slice(b"\r\n");
        buf.advance(at);
        Reply::Raw(buf.freeze())
    }
}

/// An option name compared as Redis's `strcasecmp` on a C string: the argument's text ends
/// at its first NUL byte.
#[inline]
fn opt(arg: &[u8], name: &str) -> bool {
    let end = arg.iter().position(|&b| b == 0).unwrap_or(arg.len());
    arg[..end].eq_ignore_ascii_case(name.as_bytes())
}

#[cfg(test)]
mod tests;
