//! `respite rebalance --from OLD --to NEW` (DESIGN.md §7): after the fleet changes, move
//! exactly the keys whose owner changed, between independent primaries.
//!
//! Every node of the old fleet is SCANned completely; a key whose owner under the new
//! placement is not the node it lives on is copied (`DUMP` + `PTTL` on the source, pipelined
//! per SCAN batch; `RESTORE key ttl payload REPLACE` on the owner) and only then deleted from
//! the source. Copy-before-delete makes the tool safe to interrupt and re-run: a key is always
//! on at least one node, a key left on both (stopped between RESTORE and DEL) is still found
//! on its old node next time and resolved the same way, and keys already in place are never
//! touched. Node ids decide placement, so a node kept across fleets has the same id in both;
//! its URL is taken from the new fleet.
//!
//! Not safe against concurrent writers to the keys being moved (a write to the source between
//! DUMP and DEL is lost): run it while clients are stopped or go through a proxy that already
//! uses the new fleet and cannot reach the old copies.

use super::config::{NodeSpec, Placement};
use super::sync_client::{Resp, SyncConn};
use std::fmt;
use std::time::Duration;

/// Called after every SCAN batch (about `batch` keys); return `false` to stop cleanly (the
/// run can be resumed by running again).
pub type ProgressFn = Box<dyn FnMut(&Progress) -> bool + Send>;

pub struct RebalanceOptions {
    pub from: Vec<NodeSpec>,
    pub to: Vec<NodeSpec>,
    /// SCAN COUNT, and the pipeline depth of the DUMP/RESTORE/DEL rounds.
    pub batch: usize,
    /// Count what would move; change nothing.
    pub dry_run: bool,
    pub progress: Option<ProgressFn>,
}

/// Running totals, passed to the progress callback.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// The old-fleet node being scanned, and its position (1-based) among them.
    pub node: String,
    pub node_index: usize,
    pub nodes: usize,
    pub scanned: u64,
    /// Moved (or, in a dry run, to be moved).
    pub moved: u64,
    pub already_in_place: u64,
    pub failed: u64,
    pub dry_run: bool,
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "scanning {} ({}/{}): {} keys scanned, {} {}, {} already in place, {} failed",
            self.node,
            self.node_index,
            self.nodes,
            self.scanned,
            self.moved,
            if self.dry_run { "to move" } else { "moved" },
            self.already_in_place,
            self.failed
        )
    }
}

/// Per-node counts (every node of either fleet, new fleet first).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeCounts {
    pub id: String,
    pub scanned: u64,
    pub kept: u64,
    pub moved_out: u64,
    pub moved_in: u64,
    pub failed: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub scanned: u64,
    /// Keys moved (in a dry run: keys that would move).
    pub moved: u64,
    pub already_in_place: u64,
    /// Keys that could not be moved (each still on its source; see `errors`).
    pub failed: u64,
    /// Keys that disappeared (deleted or expired) between SCAN and DUMP.
    pub vanished: u64,
    /// Keys found on a node the old placement does not name (handled as usual). Expected when
    /// resuming a run that moved keys off leaving nodes; otherwise `--from` is not the fleet
    /// that wrote the data.
    pub stray: u64,
    pub per_node: Vec<NodeCounts>,
    /// The first few per-key errors.
    pub errors: Vec<String>,
    pub dry_run: bool,
    /// False when the progress callback stopped the run early.
    pub complete: bool,
}

const MAX_ERRORS: usize = 20;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match (self.complete, self.dry_run) {
            (true, false) => "rebalance complete",
            (false, false) => "rebalance interrupted (run again to resume)",
            (true, true) => "dry run complete",
            (false, true) => "dry run interrupted",
        };
        writeln!(
            f,
            "{state}: {} keys scanned, {} {}, {} already in place, {} failed",
            self.scanned,
            self.moved,
            if self.dry_run { "would move" } else { "moved" },
            self.already_in_place,
            self.failed
        )?;
        if self.vanished > 0 {
            writeln!(f, "  {} keys vanished while being moved", self.vanished)?;
        }
        if self.stray > 0 {
            writeln!(
                f,
                "  {} keys were not on the node the old placement names",
                self.stray
            )?;
        }
        for n in &self.per_node {
            writeln!(
                f,
                "  {}: scanned {}, kept {}, moved out {}, moved in {}, failed {}",
                n.id, n.scanned, n.kept, n.moved_out, n.moved_in, n.failed
            )?;
        }
        if !self.errors.is_empty() {
            writeln!(f, "errors (first {}):", self.errors.len())?;
            for e in &self.errors {
                writeln!(f, "  {e}")?;
            }
        }
        Ok(())
    }
}

/// Parses `ID=redis://...,ID=redis://...` (a password containing `,` cannot be given here).
/// A piece that is a bare URL is a further address (a replica) of the node before it.
pub fn parse_node_list(s: &str) -> Result<Vec<NodeSpec>, String> {
    let mut items: Vec<String> = Vec::new();
    for piece in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let url = piece.starts_with("redis://") || piece.starts_with("rediss://");
        match items.last_mut() {
            Some(item) if url => {
                item.push(',');
                item.push_str(piece);
            }
            _ => items.push(piece.to_string()),
        }
    }
    let nodes = items
        .iter()
        .map(|item| NodeSpec::parse(item))
        .collect::<Result<Vec<_>, _>>()?;
    if nodes.is_empty() {
        return Err("the node list is empty (expected ID=redis://host:port,...)".into());
    }
    check_unique_ids(&nodes)?;
    Ok(nodes)
}

fn check_unique_ids(nodes: &[NodeSpec]) -> Result<(), String> {
    for (i, n) in nodes.iter().enumerate() {
        if nodes[..i].iter().any(|m| m.id == n.id) {
            return Err(format!("node id '{}' appears twice", n.id));
        }
    }
    Ok(())
}

/// The union of both fleets with the index maps the run needs.
struct Plan {
    /// New fleet first (so a new-placement owner index is a node index), then old-only nodes.
    nodes: Vec<NodeSpec>,
    /// Old-fleet nodes to scan as (index in `--from`, node index): nodes kept in the new
    /// fleet first, then the leaving ones. Under rendezvous placement a kept node only loses
    /// keys to newly added nodes (never scanned), and leaving nodes are scanned last, so no
    /// key moved during a run is scanned twice.
    sources: Vec<(usize, usize)>,
    old: Placement,
    new: Placement,
}

impl Plan {
    fn new(from: &[NodeSpec], to: &[NodeSpec]) -> Result<Plan, String> {
        if from.is_empty() || to.is_empty() {
            return Err("both --from and --to need at least one node".into());
        }
        check_unique_ids(from)?;
        check_unique_ids(to)?;
        let mut nodes = to.to_vec();
        let (mut kept, mut leaving) = (Vec::new(), Vec::new());
        for (f, n) in from.iter().enumerate() {
            match nodes.iter().position(|m| m.id == n.id) {
                Some(i) => kept.push((f, i)),
                None => {
                    leaving.push((f, nodes.len()));
                    nodes.push(n.clone());
                }
            }
        }
        let mut sources = kept;
        sources.append(&mut leaving);
        // Two ids on one database would make "move to the other id" delete the only copy.
        for (i, a) in nodes.iter().enumerate() {
            if let Some(b) = nodes[..i]
                .iter()
                .find(|b| b.host == a.host && b.port == a.port && b.db == a.db)
            {
                return Err(format!(
                    "nodes '{}' and '{}' are the same database ({} db {})",
                    b.id,
                    a.id,
                    a.addr(),
                    a.db
                ));
            }
        }
        Ok(Plan {
            nodes,
            sources,
            old: Placement::new(from),
            new: Placement::new(to),
        })
    }
}

/// Moves every key whose owner changed from `opts.from` to `opts.to`. A node or network
/// failure stops the run with an error naming the node (already moved keys stay moved, the
/// rest can be resumed by running again); a key-level failure is counted and the run goes on.
pub fn rebalance(opts: RebalanceOptions) -> Result<Summary, String> {
    if opts.batch == 0 {
        return Err("the batch size must be at least 1".into());
    }
    let plan = Plan::new(&opts.from, &opts.to)?;
    let mut run = Run {
        summary: Summary {
            per_node: plan
                .nodes
                .iter()
                .map(|n| NodeCounts {
                    id: n.id.clone(),
                    ..NodeCounts::default()
                })
                .collect(),
            dry_run: opts.dry_run,
            ..Summary::default()
        },
        conns: Vec::new(),
        batch: opts.batch,
        progress: opts.progress,
        plan,
    };
    // Connect to every node first: an unreachable target is better found before anything
    // has moved.
    for n in &run.plan.nodes {
        run.conns.push(SyncConn::connect(n, CONNECT_TIMEOUT)?);
    }
    match run.all() {
        Ok(complete) => {
            run.summary.complete = complete;
            Ok(run.summary)
        }
        Err(e) => Err(format!(
            "{e} (stopped after {} keys scanned, {} moved; run again to resume)",
            run.summary.scanned, run.summary.moved
        )),
    }
}

struct Run {
    plan: Plan,
    /// One connection per node of `plan.nodes`, same index.
    conns: Vec<SyncConn>,
    summary: Summary,
    batch: usize,
    progress: Option<ProgressFn>,
}

/// A key on its way: read from the source, to be restored on `target`.
struct Moving {
    key: Vec<u8>,
    target: usize,
    ttl: i64,
    payload: Vec<u8>,
}

impl Run {
    /// Scans every old node; `Ok(false)` when the callback stopped the run.
    fn all(&mut self) -> Result<bool, String> {
        let sources = self.plan.sources.clone();
        for (pos, &(from_idx, src)) in sources.iter().enumerate() {
            if !self.node(pos, from_idx, src)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// SCANs one node to the end, moving its misplaced keys batch by batch.
    /// `pos` is the node's place in the scan order (for progress), `from_idx` its index in
    /// the old fleet (for the old placement), `src` its node index.
    fn node(&mut self, pos: usize, from_idx: usize, src: usize) -> Result<bool, String> {
        let count = self.batch.to_string();
        let mut cursor = b"0".to_vec();
        loop {
            let reply = self.conns[src].call(&[b"SCAN", &cursor, b"COUNT", count.as_bytes()])?;
            let (next, keys) = scan_reply(reply)
                .map_err(|e| format!("{}: SCAN failed: {e}", self.conns[src].name()))?;
            self.batch_of(from_idx, src, keys)?;
            if !self.report(pos, src) {
                return Ok(false);
            }
            if next == b"0" {
                return Ok(true);
            }
            cursor = next;
        }
    }

    fn report(&mut self, pos: usize, src: usize) -> bool {
        let Some(cb) = self.progress.as_mut() else {
            return true;
        };
        let s = &self.summary;
        cb(&Progress {
            node: self.plan.nodes[src].id.clone(),
            node_index: pos + 1,
            nodes: self.plan.sources.len(),
            scanned: s.scanned,
            moved: s.moved,
            already_in_place: s.already_in_place,
            failed: s.failed,
            dry_run: s.dry_run,
        })
    }

    fn batch_of(&mut self, from_idx: usize, src: usize, keys: Vec<Vec<u8>>) -> Result<(), String> {
        let mut moving = Vec::new();
        for key in keys {
            self.summary.scanned += 1;
            self.summary.per_node[src].scanned += 1;
            if self.plan.old.owner(&key) != from_idx {
                self.summary.stray += 1;
            }
            let target = self.plan.new.owner(&key);
            if target == src {
                self.summary.already_in_place += 1;
                self.summary.per_node[src].kept += 1;
            } else {
                moving.push((key, target));
            }
        }
        if moving.is_empty() {
            return Ok(());
        }
        if self.summary.dry_run {
            for (_, target) in moving {
                self.moved(src, target);
            }
            return Ok(());
        }
        let read = self.read_source(src, moving)?;
        let restored = self.restore(src, read)?;
        self.delete(src, restored)
    }

    fn moved(&mut self, src: usize, target: usize) {
        self.summary.moved += 1;
        self.summary.per_node[src].moved_out += 1;
        self.summary.per_node[target].moved_in += 1;
    }

    fn fail(&mut self, src: usize, msg: String) {
        self.summary.failed += 1;
        self.summary.per_node[src].failed += 1;
        if self.summary.errors.len() < MAX_ERRORS {
            self.summary.errors.push(msg);
        }
    }

    /// PTTL + DUMP of every key, pipelined; drops keys that vanished or failed.
    fn read_source(
        &mut self,
        src: usize,
        moving: Vec<(Vec<u8>, usize)>,
    ) -> Result<Vec<Moving>, String> {
        let conn = &mut self.conns[src];
        for (key, _) in &moving {
            conn.send(&[b"PTTL", key])?;
            conn.send(&[b"DUMP", key])?;
        }
        let mut out = Vec::with_capacity(moving.len());
        for (key, target) in moving {
            let (pttl, dump) = (self.conns[src].read()?, self.conns[src].read()?);
            let src_id = &self.plan.nodes[src].id;
            let ttl = match pttl {
                // -1: no TTL (RESTORE's 0). A key about to expire reports 0, which RESTORE
                // would read as "persistent": keep it expiring.
                Resp::Int(-1) => 0,
                Resp::Int(-2) => {
                    self.summary.vanished += 1;
                    continue;
                }
                Resp::Int(n) if n >= 0 => n.max(1),
                other => {
                    let msg = format!("{}: PTTL on {src_id}: {}", show(&key), describe(other));
                    self.fail(src, msg);
                    continue;
                }
            };
            match dump {
                Resp::Bulk(payload) => out.push(Moving {
                    key,
                    target,
                    ttl,
                    payload,
                }),
                Resp::Nil => self.summary.vanished += 1,
                other => {
                    let msg = format!("{}: DUMP on {src_id}: {}", show(&key), describe(other));
                    self.fail(src, msg);
                }
            }
        }
        Ok(out)
    }

    /// RESTORE … REPLACE on each target, pipelined per target; returns the keys now safely
    /// on their new owner.
    fn restore(&mut self, src: usize, mut read: Vec<Moving>) -> Result<Vec<Vec<u8>>, String> {
        read.sort_by_key(|m| m.target);
        let mut restored = Vec::with_capacity(read.len());
        for group in read.chunk_by(|a, b| a.target == b.target) {
            let target = group[0].target;
            for m in group {
                let ttl = m.ttl.to_string();
                self.conns[target].send(&[
                    b"RESTORE",
                    &m.key,
                    ttl.as_bytes(),
                    &m.payload,
                    b"REPLACE",
                ])?;
            }
            for m in group {
                match self.conns[target].read()? {
                    Resp::Status(_) => {
                        self.summary.per_node[target].moved_in += 1;
                        restored.push(m.key.clone());
                    }
                    other => {
                        let msg = format!(
                            "{}: RESTORE on {}: {}",
                            show(&m.key),
                            self.plan.nodes[target].id,
                            describe(other)
                        );
                        self.fail(src, msg);
                    }
                }
            }
        }
        Ok(restored)
    }

    /// DEL of the restored keys on the source, pipelined.
    fn delete(&mut self, src: usize, restored: Vec<Vec<u8>>) -> Result<(), String> {
        for key in &restored {
            self.conns[src].send(&[b"DEL", key])?;
        }
        for key in restored {
            match self.conns[src].read()? {
                // 0 means a client deleted it meanwhile: it is still moved.
                Resp::Int(_) => {
                    self.summary.moved += 1;
                    self.summary.per_node[src].moved_out += 1;
                }
                other => {
                    // Now on both nodes; a re-run resolves it (RESTORE REPLACE + DEL again).
                    let msg = format!(
                        "{}: DEL on {} after copying: {}",
                        show(&key),
                        self.plan.nodes[src].id,
                        describe(other)
                    );
                    self.fail(src, msg);
                }
            }
        }
        Ok(())
    }
}

/// `[cursor, [key, …]]`.
fn scan_reply(reply: Resp) -> Result<(Vec<u8>, Vec<Vec<u8>>), String> {
    let Resp::Array(mut parts) = reply.ok()? else {
        return Err("unexpected reply".into());
    };
    if parts.len() != 2 {
        return Err("unexpected reply".into());
    }
    let (keys, cursor) = (parts.pop(), parts.pop());
    match (cursor, keys) {
        (Some(Resp::Bulk(c)), Some(Resp::Array(keys))) => {
            let keys = keys
                .into_iter()
                .map(|k| match k {
                    Resp::Bulk(k) => Ok(k),
                    _ => Err("unexpected key in reply".to_string()),
                })
                .collect::<Result<_, _>>()?;
            Ok((c, keys))
        }
        _ => Err("unexpected reply".into()),
    }
}

/// A key for messages: lossy UTF-8, shortened.
fn show(key: &[u8]) -> String {
    let s = String::from_utf8_lossy(key);
    if s.chars().count() > 80 {
        format!("key '{}…'", s.chars().take(80).collect::<String>())
    } else {
        format!("key '{s}'")
    }
}

fn describe(r: Resp) -> String {
    match r {
        Resp::Error(e) => e,
        other => format!("unexpected reply {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_lists() {
        let n = parse_node_list("node-a=redis://h:1, node-b=redis://u:pw@h:2/3,").unwrap();
        assert_eq!(n.len(), 2);
        assert_eq!((n[0].id.as_str(), n[0].port), ("node-a", 1));
        assert_eq!((n[1].id.as_str(), n[1].db), ("node-b", 3));
        assert_eq!(n[1].password.as_deref(), Some("pw"));
        // A node with a replica: the bare URL belongs to the node before it.
        let n = parse_node_list("a=redis://h:1,redis://h:9,b=redis://h:2").unwrap();
        assert_eq!(
            (n.len(), n[0].alternates.len(), n[0].alternates[0].port),
            (2, 1, 9)
        );
        assert_eq!(n[0].alternates[0].id, "a");
        for bad in [
            "",
            "redis://h:1,b=redis://h:2",
            " , ",
            "node-a",
            "a=redis://:pw@h:1,a=redis://:pw@h:2",
            "a=redis://:pw@h:x",
            "a=redis://:pw@h:1,b c=redis://h:2",
        ] {
            let e = parse_node_list(bad).unwrap_err();
            assert!(!e.contains("pw"), "{bad}: {e}");
        }
    }

    #[test]
    fn plans_refuse_bad_fleets() {
        let l = |s| parse_node_list(s).unwrap();
        let (ab, a) = (l("a=redis://h:1,b=redis://h:2"), l("a=redis://h:1"));
        assert!(Plan::new(&[], &a).is_err());
        assert!(Plan::new(&a, &[]).is_err());
        // Same server and db under two ids: moving between them would delete the only copy.
        let e = Plan::new(&ab, &l("a=redis://h:1,c=redis://:pw@h:2"))
            .err()
            .unwrap();
        assert!(e.contains("same database") && !e.contains("pw"), "{e}");
        assert!(Plan::new(&ab, &l("a=redis://h:1,c=redis://h:2/1")).is_ok());
        // A kept node takes its new URL; old-only nodes come after the new fleet, and are
        // scanned after the kept ones.
        let p = Plan::new(&l("x=redis://h:9,a=redis://h:1"), &l("a=redis://g:1")).unwrap();
        let ids: Vec<_> = p
            .nodes
            .iter()
            .map(|n| (n.id.as_str(), n.host.as_str()))
            .collect();
        assert_eq!(ids, [("a", "g"), ("x", "h")]);
        assert_eq!(p.sources, [(1, 0), (0, 1)]);
    }

    #[test]
    fn scan_replies() {
        let ok = Resp::Array(vec![
            Resp::Bulk(b"17".to_vec()),
            Resp::Array(vec![Resp::Bulk(b"k".to_vec())]),
        ]);
        assert_eq!(
            scan_reply(ok).unwrap(),
            (b"17".to_vec(), vec![b"k".to_vec()])
        );
        assert!(scan_reply(Resp::Error("NOAUTH".into())).is_err());
        assert!(scan_reply(Resp::Array(vec![Resp::Int(0)])).is_err());
        assert!(scan_reply(Resp::Nil).is_err());
    }

    #[test]
    fn zero_batch_is_refused() {
        let l = |s| parse_node_list(s).unwrap();
        let opts = RebalanceOptions {
            from: l("a=redis://h:1"),
            to: l("a=redis://h:1"),
            batch: 0,
            dry_run: true,
            progress: None,
        };
        assert!(rebalance(opts).is_err());
    }
}
