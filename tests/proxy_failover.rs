//! Proxy node failover (DESIGN.md §7): a node listed as `pair=redis://P,redis://R` (a
//! primary and its replica, real server processes) next to an ordinary node `solo`. The
//! proxy writes only to the primary; when the primary dies, requests for `pair`'s keys fail
//! with a clear error until the replica is promoted (`REPLICAOF NO ONE`), then succeed on
//! it with the replicated data; when the primary is demoted instead (`-READONLY`), or two
//! addresses claim to be primaries, the proxy follows the promoted one. `solo`'s keys work
//! throughout. Each case runs against Valkey 8 and redis-server 7.0.

mod common;

use common::{wait_until, Conn, Frame, ProcessKind, ServerProcess, PATIENCE};
use respite::proxy::config::{NodeSpec, Placement, ProxyConfig};
use respite::proxy::sync_client::{Resp, SyncConn};
use respite::proxy::ProxyServer;

/// A primary, its replica and an unrelated node, with a proxy in front.
struct Setup {
    primary: ServerProcess,
    replica: ServerProcess,
    _solo: ServerProcess,
    proxy: ProxyServer,
    /// Keys the placement gives to `pair`, and to `solo`.
    pair_keys: Vec<String>,
    solo_keys: Vec<String>,
    /// The spec of node `pair`.
    pair: NodeSpec,
    /// The servers' `dir`: a replica's sync writes its dump.rdb there.
    _dir: tempfile::TempDir,
}

fn addr(p: &ServerProcess) -> String {
    format!("127.0.0.1:{}", p.port)
}

impl Setup {
    /// `primary_first`: list the primary's address first (else the replica's: the order
    /// must not decide which one is written).
    fn start(kind: ProcessKind, primary_first: bool) -> Setup {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().to_str().expect("utf-8 path").to_string();
        // No 5 s wait before a replica's first (diskless) sync.
        let common = ["--dir", &path, "--repl-diskless-sync-delay", "0"];
        let primary = ServerProcess::start_free(kind, &common);
        let port = primary.port.to_string();
        let replica = ServerProcess::start_free(
            kind,
            &[&common[..], &["--replicaof", "127.0.0.1", &port]].concat(),
        );
        let solo = ServerProcess::start_free(kind, &common);
        let (first, second) = if primary_first {
            (&primary, &replica)
        } else {
            (&replica, &primary)
        };
        let pair = format!("pair={},{}", first.url(), second.url());
        let nodes = vec![
            NodeSpec::parse(&pair).unwrap(),
            NodeSpec::parse(&format!("solo={}", solo.url())).unwrap(),
        ];
        let place = Placement::new(&nodes);
        let nodes_pair = nodes[0].clone();
        let (mut pair_keys, mut solo_keys) = (Vec::new(), Vec::new());
        for i in 0.. {
            let k = format!("key:{i}");
            match place.owner(k.as_bytes()) {
                0 if pair_keys.len() < 10 => pair_keys.push(k),
                1 if solo_keys.len() < 10 => solo_keys.push(k),
                _ if pair_keys.len() == 10 && solo_keys.len() == 10 => break,
                _ => {}
            }
        }
        let cfg = ProxyConfig {
            port: 0,
            nodes,
            ..Default::default()
        };
        let proxy = ProxyServer::start(cfg).expect("proxy starts");
        let s = Setup {
            primary,
            replica,
            _solo: solo,
            proxy,
            pair_keys,
            solo_keys,
            pair: nodes_pair,
            _dir: dir,
        };
        wait_until("the replica in sync", || {
            info(&mut s.replica.conn(), "replication").contains("master_link_status:up")
        });
        s
    }

    fn client(&self) -> Conn {
        Conn::open(self.proxy.port())
    }

    /// Writes every key through the proxy (`value` suffixed by the key) and waits until the
    /// replica has them all.
    fn write_all(&self, c: &mut Conn, value: &str) {
        for k in self.pair_keys.iter().chain(&self.solo_keys) {
            assert_eq!(
                c.cmd(&format!("SET {k} {value}-{k}")),
                Frame::Simple("OK".into())
            );
        }
        let mut r = self.replica.conn();
        wait_until("replication of the writes", || {
            self.pair_keys
                .iter()
                .all(|k| r.cmd(&format!("GET {k}")) == bulk(&format!("{value}-{k}")))
        });
    }

    /// Every key reads back `value` through the proxy.
    fn check_all(&self, c: &mut Conn, keys: &[String], value: &str) {
        for k in keys {
            assert_eq!(
                c.cmd(&format!("GET {k}")),
                bulk(&format!("{value}-{k}")),
                "{k}"
            );
        }
    }

    /// The proxy's `# Nodes` line for `pair`.
    fn pair_line(&self, c: &mut Conn) -> String {
        let text = info(c, "nodes");
        let line = text.lines().find(|l| l.contains("id=pair,"));
        line.expect("a line for node pair").to_string()
    }
}

fn bulk(s: &str) -> Frame {
    Frame::Bulk(s.as_bytes().to_vec())
}

fn info(c: &mut Conn, section: &str) -> String {
    match c.cmd(&format!("INFO {section}")) {
        Frame::Bulk(b) | Frame::Verbatim(_, b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("INFO {section}: {other}"),
    }
}

/// The primary is killed: `pair`'s keys fail with an error naming the node (then saying
/// there is no primary) while `solo`'s keep working; after `REPLICAOF NO ONE` on the
/// replica they are served by it, with the data written before.
fn primary_dies_and_the_replica_is_promoted(kind: ProcessKind) {
    let mut s = Setup::start(kind, false);
    let mut c = s.client();
    s.write_all(&mut c, "v1");
    let line = s.pair_line(&mut c);
    assert!(
        line.contains(&format!("primary={},", addr(&s.primary))),
        "{line}"
    );
    assert!(line.contains("failovers=0"), "{line}");
    // Both addresses shown, without a comma (fields are comma-separated).
    let urls = format!("url={}+{},", s.replica.url(), s.primary.url());
    assert!(line.contains(&urls), "{line}");

    s.offline_tool_writes_to_the_primary();
    // A subscriber to a channel of `pair` (channels are placed as keys are).
    let channel = s.pair_keys[2].clone();
    let mut sub = s.client();
    let subscribed = Frame::Array(vec![bulk("subscribe"), bulk(&channel), Frame::Int(1)]);
    assert_eq!(sub.cmd(&format!("SUBSCRIBE {channel}")), subscribed);
    assert_eq!(c.cmd(&format!("PUBLISH {channel} before")), Frame::Int(1));
    let message = |m: &str| Frame::Array(vec![bulk("message"), bulk(&channel), bulk(m)]);
    assert_eq!(sub.read().unwrap(), message("before"));

    s.primary.kill();
    let key = s.pair_keys[0].clone();
    wait_until("the gap to show as no primary", || {
        match c.cmd(&format!("GET {key}")) {
            Frame::Error(e) => {
                assert!(e.starts_with("ERR node pair is unavailable: "), "{e}");
                e.contains("no primary among its 2 addresses")
            }
            other => {
                // Only what was there before may come back (never another node's view).
                assert_eq!(other, bulk(&format!("v1-{key}")));
                false
            }
        }
    });
    // The whole gap: writes fail too, clearly, and the other node is unaffected.
    let e = c.cmd(&format!("SET {key} x"));
    assert!(
        e.is_error("ERR node pair is unavailable: no primary"),
        "{e}"
    );
    s.check_all(&mut c, &s.solo_keys, "v1");
    assert!(s.pair_line(&mut c).contains("primary=none,"));
    let e = SyncConn::connect(&s.pair, PATIENCE)
        .err()
        .expect("no primary");
    assert!(
        e.contains("node pair: no primary among its 2 addresses"),
        "{e}"
    );

    assert_eq!(
        s.replica.conn().cmd("REPLICAOF NO ONE"),
        Frame::Simple("OK".into())
    );
    wait_until("the promoted replica to serve", || {
        c.cmd(&format!("GET {key}")) == bulk(&format!("v1-{key}"))
    });
    s.check_all(&mut c, &s.pair_keys, "v1");
    s.check_all(&mut c, &s.solo_keys, "v1");
    // RESP3 clients go through the proxy's RESP3 connections (HELLO 3, then ROLE).
    let mut c3 = s.client();
    assert!(matches!(c3.cmd("HELLO 3"), Frame::Map(_)));
    s.check_all(&mut c3, &s.pair_keys, "v1");
    // The proxy's subscriber connection subscribed again, at the promoted replica.
    wait_until("the subscription at the new primary", || {
        c.cmd(&format!("PUBLISH {channel} after")) == Frame::Int(1)
    });
    assert_eq!(sub.read().unwrap(), message("after"));
    s.write_all_after_failover(&mut c);
    let line = s.pair_line(&mut c);
    assert!(
        line.contains(&format!("primary={},", addr(&s.replica))),
        "{line}"
    );
    assert!(line.contains("failovers=1"), "{line}");
    s.offline_tool_writes_to_the_primary();
}

impl Setup {
    /// `respite rebalance`'s client reaches the node at its primary, never a replica
    /// (which would refuse the write).
    fn offline_tool_writes_to_the_primary(&self) {
        let mut conn = SyncConn::connect(&self.pair, PATIENCE).expect("connect");
        let set: [&[u8]; 3] = [b"SET", b"{offline}", b"1"];
        assert_eq!(conn.call(&set), Ok(Resp::Status("OK".into())));
    }

    /// Writes land on the promoted replica; dedicated connections (MULTI, blocking) go
    /// there too.
    fn write_all_after_failover(&self, c: &mut Conn) {
        let mut r = self.replica.conn();
        for k in &self.pair_keys {
            assert_eq!(
                c.cmd(&format!("SET {k} v2-{k}")),
                Frame::Simple("OK".into())
            );
            assert_eq!(r.cmd(&format!("GET {k}")), bulk(&format!("v2-{k}")));
        }
        let k = &self.pair_keys[1];
        assert_eq!(c.cmd("MULTI"), Frame::Simple("OK".into()));
        assert_eq!(
            c.cmd(&format!("APPEND {k} !")),
            Frame::Simple("QUEUED".into())
        );
        let len = format!("v2-{k}!").len() as i64;
        assert_eq!(c.cmd("EXEC"), Frame::Array(vec![Frame::Int(len)]));
        let list = format!("{{{k}}}:list");
        assert_eq!(c.cmd(&format!("RPUSH {list} a")), Frame::Int(1));
        assert_eq!(
            c.cmd(&format!("BLPOP {list} 1")),
            Frame::Array(vec![bulk(&list), bulk("a")])
        );
        assert_eq!(r.cmd(&format!("EXISTS {list}")), Frame::Int(0));
    }
}

/// The replica is promoted and the old primary demoted under it (both stay up): the
/// proxy's connections to the old primary get `-READONLY` (or see it go), and the proxy
/// moves to the promoted one without losing a key.
fn primary_demoted_under_the_promoted_replica(kind: ProcessKind) {
    let s = Setup::start(kind, false);
    let mut c = s.client();
    s.write_all(&mut c, "v1");
    assert_eq!(
        s.replica.conn().cmd("REPLICAOF NO ONE"),
        Frame::Simple("OK".into())
    );
    let demote = format!("REPLICAOF 127.0.0.1 {}", s.replica.port);
    assert_eq!(s.primary.conn().cmd(&demote), Frame::Simple("OK".into()));
    let key = s.pair_keys[0].clone();
    wait_until("writes to reach the promoted replica", || {
        match c.cmd(&format!("SET {key} v2-{key}")) {
            Frame::Simple(ok) => {
                assert_eq!(ok, "OK");
                true
            }
            // Written to the old primary before the proxy noticed.
            Frame::Error(e) if e.starts_with("READONLY ") => false,
            Frame::Error(e) => {
                assert!(e.starts_with("ERR node pair is unavailable: "), "{e}");
                false
            }
            other => panic!("SET: {other}"),
        }
    });
    // Never written to the demoted one directly: the replica has it from the proxy.
    assert_eq!(
        s.replica.conn().cmd(&format!("GET {key}")),
        bulk(&format!("v2-{key}"))
    );
    s.check_all(&mut c, &s.pair_keys[1..], "v1");
    s.check_all(&mut c, &s.solo_keys, "v1");
    s.write_all_after_failover(&mut c);
    let line = s.pair_line(&mut c);
    assert!(
        line.contains(&format!("primary={},", addr(&s.replica))),
        "{line}"
    );
    assert!(line.contains("failovers=1"), "{line}");
}

/// Split brain: the replica is promoted but the old primary keeps running as a primary.
/// Both answer as masters; the proxy picks the promoted one (its `master_replid2` is the
/// old primary's replication id) and stays there, though the old one is listed first and
/// has as much data.
fn split_brain_picks_the_promoted_one(kind: ProcessKind) {
    let s = Setup::start(kind, true);
    let mut c = s.client();
    s.write_all(&mut c, "v1");
    // A client blocked on the old primary, and one WATCHing there.
    let list = format!("{{{}}}:list", s.pair_keys[0]);
    let mut blocked = s.client();
    blocked.send_line(&format!("BLPOP {list} 0")).unwrap();
    let mut old = s.primary.conn();
    wait_until("the BLPOP to block on the old primary", || {
        info(&mut old, "clients").contains("blocked_clients:1")
    });
    let mut watcher = s.client();
    let watched = &s.pair_keys[1];
    assert_eq!(
        watcher.cmd(&format!("WATCH {watched}")),
        Frame::Simple("OK".into())
    );

    assert_eq!(
        s.replica.conn().cmd("REPLICAOF NO ONE"),
        Frame::Simple("OK".into())
    );
    let want = format!("primary={},", addr(&s.replica));
    wait_until("the proxy to pick the promoted address", || {
        s.pair_line(&mut c).contains(&want)
    });
    // Neither goes on at the old primary: the blocked client is told, the transaction is
    // refused.
    let moved = "ERR node pair is unavailable: its primary moved";
    let e = blocked.read().unwrap();
    assert!(e.is_error(moved), "{e}");
    assert_eq!(watcher.cmd("MULTI"), Frame::Simple("OK".into()));
    assert_eq!(
        watcher.cmd(&format!("SET {watched} lost")),
        Frame::Simple("QUEUED".into())
    );
    let e = watcher.cmd("EXEC");
    assert!(e.is_error(moved), "{e}");
    for k in &s.pair_keys {
        assert_eq!(
            c.cmd(&format!("SET {k} v2-{k}")),
            Frame::Simple("OK".into())
        );
        assert_eq!(old.cmd(&format!("GET {k}")), bulk(&format!("v1-{k}")));
    }
    s.check_all(&mut c, &s.solo_keys, "v1");
}

/// Valkey (8.x) when its binary exists; redis-server 7.0 always.
fn valkey_present() -> bool {
    let found = common::find_valkey_server().is_some();
    if !found {
        eprintln!("SKIPPED: no valkey-server (set RESPITE_VALKEY_SERVER; CI installs it)");
    }
    found
}

mod valkey {
    use super::*;

    #[test]
    fn primary_dies_and_the_replica_is_promoted() {
        if valkey_present() {
            super::primary_dies_and_the_replica_is_promoted(ProcessKind::Valkey);
        }
    }

    #[test]
    fn primary_demoted_under_the_promoted_replica() {
        if valkey_present() {
            super::primary_demoted_under_the_promoted_replica(ProcessKind::Valkey);
        }
    }

    #[test]
    fn split_brain_picks_the_promoted_one() {
        if valkey_present() {
            super::split_brain_picks_the_promoted_one(ProcessKind::Valkey);
        }
    }
}

mod redis_server {
    use super::*;

    #[test]
    fn primary_dies_and_the_replica_is_promoted() {
        super::primary_dies_and_the_replica_is_promoted(ProcessKind::Redis);
    }

    #[test]
    fn primary_demoted_under_the_promoted_replica() {
        super::primary_demoted_under_the_promoted_replica(ProcessKind::Redis);
    }

    #[test]
    fn split_brain_picks_the_promoted_one() {
        super::split_brain_picks_the_promoted_one(ProcessKind::Redis);
    }
}
