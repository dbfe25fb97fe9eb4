//! Routing decisions (pure: no I/O), from the command table's key specs and the placement.
//!
//! Rules:
//! - Commands whose keys all live on one node are forwarded to it unchanged (multi-key
//!   commands, EVAL/EVALSHA/EVAL_RO/EVALSHA_RO/FCALL/FCALL_RO by their KEYS included); keys on two
//!   nodes give `-CROSSSLOT` and nothing is sent.
//! - MGET, MSET, DEL, UNLINK, EXISTS, TOUCH are split per node and merged in request order.
//! - A command whose table entry declares keys but names none in this call (EVAL with
//!   or FCALL with numkeys 0, or malformed arguments the node will refuse with its own error) goes to
//!   the node owning the empty key `""`: deterministic, and one node's script cache.
//! - PUBLISH goes to the node owning the channel name (as if it were a key).
//! - Blocking commands (BLPOP…, XREAD/XREADGROUP with BLOCK) use dedicated connections.
//! - Commands that hold client state or span the fleet are answered by the proxy
//!   (subscriptions: pubsub.rs).
//! - Keyless commands the proxy does not know how to spread are refused with `-ERR`.

use super::fleet::Members;
use crate::cmd::table::CommandSpec;
use bytes::Bytes;

pub const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";

/// How the proxy serves one command.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// Answered by the proxy (client state, fan-out, INFO…): the resolved lowercase name,
    /// e.g. `ping`, `client|setname`, `script|load`.
    Local(&'static str),
    /// Forwarded unchanged to one node.
    Node { node: usize, blocking: bool },
    /// Split per node; merged by `kind`.
    Split { kind: Split, parts: Vec<Part> },
    /// Answered at once with this error (text without the `-`).
    Reject(String),
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Split {
    /// MGET: one array, values in key order.
    Values,
    /// MSET: OK when every node said OK.
    AllOk,
    /// DEL, UNLINK, EXISTS, TOUCH: counts summed.
    Sum,
}

/// One node's share of a split command.
#[derive(Debug, PartialEq, Eq)]
pub struct Part {
    pub node: usize,
    pub args: Vec<Bytes>,
    /// Position of each of this part's keys in the original request's key order.
    pub slots: Vec<usize>,
}

/// Commands the proxy answers itself (the rest of the client-state logic is in client.rs).
/// A `match` (compiled to a switch on the length, then a compare), not a list scanned per
/// command: it runs for every request.
fn is_local(name: &str) -> bool {
    matches!(
        name,
        "ping"
            | "echo"
            | "quit"
            | "hello"
            | "auth"
            | "select"
            | "client|setname"
            | "client|getname"
            | "client|setinfo"
            | "client|id"
            | "info"
            | "command"
            | "command|count"
            | "command|info"
            | "command|docs"
            | "command|list"
            | "command|getkeys"
            | "multi"
            | "exec"
            | "discard"
            | "watch"
            | "unwatch"
            | "dbsize"
            | "keys"
            | "scan"
            | "flushdb"
            | "flushall"
            | "script|load"
            | "script|exists"
            | "script|flush"
            | "reset"
            | "time"
            | "subscribe"
            | "unsubscribe"
            | "psubscribe"
            | "punsubscribe"
            | "ssubscribe"
            | "sunsubscribe"
            | "asking"
            | "readonly"
            | "readwrite"
    ) || name.starts_with("cluster|")
}

fn upper_name(spec: &CommandSpec) -> String {
    spec.name.replace('|', " ").to_ascii_uppercase()
}

/// Decides how to serve `args` (non-empty).
pub fn route(args: &[Bytes], placement: &Members) -> Route {
    route_cmd(args, placement).1
}

/// [`route`], with the command's id for the per-command statistics
/// ([`super::stats::CommandLatency`]); none for a refused command (Redis keeps no latency
/// for a command it did not run) and for the proxy's own admin command.
pub fn route_cmd(args: &[Bytes], placement: &Members) -> (Option<usize>, Route) {
    let (id, r) = match functions(args, placement) {
        Some((extra, r)) => (crate::cmd::registry().len() + extra, r),
        None => match crate::cmd::registry().resolve(args) {
            Ok((id, spec)) => (id, route_spec(spec, args, placement)),
            // The proxy's own admin command: not in the command table (the nodes do not
            // know it), so looked for only here, off the common path.
            Err(_) if args[0].eq_ignore_ascii_case(b"proxy") => {
                return (None, Route::Local("proxy"))
            }
            Err(reply) => return (None, Route::Reject(reply_text(reply))),
        },
    };
    match r {
        Route::Reject(_) => (None, r),
        r => (Some(id), r),
    }
}

fn route_spec(spec: &'static CommandSpec, args: &[Bytes], placement: &Members) -> Route {
    if !spec.arity_ok(args.len()) {
        return Route::Reject(reply_text(crate::cmd::errors::wrong_args(spec.name)));
    }
    if is_local(spec.name) {
        return Route::Local(spec.name);
    }
    let split = match spec.name {
        "mget" => Some((Split::Values, 1)),
        "mset" => Some((Split::AllOk, 2)),
        "del" | "unlink" | "exists" | "touch" => Some((Split::Sum, 1)),
        _ => None,
    };
    if let Some((kind, stride)) = split {
        if !(args.len() - 1).is_multiple_of(stride) {
            return Route::Reject(reply_text(crate::cmd::errors::wrong_args(spec.name)));
        }
        return split_by_node(args, kind, stride, placement);
    }
    if spec.name == "publish" {
        return Route::Node {
            node: placement.owner(&args[1]),
            blocking: false,
        };
    }
    // The common shape (one key, at position 1: GET, SET, INCR, HSET…) without building the
    // key list (what `key_indices` gives for it: `[1]`).
    if matches!(spec.keys, crate::cmd::table::KeySpec::Range(1, 1, step) if step > 0)
        && args.len() > 1
    {
        return Route::Node {
            node: placement.owner(&args[1]),
            blocking: is_blocking(spec, args),
        };
    }
    let keys = spec.key_indices(args);
    let node = match keys.split_first() {
        Some((&first, rest)) => {
            let node = placement.owner(&args[first]);
            if rest.iter().any(|&i| placement.owner(&args[i]) != node) {
                return Route::Reject(CROSSSLOT.into());
            }
            node
        }
        None if !matches!(spec.keys, crate::cmd::table::KeySpec::None) => placement.owner(b""),
        None => {
            return Route::Reject(format!(
                "ERR '{}' is not supported by the proxy (it does not name keys)",
                upper_name(spec)
            ))
        }
    };
    Route::Node {
        node,
        blocking: is_blocking(spec, args),
    }
}

/// The keys `route` places `args` by (positions in `args`), for an online move to make
/// sure their tags are where routing will send them; `empty` when the command is routed
/// by the empty key (declares keys but names none). Commands answered by the proxy, and
/// PUBLISH (a channel, not a key), have none.
pub fn data_keys(args: &[Bytes]) -> (Vec<usize>, bool) {
    let none = (Vec::new(), false);
    let name = &args[0];
    let ro = name.eq_ignore_ascii_case(b"fcall_ro");
    if ro || name.eq_ignore_ascii_case(b"fcall") {
        if args.len() < 3 {
            return none;
        }
        let keys = crate::cmd::table::numkeys_at(args, 2);
        let empty = keys.is_empty();
        return (keys, empty);
    }
    let Ok((_, spec)) = crate::cmd::registry().resolve(args) else {
        return none;
    };
    if !spec.arity_ok(args.len()) || is_local(spec.name) || spec.name == "publish" {
        return none;
    }
    match spec.name {
        "mget" | "del" | "unlink" | "exists" | "touch" => {
            return ((1..args.len()).collect(), false)
        }
        "mset" => return ((1..args.len()).step_by(2).collect(), false),
        _ => {}
    }
    let keys = spec.key_indices(args);
    let empty = keys.is_empty() && !matches!(spec.keys, crate::cmd::table::KeySpec::None);
    (keys, empty)
}

/// Redis functions (the command table does not list them: respite has no functions, but
/// the nodes do). FCALL/FCALL_RO go by their keys like EVAL; FUNCTION is the proxy's.
/// With the route, the command's index in [`super::stats::EXTRA_COMMANDS`].
fn functions(args: &[Bytes], placement: &Members) -> Option<(usize, Route)> {
    let name = &args[0];
    if name.eq_ignore_ascii_case(b"function") {
        return Some((2, Route::Local("function")));
    }
    let ro = name.eq_ignore_ascii_case(b"fcall_ro");
    if !ro && !name.eq_ignore_ascii_case(b"fcall") {
        return None;
    }
    let extra = ro as usize;
    if args.len() < 3 {
        let n = if ro { "fcall_ro" } else { "fcall" };
        return Some((
            extra,
            Route::Reject(reply_text(crate::cmd::errors::wrong_args(n))),
        ));
    }
    let keys = crate::cmd::table::numkeys_at(args, 2);
    Some((
        extra,
        match single_node(args, &keys, placement) {
            Some(node) => Route::Node {
                node,
                blocking: false,
            },
            None => Route::Reject(CROSSSLOT.into()),
        },
    ))
}

/// Blocking commands need a connection of their own; XREAD/XREADGROUP only with BLOCK.
pub fn is_blocking(spec: &CommandSpec, args: &[Bytes]) -> bool {
    if !spec.has_flag("blocking") {
        return false;
    }
    match spec.name {
        "xread" | "xreadgroup" => args
            .iter()
            .take_while(|a| !a.eq_ignore_ascii_case(b"streams"))
            .any(|a| a.eq_ignore_ascii_case(b"block")),
        _ => true,
    }
}

/// The node every key of `args` (positions `keys`) lives on, or None if they span nodes.
/// No keys: the node owning `""` (the keyless rule above).
pub fn single_node(args: &[Bytes], keys: &[usize], placement: &Members) -> Option<usize> {
    let mut it = keys.iter().map(|&i| placement.owner(&args[i]));
    let first = it.next().unwrap_or_else(|| placement.owner(b""));
    it.all(|n| n == first).then_some(first)
}

fn split_by_node(args: &[Bytes], kind: Split, stride: usize, placement: &Members) -> Route {
    let mut parts: Vec<Part> = Vec::new();
    for (slot, chunk) in args[1..].chunks(stride).enumerate() {
        let node = placement.owner(&chunk[0]);
        let part = match parts.iter_mut().position(|p| p.node == node) {
            Some(i) => &mut parts[i],
            None => {
                parts.push(Part {
                    node,
                    args: vec![args[0].clone()],
                    slots: Vec::new(),
                });
                parts.last_mut().expect("just pushed")
            }
        };
        part.args.extend(chunk.iter().cloned());
        part.slots.push(slot);
    }
    // All on one node: the node's reply is already the answer.
    if let [only] = &parts[..] {
        return Route::Node {
            node: only.node,
            blocking: false,
        };
    }
    Route::Split { kind, parts }
}

fn reply_text(r: crate::protocol::Reply) -> String {
    match r {
        crate::protocol::Reply::Error(e) => e.into_owned(),
        other => format!("ERR {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::config::NodeSpec;

    fn placement() -> Members {
        let nodes: Vec<NodeSpec> = ["node-a", "node-b", "node-c"]
            .iter()
            .enumerate()
            .map(|(i, id)| NodeSpec::parse(&format!("{id}=redis://h:{}", 1 + i)).unwrap())
            .collect();
        Members::new(nodes, vec![0, 1, 2])
    }

    fn r(line: &str) -> Route {
        let args: Vec<Bytes> = line
            .split(' ')
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect();
        route(&args, &placement())
    }

    // From DESIGN.md §8's vectors: foo → b (1), {vehicle:42}… → c (2), partition:7:frontier
    // → a (0), {}x → a (0).
    const A: &str = "partition:7:frontier";
    const B: &str = "foo";
    const C: &str = "{vehicle:42}:x";

    fn node(n: usize) -> Route {
        Route::Node {
            node: n,
            blocking: false,
        }
    }

    #[test]
    fn command_ids_for_statistics() {
        let id = |line: &str| {
            let args: Vec<Bytes> = line
                .split(' ')
                .map(|s| Bytes::copy_from_slice(s.as_bytes()))
                .collect();
            route_cmd(&args, &placement()).0
        };
        let reg = crate::cmd::registry();
        let table = |name: &[u8]| reg.lookup(name).map(|(id, _)| id);
        assert_eq!(id("get foo"), table(b"get"));
        assert_eq!(id("CLIENT SETNAME x"), table(b"client|setname"));
        assert_eq!(id("FCALL f 0"), Some(reg.len()));
        assert_eq!(id("FCALL_RO f 0"), Some(reg.len() + 1));
        assert_eq!(id("FUNCTION LIST"), Some(reg.len() + 2));
        assert_eq!(super::super::stats::EXTRA_COMMANDS[1], "fcall_ro");
        // Refused: no statistics.
        assert_eq!(id("NOPE x"), None);
        assert_eq!(id("GET"), None);
        assert_eq!(id(&format!("RENAME {A} {B}")), None);
    }

    #[test]
    fn single_key_and_same_node() {
        assert_eq!(r(&format!("GET {B}")), node(1));
        assert_eq!(r(&format!("set {C} v EX 10")), node(2));
        assert_eq!(r(&format!("HSET {A} f v")), node(0));
        assert_eq!(r("RENAME {vehicle:42}:x {vehicle:42}:y"), node(2));
        assert_eq!(
            r("SINTERSTORE {vehicle:42}:d {vehicle:42}:a {vehicle:42}:b"),
            node(2)
        );
        assert_eq!(r(&format!("PUBLISH {B} hi")), node(1));
    }

    #[test]
    fn crossslot_refusals() {
        for line in [
            format!("RENAME {A} {B}"),
            format!("SUNION {A} {C}"),
            format!("EVAL x 2 {A} {B}"),
            format!("EVALSHA abc 2 {C} {B} arg"),
            format!("EVAL_RO x 2 {A} {C}"),
            format!("EVALSHA_RO x 2 {A} {C}"),
            format!("ZUNIONSTORE {A} 2 {A} {B}"),
            format!("BLPOP {A} {B} 0"),
            format!("XREAD BLOCK 0 STREAMS {A} {B} $ $"),
        ] {
            assert_eq!(r(&line), Route::Reject(CROSSSLOT.into()), "{line}");
        }
    }

    #[test]
    fn scripts_by_keys_and_keyless_rule() {
        assert_eq!(r(&format!("EVAL x 1 {C} a b")), node(2));
        assert_eq!(r(&format!("EVALSHA s 2 {C} {{vehicle:42}}:y")), node(2));
        assert_eq!(r(&format!("FCALL f 1 {B} a")), node(1));
        assert_eq!(
            r(&format!("fcall_ro f 2 {A} {C}")),
            Route::Reject(CROSSSLOT.into())
        );
        assert_eq!(r("FUNCTION LOAD x"), Route::Local("function"));
        assert!(matches!(r("FCALL f"), Route::Reject(e) if e.contains("'fcall'")));
        // No keys: the owner of "" (node-? computed the same way).
        let empty = placement().owner(b"");
        assert_eq!(r("EVAL x 0"), node(empty));
        assert_eq!(r("FCALL f 0"), node(empty));
        assert_eq!(r("EVALSHA_RO s 0 a"), node(empty));
    }

    #[test]
    fn blocking_forms() {
        let blocking = |n| Route::Node {
            node: n,
            blocking: true,
        };
        assert_eq!(r(&format!("BLPOP {B} 0")), blocking(1));
        assert_eq!(
            r(&format!("BRPOPLPUSH {C} {{vehicle:42}}:y 1")),
            blocking(2)
        );
        assert_eq!(r(&format!("XREAD BLOCK 10 STREAMS {A} $")), blocking(0));
        assert_eq!(r(&format!("XREAD COUNT 1 STREAMS {A} 0")), node(0));
        assert_eq!(
            r(&format!("XREADGROUP GROUP g c BLOCK 5 STREAMS {A} >")),
            blocking(0)
        );
        assert_eq!(r(&format!("XREADGROUP GROUP g c STREAMS {A} >")), node(0));
    }

    #[test]
    fn splits() {
        let Route::Split { kind, parts } = r(&format!("MGET {A} {B} {A} {C}")) else {
            panic!()
        };
        assert_eq!(kind, Split::Values);
        let summary: Vec<(usize, usize, Vec<usize>)> = parts
            .iter()
            .map(|p| (p.node, p.args.len(), p.slots.clone()))
            .collect();
        assert_eq!(
            summary,
            vec![(0, 3, vec![0, 2]), (1, 2, vec![1]), (2, 2, vec![3])]
        );
        let Route::Split { kind, parts } = r(&format!("MSET {B} 1 {C} 2 {B} 3")) else {
            panic!()
        };
        assert_eq!(kind, Split::AllOk);
        assert_eq!(parts[0].args.len(), 5);
        assert_eq!(parts[0].slots, vec![0, 2]);
        assert_eq!(&parts[1].args[1..], &[Bytes::from(C), Bytes::from("2")]);
        for cmd in ["DEL", "UNLINK", "EXISTS", "TOUCH"] {
            let Route::Split { kind, parts } = r(&format!("{cmd} {A} {B}")) else {
                panic!()
            };
            assert_eq!((kind, parts.len()), (Split::Sum, 2));
        }
        assert_eq!(r(&format!("DEL {C} {{vehicle:42}}:y")), node(2));
        // MSET with an odd count is refused before splitting.
        assert!(matches!(r("MSET a 1 b"), Route::Reject(e) if e.contains("'mset'")));
    }

    #[test]
    fn local_and_refused() {
        for (line, name) in [
            ("PING", "ping"),
            ("ping x", "ping"),
            ("HELLO 3", "hello"),
            ("client setname x", "client|setname"),
            ("SCRIPT LOAD x", "script|load"),
            ("SCAN 0", "scan"),
            ("DBSIZE", "dbsize"),
            ("FLUSHALL", "flushall"),
            ("MULTI", "multi"),
            ("WATCH a b", "watch"),
            ("SSUBSCRIBE a", "ssubscribe"),
            ("subscribe a b", "subscribe"),
            ("CLUSTER SLOTS", "cluster|slots"),
            ("cluster getkeysinslot 1 2", "cluster|getkeysinslot"),
            ("READONLY", "readonly"),
            ("asking", "asking"),
        ] {
            assert_eq!(r(line), Route::Local(name), "{line}");
        }
        assert!(
            matches!(r("NOSUCH a"), Route::Reject(e) if e.starts_with("ERR unknown command 'NOSUCH'"))
        );
        assert!(
            matches!(r("GET"), Route::Reject(e) if e == "ERR wrong number of arguments for 'get' command")
        );
        assert!(matches!(r("CONFIG GET x"), Route::Reject(e) if e.contains("not supported")));
        assert!(matches!(r("CLIENT LIST"), Route::Reject(e) if e.contains("not supported")));
    }
}
