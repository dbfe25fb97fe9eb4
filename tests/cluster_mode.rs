//! Cluster mode: a respite started with `--cluster-mode emulated` (here the test double's
//! `cluster_emulated()`) answers CLUSTER and the cluster rules byte for byte as a
//! redis-server with `cluster-enabled yes` that owns every slot (the oracle, compared in
//! RESP2 and RESP3 with ids and ports masked); the proxy answers CLUSTER the same way for
//! itself, at its listening or announced address, and spreads COUNTKEYSINSLOT and
//! GETKEYSINSLOT over its nodes. A plain server still answers as Redis with cluster
//! support disabled.

mod common;
mod proxy_fleet;

use common::{wait_until, ServerProcess, Wire};
use proxy_fleet::{Fleet, NodeKind};
use respite::cmd::cluster::topology::{default_bus_port, key_slot};
use respite::TestServer;

/// redis-server as a one-node cluster owning every slot at 127.0.0.1, bus port [`BUS`],
/// epoch 1 (its nodes.conf in `dir`), once it reports `cluster_state:ok`.
fn redis_cluster_node(dir: &std::path::Path) -> ServerProcess {
    let conf = dir.join("nodes.conf");
    let node = ServerProcess::redis_with(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        conf.to_str().unwrap(),
        "--cluster-announce-ip",
        "127.0.0.1",
        "--cluster-announce-bus-port",
        BUS,
    ]);
    let mut w = Wire::connect_port(node.port);
    assert_eq!(
        w.line_of(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK"
    );
    assert_eq!(w.line_of(&["CLUSTER", "BUMPEPOCH"]), "+BUMPED 1");
    // A master that just took slots waits out Redis's rejoin delay before it says ok.
    wait_until("the oracle's cluster_state:ok", || {
        w.call(&["CLUSTER", "INFO"]).contains("cluster_state:ok")
    });
    node
}

/// The bus port both servers announce: a default one (port + 10000) would differ, and past
/// port 55535 Redis refuses to start while respite shows 0.
const BUS: &str = "17000";

trait LineOf {
    fn line_of(&mut self, args: &[&str]) -> String;
}

impl LineOf for Wire {
    fn line_of(&mut self, args: &[&str]) -> String {
        self.send(args);
        self.line()
    }
}

/// The node's id and port, masked so two nodes' replies compare.
fn masked(reply: String, id: &str, port: u16) -> String {
    reply
        .replace(id, "<id>")
        .replace(&port.to_string(), "<port>")
}

/// Sends `cmds` to both and compares each reply (masked).
fn same_replies(oracle: (&mut Wire, &str, u16), ours: (&mut Wire, &str, u16), cmds: &[&[&str]]) {
    for cmd in cmds {
        let want = masked(oracle.0.call(cmd), oracle.1, oracle.2);
        let got = masked(ours.0.call(cmd), ours.1, ours.2);
        assert_eq!(got, want, "{cmd:?}");
    }
}

fn myid(w: &mut Wire) -> String {
    let reply = w.call(&["CLUSTER", "MYID"]);
    let id = reply.split(' ').nth(1).unwrap().to_string();
    assert_eq!(id.len(), 40, "{reply}");
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    id
}

/// The commands whose replies must equal the oracle's, in either protocol.
const SHAPES: &[&[&str]] = &[
    &["CLUSTER", "SLOTS"],
    &["CLUSTER", "SHARDS"],
    &["CLUSTER", "NODES"],
    &["CLUSTER", "INFO"],
    &["CLUSTER", "LINKS"],
    &["CLUSTER", "KEYSLOT", "foo"],
    &["CLUSTER", "KEYSLOT", "{user1000}.following"],
    &["CLUSTER", "KEYSLOT", "foo{}{bar}"],
    &["CLUSTER", "KEYSLOT", "foo{{bar}}zap"],
    &["CLUSTER", "KEYSLOT", ""],
    &["CLUSTER", "COUNTKEYSINSLOT", "16384"],
    &["CLUSTER", "COUNTKEYSINSLOT", "-1"],
    &["CLUSTER", "COUNTKEYSINSLOT", "x"],
    &["CLUSTER", "GETKEYSINSLOT", "0", "-1"],
    &["CLUSTER", "GETKEYSINSLOT", "16384", "1"],
    &["CLUSTER", "GETKEYSINSLOT", "99999", "x"],
    &[
        "CLUSTER",
        "REPLICAS",
        "0123456789012345678901234567890123456789",
    ],
    &["CLUSTER", "COUNT-FAILURE-REPORTS", "nope"],
    &["CLUSTER", "FAILOVER"],
    &["CLUSTER", "FORGET"],
    &["ASKING"],
    &["READONLY"],
    &["READWRITE"],
    &["SELECT", "0"],
    &["SELECT", "1"],
    &["SELECT", "x"],
    &["SWAPDB", "0", "1"],
    &["MOVE", "k", "1"],
    &["COPY", "k", "k2", "DB", "1"],
    &["SET", "{t}a", "1"],
    &["MSET", "{t}b", "2", "{t}c", "3"],
    &["CLUSTER", "COUNTKEYSINSLOT", "15891"],
    &["MSET", "a", "1", "b", "2"],
    &["MGET", "{t}a", "{t}b", "zz"],
    &["EVAL", "return #KEYS", "2", "a", "b"],
    &["EVAL", "return #KEYS", "2", "{t}a", "{t}b"],
    // Inside scripts (Redis `scriptVerifyClusterState`): one command's keys must share a
    // slot; a script with a shebang keeps to the slot of its first keys unless it allows
    // cross-slot keys; a script without one (compatibility mode) may roam.
    &["EVAL", "return redis.pcall('mget', 'a', 'b')", "0"],
    &[
        "EVAL",
        "#!lua\nredis.call('get', 'a') return redis.call('get', 'b')",
        "0",
    ],
    &["EVAL", "#!lua\nreturn redis.call('get', 'b')", "1", "a"],
    &[
        "EVAL",
        "#!lua\nreturn redis.call('get', '{t}b')",
        "1",
        "{t}a",
    ],
    &[
        "EVAL",
        "#!lua flags=allow-cross-slot-keys\nredis.call('get', 'a') return redis.call('get', 'b')",
        "0",
    ],
    &[
        "EVAL",
        "redis.call('get', 'a') return redis.call('get', 'b')",
        "0",
    ],
    // Each queued command alone is fine; together they span two slots.
    &["MULTI"],
    &["GET", "a"],
    &["GET", "b"],
    &["EXEC"],
    // A cross-slot command dooms the transaction it was queued for.
    &["MULTI"],
    &["MGET", "a", "b"],
    &["EXEC"],
    &["MULTI"],
    &["GET", "{t}a"],
    &["INCR", "{t}n"],
    &["EXEC"],
];

#[test]
fn emulated_server_answers_as_a_redis_cluster_node() {
    let dir = tempfile::tempdir().unwrap();
    let oracle = redis_cluster_node(dir.path());
    let ours = TestServer::builder()
        .cluster_emulated()
        .param("cluster-announce-bus-port", BUS)
        .start()
        .unwrap();
    for resp3 in [false, true] {
        let mut a = Wire::connect_port(oracle.port);
        let mut b = Wire::connect_port(ours.port());
        if resp3 {
            a.call(&["HELLO", "3"]);
            assert!(b.call(&["HELLO", "3"]).contains("mode $7 cluster"));
        }
        let (ida, idb) = (myid(&mut a), myid(&mut b));
        for w in [&mut a, &mut b] {
            w.call(&["FLUSHALL"]);
        }
        same_replies(
            (&mut a, &ida, oracle.port),
            (&mut b, &idb, ours.port()),
            SHAPES,
        );
        // GETKEYSINSLOT's keys come in each server's own order.
        let keys = |w: &mut Wire| {
            let mut v: Vec<String> = w
                .call(&["CLUSTER", "GETKEYSINSLOT", "15891", "10"])
                .split(' ')
                .map(String::from)
                .collect();
            v.sort();
            v
        };
        assert_eq!(keys(&mut b), keys(&mut a));
        assert_eq!(
            b.call(&["CLUSTER", "GETKEYSINSLOT", "15891", "2"])
                .matches("{t}")
                .count(),
            2
        );
    }
    // The id is stable for the server: every connection sees one.
    let mut c = Wire::connect_port(ours.port());
    assert_eq!(myid(&mut c), myid(&mut Wire::connect_port(ours.port())));
    assert!(c.call(&["INFO", "cluster"]).contains("cluster_enabled:1"));
    assert!(c.call(&["INFO", "server"]).contains("redis_mode:cluster"));
    assert!(c
        .call(&["CONFIG", "GET", "cluster-enabled"])
        .contains("yes"));
}

#[test]
fn emulated_server_announces_the_configured_address() {
    let ours = TestServer::builder()
        .cluster_emulated()
        .param("cluster-announce-ip", "10.1.2.3")
        .param("cluster-announce-port", "7777")
        .param("cluster-announce-bus-port", "17778")
        .param("cluster-announce-hostname", "cache.example")
        .start()
        .unwrap();
    let mut w = Wire::connect_port(ours.port());
    let id = myid(&mut w);
    assert_eq!(
        w.call(&["CLUSTER", "SLOTS"]),
        format!("*1 *3 :0 :16383 *4 $8 10.1.2.3 :7777 $40 {id} *2 $8 hostname $13 cache.example ")
    );
    let line =
        format!("{id} 10.1.2.3:7777@17778,cache.example myself,master - 0 0 1 connected 0-16383\n");
    assert_eq!(
        w.call(&["CLUSTER", "NODES"]),
        format!("${} {line} ", line.len())
    );
    assert!(w
        .call(&["CLUSTER", "SHARDS"])
        .contains("$8 endpoint $8 10.1.2.3 $8 hostname $13 cache.example "));
}

#[test]
fn standalone_server_keeps_cluster_support_disabled() {
    let srv = TestServer::start().unwrap();
    let mut w = Wire::connect_port(srv.port());
    for cmd in [
        &["CLUSTER", "SLOTS"][..],
        &["CLUSTER", "KEYSLOT", "foo"],
        &["READONLY"],
        &["ASKING"],
    ] {
        assert_eq!(
            w.call(cmd),
            "-ERR This instance has cluster support disabled ",
            "{cmd:?}"
        );
    }
    assert_eq!(w.call(&["MSET", "a", "1", "b", "2"]), "+OK ");
    assert_eq!(w.call(&["SELECT", "1"]), "+OK ");
    assert!(w.call(&["INFO", "cluster"]).contains("cluster_enabled:0"));
}

#[test]
fn proxy_answers_as_one_node_owning_every_slot() {
    let dir = tempfile::tempdir().unwrap();
    let oracle = redis_cluster_node(dir.path());
    let fleet = Fleet::open(NodeKind::Redis, &proxy_fleet::IDS, false, |_| {});
    let port = fleet.proxy.addr().port();
    for resp3 in [false, true] {
        let mut a = Wire::connect_port(oracle.port);
        let mut b = fleet.raw();
        if resp3 {
            a.call(&["HELLO", "3"]);
            b.call(&["HELLO", "3"]);
        }
        let (ida, idb) = (myid(&mut a), myid(&mut b));
        same_replies(
            (&mut a, &ida, oracle.port),
            (&mut b, &idb, port),
            &[
                &["CLUSTER", "SLOTS"],
                &["CLUSTER", "SHARDS"],
                &["CLUSTER", "INFO"],
                &["CLUSTER", "LINKS"],
                &["CLUSTER", "KEYSLOT", "{user1000}.following"],
                &["CLUSTER", "COUNTKEYSINSLOT", "16384"],
                &["CLUSTER", "GETKEYSINSLOT", "0", "-1"],
                &["CLUSTER", "GETKEYSINSLOT", "99999", "x"],
                &["CLUSTER", "REPLICAS", "nope"],
                &["ASKING"],
                &["READONLY"],
                &["READWRITE"],
            ],
        );
        assert_eq!(b.call(&["CLUSTER", "REPLICAS", &idb]), "*0 ");
        // The proxy's bus port is the default one (no bus behind it).
        let line = format!(
            "{idb} 127.0.0.1:{port}@{} myself,master - 0 0 1 connected 0-16383\n",
            default_bus_port(port)
        );
        let want = if resp3 {
            format!("={} txt:{line} ", line.len() + 4)
        } else {
            format!("${} {line} ", line.len())
        };
        assert_eq!(b.call(&["CLUSTER", "NODES"]), want);
    }
    // The id names the fleet and the port: the same for every client.
    assert_eq!(myid(&mut fleet.raw()), myid(&mut fleet.raw()));
}

#[test]
fn proxy_counts_and_lists_a_slot_across_its_nodes() {
    let fleet = Fleet::open(NodeKind::Redis, &proxy_fleet::IDS, false, |_| {});
    // Keys of one Redis Cluster slot that placement spreads over more than one node (slots
    // and placement hash differently, §8).
    let slot = key_slot(b"k0");
    let keys: Vec<String> = (0..)
        .map(|i| format!("k{i}"))
        .filter(|k| key_slot(k.as_bytes()) == slot)
        .take(4)
        .collect();
    let mut owners: Vec<usize> = keys.iter().map(|k| fleet.owner(k)).collect();
    owners.dedup();
    assert!(owners.len() > 1, "keys {keys:?} all on one node");
    let mut w = fleet.raw();
    for k in &keys {
        assert_eq!(w.call(&["SET", k, "v"]), "+OK ");
    }
    w.call(&["SET", "elsewhere", "v"]);
    let s = slot.to_string();
    assert_eq!(w.call(&["CLUSTER", "COUNTKEYSINSLOT", &s]), ":4 ");
    let listed = w.call(&["CLUSTER", "GETKEYSINSLOT", &s, "10"]);
    let mut got: Vec<&str> = listed.split(' ').filter(|t| t.starts_with('k')).collect();
    got.sort();
    let mut want: Vec<&str> = keys.iter().map(String::as_str).collect();
    want.sort();
    assert_eq!(got, want, "{listed}");
    assert!(w
        .call(&["CLUSTER", "GETKEYSINSLOT", &s, "3"])
        .starts_with("*3 "));
    assert_eq!(w.call(&["CLUSTER", "GETKEYSINSLOT", &s, "0"]), "*0 ");
    let other = ((slot + 1) % 16384).to_string();
    assert_eq!(w.call(&["CLUSTER", "COUNTKEYSINSLOT", &other]), ":0 ");
}

#[test]
fn proxy_announces_the_configured_address() {
    let fleet = Fleet::open(NodeKind::Redis, &proxy_fleet::IDS, false, |cfg| {
        cfg.announce_ip = Some("10.9.8.7".into());
        cfg.announce_port = Some(7001);
    });
    let mut w = fleet.raw();
    let id = myid(&mut w);
    assert_eq!(
        w.call(&["CLUSTER", "SLOTS"]),
        format!("*1 *3 :0 :16383 *4 $8 10.9.8.7 :7001 $40 {id} *0 ")
    );
    assert!(w
        .call(&["CLUSTER", "NODES"])
        .contains(&format!("{id} 10.9.8.7:7001@17001 myself,master")));
}
