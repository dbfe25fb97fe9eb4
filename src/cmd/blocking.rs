//! Blocking commands' plumbing on the command side (DESIGN.md §4): how a handler asks to
//! block, how dispatch registers it, and how ready keys are served in FIFO order.
//!
//! Handler contract (BLPOP, BZPOPMIN, XREAD BLOCK…):
//! 1. Try the non-blocking operation; if it produced data, return it.
//! 2. Else, if `cx.can_block()`, call `cx.block(keys, timeout, timeout_reply)` and return
//!    `Reply::NoReply`; otherwise (inside MULTI/EXEC) return the timeout reply at once.
//!
//! Writers call `cx.ks.signal_ready(key)` after adding elements. After the writing command
//! has released its locks, [`serve_ready`] re-runs each waiter's command, oldest first, as
//! that client; a waiter whose command blocks again (nothing left) stays queued. As in
//! Redis, every waiter of a ready key is visited: list/zset waiters only while the key
//! holds their type, XREADGROUP readers whatever the key became (deleted or replaced,
//! their re-run answers the error).

use super::{registry, Cx, Lock};
use crate::instance::blocking::Waiter;
use crate::instance::session::{BlockRequest, Blocked, Session};
use crate::instance::state::Shared;
use crate::protocol::Reply;
use bytes::Bytes;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

impl Cx<'_, '_> {
    /// Whether this command may block (false inside MULTI/EXEC, where blocking commands
    /// act as their non-blocking forms).
    pub fn can_block(&self) -> bool {
        !self.sess.in_exec
    }

    /// Whether this command runs inside a script (Redis's `CLIENT_SCRIPT`): scripts run
    /// their commands with `in_exec` set while holding the whole keyspace, so a script
    /// running on this server right now can only be our caller.
    pub fn in_script(&self) -> bool {
        self.sess.in_exec
            && self.ks.is_exclusive()
            && crate::script::engine::scripts(self.srv)
                .running_for_ms()
                .is_some()
    }

    /// Asks to block on `keys` until one is ready or `timeout` passes (None = forever),
    /// replying `timeout_reply` then. The handler returns `Reply::NoReply` after this.
    pub fn block(&mut self, keys: Vec<Bytes>, timeout: Option<Duration>, timeout_reply: Reply) {
        self.sess.block_request = Some(BlockRequest {
            keys,
            timeout,
            timeout_reply,
            args: None,
            exec_us: 0,
        });
    }

    /// As [`Cx::block`], re-running `args` instead of the original command when served.
    pub fn block_with_args(
        &mut self,
        keys: Vec<Bytes>,
        timeout: Option<Duration>,
        timeout_reply: Reply,
        args: Vec<Bytes>,
    ) {
        self.sess.block_request = Some(BlockRequest {
            keys,
            timeout,
            timeout_reply,
            args: Some(args),
            exec_us: 0,
        });
    }
}

/// Registers the session's pending block request as a waiter (called by dispatch while the
/// command's locks are still held, so no push can slip in between the failed pop and this).
pub fn register(srv: &Arc<Shared>, sess: &mut Session, args: &[Bytes]) {
    let Some(req) = sess.block_request.take() else {
        return;
    };
    let run = req.args.unwrap_or_else(|| args.to_vec());
    let keys: Vec<Bytes> = req.keys.iter().map(|k| Bytes::copy_from_slice(k)).collect();
    let (waiter, rx) = srv.blocking.block(
        sess.db,
        keys,
        run,
        sess.handle.clone(),
        sess.resp3,
        req.timeout_reply.clone(),
    );
    waiter.exec_us.store(req.exec_us, Ordering::Relaxed);
    srv.ks.blocked_clients.fetch_add(1, Ordering::Relaxed);
    sess.handle.info.lock().blocked = true;
    sess.blocked = Some(Blocked {
        waiter,
        rx,
        deadline: req.timeout.map(|t| tokio::time::Instant::now() + t),
        timeout_reply: req.timeout_reply,
    });
}

/// Forgets a waiter that was served, timed out or whose client left.
pub fn unregister(srv: &Shared, blocked: &Blocked) {
    srv.blocking.remove(&blocked.waiter);
    srv.ks.blocked_clients.fetch_sub(1, Ordering::Relaxed);
    blocked.waiter.handle.info.lock().blocked = false;
}

/// Whether `key` holds the type a blocked command of `group` waits for.
fn holds_awaited_type(srv: &Shared, db: usize, key: &[u8], group: &str) -> bool {
    let want = match group {
        "list" => "list",
        "sorted-set" => "zset",
        "stream" => "stream",
        _ => return true,
    };
    let now = srv.clock.now_ms();
    let mut access = srv.ks.shared(db, &[key], now);
    access.db = db;
    access
        .peek(key)
        .is_some_and(|e| e.value.type_name() == want)
}

/// Serves clients blocked on the ready keys, in FIFO order per key. Serving may make more
/// keys ready (BLMOVE pushes to its destination), which are served in turn.
pub fn serve_ready(srv: &Arc<Shared>, mut ready: Vec<(usize, Bytes)>) {
    let reg = registry();
    while let Some((db, key)) = ready.pop() {
        for w in srv.blocking.waiters(db, &key) {
            if !w.claim() {
                continue;
            }
            let Ok((id, spec)) = reg.resolve(&w.args) else {
                w.unclaim();
                continue;
            };
            // Redis 7.2 (`handleClientsBlockedOnKey`) re-runs a waiter only if the key
            // holds the type it waits for: a key deleted or replaced by a string leaves
            // BLPOP and XREAD blocked, not WRONGTYPE. XREADGROUP waits "unblock on no
            // key": it is re-run whatever the key became, and the re-run answers NOGROUP
            // (key gone) or WRONGTYPE (key replaced).
            if !w.unblock_on_nokey() && !holds_awaited_type(srv, db, &key, spec.group) {
                w.unclaim();
                continue;
            }
            // Run as the blocked client, in its db and protocol, as its user: Redis
            // re-checks the ACL of a command it reprocesses (rules may have changed).
            let user = super::acl::user_of(srv, &w.handle);
            let mut sess = Session::with_user(w.handle.clone(), true, user);
            if let Err(e) = super::acl::blocked_gate(srv, &sess, id, spec, &w.args) {
                srv.cmdstats[id].rejected.fetch_add(1, Ordering::Relaxed);
                if let Reply::Error(msg) = &e {
                    Shared::bump_errors(srv);
                    srv.stats.record_error(msg);
                }
                finish(srv, &w, e);
                continue;
            }
            sess.db = w.db;
            sess.resp3 = w.resp3;
            sess.serving_blocked = true;
            let now = srv.clock.now_ms();
            let mut access = match spec.lock {
                Lock::All => srv.ks.exclusive(w.db, now),
                Lock::Keys => {
                    let idx = spec.key_indices(&w.args);
                    let keys: Vec<&[u8]> = idx.iter().map(|&i| &w.args[i][..]).collect();
                    srv.ks.shared(w.db, &keys, now)
                }
            };
            // The re-run is the blocked client's command (client-side caching's NOLOOP).
            let prev = crate::instance::tracking::enter(w.handle.id);
            let reply = super::execute(srv, &mut sess, &mut access, id, spec, &w.args);
            crate::instance::tracking::leave(prev);
            ready.extend(access.take_ready());
            drop(access);
            // The call was counted when it blocked; as in Redis, a blocked command counts
            // once: its re-run adds time and a failure, never a call, and an error it
            // answers counts in the error stats like any reply.
            let run = std::mem::take(&mut sess.pending);
            if sess.block_request.is_none() {
                let ran = w.exec_us.load(Ordering::Relaxed) + run.usec;
                super::observe::after_unblock(srv, &w.handle, id, spec, &w.args, ran);
                let st = &srv.cmdstats[id];
                st.usec.fetch_add(run.usec, Ordering::Relaxed);
                st.failed.fetch_add(run.failed, Ordering::Relaxed);
                if let Reply::Error(msg) = &reply {
                    Shared::bump_errors(srv);
                    srv.stats.record_error(msg);
                }
            }
            if sess.block_request.take().is_some() {
                // Nothing for this one; like Redis, still visit every later waiter (stream
                // readers wait for different IDs or groups, and an XREADGROUP reader must
                // learn its stream is gone).
                w.unclaim();
                continue;
            }
            finish(srv, &w, reply);
        }
    }
}

/// CLIENT UNBLOCK: answers a blocked client as its timeout would, or with Redis's
/// UNBLOCKED error (then counted as a failed call and an error reply). False if the client
/// is not blocked (or is being served right now).
pub fn unblock_client(srv: &Arc<Shared>, client_id: u64, error: bool) -> bool {
    let Some(w) = srv.blocking.of_client(client_id) else {
        return false;
    };
    if !w.claim() {
        return false;
    }
    timed_out(srv, &w);
    let reply = if error {
        let msg = super::errors::UNBLOCKED_BY_CLIENT;
        if let Ok((id, _)) = registry().resolve(&w.args) {
            srv.cmdstats[id].failed.fetch_add(1, Ordering::Relaxed);
        }
        Shared::bump_errors(srv);
        srv.stats.record_error(msg);
        Reply::error(msg)
    } else {
        w.timeout_reply.clone()
    };
    finish(srv, &w, reply);
    true
}

/// A blocked command that ends unserved (its timeout, CLIENT UNBLOCK): recorded with the
/// time its attempt ran, as Redis's `updateStatsOnUnblock`.
pub fn timed_out(srv: &Shared, w: &Waiter) {
    if let Ok((id, spec)) = registry().resolve(&w.args) {
        let ran = w.exec_us.load(Ordering::Relaxed);
        super::observe::after_unblock(srv, &w.handle, id, spec, &w.args, ran);
    }
}

/// Hands a claimed waiter its reply, removing it from every queue first.
fn finish(srv: &Shared, w: &Arc<Waiter>, reply: Reply) {
    srv.blocking.remove(w);
    srv.ks.blocked_clients.fetch_sub(1, Ordering::Relaxed);
    w.handle.info.lock().blocked = false;
    w.deliver(reply);
}
