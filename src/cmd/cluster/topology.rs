//! The one-node cluster that an emulated-cluster server and the proxy present to cluster
//! clients: one master owning all 16 384 slots, no replicas. Pure: the replies of CLUSTER
//! SLOTS, SHARDS, NODES, INFO and KEYSLOT built as Redis 7.2's cluster.c builds them, from
//! a [`Node`] that the caller fills in from its configuration and connection.

use crate::protocol::Reply;
use bytes::Bytes;

/// Redis Cluster's slot count.
pub const SLOTS: u16 = 16384;

/// Redis's `CLUSTER_PORT_INCR`: the bus port's default offset from the client port.
const BUS_PORT_INCR: u32 = 10000;

/// The node's config epoch (and the cluster's current epoch): a node that took its slots
/// with ADDSLOTS and bumped its epoch once, as `redis-cli --cluster create` leaves it.
pub const EPOCH: u64 = 1;

/// `cluster-preferred-endpoint-type`: what CLUSTER SLOTS names a node by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Ip,
    Hostname,
    Unknown,
}

impl Endpoint {
    /// The parameter's value (`ip`, `hostname`, `unknown-endpoint`); anything else is `ip`.
    pub fn parse(s: &str) -> Endpoint {
        match s {
            "hostname" => Endpoint::Hostname,
            "unknown-endpoint" => Endpoint::Unknown,
            _ => Endpoint::Ip,
        }
    }
}

/// What the replies say about the one node.
#[derive(Clone, Debug)]
pub struct Node {
    /// 40 lowercase hex characters.
    pub id: String,
    pub shard_id: String,
    /// The address clients should connect to (may be empty: clients then keep the address
    /// they used, as they do with a Redis node that has not learned its own).
    pub ip: String,
    pub port: u16,
    pub bus_port: u16,
    /// `cluster-announce-hostname` (empty: none).
    pub hostname: String,
    pub endpoint: Endpoint,
    /// `master_repl_offset`, shown by CLUSTER SHARDS.
    pub repl_offset: i64,
}

/// A stable 40-hex node name: the same inputs (a server's address, a proxy's fleet) give
/// the same id across restarts, as a Redis node keeps its name in nodes.conf.
pub fn node_id(seed: &str) -> String {
    crate::script::sha1::sha1_hex(seed.as_bytes())
}

/// The bus port Redis would use for `port` with no `cluster-port` (0 when past 65535).
pub fn default_bus_port(port: u16) -> u16 {
    u16::try_from(u32::from(port) + BUS_PORT_INCR).unwrap_or(0)
}

/// CRC16-CCITT (XModem), the checksum Redis Cluster hashes keys with (crc16.c).
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// Redis's `keyHashSlot`: CRC16 of the hash tag (the same `{…}` rule as placement, §8).
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(crate::types::placement::hash_tag(key)) & (SLOTS - 1)
}

fn bulk(s: &str) -> Reply {
    Reply::bulk_str(s)
}

/// `getPreferredEndpoint`: the name CLUSTER SHARDS gives as `endpoint`.
fn preferred_endpoint(n: &Node) -> &str {
    match n.endpoint {
        Endpoint::Ip => &n.ip,
        Endpoint::Hostname if !n.hostname.is_empty() => &n.hostname,
        _ => "?",
    }
}

/// `addNodeToNodeReply`: [endpoint, port, id, {the other known addresses}].
fn node_reply(n: &Node) -> Reply {
    let first = match n.endpoint {
        Endpoint::Ip => bulk(&n.ip),
        Endpoint::Hostname if !n.hostname.is_empty() => bulk(&n.hostname),
        Endpoint::Hostname => bulk("?"),
        Endpoint::Unknown => Reply::Nil,
    };
    let mut meta = Vec::new();
    if n.endpoint != Endpoint::Ip {
        meta.push((bulk("ip"), bulk(&n.ip)));
    }
    if n.endpoint != Endpoint::Hostname && !n.hostname.is_empty() {
        meta.push((bulk("hostname"), bulk(&n.hostname)));
    }
    Reply::Array(vec![
        first,
        Reply::Int(i64::from(n.port)),
        bulk(&n.id),
        Reply::Map(meta),
    ])
}

/// CLUSTER SLOTS: one range, 0-16383, served by the node.
pub fn slots(n: &Node) -> Reply {
    Reply::Array(vec![Reply::Array(vec![
        Reply::Int(0),
        Reply::Int(i64::from(SLOTS - 1)),
        node_reply(n),
    ])])
}

/// CLUSTER SHARDS: one shard with the one range and the node's details
/// (`addNodeDetailsToShardReply`, fields in Redis's order).
pub fn shards(n: &Node) -> Reply {
    let mut details = vec![
        (bulk("id"), bulk(&n.id)),
        (bulk("port"), Reply::Int(i64::from(n.port))),
        (bulk("ip"), bulk(&n.ip)),
        (bulk("endpoint"), bulk(preferred_endpoint(n))),
    ];
    if !n.hostname.is_empty() {
        details.push((bulk("hostname"), bulk(&n.hostname)));
    }
    details.extend([
        (bulk("role"), bulk("master")),
        (bulk("replication-offset"), Reply::Int(n.repl_offset)),
        (bulk("health"), bulk("online")),
    ]);
    Reply::Array(vec![Reply::Map(vec![
        (
            bulk("slots"),
            Reply::Array(vec![Reply::Int(0), Reply::Int(i64::from(SLOTS - 1))]),
        ),
        (bulk("nodes"), Reply::Array(vec![Reply::Map(details)])),
    ])])
}

/// CLUSTER NODES (`clusterGenNodeDescription`): one line, newline-terminated.
pub fn nodes(n: &Node) -> Reply {
    let host = if n.hostname.is_empty() {
        String::new()
    } else {
        format!(",{}", n.hostname)
    };
    let line = format!(
        "{} {}:{}@{}{host} myself,master - 0 0 {EPOCH} connected 0-{}\n",
        n.id,
        n.ip,
        n.port,
        n.bus_port,
        SLOTS - 1
    );
    Reply::Verbatim(Bytes::from(line))
}

/// CLUSTER INFO (`genClusterInfoString`) of a healthy one-node cluster with no bus traffic.
pub fn info() -> Reply {
    let text = format!(
        "cluster_state:ok\r\n\
         cluster_slots_assigned:{SLOTS}\r\n\
         cluster_slots_ok:{SLOTS}\r\n\
         cluster_slots_pfail:0\r\n\
         cluster_slots_fail:0\r\n\
         cluster_known_nodes:1\r\n\
         cluster_size:1\r\n\
         cluster_current_epoch:{EPOCH}\r\n\
         cluster_my_epoch:{EPOCH}\r\n\
         cluster_stats_messages_sent:0\r\n\
         cluster_stats_messages_received:0\r\n\
         total_cluster_links_buffer_limit_exceeded:0\r\n"
    );
    Reply::Verbatim(Bytes::from(text))
}

/// CLUSTER HELP's lines (Redis 7.2's text).
pub const HELP: &[&str] = &[
    "ADDSLOTS <slot> [<slot> ...]",
    "    Assign slots to current node.",
    "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Assign slots which are between <start-slot> and <end-slot> to current node.",
    "BUMPEPOCH",
    "    Advance the cluster config epoch.",
    "COUNT-FAILURE-REPORTS <node-id>",
    "    Return number of failure reports for <node-id>.",
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "DELSLOTS <slot> [<slot> ...]",
    "    Delete slots information from current node.",
    "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
    "FAILOVER [FORCE|TAKEOVER]",
    "    Promote current replica node to being a master.",
    "FORGET <node-id>",
    "    Remove a node from the cluster.",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "FLUSHSLOTS",
    "    Delete current node own slots information.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "MEET <ip> <port> [<bus-port>]",
    "    Connect nodes into a working cluster.",
    "MYID",
    "    Return the node id.",
    "MYSHARDID",
    "    Return the node's shard id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port@bus-port[,hostname]> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
    "REPLICATE <node-id>",
    "    Configure current node as replica to <node-id>.",
    "RESET [HARD|SOFT]",
    "    Reset current node (default: soft).",
    "SET-CONFIG-EPOCH <epoch>",
    "    Set config epoch of current node.",
    "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
    "    Set slot state.",
    "REPLICAS <node-id>",
    "    Return <node-id> replicas.",
    "SAVECONFIG",
    "    Force saving cluster configuration on disk.",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "LINKS",
    "    Return information about all network links between this node and its peers.",
    "    Output format is an array where each array element is a map containing attributes of a link",
];

/// A slot argument (`getLongLongFromObjectOrReply`, then the range check with `msg`).
pub fn parse_slot(arg: &[u8], msg: &'static str) -> Result<u16, Reply> {
    let n = crate::num::parse_i64(arg)
        .ok_or_else(|| Reply::error("ERR value is not an integer or out of range"))?;
    u16::try_from(n)
        .ok()
        .filter(|&s| s < SLOTS)
        .ok_or_else(|| Reply::error(msg))
}

pub const COUNTKEYS_INVALID: &str = "ERR Invalid slot";
pub const GETKEYS_INVALID: &str = "ERR Invalid slot or number of keys";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_matches_redis() {
        // crc16.c's check value, and slots the Redis Cluster spec and redis-cli print.
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") & 16383);
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b""), 0);
    }

    #[test]
    fn slot_arguments() {
        assert_eq!(parse_slot(b"16383", COUNTKEYS_INVALID), Ok(16383));
        assert_eq!(
            parse_slot(b"16384", COUNTKEYS_INVALID),
            Err(Reply::error(COUNTKEYS_INVALID))
        );
        assert_eq!(
            parse_slot(b"-1", COUNTKEYS_INVALID),
            Err(Reply::error(COUNTKEYS_INVALID))
        );
        assert!(parse_slot(b"x", COUNTKEYS_INVALID).is_err());
    }

    #[test]
    fn nodes_line_and_bus_port() {
        let n = Node {
            id: node_id("x"),
            shard_id: node_id("y"),
            ip: "127.0.0.1".into(),
            port: 7000,
            bus_port: default_bus_port(7000),
            hostname: String::new(),
            endpoint: Endpoint::Ip,
            repl_offset: 0,
        };
        let Reply::Verbatim(line) = nodes(&n) else {
            panic!("verbatim")
        };
        assert_eq!(
            std::str::from_utf8(&line).unwrap(),
            format!(
                "{} 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-16383\n",
                n.id
            )
        );
        assert_eq!(n.id.len(), 40);
        assert_eq!(default_bus_port(60000), 0);
    }
}
