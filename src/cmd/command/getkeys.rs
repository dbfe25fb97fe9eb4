//! COMMAND GETKEYS / GETKEYSANDFLAGS, as Redis 7.2 finds keys (db.c
//! `getKeysFromCommandWithSpecs`): from the key specs when they are all usable and their
//! flags fixed, else from the command's own key finder (Redis's `*GetKeys` procs, written
//! here after db.c so the answers match for malformed lines too).

use super::super::args::is;
use super::super::table::CommandSpec;
use super::super::{errors, registry};
use super::meta::{self, Node};
use crate::num::parse_i64;
use crate::protocol::Reply;
use bytes::Bytes;

/// Key flags as Redis lists them.
type Flags = Vec<String>;

const RO_ACCESS: &[&str] = &["RO", "access"];
const RW_ACCESS_UPDATE: &[&str] = &["RW", "access", "update"];
const OW_UPDATE: &[&str] = &["OW", "update"];

fn flags(f: &[&str]) -> Flags {
    f.iter().map(|s| s.to_string()).collect()
}

/// Keys (argument positions in `line`, line[0] is the command) and their flags, or
/// Redis's error.
pub fn keys(line: &[Bytes]) -> Result<Vec<(usize, Flags)>, Reply> {
    let spec = match registry().resolve(line) {
        Ok((_, s)) if line.len() >= 2 || s.subcommands.is_empty() => s,
        _ => return Err(errors::err("ERR Invalid command specified")),
    };
    let specs = meta::meta(spec.name).map(|m| &m.key_specs);
    let proc_ = finder(spec.name);
    let has_keyspec = match specs {
        Some(s) => s.items().iter().any(|k| !has(k, "not_key")),
        // A command Redis 7.0 (the metadata's source) lacks: the table says.
        None => !matches!(spec.keys, super::KeySpec::None),
    };
    if proc_.is_none() && !has_keyspec {
        return Err(errors::err("ERR The command has no key arguments"));
    }
    if !spec.arity_ok(line.len()) {
        return Err(errors::err(
            "ERR Invalid number of arguments specified for command",
        ));
    }
    let found = find(spec, line);
    if found.is_empty() && !spec.has_flag("no_mandatory_keys") {
        return Err(errors::err("ERR Invalid arguments specified for command"));
    }
    Ok(found)
}

/// Redis `getKeysFromCommandWithSpecs` for a resolved command line: the key specs when
/// they all apply and their flags are fixed, else the command's finder.
fn find(spec: &CommandSpec, line: &[Bytes]) -> Vec<(usize, Flags)> {
    let specs = meta::meta(spec.name).map(|m| &m.key_specs);
    let has_keyspec = match specs {
        Some(s) => s.items().iter().any(|k| !has(k, "not_key")),
        None => !matches!(spec.keys, super::KeySpec::None),
    };
    let varflags = specs.is_some_and(|s| s.items().iter().any(|k| has(k, "variable_flags")));
    let mut found = None;
    if has_keyspec && !varflags {
        found = match specs {
            Some(s) => by_specs(s, line),
            None => Some(table_keys(spec, line)),
        };
    }
    match (found, finder(spec.name)) {
        (Some(k), _) => k,
        (None, Some(p)) => p(line),
        (None, None) => Vec::new(),
    }
}

/// The keys of a command line with the access ACL key patterns check (Redis
/// `ACLSelectorCheckKey`): `access` reads; `insert`, `delete` and `update` write. A
/// command without Redis metadata (newer than the reference) needs both.
pub fn acl_keys(spec: &CommandSpec, line: &[Bytes]) -> Vec<(usize, u8)> {
    use crate::instance::acl::{READ, WRITE};
    let known = meta::meta(spec.name).is_some();
    find(spec, line)
        .into_iter()
        .filter(|(i, _)| *i < line.len())
        .map(|(i, flags)| {
            let mut need = 0;
            for f in &flags {
                match f.as_str() {
                    "access" => need |= READ,
                    "insert" | "delete" | "update" => need |= WRITE,
                    _ => {}
                }
            }
            (i, if known { need } else { READ | WRITE })
        })
        .collect()
}

fn has(spec: &Node, flag: &str) -> bool {
    spec.get("flags")
        .is_some_and(|f| f.items().iter().any(|x| x.as_str() == Some(flag)))
}

/// Keys of a command without metadata, from the table (no flags known).
fn table_keys(spec: &CommandSpec, line: &[Bytes]) -> Vec<(usize, Flags)> {
    spec.key_indices(line)
        .into_iter()
        .map(|i| (i, Vec::new()))
        .collect()
}

/// Redis `getKeysUsingKeySpecs` with default search flags: `None` when a spec does not
/// apply to this line (or is incomplete), which sends the caller to the command's finder.
fn by_specs(specs: &Node, line: &[Bytes]) -> Option<Vec<(usize, Flags)>> {
    let argc = line.len() as i64;
    let mut out = Vec::new();
    for ks in specs.items() {
        if has(ks, "not_key") {
            continue;
        }
        let bs = ks.get("begin_search")?;
        let bs_spec = bs.get("spec");
        let mut first = match bs.get("type").and_then(Node::as_str) {
            Some("index") => bs_spec?.get("index")?.as_int()?,
            Some("keyword") => match keyword_start(bs_spec?, line)? {
                0 => continue, // keyword not found: this spec names no key
                at => at,
            },
            _ => return None,
        };
        let fk = ks.get("find_keys")?;
        let fk_spec = fk.get("spec");
        let int = |k: &str| fk_spec.and_then(|s| s.get(k)).and_then(Node::as_int);
        let (last, step) = match fk.get("type").and_then(Node::as_str) {
            Some("range") => {
                let (lastkey, step, limit) = (int("lastkey")?, int("keystep")?, int("limit")?);
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
                let (idx, firstkey, step) = (int("keynumidx")?, int("firstkey")?, int("keystep")?);
                if idx >= argc || first + idx >= argc {
                    return None;
                }
                let n = parse_i64(&line[(first + idx) as usize]).filter(|n| *n >= 0)?;
                first += firstkey;
                (first + n - 1, step)
            }
            _ => return None,
        };
        if last >= argc || last < first || first >= argc || step <= 0 {
            return None;
        }
        let f: Flags = ks
            .get("flags")
            .map(|f| {
                f.items()
                    .iter()
                    .filter_map(Node::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        let mut i = first;
        while i <= last {
            out.push((i as usize, f.clone()));
            i += step;
        }
        if has(ks, "incomplete") {
            return None;
        }
    }
    Some(out)
}

/// `keyword` begin-search: the position after the keyword (0 when absent), searched from
/// `startfrom` (negative: from the end, backwards).
fn keyword_start(spec: &Node, line: &[Bytes]) -> Option<i64> {
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
    Some(0)
}

type Finder = fn(&[Bytes]) -> Vec<(usize, Flags)>;

/// The commands Redis gives a `getkeys_proc`.
fn finder(name: &str) -> Option<Finder> {
    Some(match name {
        "zunionstore" | "zinterstore" | "zdiffstore" => |l| generic(l, 1, 2, 3),
        "zunion" | "zinter" | "zdiff" | "zintercard" | "sintercard" | "lmpop" | "zmpop" => {
            |l| generic(l, 0, 1, 2)
        }
        "eval" | "eval_ro" | "evalsha" | "evalsha_ro" | "fcall" | "fcall_ro" | "blmpop"
        | "bzmpop" => |l| generic(l, 0, 2, 3),
        "sort" => sort,
        "sort_ro" => |_| vec![(1, flags(RO_ACCESS))],
        "migrate" => migrate,
        "georadius" | "georadiusbymember" => georadius,
        "xread" | "xreadgroup" => xread,
        "set" => set,
        "bitfield" => bitfield,
        _ => return None,
    })
}

/// Redis `genericGetKeys` (key step 1): `numkeys` keys from `first`, then the store key.
fn generic(l: &[Bytes], store: usize, count: usize, first: usize) -> Vec<(usize, Flags)> {
    let argc = l.len() as i64;
    let num = l
        .get(count)
        .map_or(0, |a| i64::from(super::super::args::atoi(a)));
    if num < 1 || num > argc - first as i64 {
        return Vec::new();
    }
    let mut out: Vec<(usize, Flags)> = (0..num as usize).map(|i| (first + i, Vec::new())).collect();
    if store > 0 {
        out.push((store, Vec::new()));
    }
    out
}

fn sort(l: &[Bytes]) -> Vec<(usize, Flags)> {
    let mut out = vec![(1, flags(RO_ACCESS))];
    let mut store = None;
    let mut i = 2;
    while i < l.len() {
        if is(&l[i], "LIMIT") {
            i += 2;
        } else if is(&l[i], "GET") || is(&l[i], "BY") {
            i += 1;
        } else if is(&l[i], "STORE") && i + 1 < l.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    out.extend(store.map(|s| (s, flags(OW_UPDATE))));
    out
}

/// `migrateGetKeys`: the table's finder for MIGRATE is Redis's (src/cmd/migrate.rs).
fn migrate(l: &[Bytes]) -> Vec<(usize, Flags)> {
    let keys = registry().resolve(l).map(|(_, s)| s.key_indices(l));
    let f = flags(&["RW", "access", "delete"]);
    keys.unwrap_or_default()
        .into_iter()
        .map(|i| (i, f.clone()))
        .collect()
}

fn georadius(l: &[Bytes]) -> Vec<(usize, Flags)> {
    let mut stored = None;
    let mut i = 5;
    while i < l.len() {
        if (is(&l[i], "STORE") || is(&l[i], "STOREDIST")) && i + 1 < l.len() {
            stored = Some(i + 1);
            i += 1;
        }
        i += 1;
    }
    let mut out = vec![(1, Vec::new())];
    out.extend(stored.map(|s| (s, Vec::new())));
    out
}

fn xread(l: &[Bytes]) -> Vec<(usize, Flags)> {
    let mut streams = None;
    let mut i = 1;
    while i < l.len() {
        let a = &l[i];
        if is(a, "BLOCK") || is(a, "COUNT") {
            i += 1;
        } else if is(a, "GROUP") {
            i += 2;
        } else if is(a, "STREAMS") {
            streams = Some(i);
            break;
        } else if !is(a, "NOACK") {
            break;
        }
        i += 1;
    }
    let Some(pos) = streams else {
        return Vec::new();
    };
    let num = l.len() - pos - 1;
    if num == 0 || !num.is_multiple_of(2) {
        return Vec::new();
    }
    (pos + 1..pos + 1 + num / 2)
        .map(|i| (i, Vec::new()))
        .collect()
}

fn set(l: &[Bytes]) -> Vec<(usize, Flags)> {
    // Redis compares the first four bytes of a C string: "GET" exactly.
    let get = l.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"GET"));
    vec![(1, flags(if get { RW_ACCESS_UPDATE } else { OW_UPDATE }))]
}

fn bitfield(l: &[Bytes]) -> Vec<(usize, Flags)> {
    let mut readonly = true;
    let mut i = 2;
    while i < l.len() {
        let rem = l.len() - i - 1;
        let a = &l[i];
        if is(a, "GET") && rem >= 2 {
            i += 2;
        } else if (is(a, "SET") || is(a, "INCRBY")) && rem >= 3 {
            readonly = false;
            break;
        } else if is(a, "OVERFLOW") && rem >= 1 {
            i += 1;
        } else {
            readonly = false;
            break;
        }
        i += 1;
    }
    vec![(
        1,
        flags(if readonly {
            RO_ACCESS
        } else {
            RW_ACCESS_UPDATE
        }),
    )]
}
