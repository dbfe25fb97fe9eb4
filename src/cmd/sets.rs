//! Set commands (Redis 7.2 `t_set.c` semantics) over [`SetValue`]: SADD/SREM and the
//! membership queries, SPOP/SRANDMEMBER, SMOVE, the SINTER/SUNION/SDIFF families (with
//! their STORE variants and SINTERCARD) and SSCAN.

use super::args::{self, is_cstr};
use super::errors;
use super::table::numkeys_at;
use super::{CommandSpec, Cx, KeySpec};
use crate::config::ConfigStore;
use crate::engine::change::Change;
use crate::instance::notify;
use crate::protocol::Reply;
use crate::types::glob::glob_match;
use crate::types::set::{self, Limits, Member, SetValue};
use crate::types::value::{StrVal, Value};
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "sadd",
        arity: -3,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "set", "fast"],
        group: "set",
        since: "1.0.0",
        summary: "Add one or more members to a set",
        complexity: "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
        handler: sadd,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "srem",
        arity: -3,
        flags: &["write", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "set", "fast"],
        group: "set",
        since: "1.0.0",
        summary: "Remove one or more members from a set",
        complexity: "O(N) where N is the number of members to be removed.",
        handler: srem,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "smembers",
        arity: 2,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "set", "slow"],
        group: "set",
        since: "1.0.0",
        summary: "Get all the members in a set",
        complexity: "O(N) where N is the set cardinality.",
        handler: smembers,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sismember",
        arity: 3,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "set", "fast"],
        group: "set",
        since: "1.0.0",
        summary: "Determine if a given value is a member of a set",
        complexity: "O(1)",
        handler: sismember,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "smismember",
        arity: -3,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "set", "fast"],
        group: "set",
        since: "6.2.0",
        summary: "Returns the membership associated with the given elements for a set",
        complexity: "O(N) where N is the number of elements being checked for membership",
        handler: smismember,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "scard",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "set", "fast"],
        group: "set",
        since: "1.0.0",
        summary: "Get the number of members in a set",
        complexity: "O(1)",
        handler: scard,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "spop",
        arity: -2,
        flags: &["write", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "set", "fast"],
        group: "set",
        since: "1.0.0",
        summary: "Remove and return one or multiple random members from a set",
        complexity: "Without the count argument O(1), otherwise O(N) where N is the value of the passed count.",
        handler: spop,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "srandmember",
        arity: -2,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "set", "slow"],
        group: "set",
        since: "1.0.0",
        summary: "Get one or multiple random members from a set",
        complexity: "Without the count argument O(1), otherwise O(N) where N is the absolute value of the passed count.",
        handler: srandmember,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "smove",
        arity: 4,
        flags: &["write", "fast"],
        keys: KeySpec::Range(1, 2, 1),
        acl: &["write", "set", "fast"],
        group: "set",
        since: "1.0.0",
        summary: "Move a member from one set to another",
        complexity: "O(1)",
        handler: smove,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sinter",
        arity: -2,
        flags: &["readonly"],
        keys: KeySpec::Range(1, -1, 1),
        acl: &["read", "set", "slow"],
        group: "set",
        since: "1.0.0",
        summary: "Intersect multiple sets",
        complexity: "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.",
        handler: sinter,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sintercard",
        arity: -3,
        flags: &["readonly"],
        keys: KeySpec::Custom {
            first: 0,
            last: 0,
            step: 0,
            find: sintercard_keys,
        },
        acl: &["read", "set", "slow"],
        group: "set",
        since: "7.0.0",
        summary: "Intersect multiple sets and return the cardinality of the result",
        complexity: "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.",
        handler: sintercard,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sinterstore",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, -1, 1),
        acl: &["write", "set", "slow"],
        group: "set",
        since: "1.0.0",
        summary: "Intersect multiple sets and store the resulting set in a key",
        complexity: "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.",
        handler: sinterstore,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sunion",
        arity: -2,
        flags: &["readonly"],
        keys: KeySpec::Range(1, -1, 1),
        acl: &["read", "set", "slow"],
        group: "set",
        since: "1.0.0",
        summary: "Add multiple sets",
        complexity: "O(N) where N is the total number of elements in all given sets.",
        handler: sunion,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sunionstore",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, -1, 1),
        acl: &["write", "set", "slow"],
        group: "set",
        since: "1.0.0",
        summary: "Add multiple sets and store the resulting set in a key",
        complexity: "O(N) where N is the total number of elements in all given sets.",
        handler: sunionstore,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sdiff",
        arity: -2,
        flags: &["readonly"],
        keys: KeySpec::Range(1, -1, 1),
        acl: &["read", "set", "slow"],
        group: "set",
        since: "1.0.0",
        summary: "Subtract multiple sets",
        complexity: "O(N) where N is the total number of elements in all given sets.",
        handler: sdiff,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sdiffstore",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, -1, 1),
        acl: &["write", "set", "slow"],
        group: "set",
        since: "1.0.0",
        summary: "Subtract multiple sets and store the resulting set in a key",
        complexity: "O(N) where N is the total number of elements in all given sets.",
        handler: sdiffstore,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sscan",
        arity: -3,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "set", "slow"],
        group: "set",
        since: "2.8.0",
        summary: "Incrementally iterate Set elements",
        complexity: "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..",
        handler: sscan,
        ..CommandSpec::DEFAULT
    },
];

/// SINTERCARD's keys: `numkeys` of them after it; none (an invalid call, as COMMAND GETKEYS
/// reports) if there are fewer arguments than that.
fn sintercard_keys(args: &[Bytes]) -> Vec<usize> {
    let keys = numkeys_at(args, 1);
    let declared = args.get(1).and_then(|a| crate::num::parse_i64(a));
    if declared.is_some_and(|n| n as u64 > keys.len() as u64) {
        return Vec::new();
    }
    keys
}

// ---- helpers ----

/// The set thresholds from CONFIG, each read on first use (most SADDs need at most one).
struct ConfigLimits<'a> {
    cfg: &'a ConfigStore,
    cache: [Option<usize>; 3],
}

impl<'a> ConfigLimits<'a> {
    fn new(cfg: &'a ConfigStore) -> Self {
        ConfigLimits {
            cfg,
            cache: [None; 3],
        }
    }
}

/// A threshold as a size (negative values cannot be configured; read as 0).
fn size(n: i64) -> usize {
    usize::try_from(n).unwrap_or(0)
}

impl Limits for ConfigLimits<'_> {
    fn intset_entries(&mut self) -> usize {
        let cfg = self.cfg;
        *self.cache[0]
            .get_or_insert_with(|| size(crate::config_num!(cfg, "set-max-intset-entries")))
    }
    fn listpack_entries(&mut self) -> usize {
        let cfg = self.cfg;
        *self.cache[1]
            .get_or_insert_with(|| size(crate::config_num!(cfg, "set-max-listpack-entries")))
    }
    fn listpack_value(&mut self) -> usize {
        let cfg = self.cfg;
        *self.cache[2]
            .get_or_insert_with(|| size(crate::config_num!(cfg, "set-max-listpack-value")))
    }
}

/// Marks WATCHers of a key modified in place (Redis `signalModifiedKey`).
fn touched(cx: &mut Cx, key: &[u8]) {
    let db = cx.ks.db;
    cx.ks.signal_in(db, key);
}

/// Durable keyspace: records members added to (`SetAdd`) or removed from (`SetRem`) the
/// set at `key`, which stays non-empty (an emptied set is removed whole instead).
fn record(cx: &mut Cx, key: &[u8], added: bool, members: Vec<Bytes>) {
    if members.is_empty() {
        return;
    }
    let (db, key) = (cx.ks.db, Bytes::copy_from_slice(key));
    cx.ks.elems(if added {
        Change::SetAdd { db, key, members }
    } else {
        Change::SetRem { db, key, members }
    });
}

/// `members` copied out of the request, for [`record`] (empty unless journaling).
fn copies<'a>(journaling: bool, members: impl Iterator<Item = &'a Bytes>) -> Vec<Bytes> {
    if !journaling {
        return Vec::new();
    }
    members.map(|m| Bytes::copy_from_slice(m)).collect()
}

/// Read lookup (`lookupKeyRead`): `Ok(None)` if missing, WRONGTYPE for another type.
fn read_set<'c>(cx: &'c mut Cx, key: &[u8]) -> Result<Option<&'c SetValue>, Reply> {
    match cx.ks.get(key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::Set(s) => Ok(Some(s)),
            _ => Err(errors::wrongtype()),
        },
    }
}

/// Write lookup (`lookupKeyWrite`): `Ok(None)` if missing, WRONGTYPE for another type.
fn write_set<'c>(cx: &'c mut Cx, key: &[u8]) -> Result<Option<&'c mut SetValue>, Reply> {
    let db = cx.ks.db;
    match cx.ks.lookup_elems_in(db, key) {
        None => Ok(None),
        Some(e) => match &mut e.value {
            Value::Set(s) => Ok(Some(s)),
            _ => Err(errors::wrongtype()),
        },
    }
}

fn bulk(m: Member) -> Reply {
    Reply::Bulk(m.to_bytes())
}

fn set_reply<'a>(members: impl Iterator<Item = Member<'a>>) -> Reply {
    Reply::Set(members.map(bulk).collect())
}

/// Stands in for a set moved out of the keyspace while a multi-key command reads it.
const PLACEHOLDER: Value = Value::Str(StrVal::Int(0));

/// Runs `f` over the sets at `keys` (`None` for missing keys), looked up as Redis's
/// `lookupKeyRead` in key order; WRONGTYPE if any holds another type.
///
/// The engine hands out one entry at a time, so each distinct set is moved out of its entry
/// (O(1)) for the duration of `f` and put back afterwards; every key is locked by the
/// command, so nobody else can observe the placeholder. A key given twice is the same set
/// (Redis compares set pointers, e.g. SDIFF of a key with itself).
fn with_sets<R>(
    cx: &mut Cx,
    keys: &[Bytes],
    f: impl FnOnce(&[Option<&SetValue>], &mut ConfigLimits) -> R,
) -> Result<R, Reply> {
    let db = cx.ks.db;
    let mut taken: Vec<(usize, Box<SetValue>)> = Vec::new();
    let mut slots: Vec<Option<usize>> = Vec::with_capacity(keys.len());
    let mut failed = false;
    let firsts = first_occurrences(keys);
    for (j, key) in keys.iter().enumerate() {
        let earlier = firsts[j];
        let is_set = cx.ks.get(key).map(|e| matches!(e.value, Value::Set(_)));
        if let Some(p) = earlier {
            // Looked up again for the statistics, as Redis does; same set as before.
            slots.push(slots[p]);
            continue;
        }
        match is_set {
            None => slots.push(None),
            Some(false) => {
                failed = true;
                break;
            }
            Some(true) => {
                let taken_value = cx
                    .ks
                    .get_in(db, key)
                    .map(|e| std::mem::replace(&mut e.value, PLACEHOLDER));
                match taken_value {
                    Some(Value::Set(s)) => {
                        taken.push((j, s));
                        slots.push(Some(taken.len() - 1));
                    }
                    _ => slots.push(None),
                }
            }
        }
    }
    let out = if failed {
        None
    } else {
        let sets: Vec<Option<&SetValue>> = slots.iter().map(|s| s.map(|i| &*taken[i].1)).collect();
        let mut lim = ConfigLimits::new(&cx.srv.config);
        Some(f(&sets, &mut lim))
    };
    for (j, s) in taken {
        let back = cx.ks.get_in(db, &keys[j]);
        debug_assert!(back.is_some(), "taken set's key vanished");
        if let Some(e) = back {
            e.value = Value::Set(s);
        }
    }
    out.ok_or_else(errors::wrongtype)
}

/// For each key, the index of its first occurrence if an earlier argument repeats it.
fn first_occurrences(keys: &[Bytes]) -> Vec<Option<usize>> {
    if keys.len() <= 16 {
        return (0..keys.len())
            .map(|j| keys[..j].iter().position(|k| *k == keys[j]))
            .collect();
    }
    let mut seen: std::collections::HashMap<&[u8], usize> =
        std::collections::HashMap::with_capacity(keys.len());
    keys.iter()
        .enumerate()
        .map(|(j, k)| {
            let first = *seen.entry(&k[..]).or_insert(j);
            (first != j).then_some(first)
        })
        .collect()
}

/// Stores a command's result set at `dst` (replacing any value and deadline), or deletes
/// `dst` when the result is empty; replies with the result's size.
fn store(cx: &mut Cx, dst: &[u8], result: SetValue, event: &str) -> Reply {
    let n = result.len() as i64;
    if n == 0 {
        if cx.ks.remove(dst).is_some() {
            cx.notify(notify::GENERIC, "del", dst);
        } else {
            // Nothing stored and nothing deleted: no change for the dirty counter.
            cx.changes(0);
        }
    } else {
        let created = cx.ks.set(dst, Value::Set(Box::new(result)), None).is_none();
        if let Some(ev) = cx.events() {
            ev.created(created, dst);
            ev.emit(notify::SET, event, dst);
        }
    }
    Reply::Int(n)
}

/// A removal's `event`, then `del` if the set went with it.
fn emptied_events(cx: &Cx, key: &[u8], event: &str, emptied: bool) {
    if let Some(ev) = cx.events() {
        ev.emit(notify::SET, event, key);
        if emptied {
            ev.emit(notify::GENERIC, "del", key);
        }
    }
}

/// Largest reply SRANDMEMBER builds with a negative count (see `srandmember_count`).
const MAX_RANDOM_REPLY: u64 = 1 << 24;

// ---- SADD / SREM / membership ----

fn sadd(cx: &mut Cx) -> Reply {
    let (key, members) = (&cx.args[1], &cx.args[2..]);
    let db = cx.ks.db;
    let mut lim = ConfigLimits::new(&cx.srv.config);
    let journaling = cx.ks.journaling();
    let added = match cx.ks.lookup_elems_in(db, key) {
        Some(e) => {
            let Value::Set(s) = &mut e.value else {
                return errors::wrongtype();
            };
            s.maybe_convert(members.len(), &mut lim);
            let mut new = Vec::new();
            let mut added = 0;
            for m in members {
                if s.add(m, &mut lim) {
                    added += 1;
                    if journaling {
                        new.push(Bytes::copy_from_slice(m));
                    }
                }
            }
            if added > 0 {
                touched(cx, key);
                record(cx, key, true, new);
            }
            added
        }
        None => {
            let mut s = SetValue::create(&members[0], members.len(), &mut lim);
            let added = members.iter().filter(|m| s.add(m, &mut lim)).count();
            cx.ks.set(key, Value::Set(Box::new(s)), None);
            cx.notify(notify::NEW, "new", key);
            added
        }
    };
    if added > 0 {
        cx.notify(notify::SET, "sadd", key);
    }
    cx.changes(added as u64);
    Reply::Int(added as i64)
}

fn srem(cx: &mut Cx) -> Reply {
    let (key, members) = (&cx.args[1], &cx.args[2..]);
    let journaling = cx.ks.journaling();
    let mut gone = Vec::new();
    let (removed, emptied) = match write_set(cx, key) {
        Err(e) => return e,
        Ok(None) => {
            cx.changes(0);
            return Reply::Int(0);
        }
        Ok(Some(s)) => {
            let mut removed = 0;
            for m in members {
                if s.remove(m) {
                    removed += 1;
                    if journaling {
                        gone.push(Bytes::copy_from_slice(m));
                    }
                    if s.is_empty() {
                        break;
                    }
                }
            }
            (removed, s.is_empty())
        }
    };
    if emptied {
        cx.ks.remove(key);
    } else if removed > 0 {
        touched(cx, key);
        record(cx, key, false, gone);
    }
    if removed > 0 {
        emptied_events(cx, key, "srem", emptied);
    }
    cx.changes(removed as u64);
    Reply::Int(removed)
}

fn sismember(cx: &mut Cx) -> Reply {
    let args = cx.args;
    match read_set(cx, &args[1]) {
        Err(e) => e,
        Ok(s) => Reply::Int(s.is_some_and(|s| s.contains(&args[2])) as i64),
    }
}

fn smismember(cx: &mut Cx) -> Reply {
    let members = &cx.args[2..];
    match read_set(cx, &cx.args[1]) {
        Err(e) => e,
        Ok(s) => Reply::Array(
            members
                .iter()
                .map(|m| Reply::Int(s.is_some_and(|s| s.contains(m)) as i64))
                .collect(),
        ),
    }
}

fn scard(cx: &mut Cx) -> Reply {
    match read_set(cx, &cx.args[1]) {
        Err(e) => e,
        Ok(s) => Reply::Int(s.map_or(0, |s| s.len() as i64)),
    }
}

// ---- SPOP / SRANDMEMBER ----

fn spop(cx: &mut Cx) -> Reply {
    match cx.args.len() {
        2 => {}
        3 => return spop_count(cx),
        _ => return errors::syntax(),
    }
    let key = &cx.args[1];
    let srv = cx.srv;
    let (member, emptied) = match write_set(cx, key) {
        Err(e) => return e,
        Ok(None) => {
            cx.changes(0);
            return Reply::Nil;
        }
        Ok(Some(s)) => (s.pop_random(&mut *srv.rng.lock()), s.is_empty()),
    };
    if emptied {
        cx.ks.remove(key);
    } else {
        touched(cx, key);
        if cx.ks.journaling() {
            record(cx, key, false, vec![member.clone()]);
        }
    }
    emptied_events(cx, key, "spop", emptied);
    Reply::Bulk(member)
}

fn spop_count(cx: &mut Cx) -> Reply {
    let key = &cx.args[1];
    let count = match args::int(&cx.args[2]) {
        Ok(n) if n >= 0 => n as u64,
        _ => return errors::err(errors::OUT_OF_RANGE_POSITIVE),
    };
    let mut lim = ConfigLimits::new(&cx.srv.config);
    let db = cx.ks.db;
    let s = match cx.ks.lookup_elems_in(db, key) {
        None => {
            cx.changes(0);
            return Reply::Set(Vec::new());
        }
        Some(e) => match &mut e.value {
            Value::Set(s) => s,
            _ => return errors::wrongtype(),
        },
    };
    if count == 0 {
        cx.changes(0);
        return Reply::Set(Vec::new());
    }
    // Redis counts one change per member popped.
    let popped_n = count.min(s.len() as u64);
    if count >= s.len() as u64 {
        // The whole set, replied as Redis does: through a union of the one set.
        let all = set::union(&[Some(&*s)], &mut lim);
        cx.changes(popped_n);
        let reply = set_reply(all.iter());
        cx.ks.remove(key);
        emptied_events(cx, key, "spop", true);
        return reply;
    }
    let popped = s.pop_many(count as usize, &mut lim, &mut *cx.srv.rng.lock());
    cx.changes(popped_n);
    touched(cx, key);
    if cx.ks.journaling() {
        record(cx, key, false, popped.clone());
    }
    emptied_events(cx, key, "spop", false);
    Reply::Set(popped.into_iter().map(Reply::Bulk).collect())
}

fn srandmember(cx: &mut Cx) -> Reply {
    match cx.args.len() {
        2 => {}
        3 => return srandmember_count(cx),
        _ => return errors::syntax(),
    }
    let srv = cx.srv;
    match read_set(cx, &cx.args[1]) {
        Err(e) => e,
        Ok(None) => Reply::Nil,
        Ok(Some(s)) => bulk(s.random(&mut *srv.rng.lock())),
    }
}

fn srandmember_count(cx: &mut Cx) -> Reply {
    let (count, unique) = match args::int(&cx.args[2]) {
        Err(e) => return e,
        Ok(i64::MIN) => return errors::err(errors::COUNT_RANGE),
        Ok(n) => (n.unsigned_abs(), n >= 0),
    };
    let srv = cx.srv;
    let s = match read_set(cx, &cx.args[1]) {
        Err(e) => return e,
        Ok(None) => return Reply::Array(Vec::new()),
        Ok(Some(s)) => s,
    };
    let mut guard = srv.rng.lock();
    let rng = &mut *guard;
    let len = s.len() as u64;
    if count == 0 {
        Reply::Array(Vec::new())
    } else if !unique || count == 1 {
        // With repetition, in random order. Redis streams such a reply however long it is;
        // one built in memory must have a bound.
        let limit = super::refusals::reply_limit(srv);
        if count > MAX_RANDOM_REPLY && limit == usize::MAX {
            return errors::err(errors::RANDOM_COUNT_TOO_LARGE);
        }
        let mut bytes = 0usize;
        let mut out = Vec::with_capacity(count.min(1 << 16) as usize);
        for _ in 0..count {
            let m = s.random(rng);
            bytes += m.with_text(|t| t.len()) + 5;
            out.push(bulk(m));
            // Over the output limit: the client is closed unsent, as Redis stops the loop.
            if bytes > limit {
                break;
            }
        }
        Reply::Array(out)
    } else if count >= len {
        Reply::Array(s.iter().map(bulk).collect())
    } else {
        Reply::Array(
            s.sample(count as usize, rng)
                .into_iter()
                .map(bulk)
                .collect(),
        )
    }
}

// ---- SMOVE ----

/// What a write lookup found: nothing, a set, or another type.
#[derive(Clone, Copy, PartialEq)]
enum Found {
    Missing,
    Set,
    Other,
}

fn probe(cx: &mut Cx, key: &[u8]) -> Found {
    match write_set(cx, key) {
        Ok(None) => Found::Missing,
        Ok(Some(_)) => Found::Set,
        Err(_) => Found::Other,
    }
}

fn smove(cx: &mut Cx) -> Reply {
    let (src, dst, member) = (&cx.args[1], &cx.args[2], &cx.args[3]);
    let (from, to) = (probe(cx, src), probe(cx, dst));
    match (from, to) {
        (Found::Missing, _) => {
            cx.changes(0);
            return Reply::Int(0);
        }
        (Found::Other, _) | (_, Found::Other) => return errors::wrongtype(),
        _ => {}
    }
    if src == dst {
        cx.changes(0);
        return match read_set_quiet(cx, src) {
            Some(s) => Reply::Int(s.contains(member) as i64),
            None => Reply::Int(0),
        };
    }
    // `probe` made the access (Redis's one `lookupKeyWrite`): no second one here.
    let db = cx.ks.db;
    let (removed, emptied) = match cx.ks.get_in(db, src).map(|e| &mut e.value) {
        Some(Value::Set(s)) => (s.remove(member), s.is_empty()),
        _ => (false, false),
    };
    if !removed {
        cx.changes(0);
        return Reply::Int(0);
    }
    if emptied {
        cx.ks.remove(src);
    } else {
        touched(cx, src);
        let moved = copies(cx.ks.journaling(), std::iter::once(member));
        record(cx, src, false, moved);
    }
    emptied_events(cx, src, "srem", emptied);
    let mut lim = ConfigLimits::new(&cx.srv.config);
    // One change for the removal, one more if the member was new in the destination.
    if to == Found::Missing {
        cx.changes(2);
        let mut s = SetValue::create(member, 1, &mut lim);
        s.add(member, &mut lim);
        cx.ks.set(dst, Value::Set(Box::new(s)), None);
        if let Some(ev) = cx.events() {
            ev.emit(notify::NEW, "new", dst);
            ev.emit(notify::SET, "sadd", dst);
        }
    } else {
        let db = cx.ks.db;
        let added = match cx.ks.get_in(db, dst).map(|e| &mut e.value) {
            Some(Value::Set(s)) => s.add(member, &mut lim),
            _ => false,
        };
        if added {
            cx.changes(2);
            touched(cx, dst);
            let moved = copies(cx.ks.journaling(), std::iter::once(member));
            record(cx, dst, true, moved);
            cx.notify(notify::SET, "sadd", dst);
        }
    }
    Reply::Int(1)
}

/// A set looked up with no side effects (the key was just looked up for writing).
fn read_set_quiet<'c>(cx: &'c mut Cx, key: &[u8]) -> Option<&'c SetValue> {
    let db = cx.ks.db;
    match cx.ks.get_in(db, key).map(|e| &e.value) {
        Some(Value::Set(s)) => Some(s),
        _ => None,
    }
}

// ---- SINTER / SUNION / SDIFF families ----

fn smembers(cx: &mut Cx) -> Reply {
    match read_set(cx, &cx.args[1]) {
        Err(e) => e,
        Ok(None) => Reply::Set(Vec::new()),
        Ok(Some(s)) => set_reply(s.iter()),
    }
}

/// The present sets, or `None` if any key is missing (an empty intersection).
fn all_present<'s>(sets: &[Option<&'s SetValue>]) -> Option<Vec<&'s SetValue>> {
    sets.iter().copied().collect()
}

fn sinter(cx: &mut Cx) -> Reply {
    let keys = &cx.args[1..];
    if keys.len() == 1 {
        return smembers(cx);
    }
    let res = with_sets(cx, keys, |sets, _| {
        let mut out = Vec::new();
        if let Some(sets) = all_present(sets) {
            set::intersect(&sets, |m| {
                out.push(bulk(m));
                true
            });
        }
        out
    });
    match res {
        Ok(v) => Reply::Set(v),
        Err(e) => e,
    }
}

fn sintercard(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let numkeys = match args::int(&args[1]) {
        Ok(n) if n >= 1 => n as u64,
        _ => return errors::err(errors::NUMKEYS_POSITIVE),
    };
    if numkeys > (args.len() - 2) as u64 {
        return errors::err(errors::NUMKEYS_TOO_MANY);
    }
    let end = 2 + numkeys as usize;
    let mut limit = 0u64;
    let mut j = end;
    while j < args.len() {
        if is_cstr(&args[j], "LIMIT") && j + 1 < args.len() {
            limit = match args::int(&args[j + 1]) {
                Ok(n) if n >= 0 => n as u64,
                _ => return errors::err(errors::LIMIT_NEGATIVE),
            };
            j += 2;
        } else {
            return errors::syntax();
        }
    }
    let res = with_sets(cx, &args[2..end], |sets, _| {
        let mut n = 0u64;
        if let Some(sets) = all_present(sets) {
            set::intersect(&sets, |_| {
                n += 1;
                limit == 0 || n < limit
            });
        }
        n
    });
    match res {
        Ok(n) => Reply::Int(n as i64),
        Err(e) => e,
    }
}

fn sinterstore(cx: &mut Cx) -> Reply {
    let res = with_sets(cx, &cx.args[2..], |sets, lim| match all_present(sets) {
        Some(sets) => set::intersect_store(&sets, lim),
        None => SetValue::new_intset(),
    });
    match res {
        Ok(result) => store(cx, &cx.args[1], result, "sinterstore"),
        Err(e) => e,
    }
}

fn sunion(cx: &mut Cx) -> Reply {
    match with_sets(cx, &cx.args[1..], |sets, lim| {
        set_reply(set::union(sets, lim).iter())
    }) {
        Ok(r) | Err(r) => r,
    }
}

fn sunionstore(cx: &mut Cx) -> Reply {
    match with_sets(cx, &cx.args[2..], |sets, lim| set::union(sets, lim)) {
        Ok(result) => store(cx, &cx.args[1], result, "sunionstore"),
        Err(e) => e,
    }
}

/// Whether the first key is repeated later (Redis: the same set object, so SDIFF is empty).
fn first_repeated(keys: &[Bytes]) -> bool {
    keys[1..].iter().any(|k| *k == keys[0])
}

fn sdiff(cx: &mut Cx) -> Reply {
    let keys = &cx.args[1..];
    let same = first_repeated(keys);
    match with_sets(cx, keys, |sets, lim| {
        set_reply(set::difference(sets, same, lim).iter())
    }) {
        Ok(r) | Err(r) => r,
    }
}

fn sdiffstore(cx: &mut Cx) -> Reply {
    let keys = &cx.args[2..];
    let same = first_repeated(keys);
    match with_sets(cx, keys, |sets, lim| set::difference(sets, same, lim)) {
        Ok(result) => store(cx, &cx.args[1], result, "sdiffstore"),
        Err(e) => e,
    }
}

// ---- SSCAN ----

fn sscan(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let cursor = match args::scan_cursor(&args[2]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let s = match read_set(cx, &args[1]) {
        Err(e) => return e,
        Ok(None) => return scan_reply(0, Vec::new()),
        Ok(Some(s)) => s,
    };
    let mut count = 10usize;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 3;
    while i < args.len() {
        let has_value = i + 1 < args.len();
        if is_cstr(&args[i], "COUNT") && has_value {
            count = match args::int(&args[i + 1]) {
                Ok(n) if n >= 1 => usize::try_from(n).unwrap_or(usize::MAX),
                Ok(_) => return errors::syntax(),
                Err(e) => return e,
            };
        } else if is_cstr(&args[i], "MATCH") && has_value {
            // Exactly "*" matches everything: the same as no pattern.
            pattern = Some(&args[i + 1][..]).filter(|p| *p != b"*");
        } else if is_cstr(&args[i], "NOVALUES") {
            return errors::err(errors::NOVALUES_HSCAN_ONLY);
        } else {
            return errors::syntax();
        }
        i += 2;
    }
    let mut found = Vec::new();
    let next = s.scan(cursor, count, &mut found);
    if let Some(p) = pattern {
        found.retain(|m| glob_match(p, m, false));
    }
    scan_reply(next, found)
}

fn scan_reply(cursor: u64, members: Vec<Bytes>) -> Reply {
    Reply::Array(vec![
        Reply::bulk_str(itoa::Buffer::new().format(cursor)),
        Reply::strings(members),
    ])
}

#[cfg(test)]
mod tests {
    use crate::instance::session::Session;
    use crate::protocol::Reply;
    use crate::TestServer;
    use bytes::Bytes;
    use std::collections::HashSet;

    struct Client<'a> {
        srv: &'a TestServer,
        sess: Session,
    }

    impl<'a> Client<'a> {
        fn new(srv: &'a TestServer) -> Client<'a> {
            let addr = "127.0.0.1:1".parse().expect("addr");
            let handle = srv.shared().clients.register(addr, addr, 0);
            Client {
                srv,
                sess: Session::new(handle, true),
            }
        }

        fn run(&mut self, line: &[&str]) -> Reply {
            let args = line
                .iter()
                .map(|a| Bytes::copy_from_slice(a.as_bytes()))
                .collect();
            crate::cmd::dispatch(&self.srv.shared(), &mut self.sess, args)
        }

        fn int(&mut self, line: &[&str]) -> i64 {
            match self.run(line) {
                Reply::Int(n) => n,
                other => panic!("{line:?}: {other:?}"),
            }
        }

        fn status(&mut self, line: &[&str]) -> String {
            match self.run(line) {
                Reply::Status(s) => s.into_owned(),
                Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
                other => panic!("{line:?}: {other:?}"),
            }
        }

        fn members(&mut self, line: &[&str]) -> HashSet<Bytes> {
            match self.run(line) {
                Reply::Set(v) | Reply::Array(v) => v
                    .into_iter()
                    .map(|r| match r {
                        Reply::Bulk(b) => b,
                        other => panic!("{other:?}"),
                    })
                    .collect(),
                other => panic!("{line:?}: {other:?}"),
            }
        }

        /// One SSCAN call: (next cursor, members).
        fn sscan(&mut self, key: &str, cursor: u64, count: usize) -> (u64, Vec<Bytes>) {
            let (c, n) = (cursor.to_string(), count.to_string());
            match self.run(&["SSCAN", key, &c, "COUNT", &n]) {
                Reply::Array(mut v) if v.len() == 2 => {
                    let items = match v.pop() {
                        Some(Reply::Array(items)) => items,
                        other => panic!("{other:?}"),
                    };
                    let next = match v.pop() {
                        Some(Reply::Bulk(b)) => {
                            String::from_utf8_lossy(&b).parse().expect("cursor")
                        }
                        other => panic!("{other:?}"),
                    };
                    let items = items
                        .into_iter()
                        .map(|r| match r {
                            Reply::Bulk(b) => b,
                            other => panic!("{other:?}"),
                        })
                        .collect();
                    (next, items)
                }
                other => panic!("{other:?}"),
            }
        }
    }

    fn strs(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
        range.map(|i| format!("{prefix}{i}")).collect()
    }

    fn with(cmd: &[&str], members: &[String]) -> Vec<String> {
        cmd.iter()
            .map(|s| s.to_string())
            .chain(members.iter().cloned())
            .collect()
    }

    fn refs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }

    #[test]
    fn sscan_covers_stable_members_under_churn() {
        let srv = TestServer::start().expect("server");
        let mut c = Client::new(&srv);
        let stable = strs("stable:", 0..500);
        c.int(&refs(&with(&["SADD", "s"], &stable)));
        c.int(&refs(&with(&["SADD", "s"], &strs("churn:", 0..3000))));
        assert_eq!(c.status(&["OBJECT", "ENCODING", "s"]), "hashtable");
        let (mut cursor, mut step, mut seen) = (0, 0usize, HashSet::new());
        loop {
            let (next, items) = c.sscan("s", cursor, 15);
            seen.extend(items);
            cursor = next;
            if cursor == 0 {
                break;
            }
            step += 1;
            assert!(step < 100_000, "SSCAN does not terminate");
            // First shrink the table by removing churn, then grow it with new members.
            if step < 150 {
                let gone = strs("churn:", step * 20..step * 20 + 20);
                c.int(&refs(&with(&["SREM", "s"], &gone)));
            } else {
                let new = strs(&format!("new:{step}:"), 0..30);
                c.int(&refs(&with(&["SADD", "s"], &new)));
            }
        }
        for m in &stable {
            assert!(seen.contains(m.as_bytes()), "missed {m}");
        }
    }

    #[test]
    fn small_sets_scan_in_one_call() {
        let srv = TestServer::start().expect("server");
        let mut c = Client::new(&srv);
        c.int(&["SADD", "i", "3", "1", "2"]);
        assert_eq!(
            c.sscan("i", 0, 1),
            (0, vec!["1".into(), "2".into(), "3".into()])
        );
        c.int(&["SADD", "l", "b", "a"]);
        assert_eq!(c.status(&["OBJECT", "ENCODING", "l"]), "listpack");
        assert_eq!(c.sscan("l", 77, 1), (0, vec!["b".into(), "a".into()]));
    }

    #[test]
    fn failed_multi_key_reads_leave_sets_intact() {
        let srv = TestServer::start().expect("server");
        let mut c = Client::new(&srv);
        c.int(&["SADD", "a", "1", "2"]);
        c.int(&["SADD", "b", "x"]);
        c.status(&["SET", "str", "v"]);
        for cmd in ["SINTER", "SUNION", "SDIFF"] {
            assert!(c.run(&[cmd, "a", "b", "str", "a"]).is_error());
        }
        assert!(c.run(&["SUNIONSTORE", "a", "b", "str"]).is_error());
        assert_eq!(c.members(&["SMEMBERS", "a"]).len(), 2);
        assert_eq!(c.members(&["SMEMBERS", "b"]).len(), 1);
        assert_eq!(c.int(&["SUNIONSTORE", "d", "a", "b", "a"]), 3);
        assert_eq!(c.int(&["SDIFFSTORE", "e", "a", "b", "b"]), 2);
        assert_eq!(c.int(&["SINTERCARD", "3", "a", "a", "a"]), 2);
        assert_eq!(c.status(&["TYPE", "a"]), "set");
    }

    #[test]
    fn many_keys_with_repeats() {
        let srv = TestServer::start().expect("server");
        let mut c = Client::new(&srv);
        for i in 0..20 {
            c.int(&["SADD", &format!("k{i}"), &i.to_string(), "common"]);
        }
        let keys: Vec<String> = (0..60).map(|i| format!("k{}", i % 25)).collect();
        assert_eq!(c.members(&refs(&with(&["SUNION"], &keys))).len(), 21);
        assert_eq!(c.members(&refs(&with(&["SINTER"], &keys))).len(), 0);
        let mut first_again = keys.clone();
        first_again.push("k0".into());
        assert_eq!(c.int(&refs(&with(&["SDIFFSTORE", "d"], &first_again))), 0);
        let present: Vec<String> = (0..40).map(|i| format!("k{}", i % 20)).collect();
        assert_eq!(c.members(&refs(&with(&["SINTER"], &present))).len(), 1);
        assert_eq!(c.int(&["SCARD", "k19"]), 2);
    }

    #[test]
    fn expired_sets_are_missing() {
        let srv = TestServer::builder()
            .manual_clock()
            .start()
            .expect("server");
        let mut c = Client::new(&srv);
        c.int(&["SADD", "a", "1", "2"]);
        c.int(&["SADD", "b", "2", "3"]);
        c.int(&["PEXPIRE", "a", "10"]);
        srv.clock().advance_ms(11);
        assert_eq!(c.int(&["SUNIONSTORE", "d", "a", "b"]), 2);
        assert_eq!(c.int(&["SINTERCARD", "2", "a", "b"]), 0);
        assert_eq!(c.int(&["SMOVE", "a", "b", "1"]), 0);
        assert_eq!(c.int(&["EXISTS", "a"]), 0);
    }

    #[test]
    fn thresholds_follow_config() {
        let srv = TestServer::start().expect("server");
        let mut c = Client::new(&srv);
        c.status(&["CONFIG", "SET", "set-max-intset-entries", "3"]);
        c.int(&["SADD", "i", "1", "2", "3"]);
        assert_eq!(c.status(&["OBJECT", "ENCODING", "i"]), "intset");
        c.int(&["SADD", "i", "4"]);
        assert_eq!(c.status(&["OBJECT", "ENCODING", "i"]), "hashtable");
        c.status(&["CONFIG", "SET", "set-max-listpack-entries", "2"]);
        c.status(&["CONFIG", "SET", "set-max-listpack-value", "3"]);
        c.int(&["SADD", "l", "a", "b"]);
        assert_eq!(c.status(&["OBJECT", "ENCODING", "l"]), "listpack");
        c.int(&["SADD", "l", "c"]);
        assert_eq!(c.status(&["OBJECT", "ENCODING", "l"]), "hashtable");
        c.int(&["SADD", "v", "abc"]);
        c.int(&["SADD", "v", "abcd"]);
        assert_eq!(c.status(&["OBJECT", "ENCODING", "v"]), "hashtable");
        // 7.2: the number of members given decides up front.
        c.int(&["SADD", "h", "x"]);
        c.int(&["SADD", "h", "x", "x", "x"]);
        assert_eq!(c.status(&["OBJECT", "ENCODING", "h"]), "hashtable");
        // Small non-integer results of set algebra are listpacks (7.2).
        c.status(&["CONFIG", "SET", "set-max-listpack-entries", "128"]);
        c.int(&["SADD", "a", "x", "y", "1"]);
        c.int(&["SADD", "b", "y", "1"]);
        c.int(&["SUNIONSTORE", "u", "a", "b"]);
        assert_eq!(c.status(&["OBJECT", "ENCODING", "u"]), "listpack");
        c.int(&["SINTERSTORE", "n", "a", "b"]);
        assert_eq!(c.status(&["OBJECT", "ENCODING", "n"]), "listpack");
        c.int(&["SINTERSTORE", "n", "a", "i"]);
        assert_eq!(c.status(&["OBJECT", "ENCODING", "n"]), "intset");
    }

    #[test]
    fn random_counts() {
        let srv = TestServer::start().expect("server");
        let mut c = Client::new(&srv);
        c.int(&["SADD", "s", "a", "b", "c", "d"]);
        match c.run(&["SRANDMEMBER", "s", "-1000"]) {
            Reply::Array(v) => assert_eq!(v.len(), 1000),
            other => panic!("{other:?}"),
        }
        assert!(c
            .run(&["SRANDMEMBER", "s", "-9223372036854775807"])
            .is_error());
        assert_eq!(c.members(&["SRANDMEMBER", "s", "3"]).len(), 3);
        assert_eq!(c.members(&["SPOP", "s", "3"]).len(), 3);
        assert_eq!(c.int(&["SCARD", "s"]), 1);
    }

    #[test]
    fn concurrent_smoves_are_atomic() {
        let srv = TestServer::start().expect("server");
        let members = strs("m", 0..200);
        {
            let mut c = Client::new(&srv);
            c.int(&refs(&with(&["SADD", "left"], &members)));
        }
        std::thread::scope(|scope| {
            for t in 0..4 {
                let (srv, members) = (&srv, &members);
                scope.spawn(move || {
                    let mut c = Client::new(srv);
                    for i in 0..2000 {
                        let m = &members[(i * 7 + t * 13) % members.len()];
                        let (from, to) = if (i + t) % 2 == 0 {
                            ("left", "right")
                        } else {
                            ("right", "left")
                        };
                        c.int(&["SMOVE", from, to, m]);
                    }
                });
            }
        });
        let mut c = Client::new(&srv);
        let left = c.members(&["SMEMBERS", "left"]);
        let right = c.members(&["SMEMBERS", "right"]);
        assert_eq!(left.len() + right.len(), members.len());
        assert!(left.is_disjoint(&right));
    }
}
