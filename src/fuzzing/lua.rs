//! The Lua libraries' decoders (cjson, cmsgpack, struct), called as scripts call them, with
//! the input as a Lua string. One Lua state per thread, with the libraries only (the
//! narrowest state that has them) and a memory limit, so a hostile input fails with a Lua
//! error rather than exhausting memory.

use mlua::{Function, Lua};

/// Memory a decoder may use before it fails with "not enough memory".
const MEMORY_LIMIT: usize = 256 << 20;

/// Checks shared by the targets, prepended to each: `deep_eq` compares decoded values (NaN
/// equal to itself).
const PRELUDE: &str = r#"
local function deep_eq(a, b, depth)
  if a == b then return true end
  if a ~= a and b ~= b then return true end
  if type(a) ~= "table" or type(b) ~= "table" then return false end
  if depth > 2000 then return false end
  local na, nb = 0, 0
  for k, v in pairs(a) do
    na = na + 1
    if type(k) == "table" then
      -- Table keys are compared by content: look for an equal key with an equal value.
      local found = false
      for kb, vb in pairs(b) do
        if type(kb) == "table" and deep_eq(k, kb, depth + 1) and deep_eq(v, vb, depth + 1) then
          found = true
          break
        end
      end
      if not found then return false end
    elseif not deep_eq(v, b[k], depth + 1) then
      return false
    end
  end
  for _ in pairs(b) do nb = nb + 1 end
  return na == nb
end
local function pack(...) return {n = select('#', ...), ...} end
"#;

/// cjson: decode; whatever decodes and encodes decodes again, and from the second round on
/// (numbers are printed with 14 digits, so the first may round) decode∘encode is the
/// identity.
const CJSON: &str = r#"
local s = ...
local ok, v = pcall(cjson.decode, s)
if not ok then return end
local ok2, e1 = pcall(cjson.encode, v)
if not ok2 then return end
local v2 = cjson.decode(e1)
local e2 = cjson.encode(v2)
local v3 = cjson.decode(e2)
assert(deep_eq(v2, v3, 0), "cjson round trip changed the value: " .. e1 .. " / " .. e2)
"#;

/// cmsgpack: the three unpackers (with an offset and limit taken from the input's first
/// bytes); whatever unpacks packs and unpacks back to equal values. Results are collected
/// inside closures: `pcall` returning many values trips an API check of debug-built Lua
/// 5.1 (`luaB_pcall` pushes its status past the frame's top; harmless in release builds).
const CMSGPACK: &str = r#"
local s, limit, offset = ...
pcall(function() cmsgpack.unpack_one(s, offset) end)
pcall(function() cmsgpack.unpack_limit(s, limit, offset) end)
local r
if not pcall(function() r = pack(cmsgpack.unpack(s)) end) then return end
local n = r.n
if n == 0 then return end
local p1
if not pcall(function() p1 = cmsgpack.pack(unpack(r, 1, n)) end) then return end
-- What we packed may not unpack: a map key can pack to something that cannot key a table
-- on the way back ("table index is nil", exactly as in Redis 7.0.15). Then it must be stable.
local a
if not pcall(function() a = pack(cmsgpack.unpack(p1)) end) then return end
local p2 = cmsgpack.pack(unpack(a, 1, n))
local b = pack(cmsgpack.unpack(p2))
assert(a.n == n and b.n == n, "cmsgpack round trip changed the value count")
for i = 1, n do
  assert(deep_eq(a[i], b[i], 0), "cmsgpack round trip changed value " .. i)
end
"#;

/// struct: unpack with a format from the input (and a start position), size, and pack of
/// what unpacked; repacking what that packs unpacks to equal values.
const STRUCT: &str = r#"
local fmt, data, init = ...
pcall(struct.size, fmt)
pcall(function() struct.unpack(fmt, data, init) end)
local r
if not pcall(function() r = pack(struct.unpack(fmt, data)) end) then return end
local n = r.n - 1 -- the last value is the next position
if n < 0 then return end
local p
if not pcall(function() p = struct.pack(fmt, unpack(r, 1, n)) end) then return end
local a
if not pcall(function() a = pack(struct.unpack(fmt, p)) end) then return end
local p2
if not pcall(function() p2 = struct.pack(fmt, unpack(a, 1, n)) end) then return end
local b = pack(struct.unpack(fmt, p2))
for i = 1, n do
  assert(deep_eq(a[i], b[i], 0), "struct round trip changed value " .. i)
end
"#;

struct State {
    lua: Lua,
    cjson: Function,
    cmsgpack: Function,
    structlib: Function,
    runs: u32,
}

fn state() -> State {
    let lua = Lua::new();
    crate::script::open_libraries(&lua).expect("open the libraries");
    lua.set_memory_limit(MEMORY_LIMIT).expect("memory limit");
    let load = |src: &str, name: &str| -> Function {
        lua.load(format!("{PRELUDE}{src}"))
            .set_name(name)
            .into_function()
            .expect("compile")
    };
    State {
        cjson: load(CJSON, "cjson"),
        cmsgpack: load(CMSGPACK, "cmsgpack"),
        structlib: load(STRUCT, "struct"),
        lua,
        runs: 0,
    }
}

thread_local! {
    static STATE: std::cell::RefCell<Option<State>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` on this thread's state; a Lua error raised by the checks (not by the library
/// under test, whose errors the scripts catch) is an invariant violation.
fn with_state(f: impl FnOnce(&State) -> mlua::Result<()>) {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let st = s.get_or_insert_with(state);
        if let Err(e) = f(st) {
            if !e.to_string().contains("not enough memory") {
                panic!("{e}");
            }
        }
        st.runs += 1;
        if st.runs % 256 == 0 {
            let _ = st.lua.gc_collect();
        }
    });
}

/// `cjson.decode` on the input, then the round trip.
pub fn lua_cjson(data: &[u8]) {
    with_state(|st| {
        let s = st.lua.create_string(data)?;
        st.cjson.call::<()>(s)
    });
}

/// The cmsgpack unpackers on the input after two bytes that give a limit and an offset.
pub fn lua_cmsgpack(data: &[u8]) {
    let (limit, offset, body) = match data {
        [l, o, rest @ ..] => (i64::from(*l as i8), i64::from(*o as i8), rest),
        _ => (0, 0, data),
    };
    with_state(|st| {
        let s = st.lua.create_string(body)?;
        st.cmsgpack.call::<()>((s, limit, offset))
    });
}

/// struct on a format and data from the input: first byte is the format's length, second
/// the start position for one `unpack`.
pub fn lua_struct(data: &[u8]) {
    let [n, init, rest @ ..] = data else {
        return;
    };
    let n = (*n as usize).min(rest.len());
    let (fmt, body) = rest.split_at(n);
    let init = i64::from(*init as i8);
    with_state(|st| {
        let fmt = st.lua.create_string(fmt)?;
        let body = st.lua.create_string(body)?;
        st.structlib.call::<()>((fmt, body, init))
    });
}
