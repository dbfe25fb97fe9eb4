//! Hostile clients against the server (audit 2026-12, findings 8, 9, 15, 16, 17 and the
//! CLIENT LIST memory fields): every resource a client can push on is bounded and visible.

mod common;

use common::{conn_info, wait_until, Conn, Frame, Wire, PATIENCE};
use respite::testing::TestServer;
use std::io::{Read, Write};

fn server(params: &[(&str, &str)]) -> TestServer {
    let mut b = TestServer::builder();
    for (k, v) in params {
        b = b.param(k, v);
    }
    b.start().expect("server starts")
}

fn text(f: &Frame) -> String {
    match f {
        Frame::Bulk(b) | Frame::Verbatim(_, b) => String::from_utf8_lossy(b).into_owned(),
        Frame::Simple(s) | Frame::Error(s) => s.clone(),
        other => panic!("not text: {other}"),
    }
}

fn int(f: &Frame) -> i64 {
    match f {
        Frame::Int(n) => *n,
        other => panic!("not an integer: {other}"),
    }
}

/// The CLIENT LIST line of client `id`, if it is connected.
fn client_line(c: &mut Conn, id: i64) -> Option<String> {
    text(&c.cmd("CLIENT LIST"))
        .lines()
        .find(|l| l.starts_with(&format!("id={id} ")))
        .map(str::to_string)
}

fn field(line: &str, name: &str) -> String {
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        .to_string()
}

fn num_field(line: &str, name: &str) -> u64 {
    field(line, name).parse().expect("numeric field")
}

#[test]
fn audit_08_blocked_client_is_held_to_the_query_buffer_limit() {
    let srv = server(&[]);
    let mut a = Conn::connect(srv.port()).unwrap();
    assert_eq!(
        a.cmd("CONFIG SET client-query-buffer-limit 1mb"),
        Frame::Simple("OK".into())
    );
    let mut b = Wire::connect_port(srv.port());
    b.send(&["CLIENT", "ID"]);
    let id: i64 = b.line()[1..].parse().unwrap();
    b.send(&["BLPOP", "nokey", "0"]);
    wait_until("B blocked", || {
        client_line(&mut a, id).is_some_and(|l| field(&l, "flags").contains('b'))
    });
    let line = client_line(&mut a, id).unwrap();
    assert_eq!(num_field(&line, "qbuf"), 0, "{line}");
    assert_eq!(num_field(&line, "argv-mem"), 5 + 5 + 1, "{line}");
    // A huge declared bulk, then its first 600 KB: buffered while blocked, and visible.
    b.write(b"*1\r\n$100000000\r\n");
    b.write(&vec![b'x'; 600 * 1024]);
    wait_until("qbuf of the blocked client", || {
        client_line(&mut a, id).is_some_and(|l| num_field(&l, "qbuf") >= 600 * 1024)
    });
    let line = client_line(&mut a, id).unwrap();
    assert!(field(&line, "flags").contains('b'), "{line}");
    assert!(num_field(&line, "tot-mem") >= 600 * 1024, "{line}");
    let max_in: u64 = conn_info(&mut a, "clients", "client_recent_max_input_buffer")
        .parse()
        .unwrap();
    assert!(
        max_in >= 600 * 1024,
        "client_recent_max_input_buffer {max_in}"
    );
    // Past the limit: closed, as a client that is not blocked would be.
    let _ = b.s.write_all(&vec![b'x'; 600 * 1024]);
    assert!(
        b.closed_after().0,
        "blocked client over the query buffer limit stays connected"
    );
    wait_until("B gone from CLIENT LIST", || {
        client_line(&mut a, id).is_none()
    });
    assert_eq!(conn_info(&mut a, "clients", "blocked_clients"), "0");
    assert_eq!(a.cmd("PING"), Frame::Simple("PONG".into()));
}

#[test]
fn audit_09_errorstats_codes_are_bounded_in_count_and_size() {
    let srv = server(&[]);
    let mut c = Conn::connect(srv.port()).unwrap();
    c.cmd("CONFIG RESETSTAT");
    for i in 0..200 {
        let r = c
            .call(&[
                b"EVAL".to_vec(),
                b"return {err=ARGV[1]}".to_vec(),
                b"0".to_vec(),
                format!("CODE{i} oops").into_bytes(),
            ])
            .unwrap();
        assert_eq!(r, Frame::Error(format!("CODE{i} oops")));
    }
    c.cmd("GET"); // a server error after the cap: still counted under its own code
    let big = c.cmd("EVAL return{err=string.rep('A',1000000)} 0");
    assert!(matches!(big, Frame::Error(_)));
    let long_code = format!("{} oops", "B".repeat(40));
    c.call(&[
        b"EVAL".to_vec(),
        b"return {err=ARGV[1]}".to_vec(),
        b"0".to_vec(),
        long_code.into_bytes(),
    ])
    .unwrap();
    let info = text(&c.cmd("INFO errorstats"));
    let lines: Vec<&str> = info
        .lines()
        .filter(|l| l.starts_with("errorstat_"))
        .collect();
    assert!(lines.len() <= 130, "{} errorstat lines", lines.len());
    assert!(
        info.len() < 16 * 1024,
        "INFO errorstats is {} bytes",
        info.len()
    );
    assert!(
        lines.contains(&"errorstat_ERRORSTATS_OVERFLOW:count=72"),
        "{lines:?}"
    );
    assert!(lines.contains(&"errorstat_CODE0:count=1"), "{lines:?}");
    // Codes without a space in their first 32 bytes are ERR: the 1 MB one, the 40-byte one
    // and GET's arity error.
    assert!(lines.contains(&"errorstat_ERR:count=3"), "{lines:?}");
    assert!(lines.iter().all(|l| l.len() < 64), "{lines:?}");
    assert_eq!(conn_info(&mut c, "stats", "total_error_replies"), "203");
}

#[test]
fn audit_15_a_panicking_command_leaks_no_client_state() {
    let srv = server(&[("enable-test-commands", "yes"), ("maxclients", "3")]);
    let mut obs = Conn::connect(srv.port()).unwrap();
    let mut p = Conn::connect(srv.port()).unwrap();
    p.cmd("HELLO 3");
    let id = int(&p.cmd("CLIENT ID"));
    assert_eq!(p.cmd("WATCH wk"), Frame::Simple("OK".into()));
    p.cmd("SUBSCRIBE ch");
    assert_eq!(p.cmd("CLIENT SETNAME doomed"), Frame::Simple("OK".into()));
    let watchers = || {
        let shared = srv.shared();
        let mut access = shared.ks.exclusive(0, 0);
        access
            .shard_at(0, respite::engine::shard_of(b"wk"))
            .watchers_of(b"wk")
    };
    assert_eq!(watchers(), 1);
    assert!(client_line(&mut obs, id).is_some());
    // The command panics; the task unwinds and its connection closes.
    p.send_line("RESPITE PANIC").unwrap();
    assert!(
        p.read().is_err(),
        "the panicking connection should be closed"
    );
    wait_until("panicked client unregistered", || {
        client_line(&mut obs, id).is_none()
    });
    assert_eq!(conn_info(&mut obs, "clients", "connected_clients"), "1");
    assert_eq!(
        obs.cmd("PUBSUB NUMSUB ch"),
        Frame::Array(vec![Frame::Bulk(b"ch".to_vec()), Frame::Int(0)])
    );
    assert_eq!(watchers(), 0, "WATCH registration left behind");
    // Its maxclients slot is free again: two more clients fit beside the observer.
    let mut n1 = Conn::connect(srv.port()).unwrap();
    let mut n2 = Conn::connect(srv.port()).unwrap();
    assert_eq!(n1.cmd("PING"), Frame::Simple("PONG".into()));
    assert_eq!(n2.cmd("PING"), Frame::Simple("PONG".into()));
    assert_eq!(obs.cmd("PING"), Frame::Simple("PONG".into()));
}

#[test]
fn audit_16_auth_compares_as_before() {
    let srv = TestServer::builder()
        .password("s3cret-pass")
        .start()
        .unwrap();
    let mut c = Conn::connect(srv.port()).unwrap();
    assert!(matches!(c.cmd("GET k"), Frame::Error(e) if e.starts_with("NOAUTH")));
    for wrong in ["s3cret-pas", "s3cret-pass2", "S3cret-pass", "x", "default"] {
        let r = c.cmd(&format!("AUTH {wrong}"));
        assert!(
            matches!(&r, Frame::Error(e) if e.starts_with("WRONGPASS")),
            "{wrong}: {r}"
        );
    }
    assert!(matches!(c.cmd("AUTH default nope"), Frame::Error(e) if e.starts_with("WRONGPASS")));
    assert!(
        matches!(c.cmd("AUTH other s3cret-pass"), Frame::Error(e) if e.starts_with("WRONGPASS"))
    );
    assert!(
        matches!(c.cmd("HELLO 3 AUTH default nope"), Frame::Error(e) if e.starts_with("WRONGPASS"))
    );
    assert_eq!(c.cmd("AUTH s3cret-pass"), Frame::Simple("OK".into()));
    assert_eq!(
        c.cmd("AUTH default s3cret-pass"),
        Frame::Simple("OK".into())
    );
    let mut d = Conn::connect(srv.port()).unwrap();
    assert!(matches!(
        d.cmd("HELLO 3 AUTH default s3cret-pass"),
        Frame::Map(_)
    ));
    assert_eq!(d.cmd("PING"), Frame::Simple("PONG".into()));
}

#[test]
fn audit_17_test_log_redacts_secrets_and_bounds_names() {
    let srv = server(&[
        ("enable-test-commands", "yes"),
        ("requirepass", "topsecret1"),
    ]);
    let mut c = Conn::connect(srv.port()).unwrap();
    assert!(matches!(c.cmd("AUTH wrongsecret2"), Frame::Error(_)));
    assert_eq!(c.cmd("AUTH topsecret1"), Frame::Simple("OK".into()));
    assert!(matches!(
        c.cmd("HELLO 2 AUTH default topsecret1"),
        Frame::Map(_) | Frame::Array(_)
    ));
    assert_eq!(
        c.cmd("CONFIG SET requirepass topsecret3"),
        Frame::Simple("OK".into())
    );
    assert_eq!(c.cmd("AUTH default topsecret3"), Frame::Simple("OK".into()));
    let log = format!("{}", c.cmd("RESPITE LOG GET"));
    for secret in ["wrongsecret2", "topsecret1", "topsecret3"] {
        assert!(!log.contains(secret), "{secret} logged: {log}");
    }
    assert!(log.contains("(redacted)"), "{log}");
    assert!(log.contains("requirepass"), "{log}");
    assert_eq!(int(&c.cmd("RESPITE LOG COUNT auth")), 3);
    // Made-up command names are counted only up to a bound.
    let mut pipe = Vec::new();
    for i in 0..3000 {
        pipe.extend(format!("*1\r\n$10\r\nnosuch{i:04}\r\n").bytes());
    }
    let mut r = Wire::connect_port(srv.port());
    r.send(&["AUTH", "topsecret3"]);
    r.write(&pipe);
    r.send(&["PING"]);
    assert_eq!(r.line(), "+OK");
    for _ in 0..3000 {
        assert!(r.line().starts_with("-ERR unknown command"));
    }
    assert_eq!(r.line(), "+PONG");
    assert_eq!(int(&c.cmd("RESPITE LOG COUNT nosuch0000")), 1);
    assert_eq!(int(&c.cmd("RESPITE LOG COUNT nosuch2999")), 0);
    assert_eq!(int(&c.cmd("RESPITE LOG COUNT ping")), 1);
}

#[test]
fn subscriber_that_does_not_read_shows_growing_omem() {
    let srv = server(&[]);
    let mut a = Conn::connect(srv.port()).unwrap();
    // No output limit: this test watches the backlog grow rather than get cut.
    a.call(&[
        b"CONFIG".to_vec(),
        b"SET".to_vec(),
        b"client-output-buffer-limit".to_vec(),
        b"pubsub 0 0 0".to_vec(),
    ])
    .unwrap();
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    sock.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], srv.port())).into())
        .unwrap();
    let mut sub = Wire::from_stream(sock.into());
    sub.send(&["CLIENT", "ID"]);
    let id: i64 = sub.line()[1..].parse().unwrap();
    sub.send(&["SUBSCRIBE", "ch"]);
    wait_until("subscribed", || {
        int(&a.cmd("PUBSUB NUMSUB ch").clone_at(1)) == 1
    });
    let idle = client_line(&mut a, id).unwrap();
    assert_eq!(num_field(&idle, "omem"), 0, "{idle}");
    let msg = vec![b'm'; 64 * 1024];
    for _ in 0..256 {
        a.call(&[b"PUBLISH".to_vec(), b"ch".to_vec(), msg.clone()])
            .unwrap();
    }
    // 16 MB published; the kernel holds a few MB at most, the rest is the server's.
    wait_until("omem to show the backlog", || {
        client_line(&mut a, id).is_some_and(|l| num_field(&l, "omem") >= 8 * 1024 * 1024)
    });
    let l = client_line(&mut a, id).unwrap();
    assert!(num_field(&l, "oll") > 0, "{l}");
    assert!(num_field(&l, "tot-mem") >= num_field(&l, "omem"), "{l}");
    assert!(field(&l, "events").contains('w'), "{l}");
    let max_out: u64 = conn_info(&mut a, "clients", "client_recent_max_output_buffer")
        .parse()
        .unwrap();
    assert!(
        max_out >= 8 * 1024 * 1024,
        "client_recent_max_output_buffer {max_out}"
    );
    // Once the subscriber reads, the backlog drains.
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut got = 0usize;
        sub.set_timeout(PATIENCE);
        while got < 256 * 64 * 1024 {
            match sub.s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        (sub, got)
    });
    wait_until("omem back to 0", || {
        client_line(&mut a, id).is_some_and(|l| num_field(&l, "omem") == 0)
    });
    let (_sub, got) = reader.join().unwrap();
    assert!(got >= 256 * 64 * 1024, "read {got} bytes");
}

#[test]
fn client_that_does_not_read_its_replies_shows_them_in_omem() {
    let srv = server(&[]);
    let mut a = Conn::connect(srv.port()).unwrap();
    let value = vec![b'v'; 4 * 1024 * 1024];
    a.call(&[b"SET".to_vec(), b"big".to_vec(), value]).unwrap();
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    sock.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], srv.port())).into())
        .unwrap();
    let mut slow = Wire::from_stream(sock.into());
    slow.send(&["CLIENT", "ID"]);
    let id: i64 = slow.line()[1..].parse().unwrap();
    // 16 MB of replies asked for and not read. The connection writes a reply before it
    // runs more than 1 MB worth of commands, so about one 4 MB reply waits at a time.
    for _ in 0..4 {
        slow.send(&["GET", "big"]);
    }
    wait_until("omem to show the unread replies", || {
        client_line(&mut a, id).is_some_and(|l| num_field(&l, "omem") >= 1024 * 1024)
    });
    let l = client_line(&mut a, id).unwrap();
    assert_eq!(num_field(&l, "obl"), 16 * 1024, "{l}");
    assert!(num_field(&l, "oll") >= 64, "{l}");
    assert!(num_field(&l, "tot-mem") > num_field(&l, "omem"), "{l}");
    drop(slow);
    wait_until("slow client gone", || client_line(&mut a, id).is_none());
}

#[test]
fn client_list_fields_follow_redis_order_and_report_buffers() {
    let srv = server(&[]);
    let mut a = Conn::connect(srv.port()).unwrap();
    let line = text(&a.cmd("CLIENT INFO"));
    let names: Vec<&str> = line
        .trim_end()
        .split(' ')
        .map(|kv| kv.split('=').next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "id",
            "addr",
            "laddr",
            "fd",
            "name",
            "age",
            "idle",
            "flags",
            "db",
            "sub",
            "psub",
            "ssub",
            "multi",
            "watch",
            "qbuf",
            "qbuf-free",
            "argv-mem",
            "multi-mem",
            "rbs",
            "rbp",
            "obl",
            "oll",
            "omem",
            "tot-mem",
            "events",
            "cmd",
            "user",
            "redir",
            "resp",
            "lib-name",
            "lib-ver"
        ]
    );
    // The caller's own command is its argv-mem ("client" + "info") and, as in Redis, its
    // query buffer (`*2\r\n$6\r\nclient\r\n$4\r\ninfo\r\n`).
    assert_eq!(num_field(&line, "argv-mem"), 10);
    assert_eq!(num_field(&line, "qbuf"), 26);
    assert!(num_field(&line, "qbuf-free") > 0, "{line}");
    // A MULTI queue counts as multi-mem, seen by other clients too.
    let mut m = Conn::connect(srv.port()).unwrap();
    let id = int(&m.cmd("CLIENT ID"));
    m.cmd("MULTI");
    m.cmd("SET key12345 value12345");
    m.cmd("SET key12345 value12345");
    let l = client_line(&mut a, id).unwrap();
    assert_eq!(num_field(&l, "multi-mem"), 2 * 21, "{l}");
    assert!(num_field(&l, "tot-mem") > num_field(&l, "multi-mem"), "{l}");
    m.cmd("EXEC");
    let l = client_line(&mut a, id).unwrap();
    assert_eq!(num_field(&l, "multi-mem"), 0, "{l}");
}

#[test]
fn killing_a_client_held_by_client_pause_closes_it_at_once() {
    let srv = server(&[]);
    let mut a = Conn::connect(srv.port()).unwrap();
    let mut b = Wire::connect_port(srv.port());
    b.send(&["CLIENT", "ID"]);
    let id: i64 = b.line()[1..].parse().unwrap();
    assert_eq!(
        a.cmd("CLIENT PAUSE 120000 WRITE"),
        Frame::Simple("OK".into())
    );
    b.send(&["SET", "k", "v"]);
    wait_until("B's SET to arrive", || {
        client_line(&mut a, id)
            .is_some_and(|l| field(&l, "cmd") == "set" && field(&l, "flags").contains('b'))
    });
    assert_eq!(a.cmd(&format!("CLIENT KILL ID {id}")), Frame::Int(1));
    // B's socket closes (within the read timeout, PATIENCE) ...
    assert!(b.closed_after().0, "killed paused client stays connected");
    wait_until("B gone", || client_line(&mut a, id).is_none());
    // ... while the pause is still on: a new writer is held by it, so the close did not
    // wait for the pause to end.
    let mut w = Wire::connect_port(srv.port());
    w.send(&["CLIENT", "ID"]);
    let wid: i64 = w.line()[1..].parse().unwrap();
    w.send(&["SET", "k2", "v"]);
    wait_until("the new writer's SET to be held by the pause", || {
        client_line(&mut a, wid)
            .is_some_and(|l| field(&l, "cmd") == "set" && field(&l, "flags").contains('b'))
    });
    assert_eq!(a.cmd("CLIENT UNPAUSE"), Frame::Simple("OK".into()));
    assert_eq!(w.line(), "+OK");
    assert_eq!(
        a.cmd("EXISTS k"),
        Frame::Int(0),
        "the held SET must not run"
    );
}

trait At {
    fn clone_at(&self, i: usize) -> Frame;
}

impl At for Frame {
    fn clone_at(&self, i: usize) -> Frame {
        match self {
            Frame::Array(v) => v[i].clone(),
            other => panic!("not an array: {other}"),
        }
    }
}
