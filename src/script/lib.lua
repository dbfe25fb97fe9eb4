-- Sandbox and redis.* wrappers, run once per interpreter (chunk name "=redis_lib").
-- Rust helpers return error texts; these wrappers raise them as Redis 7 does: as
-- {err = ...} tables, so the error handler can add where the script failed.
local call_c, pcall_c, sha1raw, lograw, setresp_raw, version, version_num, known_cmd, raising,
  rand_raw, seed_raw, set_readonly = ...
local G = _G
local dbg = debug
local setfenv_, pcall_, next_, tostring_ = setfenv, pcall, next, tostring
local lower, find = string.lower, string.find
local error, type, tostring, select, rawget, rawset, setmetatable =
  error, type, tostring, select, rawget, rawset, setmetatable

-- `os` stays: open_libraries made it Redis 7.4's sandboxed one (os.clock only).
for _, name in ipairs({'debug', 'print', 'dofile', 'loadfile', 'require', 'module',
    'getfenv', 'setfenv', 'newproxy', 'package', 'io'}) do
  rawset(G, name, nil)
end

-- Functions wrapped by `raising` (a C trampoline, so the failing script line stays on
-- the stack as with Redis's C functions) return `nil, {err = ...}` to raise.
local function fail(text) return nil, {err = text} end

-- C's `(int)lua_tonumber(v)`, how Redis reads log levels, RESP versions and replication
-- flags: numeric strings convert, anything else is 0, fractions truncate toward zero,
-- and what an int cannot hold (NaN included) becomes INT_MIN as on x86-64.
local tonumber_, floor, ceil = tonumber, math.floor, math.ceil
local function c_int(v)
  local n = tonumber_(v)
  if n == nil then return 0 end
  if n ~= n or n >= 2147483648 or n <= -2147483649 then return -2147483648 end
  if n >= 0 then return floor(n) end
  return ceil(n)
end

local redis = {}
-- C functions (engine.rs `redis_call_c`): they read and pop their arguments themselves.
redis.call, redis.pcall = call_c, pcall_c
redis.error_reply = raising(function(...)
  local e = ...
  -- Bad arguments are not raised: the error table is returned (Redis `luaPushError`).
  if select('#', ...) ~= 1 or type(e) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  if e:sub(1, 1) ~= '-' then e = '-' .. e end
  local code, msg = e:match('^%-([^ ]*) (.*)$')
  if not code then code, msg = 'ERR', e:sub(2) end
  msg = msg:gsub('[\r\n]+$', '')
  return {err = code .. ' ' .. msg}
end)
redis.status_reply = raising(function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  return {ok = s}
end)
redis.sha1hex = raising(function(...)
  if select('#', ...) ~= 1 then return fail('ERR wrong number of arguments') end
  return sha1raw(...)
end)
redis.log = raising(function(level, ...)
  if select('#', ...) < 1 then return fail('ERR redis.log() requires two arguments or more.') end
  if tonumber_(level) == nil then
    return fail('ERR First argument must be a number (log level).')
  end
  level = c_int(level)
  if level < 0 or level > 3 then return fail('ERR Invalid debug level.') end
  lograw(level, ...)
end)
redis.setresp = raising(function(...)
  if select('#', ...) ~= 1 then
    return fail('ERR redis.setresp() requires one argument.')
  end
  local v = c_int((...))
  if v ~= 2 and v ~= 3 then return fail('ERR RESP version must be 2 or 3.') end
  setresp_raw(v)
end)
redis.set_repl = raising(function(...)
  if select('#', ...) ~= 1 then return fail('ERR redis.set_repl() requires one argument.') end
  local v = c_int((...))
  if v < 0 or v > 3 then
    return fail('ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.')
  end
end)
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end
redis.acl_check_cmd = raising(function(...)
  -- The arguments convert as redis.call's do; the command line resolves subcommands.
  local known, allowed, err = known_cmd(...)
  if err then return fail(err) end
  if not known then return fail('ERR Invalid command passed to redis.acl_check_cmd()') end
  return allowed
end)
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL =
  0, 1, 2, 2, 3
redis.REDIS_VERSION, redis.REDIS_VERSION_NUM = version, version_num
rawset(G, 'redis', redis)

-- math.random / math.randomseed as Redis replaces them (one generator per server). Their
-- argument errors read as Lua's luaL_argerror / luaL_error raised from a C function: the
-- calling script's position first, the function named as the script called it.
local function arg_error(narg, msg)
  -- Levels: 1 this function, 2 the wrapper, 3 the C trampoline, 4 its caller.
  local where = ''
  local w = dbg.getinfo(4, 'Sl')
  if w and w.currentline > 0 then where = w.short_src .. ':' .. w.currentline .. ': ' end
  if narg == 0 then return where .. msg end
  local n = dbg.getinfo(3, 'n') or {}
  local name = n.name or '?'
  if n.namewhat == 'method' then
    narg = narg - 1
    if narg == 0 then return where .. "calling '" .. name .. "' on bad self (" .. msg .. ')' end
  end
  return where .. 'bad argument #' .. narg .. " to '" .. name .. "' (" .. msg .. ')'
end
local mathlib = rawget(G, 'math')
rawset(mathlib, 'random', raising(function(...)
  local v, narg, msg = rand_raw(...)
  if v == nil then return nil, arg_error(narg, msg) end
  return v
end))
rawset(mathlib, 'randomseed', raising(function(...)
  local narg, msg = seed_raw(...)
  if narg ~= nil then return nil, arg_error(narg, msg) end
end))

-- Read-only tables (the patched Lua's flag, as Redis 7): every write to them, by
-- assignment, rawset, table.insert or setmetatable, fails with "Attempt to modify a
-- readonly table", whichever chunk does it (loadstring chunks included).
local function protect(t, seen)
  if seen[t] then return end
  seen[t] = true
  for _, v in next_, t do
    if type(v) == 'table' then protect(v, seen) end
  end
  local mt = dbg.getmetatable(t)
  if type(mt) == 'table' then protect(mt, seen) end
  set_readonly(t)
end

-- A global that does not exist is an error; reads of existing ones stay plain table
-- reads (no function call per global access).
setmetatable(G, {
  __index = function(_, k)
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end,
})
local env = G
-- Redis Functions (FUNCTION LOAD). Library code runs once per interpreter in its own
-- environment: while loading, only `redis.register_function`, `redis.log`, the log levels
-- and the version are visible (Redis's LIBRARY_API); afterwards the library's functions
-- see the regular globals, without EVAL's KEYS/ARGV.
local function nonexistent(k)
  return "Script attempted to access nonexistent global variable '" .. tostring_(k) .. "'"
end
local loading = nil
local flag_bits = {['no-writes'] = 1, ['allow-oom'] = 2, ['allow-stale'] = 4,
  ['no-cluster'] = 8, ['allow-cross-slot-keys'] = 16}
local function lib_fail(msg) error({err = 'ERR ' .. msg}) end
-- lua_isstring: strings and numbers.
local function isstr(v) local t = type(v) return t == 'string' or t == 'number' end
local function register_function(...)
  if not loading then
    lib_fail('redis.register_function can only be called on FUNCTION LOAD command')
  end
  local n = select('#', ...)
  if n < 1 or n > 2 then lib_fail('wrong number of arguments to redis.register_function') end
  local name, cb, desc
  local flags = {}
  if n == 1 then
    local t = ...
    if type(t) ~= 'table' then
      lib_fail('calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).')
    end
    for k, v in next_, t do
      if not isstr(k) then
        lib_fail('named argument key given to redis.register_function is not a string')
      end
      local key = lower(tostring_(k))
      if key == 'function_name' then
        if not isstr(v) then
          lib_fail('function_name argument given to redis.register_function must be a string')
        end
        name = tostring_(v)
      elseif key == 'description' then
        if not isstr(v) then
          lib_fail('description argument given to redis.register_function must be a string')
        end
        desc = tostring_(v)
      elseif key == 'callback' then
        if type(v) ~= 'function' then
          lib_fail('callback argument given to redis.register_function must be a function')
        end
        cb = v
      elseif key == 'flags' then
        if type(v) ~= 'table' then
          lib_fail('flags argument to redis.register_function must be a table representing function flags')
        end
        flags = {}
        local j = 1
        while true do
          local f = v[j]
          if f == nil then break end
          local bit = isstr(f) and flag_bits[lower(tostring_(f))]
          if not bit then lib_fail('unknown flag given') end
          flags[bit] = true
          j = j + 1
        end
      else
        lib_fail('unknown argument given to redis.register_function')
      end
    end
    if not name then lib_fail('redis.register_function must get a function name argument') end
    if not cb then lib_fail('redis.register_function must get a callback argument') end
  else
    local a, b = ...
    if not isstr(a) then lib_fail('first argument to redis.register_function must be a string') end
    if type(b) ~= 'function' then
      lib_fail('second argument to redis.register_function must be a function')
    end
    name, cb = tostring_(a), b
  end
  if name == '' or find(name, '[^%w_]') then
    lib_fail('Library names can only contain letters, numbers, or underscores(_) and must be at least one character long')
  end
  if loading.names[name] then lib_fail('Function already exists in the library') end
  loading.names[name] = true
  local bits = 0
  for b in next_, flags do bits = bits + b end
  loading.list[#loading.list + 1] = {name, cb, desc, bits}
end
local load_redis_t = {register_function = register_function, log = redis.log,
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
  REDIS_VERSION = version, REDIS_VERSION_NUM = version_num}
local load_redis = setmetatable({}, {
  __index = function(_, k)
    local v = rawget(load_redis_t, k)
    if v == nil then error(nonexistent(k), 2) end
    return v
  end,
  __newindex = function() error('Attempt to modify a readonly table', 2) end,
  __metatable = false,
})
-- Runs a compiled library chunk: true and the registered {name, callback, description,
-- flag bits} list, or false and the error text.
local function load_library(chunk)
  -- One __index for both phases (the metatable is read-only from the start), raising
  -- at level 2 itself so the error names the library's line.
  local loaded = false
  local meta = {__index = function(_, k)
    if loaded then
      local v = rawget(G, k)
      if v == nil or k == 'KEYS' or k == 'ARGV' then error(nonexistent(k), 2) end
      return v
    end
    if k == 'redis' then return load_redis end
    error(nonexistent(k), 2)
  end, __metatable = false}
  local lib_env = setmetatable({}, meta)
  set_readonly(meta)
  set_readonly(lib_env)
  setfenv_(chunk, lib_env)
  loading = {names = {}, list = {}}
  local ok, err = pcall_(chunk)
  local got = loading.list
  loading = nil
  loaded = true
  if ok then return true, got end
  if type(err) == 'table' then
    local e = rawget(err, 'err')
    return false, isstr(e) and tostring_(e) or '(null)'
  elseif type(err) == 'userdata' then
    -- A Rust error (the load-time hook's timeout), as mlua renders it.
    local msg = tostring_(err)
    return false, (msg:gsub('^runtime error: ', ''))
  end
  return false, 'ERR ' .. tostring_(err)
end

local function handler(err)
  local lvl = 2
  local i = dbg.getinfo(lvl, 'nSl')
  while i and (i.what == 'C' or i.source == '=redis_lib') do
    lvl = lvl + 1
    i = dbg.getinfo(lvl, 'nSl')
  end
  if type(err) == 'userdata' then
    err = {err = tostring(err)}
  elseif type(err) ~= 'table' then
    err = {err = 'ERR ' .. tostring(err)}
  end
  if i then
    err['source'] = i.source
    err['line'] = i.currentline
  end
  return err
end


-- Seal: the globals, everything reachable from them (libraries and their metatables)
-- and the basic types' metatables (the string one's __index is the string library:
-- CVE-2025-46818) become read-only.
local seen = {}
protect(G, seen)
local function probe() end
for _, sample in next_, {'', 0, true, probe, coroutine.create(probe), false} do
  local mt = dbg.getmetatable(sample)
  if type(mt) == 'table' then protect(mt, seen) end
end
if type(dbg.getmetatable(nil)) == 'table' then protect(dbg.getmetatable(nil), seen) end
protect(load_redis_t, seen)
protect(load_redis, seen)
protect(dbg.getmetatable(load_redis), seen)
-- Scripts and functions run under `handler` from engine.rs (`run_script_c`), as
-- `xpcall(f, handler)` would run them, without a runner frame or closure per call.
return env, handler, load_library
