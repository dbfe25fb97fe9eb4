//! Redis 7 Functions: the per-server library registry (FUNCTION LOAD / DELETE / FLUSH /
//! RESTORE swap libraries under one lock) and the library metadata rules of Redis's
//! functions.c. Library code is compiled per interpreter (engine.rs), lazily, keyed by the
//! library's id, so a replaced library is recompiled on every worker thread.

use super::engine::{interp, scripts, Registered};
use super::shebang::Flags;
use crate::instance::errors;
use crate::instance::state::Shared;
use crate::protocol::parse::split_args;
use crate::protocol::Reply;
use crate::types::glob::glob_match;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A registered function's metadata.
#[derive(Clone, Debug)]
pub struct FuncInfo {
    pub name: String,
    pub desc: Option<Bytes>,
    pub flags: Flags,
}

/// A loaded library: its whole code (shebang included, as FUNCTION LIST WITHCODE and
/// FUNCTION DUMP give it back) and its functions in registration order.
#[derive(Debug)]
pub struct Library {
    /// Unique per load: interpreters recompile when it changes.
    pub id: u64,
    pub name: String,
    pub code: Bytes,
    /// Where the code after the shebang line starts.
    pub code_at: usize,
    pub funcs: Vec<FuncInfo>,
}

/// A library's parsed first line.
#[derive(Debug, PartialEq, Eq)]
pub struct Meta {
    pub engine: Vec<u8>,
    pub name: Vec<u8>,
    /// Offset of the code after the shebang (its `\n` kept, so line numbers hold).
    pub code_at: usize,
}

/// Redis `functionExtractLibMetaData`. Errors lack the `ERR ` prefix.
pub fn metadata(code: &[u8]) -> Result<Meta, String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    // `strchr` on a C string: a NUL before the line feed ends the search.
    let end = match code.iter().position(|&c| c == b'\n' || c == 0) {
        Some(n) if code[n] == b'\n' => n,
        _ => return Err("Invalid library metadata".into()),
    };
    let parts = match split_args(&code[..end]) {
        Some(p) if !p.is_empty() => p,
        _ => return Err("Invalid library metadata".into()),
    };
    let engine = cstr(&parts[0]).get(2..).unwrap_or_default().to_vec();
    let mut name: Option<Vec<u8>> = None;
    for part in &parts[1..] {
        let part = cstr(part);
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    "Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(part[5..].to_vec());
            continue;
        }
        return Err(format!(
            "Invalid metadata value given: {}",
            String::from_utf8_lossy(part)
        ));
    }
    let Some(name) = name else {
        return Err("Library name was not given".into());
    };
    Ok(Meta {
        engine,
        name,
        code_at: end,
    })
}

/// C string view: Redis handles these parts with `strcmp` / `%s`.
fn cstr(b: &[u8]) -> &[u8] {
    b.iter().position(|&c| c == 0).map_or(b, |n| &b[..n])
}

/// Redis `functionsVerifyName`: `[a-zA-Z0-9_]+`.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Every library of a server, with the case-insensitive function index FCALL uses.
#[derive(Default, Clone)]
pub struct Libraries {
    libs: BTreeMap<String, Arc<Library>>,
    /// Lower-cased function name → library name.
    index: HashMap<String, String>,
}

impl Libraries {
    pub fn get(&self, name: &str) -> Option<&Arc<Library>> {
        self.libs.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Library>> {
        self.libs.values()
    }

    pub fn len(&self) -> usize {
        self.libs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.libs.is_empty()
    }

    pub fn function_count(&self) -> usize {
        self.index.len()
    }

    /// The library and metadata of a function (names match case-insensitively).
    pub fn find(&self, name: &[u8]) -> Option<(Arc<Library>, FuncInfo)> {
        let key = String::from_utf8_lossy(name).to_ascii_lowercase();
        let lib = self.libs.get(self.index.get(&key)?)?;
        let f = lib
            .funcs
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(&key))?;
        Some((lib.clone(), f.clone()))
    }

    /// The first function of `lib` whose name another library already uses.
    pub fn collision<'a>(&self, lib: &'a Library) -> Option<&'a str> {
        lib.funcs
            .iter()
            .find(|f| self.index.contains_key(&f.name.to_ascii_lowercase()))
            .map(|f| f.name.as_str())
    }

    pub fn link(&mut self, lib: Arc<Library>) {
        for f in &lib.funcs {
            self.index
                .insert(f.name.to_ascii_lowercase(), lib.name.clone());
        }
        self.libs.insert(lib.name.clone(), lib);
    }

    pub fn unlink(&mut self, name: &str) -> Option<Arc<Library>> {
        let lib = self.libs.remove(name)?;
        for f in &lib.funcs {
            self.index.remove(&f.name.to_ascii_lowercase());
        }
        Some(lib)
    }

    /// Redis `libraryJoin`: adds every library of `src`; on a name clash either replaces
    /// (`replace`) or fails. On failure `self` is left as it was.
    pub fn join(&mut self, src: Libraries, replace: bool) -> Result<(), String> {
        let mut next = self.clone();
        for lib in src.libs.values() {
            if next.libs.contains_key(&lib.name) {
                if !replace {
                    return Err(format!("Library {} already exists", lib.name));
                }
                next.unlink(&lib.name);
            }
        }
        for lib in src.libs.values() {
            if let Some(f) = next.collision(lib) {
                return Err(format!("Function {f} already exists"));
            }
        }
        for lib in src.libs.into_values() {
            next.link(lib);
        }
        *self = next;
        Ok(())
    }
}

/// Compiles and runs a library's code on this thread (Redis
/// `functionsCreateWithLibraryCtx` up to linking): metadata, name and engine checks, the
/// existing-library check against `existing` (skipped with `replace`), then the code.
/// Errors are full reply texts.
fn build(
    srv: &Arc<Shared>,
    code: &[u8],
    replace: bool,
    existing: &Libraries,
) -> Result<(Arc<Library>, Vec<Registered>), String> {
    let md = metadata(code).map_err(|e| format!("ERR {e}"))?;
    if !valid_name(&md.name) {
        return Err(format!("ERR {}", errors::FUNCTION_NAME_RULES));
    }
    if !md.engine.eq_ignore_ascii_case(b"lua") {
        return Err(format!(
            "ERR Engine '{}' not found",
            String::from_utf8_lossy(&md.engine)
        ));
    }
    // Checked by `valid_name`: ASCII only.
    let name = String::from_utf8_lossy(&md.name).into_owned();
    if !replace && existing.get(&name).is_some() {
        return Err(format!("ERR Library '{name}' already exists"));
    }
    let s = scripts(srv);
    let it = interp(srv)?;
    let regs = it.run_library(&code[md.code_at..])?;
    if regs.is_empty() {
        return Err("ERR No functions registered".into());
    }
    let lib = Library {
        id: s.next_library_id(),
        name,
        code: Bytes::copy_from_slice(code),
        code_at: md.code_at,
        funcs: regs
            .iter()
            .map(|r| FuncInfo {
                name: r.name.clone(),
                desc: r.desc.clone(),
                flags: r.flags,
            })
            .collect(),
    };
    Ok((Arc::new(lib), regs))
}

/// Adds a built library to `libs`, replacing its namesake; fails on a function name
/// another library holds.
fn install(libs: &mut Libraries, lib: Arc<Library>) -> Result<(), String> {
    let old = libs.unlink(&lib.name);
    if let Some(f) = libs.collision(&lib) {
        let err = format!("ERR Function {f} already exists");
        if let Some(old) = old {
            libs.link(old);
        }
        return Err(err);
    }
    libs.link(lib);
    Ok(())
}

/// FUNCTION LOAD [REPLACE] code: the library name, or the error reply.
pub fn load(srv: &Arc<Shared>, code: &[u8], replace: bool) -> Reply {
    let s = scripts(srv);
    // Callers hold the whole keyspace (`Lock::All`), so no script runs and no other
    // FUNCTION command interleaves between the check, the build and the link.
    let snapshot = s.functions.lock().clone();
    let (lib, regs) = match build(srv, code, replace, &snapshot) {
        Ok(b) => b,
        Err(e) => return Reply::error(e),
    };
    let mut libs = s.functions.lock();
    match install(&mut libs, lib.clone()) {
        Ok(()) => {
            if let Ok(it) = interp(srv) {
                it.cache_library(&lib.name, lib.id, regs);
            }
            Reply::bulk(lib.name.clone())
        }
        Err(e) => Reply::error(e),
    }
}

/// How FUNCTION RESTORE treats existing libraries.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Flush,
    Append,
    Replace,
}

/// FUNCTION RESTORE payload [policy].
pub fn restore(srv: &Arc<Shared>, payload: &[u8], policy: Policy) -> Reply {
    let codes = match restore_codes(payload) {
        Ok(c) => c,
        Err(e) => return Reply::error(format!("ERR {e}")),
    };
    let mut fresh = Libraries::default();
    for code in codes {
        let built = build(srv, &code, false, &fresh).and_then(|(lib, _)| install(&mut fresh, lib));
        if let Err(e) = built {
            return Reply::error(e);
        }
    }
    let s = scripts(srv);
    let mut libs = s.functions.lock();
    if policy == Policy::Flush {
        *libs = fresh;
        return Reply::OK;
    }
    match libs.join(fresh, policy == Policy::Replace) {
        Ok(()) => Reply::OK,
        Err(e) => Reply::error(format!("ERR {e}")),
    }
}

/// Every library's code (what the durable engine keeps after each FUNCTION LOAD, DELETE,
/// FLUSH or RESTORE).
pub fn codes(srv: &Arc<Shared>) -> Vec<Bytes> {
    let s = scripts(srv);
    let libs = s.functions.lock();
    libs.iter().map(|lib| lib.code.clone()).collect()
}

/// Start-up on the durable engine: the saved libraries become the server's, as Redis loads
/// them from its RDB file before serving clients. Fails (with the library's error, so the
/// server does not start, as Redis refuses an RDB file whose library fails to load) if a
/// library does not compile or two of them clash.
pub fn load_saved(srv: &Arc<Shared>, codes: &[Bytes]) -> Result<usize, String> {
    let mut fresh = Libraries::default();
    for code in codes {
        build(srv, code, false, &fresh).and_then(|(lib, _)| install(&mut fresh, lib))?;
    }
    let n = fresh.len();
    *scripts(srv).functions.lock() = fresh;
    Ok(n)
}

/// FUNCTION FLUSH: drops the libraries and, as SCRIPT FLUSH does, the interpreters
/// (every thread builds a fresh one at its next script), so no state a library left in
/// Lua survives it.
pub fn flush(srv: &Arc<Shared>) {
    let s = scripts(srv);
    *s.functions.lock() = Libraries::default();
    s.recreate_interpreters();
}

/// FUNCTION DELETE name.
pub fn delete(srv: &Arc<Shared>, name: &[u8]) -> Reply {
    let name = String::from_utf8_lossy(name);
    match scripts(srv).functions.lock().unlink(&name) {
        Some(_) => Reply::OK,
        None => errors::err(errors::LIBRARY_NOT_FOUND),
    }
}

/// FUNCTION STATS (also answered while a script runs: see `before_lock`).
pub fn stats(srv: &Arc<Shared>) -> Reply {
    let s = scripts(srv);
    let running = match (s.running_for_ms(), s.running_function()) {
        (Some(_), None) => return errors::err(errors::BUSY),
        (Some(ms), Some((name, cmd))) => Reply::Map(vec![
            (Reply::bulk_static("name"), Reply::bulk(name)),
            (
                Reply::bulk_static("command"),
                Reply::Array(cmd.into_iter().map(Reply::Bulk).collect()),
            ),
            (Reply::bulk_static("duration_ms"), Reply::Int(ms as i64)),
        ]),
        (None, _) => Reply::Nil,
    };
    let (nlib, nfunc) = {
        let libs = s.functions.lock();
        (libs.len(), libs.function_count())
    };
    Reply::Map(vec![
        (Reply::bulk_static("running_script"), running),
        (
            Reply::bulk_static("engines"),
            Reply::Map(vec![(
                Reply::bulk_static("LUA"),
                Reply::Map(vec![
                    (
                        Reply::bulk_static("libraries_count"),
                        Reply::Int(nlib as i64),
                    ),
                    (
                        Reply::bulk_static("functions_count"),
                        Reply::Int(nfunc as i64),
                    ),
                ]),
            )]),
        ),
    ])
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE].
pub fn list(srv: &Arc<Shared>, args: &[Bytes]) -> Reply {
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if !with_code && a.eq_ignore_ascii_case(b"withcode") {
            with_code = true;
        } else if pattern.is_none() && a.eq_ignore_ascii_case(b"libraryname") {
            let Some(p) = args.get(i + 1) else {
                return errors::err("ERR library name argument was not given");
            };
            pattern = Some(p);
            i += 1;
        } else {
            return Reply::error(format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(cstr(a))
            ));
        }
        i += 1;
    }
    let libs = scripts(srv).functions.lock().clone();
    let out = libs
        .iter()
        .filter(|l| pattern.is_none_or(|p| glob_match(p, l.name.as_bytes(), true)))
        .map(|l| {
            let funcs = l
                .funcs
                .iter()
                .map(|f| {
                    Reply::Map(vec![
                        (Reply::bulk_static("name"), Reply::bulk(f.name.clone())),
                        (
                            Reply::bulk_static("description"),
                            f.desc.clone().map_or(Reply::Nil, Reply::Bulk),
                        ),
                        (
                            Reply::bulk_static("flags"),
                            Reply::Set(f.flags.names().map(Reply::status).collect()),
                        ),
                    ])
                })
                .collect();
            let mut m = vec![
                (
                    Reply::bulk_static("library_name"),
                    Reply::bulk(l.name.clone()),
                ),
                (Reply::bulk_static("engine"), Reply::bulk_static("LUA")),
                (Reply::bulk_static("functions"), Reply::Array(funcs)),
            ];
            if with_code {
                m.push((
                    Reply::bulk_static("library_code"),
                    Reply::Bulk(l.code.clone()),
                ));
            }
            Reply::Map(m)
        })
        .collect();
    Reply::Array(out)
}

/// RDB opcode before each library in a FUNCTION DUMP payload (RDB_OPCODE_FUNCTION2).
pub const OPCODE_FUNCTION2: u8 = 245;
/// The pre-GA (7.0 release candidates) function opcode, refused by RESTORE.
pub const OPCODE_FUNCTION_PRE_GA: u8 = 246;

/// FUNCTION DUMP's payload: each library's code as an RDB string after its opcode, then
/// the RDB version and CRC-64.
pub fn dump(libs: &Libraries) -> Vec<u8> {
    use crate::types::rdb::{crc64, Writer, RDB_VERSION};
    let mut w = Writer::new();
    for lib in libs.iter() {
        w.byte(OPCODE_FUNCTION2);
        w.string(&lib.code);
    }
    w.raw(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &w.buf);
    w.raw(&crc.to_le_bytes());
    w.buf
}

/// The library codes of a FUNCTION RESTORE payload, after its framing was checked.
/// Errors are Redis's reply texts without `ERR `.
pub fn restore_codes(payload: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    use crate::types::rdb::{crc64, Reader, RDB_VERSION_MAX};
    let bad_frame = || "DUMP payload version or checksum are wrong".to_string();
    let n = payload.len();
    if n < 10 {
        return Err(bad_frame());
    }
    let version = u16::from_le_bytes([payload[n - 10], payload[n - 9]]);
    let crc = u64::from_le_bytes(payload[n - 8..].try_into().map_err(|_| bad_frame())?);
    if version > RDB_VERSION_MAX || crc64(0, &payload[..n - 8]) != crc {
        return Err(bad_frame());
    }
    // As Redis's rio over the whole buffer: a library read may run into the trailer.
    let mut r = Reader::new(payload);
    let mut out = Vec::new();
    while r.remaining() > 10 {
        let t = r.byte().map_err(|_| "can not read data type".to_string())?;
        if t == OPCODE_FUNCTION_PRE_GA {
            return Err("Pre-GA function format not supported".into());
        }
        if t != OPCODE_FUNCTION2 {
            return Err("given type is not a function".into());
        }
        let code = r
            .string()
            .map_err(|_| "Failed loading library payload".to_string())?;
        out.push(code);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_rules() {
        let m = metadata(b"#!lua name=mylib\nreturn").unwrap();
        assert_eq!(
            (m.engine.as_slice(), m.name.as_slice()),
            (&b"lua"[..], &b"mylib"[..])
        );
        assert_eq!(m.code_at, 16);
        assert_eq!(metadata(b"#!LUA NAME=x\n").unwrap().name, b"x");
        let err = |c: &[u8]| metadata(c).unwrap_err();
        assert_eq!(err(b"return 1"), "Missing library metadata");
        assert_eq!(err(b"#!lua name=x"), "Invalid library metadata");
        assert_eq!(err(b"#!lua\n"), "Library name was not given");
        assert_eq!(
            err(b"#!lua foo=bar\n"),
            "Invalid metadata value given: foo=bar"
        );
        assert_eq!(
            err(b"#!lua name=a name=b\n"),
            "Invalid metadata value, name argument was given multiple times"
        );
        assert_eq!(metadata(b"#! name=a\n").unwrap().engine, b"");
    }

    #[test]
    fn names() {
        assert!(valid_name(b"a_B9"));
        assert!(!valid_name(b""));
        assert!(!valid_name(b"a-b"));
        assert!(!valid_name(b"a\0"));
    }

    fn lib(id: u64, name: &str, funcs: &[&str]) -> Arc<Library> {
        Arc::new(Library {
            id,
            name: name.into(),
            code: Bytes::new(),
            code_at: 0,
            funcs: funcs
                .iter()
                .map(|f| FuncInfo {
                    name: (*f).into(),
                    desc: None,
                    flags: Flags::default(),
                })
                .collect(),
        })
    }

    #[test]
    fn join_and_find() {
        let mut a = Libraries::default();
        a.link(lib(1, "l1", &["Foo", "bar"]));
        assert_eq!(a.find(b"FOO").unwrap().1.name, "Foo");
        let mut b = Libraries::default();
        b.link(lib(2, "l1", &["baz"]));
        assert_eq!(
            a.clone().join(b, false).unwrap_err(),
            "Library l1 already exists"
        );
        let mut c = Libraries::default();
        c.link(lib(3, "l2", &["BAR"]));
        assert_eq!(a.join(c, true).unwrap_err(), "Function BAR already exists");
        let mut d = Libraries::default();
        d.link(lib(4, "l1", &["baz"]));
        a.join(d, true).unwrap();
        assert!(a.find(b"foo").is_none());
        assert_eq!(a.find(b"baz").unwrap().0.id, 4);
        assert_eq!(a.function_count(), 1);
    }

    #[test]
    fn dump_roundtrip() {
        let mut a = Libraries::default();
        let mut l = Library {
            id: 1,
            name: "x".into(),
            code: Bytes::from_static(b"#!lua name=x\nredis.register_function('f', function() end)"),
            code_at: 12,
            funcs: vec![],
        };
        l.funcs.push(FuncInfo {
            name: "f".into(),
            desc: None,
            flags: Flags::default(),
        });
        a.link(Arc::new(l));
        let p = dump(&a);
        assert_eq!(
            restore_codes(&p).unwrap(),
            vec![a.get("x").unwrap().code.to_vec()]
        );
        let mut bad = p.clone();
        bad[3] ^= 1;
        assert!(restore_codes(&bad).is_err());
        assert_eq!(
            restore_codes(&dump(&Libraries::default())).unwrap(),
            Vec::<Vec<u8>>::new()
        );
    }
}
