//! The integration tests' one toolkit. Each test binary includes it with `mod common;`
//! (`#[macro_use] mod common;` for [`both_protocols!`]) and uses only part of it; every
//! item is re-exported here, so `common::connect`, `common::Conn`, … work unqualified.
//!
//! Contents:
//! - **servers** ([`servers`]):
//!   - respite in process: [`real_server`], [`manual_server`], [`durable_server`]
//!     (`respite::TestServer`), and [`Target`] (in-process respite, or an external
//!     redis-server oracle named by `RESPITE_ORACLE`);
//!   - external processes, killed on drop ([`ServerProcess`]): the respite binary
//!     ([`ServerProcess::respite`]), Debian's redis-server ([`ServerProcess::redis`]), a
//!     valkey-server ([`ServerProcess::valkey`], found by [`valkey_server_bin`]);
//!   - [`free_port`].
//! - **clients**:
//!   - redis-rs, async, RESP2 or RESP3 ([`clients`]): [`connect`] and [`connect_port`]
//!     (no redis-rs connect or reply timeouts; [`HANG_GUARD`] catches hangs), [`q`], [`c`],
//!     [`Proto`], [`both_protocols!`];
//!   - exact bytes, async ([`raw`]): [`Raw`] (send bytes, expect bytes), [`frame`],
//!     [`bulk`], [`show`];
//!   - exact shapes, sync ([`resp`]): [`Conn`] decoding every reply into a [`Frame`] that
//!     keeps RESP2/RESP3 distinctions, and [`Wire`] returning each reply's exact bytes;
//!   - reply helpers for redis-rs `Value`s ([`values`]): [`values::text`],
//!     [`values::int`], [`values::items`], [`values::fields`], ….
//! - **helpers** ([`helpers`]): the key-event recorder [`keyevents`], the WATCH probe
//!   [`watched_exec_runs`], the seeded RNG [`Rng`], waits ([`wait_until`],
//!   [`until_blocked`], [`until_blocked_sync`]), INFO parsing ([`info_field`],
//!   [`info_text`]), unique key names, the shipped Lua scenario scripts ([`lua_script`]).
//! - **scenarios** ([`s6`]): SCENARIOS.md S6's checkpoint, script calls and load.
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
