//! Hash-field expiration: HEXPIRE, HPEXPIRE, HEXPIREAT, HPEXPIREAT, HTTL, HPTTL,
//! HEXPIRETIME, HPEXPIRETIME, HPERSIST (Redis 7.4) and HGETEX, HSETEX, HGETDEL (Redis 8.0),
//! with their reply codes, error texts and events as Redis's `t_hash.c` has them; and the
//! lazy expiry of fields that the other hash commands apply on access (Redis
//! `hashTypeGetValue`). Deadlines live in the hash's side structure
//! ([`crate::types::hash::HashValue::ttl`]); the active cycle is the engine's
//! (`Keyspace::sweep_ready`).
//!
//! A field past its deadline stays stored until something removes it: a command that looks
//! it up (HGET, HEXISTS, HSTRLEN, HMGET, HINCRBY*, HSETNX, HGETEX, HGETDEL, HSETEX FNX/FXX)
//! deletes it then, HRANDFIELD deletes every such field of the hash first, HGETALL, HKEYS,
//! HVALS and HSCAN skip them, HLEN counts them, and HSET overwrites one as if it were live —
//! all as Redis 7.4/8.0 do.
//!
//! Where Valkey 9.0 differs, Redis is followed: Valkey's HSETEX also takes key-level
//! `NX | XX`, which Redis 8.0 (and so respite) answers with `unknown argument`.
//! Checked against redis-server 7.4.1 (HEXPIRE … HPERSIST: replies, errors, listpackex
//! order, events, DUMP bytes); HGETEX, HSETEX and HGETDEL follow Redis 8.0's `t_hash.c` and
//! its tests/unit/type/hash-field-expire.tcl, ported in `expire/tests.rs`.

use super::{read, write, CommandSpec, Cx, KeySpec};
use crate::engine::change::Change;
use crate::instance::errors;
use crate::instance::notify;
use crate::protocol::Reply;
use crate::types::hash::{HashValue, MAX_FIELD_DEADLINE};
use crate::types::value::Value;
use bytes::Bytes;
use std::sync::atomic::Ordering;

/// HEXPIRE family reply codes (Redis `SetExRes`), also HTTL's and HPERSIST's -2/-1.
const NO_FIELD: i64 = -2;
const NO_TTL: i64 = -1;
const NOT_MET: i64 = 0;
const SET: i64 = 1;
const DELETED: i64 = 2;

pub static COMMANDS: &[CommandSpec] = &[
    ttl_setter(
        "hexpire",
        "Set expiry for hash field using relative time to expire (seconds)",
        hexpire,
    ),
    ttl_setter(
        "hpexpire",
        "Set expiry for hash field using relative time to expire (milliseconds)",
        hpexpire,
    ),
    ttl_setter(
        "hexpireat",
        "Set expiry for hash field using an absolute Unix timestamp (seconds)",
        hexpireat,
    ),
    ttl_setter(
        "hpexpireat",
        "Set expiry for hash field using an absolute Unix timestamp (milliseconds)",
        hpexpireat,
    ),
    ttl_reader(
        "httl",
        "Returns the TTL in seconds of a hash field.",
        httl,
    ),
    ttl_reader(
        "hpttl",
        "Returns the TTL in milliseconds of a hash field.",
        hpttl,
    ),
    ttl_reader(
        "hexpiretime",
        "Returns the expiration time of a hash field as a Unix timestamp, in seconds.",
        hexpiretime,
    ),
    ttl_reader(
        "hpexpiretime",
        "Returns the expiration time of a hash field as a Unix timestamp, in msec.",
        hpexpiretime,
    ),
    CommandSpec {
        name: "hpersist",
        arity: -5,
        flags: &["write", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "hash", "fast"],
        group: "hash",
        since: "7.4.0",
        summary: "Removes the expiration time for each specified field",
        complexity: "O(N) where N is the number of specified fields",
        handler: hpersist,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hgetex",
        arity: -5,
        flags: &["write", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "hash", "fast"],
        group: "hash",
        since: "8.0.0",
        summary: "Get the value of one or more fields of a given hash key, and optionally set their expiration.",
        complexity: "O(N) where N is the number of specified fields",
        handler: hgetex,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hsetex",
        arity: -6,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "hash", "fast"],
        group: "hash",
        since: "8.0.0",
        summary: "Set the value of one or more fields of a given hash key, and optionally set their expiration.",
        complexity: "O(N) where N is the number of fields being set.",
        handler: hsetex,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hgetdel",
        arity: -5,
        flags: &["write", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "hash", "fast"],
        group: "hash",
        since: "8.0.0",
        summary: "Returns the value of a field and deletes it from the hash.",
        complexity: "O(N) where N is the number of specified fields",
        handler: hgetdel,
        ..CommandSpec::DEFAULT
    },
];

const fn ttl_setter(
    name: &'static str,
    summary: &'static str,
    handler: crate::cmd::table::Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity: -6,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "hash", "fast"],
        group: "hash",
        since: "7.4.0",
        summary,
        complexity: "O(N) where N is the number of specified fields",
        handler,
        ..CommandSpec::DEFAULT
    }
}

const fn ttl_reader(
    name: &'static str,
    summary: &'static str,
    handler: crate::cmd::table::Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity: -5,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "hash", "fast"],
        group: "hash",
        since: "7.4.0",
        summary,
        complexity: "O(N) where N is the number of specified fields",
        handler,
        ..CommandSpec::DEFAULT
    }
}

// ---- lazy expiry, shared with the other hash commands ----

/// Removes those of `fields` that are past their deadline from the hash at `key` (Redis
/// `hashTypeGetValue` with lazy expiry): counted in `expired_subkeys`, WATCH signalled,
/// journaled as an HDEL; the key goes too when the hash is left empty, unless `keep_empty`
/// (Redis's `HFE_LAZY_AVOID_HASH_DEL`: the caller deletes it later). No events: callers
/// emit them, once per command or per field as Redis does. Returns (fields removed, key
/// deleted).
pub(super) fn expire_fields(
    cx: &mut Cx,
    key: &[u8],
    fields: &mut dyn Iterator<Item = &[u8]>,
    keep_empty: bool,
) -> (usize, bool) {
    let (db, now) = (cx.ks.db, cx.ks.now);
    let Some(e) = cx.ks.get_in(db, key) else {
        return (0, false);
    };
    let Value::Hash(h) = &mut e.value else {
        return (0, false);
    };
    let mut gone = Vec::new();
    for f in fields {
        if h.is_field_expired(f, now) && h.remove(f) {
            gone.push(Bytes::copy_from_slice(f));
        }
    }
    if gone.is_empty() {
        return (0, false);
    }
    let empty = h.is_empty();
    let n = gone.len();
    cx.ks
        .keyspace()
        .stats
        .expired_subkeys
        .fetch_add(n as u64, Ordering::Relaxed);
    if empty && !keep_empty {
        cx.ks.remove_in(db, key);
        return (n, true);
    }
    cx.ks.signal_in(db, key);
    if cx.ks.journaling() {
        cx.ks.elems(Change::HashDel {
            db,
            key: Bytes::copy_from_slice(key),
            fields: gone,
        });
    }
    (n, false)
}

/// Lazy expiry of `fields` with Redis's events: `hexpired`, then `del` if the hash went.
/// Returns whether the key was deleted.
pub(crate) fn expire_lazily(cx: &mut Cx, key: &[u8], fields: &[&[u8]]) -> bool {
    let (n, deleted) = expire_fields(cx, key, &mut fields.iter().copied(), false);
    if n > 0 {
        emit_expired(cx, key, deleted);
    }
    deleted
}

/// Redis `hashTypeExpireIfNeeded` (HRANDFIELD): removes every field of the hash at `key`
/// past its deadline, with `hexpired` (and `del`) as the active cycle emits them. Returns
/// whether the key was deleted.
pub(super) fn expire_all_due(cx: &mut Cx, key: &[u8]) -> bool {
    let (db, now) = (cx.ks.db, cx.ks.now);
    let due = match cx.ks.get_in(db, key).map(|e| &e.value) {
        Some(Value::Hash(h)) => h.due(now, usize::MAX),
        _ => return false,
    };
    let (n, deleted) = expire_fields(cx, key, &mut due.iter().map(|f| &f[..]), false);
    if n > 0 {
        emit_expired(cx, key, deleted);
    }
    deleted
}

fn emit_expired(cx: &Cx, key: &[u8], deleted: bool) {
    if let Some(ev) = cx.events() {
        ev.emit(notify::HASH, "hexpired", key);
        if deleted {
            ev.emit(notify::GENERIC, "del", key);
        }
    }
}

/// Whether any of `fields` is past its deadline in `h` (the cheap check before the lazy
/// expiry's second lookup: one branch for a hash without deadlines).
pub(super) fn any_expired<'a>(
    h: &HashValue,
    fields: impl IntoIterator<Item = &'a [u8]>,
    now: u64,
) -> bool {
    h.has_ttls() && fields.into_iter().any(|f| h.is_field_expired(f, now))
}

// ---- argument parsing ----

#[derive(Clone, Copy, PartialEq, Eq)]
enum Unit {
    Seconds,
    Millis,
}

/// Redis `parseExpireTime` (t_hash.c): a non-negative integer in `unit`, plus `base` (the
/// command's time for the relative forms, 0 for the absolute ones), at most 2^46 - 1 ms.
fn parse_deadline(arg: &[u8], unit: Unit, base: u64, cmd: &str) -> Result<u64, Reply> {
    let v = crate::cmd::args::int(arg)?;
    if v < 0 {
        return Err(errors::err(errors::HFE_NEGATIVE_EXPIRE));
    }
    let mut v = v as u64;
    if unit == Unit::Seconds {
        if v > MAX_FIELD_DEADLINE / 1000 {
            return Err(errors::invalid_expire(cmd));
        }
        v *= 1000;
    }
    if v > MAX_FIELD_DEADLINE.saturating_sub(base) {
        return Err(errors::invalid_expire(cmd));
    }
    Ok(v + base)
}

/// `FIELDS numfields field…` starting at `at` (the FIELDS token): the fields, or the error
/// Redis gives (`numfields_msg` for a count that is not a positive integer).
fn parse_fields<'a>(
    args: &'a [Bytes],
    at: usize,
    numfields_msg: &'static str,
) -> Result<&'a [Bytes], Reply> {
    match args.get(at) {
        Some(a) if super::opt(a, "fields") => {}
        _ => return Err(errors::err(errors::HFE_FIELDS_MISSING)),
    }
    let Some(n) = args.get(at + 1) else {
        // Only HGETEX's longest form can end here (its arity lets `HGETEX k EX 1 FIELDS`
        // through, and Redis reads past its arguments): no count, so none matches.
        return Err(errors::err(errors::HFE_NUMFIELDS_MISMATCH));
    };
    let n = crate::cmd::args::long_in_range(n, 1, i64::MAX, Some(numfields_msg))?;
    let rest = &args[at + 2..];
    if n as u64 != rest.len() as u64 {
        return Err(errors::err(errors::HFE_NUMFIELDS_MISMATCH));
    }
    Ok(rest)
}

// ---- HEXPIRE family ----

/// NX | XX | GT | LT (Redis `ExpireSetCond`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cond {
    None,
    Nx,
    Xx,
    Gt,
    Lt,
}

/// Redis `hashTypeSetEx` for one field: gives `field` the deadline `at` under `cond`, or
/// deletes it when `at` is not in the future. The field counts as present while stored, a
/// logically expired one too (Redis finds it the same way).
fn set_field_deadline(h: &mut HashValue, field: &[u8], at: u64, cond: Cond, now: u64) -> i64 {
    if !h.contains(field) {
        return NO_FIELD;
    }
    let met = match h.ttl(field) {
        // A field without a deadline meets LT (its deadline is "infinite"), not XX or GT.
        None => !matches!(cond, Cond::Xx | Cond::Gt),
        Some(prev) => match cond {
            Cond::Nx => false,
            Cond::Gt => prev < at,
            Cond::Lt => prev > at,
            Cond::None | Cond::Xx => true,
        },
    };
    if !met {
        return NOT_MET;
    }
    // Redis `checkAlreadyExpired`: a deadline at or before now deletes the field.
    if at <= now {
        h.remove(field);
        return DELETED;
    }
    h.set_ttl(field, Some(at));
    SET
}

/// What a command did to a hash's fields, for its journal, events and statistics.
#[derive(Default)]
struct Outcome {
    /// Fields given a deadline (or cleared of one).
    updated: usize,
    /// Fields deleted because their new deadline was not in the future.
    deleted: usize,
    /// The earliest deadline set.
    earliest: Option<u64>,
    /// Durable keyspace only: the element changes to journal (pairs written, fields
    /// deleted, deadlines set or cleared), in that order.
    journal: Option<Journal>,
}

#[derive(Default)]
struct Journal {
    puts: Vec<(Bytes, Bytes)>,
    removed: Vec<Bytes>,
    ttls: Vec<(Bytes, Option<u64>)>,
}

impl Outcome {
    fn new(cx: &Cx) -> Outcome {
        Outcome {
            journal: cx.ks.journaling().then(Journal::default),
            ..Outcome::default()
        }
    }

    fn note_deadline(&mut self, at: u64) {
        self.earliest = Some(self.earliest.map_or(at, |e| e.min(at)));
    }

    /// One field's fate under HEXPIRE / HGETEX / HSETEX's deadline `at`.
    fn deadline_result(&mut self, field: &[u8], at: u64, r: i64) {
        match r {
            SET => {
                self.updated += 1;
                self.note_deadline(at);
                self.ttl(field, Some(at));
            }
            DELETED => {
                self.deleted += 1;
                if let Some(j) = &mut self.journal {
                    j.removed.push(Bytes::copy_from_slice(field));
                }
            }
            _ => {}
        }
    }

    fn ttl(&mut self, field: &[u8], at: Option<u64>) {
        if let Some(j) = &mut self.journal {
            j.ttls.push((Bytes::copy_from_slice(field), at));
        }
    }
}

/// After a command changed deadlines or fields of the hash at `key` in place: the active
/// cycle told of the earliest new deadline, `expired_subkeys` counted, WATCH signalled,
/// the changes journaled, and the key deleted if the hash is empty. Returns whether the
/// key was deleted. Events are the caller's.
fn settle(cx: &mut Cx, key: &[u8], o: Outcome) -> bool {
    let db = cx.ks.db;
    let gone = o.deleted;
    if gone > 0 {
        cx.ks
            .keyspace()
            .stats
            .expired_subkeys
            .fetch_add(gone as u64, Ordering::Relaxed);
    }
    if o.updated + gone == 0 {
        return false;
    }
    let empty = match cx.ks.get_in(db, key).map(|e| &e.value) {
        Some(Value::Hash(h)) => h.is_empty(),
        _ => false,
    };
    if empty {
        cx.ks.remove_in(db, key);
        return true;
    }
    if let Some(t) = o.earliest {
        cx.ks.register_field_expiry_in(db, key, t);
    }
    cx.ks.signal_in(db, key);
    if let Some(j) = o.journal {
        let key = Bytes::copy_from_slice(key);
        if !j.puts.is_empty() {
            cx.ks.elems(Change::HashPut {
                db,
                key: key.clone(),
                pairs: j.puts,
            });
        }
        if !j.removed.is_empty() {
            cx.ks.elems(Change::HashDel {
                db,
                key: key.clone(),
                fields: j.removed,
            });
        }
        if !j.ttls.is_empty() {
            cx.ks.elems(Change::HashTtl {
                db,
                key,
                fields: j.ttls,
            });
        }
    }
    false
}

fn hexpire_generic(cx: &mut Cx, unit: Unit, relative: bool) -> Reply {
    let args = cx.args;
    let name = cx.spec.name;
    let key = &args[1];
    let now = cx.ks.now;
    let journaling = cx.ks.journaling();
    let h = match write(cx.ks, key) {
        Err(e) => return e,
        Ok(h) => h,
    };
    let at = match parse_deadline(&args[2], unit, if relative { now } else { 0 }, name) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let (cond, fields_at) = match &args[3] {
        a if super::opt(a, "nx") => (Cond::Nx, 4),
        a if super::opt(a, "xx") => (Cond::Xx, 4),
        a if super::opt(a, "gt") => (Cond::Gt, 4),
        a if super::opt(a, "lt") => (Cond::Lt, 4),
        _ => (Cond::None, 3),
    };
    let fields = match parse_fields(args, fields_at, errors::HFE_NUMFIELDS_GT0) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let Some(h) = h else {
        cx.changes(0);
        return Reply::Array(fields.iter().map(|_| Reply::Int(NO_FIELD)).collect());
    };
    // Redis makes a listpack a listpackex here, whatever the fields' fate.
    h.enable_ttls();
    let mut o = Outcome {
        journal: journaling.then(Journal::default),
        ..Outcome::default()
    };
    let mut out = Vec::with_capacity(fields.len());
    for f in fields {
        let r = set_field_deadline(h, f, at, cond, now);
        o.deadline_result(f, at, r);
        out.push(Reply::Int(r));
    }
    let (updated, deleted) = (o.updated, o.deleted);
    let deleted_key = settle(cx, key, o);
    cx.changes((updated + deleted) as u64);
    if updated + deleted > 0 {
        if let Some(ev) = cx.events() {
            let what = if deleted > 0 { "hdel" } else { "hexpire" };
            ev.emit(notify::HASH, what, key);
            if deleted_key {
                ev.emit(notify::GENERIC, "del", key);
            }
        }
    }
    Reply::Array(out)
}

fn hexpire(cx: &mut Cx) -> Reply {
    hexpire_generic(cx, Unit::Seconds, true)
}

fn hpexpire(cx: &mut Cx) -> Reply {
    hexpire_generic(cx, Unit::Millis, true)
}

fn hexpireat(cx: &mut Cx) -> Reply {
    hexpire_generic(cx, Unit::Seconds, false)
}

fn hpexpireat(cx: &mut Cx) -> Reply {
    hexpire_generic(cx, Unit::Millis, false)
}

// ---- HTTL family ----

/// HTTL / HPTTL (`relative`) and HEXPIRETIME / HPEXPIRETIME: -2 for a missing (or expired)
/// field, -1 for one without a deadline; seconds round up, as Redis's `(t + 999) / 1000`.
fn httl_generic(cx: &mut Cx, unit: Unit, relative: bool) -> Reply {
    let args = cx.args;
    let now = cx.ks.now;
    let h = match read(cx.ks, &args[1]) {
        Err(e) => return e,
        Ok(h) => h,
    };
    let fields = match parse_fields(args, 2, errors::HFE_NUMFIELDS_POSITIVE) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let base = if relative { now } else { 0 };
    let listpack = h.is_some_and(|h| h.is_listpack());
    Reply::Array(
        fields
            .iter()
            .map(|f| {
                let Some(h) = h.filter(|h| h.contains(f)) else {
                    return Reply::Int(NO_FIELD);
                };
                let Some(t) = h.ttl(f) else {
                    return Reply::Int(NO_TTL);
                };
                // Redis's listpackex reads "expired" as `t <= now`, its dict as `t < now`.
                if t < now || (listpack && t == now) {
                    return Reply::Int(NO_FIELD);
                }
                let left = t - base;
                let n = match unit {
                    Unit::Seconds => left.div_ceil(1000),
                    Unit::Millis => left,
                };
                Reply::Int(n as i64)
            })
            .collect(),
    )
}

fn httl(cx: &mut Cx) -> Reply {
    httl_generic(cx, Unit::Seconds, true)
}

fn hpttl(cx: &mut Cx) -> Reply {
    httl_generic(cx, Unit::Millis, true)
}

fn hexpiretime(cx: &mut Cx) -> Reply {
    httl_generic(cx, Unit::Seconds, false)
}

fn hpexpiretime(cx: &mut Cx) -> Reply {
    httl_generic(cx, Unit::Millis, false)
}

// ---- HPERSIST ----

fn hpersist(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let key = &args[1];
    let now = cx.ks.now;
    let journaling = cx.ks.journaling();
    let mut h = match write(cx.ks, key) {
        Err(e) => return e,
        Ok(h) => h,
    };
    let fields = match parse_fields(args, 2, errors::HFE_NUMFIELDS_POSITIVE) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let mut o = Outcome {
        journal: journaling.then(Journal::default),
        ..Outcome::default()
    };
    let out = fields
        .iter()
        .map(|f| {
            let Some(h) = h.as_deref_mut().filter(|h| h.contains(f)) else {
                return Reply::Int(NO_FIELD);
            };
            match h.ttl(f) {
                None => Reply::Int(NO_TTL),
                // Already expired: as if there were no such field.
                Some(t) if t < now => Reply::Int(NO_FIELD),
                Some(_) => {
                    h.set_ttl(f, None);
                    o.updated += 1;
                    o.ttl(f, None);
                    Reply::Int(SET)
                }
            }
        })
        .collect();
    let updated = o.updated;
    settle(cx, key, o);
    if updated > 0 {
        cx.notify(notify::HASH, "hpersist", key);
    } else {
        cx.changes(0);
    }
    Reply::Array(out)
}

// ---- HGETEX ----

/// What HGETEX does to the deadlines of the fields it returns.
#[derive(Clone, Copy)]
enum GetEx {
    Keep,
    Persist,
    Set(u64),
}

fn hgetex(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let name = cx.spec.name;
    let key = &args[1];
    let now = cx.ks.now;
    let exists = match write(cx.ks, key) {
        Err(e) => return e,
        Ok(h) => h.is_some(),
    };
    let a = &args[2];
    let timed = [
        ("ex", Unit::Seconds, true),
        ("px", Unit::Millis, true),
        ("exat", Unit::Seconds, false),
        ("pxat", Unit::Millis, false),
    ]
    .into_iter()
    .find(|(n, _, _)| super::opt(a, n));
    let (what, fields_at) = if let Some((_, unit, relative)) = timed {
        let base = if relative { now } else { 0 };
        match parse_deadline(&args[3], unit, base, name) {
            Ok(t) => (GetEx::Set(t), 4),
            Err(e) => return e,
        }
    } else if super::opt(a, "persist") {
        (GetEx::Persist, 3)
    } else {
        (GetEx::Keep, 2)
    };
    let fields = match parse_fields(args, fields_at, errors::HFE_NUMFIELDS_POSITIVE) {
        Ok(f) => f,
        Err(e) => return e,
    };
    if !exists {
        cx.changes(0);
        return Reply::Array(fields.iter().map(|_| Reply::Nil).collect());
    }
    // Fields found past their deadline go first (no events yet, the hash kept even if
    // emptied: Redis's HFE_LAZY_NO_NOTIFICATION | HFE_LAZY_AVOID_HASH_DEL).
    let (expired, _) = expire_fields(cx, key, &mut fields.iter().map(|f| &f[..]), true);
    // `expired` fields were counted and journaled by `expire_fields` already.
    let mut o = Outcome::new(cx);
    let Ok(Some(h)) = write(cx.ks, key) else {
        return Reply::Array(fields.iter().map(|_| Reply::Nil).collect());
    };
    if !matches!(what, GetEx::Keep) {
        h.enable_ttls();
    }
    let mut out = Vec::with_capacity(fields.len());
    for f in fields {
        let Some(v) = h.get(f) else {
            out.push(Reply::Nil);
            continue;
        };
        out.push(Reply::Bulk(Bytes::copy_from_slice(v)));
        match what {
            GetEx::Keep => {}
            GetEx::Persist => {
                if h.ttl(f).is_some() {
                    h.set_ttl(f, None);
                    o.updated += 1;
                    o.ttl(f, None);
                }
            }
            GetEx::Set(at) => {
                let r = set_field_deadline(h, f, at, Cond::None, now);
                o.deadline_result(f, at, r);
            }
        }
    }
    let (updated, deleted) = (o.updated, o.deleted);
    let deleted_key = settle(cx, key, o) || {
        // Emptied by the lazy expiry alone.
        expired > 0 && delete_if_empty(cx, key)
    };
    cx.changes((deleted + updated) as u64);
    if expired + deleted + updated > 0 {
        if let Some(ev) = cx.events() {
            if expired > 0 {
                ev.emit(notify::HASH, "hexpired", key);
            }
            if updated > 0 {
                let e = if matches!(what, GetEx::Persist) {
                    "hpersist"
                } else {
                    "hexpire"
                };
                ev.emit(notify::HASH, e, key);
            } else if deleted > 0 {
                ev.emit(notify::HASH, "hdel", key);
            }
            if deleted_key {
                ev.emit(notify::GENERIC, "del", key);
            }
        }
    }
    Reply::Array(out)
}

/// Deletes the key if its hash is empty; whether it did.
fn delete_if_empty(cx: &mut Cx, key: &[u8]) -> bool {
    let db = cx.ks.db;
    match cx.ks.get_in(db, key).map(|e| &e.value) {
        Some(Value::Hash(h)) if h.is_empty() => {
            cx.ks.remove_in(db, key);
            true
        }
        _ => false,
    }
}

// ---- HGETDEL ----

fn hgetdel(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let key = &args[1];
    let db = cx.ks.db;
    let exists = match write(cx.ks, key) {
        Err(e) => return e,
        Ok(h) => h.is_some(),
    };
    let fields = match parse_fields(args, 2, errors::HFE_NUMFIELDS_POSITIVE) {
        Ok(f) => f,
        Err(e) => return e,
    };
    if !exists {
        cx.changes(0);
        return Reply::Array(fields.iter().map(|_| Reply::Nil).collect());
    }
    let (expired, _) = expire_fields(cx, key, &mut fields.iter().map(|f| &f[..]), true);
    let journaling = cx.ks.journaling();
    let mut removed = Vec::new();
    let mut out = Vec::with_capacity(fields.len());
    let mut empty = false;
    if let Ok(Some(h)) = write(cx.ks, key) {
        for f in fields {
            match h.get(f) {
                Some(v) => {
                    out.push(Reply::Bulk(Bytes::copy_from_slice(v)));
                    h.remove(f);
                    removed.push(f.clone());
                }
                None => out.push(Reply::Nil),
            }
        }
        empty = h.is_empty();
    }
    let deleted = removed.len();
    cx.changes(deleted as u64);
    if expired + deleted == 0 {
        return Reply::Array(out);
    }
    if empty {
        cx.ks.remove_in(db, key);
    } else {
        cx.ks.signal_in(db, key);
        if journaling && deleted > 0 {
            cx.ks.elems(Change::HashDel {
                db,
                key: key.clone(),
                fields: removed,
            });
        }
    }
    if let Some(ev) = cx.events() {
        if expired > 0 {
            ev.emit(notify::HASH, "hexpired", key);
        }
        if deleted > 0 {
            ev.emit(notify::HASH, "hdel", key);
        }
        if empty {
            ev.emit(notify::GENERIC, "del", key);
        }
    }
    Reply::Array(out)
}

// ---- HSETEX ----

/// HSETEX's parsed options.
struct SetEx<'a> {
    fnx: bool,
    fxx: bool,
    /// The deadline to give every field (EX / PX / EXAT / PXAT).
    at: Option<u64>,
    keep_ttl: bool,
    pairs: &'a [Bytes],
}

/// Redis `hsetexParseArgs`: options in any order until FIELDS, each at most once per kind.
fn parse_hsetex<'a>(args: &'a [Bytes], now: u64, name: &str) -> Result<SetEx<'a>, Reply> {
    let mut s = SetEx {
        fnx: false,
        fxx: false,
        at: None,
        keep_ttl: false,
        pairs: &[],
    };
    let mut expiration = false;
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if super::opt(a, "fields") {
            if i + 3 >= args.len() {
                return Err(errors::wrong_args(name));
            }
            let n = crate::cmd::args::long_in_range(
                &args[i + 1],
                1,
                i64::from(i32::MAX),
                Some(errors::HSETEX_NUMFIELDS),
            )?;
            let rest = args.len() - i - 2;
            if !rest.is_multiple_of(2) || n as usize != rest / 2 {
                return Err(errors::wrong_args(name));
            }
            s.pairs = &args[i + 2..];
            return Ok(s);
        }
        let timed = [
            ("ex", Unit::Seconds, true),
            ("px", Unit::Millis, true),
            ("exat", Unit::Seconds, false),
            ("pxat", Unit::Millis, false),
        ]
        .into_iter()
        .find(|(n, _, _)| super::opt(a, n));
        if let Some((_, unit, relative)) = timed {
            if expiration {
                return Err(errors::err(errors::HSETEX_ONE_EXPIRATION));
            }
            if i + 1 >= args.len() {
                return Err(errors::err(errors::HSETEX_MISSING_EXPIRE));
            }
            expiration = true;
            i += 1;
            let base = if relative { now } else { 0 };
            s.at = Some(parse_deadline(&args[i], unit, base, name)?);
        } else if super::opt(a, "keepttl") {
            if expiration {
                return Err(errors::err(errors::HSETEX_ONE_EXPIRATION));
            }
            expiration = true;
            s.keep_ttl = true;
        } else if super::opt(a, "fxx") || super::opt(a, "fnx") {
            if s.fxx || s.fnx {
                return Err(errors::err(errors::HSETEX_ONE_CONDITION));
            }
            if super::opt(a, "fxx") {
                s.fxx = true;
            } else {
                s.fnx = true;
            }
        } else {
            let end = a.iter().position(|&b| b == 0).unwrap_or(a.len());
            let text: String = String::from_utf8_lossy(&a[..end])
                .chars()
                .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
                .collect();
            return Err(Reply::error(format!("ERR unknown argument: {text}")));
        }
        i += 1;
    }
    // Unreachable with HSETEX's arity (at most three option words fit before a FIELDS),
    // as in Redis; answered rather than assumed.
    Err(errors::wrong_args(name))
}

fn hsetex(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let name = cx.spec.name;
    let key = &args[1];
    let now = cx.ks.now;
    let s = match parse_hsetex(args, now, name) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let exists = match write(cx.ks, key) {
        Err(e) => return e,
        Ok(h) => h.is_some(),
    };
    if !exists && s.fxx {
        cx.changes(0);
        return Reply::Int(0);
    }
    let mut o = Outcome::new(cx);
    let fields = || s.pairs.iter().step_by(2).map(|f| &f[..]);
    let mut met = true;
    let mut expired = 0;
    if exists && (s.fnx || s.fxx) {
        // The condition looks at live fields: expired ones go first (no events yet, and
        // counted and journaled there).
        expired = expire_fields(cx, key, &mut fields(), true).0;
        if let Ok(Some(h)) = write(cx.ks, key) {
            met = if s.fnx {
                fields().all(|f| !h.contains(f))
            } else {
                fields().all(|f| h.contains(f))
            };
        }
    }
    let mut fields_set = false;
    if met {
        if !exists {
            cx.ks.set(key, Value::Hash(Box::default()), None);
            cx.notify(notify::NEW, "new", key);
        }
        let lim = super::limits(cx.srv);
        if let Ok(Some(h)) = write(cx.ks, key) {
            if h.is_listpack() {
                let (longest, total) = s
                    .pairs
                    .iter()
                    .fold((0, 0), |(m, t), a| (a.len().max(m), t + a.len()));
                h.prepare(s.pairs.len() / 2, longest, total, lim);
            }
            if s.at.is_some() {
                h.enable_ttls();
            }
            let keep = s.at.is_some() || s.keep_ttl;
            for p in s.pairs.chunks_exact(2) {
                let v = Bytes::copy_from_slice(&p[1]);
                if keep {
                    h.set_bytes_keep_ttl(&p[0], v, lim);
                } else {
                    h.set_bytes(&p[0], v, lim);
                }
                if let Some(at) = s.at {
                    let r = set_field_deadline(h, &p[0], at, Cond::None, now);
                    o.deadline_result(&p[0], at, r);
                }
            }
            fields_set = true;
            if let Some(j) = &mut o.journal {
                // The values written (a `HashPut` clears deadlines), then the deadlines
                // the fields keep (KEEPTTL) or were given.
                j.ttls.clear();
                for f in fields() {
                    if let Some(v) = h.get(f) {
                        j.puts
                            .push((Bytes::copy_from_slice(f), Bytes::copy_from_slice(v)));
                        if let Some(t) = h.ttl(f) {
                            j.ttls.push((Bytes::copy_from_slice(f), Some(t)));
                        }
                    }
                }
            }
        }
    }
    let (updated, deleted) = (o.updated, o.deleted);
    o.updated += usize::from(fields_set);
    let deleted_key = settle(cx, key, o) || delete_if_empty(cx, key);
    cx.changes(if fields_set {
        s.pairs.len() as u64 / 2
    } else {
        0
    });
    if let Some(ev) = cx.events() {
        if expired > 0 {
            ev.emit(notify::HASH, "hexpired", key);
        }
        if fields_set {
            ev.emit(notify::HASH, "hset", key);
            if deleted + updated > 0 {
                let e = if deleted > 0 { "hdel" } else { "hexpire" };
                ev.emit(notify::HASH, e, key);
            }
        }
        if deleted_key {
            ev.emit(notify::GENERIC, "del", key);
        }
    }
    Reply::Int(i64::from(met))
}

#[cfg(test)]
mod tests;
