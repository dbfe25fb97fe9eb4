//! The one seam between scripts and the commands they run. The engine (Lua, sandbox,
//! conversions) calls up through [`Host`]; `cmd` implements it over its command context,
//! with every command-side rule a script is held to (lookup, arity, script flags,
//! read-only scripts, OOM and NOREPLICAS refusals, error counting).

use super::shebang::Flags;
use crate::protocol::Reply;
use bytes::Bytes;
use std::sync::atomic::AtomicBool;

/// What a running script may do (Redis's run_ctx flags), as [`Host::admit`] decides.
#[derive(Clone, Copy, Debug)]
pub struct Mode {
    /// EVAL_RO / FCALL_RO, or declared `no-writes`: write commands fail.
    pub read_only: bool,
    /// Declared `allow-oom`: deny-oom commands run even out of memory.
    pub allow_oom: bool,
}

/// The running script's side of one `redis.call`.
#[derive(Clone, Copy)]
pub struct Call<'a> {
    pub mode: Mode,
    /// Whether the script has run a write command: the host reads it (the server's state
    /// can refuse only a script's first write) and sets it once a write runs (SCRIPT KILL
    /// then refuses).
    pub wrote: &'a AtomicBool,
    /// The script's `redis.setresp` protocol, which the command replies in.
    pub resp3: bool,
}

/// The command side of a running script, as the caller of [`super::eval`] or
/// [`super::fcall`] provides it.
pub trait Host {
    /// Redis `scriptPrepareForRun`: the script's declared flags (`None`: no shebang)
    /// checked against the server's state before it runs; the error is the reply.
    fn admit(&mut self, flags: Option<Flags>, read_only: bool) -> Result<Mode, Reply>;

    /// Redis `scriptCall`: runs one `redis.call` / `redis.pcall` command line. `Err` is
    /// the text of a refusal (the command did not run); a command that ran and failed is
    /// an `Ok` error reply. Both are counted as error replies by the host.
    fn call(&mut self, argv: Vec<Bytes>, call: Call<'_>) -> Result<Reply, String>;

    /// `redis.acl_check_cmd`: `None` when the line names no command, else whether the
    /// script's user may run it (command, keys and channels).
    fn acl_check(&self, argv: &[Bytes]) -> Option<bool>;

    /// The script's reply is an error whose stats its `redis.call` counted already.
    fn error_already_counted(&mut self);
}
