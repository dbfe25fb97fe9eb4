//! `respite` command line: `respite [serve] [flags]` runs the server, `respite proxy --node
//! ID=URL ...` a sharding proxy.

use clap::{Parser, Subcommand};

// malloc/free were ~20% of instructions per request with glibc (DESIGN.md §9 lever). The
// counting wrapper gives `used_memory` and `maxmemory` the live heap bytes (src/alloc.rs).
#[global_allocator]
static GLOBAL: respite::alloc::Counting<mimalloc::MiMalloc> =
    respite::alloc::Counting(mimalloc::MiMalloc);
use respite::Config;

#[derive(Parser)]
#[command(
    name = "respite",
    version,
    about = "A server that speaks the Redis protocol"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the server (the default).
    Serve(ServeArgs),
    /// Move the keys whose owner changed when a proxy fleet changes (resumable, idempotent).
    Rebalance(RebalanceArgs),
    /// Run a sharding proxy in front of independent Redis primaries (DESIGN.md §7).
    Proxy(ProxyArgs),
}

#[derive(clap::Args)]
struct RebalanceArgs {
    /// The old fleet: ID=redis://[user:pass@]host:port[/db],...
    #[arg(long, value_name = "NODES")]
    from: String,
    /// The new fleet (a node kept across fleets has the same id; its URL is taken from here).
    #[arg(long, value_name = "NODES")]
    to: String,
    /// Keys per SCAN batch and pipeline round.
    #[arg(long, default_value_t = 500)]
    batch: usize,
    /// Count what would move; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print progress to stderr every this many scanned keys (0 = never).
    #[arg(long, default_value_t = 10_000)]
    progress_every: u64,
}

/// `respite rebalance`: exit 0 when complete with no failures, 1 on a node error or a failed
/// key, 2 for bad arguments.
fn rebalance_cmd(a: RebalanceArgs) -> i32 {
    use respite::proxy::rebalance::{parse_node_list, rebalance, Progress, RebalanceOptions};
    let parse = |flag: &str, s: &str| parse_node_list(s).map_err(|e| format!("--{flag}: {e}"));
    let (from, to) = match (parse("from", &a.from), parse("to", &a.to)) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("respite: {e}");
            return 2;
        }
    };
    let (every, mut next) = (a.progress_every, a.progress_every);
    let progress = move |p: &Progress| {
        if every > 0 && p.scanned >= next {
            eprintln!("respite: {p}");
            next = p.scanned - p.scanned % every + every;
        }
        true
    };
    let opts = RebalanceOptions {
        from,
        to,
        batch: a.batch,
        dry_run: a.dry_run,
        progress: Some(Box::new(progress)),
    };
    match rebalance(opts) {
        Ok(s) => {
            print!("{s}");
            i32::from(!s.complete || s.failed > 0)
        }
        Err(e) => {
            eprintln!("respite: {e}");
            1
        }
    }
}

#[derive(clap::Args, Clone)]
struct ProxyArgs {
    /// A config file (`port`, `bind`, `requirepass`, `node ID URL` lines; `#` comments);
    /// flags override it, and `--node` flags replace its nodes.
    #[arg(long, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    /// TCP port (default 7000); 0 picks a free port and prints it on stdout.
    #[arg(long)]
    port: Option<u16>,
    /// Addresses to listen on (default 127.0.0.1).
    #[arg(long, num_args = 1..)]
    bind: Vec<String>,
    /// Clients must AUTH with this password.
    #[arg(long)]
    requirepass: Option<String>,
    /// The proxy's ACL users file (`user NAME rule…` lines): clients AUTH as these users.
    #[arg(long, value_name = "FILE")]
    aclfile: Option<String>,
    /// A node: ID=redis://[user[:password]@]host:port[/db] (repeat for each node); a
    /// primary and its replicas: ID=URL,URL,… (the proxy follows a failover among them).
    #[arg(
        long = "node",
        value_name = "ID=URL",
        required_unless_present = "config"
    )]
    nodes: Vec<String>,
    /// Worker threads (default 1, single-threaded; 0 = one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// The address CLUSTER SLOTS / SHARDS / NODES give cluster-mode clients (default: the
    /// first --bind address; none for a wildcard bind, so clients keep the one they used).
    #[arg(long)]
    announce_ip: Option<String>,
    /// The port CLUSTER SLOTS / SHARDS / NODES give cluster-mode clients (default: --port).
    #[arg(long)]
    announce_port: Option<u16>,
    /// Shared connections per node.
    #[arg(long)]
    conns_per_node: Option<usize>,
    /// Dedicated connections per node (blocking commands, transactions; default 10000).
    #[arg(long)]
    max_dedicated_per_node: Option<usize>,
    /// Milliseconds a blocking or transaction command queues for a dedicated connection.
    #[arg(long)]
    dedicated_wait_ms: Option<u64>,
    /// Close clients idle for this many seconds (0 = never, the default).
    #[arg(long)]
    timeout: Option<u64>,
    /// Most clients at once (default 10000).
    #[arg(long)]
    maxclients: Option<usize>,
    /// A client's unparsed input limit, e.g. 1gb (the default).
    #[arg(long)]
    client_query_buffer_limit: Option<String>,
    /// Largest bulk argument and largest node reply passed on, e.g. 512mb (the default).
    #[arg(long)]
    proto_max_bulk_len: Option<String>,
    /// Milliseconds to wait for a node connection.
    #[arg(long)]
    connect_timeout_ms: Option<u64>,
    /// Milliseconds to wait for a node's reply on a shared connection.
    #[arg(long)]
    command_timeout_ms: Option<u64>,
    /// TLS clients on this port too (0 = none), with the tls-* settings below.
    #[arg(long)]
    tls_port: Option<u16>,
    /// Prometheus text exposition on HTTP GET /metrics on this port (off by default).
    #[arg(long)]
    metrics_port: Option<u16>,
    #[arg(long)]
    tls_cert_file: Option<String>,
    #[arg(long)]
    tls_key_file: Option<String>,
    /// CA certificates: they sign client certificates and rediss:// nodes' certificates.
    #[arg(long)]
    tls_ca_cert_file: Option<String>,
    /// yes (default) | no | optional.
    #[arg(long)]
    tls_auth_clients: Option<String>,
    #[arg(long)]
    tls_protocols: Option<String>,
    #[arg(long)]
    tls_ciphersuites: Option<String>,
    #[arg(long)]
    tls_ciphers: Option<String>,
    /// The certificate and key the proxy presents to rediss:// nodes.
    #[arg(long)]
    tls_client_cert_file: Option<String>,
    #[arg(long)]
    tls_client_key_file: Option<String>,
}

fn proxy_config(a: ProxyArgs) -> Result<respite::proxy::config::ProxyConfig, String> {
    use respite::proxy::config::{NodeSpec, ProxyConfig};
    use std::time::Duration;
    let mut cfg = ProxyConfig::default();
    if let Some(path) = &a.config {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        respite::proxy::config_file::parse(&text, &mut cfg)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        cfg.config_path = Some(path.clone());
    }
    if let Some(p) = a.port {
        cfg.port = p;
    }
    if a.aclfile.is_some() {
        cfg.aclfile = a.aclfile;
    }
    if a.requirepass.is_some() {
        cfg.requirepass = a.requirepass.filter(|p| !p.is_empty());
    }
    if !a.nodes.is_empty() {
        cfg.nodes = a
            .nodes
            .iter()
            .map(|n| NodeSpec::parse(n))
            .collect::<Result<_, _>>()?;
    }
    if !a.bind.is_empty() {
        cfg.bind = a.bind;
    }
    if let Some(n) = a.threads {
        cfg.threads = n;
    }
    if a.announce_ip.is_some() {
        cfg.announce_ip = a.announce_ip;
    }
    if a.announce_port.is_some() {
        cfg.announce_port = a.announce_port;
    }
    if let Some(n) = a.conns_per_node {
        cfg.conns_per_node = n.max(1);
    }
    if let Some(n) = a.max_dedicated_per_node {
        cfg.max_dedicated_per_node = n.max(1);
    }
    if let Some(ms) = a.connect_timeout_ms {
        cfg.connect_timeout = Duration::from_millis(ms);
    }
    if let Some(ms) = a.command_timeout_ms {
        cfg.command_timeout = Duration::from_millis(ms);
    }
    if let Some(ms) = a.dedicated_wait_ms {
        cfg.dedicated_wait = Duration::from_millis(ms);
    }
    if let Some(s) = a.timeout {
        cfg.timeout = Duration::from_secs(s);
    }
    if let Some(n) = a.maxclients {
        cfg.maxclients = n;
    }
    let size = |flag: &str, v: &str| {
        respite::config::parse_memory(v)
            .map(|n| n as usize)
            .ok_or_else(|| format!("--{flag}: not a size: {v}"))
    };
    if let Some(v) = &a.client_query_buffer_limit {
        cfg.client_query_buffer_limit = size("client-query-buffer-limit", v)?;
    }
    if let Some(v) = &a.proto_max_bulk_len {
        cfg.proto_max_bulk_len = size("proto-max-bulk-len", v)?;
    }
    if let Some(p) = a.tls_port {
        cfg.tls_port = p;
    }
    if a.metrics_port.is_some() {
        cfg.metrics_port = a.metrics_port;
    }
    for (field, v) in [
        (&mut cfg.tls.cert_file, a.tls_cert_file),
        (&mut cfg.tls.key_file, a.tls_key_file),
        (&mut cfg.tls.ca_cert_file, a.tls_ca_cert_file),
        (&mut cfg.tls.protocols, a.tls_protocols),
        (&mut cfg.tls.ciphersuites, a.tls_ciphersuites),
        (&mut cfg.tls.ciphers, a.tls_ciphers),
        (&mut cfg.tls_client_cert_file, a.tls_client_cert_file),
        (&mut cfg.tls_client_key_file, a.tls_client_key_file),
    ] {
        if let Some(v) = v {
            *field = v;
        }
    }
    if let Some(v) = &a.tls_auth_clients {
        cfg.tls.auth_clients = respite::tls::AuthClients::parse(v)
            .ok_or_else(|| "--tls-auth-clients: yes, no or optional".to_string())?;
    }
    cfg.validate()?;
    Ok(cfg)
}

/// Flags are named after redis.conf parameters.
#[derive(clap::Args, Clone)]
struct ServeArgs {
    /// redis.conf-style file (`name value` lines); flags override it.
    config_file: Option<std::path::PathBuf>,
    /// TCP port; 0 picks a free port and prints it on stdout.
    #[arg(long)]
    port: Option<u16>,
    /// Addresses to listen on (default 127.0.0.1).
    #[arg(long, num_args = 1..)]
    bind: Vec<String>,
    #[arg(long)]
    requirepass: Option<String>,
    #[arg(long)]
    maxclients: Option<usize>,
    #[arg(long)]
    databases: Option<usize>,
    /// Worker threads (default: half the cores, at least one).
    #[arg(long)]
    threads: Option<usize>,
    #[arg(long)]
    timeout: Option<u64>,
    #[arg(long)]
    maxmemory: Option<String>,
    /// `memory` (default) or `redb` (durable: `<dir>/respite.redb`).
    #[arg(long, value_parser = ["memory", "redb"])]
    engine: Option<String>,
    /// With `--engine redb`: always | everysec (default) | no.
    #[arg(long)]
    appendfsync: Option<String>,
    #[arg(long)]
    dir: Option<String>,
    /// Adds the RESPITE admin family (clock, seed, faults, command log) for tests; config
    /// file: `enable-test-commands yes`.
    #[arg(long)]
    enable_test_commands: bool,
    /// `emulated`: answer as a one-node Redis Cluster owning every slot, so cluster-mode
    /// clients work against this one server (CROSSSLOT enforced); `no` (the default).
    #[arg(long, value_parser = ["no", "emulated"])]
    cluster_mode: Option<String>,
    /// TLS port (0 = none, the default); `--port` keeps serving plain clients unless 0.
    #[arg(long)]
    tls_port: Option<u16>,
    /// The server's certificate chain (PEM).
    #[arg(long)]
    tls_cert_file: Option<String>,
    /// The server's private key (PEM, unencrypted).
    #[arg(long)]
    tls_key_file: Option<String>,
    /// CA certificates (PEM) that sign client certificates.
    #[arg(long)]
    tls_ca_cert_file: Option<String>,
    /// A directory of CA certificates (PEM files).
    #[arg(long)]
    tls_ca_cert_dir: Option<String>,
    /// yes (default: clients need a certificate) | no | optional.
    #[arg(long)]
    tls_auth_clients: Option<String>,
    /// e.g. "TLSv1.2 TLSv1.3" (the default).
    #[arg(long)]
    tls_protocols: Option<String>,
    /// TLS 1.3 suites, OpenSSL names, `:`-separated.
    #[arg(long)]
    tls_ciphersuites: Option<String>,
    /// TLS 1.2 suites, OpenSSL names, `:`-separated.
    #[arg(long)]
    tls_ciphers: Option<String>,
    /// Any other redis.conf parameter: `--set name=value` (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,
}

fn load_file(path: &std::path::Path, cfg: &mut Config) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words = respite::protocol::parse::split_args(line.as_bytes())
            .ok_or_else(|| format!("line {}: unbalanced quotes", n + 1))?;
        // ACL users, loaded once the server starts (their rules need the command table).
        if words[0].eq_ignore_ascii_case(b"user") {
            if words.len() < 2 {
                return Err(format!("line {}: user without a name", n + 1));
            }
            cfg.users
                .push(words[1..].iter().map(|w| w.clone().into()).collect());
            continue;
        }
        let words: Vec<String> = words
            .into_iter()
            .map(|w| String::from_utf8_lossy(&w).into_owned())
            .collect();
        let (name, mut rest) = (words[0].to_ascii_lowercase(), words[1..].join(" "));
        // Each `save` line adds its pairs to those of the file's earlier lines (a CONFIG
        // REWRITE writes one line per pair); `save ""` clears them, as in Redis.
        if name == "save" && !rest.is_empty() {
            if let Some((_, prev)) = cfg.params.iter().rev().find(|(k, _)| k == "save") {
                if !prev.is_empty() {
                    rest = format!("{prev} {rest}");
                }
            }
        }
        apply(cfg, &name, &rest).map_err(|e| format!("line {}: {e}", n + 1))?;
    }
    Ok(())
}

fn apply(cfg: &mut Config, name: &str, value: &str) -> Result<(), String> {
    let num = |v: &str| {
        v.parse::<usize>()
            .map_err(|_| format!("invalid value for {name}: {v}"))
    };
    match name {
        "port" => cfg.port = num(value)? as u16,
        "bind" => cfg.bind = value.split_whitespace().map(String::from).collect(),
        "requirepass" => cfg.requirepass = Some(value.to_string()).filter(|p| !p.is_empty()),
        "maxclients" => cfg.maxclients = num(value)?,
        "databases" => cfg.databases = num(value)?.max(1),
        "threads" => cfg.threads = num(value)?,
        "engine" => {
            cfg.redb = match value {
                "redb" => true,
                "memory" => false,
                _ => return Err(format!("invalid engine {value}: use memory or redb")),
            }
        }
        "cluster-mode" => {
            if !matches!(value, "no" | "emulated") {
                return Err(format!("invalid cluster-mode {value}: use no or emulated"));
            }
            cfg.params.push((name.to_string(), value.to_string()));
        }
        _ => cfg.params.push((name.to_string(), value.to_string())),
    }
    Ok(())
}

fn build_config(a: ServeArgs) -> Result<Config, String> {
    let mut cfg = Config::default();
    if let Some(p) = &a.config_file {
        load_file(p, &mut cfg)?;
        // Redis keeps the file's absolute path: CONFIG REWRITE writes it even after `dir`
        // has moved the working directory.
        cfg.config_file =
            Some(std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()))?);
    }
    if let Some(p) = a.port {
        cfg.port = p;
    }
    if !a.bind.is_empty() {
        cfg.bind = a.bind;
    }
    if a.requirepass.is_some() {
        cfg.requirepass = a.requirepass;
    }
    if let Some(m) = a.maxclients {
        cfg.maxclients = m;
    }
    if let Some(d) = a.databases {
        cfg.databases = d.max(1);
    }
    if let Some(t) = a.threads {
        cfg.threads = t;
    }
    if let Some(e) = &a.engine {
        apply(&mut cfg, "engine", e)?;
    }
    for (k, v) in [
        ("timeout", a.timeout.map(|t| t.to_string())),
        ("maxmemory", a.maxmemory),
        ("appendfsync", a.appendfsync),
        ("dir", a.dir),
        ("tls-port", a.tls_port.map(|p| p.to_string())),
        ("tls-cert-file", a.tls_cert_file),
        ("tls-key-file", a.tls_key_file),
        ("tls-ca-cert-file", a.tls_ca_cert_file),
        ("tls-ca-cert-dir", a.tls_ca_cert_dir),
        ("tls-auth-clients", a.tls_auth_clients),
        ("tls-protocols", a.tls_protocols),
        ("tls-ciphersuites", a.tls_ciphersuites),
        ("tls-ciphers", a.tls_ciphers),
    ] {
        if let Some(v) = v {
            cfg.params.push((k.to_string(), v));
        }
    }
    if let Some(m) = &a.cluster_mode {
        apply(&mut cfg, "cluster-mode", m)?;
    }
    if a.enable_test_commands {
        cfg.params
            .push(("enable-test-commands".to_string(), "yes".to_string()));
    }
    for kv in a.set {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("--set expects NAME=VALUE, got {kv}"))?;
        apply(&mut cfg, &k.to_ascii_lowercase(), v)?;
    }
    cfg.print_port = cfg.port == 0;
    Ok(cfg)
}

/// Transparent huge pages off for this process, as Redis does (`disable-thp yes`): mimalloc
/// madvises its arenas for huge pages, and each purge and re-fault of a freed range then has
/// the kernel zero a whole 2 MiB page. Measured (`--engine redb --appendfsync always`, SET
/// P16, perf): `clear_page_erms` 13-28% of server CPU; with THP off (MIMALLOC_ALLOW_THP=0)
/// CPU per request fell ~25%.
fn disable_thp() {
    #[cfg(target_os = "linux")]
    let _ = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) }; // SAFETY: prctl with integer arguments only reads its flag; no memory of ours is passed
}

fn main() {
    disable_thp();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("RESPITE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let args = match cli.cmd {
        Some(Cmd::Serve(a)) => a,
        Some(Cmd::Rebalance(a)) => std::process::exit(rebalance_cmd(a)),
        Some(Cmd::Proxy(a)) => {
            let result =
                proxy_config(a).and_then(|cfg| respite::proxy::run(cfg).map_err(|e| e.to_string()));
            if let Err(e) = result {
                eprintln!("respite proxy: {e}");
                std::process::exit(1);
            }
            return;
        }
        None => cli.serve,
    };
    let cfg = match build_config(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("respite: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = respite::run(cfg) {
        eprintln!("respite: {e}");
        std::process::exit(1);
    }
}
