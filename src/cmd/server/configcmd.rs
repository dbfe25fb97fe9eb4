//! CONFIG GET / SET / RESETSTAT / REWRITE / HELP over [`crate::config::ConfigStore`].

use super::super::args;
use super::super::{errors, Cx};
use crate::instance::state::Shared;
use crate::protocol::Reply;
use bytes::Bytes;
use std::sync::atomic::Ordering;

pub(super) fn config(cx: &mut Cx) -> Reply {
    // Dispatch resolves every subcommand; reaching the container means none was given.
    errors::subcommand_syntax("config", cx.args.get(1).map_or(&b""[..], |a| &a[..]))
}

pub(super) fn config_get(cx: &mut Cx) -> Reply {
    let patterns: Vec<&[u8]> = cx.args[2..].iter().map(|a| &a[..]).collect();
    // `--port 0` asks for any free port: report the one actually bound.
    let bound = cx.srv.port.load(Ordering::Relaxed);
    Reply::Map(
        cx.srv
            .config
            .get_patterns(&patterns)
            .into_iter()
            .map(|(k, mut v)| {
                if bound != 0 && v == "0" && k.eq_ignore_ascii_case("port") {
                    v = bound.to_string();
                }
                (Reply::Bulk(Bytes::from(k)), Reply::Bulk(Bytes::from(v)))
            })
            .collect(),
    )
}

pub(super) fn config_set(cx: &mut Cx) -> Reply {
    if cx.args.len() % 2 == 1 {
        return errors::syntax();
    }
    let pairs: Vec<(&[u8], &[u8])> = cx.args[2..]
        .chunks(2)
        .map(|p| (&p[0][..], &p[1][..]))
        .collect();
    // TLS parameters: with TLS on (`tls-port` not 0, after the change) the configuration is
    // rebuilt, and a new `tls-port` bound; if either fails, the parameters go back (Redis
    // `applyTlsCfg` / `applyTLSPort`).
    let tls_names: Vec<&str> = crate::tls::PARAMS
        .iter()
        .copied()
        .chain(["tls-port"])
        .filter(|n| {
            pairs
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case(n.as_bytes()))
        })
        .collect();
    let get = |n: &str| cx.srv.config.get(n).unwrap_or_default();
    let before: Vec<(&str, String)> = tls_names.iter().map(|n| (*n, get(n))).collect();
    // Every parameter's value before, for the rollback when an apply fails (Redis restores
    // them all: introspection.tcl "CONFIG SET rollback on apply error").
    let all_before: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, _)| String::from_utf8_lossy(k).to_ascii_lowercase())
        .filter_map(|k| cx.srv.config.get(&k).map(|v| (k, v)))
        .collect();
    let rollback = |srv: &Shared| {
        for (n, v) in &all_before {
            let _ = srv.config.set_initial(n, v);
        }
    };
    let port_before = cx.srv.port.load(Ordering::Relaxed);
    match cx.srv.config.set_many(&pairs) {
        Ok(()) => {
            // `requirepass` is the default user's password (Redis
            // `ACLUpdateDefaultUserPassword`).
            if let Some((_, p)) = pairs
                .iter()
                .rev()
                .find(|(k, _)| k.eq_ignore_ascii_case(b"requirepass"))
            {
                cx.srv.acl.set_default_password(p);
            }
            if let Some(v) = cx.srv.config.get("acl-pubsub-default") {
                cx.srv.acl.set_pubsub_default(&v);
            }
            if !tls_names.is_empty() {
                let old_port = before.iter().find(|(n, _)| *n == "tls-port");
                let old_port = old_port.map(|(_, v)| v.parse().unwrap_or(0));
                if let Err(why) = apply_tls(cx.srv, old_port) {
                    for (n, v) in &before {
                        let _ = cx.srv.config.set_initial(n, v);
                    }
                    rollback(cx.srv);
                    let name = if old_port.is_some() {
                        "tls-port"
                    } else {
                        tls_names[0]
                    };
                    return Reply::error(format!(
                        "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
                    ));
                }
            }
            if pairs.iter().any(|(k, _)| k.eq_ignore_ascii_case(b"port")) {
                if let Err(why) = apply_port(cx.srv, port_before) {
                    rollback(cx.srv);
                    return Reply::error(format!(
                        "ERR CONFIG SET failed (possibly related to argument 'port') - {why}"
                    ));
                }
            }
            // Access tracking follows maxmemory-policy and the LFU parameters.
            super::super::refusals::config_changed(cx.srv);
            // The slow log's and latency monitor's thresholds, as `cmd::observe` reads them.
            cx.srv.observe_floor.refresh(&cx.srv.config);
            // Publishers read the pub/sub output buffer limits from a cached copy.
            if pairs
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case(b"client-output-buffer-limit"))
            {
                cx.srv.pubsub.refresh_limits(&cx.srv.config);
                cx.srv.normal_obuf.refresh(&cx.srv.config, "normal");
            }
            // So does the durable engine's committer its fsync policy.
            if let Some(p) = cx.srv.persist.get() {
                if pairs
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case(b"appendfsync"))
                {
                    p.set_mode(crate::persist::Persistence::fsync_mode(&cx.srv.config));
                }
            }
            Reply::OK
        }
        Err(e) => Reply::error(format!("ERR {e}")),
    }
}

/// Applies changed TLS parameters; `old_port` is `tls-port` before, when it was given. The
/// error is Redis's text.
fn apply_tls(srv: &Shared, old_port: Option<u16>) -> Result<(), &'static str> {
    let port: u16 = srv
        .config
        .get("tls-port")
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let moved = old_port.is_some_and(|old| old != port);
    if port == 0 {
        if moved {
            // TLS off: the listeners close, new connections are refused.
            *srv.tls.write() = None;
            srv.tls_listen.hand_over(Vec::new());
        }
        return Ok(());
    }
    let cfg = srv.tls_config().map_err(|e| {
        tracing::warn!("Failed to update the TLS configuration: {e}");
        "Unable to update TLS configuration. Check server logs."
    })?;
    if moved {
        let listeners = bind_on(srv, port).map_err(|e| {
            tracing::warn!("Could not create the TLS listening socket on port {port}: {e}");
            "Unable to listen on this port. Check server logs."
        })?;
        *srv.tls.write() = Some(cfg);
        srv.tls_listen.hand_over(listeners);
    } else {
        *srv.tls.write() = Some(cfg);
    }
    Ok(())
}

/// CONFIG SET port (Redis `changeListenPort`): the plain listeners move to the new port on
/// every bind address, or close with port 0; a port that cannot be bound leaves them as
/// they were (the caller rolls the parameters back). Connections already open stay.
fn apply_port(srv: &Shared, old: u64) -> Result<(), &'static str> {
    let port: u16 = srv
        .config
        .get("port")
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    if u64::from(port) == old {
        return Ok(());
    }
    let listeners = if port == 0 {
        Vec::new()
    } else {
        bind_on(srv, port).map_err(|e| {
            tracing::warn!("Could not create server TCP listening socket *:{port}: {e}");
            "Unable to listen on this port. Check server logs."
        })?
    };
    srv.tcp_listen.hand_over(listeners);
    srv.port.store(u64::from(port), Ordering::Relaxed);
    Ok(())
}

/// Binds `port` on the server's addresses, as its listeners were bound at start.
fn bind_on(srv: &Shared, mut port: u16) -> std::io::Result<Vec<std::net::TcpListener>> {
    use socket2::{Domain, Socket, Type};
    let mut out = Vec::new();
    for host in &srv.startup.bind {
        let host = host.trim_start_matches('-');
        let ip: std::net::IpAddr = host
            .parse()
            .map_err(|_| std::io::Error::other(format!("invalid bind address '{host}'")))?;
        let addr = std::net::SocketAddr::new(ip, port);
        let sock = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
        sock.set_reuse_address(true)?;
        sock.bind(&addr.into())?;
        sock.listen(511)?;
        sock.set_nonblocking(true)?;
        let l: std::net::TcpListener = sock.into();
        port = l.local_addr()?.port();
        out.push(l);
    }
    Ok(out)
}

pub(super) fn config_resetstat(cx: &mut Cx) -> Reply {
    let srv = cx.srv;
    srv.stats.reset();
    for s in &srv.cmdstats {
        s.reset();
    }
    srv.histograms.reset();
    let ks = &srv.ks.stats;
    for c in [
        &ks.hits,
        &ks.misses,
        &ks.expired,
        &ks.expired_subkeys,
        &ks.evicted,
        &ks.eviction_exceeded_total_us,
    ] {
        c.store(0, Ordering::Relaxed);
    }
    srv.ks.lazyfree.reset_stats();
    srv.pubsub.obuf_disconnections.store(0, Ordering::Relaxed);
    Reply::OK
}

/// CONFIG REWRITE (Redis `configRewriteCommand`): the start-up config file, rewritten in
/// place with the running configuration (see [`crate::config::rewrite`]).
pub(super) fn config_rewrite(cx: &mut Cx) -> Reply {
    let Some(path) = cx.srv.startup.config_file.as_deref() else {
        return errors::err(errors::NO_CONFIG_FILE);
    };
    let result = (|| {
        // A file removed since start-up is written anew, as Redis does.
        let old = match std::fs::read(path) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e),
        };
        let cwd = std::env::current_dir()?;
        let aclfile = cx.srv.config.get("aclfile").filter(|f| !f.is_empty());
        let users: Vec<String> = cx
            .srv
            .acl
            .users()
            .iter()
            .map(|u| {
                format!(
                    "user {} {}",
                    String::from_utf8_lossy(&u.name),
                    u.state().describe()
                )
            })
            .collect();
        let users = aclfile.is_none().then_some(&users[..]);
        let content = crate::config::rewrite::rewrite(&old, &cx.srv.config, &cwd, users);
        crate::config::rewrite::write_atomic(path, &content)
    })();
    match result {
        Ok(()) => {
            tracing::info!("CONFIG REWRITE executed with success.");
            Reply::OK
        }
        Err(e) => {
            tracing::warn!("CONFIG-REWRITE failed: {e}");
            Reply::error(format!(
                "ERR Rewriting config file: {}",
                errors::strerror(&e)
            ))
        }
    }
}

pub(super) fn config_help(_cx: &mut Cx) -> Reply {
    args::help(
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    )
}
