//! Old files are built with redb 2.6 from the rows today's code writes: the rows' bytes are
//! the layout's (unchanged since version 2), only the container and the tuple encoding are
//! redb 2's, as respite builds on redb 2.6 wrote them.

use super::super::layout::{self as l, DBS, ELEMS, KEYS, META};
use super::super::tests::{b, dump, every_type_puts, put};
use super::super::{Change, PersistError, Store, FILE_NAME};
use super::{legacy_tuples, temp_path, OLD_DBS, OLD_ELEMS, OLD_KEYS, OLD_META};
use crate::types::value::{StrVal, Value};
use redb::{ReadableDatabase, ReadableTable};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Every row of a store's four tables.
#[derive(Debug, Default, PartialEq)]
struct Rows {
    meta: Vec<(String, u64)>,
    dbs: Vec<(u32, u32)>,
    keys: Vec<(KeyRowKey, Vec<u8>)>,
    elems: Vec<(ElemRowKey, Vec<u8>)>,
}

type KeyRowKey = (u32, Vec<u8>);
type ElemRowKey = (u32, Vec<u8>, Vec<u8>);

impl Rows {
    fn set_meta(&mut self, name: &str, v: Option<u64>) {
        self.meta.retain(|(k, _)| k != name);
        if let Some(v) = v {
            self.meta.push((name.to_string(), v));
            self.meta.sort();
        }
    }
}

fn rows(store: &Store) -> Rows {
    let r = store.database().begin_read().unwrap();
    let mut out = Rows::default();
    for row in r.open_table(META).unwrap().iter().unwrap() {
        let (k, v) = row.unwrap();
        out.meta.push((k.value().to_string(), v.value()));
    }
    for row in r.open_table(DBS).unwrap().iter().unwrap() {
        let (k, v) = row.unwrap();
        out.dbs.push((k.value(), v.value()));
    }
    for row in r.open_table(KEYS).unwrap().iter().unwrap() {
        let (k, v) = row.unwrap();
        let (ns, key) = k.value();
        out.keys.push(((ns, key.to_vec()), v.value().to_vec()));
    }
    for row in r.open_table(ELEMS).unwrap().iter().unwrap() {
        let (k, v) = row.unwrap();
        let (ns, key, sub) = k.value();
        out.elems
            .push(((ns, key.to_vec(), sub.to_vec()), v.value().to_vec()));
    }
    out
}

/// Writes `rows` with redb 2.6 as a file-format-2 file (what respite on redb 2.6 made), or
/// converted by redb 2.6's `Database::upgrade()` to file format 3.
fn write_redb2(path: &Path, rows: &Rows, upgraded: bool) {
    let (meta, dbs, keys, elems) = (OLD_META, OLD_DBS, OLD_KEYS, OLD_ELEMS);
    let mut db = redb2::Database::create(path).unwrap();
    let w = db.begin_write().unwrap();
    {
        let mut t = w.open_table(meta).unwrap();
        for (k, v) in &rows.meta {
            t.insert(k.as_str(), v).unwrap();
        }
        let mut t = w.open_table(dbs).unwrap();
        for (k, v) in &rows.dbs {
            t.insert(k, v).unwrap();
        }
        let mut t = w.open_table(keys).unwrap();
        for ((ns, k), v) in &rows.keys {
            t.insert((*ns, k.as_slice()), v.as_slice()).unwrap();
        }
        let mut t = w.open_table(elems).unwrap();
        for ((ns, k, s), v) in &rows.elems {
            t.insert((*ns, k.as_slice(), s.as_slice()), v.as_slice())
                .unwrap();
        }
    }
    w.commit().unwrap();
    if upgraded {
        assert!(db.upgrade().unwrap(), "redb 2.6 converted the file");
    }
}

/// A store of every type, with SWAPDB/FLUSHDB namespace rows and a checkpoint record, as the
/// rows today's code writes; the file is then replaced by a redb 2.6 one of layout `version`.
fn old_store(dir: &Path, version: u64, upgraded: bool) -> (Rows, super::super::tests::Dump) {
    let store = Store::open(dir).unwrap();
    store.apply(&every_type_puts(), true).unwrap();
    let more = [
        Change::SwapDb { a: 1, b: 4 },
        Change::FlushDb { db: 5 },
        put(
            5,
            b"after-flush",
            Value::Str(StrVal::Int(5)),
            Some(8_000_000),
        ),
    ];
    store.apply_logged(&more, 17).unwrap();
    let mut rows = rows(&store);
    let keyspace = dump(&store, 0);
    drop(store);
    assert!(!rows.dbs.is_empty() && !rows.elems.is_empty());
    rows.set_meta(l::META_VERSION, Some(version));
    if version == 1 {
        rows.set_meta(l::META_WAL_APPLIED, None);
    }
    super::super::remove_files(dir).unwrap();
    write_redb2(&dir.join(FILE_NAME), &rows, upgraded);
    (rows, keyspace)
}

/// What the upgraded file must hold: the old rows, at the current version.
fn expect_current(store: &Store, mut old: Rows) {
    old.set_meta(l::META_VERSION, Some(l::FORMAT_VERSION));
    assert_eq!(rows(store), old);
}

/// Opening `dir` fails with `UnknownVersion { found }` and leaves the file's bytes as they
/// were; a mismatch names where they differ (not printing them: the file is megabytes).
pub(in crate::persist) fn assert_refused_untouched(dir: &Path, found: u64) -> PersistError {
    let path = dir.join(FILE_NAME);
    let before = std::fs::read(&path).unwrap();
    let err = Store::open(dir).err().expect("refused");
    let known = l::FORMAT_VERSION;
    assert_eq!(err, PersistError::UnknownVersion { found, known });
    let now = std::fs::read(&path).unwrap();
    let first = now.iter().zip(&before).position(|(a, b)| a != b);
    assert!(
        now == before,
        "file bytes changed: {} bytes, were {}; first difference at {first:?}",
        now.len(),
        before.len()
    );
    err
}

fn inode(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().ino()
}

#[test]
fn a_redb2_file_is_copied_into_the_current_format_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let (old, keyspace) = old_store(dir.path(), 2, false);
    // redb 4 refuses the file from its header: the case `open_current` copies.
    assert!(matches!(
        redb::ReadOnlyDatabase::open(&path).err(),
        Some(redb::DatabaseError::UpgradeRequired(2))
    ));
    let old_inode = inode(&path);
    {
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(dump(&store, 0), keyspace);
        assert_eq!(store.wal_applied().unwrap(), 17);
        expect_current(&store, old);
        // Writes work on the new file.
        store
            .apply(&[put(0, b"new", Value::Str(StrVal::Int(1)), None)], true)
            .unwrap();
    }
    assert_ne!(inode(&path), old_inode, "the copy replaced the file");
    assert!(!temp_path(&path).exists());
    // A second open is a no-op: the same file (a copy is a new inode), the same rows.
    let ino = inode(&path);
    let store = Store::open(dir.path()).unwrap();
    let now = rows(&store);
    drop(store);
    assert_eq!(inode(&path), ino);
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(rows(&store), now);
    assert_eq!(dump(&store, 0).len(), keyspace.len() + 1);
}

/// redb 2.6's `upgrade()` converts the container only, keeping redb 2's tuples, which redb 4
/// cannot read (respite never made such a file): refused, saying why.
#[test]
fn a_file_converted_by_redb2_upgrade_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    old_store(dir.path(), 2, true);
    assert!(matches!(
        redb::ReadOnlyDatabase::open(&path).err(),
        Some(redb::DatabaseError::RepairAborted)
    ));
    let err = Store::open(dir.path()).err().expect("refused");
    assert!(
        matches!(&err, PersistError::Corrupt(m) if m.contains("upgrade()")),
        "{err}"
    );
    let db = redb::Database::create(&path).unwrap();
    assert!(legacy_tuples(&db).unwrap());
}

/// Version 1 (before the write-ahead log): the same tables, no `wal_applied`.
#[test]
fn a_version_1_file_is_upgraded() {
    let dir = tempfile::tempdir().unwrap();
    let (old, keyspace) = old_store(dir.path(), 1, false);
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.wal_applied().unwrap(), 0);
    assert_eq!(dump(&store, 0), keyspace);
    expect_current(&store, old);
}

#[test]
fn an_old_file_of_an_unknown_version_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    old_store(dir.path(), 999, false);
    assert_refused_untouched(dir.path(), 999);
    assert!(!temp_path(&path).exists());
}

/// A crash during the copy leaves the old file in place and a partial copy beside it: the
/// next open deletes the copy and upgrades again.
#[test]
fn a_partial_copy_left_by_a_crash_is_redone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let (old, keyspace) = old_store(dir.path(), 2, false);
    std::fs::write(temp_path(&path), b"half a redb file").unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(dump(&store, 0), keyspace);
    expect_current(&store, old);
    assert!(!temp_path(&path).exists());
}

/// A redb 2 file with no tables (its first open was cut short) becomes an empty store.
#[test]
fn an_empty_redb2_file_becomes_an_empty_store() {
    let dir = tempfile::tempdir().unwrap();
    drop(redb2::Database::create(dir.path().join(FILE_NAME)).unwrap());
    let store = Store::open(dir.path()).unwrap();
    assert!(dump(&store, 0).is_empty());
    store
        .apply(&[put(0, b"k", Value::Str(StrVal::Int(1)), None)], true)
        .unwrap();
    assert_eq!(dump(&store, 0).keys().next(), Some(&(0, b(b"k"))));
}
