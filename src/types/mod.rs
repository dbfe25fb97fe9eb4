//! Pure data structures and algorithms with no I/O and no knowledge of the server.

pub mod geo;
pub mod glob;
pub mod hash;
pub mod hll;
pub mod list;
pub mod long_double;
pub mod placement;
pub mod pqsort;
pub mod rdb;
pub mod set;
pub mod stream;
pub mod value;
pub mod zset;
