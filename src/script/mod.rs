//! Lua scripting as Redis 7.2 does it: EVAL/EVALSHA/SCRIPT over a sandboxed Lua 5.1 with
//! the `redis.*` API. Libraries (`cjson`, `cmsgpack`, `bit`, `struct`) register their
//! global tables through [`open_libraries`].

pub mod bit;
pub mod cache;
pub mod cjson;
pub mod cmsgpack;
pub mod convert;
pub mod engine;
pub mod functions;
pub mod host;
pub use host::{Call, Host, Mode};
pub mod rand48;
pub mod sha1;
pub mod shebang;
pub use shebang::Flags;
pub mod structlib;

pub use engine::{
    declared_flags, eval, eval_shebang_writes, fcall, find_function, load, memory_info, scripts,
    Found, MemoryInfo, Scripts, Source,
};

/// Makes every random choice of the server repeatable: the instance's generator
/// ([`Shared::seed_rng`](crate::instance::state::Shared::seed_rng)) and Lua's
/// `math.random` restart from `seed`.
pub fn reseed(srv: &std::sync::Arc<crate::instance::state::Shared>, seed: u64) {
    srv.seed_rng(seed);
    // `math.randomseed` takes a C int; fold the high half in so every bit counts.
    scripts(srv).reseed((seed ^ (seed >> 32)) as i32);
}

/// Registers the extra libraries Redis ships with its Lua, before the sandbox is sealed.
/// Each library module provides `pub fn open(lua: &mlua::Lua) -> mlua::Result<()>`.
pub fn open_libraries(lua: &mlua::Lua) -> mlua::Result<()> {
    cjson::open(lua)?;
    cmsgpack::open(lua)?;
    bit::open(lua)?;
    structlib::open(lua)?;
    open_os(lua)
}

/// Redis 7.4's sandboxed `os` library: `os.clock()` only, the process's CPU time in seconds
/// as C's `clock()` gives it (Lua's `os_clock`; glibc reads the same clock, in whole µs).
fn open_os(lua: &mlua::Lua) -> mlua::Result<()> {
    let t = lua.create_table()?;
    t.set(
        "clock",
        lua.create_function(|_, ()| {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            let clock = libc::CLOCK_PROCESS_CPUTIME_ID;
            unsafe { libc::clock_gettime(clock, &mut ts) }; // SAFETY: writes only `ts`.
            let us = ts.tv_sec * 1_000_000 + ts.tv_nsec / 1000;
            Ok(us as f64 / 1e6)
        })?,
    )?;
    lua.globals().set("os", t)
}

/// Where a script of this server stands, as dispatch sees it before a command runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScriptState {
    /// No script runs.
    Idle,
    /// One runs, under `busy-reply-threshold`: other commands wait for it, as they wait
    /// behind Redis's blocked event loop.
    Running,
    /// One has run past `busy-reply-threshold` (alias `lua-time-limit`): the server is
    /// BUSY. Commands without the `allow_busy` flag get this error at once.
    TimedOut(&'static str),
}

/// The running script's state (one atomic load, inlined, when no script runs in the
/// process).
#[inline]
pub fn state(srv: &std::sync::Arc<crate::instance::state::Shared>) -> ScriptState {
    if engine::RUNNING.load(std::sync::atomic::Ordering::Acquire) == 0 {
        return ScriptState::Idle;
    }
    running_state(srv)
}

#[inline(never)]
fn running_state(srv: &std::sync::Arc<crate::instance::state::Shared>) -> ScriptState {
    let s = scripts(srv);
    let Some(ran) = s.running_for_ms() else {
        return ScriptState::Idle;
    };
    // Redis marks a script timed out once `elapsed >= busy-reply-threshold`, so 0 means
    // BUSY at once (the config's range is 0..LONG_MAX; a negative value cannot be set).
    let limit = srv.config.get_i64("lua-time-limit").max(0) as u64;
    if ran < limit {
        return ScriptState::Running;
    }
    ScriptState::TimedOut(match s.running_function() {
        Some(_) => crate::instance::errors::BUSY_FUNCTION,
        None => crate::instance::errors::BUSY,
    })
}

/// The BUSY error while a script is timed out (SHUTDOWN without NOSAVE answers it).
pub fn busy_error(srv: &std::sync::Arc<crate::instance::state::Shared>) -> Option<&'static str> {
    match state(srv) {
        ScriptState::TimedOut(e) => Some(e),
        _ => None,
    }
}

/// SCRIPT KILL, FUNCTION KILL and FUNCTION STATS (by their command table `name`) while a
/// script runs: they are served here, without the keyspace the script holds. `None` for
/// every other command, or when no script runs (their handlers then answer NOTBUSY or the
/// idle stats).
pub fn before_lock(
    srv: &std::sync::Arc<crate::instance::state::Shared>,
    name: &str,
) -> Option<crate::protocol::Reply> {
    if !matches!(name, "script|kill" | "function|kill" | "function|stats")
        || engine::RUNNING.load(std::sync::atomic::Ordering::Acquire) == 0
    {
        return None;
    }
    let s = scripts(srv);
    s.running_for_ms()?;
    Some(match name {
        "script|kill" => s.kill(),
        "function|kill" => s.kill_kind(false),
        _ => functions::stats(srv),
    })
}
