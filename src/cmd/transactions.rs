//! Transactions: MULTI / EXEC / DISCARD / WATCH / UNWATCH with Redis's EXECABORT rules.
//! EXEC runs the queue under exclusive access, so other clients see all of it or none.

use super::errors;
use super::{registry, CommandSpec, Cx, KeySpec, Lock};
use crate::engine::{shard_of, Access};
use crate::instance::session::{Multi, Session};
use crate::protocol::Reply;
use std::sync::atomic::Ordering;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "multi",
        arity: 1,
        flags: &["noscript", "loading", "stale", "fast", "allow_busy"],
        keys: KeySpec::None,
        acl: &["fast", "transaction"],
        group: "transactions",
        since: "1.2.0",
        summary: "Mark the start of a transaction block",
        complexity: "O(1)",
        handler: multi,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "exec",
        arity: 1,
        flags: &["noscript", "loading", "stale", "skip_slowlog"],
        keys: KeySpec::None,
        acl: &["slow", "transaction"],
        group: "transactions",
        since: "1.2.0",
        summary: "Execute all commands issued after MULTI",
        complexity: "Depends on commands in the transaction",
        handler: exec,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "discard",
        arity: 1,
        flags: &["noscript", "loading", "stale", "fast", "allow_busy"],
        keys: KeySpec::None,
        acl: &["fast", "transaction"],
        group: "transactions",
        since: "2.0.0",
        summary: "Discard all commands issued after MULTI",
        complexity: "O(N), when N is the number of queued commands",
        handler: discard,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "watch",
        arity: -2,
        flags: &["noscript", "loading", "stale", "fast", "allow_busy"],
        keys: KeySpec::Range(1, -1, 1),
        acl: &["fast", "transaction"],
        group: "transactions",
        since: "2.2.0",
        summary: "Watch the given keys to determine execution of the MULTI/EXEC block",
        complexity: "O(1) for every key.",
        handler: watch,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "unwatch",
        arity: 1,
        flags: &["noscript", "loading", "stale", "fast", "allow_busy"],
        keys: KeySpec::None,
        acl: &["fast", "transaction"],
        group: "transactions",
        since: "2.2.0",
        summary: "Forget about all watched keys",
        complexity: "O(1)",
        handler: unwatch,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
];

/// Commands that act immediately even inside MULTI.
pub fn runs_inside_multi(spec: &CommandSpec) -> bool {
    matches!(
        spec.name,
        "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
    )
}

/// A command rejected while queueing makes the transaction fail at EXEC.
pub fn flag_abort(sess: &mut Session) {
    if let Some(m) = sess.multi.as_mut() {
        m.aborted = true;
    }
}

fn multi(cx: &mut Cx) -> Reply {
    if cx.sess.multi.is_some() {
        return errors::err("ERR MULTI calls can not be nested");
    }
    cx.sess.multi = Some(Multi {
        queue: Vec::new(),
        aborted: false,
    });
    cx.sess.handle.info.lock().multi = 0;
    Reply::OK
}

/// Forgets every watched key of a session.
pub fn unwatch_all(cx: &mut Cx) {
    forget_watches(cx.sess, cx.ks);
}

/// Forgets every watched key of a session, given a view that can reach their shards.
pub fn forget_watches(sess: &mut Session, ks: &mut Access) {
    let flag = sess.watch_dirty.clone();
    for (db, key, _) in std::mem::take(&mut sess.watched) {
        ks.unwatch_in(db, &key, &flag);
    }
    sess.watch_dirty.store(false, Ordering::Release);
    sess.handle.info.lock().watch = 0;
    sess.handle.mem.watched.store(0, Ordering::Relaxed);
}

/// True if a watched key was modified, or has expired since it was watched.
fn watch_broken(cx: &mut Cx) -> bool {
    if cx.sess.watch_dirty.load(Ordering::Acquire) {
        return true;
    }
    let now = cx.now();
    for (db, key, at_watch) in cx.sess.watched.clone() {
        // Redis 7: a key that was live at WATCH and is logically expired now aborts EXEC.
        if !at_watch && cx.ks.shard_at(db, shard_of(&key)).is_expired(&key, now) {
            return true;
        }
    }
    false
}

fn exec(cx: &mut Cx) -> Reply {
    let Some(m) = cx.sess.multi.take() else {
        return errors::err("ERR EXEC without MULTI");
    };
    cx.sess.handle.info.lock().multi = -1;
    if m.aborted {
        unwatch_all(cx);
        return errors::err(errors::EXECABORT);
    }
    if watch_broken(cx) {
        unwatch_all(cx);
        return Reply::NilArray;
    }
    unwatch_all(cx);
    let reg = registry();
    let mut replies = Vec::with_capacity(m.queue.len());
    let mut sizes = super::observe::ExecReplySizes::new(cx.srv, m.queue.len());
    cx.sess.in_exec = true;
    for args in m.queue {
        let (r, spec) = match reg.resolve(&args) {
            Ok((id, spec)) => match super::acl::exec_gate(cx.srv, cx.sess, id, spec, &args) {
                Ok(()) => (
                    super::execute(cx.srv, cx.sess, cx.ks, id, spec, &args),
                    Some(spec),
                ),
                Err(e) => (e, Some(spec)),
            },
            Err(e) => (e, None),
        };
        if let Some(sizes) = &mut sizes {
            sizes.add(cx.srv, cx.sess, spec, &args, &r);
        }
        replies.push(r);
    }
    cx.sess.in_exec = false;
    Reply::Array(replies)
}

fn discard(cx: &mut Cx) -> Reply {
    if cx.sess.multi.take().is_none() {
        return errors::err("ERR DISCARD without MULTI");
    }
    cx.sess.handle.info.lock().multi = -1;
    unwatch_all(cx);
    Reply::OK
}

fn watch(cx: &mut Cx) -> Reply {
    if cx.sess.multi.is_some() {
        return errors::err("ERR WATCH inside MULTI is not allowed");
    }
    let db = cx.sess.db;
    let flag = cx.sess.watch_dirty.clone();
    for key in &cx.args[1..] {
        if cx.sess.watched.iter().any(|(d, k, _)| *d == db && k == key) {
            continue;
        }
        // Reclaim an already-expired key before registering, so its later removal by the
        // sweep cannot look like a modification (Redis ignores keys expired at WATCH time).
        let now = cx.now();
        let expired = cx.ks.shard_at(db, shard_of(key)).is_expired(key, now);
        cx.ks.peek(key);
        cx.ks.watch(key, flag.clone());
        cx.sess
            .watched
            .push((db, bytes::Bytes::copy_from_slice(key), expired));
        let entry = std::mem::size_of::<(usize, bytes::Bytes, bool)>() + key.len();
        cx.sess
            .handle
            .mem
            .watched
            .fetch_add(entry, Ordering::Relaxed);
    }
    cx.sess.handle.info.lock().watch = cx.sess.watched.len();
    Reply::OK
}

fn unwatch(cx: &mut Cx) -> Reply {
    unwatch_all(cx);
    Reply::OK
}
