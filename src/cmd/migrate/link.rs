//! MIGRATE's connections to target instances (Redis `migrateGetSocket`, `migrateCloseSocket`,
//! `migrateCloseTimedoutSockets`): blocking sockets with Redis's per-step timeouts, and a
//! cache of one connection per `host:port` per server, at most 64, each closed once unused
//! for more than 10 seconds.
//!
//! The cache is process-wide but keyed by the owning server (a weak reference), so several
//! in-process servers keep apart and a stopped server's connections close with it. It is
//! locked only to take a connection out or put it back, never across network I/O: a
//! connection in use stays listed (INFO counts it) but is marked taken, and a concurrent
//! MIGRATE to the same target opens a one-off connection instead of waiting.

use parking_lot::Mutex;
use std::any::Any;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// Redis `MIGRATE_SOCKET_CACHE_ITEMS`.
const CACHE_ITEMS: usize = 64;
/// Redis `MIGRATE_SOCKET_CACHE_TTL`: closed when unused for longer than this.
const CACHE_TTL: Duration = Duration::from_secs(10);
/// How often idle connections are looked for (Redis: every serverCron second).
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// Redis writes the request in chunks of this size, each within the timeout.
const WRITE_CHUNK: usize = 64 * 1024;
/// Redis reads each reply line into a 1024-byte buffer (so at most 1023 bytes of it).
const LINE_MAX: usize = 1023;

/// `connect` on a non-blocking socket that is still shaking hands.
#[cfg(target_os = "linux")]
const EINPROGRESS: i32 = 115;
#[cfg(not(target_os = "linux"))]
const EINPROGRESS: i32 = 36;

/// How an exchange with the target broke. Redis retries once on a fresh connection unless
/// the failure was a timeout (`errno == ETIMEDOUT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fail {
    Timeout,
    Broken,
}

fn fail_of(e: &io::Error) -> Fail {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Fail::Timeout,
        _ => Fail::Broken,
    }
}

/// A connection to a target, with the bytes read past the last reply line.
pub struct Conn {
    stream: TcpStream,
    pending: Vec<u8>,
    /// The db the target has selected for us (-1: unknown, send SELECT).
    pub last_dbid: i64,
    last_use: Instant,
}

/// `timeout` from now; a timeout too large for the clock waits without end.
fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .or_else(|| now.checked_add(Duration::from_secs(u32::MAX.into())))
        .unwrap_or(now)
}

impl Conn {
    /// Starts a connection the way Redis's `connBlockingConnect` does: the first resolved
    /// address whose non-blocking `connect` does not fail at once is taken, and the outcome
    /// of the handshake is left to the first write (Redis waits for writability but goes on
    /// either way). So only an unresolvable host or an immediate failure gives None ("error
    /// connecting"); a refused or silent port fails the write (an error, retried once, or a
    /// timeout). Redis turns the port argument into a number with `atoi` and hands its
    /// decimal text to `getaddrinfo`, which keeps the low 16 bits; the same happens here.
    pub fn connect(host: &[u8], port: &[u8]) -> Option<Conn> {
        use socket2::{Domain, Socket, Type};
        let host = std::str::from_utf8(host).ok()?;
        let port = super::super::args::atoi(port) as u16;
        let addrs = (host, port).to_socket_addrs().ok()?;
        for addr in addrs {
            let Ok(sock) = Socket::new(Domain::for_address(addr), Type::STREAM, None) else {
                continue;
            };
            if sock.set_nonblocking(true).is_err() {
                continue;
            }
            match sock.connect(&addr.into()) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(EINPROGRESS) => {}
                Err(_) => continue,
            }
            if sock.set_nonblocking(false).is_err() {
                continue;
            }
            let stream: TcpStream = sock.into();
            let _ = stream.set_nodelay(true);
            return Some(Conn {
                stream,
                pending: Vec::new(),
                last_dbid: -1,
                last_use: Instant::now(),
            });
        }
        None
    }

    /// Sends `data` in 64 KiB chunks, each of which must be written within `timeout`.
    pub fn send(&mut self, data: &[u8], timeout: Duration) -> Result<(), Fail> {
        for chunk in data.chunks(WRITE_CHUNK) {
            let deadline = deadline_after(timeout);
            let mut rest = chunk;
            while !rest.is_empty() {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(Fail::Timeout);
                }
                self.stream
                    .set_write_timeout(Some(left))
                    .map_err(|e| fail_of(&e))?;
                match self.stream.write(rest) {
                    Ok(0) => return Err(Fail::Broken),
                    Ok(n) => rest = &rest[n..],
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(fail_of(&e)),
                }
            }
        }
        Ok(())
    }

    /// Reads one reply line (Redis `connSyncReadLine` into a 1024-byte buffer): the bytes
    /// before `\n` without a final `\r`, or the first 1023 bytes of a longer line (the rest
    /// is then read as the next line, as in Redis). The whole line must arrive within
    /// `timeout` (Redis allows `timeout` per byte; a target that trickles bytes gets no
    /// longer here than one that sends nothing). An empty line counts as a failure, as
    /// Redis's `<= 0` test makes it.
    pub fn read_line(&mut self, timeout: Duration) -> Result<Vec<u8>, Fail> {
        let deadline = deadline_after(timeout);
        loop {
            let scan = self.pending.len().min(LINE_MAX);
            if let Some(nl) = self.pending[..scan].iter().position(|&c| c == b'\n') {
                let mut line: Vec<u8> = self.pending.drain(..=nl).collect();
                line.pop();
                if line.is_empty() {
                    return Err(Fail::Broken);
                }
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok(line);
            }
            if self.pending.len() >= LINE_MAX {
                return Ok(self.pending.drain(..LINE_MAX).collect());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Fail::Timeout);
            }
            self.stream
                .set_read_timeout(Some(left))
                .map_err(|e| fail_of(&e))?;
            let mut buf = [0u8; 1024];
            match self.stream.read(&mut buf) {
                Ok(0) => return Err(Fail::Broken),
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(fail_of(&e)),
            }
        }
    }
}

/// One server's cached connections by `host:port`; `None` while a MIGRATE has it out.
type Pool = HashMap<Vec<u8>, Option<Conn>>;

struct Cache {
    pools: Vec<(Weak<dyn Any + Send + Sync>, Pool)>,
    sweeping: bool,
}

static CACHE: Mutex<Cache> = parking_lot::const_mutex(Cache {
    pools: Vec::new(),
    sweeping: false,
});

fn same_owner(w: &Weak<dyn Any + Send + Sync>, owner: *const ()) -> bool {
    w.strong_count() > 0 && w.as_ptr() as *const () == owner
}

fn pool_mut(cache: &mut Cache, owner: *const ()) -> Option<&mut Pool> {
    cache
        .pools
        .iter_mut()
        .find(|(w, _)| same_owner(w, owner))
        .map(|(_, p)| p)
}

/// The cache key, as Redis builds it: the host and port arguments as given.
fn name(host: &[u8], port: &[u8]) -> Vec<u8> {
    let mut n = Vec::with_capacity(host.len() + 1 + port.len());
    n.extend_from_slice(host);
    n.push(b':');
    n.extend_from_slice(port);
    n
}

/// A connection taken for one MIGRATE: the cached one (or a new one now cached), or a
/// one-off when another MIGRATE is using the cached one.
pub struct Taken {
    pub conn: Conn,
    name: Vec<u8>,
    cached: bool,
}

/// Takes the cached connection to `host:port` of `owner`'s cache, or connects (and caches
/// the new connection, dropping a random one when 64 are cached). None when no connection
/// could be started.
pub fn take<T: Any + Send + Sync>(owner: &Arc<T>, host: &[u8], port: &[u8]) -> Option<Taken> {
    let key = name(host, port);
    let me = Arc::as_ptr(owner) as *const ();
    let busy = {
        let mut cache = CACHE.lock();
        match pool_mut(&mut cache, me).and_then(|p| p.get_mut(&key)) {
            Some(slot @ Some(_)) => {
                let mut conn = slot.take().expect("checked");
                conn.last_use = Instant::now();
                return Some(Taken {
                    conn,
                    name: key,
                    cached: true,
                });
            }
            Some(None) => true,
            None => false,
        }
    };
    let conn = Conn::connect(host, port)?;
    if busy {
        return Some(Taken {
            conn,
            name: key,
            cached: false,
        });
    }
    let mut cache = CACHE.lock();
    let cache = &mut *cache;
    cache.pools.retain(|(w, _)| w.strong_count() > 0);
    if pool_mut(cache, me).is_none() {
        let any: Arc<dyn Any + Send + Sync> = owner.clone();
        cache.pools.push((Arc::downgrade(&any), Pool::new()));
    }
    let pool = pool_mut(cache, me).expect("just added");
    if pool.contains_key(&key) {
        // Another MIGRATE cached one while this one connected.
        return Some(Taken {
            conn,
            name: key,
            cached: false,
        });
    }
    if pool.len() >= CACHE_ITEMS {
        use rand::seq::IteratorRandom;
        if let Some(victim) = pool.keys().choose(&mut rand::thread_rng()).cloned() {
            pool.remove(&victim);
        }
    }
    pool.insert(key.clone(), None);
    if !cache.sweeping {
        cache.sweeping = true;
        let started = std::thread::Builder::new()
            .name("respite-migrate-sweep".into())
            .spawn(sweep);
        if started.is_err() {
            cache.sweeping = false;
        }
    }
    Some(Taken {
        conn,
        name: key,
        cached: true,
    })
}

/// Puts a connection back after a MIGRATE that left it usable.
pub fn give_back<T: Any + Send + Sync>(owner: &Arc<T>, taken: Taken) {
    if !taken.cached {
        return;
    }
    let mut cache = CACHE.lock();
    if let Some(slot) = pool_mut(&mut cache, Arc::as_ptr(owner) as *const ())
        .and_then(|p| p.get_mut(&taken.name))
        .filter(|s| s.is_none())
    {
        *slot = Some(taken.conn);
    }
}

/// Closes a connection after a socket error (Redis `migrateCloseSocket`): the next MIGRATE
/// to that target connects afresh.
pub fn close<T: Any + Send + Sync>(owner: &Arc<T>, taken: Taken) {
    if !taken.cached {
        return;
    }
    let mut cache = CACHE.lock();
    if let Some(pool) = pool_mut(&mut cache, Arc::as_ptr(owner) as *const ()) {
        if matches!(pool.get(&taken.name), Some(None)) {
            pool.remove(&taken.name);
        }
    }
}

/// INFO's `migrate_cached_sockets` for the server at `owner`.
pub fn count<T>(owner: &T) -> usize {
    let me = owner as *const T as *const ();
    let mut cache = CACHE.lock();
    pool_mut(&mut cache, me).map_or(0, |p| p.len())
}

/// The sweeper's loop: closes connections unused for more than 10 s and forgets stopped
/// servers; ends once nothing is cached (the next cached connection starts it again).
fn sweep() {
    loop {
        std::thread::sleep(SWEEP_EVERY);
        let mut cache = CACHE.lock();
        cache.pools.retain(|(w, _)| w.strong_count() > 0);
        for (_, pool) in cache.pools.iter_mut() {
            pool.retain(|_, slot| {
                slot.as_ref()
                    .is_none_or(|c| c.last_use.elapsed() <= CACHE_TTL)
            });
        }
        cache.pools.retain(|(_, p)| !p.is_empty());
        if cache.pools.is_empty() {
            cache.sweeping = false;
            return;
        }
    }
}
