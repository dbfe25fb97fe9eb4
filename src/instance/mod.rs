//! What a running instance holds, below the commands and above the engine: the shared
//! state ([`state::Shared`]: keyspace, config, statistics), the ACL users ([`acl`]), each connection's [`session`],
//! the client registry, the pub/sub and blocked-client registries, keyspace-event emission,
//! MONITOR's fan-out, client-side caching's tracking table, CLIENT PAUSE, the slow log and latency records, the test double's
//! faults and command log, and the Redis error texts ([`errors`]). Commands (`cmd/`), scripts and the network edge (`server/`) build on it;
//! it knows none of them.

pub mod acl;
pub mod blocking;
pub mod clients;
pub mod cmdlog;
pub mod errors;
pub mod faults;
pub mod latency;
pub mod metrics;
pub mod monitor;
pub mod notify;
pub mod obuf;
pub mod pause;
pub mod pubsub;
pub mod session;
pub mod slowlog;
pub mod state;
pub mod tracking;
