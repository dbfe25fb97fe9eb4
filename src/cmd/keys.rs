//! Generic keyspace commands (Redis `db.c`, `expire.c`, `object.c` semantics): DEL, EXISTS,
//! TYPE, the EXPIRE/TTL families, KEYS, SCAN, RANDOMKEY, RENAME, COPY, MOVE, DBSIZE,
//! FLUSHDB/FLUSHALL, SWAPDB and OBJECT.
//!
//! Nothing here matches on a value's type except through `Value` methods (`type_name`,
//! `encoding`, `clone`) and the lazyfree thread's effort estimate
//! ([`crate::background::lazyfree::free_effort`]), so a new type needs at most a line there.

use super::args::{self, is};
use super::errors;
use super::{CommandSpec, Cx, KeySpec, Lock};
use crate::instance::notify;
use crate::protocol::Reply;
use crate::types::glob::glob_match;
use crate::types::value::{StrVal, Value};
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "del",
        arity: -2,
        flags: &["write"],
        keys: KeySpec::Range(1, -1, 1),
        acl: &["keyspace", "write", "slow"],
        group: "generic",
        since: "1.0.0",
        summary: "Delete a key",
        complexity: "O(N) where N is the number of keys that will be removed. When a key to remove holds a value other than a string, the individual complexity for this key is O(M) where M is the number of elements in the list, set, sorted set or hash. Removing a single key that holds a string value is O(1).",
        handler: del,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "unlink",
        arity: -2,
        flags: &["write", "fast"],
        keys: KeySpec::Range(1, -1, 1),
        acl: &["keyspace", "write", "fast"],
        group: "generic",
        since: "4.0.0",
        summary: "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking.",
        complexity: "O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of.",
        handler: unlink,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "exists",
        arity: -2,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, -1, 1),
        acl: &["keyspace", "read", "fast"],
        group: "generic",
        since: "1.0.0",
        summary: "Determine if a key exists",
        complexity: "O(N) where N is the number of keys to check.",
        handler: exists,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "type",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["keyspace", "read", "fast"],
        group: "generic",
        since: "1.0.0",
        summary: "Determine the type stored at key",
        complexity: "O(1)",
        handler: type_cmd,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "expire",
        arity: -3,
        flags: &["write", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["keyspace", "write", "fast"],
        group: "generic",
        since: "1.0.0",
        summary: "Set a key's time to live in seconds",
        complexity: "O(1)",
        handler: expire,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "pexpire",
        arity: -3,
        flags: &["write", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["keyspace", "write", "fast"],
        group: "generic",
        since: "2.6.0",
        summary: "Set a key's time to live in milliseconds",
        complexity: "O(1)",
        handler: pexpire,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "expireat",
        arity: -3,
        flags: &["write", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["keyspace", "write", "fast"],
        group: "generic",
        since: "1.2.0",
        summary: "Set the expiration for a key as a UNIX timestamp",
        complexity: "O(1)",
        handler: expireat,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "pexpireat",
        arity: -3,
        flags: &["write", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["keyspace", "write", "fast"],
        group: "generic",
        since: "2.6.0",
        summary: "Set the expiration for a key as a UNIX timestamp specified in milliseconds",
        complexity: "O(1)",
        handler: pexpireat,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "ttl",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["keyspace", "read", "fast"],
        group: "generic",
        since: "1.0.0",
        summary: "Get the time to live for a key in seconds",
        complexity: "O(1)",
        handler: ttl,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "pttl",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["keyspace", "read", "fast"],
        group: "generic",
        since: "2.6.0",
        summary: "Get the time to live for a key in milliseconds",
        complexity: "O(1)",
        handler: pttl,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "expiretime",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["keyspace", "read", "fast"],
        group: "generic",
        since: "7.0.0",
        summary: "Get the expiration Unix timestamp for a key",
        complexity: "O(1)",
        handler: expiretime,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "pexpiretime",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["keyspace", "read", "fast"],
        group: "generic",
        since: "7.0.0",
        summary: "Get the expiration Unix timestamp for a key in milliseconds",
        complexity: "O(1)",
        handler: pexpiretime,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "persist",
        arity: 2,
        flags: &["write", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["keyspace", "write", "fast"],
        group: "generic",
        since: "2.2.0",
        summary: "Remove the expiration from a key",
        complexity: "O(1)",
        handler: persist,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "keys",
        arity: 2,
        flags: &["readonly"],
        keys: KeySpec::None,
        acl: &["keyspace", "read", "slow", "dangerous"],
        group: "generic",
        since: "1.0.0",
        summary: "Find all keys matching the given pattern",
        complexity: "O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length.",
        handler: keys,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "scan",
        arity: -2,
        flags: &["readonly"],
        keys: KeySpec::None,
        acl: &["keyspace", "read", "slow"],
        group: "generic",
        since: "2.8.0",
        summary: "Incrementally iterate the keys space",
        complexity: "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
        handler: scan,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "randomkey",
        arity: 1,
        flags: &["readonly"],
        keys: KeySpec::None,
        acl: &["keyspace", "read", "slow"],
        group: "generic",
        since: "1.0.0",
        summary: "Return a random key from the keyspace",
        complexity: "O(1)",
        handler: randomkey,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "rename",
        arity: 3,
        flags: &["write"],
        keys: KeySpec::Range(1, 2, 1),
        acl: &["keyspace", "write", "slow"],
        group: "generic",
        since: "1.0.0",
        summary: "Rename a key",
        complexity: "O(1)",
        handler: rename,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "renamenx",
        arity: 3,
        flags: &["write", "fast"],
        keys: KeySpec::Range(1, 2, 1),
        acl: &["keyspace", "write", "fast"],
        group: "generic",
        since: "1.0.0",
        summary: "Rename a key, only if the new key does not exist",
        complexity: "O(1)",
        handler: renamenx,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "copy",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, 2, 1),
        acl: &["keyspace", "write", "slow"],
        group: "generic",
        since: "6.2.0",
        summary: "Copy a key",
        complexity: "O(N) worst case for collections, where N is the number of nested items. O(1) for string values.",
        handler: copy,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "move",
        arity: 3,
        flags: &["write", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["keyspace", "write", "fast"],
        group: "generic",
        since: "1.0.0",
        summary: "Move a key to another database",
        complexity: "O(1)",
        handler: move_cmd,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "touch",
        arity: -2,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, -1, 1),
        acl: &["keyspace", "read", "fast"],
        group: "generic",
        since: "3.2.1",
        summary: "Alters the last access time of a key(s). Returns the number of existing keys specified.",
        complexity: "O(N) where N is the number of keys that will be touched.",
        handler: touch,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "dbsize",
        arity: 1,
        flags: &["readonly", "fast"],
        keys: KeySpec::None,
        acl: &["keyspace", "read", "fast"],
        group: "server",
        since: "1.0.0",
        summary: "Return the number of keys in the selected database",
        complexity: "O(1)",
        handler: dbsize,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "flushdb",
        arity: -1,
        flags: &["write"],
        keys: KeySpec::None,
        acl: &["keyspace", "write", "slow", "dangerous"],
        group: "server",
        since: "1.0.0",
        summary: "Remove all keys from the current database",
        complexity: "O(N) where N is the number of keys in the selected database",
        handler: flushdb,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "flushall",
        arity: -1,
        flags: &["write"],
        keys: KeySpec::None,
        acl: &["keyspace", "write", "slow", "dangerous"],
        group: "server",
        since: "1.0.0",
        summary: "Remove all keys from all databases",
        complexity: "O(N) where N is the total number of keys in all databases",
        handler: flushall,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "swapdb",
        arity: 3,
        flags: &["write", "fast"],
        keys: KeySpec::None,
        acl: &["keyspace", "write", "fast", "dangerous"],
        group: "server",
        since: "4.0.0",
        summary: "Swaps two Redis databases",
        complexity: "O(N) where N is the count of clients watching or blocking on keys from both databases.",
        handler: swapdb,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "object",
        arity: -2,
        flags: &[],
        keys: KeySpec::None,
        acl: &["slow"],
        group: "generic",
        since: "2.2.3",
        summary: "A container for object introspection commands",
        complexity: "Depends on subcommand.",
        subcommands: &[
            CommandSpec {
                name: "object|idletime",
                arity: 3,
                flags: &["readonly"],
                keys: KeySpec::Range(2, 2, 1),
                acl: &["keyspace", "read", "slow"],
                group: "generic",
                since: "2.2.3",
                summary: "Get the time since a Redis object was last accessed",
                complexity: "O(1)",
                handler: object_idletime,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "object|help",
                arity: 2,
                flags: &["loading", "stale"],
                keys: KeySpec::None,
                acl: &["keyspace", "slow"],
                group: "generic",
                since: "6.2.0",
                summary: "Show helpful text about the different subcommands",
                complexity: "O(1)",
                handler: object_help,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "object|freq",
                arity: 3,
                flags: &["readonly"],
                keys: KeySpec::Range(2, 2, 1),
                acl: &["keyspace", "read", "slow"],
                group: "generic",
                since: "4.0.0",
                summary: "Get the logarithmic access frequency counter of a Redis object",
                complexity: "O(1)",
                handler: object_freq,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "object|encoding",
                arity: 3,
                flags: &["readonly"],
                keys: KeySpec::Range(2, 2, 1),
                acl: &["keyspace", "read", "slow"],
                group: "generic",
                since: "2.2.3",
                summary: "Inspect the internal encoding of a Redis object",
                complexity: "O(1)",
                handler: object_encoding,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "object|refcount",
                arity: 3,
                flags: &["readonly"],
                keys: KeySpec::Range(2, 2, 1),
                acl: &["keyspace", "read", "slow"],
                group: "generic",
                since: "2.2.3",
                summary: "Get the number of references to the value of the key",
                complexity: "O(1)",
                handler: object_refcount,
                ..CommandSpec::DEFAULT
            },
        ],
        handler: object,
        ..CommandSpec::DEFAULT
    },
];

/// DEL and UNLINK (Redis `delGenericCommand`): with `lazy`, a removed value whose free
/// effort passes Redis's threshold is dropped on the lazyfree thread, so removing a
/// million-member set does not hold up the clients behind this command. Without, it is
/// still freed before the reply, as Redis's DEL, but after the locks are released and off
/// the runtime's worker (`Access::drop_later`), so it holds up only this client.
fn del_generic(cx: &mut Cx, lazy: bool) -> Reply {
    let mut n = 0;
    for key in &cx.args[1..] {
        if let Some(e) = cx.ks.remove(key) {
            if lazy {
                cx.srv.ks.lazyfree.free_entry(e);
            } else {
                cx.ks.drop_later(e);
            }
            cx.notify(notify::GENERIC, "del", key);
            n += 1;
        }
    }
    cx.changes(n as u64);
    Reply::Int(n)
}

/// DEL frees in place unless `lazyfree-lazy-user-del` is set, as in Redis.
fn del(cx: &mut Cx) -> Reply {
    let lazy = crate::config_num!(cx.srv.config, "lazyfree-lazy-user-del") != 0;
    del_generic(cx, lazy)
}

fn unlink(cx: &mut Cx) -> Reply {
    del_generic(cx, true)
}

fn exists(cx: &mut Cx) -> Reply {
    let mut n = 0;
    for key in &cx.args[1..] {
        if cx.ks.get_notouch(key).is_some() {
            n += 1;
        }
    }
    Reply::Int(n)
}

/// TOUCH: a read lookup per key (updates the access time and hit/miss stats).
fn touch(cx: &mut Cx) -> Reply {
    let mut n = 0;
    for key in &cx.args[1..] {
        if cx.ks.get(key).is_some() {
            n += 1;
        }
    }
    Reply::Int(n)
}

fn type_cmd(cx: &mut Cx) -> Reply {
    let name = cx
        .ks
        .get_notouch(&cx.args[1])
        .map_or("none", |e| e.value.type_name());
    Reply::status(name)
}

// ---- expiry ----

/// NX / XX / GT / LT of the EXPIRE family.
#[derive(Default)]
struct ExpireFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

fn expire_flags(opts: &[Bytes]) -> Result<ExpireFlags, Reply> {
    let mut f = ExpireFlags::default();
    for o in opts {
        if is(o, "NX") {
            f.nx = true;
        } else if is(o, "XX") {
            f.xx = true;
        } else if is(o, "GT") {
            f.gt = true;
        } else if is(o, "LT") {
            f.lt = true;
        } else {
            return Err(errors::unsupported_option(o));
        }
    }
    if f.nx && (f.xx || f.gt || f.lt) {
        return Err(errors::err(errors::EXPIRE_NX_COMBO));
    }
    if f.gt && f.lt {
        return Err(errors::err(errors::EXPIRE_GT_LT));
    }
    Ok(f)
}

/// EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT (Redis `expireGenericCommand`): options are
/// checked before the number; a deadline at or before now deletes the key and replies 1.
fn expire_generic(cx: &mut Cx, unit_ms: bool, absolute: bool) -> Reply {
    let flags = match expire_flags(&cx.args[3..]) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let mut when = match args::int(&cx.args[2]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let bad = || errors::invalid_expire(cx.spec.name);
    if !unit_ms {
        match when.checked_mul(1000) {
            Some(ms) => when = ms,
            None => return bad(),
        }
    }
    let now = cx.now() as i64;
    if !absolute {
        match when.checked_add(now) {
            Some(t) => when = t,
            None => return bad(),
        }
    }
    let key = &cx.args[1];
    let db = cx.ks.db;
    let current = match cx.ks.lookup_write_in(db, key) {
        None => {
            cx.changes(0);
            return Reply::Int(0);
        }
        Some(e) => e.expire_at().map(|t| t as i64),
    };
    let refused = (flags.nx && current.is_some())
        || (flags.xx && current.is_none())
        // No deadline counts as infinite: GT never beats it, LT always does.
        || (flags.gt && current.is_none_or(|c| when <= c))
        || (flags.lt && current.is_some_and(|c| when >= c));
    if refused {
        cx.changes(0);
        return Reply::Int(0);
    }
    if when <= now {
        cx.ks.remove(key);
        cx.notify(notify::GENERIC, "del", key);
    } else {
        cx.ks.set_expire(key, Some(when as u64));
        cx.notify(notify::GENERIC, "expire", key);
    }
    Reply::Int(1)
}

fn expire(cx: &mut Cx) -> Reply {
    expire_generic(cx, false, false)
}

fn pexpire(cx: &mut Cx) -> Reply {
    expire_generic(cx, true, false)
}

fn expireat(cx: &mut Cx) -> Reply {
    expire_generic(cx, false, true)
}

fn pexpireat(cx: &mut Cx) -> Reply {
    expire_generic(cx, true, true)
}

/// TTL / PTTL / EXPIRETIME / PEXPIRETIME: -2 missing, -1 no deadline; seconds are rounded
/// to the nearest (`(ms + 500) / 1000`), as Redis does.
fn ttl_generic(cx: &mut Cx, unit_ms: bool, absolute: bool) -> Reply {
    let now = cx.now();
    let Some(e) = cx.ks.get_notouch(&cx.args[1]) else {
        return Reply::Int(-2);
    };
    let Some(at) = e.expire_at() else {
        return Reply::Int(-1);
    };
    let ms = if absolute { at } else { at.saturating_sub(now) };
    // Deadlines are at most i64::MAX, so neither the rounding nor the cast overflows.
    let v = if unit_ms { ms } else { (ms + 500) / 1000 };
    Reply::Int(v as i64)
}

fn ttl(cx: &mut Cx) -> Reply {
    ttl_generic(cx, false, false)
}

fn pttl(cx: &mut Cx) -> Reply {
    ttl_generic(cx, true, false)
}

fn expiretime(cx: &mut Cx) -> Reply {
    ttl_generic(cx, false, true)
}

fn pexpiretime(cx: &mut Cx) -> Reply {
    ttl_generic(cx, true, true)
}

fn persist(cx: &mut Cx) -> Reply {
    let key = &cx.args[1];
    let db = cx.ks.db;
    let has_ttl = cx
        .ks
        .lookup_write_in(db, key)
        .is_some_and(|e| e.expire_at().is_some());
    if has_ttl {
        cx.ks.set_expire(key, None);
        cx.notify(notify::GENERIC, "persist", key);
    }
    cx.changes(has_ttl as u64);
    Reply::Int(has_ttl as i64)
}

// ---- iteration ----

fn keys(cx: &mut Cx) -> Reply {
    let pattern = &cx.args[1];
    let all = &pattern[..] == b"*";
    let db = cx.ks.db;
    let mut found = cx.ks.all_keys(db);
    if !all {
        found.retain(|k| glob_match(pattern, k, false));
    }
    Reply::strings(found)
}

fn scan(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let cursor = match args::scan_cursor(&args[1]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let mut count: i64 = 10;
    let mut pattern: Option<&[u8]> = None;
    let mut type_name: Option<&[u8]> = None;
    let mut i = 2;
    while i < args.len() {
        let has_value = i + 1 < args.len();
        let a = &args[i];
        if is(a, "COUNT") && has_value {
            count = match args::int(&args[i + 1]) {
                Ok(n) if n >= 1 => n,
                Ok(_) => return errors::syntax(),
                Err(e) => return e,
            };
        } else if is(a, "MATCH") && has_value {
            // Exactly "*" matches everything: the same as no pattern.
            pattern = Some(&args[i + 1][..]).filter(|p| *p != b"*");
        } else if is(a, "TYPE") && has_value {
            type_name = Some(&args[i + 1][..]);
        } else if is(a, "NOVALUES") {
            return errors::err(errors::NOVALUES_HSCAN_ONLY);
        } else {
            return errors::syntax();
        }
        i += 2;
    }
    let db = cx.ks.db;
    let mut found = Vec::new();
    let next = cx.ks.scan(db, cursor, count as usize, &mut found);
    let keys = found
        .into_iter()
        .filter(|(k, _)| pattern.is_none_or(|p| glob_match(p, k, false)))
        .filter(|(_, t)| type_name.is_none_or(|want| want.eq_ignore_ascii_case(t.as_bytes())))
        .map(|(k, _)| Reply::Bulk(k))
        .collect();
    Reply::Array(vec![
        Reply::bulk_str(itoa::Buffer::new().format(next)),
        Reply::Array(keys),
    ])
}

fn randomkey(cx: &mut Cx) -> Reply {
    let db = cx.ks.db;
    let srv = cx.srv;
    if srv.seeded.load(std::sync::atomic::Ordering::Relaxed) {
        // A seeded (test) server: the hash tables' order is not seeded, so pick by rank
        // among the sorted live keys instead (O(n log n); test keyspaces are small).
        use rand::Rng;
        let mut keys = cx.ks.all_keys(db);
        if keys.is_empty() {
            return Reply::Nil;
        }
        keys.sort_unstable();
        let i = srv.rng.lock().gen_range(0..keys.len());
        return Reply::Bulk(keys.swap_remove(i));
    }
    Reply::opt_bulk(cx.ks.random_key_with(db, &mut *srv.rng.lock()))
}

fn dbsize(cx: &mut Cx) -> Reply {
    let db = cx.ks.db;
    Reply::Int(cx.ks.dbsize_in(db) as i64)
}

// ---- moving keys around ----

/// RENAME / RENAMENX: the entry (value and deadline) moves as it is.
fn rename_generic(cx: &mut Cx, nx: bool) -> Reply {
    let (src, dst) = (&cx.args[1], &cx.args[2]);
    let db = cx.ks.db;
    if cx.ks.lookup_write_in(db, src).is_none() {
        return errors::err(errors::NO_SUCH_KEY);
    }
    let done = if nx { Reply::Int(1) } else { Reply::OK };
    if src == dst {
        cx.changes(0);
        return if nx { Reply::Int(0) } else { done };
    }
    if nx && cx.ks.lookup_write_in(db, dst).is_some() {
        cx.changes(0);
        return Reply::Int(0);
    }
    let Some(entry) = cx.ks.remove_in(db, src) else {
        return errors::err(errors::NO_SUCH_KEY);
    };
    let old = cx.ks.insert_entry_in(db, dst, entry);
    server_del(cx, old);
    // Redis deletes an existing destination and adds the key anew: always `new`.
    if let Some(ev) = cx.events() {
        ev.emit(notify::NEW, "new", dst);
        ev.emit(notify::GENERIC, "rename_from", src);
        ev.emit(notify::GENERIC, "rename_to", dst);
    }
    done
}

/// A destination deleted by the command that replaces it (Redis `dbDelete` in RENAME and
/// COPY … REPLACE): freed lazily under `lazyfree-lazy-server-del`, before the reply
/// otherwise (as DEL's, `Access::drop_later`).
fn server_del(cx: &mut Cx, old: Option<crate::types::value::Entry>) {
    if let Some(e) = old {
        if crate::config_num!(cx.srv.config, "lazyfree-lazy-server-del") != 0 {
            cx.srv.ks.lazyfree.free_entry(e);
        } else {
            cx.ks.drop_later(e);
        }
    }
}

fn rename(cx: &mut Cx) -> Reply {
    rename_generic(cx, false)
}

fn renamenx(cx: &mut Cx) -> Reply {
    rename_generic(cx, true)
}

fn move_cmd(cx: &mut Cx) -> Reply {
    // A cluster has only db 0 (Redis's emulated-cluster refusals, here and below).
    if cx.srv.cluster_emulated {
        return errors::err("ERR MOVE is not allowed in cluster mode");
    }
    let key = &cx.args[1];
    let src = cx.ks.db;
    let dst = match args::db_id(&cx.args[2], cx.srv.ks.databases()) {
        Ok(d) => d,
        Err(e) => return e,
    };
    if src == dst {
        return errors::err(errors::SAME_OBJECT);
    }
    if cx.ks.lookup_write_in(src, key).is_none() || cx.ks.lookup_write_in(dst, key).is_some() {
        return Reply::Int(0);
    }
    match cx.ks.remove_in(src, key) {
        Some(entry) => {
            cx.ks.insert_entry_in(dst, key, entry);
            if let Some(ev) = cx.events() {
                ev.emit_in(notify::NEW, "new", dst, key);
                ev.emit_in(notify::GENERIC, "move_from", src, key);
                ev.emit_in(notify::GENERIC, "move_to", dst, key);
            }
            Reply::Int(1)
        }
        None => Reply::Int(0),
    }
}

fn copy(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let (src, dst) = (&args[1], &args[2]);
    let src_db = cx.ks.db;
    let mut dst_db = src_db;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "REPLACE") {
            replace = true;
        } else if is(&args[i], "DB") && i + 1 < args.len() {
            dst_db = match args::db_id(&args[i + 1], cx.srv.ks.databases()) {
                Ok(d) => d,
                Err(e) => return e,
            };
            i += 1;
        } else {
            return errors::syntax();
        }
        i += 1;
    }
    if cx.srv.cluster_emulated && (src_db != 0 || dst_db != 0) {
        return errors::err("ERR Copying to another database is not allowed in cluster mode");
    }
    if src_db == dst_db && src == dst {
        return errors::err(errors::SAME_OBJECT);
    }
    if cx.ks.get(src).is_none() {
        return Reply::Int(0);
    }
    if cx.ks.lookup_write_in(dst_db, dst).is_some() && !replace {
        return Reply::Int(0);
    }
    // Cloned only once the copy is certain (collections can be large).
    let Some((value, deadline)) = cx.ks.peek(src).map(|e| (e.value.clone(), e.expire_at())) else {
        return Reply::Int(0);
    };
    let old = cx.ks.set_in(dst_db, dst, value, deadline);
    server_del(cx, old);
    // A replaced destination is deleted and added anew, as in Redis: always `new`.
    if let Some(ev) = cx.events() {
        ev.emit_in(notify::NEW, "new", dst_db, dst);
        ev.emit_in(notify::GENERIC, "copy_to", dst_db, dst);
    }
    Reply::Int(1)
}

// ---- whole databases ----

/// FLUSHDB/FLUSHALL's optional SYNC|ASYNC; no option follows `lazyfree-lazy-user-flush`.
fn flush_async(cx: &Cx) -> Result<bool, Reply> {
    match cx.args {
        [_] => Ok(cx
            .srv
            .config
            .get("lazyfree-lazy-user-flush")
            .is_some_and(|v| v == "yes")),
        [_, a] if is(a, "SYNC") => Ok(false),
        [_, a] if is(a, "ASYNC") => Ok(true),
        _ => Err(errors::syntax()),
    }
}

/// Empties `dbs`; with `lazy`, the detached data is freed on the lazyfree thread.
fn flush(cx: &mut Cx, dbs: std::ops::Range<usize>, lazy: bool) {
    // Clients blocked in XREADGROUP learn their stream is gone (Redis
    // `scanDatabaseForDeletedKeys`); other waiters find nothing and keep waiting.
    for db in dbs.clone() {
        for key in cx.srv.blocking.keys_in_db(db) {
            cx.ks.signal_ready_in(db, &key);
        }
    }
    for db in dbs {
        if lazy {
            cx.ks.flush_db_lazy(db);
        } else {
            cx.ks.flush_db(db);
        }
    }
    // Client-side caching: every tracking client drops everything (Redis
    // `signalFlushedDb`).
    cx.srv.tracking.flushed(cx.srv);
}

fn flushdb(cx: &mut Cx) -> Reply {
    match flush_async(cx) {
        Ok(lazy) => {
            let db = cx.ks.db;
            // Redis's dirty counter moves by the keys emptied.
            let keys = cx.ks.dbsize_in(db);
            cx.changes(keys as u64);
            flush(cx, db..db + 1, lazy);
            Reply::OK
        }
        Err(e) => e,
    }
}

fn flushall(cx: &mut Cx) -> Reply {
    match flush_async(cx) {
        Ok(lazy) => {
            let keys: usize = (0..cx.srv.ks.databases())
                .map(|db| cx.ks.dbsize_in(db))
                .sum();
            cx.changes(keys as u64);
            flush(cx, 0..cx.srv.ks.databases(), lazy);
            Reply::OK
        }
        Err(e) => e,
    }
}

fn swapdb(cx: &mut Cx) -> Reply {
    if cx.srv.cluster_emulated {
        return errors::err("ERR SWAPDB is not allowed in cluster mode");
    }
    let ids = args::int32(&cx.args[1], Some(errors::INVALID_FIRST_DB))
        .and_then(|a| args::int32(&cx.args[2], Some(errors::INVALID_SECOND_DB)).map(|b| (a, b)));
    let (a, b) = match ids {
        Ok(ids) => ids,
        Err(e) => return e,
    };
    let n = cx.srv.ks.databases();
    let index = |i: i32| usize::try_from(i).ok().filter(|&i| i < n);
    let (Some(a), Some(b)) = (index(a), index(b)) else {
        return errors::err(errors::DB_INDEX);
    };
    cx.ks.swap_dbs(a, b);
    // Clients blocked in either db may now find their keys (Redis scanDatabaseForReadyKeys).
    for db in [a, b] {
        for key in cx.srv.blocking.keys_in_db(db) {
            cx.ks.signal_ready_in(db, &key);
        }
    }
    Reply::OK
}

// ---- OBJECT ----

/// The configured eviction policy (`noeviction` when the parameter is unknown).
fn maxmemory_policy(cx: &Cx) -> String {
    cx.srv
        .config
        .get("maxmemory-policy")
        .unwrap_or_else(|| "noeviction".into())
}

fn lfu_policy(cx: &Cx) -> bool {
    maxmemory_policy(cx).contains("lfu")
}

/// Redis shares the integer objects 0..9999 (refcount `INT_MAX`) unless an LRU/LFU policy
/// with a memory limit needs per-object access data.
fn shared_integers(cx: &Cx) -> bool {
    let policy = maxmemory_policy(cx);
    cx.srv.config.get_i64("maxmemory") == 0 || !(policy.contains("lru") || policy.contains("lfu"))
}

fn object(cx: &mut Cx) -> Reply {
    match cx.args.get(1) {
        Some(sub) => errors::unknown_subcommand("object", sub),
        None => errors::wrong_args("object"),
    }
}

fn object_encoding(cx: &mut Cx) -> Reply {
    match cx.ks.get_notouch(&cx.args[2]) {
        Some(e) => Reply::bulk_static(e.value.encoding()),
        None => Reply::Nil,
    }
}

fn object_refcount(cx: &mut Cx) -> Reply {
    let shared_ok = shared_integers(cx);
    match cx.ks.get_notouch(&cx.args[2]) {
        Some(e) => match &e.value {
            Value::Str(StrVal::Int(i)) if shared_ok && (0..10_000).contains(i) => {
                Reply::Int(i32::MAX as i64)
            }
            _ => Reply::Int(1),
        },
        None => Reply::Nil,
    }
}

/// Seconds since the last access, at Redis's LRU clock resolution (whole seconds).
fn idle_seconds(now_ms: u64, lru_ms: u64) -> u64 {
    (now_ms / 1000).saturating_sub(lru_ms / 1000)
}

fn object_idletime(cx: &mut Cx) -> Reply {
    let now = cx.now();
    let lfu = lfu_policy(cx);
    match cx.ks.get_notouch(&cx.args[2]) {
        None => Reply::Nil,
        Some(_) if lfu => errors::err(errors::LFU_SELECTED),
        Some(e) => Reply::Int(idle_seconds(now, e.lru_ms()) as i64),
    }
}

/// The key's LFU counter, decayed to now (Redis `LFUDecrAndReturn`; the lookup itself
/// does not count as an access).
fn object_freq(cx: &mut Cx) -> Reply {
    let now = cx.now();
    let lfu = lfu_policy(cx);
    let decay = cx
        .srv
        .config
        .get_i64("lfu-decay-time")
        .clamp(0, i64::from(u32::MAX)) as u32;
    match cx.ks.get_notouch(&cx.args[2]) {
        None => Reply::Nil,
        Some(_) if !lfu => errors::err(errors::LFU_NOT_SELECTED),
        Some(e) => Reply::Int(i64::from(e.lfu_counter(now, decay))),
    }
}

fn object_help(_cx: &mut Cx) -> Reply {
    const HELP: &[&str] = &[
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
        "HELP",
        "    Prints this help.",
    ];
    Reply::Array(HELP.iter().map(|l| Reply::status(l)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instance::session::Session;
    use crate::TestServer;

    fn run(srv: &TestServer, sess: &mut Session, line: &[&str]) -> Reply {
        let args = line
            .iter()
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect();
        crate::cmd::dispatch(&srv.shared(), sess, args)
    }

    #[test]
    fn big_values_are_deleted_whatever_thread_frees_them() {
        let srv = TestServer::start().expect("server");
        let addr = "127.0.0.1:1".parse().expect("addr");
        let mut sess = Session::new(srv.shared().clients.register(addr, addr, 0), true);
        let members: Vec<String> = (0..1000).map(|i| format!("m{i}")).collect();
        let mut fill = |cmd: &str, key: &str, pairs: bool| {
            let mut line = vec![cmd, key];
            for m in &members {
                if pairs {
                    line.push("1");
                }
                line.push(m);
            }
            run(&srv, &mut sess, &line);
        };
        fill("SADD", "s", false);
        fill("RPUSH", "l", false);
        fill("ZADD", "z", true);
        fill("HSET", "h", true);
        let mut sess = Session::new(srv.shared().clients.register(addr, addr, 0), true);
        let small = run(&srv, &mut sess, &["SADD", "small", "1", "2"]);
        assert_eq!(small, Reply::Int(2));
        assert_eq!(
            run(&srv, &mut sess, &["DEL", "s", "l", "nope", "small"]),
            Reply::Int(3)
        );
        assert_eq!(run(&srv, &mut sess, &["UNLINK", "z", "h"]), Reply::Int(2));
        assert_eq!(
            run(&srv, &mut sess, &["EXISTS", "s", "l", "z", "h", "small"]),
            Reply::Int(0)
        );
        // The key is free at once: a new value starts from scratch.
        assert_eq!(run(&srv, &mut sess, &["SADD", "s", "7"]), Reply::Int(1));
        assert_eq!(run(&srv, &mut sess, &["SCARD", "s"]), Reply::Int(1));
    }

    fn info_field(srv: &TestServer, sess: &mut Session, field: &str) -> usize {
        let Reply::Verbatim(text) = run(srv, sess, &["INFO", "memory"]) else {
            panic!("INFO is verbatim text")
        };
        let text = String::from_utf8_lossy(&text).into_owned();
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{field} in INFO memory"))
    }

    /// What reaches the lazyfree thread is what Redis would send there: UNLINK, and DEL
    /// only under `lazyfree-lazy-user-del`, of values past the effort threshold in their
    /// encoding; FLUSHDB ASYNC counts its keys.
    #[test]
    fn lazyfree_counts_what_redis_counts() {
        let srv = TestServer::start().expect("server");
        let addr = "127.0.0.1:1".parse().expect("addr");
        let mut sess = Session::new(srv.shared().clients.register(addr, addr, 0), true);
        let shared = srv.shared();
        let lf = &shared.ks.lazyfree;
        let idle = |lf: &crate::background::lazyfree::LazyFree| {
            assert!(lf.wait_idle(std::time::Duration::from_secs(10)));
        };
        let fill = |sess: &mut Session, cmd: &str, key: &str, n: usize| {
            let mut line = vec![cmd.to_string(), key.to_string()];
            line.extend((0..n).map(|i| format!("m{i}")));
            let line: Vec<&str> = line.iter().map(String::as_str).collect();
            run(&srv, sess, &line);
        };
        fill(&mut sess, "SADD", "big", 1000);
        fill(&mut sess, "SADD", "small", 10);
        // A listpack holds many elements in one allocation: freed in place.
        fill(&mut sess, "RPUSH", "packed", 100);
        assert_eq!(
            run(&srv, &mut sess, &["UNLINK", "small", "packed"]),
            Reply::Int(2)
        );
        idle(lf);
        assert_eq!(lf.freed(), 0);
        // DEL frees in place by default.
        assert_eq!(run(&srv, &mut sess, &["DEL", "big"]), Reply::Int(1));
        idle(lf);
        assert_eq!(lf.freed(), 0);
        fill(&mut sess, "SADD", "big", 1000);
        assert_eq!(run(&srv, &mut sess, &["UNLINK", "big"]), Reply::Int(1));
        idle(lf);
        assert_eq!(lf.freed(), 1);
        assert_eq!(info_field(&srv, &mut sess, "lazyfreed_objects"), 1);
        assert_eq!(info_field(&srv, &mut sess, "lazyfree_pending_objects"), 0);
        // One element per quicklist node: 100 nodes, past the threshold.
        run(
            &srv,
            &mut sess,
            &["CONFIG", "SET", "list-max-listpack-size", "1"],
        );
        fill(&mut sess, "RPUSH", "nodes", 100);
        run(
            &srv,
            &mut sess,
            &["CONFIG", "SET", "lazyfree-lazy-user-del", "yes"],
        );
        fill(&mut sess, "HSET", "h", 2000);
        assert_eq!(run(&srv, &mut sess, &["DEL", "nodes", "h"]), Reply::Int(2));
        idle(lf);
        assert_eq!(lf.freed(), 3);
        // The key is free at once: a new value starts from scratch.
        assert_eq!(run(&srv, &mut sess, &["SADD", "big", "7"]), Reply::Int(1));
        assert_eq!(run(&srv, &mut sess, &["SCARD", "big"]), Reply::Int(1));
        run(&srv, &mut sess, &["SET", "a", "1"]);
        assert_eq!(run(&srv, &mut sess, &["FLUSHDB", "ASYNC"]), Reply::OK);
        assert_eq!(run(&srv, &mut sess, &["DBSIZE"]), Reply::Int(0));
        idle(lf);
        assert_eq!(lf.freed(), 5);
        assert_eq!(run(&srv, &mut sess, &["CONFIG", "RESETSTAT"]), Reply::OK);
        assert_eq!(info_field(&srv, &mut sess, "lazyfreed_objects"), 0);
        // A RENAME destination is a server-side delete.
        fill(&mut sess, "SADD", "dst", 1000);
        run(&srv, &mut sess, &["SET", "src", "1"]);
        assert_eq!(run(&srv, &mut sess, &["RENAME", "src", "dst"]), Reply::OK);
        idle(lf);
        assert_eq!(lf.freed(), 0);
        run(
            &srv,
            &mut sess,
            &["CONFIG", "SET", "lazyfree-lazy-server-del", "yes"],
        );
        fill(&mut sess, "SADD", "dst2", 1000);
        assert_eq!(
            run(&srv, &mut sess, &["COPY", "dst", "dst2", "REPLACE"]),
            Reply::Int(1)
        );
        idle(lf);
        assert_eq!(lf.freed(), 1);
    }
}
