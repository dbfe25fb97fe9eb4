//! Commands the proxy answers itself or spreads over the whole fleet.

use super::resp;
use super::scan;
use super::session::{Fan, Pending, Session};
use crate::protocol::{write_reply, Reply};
use bytes::{Bytes, BytesMut};
use std::sync::atomic::Ordering;

fn err(text: &str) -> Pending {
    Pending::Ready(resp::error(text))
}

fn ok() -> Pending {
    Pending::Ready(Bytes::from_static(b"+OK\r\n"))
}

fn reply(c: &Session, r: &Reply) -> Pending {
    let mut out = BytesMut::new();
    write_reply(&mut out, r, c.resp3);
    Pending::Ready(out.freeze())
}

const NOT_INT: &str = "ERR value is not an integer or out of range";

pub fn command(c: &mut Session, name: &str, args: &[Bytes]) -> Pending {
    match name {
        "ping" => match args.len() {
            1 => Pending::Ready(Bytes::from_static(b"+PONG\r\n")),
            2 => Pending::Ready(resp::bulk(&args[1])),
            _ => err("ERR wrong number of arguments for 'ping' command"),
        },
        "echo" => Pending::Ready(resp::bulk(&args[1])),
        "auth" => auth(c, args),
        "hello" => hello(c, args),
        "select" => match crate::num::parse_i64(&args[1]) {
            None => err(NOT_INT),
            Some(0) => ok(),
            Some(_) => err("ERR the proxy only serves db 0"),
        },
        "client|id" => Pending::Ready(resp::int(c.id as i64)),
        "client|getname" => match &c.name {
            Some(n) => Pending::Ready(resp::bulk(n)),
            None => reply(c, &Reply::Nil),
        },
        "client|setname" => {
            let n = &args[2];
            if n.iter().any(|&b| b <= b' ' || b > b'~') {
                return err(
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            c.name = (!n.is_empty()).then(|| n.clone());
            ok()
        }
        "client|setinfo" => {
            let attr = &args[2];
            if attr.eq_ignore_ascii_case(b"lib-name") || attr.eq_ignore_ascii_case(b"lib-ver") {
                ok()
            } else {
                err(&format!(
                    "ERR Unrecognized option '{}'",
                    String::from_utf8_lossy(attr)
                ))
            }
        }
        "info" => info(c, args),
        // Every node runs the same Redis: any node that is up answers for the fleet.
        n if n == "command" || n.starts_with("command|") || n == "time" => {
            Pending::Wait(c.send(first_up(c), resp::command(args)))
        }
        "dbsize" => c.fan(Fan::Sum, &[b"DBSIZE"]),
        "keys" => c.fan(Fan::Concat, &[&b"KEYS"[..], &args[1][..]]),
        "flushdb" | "flushall" => c.fan(Fan::AllOk, args),
        "script|load" => {
            c.proxy().remember_script(&args[2]);
            c.fan(Fan::First, &[&b"SCRIPT"[..], b"LOAD", &args[2][..]])
        }
        "script|exists" => c.fan(Fan::And, args),
        "script|flush" => {
            c.proxy().scripts.lock().clear();
            c.fan(Fan::AllOk, args)
        }
        "scan" => scan(c, args),
        "function" => function(c, args),
        n if n.starts_with("cluster|") || matches!(n, "asking" | "readonly" | "readwrite") => {
            super::cluster::command(c, n, args)
        }
        _ => err(&format!(
            "ERR '{}' is not supported by the proxy",
            name.replace('|', " ").to_ascii_uppercase()
        )),
    }
}

/// FUNCTION LOAD/DELETE/FLUSH/RESTORE change every node (the first node's reply answers);
/// the rest (LIST, DUMP, STATS, KILL, HELP) ask one node that is up.
fn function(c: &mut Session, args: &[Bytes]) -> Pending {
    let Some(sub) = args.get(1) else {
        return err("ERR wrong number of arguments for 'function' command");
    };
    let sub = sub.to_ascii_lowercase();
    match &sub[..] {
        b"load" | b"delete" | b"flush" | b"restore" => c.fan(Fan::First, args),
        _ => Pending::Wait(c.send(first_up(c), resp::command(args))),
    }
}

/// A node that is up (else the first, whose error then names it).
fn first_up(c: &Session) -> usize {
    c.fleet().first_up()
}

/// AUTH password: the default user's (an error while it needs none, as Redis answers).
fn check_password(c: &Session, pass: &[u8]) -> Result<(), &'static str> {
    if c.proxy().users.default_user().state().nopass {
        return Err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
    }
    check_user(c, b"default", pass)
}

/// AUTH user pass / HELLO AUTH against the proxy's users.
fn check_user(c: &Session, user: &[u8], pass: &[u8]) -> Result<(), &'static str> {
    match c.proxy().users.authenticate(user, pass) {
        Ok(_) => Ok(()),
        Err(_) => Err("WRONGPASS invalid username-password pair or user is disabled."),
    }
}

fn auth(c: &mut Session, args: &[Bytes]) -> Pending {
    let r = match args.len() {
        2 => check_password(c, &args[1]),
        3 => check_user(c, &args[1], &args[2]),
        _ => return err("ERR syntax error"),
    };
    match r {
        Ok(()) => {
            c.authed = true;
            ok()
        }
        Err(e) => err(e),
    }
}

fn hello(c: &mut Session, args: &[Bytes]) -> Pending {
    let mut proto = if c.resp3 { 3 } else { 2 };
    if args.len() > 1 {
        match crate::num::parse_i64(&args[1]) {
            Some(v @ (2 | 3)) => proto = v,
            Some(_) => return err("NOPROTO unsupported protocol version"),
            None => return err("ERR Protocol version is not an integer or out of range"),
        }
    }
    let mut i = 2;
    let mut name = None;
    let mut authed = c.authed;
    while i < args.len() {
        let more = args.len() - i - 1;
        if args[i].eq_ignore_ascii_case(b"auth") && more >= 2 {
            if let Err(e) = check_user(c, &args[i + 1], &args[i + 2]) {
                return err(e);
            }
            authed = true;
            i += 3;
        } else if args[i].eq_ignore_ascii_case(b"setname") && more >= 1 {
            name = Some(args[i + 1].clone());
            i += 2;
        } else {
            return err(&format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&args[i])
            ));
        }
    }
    if !authed {
        return err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
    }
    c.authed = true;
    if let Some(n) = name {
        c.name = (!n.is_empty()).then_some(n);
    }
    c.resp3 = proto == 3;
    let s = |v: &str| Reply::bulk_str(v);
    reply(
        c,
        &Reply::Map(vec![
            (s("server"), s("redis")),
            (s("version"), s(crate::REDIS_VERSION)),
            (s("proto"), Reply::Int(proto)),
            (s("id"), Reply::Int(c.id as i64)),
            (s("mode"), s("standalone")),
            (s("role"), s("master")),
            (s("modules"), Reply::Array(Vec::new())),
        ]),
    )
}

fn scan(c: &mut Session, args: &[Bytes]) -> Pending {
    let members = c.fleet().members.clone();
    let nodes = members.len();
    let cursor = std::str::from_utf8(&args[1])
        .ok()
        .and_then(|s| s.parse::<u64>().ok());
    let Some((node, node_cursor)) = cursor.and_then(|cur| scan::split_cursor(cur, nodes)) else {
        return err("ERR invalid cursor");
    };
    let mut a: Vec<Bytes> = args.to_vec();
    a[1] = Bytes::from(node_cursor.to_string());
    Pending::Scan(node, nodes, c.send(members[node], resp::command(&a)))
}

fn info(c: &Session, args: &[Bytes]) -> Pending {
    let p = c.proxy();
    let fleet = p.fleet();
    let members: Vec<&super::node::Node> =
        fleet.members.iter().map(|&i| &*fleet.nodes[i]).collect();
    let wanted: Vec<String> = args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let all = wanted
        .iter()
        .any(|w| matches!(w.as_str(), "all" | "everything"));
    let default = wanted.is_empty() || wanted.iter().any(|w| w == "default");
    // As in Redis, the latency sections are not among the default ones.
    let want =
        |s: &str| all || (default && !s.ends_with("latencystats")) || wanted.iter().any(|w| w == s);
    let mut text = String::new();
    if want("server") {
        text.push_str(&format!(
            "# Server\r\nredis_version:{}\r\nrespite_version:{}\r\nredis_mode:proxy\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\n",
            crate::REDIS_VERSION,
            crate::RESPITE_VERSION,
            std::process::id(),
            p.port.load(Ordering::Relaxed),
            p.started.elapsed().as_secs()
        ));
    }
    if want("clients") {
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        text.push_str(&format!(
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\n",
            p.connected.load(Ordering::Relaxed),
            p.cfg.maxclients,
        ));
    }
    if want("stats") {
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        let sum = |f: fn(&super::node::Node) -> u64| members.iter().copied().map(f).sum::<u64>();
        text.push_str(&format!(
            "# Stats\r\ntotal_connections_received:{}\r\nrejected_connections:{}\r\ntotal_commands_processed:{}\r\ntotal_node_requests:{}\r\ntotal_node_errors:{}\r\ntotal_node_error_replies:{}\r\ntotal_node_transport_errors:{}\r\ntotal_node_reconnects:{}\r\nnode_requests_in_flight:{}\r\n",
            p.total_connections.load(Ordering::Relaxed),
            p.rejected_connections.load(Ordering::Relaxed),
            p.commands.load(Ordering::Relaxed),
            sum(|n| n.info.requests.load(Ordering::Relaxed)),
            sum(|n| n.info.errors.load(Ordering::Relaxed)),
            sum(|n| n.info.error_replies.load(Ordering::Relaxed)),
            sum(|n| super::metrics::transport_errors(&n.info)),
            sum(|n| n.info.reconnects.load(Ordering::Relaxed)),
            sum(|n| n.info.in_flight.load(Ordering::Relaxed)),
        ));
        for n in &members {
            let [p50, p99, p999] = n.info.latency.quantiles([0.5, 0.99, 0.999]);
            text.push_str(&format!(
                "node_latency_{}:samples={},p50_us={p50},p99_us={p99},p999_us={p999}\r\n",
                n.id(),
                n.info.latency.count(),
            ));
        }
    }
    if want("nodes") {
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        text.push_str(&format!("# Nodes\r\nnodes:{}\r\n", members.len()));
        for (i, n) in members.iter().enumerate() {
            let [p50, p99, p999] = n.info.latency.quantiles([0.5, 0.99, 0.999]);
            let (up, conns) = n.shared_up();
            // The reason is free text: keep the line parseable.
            let last_error: String = n
                .info
                .last_error()
                .chars()
                .map(|ch| {
                    if matches!(ch, ',' | '\r' | '\n') {
                        ' '
                    } else {
                        ch
                    }
                })
                .collect();
            text.push_str(&format!(
                "node{i}:id={},url={},state={},requests={},errors={},error_replies={},transport_errors={},in_flight={},p50_us={p50},p99_us={p99},p999_us={p999},shared_up={up},shared={conns},dedicated={},subscriptions={},failures={},reconnects={},primary={},failovers={},last_error={last_error}\r\n",
                n.id(),
                // A node with replicas: its addresses joined by `+` (`,` splits fields).
                n.info.spec.redacted_urls().replace(',', "+"),
                super::node::state_name(n),
                n.info.requests.load(Ordering::Relaxed),
                n.info.errors.load(Ordering::Relaxed),
                n.info.error_replies.load(Ordering::Relaxed),
                super::metrics::transport_errors(&n.info),
                n.info.in_flight.load(Ordering::Relaxed),
                n.dedicated_in_use(),
                n.hub.names(),
                n.info.failures.load(Ordering::Relaxed),
                n.info.reconnects.load(Ordering::Relaxed),
                n.info.primary_addr(),
                n.info.failovers.load(Ordering::Relaxed),
            ));
        }
    }
    // Redis's `INFO latencystats` lines: arrival → reply ready, per command with samples.
    if want("latencystats") {
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        text.push_str("# Latencystats\r\n");
        for (name, h) in p.command_latency.used() {
            text.push_str(&format!(
                "latency_percentiles_usec_{name}:{}\r\n",
                h.percentiles_line()
            ));
        }
    }
    // The same per node: round trips on its shared connections.
    if want("nodelatencystats") {
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        text.push_str("# Nodelatencystats\r\n");
        for n in &members {
            if n.info.latency.count() > 0 {
                text.push_str(&format!(
                    "latency_percentiles_usec_{}:{}\r\n",
                    n.id(),
                    n.info.latency.percentiles_line()
                ));
            }
        }
    }
    if want("rebalance") {
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        text.push_str(&super::online::info(p));
    }
    reply(c, &Reply::Verbatim(Bytes::from(text)))
}
