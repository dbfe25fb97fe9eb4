//! CLIENT PAUSE / UNPAUSE: a deadline and a mode that connections consult before running
//! a command.

use parking_lot::Mutex;
use tokio::sync::Notify;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseMode {
    All,
    Write,
}

#[derive(Default)]
pub struct Pause {
    state: Mutex<Option<(u64, PauseMode)>>,
    /// Cheap check for the common case (no pause): connections test this per command.
    active: std::sync::atomic::AtomicBool,
    pub unpaused: Notify,
}

impl Pause {
    /// Pauses until `until_ms` (real time, as Redis uses for pauses); a later deadline or
    /// stricter mode wins over an existing pause, as in Redis.
    pub fn pause(&self, until_ms: u64, mode: PauseMode) {
        let mut s = self.state.lock();
        let new = match *s {
            Some((t, m)) => (t.max(until_ms), if m == PauseMode::All { m } else { mode }),
            None => (until_ms, mode),
        };
        *s = Some(new);
        self.active
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// True if a pause may be in force (then call `current` for the details).
    #[inline]
    pub fn maybe_active(&self) -> bool {
        self.active.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn unpause(&self) {
        *self.state.lock() = None;
        self.active
            .store(false, std::sync::atomic::Ordering::Release);
        self.unpaused.notify_waiters();
    }

    /// The pause in force at `now_ms`, if any (expired pauses are cleared).
    pub fn current(&self, now_ms: u64) -> Option<(u64, PauseMode)> {
        let mut s = self.state.lock();
        match *s {
            Some((t, _)) if t <= now_ms => {
                *s = None;
                self.active
                    .store(false, std::sync::atomic::Ordering::Release);
                None
            }
            other => other,
        }
    }
}
