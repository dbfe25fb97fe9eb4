//! Durable engine, lists and streams: seeded random command sequences run against a redb
//! TestServer, which is then restarted on the same directory; a canonical dump of the
//! keyspace taken before the restart must equal the one taken after, for every
//! `appendfsync` mode. The commands record element-level changes (ListPush, XAdd, XPelPut…),
//! so this checks that every in-place edit is journaled exactly.

mod common;

use common::{Conn, Frame};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use respite::TestServer;
use std::path::Path;
use std::time::Duration;

const LISTS: &[&str] = &["l0", "l1", "l2", "{l}a", "{l}b"];
const STREAMS: &[&str] = &["s0", "s1", "s2"];
const GROUPS: &[&str] = &["g0", "g1"];
const CONSUMERS: &[&str] = &["c0", "c1", "c2"];
const VALUES: &[&str] = &["a", "b", "c", "d", "e"];

fn start(dir: &Path, fsync: &str) -> TestServer {
    TestServer::builder()
        .redb(dir)
        .manual_clock()
        .param("appendfsync", fsync)
        .start()
        .expect("server starts")
}

fn args(parts: &[String]) -> Vec<Vec<u8>> {
    parts.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// Keys in a stable order.
fn keys(c: &mut Conn) -> Vec<Vec<u8>> {
    let mut out = match c.cmd("KEYS *") {
        Frame::Array(v) => v
            .into_iter()
            .filter_map(|f| match f {
                Frame::Bulk(b) => Some(b),
                _ => None,
            })
            .collect::<Vec<_>>(),
        other => panic!("KEYS: {other}"),
    };
    out.sort();
    out
}

/// A flat `name value ...` reply without the named fields (recursively for nested maps).
fn strip(f: Frame, drop: &[&str]) -> Frame {
    match f {
        Frame::Array(v) => {
            let is_map = v.len().is_multiple_of(2)
                && v.iter().step_by(2).all(|k| matches!(k, Frame::Bulk(_)))
                && v.iter().step_by(2).any(|k| match k {
                    Frame::Bulk(b) => b.contains(&b'-') || b == b"name" || b == b"length",
                    _ => false,
                });
            if !is_map {
                return Frame::Array(v.into_iter().map(|x| strip(x, drop)).collect());
            }
            let mut out = Vec::new();
            let mut it = v.into_iter();
            while let (Some(k), Some(x)) = (it.next(), it.next()) {
                let skip =
                    matches!(&k, Frame::Bulk(b) if drop.iter().any(|d| d.as_bytes() == &b[..]));
                if !skip {
                    out.push(k);
                    out.push(strip(x, drop));
                }
            }
            Frame::Array(out)
        }
        other => other,
    }
}

fn call(c: &mut Conn, parts: &[&[u8]]) -> Frame {
    let a: Vec<Vec<u8>> = parts.iter().map(|p| p.to_vec()).collect();
    c.call(&a).expect("reply")
}

/// A canonical dump of the keyspace (db 0).
fn dump(c: &mut Conn) -> Vec<String> {
    let mut out = Vec::new();
    for k in keys(c) {
        let key = &k[..];
        let ty = call(c, &[b"TYPE", key]);
        out.push(format!("{} {ty}", String::from_utf8_lossy(key)));
        out.push(format!("  pexpiretime {}", call(c, &[b"PEXPIRETIME", key])));
        match &ty {
            Frame::Simple(t) if t == "list" => {
                out.push(format!("  {}", call(c, &[b"LRANGE", key, b"0", b"-1"])));
            }
            Frame::Simple(t) if t == "stream" => {
                out.push(format!("  {}", call(c, &[b"XRANGE", key, b"-", b"+"])));
                let full = call(c, &[b"XINFO", b"STREAM", key, b"FULL"]);
                // Rebuilt on load from the entries (node layout), see src/persist/load.rs.
                let full = strip(full, &["radix-tree-keys", "radix-tree-nodes"]);
                out.push(format!("  full {full}"));
                let groups = call(c, &[b"XINFO", b"GROUPS", key]);
                out.push(format!("  groups {groups}"));
                let Frame::Array(gs) = groups else {
                    continue;
                };
                for g in gs {
                    let Frame::Array(fields) = g else { continue };
                    let Some(Frame::Bulk(name)) = fields.get(1).cloned() else {
                        continue;
                    };
                    let pending = call(c, &[b"XPENDING", key, &name, b"-", b"+", b"1000000"]);
                    out.push(format!("  pending {pending}"));
                    let cons = call(c, &[b"XINFO", b"CONSUMERS", key, &name]);
                    let cons = strip(cons, &["idle", "inactive"]);
                    out.push(format!("  consumers {cons}"));
                }
            }
            _ => out.push(format!("  {}", call(c, &[b"GET", key]))),
        }
    }
    out
}

/// Generates and runs random commands.
struct Gen {
    rng: SmallRng,
    ids: Vec<String>,
    counter: u64,
}

impl Gen {
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.rng.gen_range(0..from.len())]
    }

    /// A list key, sometimes a key of another type (WRONGTYPE).
    fn lkey(&mut self) -> String {
        match self.rng.gen_range(0..60) {
            0 => "str".into(),
            1 => self.pick(STREAMS).into(),
            _ => self.pick(LISTS).into(),
        }
    }

    fn skey(&mut self) -> String {
        match self.rng.gen_range(0..60) {
            0 => "str".into(),
            1 => self.pick(LISTS).into(),
            _ => self.pick(STREAMS).into(),
        }
    }

    fn value(&mut self) -> String {
        match self.rng.gen_range(0..30) {
            0 => "x".repeat(self.rng.gen_range(60..200)),
            1 => {
                self.counter += 1;
                format!("u{}", self.counter)
            }
            _ => self.pick(VALUES).into(),
        }
    }

    fn int(&mut self, lo: i64, hi: i64) -> String {
        self.rng.gen_range(lo..=hi).to_string()
    }

    fn id(&mut self) -> String {
        if self.ids.is_empty() || self.rng.gen_range(0..10) == 0 {
            return format!("{}-{}", self.rng.gen_range(0..3), self.rng.gen_range(0..3));
        }
        let i = self.rng.gen_range(0..self.ids.len());
        self.ids[i].clone()
    }

    fn end(&mut self) -> String {
        self.pick(&["LEFT", "RIGHT"]).into()
    }

    fn trim(&mut self, v: &mut Vec<String>) {
        if self.rng.gen_bool(0.5) {
            v.push("MAXLEN".into());
            let approx = self.rng.gen_range(0..3);
            if approx == 1 {
                v.push("~".into());
            } else if approx == 2 {
                v.push("=".into());
            }
            v.push(self.int(0, 12));
            if approx == 1 && self.rng.gen_bool(0.3) {
                v.push("LIMIT".into());
                v.push(self.int(0, 20));
            }
        } else {
            v.push("MINID".into());
            if self.rng.gen_bool(0.5) {
                v.push("~".into());
            }
            v.push(self.id());
        }
    }

    fn list_cmd(&mut self) -> Vec<String> {
        let s = |x: &str| x.to_string();
        let k = self.lkey();
        match self.rng.gen_range(0..20) {
            0..=2 | 18 => {
                let cmd = self.pick(&["LPUSH", "RPUSH", "LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]);
                let mut v = vec![s(cmd), k];
                for _ in 0..self.rng.gen_range(1..4) {
                    v.push(self.value());
                }
                v
            }
            3..=4 => {
                let cmd = self.pick(&["LPOP", "RPOP"]);
                let mut v = vec![s(cmd), k];
                if self.rng.gen_bool(0.4) {
                    v.push(self.int(0, 4));
                }
                v
            }
            5 => vec![s("LSET"), k, self.int(-4, 4), self.value()],
            6 => {
                let at = self.pick(&["BEFORE", "AFTER"]).into();
                vec![s("LINSERT"), k, at, self.value(), self.value()]
            }
            7 => vec![s("LREM"), k, self.int(-2, 2), self.value()],
            8 => vec![s("LTRIM"), k, self.int(-5, 3), self.int(-5, 6)],
            9 => {
                let dst = self.lkey();
                vec![s("LMOVE"), k, dst, self.end(), self.end()]
            }
            10 => vec![s("RPOPLPUSH"), k, self.lkey()],
            11 => {
                let k2 = self.lkey();
                let mut v = vec![s("LMPOP"), s("2"), k, k2, self.end()];
                if self.rng.gen_bool(0.5) {
                    v.push(s("COUNT"));
                    v.push(self.int(1, 4));
                }
                v
            }
            12 => vec![s("BLPOP"), k, s("0.01")],
            13 => vec![
                s("BLMOVE"),
                k,
                self.lkey(),
                self.end(),
                self.end(),
                s("0.01"),
            ],
            14 => vec![s("EXPIRE"), k, self.int(1, 60)],
            15 => vec![s("PERSIST"), k],
            16 => vec![s("DEL"), k],
            17 => vec![s("LINDEX"), k, self.int(-3, 3)],
            _ => vec![s("RPUSH"), k, self.value()],
        }
    }

    fn stream_cmd(&mut self) -> Vec<String> {
        let s = |x: &str| x.to_string();
        let k = self.skey();
        let g = self.pick(GROUPS).to_string();
        let c = self.pick(CONSUMERS).to_string();
        match self.rng.gen_range(0..40) {
            0..=9 => {
                let mut v = vec![s("XADD"), k];
                if self.rng.gen_range(0..8) == 0 {
                    v.push(s("NOMKSTREAM"));
                }
                if self.rng.gen_bool(0.35) {
                    self.trim(&mut v);
                }
                if self.rng.gen_range(0..10) == 0 {
                    v.push(format!("{}-*", self.rng.gen_range(0..3)));
                } else {
                    v.push(s("*"));
                }
                for _ in 0..self.rng.gen_range(1..3) {
                    v.push(self.value());
                    v.push(self.value());
                }
                v
            }
            10 => {
                let mut v = vec![s("XDEL"), k];
                for _ in 0..self.rng.gen_range(1..3) {
                    v.push(self.id());
                }
                v
            }
            11 => {
                let mut v = vec![s("XTRIM"), k];
                self.trim(&mut v);
                v
            }
            12 => {
                let mut v = vec![s("XSETID"), k];
                match self.rng.gen_range(0..6) {
                    0 => v.push(self.id()),
                    1 => v.push(format!("{}-0", u64::MAX / 2)),
                    2 => {
                        v.push(format!("{}-5", u64::MAX / 2));
                        v.extend([s("ENTRIESADDED"), self.int(50, 60)]);
                        v.extend([s("MAXDELETEDID"), s("1-1")]);
                    }
                    _ => v.push(s("$")),
                }
                v
            }
            13..=14 => {
                let start = self.pick(&["$", "0", "0-0"]).to_string();
                let mut v = vec![s("XGROUP"), s("CREATE"), k, g, start];
                if self.rng.gen_bool(0.5) {
                    v.push(s("MKSTREAM"));
                }
                if self.rng.gen_bool(0.2) {
                    v.extend([s("ENTRIESREAD"), self.int(0, 5)]);
                }
                v
            }
            15 => {
                let id = if self.rng.gen_bool(0.5) {
                    s("$")
                } else {
                    self.id()
                };
                vec![s("XGROUP"), s("SETID"), k, g, id]
            }
            16 => vec![s("XGROUP"), s("DESTROY"), k, g],
            17 => vec![s("XGROUP"), s("CREATECONSUMER"), k, g, c],
            18 => vec![s("XGROUP"), s("DELCONSUMER"), k, g, c],
            19..=26 => {
                let mut v = vec![s("XREADGROUP"), s("GROUP"), g, c];
                if self.rng.gen_bool(0.6) {
                    v.extend([s("COUNT"), self.int(1, 4)]);
                }
                if self.rng.gen_range(0..6) == 0 {
                    v.push(s("NOACK"));
                }
                let from = if self.rng.gen_range(0..4) == 0 {
                    s("0")
                } else {
                    s(">")
                };
                v.extend([s("STREAMS"), k, from]);
                v
            }
            27..=28 => {
                let mut v = vec![s("XACK"), k, g];
                for _ in 0..self.rng.gen_range(1..4) {
                    v.push(self.id());
                }
                v
            }
            29..=32 => {
                let mut v = vec![s("XCLAIM"), k, g, c, self.int(0, 3000)];
                for _ in 0..self.rng.gen_range(1..3) {
                    v.push(self.id());
                }
                for opt in ["FORCE", "JUSTID"] {
                    if self.rng.gen_range(0..4) == 0 {
                        v.push(s(opt));
                    }
                }
                if self.rng.gen_range(0..4) == 0 {
                    v.extend([s("RETRYCOUNT"), self.int(0, 9)]);
                }
                if self.rng.gen_range(0..5) == 0 {
                    v.extend([s("IDLE"), self.int(0, 5000)]);
                }
                if self.rng.gen_range(0..6) == 0 {
                    v.extend([s("LASTID"), self.id()]);
                }
                v
            }
            33..=35 => {
                let mut v = vec![s("XAUTOCLAIM"), k, g, c, self.int(0, 3000), s("0")];
                if self.rng.gen_bool(0.5) {
                    v.extend([s("COUNT"), self.int(1, 5)]);
                }
                if self.rng.gen_range(0..4) == 0 {
                    v.push(s("JUSTID"));
                }
                v
            }
            36 => vec![s("EXPIRE"), k, self.int(1, 60)],
            37 => vec![s("DEL"), k],
            _ => vec![s("XLEN"), k],
        }
    }

    fn cmd(&mut self) -> Vec<String> {
        match self.rng.gen_range(0..200) {
            0 => vec!["SET".into(), self.lkey(), "plain".into()],
            1..=99 => self.list_cmd(),
            _ => self.stream_cmd(),
        }
    }

    /// Notes the IDs an XADD reply gave, for later XDEL/XACK/XCLAIM arguments.
    fn note(&mut self, reply: &Frame) {
        if let Frame::Bulk(b) = reply {
            let s = String::from_utf8_lossy(b);
            if s.contains('-') && s.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                self.ids.push(s.into_owned());
                if self.ids.len() > 64 {
                    self.ids.remove(0);
                }
            }
        }
    }
}

/// Runs `steps` random steps on `srv`: single commands, MULTI/EXEC blocks, blocking
/// commands served by another client, clock advances (expiry).
fn run(srv: &TestServer, g: &mut Gen, steps: usize) {
    let mut c = Conn::connect(srv.port()).expect("connect");
    let mut blocked = Conn::connect(srv.port()).expect("connect");
    c.cmd("SET str hello");
    for _ in 0..steps {
        match g.rng.gen_range(0..100) {
            0..=5 => {
                // A transaction: whole-key writes and element-level edits of the same key
                // in one journal batch.
                assert_eq!(c.cmd("MULTI"), Frame::Simple("OK".into()));
                let n = g.rng.gen_range(2..6);
                for _ in 0..n {
                    let cmd = g.cmd();
                    let r = c.call(&args(&cmd)).expect("reply");
                    assert!(
                        matches!(&r, Frame::Simple(q) if q == "QUEUED")
                            || matches!(r, Frame::Error(_)),
                        "{cmd:?}: {r}"
                    );
                }
                let r = c.cmd("EXEC");
                if let Frame::Array(v) = &r {
                    for x in v {
                        g.note(x);
                    }
                }
            }
            6..=8 => {
                // A blocking pop served by a later push (or at once if there is data).
                let k = g.pick(LISTS).to_string();
                let op = match g.rng.gen_range(0..3) {
                    0 => format!("BLPOP {k} 0"),
                    1 => format!("BRPOP {k} 0"),
                    _ => format!("BLMOVE {k} {} RIGHT LEFT 0", g.pick(LISTS)),
                };
                blocked.send_line(&op).expect("send");
                std::thread::sleep(Duration::from_millis(2));
                let v = g.value();
                let pushed = c
                    .call(&args(&["RPUSH".into(), k.clone(), v]))
                    .expect("push");
                if let Err(e) = blocked.read() {
                    panic!("{op} not served after RPUSH {k}: {pushed}: {e}");
                }
            }
            9 => {
                // XREADGROUP BLOCK served by an XADD.
                let k = g.pick(STREAMS).to_string();
                // A fresh group at the stream's last ID: the next XADD is new to it.
                g.counter += 1;
                let grp = format!("b{}", g.counter);
                let cons = g.pick(CONSUMERS).to_string();
                let created = c.cmd(&format!("XGROUP CREATE {k} {grp} $ MKSTREAM"));
                if created != Frame::Simple("OK".into()) {
                    continue;
                }
                blocked
                    .send_line(&format!(
                        "XREADGROUP GROUP {grp} {cons} COUNT 2 BLOCK 0 STREAMS {k} >"
                    ))
                    .expect("send");
                std::thread::sleep(Duration::from_millis(2));
                let r = c.cmd(&format!("XADD {k} * f blocked"));
                g.note(&r);
                if let Err(e) = blocked.read() {
                    panic!("XREADGROUP on {k} not served after XADD: {r}: {e}");
                }
            }
            10..=11 => srv.advance_ms(g.rng.gen_range(1..3000)),
            _ => {
                let cmd = g.cmd();
                let r = c.call(&args(&cmd)).expect("reply");
                g.note(&r);
            }
        }
    }
}

fn reload_equivalence(fsync: &str, seed: u64, rounds: usize, steps: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut g = Gen {
        rng: SmallRng::seed_from_u64(seed),
        ids: Vec::new(),
        counter: 0,
    };
    let mut now = None;
    for round in 0..rounds {
        let srv = start(dir.path(), fsync);
        match now {
            // The restarted server continues at the time the previous one stopped.
            Some(ms) => srv.clock().set_ms(ms),
            // Far enough ahead of the wall clock that loading (at wall-clock time) drops
            // nothing the dump still shows.
            None => srv.clock().advance_ms(1_000_000),
        }
        run(&srv, &mut g, steps);
        let mut c = Conn::connect(srv.port()).expect("connect");
        let before = dump(&mut c);
        if std::env::var("DURABLE_SHOW").is_ok() {
            eprintln!("{}", before.join("\n"));
        }
        let ms = srv.clock().now_ms();
        drop(c);
        drop(srv);
        let srv = start(dir.path(), fsync);
        srv.clock().set_ms(ms);
        let mut c = Conn::connect(srv.port()).expect("connect");
        let after = dump(&mut c);
        if before != after {
            let diff: Vec<String> = before
                .iter()
                .zip(after.iter())
                .filter(|(a, b)| a != b)
                .map(|(a, b)| format!("before: {a}\nafter:  {b}"))
                .take(6)
                .collect();
            panic!(
                "appendfsync {fsync}, seed {seed}, round {round}: reload differs \
                 ({} vs {} lines)\n{}",
                before.len(),
                after.len(),
                diff.join("\n")
            );
        }
        now = Some(ms);
    }
}

/// `DURABLE_SEEDS=N` runs N more seeds (bug hunting; not part of the regular run).
#[test]
fn reload_equivalence_more_seeds() {
    let n: u64 = std::env::var("DURABLE_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    for seed in 100..100 + n {
        reload_equivalence("no", seed, 2, 600);
    }
}

#[test]
fn reload_equivalence_always() {
    reload_equivalence("always", 1, 2, 1000);
}

#[test]
fn reload_equivalence_everysec() {
    reload_equivalence("everysec", 2, 3, 700);
}

#[test]
fn reload_equivalence_no() {
    reload_equivalence("no", 3, 3, 700);
}

/// Emptied, trimmed and rotated lists, and MULTI blocks mixing creation and in-place edits.
#[test]
fn list_edits_survive_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let srv = start(dir.path(), "always");
    let mut c = Conn::connect(srv.port()).expect("connect");
    for line in [
        "RPUSH l a b c d e f",
        "LPUSH l z",
        "RPOP l 2",
        "LPOP l",
        "LSET l 1 B",
        "LINSERT l BEFORE a first",
        "LINSERT l AFTER d last",
        "LINSERT l AFTER a mid",
        "LREM l 1 B",
        "LTRIM l 1 -2",
        "LMOVE l l LEFT RIGHT",
        "LMOVE l m RIGHT LEFT",
        "LMOVE l m RIGHT LEFT",
        "MULTI",
        "DEL n",
        "RPUSH n 1",
        "RPUSH n 2 3",
        "LPOP n",
        "LPUSH n 0",
        "EXEC",
        "RPUSH gone x",
        "RPOP gone",
    ] {
        let r = c.cmd(line);
        assert!(!matches!(r, Frame::Error(_)), "{line}: {r}");
    }
    let before = dump(&mut c);
    drop(c);
    drop(srv);
    let srv = start(dir.path(), "always");
    let mut c = Conn::connect(srv.port()).expect("connect");
    assert_eq!(before, dump(&mut c));
    assert_eq!(
        c.cmd("LRANGE n 0 -1"),
        Frame::Array(vec![
            Frame::Bulk(b"0".to_vec()),
            Frame::Bulk(b"2".to_vec()),
            Frame::Bulk(b"3".to_vec())
        ])
    );
    assert_eq!(c.cmd("EXISTS gone"), Frame::Int(0));
}

/// Streams with groups, pending entries and consumers, trimmed and emptied.
#[test]
fn stream_edits_survive_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let srv = start(dir.path(), "always");
    let mut c = Conn::connect(srv.port()).expect("connect");
    for line in [
        "XADD s 1-1 a 1",
        "XADD s 1-2 b 2",
        "XADD s 2-1 c 3",
        "XADD s 3-1 d 4",
        "XGROUP CREATE s g 0",
        "XGROUP CREATE s h $",
        "XREADGROUP GROUP g alice COUNT 2 STREAMS s >",
        "XREADGROUP GROUP g bob STREAMS s >",
        "XACK s g 1-1",
        "XCLAIM s g carol 0 1-2",
        "XAUTOCLAIM s g dave 0 0 COUNT 1",
        "XDEL s 2-1",
        "XGROUP CREATECONSUMER s h erin",
        "XGROUP DELCONSUMER s g bob",
        "XTRIM s MAXLEN 2",
        "XSETID s 10-0 ENTRIESADDED 20 MAXDELETEDID 5-0",
        "XADD e MAXLEN 0 * f v",
        "XADD d 1-1 f v",
        "XGROUP CREATE d g 0",
        "XGROUP DESTROY d g",
    ] {
        let r = c.cmd(line);
        assert!(!matches!(r, Frame::Error(_)), "{line}: {r}");
    }
    let before = dump(&mut c);
    let ms = srv.clock().now_ms();
    drop(c);
    drop(srv);
    let srv = start(dir.path(), "always");
    srv.clock().set_ms(ms);
    let mut c = Conn::connect(srv.port()).expect("connect");
    assert_eq!(before, dump(&mut c));
}
