//! MONITOR, and where commands meet the monitors (Redis's `call()` feed and the explicit
//! feeds of EVAL, EVALSHA and FCALL). The fan-out itself is `instance/monitor.rs`.
//!
//! What a monitor sees, as Redis 7.2 shows it: each command after it ran (the rejected ones
//! — unknown, wrong arity, NOAUTH, OOM… — never ran and are not shown), with the db it
//! left selected; not the `admin` commands nor the `skip_monitor` ones (the script
//! runners), except that a script runner is shown before its script runs, and its script's
//! `redis.call`s are shown as `[db lua]`. In a transaction, MULTI, then each queued
//! command as EXEC runs it, then EXEC (queueing shows nothing; an aborted EXEC shows only
//! itself, refused before it ran too). A blocked command is shown once, when it blocks,
//! not again when it is served.

use super::{CommandSpec, Cx, KeySpec};
use crate::instance::monitor::Origin;
use crate::instance::session::Session;
use crate::instance::state::Shared;
use crate::protocol::Reply;
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "monitor",
    arity: 1,
    flags: &["admin", "noscript", "loading", "stale"],
    keys: KeySpec::None,
    acl: &["admin", "slow", "dangerous"],
    group: "server",
    since: "1.0.0",
    summary: "Listens for all requests received by the server in real-time.",
    complexity: "",
    handler: monitor,
    ..CommandSpec::DEFAULT
}];

fn monitor(cx: &mut Cx) -> Reply {
    // Inside EXEC (Redis's DENY_BLOCKING clients): a monitor cannot answer per command.
    if cx.sess.in_exec {
        return Reply::error("ERR MONITOR isn't allowed for DENY BLOCKING client");
    }
    // Already a monitor: ignored without a reply, as Redis does.
    if cx.sess.monitor.is_some() {
        return Reply::NoReply;
    }
    let m = cx.srv.monitors.add(cx.sess.handle.clone());
    cx.srv.monitors.refresh_limits(&cx.srv.config);
    cx.sess.monitor = Some(m);
    Reply::OK
}

/// Leaves monitor mode (RESET; the connection's end).
pub fn leave(srv: &Shared, sess: &mut Session) {
    if let Some(m) = sess.monitor.take() {
        srv.monitors.remove(&m);
    }
}

/// Redis `processCommand`: a monitor is a replica to Redis, and a replica may not touch
/// the keyspace (reads, writes and `may_replicate` commands are refused).
#[inline]
pub fn refuses(sess: &Session, spec: &CommandSpec) -> bool {
    sess.monitor.is_some() && touches_keyspace(spec)
}

// Out of line, like the feeds below: the per-command path stays as small as it was.
#[cold]
#[inline(never)]
fn touches_keyspace(spec: &CommandSpec) -> bool {
    spec.is_write() || spec.has_flag("readonly") || spec.has_flag("may_replicate")
}

pub const REFUSED: &str = "Replica can't interact with the keyspace";

/// EVAL, EVALSHA(_RO), FCALL(_RO): the `skip_monitor` commands, which Redis feeds from
/// their own handler, before the script's commands.
fn runs_script(spec: &CommandSpec) -> bool {
    spec.has_flag("skip_monitor")
}

fn origin(sess: &Session) -> Origin {
    if sess.monitor_lua > 0 {
        Origin::Lua
    } else {
        Origin::Client(sess.handle.addr)
    }
}

/// Before a command runs, while some client monitors: a script runner is shown now, and
/// what its script calls is marked as the script's.
#[cold]
#[inline(never)]
pub fn before(srv: &Shared, sess: &mut Session, spec: &CommandSpec, args: &[Bytes]) {
    if sess.internal || !runs_script(spec) {
        return;
    }
    srv.monitors.feed(sess.db, origin(sess), args);
    sess.monitor_lua += 1;
}

/// A refused EXEC (Redis's `execCommandAbort`), while some client monitors.
#[cold]
#[inline(never)]
pub fn exec_aborted(srv: &Shared, sess: &Session, args: &[Bytes]) {
    if !sess.internal {
        srv.monitors.feed(sess.db, origin(sess), args);
    }
}

/// After a command ran, while some client monitors (the same call's [`before`] ran).
#[cold]
#[inline(never)]
pub fn after(srv: &Shared, sess: &mut Session, spec: &CommandSpec, args: &[Bytes]) {
    if sess.internal {
        return;
    }
    if runs_script(spec) {
        sess.monitor_lua = sess.monitor_lua.saturating_sub(1);
        return;
    }
    if spec.has_flag("admin") {
        return;
    }
    // A blocked command served by another client's write runs again as its client (still
    // flagged blocked): Redis's `CMD_CALL_REPROCESSING`, not shown a second time.
    if sess.monitor_lua == 0 && sess.handle.info.lock().blocked {
        return;
    }
    srv.monitors.feed(sess.db, origin(sess), args);
}
