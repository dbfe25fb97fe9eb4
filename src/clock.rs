//! The only source of "now" for data logic (TTLs, TIME, idle times). A manual clock moves
//! only when told to, so tests can fast-forward TTLs deterministically.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The monotonic instant commands are timed with: TSC-based where the CPU allows (a few
/// ns to read), because `clock_gettime` was ~8% of CPU per request in a VM here.
pub type Instant = quanta::Instant;

#[derive(Clone, Debug)]
pub struct Clock(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    manual: AtomicBool,
    /// Microseconds since the Unix epoch while manual.
    now_us: AtomicU64,
    /// Monotonic reference for `ms_at`: Unix time ≈ `offset_us + (t - base)`. Re-synced
    /// with the system clock by `resync` (the expiry tick), so drift stays sub-second.
    base: Instant,
    offset_us: AtomicU64,
}

fn system_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

impl Default for Clock {
    fn default() -> Self {
        Clock::system()
    }
}

impl Clock {
    pub fn system() -> Clock {
        let base = Instant::now();
        Clock(Arc::new(Inner {
            manual: AtomicBool::new(false),
            now_us: AtomicU64::new(0),
            base,
            offset_us: AtomicU64::new(system_us()),
        }))
    }

    /// Unix milliseconds at monotonic instant `t` (a command's start, already read for its
    /// duration): saves a system-clock read per command. Manual clocks ignore `t`.
    pub fn ms_at(&self, t: Instant) -> u64 {
        if self.is_manual() {
            return self.now_ms();
        }
        let since = t.saturating_duration_since(self.0.base).as_micros() as u64;
        (self.0.offset_us.load(Ordering::Relaxed) + since) / 1000
    }

    /// Re-anchors `ms_at` to the system clock (wall-clock steps and NTP slewing).
    pub fn resync(&self) {
        let since = self.0.base.elapsed().as_micros() as u64;
        self.0
            .offset_us
            .store(system_us().saturating_sub(since), Ordering::Relaxed);
    }

    /// A manual clock starting at the current system time.
    pub fn manual() -> Clock {
        let c = Clock::system();
        c.set_manual(true);
        c
    }

    pub fn is_manual(&self) -> bool {
        self.0.manual.load(Ordering::Acquire)
    }

    /// Switches mode; switching to manual freezes time at the current instant.
    pub fn set_manual(&self, manual: bool) {
        if manual && !self.is_manual() {
            self.0.now_us.store(system_us(), Ordering::Release);
        }
        self.0.manual.store(manual, Ordering::Release);
    }

    pub fn now_us(&self) -> u64 {
        if self.is_manual() {
            self.0.now_us.load(Ordering::Acquire)
        } else {
            system_us()
        }
    }

    pub fn now_ms(&self) -> u64 {
        self.now_us() / 1000
    }

    /// Moves a manual clock forward (no effect on a system clock).
    pub fn advance_ms(&self, ms: u64) {
        self.0.now_us.fetch_add(ms * 1000, Ordering::AcqRel);
    }

    /// Sets a manual clock to an absolute Unix time in milliseconds.
    pub fn set_ms(&self, unix_ms: u64) {
        self.0.now_us.store(unix_ms * 1000, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = Clock::manual();
        let t = c.now_ms();
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(c.now_ms(), t);
        c.advance_ms(1500);
        assert_eq!(c.now_ms(), t + 1500);
        c.set_ms(42);
        assert_eq!(c.now_ms(), 42);
        assert_eq!(c.ms_at(Instant::now()), 42);
    }

    #[test]
    fn ms_at_follows_the_system_clock() {
        let c = Clock::system();
        c.resync();
        let (a, b) = (c.ms_at(Instant::now()), c.now_ms());
        assert!(a.abs_diff(b) <= 2, "{a} vs {b}");
    }
}
