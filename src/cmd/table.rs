//! The command table is data: every command's Redis metadata (arity, flags, key positions,
//! ACL categories, docs) next to its handler and the lock it needs. The same table drives
//! arity checks, `COMMAND`, MULTI queueing, (later) script rules, persistence and routing.

use super::Cx;
use crate::protocol::Reply;
use bytes::Bytes;

pub type Handler = fn(&mut Cx) -> Reply;

/// Where a command's keys are (Redis's legacy first/last/step triple, or a finder for
/// `numkeys` forms).
#[derive(Clone, Copy)]
pub enum KeySpec {
    None,
    /// first, last (negative counts from the end), step.
    Range(i32, i32, i32),
    /// Arbitrary finder; the triple is what `COMMAND INFO` reports.
    Custom {
        first: i32,
        last: i32,
        step: i32,
        find: fn(&[Bytes]) -> Vec<usize>,
    },
}

/// How much of the keyspace a command locks (DESIGN.md §4).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Lock {
    /// Only the shards of its keys (from `KeySpec`).
    Keys,
    /// The whole keyspace, exclusively (EXEC, FLUSHALL, KEYS, SWAPDB, MOVE…).
    All,
}

pub struct CommandSpec {
    /// Lowercase name; subcommands are `container|sub` as Redis names them.
    pub name: &'static str,
    pub arity: i32,
    pub flags: &'static [&'static str],
    pub keys: KeySpec,
    /// ACL categories without the `@`.
    pub acl: &'static [&'static str],
    pub group: &'static str,
    pub since: &'static str,
    pub summary: &'static str,
    pub complexity: &'static str,
    pub handler: Handler,
    pub lock: Lock,
    pub subcommands: &'static [CommandSpec],
}

fn unreachable_handler(_: &mut Cx) -> Reply {
    Reply::error("ERR internal error: command has no handler")
}

impl CommandSpec {
    pub const DEFAULT: CommandSpec = CommandSpec {
        name: "",
        arity: 0,
        flags: &[],
        keys: KeySpec::None,
        acl: &[],
        group: "generic",
        since: "1.0.0",
        summary: "",
        complexity: "",
        handler: unreachable_handler,
        lock: Lock::Keys,
        subcommands: &[],
    };

    pub fn has_flag(&self, f: &str) -> bool {
        self.flags.contains(&f)
    }

    pub fn is_write(&self) -> bool {
        self.has_flag("write")
    }

    /// The legacy (first, last, step) triple.
    pub fn key_triple(&self) -> (i32, i32, i32) {
        match self.keys {
            KeySpec::None => (0, 0, 0),
            KeySpec::Range(f, l, s) => (f, l, s),
            KeySpec::Custom {
                first, last, step, ..
            } => (first, last, step),
        }
    }

    pub fn movable_keys(&self) -> bool {
        matches!(self.keys, KeySpec::Custom { .. })
    }

    /// Indices of key arguments in `args` (args[0] is the command name).
    pub fn key_indices(&self, args: &[Bytes]) -> Vec<usize> {
        match self.keys {
            KeySpec::None => Vec::new(),
            KeySpec::Range(first, last, step) => range_keys(args.len(), first, last, step),
            KeySpec::Custom { find, .. } => find(args),
        }
    }

    pub fn arity_ok(&self, argc: usize) -> bool {
        let a = self.arity;
        (a > 0 && argc as i32 == a) || (a < 0 && argc as i32 >= -a)
    }
}

pub fn range_keys(argc: usize, first: i32, last: i32, step: i32) -> Vec<usize> {
    if first <= 0 || step <= 0 {
        return Vec::new();
    }
    let argc = argc as i32;
    let last = if last < 0 {
        argc + last
    } else {
        last.min(argc - 1)
    };
    let mut out = Vec::new();
    let mut i = first;
    while i <= last && i < argc {
        out.push(i as usize);
        i += step;
    }
    out
}

/// Key finder for `cmd numkeys key [key ...]` forms where numkeys is at `args[pos]`.
pub fn numkeys_at(args: &[Bytes], pos: usize) -> Vec<usize> {
    let Some(n) = args.get(pos).and_then(|a| crate::num::parse_i64(a)) else {
        return Vec::new();
    };
    // A count running past the arguments names no keys (COMMAND GETKEYS then reports
    // Redis's "Invalid arguments" error; the command itself reports its own).
    if n <= 0 || n as u64 > (args.len() - pos - 1) as u64 {
        return Vec::new();
    }
    (pos + 1..pos + 1 + n as usize).collect()
}
