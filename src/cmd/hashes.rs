//! Hash commands (Redis `t_hash.c` semantics): HSET/HMSET/HSETNX, HGET/HMGET/HGETALL/HKEYS/
//! HVALS, HDEL, HLEN/HSTRLEN/HEXISTS, HINCRBY/HINCRBYFLOAT, HRANDFIELD and HSCAN. The value
//! type and its two encodings live in [`crate::types::hash`]; field deadlines (HEXPIRE and
//! the lazy expiry of fields these commands apply) in [`expire`].

pub mod expire;

use super::args;
use super::errors;
use super::strings::add_float_text;
use super::{CommandSpec, Cx, KeySpec};
use crate::engine::change::Change;
use crate::engine::Access;
use crate::instance::notify;
use crate::instance::state::Shared;
use crate::num::parse_i64;
use crate::protocol::Reply;
use crate::types::glob::glob_match;
use crate::types::hash::{HashValue, Limits};
use crate::types::long_double as ld;
use crate::types::value::Value;
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "hset",
        arity: -4,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "hash", "fast"],
        group: "hash",
        since: "2.0.0",
        summary: "Set the string value of a hash field",
        complexity: "O(1) for each field/value pair added, so O(N) to add N field/value pairs when the command is called with multiple field/value pairs.",
        handler: hset,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hsetnx",
        arity: 4,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "hash", "fast"],
        group: "hash",
        since: "2.0.0",
        summary: "Set the value of a hash field, only if the field does not exist",
        complexity: "O(1)",
        handler: hsetnx,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hget",
        arity: 3,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "hash", "fast"],
        group: "hash",
        since: "2.0.0",
        summary: "Get the value of a hash field",
        complexity: "O(1)",
        handler: hget,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hmget",
        arity: -3,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "hash", "fast"],
        group: "hash",
        since: "2.0.0",
        summary: "Get the values of all the given hash fields",
        complexity: "O(N) where N is the number of fields being requested.",
        handler: hmget,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hmset",
        arity: -4,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "hash", "fast"],
        group: "hash",
        since: "2.0.0",
        summary: "Set multiple hash fields to multiple values",
        complexity: "O(N) where N is the number of fields being set.",
        handler: hmset,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hgetall",
        arity: 2,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "hash", "slow"],
        group: "hash",
        since: "2.0.0",
        summary: "Get all the fields and values in a hash",
        complexity: "O(N) where N is the size of the hash.",
        handler: hgetall,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hdel",
        arity: -3,
        flags: &["write", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "hash", "fast"],
        group: "hash",
        since: "2.0.0",
        summary: "Delete one or more hash fields",
        complexity: "O(N) where N is the number of fields to be removed.",
        handler: hdel,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hlen",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "hash", "fast"],
        group: "hash",
        since: "2.0.0",
        summary: "Get the number of fields in a hash",
        complexity: "O(1)",
        handler: hlen,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hstrlen",
        arity: 3,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "hash", "fast"],
        group: "hash",
        since: "3.2.0",
        summary: "Get the length of the value of a hash field",
        complexity: "O(1)",
        handler: hstrlen,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hexists",
        arity: 3,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "hash", "fast"],
        group: "hash",
        since: "2.0.0",
        summary: "Determine if a hash field exists",
        complexity: "O(1)",
        handler: hexists,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hkeys",
        arity: 2,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "hash", "slow"],
        group: "hash",
        since: "2.0.0",
        summary: "Get all the fields in a hash",
        complexity: "O(N) where N is the size of the hash.",
        handler: hkeys,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hvals",
        arity: 2,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "hash", "slow"],
        group: "hash",
        since: "2.0.0",
        summary: "Get all the values in a hash",
        complexity: "O(N) where N is the size of the hash.",
        handler: hvals,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hincrby",
        arity: 4,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "hash", "fast"],
        group: "hash",
        since: "2.0.0",
        summary: "Increment the integer value of a hash field by the given number",
        complexity: "O(1)",
        handler: hincrby,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hincrbyfloat",
        arity: 4,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "hash", "fast"],
        group: "hash",
        since: "2.6.0",
        summary: "Increment the float value of a hash field by the given amount",
        complexity: "O(1)",
        handler: hincrbyfloat,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hrandfield",
        arity: -2,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "hash", "slow"],
        group: "hash",
        since: "6.2.0",
        summary: "Get one or multiple random fields from a hash",
        complexity: "O(N) where N is the number of fields returned",
        handler: hrandfield,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hscan",
        arity: -3,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "hash", "slow"],
        group: "hash",
        since: "2.8.0",
        summary: "Incrementally iterate hash fields and associated values",
        complexity: "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..",
        handler: hscan,
        ..CommandSpec::DEFAULT
    },
];

// ---- helpers ----

/// The conversion thresholds from CONFIG (read only while a hash is still a listpack).
fn limits(srv: &Shared) -> Limits {
    let get = |n: i64| usize::try_from(n).unwrap_or(0);
    Limits {
        max_entries: get(crate::config_num!(srv.config, "hash-max-listpack-entries")),
        max_value: get(crate::config_num!(srv.config, "hash-max-listpack-value")),
    }
}

/// `limits` for a hash about to be written: a hashtable never converts, so it needs none.
fn limits_for(h: &HashValue, srv: &Shared) -> Limits {
    if h.is_listpack() {
        limits(srv)
    } else {
        Limits::DEFAULT
    }
}

/// Redis `lookupKeyRead` + `checkType`: `Ok(None)` when missing (hits/misses counted).
fn read<'e>(ks: &'e mut Access, key: &[u8]) -> Result<Option<&'e HashValue>, Reply> {
    match ks.get(key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::Hash(h) => Ok(Some(h)),
            _ => Err(errors::wrongtype()),
        },
    }
}

/// Redis `lookupKeyWrite` + `checkType`. Watchers are not signalled here: callers call
/// [`touched`] once they actually modified the hash (a WRONGTYPE or no-op touches nothing).
fn write<'e>(ks: &'e mut Access, key: &[u8]) -> Result<Option<&'e mut HashValue>, Reply> {
    let db = ks.db;
    match ks.lookup_elems_in(db, key) {
        None => Ok(None),
        Some(e) => match &mut e.value {
            Value::Hash(h) => Ok(Some(h)),
            _ => Err(errors::wrongtype()),
        },
    }
}

/// `signalModifiedKey` for a hash modified in place.
fn touched(ks: &mut Access, key: &[u8]) {
    let db = ks.db;
    ks.signal_in(db, key);
}

/// Redis `hashTypeLookupWriteOrCreate` followed by a modification `f`: runs `f` on the
/// existing hash, or on a new one that is stored only if `f` succeeds and left it non-empty.
///
/// Durable keyspace: an existing hash's new pairs are recorded as one `HashPut` of the
/// `fields` `f` set (their final values); a new hash is stored whole by `set`.
fn update<T>(
    cx: &mut Cx,
    key: &[u8],
    fields: &mut dyn Iterator<Item = &Bytes>,
    lazy: Option<&[u8]>,
    f: impl FnOnce(&mut HashValue, &Shared) -> Result<T, Reply>,
) -> Result<T, Reply> {
    let srv = cx.srv;
    let journaling = cx.ks.journaling();
    let now = cx.ks.now;
    match write(cx.ks, key)? {
        // The field `f` reads is past its deadline: removed first (with its events, and
        // the key's if it was the last field: `f` then starts a new hash, as in Redis).
        Some(h) if lazy.is_some_and(|l| h.is_field_expired(l, now)) => {
            if let Some(l) = lazy {
                expire::expire_lazily(cx, key, &[l]);
            }
            update(cx, key, fields, None, f)
        }
        Some(h) => {
            let out = f(h, srv)?;
            let pairs = journaling.then(|| final_pairs(h, fields));
            // A `HashPut` clears deadlines: the ones `f` kept (HINCRBY*) are journaled after.
            let kept: Vec<(Bytes, Option<u64>)> = match &pairs {
                Some(p) if h.has_ttls() => p
                    .iter()
                    .filter_map(|(f, _)| Some((f.clone(), Some(h.ttl(f)?))))
                    .collect(),
                _ => Vec::new(),
            };
            touched(cx.ks, key);
            if let Some(pairs) = pairs {
                let (db, key) = (cx.ks.db, Bytes::copy_from_slice(key));
                cx.ks.elems(Change::HashPut {
                    db,
                    key: key.clone(),
                    pairs,
                });
                if !kept.is_empty() {
                    cx.ks.elems(Change::HashTtl {
                        db,
                        key,
                        fields: kept,
                    });
                }
            }
            Ok(out)
        }
        None => {
            let mut h = HashValue::new();
            let out = f(&mut h, srv)?;
            if !h.is_empty() {
                cx.ks.set(key, Value::Hash(Box::new(h)), None);
                cx.notify(notify::NEW, "new", key);
            }
            Ok(out)
        }
    }
}

/// The current values of `fields` in `h`, for a `HashPut`.
fn final_pairs(h: &HashValue, fields: &mut dyn Iterator<Item = &Bytes>) -> Vec<(Bytes, Bytes)> {
    fields
        .filter_map(|f| Some((Bytes::copy_from_slice(f), Bytes::copy_from_slice(h.get(f)?))))
        .collect()
}

/// A reply's copy of a field or value.
fn bulk(b: &[u8]) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(b))
}

fn reply<T>(r: Result<T, Reply>, ok: impl FnOnce(T) -> Reply) -> Reply {
    r.map_or_else(|e| e, ok)
}

/// Option names compared as Redis's `strcasecmp` on C strings: the argument ends at its
/// first NUL byte (`"count\0x"` is `COUNT`).
fn opt(arg: &[u8], name: &str) -> bool {
    let end = arg.iter().position(|&b| b == 0).unwrap_or(arg.len());
    args::is(&arg[..end], name)
}

// ---- writes ----

/// HSET / HMSET: `field value` pairs; HSET replies how many fields were new.
fn hset_generic(cx: &mut Cx, hmset: bool) -> Reply {
    let args = cx.args;
    if args.len() % 2 == 1 {
        return errors::wrong_args(cx.spec.name);
    }
    let pairs = &args[2..];
    let fields = &mut pairs.iter().step_by(2);
    let added = update(cx, &args[1], fields, None, |h, srv| {
        let lim = limits_for(h, srv);
        if h.is_listpack() {
            let (longest, total) = pairs
                .iter()
                .fold((0, 0), |(m, t), a| (a.len().max(m), t + a.len()));
            h.prepare(pairs.len() / 2, longest, total, lim);
        }
        let mut added = 0;
        for p in pairs.chunks_exact(2) {
            added += i64::from(h.set(&p[0], &p[1], lim));
        }
        Ok(added)
    });
    if added.is_ok() {
        cx.notify(notify::HASH, "hset", &args[1]);
        // Redis counts every pair as a change, new or not.
        cx.changes((pairs.len() / 2) as u64);
    }
    match added {
        Ok(_) if hmset => Reply::OK,
        Ok(n) => Reply::Int(n),
        Err(e) => e,
    }
}

fn hset(cx: &mut Cx) -> Reply {
    hset_generic(cx, false)
}

fn hmset(cx: &mut Cx) -> Reply {
    hset_generic(cx, true)
}

fn hsetnx(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let (key, field, value) = (&args[1], &args[2], &args[3]);
    let srv = cx.srv;
    let set = |h: &mut HashValue| {
        let lim = limits_for(h, srv);
        h.prepare(
            1,
            field.len().max(value.len()),
            field.len() + value.len(),
            lim,
        );
        h.set(field, value, lim);
    };
    let now = cx.ks.now;
    match write(cx.ks, key) {
        Err(e) => e,
        Ok(Some(h)) if h.is_field_expired(field, now) => {
            expire::expire_lazily(cx, key, &[&field[..]]);
            hsetnx(cx)
        }
        Ok(Some(h)) if h.contains(field) => {
            cx.changes(0);
            Reply::Int(0)
        }
        Ok(Some(h)) => {
            set(h);
            touched(cx.ks, key);
            if cx.ks.journaling() {
                cx.ks.elems(Change::HashPut {
                    db: cx.ks.db,
                    key: Bytes::copy_from_slice(key),
                    pairs: vec![(Bytes::copy_from_slice(field), Bytes::copy_from_slice(value))],
                });
            }
            cx.notify(notify::HASH, "hset", key);
            Reply::Int(1)
        }
        Ok(None) => {
            let mut h = HashValue::new();
            set(&mut h);
            cx.ks.set(key, Value::Hash(Box::new(h)), None);
            if let Some(ev) = cx.events() {
                ev.emit(notify::NEW, "new", key);
                ev.emit(notify::HASH, "hset", key);
            }
            Reply::Int(1)
        }
    }
}

fn hdel(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let key = &args[1];
    // Durable keyspace: the fields actually removed, for a `HashDel`.
    let mut gone: Option<Vec<Bytes>> = cx.ks.journaling().then(Vec::new);
    let (deleted, empty) = match write(cx.ks, key) {
        Err(e) => return e,
        Ok(None) => {
            cx.changes(0);
            return Reply::Int(0);
        }
        Ok(Some(h)) => {
            let mut deleted = 0;
            for f in &args[2..] {
                if h.remove(f) {
                    deleted += 1;
                    if let Some(g) = &mut gone {
                        g.push(Bytes::copy_from_slice(f));
                    }
                    if h.is_empty() {
                        break;
                    }
                }
            }
            (deleted, h.is_empty())
        }
    };
    if empty {
        cx.ks.remove(key);
    } else if deleted > 0 {
        touched(cx.ks, key);
        if let Some(fields) = gone {
            cx.ks.elems(Change::HashDel {
                db: cx.ks.db,
                key: Bytes::copy_from_slice(key),
                fields,
            });
        }
    }
    if deleted > 0 {
        if let Some(ev) = cx.events() {
            ev.emit(notify::HASH, "hdel", key);
            if empty {
                ev.emit(notify::GENERIC, "del", key);
            }
        }
    }
    cx.changes(deleted as u64);
    Reply::Int(deleted)
}

fn hincrby(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let incr = match args::int(&args[3]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let field = &args[2];
    let r = update(
        cx,
        &args[1],
        &mut std::iter::once(field),
        Some(&field[..]),
        |h, srv| {
            let cur = match h.get(field) {
                None => 0,
                Some(v) => parse_i64(v).ok_or_else(|| errors::err(errors::HASH_NOT_INT))?,
            };
            let new = cur
                .checked_add(incr)
                .ok_or_else(|| errors::err(errors::OVERFLOW))?;
            let text = Bytes::copy_from_slice(itoa::Buffer::new().format(new).as_bytes());
            h.set_bytes_keep_ttl(field, text, limits_for(h, srv));
            Ok(new)
        },
    );
    if r.is_ok() {
        cx.notify(notify::HASH, "hincrby", &args[1]);
    }
    reply(r, Reply::Int)
}

fn hincrbyfloat(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let incr = &args[3];
    match ld::parse(incr) {
        None => return errors::err(errors::NOT_FLOAT),
        Some(ld::Parsed::Infinite) => return errors::err(errors::NAN_OR_INF_VALUE),
        Some(ld::Parsed::Finite(_)) => {}
    }
    let field = &args[2];
    let r = update(
        cx,
        &args[1],
        &mut std::iter::once(field),
        Some(&field[..]),
        |h, srv| {
            let cur = match h.get(field) {
                None => ld::Parsed::Finite(ld::LongDouble::ZERO),
                Some(v) => ld::parse(v).ok_or_else(|| errors::err(errors::HASH_NOT_FLOAT))?,
            };
            let text = Bytes::from(add_float_text(Some(cur), incr)?.into_bytes());
            h.set_bytes_keep_ttl(field, text.clone(), limits_for(h, srv));
            Ok(text)
        },
    );
    if r.is_ok() {
        cx.notify(notify::HASH, "hincrbyfloat", &args[1]);
    }
    reply(r, Reply::Bulk)
}

// ---- reads ----

/// Reads one field of the hash at `key` through `f`, with the lazy expiry of that field
/// (Redis `hashTypeGetValue`): an expired field is removed, with its events, and reads as
/// missing.
fn read_field(cx: &mut Cx, key: &[u8], field: &[u8], f: impl Fn(Option<&[u8]>) -> Reply) -> Reply {
    let now = cx.ks.now;
    match read(cx.ks, key) {
        Err(e) => return e,
        Ok(Some(h)) if h.is_field_expired(field, now) => {}
        Ok(h) => return f(h.and_then(|h| h.get(field))),
    }
    expire::expire_lazily(cx, key, &[field]);
    f(None)
}

fn hget(cx: &mut Cx) -> Reply {
    let args = cx.args;
    read_field(cx, &args[1], &args[2], |v| {
        Reply::opt_bulk(v.map(Bytes::copy_from_slice))
    })
}

fn hmget(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let (key, fields) = (&args[1], &args[2..]);
    let now = cx.ks.now;
    let values = |h: Option<&HashValue>| {
        Reply::Array(
            fields
                .iter()
                .map(|f| Reply::opt_bulk(h.and_then(|h| h.get(f)).map(Bytes::copy_from_slice)))
                .collect(),
        )
    };
    match read(cx.ks, key) {
        Err(e) => return e,
        Ok(Some(h)) if expire::any_expired(h, fields.iter().map(|f| &f[..]), now) => {}
        Ok(h) => return values(h),
    }
    // Redis's HMGET expires fields without an event each: one `hexpired` (and `del`).
    let f: Vec<&[u8]> = fields.iter().map(|f| &f[..]).collect();
    expire::expire_lazily(cx, key, &f);
    let db = cx.ks.db;
    match cx.ks.get_in(db, key).map(|e| &e.value) {
        Some(Value::Hash(h)) => values(Some(h)),
        _ => values(None),
    }
}

fn hlen(cx: &mut Cx) -> Reply {
    reply(read(cx.ks, &cx.args[1]), |h| {
        Reply::Int(h.map_or(0, |h| h.len() as i64))
    })
}

fn hstrlen(cx: &mut Cx) -> Reply {
    let args = cx.args;
    read_field(cx, &args[1], &args[2], |v| {
        Reply::Int(v.map_or(0, |v| v.len() as i64))
    })
}

fn hexists(cx: &mut Cx) -> Reply {
    let args = cx.args;
    read_field(cx, &args[1], &args[2], |v| Reply::Int(v.is_some().into()))
}

// HGETALL, HKEYS and HVALS skip fields past their deadline without removing them (Redis).

fn hgetall(cx: &mut Cx) -> Reply {
    let now = cx.ks.now;
    reply(read(cx.ks, &cx.args[1]), |h| {
        Reply::Map(h.map_or_else(Vec::new, |h| {
            h.iter_live(now).map(|(f, v)| (bulk(f), bulk(v))).collect()
        }))
    })
}

fn hkeys(cx: &mut Cx) -> Reply {
    let now = cx.ks.now;
    reply(read(cx.ks, &cx.args[1]), |h| {
        Reply::Array(h.map_or_else(Vec::new, |h| {
            h.iter_live(now).map(|(f, _)| bulk(f)).collect()
        }))
    })
}

fn hvals(cx: &mut Cx) -> Reply {
    let now = cx.ks.now;
    reply(read(cx.ks, &cx.args[1]), |h| {
        Reply::Array(h.map_or_else(Vec::new, |h| {
            h.iter_live(now).map(|(_, v)| bulk(v)).collect()
        }))
    })
}

// ---- HRANDFIELD ----

/// HRANDFIELD's read: Redis's `hashTypeExpireIfNeeded` first removes every field of the
/// hash past its deadline (with `hexpired`, and `del` if that empties it).
fn read_purged<'c>(cx: &'c mut Cx, key: &[u8]) -> Result<Option<&'c HashValue>, Reply> {
    let now = cx.ks.now;
    let stale = match read(cx.ks, key)? {
        Some(h) => h.min_ttl().is_some_and(|t| t < now),
        None => return Ok(None),
    };
    if !stale {
        return read_quiet(cx.ks, key);
    }
    expire::expire_all_due(cx, key);
    read_quiet(cx.ks, key)
}

/// A second look at a key the command already counted as a hit or miss.
fn read_quiet<'e>(ks: &'e mut Access, key: &[u8]) -> Result<Option<&'e HashValue>, Reply> {
    let db = ks.db;
    match ks.get_in(db, key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::Hash(h) => Ok(Some(h)),
            _ => Err(errors::wrongtype()),
        },
    }
}

/// `HRANDFIELD key [count [WITHVALUES]]`, argument checks in Redis's order: the count's
/// range, then the syntax, then WITHVALUES's tighter range, then the key.
/// Repeats a negative HRANDFIELD count may ask for (see SRANDMEMBER's).
const MAX_RANDOM_REPLY: u64 = 1 << 24;

fn hrandfield(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let resp3 = cx.sess.resp3;
    let srv = cx.srv;
    if args.len() == 2 {
        return reply(read_purged(cx, &args[1]), |h| {
            let mut rng = srv.rng.lock();
            Reply::opt_bulk(
                h.and_then(|h| h.random(&mut *rng))
                    .map(|(f, _)| Bytes::copy_from_slice(f)),
            )
        });
    }
    let count = match args::int(&args[2]) {
        Ok(i64::MIN) => return errors::err(errors::COUNT_RANGE),
        Ok(n) => n,
        Err(e) => return e,
    };
    if args.len() > 4 || (args.len() == 4 && !opt(&args[3], "withvalues")) {
        return errors::syntax();
    }
    let withvalues = args.len() == 4;
    if withvalues && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return errors::err(errors::OUT_OF_RANGE);
    }
    let h = match read_purged(cx, &args[1]) {
        Err(e) => return e,
        Ok(None) => return Reply::Array(Vec::new()),
        Ok(Some(h)) => h,
    };
    let n = count.unsigned_abs();
    if n == 0 {
        return Reply::Array(Vec::new());
    }
    let mut guard = srv.rng.lock();
    let mut rng = &mut *guard;
    let size = h.len() as u64;
    let picks: Vec<(&[u8], &[u8])> = if count < 0 || n == 1 {
        // With repetition (and the single pick): independent draws, in draw order. Redis
        // streams such a reply however long it is; one built in memory must have a bound
        // (as SRANDMEMBER's and ZRANDMEMBER's), and stops once it is over the output limit.
        let limit = super::refusals::reply_limit(srv);
        if n > MAX_RANDOM_REPLY && limit == usize::MAX {
            return errors::err(errors::RANDOM_COUNT_TOO_LARGE);
        }
        let mut bytes = 0usize;
        let mut v = Vec::with_capacity(n.min(1 << 16) as usize);
        for _ in 0..n {
            if let Some((f, val)) = h.random(&mut rng) {
                // At most the encoded size ("$len\r\n...\r\n" is 5 bytes or more).
                bytes += f.len() + 5 + if withvalues { val.len() + 5 } else { 0 };
                v.push((f, val));
            }
            if bytes > limit {
                break;
            }
        }
        v
    } else if n >= size {
        // The whole hash, in its order.
        h.iter().collect()
    } else {
        h.random_distinct(n as usize, &mut rng)
    };
    let mut out = Vec::with_capacity(picks.len() * if withvalues && !resp3 { 2 } else { 1 });
    for (f, v) in picks {
        match (withvalues, resp3) {
            (false, _) => out.push(bulk(f)),
            (true, false) => {
                out.push(bulk(f));
                out.push(bulk(v));
            }
            (true, true) => out.push(Reply::Array(vec![bulk(f), bulk(v)])),
        }
    }
    Reply::Array(out)
}

// ---- HSCAN ----

fn empty_scan() -> Reply {
    Reply::Array(vec![Reply::bulk_static("0"), Reply::Array(Vec::new())])
}

/// `HSCAN key cursor [MATCH pattern] [COUNT count] [NOVALUES]`: the cursor is checked
/// first, then the key, and only then the options (so a missing key ignores bad options,
/// as in Redis). NOVALUES (7.4) replies with the field names only.
fn hscan(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let now = cx.ks.now;
    let cursor = match args::scan_cursor(&args[2]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let h = match read(cx.ks, &args[1]) {
        Err(e) => return e,
        Ok(None) => return empty_scan(),
        Ok(Some(h)) => h,
    };
    let mut count: i64 = 10;
    let mut pattern: Option<&[u8]> = None;
    let mut values = true;
    let mut i = 3;
    while i < args.len() {
        let has_value = i + 1 < args.len();
        if opt(&args[i], "novalues") {
            values = false;
            i += 1;
            continue;
        }
        if opt(&args[i], "count") && has_value {
            count = match args::int(&args[i + 1]) {
                Ok(n) if n >= 1 => n,
                Ok(_) => return errors::syntax(),
                Err(e) => return e,
            };
        } else if opt(&args[i], "match") && has_value {
            // Exactly "*" matches everything: the same as no pattern.
            pattern = Some(&args[i + 1][..]).filter(|p| *p != b"*");
        } else {
            return errors::syntax();
        }
        i += 2;
    }
    let mut found = Vec::new();
    let next = h.scan(
        cursor,
        usize::try_from(count).unwrap_or(usize::MAX),
        &mut found,
    );
    let mut items = Vec::with_capacity(found.len() * 2);
    let check = h.has_ttls();
    for (f, v) in found {
        // Fields past their deadline are skipped, not removed (Redis's scan callback).
        if check && h.is_field_expired(f, now) {
            continue;
        }
        if pattern.is_none_or(|p| glob_match(p, f, false)) {
            items.push(bulk(f));
            if values {
                items.push(bulk(v));
            }
        }
    }
    Reply::Array(vec![
        Reply::bulk_str(itoa::Buffer::new().format(next)),
        Reply::Array(items),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    use crate::cmd::testing::Client;

    /// One HSCAN call: (next cursor, field → value).
    fn hscan(c: &mut Client, key: &str, cursor: u64, count: usize) -> (u64, Vec<(Bytes, Bytes)>) {
        let Reply::Array(v) = c.line(&format!("HSCAN {key} {cursor} COUNT {count}")) else {
            panic!("HSCAN reply");
        };
        let (Reply::Bulk(c), Reply::Array(items)) = (&v[0], &v[1]) else {
            panic!("HSCAN shape");
        };
        let next = std::str::from_utf8(c)
            .expect("utf8")
            .parse()
            .expect("cursor");
        let items: Vec<Bytes> = items
            .iter()
            .map(|r| match r {
                Reply::Bulk(b) => b.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        let pairs = items
            .chunks_exact(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect();
        (next, pairs)
    }

    #[test]
    fn hscan_covers_a_hashtable_changing_between_calls() {
        let mut c = Client::new();
        // Nine temporaries per stable field: deleting them shrinks the table mid-scan.
        for i in 0..100 {
            let temps: Vec<String> = (0..9).map(|j| format!("t{i}x{j} t")).collect();
            c.line(&format!("HSET h stable{i} s{i} {}", temps.join(" ")));
        }
        assert_eq!(c.line("OBJECT ENCODING h"), Reply::bulk_static("hashtable"));
        let usage = |c: &mut Client| match c.line("MEMORY USAGE h SAMPLES 0") {
            Reply::Int(n) => n,
            other => panic!("{other:?}"),
        };
        let full = usage(&mut c);
        let mut shrunk = false;
        let mut seen = HashMap::new();
        let (mut cursor, mut step) = (0, 0);
        loop {
            let (next, pairs) = hscan(&mut c, "h", cursor, 20);
            for (f, v) in pairs {
                assert!(seen.insert(f, v).is_none(), "a field came back twice");
            }
            if next == 0 {
                break;
            }
            cursor = next;
            // Between calls: delete the temporaries of six stable fields, add a field.
            for _ in 0..6 {
                let i = step % 100;
                let temps: Vec<String> = (0..9).map(|j| format!("t{i}x{j}")).collect();
                c.line(&format!("HDEL h {}", temps.join(" ")));
                step += 1;
            }
            c.line(&format!("HSET h added{step} a"));
            // The slot array is most of the hash: a quarter of it means it shrank.
            shrunk |= usage(&mut c) * 2 < full;
        }
        assert!(shrunk, "the table shrank during the scan");
        for i in 0..100 {
            let v = seen.get(format!("stable{i}").as_bytes());
            assert_eq!(v.map(|v| &v[..]), Some(format!("s{i}").as_bytes()));
        }
    }

    #[test]
    fn hrandfield_counts_and_shapes() {
        let mut c = Client::new();
        c.line("HSET h a 1 b 2 c 3 d 4 e 5");
        for count in 1..=5 {
            let got = c.bulks(&format!("HRANDFIELD h {count}"));
            assert_eq!(got.len(), count);
            assert_eq!(got.iter().collect::<HashSet<_>>().len(), count, "distinct");
        }
        assert_eq!(c.bulks("HRANDFIELD h -20").len(), 20);
        let flat = c.bulks("HRANDFIELD h -7 WITHVALUES");
        assert_eq!(flat.len(), 14);
        for p in flat.chunks_exact(2) {
            assert_eq!(p[0][0] - b'a' + b'1', p[1][0], "value belongs to its field");
        }
        c.sess.resp3 = true;
        let Reply::Array(pairs) = c.line("HRANDFIELD h 3 WITHVALUES") else {
            panic!("array");
        };
        assert_eq!(pairs.len(), 3);
        assert!(pairs
            .iter()
            .all(|p| matches!(p, Reply::Array(v) if v.len() == 2)));
        // A hashtable hash with holes still answers uniformly enough to hit every field.
        c.line("CONFIG SET hash-max-listpack-entries 2");
        for i in 0..200 {
            c.line(&format!("HSET big f{i} v"));
        }
        for i in 0..190 {
            c.line(&format!("HDEL big f{i}"));
        }
        let got: HashSet<Bytes> = c.bulks("HRANDFIELD big -500").into_iter().collect();
        assert_eq!(got.len(), 10);
        assert_eq!(c.bulks("HRANDFIELD big 4").len(), 4);
        assert_eq!(c.bulks("HRANDFIELD big 9").len(), 9);
    }

    #[test]
    fn encoding_follows_config_thresholds() {
        let mut c = Client::new();
        c.line("CONFIG SET hash-max-listpack-entries 3");
        c.line("CONFIG SET hash-max-listpack-value 4");
        c.line("HSET h a 1 b 2 c 3");
        assert_eq!(c.line("OBJECT ENCODING h"), Reply::bulk_static("listpack"));
        c.line("HSET h d 4");
        assert_eq!(c.line("OBJECT ENCODING h"), Reply::bulk_static("hashtable"));
        c.line("HSET v f 1234");
        assert_eq!(c.line("OBJECT ENCODING v"), Reply::bulk_static("listpack"));
        c.line("HINCRBY v f 100000");
        assert_eq!(c.line("OBJECT ENCODING v"), Reply::bulk_static("hashtable"));
        // 7.2: more pairs than the entry limit convert up front, repeated fields or not.
        c.line("HSET dup f 1 f 2 f 3 f 4");
        assert_eq!(
            c.line("OBJECT ENCODING dup"),
            Reply::bulk_static("hashtable")
        );
        assert_eq!(c.line("HLEN dup"), Reply::Int(1));
        c.line("CONFIG SET hash-max-listpack-entries 0");
        c.line("HSETNX z f v");
        assert_eq!(c.line("OBJECT ENCODING z"), Reply::bulk_static("hashtable"));
    }
}
