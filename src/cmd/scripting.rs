//! Scripting commands: EVAL / EVALSHA / EVAL_RO / EVALSHA_RO and SCRIPT. The work is in
//! `crate::script`; scripts take exclusive access to the keyspace, so they are atomic.

use super::{args, errors, CommandSpec, Cx, KeySpec, Lock};
use crate::protocol::Reply;
use crate::script::{self, Source};
use bytes::Bytes;

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
    let body = cx.args[1].clone();
    script::eval(cx, Source::Body(&body), false)
}

fn evalsha(cx: &mut Cx) -> Reply {
    let sha = cx.args[1].clone();
    script::eval(cx, Source::Sha(&sha), false)
}

fn eval_ro(cx: &mut Cx) -> Reply {
    let body = cx.args[1].clone();
    script::eval(cx, Source::Body(&body), true)
}

fn evalsha_ro(cx: &mut Cx) -> Reply {
    let sha = cx.args[1].clone();
    script::eval(cx, Source::Sha(&sha), true)
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
