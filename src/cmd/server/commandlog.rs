//! Valkey 8.1's COMMANDLOG GET / LEN / RESET / HELP over its three logs: `slow` (the slow
//! log SLOWLOG shows), `large-request` and `large-reply` (made by `cmd::observe` once a
//! command line's reply is written).

use super::super::args::{self, is};
use super::super::{CommandSpec, Cx, KeySpec};
use super::slowlog::{entries, parse_count};
use crate::instance::slowlog::SlowLog;
use crate::protocol::Reply;

const TYPE_ERR: &str = "ERR type should be one of the following: slow, large-request, large-reply";

fn help(_cx: &mut Cx) -> Reply {
    args::help(
        "COMMANDLOG",
        &[
            "GET <count> <type>",
            "    Return top <count> entries of the specified <type> from the commandlog (-1 mean all).",
            "    Entries are made of:",
            "    id, timestamp,",
            "        time in microseconds for type of slow,",
            "        or size in bytes for type of large-request,",
            "        or size in bytes for type of large-reply",
            "    arguments array, client IP and port,",
            "    client name",
            "LEN <type>",
            "    Return the length of the specified type of commandlog.",
            "RESET <type>",
            "    Reset the specified type of commandlog.",
        ],
    )
}

fn log<'a>(cx: &'a Cx, name: &[u8]) -> Result<&'a SlowLog, Reply> {
    let srv = cx.srv;
    if is(name, "slow") {
        Ok(&srv.slowlog)
    } else if is(name, "large-request") {
        Ok(&srv.large_requests)
    } else if is(name, "large-reply") {
        Ok(&srv.large_replies)
    } else {
        Err(Reply::error(TYPE_ERR))
    }
}

/// `COMMANDLOG GET count type`: the count is checked before the type, as in Valkey.
fn get(cx: &mut Cx) -> Reply {
    let count = match parse_count(&cx.args[2]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    match log(cx, &cx.args[3]) {
        Ok(l) => entries(l, count),
        Err(e) => e,
    }
}

fn len(cx: &mut Cx) -> Reply {
    match log(cx, &cx.args[2]) {
        Ok(l) => Reply::Int(l.len() as i64),
        Err(e) => e,
    }
}

fn reset(cx: &mut Cx) -> Reply {
    match log(cx, &cx.args[2]) {
        Ok(l) => {
            l.reset();
            Reply::OK
        }
        Err(e) => e,
    }
}

const ADMIN: &[&str] = &["admin", "loading", "stale"];
const ADMIN_ACL: &[&str] = &["admin", "slow", "dangerous"];

pub const SPEC: CommandSpec = CommandSpec {
    name: "commandlog",
    arity: -2,
    flags: &[],
    keys: KeySpec::None,
    acl: &["slow"],
    group: "server",
    since: "8.1.0",
    summary: "A container for command log commands.",
    complexity: "Depends on subcommand.",
    subcommands: &[
        super::keyless_sub(
            "commandlog|get",
            4,
            ADMIN,
            ADMIN_ACL,
            "8.1.0",
            "Returns the specified command log's entries.",
            "O(N) where N is the number of entries returned",
            get,
        ),
        super::keyless_sub(
            "commandlog|len",
            3,
            ADMIN,
            ADMIN_ACL,
            "8.1.0",
            "Returns the number of entries in the specified type of command log.",
            "O(1)",
            len,
        ),
        super::keyless_sub(
            "commandlog|reset",
            3,
            ADMIN,
            ADMIN_ACL,
            "8.1.0",
            "Clears all entries from the specified type of command log.",
            "O(N) where N is the number of entries in the commandlog",
            reset,
        ),
        super::keyless_sub(
            "commandlog|help",
            2,
            &["loading", "stale"],
            &["slow"],
            "8.1.0",
            "Show helpful text about the different subcommands",
            "O(1)",
            help,
        ),
    ],
    ..CommandSpec::DEFAULT
};
