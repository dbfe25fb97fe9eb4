//! Connection commands: PING ECHO SELECT QUIT RESET AUTH HELLO.

use super::args::{self, is};
use super::{errors, transactions};
use super::{CommandSpec, Cx, KeySpec, Lock};
use crate::protocol::Reply;
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "ping",
        arity: -1,
        flags: &["fast"],
        keys: KeySpec::None,
        acl: &["fast", "connection"],
        group: "connection",
        since: "1.0.0",
        summary: "Ping the server",
        complexity: "O(1)",
        handler: ping,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "echo",
        arity: 2,
        flags: &["loading", "stale", "fast"],
        keys: KeySpec::None,
        acl: &["fast", "connection"],
        group: "connection",
        since: "1.0.0",
        summary: "Echo the given string",
        complexity: "O(1)",
        handler: echo,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "select",
        arity: 2,
        flags: &["loading", "stale", "fast"],
        keys: KeySpec::None,
        acl: &["fast", "connection"],
        group: "connection",
        since: "1.0.0",
        summary: "Change the selected database for the current connection",
        complexity: "O(1)",
        handler: select,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "quit",
        arity: -1,
        flags: &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy",
        ],
        keys: KeySpec::None,
        acl: &["fast", "connection"],
        group: "connection",
        since: "1.0.0",
        summary: "Close the connection",
        complexity: "O(1)",
        handler: quit,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "reset",
        arity: 1,
        flags: &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy",
        ],
        keys: KeySpec::None,
        acl: &["fast", "connection"],
        group: "connection",
        since: "6.2.0",
        summary: "Reset the connection",
        complexity: "O(1)",
        handler: reset,
        // It forgets the WATCHed keys, in whatever shards they are (as UNWATCH does).
        lock: Lock::All,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hello",
        arity: -1,
        flags: &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy",
        ],
        keys: KeySpec::None,
        acl: &["fast", "connection"],
        group: "connection",
        since: "6.0.0",
        summary: "Handshake with Redis",
        complexity: "O(1)",
        handler: hello,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "auth",
        arity: -2,
        flags: &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy",
        ],
        keys: KeySpec::None,
        acl: &["fast", "connection"],
        group: "connection",
        since: "1.0.0",
        summary: "Authenticate to the server",
        complexity: "O(N) where N is the number of passwords defined for the user",
        handler: auth,
        ..CommandSpec::DEFAULT
    },
];

fn ping(cx: &mut Cx) -> Reply {
    // RESP2 subscribed mode answers with a push-shaped array, as Redis does.
    if cx.args.len() <= 2 && cx.sess.resp2_subscribed() {
        let arg = cx.args.get(1).cloned().unwrap_or_default();
        return Reply::Array(vec![Reply::bulk_static("pong"), Reply::Bulk(arg)]);
    }
    match cx.args.len() {
        1 => Reply::status("PONG"),
        2 => Reply::Bulk(cx.args[1].clone()),
        _ => errors::wrong_args("ping"),
    }
}

fn echo(cx: &mut Cx) -> Reply {
    Reply::Bulk(cx.args[1].clone())
}

fn select(cx: &mut Cx) -> Reply {
    // Redis in cluster mode: only db 0, refused after the integer check.
    if cx.srv.cluster_emulated {
        match args::int32(&cx.args[1], None) {
            Ok(0) => {}
            Ok(_) => return errors::err("ERR SELECT is not allowed in cluster mode"),
            Err(e) => return e,
        }
    }
    match args::db_id(&cx.args[1], cx.srv.ks.databases()) {
        Ok(db) => {
            cx.sess.db = db;
            cx.sess.handle.info.lock().db = db;
            Reply::OK
        }
        Err(e) => e,
    }
}

fn quit(cx: &mut Cx) -> Reply {
    cx.sess.close_after_reply = true;
    Reply::OK
}

fn reset(cx: &mut Cx) -> Reply {
    super::pubsub::unsubscribe_all(cx.srv, cx.sess);
    super::monitor::leave(cx.srv, cx.sess);
    transactions::unwatch_all(cx);
    // Redis 7.2 `clearClientConnectionState` turns tracking off.
    super::client::tracking_off(cx.srv, cx.sess);
    let s = &mut *cx.sess;
    s.multi = None;
    s.db = 0;
    s.resp3 = false;
    s.reply_mode = crate::instance::session::ReplyMode::On;
    // Redis `clientSetDefaultAuth`.
    s.authenticated = cx.srv.acl.starts_authenticated();
    s.user = cx.srv.acl.default_user();
    s.no_touch = false;
    let mut info = s.handle.info.lock();
    info.user = "default".into();
    info.db = 0;
    info.resp = 2;
    info.name = None;
    info.multi = -1;
    // Redis 7.2 `clearClientConnectionState` drops these flags too.
    info.no_touch = false;
    info.no_evict = false;
    Reply::status("RESET")
}

/// AUTH [user] password (Redis `authCommand`): the one-argument form is the default
/// user's, and an error while that user needs no password.
fn auth(cx: &mut Cx) -> Reply {
    let (user, pass) = match cx.args.len() {
        2 => {
            if cx.srv.acl.default_user().state().nopass {
                return errors::err(
                    "ERR AUTH <password> called without any password configured for the \
                     default user. Are you sure your configuration is correct?",
                );
            }
            (Bytes::from_static(b"default"), cx.args[1].clone())
        }
        3 => (cx.args[1].clone(), cx.args[2].clone()),
        _ => return errors::syntax(),
    };
    match super::acl::authenticate(cx, &user, &pass) {
        Ok(()) => Reply::OK,
        Err(e) => e,
    }
}

/// Client names may not contain spaces, newlines or special characters.
pub fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

fn hello(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let mut proto = if cx.sess.resp3 { 3 } else { 2 };
    if args.len() >= 2 {
        match crate::num::parse_i64(&args[1]) {
            // A `resp3_only()` test server refuses RESP2 as Redis refuses any version it
            // does not speak.
            Some(2) if cx.srv.resp3_only.load(std::sync::atomic::Ordering::Relaxed) => {
                return errors::err("NOPROTO unsupported protocol version")
            }
            Some(v) if v == 2 || v == 3 => proto = v,
            Some(_) => return errors::err("NOPROTO unsupported protocol version"),
            None => return errors::err("ERR Protocol version is not an integer or out of range"),
        }
    }
    let mut name = None;
    let mut auth = None;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - i - 1;
        if is(&args[i], "AUTH") && more >= 2 {
            auth = Some((args[i + 1].clone(), args[i + 2].clone()));
            i += 3;
        } else if is(&args[i], "SETNAME") && more >= 1 {
            if !valid_client_name(&args[i + 1]) {
                return errors::err(
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            // A copy: the argument pins the read buffer it was parsed from.
            name = Some(bytes::Bytes::copy_from_slice(&args[i + 1]));
            i += 2;
        } else {
            return Reply::error(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&args[i])
            ));
        }
    }
    // Redis authenticates once every option parsed.
    if let Some((user, pass)) = auth {
        if let Err(e) = super::acl::authenticate(cx, &user, &pass) {
            return e;
        }
    }
    if !cx.sess.authenticated {
        return errors::err(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and \
             select the RESP protocol version at the same time",
        );
    }
    cx.sess.resp3 = proto == 3;
    {
        let mut info = cx.sess.handle.info.lock();
        info.resp = proto as u8;
        if let Some(n) = name {
            info.name = if n.is_empty() { None } else { Some(n) };
        }
    }
    Reply::Map(vec![
        (Reply::bulk_static("server"), Reply::bulk_static("redis")),
        (
            Reply::bulk_static("version"),
            Reply::bulk_static(crate::REDIS_VERSION),
        ),
        (Reply::bulk_static("proto"), Reply::Int(proto)),
        (Reply::bulk_static("id"), Reply::Int(cx.sess.id as i64)),
        (
            Reply::bulk_static("mode"),
            Reply::bulk_static(if cx.srv.cluster_emulated {
                "cluster"
            } else {
                "standalone"
            }),
        ),
        (Reply::bulk_static("role"), Reply::bulk_static("master")),
        (Reply::bulk_static("modules"), Reply::Array(vec![])),
    ])
}
