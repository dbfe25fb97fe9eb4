//! The `cjson` library as Redis embeds it (lua-cjson 2.1.0): `encode`, `decode`, the
//! configuration functions, `new`, `null`, `_NAME`, `_VERSION`.
//!
//! Functions are exposed through a small C trampoline (see [`c_style`]) so that errors reach
//! Lua as plain strings with `luaL_where`/`luaL_argerror` decoration, exactly as the C library
//! raises them (mlua would otherwise raise userdata errors).

use std::cell::RefCell;
use std::ffi::c_int;
use std::rc::Rc;

use mlua::{ffi, Function, LightUserData, Lua, MultiValue, Table, Value};

/// Failure of a library function: a plain `luaL_error` or a `luaL_argerror`.
pub(crate) enum Fail {
    Msg(Vec<u8>),
    Arg(i32, Vec<u8>),
    /// A runtime error raised without position (as `luaG_runerror` from C code).
    Raw(Vec<u8>),
    /// An error from mlua itself (memory etc.): propagated as is.
    Lua(mlua::Error),
}

impl From<mlua::Error> for Fail {
    fn from(e: mlua::Error) -> Self {
        Fail::Lua(e)
    }
}

pub(crate) fn msg(s: impl Into<Vec<u8>>) -> Fail {
    Fail::Msg(s.into())
}

pub(crate) fn arg_err(n: i32, s: impl Into<Vec<u8>>) -> Fail {
    Fail::Arg(n, s.into())
}

/// Calls the implementation (upvalue 1) which returns `true, results...`, `0, table, n`
/// (results in a table) or `false, message[, narg | true (no position)]`, and raises the
/// error the way C library code does.
pub(crate) unsafe extern "C-unwind" fn trampoline(l: *mut ffi::lua_State) -> c_int {
    let nargs = ffi::lua_gettop(l);
    ffi::lua_pushvalue(l, ffi::lua_upvalueindex(1));
    ffi::lua_insert(l, 1);
    ffi::lua_call(l, nargs, ffi::LUA_MULTRET);
    let top = ffi::lua_gettop(l);
    if ffi::lua_type(l, 1) == ffi::LUA_TNUMBER {
        // Results in a table (see `Results`): unpacked here, where the Lua stack holds only
        // them and the table, as the C library's stack holds them and its argument.
        let n = ffi::lua_tointeger(l, 3);
        ffi::lua_settop(l, 2);
        ffi::lua_replace(l, 1);
        for i in 1..=n {
            // The implementation keeps within LUAI_MAXCSTACK; this is a safety net.
            if ffi::lua_checkstack(l, 1) == 0 {
                return ffi::luaL_error(l, c"stack overflow".as_ptr());
            }
            ffi::lua_rawgeti(l, 1, i as _);
        }
        return n as c_int;
    }
    if ffi::lua_toboolean(l, 1) != 0 {
        return top - 1;
    }
    if ffi::lua_checkstack(l, 3) == 0 {
        return ffi::luaL_error(l, c"stack overflow".as_ptr());
    }
    if top >= 3 && ffi::lua_type(l, 3) == ffi::LUA_TBOOLEAN {
        ffi::lua_settop(l, 2);
        ffi::lua_error(l);
    }
    if top >= 3 && ffi::lua_type(l, 3) == ffi::LUA_TNUMBER {
        let narg = ffi::lua_tointeger(l, 3) as c_int;
        let m = ffi::lua_tolstring(l, 2, std::ptr::null_mut());
        return ffi::luaL_argerror(l, narg, m);
    }
    ffi::luaL_where(l, 1);
    ffi::lua_pushvalue(l, 2);
    ffi::lua_concat(l, 2);
    ffi::lua_error(l)
}

/// Many results gathered in a Lua table (1..n), returned without mlua's callback stack.
pub(crate) struct Results(pub Table, pub i64);

/// What a wrapped function returns: a few values, or many in a table.
pub(crate) enum Ret {
    Values(MultiValue),
    Table(Results),
}

impl From<MultiValue> for Ret {
    fn from(v: MultiValue) -> Self {
        Ret::Values(v)
    }
}

impl From<Results> for Ret {
    fn from(r: Results) -> Self {
        Ret::Table(r)
    }
}

/// Wraps `f` into a Lua function that behaves like a C library function.
pub(crate) fn c_style<F, R>(lua: &Lua, f: F) -> mlua::Result<Function>
where
    F: Fn(&Lua, MultiValue) -> Result<R, Fail> + 'static,
    R: Into<Ret>,
{
    c_style_with(lua, f, trampoline)
}

/// [`c_style`] with a given trampoline (which must end by calling [`trampoline`]).
pub(crate) fn c_style_with<F, R>(
    lua: &Lua,
    f: F,
    tramp: ffi::lua_CFunction,
) -> mlua::Result<Function>
where
    F: Fn(&Lua, MultiValue) -> Result<R, Fail> + 'static,
    R: Into<Ret>,
{
    let inner = lua.create_function(move |lua, args: MultiValue| {
        let mut out = MultiValue::new();
        match f(lua, args).map(Into::into) {
            Ok(Ret::Values(vals)) => {
                out.push_back(Value::Boolean(true));
                out.extend(vals);
            }
            Ok(Ret::Table(Results(t, n))) => {
                out.push_back(Value::Number(0.0));
                out.push_back(Value::Table(t));
                out.push_back(Value::Number(n as f64));
            }
            Err(Fail::Lua(e)) => return Err(e),
            Err(Fail::Msg(m)) => {
                out.push_back(Value::Boolean(false));
                out.push_back(Value::String(lua.create_string(&m)?));
            }
            Err(Fail::Raw(m)) => {
                out.push_back(Value::Boolean(false));
                out.push_back(Value::String(lua.create_string(&m)?));
                out.push_back(Value::Boolean(true));
            }
            Err(Fail::Arg(n, m)) => {
                out.push_back(Value::Boolean(false));
                out.push_back(Value::String(lua.create_string(&m)?));
                out.push_back(Value::Number(n as f64));
            }
        }
        Ok(out)
    })?;
    // SAFETY: pushes one C closure over the function argument; `trampoline` only uses the
    // Lua C API and owns no Rust values when it raises.
    unsafe {
        lua.exec_raw::<Function>(inner, |state| {
            ffi::lua_pushcclosure(state, tramp, 1);
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Argument helpers (lauxlib semantics)

/// Lua 5.1 `lua_typename` (light userdata is "userdata"); "no value" for a missing argument.
pub(crate) fn type_name(v: Option<&Value>) -> &'static str {
    match v {
        None => "no value",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::LightUserData(_)) | Some(Value::UserData(_)) => "userdata",
        Some(Value::Integer(_)) | Some(Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::Thread(_)) => "thread",
        Some(_) => "userdata",
    }
}

fn type_error(n: usize, want: &str, got: Option<&Value>) -> Fail {
    arg_err(n as i32, format!("{want} expected, got {}", type_name(got)))
}

/// `lua_tonumber`: numbers, and strings Lua can convert.
pub(crate) fn to_number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(s) => str2number(&s.as_bytes()),
        _ => None,
    }
}

/// `luaL_checkinteger` (truncating `lua_Integer` conversion).
pub(crate) fn check_integer(args: &[Value], n: usize) -> Result<i64, Fail> {
    match to_number(args.get(n - 1)) {
        Some(x) => Ok(number_to_integer(x)),
        None => Err(type_error(n, "number", args.get(n - 1))),
    }
}

/// `luaL_optinteger`.
pub(crate) fn opt_integer(args: &[Value], n: usize, def: i64) -> Result<i64, Fail> {
    match args.get(n - 1) {
        None | Some(Value::Nil) => Ok(def),
        _ => check_integer(args, n),
    }
}

/// C cast of a double to a 64-bit integer as x86-64 does it (out of range: INT64_MIN).
pub(crate) fn number_to_integer(x: f64) -> i64 {
    if !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&x) {
        i64::MIN
    } else {
        x as i64
    }
}

/// C cast of a double to a 32-bit int as x86-64 does it (out of range: INT_MIN).
pub(crate) fn number_to_int(x: f64) -> i32 {
    if !(-2_147_483_648.0..2_147_483_648.0).contains(&x) {
        i32::MIN
    } else {
        x as i32
    }
}

/// `luaL_checklstring`: strings, and numbers converted with `%.14g`.
pub(crate) fn check_bytes(args: &[Value], n: usize) -> Result<Vec<u8>, Fail> {
    match args.get(n - 1) {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Integer(i)) => Ok(fmt_g(*i as f64, 14).into_bytes()),
        Some(Value::Number(x)) => Ok(fmt_g(*x, 14).into_bytes()),
        other => Err(type_error(n, "string", other)),
    }
}

// ---------------------------------------------------------------------------------------------
// Numbers

/// C `printf("%.<prec>g", x)`.
pub(crate) fn fmt_g(x: f64, prec: usize) -> String {
    let prec = prec.max(1);
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let sci = format!("{:.*e}", prec - 1, x);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= prec as i32 {
        let mant = strip_zeros(mant);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.unsigned_abs())
    } else {
        let decimals = (prec as i32 - 1 - exp).max(0) as usize;
        strip_zeros(&format!("{:.*}", decimals, x)).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// glibc `strtod` on the prefix of `s`: the value and the number of bytes consumed
/// (`None` when no conversion could be performed).
pub(crate) fn strtod(s: &[u8]) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = 0;
    while is_space(at(i)) {
        i += 1;
    }
    let neg = at(i) == b'-';
    if matches!(at(i), b'-' | b'+') {
        i += 1;
    }
    let sign = |v: f64| if neg { -v } else { v };
    let rest = &s[i.min(s.len())..];
    let starts = |w: &[u8]| rest.len() >= w.len() && rest[..w.len()].eq_ignore_ascii_case(w);
    if starts(b"inf") {
        let n = if starts(b"infinity") { 8 } else { 3 };
        return Some((sign(f64::INFINITY), i + n));
    }
    if starts(b"nan") {
        let mut end = i + 3;
        if at(end) == b'(' {
            let mut j = end + 1;
            while at(j).is_ascii_alphanumeric() || at(j) == b'_' {
                j += 1;
            }
            if at(j) == b')' {
                end = j + 1;
            }
        }
        return Some((sign(f64::NAN), end));
    }
    if at(i) == b'0' && (at(i + 1) | 0x20) == b'x' {
        if let Some((v, n)) = hex_float(&s[i + 2..]) {
            return Some((sign(v), i + 2 + n));
        }
    }
    let start = i;
    let mut digits = 0;
    while at(i).is_ascii_digit() {
        i += 1;
        digits += 1;
    }
    if at(i) == b'.' {
        i += 1;
        while at(i).is_ascii_digit() {
            i += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if (at(i) | 0x20) == b'e' {
        let mut j = i + 1;
        if matches!(at(j), b'-' | b'+') {
            j += 1;
        }
        if at(j).is_ascii_digit() {
            while at(j).is_ascii_digit() {
                j += 1;
            }
            i = j;
        }
    }
    let text = std::str::from_utf8(&s[start..i]).ok()?;
    let v: f64 = text.parse().ok()?;
    Some((sign(v), i))
}

/// Hexadecimal mantissa with optional binary exponent (after "0x").
fn hex_float(s: &[u8]) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let (mut i, mut v, mut digits, mut scale) = (0, 0f64, 0, 0i32);
    while at(i).is_ascii_hexdigit() {
        v = v * 16.0 + (at(i) as char).to_digit(16).unwrap_or(0) as f64;
        i += 1;
        digits += 1;
    }
    if at(i) == b'.' {
        i += 1;
        while at(i).is_ascii_hexdigit() {
            v = v * 16.0 + (at(i) as char).to_digit(16).unwrap_or(0) as f64;
            scale -= 4;
            i += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if (at(i) | 0x20) == b'p' {
        let mut j = i + 1;
        let eneg = at(j) == b'-';
        if matches!(at(j), b'-' | b'+') {
            j += 1;
        }
        if at(j).is_ascii_digit() {
            let mut e: i32 = 0;
            while at(j).is_ascii_digit() {
                e = e.saturating_mul(10).saturating_add((at(j) - b'0') as i32);
                j += 1;
            }
            scale = scale.saturating_add(if eneg { -e } else { e });
            i = j;
        }
    }
    Some((v * 2f64.powi(scale), i))
}

/// Lua 5.1 `luaO_str2d`: the whole string (surrounding spaces allowed) must be a number.
pub(crate) fn str2number(s: &[u8]) -> Option<f64> {
    let (mut v, mut end) = strtod(s)?;
    if (s.get(end).copied().unwrap_or(0) | 0x20) == b'x' {
        // strtoul(s, 16) fallback.
        let t = s.iter().position(|c| !is_space(*c)).unwrap_or(s.len());
        let hex = &s[t..];
        let digits = hex.get(2..).unwrap_or(&[]);
        let n = digits.iter().take_while(|c| c.is_ascii_hexdigit()).count();
        if !hex.starts_with(b"0") || n == 0 {
            return None;
        }
        let txt = std::str::from_utf8(&digits[..n]).ok()?;
        v = u64::from_str_radix(txt, 16).unwrap_or(u64::MAX) as f64;
        end = t + 2 + n;
    }
    if s[end..].iter().all(|c| is_space(*c)) {
        Some(v)
    } else {
        None
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration

#[derive(Clone)]
struct Config {
    sparse_convert: i32,
    sparse_ratio: i32,
    sparse_safe: i32,
    encode_max_depth: i32,
    decode_max_depth: i32,
    encode_invalid_numbers: i32,
    decode_invalid_numbers: i32,
    keep_buffer: i32,
    precision: i32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sparse_convert: 0,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: 0,
            decode_invalid_numbers: 1,
            keep_buffer: 1,
            precision: 14,
        }
    }
}

type Cfg = Rc<RefCell<Config>>;

/// `json_arg_init`: at most `n` arguments.
fn arg_init(args: &MultiValue, n: usize) -> Result<Vec<Value>, Fail> {
    if args.len() > n {
        return Err(arg_err(n as i32 + 1, "found too many arguments"));
    }
    Ok(args.iter().cloned().collect())
}

/// `json_integer_option` (the range error always names argument #1, as in lua-cjson).
fn integer_option(
    args: &[Value],
    n: usize,
    setting: &mut i32,
    min: i32,
    max: i32,
) -> Result<Value, Fail> {
    if !matches!(args.get(n - 1), None | Some(Value::Nil)) {
        let v = check_integer(args, n)? as i32;
        if v < min || v > max {
            return Err(arg_err(
                1,
                format!("expected integer between {min} and {max}"),
            ));
        }
        *setting = v;
    }
    Ok(Value::Number(*setting as f64))
}

/// `json_enum_option` with `bool_true` = 1.
fn enum_option(
    lua: &Lua,
    args: &[Value],
    n: usize,
    setting: &mut i32,
    options: &[&str],
) -> Result<Value, Fail> {
    match args.get(n - 1) {
        None | Some(Value::Nil) => {}
        Some(Value::Boolean(b)) => *setting = *b as i32,
        Some(_) => {
            let s = check_bytes(args, n)?;
            match options.iter().position(|o| o.as_bytes() == s.as_slice()) {
                Some(p) => *setting = p as i32,
                None => {
                    let mut m = b"invalid option '".to_vec();
                    m.extend_from_slice(&s);
                    m.push(b'\'');
                    return Err(arg_err(n as i32, m));
                }
            }
        }
    }
    if *setting == 0 || *setting == 1 {
        Ok(Value::Boolean(*setting == 1))
    } else {
        let name = options.get(*setting as usize).copied().unwrap_or("");
        Ok(Value::String(lua.create_string(name)?))
    }
}

const ON_OFF: &[&str] = &["off", "on"];

fn one(v: Value) -> MultiValue {
    MultiValue::from_vec(vec![v])
}

/// The null sentinel: a NULL light userdata.
fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// Builds one cjson module table with its own configuration.
fn new_module(lua: &Lua) -> mlua::Result<Table> {
    let cfg: Cfg = Rc::new(RefCell::new(Config::default()));
    let t = lua.create_table()?;

    let c = cfg.clone();
    t.set(
        "encode",
        c_style(lua, move |lua, args| {
            if args.len() != 1 {
                return Err(arg_err(1, "expected 1 argument"));
            }
            let conf = c.borrow().clone();
            let out = encode(lua, &conf, &args[0])?;
            Ok(one(Value::String(lua.create_string(&out)?)))
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "decode",
        c_style(lua, move |lua, args| {
            if args.len() != 1 {
                return Err(arg_err(1, "expected 1 argument"));
            }
            let a: Vec<Value> = args.into_iter().collect();
            let text = check_bytes(&a, 1)?;
            let conf = c.borrow().clone();
            Ok(one(decode(lua, &conf, &text)?))
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "encode_sparse_array",
        c_style(lua, move |lua, args| {
            let a = arg_init(&args, 3)?;
            let mut g = c.borrow_mut();
            let conv = enum_option(lua, &a, 1, &mut g.sparse_convert, ON_OFF)?;
            let ratio = integer_option(&a, 2, &mut g.sparse_ratio, 0, i32::MAX)?;
            let safe = integer_option(&a, 3, &mut g.sparse_safe, 0, i32::MAX)?;
            Ok(MultiValue::from_vec(vec![conv, ratio, safe]))
        })?,
    )?;
    type Field = fn(&mut Config) -> &mut i32;
    let ints: [(&str, Field, i32, i32); 3] = [
        ("encode_max_depth", |c| &mut c.encode_max_depth, 1, i32::MAX),
        ("decode_max_depth", |c| &mut c.decode_max_depth, 1, i32::MAX),
        ("encode_number_precision", |c| &mut c.precision, 1, 14),
    ];
    for (name, field, min, max) in ints {
        let c = cfg.clone();
        t.set(
            name,
            c_style(lua, move |_, args| {
                let a = arg_init(&args, 1)?;
                let mut g = c.borrow_mut();
                Ok(one(integer_option(&a, 1, field(&mut g), min, max)?))
            })?,
        )?;
    }
    let enums: [(&str, Field, &'static [&'static str]); 3] = [
        ("encode_keep_buffer", |c| &mut c.keep_buffer, ON_OFF),
        (
            "encode_invalid_numbers",
            |c| &mut c.encode_invalid_numbers,
            &["off", "on", "null"],
        ),
        (
            "decode_invalid_numbers",
            |c| &mut c.decode_invalid_numbers,
            ON_OFF,
        ),
    ];
    for (name, field, options) in enums {
        let c = cfg.clone();
        t.set(
            name,
            c_style(lua, move |lua, args| {
                let a = arg_init(&args, 1)?;
                let mut g = c.borrow_mut();
                Ok(one(enum_option(lua, &a, 1, field(&mut g), options)?))
            })?,
        )?;
    }
    t.set(
        "new",
        c_style(lua, |lua, _| Ok(one(Value::Table(new_module(lua)?))))?,
    )?;
    t.set("null", null())?;
    t.set("_NAME", "cjson")?;
    t.set("_VERSION", "2.1.0")?;
    Ok(t)
}

/// Sets the global `cjson` table.
pub fn open(lua: &Lua) -> mlua::Result<()> {
    let t = new_module(lua)?;
    lua.globals().set("cjson", t)
}

// ---------------------------------------------------------------------------------------------
// Encoding

fn encode_exception(v: &Value, reason: &str) -> Fail {
    msg(format!("Cannot serialise {}: {reason}", type_name(Some(v))))
}

fn append_string(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{:04x}", c).as_bytes()),
            _ => out.push(c),
        }
    }
    out.push(b'"');
}

fn append_number(cfg: &Config, out: &mut Vec<u8>, v: &Value, x: f64) -> Result<(), Fail> {
    match cfg.encode_invalid_numbers {
        0 if !x.is_finite() => return Err(encode_exception(v, "must not be NaN or Inf")),
        1 if x.is_nan() => {
            out.extend_from_slice(b"nan");
            return Ok(());
        }
        2 if !x.is_finite() => {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        _ => {}
    }
    out.extend_from_slice(fmt_g(x, cfg.precision as usize).as_bytes());
    Ok(())
}

fn number_of(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

/// LUAI_MAXCSTACK: the C library fails where its Lua stack would exceed this many slots.
pub(crate) const MAX_CSTACK: usize = 8000;

/// An object key, owned so that open tables hold no mlua references.
enum Key {
    Str(Vec<u8>),
    Num(f64),
    /// A key of another type: its type name, for the error when it is reached.
    Bad(&'static str),
}

/// A table being encoded (the table itself is kept in the Lua-side `path` table so that
/// deep nesting holds no mlua references).
enum Frame {
    Array { len: i32, pos: i32 },
    Object { keys: Vec<Key>, pos: usize },
}

impl Frame {
    /// Lua stack slots this level holds in the C encoder (array: the item; object: key, value).
    fn slots(&self) -> usize {
        match self {
            Frame::Array { .. } => 1,
            Frame::Object { .. } => 2,
        }
    }
}

/// `lua_array_length` plus key collection: an array frame, or an object frame.
fn table_frame(cfg: &Config, t: &Table, tv: &Value) -> Result<Frame, Fail> {
    let mut keys = Vec::new();
    let mut max: i32 = 0;
    let mut items: i64 = 0;
    let mut array = true;
    t.for_each(|k: Value, _: Value| {
        if array {
            match number_of(&k) {
                Some(x) if x != 0.0 && x.floor() == x && x >= 1.0 => {
                    if x > max as f64 {
                        max = number_to_int(x);
                    }
                    items += 1;
                }
                _ => array = false,
            }
        }
        keys.push(match &k {
            Value::String(s) => Key::Str(s.as_bytes().to_vec()),
            Value::Integer(_) | Value::Number(_) => Key::Num(number_of(&k).unwrap_or(0.0)),
            other => Key::Bad(type_name(Some(other))),
        });
        Ok(())
    })?;
    if array {
        let ratio = cfg.sparse_ratio as i64;
        if ratio > 0 && max as i64 > items * ratio && max > cfg.sparse_safe {
            if cfg.sparse_convert == 0 {
                return Err(encode_exception(tv, "excessively sparse array"));
            }
        } else if max > 0 {
            return Ok(Frame::Array { len: max, pos: 0 });
        }
    }
    Ok(Frame::Object { keys, pos: 0 })
}

/// Appends a scalar, or opens a table (returns its frame; the table goes to `path`).
fn append_value(
    cfg: &Config,
    out: &mut Vec<u8>,
    v: &Value,
    stack: &[Frame],
    path: &Table,
) -> Result<Option<Frame>, Fail> {
    match v {
        Value::String(s) => append_string(out, &s.as_bytes()),
        Value::Integer(i) => append_number(cfg, out, v, *i as f64)?,
        Value::Number(n) => append_number(cfg, out, v, *n)?,
        Value::Boolean(true) => out.extend_from_slice(b"true"),
        Value::Boolean(false) => out.extend_from_slice(b"false"),
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Table(t) => {
            let depth = stack.len() + 1;
            let used = 1 + stack.iter().map(Frame::slots).sum::<usize>();
            if depth > cfg.encode_max_depth as usize || used + 3 > MAX_CSTACK {
                return Err(msg(format!(
                    "Cannot serialise, excessive nesting ({depth})"
                )));
            }
            let frame = table_frame(cfg, t, v)?;
            path.raw_set(depth, t)?;
            out.push(if matches!(frame, Frame::Array { .. }) {
                b'['
            } else {
                b'{'
            });
            return Ok(Some(frame));
        }
        _ => return Err(encode_exception(v, "type not supported")),
    }
    Ok(None)
}

fn encode(lua: &Lua, cfg: &Config, v: &Value) -> Result<Vec<u8>, Fail> {
    let mut out = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let path = lua.create_table()?;
    if let Some(f) = append_value(cfg, &mut out, v, &stack, &path)? {
        stack.push(f);
    }
    loop {
        let depth = stack.len();
        let Some(top) = stack.last_mut() else { break };
        let value: Value = match top {
            Frame::Array { len, pos } => {
                if *pos == *len {
                    out.push(b']');
                    stack.pop();
                    continue;
                }
                if *pos > 0 {
                    out.push(b',');
                }
                *pos += 1;
                path.raw_get::<Table>(depth)?.raw_get(*pos)?
            }
            Frame::Object { keys, pos } => {
                if *pos == keys.len() {
                    out.push(b'}');
                    stack.pop();
                    continue;
                }
                if *pos > 0 {
                    out.push(b',');
                }
                *pos += 1;
                let t = path.raw_get::<Table>(depth)?;
                match &keys[*pos - 1] {
                    Key::Str(s) => {
                        append_string(&mut out, s);
                        out.push(b':');
                        t.raw_get(lua.create_string(s)?)?
                    }
                    Key::Num(n) => {
                        out.push(b'"');
                        append_number(cfg, &mut out, &Value::Number(*n), *n)?;
                        out.extend_from_slice(b"\":");
                        t.raw_get(*n)?
                    }
                    Key::Bad(name) => {
                        return Err(msg(format!(
                            "Cannot serialise {name}: table key must be a number or string"
                        )))
                    }
                }
            }
        };
        if let Some(f) = append_value(cfg, &mut out, &value, &stack, &path)? {
            stack.push(f);
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Decoding

#[derive(Clone, Copy, PartialEq, Debug)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Num(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl Tok {
    fn name(self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str => "T_STRING",
            Tok::Num(_) => "T_NUMBER",
            Tok::Bool(_) => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error(e) => e,
        }
    }
}

struct Parser<'a> {
    data: &'a [u8],
    pos: usize,
    /// Decoded text of the last string token.
    buf: Vec<u8>,
    invalid_numbers: bool,
    depth: i64,
    max_depth: i64,
}

/// The input is NUL-terminated in C: anything past the end reads as 0.
fn byte(d: &[u8], i: usize) -> u8 {
    d.get(i).copied().unwrap_or(0)
}

fn hex4(d: &[u8], i: usize) -> Option<u32> {
    let mut v = 0;
    for k in 0..4 {
        v = (v << 4) | (byte(d, i + k) as char).to_digit(16)?;
    }
    Some(v)
}

fn push_utf8(out: &mut Vec<u8>, cp: u32) {
    if cp <= 0x7f {
        out.push(cp as u8);
    } else if cp <= 0x7ff {
        out.extend_from_slice(&[(cp >> 6) as u8 | 0xc0, (cp & 0x3f) as u8 | 0x80]);
    } else if cp <= 0xffff {
        out.extend_from_slice(&[
            (cp >> 12) as u8 | 0xe0,
            ((cp >> 6) & 0x3f) as u8 | 0x80,
            (cp & 0x3f) as u8 | 0x80,
        ]);
    } else {
        out.extend_from_slice(&[
            (cp >> 18) as u8 | 0xf0,
            ((cp >> 12) & 0x3f) as u8 | 0x80,
            ((cp >> 6) & 0x3f) as u8 | 0x80,
            (cp & 0x3f) as u8 | 0x80,
        ]);
    }
}

/// `json_is_invalid_number`: forms strtod accepts but strict JSON does not.
fn is_invalid_number(d: &[u8], mut p: usize) -> bool {
    if byte(d, p) == b'+' {
        return true;
    }
    if byte(d, p) == b'-' {
        p += 1;
    }
    let c = byte(d, p);
    if c == b'0' {
        let c2 = byte(d, p + 1);
        return (c2 | 0x20) == b'x' || c2.is_ascii_digit();
    } else if c <= b'9' {
        return false;
    }
    let rest = &d[p.min(d.len())..];
    let starts = |w: &[u8]| rest.len() >= 3 && rest[..3].eq_ignore_ascii_case(w);
    starts(b"inf") || starts(b"nan")
}

impl Parser<'_> {
    /// Returns the token and its (0-based) index.
    fn next(&mut self) -> (Tok, usize) {
        let d = self.data;
        while matches!(byte(d, self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let start = self.pos;
        let c = byte(d, start);
        let single = match c {
            b'{' => Some(Tok::ObjBegin),
            b'}' => Some(Tok::ObjEnd),
            b'[' => Some(Tok::ArrBegin),
            b']' => Some(Tok::ArrEnd),
            b',' => Some(Tok::Comma),
            b':' => Some(Tok::Colon),
            _ => None,
        };
        if let Some(t) = single {
            self.pos += 1;
            return (t, start);
        }
        if c == 0 {
            return (Tok::End, start);
        }
        let rest = &d[start..];
        match c {
            b'"' => self.string(),
            b'-' | b'0'..=b'9' => {
                if !self.invalid_numbers && is_invalid_number(d, start) {
                    return (Tok::Error("invalid number"), start);
                }
                self.number()
            }
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'+' => {
                if rest.starts_with(b"true") {
                    self.pos += 4;
                    (Tok::Bool(true), start)
                } else if rest.starts_with(b"false") {
                    self.pos += 5;
                    (Tok::Bool(false), start)
                } else if rest.starts_with(b"null") {
                    self.pos += 4;
                    (Tok::Null, start)
                } else if self.invalid_numbers && is_invalid_number(d, start) {
                    self.number()
                } else {
                    (Tok::Error("invalid token"), start)
                }
            }
            _ => (Tok::Error("invalid token"), start),
        }
    }

    fn number(&mut self) -> (Tok, usize) {
        let start = self.pos;
        // strtod stops at the C string's NUL terminator.
        let end = self.data[start..]
            .iter()
            .position(|&c| c == 0)
            .map_or(self.data.len(), |n| start + n);
        match strtod(&self.data[start..end]) {
            Some((v, n)) if n > 0 => {
                self.pos += n;
                (Tok::Num(v), start)
            }
            _ => (Tok::Error("invalid number"), start),
        }
    }

    fn string(&mut self) -> (Tok, usize) {
        let d = self.data;
        let start = self.pos;
        self.pos += 1;
        self.buf.clear();
        loop {
            let c = byte(d, self.pos);
            if c == b'"' {
                break;
            }
            if c == 0 {
                return (Tok::Error("unexpected end of string"), self.pos);
            }
            if c != b'\\' {
                self.buf.push(c);
                self.pos += 1;
                continue;
            }
            let esc = match byte(d, self.pos + 1) {
                b'"' => b'"',
                b'\\' => b'\\',
                b'/' => b'/',
                b'b' => 0x08,
                b't' => b'\t',
                b'n' => b'\n',
                b'f' => 0x0c,
                b'r' => b'\r',
                b'u' => {
                    if !self.unicode_escape() {
                        return (Tok::Error("invalid unicode escape code"), self.pos);
                    }
                    continue;
                }
                _ => return (Tok::Error("invalid escape code"), self.pos),
            };
            self.buf.push(esc);
            self.pos += 2;
        }
        self.pos += 1;
        let _ = start;
        (Tok::Str, start)
    }

    fn unicode_escape(&mut self) -> bool {
        let d = self.data;
        let p = self.pos;
        let Some(mut cp) = hex4(d, p + 2) else {
            return false;
        };
        let mut len = 6;
        if cp & 0xf800 == 0xd800 {
            if cp & 0x400 != 0 || byte(d, p + 6) != b'\\' || byte(d, p + 7) != b'u' {
                return false;
            }
            let Some(low) = hex4(d, p + 8) else {
                return false;
            };
            if low & 0xfc00 != 0xdc00 {
                return false;
            }
            cp = (((cp & 0x3ff) << 10) | (low & 0x3ff)) + 0x10000;
            len = 12;
        }
        push_utf8(&mut self.buf, cp);
        self.pos += len;
        true
    }

    /// `json_decode_descend`: the depth limit, and the Lua stack the C decoder would need
    /// (`used` slots held by the open containers plus `slots` more).
    fn descend(&mut self, used: usize, slots: usize) -> Result<(), Fail> {
        self.depth += 1;
        if self.depth > self.max_depth || used + slots > MAX_CSTACK {
            return Err(msg(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth, self.pos
            )));
        }
        Ok(())
    }
}

fn parse_error(expected: &str, tok: Tok, index: usize) -> Fail {
    msg(format!(
        "Expected {expected} but found {} at character {}",
        tok.name(),
        index + 1
    ))
}

/// An open container; its table is `path[depth]` (no mlua references held per level).
enum Open {
    Array(i64),
    Object(Vec<u8>),
}

/// Lua stack slots the C decoder holds: the argument, each open table, and each pending key.
fn used_slots(stack: &[Open]) -> usize {
    1 + stack
        .iter()
        .map(|o| if matches!(o, Open::Object(_)) { 2 } else { 1 })
        .sum::<usize>()
}

fn decode(lua: &Lua, cfg: &Config, text: &[u8]) -> Result<Value, Fail> {
    if text.len() >= 2 && (text[0] == 0 || text[1] == 0) {
        return Err(msg("JSON parser does not support UTF-16 or UTF-32"));
    }
    let mut p = Parser {
        data: text,
        pos: 0,
        buf: Vec::new(),
        invalid_numbers: cfg.decode_invalid_numbers != 0,
        depth: 0,
        max_depth: cfg.decode_max_depth as i64,
    };
    let path = lua.create_table()?;
    let mut stack: Vec<Open> = Vec::new();
    let mut tok = p.next();
    loop {
        // A value is expected at `tok`.
        let mut value = match tok.0 {
            Tok::Str => Value::String(lua.create_string(&p.buf)?),
            Tok::Num(n) => Value::Number(n),
            Tok::Bool(b) => Value::Boolean(b),
            Tok::Null => null(),
            Tok::ObjBegin => {
                p.descend(used_slots(&stack), 3)?;
                let t = lua.create_table()?;
                tok = p.next();
                if tok.0 == Tok::ObjEnd {
                    p.depth -= 1;
                    Value::Table(t)
                } else {
                    let key = object_key(&mut p, tok)?;
                    stack.push(Open::Object(key));
                    path.raw_set(stack.len(), t)?;
                    tok = p.next();
                    continue;
                }
            }
            Tok::ArrBegin => {
                p.descend(used_slots(&stack), 2)?;
                let t = lua.create_table()?;
                tok = p.next();
                if tok.0 == Tok::ArrEnd {
                    p.depth -= 1;
                    Value::Table(t)
                } else {
                    stack.push(Open::Array(1));
                    path.raw_set(stack.len(), t)?;
                    continue;
                }
            }
            other => return Err(parse_error("value", other, tok.1)),
        };
        // Attach completed values to their containers, closing them as they end.
        loop {
            let depth = stack.len();
            let Some(top) = stack.last_mut() else {
                let end = p.next();
                if end.0 != Tok::End {
                    return Err(parse_error("the end", end.0, end.1));
                }
                return Ok(value);
            };
            let t: Table = path.raw_get(depth)?;
            let end = match top {
                Open::Array(i) => {
                    t.raw_set(*i, value)?;
                    *i += 1;
                    tok = p.next();
                    if tok.0 != Tok::ArrEnd && tok.0 != Tok::Comma {
                        return Err(parse_error("comma or array end", tok.0, tok.1));
                    }
                    tok.0 == Tok::ArrEnd
                }
                Open::Object(key) => {
                    t.raw_set(lua.create_string(&*key)?, value)?;
                    tok = p.next();
                    if tok.0 != Tok::ObjEnd && tok.0 != Tok::Comma {
                        return Err(parse_error("comma or object end", tok.0, tok.1));
                    }
                    tok.0 == Tok::ObjEnd
                }
            };
            if end {
                p.depth -= 1;
                stack.pop();
                path.raw_set(depth, Value::Nil)?;
                value = Value::Table(t);
                continue;
            }
            tok = p.next();
            if let Some(Open::Object(key)) = stack.last_mut() {
                *key = object_key(&mut p, tok)?;
                tok = p.next();
            }
            break;
        }
    }
}

/// Reads `"key" :` given the key token; leaves the parser before the value.
fn object_key(p: &mut Parser, tok: (Tok, usize)) -> Result<Vec<u8>, Fail> {
    if tok.0 != Tok::Str {
        return Err(parse_error("object key string", tok.0, tok.1));
    }
    let key = p.buf.clone();
    let colon = p.next();
    if colon.0 != Tok::Colon {
        return Err(parse_error("colon", colon.0, colon.1));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        open(&lua).unwrap();
        lua
    }

    fn eval(lua: &Lua, code: &str) -> String {
        match lua
            .load(code)
            .set_name("@user_script")
            .eval::<mlua::LuaString>()
        {
            Ok(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
            Err(e) => format!("LUAERR {e}"),
        }
    }

    /// Evaluates `expr` under pcall and returns the error message.
    fn err(lua: &Lua, call: &str) -> String {
        eval(
            lua,
            &format!("local ok, e = pcall({call}) return tostring(e)"),
        )
    }

    #[test]
    fn format_g() {
        let cases: &[(f64, &str)] = &[
            (1.5, "1.5"),
            (0.1, "0.1"),
            (1e20, "1e+20"),
            (123456789012345.0, "1.2345678901234e+14"),
            (1.0 / 3.0, "0.33333333333333"),
            (-0.0, "-0"),
            (1e-7, "1e-07"),
            (9007199254740992.0, "9.007199254741e+15"),
            (100.0, "100"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (99999999999999.0, "99999999999999"),
            (999999999999999.0, "1e+15"),
            (f64::INFINITY, "inf"),
        ];
        for (x, want) in cases {
            assert_eq!(fmt_g(*x, 14), *want, "{x}");
        }
        assert_eq!(fmt_g(1.23456, 3), "1.23");
    }

    #[test]
    fn encode_vectors() {
        let l = lua();
        let cases = [
            ("{1,2,{a=1}}", r#"[1,2,{"a":1}]"#),
            ("{1.5, 0.1, 1e20, 123456789012345, 1/3, -0.0, 1e-7, 2^53, 100}",
             "[1.5,0.1,1e+20,1.2345678901234e+14,0.33333333333333,-0,1e-07,9.007199254741e+15,100]"),
            ("'a/b\"c\\\\d\\n\\1\\127\\200'", "\"a\\/b\\\"c\\\\d\\n\\u0001\\u007f\u{fffd}\""),
            ("{}", "{}"),
            ("{[1]=1,[2]=2,[4]=4}", "[1,2,null,4]"),
            ("{[10]=1}", "[null,null,null,null,null,null,null,null,null,1]"),
            ("{[1.5]=1}", r#"{"1.5":1}"#),
            ("{[0]=1}", r#"{"0":1}"#),
            ("{[-1]=1}", r#"{"-1":1}"#),
            ("cjson.null", "null"),
            ("{cjson.null, true, false}", "[null,true,false]"),
            ("'\\b\\f\\r\\t'", r#""\b\f\r\t""#),
            ("{{{}}}", "[[{}]]"),
        ];
        for (input, want) in cases {
            let got = eval(&l, &format!("return cjson.encode({input})"));
            assert_eq!(got, want, "{input}");
        }
    }

    #[test]
    fn encode_errors() {
        let l = lua();
        assert_eq!(
            err(&l, "cjson.encode, {1/0}"),
            "Cannot serialise number: must not be NaN or Inf"
        );
        assert_eq!(
            err(&l, "cjson.encode, {[20]=1}"),
            "Cannot serialise table: excessively sparse array"
        );
        assert_eq!(
            err(&l, "cjson.encode, function() end"),
            "Cannot serialise function: type not supported"
        );
        assert_eq!(
            err(&l, "cjson.encode, {[true]=1}"),
            "Cannot serialise boolean: table key must be a number or string"
        );
        assert_eq!(
            err(&l, "cjson.encode, 1, 2"),
            "bad argument #1 to '?' (expected 1 argument)"
        );
        assert_eq!(
            err(&l, "cjson.encode"),
            "bad argument #1 to '?' (expected 1 argument)"
        );
        assert_eq!(
            err(&l, "function() return cjson.encode(1, 2) end"),
            "user_script:1: bad argument #1 to 'encode' (expected 1 argument)"
        );
        let deep = eval(&l, "local t = {} local c = t for i=1,1001 do c[1] = {} c = c[1] end local ok, e = pcall(cjson.encode, t) return e");
        assert_eq!(deep, "Cannot serialise, excessive nesting (1001)");
        // Self-reference hits the depth limit too.
        let cyc = eval(
            &l,
            "local t = {} t[1] = t local ok, e = pcall(cjson.encode, t) return e",
        );
        assert_eq!(cyc, "Cannot serialise, excessive nesting (1001)");
    }

    #[test]
    fn decode_vectors() {
        let l = lua();
        let v = eval(
            &l,
            r#"local t = cjson.decode('{"a":[1,2.5,"x",true,false,null],"b":{}}')
               return tostring(t.a[1])..tostring(t.a[2])..t.a[3]..tostring(t.a[4])..tostring(t.a[5])..
                 tostring(t.a[6] == cjson.null)..type(t.b)..#t.a"#,
        );
        assert_eq!(v, "12.5xtruefalsetruetable6");
        assert_eq!(
            eval(&l, r#"return cjson.decode('"\\u00e9\\ud83d\\ude00\\/"')"#),
            "é😀/"
        );
        assert_eq!(eval(&l, "return tostring(cjson.decode(' 1e3 '))"), "1000");
        assert_eq!(eval(&l, "return tostring(cjson.decode('0x10'))"), "16");
        assert_eq!(eval(&l, "return tostring(cjson.decode('+5'))"), "5");
        assert_eq!(
            eval(&l, "return tostring(cjson.decode('-Infinity'))"),
            "-inf"
        );
        assert_eq!(eval(&l, "return tostring(cjson.decode(123))"), "123");
        assert_eq!(
            eval(
                &l,
                r#"return cjson.encode(cjson.decode('{"k":[1,{"z":null}]}'))"#
            ),
            r#"{"k":[1,{"z":null}]}"#
        );
    }

    #[test]
    fn decode_errors() {
        let l = lua();
        let cases = [
            (
                "'x'",
                "Expected value but found invalid token at character 1",
            ),
            ("''", "Expected value but found T_END at character 1"),
            (
                "'[1,2'",
                "Expected comma or array end but found T_END at character 5",
            ),
            (
                "'{\"a\" 1}'",
                "Expected colon but found T_NUMBER at character 6",
            ),
            (
                "'{1:2}'",
                "Expected object key string but found T_NUMBER at character 2",
            ),
            (
                "'[1] x'",
                "Expected the end but found invalid token at character 5",
            ),
            (
                "'\"abc'",
                "Expected value but found unexpected end of string at character 5",
            ),
            (
                "'\"\\\\q\"'",
                "Expected value but found invalid escape code at character 2",
            ),
            (
                "'\"\\\\ud800\"'",
                "Expected value but found invalid unicode escape code at character 2",
            ),
            (
                "'nil'",
                "Expected value but found invalid token at character 1",
            ),
            (
                "'-'",
                "Expected value but found invalid number at character 1",
            ),
            (
                "'{\"a\":1,}'",
                "Expected object key string but found T_OBJ_END at character 8",
            ),
            ("'a\\0'", "JSON parser does not support UTF-16 or UTF-32"),
            ("{}", "bad argument #1 to '?' (string expected, got table)"),
        ];
        for (input, want) in cases {
            assert_eq!(err(&l, &format!("cjson.decode, {input}")), want, "{input}");
        }
        let deep = eval(
            &l,
            "local ok, e = pcall(cjson.decode, string.rep('[', 1001)) return e",
        );
        assert_eq!(
            deep,
            "Found too many nested data structures (1001) at character 1001"
        );
    }

    #[test]
    fn config_functions() {
        let l = lua();
        let defaults = eval(
            &l,
            "local c, r, s = cjson.encode_sparse_array()
             return table.concat({tostring(c), r, s, cjson.encode_max_depth(), cjson.decode_max_depth(),
               cjson.encode_number_precision(), tostring(cjson.encode_keep_buffer()),
               tostring(cjson.encode_invalid_numbers()), tostring(cjson.decode_invalid_numbers())}, ',')",
        );
        assert_eq!(defaults, "false,2,10,1000,1000,14,true,false,true");
        assert_eq!(
            err(&l, "cjson.encode_number_precision, 15"),
            "bad argument #1 to '?' (expected integer between 1 and 14)"
        );
        assert_eq!(
            err(&l, "cjson.encode_number_precision, 1, 2"),
            "bad argument #2 to '?' (found too many arguments)"
        );
        assert_eq!(
            err(&l, "cjson.encode_number_precision, 'x'"),
            "bad argument #1 to '?' (number expected, got string)"
        );
        assert_eq!(
            err(&l, "cjson.encode_invalid_numbers, 'x'"),
            "bad argument #1 to '?' (invalid option 'x')"
        );
        assert_eq!(
            eval(&l, "return cjson.encode_invalid_numbers('null')"),
            "null"
        );
        assert_eq!(eval(&l, "return cjson.encode({1/0, 0/0})"), "[null,null]");
        assert_eq!(
            eval(
                &l,
                "cjson.encode_invalid_numbers(true) return cjson.encode({1/0, -1/0})"
            ),
            "[inf,-inf]"
        );
        assert_eq!(
            eval(
                &l,
                "cjson.encode_number_precision(3) return cjson.encode(3.14159)"
            ),
            "3.14"
        );
        assert_eq!(
            eval(
                &l,
                "local a,b,c = cjson.encode_sparse_array(true, 3, 4) return tostring(a)..b..c"
            ),
            "true34"
        );
        assert_eq!(eval(&l, "return cjson.encode({[20]=1})"), r#"{"20":1}"#);
        // new() has its own configuration.
        assert_eq!(
            eval(&l, "return tostring(cjson.new().encode_number_precision())"),
            "14"
        );
        assert_eq!(
            eval(&l, "return cjson._NAME .. cjson._VERSION"),
            "cjson2.1.0"
        );
    }

    #[test]
    fn strtod_forms() {
        assert_eq!(strtod(b"1.5e3x"), Some((1500.0, 5)));
        assert_eq!(strtod(b"1e"), Some((1.0, 1)));
        assert_eq!(strtod(b".5"), Some((0.5, 2)));
        assert_eq!(strtod(b"0x1p4"), Some((16.0, 5)));
        assert_eq!(strtod(b"-"), None);
        assert_eq!(str2number(b" 12 "), Some(12.0));
        assert_eq!(str2number(b"12a"), None);
    }

    /// Limits where the C library runs out of Lua stack (values checked against Redis 7.0).
    #[test]
    fn stack_limits() {
        let l = lua();
        let run = |code: &str| {
            eval(
                &l,
                &format!("local ok, e = pcall(function() {code} end) return tostring(e)"),
            )
        };
        let chain = |n: usize, field: &str, max: &str| {
            format!(
                "cjson.encode_max_depth({max}) local t = {{}} local c = t \
                 for i=1,{n} do c{field} = {{}} c = c{field} end return #cjson.encode(t)"
            )
        };
        assert_eq!(run(&chain(7996, "[1]", "9000")), "15994");
        assert_eq!(
            run(&chain(7997, "[1]", "9000")),
            "user_script:1: Cannot serialise, excessive nesting (7998)"
        );
        assert_eq!(run(&chain(3998, ".a", "9000")), "23990");
        assert_eq!(
            run(&chain(3999, ".a", "9000")),
            "user_script:1: Cannot serialise, excessive nesting (4000)"
        );
        assert_eq!(
            run("cjson.decode_max_depth(100000) \
                 return cjson.decode(string.rep('[', 9000) .. string.rep(']', 9000))"),
            "user_script:1: Found too many nested data structures (7999) at character 7999"
        );
        assert_eq!(
            run("cjson.decode_max_depth(5000) \
                 return cjson.decode(string.rep('{\"a\":', 4000) .. '1' .. string.rep('}', 4000))"),
            "user_script:1: Found too many nested data structures (4000) at character 19996"
        );
        assert_eq!(
            run("local t = {} for i=1,100000 do t[i] = 'str' .. i end \
                 return #cjson.decode(cjson.encode(t))"),
            "100000"
        );
    }
}
