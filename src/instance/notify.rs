//! Keyspace notifications (Redis notify.c): a write command, or the expiry of a key,
//! publishes `__keyspace@<db>__:<key>` → event and `__keyevent@<db>__:<event>` → key, for the
//! classes enabled in `notify-keyspace-events`.
//!
//! They are off by default, and every command that may emit one pays a single relaxed load
//! of the parsed classes (the config's numeric view) to find out; the channel names are only
//! built when an event is published.
//!
//! Not emitted: `keymiss` (class `m` is accepted and shown, as Redis does, but read misses
//! publish nothing yet) and `evicted` (respite does not evict).

use super::state::Shared;
use crate::config::{params::NOTIFY_KEYSPACE_EVENTS, ParamRef};
use std::sync::{Arc, Weak};

pub use crate::config::kind::{
    N_EXPIRED as EXPIRED, N_GENERIC as GENERIC, N_HASH as HASH, N_KEYEVENT as KEYEVENT,
    N_KEYSPACE as KEYSPACE, N_LIST as LIST, N_NEW as NEW, N_SET as SET, N_STREAM as STREAM,
    N_STRING as STRING, N_ZSET as ZSET,
};

const REF: ParamRef = ParamRef {
    index: NOTIFY_KEYSPACE_EVENTS,
    alias: false,
};

/// Where events go: the server's pub/sub, or a recorder in tests.
pub trait Sink {
    fn publish(&self, channel: &[u8], message: &[u8]);
}

impl Sink for Shared {
    fn publish(&self, channel: &[u8], message: &[u8]) {
        self.pubsub.publish(channel, message);
    }
}

/// The enabled classes (`KEYSPACE`/`KEYEVENT` plus event classes): one relaxed load.
#[inline]
pub fn flags(srv: &Shared) -> u32 {
    srv.config.num(REF) as u32
}

/// Publishes one event if its class is enabled (notify.c `notifyKeyspaceEvent`).
#[inline]
pub fn notify(srv: &Shared, class: u32, event: &str, db: usize, key: &[u8]) {
    let flags = flags(srv);
    if flags & class != 0 {
        emit(srv, flags, event, db, key);
    }
}

/// The classes read once, for commands that may emit several events (a created key's `new`,
/// then the command's own, then `del` when a collection empties): one load for all of them.
#[derive(Clone, Copy)]
pub struct Events<'a> {
    srv: &'a Shared,
    flags: u32,
    db: usize,
}

/// The classes read once for a command on `db`; None when every class is off.
#[inline]
pub fn events(srv: &Shared, db: usize) -> Option<Events<'_>> {
    let flags = flags(srv);
    (flags != 0).then_some(Events { srv, flags, db })
}

impl Events<'_> {
    pub fn emit(&self, class: u32, event: &str, key: &[u8]) {
        self.emit_in(class, event, self.db, key);
    }

    /// `new` for a key the command just created (Redis emits it from `dbAdd`, before the
    /// command's own event).
    pub fn created(&self, created: bool, key: &[u8]) {
        if created {
            self.emit(NEW, "new", key);
        }
    }

    pub fn emit_in(&self, class: u32, event: &str, db: usize, key: &[u8]) {
        if self.flags & class != 0 {
            emit(self.srv, self.flags, event, db, key);
        }
    }
}

/// Publishes to the keyspace and/or keyevent channel (the class is known to be enabled).
#[cold]
pub fn emit<S: Sink + ?Sized>(sink: &S, flags: u32, event: &str, db: usize, key: &[u8]) {
    if flags & KEYSPACE != 0 {
        sink.publish(&channel(b"__keyspace@", db, key), event.as_bytes());
    }
    if flags & KEYEVENT != 0 {
        sink.publish(&channel(b"__keyevent@", db, event.as_bytes()), key);
    }
}

fn channel(prefix: &[u8], db: usize, tail: &[u8]) -> Vec<u8> {
    let db = db.to_string();
    let mut c = Vec::with_capacity(prefix.len() + db.len() + 3 + tail.len());
    c.extend_from_slice(prefix);
    c.extend_from_slice(db.as_bytes());
    c.extend_from_slice(b"__:");
    c.extend_from_slice(tail);
    c
}

/// Routes keys removed by expiry (lazy or active, see `Keyspace::set_expiry_listener`) to
/// `expired` events. Holds the server weakly: the keyspace lives inside it.
pub fn install(srv: &Arc<Shared>) {
    let weak: Weak<Shared> = Arc::downgrade(srv);
    srv.ks.set_expiry_listener(Box::new(move |db, key| {
        if let Some(srv) = weak.upgrade() {
            notify(&srv, EXPIRED, "expired", db, key);
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::kind::N_ALL;
    use std::cell::RefCell;

    #[derive(Default)]
    struct Recorder(RefCell<Vec<(String, String)>>);

    impl Sink for Recorder {
        fn publish(&self, channel: &[u8], message: &[u8]) {
            self.0.borrow_mut().push((
                String::from_utf8_lossy(channel).into_owned(),
                String::from_utf8_lossy(message).into_owned(),
            ));
        }
    }

    fn pairs(r: &Recorder) -> Vec<(String, String)> {
        r.0.take()
    }

    fn p(c: &str, m: &str) -> (String, String) {
        (c.to_string(), m.to_string())
    }

    #[test]
    fn keyspace_and_keyevent_channels() {
        let r = Recorder::default();
        emit(&r, KEYSPACE | KEYEVENT | N_ALL, "set", 0, b"k");
        assert_eq!(
            pairs(&r),
            vec![p("__keyspace@0__:k", "set"), p("__keyevent@0__:set", "k")]
        );
        emit(&r, KEYEVENT | LIST, "lpush", 12, b"a b");
        assert_eq!(pairs(&r), vec![p("__keyevent@12__:lpush", "a b")]);
        emit(&r, KEYSPACE | LIST, "lpush", 3, b"");
        assert_eq!(pairs(&r), vec![p("__keyspace@3__:", "lpush")]);
        // A class without K or E publishes nothing.
        emit(&r, LIST, "lpush", 0, b"k");
        assert!(pairs(&r).is_empty());
    }

    #[test]
    fn classes_gate_events_through_the_config() {
        use crate::clock::Clock;
        use crate::config::Config;
        let srv = Shared::new(Config::default(), Clock::manual());
        assert_eq!(flags(&srv), 0);
        srv.config
            .set("notify-keyspace-events", "KEAn")
            .expect("valid");
        // `n` survives although CONFIG GET shows `AKE`.
        assert_eq!(
            srv.config.get("notify-keyspace-events").as_deref(),
            Some("AKE")
        );
        assert_eq!(flags(&srv), KEYSPACE | KEYEVENT | N_ALL | NEW);
        srv.config
            .set("notify-keyspace-events", "El")
            .expect("valid");
        assert_eq!(flags(&srv), KEYEVENT | LIST);
        assert!(srv.config.set("notify-keyspace-events", "Elq").is_err());
        assert_eq!(flags(&srv), KEYEVENT | LIST);
        srv.config.set("notify-keyspace-events", "").expect("valid");
        assert_eq!(flags(&srv), 0);
        assert!(events(&srv, 0).is_none());
    }
}

#[cfg(test)]
mod command_tests {
    use crate::cmd::testing::Client;
    use crate::instance::pubsub::{Kind, Push, Subscriber};
    use crate::protocol::Reply;
    use bytes::Bytes;
    use std::sync::Arc;

    /// A client of an in-process server plus a pattern subscriber to every notification.
    pub struct Watch {
        pub c: Client,
        sub: Arc<Subscriber>,
    }

    impl Watch {
        pub fn new(classes: &str) -> Watch {
            let srv = Arc::new(crate::instance::state::Shared::new(
                crate::config::Config::default(),
                crate::clock::Clock::manual(),
            ));
            super::install(&srv);
            let mut c = Client::on(srv);
            let sub = Subscriber::new(c.sess.handle.clone());
            c.srv
                .pubsub
                .subscribe(Kind::Pattern, &Bytes::from_static(b"__key*__:*"), &sub);
            let r = c.run(&[
                b"CONFIG",
                b"SET",
                b"notify-keyspace-events",
                classes.as_bytes(),
            ]);
            assert_eq!(r, Reply::OK);
            Watch { c, sub }
        }

        /// Runs a line (single-space separated; `""` is an empty argument).
        pub fn run(&mut self, line: &str) -> Reply {
            let args: Vec<&[u8]> = line
                .split(' ')
                .map(|a| if a == "\"\"" { &b""[..] } else { a.as_bytes() })
                .collect();
            self.c.run(&args)
        }

        /// Events received since the last call, as `channel payload` lines.
        pub fn events(&self) -> Vec<String> {
            let mut out = Vec::new();
            self.sub.drain_into(&mut out);
            out.into_iter()
                .filter_map(|p| match p {
                    Push::PMessage {
                        channel, payload, ..
                    } => Some(format!(
                        "{}\t{}",
                        String::from_utf8_lossy(&channel),
                        String::from_utf8_lossy(&payload)
                    )),
                    _ => None,
                })
                .collect()
        }
    }

    /// `event key` for each keyevent message (keyspace ones checked separately).
    fn short(w: &Watch) -> Vec<String> {
        w.events()
            .into_iter()
            .filter_map(|l| {
                let (ch, key) = l.split_once('\t')?;
                let ev = ch.strip_prefix("__keyevent@")?;
                let (db, ev) = ev.split_once("__:")?;
                Some(if db == "0" {
                    format!("{ev} {key}")
                } else {
                    format!("{ev}@{db} {key}")
                })
            })
            .collect()
    }

    /// Runs each line, then checks the events they produced together.
    fn check(w: &mut Watch, lines: &[&str], want: &[&str]) {
        for l in lines {
            w.run(l);
        }
        assert_eq!(short(w), want, "{lines:?}");
    }

    #[test]
    fn generic_and_string_events() {
        let mut w = Watch::new("EA");
        check(
            &mut w,
            &["SET k v", "SET k v EX 10"],
            &["set k", "set k", "expire k"],
        );
        check(
            &mut w,
            &["EXPIRE k 100", "PERSIST k", "PERSIST k"],
            &["expire k", "persist k"],
        );
        check(&mut w, &["DEL k nokey"], &["del k"]);
        check(
            &mut w,
            &["SET a 1", "RENAME a b"],
            &["set a", "rename_from a", "rename_to b"],
        );
        check(
            &mut w,
            &["COPY b c", "MOVE c 3"],
            &["copy_to c", "move_from c", "move_to@3 c"],
        );
        check(
            &mut w,
            &["INCR n", "INCRBYFLOAT n 1.5", "APPEND n x"],
            &["incrby n", "incrbyfloat n", "append n"],
        );
        check(
            &mut w,
            &["SETRANGE n 0 y", "SETRANGE n 0 \"\""],
            &["setrange n"],
        );
        check(&mut w, &["EXPIRE n -1", "GETDEL b"], &["del n", "del b"]);
        check(
            &mut w,
            &["MSET x 1 y 2", "MSETNX x 1 z 2"],
            &["set x", "set y"],
        );
    }

    #[test]
    fn new_class_and_disabled_classes() {
        let mut w = Watch::new("E$n");
        check(
            &mut w,
            &["SET k v", "SET k w", "LPUSH l a"],
            &["new k", "set k", "set k", "new l"],
        );
        // `A` hides `n` in CONFIG GET but keeps it.
        let mut w = Watch::new("EAn");
        check(
            &mut w,
            &["HSET h f v", "HSET h f w"],
            &["new h", "hset h", "hset h"],
        );
        let mut w = Watch::new("Elz");
        check(
            &mut w,
            &["SET k v", "HSET h f v", "SADD s a", "EXPIRE k 10"],
            &[],
        );
        // Without K or E nothing is published, whatever the classes.
        let mut w = Watch::new("A");
        w.run("SET k v");
        assert!(w.events().is_empty());
        let mut w = Watch::new("");
        w.run("SET k v");
        assert!(w.events().is_empty());
    }

    #[test]
    fn keyspace_channel_carries_the_event() {
        let mut w = Watch::new("K$");
        w.run("SET k v");
        w.c.run(&[b"SELECT", b"5"]);
        w.run("INCR n");
        assert_eq!(
            w.events(),
            vec!["__keyspace@0__:k\tset", "__keyspace@5__:n\tincrby"]
        );
    }

    #[test]
    fn collection_events() {
        let mut w = Watch::new("EA");
        check(
            &mut w,
            &["RPUSH l a b", "LPOP l", "RPOP l"],
            &["rpush l", "lpop l", "rpop l", "del l"],
        );
        check(
            &mut w,
            &["RPUSH l a", "LMOVE l m LEFT RIGHT"],
            &["rpush l", "rpush m", "lpop l", "del l"],
        );
        check(
            &mut w,
            &["HSET h a 1 b 2", "HDEL h a b"],
            &["hset h", "hdel h", "del h"],
        );
        check(
            &mut w,
            &["SADD s a", "SMOVE s t a"],
            &["sadd s", "srem s", "del s", "sadd t"],
        );
        check(
            &mut w,
            &["ZADD z 1 a", "ZINCRBY z 1 a", "ZPOPMIN z"],
            &["zadd z", "zincr z", "zpopmin z", "del z"],
        );
        check(
            &mut w,
            &["SADD x 1", "SUNIONSTORE d x", "SINTERSTORE d x nokey"],
            &["sadd x", "sunionstore d", "del d"],
        );
    }

    #[test]
    fn transactions_emit_per_command() {
        let mut w = Watch::new("EA");
        check(
            &mut w,
            &["MULTI", "SET a 1", "LPUSH l x", "EXEC"],
            &["set a", "lpush l"],
        );
    }

    #[test]
    fn expired_from_lazy_and_active_expiry() {
        let mut w = Watch::new("Ex");
        w.run("SET a v PX 10");
        w.run("SET b v PX 10");
        w.c.srv.clock.advance_ms(11);
        // Lazy: on access.
        w.run("GET a");
        assert_eq!(short(&w), vec!["expired a"]);
        // Active: the sweep.
        let now = w.c.srv.clock.now_ms();
        w.c.srv.ks.sweep(now, usize::MAX);
        assert_eq!(short(&w), vec!["expired b"]);
        // Disabled class: nothing.
        let mut w = Watch::new("El");
        w.run("SET a v PX 10");
        w.c.srv.clock.advance_ms(11);
        w.run("GET a");
        assert!(w.events().is_empty());
    }
}
