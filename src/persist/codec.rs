//! The write-ahead log's record payload: a batch of [`Change`]s as bytes, and back.
//!
//! Part of the file format (see [`super::wal`]): change codes are APPEND-ONLY. Integers are
//! LEB128 varints (signed ones zigzag), byte strings a varint length then the bytes, scores
//! and IDs fixed-width. A whole value (`Put`) is written as the same header and element rows
//! the store keeps ([`super::store::value_rows`]) and rebuilt by the loader's builder, so the
//! log needs no second encoding of every type.

use super::layout::tag;
use super::load::{build_value, LoadOptions};
use super::PersistError;
use crate::engine::change::{Change, Id};
use bytes::Bytes;

type Result<T> = std::result::Result<T, PersistError>;

/// Change codes. APPEND-ONLY: never renumber or reuse a value.
mod code {
    pub const PUT: u8 = 1;
    pub const DEL: u8 = 2;
    pub const EXPIRE: u8 = 3;
    pub const STR_SET: u8 = 4;
    pub const HASH_PUT: u8 = 5;
    pub const HASH_DEL: u8 = 6;
    pub const SET_ADD: u8 = 7;
    pub const SET_REM: u8 = 8;
    pub const ZPUT: u8 = 9;
    pub const ZDEL: u8 = 10;
    pub const LIST_PUSH: u8 = 11;
    pub const LIST_POP: u8 = 12;
    pub const LIST_SET: u8 = 13;
    pub const LIST_REWRITE: u8 = 14;
    pub const XADD: u8 = 15;
    pub const XDEL: u8 = 16;
    pub const XMETA: u8 = 17;
    pub const XGROUP_PUT: u8 = 18;
    pub const XGROUP_DEL: u8 = 19;
    pub const XPEL_PUT: u8 = 20;
    pub const XPEL_DEL: u8 = 21;
    pub const XCONSUMER_PUT: u8 = 22;
    pub const XCONSUMER_DEL: u8 = 23;
    pub const FLUSH_DB: u8 = 24;
    pub const FLUSH_ALL: u8 = 25;
    pub const SWAP_DB: u8 = 26;
    pub const HASH_TTL: u8 = 27;
    /// Layout version 5.
    pub const FUNCTIONS: u8 = 28;
    pub const LIST_INSERT: u8 = 29;
    pub const LIST_REMOVE: u8 = 30;
    pub const STR_PATCH: u8 = 31;
}

fn corrupt(what: &str) -> PersistError {
    PersistError::Corrupt(format!("write-ahead log record: {what}"))
}

struct W<'a>(&'a mut Vec<u8>);

impl W<'_> {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn uv(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn iv(&mut self, v: i64) {
        self.uv(((v << 1) ^ (v >> 63)) as u64);
    }
    fn bytes(&mut self, b: &[u8]) {
        self.uv(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn id(&mut self, id: Id) {
        self.uv(id.0);
        self.uv(id.1);
    }
    fn opt(&mut self, v: Option<u64>) {
        match v {
            None => self.u8(0),
            Some(v) => {
                self.u8(1);
                self.uv(v);
            }
        }
    }
    fn list(&mut self, items: &[Bytes]) {
        self.uv(items.len() as u64);
        for i in items {
            self.bytes(i);
        }
    }
    fn key(&mut self, c: u8, db: usize, key: &[u8]) {
        self.u8(c);
        self.uv(db as u64);
        self.bytes(key);
    }
}

/// Appends the encoding of `changes` to `out`.
pub fn encode(changes: &[Change], out: &mut Vec<u8>) {
    let mut w = W(out);
    w.uv(changes.len() as u64);
    for c in changes {
        encode_one(&mut w, c);
    }
}

fn encode_one(w: &mut W, c: &Change) {
    use Change::*;
    match c {
        Put {
            db,
            key,
            value,
            expire_at,
        } => {
            w.key(code::PUT, *db, key);
            w.opt(*expire_at);
            let mut rows: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            let (t, hdr) =
                super::store::value_rows(value, |sub, v| rows.push((sub.to_vec(), v.to_vec())));
            w.u8(t);
            w.bytes(&hdr);
            w.uv(rows.len() as u64);
            for (s, v) in &rows {
                w.bytes(s);
                w.bytes(v);
            }
        }
        Del { db, key } => w.key(code::DEL, *db, key),
        Expire { db, key, at } => {
            w.key(code::EXPIRE, *db, key);
            w.opt(*at);
        }
        StrSet {
            db,
            key,
            value,
            expire_at,
        } => {
            w.key(code::STR_SET, *db, key);
            w.opt(*expire_at);
            // As `w.bytes(&str_header(value))`, without the intermediate vector.
            w.uv(super::store::str_header_len(value) as u64);
            super::store::str_header_into(value, w.0);
        }
        HashPut { db, key, pairs } => {
            w.key(code::HASH_PUT, *db, key);
            w.uv(pairs.len() as u64);
            for (f, v) in pairs {
                w.bytes(f);
                w.bytes(v);
            }
        }
        HashDel { db, key, fields } => {
            w.key(code::HASH_DEL, *db, key);
            w.list(fields);
        }
        HashTtl { db, key, fields } => {
            w.key(code::HASH_TTL, *db, key);
            w.uv(fields.len() as u64);
            for (f, at) in fields {
                w.bytes(f);
                w.opt(*at);
            }
        }
        SetAdd { db, key, members } => {
            w.key(code::SET_ADD, *db, key);
            w.list(members);
        }
        SetRem { db, key, members } => {
            w.key(code::SET_REM, *db, key);
            w.list(members);
        }
        ZPut { db, key, members } => {
            w.key(code::ZPUT, *db, key);
            w.uv(members.len() as u64);
            for (m, s) in members {
                w.bytes(m);
                w.0.extend_from_slice(&s.to_bits().to_le_bytes());
            }
        }
        ZDel { db, key, members } => {
            w.key(code::ZDEL, *db, key);
            w.list(members);
        }
        ListPush {
            db,
            key,
            front,
            values,
        } => {
            w.key(code::LIST_PUSH, *db, key);
            w.u8(u8::from(*front));
            w.list(values);
        }
        ListPop { db, key, front, n } => {
            w.key(code::LIST_POP, *db, key);
            w.u8(u8::from(*front));
            w.uv(*n as u64);
        }
        ListSet {
            db,
            key,
            index,
            value,
        } => {
            w.key(code::LIST_SET, *db, key);
            w.uv(*index);
            w.bytes(value);
        }
        ListRewrite { db, key, values } => {
            w.key(code::LIST_REWRITE, *db, key);
            w.list(values);
        }
        XAdd {
            db,
            key,
            id,
            fields,
        } => {
            w.key(code::XADD, *db, key);
            w.id(*id);
            w.list(fields);
        }
        XDel { db, key, ids } => {
            w.key(code::XDEL, *db, key);
            w.uv(ids.len() as u64);
            for id in ids {
                w.id(*id);
            }
        }
        XMeta {
            db,
            key,
            last_id,
            entries_added,
            max_deleted,
            first_id,
        } => {
            w.key(code::XMETA, *db, key);
            w.id(*last_id);
            w.uv(*entries_added);
            w.id(*max_deleted);
            w.id(*first_id);
        }
        XGroupPut {
            db,
            key,
            group,
            last_id,
            entries_read,
        } => {
            w.key(code::XGROUP_PUT, *db, key);
            w.bytes(group);
            w.id(*last_id);
            w.iv(*entries_read);
        }
        XGroupDel { db, key, group } => {
            w.key(code::XGROUP_DEL, *db, key);
            w.bytes(group);
        }
        XPelPut {
            db,
            key,
            group,
            id,
            consumer,
            delivery_time,
            delivery_count,
        } => {
            w.key(code::XPEL_PUT, *db, key);
            w.bytes(group);
            w.id(*id);
            w.bytes(consumer);
            w.iv(*delivery_time);
            w.uv(*delivery_count);
        }
        XPelDel { db, key, group, id } => {
            w.key(code::XPEL_DEL, *db, key);
            w.bytes(group);
            w.id(*id);
        }
        XConsumerPut {
            db,
            key,
            group,
            consumer,
            seen_time,
            active_time,
        } => {
            w.key(code::XCONSUMER_PUT, *db, key);
            w.bytes(group);
            w.bytes(consumer);
            w.iv(*seen_time);
            w.iv(*active_time);
        }
        XConsumerDel {
            db,
            key,
            group,
            consumer,
        } => {
            w.key(code::XCONSUMER_DEL, *db, key);
            w.bytes(group);
            w.bytes(consumer);
        }
        FlushDb { db } => {
            w.u8(code::FLUSH_DB);
            w.uv(*db as u64);
        }
        FlushAll => w.u8(code::FLUSH_ALL),
        SwapDb { a, b } => {
            w.u8(code::SWAP_DB);
            w.uv(*a as u64);
            w.uv(*b as u64);
        }
        Functions { codes } => {
            w.u8(code::FUNCTIONS);
            w.list(codes);
        }
        ListInsert {
            db,
            key,
            index,
            value,
        } => {
            w.key(code::LIST_INSERT, *db, key);
            w.uv(*index);
            w.bytes(value);
        }
        ListRemove { db, key, indexes } => {
            w.key(code::LIST_REMOVE, *db, key);
            w.uv(indexes.len() as u64);
            for i in indexes {
                w.uv(*i);
            }
        }
        StrPatch {
            db,
            key,
            offset,
            bytes,
        } => {
            w.key(code::STR_PATCH, *db, key);
            w.uv(*offset);
            w.bytes(bytes);
        }
    }
}

struct R<'a> {
    b: &'a [u8],
}

impl R<'_> {
    fn u8(&mut self) -> Result<u8> {
        let (&v, rest) = self.b.split_first().ok_or_else(|| corrupt("truncated"))?;
        self.b = rest;
        Ok(v)
    }
    fn uv(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.u8()?;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(corrupt("varint too long"))
    }
    fn iv(&mut self) -> Result<i64> {
        let u = self.uv()?;
        Ok((u >> 1) as i64 ^ -((u & 1) as i64))
    }
    fn len(&mut self) -> Result<usize> {
        let n = usize::try_from(self.uv()?).map_err(|_| corrupt("length"))?;
        if n > self.b.len() {
            return Err(corrupt("length past the end"));
        }
        Ok(n)
    }
    fn raw(&mut self) -> Result<&[u8]> {
        let n = self.len()?;
        let (v, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(v)
    }
    fn bytes(&mut self) -> Result<Bytes> {
        self.raw().map(Bytes::copy_from_slice)
    }
    fn id(&mut self) -> Result<Id> {
        Ok((self.uv()?, self.uv()?))
    }
    fn opt(&mut self) -> Result<Option<u64>> {
        match self.u8()? {
            0 => Ok(None),
            1 => self.uv().map(Some),
            _ => Err(corrupt("option")),
        }
    }
    /// A count of items each at least one byte long (bounds allocations on garbage).
    fn count(&mut self) -> Result<usize> {
        self.len()
    }
    fn list(&mut self) -> Result<Vec<Bytes>> {
        let n = self.count()?;
        (0..n).map(|_| self.bytes()).collect()
    }
    fn db(&mut self) -> Result<usize> {
        usize::try_from(self.uv()?).map_err(|_| corrupt("db"))
    }
    fn key(&mut self) -> Result<(usize, Bytes)> {
        Ok((self.db()?, self.bytes()?))
    }
}

/// Decodes one record's payload. `opts` shapes rebuilt whole values (as on load), except
/// that sorted sets are rebuilt as skiplists, which keep every score's bits (a listpack would
/// turn -0 into 0): the value only travels on to the store.
pub fn decode(b: &[u8], opts: &LoadOptions) -> Result<Vec<Change>> {
    let opts = &LoadOptions {
        zset_max_entries: 0,
        ..opts.clone()
    };
    let mut r = R { b };
    let n = r.count()?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(decode_one(&mut r, opts)?);
    }
    if !r.b.is_empty() {
        return Err(corrupt("trailing bytes"));
    }
    Ok(out)
}

fn decode_one(r: &mut R, opts: &LoadOptions) -> Result<Change> {
    use Change::*;
    let c = r.u8()?;
    Ok(match c {
        code::FLUSH_DB => FlushDb { db: r.db()? },
        code::FLUSH_ALL => FlushAll,
        code::SWAP_DB => SwapDb {
            a: r.db()?,
            b: r.db()?,
        },
        code::FUNCTIONS => Functions { codes: r.list()? },
        _ => {
            let (db, key) = r.key()?;
            match c {
                code::PUT => {
                    let expire_at = r.opt()?;
                    let t = r.u8()?;
                    let hdr = r.raw()?.to_vec();
                    let n = r.count()?;
                    let mut rows = Vec::with_capacity(n);
                    for _ in 0..n {
                        rows.push((r.raw()?.to_vec(), r.raw()?.to_vec()));
                    }
                    // The store hands rows to the builder in key order.
                    rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                    let value = build_value(t, &hdr, rows, opts)?
                        .ok_or_else(|| corrupt("empty collection in a whole value"))?;
                    Put {
                        db,
                        key,
                        value: Box::new(value),
                        expire_at,
                    }
                }
                code::DEL => Del { db, key },
                code::EXPIRE => Expire {
                    db,
                    key,
                    at: r.opt()?,
                },
                code::STR_SET => {
                    let expire_at = r.opt()?;
                    let hdr = r.raw()?;
                    let Some(crate::types::value::Value::Str(value)) =
                        build_value(tag::STRING, hdr, Vec::new(), opts)?
                    else {
                        return Err(corrupt("string value"));
                    };
                    StrSet {
                        db,
                        key,
                        value,
                        expire_at,
                    }
                }
                code::HASH_PUT => {
                    let n = r.count()?;
                    let mut pairs = Vec::with_capacity(n);
                    for _ in 0..n {
                        pairs.push((r.bytes()?, r.bytes()?));
                    }
                    HashPut { db, key, pairs }
                }
                code::HASH_DEL => HashDel {
                    db,
                    key,
                    fields: r.list()?,
                },
                code::HASH_TTL => {
                    let n = r.count()?;
                    let mut fields = Vec::with_capacity(n);
                    for _ in 0..n {
                        fields.push((r.bytes()?, r.opt()?));
                    }
                    HashTtl { db, key, fields }
                }
                code::SET_ADD => SetAdd {
                    db,
                    key,
                    members: r.list()?,
                },
                code::SET_REM => SetRem {
                    db,
                    key,
                    members: r.list()?,
                },
                code::ZPUT => {
                    let n = r.count()?;
                    let mut members = Vec::with_capacity(n);
                    for _ in 0..n {
                        let m = r.bytes()?;
                        if r.b.len() < 8 {
                            return Err(corrupt("truncated score"));
                        }
                        let (s, rest) = r.b.split_at(8);
                        r.b = rest;
                        let bits = u64::from_le_bytes(s.try_into().expect("8 bytes"));
                        members.push((m, f64::from_bits(bits)));
                    }
                    ZPut { db, key, members }
                }
                code::ZDEL => ZDel {
                    db,
                    key,
                    members: r.list()?,
                },
                code::LIST_PUSH => ListPush {
                    db,
                    key,
                    front: r.u8()? != 0,
                    values: r.list()?,
                },
                code::LIST_POP => ListPop {
                    db,
                    key,
                    front: r.u8()? != 0,
                    n: usize::try_from(r.uv()?).map_err(|_| corrupt("pop count"))?,
                },
                code::LIST_SET => ListSet {
                    db,
                    key,
                    index: r.uv()?,
                    value: r.bytes()?,
                },
                code::LIST_REWRITE => ListRewrite {
                    db,
                    key,
                    values: r.list()?,
                },
                code::XADD => XAdd {
                    db,
                    key,
                    id: r.id()?,
                    fields: r.list()?,
                },
                code::XDEL => {
                    let n = r.count()?;
                    let ids = (0..n).map(|_| r.id()).collect::<Result<_>>()?;
                    XDel { db, key, ids }
                }
                code::XMETA => XMeta {
                    db,
                    key,
                    last_id: r.id()?,
                    entries_added: r.uv()?,
                    max_deleted: r.id()?,
                    first_id: r.id()?,
                },
                code::XGROUP_PUT => XGroupPut {
                    db,
                    key,
                    group: r.bytes()?,
                    last_id: r.id()?,
                    entries_read: r.iv()?,
                },
                code::XGROUP_DEL => XGroupDel {
                    db,
                    key,
                    group: r.bytes()?,
                },
                code::XPEL_PUT => XPelPut {
                    db,
                    key,
                    group: r.bytes()?,
                    id: r.id()?,
                    consumer: r.bytes()?,
                    delivery_time: r.iv()?,
                    delivery_count: r.uv()?,
                },
                code::XPEL_DEL => XPelDel {
                    db,
                    key,
                    group: r.bytes()?,
                    id: r.id()?,
                },
                code::XCONSUMER_PUT => XConsumerPut {
                    db,
                    key,
                    group: r.bytes()?,
                    consumer: r.bytes()?,
                    seen_time: r.iv()?,
                    active_time: r.iv()?,
                },
                code::XCONSUMER_DEL => XConsumerDel {
                    db,
                    key,
                    group: r.bytes()?,
                    consumer: r.bytes()?,
                },
                code::LIST_INSERT => ListInsert {
                    db,
                    key,
                    index: r.uv()?,
                    value: r.bytes()?,
                },
                code::LIST_REMOVE => {
                    let n = r.count()?;
                    let indexes = (0..n).map(|_| r.uv()).collect::<Result<_>>()?;
                    ListRemove { db, key, indexes }
                }
                code::STR_PATCH => StrPatch {
                    db,
                    key,
                    offset: r.uv()?,
                    bytes: r.bytes()?,
                },
                _ => return Err(corrupt("unknown change code")),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        let mut out = Vec::new();
        let mut w = W(&mut out);
        for v in [0u64, 1, 127, 128, 300, u64::MAX] {
            w.uv(v);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            w.iv(v);
        }
        let mut r = R { b: &out };
        for v in [0u64, 1, 127, 128, 300, u64::MAX] {
            assert_eq!(r.uv().unwrap(), v);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(r.iv().unwrap(), v);
        }
        assert!(r.b.is_empty());
    }

    #[test]
    fn function_libraries_round_trip() {
        let codes = vec![
            Bytes::from_static(b"#!lua name=a\nredis.register_function('f', f)"),
            Bytes::from_static(b""),
            Bytes::from_static(b"\x00\xff"),
        ];
        let mut out = Vec::new();
        encode(
            &[Change::Functions {
                codes: codes.clone(),
            }],
            &mut out,
        );
        match &decode(&out, &LoadOptions::new(0)).unwrap()[..] {
            [Change::Functions { codes: got }] => assert_eq!(got, &codes),
            other => panic!("decoded {other:?}"),
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let opts = LoadOptions::new(0);
        for seed in 0..2000u32 {
            let mut b = Vec::new();
            let mut x = seed.wrapping_mul(2654435761);
            for _ in 0..(seed % 40) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                b.push(x as u8);
            }
            let _ = decode(&b, &opts);
        }
    }
}
