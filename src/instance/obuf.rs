//! `client-output-buffer-limit` as the server-side queues (MONITOR's lines, pub/sub pushes)
//! apply it: one class's limits parsed from the value CONFIG GET prints, kept in atomics
//! so a feeding thread reads them without the config, and Redis's hard/soft test.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// One class's output buffer limit (0 = none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    pub hard: u64,
    pub soft: u64,
    pub soft_secs: u64,
}

impl Limits {
    /// Whether `held` bytes break the limits: at or over `hard`, or at or over the soft
    /// limit for more than `soft_secs` seconds (Redis's `checkClientOutputBufferLimits`).
    /// `soft_since` remembers when the soft limit was first reached; it is cleared once
    /// the backlog drops below it.
    pub fn exceeded(&self, held: u64, hard: u64, soft_since: &mut Option<Instant>) -> bool {
        let over_soft = if self.soft > 0 && held >= self.soft {
            let since = *soft_since.get_or_insert_with(Instant::now);
            since.elapsed().as_secs() > self.soft_secs
        } else {
            *soft_since = None;
            false
        };
        (hard > 0 && held >= hard) || over_soft
    }
}

/// The limits of `class` (`normal`, `slave`/`replica` or `pubsub`) in a
/// `client-output-buffer-limit` value as CONFIG GET prints it
/// (`normal h s secs slave h s secs pubsub h s secs`).
pub fn parse_class(value: &str, class: &str) -> Option<Limits> {
    let words: Vec<&str> = value.split_ascii_whitespace().collect();
    let at = words.chunks(4).find(|c| c.len() == 4 && c[0] == class)?;
    Some(Limits {
        hard: at[1].parse().ok()?,
        soft: at[2].parse().ok()?,
        soft_secs: at[3].parse().ok()?,
    })
}

/// A class's limits, shared between the thread that re-reads the config and the threads
/// that queue output.
#[derive(Default)]
pub struct LimitCell {
    hard: AtomicU64,
    soft: AtomicU64,
    soft_secs: AtomicU64,
}

impl LimitCell {
    pub fn set(&self, l: Limits) {
        self.hard.store(l.hard, Ordering::Relaxed);
        self.soft.store(l.soft, Ordering::Relaxed);
        self.soft_secs.store(l.soft_secs, Ordering::Relaxed);
    }

    pub fn get(&self) -> Limits {
        Limits {
            hard: self.hard.load(Ordering::Relaxed),
            soft: self.soft.load(Ordering::Relaxed),
            soft_secs: self.soft_secs.load(Ordering::Relaxed),
        }
    }

    /// Re-reads `class` from the configuration (CONFIG SET may have changed it); an
    /// unparsable value leaves the limits as they were.
    pub fn refresh(&self, config: &crate::config::ConfigStore, class: &str) {
        if let Some(l) = config
            .get("client-output-buffer-limit")
            .and_then(|v| parse_class(&v, class))
        {
            self.set(l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_class() {
        let v = "normal 10 20 30 slave 268435456 67108864 60 pubsub 33554432 8388608 61";
        let l = |hard, soft, soft_secs| Limits {
            hard,
            soft,
            soft_secs,
        };
        assert_eq!(parse_class(v, "normal"), Some(l(10, 20, 30)));
        assert_eq!(parse_class(v, "pubsub"), Some(l(33554432, 8388608, 61)));
        assert_eq!(parse_class("pubsub 1 2 3", "normal"), None);
        assert_eq!(parse_class("normal 1 x 3", "normal"), None);
    }

    #[test]
    fn hard_and_soft() {
        let l = Limits {
            hard: 100,
            soft: 10,
            soft_secs: 1000,
        };
        let mut since = None;
        assert!(!l.exceeded(9, l.hard, &mut since));
        assert!(since.is_none());
        // Over soft but not for long enough: remembered, not exceeded.
        assert!(!l.exceeded(10, l.hard, &mut since));
        assert!(since.is_some());
        assert!(!l.exceeded(5, l.hard, &mut since));
        assert!(since.is_none());
        assert!(l.exceeded(100, l.hard, &mut since));
        // No hard limit (0) never trips on size alone.
        assert!(!l.exceeded(u64::MAX, 0, &mut None));
    }
}
