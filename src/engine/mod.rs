//! The in-memory keyspace: 16 databases, each split into shards chosen by hash tag
//! (DESIGN.md §4, §8), lazy + active expiry driven by [`crate::clock::Clock`], and the
//! locking discipline that makes commands atomic while unrelated keys run in parallel.
//!
//! Locking: a keyspace-wide gate (`RwLock`) is held shared by ordinary commands, which then
//! lock the shards of their keys in ascending order; `EXEC`, scripts and whole-keyspace
//! commands hold the gate exclusively and may touch any shard.

pub mod change;
pub mod evict;
pub mod journal;
mod keyspace;
pub mod shard;

pub use keyspace::{
    shard_of, Access, Garbage, KeyHint, Keyspace, KeyspaceStats, SCAN_POS_BITS, SHARDS,
};
pub use shard::{scan_pos, ScanStep, Shard, ShardData};
