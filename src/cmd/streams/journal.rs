//! Durable journaling of in-place stream edits, shared by `basic`, `groups` and `read`
//! (it imports none of them: only the family's lookups).
//!
//! In-place stream edits record element-level changes (`Access::elems`) after the edit, as
//! the current state of what they touched: every stream change is idempotent (a row put or
//! deleted), so recording the state after the edit is right even when the key was also
//! written whole earlier in the same transaction. Callers check `cx.ks.journaling()` first,
//! so the memory engine does no extra work.

use super::lookup_write;
use crate::cmd::Cx;
use crate::engine::change::Change;
use crate::types::stream::StreamId;
use bytes::Bytes;

/// Part of a stream whose current state is to be recorded.
pub(super) enum Touched<'a> {
    /// The counters (`XMeta`).
    Meta,
    /// Entries: `XAdd` for those present, one `XDel` for those gone.
    Entries(&'a [StreamId]),
    /// A group's row (`XGroupPut`, or `XGroupDel` if it is gone).
    Group(&'a [u8]),
    /// PEL rows of a group (`XPelPut`, or `XPelDel` for ids no longer pending).
    Pel(&'a [u8], &'a [StreamId]),
    /// A consumer's row (`XConsumerPut`, or `XConsumerDel` if it is gone).
    Consumer(&'a [u8], &'a [u8]),
}

fn pair(id: StreamId) -> (u64, u64) {
    (id.ms, id.seq)
}

/// Records the current state of `what` in the stream at `key` (nothing if the key is no
/// longer a stream: its removal or replacement is recorded by the generic path).
pub(super) fn journal(cx: &mut Cx, key: &[u8], what: &[Touched]) {
    let db = cx.ks.db;
    let k = Bytes::copy_from_slice(key);
    let mut out = Vec::new();
    {
        let Ok(Some(s)) = lookup_write(cx, key) else {
            return;
        };
        for t in what {
            match *t {
                Touched::Meta => out.push(Change::XMeta {
                    db,
                    key: k.clone(),
                    last_id: pair(s.last_id),
                    entries_added: s.entries_added,
                    max_deleted: pair(s.max_deleted),
                    first_id: pair(s.first_id),
                }),
                Touched::Entries(ids) => {
                    let mut gone = Vec::new();
                    for id in ids {
                        match s.get(id) {
                            Some(f) => out.push(Change::XAdd {
                                db,
                                key: k.clone(),
                                id: pair(*id),
                                fields: f.to_vec(),
                            }),
                            None => gone.push(pair(*id)),
                        }
                    }
                    if !gone.is_empty() {
                        out.push(Change::XDel {
                            db,
                            key: k.clone(),
                            ids: gone,
                        });
                    }
                }
                Touched::Group(g) => out.push(match s.groups.get(g) {
                    Some(grp) => Change::XGroupPut {
                        db,
                        key: k.clone(),
                        group: Bytes::copy_from_slice(g),
                        last_id: pair(grp.last_id),
                        entries_read: grp.entries_read,
                    },
                    None => Change::XGroupDel {
                        db,
                        key: k.clone(),
                        group: Bytes::copy_from_slice(g),
                    },
                }),
                Touched::Pel(g, ids) => {
                    let group = Bytes::copy_from_slice(g);
                    let grp = s.groups.get(g);
                    for id in ids {
                        out.push(match grp.and_then(|grp| grp.pel.get(id)) {
                            Some(n) => Change::XPelPut {
                                db,
                                key: k.clone(),
                                group: group.clone(),
                                id: pair(*id),
                                consumer: n.consumer.clone(),
                                delivery_time: n.delivery_time,
                                delivery_count: n.delivery_count,
                            },
                            None => Change::XPelDel {
                                db,
                                key: k.clone(),
                                group: group.clone(),
                                id: pair(*id),
                            },
                        });
                    }
                }
                Touched::Consumer(g, name) => {
                    let c = s.groups.get(g).and_then(|grp| grp.consumers.get(name));
                    let (group, consumer) =
                        (Bytes::copy_from_slice(g), Bytes::copy_from_slice(name));
                    out.push(match c {
                        Some(c) => Change::XConsumerPut {
                            db,
                            key: k.clone(),
                            group,
                            consumer,
                            seen_time: c.seen_time,
                            active_time: c.active_time,
                        },
                        None => Change::XConsumerDel {
                            db,
                            key: k.clone(),
                            group,
                            consumer,
                        },
                    });
                }
            }
        }
    }
    for c in out {
        cx.ks.elems(c);
    }
}
