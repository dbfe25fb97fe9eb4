//! The sharding proxy in front of real nodes (DESIGN.md §7, SCENARIOS.md S9). Each test
//! starts its own three password-protected nodes on free loopback ports (killed on drop) and
//! an in-process `ProxyServer`, and drives it with redis-rs. Every test runs against a fleet
//! of redis-server 7 nodes, one of valkey-server 8.1 nodes and one of respite nodes: see the
//! `redis_nodes` / `valkey_nodes` / `respite_nodes` modules at the end.

mod common;
#[macro_use]
mod proxy_fleet;

use common::ServerProcess;
use proxy_fleet::*;
use redis::{Connection, Value};
use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

fn single_key_commands_and_placement(kind: NodeKind) {
    let f = Fleet::start(kind);
    let mut c = f.client();
    assert_eq!(q::<String>(&mut c, &["PING"]).unwrap(), "PONG");
    assert_eq!(q::<String>(&mut c, &["SET", "foo", "bar"]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "foo"]).unwrap(), "bar");
    assert_eq!(q::<i64>(&mut c, &["INCR", "counter"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["INCRBY", "counter", "-5"]).unwrap(), -4);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "counter", "100"]).unwrap(), 1);
    let ttl: i64 = q(&mut c, &["TTL", "counter"]).unwrap();
    assert!((1..=100).contains(&ttl));
    assert_eq!(
        q::<i64>(&mut c, &["HSET", "h", "f", "v", "g", "w"]).unwrap(),
        2
    );
    let h: HashMap<String, String> = q(&mut c, &["HGETALL", "h"]).unwrap();
    assert_eq!(h.len(), 2);
    // Binary values come back verbatim.
    let bin: Vec<u8> = vec![0, 0xff, 0x80, b'\r', b'\n'];
    redis::cmd("SET")
        .arg("bin")
        .arg(&bin)
        .query::<()>(&mut c)
        .unwrap();
    let got: Vec<u8> = redis::cmd("GET").arg("bin").query(&mut c).unwrap();
    assert_eq!(got, bin);
    // Large values cross in many reads both ways.
    let big: Vec<u8> = (0..8 << 20).map(|i| (i % 251) as u8).collect();
    redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query::<()>(&mut c)
        .unwrap();
    let got: Vec<u8> = redis::cmd("GET").arg("big").query(&mut c).unwrap();
    assert!(got == big);
    // Every key of one hash tag is on the node the placement names, and only there.
    let tagged = [
        "{vehicle:42}:checkpoint",
        "{vehicle:42}:prepared",
        "{vehicle:42}:committed-revision",
    ];
    for k in tagged {
        q::<()>(&mut c, &["SET", k, "x"]).unwrap();
    }
    let owner = f.owner("{vehicle:42}");
    assert_eq!(IDS[owner], "node-c"); // DESIGN.md §8 test vector
    for (i, n) in f.nodes.iter().enumerate() {
        let mut d = n.conn();
        for k in tagged {
            let on: i64 = q(&mut d, &["EXISTS", k]).unwrap();
            assert_eq!(on, (i == owner) as i64, "{k} on node {i}");
        }
    }
    // Unknown commands and refused ones keep the connection.
    let e = err_text(q::<()>(&mut c, &["NOSUCH", "x"]).unwrap_err());
    assert!(e.contains("unknown command 'NOSUCH'"), "{e}");
    assert!(q::<()>(&mut c, &["CONFIG", "GET", "x"]).is_err());
    assert!(q::<()>(&mut c, &["SELECT", "1"]).is_err());
    assert_eq!(q::<String>(&mut c, &["SELECT", "0"]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "foo"]).unwrap(), "bar");
    // Pipelined replies come back in request order.
    let mut p = redis::pipe();
    for i in 0..200 {
        p.cmd("SET").arg(format!("p:{i}")).arg(i).ignore();
        p.cmd("GET").arg(format!("p:{i}"));
    }
    let vals: Vec<i64> = p.query(&mut c).unwrap();
    assert_eq!(vals, (0..200).collect::<Vec<i64>>());
}

/// One pipeline mixing batched single-node commands with split, fleet-wide and local ones on
/// the same keys: every node still runs a client's commands in the order sent (the plain
/// ones travel per node and read batch, the rest must not overtake them) and the replies
/// come back in request order.
fn mixed_pipelines_keep_each_nodes_order(kind: NodeKind) {
    let f = Fleet::start(kind);
    let mut c = f.client();
    let keys: Vec<String> = (0..3).map(|n| f.key_on(n, "mix")).collect();
    let (a, b, cc) = (&keys[0], &keys[1], &keys[2]);
    let mut p = redis::pipe();
    p.cmd("SET").arg(a).arg(1);
    p.cmd("SET").arg(b).arg(2);
    p.cmd("MGET").arg(a).arg(b).arg(cc);
    p.cmd("INCR").arg(a);
    p.cmd("PING");
    p.cmd("SET").arg(cc).arg("x");
    p.cmd("DBSIZE");
    p.cmd("DEL").arg(a).arg(b);
    p.cmd("GET").arg(a);
    p.cmd("STRLEN").arg(cc);
    p.cmd("APPEND").arg(cc).arg("y");
    p.cmd("EXISTS").arg(a).arg(b).arg(cc);
    p.cmd("GET").arg(cc);
    let got: Vec<redis::Value> = p.query(&mut c).unwrap();
    let text = |v: &redis::Value| format!("{v:?}");
    assert_eq!(got.len(), 13);
    let s = |v: &str| Some(v.to_string());
    let mget: Vec<Option<String>> = redis::from_redis_value(got[2].clone()).unwrap();
    assert_eq!(mget, vec![s("1"), s("2"), None]);
    let int = |i: usize| redis::from_redis_value::<i64>(got[i].clone()).unwrap();
    assert_eq!(int(3), 2);
    assert_eq!(int(6), 3, "DBSIZE after the three SETs");
    assert_eq!(int(7), 2);
    assert!(matches!(got[8], redis::Value::Nil), "{}", text(&got[8]));
    assert_eq!(int(9), 1);
    assert_eq!(int(10), 2);
    assert_eq!(int(11), 1);
    assert_eq!(
        redis::from_redis_value::<String>(got[12].clone()).unwrap(),
        "xy"
    );
    // Many pipelined commands to every node, with a split command every so often.
    let counters = [a.clone(), b.clone(), f.key_on(2, "mix-n")];
    let mut p = redis::pipe();
    for i in 0..3000 {
        let k = &counters[i % 3];
        p.cmd("INCR").arg(k);
        if i % 100 == 99 {
            p.cmd("MGET").arg(a).arg(b);
        }
    }
    let got: Vec<redis::Value> = p.query(&mut c).unwrap();
    let mut want_a = 0;
    let mut want_b = 0;
    let mut at = 0;
    for i in 0..3000 {
        let n: i64 = redis::from_redis_value(got[at].clone()).unwrap();
        at += 1;
        match i % 3 {
            0 => {
                want_a += 1;
                assert_eq!(n, want_a);
            }
            1 => {
                want_b += 1;
                assert_eq!(n, want_b);
            }
            _ => {}
        }
        if i % 100 == 99 {
            let m: Vec<i64> = redis::from_redis_value(got[at].clone()).unwrap();
            at += 1;
            assert_eq!(m, vec![want_a, want_b], "MGET after command {i}");
        }
    }
    assert_eq!(at, got.len());
}

fn split_commands_merge_in_order(kind: NodeKind) {
    let f = Fleet::start(kind);
    let mut c = f.client();
    let keys: Vec<String> = (0..3).map(|n| f.key_on(n, "k")).collect();
    let (a, b, cc) = (&keys[0], &keys[1], &keys[2]);
    assert_eq!(
        q::<String>(&mut c, &["MSET", cc, "3", a, "1", b, "2"]).unwrap(),
        "OK"
    );
    let got: Vec<Option<String>> = q(&mut c, &["MGET", b, "missing", a, cc, a]).unwrap();
    let s = |v: &str| Some(v.to_string());
    assert_eq!(got, vec![s("2"), None, s("1"), s("3"), s("1")]);
    assert_eq!(
        q::<i64>(&mut c, &["EXISTS", a, b, cc, "missing", a]).unwrap(),
        4
    );
    assert_eq!(q::<i64>(&mut c, &["TOUCH", a, b]).unwrap(), 2);
    assert_eq!(q::<i64>(&mut c, &["DEL", a, b, "missing"]).unwrap(), 2);
    assert_eq!(q::<i64>(&mut c, &["UNLINK", cc, a]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 0);
    let e = err_text(q::<()>(&mut c, &["MSET", a, "1", b]).unwrap_err());
    assert!(e.contains("wrong number of arguments"), "{e}");
}

fn crossslot_refusals_write_nothing(kind: NodeKind) {
    let f = Fleet::start(kind);
    let mut c = f.client();
    let a = f.key_on(0, "x");
    let b = f.key_on(1, "x");
    q::<()>(&mut c, &["SADD", &a, "m"]).unwrap();
    for cmd in [
        vec!["RENAME", &a, &b],
        vec!["SUNIONSTORE", &b, &a],
        vec![
            "EVAL",
            "redis.call('set', KEYS[2], 'v') return 1",
            "2",
            &a,
            &b,
        ],
        vec!["LMOVE", &a, &b, "LEFT", "RIGHT"],
    ] {
        let e = err_text(q::<()>(&mut c, &cmd).unwrap_err());
        assert!(e.contains("CROSSSLOT"), "{cmd:?}: {e}");
    }
    // Nothing reached the nodes: b does not exist anywhere, a is intact.
    for n in &f.nodes {
        assert_eq!(q::<i64>(&mut n.conn(), &["EXISTS", &b]).unwrap(), 0);
    }
    assert_eq!(q::<i64>(&mut c, &["SCARD", &a]).unwrap(), 1);
    // Same-tag multi-key commands and scripts are forwarded.
    let (t1, t2) = ("{t}:1", "{t}:2");
    q::<()>(&mut c, &["SET", t1, "v"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["RENAME", t1, t2]).unwrap(), "OK");
    let v: String = q(
        &mut c,
        &["EVAL", "return redis.call('get', KEYS[1])", "1", t2],
    )
    .unwrap();
    assert_eq!(v, "v");
    // Keyless EVAL runs on the node owning "".
    assert_eq!(q::<i64>(&mut c, &["EVAL", "return 7", "0"]).unwrap(), 7);
}

fn scan_keys_dbsize_flushall_cover_the_fleet(kind: NodeKind) {
    let f = Fleet::start(kind);
    let mut c = f.client();
    let mut p = redis::pipe();
    for i in 0..10_000 {
        p.cmd("SET").arg(format!("user:{i}")).arg(i).ignore();
    }
    p.query::<()>(&mut c).unwrap();
    q::<()>(&mut c, &["SET", "other", "x"]).unwrap();
    // Each node holds a share.
    for n in &f.nodes {
        let size: i64 = q(&mut n.conn(), &["DBSIZE"]).unwrap();
        assert!(size > 2_000, "{size}");
    }
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 10_001);
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut cursor = "0".to_string();
    loop {
        let (next, keys): (String, Vec<String>) = q(
            &mut c,
            &["SCAN", &cursor, "MATCH", "user:*", "COUNT", "500"],
        )
        .unwrap();
        for k in keys {
            *seen.entry(k).or_default() += 1;
        }
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 10_000);
    assert!(seen.values().all(|&n| n == 1), "a key came back twice");
    let keys: Vec<String> = q(&mut c, &["KEYS", "user:1*"]).unwrap();
    assert_eq!(keys.len(), 1_111);
    assert!(q::<()>(&mut c, &["SCAN", "nope"]).is_err());
    assert_eq!(q::<String>(&mut c, &["FLUSHALL"]).unwrap(), "OK");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 0);
}

fn scripts_load_everywhere_and_survive_noscript(kind: NodeKind) {
    let f = Fleet::start(kind);
    let mut c = f.client();
    let body = "return redis.call('incr', KEYS[1])";
    let sha: String = q(&mut c, &["SCRIPT", "LOAD", body]).unwrap();
    for n in &f.nodes {
        let e: Vec<i64> = q(&mut n.conn(), &["SCRIPT", "EXISTS", &sha]).unwrap();
        assert_eq!(e, vec![1]);
    }
    let k = f.key_on(1, "s");
    assert_eq!(q::<i64>(&mut c, &["EVALSHA", &sha, "1", &k]).unwrap(), 1);
    // The node loses its scripts behind the proxy's back: EVALSHA still works.
    q::<()>(&mut f.nodes[1].conn(), &["SCRIPT", "FLUSH"]).unwrap();
    let e: Vec<i64> = q(&mut c, &["SCRIPT", "EXISTS", &sha, "0000"]).unwrap();
    assert_eq!(e, vec![0, 0]);
    assert_eq!(q::<i64>(&mut c, &["EVALSHA", &sha, "1", &k]).unwrap(), 2);
    // Bodies seen through EVAL count too.
    let body2 = "return 'two'";
    let sha2: String = q(&mut f.nodes[0].conn(), &["SCRIPT", "LOAD", body2]).unwrap();
    assert_eq!(q::<String>(&mut c, &["EVAL", body2, "0"]).unwrap(), "two");
    for n in &f.nodes {
        q::<()>(&mut n.conn(), &["SCRIPT", "FLUSH"]).unwrap();
    }
    assert_eq!(
        q::<String>(&mut c, &["EVALSHA", &sha2, "0"]).unwrap(),
        "two"
    );
    // redis-rs's Script (EVALSHA, then SCRIPT LOAD on NOSCRIPT).
    let script = redis::Script::new("return redis.call('get', KEYS[1])");
    let v: Option<String> = script.key(&k).invoke(&mut c).unwrap();
    assert_eq!(v.as_deref(), Some("2"));
    functions_on_every_node(&f, &mut c);
    // Unknown sha without a body: the node's NOSCRIPT passes through.
    let e = err_text(q::<()>(&mut c, &["EVALSHA", &"f".repeat(40), "0"]).unwrap_err());
    assert!(e.contains("NOSCRIPT"), "{e}");
}

/// FUNCTION LOAD/DELETE reach every node; FCALL goes by its keys.
fn functions_on_every_node(f: &Fleet, c: &mut Connection) {
    // Functions are loaded on every node; FCALL goes by its keys.
    let lib = "#!lua name=proxylib\nredis.register_function('myget', function(keys, args) return redis.call('GET', keys[1]) end)";
    assert_eq!(
        q::<String>(c, &["FUNCTION", "LOAD", lib]).unwrap(),
        "proxylib"
    );
    for n in 0..3 {
        let key = f.key_on(n, "fk");
        q::<()>(c, &["SET", &key, &format!("v{n}")]).unwrap();
        let v: String = q(c, &["FCALL", "myget", "1", &key]).unwrap();
        assert_eq!(v, format!("v{n}"));
    }
    let (a, b) = (f.key_on(0, "fk"), f.key_on(1, "fk"));
    let e = err_text(q::<()>(c, &["FCALL", "myget", "2", &a, &b]).unwrap_err());
    assert!(e.contains("CROSSSLOT"), "{e}");
    assert_eq!(
        q::<String>(c, &["FUNCTION", "DELETE", "proxylib"]).unwrap(),
        "OK"
    );
    for n in &f.nodes {
        let libs: Vec<Value> = q(&mut n.conn(), &["FUNCTION", "LIST"]).unwrap();
        assert!(libs.is_empty());
    }
}

/// The nodes' INFO `blocked_clients`, summed (asked directly, not through the proxy).
fn blocked_on_nodes(f: &Fleet) -> i64 {
    f.nodes
        .iter()
        .map(|n| {
            let info: String = q(&mut n.conn(), &["INFO", "clients"]).unwrap();
            common::info_field(&info, "blocked_clients").expect("blocked_clients in INFO")
        })
        .sum()
}

/// An XREAD(GROUP) reply: per stream, its (id, field/value list) entries.
type StreamRead = Vec<(String, Vec<(String, Vec<String>)>)>;

fn blocking_commands_do_not_stall_others(kind: NodeKind) {
    let f = Fleet::start(kind);
    let url = f.proxy.url();
    let mut c = f.client();
    q::<()>(
        &mut c,
        &["XGROUP", "CREATE", "jobs", "g", "0-0", "MKSTREAM"],
    )
    .unwrap();
    let spawn = |cmd: &[&str]| {
        let url = url.clone();
        let cmd: Vec<String> = cmd.iter().map(|a| a.to_string()).collect();
        std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let start = Instant::now();
            let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
            let v: Value = q(&mut c, &args).unwrap();
            (v, start.elapsed())
        })
    };
    // Timeouts far beyond the test: only the pushes below can wake these two.
    let woken = [
        spawn(&["BLPOP", "queue", "30"]),
        spawn(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "c1",
            "BLOCK",
            "30000",
            "STREAMS",
            "jobs",
            ">",
        ]),
    ];
    common::wait_until("both clients blocked on their nodes", || {
        blocked_on_nodes(&f) == 2
    });
    let short = spawn(&["BLPOP", "never", "0.3"]);
    // Other clients (and this one) are served while those two block: every SET is answered
    // while neither blocked client has its reply and the nodes still hold both blocked.
    for i in 0..50 {
        q::<()>(&mut c, &["SET", &format!("k{i}"), "v"]).unwrap();
    }
    assert!(
        woken.iter().all(|t| !t.is_finished()),
        "a blocked client was answered before the other writes"
    );
    assert!(
        blocked_on_nodes(&f) >= 2,
        "the blocked clients left their nodes"
    );
    q::<()>(&mut c, &["RPUSH", "queue", "job1"]).unwrap();
    q::<()>(&mut c, &["XADD", "jobs", "*", "payload", "one"]).unwrap();
    let [popped, read] = woken.map(|t| t.join().unwrap().0);
    // The pushes' data, not a timeout's nil: the pushes woke them.
    let popped: (String, String) = redis::from_redis_value(popped).unwrap();
    assert_eq!(popped, ("queue".into(), "job1".into()));
    let read: StreamRead = redis::from_redis_value(read).unwrap();
    assert_eq!(read.len(), 1, "{read:?}");
    assert_eq!(read[0].0, "jobs");
    assert_eq!(read[0].1.len(), 1, "{read:?}");
    assert_eq!(read[0].1[0].1, ["payload", "one"]);
    // The short one timed out on its own schedule (never before its timeout).
    let (v, took) = short.join().unwrap();
    assert_eq!(v, Value::Nil);
    assert!(took >= Duration::from_millis(250), "{took:?}");
}

fn transactions_on_one_tag(kind: NodeKind) {
    let f = Fleet::start(kind);
    let mut c = f.client();
    let (k1, k2) = ("{vehicle:7}:checkpoint", "{vehicle:7}:committed-revision");
    let (ok, rev): (i64, String) = redis::pipe()
        .atomic()
        .cmd("HSET")
        .arg(k1)
        .arg("f")
        .arg("v")
        .cmd("SET")
        .arg(k2)
        .arg("r1")
        .ignore()
        .cmd("GET")
        .arg(k2)
        .query(&mut c)
        .unwrap();
    assert_eq!((ok, rev.as_str()), (1, "r1"));
    // WATCH + MULTI/EXEC: a change by another client aborts the transaction.
    q::<()>(&mut c, &["WATCH", k2]).unwrap();
    let mut other = f.client();
    q::<()>(&mut other, &["SET", k2, "r2"]).unwrap();
    q::<()>(&mut c, &["MULTI"]).unwrap();
    q::<()>(&mut c, &["SET", k2, "mine"]).unwrap();
    let r: Value = q(&mut c, &["EXEC"]).unwrap();
    assert_eq!(r, Value::Nil);
    assert_eq!(q::<String>(&mut c, &["GET", k2]).unwrap(), "r2");
    // Keys on two nodes in one transaction: CROSSSLOT, then EXECABORT, nothing written.
    let a = f.key_on(0, "tx");
    let b = f.key_on(1, "tx");
    q::<()>(&mut c, &["MULTI"]).unwrap();
    q::<()>(&mut c, &["SET", &a, "1"]).unwrap();
    let e = err_text(q::<()>(&mut c, &["SET", &b, "1"]).unwrap_err());
    assert!(e.contains("CROSSSLOT"), "{e}");
    let e = err_text(q::<()>(&mut c, &["EXEC"]).unwrap_err());
    assert!(e.contains("EXECABORT"), "{e}");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", &a, &b]).unwrap(), 0);
    let e = err_text(q::<()>(&mut c, &["EXEC"]).unwrap_err());
    assert!(e.contains("EXEC without MULTI"), "{e}");
    q::<()>(&mut c, &["MULTI"]).unwrap();
    q::<()>(&mut c, &["SET", &a, "1"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["DISCARD"]).unwrap(), "OK");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", &a]).unwrap(), 0);
}

/// A numeric field of node `n`'s `INFO nodes` line, asked on `c` (a new connection would
/// show in `connected_clients` until the proxy sees it closed).
fn node_num(c: &mut Connection, n: usize, name: &str) -> u64 {
    let info: String = q(c, &["INFO", "nodes"]).unwrap();
    info_fields(&info, &format!("node{n}:"))[name]
        .parse()
        .unwrap()
}

fn a_dead_node_fails_only_its_keys_and_comes_back(kind: NodeKind) {
    let mut f = Fleet::start(kind);
    let mut c = f.client();
    let keys: Vec<String> = (0..3).map(|n| f.key_on(n, "d")).collect();
    for k in &keys {
        q::<()>(&mut c, &["SET", k, "v"]).unwrap();
    }
    f.nodes[1].kill();
    std::thread::sleep(Duration::from_millis(100));
    let e = err_text(q::<()>(&mut c, &["GET", &keys[1]]).unwrap_err());
    assert!(e.contains("node node-b is unavailable"), "{e}");
    assert!(!e.contains("s3cret"), "{e}");
    for i in [0, 2] {
        assert_eq!(q::<String>(&mut c, &["GET", &keys[i]]).unwrap(), "v");
    }
    // The failed GET is the node's transport error, not an error reply.
    assert!(node_num(&mut c, 1, "transport_errors") >= 1);
    assert_eq!(node_num(&mut c, 1, "error_replies"), 0);
    assert!(node_num(&mut c, 1, "failures") >= 1);
    for i in [0, 2] {
        assert_eq!(
            (
                node_num(&mut c, i, "transport_errors"),
                node_num(&mut c, i, "failures")
            ),
            (0, 0)
        );
    }
    // Fleet-wide commands name the node too; INFO shows it down without its password.
    let e = err_text(q::<()>(&mut c, &["DBSIZE"]).unwrap_err());
    assert!(e.contains("node-b"), "{e}");
    let info: String = q(&mut c, &["INFO", "nodes"]).unwrap();
    assert!(
        info.contains("id=node-b,") && info.contains("state=down"),
        "{info}"
    );
    assert!(!info.contains("s3cret"), "{info}");
    let all: String = q(&mut c, &["INFO"]).unwrap();
    for field in [
        "redis_version:",
        "connected_clients:1",
        "total_connections_received:",
    ] {
        assert!(all.contains(field), "{all}");
    }
    assert!(!all.contains("s3cret"), "{all}");
    // Back on the same port: works again without restarting the proxy (data is gone:
    // the node was not persistent).
    f.nodes[1].spawn();
    let until = Instant::now() + common::HANG_GUARD;
    loop {
        match q::<Option<String>>(&mut c, &["GET", &keys[1]]) {
            Ok(v) => {
                assert_eq!(v, None);
                break;
            }
            Err(e) => assert!(Instant::now() < until, "still failing: {e}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    q::<()>(&mut c, &["SET", &keys[1], "again"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["GET", &keys[1]]).unwrap(), "again");
    // The restart shows as reconnects of that node only.
    assert!(node_num(&mut c, 1, "reconnects") >= 1);
    assert_eq!(
        (
            node_num(&mut c, 0, "reconnects"),
            node_num(&mut c, 2, "reconnects")
        ),
        (0, 0)
    );
    let stats: String = q(&mut c, &["INFO", "stats"]).unwrap();
    let total = |name: &str| {
        stats
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .unwrap_or_else(|| panic!("no {name} in {stats}"))
            .parse::<u64>()
            .unwrap()
    };
    // Node 1's other shared connections may still be reconnecting: no exact total.
    assert!(total("total_node_reconnects") >= 1);
    assert!(total("total_node_transport_errors") >= 1);
}

fn resp3_clients_and_auth(kind: NodeKind) {
    let f = Fleet::start_with(kind, |cfg| cfg.requirepass = Some("proxy-pw".into()));
    let mut anon = f.client();
    let e = err_text(q::<()>(&mut anon, &["GET", "x"]).unwrap_err());
    assert!(e.contains("NOAUTH"), "{e}");
    assert!(q::<()>(&mut anon, &["AUTH", "wrong"]).is_err());
    assert_eq!(q::<String>(&mut anon, &["AUTH", "proxy-pw"]).unwrap(), "OK");
    assert_eq!(q::<Option<String>>(&mut anon, &["GET", "x"]).unwrap(), None);

    let url = format!("redis://:proxy-pw@{}/?protocol=resp3", f.proxy.addr());
    let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
    q::<()>(&mut c, &["HSET", "h", "a", "1", "b", "2"]).unwrap();
    let v: Value = q(&mut c, &["HGETALL", "h"]).unwrap();
    assert!(matches!(&v, Value::Map(m) if m.len() == 2), "{v:?}");
    let v: Value = q(&mut c, &["GET", "missing"]).unwrap();
    assert_eq!(v, Value::Nil);
    q::<()>(&mut c, &["ZADD", "z", "1.5", "m"]).unwrap();
    let v: Value = q(&mut c, &["ZSCORE", "z", "m"]).unwrap();
    assert_eq!(v, Value::Double(1.5));
    // MGET answers nil for keys that do not hold strings.
    let got: Vec<Option<String>> = q(&mut c, &["MGET", "h", "missing"]).unwrap();
    assert_eq!(got, vec![None, None]);
}

fn subscriptions_follow_channel_owners(kind: NodeKind) {
    let f = Fleet::start(kind);
    let mut c = f.client();
    let ch_a = f.key_on(0, "chan");
    let ch_b = f.key_on(1, "chan");
    let mut sub = f.raw();
    sub.send(&["SUBSCRIBE", &ch_a, &ch_b]);
    let l = ch_a.len();
    assert_eq!(sub.frame(), format!("*3 $9 subscribe ${l} {ch_a} :1 "));
    assert_eq!(sub.frame(), format!("*3 $9 subscribe ${l} {ch_b} :2 "));
    sub.send(&["PSUBSCRIBE", "news.*"]);
    assert_eq!(sub.frame(), "*3 $10 psubscribe $6 news.* :3 ");
    sub.send(&["GET", "x"]);
    let e = sub.frame();
    assert!(e.starts_with("-ERR Can't execute 'get'"), "{e}");
    sub.send(&["PING"]);
    assert_eq!(sub.frame(), "*2 $4 pong $0  ");
    // Published through the proxy: each lands on the channel's owner.
    assert_eq!(q::<i64>(&mut c, &["PUBLISH", &ch_b, "hello"]).unwrap(), 1);
    assert_eq!(sub.frame(), format!("*3 $7 message ${l} {ch_b} $5 hello "));
    assert_eq!(q::<i64>(&mut c, &["PUBLISH", "news.1", "x"]).unwrap(), 1);
    assert_eq!(sub.frame(), "*4 $8 pmessage $6 news.* $6 news.1 $1 x ");
    sub.send(&["UNSUBSCRIBE"]);
    let (first, second) = (sub.frame(), sub.frame());
    assert!(
        first.ends_with(":2 ") && second.ends_with(":1 "),
        "{first} / {second}"
    );
    let mut names = [first, second];
    names.sort();
    assert_eq!(
        names
            .iter()
            .map(|f| f.split(' ').nth(4).unwrap())
            .collect::<Vec<_>>(),
        {
            let mut v = vec![ch_a.as_str(), ch_b.as_str()];
            v.sort();
            v
        }
    );
    sub.send(&["PUNSUBSCRIBE"]);
    assert_eq!(sub.frame(), "*3 $12 punsubscribe $6 news.* :0 ");
    sub.send(&["SET", "x", "1"]);
    assert_eq!(sub.frame(), "+OK ");
    assert_eq!(q::<i64>(&mut c, &["PUBLISH", &ch_a, "nobody"]).unwrap(), 0);
    // RESP3: pushes, and ordinary commands meanwhile.
    let mut sub3 = f.raw();
    sub3.send(&["HELLO", "3"]);
    assert!(sub3.frame().starts_with("%7 "));
    sub3.send(&["SSUBSCRIBE", &ch_a]);
    assert_eq!(sub3.frame(), format!(">3 $10 ssubscribe ${l} {ch_a} :1 "));
    sub3.send(&["GET", "x"]);
    assert_eq!(sub3.frame(), "$1 1 ");
    assert_eq!(q::<i64>(&mut c, &["SPUBLISH", &ch_a, "m"]).unwrap(), 1);
    assert_eq!(sub3.frame(), format!(">3 $8 smessage ${l} {ch_a} $1 m "));
}

fn a_hung_node_times_out_and_a_late_node_joins(kind: NodeKind) {
    let mut f = Fleet::start_with(kind, |cfg| cfg.command_timeout = Duration::from_millis(300));
    let mut c = f.client();
    let keys: Vec<String> = (0..3).map(|n| f.key_on(n, "h")).collect();
    for k in &keys {
        q::<()>(&mut c, &["SET", k, "v"]).unwrap();
    }
    // A frozen node: its requests time out (naming it), the others keep answering.
    let pid = f.nodes[2].pid();
    let signal = |sig: &str| f.nodes[2].process.signal(sig);
    signal("-STOP");
    // SIGSTOP lands asynchronously: wait until every thread of the node is stopped.
    let stopped = || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .all(|t| {
                let stat = std::fs::read_to_string(t.unwrap().path().join("stat")).unwrap();
                let state = stat.rsplit(')').next().unwrap().trim_start();
                state.starts_with('T') || state.starts_with('t')
            })
    };
    let until = Instant::now() + common::HANG_GUARD;
    while !stopped() {
        assert!(Instant::now() < until, "node-c did not stop");
        std::thread::sleep(Duration::from_millis(5));
    }
    // A proxy that never timed out would leave this read waiting: the hang guard turns
    // that into an error that does not name the node.
    c.set_read_timeout(Some(common::HANG_GUARD)).unwrap();
    let e = err_text(q::<()>(&mut c, &["GET", &keys[2]]).unwrap_err());
    assert!(e.contains("node node-c is unavailable"), "{e}");
    // The node is still frozen, so it cannot have answered: the error is the proxy's own
    // command timeout.
    assert!(stopped(), "node-c ran again before the error came back");
    c.set_read_timeout(None).unwrap();
    assert_eq!(q::<String>(&mut c, &["GET", &keys[0]]).unwrap(), "v");
    signal("-CONT");
    let until = Instant::now() + common::HANG_GUARD;
    while q::<String>(&mut c, &["GET", &keys[2]]).is_err() {
        assert!(Instant::now() < until, "node-c did not come back");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A node that is down when a proxy starts: its keys fail until it comes up. (The second
    // fleet's own nodes go unused: its proxy is pointed at the first fleet's.)
    f.nodes[1].kill();
    let late = Fleet::start_with(kind, |cfg| {
        cfg.nodes = f.nodes.iter().zip(IDS).map(|(n, id)| n.spec(id)).collect();
    });
    let mut lc = late.client();
    let e = err_text(q::<()>(&mut lc, &["GET", &keys[1]]).unwrap_err());
    assert!(e.contains("node-b"), "{e}");
    f.nodes[1].spawn();
    let until = Instant::now() + common::HANG_GUARD;
    while q::<Option<String>>(&mut lc, &["GET", &keys[1]]).is_err() {
        assert!(Instant::now() < until, "node-b did not come back");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// S2 and S3 through the proxy with redis-rs's multiplexed async connections (many
/// requests in flight per connection), with the scripts from lua/.
fn rate_limit_and_fencing_scripts_under_concurrency(kind: NodeKind) {
    let f = Fleet::start(kind);
    let url = f.proxy.url();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let client = redis::Client::open(url).unwrap();
        let mut cons = Vec::new();
        for _ in 0..8 {
            cons.push(client.get_multiplexed_async_connection().await.unwrap());
        }
        // S2: 128 concurrent checks against a user limit of 32 admit exactly 32; two API
        // keys of one user share its limit.
        let limiter = redis::Script::new(include_str!("../lua/ratelimit_fixed_window.lua"));
        let mut tasks = Vec::new();
        for i in 0..128 {
            let mut con = cons[i % 8].clone();
            let limiter = limiter.clone();
            tasks.push(tokio::spawn(async move {
                let api = if i % 2 == 0 { "A" } else { "B" };
                let r: Vec<Value> = limiter
                    .key("{user:7}:w1:user")
                    .key(format!("{{user:7}}:w1:key:{api}"))
                    .arg(32)
                    .arg(1000)
                    .arg(60_000)
                    .invoke_async(&mut con)
                    .await
                    .unwrap();
                r[0] == Value::Int(1)
            }));
        }
        let mut admitted = 0;
        for t in tasks {
            admitted += t.await.unwrap() as usize;
        }
        assert_eq!(admitted, 32);
        // S3: every acquisition's fencing token is larger than all earlier ones.
        let acquire = redis::Script::new(include_str!("../lua/lock_acquire.lua"));
        let release = redis::Script::new(include_str!("../lua/lock_release.lua"));
        let mut last = 0i64;
        let mut con = cons[0].clone();
        for round in 0..20 {
            let owner = format!("owner-{round}");
            let token: Option<i64> = acquire
                .key("{lock:x}")
                .key("{lock:x}:fence")
                .arg(&owner)
                .arg(10_000)
                .invoke_async(&mut con)
                .await
                .unwrap();
            let token = token.expect("the lock is free");
            assert!(token > last);
            last = token;
            let released: i64 = release
                .key("{lock:x}")
                .arg(&owner)
                .arg(token)
                .invoke_async(&mut con)
                .await
                .unwrap();
            assert_eq!(released, 1);
        }
    });
}

fn a_client_gone_while_blocked_leaves_no_ghost_and_bad_input_is_contained(kind: NodeKind) {
    let f = Fleet::start(kind);
    let mut c = f.client();
    let mut blocked = f.raw();
    blocked.send(&["BLPOP", "ghost", "0"]);
    common::wait_until("the BLPOP blocked on its node", || {
        blocked_on_nodes(&f) == 1
    });
    drop(blocked);
    // The proxy drops the abandoned BLPOP's node connection, so the node unblocks it.
    common::wait_until("the abandoned BLPOP gone from its node", || {
        blocked_on_nodes(&f) == 0
    });
    // The abandoned BLPOP must not swallow this element.
    q::<()>(&mut c, &["RPUSH", "ghost", "x"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["LLEN", "ghost"]).unwrap(), 1);
    // A protocol error gets Redis's error and closes only that connection.
    let mut bad = f.raw();
    {
        use std::io::Write;
        bad.s.write_all(b"*1\r\n+PING\r\n").unwrap();
    }
    assert_eq!(bad.frame(), "-ERR Protocol error: expected '$', got '+' ");
    // Inline commands work too.
    let mut inline = f.raw();
    {
        use std::io::Write;
        inline.s.write_all(b"PING\r\nECHO hi\r\n").unwrap();
    }
    assert_eq!(inline.frame(), "+PONG ");
    assert_eq!(inline.frame(), "$2 hi ");
    assert_eq!(q::<String>(&mut c, &["PING"]).unwrap(), "PONG");
    // SCAN passes TYPE through.
    q::<()>(&mut c, &["SET", "s1", "v"]).unwrap();
    let mut cursor = "0".to_string();
    let mut lists = Vec::new();
    loop {
        let (next, keys): (String, Vec<String>) =
            q(&mut c, &["SCAN", &cursor, "TYPE", "list"]).unwrap();
        lists.extend(keys);
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(lists, vec!["ghost".to_string()]);
}

/// `key=value` fields of the INFO line starting with `prefix`.
fn info_fields(info: &str, prefix: &str) -> HashMap<String, String> {
    let line = info
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} in {info}"));
    line[prefix.len()..]
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn node_stats_in_info(kind: NodeKind) {
    let f = Fleet::start(kind);
    let mut c = f.client();
    let keys: Vec<String> = (0..3).map(|n| f.key_on(n, "st")).collect();
    for _ in 0..20 {
        for k in &keys {
            q::<()>(&mut c, &["SET", k, "v"]).unwrap();
            q::<String>(&mut c, &["GET", k]).unwrap();
        }
    }
    // A node error (not an integer) counts as an error of that node only.
    assert!(q::<i64>(&mut c, &["INCR", &keys[1]]).is_err());
    let info: String = q(&mut c, &["INFO", "nodes"]).unwrap();
    assert!(!info.contains("# Stats"), "{info}");
    for (i, id) in IDS.iter().enumerate() {
        let n = info_fields(&info, &format!("node{i}:"));
        let num = |k: &str| n[k].parse::<u64>().unwrap();
        assert_eq!(n["id"], *id, "{info}");
        assert_eq!(n["state"], "up", "{info}");
        assert!(num("requests") >= 40, "{info}");
        assert_eq!(num("errors"), (i == 1) as u64, "{info}");
        assert!(num("p50_us") > 0, "{info}");
        assert!(num("p50_us") <= num("p99_us") && num("p99_us") <= num("p999_us"));
        assert!(num("p999_us") < 3_000_000, "{info}");
        assert_eq!(num("shared_up"), num("shared"), "{info}");
        assert_eq!(num("dedicated"), 0, "{info}");
        assert_eq!(num("failures"), 0, "{info}");
        assert_eq!(num("reconnects"), 0, "{info}");
        // The INCR's error is a reply of the node, not a transport failure.
        assert_eq!(num("error_replies"), (i == 1) as u64, "{info}");
        assert_eq!(num("transport_errors"), 0, "{info}");
        // Every reply came: nothing is outstanding.
        assert_eq!(num("in_flight"), 0, "{info}");
    }
    // Per command, as Redis's INFO latencystats; per node the same. Neither is in the
    // default INFO, as in Redis.
    let lat: String = q(&mut c, &["INFO", "latencystats", "nodelatencystats"]).unwrap();
    let mut sections = lat.split("\r\n\r\n");
    let (cmds, nodes) = (sections.next().unwrap(), sections.next().unwrap());
    assert!(cmds.starts_with("# Latencystats\r\n"), "{lat}");
    assert!(nodes.starts_with("# Nodelatencystats\r\n"), "{lat}");
    let percentiles = |text: &str, name: &str| -> [f64; 3] {
        let f = info_fields(text, &format!("latency_percentiles_usec_{name}:"));
        assert_eq!(f.len(), 3, "{text}");
        let v = ["p50", "p99", "p99.9"].map(|p| {
            let v = &f[p];
            // Redis prints microseconds with three decimals.
            assert!(
                v.split_once('.').is_some_and(|(_, d)| d.len() == 3),
                "{text}"
            );
            v.parse::<f64>().unwrap()
        });
        assert!(v[0] > 0.0 && v[0] <= v[1] && v[1] <= v[2], "{text}");
        v
    };
    for cmd in ["set", "get", "incr"] {
        percentiles(cmds, cmd);
    }
    assert!(!cmds.contains("_echo:"), "{cmds}");
    for id in IDS {
        percentiles(nodes, id);
    }
    let default: String = q(&mut c, &["INFO"]).unwrap();
    assert!(!default.contains("atencystats"), "{default}");
    let everything: String = q(&mut c, &["INFO", "everything"]).unwrap();
    assert!(everything.contains("# Latencystats\r\nlatency_percentiles_usec_"));
    assert!(everything.contains("# Nodelatencystats\r\nlatency_percentiles_usec_"));
    let stats: String = q(&mut c, &["INFO", "stats"]).unwrap();
    assert!(!stats.contains("# Nodes"), "{stats}");
    let total = stats
        .lines()
        .find_map(|l| l.strip_prefix("total_node_requests:"))
        .unwrap();
    assert!(total.trim().parse::<u64>().unwrap() >= 120, "{stats}");
    assert!(stats.contains("total_node_errors:1\r\n"), "{stats}");
    for id in IDS {
        let n = info_fields(&stats, &format!("node_latency_{id}:"));
        assert!(n["samples"].parse::<u64>().unwrap() >= 40, "{stats}");
        assert!(n["p99_us"].parse::<u64>().unwrap() > 0, "{stats}");
    }
    // A dedicated connection held by a blocked client shows in the node's state.
    let mut blocked = f.client();
    let k = keys[2].clone() + "-list";
    let k2 = k.clone();
    let t = std::thread::spawn(move || {
        // Far beyond the test: only the RPUSH below can wake it.
        q::<Option<(String, String)>>(&mut blocked, &["BLPOP", &k2, "30"]).unwrap()
    });
    let owner = f.owner(&k);
    let until = Instant::now() + common::HANG_GUARD;
    loop {
        let info: String = q(&mut c, &["INFO", "nodes"]).unwrap();
        if info_fields(&info, &format!("node{owner}:"))["dedicated"] == "1" {
            break;
        }
        assert!(Instant::now() < until, "{info}");
        std::thread::sleep(Duration::from_millis(10));
    }
    q::<()>(&mut c, &["RPUSH", &k, "x"]).unwrap();
    assert_eq!(t.join().unwrap(), Some((k, "x".to_string())));
}

/// An HTTP GET of `path` on `addr`: (status line, headers, body).
fn http_get(addr: std::net::SocketAddr, path: &str) -> (String, String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(common::HANG_GUARD)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: test\r\nAccept: */*\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    let len = headers
        .lines()
        .find_map(|h| h.strip_prefix("Content-Length: "))
        .unwrap();
    assert_eq!(len.parse::<usize>().unwrap(), body.len(), "{headers}");
    (status.into(), headers.into(), body.into())
}

type Labels = Vec<(String, String)>;

/// One sample of a Prometheus text exposition.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: Labels,
    value: f64,
}

impl Sample {
    fn label(&self, k: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses (and checks) the Prometheus text format 0.0.4: HELP/TYPE lines, then samples
/// `name{label="value",…} number`; every sample belongs to a family whose TYPE came
/// before it; histograms' buckets are cumulative and end in `+Inf` equal to `_count`.
fn parse_prometheus(text: &str) -> Vec<Sample> {
    let is_name = |n: &str| {
        !n.is_empty()
            && !n.starts_with(|c: char| c.is_ascii_digit())
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let mut types: HashMap<String, String> = HashMap::new();
    let mut samples = Vec::new();
    assert!(text.ends_with('\n'), "{text}");
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut w = rest.splitn(3, ' ');
            let (kind, name, arg) = (w.next().unwrap(), w.next().unwrap(), w.next());
            assert!(is_name(name), "{line}");
            match kind {
                "HELP" => assert!(arg.is_some_and(|h| !h.is_empty()), "{line}"),
                "TYPE" => {
                    let t = arg.unwrap();
                    assert!(
                        ["counter", "gauge", "histogram", "summary", "untyped"].contains(&t),
                        "{line}"
                    );
                    assert!(types.insert(name.into(), t.into()).is_none(), "{line}");
                }
                _ => panic!("{line}"),
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("{line}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series, Vec::new()),
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').unwrap_or_else(|| panic!("{line}"));
                let labels = body
                    .split("\",")
                    .map(|kv| {
                        let (k, v) = kv.split_once("=\"").unwrap_or_else(|| panic!("{line}"));
                        assert!(is_name(k), "{line}");
                        (k.to_string(), v.trim_end_matches('"').to_string())
                    })
                    .collect();
                (name, labels)
            }
        };
        assert!(is_name(name), "{line}");
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| types.get(*f).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(name);
        let t = types
            .get(family)
            .unwrap_or_else(|| panic!("no TYPE for {line}"));
        if t == "counter" {
            assert!(name.ends_with("_total") && value >= 0.0, "{line}");
        }
        samples.push(Sample {
            name: name.into(),
            labels,
            value,
        });
    }
    // Histograms: per series, cumulative buckets ending in +Inf = _count.
    for (family, _) in types.iter().filter(|(_, t)| *t == "histogram") {
        let bucket = format!("{family}_bucket");
        // Labels without `le` → (le, cumulative count) in order.
        let mut series: HashMap<Labels, Vec<(f64, f64)>> = HashMap::new();
        for s in samples.iter().filter(|s| s.name == bucket) {
            let le: f64 = match s.label("le").unwrap() {
                "+Inf" => f64::INFINITY,
                v => v.parse().unwrap(),
            };
            let key = s
                .labels
                .iter()
                .filter(|(k, _)| k != "le")
                .cloned()
                .collect();
            series.entry(key).or_default().push((le, s.value));
        }
        for (key, buckets) in series {
            assert!(
                buckets
                    .windows(2)
                    .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
                "{family} {key:?}: {buckets:?}"
            );
            let (last_le, last) = *buckets.last().unwrap();
            assert_eq!(last_le, f64::INFINITY);
            let count = samples
                .iter()
                .find(|s| s.name == format!("{family}_count") && s.labels == key)
                .unwrap();
            assert_eq!(count.value, last, "{family} {key:?}");
        }
    }
    samples
}

/// `--metrics-port`: Prometheus text on GET /metrics with the proxy's counters, per
/// command and per node latency histograms and node counters, moving with the traffic;
/// other paths are 404.
#[test]
fn metrics_endpoint_serves_prometheus_text() {
    let f = Fleet::start_with(NodeKind::Redis, |cfg| cfg.metrics_port = Some(0));
    let addr = f.proxy.metrics_addr().unwrap();
    let mut c = f.client();
    let keys: Vec<String> = (0..3).map(|n| f.key_on(n, "m")).collect();
    for k in &keys {
        q::<()>(&mut c, &["SET", k, "v"]).unwrap();
        q::<String>(&mut c, &["GET", k]).unwrap();
    }
    assert!(q::<i64>(&mut c, &["INCR", &keys[1]]).is_err());
    let (status, headers, body) = http_get(addr, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert!(
        headers.contains("Content-Type: text/plain; version=0.0.4"),
        "{headers}"
    );
    let samples = parse_prometheus(&body);
    let value = |name: &str, labels: &[(&str, &str)]| -> f64 {
        samples
            .iter()
            .find(|s| s.name == name && labels.iter().all(|(k, v)| s.label(k) == Some(*v)))
            .unwrap_or_else(|| panic!("no {name} {labels:?} in {body}"))
            .value
    };
    assert!(value("respite_proxy_commands_processed_total", &[]) >= 7.0);
    assert_eq!(value("respite_proxy_connected_clients", &[]), 1.0);
    assert!(value("respite_proxy_connections_received_total", &[]) >= 1.0);
    assert_eq!(value("respite_proxy_rejected_connections_total", &[]), 0.0);
    for cmd in ["get", "set"] {
        let count = value(
            "respite_proxy_command_latency_seconds_count",
            &[("cmd", cmd)],
        );
        assert_eq!(count, 3.0, "{cmd}");
        assert!(value("respite_proxy_command_latency_seconds_sum", &[("cmd", cmd)]) > 0.0);
        assert_eq!(
            value(
                "respite_proxy_command_latency_seconds_bucket",
                &[("cmd", cmd), ("le", "+Inf")]
            ),
            3.0
        );
    }
    for (i, id) in IDS.iter().enumerate() {
        let node = [("node", *id)];
        assert!(value("respite_proxy_node_requests_total", &node) >= 2.0);
        assert_eq!(
            value("respite_proxy_node_error_replies_total", &node),
            (i == 1) as u8 as f64
        );
        assert_eq!(
            value("respite_proxy_node_transport_errors_total", &node),
            0.0
        );
        assert_eq!(
            value("respite_proxy_node_connection_failures_total", &node),
            0.0
        );
        assert_eq!(value("respite_proxy_node_reconnects_total", &node), 0.0);
        assert_eq!(value("respite_proxy_node_in_flight_requests", &node), 0.0);
        assert_eq!(
            value("respite_proxy_node_dedicated_connections", &node),
            0.0
        );
        assert_eq!(value("respite_proxy_node_up", &node), 1.0);
        assert!(value("respite_proxy_node_latency_seconds_count", &node) >= 2.0);
    }
    // Counters move between scrapes. A queued command has no latency of its own (as in
    // Redis, where it runs at EXEC): SET stays at 3.
    for _ in 0..5 {
        q::<String>(&mut c, &["GET", &keys[0]]).unwrap();
    }
    let mut tx = redis::pipe();
    tx.atomic().cmd("SET").arg(&keys[0]).arg("w");
    let () = tx.query(&mut c).unwrap();
    let (_, _, again) = http_get(addr, "/metrics?x=1");
    let again = parse_prometheus(&again);
    let count = |cmd: &str| {
        again
            .iter()
            .find(|s| {
                s.name == "respite_proxy_command_latency_seconds_count"
                    && s.label("cmd") == Some(cmd)
            })
            .map(|s| s.value)
    };
    assert_eq!(
        ["get", "set", "multi", "exec"].map(count),
        [Some(8.0), Some(3.0), Some(1.0), Some(1.0)]
    );
    let (status, _, _) = http_get(addr, "/");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
}

/// The Prometheus project's own parser (Python `prometheus_client`) reads `/metrics`: every
/// family with its type and samples, as a scraper would.
#[test]
fn metrics_text_parses_with_the_prometheus_python_client() {
    let f = Fleet::start_with(NodeKind::Redis, |cfg| cfg.metrics_port = Some(0));
    let mut c = f.client();
    let k = f.key_on(2, "py");
    q::<()>(&mut c, &["SET", &k, "v"]).unwrap();
    q::<String>(&mut c, &["GET", &k]).unwrap();
    let (_, _, body) = http_get(f.proxy.metrics_addr().unwrap(), "/metrics");
    let script = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families
for fam in text_string_to_metric_families(sys.stdin.read()):
    for s in fam.samples:
        labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
        print(fam.type, fam.name, s.name, labels, float(s.value))
"#;
    let mut child = Command::new(common::python_with("prometheus_client"))
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}\n{body}");
    let has = |line: &str| stdout.lines().any(|l| l == line);
    for line in [
        "gauge respite_proxy_connected_clients respite_proxy_connected_clients  1.0",
        "histogram respite_proxy_command_latency_seconds respite_proxy_command_latency_seconds_count cmd=get 1.0",
        "histogram respite_proxy_command_latency_seconds respite_proxy_command_latency_seconds_bucket cmd=set,le=+Inf 1.0",
        "counter respite_proxy_node_requests respite_proxy_node_requests_total node=node-c 2.0",
        "counter respite_proxy_node_reconnects respite_proxy_node_reconnects_total node=node-a 0.0",
        "gauge respite_proxy_node_in_flight_requests respite_proxy_node_in_flight_requests node=node-b 0.0",
        "gauge respite_proxy_node_up respite_proxy_node_up node=node-a 1.0",
    ] {
        assert!(has(line), "no {line:?} in\n{stdout}");
    }
    for fam in [
        "counter respite_proxy_commands_processed ",
        "counter respite_proxy_connections_received ",
        "counter respite_proxy_rejected_connections ",
        "counter respite_proxy_node_error_replies ",
        "counter respite_proxy_node_transport_errors ",
        "counter respite_proxy_node_connection_failures ",
        "gauge respite_proxy_node_dedicated_connections ",
        "histogram respite_proxy_node_latency_seconds ",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(fam)),
            "no {fam} in\n{stdout}"
        );
    }
}

/// `respite proxy --config FILE` (the real binary): nodes and password from the file, the
/// port from a flag that overrides the file's; a bad file fails without echoing secrets.
#[test]
fn the_proxy_binary_reads_a_config_file() {
    let f = Fleet::start(NodeKind::Redis);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("proxy.conf");
    let metrics_port = common::free_port();
    let mut text = format!(
        "# test fleet\nport 7999\nbind 127.0.0.1\nrequirepass \"proxy pw\"\nmetrics-port {metrics_port}\n"
    );
    for (n, id) in f.nodes.iter().zip(IDS) {
        text.push_str(&format!(
            "node {id} redis://:{}@127.0.0.1:{}  # {id}\n",
            n.password, n.port
        ));
    }
    std::fs::write(&path, text).unwrap();
    let mut proxy = ServerProcess::respite(&["proxy", "--config", path.to_str().unwrap()]);
    let port = proxy.port;
    let run = || -> redis::RedisResult<()> {
        let mut c = redis::Client::open(format!("redis://:proxy%20pw@127.0.0.1:{port}"))?
            .get_connection()?;
        for n in 0..3 {
            let k = f.key_on(n, "cfg");
            q::<()>(&mut c, &["SET", &k, "v"])?;
            let direct: Option<String> = q(&mut f.nodes[n].conn(), &["GET", &k])?;
            assert_eq!(direct.as_deref(), Some("v"));
        }
        // The file's metrics-port serves /metrics.
        let (status, _, body) = http_get(([127, 0, 0, 1], metrics_port).into(), "/metrics");
        assert_eq!(status, "HTTP/1.1 200 OK");
        let sets = parse_prometheus(&body)
            .into_iter()
            .find(|s| {
                s.name == "respite_proxy_command_latency_seconds_count"
                    && s.label("cmd") == Some("set")
            })
            .map(|s| s.value);
        assert_eq!(sets, Some(3.0), "{body}");
        Ok(())
    };
    let result = run();
    proxy.kill();
    result.unwrap();
    // A bad file: exit status 1, the line named, no password.
    std::fs::write(
        &path,
        "port 1\nnode node-a redis://:s3cret-0@127.0.0.1:notaport\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_respite"))
        .args(["proxy", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
}

mod redis_nodes {
    for_kinds!(Redis:
        single_key_commands_and_placement,
        split_commands_merge_in_order,
        mixed_pipelines_keep_each_nodes_order,
        crossslot_refusals_write_nothing,
        scan_keys_dbsize_flushall_cover_the_fleet,
        scripts_load_everywhere_and_survive_noscript,
        blocking_commands_do_not_stall_others,
        transactions_on_one_tag,
        a_dead_node_fails_only_its_keys_and_comes_back,
        resp3_clients_and_auth,
        subscriptions_follow_channel_owners,
        a_hung_node_times_out_and_a_late_node_joins,
        rate_limit_and_fencing_scripts_under_concurrency,
        a_client_gone_while_blocked_leaves_no_ghost_and_bad_input_is_contained,
        node_stats_in_info,
    );
}

mod valkey_nodes {
    for_kinds!(Valkey:
        single_key_commands_and_placement,
        split_commands_merge_in_order,
        mixed_pipelines_keep_each_nodes_order,
        crossslot_refusals_write_nothing,
        scan_keys_dbsize_flushall_cover_the_fleet,
        scripts_load_everywhere_and_survive_noscript,
        blocking_commands_do_not_stall_others,
        transactions_on_one_tag,
        a_dead_node_fails_only_its_keys_and_comes_back,
        resp3_clients_and_auth,
        subscriptions_follow_channel_owners,
        a_hung_node_times_out_and_a_late_node_joins,
        rate_limit_and_fencing_scripts_under_concurrency,
        a_client_gone_while_blocked_leaves_no_ghost_and_bad_input_is_contained,
        node_stats_in_info,
    );
}

mod respite_nodes {
    for_kinds!(Respite:
        single_key_commands_and_placement,
        split_commands_merge_in_order,
        mixed_pipelines_keep_each_nodes_order,
        crossslot_refusals_write_nothing,
        scan_keys_dbsize_flushall_cover_the_fleet,
        scripts_load_everywhere_and_survive_noscript,
        blocking_commands_do_not_stall_others,
        transactions_on_one_tag,
        a_dead_node_fails_only_its_keys_and_comes_back,
        resp3_clients_and_auth,
        subscriptions_follow_channel_owners,
        a_hung_node_times_out_and_a_late_node_joins,
        rate_limit_and_fencing_scripts_under_concurrency,
        a_client_gone_while_blocked_leaves_no_ghost_and_bad_input_is_contained,
        node_stats_in_info,
    );
}
