//! The slow log (Redis `slowlog.c`): the latest commands whose run took at least
//! `slowlog-log-slower-than` microseconds, newest first, at most `slowlog-max-len` of them.
//! Valkey 8.1's COMMANDLOG keeps two more logs of the same shape, of commands whose
//! request or reply was large ([`SlowLog`] serves all three; an entry's value is then a
//! size in bytes).
//!
//! Entries keep what Redis keeps: an id, the unix time, the duration, the arguments as the
//! client sent them (secrets redacted as in [`super::cmdlog::redacted`], at most
//! [`MAX_ARGC`] arguments and [`MAX_STRING`] bytes of each), the client's address and name.
//! Pushing takes a lock, but only for commands that are slow enough to be logged.

use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// Arguments kept per entry; the last kept one says how many more there were
/// (Redis `SLOWLOG_ENTRY_MAX_ARGC`).
pub const MAX_ARGC: usize = 32;
/// Bytes kept per argument; a longer one says how many more bytes it had
/// (Redis `SLOWLOG_ENTRY_MAX_STRING`).
pub const MAX_STRING: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: u64,
    /// Unix time in seconds when the entry was made.
    pub time: i64,
    /// Microseconds the command ran (a size in bytes in COMMANDLOG's size logs).
    pub value: u64,
    pub args: Vec<Bytes>,
    /// `ip:port` of the client (`?:0` for a script's own client, as Redis's Lua client).
    pub peer: String,
    pub name: Bytes,
}

#[derive(Default)]
pub struct SlowLog {
    /// Newest first.
    entries: Mutex<VecDeque<Entry>>,
    next_id: AtomicU64,
}

/// The arguments as an entry keeps them: redacted, then trimmed (Redis redacts the client's
/// argument vector before the slow log copies it).
pub fn trimmed_args(args: &[Bytes]) -> Vec<Bytes> {
    let hide = super::cmdlog::redacted(args);
    let argc = args.len();
    let kept = argc.min(MAX_ARGC);
    (0..kept)
        .map(|j| {
            if kept != argc && j == kept - 1 {
                return Bytes::from(format!("... ({} more arguments)", argc - kept + 1));
            }
            if hide[j] {
                return Bytes::from_static(super::cmdlog::REDACTED);
            }
            let a = &args[j];
            if a.len() > MAX_STRING {
                let mut v = a[..MAX_STRING].to_vec();
                v.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - MAX_STRING).as_bytes(),
                );
                Bytes::from(v)
            } else {
                // A copy: the argument is a slice of the client's read buffer, which an
                // entry must not keep alive (it would pin the whole buffer).
                Bytes::copy_from_slice(a)
            }
        })
        .collect()
}

impl SlowLog {
    /// Adds an entry (`max_len` is `slowlog-max-len`) and drops the oldest beyond it.
    pub fn push(
        &self,
        args: &[Bytes],
        value: u64,
        time: i64,
        peer: String,
        name: Bytes,
        max_len: usize,
    ) {
        let args = trimmed_args(args);
        let mut g = self.entries.lock();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        g.push_front(Entry {
            id,
            time,
            value,
            args,
            peer,
            name,
        });
        g.truncate(max_len);
    }

    /// Entries kept. As in Redis, a lowered `slowlog-max-len` trims at the next push.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The newest `n` entries, newest first.
    pub fn newest(&self, n: usize) -> Vec<Entry> {
        self.entries.lock().iter().take(n).cloned().collect()
    }

    pub fn reset(&self) {
        self.entries.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_do_not_pin_the_read_buffer() {
        let buf = Bytes::from(vec![b'x'; 1 << 20]);
        let range = buf.as_ptr() as usize..buf.as_ptr() as usize + buf.len();
        let log = SlowLog::default();
        log.push(
            &[buf.slice(0..3), buf.slice(3..6)],
            1,
            0,
            String::new(),
            Bytes::new(),
            10,
        );
        for a in &log.newest(1)[0].args {
            assert!(
                !range.contains(&(a.as_ptr() as usize)),
                "an argument still points into the buffer"
            );
        }
    }

    fn line(s: &str) -> Vec<Bytes> {
        s.split(' ')
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect()
    }

    fn text(args: &[Bytes]) -> String {
        let v: Vec<_> = args.iter().map(|a| String::from_utf8_lossy(a)).collect();
        v.join(" ")
    }

    #[test]
    fn arguments_are_trimmed_as_redis_does() {
        let many: Vec<String> = (3..=33).map(|i| i.to_string()).collect();
        let args = line(&format!("sadd set {}", many.join(" ")));
        let got = trimmed_args(&args);
        assert_eq!(got.len(), 32);
        assert_eq!(&got[31][..], b"... (2 more arguments)");
        assert_eq!(&got[30][..], b"31");
        // Exactly 32 arguments: all kept.
        assert_eq!(trimmed_args(&args[..32]).len(), 32);
        assert_eq!(&trimmed_args(&args[..32])[31][..], b"32");
        let long = format!("sadd set foo {}", "A".repeat(129));
        let got = trimmed_args(&line(&long));
        assert_eq!(got[3], format!("{}... (1 more bytes)", "A".repeat(128)));
        let exact = format!("sadd set {}", "A".repeat(128));
        assert_eq!(trimmed_args(&line(&exact))[2].len(), 128);
    }

    #[test]
    fn secrets_are_redacted_before_trimming() {
        assert_eq!(
            text(&trimmed_args(&line("config set masterauth hunter2"))),
            "config set masterauth (redacted)"
        );
        assert_eq!(
            text(&trimmed_args(&line("acl setuser u on >x"))),
            "acl setuser (redacted) (redacted) (redacted)"
        );
    }

    #[test]
    fn newest_first_and_bounded() {
        let log = SlowLog::default();
        for i in 0..5 {
            log.push(
                &line(&format!("ping {i}")),
                1,
                0,
                "a:1".into(),
                Bytes::new(),
                3,
            );
        }
        assert_eq!(log.len(), 3);
        let e = log.newest(10);
        assert_eq!(e.iter().map(|e| e.id).collect::<Vec<_>>(), [4, 3, 2]);
        assert_eq!(text(&e[0].args), "ping 4");
        log.push(&line("ping"), 1, 0, "a:1".into(), Bytes::new(), 0);
        assert!(log.is_empty());
        log.push(&line("ping"), 1, 0, "a:1".into(), Bytes::new(), 1);
        assert_eq!(log.newest(1)[0].id, 6);
        log.reset();
        assert!(log.is_empty());
    }
}
