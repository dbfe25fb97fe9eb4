//! Redis 7 Functions: FUNCTION LOAD / LIST / DELETE / FLUSH / STATS / KILL / DUMP /
//! RESTORE / HELP and FCALL / FCALL_RO. The registry and the Lua side live in
//! `crate::script::functions`; commands that change the libraries or run a function hold
//! the whole keyspace, so they are atomic with respect to every script.

use super::{args, errors, CommandSpec, Cx, KeySpec, Lock};
use crate::engine::change::Change;
use crate::protocol::Reply;
use crate::script::{self, functions};
use bytes::Bytes;

/// `numkeys` at position 2, keys after it (COMMAND INFO reports 0 0 0 + movablekeys).
const FCALL_KEYS: KeySpec = KeySpec::Custom {
    first: 0,
    last: 0,
    step: 0,
    find: fcall_keys,
};

fn fcall_keys(args: &[Bytes]) -> Vec<usize> {
    super::table::numkeys_at(args, 2)
}

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "function",
        arity: -2,
        flags: &[],
        keys: KeySpec::None,
        acl: &["slow"],
        group: "scripting",
        since: "7.0.0",
        summary: "A container for function commands",
        complexity: "Depends on subcommand.",
        subcommands: &[
            CommandSpec {
                name: "function|flush",
                arity: -2,
                flags: &["write", "noscript"],
                keys: KeySpec::None,
                acl: &["write", "slow", "scripting"],
                group: "scripting",
                since: "7.0.0",
                summary: "Deleting all functions",
                complexity: "O(N) where N is the number of functions deleted",
                handler: function_flush,
                lock: Lock::All,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "function|dump",
                arity: 2,
                flags: &["noscript"],
                keys: KeySpec::None,
                acl: &["slow", "scripting"],
                group: "scripting",
                since: "7.0.0",
                summary: "Dump all functions into a serialized binary payload",
                complexity: "O(N) where N is the number of functions",
                handler: function_dump,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "function|restore",
                arity: -3,
                flags: &["write", "denyoom", "noscript"],
                keys: KeySpec::None,
                acl: &["write", "slow", "scripting"],
                group: "scripting",
                since: "7.0.0",
                summary: "Restore all the functions on the given payload",
                complexity: "O(N) where N is the number of functions on the payload",
                handler: function_restore,
                lock: Lock::All,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "function|list",
                arity: -2,
                flags: &["noscript"],
                keys: KeySpec::None,
                acl: &["slow", "scripting"],
                group: "scripting",
                since: "7.0.0",
                summary: "List information about all the functions",
                complexity: "O(N) where N is the number of functions",
                handler: function_list,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "function|load",
                arity: -3,
                flags: &["write", "denyoom", "noscript"],
                keys: KeySpec::None,
                acl: &["write", "slow", "scripting"],
                group: "scripting",
                since: "7.0.0",
                summary: "Create a function with the given arguments (name, code, description)",
                complexity: "O(1) (considering compilation time is redundant)",
                handler: function_load,
                lock: Lock::All,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "function|stats",
                arity: 2,
                flags: &["noscript", "allow_busy"],
                keys: KeySpec::None,
                acl: &["slow", "scripting"],
                group: "scripting",
                since: "7.0.0",
                summary: "Return information about the function currently running (name, description, duration)",
                complexity: "O(1)",
                handler: function_stats,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "function|kill",
                arity: 2,
                flags: &["noscript", "allow_busy"],
                keys: KeySpec::None,
                acl: &["slow", "scripting"],
                group: "scripting",
                since: "7.0.0",
                summary: "Kill the function currently in execution.",
                complexity: "O(1)",
                handler: function_kill,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "function|delete",
                arity: 3,
                flags: &["write", "noscript"],
                keys: KeySpec::None,
                acl: &["write", "slow", "scripting"],
                group: "scripting",
                since: "7.0.0",
                summary: "Delete a function by name",
                complexity: "O(1)",
                handler: function_delete,
                lock: Lock::All,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "function|help",
                arity: 2,
                flags: &["loading", "stale"],
                keys: KeySpec::None,
                acl: &["slow", "scripting"],
                group: "scripting",
                since: "7.0.0",
                summary: "Show helpful text about the different subcommands",
                complexity: "O(1)",
                handler: function_help,
                ..CommandSpec::DEFAULT
            },
        ],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "fcall",
        arity: -3,
        flags: &["noscript", "stale", "skip_monitor", "no_mandatory_keys"],
        keys: FCALL_KEYS,
        acl: &["slow", "scripting"],
        group: "scripting",
        since: "7.0.0",
        summary: "Invoke a function",
        complexity: "Depends on the function that is executed.",
        handler: fcall,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "fcall_ro",
        arity: -3,
        flags: &["readonly", "noscript", "stale", "skip_monitor", "no_mandatory_keys"],
        keys: FCALL_KEYS,
        acl: &["slow", "scripting"],
        group: "scripting",
        since: "7.0.0",
        summary: "Invoke a read-only function",
        complexity: "Depends on the function that is executed.",
        handler: fcall_ro,
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
];

fn fcall(cx: &mut Cx) -> Reply {
    run_fcall(cx, false)
}

fn fcall_ro(cx: &mut Cx) -> Reply {
    run_fcall(cx, true)
}

/// FCALL and FCALL_RO: name, function, numkeys, keys…, args…. An unknown function is
/// reported before a bad numkeys, as Redis does.
fn run_fcall(cx: &mut Cx, read_only: bool) -> Reply {
    let Some(found) = script::find_function(cx.srv, &cx.args[1]) else {
        return errors::err(errors::FUNCTION_NOT_FOUND);
    };
    let Some(numkeys) = crate::num::parse_i64(&cx.args[2]) else {
        return errors::err(errors::FCALL_BAD_NUMKEYS);
    };
    if numkeys > (cx.args.len() - 3) as i64 {
        return errors::err(errors::NUMKEYS_TOO_MANY);
    }
    if numkeys < 0 {
        return errors::err(errors::NUMKEYS_NEGATIVE);
    }
    let (srv, argv) = (cx.srv, cx.args);
    super::scripting::with_host(cx, |host| {
        script::fcall(srv, argv, numkeys as usize, found, read_only, host)
    })
}

/// FUNCTION LOAD [REPLACE] code: options precede the code, which is the last argument.
fn function_load(cx: &mut Cx) -> Reply {
    let mut replace = false;
    let last = cx.args.len() - 1;
    for a in &cx.args[2..last] {
        if args::is(a, "REPLACE") {
            replace = true;
        } else {
            return Reply::error(format!(
                "ERR Unknown option given: {}",
                String::from_utf8_lossy(a)
            ));
        }
    }
    let reply = functions::load(cx.srv, &cx.args[last], replace);
    saved(cx, reply)
}

/// On the durable engine, a FUNCTION command that changed the libraries (its reply is no
/// error) records them as they now are. It holds the whole keyspace, so the change takes its
/// place in the journal among the writes exactly where the command took effect.
fn saved(cx: &mut Cx, reply: Reply) -> Reply {
    if !reply.is_error() && cx.ks.journaling() {
        let codes = functions::codes(cx.srv);
        cx.ks.record(Change::Functions { codes });
    }
    reply
}

fn function_list(cx: &mut Cx) -> Reply {
    functions::list(cx.srv, &cx.args[2..])
}

fn function_delete(cx: &mut Cx) -> Reply {
    let reply = functions::delete(cx.srv, &cx.args[2]);
    saved(cx, reply)
}

fn function_flush(cx: &mut Cx) -> Reply {
    match cx.args.len() {
        2 => {}
        3 if args::is(&cx.args[2], "ASYNC") || args::is(&cx.args[2], "SYNC") => {}
        3 => return errors::err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option"),
        _ => return subcommand_syntax(&cx.args[1]),
    }
    functions::flush(cx.srv);
    saved(cx, Reply::OK)
}

/// Redis `addReplySubcommandSyntaxError`: names the subcommand as the client typed it.
fn subcommand_syntax(sub: &[u8]) -> Reply {
    Reply::error(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
        String::from_utf8_lossy(sub)
    ))
}

/// Reached only when no script runs (a running one is answered in `script::before_lock`).
fn function_stats(cx: &mut Cx) -> Reply {
    functions::stats(cx.srv)
}

fn function_kill(cx: &mut Cx) -> Reply {
    script::scripts(cx.srv).kill_kind(false)
}

fn function_dump(cx: &mut Cx) -> Reply {
    let libs = script::scripts(cx.srv).functions.lock().clone();
    Reply::bulk(functions::dump(&libs))
}

fn function_restore(cx: &mut Cx) -> Reply {
    if cx.args.len() > 4 {
        return subcommand_syntax(&cx.args[1]);
    }
    let policy =
        match cx.args.get(3) {
            None => functions::Policy::Append,
            Some(p) if args::is(p, "APPEND") => functions::Policy::Append,
            Some(p) if args::is(p, "REPLACE") => functions::Policy::Replace,
            Some(p) if args::is(p, "FLUSH") => functions::Policy::Flush,
            Some(_) => return errors::err(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ),
        };
    let reply = functions::restore(cx.srv, &cx.args[2], policy);
    saved(cx, reply)
}

fn function_help(_cx: &mut Cx) -> Reply {
    args::help(
        "FUNCTION",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
        ],
    )
}
