//! Stream commands with Redis 7.2 (`t_stream.c`) semantics over
//! [`crate::types::stream::Stream`]: `basic` (XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM,
//! XSETID), `read` (XREAD, XREADGROUP, blocking included), `groups` (XGROUP, XACK,
//! XPENDING, XCLAIM, XAUTOCLAIM), `info` (XINFO).
//!
//! Inside the family the arrows point one way: `table` (the command table) sits on top and
//! names the handlers of the command files; the command files import only this root (the
//! shared lookups, ID parsing and replies below) and `journal`, never each other.

mod basic;
mod groups;
mod info;
mod journal;
mod read;
mod table;

pub use table::COMMANDS;

use super::{errors, Cx};
use crate::config::{lookup, ParamRef};
use crate::instance::notify;
use crate::protocol::Reply;
use crate::types::stream::{id, Fields, IdRules, NodeLimits, Stream, StreamId};
use crate::types::value::{Entry, Value};
use bytes::Bytes;
use std::sync::OnceLock;

/// Read lookup (counts hits/misses): `None` if missing, WRONGTYPE for another type.
fn lookup_read<'c>(cx: &'c mut Cx, key: &[u8]) -> Result<Option<&'c Stream>, Reply> {
    match cx.ks.get(key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::Stream(s) => Ok(Some(s)),
            _ => Err(errors::wrongtype()),
        },
    }
}

/// Write lookup (Redis `lookupKeyWrite`): no stats, no WATCH signal (see [`modified`]).
fn lookup_write<'c>(cx: &'c mut Cx, key: &[u8]) -> Result<Option<&'c mut Stream>, Reply> {
    let db = cx.ks.db;
    as_stream(cx.ks.lookup_elems_in(db, key))
}

/// A looked-up entry as a stream: `None` when missing, WRONGTYPE for another type.
fn as_stream(e: Option<&mut Entry>) -> Result<Option<&mut Stream>, Reply> {
    match e {
        None => Ok(None),
        Some(e) => match &mut e.value {
            Value::Stream(s) => Ok(Some(s)),
            _ => Err(errors::wrongtype()),
        },
    }
}

/// A stream the command already looked up (or just created) with [`lookup_write`], again:
/// no second access is counted.
fn relookup<'c>(cx: &'c mut Cx, key: &[u8]) -> Result<Option<&'c mut Stream>, Reply> {
    let db = cx.ks.db;
    as_stream(cx.ks.get_in(db, key))
}

/// After an in-place change: signals WATCHers of `key`.
fn modified(cx: &mut Cx, key: &[u8]) {
    let db = cx.ks.db;
    cx.ks.signal_in(db, key);
}

fn reply(r: Result<Reply, Reply>) -> Reply {
    r.unwrap_or_else(|e| e)
}

fn invalid_id() -> Reply {
    errors::err(errors::INVALID_STREAM_ID)
}

/// `streamParseStrictIDOrReply` (no `-`/`+`).
fn strict_id(arg: &[u8]) -> Result<StreamId, Reply> {
    id::parse(arg, IdRules::STRICT)
        .map(|p| p.id)
        .ok_or_else(invalid_id)
}

/// `streamParseIDOrReply` (`-`/`+` allowed).
fn loose_id(arg: &[u8]) -> Result<StreamId, Reply> {
    id::parse(arg, IdRules::LOOSE)
        .map(|p| p.id)
        .ok_or_else(invalid_id)
}

/// A range start (`(` exclusive): the first ID included.
fn range_start(arg: &[u8]) -> Result<StreamId, Reply> {
    let (id, ex) = id::parse_interval(arg, 0).ok_or_else(invalid_id)?;
    if ex {
        return id
            .incr()
            .ok_or_else(|| errors::err(errors::INVALID_START_ID));
    }
    Ok(id)
}

/// A range end (`(` exclusive): the last ID included.
fn range_end(arg: &[u8]) -> Result<StreamId, Reply> {
    let (id, ex) = id::parse_interval(arg, u64::MAX).ok_or_else(invalid_id)?;
    if ex {
        return id.decr().ok_or_else(|| errors::err(errors::INVALID_END_ID));
    }
    Ok(id)
}

/// `<ms>-<seq>` as a bulk string (formatted on the stack: XADD replies with one per call).
fn id_reply(id: StreamId) -> Reply {
    let (mut ms, mut seq) = (itoa::Buffer::new(), itoa::Buffer::new());
    let (ms, seq) = (ms.format(id.ms).as_bytes(), seq.format(id.seq).as_bytes());
    let mut text = Vec::with_capacity(ms.len() + 1 + seq.len());
    text.extend_from_slice(ms);
    text.push(b'-');
    text.extend_from_slice(seq);
    Reply::Bulk(Bytes::from(text))
}

/// `[id, [f1, v1, ...]]`.
fn entry_reply(id: StreamId, fields: &Fields) -> Reply {
    Reply::Array(vec![
        id_reply(id),
        Reply::Array(fields.iter().cloned().map(Reply::Bulk).collect()),
    ])
}

/// `getLongLongFromObjectOrReply` with an optional message of the command's own.
fn int_or(arg: &[u8], msg: Option<&'static str>) -> Result<i64, Reply> {
    crate::num::parse_i64(arg).ok_or_else(|| errors::err(msg.unwrap_or(errors::NOT_INT)))
}

/// `stream-node-max-bytes` / `stream-node-max-entries` (parameter references resolved
/// once: XADD is a hot path).
fn limits(cx: &Cx) -> NodeLimits {
    static REFS: OnceLock<Option<(ParamRef, ParamRef)>> = OnceLock::new();
    let refs = REFS.get_or_init(|| {
        Some((
            lookup("stream-node-max-bytes")?,
            lookup("stream-node-max-entries")?,
        ))
    });
    match refs {
        Some((b, e)) => NodeLimits {
            max_bytes: cx.srv.config.num(*b).max(0) as u64,
            max_entries: cx.srv.config.num(*e).max(0) as u64,
        },
        None => NodeLimits::default(),
    }
}

/// Command time in ms as Redis's `mstime_t`.
fn now_ms(cx: &Cx) -> i64 {
    cx.now() as i64
}

/// `xgroup-createconsumer` when XREADGROUP, XCLAIM or XAUTOCLAIM created their consumer
/// (`streamCreateConsumer`).
fn consumer_touched(ev: Option<notify::Events>, created: bool, key: &[u8]) {
    if let (Some(ev), true) = (ev, created) {
        ev.emit(notify::STREAM, "xgroup-createconsumer", key);
    }
}
