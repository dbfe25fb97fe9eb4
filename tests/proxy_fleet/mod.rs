//! Proxy fleets on top of `common`: up to three nodes on free loopback ports (real
//! redis-server 7, valkey-server 8 or respite processes with the memory engine, [`NodeKind`];
//! password-protected unless asked otherwise; killed on drop) behind an in-process
//! `ProxyServer`. Needs `mod common;` next to `mod proxy_fleet;`.
#![allow(dead_code)]

/// Each test against a node kind: `for_kinds!(Redis: a, b)` in a module makes tests
/// `a` and `b` running `super::a(NodeKind::Redis)`, … (needs `#[macro_use] mod proxy_fleet;`).
/// Suites instantiate it once per kind (Redis, Valkey, Respite), one module each.
#[allow(unused_macros)]
macro_rules! for_kinds {
    ($kind:ident: $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                super::$name(super::NodeKind::$kind)
            }
        )*
    };
}

use crate::common::{ProcessKind, ServerProcess, Wire};
use redis::Connection;
use respite::proxy::config::{NodeSpec, Placement, ProxyConfig};
use respite::proxy::ProxyServer;
use std::time::Duration;

pub const IDS: [&str; 3] = ["node-a", "node-b", "node-c"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// redis-server 7.0 (the oracle).
    Redis,
    /// valkey-server 8.1 ([`crate::common::valkey_server_bin`]).
    Valkey,
    /// This crate's `respite` binary with the memory engine.
    Respite,
}

pub struct Node {
    pub kind: NodeKind,
    pub port: u16,
    /// Empty when the node takes no password.
    pub password: String,
    pub process: ServerProcess,
}

impl Node {
    /// A node on a free port; `password` empty for none.
    pub fn start(kind: NodeKind, password: &str) -> Node {
        let mut args = Vec::new();
        if !password.is_empty() {
            args.extend(["--requirepass", password]);
        }
        let process = match kind {
            NodeKind::Redis => ServerProcess::redis_with(&args),
            NodeKind::Valkey => ServerProcess::start_free(ProcessKind::Valkey, &args),
            NodeKind::Respite => {
                args.extend(["--threads", "2"]);
                ServerProcess::start_free(ProcessKind::Respite, &args)
            }
        };
        Node {
            kind,
            port: process.port,
            password: password.to_string(),
            process,
        }
    }

    /// Starts the node again on its port (the proxy knows that port).
    pub fn spawn(&mut self) {
        self.process.restart();
    }

    pub fn kill(&mut self) {
        self.process.kill();
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// A direct connection to the node (not through the proxy).
    pub fn conn(&self) -> Connection {
        redis::Client::open(format!(
            "redis://:{}@127.0.0.1:{}",
            self.password, self.port
        ))
        .unwrap()
        .get_connection()
        .unwrap()
    }

    /// The proxy's spec of this node under the name `id`.
    pub fn spec(&self, id: &str) -> NodeSpec {
        let auth = if self.password.is_empty() {
            String::new()
        } else {
            format!(":{}@", self.password)
        };
        NodeSpec::parse(&format!("{id}=redis://{auth}127.0.0.1:{}", self.port)).unwrap()
    }

    /// A raw connection to the node (not through the proxy).
    pub fn raw(&self) -> Wire {
        Wire::connect_port(self.port)
    }
}

pub struct Fleet {
    // Declared first: the proxy stops before the nodes.
    pub proxy: ProxyServer,
    pub nodes: Vec<Node>,
    pub placement: Placement,
}

impl Fleet {
    /// Three password-protected nodes of `kind`.
    pub fn start(kind: NodeKind) -> Fleet {
        Self::start_with(kind, |_| {})
    }

    pub fn start_with(kind: NodeKind, tweak: impl FnOnce(&mut ProxyConfig)) -> Fleet {
        Self::open(kind, &IDS, true, tweak)
    }

    /// Nodes of `kind` named `ids` (placement follows the names), with passwords or not;
    /// `tweak` adjusts the proxy's configuration.
    pub fn open(
        kind: NodeKind,
        ids: &[&str],
        passwords: bool,
        tweak: impl FnOnce(&mut ProxyConfig),
    ) -> Fleet {
        let nodes: Vec<Node> = (0..ids.len())
            .map(|i| {
                let pw = if passwords {
                    format!("s3cret-{i}")
                } else {
                    String::new()
                };
                Node::start(kind, &pw)
            })
            .collect();
        let specs: Vec<NodeSpec> = nodes.iter().zip(ids).map(|(n, id)| n.spec(id)).collect();
        let mut cfg = ProxyConfig {
            port: 0,
            nodes: specs.clone(),
            connect_timeout: Duration::from_millis(500),
            command_timeout: Duration::from_secs(3),
            ..ProxyConfig::default()
        };
        tweak(&mut cfg);
        Fleet {
            proxy: ProxyServer::start(cfg).unwrap(),
            placement: Placement::new(&specs),
            nodes,
        }
    }

    pub fn kind(&self) -> NodeKind {
        self.nodes[0].kind
    }

    pub fn client(&self) -> Connection {
        redis::Client::open(self.proxy.url())
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// A raw connection to the proxy.
    pub fn raw(&self) -> Wire {
        Wire::connect(self.proxy.addr())
    }

    pub fn owner(&self, key: &str) -> usize {
        self.placement.owner(key.as_bytes())
    }

    /// A key (or channel) owned by node `n`, made from `prefix`.
    pub fn key_on(&self, n: usize, prefix: &str) -> String {
        (0..)
            .map(|i| format!("{prefix}:{i}"))
            .find(|k| self.owner(k) == n)
            .unwrap()
    }

    /// A field of the proxy's `INFO nodes` line for node `n`.
    pub fn node_field(&self, n: usize, field: &str) -> String {
        let mut c = self.raw();
        c.send(&["INFO", "nodes"]);
        let info = String::from_utf8_lossy(&c.frame_bytes()).into_owned();
        let line = info
            .split("\r\n")
            .find(|l| l.starts_with(&format!("node{n}:")))
            .unwrap_or_else(|| panic!("no node{n} in {info}"))
            .to_string();
        line.split([',', ':'])
            .find_map(|kv| kv.strip_prefix(&format!("{field}=")).map(str::to_string))
            .unwrap_or_else(|| panic!("no {field} in {line}"))
    }
}

pub fn q<T: redis::FromRedisValue>(c: &mut Connection, args: &[&str]) -> redis::RedisResult<T> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
}

/// The error's code (redis-rs maps known codes to kinds) and its text.
pub fn err_text(e: redis::RedisError) -> String {
    format!("{} {e}", e.code().unwrap_or(""))
}
