//! A fleet of three password-protected nodes on free loopback ports (killed on drop) behind
//! an in-process `ProxyServer`. The nodes are real redis-server processes or real respite
//! binaries (memory engine): [`NodeKind`].
#![allow(dead_code)]

use redis::Connection;
use respite::proxy::config::{NodeSpec, Placement, ProxyConfig};
use respite::proxy::ProxyServer;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const IDS: [&str; 3] = ["node-a", "node-b", "node-c"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// redis-server 7.0 (the oracle).
    Redis,
    /// This crate's `respite` binary with the memory engine.
    Respite,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct Node {
    pub kind: NodeKind,
    pub port: u16,
    pub password: String,
    pub child: Option<Child>,
}

impl Node {
    pub fn start(kind: NodeKind, port: u16, password: &str) -> Node {
        let mut n = Node {
            kind,
            port,
            password: password.to_string(),
            child: None,
        };
        n.spawn();
        n
    }

    pub fn spawn(&mut self) {
        let port = self.port.to_string();
        let mut cmd = match self.kind {
            NodeKind::Redis => {
                let mut c = Command::new("redis-server");
                c.args(["--port", &port, "--bind", "127.0.0.1"])
                    .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                    .args(["--requirepass", &self.password]);
                c
            }
            NodeKind::Respite => {
                let mut c = Command::new(env!("CARGO_BIN_EXE_respite"));
                c.args(["--port", &port, "--bind", "127.0.0.1"])
                    .args(["--requirepass", &self.password, "--threads", "2"])
                    .env("RESPITE_LOG", "warn");
                c
            }
        };
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the node binary runs");
        self.child = Some(child);
        let until = Instant::now() + Duration::from_secs(5);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < until, "{:?} node did not start", self.kind);
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
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
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

pub struct Fleet {
    // Declared first: the proxy stops before the nodes.
    pub proxy: ProxyServer,
    pub nodes: Vec<Node>,
    pub placement: Placement,
}

impl Fleet {
    pub fn start(kind: NodeKind) -> Fleet {
        Self::start_with(kind, |_| {})
    }

    pub fn start_with(kind: NodeKind, tweak: impl FnOnce(&mut ProxyConfig)) -> Fleet {
        let nodes: Vec<Node> = (0..3)
            .map(|i| Node::start(kind, free_port(), &format!("s3cret-{i}")))
            .collect();
        let specs: Vec<NodeSpec> = nodes
            .iter()
            .zip(IDS)
            .map(|(n, id)| {
                NodeSpec::parse(&format!(
                    "{id}=redis://:{}@127.0.0.1:{}",
                    n.password, n.port
                ))
                .unwrap()
            })
            .collect();
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

    pub fn owner(&self, key: &str) -> usize {
        self.placement.owner(key.as_bytes())
    }

    /// A key owned by node `n`, made from `prefix`.
    pub fn key_on(&self, n: usize, prefix: &str) -> String {
        (0..)
            .map(|i| format!("{prefix}:{i}"))
            .find(|k| self.owner(k) == n)
            .unwrap()
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
