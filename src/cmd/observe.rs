//! What `execute` records after each call, as Redis's `call()` does: the command's latency
//! histogram, the latency monitor's `command` / `fast-command` events and the slow log;
//! Valkey 8.1's COMMANDLOG `large-request` entries; and what the connection records once
//! a command line's reply is written: COMMANDLOG's `large-reply` entries.
//!
//! The common case costs a bucket index and a few compares and loads: histogram
//! samples of one command accumulate in the session as a run of equal buckets (most fast
//! calls land in the same one) and reach the shared histogram when the run changes or the
//! session's statistics are flushed; the monitor and the slow log are only touched by
//! calls past their thresholds.

use crate::config_num;
use crate::instance::clients::ClientHandle;
use crate::instance::latency::index_for_usec;
use crate::instance::session::{PendingStats, Session};
use crate::instance::state::Shared;
use bytes::Bytes;
use std::sync::Arc;

use super::CommandSpec;

/// After a call of command `id` that ran `usec` µs (not for a call that blocked: Redis
/// records a blocked command when it is served, with the time it then ran).
#[inline]
pub(super) fn after_call(
    srv: &Arc<Shared>,
    sess: &mut Session,
    exclusive: bool,
    id: usize,
    spec: &'static CommandSpec,
    args: &[Bytes],
    usec: u64,
) {
    sess.last_run = id;
    let idx = index_for_usec(usec);
    let p = &mut sess.pending;
    if p.lat_n != 0 && (p.lat_idx != idx || p.lat_n == u32::MAX) {
        add_run(srv, p);
    }
    p.lat_idx = idx;
    p.lat_n += 1;
    // One branch for both rare cases (`|`, not `||`: both flags are cheap to compute).
    let slow = usec >= srv.observe_floor.get();
    let large = sess.request.0 >= sess.request.1;
    if slow | large {
        if slow {
            slow_call(srv, sess, exclusive, id, spec, args, usec);
        }
        if large {
            large_request(srv, sess, spec, args);
        }
    }
}

/// Adds the session's run of equal histogram samples to its command's histogram (when
/// `latency-tracking` is on) and empties it.
#[inline]
pub(super) fn add_run(srv: &Shared, p: &mut PendingStats) {
    if config_num!(srv.config, "latency-tracking") != 0 {
        srv.histograms.add(p.id, p.lat_idx, u64::from(p.lat_n));
    }
    p.lat_n = 0;
}

#[inline(never)]
#[cold]
fn slow_call(
    srv: &Arc<Shared>,
    sess: &Session,
    exclusive: bool,
    id: usize,
    spec: &'static CommandSpec,
    args: &[Bytes],
    usec: u64,
) {
    let slower = config_num!(srv.config, "slowlog-log-slower-than");
    let now = (srv.clock.now_ms() / 1000) as i64;
    let us = i64::try_from(usec).unwrap_or(i64::MAX);
    monitor_latency(srv, id, usec, now);
    if slower >= 0 && us >= slower {
        // A script's commands are logged as run by Redis's Lua client, which has no
        // address or name. Scripts run their commands with `in_exec` set while holding
        // the whole keyspace, so a script running now can only be this command's caller.
        let in_script = sess.in_exec
            && exclusive
            && crate::script::engine::scripts(srv)
                .running_for_ms()
                .is_some();
        let (peer, name) = if in_script {
            ("?:0".to_string(), Bytes::new())
        } else {
            let name = sess.handle.info.lock().name.clone().unwrap_or_default();
            (sess.handle.addr.to_string(), name)
        };
        slowlog_push(srv, spec, args, usec, now, peer, name);
    }
}

/// The latency monitor's `command` / `fast-command` sample of one run, past
/// `latency-monitor-threshold` ms.
fn monitor_latency(srv: &Shared, id: usize, usec: u64, now: i64) {
    let monitor = config_num!(srv.config, "latency-monitor-threshold");
    if monitor > 0 && i64::try_from(usec / 1000).unwrap_or(i64::MAX) >= monitor {
        let event = if super::registry().batched[id] {
            "fast-command"
        } else {
            "command"
        };
        srv.latency.add(event, now, usec / 1000);
    }
}

/// A run of a blocking command that blocked, or the re-run that served it: Redis's
/// `call()` gives the latency monitor both (the histogram and the slow log wait for
/// [`after_unblock`]).
#[inline]
pub(super) fn blocked_run(srv: &Shared, id: usize, usec: u64) {
    if usec >= srv.observe_floor.get() {
        monitor_latency(srv, id, usec, (srv.clock.now_ms() / 1000) as i64);
    }
}

/// A slow log entry, unless the command is `skip_slowlog` (the threshold was checked).
fn slowlog_push(
    srv: &Shared,
    spec: &CommandSpec,
    args: &[Bytes],
    usec: u64,
    now: i64,
    peer: String,
    name: Bytes,
) {
    if spec.has_flag("skip_slowlog") {
        return;
    }
    let max_len = config_num!(srv.config, "slowlog-max-len").max(0) as usize;
    srv.slowlog.push(args, usec, now, peer, name, max_len);
}

/// The end of a blocked command (served, timed out or CLIENT UNBLOCK), as Redis 7.2's
/// `updateStatsOnUnblock`: one latency histogram sample and, past the threshold, a slow
/// log entry, both with the time the command ran (its first attempt plus the re-run that
/// served it), never the time it waited. The latency monitor saw each run ([`blocked_run`]).
#[cold]
#[inline(never)]
pub(super) fn after_unblock(
    srv: &Shared,
    handle: &ClientHandle,
    id: usize,
    spec: &CommandSpec,
    args: &[Bytes],
    usec: u64,
) {
    if config_num!(srv.config, "latency-tracking") != 0 {
        srv.histograms.add(id, index_for_usec(usec), 1);
    }
    let slower = config_num!(srv.config, "slowlog-log-slower-than");
    if slower >= 0 && i64::try_from(usec).unwrap_or(i64::MAX) >= slower {
        let now = (srv.clock.now_ms() / 1000) as i64;
        let name = handle.info.lock().name.clone().unwrap_or_default();
        slowlog_push(srv, spec, args, usec, now, handle.addr.to_string(), name);
    }
}

/// The `large-request` and `large-reply` thresholds in bytes (`u64::MAX` when off: a
/// negative threshold or a zero max length), read once per read batch by the connection.
pub fn commandlog_limits(srv: &Shared) -> (u64, u64) {
    let limit = |threshold: i64, max_len: i64| {
        if threshold < 0 || max_len == 0 {
            u64::MAX
        } else {
            threshold as u64
        }
    };
    (
        limit(
            config_num!(srv.config, "commandlog-request-larger-than"),
            config_num!(srv.config, "commandlog-large-request-max-len"),
        ),
        limit(
            config_num!(srv.config, "commandlog-reply-larger-than"),
            config_num!(srv.config, "commandlog-large-reply-max-len"),
        ),
    )
}

/// After a command line whose reply (the bytes written for it) reached COMMANDLOG's
/// `large-reply` threshold: an entry, when the command ran (not queued by MULTI, not
/// refused, not blocked) and is not `skip_slowlog` (Valkey's `skip_commandlog`, which
/// EXEC has). The commands EXEC runs are logged by [`ExecReplySizes`]; a script's
/// `redis.call`s never are (their replies go to the script, not the client).
#[cold]
#[inline(never)]
pub fn commandlog_reply(srv: &Arc<Shared>, sess: &Session, args: &[Bytes], reply: u64) {
    let Some(spec) = super::registry().specs.get(sess.last_run) else {
        return;
    };
    if spec.has_flag("skip_slowlog") || args.is_empty() {
        return;
    }
    let max_len = config_num!(srv.config, "commandlog-large-reply-max-len").max(0);
    push(srv, &srv.large_replies, sess, args, reply, max_len as usize);
}

/// COMMANDLOG `large-reply` for the commands EXEC runs: Valkey logs each one whose
/// reply brings EXEC's reply so far (its array header included) to the threshold, with
/// that running size. Only kept while the threshold is on; sizes are the encoded replies.
pub(super) struct ExecReplySizes {
    limit: u64,
    total: u64,
    scratch: bytes::BytesMut,
}

impl ExecReplySizes {
    pub(super) fn new(srv: &Shared, n: usize) -> Option<ExecReplySizes> {
        let limit = commandlog_limits(srv).1;
        (limit != u64::MAX).then(|| ExecReplySizes {
            limit,
            // `*<n>\r\n`
            total: itoa::Buffer::new().format(n).len() as u64 + 3,
            scratch: bytes::BytesMut::new(),
        })
    }

    /// After one queued command (`spec` None: it did not resolve, and is not logged).
    pub(super) fn add(
        &mut self,
        srv: &Arc<Shared>,
        sess: &Session,
        spec: Option<&CommandSpec>,
        args: &[Bytes],
        reply: &crate::protocol::Reply,
    ) {
        self.scratch.clear();
        crate::protocol::write_reply(&mut self.scratch, reply, sess.resp3);
        self.total += self.scratch.len() as u64;
        if self.total >= self.limit && spec.is_some_and(|s| !s.has_flag("skip_slowlog")) {
            let max_len = config_num!(srv.config, "commandlog-large-reply-max-len").max(0);
            push(
                srv,
                &srv.large_replies,
                sess,
                args,
                self.total,
                max_len as usize,
            );
        }
    }
}

/// A `large-request` entry for a command that ran as part of a command line at least that
/// large (Valkey logs every command the line runs, EXEC's and a script's too, with the
/// line's size, as the client that sent it).
#[cold]
#[inline(never)]
fn large_request(srv: &Arc<Shared>, sess: &Session, spec: &CommandSpec, args: &[Bytes]) {
    if spec.has_flag("skip_slowlog") {
        return;
    }
    let max_len = config_num!(srv.config, "commandlog-large-request-max-len").max(0);
    push(
        srv,
        &srv.large_requests,
        sess,
        args,
        sess.request.0,
        max_len as usize,
    );
}

fn push(
    srv: &Shared,
    log: &crate::instance::slowlog::SlowLog,
    sess: &Session,
    args: &[Bytes],
    value: u64,
    max_len: usize,
) {
    let now = (srv.clock.now_ms() / 1000) as i64;
    let name = sess.handle.info.lock().name.clone().unwrap_or_default();
    log.push(
        args,
        value,
        now,
        sess.handle.addr.to_string(),
        name,
        max_len,
    );
}
