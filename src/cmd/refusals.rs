//! Commands Redis refuses because of the server's state, before they run
//! (`processCommand`) and inside scripts (`scriptPrepareForRun`, `scriptCall`): out of
//! memory (`maxmemory`) and too few good replicas (`min-replicas-to-write`).

use crate::config::{self, ConfigStore, ParamRef};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
pub const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";
/// `scriptPrepareForRun`: a script that declared flags without `allow-oom`.
pub const SCRIPT_OOM: &str =
    "OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'";

struct Params {
    to_write: ParamRef,
    max_lag: ParamRef,
    maxmemory: ParamRef,
}

fn params() -> &'static Params {
    static P: OnceLock<Params> = OnceLock::new();
    P.get_or_init(|| {
        let get = |n| config::lookup(n).expect("a built-in parameter");
        Params {
            to_write: get("min-replicas-to-write"),
            max_lag: get("min-replicas-max-lag"),
            maxmemory: get("maxmemory"),
        }
    })
}

/// `checkGoodReplicasStatus` of a primary without replicas: writes are allowed only while
/// `min-replicas-to-write` or `min-replicas-max-lag` is 0.
pub fn good_replicas(config: &ConfigStore) -> bool {
    let p = params();
    config.num(p.to_write) == 0 || config.num(p.max_lag) == 0
}

/// Whether memory use is over `maxmemory` with nothing that eviction could free (Redis's
/// `performEvictions() == EVICT_FAIL`). This server does not evict, so only the
/// `noeviction` policy is enforced; under the others it keeps accepting writes.
pub fn out_of_memory(config: &ConfigStore) -> bool {
    let max = config.num(params().maxmemory) as u64;
    max != 0
        && used_memory() > max
        && config.get("maxmemory-policy").as_deref() == Some("noeviction")
}

/// The resident set size, re-read at most every 10 ms: /proc is too slow to read on
/// every write of a server with `maxmemory` set.
fn used_memory() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    static AT_MS: AtomicU64 = AtomicU64::new(u64::MAX);
    static RSS: AtomicU64 = AtomicU64::new(0);
    let now = BASE.get_or_init(Instant::now).elapsed().as_millis() as u64;
    let at = AT_MS.load(Ordering::Relaxed);
    if at != u64::MAX && now.saturating_sub(at) < 10 {
        return RSS.load(Ordering::Relaxed);
    }
    let rss = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
            let kb: u64 = line[6..].split_whitespace().next()?.parse().ok()?;
            kb.checked_mul(1024)
        })
        .unwrap_or(0);
    RSS.store(rss, Ordering::Relaxed);
    AT_MS.store(now, Ordering::Relaxed);
    rss
}
