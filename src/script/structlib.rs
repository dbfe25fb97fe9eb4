//! The `struct` library (Roberto Ierusalimschy's struct.c, as patched in Redis's
//! deps/lua/src/lua_struct.c) with the sizes of an x86-64 Linux build of Redis.
//!
//! Like `bit`, these are raw Lua C functions (through `mlua::ffi`) so that errors are plain
//! Lua strings raised by `luaL_error`/`luaL_argerror` (`bad argument #2 to 'unpack' (data
//! string too short)`) and so that Lua's own argument coercions (numbers as strings and
//! back) apply exactly. Raising unwinds with longjmp, so nothing here holds a value with a
//! destructor while it may raise. Where C's conversions are undefined (out-of-range double to
//! integer, over-wide shifts), this reproduces what x86-64 does, as Redis's replies show.

use std::os::raw::c_int;

use mlua::ffi::{self, lua_State};

/// Largest size of an `i`/`I` integer.
const MAXINTSIZE: c_int = 32;
/// Default `!` alignment: the alignment of a double.
const MAXALIGN: c_int = 8;
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// Parsing state: the format (up to its first NUL, as C sees it), the read position and
/// the header options.
struct Fmt {
    ptr: *const u8,
    len: usize,
    at: usize,
    big: bool,
    align: usize,
}

impl Fmt {
    unsafe fn check(l: *mut lua_State) -> Fmt {
        let mut len = 0usize;
        let ptr = ffi::luaL_checklstring(l, 1, &mut len).cast::<u8>();
        let bytes = std::slice::from_raw_parts(ptr, len);
        let len = bytes.iter().position(|&b| b == 0).unwrap_or(len);
        Fmt {
            ptr,
            len,
            at: 0,
            big: false,
            align: 1,
        }
    }

    /// The byte at the read position, if any.
    unsafe fn peek(&self) -> Option<u8> {
        (self.at < self.len).then(|| *self.ptr.add(self.at))
    }

    unsafe fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.at += 1;
        Some(c)
    }

    /// An optional decimal number (default `df`), refused past `c_int`.
    unsafe fn getnum(&mut self, l: *mut lua_State, df: c_int) -> c_int {
        let mut a: c_int = 0;
        let mut any = false;
        while let Some(c @ b'0'..=b'9') = self.peek() {
            let d = c_int::from(c - b'0');
            if a > c_int::MAX / 10 || a * 10 > c_int::MAX - d {
                ffi::luaL_error(l, c"integral size overflow".as_ptr());
            }
            a = a * 10 + d;
            self.at += 1;
            any = true;
        }
        if any {
            a
        } else {
            df
        }
    }

    /// Size of option `opt` (consuming its number); 0 for options without data.
    unsafe fn optsize(&mut self, l: *mut lua_State, opt: u8) -> usize {
        match opt {
            b'b' | b'B' | b'x' => 1,
            b'h' | b'H' => 2,
            b'f' => 4,
            b'l' | b'L' | b'T' | b'd' => 8,
            // getnum never returns a negative number.
            b'c' => self.getnum(l, 1) as usize,
            b'i' | b'I' => {
                let sz = self.getnum(l, 4);
                if sz > MAXINTSIZE {
                    ffi::luaL_error(
                        l,
                        c"integral size %d is larger than limit of %d".as_ptr(),
                        sz,
                        MAXINTSIZE,
                    );
                }
                sz as usize
            }
            _ => 0,
        }
    }

    /// Padding needed before an item of `size` bytes at offset `len`.
    fn toalign(&self, len: usize, opt: u8, size: usize) -> usize {
        if size == 0 || opt == b'c' {
            return 0;
        }
        let size = size.min(self.align);
        (size - (len & (size - 1))) & (size - 1)
    }

    /// Endianness, alignment and spaces; anything else is an invalid option.
    unsafe fn control(&mut self, l: *mut lua_State, opt: u8) {
        match opt {
            b' ' => {}
            b'>' => self.big = true,
            b'<' => self.big = false,
            b'!' => {
                let a = self.getnum(l, MAXALIGN);
                if a <= 0 || a & (a - 1) != 0 {
                    ffi::luaL_error(l, c"alignment %d is not a power of 2".as_ptr(), a);
                }
                self.align = a as usize;
            }
            _ => {
                let mut msg = *b"invalid format option '?'";
                msg[23] = opt;
                ffi::lua_pushlstring(l, msg.as_ptr().cast(), msg.len());
                ffi::luaL_argerror(l, 1, ffi::lua_tolstring(l, -1, std::ptr::null_mut()));
            }
        }
    }
}

/// C's `(long)x` on x86-64: out of range and NaN give `i64::MIN`.
pub fn to_long(x: f64) -> i64 {
    if x.is_nan() || !(-TWO_63..TWO_63).contains(&x) {
        i64::MIN
    } else {
        x as i64
    }
}

/// C's `(unsigned long)x` as gcc compiles it on x86-64.
pub fn to_ulong(x: f64) -> u64 {
    if x >= TWO_63 {
        (to_long(x - TWO_63) as u64) ^ (1 << 63)
    } else {
        to_long(x) as u64
    }
}

/// The bytes of an integer of `size` bytes (beyond 8 bytes, the high ones are zero).
pub fn put_integer(n: f64, big: bool, size: usize) -> ([u8; 32], usize) {
    let mut value = if n < 0.0 {
        to_long(n) as u64
    } else {
        to_ulong(n)
    };
    let mut buf = [0u8; 32];
    let size = size.min(32);
    for i in 0..size {
        buf[if big { size - 1 - i } else { i }] = (value & 0xff) as u8;
        value >>= 8;
    }
    (buf, size)
}

/// Reads an integer of `size` bytes (only the last 8 significant bytes survive).
pub fn get_integer(bytes: &[u8], big: bool, signed: bool) -> f64 {
    let mut v: u64 = 0;
    let mut push = |b: &u8| v = (v << 8) | u64::from(*b);
    if big {
        bytes.iter().for_each(&mut push);
    } else {
        bytes.iter().rev().for_each(&mut push);
    }
    if !signed {
        return v as f64;
    }
    // x86 masks the shift count to 6 bits, so sizes past 8 bytes (and 0) wrap around.
    let shift = ((bytes.len() as u32).wrapping_mul(8).wrapping_sub(1)) & 63;
    let mask = u64::MAX << shift;
    if v & mask != 0 {
        v |= mask;
    }
    v as i64 as f64
}

/// Raises "bad argument #`arg` to '<fn>' (`msg`)" unless `ok`.
unsafe fn argcheck(l: *mut lua_State, ok: bool, arg: c_int, msg: &std::ffi::CStr) {
    if !ok {
        ffi::luaL_argerror(l, arg, msg.as_ptr());
    }
}

unsafe extern "C-unwind" fn pack(l: *mut lua_State) -> c_int {
    let mut fmt = Fmt::check(l);
    let mut arg: c_int = 2;
    let mut total: usize = 0;
    ffi::lua_pushnil(l); // separates the arguments from the buffer's stack slots
    let mut b: ffi::luaL_Buffer = std::mem::zeroed();
    ffi::luaL_buffinit(l, &mut b);
    while let Some(opt) = fmt.next() {
        let mut size = fmt.optsize(l, opt);
        let pad = fmt.toalign(total, opt, size);
        total = total.wrapping_add(pad);
        for _ in 0..pad {
            ffi::luaL_addchar(&mut b, 0);
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = ffi::luaL_checknumber(l, arg);
                arg += 1;
                let (buf, len) = put_integer(n, fmt.big, size);
                ffi::luaL_addlstring(&mut b, buf.as_ptr().cast(), len);
            }
            b'x' => ffi::luaL_addchar(&mut b, 0),
            b'f' => {
                let f = ffi::luaL_checknumber(l, arg) as f32;
                arg += 1;
                let bytes = if fmt.big {
                    f.to_be_bytes()
                } else {
                    f.to_le_bytes()
                };
                ffi::luaL_addlstring(&mut b, bytes.as_ptr().cast(), bytes.len());
            }
            b'd' => {
                let d = ffi::luaL_checknumber(l, arg);
                arg += 1;
                let bytes = if fmt.big {
                    d.to_be_bytes()
                } else {
                    d.to_le_bytes()
                };
                ffi::luaL_addlstring(&mut b, bytes.as_ptr().cast(), bytes.len());
            }
            b'c' | b's' => {
                let mut len = 0usize;
                let s = ffi::luaL_checklstring(l, arg, &mut len);
                arg += 1;
                if size == 0 {
                    size = len;
                }
                // The C library reports the argument after the string here.
                argcheck(l, len >= size, arg, c"string too short");
                ffi::luaL_addlstring(&mut b, s, size);
                if opt == b's' {
                    ffi::luaL_addchar(&mut b, 0);
                    size += 1;
                }
            }
            _ => fmt.control(l, opt),
        }
        total = total.wrapping_add(size);
    }
    ffi::luaL_pushresult(&mut b);
    1
}

unsafe extern "C-unwind" fn unpack(l: *mut lua_State) -> c_int {
    let mut fmt = Fmt::check(l);
    let mut ld = 0usize;
    let data = ffi::luaL_checklstring(l, 2, &mut ld).cast::<u8>();
    let data = std::slice::from_raw_parts(data, ld);
    // C stores the Lua integer in a size_t: negative offsets become huge.
    let mut pos = ffi::luaL_optinteger(l, 3, 1) as usize;
    argcheck(l, pos > 0, 3, c"offset must be 1 or greater");
    pos -= 1;
    let mut n: c_int = 0;
    let fits = |pos: usize, size: usize| size <= ld && pos <= ld - size;
    while let Some(opt) = fmt.next() {
        let mut size = fmt.optsize(l, opt);
        pos = pos.wrapping_add(fmt.toalign(pos, opt, size));
        argcheck(l, fits(pos, size), 2, c"data string too short");
        ffi::luaL_checkstack(l, 2, c"too many results".as_ptr());
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.is_ascii_lowercase();
                let v = get_integer(&data[pos..pos + size], fmt.big, signed);
                ffi::lua_pushnumber(l, v);
                n += 1;
            }
            b'x' => {}
            b'f' => {
                let mut raw = [0u8; 4];
                raw.copy_from_slice(&data[pos..pos + 4]);
                let f = if fmt.big {
                    f32::from_be_bytes(raw)
                } else {
                    f32::from_le_bytes(raw)
                };
                ffi::lua_pushnumber(l, f64::from(f));
                n += 1;
            }
            b'd' => {
                let mut raw = [0u8; 8];
                raw.copy_from_slice(&data[pos..pos + 8]);
                let d = if fmt.big {
                    f64::from_be_bytes(raw)
                } else {
                    f64::from_le_bytes(raw)
                };
                ffi::lua_pushnumber(l, d);
                n += 1;
            }
            b'c' => {
                if size == 0 {
                    // The length is the previous result, which this consumes.
                    if n == 0 || ffi::lua_isnumber(l, -1) == 0 {
                        ffi::luaL_error(l, c"format 'c0' needs a previous size".as_ptr());
                    }
                    size = to_ulong(ffi::lua_tonumber(l, -1)) as usize;
                    ffi::lua_pop(l, 1);
                    n -= 1;
                    argcheck(l, fits(pos, size), 2, c"data string too short");
                }
                ffi::lua_pushlstring(l, data[pos..].as_ptr().cast(), size);
                n += 1;
            }
            b's' => {
                let Some(end) = data[pos..].iter().position(|&c| c == 0) else {
                    ffi::luaL_error(l, c"unfinished string in data".as_ptr());
                    return 0;
                };
                ffi::lua_pushlstring(l, data[pos..].as_ptr().cast(), end);
                size = end + 1;
                n += 1;
            }
            _ => fmt.control(l, opt),
        }
        pos = pos.wrapping_add(size);
    }
    ffi::lua_pushinteger(l, pos.wrapping_add(1) as ffi::lua_Integer);
    n + 1
}

unsafe extern "C-unwind" fn size(l: *mut lua_State) -> c_int {
    let mut fmt = Fmt::check(l);
    let mut pos: usize = 0;
    while let Some(opt) = fmt.next() {
        let size = fmt.optsize(l, opt);
        pos = pos.wrapping_add(fmt.toalign(pos, opt, size));
        if opt == b's' {
            ffi::luaL_argerror(l, 1, c"option 's' has no fixed size".as_ptr());
        } else if opt == b'c' && size == 0 {
            ffi::luaL_argerror(l, 1, c"option 'c0' has no fixed size".as_ptr());
        }
        // Unknown letters and digits are silently sized 0 here (as in the C library).
        if !opt.is_ascii_alphanumeric() {
            fmt.control(l, opt);
        }
        pos = pos.wrapping_add(size);
    }
    ffi::lua_pushinteger(l, pos as ffi::lua_Integer);
    1
}

/// Sets the global `struct` table.
pub fn open(lua: &mlua::Lua) -> mlua::Result<()> {
    let funcs: [(&str, ffi::lua_CFunction); 3] =
        [("pack", pack), ("unpack", unpack), ("size", size)];
    let t = lua.create_table()?;
    for (name, f) in funcs {
        // SAFETY: each function follows the Lua C API protocol and holds no value with a
        // destructor across a call that may raise.
        t.set(name, unsafe { lua.create_c_function(f)? })?;
    }
    lua.globals().set("struct", t)
}

#[cfg(test)]
mod tests {
    use mlua::Lua;

    fn lua() -> Lua {
        let lua = Lua::new();
        super::open(&lua).unwrap();
        lua
    }

    #[test]
    fn conversions() {
        assert_eq!(super::to_ulong(f64::NAN), 1 << 63);
        assert_eq!(super::to_ulong(f64::INFINITY), 0);
        assert_eq!(super::to_long(-1.9), -1);
        assert_eq!(
            super::get_integer(&[0xff, 2, 3, 4, 5, 6, 7, 8, 9], true, true),
            -119.0
        );
        assert_eq!(super::put_integer(-1.0, true, 3).0[..3], [0xff, 0xff, 0xff]);
    }

    #[test]
    fn redis_vectors() {
        crate::script::bit::tests::check(&lua(), VECTORS);
    }

    /// `expression ==> result` lines recorded from redis-server 7.0.15 (same library as 7.2).
    const VECTORS: &str = r#"
return struct.pack('>I2', 258) ==> x0102
return struct.unpack('>I2', struct.pack('>I2', 258)) ==> 258,3
return struct.pack('<I2', 258) ==> x0201
return struct.pack('b', -1) ==> xff
return struct.pack('B', 255) ==> xff
return struct.pack('B', 256) ==> x00
return struct.pack('b', 200) ==> xc8
return struct.pack('h', -2) ==> xfeff
return struct.pack('>H', 65535) ==> xffff
return struct.pack('<l', -2) ==> xfeffffffffffffff
return struct.pack('>L', 1) ==> x0000000000000001
return struct.pack('>T', 1) ==> x0000000000000001
return struct.pack('i', 7) ==> x07000000
return struct.pack('>i', -7) ==> xfffffff9
return struct.pack('>i3', 0x123456) ==> x123456
return struct.pack('>i16', -1) ==> x0000000000000000ffffffffffffffff
return struct.pack('<I16', 1) ==> x01000000000000000000000000000000
return struct.pack('>i32', -2) ==> x000000000000000000000000000000000000000000000000fffffffffffffffe
return struct.pack('i33', 1) ==> err:user_script:1: integral size 33 is larger than limit of 32
return struct.pack('i0', 1) ==> x
return struct.pack('i3', 1) ==> x010000
return struct.pack('>i8', 2^63) ==> x8000000000000000
return struct.pack('>I8', 2^64) ==> x0000000000000000
return struct.pack('>I8', 2^63) ==> x8000000000000000
return struct.pack('>i8', -2^63) ==> x8000000000000000
return struct.pack('>I4', 1.9) ==> x00000001
return struct.pack('>i4', -1.9) ==> xffffffff
return struct.pack('>I4', 2^32) ==> x00000000
return struct.pack('>I4', "12") ==> x0000000c
return struct.pack('>I4', "a") ==> err:user_script:1: bad argument #2 to 'pack' (number expected, got string)
return struct.pack('>I4') ==> err:user_script:1: bad argument #2 to 'pack' (number expected, got nil)
return struct.pack('>f', 1.5) ==> x3fc00000
return struct.pack('<f', 0.1) ==> xcdcccc3d
return struct.pack('>d', 0.1) ==> x3fb999999999999a
return struct.pack('<d', -1/0) ==> x000000000000f0ff
return struct.unpack('>f', struct.pack('>f', 0.1)) ==> 0.10000000149012,5
return struct.unpack('<d', struct.pack('<d', 0.1)) ==> 0.1,9
return struct.pack('s', 'abc') ==> x61626300
return struct.pack('s', 'a\0b') ==> x61006200
return struct.pack('c', 'abc') ==> x61
return struct.pack('c2', 'abc') ==> x6162
return struct.pack('c5', 'abc') ==> err:user_script:1: bad argument #3 to 'pack' (string too short)
return struct.pack('c0', 'abc') ==> x616263
return struct.pack('c0', '') ==> x
return struct.pack('c', 12) ==> x31
return struct.pack('s', {}) ==> err:user_script:1: bad argument #2 to 'pack' (string expected, got table)
return struct.pack('x') ==> x00
return struct.pack('xxb', 1) ==> x000001
return struct.pack('b x b', 1, 2) ==> x010002
return struct.pack('!4 b i', 1, 2) ==> x0100000002000000
return struct.pack('! b i', 1, 2) ==> x0100000002000000
return struct.pack('!8 b d', 1, 2) ==> x01000000000000000000000000000040
return struct.pack('!2 b i', 1, 2) ==> x010002000000
return struct.pack('!3 b i', 1, 2) ==> err:user_script:1: alignment 3 is not a power of 2
return struct.pack('!0 b', 1) ==> err:user_script:1: alignment 0 is not a power of 2
return struct.pack('!4 b c3 i', 1, 'abc', 2) ==> x0161626302000000
return struct.pack('!4 b s i', 1, 'ab', 2) ==> x0161620002000000
return struct.pack('!4 b h', 1, 2) ==> x01000200
return struct.pack('!4 b x i', 1, 2) ==> x0100000002000000
return struct.pack('!4 b f', 1, 2) ==> x0100000000000040
return struct.pack('!4 b i8', 1, 2) ==> x010000000200000000000000
return struct.pack('!16 b i8', 1, 2) ==> x01000000000000000200000000000000
return struct.pack('X') ==> err:user_script:1: bad argument #1 to 'pack' (invalid format option 'X')
return struct.pack('bz', 1) ==> err:user_script:1: bad argument #1 to 'pack' (invalid format option 'z')
return struct.pack('b', 1, 2, 3) ==> x01
return struct.pack('') ==> x
return struct.pack() ==> err:user_script:1: bad argument #1 to 'pack' (string expected, got no value)
return struct.pack(12, 1) ==> err:user_script:1: bad argument #1 to 'pack' (invalid format option '1')
return struct.pack({}) ==> err:user_script:1: bad argument #1 to 'pack' (string expected, got table)
return struct.pack('<>b', 1) ==> x01
return struct.unpack('b', '\255') ==> -1,2
return struct.unpack('B', '\255') ==> 255,2
return struct.unpack('>h', '\255\254') ==> -2,3
return struct.unpack('<H', '\255\254') ==> 65279,3
return struct.unpack('>i3', '\255\255\254') ==> -2,4
return struct.unpack('>I3', '\255\255\254') ==> 16777214,4
return struct.unpack('>i8', '\255\255\255\255\255\255\255\254') ==> -2,9
return struct.unpack('>I8', '\255\255\255\255\255\255\255\254') ==> 1.844674407371e+19,9
return struct.unpack('>I8', '\128\0\0\0\0\0\0\1') ==> 9.2233720368548e+18,9
return struct.unpack('>i16', string.rep('\255', 16)) ==> -1,17
return struct.unpack('>I16', string.rep('\1', 16)) ==> 7.2340172838077e+16,17
return struct.unpack('<i16', '\1' .. string.rep('\0', 15)) ==> 1,17
return struct.unpack('>i16', '\1' .. string.rep('\0', 15)) ==> 0,17
return struct.unpack('>I9', '\1\2\3\4\5\6\7\8\9') ==> 1.4496403262846e+17,10
return struct.unpack('>i9', '\255\2\3\4\5\6\7\8\9') ==> -119,10
return struct.unpack('b', '') ==> err:user_script:1: bad argument #2 to 'unpack' (data string too short)
return struct.unpack('>I4', 'abc') ==> err:user_script:1: bad argument #2 to 'unpack' (data string too short)
return struct.unpack('s', 'abc') ==> err:user_script:1: unfinished string in data
return struct.unpack('s', 'ab\0cd') ==> x6162,4
return struct.unpack('ss', 'ab\0cd\0') ==> x6162,x6364,7
return struct.unpack('c2', 'abcd') ==> x6162,3
return struct.unpack('c', 'abcd') ==> x61,2
return struct.unpack('b c0', '\3abcd') ==> x616263,5
return struct.unpack('b c0', '\5abcd') ==> err:user_script:1: bad argument #2 to 'unpack' (data string too short)
return struct.unpack('c0', 'abcd') ==> err:user_script:1: format 'c0' needs a previous size
return struct.unpack('s c0', '3\0abcd') ==> x616263,6
return struct.unpack('s c0', 'x\0abcd') ==> err:user_script:1: format 'c0' needs a previous size
return struct.unpack('b c0 b', '\2ab\7') ==> x6162,7,5
return struct.unpack('B', 'abc', 2) ==> 98,3
return struct.unpack('B', 'abc', 3) ==> 99,4
return struct.unpack('B', 'abc', 4) ==> err:user_script:1: bad argument #2 to 'unpack' (data string too short)
return struct.unpack('B', 'abc', 0) ==> err:user_script:1: bad argument #3 to 'unpack' (offset must be 1 or greater)
return struct.unpack('B', 'abc', -1) ==> err:user_script:1: bad argument #2 to 'unpack' (data string too short)
return struct.unpack('B', 'abc', 2.9) ==> 98,3
return struct.unpack('B', 'abc', "2") ==> 98,3
return struct.unpack('B', 'abc', "x") ==> err:user_script:1: bad argument #3 to 'unpack' (number expected, got string)
return struct.unpack('B', 'abc', nil) ==> 97,2
return struct.unpack('', 'abc') ==> 1
return struct.unpack('x', 'abc') ==> 2
return struct.unpack('xxB', 'abc') ==> 99,4
return struct.unpack('!4 b i', '\1\0\0\0\2\0\0\0') ==> 1,2,9
return struct.unpack('!4 b i', '\1\0\0\0\2\0\0') ==> err:user_script:1: bad argument #2 to 'unpack' (data string too short)
return struct.unpack('X', 'abc') ==> err:user_script:1: bad argument #1 to 'unpack' (invalid format option 'X')
return struct.unpack('b') ==> err:user_script:1: bad argument #2 to 'unpack' (string expected, got no value)
return struct.unpack('b', 12) ==> 49,2
return struct.unpack(nil, 'a') ==> err:user_script:1: bad argument #1 to 'unpack' (string expected, got nil)
return struct.unpack('!4 i', 'abcdabcd', 2) ==> 1684234849,9
return struct.unpack('>f', '\63\192\0\0') ==> 1.5,5
return struct.unpack('<d', '\0\0\0\0\0\0\240\63') ==> 1,9
return struct.unpack('d', 'abc') ==> err:user_script:1: bad argument #2 to 'unpack' (data string too short)
return struct.size('b') ==> 1
return struct.size('>i h d') ==> 14
return struct.size('!4 b i') ==> 8
return struct.size('!8 b d') ==> 16
return struct.size('!b d') ==> 16
return struct.size('c10') ==> 10
return struct.size('i32') ==> 32
return struct.size('s') ==> err:user_script:1: bad argument #1 to 'size' (option 's' has no fixed size)
return struct.size('c0') ==> err:user_script:1: bad argument #1 to 'size' (option 'c0' has no fixed size)
return struct.size('X') ==> 0
return struct.size('x') ==> 1
return struct.size('') ==> 0
return struct.size('lLTfd') ==> 36
return struct.size('!5') ==> err:user_script:1: alignment 5 is not a power of 2
return struct.size('!') ==> 0
return struct.size('!16') ==> 0
return struct.size('i33') ==> err:user_script:1: integral size 33 is larger than limit of 32
return struct.size() ==> err:user_script:1: bad argument #1 to 'size' (string expected, got no value)
return struct.pack('!3') ==> err:user_script:1: alignment 3 is not a power of 2
return struct.pack('i7', 1) ==> x01000000000000
return struct.pack('>i7', -1) ==> xffffffffffffff
return struct.unpack('>i7', '\255\255\255\255\255\255\254') ==> -2,8
return struct.unpack('>I6', '\1\2\3\4\5\6') ==> 1108152157446,7
return struct.pack('c1', 'a', 'b') ==> x61
return struct.pack('>I2 c0', 3, 'abc') ==> x0003616263
return struct.pack('>b', 1.5) ==> x01
return struct.pack('>b', -1.5) ==> xff
return struct.pack('>I4', -1) ==> xffffffff
return struct.pack('>I4', 0/0) ==> x00000000
return struct.pack('>i4', 1/0) ==> x00000000
return struct.pack('>i4', -1/0) ==> x00000000
return struct.pack('>I8', 2^70) ==> x0000000000000000
return struct.pack('>i8', -2^70) ==> x8000000000000000
return struct.pack('>I8', 1e19) ==> x8ac7230489e80000
return struct.pack('s', 12) ==> x313200
return struct.unpack('>I4', '\0\0\0\1', 1) ==> 1,5
return struct.unpack('c3', 'abcdef', 4) ==> x646566,7
return struct.unpack('c3', 'abcdef', 5) ==> err:user_script:1: bad argument #2 to 'unpack' (data string too short)
return struct.unpack('i', 'abcd', 1.5) ==> 1684234849,5
return struct.size('s2') ==> err:user_script:1: bad argument #1 to 'size' (option 's' has no fixed size)
return struct.size('c0i') ==> err:user_script:1: bad argument #1 to 'size' (option 'c0' has no fixed size)
return struct.pack('!4 !2 b i', 1, 2) ==> x010002000000
return struct.pack('i2', 70000) ==> x7011
return struct.pack('x5', 1) ==> err:user_script:1: bad argument #1 to 'pack' (invalid format option '5')
return struct.unpack('c0', '3') ==> err:user_script:1: format 'c0' needs a previous size
return struct.pack('c99999999999', 'a') ==> err:user_script:1: integral size overflow
return struct.pack('c2147483647', 'a') ==> err:user_script:1: bad argument #3 to 'pack' (string too short)
return struct.pack('c2147483648', 'a') ==> err:user_script:1: integral size overflow
return struct.pack('i2147483648', 1) ==> err:user_script:1: integral size overflow
return struct.pack('!2147483648', 1) ==> err:user_script:1: integral size overflow
return struct.size('c2147483647') ==> 2147483647
return struct.unpack('i0', 'a') ==> 0,1
return struct.unpack('I0', 'a') ==> 0,1
return struct.unpack('>i1', '\128') ==> -128,2
return struct.unpack('>I8', '\0\0\0\0\0\0\0\1', 2^64) ==> err:user_script:1: bad argument #2 to 'unpack' (data string too short)
return struct.unpack('B', 'abc', 2^53) ==> err:user_script:1: bad argument #2 to 'unpack' (data string too short)
return struct.unpack('B', 'abc', -2^63) ==> err:user_script:1: bad argument #2 to 'unpack' (data string too short)
return struct.pack('>I8', 0/0) ==> x8000000000000000
return struct.pack('>I8', 1/0) ==> x0000000000000000
return struct.pack('>i8', -1/0) ==> x8000000000000000
return struct.pack('>i8', 2^63 + 2^11) ==> x8000000000000800
return struct.pack('>I8', 2^64 - 2^11) ==> xfffffffffffff800
return struct.pack('>i8', -2^63 - 2^11) ==> x8000000000000000
return struct.unpack('b c0', '\255abc') ==> err:user_script:1: bad argument #2 to 'unpack' (data string too short)
return struct.unpack('b c0', '\0abc') ==> x,2
return struct.unpack('f c0', '\0\0\0\0abc') ==> x,5
return struct.unpack('c0', '') ==> err:user_script:1: format 'c0' needs a previous size
return struct.unpack('!4 c0', 'ab') ==> err:user_script:1: format 'c0' needs a previous size
return struct.unpack('x c0', '3ab') ==> err:user_script:1: format 'c0' needs a previous size
return struct.pack('d', 'x') ==> err:user_script:1: bad argument #2 to 'pack' (number expected, got string)
return struct.pack('f', nil) ==> err:user_script:1: bad argument #2 to 'pack' (number expected, got nil)
return struct.pack('>f', 1e300) ==> x7f800000
return struct.pack('>f', 2^-149) ==> x00000001
return struct.pack('>f', 16777217) ==> x4b800000
return struct.unpack('<f', '\0\0\192\127') ==> nan,5
return struct.size('!4 i c3 i') ==> 12
return struct.size('!4 b s') ==> err:user_script:1: bad argument #1 to 'size' (option 's' has no fixed size)
return struct.pack('b b', 1) ==> err:user_script:1: bad argument #3 to 'pack' (number expected, got nil)
return struct.unpack('>i4', 'abc', 1, 2) ==> err:user_script:1: bad argument #2 to 'unpack' (data string too short)
return struct.unpack('b', 'a', 1.999) ==> 97,2
return struct.unpack('b', 'a', 0.5) ==> err:user_script:1: bad argument #3 to 'unpack' (offset must be 1 or greater)
return struct.pack('>c0 c0', 'ab', 'cd') ==> x61626364
return struct.pack('\0b', 1) ==> x
return struct.pack('b\0b', 1, 2) ==> x01
return struct.pack('!4 T', 1) ==> x0100000000000000
return struct.pack('<i', 2^31) ==> x00000080
return struct.pack('<i', -2^31 - 1) ==> xffffff7f
return struct.unpack('<I', '\255\255\255\255') ==> 4294967295,5
return struct.unpack('<i', '\255\255\255\127') ==> 2147483647,5
return struct.unpack('<d', '\0\0\0\0\0\0\248\127') ==> nan,9
return struct.size('\0') ==> 0
return struct.unpack('c1', 'a', 1e300) ==> err:user_script:1: bad argument #2 to 'unpack' (data string too short)
return pcall(struct.pack) ==> false,x62616420617267756d656e7420233120746f20273f272028737472696e672065787065637465642c20676f74206e6f2076616c756529
return pcall(struct.unpack, 's', 'ab') ==> false,x756e66696e697368656420737472696e6720696e2064617461
return pcall(struct.size, 'c0') ==> false,x62616420617267756d656e7420233120746f20273f2720286f7074696f6e202763302720686173206e6f2066697865642073697a6529
return struct:pack('b') ==> err:user_script:1: calling 'pack' on bad self (string expected, got table)
return struct.unpack(string.rep('b', 9000), string.rep('a', 9000)) ==> err:user_script:1: stack overflow (too many results)
return #{struct.unpack(string.rep('b', 7000), string.rep('a', 7000))} ==> 7001
return struct.unpack('s c0', '2\0abc') ==> x6162,5
return struct.unpack('b c0', '\2abc', 1) ==> x6162,4
return struct.unpack('>I2 c0 b', '\0\3abc\9') ==> x616263,9,7
return struct.unpack('!1073741824 b i', '\1\0\0\0\2\0\0\0') ==> 1,2,9
return struct.pack('!1073741824 b i', 1, 2) ==> x0100000002000000
return struct.pack('!2147483647 b', 1) ==> err:user_script:1: alignment 2147483647 is not a power of 2
return struct.size('!4 i3 b i3') ==> 9
return struct.pack('!4 b i3', 1, 2) ==> x010000020000
return struct.pack('!4 b h i3', 1, 2, 3) ==> x010002000000030000
return struct.unpack('!4 b i3', '\1\0\0\0\2\0\0') ==> 1,512,7
return struct.pack('>i0 b', 5, 6) ==> x06
return struct.pack('%') ==> err:user_script:1: bad argument #1 to 'pack' (invalid format option '%')
return struct.unpack('B', 'abc', 4294967297) ==> err:user_script:1: bad argument #2 to 'unpack' (data string too short)
return struct.pack('c0s', 'ab', 'cd') ==> x6162636400
return struct.unpack('s', '\0') ==> x,2
return struct.unpack('b c0', '\0') ==> x,2
return struct.unpack('d c0', string.rep('\255', 8)) ==> err:user_script:1: bad argument #2 to 'unpack' (data string too short)
return struct.pack('I3', 16777217) ==> x010000
return struct.pack('<l', 2^53 + 1) ==> x0000000000002000
return struct.unpack('<L', struct.pack('<l', -1)) ==> 1.844674407371e+19,9
return struct.unpack('<l', struct.pack('<l', -2^53)) ==> -9.007199254741e+15,9
return struct.unpack('T', '\1\0\0\0\0\0\0\0') ==> 1,9
return struct.pack('  >  H  ', 1) ==> x0001
local ok, m = pcall(struct.pack, '\128', 1) return m:byte(-2), #m ==> 39,50
local ok, m = pcall(struct.size, 'b\255') return m:byte(-2), #m ==> 39,50
"#;
}
