//! Keyspace events as commands emit them (instance/notify.rs publishes them), checked
//! through an in-process client and a pattern subscriber.

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
        let srv = Arc::new(crate::cmd::new_shared(
            crate::config::Config::default(),
            crate::clock::Clock::manual(),
        ));
        crate::instance::notify::install(&srv);
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
