//! MONITOR: the clients that watch every command, and the fan-out of each command line to
//! them (Redis's `replicationFeedMonitors`).
//!
//! With no monitor, a command pays one relaxed load ([`Monitors::active`]). With monitors,
//! the line is formatted once (`+<unix>.<usec> [<db> <addr>] "arg" ...`, arguments quoted
//! as `sdscatrepr` quotes them, secrets redacted) and appended to each monitor's outbox,
//! whose connection task writes it. A monitor that does not read is held to the `normal`
//! class of `client-output-buffer-limit` (a MONITOR client is of type normal in Redis), and,
//! since that class is unlimited by default, to [`FALLBACK_HARD_LIMIT`] as well: a slow
//! monitor cannot grow the server's memory without bound.

use super::clients::ClientHandle;
use super::cmdlog::{redacted, REDACTED};
use super::obuf::{LimitCell, Limits};
use bytes::{Bytes, BytesMut};
use parking_lot::{Mutex, RwLock};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Notify;

/// The most a monitor's unwritten lines may hold when the `normal` class sets no hard
/// limit (Redis's default `0 0 0`): past it the monitor is closed, as one over a configured
/// limit would be.
pub const FALLBACK_HARD_LIMIT: u64 = 256 * 1024 * 1024;

/// Where a fed command came from, as the line's `[db addr]` shows it.
#[derive(Debug, Clone, Copy)]
pub enum Origin {
    /// A client connection: its peer address (`ip:port`, IPv6 as `[ip]:port`).
    Client(SocketAddr),
    /// A command a script or function called (`redis.call`): `lua`.
    Lua,
}

/// The `client-output-buffer-limit` class a monitor is held to: Redis counts a MONITOR
/// client as type normal.
const CLASS: &str = "normal";

#[derive(Default)]
struct Outbox {
    lines: VecDeque<Bytes>,
    bytes: usize,
    /// When the backlog first went over the soft limit (reset when it drops below).
    soft_since: Option<Instant>,
    /// Closed for exceeding the limit: nothing more is queued.
    closed: bool,
}

/// One monitoring client: its unwritten lines and the wake-up of its connection task.
pub struct Monitor {
    pub handle: Arc<ClientHandle>,
    outbox: Mutex<Outbox>,
    notify: Notify,
}

impl Monitor {
    fn new(handle: Arc<ClientHandle>) -> Monitor {
        Monitor {
            handle,
            outbox: Mutex::new(Outbox::default()),
            notify: Notify::new(),
        }
    }

    /// Queues a line; a monitor over its limit is closed (backlog freed, client killed).
    fn push(&self, line: &Bytes, limits: Limits) {
        let mut o = self.outbox.lock();
        if o.closed {
            return;
        }
        o.bytes += line.len();
        o.lines.push_back(line.clone());
        // What the connection already took and has not written counts too (Redis's
        // output buffer holds both).
        let held = (o.bytes + self.handle.mem.out_pending.load(Ordering::Relaxed)) as u64;
        let hard = if limits.hard == 0 {
            FALLBACK_HARD_LIMIT
        } else {
            limits.hard
        };
        if limits.exceeded(held, hard, &mut o.soft_since) {
            o.closed = true;
            o.lines = VecDeque::new();
            o.bytes = 0;
            self.report(&o);
            drop(o);
            tracing::warn!(
                "Client id={} scheduled to be closed ASAP for overcoming of output buffer limits.",
                self.handle.id
            );
            self.handle.kill();
            return;
        }
        self.report(&o);
        drop(o);
        self.notify.notify_one();
    }

    /// Mirrors the backlog into the client's memory figures (CLIENT LIST `oll`/`omem`).
    fn report(&self, o: &Outbox) {
        let m = &self.handle.mem;
        m.monitor_lines.store(o.lines.len(), Ordering::Relaxed);
        m.monitor_bytes.store(o.bytes, Ordering::Relaxed);
    }

    /// Appends every queued line to `out`, in order.
    pub fn drain(&self, out: &mut BytesMut) {
        let mut o = self.outbox.lock();
        if o.lines.is_empty() {
            return;
        }
        out.reserve(o.bytes);
        for l in o.lines.drain(..) {
            out.extend_from_slice(&l);
        }
        o.bytes = 0;
        self.report(&o);
    }

    /// Resolves when a line was queued since the last wake-up (a stored permit makes a
    /// line queued between two waits wake the next one at once).
    pub async fn wait(&self) {
        self.notify.notified().await;
    }
}

/// The server's monitors.
#[derive(Default)]
pub struct Monitors {
    /// How many are registered: the only thing a command reads when there are none.
    count: AtomicUsize,
    list: RwLock<Vec<Arc<Monitor>>>,
    /// The `normal` class of `client-output-buffer-limit`, refreshed by MONITOR.
    limits: LimitCell,
}

impl Monitors {
    /// Any monitor registered (one relaxed load: the per-command cost without monitors).
    #[inline]
    pub fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) != 0
    }

    /// Registers a client as a monitor.
    pub fn add(&self, handle: Arc<ClientHandle>) -> Arc<Monitor> {
        handle.info.lock().monitor = true;
        let m = Arc::new(Monitor::new(handle));
        let mut list = self.list.write();
        list.push(m.clone());
        self.count.store(list.len(), Ordering::Relaxed);
        m
    }

    /// Unregisters a monitor (RESET, or its connection closing).
    pub fn remove(&self, m: &Arc<Monitor>) {
        let mut list = self.list.write();
        list.retain(|x| !Arc::ptr_eq(x, m));
        self.count.store(list.len(), Ordering::Relaxed);
        drop(list);
        m.handle.info.lock().monitor = false;
        let mem = &m.handle.mem;
        mem.monitor_lines.store(0, Ordering::Relaxed);
        mem.monitor_bytes.store(0, Ordering::Relaxed);
    }

    pub fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Re-reads the `normal` class of `client-output-buffer-limit` (CONFIG SET may have
    /// changed it since MONITOR).
    pub fn refresh_limits(&self, config: &crate::config::ConfigStore) {
        self.limits.refresh(config, CLASS);
    }

    /// Sends one command line to every monitor, stamped with the current time.
    pub fn feed(&self, db: usize, from: Origin, args: &[Bytes]) {
        if !self.active() {
            return;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let line = Bytes::from(format_line(
            now.as_secs(),
            now.subsec_micros(),
            db,
            from,
            args,
        ));
        let limits = self.limits.get();
        let list = self.list.read();
        for m in list.iter() {
            m.push(&line, limits);
        }
    }
}

/// One monitor line: `+<secs>.<usecs> [<db> <addr>] "arg" "arg"\r\n` (a simple string in
/// either protocol, as Redis writes it), secret arguments shown as `"(redacted)"`.
pub fn format_line(secs: u64, usecs: u32, db: usize, from: Origin, args: &[Bytes]) -> Vec<u8> {
    use std::io::Write;
    let size: usize = args.iter().map(|a| a.len() + 3).sum();
    let mut s = Vec::with_capacity(48 + size);
    let _ = write!(s, "+{secs}.{usecs:06} [{db} ");
    match from {
        Origin::Client(addr) => {
            let _ = write!(s, "{addr}] ");
        }
        Origin::Lua => s.extend_from_slice(b"lua] "),
    }
    let hide = redacted(args);
    for (i, (a, h)) in args.iter().zip(hide).enumerate() {
        if i > 0 {
            s.push(b' ');
        }
        repr_into(&mut s, if h { REDACTED } else { a });
    }
    s.extend_from_slice(b"\r\n");
    s
}

/// Appends `b` quoted as Redis's `sdscatrepr` quotes it: `\\ \" \n \r \t \a \b` escaped,
/// other bytes outside printable ASCII as `\xhh`.
pub fn repr_into(s: &mut Vec<u8>, b: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    s.push(b'"');
    for &c in b {
        match c {
            b'\\' => s.extend_from_slice(b"\\\\"),
            b'"' => s.extend_from_slice(b"\\\""),
            b'\n' => s.extend_from_slice(b"\\n"),
            b'\r' => s.extend_from_slice(b"\\r"),
            b'\t' => s.extend_from_slice(b"\\t"),
            7 => s.extend_from_slice(b"\\a"),
            8 => s.extend_from_slice(b"\\b"),
            b' '..=b'~' => s.push(c),
            c => {
                s.extend_from_slice(&[b'\\', b'x', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]])
            }
        }
    }
    s.push(b'"');
}

/// [`repr_into`] as a string (log lines).
pub fn repr(b: &[u8]) -> String {
    let mut s = Vec::with_capacity(b.len() + 2);
    repr_into(&mut s, b);
    String::from_utf8_lossy(&s).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&'static str]) -> Vec<Bytes> {
        a.iter().map(|s| Bytes::from_static(s.as_bytes())).collect()
    }

    #[test]
    fn lines_quote_and_redact_as_redis() {
        let addr: SocketAddr = "127.0.0.1:5555".parse().unwrap();
        let l = format_line(
            1700000000,
            42,
            0,
            Origin::Client(addr),
            &args(&["set", "k\"ey", "a b\r\n\x01\u{7f}"]),
        );
        assert_eq!(
            String::from_utf8(l).unwrap(),
            "+1700000000.000042 [0 127.0.0.1:5555] \"set\" \"k\\\"ey\" \"a b\\r\\n\\x01\\x7f\"\r\n"
        );
        let l = format_line(5, 999999, 3, Origin::Lua, &args(&["auth", "user", "pw"]));
        assert_eq!(
            String::from_utf8(l).unwrap(),
            "+5.999999 [3 lua] \"auth\" \"(redacted)\" \"(redacted)\"\r\n"
        );
        let v6: SocketAddr = "[::1]:7000".parse().unwrap();
        let l = format_line(1, 0, 0, Origin::Client(v6), &args(&["ping"]));
        assert_eq!(
            String::from_utf8(l).unwrap(),
            "+1.000000 [0 [::1]:7000] \"ping\"\r\n"
        );
    }

    #[test]
    fn a_monitor_that_does_not_read_is_closed_at_its_limit() {
        let now = 0;
        let h = super::super::clients::Clients::detached(now);
        let ms = Monitors::default();
        ms.limits.set(Limits {
            hard: 1000,
            soft: 0,
            soft_secs: 0,
        });
        let m = ms.add(h.clone());
        assert!(ms.active());
        let big = Bytes::from(vec![b'x'; 300]);
        for _ in 0..3 {
            ms.feed(0, Origin::Lua, std::slice::from_ref(&big));
            assert!(!h.is_killed());
        }
        assert!(h.mem.monitor_bytes.load(Ordering::Relaxed) > 900);
        ms.feed(0, Origin::Lua, std::slice::from_ref(&big));
        assert!(h.is_killed());
        assert_eq!(h.mem.monitor_bytes.load(Ordering::Relaxed), 0);
        let mut out = BytesMut::new();
        m.drain(&mut out);
        assert!(out.is_empty());
        ms.remove(&m);
        assert!(!ms.active());
        assert!(!h.info.lock().monitor);
    }
}
