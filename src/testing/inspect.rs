//! Typed reads, seeding and assertions on a test server's keyspace, without a client: each
//! runs the real command in-process on a hidden session, so it behaves exactly as a client's.

use crate::instance::clients::Clients;
use crate::instance::session::Session;
use crate::instance::state::Shared;
use crate::protocol::Reply;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// One database of a [`super::TestServer`] (db 0 through `Deref`; others via [`Db::db`]).
///
/// ```
/// let srv = respite::TestServer::start().unwrap();
/// srv.hset("user:1", &[("name", "ada")]);
/// assert_eq!(srv.hget("user:1", "name").as_deref(), Some("ada"));
/// srv.db(3).sadd("tags", &["a", "b"]);
/// assert_eq!(srv.db(3).members("tags").len(), 2);
/// srv.assert_missing("tags"); // db 0
/// ```
pub struct Db {
    current: super::Current,
    sess: Arc<Mutex<Option<Hidden>>>,
    db: usize,
}

/// The inspection session, bound to one instance (a restart gets a new one).
struct Hidden {
    of: Weak<Shared>,
    sess: Session,
}

/// One entry of a consumer group's pending entries list (`XPENDING key group - + n`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub id: String,
    pub consumer: String,
    pub idle_ms: i64,
    pub deliveries: i64,
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The text of a string-like reply (bulk, status, verbatim, integer, double).
fn as_text(r: &Reply) -> Option<String> {
    match r {
        Reply::Bulk(b) | Reply::Verbatim(b) => Some(text(b)),
        Reply::Status(s) => Some(s.to_string()),
        Reply::Int(i) => Some(i.to_string()),
        Reply::Double(d) => Some(crate::num::format_double(*d)),
        _ => None,
    }
}

fn as_f64(r: &Reply) -> Option<f64> {
    match r {
        Reply::Double(d) => Some(*d),
        other => as_text(other)?.parse().ok(),
    }
}

/// Elements of an aggregate reply; maps are flattened as RESP2 would.
fn items(r: Reply) -> Vec<Reply> {
    match r {
        // Pre-encoded arrays of bulk strings (ZRANGE's fast path) read back as a command.
        Reply::Raw(b) => {
            let mut buf = bytes::BytesMut::from(&b[..]);
            match crate::protocol::parse::parse_command(&mut buf, Default::default()) {
                Ok(crate::protocol::parse::Parsed::Command(v)) => {
                    v.into_iter().map(Reply::Bulk).collect()
                }
                _ => Vec::new(),
            }
        }
        Reply::Array(v) | Reply::Set(v) | Reply::Push(v) => v,
        Reply::Map(kv) => kv.into_iter().flat_map(|(k, v)| [k, v]).collect(),
        _ => Vec::new(),
    }
}

fn texts(r: Reply) -> Vec<String> {
    items(r).iter().filter_map(as_text).collect()
}

fn pairs(r: Reply) -> Vec<(String, String)> {
    let v = texts(r);
    v.chunks(2)
        .filter(|c| c.len() == 2)
        .map(|c| (c[0].clone(), c[1].clone()))
        .collect()
}

impl Db {
    pub(super) fn new(current: super::Current, db: usize) -> Db {
        Db {
            current,
            sess: Arc::new(Mutex::new(None)),
            db,
        }
    }

    /// The same server's database `n`.
    pub fn db(&self, n: usize) -> Db {
        Db {
            current: self.current.clone(),
            sess: self.sess.clone(),
            db: n,
        }
    }

    /// Runs any command in-process in this db and returns its reply (errors included).
    pub fn command(&self, args: &[&[u8]]) -> Reply {
        let args = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        let srv = self.current.get();
        let mut hidden = self.sess.lock();
        let stale = hidden
            .as_ref()
            .is_none_or(|h| !std::ptr::eq(h.of.as_ptr(), Arc::as_ptr(&srv)));
        if stale {
            // Not a connection: no client id, not listed, counted nowhere.
            let mut sess = Session::new(Clients::detached(srv.clock.now_ms()), true);
            sess.resp3 = true;
            sess.internal = true;
            *hidden = Some(Hidden {
                of: Arc::downgrade(&srv),
                sess,
            });
        }
        let sess = &mut hidden.as_mut().expect("just set").sess;
        sess.db = self.db;
        crate::cmd::dispatch(&srv, sess, args)
    }

    /// Runs a command and renders its reply as text: strings and numbers as they are,
    /// aggregates flattened and space-separated, nil as `(nil)`, errors as `-ERR …`.
    pub fn run_text(&self, args: &[&str]) -> String {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        fn render(r: Reply, out: &mut Vec<String>) {
            match r {
                Reply::Error(e) => out.push(format!("-{e}")),
                Reply::Nil | Reply::NilArray => out.push("(nil)".into()),
                Reply::Bool(b) => out.push(i64::from(b).to_string()),
                Reply::Array(v) | Reply::Set(v) | Reply::Push(v) => {
                    v.into_iter().for_each(|x| render(x, out))
                }
                Reply::Map(kv) => kv.into_iter().for_each(|(k, v)| {
                    render(k, out);
                    render(v, out)
                }),
                Reply::Raw(b) => items(Reply::Raw(b))
                    .into_iter()
                    .for_each(|x| render(x, out)),
                other => out.extend(as_text(&other)),
            }
        }
        let mut out = Vec::new();
        render(self.command(&args), &mut out);
        out.join(" ")
    }

    fn run(&self, args: &[&[u8]]) -> Reply {
        let r = self.command(args);
        if let Reply::Error(e) = &r {
            let line: Vec<String> = args.iter().map(|a| text(a)).collect();
            panic!("{} failed in db {}: {e}", line.join(" "), self.db);
        }
        r
    }

    /// A string value (`GET`); `None` when missing. Panics on another type.
    pub fn get(&self, key: &str) -> Option<String> {
        as_text(&self.run(&[b"GET", key.as_bytes()]))
    }
    pub fn hget(&self, key: &str, field: &str) -> Option<String> {
        as_text(&self.run(&[b"HGET", key.as_bytes(), field.as_bytes()]))
    }
    pub fn hgetall(&self, key: &str) -> BTreeMap<String, String> {
        pairs(self.run(&[b"HGETALL", key.as_bytes()]))
            .into_iter()
            .collect()
    }
    /// A set's members (`SMEMBERS`).
    pub fn members(&self, key: &str) -> BTreeSet<String> {
        texts(self.run(&[b"SMEMBERS", key.as_bytes()]))
            .into_iter()
            .collect()
    }
    pub fn zscore(&self, key: &str, member: &str) -> Option<f64> {
        as_f64(&self.run(&[b"ZSCORE", key.as_bytes(), member.as_bytes()]))
    }
    /// `ZRANGE key start stop WITHSCORES` as (member, score) pairs.
    pub fn zrange(&self, key: &str, start: i64, stop: i64) -> Vec<(String, f64)> {
        let (a, b) = (start.to_string(), stop.to_string());
        let r = self.run(&[
            b"ZRANGE",
            key.as_bytes(),
            a.as_bytes(),
            b.as_bytes(),
            b"WITHSCORES",
        ]);
        // RESP3 nests [member, score] pairs; flatten either shape.
        let flat: Vec<Reply> = items(r)
            .into_iter()
            .flat_map(|x| match x {
                Reply::Array(v) => v,
                other => vec![other],
            })
            .collect();
        flat.chunks(2)
            .filter(|c| c.len() == 2)
            .filter_map(|c| Some((as_text(&c[0])?, as_f64(&c[1])?)))
            .collect()
    }
    pub fn lrange(&self, key: &str, start: i64, stop: i64) -> Vec<String> {
        let (a, b) = (start.to_string(), stop.to_string());
        texts(self.run(&[b"LRANGE", key.as_bytes(), a.as_bytes(), b.as_bytes()]))
    }
    /// Every entry of a stream (`XRANGE key - +`): (id, field/value pairs).
    pub fn stream_entries(&self, key: &str) -> Vec<(String, Vec<(String, String)>)> {
        items(self.run(&[b"XRANGE", key.as_bytes(), b"-", b"+"]))
            .into_iter()
            .filter_map(|e| {
                let mut it = items(e).into_iter();
                let id = as_text(&it.next()?)?;
                Some((id, pairs(it.next()?)))
            })
            .collect()
    }
    /// A consumer group's pending entries (`XPENDING key group - + <all>`).
    pub fn pending(&self, key: &str, group: &str) -> Vec<Pending> {
        let max = i64::MAX.to_string();
        let r = self.run(&[
            b"XPENDING",
            key.as_bytes(),
            group.as_bytes(),
            b"-",
            b"+",
            max.as_bytes(),
        ]);
        items(r)
            .into_iter()
            .filter_map(|e| {
                let v = items(e);
                let int = |r: &Reply| as_text(r).and_then(|s| s.parse().ok());
                Some(Pending {
                    id: as_text(v.first()?)?,
                    consumer: as_text(v.get(1)?)?,
                    idle_ms: int(v.get(2)?)?,
                    deliveries: int(v.get(3)?)?,
                })
            })
            .collect()
    }
    /// Keys matching a glob pattern, sorted.
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        let mut v = texts(self.run(&[b"KEYS", pattern.as_bytes()]));
        v.sort();
        v
    }
    /// Time left to live (`PTTL`); `None` when the key is missing or has no TTL.
    pub fn ttl(&self, key: &str) -> Option<Duration> {
        match self.run(&[b"PTTL", key.as_bytes()]) {
            Reply::Int(ms) if ms >= 0 => Some(Duration::from_millis(ms as u64)),
            _ => None,
        }
    }
    /// `TYPE key`: "string", "hash"…, or "none".
    pub fn type_of(&self, key: &str) -> String {
        as_text(&self.run(&[b"TYPE", key.as_bytes()])).unwrap_or_default()
    }
    pub fn exists(&self, key: &str) -> bool {
        matches!(self.run(&[b"EXISTS", key.as_bytes()]), Reply::Int(1))
    }

    pub fn set(&self, key: &str, value: &str) {
        self.run(&[b"SET", key.as_bytes(), value.as_bytes()]);
    }
    /// `SET key value PX ttl`.
    pub fn set_ex(&self, key: &str, value: &str, ttl: Duration) {
        let ms = ttl.as_millis().max(1).to_string();
        self.run(&[
            b"SET",
            key.as_bytes(),
            value.as_bytes(),
            b"PX",
            ms.as_bytes(),
        ]);
    }
    pub fn hset(&self, key: &str, fields: &[(&str, &str)]) {
        let mut args: Vec<&[u8]> = vec![b"HSET", key.as_bytes()];
        for (f, v) in fields {
            args.extend([f.as_bytes(), v.as_bytes()]);
        }
        self.run(&args);
    }
    pub fn sadd(&self, key: &str, members: &[&str]) {
        let mut args: Vec<&[u8]> = vec![b"SADD", key.as_bytes()];
        args.extend(members.iter().map(|m| m.as_bytes()));
        self.run(&args);
    }
    pub fn rpush(&self, key: &str, values: &[&str]) {
        let mut args: Vec<&[u8]> = vec![b"RPUSH", key.as_bytes()];
        args.extend(values.iter().map(|m| m.as_bytes()));
        self.run(&args);
    }
    pub fn zadd(&self, key: &str, members: &[(f64, &str)]) {
        let scores: Vec<String> = members.iter().map(|(s, _)| s.to_string()).collect();
        let mut args: Vec<&[u8]> = vec![b"ZADD", key.as_bytes()];
        for (s, (_, m)) in scores.iter().zip(members) {
            args.extend([s.as_bytes(), m.as_bytes()]);
        }
        self.run(&args);
    }
    /// `XADD key * f v …`; returns the new entry's ID (from the server's clock).
    pub fn xadd(&self, key: &str, fields: &[(&str, &str)]) -> String {
        let mut args: Vec<&[u8]> = vec![b"XADD", key.as_bytes(), b"*"];
        for (f, v) in fields {
            args.extend([f.as_bytes(), v.as_bytes()]);
        }
        as_text(&self.run(&args)).unwrap_or_default()
    }

    /// What `key` holds, for failure messages: `hash {"f": "v"}`, `missing`…
    pub fn describe(&self, key: &str) -> String {
        let t = self.type_of(key);
        let k = key.as_bytes();
        let body = match t.as_str() {
            "none" => return "missing".into(),
            "string" => format!("{:?}", self.get(key).unwrap_or_default()),
            "hash" => format!("{:?}", self.hgetall(key)),
            "set" => format!("{:?}", self.members(key)),
            "list" => format!("{:?}", self.lrange(key, 0, -1)),
            "zset" => format!("{:?}", self.zrange(key, 0, -1)),
            "stream" => format!("{:?}", self.stream_entries(key)),
            _ => format!("{:?}", self.command(&[b"DUMP", k])),
        };
        let mut s = format!("{t} {body}");
        if let Some(ttl) = self.ttl(key) {
            let _ = write!(s, " (ttl {} ms)", ttl.as_millis());
        }
        s
    }

    fn fail(&self, key: &str, expected: String) -> ! {
        panic!(
            "key {key:?} in db {}: expected {expected}, found {}",
            self.db,
            self.describe(key)
        )
    }

    pub fn assert_str(&self, key: &str, value: &str) {
        if self.type_of(key) != "string" || self.get(key).as_deref() != Some(value) {
            self.fail(key, format!("string {value:?}"));
        }
    }
    pub fn assert_missing(&self, key: &str) {
        if self.exists(key) {
            self.fail(key, "missing".into());
        }
    }
    pub fn assert_hash(&self, key: &str, fields: &[(&str, &str)]) {
        let want: BTreeMap<String, String> = fields
            .iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect();
        if self.type_of(key) != "hash" || self.hgetall(key) != want {
            self.fail(key, format!("hash {want:?}"));
        }
    }
    pub fn assert_members(&self, key: &str, members: &[&str]) {
        let want: BTreeSet<String> = members.iter().map(|m| m.to_string()).collect();
        if self.type_of(key) != "set" || self.members(key) != want {
            self.fail(key, format!("set {want:?}"));
        }
    }
    pub fn assert_list(&self, key: &str, values: &[&str]) {
        let want: Vec<String> = values.iter().map(|m| m.to_string()).collect();
        if self.type_of(key) != "list" || self.lrange(key, 0, -1) != want {
            self.fail(key, format!("list {want:?}"));
        }
    }
    /// The whole sorted set, in score order, as (member, score).
    pub fn assert_zset(&self, key: &str, members: &[(&str, f64)]) {
        let want: Vec<(String, f64)> = members.iter().map(|(m, s)| (m.to_string(), *s)).collect();
        if self.type_of(key) != "zset" || self.zrange(key, 0, -1) != want {
            self.fail(key, format!("zset {want:?}"));
        }
    }
}
