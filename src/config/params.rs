//! Every standard Redis 7 configuration parameter (config.c `static_configs`), with its alias,
//! default (as `CONFIG GET` prints it), type/bounds and flags. 7.2 additions are marked.

use super::kind::{Kind, Num, Special, StrCheck};

pub const IMMUTABLE: u8 = 1;
/// Refused by CONFIG SET unless `enable-protected-configs` allows it.
pub const PROTECTED: u8 = 2;
/// Only matched by exact name, never by a CONFIG GET pattern.
pub const HIDDEN: u8 = 4;
/// The value is split on spaces before validation (`save`, `bind`, …).
pub const MULTI_ARG: u8 = 8;

#[derive(Debug, Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    pub alias: Option<&'static str>,
    pub default: &'static str,
    pub kind: Kind,
    pub flags: u8,
}

impl Param {
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

const fn p(name: &'static str, default: &'static str, kind: Kind, flags: u8) -> Param {
    Param {
        name,
        alias: None,
        default,
        kind,
        flags,
    }
}

const fn pa(
    name: &'static str,
    alias: &'static str,
    default: &'static str,
    kind: Kind,
    flags: u8,
) -> Param {
    Param {
        name,
        alias: Some(alias),
        default,
        kind,
        flags,
    }
}

const B: Kind = Kind::Bool;
const STR: Kind = Kind::Str(StrCheck::None);
const INT_MAX: i128 = i32::MAX as i128;
const INT_MIN: i128 = i32::MIN as i128;
const UINT_MAX: i128 = u32::MAX as i128;
const LONG_MAX: i128 = i64::MAX as i128;
const ULLONG_MAX: i128 = u64::MAX as i128;

/// Signed integer (int, long, long long, time_t, off_t).
const fn int(min: i128, max: i128) -> Kind {
    Kind::Num(Num {
        min,
        max,
        unsigned: false,
        memory: false,
        percent: false,
        octal: false,
    })
}

/// Unsigned integer (unsigned int, unsigned long, size_t): bounds compared unsigned.
const fn uint(min: i128, max: i128) -> Kind {
    Kind::Num(Num {
        min,
        max,
        unsigned: true,
        memory: false,
        percent: false,
        octal: false,
    })
}

/// Memory value (`1gb`, `100mb`…) stored in a signed type.
const fn mem(min: i128, max: i128) -> Kind {
    Kind::Num(Num {
        min,
        max,
        unsigned: false,
        memory: true,
        percent: false,
        octal: false,
    })
}

/// Memory value stored in an unsigned type.
const fn umem(min: i128, max: i128) -> Kind {
    Kind::Num(Num {
        min,
        max,
        unsigned: true,
        memory: true,
        percent: false,
        octal: false,
    })
}

const MAXMEMORY_POLICY: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];
const SYSLOG_FACILITY: &[&str] = &[
    "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
];
const LOGLEVEL: &[&str] = &["debug", "verbose", "notice", "warning"];
const SUPERVISED: &[&str] = &["upstart", "systemd", "auto", "no"];
const AOF_FSYNC: &[&str] = &["everysec", "always", "no"];
const REPL_DISKLESS_LOAD: &[&str] = &["disabled", "on-empty-db", "swapdb"];
const TLS_AUTH_CLIENTS: &[&str] = &["no", "yes", "optional"];
const OOM_SCORE_ADJ: &[&str] = &["no", "yes", "relative", "absolute"];
const ACL_PUBSUB_DEFAULT: &[&str] = &["allchannels", "resetchannels"];
const SANITIZE_DUMP: &[&str] = &["no", "yes", "clients"];
const PROTECTED_ACTION: &[&str] = &["no", "yes", "local"];
const ENDPOINT_TYPE: &[&str] = &["ip", "hostname", "unknown-endpoint"];
const PROPAGATION_ERROR: &[&str] = &["ignore", "panic", "panic-on-replicas"];

const I: u8 = IMMUTABLE;

pub static PARAMS: &[Param] = &[
    // Bool configs.
    p("rdbchecksum", "yes", B, I),
    p("daemonize", "no", B, I),
    p("io-threads-do-reads", "no", B, I),
    p("always-show-logo", "no", B, I),
    p("protected-mode", "yes", B, 0),
    p("rdbcompression", "yes", B, 0),
    p("rdb-del-sync-files", "no", B, 0),
    p("activerehashing", "yes", B, 0),
    p("stop-writes-on-bgsave-error", "yes", B, 0),
    p("set-proc-title", "yes", B, I),
    p("dynamic-hz", "yes", B, 0),
    p("lazyfree-lazy-eviction", "no", B, 0),
    p("lazyfree-lazy-expire", "no", B, 0),
    p("lazyfree-lazy-server-del", "no", B, 0),
    p("lazyfree-lazy-user-del", "no", B, 0),
    p("lazyfree-lazy-user-flush", "no", B, 0),
    p("repl-disable-tcp-nodelay", "no", B, 0),
    p("repl-diskless-sync", "yes", B, 0),
    p("aof-rewrite-incremental-fsync", "yes", B, 0),
    p("no-appendfsync-on-rewrite", "no", B, 0),
    p("cluster-require-full-coverage", "yes", B, 0),
    p("rdb-save-incremental-fsync", "yes", B, 0),
    p("aof-load-truncated", "yes", B, 0),
    p("aof-use-rdb-preamble", "yes", B, 0),
    p("aof-timestamp-enabled", "no", B, 0),
    pa(
        "cluster-replica-no-failover",
        "cluster-slave-no-failover",
        "no",
        B,
        0,
    ),
    pa("replica-lazy-flush", "slave-lazy-flush", "no", B, 0),
    pa(
        "replica-serve-stale-data",
        "slave-serve-stale-data",
        "yes",
        B,
        0,
    ),
    pa("replica-read-only", "slave-read-only", "yes", B, 0),
    pa(
        "replica-ignore-maxmemory",
        "slave-ignore-maxmemory",
        "yes",
        B,
        0,
    ),
    p("jemalloc-bg-thread", "yes", B, 0),
    p(
        "activedefrag",
        "no",
        Kind::Special(Special::ActiveDefrag),
        0,
    ),
    p("syslog-enabled", "no", B, I),
    p("cluster-enabled", "no", B, I),
    p("appendonly", "no", B, 0),
    p("cluster-allow-reads-when-down", "no", B, 0),
    p("cluster-allow-pubsubshard-when-down", "yes", B, 0),
    p("crash-log-enabled", "yes", B, 0),
    p("crash-memcheck-enabled", "yes", B, 0),
    p("use-exit-on-panic", "no", B, HIDDEN),
    p("disable-thp", "yes", B, I),
    p("cluster-allow-replica-migration", "yes", B, 0),
    p("replica-announced", "yes", B, 0),
    p("latency-tracking", "yes", B, 0),
    p("aof-disable-auto-gc", "no", B, 0),
    p("replica-ignore-disk-write-errors", "no", B, 0),
    // String configs.
    p("aclfile", "", STR, I),
    p("unixsocket", "", STR, I),
    p("pidfile", "", STR, I),
    pa("replica-announce-ip", "slave-announce-ip", "", STR, 0),
    p("masteruser", "", STR, 0),
    p("cluster-announce-ip", "", STR, 0),
    p("cluster-config-file", "nodes.conf", STR, I),
    p(
        "cluster-announce-hostname",
        "",
        Kind::Str(StrCheck::Hostname),
        0,
    ),
    // 7.2: the human-readable node name shown in CLUSTER NODES.
    p("cluster-announce-human-nodename", "", STR, 0),
    p("syslog-ident", "redis", STR, I),
    p("dbfilename", "dump.rdb", STR, PROTECTED),
    p("appendfilename", "appendonly.aof", STR, I),
    p("appenddirname", "appendonlydir", STR, I),
    p("server_cpulist", "", STR, I),
    p("bio_cpulist", "", STR, I),
    p("aof_rewrite_cpulist", "", STR, I),
    p("bgsave_cpulist", "", STR, I),
    p("ignore-warnings", "", STR, 0),
    p(
        "proc-title-template",
        "{title} {listen-addr} {server-mode}",
        Kind::Str(StrCheck::ProcTitle),
        0,
    ),
    p("bind-source-addr", "", STR, 0),
    p("logfile", "", STR, I),
    // 7.2: collation locale used by SORT … ALPHA.
    p("locale-collate", "", STR, 0),
    p("masterauth", "", STR, 0),
    p("requirepass", "", STR, 0),
    // Enum configs.
    p("supervised", "no", Kind::Enum(SUPERVISED), I),
    p("syslog-facility", "local0", Kind::Enum(SYSLOG_FACILITY), I),
    p(
        "repl-diskless-load",
        "disabled",
        Kind::Enum(REPL_DISKLESS_LOAD),
        0,
    ),
    p("loglevel", "notice", Kind::Enum(LOGLEVEL), 0),
    p(
        "maxmemory-policy",
        "noeviction",
        Kind::Enum(MAXMEMORY_POLICY),
        0,
    ),
    p("appendfsync", "everysec", Kind::Enum(AOF_FSYNC), 0),
    p("oom-score-adj", "no", Kind::Enum(OOM_SCORE_ADJ), 0),
    p(
        "acl-pubsub-default",
        "resetchannels",
        Kind::Enum(ACL_PUBSUB_DEFAULT),
        0,
    ),
    p("sanitize-dump-payload", "no", Kind::Enum(SANITIZE_DUMP), 0),
    p(
        "enable-protected-configs",
        "no",
        Kind::Enum(PROTECTED_ACTION),
        I,
    ),
    // Redis's default: DEBUG SLEEP holds the whole keyspace, and loopback is no trust
    // boundary. The in-process test double (`TestServer`) starts with "local".
    p(
        "enable-debug-command",
        "no",
        Kind::Enum(PROTECTED_ACTION),
        I,
    ),
    p(
        "enable-module-command",
        "no",
        Kind::Enum(PROTECTED_ACTION),
        I,
    ),
    p(
        "cluster-preferred-endpoint-type",
        "ip",
        Kind::Enum(ENDPOINT_TYPE),
        0,
    ),
    p(
        "propagation-error-behavior",
        "ignore",
        Kind::Enum(PROPAGATION_ERROR),
        0,
    ),
    p(
        "shutdown-on-sigint",
        "default",
        Kind::Special(Special::ShutdownFlags),
        MULTI_ARG,
    ),
    p(
        "shutdown-on-sigterm",
        "default",
        Kind::Special(Special::ShutdownFlags),
        MULTI_ARG,
    ),
    // Integer configs.
    p("databases", "16", int(1, INT_MAX), I),
    p("port", "6379", int(0, 65535), 0),
    p("io-threads", "1", int(1, 128), I),
    p("auto-aof-rewrite-percentage", "100", int(0, INT_MAX), 0),
    pa(
        "cluster-replica-validity-factor",
        "cluster-slave-validity-factor",
        "10",
        int(0, INT_MAX),
        0,
    ),
    pa(
        "list-max-listpack-size",
        "list-max-ziplist-size",
        "-2",
        int(INT_MIN, INT_MAX),
        0,
    ),
    p("tcp-keepalive", "300", int(0, INT_MAX), 0),
    p("cluster-migration-barrier", "1", int(0, INT_MAX), 0),
    p("active-defrag-cycle-min", "1", int(1, 99), 0),
    p("active-defrag-cycle-max", "25", int(1, 99), 0),
    p("active-defrag-threshold-lower", "10", int(0, 1000), 0),
    p("active-defrag-threshold-upper", "100", int(0, 1000), 0),
    p("lfu-log-factor", "10", int(0, INT_MAX), 0),
    p("lfu-decay-time", "1", int(0, INT_MAX), 0),
    pa(
        "replica-priority",
        "slave-priority",
        "100",
        int(0, INT_MAX),
        0,
    ),
    p("repl-diskless-sync-delay", "5", int(0, INT_MAX), 0),
    p("maxmemory-samples", "5", int(1, INT_MAX), 0),
    p("maxmemory-eviction-tenacity", "10", int(0, 100), 0),
    p("timeout", "0", int(0, INT_MAX), 0),
    pa(
        "replica-announce-port",
        "slave-announce-port",
        "0",
        int(0, 65535),
        0,
    ),
    p("tcp-backlog", "511", int(0, INT_MAX), I),
    p("cluster-port", "0", int(0, 65535), I),
    p("cluster-announce-bus-port", "0", int(0, 65535), 0),
    p("cluster-announce-port", "0", int(0, 65535), 0),
    p("cluster-announce-tls-port", "0", int(0, 65535), 0),
    p("repl-timeout", "60", int(1, INT_MAX), 0),
    pa(
        "repl-ping-replica-period",
        "repl-ping-slave-period",
        "10",
        int(1, INT_MAX),
        0,
    ),
    p("list-compress-depth", "0", int(0, INT_MAX), 0),
    p("rdb-key-save-delay", "0", int(INT_MIN, INT_MAX), HIDDEN),
    p("key-load-delay", "0", int(INT_MIN, INT_MAX), HIDDEN),
    p("active-expire-effort", "1", int(1, 10), 0),
    p("hz", "10", int(0, INT_MAX), 0),
    pa(
        "min-replicas-to-write",
        "min-slaves-to-write",
        "0",
        int(0, INT_MAX),
        0,
    ),
    pa(
        "min-replicas-max-lag",
        "min-slaves-max-lag",
        "10",
        int(0, INT_MAX),
        0,
    ),
    p("watchdog-period", "0", int(0, INT_MAX), HIDDEN),
    p("shutdown-timeout", "10", int(0, INT_MAX), 0),
    p("repl-diskless-sync-max-replicas", "0", int(0, INT_MAX), 0),
    // Unsigned int configs.
    p("maxclients", "10000", uint(1, UINT_MAX), 0),
    p(
        "unixsocketperm",
        "0",
        Kind::Num(Num {
            min: 0,
            max: 0o777,
            unsigned: true,
            memory: false,
            percent: false,
            octal: true,
        }),
        I,
    ),
    p("socket-mark-id", "0", uint(0, UINT_MAX), I),
    // Unsigned long configs.
    p(
        "active-defrag-max-scan-fields",
        "1000",
        uint(1, LONG_MAX),
        0,
    ),
    // Valkey 8.1's COMMANDLOG: its `slow` type's parameters are aliases of the slow log's
    // (Redis 7.2's names stay the primary ones, so CONFIG REWRITE writes those).
    pa(
        "slowlog-max-len",
        "commandlog-slow-execution-max-len",
        "128",
        uint(0, LONG_MAX),
        0,
    ),
    p(
        "commandlog-large-request-max-len",
        "128",
        uint(0, LONG_MAX),
        0,
    ),
    p(
        "commandlog-large-reply-max-len",
        "128",
        uint(0, LONG_MAX),
        0,
    ),
    p("acllog-max-len", "128", uint(0, LONG_MAX), 0),
    // Long long configs.
    pa(
        "busy-reply-threshold",
        "lua-time-limit",
        "5000",
        int(0, LONG_MAX),
        0,
    ),
    p("cluster-node-timeout", "15000", int(0, LONG_MAX), 0),
    pa(
        "slowlog-log-slower-than",
        "commandlog-execution-slower-than",
        "10000",
        int(-1, LONG_MAX),
        0,
    ),
    p(
        "commandlog-request-larger-than",
        "1048576",
        int(-1, LONG_MAX),
        0,
    ),
    p(
        "commandlog-reply-larger-than",
        "1048576",
        int(-1, LONG_MAX),
        0,
    ),
    p("latency-monitor-threshold", "0", int(0, LONG_MAX), 0),
    p(
        "proto-max-bulk-len",
        "536870912",
        mem(1024 * 1024, LONG_MAX),
        0,
    ),
    p("stream-node-max-entries", "100", int(0, LONG_MAX), 0),
    p("repl-backlog-size", "1048576", mem(1, LONG_MAX), 0),
    // Unsigned long long configs.
    p("maxmemory", "0", umem(0, ULLONG_MAX), 0),
    p("cluster-link-sendbuf-limit", "0", umem(0, ULLONG_MAX), 0),
    // size_t configs.
    pa(
        "hash-max-listpack-entries",
        "hash-max-ziplist-entries",
        "512",
        uint(0, LONG_MAX),
        0,
    ),
    p("set-max-intset-entries", "512", uint(0, LONG_MAX), 0),
    // 7.2: small sets of strings use a listpack.
    p("set-max-listpack-entries", "128", uint(0, LONG_MAX), 0),
    p("set-max-listpack-value", "64", umem(0, LONG_MAX), 0),
    pa(
        "zset-max-listpack-entries",
        "zset-max-ziplist-entries",
        "128",
        uint(0, LONG_MAX),
        0,
    ),
    p(
        "active-defrag-ignore-bytes",
        "104857600",
        umem(1, LONG_MAX),
        0,
    ),
    pa(
        "hash-max-listpack-value",
        "hash-max-ziplist-value",
        "64",
        umem(0, LONG_MAX),
        0,
    ),
    p("stream-node-max-bytes", "4096", umem(0, LONG_MAX), 0),
    pa(
        "zset-max-listpack-value",
        "zset-max-ziplist-value",
        "64",
        umem(0, LONG_MAX),
        0,
    ),
    p("hll-sparse-max-bytes", "3000", umem(0, LONG_MAX), 0),
    p("tracking-table-max-keys", "1000000", uint(0, LONG_MAX), 0),
    p(
        "client-query-buffer-limit",
        "1073741824",
        umem(1024 * 1024, LONG_MAX),
        0,
    ),
    p(
        "maxmemory-clients",
        "0",
        Kind::Num(Num {
            min: -100,
            max: LONG_MAX,
            unsigned: false,
            memory: true,
            percent: true,
            octal: false,
        }),
        0,
    ),
    // Other numeric configs.
    p("repl-backlog-ttl", "3600", int(0, LONG_MAX), 0),
    p("auto-aof-rewrite-min-size", "67108864", mem(0, LONG_MAX), 0),
    p(
        "loading-process-events-interval-bytes",
        "2097152",
        int(1024, INT_MAX),
        HIDDEN,
    ),
    // TLS configs (`tls-port` and the listener's files and options are served, through
    // rustls: see `crate::tls`; the replication and cluster ones are only reported).
    p("tls-port", "0", int(0, 65535), 0),
    p("tls-session-cache-size", "20480", int(0, INT_MAX), 0),
    p("tls-session-cache-timeout", "300", int(0, INT_MAX), 0),
    p("tls-cluster", "no", B, 0),
    p("tls-replication", "no", B, 0),
    p("tls-auth-clients", "yes", Kind::Enum(TLS_AUTH_CLIENTS), 0),
    p("tls-prefer-server-ciphers", "no", B, 0),
    p("tls-session-caching", "yes", B, 0),
    p("tls-cert-file", "", STR, 0),
    p("tls-key-file", "", STR, 0),
    p("tls-key-file-pass", "", STR, 0),
    p("tls-client-cert-file", "", STR, 0),
    p("tls-client-key-file", "", STR, 0),
    p("tls-client-key-file-pass", "", STR, 0),
    p("tls-dh-params-file", "", STR, 0),
    p("tls-ca-cert-file", "", STR, 0),
    p("tls-ca-cert-dir", "", STR, 0),
    p("tls-protocols", "", STR, 0),
    p("tls-ciphers", "", STR, 0),
    p("tls-ciphersuites", "", STR, 0),
    // Special configs.
    p("dir", "", Kind::Special(Special::Dir), PROTECTED),
    p(
        "save",
        "3600 1 300 100 60 10000",
        Kind::Special(Special::Save),
        MULTI_ARG,
    ),
    p(
        "client-output-buffer-limit",
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
        Kind::Special(Special::ClientOutputBufferLimit),
        MULTI_ARG,
    ),
    p(
        "oom-score-adj-values",
        "0 200 800",
        Kind::Special(Special::OomScoreAdjValues),
        MULTI_ARG,
    ),
    p(
        "notify-keyspace-events",
        "",
        Kind::Special(Special::NotifyKeyspaceEvents),
        0,
    ),
    p("bind", "* -::*", Kind::Special(Special::Bind), MULTI_ARG),
    pa(
        "replicaof",
        "slaveof",
        "",
        Kind::Special(Special::ReplicaOf),
        IMMUTABLE | MULTI_ARG,
    ),
    p(
        "latency-tracking-info-percentiles",
        "50 99 99.9",
        Kind::Special(Special::LatencyPercentiles),
        MULTI_ARG,
    ),
];

/// Index in [`PARAMS`] of `notify-keyspace-events`, resolved at compile time: every write
/// command reads its numeric view (the event classes) with one relaxed load.
pub const NOTIFY_KEYSPACE_EVENTS: usize = index_of("notify-keyspace-events");

const fn index_of(name: &str) -> usize {
    let mut i = 0;
    while i < PARAMS.len() {
        let n = PARAMS[i].name.as_bytes();
        let b = name.as_bytes();
        if n.len() == b.len() {
            let mut j = 0;
            while j < n.len() && n[j] == b[j] {
                j += 1;
            }
            if j == n.len() {
                return i;
            }
        }
        i += 1;
    }
    panic!("unknown parameter")
}
