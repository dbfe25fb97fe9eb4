//! INFO: Redis's sections and field names for what respite tracks. Process figures (memory,
//! CPU, OS) come from /proc where available.

use super::super::{registry, Cx};
use crate::engine::SHARDS;
use crate::instance::state::Shared;
use crate::protocol::Reply;
use bytes::Bytes;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Sections in output order; `true` when part of the default set.
const SECTIONS: &[(&str, bool)] = &[
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    ("modules", true),
    ("commandstats", false),
    ("errorstats", true),
    ("latencystats", false),
    ("cluster", true),
    ("keyspace", true),
];

/// Which sections the arguments ask for (unknown names are ignored, as in Redis).
fn selection(args: &[Bytes]) -> Vec<bool> {
    let mut on = vec![false; SECTIONS.len()];
    let all_default = |on: &mut Vec<bool>| {
        for (i, (_, d)) in SECTIONS.iter().enumerate() {
            on[i] |= *d;
        }
    };
    if args.is_empty() {
        all_default(&mut on);
    }
    for a in args {
        let a = a.to_ascii_lowercase();
        match &a[..] {
            b"default" => all_default(&mut on),
            b"all" | b"everything" => on.iter_mut().for_each(|x| *x = true),
            name => {
                if let Some(i) = SECTIONS.iter().position(|(n, _)| n.as_bytes() == name) {
                    on[i] = true;
                }
            }
        }
    }
    on
}

pub(in crate::cmd) fn info(cx: &mut Cx) -> Reply {
    // This connection's earlier commands count (they are otherwise added per batch).
    crate::cmd::flush_stats(cx.srv, cx.sess);
    let on = selection(&cx.args[1..]);
    // Grown as sections are added, not reserved up front: `used_memory` is read part-way
    // and would count a 4 KiB buffer Redis's INFO does not hold (its sds grows too).
    let mut out = String::new();
    for (i, (name, _)) in SECTIONS.iter().enumerate() {
        if !on[i] {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let title = match *name {
            "cpu" => "CPU".to_string(),
            n => {
                let mut t = n.to_string();
                t[..1].make_ascii_uppercase();
                t
            }
        };
        out.push_str("# ");
        out.push_str(&title);
        out.push_str("\r\n");
        let mut lines = Vec::new();
        section(cx, name, &mut lines);
        for (k, v) in lines {
            let _ = write!(out, "{k}:{v}\r\n");
        }
    }
    Reply::Verbatim(Bytes::from(out))
}

type Lines = Vec<(String, String)>;

fn push(l: &mut Lines, k: &str, v: impl ToString) {
    l.push((k.to_string(), v.to_string()));
}

fn section(cx: &mut Cx, name: &str, l: &mut Lines) {
    match name {
        "server" => server(cx.srv, l),
        "clients" => clients(cx, l),
        "memory" => memory(cx, l),
        "persistence" => persistence(cx.srv, l),
        "stats" => stats(cx.srv, l),
        "replication" => replication(cx.srv, l),
        "cpu" => cpu(l),
        "commandstats" => commandstats(cx.srv, l),
        "errorstats" => {
            for (code, n) in cx.srv.stats.errors_by_code.lock().iter() {
                push(l, &format!("errorstat_{code}"), format!("count={n}"));
            }
        }
        "cluster" => push(l, "cluster_enabled", u8::from(cx.srv.cluster_emulated)),
        "keyspace" => keyspace(cx, l),
        "latencystats" => super::latency::info_section(cx.srv, l),
        // No modules.
        _ => {}
    }
}

fn server(srv: &Shared, l: &mut Lines) {
    let uptime = srv.started.elapsed().as_secs();
    let hz = srv.config.get_i64("hz");
    push(l, "redis_version", crate::REDIS_VERSION);
    push(l, "respite_version", crate::RESPITE_VERSION);
    push(l, "redis_git_sha1", "00000000");
    push(l, "redis_git_dirty", 0);
    push(l, "redis_build_id", "0");
    let mode = if srv.cluster_emulated {
        "cluster"
    } else {
        "standalone"
    };
    push(l, "redis_mode", mode);
    push(l, "os", os_name());
    push(l, "arch_bits", usize::BITS);
    push(l, "monotonic_clock", "POSIX clock_gettime");
    push(
        l,
        "multiplexing_api",
        if cfg!(target_os = "linux") {
            "epoll"
        } else if cfg!(unix) {
            "kqueue"
        } else {
            "iocp"
        },
    );
    push(l, "atomicvar_api", "c11-builtin");
    push(l, "gcc_version", "0.0.0");
    push(l, "process_id", std::process::id());
    push(l, "process_supervised", "no");
    push(l, "run_id", &srv.run_id);
    push(l, "tcp_port", srv.port.load(Ordering::Relaxed));
    push(l, "server_time_usec", srv.clock.now_us());
    push(l, "uptime_in_seconds", uptime);
    push(l, "uptime_in_days", uptime / 86400);
    push(l, "hz", hz);
    push(l, "configured_hz", hz);
    push(
        l,
        "lru_clock",
        (srv.clock.now_ms() / 1000) & ((1 << 24) - 1),
    );
    push(
        l,
        "executable",
        std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    );
    push(l, "config_file", "");
    push(l, "io_threads_active", 0);
    let binds = srv.config.get("bind").unwrap_or_default();
    let binds: Vec<String> = binds
        .split(' ')
        .filter(|b| !b.is_empty())
        .map(|b| format!("bind={b}"))
        .collect();
    push(
        l,
        "listener0",
        format!(
            "name=tcp,{},port={}",
            binds.join(","),
            srv.port.load(Ordering::Relaxed)
        ),
    );
}

fn clients(cx: &mut Cx, l: &mut Lines) {
    let srv = cx.srv;
    let all = srv.clients.all();
    // The largest input (query buffer allocation and arguments) and output buffers of the
    // last 8 seconds, as Redis reports them, and of now.
    let (mut max_in, mut max_out) = srv.peaks.recent(srv.uptime_secs());
    let (mut blocked, mut in_timeout, mut pubsub, mut watching) = (0, 0, 0, 0);
    for h in &all {
        max_in = max_in.max(h.mem.input_usage());
        max_out = max_out.max(h.mem.output_usage());
        let info = h.info.lock();
        blocked += usize::from(info.blocked);
        in_timeout += usize::from(info.blocked && info.block_timeout);
        pubsub += usize::from(info.sub + info.psub + info.ssub > 0);
        watching += usize::from(info.watch > 0);
    }
    // Distinct watched keys over every db (INFO holds the whole keyspace).
    let mut watched_keys = 0;
    for db in 0..srv.ks.databases() {
        for s in 0..SHARDS {
            watched_keys += cx.ks.shard_at(db, s).watched_len();
        }
    }
    push(l, "connected_clients", all.len());
    push(l, "cluster_connections", 0);
    push(l, "maxclients", srv.config.get_i64("maxclients"));
    push(l, "client_recent_max_input_buffer", max_in);
    push(l, "client_recent_max_output_buffer", max_out);
    push(l, "blocked_clients", blocked);
    push(l, "tracking_clients", srv.tracking.stats().0);
    // pubsub_clients, watching_clients and total_watched_keys: Redis 7.4.
    push(l, "pubsub_clients", pubsub);
    push(l, "watching_clients", watching);
    push(l, "clients_in_timeout_table", in_timeout);
    push(l, "total_watched_keys", watched_keys);
    let (keys, on_nokey) = srv.blocking.key_counts();
    push(l, "total_blocking_keys", keys);
    push(l, "total_blocking_keys_on_nokey", on_nokey);
}

/// Redis 7.2's memory section. `used_memory` is the counting allocator's live bytes (see
/// `crate::alloc`); the allocator_* figures are Redis's own stand-ins for an allocator
/// without statistics (`cronUpdateMemoryStats`).
fn memory(cx: &mut Cx, l: &mut Lines) {
    let srv = cx.srv;
    let o = super::memory::overhead(srv, cx.ks);
    let used = o.total;
    let total = proc_meminfo_total().unwrap_or(0);
    let maxmemory = srv.config.get_u64("maxmemory");
    let pct = |x: f64| format!("{:.2}%", x as f32);
    let r2 = |x: f64| format!("{:.2}", x as f32);
    push(l, "used_memory", used);
    push(l, "used_memory_human", bytes_to_human(used));
    push(l, "used_memory_rss", o.rss);
    push(l, "used_memory_rss_human", bytes_to_human(o.rss));
    push(l, "used_memory_peak", o.peak);
    push(l, "used_memory_peak_human", bytes_to_human(o.peak));
    push(l, "used_memory_peak_perc", pct(o.peak_perc));
    push(l, "used_memory_overhead", o.overhead_total);
    push(l, "used_memory_startup", o.startup);
    push(l, "used_memory_dataset", o.dataset);
    push(l, "used_memory_dataset_perc", pct(o.dataset_perc));
    push(l, "allocator_allocated", o.allocator_allocated);
    push(l, "allocator_active", o.allocator_active);
    push(l, "allocator_resident", o.allocator_resident);
    push(l, "total_system_memory", total);
    push(l, "total_system_memory_human", bytes_to_human(total));
    let m = crate::script::memory_info(srv);
    // The deprecated names come first, as Redis 7.2 prints them.
    push(l, "used_memory_lua", m.vm_eval);
    push(l, "used_memory_vm_eval", m.vm_eval);
    push(l, "used_memory_lua_human", bytes_to_human(m.vm_eval));
    push(l, "used_memory_scripts_eval", m.scripts_eval);
    push(l, "number_of_cached_scripts", m.cached_scripts);
    push(l, "number_of_functions", m.functions);
    push(l, "number_of_libraries", m.libraries);
    push(l, "used_memory_vm_functions", m.vm_functions);
    push(l, "used_memory_vm_total", m.vm_total);
    push(l, "used_memory_vm_total_human", bytes_to_human(m.vm_total));
    push(l, "used_memory_functions", m.functions_bytes);
    let scripts = m.scripts_eval + m.functions_bytes;
    push(l, "used_memory_scripts", scripts);
    push(l, "used_memory_scripts_human", bytes_to_human(scripts));
    push(l, "maxmemory", maxmemory);
    push(l, "maxmemory_human", bytes_to_human(maxmemory));
    push(
        l,
        "maxmemory_policy",
        srv.config.get("maxmemory-policy").unwrap_or_default(),
    );
    let (af, afb) = o.allocator_frag();
    let (ar, arb) = o.allocator_rss();
    let (rr, rrb) = o.rss_extra();
    let (tf, tfb) = o.total_frag();
    push(l, "allocator_frag_ratio", r2(af));
    push(l, "allocator_frag_bytes", afb.max(0));
    push(l, "allocator_rss_ratio", r2(ar));
    push(l, "allocator_rss_bytes", arb);
    push(l, "rss_overhead_ratio", r2(rr));
    push(l, "rss_overhead_bytes", rrb);
    push(l, "mem_fragmentation_ratio", r2(tf));
    push(l, "mem_fragmentation_bytes", tfb);
    // No AOF buffer or replica output: nothing is left out of the eviction check.
    for k in [
        "mem_not_counted_for_evict",
        "mem_replication_backlog",
        "mem_total_replication_buffers",
        "mem_clients_slaves",
    ] {
        push(l, k, 0);
    }
    push(l, "mem_clients_normal", o.clients_normal);
    push(l, "mem_cluster_links", 0);
    push(l, "mem_aof_buffer", 0);
    push(l, "mem_allocator", "mimalloc");
    push(l, "active_defrag_running", 0);
    push(l, "lazyfree_pending_objects", srv.ks.lazyfree.pending());
    push(l, "lazyfreed_objects", srv.ks.lazyfree.freed());
}

/// Changes so far (what `rdb_changes_since_last_save` is measured in): one per successful
/// write call, corrected by what commands reported (`Cx::changes`).
pub(super) fn write_calls(srv: &Shared) -> u64 {
    let calls: u64 = registry()
        .specs
        .iter()
        .zip(&srv.cmdstats)
        .filter(|(s, _)| s.is_write())
        .map(|(_, c)| {
            let failed = c.failed.load(Ordering::Relaxed);
            c.calls.load(Ordering::Relaxed).saturating_sub(failed)
        })
        .sum();
    calls.saturating_add_signed(srv.stats.dirty_extra.load(Ordering::Relaxed))
}

fn persistence(srv: &Shared, l: &mut Lines) {
    let changes =
        write_calls(srv).saturating_sub(srv.stats.writes_at_last_save.load(Ordering::Relaxed));
    push(l, "loading", 0);
    push(l, "async_loading", 0);
    // No fork, so no copy-on-write and no save in progress: Redis's zeros outside a save.
    push(l, "current_cow_peak", 0);
    push(l, "current_cow_size", 0);
    push(l, "current_cow_size_age", 0);
    push(l, "current_fork_perc", "0.00");
    push(l, "current_save_keys_processed", 0);
    push(l, "current_save_keys_total", 0);
    push(l, "rdb_changes_since_last_save", changes);
    push(l, "rdb_bgsave_in_progress", 0);
    push(
        l,
        "rdb_last_save_time",
        srv.last_save_unix.load(Ordering::Relaxed),
    );
    push(l, "rdb_last_bgsave_status", "ok");
    push(l, "rdb_last_bgsave_time_sec", -1);
    push(l, "rdb_current_bgsave_time_sec", -1);
    push(l, "rdb_saves", srv.stats.rdb_saves.load(Ordering::Relaxed));
    push(l, "rdb_last_cow_size", 0);
    let p = srv.persist.get();
    if p.is_none() {
        // The memory engine starts empty: nothing was loaded.
        push(l, "rdb_last_load_keys_expired", 0);
        push(l, "rdb_last_load_keys_loaded", 0);
    }
    push(l, "aof_enabled", p.is_some() as u8);
    push(l, "aof_rewrite_in_progress", 0);
    push(l, "aof_rewrite_scheduled", 0);
    push(l, "aof_last_rewrite_time_sec", -1);
    push(l, "aof_current_rewrite_time_sec", -1);
    push(l, "aof_last_bgrewrite_status", "ok");
    push(l, "aof_rewrites", 0);
    push(l, "aof_rewrites_consecutive_failures", 0);
    let failure = p.and_then(|p| p.failure());
    push(
        l,
        "aof_last_write_status",
        if failure.is_some() { "err" } else { "ok" },
    );
    push(l, "aof_last_cow_size", 0);
    push(l, "module_fork_in_progress", 0);
    push(l, "module_fork_last_cow_size", 0);
    // respite's durable engine (DESIGN.md §6).
    push(
        l,
        "respite_engine",
        if p.is_some() { "redb" } else { "memory" },
    );
    if let Some(p) = p {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mode = crate::persist::Persistence::fsync_mode(&srv.config);
        push(
            l,
            "respite_appendfsync",
            format!("{mode:?}").to_ascii_lowercase(),
        );
        push(l, "respite_store_path", p.path.display().to_string());
        push(l, "respite_commits", get(&p.stats.commits));
        push(l, "respite_durable_commits", get(&p.stats.durable_commits));
        push(l, "respite_committed_changes", get(&p.stats.changes));
        push(l, "respite_rows_written", get(&p.stats.rows_written));
        push(l, "respite_failed_commits", get(&p.stats.failed_commits));
        push(l, "respite_pending_changes", p.journal.pending_len());
        push(l, "respite_checkpoints", get(&p.stats.checkpoints));
        push(
            l,
            "respite_failed_checkpoints",
            get(&p.stats.failed_checkpoints),
        );
        push(l, "respite_unapplied_changes", get(&p.stats.unapplied));
        push(l, "respite_throttled_writers", get(&p.stats.throttled));
        push(l, "respite_wal_bytes", get(&p.stats.wal_bytes));
        push(
            l,
            "respite_last_durable_commit_time",
            get(&p.stats.last_durable_unix),
        );
        push(l, "respite_last_error", failure.unwrap_or_default());
    }
}

fn stats(srv: &Shared, l: &mut Lines) {
    let s = &srv.stats;
    let ks = &srv.ks.stats;
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    push(l, "total_connections_received", get(&s.total_connections));
    push(l, "total_commands_processed", get(&s.total_commands));
    use crate::instance::metrics::Metric;
    push(l, "instantaneous_ops_per_sec", s.inst.get(Metric::Commands));
    push(l, "total_net_input_bytes", get(&s.net_input_bytes));
    push(l, "total_net_output_bytes", get(&s.net_output_bytes));
    // No replication traffic and no replica has ever synced: Redis's zeros on a primary
    // without replicas.
    push(l, "total_net_repl_input_bytes", 0);
    push(l, "total_net_repl_output_bytes", 0);
    let kbps = |m| format!("{:.2}", s.inst.get(m) as f32 / 1024.0);
    push(l, "instantaneous_input_kbps", kbps(Metric::NetInput));
    push(l, "instantaneous_output_kbps", kbps(Metric::NetOutput));
    push(l, "instantaneous_input_repl_kbps", "0.00");
    push(l, "instantaneous_output_repl_kbps", "0.00");
    push(l, "rejected_connections", get(&s.rejected_connections));
    push(l, "sync_full", 0);
    push(l, "sync_partial_ok", 0);
    push(l, "sync_partial_err", 0);
    // Redis 7.4 shows hash fields removed by their deadline first.
    push(l, "expired_subkeys", get(&ks.expired_subkeys));
    push(l, "expired_keys", get(&ks.expired));
    // Not `expired_stale_perc` nor `expired_time_cap_reached_count`: the sweep walks a
    // deadline index instead of sampling under a time cap, so neither has a meaning here.
    push(l, "expire_cycle_cpu_milliseconds", s.expire_cycle.ms());
    push(l, "evicted_keys", get(&ks.evicted));
    push(l, "evicted_clients", get(&srv.client_eviction.evicted));
    push(l, "evicted_scripts", get(&s.evicted_scripts));
    // Milliseconds over maxmemory, the current episode included in the total (Redis).
    let since = get(&ks.eviction_exceeded_since_us);
    let current = super::super::refusals::exceeded_us(since);
    let total_exceeded = get(&ks.eviction_exceeded_total_us) + current;
    push(l, "total_eviction_exceeded_time", total_exceeded / 1000);
    push(l, "current_eviction_exceeded_time", current / 1000);
    push(l, "keyspace_hits", get(&ks.hits));
    push(l, "keyspace_misses", get(&ks.misses));
    use crate::instance::pubsub::Kind;
    push(l, "pubsub_channels", srv.pubsub.count(Kind::Channel));
    push(l, "pubsub_patterns", srv.pubsub.count(Kind::Pattern));
    push(l, "pubsubshard_channels", srv.pubsub.count(Kind::Shard));
    // respite never forks.
    push(l, "latest_fork_usec", 0);
    push(l, "total_forks", 0);
    push(
        l,
        "migrate_cached_sockets",
        super::super::migrate::cached_sockets(srv),
    );
    // Only a writable replica tracks keys with a TTL set on it.
    push(l, "slave_expires_tracked_keys", 0);
    // Active defragmentation cannot be enabled (no jemalloc), so it never ran.
    for f in [
        "active_defrag_hits",
        "active_defrag_misses",
        "active_defrag_key_hits",
        "active_defrag_key_misses",
        "total_active_defrag_time",
        "current_active_defrag_time",
    ] {
        push(l, f, 0);
    }
    let (_, keys, items, prefixes) = srv.tracking.stats();
    push(l, "tracking_total_keys", keys);
    push(l, "tracking_total_items", items);
    push(l, "tracking_total_prefixes", prefixes);
    push(l, "unexpected_error_replies", 0);
    push(l, "total_error_replies", get(&s.error_replies));
    push(l, "total_reads_processed", get(&s.reads_processed));
    push(l, "total_writes_processed", get(&s.writes_processed));
    // `io-threads` is 1: no reads or writes are handed to I/O threads.
    push(l, "io_threaded_reads_processed", 0);
    push(l, "io_threaded_writes_processed", 0);
    push(
        l,
        "client_query_buffer_limit_disconnections",
        get(&s.qbuf_limit_disconnections),
    );
    push(
        l,
        "client_output_buffer_limit_disconnections",
        get(&srv.pubsub.obuf_disconnections),
    );
    // ACL denials (failed AUTH / HELLO AUTH, and NOPERM refusals).
    let d = &srv.acl.denials;
    push(l, "acl_access_denied_auth", get(&d.auth));
    push(l, "acl_access_denied_cmd", get(&d.cmd));
    push(l, "acl_access_denied_key", get(&d.key));
    push(l, "acl_access_denied_channel", get(&d.channel));
}

fn replication(srv: &Shared, l: &mut Lines) {
    push(l, "role", "master");
    push(l, "connected_slaves", 0);
    // Shown while min-replicas-to-write is in force (no replica is ever good here).
    if srv.config.get_i64("min-replicas-to-write") > 0
        && srv.config.get_i64("min-replicas-max-lag") > 0
    {
        push(l, "min_slaves_good_slaves", 0);
    }
    push(l, "master_failover_state", "no-failover");
    push(l, "master_replid", &srv.run_id);
    push(l, "master_replid2", "0".repeat(40));
    push(l, "master_repl_offset", 0);
    push(l, "second_repl_offset", -1);
    push(l, "repl_backlog_active", 0);
    push(
        l,
        "repl_backlog_size",
        srv.config.get_i64("repl-backlog-size"),
    );
    push(l, "repl_backlog_first_byte_offset", 0);
    push(l, "repl_backlog_histlen", 0);
}

fn cpu(l: &mut Lines) {
    let (user, sys) = proc_cpu().unwrap_or((0.0, 0.0));
    push(l, "used_cpu_sys", format!("{sys:.6}"));
    push(l, "used_cpu_user", format!("{user:.6}"));
    push(l, "used_cpu_sys_children", "0.000000");
    push(l, "used_cpu_user_children", "0.000000");
}

fn commandstats(srv: &Shared, l: &mut Lines) {
    for (spec, st) in registry().specs.iter().zip(&srv.cmdstats) {
        let calls = st.calls.load(Ordering::Relaxed);
        let usec = st.usec.load(Ordering::Relaxed);
        let rejected = st.rejected.load(Ordering::Relaxed);
        let failed = st.failed.load(Ordering::Relaxed);
        if calls == 0 && rejected == 0 && failed == 0 {
            continue;
        }
        let per_call = if calls == 0 {
            0.0
        } else {
            usec as f64 / calls as f64
        };
        push(
            l,
            &format!("cmdstat_{}", spec.name),
            format!(
                "calls={calls},usec={usec},usec_per_call={per_call:.2},\
                 rejected_calls={rejected},failed_calls={failed}"
            ),
        );
    }
}

fn keyspace(cx: &mut Cx, l: &mut Lines) {
    // INFO holds the whole keyspace (Lock::All), so shards are read through its view.
    for db in 0..cx.srv.ks.databases() {
        let (mut keys, mut expires, mut sum, mut hashes) = (0, 0, 0u128, 0);
        for s in 0..SHARDS {
            let sh = cx.ks.shard_at(db, s);
            keys += sh.len();
            expires += sh.expires_len();
            sum += sh.deadline_sum();
            hashes += sh.field_expiry_len();
        }
        if keys > 0 {
            // The mean remaining TTL in ms (0 with no volatile key, as Redis), from the
            // exact mean deadline where Redis keeps a sampled running estimate.
            let now = cx.srv.clock.now_ms() as u128;
            let avg_ttl = if expires == 0 {
                0
            } else {
                (sum / expires as u128).saturating_sub(now)
            };
            // subexpiry (7.4): hashes with field deadlines, the active field expiry's
            // worklist as Redis counts its `hexpires`.
            push(
                l,
                &format!("db{db}"),
                format!("keys={keys},expires={expires},avg_ttl={avg_ttl},subexpiry={hashes}"),
            );
        }
    }
}

/// Redis `bytesToHuman`.
fn bytes_to_human(n: u64) -> String {
    const UNITS: [(u64, &str); 5] = [
        (1 << 10, "K"),
        (1 << 20, "M"),
        (1 << 30, "G"),
        (1 << 40, "T"),
        (1 << 50, "P"),
    ];
    if n < 1024 {
        return format!("{n}B");
    }
    for (scale, unit) in UNITS {
        if n < scale.saturating_mul(1024) {
            return format!("{:.2}{unit}", n as f64 / scale as f64);
        }
    }
    format!("{n}B")
}

fn read_proc(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// `uname` without libc: kernel name, release and machine.
fn os_name() -> String {
    let sys = read_proc("/proc/sys/kernel/ostype")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| std::env::consts::OS.to_string());
    let rel = read_proc("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    format!("{sys} {rel} {}", std::env::consts::ARCH)
}

/// A `Name:   123 kB` field of a /proc status-style file, in bytes.
fn kb_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kb: u64 = line[name.len()..].split_whitespace().next()?.parse().ok()?;
    kb.checked_mul(1024)
}

fn proc_meminfo_total() -> Option<u64> {
    kb_field(&read_proc("/proc/meminfo")?, "MemTotal:")
}

/// User and system CPU seconds of this process (/proc/self/stat fields 14 and 15, in
/// USER_HZ ticks, which Linux fixes at 100 for user space).
fn proc_cpu() -> Option<(f64, f64)> {
    let stat = read_proc("/proc/self/stat")?;
    // The command name (field 2) may contain spaces; fields resume after its ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i)?.parse::<u64>().ok();
    Some((ticks(11)? as f64 / 100.0, ticks(12)? as f64 / 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        assert_eq!(bytes_to_human(0), "0B");
        assert_eq!(bytes_to_human(1023), "1023B");
        assert_eq!(bytes_to_human(1024), "1.00K");
        assert_eq!(bytes_to_human(1016768), "992.94K");
        assert_eq!(bytes_to_human(7323648), "6.98M");
        assert_eq!(bytes_to_human(25276502016), "23.54G");
    }

    #[test]
    fn section_selection() {
        let b = |s: &[&str]| -> Vec<Bytes> {
            s.iter()
                .map(|x| Bytes::copy_from_slice(x.as_bytes()))
                .collect()
        };
        let on = selection(&b(&[]));
        assert!(on[0] && !on[8] && on[12]);
        let on = selection(&b(&["KEYSPACE", "nope"]));
        assert_eq!(on.iter().filter(|x| **x).count(), 1);
        assert!(selection(&b(&["everything"])).iter().all(|x| *x));
        assert!(!selection(&b(&["foo"])).iter().any(|x| *x));
    }

    #[test]
    fn proc_readers_work_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(super::super::super::refusals::rss() > 0);
            assert!(proc_cpu().is_some());
        }
    }
}
