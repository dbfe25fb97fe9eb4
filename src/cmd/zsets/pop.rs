//! ZPOPMIN, ZPOPMAX, ZMPOP and the blocking BZPOPMIN, BZPOPMAX, BZMPOP (`genericZpopCommand`,
//! `blockingGenericZpopCommand`, `zmpopGenericCommand`; blocking per DESIGN.md §4).

use super::{changed, changed_events, opt, parse, write};
use crate::cmd::{errors, Cx};
use crate::protocol::Reply;
use crate::types::zset::Item;
use bytes::Bytes;

#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Min,
    Max,
}

/// Reply shape of a pop (Redis's `emitkey` and `use_nested_array`).
#[derive(Clone, Copy)]
struct Shape {
    /// Prefix the reply with the key the elements came from.
    emit_key: bool,
    /// `[member, score]` pairs instead of a flat list.
    nested: bool,
    /// Nothing to pop replies a null array rather than an empty one.
    nil_when_empty: bool,
}

/// Pops up to `count` elements (`None` = one, plain form) from the first key holding a
/// sorted set; with none, an empty or null array as `shape` says.
fn pop(cx: &mut Cx, keys: &[Bytes], end: End, count: Option<i64>, shape: Shape) -> Reply {
    for key in keys {
        let z = match write(cx, key) {
            Ok(Some(z)) => z,
            Ok(None) => continue,
            Err(e) => return e,
        };
        if count == Some(0) {
            return Reply::Array(Vec::new());
        }
        let want = count.unwrap_or(1);
        let n = usize::try_from(want).unwrap_or(usize::MAX).min(z.len());
        let mut items: Vec<Item> = Vec::with_capacity(n);
        match end {
            End::Min => z.remove_range(0, n, |it| items.push(it)),
            End::Max => {
                let start = z.len() - n;
                z.remove_range(start, n, |it| items.push(it));
                items.reverse();
            }
        }
        let now_empty = z.is_empty();
        changed(cx, key, now_empty);
        if !now_empty && cx.ks.journaling() {
            let members = items.iter().map(|it| it.member.clone()).collect();
            super::basic::record_del(cx, key, members);
        }
        let event = match end {
            End::Min => "zpopmin",
            End::Max => "zpopmax",
        };
        changed_events(cx, key, event, now_empty);
        let mut out = Vec::with_capacity(if shape.nested { n } else { 2 * n } + 1);
        for it in items {
            let (m, s) = (Reply::Bulk(it.member), Reply::Double(it.score));
            if shape.nested {
                out.push(Reply::Array(vec![m, s]));
            } else {
                out.push(m);
                out.push(s);
            }
        }
        return match (shape.emit_key, shape.nested) {
            (true, true) => Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Array(out)]),
            (true, false) => {
                out.insert(0, Reply::Bulk(key.clone()));
                Reply::Array(out)
            }
            _ => Reply::Array(out),
        };
    }
    if shape.nil_when_empty {
        Reply::NilArray
    } else {
        Reply::Array(Vec::new())
    }
}

pub fn zpopmin(cx: &mut Cx) -> Reply {
    zpop(cx, End::Min)
}

pub fn zpopmax(cx: &mut Cx) -> Reply {
    zpop(cx, End::Max)
}

/// ZPOPMIN/ZPOPMAX key [count]: flat in RESP2 and for the plain form, pairs in RESP3.
fn zpop(cx: &mut Cx, end: End) -> Reply {
    let args = cx.args;
    if args.len() > 3 {
        return errors::syntax();
    }
    let count = match args.get(2).map(|a| parse::positive_long(a)) {
        Some(Ok(n)) => Some(n),
        Some(Err(e)) => return e,
        None => None,
    };
    let shape = Shape {
        emit_key: false,
        nested: cx.sess.resp3 && count.is_some(),
        nil_when_empty: false,
    };
    pop(cx, &args[1..2], end, count, shape)
}

pub fn zmpop(cx: &mut Cx) -> Reply {
    zmpop_generic(cx, 1, false)
}

pub fn bzmpop(cx: &mut Cx) -> Reply {
    zmpop_generic(cx, 2, true)
}

/// [B]ZMPOP [timeout] numkeys key [key ...] MIN|MAX [COUNT count].
fn zmpop_generic(cx: &mut Cx, numkeys_idx: usize, blocking: bool) -> Reply {
    let args = cx.args;
    let numkeys = match parse::long_at_least_one(&args[numkeys_idx], errors::NUMKEYS_POSITIVE) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let where_idx = usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(numkeys_idx + 1))
        .filter(|&w| w < args.len());
    let Some(where_idx) = where_idx else {
        return errors::syntax();
    };
    let end = if opt(&args[where_idx], "min") {
        End::Min
    } else if opt(&args[where_idx], "max") {
        End::Max
    } else {
        return errors::syntax();
    };
    let mut count = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if count.is_none() && opt(&args[j], "count") && more > 0 {
            j += 1;
            match parse::long_at_least_one(&args[j], errors::COUNT_POSITIVE) {
                Ok(n) => count = Some(n),
                Err(e) => return e,
            }
        } else {
            return errors::syntax();
        }
        j += 1;
    }
    let keys = &args[numkeys_idx + 1..where_idx];
    let shape = Shape {
        emit_key: true,
        nested: true,
        nil_when_empty: true,
    };
    let count = Some(count.unwrap_or(1));
    if blocking {
        blocking_pop(cx, keys, 1, end, count, shape)
    } else {
        pop(cx, keys, end, count, shape)
    }
}

pub fn bzpopmin(cx: &mut Cx) -> Reply {
    bzpop(cx, End::Min)
}

pub fn bzpopmax(cx: &mut Cx) -> Reply {
    bzpop(cx, End::Max)
}

/// BZPOPMIN/BZPOPMAX key [key ...] timeout: `[key, member, score]`.
fn bzpop(cx: &mut Cx, end: End) -> Reply {
    let args = cx.args;
    let shape = Shape {
        emit_key: true,
        nested: false,
        nil_when_empty: false,
    };
    blocking_pop(
        cx,
        &args[1..args.len() - 1],
        args.len() - 1,
        end,
        None,
        shape,
    )
}

/// `blockingGenericZpopCommand`: pops from the first non-empty key, or blocks on all of them
/// (inside MULTI/EXEC it answers the timeout reply at once).
fn blocking_pop(
    cx: &mut Cx,
    keys: &[Bytes],
    timeout_idx: usize,
    end: End,
    count: Option<i64>,
    shape: Shape,
) -> Reply {
    let timeout = match crate::cmd::args::timeout_secs(&cx.args[timeout_idx], cx.now()) {
        Ok(t) => t,
        Err(e) => return e,
    };
    for (i, key) in keys.iter().enumerate() {
        match write(cx, key) {
            Ok(Some(z)) if !z.is_empty() => {
                return pop(cx, &keys[i..=i], end, count, shape);
            }
            Ok(_) => {}
            Err(e) => return e,
        }
    }
    if !cx.can_block() {
        return Reply::NilArray;
    }
    cx.block(keys.to_vec(), timeout, Reply::NilArray);
    Reply::NoReply
}
