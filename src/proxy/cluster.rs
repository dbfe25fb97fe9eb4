//! CLUSTER through the proxy: cluster-mode clients (redis-py `RedisCluster`, ioredis
//! `Cluster`, go-redis `ClusterClient`) see one node that owns all 16 384 slots at the
//! proxy's address (or `announce-ip` / `announce-port`), so they send everything here and
//! the proxy routes by its own placement (§8). The replies are the emulated-cluster
//! server's ([`crate::cmd::cluster::topology`]). COUNTKEYSINSLOT and GETKEYSINSLOT fan out
//! a script to every node (the nodes are standalone primaries, with no slot index) and
//! sum or concatenate. ASKING, READONLY and READWRITE are accepted: there are no
//! migrations or replicas to follow.

use super::resp;
use super::session::{Fan, Pending, Session};
use crate::cmd::cluster::topology::{self, Endpoint, Node};
use crate::protocol::{write_reply, Reply};
use bytes::{Bytes, BytesMut};
use std::net::IpAddr;
use std::sync::atomic::Ordering;

/// The script each node runs for the two slot-scanning subcommands.
const KEYS_IN_SLOT: &str = include_str!("keys_in_slot.lua");

fn ready(c: &Session, r: &Reply) -> Pending {
    let mut out = BytesMut::new();
    write_reply(&mut out, r, c.resp3);
    Pending::Ready(out.freeze())
}

/// The proxy as a cluster node. Its id names the fleet and the port, so it is stable across
/// restarts and the same for every proxy in front of one fleet on one port.
pub fn me(c: &Session) -> Node {
    let p = c.proxy();
    let port = p
        .cfg
        .announce_port
        .filter(|&port| port != 0)
        .unwrap_or_else(|| p.port.load(Ordering::Relaxed));
    // A wildcard bind names no address a client could use: report none, and cluster
    // clients keep the address they connected to (as with a Redis node that has not
    // learned its own).
    let ip = p.cfg.announce_ip.clone().unwrap_or_else(|| {
        p.cfg
            .bind
            .first()
            .filter(|b| !b.parse::<IpAddr>().is_ok_and(|a| a.is_unspecified()) && *b != "*")
            .cloned()
            .unwrap_or_default()
    });
    let mut ids: Vec<&str> = p.cfg.nodes.iter().map(|n| n.id.as_str()).collect();
    ids.sort_unstable();
    let seed = format!("respite proxy {} {port}", ids.join(","));
    Node {
        id: topology::node_id(&format!("{seed} node")),
        shard_id: topology::node_id(&format!("{seed} shard")),
        ip,
        port,
        bus_port: topology::default_bus_port(port),
        hostname: String::new(),
        endpoint: Endpoint::Ip,
        repl_offset: 0,
    }
}

/// `name` is the resolved lowercase name (`cluster|slots`, `readonly`…); arity is checked.
pub fn command(c: &mut Session, name: &str, args: &[Bytes]) -> Pending {
    let sub = name.strip_prefix("cluster|").unwrap_or(name);
    let known = |c: &Session, id: &[u8]| -> Result<(), Pending> {
        if id == me(c).id.as_bytes() {
            Ok(())
        } else {
            Err(Pending::Ready(resp::error(&format!(
                "ERR Unknown node {}",
                String::from_utf8_lossy(id)
            ))))
        }
    };
    match sub {
        "asking" | "readonly" | "readwrite" | "saveconfig" => {
            Pending::Ready(Bytes::from_static(b"+OK\r\n"))
        }
        "slots" => ready(c, &topology::slots(&me(c))),
        "shards" => ready(c, &topology::shards(&me(c))),
        "nodes" => ready(c, &topology::nodes(&me(c))),
        "info" => ready(c, &topology::info()),
        "myid" => Pending::Ready(resp::bulk(me(c).id.as_bytes())),
        "myshardid" => Pending::Ready(resp::bulk(me(c).shard_id.as_bytes())),
        "help" => ready(c, &crate::cmd::args::help("CLUSTER", topology::HELP)),
        "links" => Pending::Ready(Bytes::from_static(b"*0\r\n")),
        "keyslot" => Pending::Ready(resp::int(i64::from(topology::key_slot(&args[2])))),
        "replicas" | "slaves" => match known(c, &args[2]) {
            Ok(()) => Pending::Ready(Bytes::from_static(b"*0\r\n")),
            Err(e) => e,
        },
        "count-failure-reports" => match known(c, &args[2]) {
            Ok(()) => Pending::Ready(resp::int(0)),
            Err(e) => e,
        },
        "countkeysinslot" => {
            match topology::parse_slot(&args[2], topology::COUNTKEYS_INVALID) {
                Ok(slot) => fan_script(c, Fan::Sum, slot, -1),
                Err(e) => ready(c, &e),
            }
        }
        "getkeysinslot" => {
            // Both integers are parsed before either range is checked, as Redis does.
            let int = |a: &[u8]| crate::num::parse_i64(a);
            let (Some(slot), Some(count)) = (int(&args[2]), int(&args[3])) else {
                return Pending::Ready(resp::error(crate::cmd::errors::NOT_INT));
            };
            match (u16::try_from(slot), usize::try_from(count)) {
                (Ok(slot), Ok(n)) if slot < topology::SLOTS => {
                    fan_script(c, Fan::ConcatUpTo(n), slot, count)
                }
                _ => Pending::Ready(resp::error(topology::GETKEYS_INVALID)),
            }
        }
        _ => Pending::Ready(resp::error(&format!(
            "ERR 'CLUSTER {}' is not supported by the proxy (it presents one node owning every slot)",
            sub.to_ascii_uppercase()
        ))),
    }
}

/// Runs the slot scan on every node: `max` < 0 counts, else collects up to `max` keys each.
fn fan_script(c: &Session, kind: Fan, slot: u16, max: i64) -> Pending {
    let (slot, max) = (slot.to_string(), max.to_string());
    c.fan(
        kind,
        &[
            b"EVAL".as_slice(),
            KEYS_IN_SLOT.as_bytes(),
            b"0",
            slot.as_bytes(),
            max.as_bytes(),
        ],
    )
}
