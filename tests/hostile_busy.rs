//! Hostile-client audit (2026-12), findings 6, 7 and 13 and the `busy-reply-threshold 0`
//! note: no script, DEBUG SLEEP or signal can wedge the server. Every test drives the real
//! binary through sockets (`--threads 1` too) and waits on conditions with generous
//! timeouts; a wedge shows as a timeout, never as a hang of the test.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{Conn, Frame};

/// Long enough that only a real wedge exceeds it on a loaded 2-core box.
const PATIENCE: Duration = Duration::from_secs(30);

/// The respite binary, `--port 0` (its port read from stdout); killed on drop.
struct Respite {
    child: Child,
    port: u16,
}

impl Respite {
    fn start(extra: &[&str]) -> Respite {
        let mut child = Command::new(env!("CARGO_BIN_EXE_respite"))
            .args(["--port", "0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn respite");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read port");
        let port = line.trim().parse().expect("port on stdout");
        Respite { child, port }
    }

    fn conn(&self) -> Conn {
        Conn::connect(self.port).expect("connect")
    }

    /// Waits (up to [`PATIENCE`]) for the process to exit; its status, or `None`.
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + PATIENCE;
        while Instant::now() < deadline {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill {sig} failed");
    }
}

impl Drop for Respite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn err_starts(f: &Frame, prefix: &str) -> bool {
    matches!(f, Frame::Error(e) if e.starts_with(prefix))
}

/// Polls PING on a fresh connection until its reply satisfies `ok` (a wedged server makes
/// the read time out, which fails the test).
fn wait_ping(port: u16, what: &str, ok: impl Fn(&Frame) -> bool) {
    let mut c = Conn::connect(port).expect("connect");
    let deadline = Instant::now() + PATIENCE;
    loop {
        let r = c.call(&[b"PING".to_vec()]).expect("PING reply");
        if ok(&r) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: last PING reply {r}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn wait_busy(port: u16) {
    wait_ping(port, "waiting for BUSY", |r| err_starts(r, "BUSY "));
}

/// The commands Redis serves while a script is timed out (`allow-busy`) are served at once
/// here too, and take no keyspace gate: finding 6 (they waited on the gate forever).
#[test]
fn audit_06_allow_busy_commands_are_served_while_busy() {
    let s = Respite::start(&[]);
    let _script = start_loop(&s, 50);
    let mut c = s.conn();
    c.set_timeout(PATIENCE);
    assert!(err_starts(&c.cmd("PING"), "BUSY "));
    assert!(err_starts(&c.cmd("GET k"), "BUSY "));
    // AUTH without a password configured: Redis's error, not BUSY and not a hang.
    assert!(err_starts(&c.cmd("AUTH pw"), "ERR AUTH"), "AUTH");
    assert!(matches!(c.cmd("HELLO 3"), Frame::Map(_)), "HELLO 3");
    assert!(
        matches!(c.cmd("HELLO 2 SETNAME busyclient"), Frame::Array(_)),
        "HELLO 2"
    );
    assert_eq!(c.cmd("MULTI"), Frame::Simple("OK".into()));
    assert!(err_starts(&c.cmd("SET k v"), "BUSY "));
    assert_eq!(c.cmd("DISCARD"), Frame::Simple("OK".into()));
    assert_eq!(c.cmd("UNWATCH"), Frame::Simple("OK".into()));
    assert_eq!(c.cmd("RESET"), Frame::Simple("RESET".into()));
    // Redis answers FUNCTION STATS with the EVAL flavour of BUSY while an EVAL runs.
    assert!(err_starts(&c.cmd("FUNCTION STATS"), "BUSY "));
    // Plain SHUTDOWN (it would save) is refused with the BUSY error, as in Redis.
    assert!(err_starts(&c.cmd("SHUTDOWN"), "BUSY "));
    assert!(err_starts(&c.cmd("SHUTDOWN SAVE"), "BUSY "));
    assert_eq!(c.cmd("QUIT"), Frame::Simple("OK".into()));
}

/// Finding 6: SHUTDOWN NOSAVE ends the process while a script is BUSY.
#[test]
fn audit_06_shutdown_nosave_ends_a_busy_script() {
    let mut s = Respite::start(&[]);
    let _script = start_loop(&s, 50);
    let mut c = s.conn();
    c.send_line("SHUTDOWN NOSAVE").expect("send");
    assert!(c.read().is_err(), "SHUTDOWN NOSAVE gets no reply");
    assert!(s.exited().is_some(), "the server did not exit");
}

/// Finding 6: SIGTERM (and SIGINT) end the process while a script is BUSY.
#[test]
fn audit_06_sigterm_and_sigint_end_a_busy_script() {
    for sig in ["-TERM", "-INT"] {
        let mut s = Respite::start(&[]);
        let _script = start_loop(&s, 50);
        s.signal(sig);
        assert!(s.exited().is_some(), "{sig}: the server did not exit");
    }
}

/// Finding 6 with the durable engine: SIGTERM during a write script that never ends stops
/// the server, and what was acknowledged before is durable (appendfsync always).
#[test]
fn audit_06_sigterm_during_a_write_script_keeps_acknowledged_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8 path");
    let args = ["--engine", "redb", "--dir", d, "--appendfsync", "always"];
    let mut s = Respite::start(&args);
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
    assert!(err_starts(&c.cmd("SCRIPT KILL"), "UNKILLABLE "));
    s.signal("-TERM");
    assert!(s.exited().is_some(), "the server did not exit");
    drop(s);
    let s = Respite::start(&args);
    let mut c = s.conn();
    assert_eq!(c.cmd("GET acked"), Frame::Bulk(b"1".to_vec()));
    // The script never finished: none of its writes took effect.
    assert_eq!(c.cmd("GET half"), Frame::NullBulk);
}

/// Finding 7: with `--threads 1` a runaway script still lets other clients get BUSY,
/// SCRIPT KILL it, and the killed script's client gets its error.
#[test]
fn audit_07_threads_1_busy_script_can_be_killed() {
    let s = Respite::start(&["--threads", "1"]);
    let mut script = start_loop(&s, 50);
    let mut c = s.conn();
    assert!(err_starts(&c.cmd("PING"), "BUSY "));
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
    let mut s = Respite::start(&["--threads", "1"]);
    let _script = start_loop(&s, 50);
    let mut c = s.conn();
    c.send_line("SHUTDOWN NOSAVE").expect("send");
    assert!(c.read().is_err(), "SHUTDOWN NOSAVE gets no reply");
    assert!(
        s.exited().is_some(),
        "SHUTDOWN NOSAVE: the server did not exit"
    );

    let mut s = Respite::start(&["--threads", "1"]);
    let _script = start_loop(&s, 50);
    s.signal("-TERM");
    assert!(s.exited().is_some(), "SIGTERM: the server did not exit");
}

/// Finding 13: DEBUG is refused by default, as in Redis (`enable-debug-command no`).
#[test]
fn audit_13_debug_is_refused_by_default() {
    let s = Respite::start(&[]);
    let mut c = s.conn();
    assert_eq!(
        c.cmd("CONFIG GET enable-debug-command"),
        Frame::Array(vec![
            Frame::Bulk(b"enable-debug-command".to_vec()),
            Frame::Bulk(b"no".to_vec()),
        ])
    );
    let r = c.cmd("DEBUG SLEEP 1000000000");
    assert!(err_starts(&r, "ERR DEBUG command not allowed"), "{r}");
    assert_eq!(c.cmd("PING"), Frame::Simple("PONG".into()));
    // Refused before MULTI queueing, as Redis refuses protected commands.
    assert_eq!(c.cmd("MULTI"), Frame::Simple("OK".into()));
    assert!(err_starts(
        &c.cmd("DEBUG SLEEP 0"),
        "ERR DEBUG command not allowed"
    ));
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
            let mut s =
                Respite::start(&["--threads", threads, "--set", "enable-debug-command=local"]);
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
                s.exited().is_some(),
                "--threads {threads}, {how}: DEBUG SLEEP outlived it"
            );
        }
    }
}

/// `busy-reply-threshold 0` means BUSY at once, as in Redis (it meant "never BUSY": other
/// clients queued behind the script with no reply). `lua-time-limit` is its alias.
#[test]
fn busy_reply_threshold_0_means_busy_at_once() {
    let s = Respite::start(&[]);
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
    assert!(err_starts(&c.cmd("PING"), "BUSY "));
    assert_eq!(c.cmd("SCRIPT KILL"), Frame::Simple("OK".into()));
    assert!(script.read().is_ok());
    wait_ping(s.port, "after SCRIPT KILL", |r| {
        *r == Frame::Simple("PONG".into())
    });
}

/// Sets `busy-reply-threshold`, starts `while true do end` on a connection of its own
/// (returned with its reply unread) and waits until the server answers BUSY.
fn start_loop(s: &Respite, threshold_ms: u64) -> Conn {
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
    let s = Respite::start(&["--threads", "1"]);
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
    while !err_starts(&c.cmd("FUNCTION STATS"), "BUSY ") {
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
    let s = Respite::start(&["--threads", "1"]);
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
        err_starts(&r, "EXECABORT Transaction discarded because of: BUSY "),
        "{r}"
    );
    assert_eq!(w.cmd("PING"), Frame::Simple("PONG".into()));
}
