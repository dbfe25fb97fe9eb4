//! Crash test of the durable engine (issue 6, SCENARIOS.md S7): the `respite` binary runs
//! as a child process under `--engine redb --appendfsync always` while several connections
//! write (INCR, SET, HSET, RPUSH, XADD with explicit IDs, XREADGROUP, XACK), and is killed
//! with SIGKILL at a random (seeded) moment, then restarted on the same directory. After
//! every restart: every acknowledged write is there, nothing unacknowledged appeared from
//! nowhere, every key reads back without error, and the stream groups are consistent.
//!
//! `RESPITE_CRASH_ROUNDS` (default 10) sets how many kills; `RESPITE_CRASH_SEED` the seed;
//! `RESPITE_CRASH_LOG=1` shows the child's log; `RESPITE_BIN` runs another binary.

mod common;

use common::values::{fields, int, items, text};
use common::{c, connect_port, q, Proto, ServerProcess, HANG_GUARD};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis::aio::MultiplexedConnection;
use redis::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const WORKERS: usize = 6;
const COUNTERS: usize = 3;

/// The server child process (killed on drop so a failing test leaves nothing behind):
/// `ServerProcess::kill` is SIGKILL on Unix, no final commit, no cleanup.
fn start_server(dir: &Path) -> ServerProcess {
    let dir = dir.to_str().expect("a UTF-8 temporary path");
    ServerProcess::respite_with(
        &[
            "--engine",
            "redb",
            "--dir",
            dir,
            "--appendfsync",
            "always",
            "--threads",
            "2",
        ],
        std::env::var_os("RESPITE_CRASH_LOG").is_some(),
    )
}

/// A value derived from its key and operation number: binary bytes, varying length.
fn value(key: &str, n: u64) -> Vec<u8> {
    let mut v = key.as_bytes().to_vec();
    v.extend_from_slice(&[0, 0xff, 0x80, b'\r', b'\n']);
    v.extend((0..n % 97).map(|i| (n.wrapping_mul(31).wrapping_add(i)) as u8));
    v
}

fn stream_id(n: u64) -> String {
    format!("{n}-1")
}

/// What one connection did: its keys are `k:{w}:{n}`, `h:{w}`, `l:{w}`, `s:{w}`; the
/// shared counters are tracked in [`Counters`]. `true` = acknowledged, `false` = sent but
/// not acknowledged (the kill came first).
#[derive(Default, Clone)]
struct Worker {
    w: usize,
    /// Operation number: never reused, so stream IDs keep increasing across rounds.
    next: u64,
    sets: BTreeMap<u64, bool>,
    fields: BTreeMap<u64, bool>,
    /// RPUSHed operation numbers in order, and how many of them were acknowledged.
    pushes: Vec<u64>,
    pushes_acked: usize,
    xadds: BTreeMap<u64, bool>,
    /// Stream IDs whose delivery by XREADGROUP was acknowledged, not XACKed since.
    delivered: BTreeSet<String>,
    /// XACKed IDs (acknowledged or not).
    xacked: BTreeMap<String, bool>,
}

struct Counters {
    attempted: Vec<AtomicI64>,
    acked: Vec<AtomicI64>,
}

#[derive(Debug)]
enum Stop {
    /// The connection went away (the kill).
    Dropped,
    /// A reply that should not happen: a test failure.
    Bad(String),
}

async fn send(con: &mut MultiplexedConnection, cmd: &redis::Cmd) -> Result<Value, Stop> {
    match cmd.query_async::<Value>(con).await {
        Ok(v) => Ok(v),
        Err(e) if e.code().is_some() => Err(Stop::Bad(format!(
            "{:?}: {e}",
            String::from_utf8_lossy(&cmd.get_packed_command())
        ))),
        Err(_) => Err(Stop::Dropped),
    }
}

fn bad<T>(what: &str, v: &Value) -> Result<T, Stop> {
    Err(Stop::Bad(format!("{what}: unexpected reply {v:?}")))
}

/// Runs random writes until the connection drops; returns what was done.
async fn load(
    port: u16,
    mut me: Worker,
    counters: Arc<Counters>,
    seed: u64,
) -> Result<Worker, String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut con = connect_port(port, Proto::Resp2).await;
    let w = me.w;
    let (hash, list, stream) = (format!("h:{w}"), format!("l:{w}"), format!("s:{w}"));
    let result: Result<(), Stop> = async {
        loop {
            me.next += 1;
            let n = me.next;
            match rng.gen_range(0..100) {
                0..=19 => {
                    let i = rng.gen_range(0..COUNTERS);
                    counters.attempted[i].fetch_add(1, Ordering::SeqCst);
                    let v = send(&mut con, &c(&["INCR", &format!("ctr:{i}")])).await?;
                    if !matches!(v, Value::Int(_)) {
                        return bad("INCR", &v);
                    }
                    counters.acked[i].fetch_add(1, Ordering::SeqCst);
                }
                20..=39 => {
                    let key = format!("k:{w}:{n}");
                    me.sets.insert(n, false);
                    let cmd = redis::cmd("SET").arg(&key).arg(value(&key, n)).clone();
                    let v = send(&mut con, &cmd).await?;
                    if v != Value::Okay {
                        return bad("SET", &v);
                    }
                    me.sets.insert(n, true);
                }
                40..=54 => {
                    me.fields.insert(n, false);
                    let f = format!("f{n}");
                    let cmd = redis::cmd("HSET")
                        .arg(&hash)
                        .arg(&f)
                        .arg(value(&f, n))
                        .clone();
                    let v = send(&mut con, &cmd).await?;
                    if v != Value::Int(1) {
                        return bad("HSET", &v);
                    }
                    me.fields.insert(n, true);
                }
                55..=69 => {
                    me.pushes.push(n);
                    let v = send(&mut con, &c(&["RPUSH", &list, &n.to_string()])).await?;
                    if v != Value::Int(me.pushes.len() as i64) {
                        return bad("RPUSH", &v);
                    }
                    me.pushes_acked = me.pushes.len();
                }
                70..=84 => {
                    me.xadds.insert(n, false);
                    let id = stream_id(n);
                    let cmd = redis::cmd("XADD")
                        .arg(&stream)
                        .arg(&id)
                        .arg("v")
                        .arg(value(&id, n))
                        .clone();
                    let v = send(&mut con, &cmd).await?;
                    if v != Value::BulkString(id.clone().into_bytes()) {
                        return bad("XADD", &v);
                    }
                    me.xadds.insert(n, true);
                }
                85..=94 => {
                    let cmd = c(&[
                        "XREADGROUP",
                        "GROUP",
                        "g",
                        &format!("c{}", n % 3),
                        "COUNT",
                        "3",
                        "STREAMS",
                        &stream,
                        ">",
                    ]);
                    let v = send(&mut con, &cmd).await?;
                    for id in read_group_ids(&v).map_err(Stop::Bad)? {
                        me.delivered.insert(id);
                    }
                }
                _ => {
                    let Some(id) = me.delivered.iter().next().cloned() else {
                        continue;
                    };
                    me.delivered.remove(&id);
                    me.xacked.insert(id.clone(), false);
                    let v = send(&mut con, &c(&["XACK", &stream, "g", &id])).await?;
                    if v != Value::Int(1) {
                        return bad("XACK", &v);
                    }
                    me.xacked.insert(id, true);
                }
            }
        }
    }
    .await;
    match result {
        Err(Stop::Dropped) => Ok(me),
        Err(Stop::Bad(e)) => Err(format!("worker {w}: {e}")),
        Ok(()) => unreachable!(),
    }
}

/// The entry IDs in an XREADGROUP reply (RESP2: nil, or `[[stream, [[id, fields]...]]]`).
fn read_group_ids(v: &Value) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    match v {
        Value::Nil => {}
        Value::Array(streams) => {
            for s in streams {
                let Value::Array(pair) = s else {
                    return Err(format!("XREADGROUP stream: {s:?}"));
                };
                let Some(Value::Array(entries)) = pair.get(1) else {
                    return Err(format!("XREADGROUP entries: {pair:?}"));
                };
                for e in entries {
                    match e {
                        Value::Array(e) => out.push(text(&e[0])),
                        other => return Err(format!("XREADGROUP entry: {other:?}")),
                    }
                }
            }
        }
        other => return Err(format!("XREADGROUP: {other:?}")),
    }
    Ok(out)
}

/// Every key reads back (SCAN, TYPE, then a full read by type); returns their names.
async fn read_every_key(con: &mut MultiplexedConnection) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut cursor = "0".to_string();
    loop {
        let r = items(&q(con, &c(&["SCAN", &cursor, "COUNT", "500"])).await);
        cursor = text(&r[0]);
        for k in items(&r[1]) {
            keys.insert(text(&k));
        }
        if cursor == "0" {
            break;
        }
    }
    for k in &keys {
        let ty = text(&q(con, &c(&["TYPE", k])).await);
        let read = match ty.as_str() {
            "string" => c(&["GET", k]),
            "hash" => c(&["HGETALL", k]),
            "list" => c(&["LRANGE", k, "0", "-1"]),
            "stream" => c(&["XINFO", "STREAM", k, "FULL"]),
            other => panic!("key {k} has unexpected type {other}"),
        };
        q::<Value>(con, &read).await;
        let ttl = int(&q(con, &c(&["PTTL", k])).await);
        assert_eq!(ttl, -1, "key {k} gained a TTL");
    }
    keys
}

/// Checks the restarted server against the model, then makes the model match what
/// survived (unacknowledged writes may or may not have).
async fn verify(port: u16, workers: &mut [Worker], counters: &Counters, round: usize) {
    let mut con = connect_port(port, Proto::Resp2).await;
    let keys = read_every_key(&mut con).await;
    let mut expected_keys = BTreeSet::new();

    for (i, (att, ack)) in counters.attempted.iter().zip(&counters.acked).enumerate() {
        let key = format!("ctr:{i}");
        let v = match q(&mut con, &c(&["GET", &key])).await {
            Value::Nil => 0,
            v => text(&v).parse::<i64>().expect("counter is an integer"),
        };
        let (att_n, ack_n) = (att.load(Ordering::SeqCst), ack.load(Ordering::SeqCst));
        assert!(
            ack_n <= v && v <= att_n,
            "round {round}: {key} = {v}, acknowledged {ack_n}, attempted {att_n}"
        );
        att.store(v, Ordering::SeqCst);
        ack.store(v, Ordering::SeqCst);
        if v > 0 {
            expected_keys.insert(key);
        }
    }

    for me in workers.iter_mut() {
        let w = me.w;
        // SET keys.
        let mut survived = BTreeMap::new();
        for (&n, &acked) in &me.sets {
            let key = format!("k:{w}:{n}");
            match q(&mut con, &c(&["GET", &key])).await {
                Value::BulkString(b) => {
                    assert_eq!(b, value(&key, n), "round {round}: {key} corrupt");
                    survived.insert(n, true);
                    expected_keys.insert(key);
                }
                Value::Nil => assert!(!acked, "round {round}: acknowledged SET {key} lost"),
                other => panic!("GET {key}: {other:?}"),
            }
        }
        me.sets = survived;

        // Hash fields.
        let hash = format!("h:{w}");
        let got = fields(&q(&mut con, &c(&["HGETALL", &hash])).await);
        for (&n, &acked) in &me.fields {
            let f = format!("f{n}");
            match got.get(&f) {
                Some(Value::BulkString(b)) => {
                    assert_eq!(*b, value(&f, n), "round {round}: {hash} {f} corrupt")
                }
                None => assert!(
                    !acked,
                    "round {round}: acknowledged HSET {hash} {f} lost; has {:?}",
                    got.keys().collect::<BTreeSet<_>>()
                ),
                Some(other) => panic!("{hash} {f}: {other:?}"),
            }
        }
        for f in got.keys() {
            let n: u64 = f[1..].parse().expect("field name");
            assert!(me.fields.contains_key(&n), "{hash} has unwritten field {f}");
        }
        me.fields = got
            .keys()
            .map(|f| (f[1..].parse().expect("field"), true))
            .collect();
        if !got.is_empty() {
            expected_keys.insert(hash);
        }

        // The list: exactly a prefix of the pushes, at least the acknowledged ones.
        let list = format!("l:{w}");
        let got: Vec<u64> = items(&q(&mut con, &c(&["LRANGE", &list, "0", "-1"])).await)
            .iter()
            .map(|v| text(v).parse().expect("list element"))
            .collect();
        assert!(
            got.len() >= me.pushes_acked && got.len() <= me.pushes.len(),
            "round {round}: {list} has {} elements; acknowledged {}, attempted {}",
            got.len(),
            me.pushes_acked,
            me.pushes.len()
        );
        assert_eq!(
            got[..],
            me.pushes[..got.len()],
            "round {round}: {list} order"
        );
        me.pushes.truncate(got.len());
        me.pushes_acked = got.len();
        if !got.is_empty() {
            expected_keys.insert(list);
        }

        verify_stream(&mut con, me, round).await;
        expected_keys.insert(format!("s:{w}"));
    }
    assert_eq!(keys, expected_keys, "round {round}: key set");
}

async fn verify_stream(con: &mut MultiplexedConnection, me: &mut Worker, round: usize) {
    let stream = format!("s:{}", me.w);
    let entries = items(&q(con, &c(&["XRANGE", &stream, "-", "+"])).await);
    let mut present = BTreeSet::new();
    for e in entries {
        let e = items(&e);
        let id = text(&e[0]);
        let n: u64 = id
            .strip_suffix("-1")
            .and_then(|n| n.parse().ok())
            .expect("entry id");
        assert!(
            me.xadds.contains_key(&n),
            "{stream} has unwritten entry {id}"
        );
        let f = items(&e[1]);
        assert_eq!(text(&f[0]), "v");
        assert_eq!(
            f[1],
            Value::BulkString(value(&id, n)),
            "round {round}: {stream} {id} corrupt"
        );
        present.insert(n);
    }
    for (n, &acked) in &me.xadds {
        assert!(
            !acked || present.contains(n),
            "round {round}: acknowledged XADD {stream} {} lost",
            stream_id(*n)
        );
    }
    me.xadds = present.iter().map(|&n| (n, true)).collect();

    // The group: PEL entries exist, belong to listed consumers, counts agree.
    let pel: Vec<(String, String)> =
        items(&q(con, &c(&["XPENDING", &stream, "g", "-", "+", "100000"])).await)
            .into_iter()
            .map(|e| {
                let e = items(&e);
                (text(&e[0]), text(&e[1]))
            })
            .collect();
    let pel_ids: BTreeSet<String> = pel.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(pel_ids.len(), pel.len(), "{stream}: duplicate PEL entries");
    for id in &pel_ids {
        let n: u64 = id
            .strip_suffix("-1")
            .and_then(|n| n.parse().ok())
            .expect("id");
        assert!(
            present.contains(&n),
            "{stream}: PEL entry {id} not in the stream"
        );
    }
    for id in &me.delivered {
        assert!(
            pel_ids.contains(id),
            "round {round}: acknowledged delivery {stream} {id} missing from the PEL"
        );
    }
    for (id, &acked) in &me.xacked {
        assert!(
            !acked || !pel_ids.contains(id),
            "round {round}: acknowledged XACK {stream} {id} is pending again"
        );
    }
    let summary = items(&q(con, &c(&["XPENDING", &stream, "g"])).await);
    assert_eq!(
        int(&summary[0]),
        pel.len() as i64,
        "{stream}: XPENDING count"
    );
    let groups = items(&q(con, &c(&["XINFO", "GROUPS", &stream])).await);
    assert_eq!(groups.len(), 1, "{stream}: groups");
    let g = fields(&groups[0]);
    assert_eq!(
        int(&g["pending"]),
        pel.len() as i64,
        "{stream}: group pending"
    );
    let last = text(&g["last-delivered-id"]);
    let last_n: u64 = if last == "0-0" {
        0
    } else {
        last.strip_suffix("-1")
            .and_then(|n| n.parse().ok())
            .expect("last id")
    };
    for id in &pel_ids {
        let n: u64 = id
            .strip_suffix("-1")
            .and_then(|n| n.parse().ok())
            .expect("id");
        assert!(
            n <= last_n,
            "{stream}: pending {id} after last-delivered {last}"
        );
    }
    let consumers = items(&q(con, &c(&["XINFO", "CONSUMERS", &stream, "g"])).await);
    assert_eq!(
        int(&g["consumers"]),
        consumers.len() as i64,
        "{stream}: consumers"
    );
    let mut per_consumer: HashMap<String, i64> = HashMap::new();
    for (_, consumer) in &pel {
        *per_consumer.entry(consumer.clone()).or_default() += 1;
    }
    let mut listed = 0;
    for cons in consumers {
        let cons = fields(&cons);
        let name = text(&cons["name"]);
        let pending = int(&cons["pending"]);
        assert_eq!(
            per_consumer.get(&name).copied().unwrap_or(0),
            pending,
            "{stream}: consumer {name} pending"
        );
        listed += pending;
    }
    assert_eq!(
        listed,
        pel.len() as i64,
        "{stream}: PEL entries of unlisted consumers"
    );
    me.delivered = pel_ids;
    me.xacked.clear();
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkill() {
    let rounds = env_u64("RESPITE_CRASH_ROUNDS", 10) as usize;
    let seed = env_u64("RESPITE_CRASH_SEED", 0x5eed_c4a5);
    eprintln!("crash test: {rounds} rounds, RESPITE_CRASH_SEED={seed}");
    let mut rng = SmallRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let counters = Arc::new(Counters {
        attempted: (0..COUNTERS).map(|_| AtomicI64::new(0)).collect(),
        acked: (0..COUNTERS).map(|_| AtomicI64::new(0)).collect(),
    });
    let mut workers: Vec<Worker> = (0..WORKERS)
        .map(|w| Worker {
            w,
            ..Worker::default()
        })
        .collect();

    let mut server = start_server(dir.path());
    {
        let mut con = connect_port(server.port, Proto::Resp2).await;
        for w in 0..WORKERS {
            let s = format!("s:{w}");
            let v: Value = q(
                &mut con,
                &c(&["XGROUP", "CREATE", &s, "g", "0", "MKSTREAM"]),
            )
            .await;
            assert_eq!(v, Value::Okay);
        }
    }
    for round in 0..rounds {
        let tasks: Vec<_> = workers
            .iter()
            .map(|w| {
                let seed = rng.gen();
                tokio::spawn(load(server.port, w.clone(), counters.clone(), seed))
            })
            .collect();
        let delay = rng.gen_range(20..400);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        server.kill();
        for (slot, t) in workers.iter_mut().zip(tasks) {
            let done = tokio::time::timeout(HANG_GUARD, t)
                .await
                .expect("worker did not notice the kill")
                .expect("worker panicked");
            *slot = done.unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
        server = start_server(dir.path());
        verify(server.port, &mut workers, &counters, round).await;
    }
    let ops: u64 = workers.iter().map(|w| w.next).sum();
    eprintln!("crash test: {ops} operations over {rounds} kills verified");
    // The load really wrote something across the rounds.
    assert!(workers
        .iter()
        .any(|w| !w.xadds.is_empty() || !w.sets.is_empty()));
    server.kill();
}
