//! Whole values to and from DUMP payloads (`rdbSaveObject` / `rdbLoadObject`).
//!
//! Saving picks the RDB type from the value's encoding as Redis 7.0 does (so 7.0+ servers
//! can restore what we dump). Loading accepts every type a Redis ≤ 7.2 DUMP can hold and
//! gives the value the encoding Redis would give it after loading (its conversions on the
//! configured thresholds), so `OBJECT ENCODING` agrees.

use super::listpack::{self, Entry};
use super::{
    intset, types as t, ziplist, zipmap, Bad, PayloadError, Reader, Writer, FIELD_DEADLINE_MAX,
};
use crate::types::hash::{self, HashValue};
use crate::types::list::List;
use crate::types::set::{self, Member, SetValue};
use crate::types::value::{StrVal, Value};
use crate::types::zset::ZSet;
use bytes::Bytes;

/// Why RESTORE refused a payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreError {
    /// `-ERR DUMP payload version or checksum are wrong`
    VersionOrChecksum,
    /// `-ERR Bad data format`
    Bad,
}

impl From<Bad> for RestoreError {
    fn from(_: Bad) -> Self {
        RestoreError::Bad
    }
}

/// The encoding thresholds in force (from CONFIG) when a value is loaded.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub hash: hash::Limits,
    pub set: set::Fixed,
    pub zset_entries: usize,
    pub zset_value: usize,
    /// `list-max-listpack-size`.
    pub list_fill: i32,
}

impl Default for Limits {
    /// Redis's defaults.
    fn default() -> Self {
        Limits {
            hash: hash::Limits::DEFAULT,
            set: set::Fixed::DEFAULT,
            zset_entries: 128,
            zset_value: 64,
            list_fill: -2,
        }
    }
}

/// The DUMP payload of a value.
pub fn dump(v: &Value) -> Vec<u8> {
    let mut w = Writer::new();
    let ty = save(v, &mut w);
    super::payload(ty, &w.buf)
}

/// Writes a value's body; returns its RDB type.
fn save(v: &Value, w: &mut Writer) -> u8 {
    match v {
        Value::Str(StrVal::Int(i)) => {
            w.int_string(*i);
            t::STRING
        }
        Value::Str(StrVal::Bytes { data, .. }) => {
            w.string(data);
            t::STRING
        }
        Value::List(l) => {
            // One RDB node per quicklist node, each a listpack of its elements.
            let counts = l.node_counts();
            w.len(counts.len() as u64);
            let mut it = l.iter();
            for c in counts {
                let mut b = listpack::Builder::new();
                for e in it.by_ref().take(c) {
                    b.push_bytes(e);
                }
                w.len(QUICKLIST_PACKED);
                w.string(&b.finish());
            }
            t::LIST_QUICKLIST_2
        }
        Value::Set(s) if s.is_intset() => {
            let ints: Vec<i64> = s
                .iter()
                .filter_map(|m| match m {
                    Member::Int(i) => Some(i),
                    Member::Str(_) => None,
                })
                .collect();
            w.string(&intset::encode(&ints));
            t::SET_INTSET
        }
        Value::Set(s) => {
            w.len(s.len() as u64);
            for m in s.iter() {
                m.with_text(|b| w.string(b));
            }
            t::SET
        }
        // Redis 7.4's `listpackex`: the earliest deadline (0 for none), then a listpack of
        // field, value, deadline (0 for none) triples in the hash's order.
        Value::Hash(h) if h.is_listpack_ex() => {
            w.millis(h.min_ttl().unwrap_or(0));
            let mut b = listpack::Builder::new();
            for (f, v) in h.iter() {
                b.push_bytes(f);
                b.push_bytes(v);
                b.push_int(h.ttl(f).map_or(0, |t| t as i64));
            }
            w.string(&b.finish());
            t::HASH_LISTPACK_EX
        }
        Value::Hash(h) if h.is_listpack() => {
            let mut b = listpack::Builder::new();
            for (f, v) in h.iter() {
                b.push_bytes(f);
                b.push_bytes(v);
            }
            w.string(&b.finish());
            t::HASH_LISTPACK
        }
        // A hashtable with a field deadline: the earliest deadline, then each field's
        // deadline relative to it (+1; 0 for none) before the field and its value.
        Value::Hash(h) if h.has_ttls() => {
            let min = h.min_ttl().unwrap_or(0);
            w.millis(min);
            w.len(h.len() as u64);
            for (f, v) in h.iter() {
                w.len(h.ttl(f).map_or(0, |t| t - min + 1));
                w.string(f);
                w.string(v);
            }
            t::HASH_METADATA
        }
        Value::Hash(h) => {
            w.len(h.len() as u64);
            for (f, v) in h.iter() {
                w.string(f);
                w.string(v);
            }
            t::HASH
        }
        Value::ZSet(z) if !z.is_skiplist() => {
            let mut b = listpack::Builder::new();
            for it in z.iter() {
                b.push_bytes(&it.member);
                b.push_bytes(score_text(it.score).as_bytes());
            }
            w.string(&b.finish());
            t::ZSET_LISTPACK
        }
        Value::ZSet(z) => {
            // Redis walks the skiplist from the tail: highest score first.
            w.len(z.len() as u64);
            if !z.is_empty() {
                for it in z.iter_rev_from(z.len() - 1) {
                    w.string(&it.member);
                    w.binary_double(it.score);
                }
            }
            t::ZSET_2
        }
        Value::Stream(s) => {
            super::stream::save(s, w);
            t::STREAM_LISTPACKS_2
        }
    }
}

/// `QUICKLIST_NODE_CONTAINER_PLAIN` / `_PACKED`.
const QUICKLIST_PLAIN: u64 = 1;
const QUICKLIST_PACKED: u64 = 2;

/// How a listpack zset stores a score: Redis 7.2's `d2string` text (integral values within
/// ±2^62 as integers), which `push_bytes` then stores as an integer when it is one, as
/// `lpAppend` does.
fn score_text(s: f64) -> String {
    crate::num::dtoa::d2string(s)
}

/// A listpack zset's score element (`zzlGetScore`: integers, or text `strtod` reads).
fn entry_score(e: &Entry) -> Result<f64, Bad> {
    let s = match e {
        Entry::Int(i) => *i as f64,
        Entry::Str(b) => {
            let text = std::str::from_utf8(b).map_err(|_| Bad)?;
            text.trim().parse::<f64>().map_err(|_| Bad)?
        }
    };
    if s.is_nan() {
        return Err(Bad);
    }
    Ok(s)
}

/// Checks a payload and loads the value it holds.
pub fn restore(payload: &[u8], lim: &Limits) -> Result<Value, RestoreError> {
    let (ty, _) = super::verify(payload).map_err(|e| match e {
        PayloadError::VersionOrChecksum => RestoreError::VersionOrChecksum,
        PayloadError::Bad => RestoreError::Bad,
    })?;
    // Redis reads the object from the whole payload buffer, footer included (a string
    // whose length runs into the version and CRC bytes loads), and ignores what is left.
    Ok(load(ty, &mut Reader::new(&payload[1..]), lim)?)
}

fn load(ty: u8, r: &mut Reader, lim: &Limits) -> Result<Value, Bad> {
    let v = match ty {
        t::STRING => Value::Str(StrVal::from_set(Bytes::from(r.string()?))),
        t::LIST => {
            let n = r.count(1)?;
            let mut elems = Vec::with_capacity(n);
            for _ in 0..n {
                elems.push(Bytes::from(r.string()?));
            }
            Value::List(Box::new(List::from_pushes(elems, lim.list_fill)))
        }
        t::LIST_QUICKLIST | t::LIST_QUICKLIST_2 => {
            let n = r.count(1)?;
            let mut groups = Vec::with_capacity(n);
            for _ in 0..n {
                let container = if ty == t::LIST_QUICKLIST_2 {
                    r.len()?
                } else {
                    QUICKLIST_PACKED
                };
                let blob = r.string()?;
                if blob.is_empty() {
                    return Err(Bad);
                }
                let group: Vec<Bytes> = match container {
                    QUICKLIST_PLAIN => vec![Bytes::from(blob)],
                    QUICKLIST_PACKED if ty == t::LIST_QUICKLIST => {
                        entries_to_bytes(&ziplist::parse(&blob)?)
                    }
                    QUICKLIST_PACKED => entries_to_bytes(&listpack::parse(&blob)?),
                    _ => return Err(Bad),
                };
                groups.push(group);
            }
            Value::List(Box::new(List::from_nodes(groups, lim.list_fill)))
        }
        t::LIST_ZIPLIST => {
            let blob = r.string()?;
            // Redis pushes a ziplist list's elements one by one into a fresh quicklist.
            let elems = entries_to_bytes(&ziplist::parse(&blob)?);
            Value::List(Box::new(List::from_pushes(elems, lim.list_fill)))
        }
        t::SET => {
            let n = r.count(1)?;
            let mut l = lim.set;
            let mut s = SetValue::new_intset();
            if n > l.intset_entries {
                s.maybe_convert(n, &mut l);
            }
            for _ in 0..n {
                if !s.add(&r.string()?, &mut l) {
                    return Err(Bad); // duplicate member
                }
            }
            Value::Set(Box::new(s))
        }
        t::SET_INTSET => {
            let ints = intset::decode(&r.string()?)?;
            let mut l = lim.set;
            let mut s = SetValue::new_intset();
            for i in ints {
                s.add_member(Member::Int(i), &mut l);
            }
            Value::Set(Box::new(s))
        }
        t::SET_LISTPACK => {
            let blob = r.string()?;
            let mut l = lim.set;
            let mut s = SetValue::new_listpack();
            for e in listpack::parse(&blob)? {
                if !s.add(&e.to_bytes(), &mut l) {
                    return Err(Bad);
                }
            }
            Value::Set(Box::new(s))
        }
        t::HASH => {
            let n = r.count(2)?;
            let mut h = HashValue::new();
            h.prepare(n, 0, 0, lim.hash);
            for _ in 0..n {
                let f = r.string()?;
                let v = r.string()?;
                if !h.set_bytes(&f, Bytes::from(v), lim.hash) {
                    return Err(Bad); // duplicate field
                }
            }
            Value::Hash(Box::new(h))
        }
        t::HASH_LISTPACK | t::HASH_ZIPLIST => {
            let blob = r.string()?;
            let entries = if ty == t::HASH_LISTPACK {
                listpack::parse(&blob)?
            } else {
                ziplist::parse(&blob)?
            };
            if entries.len() % 2 != 0 {
                return Err(Bad);
            }
            let pairs: Vec<(Vec<u8>, Vec<u8>)> = entries
                .chunks_exact(2)
                .map(|p| (p[0].to_bytes(), p[1].to_bytes()))
                .collect();
            // Duplicates are checked with a set: a listpack search per field would be
            // quadratic on a hostile payload.
            let mut seen = std::collections::HashSet::with_capacity(pairs.len());
            for (f, _) in &pairs {
                if !seen.insert(&f[..]) {
                    return Err(Bad);
                }
            }
            let mut h = HashValue::new();
            // Redis converts a loaded listpack hash on its entry count only.
            if pairs.len() > lim.hash.max_entries {
                // Converted up front (an over-long argument converts, one way).
                h.prepare(
                    0,
                    usize::MAX,
                    0,
                    hash::Limits {
                        max_value: 0,
                        ..lim.hash
                    },
                );
            }
            let unlimited = hash::Limits {
                max_entries: usize::MAX,
                max_value: usize::MAX,
            };
            for (f, v) in pairs {
                h.set_bytes(&f, Bytes::from(v), unlimited);
            }
            Value::Hash(Box::new(h))
        }
        t::HASH_METADATA | t::HASH_METADATA_PRE_GA => {
            // The release candidates' form has no minimum and absolute deadlines.
            let min = if ty == t::HASH_METADATA {
                let m = r.millis()?;
                if m > FIELD_DEADLINE_MAX + 1 {
                    return Err(Bad);
                }
                m
            } else {
                0
            };
            let n = r.count(3)?;
            let mut h = HashValue::new();
            h.enable_ttls();
            h.prepare(n, 0, 0, lim.hash);
            for _ in 0..n {
                let ttl = r.len()?;
                let at = match (ty, ttl) {
                    (_, 0) => 0,
                    (t::HASH_METADATA, d) => d.checked_add(min).ok_or(Bad)? - 1,
                    (_, d) => d,
                };
                if at > FIELD_DEADLINE_MAX {
                    return Err(Bad);
                }
                let f = r.string()?;
                let v = r.string()?;
                if !h.set_bytes(&f, Bytes::from(v), lim.hash) {
                    return Err(Bad); // duplicate field
                }
                if at != 0 {
                    h.set_ttl(&f, Some(at));
                }
            }
            Value::Hash(Box::new(h))
        }
        t::HASH_LISTPACK_EX | t::HASH_LISTPACK_EX_PRE_GA => {
            if ty == t::HASH_LISTPACK_EX {
                // The earliest deadline: kept by Redis for later use, read and ignored.
                r.millis()?;
            }
            let blob = r.string()?;
            let entries = listpack::parse(&blob)?;
            if entries.len() % 3 != 0 {
                return Err(Bad);
            }
            let mut seen = std::collections::HashSet::with_capacity(entries.len() / 3);
            let mut triples = Vec::with_capacity(entries.len() / 3);
            for e in entries.chunks_exact(3) {
                let f = e[0].to_bytes();
                let at = match e[2].as_int() {
                    Some(t) if (0..=FIELD_DEADLINE_MAX as i64).contains(&t) => t as u64,
                    _ => return Err(Bad),
                };
                triples.push((f, e[1].to_bytes(), at));
            }
            for (f, _, _) in &triples {
                if !seen.insert(&f[..]) {
                    return Err(Bad);
                }
            }
            let mut h = HashValue::new();
            h.enable_ttls();
            // Converted on the entry count only, as a plain listpack.
            if triples.len() > lim.hash.max_entries {
                h.prepare(
                    0,
                    usize::MAX,
                    0,
                    hash::Limits {
                        max_value: 0,
                        ..lim.hash
                    },
                );
            }
            let unlimited = hash::Limits {
                max_entries: usize::MAX,
                max_value: usize::MAX,
            };
            for (f, v, _) in &triples {
                h.set_bytes(f, Bytes::copy_from_slice(v), unlimited);
            }
            // Deadlines given last to first: each goes before the fields due at the same
            // time or later, so the listpack keeps the payload's order (Redis loads the
            // listpack as it is), ties included.
            for (f, _, at) in triples.iter().rev() {
                if *at != 0 {
                    h.set_ttl(f, Some(*at));
                }
            }
            Value::Hash(Box::new(h))
        }
        t::HASH_ZIPMAP => {
            let blob = r.string()?;
            let pairs = zipmap::parse(&blob)?;
            let mut seen = std::collections::HashSet::with_capacity(pairs.len());
            let mut longest = 0;
            for (f, v) in &pairs {
                if !seen.insert(*f) {
                    return Err(Bad);
                }
                longest = longest.max(f.len()).max(v.len());
            }
            let mut h = HashValue::new();
            // Unlike the listpack types, zipmaps also convert on their longest element.
            if pairs.len() > lim.hash.max_entries || longest > lim.hash.max_value {
                h.prepare(
                    0,
                    usize::MAX,
                    0,
                    hash::Limits {
                        max_value: 0,
                        ..lim.hash
                    },
                );
            }
            let unlimited = hash::Limits {
                max_entries: usize::MAX,
                max_value: usize::MAX,
            };
            for (f, v) in pairs {
                h.set(f, v, unlimited);
            }
            Value::Hash(Box::new(h))
        }
        t::ZSET | t::ZSET_2 => {
            let n = r.count(2)?;
            let mut z = ZSet::new(true);
            let mut longest = 0;
            for _ in 0..n {
                let m = r.string()?;
                let score = if ty == t::ZSET_2 {
                    r.binary_double()?
                } else {
                    r.text_double()?
                };
                if score.is_nan() || z.score(&m).is_some() {
                    return Err(Bad);
                }
                longest = longest.max(m.len());
                z.insert(Bytes::from(m), score);
            }
            // Converted after loading, as sorted sets are not stored ordered.
            if z.len() <= lim.zset_entries && longest <= lim.zset_value {
                z.convert_to_listpack();
            }
            Value::ZSet(Box::new(z))
        }
        t::ZSET_LISTPACK | t::ZSET_ZIPLIST => {
            let blob = r.string()?;
            let entries = if ty == t::ZSET_LISTPACK {
                listpack::parse(&blob)?
            } else {
                ziplist::parse(&blob)?
            };
            if entries.len() % 2 != 0 {
                return Err(Bad);
            }
            let mut z = ZSet::new(false);
            for pair in entries.chunks_exact(2) {
                let m = pair[0].to_bytes();
                let score = entry_score(&pair[1])?;
                if z.score(&m).is_some() {
                    return Err(Bad);
                }
                z.insert(Bytes::from(m), score);
            }
            // Redis converts a loaded listpack zset on its entry count only.
            if z.len() > lim.zset_entries {
                z.convert_to_skiplist();
            }
            Value::ZSet(Box::new(z))
        }
        t::STREAM_LISTPACKS | t::STREAM_LISTPACKS_2 | t::STREAM_LISTPACKS_3 => {
            // An empty stream is a valid value (unlike empty collections).
            return Ok(Value::Stream(Box::new(super::stream::load(r, ty)?)));
        }
        _ => return Err(Bad),
    };
    if is_empty(&v) {
        return Err(Bad); // Redis refuses empty collections (`emptykey`)
    }
    Ok(v)
}

fn entries_to_bytes(entries: &[Entry]) -> Vec<Bytes> {
    entries.iter().map(|e| Bytes::from(e.to_bytes())).collect()
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Str(_) | Value::Stream(_) => false,
        Value::List(l) => l.is_empty(),
        Value::Hash(h) => h.is_empty(),
        Value::Set(s) => s.is_empty(),
        Value::ZSet(z) => z.is_empty(),
    }
}

#[cfg(test)]
mod tests;
