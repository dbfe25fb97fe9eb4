//! Scripting commands: EVAL / EVALSHA / EVAL_RO / EVALSHA_RO and SCRIPT. The Lua side is
//! in `crate::script`, which runs its commands through [`ScriptHost`], the command side of
//! the `script::Host` seam; scripts take exclusive access to the keyspace, so they are
//! atomic.

use super::cluster::topology::key_slot;
use super::{args, errors, refusals, registry, CommandSpec, Cx, KeySpec, Lock};
use crate::protocol::Reply;
use crate::script::{self, Call, Flags, Host, Mode, Source};
use bytes::Bytes;
use std::sync::atomic::Ordering;

/// `numkeys` at position 2, keys after it (COMMAND INFO reports 0 0 0 + movablekeys).
const EVAL_KEYS: KeySpec = KeySpec::Custom {
    first: 0,
    last: 0,
    step: 0,
    find: eval_keys,
};

fn eval_keys(args: &[Bytes]) -> Vec<usize> {
    super::table::numkeys_at(args, 2)
}

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "eval",
        arity: -3,
        flags: &["noscript", "stale", "skip_monitor", "no_mandatory_keys"],
        keys: EVAL_KEYS,
        acl: &["slow", "scripting"],
        group: "scripting",
        since: "2.6.0",
        summary: "Execute a Lua script server side",
        complexity: "Depends on the script that is executed.",
        handler: eval,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "evalsha",
        arity: -3,
        flags: &["noscript", "stale", "skip_monitor", "no_mandatory_keys"],
        keys: EVAL_KEYS,
        acl: &["slow", "scripting"],
        group: "scripting",
        since: "2.6.0",
        summary: "Execute a Lua script server side",
        complexity: "Depends on the script that is executed.",
        handler: evalsha,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "eval_ro",
        arity: -3,
        flags: &["readonly", "noscript", "stale", "skip_monitor", "no_mandatory_keys"],
        keys: EVAL_KEYS,
        acl: &["slow", "scripting"],
        group: "scripting",
        since: "7.0.0",
        summary: "Execute a read-only Lua script server side",
        complexity: "Depends on the script that is executed.",
        handler: eval_ro,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "evalsha_ro",
        arity: -3,
        flags: &["readonly", "noscript", "stale", "skip_monitor", "no_mandatory_keys"],
        keys: EVAL_KEYS,
        acl: &["slow", "scripting"],
        group: "scripting",
        since: "7.0.0",
        summary: "Execute a read-only Lua script server side",
        complexity: "Depends on the script that is executed.",
        handler: evalsha_ro,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "script",
        arity: -2,
        flags: &[],
        keys: KeySpec::None,
        acl: &["slow"],
        group: "scripting",
        since: "2.6.0",
        summary: "A container for Lua scripts management commands",
        complexity: "Depends on subcommand.",
        subcommands: &[
            CommandSpec {
                name: "script|load",
                arity: 3,
                flags: &["noscript", "stale"],
                keys: KeySpec::None,
                acl: &["slow", "scripting"],
                group: "scripting",
                since: "2.6.0",
                summary: "Load the specified Lua script into the script cache.",
                complexity: "O(N) with N being the length in bytes of the script body.",
                handler: script_load,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "script|flush",
                arity: -2,
                flags: &["noscript"],
                keys: KeySpec::None,
                acl: &["slow", "scripting"],
                group: "scripting",
                since: "2.6.0",
                summary: "Remove all the scripts from the script cache.",
                complexity: "O(N) with N being the number of scripts in cache",
                handler: script_flush,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "script|exists",
                arity: -3,
                flags: &["noscript"],
                keys: KeySpec::None,
                acl: &["slow", "scripting"],
                group: "scripting",
                since: "2.6.0",
                summary: "Check existence of scripts in the script cache.",
                complexity: "O(N) with N being the number of scripts to check (so checking a single script is an O(1) operation).",
                handler: script_exists,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "script|kill",
                arity: 2,
                flags: &["noscript", "allow_busy"],
                keys: KeySpec::None,
                acl: &["slow", "scripting"],
                group: "scripting",
                since: "2.6.0",
                summary: "Kill the script currently in execution.",
                complexity: "O(1)",
                handler: script_kill,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "script|help",
                arity: 2,
                flags: &["loading", "stale"],
                keys: KeySpec::None,
                acl: &["slow", "scripting"],
                group: "scripting",
                since: "5.0.0",
                summary: "Show helpful text about the different subcommands",
                complexity: "O(1)",
                handler: script_help,
                ..CommandSpec::DEFAULT
            },
        ],
        ..CommandSpec::DEFAULT
    },
];

fn eval(cx: &mut Cx) -> Reply {
    run_eval(cx, false, false)
}

fn evalsha(cx: &mut Cx) -> Reply {
    run_eval(cx, true, false)
}

fn eval_ro(cx: &mut Cx) -> Reply {
    run_eval(cx, false, true)
}

fn evalsha_ro(cx: &mut Cx) -> Reply {
    run_eval(cx, true, true)
}

/// EVAL and its forms: name, script (its body, or its SHA1 for EVALSHA), numkeys, keys…,
/// args….
fn run_eval(cx: &mut Cx, by_sha: bool, read_only: bool) -> Reply {
    let numkeys = match args::int(&cx.args[2]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    if numkeys < 0 {
        return errors::err(errors::NUMKEYS_NEGATIVE);
    }
    if numkeys as u64 > (cx.args.len() - 3) as u64 {
        return errors::err(errors::NUMKEYS_TOO_MANY);
    }
    let (srv, argv) = (cx.srv, cx.args);
    let source = match by_sha {
        true => Source::Sha(&argv[1]),
        false => Source::Body(&argv[1]),
    };
    with_host(cx, |host| {
        script::eval(srv, argv, numkeys as usize, source, read_only, host)
    })
}

/// Runs a script (`run`) with the connection's session set up as for a transaction's
/// commands (`in_exec`: nothing blocks), and its db and protocol restored afterwards
/// whatever the script's `SELECT`s and `redis.setresp` did.
pub(super) fn with_host(cx: &mut Cx, run: impl FnOnce(&mut dyn Host) -> Reply) -> Reply {
    let saved_db = cx.sess.db;
    let saved_resp3 = cx.sess.resp3;
    let saved_in_exec = cx.sess.in_exec;
    cx.sess.in_exec = true;
    // Emulated cluster mode: the slot of the keys the script declared (dispatch has made
    // sure they share one), which its commands' keys must then keep to.
    let slot = cx
        .srv
        .cluster_emulated
        .then(|| {
            cx.spec
                .key_indices(cx.args)
                .first()
                .map(|&i| key_slot(&cx.args[i]))
        })
        .flatten();
    let reply = run(&mut ScriptHost {
        cx: &mut *cx,
        slot,
        cross_slot_ok: false,
    });
    cx.sess.in_exec = saved_in_exec;
    cx.sess.resp3 = saved_resp3;
    cx.sess.db = saved_db;
    reply
}

/// The command side of a running script: its `redis.call`s run as commands of the
/// connection that called EVAL / FCALL, under Redis's rules for scripts.
struct ScriptHost<'c, 'a, 'k> {
    cx: &'c mut Cx<'a, 'k>,
    /// Emulated cluster mode: the one slot the script's keys hash to, once known.
    slot: Option<u16>,
    /// The script's `allow-cross-slot-keys` flag.
    cross_slot_ok: bool,
}

impl Host for ScriptHost<'_, '_, '_> {
    /// Redis `scriptPrepareForRun`. The replica, stale and disk-error checks cannot apply
    /// to this server.
    fn admit(&mut self, flags: Option<Flags>, read_only: bool) -> Result<Mode, Reply> {
        // Redis 7.2 `scriptPrepareForRun`: a script without a shebang (EVAL's compatibility
        // mode) may reach keys of other slots, as before 7.0; one with flags must say so.
        self.cross_slot_ok = flags.is_none_or(|f| f.has(Flags::ALLOW_CROSS_SLOT));
        let Some(flags) = flags else {
            return Ok(Mode {
                read_only,
                allow_oom: false,
            });
        };
        let config = &self.cx.srv.config;
        if flags.has(Flags::NO_CLUSTER) && config.get_bool("cluster-enabled") {
            return Err(errors::err(errors::SCRIPT_NO_CLUSTER));
        }
        if !flags.has(Flags::NO_WRITES) {
            if read_only {
                return Err(errors::err(errors::SCRIPT_WRITE_FLAG_RO));
            }
            if !refusals::good_replicas(config) {
                return Err(Reply::error(refusals::NOREPLICAS));
            }
            if !flags.has(Flags::ALLOW_OOM) && refusals::oom_before_command(self.cx.srv) {
                return Err(Reply::error(refusals::SCRIPT_OOM));
            }
        }
        Ok(Mode {
            read_only: read_only || flags.has(Flags::NO_WRITES),
            allow_oom: flags.has(Flags::ALLOW_OOM),
        })
    }

    /// Redis `scriptCall`: a refused command counts as a rejected call of it and as an
    /// error reply; one that ran and failed counts as an error reply (its failed call is
    /// counted by `execute`). The script's own reply then does not count them again.
    fn call(&mut self, argv: Vec<Bytes>, call: Call<'_>) -> Result<Reply, String> {
        let cx = &mut *self.cx;
        let counts = !cx.sess.internal;
        let resolved = registry().resolve(&argv).ok();
        let slot = (cx.srv.cluster_emulated && !cx.sess.internal).then_some(ScriptSlot {
            slot: &mut self.slot,
            cross_ok: self.cross_slot_ok,
        });
        let out = checked_command(cx, argv, resolved, call, slot);
        if counts {
            match &out {
                Err(text) => {
                    if let Some((id, _)) = resolved {
                        cx.srv.cmdstats[id].rejected.fetch_add(1, Ordering::Relaxed);
                    }
                    super::count_error(cx.srv, text);
                }
                Ok(Reply::Error(msg)) => super::count_error(cx.srv, msg),
                Ok(_) => {}
            }
        }
        out
    }

    fn acl_check(&self, argv: &[Bytes]) -> Option<bool> {
        let (id, spec) = registry().resolve(argv).ok()?;
        let user = &self.cx.sess.user;
        Some(user.unrestricted() || super::acl::check_line(user, id, spec, argv).is_ok())
    }

    fn error_already_counted(&mut self) {
        super::error_already_counted();
    }
}

/// Emulated cluster mode's hold on a script's keys (Redis `scriptVerifyClusterState`).
struct ScriptSlot<'s> {
    slot: &'s mut Option<u16>,
    cross_ok: bool,
}

impl ScriptSlot<'_> {
    /// A command's keys must share a slot, and (unless the script allows cross-slot keys)
    /// the slot of the script's earlier keys.
    fn check(self, spec: &CommandSpec, args: &[Bytes]) -> Result<(), String> {
        let keys = spec.key_indices(args);
        let Some(&first) = keys.first() else {
            return Ok(());
        };
        let s = key_slot(&args[first]);
        if keys.iter().any(|&i| key_slot(&args[i]) != s) {
            return Err("ERR Script attempted to access a non local key in a cluster node".into());
        }
        if !self.cross_ok && *self.slot.get_or_insert(s) != s {
            return Err(
                "ERR Script attempted to access keys that do not hash to the same slot".into(),
            );
        }
        Ok(())
    }
}

/// One `redis.call` past the lookup: the checks that can refuse it, then the command.
fn checked_command(
    cx: &mut Cx,
    args: Vec<Bytes>,
    resolved: Option<(usize, &'static CommandSpec)>,
    call: Call,
    cluster: Option<ScriptSlot>,
) -> Result<Reply, String> {
    let (id, spec) =
        resolved.ok_or_else(|| "ERR Unknown Redis command called from script".to_string())?;
    if !spec.arity_ok(args.len()) {
        return Err("ERR Wrong number of args calling Redis command from script".into());
    }
    if spec.has_flag("noscript") {
        return Err("ERR This Redis command is not allowed from script".into());
    }
    super::acl::script_gate(cx.srv, cx.sess, id, spec, &args)?;
    let writes = spec.is_write();
    if call.mode.read_only && (writes || spec.has_flag("may_replicate")) {
        return Err("ERR Write commands are not allowed from read-only scripts.".into());
    }
    // Redis `scriptVerifyWriteCommandAllow` and `scriptVerifyOOM`: the server's state can
    // fail a script only before its first write (it cannot stop half-way).
    let dirty = call.wrote.load(Ordering::Acquire);
    if writes && !dirty && !refusals::good_replicas(&cx.srv.config) {
        return Err(refusals::NOREPLICAS.into());
    }
    if spec.has_flag("denyoom")
        && !call.mode.allow_oom
        && !dirty
        && refusals::oom_before_command(cx.srv)
    {
        return Err(refusals::OOM.into());
    }
    if let Some(cluster) = cluster {
        cluster.check(spec, &args)?;
    }
    cx.sess.resp3 = call.resp3;
    let reply = super::execute(cx.srv, cx.sess, cx.ks, id, spec, &args);
    if writes {
        call.wrote.store(true, Ordering::Release);
        // The script's reply, like any write's, waits for its commit under `appendfsync
        // always` (EVAL and FCALL are not write commands themselves: dispatch did not mark
        // the connection, and a SIGKILL could lose an acknowledged script write).
        if cx.srv.persist.get().is_some() {
            cx.sess.wrote.store(true, Ordering::Relaxed);
        }
    }
    Ok(reply)
}

fn script_load(cx: &mut Cx) -> Reply {
    script::load(cx.srv, &cx.args[2])
}

fn script_exists(cx: &mut Cx) -> Reply {
    let s = script::scripts(cx.srv);
    Reply::Array(
        cx.args[2..]
            .iter()
            .map(|sha| Reply::Int(i64::from(s.exists(sha))))
            .collect(),
    )
}

fn script_flush(cx: &mut Cx) -> Reply {
    match cx.args.len() {
        2 => {}
        3 if args::is(&cx.args[2], "ASYNC") || args::is(&cx.args[2], "SYNC") => {}
        _ => return errors::err("ERR SCRIPT FLUSH only support SYNC|ASYNC option"),
    }
    script::scripts(cx.srv).flush();
    Reply::OK
}

/// Reached only when no script runs (a running one is killed before locking, in
/// `script::before_lock`).
fn script_kill(cx: &mut Cx) -> Reply {
    script::scripts(cx.srv).kill()
}

fn script_help(_cx: &mut Cx) -> Reply {
    args::help(
        "SCRIPT",
        &[
            "DEBUG (YES|SYNC|NO)",
            "    Set the debug mode for subsequent scripts executed.",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    )
}
