//! The store: opening (format version check), applying change batches, syncing.

use super::layout::{self as l, tag, xsub, DBS, ELEMS, FUNCTIONS, KEYS, META};
use super::{corrupt, Change, PersistError};
use crate::types::value::{StrVal, Value};
use bytes::Bytes;
use parking_lot::Mutex;
use redb::{
    Database, Durability, ReadableDatabase, ReadableTable, Table, TableError, WriteTransaction,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub const FILE_NAME: &str = "respite.redb";

type Result<T> = std::result::Result<T, PersistError>;

/// db → namespace overrides (a db without one uses namespace = its index).
#[derive(Clone, Debug, Default)]
pub(super) struct NsMap {
    pub map: HashMap<usize, u32>,
    pub next_ns: u32,
}

impl NsMap {
    fn ns(&self, db: usize) -> Result<u32> {
        if let Some(&ns) = self.map.get(&db) {
            return Ok(ns);
        }
        u32::try_from(db)
            .ok()
            .filter(|&n| n < l::FIRST_FRESH_NS)
            .ok_or_else(|| corrupt("db index out of range"))
    }
}

pub struct Store {
    db: Database,
    path: PathBuf,
    /// Held for a whole `apply`, so the map and the file move together.
    ns: Mutex<NsMap>,
    fail_commits: AtomicU64,
    /// Rows inserted, updated or deleted one by one in committed transactions (range wipes
    /// not counted): shows that element-level changes cost rows, not whole values.
    rows_written: AtomicU64,
}

impl Store {
    /// Creates or opens `<dir>/respite.redb`, first copying a file written by redb 2 into the
    /// current format ([`super::upgrade`]). A file with another format version is refused
    /// before anything is written to it.
    pub fn open(dir: &Path) -> Result<Store> {
        std::fs::create_dir_all(dir).map_err(super::io)?;
        let path = dir.join(FILE_NAME);
        let db = super::upgrade::open_current(&path)?;
        let version = {
            let r = db.begin_read()?;
            match r.open_table(META) {
                Ok(t) => t.get(l::META_VERSION)?.map(|g| g.value()),
                Err(TableError::TableDoesNotExist(_)) => None,
                Err(e) => return Err(e.into()),
            }
        };
        match version {
            // A file from an earlier compatible version (see `layout`'s history): the same
            // tables without what later versions added. Relabelled current at once, before
            // anything else is written, so a build that would misread it refuses it.
            Some(v) if l::COMPATIBLE_VERSIONS.contains(&v) => {
                let w = db.begin_write()?;
                w.open_table(META)?
                    .insert(l::META_VERSION, l::FORMAT_VERSION)?;
                w.open_table(FUNCTIONS)?;
                w.commit()?;
            }
            // Versions 1 and 2 are redb 2 files, copied to this version by `open_current`.
            Some(v) if v != l::FORMAT_VERSION => {
                return Err(PersistError::UnknownVersion {
                    found: v,
                    known: l::FORMAT_VERSION,
                })
            }
            Some(_) => {}
            None => {
                let has_tables = db.begin_read()?.list_tables()?.next().is_some();
                if has_tables {
                    return Err(corrupt("no format version in a non-empty file"));
                }
                let w = db.begin_write()?;
                {
                    let mut m = w.open_table(META)?;
                    m.insert(l::META_VERSION, l::FORMAT_VERSION)?;
                    m.insert(l::META_NEXT_NS, u64::from(l::FIRST_FRESH_NS))?;
                    w.open_table(DBS)?;
                    w.open_table(KEYS)?;
                    w.open_table(ELEMS)?;
                    w.open_table(FUNCTIONS)?;
                }
                w.commit()?;
            }
        }
        let ns = read_ns_map(&db)?;
        Ok(Store {
            db,
            path,
            ns: Mutex::new(ns),
            fail_commits: AtomicU64::new(0),
            rows_written: AtomicU64::new(0),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Rows written by committed transactions since the store was opened.
    pub fn rows_written(&self) -> u64 {
        self.rows_written.load(Ordering::Relaxed)
    }

    /// Makes the next `n` calls to [`Store::apply`] fail with an I/O-style error, writing
    /// nothing (for tests of the error path).
    pub fn fail_next_commits(&self, n: u64) {
        self.fail_commits.store(n, Ordering::SeqCst);
    }

    /// Applies `changes` in one write transaction: all or nothing. `durable` commits with
    /// fsync; otherwise the commit survives a process crash but not a power loss until the
    /// next durable commit (and redb frees pages only at durable commits).
    pub fn apply(&self, changes: &[Change], durable: bool) -> Result<()> {
        self.apply_at(changes, durable, None)
    }

    /// A checkpoint: applies logged `changes` durably and records that the store now holds
    /// every write-ahead log record up to `rec`, in the same transaction.
    pub fn apply_logged<'c>(
        &self,
        changes: impl IntoIterator<Item = &'c Change>,
        rec: u64,
    ) -> Result<()> {
        self.apply_at(changes, true, Some(rec))
    }

    /// The last write-ahead log record the store holds (0 = none).
    pub fn wal_applied(&self) -> Result<u64> {
        let r = self.db.begin_read()?;
        let m = r.open_table(META)?;
        let v = m.get(l::META_WAL_APPLIED)?.map(|g| g.value());
        Ok(v.unwrap_or(0))
    }

    fn apply_at<'c>(
        &self,
        changes: impl IntoIterator<Item = &'c Change>,
        durable: bool,
        rec: Option<u64>,
    ) -> Result<()> {
        let injected = self
            .fail_commits
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if injected.is_ok() {
            return Err(PersistError::Injected);
        }
        let mut guard = self.ns.lock();
        let mut w = self.db.begin_write()?;
        w.set_durability(if durable {
            Durability::Immediate
        } else {
            Durability::None
        })
        .map_err(super::io)?;
        let (ns, rows) = {
            let mut tx = Tx::open(&w, guard.clone())?;
            for c in changes {
                tx.apply(c)?;
            }
            (tx.ns, tx.rows)
        };
        if let Some(rec) = rec {
            w.open_table(META)?.insert(l::META_WAL_APPLIED, rec)?;
        }
        w.commit()?;
        *guard = ns;
        self.rows_written.fetch_add(rows, Ordering::Relaxed);
        Ok(())
    }

    /// The FUNCTION libraries' codes, in the order they were saved (none in a file that
    /// never had any, a version-3 file's included).
    pub fn functions(&self) -> Result<Vec<Bytes>> {
        let r = self.db.begin_read()?;
        let t = match r.open_table(FUNCTIONS) {
            Ok(t) => t,
            Err(TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let mut out = Vec::new();
        for row in t.iter()? {
            let (_, code) = row?;
            out.push(Bytes::copy_from_slice(code.value()));
        }
        Ok(out)
    }

    /// Forces a durable commit (everything applied so far survives a power loss).
    pub fn sync(&self) -> Result<()> {
        let _guard = self.ns.lock();
        let mut w = self.db.begin_write()?;
        w.set_durability(Durability::Immediate).map_err(super::io)?;
        w.commit()?;
        Ok(())
    }

    pub(super) fn database(&self) -> &Database {
        &self.db
    }

    pub(super) fn ns_map(&self) -> NsMap {
        self.ns.lock().clone()
    }
}

fn read_ns_map(db: &Database) -> Result<NsMap> {
    let r = db.begin_read()?;
    let next = r
        .open_table(META)?
        .get(l::META_NEXT_NS)?
        .map(|g| g.value())
        .ok_or_else(|| corrupt("missing next namespace"))?;
    let mut ns = NsMap {
        map: HashMap::new(),
        next_ns: u32::try_from(next).map_err(|_| corrupt("namespace counter overflow"))?,
    };
    for row in r.open_table(DBS)?.iter()? {
        let (k, v) = row?;
        ns.map.insert(k.value() as usize, v.value());
    }
    Ok(ns)
}

type KeysTable<'t> = Table<'t, (u32, &'static [u8]), &'static [u8]>;
type ElemsTable<'t> = Table<'t, (u32, &'static [u8], &'static [u8]), &'static [u8]>;

/// A key's row, decoded.
struct Row {
    tag: u8,
    expire_at: Option<u64>,
    header: Vec<u8>,
}

/// One write transaction's open tables.
struct Tx<'t> {
    txn: &'t WriteTransaction,
    keys: KeysTable<'t>,
    elems: ElemsTable<'t>,
    ns: NsMap,
    /// Single rows written or deleted so far.
    rows: u64,
    /// A row being built (reused: a checkpoint writes ~10^5 string rows).
    scratch: Vec<u8>,
}

fn after(key: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(key.len() + 1);
    v.extend_from_slice(key);
    v.push(0);
    v
}

impl<'t> Tx<'t> {
    fn open(txn: &'t WriteTransaction, ns: NsMap) -> Result<Tx<'t>> {
        Ok(Tx {
            txn,
            keys: txn.open_table(KEYS)?,
            elems: txn.open_table(ELEMS)?,
            ns,
            rows: 0,
            scratch: Vec::new(),
        })
    }

    fn row(&self, ns: u32, key: &[u8]) -> Result<Option<Row>> {
        let Some(g) = self.keys.get((ns, key))? else {
            return Ok(None);
        };
        let (tag, expire_at, header) =
            l::split_key_row(g.value()).ok_or_else(|| corrupt("short key row"))?;
        Ok(Some(Row {
            tag,
            expire_at,
            header: header.to_vec(),
        }))
    }

    fn put_row(&mut self, ns: u32, key: &[u8], tag: u8, at: Option<u64>, hdr: &[u8]) -> Result<()> {
        self.rows += 1;
        self.keys
            .insert((ns, key), l::key_row(tag, at, hdr).as_slice())?;
        Ok(())
    }

    fn wipe_elems(&mut self, ns: u32, key: &[u8]) -> Result<()> {
        let end = after(key);
        let empty: &[u8] = &[];
        self.elems
            .retain_in((ns, key, empty)..(ns, end.as_slice(), empty), |_, _| false)?;
        Ok(())
    }

    fn wipe_sub_prefix(&mut self, ns: u32, key: &[u8], prefix: &[u8]) -> Result<()> {
        match l::prefix_end(prefix) {
            Some(end) => self
                .elems
                .retain_in((ns, key, prefix)..(ns, key, end.as_slice()), |_, _| false)?,
            None => self
                .elems
                .retain_in((ns, key, prefix).., |k, _| k.1 != key)?,
        }
        Ok(())
    }

    fn del_key(&mut self, ns: u32, key: &[u8]) -> Result<()> {
        let old = self
            .keys
            .remove((ns, key))?
            .map(|g| l::owns_elems(g.value()));
        if let Some(owns) = old {
            self.rows += 1;
            if owns {
                self.wipe_elems(ns, key)?;
            }
        }
        Ok(())
    }

    /// The key's row if it has type `want`; a fresh row (no expiry, `empty` header) if it is
    /// missing or of another type (whose elements are dropped). `true` = the row is new.
    fn ensure(&mut self, ns: u32, key: &[u8], want: u8, empty: &[u8]) -> Result<(Row, bool)> {
        match self.row(ns, key)? {
            Some(r) if r.tag == want => Ok((r, false)),
            old => {
                let chunked = |r: &Row| r.header.first() == Some(&l::str_enc::CHUNKED);
                if old.is_some_and(|r| r.tag != tag::STRING || chunked(&r)) {
                    self.wipe_elems(ns, key)?;
                }
                let r = Row {
                    tag: want,
                    expire_at: None,
                    header: empty.to_vec(),
                };
                Ok((r, true))
            }
        }
    }

    fn put_elem(&mut self, ns: u32, key: &[u8], sub: &[u8], v: &[u8]) -> Result<()> {
        self.rows += 1;
        self.elems.insert((ns, key, sub), v)?;
        Ok(())
    }

    fn del_elem(&mut self, ns: u32, key: &[u8], sub: &[u8]) -> Result<()> {
        self.rows += 1;
        self.elems.remove((ns, key, sub))?;
        Ok(())
    }

    fn elem(&self, ns: u32, key: &[u8], sub: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.elems.get((ns, key, sub))?.map(|g| g.value().to_vec()))
    }

    fn set_db_ns(&mut self, db: usize, ns: u32) -> Result<()> {
        let dbk = u32::try_from(db).map_err(|_| corrupt("db index out of range"))?;
        self.txn.open_table(DBS)?.insert(dbk, ns)?;
        self.ns.map.insert(db, ns);
        Ok(())
    }

    fn apply(&mut self, c: &Change) -> Result<()> {
        match c {
            Change::Put {
                db,
                key,
                value,
                expire_at,
            } => {
                let ns = self.ns.ns(*db)?;
                self.del_key(ns, key)?;
                self.put_value(ns, key, value, *expire_at)
            }
            Change::Del { db, key } => {
                let ns = self.ns.ns(*db)?;
                self.del_key(ns, key)
            }
            Change::Expire { db, key, at } => {
                let ns = self.ns.ns(*db)?;
                if let Some(r) = self.row(ns, key)? {
                    self.put_row(ns, key, r.tag, *at, &r.header)?;
                }
                Ok(())
            }
            Change::StrSet {
                db,
                key,
                value,
                expire_at,
            } => {
                let ns = self.ns.ns(*db)?;
                // One tree walk: the insert hands back the old row, whose tag says whether a
                // collection's elements must go.
                self.rows += 1;
                let row = &mut self.scratch;
                row.clear();
                l::key_row_start(tag::STRING, *expire_at, row);
                str_header_into(value, row);
                let old = self
                    .keys
                    .insert((ns, key.as_ref()), row.as_slice())?
                    .map(|g| l::owns_elems(g.value()));
                if old == Some(true) {
                    self.wipe_elems(ns, key)?;
                }
                Ok(())
            }
            Change::HashPut { db, key, pairs } => {
                let ns = self.ns.ns(*db)?;
                let (mut r, fresh) = self.ensure(ns, key, tag::HASH, &0u64.to_be_bytes())?;
                let mut next = l::read_u64(&r.header).ok_or_else(|| corrupt("hash header"))?;
                let start = next;
                for (f, v) in pairs {
                    let seq = match self.elem(ns, key, f)? {
                        Some(old) => {
                            l::split_hash_row(&old)
                                .ok_or_else(|| corrupt("hash row"))?
                                .0
                        }
                        None => {
                            next += 1;
                            next - 1
                        }
                    };
                    // Written without a deadline: HSET clears it (a kept one follows as
                    // a `HashTtl`).
                    self.put_elem(ns, key, f, &l::hash_row(seq, None, v))?;
                }
                if fresh || next != start {
                    r.header = next.to_be_bytes().to_vec();
                    self.put_row(ns, key, tag::HASH, r.expire_at, &r.header)?;
                }
                Ok(())
            }
            Change::HashTtl { db, key, fields } => {
                let ns = self.ns.ns(*db)?;
                for (f, at) in fields {
                    let Some(old) = self.elem(ns, key, f)? else {
                        continue;
                    };
                    let (seq, was, v) =
                        l::split_hash_row(&old).ok_or_else(|| corrupt("hash row"))?;
                    if was != *at {
                        let row = l::hash_row(seq, *at, v);
                        self.put_elem(ns, key, f, &row)?;
                    }
                }
                Ok(())
            }
            Change::HashDel {
                db,
                key,
                fields: subs,
            }
            | Change::SetRem {
                db,
                key,
                members: subs,
            }
            | Change::ZDel {
                db,
                key,
                members: subs,
            } => {
                let ns = self.ns.ns(*db)?;
                for s in subs {
                    self.del_elem(ns, key, s)?;
                }
                Ok(())
            }
            Change::SetAdd { db, key, members } => {
                let ns = self.ns.ns(*db)?;
                let (r, fresh) = self.ensure(ns, key, tag::SET, &0u64.to_be_bytes())?;
                let mut next = l::read_u64(&r.header).ok_or_else(|| corrupt("set header"))?;
                let start = next;
                for m in members {
                    if self.elem(ns, key, m)?.is_none() {
                        self.put_elem(ns, key, m, &next.to_be_bytes())?;
                        next += 1;
                    }
                }
                if fresh || next != start {
                    self.put_row(ns, key, tag::SET, r.expire_at, &next.to_be_bytes())?;
                }
                Ok(())
            }
            Change::ZPut { db, key, members } => {
                let ns = self.ns.ns(*db)?;
                let (r, fresh) = self.ensure(ns, key, tag::ZSET, &[])?;
                for (m, s) in members {
                    self.put_elem(ns, key, m, &s.to_bits().to_be_bytes())?;
                }
                if fresh {
                    self.put_row(ns, key, tag::ZSET, r.expire_at, &[])?;
                }
                Ok(())
            }
            Change::ListPush {
                db,
                key,
                front,
                values,
            } => {
                let ns = self.ns.ns(*db)?;
                let (r, _) = self.ensure(ns, key, tag::LIST, &list_header(0, 0))?;
                let (mut head, mut tail) = read_list_header(&r.header)?;
                for v in values {
                    let seq = if *front {
                        head -= 1;
                        head
                    } else {
                        tail += 1;
                        tail - 1
                    };
                    self.put_elem(ns, key, &l::list_sub(seq), v)?;
                }
                self.put_row(ns, key, tag::LIST, r.expire_at, &list_header(head, tail))
            }
            Change::ListPop { db, key, front, n } => {
                let ns = self.ns.ns(*db)?;
                let Some(r) = self.row(ns, key)?.filter(|r| r.tag == tag::LIST) else {
                    return Ok(());
                };
                let (mut head, mut tail) = read_list_header(&r.header)?;
                for _ in 0..*n {
                    if head >= tail {
                        break;
                    }
                    let seq = if *front {
                        head += 1;
                        head - 1
                    } else {
                        tail -= 1;
                        tail
                    };
                    self.del_elem(ns, key, &l::list_sub(seq))?;
                }
                self.put_row(ns, key, tag::LIST, r.expire_at, &list_header(head, tail))
            }
            Change::ListSet {
                db,
                key,
                index,
                value,
            } => {
                let ns = self.ns.ns(*db)?;
                let Some(r) = self.row(ns, key)?.filter(|r| r.tag == tag::LIST) else {
                    return Ok(());
                };
                let (head, tail) = read_list_header(&r.header)?;
                let seq = i64::try_from(*index).ok().and_then(|i| head.checked_add(i));
                if let Some(seq) = seq.filter(|&s| s < tail) {
                    self.put_elem(ns, key, &l::list_sub(seq), value)?;
                }
                Ok(())
            }
            Change::ListInsert {
                db,
                key,
                index,
                value,
            } => {
                let ns = self.ns.ns(*db)?;
                let Some(r) = self.row(ns, key)?.filter(|r| r.tag == tag::LIST) else {
                    return Ok(());
                };
                let (mut head, mut tail) = read_list_header(&r.header)?;
                let len = tail - head;
                let i = i64::try_from(*index).unwrap_or(len).min(len);
                // The shorter side of the insertion point moves one place.
                if i <= len / 2 {
                    for j in 0..i {
                        let v = self.list_elem(ns, key, head + j)?;
                        self.put_elem(ns, key, &l::list_sub(head + j - 1), &v)?;
                    }
                    head -= 1;
                } else {
                    for j in (i..len).rev() {
                        let v = self.list_elem(ns, key, head + j)?;
                        self.put_elem(ns, key, &l::list_sub(head + j + 1), &v)?;
                    }
                    tail += 1;
                }
                self.put_elem(ns, key, &l::list_sub(head + i), value)?;
                self.put_row(ns, key, tag::LIST, r.expire_at, &list_header(head, tail))
            }
            Change::ListRemove { db, key, indexes } => {
                let ns = self.ns.ns(*db)?;
                let Some(r) = self.row(ns, key)?.filter(|r| r.tag == tag::LIST) else {
                    return Ok(());
                };
                let (mut head, mut tail) = read_list_header(&r.header)?;
                let len = tail - head;
                let mut gone: Vec<i64> = indexes
                    .iter()
                    .filter_map(|&i| i64::try_from(i).ok().filter(|&i| i < len))
                    .collect();
                gone.sort_unstable();
                gone.dedup();
                let (Some(&first), Some(&last)) = (gone.first(), gone.last()) else {
                    return Ok(());
                };
                if len - first <= last + 1 {
                    // What follows the first removed element closes up towards the head.
                    let (mut w, mut g) = (first, 0);
                    for j in first..len {
                        if gone.get(g) == Some(&j) {
                            g += 1;
                            continue;
                        }
                        if w != j {
                            let v = self.list_elem(ns, key, head + j)?;
                            self.put_elem(ns, key, &l::list_sub(head + w), &v)?;
                        }
                        w += 1;
                    }
                    for j in w..len {
                        self.del_elem(ns, key, &l::list_sub(head + j))?;
                    }
                    tail = head + w;
                } else {
                    // What precedes the last removed element closes up towards the tail.
                    let (mut w, mut g) = (last, gone.len());
                    for j in (0..=last).rev() {
                        if g > 0 && gone[g - 1] == j {
                            g -= 1;
                            continue;
                        }
                        if w != j {
                            let v = self.list_elem(ns, key, head + j)?;
                            self.put_elem(ns, key, &l::list_sub(head + w), &v)?;
                        }
                        w -= 1;
                    }
                    for j in 0..=w {
                        self.del_elem(ns, key, &l::list_sub(head + j))?;
                    }
                    head += w + 1;
                }
                self.put_row(ns, key, tag::LIST, r.expire_at, &list_header(head, tail))
            }
            Change::StrPatch {
                db,
                key,
                offset,
                bytes,
            } => {
                let ns = self.ns.ns(*db)?;
                let r = match self.row(ns, key)?.filter(|r| r.tag == tag::STRING) {
                    Some(r) => r,
                    None => {
                        // The journal writes a string before patching it: never reached.
                        tracing::warn!("a string patch found no string in the store");
                        Row {
                            tag: tag::STRING,
                            expire_at: None,
                            header: vec![l::str_enc::RAW],
                        }
                    }
                };
                self.patch_str(ns, key, r, *offset, bytes)
            }
            Change::ListRewrite { db, key, values } => {
                let ns = self.ns.ns(*db)?;
                let (r, fresh) = self.ensure(ns, key, tag::LIST, &list_header(0, 0))?;
                if !fresh {
                    self.wipe_elems(ns, key)?;
                }
                for (i, v) in values.iter().enumerate() {
                    self.put_elem(ns, key, &l::list_sub(i as i64), v)?;
                }
                let hdr = list_header(0, values.len() as i64);
                self.put_row(ns, key, tag::LIST, r.expire_at, &hdr)
            }
            Change::XAdd {
                db,
                key,
                id,
                fields,
            } => {
                let ns = self.ns.ns(*db)?;
                self.ensure_stream(ns, key)?;
                self.put_elem(ns, key, &entry_sub(*id), &l::encode_fields(fields))
            }
            Change::XDel { db, key, ids } => {
                let ns = self.ns.ns(*db)?;
                for id in ids {
                    self.del_elem(ns, key, &entry_sub(*id))?;
                }
                Ok(())
            }
            Change::XMeta {
                db,
                key,
                last_id,
                entries_added,
                max_deleted,
                first_id,
            } => {
                let ns = self.ns.ns(*db)?;
                let r = self.ensure_stream(ns, key)?;
                let hdr = stream_header(*last_id, *first_id, *max_deleted, *entries_added);
                self.put_row(ns, key, tag::STREAM, r.expire_at, &hdr)
            }
            Change::XGroupPut {
                db,
                key,
                group,
                last_id,
                entries_read,
            } => {
                let ns = self.ns.ns(*db)?;
                self.ensure_stream(ns, key)?;
                let mut v = l::id_bytes(*last_id).to_vec();
                v.extend_from_slice(&entries_read.to_be_bytes());
                self.put_elem(ns, key, &group_sub(group), &v)
            }
            Change::XGroupDel { db, key, group } => {
                let ns = self.ns.ns(*db)?;
                self.del_elem(ns, key, &group_sub(group))?;
                self.wipe_sub_prefix(ns, key, &l::group_prefix(xsub::PEL, group))?;
                self.wipe_sub_prefix(ns, key, &l::group_prefix(xsub::CONSUMER, group))
            }
            Change::XPelPut {
                db,
                key,
                group,
                id,
                consumer,
                delivery_time,
                delivery_count,
            } => {
                let ns = self.ns.ns(*db)?;
                self.ensure_stream(ns, key)?;
                let mut v = Vec::with_capacity(16 + consumer.len());
                v.extend_from_slice(&delivery_time.to_be_bytes());
                v.extend_from_slice(&delivery_count.to_be_bytes());
                v.extend_from_slice(consumer);
                self.put_elem(ns, key, &pel_sub(group, *id), &v)
            }
            Change::XPelDel { db, key, group, id } => {
                let ns = self.ns.ns(*db)?;
                self.del_elem(ns, key, &pel_sub(group, *id))
            }
            Change::XConsumerPut {
                db,
                key,
                group,
                consumer,
                seen_time,
                active_time,
            } => {
                let ns = self.ns.ns(*db)?;
                self.ensure_stream(ns, key)?;
                let mut v = seen_time.to_be_bytes().to_vec();
                v.extend_from_slice(&active_time.to_be_bytes());
                self.put_elem(ns, key, &consumer_sub(group, consumer), &v)
            }
            Change::XConsumerDel {
                db,
                key,
                group,
                consumer,
            } => {
                let ns = self.ns.ns(*db)?;
                self.del_elem(ns, key, &consumer_sub(group, consumer))
            }
            Change::FlushDb { db } => {
                let old = self.ns.ns(*db)?;
                let fresh = self.ns.next_ns;
                self.ns.next_ns = fresh
                    .checked_add(1)
                    .ok_or_else(|| corrupt("namespaces exhausted"))?;
                self.txn
                    .open_table(META)?
                    .insert(l::META_NEXT_NS, u64::from(self.ns.next_ns))?;
                self.set_db_ns(*db, fresh)?;
                self.wipe_ns(old)
            }
            Change::FlushAll => {
                self.keys.retain(|_, _| false)?;
                self.elems.retain(|_, _| false)?;
                Ok(())
            }
            Change::SwapDb { a, b } => {
                let (na, nb) = (self.ns.ns(*a)?, self.ns.ns(*b)?);
                self.set_db_ns(*a, nb)?;
                self.set_db_ns(*b, na)
            }
            Change::Functions { codes } => {
                let mut t = self.txn.open_table(FUNCTIONS)?;
                t.retain(|_, _| false)?;
                for (i, code) in codes.iter().enumerate() {
                    t.insert(i as u64, code.as_ref())?;
                }
                self.rows += codes.len() as u64;
                Ok(())
            }
        }
    }

    /// Deletes every row of a namespace: O(rows).
    fn wipe_ns(&mut self, ns: u32) -> Result<()> {
        let empty: &[u8] = &[];
        match ns.checked_add(1) {
            Some(end) => {
                self.keys
                    .retain_in((ns, empty)..(end, empty), |_, _| false)?;
                self.elems
                    .retain_in((ns, empty, empty)..(end, empty, empty), |_, _| false)?;
            }
            None => {
                self.keys.retain_in((ns, empty).., |_, _| false)?;
                self.elems.retain_in((ns, empty, empty).., |_, _| false)?;
            }
        }
        Ok(())
    }

    fn list_elem(&self, ns: u32, key: &[u8], seq: i64) -> Result<Vec<u8>> {
        self.elem(ns, key, &l::list_sub(seq))?
            .ok_or_else(|| corrupt("missing list element"))
    }

    /// A string patch: in the row while the string stays within [`l::STR_CHUNK`] bytes,
    /// else in chunks (the row's bytes moved into them first).
    fn patch_str(&mut self, ns: u32, key: &[u8], r: Row, offset: u64, bytes: &[u8]) -> Result<()> {
        let end = offset
            .checked_add(bytes.len() as u64)
            .ok_or_else(|| corrupt("string patch"))?;
        let (&enc, data) = r
            .header
            .split_first()
            .ok_or_else(|| corrupt("string row"))?;
        if enc == l::str_enc::CHUNKED {
            let len = l::read_u64(data).ok_or_else(|| corrupt("chunked string row"))?;
            return self.patch_chunks(ns, key, r.expire_at, len, offset, bytes);
        }
        let new_len = (data.len() as u64).max(end);
        if new_len <= l::STR_CHUNK as u64 {
            let mut hdr = Vec::with_capacity(1 + new_len as usize);
            hdr.push(l::str_enc::RAW);
            hdr.extend_from_slice(data);
            hdr.resize(1 + new_len as usize, 0);
            hdr[1 + offset as usize..1 + end as usize].copy_from_slice(bytes);
            return self.put_row(ns, key, tag::STRING, r.expire_at, &hdr);
        }
        for (i, c) in data.chunks(l::STR_CHUNK).enumerate() {
            self.put_elem(ns, key, &(i as u64).to_be_bytes(), c)?;
        }
        self.patch_chunks(ns, key, r.expire_at, data.len() as u64, offset, bytes)
    }

    /// Rewrites the chunks a patch touches, and those a growth adds (zero-filled).
    fn patch_chunks(
        &mut self,
        ns: u32,
        key: &[u8],
        at: Option<u64>,
        len: u64,
        offset: u64,
        bytes: &[u8],
    ) -> Result<()> {
        let c = l::STR_CHUNK as u64;
        let end = offset + bytes.len() as u64;
        let new_len = len.max(end);
        let mut touched: Vec<u64> = Vec::new();
        if new_len > len {
            touched.extend(len / c..=(new_len - 1) / c);
        }
        if !bytes.is_empty() {
            touched.extend(offset / c..=(end - 1) / c);
        }
        touched.sort_unstable();
        touched.dedup();
        for i in touched {
            let start = i * c;
            let size = (new_len - start).min(c) as usize;
            let mut chunk = if start < len {
                self.elem(ns, key, &i.to_be_bytes())?
                    .ok_or_else(|| corrupt("missing string chunk"))?
            } else {
                Vec::new()
            };
            chunk.resize(size, 0);
            let (lo, hi) = (offset.max(start), end.min(start + size as u64));
            if lo < hi {
                chunk[(lo - start) as usize..(hi - start) as usize]
                    .copy_from_slice(&bytes[(lo - offset) as usize..(hi - offset) as usize]);
            }
            self.put_elem(ns, key, &i.to_be_bytes(), &chunk)?;
        }
        let mut hdr = vec![l::str_enc::CHUNKED];
        hdr.extend_from_slice(&new_len.to_be_bytes());
        self.put_row(ns, key, tag::STRING, at, &hdr)
    }

    /// The stream's row, created (zero counters) if missing.
    fn ensure_stream(&mut self, ns: u32, key: &[u8]) -> Result<Row> {
        let zero = stream_header((0, 0), (0, 0), (0, 0), 0);
        let (r, fresh) = self.ensure(ns, key, tag::STREAM, &zero)?;
        if fresh {
            self.put_row(ns, key, tag::STREAM, None, &r.header)?;
        }
        Ok(r)
    }

    fn put_value(&mut self, ns: u32, key: &[u8], v: &Value, at: Option<u64>) -> Result<()> {
        let mut failed = None;
        let (t, hdr) = value_rows(v, |sub, row| {
            if failed.is_none() {
                if let Err(e) = self.put_elem(ns, key, sub, row) {
                    failed = Some(e);
                }
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        self.put_row(ns, key, t, at, &hdr)
    }
}

/// A whole value as the store keeps it: hands every element row `(sub, value)` to `elem` and
/// returns the key row's type tag and header. (The write-ahead log encodes `Put` this way
/// too, and both are read back by the loader's builder.)
pub(super) fn value_rows(v: &Value, mut elem: impl FnMut(&[u8], &[u8])) -> (u8, Vec<u8>) {
    match v {
        Value::Str(s) => (tag::STRING, str_header(s)),
        Value::List(list) => {
            for (i, e) in list.iter().enumerate() {
                elem(&l::list_sub(i as i64), e);
            }
            (tag::LIST, list_header(0, list.len() as i64))
        }
        Value::Hash(h) => {
            let mut seq = 0u64;
            let ttls = h.has_ttls();
            for (f, val) in h.iter() {
                let ttl = if ttls { h.ttl(f) } else { None };
                elem(f, &l::hash_row(seq, ttl, val));
                seq += 1;
            }
            (tag::HASH, seq.to_be_bytes().to_vec())
        }
        Value::Set(s) => {
            let mut seq = 0u64;
            for m in s.iter() {
                let mb: Bytes = m.to_bytes();
                elem(&mb, &seq.to_be_bytes());
                seq += 1;
            }
            (tag::SET, seq.to_be_bytes().to_vec())
        }
        Value::ZSet(z) => {
            for it in z.iter() {
                elem(&it.member, &it.score.to_bits().to_be_bytes());
            }
            (tag::ZSET, Vec::new())
        }
        Value::Stream(s) => {
            use crate::types::stream::StreamId;
            let pair = |i: StreamId| (i.ms, i.seq);
            for (id, fields) in s.range(StreamId::MIN, StreamId::MAX, false) {
                elem(&entry_sub(pair(*id)), &l::encode_fields(fields));
            }
            for (name, g) in &s.groups {
                let mut v = l::id_bytes(pair(g.last_id)).to_vec();
                v.extend_from_slice(&g.entries_read.to_be_bytes());
                elem(&group_sub(name), &v);
                for (id, n) in &g.pel {
                    let mut v = n.delivery_time.to_be_bytes().to_vec();
                    v.extend_from_slice(&n.delivery_count.to_be_bytes());
                    v.extend_from_slice(&n.consumer);
                    elem(&pel_sub(name, pair(*id)), &v);
                }
                for (cname, c) in &g.consumers {
                    let mut v = c.seen_time.to_be_bytes().to_vec();
                    v.extend_from_slice(&c.active_time.to_be_bytes());
                    elem(&consumer_sub(name, cname), &v);
                }
            }
            let hdr = stream_header(
                pair(s.last_id),
                pair(s.first_id),
                pair(s.max_deleted),
                s.entries_added,
            );
            (tag::STREAM, hdr)
        }
    }
}

pub(super) fn str_header(s: &StrVal) -> Vec<u8> {
    let mut v = Vec::new();
    str_header_into(s, &mut v);
    v
}

/// Appends a string's stored header (encoding byte, then its bytes) to `out`, without the
/// intermediate vector of [`str_header`] (the per-SET paths: log encoding, checkpoint row).
pub(super) fn str_header_into(s: &StrVal, out: &mut Vec<u8>) {
    match s {
        StrVal::Int(i) => {
            out.push(l::str_enc::INT);
            out.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes());
        }
        StrVal::Bytes { data, raw } => {
            out.reserve(1 + data.len());
            out.push(if *raw {
                l::str_enc::RAW
            } else {
                l::str_enc::EMBSTR
            });
            out.extend_from_slice(data);
        }
    }
}

/// The length [`str_header_into`] appends.
pub(super) fn str_header_len(s: &StrVal) -> usize {
    match s {
        StrVal::Int(i) => 1 + itoa::Buffer::new().format(*i).len(),
        StrVal::Bytes { data, .. } => 1 + data.len(),
    }
}

fn list_header(head: i64, tail: i64) -> Vec<u8> {
    let mut v = head.to_be_bytes().to_vec();
    v.extend_from_slice(&tail.to_be_bytes());
    v
}

pub(super) fn read_list_header(h: &[u8]) -> Result<(i64, i64)> {
    match (l::read_i64(h), h.get(8..).and_then(l::read_i64)) {
        (Some(a), Some(b)) if a <= b => Ok((a, b)),
        _ => Err(corrupt("list header")),
    }
}

fn stream_header(last: (u64, u64), first: (u64, u64), maxdel: (u64, u64), added: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(l::STREAM_HEADER);
    v.extend_from_slice(&l::id_bytes(last));
    v.extend_from_slice(&l::id_bytes(first));
    v.extend_from_slice(&l::id_bytes(maxdel));
    v.extend_from_slice(&added.to_be_bytes());
    v
}

fn entry_sub(id: (u64, u64)) -> [u8; 17] {
    let mut b = [0u8; 17];
    b[0] = xsub::ENTRY;
    b[1..].copy_from_slice(&l::id_bytes(id));
    b
}

fn group_sub(group: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(1 + group.len());
    v.push(xsub::GROUP);
    v.extend_from_slice(group);
    v
}

fn pel_sub(group: &[u8], id: (u64, u64)) -> Vec<u8> {
    let mut v = l::group_prefix(xsub::PEL, group);
    v.extend_from_slice(&l::id_bytes(id));
    v
}

fn consumer_sub(group: &[u8], consumer: &[u8]) -> Vec<u8> {
    let mut v = l::group_prefix(xsub::CONSUMER, group);
    v.extend_from_slice(consumer);
    v
}
