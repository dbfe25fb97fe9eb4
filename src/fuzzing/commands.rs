//! Whole command sequences dispatched into an in-process server (no sockets): arbitrary
//! commands from the whole table, which must never panic or hang and whose changes must
//! survive the write-ahead log's codec; and a subset of string, list, hash and set commands
//! whose replies must equal a plain model's.

use crate::clock::Clock;
use crate::cmd::{self, CommandSpec};
use crate::config::Config;
use crate::engine::journal::Journal;
use crate::instance::session::Session;
use crate::instance::state::Shared;
use crate::persist::LoadOptions;
use crate::protocol::{write_reply, Reply};
use bytes::{Bytes, BytesMut};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// Reads the input as a stream of choices; runs out as zeros.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    fn pick<'d>(&mut self, from: &[&'d str]) -> &'d str {
        from[self.byte() as usize % from.len()]
    }
}

/// Words the generator puts in arguments: keys, values, numbers and option names.
const WORDS: &[&str] = &[
    "k",
    "k",
    "k2",
    "k3",
    "{k}x",
    "f",
    "f2",
    "m",
    "v",
    "",
    "0",
    "1",
    "2",
    "3",
    "-1",
    "-2",
    "5",
    "10",
    "100",
    "1.5",
    "-0.5",
    "1e3",
    "inf",
    "-inf",
    "+inf",
    "nan",
    "(1",
    "[a",
    "(a",
    "-",
    "+",
    "*",
    "k*",
    "$",
    ">",
    "0-0",
    "0-1",
    "1-1",
    "1-*",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551616",
    "0.0",
    "01",
    " 1",
    "abc",
    "hello world",
    "EX",
    "PX",
    "EXAT",
    "NX",
    "XX",
    "GT",
    "LT",
    "CH",
    "INCR",
    "KEEPTTL",
    "GET",
    "WITHSCORES",
    "WITHSCORE",
    "LIMIT",
    "BYSCORE",
    "BYLEX",
    "REV",
    "COUNT",
    "MATCH",
    "TYPE",
    "BEFORE",
    "AFTER",
    "LEFT",
    "RIGHT",
    "STORE",
    "BY",
    "ALPHA",
    "ASC",
    "DESC",
    "MAXLEN",
    "MINID",
    "~",
    "=",
    "GROUP",
    "CONSUMER",
    "STREAMS",
    "ID",
    "MKSTREAM",
    "ENTRIESREAD",
    "JUSTID",
    "IDLE",
    "TIME",
    "RETRYCOUNT",
    "FORCE",
    "NOACK",
    "BLOCK",
    "WEIGHTS",
    "AGGREGATE",
    "SUM",
    "MIN",
    "MAX",
    "WITHVALUES",
    "RANK",
    "MAXAGE",
    "BIT",
    "BYTE",
    "OVERFLOW",
    "WRAP",
    "SAT",
    "FAIL",
    "INCRBY",
    "SET",
    "u8",
    "i16",
    "u63",
    "#1",
    "AND",
    "OR",
    "XOR",
    "NOT",
    "REPLACE",
    "ABSTTL",
    "FREQ",
    "DB",
    "COPY",
    "LEN",
    "IDX",
    "MINMATCHLEN",
    "WITHMATCHLEN",
    "FULL",
    "RADIUS",
    "FROMMEMBER",
    "FROMLONLAT",
    "BYRADIUS",
    "BYBOX",
    "m",
    "km",
    "WITHCOORD",
    "WITHDIST",
    "WITHHASH",
    "ANY",
    "STOREDIST",
    "13.36",
    "38.11",
    "HELP",
    "string",
    "list",
    "hash",
    "zset",
    "set",
    "stream",
];

/// Configuration parameters CONFIG SET may change here (encodings and behaviour, nothing
/// that touches files, the network or the size limits this harness relies on).
const PARAMS: &[&str] = &[
    "hash-max-listpack-entries",
    "hash-max-listpack-value",
    "set-max-intset-entries",
    "set-max-listpack-entries",
    "set-max-listpack-value",
    "zset-max-listpack-entries",
    "zset-max-listpack-value",
    "list-max-listpack-size",
    "list-compress-depth",
    "stream-node-max-entries",
    "stream-node-max-bytes",
    "notify-keyspace-events",
    "lazyfree-lazy-user-del",
];

/// Commands not run here: they sleep, stop or reconfigure the process, touch files or the
/// network, or run Lua (which may loop forever; the Lua libraries have their own targets).
const SKIP: &[&str] = &[
    "debug",
    "shutdown",
    "eval",
    "eval_ro",
    "evalsha",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
    "function",
    "script",
    "save",
    "bgsave",
    "respite",
    "wait",
    "client",
    "quit",
];

/// Commands whose integer arguments are not sizes (so a huge one allocates nothing).
const ANY_NUMBER: &[&str] = &[
    "incrby",
    "decrby",
    "incrbyfloat",
    "hincrby",
    "hincrbyfloat",
    "zincrby",
    "zadd",
    "expire",
    "pexpire",
    "expireat",
    "pexpireat",
    "set",
    "getex",
    "setex",
    "psetex",
    "xadd",
    "zcount",
    "zrangebyscore",
    "zrevrangebyscore",
    "zremrangebyscore",
    "geoadd",
    "restore",
];

pub(super) fn commands_table() -> &'static [&'static CommandSpec] {
    static TABLE: std::sync::OnceLock<Vec<&'static CommandSpec>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        cmd::registry()
            .top_level()
            .filter(|s| !SKIP.contains(&s.name))
            .collect()
    })
}

/// DUMP payloads for RESTORE arguments: every type and encoding (made by a scratch server
/// with small encoding thresholds, and the legacy encodings of the seeds).
fn payloads() -> &'static [Vec<u8>] {
    static P: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        let mut out: Vec<Vec<u8>> = Vec::new();
        let mut seeds = Vec::new();
        super::seeds::rdb(&mut seeds);
        out.extend(seeds.into_iter().map(|(_, _, p)| p));
        for params in [
            &[][..],
            &[
                ("list-max-listpack-size", "1"),
                ("set-max-intset-entries", "1"),
                ("hash-max-listpack-entries", "1"),
                ("zset-max-listpack-entries", "1"),
                ("stream-node-max-entries", "1"),
            ][..],
        ] {
            let srv = server(params);
            let mut c = client(&srv);
            let lines = [
                "SET s 12",
                "SET s2 hello-hello-hello-hello-hello-hello",
                "RPUSH l a 1 b 2",
                "SADD si 1 2 3",
                "SADD ss a b c",
                "HSET h f v g 1",
                "ZADD z 1 a 2.5 b",
                "XADD x 1-1 f v",
                "XADD x 2-1 f w g x",
                "XGROUP CREATE x g 0",
                "XREADGROUP GROUP g c STREAMS x >",
            ];
            for line in lines {
                c.run(
                    &srv,
                    line.split(' ')
                        .map(|a| Bytes::from(a.to_string()))
                        .collect(),
                );
            }
            for key in ["s", "s2", "l", "si", "ss", "h", "z", "x"] {
                let dump = vec![Bytes::from_static(b"DUMP"), Bytes::from(key.to_string())];
                if let Reply::Bulk(p) = c.run(&srv, dump) {
                    out.push(p.to_vec());
                }
            }
        }
        out
    })
}

/// An argument: a word, a subcommand name, a DUMP payload (possibly with one byte
/// changed, its CRC fixed), or raw bytes from the input.
fn arg(inp: &mut Input, spec: &CommandSpec, i: usize) -> Vec<u8> {
    let t = inp.byte();
    if t == 0xDF {
        let all = payloads();
        let mut p = all[usize::from(inp.byte()) % all.len()].clone();
        let (at, x) = (usize::from(inp.byte()), inp.byte());
        if x != 0 && !p.is_empty() {
            let n = p.len();
            p[at % n] ^= x;
            super::fix_payload_crc(&mut p);
        }
        return p;
    }
    if t >= 0xE0 {
        return inp.take(usize::from(t - 0xE0)).to_vec();
    }
    if i == 0 && !spec.subcommands.is_empty() && t < 0x80 {
        let sub = &spec.subcommands[usize::from(t) % spec.subcommands.len()];
        let name = sub.name.split('|').nth(1).unwrap_or(sub.name);
        return name.as_bytes().to_vec();
    }
    WORDS[usize::from(t) % WORDS.len()].as_bytes().to_vec()
}

/// One command line from the input, or `None` when it would only exercise a size limit
/// (an argument that is a huge count or offset: allocation, not logic).
fn command(inp: &mut Input) -> Option<Vec<Bytes>> {
    let table = commands_table();
    let hi = inp.byte();
    let lo = inp.byte();
    let spec = table[(usize::from(hi) << 8 | usize::from(lo)) % table.len()];
    let argc = usize::from(inp.byte() % 10);
    let mut args = vec![Bytes::from_static(spec.name.as_bytes())];
    if spec.name == "config" {
        args.push(Bytes::from_static(
            inp.pick(&["get", "set", "help"]).as_bytes(),
        ));
        args.push(Bytes::from_static(inp.pick(PARAMS).as_bytes()));
        for _ in 0..argc.min(2) {
            args.push(arg(inp, spec, 2).into());
        }
        return Some(args);
    }
    for i in 0..argc {
        args.push(arg(inp, spec, i).into());
    }
    if !ANY_NUMBER.contains(&spec.name) {
        for a in &args[1..] {
            let digits = a.strip_prefix(b"#").unwrap_or(a);
            let n = std::str::from_utf8(digits)
                .ok()
                .and_then(|s| s.trim().parse::<f64>().ok());
            if n.is_some_and(|n| n.is_finite() && n.abs() > 100_000.0) {
                return None;
            }
        }
    }
    Some(args)
}

/// A client of the in-process server.
pub(super) struct Client {
    sess: Session,
}

pub(super) fn server(params: &[(&str, &str)]) -> Arc<Shared> {
    let mut config = Config::default();
    // Strings and bitmaps stop at 1 MB, so generated offsets cannot allocate much.
    config
        .params
        .push(("proto-max-bulk-len".into(), "1mb".into()));
    for (k, v) in params {
        config.params.push((k.to_string(), v.to_string()));
    }
    // A manual clock: runs repeat exactly (expiry happens when the input says).
    let clock = Clock::manual();
    clock.set_ms(1_700_000_000_000);
    let srv = Arc::new(crate::cmd::new_shared(config, clock));
    crate::script::reseed(&srv, 1);
    srv
}

pub(super) fn client(srv: &Arc<Shared>) -> Client {
    let addr = "127.0.0.1:1".parse().expect("addr");
    let handle = srv.clients.register(addr, addr, srv.clock.now_ms());
    Client {
        sess: Session::new(handle, true),
    }
}

impl Client {
    /// Runs a command as a connection would: a client still blocked from an earlier command
    /// first takes its reply or its timeout (this harness never waits).
    pub(super) fn run(&mut self, srv: &Arc<Shared>, args: Vec<Bytes>) -> Reply {
        self.settle(srv);
        let reply = cmd::dispatch(srv, &mut self.sess, args);
        let mut out = BytesMut::new();
        write_reply(&mut out, &reply, self.sess.resp3);
        write_reply(&mut out, &reply, !self.sess.resp3);
        reply
    }

    fn settle(&mut self, srv: &Arc<Shared>) {
        if let Some(mut b) = self.sess.blocked.take() {
            if b.waiter.abandon() {
                cmd::blocking::unregister(srv, &b);
            } else {
                // Served: the writer sent (or is about to send) our reply.
                let _ = b.rx.try_recv();
            }
        }
    }
}

/// Arbitrary command sequences from three clients, with a journal recording the changes
/// (as under the durable engine) and the clock moving when the input says: no panic, no
/// hang, and each command's changes encode and decode through the log's codec.
pub fn commands(data: &[u8]) {
    let mut inp = Input(data);
    let params: &[(&str, &str)] = if inp.byte() & 1 == 1 {
        &[
            ("hash-max-listpack-entries", "2"),
            ("set-max-intset-entries", "2"),
            ("set-max-listpack-entries", "2"),
            ("zset-max-listpack-entries", "2"),
            ("list-max-listpack-size", "2"),
            ("stream-node-max-entries", "2"),
        ]
    } else {
        &[]
    };
    let srv = server(params);
    let journal = Arc::new(Journal::new());
    assert!(srv.ks.set_journal(journal.clone()));
    let mut clients: Vec<Client> = (0..3).map(|_| client(&srv)).collect();
    let opts = LoadOptions::new(0);
    let mut steps = 0;
    while !inp.is_empty() && steps < 64 {
        steps += 1;
        let who = inp.byte();
        if who == 0xFF {
            srv.clock.advance_ms(u64::from(inp.byte()) * 100);
            continue;
        }
        let Some(args) = command(&mut inp) else {
            continue;
        };
        let c = &mut clients[usize::from(who) % 3];
        let _ = c.run(&srv, args);
        let (changes, _) = journal.take(std::time::Duration::ZERO);
        if !changes.is_empty() {
            super::codec_round_trip(&changes, &opts);
        }
    }
    for c in &mut clients {
        c.settle(&srv);
    }
}

// ---------------------------------------------------------------------------------------------
// The model

#[derive(Debug, Clone)]
enum MVal {
    Str(Vec<u8>),
    List(VecDeque<Vec<u8>>),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    Set(BTreeSet<Vec<u8>>),
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const OVERFLOW: &str = "ERR increment or decrement would overflow";

#[derive(Default)]
struct Model {
    keys: BTreeMap<Vec<u8>, MVal>,
}

fn err(s: &'static str) -> Reply {
    Reply::error(s)
}
fn bulk(b: &[u8]) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(b))
}
fn int(n: usize) -> Reply {
    Reply::Int(n as i64)
}

/// Redis's LRANGE/LTRIM index window on a list of `len`: the inclusive range, if any.
fn window(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut s = if start < 0 { len + start } else { start };
    let mut e = if end < 0 { len + end } else { end };
    if s < 0 {
        s = 0;
    }
    if s > e || s >= len {
        return None;
    }
    if e >= len {
        e = len - 1;
    }
    Some((s as usize, e as usize))
}

/// A list index (negative from the end) if it is inside the list.
fn index(len: usize, i: i64) -> Option<usize> {
    let i = if i < 0 { len as i64 + i } else { i };
    (0..len as i64).contains(&i).then_some(i as usize)
}

fn num(a: &[u8]) -> i64 {
    crate::num::parse_i64(a).expect("the generator passes integers")
}

impl Model {
    /// Removes emptied collections, as Redis deletes them.
    fn tidy(&mut self, k: &[u8]) {
        let empty = match self.keys.get(k) {
            Some(MVal::List(l)) => l.is_empty(),
            Some(MVal::Hash(h)) => h.is_empty(),
            Some(MVal::Set(s)) => s.is_empty(),
            _ => false,
        };
        if empty {
            self.keys.remove(k);
        }
    }

    fn run(&mut self, a: &[Vec<u8>]) -> Reply {
        let r = self.apply(a);
        if a.len() > 1 {
            self.tidy(&a[1]);
        }
        r
    }

    fn apply(&mut self, a: &[Vec<u8>]) -> Reply {
        let name = std::str::from_utf8(&a[0]).expect("ascii name");
        let k = a.get(1).cloned().unwrap_or_default();
        macro_rules! get {
            ($variant:ident) => {
                match self.keys.get_mut(&k) {
                    None => None,
                    Some(MVal::$variant(x)) => Some(x),
                    Some(_) => return err(WRONGTYPE),
                }
            };
        }
        macro_rules! entry {
            ($variant:ident) => {{
                if !matches!(self.keys.get(&k), None | Some(MVal::$variant(_))) {
                    return err(WRONGTYPE);
                }
                match self
                    .keys
                    .entry(k.clone())
                    .or_insert_with(|| MVal::$variant(Default::default()))
                {
                    MVal::$variant(x) => x,
                    _ => unreachable!("checked above"),
                }
            }};
        }
        match name {
            "set" => {
                self.keys.insert(k, MVal::Str(a[2].clone()));
                Reply::OK
            }
            "get" => get!(Str).map_or(Reply::Nil, |s| bulk(s)),
            "append" => {
                let s = entry!(Str);
                s.extend_from_slice(&a[2]);
                int(s.len())
            }
            "strlen" => int(get!(Str).map_or(0, |s| s.len())),
            "incrby" => {
                let by = num(&a[2]);
                let cur = match get!(Str) {
                    None => 0,
                    Some(s) => match crate::num::parse_i64(s) {
                        Some(n) => n,
                        None => return err(NOT_INT),
                    },
                };
                let Some(n) = cur.checked_add(by) else {
                    return err(OVERFLOW);
                };
                self.keys.insert(k, MVal::Str(n.to_string().into_bytes()));
                Reply::Int(n)
            }
            "del" => int(a[1..]
                .iter()
                .filter(|k| self.keys.remove(*k).is_some())
                .count()),
            "exists" => int(a[1..].iter().filter(|k| self.keys.contains_key(*k)).count()),
            "type" => Reply::status(match self.keys.get(&k) {
                None => "none",
                Some(MVal::Str(_)) => "string",
                Some(MVal::List(_)) => "list",
                Some(MVal::Hash(_)) => "hash",
                Some(MVal::Set(_)) => "set",
            }),
            "mget" => Reply::Array(
                a[1..]
                    .iter()
                    .map(|k| match self.keys.get(k) {
                        Some(MVal::Str(s)) => bulk(s),
                        _ => Reply::Nil,
                    })
                    .collect(),
            ),
            "lpush" | "rpush" => {
                let l = entry!(List);
                for v in &a[2..] {
                    if name == "lpush" {
                        l.push_front(v.clone());
                    } else {
                        l.push_back(v.clone());
                    }
                }
                int(l.len())
            }
            "lpop" | "rpop" => {
                let front = name == "lpop";
                let Some(l) = get!(List) else {
                    return Reply::Nil;
                };
                let v = if front { l.pop_front() } else { l.pop_back() };
                v.map_or(Reply::Nil, |v| bulk(&v))
            }
            "llen" => int(get!(List).map_or(0, |l| l.len())),
            "lindex" => {
                let i = num(&a[2]);
                match get!(List) {
                    Some(l) => index(l.len(), i).map_or(Reply::Nil, |i| bulk(&l[i])),
                    None => Reply::Nil,
                }
            }
            "lrange" => {
                let (s, e) = (num(&a[2]), num(&a[3]));
                let Some(l) = get!(List) else {
                    return Reply::Array(vec![]);
                };
                match window(l.len(), s, e) {
                    Some((s, e)) => Reply::Array((s..=e).map(|i| bulk(&l[i])).collect()),
                    None => Reply::Array(vec![]),
                }
            }
            "lset" => {
                // Redis 7.2 passes the index on as a C int (respite does the same).
                let i = i64::from(num(&a[2]) as i32);
                let Some(l) = get!(List) else {
                    return err("ERR no such key");
                };
                match index(l.len(), i) {
                    Some(i) => {
                        l[i] = a[3].clone();
                        Reply::OK
                    }
                    None => err("ERR index out of range"),
                }
            }
            "ltrim" => {
                let (s, e) = (num(&a[2]), num(&a[3]));
                if let Some(l) = get!(List) {
                    match window(l.len(), s, e) {
                        Some((s, e)) => {
                            l.truncate(e + 1);
                            l.drain(..s);
                        }
                        None => l.clear(),
                    }
                }
                Reply::OK
            }
            "lrem" => {
                let count = num(&a[2]);
                let v = &a[3];
                let Some(l) = get!(List) else {
                    return Reply::Int(0);
                };
                let limit = if count == 0 {
                    usize::MAX
                } else {
                    count.unsigned_abs() as usize
                };
                let mut removed = 0;
                let mut items: Vec<Vec<u8>> = l.drain(..).collect();
                if count < 0 {
                    items.reverse();
                }
                items.retain(|x| {
                    if removed < limit && x == v {
                        removed += 1;
                        false
                    } else {
                        true
                    }
                });
                if count < 0 {
                    items.reverse();
                }
                l.extend(items);
                int(removed)
            }
            "hset" => {
                let h = entry!(Hash);
                let added = a[2..]
                    .chunks(2)
                    .filter(|p| h.insert(p[0].clone(), p[1].clone()).is_none())
                    .count();
                int(added)
            }
            "hget" => get!(Hash)
                .and_then(|h| h.get(&a[2]).map(|v| bulk(v)))
                .unwrap_or(Reply::Nil),
            "hdel" => {
                let Some(h) = get!(Hash) else {
                    return Reply::Int(0);
                };
                int(a[2..].iter().filter(|f| h.remove(*f).is_some()).count())
            }
            "hlen" => int(get!(Hash).map_or(0, |h| h.len())),
            "hexists" => int(get!(Hash).is_some_and(|h| h.contains_key(&a[2])) as usize),
            "hstrlen" => int(get!(Hash).and_then(|h| h.get(&a[2])).map_or(0, |v| v.len())),
            "hincrby" => {
                let by = num(&a[3]);
                let h = entry!(Hash);
                let cur = match h.get(&a[2]) {
                    None => 0,
                    Some(v) => match crate::num::parse_i64(v) {
                        Some(n) => n,
                        None => return err("ERR hash value is not an integer"),
                    },
                };
                let Some(n) = cur.checked_add(by) else {
                    return err(OVERFLOW);
                };
                h.insert(a[2].clone(), n.to_string().into_bytes());
                Reply::Int(n)
            }
            "sadd" => {
                let s = entry!(Set);
                int(a[2..].iter().filter(|m| s.insert(m.to_vec())).count())
            }
            "srem" => {
                let Some(s) = get!(Set) else {
                    return Reply::Int(0);
                };
                int(a[2..].iter().filter(|m| s.remove(*m)).count())
            }
            "sismember" => int(get!(Set).is_some_and(|s| s.contains(&a[2])) as usize),
            "scard" => int(get!(Set).map_or(0, |s| s.len())),
            other => unreachable!("no model for {other}"),
        }
    }
}

/// Values the model target uses: short, long (past the listpack value limits), integers
/// near the edges and not-quite integers.
const VALUES: &[&str] = &[
    "a",
    "b",
    "",
    "0",
    "1",
    "-1",
    "10",
    "123456789012345678",
    "9223372036854775807",
    "-9223372036854775808",
    "01",
    " 1",
    "1.5",
    "x",
    "a-value-well-past-sixty-four-bytes-so-listpacks-convert-to-hashtables-now",
];
const INTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "-2",
    "5",
    "-5",
    "100",
    "9223372036854775807",
    "-9223372036854775808",
];
const MODEL_KEYS: &[&str] = &["a", "b", "c"];

/// (name, fixed arguments after the key: 'v' value, 'i' integer, 'f' field/member, and
/// '*' for one to three more of the previous kind).
const MODEL_COMMANDS: &[(&str, &str)] = &[
    ("set", "v"),
    ("get", ""),
    ("append", "v"),
    ("strlen", ""),
    ("incrby", "i"),
    ("del", "k*"),
    ("exists", "k*"),
    ("type", ""),
    ("mget", "k*"),
    ("lpush", "v*"),
    ("rpush", "v*"),
    ("lpop", ""),
    ("rpop", ""),
    ("llen", ""),
    ("lindex", "i"),
    ("lrange", "ii"),
    ("lset", "iv"),
    ("ltrim", "ii"),
    ("lrem", "iv"),
    ("hset", "fv*"),
    ("hget", "f"),
    ("hdel", "f*"),
    ("hlen", ""),
    ("hexists", "f"),
    ("hstrlen", "f"),
    ("hincrby", "fi"),
    ("sadd", "v*"),
    ("srem", "v*"),
    ("sismember", "v"),
    ("scard", ""),
];

fn model_command(inp: &mut Input) -> Vec<Vec<u8>> {
    let (name, shape) = MODEL_COMMANDS[inp.byte() as usize % MODEL_COMMANDS.len()];
    let mut args = vec![name.as_bytes().to_vec(), inp.pick(MODEL_KEYS).into()];
    let one = |inp: &mut Input, kind: u8| -> Vec<Vec<u8>> {
        match kind {
            b'v' => vec![inp.pick(VALUES).into()],
            b'i' => vec![inp.pick(INTS).into()],
            b'k' => vec![inp.pick(MODEL_KEYS).into()],
            // A field and its value (HSET's pairs) or a field alone.
            _ => vec![inp.pick(&["f", "g", "h", "0", "1"]).into()],
        }
    };
    let kinds = shape.as_bytes();
    for (i, &kind) in kinds.iter().enumerate() {
        if kind == b'*' {
            // Repeat the preceding group (for HSET, the field-value pair).
            let group = if name == "hset" {
                &kinds[..2]
            } else {
                &kinds[i - 1..i]
            };
            for _ in 0..inp.byte() % 3 {
                for &g in group {
                    args.extend(one(inp, g));
                }
            }
        } else {
            args.extend(one(inp, kind));
        }
    }
    args
}

/// RESP2 bytes of a reply (how the model's and the server's replies are compared: the
/// server may use RESP3-only types, e.g. booleans, that RESP2 writes as integers).
fn resp2(r: &Reply) -> Vec<u8> {
    let mut out = BytesMut::new();
    write_reply(&mut out, r, false);
    out.to_vec()
}

/// A sequence of string, list, hash and set commands: every reply equals the model's.
/// Encoding thresholds are tiny when the first byte is odd, so conversions happen.
pub fn commands_model(data: &[u8]) {
    let mut inp = Input(data);
    let params: &[(&str, &str)] = if inp.byte() & 1 == 1 {
        &[
            ("hash-max-listpack-entries", "2"),
            ("hash-max-listpack-value", "4"),
            ("set-max-intset-entries", "2"),
            ("set-max-listpack-entries", "3"),
            ("set-max-listpack-value", "4"),
            ("list-max-listpack-size", "2"),
        ]
    } else {
        &[]
    };
    let tiny = !params.is_empty();
    // Starting a server costs more than a whole input: keep one per configuration and
    // empty it between inputs (the model's commands leave no other state behind).
    thread_local! {
        static SERVERS: std::cell::RefCell<Vec<(bool, Arc<Shared>, Client)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    SERVERS.with(|s| {
        let mut s = s.borrow_mut();
        if !s.iter().any(|(t, _, _)| *t == tiny) {
            let srv = server(params);
            let c = client(&srv);
            s.push((tiny, srv, c));
        }
        let (_, srv, c) = s.iter_mut().find(|(t, _, _)| *t == tiny).expect("cached");
        c.run(srv, vec![Bytes::from_static(b"FLUSHALL")]);
        run_model(&mut inp, srv, c);
    });
}

fn run_model(inp: &mut Input, srv: &Arc<Shared>, c: &mut Client) {
    let mut model = Model::default();
    let mut steps = 0;
    while !inp.is_empty() && steps < 128 {
        steps += 1;
        let args = model_command(inp);
        let expect = model.run(&args);
        let got = c.run(srv, args.iter().map(|a| Bytes::from(a.clone())).collect());
        assert_eq!(
            String::from_utf8_lossy(&resp2(&got)),
            String::from_utf8_lossy(&resp2(&expect)),
            "{:?}",
            args.iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
        );
    }
}
