//! `respite rebalance` against real redis-server nodes (and fleets of respite and of
//! valkey-server 8.1): keys of every type move exactly when their owner changes, with values
//! and TTLs, resumably and idempotently.

mod common;

use common::{free_port, ServerProcess};
use redis::Connection;
use respite::proxy::config::{NodeSpec, Placement};
use respite::proxy::rebalance::{parse_node_list, rebalance, RebalanceOptions, Summary};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

const PASSWORD: &str = "s3cret-pw";

/// A redis-server (or respite) process on a free loopback port, killed on drop.
struct Node {
    // Held for its drop, which kills the process.
    _process: ServerProcess,
    port: u16,
    password: Option<&'static str>,
}

impl Node {
    fn start(password: Option<&'static str>) -> Node {
        let args = password.map_or(vec![], |pw| vec!["--requirepass", pw]);
        Node::of(ServerProcess::redis_with(&args), password)
    }

    /// A respite server instead (memory engine).
    fn start_respite() -> Node {
        Node::of(ServerProcess::respite(&[]), None)
    }

    /// A valkey-server 8.1 instead.
    fn start_valkey() -> Node {
        Node::of(ServerProcess::valkey(), None)
    }

    fn of(process: ServerProcess, password: Option<&'static str>) -> Node {
        Node {
            port: process.port,
            _process: process,
            password,
        }
    }

    fn url(&self, db: u32) -> String {
        let auth = self.password.map(|p| format!(":{p}@")).unwrap_or_default();
        format!("redis://{auth}127.0.0.1:{}/{db}", self.port)
    }

    fn spec(&self, id: &str, db: u32) -> NodeSpec {
        NodeSpec::parse(&format!("{id}={}", self.url(db))).unwrap()
    }

    fn conn(&self, db: u32) -> Connection {
        redis::Client::open(self.url(db))
            .unwrap()
            .get_connection()
            .unwrap()
    }
}

/// A fleet member as the test sees it: its spec and a direct connection.
struct Member<'a> {
    node: &'a Node,
    spec: NodeSpec,
}

fn member<'a>(node: &'a Node, id: &str, db: u32) -> Member<'a> {
    Member {
        node,
        spec: node.spec(id, db),
    }
}

fn specs(fleet: &[&Member]) -> Vec<NodeSpec> {
    fleet.iter().map(|m| m.spec.clone()).collect()
}

fn conn(m: &Member) -> Connection {
    m.node.conn(m.spec.db)
}

/// Every 7th key carries a hash tag shared by 5 keys; types rotate; every 4th key expires.
fn key_name(i: usize) -> String {
    if i.is_multiple_of(7) {
        format!("{{tag:{}}}:k{i}", i / 35)
    } else {
        format!("k:{i}")
    }
}

fn write_key(p: &mut redis::Pipeline, i: usize) {
    let k = key_name(i);
    match i % 8 {
        0 | 1 => p.set(&k, format!("value-{i}")).ignore(),
        2 => p
            .hset_multiple(&k, &[("f1", i.to_string()), ("f2", "x".into())])
            .ignore(),
        3 => p
            .rpush(&k, &[i.to_string(), "b".into(), "c".into()])
            .ignore(),
        4 => p.sadd(&k, &[i, i + 1, i + 2]).ignore(),
        5 => p.zadd_multiple(&k, &[(1.5, "a"), (i as f64, "b")]).ignore(),
        6 => p.cmd("XADD").arg(&k).arg("*").arg("n").arg(i).ignore(),
        _ => p.set(&k, i).ignore(),
    };
    if i % 4 == 1 {
        p.pexpire(&k, 600_000 + i as i64).ignore();
    }
}

/// Writes `n` keys, each on its owner under `fleet`'s placement.
fn populate(fleet: &[&Member], n: usize) {
    let place = Placement::new(&specs(fleet));
    let mut pipes: Vec<redis::Pipeline> = fleet.iter().map(|_| redis::pipe()).collect();
    for i in 0..n {
        write_key(&mut pipes[place.owner(key_name(i).as_bytes())], i);
    }
    for (m, p) in fleet.iter().zip(pipes).filter(|(_, p)| !p.is_empty()) {
        let () = p.query(&mut conn(m)).unwrap();
    }
}

/// DUMP payload and PTTL of every key, read wherever it is.
/// Per key: its DUMP, its PTTL, and a moment before that PTTL was read.
type Snapshot = HashMap<String, (Vec<u8>, i64, Instant)>;

fn snapshot(fleet: &[&Member], n: usize) -> Snapshot {
    let place = Placement::new(&specs(fleet));
    let mut snap = Snapshot::new();
    for (idx, m) in fleet.iter().enumerate() {
        let keys: Vec<String> = (0..n)
            .map(key_name)
            .filter(|k| place.owner(k.as_bytes()) == idx)
            .collect();
        let before = Instant::now();
        for (k, (dump, ttl)) in keys.iter().zip(dump_pttl(m, &keys)) {
            snap.insert(k.clone(), (dump, ttl, before));
        }
    }
    snap
}

fn dump_pttl(m: &Member, keys: &[String]) -> Vec<(Vec<u8>, i64)> {
    if keys.is_empty() {
        return Vec::new();
    }
    let mut p = redis::pipe();
    for k in keys {
        p.cmd("DUMP").arg(k).cmd("PTTL").arg(k);
    }
    let flat: Vec<redis::Value> = p.query(&mut conn(m)).unwrap();
    flat.chunks(2)
        .map(|c| {
            let dump: Vec<u8> = redis::from_redis_value_ref(&c[0]).unwrap();
            let ttl: i64 = redis::from_redis_value_ref(&c[1]).unwrap();
            (dump, ttl)
        })
        .collect()
}

fn exists_on(m: &Member, keys: &[String]) -> Vec<bool> {
    let mut p = redis::pipe();
    for k in keys {
        p.exists(k);
    }
    p.query(&mut conn(m)).unwrap()
}

fn dbsize(m: &Member) -> usize {
    redis::cmd("DBSIZE").query(&mut conn(m)).unwrap()
}

/// Every key is on the node `fleet`'s placement names and nowhere among `all`, with the
/// value and TTL it had; keys of one tag are together; the fleet holds `extra` other keys.
fn check_layout_plus(all: &[&Member], fleet: &[&Member], snap: &Snapshot, extra: usize) {
    let place = Placement::new(&specs(fleet));
    let keys: Vec<String> = snap.keys().cloned().collect();
    let mut tag_home: HashMap<String, String> = HashMap::new();
    let mut total = 0;
    for m in all {
        let idx = fleet.iter().position(|f| f.spec.id == m.spec.id);
        let present = exists_on(m, &keys);
        let mine: Vec<String> = keys
            .iter()
            .filter(|k| idx == Some(place.owner(k.as_bytes())))
            .cloned()
            .collect();
        for (k, &here) in keys.iter().zip(&present) {
            let owned = idx == Some(place.owner(k.as_bytes()));
            assert_eq!(here, owned, "{k} on {}: present {here}", m.spec.id);
            if here && k.starts_with('{') {
                let tag = k.split(':').take(2).collect::<Vec<_>>().join(":");
                let home = tag_home.entry(tag).or_insert(m.spec.id.clone());
                assert_eq!(*home, m.spec.id, "{k} split from its tag");
            }
        }
        let got = dump_pttl(m, &mine);
        let read = Instant::now();
        for (k, (dump, ttl)) in mine.iter().zip(got) {
            let (dump0, ttl0, before) = &snap[k];
            assert_eq!(&dump, dump0, "{k}: value changed");
            if *ttl0 < 0 {
                assert_eq!(ttl, *ttl0, "{k}: TTL changed");
            } else {
                // The TTL ran down by no more than the time that passed (a move carries the
                // remaining TTL; 1 ms of rounding either way).
                let passed = read.duration_since(*before).as_millis() as i64;
                assert!(
                    ttl <= ttl0 + 1 && ttl0 - ttl <= passed + 1,
                    "{k}: TTL {ttl0} -> {ttl} in {passed} ms"
                );
            }
        }
        total += dbsize(m);
    }
    assert_eq!(total, snap.len() + extra, "unexpected keys in the fleet");
}

fn check_layout(all: &[&Member], fleet: &[&Member], snap: &Snapshot) {
    check_layout_plus(all, fleet, snap, 0)
}

fn opts(from: &[&Member], to: &[&Member], batch: usize) -> RebalanceOptions {
    RebalanceOptions {
        from: specs(from),
        to: specs(to),
        batch,
        dry_run: false,
        progress: None,
    }
}

/// Members `node-a`..`node-d` on four servers, db 0.
fn four_members(servers: &[Node]) -> Vec<Member<'_>> {
    let ids = ["node-a", "node-b", "node-c", "node-d"];
    servers
        .iter()
        .zip(ids)
        .map(|(s, id)| member(s, id, 0))
        .collect()
}

#[test]
fn growing_three_nodes_to_four_moves_a_quarter_resumably() {
    let servers: Vec<Node> = (0..4).map(|_| Node::start(None)).collect();
    let members = four_members(&servers);
    let all: Vec<&Member> = members.iter().collect();
    let (old, new) = (&all[..3], &all[..]);
    const N: usize = 6_000;
    populate(old, N);
    let snap = snapshot(old, N);
    assert_eq!(snap.len(), N);
    let (p_old, p_new) = (Placement::new(&specs(old)), Placement::new(&specs(new)));
    let expected = (0..N)
        .map(key_name)
        .filter(|k| p_old.owner(k.as_bytes()) != p_new.owner(k.as_bytes()))
        .count() as u64;
    assert!(
        (N as u64 * 15 / 100..=N as u64 * 35 / 100).contains(&expected),
        "{expected} of {N} keys change owner"
    );

    // Dry run: counts, changes nothing.
    let sum = rebalance(RebalanceOptions {
        dry_run: true,
        ..opts(old, new, 200)
    })
    .unwrap();
    assert!(sum.complete && sum.dry_run);
    assert_eq!(
        (sum.scanned, sum.moved, sum.failed),
        (N as u64, expected, 0)
    );
    assert!(sum.to_string().contains("would move"), "{sum}");
    assert_eq!(dbsize(all[3]), 0);
    check_layout(&all, old, &snap);

    // Interrupted after ~100 moves: a consistent partial state, nothing lost.
    let first = rebalance(RebalanceOptions {
        progress: Some(Box::new(|p| p.moved < 100)),
        ..opts(old, new, 50)
    })
    .unwrap();
    assert!(!first.complete, "{first}");
    assert!(first.moved >= 100 && first.moved < expected, "{first}");
    let total: usize = all.iter().map(|m| dbsize(m)).sum();
    assert_eq!(total, N, "keys lost or duplicated by an interrupted run");

    // Simulate a crash between RESTORE and DEL: a misplaced key copied but not deleted.
    let (key, src) = (0..N)
        .map(key_name)
        .find_map(|k| {
            let src = p_old.owner(k.as_bytes());
            let on_src = exists_on(old[src], std::slice::from_ref(&k))[0];
            (on_src && p_new.owner(k.as_bytes()) != src).then_some((k, src))
        })
        .unwrap();
    let (dump, _) = dump_pttl(old[src], std::slice::from_ref(&key)).remove(0);
    let target = new[p_new.owner(key.as_bytes())];
    let () = redis::cmd("RESTORE")
        .arg(&key)
        .arg(0)
        .arg(dump)
        .query(&mut conn(target))
        .unwrap();

    // Resume: moves the rest, resolves the duplicate.
    let second = rebalance(opts(old, new, 100)).unwrap();
    println!("{first}\n{second}");
    assert!(second.complete, "{second}");
    assert_eq!((second.failed, second.stray), (0, 0), "{second}");
    assert_eq!(first.moved + second.moved, expected, "{first}\n{second}");
    let d = second.per_node.iter().find(|n| n.id == "node-d").unwrap();
    assert_eq!(d.moved_in, second.moved, "only node-d gains keys: {second}");
    check_layout(&all, new, &snap);

    // Idempotent: nothing left to move.
    let again = rebalance(opts(old, new, 500)).unwrap();
    assert!(again.complete);
    assert_eq!(again.moved, 0, "{again}");
    assert_eq!(again.already_in_place, N as u64 - expected);
    // With the new fleet as the old one too, every key is scanned and stays.
    let full = rebalance(opts(new, new, 500)).unwrap();
    assert_eq!((full.scanned, full.moved), (N as u64, 0), "{full}");
    check_layout(&all, new, &snap);
    readable_through_a_proxy(new, &snap);
}

/// A fleet of respite servers grows the same way: they DUMP and RESTORE as Redis does, so
/// every key moves with its exact payload and TTL.
#[test]
fn a_respite_fleet_grows_three_to_four() {
    grows_three_to_four(Node::start_respite)
}

/// So does a fleet of valkey-server 8.1 nodes.
#[test]
fn a_valkey_fleet_grows_three_to_four() {
    grows_three_to_four(Node::start_valkey)
}

fn grows_three_to_four(start: fn() -> Node) {
    let servers: Vec<Node> = (0..4).map(|_| start()).collect();
    let members = four_members(&servers);
    let all: Vec<&Member> = members.iter().collect();
    let (old, new) = (&all[..3], &all[..]);
    const N: usize = 2_000;
    populate(old, N);
    let snap = snapshot(old, N);
    assert_eq!(snap.len(), N);
    let sum = rebalance(opts(old, new, 200)).unwrap();
    assert!(sum.complete, "{sum}");
    assert_eq!((sum.failed, sum.stray), (0, 0), "{sum}");
    assert!(sum.moved > 0, "{sum}");
    check_layout(&all, new, &snap);
    readable_through_a_proxy(new, &snap);
}

/// Every key answers through a `respite proxy` configured with `fleet`, with the content its
/// owning node holds, read per type and as its DUMP payload (equal to the snapshot's).
fn readable_through_a_proxy(fleet: &[&Member], snap: &Snapshot) {
    let cfg = respite::proxy::config::ProxyConfig {
        port: 0,
        nodes: specs(fleet),
        ..Default::default()
    };
    let place = Placement::new(&cfg.nodes);
    let proxy = respite::proxy::ProxyServer::start(cfg).expect("proxy starts");
    let mut via = redis::Client::open(proxy.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let mut direct: Vec<Connection> = fleet.iter().map(|m| conn(m)).collect();
    let read = |c: &mut Connection, k: &str| -> redis::Value {
        let t: String = redis::cmd("TYPE").arg(k).query(c).unwrap();
        let mut cmd = match t.as_str() {
            "string" => redis::cmd("GET"),
            "hash" => redis::cmd("HGETALL"),
            "list" => {
                let mut l = redis::cmd("LRANGE");
                l.arg(k).arg(0).arg(-1);
                return l.query(c).unwrap();
            }
            "set" => redis::cmd("SMEMBERS"),
            "zset" => {
                let mut z = redis::cmd("ZRANGE");
                z.arg(k).arg(0).arg(-1).arg("WITHSCORES");
                return z.query(c).unwrap();
            }
            "stream" => {
                let mut x = redis::cmd("XRANGE");
                x.arg(k).arg("-").arg("+");
                return x.query(c).unwrap();
            }
            other => panic!("{k}: type {other}"),
        };
        cmd.arg(k).query(c).unwrap()
    };
    let mut keys: Vec<&String> = snap.keys().collect();
    keys.sort();
    for k in keys {
        let got = read(&mut via, k);
        let want = read(&mut direct[place.owner(k.as_bytes())], k);
        assert_eq!(got, want, "{k} through the proxy");
        assert_ne!(got, redis::Value::Nil, "{k} missing");
        let dump: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut via).unwrap();
        assert_eq!(dump, snap[k].0, "{k}: DUMP through the proxy");
    }
    let n: usize = redis::cmd("DBSIZE").query(&mut via).unwrap();
    assert_eq!(n, snap.len());
}

fn assert_secret_free(s: &str) {
    assert!(!s.contains(PASSWORD) && !s.contains("wrong-pw"), "{s}");
}

#[test]
fn passwords_dbs_shrinking_and_node_errors() {
    let servers = [
        Node::start(Some(PASSWORD)),
        Node::start(None),
        Node::start(Some(PASSWORD)),
    ];
    // x lives in db 2, so SELECT from the URL matters.
    let (x, y, z) = (
        member(&servers[0], "x", 2),
        member(&servers[1], "y", 0),
        member(&servers[2], "z", 0),
    );
    const N: usize = 800;
    populate(&[&x, &y], N);
    let snap = snapshot(&[&x, &y], N);
    let all = [&x, &y, &z];

    // Grow x,y -> x,y,z; the lists come in through the CLI parser.
    let list = |f: &[&Member]| {
        let items: Vec<String> = f
            .iter()
            .map(|m| format!("{}={}", m.spec.id, m.node.url(m.spec.db)))
            .collect();
        parse_node_list(&items.join(",")).unwrap()
    };
    let sum: Summary = rebalance(RebalanceOptions {
        from: list(&[&x, &y]),
        to: list(&all),
        batch: 64,
        dry_run: false,
        progress: None,
    })
    .unwrap();
    assert!(sum.complete && sum.moved > 0 && sum.failed == 0, "{sum}");
    assert_eq!((sum.scanned, sum.stray), (N as u64, 0), "{sum}");
    assert_secret_free(&format!("{sum} {sum:?}"));
    check_layout(&all, &all, &snap);
    assert_eq!(
        redis::cmd("DBSIZE")
            .query::<usize>(&mut x.node.conn(0))
            .unwrap(),
        0
    );

    // Shrink: x leaves; all of its keys go to y and z.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let sum = rebalance(RebalanceOptions {
        progress: Some(Box::new(move |p| {
            log.lock().unwrap().push(p.clone());
            true
        })),
        ..opts(&all, &[&y, &z], 64)
    })
    .unwrap();
    assert!(sum.complete && sum.failed == 0, "{sum}");
    // Keys moved to y and z are not scanned again (kept nodes are scanned first).
    assert_eq!((sum.scanned, sum.stray), (N as u64, 0), "{sum}");
    println!("{sum}");
    // Progress after every SCAN batch, x (leaving) last, totals growing to the summary's.
    let seen = seen.lock().unwrap();
    assert!(seen.len() >= 3, "{seen:?}");
    let last = seen.last().unwrap();
    assert_eq!(
        (last.node.as_str(), last.node_index, last.nodes),
        ("x", 3, 3)
    );
    assert_eq!((last.scanned, last.moved), (sum.scanned, sum.moved));
    assert!(seen.windows(2).all(|w| w[0].scanned <= w[1].scanned));
    for p in seen.iter() {
        assert_secret_free(&p.to_string());
    }
    drop(seen);
    assert_eq!(dbsize(&x), 0);
    check_layout(&all, &[&y, &z], &snap);

    // A wrong password fails the run before anything moves, naming the node, not the secret.
    let mut bad = z.spec.clone();
    bad.password = Some("wrong-pw".into());
    let err = rebalance(RebalanceOptions {
        to: vec![y.spec.clone(), bad],
        ..opts(&[&y, &z], &[], 64)
    })
    .unwrap_err();
    assert!(err.contains("node z"), "{err}");
    assert_secret_free(&err);

    // A node that is down: the error names it.
    let down = NodeSpec::parse(&format!(
        "gone=redis://:{PASSWORD}@127.0.0.1:{}",
        free_port()
    ))
    .unwrap();
    let err = rebalance(RebalanceOptions {
        to: vec![y.spec.clone(), z.spec.clone(), down],
        ..opts(&[&y, &z], &[], 64)
    })
    .unwrap_err();
    assert!(err.contains("node gone"), "{err}");
    assert_secret_free(&err);
    check_layout(&all, &[&y, &z], &snap);
}

#[test]
fn replacing_a_node_moves_big_values_intact() {
    let servers = [Node::start(None), Node::start(None), Node::start(None)];
    let (a, b, c) = (
        member(&servers[0], "a", 0),
        member(&servers[1], "b", 0),
        member(&servers[2], "c", 0),
    );
    const N: usize = 400;
    populate(&[&a, &b], N);
    // Values past the small encodings (whose DUMP bytes depend on hash-table order), and a
    // large string: checked by content instead of by DUMP.
    let place = Placement::new(&specs(&[&a, &b]));
    let big: Vec<String> = (0..8).map(|i| format!("big:{i}")).collect();
    let blob = vec![b'x'; 3 << 20];
    for (i, k) in big.iter().enumerate() {
        let m = [&a, &b][place.owner(k.as_bytes())];
        let mut p = redis::pipe();
        match i % 4 {
            0 => p.set(k, &blob[..]).ignore(),
            1 => p.rpush(k, (0..5_000).collect::<Vec<i32>>()).ignore(),
            2 => p
                .sadd(k, (0..5_000).map(|j| format!("m{j}")).collect::<Vec<_>>())
                .ignore(),
            _ => p
                .hset_multiple(k, &(0..1_000).map(|j| (j, j * 2)).collect::<Vec<_>>())
                .ignore(),
        };
        let () = p.query(&mut conn(m)).unwrap();
    }
    let snap = snapshot(&[&a, &b], N);

    // a leaves, c joins: a's keys go to b or c, b's keys only to c.
    let sum = rebalance(opts(&[&a, &b], &[&b, &c], 32)).unwrap();
    assert!(sum.complete && sum.failed == 0 && sum.stray == 0, "{sum}");
    assert_eq!(sum.scanned, (N + big.len()) as u64, "{sum}");
    assert_eq!(dbsize(&a), 0);
    let new = Placement::new(&specs(&[&b, &c]));
    for (i, k) in big.iter().enumerate() {
        let mut cx = conn([&b, &c][new.owner(k.as_bytes())]);
        match i % 4 {
            0 => assert_eq!(
                redis::cmd("GET").arg(k).query::<Vec<u8>>(&mut cx).unwrap(),
                blob
            ),
            1 => {
                let l: Vec<i32> = redis::cmd("LRANGE")
                    .arg(k)
                    .arg(0)
                    .arg(-1)
                    .query(&mut cx)
                    .unwrap();
                assert_eq!(l, (0..5_000).collect::<Vec<_>>());
            }
            2 => assert_eq!(
                redis::cmd("SCARD").arg(k).query::<usize>(&mut cx).unwrap(),
                5_000
            ),
            _ => {
                let h: HashMap<i32, i32> = redis::cmd("HGETALL").arg(k).query(&mut cx).unwrap();
                assert!(h.len() == 1_000 && h.iter().all(|(f, v)| *v == f * 2));
            }
        }
    }
    // The small keys: on their owner only, same DUMP and TTL.
    check_layout_plus(&[&a, &b, &c], &[&b, &c], &snap, big.len());
}
