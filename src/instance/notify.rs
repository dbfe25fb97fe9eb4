//! Keyspace notifications (Redis notify.c): a write command, or the expiry of a key,
//! publishes `__keyspace@<db>__:<key>` → event and `__keyevent@<db>__:<event>` → key, for the
//! classes enabled in `notify-keyspace-events`.
//!
//! They are off by default, and every command that may emit one pays a single relaxed load
//! of the parsed classes (the config's numeric view) to find out; the channel names are only
//! built when an event is published.
//!
//! Not emitted: `keymiss` (class `m` is accepted and shown, as Redis does, but read misses
//! publish nothing yet). `evicted` is published by eviction (`cmd::refusals`).

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
    // Hash fields removed by the active cycle (Redis `hashTypeActiveExpire`): `hexpired`,
    // then `del` when the hash went with its last field.
    let weak: Weak<Shared> = Arc::downgrade(srv);
    srv.ks
        .set_field_expiry_listener(Box::new(move |db, key, deleted| {
            if let Some(srv) = weak.upgrade() {
                notify(&srv, HASH, "hexpired", db, key);
                if deleted {
                    notify(&srv, GENERIC, "del", db, key);
                }
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
        let srv = Shared::new(Config::default(), Clock::manual(), 0);
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
