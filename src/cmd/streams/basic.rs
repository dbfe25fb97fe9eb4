//! XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XSETID.

use super::journal::{journal, Touched};
use super::{
    entry_reply, int_or, invalid_id, limits, lookup_read, lookup_write, modified, range_end,
    range_start, relookup, reply, strict_id,
};
use crate::cmd::args::is;
use crate::cmd::{errors, Cx};
use crate::instance::notify;
use crate::protocol::Reply;
use crate::types::stream::{
    id, AppendError, Fields, IdRules, NewId, ParsedId, Stream, StreamId, Trim, TrimBy,
};
use crate::types::value::Value;
use bytes::BytesMut;

/// Parsed XADD/XTRIM options (`streamParseAddOrTrimArgsOrReply`).
struct AddTrim {
    trim: Option<Trim>,
    nomkstream: bool,
    /// XADD: the explicit ID (None for `*`).
    id: Option<ParsedId>,
    /// XADD: position of the ID argument.
    id_pos: usize,
}

fn parse_add_trim(cx: &Cx, xadd: bool) -> Result<AddTrim, Reply> {
    let args = cx.args;
    let argc = args.len();
    let mut strategy: Option<TrimBy> = None;
    let mut approx = false;
    let mut limit: i64 = 0;
    let mut limit_given = false;
    let mut nomkstream = false;
    let mut id = None;
    let mut i = 2;
    while i < argc {
        let more = argc - 1 - i;
        let opt = &args[i][..];
        if xadd && opt == b"*" {
            break;
        } else if (is(opt, "MAXLEN") || is(opt, "MINID")) && more > 0 {
            if strategy.is_some() {
                return Err(errors::err(errors::MAXLEN_AND_MINID));
            }
            approx = false;
            let next = &args[i + 1][..];
            if more >= 2 && next == b"~" {
                approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let val = &args[i + 1][..];
            strategy = Some(if is(opt, "MAXLEN") {
                let n = int_or(val, None)?;
                if n < 0 {
                    return Err(errors::err(errors::MAXLEN_NEGATIVE));
                }
                TrimBy::MaxLen(n as u64)
            } else {
                TrimBy::MinId(strict_id(val)?)
            });
            i += 1;
        } else if is(opt, "LIMIT") && more > 0 {
            limit = int_or(&args[i + 1], None)?;
            if limit < 0 {
                return Err(errors::err(errors::TRIM_LIMIT_NEGATIVE));
            }
            limit_given = true;
            i += 1;
        } else if xadd && is(opt, "NOMKSTREAM") {
            nomkstream = true;
        } else if xadd {
            let rules = IdRules {
                seq_star: true,
                ..IdRules::STRICT
            };
            id = Some(id::parse(opt, rules).ok_or_else(invalid_id)?);
            break;
        } else {
            return Err(errors::syntax());
        }
        i += 1;
    }
    if limit != 0 && strategy.is_none() {
        return Err(errors::err(errors::LIMIT_WITHOUT_STRATEGY));
    }
    if !xadd && strategy.is_none() {
        return Err(errors::err(errors::XTRIM_WITHOUT_STRATEGY));
    }
    if limit_given {
        if !approx {
            return Err(errors::err(errors::LIMIT_WITHOUT_APPROX));
        }
    } else if approx {
        // At most 100 nodes' worth of work unless told otherwise.
        let per_node = super::limits(cx).max_entries as i64;
        limit = per_node.saturating_mul(100);
        if limit <= 0 {
            limit = 10_000;
        }
        limit = limit.min(1_000_000);
    } else {
        limit = 0;
    }
    Ok(AddTrim {
        trim: strategy.map(|strategy| Trim {
            strategy,
            approx,
            limit: limit as u64,
        }),
        nomkstream,
        id,
        id_pos: i,
    })
}

pub fn xadd(cx: &mut Cx) -> Reply {
    reply(xadd_inner(cx))
}

fn xadd_inner(cx: &mut Cx) -> Result<Reply, Reply> {
    let args = cx.args;
    let opts = parse_add_trim(cx, true)?;
    let field_pos = opts.id_pos + 1;
    let nfields = args.len().saturating_sub(field_pos);
    if field_pos >= args.len() || nfields < 2 || !nfields.is_multiple_of(2) {
        return Err(errors::wrong_args("xadd"));
    }
    if let Some(p) = opts.id {
        if p.seq_given && p.id.is_zero() {
            return Err(errors::err(errors::XADD_ID_ZERO));
        }
    }
    let key = &args[1];
    let lim = limits(cx);
    let now = cx.now();
    let ev = cx.events();
    // A stream created here is stored whole at the end of the command.
    let journaling = cx.ks.journaling();
    // One buffer for the whole entry; fields and values are slices of it.
    let total: usize = args[field_pos..].iter().map(|a| a.len()).sum();
    let mut buf = BytesMut::with_capacity(total);
    for a in &args[field_pos..] {
        buf.extend_from_slice(a);
    }
    let buf = buf.freeze();
    let mut at = 0;
    let fields: Fields = args[field_pos..]
        .iter()
        .map(|a| {
            at += a.len();
            buf.slice(at - a.len()..at)
        })
        .collect();
    let new_id = opts.id.map_or(NewId::Auto, NewId::Explicit);
    // The append, and the trim unless the journal must first learn which IDs it drops.
    let add = |s: &mut Stream, trim_here: bool| -> Result<(StreamId, u64), Reply> {
        if s.last_id == StreamId::MAX {
            return Err(errors::err(errors::STREAM_EXHAUSTED));
        }
        let id = match s.append_fields(new_id, fields, now, lim) {
            Ok(id) => id,
            Err(AppendError::NotGreater) => return Err(errors::err(errors::XADD_ID_SMALL)),
            Err(AppendError::TooLarge) => return Err(errors::err(errors::STREAM_TOO_LARGE)),
        };
        let trimmed = match opts.trim {
            Some(t) if trim_here => s.trim(t),
            _ => 0,
        };
        Ok((id, trimmed))
    };
    // One lookup for an existing stream (the common case).
    let (created, (id, mut trimmed)) = match lookup_write(cx, key)? {
        Some(s) => (false, add(s, !journaling)?),
        None => {
            if opts.nomkstream {
                return Ok(Reply::Nil);
            }
            cx.ks.set(key, Value::Stream(Box::default()), None);
            // Redis's dbAdd publishes `new` at once, even if the append then fails.
            if let Some(ev) = ev {
                ev.created(true, key);
            }
            let s = relookup(cx, key)?.expect("stream exists");
            (true, add(s, true)?)
        }
    };
    if journaling && !created {
        let mut ids = Vec::new();
        if let Some(t) = opts.trim {
            ids = trim_candidates(cx, key, Some(t));
            trimmed = relookup(cx, key)?.map_or(0, |s| s.trim(t));
        }
        ids.truncate(trimmed as usize);
        ids.push(id);
        journal(cx, key, &[Touched::Entries(&ids), Touched::Meta]);
    }
    modified(cx, key);
    if let Some(ev) = ev {
        ev.emit(notify::STREAM, "xadd", key);
        if trimmed > 0 {
            ev.emit(notify::STREAM, "xtrim", key);
        }
    }
    cx.ks.signal_ready(key);
    Ok(super::id_reply(id))
}

pub fn xlen(cx: &mut Cx) -> Reply {
    match lookup_read(cx, &cx.args[1]) {
        Ok(Some(s)) => Reply::Int(s.len() as i64),
        Ok(None) => Reply::Int(0),
        Err(e) => e,
    }
}

fn range_generic(cx: &mut Cx, rev: bool) -> Result<Reply, Reply> {
    let args = cx.args;
    let (start_arg, end_arg) = if rev {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let start = range_start(start_arg)?;
    let end = range_end(end_arg)?;
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        if is(&args[j], "COUNT") && j + 1 < args.len() {
            count = int_or(&args[j + 1], None)?.max(0);
            j += 2;
        } else {
            return Err(errors::syntax());
        }
    }
    let Some(s) = lookup_read(cx, &args[1])? else {
        return Ok(Reply::Array(Vec::new()));
    };
    if count == 0 {
        return Ok(Reply::NilArray);
    }
    let take = if count < 0 {
        usize::MAX
    } else {
        count as usize
    };
    Ok(Reply::Array(
        s.range(start, end, rev)
            .take(take)
            .map(|(id, f)| entry_reply(*id, f))
            .collect(),
    ))
}

pub fn xrange(cx: &mut Cx) -> Reply {
    reply(range_generic(cx, false))
}

pub fn xrevrange(cx: &mut Cx) -> Reply {
    reply(range_generic(cx, true))
}

pub fn xdel(cx: &mut Cx) -> Reply {
    reply((|| {
        let args = cx.args;
        let key = &args[1];
        if lookup_write(cx, key)?.is_none() {
            cx.changes(0);
            return Ok(Reply::Int(0));
        }
        let ids = args[2..]
            .iter()
            .map(|a| strict_id(a))
            .collect::<Result<Vec<_>, _>>()?;
        let s = lookup_write(cx, key)?.expect("stream exists");
        let n = s.delete(&ids);
        if n > 0 {
            if cx.ks.journaling() {
                journal(cx, key, &[Touched::Entries(&ids), Touched::Meta]);
            }
            modified(cx, key);
            cx.notify(notify::STREAM, "xdel", key);
        }
        cx.changes(n);
        Ok(Reply::Int(n as i64))
    })())
}

pub fn xtrim(cx: &mut Cx) -> Reply {
    reply((|| {
        let opts = parse_add_trim(cx, false)?;
        let key = &cx.args[1];
        let mut ids = trim_candidates(cx, key, opts.trim);
        let Some(s) = lookup_write(cx, key)? else {
            cx.changes(0);
            return Ok(Reply::Int(0));
        };
        let n = match opts.trim {
            Some(t) => s.trim(t),
            None => 0,
        };
        if n > 0 {
            if cx.ks.journaling() {
                ids.truncate(n as usize);
                journal(cx, key, &[Touched::Entries(&ids), Touched::Meta]);
            }
            modified(cx, key);
            cx.notify(notify::STREAM, "xtrim", key);
        }
        cx.changes(n);
        Ok(Reply::Int(n as i64))
    })())
}

pub fn xsetid(cx: &mut Cx) -> Reply {
    reply((|| {
        let args = cx.args;
        let id = strict_id(&args[2])?;
        let mut entries_added: Option<u64> = None;
        let mut max_deleted = StreamId::MIN;
        let mut i = 3;
        while i < args.len() {
            let more = args.len() - 1 - i;
            if is(&args[i], "ENTRIESADDED") && more > 0 {
                let n = int_or(&args[i + 1], None)?;
                if n < 0 {
                    return Err(errors::err(errors::ENTRIES_ADDED_POSITIVE));
                }
                entries_added = Some(n as u64);
            } else if is(&args[i], "MAXDELETEDID") && more > 0 {
                max_deleted = strict_id(&args[i + 1])?;
                if id < max_deleted {
                    return Err(errors::err(errors::XSETID_BELOW_GIVEN_MAX_DELETED));
                }
            } else {
                return Err(errors::syntax());
            }
            i += 2;
        }
        let key = &args[1];
        let Some(s) = lookup_write(cx, key)? else {
            return Err(errors::err(errors::NO_SUCH_KEY));
        };
        check_setid(s, id, entries_added)?;
        s.set_id(id, entries_added, max_deleted);
        if cx.ks.journaling() {
            journal(cx, key, &[Touched::Meta]);
        }
        modified(cx, key);
        cx.notify(notify::STREAM, "xsetid", key);
        Ok(Reply::OK)
    })())
}

fn check_setid(s: &Stream, id: StreamId, entries_added: Option<u64>) -> Result<(), Reply> {
    if id < s.max_deleted {
        return Err(errors::err(errors::XSETID_BELOW_MAX_DELETED));
    }
    if let Some((top, _)) = s.last() {
        if id < *top {
            return Err(errors::err(errors::XSETID_BELOW_TOP));
        }
        if entries_added.is_some_and(|n| (s.len() as u64) > n) {
            return Err(errors::err(errors::XSETID_ADDED_BELOW_LEN));
        }
    }
    Ok(())
}

/// Before trimming: the entries a trim may remove (the oldest ones; it removes a prefix of
/// them, as many as it reports), or nothing when not journaling.
fn trim_candidates(cx: &mut Cx, key: &[u8], t: Option<Trim>) -> Vec<StreamId> {
    let Some(t) = t.filter(|_| cx.ks.journaling()) else {
        return Vec::new();
    };
    let Ok(Some(s)) = lookup_write(cx, key) else {
        return Vec::new();
    };
    let cap = if t.limit == 0 { u64::MAX } else { t.limit };
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    match t.strategy {
        TrimBy::MaxLen(max) => {
            let n = (s.len() as u64).saturating_sub(max);
            let n = usize::try_from(n).unwrap_or(usize::MAX).min(cap);
            s.range(StreamId::MIN, StreamId::MAX, false)
                .take(n)
                .map(|(id, _)| *id)
                .collect()
        }
        TrimBy::MinId(min) => match min.decr() {
            None => Vec::new(),
            Some(end) => s
                .range(StreamId::MIN, end, false)
                .take(cap)
                .map(|(id, _)| *id)
                .collect(),
        },
    }
}

#[cfg(test)]
mod tests {
    use crate::cmd::testing::Client;
    use crate::engine::change::Change;
    use crate::engine::journal::Journal;
    use std::sync::Arc;
    use std::time::Duration;

    fn durable() -> (Client, Arc<Journal>) {
        Client::durable()
    }

    /// Short names of the changes journaled since the last call.
    fn kinds(j: &Journal) -> Vec<String> {
        let (changes, _) = j.take(Duration::ZERO);
        let id = |i: &(u64, u64)| format!("{}-{}", i.0, i.1);
        changes
            .iter()
            .map(|c| match c {
                Change::Put { .. } => "put".into(),
                Change::Del { .. } => "del".into(),
                Change::XAdd { id: i, .. } => format!("add {}", id(i)),
                Change::XDel { ids, .. } => {
                    let ids: Vec<String> = ids.iter().map(id).collect();
                    format!("xdel {}", ids.join(","))
                }
                Change::XMeta { .. } => "meta".into(),
                Change::XGroupPut { group, .. } => format!("group {group:?}"),
                Change::XGroupDel { group, .. } => format!("groupdel {group:?}"),
                Change::XPelPut {
                    id: i, consumer, ..
                } => format!("pel {} {consumer:?}", id(i)),
                Change::XPelDel { id: i, .. } => format!("peldel {}", id(i)),
                Change::XConsumerPut { consumer, .. } => format!("consumer {consumer:?}"),
                Change::XConsumerDel { consumer, .. } => format!("consumerdel {consumer:?}"),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn stream_writes_journal_rows() {
        let (mut c, j) = durable();
        c.line("XADD s 1-1 a 1");
        assert_eq!(kinds(&j), ["put"], "a new stream is stored whole");
        c.line("XADD s 1-2 b 2");
        c.line("XADD s MAXLEN 2 1-3 c 3");
        assert_eq!(
            kinds(&j),
            ["add 1-2", "meta", "add 1-3", "xdel 1-1", "meta"]
        );
        c.line("XDEL s 1-2 9-9");
        c.line("XDEL s 9-9");
        c.line("XADD s 2-1 d 4");
        c.line("XTRIM s MINID 2-0");
        c.line("XSETID s 5-0");
        assert_eq!(
            kinds(&j),
            [
                "xdel 1-2,9-9",
                "meta",
                "add 2-1",
                "meta",
                "xdel 1-3",
                "meta",
                "meta"
            ]
        );
        c.line("XGROUP CREATE s g 0");
        c.line("XGROUP CREATECONSUMER s g c0");
        c.line("XADD s 6-1 e 5");
        assert_eq!(
            kinds(&j),
            ["group b\"g\"", "consumer b\"c0\"", "add 6-1", "meta"]
        );
        c.line("XREADGROUP GROUP g alice STREAMS s >");
        assert_eq!(
            kinds(&j),
            [
                "consumer b\"alice\"",
                "pel 2-1 b\"alice\"",
                "pel 6-1 b\"alice\"",
                "group b\"g\""
            ]
        );
        c.line("XREADGROUP GROUP g alice STREAMS s 0");
        c.line("XACK s g 2-1");
        assert_eq!(
            kinds(&j),
            [
                "consumer b\"alice\"",
                "pel 2-1 b\"alice\"",
                "pel 6-1 b\"alice\"",
                "peldel 2-1"
            ]
        );
        c.line("XCLAIM s g bob 0 6-1");
        assert_eq!(
            kinds(&j),
            ["group b\"g\"", "consumer b\"bob\"", "pel 6-1 b\"bob\""]
        );
        c.line("XAUTOCLAIM s g carol 0 0");
        assert_eq!(kinds(&j), ["consumer b\"carol\"", "pel 6-1 b\"carol\""]);
        c.line("XGROUP DELCONSUMER s g carol");
        assert_eq!(kinds(&j), ["peldel 6-1", "consumerdel b\"carol\""]);
        c.line("XGROUP SETID s g 0");
        c.line("XGROUP DESTROY s g");
        assert_eq!(kinds(&j), ["group b\"g\"", "groupdel b\"g\""]);
        c.line("XDEL s 2-1 6-1");
        assert_eq!(kinds(&j), ["xdel 2-1,6-1", "meta"], "emptied streams stay");
    }
}
