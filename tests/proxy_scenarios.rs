//! SCENARIOS.md S1–S6 through `respite proxy` (S9) with redis-rs, against fleets of three
//! redis-server 7, three valkey-server 8.1 and three respite nodes. Keys of one hash tag are
//! checked directly on the node the placement names.

mod common;
use common::s6::{self, checkpoint, Group};
#[macro_use]
mod proxy_fleet;

use common::lua_script;
use common::values::{any_text as text, int_or_text as int};
use proxy_fleet::*;
use redis::{Connection, Value};
use std::time::{Duration, Instant};

/// Stream entries: (id, field/value list).
type Entries = Vec<(String, Vec<String>)>;
/// An XREADGROUP reply: per stream, its entries (nil when nothing came).
type Read = Option<Vec<(String, Entries)>>;

/// Which nodes hold `key` (asked directly, not through the proxy).
fn holders(f: &Fleet, key: &str) -> Vec<usize> {
    (0..f.nodes.len())
        .filter(|&i| q::<i64>(&mut f.nodes[i].conn(), &["EXISTS", key]).unwrap() == 1)
        .collect()
}

/// S1: TTLs, one-shot GETDEL tokens, MGET/DEL over the fleet, SCAN MATCH, collections
/// with TTLs.
fn s1_expiring_state(kind: NodeKind) {
    let f = Fleet::start(kind);
    let mut c = f.client();
    q::<()>(&mut c, &["SET", "s1:px", "v", "PX", "30"]).unwrap();
    q::<()>(&mut c, &["SET", "s1:later", "v"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "s1:later", "30"]).unwrap(), 1);
    q::<()>(&mut c, &["SADD", "s1:set", "a", "b"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "s1:set", "30"]).unwrap(), 1);
    q::<()>(&mut c, &["ZADD", "s1:zset", "1", "a"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "s1:zset", "30"]).unwrap(), 1);
    q::<()>(&mut c, &["SET", "s1:now", "v"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "s1:now", "0"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "s1:now"]).unwrap(), 0);
    std::thread::sleep(Duration::from_millis(80));
    assert_eq!(
        q::<Option<String>>(&mut c, &["GET", "s1:px"]).unwrap(),
        None
    );
    assert_eq!(
        q::<i64>(&mut c, &["EXISTS", "s1:px", "s1:later"]).unwrap(),
        0
    );
    assert_eq!(q::<i64>(&mut c, &["SCARD", "s1:set"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "s1:zset"]).unwrap(), 0);

    // One-shot token.
    q::<()>(&mut c, &["SET", "s1:token", "once"]).unwrap();
    assert_eq!(
        q::<Option<String>>(&mut c, &["GETDEL", "s1:token"]).unwrap(),
        Some("once".into())
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["GETDEL", "s1:token"]).unwrap(),
        None
    );

    // MGET in order with nils, over keys of every node; DEL counts what existed.
    let keys: Vec<String> = (0..30).map(|i| format!("s1:m:{i}")).collect();
    assert_eq!(
        (0..3)
            .filter(|n| keys.iter().any(|k| f.owner(k) == *n))
            .count(),
        3
    );
    for k in keys.iter().step_by(2) {
        q::<()>(&mut c, &["SET", k, &format!("v-{k}")]).unwrap();
    }
    let mut mget = vec!["MGET"];
    mget.extend(keys.iter().map(String::as_str));
    let got: Vec<Option<String>> = q(&mut c, &mget).unwrap();
    let want: Vec<Option<String>> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (i % 2 == 0).then(|| format!("v-{k}")))
        .collect();
    assert_eq!(got, want);
    let mut del = vec!["DEL"];
    del.extend(keys.iter().map(String::as_str));
    assert_eq!(q::<i64>(&mut c, &del).unwrap(), 15);

    // PTTL/TTL, and a TTL'd value written by one connection read by another.
    q::<()>(&mut c, &["SET", "s1:ttl", "v", "EX", "30"]).unwrap();
    q::<()>(&mut c, &["SET", "s1:nottl", "v"]).unwrap();
    let mut other = f.client();
    assert_eq!(
        q::<String>(&mut other, &["GET", "s1:ttl"]).unwrap(),
        "v".to_string()
    );
    let pttl: i64 = q(&mut other, &["PTTL", "s1:ttl"]).unwrap();
    assert!((1..=30_000).contains(&pttl), "{pttl}");
    let ttl: i64 = q(&mut other, &["TTL", "s1:ttl"]).unwrap();
    assert!((1..=30).contains(&ttl), "{ttl}");
    assert_eq!(q::<i64>(&mut other, &["TTL", "s1:nottl"]).unwrap(), -1);
    assert_eq!(q::<i64>(&mut other, &["PTTL", "s1:missing"]).unwrap(), -2);

    // SCAN MATCH over the fleet returns every matching key at least once.
    for i in 0..120 {
        q::<()>(&mut c, &["SET", &format!("prefix:{i}"), "v"]).unwrap();
    }
    let mut seen = std::collections::HashSet::new();
    let mut cursor = "0".to_string();
    loop {
        let (next, batch): (String, Vec<String>) = q(
            &mut c,
            &["SCAN", &cursor, "MATCH", "prefix:*", "COUNT", "100"],
        )
        .unwrap();
        seen.extend(batch);
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 120);
    assert!(seen.iter().all(|k| k.starts_with("prefix:")));
}

fn window(c: &mut Connection, user: &str, apikey: &str, limits: (i64, i64)) -> Vec<Value> {
    lua_script("ratelimit_fixed_window.lua")
        .key(format!("{{rl:{user}}}:user:w1"))
        .key(format!("{{rl:{user}}}:key:{apikey}:w1"))
        .arg(limits.0)
        .arg(limits.1)
        .arg(60_000)
        .invoke(c)
        .expect("fixed window")
}

fn bucket(c: &mut Connection, key: &str, capacity: i64, refill: i64, every: i64) -> Vec<i64> {
    let r: Vec<Value> = lua_script("ratelimit_token_bucket.lua")
        .key(key)
        .arg(capacity)
        .arg(refill)
        .arg(every)
        .arg(1)
        .invoke(c)
        .expect("token bucket");
    r.iter().map(int).collect()
}

/// Runs `per_thread` calls of `f` on each of `threads` connections; counts the `true`s.
fn concurrently(
    fleet: &Fleet,
    threads: usize,
    per_thread: usize,
    f: impl Fn(&mut Connection, usize) -> bool + Sync,
) -> usize {
    let conns: Vec<Connection> = (0..threads).map(|_| fleet.client()).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = conns
            .into_iter()
            .enumerate()
            .map(|(t, mut c)| {
                let f = &f;
                s.spawn(move || {
                    (0..per_thread)
                        .filter(|i| f(&mut c, t * per_thread + i))
                        .count()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

/// S2: fixed windows over two scopes and token buckets, under concurrency.
fn s2_rate_limiters(kind: NodeKind) {
    let f = Fleet::start(kind);
    // 128 concurrent checks against a user limit of 32 admit exactly 32; two API keys of
    // the user share its limit.
    let admitted = concurrently(&f, 8, 16, |c, i| {
        let key = if i % 2 == 0 { "k1" } else { "k2" };
        let r = window(c, "alice", key, (32, 1000));
        if int(&r[0]) == 0 {
            assert_eq!(text(&r[1]), "user");
            false
        } else {
            true
        }
    });
    assert_eq!(admitted, 32);
    let mut c = f.client();
    // An exhausted API key refuses without charging the user.
    let r = window(&mut c, "bob", "k", (10, 1));
    assert_eq!(int(&r[0]), 1);
    let r = window(&mut c, "bob", "k", (10, 1));
    assert_eq!((int(&r[0]), text(&r[1])), (0, "apikey".into()));
    assert_eq!(
        q::<String>(&mut c, &["GET", "{rl:bob}:user:w1"]).unwrap(),
        "1"
    );
    // Token bucket: capacity 100, no refill, 400 hits from 8 connections admit 100.
    let admitted = concurrently(&f, 8, 50, |c, _| {
        bucket(c, "{tb}:api", 100, 0, 1000)[0] == 1
    });
    assert_eq!(admitted, 100);
    // Malformed state fails closed, then heals after one interval.
    q::<()>(&mut c, &["HSET", "{tb}:bad", "tokens", "lots", "ts", "0"]).unwrap();
    assert_eq!(bucket(&mut c, "{tb}:bad", 10, 1, 100)[0], 0);
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(bucket(&mut c, "{tb}:bad", 10, 1, 100), vec![1, 9, 0]);
}

fn lock_acquire(c: &mut Connection, lock: &str, owner: &str, ttl: i64) -> Option<i64> {
    lua_script("lock_acquire.lua")
        .key(format!("{{{lock}}}"))
        .key(format!("{{{lock}}}:fence"))
        .arg(owner)
        .arg(ttl)
        .invoke(c)
        .expect("acquire")
}

fn lock_call(c: &mut Connection, script: &str, lock: &str, args: &[&str]) -> i64 {
    let s = lua_script(script);
    let mut inv = s.key(format!("{{{lock}}}"));
    for a in args {
        inv.arg(*a);
    }
    inv.invoke(c).expect(script)
}

/// S3: fencing tokens strictly increase across release and expiry; renew and release only
/// for the current token; an expired lease cannot be renewed.
fn s3_locks(kind: NodeKind) {
    let f = Fleet::start(kind);
    let mut c = f.client();
    // Locks on every node (different tags) are independent.
    let locks: Vec<String> = (0..3).map(|n| f.key_on(n, "lock")).collect();
    for lock in &locks {
        let t1 = lock_acquire(&mut c, lock, "me", 5000).unwrap();
        assert_eq!(lock_acquire(&mut c, lock, "you", 5000), None);
        let t1s = t1.to_string();
        assert_eq!(
            lock_call(&mut c, "lock_release.lua", lock, &["you", &t1s]),
            0
        );
        assert_eq!(
            lock_call(&mut c, "lock_renew.lua", lock, &["me", &t1s, "5000"]),
            1
        );
        assert_eq!(
            lock_call(&mut c, "lock_release.lua", lock, &["me", &t1s]),
            1
        );
        let t2 = lock_acquire(&mut c, lock, "you", 30).unwrap();
        assert!(t2 > t1);
        assert_eq!(
            holders(&f, &format!("{{{lock}}}:fence")),
            vec![f.owner(lock)]
        );
    }
    std::thread::sleep(Duration::from_millis(80));
    for lock in &locks {
        // The lease expired: it cannot be renewed; the next holder gets a larger token.
        assert_eq!(
            lock_call(&mut c, "lock_renew.lua", lock, &["you", "2", "5000"]),
            0
        );
        assert_eq!(lock_acquire(&mut c, lock, "me", 5000), Some(3));
    }
}

fn sem(c: &mut Connection, script: &str, gate: &str, args: &[&str]) -> Value {
    let s = lua_script(script);
    let mut inv = s.key(gate);
    for a in args {
        inv.arg(*a);
    }
    inv.invoke(c).expect(script)
}

fn acquire(c: &mut Connection, gate: &str, token: &str, limit: i64, lease: i64) -> (i64, i64) {
    let r = sem(
        c,
        "semaphore_acquire.lua",
        gate,
        &[token, &limit.to_string(), &lease.to_string()],
    );
    match r {
        Value::Array(v) => (int(&v[0]), int(&v[1])),
        other => panic!("{other:?}"),
    }
}

/// S4: a gate of limit 1 refuses until released; gates per resource are independent;
/// renew fails for an expired lease and the live count drops expired holders.
fn s4_semaphores(kind: NodeKind) {
    let f = Fleet::start(kind);
    let mut c = f.client();
    let gates: Vec<String> = (0..3).map(|n| f.key_on(n, "gate")).collect();
    for g in &gates {
        assert_eq!(acquire(&mut c, g, "a", 1, 5000), (1, 1));
        assert_eq!(acquire(&mut c, g, "b", 1, 5000), (0, 1));
    }
    let g = &gates[0];
    assert_eq!(int(&sem(&mut c, "semaphore_release.lua", g, &["a"])), 1);
    assert_eq!(acquire(&mut c, g, "b", 1, 5000), (1, 1));
    assert_eq!(
        int(&sem(&mut c, "semaphore_renew.lua", g, &["b", "5000"])),
        1
    );
    // The other gates are still full.
    assert_eq!(acquire(&mut c, &gates[1], "b", 1, 5000), (0, 1));
    // Expired leases: dropped from the count, cannot be renewed.
    let short = f.key_on(2, "shortgate");
    // (Both leases must still be live at the second acquire: a lease far longer than one
    // round trip, slept out in full, keeps that from depending on the machine's speed.)
    assert_eq!(acquire(&mut c, &short, "x", 3, 2000), (1, 1));
    assert_eq!(acquire(&mut c, &short, "y", 3, 2000), (1, 2));
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(
        int(&sem(&mut c, "semaphore_renew.lua", &short, &["x", "5000"])),
        0
    );
    assert_eq!(int(&sem(&mut c, "semaphore_count.lua", &short, &[])), 0);
    assert_eq!(holders(&f, g), vec![f.owner(g)]);
}

/// A connection without redis-rs's response timeout, for commands that block.
fn blocking_client(f: &Fleet) -> Connection {
    let c = redis::Client::open(f.proxy.url())
        .unwrap()
        .get_connection()
        .unwrap();
    c.set_read_timeout(None).unwrap();
    c
}

/// S5: work queue on a stream with a consumer group, readers blocking through the proxy,
/// a dead consumer's entries claimed by another.
fn s5_work_queues(kind: NodeKind) {
    let f = Fleet::start(kind);
    let mut c = f.client();
    let s = "{queue:7}:jobs";
    assert_eq!(
        q::<String>(&mut c, &["XGROUP", "CREATE", s, "g", "0-0", "MKSTREAM"]).unwrap(),
        "OK"
    );
    let e = err_text(q::<()>(&mut c, &["XGROUP", "CREATE", s, "g", "0-0"]).unwrap_err());
    assert!(e.contains("BUSYGROUP"), "{e}");
    let id1: String = q(
        &mut c,
        &["XADD", s, "MAXLEN", "~", "100", "*", "payload", "one"],
    )
    .unwrap();
    let id2: String = q(
        &mut c,
        &["XADD", s, "MAXLEN", "~", "100", "*", "payload", "two"],
    )
    .unwrap();
    let read: Read = q(
        &mut c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "dead",
            "COUNT",
            "10",
            "STREAMS",
            s,
            ">",
        ],
    )
    .unwrap();
    let entries = &read.unwrap()[0].1;
    let ids: Vec<&str> = entries.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, [id1.as_str(), id2.as_str()]);
    assert_eq!(entries[0].1, ["payload", "one"]);
    let again: Read = q(
        &mut c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "dead",
            "COUNT",
            "10",
            "STREAMS",
            s,
            ">",
        ],
    )
    .unwrap();
    assert_eq!(again, None);
    let groups: Vec<std::collections::HashMap<String, Value>> =
        q(&mut c, &["XINFO", "GROUPS", s]).unwrap();
    assert_eq!(int(&groups[0]["pending"]), 2);
    assert_eq!(int(&groups[0]["lag"]), 0);
    let (count, lo, hi, per): (i64, String, String, Vec<(String, String)>) =
        q(&mut c, &["XPENDING", s, "g"]).unwrap();
    assert_eq!(
        (count, lo.as_str(), hi.as_str()),
        (2, id1.as_str(), id2.as_str())
    );
    assert_eq!(per, [("dead".to_string(), "2".to_string())]);
    std::thread::sleep(Duration::from_millis(20));
    let ext: Vec<(String, String, i64, i64)> =
        q(&mut c, &["XPENDING", s, "g", "IDLE", "10", "-", "+", "10"]).unwrap();
    assert_eq!(ext.len(), 2);
    assert!(ext
        .iter()
        .all(|(_, who, idle, n)| who == "dead" && *idle >= 10 && *n == 1));
    // The consumer "dead" never acks: another claims its idle entries.
    let claimed: (String, Entries, Vec<String>) = q(
        &mut c,
        &["XAUTOCLAIM", s, "g", "other", "1", "0-0", "COUNT", "10"],
    )
    .unwrap();
    assert_eq!(claimed.0, "0-0");
    let ids: Vec<&str> = claimed.1.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, [id1.as_str(), id2.as_str()]);
    assert_eq!(q::<i64>(&mut c, &["XACK", s, "g", &id1, &id2]).unwrap(), 2);
    assert_eq!(q::<i64>(&mut c, &["XDEL", s, &id1, &id2]).unwrap(), 2);
    assert_eq!(q::<i64>(&mut c, &["XLEN", s]).unwrap(), 0);
    let (count, ..): (i64, Value, Value, Value) = q(&mut c, &["XPENDING", s, "g"]).unwrap();
    assert_eq!(count, 0);
    // The stream lives on the node the placement names, and only there.
    assert_eq!(holders(&f, s), vec![f.owner(s)]);

    // Four consumers blocking at once each time out on their own schedule: never before
    // their BLOCK (a lower bound cannot flake), and well within the hang guard.
    let read_group = move |b: &mut Connection, name: &str, block: &str| -> Read {
        q(
            b,
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                name,
                "BLOCK",
                block,
                "STREAMS",
                s,
                ">",
            ],
        )
        .unwrap()
    };
    let waits: Vec<_> = (0..4)
        .map(|i| {
            let mut b = blocking_client(&f);
            std::thread::spawn(move || {
                let start = Instant::now();
                let r = read_group(&mut b, &format!("c{i}"), "500");
                (r, start.elapsed())
            })
        })
        .collect();
    for w in waits {
        let (r, took) = w.join().unwrap();
        assert_eq!(r, None);
        assert!(
            took >= Duration::from_millis(450) && took < common::HANG_GUARD,
            "{took:?}"
        );
    }
    // Four readers blocked at once (the node holds all four), with a BLOCK far beyond the
    // test so that only an XADD can wake them. Other clients' commands, on the same node,
    // are all answered while the four still wait.
    let node = &f.nodes[f.owner(s)];
    let blocked = || {
        let info: String = q(&mut node.conn(), &["INFO", "clients"]).unwrap();
        common::info_field(&info, "blocked_clients").expect("blocked_clients in INFO")
    };
    let readers: Vec<_> = (0..4)
        .map(|i| {
            let mut b = blocking_client(&f);
            std::thread::spawn(move || read_group(&mut b, &format!("c{i}"), "30000"))
        })
        .collect();
    common::wait_until("four readers blocked on the node", || blocked() == 4);
    for _ in 0..20 {
        q::<()>(&mut c, &["SET", "{queue:7}:other", "x"]).unwrap();
    }
    assert!(
        readers.iter().all(|r| !r.is_finished()),
        "a blocked reader was answered before the other client's commands"
    );
    assert_eq!(blocked(), 4, "a reader left its node");
    // Each XADD wakes one reader with that entry (not a timeout's nil).
    let mut ids: Vec<String> = (0..4)
        .map(|i| {
            let p = format!("job{i}");
            q(&mut c, &["XADD", s, "*", "payload", &p]).unwrap()
        })
        .collect();
    let mut got: Vec<String> = readers
        .into_iter()
        .map(|r| {
            let r = r
                .join()
                .unwrap()
                .expect("woken by the XADD, not by its BLOCK");
            assert_eq!(r.len(), 1, "{r:?}");
            assert_eq!(r[0].1.len(), 1, "{r:?}");
            r[0].1[0].0.clone()
        })
        .collect();
    ids.sort();
    got.sort();
    assert_eq!(got, ids);
}

fn prepare(c: &mut Connection, v: &str, output: &str, base: &str, rev: u8) -> Vec<String> {
    s6::Call::prepare(v, output, base, rev).run(c)
}

fn mark(c: &mut Connection, v: &str, output: &str) -> Vec<String> {
    s6::Call::mark(v, output).run(c)
}

fn promote(c: &mut Connection, v: &str, output: &str) -> Vec<String> {
    s6::Call::promote(v, output).run(c)
}

/// The load path: the whole group in one MULTI/EXEC.
fn load(c: &mut Connection, v: &str) -> Group {
    s6::sorted(s6::load_pipe(v).query(c).expect("load"))
}

/// S6: prepare / mark-published / promote over one hash tag, the MULTI/EXEC load, the
/// untagged per-partition index, binary values verbatim; the group lives on one node.
fn s6_two_phase(kind: NodeKind) {
    let f = Fleet::start(kind);
    let mut c = f.client();
    // Vehicles on every node.
    let vehicles: Vec<String> = (0..3)
        .map(|n| {
            (0..)
                .map(|i| i.to_string())
                .find(|v| f.owner(&format!("{{vehicle:{v}}}:prepared")) == n)
                .unwrap()
        })
        .collect();
    for v in &vehicles {
        assert_eq!(prepare(&mut c, v, "out1", "", 1), ["prepared", "1"]);
        q::<i64>(&mut c, &["SADD", "staged:p0", v]).unwrap();
        assert_eq!(prepare(&mut c, v, "out1", "", 1), ["already", "1"]);
        assert_eq!(prepare(&mut c, v, "out2", "", 1), ["busy", "out1"]);
        assert_eq!(promote(&mut c, v, "out1"), ["not-published"]);
        assert_eq!(mark(&mut c, v, "out1"), ["published"]);
        let (cp, rev, prep) = load(&mut c, v);
        assert!(cp.is_empty() && rev.is_none() && !prep.is_empty());
        assert_eq!(promote(&mut c, v, "out1"), ["promoted", "1"]);
        q::<i64>(&mut c, &["SREM", "staged:p0", v]).unwrap();
        let (cp, rev, prep) = load(&mut c, v);
        let mut want = checkpoint(1);
        want.sort();
        assert_eq!(cp, want);
        assert_eq!(rev.as_deref(), Some("1"));
        assert!(prep.is_empty());
        let ttl: i64 = q(&mut c, &["PTTL", &format!("{{vehicle:{v}}}:checkpoint")]).unwrap();
        assert!(ttl > 0 && ttl <= 3_600_000);
        // A stale base revision conflicts.
        assert_eq!(prepare(&mut c, v, "out3", "", 2), ["conflict", "1"]);
        assert_eq!(prepare(&mut c, v, "out3", "1", 2), ["prepared", "2"]);
        // Every key of the group is on the node the placement names, and only there.
        let owner = f.owner(&format!("{{vehicle:{v}}}:prepared"));
        for suffix in ["checkpoint", "prepared", "committed-revision"] {
            assert_eq!(
                holders(&f, &format!("{{vehicle:{v}}}:{suffix}")),
                vec![owner]
            );
        }
    }
    let staged: Vec<String> = q(&mut c, &["SMEMBERS", "staged:p0"]).unwrap();
    assert!(staged.is_empty());
    // A transaction over two tags is refused before anything is sent.
    let mut p = redis::pipe();
    p.atomic()
        .cmd("GET")
        .arg(format!("{{vehicle:{}}}:committed-revision", vehicles[0]))
        .cmd("GET")
        .arg(format!("{{vehicle:{}}}:committed-revision", vehicles[1]));
    let e = err_text(p.query::<Value>(&mut c).unwrap_err());
    assert!(e.contains("CROSSSLOT") || e.contains("EXECABORT"), "{e}");
}

mod redis_nodes {
    for_kinds!(Redis: s1_expiring_state, s2_rate_limiters, s3_locks, s4_semaphores,
        s5_work_queues, s6_two_phase);
}

mod valkey_nodes {
    for_kinds!(Valkey: s1_expiring_state, s2_rate_limiters, s3_locks, s4_semaphores,
        s5_work_queues, s6_two_phase);
}

mod respite_nodes {
    for_kinds!(Respite: s1_expiring_state, s2_rate_limiters, s3_locks, s4_semaphores,
        s5_work_queues, s6_two_phase);
}
