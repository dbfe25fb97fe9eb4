//! No panic reachable from the network: every implemented command is sent many seeded
//! random argument lists built from tricky values (huge/negative/overflowing numbers, NaN,
//! range markers, option names, empty and binary strings) against keys of every type.
//! Whatever the replies, the connection must stay up and the server must not panic.

mod common;

use common::{server_panics, watch_server_panics, Conn, Frame, Rng};

const TRICKY: &[&[u8]] = &[
    b"",
    b"0",
    b"1",
    b"-1",
    b"2",
    b"3",
    b"10",
    b"-100",
    b"100000000000",
    b"9223372036854775807",
    b"-9223372036854775808",
    b"18446744073709551616",
    b"4294967296",
    b"2147483648",
    b"1.5",
    b"-0",
    b"inf",
    b"-inf",
    b"+inf",
    b"nan",
    b"1e308",
    b"-1e308",
    b"(1",
    b"(",
    b"[a",
    b"[",
    b"+",
    b"-",
    b"abc",
    b"\x00",
    b"\xff\xfe",
    b"*",
    b"?",
    b"[a-",
    b"LIMIT",
    b"COUNT",
    b"WITHSCORES",
    b"WITHSCORE",
    b"BYSCORE",
    b"BYLEX",
    b"REV",
    b"NX",
    b"XX",
    b"GT",
    b"LT",
    b"CH",
    b"INCR",
    b"EX",
    b"PX",
    b"EXAT",
    b"PXAT",
    b"KEEPTTL",
    b"GET",
    b"PERSIST",
    b"MATCH",
    b"TYPE",
    b"string",
    b"LEFT",
    b"RIGHT",
    b"BEFORE",
    b"AFTER",
    b"RANK",
    b"MAXLEN",
    b"IDX",
    b"LEN",
    b"MINMATCHLEN",
    b"WITHMATCHLEN",
    b"WEIGHTS",
    b"AGGREGATE",
    b"MIN",
    b"MAX",
    b"SUM",
    b"DB",
    b"REPLACE",
    b"WITHVALUES",
    b"ASYNC",
    b"SYNC",
    b"str",
    b"list",
    b"hash",
    b"set",
    b"zset",
    b"intset",
    b"missing",
    b"{t}x",
];

const KEYS: &[&str] = &[
    "str", "list", "hash", "set", "zset", "intset", "missing", "{t}x",
];

/// Commands that would stop the server, block for long, or change global settings.
fn excluded(name: &str) -> bool {
    matches!(
        name,
        "shutdown"
            | "debug"
            | "debug|sleep"
            | "client|kill"
            | "client|pause"
            | "config|set"
            | "client|reply"
            | "quit"
            | "reset"
            | "auth"
            | "hello"
            | "select"
            | "multi"
            | "exec"
            | "watch"
            | "swapdb"
            | "flushall"
            | "flushdb"
            | "config|resetstat"
            | "wait"
            // Subscribing changes the connection's reply stream (several frames per command).
            | "subscribe"
            | "psubscribe"
            | "ssubscribe"
            | "unsubscribe"
            | "punsubscribe"
            | "sunsubscribe"
    ) || name.starts_with('b') // blocking pops (BLPOP, BZPOPMIN…)
}

fn seed(c: &mut Conn) {
    for line in [
        "SET str 12",
        "RPUSH list a b c 1 2",
        "HSET hash f 1 g x",
        "SADD set a b c",
        "SADD intset 1 2 3",
        "ZADD zset 1 a 2 b 3 c",
        "SET {t}x v",
    ] {
        c.cmd(line);
    }
}

#[test]
fn random_arguments_never_break_the_server() {
    watch_server_panics();
    let server = respite::TestServer::start().expect("start");
    let mut c = Conn::connect(server.port()).expect("connect");
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let names: Vec<&'static str> = respite::cmd::registry()
        .specs
        .iter()
        .map(|s| s.name)
        .filter(|n| !excluded(n))
        .collect();
    let rounds: usize = std::env::var("RESPITE_FUZZ_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let mut sent = 0;
    for round in 0..rounds {
        if round % 10 == 0 {
            seed(&mut c);
        }
        for name in &names {
            let mut args: Vec<Vec<u8>> = name.split('|').map(|p| p.as_bytes().to_vec()).collect();
            // Keys first (most commands take one), then tricky values.
            args.push(KEYS[rng.below(KEYS.len())].as_bytes().to_vec());
            for _ in 0..rng.below(7) {
                args.push(TRICKY[rng.below(TRICKY.len())].to_vec());
            }
            let reply = c.call(&args).unwrap_or_else(|e| {
                panic!(
                    "connection lost after {:?}: {e}",
                    String::from_utf8_lossy(&args.join(&b' '))
                )
            });
            let _ = reply;
            sent += 1;
        }
    }
    assert_eq!(c.cmd("PING"), Frame::Simple("PONG".into()));
    assert_eq!(server_panics(), 0, "the server panicked");
    eprintln!("robustness: {sent} random commands");
}

/// Random bytes and mangled frames on fresh connections: the server may reply with an error
/// and close, but never panics, and keeps serving new connections.
#[test]
fn random_bytes_never_break_the_server() {
    use std::io::{Read, Write};
    watch_server_panics();
    let server = respite::TestServer::start().expect("start");
    let mut rng = Rng(0xfeed_beef_0bad_cafe);
    let pieces: &[&[u8]] = &[
        b"*",
        b"$",
        b"\r\n",
        b"\n",
        b"1",
        b"3",
        b"-1",
        b"99999999999",
        b"GET",
        b"SET",
        b"k",
        b"\"",
        b"'",
        b"\\x4",
        b" ",
        b"\x00",
        b"PING",
        b"*2\r\n$3\r\nGET\r\n",
        b"$0\r\n\r\n",
        b"HELLO 3\r\n",
        b"*1\r\n$4\r\nPING\r\n",
        b"+OK",
        b":",
        b"%",
        b"\xff",
    ];
    for _ in 0..400 {
        let mut blob = Vec::new();
        for _ in 0..rng.below(40) {
            blob.extend_from_slice(pieces[rng.below(pieces.len())]);
        }
        let mut s = std::net::TcpStream::connect(server.addr()).expect("connect");
        s.set_read_timeout(Some(std::time::Duration::from_millis(20)))
            .ok();
        let _ = s.write_all(&blob);
        let mut sink = [0u8; 4096];
        let _ = s.read(&mut sink);
    }
    let mut c = Conn::connect(server.port()).expect("connect");
    assert_eq!(c.cmd("PING"), Frame::Simple("PONG".into()));
    assert_eq!(server_panics(), 0, "the server panicked");
}
