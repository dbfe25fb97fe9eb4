//! Proxy configuration (DESIGN.md §7): the fleet's nodes, each a stable id and a URL.
//!
//! `--node ID=redis://[user[:password]@]host:port[/db]`. Ids are `[A-Za-z0-9_-]+` and decide
//! placement (§8); URLs may change without moving keys. Passwords never appear in logs, INFO
//! or errors: everything shown uses [`NodeSpec::redacted_url`].
//!
//! A node may list several addresses, comma-separated (`ID=redis://p:6379,redis://r:6379`):
//! a primary and its replicas. They are one node (one id, one placement); the proxy talks
//! to whichever of them is the primary now (see `failover.rs`). Each URL carries its own
//! credentials and db.

use crate::types::placement;
use std::fmt;
use std::time::Duration;

#[derive(Clone, PartialEq, Eq)]
pub struct NodeSpec {
    pub id: String,
    pub host: String,
    pub port: u16,
    pub user: Option<String>,
    pub password: Option<String>,
    pub db: u32,
    /// `rediss://`: the node is reached over TLS, its certificate checked for `host`.
    pub tls: bool,
    /// The node's further addresses, in the order given (replicas that may be promoted):
    /// each a spec of its own with the same id and no alternates.
    pub alternates: Vec<NodeSpec>,
}

/// Debug output is redacted too (configs end up in panics and logs).
impl fmt::Debug for NodeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.id, self.redacted_urls())
    }
}

impl NodeSpec {
    /// Parses `ID=redis://[user[:password]@]host:port[/db]` (`rediss://` for TLS), or
    /// several such URLs separated by commas (a primary and its replicas).
    pub fn parse(s: &str) -> Result<NodeSpec, String> {
        let (id, url) = s
            .split_once('=')
            .ok_or_else(|| "a node is ID=redis://host:port".to_string())?;
        if id.is_empty()
            || !id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(format!("node id '{id}' must be [A-Za-z0-9_-]+"));
        }
        let mut spec = Self::parse_urls(url)?;
        spec.set_id(id);
        Ok(spec)
    }

    /// Sets the id of the node and of its alternate addresses.
    pub fn set_id(&mut self, id: &str) {
        self.id = id.to_string();
        for a in &mut self.alternates {
            a.id = id.to_string();
        }
    }

    /// Parses one URL or a comma-separated list of them (id left empty). A comma splits
    /// only where a `redis://` or `rediss://` follows it, so a password may hold commas.
    pub fn parse_urls(list: &str) -> Result<NodeSpec, String> {
        let mut urls: Vec<&str> = Vec::new();
        let mut start = 0;
        for (i, _) in list.match_indices(',') {
            let next = &list[i + 1..];
            if next.starts_with("redis://") || next.starts_with("rediss://") {
                urls.push(&list[start..i]);
                start = i + 1;
            }
        }
        urls.push(&list[start..]);
        let mut specs = urls
            .into_iter()
            .map(Self::parse_url)
            .collect::<Result<Vec<_>, _>>()?;
        let mut first = specs.remove(0);
        let mut seen = vec![first.addr()];
        for s in &specs {
            if seen.contains(&s.addr()) {
                return Err("a node lists the same address twice".into());
            }
            seen.push(s.addr());
        }
        first.alternates = specs;
        Ok(first)
    }

    /// Every address of the node, the first one first.
    pub fn addresses(&self) -> impl Iterator<Item = &NodeSpec> {
        std::iter::once(self).chain(&self.alternates)
    }

    /// [`NodeSpec::redacted_url`] of every address, comma-separated.
    pub fn redacted_urls(&self) -> String {
        self.addresses()
            .map(NodeSpec::redacted_url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Parses `redis://[user[:password]@]host:port[/db]` (id left empty).
    pub fn parse_url(url: &str) -> Result<NodeSpec, String> {
        // Errors never echo the URL: it may hold a password.
        let (rest, tls) = match (url.strip_prefix("redis://"), url.strip_prefix("rediss://")) {
            (Some(r), _) => (r, false),
            (_, Some(r)) => (r, true),
            _ => return Err("node URLs start with redis:// or rediss://".to_string()),
        };
        let (auth, hostpart) = match rest.rsplit_once('@') {
            Some((a, h)) => (Some(a), h),
            None => (None, rest),
        };
        let (user, password) = match auth {
            None => (None, None),
            Some(a) => match a.split_once(':') {
                Some((u, p)) => ((!u.is_empty()).then(|| u.to_string()), Some(p.to_string())),
                None => (Some(a.to_string()), None),
            },
        };
        let (hostport, db) = match hostpart.split_once('/') {
            Some((hp, db)) if !db.is_empty() => (
                hp,
                db.parse::<u32>()
                    .map_err(|_| "the db in a node URL must be a number".to_string())?,
            ),
            Some((hp, _)) => (hp, 0),
            None => (hostpart, 0),
        };
        let (host, port) = hostport
            .rsplit_once(':')
            .ok_or_else(|| "a node URL needs host:port".to_string())?;
        let port = port
            .parse::<u16>()
            .map_err(|_| "the port in a node URL must be a number".to_string())?;
        if host.is_empty() {
            return Err("a node URL needs a host".into());
        }
        Ok(NodeSpec {
            id: String::new(),
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port,
            user,
            password,
            db,
            tls,
            alternates: Vec::new(),
        })
    }

    /// The URL with the password replaced by `***` (of this address only).
    pub fn redacted_url(&self) -> String {
        let auth = match (&self.user, &self.password) {
            (None, None) => String::new(),
            (Some(u), None) => format!("{u}@"),
            (u, Some(_)) => format!("{}:***@", u.as_deref().unwrap_or("")),
        };
        let db = if self.db == 0 {
            String::new()
        } else {
            format!("/{}", self.db)
        };
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}://{auth}{}:{}{db}", self.host, self.port)
    }

    /// The URL with its password, for the rebalance state file (kept like the config file).
    pub fn full_url(&self) -> String {
        let auth = match (&self.user, &self.password) {
            (None, None) => String::new(),
            (Some(u), None) => format!("{u}@"),
            (u, Some(p)) => format!("{}:{p}@", u.as_deref().unwrap_or("")),
        };
        let scheme = if self.tls { "rediss" } else { "redis" };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("{scheme}://{auth}{host}:{}/{}", self.port, self.db)
    }

    /// `host:port` for connecting.
    pub fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The node's rendezvous seed (§8): depends on the id only.
    pub fn seed(&self) -> u64 {
        placement::fnv1a64(self.id.as_bytes())
    }
}

/// Rendezvous placement over a fixed list of nodes.
#[derive(Clone, Debug)]
pub struct Placement {
    seeds: Vec<u64>,
}

impl Placement {
    pub fn new(nodes: &[NodeSpec]) -> Placement {
        Placement {
            seeds: nodes.iter().map(NodeSpec::seed).collect(),
        }
    }

    /// Index (into the node list) of the node that owns `key`.
    pub fn owner(&self, key: &[u8]) -> usize {
        placement::owner(key, &self.seeds).expect("a fleet has at least one node")
    }
}

/// Everything `respite proxy` needs.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// Addresses to listen on (default 127.0.0.1) and the port (0 = pick one).
    pub bind: Vec<String>,
    pub port: u16,
    pub nodes: Vec<NodeSpec>,
    /// Clients must AUTH with this (checked by the proxy itself): the password of the
    /// proxy's `default` user.
    pub requirepass: Option<String>,
    /// The proxy's own ACL users file (`user NAME rule…` lines, as Redis's `aclfile`):
    /// clients authenticate against it.
    pub aclfile: Option<String>,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    /// Shared multiplexed connections per node.
    pub conns_per_node: usize,
    /// Dedicated connections (blocking commands, transactions) per node. A client holds
    /// about one at a time, so the default (the default `maxclients`) never runs out before
    /// `maxclients` does; a smaller pool makes clients queue for up to `dedicated_wait`.
    pub max_dedicated_per_node: usize,
    /// How long a blocking or transaction command waits for a dedicated connection.
    pub dedicated_wait: Duration,
    /// Redis's `timeout`: idle clients are closed after this (zero = never); subscribed
    /// and blocked clients are exempt, as in Redis.
    pub timeout: Duration,
    /// Redis's `maxclients`: more connections get `-ERR max number of clients reached`.
    pub maxclients: usize,
    /// Redis's `client-query-buffer-limit`: a client whose unparsed input (a frame in
    /// progress and what is pipelined behind it) grows past this is refused and closed.
    pub client_query_buffer_limit: usize,
    /// Redis's `proto-max-bulk-len`: the largest bulk argument accepted, and the largest
    /// node reply passed on to a client (larger ones are replaced by an error).
    pub proto_max_bulk_len: usize,
    /// Worker threads (0 = one per core; 1, the default = a single-threaded runtime). One
    /// thread avoids cross-thread wake-ups between a client's task and a node connection's
    /// and lets a node connection gather more clients' requests per write: on a 2-core box
    /// at 50 clients, P1 SET took 2.45 syscalls per request against 3.11 (a third of them
    /// futex wake-ups and 3x the node writes) with a runtime thread per core.
    pub threads: usize,
    /// Redis's `tls-port` (0 = none): TLS clients, with the listener settings of `tls`.
    pub tls_port: u16,
    /// Prometheus `GET /metrics` over plain HTTP on this port of the bind addresses (none:
    /// off; 0: a free port, see `ProxyServer::metrics_addr`).
    pub metrics_port: Option<u16>,
    /// The TLS listener's settings (Redis's `tls-*` names); its `tls-ca-cert-file` also
    /// checks the certificates of `rediss://` nodes.
    pub tls: crate::tls::Settings,
    /// `tls-client-cert-file` / `tls-client-key-file`: what the proxy presents to
    /// `rediss://` nodes that ask for a client certificate (as Redis's replication does).
    pub tls_client_cert_file: String,
    pub tls_client_key_file: String,
    /// The `--config` file: `PROXY RELOAD` and SIGHUP read its node list again, and an
    /// online rebalance keeps its state next to it (`<file>.rebalance`).
    pub config_path: Option<std::path::PathBuf>,
    /// An online rebalance copies a value whose DUMP is larger than this in chunks of
    /// about this size (`move-chunk-bytes`), below the nodes' input-buffer limits.
    pub move_chunk_bytes: usize,
    /// Built from the above by [`ProxyConfig::prepare_tls`] when a node is `rediss://`.
    pub node_tls: Option<std::sync::Arc<crate::tls::ClientConfig>>,
    /// `--announce-ip` / `--announce-port`: the address CLUSTER SLOTS, SHARDS and NODES give
    /// cluster clients (default: the first bind address and the listening port), for a
    /// proxy behind NAT, a container port mapping or a wildcard bind.
    pub announce_ip: Option<String>,
    pub announce_port: Option<u16>,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            bind: vec!["127.0.0.1".into()],
            port: 7000,
            nodes: Vec::new(),
            requirepass: None,
            aclfile: None,
            connect_timeout: Duration::from_secs(2),
            command_timeout: Duration::from_secs(5),
            conns_per_node: 2,
            max_dedicated_per_node: 10_000,
            dedicated_wait: Duration::from_secs(5),
            timeout: Duration::ZERO,
            maxclients: 10_000,
            client_query_buffer_limit: 1 << 30,
            proto_max_bulk_len: 512 << 20,
            threads: 1,
            tls_port: 0,
            metrics_port: None,
            tls: crate::tls::Settings {
                session_caching: true,
                session_cache_size: 20480,
                ..Default::default()
            },
            tls_client_cert_file: String::new(),
            tls_client_key_file: String::new(),
            config_path: None,
            move_chunk_bytes: 8 << 20,
            node_tls: None,
            announce_ip: None,
            announce_port: None,
        }
    }
}

impl ProxyConfig {
    /// Checks the fleet: at least one node, unique ids.
    pub fn validate(&self) -> Result<(), String> {
        if self.nodes.is_empty() {
            return Err("the proxy needs at least one --node ID=redis://host:port".into());
        }
        let mut ids: Vec<&str> = self.nodes.iter().map(|n| n.id.as_str()).collect();
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("node id '{}' appears twice", w[0]));
        }
        // Redis's own lower bounds for these two.
        if self.client_query_buffer_limit < 1 << 20 {
            return Err("client-query-buffer-limit must be at least 1mb".into());
        }
        if self.proto_max_bulk_len < 1 << 20 {
            return Err("proto-max-bulk-len must be at least 1mb".into());
        }
        if self.maxclients == 0 {
            return Err("maxclients must be at least 1".into());
        }
        Ok(())
    }

    /// The TLS client configuration for `rediss://` nodes (checked against
    /// `tls-ca-cert-file`), if any node needs one.
    pub fn prepare_tls(&mut self) -> Result<(), String> {
        if !self.nodes.iter().any(|n| n.tls) {
            return Ok(());
        }
        let client = match (
            self.tls_client_cert_file.as_str(),
            self.tls_client_key_file.as_str(),
        ) {
            ("", "") => None,
            ("", _) | (_, "") => {
                return Err("tls-client-cert-file and tls-client-key-file go together".into())
            }
            (c, k) => Some((c, k)),
        };
        if self.tls.ca_cert_file.is_empty() {
            return Err(
                "rediss:// nodes need tls-ca-cert-file (the CA their certificates \
                        are checked against)"
                    .into(),
            );
        }
        self.node_tls = Some(crate::tls::client_config(&self.tls.ca_cert_file, client)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_urls() {
        let n = NodeSpec::parse("node-a=redis://alice:s3cret@10.0.0.1:6380/2").unwrap();
        assert_eq!(n.id, "node-a");
        assert_eq!((n.host.as_str(), n.port, n.db), ("10.0.0.1", 6380, 2));
        assert_eq!(n.user.as_deref(), Some("alice"));
        assert_eq!(n.password.as_deref(), Some("s3cret"));
        assert_eq!(n.redacted_url(), "redis://alice:***@10.0.0.1:6380/2");
        assert!(!n.tls);
        let t = NodeSpec::parse("node-t=rediss://:pw@node.example:6380").unwrap();
        assert!(t.tls);
        assert_eq!(t.redacted_url(), "rediss://:***@node.example:6380");
        assert!(!format!("{n:?}").contains("s3cret"));
        let n = NodeSpec::parse("b=redis://:pw@localhost:6379").unwrap();
        assert_eq!((n.user.clone(), n.password.as_deref()), (None, Some("pw")));
        assert_eq!(n.redacted_url(), "redis://:***@localhost:6379");
        let n = NodeSpec::parse("c_1=redis://127.0.0.1:7000/").unwrap();
        assert_eq!(
            (n.db, n.redacted_url().as_str()),
            (0, "redis://127.0.0.1:7000")
        );
        for bad in [
            "redis://h:1",
            "=redis://h:1",
            "a b=redis://h:1",
            "a=http://h:1",
            "a=redis://h",
            "a=redis://h:x",
            "a=redis://:pw@h:1/x",
        ] {
            let e = NodeSpec::parse(bad).unwrap_err();
            assert!(!e.contains("pw"), "{bad}: {e}");
        }
    }

    /// A primary and its replicas: one node, each address with its own credentials; a comma
    /// inside a password does not split; the same address twice is refused.
    #[test]
    fn node_with_replicas() {
        let n =
            NodeSpec::parse("n1=redis://:a,b@10.0.0.1:6379,rediss://u:pw@10.0.0.2:6380/3").unwrap();
        assert_eq!(n.id, "n1");
        assert_eq!(
            (n.addr(), n.password.as_deref()),
            ("10.0.0.1:6379".into(), Some("a,b"))
        );
        assert_eq!(n.alternates.len(), 1);
        let r = &n.alternates[0];
        assert_eq!((r.id.as_str(), r.port, r.db, r.tls), ("n1", 6380, 3, true));
        assert_eq!(
            n.redacted_urls(),
            "redis://:***@10.0.0.1:6379,rediss://u:***@10.0.0.2:6380/3"
        );
        assert!(!format!("{n:?}").contains("pw"));
        assert_eq!(n.addresses().count(), 2);
        assert_eq!(n.seed(), NodeSpec::parse("n1=redis://h:1").unwrap().seed());
        assert!(NodeSpec::parse("n=redis://h:1,redis://h:1")
            .unwrap_err()
            .contains("twice"));
        let e = NodeSpec::parse("n=redis://h:1,redis://:pw@h").unwrap_err();
        assert!(!e.contains("pw"), "{e}");
    }

    #[test]
    fn placement_follows_ids_not_urls_or_order() {
        let a = [
            "node-a=redis://h:1",
            "node-b=redis://h:2",
            "node-c=redis://h:3",
        ];
        let nodes: Vec<NodeSpec> = a.iter().map(|s| NodeSpec::parse(s).unwrap()).collect();
        let p = Placement::new(&nodes);
        assert_eq!(nodes[p.owner(b"foo")].id, "node-b");
        assert_eq!(nodes[p.owner(b"{vehicle:42}:prepared")].id, "node-c");
        let moved: Vec<NodeSpec> = [
            "node-c=redis://other:9",
            "node-a=redis://x:1",
            "node-b=redis://y:2",
        ]
        .iter()
        .map(|s| NodeSpec::parse(s).unwrap())
        .collect();
        let q = Placement::new(&moved);
        for i in 0..2000 {
            let k = format!("key:{i}");
            assert_eq!(
                nodes[p.owner(k.as_bytes())].id,
                moved[q.owner(k.as_bytes())].id
            );
        }
    }

    fn fleet(n: usize) -> Vec<NodeSpec> {
        (0..n)
            .map(|i| NodeSpec::parse(&format!("n{i}=redis://h:{}", 7000 + i)).unwrap())
            .collect()
    }

    #[test]
    fn growing_the_fleet_moves_about_one_in_n() {
        let (old, new) = (fleet(20), fleet(21));
        let (p, q) = (Placement::new(&old), Placement::new(&new));
        let moved = (0..10_000)
            .filter(|i| {
                let k = format!("user:{i}");
                old[p.owner(k.as_bytes())].id != new[q.owner(k.as_bytes())].id
            })
            .count();
        assert!(moved < 1_000, "{moved} of 10 000 keys moved");
        // Every moved key went to the new node.
        for i in 0..10_000 {
            let k = format!("user:{i}");
            let (a, b) = (
                &old[p.owner(k.as_bytes())].id,
                &new[q.owner(k.as_bytes())].id,
            );
            assert!(a == b || b == "n20", "{k} moved {a} -> {b}");
        }
    }

    #[test]
    fn keys_spread_evenly() {
        let nodes = fleet(20);
        let p = Placement::new(&nodes);
        let mut counts = vec![0usize; 20];
        for i in 0..20_000 {
            counts[p.owner(format!("k:{i}").as_bytes())] += 1;
        }
        assert!(
            counts.iter().all(|&c| (500..=2_000).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn duplicate_ids_are_refused() {
        let cfg = ProxyConfig {
            nodes: vec![
                NodeSpec::parse("a=redis://h:1").unwrap(),
                NodeSpec::parse("a=redis://h:2").unwrap(),
            ],
            ..ProxyConfig::default()
        };
        assert!(cfg.validate().unwrap_err().contains("twice"));
        assert!(ProxyConfig::default().validate().is_err());
    }
}
