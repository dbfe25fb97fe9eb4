//! Lua scripting as Redis 7.2 does it: EVAL/EVALSHA/SCRIPT over a sandboxed Lua 5.1 with
//! the `redis.*` API. Libraries (`cjson`, `cmsgpack`, `bit`, `struct`) register their
//! global tables through [`open_libraries`].

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod convert;
pub mod engine;
pub mod functions;
pub mod rand48;
pub mod sha1;
pub mod shebang;
pub mod structlib;

pub use engine::{eval, eval_shebang_writes, fcall, load, scripts, Scripts, Source};

/// Registers the extra libraries Redis ships with its Lua, before the sandbox is sealed.
/// Each library module provides `pub fn open(lua: &mlua::Lua) -> mlua::Result<()>`.
pub fn open_libraries(lua: &mlua::Lua) -> mlua::Result<()> {
    cjson::open(lua)?;
    cmsgpack::open(lua)?;
    bit::open(lua)?;
    structlib::open(lua)?;
    Ok(())
}

/// Checked by dispatch before a command takes its locks: once a script has run past
/// `lua-time-limit`, other clients get `-BUSY` (commands flagged `allow_busy` pass), and
/// SCRIPT KILL is served here because the script holds the keyspace.
pub fn before_lock(
    srv: &std::sync::Arc<crate::server::state::Shared>,
    spec: &crate::cmd::CommandSpec,
) -> Option<crate::protocol::Reply> {
    if engine::RUNNING.load(std::sync::atomic::Ordering::Acquire) == 0 {
        return None;
    }
    let s = scripts(srv);
    let ran = s.running_for_ms()?;
    match spec.name {
        "script|kill" => return Some(s.kill()),
        "function|kill" => return Some(s.kill_kind(false)),
        "function|stats" => return Some(functions::stats(srv)),
        _ => {}
    }
    let limit = srv.config.get_i64("lua-time-limit");
    if limit <= 0 || ran < limit as u64 || spec.has_flag("allow_busy") {
        return None;
    }
    let busy = match s.running_function() {
        Some(_) => crate::cmd::errors::BUSY_FUNCTION,
        None => crate::cmd::errors::BUSY,
    };
    Some(crate::cmd::errors::err(busy))
}
