//! Files written by redb 2.x (respite's layout versions 1 and 2) are copied into the current
//! format on open.
//!
//! Two things changed under the same tables when respite moved from redb 2.6 to redb 4: the
//! container (redb file format 2 → 3, which redb ≥ 3 requires) and the encoding of
//! variable-width tuple keys (redb 3.0; the `keys` and `elems` tables use them). redb 2.6's
//! `Database::upgrade()` converts only the container, and redb 4 no longer reads the old
//! tuples (`Legacy` was removed in 4.0), so an in-place upgrade cannot work: the old file is
//! read with redb 2.6 (the `redb2` dependency, used nowhere else) and every row is copied into
//! `respite.redb.upgrading`, committed durably, then renamed over the old file. A crash before
//! the rename leaves the old file untouched (the half-made copy is deleted on the next open);
//! the rename is atomic. The copy records [`FORMAT_VERSION`](l::FORMAT_VERSION) 3.
//!
//! An old file is recognised by redb 4 itself, opened read-only: a file-format-2 file fails
//! to open with `UpgradeRequired` (raised from the header). respite never made the other kind
//! of redb 2 file, one converted to file format 3 by redb 2.6's `upgrade()`: redb 4 sees
//! such a file as in need of repair, repairs it, and then its tuple tables fail the type
//! check (`TableTypeMismatch`); it is refused with an error that says so.

use super::layout::{self as l, table, DBS, ELEMS, KEYS, META};
use super::PersistError;
use redb::{Database, DatabaseError, ReadOnlyDatabase, ReadableDatabase, TableError, TableHandle};
use redb2::TableDefinition as Old;
use std::path::{Path, PathBuf};
use std::time::Instant;

type Result<T> = std::result::Result<T, PersistError>;

/// Where the copy is built before it replaces the old file.
pub(super) fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".upgrading");
    PathBuf::from(name)
}

/// Opens (or creates) the redb file at `path` in the current format, copying an old-format
/// file into it first. A file of an unknown layout version is refused untouched.
pub(super) fn open_current(path: &Path) -> Result<Database> {
    let tmp = temp_path(path);
    // A copy left by a crash during an earlier upgrade: the old file is still in place.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(super::io(e)),
        _ => {}
    }
    // Looked at read-only first: a writable open by redb 4 writes to the file, even one it
    // then closes unchanged (a refused file stays untouched), and redb 2.6 cannot read a
    // file redb 4 has written.
    let old_format = match ReadOnlyDatabase::open(path) {
        Err(DatabaseError::UpgradeRequired(v)) => v,
        Ok(ro) => {
            match read_version(&ro)? {
                Some(v) if v != l::FORMAT_VERSION && !l::COMPATIBLE_VERSIONS.contains(&v) => {
                    return Err(PersistError::UnknownVersion {
                        found: v,
                        known: l::FORMAT_VERSION,
                    })
                }
                _ => {}
            }
            drop(ro);
            return Database::create(path).map_err(Into::into);
        }
        // Missing, empty, or not closed cleanly (read-only opens do not repair): the
        // writable open creates or repairs it.
        Err(_) => {
            let db = Database::create(path)?;
            if legacy_tuples(&db)? {
                return Err(super::corrupt(
                    "this file was converted to redb file format 3 by redb 2.6's upgrade(), \
                     which keeps redb 2's tuple encoding; respite reads redb 2 files only in \
                     redb file format 2",
                ));
            }
            return Ok(db);
        }
    };
    let start = Instant::now();
    let copied = copy(path, &tmp)?;
    std::fs::rename(&tmp, path).map_err(super::io)?;
    if let Some(dir) = path.parent() {
        // The rename is durable once the directory is.
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(super::io)?;
    }
    tracing::warn!(
        path = %path.display(),
        redb_file_format = old_format,
        layout_version = copied.version,
        rows = copied.rows,
        elapsed_ms = start.elapsed().as_millis() as u64,
        "upgraded a store written by redb 2 to the current format (layout version {})",
        l::FORMAT_VERSION
    );
    Ok(Database::create(path)?)
}

/// The layout version a redb 4 file records (`None`: no meta table or no version).
fn read_version(db: &impl ReadableDatabase) -> Result<Option<u64>> {
    let r = db.begin_read()?;
    match r.open_table(META) {
        Ok(t) => Ok(t.get(l::META_VERSION)?.map(|g| g.value())),
        Err(TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Whether a file redb 4 opened still holds redb 2's tuple encoding.
fn legacy_tuples(db: &Database) -> Result<bool> {
    let r = db.begin_read()?;
    let mismatch = |e: TableError| match e {
        TableError::TableTypeMismatch { .. } => Ok(true),
        TableError::TableDoesNotExist(_) => Ok(false),
        e => Err(PersistError::from(e)),
    };
    if let Err(e) = r.open_table(KEYS) {
        return mismatch(e);
    }
    match r.open_table(ELEMS) {
        Ok(_) => Ok(false),
        Err(e) => mismatch(e),
    }
}

/// The layout's tables as redb 2.6 wrote them: the same names and types.
pub(super) const OLD_META: Old<&str, u64> = Old::new(table::META);
pub(super) const OLD_DBS: Old<u32, u32> = Old::new(table::DBS);
pub(super) const OLD_KEYS: Old<(u32, &[u8]), &[u8]> = Old::new(table::KEYS);
pub(super) const OLD_ELEMS: Old<l::ElemKey, &[u8]> = Old::new(table::ELEMS);

/// What [`copy`] did.
struct Copied {
    /// The layout version the old file recorded.
    version: u64,
    rows: u64,
}

/// redb 2.6's errors, mapped as [`PersistError`]'s `From` impls map redb 4's.
fn v2<E: Into<redb2::Error>>(e: E) -> PersistError {
    match e.into() {
        redb2::Error::Corrupted(s) => PersistError::Corrupt(s),
        e => super::io(e),
    }
}

/// Copies every row of the redb 2 file at `from` into a new file at `to`, recording the
/// current layout version. The old file's tables must be respite's (version 1 or 2).
fn copy(from: &Path, to: &Path) -> Result<Copied> {
    use redb2::{ReadableTable, TableHandle as _};
    let (meta, dbs, keys, elems) = (OLD_META, OLD_DBS, OLD_KEYS, OLD_ELEMS);

    // Opening repairs a file whose last writer crashed.
    let old = redb2::Database::open(from).map_err(v2)?;
    let r = old.begin_read().map_err(v2)?;
    let mut names = Vec::new();
    for t in r.list_tables().map_err(v2)? {
        names.push(t.name().to_string());
    }
    if let Some(n) = names
        .iter()
        .find(|n| ![META.name(), DBS.name(), KEYS.name(), ELEMS.name()].contains(&n.as_str()))
    {
        return Err(PersistError::Corrupt(format!("unknown table {n:?}")));
    }
    let has = |t: &str| names.iter().any(|n| n == t);
    let version = if has(META.name()) {
        r.open_table(meta)
            .map_err(v2)?
            .get(l::META_VERSION)
            .map_err(v2)?
            .map(|g| g.value())
    } else {
        None
    };
    let version = match version {
        Some(v @ (1 | 2)) => v,
        Some(found) => {
            return Err(PersistError::UnknownVersion {
                found,
                known: l::FORMAT_VERSION,
            })
        }
        None if names.is_empty() => 0,
        None => return Err(super::corrupt("no format version in a non-empty file")),
    };

    let new = Database::create(to)?;
    let w = new.begin_write()?;
    let mut rows = 0u64;
    // One loop per table: the four key/value types differ (in each of the two redb's).
    macro_rules! copy_rows {
        ($old:expr, $new:expr) => {
            if has($new.name()) {
                let mut t = w.open_table($new)?;
                for row in r.open_table($old).map_err(v2)?.iter().map_err(v2)? {
                    let (k, v) = row.map_err(v2)?;
                    t.insert(k.value(), v.value())?;
                    rows += 1;
                }
            }
        };
    }
    copy_rows!(meta, META);
    copy_rows!(dbs, DBS);
    copy_rows!(keys, KEYS);
    copy_rows!(elems, ELEMS);
    if has(META.name()) {
        w.open_table(META)?
            .insert(l::META_VERSION, l::FORMAT_VERSION)?;
    }
    w.commit()?;
    Ok(Copied { version, rows })
}

#[cfg(test)]
pub(super) mod tests;
