//! CLUSTER, ASKING, READONLY and READWRITE.
//!
//! A standalone server answers as Redis 7.2 with `cluster-enabled no`: every subcommand
//! (after its arity check) replies "This instance has cluster support disabled". The
//! subcommands carry their Redis flags, so the rules that read the table apply as in Redis
//! (CLUSTER RESET is `noscript`: a script gets "not allowed").
//!
//! Started with `--cluster-mode emulated` (Dragonfly's name), the server presents itself as
//! a one-node Redis Cluster that owns every slot ([`topology`]), so cluster-mode clients
//! work against one process: the topology commands answer, KEYSLOT / COUNTKEYSINSLOT /
//! GETKEYSINSLOT use Redis's CRC16 slots, and dispatch refuses cross-slot requests
//! ([`cross_slot`]) as a real cluster does. Topology changes (ADDSLOTS, MEET, SETSLOT…)
//! are refused: the one node's ownership is fixed.

pub mod topology;

use super::{CommandSpec, Cx, KeySpec};
use crate::protocol::Reply;
use bytes::Bytes;
use topology::Node;

/// What every CLUSTER subcommand answers when cluster support is off (cluster.c).
pub const DISABLED: &str = "ERR This instance has cluster support disabled";

pub use crate::instance::state::CLUSTER_MODE_PARAM;

/// Redis Cluster's refusal of a request whose keys span slots.
pub const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";

fn disabled(_cx: &mut Cx) -> Reply {
    Reply::error(DISABLED)
}

/// Runs `f` in emulated cluster mode; answers as Redis with cluster support off otherwise.
fn emulated(cx: &mut Cx, f: impl FnOnce(&mut Cx) -> Reply) -> Reply {
    if cx.srv.cluster_emulated {
        f(cx)
    } else {
        Reply::error(DISABLED)
    }
}

/// The node as this client sees it: `cluster-announce-*` when set, else the address the
/// client reached us at (so a client given 127.0.0.1 is sent back to 127.0.0.1, and a TLS
/// client gets the TLS port, as Redis reports TLS ports to TLS clients).
pub fn me(cx: &Cx) -> Node {
    let cfg = &cx.srv.config;
    let laddr = cx.sess.handle.laddr;
    let ip = cfg
        .get("cluster-announce-ip")
        .filter(|s| !s.is_empty())
        // An IPv4 client of a `::` listener arrives on a mapped address: give it the IPv4.
        .unwrap_or_else(|| laddr.ip().to_canonical().to_string());
    let announced = |name: &str| u16::try_from(cfg.get_i64(name)).ok().filter(|&p| p != 0);
    let port = announced("cluster-announce-port").unwrap_or(laddr.port());
    let bus_port = announced("cluster-announce-bus-port")
        .or_else(|| announced("cluster-port"))
        .unwrap_or_else(|| topology::default_bus_port(port));
    // Named after the server's own address, not the client's view of it: every client
    // (plain or TLS, any interface) sees one id, the same after a restart on that port.
    let seed = format!(
        "respite {} {}",
        cx.srv.startup.bind.first().map_or("", String::as_str),
        cx.srv.port.load(std::sync::atomic::Ordering::Relaxed)
    );
    Node {
        id: topology::node_id(&format!("{seed} node")),
        shard_id: topology::node_id(&format!("{seed} shard")),
        ip,
        port,
        bus_port,
        hostname: cfg.get("cluster-announce-hostname").unwrap_or_default(),
        endpoint: topology::Endpoint::parse(
            &cfg.get("cluster-preferred-endpoint-type")
                .unwrap_or_default(),
        ),
        repl_offset: 0,
    }
}

fn slots(cx: &mut Cx) -> Reply {
    emulated(cx, |cx| topology::slots(&me(cx)))
}

fn shards(cx: &mut Cx) -> Reply {
    emulated(cx, |cx| topology::shards(&me(cx)))
}

fn nodes(cx: &mut Cx) -> Reply {
    emulated(cx, |cx| topology::nodes(&me(cx)))
}

fn info(cx: &mut Cx) -> Reply {
    emulated(cx, |_| topology::info())
}

fn myid(cx: &mut Cx) -> Reply {
    emulated(cx, |cx| Reply::bulk_str(&me(cx).id))
}

fn myshardid(cx: &mut Cx) -> Reply {
    emulated(cx, |cx| Reply::bulk_str(&me(cx).shard_id))
}

fn help(cx: &mut Cx) -> Reply {
    emulated(cx, |_| super::args::help("CLUSTER", topology::HELP))
}

fn keyslot(cx: &mut Cx) -> Reply {
    emulated(cx, |cx| {
        Reply::Int(i64::from(topology::key_slot(&cx.args[2])))
    })
}

fn links(cx: &mut Cx) -> Reply {
    // No peers, so no bus links.
    emulated(cx, |_| Reply::Array(Vec::new()))
}

fn saveconfig(cx: &mut Cx) -> Reply {
    // Nothing to save: the topology is fixed.
    emulated(cx, |_| Reply::OK)
}

/// ASKING, READONLY, READWRITE: the connection flags only matter for slots in migration
/// and for replicas, which a one-master cluster has none of.
fn flag_ok(cx: &mut Cx) -> Reply {
    emulated(cx, |_| Reply::OK)
}

/// `clusterLookupNode` against the one node: Redis's "Unknown node" for any other name.
fn known(cx: &Cx, id: &[u8]) -> Result<(), Reply> {
    if id == me(cx).id.as_bytes() {
        Ok(())
    } else {
        Err(Reply::error(format!(
            "ERR Unknown node {}",
            String::from_utf8_lossy(id)
        )))
    }
}

fn replicas(cx: &mut Cx) -> Reply {
    emulated(cx, |cx| match known(cx, &cx.args[2]) {
        Ok(()) => Reply::Array(Vec::new()),
        Err(e) => e,
    })
}

fn failure_reports(cx: &mut Cx) -> Reply {
    emulated(cx, |cx| match known(cx, &cx.args[2]) {
        Ok(()) => Reply::Int(0),
        Err(e) => e,
    })
}

fn forget(cx: &mut Cx) -> Reply {
    emulated(cx, |cx| match known(cx, &cx.args[2]) {
        Ok(()) => Reply::error("ERR I tried hard but I can't forget myself..."),
        Err(e) => e,
    })
}

fn replicate(cx: &mut Cx) -> Reply {
    emulated(cx, |cx| match known(cx, &cx.args[2]) {
        Ok(()) => Reply::error("ERR Can't replicate myself"),
        Err(e) => e,
    })
}

fn failover(cx: &mut Cx) -> Reply {
    emulated(cx, |cx| match cx.args.get(2) {
        Some(a) if !a.eq_ignore_ascii_case(b"force") && !a.eq_ignore_ascii_case(b"takeover") => {
            Reply::error("ERR syntax error")
        }
        _ if cx.args.len() > 3 => Reply::error("ERR syntax error"),
        _ => Reply::error("ERR You should send CLUSTER FAILOVER to a replica"),
    })
}

/// The subcommands that change the topology: the emulated node's is fixed.
fn fixed(cx: &mut Cx) -> Reply {
    emulated(cx, |cx| {
        Reply::error(format!(
            "ERR CLUSTER {} is not supported in emulated cluster mode (one node serves every slot)",
            String::from_utf8_lossy(&cx.args[1]).to_ascii_uppercase()
        ))
    })
}

fn countkeysinslot(cx: &mut Cx) -> Reply {
    emulated(cx, |cx| {
        match topology::parse_slot(&cx.args[2], topology::COUNTKEYS_INVALID) {
            Ok(slot) => Reply::Int(keys_in_slot(cx, slot, usize::MAX, None) as i64),
            Err(e) => e,
        }
    })
}

fn getkeysinslot(cx: &mut Cx) -> Reply {
    emulated(cx, |cx| {
        // Both integers are parsed before either range is checked, as Redis does.
        let int = |a: &[u8]| {
            crate::num::parse_i64(a).ok_or_else(|| super::errors::err(super::errors::NOT_INT))
        };
        let (slot, count) = match (int(&cx.args[2]), int(&cx.args[3])) {
            (Ok(s), Ok(c)) => (s, c),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        let (Ok(slot), Ok(count)) = (u16::try_from(slot), usize::try_from(count)) else {
            return Reply::error(topology::GETKEYS_INVALID);
        };
        if slot >= topology::SLOTS {
            return Reply::error(topology::GETKEYS_INVALID);
        }
        let mut keys = Vec::new();
        keys_in_slot(cx, slot, count, Some(&mut keys));
        Reply::strings(keys)
    })
}

/// Counts (and, with `out`, collects) up to `max` live keys of db 0 in `slot`. Redis keeps
/// a per-slot key index for this; here it is one pass over the keyspace, a shard at a time
/// (no other shard held, as SCAN), at ~one CRC16 per key: the commands are for resharding
/// tools and tests, not hot paths.
fn keys_in_slot(cx: &mut Cx, slot: u16, max: usize, mut out: Option<&mut Vec<Bytes>>) -> usize {
    let now = cx.now();
    let mut n = 0;
    for s in 0..crate::engine::SHARDS {
        if n >= max {
            break;
        }
        cx.ks.visit_shard(0, s, |sh| {
            for (k, e) in sh.keys() {
                if n >= max {
                    break;
                }
                if !e.is_expired(now) && topology::key_slot(k) == slot {
                    n += 1;
                    if let Some(out) = out.as_deref_mut() {
                        out.push(Bytes::copy_from_slice(k));
                    }
                }
            }
        });
    }
    n
}

/// Redis Cluster's rule for one request (`getNodeByQuery`): every key it names hashes to
/// one slot; for EXEC, every key of every queued command. True when the keys span slots.
pub fn cross_slot(spec: &CommandSpec, args: &[Bytes], queued: Option<&[Vec<Bytes>]>) -> bool {
    let mut slot = None;
    let mut same = |spec: &CommandSpec, args: &[Bytes]| {
        if matches!(spec.keys, KeySpec::None) {
            return true;
        }
        spec.key_indices(args).into_iter().all(|i| {
            let s = topology::key_slot(&args[i]);
            *slot.get_or_insert(s) == s
        })
    };
    match queued {
        Some(lines) if spec.name == "exec" => {
            !lines
                .iter()
                .all(|line| match super::registry().resolve(line) {
                    Ok((_, s)) => same(s, line),
                    Err(_) => true,
                })
        }
        _ => !same(spec, args),
    }
}

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "cluster",
        arity: -2,
        flags: &[],
        keys: KeySpec::None,
        acl: &["slow"],
        group: "cluster",
        since: "3.0.0",
        summary: "A container for Redis Cluster commands.",
        complexity: "Depends on subcommand.",
        handler: disabled,
        subcommands: &[
        CommandSpec {
            name: "cluster|addslots",
            arity: -3,
            flags: &["no_async_loading", "admin", "stale"],
            keys: KeySpec::None,
            acl: &["admin", "dangerous", "slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Assigns new hash slots to a node.",
            complexity: "O(N) where N is the total number of hash slot arguments",
            handler: fixed,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|addslotsrange",
            arity: -4,
            flags: &["no_async_loading", "admin", "stale"],
            keys: KeySpec::None,
            acl: &["admin", "dangerous", "slow"],
            group: "cluster",
            since: "7.0.0",
            summary: "Assigns new hash slot ranges to a node.",
            complexity: "O(N) where N is the total number of the slots between the start slot and end slot arguments.",
            handler: fixed,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|bumpepoch",
            arity: 2,
            flags: &["no_async_loading", "admin", "stale"],
            keys: KeySpec::None,
            acl: &["admin", "dangerous", "slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Advances the cluster config epoch.",
            complexity: "O(1)",
            handler: fixed,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|count-failure-reports",
            arity: 3,
            flags: &["admin", "stale"],
            keys: KeySpec::None,
            acl: &["admin", "dangerous", "slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Returns the number of active failure reports active for a node.",
            complexity: "O(N) where N is the number of failure reports",
            handler: failure_reports,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|countkeysinslot",
            arity: 3,
            flags: &["stale"],
            keys: KeySpec::None,
            acl: &["slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Returns the number of keys in a hash slot.",
            complexity: "O(1)",
            handler: countkeysinslot,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|delslots",
            arity: -3,
            flags: &["no_async_loading", "admin", "stale"],
            keys: KeySpec::None,
            acl: &["admin", "dangerous", "slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Sets hash slots as unbound for a node.",
            complexity: "O(N) where N is the total number of hash slot arguments",
            handler: fixed,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|delslotsrange",
            arity: -4,
            flags: &["no_async_loading", "admin", "stale"],
            keys: KeySpec::None,
            acl: &["admin", "dangerous", "slow"],
            group: "cluster",
            since: "7.0.0",
            summary: "Sets hash slot ranges as unbound for a node.",
            complexity: "O(N) where N is the total number of the slots between the start slot and end slot arguments.",
            handler: fixed,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|failover",
            arity: -2,
            flags: &["no_async_loading", "admin", "stale"],
            keys: KeySpec::None,
            acl: &["admin", "dangerous", "slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Forces a replica to perform a manual failover of its master.",
            complexity: "O(1)",
            handler: failover,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|flushslots",
            arity: 2,
            flags: &["no_async_loading", "admin", "stale"],
            keys: KeySpec::None,
            acl: &["admin", "dangerous", "slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Deletes all slots information from a node.",
            complexity: "O(1)",
            handler: fixed,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|forget",
            arity: 3,
            flags: &["no_async_loading", "admin", "stale"],
            keys: KeySpec::None,
            acl: &["admin", "dangerous", "slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Removes a node from the nodes table.",
            complexity: "O(1)",
            handler: forget,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|getkeysinslot",
            arity: 4,
            flags: &["stale"],
            keys: KeySpec::None,
            acl: &["slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Returns the key names in a hash slot.",
            complexity: "O(N) where N is the number of requested keys",
            handler: getkeysinslot,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|help",
            arity: 2,
            flags: &["loading", "stale"],
            keys: KeySpec::None,
            acl: &["slow"],
            group: "cluster",
            since: "5.0.0",
            summary: "Returns helpful text about the different subcommands.",
            complexity: "O(1)",
            handler: help,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|info",
            arity: 2,
            flags: &["stale"],
            keys: KeySpec::None,
            acl: &["slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Returns information about the state of a node.",
            complexity: "O(1)",
            handler: info,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|keyslot",
            arity: 3,
            flags: &["stale"],
            keys: KeySpec::None,
            acl: &["slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Returns the hash slot for a key.",
            complexity: "O(N) where N is the number of bytes in the key",
            handler: keyslot,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|links",
            arity: 2,
            flags: &["stale"],
            keys: KeySpec::None,
            acl: &["slow"],
            group: "cluster",
            since: "7.0.0",
            summary: "Returns a list of all TCP links to and from peer nodes.",
            complexity: "O(N) where N is the total number of Cluster nodes",
            handler: links,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|meet",
            arity: -4,
            flags: &["no_async_loading", "admin", "stale"],
            keys: KeySpec::None,
            acl: &["admin", "dangerous", "slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Forces a node to handshake with another node.",
            complexity: "O(1)",
            handler: fixed,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|myid",
            arity: 2,
            flags: &["stale"],
            keys: KeySpec::None,
            acl: &["slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Returns the ID of a node.",
            complexity: "O(1)",
            handler: myid,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|myshardid",
            arity: 2,
            flags: &["stale"],
            keys: KeySpec::None,
            acl: &["slow"],
            group: "cluster",
            since: "7.2.0",
            summary: "Returns the shard ID of a node.",
            complexity: "O(1)",
            handler: myshardid,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|nodes",
            arity: 2,
            flags: &["stale"],
            keys: KeySpec::None,
            acl: &["slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Returns the cluster configuration for a node.",
            complexity: "O(N) where N is the total number of Cluster nodes",
            handler: nodes,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|replicas",
            arity: 3,
            flags: &["admin", "stale"],
            keys: KeySpec::None,
            acl: &["admin", "dangerous", "slow"],
            group: "cluster",
            since: "5.0.0",
            summary: "Lists the replica nodes of a master node.",
            complexity: "O(N) where N is the number of replicas.",
            handler: replicas,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|replicate",
            arity: 3,
            flags: &["no_async_loading", "admin", "stale"],
            keys: KeySpec::None,
            acl: &["admin", "dangerous", "slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Configure a node as replica of a master node.",
            complexity: "O(1)",
            handler: replicate,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|reset",
            arity: -2,
            flags: &["admin", "stale", "noscript"],
            keys: KeySpec::None,
            acl: &["admin", "dangerous", "slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Resets a node.",
            complexity: "O(N) where N is the number of known nodes. The command may execute a FLUSHALL as a side effect.",
            handler: fixed,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|saveconfig",
            arity: 2,
            flags: &["no_async_loading", "admin", "stale"],
            keys: KeySpec::None,
            acl: &["admin", "dangerous", "slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Forces a node to save the cluster configuration to disk.",
            complexity: "O(1)",
            handler: saveconfig,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|set-config-epoch",
            arity: 3,
            flags: &["no_async_loading", "admin", "stale"],
            keys: KeySpec::None,
            acl: &["admin", "dangerous", "slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Sets the configuration epoch for a new node.",
            complexity: "O(1)",
            handler: fixed,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|setslot",
            arity: -4,
            flags: &["no_async_loading", "admin", "stale"],
            keys: KeySpec::None,
            acl: &["admin", "dangerous", "slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Binds a hash slot to a node.",
            complexity: "O(1)",
            handler: fixed,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|shards",
            arity: 2,
            flags: &["loading", "stale"],
            keys: KeySpec::None,
            acl: &["slow"],
            group: "cluster",
            since: "7.0.0",
            summary: "Returns the mapping of cluster slots to shards.",
            complexity: "O(N) where N is the total number of cluster nodes",
            handler: shards,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|slaves",
            arity: 3,
            flags: &["admin", "stale"],
            keys: KeySpec::None,
            acl: &["admin", "dangerous", "slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Lists the replica nodes of a master node.",
            complexity: "O(N) where N is the number of replicas.",
            handler: replicas,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "cluster|slots",
            arity: 2,
            flags: &["loading", "stale"],
            keys: KeySpec::None,
            acl: &["slow"],
            group: "cluster",
            since: "3.0.0",
            summary: "Returns the mapping of cluster slots to nodes.",
            complexity: "O(N) where N is the total number of Cluster nodes",
            handler: slots,
            ..CommandSpec::DEFAULT
        },
        ],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "asking",
        arity: 1,
        flags: &["fast"],
        keys: KeySpec::None,
        acl: &["connection", "fast"],
        group: "cluster",
        since: "3.0.0",
        summary: "Signals that a cluster client is following an -ASK redirect.",
        complexity: "O(1)",
        handler: flag_ok,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "readonly",
        arity: 1,
        flags: &["fast", "loading", "stale"],
        keys: KeySpec::None,
        acl: &["connection", "fast"],
        group: "cluster",
        since: "3.0.0",
        summary: "Enables read-only queries for a connection to a Redis Cluster replica node.",
        complexity: "O(1)",
        handler: flag_ok,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "readwrite",
        arity: 1,
        flags: &["fast", "loading", "stale"],
        keys: KeySpec::None,
        acl: &["connection", "fast"],
        group: "cluster",
        since: "3.0.0",
        summary: "Enables read-write queries for a connection to a Reids Cluster replica node.",
        complexity: "O(1)",
        handler: flag_ok,
        ..CommandSpec::DEFAULT
    },
];
