//! HyperLogLog commands (PFADD, PFCOUNT, PFMERGE) over string values holding Redis's exact
//! HLL representation (src/types/hll.rs), so GET/DUMP of a key match Redis byte for byte.

use super::errors;
use super::{CommandSpec, Cx, KeySpec};
use crate::instance::notify;
use crate::protocol::Reply;
use crate::types::hll;
use crate::types::value::{StrVal, Value};
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "pfadd",
        arity: -2,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "hyperloglog", "fast"],
        group: "hyperloglog",
        since: "2.8.9",
        summary: "Adds the specified elements to the specified HyperLogLog.",
        complexity: "O(1) to add every element.",
        handler: pfadd,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "pfcount",
        arity: -2,
        flags: &["readonly"],
        keys: KeySpec::Range(1, -1, 1),
        acl: &["read", "hyperloglog", "slow"],
        group: "hyperloglog",
        since: "2.8.9",
        summary: "Return the approximated cardinality of the set(s) observed by the HyperLogLog at key(s).",
        complexity: "O(1) with a very small average constant time when called with a single key. O(N) with N being the number of keys, and much bigger constant times, when called with multiple keys.",
        handler: pfcount,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "pfmerge",
        arity: -2,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, -1, 1),
        acl: &["write", "hyperloglog", "slow"],
        group: "hyperloglog",
        since: "2.8.9",
        summary: "Merge N different HyperLogLogs into a single one.",
        complexity: "O(N) to merge N HyperLogLogs, but with high constant times.",
        handler: pfmerge,
        ..CommandSpec::DEFAULT
    },
];

/// Redis's `isHLLObjectOrReply`: a string (not int-encoded) with a valid HLL header.
fn hll_ref(v: &Value) -> Result<&[u8], Reply> {
    match v {
        Value::Str(StrVal::Bytes { data, .. }) if hll::is_hll(data) => Ok(data),
        Value::Str(_) => Err(errors::err(errors::HLL_WRONGTYPE)),
        #[allow(unreachable_patterns)]
        _ => Err(errors::wrongtype()),
    }
}

fn hll_mut(v: &mut Value) -> Result<&mut StrVal, Reply> {
    hll_ref(v)?;
    match v {
        Value::Str(s) => Ok(s),
        #[allow(unreachable_patterns)]
        _ => Err(errors::wrongtype()),
    }
}

fn corrupt() -> Reply {
    errors::err(errors::HLL_CORRUPT)
}

/// The string's bytes for in-place editing (no copy when not shared).
fn take(s: &mut StrVal) -> Vec<u8> {
    match std::mem::replace(s, StrVal::Int(0)) {
        StrVal::Bytes { data, .. } => data,
        StrVal::Int(i) => itoa::Buffer::new().format(i).as_bytes().to_vec(),
    }
}

/// Stores edited bytes back; Redis unshares the value first, so it is `raw`.
fn put(s: &mut StrVal, data: Vec<u8>) {
    *s = StrVal::raw(Bytes::from(data));
}

/// Redis's `dbUnshareStringValue` without a change of content: the encoding becomes `raw`.
/// The read lookup before it was the command's access; this counts none.
fn unshare(cx: &mut Cx, key: &[u8]) {
    let db = cx.ks.db;
    if let Some(e) = cx.ks.get_in(db, key) {
        if let Value::Str(StrVal::Bytes { raw, .. }) = &mut e.value {
            *raw = true;
        }
    }
}

fn max_bytes(cx: &Cx) -> usize {
    cx.srv.config.get_i64("hll-sparse-max-bytes").max(0) as usize
}

fn pfadd(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let key = &args[1];
    let max = max_bytes(cx);
    let db = cx.ks.db;
    let Some(e) = cx.ks.lookup_elems_in(db, key) else {
        let mut s = hll::new_sparse();
        // Redis's dirty counter: the creation, then each register changed.
        let mut changes = 1;
        for ele in &args[2..] {
            // A fresh HLL is well formed: adding to it cannot fail.
            if let Ok(true) = hll::add(&mut s, ele, max) {
                changes += 1;
            }
        }
        cx.changes(changes);
        // Creating the key counts as an update, so the cache is invalidated even when empty.
        hll::invalidate_cache(&mut s);
        cx.ks
            .set(key, Value::Str(StrVal::raw(Bytes::from(s))), None);
        if let Some(ev) = cx.events() {
            ev.emit(notify::NEW, "new", key);
            ev.emit(notify::STRING, "pfadd", key);
        }
        return Reply::Int(1);
    };
    let sv = match hll_mut(&mut e.value) {
        Ok(sv) => sv,
        Err(r) => return r,
    };
    let mut s = take(sv);
    let (mut updated, mut failed) = (0usize, false);
    for ele in &args[2..] {
        match hll::add(&mut s, ele, max) {
            Ok(true) => updated += 1,
            Ok(false) => {}
            Err(hll::Corrupt) => {
                failed = true;
                break;
            }
        }
    }
    if updated > 0 && !failed {
        hll::invalidate_cache(&mut s);
    }
    put(sv, s);
    if failed {
        // Redis keeps the registers set before the corruption was met, unsignalled; the
        // durable store must still see them.
        if updated > 0 {
            cx.ks.lookup_write_in(db, key);
        }
        return corrupt();
    }
    cx.changes(updated as u64);
    if updated == 0 {
        return Reply::Int(0);
    }
    cx.ks.modified_in(db, key);
    cx.notify(notify::STRING, "pfadd", key);
    Reply::Int(1)
}

enum Card {
    Cached(u64),
    Fresh(u64),
    Corrupt,
}

fn pfcount(cx: &mut Cx) -> Reply {
    let args = cx.args;
    if args.len() > 2 {
        return pfcount_union(cx);
    }
    let key = &args[1];
    let card = match cx.ks.get(key) {
        None => return Reply::Int(0),
        Some(e) => match hll_ref(&e.value) {
            Err(r) => return r,
            Ok(s) => match hll::cached(s) {
                Some(c) => Card::Cached(c),
                None => match hll::count(s) {
                    Ok(c) => Card::Fresh(c),
                    Err(hll::Corrupt) => Card::Corrupt,
                },
            },
        },
    };
    match card {
        Card::Cached(c) => {
            unshare(cx, key);
            Reply::Int(c as i64)
        }
        Card::Corrupt => {
            unshare(cx, key);
            corrupt()
        }
        Card::Fresh(c) => {
            // Storing the cache is a modification (Redis signals and propagates it).
            let db = cx.ks.db;
            if let Some(Value::Str(sv)) = cx.ks.rewrite_in(db, key).map(|e| &mut e.value) {
                let mut s = take(sv);
                hll::store_cache(&mut s, c);
                put(sv, s);
            }
            Reply::Int(c as i64)
        }
    }
}

/// PFCOUNT of several keys: the cardinality of their union; nothing is modified.
fn pfcount_union(cx: &mut Cx) -> Reply {
    let mut max = vec![0u8; hll::REGISTERS];
    if let Err(r) = union(cx, &cx.args[1..], &mut max) {
        return r;
    }
    Reply::Int(hll::count_raw(&max) as i64)
}

/// Merges the registers of every existing key into `max`, checking each in order. Returns
/// whether any of them is dense.
fn union(cx: &mut Cx, keys: &[Bytes], max: &mut [u8]) -> Result<bool, Reply> {
    let mut dense = false;
    for key in keys {
        let Some(e) = cx.ks.get(key) else { continue };
        let s = hll_ref(&e.value)?;
        dense |= hll::is_dense(s);
        hll::merge_into(max, s).map_err(|_| corrupt())?;
    }
    Ok(dense)
}

/// PFMERGE dest [src ...]: the destination is itself one of the sources (Redis ≥ 7.0 allows
/// no other), and is created as an empty HLL when missing.
fn pfmerge(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let dest = &args[1];
    let mut max = vec![0u8; hll::REGISTERS];
    let use_dense = match union(cx, &args[1..], &mut max) {
        Ok(d) => d,
        Err(r) => return r,
    };
    let limit = max_bytes(cx);
    let write = |s: &mut Vec<u8>| -> Result<(), hll::Corrupt> {
        if use_dense {
            hll::sparse_to_dense(s)?;
        }
        for (j, &m) in max.iter().enumerate() {
            if m != 0 {
                // The destination was validated as a source: its opcodes are well formed.
                let _ = hll::set_register(s, j, m, limit);
            }
        }
        hll::invalidate_cache(s);
        Ok(())
    };
    let created = match cx.ks.get_mut(dest).map(|e| &mut e.value) {
        Some(Value::Str(sv)) => {
            let mut s = take(sv);
            let res = write(&mut s);
            put(sv, s);
            if res.is_err() {
                return corrupt();
            }
            false
        }
        Some(_) => return errors::wrongtype(),
        None => {
            let mut s = hll::new_sparse();
            if write(&mut s).is_err() {
                return corrupt();
            }
            cx.ks
                .set(dest, Value::Str(StrVal::raw(Bytes::from(s))), None);
            true
        }
    };
    if let Some(ev) = cx.events() {
        if created {
            ev.emit(notify::NEW, "new", dest);
        }
        ev.emit(notify::STRING, "pfadd", dest);
    }
    Reply::ok()
}
