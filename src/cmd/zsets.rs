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

use super::{errors, Cx};
use crate::config::{lookup, ParamRef};
use crate::engine::{shard_of, Value};
use crate::protocol::Reply;
use crate::server::state::Shared;
use crate::types::zset::ZSet;
use bytes::Bytes;
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
    match cx.ks.lookup_write_in(db, key) {
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
        cx.ks.shard_at(db, shard_of(key)).signal(key);
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
fn store(cx: &mut Cx, dst: &[u8], z: ZSet) -> Reply {
    if z.is_empty() {
        cx.ks.remove(dst);
        return Reply::Int(0);
    }
    let n = z.len() as i64;
    cx.ks.set(dst, Value::ZSet(Box::new(z)), None);
    cx.ks.signal_ready(dst);
    Reply::Int(n)
}

/// Member/score reply rows: members alone, or with scores (a flat array in RESP2, `[member,
/// score]` pairs in RESP3).
struct Rows {
    items: Vec<Reply>,
    withscores: bool,
    resp3: bool,
}

impl Rows {
    fn new(resp3: bool, withscores: bool, cap: usize) -> Rows {
        let per = if withscores && !resp3 { 2 } else { 1 };
        Rows {
            items: Vec::with_capacity(cap.saturating_mul(per).min(1024)),
            withscores,
            resp3,
        }
    }

    #[inline]
    fn push(&mut self, member: &Bytes, score: f64) {
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
        Reply::Array(self.items)
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
