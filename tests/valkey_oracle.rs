//! valkey-server (8.x) as a second oracle: the same deterministic commands (strings,
//! hashes, and the errors they answer) sent to a valkey-server process and to respite,
//! reply by reply, under RESP2 and RESP3. The binary comes from `RESPITE_VALKEY_SERVER`,
//! the venv `scripts/test.sh` installs, or `PATH` (`common::valkey_server_bin`).

mod common;

use common::{real_server, Conn, Frame, ServerProcess};

/// Commands whose replies Redis 7.2 and Valkey 8 agree on, byte for byte.
const SCRIPT: &[&str] = &[
    // strings
    "SET s hello",
    "GET s",
    "APPEND s _world",
    "STRLEN s",
    "GETRANGE s 0 4",
    "GETRANGE s -5 -1",
    "SETRANGE s 6 W",
    "GET s",
    "SET n 10",
    "INCR n",
    "INCRBY n -15",
    "DECRBY n 3",
    "INCRBYFLOAT n 1.5",
    "INCRBYFLOAT n 1e3",
    "MSET a 1 b 2 c 3",
    "MGET a b missing c",
    "SETNX a x",
    "GETSET a y",
    "GETDEL a",
    "EXISTS a b c",
    "SET k v NX",
    "SET k w XX GET",
    "GET k",
    // hashes
    "HSET h f1 v1 f2 v2 f3 3",
    "HGET h f1",
    "HMGET h f1 nope f3",
    "HINCRBY h f3 4",
    "HINCRBYFLOAT h f3 0.25",
    "HLEN h",
    "HEXISTS h f2",
    "HSTRLEN h f1",
    "HSETNX h f1 other",
    "HDEL h f2 nope",
    "HLEN h",
    "HGET h f2",
    // errors
    "INCR s",
    "INCRBY n notanumber",
    "HINCRBY h f1 1",
    "HSET s f v",
    "GET h",
    "LPUSH h x",
    "GET",
    "SET k v EX 0",
    "SET k v EX notanumber",
    "SETRANGE s -1 x",
    "GETRANGE s",
    "HSET h f1",
    "TYPE s",
    "TYPE h",
    "TYPE missing",
];

fn transcript(port: u16, resp3: bool) -> Vec<(String, Frame)> {
    let mut c = Conn::connect(port).expect("connect");
    c.cmd("FLUSHALL");
    if resp3 {
        assert!(matches!(c.cmd("HELLO 3"), Frame::Map(_)), "HELLO 3");
    }
    SCRIPT
        .iter()
        .map(|line| (line.to_string(), c.cmd(line)))
        .collect()
}

fn compare(resp3: bool) {
    let valkey = ServerProcess::valkey();
    let respite = real_server();
    let want = transcript(valkey.port, resp3);
    let got = transcript(respite.port(), resp3);
    for ((line, w), (_, g)) in want.iter().zip(&got) {
        assert_eq!(g, w, "{line:?}: respite (left) vs valkey-server (right)");
    }
    assert_eq!(got.len(), want.len());
}

#[test]
fn strings_hashes_and_errors_match_valkey_resp2() {
    compare(false);
}

#[test]
fn strings_hashes_and_errors_match_valkey_resp3() {
    compare(true);
}
