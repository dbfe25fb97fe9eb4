//! String commands (Redis `t_string.c` semantics): GET/SET and their variants, MGET/MSET,
//! APPEND/SETRANGE/GETRANGE, the INCR family, INCRBYFLOAT (80-bit, see [`ld`]) and LCS.

mod lcs;
use crate::types::long_double as ld;

use super::args::{self, is};
use super::errors;
use super::{CommandSpec, Cx, KeySpec};
use crate::engine::change::Change;
use crate::instance::notify;
use crate::protocol::Reply;
use crate::types::value::sds_reserve;
use crate::types::value::{Entry, StrVal, Value};
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "get",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "string", "fast"],
        group: "string",
        since: "1.0.0",
        summary: "Get the value of a key",
        complexity: "O(1)",
        handler: get,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "set",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "string", "slow"],
        group: "string",
        since: "1.0.0",
        summary: "Set the string value of a key",
        complexity: "O(1)",
        handler: set,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "setnx",
        arity: 3,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "string", "fast"],
        group: "string",
        since: "1.0.0",
        summary: "Set the value of a key, only if the key does not exist",
        complexity: "O(1)",
        handler: setnx,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "setex",
        arity: 4,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "string", "slow"],
        group: "string",
        since: "2.0.0",
        summary: "Set the value and expiration of a key",
        complexity: "O(1)",
        handler: setex,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "psetex",
        arity: 4,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "string", "slow"],
        group: "string",
        since: "2.6.0",
        summary: "Set the value and expiration in milliseconds of a key",
        complexity: "O(1)",
        handler: psetex,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "getdel",
        arity: 2,
        flags: &["write", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "string", "fast"],
        group: "string",
        since: "6.2.0",
        summary: "Get the value of a key and delete the key",
        complexity: "O(1)",
        handler: getdel,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "getex",
        arity: -2,
        flags: &["write", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "string", "fast"],
        group: "string",
        since: "6.2.0",
        summary: "Get the value of a key and optionally set its expiration",
        complexity: "O(1)",
        handler: getex,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "getset",
        arity: 3,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "string", "fast"],
        group: "string",
        since: "1.0.0",
        summary: "Set the string value of a key and return its old value",
        complexity: "O(1)",
        handler: getset,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "mget",
        arity: -2,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, -1, 1),
        acl: &["read", "string", "fast"],
        group: "string",
        since: "1.0.0",
        summary: "Get the values of all the given keys",
        complexity: "O(N) where N is the number of keys to retrieve.",
        handler: mget,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "mset",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, -1, 2),
        acl: &["write", "string", "slow"],
        group: "string",
        since: "1.0.1",
        summary: "Set multiple keys to multiple values",
        complexity: "O(N) where N is the number of keys to set.",
        handler: mset,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "msetnx",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, -1, 2),
        acl: &["write", "string", "slow"],
        group: "string",
        since: "1.0.1",
        summary: "Set multiple keys to multiple values, only if none of the keys exist",
        complexity: "O(N) where N is the number of keys to set.",
        handler: msetnx,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "append",
        arity: 3,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "string", "fast"],
        group: "string",
        since: "2.0.0",
        summary: "Append a value to a key",
        complexity: "O(1). The amortized time complexity is O(1) assuming the appended value is small and the already present value is of any size, since the dynamic string library used by Redis will double the free space available on every reallocation.",
        handler: append,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "strlen",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "string", "fast"],
        group: "string",
        since: "2.2.0",
        summary: "Get the length of the value stored in a key",
        complexity: "O(1)",
        handler: strlen,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "getrange",
        arity: 4,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "string", "slow"],
        group: "string",
        since: "2.4.0",
        summary: "Get a substring of the string stored at a key",
        complexity: "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.",
        handler: getrange,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "setrange",
        arity: 4,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "string", "slow"],
        group: "string",
        since: "2.2.0",
        summary: "Overwrite part of a string at key starting at the specified offset",
        complexity: "O(1), not counting the time taken to copy the new string in place. Usually, this string is very small so the amortized complexity is O(1). Otherwise, complexity is O(M) with M being the length of the value argument.",
        handler: setrange,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "substr",
        arity: 4,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "string", "slow"],
        group: "string",
        since: "1.0.0",
        summary: "Get a substring of the string stored at a key",
        complexity: "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.",
        handler: getrange,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "incr",
        arity: 2,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "string", "fast"],
        group: "string",
        since: "1.0.0",
        summary: "Increment the integer value of a key by one",
        complexity: "O(1)",
        handler: incr,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "decr",
        arity: 2,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "string", "fast"],
        group: "string",
        since: "1.0.0",
        summary: "Decrement the integer value of a key by one",
        complexity: "O(1)",
        handler: decr,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "incrby",
        arity: 3,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "string", "fast"],
        group: "string",
        since: "1.0.0",
        summary: "Increment the integer value of a key by the given amount",
        complexity: "O(1)",
        handler: incrby,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "decrby",
        arity: 3,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "string", "fast"],
        group: "string",
        since: "1.0.0",
        summary: "Decrement the integer value of a key by the given number",
        complexity: "O(1)",
        handler: decrby,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "incrbyfloat",
        arity: 3,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "string", "fast"],
        group: "string",
        since: "2.6.0",
        summary: "Increment the float value of a key by the given amount",
        complexity: "O(1)",
        handler: incrbyfloat,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lcs",
        arity: -3,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 2, 1),
        acl: &["read", "string", "slow"],
        group: "string",
        since: "7.0.0",
        summary: "Find longest common substring",
        complexity: "O(N*M) where N and M are the lengths of s1 and s2, respectively",
        handler: lcs,
        ..CommandSpec::DEFAULT
    },
];

// ---- helpers ----

/// The string held by a value, or `None` for another type (WRONGTYPE once other types exist).
fn as_str(v: &Value) -> Option<&StrVal> {
    match v {
        Value::Str(s) => Some(s),
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

fn as_str_mut(v: &mut Value) -> Option<&mut StrVal> {
    match v {
        Value::Str(s) => Some(s),
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// Read lookup (counts hits/misses): `Ok(None)` if missing, WRONGTYPE if another type.
fn read_str(cx: &mut Cx, key: &[u8]) -> Result<Option<Bytes>, Reply> {
    match cx.ks.get(key) {
        None => Ok(None),
        Some(e) => as_str(&e.value)
            .map(|s| Some(s.to_bytes()))
            .ok_or_else(errors::wrongtype),
    }
}

/// Redis's `lookupKeyWrite`: expires and touches the access time, no stats, no WATCH signal.
fn lookup_write<'e>(cx: &'e mut Cx, key: &[u8]) -> Option<&'e mut Entry> {
    let db = cx.ks.db;
    cx.ks.lookup_write_in(db, key)
}

/// [`lookup_write`] for a command that journals its edit itself (`edit`): the key is not
/// recorded whole.
fn lookup_elems<'e>(cx: &'e mut Cx, key: &[u8]) -> Option<&'e mut Entry> {
    let db = cx.ks.db;
    cx.ks.lookup_elems_in(db, key)
}

/// The entry a command already looked up with `lookup_write`, to change in place: WATCHers
/// signalled and the key journaled, but no second access counted (Redis modifies the object
/// `lookupKeyWrite` returned).
fn rewrite<'e>(cx: &'e mut Cx, key: &[u8]) -> Option<&'e mut Entry> {
    let db = cx.ks.db;
    cx.ks.rewrite_in(db, key)
}

/// Option names compared as C strings, as Redis does: `"nx\0junk"` is `NX`.
fn opt(arg: &[u8], name: &str) -> bool {
    let end = arg.iter().position(|&b| b == 0).unwrap_or(arg.len());
    is(&arg[..end], name)
}

/// `proto-max-bulk-len`: the largest string APPEND/SETRANGE may build.
fn max_string_len(cx: &Cx) -> u64 {
    cx.srv.config.get_i64("proto-max-bulk-len").max(0) as u64
}

fn new_value(data: &[u8]) -> Value {
    Value::Str(StrVal::from_set_slice(data))
}

// ---- GET / SET family ----

fn get(cx: &mut Cx) -> Reply {
    // The common case: the value goes straight into the connection's replies, copied once
    // under the shard lock (no reply of its own to allocate, copy again and free).
    if let Some(out) = cx.sess.direct_out() {
        return match cx.ks.get(&cx.args[1]).map(|e| as_str(&e.value)) {
            None => Reply::Nil,
            Some(None) => errors::wrongtype(),
            Some(Some(StrVal::Bytes { data, .. })) => {
                crate::protocol::put_bulk(out, data);
                Reply::NoReply
            }
            Some(Some(StrVal::Int(i))) => {
                crate::protocol::put_bulk(out, itoa::Buffer::new().format(*i).as_bytes());
                Reply::NoReply
            }
        };
    }
    match read_str(cx, &cx.args[1]) {
        Ok(v) => Reply::opt_bulk(v),
        Err(e) => e,
    }
}

// Flags of SET/GETEX's extended arguments (Redis's OBJ_* flags).
const NX: u16 = 1;
const XX: u16 = 1 << 1;
const GET: u16 = 1 << 2;
const KEEPTTL: u16 = 1 << 3;
const EX: u16 = 1 << 4;
const PX: u16 = 1 << 5;
const EXAT: u16 = 1 << 6;
const PXAT: u16 = 1 << 7;
const PERSIST: u16 = 1 << 8;

/// `parseExtendedStringArgumentsOrReply`: SET takes NX/XX/GET/KEEPTTL, GETEX takes PERSIST,
/// both take one of EX/PX/EXAT/PXAT. Conflicts are syntax errors; repeating an option is not.
fn parse_ext(rest: &[Bytes], set: bool) -> Result<(u16, Option<&[u8]>), Reply> {
    let mut f = 0u16;
    let mut expire = None;
    let mut j = 0;
    while j < rest.len() {
        let a = &rest[j];
        let next = rest.get(j + 1);
        let without = |mask: u16| f & mask == 0;
        if set && opt(a, "NX") && without(XX) {
            f |= NX;
        } else if set && opt(a, "XX") && without(NX) {
            f |= XX;
        } else if set && opt(a, "GET") {
            f |= GET;
        } else if set && opt(a, "KEEPTTL") && without(PERSIST | EX | EXAT | PX | PXAT) {
            f |= KEEPTTL;
        } else if !set && opt(a, "PERSIST") && without(EX | EXAT | PX | PXAT | KEEPTTL) {
            f |= PERSIST;
        } else if let (Some(next), Some(flag)) = (next, expire_flag(a, f)) {
            f |= flag;
            expire = Some(&next[..]);
            j += 1;
        } else {
            return Err(errors::syntax());
        }
        j += 1;
    }
    Ok((f, expire))
}

/// Which of EX/PX/EXAT/PXAT `a` is, if no conflicting option was given before it.
fn expire_flag(a: &[u8], f: u16) -> Option<u16> {
    let flag = [("EX", EX), ("PX", PX), ("EXAT", EXAT), ("PXAT", PXAT)]
        .into_iter()
        .find(|(name, _)| opt(a, name))?
        .1;
    let conflicts = (KEEPTTL | PERSIST | EX | PX | EXAT | PXAT) & !flag;
    (f & conflicts == 0).then_some(flag)
}

/// `getExpireMillisecondsOrReply`: the absolute deadline (ms) for an EX/PX/EXAT/PXAT value.
/// Zero, negative and overflowing values are "invalid expire time in '<cmd>' command".
fn expire_deadline(cmd: &str, flags: u16, arg: &[u8], now: u64) -> Result<u64, Reply> {
    let v = args::int(arg)?;
    let seconds = flags & (EX | EXAT) != 0;
    if v <= 0 || (seconds && v > i64::MAX / 1000) {
        return Err(errors::invalid_expire(cmd));
    }
    let ms = if seconds { v * 1000 } else { v };
    let ms = if flags & (EX | PX) != 0 {
        ms.checked_add(now as i64)
            .ok_or_else(|| errors::invalid_expire(cmd))?
    } else {
        ms
    };
    Ok(ms as u64)
}

/// `setGenericCommand`: SET, SETNX, SETEX, PSETEX.
fn set_generic(
    cx: &mut Cx,
    flags: u16,
    deadline: Option<u64>,
    value: &[u8],
    ok: Reply,
    abort: Reply,
) -> Reply {
    let key = &cx.args[1];
    let old = if flags & GET != 0 {
        match read_str(cx, key) {
            Ok(v) => Some(v),
            Err(e) => return e,
        }
    } else {
        None
    };
    // Only NX/XX need the lookup: plain SET stays one hash operation. NX aborts when the
    // key exists, XX when it does not (they never come together).
    // Redis's one `lookupKeyWrite` counts an access: the store below counts it when SET
    // goes on (the new entry inherits the counter), so the check here counts one only when
    // SET stops at an existing key.
    if flags & (NX | XX) != 0 {
        let found = cx.ks.exists(key);
        if (flags & NX != 0) == found {
            if found {
                lookup_write(cx, key);
            }
            cx.changes(0);
            return old.map_or(abort, Reply::opt_bulk);
        }
    }
    let value = new_value(value);
    let created = if flags & KEEPTTL != 0 {
        // Only asked when someone listens: KEEPTTL does not report what it replaced.
        let created = cx.events().is_some() && !cx.ks.exists(key);
        cx.ks.set_keep_ttl(key, value);
        created
    } else {
        cx.ks.set(key, value, deadline).is_none()
    };
    if let Some(ev) = cx.events() {
        if created {
            ev.emit(notify::NEW, "new", key);
        }
        ev.emit(notify::STRING, "set", key);
        if deadline.is_some() {
            ev.emit(notify::GENERIC, "expire", key);
        }
    }
    old.map_or(ok, Reply::opt_bulk)
}

fn set(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let (flags, expire) = match parse_ext(&args[3..], true) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let deadline = match expire.map(|a| expire_deadline("set", flags, a, cx.now())) {
        Some(Err(e)) => return e,
        Some(Ok(d)) => Some(d),
        None => None,
    };
    set_generic(cx, flags, deadline, &args[2], Reply::OK, Reply::Nil)
}

fn setnx(cx: &mut Cx) -> Reply {
    set_generic(cx, NX, None, &cx.args[2], Reply::Int(1), Reply::Int(0))
}

fn setex_generic(cx: &mut Cx, unit: u16) -> Reply {
    let args = cx.args;
    match expire_deadline(cx.spec.name, unit, &args[2], cx.now()) {
        Ok(d) => set_generic(cx, unit, Some(d), &args[3], Reply::OK, Reply::Nil),
        Err(e) => e,
    }
}

fn setex(cx: &mut Cx) -> Reply {
    setex_generic(cx, EX)
}

fn psetex(cx: &mut Cx) -> Reply {
    setex_generic(cx, PX)
}

fn getex(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let key = &args[1];
    let (flags, expire) = match parse_ext(&args[2..], false) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let value = match read_str(cx, key) {
        Ok(Some(v)) => v,
        Ok(None) => {
            cx.changes(0);
            return Reply::Nil;
        }
        Err(e) => return e,
    };
    let deadline = match expire.map(|a| expire_deadline("getex", flags, a, cx.now())) {
        Some(Err(e)) => return e,
        Some(Ok(d)) => Some(d),
        None => None,
    };
    match deadline {
        // An absolute time already reached deletes the key (`checkAlreadyExpired`: <= now).
        Some(at) if flags & (EXAT | PXAT) != 0 && at <= cx.now() => {
            cx.ks.remove(key);
            cx.notify(notify::GENERIC, "del", key);
        }
        Some(at) => {
            cx.ks.set_expire(key, Some(at));
            cx.notify(notify::GENERIC, "expire", key);
        }
        // Only a key that had a TTL is modified (and its WATCHers signalled).
        None if flags & PERSIST != 0
            && cx.ks.peek(key).is_some_and(|e| e.expire_at().is_some()) =>
        {
            cx.ks.set_expire(key, None);
            cx.notify(notify::GENERIC, "persist", key);
        }
        None => cx.changes(0),
    }
    Reply::Bulk(value)
}

fn getdel(cx: &mut Cx) -> Reply {
    let key = &cx.args[1];
    match read_str(cx, key) {
        Ok(Some(v)) => {
            cx.ks.remove(key);
            cx.notify(notify::GENERIC, "del", key);
            Reply::Bulk(v)
        }
        Ok(None) => {
            cx.changes(0);
            Reply::Nil
        }
        Err(e) => e,
    }
}

fn getset(cx: &mut Cx) -> Reply {
    let args = cx.args;
    match read_str(cx, &args[1]) {
        Ok(old) => {
            let created = cx.ks.set(&args[1], new_value(&args[2]), None).is_none();
            if let Some(ev) = cx.events() {
                ev.created(created, &args[1]);
                ev.emit(notify::STRING, "set", &args[1]);
            }
            Reply::opt_bulk(old)
        }
        Err(e) => e,
    }
}

fn mget(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let out = args[1..]
        .iter()
        .map(|k| match cx.ks.get(k).and_then(|e| as_str(&e.value)) {
            Some(s) => Reply::Bulk(s.to_bytes()),
            None => Reply::Nil,
        })
        .collect();
    Reply::Array(out)
}

fn mset_generic(cx: &mut Cx, nx: bool) -> Reply {
    let args = cx.args;
    if args.len().is_multiple_of(2) {
        return errors::wrong_args(cx.spec.name);
    }
    // Every key's shard is locked (key spec 1,-1,2), so the check and the writes are atomic.
    let mut keys = args[1..].iter().step_by(2);
    if nx && keys.any(|k| lookup_write(cx, k).is_some()) {
        cx.changes(0);
        return Reply::Int(0);
    }
    // Redis counts one change per key set.
    cx.changes((args.len() / 2) as u64);
    let ev = cx.events();
    for kv in args[1..].chunks_exact(2) {
        let created = cx.ks.set(&kv[0], new_value(&kv[1]), None).is_none();
        if let Some(ev) = ev {
            ev.created(created, &kv[0]);
            ev.emit(notify::STRING, "set", &kv[0]);
        }
    }
    if nx {
        Reply::Int(1)
    } else {
        Reply::OK
    }
}

fn mset(cx: &mut Cx) -> Reply {
    mset_generic(cx, false)
}

fn msetnx(cx: &mut Cx) -> Reply {
    mset_generic(cx, true)
}

// ---- byte-level edits and reads ----

fn append(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let (key, tail) = (&args[1], &args[2]);
    // An existing string is journaled as the bytes the edit writes (see `edit`).
    let cur = match lookup_elems(cx, key) {
        None => {
            // A new key is stored as SET would store it (may be int-encoded).
            cx.ks.set(key, new_value(tail), None);
            if let Some(ev) = cx.events() {
                ev.emit(notify::NEW, "new", key);
                ev.emit(notify::STRING, "append", key);
            }
            return Reply::Int(tail.len() as i64);
        }
        Some(e) => match as_str(&e.value) {
            Some(s) => s.len() as u64,
            None => return errors::wrongtype(),
        },
    };
    if cur + tail.len() as u64 > max_string_len(cx) {
        return errors::err(errors::STRING_TOO_LONG);
    }
    let reply = edit(cx, key, (cur, tail), |buf| {
        sds_reserve(buf, buf.len() + tail.len());
        buf.extend_from_slice(tail);
    });
    cx.notify(notify::STRING, "append", key);
    reply
}

/// Applies an in-place edit to the existing string at `key`; the result is `raw`, as Redis
/// unshares and decodes it. Replies with the new length. The caller's `lookup_elems` was
/// the command's one access (LRU/LFU): this lookup does not count another. The durable
/// engine records `patch` (offset, bytes): what the edit wrote, not the whole string.
fn edit(cx: &mut Cx, key: &[u8], patch: (u64, &[u8]), f: impl FnOnce(&mut Vec<u8>)) -> Reply {
    let db = cx.ks.db;
    cx.ks.signal_in(db, key);
    let Some(s) = cx.ks.get_in(db, key).and_then(|e| as_str_mut(&mut e.value)) else {
        return errors::wrongtype();
    };
    let mut buf = s.take_mut();
    f(&mut buf);
    let len = buf.len();
    *s = StrVal::raw_vec(buf);
    if cx.ks.journaling() {
        cx.ks.elems(Change::StrPatch {
            db,
            key: Bytes::copy_from_slice(key),
            offset: patch.0,
            bytes: Bytes::copy_from_slice(patch.1),
        });
    }
    Reply::Int(len as i64)
}

fn setrange(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let (key, value) = (&args[1], &args[3]);
    let offset = match args::int(&args[2]) {
        Ok(o) if o < 0 => return errors::err(errors::OFFSET_RANGE),
        Ok(o) => o as u64,
        Err(e) => return e,
    };
    let existing = match lookup_elems(cx, key) {
        None => None,
        Some(e) => match as_str(&e.value) {
            Some(s) => Some(s.len() as u64),
            None => return errors::wrongtype(),
        },
    };
    if value.is_empty() {
        // Setting nothing changes nothing (Redis: no signal, no event, no dirty count).
        cx.changes(0);
        return Reply::Int(existing.unwrap_or(0) as i64);
    }
    // Checked before anything is allocated: the offset is a client number.
    let end = offset + value.len() as u64;
    if end > max_string_len(cx) {
        return errors::err(errors::STRING_TOO_LONG);
    }
    let (offset, end) = (offset as usize, end as usize);
    let write = |buf: &mut Vec<u8>| {
        if buf.len() < end {
            sds_reserve(buf, end);
            buf.resize(end, 0);
        }
        buf[offset..end].copy_from_slice(value);
    };
    if existing.is_some() {
        let reply = edit(cx, key, (offset as u64, value), write);
        cx.notify(notify::STRING, "setrange", key);
        return reply;
    }
    let mut buf = Vec::with_capacity(end);
    write(&mut buf);
    cx.ks.set(key, Value::Str(StrVal::raw_vec(buf)), None);
    if let Some(ev) = cx.events() {
        ev.emit(notify::NEW, "new", key);
        ev.emit(notify::STRING, "setrange", key);
    }
    Reply::Int(end as i64)
}

fn strlen(cx: &mut Cx) -> Reply {
    match cx.ks.get(&cx.args[1]) {
        None => Reply::Int(0),
        Some(e) => match as_str(&e.value) {
            Some(s) => Reply::Int(s.len() as i64),
            None => errors::wrongtype(),
        },
    }
}

/// GETRANGE and SUBSTR.
fn getrange(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let (start, end) = match (args::int(&args[2]), args::int(&args[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let s = match read_str(cx, &args[1]) {
        Ok(Some(s)) => s,
        Ok(None) => return Reply::Bulk(Bytes::new()),
        Err(e) => return e,
    };
    match substring(s.len(), start, end) {
        Some((a, b)) => Reply::Bulk(s.slice(a..=b)),
        None => Reply::Bulk(Bytes::new()),
    }
}

/// GETRANGE's index rules: negative counts from the end, out-of-range clamps; `None` when
/// nothing is selected.
fn substring(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    let n = len as i64;
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let start = if start < 0 { n + start } else { start }.max(0);
    let end = if end < 0 { n + end } else { end }.max(0).min(n - 1);
    (n > 0 && start <= end).then_some((start as usize, end as usize))
}

// ---- counters ----

/// Adds `delta` to the integer at `key` (INCR/DECR/INCRBY/DECRBY), keeping its TTL.
pub fn incr_by(cx: &mut Cx, key: &[u8], delta: i64) -> Reply {
    // One lookup: an existing value is replaced in place (keeping its TTL), and WATCHers are
    // signalled only once the increment succeeded.
    let (cur, new) = match lookup_write(cx, key) {
        None => {
            cx.ks.set(key, Value::Str(StrVal::Int(delta)), None);
            (None, delta)
        }
        Some(e) => {
            let cur = match as_str(&e.value) {
                Some(StrVal::Int(i)) => *i,
                Some(StrVal::Bytes { data, .. }) => match crate::num::parse_i64(data) {
                    Some(i) => i,
                    None => return errors::not_int(),
                },
                None => return errors::wrongtype(),
            };
            let Some(new) = cur.checked_add(delta) else {
                return errors::err(errors::OVERFLOW);
            };
            e.value = Value::Str(StrVal::Int(new));
            let db = cx.ks.db;
            cx.ks.modified_in(db, key);
            (Some(cur), new)
        }
    };
    if let Some(ev) = cx.events() {
        ev.created(cur.is_none(), key);
        ev.emit(notify::STRING, "incrby", key);
    }
    Reply::Int(new)
}

/// Replaces the value of a key that `exists` in place (keeping its TTL), or creates it.
fn store_keep_ttl(cx: &mut Cx, key: &[u8], exists: bool, value: Value) {
    if exists {
        if let Some(e) = rewrite(cx, key) {
            e.value = value;
            return;
        }
    }
    cx.ks.set(key, value, None);
}

fn incr(cx: &mut Cx) -> Reply {
    incr_by(cx, &cx.args[1], 1)
}

fn decr(cx: &mut Cx) -> Reply {
    incr_by(cx, &cx.args[1], -1)
}

fn incrby(cx: &mut Cx) -> Reply {
    match args::int(&cx.args[2]) {
        Ok(d) => incr_by(cx, &cx.args[1], d),
        Err(e) => e,
    }
}

fn decrby(cx: &mut Cx) -> Reply {
    match args::int(&cx.args[2]) {
        Ok(i64::MIN) => errors::err(errors::DECR_OVERFLOW),
        Ok(d) => incr_by(cx, &cx.args[1], -d),
        Err(e) => e,
    }
}

/// The long double a stored string holds (`getLongDoubleFromObject`).
pub fn stored_long_double(s: &StrVal) -> Option<ld::Parsed> {
    match s {
        StrVal::Int(i) => Some(ld::Parsed::Finite(ld::LongDouble::from_i64(*i))),
        StrVal::Bytes { data, .. } => ld::parse(data),
    }
}

/// `cur + incr` as Redis's INCRBYFLOAT/HINCRBYFLOAT compute and print it.
pub fn add_float_text(cur: Option<ld::Parsed>, incr: &[u8]) -> Result<String, Reply> {
    let not_float = || errors::err(errors::NOT_FLOAT);
    let cur = cur.ok_or_else(not_float)?;
    let incr = ld::parse(incr).ok_or_else(not_float)?;
    let sum = match (cur, incr) {
        (ld::Parsed::Finite(a), ld::Parsed::Finite(b)) => a.checked_add(b),
        _ => None,
    };
    sum.map(ld::LongDouble::to_human)
        .ok_or_else(|| errors::err(errors::NAN_OR_INF))
}

fn incrbyfloat(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let key = &args[1];
    let (exists, cur) = match lookup_write(cx, key) {
        None => (false, Some(ld::Parsed::Finite(ld::LongDouble::ZERO))),
        Some(e) => match as_str(&e.value) {
            Some(s) => (true, stored_long_double(s)),
            None => return errors::wrongtype(),
        },
    };
    let text = match add_float_text(cur, &args[2]) {
        Ok(t) => Bytes::from(t.into_bytes()),
        Err(e) => return e,
    };
    store_keep_ttl(cx, key, exists, Value::Str(StrVal::text(text.clone())));
    if let Some(ev) = cx.events() {
        ev.created(!exists, key);
        ev.emit(notify::STRING, "incrbyfloat", key);
    }
    Reply::Bulk(text)
}

// ---- LCS ----

fn lcs(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let a = cx
        .ks
        .get(&args[1])
        .map(|e| as_str(&e.value).map(StrVal::to_bytes));
    let b = cx
        .ks
        .get(&args[2])
        .map(|e| as_str(&e.value).map(StrVal::to_bytes));
    let (a, b) = match (a, b) {
        (Some(None), _) | (_, Some(None)) => return errors::err(errors::LCS_NOT_STRING),
        (a, b) => (
            a.flatten().unwrap_or_default(),
            b.flatten().unwrap_or_default(),
        ),
    };
    let (mut idx, mut len, mut withlen, mut min) = (false, false, false, 0i64);
    let mut j = 3;
    while j < args.len() {
        let o = &args[j];
        if opt(o, "IDX") {
            idx = true;
        } else if opt(o, "LEN") {
            len = true;
        } else if opt(o, "WITHMATCHLEN") {
            withlen = true;
        } else if opt(o, "MINMATCHLEN") && j + 1 < args.len() {
            match args::int(&args[j + 1]) {
                Ok(v) => min = v.max(0),
                Err(e) => return e,
            }
            j += 1;
        } else {
            return errors::syntax();
        }
        j += 1;
    }
    if idx && len {
        return errors::err(errors::LCS_LEN_AND_IDX);
    }
    if a.len() as u64 >= u32::MAX as u64 - 1 || b.len() as u64 >= u32::MAX as u64 - 1 {
        return errors::err(errors::LCS_TOO_LONG);
    }
    if lcs::table_bytes(a.len(), b.len()) > max_string_len(cx) as u128 {
        return errors::err(errors::LCS_MEM_LIMIT);
    }
    let Some(r) = lcs::lcs(&a, &b, idx || !len, min as u64) else {
        return errors::err(errors::LCS_ALLOC);
    };
    if !idx {
        return if len {
            Reply::Int(r.len as i64)
        } else {
            Reply::Bulk(Bytes::from(r.seq))
        };
    }
    let pair = |(s, e): (u32, u32)| Reply::Array(vec![Reply::Int(s as i64), Reply::Int(e as i64)]);
    let matches = r
        .ranges
        .into_iter()
        .map(|m| {
            let mut v = vec![pair(m.a), pair(m.b)];
            if withlen {
                v.push(Reply::Int(m.len as i64));
            }
            Reply::Array(v)
        })
        .collect();
    Reply::Map(vec![
        (Reply::bulk_static("matches"), Reply::Array(matches)),
        (Reply::bulk_static("len"), Reply::Int(r.len as i64)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(args: &[&str], set: bool) -> Result<u16, Reply> {
        let v: Vec<Bytes> = args.iter().map(|a| Bytes::from(a.to_string())).collect();
        parse_ext(&v, set).map(|(f, _)| f)
    }

    #[test]
    fn extended_arguments() {
        assert_eq!(
            ext(&["nx", "GET", "ex", "10"], true).ok(),
            Some(NX | GET | EX)
        );
        assert_eq!(ext(&["EX", "1", "EX", "2"], true).ok(), Some(EX));
        assert_eq!(ext(&["KEEPTTL", "KEEPTTL"], true).ok(), Some(KEEPTTL));
        for bad in [
            &["NX", "XX"][..],
            &["EX", "1", "PX", "1"],
            &["KEEPTTL", "EXAT", "1"],
            &["PXAT", "1", "KEEPTTL"],
            &["EX"],
            &["PERSIST"],
        ] {
            assert_eq!(ext(bad, true), Err(errors::syntax()), "{bad:?}");
        }
        assert_eq!(ext(&["PERSIST"], false).ok(), Some(PERSIST));
        assert!(ext(&["PERSIST", "EX", "1"], false).is_err());
        assert!(ext(&["NX"], false).is_err());
        assert_eq!(ext(&["nx\0junk"], true).ok(), Some(NX));
    }

    #[test]
    fn expire_deadlines() {
        let now = 1_000_000;
        assert_eq!(
            expire_deadline("set", EX, b"10", now).ok(),
            Some(now + 10_000)
        );
        assert_eq!(expire_deadline("set", PXAT, b"5", now).ok(), Some(5));
        let invalid = Err(errors::invalid_expire("set"));
        assert_eq!(expire_deadline("set", EX, b"0", now), invalid);
        assert_eq!(
            expire_deadline("set", EX, b"9223372036854776", now),
            invalid
        );
        assert_eq!(
            expire_deadline("set", PX, b"9223372036854775807", now),
            invalid
        );
        assert_eq!(
            expire_deadline("set", EX, b"x", now),
            Err(errors::not_int())
        );
    }

    #[test]
    fn getrange_indexes() {
        assert_eq!(substring(11, 0, 4), Some((0, 4)));
        assert_eq!(substring(11, -3, -1), Some((8, 10)));
        assert_eq!(substring(11, -1, -5), None);
        assert_eq!(substring(11, -100, -50), Some((0, 0)));
        assert_eq!(substring(11, 100, 200), None);
        assert_eq!(substring(11, i64::MIN, i64::MAX), Some((0, 10)));
        assert_eq!(substring(0, 0, -1), None);
    }

    #[test]
    fn in_place_growth_is_amortised_and_bounded() {
        let mut s = StrVal::from_set(Bytes::copy_from_slice(b"abc"));
        let mut buf = s.take_mut();
        sds_reserve(&mut buf, 4);
        assert_eq!(buf.capacity(), 8);
        let mut big = vec![0u8; 2 << 20];
        sds_reserve(&mut big, (2 << 20) + 1);
        assert_eq!(big.capacity(), (2 << 20) + 1 + (1 << 20));
        assert_eq!(big.len(), 2 << 20);
        // The edited buffer is stored back and taken again without a copy, capacity kept.
        let ptr = buf.as_ptr();
        let mut edited = StrVal::raw_vec(buf);
        let again = edited.take_mut();
        assert_eq!((again.as_ptr(), again.capacity()), (ptr, 8));
        // A value from a shared buffer is copied, never kept as a view of it.
        let shared = Bytes::copy_from_slice(b"xyz");
        let mut held = StrVal::raw(shared.clone());
        let copied = held.take_mut();
        assert_ne!(copied.as_ptr(), shared.as_ptr());
        assert_eq!(StrVal::Int(-42).take_mut(), &b"-42"[..]);
    }
}
