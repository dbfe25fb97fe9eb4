//! The `cmsgpack` library as Redis embeds it (lua-cmsgpack 0.4.0): `pack`, `unpack`,
//! `unpack_one`, `unpack_limit` and the metadata fields.

use std::ffi::c_int;

use mlua::{ffi, Lua, MultiValue, Table, Value};

use super::cjson::{
    arg_err, c_style, c_style_with, check_bytes, check_integer, msg, number_to_int,
    number_to_integer, opt_integer, trampoline, Fail, Results, MAX_CSTACK,
};

/// Tables nested deeper than this are packed as nil (LUACMSGPACK_MAX_NESTING).
const MAX_NESTING: usize = 16;

const TOO_MANY: &str =
    "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)";
const ARRAY_STACK: &str = "stack overflow (in function mp_decode_to_lua_array)";

// ---------------------------------------------------------------------------------------------
// Encoding

fn encode_bytes(out: &mut Vec<u8>, s: &[u8]) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

fn encode_double(out: &mut Vec<u8>, d: f64) {
    let f = d as f32;
    if f as f64 == d {
        out.push(0xca);
        out.extend_from_slice(&f.to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&d.to_be_bytes());
    }
}

fn encode_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_len(out: &mut Vec<u8>, n: usize, fix: u8, b16: u8, b32: u8) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// Numbers that a C cast to int64 keeps exactly are packed as integers.
fn encode_number(out: &mut Vec<u8>, n: f64) {
    let i = number_to_integer(n);
    if !n.is_infinite() && i as f64 == n {
        encode_int(out, i);
    } else {
        encode_double(out, n);
    }
}

/// `table_is_an_array`: keys are exactly 1..count (as C ints).
fn table_is_array(t: &Table) -> mlua::Result<bool> {
    let (mut count, mut max, mut array) = (0i64, 0i64, true);
    t.for_each(|k: Value, _: Value| {
        if !array {
            return Ok(());
        }
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => f64::NAN,
        };
        if n.is_nan() || n <= 0.0 || number_to_int(n) as f64 != n {
            array = false;
        } else {
            max = max.max(n as i64);
            count += 1;
        }
        Ok(())
    })?;
    Ok(array && max == count)
}

fn encode_value(out: &mut Vec<u8>, v: &Value, level: usize) -> mlua::Result<()> {
    match v {
        Value::String(s) => encode_bytes(out, &s.as_bytes()),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_number(out, *i as f64),
        Value::Number(n) => encode_number(out, *n),
        Value::Table(t) if level < MAX_NESTING => {
            if table_is_array(t)? {
                let len = t.raw_len();
                encode_len(out, len, 0x90, 0xdc, 0xdd);
                for j in 1..=len {
                    encode_value(out, &t.raw_get::<Value>(j)?, level + 1)?;
                }
            } else {
                // Count first, then encode while iterating: no references pile up.
                let mut len = 0;
                t.for_each(|_: Value, _: Value| {
                    len += 1;
                    Ok(())
                })?;
                encode_len(out, len, 0x80, 0xde, 0xdf);
                t.for_each(|k: Value, v: Value| {
                    encode_value(out, &k, level + 1)?;
                    encode_value(out, &v, level + 1)
                })?;
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

/// Packs `values` as a concatenated stream (what `cmsgpack.pack(...)` returns).
pub fn pack(values: &[Value]) -> mlua::Result<Vec<u8>> {
    let mut out = Vec::new();
    for v in values {
        encode_value(&mut out, v, 0)?;
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Decoding

enum DecodeErr {
    Eof,
    BadFormat,
    Msg(&'static str),
    Raw(&'static str),
    Lua(mlua::Error),
}

impl From<mlua::Error> for DecodeErr {
    fn from(e: mlua::Error) -> Self {
        DecodeErr::Lua(e)
    }
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&[u8], DecodeErr> {
        if self.left() < n {
            return Err(DecodeErr::Eof);
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn be(&mut self, at: usize, n: usize) -> Result<u64, DecodeErr> {
        // `at` bytes of header are consumed together with the `n`-byte field.
        let s = self.take(at + n)?;
        Ok(s[at..].iter().fold(0u64, |a, &b| (a << 8) | b as u64))
    }
}

/// A container being filled; its table is `path[2 * depth - 1]` and a pending map key
/// `path[2 * depth]` (no mlua references held per level).
struct Open {
    map: bool,
    left: usize,
    index: i64,
    has_key: bool,
}

impl Open {
    /// Lua stack slots the C decoder holds for this level while decoding its next item.
    fn slots(&self) -> usize {
        if self.map && !self.has_key {
            1
        } else {
            2
        }
    }
}

/// What one msgpack object starts: a complete value or a container to fill.
enum Item {
    Value(Value),
    Open(usize, bool),
}

fn decode_head(lua: &Lua, c: &mut Cursor) -> Result<Item, DecodeErr> {
    let t = c.data[c.pos];
    let num = |x: f64| Ok(Item::Value(Value::Number(x)));
    let string = |c: &mut Cursor, hdr: usize, len: usize| -> Result<Item, DecodeErr> {
        if c.left() < hdr + len {
            return Err(DecodeErr::Eof);
        }
        let s = &c.data[c.pos + hdr..c.pos + hdr + len];
        c.pos += hdr + len;
        Ok(Item::Value(Value::String(lua.create_string(s)?)))
    };
    match t {
        0xcc => num(c.be(1, 1)? as f64),
        0xd0 => num(c.be(1, 1)? as u8 as i8 as f64),
        0xcd => num(c.be(1, 2)? as f64),
        0xd1 => num(c.be(1, 2)? as u16 as i16 as f64),
        0xce => num(c.be(1, 4)? as f64),
        0xd2 => num(c.be(1, 4)? as u32 as i32 as f64),
        // lua_pushunsigned is lua_pushinteger on 64-bit: values past INT64_MAX wrap.
        0xcf => num(c.be(1, 8)? as i64 as f64),
        0xd3 => num(c.be(1, 8)? as i64 as f64),
        0xc0 => {
            c.pos += 1;
            Ok(Item::Value(Value::Nil))
        }
        0xc3 | 0xc2 => {
            c.pos += 1;
            Ok(Item::Value(Value::Boolean(t == 0xc3)))
        }
        0xca => num(f32::from_bits(c.be(1, 4)? as u32) as f64),
        0xcb => num(f64::from_bits(c.be(1, 8)?)),
        0xd9 => {
            if c.left() < 2 {
                return Err(DecodeErr::Eof);
            }
            let len = c.data[c.pos + 1] as usize;
            string(c, 2, len)
        }
        0xda => {
            if c.left() < 3 {
                return Err(DecodeErr::Eof);
            }
            let len = u16::from_be_bytes([c.data[c.pos + 1], c.data[c.pos + 2]]) as usize;
            string(c, 3, len)
        }
        0xdb => {
            let len = c.be(1, 4)? as usize;
            string(c, 0, len)
        }
        0xdc => Ok(Item::Open(c.be(1, 2)? as usize, false)),
        0xdd => Ok(Item::Open(c.be(1, 4)? as usize, false)),
        0xde => Ok(Item::Open(c.be(1, 2)? as usize, true)),
        0xdf => Ok(Item::Open(c.be(1, 4)? as usize, true)),
        _ if t & 0x80 == 0 => {
            c.pos += 1;
            num(t as f64)
        }
        _ if t & 0xe0 == 0xe0 => {
            c.pos += 1;
            num(t as i8 as f64)
        }
        _ if t & 0xe0 == 0xa0 => string(c, 1, (t & 0x1f) as usize),
        _ if t & 0xf0 == 0x90 => {
            c.pos += 1;
            Ok(Item::Open((t & 0xf) as usize, false))
        }
        _ if t & 0xf0 == 0x80 => {
            c.pos += 1;
            Ok(Item::Open((t & 0xf) as usize, true))
        }
        _ => Err(DecodeErr::BadFormat),
    }
}

/// Decodes one top-level object. `base` is the Lua stack the C decoder already uses (its
/// argument and the results so far): deep nesting fails where its stack checks would.
fn decode_one(lua: &Lua, c: &mut Cursor, base: usize, path: &Table) -> Result<Value, DecodeErr> {
    let mut stack: Vec<Open> = Vec::new();
    loop {
        if c.left() < 1 {
            return Err(DecodeErr::Eof);
        }
        let used = base + stack.iter().map(Open::slots).sum::<usize>();
        if used + 1 > MAX_CSTACK {
            return Err(DecodeErr::Msg(TOO_MANY));
        }
        let mut value = match decode_head(lua, c)? {
            Item::Value(v) => v,
            Item::Open(len, map) => {
                if !map && used + 2 > MAX_CSTACK {
                    return Err(DecodeErr::Msg(ARRAY_STACK));
                }
                let table = lua.create_table()?;
                if len > 0 {
                    stack.push(Open {
                        map,
                        left: len,
                        index: 1,
                        has_key: false,
                    });
                    path.raw_set(2 * stack.len() - 1, table)?;
                    continue;
                }
                Value::Table(table)
            }
        };
        loop {
            let depth = stack.len();
            let Some(top) = stack.last_mut() else {
                return Ok(value);
            };
            let table: Table = path.raw_get(2 * depth - 1)?;
            if top.map {
                if !top.has_key {
                    top.has_key = true;
                    path.raw_set(2 * depth, value)?;
                    break;
                }
                top.has_key = false;
                let key: Value = path.raw_get(2 * depth)?;
                // lua_settable raises on a nil or NaN key.
                match key {
                    Value::Nil => return Err(DecodeErr::Raw("table index is nil")),
                    Value::Number(n) if n.is_nan() => {
                        return Err(DecodeErr::Raw("table index is NaN"))
                    }
                    _ => table.raw_set(key, value)?,
                }
                path.raw_set(2 * depth, Value::Nil)?;
            } else {
                table.raw_set(top.index, value)?;
                top.index += 1;
            }
            top.left -= 1;
            if top.left > 0 {
                break;
            }
            stack.pop();
            path.raw_set(2 * depth - 1, Value::Nil)?;
            value = Value::Table(table);
        }
    }
}

fn unpack_full(lua: &Lua, s: &[u8], limit: i64, offset: i64) -> Result<Results, Fail> {
    let len = s.len();
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        return Err(msg(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32, len as i32
        )));
    }
    if offset as u64 > len as u64 {
        return Err(msg(format!(
            "Start offset {} greater than input length {}.",
            offset as i32, len as i32
        )));
    }
    let limit = if decode_all { i32::MAX as i64 } else { limit };
    let mut c = Cursor {
        data: s,
        pos: offset as usize,
    };
    let out = lua.create_table()?;
    let path = lua.create_table()?;
    // Slot 1 is left for the offset when one is returned.
    let first = if decode_all { 1 } else { 2 };
    let mut cnt: i64 = 0;
    while c.left() > 0 && cnt < limit {
        match decode_one(lua, &mut c, 1 + cnt as usize, &path) {
            Ok(v) => out.raw_set(first + cnt, v)?,
            Err(DecodeErr::Eof) => return Err(msg("Missing bytes in input.")),
            Err(DecodeErr::BadFormat) => return Err(msg("Bad data format in input.")),
            Err(DecodeErr::Msg(m)) => return Err(msg(m)),
            Err(DecodeErr::Raw(m)) => return Err(Fail::Raw(m.into())),
            Err(DecodeErr::Lua(e)) => return Err(Fail::Lua(e)),
        }
        cnt += 1;
    }
    if decode_all {
        return Ok(Results(out, cnt));
    }
    if 1 + cnt as usize + 1 > MAX_CSTACK {
        return Err(msg("stack overflow (in function mp_unpack_full)"));
    }
    let next = if c.left() == 0 { -1.0 } else { c.pos as f64 };
    out.raw_set(1, next)?;
    Ok(Results(out, cnt + 1))
}

/// `mp_pack`'s own check: it needs as many free stack slots as it has arguments.
unsafe extern "C-unwind" fn pack_trampoline(l: *mut ffi::lua_State) -> c_int {
    let nargs = ffi::lua_gettop(l);
    if nargs > 0 && ffi::lua_checkstack(l, nargs) == 0 {
        return ffi::luaL_argerror(l, 0, c"Too many arguments for MessagePack pack.".as_ptr());
    }
    trampoline(l)
}

/// Sets the global `cmsgpack` table.
pub fn open(lua: &Lua) -> mlua::Result<()> {
    let t = lua.create_table()?;
    let pack_fn = c_style_with(
        lua,
        |lua, args| {
            if args.is_empty() {
                return Err(arg_err(0, "MessagePack pack needs input."));
            }
            let a: Vec<Value> = args.into_iter().collect();
            let bytes = pack(&a)?;
            Ok(MultiValue::from_vec(vec![Value::String(
                lua.create_string(&bytes)?,
            )]))
        },
        pack_trampoline,
    )?;
    t.set("pack", pack_fn)?;
    t.set(
        "unpack",
        c_style(lua, |lua, args| {
            let a: Vec<Value> = args.into_iter().collect();
            let s = check_bytes(&a, 1)?;
            unpack_full(lua, &s, 0, 0)
        })?,
    )?;
    t.set(
        "unpack_one",
        c_style(lua, |lua, args| {
            let a: Vec<Value> = args.into_iter().collect();
            let offset = opt_integer(&a, 2, 0)?;
            let s = check_bytes(&a, 1)?;
            unpack_full(lua, &s, 1, offset)
        })?,
    )?;
    t.set(
        "unpack_limit",
        c_style(lua, |lua, args| {
            let a: Vec<Value> = args.into_iter().collect();
            let limit = check_integer(&a, 2)?;
            let offset = opt_integer(&a, 3, 0)?;
            let s = check_bytes(&a, 1)?;
            unpack_full(lua, &s, limit, offset)
        })?,
    )?;
    t.set("_NAME", "cmsgpack")?;
    t.set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    lua.globals().set("cmsgpack", t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        open(&lua).unwrap();
        lua
    }

    fn hex(lua: &Lua, args: &str) -> String {
        let code = format!(
            "local s = cmsgpack.pack({args}) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end))"
        );
        match lua.load(&code).eval::<String>() {
            Ok(s) => s,
            Err(e) => format!("LUAERR {e}"),
        }
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

    #[test]
    fn pack_vectors() {
        let l = lua();
        let cases = [
            ("1", "01"),
            ("127, 128, 255, 256", "7fcc80ccffcd0100"),
            (
                "65535, 65536, 4294967295, 4294967296",
                "cdffffce00010000ceffffffffcf0000000100000000",
            ),
            ("-1, -32, -33, -128, -129", "ffe0d0dfd080d1ff7f"),
            (
                "-32768, -32769, -2147483648, -2147483649",
                "d18000d2ffff7fffd280000000d3ffffffff7fffffff",
            ),
            ("1.5, 0.1", "ca3fc00000cb3fb999999999999a"),
            ("1/0, -1/0", "ca7f800000caff800000"),
            ("2^63", "ca5f000000"),
            ("-2^63", "d38000000000000000"),
            ("true, false, nil", "c3c2c0"),
            ("'abc'", "a3616263"),
            ("string.rep('x', 32)", &format!("d920{}", "78".repeat(32))),
            (
                "string.rep('x', 256)",
                &format!("da0100{}", "78".repeat(256)),
            ),
            ("{}", "90"),
            ("{1,2,3}", "93010203"),
            ("{a=1}", "81a16101"),
            ("{[1]=1,[3]=3}", "820101" /* followed by 0303 */),
            ("print", "c0"),
        ];
        for (input, want) in cases {
            let got = hex(&l, input);
            assert!(got.starts_with(want), "{input}: {got}");
        }
        assert_eq!(hex(&l, "{[1]=1,[3]=3}").len(), 10);
        // Nesting past 16 levels packs nil.
        let nested = hex(&l, "(function() local t = {} local c = t for i=1,20 do c[1] = {} c = c[1] end return t end)()");
        assert_eq!(nested, format!("{}c0", "91".repeat(16)));
    }

    #[test]
    fn unpack_vectors() {
        let l = lua();
        let r = eval(
            &l,
            "local a, b, c, d = cmsgpack.unpack(cmsgpack.pack(1, 'x', {1,2,{k='v'}}, -1.5))
             return table.concat({a, b, #c, c[3].k, d}, ',')",
        );
        assert_eq!(r, "1,x,3,v,-1.5");
        let r = eval(
            &l,
            "local s = cmsgpack.pack(1, 2, 3)
             local o1, a = cmsgpack.unpack_one(s)
             local o2, b = cmsgpack.unpack_one(s, o1)
             local o3, c, d = cmsgpack.unpack_limit(s, 2, o1)
             local o4, e = cmsgpack.unpack_limit(s, 5)
             return table.concat({o1, a, o2, b, o3, c, d, o4, e}, ',')",
        );
        assert_eq!(r, "1,1,2,2,-1,2,3,-1,1");
        assert_eq!(
            eval(
                &l,
                "return tostring(cmsgpack.unpack('\\207\\255\\255\\255\\255\\255\\255\\255\\255'))"
            ),
            "-1"
        );
        assert_eq!(
            eval(&l, "return tostring(select('#', cmsgpack.unpack('')))"),
            "0"
        );
        assert_eq!(
            eval(
                &l,
                "return tostring(select('#', cmsgpack.unpack_limit('\\1\\2', 0)))"
            ),
            "2"
        );
    }

    #[test]
    fn errors() {
        let l = lua();
        let err = |call: &str| {
            eval(
                &l,
                &format!("local ok, e = pcall({call}) return tostring(e)"),
            )
        };
        assert_eq!(
            err("cmsgpack.pack"),
            "bad argument #0 to '?' (MessagePack pack needs input.)"
        );
        assert_eq!(
            err("cmsgpack.unpack, '\\205\\1'"),
            "Missing bytes in input."
        );
        assert_eq!(err("cmsgpack.unpack, '\\193'"), "Bad data format in input.");
        assert_eq!(
            err("cmsgpack.unpack, '\\146\\1'"),
            "Missing bytes in input."
        );
        assert_eq!(
            err("cmsgpack.unpack"),
            "bad argument #1 to '?' (string expected, got no value)"
        );
        assert_eq!(
            err("cmsgpack.unpack_one, 'a', -1"),
            "Invalid request to unpack with offset of -1 and limit of 1."
        );
        assert_eq!(
            err("cmsgpack.unpack_one, 'a', 5"),
            "Start offset 5 greater than input length 1."
        );
        assert_eq!(
            err("cmsgpack.unpack_limit, 'a'"),
            "bad argument #2 to '?' (number expected, got no value)"
        );
        assert_eq!(
            eval(&l, "return cmsgpack._VERSION .. cmsgpack._NAME"),
            "lua-cmsgpack 0.4.0cmsgpack"
        );
    }

    /// Limits where the C library runs out of Lua stack (values checked against Redis 7.0).
    #[test]
    fn stack_limits() {
        let l = lua();
        let err = |call: &str| {
            eval(
                &l,
                &format!("local ok, e = pcall(function() {call} end) return tostring(e)"),
            )
        };
        assert_eq!(
            err("return select('#', cmsgpack.unpack(string.rep('\\1', 7999)))"),
            "7999"
        );
        assert_eq!(
            err("return select('#', cmsgpack.unpack(string.rep('\\1', 8000)))"),
            format!("user_script:1: {TOO_MANY}")
        );
        assert_eq!(
            err("return select('#', cmsgpack.unpack_limit(string.rep('\\1', 7999), 7999))"),
            "user_script:1: stack overflow (in function mp_unpack_full)"
        );
        assert_eq!(
            err("return select('#', cmsgpack.unpack_limit(string.rep('\\1', 7998), 7998))"),
            "7999"
        );
        assert_eq!(
            err("return select('#', cmsgpack.unpack(string.rep('\\1', 7998)..'\\205'))"),
            "user_script:1: Missing bytes in input."
        );
        assert_eq!(
            err("return type(cmsgpack.unpack(string.rep('\\145', 3998) .. '\\1'))"),
            "table"
        );
        assert_eq!(
            err("return type(cmsgpack.unpack(string.rep('\\145', 4000) .. '\\1'))"),
            format!("user_script:1: {ARRAY_STACK}")
        );
        assert_eq!(
            err("return type(cmsgpack.unpack(string.rep('\\129\\1', 5000) .. '\\1'))"),
            format!("user_script:1: {TOO_MANY}")
        );
        assert_eq!(
            err("local t = {} for i=1,4000 do t[i] = 1 end return #cmsgpack.pack(unpack(t))"),
            "4000"
        );
        assert_eq!(
            err("local t = {} for i=1,4001 do t[i] = 1 end return #cmsgpack.pack(unpack(t))"),
            "user_script:1: bad argument #0 to 'pack' (Too many arguments for MessagePack pack.)"
        );
        // Large containers hold no mlua reference per item.
        assert_eq!(
            err("local t = {} for i=1,100000 do t['k' .. i] = 'v' .. i end
                 local u = cmsgpack.unpack(cmsgpack.pack(t)) return u.k99999"),
            "v99999"
        );
    }

    #[test]
    fn decode_edge_cases() {
        let l = lua();
        let err = |call: &str| {
            eval(
                &l,
                &format!("local ok, e = pcall(function() {call} end) return tostring(e)"),
            )
        };
        assert_eq!(
            err("return cmsgpack.unpack('\\129\\192\\1')"),
            "table index is nil"
        );
        assert_eq!(
            err("return cmsgpack.unpack('\\199')"),
            "user_script:1: Bad data format in input."
        );
        assert_eq!(
            err("return cmsgpack.unpack('\\218\\0\\2x')"),
            "user_script:1: Missing bytes in input."
        );
        assert_eq!(
            err("return tostring(cmsgpack.unpack('\\209\\128\\0'))"),
            "-32768"
        );
        assert_eq!(
            err("return tostring(cmsgpack.unpack('\\206\\255\\255\\255\\255'))"),
            "4294967295"
        );
        assert_eq!(
            err("return table.concat({cmsgpack.unpack_one('\\1\\2', 1.7)}, ',')"),
            "-1,2"
        );
        assert_eq!(err("return #cmsgpack.pack(1, nil, 3)"), "3");
    }
}
