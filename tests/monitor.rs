//! MONITOR through real connections, against redis-server: the same commands on both
//! servers must give the same monitor lines (timestamps and client ports normalised), and
//! a monitoring connection must answer as Redis's does (keyspace refused, a second
//! MONITOR ignored, RESET leaving the mode). Also CLIENT LIST's flags and fields for
//! clients in each state, compared the same way.

mod common;

use common::{ServerProcess, Wire};
use std::collections::BTreeMap;

/// `+1700000000.123456 [0 127.0.0.1:54321] "set" "k"` → `[0 C] "set" "k"`.
fn normalise(line: &str) -> String {
    let line = line.trim_end();
    let rest = line
        .strip_prefix('+')
        .unwrap_or_else(|| panic!("not a monitor line: {line:?}"));
    let (stamp, rest) = rest.split_once(' ').expect("a timestamp");
    let (secs, usecs) = stamp.split_once('.').expect("secs.usecs");
    assert!(secs.parse::<u64>().is_ok() && usecs.len() == 6, "{line}");
    let (origin, args) = rest.split_once("] ").expect("[db addr]");
    let (db, addr) = origin[1..].split_once(' ').expect("db addr");
    let who = if addr == "lua" { "lua" } else { "C" };
    assert!(who == "lua" || addr.starts_with("127.0.0.1:"), "{line}");
    format!("[{db} {who}] {args}")
}

/// Runs `script` (each entry: one command's arguments) on a fresh connection while a
/// RESP2 and a RESP3 monitor watch; returns the RESP2 monitor's normalised lines, after
/// checking the RESP3 one saw the same.
fn watch(port: u16, script: &[Vec<&str>]) -> Vec<String> {
    let mut m3 = Wire::connect_port(port);
    assert!(m3.cmd("HELLO 3").starts_with('%'));
    let mut m2 = Wire::connect_port(port);
    assert_eq!(m2.cmd("MONITOR"), "+OK\r\n");
    assert_eq!(m3.cmd("MONITOR"), "+OK\r\n");
    let mut c = Wire::connect_port(port);
    for args in script {
        c.send(args);
        c.frame_bytes();
    }
    c.send(&["ECHO", "the-end"]);
    c.frame_bytes();
    let read_all = |m: &mut Wire| {
        let mut lines = Vec::new();
        loop {
            let l = normalise(&String::from_utf8_lossy(&m.frame_bytes()));
            // Arguments are shown as sent (the name too: `"ECHO"`).
            if l.ends_with("\"ECHO\" \"the-end\"") {
                return lines;
            }
            lines.push(l);
        }
    };
    let lines = read_all(&mut m2);
    assert_eq!(read_all(&mut m3), lines, "RESP3 monitor");
    lines
}

fn both(script: &[Vec<&str>]) -> Vec<String> {
    let redis = ServerProcess::redis();
    let respite = respite::TestServer::start().expect("start");
    let want = watch(redis.port, script);
    let got = watch(respite.port(), script);
    assert_eq!(got, want, "respite (left) vs redis-server (right)");
    got
}

fn cmds(lines: &[&str]) -> Vec<Vec<&'static str>> {
    lines
        .iter()
        .map(|l| {
            let l: &'static str = Box::leak(l.to_string().into_boxed_str());
            l.split(' ').collect()
        })
        .collect()
}

#[test]
fn monitor_lines_match_redis() {
    let mut script = cmds(&[
        "SET foo bar",
        "GET foo",
        "SELECT 3",
        "INCR n",
        "SELECT 0",
        "PING",
        "NOSUCHCOMMAND x",
        "GET",
        "CONFIG GET maxmemory",
        "CLIENT ID",
        "CLIENT LIST",
        "AUTH not-real",
        "AUTH user not-a-password",
        "HELLO 2 AUTH not-real not-a-password",
        "MIGRATE 127.0.0.1 1 key 9 5000 AUTH2 user password",
        "MULTI",
        "SET x 1",
        "INCR x",
        "EXEC",
        "MULTI",
        "NOSUCHCOMMAND",
        "EXEC",
        "EXEC",
        "BLPOP nolist 0.01",
    ]);
    // Arguments that need quoting, and a script's calls.
    script.push(vec!["SET", "quote\"me", "a b\r\n\t\\ \x01\x7f"]);
    script.push(vec![
        "EVAL",
        "redis.call('set', KEYS[1], ARGV[1]); redis.call('select', '2'); return redis.call('get', KEYS[1])",
        "1",
        "foo",
        "bar",
    ]);
    script.push(vec!["EVAL", "return 1", "x"]);
    script.push(vec![
        "FUNCTION",
        "LOAD",
        "#!lua name=mon\nredis.register_function('f', function() return redis.call('set', 'foo', 'baz') end)",
    ]);
    script.push(vec!["FCALL", "f", "0"]);
    let lines = both(&script);
    // What the expected lines must include (so the comparison is not vacuous).
    for want in [
        "[0 C] \"SET\" \"foo\" \"bar\"",
        "[3 C] \"INCR\" \"n\"",
        "[0 C] \"AUTH\" \"(redacted)\" \"(redacted)\"",
        "[0 lua] \"set\" \"foo\" \"bar\"",
        "[2 lua] \"get\" \"foo\"",
        "[0 lua] \"set\" \"foo\" \"baz\"",
        "[0 C] \"MULTI\"",
        "[0 C] \"EXEC\"",
    ] {
        assert!(lines.iter().any(|l| l == want), "{want} not in {lines:#?}");
    }
    assert!(!lines.iter().any(|l| l.contains("CONFIG")), "{lines:#?}");
    assert!(!lines.iter().any(|l| l.contains("NOSUCH")), "{lines:#?}");
}

#[test]
fn blocked_command_is_shown_once() {
    for port_of in [0, 1] {
        let redis;
        let respite;
        let port = if port_of == 0 {
            redis = ServerProcess::redis();
            redis.port
        } else {
            respite = respite::TestServer::start().expect("start");
            respite.port()
        };
        let mut m = Wire::connect_port(port);
        assert_eq!(m.cmd("MONITOR"), "+OK\r\n");
        let mut b = Wire::connect_port(port);
        b.send(&["BLPOP", "bl", "0"]);
        let mut c = Wire::connect_port(port);
        common::wait_until("blocked", || {
            c.cmd("INFO clients").contains("blocked_clients:1")
        });
        assert_eq!(c.cmd("LPUSH bl 1"), ":1\r\n");
        assert!(b.frame().contains("bl"));
        c.cmd("ECHO the-end");
        let mut seen = Vec::new();
        loop {
            let l = normalise(&m.frame());
            if l.contains("the-end") {
                break;
            }
            if !l.contains("\"INFO\"") {
                seen.push(l);
            }
        }
        assert_eq!(
            seen,
            [
                "[0 C] \"BLPOP\" \"bl\" \"0\"",
                "[0 C] \"LPUSH\" \"bl\" \"1\""
            ],
            "port kind {port_of}"
        );
    }
}

/// What a monitoring connection answers, on both servers.
fn monitor_session(port: u16) -> Vec<String> {
    let mut m = Wire::connect_port(port);
    let mut out = vec![m.cmd("MONITOR")];
    for line in ["GET k", "SET k v", "PING", "ECHO hi"] {
        m.send_line(line);
        out.push(m.frame());
        if line == "PING" || line == "ECHO hi" {
            // Its own command, fed to itself after the reply.
            out.push(normalise(&m.frame()));
        }
    }
    // A second MONITOR: no reply at all; the PING's reply comes next.
    m.send_line("MONITOR");
    m.send_line("PING");
    out.push(m.frame());
    out.push(normalise(&m.frame()));
    out.push(
        m.cmd("CLIENT INFO")
            .split(' ')
            .find(|f| f.starts_with("flags="))
            .unwrap_or_default()
            .to_string(),
    );
    out.push(normalise(&m.frame()));
    out.push(m.cmd("RESET"));
    let mut c = Wire::connect_port(port);
    c.cmd("SET other 1");
    // No monitor line since RESET: the next frame is this reply.
    out.push(m.cmd("GET other"));
    out
}

#[test]
fn monitoring_connection_answers_as_redis() {
    let redis = ServerProcess::redis();
    let respite = respite::TestServer::start().expect("start");
    let want = monitor_session(redis.port);
    assert!(want[1].contains("Replica can't interact with the keyspace"));
    assert_eq!(monitor_session(respite.port()), want);
}

/// CLIENT LIST as `field → value` for the client named `name`, with the values that
/// differ by nature between servers and runs (ids, ports, times, buffer sizes) masked.
fn listed(c: &mut Wire, name: &str) -> BTreeMap<String, String> {
    let list = c.cmd("CLIENT LIST");
    let line = list
        .lines()
        .find(|l| l.contains(&format!(" name={name} ")))
        .unwrap_or_else(|| panic!("no {name} in {list}"));
    line.split(' ')
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| {
            // 7.2's and 7.4's fields that 7.0.15 (the oracle) does not print (7.4's
            // `watch=` is checked in tests/redis74.rs).
            !matches!(*k, "lib-name" | "lib-ver" | "watch")
        })
        .map(|(k, v)| {
            let masked = matches!(
                k,
                "id" | "addr"
                    | "laddr"
                    | "fd"
                    | "age"
                    | "idle"
                    | "qbuf-free"
                    | "argv-mem"
                    | "rbs"
                    | "rbp"
                    | "tot-mem"
                    | "multi-mem"
            );
            (
                k.to_string(),
                if masked { "*".into() } else { v.to_string() },
            )
        })
        .collect()
}

fn client_states(port: u16) -> Vec<BTreeMap<String, String>> {
    let mut admin = Wire::connect_port(port);
    let mut conns = Vec::new();
    let mut named = |name: &str, setup: &[&str], wait_reply: bool| {
        let mut w = Wire::connect_port(port);
        w.cmd(&format!("CLIENT SETNAME {name}"));
        for (i, line) in setup.iter().enumerate() {
            w.send_line(line);
            if wait_reply || i + 1 < setup.len() {
                w.frame_bytes();
            }
        }
        conns.push(w);
    };
    named("plain", &[], true);
    named("mon", &["MONITOR"], true);
    named("sub", &["SUBSCRIBE a", "PSUBSCRIBE p*"], true);
    named("tx", &["MULTI", "SET a 1"], true);
    named("noevict", &["CLIENT NO-EVICT on"], true);
    named("db5", &["SELECT 5", "GET k"], true);
    named("blocked", &["BLPOP nokey 0"], false);
    common::wait_until("blocked", || {
        admin.cmd("INFO clients").contains("blocked_clients:1")
    });
    let out = ["plain", "mon", "sub", "tx", "noevict", "db5", "blocked"]
        .iter()
        .map(|n| listed(&mut admin, n))
        .collect();
    drop(conns);
    out
}

#[test]
fn client_list_fields_and_flags_match_redis() {
    let redis = ServerProcess::redis();
    let respite = respite::TestServer::start().expect("start");
    let want = client_states(redis.port);
    let got = client_states(respite.port());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "respite (left) vs redis-server (right)");
    }
    assert_eq!(want[1]["flags"], "O");
    assert_eq!(want[6]["flags"], "b");
}

/// Aborted transactions, as Redis 7.2 shows them: MULTI, then EXEC alone whether EXEC
/// finds the transaction flagged (`execCommand`), is refused before it runs (OOM here:
/// `rejectCommand` → `execCommandAbort` feeds EXEC), or finds a watched key touched; the
/// queued commands never ran and are never shown.
fn aborted_transactions(port: u16) -> Vec<String> {
    let mut m = Wire::connect_port(port);
    assert_eq!(m.cmd("MONITOR"), "+OK\r\n");
    let mut c = Wire::connect_port(port);
    let mut admin = Wire::connect_port(port);
    let mut replies = Vec::new();
    let mut run = |w: &mut Wire, args: &[&str]| {
        w.send(args);
        replies.push(String::from_utf8_lossy(&w.frame_bytes()).into_owned());
    };
    // Refused EXEC: memory ran out after a write was queued.
    run(&mut c, &["MULTI"]);
    run(&mut c, &["SET", "x", "1"]);
    run(&mut admin, &["CONFIG", "SET", "maxmemory", "1"]);
    run(&mut c, &["EXEC"]);
    run(&mut admin, &["CONFIG", "SET", "maxmemory", "0"]);
    // Flagged while queueing.
    run(&mut c, &["MULTI"]);
    run(&mut c, &["SET", "x"]);
    run(&mut c, &["SET", "x", "2"]);
    run(&mut c, &["EXEC"]);
    // A touched watched key.
    run(&mut c, &["WATCH", "w"]);
    run(&mut admin, &["SET", "w", "1"]);
    run(&mut c, &["MULTI"]);
    run(&mut c, &["SET", "x", "3"]);
    run(&mut c, &["EXEC"]);
    run(&mut c, &["ECHO", "the-end"]);
    let mut lines = replies;
    loop {
        let l = normalise(&String::from_utf8_lossy(&m.frame_bytes()));
        if l.ends_with("\"ECHO\" \"the-end\"") {
            return lines;
        }
        lines.push(l);
    }
}

#[test]
fn aborted_transactions_show_multi_and_exec_only() {
    let redis = ServerProcess::redis();
    let respite = respite::TestServer::start().expect("start");
    let want = aborted_transactions(redis.port);
    let got = aborted_transactions(respite.port());
    assert_eq!(got, want, "respite (left) vs redis-server (right)");
    assert_eq!(
        got.iter().filter(|l| *l == "[0 C] \"EXEC\"").count(),
        3,
        "{got:#?}"
    );
    assert!(got
        .iter()
        .any(|l| l.starts_with("-EXECABORT") && l.contains("OOM")));
}
