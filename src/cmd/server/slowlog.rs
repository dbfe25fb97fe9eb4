//! SLOWLOG GET / LEN / RESET / HELP (Redis `slowlog.c`). The entries are made by
//! `cmd::observe` after each call that ran at least `slowlog-log-slower-than` µs.

use super::super::args;
use super::super::{errors, CommandSpec, Cx, KeySpec};
use crate::instance::slowlog::SlowLog;
use crate::num::parse_i64;
use crate::protocol::Reply;

const COUNT_ERR: &str = "ERR count should be greater than or equal to -1";

fn help(_cx: &mut Cx) -> Reply {
    args::help(
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    )
}

/// A GET count: -1 for all, else at least 0. Redis and Valkey give the same message for
/// a non-number as for one below -1.
pub(super) fn parse_count(arg: &[u8]) -> Result<usize, Reply> {
    match parse_i64(arg) {
        Some(-1) => Ok(usize::MAX),
        Some(n) if n >= 0 => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
        _ => Err(Reply::error(COUNT_ERR)),
    }
}

/// The newest `count` entries of a log as SLOWLOG GET and COMMANDLOG GET both print
/// them: id, unix time, duration or size, arguments, peer, client name.
pub(super) fn entries(log: &SlowLog, count: usize) -> Reply {
    Reply::Array(
        log.newest(count)
            .into_iter()
            .map(|e| {
                Reply::Array(vec![
                    Reply::Int(i64::try_from(e.id).unwrap_or(i64::MAX)),
                    Reply::Int(e.time),
                    Reply::Int(i64::try_from(e.value).unwrap_or(i64::MAX)),
                    Reply::Array(e.args.into_iter().map(Reply::Bulk).collect()),
                    Reply::bulk(e.peer),
                    Reply::Bulk(e.name),
                ])
            })
            .collect(),
    )
}

/// `SLOWLOG GET [count]`: the newest `count` entries (10 by default, -1 for all).
fn get(cx: &mut Cx) -> Reply {
    let a = cx.args;
    if a.len() > 3 {
        return errors::subcommand_syntax("slowlog", &a[1]);
    }
    let count = match a.get(2).map(|c| parse_count(c)) {
        None => 10,
        Some(Ok(n)) => n,
        Some(Err(e)) => return e,
    };
    entries(&cx.srv.slowlog, count)
}

fn len(cx: &mut Cx) -> Reply {
    Reply::Int(cx.srv.slowlog.len() as i64)
}

fn reset(cx: &mut Cx) -> Reply {
    cx.srv.slowlog.reset();
    Reply::OK
}

const ADMIN: &[&str] = &["admin", "loading", "stale"];
const ADMIN_ACL: &[&str] = &["admin", "slow", "dangerous"];

pub const SPEC: CommandSpec = CommandSpec {
    name: "slowlog",
    arity: -2,
    flags: &[],
    keys: KeySpec::None,
    acl: &["slow"],
    group: "server",
    since: "2.2.12",
    summary: "A container for slow log commands.",
    complexity: "Depends on subcommand.",
    subcommands: &[
        super::keyless_sub(
            "slowlog|get",
            -2,
            ADMIN,
            ADMIN_ACL,
            "2.2.12",
            "Returns the slow log's entries.",
            "O(N) where N is the number of entries returned",
            get,
        ),
        super::keyless_sub(
            "slowlog|len",
            2,
            ADMIN,
            ADMIN_ACL,
            "2.2.12",
            "Returns the number of entries in the slow log.",
            "O(1)",
            len,
        ),
        super::keyless_sub(
            "slowlog|reset",
            2,
            ADMIN,
            ADMIN_ACL,
            "2.2.12",
            "Clears all entries from the slow log.",
            "O(N) where N is the number of entries in the slowlog",
            reset,
        ),
        super::keyless_sub(
            "slowlog|help",
            2,
            &["loading", "stale"],
            &["slow"],
            "6.2.0",
            "Show helpful text about the different subcommands",
            "O(1)",
            help,
        ),
    ],
    ..CommandSpec::DEFAULT
};
