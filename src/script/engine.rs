//! The script runner: script bodies shared per server (by SHA1), one Lua interpreter per
//! worker thread (mlua's `Lua` is not `Send`) with compiled functions cached by SHA1, and
//! the `redis.call` bridge into command execution (through the caller's [`Host`]).

use super::convert::{error_table, lua_to_reply, reply_to_lua};
use super::host::{Call, Host, Mode};
use super::rand48;
use super::sha1::sha1_hex;
use super::shebang::{self, Flags};
use crate::instance::errors;
use crate::instance::state::{Shared, Stats};
use crate::num::dtoa::fpconv;
use crate::protocol::Reply;
use bytes::Bytes;
use mlua::ffi::lua_State as LuaState;
use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value, Variadic};
use parking_lot::Mutex;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::c_int;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

/// Lua heap ceiling: a runaway allocation fails the script, not the server.
const MEMORY_LIMIT: usize = 1 << 30;
/// Instructions between checks for SCRIPT KILL (Redis's count hook uses the same).
const HOOK_EVERY: c_int = 100_000;
/// Scripts between two incremental GC steps (Redis's `LUA_GC_CYCLE_PERIOD`).
const GC_EVERY: u32 = 50;

// The sandbox API of the patched Lua (vendor/lua-src): read-only tables and whether
// `collectgarbage('stop')` is in effect.
extern "C-unwind" {
    fn lua_enablereadonlytable(state: *mut mlua::ffi::lua_State, idx: c_int, enabled: c_int);
    fn lua_gcisstopped(state: *mut mlua::ffi::lua_State) -> c_int;
}

/// Scripts running on any server of this process: dispatch's BUSY check costs one atomic
/// load while none runs.
pub static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// Per-server scripting state, shared by every worker thread.
///
/// `repr(C, align(64))`: every field a script run writes comes first, in the struct's
/// first cache line, so a run on the other worker moves one line between the cores, not
/// three (callgrind cannot see that cost; perf saw it in `call`).
#[repr(C, align(64))]
pub struct Scripts {
    /// Milliseconds since `epoch` + 1 when the running script started; 0 when none runs.
    running_since: AtomicU64,
    /// `running_for_ms` at the running script's last worker hand-off (see `hand_off_worker`).
    handed_off_at: AtomicU64,
    /// The Lua heap after the last EVAL script, after the last function, and after
    /// either (INFO's `used_memory_vm_eval`, `…_vm_functions`, `…_vm_total`).
    vm_eval: AtomicU64,
    vm_functions: AtomicU64,
    vm_last: AtomicU64,
    epoch: Instant,
    wrote: AtomicBool,
    kill: AtomicBool,
    /// Bumped by SCRIPT FLUSH and FUNCTION FLUSH: interpreters are rebuilt when it moves.
    generation: AtomicU64,
    bodies: super::cache::ScriptCache,
    /// `math.random`'s generator state: one per server, as Redis's is process-wide and
    /// never reset between scripts.
    rand: AtomicU64,
    /// FUNCTION libraries (Redis Functions), swapped as a whole under this lock.
    pub(crate) functions: Mutex<super::functions::Libraries>,
    next_lib_id: AtomicU64,
    /// The running function's name and command line (FUNCTION STATS); `None` while an
    /// EVAL script (or nothing) runs.
    running_fn: Mutex<Option<(String, Vec<Bytes>)>>,
}

/// INFO memory's scripting figures (Redis 7.2 `used_memory_vm_eval` and neighbours).
/// EVAL scripts and functions share one interpreter per thread here, where Redis has a
/// VM for each: the eval figure is its heap as the last EVAL script left it, the functions
/// figure as the last function left it, and the total is the latest of the two.
pub struct MemoryInfo {
    pub vm_eval: u64,
    pub vm_total: u64,
    pub scripts_eval: u64,
    pub cached_scripts: usize,
    pub functions: usize,
    pub libraries: usize,
    pub vm_functions: u64,
    pub functions_bytes: u64,
}

/// The server's scripting memory figures.
pub fn memory_info(srv: &Shared) -> MemoryInfo {
    let Some(s) = registered(srv) else {
        return MemoryInfo {
            vm_eval: 0,
            vm_total: 0,
            scripts_eval: 0,
            cached_scripts: 0,
            functions: 0,
            libraries: 0,
            vm_functions: 0,
            functions_bytes: 0,
        };
    };
    let (cached_scripts, scripts_eval) = s.bodies.usage();
    let libs = s.functions.lock();
    MemoryInfo {
        vm_eval: s.vm_eval.load(Ordering::Relaxed),
        vm_total: s.vm_last.load(Ordering::Relaxed),
        scripts_eval,
        cached_scripts,
        functions: libs.function_count(),
        libraries: libs.len(),
        vm_functions: s.vm_functions.load(Ordering::Relaxed),
        functions_bytes: libs.iter().map(|l| l.code.len() as u64).sum(),
    }
}

impl Scripts {
    fn new() -> Scripts {
        Scripts {
            bodies: Default::default(),
            generation: AtomicU64::new(0),
            running_since: AtomicU64::new(0),
            epoch: Instant::now(),
            wrote: AtomicBool::new(false),
            kill: AtomicBool::new(false),
            handed_off_at: AtomicU64::new(0),
            rand: AtomicU64::new(rand48::INITIAL),
            functions: Mutex::new(Default::default()),
            next_lib_id: AtomicU64::new(1),
            running_fn: Mutex::new(None),
            vm_eval: AtomicU64::new(0),
            vm_functions: AtomicU64::new(0),
            vm_last: AtomicU64::new(0),
        }
    }

    /// Reseeds `math.random` as `math.randomseed(seed)` does.
    pub fn reseed(&self, seed: i32) {
        self.rand.store(rand48::seeded(seed), Ordering::Release);
    }

    /// The next `redisLrand48` output.
    fn lrand48(&self) -> i32 {
        let mut out = 0;
        let _ = self
            .rand
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                let (next, o) = rand48::step(s);
                out = o;
                Some(next)
            });
        out
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    pub fn exists(&self, sha: &[u8]) -> bool {
        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
        self.bodies.contains(&sha)
    }

    /// SCRIPT FLUSH: forgets the scripts and recreates the interpreters, as Redis does.
    pub fn flush(&self) {
        self.bodies.clear();
        self.recreate_interpreters();
    }

    /// Every worker thread replaces its interpreter for this server with a fresh one
    /// before its next script (see `interp`): globals, caches and library state go.
    pub(crate) fn recreate_interpreters(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// How long the running script has run, if one runs.
    pub fn running_for_ms(&self) -> Option<u64> {
        match self.running_since.load(Ordering::Acquire) {
            0 => None,
            t => Some(self.now_ms().saturating_sub(t)),
        }
    }

    /// SCRIPT KILL.
    pub fn kill(&self) -> Reply {
        self.kill_kind(true)
    }

    /// SCRIPT KILL (`eval`) or FUNCTION KILL: each kills only its own kind of script.
    pub fn kill_kind(&self, eval: bool) -> Reply {
        if self.running_for_ms().is_none() {
            return errors::err(errors::NOTBUSY);
        }
        if self.wrote.load(Ordering::Acquire) {
            return errors::err(errors::UNKILLABLE);
        }
        let is_fn = self.running_fn.lock().is_some();
        if eval && is_fn {
            return errors::err(errors::BUSY_FUNCTION);
        }
        if !eval && !is_fn {
            return errors::err(errors::BUSY);
        }
        self.kill.store(true, Ordering::Release);
        Reply::OK
    }

    /// Whether the running script (if any) is a function.
    pub fn running_function(&self) -> Option<(String, Vec<Bytes>)> {
        self.running_fn.lock().clone()
    }

    pub(crate) fn next_library_id(&self) -> u64 {
        self.next_lib_id.fetch_add(1, Ordering::AcqRel)
    }
}

/// The scripting state of a server. Kept in a registry keyed by the server so several
/// in-process servers (tests) stay apart.
pub fn scripts(srv: &Arc<Shared>) -> Arc<Scripts> {
    let mut all = registry_of_servers().lock();
    all.retain(|(w, _)| w.strong_count() > 0);
    if let Some((_, s)) = all.iter().find(|(w, _)| w.as_ptr() == Arc::as_ptr(srv)) {
        return s.clone();
    }
    let s = Arc::new(Scripts::new());
    all.push((Arc::downgrade(srv), s.clone()));
    s
}

/// Whether EVAL / EVALSHA (and their `_RO` forms) of a script with a valid shebang count
/// as a write command before running, as Redis's `evalGetCommandFlags` decides for CLIENT
/// PAUSE WRITE: `Some(true)` without `no-writes`, `Some(false)` with it; `None` (the
/// command table's flags decide) for a legacy script, an unknown SHA or a bad shebang.
pub fn eval_shebang_writes(srv: &Shared, args: &[Bytes]) -> Option<bool> {
    declared_flags(srv, args).map(|f| !f.has(Flags::NO_WRITES))
}

/// The flags the script of an EVAL*/FCALL* line declared (its shebang, or the function's
/// flags): Redis's `getCommandFlags` takes a command's write and deny-oom flags from
/// them. `None` for scripts without a shebang, unknown ones and other commands.
pub fn declared_flags(srv: &Shared, args: &[Bytes]) -> Option<Flags> {
    let (Some(name), Some(script)) = (args.first(), args.get(1)) else {
        return None;
    };
    let body = if name.eq_ignore_ascii_case(b"eval") || name.eq_ignore_ascii_case(b"eval_ro") {
        script.clone()
    } else if name.eq_ignore_ascii_case(b"evalsha") || name.eq_ignore_ascii_case(b"evalsha_ro") {
        let sha = String::from_utf8_lossy(script).to_ascii_lowercase();
        let found = registered(srv).and_then(|s| s.bodies.body(&sha));
        found?
    } else if name.eq_ignore_ascii_case(b"fcall") || name.eq_ignore_ascii_case(b"fcall_ro") {
        let (_, f) = registered(srv)?.functions.lock().find(script)?;
        return Some(f.flags);
    } else {
        return None;
    };
    shebang::parse(&body).ok()?.flags
}

type Registry = Mutex<Vec<(Weak<Shared>, Arc<Scripts>)>>;

fn registry_of_servers() -> &'static Registry {
    static ALL: OnceLock<Registry> = OnceLock::new();
    ALL.get_or_init(Default::default)
}

/// The scripting state of a server, if it has one yet.
fn registered(srv: &Shared) -> Option<Arc<Scripts>> {
    let all = registry_of_servers().lock();
    all.iter()
        .find(|(w, _)| std::ptr::eq(w.as_ptr(), srv))
        .map(|(_, s)| s.clone())
}

/// The running script's way to its commands: the caller's host and the script's rules.
struct Bridge<'a> {
    host: &'a mut dyn Host,
    scripts: &'a Scripts,
    mode: Mode,
    resp3: &'a Cell<bool>,
}

impl Bridge<'_> {
    /// Runs a command for `redis.call`: its reply, or the error text for the script.
    fn run(&mut self, argv: Vec<Bytes>) -> Result<Reply, String> {
        let call = Call {
            mode: self.mode,
            wrote: &self.scripts.wrote,
            resp3: self.resp3.get(),
        };
        self.host.call(argv, call)
    }
}

thread_local! {
    static INTERPS: RefCell<Vec<(Weak<Shared>, Rc<Interp>)>> = const { RefCell::new(Vec::new()) };
    /// The running script's command bridge, set only while a script runs on this thread.
    static CURRENT: Cell<Option<*mut Bridge<'static>>> = const { Cell::new(None) };
    /// What `redis_call_c` leaves for `redis_call` to finish (see [`Pending`]).
    static PENDING: RefCell<Option<Pending>> = const { RefCell::new(None) };
    /// The interpreter running Lua code on this thread, for `script_hook`; null when none.
    static HOOKED: Cell<*const Interp> = const { Cell::new(std::ptr::null()) };
}

/// Points `script_hook` at an interpreter while its Lua code runs; restores the previous
/// one however the code ends.
struct HookScope(*const Interp);

impl HookScope {
    fn enter(it: &Interp) -> HookScope {
        HookScope(HOOKED.with(|h| h.replace(it)))
    }
}

impl Drop for HookScope {
    fn drop(&mut self) {
        HOOKED.with(|h| h.set(self.0));
    }
}

/// Clears `CURRENT` however the script ends.
struct CurrentGuard;

impl Drop for CurrentGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(None));
    }
}

/// A script compiled in one interpreter, with the flags of its shebang (`None`: legacy).
#[derive(Clone)]
struct Compiled {
    func: Function,
    flags: Option<Flags>,
    /// The LRU stamp of a script EVAL added (see `super::cache`).
    lru: Option<super::cache::Stamp>,
}

/// A library's functions compiled in one interpreter, with the library id they came from.
type CompiledLib = (u64, HashMap<String, Function>);

pub(super) struct Interp {
    lua: Lua,
    env: Table,
    /// lib.lua's error handler, which scripts and functions run under.
    handler: Function,
    load_library: Function,
    /// `run_script_c`, made once: how every script starts.
    runner: Function,
    libs: RefCell<HashMap<String, CompiledLib>>,
    /// Set while library code runs: FUNCTION LOAD's 500 ms budget.
    load_deadline: Rc<Cell<Option<Instant>>>,
    /// By SHA1: looked up on every EVALSHA (ahash; `Rc` so a hit copies no Lua reference).
    funcs: RefCell<HashMap<String, Rc<Compiled>, ahash::RandomState>>,
    /// The cache's eviction count when `funcs` was last pruned of evicted scripts.
    evictions_seen: Cell<u64>,
    /// The SCRIPT / FUNCTION FLUSH generation this interpreter was built for: a flush
    /// replaces it with a fresh one (`interp`), as Redis recreates its Lua state.
    generation: u64,
    /// Scripts run since the last GC step.
    gc_count: Cell<u32>,
    /// The Lua heap in bytes at the last GC step (or skipped step): what the next one
    /// measures the scripts' allocation from.
    gc_mark: Cell<usize>,
    /// What the globals KEYS and ARGV hold, so a run sets them only when that changes.
    array_globals: [Cell<ArrayGlobal>; 2],
    /// Set by the hook once a kill or load timeout re-armed it to fire on every
    /// instruction; the next run restores the count hook.
    rearmed: Cell<bool>,
    /// The Lua thread the current script started on (re-armed along with a coroutine).
    run_state: Cell<*mut mlua::ffi::lua_State>,
    resp3: Rc<Cell<bool>>,
    scripts: Arc<Scripts>,
}

pub(super) fn interp(srv: &Arc<Shared>) -> Result<Rc<Interp>, String> {
    INTERPS.with(|cell| {
        let mut v = cell.borrow_mut();
        // A dead entry never matches: a new server's state can reuse a dropped one's
        // address, and must not inherit its interpreter (and so its script cache, kill
        // flag and write flag).
        let mine = |w: &Weak<Shared>| w.as_ptr() == Arc::as_ptr(srv) && w.strong_count() > 0;
        if let Some(pos) = v.iter().position(|(w, _)| mine(w)) {
            let i = &v[pos].1;
            if i.generation == i.scripts.generation.load(Ordering::Acquire) {
                return Ok(i.clone());
            }
            // Flushed: this server gets a fresh interpreter on this thread.
            v.swap_remove(pos);
        }
        v.retain(|(w, _)| w.strong_count() > 0);
        let i = Rc::new(Interp::new(scripts(srv)).map_err(|e| e.to_string())?);
        v.push((Arc::downgrade(srv), i.clone()));
        Ok(i)
    })
}

impl Interp {
    fn new(scripts: Arc<Scripts>) -> mlua::Result<Interp> {
        let libs = StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG;
        // SAFETY: `debug` is needed only by the error handler (to find the failing line);
        // lib.lua captures it in a local and removes the global before any script runs.
        let lua = unsafe { Lua::unsafe_new_with(libs, LuaOptions::new()) };
        super::open_libraries(&lua)?;
        let resp3 = Rc::new(Cell::new(false));
        let r3c = resp3.clone();
        let rawcall = lua.create_function(move |lua, raise| redis_call(lua, raise, r3c.get()))?;
        // SAFETY: each pushes one C closure over two values (one stack slot).
        let (call_c, pcall_c) = unsafe {
            let make = |raise: bool| {
                lua.exec_raw::<Function>((rawcall.clone(), raise), |state| {
                    mlua::ffi::lua_pushcclosure(state, redis_call_c, 2);
                })
            };
            (make(true)?, make(false)?)
        };
        let sha1 = lua.create_function(|lua, v: Value| {
            let s = lua.coerce_string(v)?;
            let hex = sha1_hex(
                s.map(|s| s.as_bytes().to_vec())
                    .unwrap_or_default()
                    .as_slice(),
            );
            Ok(hex)
        })?;
        let log = lua.create_function(|lua, (level, msg): (i64, Variadic<Value>)| {
            let mut text = Vec::new();
            // Values with no string form are skipped, with their separator.
            for (i, v) in msg.into_iter().enumerate() {
                if let Some(s) = lua.coerce_string(v)? {
                    if i > 0 {
                        text.push(b' ');
                    }
                    text.extend_from_slice(&s.as_bytes());
                }
            }
            let text = String::from_utf8_lossy(&text);
            match level {
                0 => tracing::debug!("{text}"),
                1 => tracing::trace!("{text}"),
                2 => tracing::info!("{text}"),
                _ => tracing::warn!("{text}"),
            }
            Ok(())
        })?;
        let r3 = resp3.clone();
        let setresp = lua.create_function(move |_, v: i64| {
            r3.set(v == 3);
            Ok(())
        })?;
        // redis.acl_check_cmd: whether the command line names a command, whether the
        // script's user may run it, or the argument error.
        let known = lua.create_function(|_, args: Variadic<Value>| {
            Ok(match command_line(args) {
                Ok(argv) => match host_acl_check(&argv) {
                    Some(Some(allowed)) => (true, allowed, None),
                    Some(None) => (false, false, None),
                    // Only scripts see `redis`: unreachable, answered as Redis does.
                    None => (false, false, Some(ACL_CHECK_OUTSIDE)),
                },
                Err(e) => (false, false, Some(e)),
            })
        })?;
        let raising = lua.create_function(|lua, imp: Function| {
            // SAFETY: pushes one C closure over the given function (one stack slot).
            unsafe {
                lua.exec_raw::<Function>(imp, |state| {
                    mlua::ffi::lua_pushcclosure(state, raising_trampoline, 1);
                })
            }
        })?;
        let rand = math_random(&lua, scripts.clone())?;
        let seeder = scripts.clone();
        let randomseed = lua.create_function(move |lua, args: MultiValue| match args.front() {
            None => Ok((
                Value::Integer(1),
                "number expected, got no value".to_string(),
            )),
            Some(v) => match checkint(lua, v)? {
                Ok(seed) => {
                    seeder.reseed(seed);
                    Ok((Value::Nil, String::new()))
                }
                Err(msg) => Ok((Value::Integer(1), msg)),
            },
        })?;
        // SAFETY: pushes one C function (one stack slot).
        let set_readonly = unsafe {
            lua.exec_raw::<Function>((), |state| {
                mlua::ffi::lua_pushcfunction(state, set_readonly_c);
            })
        }?;
        let runner = unsafe /* SAFETY: pushes one C closure over 4 values (one slot) */ {
            lua.exec_raw::<Function>((), |state| {
                mlua::ffi::lua_pushstring(state, c"KEYS".as_ptr());
                mlua::ffi::lua_pushstring(state, c"ARGV".as_ptr());
                // The KEYS and ARGV tables every EVAL refills (see `refill_array`).
                mlua::ffi::lua_createtable(state, 1, 0);
                mlua::ffi::lua_createtable(state, 1, 0);
                mlua::ffi::lua_pushcclosure(state, run_script_c, 4);
            })
        }?;
        let version_num = crate::REDIS_VERSION
            .split('.')
            .filter_map(|p| p.parse::<i64>().ok())
            .fold(0i64, |acc, p| acc * 256 + p);
        let (env, handler, load_library): (Table, Function, Function) = lua
            .load(include_str!("lib.lua"))
            .set_name("=redis_lib")
            .call((
                call_c,
                pcall_c,
                sha1,
                log,
                setresp,
                crate::REDIS_VERSION,
                version_num,
                known,
                raising,
                rand,
                randomseed,
                set_readonly,
            ))?;
        let load_deadline: Rc<Cell<Option<Instant>>> = Rc::new(Cell::new(None));
        // Our own C hook rather than mlua's: mlua keeps hooks per thread and drops them
        // in coroutines, where a runaway loop would then be unkillable. Coroutines
        // inherit this one (`lua_newthread` copies the hook).
        // SAFETY: sets the hook of the main state; no stack use.
        unsafe {
            lua.exec_raw::<()>((), |state| {
                mlua::ffi::lua_sethook(
                    state,
                    Some(script_hook),
                    mlua::ffi::LUA_MASKCOUNT,
                    HOOK_EVERY,
                );
            })
        }?;
        lua.set_memory_limit(MEMORY_LIMIT)?;
        // The compiler's garbage from lib.lua goes now: a fresh VM starts at its live size.
        lua.gc_collect()?;
        let generation = scripts.generation.load(Ordering::Acquire);
        Ok(Interp {
            lua,
            env,
            handler,
            load_library,
            runner,
            libs: RefCell::new(HashMap::new()),
            load_deadline,
            funcs: RefCell::new(HashMap::default()),
            evictions_seen: Cell::new(scripts.bodies.evictions()),
            generation,
            gc_count: Cell::new(0),
            gc_mark: Cell::new(0),
            array_globals: [
                Cell::new(ArrayGlobal::Unknown),
                Cell::new(ArrayGlobal::Unknown),
            ],
            rearmed: Cell::new(false),
            run_state: Cell::new(std::ptr::null_mut()),
            resp3,
            scripts,
        })
    }

    /// The compiled function of a script, compiling and caching it on first use; `eval`
    /// when EVAL supplied the body (such scripts are evictable). Also returns how many
    /// scripts were evicted to make room for it.
    fn function(
        &self,
        sha: &str,
        body: Option<&[u8]>,
        eval: bool,
    ) -> Result<(Option<Rc<Compiled>>, u64), Reply> {
        let evictions = self.scripts.bodies.evictions();
        if evictions != self.evictions_seen.get() {
            // Another script was evicted: its compiled copy goes too (NOSCRIPT after).
            self.scripts
                .bodies
                .retain_cached(&mut self.funcs.borrow_mut());
            self.evictions_seen.set(evictions);
        }
        if let Some(f) = self.funcs.borrow().get(sha) {
            return Ok((Some(f.clone()), 0));
        }
        let body = match body {
            Some(b) => Bytes::copy_from_slice(b),
            None => match self.scripts.bodies.body(sha) {
                Some(b) => b,
                None => return Ok((None, 0)),
            },
        };
        let shebang = shebang::parse(&body).map_err(|e| Reply::error(format!("ERR {e}")))?;
        let func = self.compile(&body[shebang.len..])?;
        let (lru, evicted) = self.scripts.bodies.insert(sha, body, eval);
        let f = Rc::new(Compiled {
            func,
            flags: shebang.flags,
            lru,
        });
        if evicted > 0 {
            self.scripts
                .bodies
                .retain_cached(&mut self.funcs.borrow_mut());
        }
        self.funcs.borrow_mut().insert(sha.to_string(), f.clone());
        Ok((Some(f), evicted))
    }

    fn compile(&self, body: &[u8]) -> Result<Function, Reply> {
        self.lua
            .load(body)
            .set_name("@user_script")
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| {
                let msg = match e {
                    mlua::Error::SyntaxError { message, .. } => message,
                    other => other.to_string(),
                };
                Reply::error(format!("ERR Error compiling script (new function): {msg}"))
            })
    }
}

/// Whether the running script's host knows the command line (`None`: no script runs).
fn host_acl_check(argv: &[Bytes]) -> Option<Option<bool>> {
    let bridge = CURRENT.with(|c| c.get())?;
    // Only `redis_call` borrows the bridge mutably, and never while this runs.
    Some(unsafe { &*bridge }.host.acl_check(argv)) // SAFETY: live while set (see `call`).
}

/// `redis.acl_check_cmd` with no script running (Redis `luaRedisAclCheckCmdPermissionsCommand`).
const ACL_CHECK_OUTSIDE: &str =
    "ERR redis.acl_check_cmd can only be called inside a script invocation";

/// One function registered by library code.
pub(super) struct Registered {
    pub name: String,
    pub func: Function,
    pub desc: Option<Bytes>,
    pub flags: Flags,
}

/// FUNCTION LOAD's budget for running library code (Redis `LOAD_TIMEOUT_MS`).
const LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

impl Interp {
    /// Runs library code (the part after its shebang line) in the load environment and
    /// returns what it registered. Errors are full reply texts.
    pub(super) fn run_library(&self, code: &[u8]) -> Result<Vec<Registered>, String> {
        let chunk = self
            .lua
            .load(code)
            .set_name("@user_function")
            .into_function()
            .map_err(|e| {
                let msg = match e {
                    mlua::Error::SyntaxError { message, .. } => message,
                    other => other.to_string(),
                };
                format!("ERR Error compiling function: {msg}")
            })?;
        self.restore_hook().map_err(|e| format!("ERR {e}"))?;
        self.load_deadline.set(Some(Instant::now() + LOAD_TIMEOUT));
        let r = {
            let _hook = HookScope::enter(self);
            self.load_library.call::<(bool, Value)>(chunk)
        };
        self.load_deadline.set(None);
        let registering = |m: &str| format!("ERR Error registering functions: {m}");
        let (ok, v) = r.map_err(|e| registering(&e.to_string()))?;
        let list = match v {
            Value::Table(t) if ok => t,
            Value::String(m) => return Err(registering(&m.to_string_lossy())),
            _ => return Err(registering("(null)")),
        };
        let mut out = Vec::new();
        for entry in list.sequence_values::<Table>() {
            let entry = entry.map_err(|e| registering(&e.to_string()))?;
            let get = || -> mlua::Result<Registered> {
                let desc: Option<mlua::LuaString> = entry.raw_get(3)?;
                Ok(Registered {
                    name: entry.raw_get::<mlua::LuaString>(1)?.to_string_lossy(),
                    func: entry.raw_get(2)?,
                    desc: desc.map(|d| Bytes::copy_from_slice(&d.as_bytes())),
                    flags: Flags::from_bits(entry.raw_get::<u8>(4)?),
                })
            };
            out.push(get().map_err(|e| registering(&e.to_string()))?);
        }
        Ok(out)
    }

    /// Keeps a library's compiled functions for later FCALLs on this thread.
    pub(super) fn cache_library(&self, lib: &str, id: u64, funcs: Vec<Registered>) {
        let map = funcs.into_iter().map(|r| (r.name, r.func)).collect();
        self.libs.borrow_mut().insert(lib.to_string(), (id, map));
    }

    /// A library function compiled in this interpreter, compiling the library first when
    /// this thread has not seen this version of it.
    fn library_function(
        &self,
        lib: &super::functions::Library,
        name: &str,
    ) -> Result<Function, Reply> {
        if let Some((id, fs)) = self.libs.borrow().get(&lib.name) {
            if *id == lib.id {
                if let Some(f) = fs.get(name) {
                    return Ok(f.clone());
                }
            }
        }
        let body = lib.code.get(lib.code_at..).unwrap_or_default();
        let regs = self.run_library(body).map_err(Reply::error)?;
        let f = regs.iter().find(|r| r.name == name).map(|r| r.func.clone());
        self.cache_library(&lib.name, lib.id, regs);
        f.ok_or_else(|| errors::err(errors::FUNCTION_NOT_FOUND))
    }

    /// Drops compiled libraries no longer registered (deleted, flushed).
    fn prune_libraries(&self, live: &super::functions::Libraries) {
        let mut libs = self.libs.borrow_mut();
        if libs.len() > live.len() {
            libs.retain(|name, (id, _)| live.get(name).is_some_and(|l| l.id == *id));
        }
    }
}

/// A registered function, found by name for FCALL.
pub struct Found {
    lib: Arc<super::functions::Library>,
    info: super::functions::FuncInfo,
}

/// The function FCALL names (`None`: not registered). Also drops this thread's compiled
/// copies of libraries no longer registered.
pub fn find_function(srv: &Arc<Shared>, name: &[u8]) -> Option<Found> {
    let s = scripts(srv);
    let libs = s.functions.lock();
    let found = libs.find(name);
    if let Ok(it) = interp(srv) {
        it.prune_libraries(&libs);
    }
    found.map(|(lib, info)| Found { lib, info })
}

/// FCALL / FCALL_RO of a found function. `args`: name, function, numkeys, keys…, args…,
/// with `keys` keys (checked by the caller).
pub fn fcall(
    srv: &Arc<Shared>,
    args: &[Bytes],
    keys: usize,
    found: Found,
    read_only: bool,
    host: &mut dyn Host,
) -> Reply {
    let Found { lib, info } = found;
    let mode = match host.admit(Some(info.flags), read_only) {
        Ok(m) => m,
        Err(e) => return e,
    };
    let it = match interp(srv) {
        Ok(i) => i,
        Err(e) => return Reply::error(format!("ERR {e}")),
    };
    let func = match it.library_function(&lib, &info.name) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let split = 3 + keys;
    match call(host, args, &it, &func, split, mode, Some(&info.name)) {
        Ok(Ok(v)) => {
            mark_counted(host, &v);
            lua_to_reply(&v, it.resp3.get())
        }
        Ok(Err(v)) => {
            mark_counted(host, &v);
            error_reply(&v, &info.name)
        }
        Err(e) => Reply::error(format!("ERR Error running script {}, {e}", info.name)),
    }
}

/// `math.random` as Redis 7 replaces it (`redis_math_random`): returns the number, or nil
/// with the argument number (0: not about one argument) and the message lib.lua raises.
fn math_random(lua: &Lua, scripts: Arc<Scripts>) -> mlua::Result<Function> {
    lua.create_function(move |lua, args: MultiValue| {
        // Drawn before the arguments are checked, as Redis does: a failing call still
        // advances the sequence.
        let r = rand48::unit(scripts.lrand48());
        let fail = |narg: i64, msg: String| Ok((Value::Nil, narg, msg));
        let ok = |v: f64| Ok((Value::Number(v), 0, String::new()));
        match args.len() {
            0 => ok(r),
            1 => match checkint(lua, &args[0])? {
                Err(msg) => fail(1, msg),
                Ok(u) if u < 1 => fail(1, "interval is empty".into()),
                Ok(u) => ok((r * f64::from(u)).floor() + 1.0),
            },
            2 => {
                let l = match checkint(lua, &args[0])? {
                    Ok(l) => l,
                    Err(msg) => return fail(1, msg),
                };
                match checkint(lua, &args[1])? {
                    Err(msg) => fail(2, msg),
                    Ok(u) if l > u => fail(2, "interval is empty".into()),
                    // C int arithmetic: the width wraps for the full int range.
                    Ok(u) => {
                        ok((r * f64::from(u.wrapping_sub(l).wrapping_add(1))).floor()
                            + f64::from(l))
                    }
                }
            }
            _ => fail(0, "wrong number of arguments".into()),
        }
    })
}

/// Lua 5.1 `luaL_checkint`: the integer, or the "bad argument" detail.
fn checkint(lua: &Lua, v: &Value) -> mlua::Result<Result<i32, String>> {
    let d = match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(_) => lua.coerce_number(v.clone())?,
        _ => None,
    };
    Ok(d.map(rand48::lua_checkint)
        .ok_or_else(|| format!("number expected, got {}", lua_type_name(v))))
}

/// Lua 5.1 `lua_typename` of a value.
fn lua_type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// A script running this long hands its tokio worker to a fresh thread, so the other
/// connections queued on that worker get BUSY replies and can send SCRIPT KILL.
const HANDOFF_AFTER_MS: u64 = 20;
/// The hand-off is repeated this often: when the replacement thread was not scheduled
/// within the sleep (a loaded machine), this thread took its worker core back and tasks
/// parked in that worker's LIFO slot would wait behind the script. Once the core is gone
/// a repeat costs only the sleep.
const HANDOFF_RETRY_MS: u64 = 50;

/// Moves the multi-thread runtime's worker core off this thread (`block_in_place`); the
/// short sleep lets the replacement thread take the core before this one could reclaim it.
fn hand_off_worker() {
    use tokio::runtime::{Handle, RuntimeFlavor};
    if let Ok(h) = Handle::try_current() {
        if h.runtime_flavor() == RuntimeFlavor::MultiThread {
            tokio::task::block_in_place(|| std::thread::sleep(std::time::Duration::from_millis(2)));
        }
    }
}

/// Calls its upvalue with the arguments; a second result that is not nil is raised as the
/// error value. Being a C function, it keeps the calling script's frame (and line) on the
/// stack even for `return redis.call(...)`, as Redis's C API functions do.
unsafe extern "C-unwind" fn raising_trampoline(state: *mut mlua::ffi::lua_State) -> c_int {
    use mlua::ffi;
    let n = ffi::lua_gettop(state);
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
    ffi::lua_insert(state, 1);
    ffi::lua_call(state, n, 2);
    if ffi::lua_isnil(state, -1) == 0 {
        ffi::lua_error(state);
    }
    ffi::lua_pop(state, 1);
    1
}

/// SCRIPT LOAD: compiles (to report syntax errors) and stores the body.
pub fn load(srv: &Arc<Shared>, body: &[u8]) -> Reply {
    let sha = sha1_hex(body);
    let it = match interp(srv) {
        Ok(i) => i,
        Err(e) => return Reply::error(format!("ERR {e}")),
    };
    match it.function(&sha, Some(body), false) {
        Ok(_) => Reply::bulk(sha),
        Err(e) => e,
    }
}

/// How a script is named: its body (EVAL) or its SHA1 (EVALSHA).
pub enum Source<'a> {
    Body(&'a [u8]),
    Sha(&'a [u8]),
}

/// EVAL / EVALSHA and their read-only forms. `args`: name, script, numkeys, keys…, args…,
/// with `keys` keys (checked by the caller).
pub fn eval(
    srv: &Arc<Shared>,
    args: &[Bytes],
    keys: usize,
    source: Source,
    read_only: bool,
    host: &mut dyn Host,
) -> Reply {
    let it = match interp(srv) {
        Ok(i) => i,
        Err(e) => return Reply::error(format!("ERR {e}")),
    };
    let owned: String;
    let mut lower = [0u8; 40];
    let (sha, func): (&str, _) = match source {
        Source::Body(body) => {
            owned = sha1_hex(body);
            match it.function(&owned, Some(body), true) {
                Ok((f, evicted)) => {
                    Stats::bump(&srv.stats.evicted_scripts, evicted);
                    (&owned, f)
                }
                Err(e) => return e,
            }
        }
        Source::Sha(s) => {
            // Lower-cased on the stack: EVALSHA is the hot path of scripted workloads.
            if s.len() != 40 {
                return errors::err(errors::NOSCRIPT);
            }
            for (d, c) in lower.iter_mut().zip(s.iter()) {
                *d = c.to_ascii_lowercase();
            }
            let Ok(sha) = std::str::from_utf8(&lower) else {
                return errors::err(errors::NOSCRIPT);
            };
            match it.function(sha, None, false) {
                Ok((f, _)) => (sha, f),
                Err(e) => return e,
            }
        }
    };
    let Some(script) = func else {
        return errors::err(errors::NOSCRIPT);
    };
    let mode = match host.admit(script.flags, read_only) {
        Ok(m) => m,
        Err(e) => return e,
    };
    let split = 3 + keys;
    let ran = call(host, args, &it, &script.func, split, mode, None);
    if let Some(lru) = &script.lru {
        it.scripts.bodies.touch(lru);
    }
    match ran {
        Ok(Ok(v)) => {
            mark_counted(host, &v);
            lua_to_reply(&v, it.resp3.get())
        }
        Ok(Err(v)) => {
            mark_counted(host, &v);
            error_reply(&v, sha)
        }
        Err(e) => Reply::error(format!("ERR Error running script {sha}, {e}")),
    }
}

/// A script's error value whose stats were counted already is not counted again when it
/// becomes the script's reply.
fn mark_counted(host: &mut dyn Host, v: &Value) {
    if super::convert::stats_counted(v) {
        host.error_already_counted();
    }
}

/// The final reply for a script that failed (Redis 7 `luaCallFunction`).
fn error_reply(err: &Value, sha: &str) -> Reply {
    let text = |v: Value| match v {
        Value::String(s) => Some(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
        Value::Integer(i) => Some(i.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    match err {
        Value::Table(t) => {
            let msg = text(t.raw_get("err").unwrap_or(Value::Nil)).unwrap_or_default();
            let msg = msg.strip_prefix('-').unwrap_or(&msg).to_string();
            let source = text(t.raw_get("source").unwrap_or(Value::Nil));
            let line = text(t.raw_get("line").unwrap_or(Value::Nil));
            let full = match (source, line) {
                (Some(s), Some(l)) => format!("{msg} script: {sha}, on {s}:{l}."),
                _ => msg,
            };
            Reply::Error(full.replace(['\r', '\n'], " ").into())
        }
        other => {
            let msg = text(other.clone()).unwrap_or_else(|| "execution failure".into());
            let msg: String = msg.chars().take(100).collect();
            Reply::Error(format!("ERR Error running script {sha}, {msg}").into())
        }
    }
}

/// Runs a compiled script with exclusive access already held by the caller. Returns the
/// script's first value, or its error value.
fn call(
    host: &mut dyn Host,
    args: &[Bytes],
    it: &Interp,
    func: &Function,
    split: usize,
    mode: Mode,
    function: Option<&str>,
) -> mlua::Result<Result<Value, Value>> {
    it.resp3.set(false);

    // Borrowed, not cloned: the count of a shared `Arc` would bounce between cores.
    let scripts = &*it.scripts;
    scripts.wrote.store(false, Ordering::Release);
    clear(&scripts.kill);
    if scripts.handed_off_at.load(Ordering::Relaxed) != 0 {
        scripts.handed_off_at.store(0, Ordering::Release);
    }
    scripts
        .running_since
        .store(scripts.now_ms(), Ordering::Release);
    if let Some(name) = function {
        *scripts.running_fn.lock() = Some((name.to_string(), args.to_vec()));
    }
    RUNNING.fetch_add(1, Ordering::AcqRel);
    let result = {
        let mut bridge = Bridge {
            host,
            scripts,
            mode,
            resp3: &it.resp3,
        };
        // The pointer is only dereferenced by `redis_call` and `redis.acl_check_cmd`
        // while this frame is alive: `CurrentGuard` clears it before `bridge` goes out of
        // scope, and scripts run synchronously on this thread.
        let ptr: *mut Bridge<'static> = std::ptr::from_mut(&mut bridge).cast();
        CURRENT.with(|c| c.set(Some(ptr)));
        let _guard = CurrentGuard;
        let _hook = HookScope::enter(it);
        let rearmed = it.rearmed.replace(false);
        let gc_step = {
            let n = it.gc_count.get() + 1;
            it.gc_count.set(if n >= GC_EVERY { 0 } else { n });
            n >= GC_EVERY
        };
        // One protected call of a C function (made once per interpreter) builds KEYS and
        // ARGV and runs the script: through mlua's safe API (with a memory limit set)
        // every table and string would cost a protected call of its own, and
        // `Lua::exec_raw` makes two C closures per call in Lua 5.1 (Lua garbage: ~5% of
        // an EVALSHA under callgrind). `Function::call` reuses its error handler.
        let params = RunParams {
            it,
            keys: &args[3..split],
            argv: &args[split..],
            rearmed,
            gc_step,
            function: function.is_some(),
        };
        let params_ptr = std::ptr::from_ref(&params).cast_mut().cast();
        it.runner
            .call::<(Value, Value)>((&it.handler, func, mlua::LightUserData(params_ptr)))
    };
    let heap = it.lua.used_memory() as u64;
    let kind = match function {
        None => &scripts.vm_eval,
        Some(_) => &scripts.vm_functions,
    };
    kind.store(heap, Ordering::Relaxed);
    scripts.vm_last.store(heap, Ordering::Relaxed);
    scripts.running_since.store(0, Ordering::Release);
    if function.is_some() {
        *scripts.running_fn.lock() = None;
    }
    RUNNING.fetch_sub(1, Ordering::AcqRel);
    clear(&scripts.kill);
    let (ok, v) = result?;
    Ok(if matches!(ok, Value::Boolean(true)) {
        Ok(v)
    } else {
        Err(v)
    })
}

/// Clears a flag that is almost never set without writing it (a store would take its
/// cache line from the other worker's core on every script).
fn clear(flag: &AtomicBool) {
    if flag.load(Ordering::Relaxed) {
        flag.store(false, Ordering::Release);
    }
}

/// What [`run_script_c`] runs: a script's arguments and the interpreter's per-run state.
struct RunParams<'a> {
    it: &'a Interp,
    keys: &'a [Bytes],
    argv: &'a [Bytes],
    rearmed: bool,
    gc_step: bool,
    /// A function (FCALL): KEYS and ARGV are its arguments, not globals.
    function: bool,
}

/// Runs `func()` (EVAL) or `func(keys, args)` (FCALL) as `xpcall(func, handler)` does,
/// with the globals and the collector set up around it; called as
/// `run_script_c(handler, func, params)` and returns xpcall's first two results (ok, and
/// the script's first value or the handler's error value). Its upvalues are the strings
/// "KEYS" and "ARGV" and the two tables EVAL refills for them.
///
/// # Safety
/// Called only by Lua, through `Interp::runner`, with a light userdata pointing at a
/// `RunParams` that outlives the call as its third argument. Only the Lua C API is used
/// (it may raise, out of memory, by longjmp): no Rust value needing a destructor is live.
unsafe extern "C-unwind" fn run_script_c(state: *mut LuaState) -> c_int /* SAFETY: above */ {
    use mlua::ffi;
    // SAFETY: the caller passes a pointer to a live RunParams (see above).
    let p = &*(ffi::lua_touserdata(state, 3) as *const RunParams);
    ffi::lua_settop(state, 2);
    ffi::luaL_checkstack(state, 5, std::ptr::null());
    before_run(p.it, state, p.rearmed);
    let (keys, argv) = (ffi::lua_upvalueindex(1), ffi::lua_upvalueindex(2));
    let [keys_now, argv_now] = &p.it.array_globals;
    let nargs = if p.function {
        // The last EVAL's KEYS and ARGV are not left in the globals, where a function
        // could read them through a loadstring chunk (whose environment is the globals).
        set_array_global(state, keys, None, keys_now);
        set_array_global(state, argv, None, argv_now);
        push_array(state, p.keys);
        push_array(state, p.argv);
        2
    } else {
        set_eval_array(state, keys, ffi::lua_upvalueindex(3), p.keys, keys_now);
        set_eval_array(state, argv, ffi::lua_upvalueindex(4), p.argv, argv_now);
        0
    };
    // Stack: handler (1), func (2), its arguments.
    let status = ffi::lua_pcall(state, nargs, 1, 1);
    after_run(p.it, state, p.gc_step);
    ffi::lua_pushboolean(state, c_int::from(status == 0));
    ffi::lua_replace(state, 1);
    2
}

/// Pushes a new array of `items` (Lua strings).
///
/// # Safety
/// `state` must be a valid Lua state inside a protected call with 2 free stack slots.
unsafe fn push_array(state: *mut mlua::ffi::lua_State, items: &[Bytes]) {
    use mlua::ffi;
    ffi::lua_createtable(state, items.len().min(i32::MAX as usize) as c_int, 0);
    for (i, item) in items.iter().enumerate() {
        push_bytes(state, item);
        ffi::lua_rawseti(state, -2, (i + 1) as mlua::ffi::lua_Integer);
    }
}

/// Pushes `b` as a Lua string (the raw C call: mlua's `lua_pushlstring` also reads the
/// pushed string back for its return value, which nothing here uses).
///
/// # Safety
/// `state` must be a valid Lua state inside a protected call with a free stack slot.
unsafe fn push_bytes(state: *mut LuaState, b: &[u8]) /* SAFETY: # Safety above */
{
    mlua::ffi::lua_pushlstring_(state, b.as_ptr().cast(), b.len());
}

/// What one of the globals KEYS and ARGV holds, as far as runs have set it (only
/// `set_array_global` writes it: the globals are read-only to scripts).
#[derive(Clone, Copy, PartialEq, Eq)]
enum ArrayGlobal {
    /// Not set by a run yet, or a fresh table of a long call.
    Unknown,
    /// The interpreter's reused table.
    Reused,
    /// Removed (before a function).
    Absent,
}

/// Arrays longer than this get a fresh table: a reused one would keep the slots of the
/// longest call until the interpreter goes (Lua tables do not shrink on clearing).
const REUSED_ARRAY_MAX: usize = 64;

/// Sets EVAL's global `name` (KEYS or ARGV) to `items`: in the reused table at `t` when
/// the call is short enough, else in a new one.
///
/// # Safety
/// As [`refill_array`], with 4 free stack slots.
unsafe fn set_eval_array(
    s: *mut LuaState,
    name: c_int,
    t: c_int,
    v: &[Bytes],
    now: &Cell<ArrayGlobal>,
) /* SAFETY: doc */
{
    let (state, items) = (s, v);
    if items.len() <= REUSED_ARRAY_MAX {
        refill_array(state, t, items);
        if now.get() != ArrayGlobal::Reused {
            set_array_global(state, name, Some(t), now);
            now.set(ArrayGlobal::Reused);
        }
    } else {
        push_array(state, items);
        set_array_global(state, name, Some(mlua::ffi::lua_gettop(state)), now);
        mlua::ffi::lua_pop(state, 1);
    }
}

/// Makes the table at stack index `t` the array of `items` (Lua strings) and nothing
/// else: keys a script added (hash or array, past `items`) are cleared and a metatable it
/// set is dropped, so the table reads exactly as a fresh one. EVAL reuses one KEYS and one
/// ARGV table per interpreter instead of allocating two per call (their garbage drove
/// ~20% of a one-line EVALSHA's instructions into the collector). No script can keep a
/// reference past its run, so no run sees another's table: the globals and every library
/// table are read-only, `debug` is gone, KEYS/ARGV are removed before a function runs,
/// and FCALL gets fresh tables ([`push_array`]).
///
/// # Safety
/// `state` must be a valid Lua state inside a protected call with 3 free stack slots;
/// `t` a pseudo-index (an upvalue) holding a table.
unsafe fn refill_array(state: *mut LuaState, t: c_int, items: &[Bytes]) /* SAFETY: doc */
{
    use mlua::ffi;
    let n = items.len();
    if ffi::lua_getmetatable(state, t) != 0 {
        ffi::lua_pop(state, 1);
        ffi::lua_pushnil(state);
        ffi::lua_setmetatable(state, t);
    }
    for (i, item) in items.iter().enumerate() {
        push_bytes(state, item);
        ffi::lua_rawseti(state, t, (i + 1) as ffi::lua_Integer);
    }
    // Then everything else goes, by a traversal of the whole table (clearing fields during
    // a traversal is allowed, Lua 5.1 manual, `next`). Starting after key `n` instead
    // missed hash-part entries placed before `n`'s node, so a previous script's extra
    // keys could survive into the next run (scripting_conformance
    // `keys_and_argv_are_fresh_in_every_script`, seen on some interpreter histories).
    ffi::lua_pushnil(state);
    while ffi::lua_next(state, t) != 0 {
        ffi::lua_pop(state, 1);
        let keep = ffi::lua_type(state, -1) == ffi::LUA_TNUMBER && {
            let k = ffi::lua_tonumber(state, -1);
            k >= 1.0 && k <= n as f64 && k.fract() == 0.0
        };
        if !keep {
            ffi::lua_pushvalue(state, -1);
            ffi::lua_pushnil(state);
            ffi::lua_rawset(state, t);
        }
    }
}

/// Sets the global named by the string at stack index `name` to the table at stack index
/// `table`, or removes it (`None`, skipped when `now` says it is gone already), with the
/// globals' read-only flag lifted for the write, as Redis does for KEYS/ARGV. `now` is
/// left `Unknown` or `Absent`: the caller marks the reused table itself.
///
/// # Safety
/// `s` must be a valid Lua state inside a protected call with 2 free stack slots.
unsafe fn set_array_global(
    s: *mut LuaState,
    name: c_int,
    table: Option<c_int>,
    now: &Cell<ArrayGlobal>,
) /* SAFETY: doc */
{
    use mlua::ffi;
    let state = s;
    if table.is_none() && now.get() == ArrayGlobal::Absent {
        return;
    }
    now.set(match table {
        Some(_) => ArrayGlobal::Unknown,
        None => ArrayGlobal::Absent,
    });
    ffi::lua_pushvalue(state, name);
    match table {
        Some(t) => ffi::lua_pushvalue(state, t),
        None => ffi::lua_pushnil(state),
    }
    // Nothing between lifting and restoring the flag can raise.
    lua_enablereadonlytable(state, ffi::LUA_GLOBALSINDEX, 0);
    ffi::lua_rawset(state, ffi::LUA_GLOBALSINDEX);
    lua_enablereadonlytable(state, ffi::LUA_GLOBALSINDEX, 1);
}

/// Before a script: a hook re-armed by the last kill goes back to the count hook.
///
/// # Safety
/// `state` must be a valid Lua state.
unsafe fn before_run(it: &Interp, state: *mut mlua::ffi::lua_State, rearmed: bool) {
    it.run_state.set(state);
    if rearmed {
        mlua::ffi::lua_sethook(
            state,
            Some(script_hook),
            mlua::ffi::LUA_MASKCOUNT,
            HOOK_EVERY,
        );
    }
}

/// After a script: nothing it did to the collector outlives it. `collectgarbage('stop')`
/// is undone, and so are `setpause` / `setstepmul` (a huge pause or a tiny step would
/// starve the collector for every later script just as well); then every `GC_EVERY`
/// scripts the collector takes one incremental step, as Redis's `luaGC` does, but sized
/// by what the heap grew since the last one (at most Redis's 50 KB) instead of always
/// 50 KB, and none when it did not grow. On a heap this small (~58 KB) Redis's step is a
/// whole cycle, marking and sweeping every live object every 50 scripts however little
/// they allocated: ~17% of the instructions of an EVALSHA of a one-line `redis.call`
/// under callgrind, for nothing when its key is the same each time (its string is
/// already interned) and for ~40 bytes of garbage per call when it is not. A sized step
/// lets a cycle span as many scripts as its garbage takes to build up, as Lua's own
/// pacing does (the allocation-driven collector still runs between steps).
///
/// # Safety
/// `state` must be a valid Lua state inside a protected call.
unsafe fn after_run(it: &Interp, state: *mut mlua::ffi::lua_State, gc_step: bool) {
    use mlua::ffi::{lua_gc, LUA_GCRESTART, LUA_GCSETPAUSE, LUA_GCSETSTEPMUL};
    // Lua 5.1's defaults (luaconf.h LUAI_GCPAUSE, LUAI_GCMUL); setting returns the old.
    let pause = lua_gc(state, LUA_GCSETPAUSE, 200);
    let stepmul = lua_gc(state, LUA_GCSETSTEPMUL, 200);
    if lua_gcisstopped(state) != 0 || pause != 200 || stepmul != 200 {
        // Also drops a threshold computed under the script's settings.
        lua_gc(state, LUA_GCRESTART, 0);
    }
    if gc_step {
        let heap = heap_bytes(state);
        let grew = heap.saturating_sub(it.gc_mark.get());
        if grew > 0 {
            // "Kilobytes" allocated, as LUA_GCSTEP counts them, rounded up.
            let kb = grew.div_ceil(1024).min(GC_EVERY as usize);
            lua_gc(state, mlua::ffi::LUA_GCSTEP, kb as c_int);
        }
        it.gc_mark.set(heap_bytes(state));
    }
}

/// The Lua heap in bytes, as the collector counts it.
///
/// # Safety
/// `state` must be a valid Lua state.
unsafe fn heap_bytes(state: *mut mlua::ffi::lua_State) -> usize {
    use mlua::ffi::{lua_gc, LUA_GCCOUNT, LUA_GCCOUNTB};
    (lua_gc(state, LUA_GCCOUNT, 0) as usize) * 1024 + lua_gc(state, LUA_GCCOUNTB, 0) as usize
}

/// `set_readonly(t)` for lib.lua: sets the patched Lua's read-only flag on a table. Only
/// lib.lua holds it (a local), so scripts cannot call it.
///
/// # Safety
/// Called only by Lua as a C function, with a valid state; `luaL_checktype` raises (a
/// Lua error, which unwinds through the `C-unwind` ABI) before a non-table is touched.
unsafe extern "C-unwind" fn set_readonly_c(state: *mut mlua::ffi::lua_State) -> c_int {
    mlua::ffi::luaL_checktype(state, 1, mlua::ffi::LUA_TTABLE);
    lua_enablereadonlytable(state, 1, 1);
    0
}

/// `errors::SCRIPT_KILLED` and `errors::FUNCTION_LOAD_TIMEOUT` as the hook raises them
/// (checked equal by a unit test).
const KILLED: &std::ffi::CStr = c"ERR Script killed by user with SCRIPT KILL...";
const LOAD_TIMED_OUT: &std::ffi::CStr = c"ERR FUNCTION LOAD timeout";

/// What the hook does at one call.
enum Verdict {
    Continue,
    /// Raise this error (an `{err = ...}` table) and fire on every instruction from now
    /// on, so `pcall` cannot absorb it: the error comes back at the first instruction
    /// outside the protected call.
    Stop(&'static std::ffi::CStr),
}

impl Interp {
    /// Puts back the count hook after a kill or load timeout re-armed it (scripts do
    /// this in `before_run`, inside their one raw call).
    fn restore_hook(&self) -> mlua::Result<()> {
        if self.rearmed.replace(false) {
            // SAFETY: sets the hook of the interpreter's state; no stack use.
            unsafe /* SAFETY: above */ {
                self.lua
                    .exec_raw::<()>((), |state| before_run(self, state, true))?;
            }
        }
        Ok(())
    }

    fn hook_verdict(&self) -> Verdict {
        if let Some(d) = self.load_deadline.get() {
            if Instant::now() > d {
                return Verdict::Stop(LOAD_TIMED_OUT);
            }
            return Verdict::Continue;
        }
        let s = &self.scripts;
        if s.kill.load(Ordering::Acquire) {
            return Verdict::Stop(KILLED);
        }
        let ran = s.running_for_ms().unwrap_or(0);
        let last = s.handed_off_at.load(Ordering::Acquire);
        if ran >= HANDOFF_AFTER_MS && (last == 0 || ran - last >= HANDOFF_RETRY_MS) {
            s.handed_off_at.store(ran, Ordering::Release);
            hand_off_worker();
        }
        Verdict::Continue
    }
}

/// The count hook of every interpreter (and of the coroutines its scripts create).
///
/// # Safety
/// Called only by Lua's hook machinery, with the running state and its `lua_Debug`; the
/// interpreter pointer it reads is live while set (see `HOOKED`).
unsafe extern "C-unwind" fn script_hook(
    state: *mut mlua::ffi::lua_State,
    ar: *mut mlua::ffi::lua_Debug,
) {
    use mlua::ffi;
    let it = HOOKED.with(|h| h.get());
    if it.is_null() {
        return;
    }
    // SAFETY: `HOOKED` points at an interpreter only while a `HookScope` borrowing it
    // lives on this thread, and hooks run synchronously on the thread running the code.
    let it = &*it;
    let verdict = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| it.hook_verdict()))
        .unwrap_or(Verdict::Continue);
    let Verdict::Stop(msg) = verdict else {
        return;
    };
    // Hooks are per Lua thread: a coroutine re-arms itself and the script's own thread
    // (whose new coroutines inherit it).
    it.rearmed.set(true);
    let every = ffi::LUA_MASKCOUNT | ffi::LUA_MASKLINE;
    ffi::lua_sethook(state, Some(script_hook), every, 1);
    let main = it.run_state.get();
    if !main.is_null() && main != state {
        ffi::lua_sethook(main, Some(script_hook), every, 1);
    }
    // The sandbox's own code (the error handler, the runners) must finish so the error
    // reaches the caller: it is raised again at the next instruction of script code.
    if ffi::lua_getinfo(state, c"S".as_ptr(), ar) != 0
        && !(*ar).source.is_null()
        && std::ffi::CStr::from_ptr((*ar).source).to_bytes() == b"=redis_lib"
    {
        return;
    }
    // No Rust value needing a destructor is live here: lua_error unwinds by longjmp.
    ffi::lua_createtable(state, 0, 1);
    ffi::lua_pushstring(state, msg.as_ptr());
    ffi::lua_setfield(state, -2, c"err".as_ptr());
    ffi::lua_error(state);
}

/// A command line from Lua values (`luaArgsToRedisArgv`), or the error Redis raises.
fn command_line(args: Variadic<Value>) -> Result<Vec<Bytes>, &'static str> {
    if args.is_empty() {
        return Err("ERR Please specify at least one argument for this redis lib call");
    }
    let mut argv = Vec::with_capacity(args.len());
    for a in args.into_iter() {
        match a {
            Value::String(s) => argv.push(Bytes::copy_from_slice(&s.as_bytes())),
            // Not Lua's `%.14g` (`tostring`): Redis 7.2 keeps every bit of the number.
            Value::Integer(i) => argv.push(Bytes::from(fpconv(i as f64))),
            Value::Number(n) => argv.push(Bytes::from(fpconv(n))),
            _ => return Err(errors::SCRIPT_ARG_TYPE),
        }
    }
    Ok(argv)
}

/// What `redis_call_c` hands over to `redis_call` (through `PENDING`), which finishes
/// the call with mlua's safe API.
enum Pending {
    /// The command line could not be read (Redis's error text).
    BadArgs(&'static str),
    /// No script runs on this thread.
    NoScript,
    /// The command ran (or was refused): its reply still to be converted.
    Ran(Result<Reply, String>),
    /// Running it panicked: resumed inside the mlua callback, which turns it into the
    /// error mlua propagates to the script's caller, as for a panic in any callback.
    Panicked(Box<dyn std::any::Any + Send>),
}

/// `redis.call` (upvalue 2 true) and `redis.pcall`: reads the command line and pops it
/// itself, as Redis's `luaArgsToRedisArgv` does, and runs the command. A reply that needs
/// no Lua allocation (an integer, a nil) is pushed here; anything else is converted by
/// upvalue 1 (`redis_call`), called on an empty frame: a callback through mlua would need
/// free slots that a call with ~8000 arguments (`unpack` of a big table) leaves none of
/// (Lua 5.1 caps a C function's frame at 8000 slots), and mlua's callback machinery costs
/// ~5% of a one-line EVALSHA, which the common integer reply now skips.
unsafe extern "C-unwind" fn redis_call_c(state: *mut mlua::ffi::lua_State) -> c_int {
    use mlua::ffi;
    let n = ffi::lua_gettop(state);
    let argv = args_from_stack(state, n);
    ffi::lua_settop(state, 0);
    let pending = match argv {
        Err(e) => Pending::BadArgs(e),
        Ok(argv) => match run_command(argv) {
            // No Rust value needing a destructor is live past these pushes, which cannot
            // raise (no allocation; an empty frame has LUA_MINSTACK free slots).
            Ok((Ok(Reply::Int(i)), _)) => {
                ffi::lua_pushnumber(state, i as f64);
                return 1;
            }
            Ok((Ok(Reply::Nil | Reply::NilArray), resp3)) => {
                match resp3 {
                    true => ffi::lua_pushnil(state),
                    false => ffi::lua_pushboolean(state, 0),
                }
                return 1;
            }
            Ok((out, _)) => Pending::Ran(out),
            Err(p) => p,
        },
    };
    PENDING.with(|p| *p.borrow_mut() = Some(pending));
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(2));
    ffi::lua_call(state, 1, 2);
    if ffi::lua_toboolean(state, -1) != 0 {
        ffi::lua_pop(state, 1);
        // No Rust value lives in this frame: unwinding past it skips no destructor.
        ffi::lua_error(state);
    }
    ffi::lua_pop(state, 1);
    1
}

/// Runs one `redis.call` command line through the running script's bridge: its outcome
/// and the script's protocol, or what `redis_call` must finish with instead (no script
/// runs; the command panicked).
fn run_command(argv: Vec<Bytes>) -> Result<(Result<Reply, String>, bool), Pending> {
    let Some(ptr) = CURRENT.with(|c| c.get()) else {
        return Err(Pending::NoScript);
    };
    // SAFETY: see `call`: the pointer is live while the script runs, and taken again
    // (no aliasing) only after this borrow ends; commands cannot re-enter a script.
    let bridge = unsafe { &mut *ptr }; // SAFETY: as stated just above.
    CURRENT.with(|c| c.set(None));
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let out = bridge.run(argv);
        (out, bridge.resp3.get())
    }));
    CURRENT.with(|c| c.set(Some(ptr)));
    out.map_err(Pending::Panicked)
}

/// The arguments `1..=n` of a C function as a command line (`luaArgsToRedisArgv`).
///
/// # Safety
/// `state` is a live Lua state with at least `n` values on the current frame.
unsafe fn args_from_stack(
    state: *mut mlua::ffi::lua_State,
    n: c_int,
) -> Result<Vec<Bytes>, &'static str> {
    use mlua::ffi;
    if n == 0 {
        return Err("ERR Please specify at least one argument for this redis lib call");
    }
    let mut argv = Vec::with_capacity(n as usize);
    for i in 1..=n {
        match ffi::lua_type(state, i) {
            // Not Lua's `%.14g` (`tostring`): Redis 7.2 keeps every bit of the number.
            ffi::LUA_TNUMBER => {
                let d = ffi::lua_tonumber(state, i);
                argv.push(Bytes::from(fpconv(d)));
            }
            ffi::LUA_TSTRING => {
                let mut len = 0usize;
                let p = ffi::lua_tolstring(state, i, &mut len);
                // SAFETY: Lua returned a pointer to `len` bytes of a string on the stack.
                let bytes = std::slice::from_raw_parts(p as *const u8, len);
                argv.push(Bytes::copy_from_slice(bytes));
            }
            _ => return Err(errors::SCRIPT_ARG_TYPE),
        }
    }
    Ok(argv)
}

/// `redis.call` / `redis.pcall` core, on what `redis_call_c` left: returns the reply
/// as a Lua value, and whether it must be raised (an error under `redis.call`).
fn redis_call(lua: &Lua, raise: bool, resp3: bool) -> mlua::Result<(Value, bool)> {
    let fail = |text: &str| -> mlua::Result<(Value, bool)> {
        Ok((Value::Table(error_table(lua, text)?), raise))
    };
    match PENDING.with(|p| p.borrow_mut().take()) {
        Some(Pending::BadArgs(e)) => fail(e),
        None | Some(Pending::NoScript) => {
            fail("ERR redis.call is only available while a script runs")
        }
        Some(Pending::Panicked(p)) => std::panic::resume_unwind(p),
        Some(Pending::Ran(Err(text))) => fail(&text),
        Some(Pending::Ran(Ok(r))) => {
            let is_err = r.is_error();
            let v = reply_to_lua(lua, r, resp3)?;
            Ok((v, is_err && raise))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(v: &[&str]) -> Vec<Bytes> {
        v.iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    #[test]
    fn eval_write_declaration() {
        let srv = Arc::new(Shared::new(
            crate::config::Config::default(),
            crate::clock::Clock::manual(),
            0,
        ));
        let writes = |v: &[&str]| eval_shebang_writes(&srv, &words(v));
        assert_eq!(writes(&["EVAL", "#!lua\nreturn 1", "0"]), Some(true));
        assert_eq!(
            writes(&["eval_ro", "#!lua flags=allow-oom\nreturn 1", "0"]),
            Some(true)
        );
        assert_eq!(
            writes(&["EVAL", "#!lua flags=no-writes\nreturn 1", "0"]),
            Some(false)
        );
        assert_eq!(
            writes(&["EVAL", "return redis.call('SET', 'k', 'v')", "0"]),
            None
        );
        assert_eq!(writes(&["EVAL", "#!lua flags=bogus\nreturn 1", "0"]), None);
        assert_eq!(writes(&["GET", "#!lua\n"]), None);
        let sha = sha1_hex(b"#!lua\nreturn 1");
        assert_eq!(writes(&["EVALSHA", &sha, "0"]), None);
        scripts(&srv)
            .bodies
            .insert(&sha, Bytes::from_static(b"#!lua\nreturn 1"), false);
        assert_eq!(
            writes(&["EVALSHA", &sha.to_ascii_uppercase(), "0"]),
            Some(true)
        );
        assert_eq!(writes(&["evalsha_ro", &sha, "0"]), Some(true));
    }

    #[test]
    fn fcall_write_declaration() {
        let srv = Arc::new(Shared::new(
            crate::config::Config::default(),
            crate::clock::Clock::manual(),
            0,
        ));
        let writes = |v: &[&str]| eval_shebang_writes(&srv, &words(v));
        assert_eq!(writes(&["FCALL", "w", "0"]), None);
        let code = "#!lua name=l\nredis.register_function('w', function() end)\n\
                    redis.register_function{function_name='r', flags={'no-writes'}, \
                    callback=function() end}";
        let loaded = super::super::functions::load(&srv, code.as_bytes(), false);
        assert_eq!(loaded, Reply::bulk("l"));
        assert_eq!(writes(&["FCALL", "W", "0"]), Some(true));
        assert_eq!(writes(&["fcall_ro", "w", "0"]), Some(true));
        assert_eq!(writes(&["FCALL", "r", "0"]), Some(false));
        assert_eq!(writes(&["FCALL", "nope", "0"]), None);
    }

    #[test]
    fn run_written_fields_share_one_cache_line() {
        use std::mem::offset_of;
        assert_eq!(std::mem::align_of::<Scripts>(), 64);
        for end in [
            offset_of!(Scripts, running_since) + 8,
            offset_of!(Scripts, handed_off_at) + 8,
            offset_of!(Scripts, vm_eval) + 8,
            offset_of!(Scripts, vm_functions) + 8,
            offset_of!(Scripts, vm_last) + 8,
            offset_of!(Scripts, wrote) + 1,
            offset_of!(Scripts, kill) + 1,
        ] {
            assert!(end <= 64, "{end}");
        }
    }

    #[test]
    fn hook_errors_are_the_shared_texts() {
        assert_eq!(KILLED.to_str().unwrap(), errors::SCRIPT_KILLED);
        assert_eq!(
            LOAD_TIMED_OUT.to_str().unwrap(),
            errors::FUNCTION_LOAD_TIMEOUT
        );
    }

    #[test]
    fn reseed_restarts_the_sequence() {
        let s = Scripts::new();
        s.reseed(5);
        let a = s.lrand48();
        s.reseed(5);
        assert_eq!(s.lrand48(), a);
        assert_ne!(s.lrand48(), a);
    }
}
