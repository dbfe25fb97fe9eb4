//! Durable storage on redb (DESIGN.md §6): the store of record behind the in-memory
//! keyspace when `--engine redb` is used.
//!
//! - [`Store::open`] creates or opens `<dir>/respite.redb` and checks its format version
//!   (a file written by redb 2 is copied into the current format first: [`upgrade`]).
//! - [`Store::apply`] writes a batch of element-level [`Change`]s in one transaction (group
//!   commit happens above: a batch holds many commands' changes), durable or not.
//! - [`Store::load`] rebuilds every key as an in-memory [`Value`](crate::types::value::Value).
//!
//! - [`wal`]: the write-ahead log group commit appends to, and its recovery.
//!
//! The layout is documented in [`layout`]. No redb type leaves this module.

pub mod access;
mod coalesce;
pub(crate) mod codec;
pub mod committer;
pub mod layout;
mod load;
mod store;
mod upgrade;
pub mod wal;

#[cfg(test)]
mod tests;

pub use crate::engine::change::{Change, Id};
pub use committer::{Fsync, Persistence};
pub use load::{LoadOptions, LoadStats};
pub use store::{Store, FILE_NAME};

use std::fmt;

/// Deletes a durable server's files in `dir` (the store and its write-ahead log); files
/// that are not there are fine.
pub fn remove_files(dir: &std::path::Path) -> std::io::Result<()> {
    let gone = |r: std::io::Result<()>| match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    };
    gone(std::fs::remove_file(dir.join(FILE_NAME)))?;
    gone(std::fs::remove_file(upgrade::temp_path(
        &dir.join(FILE_NAME),
    )))?;
    gone(std::fs::remove_dir_all(dir.join(wal::DIR)))
}

#[derive(Debug, Clone, PartialEq)]
pub enum PersistError {
    /// The file system or redb failed to read or write.
    Io(String),
    /// The file's contents do not follow the layout.
    Corrupt(String),
    /// The file was written by a build with another format version.
    UnknownVersion { found: u64, known: u64 },
    /// A failure injected by [`Store::fail_next_commits`].
    Injected,
}

impl fmt::Display for PersistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PersistError::Io(e) => write!(f, "storage I/O error: {e}"),
            PersistError::Corrupt(e) => write!(f, "storage file is corrupt: {e}"),
            PersistError::UnknownVersion { found, known } => write!(
                f,
                "storage file has unknown format version {found} (this build knows {known}); \
                 refusing to open it"
            ),
            PersistError::Injected => write!(f, "storage I/O error: injected failure"),
        }
    }
}

impl std::error::Error for PersistError {}

fn io<E: fmt::Display>(e: E) -> PersistError {
    PersistError::Io(e.to_string())
}

impl From<redb::StorageError> for PersistError {
    fn from(e: redb::StorageError) -> Self {
        match e {
            redb::StorageError::Corrupted(s) => PersistError::Corrupt(s),
            e => io(e),
        }
    }
}

impl From<redb::DatabaseError> for PersistError {
    fn from(e: redb::DatabaseError) -> Self {
        match e {
            redb::DatabaseError::Storage(s) => s.into(),
            e => io(e),
        }
    }
}

impl From<redb::TransactionError> for PersistError {
    fn from(e: redb::TransactionError) -> Self {
        match e {
            redb::TransactionError::Storage(s) => s.into(),
            e => io(e),
        }
    }
}

impl From<redb::TableError> for PersistError {
    fn from(e: redb::TableError) -> Self {
        match e {
            redb::TableError::Storage(s) => s.into(),
            e => io(e),
        }
    }
}

impl From<redb::CommitError> for PersistError {
    fn from(e: redb::CommitError) -> Self {
        match e {
            redb::CommitError::Storage(s) => s.into(),
            e => io(e),
        }
    }
}

fn corrupt(what: &str) -> PersistError {
    PersistError::Corrupt(what.to_string())
}
