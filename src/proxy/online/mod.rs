//! Online rebalancing (DESIGN.md §7): the fleet grows or shrinks while clients keep
//! writing, and nothing acknowledged is lost.
//!
//! A move from placement `old` to `new` has two phases, each a [`Fleet`] snapshot; a
//! client routes a whole read batch by one snapshot, and the mover waits, after each swap,
//! until no batch still runs on the previous one (`quiesce`):
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
//!
//! `copy`: moving one tag's keys (whole or in chunks); `state`: the state file.

mod copy;
mod state;

use super::config::{NodeSpec, ProxyConfig};
use super::fleet::{Fleet, Members};
use super::node::Node;
use super::resp::{self, Frame};
use super::Proxy;
use crate::types::placement::hash_tag;
use bytes::Bytes;
use copy::{bulks, call, frame, NodeReply};
use parking_lot::Mutex;
pub use state::{load_state, Saved};
use state::{save_state, state_path};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// SCAN COUNT while cataloging an old member.
const SCAN_COUNT: usize = 1000;
/// How often the mover logs its progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// Tags the background mover moves at once.
const MOVES_IN_FLIGHT: usize = 16;

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
    use super::copy::next_count;
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
