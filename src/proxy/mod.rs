//! The sharding proxy (DESIGN.md §7): `respite proxy` lets existing clients use a fleet of
//! independent Redis/Valkey primaries as one server. Every key goes to the node that the
//! placement contract (§8, [`crate::types::placement`]) names for its hash tag.
//!
//! - [`config`]: nodes (stable id + URL, passwords redacted), placement, proxy settings.

pub mod config;
pub mod rebalance;
pub mod sync_client;
