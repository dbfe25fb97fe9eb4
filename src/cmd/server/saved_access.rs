//! Keys' LRU/LFU data across a restart of the durable engine, as Redis's RDB carries them
//! (`IDLE` under an LRU policy, `FREQ` under an LFU one, `rdbSaveKeyValuePair`) and its
//! load applies them (`objectSetLRUOrLFU`: the counter under an LFU policy, the idle time
//! under any other). Saved at a clean shutdown, SAVE/BGSAVE and DEBUG RELOAD; applied after
//! the keys are loaded.

use crate::engine::{Access, SHARDS};
use crate::instance::state::Shared;
use crate::persist::access::Access as Saved;
use crate::persist::Store;
use bytes::Bytes;

/// Every key's access data under the current policy; empty unless it is an LRU or LFU one.
pub fn snapshot(srv: &Shared, ks: &mut Access) -> Vec<(usize, Bytes, Saved)> {
    let policy = crate::cmd::refusals::policy(&srv.config);
    let lru = matches!(
        policy,
        crate::engine::evict::Policy::AllkeysLru | crate::engine::evict::Policy::VolatileLru
    );
    let lfu = srv.ks.lfu().filter(|_| policy.lfu());
    if !lru && lfu.is_none() {
        return Vec::new();
    }
    let now = ks.now;
    let mut rows = Vec::new();
    for db in 0..srv.ks.databases() {
        for s in 0..SHARDS {
            ks.visit_shard(db, s, |sh| {
                for (key, e) in sh.keys() {
                    let saved = match lfu {
                        Some(l) => Saved::Freq(e.lfu_counter(now, l.decay_min)),
                        None => Saved::Idle(u32::try_from(e.idle_secs(now)).unwrap_or(u32::MAX)),
                    };
                    rows.push((db, Bytes::copy_from_slice(key), saved));
                }
            });
        }
    }
    rows
}

/// Writes `rows` as the store's saved access data (replacing the last save's), on the
/// checkpointer's thread after everything before it is checkpointed.
pub fn save(srv: &Shared, rows: Vec<(usize, Bytes, Saved)>) -> Result<usize, String> {
    let Some(p) = srv.persist.get() else {
        return Ok(0);
    };
    let done = p.with_store(move |store| {
        store
            .save_access(rows.iter().map(|(db, k, a)| (*db, k.as_ref(), *a)))
            .map_err(|e| e.to_string())
    });
    done.unwrap_or_else(|| Err("storage is closed".into()))
}

/// Reads the store's saved access data (on the caller's thread: for start-up, before the
/// checkpointer runs).
pub fn load(store: &Store) -> Result<Vec<(usize, Bytes, Saved)>, String> {
    let mut rows = Vec::new();
    store
        .load_access(|db, key, a| rows.push((db, Bytes::copy_from_slice(key), a)))
        .map_err(|e| e.to_string())?;
    Ok(rows)
}

/// Applies saved access data to the keys in `ks`, by the current policy as Redis's load
/// does. Returns how many keys it set.
pub fn apply(srv: &Shared, rows: &[(usize, Bytes, Saved)], ks: &mut Access) -> usize {
    let lfu = crate::cmd::refusals::policy(&srv.config).lfu();
    let now = ks.now;
    let dbs = srv.ks.databases();
    let mut n = 0;
    for (db, key, saved) in rows {
        if *db >= dbs {
            continue;
        }
        let Some(e) = ks.peek_mut_in(*db, key) else {
            continue;
        };
        match (*saved, lfu) {
            (Saved::Freq(c), true) => e.lfu_init(now, c),
            (Saved::Idle(idle), false) => {
                e.touch(now.saturating_sub(u64::from(idle).saturating_mul(1000)))
            }
            _ => continue,
        }
        n += 1;
    }
    n
}

/// A clean shutdown's save (not after SHUTDOWN NOSAVE): waits up to a few seconds for the keyspace (a runaway script
/// may hold it; then the last save's data stay).
pub fn save_at_shutdown(srv: &Shared) {
    if srv.persist.get().is_none()
        || srv
            .shutdown_nosave
            .load(std::sync::atomic::Ordering::Acquire)
    {
        return;
    }
    let now = srv.clock.now_ms();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let Some(mut ks) = srv
        .ks
        .exclusive_or_give_up(0, now, || std::time::Instant::now() < until)
    else {
        tracing::warn!("keyspace busy at shutdown: keys' LRU/LFU data not saved");
        return;
    };
    let rows = snapshot(srv, &mut ks);
    drop(ks);
    if let Err(e) = save(srv, rows) {
        tracing::warn!("saving keys' LRU/LFU data failed: {e}");
    }
}
