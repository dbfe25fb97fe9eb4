//! Scripting behaviour of issue 15 that a case file cannot express: the Redis 7.2-only text
//! of Lua numbers passed to commands (the 7.0 oracle printed them with `%.17g`), and server
//! state refusals (`min-replicas-to-write`, `maxmemory`), their error statistics and the
//! INFO memory script counters, which need CONFIG SET and INFO on a private redis-server.
//!
//! The differential tests run the same transcript against a private redis-server 7.0.15
//! and an in-process respite and compare every reply (7.0 and 7.2 agree on all of them).
//! Ported in part from redis 7.0.15 tests/unit/scripting.tcl: `not enough good replicas`,
//! `reject script do not cause a Lua stack leak`, `Consistent eval error reporting`,
//! `SCRIPTING FLUSH ASYNC`.

mod common;

use common::{conn_info_opt, Conn, Frame, ServerProcess};

fn args(v: &[&str]) -> Vec<Vec<u8>> {
    v.iter().map(|a| a.as_bytes().to_vec()).collect()
}

fn call(c: &mut Conn, v: &[&str]) -> Frame {
    c.call(&args(v)).unwrap_or_else(|e| panic!("{v:?}: {e}"))
}

fn bulk_text(f: &Frame) -> String {
    match f {
        Frame::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("expected a bulk string, got {other}"),
    }
}

/// The `calls=…,rejected_calls=…,failed_calls=…` counters of one command in INFO
/// commandstats (usec fields dropped: they are timings), or "" when it has none.
fn cmdstat(c: &mut Conn, cmd: &str) -> String {
    let Some(v) = conn_info_opt(c, "commandstats", &format!("cmdstat_{cmd}")) else {
        return String::new();
    };
    v.split(',')
        .filter(|kv| !kv.starts_with("usec"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Runs each transcript line on both servers and asserts the replies are equal.
fn differential(lines: &[&[&str]], mut probe: impl FnMut(&mut Conn) -> Vec<String>) {
    let redis = ServerProcess::redis();
    let respite = respite::TestServer::start().expect("start respite");
    let mut a = Conn::connect(redis.port).expect("connect redis");
    let mut b = Conn::connect(respite.port()).expect("connect respite");
    for line in lines {
        let want = call(&mut a, line);
        let got = call(&mut b, line);
        assert_eq!(got, want, "{line:?}: respite {got}, redis {want}");
    }
    let (want, got) = (probe(&mut a), probe(&mut b));
    assert_eq!(got, want, "probe after the transcript");
}

/// Redis 7.2 passes a Lua number to a command as `fpconv_dtoa` prints it (deps/fpconv):
/// the shortest round-trip digits, plain up to 21 digits, `e+N`/`e-N` exponents without
/// padding. The 7.0 oracle prints `%.17g` here, so the expected texts are 7.2's; each
/// must still be the same double as the oracle's text.
#[test]
fn lua_number_arguments_print_as_redis_7_2() {
    let redis = ServerProcess::redis();
    let respite = respite::TestServer::start().expect("start respite");
    let mut a = Conn::connect(redis.port).expect("connect redis");
    let mut b = Conn::connect(respite.port()).expect("connect respite");
    for (expr, want) in [
        ("0.1", "0.1"),
        ("1 / 3", "0.3333333333333333"),
        ("0.1 + 0.7", "0.7999999999999999"),
        ("1e16", "1e+16"),
        ("1e21", "1e+21"),
        ("123e5", "12300000"),
        ("2 ^ 63", "9223372036854776000"),
        ("2 ^ 70", "1180591620717411300000"),
        ("1e-5", "0.00001"),
        ("0.000123", "0.000123"),
        ("1e-7", "1e-7"),
        ("1.5e-7", "1.5e-7"),
        ("-2.5e-300", "-2.5e-300"),
        ("1.7976931348623157e308", "1.7976931348623157e+308"),
        ("4.9406564584124654e-324", "5e-324"),
        ("1700000000123.5 * 4096", "6963200000505856"),
        ("12345678.9", "12345678.9"),
    ] {
        let script = format!("return redis.call('ECHO', {expr})");
        let got = bulk_text(&call(&mut b, &["EVAL", &script, "0"]));
        assert_eq!(got, want, "{expr}");
        let oracle = bulk_text(&call(&mut a, &["EVAL", &script, "0"]));
        let same = oracle.parse::<f64>().unwrap() == got.parse::<f64>().unwrap();
        assert!(same, "{expr}: 7.0 printed {oracle}, a different value");
    }
}

/// `min-replicas-to-write` on a primary without replicas: writes get NOREPLICAS, in
/// dispatch and inside scripts; scripts that declared flags are refused before running
/// unless they are `no-writes`; MULTI queueing of a write dooms the transaction.
#[test]
fn not_enough_good_replicas() {
    let get = "return redis.call('get', KEYS[1])";
    let set = "return redis.call('set', KEYS[1], 'y')";
    let shebang_get = "#!lua\nreturn redis.call('get', KEYS[1])";
    let no_writes_get = "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])";
    let lib = "#!lua name=noreplib\n\
        redis.register_function('w', function(keys) return redis.call('set', keys[1], 'f') end)\n\
        redis.register_function{function_name='r', callback=function(keys) \
        return redis.call('get', keys[1]) end, flags={'no-writes'}}";
    differential(
        &[
            &["SET", "x", "some value"],
            &["FUNCTION", "LOAD", lib],
            &["CONFIG", "SET", "min-replicas-to-write", "1"],
            &["CONFIG", "GET", "min-replicas-to-write"],
            &["CONFIG", "GET", "min-replicas-max-lag"],
            &["SET", "x", "other"],
            &["INCR", "n"],
            &["GET", "x"],
            &["EVAL", no_writes_get, "1", "x"],
            &["EVAL", get, "1", "x"],
            &["EVAL", shebang_get, "1", "x"],
            &["EVAL", set, "1", "x"],
            &["EVAL", "return redis.pcall('set', KEYS[1], 'y')", "1", "x"],
            &[
                "EVAL",
                "local r = redis.pcall('set', KEYS[1], 'y') return r.err",
                "1",
                "x",
            ],
            &["EVAL_RO", get, "1", "x"],
            &["FCALL", "w", "1", "x"],
            &["FCALL", "r", "1", "x"],
            &["FCALL_RO", "r", "1", "x"],
            &["MULTI"],
            &["GET", "x"],
            &["SET", "x", "queued"],
            &["EXEC"],
            &["MULTI"],
            &["EVAL", get, "1", "x"],
            &["EXEC"],
            // Either parameter at 0 disables the check.
            &["CONFIG", "SET", "min-slaves-max-lag", "0"],
            &["SET", "x", "lag off"],
            &["EVAL", set, "1", "x"],
            &["CONFIG", "SET", "min-replicas-max-lag", "10"],
            &["SET", "x", "again"],
            &["CONFIG", "SET", "min-slaves-to-write", "0"],
            &["EVAL", shebang_get, "1", "x"],
            &["SET", "x", "done"],
            &["GET", "x"],
        ],
        |c| vec![cmdstat(c, "set"), cmdstat(c, "eval")],
    );
}

/// Every EVAL sees KEYS and ARGV as fresh arrays of its own arguments, whatever the
/// scripts before it did to theirs: fields added past the arguments or under other keys, a
/// metatable, `table.insert`, and a script that failed halfway (respite refills one pair of
/// tables per interpreter, which must read exactly as Redis's new ones).
#[test]
fn keys_and_argv_are_fresh_in_every_script() {
    let spoil = "KEYS.x = 1 KEYS[5] = 'e' KEYS[2] = nil ARGV[3] = 'c' ARGV.y = true \
        table.insert(ARGV, 'z') \
        setmetatable(KEYS, {__index = function() return 'mt' end}) return 1";
    let spoil_and_fail = "KEYS[7] = 'x' ARGV[1] = 'changed' \
        setmetatable(ARGV, {}) local t = nil return t.x";
    let probe = "local n, m = 0, 0 for _ in pairs(KEYS) do n = n + 1 end \
        for _ in pairs(ARGV) do m = m + 1 end \
        local function s(v) if v == nil then return 'nil' end return tostring(v) end \
        return {n, m, #KEYS, #ARGV, s(getmetatable(KEYS)), s(getmetatable(ARGV)), \
        s(KEYS[1]), s(KEYS[2]), s(KEYS[5]), s(KEYS[9]), s(KEYS.x), \
        s(ARGV[1]), s(ARGV[3]), s(ARGV.y)}";
    // Longer calls than respite reuses tables for (64), either side of short ones.
    let many: Vec<String> = (0..70).map(|i| format!("k{i}")).collect();
    let long = |body: &'static str| -> Vec<&str> {
        let mut line = vec!["EVAL", body, "70"];
        line.extend(many.iter().map(String::as_str));
        line.push("a1");
        line
    };
    let (long_spoil, long_probe) = (long(spoil), long(probe));
    differential(
        &[
            &long_spoil,
            &["EVAL", probe, "1", "k", "q"],
            &["EVAL", spoil, "2", "a", "b", "p"],
            &long_probe,
            &["EVAL", probe, "1", "k", "q"],
            &["EVAL", spoil, "3", "a", "b", "c", "p", "q"],
            &["EVAL", probe, "0"],
            &["EVAL", spoil_and_fail, "1", "a", "p"],
            &["EVAL", probe, "3", "k1", "k2", "k3", "a1", "a2"],
            &["EVAL", spoil, "0"],
            &["EVAL", probe, "2", "k1", "k2"],
        ],
        |_| Vec::new(),
    );
}

/// `maxmemory` reached under `noeviction`: deny-oom commands and write scripts are refused
/// (`reject script do not cause a Lua stack leak` runs 50 of them), inside MULTI every
/// queued command is, and a script without flags fails at its first deny-oom command.
#[test]
fn maxmemory_refusals() {
    let shebang: &[&str] = &["EVAL", "#!lua\nreturn 1", "0"];
    let mut lines: Vec<&[&str]> = vec![
        &["SET", "k", "v"],
        &["CONFIG", "SET", "maxmemory", "1"],
        &["SET", "k", "w"],
        &["GET", "k"],
        &["DEL", "k"],
    ];
    for _ in 0..50 {
        lines.push(shebang);
    }
    lines.extend_from_slice(&[
        &["EVAL", "#!lua flags=no-writes\nreturn 2", "0"],
        &[
            "EVAL",
            "#!lua flags=allow-oom\nreturn redis.call('set', KEYS[1], 'a')",
            "1",
            "k",
        ],
        &["EVAL", "return redis.call('set', KEYS[1], 'b')", "1", "k"],
        &["EVAL", "return redis.pcall('set', KEYS[1], 'b')", "1", "k"],
        &["EVAL", "return redis.call('del', KEYS[1])", "1", "k"],
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "k"],
        &["MULTI"],
        &["GET", "k"],
        &["EXEC"],
        &["CONFIG", "SET", "maxmemory", "0"],
        shebang,
        &["SET", "k", "after"],
        &["GET", "k"],
    ]);
    differential(&lines, |c| vec![cmdstat(c, "set"), cmdstat(c, "eval")]);
}

/// `Consistent eval error reporting`: an error of a command a script called counts once in
/// the error stats, whether the script raises it, catches it or returns it; the command
/// counts as rejected or failed, the script as failed only when its reply is the error.
#[test]
fn script_error_stats_count_once() {
    let cases: &[&[&[&str]]] = &[
        &[
            &["CONFIG", "SET", "maxmemory", "1"],
            &["EVAL", "return redis.call('set', KEYS[1], 'y')", "1", "x"],
        ],
        &[
            &["CONFIG", "SET", "maxmemory", "1"],
            &[
                "EVAL",
                "local t = redis.pcall('set', KEYS[1], 'y') return t.err",
                "1",
                "x",
            ],
        ],
        &[
            &["CONFIG", "SET", "maxmemory", "1"],
            &["EVAL", "return redis.pcall('set', KEYS[1], 'y')", "1", "x"],
        ],
        &[&["EVAL", "return redis.call('select', 99)", "0"]],
        &[&[
            "EVAL",
            "local t = redis.pcall('select', 99) return t.err",
            "0",
        ]],
        &[&[
            "EVAL_RO",
            "return redis.call('set', KEYS[1], 'y')",
            "1",
            "x",
        ]],
        &[&[
            "EVAL_RO",
            "return redis.pcall('set', KEYS[1], 'y').err",
            "1",
            "x",
        ]],
        &[&["EVAL", "return redis.call('nosuchcommand')", "0"]],
        &[&["EVAL", "return redis.pcall('get', 'a', 'b')", "0"]],
        &[&["EVAL", "return redis.error_reply('MY own error')", "0"]],
    ];
    for case in cases {
        let mut lines: Vec<&[&str]> = vec![&["CONFIG", "SET", "maxmemory", "0"]];
        lines.push(&["CONFIG", "RESETSTAT"]);
        lines.extend_from_slice(case);
        lines.push(&["CONFIG", "SET", "maxmemory", "0"]);
        differential(&lines, |c| {
            let errors = bulk_text(&call(c, &["INFO", "errorstats"]));
            let mut v: Vec<String> = errors
                .lines()
                .filter(|l| l.starts_with("errorstat_"))
                .map(str::to_string)
                .collect();
            v.push(conn_info_opt(c, "stats", "total_error_replies").unwrap_or_default());
            for cmd in ["set", "select", "eval", "eval_ro", "get"] {
                v.push(cmdstat(c, cmd));
            }
            v
        });
    }
}

/// INFO memory counts cached scripts, functions and libraries; SCRIPT FLUSH ASYNC and
/// FUNCTION FLUSH empty them (`SCRIPTING FLUSH ASYNC`).
#[test]
fn info_memory_script_counters() {
    let lib = "#!lua name=counted\n\
        redis.register_function('f1', function() return 1 end)\n\
        redis.register_function('f2', function() return 2 end)";
    let mut lines: Vec<Vec<String>> = Vec::new();
    for j in 0..100 {
        lines.push(vec!["SCRIPT".into(), "LOAD".into(), format!("return {j}")]);
    }
    let redis = ServerProcess::redis();
    let respite = respite::TestServer::start().expect("start respite");
    let mut a = Conn::connect(redis.port).expect("connect redis");
    let mut b = Conn::connect(respite.port()).expect("connect respite");
    let counters = |c: &mut Conn| -> Vec<Option<String>> {
        [
            "number_of_cached_scripts",
            "number_of_functions",
            "number_of_libraries",
        ]
        .iter()
        .map(|n| conn_info_opt(c, "memory", n))
        .collect()
    };
    assert_eq!(counters(&mut b), counters(&mut a), "fresh servers");
    for c in [&mut a, &mut b] {
        for l in &lines {
            let v: Vec<&str> = l.iter().map(String::as_str).collect();
            call(c, &v);
        }
        call(c, &["EVAL", "return 'one more'", "0"]);
        call(c, &["FUNCTION", "LOAD", lib]);
    }
    let (want, got) = (counters(&mut a), counters(&mut b));
    assert_eq!(got, want, "after loading");
    assert_eq!(got[0].as_deref(), Some("101"));
    for c in [&mut a, &mut b] {
        assert_eq!(
            call(c, &["SCRIPT", "FLUSH", "ASYNC"]),
            Frame::Simple("OK".into())
        );
        assert_eq!(
            call(c, &["FUNCTION", "FLUSH", "ASYNC"]),
            Frame::Simple("OK".into())
        );
    }
    let (want, got) = (counters(&mut a), counters(&mut b));
    assert_eq!(got, want, "after flushing");
    assert_eq!(got[0].as_deref(), Some("0"));
}

/// Scripts are atomic even for keys they do not declare (allowed outside cluster mode):
/// scripts on several connections read-modify-write an undeclared counter while plain
/// INCRs of it run on others. Any command interleaving inside a script loses an update,
/// so the final count would fall short of the number of increments.
#[test]
fn scripts_stay_atomic_on_undeclared_keys() {
    const SCRIPTERS: usize = 4;
    const WRITERS: usize = 2;
    const ROUNDS: usize = 300;
    let server = respite::TestServer::start().expect("start respite");
    let port = server.port();
    let body = "local v = tonumber(redis.call('GET', 'atom:total') or '0') \
        redis.call('INCR', KEYS[1]) redis.call('SET', 'atom:total', v + 1) return v";
    let sha = bulk_text(&call(
        &mut Conn::connect(port).unwrap(),
        &["SCRIPT", "LOAD", body],
    ));
    let mut threads = Vec::new();
    for i in 0..SCRIPTERS + WRITERS {
        let sha = sha.clone();
        threads.push(std::thread::spawn(move || {
            let mut c = Conn::connect(port).expect("connect");
            let own = format!("atom:own:{i}");
            for _ in 0..ROUNDS {
                let line: Vec<&str> = match i < SCRIPTERS {
                    true => vec!["EVALSHA", &sha, "1", &own],
                    false => vec!["INCR", "atom:total"],
                };
                match call(&mut c, &line) {
                    Frame::Int(_) => {}
                    other => panic!("{line:?}: {other}"),
                }
            }
        }));
    }
    for t in threads {
        t.join().expect("client thread");
    }
    let mut c = Conn::connect(port).unwrap();
    let total = bulk_text(&call(&mut c, &["GET", "atom:total"]));
    assert_eq!(total, ((SCRIPTERS + WRITERS) * ROUNDS).to_string());
    for i in 0..SCRIPTERS {
        let own = bulk_text(&call(&mut c, &["GET", &format!("atom:own:{i}")]));
        assert_eq!(own, ROUNDS.to_string());
    }
}
