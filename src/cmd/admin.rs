//! The RESPITE command family (test double control over the protocol): clock, seed, fault
//! injection, command log and connection counts. Refused unless the server was started with
//! `--enable-test-commands` (config `enable-test-commands yes`).
//!
//! ```text
//! RESPITE CLOCK ADVANCE ms | SET unix_ms | REAL | GET
//! RESPITE SEED n
//! RESPITE FAULT FAIL n [CMD name] [KEY glob] [ERR text] | DELAY ms | DROP | REFUSE ms
//!               | PAUSE [ms] | RESUME | CLEAR
//! RESPITE LOG GET [n] | RESET | COUNT [name]
//! RESPITE CONNECTIONS
//! RESPITE PANIC
//! ```
//!
//! The handler parses its own subcommands (rather than table subcommands) so that the
//! "disabled" error comes first, whatever follows.

use super::args::is;
use super::{errors, CommandSpec, Cx, KeySpec};
use crate::protocol::Reply;
use bytes::Bytes;
use std::time::Duration;

pub const DISABLED: &str =
    "ERR RESPITE commands are disabled; start respite with --enable-test-commands";

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "respite",
    arity: -1,
    flags: &["noscript", "loading", "stale", "allow_busy"],
    keys: KeySpec::None,
    acl: &["admin", "slow", "dangerous"],
    group: "server",
    since: "7.2.0",
    summary: "Controls the respite test double (needs --enable-test-commands)",
    complexity: "O(1) except LOG GET: O(N)",
    handler: respite,
    ..CommandSpec::DEFAULT
}];

const HELP: &[&str] = &[
    "CLOCK ADVANCE <ms> | SET <unix-ms> | REAL | GET",
    "    Drive the server clock (ADVANCE and SET switch it to manual mode).",
    "SEED <n>",
    "    Seed the server's random choices (SPOP, RANDOMKEY, Lua math.random...).",
    "FAULT FAIL <n> [CMD <name>] [KEY <glob>] [ERR <text>]",
    "    Fail the next <n> (matching) commands with an error.",
    "FAULT DELAY <ms> | DROP | REFUSE <ms> | PAUSE [<ms>] | RESUME | CLEAR",
    "    Delay replies, drop connections, refuse new ones, pause, clear all faults.",
    "LOG GET [<n>] | RESET | COUNT [<name>]",
    "    The commands received: [client-id, [args...]] entries, or counts.",
    "CONNECTIONS",
    "    Connected clients and connections accepted since start.",
    "PANIC",
    "    Panic inside this command (test hook: the connection's cleanup must still run).",
];

fn respite(cx: &mut Cx) -> Reply {
    if !cx.srv.test_commands {
        return errors::err(DISABLED);
    }
    let args = cx.args;
    let Some(sub) = args.get(1) else {
        return errors::wrong_args("respite");
    };
    let rest = &args[2..];
    if is(sub, "CLOCK") {
        clock(cx, rest)
    } else if is(sub, "SEED") {
        seed(cx, rest)
    } else if is(sub, "FAULT") {
        fault(cx, rest)
    } else if is(sub, "LOG") {
        log(cx, rest)
    } else if is(sub, "CONNECTIONS") && rest.is_empty() {
        let f = &cx.srv.faults;
        Reply::Map(vec![
            (
                Reply::bulk_static("connected"),
                Reply::Int(cx.srv.clients.count() as i64),
            ),
            (
                Reply::bulk_static("accepted"),
                Reply::Int(f.accepted.load(std::sync::atomic::Ordering::Relaxed) as i64),
            ),
        ])
    } else if is(sub, "PANIC") && rest.is_empty() {
        // Test hook for the connection's Drop-guard cleanup (server/conn.rs `Cleanup`):
        // the only panic a client can cause on purpose, and only in test mode.
        panic!("RESPITE PANIC: test hook");
    } else if is(sub, "HELP") && rest.is_empty() {
        super::args::help("RESPITE", HELP)
    } else {
        errors::unknown_subcommand("respite", sub)
    }
}

fn ms(arg: &[u8]) -> Result<u64, Reply> {
    match crate::num::parse_i64(arg) {
        Some(v) if v >= 0 => Ok(v as u64),
        _ => Err(errors::err(
            "ERR milliseconds must be a non-negative integer",
        )),
    }
}

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(r) => return r,
        }
    };
}

fn clock(cx: &mut Cx, a: &[Bytes]) -> Reply {
    let c = &cx.srv.clock;
    match a {
        [op, n] if is(op, "ADVANCE") => {
            let n = tri!(ms(n));
            c.set_manual(true);
            c.advance_ms(n);
        }
        [op, n] if is(op, "SET") => {
            let n = tri!(ms(n));
            c.set_manual(true);
            c.set_ms(n);
        }
        [op] if is(op, "REAL") => {
            c.set_manual(false);
            return Reply::ok();
        }
        [op] if is(op, "GET") => return Reply::Int(c.now_ms() as i64),
        _ => return errors::syntax(),
    }
    sweep_soon(cx);
    Reply::ok()
}

/// Removes the keys the clock change expired (their notifications, blocked stream
/// readers). Not inline: a handler holds the keyspace gate, which the sweep takes itself.
fn sweep_soon(cx: &Cx) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let srv = cx.srv.clone();
    rt.spawn(async move {
        let (_, ready) = srv.ks.sweep_ready(srv.clock.now_ms(), usize::MAX);
        if !ready.is_empty() {
            super::blocking::serve_ready(&srv, ready);
        }
    });
}

fn seed(cx: &mut Cx, a: &[Bytes]) -> Reply {
    let [n] = a else {
        return errors::syntax();
    };
    let Some(n) = std::str::from_utf8(n)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        return errors::err("ERR seed must be an unsigned 64-bit integer");
    };
    crate::script::reseed(cx.srv, n);
    Reply::ok()
}

fn fault(cx: &mut Cx, a: &[Bytes]) -> Reply {
    let f = &cx.srv.faults;
    match a {
        [op, n, opts @ ..] if is(op, "FAIL") => {
            let n = tri!(ms(n).map_err(|_| errors::err(errors::NOT_INT)));
            let (mut cmd, mut key, mut err) = (None, None, None);
            for pair in opts.chunks(2) {
                let [k, v] = pair else {
                    return errors::syntax();
                };
                let v = String::from_utf8_lossy(v).into_owned();
                if is(k, "CMD") {
                    cmd = Some(v);
                } else if is(k, "KEY") {
                    key = Some(v);
                } else if is(k, "ERR") {
                    err = Some(v);
                } else {
                    return errors::syntax();
                }
            }
            f.fail(
                n,
                cmd.as_deref(),
                key.as_deref().map(str::as_bytes),
                err.as_deref().unwrap_or("ERR injected failure"),
            );
        }
        [op, n] if is(op, "DELAY") => f.delay(Duration::from_millis(tri!(ms(n)))),
        [op] if is(op, "DROP") => drop_all(cx.srv),
        [op, n] if is(op, "REFUSE") => f.refuse(Duration::from_millis(tri!(ms(n)))),
        [op] if is(op, "PAUSE") => f.pause(None),
        [op, n] if is(op, "PAUSE") => f.pause(Some(Duration::from_millis(tri!(ms(n))))),
        [op] if is(op, "RESUME") => f.resume(),
        [op] if is(op, "CLEAR") => f.clear(),
        _ => return errors::syntax(),
    }
    Reply::ok()
}

/// Closes every client connection (the caller's too, after its reply).
pub fn drop_all(srv: &crate::instance::state::Shared) {
    for c in srv.clients.all() {
        c.kill();
    }
}

fn log(cx: &mut Cx, a: &[Bytes]) -> Reply {
    let l = &cx.srv.cmdlog;
    match a {
        [op, n @ ..] if is(op, "GET") && n.len() <= 1 => {
            let n = match n.first() {
                Some(n) => Some(tri!(ms(n).map_err(|_| errors::err(errors::NOT_INT))) as usize),
                None => None,
            };
            Reply::Array(
                l.entries(n)
                    .into_iter()
                    .map(|e| {
                        Reply::Array(vec![
                            Reply::Int(e.conn as i64),
                            Reply::Array(e.args.into_iter().map(Reply::bulk).collect()),
                        ])
                    })
                    .collect(),
            )
        }
        [op] if is(op, "RESET") => {
            l.reset();
            Reply::ok()
        }
        [op] if is(op, "COUNT") => Reply::Int(l.total() as i64),
        [op, name] if is(op, "COUNT") => Reply::Int(l.count(&String::from_utf8_lossy(name)) as i64),
        _ => errors::syntax(),
    }
}

#[cfg(test)]
mod tests {
    use crate::cmd::testing::Client;
    use crate::protocol::Reply;

    #[test]
    fn refused_without_the_flag() {
        let mut c = Client::new();
        assert_eq!(c.line("RESPITE CLOCK GET"), Reply::error(super::DISABLED));
        assert_eq!(c.line("respite"), Reply::error(super::DISABLED));
    }

    fn enabled() -> Client {
        let mut cfg = crate::config::Config::default();
        cfg.params
            .push(("enable-test-commands".into(), "yes".into()));
        let srv = crate::cmd::new_shared(cfg, crate::clock::Clock::system());
        Client::on(std::sync::Arc::new(srv))
    }

    #[test]
    fn clock_and_faults_and_log() {
        let mut c = enabled();
        assert_eq!(c.line("RESPITE CLOCK SET 1000"), Reply::ok());
        assert_eq!(c.line("RESPITE CLOCK ADVANCE 500"), Reply::ok());
        assert_eq!(c.line("RESPITE CLOCK GET"), Reply::Int(1500));
        assert!(c.line("RESPITE CLOCK ADVANCE -1").is_error());
        assert_eq!(
            c.line("RESPITE FAULT FAIL 2 CMD get KEY a* ERR nope"),
            Reply::ok()
        );
        assert_eq!(c.srv.faults.rules().len(), 1);
        assert_eq!(c.srv.faults.rules()[0].err, "ERR nope");
        assert!(c.line("RESPITE FAULT FAIL 2 CMD").is_error());
        assert_eq!(c.line("RESPITE FAULT CLEAR"), Reply::ok());
        assert!(c.srv.faults.rules().is_empty());
        assert_eq!(c.line("RESPITE SEED 42"), Reply::ok());
        assert!(c.srv.seeded.load(std::sync::atomic::Ordering::Relaxed));
        assert!(c.line("RESPITE NOPE").is_error());
        // The log is fed by connections, not by dispatch.
        assert_eq!(c.line("RESPITE LOG COUNT"), Reply::Int(0));
    }
}
