//! Client management through real connections: CLIENT KILL closes the target, CLIENT PAUSE
//! WRITE holds writes but not reads, CLIENT REPLY OFF/SKIP, names in CLIENT LIST, and the
//! `timeout` parameter closing idle clients.

mod common;

use common::{Conn, Frame};
use std::time::Duration;

fn int(f: Frame) -> i64 {
    match f {
        Frame::Int(i) => i,
        other => panic!("not an integer: {other}"),
    }
}

fn text(f: Frame) -> String {
    match f {
        Frame::Bulk(b) | Frame::Verbatim(_, b) => String::from_utf8_lossy(&b).into_owned(),
        Frame::Simple(s) => s,
        other => panic!("not text: {other}"),
    }
}

#[test]
fn client_kill_closes_the_target_only() {
    let server = respite::TestServer::start().expect("start");
    let mut a = Conn::connect(server.port()).expect("a");
    let mut b = Conn::connect(server.port()).expect("b");
    let id = int(a.cmd("CLIENT ID"));
    assert_eq!(b.cmd(&format!("CLIENT KILL ID {id}")), Frame::Int(1));
    assert!(
        a.call(&[b"PING".to_vec()]).is_err(),
        "killed client still answered"
    );
    assert_eq!(b.cmd("PING"), Frame::Simple("PONG".into()));
    assert_eq!(
        b.cmd("CLIENT KILL 1.2.3.4:5"),
        Frame::Error("ERR No such client".into())
    );
    assert_eq!(b.cmd(&format!("CLIENT KILL ID {id}")), Frame::Int(0));
}

#[test]
fn client_pause_write_holds_writes_not_reads() {
    let server = respite::TestServer::start().expect("start");
    let mut admin = Conn::connect(server.port()).expect("admin");
    let mut writer = Conn::connect(server.port()).expect("writer");
    let mut reader = Conn::connect(server.port()).expect("reader");
    assert_eq!(
        admin.cmd("CLIENT PAUSE 100000 WRITE"),
        Frame::Simple("OK".into())
    );
    writer.send_line("SET k v").expect("send");
    writer.set_timeout(Duration::from_millis(200));
    assert!(
        writer.read().is_err(),
        "a write ran during CLIENT PAUSE WRITE"
    );
    assert_eq!(reader.cmd("GET k"), Frame::NullBulk, "reads are not paused");
    assert_eq!(admin.cmd("CLIENT UNPAUSE"), Frame::Simple("OK".into()));
    writer.set_timeout(Duration::from_secs(10));
    assert_eq!(
        writer.read().expect("held write"),
        Frame::Simple("OK".into())
    );
    assert_eq!(reader.cmd("GET k"), Frame::Bulk(b"v".to_vec()));
}

#[test]
fn client_reply_off_and_skip() {
    let server = respite::TestServer::start().expect("start");
    let mut c = Conn::connect(server.port()).expect("c");
    c.send_line("CLIENT REPLY OFF").expect("send");
    c.send_line("SET a 1").expect("send");
    c.send_line("CLIENT REPLY SKIP").expect("send");
    c.send_line("CLIENT REPLY ON").expect("send");
    // Only the last ON is answered.
    assert_eq!(c.read().expect("reply"), Frame::Simple("OK".into()));
    c.send_line("CLIENT REPLY SKIP").expect("send");
    c.send_line("GET a").expect("send");
    c.send_line("GET a").expect("send");
    assert_eq!(c.read().expect("reply"), Frame::Bulk(b"1".to_vec()));
}

#[test]
fn client_names_show_in_client_list() {
    let server = respite::TestServer::start().expect("start");
    let mut c = Conn::connect(server.port()).expect("c");
    assert_eq!(c.cmd("CLIENT SETNAME worker-7"), Frame::Simple("OK".into()));
    assert_eq!(c.cmd("CLIENT GETNAME"), Frame::Bulk(b"worker-7".to_vec()));
    let list = text(c.cmd("CLIENT LIST"));
    assert!(list.contains("name=worker-7"), "{list}");
    assert!(list.contains("cmd=client|list"), "{list}");
    let info = text(c.cmd("CLIENT INFO"));
    assert!(info.contains("name=worker-7"), "{info}");
}

#[test]
fn timeout_closes_idle_clients() {
    let server = respite::TestServer::start().expect("start");
    let mut admin = Conn::connect(server.port()).expect("admin");
    assert_eq!(
        admin.cmd("CONFIG SET timeout 1"),
        Frame::Simple("OK".into())
    );
    let mut idle = Conn::connect(server.port()).expect("idle");
    assert_eq!(idle.cmd("PING"), Frame::Simple("PONG".into()));
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        idle.call(&[b"PING".to_vec()]).is_err(),
        "idle client was not closed"
    );
    let mut fresh = Conn::connect(server.port()).expect("fresh");
    assert_eq!(
        fresh.cmd("CONFIG SET timeout 0"),
        Frame::Simple("OK".into())
    );
}

/// CLIENT NO-TOUCH (Redis 7.2, newer than the 7.0 oracle, so checked against its source's
/// rules on a manual clock): lookups by a no-touch client leave the key's idle time alone,
/// except TOUCH itself; other clients and RESET restore touching.
#[test]
fn client_no_touch_leaves_idle_times_alone() {
    let server = respite::TestServer::builder()
        .manual_clock()
        .start()
        .expect("start");
    let mut a = Conn::connect(server.port()).expect("a");
    let idle = |c: &mut Conn, key: &str| int(c.cmd(&format!("OBJECT IDLETIME {key}")));
    a.cmd("SET k v");
    a.cmd("RPUSH l x");
    assert_eq!(text(a.cmd("CLIENT NO-TOUCH ON")), "OK");
    server.advance(Duration::from_secs(10));
    a.cmd("GET k");
    a.cmd("RPUSH l y");
    a.cmd("EVAL \"return redis.call('GET', KEYS[1])\" 1 k");
    assert_eq!(idle(&mut a, "k"), 10, "reads by a no-touch client");
    assert_eq!(
        idle(&mut a, "l"),
        10,
        "in-place writes by a no-touch client"
    );
    assert!(text(a.cmd("CLIENT INFO")).contains("flags=T"));
    a.cmd("TOUCH l");
    assert_eq!(idle(&mut a, "l"), 0, "TOUCH still touches");
    server.advance(Duration::from_secs(5));
    let mut b = Conn::connect(server.port()).expect("b");
    b.cmd("GET k");
    assert_eq!(idle(&mut a, "k"), 0, "another client touches");
    server.advance(Duration::from_secs(5));
    assert_eq!(text(a.cmd("RESET")), "RESET");
    assert!(!text(a.cmd("CLIENT INFO")).contains("flags=T"));
    a.cmd("GET k");
    assert_eq!(idle(&mut a, "k"), 0, "RESET ends NO-TOUCH");
}

/// `field=value` of the CLIENT LIST line of the client named `name` (None: not listed).
fn list_field(c: &mut Conn, name: &str, field: &str) -> Option<u64> {
    let list = text(c.cmd("CLIENT LIST"));
    let line = list
        .lines()
        .find(|l| l.contains(&format!(" name={name} ")))?
        .to_string();
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{field}=")))
        .and_then(|v| v.parse().ok())
}

fn query_buffer(c: &mut Conn, name: &str) -> u64 {
    list_field(c, name, "qbuf").unwrap() + list_field(c, name, "qbuf-free").unwrap()
}

/// tests/unit/querybuf.tcl's rules (Redis `clientsCronResizeQueryBuffer`): a fresh client
/// holds a read buffer of 16 KB to 32 KB, given back whole once it is idle for over two
/// seconds; a buffer grown by a large argument shrinks toward the recent peak while the
/// client keeps sending small commands; a declared big argument gets its room up front.
#[test]
fn query_buffers_grow_and_shrink_as_in_redis() {
    let server = respite::TestServer::start().expect("start");
    let mut admin = Conn::connect(server.port()).expect("admin");
    let mut c = Conn::connect(server.port()).expect("c");
    c.cmd("CLIENT SETNAME idle_client");
    let start = query_buffer(&mut admin, "idle_client");
    assert!((16384..32768).contains(&start), "{start}");
    common::wait_until("the idle query buffer given back", || {
        query_buffer(&mut admin, "idle_client") == 0
    });
    // Still a working client: the buffer comes back with input.
    assert_eq!(c.cmd("PING"), Frame::Simple("PONG".into()));

    let mut busy = Conn::connect(server.port()).expect("busy");
    busy.cmd("CLIENT SETNAME busy_client");
    let big = "A".repeat(400_000);
    busy.call(&[b"SET".to_vec(), b"x".to_vec(), big.into_bytes()])
        .unwrap();
    let grown = query_buffer(&mut admin, "busy_client");
    assert!(grown > 32768, "{grown}");
    common::wait_until("the busy query buffer shrunk", || {
        busy.call(&[b"SET".to_vec(), b"x".to_vec(), b"small".to_vec()])
            .unwrap();
        std::thread::sleep(Duration::from_millis(10));
        let now = query_buffer(&mut admin, "busy_client");
        now > 0 && now < grown
    });

    let mut fat = common::Wire::connect_port(server.port());
    fat.send(&["CLIENT", "SETNAME", "fat_client"]);
    fat.frame_bytes();
    fat.write(b"*3\r\n$3\r\nset\r\n$1\r\na\r\n$1000000\r\n");
    common::wait_until("room for the declared argument", || {
        query_buffer(&mut admin, "fat_client") >= 1_000_000
    });
    common::wait_until("the idle fat buffer shrunk", || {
        query_buffer(&mut admin, "fat_client") < 1_000_000
    });
    // The argument still completes.
    fat.write(&[b'v'; 1_000_000]);
    fat.write(b"\r\n");
    assert_eq!(fat.frame(), "+OK ");
    assert_eq!(int(admin.cmd("STRLEN a")), 1_000_000);
}

/// After each command a client's read buffer is whole again: qbuf + qbuf-free stays within
/// 16 KB to 32 KB, as tests/unit/querybuf.tcl expects of a client between commands, also
/// while every command goes to the slow log. A command's arguments are slices of that
/// buffer; SLOWLOG entries kept them, pinning the buffer, whose capacity then fell by each
/// command's length (16337, 16323, ...; and a big request's buffer stayed allocated for as
/// long as its entry lived). Run against the binary and redis-server.
#[test]
fn read_buffer_is_whole_again_after_each_command() {
    let ours = common::ServerProcess::respite(&["--threads", "1"]);
    let redis = common::ServerProcess::redis();
    for port in [ours.port, redis.port] {
        let mut admin = Conn::connect(port).expect("admin");
        admin.cmd("CONFIG SET slowlog-log-slower-than 0");
        let mut c = Conn::connect(port).expect("c");
        c.cmd("CLIENT SETNAME whole_client");
        for _ in 0..3 {
            c.cmd("SET some-key some-value");
            let q = query_buffer(&mut admin, "whole_client");
            assert!((16384..32768).contains(&q), "port {port}: {q}");
        }
    }
}

/// `DEBUG PAUSE-CRON 1` holds back what Redis's `serverCron` does (tests/unit/querybuf.tcl
/// "when not idle" relies on it): a grown query buffer keeps its size while small commands
/// follow, a key past its deadline is not swept, and both resume once it is lifted. The same
/// script against redis-server.
fn cron_pause_holds_the_cron(port: u16) -> Vec<String> {
    let mut admin = Conn::connect(port).expect("admin");
    let mut seen = vec![format!("{}", admin.cmd("DEBUG PAUSE-CRON 1"))];
    let mut c = Conn::connect(port).expect("c");
    c.cmd("CLIENT SETNAME paused_client");
    c.call(&[b"SET".to_vec(), b"x".to_vec(), vec![b'A'; 400_000]])
        .unwrap();
    let grown = query_buffer(&mut admin, "paused_client");
    assert!(grown > 32768, "{grown}");
    admin.cmd("SET gone v PX 1");
    // Several of respite's 100 ms resize checks and Redis's cron turns (hz 10).
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(100));
        c.call(&[b"SET".to_vec(), b"x".to_vec(), b"small".to_vec()])
            .unwrap();
    }
    // Not shrunk toward the small commands' peak (respite's buffer gives up the bytes it
    // consumed from the front, so it is not byte for byte the size of Redis's).
    let held = query_buffer(&mut admin, "paused_client");
    seen.push(format!("held {}", held > 32768));
    seen.push(format!("dbsize {}", admin.cmd("DBSIZE")));
    seen.push(format!("{}", admin.cmd("DEBUG PAUSE-CRON 0")));
    common::wait_until("the query buffer shrunk after the pause", || {
        c.call(&[b"SET".to_vec(), b"x".to_vec(), b"small".to_vec()])
            .unwrap();
        std::thread::sleep(Duration::from_millis(10));
        let now = query_buffer(&mut admin, "paused_client");
        now > 0 && now <= 32768
    });
    common::wait_until("the expired key swept after the pause", || {
        admin.cmd("DBSIZE") == Frame::Int(1)
    });
    seen
}

#[test]
fn debug_pause_cron_holds_resizing_and_expiry_as_redis() {
    let server = respite::TestServer::builder()
        .param("enable-debug-command", "yes")
        .start()
        .expect("start");
    let ours = cron_pause_holds_the_cron(server.port());
    let redis = common::ServerProcess::redis_with(&["--enable-debug-command", "yes"]);
    assert_eq!(ours, cron_pause_holds_the_cron(redis.port));
    assert_eq!(ours, ["+OK", "held true", "dbsize :2", "+OK"]);
}

/// `maxmemory-clients` (tests/unit/client-eviction.tcl's rules): the largest clients go
/// once the clients together hold the limit, `CLIENT NO-EVICT on` ones never, and each
/// counts in INFO `evicted_clients`.
#[test]
fn clients_over_maxmemory_clients_are_evicted_largest_first() {
    let server = respite::TestServer::start().expect("start");
    let mut admin = Conn::connect(server.port()).expect("admin");
    assert_eq!(admin.cmd("CLIENT NO-EVICT on"), Frame::Simple("OK".into()));
    assert_eq!(
        admin.cmd("CONFIG SET maxmemory-clients 8mb"),
        Frame::Simple("OK".into())
    );
    let mut small = Conn::connect(server.port()).expect("small");
    small.cmd("CLIENT SETNAME small");
    // A protected client with a big pending argument stays.
    let mut kept = common::Wire::connect_port(server.port());
    kept.send(&["CLIENT", "NO-EVICT", "on"]);
    kept.frame_bytes();
    kept.send(&["CLIENT", "SETNAME", "kept"]);
    kept.frame_bytes();
    kept.write(b"*3\r\n$3\r\nset\r\n$1\r\nk\r\n$3000000\r\n");
    kept.write(&vec![b'x'; 1_000_000]);
    common::wait_until("kept's input read", || {
        list_field(&mut admin, "kept", "qbuf").is_some_and(|q| q >= 1_000_000)
    });
    // An evictable one past the limit goes.
    let mut big = common::Wire::connect_port(server.port());
    big.send(&["CLIENT", "SETNAME", "big"]);
    big.frame_bytes();
    big.write(b"*3\r\n$3\r\nset\r\n$1\r\nb\r\n$8000000\r\n");
    let _ = std::io::Write::write_all(&mut big.s, &vec![b'x'; 5_500_000]);
    assert!(big.closed_after().0, "the big client was not evicted");
    assert!(list_field(&mut admin, "big", "id").is_none());
    assert!(list_field(&mut admin, "kept", "id").is_some());
    assert!(list_field(&mut admin, "small", "id").is_some());
    let info = text(admin.cmd("INFO stats"));
    assert_eq!(
        common::info_field(&info, "evicted_clients"),
        Some(1),
        "{info}"
    );
    assert_eq!(small.cmd("PING"), Frame::Simple("PONG".into()));
}

/// Which of two evictable clients in the same memory bucket (128 KB to 256 KB: tot-mem counts the query buffer and ~20 KB more) survive a
/// limit that one eviction satisfies: Redis's `evictClients` takes the one that entered
/// the bucket first (`first`, smaller), not the largest (`second`).
fn bucket_survivors(port: u16) -> Vec<String> {
    let mut admin = Conn::connect(port).expect("admin");
    admin.cmd("CLIENT SETNAME control");
    admin.cmd("CLIENT NO-EVICT on");
    admin.cmd("CONFIG SET maxmemory-clients 0");
    let mut held = Vec::new();
    for (name, size) in [("first", 140_000), ("second", 200_000)] {
        let mut w = common::Wire::connect_port(port);
        w.send(&["CLIENT", "SETNAME", name]);
        w.frame_bytes();
        // A declared big argument, all but its last bytes sent: the query buffer holds it.
        w.write(format!("*2\r\n${size}\r\n").as_bytes());
        w.write(&vec![b'v'; size]);
        common::wait_until("the argument read", || {
            list_field(&mut admin, name, "tot-mem").is_some_and(|m| m >= size as u64)
        });
        held.push(w);
    }
    let list = text(admin.cmd("CLIENT LIST"));
    let total: u64 = list
        .lines()
        .filter_map(|l| l.split(' ').find_map(|kv| kv.strip_prefix("tot-mem=")))
        .map(|v| v.parse::<u64>().unwrap())
        .sum();
    let first = list_field(&mut admin, "first", "tot-mem").unwrap();
    // Over the limit by less than `first` holds.
    let limit = total - first / 2;
    admin.cmd(&format!("CONFIG SET maxmemory-clients {limit}"));
    // Redis frees an evicted client at once: CLIENT LIST no longer shows it.
    let list = text(admin.cmd("CLIENT LIST"));
    admin.cmd("CONFIG SET maxmemory-clients 0");
    let mut names: Vec<String> = list
        .lines()
        .filter_map(|l| l.split(' ').find_map(|kv| kv.strip_prefix("name=")))
        .map(str::to_string)
        .collect();
    names.sort();
    names
}

#[test]
fn client_eviction_follows_redis_memory_buckets() {
    let redis = common::ServerProcess::redis();
    let server = respite::TestServer::start().expect("start");
    let want = bucket_survivors(redis.port);
    assert_eq!(want, ["control", "second"], "the oracle's choice");
    assert_eq!(
        bucket_survivors(server.port()),
        want,
        "respite vs redis-server"
    );
}

/// How many `command <j>` calls (j = 0, 1, …) a client gets answered before its growing
/// state takes it past a 200 000 byte `maxmemory-clients` and it is evicted; `answered`
/// tells a reply from the error or close that ends the run.
fn calls_until_evicted(port: u16, command: &str, answered: impl Fn(&Frame) -> bool) -> usize {
    let mut admin = Conn::connect(port).expect("admin");
    admin.cmd("CLIENT NO-EVICT on");
    admin.cmd("CONFIG SET maxmemory-clients 200000");
    let mut c = Conn::connect(port).expect("client");
    let mut n = 0;
    for j in 0..200_000 {
        match c.call(&[command.as_bytes().to_vec(), format!("{j}").into_bytes()]) {
            Ok(f) if answered(&f) => n += 1,
            _ => break,
        }
    }
    admin.cmd("CONFIG SET maxmemory-clients 0");
    n
}

/// A client watching ever more keys is evicted once its watch list takes it past
/// `maxmemory-clients` (Redis counts the list in `multi-mem`; tests/unit/client-eviction.tcl
/// "client evicted due to watched key list").
fn watches_until_evicted(port: u16) -> usize {
    calls_until_evicted(port, "WATCH", |f| *f == Frame::Simple("OK".into()))
}

#[test]
fn watched_keys_count_toward_client_eviction() {
    let redis = common::ServerProcess::redis();
    let server = respite::TestServer::start().expect("start");
    // Redis's entries are a list node and a small struct each (the key is shared).
    assert!(watches_until_evicted(redis.port) < 10_000);
    let ours = watches_until_evicted(server.port());
    assert!((100..10_000).contains(&ours), "{ours} watches");
}

/// Subscriptions count toward a client's memory too (Redis's `pubsubMemOverhead`;
/// client-eviction.tcl "client evicted due to pubsub subscriptions").
fn subscriptions_until_evicted(port: u16) -> usize {
    calls_until_evicted(port, "PSUBSCRIBE", |f| {
        matches!(f, Frame::Push(_) | Frame::Array(_))
    })
}

#[test]
fn subscriptions_count_toward_client_eviction() {
    let redis = common::ServerProcess::redis();
    let server = respite::TestServer::start().expect("start");
    assert!(subscriptions_until_evicted(redis.port) < 20_000);
    let ours = subscriptions_until_evicted(server.port());
    assert!((100..20_000).contains(&ours), "{ours} subscriptions");
}

/// `client-output-buffer-limit normal` (issue 18 item 5) as Redis enforces it on a
/// reply: what exceeds the 16 KB reply buffer counts; at or over the hard limit the
/// client is closed and gets nothing, under it the reply arrives; other clients and the
/// data are untouched. The same script against redis-server.
fn normal_output_limit(port: u16) -> Vec<String> {
    let mut admin = Conn::connect(port).expect("admin");
    let limit = |admin: &mut Conn, v: &str| {
        let words = ["CONFIG", "SET", "client-output-buffer-limit", v];
        let words: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        format!("{}", admin.call(&words).unwrap())
    };
    let mut seen = vec![limit(&mut admin, "normal 100000 0 0")];
    for (key, len) in [("big", 1_000_000usize), ("mid", 100_000)] {
        admin
            .call(&[b"SET".to_vec(), key.as_bytes().to_vec(), vec![b'a'; len]])
            .unwrap();
    }
    // 100 000 bytes, 16 KB of them in the reply buffer: under the limit.
    let mut c = common::Wire::connect_port(port);
    c.send(&["GET", "mid"]);
    seen.push(format!("mid: {} bytes", c.frame_bytes().len()));
    c.send(&["PING"]);
    seen.push(format!("mid then {}", c.frame()));
    let mut c = common::Wire::connect_port(port);
    c.send(&["GET", "big"]);
    let (closed, got) = c.closed_after();
    seen.push(format!("big: closed {closed}, {} bytes", got.len()));
    seen.push(format!("{}", admin.cmd("STRLEN big")));
    // No limit: the big reply goes out.
    seen.push(limit(&mut admin, "normal 0 0 0"));
    let mut c = common::Wire::connect_port(port);
    c.send(&["GET", "big"]);
    seen.push(format!("unlimited: {} bytes", c.frame_bytes().len()));
    seen
}

#[test]
fn normal_output_buffer_limit_closes_as_redis() {
    let server = respite::TestServer::start().expect("start");
    let ours = normal_output_limit(server.port());
    let redis = common::ServerProcess::redis();
    assert_eq!(ours, normal_output_limit(redis.port));
    assert_eq!(ours[0], "+OK");
    assert_eq!(ours[3], "big: closed true, 0 bytes");
}

/// A client that pipelines GETs of a 1 000-byte value and never reads a reply (issue 18 §2/§5):
/// the server keeps reading and executing for it, its unsent replies count as its output
/// memory, and `config` (a `client-output-buffer-limit` or `maxmemory-clients`) closes it.
/// Returns what an unrelated client then sees; the same script against redis-server.
fn non_reader_closed(port: u16, config: &[&str], stat: Option<&str>) -> Vec<String> {
    let mut admin = Conn::connect(port).expect("admin");
    admin.cmd("CLIENT NO-EVICT on");
    let mut seen = Vec::new();
    let set = |admin: &mut Conn, words: &[&str]| {
        let words: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        format!("{}", admin.call(&words).unwrap())
    };
    seen.push(set(&mut admin, &["SET", "big", &"a".repeat(1000)]));
    // A small client that reads its replies: never the one closed.
    let mut other = Conn::connect(port).expect("other");
    let other_id = int(other.cmd("CLIENT ID"));
    let stats = |admin: &mut Conn| {
        stat.map(|f| common::info_field(&text(admin.cmd("INFO stats")), f).unwrap())
    };
    let before = stats(&mut admin);
    seen.push(set(&mut admin, config));
    let mut hog = Conn::connect(port).expect("hog");
    let hog_id = format!("id={} ", int(hog.cmd("CLIENT ID")));
    let hog = hog.into_stream();
    // 40 MB of replies: far more than the sockets' buffers hold, so the client is closed
    // only if its replies are counted while it does not read them (no read's batch alone
    // reaches the limit, which back-pressure used to let through).
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let mut hog = hog;
        let get = common::frame(&[b"GET", b"big"]);
        for _ in 0..4000 {
            if hog.write_all(&get.repeat(10)).is_err() {
                break;
            }
        }
        hog
    });
    common::wait_until("the non-reading client closed", || {
        !text(admin.cmd("CLIENT LIST")).contains(&hog_id)
    });
    if let (Some(stat), Some(before), Some(after)) = (stat, before, stats(&mut admin)) {
        seen.push(format!("{stat} +{}", after - before));
    }
    drop(writer.join().expect("writer"));
    seen.push(format!("{}", other.cmd("PING")));
    let list = text(admin.cmd("CLIENT LIST"));
    seen.push(format!(
        "other listed {}",
        list.contains(&format!("id={other_id} "))
    ));
    seen.push(format!("clients {}", list.lines().count()));
    seen.push(format!("{}", admin.cmd("STRLEN big")));
    set(&mut admin, &["CONFIG", "SET", "maxmemory-clients", "0"]);
    set(
        &mut admin,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 0 0 0",
        ],
    );
    seen
}

#[test]
fn non_reading_pipeliner_closed_by_normal_hard_limit_as_redis() {
    let config = [
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "normal 1mb 0 0",
    ];
    let server = respite::TestServer::start().expect("start");
    let ours = non_reader_closed(server.port(), &config, None);
    let redis = common::ServerProcess::redis();
    assert_eq!(ours, non_reader_closed(redis.port, &config, None));
    assert_eq!(ours[2], "+PONG");
}

#[test]
fn non_reading_pipeliner_evicted_by_maxmemory_clients_as_redis() {
    let config = ["CONFIG", "SET", "maxmemory-clients", "4mb"];
    let stat = Some("evicted_clients");
    let server = respite::TestServer::start().expect("start");
    let ours = non_reader_closed(server.port(), &config, stat);
    let redis = common::ServerProcess::redis();
    assert_eq!(ours, non_reader_closed(redis.port, &config, stat));
    assert_eq!(ours[2], "evicted_clients +1");
    assert_eq!(ours[4], "other listed true");
}

/// With no output limit at all (Redis's default), a client that pipelines ~100 MB of GET
/// replies without reading is never closed and loses nothing: in Redis its output grows
/// without bound; respite stops reading it once 64 MB are unsent (the hostile-client
/// memory bound, conn.rs `UNLIMITED_OUT_CAP`). Returns the largest `omem` seen while it
/// did not read and the reply bytes it then reads, with another client's PING between.
fn unlimited_non_reader(port: u16) -> (i64, usize, String) {
    use std::io::{Read, Write};
    const GETS: usize = 100_000;
    const REPLY: usize = 1009; // "$1000\r\n" + 1000 bytes + "\r\n"
    let mut admin = Conn::connect(port).expect("admin");
    admin.cmd(&format!("SET big {}", "a".repeat(1000)));
    let mut hog = Conn::connect(port).expect("hog");
    let hog_id = format!("id={} ", int(hog.cmd("CLIENT ID")));
    let hog = hog.into_stream();
    let mut reader = hog.try_clone().expect("clone");
    let writer = std::thread::spawn(move || {
        let mut hog = hog;
        let get = common::frame(&[b"GET", b"big"]).repeat(1000);
        for _ in 0..GETS / 1000 {
            hog.write_all(&get).expect("the client stays connected");
        }
        hog
    });
    let omem = |admin: &mut Conn| {
        let list = text(admin.cmd("CLIENT LIST"));
        let line = list.lines().find(|l| l.contains(&hog_id)).expect("listed");
        let field = line.split(' ').find_map(|f| f.strip_prefix("omem="));
        field.expect("omem").parse::<i64>().expect("number")
    };
    let mut most = 0;
    common::wait_until("60 MB of replies unsent", || {
        most = most.max(omem(&mut admin));
        most > 60_000_000
    });
    for _ in 0..20 {
        most = most.max(omem(&mut admin));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let ping = format!("{}", admin.cmd("PING"));
    let mut got = 0;
    let mut buf = vec![0u8; 1 << 20];
    while got < GETS * REPLY {
        let n = reader.read(&mut buf).expect("read");
        assert!(n > 0, "closed after {got} bytes");
        got += n;
    }
    drop(writer.join().expect("writer"));
    (most, got, ping)
}

#[test]
fn unlimited_non_reader_is_held_at_64mb_and_loses_nothing() {
    let server = respite::TestServer::start().expect("start");
    let (most, got, ping) = unlimited_non_reader(server.port());
    assert_eq!((got, ping.as_str()), (100_000 * 1009, "+PONG"));
    // The cap plus at most one read batch's replies (a read is at most a few MB).
    assert!(most < 80_000_000, "omem reached {most}");
    let redis = common::ServerProcess::redis();
    let (redis_most, redis_got, redis_ping) = unlimited_non_reader(redis.port);
    assert_eq!((redis_got, redis_ping), (got, ping));
    // Redis holds it all: the difference this test documents.
    assert!(redis_most > most, "{redis_most} vs {most}");
}

/// tests/unit/obuf-limits.tcl "soft limit ... is enforced when no traffic": a subscriber
/// that does not read goes over the pub/sub soft limit, then nothing more is published;
/// once the soft limit's seconds pass it is closed anyway (Redis's clientsCron checks every
/// client's limits, not only when a message arrives). Before, it stayed connected for as
/// long as no message came. Run against the server binary and redis-server.
#[test]
fn pubsub_soft_limit_fires_with_no_traffic() {
    use std::io::Write;
    let ours = common::ServerProcess::respite(&["--threads", "1"]);
    let redis = common::ServerProcess::redis();
    for port in [ours.port, redis.port] {
        let mut admin = Conn::connect(port).expect("admin");
        set_output_limit(&mut admin, "pubsub 0 100000 1");
        let sub = Conn::connect(port).expect("sub");
        let mut sub = sub.into_stream();
        sub.write_all(&common::frame(&[b"CLIENT", b"SETNAME", b"quiet_sub"]))
            .unwrap();
        sub.write_all(&common::frame(&[b"SUBSCRIBE", b"quiet"]))
            .unwrap();
        common::wait_until("subscribed", || {
            list_field(&mut admin, "quiet_sub", "sub") == Some(1)
        });
        // Publish until the server holds over the soft limit (the kernel's socket buffers
        // take the first megabytes), then stop.
        let payload = "x".repeat(1000);
        let mut over = false;
        for _ in 0..200 {
            for _ in 0..100 {
                admin.cmd(&format!("PUBLISH quiet {payload}"));
            }
            match list_field(&mut admin, "quiet_sub", "omem") {
                Some(omem) if omem > 100_000 => {
                    over = true;
                    break;
                }
                Some(_) => {}
                None => break,
            }
        }
        assert!(over, "port {port}: never over the soft limit");
        let what = format!(
            "port {port} (respite {}): the quiet subscriber closed",
            ours.port
        );
        common::wait_until(&what, || {
            list_field(&mut admin, "quiet_sub", "omem").is_none()
        });
        drop(sub);
    }
}

/// Redis 7.4's `CLIENT KILL MAXAGE seconds`: only clients connected at least that long are
/// closed (networking.c's `now - ctime < max_age` skip), with 7.4's two error texts.
#[test]
fn client_kill_maxage_closes_only_older_clients() {
    let server = respite::TestServer::builder()
        .manual_clock()
        .start()
        .expect("start");
    let mut old = Conn::connect(server.port()).expect("old");
    old.cmd("CLIENT SETNAME old_client");
    server.advance(Duration::from_secs(100));
    let mut young = Conn::connect(server.port()).expect("young");
    young.cmd("CLIENT SETNAME young_client");
    assert_eq!(
        young.cmd("CLIENT KILL MAXAGE 0"),
        Frame::Error("ERR maxage should be greater than 0".into())
    );
    assert_eq!(
        young.cmd("CLIENT KILL MAXAGE soon"),
        Frame::Error("ERR maxage is not an integer or out of range".into())
    );
    assert_eq!(int(young.cmd("CLIENT KILL MAXAGE 101")), 0);
    assert_eq!(int(young.cmd("CLIENT KILL MAXAGE 100")), 1);
    let list = text(young.cmd("CLIENT LIST"));
    assert!(!list.contains("name=old_client"), "{list}");
    assert!(list.contains("name=young_client"), "{list}");
    drop(old);
}

/// tests/unit/obuf-limits.tcl "Obuf limit, HRANDFIELD with huge count stopped mid-run" (and
/// the same for SRANDMEMBER and ZRANDMEMBER): under a normal hard limit the reply stops
/// growing once over it and the client is closed unsent, where respite had built the whole
/// reply first (HRANDFIELD -999999999 took 21 GB and the OOM killer ended the server).
/// With no limit, HRANDFIELD's repeats are capped as SRANDMEMBER's are. Against the binary
/// and redis-server (which has no cap, so that part is respite's alone).
#[test]
fn random_replies_stop_at_the_output_limit() {
    let ours = common::ServerProcess::respite(&["--threads", "1"]);
    let redis = common::ServerProcess::redis();
    for port in [ours.port, redis.port] {
        let mut admin = Conn::connect(port).expect("admin");
        set_output_limit(&mut admin, "normal 1000000 0 0");
        admin.cmd("HSET myhash a b");
        admin.cmd("SADD myset a");
        admin.cmd("ZADD myzset 1 a");
        for cmd in [
            "HRANDFIELD myhash -999999999",
            "SRANDMEMBER myset -999999999",
            "ZRANDMEMBER myzset -999999999",
        ] {
            let mut c = Conn::connect(port).expect("c");
            assert!(
                c.call(
                    &cmd.split(' ')
                        .map(|a| a.as_bytes().to_vec())
                        .collect::<Vec<_>>()
                )
                .is_err(),
                "port {port}: {cmd} was answered"
            );
        }
        assert_eq!(
            admin.cmd("PING"),
            Frame::Simple("PONG".into()),
            "port {port}"
        );
    }
    let mut c = Conn::connect(ours.port).expect("c");
    set_output_limit(&mut c, "normal 0 0 0");
    assert_eq!(
        c.call(&[
            b"HRANDFIELD".to_vec(),
            b"myhash".to_vec(),
            b"-999999999".to_vec()
        ])
        .expect("reply"),
        Frame::Error("ERR value is out of range, count is too large".into())
    );
}

/// `CONFIG SET client-output-buffer-limit <value>` (one argument: `Conn::cmd` would split it).
fn set_output_limit(c: &mut Conn, value: &str) {
    let set = c.call(&[
        b"CONFIG".to_vec(),
        b"SET".to_vec(),
        b"client-output-buffer-limit".to_vec(),
        value.as_bytes().to_vec(),
    ]);
    assert_eq!(set.expect("config set"), Frame::Simple("OK".into()));
}

/// CONFIG SET port moves the plain listener (Redis `changeListenPort`): new clients connect
/// on the new port, the old one is closed, open connections stay. A port that cannot be
/// bound fails with Redis's text and rolls back every parameter of the same CONFIG SET
/// (introspection.tcl "CONFIG SET rollback on apply error"). Run on both servers.
fn config_set_port(port: u16) -> Vec<String> {
    let mut c = Conn::connect(port).expect("connect");
    let mut seen = Vec::new();
    let moved = common::free_port();
    let words = |s: String| -> Vec<Vec<u8>> { s.split(' ').map(|w| w.into()).collect() };
    seen.push(format!(
        "{}",
        c.call(&words(format!("CONFIG SET port {moved}"))).unwrap()
    ));
    seen.push(format!("old conn: {}", c.cmd("PING")));
    let mut m = Conn::connect(moved).expect("connect to the new port");
    seen.push(format!("new port: {}", m.cmd("PING")));
    seen.push(format!(
        "old port refused: {}",
        Conn::connect(port).is_err()
    ));
    let got = m.cmd("CONFIG GET port");
    seen.push(format!(
        "get: {}",
        got == Frame::Array(vec![
            Frame::Bulk(b"port".to_vec()),
            Frame::Bulk(moved.to_string().into_bytes()),
        ])
    ));
    let busy = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let taken = busy.local_addr().unwrap().port();
    let before = m.cmd("CONFIG GET maxmemory");
    let r = m.call(&words(format!(
        "CONFIG SET maxmemory 10000001 port {taken} client-query-buffer-limit 10mb"
    )));
    seen.push(format!("{}", r.unwrap()));
    seen.push(format!(
        "maxmemory kept: {}",
        m.cmd("CONFIG GET maxmemory") == before
    ));
    seen.push(format!("{}", m.cmd("CONFIG GET client-query-buffer-limit")));
    seen.push(format!(
        "still on the new port: {}",
        Conn::connect(moved).is_ok()
    ));
    seen
}

#[test]
fn config_set_port_rebinds_and_rolls_back_as_redis() {
    let ours = common::ServerProcess::respite(&[]);
    let redis = common::ServerProcess::redis();
    let got = config_set_port(ours.port);
    assert_eq!(
        got,
        config_set_port(redis.port),
        "respite (left) vs redis-server"
    );
    assert_eq!(
        got[5],
        "-ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on \
         this port. Check server logs."
    );
}
