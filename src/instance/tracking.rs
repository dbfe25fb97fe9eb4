//! Client-side caching (Redis tracking.c): the tracking table of keys → ids of the clients
//! that may cache them, the prefix table of broadcasting (BCAST) clients, and the
//! invalidation messages.
//!
//! The keyspace reports every modified key through its key hook (`engine::shard::KeyHook`),
//! switched on only while some client tracks: otherwise a write pays one relaxed load. The
//! hook runs under the key's shard lock, and a read command remembers its keys before
//! its locks are released (`cmd::execute`), so no write can slip between a read and its
//! registration. Invalidations go to the target connection's [`Pushes`] queue, which the
//! connection writes after the reply of the command it runs: one caused by a write after a
//! read never reaches the client before that read's reply (Redis gets the same from its
//! single thread and its pending-invalidation list).
//!
//! Lock order: a shard, then the table, then the client registry and a client's info,
//! then a push queue. Nothing here touches the keyspace.
//!
//! As in Redis, the table is global across databases, ids of clients that stopped
//! tracking are dropped lazily (when their key is invalidated), and
//! `tracking-table-max-keys` is enforced by invalidating keys, a bounded effort per round
//! (after each read that grows the table, and on the 100 ms cron).

use super::clients::{ClientHandle, Pushes};
use super::pubsub::Push;
use super::state::Shared;
use bytes::Bytes;
use parking_lot::Mutex;
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

/// Tracking is on (CLIENT LIST `t`).
pub const ON: u8 = 1;
/// Broadcasting mode (`B`).
pub const BCAST: u8 = 2;
pub const OPTIN: u8 = 4;
pub const OPTOUT: u8 = 8;
pub const NOLOOP: u8 = 16;
/// The redirection client went away (`R`).
pub const BROKEN: u8 = 32;

thread_local! {
    /// The client whose command this thread runs (Redis's `server.current_client`): NOLOOP
    /// skips its own writes, and BCAST remembers who modified each key. 0: none.
    static CURRENT: Cell<u64> = const { Cell::new(0) };
}

/// Marks this thread as running a command of client `id`; returns the previous mark, for
/// [`leave`].
#[inline]
pub fn enter(id: u64) -> u64 {
    CURRENT.with(|c| c.replace(id))
}

#[inline]
pub fn leave(prev: u64) {
    CURRENT.with(|c| c.set(prev));
}

struct Client {
    handle: Arc<ClientHandle>,
    flags: u8,
    redirect: u64,
    prefixes: BTreeSet<Bytes>,
}

#[derive(Default)]
struct Prefix {
    /// BCAST clients registered for the prefix.
    clients: BTreeSet<u64>,
    /// Keys modified since the last broadcast, each with the client that modified it
    /// last (0: none), for NOLOOP.
    keys: BTreeMap<Bytes, u64>,
}

#[derive(Default)]
struct Table {
    /// Key → ids of the clients that read it (sorted).
    keys: HashMap<Bytes, Vec<u64>, ahash::RandomState>,
    /// Ids across all keys (INFO `tracking_total_items`).
    items: usize,
    prefixes: BTreeMap<Bytes, Prefix>,
    clients: HashMap<u64, Client, ahash::RandomState>,
    /// Eviction rounds in a row that ended still over the limit: each round tries 100
    /// more keys (Redis's `timeout_counter`).
    rounds: usize,
}

#[derive(Default)]
pub struct Tracking {
    table: Mutex<Table>,
    /// Tracking clients (INFO `tracking_clients`); the key hook is on while non-zero.
    clients: AtomicUsize,
    /// The table's key count, for the limit check without the lock.
    keys: AtomicUsize,
    /// Some prefix has keys to broadcast.
    bcast_pending: AtomicBool,
}

/// What CLIENT TRACKINGINFO shows of a client.
pub struct View {
    pub flags: u8,
    pub redirect: u64,
    pub prefixes: Vec<Bytes>,
}

/// The parameter `tracking-table-max-keys`, resolved once.
fn max_keys(srv: &Shared) -> usize {
    static REF: std::sync::OnceLock<Option<crate::config::ParamRef>> = std::sync::OnceLock::new();
    match REF.get_or_init(|| crate::config::lookup("tracking-table-max-keys")) {
        Some(r) => usize::try_from(srv.config.num(*r)).unwrap_or(usize::MAX),
        None => 0,
    }
}

/// What one BCAST prefix costs its client besides its bytes: the `Bytes` handle and the
/// set entries (the client's and the table's).
const PREFIX_ENTRY: usize = 64;

/// Redis's `stringCheckPrefix`: two prefixes overlap when one starts with the other.
fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl Tracking {
    /// Some client tracks (the per-command work is skipped otherwise).
    #[inline]
    pub fn active(&self) -> bool {
        self.clients.load(Ordering::Relaxed) != 0
    }

    /// INFO: tracking clients, keys, items and prefixes.
    pub fn stats(&self) -> (usize, usize, usize, usize) {
        let t = self.table.lock();
        (
            self.clients.load(Ordering::Relaxed),
            t.keys.len(),
            t.items,
            t.prefixes.len(),
        )
    }

    pub fn view(&self, id: u64) -> Option<View> {
        let t = self.table.lock();
        t.clients.get(&id).map(|c| View {
            flags: c.flags,
            redirect: c.redirect,
            prefixes: c.prefixes.iter().cloned().collect(),
        })
    }

    /// Redis's `checkPrefixCollisionsOrReply`: the error text when a new prefix overlaps
    /// one the client has, or a later one of the same call.
    pub fn check_prefixes(&self, id: u64, prefixes: &[Bytes]) -> Result<(), String> {
        let t = self.table.lock();
        let mine = t.clients.get(&id).map(|c| &c.prefixes);
        for (i, p) in prefixes.iter().enumerate() {
            if let Some(old) = mine.and_then(|m| m.iter().find(|o| overlap(o, p))) {
                return Err(format!(
                    "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a \
                     single client must not overlap.",
                    text(p),
                    text(old)
                ));
            }
            if let Some(q) = prefixes[i + 1..].iter().find(|q| overlap(p, q)) {
                return Err(format!(
                    "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for \
                     a single client must not overlap.",
                    text(p),
                    text(q)
                ));
            }
        }
        Ok(())
    }

    /// Redis's `enableTracking` (options already checked): the mode flags are replaced,
    /// BCAST prefixes added to the client's (the empty prefix when none is given).
    pub fn enable(
        &self,
        srv: &Shared,
        handle: &Arc<ClientHandle>,
        redirect: u64,
        flags: u8,
        prefixes: &[Bytes],
    ) {
        let mut t = self.table.lock();
        let id = handle.id;
        let new = !t.clients.contains_key(&id);
        let c = t.clients.entry(id).or_insert_with(|| Client {
            handle: handle.clone(),
            flags: 0,
            redirect: 0,
            prefixes: BTreeSet::new(),
        });
        c.flags = ON | (flags & (BCAST | OPTIN | OPTOUT | NOLOOP));
        c.redirect = redirect;
        let mut added = Vec::new();
        if flags & BCAST != 0 {
            let empty = [Bytes::new()];
            let list = if prefixes.is_empty() {
                &empty[..]
            } else {
                prefixes
            };
            for p in list {
                if c.prefixes.insert(p.clone()) {
                    added.push(p.clone());
                }
            }
            // Client memory (client eviction): each new prefix's bytes and entry.
            let bytes: usize = added.iter().map(|p| p.len() + PREFIX_ENTRY).sum();
            handle
                .mem
                .tracking_prefixes
                .fetch_add(bytes, Ordering::Relaxed);
        }
        {
            let mut info = handle.info.lock();
            info.tracking = c.flags;
            info.redir = redirect;
        }
        for p in added {
            t.prefixes.entry(p).or_default().clients.insert(id);
        }
        if new && self.clients.fetch_add(1, Ordering::Relaxed) == 0 {
            srv.ks.key_hook.switch(true);
        }
    }

    /// Redis's `disableTracking`: the client leaves its prefixes; its ids in the table go
    /// lazily.
    pub fn disable(&self, srv: &Shared, handle: &ClientHandle) {
        let mut t = self.table.lock();
        let Some(c) = t.clients.remove(&handle.id) else {
            return;
        };
        for p in &c.prefixes {
            if let Some(st) = t.prefixes.get_mut(p) {
                st.clients.remove(&handle.id);
                if st.clients.is_empty() {
                    t.prefixes.remove(p);
                }
            }
        }
        {
            let mut info = handle.info.lock();
            info.tracking = 0;
            info.redir = 0;
        }
        handle.mem.tracking_prefixes.store(0, Ordering::Relaxed);
        // Under the table's lock, as in `enable`: the hook's switch follows the count.
        if self.clients.fetch_sub(1, Ordering::Relaxed) == 1 {
            srv.ks.key_hook.switch(false);
        }
        drop(t);
    }

    /// Redis's `trackingRememberKeys`: client `id` may now cache `keys`.
    pub fn remember<'a>(&self, srv: &Shared, id: u64, keys: impl Iterator<Item = &'a [u8]>) {
        let mut t = self.table.lock();
        let t = &mut *t;
        for k in keys {
            if !t.keys.contains_key(k) {
                t.keys.insert(Bytes::copy_from_slice(k), Vec::new());
            }
            let Some(ids) = t.keys.get_mut(k) else {
                continue;
            };
            if let Err(at) = ids.binary_search(&id) {
                ids.insert(at, id);
                t.items += 1;
            }
        }
        self.keys.store(t.keys.len(), Ordering::Relaxed);
        let max = max_keys(srv);
        if max != 0 && t.keys.len() > max {
            self.evict(srv, t, max);
        }
    }

    /// Redis's `trackingInvalidateKey` for a modified key: its trackers are told, and
    /// BCAST prefixes matching it note it for the next broadcast.
    pub fn modified(&self, srv: &Shared, key: &[u8]) {
        let cur = CURRENT.with(|c| c.get());
        let mut t = self.table.lock();
        if !t.prefixes.is_empty() {
            let mut noted = false;
            for (p, st) in t.prefixes.iter_mut() {
                if key.starts_with(p) {
                    st.keys.insert(Bytes::copy_from_slice(key), cur);
                    noted = true;
                }
            }
            if noted {
                self.bcast_pending.store(true, Ordering::Relaxed);
            }
        }
        self.invalidate(srv, &mut t, key, cur);
    }

    /// Tells the clients that read `key` (but `cur` when it is NOLOOP) and forgets it.
    fn invalidate(&self, srv: &Shared, t: &mut Table, key: &[u8], cur: u64) {
        let Some(ids) = t.keys.remove(key) else {
            return;
        };
        t.items -= ids.len();
        self.keys.store(t.keys.len(), Ordering::Relaxed);
        let keys: Arc<[Bytes]> = Arc::from([Bytes::copy_from_slice(key)]);
        for id in ids {
            let Some(c) = t.clients.get_mut(&id) else {
                continue;
            };
            // A client that switched to BCAST gets nothing for keys it read before.
            if c.flags & BCAST != 0 || (c.flags & NOLOOP != 0 && id == cur) {
                continue;
            }
            send(
                srv,
                c,
                Push::Invalidate {
                    keys: Some(keys.clone()),
                },
            );
        }
    }

    /// Redis's `trackingInvalidateKeysOnFlush`: every tracking client gets the null
    /// invalidation ("all keys"), and the table is emptied.
    pub fn flushed(&self, srv: &Shared) {
        if !self.active() && self.keys.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut t = self.table.lock();
        for c in t.clients.values_mut() {
            send(srv, c, Push::Invalidate { keys: None });
        }
        t.keys = HashMap::default();
        t.items = 0;
        self.keys.store(0, Ordering::Relaxed);
    }

    /// Redis's `trackingBroadcastInvalidationMessages`: each prefix's modified keys go to
    /// its BCAST clients in one message (without a NOLOOP client's own keys).
    pub fn broadcast(&self, srv: &Shared) {
        // A load first: this runs after every command while anyone tracks.
        if !self.bcast_pending.load(Ordering::Relaxed)
            || !self.bcast_pending.swap(false, Ordering::Relaxed)
        {
            return;
        }
        let mut t = self.table.lock();
        let Table {
            prefixes, clients, ..
        } = &mut *t;
        for st in prefixes.values_mut() {
            if st.keys.is_empty() {
                continue;
            }
            let keys = std::mem::take(&mut st.keys);
            let all: Arc<[Bytes]> = keys.keys().cloned().collect();
            for id in &st.clients {
                let Some(c) = clients.get_mut(id) else {
                    continue;
                };
                let msg = if c.flags & NOLOOP != 0 {
                    let theirs: Arc<[Bytes]> = keys
                        .iter()
                        .filter(|(_, by)| **by != *id)
                        .map(|(k, _)| k.clone())
                        .collect();
                    if theirs.is_empty() {
                        continue;
                    }
                    theirs
                } else {
                    all.clone()
                };
                send(srv, c, Push::Invalidate { keys: Some(msg) });
            }
        }
    }

    /// The periodic work (Redis's `serverCron` and `beforeSleep` parts): the table limit
    /// and the pending broadcasts.
    pub fn cron(&self, srv: &Shared) {
        if !self.active() {
            return;
        }
        let max = max_keys(srv);
        if max != 0 && self.keys.load(Ordering::Relaxed) > max {
            let mut t = self.table.lock();
            self.evict(srv, &mut t, max);
        }
        self.broadcast(srv);
    }

    /// Redis's `trackingLimitUsedSlots`: invalidates keys (as if modified, not broadcast)
    /// until the table is back to `max`, trying 100 more keys per round that fell short.
    fn evict(&self, srv: &Shared, t: &mut Table, max: usize) {
        if t.keys.len() <= max {
            t.rounds = 0;
            return;
        }
        let effort = 100 * (t.rounds + 1);
        // The map's order is its hash seed's: as good as Redis's random walk.
        let victims: Vec<Bytes> = t.keys.keys().take(effort).cloned().collect();
        for k in victims {
            self.invalidate(srv, t, &k, 0);
            if t.keys.len() <= max {
                t.rounds = 0;
                return;
            }
        }
        t.rounds += 1;
    }
}

/// Redis's `sendTrackingMessage`: to the redirection client if there is one (a RESP3
/// one, or a RESP2 one in Pub/Sub mode), else to the client itself if it speaks RESP3. A
/// redirection to a client gone marks the redirect broken and tells a RESP3 client so.
fn send(srv: &Shared, c: &mut Client, msg: Push) {
    if c.redirect == 0 {
        if c.handle.info.lock().resp == 3 {
            Pushes::push(&c.handle, msg);
        }
        return;
    }
    let Some(to) = srv.clients.get(c.redirect) else {
        c.flags |= BROKEN;
        let resp3 = {
            let mut info = c.handle.info.lock();
            info.tracking = c.flags;
            info.resp == 3
        };
        if resp3 {
            Pushes::push(&c.handle, Push::RedirBroken { id: c.redirect });
        }
        return;
    };
    let ok = {
        let info = to.info.lock();
        info.resp == 3 || info.is_pubsub()
    };
    if ok {
        Pushes::push(&to, msg);
    }
}

/// Routes the keyspace's modified keys to the tracking table. Holds the server weakly:
/// the keyspace lives inside it.
pub fn install(srv: &Arc<Shared>) {
    let weak: Weak<Shared> = Arc::downgrade(srv);
    srv.ks.key_hook.set_listener(Box::new(move |key| {
        if let Some(srv) = weak.upgrade() {
            srv.tracking.modified(&srv, key);
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::config::Config;

    fn shared() -> Shared {
        Shared::new(Config::default(), Clock::manual(), 0)
    }

    /// A registered RESP3 client.
    fn client(srv: &Shared) -> Arc<ClientHandle> {
        let a = "127.0.0.1:1".parse().unwrap();
        let h = srv.clients.register(a, a, 0);
        h.info.lock().resp = 3;
        h
    }

    fn drained(h: &ClientHandle) -> String {
        let mut out = bytes::BytesMut::new();
        Pushes::drain(h, &mut out, true);
        String::from_utf8_lossy(&out).into_owned()
    }

    fn inval(keys: &[&str]) -> String {
        let mut s = format!(">2\r\n$10\r\ninvalidate\r\n*{}\r\n", keys.len());
        for k in keys {
            s += &format!("${}\r\n{k}\r\n", k.len());
        }
        s
    }

    #[test]
    fn readers_are_told_once_and_noloop_skips_the_writer() {
        let srv = shared();
        let t = &srv.tracking;
        let (a, b) = (client(&srv), client(&srv));
        t.enable(&srv, &a, 0, 0, &[]);
        t.enable(&srv, &b, 0, NOLOOP, &[]);
        assert!(t.active());
        t.remember(&srv, a.id, [&b"k"[..], b"j"].into_iter());
        t.remember(&srv, b.id, [&b"k"[..]].into_iter());
        t.remember(&srv, a.id, [&b"k"[..]].into_iter());
        assert_eq!(t.stats(), (2, 2, 3, 0));
        let prev = enter(b.id);
        t.modified(&srv, b"k");
        leave(prev);
        assert_eq!(drained(&a), inval(&["k"]));
        assert_eq!(drained(&b), "", "NOLOOP: its own write");
        // Forgotten once told.
        t.modified(&srv, b"k");
        assert_eq!(drained(&a), "");
        assert_eq!(t.stats(), (2, 1, 1, 0));
        t.flushed(&srv);
        assert_eq!(drained(&a), ">2\r\n$10\r\ninvalidate\r\n_\r\n");
        assert_eq!(drained(&b), ">2\r\n$10\r\ninvalidate\r\n_\r\n");
        assert_eq!(t.stats(), (2, 0, 0, 0));
        t.disable(&srv, &a);
        t.disable(&srv, &b);
        assert!(!t.active());
    }

    #[test]
    fn broadcast_groups_keys_per_prefix() {
        let srv = shared();
        let t = &srv.tracking;
        let a = client(&srv);
        let p = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        t.enable(&srv, &a, 0, BCAST, &[p("a:"), p("b:")]);
        assert!(t.check_prefixes(a.id, &[p("a")]).is_err());
        assert!(t.check_prefixes(a.id, &[p("c"), p("cd")]).is_err());
        assert!(t.check_prefixes(a.id, &[p("c:")]).is_ok());
        for k in ["b:2", "a:1", "c:1", "b:1"] {
            t.modified(&srv, k.as_bytes());
        }
        t.broadcast(&srv);
        assert_eq!(drained(&a), inval(&["a:1"]) + &inval(&["b:1", "b:2"]));
        t.broadcast(&srv);
        assert_eq!(drained(&a), "");
        assert_eq!(t.stats().3, 2);
        t.disable(&srv, &a);
        assert_eq!(t.stats().3, 0);
    }

    #[test]
    fn the_table_limit_invalidates_the_excess() {
        let srv = shared();
        let t = &srv.tracking;
        let a = client(&srv);
        t.enable(&srv, &a, 0, 0, &[]);
        let names: Vec<String> = (0..250).map(|i| format!("k{i}")).collect();
        t.remember(&srv, a.id, names.iter().map(|n| n.as_bytes()));
        srv.config
            .set("tracking-table-max-keys", "1")
            .expect("valid");
        // 100 keys a round, then 200: back to the limit in two rounds.
        t.cron(&srv);
        assert_eq!(t.stats().1, 150);
        t.cron(&srv);
        assert_eq!(t.stats().1, 1);
        let sent = drained(&a);
        assert_eq!(sent.matches("invalidate").count(), 249);
    }

    #[test]
    fn prefixes_overlap_when_one_starts_the_other() {
        assert!(overlap(b"FOO", b"FOOBAR"));
        assert!(overlap(b"FOOBAR", b"FOO"));
        assert!(overlap(b"", b"x"));
        assert!(overlap(b"a", b"a"));
        assert!(!overlap(b"BAR", b"FOO"));
        assert!(!overlap(b"ab", b"ac"));
    }
}
