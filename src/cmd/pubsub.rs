//! Pub/Sub commands (pubsub.c): SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE and their UNSUBSCRIBEs,
//! PUBLISH, SPUBLISH and PUBSUB introspection.
//!
//! (Un)subscribe confirmations go through the client's own delivery queue rather than the
//! reply, so they reach the socket in order with messages: a confirmation is queued before
//! the subscription is registered, so no message on the channel can overtake it. Inside
//! EXEC they are returned as the command's reply instead (several frames for one command,
//! exactly as Redis writes them inside EXEC's array).

use super::table::{CommandSpec, KeySpec};
use super::{errors, Cx};
use crate::instance::pubsub::{Kind, Push, Subscriptions};
use crate::instance::session::Session;
use crate::instance::state::Shared;
use crate::protocol::Reply;
use bytes::{Bytes, BytesMut};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "subscribe",
        arity: -2,
        flags: &["pubsub", "noscript", "loading", "stale"],
        keys: KeySpec::None,
        acl: &["pubsub", "slow"],
        group: "pubsub",
        since: "2.0.0",
        summary: "Listen for messages published to the given channels",
        complexity: "O(N) where N is the number of channels to subscribe to.",
        handler: subscribe,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "unsubscribe",
        arity: -1,
        flags: &["pubsub", "noscript", "loading", "stale"],
        keys: KeySpec::None,
        acl: &["pubsub", "slow"],
        group: "pubsub",
        since: "2.0.0",
        summary: "Stop listening for messages posted to the given channels",
        complexity: "O(N) where N is the number of clients already subscribed to a channel.",
        handler: unsubscribe,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "psubscribe",
        arity: -2,
        flags: &["pubsub", "noscript", "loading", "stale"],
        keys: KeySpec::None,
        acl: &["pubsub", "slow"],
        group: "pubsub",
        since: "2.0.0",
        summary: "Listen for messages published to channels matching the given patterns",
        complexity: "O(N) where N is the number of patterns the client is already subscribed to.",
        handler: psubscribe,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "punsubscribe",
        arity: -1,
        flags: &["pubsub", "noscript", "loading", "stale"],
        keys: KeySpec::None,
        acl: &["pubsub", "slow"],
        group: "pubsub",
        since: "2.0.0",
        summary: "Stop listening for messages posted to channels matching the given patterns",
        complexity: "O(N+M) where N is the number of patterns the client is already subscribed \
                     and M is the number of total patterns subscribed in the system (by any \
                     client).",
        handler: punsubscribe,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "publish",
        arity: 3,
        flags: &["pubsub", "loading", "stale", "fast"],
        keys: KeySpec::None,
        acl: &["pubsub", "fast"],
        group: "pubsub",
        since: "2.0.0",
        summary: "Post a message to a channel",
        complexity: "O(N+M) where N is the number of clients subscribed to the receiving \
                     channel and M is the total number of subscribed patterns (by any client).",
        handler: publish,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "pubsub",
        arity: -2,
        flags: &[],
        keys: KeySpec::None,
        acl: &["slow"],
        group: "pubsub",
        since: "2.8.0",
        summary: "A container for Pub/Sub commands",
        complexity: "Depends on subcommand.",
        subcommands: &[
            CommandSpec {
                name: "pubsub|channels",
                arity: -2,
                flags: &["pubsub", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["pubsub", "slow"],
                group: "pubsub",
                since: "2.8.0",
                summary: "List active channels",
                complexity: "O(N) where N is the number of active channels, and assuming \
                             constant time pattern matching (relatively short channels and \
                             patterns)",
                handler: pubsub_channels,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "pubsub|numsub",
                arity: -2,
                flags: &["pubsub", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["pubsub", "slow"],
                group: "pubsub",
                since: "2.8.0",
                summary: "Get the count of subscribers for channels",
                complexity: "O(N) for the NUMSUB subcommand, where N is the number of \
                             requested channels",
                handler: pubsub_numsub,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "pubsub|numpat",
                arity: 2,
                flags: &["pubsub", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["pubsub", "slow"],
                group: "pubsub",
                since: "2.8.0",
                summary: "Get the count of unique patterns pattern subscriptions",
                complexity: "O(1)",
                handler: pubsub_numpat,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "pubsub|help",
                arity: 2,
                flags: &["loading", "stale"],
                keys: KeySpec::None,
                acl: &["slow"],
                group: "pubsub",
                since: "6.2.0",
                summary: "Show helpful text about the different subcommands",
                complexity: "O(1)",
                handler: pubsub_help,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "pubsub|shardnumsub",
                arity: -2,
                flags: &["pubsub", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["pubsub", "slow"],
                group: "pubsub",
                since: "7.0.0",
                summary: "Get the count of subscribers for shard channels",
                complexity: "O(N) for the SHARDNUMSUB subcommand, where N is the number of \
                             requested shard channels",
                handler: pubsub_shardnumsub,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "pubsub|shardchannels",
                arity: -2,
                flags: &["pubsub", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["pubsub", "slow"],
                group: "pubsub",
                since: "7.0.0",
                summary: "List active shard channels",
                complexity: "O(N) where N is the number of active shard channels, and assuming \
                             constant time pattern matching (relatively short shard channels).",
                handler: pubsub_shardchannels,
                ..CommandSpec::DEFAULT
            },
        ],
        handler: pubsub,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "ssubscribe",
        arity: -2,
        flags: &["pubsub", "noscript", "loading", "stale"],
        keys: KeySpec::Range(1, -1, 1),
        acl: &["pubsub", "slow"],
        group: "pubsub",
        since: "7.0.0",
        summary: "Listen for messages published to the given shard channels",
        complexity: "O(N) where N is the number of shard channels to subscribe to.",
        handler: ssubscribe,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sunsubscribe",
        arity: -1,
        flags: &["pubsub", "noscript", "loading", "stale"],
        keys: KeySpec::Range(1, -1, 1),
        acl: &["pubsub", "slow"],
        group: "pubsub",
        since: "7.0.0",
        summary: "Stop listening for messages posted to the given shard channels",
        complexity: "O(N) where N is the number of clients already subscribed to a shard \
                     channel.",
        handler: sunsubscribe,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "spublish",
        arity: 3,
        flags: &["pubsub", "loading", "stale", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["pubsub", "fast"],
        group: "pubsub",
        since: "7.0.0",
        summary: "Post a message to a shard channel",
        complexity: "O(N) where N is the number of clients subscribed to the receiving shard \
                     channel.",
        handler: spublish,
        ..CommandSpec::DEFAULT
    },
];

fn words(kind: Kind) -> (&'static str, &'static str) {
    match kind {
        Kind::Channel => ("subscribe", "unsubscribe"),
        Kind::Pattern => ("psubscribe", "punsubscribe"),
        Kind::Shard => ("ssubscribe", "sunsubscribe"),
    }
}

/// The session's subscriptions, created on first use. Publishers cannot read the config,
/// so every (un)subscribe command refreshes the output buffer limits they apply.
fn subs_of<'s>(srv: &Shared, sess: &'s mut Session) -> &'s mut Subscriptions {
    srv.pubsub.refresh_limits(&srv.config);
    let handle = &sess.handle;
    sess.subs
        .get_or_insert_with(|| Box::new(Subscriptions::new(handle.clone())))
}

/// Where confirmations go: the client's queue, or (inside EXEC) the command's reply.
struct Confirmations {
    in_exec: bool,
    frames: BytesMut,
    resp3: bool,
}

impl Confirmations {
    fn new(sess: &Session) -> Confirmations {
        Confirmations {
            in_exec: sess.in_exec,
            frames: BytesMut::new(),
            resp3: sess.resp3,
        }
    }

    fn send(&mut self, srv: &Shared, subs: &Subscriptions, p: Push) {
        if self.in_exec {
            p.encode(&mut self.frames, self.resp3);
        } else {
            subs.sub.push(p, srv.pubsub.limits());
        }
    }

    fn reply(self) -> Reply {
        if self.in_exec {
            Reply::Raw(self.frames.freeze())
        } else {
            Reply::NoReply
        }
    }
}

/// Mirrors the counts into CLIENT LIST's `sub=`/`psub=`/`ssub=`.
fn publish_counts(sess: &Session) {
    if let Some(s) = &sess.subs {
        let mut info = sess.handle.info.lock();
        info.sub = s.channels.len();
        info.psub = s.patterns.len();
        info.ssub = s.shard.len();
        drop(info);
        // Part of the client's memory (`tot-mem`, client eviction), as in Redis.
        let mem = &sess.handle.mem;
        mem.pubsub
            .store(s.mem_overhead(), std::sync::atomic::Ordering::Relaxed);
    }
}

fn subscribe_kind(cx: &mut Cx, kind: Kind) -> Reply {
    // Redis refuses SSUBSCRIBE for clients that must get one reply per command, which
    // includes EXEC (SUBSCRIBE and PSUBSCRIBE keep working there for compatibility).
    if kind == Kind::Shard && cx.sess.in_exec {
        return errors::err(errors::SSUBSCRIBE_DENY_BLOCKING);
    }
    let mut conf = Confirmations::new(cx.sess);
    let srv = cx.srv;
    let subs = subs_of(srv, cx.sess);
    for name in &cx.args[1..] {
        let name = Bytes::copy_from_slice(name);
        let new = subs.set(kind).insert(name.clone());
        let p = Push::Confirm {
            kind: words(kind).0,
            name: Some(name.clone()),
            count: subs.count(kind),
        };
        conf.send(srv, subs, p);
        if new {
            srv.pubsub.subscribe(kind, &name, &subs.sub);
        }
    }
    publish_counts(cx.sess);
    conf.reply()
}

fn unsubscribe_kind(cx: &mut Cx, kind: Kind) -> Reply {
    let mut conf = Confirmations::new(cx.sess);
    let srv = cx.srv;
    let subs = subs_of(srv, cx.sess);
    let names: Vec<Bytes> = if cx.args.len() > 1 {
        cx.args[1..]
            .iter()
            .map(|n| Bytes::copy_from_slice(n))
            .collect()
    } else {
        subs.set(kind).iter().cloned().collect()
    };
    if names.is_empty() {
        // Subscribed to nothing: Redis still confirms, with a nil name.
        let p = Push::Confirm {
            kind: words(kind).1,
            name: None,
            count: subs.count(kind),
        };
        conf.send(srv, subs, p);
    }
    for name in names {
        if subs.set(kind).remove(&name) {
            srv.pubsub.unsubscribe(kind, &name, subs.sub.client_id);
        }
        let p = Push::Confirm {
            kind: words(kind).1,
            name: Some(name),
            count: subs.count(kind),
        };
        conf.send(srv, subs, p);
    }
    publish_counts(cx.sess);
    conf.reply()
}

fn subscribe(cx: &mut Cx) -> Reply {
    subscribe_kind(cx, Kind::Channel)
}
fn psubscribe(cx: &mut Cx) -> Reply {
    subscribe_kind(cx, Kind::Pattern)
}
fn ssubscribe(cx: &mut Cx) -> Reply {
    subscribe_kind(cx, Kind::Shard)
}
fn unsubscribe(cx: &mut Cx) -> Reply {
    unsubscribe_kind(cx, Kind::Channel)
}
fn punsubscribe(cx: &mut Cx) -> Reply {
    unsubscribe_kind(cx, Kind::Pattern)
}
fn sunsubscribe(cx: &mut Cx) -> Reply {
    unsubscribe_kind(cx, Kind::Shard)
}

fn publish(cx: &mut Cx) -> Reply {
    Reply::Int(cx.srv.pubsub.publish(&cx.args[1], &cx.args[2]) as i64)
}

fn spublish(cx: &mut Cx) -> Reply {
    Reply::Int(cx.srv.pubsub.spublish(&cx.args[1], &cx.args[2]) as i64)
}

/// Drops every subscription without confirmations (disconnect, RESET).
pub fn unsubscribe_all(srv: &Shared, sess: &mut Session) {
    let Some(subs) = sess.subs.as_mut() else {
        return;
    };
    let id = subs.sub.client_id;
    for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
        for name in subs.set(kind).drain() {
            srv.pubsub.unsubscribe(kind, &name, id);
        }
    }
    publish_counts(sess);
}

/// What RESP2 subscribed mode does with a command (Redis `processCommand`).
pub enum Gate {
    Allow,
    Reject(String),
}

/// Checked by dispatch only for sessions in RESP2 subscribed mode.
pub fn resp2_gate(spec: &CommandSpec) -> Gate {
    const ALLOWED: &[&str] = &[
        "ping",
        "subscribe",
        "ssubscribe",
        "unsubscribe",
        "sunsubscribe",
        "psubscribe",
        "punsubscribe",
        "quit",
        "reset",
    ];
    if ALLOWED.contains(&spec.name) {
        Gate::Allow
    } else {
        Gate::Reject(format!(
            "Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET \
             are allowed in this context",
            spec.name
        ))
    }
}

fn pubsub(cx: &mut Cx) -> Reply {
    match cx.args.get(1) {
        Some(sub) => errors::unknown_subcommand("pubsub", sub),
        None => errors::wrong_args("pubsub"),
    }
}

fn channel_list(cx: &mut Cx, kind: Kind) -> Reply {
    if cx.args.len() > 3 {
        return errors::subcommand_syntax("pubsub", &cx.args[1]);
    }
    let pat = cx.args.get(2).map(|p| &p[..]);
    Reply::strings(cx.srv.pubsub.channels(kind, pat))
}

fn numsub(cx: &mut Cx, kind: Kind) -> Reply {
    let mut out = Vec::with_capacity((cx.args.len() - 2) * 2);
    for name in &cx.args[2..] {
        out.push(Reply::Bulk(Bytes::copy_from_slice(name)));
        out.push(Reply::Int(cx.srv.pubsub.numsub(kind, name) as i64));
    }
    Reply::Array(out)
}

fn pubsub_channels(cx: &mut Cx) -> Reply {
    channel_list(cx, Kind::Channel)
}
fn pubsub_shardchannels(cx: &mut Cx) -> Reply {
    channel_list(cx, Kind::Shard)
}
fn pubsub_numsub(cx: &mut Cx) -> Reply {
    numsub(cx, Kind::Channel)
}
fn pubsub_shardnumsub(cx: &mut Cx) -> Reply {
    numsub(cx, Kind::Shard)
}
fn pubsub_numpat(cx: &mut Cx) -> Reply {
    Reply::Int(cx.srv.pubsub.numpat() as i64)
}

fn pubsub_help(_cx: &mut Cx) -> Reply {
    const HELP: &[&str] = &[
        "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding",
        "    pattern subscriptions(default: no channels).",
        "SHARDCHANNELS [<pattern>]",
        "    Return the currently active shard level channels matching a <pattern> (default: \
         '*').",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
        "HELP",
        "    Prints this help.",
    ];
    Reply::Array(HELP.iter().map(|l| Reply::status(l)).collect())
}
