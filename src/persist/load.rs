//! Recovery: rebuilding the keyspace from the file.
//!
//! Encodings are re-derived from the size limits given, as Redis does when it loads an RDB
//! file; hashes and sets keep their insertion order, lists their order, zsets sort by score.

use super::layout::{self as l, tag, xsub, ELEMS, KEYS};
use super::store::{read_list_header, Store};
use super::{corrupt, PersistError};
use crate::types::hash::{self, HashValue};
use crate::types::list::{End, List};
use crate::types::set::{self, SetValue};
use crate::types::stream::{Consumer, Group, Nack, NewId, NodeLimits, ParsedId, Stream, StreamId};
use crate::types::value::{StrVal, Value};
use crate::types::zset::ZSet;
use bytes::Bytes;
use redb::{ReadableDatabase, ReadableTable, TableError};
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, PersistError>;

/// What loading needs from the configuration.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Keys whose deadline is before this (Unix ms) are dropped.
    pub now_ms: u64,
    pub hash: hash::Limits,
    pub set: set::Fixed,
    /// `zset-max-listpack-entries` / `zset-max-listpack-value`.
    pub zset_max_entries: usize,
    pub zset_max_value: usize,
    /// `list-max-listpack-size`.
    pub list_fill: i32,
    pub stream: NodeLimits,
}

impl LoadOptions {
    /// Redis's default limits.
    pub fn new(now_ms: u64) -> LoadOptions {
        LoadOptions {
            now_ms,
            hash: hash::Limits::DEFAULT,
            set: set::Fixed::DEFAULT,
            zset_max_entries: 128,
            zset_max_value: 64,
            list_fill: -2,
            stream: NodeLimits::default(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadStats {
    /// Keys handed to the sink.
    pub keys: u64,
    /// Keys dropped because their deadline had passed (also deleted from the file).
    pub expired: u64,
    /// Collections with no element (never written by a correct caller), skipped.
    pub empty: u64,
    /// Element rows read.
    pub elements: u64,
    pub elapsed: Duration,
}

type Elems = Vec<(Vec<u8>, Vec<u8>)>;

impl Store {
    /// Rebuilds every live key and hands it to `sink(db, key, value, expire_at)`.
    pub fn load(
        &self,
        opts: &LoadOptions,
        mut sink: impl FnMut(usize, Bytes, Value, Option<u64>),
    ) -> Result<LoadStats> {
        let start = Instant::now();
        let mut stats = LoadStats::default();
        let db_of = self.db_of_ns();
        let mut expired: Vec<(u32, Vec<u8>)> = Vec::new();
        {
            let r = self.database().begin_read()?;
            let keys = match r.open_table(KEYS) {
                Ok(t) => t,
                Err(TableError::TableDoesNotExist(_)) => return Ok(stats),
                Err(e) => return Err(e.into()),
            };
            let elems = r.open_table(ELEMS)?;
            for row in keys.iter()? {
                let (k, v) = row?;
                let (ns, key) = k.value();
                let (t, at, hdr) =
                    l::split_key_row(v.value()).ok_or_else(|| corrupt("short key row"))?;
                let Some(db) = db_of(ns) else {
                    continue;
                };
                if at.is_some_and(|at| at < opts.now_ms) {
                    stats.expired += 1;
                    expired.push((ns, key.to_vec()));
                    continue;
                }
                let inline = t == tag::STRING && hdr.first() != Some(&l::str_enc::CHUNKED);
                let sub_rows: Elems = if inline {
                    Vec::new()
                } else {
                    let empty: &[u8] = &[];
                    let mut end = key.to_vec();
                    end.push(0);
                    let mut out = Vec::new();
                    for e in elems.range((ns, key, empty)..(ns, end.as_slice(), empty))? {
                        let (ek, ev) = e?;
                        out.push((ek.value().2.to_vec(), ev.value().to_vec()));
                    }
                    out
                };
                stats.elements += sub_rows.len() as u64;
                let value = build_value(t, hdr, sub_rows, opts)?;
                match value {
                    Some(v) => {
                        stats.keys += 1;
                        sink(db, Bytes::copy_from_slice(key), v, at);
                    }
                    None => stats.empty += 1,
                }
            }
        }
        if !expired.is_empty() {
            self.delete_raw(&expired)?;
        }
        stats.elapsed = start.elapsed();
        Ok(stats)
    }

    /// Namespace → db, from the db table (a namespace below the fresh range with no
    /// override belongs to the db of the same index, unless that db was remapped).
    fn db_of_ns(&self) -> impl Fn(u32) -> Option<usize> {
        let map = self.ns_map().map;
        let rev: HashMap<u32, usize> = map.iter().map(|(&d, &n)| (n, d)).collect();
        move |ns| match rev.get(&ns) {
            Some(&db) => Some(db),
            None if ns < l::FIRST_FRESH_NS && !map.contains_key(&(ns as usize)) => {
                Some(ns as usize)
            }
            None => None,
        }
    }

    /// Deletes keys by namespace (expired keys found while loading).
    fn delete_raw(&self, keys: &[(u32, Vec<u8>)]) -> Result<()> {
        let w = self.database().begin_write()?;
        {
            let mut kt = w.open_table(KEYS)?;
            let mut et = w.open_table(ELEMS)?;
            let empty: &[u8] = &[];
            for (ns, key) in keys {
                kt.remove((*ns, key.as_slice()))?;
                let mut end = key.clone();
                end.push(0);
                et.retain_in(
                    (*ns, key.as_slice(), empty)..(*ns, end.as_slice(), empty),
                    |_, _| false,
                )?;
            }
        }
        w.commit()?;
        Ok(())
    }
}

/// One key's value from its header and element rows; `None` for an empty collection.
pub(super) fn build_value(
    t: u8,
    hdr: &[u8],
    rows: Elems,
    o: &LoadOptions,
) -> Result<Option<Value>> {
    let v = match t {
        tag::STRING => {
            let (&enc, data) = hdr.split_first().ok_or_else(|| corrupt("string row"))?;
            if enc == l::str_enc::CHUNKED {
                let len = l::read_u64(data).ok_or_else(|| corrupt("chunked string row"))?;
                let mut out: Vec<u8> = Vec::new();
                for (i, (sub, chunk)) in rows.into_iter().enumerate() {
                    let whole = out.len().is_multiple_of(l::STR_CHUNK);
                    if sub != (i as u64).to_be_bytes() || !whole {
                        return Err(corrupt("string chunks"));
                    }
                    out.extend_from_slice(&chunk);
                }
                if out.len() as u64 != len {
                    return Err(corrupt("string chunks"));
                }
                return Ok(Some(Value::Str(StrVal::Bytes {
                    data: out,
                    raw: true,
                })));
            }
            let data = Bytes::copy_from_slice(data);
            let s = match enc {
                l::str_enc::INT => match crate::num::parse_i64(&data) {
                    Some(i) => StrVal::Int(i),
                    None => return Err(corrupt("int string")),
                },
                l::str_enc::EMBSTR => StrVal::Bytes {
                    data: data.into(),
                    raw: false,
                },
                l::str_enc::RAW => StrVal::Bytes {
                    data: data.into(),
                    raw: true,
                },
                _ => return Err(corrupt("string encoding")),
            };
            return Ok(Some(Value::Str(s)));
        }
        _ if rows.is_empty() && t != tag::STREAM => return Ok(None),
        tag::LIST => {
            read_list_header(hdr)?;
            let mut list = List::new();
            let total: usize = rows.iter().map(|(_, v)| v.len()).sum();
            list.before_add(total, rows.len(), || o.list_fill);
            for (_, v) in rows {
                list.push(Bytes::from(v), End::Tail);
            }
            Value::List(Box::new(list))
        }
        tag::HASH => {
            let mut pairs = Vec::with_capacity(rows.len());
            for (f, v) in rows {
                let (seq, _, _) = l::split_hash_row(&v).ok_or_else(|| corrupt("hash row"))?;
                pairs.push((seq, f, v));
            }
            pairs.sort_unstable_by_key(|p| p.0);
            let mut h = HashValue::new();
            for (_, f, row) in pairs {
                let (_, ttl, v) = l::split_hash_row(&row).ok_or_else(|| corrupt("hash row"))?;
                h.set_bytes(&f, Bytes::copy_from_slice(v), o.hash);
                if let Some(t) = ttl {
                    // A field whose deadline passed while the server was down is loaded
                    // and then expired as any other (lazily, or by the active cycle).
                    h.enable_ttls();
                    h.set_ttl(&f, Some(t));
                }
            }
            Value::Hash(Box::new(h))
        }
        tag::SET => {
            let mut members = Vec::with_capacity(rows.len());
            for (m, v) in rows {
                members.push((l::read_u64(&v).ok_or_else(|| corrupt("set row"))?, m));
            }
            members.sort_unstable_by_key(|p| p.0);
            let mut lim = o.set;
            let mut s = SetValue::create(&members[0].1, members.len(), &mut lim);
            for (_, m) in members {
                s.add(&m, &mut lim);
            }
            Value::Set(Box::new(s))
        }
        tag::ZSET => {
            let longest = rows.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
            let skiplist = rows.len() > o.zset_max_entries || longest > o.zset_max_value;
            let mut z = ZSet::new(skiplist);
            for (m, v) in rows {
                let bits = l::read_u64(&v).ok_or_else(|| corrupt("zset row"))?;
                let score = f64::from_bits(bits);
                // `insert` takes a new member with a real score: a repeated member (a log
                // record's rows are not unique as a table's are) or a NaN would leave the
                // member map and the score tree disagreeing.
                if score.is_nan() || z.score(&m).is_some() {
                    return Err(corrupt("zset row"));
                }
                z.insert(Bytes::from(m), score);
            }
            Value::ZSet(Box::new(z))
        }
        tag::STREAM => return build_stream(hdr, rows, o).map(Some),
        _ => return Err(corrupt("unknown type tag")),
    };
    Ok(Some(v))
}

fn sid(id: (u64, u64)) -> StreamId {
    StreamId::new(id.0, id.1)
}

fn build_stream(hdr: &[u8], rows: Elems, o: &LoadOptions) -> Result<Value> {
    let id_at = |i: usize| hdr.get(i..).and_then(l::read_id).map(sid);
    let (Some(last), Some(first), Some(maxdel), Some(added)) = (
        id_at(0),
        id_at(16),
        id_at(32),
        hdr.get(48..).and_then(l::read_u64),
    ) else {
        return Err(corrupt("stream header"));
    };
    let mut s = Stream::new();
    let mut pels: Vec<(Vec<u8>, StreamId, Nack)> = Vec::new();
    let mut consumers: Vec<(Vec<u8>, Bytes, Consumer)> = Vec::new();
    for (sub, v) in rows {
        let (&kind, rest) = sub.split_first().ok_or_else(|| corrupt("stream row"))?;
        match kind {
            xsub::ENTRY => {
                let id = l::read_id(rest)
                    .map(sid)
                    .ok_or_else(|| corrupt("entry id"))?;
                let fields = l::decode_fields(&v).ok_or_else(|| corrupt("entry fields"))?;
                let p = ParsedId {
                    id,
                    seq_given: true,
                };
                s.append(NewId::Explicit(p), &fields, 0, o.stream)
                    .map_err(|_| corrupt("stream entry order"))?;
            }
            xsub::GROUP => {
                let gl = l::read_id(&v)
                    .map(sid)
                    .ok_or_else(|| corrupt("group row"))?;
                let read = v.get(16..).and_then(l::read_i64);
                let read = read.ok_or_else(|| corrupt("group row"))?;
                s.groups
                    .insert(Bytes::copy_from_slice(rest), Group::new(gl, read));
            }
            xsub::PEL => {
                let (g, id) = l::split_group(rest).ok_or_else(|| corrupt("pel key"))?;
                let id = l::read_id(id).map(sid).ok_or_else(|| corrupt("pel id"))?;
                let (Some(time), Some(count)) = (l::read_i64(&v), v.get(8..).and_then(l::read_u64))
                else {
                    return Err(corrupt("pel row"));
                };
                let nack = Nack {
                    consumer: Bytes::copy_from_slice(&v[16..]),
                    delivery_time: time,
                    delivery_count: count,
                };
                pels.push((g.to_vec(), id, nack));
            }
            xsub::CONSUMER => {
                let (g, name) = l::split_group(rest).ok_or_else(|| corrupt("consumer key"))?;
                let (Some(seen), Some(active)) =
                    (l::read_i64(&v), v.get(8..).and_then(l::read_i64))
                else {
                    return Err(corrupt("consumer row"));
                };
                let c = Consumer {
                    seen_time: seen,
                    active_time: active,
                    pel: BTreeSet::new(),
                };
                consumers.push((g.to_vec(), Bytes::copy_from_slice(name), c));
            }
            _ => return Err(corrupt("stream row kind")),
        }
    }
    for (g, name, c) in consumers {
        if let Some(group) = s.groups.get_mut(&g[..]) {
            group.consumers.insert(name, c);
        }
    }
    for (g, id, nack) in pels {
        if let Some(group) = s.groups.get_mut(&g[..]) {
            if let Some(c) = group.consumers.get_mut(&nack.consumer) {
                c.pel.insert(id);
            }
            group.pel.insert(id, nack);
        }
    }
    s.last_id = last;
    s.first_id = first;
    s.max_deleted = maxdel;
    s.entries_added = added;
    Ok(Value::Stream(Box::new(s)))
}
