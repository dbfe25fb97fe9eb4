//! Server commands: CONFIG, INFO, DEBUG, TIME, LASTSAVE, SAVE, BGSAVE, WAIT, SHUTDOWN, the
//! replication surface of a primary (server/replication.rs), MEMORY (server/memory.rs),
//! SLOWLOG (server/slowlog.rs), LATENCY (server/latency.rs) and Valkey's COMMANDLOG
//! (server/commandlog.rs).
//!
//! The memory engine keeps no snapshot: SAVE and BGSAVE only record a successful save
//! (LASTSAVE, INFO persistence) and reply as Redis does. There are no replicas, so WAIT
//! answers 0 at once.

mod commandlog;
mod configcmd;
mod info;
mod latency;
mod lolwut;
mod memory;
mod replication;
pub mod saved_access;
mod slowlog;

use super::args::is;
use super::{errors, CommandSpec, Cx, KeySpec, Lock};
use crate::protocol::Reply;
use bytes::Bytes;
use std::sync::atomic::Ordering;

/// A keyless `server`-group subcommand of SLOWLOG, LATENCY or COMMANDLOG.
#[allow(clippy::too_many_arguments)]
const fn keyless_sub(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    acl: &'static [&'static str],
    since: &'static str,
    summary: &'static str,
    complexity: &'static str,
    handler: fn(&mut Cx) -> Reply,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        keys: KeySpec::None,
        acl,
        group: "server",
        since,
        summary,
        complexity,
        handler,
        ..CommandSpec::DEFAULT
    }
}

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "config",
        arity: -2,
        flags: &[],
        keys: KeySpec::None,
        acl: &["slow"],
        group: "server",
        since: "2.0.0",
        summary: "A container for server configuration commands",
        complexity: "Depends on subcommand.",
        subcommands: &[
            CommandSpec {
                name: "config|rewrite",
                arity: 2,
                flags: &["admin", "noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["admin", "slow", "dangerous"],
                group: "server",
                since: "2.8.0",
                summary: "Rewrite the configuration file with the in memory configuration",
                complexity: "O(1)",
                handler: configcmd::config_rewrite,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "config|resetstat",
                arity: 2,
                flags: &["admin", "noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["admin", "slow", "dangerous"],
                group: "server",
                since: "2.0.0",
                summary: "Reset the stats returned by INFO",
                complexity: "O(1)",
                handler: configcmd::config_resetstat,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "config|help",
                arity: 2,
                flags: &["loading", "stale"],
                keys: KeySpec::None,
                acl: &["slow"],
                group: "server",
                since: "5.0.0",
                summary: "Show helpful text about the different subcommands",
                complexity: "O(1)",
                handler: configcmd::config_help,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "config|get",
                arity: -3,
                flags: &["admin", "noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["admin", "slow", "dangerous"],
                group: "server",
                since: "2.0.0",
                summary: "Get the values of configuration parameters",
                complexity: "O(N) when N is the number of configuration parameters provided",
                handler: configcmd::config_get,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "config|set",
                arity: -4,
                flags: &["admin", "noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["admin", "slow", "dangerous"],
                group: "server",
                since: "2.0.0",
                summary: "Set configuration parameters to the given values",
                complexity: "O(N) when N is the number of configuration parameters provided",
                handler: configcmd::config_set,
                ..CommandSpec::DEFAULT
            },
        ],
        handler: configcmd::config,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "info",
        arity: -1,
        flags: &["loading", "stale"],
        keys: KeySpec::None,
        acl: &["slow", "dangerous"],
        group: "server",
        since: "1.0.0",
        summary: "Get information and statistics about the server",
        complexity: "O(1)",
        handler: info::info,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "debug",
        arity: -2,
        flags: &["admin", "noscript", "loading", "stale"],
        keys: KeySpec::None,
        acl: &["admin", "slow", "dangerous"],
        group: "server",
        since: "1.0.0",
        summary: "A container for debugging commands",
        complexity: "Depends on subcommand.",
        handler: debug,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "time",
        arity: 1,
        flags: &["loading", "stale", "fast"],
        keys: KeySpec::None,
        acl: &["fast"],
        group: "server",
        since: "2.6.0",
        summary: "Return the current server time",
        complexity: "O(1)",
        handler: time,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lastsave",
        arity: 1,
        flags: &["loading", "stale", "fast"],
        keys: KeySpec::None,
        acl: &["admin", "fast", "dangerous"],
        group: "server",
        since: "1.0.0",
        summary: "Get the UNIX time stamp of the last successful save to disk",
        complexity: "O(1)",
        handler: lastsave,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "save",
        arity: 1,
        flags: &["admin", "noscript", "no_async_loading", "no_multi"],
        keys: KeySpec::None,
        acl: &["admin", "slow", "dangerous"],
        group: "server",
        since: "1.0.0",
        summary: "Synchronously save the dataset to disk",
        complexity: "O(N) where N is the total number of keys in all databases",
        handler: save,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "bgsave",
        arity: -1,
        flags: &["admin", "noscript", "no_async_loading"],
        keys: KeySpec::None,
        acl: &["admin", "slow", "dangerous"],
        group: "server",
        since: "1.0.0",
        summary: "Asynchronously save the dataset to disk",
        complexity: "O(1)",
        handler: bgsave,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "wait",
        arity: 3,
        // Redis 7.2 lets scripts call WAIT (it answers at once there).
        flags: &[],
        keys: KeySpec::None,
        acl: &["slow", "connection"],
        group: "generic",
        since: "3.0.0",
        summary: "Wait for the synchronous replication of all the write commands sent in the context of the current connection",
        complexity: "O(1)",
        handler: wait,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "shutdown",
        arity: -1,
        flags: &["admin", "noscript", "loading", "stale", "no_multi", "allow_busy"],
        keys: KeySpec::None,
        acl: &["admin", "slow", "dangerous"],
        group: "server",
        since: "1.0.0",
        summary: "Synchronously save the dataset to disk and then shut down the server",
        complexity: "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)",
        handler: shutdown,
        ..CommandSpec::DEFAULT
    },    CommandSpec {
        name: "role",
        arity: 1,
        flags: &["noscript", "loading", "stale", "fast"],
        keys: KeySpec::None,
        acl: &["admin", "dangerous", "fast"],
        group: "server",
        since: "2.8.12",
        summary: "Returns the replication role.",
        complexity: "O(1)",
        handler: replication::role,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "waitaof",
        arity: 4,
        flags: &["noscript"],
        keys: KeySpec::None,
        acl: &["connection", "slow"],
        group: "generic",
        since: "7.2.0",
        summary: "Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the master and/or replicas.",
        complexity: "O(1)",
        handler: replication::waitaof,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "replicaof",
        arity: 3,
        flags: &["no_async_loading", "admin", "noscript", "stale"],
        keys: KeySpec::None,
        acl: &["admin", "dangerous", "slow"],
        group: "server",
        since: "5.0.0",
        summary: "Configures a server as replica of another, or promotes it to a master.",
        complexity: "O(1)",
        handler: replication::replicaof,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "slaveof",
        arity: 3,
        flags: &["no_async_loading", "admin", "noscript", "stale"],
        keys: KeySpec::None,
        acl: &["admin", "dangerous", "slow"],
        group: "server",
        since: "1.0.0",
        summary: "Sets a Redis server as a replica of another, or promotes it to being a master.",
        complexity: "O(1)",
        handler: replication::replicaof,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "failover",
        arity: -1,
        flags: &["admin", "noscript", "stale"],
        keys: KeySpec::None,
        acl: &["admin", "dangerous", "slow"],
        group: "server",
        since: "6.2.0",
        summary: "Starts a coordinated failover from a server to one of its replicas.",
        complexity: "O(1)",
        handler: replication::failover,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lolwut",
        arity: -1,
        flags: &["readonly", "fast"],
        keys: KeySpec::None,
        acl: &["read", "fast"],
        group: "server",
        since: "5.0.0",
        summary: "Displays computer art and the Redis version",
        complexity: "",
        handler: lolwut::lolwut,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "memory",
        arity: -2,
        flags: &[],
        keys: KeySpec::None,
        acl: &["slow"],
        group: "server",
        since: "4.0.0",
        summary: "A container for memory diagnostics commands.",
        complexity: "Depends on subcommand.",
        handler: memory_container,
        subcommands: &[
        CommandSpec {
            name: "memory|doctor",
            arity: 2,
            flags: &[],
            keys: KeySpec::None,
            acl: &["slow"],
            group: "server",
            since: "4.0.0",
            summary: "Outputs a memory problems report.",
            complexity: "O(1)",
            handler: memory::doctor,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "memory|help",
            arity: 2,
            flags: &["loading", "stale"],
            keys: KeySpec::None,
            acl: &["slow"],
            group: "server",
            since: "4.0.0",
            summary: "Returns helpful text about the different subcommands.",
            complexity: "O(1)",
            handler: memory::help,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "memory|malloc-stats",
            arity: 2,
            flags: &[],
            keys: KeySpec::None,
            acl: &["slow"],
            group: "server",
            since: "4.0.0",
            summary: "Returns the allocator statistics.",
            complexity: "Depends on how much memory is allocated, could be slow",
            handler: memory::malloc_stats,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "memory|purge",
            arity: 2,
            flags: &[],
            keys: KeySpec::None,
            acl: &["slow"],
            group: "server",
            since: "4.0.0",
            summary: "Asks the allocator to release memory.",
            complexity: "Depends on how much memory is allocated, could be slow",
            handler: memory::purge,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "memory|stats",
            arity: 2,
            flags: &[],
            keys: KeySpec::None,
            acl: &["slow"],
            group: "server",
            since: "4.0.0",
            summary: "Returns details about memory usage.",
            complexity: "O(1)",
            handler: memory::stats,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "memory|usage",
            arity: -3,
            flags: &["readonly"],
            keys: KeySpec::Range(2, 2, 1),
            acl: &["read", "slow"],
            group: "server",
            since: "4.0.0",
            summary: "Estimates the memory usage of a key.",
            complexity: "O(N) where N is the number of samples.",
            handler: memory::usage,
            ..CommandSpec::DEFAULT
        },
        ],
        ..CommandSpec::DEFAULT
    },
    commandlog::SPEC,
    latency::SPEC,
    slowlog::SPEC,
];

/// `enable-debug-command` (Redis's protected-command check; dispatch applies it) for a
/// client that is or is not on loopback.
pub fn debug_allowed(setting: Option<&str>, local: bool) -> bool {
    match setting {
        Some("yes") => true,
        Some("local") => local,
        _ => false,
    }
}

fn debug(cx: &mut Cx) -> Reply {
    let a = cx.args;
    let sub = &a[1];
    if is(sub, "HELP") && a.len() == 2 {
        return super::args::help(
            "DEBUG",
            &[
                "ERROR <string>",
                "    Return a Redis protocol error with <string> as message. Useful for clients",
                "    unit tests to simulate Redis errors.",
                "LOG <message>",
                "    Write <message> to the server log.",
                "SLEEP <seconds>",
                "    Stop the server for <seconds>. Decimals allowed.",
                "PAUSE-CRON <0|1>",
                "    Stop periodic cron job processing.",
            ],
        );
    }
    if is(sub, "SLEEP") && a.len() == 3 {
        // Like Redis: strtod without validation, so junk sleeps 0 seconds. The command
        // holds the whole keyspace (Lock::All), so every data command waits it out. It
        // sleeps off the runtime's worker, so SHUTDOWN (which takes no gate) and the
        // waiters' BUSY checks still run, even with `--threads 1`.
        let secs = c_strtod(&a[2]);
        if secs.is_finite() && secs > 0.0 {
            let d = std::time::Duration::from_secs_f64(secs.min(1e9));
            super::off_core(|| std::thread::sleep(d));
        }
        return Reply::OK;
    }
    if is(sub, "PAUSE-CRON") && a.len() == 3 {
        // C `atoi`, as Redis reads the flag: any non-zero leading integer pauses.
        cx.srv
            .cron_paused
            .store(c_atoi(&a[2]) != 0, Ordering::Relaxed);
        return Reply::OK;
    }
    if is(sub, "RELOAD") {
        return debug_reload(cx);
    }
    if is(sub, "LOG") && a.len() == 3 {
        tracing::warn!("DEBUG LOG: {}", String::from_utf8_lossy(&a[2]));
        return Reply::OK;
    }
    if is(sub, "ERROR") && a.len() == 3 {
        return Reply::error(String::from_utf8_lossy(&a[2]).into_owned());
    }
    errors::subcommand_syntax("debug", sub)
}

/// C `atoi`: optional leading blanks and sign, then the digits that follow (0 if none).
fn c_atoi(s: &[u8]) -> i64 {
    let s = s.trim_ascii_start();
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let n = digits
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0i64, |n, &d| {
            n.wrapping_mul(10).wrapping_add((d - b'0') as i64)
        });
    if neg {
        n.wrapping_neg()
    } else {
        n
    }
}

/// C `strtod(s, NULL)`: the longest numeric prefix, 0 when there is none.
fn c_strtod(s: &[u8]) -> f64 {
    // A number never needs more than this; it also bounds the prefix search below.
    let s = String::from_utf8_lossy(&s[..s.len().min(64)]);
    let t = s.trim_start();
    (1..=t.len())
        .rev()
        .filter(|&n| t.is_char_boundary(n))
        .find_map(|n| t[..n].parse::<f64>().ok())
        .unwrap_or(0.0)
}

fn time(cx: &mut Cx) -> Reply {
    let us = cx.srv.clock.now_us();
    Reply::Array(vec![
        Reply::Bulk(Bytes::from((us / 1_000_000).to_string())),
        Reply::Bulk(Bytes::from((us % 1_000_000).to_string())),
    ])
}

fn lastsave(cx: &mut Cx) -> Reply {
    Reply::Int(cx.srv.last_save_unix.load(Ordering::Relaxed) as i64)
}

/// Records a completed save: LASTSAVE, `rdb_saves`, `rdb_changes_since_last_save`.
fn record_save(cx: &Cx) {
    let srv = cx.srv;
    srv.last_save_unix
        .store(srv.clock.now_ms() / 1000, Ordering::Relaxed);
    srv.stats.rdb_saves.fetch_add(1, Ordering::Relaxed);
    srv.stats
        .writes_at_last_save
        .store(info::write_calls(srv), Ordering::Relaxed);
}

/// Durable engine: SAVE and BGSAVE force a durable commit of everything written so far.
fn durable_commit(cx: &Cx) -> Result<(), Reply> {
    let Some(p) = cx.srv.persist.get() else {
        return Ok(());
    };
    if p.sync(std::time::Duration::from_secs(60)) {
        Ok(())
    } else {
        let why = p.failure().unwrap_or_else(|| "timed out".into());
        Err(Reply::error(format!("ERR durable commit failed: {why}")))
    }
}

/// DEBUG RELOAD: with the durable engine, commits everything durably and rebuilds the
/// in-memory keyspace from the store (what a restart would load). Without it, as Redis
/// reloads what it just saved, the keyspace stays as it is.
fn debug_reload(cx: &mut Cx) -> Reply {
    let Some(p) = cx.srv.persist.get() else {
        return Reply::OK;
    };
    if let Err(e) = durable_commit(cx) {
        return e;
    }
    // What a restart would load includes the keys' LRU/LFU data (as Redis's RDB).
    let access = saved_access::snapshot(cx.srv, cx.ks);
    if let Err(e) = saved_access::save(cx.srv, access.clone()) {
        return Reply::error(format!("ERR Error trying to save the data: {e}"));
    }
    let now = cx.ks.now;
    let dbs = cx.srv.ks.databases();
    let mut opts = crate::persist::LoadOptions::new(now);
    opts.zset_max_entries = cx.srv.config.get_i64("zset-max-listpack-entries").max(0) as usize;
    opts.zset_max_value = cx.srv.config.get_i64("zset-max-listpack-value").max(0) as usize;
    let loaded = p.with_store(move |store| {
        let mut keys = Vec::new();
        store
            .load(&opts, |db, key, value, at| keys.push((db, key, value, at)))
            .map(|_| keys)
    });
    let keys = match loaded {
        Some(Ok(k)) => k,
        Some(Err(e)) => return Reply::error(format!("ERR Error trying to load the data: {e}")),
        None => return Reply::error("ERR Error trying to load the data: storage is closed"),
    };
    cx.ks.quiet();
    for db in 0..dbs {
        cx.ks.flush_db(db);
    }
    for (db, key, value, at) in keys {
        if db < dbs {
            cx.ks.set_in(db, &key, value, at);
        }
    }
    saved_access::apply(cx.srv, &access, cx.ks);
    Reply::OK
}

/// SAVE/BGSAVE with the durable engine: the keys' LRU/LFU data go with the commit, as in
/// an RDB file (`saved_access`).
fn save_access(cx: &mut Cx) -> Result<(), Reply> {
    if cx.srv.persist.get().is_none() {
        return Ok(());
    }
    let rows = saved_access::snapshot(cx.srv, cx.ks);
    saved_access::save(cx.srv, rows)
        .map(|_| ())
        .map_err(|e| Reply::error(format!("ERR durable commit failed: {e}")))
}

fn save(cx: &mut Cx) -> Reply {
    if let Err(e) = durable_commit(cx).and_then(|_| save_access(cx)) {
        return e;
    }
    record_save(cx);
    Reply::OK
}

fn bgsave(cx: &mut Cx) -> Reply {
    if cx.args.len() > 2 || (cx.args.len() == 2 && !is(&cx.args[1], "SCHEDULE")) {
        return errors::syntax();
    }
    if let Err(e) = durable_commit(cx).and_then(|_| save_access(cx)) {
        return e;
    }
    record_save(cx);
    Reply::status("Background saving started")
}

fn wait(cx: &mut Cx) -> Reply {
    if crate::num::parse_i64(&cx.args[1]).is_none() {
        return errors::not_int();
    }
    if let Err(e) = super::args::timeout_ms(&cx.args[2]) {
        return e;
    }
    // No replicas: nothing can acknowledge, so the answer is 0 without waiting.
    Reply::Int(0)
}

fn shutdown(cx: &mut Cx) -> Reply {
    let (mut save, mut nosave, mut abort, mut other) = (false, false, false, false);
    for a in &cx.args[1..] {
        if is(a, "NOSAVE") {
            nosave = true;
        } else if is(a, "SAVE") {
            save = true;
        } else if is(a, "NOW") || is(a, "FORCE") {
            other = true;
        } else if is(a, "ABORT") {
            abort = true;
        } else {
            return errors::syntax();
        }
    }
    if (abort && (save || nosave || other)) || (save && nosave) {
        return errors::syntax();
    }
    if abort {
        // Shutdown is immediate here, so there is never one to abort.
        return errors::err("ERR No shutdown in progress.");
    }
    // Redis `shutdownCommand`: while a script is timed out only SHUTDOWN NOSAVE ends the
    // server (it cannot save a keyspace a script is half-way through changing).
    if !nosave {
        if let Some(busy) = crate::script::busy_error(cx.srv) {
            return errors::err(busy);
        }
    }
    tracing::warn!("SHUTDOWN requested by client {}", cx.sess.id);
    if nosave {
        cx.srv
            .shutdown_nosave
            .store(true, std::sync::atomic::Ordering::Release);
    }
    cx.srv.shutdown.notify_one();
    // Like Redis, the caller gets no reply: its connection closes as the server exits.
    cx.sess.close_after_reply = true;
    Reply::NoReply
}

/// MEMORY alone never reaches here (arity); kept for the table's container slot.
fn memory_container(cx: &mut Cx) -> Reply {
    match cx.args.get(1) {
        Some(sub) => errors::unknown_subcommand("memory", sub),
        None => errors::wrong_args("memory"),
    }
}
