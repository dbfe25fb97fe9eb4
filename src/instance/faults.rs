//! Fault injection for the test double: failing commands, delayed replies, dropped and
//! refused connections, a server-wide pause. Nothing here runs unless armed: connections
//! test one relaxed atomic ([`Faults::armed`]) per command.

use crate::types::glob::glob_match;
use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Bits of [`Faults::armed`].
pub const LOG: u32 = 1;
pub const FAIL: u32 = 2;
pub const DELAY: u32 = 4;
pub const PAUSE: u32 = 8;
pub const REFUSE: u32 = 16;

/// One "fail the next N commands" rule.
#[derive(Debug, Clone)]
pub struct FailRule {
    pub remaining: u64,
    /// Lowercase command name (first argument) the rule is limited to.
    pub cmd: Option<String>,
    /// Glob that one of the command's keys must match.
    pub key: Option<Bytes>,
    /// The full error line without the `-`, e.g. `ERR injected failure`.
    pub err: String,
}

#[derive(Default)]
struct State {
    fail: Vec<FailRule>,
    delay: Duration,
    refuse_until: Option<Instant>,
    /// `Some(None)`: paused until resumed; `Some(Some(t))`: paused until `t`.
    pause: Option<Option<Instant>>,
}

/// What a connection must do with one command, as decided by [`Faults::check`].
pub enum Action {
    Run,
    Fail(String),
}

#[derive(Default)]
pub struct Faults {
    armed: AtomicU32,
    state: Mutex<State>,
    /// Woken when a pause ends.
    pub resumed: Notify,
    /// Connections accepted since start (including refused ones).
    pub accepted: AtomicU64,
}

impl Faults {
    /// The hot-path check: which features are on (0 almost always).
    #[inline]
    pub fn armed(&self) -> u32 {
        self.armed.load(Ordering::Relaxed)
    }

    fn set_bit(&self, bit: u32, on: bool) {
        if on {
            self.armed.fetch_or(bit, Ordering::Relaxed);
        } else {
            self.armed.fetch_and(!bit, Ordering::Relaxed);
        }
    }

    pub(crate) fn set_logging(&self, on: bool) {
        self.set_bit(LOG, on);
    }

    /// Adds a rule failing the next `n` matching commands with `err` (an error line such as
    /// `ERR boom`; a missing code word gets `ERR `).
    pub fn fail(&self, n: u64, cmd: Option<&str>, key: Option<&[u8]>, err: &str) {
        if n == 0 {
            return;
        }
        let err = normalize_err(err);
        let mut s = self.state.lock();
        s.fail.push(FailRule {
            remaining: n,
            cmd: cmd.map(str::to_ascii_lowercase),
            key: key.map(Bytes::copy_from_slice),
            err,
        });
        self.set_bit(FAIL, true);
    }

    /// Decides whether a command (`args`, `keys` its key arguments) is failed by a rule; the
    /// first matching rule is consumed. Admin (`RESPITE`) commands are never failed.
    pub fn check(&self, args: &[Bytes], keys: &dyn Fn() -> Vec<Bytes>) -> Action {
        if self.armed() & FAIL == 0 || is_admin(args) {
            return Action::Run;
        }
        let mut s = self.state.lock();
        let mut keys_cache: Option<Vec<Bytes>> = None;
        let mut hit = None;
        for (i, r) in s.fail.iter().enumerate() {
            if let Some(c) = &r.cmd {
                if !args[0].eq_ignore_ascii_case(c.as_bytes()) {
                    continue;
                }
            }
            if let Some(g) = &r.key {
                let ks = keys_cache.get_or_insert_with(keys);
                if !ks.iter().any(|k| glob_match(g, k, false)) {
                    continue;
                }
            }
            hit = Some(i);
            break;
        }
        let Some(i) = hit else {
            return Action::Run;
        };
        let err = s.fail[i].err.clone();
        s.fail[i].remaining -= 1;
        if s.fail[i].remaining == 0 {
            s.fail.remove(i);
        }
        if s.fail.is_empty() {
            self.set_bit(FAIL, false);
        }
        Action::Fail(err)
    }

    /// Every reply (except to `RESPITE` commands) waits `d` before the command runs; zero
    /// turns it off.
    pub fn delay(&self, d: Duration) {
        self.state.lock().delay = d;
        self.set_bit(DELAY, !d.is_zero());
    }

    pub fn current_delay(&self) -> Duration {
        if self.armed() & DELAY == 0 {
            return Duration::ZERO;
        }
        self.state.lock().delay
    }

    /// New connections are accepted and closed at once for `d`.
    pub fn refuse(&self, d: Duration) {
        self.state.lock().refuse_until = Some(Instant::now() + d);
        self.set_bit(REFUSE, true);
    }

    /// True if a new connection must be closed now.
    pub fn refusing(&self) -> bool {
        if self.armed() & REFUSE == 0 {
            return false;
        }
        let mut s = self.state.lock();
        match s.refuse_until {
            Some(t) if Instant::now() < t => true,
            _ => {
                s.refuse_until = None;
                self.set_bit(REFUSE, false);
                false
            }
        }
    }

    /// Commands are read but not run nor answered until [`Faults::resume`] (or `d` passes).
    pub fn pause(&self, d: Option<Duration>) {
        self.state.lock().pause = Some(d.map(|d| Instant::now() + d));
        self.set_bit(PAUSE, true);
    }

    pub fn resume(&self) {
        self.state.lock().pause = None;
        self.set_bit(PAUSE, false);
        self.resumed.notify_waiters();
    }

    /// How long a command must still wait: `None` = not paused, `Some(None)` = until
    /// resumed, `Some(Some(d))` = at most `d`.
    fn pause_left(&self) -> Option<Option<Duration>> {
        let mut s = self.state.lock();
        match s.pause {
            None => None,
            Some(None) => Some(None),
            Some(Some(t)) => {
                let now = Instant::now();
                if now >= t {
                    s.pause = None;
                    self.set_bit(PAUSE, false);
                    None
                } else {
                    Some(Some(t - now))
                }
            }
        }
    }

    /// Waits while the server is paused (admin commands pass, so a pause can be lifted over
    /// the protocol).
    pub async fn wait_unpaused(&self, args: &[Bytes]) {
        if is_admin(args) {
            return;
        }
        loop {
            let notified = self.resumed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.pause_left() {
                None => return,
                Some(None) => notified.await,
                Some(Some(d)) => {
                    let _ = tokio::time::timeout(d, notified).await;
                }
            }
        }
    }

    /// RESPITE FAULT CLEAR: every fault off (the command log is untouched).
    pub fn clear(&self) {
        *self.state.lock() = State::default();
        self.armed
            .fetch_and(!(FAIL | DELAY | PAUSE | REFUSE), Ordering::Relaxed);
        self.resumed.notify_waiters();
    }

    /// The fail rules still pending.
    pub fn rules(&self) -> Vec<FailRule> {
        self.state.lock().fail.clone()
    }
}

/// `RESPITE …` commands are exempt from faults: they are how a test controls them.
pub fn is_admin(args: &[Bytes]) -> bool {
    args.first()
        .is_some_and(|a| a.eq_ignore_ascii_case(b"respite"))
}

fn normalize_err(err: &str) -> String {
    let err: String = err
        .chars()
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect();
    let code = err.split(' ').next().unwrap_or("");
    if !code.is_empty() && code.bytes().all(|b| b.is_ascii_uppercase()) {
        err
    } else if err.is_empty() {
        "ERR injected failure".to_string()
    } else {
        format!("ERR {err}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<Bytes> {
        line.split(' ')
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    #[test]
    fn fail_rules_match_and_run_out() {
        let f = Faults::default();
        assert_eq!(f.armed(), 0);
        f.fail(2, Some("GET"), Some(b"user:*"), "READONLY nope");
        let keys = |a: Vec<Bytes>| move || a[1..2].to_vec();
        let a = args("get user:1");
        assert!(matches!(f.check(&a, &keys(a.clone())), Action::Fail(e) if e == "READONLY nope"));
        let a = args("get other");
        assert!(matches!(f.check(&a, &keys(a.clone())), Action::Run));
        let a = args("set user:1 x");
        assert!(matches!(f.check(&a, &keys(a.clone())), Action::Run));
        let a = args("GET user:2");
        assert!(matches!(f.check(&a, &keys(a.clone())), Action::Fail(_)));
        assert!(matches!(f.check(&a, &keys(a.clone())), Action::Run));
        assert_eq!(f.armed() & FAIL, 0);
    }

    #[test]
    fn admin_commands_are_exempt() {
        let f = Faults::default();
        f.fail(1, None, None, "boom");
        let a = args("RESPITE FAULT CLEAR");
        assert!(matches!(f.check(&a, &|| vec![]), Action::Run));
        let a = args("PING");
        assert!(matches!(f.check(&a, &|| vec![]), Action::Fail(e) if e == "ERR boom"));
    }

    #[test]
    fn error_text_gets_a_code() {
        assert_eq!(normalize_err("LOADING busy"), "LOADING busy");
        assert_eq!(normalize_err("oops"), "ERR oops");
        assert_eq!(normalize_err(""), "ERR injected failure");
        assert_eq!(normalize_err("a\r\nb"), "ERR a  b");
    }

    #[test]
    fn refuse_and_pause_expire() {
        let f = Faults::default();
        f.refuse(Duration::from_millis(0));
        assert!(!f.refusing());
        f.pause(Some(Duration::from_millis(0)));
        assert!(f.pause_left().is_none());
        f.pause(None);
        assert!(matches!(f.pause_left(), Some(None)));
        f.clear();
        assert_eq!(f.armed(), 0);
    }
}
