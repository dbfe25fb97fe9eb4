//! List commands (Redis 7.2 `t_list.c`): pushes and pops at both ends, indexed access,
//! LINSERT/LREM/LTRIM/LPOS, LMOVE/RPOPLPUSH, LMPOP, and the blocking forms (in
//! [`blocking`]). The data structure is [`crate::types::list::List`]; empty lists are
//! deleted, so a list key is never empty.

mod blocking;
mod journal;

use super::args::{self, is};
use super::errors;
use super::table::numkeys_at;
use super::{CommandSpec, Cx, KeySpec};
use crate::engine::Access;
use crate::instance::notify;
use crate::instance::state::Shared;
use crate::num::parse_i64;
use crate::protocol::Reply;
use crate::types::list::{End, List};
use crate::types::value::{Entry, Value};
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "lpush",
        arity: -3,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "list", "fast"],
        group: "list",
        since: "1.0.0",
        summary: "Prepend one or multiple elements to a list",
        complexity: "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
        handler: lpush,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "rpush",
        arity: -3,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "list", "fast"],
        group: "list",
        since: "1.0.0",
        summary: "Append one or multiple elements to a list",
        complexity: "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
        handler: rpush,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lpushx",
        arity: -3,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "list", "fast"],
        group: "list",
        since: "2.2.0",
        summary: "Prepend an element to a list, only if the list exists",
        complexity: "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
        handler: lpushx,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "rpushx",
        arity: -3,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "list", "fast"],
        group: "list",
        since: "2.2.0",
        summary: "Append an element to a list, only if the list exists",
        complexity: "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
        handler: rpushx,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lpop",
        arity: -2,
        flags: &["write", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "list", "fast"],
        group: "list",
        since: "1.0.0",
        summary: "Remove and get the first elements in a list",
        complexity: "O(N) where N is the number of elements returned",
        handler: lpop,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "rpop",
        arity: -2,
        flags: &["write", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "list", "fast"],
        group: "list",
        since: "1.0.0",
        summary: "Remove and get the last elements in a list",
        complexity: "O(N) where N is the number of elements returned",
        handler: rpop,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "llen",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "list", "fast"],
        group: "list",
        since: "1.0.0",
        summary: "Get the length of a list",
        complexity: "O(1)",
        handler: llen,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lrange",
        arity: 4,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "list", "slow"],
        group: "list",
        since: "1.0.0",
        summary: "Get a range of elements from a list",
        complexity: "O(S+N) where S is the distance of start offset from HEAD for small lists, from nearest end (HEAD or TAIL) for large lists; and N is the number of elements in the specified range.",
        handler: lrange,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lindex",
        arity: 3,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "list", "slow"],
        group: "list",
        since: "1.0.0",
        summary: "Get an element from a list by its index",
        complexity: "O(N) where N is the number of elements to traverse to get to the element at index. This makes asking for the first or the last element of the list O(1).",
        handler: lindex,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lset",
        arity: 4,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "list", "slow"],
        group: "list",
        since: "1.0.0",
        summary: "Set the value of an element in a list by its index",
        complexity: "O(N) where N is the length of the list. Setting either the first or the last element of the list is O(1).",
        handler: lset,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "linsert",
        arity: 5,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "list", "slow"],
        group: "list",
        since: "2.2.0",
        summary: "Insert an element before or after another element in a list",
        complexity: "O(N) where N is the number of elements to traverse before seeing the value pivot. This means that inserting somewhere on the left end on the list (head) can be considered O(1) and inserting somewhere on the right end (tail) is O(N).",
        handler: linsert,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lrem",
        arity: 4,
        flags: &["write"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "list", "slow"],
        group: "list",
        since: "1.0.0",
        summary: "Remove elements from a list",
        complexity: "O(N+M) where N is the length of the list and M is the number of elements removed.",
        handler: lrem,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "ltrim",
        arity: 4,
        flags: &["write"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "list", "slow"],
        group: "list",
        since: "1.0.0",
        summary: "Trim a list to the specified range",
        complexity: "O(N) where N is the number of elements to be removed by the operation.",
        handler: ltrim,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lpos",
        arity: -3,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "list", "slow"],
        group: "list",
        since: "6.0.6",
        summary: "Return the index of matching elements on a list",
        complexity: "O(N) where N is the number of elements in the list, for the average case. When searching for elements near the head or the tail of the list, or when the MAXLEN option is provided, the command may run in constant time.",
        handler: lpos,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lmove",
        arity: 5,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, 2, 1),
        acl: &["write", "list", "slow"],
        group: "list",
        since: "6.2.0",
        summary: "Pop an element from a list, push it to another list and return it",
        complexity: "O(1)",
        handler: lmove,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "rpoplpush",
        arity: 3,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, 2, 1),
        acl: &["write", "list", "slow"],
        group: "list",
        since: "1.2.0",
        summary: "Remove the last element in a list, prepend it to another list and return it",
        complexity: "O(1)",
        handler: rpoplpush,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lmpop",
        arity: -4,
        flags: &["write"],
        keys: KeySpec::Custom {
            first: 0,
            last: 0,
            step: 0,
            find: lmpop_keys,
        },
        acl: &["write", "list", "slow"],
        group: "list",
        since: "7.0.0",
        summary: "Pop elements from a list",
        complexity: "O(N+M) where N is the number of provided keys and M is the number of elements returned.",
        handler: lmpop,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "blpop",
        arity: -3,
        flags: &["write", "blocking"],
        keys: KeySpec::Range(1, -2, 1),
        acl: &["write", "list", "slow", "blocking"],
        group: "list",
        since: "2.0.0",
        summary: "Remove and get the first element in a list, or block until one is available",
        complexity: "O(N) where N is the number of provided keys.",
        handler: blocking::blpop,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "brpop",
        arity: -3,
        flags: &["write", "blocking"],
        keys: KeySpec::Range(1, -2, 1),
        acl: &["write", "list", "slow", "blocking"],
        group: "list",
        since: "2.0.0",
        summary: "Remove and get the last element in a list, or block until one is available",
        complexity: "O(N) where N is the number of provided keys.",
        handler: blocking::brpop,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "blmove",
        arity: 6,
        flags: &["write", "denyoom", "blocking"],
        keys: KeySpec::Range(1, 2, 1),
        acl: &["write", "list", "slow", "blocking"],
        group: "list",
        since: "6.2.0",
        summary: "Pop an element from a list, push it to another list and return it; or block until one is available",
        complexity: "O(1)",
        handler: blocking::blmove,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "brpoplpush",
        arity: 4,
        flags: &["write", "denyoom", "blocking"],
        keys: KeySpec::Range(1, 2, 1),
        acl: &["write", "list", "slow", "blocking"],
        group: "list",
        since: "2.2.0",
        summary: "Pop an element from a list, push it to another list and return it; or block until one is available",
        complexity: "O(1)",
        handler: blocking::brpoplpush,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "blmpop",
        arity: -5,
        flags: &["write", "blocking"],
        keys: KeySpec::Custom {
            first: 0,
            last: 0,
            step: 0,
            find: blmpop_keys,
        },
        acl: &["write", "list", "slow", "blocking"],
        group: "list",
        since: "7.0.0",
        summary: "Pop elements from a list, or block until one is available",
        complexity: "O(N+M) where N is the number of provided keys and M is the number of elements returned.",
        handler: blocking::blmpop,
        ..CommandSpec::DEFAULT
    },
];

/// Keys after a `numkeys` argument at `args[at]`; none when the count runs past the
/// arguments (Redis's key-spec finder refuses that: COMMAND GETKEYS answers "Invalid
/// arguments", and the command itself fails its syntax check before touching keys).
fn keys_after_numkeys(args: &[Bytes], at: usize) -> Vec<usize> {
    let keys = numkeys_at(args, at);
    let declared = args.get(at).and_then(|a| parse_i64(a));
    if declared == Some(keys.len() as i64) {
        keys
    } else {
        Vec::new()
    }
}

fn lmpop_keys(args: &[Bytes]) -> Vec<usize> {
    keys_after_numkeys(args, 1)
}

fn blmpop_keys(args: &[Bytes]) -> Vec<usize> {
    keys_after_numkeys(args, 2)
}

// ---- shared helpers ----

/// `list-max-listpack-size` (read only when a conversion is possible).
fn fill(srv: &Shared) -> i32 {
    crate::config_num!(srv.config, "list-max-listpack-size") as i32
}

/// Write lookup (`lookupKeyWrite`) of a list: `None` when missing, WRONGTYPE otherwise.
fn write_list<'c>(ks: &'c mut Access<'_>, key: &[u8]) -> Result<Option<&'c mut List>, Reply> {
    let db = ks.db;
    as_list(ks.lookup_elems_in(db, key))
}

/// A list the command already looked up with [`write_list`], again: no second access.
fn quiet_list<'c>(ks: &'c mut Access<'_>, key: &[u8]) -> Result<Option<&'c mut List>, Reply> {
    let db = ks.db;
    as_list(ks.get_in(db, key))
}

/// A looked-up entry as a list: `None` when missing, WRONGTYPE for another type.
fn as_list(e: Option<&mut Entry>) -> Result<Option<&mut List>, Reply> {
    match e {
        None => Ok(None),
        Some(e) => match &mut e.value {
            Value::List(l) => Ok(Some(l)),
            _ => Err(errors::wrongtype()),
        },
    }
}

/// Read lookup (`lookupKeyRead`: hit/miss stats, access time) of a list.
fn read_list<'c>(ks: &'c mut Access<'_>, key: &[u8]) -> Result<Option<&'c List>, Reply> {
    match ks.get(key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::List(l) => Ok(Some(l)),
            _ => Err(errors::wrongtype()),
        },
    }
}

/// Marks WATCHers of `key` dirty after a change made through a write lookup
/// (`signalModifiedKey`).
fn touched(cx: &mut Cx, key: &[u8]) {
    let db = cx.ks.db;
    cx.ks.signal_in(db, key);
}

/// After elements were removed: true if the list is now empty (its key must go), else the
/// list may shrink back to a listpack (`listElementsRemoved`).
fn settle(l: &mut List, srv: &Shared) -> bool {
    if l.is_empty() {
        return true;
    }
    l.after_remove(|| fill(srv));
    false
}

/// Deletes the key of an emptied list, or signals the change; publishes the command's
/// `event` for the key, then `del` if it went.
fn finish(cx: &mut Cx, key: &[u8], empty: bool, event: &str) {
    if empty {
        cx.ks.remove(key);
    } else {
        touched(cx, key);
    }
    if let Some(ev) = cx.events() {
        ev.emit(notify::LIST, event, key);
        if empty {
            ev.emit(notify::GENERIC, "del", key);
        }
    }
}

/// The event of a pop from `end`.
fn pop_event(end: End) -> &'static str {
    match end {
        End::Head => "lpop",
        End::Tail => "rpop",
    }
}

/// The event of a push to `end`.
fn push_event(end: End) -> &'static str {
    match end {
        End::Head => "lpush",
        End::Tail => "rpush",
    }
}

/// Pops up to `n` elements from one end, in popping order.
fn pop_n(l: &mut List, end: End, n: usize) -> Reply {
    let n = n.min(l.len());
    Reply::Array((0..n).filter_map(|_| l.pop(end)).map(Reply::Bulk).collect())
}

/// `LEFT`/`RIGHT` (`getListPositionFromObjectOrReply`).
fn whence(arg: &[u8]) -> Result<End, Reply> {
    if is(arg, "RIGHT") {
        Ok(End::Tail)
    } else if is(arg, "LEFT") {
        Ok(End::Head)
    } else {
        Err(errors::syntax())
    }
}

fn reply(r: Result<Reply, Reply>) -> Reply {
    r.unwrap_or_else(|e| e)
}

// ---- pushes ----

/// LPUSH/RPUSH/LPUSHX/RPUSHX (`pushGenericCommand`; `xx`: only if the list exists).
fn push_generic(cx: &mut Cx, end: End, xx: bool) -> Reply {
    let args = cx.args;
    let srv = cx.srv;
    let (key, elems) = (&args[1], &args[2..]);
    let add: usize = elems.iter().map(|e| e.len()).sum();
    let push_all = |l: &mut List| {
        l.before_add(add, elems.len(), || fill(srv));
        for e in elems {
            l.push(Bytes::copy_from_slice(e), end);
        }
        l.len()
    };
    if cx.ks.journaling() {
        journal::before_push(cx.ks, key, end, elems);
    }
    let len = match write_list(cx.ks, key) {
        Err(e) => return e,
        Ok(Some(l)) => push_all(l),
        Ok(None) if xx => {
            cx.changes(0);
            return Reply::Int(0);
        }
        Ok(None) => {
            let mut l = List::new();
            let n = push_all(&mut l);
            cx.ks.set(key, Value::List(Box::new(l)), None);
            cx.notify(notify::NEW, "new", key);
            n
        }
    };
    touched(cx, key);
    cx.ks.signal_ready(key);
    cx.notify(notify::LIST, push_event(end), key);
    // Redis's dirty counter moves by the elements pushed.
    cx.changes(elems.len() as u64);
    Reply::Int(len as i64)
}

fn lpush(cx: &mut Cx) -> Reply {
    push_generic(cx, End::Head, false)
}

fn rpush(cx: &mut Cx) -> Reply {
    push_generic(cx, End::Tail, false)
}

fn lpushx(cx: &mut Cx) -> Reply {
    push_generic(cx, End::Head, true)
}

fn rpushx(cx: &mut Cx) -> Reply {
    push_generic(cx, End::Tail, true)
}

// ---- pops ----

/// LPOP/RPOP [count]: a bulk string without count, an array with it (nil array when the
/// key is missing, empty array for count 0).
fn pop_generic(cx: &mut Cx, end: End) -> Reply {
    let args = cx.args;
    if args.len() > 3 {
        return errors::wrong_args(cx.spec.name);
    }
    let count = match args.get(2).map(|a| args::positive_long(a, None)) {
        None => None,
        Some(Ok(n)) => Some(n as usize),
        Some(Err(e)) => return e,
    };
    let key = &args[1];
    let srv = cx.srv;
    if cx.ks.journaling() {
        journal::before_pop(cx.ks, key, end, count.unwrap_or(1));
    }
    let (out, empty) = match write_list(cx.ks, key) {
        Err(e) => return e,
        Ok(None) => {
            cx.changes(0);
            return if count.is_some() {
                Reply::NilArray
            } else {
                Reply::Nil
            };
        }
        Ok(Some(_)) if count == Some(0) => {
            cx.changes(0);
            return Reply::Array(Vec::new());
        }
        Ok(Some(l)) => {
            let out = match count {
                None => Reply::opt_bulk(l.pop(end)),
                Some(n) => pop_n(l, end, n),
            };
            (out, settle(l, srv))
        }
    };
    // Redis's dirty counter moves by the elements popped.
    if let Reply::Array(popped) = &out {
        cx.changes(popped.len() as u64);
    }
    finish(cx, key, empty, pop_event(end));
    out
}

fn lpop(cx: &mut Cx) -> Reply {
    pop_generic(cx, End::Head)
}

fn rpop(cx: &mut Cx) -> Reply {
    pop_generic(cx, End::Tail)
}

// ---- reads ----

fn llen(cx: &mut Cx) -> Reply {
    match read_list(cx.ks, &cx.args[1]) {
        Err(e) => e,
        Ok(l) => Reply::Int(l.map_or(0, |l| l.len() as i64)),
    }
}

fn lrange(cx: &mut Cx) -> Reply {
    reply(lrange_(cx))
}

fn lrange_(cx: &mut Cx) -> Result<Reply, Reply> {
    let args = cx.args;
    let (start, end) = (args::int(&args[2])?, args::int(&args[3])?);
    let Some(l) = read_list(cx.ks, &args[1])? else {
        return Ok(Reply::Array(Vec::new()));
    };
    Ok(match l.range(start, end) {
        None => Reply::Array(Vec::new()),
        Some((a, b)) => Reply::Array(l.slice(a, b).cloned().map(Reply::Bulk).collect()),
    })
}

fn lindex(cx: &mut Cx) -> Reply {
    reply(lindex_(cx))
}

fn lindex_(cx: &mut Cx) -> Result<Reply, Reply> {
    let args = cx.args;
    // The key is looked up before the index is parsed.
    let Some(l) = read_list(cx.ks, &args[1])? else {
        return Ok(Reply::Nil);
    };
    let i = args::int(&args[2])?;
    Ok(Reply::opt_bulk(l.index(i).and_then(|p| l.get(p)).cloned()))
}

fn lpos(cx: &mut Cx) -> Reply {
    reply(lpos_(cx))
}

fn lpos_(cx: &mut Cx) -> Result<Reply, Reply> {
    let args = cx.args;
    let (mut rank, mut count, mut maxlen) = (1i64, None, 0i64);
    let mut j = 3;
    while j < args.len() {
        let (opt, more) = (&args[j], j + 1 < args.len());
        if is(opt, "RANK") && more {
            j += 1;
            rank = args::long_in_range(&args[j], -i64::MAX, i64::MAX, None)?;
            if rank == 0 {
                return Err(errors::err(errors::LPOS_RANK_ZERO));
            }
        } else if is(opt, "COUNT") && more {
            j += 1;
            count = Some(args::positive_long(
                &args[j],
                Some(errors::LPOS_COUNT_NEGATIVE),
            )?);
        } else if is(opt, "MAXLEN") && more {
            j += 1;
            maxlen = args::positive_long(&args[j], Some(errors::LPOS_MAXLEN_NEGATIVE))?;
        } else {
            return Err(errors::syntax());
        }
        j += 1;
    }
    let Some(l) = read_list(cx.ks, &args[1])? else {
        return Ok(count.map_or(Reply::Nil, |_| Reply::Array(Vec::new())));
    };
    // COUNT 0 means every match; without COUNT only the first one is wanted.
    let limit = count.map_or(1, |c| c as usize);
    let found = l.positions(&args[2], rank, limit, maxlen as usize);
    Ok(match count {
        None => found.first().map_or(Reply::Nil, |&p| Reply::Int(p as i64)),
        Some(_) => Reply::Array(found.into_iter().map(|p| Reply::Int(p as i64)).collect()),
    })
}

// ---- edits ----

fn lset(cx: &mut Cx) -> Reply {
    reply(lset_(cx))
}

fn lset_(cx: &mut Cx) -> Result<Reply, Reply> {
    let args = cx.args;
    let srv = cx.srv;
    let (key, value) = (&args[1], &args[3]);
    let journaling = cx.ks.journaling();
    let Some(l) = write_list(cx.ks, key)? else {
        return Err(errors::err(errors::NO_SUCH_KEY));
    };
    let i = args::int(&args[2])?;
    // As Redis: the conversion check runs before the index is known to be valid, and the
    // index reaches `listTypeReplaceAtIndex` as a C `int` (7.2 truncates it).
    l.before_add(value.len(), 1, || fill(srv));
    let Some(pos) = l.index(i64::from(i as i32)) else {
        return Err(errors::err(errors::INDEX_OUT_OF_RANGE));
    };
    let value = Bytes::copy_from_slice(value);
    let record = journaling.then(|| value.clone());
    l.set(pos, value);
    l.after_remove(|| fill(srv));
    if let Some(v) = record {
        journal::set(cx.ks, key, pos, v);
    }
    touched(cx, key);
    cx.notify(notify::LIST, "lset", key);
    Ok(Reply::OK)
}

fn linsert(cx: &mut Cx) -> Reply {
    reply(linsert_(cx))
}

fn linsert_(cx: &mut Cx) -> Result<Reply, Reply> {
    let args = cx.args;
    let srv = cx.srv;
    let after = if is(&args[2], "AFTER") {
        true
    } else if is(&args[2], "BEFORE") {
        false
    } else {
        return Err(errors::syntax());
    };
    let (key, pivot, value) = (&args[1], &args[3], &args[4]);
    // Durable: an insert at either end is a push, one in the middle an insert (recorded
    // before the edit: see `journal`).
    if cx.ks.journaling() {
        let at = write_list(cx.ks, key).ok().flatten().and_then(|l| {
            let p = *l.positions(pivot, 1, 1, 0).first()?;
            Some((p + usize::from(after), l.len()))
        });
        match at {
            Some((0, _)) => journal::push(cx.ks, key, End::Head, vec![value.clone()]),
            Some((p, len)) if p == len => journal::push(cx.ks, key, End::Tail, vec![value.clone()]),
            Some((p, _)) => journal::insert(cx.ks, key, p, value.clone()),
            None => {}
        }
    }
    let Some(l) = write_list(cx.ks, key)? else {
        cx.changes(0);
        return Ok(Reply::Int(0));
    };
    // Converted as if the insert will happen, even when the pivot is missing (as Redis).
    l.before_add(value.len(), 1, || fill(srv));
    let Some(len) = l.insert(pivot, Bytes::copy_from_slice(value), after) else {
        cx.changes(0);
        return Ok(Reply::Int(-1));
    };
    touched(cx, key);
    cx.ks.signal_ready(key);
    cx.notify(notify::LIST, "linsert", key);
    Ok(Reply::Int(len as i64))
}

fn lrem(cx: &mut Cx) -> Reply {
    reply(lrem_(cx))
}

fn lrem_(cx: &mut Cx) -> Result<Reply, Reply> {
    let args = cx.args;
    let srv = cx.srv;
    let count = args::int(&args[2])?;
    let key = &args[1];
    if cx.ks.journaling() {
        journal::before_remove(cx.ks, key, count, &args[3]);
    }
    let Some(l) = write_list(cx.ks, key)? else {
        cx.changes(0);
        return Ok(Reply::Int(0));
    };
    let removed = l.remove(count, &args[3]);
    if removed > 0 {
        let empty = settle(l, srv);
        finish(cx, key, empty, "lrem");
    }
    cx.changes(removed as u64);
    Ok(Reply::Int(removed as i64))
}

fn ltrim(cx: &mut Cx) -> Reply {
    reply(ltrim_(cx))
}

fn ltrim_(cx: &mut Cx) -> Result<Reply, Reply> {
    let args = cx.args;
    let srv = cx.srv;
    let (start, end) = (args::int(&args[2])?, args::int(&args[3])?);
    let key = &args[1];
    let journaling = cx.ks.journaling();
    let Some(l) = write_list(cx.ks, key)? else {
        cx.changes(0);
        return Ok(Reply::OK);
    };
    let len = l.len();
    let (left, right) = match l.range(start, end) {
        None => (len, 0),
        Some((a, b)) => (a, len - 1 - b),
    };
    let l = if journaling && left + right < len {
        // Pops are recorded before the edit (see `journal`), so look the list up again.
        journal::pop(cx.ks, key, End::Head, left);
        journal::pop(cx.ks, key, End::Tail, right);
        match write_list(cx.ks, key)? {
            Some(l) => l,
            None => return Ok(Reply::OK),
        }
    } else {
        l
    };
    l.trim(left, right);
    let empty = settle(l, srv);
    finish(cx, key, empty, "ltrim");
    // Redis's dirty counter moves by the elements trimmed.
    cx.changes(left.min(len) as u64 + right as u64);
    Ok(Reply::OK)
}

// ---- moves ----

/// LMOVE/RPOPLPUSH (`lmoveGenericCommand`): a missing source is nil whatever the
/// destination holds; a destination of another type fails before anything is popped.
/// Source and destination may be the same list (rotation).
fn lmove_generic(cx: &mut Cx, from: End, to: End) -> Result<Reply, Reply> {
    let args = cx.args;
    let srv = cx.srv;
    let (src, dst) = (&args[1], &args[2]);
    // Redis's two `lookupKeyWrite`s, one per argument (so `src == dst` counts two
    // accesses); the lookups after them count none.
    if write_list(cx.ks, src)?.is_none() {
        cx.changes(0);
        return Ok(Reply::Nil);
    }
    write_list(cx.ks, dst)?;
    if cx.ks.journaling() {
        journal_move(cx.ks, src, dst, from, to);
    }
    let Some(l) = quiet_list(cx.ks, src)? else {
        return Ok(Reply::Nil);
    };
    let Some(v) = l.pop(from) else {
        return Ok(Reply::Nil);
    };
    let push = |l: &mut List| {
        l.before_add(v.len(), 1, || fill(srv));
        l.push(v.clone(), to);
    };
    if src == dst {
        push(l);
        l.after_remove(|| fill(srv));
        touched(cx, src);
        cx.ks.signal_ready(src);
        if let Some(ev) = cx.events() {
            ev.emit(notify::LIST, push_event(to), src);
            ev.emit(notify::LIST, pop_event(from), src);
        }
        return Ok(Reply::Bulk(v));
    }
    let empty = settle(l, srv);
    match quiet_list(cx.ks, dst)? {
        Some(d) => push(d),
        None => {
            let mut d = List::new();
            push(&mut d);
            cx.ks.set(dst, Value::List(Box::new(d)), None);
            cx.notify(notify::NEW, "new", dst);
        }
    }
    touched(cx, dst);
    cx.ks.signal_ready(dst);
    cx.notify(notify::LIST, push_event(to), dst);
    finish(cx, src, empty, pop_event(from));
    Ok(Reply::Bulk(v))
}

/// Durable: records LMOVE's pop from `src` and push to `dst` before they happen (both
/// keys are known to be lists or, for `dst`, missing).
fn journal_move(ks: &mut Access<'_>, src: &[u8], dst: &[u8], from: End, to: End) {
    let Some((v, len)) = quiet_list(ks, src).ok().flatten().and_then(|l| {
        let pos = if from == End::Head {
            0
        } else {
            l.len().checked_sub(1)?
        };
        Some((l.get(pos)?.clone(), l.len()))
    }) else {
        return;
    };
    if src == dst {
        journal::pop(ks, src, from, 1);
        journal::push(ks, src, to, vec![v]);
        return;
    }
    if len > 1 {
        journal::pop(ks, src, from, 1);
    }
    if journal::len(ks, dst).is_some() {
        journal::push(ks, dst, to, vec![v]);
    }
}

fn lmove(cx: &mut Cx) -> Reply {
    reply(whence(&cx.args[3]).and_then(|from| {
        let to = whence(&cx.args[4])?;
        lmove_generic(cx, from, to)
    }))
}

fn rpoplpush(cx: &mut Cx) -> Reply {
    reply(lmove_generic(cx, End::Tail, End::Head))
}

// ---- LMPOP ----

/// Parsed `numkeys key [key ...] LEFT|RIGHT [COUNT count]`.
struct Mpop {
    keys: std::ops::Range<usize>,
    end: End,
    count: usize,
}

/// `lmpopGenericCommand`'s parsing, with `numkeys` at `args[at]`.
fn parse_mpop(args: &[Bytes], at: usize) -> Result<Mpop, Reply> {
    let numkeys = args::long_in_range(&args[at], 1, i64::MAX, Some(errors::NUMKEYS_POSITIVE))?;
    let where_idx = usize::try_from(numkeys)
        .ok()
        .and_then(|n| (at + 1).checked_add(n))
        .filter(|&w| w < args.len())
        .ok_or_else(errors::syntax)?;
    let end = whence(&args[where_idx])?;
    let mut count = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        if count.is_none() && is(&args[j], "COUNT") && j + 1 < args.len() {
            j += 1;
            let c = args::long_in_range(&args[j], 1, i64::MAX, Some(errors::COUNT_POSITIVE))?;
            count = Some(c as usize);
        } else {
            return Err(errors::syntax());
        }
        j += 1;
    }
    Ok(Mpop {
        keys: at + 1..where_idx,
        end,
        count: count.unwrap_or(1),
    })
}

/// Pops from the first non-empty list among the keys: `[key, [elements...]]`, or `None`
/// when every key is missing (`mpopGenericCommand`).
fn mpop(cx: &mut Cx, m: &Mpop) -> Result<Option<Reply>, Reply> {
    let args = cx.args;
    let srv = cx.srv;
    for key in &args[m.keys.clone()] {
        if cx.ks.journaling() {
            journal::before_pop(cx.ks, key, m.end, m.count);
        }
        let Some(l) = write_list(cx.ks, key)? else {
            continue;
        };
        let elems = pop_n(l, m.end, m.count);
        let empty = settle(l, srv);
        finish(cx, key, empty, pop_event(m.end));
        return Ok(Some(Reply::Array(vec![Reply::Bulk(key.clone()), elems])));
    }
    Ok(None)
}

fn lmpop(cx: &mut Cx) -> Reply {
    reply(parse_mpop(cx.args, 1).and_then(|m| Ok(mpop(cx, &m)?.unwrap_or(Reply::NilArray))))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::cmd::testing::Client;

    #[test]
    fn encodings_follow_redis_7_2() {
        let mut c = Client::new();
        let big = vec![b'x'; 5000];
        c.line("RPUSH l a b c");
        assert_eq!(c.encoding("l"), "listpack");
        c.run(&[b"RPUSH", b"l", &big]);
        assert_eq!(c.encoding("l"), "listpack");
        c.run(&[b"RPUSH", b"l", &big]);
        assert_eq!(c.encoding("l"), "quicklist");
        // One node again and under half the limit: back to a listpack.
        c.line("RPOP l");
        assert_eq!(c.encoding("l"), "quicklist", "5000 bytes > 4096");
        c.line("RPOP l");
        assert_eq!(c.encoding("l"), "listpack");
        // COPY keeps the layout.
        c.run(&[b"RPUSH", b"l", &big, &big]);
        c.line("COPY l l2");
        assert_eq!(c.encoding("l2"), "quicklist");
        // A single element over the limit makes a quicklist straight away.
        c.run(&[b"LPUSH", b"one", &big, &big]);
        assert_eq!(c.encoding("one"), "quicklist");
    }

    #[test]
    fn conversion_checks_run_even_when_nothing_changes() {
        let mut c = Client::new();
        let big = vec![b'y'; 9000];
        c.line("RPUSH l a b");
        // LINSERT converts before looking for the pivot; LSET before checking the index.
        assert_eq!(
            c.run(&[b"LINSERT", b"l", b"BEFORE", b"nope", &big]),
            Reply::Int(-1)
        );
        assert_eq!(c.encoding("l"), "quicklist");
        c.line("RPUSH m a b");
        assert_eq!(
            c.run(&[b"LSET", b"m", b"5", &big]),
            Reply::error(errors::INDEX_OUT_OF_RANGE)
        );
        assert_eq!(c.encoding("m"), "quicklist");
        // LSET with a small value lets a one-node quicklist shrink back.
        assert_eq!(c.line("LSET m 0 z"), Reply::OK);
        assert_eq!(c.encoding("m"), "listpack");
    }

    #[test]
    fn entry_count_limits() {
        let mut c = Client::new();
        assert_eq!(c.line("CONFIG SET list-max-listpack-size 4"), Reply::OK);
        c.line("RPUSH l 1 2 3 4");
        assert_eq!(c.encoding("l"), "listpack");
        c.line("RPUSH l 5");
        assert_eq!(c.encoding("l"), "quicklist");
        c.line("LTRIM l 0 2");
        assert_eq!(c.encoding("l"), "quicklist", "3 > 4 / 2");
        c.line("LREM l 1 1");
        assert_eq!(c.encoding("l"), "listpack");
    }

    #[test]
    fn lset_takes_the_index_as_a_c_int() {
        let mut c = Client::new();
        c.line("RPUSH l a b c");
        assert_eq!(c.line("LSET l 4294967296 x"), Reply::OK);
        assert_eq!(c.line("LSET l -4294967297 z"), Reply::OK);
        assert_eq!(
            c.line("LRANGE l 0 -1"),
            Reply::Array(vec![
                Reply::bulk_static("x"),
                Reply::bulk_static("b"),
                Reply::bulk_static("z")
            ])
        );
    }

    #[test]
    fn rotation_of_a_single_element_list_keeps_it() {
        let mut c = Client::new();
        c.line("RPUSH l only");
        assert_eq!(c.line("LMOVE l l LEFT RIGHT"), Reply::bulk_static("only"));
        assert_eq!(c.line("RPOPLPUSH l l"), Reply::bulk_static("only"));
        assert_eq!(c.line("LLEN l"), Reply::Int(1));
    }
}
