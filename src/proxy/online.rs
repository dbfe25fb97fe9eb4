//! Online rebalancing (DESIGN.md §7): the fleet grows or shrinks while clients keep
//! writing, and nothing acknowledged is lost.
//!
//! A move from placement `old` to `new` has two phases, each a [`Fleet`] snapshot; a
//! client routes a whole read batch by one snapshot, and the mover waits, after each swap,
//! until no batch still runs on the previous one ([`quiesce`]):
//!
//! 1. **Catalog.** Requests still go to the old owners. The mover SCANs every old member
//!    and lists, per tag whose owner changes, the keys it holds; requests on such tags add
//!    the keys they name ([`prepare`]), so a key created after the SCAN went by is listed
//!    too. Nothing moves yet, so no lock is needed.
//! 2. **Moving.** Requests go to the new owners. A request on a tag still listed first
//!    moves it ([`Move::ensure_moved`]), while the mover walks the list doing the same:
//!    under the tag's lock, each key is copied (DUMP + PTTL → RESTORE REPLACE, or in chunks
//!    past `move-chunk-bytes`), then deleted from the old owner, then the tag is unlisted.
//!    Since no request reaches an old owner for a changing tag in this phase, and every
//!    phase-1 request has finished, no write can fall between copy and delete; since a
//!    tag moves as a unit, multi-key commands and scripts on one tag stay on one node.
//!
//! Then the fleet is at rest on `new`. Copy-before-delete and "unlisted only when done"
//! make it restartable: the phase is kept in `<config>.rebalance`; a proxy that starts
//! with it in phase 2 routes by `new`, rebuilds the list by SCAN (requests on changing
//! tags wait for that), and finishes the move. A key left on both nodes by a crash is
//! copied again from the old owner, which still has the newest value.

use super::config::{NodeSpec, ProxyConfig};
use super::fleet::{Fleet, Members};
use super::node::Node;
use super::resp::{self, Frame};
use super::Proxy;
use crate::types::placement::hash_tag;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// SCAN COUNT while cataloging an old member.
const SCAN_COUNT: usize = 1000;
/// Elements per command when a big collection is copied in chunks (halved while a
/// chunk's reply is over `move-chunk-bytes`).
const CHUNK_ELEMENTS: usize = 1024;
/// How often the mover logs its progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// Tags the background mover moves at once.
const MOVES_IN_FLIGHT: usize = 16;
/// The sticky id the mover's requests use on the nodes' shared connections.
const MOVER_ID: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Catalog,
    Moving,
}

/// One move from `old` to `new`, shared by the mover and the clients.
pub struct Move {
    pub old: Members,
    pub new: Members,
    /// Tag → keys to move, for tags not moved yet.
    tags: Mutex<Tags>,
    /// The list is complete (false only while a resumed move rebuilds it).
    ready: tokio::sync::watch::Sender<bool>,
    chunk_bytes: usize,
    pub started: Instant,
    pub scanned: AtomicU64,
    pub tags_total: AtomicU64,
    pub tags_moved: AtomicU64,
    pub keys_moved: AtomicU64,
    pub bytes_moved: AtomicU64,
    pub keys_chunked: AtomicU64,
    pub errors: AtomicU64,
    pub last_error: Mutex<String>,
}

#[derive(Default)]
struct Tags {
    keys: HashMap<Bytes, HashSet<Bytes>>,
    locks: HashMap<Bytes, Arc<tokio::sync::Mutex<()>>>,
}

impl Move {
    fn new(old: Members, new: Members, ready: bool, chunk_bytes: usize) -> Move {
        Move {
            old,
            new,
            tags: Mutex::new(Tags::default()),
            ready: tokio::sync::watch::Sender::new(ready),
            chunk_bytes: chunk_bytes.max(1),
            started: Instant::now(),
            scanned: AtomicU64::new(0),
            tags_total: AtomicU64::new(0),
            tags_moved: AtomicU64::new(0),
            keys_moved: AtomicU64::new(0),
            bytes_moved: AtomicU64::new(0),
            keys_chunked: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            last_error: Mutex::new(String::new()),
        }
    }

    /// (old owner, new owner) of `key`'s tag when they differ.
    fn changing(&self, key: &[u8]) -> Option<(usize, usize)> {
        let (a, b) = (self.old.owner(key), self.new.owner(key));
        (a != b).then_some((a, b))
    }

    /// Lists `key` (whose tag changes owner) to be moved.
    fn record(&self, key: &[u8]) {
        let tag = Bytes::copy_from_slice(hash_tag(key));
        let mut t = self.tags.lock();
        t.keys
            .entry(tag)
            .or_default()
            .insert(Bytes::copy_from_slice(key));
    }

    pub fn pending_tags(&self) -> usize {
        self.tags.lock().keys.len()
    }

    /// Moves `tag` (if still listed) from its old owner to its new one; returns once it
    /// is on the new owner. Requests on the tag wait here meanwhile.
    pub async fn ensure_moved(&self, nodes: &[Arc<Node>], tag: &[u8]) -> Result<(), String> {
        if !*self.ready.borrow() {
            let mut rx = self.ready.subscribe();
            let _ = rx.wait_for(|r| *r).await;
        }
        let lock = {
            let mut t = self.tags.lock();
            if !t.keys.contains_key(tag) {
                return Ok(());
            }
            t.locks
                .entry(Bytes::copy_from_slice(tag))
                .or_default()
                .clone()
        };
        let _held = lock.lock().await;
        let keys: Vec<Bytes> = match self.tags.lock().keys.get(tag) {
            Some(k) => k.iter().cloned().collect(),
            // Moved by whoever held the lock before.
            None => return Ok(()),
        };
        // A tag is its own tag (it holds no `}` after a `{`): it places like its keys.
        let (src, dst) = (self.old.owner(tag), self.new.owner(tag));
        let r = self.copy_keys(&nodes[src], &nodes[dst], &keys).await;
        if let Err(e) = &r {
            self.errors.fetch_add(1, Relaxed);
            *self.last_error.lock() = e.clone();
            return r;
        }
        let mut t = self.tags.lock();
        t.keys.remove(tag);
        t.locks.remove(tag);
        self.tags_moved.fetch_add(1, Relaxed);
        Ok(())
    }

    /// Copies `keys` from `src` to `dst`, then deletes them from `src` (only after every
    /// copy succeeded: interrupted, the keys are still on `src` and copied again).
    async fn copy_keys(&self, src: &Node, dst: &Node, keys: &[Bytes]) -> Result<(), String> {
        let reads: Vec<_> = keys
            .iter()
            .map(|k| {
                (
                    src.send(false, MOVER_ID, resp::command(&[&b"DUMP"[..], k])),
                    src.send(false, MOVER_ID, resp::command(&[&b"PTTL"[..], k])),
                )
            })
            .collect();
        let mut found = Vec::with_capacity(keys.len());
        for (key, (dump, pttl)) in keys.iter().zip(reads) {
            let dump = frame(dump.await)?;
            let pttl = frame(pttl.await)?;
            let Frame::Bulk(payload) = dump else {
                continue; // gone (deleted or expired) since it was listed
            };
            let ttl = match pttl {
                Frame::Int(-2) => continue,
                Frame::Int(t) if t > 0 => t,
                _ => 0,
            };
            found.push((key, payload, ttl));
        }
        for (key, payload, ttl) in &found {
            if payload.len() > self.chunk_bytes && self.copy_chunked(src, dst, key, *ttl).await? {
                self.keys_chunked.fetch_add(1, Relaxed);
                self.bytes_moved.fetch_add(payload.len() as u64, Relaxed);
                continue;
            }
            let ttl = ttl.to_string();
            let args: [&[u8]; 5] = [b"RESTORE", key, ttl.as_bytes(), payload, b"REPLACE"];
            ok(call(dst, &args).await, "RESTORE")?;
            self.bytes_moved.fetch_add(payload.len() as u64, Relaxed);
        }
        if !found.is_empty() {
            let mut del: Vec<&[u8]> = vec![b"DEL"];
            del.extend(found.iter().map(|(k, _, _)| &k[..]));
            frame(src.send(false, MOVER_ID, resp::command(&del)).await)?;
            self.keys_moved.fetch_add(found.len() as u64, Relaxed);
        }
        Ok(())
    }

    /// Copies a big collection element by element into a temporary key on `dst`, then
    /// renames it over `key` and sets its TTL: no request to `dst` holds more than about
    /// `chunk_bytes`. False for a type it does not chunk (streams: their consumer groups'
    /// pending entries cannot be rebuilt by commands), which then goes as one RESTORE.
    async fn copy_chunked(
        &self,
        src: &Node,
        dst: &Node,
        key: &Bytes,
        ttl: i64,
    ) -> Result<bool, String> {
        let kind = match frame(call(src, &[&b"TYPE"[..], key]).await)? {
            Frame::Status(s) => s,
            _ => return Err("unexpected TYPE reply".into()),
        };
        let mut tmp = b"__respite_move__:".to_vec();
        tmp.extend_from_slice(key);
        let tmp = &tmp[..];
        let chunk = self.chunk_bytes;
        let mut n = CHUNK_ELEMENTS;
        match &kind[..] {
            b"string" => {
                ok(call(dst, &[&b"DEL"[..], tmp]).await, "DEL")?;
                let mut off = 0usize;
                loop {
                    let (a, b) = (off.to_string(), (off + chunk - 1).to_string());
                    let part = match frame(
                        call(src, &[&b"GETRANGE"[..], key, a.as_bytes(), b.as_bytes()]).await,
                    )? {
                        Frame::Bulk(p) => p,
                        _ => return Err("unexpected GETRANGE reply".into()),
                    };
                    if part.is_empty() {
                        break;
                    }
                    ok(call(dst, &[&b"APPEND"[..], tmp, &part]).await, "APPEND")?;
                    off += part.len();
                    if part.len() < chunk {
                        break;
                    }
                }
            }
            b"list" | b"zset" => {
                ok(call(dst, &[&b"DEL"[..], tmp]).await, "DEL")?;
                let zset = &kind[..] == b"zset";
                let mut at = 0usize;
                loop {
                    let (a, b) = (at.to_string(), (at + n - 1).to_string());
                    let mut args: Vec<&[u8]> = vec![
                        if zset { b"ZRANGE" } else { b"LRANGE" },
                        key,
                        a.as_bytes(),
                        b.as_bytes(),
                    ];
                    if zset {
                        args.push(b"WITHSCORES");
                    }
                    let (items, size) = bulks(call(src, &args).await)?;
                    if items.is_empty() {
                        break;
                    }
                    let got = if zset { items.len() / 2 } else { items.len() };
                    let mut put: Vec<&[u8]> = vec![if zset { b"ZADD" } else { b"RPUSH" }, tmp];
                    if zset {
                        // The reply is member, score pairs; ZADD wants score, member.
                        for pair in items.chunks(2) {
                            if let [m, s] = pair {
                                put.push(s);
                                put.push(m);
                            }
                        }
                    } else {
                        put.extend(items.iter().map(|i| &i[..]));
                    }
                    ok(call(dst, &put).await, "RPUSH/ZADD")?;
                    at += got;
                    if got < n {
                        break;
                    }
                    n = next_count(n, size, chunk);
                }
            }
            b"set" | b"hash" => {
                ok(call(dst, &[&b"DEL"[..], tmp]).await, "DEL")?;
                let set = &kind[..] == b"set";
                let mut cursor = Bytes::from_static(b"0");
                loop {
                    let count = n.to_string();
                    let cmd: &[u8] = if set { b"SSCAN" } else { b"HSCAN" };
                    let args: [&[u8]; 5] = [cmd, key, &cursor, b"COUNT", count.as_bytes()];
                    let Frame::Array(parts) = frame(call(src, &args).await)? else {
                        return Err("unexpected SSCAN/HSCAN reply".into());
                    };
                    let [next, items] = &parts[..] else {
                        return Err("unexpected SSCAN/HSCAN reply".into());
                    };
                    let Ok(Frame::Bulk(next)) = resp::decode(next) else {
                        return Err("unexpected SSCAN/HSCAN cursor".into());
                    };
                    let (items, size) = bulks(Ok(Ok(items.clone())))?;
                    if !items.is_empty() {
                        let mut put: Vec<&[u8]> = vec![if set { b"SADD" } else { b"HSET" }, tmp];
                        put.extend(items.iter().map(|i| &i[..]));
                        ok(call(dst, &put).await, "SADD/HSET")?;
                    }
                    n = next_count(n, size, chunk);
                    if &next[..] == b"0" {
                        break;
                    }
                    cursor = next;
                }
            }
            _ => return Ok(false),
        }
        ok(call(dst, &[&b"RENAME"[..], tmp, key]).await, "RENAME")?;
        if ttl > 0 {
            let t = ttl.to_string();
            frame(call(dst, &[&b"PEXPIRE"[..], key, t.as_bytes()]).await)?;
        }
        Ok(true)
    }
}

/// Elements for the next chunk: halved while replies come back over the byte budget.
fn next_count(n: usize, reply_bytes: usize, chunk: usize) -> usize {
    if reply_bytes > chunk {
        (n / 2).max(1)
    } else {
        n
    }
}

async fn call<A: AsRef<[u8]>>(node: &Node, args: &[A]) -> NodeReply {
    node.send(false, MOVER_ID, resp::command(args)).await
}

type NodeReply = Result<super::node::NodeResult, tokio::sync::oneshot::error::RecvError>;

/// A node's reply decoded; errors (its own, or the connection's) as text naming the node.
fn frame(r: NodeReply) -> Result<Frame, String> {
    let b = match r {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err("the proxy lost the node connection".into()),
    };
    match resp::decode(&b) {
        Ok(Frame::Error(e)) => Err(String::from_utf8_lossy(&e).into_owned()),
        Ok(f) => Ok(f),
        Err(_) => Err("unexpected reply from a node".into()),
    }
}

fn ok(r: NodeReply, what: &str) -> Result<(), String> {
    frame(r).map(drop).map_err(|e| format!("{what}: {e}"))
}

/// An array of bulk strings, and its size on the wire.
fn bulks(
    r: Result<super::node::NodeResult, tokio::sync::oneshot::error::RecvError>,
) -> Result<(Vec<Bytes>, usize), String> {
    let raw = match &r {
        Ok(Ok(b)) => b.len(),
        _ => 0,
    };
    let Frame::Array(kids) = frame(r)? else {
        return Err("unexpected reply: not an array".into());
    };
    let mut out = Vec::with_capacity(kids.len());
    for k in &kids {
        match resp::decode(k) {
            Ok(Frame::Bulk(b)) => out.push(b),
            _ => return Err("unexpected reply: not a bulk string".into()),
        }
    }
    Ok((out, raw))
}

/// Before a request is routed by `fleet`: during a move, makes sure each key's tag is
/// where `fleet` routes it (phase 1 lists the key; phase 2 moves its tag first).
pub async fn prepare(fleet: &Fleet, args: &[Bytes]) -> Result<(), String> {
    if fleet.moving.is_none() {
        return Ok(());
    }
    let (keys, empty) = super::route::data_keys(args);
    let keys = keys
        .iter()
        .map(|&i| &args[i][..])
        .chain(empty.then_some(&b""[..]));
    prepare_keys(fleet, keys).await
}

pub async fn prepare_keys<'a>(
    fleet: &Fleet,
    keys: impl Iterator<Item = &'a [u8]>,
) -> Result<(), String> {
    let Some((mv, phase)) = &fleet.moving else {
        return Ok(());
    };
    for key in keys {
        if mv.changing(key).is_none() {
            continue;
        }
        match phase {
            Phase::Catalog => mv.record(key),
            Phase::Moving => mv
                .ensure_moved(&fleet.nodes, hash_tag(key))
                .await
                .map_err(|e| format!("ERR moving this key's tag to its new node failed: {e}"))?,
        }
    }
    Ok(())
}

/// Waits until no client batch runs on `prev` (each holds the snapshot it routes by).
/// A batch ends when its replies are written; a client that stops reading a large
/// output holds it meanwhile, so a long wait is logged.
async fn quiesce(prev: Arc<Fleet>) {
    let start = Instant::now();
    let mut warned = false;
    while Arc::strong_count(&prev) > 1 {
        if !warned && start.elapsed() > Duration::from_secs(5) {
            warned = true;
            tracing::warn!(
                "online rebalance: waiting for client batches still routed by the previous fleet"
            );
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The proxy's online-rebalance state.
#[derive(Default)]
pub struct Online {
    /// One reload at a time.
    admin: Mutex<()>,
    current: Mutex<Option<Arc<Move>>>,
    /// A reload asked for while a move ran: done when it ends.
    reload_pending: AtomicBool,
    pub completed: AtomicU64,
    /// How the last move ended.
    pub last: Mutex<String>,
}

impl Online {
    pub fn current(&self) -> Option<Arc<Move>> {
        self.current.lock().clone()
    }
}

/// Where a move's phase is kept so a restarted proxy resumes it: next to the config file.
fn state_path(cfg: &ProxyConfig) -> Option<PathBuf> {
    let p = cfg.config_path.as_ref()?;
    let mut s = p.as_os_str().to_owned();
    s.push(".rebalance");
    Some(PathBuf::from(s))
}

/// Written whole (temporary file, then rename), readable by the owner only: the URLs hold
/// the nodes' passwords, as the config file does.
fn save_state(path: &Path, phase: Phase, old: &Members, new: &Members) -> std::io::Result<()> {
    let mut text = String::from("# respite proxy: an online rebalance in progress; do not edit\n");
    text.push_str(match phase {
        Phase::Catalog => "phase catalog\n",
        Phase::Moving => "phase moving\n",
    });
    for (what, m) in [("old", old), ("new", new)] {
        for s in &m.specs {
            text.push_str(&format!("{what} {} {}\n", s.id, quote(&s.full_url())));
        }
    }
    let tmp = path.with_extension("rebalance.tmp");
    {
        use std::io::Write;
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
        let mut f = o.open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// A double-quoted word as the config file reads it (a password may hold spaces).
fn quote(s: &str) -> String {
    let mut q = String::from("\"");
    for c in s.chars() {
        match c {
            '\\' => q.push_str("\\\\"),
            '"' => q.push_str("\\\""),
            '\n' => q.push_str("\\n"),
            '\r' => q.push_str("\\r"),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// A saved move: (phase, old nodes, new nodes).
pub type Saved = (Phase, Vec<NodeSpec>, Vec<NodeSpec>);

pub fn load_state(cfg: &ProxyConfig) -> Result<Option<Saved>, String> {
    let Some(path) = state_path(cfg) else {
        return Ok(None);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let bad = |n: usize| format!("{}: line {n} is not understood", path.display());
    let (mut phase, mut old, mut new) = (None, Vec::new(), Vec::new());
    for (i, line) in text.lines().enumerate() {
        let words =
            crate::protocol::parse::split_args(line.as_bytes()).ok_or_else(|| bad(i + 1))?;
        let words: Vec<String> = words
            .iter()
            .map(|w| String::from_utf8(w.to_vec()))
            .collect::<Result<_, _>>()
            .map_err(|_| bad(i + 1))?;
        let w: Vec<&str> = words.iter().map(String::as_str).collect();
        match w[..] {
            [] => {}
            [c, ..] if c.starts_with('#') => {}
            ["phase", "catalog"] => phase = Some(Phase::Catalog),
            ["phase", "moving"] => phase = Some(Phase::Moving),
            [which @ ("old" | "new"), id, url] => {
                let mut s = NodeSpec::parse_url(url).map_err(|_| bad(i + 1))?;
                s.id = id.to_string();
                if which == "old" {
                    old.push(s)
                } else {
                    new.push(s)
                }
            }
            _ => return Err(bad(i + 1)),
        }
    }
    match phase {
        Some(p) if !old.is_empty() && !new.is_empty() => Ok(Some((p, old, new))),
        _ => Err(bad(0)),
    }
}

/// The fleet a proxy starts with: its config's nodes, or, when a saved move was in phase
/// 2, old and new together, routed by new, with a move that rebuilds its list
/// ([`resume`]). A move saved in phase 1 moved nothing yet: it starts over.
pub fn boot(cfg: &ProxyConfig) -> Result<(Fleet, Option<Vec<NodeSpec>>), String> {
    match load_state(cfg)? {
        None => {
            let nodes = cfg
                .nodes
                .iter()
                .map(|s| Arc::new(Node::start(s.clone(), cfg)))
                .collect();
            let routing = Members::new(cfg.nodes.clone(), (0..cfg.nodes.len()).collect());
            Ok((Fleet::at_rest(nodes, routing), None))
        }
        Some((Phase::Catalog, old, new)) => {
            let nodes = old
                .iter()
                .map(|s| Arc::new(Node::start(s.clone(), cfg)))
                .collect();
            let routing = Members::new(old.clone(), (0..old.len()).collect());
            Ok((Fleet::at_rest(nodes, routing), Some(new)))
        }
        Some((Phase::Moving, old, new)) => {
            let mut table: Vec<NodeSpec> = new.clone();
            for s in &old {
                if !table.iter().any(|t| t.id == s.id) {
                    table.push(s.clone());
                }
            }
            let index_of = |id: &str| table.iter().position(|t| t.id == id).unwrap_or(0);
            let old_m = Members::new(old.clone(), old.iter().map(|s| index_of(&s.id)).collect());
            let new_m = Members::new(new.clone(), (0..new.len()).collect());
            let nodes = table
                .iter()
                .map(|s| Arc::new(Node::start(s.clone(), cfg)))
                .collect();
            let mv = Arc::new(Move::new(old_m, new_m.clone(), false, cfg.move_chunk_bytes));
            let members = (0..table.len()).collect();
            let fleet = Fleet {
                nodes,
                members,
                routing: new_m,
                moving: Some((mv, Phase::Moving)),
            };
            Ok((fleet, None))
        }
    }
}

/// After start: carries on a move found in the state file.
pub fn resume(p: &Arc<Proxy>, restart_to: Option<Vec<NodeSpec>>) {
    if let Some(new) = restart_to {
        tracing::info!("restarting an interrupted online rebalance (it had moved nothing)");
        if let Err(e) = apply_nodes(p, new) {
            tracing::warn!("could not restart the online rebalance: {e}");
        }
        return;
    }
    let f = p.fleet.load_full();
    if let Some((mv, _)) = &f.moving {
        tracing::info!("resuming an interrupted online rebalance: rebuilding its key list");
        *p.online.current.lock() = Some(mv.clone());
        // The config file may have changed again since: applied once this move ends.
        p.online.reload_pending.store(true, Relaxed);
        tokio::spawn(run_move(p.clone(), mv.clone(), None));
    }
}

/// `PROXY RELOAD` / SIGHUP: reads the node list again from the config file.
pub fn reload(p: &Arc<Proxy>) -> Result<String, String> {
    let path = p
        .cfg
        .config_path
        .as_ref()
        .ok_or("ERR the proxy was started without --config: there is nothing to reload")?;
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("ERR reading {}: {e}", path.display()))?;
    let mut cfg = ProxyConfig::default();
    super::config_file::parse(&text, &mut cfg)
        .map_err(|e| format!("ERR {}: {e}", path.display()))?;
    cfg.validate().map_err(|e| format!("ERR {e}"))?;
    apply_nodes(p, cfg.nodes)
}

/// Makes `specs` the fleet: a changed URL (or password) for a kept id reconnects in place;
/// an added or removed id starts an online move.
pub fn apply_nodes(p: &Arc<Proxy>, specs: Vec<NodeSpec>) -> Result<String, String> {
    let _one = p.online.admin.lock();
    let cur = p.fleet.load_full();
    // (`cur.moving`: a resumed move not yet handed to its mover.)
    if p.online.current().is_some() || cur.moving.is_some() {
        p.online.reload_pending.store(true, Relaxed);
        return Ok("a rebalance is running: the node list will be applied when it ends".into());
    }
    let mut nodes = cur.nodes.clone();
    let mut index = Vec::with_capacity(specs.len());
    let mut reconnected = 0;
    for s in &specs {
        match nodes.iter().position(|n| n.id() == s.id) {
            Some(i) => {
                if nodes[i].info.spec != *s {
                    nodes[i] = Arc::new(Node::start(s.clone(), &p.cfg));
                    reconnected += 1;
                }
                index.push(i);
            }
            None => {
                nodes.push(Arc::new(Node::start(s.clone(), &p.cfg)));
                index.push(nodes.len() - 1);
            }
        }
    }
    let new = Members::new(specs, index);
    let old = cur.routing.clone();
    let mut a = old.ids();
    let mut b = new.ids();
    a.sort_unstable();
    b.sort_unstable();
    if a == b {
        p.fleet.store(Arc::new(Fleet::at_rest(nodes, new)));
        return Ok(format!(
            "reloaded: {reconnected} node(s) reconnected, no key moves"
        ));
    }
    if let Some(path) = state_path(&p.cfg) {
        save_state(&path, Phase::Catalog, &old, &new)
            .map_err(|e| format!("ERR saving the rebalance state: {e}"))?;
    }
    let summary = format!("rebalancing online from {} to {}", a.join(","), b.join(","));
    tracing::info!("{summary}");
    let mv = Arc::new(Move::new(old.clone(), new, true, p.cfg.move_chunk_bytes));
    let mut members: Vec<usize> = old
        .indexes()
        .iter()
        .chain(mv.new.indexes())
        .copied()
        .collect();
    members.sort_unstable();
    members.dedup();
    let f1 = Fleet {
        nodes,
        members,
        routing: old,
        moving: Some((mv.clone(), Phase::Catalog)),
    };
    let prev = p.fleet.swap(Arc::new(f1));
    *p.online.current.lock() = Some(mv.clone());
    tokio::spawn(run_move(p.clone(), mv, Some(prev)));
    Ok(summary)
}

/// The mover: catalog (phase 1, unless resumed), then phase 2 until every tag moved,
/// then the fleet at rest on the new members.
async fn run_move(p: Arc<Proxy>, mv: Arc<Move>, prev: Option<Arc<Fleet>>) {
    let resumed = prev.is_none();
    if let Some(prev) = prev {
        quiesce(prev).await;
    }
    catalog(&p, &mv).await;
    mv.tags_total.store(mv.pending_tags() as u64, Relaxed);
    if resumed {
        mv.ready.send_replace(true);
    } else {
        if let Some(path) = state_path(&p.cfg) {
            if let Err(e) = save_state(&path, Phase::Moving, &mv.old, &mv.new) {
                tracing::warn!("saving the rebalance state failed: {e}");
            }
        }
        let f1 = p.fleet.load_full();
        let f2 = Fleet {
            nodes: f1.nodes.clone(),
            members: f1.members.clone(),
            routing: mv.new.clone(),
            moving: Some((mv.clone(), Phase::Moving)),
        };
        drop(f1);
        quiesce(p.fleet.swap(Arc::new(f2))).await;
    }
    let nodes = Arc::new(p.fleet.load_full().nodes.clone());
    let mut logged = Instant::now();
    loop {
        let tags: Vec<Bytes> = mv.tags.lock().keys.keys().cloned().collect();
        if tags.is_empty() {
            break;
        }
        // Tags are independent: several in flight hide the round trips.
        let mut tasks = tokio::task::JoinSet::new();
        let mut failed = false;
        for tag in tags {
            if logged.elapsed() >= PROGRESS_EVERY {
                logged = Instant::now();
                tracing::info!(
                    "online rebalance: {} of {} tags moved, {} keys, {} bytes",
                    mv.tags_moved.load(Relaxed),
                    mv.tags_total.load(Relaxed),
                    mv.keys_moved.load(Relaxed),
                    mv.bytes_moved.load(Relaxed)
                );
            }
            if tasks.len() >= MOVES_IN_FLIGHT {
                failed |= matches!(tasks.join_next().await, Some(Ok(Err(_))));
            }
            let (mv, nodes) = (mv.clone(), nodes.clone());
            tasks.spawn(async move {
                let r = mv.ensure_moved(&nodes, &tag).await;
                if let Err(e) = &r {
                    tracing::warn!("online rebalance: moving a tag failed, will retry: {e}");
                }
                r
            });
        }
        while let Some(r) = tasks.join_next().await {
            failed |= matches!(r, Ok(Err(_)));
        }
        if failed {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let nodes = nodes.to_vec();
    let done = Fleet::at_rest(nodes, mv.new.clone());
    p.fleet.store(Arc::new(done));
    if let Some(path) = state_path(&p.cfg) {
        let _ = std::fs::remove_file(path);
    }
    let summary = format!(
        "moved {} keys ({} bytes, {} chunked) in {} tags in {} ms",
        mv.keys_moved.load(Relaxed),
        mv.bytes_moved.load(Relaxed),
        mv.keys_chunked.load(Relaxed),
        mv.tags_moved.load(Relaxed),
        mv.started.elapsed().as_millis()
    );
    tracing::info!("online rebalance done: {summary}");
    let pending = {
        // Under the reload lock: a reload either saw this move running (and left
        // `reload_pending`) or runs after it.
        let _one = p.online.admin.lock();
        *p.online.last.lock() = summary;
        p.online.completed.fetch_add(1, Relaxed);
        *p.online.current.lock() = None;
        p.online.reload_pending.swap(false, Relaxed)
    };
    if pending {
        match reload(&p) {
            Ok(s) => tracing::info!("{s}"),
            Err(e) => tracing::warn!("reload after the rebalance failed: {e}"),
        }
    }
}

/// SCANs every old member for keys whose tag changes owner (retrying a node that fails).
async fn catalog(p: &Arc<Proxy>, mv: &Move) {
    let nodes = p.fleet.load_full().nodes.clone();
    for &n in mv.old.indexes() {
        let node = &nodes[n];
        let mut cursor = Bytes::from_static(b"0");
        loop {
            let count = SCAN_COUNT.to_string();
            let args: [&[u8]; 4] = [b"SCAN", &cursor, b"COUNT", count.as_bytes()];
            let page = match scan_page(call(node, &args).await) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(
                        "online rebalance: SCAN of {} failed, retrying: {e}",
                        node.id()
                    );
                    mv.errors.fetch_add(1, Relaxed);
                    *mv.last_error.lock() = e;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            mv.scanned.fetch_add(page.1.len() as u64, Relaxed);
            for k in &page.1 {
                if matches!(mv.changing(k), Some((from, _)) if from == n) {
                    mv.record(k);
                }
            }
            if &page.0[..] == b"0" {
                break;
            }
            cursor = page.0;
        }
    }
}

fn scan_page(r: NodeReply) -> Result<(Bytes, Vec<Bytes>), String> {
    let Frame::Array(parts) = frame(r)? else {
        return Err("unexpected SCAN reply".into());
    };
    let [cursor, keys] = &parts[..] else {
        return Err("unexpected SCAN reply".into());
    };
    let Ok(Frame::Bulk(cursor)) = resp::decode(cursor) else {
        return Err("unexpected SCAN cursor".into());
    };
    let (keys, _) = bulks(Ok(Ok(keys.clone())))?;
    Ok((cursor, keys))
}

/// INFO's `# Rebalance` section (also `PROXY REBALANCE STATUS`).
pub fn info(p: &Proxy) -> String {
    let mut s = String::from("# Rebalance\r\n");
    let f = p.fleet.load_full();
    match &f.moving {
        None => s.push_str("rebalance_state:idle\r\n"),
        Some((mv, phase)) => {
            let state = match (phase, *mv.ready.borrow()) {
                (Phase::Catalog, _) => "cataloging",
                (Phase::Moving, false) => "resuming",
                (Phase::Moving, true) => "moving",
            };
            s.push_str(&format!(
                "rebalance_state:{state}\r\nrebalance_from:{}\r\nrebalance_to:{}\r\nrebalance_keys_scanned:{}\r\nrebalance_tags_total:{}\r\nrebalance_tags_pending:{}\r\nrebalance_tags_moved:{}\r\nrebalance_keys_moved:{}\r\nrebalance_bytes_moved:{}\r\nrebalance_keys_chunked:{}\r\nrebalance_errors:{}\r\nrebalance_last_error:{}\r\nrebalance_elapsed_ms:{}\r\n",
                mv.old.ids().join(","),
                mv.new.ids().join(","),
                mv.scanned.load(Relaxed),
                mv.tags_total.load(Relaxed),
                mv.pending_tags(),
                mv.tags_moved.load(Relaxed),
                mv.keys_moved.load(Relaxed),
                mv.bytes_moved.load(Relaxed),
                mv.keys_chunked.load(Relaxed),
                mv.errors.load(Relaxed),
                one_line(&mv.last_error.lock()),
                mv.started.elapsed().as_millis(),
            ));
        }
    }
    s.push_str(&format!(
        "rebalance_nodes:{}\r\nrebalances_completed:{}\r\nrebalance_last:{}\r\n",
        f.routing.ids().join(","),
        p.online.completed.load(Relaxed),
        one_line(&p.online.last.lock()),
    ));
    s
}

/// Free text kept on one INFO line.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if matches!(c, '\r' | '\n') { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(ids: &[&str]) -> Members {
        let specs: Vec<NodeSpec> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| {
                NodeSpec::parse(&format!("{id}=redis://u:p w\"x\\y@h:{}/2", 7000 + i)).unwrap()
            })
            .collect();
        let n = specs.len();
        Members::new(specs, (0..n).collect())
    }

    #[test]
    fn the_state_file_round_trips_with_passwords_and_is_private() {
        let dir = std::env::temp_dir().join(format!("respite-online-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = ProxyConfig {
            config_path: Some(dir.join("proxy.conf")),
            ..ProxyConfig::default()
        };
        assert_eq!(load_state(&cfg).unwrap(), None);
        let (old, new) = (members(&["a", "b"]), members(&["a", "b", "c"]));
        let path = state_path(&cfg).unwrap();
        save_state(&path, Phase::Moving, &old, &new).unwrap();
        let (phase, o, n) = load_state(&cfg).unwrap().unwrap();
        assert_eq!(phase, Phase::Moving);
        assert_eq!(o, old.specs);
        assert_eq!(n, new.specs);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "{mode:o}");
        }
        std::fs::write(&path, "phase sideways\n").unwrap();
        assert!(load_state(&cfg).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_keys_whose_owner_changes_are_listed_per_tag() {
        let mv = Move::new(members(&["a", "b"]), members(&["a", "b", "c"]), true, 1);
        let mut changing = 0;
        for i in 0..300 {
            for k in [
                format!("{{t{i}}}:x"),
                format!("{{t{i}}}:y"),
                format!("plain{i}"),
            ] {
                if mv.changing(k.as_bytes()).is_some() {
                    mv.record(k.as_bytes());
                    changing += 1;
                }
            }
        }
        // Growing 2 → 3 moves about a third, all of it to the new node.
        assert!((150..=450).contains(&changing), "{changing}");
        let t = mv.tags.lock();
        for (tag, keys) in &t.keys {
            for k in keys {
                assert_eq!(hash_tag(k), &tag[..]);
                assert_eq!(mv.new.owner(k), 2);
                // A tag places like its keys (ensure_moved relies on it).
                assert_eq!(mv.new.owner(tag), mv.new.owner(k));
                assert_eq!(mv.old.owner(tag), mv.old.owner(k));
            }
        }
        assert!(t.keys.values().any(|k| k.len() == 2));
    }

    #[test]
    fn chunks_shrink_while_replies_are_over_budget() {
        assert_eq!(next_count(1024, 100, 1000), 1024);
        assert_eq!(next_count(1024, 5000, 1000), 512);
        assert_eq!(next_count(1, 5000, 1000), 1);
    }
}
