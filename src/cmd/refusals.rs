//! Commands Redis refuses because of the server's state, before they run
//! (`processCommand`) and inside scripts (`scriptPrepareForRun`, `scriptCall`): out of
//! memory (`maxmemory`, after eviction had its go) and too few good replicas
//! (`min-replicas-to-write`).
//!
//! Eviction (Redis `performEvictions`) runs here, before every command while `maxmemory` is
//! set, on the calling connection's thread and never under a keyspace lock: it frees what
//! the current overshoot asks for, key by key, until done or out of its time budget
//! (`maxmemory-eviction-tenacity`); what is left is taken up by the eviction timer (Redis
//! `evictionTimeProc`: the server's background task runs [`eviction_cycle`] until memory is
//! under the limit) and by the next command. The key choice is the engine's
//! (`engine::evict`).

use crate::config::{self, kind::N_EVICTED, ConfigStore, ParamRef};
use crate::engine::evict::{NoKey, Policy};
use crate::instance::state::Shared;
use crate::types::value::Lfu;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
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
    samples: ParamRef,
    tenacity: ParamRef,
    log_factor: ParamRef,
    decay: ParamRef,
}

fn params() -> &'static Params {
    static P: OnceLock<Params> = OnceLock::new();
    P.get_or_init(|| {
        let get = |n| config::lookup(n).expect("a built-in parameter");
        Params {
            to_write: get("min-replicas-to-write"),
            max_lag: get("min-replicas-max-lag"),
            maxmemory: get("maxmemory"),
            samples: get("maxmemory-samples"),
            tenacity: get("maxmemory-eviction-tenacity"),
            log_factor: get("lfu-log-factor"),
            decay: get("lfu-decay-time"),
        }
    })
}

/// `checkGoodReplicasStatus` of a primary without replicas: writes are allowed only while
/// `min-replicas-to-write` or `min-replicas-max-lag` is 0.
pub fn good_replicas(config: &ConfigStore) -> bool {
    let p = params();
    config.num(p.to_write) == 0 || config.num(p.max_lag) == 0
}

/// The `maxmemory-policy` in force.
pub fn policy(config: &ConfigStore) -> Policy {
    config
        .get("maxmemory-policy")
        .and_then(|p| Policy::parse(&p))
        .unwrap_or(Policy::NoEviction)
}

/// Tells the keyspace how to track accesses after a configuration change (LFU counters
/// under the LFU policies, access times otherwise). Called at start-up and after CONFIG SET.
pub fn config_changed(srv: &Shared) {
    let p = params();
    let c = &srv.config;
    let lfu = policy(c).lfu().then(|| Lfu {
        log_factor: c.num(p.log_factor).clamp(0, i64::from(u32::MAX)) as u32,
        decay_min: c.num(p.decay).clamp(0, i64::from(u32::MAX)) as u32,
    });
    srv.ks.set_lfu(lfu);
    srv.ks
        .lazyfree
        .set_lazy_expire(crate::config_num!(c, "lazyfree-lazy-expire") != 0);
}

/// Redis `processCommand`'s memory check: evicts as the policy allows and answers whether
/// memory is still over `maxmemory` with nothing left to evict (`EVICT_FAIL`). While
/// `maxmemory` is 0 this is one relaxed load, as before eviction existed.
#[inline]
pub fn out_of_memory(srv: &Arc<Shared>) -> bool {
    let max = srv.config.num(params().maxmemory) as u64;
    if max == 0 {
        // `oom_before_command` reads maxmemory first, so the stale state is never seen.
        return false;
    }
    over_maxmemory(srv, max)
}

/// [`out_of_memory`] with a limit set: out of line, so the check inlined into every
/// command stays a load and a branch.
#[cold]
#[inline(never)]
fn over_maxmemory(srv: &Arc<Shared>, max: u64) -> bool {
    let oom = perform_evictions(srv, max) == Outcome::Fail;
    let state = &srv.ks.stats.oom_before_command;
    if state.load(Ordering::Relaxed) != oom {
        state.store(oom, Ordering::Relaxed);
    }
    oom
}

/// What the last command's check found (Redis `pre_command_oom_state`): a script consults
/// it instead of evicting from inside the keyspace it holds.
pub fn oom_before_command(srv: &Shared) -> bool {
    srv.config.num(params().maxmemory) != 0
        && srv.ks.stats.oom_before_command.load(Ordering::Relaxed)
}

/// Redis `EVICT_OK`, `EVICT_RUNNING`, `EVICT_FAIL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ok,
    /// Still over the limit, but eviction is under way (time budget spent, or the eviction
    /// timer runs): the command may run.
    Running,
    /// As `Running` for a command, but nothing was done: another thread is evicting or a
    /// script (EXEC) holds the keyspace.
    Busy,
    Fail,
}

/// What the eviction timer does next (see [`eviction_cycle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cycle {
    /// Still over the limit: run again once other tasks had their turn.
    Again,
    /// The keyspace or the evictor is held by someone else: try again a little later
    /// rather than spin.
    Later,
    /// Under the limit, or nothing left to evict: the timer stops.
    Done,
}

/// One run of Redis's `evictionTimeProc`: evicts for one time budget and says whether to
/// go on; stops the timer when done.
pub fn eviction_cycle(srv: &Arc<Shared>) -> Cycle {
    let max = srv.config.num(params().maxmemory) as u64;
    let next = match max {
        0 => Cycle::Done,
        _ => match perform_evictions(srv, max) {
            Outcome::Running => Cycle::Again,
            Outcome::Busy => Cycle::Later,
            Outcome::Ok | Outcome::Fail => Cycle::Done,
        },
    };
    if next == Cycle::Done {
        srv.ks.eviction_timer.stop();
    }
    next
}

/// Redis `evictionTimeLimitUs`: the time one call may spend evicting.
fn time_limit_us(tenacity: i64) -> u64 {
    match tenacity {
        t if t <= 10 => 50 * t.max(0) as u64,
        t if t < 100 => (500.0 * 1.15f64.powf(t as f64 - 10.0)) as u64,
        _ => u64::MAX,
    }
}

/// Microseconds of a process-wide monotonic clock.
fn mono_us() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_micros() as u64
}

/// How long memory has been over `maxmemory`, from an `eviction_exceeded_since_us` value
/// (0: it is not).
pub fn exceeded_us(since: u64) -> u64 {
    if since == 0 {
        0
    } else {
        mono_us().saturating_sub(since - 1)
    }
}

/// Redis `performEvictions`.
fn perform_evictions(srv: &Arc<Shared>, max: u64) -> Outcome {
    let mut used = used_memory();
    if used > max {
        // Clients over `maxmemory-clients` go before any key, as Redis's processCommand
        // runs evictClients before performEvictions; what they hold counts as given back.
        used = used.saturating_sub(super::client::evict_clients(srv) as u64);
    }
    let outcome = if used <= max {
        Outcome::Ok
    } else {
        evict(srv, max, used - max)
    };
    // INFO's eviction-exceeded times (`update_metrics`).
    let st = &srv.ks.stats;
    let since = st.eviction_exceeded_since_us.load(Ordering::Relaxed);
    match (outcome, since) {
        (Outcome::Ok, 0) => {}
        // The episode ends; only the thread that ends it adds its length.
        (Outcome::Ok, t)
            if st
                .eviction_exceeded_since_us
                .compare_exchange(t, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok() =>
        {
            let spent = mono_us().saturating_sub(t - 1);
            st.eviction_exceeded_total_us
                .fetch_add(spent, Ordering::Relaxed);
        }
        (_, 0) => {
            let _ = st.eviction_exceeded_since_us.compare_exchange(
                0,
                mono_us() + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        _ => {}
    }
    outcome
}

/// The eviction loop proper: frees `to_free` bytes, or stops at the time budget.
fn evict(srv: &Arc<Shared>, max: u64, to_free: u64) -> Outcome {
    let config = &srv.config;
    let policy = policy(config);
    if policy == Policy::NoEviction {
        return Outcome::Fail;
    }
    // One evicting thread at a time: the others go ahead (their overshoot is the same one
    // being worked off), as a second Redis client finds eviction already done.
    let Some(mut ev) = srv.ks.evictor.try_lock() else {
        return Outcome::Busy;
    };
    let p = params();
    // Redis `performEvictions`: with lazy eviction, what the lazyfree thread has not yet
    // freed shows up in `used_memory` at the every-16-keys check below.
    ev.lazy = crate::config_num!(config, "lazyfree-lazy-eviction") != 0;
    let samples = config.num(p.samples).clamp(1, 64) as usize;
    let decay = config.num(p.decay).clamp(0, i64::from(u32::MAX)) as u32;
    let limit = time_limit_us(config.num(p.tenacity));
    let start = Instant::now();
    let counting = crate::alloc::used().is_some();
    let mut freed: u64 = 0;
    let mut keys = 0u64;
    while freed < to_free {
        let before = crate::alloc::used().unwrap_or(0);
        let now = srv.clock.now_ms();
        match srv.ks.evict_one(&mut ev, policy, samples, decay, now) {
            Ok(gone) => {
                // What the removal itself freed, as seen from this thread (exact: the
                // counter includes this thread's unfolded residue). Without the counting
                // allocator, the engine's estimate of the value.
                freed += if counting {
                    before.saturating_sub(crate::alloc::used().unwrap_or(0))
                } else {
                    gone.approx_bytes as u64
                };
                crate::instance::notify::notify(srv, N_EVICTED, "evicted", gone.db, &gone.key);
                if !gone.ready.is_empty() {
                    super::blocking::serve_ready(srv, gone.ready);
                }
                keys += 1;
                if keys.is_multiple_of(16) {
                    // Others may have freed memory meanwhile (lazy frees, closed clients).
                    if used_memory() <= max {
                        break;
                    }
                    if start.elapsed().as_micros() as u64 > limit {
                        // Out of budget, still over: the timer carries on.
                        srv.ks.eviction_timer.start();
                        break;
                    }
                }
            }
            Err(NoKey::Nothing) => return Outcome::Fail,
            Err(NoKey::Busy) => return Outcome::Busy,
        }
    }
    if srv.ks.eviction_timer.running() {
        Outcome::Running
    } else {
        Outcome::Ok
    }
}

/// Live heap bytes (Redis `zmalloc_used_memory`) when the counting allocator is
/// installed (the `respite` binary installs it); otherwise, as a clear fallback, the
/// resident set size.
pub fn used_memory() -> u64 {
    crate::alloc::used().unwrap_or_else(rss)
}

/// The resident set size, re-read at most every 10 ms: /proc is too slow to read on
/// every command of a server with `maxmemory` set.
pub fn rss() -> u64 {
    static AT_MS: AtomicU64 = AtomicU64::new(u64::MAX);
    static RSS: AtomicU64 = AtomicU64::new(0);
    let now = mono_us() / 1000;
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

/// The reply bytes past which a command whose reply outgrows its data (a negative
/// HRANDFIELD/SRANDMEMBER/ZRANDMEMBER count) stops building it: the normal class's hard
/// output limit, once over it the connection closes the client unsent, as Redis stops such
/// a loop when the client is flagged to close. Unlimited when no hard limit is set (the
/// counts are capped at 2^24 then).
pub fn reply_limit(srv: &Shared) -> usize {
    match srv.normal_obuf.get().hard {
        0 => usize::MAX,
        h => usize::try_from(h).unwrap_or(usize::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenacity_sets_the_time_budget_as_redis() {
        assert_eq!(time_limit_us(0), 0);
        assert_eq!(time_limit_us(10), 500);
        assert_eq!(time_limit_us(11), 575);
        assert_eq!(time_limit_us(99), (500.0 * 1.15f64.powf(89.0)) as u64);
        assert_eq!(time_limit_us(100), u64::MAX);
    }
}
