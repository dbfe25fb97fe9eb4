//! SORT and SORT_RO exactly as Redis 7's sort.c: lists, sets and sorted sets, numeric by
//! default (C `strtod` on every weight), ALPHA, ASC/DESC, LIMIT with Redis's clamping, BY
//! (`nosort` and any pattern without `*` keep the native order), GET (`#`, `*->field`),
//! STORE into a list.
//!
//! Locking: BY and GET patterns read keys that no key spec can declare, so both commands
//! run with `Lock::All`. The table's lock is static; `reads_pattern_keys` tells which calls
//! really need it, for a dispatcher that can pick the lock per call.

use super::args::is_cstr;
use super::errors;
use super::{CommandSpec, Cx, KeySpec, Lock};
use crate::instance::notify;
use crate::protocol::Reply;
use crate::types::list::{End, List};
use crate::types::value::{StrVal, Value};
use bytes::Bytes;
use std::cmp::Ordering;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "sort",
        arity: -2,
        flags: &["write", "denyoom"],
        keys: KeySpec::Custom {
            first: 1,
            last: 1,
            step: 1,
            find: sort_keys,
        },
        acl: &["write", "set", "sortedset", "list", "slow", "dangerous"],
        group: "generic",
        since: "1.0.0",
        summary: "Sort the elements in a list, set or sorted set",
        complexity: "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).",
        handler: sort,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sort_ro",
        arity: -2,
        flags: &["readonly"],
        keys: KeySpec::Custom {
            first: 1,
            last: 1,
            step: 1,
            find: sort_ro_keys,
        },
        acl: &["read", "set", "sortedset", "list", "slow", "dangerous"],
        group: "generic",
        since: "7.0.0",
        summary: "Sort the elements in a list, set or sorted set. Read-only variant of SORT.",
        complexity: "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).",
        handler: sort_ro,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
];

/// Redis `sortGetKeys`: the sorted key plus the last `STORE` destination. Like Redis, a
/// `STORE` word is checked only where the option scan stands, and the scan does not step
/// over the destination (so `STORE store` names the second `store` as the key).
fn sort_keys(args: &[Bytes]) -> Vec<usize> {
    if args.len() < 2 {
        return Vec::new();
    }
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let a = &args[i][..];
        if is_cstr(a, "limit") {
            i += 2;
        } else if is_cstr(a, "get") || is_cstr(a, "by") {
            i += 1;
        } else if is_cstr(a, "store") && i + 1 < args.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    let mut keys = vec![1];
    keys.extend(store);
    keys
}

/// Redis `sortROGetKeys`: only the sorted key.
fn sort_ro_keys(args: &[Bytes]) -> Vec<usize> {
    if args.len() < 2 {
        return Vec::new();
    }
    vec![1]
}

/// Whether a SORT/SORT_RO call reads keys beyond its key spec: a BY pattern with a `*`, or a
/// GET pattern other than `#` with a `*`. Only those need the whole keyspace; with a lock
/// chosen per call (not supported by the table yet) every other call could take
/// `Lock::Keys`. Bad option lists say true: the handler reports the error either way.
pub fn reads_pattern_keys(args: &[Bytes]) -> bool {
    let mut j = 2;
    while j < args.len() {
        let a = &args[j][..];
        let next = args.get(j + 1).map(|p| cstr(p));
        if is_cstr(a, "limit") {
            j += 3;
            continue;
        }
        if is_cstr(a, "by") || is_cstr(a, "get") || is_cstr(a, "store") {
            let Some(p) = next else { return true };
            if !is_cstr(a, "store") && p != b"#" && p.contains(&b'*') {
                return true;
            }
            j += 2;
            continue;
        }
        j += 1;
    }
    false
}

fn sort(cx: &mut Cx) -> Reply {
    sort_generic(cx, false)
}

fn sort_ro(cx: &mut Cx) -> Reply {
    sort_generic(cx, true)
}

/// The parsed options.
struct Opts<'a> {
    desc: bool,
    alpha: bool,
    limit: (i64, i64),
    by: Option<&'a [u8]>,
    /// BY names a constant (no `*`): nothing to sort.
    dontsort: bool,
    gets: Vec<&'a [u8]>,
    store: Option<&'a [u8]>,
}

/// `full_read`: the user may read every key (Redis refuses BY and GET patterns otherwise).
fn parse_opts(args: &[Bytes], readonly: bool, full_read: bool) -> Result<Opts<'_>, Reply> {
    let mut o = Opts {
        desc: false,
        alpha: false,
        limit: (0, -1),
        by: None,
        dontsort: false,
        gets: Vec::new(),
        store: None,
    };
    let mut j = 2;
    while j < args.len() {
        let a = &args[j][..];
        let left = args.len() - j - 1;
        if is_cstr(a, "asc") {
            o.desc = false;
        } else if is_cstr(a, "desc") {
            o.desc = true;
        } else if is_cstr(a, "alpha") {
            o.alpha = true;
        } else if is_cstr(a, "limit") && left >= 2 {
            let start = super::args::int(&args[j + 1])?;
            let count = super::args::int(&args[j + 2])?;
            o.limit = (start, count);
            j += 2;
        } else if !readonly && is_cstr(a, "store") && left >= 1 {
            o.store = Some(&args[j + 1][..]);
            j += 1;
        } else if is_cstr(a, "by") && left >= 1 {
            let p = &args[j + 1][..];
            o.by = Some(p);
            // Never reset: `BY nosort BY w_*` still does not sort (as sort.c).
            if !cstr(p).contains(&b'*') {
                o.dontsort = true;
            } else if !full_read {
                return Err(errors::err(
                    "ERR BY option of SORT denied due to insufficient ACL permissions.",
                ));
            }
            j += 1;
        } else if is_cstr(a, "get") && left >= 1 {
            if !full_read {
                return Err(errors::err(
                    "ERR GET option of SORT denied due to insufficient ACL permissions.",
                ));
            }
            o.gets.push(&args[j + 1][..]);
            j += 1;
        } else {
            return Err(errors::syntax());
        }
        j += 1;
    }
    Ok(o)
}

/// The bytes C string functions see: up to the first NUL.
fn cstr(b: &[u8]) -> &[u8] {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    &b[..end]
}

/// Redis's LIMIT normalisation for `len` elements: the inclusive output range as
/// `(start, end)`, empty when `end < start`.
fn limit_range(len: i64, limit_start: i64, limit_count: i64) -> (i64, i64) {
    let mut start = limit_start.max(0).min(len);
    let count = limit_count.max(-1).min(len);
    let mut end = if count < 0 {
        len - 1
    } else {
        start + count - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    (start, end)
}

/// How a pattern names the key (and hash field) to read for one element.
enum Lookup {
    /// `#`: the element itself.
    Itself,
    /// No `*`: nothing is read.
    Nothing,
    Key(Vec<u8>, Option<Vec<u8>>),
}

/// Redis `lookupKeyByPattern`'s name building, with its C-string searches: the first `*`
/// is replaced by the element, and `->field` after it (with at least one byte, before any
/// NUL) selects a hash field.
fn pattern_key(pattern: &[u8], elem: &[u8]) -> Lookup {
    let c = cstr(pattern);
    if c == b"#" {
        return Lookup::Itself;
    }
    let Some(star) = c.iter().position(|&b| b == b'*') else {
        return Lookup::Nothing;
    };
    let arrow = c[star + 1..]
        .windows(2)
        .position(|w| w == b"->")
        .map(|p| star + 1 + p)
        .filter(|&p| p + 2 < c.len());
    let tail_end = arrow.unwrap_or(pattern.len());
    let mut key = Vec::with_capacity(pattern.len() + elem.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(elem);
    key.extend_from_slice(&pattern[star + 1..tail_end]);
    let field = arrow.map(|p| pattern[p + 2..].to_vec());
    Lookup::Key(key, field)
}

/// A looked-up value: string values keep their integer encoding (Redis casts those to a
/// double without parsing).
enum Found {
    Int(i64),
    Bytes(Bytes),
}

impl Found {
    fn bytes(self) -> Bytes {
        match self {
            Found::Int(i) => Bytes::copy_from_slice(itoa::Buffer::new().format(i).as_bytes()),
            Found::Bytes(b) => b,
        }
    }
}

/// The value a pattern names for `elem`: a string key, or a field of a hash key; `None`
/// when missing or of another type.
fn lookup(cx: &mut Cx, pattern: &[u8], elem: &Bytes) -> Option<Found> {
    let (key, field) = match pattern_key(pattern, elem) {
        Lookup::Itself => return Some(Found::Bytes(elem.clone())),
        Lookup::Nothing => return None,
        Lookup::Key(k, f) => (k, f),
    };
    let now = cx.ks.now;
    let entry = cx.ks.get(&key)?;
    // A hash field past its deadline is removed on the way, as Redis 7.4's lookup does.
    let expired =
        matches!((&entry.value, &field), (Value::Hash(h), Some(f)) if h.is_field_expired(f, now));
    if expired {
        let f = field.unwrap_or_default();
        super::hashes::expire::expire_lazily(cx, &key, &[&f[..]]);
        return None;
    }
    match (&entry.value, field) {
        (Value::Hash(h), Some(f)) => h.get(&f).map(|v| Found::Bytes(Bytes::copy_from_slice(v))),
        (Value::Str(StrVal::Int(i)), None) => Some(Found::Int(*i)),
        (Value::Str(StrVal::Bytes { data, .. }), None) => {
            Some(Found::Bytes(Bytes::copy_from_slice(data)))
        }
        _ => None,
    }
}

/// The numeric weight of a value as sort.c computes it: integers cast, text through
/// `strtod`, which must consume everything up to the end or a NUL byte, without
/// overflow/underflow, and give a number (not NaN).
fn weight(v: &Found) -> Option<f64> {
    match v {
        Found::Int(i) => Some(*i as f64),
        Found::Bytes(b) => {
            let c = cstr(b);
            let r = super::strtod::strtod(c);
            (r.used == c.len() && !r.range_err && !r.value.is_nan()).then_some(r.value)
        }
    }
}

/// `strcoll` in the C locale (what redis-server runs with unless LC_COLLATE says
/// otherwise): byte order up to the first NUL.
fn coll(a: &[u8], b: &[u8]) -> Ordering {
    cstr(a).cmp(cstr(b))
}

struct Item {
    elem: Bytes,
    score: f64,
    cmp: Option<Bytes>,
}

/// The elements to sort, as Redis loads them (WRONGTYPE for other types), and the output
/// range within them. For lists and sorted sets under `dontsort` only the LIMIT window is
/// loaded, in the requested direction; the returned range is then relative to it.
fn load(cx: &mut Cx, key: &[u8], o: &Opts) -> Result<(Vec<Bytes>, (i64, i64)), Reply> {
    let (db, dontsort) = (cx.ks.db, o.dontsort);
    let (len, is_zset) = match cx.ks.get(key).map(|e| &e.value) {
        None => return Ok((Vec::new(), limit_range(0, o.limit.0, o.limit.1))),
        Some(Value::List(l)) => (l.len(), false),
        Some(Value::Set(s)) => (s.len(), false),
        Some(Value::ZSet(z)) => (z.len(), true),
        Some(_) => return Err(errors::wrongtype()),
    };
    if is_zset {
        // Redis converts a listpack sorted set to a skiplist for SORT (OBJECT ENCODING
        // shows it); not a logical change, so no WATCH signal and nothing to journal.
        if let Some(e) = cx.ks.lookup_elems_in(db, key) {
            if let Value::ZSet(z) = &mut e.value {
                if !z.is_skiplist() {
                    z.convert_to_skiplist();
                }
            }
        }
    }
    let (start, end) = limit_range(len as i64, o.limit.0, o.limit.1);
    let Some(entry) = cx.ks.peek(key) else {
        return Ok((Vec::new(), (start, end)));
    };
    let window = (end - start + 1).max(0) as usize;
    let skip = start.max(0) as usize;
    let out = match &entry.value {
        Value::List(l) if dontsort => {
            let v = if o.desc {
                l.iter().rev().skip(skip).take(window).cloned().collect()
            } else {
                l.iter().skip(skip).take(window).cloned().collect()
            };
            return Ok((v, (0, end - start)));
        }
        Value::ZSet(z) if dontsort => {
            let v = if o.desc {
                let n = z.len();
                let from = n.saturating_sub(skip);
                z.iter_rev_from(from.saturating_sub(1))
                    .take(window)
                    .map(|i| i.member.clone())
                    .collect()
            } else {
                z.iter_from(skip)
                    .take(window)
                    .map(|i| i.member.clone())
                    .collect()
            };
            return Ok((v, (0, end - start)));
        }
        Value::List(l) => l.iter().cloned().collect(),
        Value::Set(s) => s.iter().map(|m| m.to_bytes()).collect(),
        Value::ZSet(z) => z.iter().map(|i| i.member.clone()).collect(),
        _ => return Err(errors::wrongtype()),
    };
    Ok((out, (start, end)))
}

fn sort_generic(cx: &mut Cx, readonly: bool) -> Reply {
    let args = cx.args;
    let full_read = super::acl::full_key_read(&cx.sess.user, cx.spec, args);
    let mut o = match parse_opts(args, readonly, full_read) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let key = &args[1][..];
    // Sets have no native order: under `dontsort` Redis still sorts them (ALPHA, no BY)
    // when the result is stored or a script asked, so replicas and scripts see one order.
    if o.dontsort && (o.store.is_some() || in_script(cx)) {
        if let Some(Value::Set(_)) = cx.ks.peek(key).map(|e| &e.value) {
            o.dontsort = false;
            o.alpha = true;
            o.by = None;
        }
    }
    let (elems, (start, end)) = match load(cx, key, &o) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let mut items: Vec<Item> = elems
        .into_iter()
        .map(|elem| Item {
            elem,
            score: 0.0,
            cmp: None,
        })
        .collect();
    let mut conversion_error = false;
    if !o.dontsort {
        for it in items.iter_mut() {
            let val = match o.by {
                Some(p) => match lookup(cx, p, &it.elem) {
                    Some(v) => v,
                    None => continue,
                },
                None => Found::Bytes(it.elem.clone()),
            };
            if o.alpha {
                if o.by.is_some() {
                    it.cmp = Some(val.bytes());
                }
            } else {
                match weight(&val) {
                    Some(w) => it.score = w,
                    None => conversion_error = true,
                }
            }
        }
        let (alpha, by, store, desc) = (o.alpha, o.by.is_some(), o.store.is_some(), o.desc);
        let cmp = |a: &Item, b: &Item| {
            let c = compare(a, b, alpha, by, store);
            if desc {
                c.reverse()
            } else {
                c
            }
        };
        if by && (start != 0 || end != items.len() as i64 - 1) {
            // Redis's partial quicksort; an empty window is never read.
            if end >= start {
                crate::types::pqsort::pqsort(&mut items, start as usize, end as usize, &cmp);
            }
        } else {
            // A stable sort, as glibc's qsort (a merge sort) is: ties keep the loaded order.
            items.sort_by(cmp);
        }
    }
    if conversion_error {
        return errors::err(errors::SORT_NOT_DOUBLE);
    }
    let range: &[Item] = if end >= start {
        &items[start as usize..=end as usize]
    } else {
        &[]
    };
    match o.store {
        None => {
            let mut out = Vec::with_capacity(range.len() * o.gets.len().max(1));
            for it in range {
                if o.gets.is_empty() {
                    out.push(Reply::Bulk(it.elem.clone()));
                }
                for p in &o.gets {
                    out.push(match lookup(cx, p, &it.elem) {
                        Some(v) => Reply::Bulk(v.bytes()),
                        None => Reply::Nil,
                    });
                }
            }
            Reply::Array(out)
        }
        Some(dst) => {
            let mut vals = Vec::with_capacity(range.len() * o.gets.len().max(1));
            for it in range {
                if o.gets.is_empty() {
                    vals.push(it.elem.clone());
                }
                for p in &o.gets {
                    vals.push(lookup(cx, p, &it.elem).map_or_else(Bytes::new, Found::bytes));
                }
            }
            store(cx, dst, vals)
        }
    }
}

/// sort.c `sortCompare` (before DESC is applied).
fn compare(a: &Item, b: &Item, alpha: bool, by: bool, store: bool) -> Ordering {
    if !alpha {
        return match a.score.partial_cmp(&b.score) {
            Some(Ordering::Equal) | None => a.elem.cmp(&b.elem),
            Some(c) => c,
        };
    }
    let (x, y) = if by {
        match (&a.cmp, &b.cmp) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => (x, y),
        }
    } else {
        (&a.elem, &b.elem)
    };
    // With STORE Redis compares binary-safely; otherwise with strcoll.
    if store {
        x.cmp(y)
    } else {
        coll(x, y)
    }
}

/// STORE: the result replaces `dst` (any type, its TTL dropped) as a list, or deletes it
/// when empty; replies with the number of stored elements.
fn store(cx: &mut Cx, dst: &[u8], vals: Vec<Bytes>) -> Reply {
    let n = vals.len() as i64;
    if vals.is_empty() {
        if cx.ks.remove(dst).is_some() {
            cx.notify(notify::GENERIC, "del", dst);
        }
        return Reply::Int(0);
    }
    let total: usize = vals.iter().map(|v| v.len()).sum();
    let srv = cx.srv;
    let mut l = List::new();
    l.before_add(total, vals.len(), || {
        crate::config_num!(srv.config, "list-max-listpack-size") as i32
    });
    for v in vals {
        l.push(v, End::Tail);
    }
    let created = cx.ks.set(dst, Value::List(Box::new(l)), None).is_none();
    if let Some(ev) = cx.events() {
        ev.created(created, dst);
        ev.emit(notify::LIST, "sortstore", dst);
    }
    Reply::Int(n)
}

/// Whether this command runs inside a script (Redis's `CLIENT_SCRIPT`). SORT holds the
/// whole keyspace, so a script running on this server right now can only be our caller.
fn in_script(cx: &Cx) -> bool {
    cx.ks.is_exclusive()
        && cx.sess.in_exec
        && crate::script::engine::scripts(cx.srv)
            .running_for_ms()
            .is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(v: &[&str]) -> Vec<Bytes> {
        v.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    #[test]
    fn limit_clamping() {
        assert_eq!(limit_range(5, 0, -1), (0, 4));
        assert_eq!(limit_range(5, 1, 2), (1, 2));
        assert_eq!(limit_range(5, -3, 2), (0, 1));
        assert_eq!(limit_range(5, 3, 100), (3, 4));
        assert_eq!(limit_range(5, 5, 1), (4, 3));
        assert_eq!(limit_range(5, 2, 0), (2, 1));
        assert_eq!(limit_range(0, 0, -1), (-1, -2));
        assert_eq!(limit_range(5, i64::MAX, i64::MAX), (4, 3));
        assert_eq!(limit_range(5, i64::MIN, i64::MIN), (0, 4));
    }

    #[test]
    fn patterns() {
        let k = |p: &str, e: &str| match pattern_key(p.as_bytes(), e.as_bytes()) {
            Lookup::Itself => "#".to_string(),
            Lookup::Nothing => "-".to_string(),
            Lookup::Key(k, f) => format!(
                "{}|{}",
                String::from_utf8_lossy(&k),
                f.map(|f| String::from_utf8_lossy(&f).into_owned())
                    .unwrap_or_default()
            ),
        };
        assert_eq!(k("#", "a"), "#");
        assert_eq!(k("nosort", "a"), "-");
        assert_eq!(k("w_*", "a"), "w_a|");
        assert_eq!(k("w_*_x", "a"), "w_a_x|");
        assert_eq!(k("h_*->f", "a"), "h_a|f");
        assert_eq!(k("h_*->", "a"), "h_a->|");
        assert_eq!(k("h->f*", "a"), "h->fa|");
        assert_eq!(k("*->a->b", "x"), "x|a->b");
        assert_eq!(k("a\0*", "x"), "-");
        assert_eq!(k("#\0x", "x"), "#");
    }

    #[test]
    fn store_keys() {
        assert_eq!(sort_keys(&b(&["sort", "k"])), vec![1]);
        assert_eq!(sort_keys(&b(&["sort", "k", "store", "d"])), vec![1, 3]);
        assert_eq!(
            sort_keys(&b(&["sort", "k", "store", "d", "store", "e"])),
            vec![1, 5]
        );
        assert_eq!(sort_keys(&b(&["sort", "k", "get", "store", "x"])), vec![1]);
        assert_eq!(sort_keys(&b(&["sort", "k", "store", "store"])), vec![1, 3]);
        assert_eq!(sort_ro_keys(&b(&["sort_ro", "k", "store", "d"])), vec![1]);
    }

    #[test]
    fn pattern_reads() {
        assert!(!reads_pattern_keys(&b(&["sort", "k"])));
        assert!(!reads_pattern_keys(&b(&[
            "sort", "k", "by", "nosort", "get", "#"
        ])));
        assert!(!reads_pattern_keys(&b(&[
            "sort", "k", "get", "const", "store", "d*"
        ])));
        assert!(!reads_pattern_keys(&b(&[
            "sort", "k", "limit", "0", "1", "alpha"
        ])));
        assert!(reads_pattern_keys(&b(&["sort", "k", "by", "w_*"])));
        assert!(reads_pattern_keys(&b(&[
            "sort", "k", "desc", "get", "o_*->f"
        ])));
        assert!(reads_pattern_keys(&b(&["sort", "k", "get"])));
    }

    #[test]
    fn weights() {
        let w = |s: &[u8]| weight(&Found::Bytes(Bytes::copy_from_slice(s)));
        assert_eq!(w(b"1.5"), Some(1.5));
        assert_eq!(w(b""), Some(0.0));
        assert_eq!(w(b" 2"), Some(2.0));
        assert_eq!(w(b"3\0junk"), Some(3.0));
        assert_eq!(w(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(w(b"0x10"), Some(16.0));
        assert_eq!(w(b"2 "), None);
        assert_eq!(w(b"nan"), None);
        assert_eq!(w(b"1e999"), None);
        assert_eq!(w(b"abc"), None);
    }
}
