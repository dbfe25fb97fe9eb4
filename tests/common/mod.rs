//! The integration tests' one toolkit. Each test binary includes it with `mod common;`
//! (`#[macro_use] mod common;` for [`both_protocols!`]) and uses only part of it; every
//! item is re-exported here, so `common::connect`, `common::Conn`, … work unqualified.
//!
//! Contents:
//! - **servers** ([`servers`]):
//!   - respite in process (`respite::TestServer`): [`real_server`], [`manual_server`],
//!     [`durable_server`]; [`Target`], an in-process respite or the external redis-server
//!     oracle named by `RESPITE_ORACLE`;
//!   - processes on loopback ports, killed on drop ([`ServerProcess`], restartable on
//!     their port): the respite binary ([`ServerProcess::respite`], `$RESPITE_BIN`),
//!     redis-server ([`ServerProcess::redis`], `$REDIS_SERVER`), valkey-server
//!     ([`ServerProcess::valkey`], found by [`valkey_server_bin`]); [`free_port`].
//! - **clients**:
//!   - redis-rs, async, RESP2 or RESP3 ([`clients`]): [`connect`], [`connect_port`],
//!     [`connect_url`] (no redis-rs connect or reply timeouts on purpose: [`HANG_GUARD`]
//!     catches hangs), [`q`], [`try_q`], [`c`], [`Proto`], [`both_protocols!`]; runaway
//!     scripts: [`spawn_runaway`], [`until_busy`], [`killed_reply`];
//!   - exact bytes, async ([`raw`]): [`Raw`] (send bytes, expect bytes), [`frame`],
//!     [`bulk`], [`show`];
//!   - exact shapes, sync ([`resp`]): [`Conn`] decodes each reply into a [`Frame`] that
//!     keeps RESP2/RESP3 distinctions; [`Wire`] returns each reply's exact bytes;
//!   - redis-rs `Value` readers ([`values`], not re-exported): `text`, `int`, `items`,
//!     `fields`, `entry_ids`, `read_reply`, `any_reply`, ….
//! - **helpers** ([`helpers`]): the key-event recorder [`keyevents`] and
//!   [`assert_keyevents_match_redis`]; the WATCH probe [`WatchProbe`]
//!   ([`watched_exec_runs`]); the seeded RNG [`Rng`]; waits on conditions
//!   ([`wait_until`], [`until_blocked`], [`until_blocked_sync`], [`wait_ping`],
//!   [`wait_busy`], [`wait_pong`], [`joined`], [`join_all`]); INFO fields ([`info_field`],
//!   [`info_text`], [`conn_info`], [`conn_info_int`]); [`unique`] key names; the shipped
//!   Lua scripts ([`lua_source`], [`lua_script`]); the server-panic counter
//!   ([`watch_server_panics`]); S2/S7 checks ([`admitted_by_user_limit`],
//!   [`assert_saw_one_to`]).
//! - **scenarios** ([`s6`]): SCENARIOS.md S6's checkpoint, script calls and load.
//!
//! Proxy fleets (nodes behind an in-process proxy) are in `tests/proxy_fleet`, built on
//! these servers and clients.
#![allow(dead_code, unused_imports)]

use std::time::Duration;

pub mod clients;
pub mod helpers;
pub mod raw;
pub mod resp;
pub mod s6;
pub mod servers;
pub mod values;

pub use clients::*;
pub use helpers::*;
pub use raw::*;
pub use resp::*;
pub use s6::checkpoint;
pub use servers::*;

/// How long any single wait may take before the test is declared hung. This is a guard
/// against deadlocks, not a performance threshold.
pub const HANG_GUARD: Duration = Duration::from_secs(10);

/// The longer guard of the process-based suites: debug builds on two loaded cores (the
/// differential suites run side by side) can take seconds on a big case.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Runs an `async fn(Proto)` scenario once per protocol: `both_protocols!(my_test);` makes
/// the tests `my_test::resp2` and `my_test::resp3` (needs `#[macro_use] mod common;`).
#[allow(unused_macros)]
macro_rules! both_protocols {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn resp2() {
                super::$name(crate::common::Proto::Resp2).await
            }
            #[tokio::test]
            async fn resp3() {
                super::$name(crate::common::Proto::Resp3).await
            }
        }
    )*};
}
