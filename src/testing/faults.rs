//! [`TestServer`](crate::TestServer) fault injection and observation: the in-process face of
//! `RESPITE FAULT`, `RESPITE LOG` and `RESPITE CONNECTIONS` (instance/faults.rs, cmdlog.rs).
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use std::time::Duration;
//! let srv = respite::TestServer::builder()
//!     .param("enable-test-commands", "yes") // also records the command log
//!     .start()?;
//! srv.fail_next(1, "READONLY You can't write against a read only replica.");
//! let client = redis::Client::open(srv.url()).unwrap();
//! let mut con = client.get_multiplexed_async_connection().await.unwrap();
//! let r: redis::RedisResult<()> = redis::cmd("SET").arg("k").arg("v").query_async(&mut con).await;
//! assert!(r.is_err());
//! assert!(srv.wait_for_command("set", Duration::from_secs(1)).await);
//! # Ok(()) }
//! ```

use crate::instance::cmdlog::LoggedCommand;
use crate::TestServer;
use bytes::Bytes;
use std::sync::atomic::Ordering;
use std::time::Duration;

impl TestServer {
    /// The next `n` commands fail with `err` (e.g. `"READONLY …"`; text without an
    /// uppercase code word gets `ERR `). `RESPITE` commands are never failed.
    pub fn fail_next(&self, n: u64, err: &str) {
        self.shared().faults.fail(n, None, None, err);
    }

    /// The next `n` commands named `cmd` (any if `None`) with a key matching `key_glob`
    /// (any if `None`) fail with `err`; others run normally.
    pub fn fail_matching(&self, cmd: Option<&str>, key_glob: Option<&str>, n: u64, err: &str) {
        self.shared()
            .faults
            .fail(n, cmd, key_glob.map(str::as_bytes), err);
    }

    /// Every command waits `d` before it runs and is answered (per command: a pipeline of
    /// N waits N × d). `Duration::ZERO` turns it off.
    pub fn delay_replies(&self, d: Duration) {
        self.shared().faults.delay(d);
    }

    /// Closes every client connection now.
    pub fn drop_connections(&self) {
        crate::cmd::admin::drop_all(&self.shared());
    }

    /// For `d`, new connections are accepted and closed at once (clients see a reset /
    /// EOF, as while a server restarts behind a proxy).
    pub fn refuse_connections(&self, d: Duration) {
        self.shared().faults.refuse(d);
    }

    /// Commands are read but neither run nor answered until [`TestServer::resume`]
    /// (`RESPITE` commands still are, so a pause can be lifted over the protocol).
    pub fn pause(&self) {
        self.shared().faults.pause(None);
    }

    /// Ends a pause: the held commands run and are answered in order.
    pub fn resume(&self) {
        self.shared().faults.resume();
    }

    /// Turns every fault off (fail rules, delay, refusal, pause).
    pub fn clear_faults(&self) {
        self.shared().faults.clear();
    }

    /// Starts (or stops) recording commands. On from the start when the server was built
    /// with `.param("enable-test-commands", "yes")`.
    pub fn record_commands(&self, on: bool) {
        self.shared().faults.set_logging(on);
    }

    /// The commands received (the last 10 000), oldest first, with their connection id.
    pub fn command_log(&self) -> Vec<LoggedCommand> {
        self.shared().cmdlog.entries(None)
    }

    /// The commands one connection (`CLIENT ID`) sent, as argument lists.
    pub fn commands_of(&self, conn: u64) -> Vec<Vec<Bytes>> {
        self.command_log()
            .into_iter()
            .filter(|c| c.conn == conn)
            .map(|c| c.args)
            .collect()
    }

    /// How many commands named `name` arrived since start (or the last reset).
    pub fn command_count(&self, name: &str) -> u64 {
        self.shared().cmdlog.count(name)
    }

    pub fn reset_command_log(&self) {
        self.shared().cmdlog.reset();
    }

    /// Connected clients right now.
    pub fn connection_count(&self) -> usize {
        self.shared().clients.count()
    }

    /// Connections accepted since start (including refused and dropped ones).
    pub fn connections_accepted(&self) -> u64 {
        self.shared().faults.accepted.load(Ordering::Relaxed)
    }

    /// Waits until a command named `name` has been received (since start or the last
    /// [`TestServer::reset_command_log`]); false on timeout. Needs the log recording.
    pub async fn wait_for_command(&self, name: &str, timeout: Duration) -> bool {
        self.wait_for_commands(name, 1, timeout).await
    }

    /// [`TestServer::wait_for_command`] for synchronous tests: blocks the calling thread.
    pub fn wait_for_command_blocking(&self, name: &str, timeout: Duration) -> bool {
        self.shared().cmdlog.wait_for_blocking(name, 1, timeout)
    }

    /// As [`TestServer::wait_for_command`], for at least `n` of them.
    pub async fn wait_for_commands(&self, name: &str, n: u64, timeout: Duration) -> bool {
        self.shared().cmdlog.wait_for(name, n, timeout).await
    }
}
