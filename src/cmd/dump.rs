//! DUMP and RESTORE (Redis `cluster.c` `dumpCommand` / `restoreCommand`): values travel as
//! RDB payloads ([`crate::types::rdb`]), byte-compatible with redis-server's.

use super::table::{CommandSpec, KeySpec};
use super::{args, errors, Cx};
use crate::config_num;
use crate::instance::notify;
use crate::instance::state::Shared;
use crate::protocol::reply::Reply;
use crate::types::rdb::value::{self, Limits, RestoreError};
use crate::types::{hash, set};
use args::is;
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "dump",
        arity: 2,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["keyspace", "read", "slow"],
        group: "generic",
        since: "2.6.0",
        summary: "Return a serialized version of the value stored at the specified key.",
        complexity: "O(1) to access the key and additional O(N*M) to serialize it, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1).",
        handler: dump,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "restore",
        arity: -4,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["keyspace", "write", "slow", "dangerous"],
        group: "generic",
        since: "2.6.0",
        summary: "Create a key using the provided serialized value, previously obtained using DUMP.",
        complexity: "O(1) to create the new key and additional O(N*M) to reconstruct the serialized value, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values the complexity is O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).",
        handler: restore,
        ..CommandSpec::DEFAULT
    },
];

fn dump(cx: &mut Cx) -> Reply {
    match cx.ks.get(&cx.args[1]) {
        Some(e) => Reply::Bulk(Bytes::from(value::dump(&e.value))),
        None => Reply::Nil,
    }
}

/// The encoding thresholds a loaded value is converted on.
fn limits(srv: &Shared) -> Limits {
    let n = |v: i64| usize::try_from(v).unwrap_or(0);
    let c = &srv.config;
    Limits {
        hash: hash::Limits {
            max_entries: n(config_num!(c, "hash-max-listpack-entries")),
            max_value: n(config_num!(c, "hash-max-listpack-value")),
        },
        set: set::Fixed {
            intset_entries: n(config_num!(c, "set-max-intset-entries")),
            listpack_entries: n(config_num!(c, "set-max-listpack-entries")),
            listpack_value: n(config_num!(c, "set-max-listpack-value")),
        },
        zset_entries: n(config_num!(c, "zset-max-listpack-entries")),
        zset_value: n(config_num!(c, "zset-max-listpack-value")),
        list_fill: i32::try_from(config_num!(c, "list-max-listpack-size")).unwrap_or(-2),
    }
}

/// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]; checks
/// in Redis's order: options, existing key, TTL, payload.
fn restore(cx: &mut Cx) -> Reply {
    let a = cx.args;
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq): (Option<i64>, Option<i64>) = (None, None);
    let mut j = 4;
    while j < a.len() {
        let more = j + 1 < a.len();
        if is(&a[j], "REPLACE") {
            replace = true;
        } else if is(&a[j], "ABSTTL") {
            absttl = true;
        } else if is(&a[j], "IDLETIME") && more && freq.is_none() {
            let v = match args::int(&a[j + 1]) {
                Ok(v) => v,
                Err(e) => return e,
            };
            if v < 0 {
                return errors::err(errors::INVALID_IDLETIME);
            }
            idle = Some(v);
            j += 1;
        } else if is(&a[j], "FREQ") && more && idle.is_none() {
            let v = match args::int(&a[j + 1]) {
                Ok(v) => v,
                Err(e) => return e,
            };
            if !(0..=255).contains(&v) {
                return errors::err(errors::INVALID_FREQ);
            }
            freq = Some(v);
            j += 1;
        } else {
            return errors::syntax();
        }
        j += 1;
    }
    let key = &a[1];
    let db = cx.ks.db;
    // (Not `lookup_write_in`: that would journal the untouched key on a durable server.)
    if !replace && cx.ks.exists_in(db, key) {
        return errors::err(errors::BUSYKEY);
    }
    let ttl = match args::int(&a[2]) {
        Ok(v) if v < 0 => return errors::err(errors::INVALID_TTL),
        Ok(v) => v as u64,
        Err(e) => return e,
    };
    let v = match value::restore(&a[3], &limits(cx.srv)) {
        Ok(v) => v,
        Err(RestoreError::VersionOrChecksum) => return errors::err(errors::DUMP_PAYLOAD),
        Err(RestoreError::Bad) => return errors::err(errors::BAD_DATA_FORMAT),
    };
    let now = cx.now();
    let deadline = match ttl {
        0 => None,
        t if absttl => Some(t),
        t => Some(now.saturating_add(t)),
    };
    if deadline.is_some_and(|d| d <= now) {
        // Already expired (`checkAlreadyExpired`): the key is not created, a replaced one is
        // deleted, and the reply is still OK.
        if replace && cx.ks.remove(key).is_some() {
            cx.notify(notify::GENERIC, "del", key);
        }
        return Reply::OK;
    }
    cx.ks.set(key, v, deadline);
    // Redis applies IDLETIME only under a non-LFU policy and FREQ only under an LFU one
    // (`objectSetLRUOrLFU`).
    let lfu = cx
        .srv
        .config
        .get("maxmemory-policy")
        .is_some_and(|p| p.contains("lfu"));
    if let (true, Some(f)) = (lfu, freq) {
        if let Some(e) = cx.ks.get_mut(key) {
            e.lfu_init(now, f as u8);
        }
    }
    if let Some(idle) = idle {
        if !lfu {
            let idle = lru_idle(idle);
            if let Some(e) = cx.ks.get_mut(key) {
                e.touch(now.saturating_sub(idle.saturating_mul(1000)));
            }
        }
    }
    if let Some(ev) = cx.events() {
        ev.emit(notify::NEW, "new", key);
        ev.emit(notify::GENERIC, "restore", key);
    }
    Reply::OK
}

/// Deletes a key MIGRATE moved to its target (Redis: `dbDelete`, then a `del` event, sent
/// even for a key named twice in KEYS and so already gone).
pub(super) fn delete_moved(cx: &mut Cx, key: &[u8]) {
    cx.ks.remove(key);
    cx.notify(notify::GENERIC, "del", key);
}

/// The idle seconds `OBJECT IDLETIME` reports after `RESTORE .. IDLETIME idle`: Redis keeps
/// access times on a 24-bit seconds clock, so larger values wrap (and `idle * 1000`
/// overflows as a C `long long` for the very largest, turning slightly negative).
fn lru_idle(idle: i64) -> u64 {
    const LRU_BITS: u32 = 24;
    let scaled = idle.wrapping_mul(1000) / 1000;
    let wrapped = if scaled >= 0 {
        scaled.rem_euclid(1 << LRU_BITS)
    } else {
        (scaled - 1).rem_euclid(1 << LRU_BITS)
    };
    wrapped as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn lru_idle_wraps_like_redis() {
        // Observed on redis-server 7.0.15.
        assert_eq!(super::lru_idle(5), 5);
        assert_eq!(super::lru_idle(10_000_000), 10_000_000);
        assert_eq!(super::lru_idle(99_999_999_999), 7_792_639);
        assert_eq!(super::lru_idle(i64::MAX), 16_777_214);
    }
}
