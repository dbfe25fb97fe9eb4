//! The layering guard: every `crate::…` path in `src/**/*.rs` (use lines, inline paths,
//! `super::` climbing out of a top-level module, exported macros) must name a module of a
//! LOWER rank than the file's own module, per the table in `src/lib.rs`'s module map. The
//! same table is DESIGN.md §1's, and this test checks they agree.
//!
//! Test-only code (`#[cfg(test)]` items and files declared under `#[cfg(test)]`) is not
//! checked: a unit test may build the whole stack to exercise a lower module.
//!
//! `scripts/deps.sh` prints the module → imports table with [`dependency_table`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The module map's rows: `//! | rank | [`module`] | …` in src/lib.rs (or the same table
/// without the `//! ` prefix in DESIGN.md).
fn ranks_in(text: &str) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim_start_matches("//!").trim();
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 || !cells[0].is_empty() {
            continue;
        }
        let Ok(rank) = cells[1].parse::<u32>() else {
            continue;
        };
        for m in cells[2].split(',') {
            let name = m.trim().trim_matches(|c| c == '[' || c == ']' || c == '`');
            if !name.is_empty() {
                out.insert(name.to_string(), rank);
            }
        }
    }
    out
}

fn lib_ranks() -> BTreeMap<String, u32> {
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    ranks_in(&lib)
}

/// One source file and its module path (`["cmd", "strings"]`).
struct File {
    module: Vec<String>,
    text: String,
}

fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Source without comments, string literals and `#[cfg(test)]` items: what the library
/// build itself depends on.
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'"' {
            // A plain string literal (raw strings hold no paths here); skip escapes.
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && i + 2 < b.len() && (b[i + 2] == b'\'' || b[i + 1] == b'\\') {
            // A char literal such as '"' or '\n' (not a lifetime).
            let end = src[i + 1..].find('\'').map_or(b.len(), |e| i + 1 + e + 1);
            let end = if b[i + 1] == b'\\' && b[i + 2] == b'\'' {
                i + 4
            } else {
                end
            };
            i = end.min(b.len());
            out.push_str("' '");
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    drop_cfg_test(&out)
}

/// Removes every item that follows `#[cfg(test)]`: a `{ … }` block or a `…;` item.
fn drop_cfg_test(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let brace = after.find('{');
        let semi = after.find(';');
        rest = match (brace, semi) {
            (Some(bi), Some(si)) if si < bi => &after[si + 1..],
            (Some(bi), _) => {
                let mut depth = 0usize;
                let mut end = after.len();
                for (k, c) in after[bi..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = bi + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                &after[end..]
            }
            (None, Some(si)) => &after[si + 1..],
            (None, None) => "",
        };
    }
    out.push_str(rest);
    out
}

/// Files declared with `#[cfg(test)] mod x;` (and everything below them) are test-only.
fn test_only_modules(files: &[File]) -> BTreeSet<Vec<String>> {
    let mut out = BTreeSet::new();
    for f in files {
        let t = f.text.replace("pub mod", "mod");
        let mut rest = t.as_str();
        while let Some(at) = rest.find("#[cfg(test)]") {
            let after = rest[at + "#[cfg(test)]".len()..].trim_start();
            if let Some(decl) = after.strip_prefix("mod ") {
                let name: String = decl
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if decl[name.len()..].trim_start().starts_with(';') {
                    let mut m = f.module.clone();
                    m.push(name);
                    out.insert(m);
                }
            }
            rest = &rest[at + 1..];
        }
    }
    out
}

fn files() -> Vec<File> {
    let src = root().join("src");
    let mut paths = Vec::new();
    walk(&src, &mut paths);
    let all: Vec<File> = paths
        .into_iter()
        .map(|p| File {
            module: module_path(p.strip_prefix(&src).unwrap()),
            text: std::fs::read_to_string(&p).unwrap(),
        })
        .collect();
    let test_only = test_only_modules(&all);
    all.into_iter()
        .filter(|f| !test_only.iter().any(|t| f.module.starts_with(t)))
        .collect()
}

fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first path segments each `use crate::{a::…, b::…}` group names.
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut start = true;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => start = true,
            c if start && depth == 0 && !c.is_whitespace() => {
                heads.push(ident(&group[i..]).to_string());
                start = false;
            }
            _ => {}
        }
    }
    heads
}

/// Top-level names a file refers to through `crate::`, `super::` (climbing to the root)
/// or an exported macro.
fn targets(f: &File, macros: &BTreeMap<String, String>) -> BTreeSet<String> {
    let code = strip(&f.text);
    let mut out = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        let boundary = rest[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '$'));
        let after = &rest[at + "crate::".len()..];
        if boundary {
            if let Some(group) = after.strip_prefix('{') {
                let end = group.find(';').unwrap_or(group.len());
                out.extend(group_heads(&group[..end]));
            } else {
                let name = ident(after);
                let name = macros.get(name).cloned().unwrap_or(name.to_string());
                out.insert(name);
            }
        }
        rest = after;
    }
    // `super::` from a top-level module's root file (or climbing out of it).
    let mut rest = code.as_str();
    while let Some(at) = rest.find("super::") {
        let before_ok = rest[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'));
        let mut after = &rest[at..];
        let mut ups = 0;
        while let Some(a) = after.strip_prefix("super::") {
            ups += 1;
            after = a;
        }
        if before_ok && ups >= f.module.len() && !f.module.is_empty() {
            if let Some(group) = after.strip_prefix('{') {
                let end = group.find(';').unwrap_or(group.len());
                out.extend(group_heads(&group[..end]));
            } else {
                out.insert(ident(after).to_string());
            }
        }
        rest = &rest[at + "super::".len() * ups.max(1)..];
    }
    out
}

/// `#[macro_export] macro_rules! name` → the module that defines it.
fn exported_macros(files: &[File]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for f in files {
        let mut rest = f.text.as_str();
        while let Some(at) = rest.find("#[macro_export]") {
            let after = &rest[at..];
            if let Some(m) = after.find("macro_rules!") {
                let name = ident(after[m + "macro_rules!".len()..].trim_start());
                if let Some(top) = f.module.first() {
                    out.insert(name.to_string(), top.clone());
                }
            }
            rest = &rest[at + 1..];
        }
    }
    out
}

/// What a root-level name (`crate::Clock`, `crate::REDIS_VERSION`) stands for: the module a
/// `pub use` re-exports it from, or `None` for the root's own constants, which any layer
/// may read.
fn root_names() -> BTreeMap<String, Option<String>> {
    let lib = strip(&std::fs::read_to_string(root().join("src/lib.rs")).unwrap());
    let mut out = BTreeMap::new();
    for line in lib.lines() {
        let line = line.trim();
        if let Some(u) = line.strip_prefix("pub use ") {
            let module = ident(u).to_string();
            let items = u.trim_end_matches(';');
            let items = items.split_once("::{").map_or_else(
                || vec![items.rsplit("::").next().unwrap()],
                |(_, g)| g.trim_end_matches('}').split(',').map(str::trim).collect(),
            );
            for it in items {
                out.insert(it.to_string(), Some(module.clone()));
            }
        } else if let Some(c) = line.strip_prefix("pub const ") {
            out.insert(ident(c).to_string(), None);
        }
    }
    out
}

/// module → the top-level modules its (non-test) code refers to.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let files = files();
    let macros = exported_macros(&files);
    let roots = root_names();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let Some(own) = f.module.first() else {
            continue; // lib.rs / main.rs: the root sees everything
        };
        let entry = g.entry(own.clone()).or_default();
        for t in targets(f, &macros) {
            let t = match roots.get(&t) {
                Some(None) => continue,
                Some(Some(m)) => m.clone(),
                None => t,
            };
            if t != *own && !t.is_empty() {
                entry.insert(t);
            }
        }
    }
    g
}

#[test]
fn every_import_points_down_the_module_map() {
    let ranks = lib_ranks();
    assert!(
        ranks.len() >= 10,
        "src/lib.rs's module map table: {ranks:?}"
    );
    let mut wrong = Vec::new();
    for (module, imports) in graph() {
        let Some(&r) = ranks.get(&module) else {
            wrong.push(format!("{module}: not in src/lib.rs's module map"));
            continue;
        };
        for t in imports {
            match ranks.get(&t) {
                Some(&tr) if tr < r => {}
                Some(&tr) => wrong.push(format!(
                    "{module} (rank {r}) imports {t} (rank {tr}): arrows point down only"
                )),
                None => wrong.push(format!("{module} imports {t}, which is not in the map")),
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
}

#[test]
fn every_module_is_in_the_map_and_the_map_in_design_md() {
    let ranks = lib_ranks();
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    for line in lib.lines() {
        if let Some(m) = line.strip_prefix("pub mod ") {
            let m = m.trim_end_matches(';');
            assert!(
                ranks.contains_key(m),
                "module {m} is missing from the module map"
            );
        }
    }
    let design = std::fs::read_to_string(root().join("DESIGN.md")).unwrap();
    assert_eq!(
        ranks_in(&design),
        ranks,
        "DESIGN.md §1's layer table and src/lib.rs's module map differ"
    );
}

/// The guard itself can fail: a `cmd` file importing `server`, or `types` importing
/// `engine`, is caught, however the path is written.
#[test]
fn the_guard_sees_every_way_of_writing_a_path() {
    let macros = BTreeMap::from([("config_num".to_string(), "config".to_string())]);
    let file = |module: &[&str], text: &str| File {
        module: module.iter().map(|s| s.to_string()).collect(),
        text: text.to_string(),
    };
    let cases: [(&[&str], &str, &[&str]); 7] = [
        (&["cmd", "strings"], "use crate::server::conn;", &["server"]),
        (
            &["types", "rdb"],
            "use crate::{\n    engine::Value,\n    num::{parse_i64, x},\n};",
            &["engine", "num"],
        ),
        (&["cmd"], "fn f() { super::server::start() }", &["server"]),
        (&["cmd", "a", "b"], "use super::super::super::server::x;", &["server"]),
        (&["cmd", "a"], "use super::Cx; // crate::server in a comment", &[]),
        (&["cmd"], "let n = crate::config_num!(s, \"x\");", &["config"]),
        (
            &["types"],
            "#[cfg(test)]\nmod tests { use crate::cmd::x; }\nfn g() -> &'static str { \"crate::cmd\" }",
            &[],
        ),
    ];
    for (module, text, want) in cases {
        let got = targets(&file(module, text), &macros);
        let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
        assert_eq!(got, want, "{module:?}: {text}");
    }
}

/// Prints module → imports, with each module's rank (`scripts/deps.sh`).
#[test]
#[ignore = "prints the table; run by scripts/deps.sh"]
fn dependency_table() {
    let ranks = lib_ranks();
    println!("| rank | module | imports |\n|---|---|---|");
    let g = graph();
    let mut rows: Vec<_> = g.iter().collect();
    rows.sort_by_key(|(m, _)| (ranks.get(*m).copied().unwrap_or(u32::MAX), m.to_string()));
    for (m, imports) in rows {
        let r = ranks.get(m).map_or("?".to_string(), u32::to_string);
        let list: Vec<String> = imports
            .iter()
            .map(|t| match (ranks.get(t), ranks.get(m)) {
                (Some(tr), Some(mr)) if tr >= mr => format!("**{t}** (up)"),
                _ => t.clone(),
            })
            .collect();
        println!("| {r} | {m} | {} |", list.join(", "));
    }
}
