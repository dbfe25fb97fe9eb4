//! Hostile-client audit (2026-12), findings 6, 7 and 13 and the `busy-reply-threshold 0`
//! note: no script, DEBUG SLEEP or signal can wedge the server. Every test drives the real
//! binary through sockets (`--threads 1` too) and waits on conditions with generous
//! timeouts; a wedge shows as a timeout, never as a hang of the test.

mod common;

use common::{wait_busy, wait_ping, Conn, Frame, ServerProcess, PATIENCE};
use std::time::{Duration, Instant};

/// The commands Redis serves while a script is timed out (`allow-busy`) are served at once
/// here too, and take no keyspace gate: finding 6 (they waited on the gate forever).
#[test]
fn audit_06_allow_busy_commands_are_served_while_busy() {
    let s = ServerProcess::respite(&[]);
    let _script = start_loop(&s, 50);
    let mut c = s.conn();
    c.set_timeout(PATIENCE);
    assert!(c.cmd("PING").is_error("BUSY "));
    assert!(c.cmd("GET k").is_error("BUSY "));
    // AUTH without a password configured: Redis's error, not BUSY and not a hang.
    assert!(c.cmd("AUTH pw").is_error("ERR AUTH"), "AUTH");
    assert!(matches!(c.cmd("HELLO 3"), Frame::Map(_)), "HELLO 3");
    assert!(
        matches!(c.cmd("HELLO 2 SETNAME busyclient"), Frame::Array(_)),
        "HELLO 2"
    );
    assert_eq!(c.cmd("MULTI"), Frame::Simple("OK".into()));
    assert!(c.cmd("SET k v").is_error("BUSY "));
    assert_eq!(c.cmd("DISCARD"), Frame::Simple("OK".into()));
    assert_eq!(c.cmd("UNWATCH"), Frame::Simple("OK".into()));
    assert_eq!(c.cmd("RESET"), Frame::Simple("RESET".into()));
    // Redis answers FUNCTION STATS with the EVAL flavour of BUSY while an EVAL runs.
    assert!(c.cmd("FUNCTION STATS").is_error("BUSY "));
    // Plain SHUTDOWN (it would save) is refused with the BUSY error, as in Redis.
    assert!(c.cmd("SHUTDOWN").is_error("BUSY "));
    assert!(c.cmd("SHUTDOWN SAVE").is_error("BUSY "));
    assert_eq!(c.cmd("QUIT"), Frame::Simple("OK".into()));
}

/// Finding 6: SHUTDOWN NOSAVE ends the process while a script is BUSY.
#[test]
fn audit_06_shutdown_nosave_ends_a_busy_script() {
    let mut s = ServerProcess::respite(&[]);
    let _script = start_loop(&s, 50);
    let mut c = s.conn();
    c.send_line("SHUTDOWN NOSAVE").expect("send");
    assert!(c.read().is_err(), "SHUTDOWN NOSAVE gets no reply");
    assert!(s.exited(PATIENCE).is_some(), "the server did not exit");
}

/// Finding 6: SIGTERM (and SIGINT) end the process while a script is BUSY.
#[test]
fn audit_06_sigterm_and_sigint_end_a_busy_script() {
    for sig in ["-TERM", "-INT"] {
        let mut s = ServerProcess::respite(&[]);
        let _script = start_loop(&s, 50);
        s.signal(sig);
        assert!(
            s.exited(PATIENCE).is_some(),
            "{sig}: the server did not exit"
        );
    }
}

/// Finding 6 with the durable engine: SIGTERM during a write script that never ends stops
/// the server, and what was acknowledged before is durable (appendfsync always).
#[test]
fn audit_06_sigterm_during_a_write_script_keeps_acknowledged_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8 path");
    let args = ["--engine", "redb", "--dir", d, "--appendfsync", "always"];
    let mut s = ServerProcess::respite(&args);
    let mut c = s.conn();
    assert_eq!(c.cmd("SET acked 1"), Frame::Simple("OK".into()));
    assert_eq!(
        c.cmd("CONFIG SET busy-reply-threshold 50"),
        Frame::Simple("OK".into())
    );
    let mut w = s.conn();
    w.send(&[
        b"EVAL".to_vec(),
        b"redis.call('SET', 'half', 'done') while true do end".to_vec(),
        b"0".to_vec(),
    ])
    .expect("send");
    wait_busy(s.port);
    assert!(c.cmd("SCRIPT KILL").is_error("UNKILLABLE "));
    s.signal("-TERM");
    assert!(s.exited(PATIENCE).is_some(), "the server did not exit");
    drop(s);
    let s = ServerProcess::respite(&args);
    let mut c = s.conn();
    assert_eq!(c.cmd("GET acked"), Frame::Bulk(b"1".to_vec()));
    // The script never finished: none of its writes took effect.
    assert_eq!(c.cmd("GET half"), Frame::NullBulk);
}

/// Finding 7: with `--threads 1` a runaway script still lets other clients get BUSY,
/// SCRIPT KILL it, and the killed script's client gets its error.
#[test]
fn audit_07_threads_1_busy_script_can_be_killed() {
    let s = ServerProcess::respite(&["--threads", "1"]);
    let mut script = start_loop(&s, 50);
    let mut c = s.conn();
    assert!(c.cmd("PING").is_error("BUSY "));
    assert_eq!(c.cmd("SCRIPT KILL"), Frame::Simple("OK".into()));
    let killed = script.read().expect("the script's reply");
    assert!(
        matches!(&killed, Frame::Error(e) if e.contains("Script killed by user")),
        "{killed}"
    );
    wait_ping(s.port, "after SCRIPT KILL", |r| {
        *r == Frame::Simple("PONG".into())
    });
    assert_eq!(script.cmd("PING"), Frame::Simple("PONG".into()));
}

/// Finding 7: with `--threads 1`, SHUTDOWN NOSAVE and SIGTERM end a BUSY server.
#[test]
fn audit_07_threads_1_shutdown_nosave_and_sigterm_end_a_busy_script() {
    let mut s = ServerProcess::respite(&["--threads", "1"]);
    let _script = start_loop(&s, 50);
    let mut c = s.conn();
    c.send_line("SHUTDOWN NOSAVE").expect("send");
    assert!(c.read().is_err(), "SHUTDOWN NOSAVE gets no reply");
    assert!(
        s.exited(PATIENCE).is_some(),
        "SHUTDOWN NOSAVE: the server did not exit"
    );

    let mut s = ServerProcess::respite(&["--threads", "1"]);
    let _script = start_loop(&s, 50);
    s.signal("-TERM");
    assert!(
        s.exited(PATIENCE).is_some(),
        "SIGTERM: the server did not exit"
    );
}

/// Finding 13: DEBUG is refused by default, as in Redis (`enable-debug-command no`).
#[test]
fn audit_13_debug_is_refused_by_default() {
    let s = ServerProcess::respite(&[]);
    let mut c = s.conn();
    assert_eq!(
        c.cmd("CONFIG GET enable-debug-command"),
        Frame::Array(vec![
            Frame::Bulk(b"enable-debug-command".to_vec()),
            Frame::Bulk(b"no".to_vec()),
        ])
    );
    let r = c.cmd("DEBUG SLEEP 1000000000");
    assert!(r.is_error("ERR DEBUG command not allowed"), "{r}");
    assert_eq!(c.cmd("PING"), Frame::Simple("PONG".into()));
    // Refused before MULTI queueing, as Redis refuses protected commands.
    assert_eq!(c.cmd("MULTI"), Frame::Simple("OK".into()));
    assert!(c
        .cmd("DEBUG SLEEP 0")
        .is_error("ERR DEBUG command not allowed"));
    assert_eq!(
        c.cmd("EXEC"),
        Frame::Error("EXECABORT Transaction discarded because of previous errors.".into())
    );
}

/// Finding 13: where DEBUG is enabled, `DEBUG SLEEP 1e9` still cannot outlive SHUTDOWN or
/// SIGTERM (`--threads 1` too): the sleep holds the keyspace, but SHUTDOWN takes no gate.
#[test]
fn audit_13_debug_sleep_cannot_outlive_shutdown() {
    for threads in ["1", "2"] {
        for how in ["SHUTDOWN", "SIGTERM"] {
            let mut s = ServerProcess::respite(&[
                "--threads",
                threads,
                "--set",
                "enable-debug-command=local",
            ]);
            let mut sleeper = s.conn();
            sleeper.send_line("DEBUG SLEEP 1000000000").expect("send");
            // The sleep holds the whole keyspace: a data command waits behind it.
            let mut waiter = s.conn();
            waiter.send_line("GET k").expect("send");
            std::thread::sleep(Duration::from_millis(200));
            if how == "SHUTDOWN" {
                let mut c = s.conn();
                c.send_line("SHUTDOWN").expect("send");
                assert!(c.read().is_err(), "SHUTDOWN gets no reply");
            } else {
                s.signal("-TERM");
            }
            assert!(
                s.exited(PATIENCE).is_some(),
                "--threads {threads}, {how}: DEBUG SLEEP outlived it"
            );
        }
    }
}

/// `busy-reply-threshold 0` means BUSY at once, as in Redis (it meant "never BUSY": other
/// clients queued behind the script with no reply). `lua-time-limit` is its alias.
#[test]
fn busy_reply_threshold_0_means_busy_at_once() {
    let s = ServerProcess::respite(&[]);
    let mut c = s.conn();
    assert_eq!(
        c.cmd("CONFIG SET lua-time-limit 0"),
        Frame::Simple("OK".into())
    );
    assert_eq!(
        c.cmd("CONFIG GET busy-reply-threshold"),
        Frame::Array(vec![
            Frame::Bulk(b"busy-reply-threshold".to_vec()),
            Frame::Bulk(b"0".to_vec()),
        ])
    );
    let mut script = start_loop(&s, 0);
    assert!(c.cmd("PING").is_error("BUSY "));
    assert_eq!(c.cmd("SCRIPT KILL"), Frame::Simple("OK".into()));
    assert!(script.read().is_ok());
    wait_ping(s.port, "after SCRIPT KILL", |r| {
        *r == Frame::Simple("PONG".into())
    });
}

/// Sets `busy-reply-threshold`, starts `while true do end` on a connection of its own
/// (returned with its reply unread) and waits until the server answers BUSY.
fn start_loop(s: &ServerProcess, threshold_ms: u64) -> Conn {
    let mut c = s.conn();
    assert_eq!(
        c.cmd(&format!("CONFIG SET busy-reply-threshold {threshold_ms}")),
        Frame::Simple("OK".into())
    );
    c.send(&[
        b"EVAL".to_vec(),
        b"while true do end".to_vec(),
        b"0".to_vec(),
    ])
    .expect("send");
    wait_busy(s.port);
    c
}

/// Finding 7: with `--threads 1`, commands queued behind a script that has not yet timed
/// out wait off the only worker: SCRIPT KILL from another client is still served, and the
/// waiters then run.
#[test]
fn audit_07_threads_1_waiters_do_not_pin_the_worker() {
    let s = ServerProcess::respite(&["--threads", "1"]);
    let mut c = s.conn();
    assert_eq!(
        c.cmd("CONFIG SET busy-reply-threshold 600000"),
        Frame::Simple("OK".into())
    );
    let mut script = s.conn();
    script
        .send(&[
            b"EVAL".to_vec(),
            b"while true do end".to_vec(),
            b"0".to_vec(),
        ])
        .expect("send");
    // Wait until the script runs: FUNCTION STATS answers BUSY (EVAL flavour) only then.
    let deadline = Instant::now() + PATIENCE;
    while !c.cmd("FUNCTION STATS").is_error("BUSY ") {
        assert!(Instant::now() < deadline, "the script never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut waiters: Vec<Conn> = (0..4).map(|_| s.conn()).collect();
    for w in &mut waiters {
        w.send_line("GET k").expect("send");
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(s.conn().cmd("SCRIPT KILL"), Frame::Simple("OK".into()));
    assert!(script.read().is_ok(), "the killed script's reply");
    for w in &mut waiters {
        assert_eq!(w.read().expect("GET reply"), Frame::NullBulk);
    }
}

/// Finding 6: EXEC of a transaction with WATCHed keys, refused as BUSY, must forget the
/// watches. Where the script holds the watched key's shard (it read the key) that waits
/// for the script, off the worker (`--threads 1`): SCRIPT KILL is still served and EXEC
/// then gets its EXECABORT.
#[test]
fn audit_06_exec_with_watched_keys_during_busy_does_not_wedge() {
    let s = ServerProcess::respite(&["--threads", "1"]);
    let mut w = s.conn();
    assert_eq!(w.cmd("WATCH k"), Frame::Simple("OK".into()));
    assert_eq!(w.cmd("MULTI"), Frame::Simple("OK".into()));
    assert_eq!(w.cmd("GET k"), Frame::Simple("QUEUED".into()));
    let mut c = s.conn();
    assert_eq!(
        c.cmd("CONFIG SET busy-reply-threshold 50"),
        Frame::Simple("OK".into())
    );
    let mut script = s.conn();
    script
        .send(&[
            b"EVAL".to_vec(),
            b"redis.call('EXISTS', KEYS[1]) while true do end".to_vec(),
            b"1".to_vec(),
            b"k".to_vec(),
        ])
        .expect("send");
    wait_busy(s.port);
    w.send_line("EXEC").expect("send");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(s.conn().cmd("SCRIPT KILL"), Frame::Simple("OK".into()));
    assert!(script.read().is_ok(), "the killed script's reply");
    let r = w.read().expect("EXEC reply");
    assert!(
        r.is_error("EXECABORT Transaction discarded because of: BUSY "),
        "{r}"
    );
    assert_eq!(w.cmd("PING"), Frame::Simple("PONG".into()));
}
