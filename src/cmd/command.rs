//! COMMAND and its subcommands, all driven by the command table (`registry()`), with the
//! metadata the table lacks (tips, key specs, argument docs) from [`meta`].

mod getkeys;
pub use getkeys::acl_keys;
mod meta;

use super::args::{self, is};
use super::table::CommandSpec;
use super::{errors, registry, Cx, KeySpec};
use crate::protocol::Reply;
use crate::types::glob::glob_match;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "command",
    arity: -1,
    flags: &["loading", "stale"],
    keys: KeySpec::None,
    acl: &["slow", "connection"],
    group: "server",
    since: "2.8.13",
    summary: "Get array of Redis command details",
    complexity: "O(N) where N is the total number of Redis commands",
    subcommands: &[
        CommandSpec {
            name: "command|count",
            arity: 2,
            flags: &["loading", "stale"],
            keys: KeySpec::None,
            acl: &["slow", "connection"],
            group: "server",
            since: "2.8.13",
            summary: "Get total number of Redis commands",
            complexity: "O(1)",
            handler: command_count,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "command|docs",
            arity: -2,
            flags: &["loading", "stale"],
            keys: KeySpec::None,
            acl: &["slow", "connection"],
            group: "server",
            since: "7.0.0",
            summary: "Get array of specific Redis command documentation",
            complexity: "O(N) where N is the number of commands to look up",
            handler: command_docs,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "command|help",
            arity: 2,
            flags: &["loading", "stale"],
            keys: KeySpec::None,
            acl: &["slow", "connection"],
            group: "server",
            since: "5.0.0",
            summary: "Show helpful text about the different subcommands",
            complexity: "O(1)",
            handler: command_help,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "command|list",
            arity: -2,
            flags: &["loading", "stale"],
            keys: KeySpec::None,
            acl: &["slow", "connection"],
            group: "server",
            since: "7.0.0",
            summary: "Get an array of Redis command names",
            complexity: "O(N) where N is the total number of Redis commands",
            handler: command_list,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "command|getkeys",
            arity: -3,
            flags: &["loading", "stale"],
            keys: KeySpec::None,
            acl: &["slow", "connection"],
            group: "server",
            since: "2.8.13",
            summary: "Extract keys given a full Redis command",
            complexity: "O(N) where N is the number of arguments to the command",
            handler: command_getkeys,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "command|info",
            arity: -2,
            flags: &["loading", "stale"],
            keys: KeySpec::None,
            acl: &["slow", "connection"],
            group: "server",
            since: "2.8.13",
            summary:
                "Get array of specific Redis command details, or all when no argument is given.",
            complexity: "O(N) where N is the number of commands to look up",
            handler: command_info,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "command|getkeysandflags",
            arity: -3,
            flags: &["loading", "stale"],
            keys: KeySpec::None,
            acl: &["slow", "connection"],
            group: "server",
            since: "7.0.0",
            summary: "Extract keys and access flags given a full Redis command",
            complexity: "O(N) where N is the number of arguments to the command",
            handler: command_getkeysandflags,
            ..CommandSpec::DEFAULT
        },
    ],
    handler: command,
    ..CommandSpec::DEFAULT
}];

/// Flag order in Redis's replies (server.c `addReplyFlagsForCommand`).
const FLAG_ORDER: &[&str] = &[
    "write",
    "readonly",
    "denyoom",
    "module",
    "admin",
    "pubsub",
    "noscript",
    "blocking",
    "loading",
    "stale",
    "skip_monitor",
    "skip_slowlog",
    "asking",
    "fast",
    "no_auth",
    "may_replicate",
    "no_mandatory_keys",
    "no_async_loading",
    "no_multi",
    "movablekeys",
    "allow_busy",
];

fn rank(order: &[&str], s: &str) -> usize {
    order.iter().position(|o| *o == s).unwrap_or(order.len())
}

fn status_set<'a>(items: impl Iterator<Item = &'a str>) -> Reply {
    Reply::Set(items.map(|s| Reply::Status(s.to_string().into())).collect())
}

/// A command's flags as COMMAND INFO reports them (`movablekeys` from the key spec).
fn flags_of(spec: &CommandSpec) -> Reply {
    let mut flags: Vec<&str> = spec.flags.to_vec();
    if spec.movable_keys() && !flags.contains(&"movablekeys") {
        flags.push("movablekeys");
    }
    flags.sort_by_key(|f| rank(FLAG_ORDER, f));
    status_set(flags.into_iter())
}

fn acl_of(spec: &CommandSpec) -> Reply {
    let mut cats: Vec<&str> = spec.acl.to_vec();
    // ACL category order in Redis's replies (acl.c `ACLCommandCategories`).
    cats.sort_by_key(|c| rank(&crate::instance::acl::CATEGORIES, c));
    Reply::Set(
        cats.into_iter()
            .map(|c| Reply::Status(format!("@{c}").into()))
            .collect(),
    )
}

/// One COMMAND INFO entry: name, arity, flags, first/last/step, ACL categories, tips, key
/// specs, subcommands.
fn info_entry(spec: &'static CommandSpec) -> Reply {
    let (first, last, step) = spec.key_triple();
    let m = meta::meta(spec.name);
    let subs = if spec.subcommands.is_empty() {
        Reply::Set(Vec::new())
    } else {
        Reply::Array(spec.subcommands.iter().map(info_entry).collect())
    };
    Reply::Array(vec![
        Reply::bulk_static(spec.name),
        Reply::Int(spec.arity.into()),
        flags_of(spec),
        Reply::Int(first.into()),
        Reply::Int(last.into()),
        Reply::Int(step.into()),
        acl_of(spec),
        m.map_or(Reply::Set(Vec::new()), |m| m.tips.to_reply()),
        m.map_or(Reply::Set(Vec::new()), |m| m.key_specs.to_reply()),
        subs,
    ])
}

/// One COMMAND DOCS map.
fn docs_entry(spec: &'static CommandSpec) -> Reply {
    let mut map = vec![
        (
            Reply::bulk_static("summary"),
            Reply::bulk_static(spec.summary),
        ),
        (Reply::bulk_static("since"), Reply::bulk_static(spec.since)),
        (Reply::bulk_static("group"), Reply::bulk_static(spec.group)),
    ];
    if !spec.complexity.is_empty() {
        map.push((
            Reply::bulk_static("complexity"),
            Reply::bulk_static(spec.complexity),
        ));
    }
    if let Some(m) = meta::meta(spec.name) {
        map.extend(m.docs.iter().map(|(k, v)| (k.to_reply(), v.to_reply())));
    }
    if !spec.subcommands.is_empty() {
        map.push((
            Reply::bulk_static("subcommands"),
            Reply::Map(
                spec.subcommands
                    .iter()
                    .map(|s| (Reply::bulk_static(s.name), docs_entry(s)))
                    .collect(),
            ),
        ));
    }
    Reply::Map(map)
}

/// Looks up a full command name (`get`, `config|get`), case-insensitively.
fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    registry().lookup(name).map(|(_, s)| s)
}

/// The commands this server offers: the `RESPITE` test family only with
/// `--enable-test-commands`, so a plain server lists exactly Redis's commands.
fn offered(cx: &Cx) -> impl Iterator<Item = &'static CommandSpec> {
    let test = cx.srv.test_commands;
    registry()
        .top_level()
        .filter(move |s| test || !is_test_family(s))
}

/// `respite` and its subcommands (`respite|clock`, …).
fn is_test_family(s: &CommandSpec) -> bool {
    s.name == "respite" || s.name.starts_with("respite|")
}

/// [`lookup`], hiding the test family unless it is enabled.
fn lookup_offered(cx: &Cx, name: &[u8]) -> Option<&'static CommandSpec> {
    lookup(name).filter(|s| cx.srv.test_commands || !is_test_family(s))
}

fn command(cx: &mut Cx) -> Reply {
    Reply::Array(offered(cx).map(info_entry).collect())
}

fn command_count(cx: &mut Cx) -> Reply {
    Reply::Int(offered(cx).count() as i64)
}

fn command_info(cx: &mut Cx) -> Reply {
    if cx.args.len() == 2 {
        return command(cx);
    }
    Reply::Array(
        cx.args[2..]
            .iter()
            .map(|n| lookup_offered(cx, n).map_or(Reply::Nil, info_entry))
            .collect(),
    )
}

fn command_docs(cx: &mut Cx) -> Reply {
    let specs: Vec<&'static CommandSpec> = if cx.args.len() == 2 {
        offered(cx).collect()
    } else {
        cx.args[2..]
            .iter()
            .filter_map(|n| lookup_offered(cx, n))
            .collect()
    };
    Reply::Map(
        specs
            .into_iter()
            .map(|s| (Reply::bulk_static(s.name), docs_entry(s)))
            .collect(),
    )
}

enum ListFilter<'a> {
    None,
    Module,
    AclCat(&'a [u8]),
    Pattern(&'a [u8]),
}

fn command_list(cx: &mut Cx) -> Reply {
    let a = cx.args;
    let mut filter = ListFilter::None;
    let mut i = 2;
    while i < a.len() {
        if !(is(&a[i], "FILTERBY") && a.len() - 1 - i == 2) {
            return errors::syntax();
        }
        filter = if is(&a[i + 1], "MODULE") {
            ListFilter::Module
        } else if is(&a[i + 1], "ACLCAT") {
            ListFilter::AclCat(&a[i + 2])
        } else if is(&a[i + 1], "PATTERN") {
            ListFilter::Pattern(&a[i + 2])
        } else {
            return errors::syntax();
        };
        i += 3;
    }
    let keep = |s: &CommandSpec| match filter {
        ListFilter::None => true,
        // respite loads no modules.
        ListFilter::Module => false,
        ListFilter::AclCat(cat) => s.acl.iter().any(|c| is(cat, c)),
        ListFilter::Pattern(p) => glob_match(p, s.name.as_bytes(), true),
    };
    let test = cx.srv.test_commands;
    Reply::Array(
        registry()
            .specs
            .iter()
            .filter(|s| keep(s) && (test || !is_test_family(s)))
            .map(|s| Reply::bulk_static(s.name))
            .collect(),
    )
}

fn command_getkeys(cx: &mut Cx) -> Reply {
    let line = &cx.args[2..];
    match getkeys::keys(line) {
        Ok(keys) => Reply::Array(
            keys.iter()
                .map(|(i, _)| Reply::Bulk(line[*i].clone()))
                .collect(),
        ),
        Err(e) => e,
    }
}

fn command_getkeysandflags(cx: &mut Cx) -> Reply {
    let line = &cx.args[2..];
    match getkeys::keys(line) {
        Ok(keys) => Reply::Array(
            keys.into_iter()
                .map(|(i, flags)| {
                    Reply::Array(vec![
                        Reply::Bulk(line[i].clone()),
                        Reply::Set(flags.into_iter().map(|f| Reply::Status(f.into())).collect()),
                    ])
                })
                .collect(),
        ),
        Err(e) => e,
    }
}

fn command_help(_cx: &mut Cx) -> Reply {
    args::help(
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn line(words: &[&str]) -> Vec<Bytes> {
        words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    #[test]
    fn the_test_family_is_listed_only_when_enabled() {
        let mut c = crate::cmd::testing::Client::new();
        let n = match c.line("COMMAND COUNT") {
            Reply::Int(n) => n,
            other => panic!("{other:?}"),
        };
        assert_eq!(n as usize, registry().top_level().count() - 1);
        assert!(!c.srv.test_commands);
        for line in [
            "COMMAND LIST",
            "COMMAND LIST FILTERBY PATTERN resp*",
            "COMMAND INFO respite",
            "COMMAND DOCS respite",
        ] {
            let r = format!("{:?}", c.line(line));
            assert!(!r.to_lowercase().contains("respite"), "{line}: {r}");
        }
    }

    fn keys(words: &[&str]) -> Result<Vec<usize>, Reply> {
        getkeys::keys(&line(words)).map(|k| k.into_iter().map(|x| x.0).collect())
    }

    #[test]
    fn getkeys_follows_specs_then_finders() {
        let z = ["zunionstore", "d", "2", "a", "b", "WEIGHTS", "1", "2"];
        assert_eq!(keys(&z).unwrap(), vec![1, 3, 4]);
        assert_eq!(keys(&["mset", "a", "1", "b", "2"]).unwrap(), vec![1, 3]);
        let x = ["xread", "COUNT", "2", "STREAMS", "a", "b", "0", "0"];
        assert_eq!(keys(&x).unwrap(), vec![4, 5]);
        // An unusable numkeys sends Redis to its finder, which finds nothing.
        assert!(keys(&["zunionstore", "d", "x", "a"]).is_err());
        // SORT's STORE key comes from the finder, with its flags.
        let s = getkeys::keys(&line(&["sort", "k", "STORE", "d"])).unwrap();
        assert_eq!(s[1], (3, vec!["OW".to_string(), "update".to_string()]));
        // Shard channels are not keys.
        assert!(keys(&["spublish", "c", "m"]).is_err());
    }

    #[test]
    fn every_spec_sorts_flags() {
        for s in &registry().specs {
            if let Reply::Set(f) = flags_of(s) {
                assert_eq!(
                    f.len(),
                    s.flags.len() + usize::from(s.movable_keys() && !s.has_flag("movablekeys"))
                );
            }
        }
    }
}
