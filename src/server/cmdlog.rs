//! The command log of the test double: every command received (connection id and
//! arguments), bounded, with per-name counts, and a way to wait for a command to arrive.
//! Recording is off unless test commands are enabled (or a test turns it on).

use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;
use tokio::sync::Notify;

/// Entries kept; older ones are dropped (counts keep counting).
pub const CAPACITY: usize = 10_000;

/// One command as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedCommand {
    /// The connection's id (`CLIENT ID`).
    pub conn: u64,
    /// Arguments as sent, the command name first.
    pub args: Vec<Bytes>,
}

impl LoggedCommand {
    /// The command name, lowercase.
    pub fn name(&self) -> String {
        self.args
            .first()
            .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
            .unwrap_or_default()
    }
}

#[derive(Default)]
struct Inner {
    entries: VecDeque<LoggedCommand>,
    total: u64,
    by_name: HashMap<String, u64>,
}

#[derive(Default)]
pub struct CommandLog {
    inner: Mutex<Inner>,
    logged: Notify,
}

impl CommandLog {
    /// Records one command (copies the arguments: they point into the read buffer).
    pub fn record(&self, conn: u64, args: &[Bytes]) {
        let entry = LoggedCommand {
            conn,
            args: args.iter().map(|a| Bytes::copy_from_slice(a)).collect(),
        };
        let name = entry.name();
        {
            let mut g = self.inner.lock();
            g.total += 1;
            *g.by_name.entry(name).or_insert(0) += 1;
            if g.entries.len() >= CAPACITY {
                g.entries.pop_front();
            }
            g.entries.push_back(entry);
        }
        self.logged.notify_waiters();
    }

    /// The last `n` commands (all kept ones for `None`), oldest first.
    pub fn entries(&self, n: Option<usize>) -> Vec<LoggedCommand> {
        let g = self.inner.lock();
        let skip = n.map_or(0, |n| g.entries.len().saturating_sub(n));
        g.entries.iter().skip(skip).cloned().collect()
    }

    /// Commands received since the last reset (including those no longer kept).
    pub fn total(&self) -> u64 {
        self.inner.lock().total
    }

    /// How many commands named `name` (case-insensitive) arrived since the last reset.
    pub fn count(&self, name: &str) -> u64 {
        let g = self.inner.lock();
        g.by_name
            .get(&name.to_ascii_lowercase())
            .copied()
            .unwrap_or(0)
    }

    pub fn reset(&self) {
        *self.inner.lock() = Inner::default();
    }

    /// Waits until at least `n` commands named `name` arrived since the last reset; false on
    /// timeout.
    pub async fn wait_for(&self, name: &str, n: u64, timeout: Duration) -> bool {
        let wait = async {
            loop {
                let notified = self.logged.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.count(name) >= n {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(timeout, wait).await.is_ok()
    }

    /// [`CommandLog::wait_for`] for a thread outside any async runtime (polls every ms).
    pub fn wait_for_blocking(&self, name: &str, n: u64, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if self.count(name) >= n {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn records_counts_and_bounds() {
        let log = CommandLog::default();
        for i in 0..CAPACITY + 5 {
            log.record(7, &[b("SET"), b(&format!("k{i}")), b("v")]);
        }
        log.record(8, &[b("get"), b("k")]);
        assert_eq!(log.total(), CAPACITY as u64 + 6);
        assert_eq!(log.count("set"), CAPACITY as u64 + 5);
        assert_eq!(log.count("GET"), 1);
        assert_eq!(log.entries(None).len(), CAPACITY);
        let last = log.entries(Some(2));
        assert_eq!(last[0].args[1], b(&format!("k{}", CAPACITY + 4)));
        assert_eq!(last[1].conn, 8);
        assert_eq!(last[1].name(), "get");
        log.reset();
        assert_eq!(log.total(), 0);
        assert!(log.entries(None).is_empty());
    }

    #[tokio::test]
    async fn wait_for_sees_earlier_and_later_commands() {
        let log = std::sync::Arc::new(CommandLog::default());
        log.record(1, &[b("PING")]);
        assert!(log.wait_for("ping", 1, Duration::from_millis(10)).await);
        assert!(!log.wait_for("ping", 2, Duration::from_millis(10)).await);
        let l2 = log.clone();
        let t = tokio::spawn(async move { l2.wait_for("ping", 2, Duration::from_secs(5)).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        log.record(1, &[b("ping")]);
        assert!(t.await.unwrap_or(false));
    }
}
