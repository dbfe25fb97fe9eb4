//! `maxmemory` and eviction (issue 18): every `maxmemory-policy` filled past its limit with a
//! real client, the OOM refusals, the LFU counter, `evicted` events and WATCH, eviction on
//! the durable engine across a restart; and, against redis-server where the output is
//! deterministic, the OOM texts, OBJECT FREQ under `lfu-log-factor 0`, and the shape of
//! INFO memory and MEMORY STATS.
//!
//! The in-process servers count live bytes because this test binary installs the same
//! counting allocator the `respite` binary does. That counter is process-wide, so the
//! in-process tests take turns ([`serial`]): one test's keys must not look like another's.

mod common;

use common::{conn_info, conn_info_int, Conn, Frame, ServerProcess};
use respite::TestServer;
use std::sync::{Mutex, MutexGuard};

#[global_allocator]
static ALLOC: respite::alloc::Counting<mimalloc::MiMalloc> =
    respite::alloc::Counting(mimalloc::MiMalloc);

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
/// Each value: 1000 bytes, stored as one allocation.
const VALUE_LEN: usize = 1000;

fn server(policy: &str) -> TestServer {
    let srv = TestServer::builder()
        .manual_clock()
        .param("maxmemory-policy", policy)
        .start()
        .expect("start");
    // A test double logs every command it receives (1 KB values here): not what is
    // measured.
    srv.record_commands(false);
    srv
}

fn set_args(key: &str, ttl: Option<u64>) -> Vec<Vec<u8>> {
    let mut a = vec![
        b"SET".to_vec(),
        key.as_bytes().to_vec(),
        vec![b'x'; VALUE_LEN],
    ];
    if let Some(t) = ttl {
        a.push(b"EX".to_vec());
        a.push(t.to_string().into_bytes());
    }
    a
}

/// Writes `prefix:i` for `i` in `range` (pipelined), each with `ttl(i)`; returns the
/// replies that were errors.
fn fill(
    c: &mut Conn,
    prefix: &str,
    range: std::ops::Range<usize>,
    ttl: impl Fn(usize) -> Option<u64>,
) -> Vec<String> {
    let mut errors = Vec::new();
    let ids: Vec<usize> = range.collect();
    for batch in ids.chunks(100) {
        for &i in batch {
            c.send(&set_args(&format!("{prefix}:{i}"), ttl(i)))
                .expect("send");
        }
        for _ in batch {
            match c.read().expect("reply") {
                Frame::Simple(s) if s == "OK" => {}
                Frame::Error(e) => errors.push(e),
                other => panic!("SET answered {other}"),
            }
        }
    }
    errors
}

fn used(c: &mut Conn) -> i64 {
    conn_info_int(c, "memory", "used_memory")
}

/// Sets `maxmemory` to what is used now plus `budget` bytes; returns the limit.
fn limit_at(c: &mut Conn, budget: i64) -> i64 {
    let max = used(c) + budget;
    assert_eq!(c.cmd(&format!("CONFIG SET maxmemory {max}")), ok());
    max
}

fn ok() -> Frame {
    Frame::Simple("OK".into())
}

fn exists(c: &mut Conn, prefix: &str, range: std::ops::Range<usize>) -> usize {
    range
        .filter(|i| c.cmd(&format!("EXISTS {prefix}:{i}")) == Frame::Int(1))
        .count()
}

/// The limit holds after the fill: INFO runs eviction first, like any command. The slack
/// covers the last value written and what other threads have not folded into the counter.
fn assert_under(c: &mut Conn, max: i64) {
    let now = used(c);
    assert!(
        now <= max + 256 * 1024,
        "used_memory {now} stays near maxmemory {max}"
    );
}

#[test]
fn allkeys_policies_keep_memory_under_the_limit() {
    let _s = serial();
    for policy in ["allkeys-lru", "allkeys-lfu", "allkeys-random"] {
        let srv = server(policy);
        let mut c = Conn::open(srv.port());
        let max = limit_at(&mut c, 4 << 20);
        // 12 MB of values into a 4 MB budget: nothing refused, old keys make room.
        let errors = fill(&mut c, "k", 0..12_000, |_| None);
        assert!(errors.is_empty(), "{policy}: {:?}", &errors[..1]);
        assert_under(&mut c, max);
        let n = match c.cmd("DBSIZE") {
            Frame::Int(n) => n,
            other => panic!("{other}"),
        };
        assert!((1000..12_000).contains(&n), "{policy}: {n} keys left");
        let evicted = conn_info_int(&mut c, "stats", "evicted_keys");
        assert_eq!(
            evicted,
            12_000 - n,
            "{policy}: every missing key was evicted"
        );
        assert!(conn_info_int(&mut c, "stats", "total_eviction_exceeded_time") >= 0);
    }
}

#[test]
fn volatile_policies_evict_only_keys_with_a_ttl_then_refuse() {
    let _s = serial();
    for policy in [
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        let srv = server(policy);
        let mut c = Conn::open(srv.port());
        let max = limit_at(&mut c, 4 << 20);
        assert!(fill(&mut c, "p", 0..1500, |_| None).is_empty());
        let errors = fill(&mut c, "t", 0..10_000, |i| Some(100_000 + i as u64));
        assert!(errors.is_empty(), "{policy}: {:?}", &errors[..1]);
        assert_under(&mut c, max);
        assert_eq!(
            exists(&mut c, "p", 0..1500),
            1500,
            "{policy}: persistent keys stay"
        );
        // Persistent keys alone: once the volatile ones are gone, writes are refused.
        let errors = fill(&mut c, "q", 0..8000, |_| None);
        assert!(!errors.is_empty(), "{policy}: no write refused");
        assert!(
            errors.iter().all(|e| e == OOM),
            "{policy}: {:?}",
            &errors[..1]
        );
        assert_eq!(exists(&mut c, "p", 0..1500), 1500, "{policy}");
        // Reads and deletions still run; deleting makes room again.
        assert_eq!(c.cmd("GET p:7"), Frame::Bulk(vec![b'x'; VALUE_LEN]));
        for i in 0..1500 {
            c.cmd(&format!("DEL p:{i}"));
        }
        assert!(fill(&mut c, "r", 0..10, |_| None).is_empty(), "{policy}");
    }
}

#[test]
fn volatile_ttl_evicts_the_nearest_deadlines_first() {
    let _s = serial();
    let srv = server("volatile-ttl");
    let mut c = Conn::open(srv.port());
    limit_at(&mut c, 4 << 20);
    assert!(fill(&mut c, "t", 0..10_000, |i| Some(100_000 + i as u64)).is_empty());
    let low = exists(&mut c, "t", 0..5000);
    let high = exists(&mut c, "t", 5000..10_000);
    assert!(high > 1000, "{high} keys with far deadlines left");
    assert!(
        low * 10 <= high,
        "{low} near-deadline keys outlived {high} far ones"
    );
}

#[test]
fn allkeys_lru_keeps_recently_touched_keys() {
    let _s = serial();
    let srv = server("allkeys-lru");
    let mut c = Conn::open(srv.port());
    let base = used(&mut c);
    assert!(fill(&mut c, "a", 0..3000, |_| None).is_empty());
    assert!(fill(&mut c, "b", 0..3000, |_| None).is_empty());
    let per_key = (used(&mut c) - base) / 6000;
    assert_eq!(
        c.cmd(&format!("CONFIG SET maxmemory {}", base + per_key * 7000)),
        ok()
    );
    // A thousand seconds later only the b keys are read again; then 3000 new keys need
    // about 2000 evictions, which should fall on the idle a keys.
    srv.advance_ms(1_000_000);
    for i in 0..3000 {
        c.cmd(&format!("GET b:{i}"));
    }
    assert!(fill(&mut c, "c", 0..3000, |_| None).is_empty());
    let a = exists(&mut c, "a", 0..3000);
    let b = exists(&mut c, "b", 0..3000);
    let new = exists(&mut c, "c", 0..3000);
    assert!(
        b >= 2850 && new >= 2850,
        "touched {b} and new {new} of 3000 survive"
    );
    assert!(a <= 1800, "{a} of 3000 idle keys survive");
}

#[test]
fn allkeys_lfu_keeps_frequently_read_keys() {
    let _s = serial();
    let srv = server("allkeys-lfu");
    let mut c = Conn::open(srv.port());
    assert_eq!(c.cmd("CONFIG SET lfu-log-factor 0"), ok());
    let base = used(&mut c);
    assert!(fill(&mut c, "hot", 0..2000, |_| None).is_empty());
    for _ in 0..3 {
        for i in 0..2000 {
            c.cmd(&format!("GET hot:{i}"));
        }
    }
    let per_key = (used(&mut c) - base) / 2000;
    assert_eq!(
        c.cmd(&format!("CONFIG SET maxmemory {}", base + per_key * 5000)),
        ok()
    );
    assert!(fill(&mut c, "cold", 0..8000, |_| None).is_empty());
    let hot = exists(&mut c, "hot", 0..2000);
    assert!(hot >= 1900, "{hot} of 2000 frequently read keys survive");
}

#[test]
fn noeviction_refuses_denyoom_commands_past_the_limit() {
    let _s = serial();
    let srv = server("noeviction");
    let mut c = Conn::open(srv.port());
    let max = limit_at(&mut c, 2 << 20);
    let errors = fill(&mut c, "k", 0..4000, |_| None);
    assert!(errors.len() > 1000, "{} writes refused", errors.len());
    assert!(errors.iter().all(|e| e == OOM), "{:?}", &errors[..1]);
    assert_under(&mut c, max);
    assert_eq!(conn_info_int(&mut c, "stats", "evicted_keys"), 0);
    // Not deny-oom: reads, DEL, and inside MULTI only EXEC/DISCARD get through.
    assert_eq!(c.cmd("GET k:0"), Frame::Bulk(vec![b'x'; VALUE_LEN]));
    assert_eq!(c.cmd("MULTI"), ok());
    assert_eq!(c.cmd("GET k:0"), Frame::Error(OOM.into()));
    assert!(c.cmd("EXEC").is_error("EXECABORT"));
    let over = conn_info_int(&mut c, "stats", "current_eviction_exceeded_time");
    assert!(over >= 0);
    for i in 0..1000 {
        c.cmd(&format!("DEL k:{i}"));
    }
    assert_eq!(c.cmd("SET again 1"), ok());
    assert_eq!(
        conn_info_int(&mut c, "stats", "current_eviction_exceeded_time"),
        0
    );
}

#[test]
fn eviction_publishes_evicted_and_dirties_watch() {
    let _s = serial();
    let srv = server("allkeys-lru");
    let mut c = Conn::open(srv.port());
    let mut sub = Conn::open(srv.port());
    let mut w = Conn::open(srv.port());
    assert_eq!(c.cmd("CONFIG SET notify-keyspace-events Ee"), ok());
    sub.cmd("SUBSCRIBE __keyevent@1__:evicted");
    // The only key of db 1, and the idlest: every sampling round sees it first.
    assert_eq!(c.cmd("SELECT 1"), ok());
    assert_eq!(c.cmd("SET victim v"), ok());
    assert_eq!(c.cmd("SELECT 0"), ok());
    assert_eq!(w.cmd("SELECT 1"), ok());
    assert_eq!(w.cmd("WATCH victim"), ok());
    srv.advance_ms(1_000_000);
    limit_at(&mut c, 1 << 20);
    assert!(fill(&mut c, "k", 0..3000, |_| None).is_empty());
    assert_eq!(w.cmd("EXISTS victim"), Frame::Int(0));
    assert_eq!(w.cmd("MULTI"), ok());
    assert_eq!(w.cmd("SET victim again"), Frame::Simple("QUEUED".into()));
    assert_eq!(
        w.cmd("EXEC"),
        Frame::NullArray,
        "an evicted key dirties WATCH"
    );
    assert_eq!(
        sub.read().expect("event"),
        Frame::Array(vec![
            Frame::Bulk(b"message".to_vec()),
            Frame::Bulk(b"__keyevent@1__:evicted".to_vec()),
            Frame::Bulk(b"victim".to_vec()),
        ])
    );
}

#[test]
fn durable_eviction_survives_a_restart() {
    let _s = serial();
    let dir = tempfile::tempdir().expect("dir");
    let srv = TestServer::builder()
        .manual_clock()
        .redb(dir.path())
        .param("appendfsync", "always")
        .param("maxmemory-policy", "allkeys-random")
        .start()
        .expect("start");
    srv.record_commands(false);
    let mut c = Conn::open(srv.port());
    limit_at(&mut c, 4 << 20);
    // The store's own buffers count in used_memory too, so some writes may be refused
    // once nothing is left to evict: only OOM may be.
    let errors = fill(&mut c, "k", 0..8000, |_| None);
    assert!(errors.iter().all(|e| e == OOM), "{:?}", errors.first());
    assert!(conn_info_int(&mut c, "stats", "evicted_keys") > 0);
    let before: Vec<bool> = (0..8000)
        .map(|i| c.cmd(&format!("EXISTS k:{i}")) == Frame::Int(1))
        .collect();
    assert!(before.iter().any(|x| !x));
    drop(c);
    srv.restart(true);
    let mut c = Conn::open(srv.port());
    let after: Vec<bool> = (0..8000)
        .map(|i| c.cmd(&format!("EXISTS k:{i}")) == Frame::Int(1))
        .collect();
    assert_eq!(before, after, "evicted keys stay gone, kept keys stay");
}

#[test]
fn lfu_counter_and_idletime_follow_the_policy() {
    let _s = serial();
    let srv = server("allkeys-lfu");
    let mut c = Conn::open(srv.port());
    assert_eq!(c.cmd("CONFIG SET lfu-log-factor 0"), ok());
    assert_eq!(c.cmd("SET k hello"), ok());
    assert_eq!(c.cmd("OBJECT FREQ k"), Frame::Int(5));
    for _ in 0..10 {
        c.cmd("GET k");
    }
    assert_eq!(c.cmd("OBJECT FREQ k"), Frame::Int(15));
    // One point lost per lfu-decay-time minute idle.
    srv.advance_ms(3 * 60_000 + 1);
    assert_eq!(c.cmd("OBJECT FREQ k"), Frame::Int(12));
    assert_eq!(c.cmd("CONFIG SET lfu-decay-time 0"), ok());
    srv.advance_ms(60 * 60_000);
    assert_eq!(c.cmd("OBJECT FREQ k"), Frame::Int(15));
    assert!(c
        .cmd("OBJECT IDLETIME k")
        .is_error("ERR An LFU maxmemory policy is selected"));
    assert_eq!(c.cmd("CONFIG SET maxmemory-policy allkeys-lru"), ok());
    assert!(c
        .cmd("OBJECT FREQ k")
        .is_error("ERR An LFU maxmemory policy is not selected"));
}

// --- against redis-server -----------------------------------------------------------------

fn both() -> [ServerProcess; 2] {
    [ServerProcess::respite(&[]), ServerProcess::redis()]
}

/// The same lines against respite and redis-server: identical replies.
fn same_replies(setup: &[&str], script: &[&str]) {
    let [r, o] = both();
    let (mut a, mut b) = (r.conn(), o.conn());
    for line in setup {
        assert_eq!(a.cmd(line), b.cmd(line), "setup {line}");
    }
    for line in script {
        assert_eq!(a.cmd(line), b.cmd(line), "{line}");
    }
}

#[test]
fn oom_refusals_match_redis() {
    // Also in turn: what this test allocates (clients, replies, process start-up) is
    // counted by the process-wide counter the in-process tests measure.
    let _turn = serial();
    for policy in ["noeviction", "allkeys-lru", "volatile-lru", "volatile-ttl"] {
        same_replies(
            &[
                &format!("CONFIG SET maxmemory-policy {policy}"),
                "SET persistent v",
                "CONFIG SET maxmemory 1",
            ],
            &[
                "SET x y",
                "GET persistent",
                "LPUSH l a",
                "DEL persistent",
                "CONFIG GET maxmemory-policy",
                "MULTI",
                "PING",
                "DISCARD",
            ],
        );
    }
}

#[test]
fn scripts_under_oom_match_redis() {
    // Also in turn: what this test allocates (clients, replies, process start-up) is
    // counted by the process-wide counter the in-process tests measure.
    let _turn = serial();
    let [r, o] = both();
    for c in [&mut r.conn(), &mut o.conn()] {
        c.cmd("CONFIG SET maxmemory 1");
    }
    let (mut a, mut b) = (r.conn(), o.conn());
    let script = |c: &mut Conn, body: &str| {
        c.call(&[b"EVAL".to_vec(), body.as_bytes().to_vec(), b"0".to_vec()])
            .expect("eval")
    };
    for body in [
        "#!lua\nreturn redis.call('set','x','y')",
        "#!lua flags=allow-oom\nreturn redis.call('set','x','y')",
        "#!lua flags=no-writes\nreturn redis.call('get','x')",
        "return redis.pcall('set','z','y')",
        "return redis.call('get','x')",
    ] {
        let (ra, rb) = (script(&mut a, body), script(&mut b, body));
        // Error texts name the script's sha in both; compare up to it.
        match (&ra, &rb) {
            (Frame::Error(x), Frame::Error(y)) => assert_eq!(
                x.split(" script:").next(),
                y.split(" script:").next(),
                "{body}"
            ),
            _ => assert_eq!(ra, rb, "{body}"),
        }
    }
}

#[test]
fn object_freq_with_log_factor_zero_matches_redis() {
    // Also in turn: what this test allocates (clients, replies, process start-up) is
    // counted by the process-wide counter the in-process tests measure.
    let _turn = serial();
    same_replies(
        &[
            "CONFIG SET maxmemory-policy allkeys-lfu",
            "CONFIG SET lfu-log-factor 0",
        ],
        &[
            "SET k hello",
            "OBJECT FREQ k",
            "GET k",
            "GET k",
            "GET k",
            "OBJECT FREQ k",
            "SET k again",
            "OBJECT FREQ k",
            "EXISTS k",
            "OBJECT FREQ k",
            "OBJECT IDLETIME k",
            "OBJECT FREQ missing",
            "CONFIG SET maxmemory-policy volatile-lru",
            "OBJECT FREQ k",
            "CONFIG GET maxmemory-policy",
        ],
    );
}

fn info_fields(c: &mut Conn, section: &str) -> Vec<(String, String)> {
    let text = match c.cmd(&format!("INFO {section}")) {
        Frame::Bulk(b) | Frame::Verbatim(_, b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("{other}"),
    };
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// The value's shape: integer, decimal, percentage, human size, or other text.
fn shape(v: &str) -> &'static str {
    if v.parse::<i64>().is_ok() {
        "int"
    } else if v
        .strip_suffix('%')
        .is_some_and(|x| x.parse::<f64>().is_ok())
    {
        "percent"
    } else if v.parse::<f64>().is_ok() {
        "decimal"
    } else if v
        .strip_suffix(['B', 'K', 'M', 'G', 'T'])
        .is_some_and(|x| x.parse::<f64>().is_ok())
    {
        "human"
    } else {
        "text"
    }
}

#[test]
fn info_memory_fields_and_types_match_redis() {
    // Also in turn: what this test allocates (clients, replies, process start-up) is
    // counted by the process-wide counter the in-process tests measure.
    let _turn = serial();
    let [r, o] = both();
    let (mut a, mut b) = (r.conn(), o.conn());
    let mine = info_fields(&mut a, "memory");
    let theirs = info_fields(&mut b, "memory");
    // The lazy-free lines are another change's (issue 18's lazyfree part).
    let names = |f: &[(String, String)]| {
        f.iter()
            .map(|(k, _)| k.clone())
            .filter(|k| !k.starts_with("lazyfree"))
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&mine), names(&theirs));
    for (k, x) in &mine {
        if k == "mem_allocator" || k == "maxmemory_policy" {
            continue;
        }
        let y = &theirs.iter().find(|(n, _)| n == k).expect("same names").1;
        assert_eq!(shape(x), shape(y), "{k}: {x} vs {y}");
    }
    // The live bytes are below the resident size and the peak is at least them.
    let num = |f: &[(String, String)], k: &str| -> i64 {
        f.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.parse().unwrap())
            .unwrap()
    };
    assert!(num(&mine, "used_memory") < num(&mine, "used_memory_rss"));
    assert!(num(&mine, "used_memory_peak") >= num(&mine, "used_memory"));
    assert_eq!(
        num(&mine, "used_memory_overhead") + num(&mine, "used_memory_dataset"),
        num(&mine, "used_memory")
    );
    for f in [
        "evicted_keys",
        "total_eviction_exceeded_time",
        "current_eviction_exceeded_time",
    ] {
        assert_eq!(
            conn_info(&mut a, "stats", f),
            conn_info(&mut b, "stats", f),
            "{f}"
        );
    }
}

/// A reply's shape: the map keys in order with their value kinds.
fn frame_shape(f: &Frame) -> Vec<(String, &'static str)> {
    let Frame::Array(items) = f else {
        panic!("MEMORY STATS answered {f}");
    };
    items
        .chunks(2)
        .map(|kv| {
            let k = match &kv[0] {
                Frame::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("key {other}"),
            };
            let kind = match &kv[1] {
                Frame::Int(_) => "int",
                // RESP2 doubles are bulk strings.
                Frame::Bulk(b)
                    if std::str::from_utf8(b).is_ok_and(|s| s.parse::<f64>().is_ok()) =>
                {
                    "double"
                }
                Frame::Array(_) => "map",
                _ => "other",
            };
            (k, kind)
        })
        .collect()
}

#[test]
fn memory_stats_and_doctor_match_redis() {
    // Also in turn: what this test allocates (clients, replies, process start-up) is
    // counted by the process-wide counter the in-process tests measure.
    let _turn = serial();
    let [r, o] = both();
    let (mut a, mut b) = (r.conn(), o.conn());
    for c in [&mut a, &mut b] {
        c.cmd("SET k v");
        c.cmd("SET t v EX 100");
    }
    let (x, y) = (a.cmd("MEMORY STATS"), b.cmd("MEMORY STATS"));
    assert_eq!(frame_shape(&x), frame_shape(&y));
    // (MALLOC-STATS differs by allocator: Debian's redis-server has jemalloc.)
    for line in ["MEMORY PURGE", "MEMORY DOCTOR extra", "MEMORY STATS x"] {
        assert_eq!(a.cmd(line), b.cmd(line), "{line}");
    }
    let doctor = |c: &mut Conn| match c.cmd("MEMORY DOCTOR") {
        Frame::Bulk(t) => String::from_utf8(t).unwrap(),
        other => panic!("{other}"),
    };
    let (d, e) = (doctor(&mut a), doctor(&mut b));
    assert!(
        d.starts_with("Hi Sam, ") || d.starts_with("Sam, I detected"),
        "{d}"
    );
    assert!(e.starts_with("Hi Sam, "), "{e}");
}

/// Every command counts one access per key it looks up (Redis `lookupKey`), never two:
/// under `lfu-log-factor 0` each access adds exactly one to OBJECT FREQ, so the counter
/// after each command must be redis-server's. Each case: setup lines, then the command.
#[test]
fn each_command_counts_one_access_per_key_as_redis() {
    // Builds commands in this process: the in-process tests' counter must not see them.
    let _s = serial();
    const CASES: &[(&[&str], &str, &[&str])] = &[
        (&["SET s hello"], "APPEND s world", &["s"]),
        (&["SET s hello"], "SETRANGE s 2 XY", &["s"]),
        (&["SET s hello"], "GETRANGE s 0 2", &["s"]),
        (&["SET s hello"], "STRLEN s", &["s"]),
        (&["SET s hello"], "GET s", &["s"]),
        (&["SET s hello"], "GETEX s PERSIST", &["s"]),
        (&["SET s hello"], "GETSET s bye", &["s"]),
        (&["SET s hello"], "SET s bye GET", &["s"]),
        (&["SET s hello"], "SET s bye XX", &["s"]),
        (&["SET s hello"], "SET s bye NX", &["s"]),
        (&["SET s hello"], "SETNX s bye", &["s"]),
        (&["SET s hello"], "MGET s s", &["s"]),
        // Past Redis's shared integers (below 10000), whose counters all keys share.
        (&["SET n 100000"], "INCR n", &["n"]),
        (&["SET n 100000"], "DECRBY n 3", &["n"]),
        (&["SET n 100000"], "INCRBYFLOAT n 1.5", &["n"]),
        (&[], "XADD x 1-1 f v", &["x"]),
        (&["RPUSH l a"], "RPOPLPUSH l m", &["l", "m"]),
        (&["SET s hello"], "SETBIT s 3 1", &["s"]),
        (&["SET s hello"], "GETBIT s 3", &["s"]),
        (&["SET s hello"], "BITCOUNT s", &["s"]),
        (&["SET s hello"], "BITPOS s 1", &["s"]),
        (
            &["SET s hello"],
            "BITFIELD s GET u8 0 INCRBY u8 8 1",
            &["s"],
        ),
        (&["SET a x", "SET b y"], "BITOP OR d a b", &["a", "b", "d"]),
        (&["PFADD h a b"], "PFADD h c", &["h"]),
        (&["PFADD h a b"], "PFCOUNT h", &["h"]),
        (&["RPUSH l a b c"], "RPUSH l d", &["l"]),
        (&["RPUSH l a b c"], "LPOP l", &["l"]),
        (&["RPUSH l a b c"], "LRANGE l 0 -1", &["l"]),
        (&["RPUSH l a b c"], "LINDEX l 1", &["l"]),
        (&["RPUSH l a b c"], "LLEN l", &["l"]),
        (&["RPUSH l a b c"], "LSET l 0 z", &["l"]),
        (&["RPUSH l a b c"], "LINSERT l BEFORE b q", &["l"]),
        (&["RPUSH l a b c"], "LREM l 0 b", &["l"]),
        (&["RPUSH l a b c"], "LTRIM l 0 1", &["l"]),
        (&["RPUSH l a b c"], "LPOS l c", &["l"]),
        (
            &["RPUSH l a b c", "RPUSH m x"],
            "LMOVE l m LEFT RIGHT",
            &["l", "m"],
        ),
        (&["RPUSH l a b c"], "RPOPLPUSH l l", &["l"]),
        (&["HSET h f v g w"], "HSET h f z", &["h"]),
        (&["HSET h f v g w"], "HGET h f", &["h"]),
        (&["HSET h f v g w"], "HGETALL h", &["h"]),
        (&["HSET h f v g w"], "HDEL h f", &["h"]),
        (&["HSET h f 1"], "HINCRBY h f 2", &["h"]),
        (&["HSET h f 1"], "HINCRBYFLOAT h f 2.5", &["h"]),
        (&["HSET h f v"], "HEXISTS h f", &["h"]),
        (&["HSET h f v"], "HLEN h", &["h"]),
        (&["HSET h f v"], "HMGET h f g", &["h"]),
        (&["HSET h f v"], "HSETNX h f z", &["h"]),
        (&["HSET h f v"], "HSTRLEN h f", &["h"]),
        (&["HSET h f v"], "HKEYS h", &["h"]),
        (&["SADD t a b"], "SADD t c", &["t"]),
        (&["SADD t a b"], "SREM t a", &["t"]),
        (&["SADD t a b"], "SISMEMBER t a", &["t"]),
        (&["SADD t a b"], "SMISMEMBER t a z", &["t"]),
        (&["SADD t a"], "SMEMBERS t", &["t"]),
        (&["SADD t a b"], "SCARD t", &["t"]),
        (&["SADD t a"], "SPOP t", &["t"]),
        (&["SADD t a"], "SRANDMEMBER t", &["t"]),
        (&["SADD t a b", "SADD u b"], "SINTER t u", &["t", "u"]),
        (
            &["SADD t a b", "SADD u b"],
            "SUNIONSTORE d t u",
            &["t", "u", "d"],
        ),
        (&["SADD t a b", "SADD u b"], "SMOVE t u a", &["t", "u"]),
        (&["ZADD z 1 a 2 b"], "ZADD z 3 c", &["z"]),
        (&["ZADD z 1 a 2 b"], "ZINCRBY z 1 a", &["z"]),
        (&["ZADD z 1 a 2 b"], "ZSCORE z a", &["z"]),
        (&["ZADD z 1 a 2 b"], "ZMSCORE z a b", &["z"]),
        (&["ZADD z 1 a 2 b"], "ZRANGE z 0 -1", &["z"]),
        (&["ZADD z 1 a 2 b"], "ZRANK z b", &["z"]),
        (&["ZADD z 1 a 2 b"], "ZREM z a", &["z"]),
        (&["ZADD z 1 a 2 b"], "ZCARD z", &["z"]),
        (&["ZADD z 1 a 2 b"], "ZCOUNT z 0 5", &["z"]),
        (&["ZADD z 1 a 2 b"], "ZPOPMIN z", &["z"]),
        (&["ZADD z 1 a 2 b"], "ZRANGEBYSCORE z 0 5", &["z"]),
        (
            &["ZADD z 1 a 2 b", "ZADD y 1 a"],
            "ZUNIONSTORE d 2 z y",
            &["z", "y", "d"],
        ),
        (&["SET s v"], "EXPIRE s 100", &["s"]),
        (&["SET s v EX 100"], "PERSIST s", &["s"]),
        (&["SET s v"], "TTL s", &["s"]),
        (&["SET s v"], "TYPE s", &["s"]),
        (&["SET s v"], "EXISTS s s", &["s"]),
        (&["SET s v"], "TOUCH s", &["s"]),
        (&["SET s v"], "DUMP s", &["s"]),
        (&["SET s v"], "COPY s d", &["s", "d"]),
        (&["SET s v"], "RENAME s d", &["d"]),
        (&["RPUSH l 3 1 2"], "SORT l", &["l"]),
        (&["XADD x 1-1 f v"], "XADD x 2-1 f v", &["x"]),
        (&["XADD x 1-1 f v"], "XLEN x", &["x"]),
        (&["XADD x 1-1 f v"], "XRANGE x - +", &["x"]),
    ];
    let [r, o] = both();
    let (mut a, mut b) = (r.conn(), o.conn());
    for c in [&mut a, &mut b] {
        c.cmd("CONFIG SET maxmemory-policy allkeys-lfu");
        c.cmd("CONFIG SET lfu-log-factor 0");
    }
    let mut differ = Vec::new();
    for (setup, command, keys) in CASES {
        for c in [&mut a, &mut b] {
            c.cmd("FLUSHALL");
            for line in *setup {
                c.cmd(line);
            }
        }
        assert_eq!(a.cmd(command), b.cmd(command), "{command}");
        for k in *keys {
            let line = format!("OBJECT FREQ {k}");
            let (x, y) = (a.cmd(&line), b.cmd(&line));
            if x != y {
                differ.push(format!("{command}: {k} {x} vs {y}"));
            }
        }
    }
    assert!(differ.is_empty(), "{differ:#?}");
}

/// Redis's own maxmemory.tcl scenarios with one-byte values, run against a respite process
/// (its own counter, no test thread in it) and redis-server alike: filled to within 4 KiB
/// of a limit 100 KiB above the start, as many keys again stay under the limit plus 4 KiB;
/// a volatile policy evicts only keys with a TTL. A removed small key must give its slot
/// memory back, and INFO must not count a buffer of its own, or this fails.
#[test]
fn one_byte_values_stay_within_4k_of_the_limit_as_in_redis() {
    // Builds commands in this process: the in-process tests' counter must not see them.
    let _s = serial();
    let run = |p: &ServerProcess, policy: &str, mixed: bool| {
        let mut c = p.conn();
        c.cmd("CONFIG SET maxmemory 0");
        c.cmd("FLUSHALL");
        let limit = used(&mut c) + 100 * 1024;
        c.cmd(&format!("CONFIG SET maxmemory {limit}"));
        c.cmd(&format!("CONFIG SET maxmemory-policy {policy}"));
        let mut n = 0;
        loop {
            let line = if mixed && n % 2 == 0 {
                format!("SET key:{n} x")
            } else {
                format!("SETEX key:{n} 10000 x")
            };
            c.cmd(&line);
            if used(&mut c) + 4096 > limit {
                break;
            }
            n += 1;
        }
        assert!(n > 10, "{policy}: {n} keys filled the budget");
        for j in 0..n {
            // Refusals are allowed (a volatile policy may run out of TTL keys).
            c.cmd(&format!("SETEX foo:{j} 10000 x"));
        }
        let now = used(&mut c);
        assert!(now < limit + 4096, "{policy}: used {now}, limit {limit}");
        if mixed {
            for j in (0..n).step_by(2) {
                assert_eq!(c.cmd(&format!("EXISTS key:{j}")), Frame::Int(1), "{policy}");
            }
        }
        c.cmd("CONFIG SET maxmemory 0");
    };
    let [r, o] = both();
    for p in [&r, &o] {
        for policy in [
            "allkeys-random",
            "allkeys-lru",
            "allkeys-lfu",
            "volatile-ttl",
        ] {
            run(p, policy, false);
        }
        for policy in [
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
        ] {
            run(p, policy, true);
        }
    }
}

/// `lazyfree-lazy-expire`: a big value whose key expires is freed on the lazyfree thread
/// (one `lazyfreed_objects`), as redis-server does; with the setting off, in place (none).
#[test]
fn lazy_expire_frees_big_expired_values_off_the_command_path_as_redis() {
    // Builds commands in this process: the in-process tests' counter must not see them.
    let _s = serial();
    let [r, o] = both();
    for p in [&r, &o] {
        let mut c = p.conn();
        let freed = |c: &mut Conn| conn_info_int(c, "memory", "lazyfreed_objects");
        for (lazy, want) in [("no", 0), ("yes", 1)] {
            c.cmd(&format!("CONFIG SET lazyfree-lazy-expire {lazy}"));
            c.cmd("CONFIG RESETSTAT");
            // 200 string members: a hash table (past the listpack limit) worth 200 frees.
            let mut sadd = vec![b"SADD".to_vec(), b"big".to_vec()];
            sadd.extend((0..200).map(|i| format!("member:{i}").into_bytes()));
            assert_eq!(c.call(&sadd).expect("sadd"), Frame::Int(200));
            c.cmd("PEXPIRE big 1");
            // Reached lazily (this access) or by the active sweep: the same free either way.
            common::wait_until("big expired", || c.cmd("EXISTS big") == Frame::Int(0));
            if want > 0 {
                common::wait_until("lazily freed", || freed(&mut c) == want);
            }
            assert_eq!(freed(&mut c), want, "lazyfree-lazy-expire {lazy}");
        }
    }
}

/// DEL frees a big value before it replies, as Redis's does: `used_memory` read right after
/// has given back most of what the value took, and nothing went to the lazyfree thread
/// (respite frees it after the key's lock and off the runtime's worker, issue 17). UNLINK
/// of the same value is one `lazyfreed_objects`. The DEL is in SLOWLOG (its free counted
/// in its time; respite records it once the free is done).
#[test]
fn del_frees_a_big_value_before_replying_as_redis() {
    let _s = serial();
    let [r, o] = both();
    for p in [&r, &o] {
        let mut c = p.conn();
        let lazy = |c: &mut Conn| {
            (
                conn_info_int(c, "memory", "lazyfree_pending_objects"),
                conn_info_int(c, "memory", "lazyfreed_objects"),
            )
        };
        c.cmd("CONFIG RESETSTAT");
        // 100 k members: a hash table past the command layer's off-core effort (16 k).
        let fill = |c: &mut Conn| {
            for base in (0..100_000).step_by(1000) {
                let mut sadd = vec![b"SADD".to_vec(), b"big".to_vec()];
                sadd.extend((base..base + 1000).map(|i| format!("member:{i}").into_bytes()));
                assert_eq!(c.call(&sadd).expect("sadd"), Frame::Int(1000));
            }
        };
        let empty = used(&mut c);
        fill(&mut c);
        let full = used(&mut c);
        assert!(
            full - empty > 4 << 20,
            "a 100 k set took {} bytes",
            full - empty
        );
        // The DEL is recorded with its free (a big DEL shows in SLOWLOG, as in Redis).
        c.cmd("CONFIG SET slowlog-log-slower-than 0");
        c.cmd("SLOWLOG RESET");
        assert_eq!(c.cmd("DEL big"), Frame::Int(1));
        let logged = match c.cmd("SLOWLOG GET 10") {
            Frame::Array(entries) => entries.into_iter().find_map(|e| match e {
                Frame::Array(f) if f.len() >= 4 => match &f[3] {
                    Frame::Array(args) if args.first() == Some(&Frame::Bulk(b"DEL".to_vec())) => {
                        Some(args.clone())
                    }
                    _ => None,
                },
                _ => None,
            }),
            other => panic!("SLOWLOG GET: {other:?}"),
        };
        assert_eq!(
            logged,
            Some(vec![
                Frame::Bulk(b"DEL".to_vec()),
                Frame::Bulk(b"big".to_vec())
            ])
        );
        c.cmd("CONFIG SET slowlog-log-slower-than 10000");
        let after = used(&mut c);
        assert!(
            full - after > (full - empty) * 3 / 4,
            "DEL gave back {} of {} bytes before replying",
            full - after,
            full - empty
        );
        assert_eq!(lazy(&mut c), (0, 0));
        fill(&mut c);
        assert_eq!(c.cmd("UNLINK big"), Frame::Int(1));
        common::wait_until("unlinked value freed", || lazy(&mut c) == (0, 1));
    }
}

/// Redis's `evictionTimeProc`: with `maxmemory-eviction-tenacity 0` a command evicts at
/// most one batch of 16 keys before its budget is spent; the rest is evicted between
/// commands by the eviction timer. So memory comes under the limit while far fewer than
/// (evicted keys / 16) commands were sent: without the timer it could not.
#[test]
fn the_eviction_timer_carries_on_between_commands() {
    // Builds commands in this process: the in-process tests' counter must not see them.
    let _s = serial();
    let p = ServerProcess::respite(&[]);
    let mut c = p.conn();
    assert!(fill(&mut c, "k", 0..20_000, |_| None).is_empty());
    c.cmd("CONFIG SET maxmemory-policy allkeys-random");
    c.cmd("CONFIG SET maxmemory-eviction-tenacity 0");
    let half = used(&mut c) / 2;
    c.cmd(&format!("CONFIG SET maxmemory {half}"));
    // Commands sent from here on, each allowed one batch of 16 by the command path.
    let mut sent = 0;
    common::wait_until("used_memory <= maxmemory", || {
        sent += 1;
        used(&mut c) <= half
    });
    sent += 1;
    let evicted = conn_info_int(&mut c, "stats", "evicted_keys");
    assert!(
        evicted > 16 * (sent + 1),
        "{evicted} keys evicted over {sent} commands"
    );
    assert_eq!(c.cmd("PING"), Frame::Simple("PONG".into()));
}

/// `mem_clients_normal` is what the connections hold: a client queueing a 200 KB SET in
/// MULTI raises it by at least that, as in redis-server; and CONFIG RESETSTAT leaves
/// `used_memory_peak` alone (Redis 7.2 `resetServerStats` does not touch the peak).
#[test]
fn clients_memory_and_peak_after_resetstat_as_redis() {
    // Builds commands in this process: the in-process tests' counter must not see them.
    let _s = serial();
    let [r, o] = both();
    for p in [&r, &o] {
        let mut a = p.conn();
        let mem = |c: &mut Conn, f: &str| conn_info_int(c, "memory", f);
        let before = mem(&mut a, "mem_clients_normal");
        let mut b = p.conn();
        assert_eq!(b.cmd("MULTI"), ok());
        let set = [b"SET".to_vec(), b"k".to_vec(), vec![b'v'; 200_000]];
        assert_eq!(
            b.call(&set).expect("queued"),
            Frame::Simple("QUEUED".into())
        );
        common::wait_until("the queue counted", || {
            mem(&mut a, "mem_clients_normal") >= before + 200_000
        });
        assert_eq!(b.cmd("DISCARD"), ok());
        let peak = mem(&mut a, "used_memory_peak");
        assert_eq!(a.cmd("CONFIG RESETSTAT"), ok());
        assert!(mem(&mut a, "used_memory_peak") >= peak);
    }
}
