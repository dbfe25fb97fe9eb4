//! Command execution: the registry built from each family's table, the per-command context
//! [`Cx`], and dispatch (lookup, arity, auth, MULTI queueing, locking, stats).

pub mod acl;
pub mod args;
pub mod blocking;
/// The error texts live in `instance` (below `script`, which needs some of them); commands
/// keep reaching them as `cmd::errors`.
pub use crate::instance::errors;
#[cfg(test)]
mod notify_tests;
pub mod table;
#[cfg(test)]
pub mod testing;

pub mod admin;
pub mod bitmaps;
pub mod client;
pub mod cluster;
pub mod command;
pub mod connection;
pub mod dump;
pub mod functions;
pub mod geo;
pub mod hashes;
pub mod hll;
pub mod keys;
pub mod lists;
pub mod migrate;
mod observe;
pub use observe::{commandlog_limits, commandlog_reply};
pub mod monitor;
pub mod pubsub;
pub mod refusals;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod sort;
pub mod streams;
pub mod strings;
pub mod strtod;
pub mod transactions;
pub mod zsets;

use crate::engine::Access;
use crate::instance::session::{ReplyMode, Session};
use crate::instance::state::Shared;
use crate::protocol::Reply;
use crate::script::ScriptState;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
pub use table::{CommandSpec, KeySpec, Lock};

/// What a handler sees: its arguments, the keyspace view, its session and the server.
pub struct Cx<'a, 'k> {
    pub args: &'a [Bytes],
    pub ks: &'a mut Access<'k>,
    pub sess: &'a mut Session,
    pub srv: &'a Arc<Shared>,
    pub spec: &'static CommandSpec,
}

impl<'a> Cx<'a, '_> {
    pub fn now(&self) -> u64 {
        self.ks.now
    }

    /// Publishes a keyspace event for `key` in the command's current db, if its class is on.
    #[inline]
    pub fn notify(&self, class: u32, event: &str, key: &[u8]) {
        crate::instance::notify::notify(self.srv, class, event, self.ks.db, key);
    }

    /// The enabled event classes read once for the command's current db (None when all
    /// are off), for commands that may emit several events.
    #[inline]
    pub fn events(&self) -> Option<crate::instance::notify::Events<'a>> {
        crate::instance::notify::events(self.srv, self.ks.db)
    }

    /// Reports how many changes this write call made, for Redis's dirty counter (INFO
    /// `rdb_changes_since_last_save`), when it is not the one a call counts by default:
    /// 0 when nothing changed (SETBIT of the same bit), n for BITFIELD's n changed fields.
    pub fn changes(&self, n: u64) {
        let extra = i64::try_from(n).unwrap_or(i64::MAX) - 1;
        if extra != 0 {
            self.srv
                .stats
                .dirty_extra
                .fetch_add(extra, Ordering::Relaxed);
        }
    }
}

/// Every family's top-level commands, in one place.
fn families() -> [&'static [CommandSpec]; 26] {
    [
        acl::COMMANDS,
        strings::COMMANDS,
        keys::COMMANDS,
        connection::COMMANDS,
        server::COMMANDS,
        command::COMMANDS,
        transactions::COMMANDS,
        client::COMMANDS,
        lists::COMMANDS,
        hashes::COMMANDS,
        hashes::expire::COMMANDS,
        sets::COMMANDS,
        zsets::COMMANDS,
        scripting::COMMANDS,
        streams::COMMANDS,
        pubsub::COMMANDS,
        admin::COMMANDS,
        dump::COMMANDS,
        hll::COMMANDS,
        bitmaps::COMMANDS,
        functions::COMMANDS,
        geo::COMMANDS,
        sort::COMMANDS,
        cluster::COMMANDS,
        migrate::COMMANDS,
        monitor::COMMANDS,
    ]
}

pub struct Registry {
    /// Top-level commands and subcommands, each with a stable id (index).
    pub specs: Vec<&'static CommandSpec>,
    by_name: HashMap<Vec<u8>, usize, ahash::RandomState>,
    /// Top-level command ids by (name length, first letter): a command line's name is
    /// found by comparing it with the one or two names of its bucket, without hashing or
    /// copying it (the hashed lookup was ~8% of a pipelined GET's instructions).
    top: Vec<Vec<u16>>,
    /// By id: a `fast` command, whose statistics a session may batch (see `execute`).
    pub batched: Vec<bool>,
}

/// Top-level names are shorter than this (the longest Redis command has 20 letters).
const TOP_NAME_MAX: usize = 32;

/// The bucket of `top` for a name: its length and its first byte without the case bit
/// (ASCII letters of either case share a bucket; the full comparison decides).
fn top_bucket(name: &[u8]) -> Option<usize> {
    match name.first() {
        Some(&c) if name.len() < TOP_NAME_MAX => Some(name.len() * 32 + (c & 31) as usize),
        _ => None,
    }
}

impl Registry {
    pub fn len(&self) -> usize {
        self.specs.len()
    }
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// Case-insensitive lookup of a full name (`get`, `config|get`).
    pub fn lookup(&self, name: &[u8]) -> Option<(usize, &'static CommandSpec)> {
        let mut buf = [0u8; 32];
        let id = if name.len() <= buf.len() {
            let b = &mut buf[..name.len()];
            b.copy_from_slice(name);
            b.make_ascii_lowercase();
            self.by_name.get(&b[..])
        } else {
            self.by_name.get(&name.to_ascii_lowercase())
        }?;
        Some((*id, self.specs[*id]))
    }

    /// Case-insensitive lookup of a top-level command name (never a `container|sub` one).
    #[inline]
    pub fn lookup_top(&self, name: &[u8]) -> Option<(usize, &'static CommandSpec)> {
        let bucket = self.top.get(top_bucket(name)?)?;
        bucket.iter().find_map(|&id| {
            let spec = self.specs[id as usize];
            name.eq_ignore_ascii_case(spec.name.as_bytes())
                .then_some((id as usize, spec))
        })
    }

    /// Top-level commands only.
    pub fn top_level(&self) -> impl Iterator<Item = &'static CommandSpec> + '_ {
        self.specs.iter().copied().filter(|s| !s.name.contains('|'))
    }

    /// Resolves a command line to its spec (subcommand when the command is a container).
    /// Errors are the replies Redis gives for unknown commands/subcommands.
    #[inline]
    pub fn resolve(&self, args: &[Bytes]) -> Result<(usize, &'static CommandSpec), Reply> {
        // `config|get` names a subcommand in COMMAND INFO, never on a command line
        // (Redis issue #10070): only top-level names resolve here.
        match self.lookup_top(&args[0]) {
            Some((id, spec)) if spec.subcommands.is_empty() || args.len() < 2 => Ok((id, spec)),
            Some((_, spec)) => self.resolve_sub(spec, args),
            None => Err(errors::unknown_command(args)),
        }
    }

    /// [`Registry::resolve`] of a container command's subcommand.
    #[inline(never)]
    fn resolve_sub(
        &self,
        spec: &'static CommandSpec,
        args: &[Bytes],
    ) -> Result<(usize, &'static CommandSpec), Reply> {
        let mut full = Vec::with_capacity(spec.name.len() + 1 + args[1].len());
        full.extend_from_slice(spec.name.as_bytes());
        full.push(b'|');
        full.extend_from_slice(&args[1]);
        match self.lookup(&full) {
            Some(found) => Ok(found),
            None => Err(errors::unknown_subcommand(spec.name, &args[1])),
        }
    }
}

/// The key arguments of a command line, per its table entry (none if unknown).
pub fn key_args(args: &[Bytes]) -> Vec<Bytes> {
    match registry().resolve(args) {
        Ok((_, spec)) => spec
            .key_indices(args)
            .into_iter()
            .filter_map(|i| args.get(i).cloned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// A fresh instance whose command statistics cover this command table.
pub fn new_shared(startup: crate::config::Config, clock: crate::clock::Clock) -> Shared {
    let srv = Shared::new(startup, clock, registry().len());
    srv.acl.set_catalog(acl::catalog());
    srv.acl
        .set_pubsub_default(&srv.config.get("acl-pubsub-default").unwrap_or_default());
    refusals::config_changed(&srv);
    srv
}

pub fn registry() -> &'static Registry {
    static REG: OnceLock<Registry> = OnceLock::new();
    REG.get_or_init(|| {
        let mut specs = Vec::new();
        let mut by_name = HashMap::default();
        let mut top = vec![Vec::new(); TOP_NAME_MAX * 32];
        for fam in families() {
            for spec in fam {
                assert!(!spec.name.contains('|'), "top-level name {}", spec.name);
                let bucket = top_bucket(spec.name.as_bytes())
                    .unwrap_or_else(|| panic!("command name {:?} too long", spec.name));
                top[bucket].push(u16::try_from(specs.len()).expect("command ids fit u16"));
                for s in std::iter::once(spec).chain(spec.subcommands.iter()) {
                    let prev = by_name.insert(s.name.as_bytes().to_vec(), specs.len());
                    assert!(prev.is_none(), "duplicate command {}", s.name);
                    specs.push(s);
                }
            }
        }
        let batched = specs.iter().map(|s| s.has_flag("fast")).collect();
        Registry {
            specs,
            by_name,
            top,
            batched,
        }
    })
}

/// Commands allowed before authentication (Redis's `no_auth` flag).
/// What a `resp3_only()` test server answers a command sent before `HELLO 3`.
pub const RESP3_ONLY: &str = "NOPROTO this test server speaks only RESP3: send HELLO 3 first";

fn allowed_unauthenticated(spec: &CommandSpec) -> bool {
    spec.has_flag("no_auth")
}

/// Runs one command line for a session and returns its reply (already filtered by
/// `CLIENT REPLY`). Empty lines are ignored by the caller.
pub fn dispatch(srv: &Arc<Shared>, sess: &mut Session, mut args: Vec<Bytes>) -> Reply {
    dispatch_in(srv, sess, &mut args)
}

/// [`dispatch`] of a command line the caller keeps (a connection reuses one vector for
/// every command): only a MULTI that queues the command takes it, leaving it empty.
pub fn dispatch_in(srv: &Arc<Shared>, sess: &mut Session, args: &mut Vec<Bytes>) -> Reply {
    // Client-side caching: whose writes these are (NOLOOP, BCAST), while anyone tracks.
    let tracking = srv.tracking.active();
    let prev = tracking.then(|| crate::instance::tracking::enter(sess.id));
    let caching = sess.caching;
    let reply = dispatch_inner(srv, sess, args);
    if let Some(prev) = prev {
        crate::instance::tracking::leave(prev);
        srv.tracking.broadcast(srv);
    }
    // CLIENT CACHING lasts for the next command, or the transaction it starts (Redis
    // `resetClient` keeps it after any CLIENT subcommand and inside MULTI).
    if caching && sess.multi.is_none() && !args.first().is_some_and(|a| is_client(a)) {
        sess.caching = false;
    }
    let counted = ERROR_COUNTED.with(|c| c.replace(false));
    if sess.internal {
        sess.pending = Default::default();
    } else if sess.mark.is_none() {
        // Not inside a connection's read batch (tests, internal callers): count now.
        flush_stats(srv, sess);
    }
    if let (Reply::Error(msg), false, false) = (&reply, sess.internal, counted) {
        count_error(srv, msg);
    }
    match sess.reply_mode {
        ReplyMode::On => reply,
        ReplyMode::Off => Reply::NoReply,
        ReplyMode::SkipNext => {
            sess.reply_mode = ReplyMode::Skipping;
            reply
        }
        ReplyMode::Skipping => {
            sess.reply_mode = ReplyMode::On;
            Reply::NoReply
        }
    }
}

fn is_client(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"client")
}

thread_local! {
    /// Set while the reply being returned is an error already counted in the error stats
    /// (a script failing with the error of a command it called: Redis's
    /// `ERR_REPLY_FLAG_NO_STATS_UPDATE`).
    static ERROR_COUNTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Counts an error reply in INFO's `errorstats` and `total_error_replies`.
pub fn count_error(srv: &Shared, msg: &str) {
    Shared::bump_errors(srv);
    srv.stats.record_error(msg);
}

/// Marks the error reply of the command this thread is dispatching as already counted.
pub fn error_already_counted() {
    ERROR_COUNTED.with(|c| c.set(true));
}

fn dispatch_inner(srv: &Arc<Shared>, sess: &mut Session, args: &mut Vec<Bytes>) -> Reply {
    let reg = registry();
    let (id, spec) = match reg.resolve(args) {
        Ok(found) => found,
        Err(e) => {
            transactions::flag_abort(sess);
            return e;
        }
    };
    if !spec.arity_ok(args.len()) {
        let msg = format!("wrong number of arguments for '{}' command", spec.name);
        return reject(srv, sess, args, id, spec, &msg, "ERR ");
    }
    // Redis's protected commands are refused right after the arity check (before auth,
    // BUSY and MULTI queueing), so inside MULTI a refused DEBUG dooms the transaction.
    if spec.name == "debug"
        && !server::debug_allowed(
            srv.config.get("enable-debug-command").as_deref(),
            sess.handle.is_local(),
        )
    {
        return reject(srv, sess, args, id, spec, errors::DEBUG_NOT_ALLOWED, "");
    }
    if !sess.authenticated && !allowed_unauthenticated(spec) && srv.acl.auth_required() {
        return reject(srv, sess, args, id, spec, errors::NOAUTH, "");
    }
    // ACL: one relaxed load while the user may run everything (the default user).
    if !sess.user.unrestricted() {
        if let Err((msg, prefix)) = acl::gate(srv, sess, id, spec, args) {
            return reject(srv, sess, args, id, spec, &msg, prefix);
        }
    }
    // Emulated cluster mode: Redis Cluster's slot rule (`processCommand` asks
    // `getNodeByQuery` right after the ACL check); the node owns every slot, so CROSSSLOT
    // is the only redirection left.
    if srv.cluster_emulated
        && !sess.internal
        && cluster::cross_slot(spec, args, sess.multi.as_ref().map(|m| &m.queue[..]))
    {
        let refused = reject(srv, sess, args, id, spec, cluster::CROSSSLOT, "");
        // Redis discards the transaction but answers plain CROSSSLOT, not EXECABORT.
        return if spec.name == "exec" {
            errors::err(cluster::CROSSSLOT)
        } else {
            refused
        };
    }
    // A `resp3_only()` test server: nothing but the handshake before `HELLO 3`.
    if !sess.resp3
        && srv.resp3_only.load(Ordering::Relaxed)
        && !matches!(spec.name, "hello" | "auth" | "quit" | "reset")
    {
        return reject(srv, sess, args, id, spec, RESP3_ONLY, "");
    }
    // RESP2 subscribed mode (Redis `processCommand`): checked before MULTI queueing.
    if sess.subs.is_some() && sess.resp2_subscribed() {
        if let pubsub::Gate::Reject(msg) = pubsub::resp2_gate(spec) {
            return reject(srv, sess, args, id, spec, &msg, "ERR ");
        }
    }
    if let Some(p) = srv.persist.get() {
        if spec.is_write() || spec.has_flag("may_replicate") {
            // Redis refuses writes while its AOF cannot be written (`-MISCONF`).
            if let Some(e) = p.failure() {
                let msg = format!("Errors writing to the AOF file: {e}");
                return reject(srv, sess, args, id, spec, &msg, "MISCONF ");
            }
            sess.wrote.store(true, Ordering::Relaxed);
        }
    }
    let script = crate::script::state(srv);
    if let Some(msg) = state_refusal(srv, sess, spec, args, script) {
        return reject(srv, sess, args, id, spec, msg, "");
    }
    let now = match sess.mark {
        Some(t) => srv.clock.ms_at(t),
        None => srv.clock.now_ms(),
    };
    sess.handle.last_cmd.store(id, Ordering::Relaxed);
    sess.handle
        .last_interaction_ms
        .store(now, Ordering::Relaxed);
    // BUSY comes before MULTI queueing, as in Redis's `processCommand`: a command refused
    // while a script is timed out dooms the transaction it was meant for.
    if let ScriptState::TimedOut(busy) = script {
        if !spec.has_flag("allow_busy") {
            return reject(srv, sess, args, id, spec, busy, "");
        }
    }
    if monitor::refuses(sess, spec) {
        return reject(srv, sess, args, id, spec, monitor::REFUSED, "ERR ");
    }
    if sess.multi.is_some() && !transactions::runs_inside_multi(spec) {
        if spec.has_flag("no_multi") {
            transactions::flag_abort(sess);
            return errors::err("ERR Command not allowed inside a transaction");
        }
        let line = std::mem::take(args);
        sess.multi.as_mut().expect("in multi").queue.push(line);
        return Reply::QUEUED;
    }
    if script != ScriptState::Idle {
        if let Some(r) = crate::script::before_lock(srv, spec.name) {
            return r;
        }
    }
    // The view is lent to `run` where it was made, never moved: it is a few hundred bytes,
    // and moving it out of `lock`'s result cost two `memcpy` calls per command.
    let run = |access: &mut Access, sess: &mut Session| {
        let reply = execute(srv, sess, access, id, spec, args);
        if sess.block_request.is_some() {
            blocking::register(srv, sess, args);
        }
        // Most commands make nothing ready: no vector to move out and drop then.
        let ready = (!access.ready_is_empty()).then(|| access.take_ready());
        (reply, ready)
    };
    // The view drops (its changes go to the journal, locks released) before the ready
    // keys' blocked clients are served.
    let (reply, ready) = if runs_ungated(srv, spec, sess, script) {
        run(&mut srv.ks.ungated(sess.db, now), sess)
    } else {
        match lock(srv, sess, spec, args, now, run) {
            Ok(done) => done,
            Err(Gave::Busy(busy)) => return reject(srv, sess, args, id, spec, busy, ""),
            Err(Gave::Served(r)) => return r,
        }
    };
    if let Some(ready) = ready {
        blocking::serve_ready(srv, ready);
    }
    reply
}

/// Redis `processCommand`'s refusals by server state, before MULTI queueing: out of
/// memory, deny-oom commands fail (and inside MULTI everything but EXEC, DISCARD, QUIT and
/// RESET); with too few good replicas, writes fail. A script that declared flags counts
/// as write / deny-oom by them, and EXEC by the commands it queued.
fn state_refusal(
    srv: &Arc<Shared>,
    sess: &Session,
    spec: &CommandSpec,
    args: &[Bytes],
    script: ScriptState,
) -> Option<&'static str> {
    // In-process inspection is not a client: Redis spares its master and AOF alike.
    if sess.internal {
        return None;
    }
    // Redis skips the memory check while a script is timed out (it is yielding).
    let oom = !matches!(script, ScriptState::TimedOut(_)) && refusals::out_of_memory(srv);
    let noreplicas = !refusals::good_replicas(&srv.config);
    if !oom && !noreplicas {
        return None;
    }
    let flags = |spec: &CommandSpec, args: &[Bytes]| match crate::script::declared_flags(srv, args)
    {
        Some(f) => {
            let writes = !f.has(crate::script::Flags::NO_WRITES);
            (writes, writes && !f.has(crate::script::Flags::ALLOW_OOM))
        }
        None => (spec.is_write(), spec.has_flag("denyoom")),
    };
    let (mut write, mut denyoom) = flags(spec, args);
    if let (true, Some(multi)) = (spec.name == "exec", &sess.multi) {
        for line in &multi.queue {
            if let Ok((_, s)) = registry().resolve(line) {
                let (w, d) = flags(s, line);
                write |= w;
                denyoom |= d;
            }
        }
    }
    let queues =
        sess.multi.is_some() && !matches!(spec.name, "exec" | "discard" | "quit" | "reset");
    if oom && (denyoom || queues) {
        return Some(refusals::OOM);
    }
    (noreplicas && write).then_some(refusals::NOREPLICAS)
}

/// Whether a command runs without the keyspace gate: SHUTDOWN whenever no script runs
/// (a DEBUG SLEEP or a long EXEC must not hold it back), and while a script is timed out,
/// the keyless `allow_busy` commands (AUTH, HELLO, MULTI, QUIT, SHUTDOWN…), as Redis serves
/// them from inside the script's hook. Those that forget WATCH registrations (UNWATCH,
/// DISCARD, RESET) first drop them shard by shard; a watch in a shard the script holds
/// makes the command wait for the script.
fn runs_ungated(srv: &Shared, spec: &CommandSpec, sess: &mut Session, script: ScriptState) -> bool {
    match script {
        ScriptState::Idle => spec.name == "shutdown",
        ScriptState::Running => false,
        ScriptState::TimedOut(_) => {
            spec.has_flag("allow_busy")
                && matches!(spec.keys, KeySpec::None)
                && (!forgets_watches(spec) || forget_watches_ungated(srv, sess))
        }
    }
}

/// Drops the session's WATCH registrations whose shards no script holds, without the
/// gate; true once none is left (the handler's own forgetting then has nothing to do).
fn forget_watches_ungated(srv: &Shared, sess: &mut Session) -> bool {
    let flag = sess.watch_dirty.clone();
    sess.watched
        .retain(|(db, key, _)| !srv.ks.try_unwatch(*db, key, &flag));
    sess.watched.is_empty()
}

/// The `allow_busy` commands that drop the session's WATCH registrations.
fn forgets_watches(spec: &CommandSpec) -> bool {
    matches!(spec.name, "unwatch" | "discard" | "reset")
}

/// Takes the keyspace view a command needs and runs `run` with it. While an exclusive holder (a script, EXEC,
/// DEBUG SLEEP) keeps the gate past a first short wait, the rest of the wait runs off the
/// runtime's worker (`block_in_place`): the core goes to another thread, so the other
/// connections (SCRIPT KILL, SHUTDOWN, BUSY replies) are still served, even with
/// `--threads 1`. The wait ends with the script's BUSY error once it times out, unless the
/// command is allowed then (it then runs ungated if it can, or waits for the script).
fn lock<R>(
    srv: &Arc<Shared>,
    sess: &mut Session,
    spec: &'static CommandSpec,
    args: &[Bytes],
    now: u64,
    run: impl FnOnce(&mut Access<'_>, &mut Session) -> R,
) -> Result<R, Gave> {
    let db = sess.db;
    let attempt = |waiting: &mut dyn FnMut() -> bool| match spec.lock {
        Lock::All => srv.ks.exclusive_or_give_up(db, now, waiting),
        // The common single-key shape needs no index vector.
        Lock::Keys if matches!(spec.keys, KeySpec::Range(1, 1, _)) && args.len() > 1 => {
            srv.ks.shared_or_give_up(db, &[&args[1][..]], now, waiting)
        }
        Lock::Keys => {
            let idx = spec.key_indices(args);
            let keys: Vec<&[u8]> = idx.iter().map(|&i| &args[i][..]).collect();
            srv.ks.shared_or_give_up(db, &keys, now, waiting)
        }
    };
    let mut got = attempt(&mut || false);
    if let Some(a) = &mut got {
        let r = run(a, sess);
        let garbage = a.take_garbage();
        drop(got);
        free_garbage(srv, sess, spec, args, garbage);
        return Ok(r);
    }
    let mut outcome = None;
    let mut waiting = || {
        let state = crate::script::state(srv);
        match state {
            ScriptState::Idle => return true,
            ScriptState::TimedOut(busy) if !spec.has_flag("allow_busy") => {
                outcome = Some(Gave::Busy(busy));
                return false;
            }
            _ => {}
        }
        // A script started while this command waited: SCRIPT KILL & co. are served now.
        if let Some(r) = crate::script::before_lock(srv, spec.name) {
            outcome = Some(Gave::Served(r));
            return false;
        }
        !runs_ungated(srv, spec, sess, state)
    };
    let mut got = off_core(|| attempt(&mut waiting));
    if let Some(a) = &mut got {
        let r = run(a, sess);
        let garbage = a.take_garbage();
        drop(got);
        free_garbage(srv, sess, spec, args, garbage);
        return Ok(r);
    }
    match outcome {
        Some(gave) => Err(gave),
        None => Ok(run(&mut srv.ks.ungated(db, now), sess)),
    }
}

/// Free effort (elements) past which a command's garbage is freed with the worker's core
/// handed to another thread: ~0.1-0.3 ms of freeing here, against tens of microseconds for
/// the hand-off.
const OFF_CORE_EFFORT: usize = 16 << 10;

/// Frees the values a command removed (DEL of a big key…) once its view, locks included,
/// is dropped, and before its reply leaves: a synchronous free for this client, as in
/// Redis. A big one runs off the runtime's worker, so the connections queued on this
/// worker move to another thread instead of waiting for the free (issue 17), and gives its
/// pages back to the OS itself ([`crate::alloc::drop_releasing`]).
/// The command is then recorded with the free counted in its run time, as Redis's DEL is
/// (a big DEL shows in SLOWLOG and LATENCY), unless it ran inside EXEC or a script.
fn free_garbage(
    srv: &Arc<Shared>,
    sess: &mut Session,
    spec: &'static CommandSpec,
    args: &[Bytes],
    garbage: crate::engine::Garbage,
) {
    if garbage.is_empty() {
        return;
    }
    let start = crate::clock::Instant::now();
    if garbage.effort() >= OFF_CORE_EFFORT {
        off_core(|| crate::alloc::drop_releasing(garbage));
    } else {
        drop(garbage);
    }
    if let Some((id, usec)) = sess.observe_after_free.take() {
        let end = crate::clock::Instant::now();
        if sess.mark.is_some() {
            sess.mark = Some(end);
        }
        let freed = end.saturating_duration_since(start).as_micros() as u64;
        sess.pending.usec += freed;
        observe::after_call(srv, sess, false, id, spec, args, usec + freed);
    }
}

/// Why [`lock`] gave up waiting for the keyspace.
enum Gave {
    /// The script timed out: the command gets this BUSY error.
    Busy(&'static str),
    /// The command was answered without the keyspace (SCRIPT KILL…).
    Served(Reply),
}

/// Runs a blocking wait with the runtime's worker core handed to another thread (a no-op
/// hand-off outside a multi-thread runtime: tests calling dispatch directly).
pub fn off_core<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Refuses a command before it runs (Redis `rejectCommand`): the transaction is flagged, and
/// a rejected EXEC itself discards the transaction with `EXECABORT … because of: <msg>`.
/// A test server's injected failure (instance/faults.rs) for `args`, answered as Redis
/// answers a command it rejects before running it: counted as rejected and as an error
/// reply, and inside MULTI it dooms the transaction (`EXEC` itself answers `EXECABORT`).
pub fn reject_injected(srv: &Arc<Shared>, sess: &mut Session, args: &[Bytes], err: &str) -> Reply {
    let reply = match registry().resolve(args) {
        Ok((id, spec)) => reject(srv, sess, args, id, spec, err, ""),
        Err(_) => {
            transactions::flag_abort(sess);
            Reply::error(err.to_string())
        }
    };
    if let Reply::Error(msg) = &reply {
        Shared::bump_errors(srv);
        srv.stats.record_error(msg);
    }
    reply
}

fn reject(
    srv: &Arc<Shared>,
    sess: &mut Session,
    args: &[Bytes],
    id: usize,
    spec: &'static CommandSpec,
    msg: &str,
    prefix: &str,
) -> Reply {
    transactions::flag_abort(sess);
    if !sess.internal {
        srv.cmdstats[id].rejected.fetch_add(1, Ordering::Relaxed);
    }
    if spec.name == "exec" {
        sess.multi = None;
        if !sess.watched.is_empty() {
            // A script may hold the keyspace (EXEC refused as BUSY): only the watches in
            // shards it holds wait for it, off-core.
            let now = srv.clock.now_ms();
            let mut access = if forget_watches_ungated(srv, sess) {
                srv.ks.ungated(sess.db, now)
            } else {
                off_core(|| srv.ks.exclusive(sess.db, now))
            };
            transactions::forget_watches(sess, &mut access);
        }
        // Redis's `execCommandAbort` shows the EXEC to monitors, so they see the
        // transaction end (its MULTI was shown; the queued commands never ran).
        if srv.monitors.active() {
            monitor::exec_aborted(srv, sess, args);
        }
        return Reply::error(format!("EXECABORT Transaction discarded because of: {msg}"));
    }
    Reply::error(format!("{prefix}{msg}"))
}

/// Runs a resolved command with a keyspace view already locked (EXEC reuses this).
pub fn execute(
    srv: &Arc<Shared>,
    sess: &mut Session,
    access: &mut Access,
    id: usize,
    spec: &'static CommandSpec,
    args: &[Bytes],
) -> Reply {
    let start = sess.mark.unwrap_or_else(crate::clock::Instant::now);
    access.db = sess.db;
    access.unobserved = sess.internal;
    // Redis 7.2 `lookupKey`: a NO-TOUCH client touches no key, except with TOUCH itself.
    access.no_touch = sess.internal || (sess.no_touch && spec.name != "touch");
    // A run of one `fast` command accumulates in the session; any other command (INFO and
    // CONFIG RESETSTAT among them) first adds what is pending, so it sees exact counts.
    if sess.pending.id != id || !registry().batched[id] {
        flush_stats(srv, sess);
        sess.pending.id = id;
    }
    // MONITOR: one relaxed load when nobody monitors (cmd/monitor.rs says what is shown).
    let monitored = srv.monitors.active();
    if monitored {
        monitor::before(srv, sess, spec, args);
    }
    let reply = {
        let mut cx = Cx {
            args,
            ks: access,
            sess,
            srv,
            spec,
        };
        (spec.handler)(&mut cx)
    };
    if sess.tracking != 0 {
        remember_keys(srv, sess, spec, args);
    }
    if monitored {
        monitor::after(srv, sess, spec, args);
    }
    let end = crate::clock::Instant::now();
    if sess.mark.is_some() {
        sess.mark = Some(end);
    }
    // A handler may have flushed (EXEC runs its queue through here) or switched the
    // session's pending command.
    if sess.pending.id != id {
        flush_stats(srv, sess);
        sess.pending.id = id;
    }
    let usec = end.saturating_duration_since(start).as_micros() as u64;
    let p = &mut sess.pending;
    p.calls += 1;
    p.usec += usec;
    p.failed += u64::from(reply.is_error());
    match &mut sess.block_request {
        // Recorded when it ends, with this run's time (`observe::after_unblock`).
        Some(r) => {
            r.exec_us = usec;
            observe::blocked_run(srv, id, usec);
        }
        None if sess.internal => {}
        None if sess.serving_blocked => observe::blocked_run(srv, id, usec),
        // A plain command that leaves values to free after its locks (a big DEL) is
        // recorded by `lock` once they are freed, with the free's time. (In EXEC or a
        // script the view is the whole keyspace's; its garbage waits for their end.)
        None if access.has_garbage() && !access.is_exclusive() => {
            sess.observe_after_free = Some((id, usec));
        }
        None => observe::after_call(srv, sess, access.is_exclusive(), id, spec, args, usec),
    }
    reply
}

/// Redis's `trackingRememberKeys`, called (as in Redis's `call`) for every read-only
/// command a tracking client runs, inside scripts and EXEC too, but not for the read-only
/// script commands themselves (the commands they call count), and never in BCAST mode.
/// OPTIN remembers only after `CLIENT CACHING yes`, OPTOUT unless `CLIENT CACHING no`.
/// Runs while the command's locks are held, so no write can come between the read and
/// its registration.
fn remember_keys(srv: &Shared, sess: &Session, spec: &CommandSpec, args: &[Bytes]) {
    use crate::instance::tracking::{BCAST, OPTIN, OPTOUT};
    let t = sess.tracking;
    if t & BCAST != 0
        || !spec.has_flag("readonly")
        || spec.has_flag("pubsub")
        || matches!(spec.name, "eval_ro" | "evalsha_ro" | "fcall_ro")
        || (t & OPTIN != 0 && !sess.caching)
        || (t & OPTOUT != 0 && sess.caching)
    {
        return;
    }
    let idx = spec.key_indices(args);
    if idx.is_empty() {
        return;
    }
    srv.tracking.remember(
        srv,
        sess.id,
        idx.iter().filter_map(|&i| args.get(i).map(|a| &a[..])),
    );
}

/// Adds a session's pending command statistics to the shared counters (INFO
/// commandstats, total_commands_processed). Connections call it before writing replies.
pub fn flush_stats(srv: &Shared, sess: &mut Session) {
    let mut p = std::mem::take(&mut sess.pending);
    if p.lat_n != 0 {
        observe::add_run(srv, &mut p);
    }
    if p.calls == 0 {
        return;
    }
    let st = &srv.cmdstats[p.id];
    st.calls.fetch_add(p.calls, Ordering::Relaxed);
    st.usec.fetch_add(p.usec, Ordering::Relaxed);
    if p.failed > 0 {
        st.failed.fetch_add(p.failed, Ordering::Relaxed);
    }
    srv.stats
        .total_commands
        .fetch_add(p.calls, Ordering::Relaxed);
}

impl Shared {
    fn bump_errors(srv: &Shared) {
        srv.stats.error_replies.fetch_add(1, Ordering::Relaxed);
    }
}

/// Whether a command line may write (CLIENT PAUSE WRITE holds these back).
pub fn may_write(args: &[Bytes]) -> bool {
    match registry().resolve(args) {
        Ok((_, spec)) => spec.is_write() || spec.has_flag("may_replicate"),
        Err(_) => false,
    }
}

#[cfg(test)]
mod registry_tests {
    use super::*;

    #[test]
    fn top_level_lookup_matches_the_full_table() {
        let reg = registry();
        for spec in reg.top_level() {
            let upper = spec.name.to_ascii_uppercase();
            let mixed: String = spec
                .name
                .chars()
                .enumerate()
                .map(|(i, c)| {
                    if i % 2 == 0 {
                        c.to_ascii_uppercase()
                    } else {
                        c
                    }
                })
                .collect();
            for name in [spec.name, upper.as_str(), mixed.as_str()] {
                let found = reg.lookup_top(name.as_bytes()).map(|(id, s)| (id, s.name));
                assert_eq!(
                    found,
                    reg.lookup(name.as_bytes()).map(|(id, s)| (id, s.name))
                );
                assert!(found.is_some(), "{name}");
            }
        }
        // Subcommands and near misses are not command names.
        for name in [
            "config|get",
            "CONFIG|GET",
            "",
            "ge",
            "gett",
            "g\u{0}t",
            "xget",
            "ǵet",
        ] {
            assert!(reg.lookup_top(name.as_bytes()).is_none(), "{name}");
        }
        assert!(reg.lookup(b"config|get").is_some());
        let args = |s: &[&'static str]| {
            s.iter()
                .map(|a| Bytes::from_static(a.as_bytes()))
                .collect::<Vec<_>>()
        };
        assert!(reg.resolve(&args(&["config|get", "x"])).is_err());
        assert_eq!(
            reg.resolve(&args(&["Config", "GET"])).unwrap().1.name,
            "config|get"
        );
        assert!(reg.resolve(&args(&["\u{7}et", "k"])).is_err());
    }
}
