//! Node health and failover for a node listed with several addresses (a primary and its
//! replicas, `ID=redis://p,redis://r`): one monitor task per such node finds which address
//! is the primary and publishes it ([`NodeInfo::primary`]); every connection of the node
//! connects there and reconnects when it moves ([`super::link::Follow`]). Keys never move:
//! the node keeps its id, so placement is unchanged.
//!
//! The monitor keeps one connection per address and sends `INFO replication` to each,
//! every second while there is a primary, at once when a connection reports trouble (lost,
//! a `-READONLY`, `-LOADING` or `-MASTERDOWN` reply, an address found to be a replica), and
//! with backoff (100 ms doubling to 2 s) while there is none. Meanwhile requests for the
//! node's keys fail at once with `ERR node ID is unavailable: no primary …`.
//!
//! Choosing ([`choose`]): the one address that says `role:master`. When several do (split
//! brain: a replica promoted without demoting the old primary), the proxy prefers
//!   1. an address promoted from another's history (its `master_replid2` is the other's
//!      `master_replid`): the promotion is the operator's latest decision;
//!   2. then the higher `master_repl_offset` (an old primary restarted empty has ~0);
//!   3. then the address listed first.
//!
//! A primary whose probe only timed out stays the primary unless another address is one:
//! a loaded node is not a dead one, and its connections' own timeouts tell.

use super::config::NodeSpec;
use super::link::{connect_to, send, NodeInfo, NodeStream, Primary};
use super::resp;
use bytes::BytesMut;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::task::JoinSet;
use tokio::time::{sleep_until, Instant};

const CHECK_EVERY: Duration = Duration::from_secs(1);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// What one address said about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    Master {
        replid: String,
        replid2: String,
        offset: u64,
    },
    /// `role:slave` (or anything else that is not a master).
    Replica,
    /// Unreachable or refusing: why.
    Failed(String),
    /// Connected (or connecting) but no answer within the connect timeout: a loaded or
    /// paused server, not necessarily a dead one.
    Slow(String),
}

/// Starts the monitor of a node with replicas (on the current tokio runtime). It ends once
/// the node is gone.
pub(super) fn start(info: &Arc<NodeInfo>) {
    if info.has_replicas() {
        tokio::spawn(monitor(Arc::downgrade(info)));
    }
}

type Conn = Option<(NodeStream, BytesMut)>;

async fn monitor(node: Weak<NodeInfo>) {
    let Some(info) = node.upgrade() else { return };
    let addrs: Vec<NodeSpec> = info.spec.addresses().cloned().collect();
    drop(info);
    let mut conns: Vec<Conn> = addrs.iter().map(|_| None).collect();
    let mut last: Option<usize> = None;
    let mut backoff = BACKOFF_MIN;
    loop {
        let Some(info) = node.upgrade() else { return };
        let started = Instant::now();
        let seen = probe_all(&info, &addrs, &mut conns).await;
        let wait = match choose(&seen, last_published(&info)) {
            Ok(i) => {
                publish(&info, Primary::At(i), &mut last, &addrs);
                backoff = BACKOFF_MIN;
                CHECK_EVERY
            }
            Err(why) => {
                *info.no_primary.lock() = why;
                publish(&info, Primary::None, &mut last, &addrs);
                let w = backoff;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                w
            }
        };
        tokio::select! {
            _ = sleep_until(started + wait) => {}
            _ = info.suspect.notified() => {
                // Not more often than the shortest backoff, however many replies complain.
                sleep_until(started + BACKOFF_MIN).await;
            }
        }
    }
}

/// Publishes the primary if it changed; counts a failover when it moved to another
/// address than the last one, and retires idle dedicated connections made before.
fn publish(info: &NodeInfo, p: Primary, last: &mut Option<usize>, addrs: &[NodeSpec]) {
    let changed = info.primary.send_if_modified(|cur| {
        if *cur == p {
            return false;
        }
        *cur = p;
        true
    });
    if !changed {
        return;
    }
    info.generation.fetch_add(1, Ordering::Relaxed);
    let id = &info.spec.id;
    match p {
        Primary::At(i) => {
            if last.is_some_and(|l| l != i) {
                info.failovers.fetch_add(1, Ordering::Relaxed);
            }
            *last = Some(i);
            tracing::warn!("node {id}: primary is {}", addrs[i].addr());
        }
        _ => tracing::warn!("node {id}: {}", info.no_primary.lock()),
    }
}

/// Asks every address at once; a connection that fails is dropped (and made again next
/// time).
async fn probe_all(info: &Arc<NodeInfo>, addrs: &[NodeSpec], conns: &mut [Conn]) -> Vec<Seen> {
    let mut tasks = JoinSet::new();
    for (i, spec) in addrs.iter().enumerate() {
        let (info, spec, conn) = (info.clone(), spec.clone(), conns[i].take());
        tasks.spawn(async move {
            let (conn, seen) = probe(&info, &spec, conn).await;
            (i, conn, seen)
        });
    }
    let mut seen = vec![Seen::Failed("not probed".into()); addrs.len()];
    while let Some(done) = tasks.join_next().await {
        if let Ok((i, conn, s)) = done {
            conns[i] = conn;
            seen[i] = s;
        }
    }
    seen
}

/// One address's answer, on its kept connection (made again once if that one broke).
async fn probe(info: &NodeInfo, spec: &NodeSpec, conn: Conn) -> (Conn, Seen) {
    let fresh = conn.is_none();
    let mut conn = match conn {
        Some(c) => c,
        None => match connect_to(info, spec, false, false).await {
            Ok(c) => c,
            Err(e) => return (None, failed(e)),
        },
    };
    match ask(info, &mut conn).await {
        Ok(seen) => (Some(conn), seen),
        Err(e) if fresh => (None, failed(e)),
        // A kept connection may have been closed by the node (a restart, its timeout).
        Err(_) => Box::pin(probe(info, spec, None)).await,
    }
}

/// A probe's failure: [`Seen::Slow`] for a timeout (the texts of `connect_to` and `ask`).
fn failed(e: String) -> Seen {
    if e.ends_with("timed out") {
        Seen::Slow(e)
    } else {
        Seen::Failed(e)
    }
}

/// The primary as published now, if there is one.
fn last_published(info: &NodeInfo) -> Option<usize> {
    match *info.primary.borrow() {
        Primary::At(i) => Some(i),
        _ => None,
    }
}

/// Sends `INFO replication` and reads what the address says it is.
async fn ask(info: &NodeInfo, (stream, buf): &mut (NodeStream, BytesMut)) -> Result<Seen, String> {
    let exchange = async {
        send(stream, b"*2\r\n$4\r\nINFO\r\n$11\r\nreplication\r\n")
            .await
            .map_err(|e| e.to_string())?;
        loop {
            if let Some(n) = resp::frame_len(buf).map_err(|e| format!("bad reply: {}", e.0))? {
                return Ok(buf.split_to(n).freeze());
            }
            match stream.read_buf(buf).await {
                Ok(0) => return Err("connection closed by the node".to_string()),
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    };
    let frame = tokio::time::timeout(info.connect_timeout, exchange)
        .await
        .map_err(|_| "INFO timed out".to_string())??;
    match resp::decode(&frame) {
        Ok(resp::Frame::Bulk(text)) => Ok(parse_info(&String::from_utf8_lossy(&text))),
        Ok(resp::Frame::Error(e)) => Ok(Seen::Failed(String::from_utf8_lossy(&e).into_owned())),
        _ => Err("unexpected INFO reply".into()),
    }
}

/// Reads the fields that matter from an `INFO replication` text.
pub fn parse_info(text: &str) -> Seen {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
            .unwrap_or("")
    };
    match field("role") {
        "master" | "primary" => Seen::Master {
            replid: field("master_replid").to_string(),
            replid2: field("master_replid2").to_string(),
            offset: field("master_repl_offset").parse().unwrap_or(0),
        },
        _ => Seen::Replica,
    }
}

/// The primary among the addresses (by the rules in the module comment), or why there is
/// none. The `current` primary stays one when it only answered slowly and no other
/// address is a primary: one slow probe must not take a working node down (its
/// connections' own timeouts tell when it is really gone).
pub fn choose(seen: &[Seen], current: Option<usize>) -> Result<usize, String> {
    let masters: Vec<(usize, &str, &str, u64)> = seen
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s {
            Seen::Master {
                replid,
                replid2,
                offset,
            } => Some((i, replid.as_str(), replid2.as_str(), *offset)),
            _ => None,
        })
        .collect();
    // Superseded: another master was promoted from this one's replication history.
    let superseded = |replid: &str| masters.iter().any(|m| !replid.is_empty() && m.2 == replid);
    let best = masters
        .iter()
        .filter(|m| !superseded(m.1))
        .max_by_key(|m| (m.3, std::cmp::Reverse(m.0)))
        .or_else(|| masters.iter().max_by_key(|m| (m.3, std::cmp::Reverse(m.0))));
    if let Some(m) = best {
        return Ok(m.0);
    }
    if let Some(i) = current.filter(|&i| matches!(seen.get(i), Some(Seen::Slow(_)))) {
        return Ok(i);
    }
    let what: Vec<String> = seen
        .iter()
        .enumerate()
        .map(|(i, s)| match s {
            Seen::Replica => format!("#{} is a replica", i + 1),
            Seen::Failed(e) | Seen::Slow(e) => format!("#{} {e}", i + 1),
            Seen::Master { .. } => format!("#{} is a primary", i + 1),
        })
        .collect();
    Err(format!(
        "no primary among its {} addresses ({})",
        seen.len(),
        what.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn master(replid: &str, replid2: &str, offset: u64) -> Seen {
        Seen::Master {
            replid: replid.into(),
            replid2: replid2.into(),
            offset,
        }
    }

    const NONE: &str = "0000000000000000000000000000000000000000";

    #[test]
    fn reads_info_replication() {
        let primary = "# Replication\r\nrole:master\r\nconnected_slaves:1\r\nmaster_failover_state:no-failover\r\nmaster_replid:abc\r\nmaster_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:1234\r\nsecond_repl_offset:-1\r\n";
        assert_eq!(parse_info(primary), master("abc", NONE, 1234));
        let replica =
            "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_replid:abc\r\n";
        assert_eq!(parse_info(replica), Seen::Replica);
        assert_eq!(parse_info(""), Seen::Replica);
    }

    #[test]
    fn picks_the_one_master() {
        let seen = [Seen::Replica, master("a", NONE, 10)];
        assert_eq!(choose(&seen, None), Ok(1));
        let seen = [
            Seen::Failed("connection refused".into()),
            master("b", "a", 10),
        ];
        assert_eq!(choose(&seen, None), Ok(1));
    }

    /// Split brain: the promoted address wins even with a lower offset; unrelated masters
    /// go by offset, then by list order.
    #[test]
    fn split_brain_prefers_the_promotion_then_the_offset_then_the_list() {
        let seen = [master("old", NONE, 500), master("new", "old", 100)];
        assert_eq!(choose(&seen, None), Ok(1));
        let seen = [master("x", NONE, 0), master("y", NONE, 900)];
        assert_eq!(choose(&seen, None), Ok(1));
        let seen = [master("x", NONE, 7), master("y", NONE, 7)];
        assert_eq!(choose(&seen, None), Ok(0));
        // Each promoted from the other's history (cannot happen, but must not panic).
        let seen = [master("x", "y", 1), master("y", "x", 2)];
        assert_eq!(choose(&seen, None), Ok(1));
    }

    /// A slow answer keeps the current primary, unless another address is one; a slow
    /// address that was not the primary does not become one.
    #[test]
    fn a_slow_primary_is_kept() {
        let slow = Seen::Slow("INFO timed out".into());
        let seen = [Seen::Replica, slow.clone()];
        assert_eq!(choose(&seen, Some(1)), Ok(1));
        assert!(choose(&seen, Some(0)).is_err());
        assert!(choose(&seen, None).is_err());
        let seen = [master("b", "a", 1), slow];
        assert_eq!(choose(&seen, Some(1)), Ok(0));
        let refused = [Seen::Replica, Seen::Failed("connection refused".into())];
        assert!(choose(&refused, Some(1)).is_err());
    }

    #[test]
    fn no_master_says_why_per_address() {
        let seen = [Seen::Failed("connection refused".into()), Seen::Replica];
        assert_eq!(
            choose(&seen, None),
            Err("no primary among its 2 addresses (#1 connection refused; #2 is a replica)".into())
        );
    }
}
