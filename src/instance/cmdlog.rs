//! The command log of the test double: every command received (connection id and
//! arguments), bounded, with per-name counts, and a way to wait for a command to arrive.
//! Recording is off unless test commands are enabled (or a test turns it on).
//!
//! Any client may read the log (`RESPITE LOG GET`), so secrets are redacted as Redis redacts
//! them from SLOWLOG and MONITOR (`redactClientCommandArgument`), and every part of the log is
//! bounded: entries, the bytes they hold, and the per-name counts.

use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;
use tokio::sync::Notify;

/// Entries kept; older ones are dropped (counts keep counting).
pub const CAPACITY: usize = 10_000;
/// Argument bytes the kept entries may hold in all; older entries are dropped past it.
pub const MAX_BYTES: usize = 64 * 1024 * 1024;
/// Bytes of one argument that are kept; a longer one is cut and marked (see [`cut`]).
pub const MAX_ARG: usize = 1024 * 1024;
/// Distinct names counted besides the server's own commands (unknown names only ever add
/// to the total past this).
pub const MAX_OTHER_NAMES: usize = 1024;
/// What a redacted argument is logged as (Redis's `shared.redacted`).
pub const REDACTED: &[u8] = b"(redacted)";

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
    /// Argument bytes held by `entries`.
    bytes: usize,
    total: u64,
    by_name: HashMap<String, u64>,
    /// Names in `by_name` that are not commands of the server.
    other_names: usize,
}

#[derive(Default)]
pub struct CommandLog {
    inner: Mutex<Inner>,
    logged: Notify,
}

fn entry_bytes(e: &LoggedCommand) -> usize {
    e.args.iter().map(|a| a.len()).sum()
}

/// An argument as kept: whole up to [`MAX_ARG`] bytes, else its first `MAX_ARG` bytes and a
/// note of the full length.
fn cut(a: &[u8]) -> Bytes {
    if a.len() <= MAX_ARG {
        return Bytes::copy_from_slice(a);
    }
    let mut v = a[..MAX_ARG].to_vec();
    v.extend_from_slice(format!("...({} bytes)", a.len()).as_bytes());
    Bytes::from(v)
}

/// Which arguments carry secrets (Redis 7.2 redacts the same ones): AUTH's; HELLO's
/// `AUTH user pass`; MIGRATE's `AUTH pass` / `AUTH2 user pass`; CONFIG SET values of
/// `requirepass`, `masterauth` and `masteruser`; everything after ACL SETUSER.
pub fn redacted(args: &[Bytes]) -> Vec<bool> {
    let mut r = vec![false; args.len()];
    let is = |a: &Bytes, s: &str| a.eq_ignore_ascii_case(s.as_bytes());
    let Some(name) = args.first() else {
        return r;
    };
    if is(name, "auth") {
        r.iter_mut().skip(1).for_each(|x| *x = true);
    } else if is(name, "hello") {
        let mut j = 2;
        while j < args.len() {
            let more = args.len() - j - 1;
            if is(&args[j], "auth") && more >= 2 {
                r[j + 1] = true;
                r[j + 2] = true;
                j += 3;
            } else if is(&args[j], "setname") && more >= 1 {
                j += 2;
            } else {
                break;
            }
        }
    } else if is(name, "migrate") {
        let mut j = 6;
        while j < args.len() {
            if is(&args[j], "auth") {
                if let Some(x) = r.get_mut(j + 1) {
                    *x = true;
                }
                j += 2;
            } else if is(&args[j], "auth2") {
                for x in r.iter_mut().skip(j + 1).take(2) {
                    *x = true;
                }
                j += 3;
            } else if is(&args[j], "keys") {
                break;
            } else {
                j += 1;
            }
        }
    } else if is(name, "config") && args.get(1).is_some_and(|a| is(a, "set")) {
        let mut j = 2;
        while j + 1 < args.len() {
            if ["requirepass", "masterauth", "masteruser"]
                .iter()
                .any(|p| is(&args[j], p))
            {
                r[j + 1] = true;
            }
            j += 2;
        }
    } else if is(name, "acl") && args.get(1).is_some_and(|a| is(a, "setuser")) {
        r.iter_mut().skip(2).for_each(|x| *x = true);
    }
    r
}

impl CommandLog {
    /// Records one command (copies the arguments: they point into the read buffer), its
    /// secrets redacted. `known`: the command table has its name (unknown names share a
    /// bounded budget).
    pub fn record(&self, conn: u64, args: &[Bytes], known: bool) {
        let hide = redacted(args);
        let entry = LoggedCommand {
            conn,
            args: args
                .iter()
                .zip(hide)
                .map(|(a, h)| {
                    if h {
                        Bytes::from_static(REDACTED)
                    } else {
                        cut(a)
                    }
                })
                .collect(),
        };
        let name = entry.name();
        let size = entry_bytes(&entry);
        {
            let mut g = self.inner.lock();
            g.total += 1;
            if let Some(n) = g.by_name.get_mut(&name) {
                *n += 1;
            } else if known || g.other_names < MAX_OTHER_NAMES {
                g.other_names += usize::from(!known);
                g.by_name.insert(name, 1);
            }
            while !g.entries.is_empty()
                && (g.entries.len() >= CAPACITY || g.bytes + size > MAX_BYTES)
            {
                if let Some(old) = g.entries.pop_front() {
                    g.bytes -= entry_bytes(&old);
                }
            }
            g.bytes += size;
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
            log.record(7, &[b("SET"), b(&format!("k{i}")), b("v")], true);
        }
        log.record(8, &[b("get"), b("k")], true);
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

    #[test]
    fn secrets_are_redacted() {
        let log = CommandLog::default();
        let line = |l: &str| l.split(' ').map(b).collect::<Vec<_>>();
        log.record(1, &line("AUTH hunter2"), true);
        log.record(1, &line("auth default hunter2"), true);
        log.record(1, &line("HELLO 3 SETNAME me AUTH default hunter2"), true);
        log.record(1, &line("MIGRATE h 1 k 0 100 COPY AUTH hunter2"), true);
        log.record(
            1,
            &line("MIGRATE h 1 \"\" 0 100 AUTH2 u hunter2 KEYS auth x"),
            true,
        );
        log.record(
            1,
            &line("CONFIG SET maxmemory 1 REQUIREPASS hunter2 masterauth hunter2"),
            true,
        );
        log.record(1, &line("ACL SETUSER u on >hunter2"), true);
        let got: Vec<String> = log
            .entries(None)
            .iter()
            .map(|e| {
                let a: Vec<_> = e.args.iter().map(|a| String::from_utf8_lossy(a)).collect();
                a.join(" ")
            })
            .collect();
        assert_eq!(
            got,
            [
                "AUTH (redacted)",
                "auth (redacted) (redacted)",
                "HELLO 3 SETNAME me AUTH (redacted) (redacted)",
                "MIGRATE h 1 k 0 100 COPY AUTH (redacted)",
                "MIGRATE h 1 \"\" 0 100 AUTH2 (redacted) (redacted) KEYS auth x",
                "CONFIG SET maxmemory 1 REQUIREPASS (redacted) masterauth (redacted)",
                "ACL SETUSER (redacted) (redacted) (redacted)",
            ]
        );
        assert_eq!(log.count("auth"), 2);
    }

    #[test]
    fn names_and_bytes_are_bounded() {
        let log = CommandLog::default();
        for i in 0..MAX_OTHER_NAMES + 100 {
            log.record(1, &[b(&format!("nosuch{i}"))], false);
        }
        log.record(1, &[b("PING")], true);
        assert_eq!(log.count("ping"), 1);
        assert_eq!(log.count(&format!("nosuch{}", MAX_OTHER_NAMES + 50)), 0);
        assert_eq!(log.inner.lock().by_name.len(), MAX_OTHER_NAMES + 1);
        let big = Bytes::from(vec![b'x'; 3 * MAX_ARG]);
        for _ in 0..100 {
            log.record(1, &[b("SET"), b("k"), big.clone()], true);
        }
        let g = log.inner.lock();
        assert!(g.bytes <= MAX_BYTES, "{} bytes kept", g.bytes);
        assert_eq!(g.bytes, g.entries.iter().map(entry_bytes).sum::<usize>());
        let last = g
            .entries
            .back()
            .map(|e| e.args[2].clone())
            .unwrap_or_default();
        assert!(last.len() < MAX_ARG + 32 && last.ends_with(b"...(3145728 bytes)"));
    }

    #[tokio::test]
    async fn wait_for_sees_earlier_and_later_commands() {
        let log = std::sync::Arc::new(CommandLog::default());
        log.record(1, &[b("PING")], true);
        assert!(log.wait_for("ping", 1, Duration::from_millis(10)).await);
        assert!(!log.wait_for("ping", 2, Duration::from_millis(10)).await);
        let l2 = log.clone();
        let t = tokio::spawn(async move { l2.wait_for("ping", 2, Duration::from_secs(5)).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        log.record(1, &[b("ping")], true);
        assert!(t.await.unwrap_or(false));
    }
}
