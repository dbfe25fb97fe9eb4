//! CONFIG GET / SET / RESETSTAT / REWRITE / HELP over [`crate::config::ConfigStore`].

use super::super::args;
use super::super::{errors, Cx};
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
    // A TLS parameter changed on a server with TLS listeners: their configuration is
    // rebuilt, and if it does not load, the parameters go back (Redis `applyTlsCfg`).
    let tls_names: Vec<&str> = crate::tls::PARAMS
        .iter()
        .copied()
        .filter(|n| {
            pairs
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case(n.as_bytes()))
        })
        .collect();
    let reload_tls = !tls_names.is_empty() && cx.srv.tls.read().is_some();
    let before: Vec<(&str, String)> = if reload_tls {
        let get = |n: &str| cx.srv.config.get(n).unwrap_or_default();
        tls_names.iter().map(|n| (*n, get(n))).collect()
    } else {
        Vec::new()
    };
    match cx.srv.config.set_many(&pairs) {
        Ok(()) => {
            if reload_tls {
                match cx.srv.tls_config() {
                    Ok(cfg) => *cx.srv.tls.write() = Some(cfg),
                    Err(e) => {
                        tracing::warn!("Failed to update the TLS configuration: {e}");
                        for (n, v) in &before {
                            let _ = cx.srv.config.set_initial(n, v);
                        }
                        return Reply::error(format!(
                            "ERR CONFIG SET failed (possibly related to argument '{}') - \
                             Unable to update TLS configuration. Check server logs.",
                            tls_names[0]
                        ));
                    }
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
        &ks.evicted,
        &ks.eviction_exceeded_total_us,
    ] {
        c.store(0, Ordering::Relaxed);
    }
    srv.ks.lazyfree.reset_stats();
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
        let content = crate::config::rewrite::rewrite(&old, &cx.srv.config, &cwd);
        crate::config::rewrite::write_atomic(path, &content)
    })();
    match result {
        Ok(()) => {
            tracing::info!("CONFIG REWRITE executed with success.");
            Reply::OK
        }
        Err(e) => {
            tracing::warn!("CONFIG-REWRITE failed: {e}");
            Reply::error(format!("ERR Rewriting config file: {}", strerror(&e)))
        }
    }
}

/// The C library's text for an I/O error (what Redis prints with `strerror`): Rust's
/// rendering without its ` (os error N)` suffix.
fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match (e.raw_os_error(), s.rfind(" (os error ")) {
        (Some(_), Some(i)) => s[..i].to_string(),
        _ => s,
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
