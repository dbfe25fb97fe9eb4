//! MIGRATE (Redis 7.2 `migrateCommand`) through real sockets:
//! - the same MIGRATE script run with redis-server and with respite as the source, each
//!   against its own fresh redis-server target, gives the same replies and leaves the same
//!   keys on both sides (COPY, REPLACE, KEYS, NOKEY, BUSYKEY, AUTH/AUTH2, SELECT, errors,
//!   unreachable, silent and closing targets);
//! - respite → respite, and redis-server → respite (respite as the RESTORE target);
//! - TTLs carried, large values pipelined, only acknowledged keys deleted, durably;
//! - cached connections: reused, re-made after the target drops them, released when idle;
//! - a silent target holds the keyspace (as in Redis) only for the timeout, and with
//!   `--threads 1` the server still accepts connections, serves SHUTDOWN, and runs the
//!   queued commands once MIGRATE ends;
//! - COMMAND INFO / COMMAND GETKEYS as redis-server reports them (movable keys).

mod common;

use common::{
    conn_info, durable_server, free_port, keyevents, wait_until, Conn, Frame, ServerProcess,
    PATIENCE,
};
use respite::TestServer;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

fn ok() -> Frame {
    Frame::Simple("OK".into())
}

fn call(c: &mut Conn, args: &[&[u8]]) -> Frame {
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    c.call(&args).expect("reply")
}

/// A command given as words; `''` is the empty string.
fn run(c: &mut Conn, line: &str) -> Frame {
    let args: Vec<Vec<u8>> = line
        .split_whitespace()
        .map(|w| {
            if w == "''" {
                Vec::new()
            } else {
                w.as_bytes().to_vec()
            }
        })
        .collect();
    c.call(&args).unwrap_or_else(|e| panic!("{line:?}: {e}"))
}

/// A target that accepts connections and reads, but never answers; `held` tells how many
/// bytes it has received so far (once a MIGRATE's request has arrived).
struct Silent {
    port: u16,
    received: mpsc::Receiver<usize>,
    release: Option<mpsc::Sender<Vec<u8>>>,
}

impl Silent {
    fn start() -> Silent {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let (tx, received) = mpsc::channel();
        let (release, rx) = mpsc::channel::<Vec<u8>>();
        std::thread::spawn(move || {
            let Ok((mut s, _)) = l.accept() else { return };
            s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            let mut buf = [0u8; 4096];
            loop {
                match s.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => {
                        let _ = tx.send(n);
                    }
                    Err(_) => {}
                }
                match rx.try_recv() {
                    Ok(answer) => {
                        let _ = s.write_all(&answer);
                    }
                    Err(mpsc::TryRecvError::Disconnected) => return,
                    Err(mpsc::TryRecvError::Empty) => {}
                }
            }
        });
        Silent {
            port,
            received,
            release: Some(release),
        }
    }

    /// Waits until some request bytes arrived.
    fn wait_request(&self) {
        self.received
            .recv_timeout(PATIENCE)
            .expect("the MIGRATE request reached the silent target");
    }

    fn answer(&self, bytes: &[u8]) {
        self.release.as_ref().unwrap().send(bytes.to_vec()).unwrap();
    }
}

/// A target that accepts, reads what arrives, then closes without answering.
fn closing_target() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            drop(s);
        }
    });
    port
}

/// The MIGRATE script: replies at the source, and what the source and target hold after
/// each step. `src` is the source server, `dst` a fresh redis-server target.
fn script(src: &mut Conn, dst: &mut Conn, dst_port: u16) -> Vec<String> {
    let mut out = Vec::new();
    let t = dst_port.to_string();
    let m = |src: &mut Conn, rest: &str| {
        let line = format!("MIGRATE 127.0.0.1 {t} {rest}");
        let r = run(src, &line);
        format!("{line} -> {r:?}")
    };
    assert_eq!(src.cmd("FLUSHALL"), ok());
    // One key with a TTL, into db 3.
    src.cmd("SET k v");
    src.cmd("PEXPIRE k 100000");
    out.push(m(src, "k 3 5000"));
    out.push(format!("src exists {:?}", src.cmd("EXISTS k")));
    dst.cmd("SELECT 3");
    out.push(format!("dst get {:?}", dst.cmd("GET k")));
    let ttl = dst.cmd("PTTL k");
    out.push(format!(
        "dst ttl carried {}",
        matches!(ttl, Frame::Int(t) if t > 50_000 && t <= 100_000)
    ));
    // Nothing to move.
    out.push(m(src, "k 3 5000"));
    out.push(m(src, "'' 3 5000 KEYS nokey-1 nokey-2"));
    out.push(m(src, "'' 3 5000 KEYS"));
    // The target has the key: BUSYKEY, the source keeps it; REPLACE overwrites; COPY keeps.
    src.cmd("SET k v2");
    out.push(m(src, "k 3 5000"));
    out.push(format!("src exists {:?}", src.cmd("EXISTS k")));
    out.push(m(src, "k 3 5000 COPY REPLACE"));
    out.push(format!("src exists {:?}", src.cmd("EXISTS k")));
    out.push(format!("dst get {:?}", dst.cmd("GET k")));
    out.push(m(src, "k 3 5000 replace"));
    out.push(format!("src exists {:?}", src.cmd("EXISTS k")));
    // Several keys of several types: only the keys the target accepted leave the source.
    src.cmd("MSET a 1 b 2 c 3");
    src.cmd("RPUSH l x y z");
    src.cmd("HSET h f1 v1 f2 v2");
    src.cmd("ZADD z 1 m1 2.5 m2");
    src.cmd("SADD s 1 2 3");
    dst.cmd("SELECT 4");
    dst.cmd("SET b busy");
    out.push(m(src, "'' 4 5000 KEYS a nokey b c l h z s"));
    for k in ["a", "b", "c", "l", "h", "z", "s"] {
        out.push(format!(
            "{k}: src {:?} dst {:?} {:?}",
            src.cmd(&format!("EXISTS {k}")),
            dst.cmd(&format!("TYPE {k}")),
            dst.cmd(&format!("DUMP {k}")),
        ));
    }
    // A key named twice: the second RESTORE finds it there.
    src.cmd("SET twice 1");
    out.push(m(src, "'' 5 5000 KEYS twice twice"));
    out.push(format!("src exists {:?}", src.cmd("EXISTS twice")));
    src.cmd("SET twice 1");
    out.push(m(src, "'' 6 5000 REPLACE KEYS twice twice"));
    out.push(format!("src exists {:?}", src.cmd("EXISTS twice")));
    // Argument errors, before anything is sent.
    src.cmd("SET e 1");
    for rest in [
        "e 3 5000 KEYS x",
        "e 3 5000 BOGUS",
        "e 3 5000 COPY AUTH",
        "e 3 5000 AUTH2 user",
        "e 3 5000 KEYS",
        "e 3 notanumber",
        "e x 5000",
        "e 3 5000.5",
        "nokey x 5000",
        "'' 3 5000 AUTH2 keys keys e",
    ] {
        out.push(m(src, rest));
    }
    out.push(format!(
        "wrong arity {:?}",
        run(src, "MIGRATE 127.0.0.1 1 e 3")
    ));
    // The target's errors: db out of range, AUTH where no password is set.
    out.push(m(src, "e 99 5000"));
    out.push(m(src, "e 3 5000 AUTH secret"));
    out.push(m(src, "e 3 5000 AUTH2 user secret"));
    out.push(format!("src exists {:?}", src.cmd("EXISTS e")));
    // A timeout of 0 or less means 1000 ms.
    out.push(m(src, "e 7 0"));
    out.push(m(src, "e 7 -5"));
    out.push(format!(
        "cached {}",
        conn_info(src, "stats", "migrate_cached_sockets")
    ));
    out
}

#[test]
fn replies_and_effects_match_redis_as_source() {
    let oracle = ServerProcess::redis();
    let oracle_dst = ServerProcess::redis();
    let ts = TestServer::start().unwrap();
    let ours_dst = ServerProcess::redis();
    let theirs = script(
        &mut Conn::connect(oracle.port).unwrap(),
        &mut Conn::connect(oracle_dst.port).unwrap(),
        oracle_dst.port,
    );
    let ours = script(
        &mut Conn::connect(ts.port()).unwrap(),
        &mut Conn::connect(ours_dst.port).unwrap(),
        ours_dst.port,
    );
    let theirs: Vec<String> = theirs
        .iter()
        .map(|l| l.replace(&oracle_dst.port.to_string(), "T"))
        .collect();
    let ours: Vec<String> = ours
        .iter()
        .map(|l| l.replace(&ours_dst.port.to_string(), "T"))
        .collect();
    for (i, (a, b)) in theirs.iter().zip(&ours).enumerate() {
        assert_eq!(a, b, "step {i}: redis-server vs respite");
    }
    assert_eq!(theirs.len(), ours.len());
    // The script did exercise what it claims to.
    let all = ours.join("\n");
    for want in [
        "NOKEY",
        "BUSYKEY",
        "DB index is out of range",
        "empty string",
        "syntax error",
        "not an integer",
        "dst ttl carried true",
    ] {
        assert!(all.contains(want), "{want} not seen:\n{all}");
    }
}

/// The replies a source gives for MIGRATE to targets that cannot take it.
fn unreachable_script(src: &mut Conn) -> Vec<Frame> {
    src.cmd("SET k v");
    let mut out = Vec::new();
    // Refused: Redis only learns it when writing (retried once).
    out.push(run(
        src,
        &format!("MIGRATE 127.0.0.1 {} k 0 1000", free_port()),
    ));
    out.push(run(src, "MIGRATE 127.0.0.1 notaport k 0 1000"));
    // No address at all: the connection is never started.
    out.push(run(src, "MIGRATE '' 6379 k 0 1000"));
    // Accepts and closes without answering: one retry, then a read error.
    out.push(run(
        src,
        &format!("MIGRATE 127.0.0.1 {} k 0 1000", closing_target()),
    ));
    // Never answers: a read timeout, no retry.
    let silent = Silent::start();
    out.push(run(
        src,
        &format!("MIGRATE 127.0.0.1 {} k 0 300", silent.port),
    ));
    out.push(src.cmd("EXISTS k"));
    out
}

#[test]
fn unreachable_closing_and_silent_targets_as_redis() {
    let oracle = ServerProcess::redis();
    let ts = TestServer::start().unwrap();
    let theirs = unreachable_script(&mut Conn::connect(oracle.port).unwrap());
    let ours = unreachable_script(&mut Conn::connect(ts.port()).unwrap());
    assert_eq!(theirs, ours);
    assert_eq!(
        ours[0],
        Frame::Error("IOERR error or timeout writing to target instance".into())
    );
    assert_eq!(
        ours[2],
        Frame::Error("IOERR error or timeout connecting to the client".into())
    );
    assert_eq!(
        ours[4],
        Frame::Error("IOERR error or timeout reading to target instance".into())
    );
}

/// MIGRATE with AUTH and AUTH2 to a target with a password and an ACL user.
fn auth_script(src: &mut Conn, dst_port: u16) -> Vec<Frame> {
    let mut dst = Conn::connect(dst_port).unwrap();
    dst.cmd("ACL SETUSER mover on >moverpass ~* +@all");
    dst.cmd("CONFIG SET requirepass foobar");
    assert_eq!(dst.cmd("AUTH foobar"), ok());
    let m = |src: &mut Conn, rest: &str| run(src, &format!("MIGRATE 127.0.0.1 {dst_port} {rest}"));
    let mut out = Vec::new();
    src.cmd("RPUSH list a b c d");
    out.push(m(src, "list 9 5000"));
    out.push(m(src, "list 9 5000 AUTH wrong"));
    out.push(m(src, "list 9 5000 AUTH2 mover wrong"));
    out.push(src.cmd("EXISTS list"));
    out.push(m(src, "list 9 5000 AUTH foobar"));
    out.push(src.cmd("EXISTS list"));
    dst.cmd("SELECT 9");
    out.push(dst.cmd("LRANGE list 0 -1"));
    src.cmd("SET k2 v");
    out.push(m(src, "k2 9 5000 AUTH2 mover moverpass"));
    out.push(dst.cmd("GET k2"));
    out
}

#[test]
fn auth_and_auth2_as_redis() {
    let oracle = ServerProcess::redis();
    let oracle_dst = ServerProcess::redis();
    let ts = TestServer::start().unwrap();
    let ours_dst = ServerProcess::redis();
    let theirs = auth_script(&mut Conn::connect(oracle.port).unwrap(), oracle_dst.port);
    let ours = auth_script(&mut Conn::connect(ts.port()).unwrap(), ours_dst.port);
    assert_eq!(theirs, ours);
    assert!(
        matches!(&ours[1], Frame::Error(e) if e.contains("WRONGPASS")),
        "{:?}",
        ours[1]
    );
    assert_eq!(ours[4], ok());
    assert_eq!(ours[7], ok());
}

/// A key's type and contents (hash and set members sorted: their order differs between
/// encodings), for comparing a key across servers.
fn content(c: &mut Conn, key: &str) -> String {
    let ty = c.cmd(&format!("TYPE {key}"));
    let Frame::Simple(ty) = ty else {
        panic!("TYPE {key}: {ty:?}")
    };
    let read = match ty.as_str() {
        "string" => format!("GET {key}"),
        "list" => format!("LRANGE {key} 0 -1"),
        "hash" => format!("HGETALL {key}"),
        "set" => format!("SMEMBERS {key}"),
        "zset" => format!("ZRANGE {key} 0 -1 WITHSCORES"),
        "stream" => format!("XRANGE {key} - +"),
        other => panic!("type {other}"),
    };
    let mut items = match c.cmd(&read) {
        Frame::Array(v) => v.iter().map(|f| f.to_string()).collect(),
        other => vec![other.to_string()],
    };
    if ty == "set" {
        items.sort();
    }
    if ty == "hash" {
        let mut pairs: Vec<String> = items.chunks(2).map(|p| p.join("=")).collect();
        pairs.sort();
        items = pairs;
    }
    format!("{ty}: {}", items.join(" "))
}

/// Every type, with TTLs and a value past 64 KiB, from `src` to `dst` (in db 2), compared
/// by DUMP before and after.
fn move_everything(src: &mut Conn, dst: &mut Conn, dst_port: u16) {
    src.cmd("FLUSHALL");
    src.cmd("SET str hello");
    src.cmd("SET int 12345");
    src.cmd("HSET h a 1 b 2");
    src.cmd("RPUSH l 1 2 3 x");
    src.cmd("SADD s 1 2 3");
    src.cmd("SADD s2 a b c");
    src.cmd("ZADD z 1 a 2 b");
    src.cmd("XADD x 1-1 f v");
    src.cmd("XGROUP CREATE x g 0");
    src.cmd("PFADD hll a b c");
    let big: Vec<u8> = (0..200_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    call(src, &[b"SET", b"big", &big]);
    src.cmd("PEXPIRE h 500000");
    let keys = ["str", "int", "h", "l", "s", "s2", "z", "x", "hll", "big"];
    let before: Vec<String> = keys.iter().map(|k| content(src, k)).collect();
    let line = format!(
        "MIGRATE 127.0.0.1 {dst_port} '' 2 10000 KEYS {}",
        keys.join(" ")
    );
    assert_eq!(run(src, &line), ok());
    assert_eq!(src.cmd("DBSIZE"), Frame::Int(0));
    dst.cmd("SELECT 2");
    for (k, b) in keys.iter().zip(&before) {
        assert_eq!(&content(dst, k), b, "{k}");
    }
    assert!(matches!(dst.cmd("PTTL h"), Frame::Int(t) if t > 400_000 && t <= 500_000));
    assert_eq!(dst.cmd("PTTL str"), Frame::Int(-1));
    assert!(dst.cmd("XINFO GROUPS x").to_string().contains("\"g\""));
}

#[test]
fn respite_to_respite() {
    let src = TestServer::start().unwrap();
    let dst = TestServer::start().unwrap();
    move_everything(
        &mut Conn::connect(src.port()).unwrap(),
        &mut Conn::connect(dst.port()).unwrap(),
        dst.port(),
    );
}

#[test]
fn respite_to_redis_and_redis_to_respite() {
    // respite → redis-server.
    let src = TestServer::start().unwrap();
    let dst = ServerProcess::redis();
    move_everything(
        &mut Conn::connect(src.port()).unwrap(),
        &mut Conn::connect(dst.port).unwrap(),
        dst.port,
    );
    // redis-server → respite (respite answers the RESTOREs, AUTH and SELECT).
    let src = ServerProcess::redis();
    let dst = TestServer::start().unwrap();
    move_everything(
        &mut Conn::connect(src.port).unwrap(),
        &mut Conn::connect(dst.port()).unwrap(),
        dst.port(),
    );
}

/// redis-server as the source against a respite target and a redis-server target with the
/// same state: the replies agree (respite's RESTORE errors, AUTH, SELECT seen through Redis),
/// and the target then migrates a key back.
fn against_target(src: &mut Conn, dst_port: u16) -> Vec<Frame> {
    let mut dst = Conn::connect(dst_port).unwrap();
    dst.cmd("FLUSHALL");
    let m = |src: &mut Conn, rest: &str| run(src, &format!("MIGRATE 127.0.0.1 {dst_port} {rest}"));
    let mut out = Vec::new();
    src.cmd("FLUSHALL");
    src.cmd("MSET a 1 b 2 c 3");
    dst.cmd("SELECT 1");
    dst.cmd("SET b busy");
    out.push(m(src, "'' 1 5000 KEYS a b c"));
    out.push(src.cmd("EXISTS a b c"));
    out.push(m(src, "b 1 5000 REPLACE"));
    out.push(dst.cmd("GET b"));
    src.cmd("SET k v");
    out.push(m(src, "k 16 5000"));
    out.push(m(src, "k 1 5000 AUTH nopass"));
    dst.cmd("CONFIG SET requirepass sesame");
    dst.cmd("AUTH sesame");
    out.push(m(src, "k 1 5000"));
    out.push(m(src, "k 1 5000 AUTH wrong"));
    out.push(m(src, "k 1 5000 AUTH sesame"));
    out.push(dst.cmd("GET k"));
    // And back: the target migrates the key to the source (db 2).
    let src_port = match src.cmd("CONFIG GET port") {
        Frame::Array(v) => v[1].to_string().trim_matches('"').to_string(),
        other => panic!("{other:?}"),
    };
    out.push(run(
        &mut dst,
        &format!("MIGRATE 127.0.0.1 {src_port} k 2 5000"),
    ));
    out.push(dst.cmd("EXISTS k"));
    src.cmd("SELECT 2");
    out.push(src.cmd("GET k"));
    src.cmd("SELECT 0");
    dst.cmd("CONFIG SET requirepass ''");
    out
}

#[test]
fn redis_source_sees_respite_target_as_redis() {
    let src = ServerProcess::redis();
    let redis_dst = ServerProcess::redis();
    let ours = TestServer::start().unwrap();
    let mut c = Conn::connect(src.port).unwrap();
    let theirs = against_target(&mut c, redis_dst.port);
    // The source's cached connection to the old target must not matter: a new port.
    let with_respite = against_target(&mut c, ours.port());
    assert_eq!(theirs, with_respite);
    assert_eq!(theirs.last(), Some(&Frame::Bulk(b"v".to_vec())));
    assert!(
        matches!(&theirs[0], Frame::Error(e) if e.contains("BUSYKEY")),
        "{:?}",
        theirs[0]
    );
}

fn client_ids(dst: &mut Conn) -> Vec<String> {
    let Frame::Bulk(b) = dst.cmd("CLIENT LIST") else {
        panic!("CLIENT LIST")
    };
    String::from_utf8(b)
        .unwrap()
        .lines()
        .filter(|l| !l.contains("cmd=client|list"))
        .map(|l| {
            l.split(' ')
                .next()
                .unwrap()
                .trim_start_matches("id=")
                .to_string()
        })
        .collect()
}

#[test]
fn cached_connection_reused_remade_and_released() {
    let src = TestServer::start().unwrap();
    let dst = ServerProcess::redis();
    let mut c = Conn::connect(src.port()).unwrap();
    let mut d = Conn::connect(dst.port).unwrap();
    let m = |c: &mut Conn, rest: &str| run(c, &format!("MIGRATE 127.0.0.1 {} {rest}", dst.port));
    assert_eq!(conn_info(&mut c, "stats", "migrate_cached_sockets"), "0");
    c.cmd("MSET a 1 b 2 c 3");
    assert_eq!(m(&mut c, "a 0 5000"), ok());
    assert_eq!(conn_info(&mut c, "stats", "migrate_cached_sockets"), "1");
    let connections = conn_info(&mut d, "stats", "total_connections_received");
    // Reused: no new connection at the target.
    assert_eq!(m(&mut c, "b 0 5000"), ok());
    assert_eq!(
        conn_info(&mut d, "stats", "total_connections_received"),
        connections
    );
    // The target drops it: the next MIGRATE retries on a fresh connection.
    let ids = client_ids(&mut d);
    assert_eq!(ids.len(), 1, "{ids:?}");
    d.cmd(&format!("CLIENT KILL ID {}", ids[0]));
    assert_eq!(m(&mut c, "c 0 5000"), ok());
    assert_eq!(d.cmd("MGET a b c").to_string(), r#"*["1", "2", "3"]"#);
    assert_eq!(conn_info(&mut c, "stats", "migrate_cached_sockets"), "1");
    // Released after 10 s unused (Redis: `MIGRATE cached connections are released after
    // some time`), and the target sees it go.
    wait_until("the cached connection to be released", || {
        conn_info(&mut c, "stats", "migrate_cached_sockets") == "0"
    });
    wait_until("the target to see the connection closed", || {
        client_ids(&mut d).is_empty()
    });
}

/// No reply within a short wait: the command is still queued (a hang guard for "not yet",
/// never a bound on how fast anything must be).
fn not_answered(c: &mut Conn) -> bool {
    c.set_timeout(Duration::from_millis(200));
    let pending = c.read().is_err();
    c.set_timeout(PATIENCE);
    pending
}

#[test]
fn silent_target_holds_the_keyspace_as_redis_with_one_thread() {
    let mut server = ServerProcess::respite(&["--threads", "1"]);
    let mut a = Conn::connect(server.port).unwrap();
    let mut b = Conn::connect(server.port).unwrap();
    a.cmd("SET moving v");
    a.cmd("SET other 1");
    let silent = Silent::start();
    // A long timeout: the target answers when this test says so.
    a.send_line(&format!("MIGRATE 127.0.0.1 {} moving 0 60000", silent.port))
        .unwrap();
    silent.wait_request();
    // Let the active expiry sweep (every 100 ms) run meanwhile: it must not park the only
    // worker behind MIGRATE.
    std::thread::sleep(Duration::from_millis(300));
    // Commands from a connected client and from a new one wait for MIGRATE, as in Redis…
    b.send_line("INCR other").unwrap();
    let mut c = Conn::connect(server.port).unwrap();
    c.send_line("PING").unwrap();
    assert!(not_answered(&mut a), "MIGRATE answered before its target");
    assert!(
        not_answered(&mut b),
        "INCR ran while MIGRATE held the keyspace"
    );
    assert!(
        not_answered(&mut c),
        "PING ran while MIGRATE held the keyspace"
    );
    // …and run once the target accepts the key (SELECT's reply, then RESTORE's).
    silent.answer(b"+OK\r\n+OK\r\n");
    assert_eq!(a.read().unwrap(), ok());
    assert_eq!(b.read().unwrap(), Frame::Int(2));
    assert_eq!(c.read().unwrap(), Frame::Simple("PONG".into()));
    assert_eq!(a.cmd("EXISTS moving"), Frame::Int(0));
    assert!(server.running());
}

#[test]
fn shutdown_is_served_while_a_target_is_silent_with_one_thread() {
    let mut server = ServerProcess::respite(&["--threads", "1"]);
    let mut a = Conn::connect(server.port).unwrap();
    let mut b = Conn::connect(server.port).unwrap();
    a.cmd("SET k v");
    let silent = Silent::start();
    a.send_line(&format!("MIGRATE 127.0.0.1 {} k 0 600000", silent.port))
        .unwrap();
    silent.wait_request();
    std::thread::sleep(Duration::from_millis(300));
    b.send_line("SHUTDOWN NOSAVE").unwrap();
    // Well before MIGRATE's ten-minute timeout.
    wait_until("the server to exit", || !server.running());
}

#[test]
fn silent_target_times_out_with_one_thread() {
    let server = ServerProcess::respite(&["--threads", "1"]);
    let mut a = Conn::connect(server.port).unwrap();
    let mut b = Conn::connect(server.port).unwrap();
    a.cmd("SET k v");
    let silent = Silent::start();
    a.send_line(&format!("MIGRATE 127.0.0.1 {} k 0 1500", silent.port))
        .unwrap();
    silent.wait_request();
    b.send_line("PING").unwrap();
    assert_eq!(
        a.read().unwrap(),
        Frame::Error("IOERR error or timeout reading to target instance".into())
    );
    assert_eq!(b.read().unwrap(), Frame::Simple("PONG".into()));
    // The key stays, and the broken connection is not cached.
    assert_eq!(a.cmd("EXISTS k"), Frame::Int(1));
    assert_eq!(conn_info(&mut b, "stats", "migrate_cached_sockets"), "0");
}

#[test]
fn durable_source_deletes_durably() {
    let dir = tempfile::tempdir().unwrap();
    let dst = ServerProcess::redis();
    let start = || durable_server(dir.path(), "always");
    {
        let ts = start();
        let mut c = Conn::connect(ts.port()).unwrap();
        c.cmd("MSET moved 1 copied 2 busy 3 stays 4");
        let mut d = Conn::connect(dst.port).unwrap();
        d.cmd("SET busy x");
        let m =
            |c: &mut Conn, rest: &str| run(c, &format!("MIGRATE 127.0.0.1 {} {rest}", dst.port));
        assert_eq!(m(&mut c, "copied 0 5000 COPY"), ok());
        assert!(matches!(
            m(&mut c, "'' 0 5000 KEYS moved busy"),
            Frame::Error(e) if e.contains("BUSYKEY")
        ));
    }
    let ts = start();
    let mut c = Conn::connect(ts.port()).unwrap();
    assert_eq!(
        c.cmd("MGET moved copied busy stays").to_string(),
        r#"*[(nil bulk), "2", "3", "4"]"#
    );
}

#[test]
fn command_info_and_getkeys_as_redis() {
    let oracle = ServerProcess::redis();
    let ts = TestServer::start().unwrap();
    let mut r = Conn::connect(oracle.port).unwrap();
    let mut o = Conn::connect(ts.port()).unwrap();
    let head = |c: &mut Conn| match c.cmd("COMMAND INFO migrate") {
        Frame::Array(v) => match &v[0] {
            Frame::Array(e) => e[..7].to_vec(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    assert_eq!(head(&mut r), head(&mut o));
    for line in [
        "COMMAND GETKEYS MIGRATE h 1 k 0 5",
        "COMMAND GETKEYS MIGRATE h 1 '' 0 5 COPY KEYS a b c",
        "COMMAND GETKEYS MIGRATE h 1 '' 0 5 AUTH keys KEYS a",
        "COMMAND GETKEYS MIGRATE h 1 '' 0 5 AUTH2 keys keys a",
        "COMMAND GETKEYS MIGRATE h 1 k 0 5 KEYS a",
        "COMMAND GETKEYS MIGRATE h 1 '' 0 5 KEYS",
        "COMMAND GETKEYS MIGRATE h 1 '' 0 5 COPY KEYS",
        "COMMAND GETKEYS MIGRATE keys 1 k 0 5",
    ] {
        assert_eq!(run(&mut r, line), run(&mut o, line), "{line}");
    }
}

#[test]
fn keyspace_events_as_redis() {
    let oracle = ServerProcess::redis();
    let ts = TestServer::start().unwrap();
    let events = |port: u16| {
        let dst = ServerProcess::redis();
        dst_busy(dst.port);
        let t = dst.port;
        let script = [
            "MSET a 1 b 2 c 3 busy 4".to_string(),
            format!("MIGRATE 127.0.0.1 {t} a 0 5000"),
            format!("MIGRATE 127.0.0.1 {t} b 0 5000 COPY"),
            format!("MIGRATE 127.0.0.1 {t} busy 0 5000"),
            format!("MIGRATE 127.0.0.1 {t} c 0 5000 REPLACE"),
            "SET after 1".to_string(),
        ];
        let lines: Vec<&str> = script.iter().map(String::as_str).collect();
        keyevents(port, "KEA", &lines)
    };
    let theirs = events(oracle.port);
    assert_eq!(theirs, events(ts.port()));
    assert!(
        theirs.iter().any(|e| e == "__keyevent@0__:del a"),
        "{theirs:?}"
    );
}

/// Gives the target a key the source also has (its RESTORE then fails with BUSYKEY).
fn dst_busy(port: u16) {
    let mut c = Conn::connect(port).unwrap();
    assert_eq!(c.cmd("SET busy x"), ok());
}
