//! XGROUP (CREATE, SETID, DESTROY, CREATECONSUMER, DELCONSUMER, HELP), XACK, XPENDING,
//! XCLAIM, XAUTOCLAIM.

use super::journal::{journal, Touched};
use super::{
    consumer_touched, entry_reply, id_reply, int_or, lookup_read, lookup_write, loose_id, modified,
    now_ms, range_end, range_start, reply, strict_id,
};
use crate::cmd::args::{self, is};
use crate::cmd::{errors, Cx};
use crate::instance::notify;
use crate::protocol::Reply;
use crate::types::stream::group::{ClaimCount, INVALID_ENTRIES_READ};
use crate::types::stream::{id, Group, IdRules, Stream, StreamId};
use crate::types::value::Value;
use bytes::Bytes;
use std::ops::Bound;

/// The part of `xgroupCommand` shared by every subcommand taking a key and a group:
/// options, key and group checks. Returns (mkstream, entries_read).
fn xgroup_prelude(cx: &mut Cx, needs_group: bool) -> Result<(bool, i64), Reply> {
    let args = cx.args;
    let sub = &args[1];
    let create = is(sub, "CREATE");
    let setid = is(sub, "SETID");
    let mut mkstream = false;
    let mut entries_read = INVALID_ENTRIES_READ;
    let mut i = 5;
    while i < args.len() {
        if create && is(&args[i], "MKSTREAM") {
            mkstream = true;
            i += 1;
        } else if (create || setid) && is(&args[i], "ENTRIESREAD") && i + 1 < args.len() {
            entries_read = int_or(&args[i + 1], None)?;
            if entries_read < 0 && entries_read != INVALID_ENTRIES_READ {
                return Err(errors::err(errors::ENTRIESREAD_RANGE));
            }
            i += 2;
        } else {
            return Err(errors::subcommand_syntax("xgroup", sub));
        }
    }
    let (key, group) = (&args[2], &args[3]);
    let s = lookup_write(cx, key)?;
    if !mkstream {
        let Some(s) = s else {
            return Err(errors::err(errors::XGROUP_NEEDS_KEY));
        };
        if needs_group && !s.groups.contains_key(&group[..]) {
            return Err(errors::nogroup_for_key(group, key));
        }
    }
    Ok((mkstream, entries_read))
}

pub fn xgroup_create(cx: &mut Cx) -> Reply {
    reply((|| {
        let (_, entries_read) = xgroup_prelude(cx, false)?;
        let args = cx.args;
        if args.len() > 8 {
            return Err(errors::subcommand_syntax("xgroup", &args[1]));
        }
        let key = &args[2];
        let id = if &args[4][..] == b"$" {
            lookup_write(cx, key)?.map_or(StreamId::MIN, |s| s.last_id)
        } else {
            strict_id(&args[4])?
        };
        let ev = cx.events();
        let mut created = false;
        if lookup_write(cx, key)?.is_none() {
            created = true;
            cx.ks.set(key, Value::Stream(Box::default()), None);
            if let Some(ev) = ev {
                ev.created(true, key);
            }
        }
        let s = lookup_write(cx, key)?.expect("stream exists");
        if s.groups.contains_key(&args[3][..]) {
            return Err(errors::err(errors::BUSYGROUP));
        }
        s.groups.insert(
            Bytes::copy_from_slice(&args[3]),
            Group::new(id, entries_read),
        );
        if !created && cx.ks.journaling() {
            journal(cx, key, &[Touched::Group(&args[3])]);
        }
        modified(cx, key);
        if let Some(ev) = ev {
            ev.emit(notify::STREAM, "xgroup-create", key);
        }
        Ok(Reply::OK)
    })())
}

pub fn xgroup_setid(cx: &mut Cx) -> Reply {
    reply((|| {
        let (_, entries_read) = xgroup_prelude(cx, true)?;
        let args = cx.args;
        if args.len() != 5 && args.len() != 7 {
            return Err(errors::subcommand_syntax("xgroup", &args[1]));
        }
        let s = lookup_write(cx, &args[2])?.expect("stream exists");
        let id = if &args[4][..] == b"$" {
            s.last_id
        } else {
            loose_id(&args[4])?
        };
        let g = s.groups.get_mut(&args[3][..]).expect("group exists");
        g.last_id = id;
        g.entries_read = entries_read;
        if cx.ks.journaling() {
            journal(cx, &args[2], &[Touched::Group(&args[3])]);
        }
        modified(cx, &args[2]);
        cx.notify(notify::STREAM, "xgroup-setid", &args[2]);
        Ok(Reply::OK)
    })())
}

pub fn xgroup_destroy(cx: &mut Cx) -> Reply {
    reply((|| {
        xgroup_prelude(cx, false)?;
        let args = cx.args;
        let s = lookup_write(cx, &args[2])?.expect("stream exists");
        if s.groups.remove(&args[3][..]).is_none() {
            return Ok(Reply::Int(0));
        }
        if cx.ks.journaling() {
            journal(cx, &args[2], &[Touched::Group(&args[3])]);
        }
        modified(cx, &args[2]);
        cx.notify(notify::STREAM, "xgroup-destroy", &args[2]);
        // Clients blocked in XREADGROUP on this group re-run and get NOGROUP.
        cx.ks.signal_ready(&args[2]);
        Ok(Reply::Int(1))
    })())
}

pub fn xgroup_createconsumer(cx: &mut Cx) -> Reply {
    reply((|| {
        xgroup_prelude(cx, true)?;
        let args = cx.args;
        let now = now_ms(cx);
        let s = lookup_write(cx, &args[2])?.expect("stream exists");
        let g = s.groups.get_mut(&args[3][..]).expect("group exists");
        let created = g.create_consumer(&args[4], now);
        if created {
            if cx.ks.journaling() {
                journal(cx, &args[2], &[Touched::Consumer(&args[3], &args[4])]);
            }
            modified(cx, &args[2]);
            cx.notify(notify::STREAM, "xgroup-createconsumer", &args[2]);
        }
        Ok(Reply::Int(i64::from(created)))
    })())
}

pub fn xgroup_delconsumer(cx: &mut Cx) -> Reply {
    reply((|| {
        xgroup_prelude(cx, true)?;
        let args = cx.args;
        let journaling = cx.ks.journaling();
        let s = lookup_write(cx, &args[2])?.expect("stream exists");
        let g = s.groups.get_mut(&args[3][..]).expect("group exists");
        // Durable: the PEL rows of the consumer go with it.
        let owned: Vec<StreamId> = match g.consumers.get(&args[4][..]) {
            Some(c) if journaling => c.pel.iter().copied().collect(),
            _ => Vec::new(),
        };
        let pending = g.delete_consumer(&args[4]);
        if pending.is_some() {
            if journaling {
                let (g, c) = (&args[3], &args[4]);
                journal(
                    cx,
                    &args[2],
                    &[Touched::Pel(g, &owned), Touched::Consumer(g, c)],
                );
            }
            modified(cx, &args[2]);
            cx.notify(notify::STREAM, "xgroup-delconsumer", &args[2]);
        }
        Ok(Reply::Int(pending.unwrap_or(0) as i64))
    })())
}

pub fn xgroup_help(_cx: &mut Cx) -> Reply {
    args::help(
        "XGROUP",
        &[
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
        ],
    )
}

pub fn xack(cx: &mut Cx) -> Reply {
    reply((|| {
        let args = cx.args;
        let has_group = match lookup_read(cx, &args[1])? {
            Some(s) => s.groups.contains_key(&args[2][..]),
            None => false,
        };
        if !has_group {
            return Ok(Reply::Int(0));
        }
        let ids = args[3..]
            .iter()
            .map(|a| strict_id(a))
            .collect::<Result<Vec<_>, _>>()?;
        let s = lookup_write(cx, &args[1])?.expect("stream exists");
        let g = s.groups.get_mut(&args[2][..]).expect("group exists");
        let n = ids.iter().filter(|id| g.ack(id)).count();
        if n > 0 {
            if cx.ks.journaling() {
                journal(cx, &args[1], &[Touched::Pel(&args[2], &ids)]);
            }
            modified(cx, &args[1]);
        }
        Ok(Reply::Int(n as i64))
    })())
}

/// The stream and group for commands that require both (NOGROUP otherwise).
fn stream_and_group<'c>(
    cx: &'c mut Cx,
    key: &Bytes,
    group: &Bytes,
    suffix: &str,
) -> Result<&'c mut Stream, Reply> {
    match lookup_write(cx, key)? {
        Some(s) if s.groups.contains_key(&group[..]) => Ok(s),
        _ => Err(errors::nogroup_key_or_group(key, group, suffix)),
    }
}

pub fn xpending(cx: &mut Cx) -> Reply {
    reply(xpending_inner(cx))
}

fn xpending_inner(cx: &mut Cx) -> Result<Reply, Reply> {
    let args = cx.args;
    let argc = args.len();
    if argc != 3 && !(6..=9).contains(&argc) {
        return Err(errors::syntax());
    }
    let mut range = None;
    if argc >= 6 {
        let mut at = 3;
        let mut minidle = 0;
        if is(&args[3], "IDLE") {
            minidle = int_or(&args[4], None)?;
            if argc < 8 {
                return Err(errors::syntax());
            }
            at += 2;
        }
        let count = int_or(&args[at + 2], None)?.max(0);
        let start = range_start(&args[at])?;
        let end = range_end(&args[at + 1])?;
        let consumer = args.get(at + 3).cloned();
        range = Some((minidle, count, start, end, consumer));
    }
    lookup_read(cx, &args[1])?;
    let now = now_ms(cx);
    let s = stream_and_group(cx, &args[1], &args[2], "")?;
    let g = &s.groups[&args[2][..]];
    let Some((minidle, mut count, start, end, consumer)) = range else {
        let Some((first, _)) = g.pel.iter().next() else {
            return Ok(Reply::Array(vec![
                Reply::Int(0),
                Reply::Nil,
                Reply::Nil,
                Reply::NilArray,
            ]));
        };
        let last = g.pel.keys().next_back().copied().unwrap_or(*first);
        let owners = g
            .consumers
            .iter()
            .filter(|(_, c)| !c.pel.is_empty())
            .map(|(name, c)| {
                Reply::Array(vec![
                    Reply::Bulk(name.clone()),
                    Reply::Bulk(Bytes::from(c.pel.len().to_string())),
                ])
            })
            .collect();
        return Ok(Reply::Array(vec![
            Reply::Int(g.pel.len() as i64),
            id_reply(*first),
            id_reply(last),
            Reply::Array(owners),
        ]));
    };
    let ids: Box<dyn Iterator<Item = StreamId>> = match &consumer {
        Some(name) => match g.consumers.get(&name[..]) {
            None => return Ok(Reply::Array(Vec::new())),
            Some(c) => Box::new(c.pel.range(start..).copied()),
        },
        None => Box::new(g.pel.range(start..).map(|(k, _)| *k)),
    };
    let mut out = Vec::new();
    for id in ids {
        if count == 0 || id > end {
            break;
        }
        let n = &g.pel[&id];
        if minidle != 0 && now - n.delivery_time < minidle {
            continue;
        }
        count -= 1;
        out.push(Reply::Array(vec![
            id_reply(id),
            Reply::Bulk(n.consumer.clone()),
            Reply::Int((now - n.delivery_time).max(0)),
            Reply::Int(n.delivery_count as i64),
        ]));
    }
    Ok(Reply::Array(out))
}

pub fn xclaim(cx: &mut Cx) -> Reply {
    reply(xclaim_inner(cx))
}

fn xclaim_inner(cx: &mut Cx) -> Result<Reply, Reply> {
    let args = cx.args;
    let (key, gname, cname) = (&args[1], &args[2], &args[3]);
    lookup_read(cx, key)?;
    stream_and_group(cx, key, gname, "")?;
    let minidle = int_or(&args[4], Some(errors::XCLAIM_MIN_IDLE))?.max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match id::parse(&args[j], IdRules::STRICT) {
            Some(p) => ids.push(p.id),
            None => break,
        }
        j += 1;
    }
    let now = now_ms(cx);
    let (mut force, mut justid) = (false, false);
    let mut retrycount: i64 = -1;
    let mut deliverytime: i64 = -1;
    let mut last_id = StreamId::MIN;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = &args[j][..];
        if is(opt, "FORCE") {
            force = true;
        } else if is(opt, "JUSTID") {
            justid = true;
        } else if is(opt, "IDLE") && more > 0 {
            j += 1;
            deliverytime = now.wrapping_sub(int_or(&args[j], Some(errors::XCLAIM_IDLE))?);
        } else if is(opt, "TIME") && more > 0 {
            j += 1;
            deliverytime = int_or(&args[j], Some(errors::XCLAIM_TIME))?;
        } else if is(opt, "RETRYCOUNT") && more > 0 {
            j += 1;
            retrycount = int_or(&args[j], Some(errors::XCLAIM_RETRYCOUNT))?;
        } else if is(opt, "LASTID") && more > 0 {
            j += 1;
            last_id = strict_id(&args[j])?;
        } else {
            return Err(errors::xclaim_option(opt));
        }
        j += 1;
    }
    if deliverytime < 0 || deliverytime > now {
        deliverytime = now;
    }
    let ev = cx.events();
    let s = stream_and_group(cx, key, gname, "")?;
    let present: Vec<bool> = ids.iter().map(|id| s.contains(id)).collect();
    let g = s.groups.get_mut(&gname[..]).expect("group exists");
    if last_id > g.last_id {
        g.last_id = last_id;
    }
    // 7.2 creates the consumer (and publishes it) whether or not anything is claimed.
    consumer_touched(ev, g.touch_consumer(cname, now), key);
    let mut claimed = Vec::new();
    for (id, exists) in ids.iter().zip(present) {
        if !exists {
            // Pending entries whose message is gone are dropped from the PEL.
            g.ack(id);
            continue;
        }
        let mut fresh = false;
        if force && !g.pel.contains_key(id) {
            g.force_pending(*id, now);
            fresh = true;
        }
        let Some(n) = g.pel.get(id) else {
            continue;
        };
        if !fresh && minidle != 0 && now - n.delivery_time < minidle {
            continue;
        }
        let count = if retrycount >= 0 {
            ClaimCount::Set(retrycount as u64)
        } else if justid {
            ClaimCount::Keep
        } else {
            ClaimCount::Increment
        };
        g.claim(*id, cname, deliverytime, count);
        if let Some(c) = g.consumers.get_mut(&cname[..]) {
            c.active_time = now;
        }
        claimed.push(*id);
    }
    let s = lookup_write(cx, key)?.expect("stream exists");
    let out = claimed
        .iter()
        .map(|id| match (justid, s.get(id)) {
            (false, Some(f)) => entry_reply(*id, f),
            _ => id_reply(*id),
        })
        .collect();
    if cx.ks.journaling() {
        let (g, c) = (&gname[..], &cname[..]);
        let what = [
            Touched::Group(g),
            Touched::Consumer(g, c),
            Touched::Pel(g, &ids),
        ];
        journal(cx, key, &what);
    }
    modified(cx, key);
    Ok(Reply::Array(out))
}

pub fn xautoclaim(cx: &mut Cx) -> Reply {
    reply(xautoclaim_inner(cx))
}

fn xautoclaim_inner(cx: &mut Cx) -> Result<Reply, Reply> {
    let args = cx.args;
    let (key, gname, cname) = (&args[1], &args[2], &args[3]);
    let minidle = int_or(&args[4], Some(errors::XAUTOCLAIM_MIN_IDLE))?.max(0);
    let start = range_start(&args[5])?;
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if is(&args[j], "COUNT") && more > 0 {
            let max = i64::MAX / 16;
            count = args::long_in_range(&args[j + 1], 1, max, Some(errors::XAUTOCLAIM_COUNT))?;
            j += 1;
        } else if is(&args[j], "JUSTID") {
            justid = true;
        } else {
            return Err(errors::syntax());
        }
        j += 1;
    }
    lookup_read(cx, key)?;
    let now = now_ms(cx);
    let ev = cx.events();
    let s = stream_and_group(cx, key, gname, "")?;
    let pending: Vec<StreamId> = {
        let g = &s.groups[&gname[..]];
        // At most count * 10 PEL entries are examined, plus one for the cursor.
        let attempts = (count as usize).saturating_mul(10).saturating_add(1);
        g.pel
            .range(start..)
            .take(attempts)
            .map(|(k, _)| *k)
            .collect()
    };
    let exists: Vec<bool> = pending.iter().map(|id| s.contains(id)).collect();
    let g = s.groups.get_mut(&gname[..]).expect("group exists");
    consumer_touched(ev, g.touch_consumer(cname, now), key);
    let mut attempts = count * 10;
    let mut claimed = Vec::new();
    let mut deleted = Vec::new();
    let mut visited = None;
    for (id, exists) in pending.iter().zip(exists) {
        if attempts == 0 || count == 0 {
            break;
        }
        attempts -= 1;
        visited = Some(*id);
        if !exists {
            g.ack(id);
            deleted.push(*id);
            count -= 1;
            continue;
        }
        let n = &g.pel[id];
        if minidle != 0 && now - n.delivery_time < minidle {
            continue;
        }
        let how = if justid {
            ClaimCount::Keep
        } else {
            ClaimCount::Increment
        };
        g.claim(*id, cname, now, how);
        claimed.push(*id);
        count -= 1;
        if let Some(c) = g.consumers.get_mut(&cname[..]) {
            c.active_time = now;
        }
    }
    let cursor = match visited {
        Some(v) => g
            .pel
            .range((Bound::Excluded(v), Bound::Unbounded))
            .next()
            .map_or(StreamId::MIN, |(k, _)| *k),
        None => StreamId::MIN,
    };
    let s = lookup_write(cx, key)?.expect("stream exists");
    let entries = claimed
        .iter()
        .map(|id| match (justid, s.get(id)) {
            (false, Some(f)) => entry_reply(*id, f),
            _ => id_reply(*id),
        })
        .collect();
    if cx.ks.journaling() {
        let (g, c) = (&gname[..], &cname[..]);
        let what = [
            Touched::Consumer(g, c),
            Touched::Pel(g, &claimed),
            Touched::Pel(g, &deleted),
        ];
        journal(cx, key, &what);
    }
    modified(cx, key);
    Ok(Reply::Array(vec![
        id_reply(cursor),
        Reply::Array(entries),
        Reply::Array(deleted.into_iter().map(id_reply).collect()),
    ]))
}
