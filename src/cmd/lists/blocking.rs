//! BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP (`blockingPopGenericCommand`,
//! `blmoveGenericCommand`): with data they act as their non-blocking forms; without, they
//! block through [`Cx::block`] (see `cmd/blocking.rs`), and inside MULTI/EXEC they answer
//! at once as a timeout would, except BLMOVE/BRPOPLPUSH, which Redis answers with a nil
//! bulk there. A timeout answers a nil array for all of them (`replyToBlockedClientTimedOut`).

use super::{finish, lmove_generic, mpop, parse_mpop, reply, settle, whence, write_list};
use crate::cmd::{args, Cx};
use crate::protocol::Reply;
use crate::types::list::End;
use bytes::Bytes;
use std::time::Duration;

/// Blocks on `keys` when allowed; otherwise replies `denied` at once.
fn block_or(cx: &mut Cx, keys: &[Bytes], timeout: Option<Duration>, denied: Reply) -> Reply {
    if !cx.can_block() {
        return denied;
    }
    cx.block(keys.to_vec(), timeout, Reply::NilArray);
    Reply::NoReply
}

/// BLPOP/BRPOP: the timeout is parsed first, then the first non-empty list is popped.
fn bpop(cx: &mut Cx, end: End) -> Result<Reply, Reply> {
    let args = cx.args;
    let srv = cx.srv;
    let last = args.len() - 1;
    let timeout = args::timeout_secs(&args[last], cx.now())?;
    let keys = &args[1..last];
    for key in keys {
        if cx.ks.journaling() {
            super::journal::before_pop(cx.ks, key, end, 1);
        }
        let Some(l) = write_list(cx.ks, key)? else {
            continue;
        };
        let Some(v) = l.pop(end) else {
            continue;
        };
        let empty = settle(l, srv);
        finish(cx, key, empty, super::pop_event(end));
        return Ok(Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Bulk(v)]));
    }
    Ok(block_or(cx, keys, timeout, Reply::NilArray))
}

pub fn blpop(cx: &mut Cx) -> Reply {
    reply(bpop(cx, End::Head))
}

pub fn brpop(cx: &mut Cx) -> Reply {
    reply(bpop(cx, End::Tail))
}

/// BLMOVE/BRPOPLPUSH once the arguments are parsed: blocks only on the source.
fn blmove_generic(
    cx: &mut Cx,
    from: End,
    to: End,
    timeout: Option<Duration>,
) -> Result<Reply, Reply> {
    let args = cx.args;
    if write_list(cx.ks, &args[1])?.is_some() {
        return lmove_generic(cx, from, to);
    }
    Ok(block_or(cx, &args[1..2], timeout, Reply::Nil))
}

pub fn blmove(cx: &mut Cx) -> Reply {
    let args = cx.args;
    reply((|| {
        let from = whence(&args[3])?;
        let to = whence(&args[4])?;
        let timeout = args::timeout_secs(&args[5], cx.now())?;
        blmove_generic(cx, from, to, timeout)
    })())
}

pub fn brpoplpush(cx: &mut Cx) -> Reply {
    let args = cx.args;
    reply(
        args::timeout_secs(&args[3], cx.now())
            .and_then(|timeout| blmove_generic(cx, End::Tail, End::Head, timeout)),
    )
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]: numkeys, direction and
/// count are checked before the timeout.
pub fn blmpop(cx: &mut Cx) -> Reply {
    let args = cx.args;
    reply((|| {
        let m = parse_mpop(args, 2)?;
        let timeout = args::timeout_secs(&args[1], cx.now())?;
        if let Some(r) = mpop(cx, &m)? {
            return Ok(r);
        }
        Ok(block_or(
            cx,
            &args[m.keys.clone()],
            timeout,
            Reply::NilArray,
        ))
    })())
}
