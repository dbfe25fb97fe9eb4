//! The server surface against Redis 7.2 (issue 15): the commands respite does not
//! implement (README table, each answers "unknown command" at once), RESET and WATCH
//! state, WAITAOF with the durable engine, LOLWUT. Where a redis-server 7.0 can be the
//! oracle (7.0 = 7.2 there), the same script runs against both.

mod common;

use common::{durable_server, Conn, Frame, ServerProcess};
use respite::TestServer;
use std::collections::BTreeMap;
use std::time::Duration;

const COMMANDS_72: &str = include_str!("../conformance/redis-7.2-commands.txt");
const README: &str = include_str!("../README.md");
const BEGIN: &str = "<!-- BEGIN generated: redis-7.2 commands respite lacks -->";
const END: &str = "<!-- END generated -->";

fn ok() -> Frame {
    Frame::Simple("OK".into())
}

fn server() -> TestServer {
    TestServer::start().expect("server starts")
}

fn conn(port: u16) -> Conn {
    Conn::connect(port).expect("connect")
}

fn args(words: &[&str]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

fn error_text(f: &Frame) -> &str {
    match f {
        Frame::Error(e) => e,
        other => panic!("expected an error, got {other}"),
    }
}

/// Redis 7.2's command names (`container|sub` for subcommands).
fn redis_72_commands() -> Vec<&'static str> {
    COMMANDS_72
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

fn implemented(name: &str) -> bool {
    respite::cmd::registry().lookup(name.as_bytes()).is_some()
}

/// The 7.2 commands respite lacks: whole commands, and subcommands of containers it has.
fn missing() -> (Vec<&'static str>, BTreeMap<&'static str, Vec<&'static str>>) {
    let mut whole = Vec::new();
    let mut subs: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for name in redis_72_commands() {
        if implemented(name) {
            continue;
        }
        match name.split_once('|') {
            None => whole.push(name),
            Some((container, sub)) if implemented(container) => {
                subs.entry(container).or_default().push(sub)
            }
            Some(_) => {} // its container is missing as a whole
        }
    }
    (whole, subs)
}

/// The README table, generated from the command table so it cannot drift.
fn missing_table() -> String {
    let (whole, subs) = missing();
    let mut rows: BTreeMap<&str, String> = BTreeMap::new();
    for name in whole {
        let n = redis_72_commands()
            .iter()
            .filter(|c| c.starts_with(&format!("{name}|")))
            .count();
        let what = match n {
            0 => "the command".to_string(),
            n => format!("the command and its {n} subcommands"),
        };
        rows.insert(name, what);
    }
    for (container, list) in subs {
        let names: Vec<String> = list
            .iter()
            .map(|s| format!("`{} {}`", container.to_uppercase(), s.to_uppercase()))
            .collect();
        rows.insert(container, names.join(", "));
    }
    let mut out = String::from("| Command | Not implemented |\n|---|---|\n");
    for (name, what) in rows {
        out.push_str(&format!("| `{}` | {what} |\n", name.to_uppercase()));
    }
    out
}

#[test]
fn readme_table_of_missing_commands_is_current() {
    let table = missing_table();
    let section = README
        .split_once(BEGIN)
        .and_then(|(_, rest)| rest.split_once(END))
        .map(|(s, _)| s.trim_matches('\n'));
    assert_eq!(
        section,
        Some(table.trim_end_matches('\n')),
        "README.md's table of missing Redis 7.2 commands is stale; paste this between \
         the markers:\n{BEGIN}\n{table}{END}\n"
    );
}

#[test]
fn the_command_list_file_is_redis_72s() {
    let all = redis_72_commands();
    assert!(all.len() > 350, "{}", all.len());
    for must in [
        "waitaof",
        "cluster|myshardid",
        "client|no-touch",
        "get",
        "lolwut",
    ] {
        assert!(all.contains(&must), "{must}");
    }
    // Sentinel-only commands are not in a normal server's COMMAND LIST.
    assert!(!all.iter().any(|c| c.starts_with("sentinel")));
}

/// A plausible argument list for a command (what a client would send).
fn plausible(name: &str) -> Vec<&'static str> {
    match name {
        "acl" => vec!["setuser", "u1", "on", ">pw", "+@all"],
        "monitor" | "sync" | "readonly" | "readwrite" | "asking" | "bgrewriteaof" => vec![],
        "psync" => vec!["?", "-1"],
        "replconf" => vec!["listening-port", "6380"],
        "migrate" => vec!["127.0.0.1", "1", "k", "0", "1000"],
        "restore-asking" => vec!["k", "0", "payload"],
        "failover" => vec!["TO", "127.0.0.1", "1"],
        "latency" => vec!["latest"],
        "slowlog" => vec!["get", "10"],
        "module" => vec!["list"],
        "pfdebug" => vec!["getreg", "hll"],
        "pfselftest" => vec![],
        _ => vec!["k", "v", "1"],
    }
}

#[test]
fn every_missing_command_answers_unknown_at_once() {
    let (whole, subs) = missing();
    let srv = server();
    let mut c = conn(srv.port());
    c.set_timeout(Duration::from_secs(30));
    for name in &whole {
        let mut line = vec![*name];
        line.extend(plausible(name));
        let r = c
            .call(&args(&line))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = format!("ERR unknown command '{name}', with args beginning with:");
        assert!(error_text(&r).starts_with(&want), "{name}: {r}");
        assert_eq!(c.cmd("PING"), Frame::Simple("PONG".into()), "after {name}");
    }
    for (container, list) in &subs {
        for sub in list {
            let line = args(&[container, sub, "k", "v"]);
            let r = c
                .call(&line)
                .unwrap_or_else(|e| panic!("{container} {sub}: {e}"));
            let want = format!(
                "ERR unknown subcommand '{sub}'. Try {} HELP.",
                container.to_uppercase()
            );
            assert_eq!(error_text(&r), want, "{container} {sub}");
            assert_eq!(c.cmd("PING"), Frame::Simple("PONG".into()));
        }
    }
    // The same inside MULTI: refused at once, and the transaction is doomed.
    c.cmd("MULTI");
    let r = c.call(&args(&[whole[0]])).unwrap();
    assert!(error_text(&r).starts_with("ERR unknown command"), "{r}");
    assert!(error_text(&c.cmd("EXEC")).starts_with("EXECABORT"));
}

/// A client's `CLIENT INFO` fields.
fn client_info(c: &mut Conn) -> BTreeMap<String, String> {
    let r = c.cmd("CLIENT INFO");
    let text = match &r {
        Frame::Bulk(b) | Frame::Verbatim(_, b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("CLIENT INFO: {other}"),
    };
    text.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The client state RESET clears, checked the same way on respite and on Redis.
fn reset_clears_state(port: u16) -> Vec<String> {
    let mut c = conn(port);
    let mut other = conn(port);
    let mut seen = Vec::new();
    c.cmd("FLUSHALL");
    c.cmd("CLIENT SETNAME test-client");
    c.cmd("SELECT 3");
    c.cmd("SUBSCRIBE ch");
    assert_eq!(c.cmd("RESET"), Frame::Simple("RESET".into()));
    // Not subscribed any more: an ordinary command works.
    assert_eq!(c.cmd("SET k v"), ok());
    // Back in db 0.
    assert_eq!(other.cmd("GET k"), Frame::Bulk(b"v".to_vec()));
    let info = client_info(&mut c);
    for f in ["name", "flags", "db", "sub", "psub", "multi", "resp"] {
        seen.push(format!("{f}={}", info[f]));
    }
    // RESP3 back to 2, CLIENT REPLY OFF back on.
    c.cmd("HELLO 3");
    c.send(&args(&["CLIENT", "REPLY", "OFF"])).unwrap();
    c.send(&args(&["RESET"])).unwrap();
    assert_eq!(c.read().unwrap(), Frame::Simple("RESET".into()));
    seen.push(format!("resp={}", client_info(&mut c)["resp"]));
    // MULTI is discarded, and a WATCH forgotten.
    c.cmd("WATCH k");
    c.cmd("MULTI");
    c.cmd("SET x 1");
    assert_eq!(c.cmd("RESET"), Frame::Simple("RESET".into()));
    let e = c.cmd("EXEC");
    seen.push(error_text(&e).to_string());
    other.cmd("SET k changed");
    c.cmd("MULTI");
    seen.push(format!("{}", c.cmd("EXEC")));
    seen
}

#[test]
fn reset_clears_client_state_as_redis_does() {
    let redis = ServerProcess::redis();
    let srv = server();
    let want = reset_clears_state(redis.port);
    let have = reset_clears_state(srv.port());
    assert_eq!(have, want);
    assert!(want.contains(&"name=".to_string()) && want.contains(&"flags=N".to_string()));
    // Redis 7.2 (not the 7.0 oracle) also drops NO-EVICT and NO-TOUCH; the library name
    // stays (it still describes the client).
    let mut c = conn(srv.port());
    c.cmd("CLIENT SETINFO LIB-NAME mylib");
    c.cmd("CLIENT NO-EVICT on");
    c.cmd("CLIENT NO-TOUCH on");
    assert_eq!(client_info(&mut c)["flags"], "eT");
    c.cmd("RESET");
    let info = client_info(&mut c);
    assert_eq!(
        (info["flags"].as_str(), info["lib-name"].as_str()),
        ("N", "mylib")
    );
}

#[test]
fn reset_drops_authentication() {
    let srv = TestServer::builder().password("s3cret").start().unwrap();
    let mut c = conn(srv.port());
    assert_eq!(c.cmd("AUTH s3cret"), ok());
    assert_eq!(c.cmd("SET k v"), ok());
    assert_eq!(c.cmd("RESET"), Frame::Simple("RESET".into()));
    assert!(error_text(&c.cmd("GET k")).starts_with("NOAUTH"));
    assert_eq!(c.cmd("AUTH s3cret"), ok());
    assert_eq!(c.cmd("GET k"), Frame::Bulk(b"v".to_vec()));
}

/// redis-py's `test_watch_exec_no_unwatch` and `test_watch_reset_unwatch`, server side:
/// EXEC forgets the watches (no UNWATCH needed), and so does RESET.
fn watch_forgotten(port: u16) -> Vec<String> {
    let mut a = conn(port);
    let mut b = conn(port);
    a.cmd("FLUSHALL");
    a.cmd("MSET a 1 b 2");
    let mut seen = Vec::new();
    a.cmd("WATCH a b");
    a.cmd("GET a");
    a.cmd("MULTI");
    a.cmd("SET c 3");
    seen.push(format!("{}", a.cmd("EXEC")));
    b.cmd("SET a 10");
    a.cmd("MULTI");
    a.cmd("GET a");
    seen.push(format!("{}", a.cmd("EXEC")));
    a.cmd("WATCH a");
    a.cmd("RESET");
    b.cmd("SET a 11");
    a.cmd("MULTI");
    a.cmd("GET a");
    seen.push(format!("{}", a.cmd("EXEC")));
    // Without either, the watch holds.
    a.cmd("WATCH a");
    b.cmd("SET a 12");
    a.cmd("MULTI");
    seen.push(format!("{}", a.cmd("EXEC")));
    seen
}

#[test]
fn watch_is_forgotten_by_exec_and_reset() {
    let redis = ServerProcess::redis();
    let srv = server();
    let want = watch_forgotten(redis.port);
    assert_eq!(watch_forgotten(srv.port()), want);
    assert_eq!(want[1], "*[\"10\"]");
}

#[test]
fn waitaof_without_the_durable_engine() {
    let srv = server();
    let mut c = conn(srv.port());
    assert_eq!(
        c.cmd("WAITAOF 0 0 0"),
        Frame::Array(vec![Frame::Int(0), Frame::Int(0)])
    );
    assert_eq!(
        error_text(&c.cmd("WAITAOF 1 0 0")),
        "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled."
    );
    assert_eq!(
        error_text(&c.cmd("WAITAOF 2 0 0")),
        "ERR value is out of range, value must between 0 and 1"
    );
    assert_eq!(
        error_text(&c.cmd("WAITAOF 0 -1 0")),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(
        error_text(&c.cmd("WAITAOF 0 0 -1")),
        "ERR timeout is negative"
    );
    let r = c
        .call(&args(&["EVAL", "return redis.call('waitaof',0,0,0)", "0"]))
        .unwrap();
    assert!(error_text(&r).contains("not allowed from script"), "{r}");
}

#[test]
fn waitaof_reports_the_local_fsync_of_the_durable_engine() {
    let dir = tempfile::tempdir().expect("tempdir");
    let srv = durable_server(dir.path(), "always");
    let mut c = conn(srv.port());
    assert_eq!(c.cmd("SET k v"), ok());
    let both = Frame::Array(vec![Frame::Int(1), Frame::Int(0)]);
    assert_eq!(c.cmd("WAITAOF 1 0 0"), both);
    assert_eq!(c.cmd("WAITAOF 0 0 100"), both);
    // No replica ever acknowledges: asking for one answers at once with none.
    assert_eq!(c.cmd("WAITAOF 1 1 0"), both);
    c.cmd("MULTI");
    c.cmd("SET k w");
    c.cmd("WAITAOF 1 0 0");
    match c.cmd("EXEC") {
        Frame::Array(v) => assert_eq!(v[1], both),
        other => panic!("EXEC: {other}"),
    }
}

#[test]
fn info_replication_matches_a_primary_without_replicas() {
    let redis = ServerProcess::redis();
    let srv = server();
    let fields = |port: u16| -> Vec<String> {
        let mut c = conn(port);
        let text = match c.cmd("INFO replication") {
            Frame::Bulk(b) | Frame::Verbatim(_, b) => String::from_utf8_lossy(&b).into_owned(),
            other => panic!("{other}"),
        };
        text.lines()
            .filter_map(|l| l.split_once(':'))
            // The replication id is random per server.
            .map(|(k, v)| match k {
                "master_replid" => format!("{k}:{}", v.len()),
                _ => format!("{k}:{v}"),
            })
            .collect()
    };
    assert_eq!(fields(srv.port()), fields(redis.port));
    // With min-replicas-to-write in force, the count of good replicas shows too.
    for port in [srv.port(), redis.port] {
        conn(port).cmd("CONFIG SET min-replicas-to-write 1");
    }
    let with_min = fields(srv.port());
    assert!(with_min.contains(&"min_slaves_good_slaves:0".to_string()));
    assert_eq!(with_min, fields(redis.port));
}

fn text(f: &Frame) -> String {
    match f {
        Frame::Bulk(b) | Frame::Verbatim(_, b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not text: {other}"),
    }
}

#[test]
fn lolwut_reports_the_claimed_version() {
    let srv = server();
    let mut c = conn(srv.port());
    let line = format!("Redis ver. {}\n", respite::REDIS_VERSION);
    assert_eq!(text(&c.cmd("LOLWUT")), line);
    assert_eq!(text(&c.cmd("LOLWUT VERSION 7")), line);
    assert_eq!(text(&c.cmd("LOLWUT VERSION 123 ignored")), line);
    // `VERSION` without a number is no option: the plain line.
    assert_eq!(text(&c.cmd("LOLWUT VERSION")), line);
    assert_eq!(
        error_text(&c.cmd("LOLWUT VERSION x")),
        "ERR value is not an integer or out of range"
    );
    // RESP3: a verbatim string of format txt.
    c.cmd("HELLO 3");
    assert_eq!(
        c.cmd("LOLWUT"),
        Frame::Verbatim("txt".into(), line.into_bytes())
    );
}

/// Splits LOLWUT art from the text under it (which names the server's version).
fn art_and_caption<'a>(s: &'a str, caption: &str) -> (&'a str, &'a str) {
    let at = s
        .rfind(caption)
        .unwrap_or_else(|| panic!("no {caption:?} in {s:?}"));
    (&s[..at], &s[at..])
}

#[test]
fn lolwut_5_and_6_draw_as_redis_does() {
    let redis = ServerProcess::redis();
    let srv = server();
    let mut a = conn(srv.port());
    let mut b = conn(redis.port);
    let version = |s: &str| s.rsplit("Redis ver. ").next().unwrap().to_string();
    let schotter = "\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. ";
    let braille_shape = |s: &str| s.split('\n').map(|l| l.chars().count()).collect::<Vec<_>>();
    for opts in ["", " 40", " 66 4 4", " 10 1 1", " 0 0 0", " 3 2 2"] {
        let r = text(&a.cmd(&format!("LOLWUT VERSION 5{opts}")));
        let o = text(&b.cmd(&format!("LOLWUT VERSION 5{opts}")));
        let ((r_art, r_cap), (o_art, _)) =
            (art_and_caption(&r, schotter), art_and_caption(&o, schotter));
        assert_eq!(version(r_cap), format!("{}\n", respite::REDIS_VERSION));
        assert_eq!(braille_shape(r_art), braille_shape(o_art), "{opts}");
        // The first two rows of squares are never disturbed: the first text line
        // (pixel rows 0-3) is Redis's exactly.
        assert_eq!(r_art.split('\n').next(), o_art.split('\n').next(), "{opts}");
    }
    let skyline = "\nDedicated to the 8 bit game developers";
    let cells = |s: &str| {
        s.split('\n')
            .map(|l| l.matches(" \x1b[0m").count())
            .collect::<Vec<_>>()
    };
    for opts in ["", " 40 10", " 20 5", " 1 1"] {
        let r = text(&a.cmd(&format!("LOLWUT VERSION 6{opts}")));
        let o = text(&b.cmd(&format!("LOLWUT VERSION 6{opts}")));
        let ((r_art, r_cap), (o_art, o_cap)) =
            (art_and_caption(&r, skyline), art_and_caption(&o, skyline));
        assert_eq!(cells(r_art), cells(o_art), "{opts}");
        assert_eq!(version(r_cap), format!("{}\n", respite::REDIS_VERSION));
        assert_eq!(
            r_cap.rsplit_once("ver. ").unwrap().0,
            o_cap.rsplit_once("ver. ").unwrap().0
        );
    }
    for bad in [
        "LOLWUT VERSION 5 x",
        "LOLWUT VERSION 5 10 x",
        "LOLWUT VERSION 6 10 10x",
    ] {
        assert_eq!(a.cmd(bad), b.cmd(bad), "{bad}");
    }
}

#[test]
fn getkeys_takes_a_bare_command_name_as_redis_72() {
    // 7.2's COMMAND GETKEYS has arity -3: the named command's own arity is checked.
    let srv = server();
    let mut c = conn(srv.port());
    for line in ["COMMAND GETKEYS get", "COMMAND GETKEYSANDFLAGS set"] {
        assert_eq!(
            error_text(&c.cmd(line)),
            "ERR Invalid number of arguments specified for command",
            "{line}"
        );
    }
    assert_eq!(
        error_text(&c.cmd("COMMAND GETKEYS ping")),
        "ERR The command has no key arguments"
    );
    assert_eq!(
        error_text(&c.cmd("COMMAND GETKEYS")),
        "ERR wrong number of arguments for 'command|getkeys' command"
    );
    // WAIT is allowed in scripts in 7.2 and answers at once.
    let r = c
        .call(&args(&["EVAL", "return redis.call('wait',1,0)", "0"]))
        .unwrap();
    assert_eq!(r, Frame::Int(0));
}

#[test]
fn command_info_of_what_72_changed() {
    let srv = server();
    let mut c = conn(srv.port());
    let head = |c: &mut Conn, name: &str| match c.cmd(&format!("COMMAND INFO {name}")) {
        Frame::Array(v) => match &v[0] {
            Frame::Array(e) => (e[1].clone(), e[2].clone()),
            other => panic!("{other}"),
        },
        other => panic!("{other}"),
    };
    assert_eq!(head(&mut c, "wait"), (Frame::Int(3), Frame::Array(vec![])));
    for name in ["command|getkeys", "command|getkeysandflags"] {
        assert_eq!(head(&mut c, name).0, Frame::Int(-3));
    }
    let flags = |f: Frame| match f {
        Frame::Array(v) => v.iter().map(|x| x.to_string()).collect::<Vec<_>>(),
        other => panic!("{other}"),
    };
    assert_eq!(
        flags(head(&mut c, "cluster|slots").1),
        ["+loading", "+stale"]
    );
    assert_eq!(flags(head(&mut c, "waitaof").1), ["+noscript"]);
    assert_eq!(flags(head(&mut c, "cluster|myshardid").1), ["+stale"]);
}
