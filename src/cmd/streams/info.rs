//! XINFO STREAM [FULL [COUNT n]], XINFO GROUPS, XINFO CONSUMERS, XINFO HELP (Redis 7.2
//! fields: `recorded-first-entry-id`, consumers' `active-time` and `inactive`).

use super::{entry_reply, id_reply, int_or, lookup_read, now_ms, reply};
use crate::cmd::args::{self, is};
use crate::cmd::{errors, Cx};
use crate::protocol::Reply;
use crate::types::stream::{Group, Stream, StreamId};
use bytes::Bytes;

fn k(s: &'static str) -> Reply {
    Reply::bulk_static(s)
}

fn stream<'c>(cx: &'c mut Cx) -> Result<&'c Stream, Reply> {
    lookup_read(cx, &cx.args[2])?.ok_or_else(|| errors::err(errors::NO_SUCH_KEY))
}

fn opt_int(v: Option<u64>) -> Reply {
    v.map_or(Reply::Nil, |v| Reply::Int(v as i64))
}

fn entries_read(g: &Group) -> Reply {
    if g.entries_read != crate::types::stream::group::INVALID_ENTRIES_READ {
        Reply::Int(g.entries_read)
    } else {
        Reply::Nil
    }
}

pub fn xinfo_stream(cx: &mut Cx) -> Reply {
    reply((|| {
        let args = cx.args;
        let s = stream(cx)?;
        let opts = &args[3..];
        let mut full = false;
        let mut count: i64 = 10;
        if !opts.is_empty() {
            let bad = || errors::subcommand_syntax("xinfo", &args[1]);
            if (opts.len() != 1 && opts.len() != 3) || !is(&opts[0], "FULL") {
                return Err(bad());
            }
            if opts.len() == 3 {
                if !is(&opts[1], "COUNT") {
                    return Err(bad());
                }
                count = int_or(&opts[2], None)?;
                if count < 0 {
                    count = 10;
                }
            }
            full = true;
        }
        let mut m = vec![
            (k("length"), Reply::Int(s.len() as i64)),
            (k("radix-tree-keys"), Reply::Int(s.node_count() as i64)),
            (
                k("radix-tree-nodes"),
                Reply::Int(s.radix_tree_nodes() as i64),
            ),
            (k("last-generated-id"), id_reply(s.last_id)),
            (k("max-deleted-entry-id"), id_reply(s.max_deleted)),
            (k("entries-added"), Reply::Int(s.entries_added as i64)),
            (k("recorded-first-entry-id"), id_reply(s.first_id)),
        ];
        if !full {
            m.push((k("groups"), Reply::Int(s.groups.len() as i64)));
            let first = s.first().map_or(Reply::Nil, |(id, f)| entry_reply(*id, f));
            let last = s.last().map_or(Reply::Nil, |(id, f)| entry_reply(*id, f));
            m.push((k("first-entry"), first));
            m.push((k("last-entry"), last));
            return Ok(Reply::Map(m));
        }
        let take = if count == 0 {
            usize::MAX
        } else {
            count as usize
        };
        let entries = s
            .range(StreamId::MIN, StreamId::MAX, false)
            .take(take)
            .map(|(id, f)| entry_reply(*id, f))
            .collect();
        m.push((k("entries"), Reply::Array(entries)));
        let groups = s
            .groups
            .iter()
            .map(|(name, g)| full_group(s, name, g, take))
            .collect();
        m.push((k("groups"), Reply::Array(groups)));
        Ok(Reply::Map(m))
    })())
}

fn full_group(s: &Stream, name: &Bytes, g: &Group, take: usize) -> Reply {
    let pending = g
        .pel
        .iter()
        .take(take)
        .map(|(id, n)| {
            Reply::Array(vec![
                id_reply(*id),
                Reply::Bulk(n.consumer.clone()),
                Reply::Int(n.delivery_time),
                Reply::Int(n.delivery_count as i64),
            ])
        })
        .collect();
    let consumers = g
        .consumers
        .iter()
        .map(|(cname, c)| {
            let pel = c
                .pel
                .iter()
                .take(take)
                .map(|id| {
                    let n = &g.pel[id];
                    Reply::Array(vec![
                        id_reply(*id),
                        Reply::Int(n.delivery_time),
                        Reply::Int(n.delivery_count as i64),
                    ])
                })
                .collect();
            Reply::Map(vec![
                (k("name"), Reply::Bulk(cname.clone())),
                (k("seen-time"), Reply::Int(c.seen_time)),
                (k("active-time"), Reply::Int(c.active_time)),
                (k("pel-count"), Reply::Int(c.pel.len() as i64)),
                (k("pending"), Reply::Array(pel)),
            ])
        })
        .collect();
    Reply::Map(vec![
        (k("name"), Reply::Bulk(name.clone())),
        (k("last-delivered-id"), id_reply(g.last_id)),
        (k("entries-read"), entries_read(g)),
        (k("lag"), opt_int(s.lag(g))),
        (k("pel-count"), Reply::Int(g.pel.len() as i64)),
        (k("pending"), Reply::Array(pending)),
        (k("consumers"), Reply::Array(consumers)),
    ])
}

pub fn xinfo_groups(cx: &mut Cx) -> Reply {
    reply((|| {
        let s = stream(cx)?;
        let groups = s
            .groups
            .iter()
            .map(|(name, g)| {
                Reply::Map(vec![
                    (k("name"), Reply::Bulk(name.clone())),
                    (k("consumers"), Reply::Int(g.consumers.len() as i64)),
                    (k("pending"), Reply::Int(g.pel.len() as i64)),
                    (k("last-delivered-id"), id_reply(g.last_id)),
                    (k("entries-read"), entries_read(g)),
                    (k("lag"), opt_int(s.lag(g))),
                ])
            })
            .collect();
        Ok(Reply::Array(groups))
    })())
}

pub fn xinfo_consumers(cx: &mut Cx) -> Reply {
    reply((|| {
        let now = now_ms(cx);
        let args = cx.args;
        let s = stream(cx)?;
        let Some(g) = s.groups.get(&args[3][..]) else {
            return Err(errors::nogroup_for_key(&args[3], &args[2]));
        };
        let out = g
            .consumers
            .iter()
            .map(|(name, c)| {
                let inactive = if c.active_time != -1 {
                    now - c.active_time
                } else {
                    -1
                };
                Reply::Map(vec![
                    (k("name"), Reply::Bulk(name.clone())),
                    (k("pending"), Reply::Int(c.pel.len() as i64)),
                    (k("idle"), Reply::Int((now - c.seen_time).max(0))),
                    (k("inactive"), Reply::Int(inactive)),
                ])
            })
            .collect();
        Ok(Reply::Array(out))
    })())
}

pub fn xinfo_help(_cx: &mut Cx) -> Reply {
    args::help(
        "XINFO",
        &[
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
        ],
    )
}
