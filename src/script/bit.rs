//! The `bit` library (LuaBitOp 1.0.2) as Redis embeds it.
//!
//! The functions are raw Lua C functions (through `mlua::ffi`) rather than mlua callbacks:
//! errors must be plain Lua strings raised with `luaL_typerror`, so that messages
//! (`bad argument #1 to 'band' (number expected, got string)`, with the caller's name and
//! position) and `pcall` results match Redis byte for byte. Raising unwinds with longjmp,
//! so no function here holds a value with a destructor when it may raise.

use std::os::raw::c_int;

use mlua::ffi::{self, lua_State};

/// 2^52 + 2^51: adding it to a double leaves the integer part, rounded to nearest-even and
/// taken modulo 2^32, in the low mantissa bits (LuaBitOp's number normalisation).
const MAGIC: f64 = 6_755_399_441_055_744.0;

/// LuaBitOp's conversion of a Lua number to a 32-bit pattern.
pub fn to_bits(n: f64) -> u32 {
    (n + MAGIC).to_bits() as u32
}

/// Reads argument `idx` as a bit pattern; non-numbers raise like LuaBitOp does.
unsafe fn barg(l: *mut lua_State, idx: c_int) -> u32 {
    let b = to_bits(ffi::lua_tonumber(l, idx));
    // LuaBitOp only checks the type when the result is 0 (a non-number converts to 0).
    if b == 0 && ffi::lua_isnumber(l, idx) == 0 {
        ffi::luaL_typerror(l, idx, c"number".as_ptr());
    }
    b
}

/// Pushes a result as a signed 32-bit number.
unsafe fn bret(l: *mut lua_State, b: u32) -> c_int {
    ffi::lua_pushnumber(l, b as i32 as f64);
    1
}

unsafe extern "C-unwind" fn tobit(l: *mut lua_State) -> c_int {
    bret(l, barg(l, 1))
}

unsafe extern "C-unwind" fn bnot(l: *mut lua_State) -> c_int {
    bret(l, !barg(l, 1))
}

/// Folds arguments from the last down to the second into the first, as LuaBitOp does (so
/// with several bad arguments the last one is reported).
unsafe fn fold(l: *mut lua_State, op: fn(u32, u32) -> u32) -> c_int {
    let mut b = barg(l, 1);
    let mut i = ffi::lua_gettop(l);
    while i > 1 {
        b = op(b, barg(l, i));
        i -= 1;
    }
    bret(l, b)
}

unsafe extern "C-unwind" fn band(l: *mut lua_State) -> c_int {
    fold(l, |a, b| a & b)
}

unsafe extern "C-unwind" fn bor(l: *mut lua_State) -> c_int {
    fold(l, |a, b| a | b)
}

unsafe extern "C-unwind" fn bxor(l: *mut lua_State) -> c_int {
    fold(l, |a, b| a ^ b)
}

/// Shift/rotate: the count is taken modulo 32.
unsafe fn shift(l: *mut lua_State, op: fn(u32, u32) -> u32) -> c_int {
    let b = barg(l, 1);
    let n = barg(l, 2) & 31;
    bret(l, op(b, n))
}

unsafe extern "C-unwind" fn lshift(l: *mut lua_State) -> c_int {
    shift(l, |b, n| b << n)
}

unsafe extern "C-unwind" fn rshift(l: *mut lua_State) -> c_int {
    shift(l, |b, n| b >> n)
}

unsafe extern "C-unwind" fn arshift(l: *mut lua_State) -> c_int {
    shift(l, |b, n| ((b as i32) >> n) as u32)
}

unsafe extern "C-unwind" fn rol(l: *mut lua_State) -> c_int {
    shift(l, u32::rotate_left)
}

unsafe extern "C-unwind" fn ror(l: *mut lua_State) -> c_int {
    shift(l, u32::rotate_right)
}

unsafe extern "C-unwind" fn bswap(l: *mut lua_State) -> c_int {
    bret(l, barg(l, 1).swap_bytes())
}

/// `n` hex digits of `b` (lowercase; uppercase when `n` is negative), at most 8.
pub fn hex(b: u32, n: i32) -> ([u8; 8], usize) {
    let digits: &[u8; 16] = if n < 0 {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    // Redis's build turns -(-2^31) into "more than 8", so it prints 8 digits.
    let n = n.unsigned_abs().min(8) as usize;
    let mut buf = [0u8; 8];
    let mut b = b;
    for slot in buf[..n].iter_mut().rev() {
        *slot = digits[(b & 15) as usize];
        b >>= 4;
    }
    (buf, n)
}

unsafe extern "C-unwind" fn tohex(l: *mut lua_State) -> c_int {
    let b = barg(l, 1);
    let n = if ffi::lua_isnone(l, 2) != 0 {
        8
    } else {
        barg(l, 2) as i32
    };
    let (buf, len) = hex(b, n);
    ffi::lua_pushlstring(l, buf.as_ptr().cast(), len);
    1
}

/// Sets the global `bit` table.
pub fn open(lua: &mlua::Lua) -> mlua::Result<()> {
    let funcs: [(&str, ffi::lua_CFunction); 12] = [
        ("tobit", tobit),
        ("bnot", bnot),
        ("band", band),
        ("bor", bor),
        ("bxor", bxor),
        ("lshift", lshift),
        ("rshift", rshift),
        ("arshift", arshift),
        ("rol", rol),
        ("ror", ror),
        ("bswap", bswap),
        ("tohex", tohex),
    ];
    let t = lua.create_table()?;
    for (name, f) in funcs {
        // SAFETY: each function follows the Lua C API protocol and holds no value with a
        // destructor across a call that may raise.
        t.set(name, unsafe { lua.create_c_function(f)? })?;
    }
    lua.globals().set("bit", t)
}

#[cfg(test)]
pub(crate) mod tests {
    use mlua::Lua;

    /// Lua helpers shared by the bit and struct tests: `s(...)` renders results as Redis
    /// test vectors were recorded (strings as `x` + hex), `e(f)` catches errors.
    pub(crate) const PRE: &str = "local function s(...) local t = {} for i=1,select('#',...) do \
        local v = select(i,...) if type(v)=='string' then v = string.gsub(v, '.', \
        function(c) return string.format('%02x', string.byte(c)) end) v = 'x'..v end \
        t[#t+1]=tostring(v) end return table.concat(t, ',') end \
        local function e(f) local r = {pcall(f)} if r[1] then return s(unpack(r,2)) \
        else return 'err:'..tostring(r[2]) end end ";

    /// Runs each `expr ==> expected` line (expected output recorded from redis-server 7.0.15).
    pub(crate) fn check(lua: &Lua, vectors: &str) {
        let mut failures = Vec::new();
        for line in vectors.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let (expr, want) = line.split_once(" ==> ").expect("vector line has ==>");
            let src = format!("{PRE} return e(function() {expr} end)");
            let got: String = lua
                .load(&src)
                .set_name("@user_script")
                .eval()
                .unwrap_or_else(|err| format!("lua error: {err}"));
            if got != want {
                failures.push(format!("{expr}\n   want {want}\n   got  {got}"));
            }
        }
        assert!(
            failures.is_empty(),
            "{} mismatches:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }

    /// `expression ==> result` lines recorded from redis-server 7.0.15 (same library as 7.2).
    const VECTORS: &str = r#"
return bit.tobit(0xffffffff) ==> -1
return bit.tobit(0xffffffff + 1) ==> 0
return bit.tobit(2^40 + 1234) ==> 1234
return bit.tobit(2^31) ==> -2147483648
return bit.tobit(-2^31) ==> -2147483648
return bit.tobit(-1) ==> -1
return bit.tobit(1.5) ==> 2
return bit.tobit(2.5) ==> 2
return bit.tobit(-1.5) ==> -2
return bit.tobit(0.4999) ==> 0
return bit.tobit(2^53) ==> 0
return bit.tobit(2^60 + 3*2^20) ==> 12288
return bit.tobit(1/0) ==> 0
return bit.tobit(-1/0) ==> 0
return bit.tobit(0/0) ==> 0
return bit.tobit("12") ==> 12
return bit.tobit("0x10") ==> 16
return bit.tobit(" 7 ") ==> 7
return bit.tobit("abc") ==> err:user_script:1: bad argument #1 to 'tobit' (number expected, got string)
return bit.tobit() ==> err:user_script:1: bad argument #1 to 'tobit' (number expected, got no value)
return bit.tobit(nil) ==> err:user_script:1: bad argument #1 to 'tobit' (number expected, got nil)
return bit.tobit({}) ==> err:user_script:1: bad argument #1 to 'tobit' (number expected, got table)
return bit.tobit(true) ==> err:user_script:1: bad argument #1 to 'tobit' (number expected, got boolean)
return bit.tobit("0") ==> 0
return bit.tohex(1) ==> x3030303030303031
return bit.tohex(-1) ==> x6666666666666666
return bit.tohex(65535, -4) ==> x46464646
return bit.tohex(65535, 4) ==> x66666666
return bit.tohex(0x12345678, 2) ==> x3738
return bit.tohex(0x12345678, -2) ==> x3738
return bit.tohex(0x12345678, 0) ==> x
return bit.tohex(0x12345678, 12) ==> x3132333435363738
return bit.tohex(0x12345678, -12) ==> x3132333435363738
return bit.tohex(0xabcdef01, -8) ==> x4142434445463031
return bit.tohex(255, 2.7) ==> x306666
return bit.tohex(255, "3") ==> x306666
return bit.tohex(255, nil) ==> err:user_script:1: bad argument #2 to 'tohex' (number expected, got nil)
return bit.tohex(255, "z") ==> err:user_script:1: bad argument #2 to 'tohex' (number expected, got string)
return bit.tohex("z") ==> err:user_script:1: bad argument #1 to 'tohex' (number expected, got string)
return bit.bnot(0) ==> -1
return bit.bnot(-1) ==> 0
return bit.bnot(2^31) ==> 2147483647
return bit.band(0xff00ff, 0x0ff0f0) ==> 983280
return bit.band(-1, 0xffffffff, 7) ==> 7
return bit.band(5) ==> 5
return bit.band() ==> err:user_script:1: bad argument #1 to 'band' (number expected, got no value)
return bit.bor(1, 2, 4, 8, 2^31) ==> -2147483633
return bit.bxor(0xff, 0x0f, 0xf0f0) ==> 61440
return bit.band(1, "x") ==> err:user_script:1: bad argument #2 to 'band' (number expected, got string)
return bit.bor(1, 2, nil) ==> err:user_script:1: bad argument #3 to 'bor' (number expected, got nil)
return bit.lshift(1, 31) ==> -2147483648
return bit.lshift(1, 32) ==> 1
return bit.lshift(1, 33) ==> 2
return bit.lshift(1, -1) ==> -2147483648
return bit.lshift(0x87654321, 12) ==> 1412567040
return bit.rshift(-1, 28) ==> 15
return bit.rshift(-256, 4) ==> 268435440
return bit.arshift(-256, 4) ==> -16
return bit.arshift(2^31, 31) ==> -1
return bit.arshift(0x7fffffff, 30) ==> 1
return bit.rol(0x12345678, 12) ==> 1164411171
return bit.ror(0x12345678, 12) ==> 1736516421
return bit.rol(0x12345678, 0) ==> 305419896
return bit.ror(0x12345678, 32) ==> 305419896
return bit.rol(0x12345678, -4) ==> -2128394905
return bit.bswap(0x12345678) ==> 2018915346
return bit.bswap(-1) ==> -1
return bit.bswap(0xff) ==> -16777216
return bit.lshift(1) ==> err:user_script:1: bad argument #2 to 'lshift' (number expected, got no value)
return bit.lshift() ==> err:user_script:1: bad argument #1 to 'lshift' (number expected, got no value)
return bit.rshift("a", 1) ==> err:user_script:1: bad argument #1 to 'rshift' (number expected, got string)
return bit.tohex(1, -2147483647) ==> x3030303030303031
return bit.lshift(2^31, 0) ==> -2147483648
return bit.tobit(4294967295.5) ==> 0
return bit.tobit(-0.5) ==> 0
return bit.tobit(-2.5) ==> -2
return bit.band(1.7, 3) ==> 2
return bit.tobit(2^51) ==> 0
return bit.tobit(2^52 + 1) ==> 0
return bit.tobit(-2^51 - 1) ==> -2
return bit.tobit(-2^52 - 3) ==> -12
return pcall(bit.band, "x") ==> false,x62616420617267756d656e7420233120746f20273f2720286e756d6265722065787065637465642c20676f7420737472696e6729
return bit.tobit("1e3") ==> 1000
return bit.tobit("") ==> err:user_script:1: bad argument #1 to 'tobit' (number expected, got string)
return bit.tobit(" ") ==> err:user_script:1: bad argument #1 to 'tobit' (number expected, got string)
return bit.tohex(-1, -1) ==> x46
return bit.tohex(0x1234, -0.5) ==> x
return bit.bxor() ==> err:user_script:1: bad argument #1 to 'bxor' (number expected, got no value)
return bit.bor(1, {}, "x") ==> err:user_script:1: bad argument #3 to 'bor' (number expected, got string)
return pcall(bit.tohex) ==> false,x62616420617267756d656e7420233120746f20273f2720286e756d6265722065787065637465642c20676f74206e6f2076616c756529
return bit.tohex(2^32 + 15, 1) ==> x66
return bit.rol(1, 31), bit.ror(1, 1), bit.ror(1, 33) ==> -2147483648,-2147483648,-2147483648
return bit.arshift(-1, 31), bit.arshift(-2^31, 1), bit.rshift(2^31, 31) ==> -1,-1073741824,1
return bit.tobit("0x7fffffff"), bit.tobit("0x80000000"), bit.tobit("-0x1") ==> 2147483647,-2147483648,-1
return bit.tobit(" 10 "), bit.tobit("10e"), bit.tobit("1e2") ==> err:user_script:1: bad argument #1 to 'tobit' (number expected, got string)
return bit:band(1) ==> err:user_script:1: calling 'band' on bad self (number expected, got table)
"#;

    fn lua() -> Lua {
        let lua = Lua::new();
        super::open(&lua).unwrap();
        lua
    }

    #[test]
    fn normalisation() {
        assert_eq!(super::to_bits(1437217655.0), 1437217655);
        assert_eq!(super::to_bits(-1.0), u32::MAX);
        assert_eq!(super::to_bits(2.5), 2);
        assert_eq!(super::to_bits(f64::NAN), 0);
        assert_eq!(super::hex(0xabcdef01, i32::MIN).0, *b"ABCDEF01");
    }

    #[test]
    fn redis_vectors() {
        check(&lua(), VECTORS);
    }
}
