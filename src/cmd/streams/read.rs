//! XREAD and XREADGROUP (`xreadCommand`), including BLOCK: a read that finds nothing blocks
//! through [`Cx::block_with_args`] with `$` rewritten to the stream's last ID at block
//! time, so re-running the command after an XADD serves only entries added since.

use super::journal::{journal, Touched};
use super::{
    consumer_touched, entry_reply, id_reply, int_or, lookup_read, lookup_write, now_ms, reply,
    strict_id,
};
use crate::cmd::args::is;
use crate::cmd::{errors, Cx};
use crate::protocol::Reply;
use crate::types::stream::StreamId;
use bytes::Bytes;
use std::time::Duration;

/// The parsed command line.
struct ReadArgs {
    /// Milliseconds; `None` without BLOCK.
    block: Option<u64>,
    count: usize,
    streams_arg: usize,
    n: usize,
    group: Option<(Bytes, Bytes)>,
    noack: bool,
}

fn parse(cx: &Cx, group_cmd: bool) -> Result<ReadArgs, Reply> {
    let args = cx.args;
    let argc = args.len();
    let name = if group_cmd { "xreadgroup" } else { "xread" };
    let mut r = ReadArgs {
        block: None,
        count: 0,
        streams_arg: 0,
        n: 0,
        group: None,
        noack: false,
    };
    let mut i = 1;
    while i < argc {
        let more = argc - i - 1;
        let o = &args[i][..];
        if is(o, "BLOCK") && more > 0 {
            if cx.in_script() {
                // Redis 7.2 refuses BLOCK in scripts outright (MULTI reads without it).
                return Err(errors::block_in_script(&args[0]));
            }
            i += 1;
            r.block = Some(block_ms(&args[i], cx.now())?);
        } else if is(o, "COUNT") && more > 0 {
            i += 1;
            r.count = int_or(&args[i], None)?.max(0) as usize;
        } else if is(o, "STREAMS") && more > 0 {
            r.streams_arg = i + 1;
            let rest = argc - r.streams_arg;
            if !rest.is_multiple_of(2) {
                let sym = if group_cmd { '>' } else { '$' };
                return Err(errors::xread_unbalanced(name, sym));
            }
            r.n = rest / 2;
            break;
        } else if is(o, "GROUP") && more >= 2 {
            if !group_cmd {
                return Err(errors::err(errors::XREAD_GROUP_OPTION));
            }
            // Copies: group and consumer names may be kept by the stream, and an argument
            // pins the read buffer it was parsed from.
            r.group = Some((
                Bytes::copy_from_slice(&args[i + 1]),
                Bytes::copy_from_slice(&args[i + 2]),
            ));
            i += 2;
        } else if is(o, "NOACK") {
            if !group_cmd {
                return Err(errors::err(errors::XREAD_NOACK_OPTION));
            }
            r.noack = true;
        } else {
            return Err(errors::syntax());
        }
        i += 1;
    }
    if r.streams_arg == 0 {
        return Err(errors::syntax());
    }
    if group_cmd && r.group.is_none() {
        return Err(errors::err(errors::XREADGROUP_MISSING_GROUP));
    }
    Ok(r)
}

/// `getTimeoutFromObjectOrReply` in milliseconds.
fn block_ms(arg: &[u8], now: u64) -> Result<u64, Reply> {
    let t = int_or(arg, Some(errors::TIMEOUT_NOT_INT))?;
    if t < 0 {
        return Err(errors::err(errors::TIMEOUT_NEGATIVE));
    }
    if t > 0 && t > i64::MAX - now as i64 {
        return Err(errors::err(errors::TIMEOUT_OUT_OF_RANGE));
    }
    Ok(t as u64)
}

const PLUS_IN_GROUP: &str = "ERR The + ID is meaningless in the context of XREADGROUP: you \
     want to read the history of this consumer by specifying a proper ID, or use the > ID to \
     get new messages. The + ID would just return an empty result set.";

/// Resolves each stream's ID argument (`$`, `+`, `>` or an ID), checking types and groups
/// first, in argument order as Redis does.
fn resolve_ids(cx: &mut Cx, r: &ReadArgs) -> Result<Vec<StreamId>, Reply> {
    let args = cx.args;
    let mut ids = Vec::with_capacity(r.n);
    for i in r.streams_arg + r.n..args.len() {
        let key = &args[i - r.n];
        let s = lookup_read(cx, key)?;
        if let Some((g, _)) = &r.group {
            if !s.is_some_and(|s| s.groups.contains_key(g)) {
                let suffix = " in XREADGROUP with GROUP option";
                return Err(errors::nogroup_key_or_group(key, g, suffix));
            }
        }
        let a = &args[i][..];
        let grp = r.group.is_some();
        let id = if a == b"$" {
            if grp {
                return Err(errors::err(errors::XREADGROUP_DOLLAR));
            }
            s.map_or(StreamId::MIN, |s| s.last_id)
        } else if a == b"+" {
            if grp {
                return Err(errors::err(PLUS_IN_GROUP));
            }
            // Redis 7.4: the last entry (the one before it is the exclusive start).
            match s.and_then(|s| s.last()) {
                Some((last, _)) => last.decr().unwrap_or(StreamId::MAX),
                None => StreamId::MIN,
            }
        } else if a == b">" {
            if !grp {
                return Err(errors::err(errors::XREAD_GT_ID));
            }
            StreamId::MAX
        } else {
            strict_id(a)?
        };
        ids.push(id);
    }
    Ok(ids)
}

fn generic(cx: &mut Cx, group_cmd: bool) -> Result<Reply, Reply> {
    let r = parse(cx, group_cmd)?;
    let mut ids = resolve_ids(cx, &r)?;
    let args = cx.args;
    let now = now_ms(cx);
    let mut served: Vec<(Bytes, Reply)> = Vec::new();
    for (i, gt) in ids.iter_mut().enumerate() {
        let key = &args[r.streams_arg + i];
        if lookup_read(cx, key)?.is_none() {
            continue;
        }
        let entries = match &r.group {
            None => {
                let s = lookup_read(cx, key)?.expect("stream exists");
                let Some((maxid, _)) = s.last() else {
                    continue;
                };
                if maxid <= gt {
                    continue;
                }
                let start = gt.incr().unwrap_or(StreamId::MIN);
                let take = if r.count == 0 { usize::MAX } else { r.count };
                s.range(start, StreamId::MAX, false)
                    .take(take)
                    .map(|(id, f)| entry_reply(*id, f))
                    .collect()
            }
            Some((g, c)) => {
                let Some(entries) = serve_group(cx, key, g, c, gt, &r, now)? else {
                    continue;
                };
                entries
            }
        };
        served.push((key.clone(), Reply::Array(entries)));
    }
    if !served.is_empty() {
        return Ok(if cx.sess.resp3 {
            Reply::Map(
                served
                    .into_iter()
                    .map(|(k, v)| (Reply::Bulk(k), v))
                    .collect(),
            )
        } else {
            Reply::Array(
                served
                    .into_iter()
                    .map(|(k, v)| Reply::Array(vec![Reply::Bulk(k), v]))
                    .collect(),
            )
        });
    }
    let Some(ms) = r.block else {
        return Ok(Reply::NilArray);
    };
    if !cx.can_block() {
        return Ok(Reply::NilArray);
    }
    // Re-run later with `$` pinned to the ID it meant now.
    let mut rerun: Vec<Bytes> = args.to_vec();
    for (i, id) in ids.iter().enumerate() {
        let pos = r.streams_arg + r.n + i;
        if &rerun[pos][..] == b"$" {
            rerun[pos] = Bytes::from(id.to_string());
        }
    }
    let keys = args[r.streams_arg..r.streams_arg + r.n].to_vec();
    let timeout = (ms > 0).then(|| Duration::from_millis(ms));
    cx.block_with_args(keys, timeout, Reply::NilArray, rerun);
    Ok(Reply::NoReply)
}

/// XREADGROUP on one stream: new entries after the group's last ID (`>`), or the
/// consumer's own pending history from an ID. `None` when there is nothing to serve.
fn serve_group(
    cx: &mut Cx,
    key: &Bytes,
    g: &Bytes,
    c: &Bytes,
    gt: &mut StreamId,
    r: &ReadArgs,
    now: i64,
) -> Result<Option<Vec<Reply>>, Reply> {
    let mut pel = Vec::new();
    let new_entries = *gt == StreamId::MAX;
    let out = serve_group_inner(cx, key, g, c, gt, r, now, &mut pel)?;
    if cx.ks.journaling() {
        // The consumer was seen (maybe created); delivered entries changed the PEL, and
        // new ones the group's position.
        let mut what = vec![Touched::Consumer(g, c), Touched::Pel(g, &pel)];
        if new_entries && out.is_some() {
            what.push(Touched::Group(g));
        }
        journal(cx, key, &what);
    }
    Ok(out)
}

/// [`serve_group`]'s work; `pel` receives the IDs whose PEL rows changed.
#[allow(clippy::too_many_arguments)]
fn serve_group_inner(
    cx: &mut Cx,
    key: &Bytes,
    g: &Bytes,
    c: &Bytes,
    gt: &mut StreamId,
    r: &ReadArgs,
    now: i64,
    pel: &mut Vec<StreamId>,
) -> Result<Option<Vec<Reply>>, Reply> {
    let ev = cx.events();
    let s = lookup_write(cx, key)?.expect("stream exists");
    let history = *gt != StreamId::MAX;
    let mut serve = history;
    if !history {
        let last = s.groups[g].last_id;
        if s.last().is_some_and(|(maxid, _)| *maxid > last) {
            serve = true;
            *gt = last;
        }
    }
    let group = s.groups.get_mut(g).expect("group exists");
    // Created (and published) even when nothing is served, as in 7.2.
    consumer_touched(ev, group.touch_consumer(c, now), key);
    if !serve {
        return Ok(None);
    }
    let start = gt.incr().unwrap_or(StreamId::MIN);
    let take = if r.count == 0 { usize::MAX } else { r.count };
    let mut out = Vec::new();
    if history {
        let ids: Vec<StreamId> = group.consumers[c]
            .pel
            .range(start..)
            .take(take)
            .copied()
            .collect();
        for id in ids {
            match s.get(&id) {
                Some(f) => {
                    out.push(entry_reply(id, f));
                    let nack = s.groups.get_mut(g).and_then(|g| g.pel.get_mut(&id));
                    if let Some(n) = nack {
                        n.delivery_time = now;
                        n.delivery_count = n.delivery_count.wrapping_add(1);
                        pel.push(id);
                    }
                }
                None => out.push(Reply::Array(vec![id_reply(id), Reply::NilArray])),
            }
        }
        return Ok(Some(out));
    }
    let ids: Vec<StreamId> = s
        .range(start, StreamId::MAX, false)
        .take(take)
        .map(|(id, _)| *id)
        .collect();
    for id in ids {
        s.advance_group(g, id);
        if let Some(f) = s.get(&id) {
            out.push(entry_reply(id, f));
        }
        if !r.noack {
            if let Some(group) = s.groups.get_mut(g) {
                group.deliver(id, c, now);
                pel.push(id);
            }
        }
    }
    Ok(Some(out))
}

pub fn xread(cx: &mut Cx) -> Reply {
    reply(generic(cx, false))
}

pub fn xreadgroup(cx: &mut Cx) -> Reply {
    reply(generic(cx, true))
}

/// Key positions of XREAD/XREADGROUP (`xreadGetKeys`): the first half of the arguments
/// after `STREAMS`.
pub fn keys(args: &[Bytes]) -> Vec<usize> {
    let mut i = 1;
    let mut streams = None;
    while i < args.len() {
        let a = &args[i][..];
        if is(a, "BLOCK") || is(a, "COUNT") {
            i += 2;
            continue;
        } else if is(a, "GROUP") {
            i += 3;
            continue;
        } else if is(a, "NOACK") {
            i += 1;
            continue;
        } else if is(a, "STREAMS") {
            streams = Some(i);
            break;
        }
        break;
    }
    let Some(pos) = streams else {
        return Vec::new();
    };
    let num = args.len() - pos - 1;
    if num == 0 || !num.is_multiple_of(2) {
        return Vec::new();
    }
    (pos + 1..pos + 1 + num / 2).collect()
}
