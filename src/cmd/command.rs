//! COMMAND and its subcommands, all driven by the command table (`registry()`), with the
//! metadata the table lacks (tips, key specs, argument docs) from [`meta`].

mod meta;

use super::args::{self, is};
use super::table::CommandSpec;
use super::{errors, registry, Cx, KeySpec};
use crate::protocol::Reply;
use crate::types::glob::glob_match;
use bytes::Bytes;
use meta::Node;

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
            arity: -4,
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
            arity: -4,
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

/// ACL category order in Redis's replies (acl.c `ACLCommandCategories`).
const ACL_ORDER: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
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
    cats.sort_by_key(|c| rank(ACL_ORDER, c));
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

/// Resolves the command line given to GETKEYS and finds its key positions, with Redis's
/// errors.
fn keys_of(line: &[Bytes]) -> Result<(&'static CommandSpec, Vec<usize>), Reply> {
    let spec = match registry().resolve(line) {
        Ok((_, s)) if line.len() >= 2 || s.subcommands.is_empty() => s,
        _ => return Err(errors::err("ERR Invalid command specified")),
    };
    if matches!(spec.keys, KeySpec::None) {
        return Err(errors::err("ERR The command has no key arguments"));
    }
    if !spec.arity_ok(line.len()) {
        return Err(errors::err(
            "ERR Invalid number of arguments specified for command",
        ));
    }
    let keys = spec.key_indices(line);
    if keys.is_empty() && !spec.has_flag("no_mandatory_keys") {
        return Err(errors::err("ERR Invalid arguments specified for command"));
    }
    Ok((spec, keys))
}

fn command_getkeys(cx: &mut Cx) -> Reply {
    let line = &cx.args[2..];
    match keys_of(line) {
        Ok((_, keys)) => Reply::Array(keys.iter().map(|&i| Reply::Bulk(line[i].clone())).collect()),
        Err(e) => e,
    }
}

fn command_getkeysandflags(cx: &mut Cx) -> Reply {
    let line = &cx.args[2..];
    let (spec, keys) = match keys_of(line) {
        Ok(found) => found,
        Err(e) => return e,
    };
    let by_spec = meta::meta(spec.name).map_or_else(Vec::new, |m| keys_by_spec(&m.key_specs, line));
    Reply::Array(
        keys.iter()
            .map(|&i| {
                let flags = by_spec
                    .iter()
                    .find(|(pos, _)| *pos == i)
                    .map_or_else(Vec::new, |(_, f)| key_flags(spec, f, line));
                Reply::Array(vec![
                    Reply::Bulk(line[i].clone()),
                    status_set(flags.into_iter()),
                ])
            })
            .collect(),
    )
}

/// The flags reported for a key found by a key spec. `variable_flags` specs are resolved the
/// way Redis's own key finders do (SET is RW only with GET).
fn key_flags<'a>(spec: &CommandSpec, flags: &'a Node, line: &[Bytes]) -> Vec<&'a str> {
    let names: Vec<&str> = flags.items().iter().filter_map(Node::as_str).collect();
    if !names.contains(&"variable_flags") {
        return names;
    }
    if spec.name == "set" {
        return if line.iter().skip(3).any(|a| is(a, "GET")) {
            vec!["RW", "access", "update"]
        } else {
            vec!["OW", "update"]
        };
    }
    names
        .into_iter()
        .filter(|f| *f != "variable_flags")
        .collect()
}

/// Key positions and flags from Redis key specs (db.c `getKeysUsingKeySpecs`, skipping
/// specs that do not apply, as with `GET_KEYSPEC_RETURN_PARTIAL`).
fn keys_by_spec<'a>(specs: &'a Node, line: &[Bytes]) -> Vec<(usize, &'a Node)> {
    let argc = line.len() as i64;
    let mut out = Vec::new();
    for ks in specs.items() {
        let Some(flags) = ks.get("flags") else {
            continue;
        };
        if flags.items().iter().any(|f| f.as_str() == Some("not_key")) {
            continue;
        }
        let (Some(bs), Some(fk)) = (ks.get("begin_search"), ks.get("find_keys")) else {
            continue;
        };
        let bs_spec = bs.get("spec");
        let first = match bs.get("type").and_then(Node::as_str) {
            Some("index") => bs_spec.and_then(|s| s.get("index")).and_then(Node::as_int),
            Some("keyword") => keyword_start(bs_spec, line),
            _ => None,
        };
        let Some(mut first) = first else { continue };
        let fk_spec = fk.get("spec");
        let int = |k: &str| fk_spec.and_then(|s| s.get(k)).and_then(Node::as_int);
        let (last, step) = match fk.get("type").and_then(Node::as_str) {
            Some("range") => {
                let (Some(lastkey), Some(step), Some(limit)) =
                    (int("lastkey"), int("keystep"), int("limit"))
                else {
                    continue;
                };
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / limit + lastkey)
                };
                (last, step)
            }
            Some("keynum") => {
                let (Some(idx), Some(firstkey), Some(step)) =
                    (int("keynumidx"), int("firstkey"), int("keystep"))
                else {
                    continue;
                };
                let at = first + idx;
                if at < 0 || at >= argc {
                    continue;
                }
                let Some(n) = crate::protocol::parse::parse_i64(&line[at as usize])
                    .filter(|n| *n >= 0 && *n <= argc)
                else {
                    continue;
                };
                first += firstkey;
                (first + n - 1, step)
            }
            _ => continue,
        };
        if step <= 0 || last >= argc || last < first || first >= argc || first < 1 {
            continue;
        }
        let mut i = first;
        while i <= last {
            out.push((i as usize, flags));
            i += step;
        }
    }
    out
}

/// `keyword` begin-search: the argument after the keyword, searched from `startfrom`
/// (negative counts from the end, searching backwards).
fn keyword_start(spec: Option<&Node>, line: &[Bytes]) -> Option<i64> {
    let spec = spec?;
    let kw = spec.get("keyword")?.as_str()?;
    let from = spec.get("startfrom")?.as_int()?;
    let argc = line.len() as i64;
    let (start, end) = if from > 0 {
        (from, argc - 1)
    } else {
        (argc + from, 1)
    };
    let mut i = start;
    while i != end {
        if i >= argc || i < 1 {
            break;
        }
        if is(&line[i as usize], kw) {
            return Some(i + 1);
        }
        i += if start <= end { 1 } else { -1 };
    }
    None
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

    #[test]
    fn key_specs_find_keys() {
        let m = meta::meta("zunionstore").unwrap();
        let l = line(&["zunionstore", "d", "2", "a", "b", "WEIGHTS", "1", "2"]);
        let found: Vec<usize> = keys_by_spec(&m.key_specs, &l).iter().map(|x| x.0).collect();
        assert_eq!(found, vec![1, 3, 4]);
        let m = meta::meta("mset").unwrap();
        let l = line(&["mset", "a", "1", "b", "2"]);
        let found: Vec<usize> = keys_by_spec(&m.key_specs, &l).iter().map(|x| x.0).collect();
        assert_eq!(found, vec![1, 3]);
        let m = meta::meta("xread").unwrap();
        let l = line(&["xread", "COUNT", "2", "STREAMS", "a", "b", "0", "0"]);
        let found: Vec<usize> = keys_by_spec(&m.key_specs, &l).iter().map(|x| x.0).collect();
        assert_eq!(found, vec![4, 5]);
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
