//! Protocol handling over raw TCP, byte for byte against Redis's behaviour: inline
//! commands, pipelining, protocol errors (exact text, then the connection closes), limits,
//! authentication, and badly behaved clients.
//!
//! The expected bytes were taken from a real redis-server. To re-check them, run this file
//! against one: `RESPITE_ORACLE=127.0.0.1:PORT RESPITE_ORACLE_AUTH=127.0.0.1:PORT2 cargo
//! test --test protocol` with PORT2 started with `--requirepass secret` (tests that look
//! inside the in-process server skip themselves then).

#[macro_use]
mod common;

use common::{
    bulk, frame, server_panics, unique, watch_server_panics, Raw, Target, HANG_GUARD,
    ORACLE_PASSWORD,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// Counts live heap bytes of the whole test process (the in-process server included), so
/// a test can tell whether the server allocated a buffer up front.
struct CountingAlloc;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            LIVE_BYTES.fetch_add(new_size, Ordering::Relaxed);
            LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Panics on the in-process server's worker threads (a panicking connection task would
/// otherwise just vanish).
fn assert_no_server_panics() {
    assert_eq!(server_panics(), 0, "the server panicked");
}

const PONG: &[u8] = b"+PONG\r\n";
const OK: &[u8] = b"+OK\r\n";

/// A connection that must still be usable.
async fn assert_alive(raw: &mut Raw) {
    raw.roundtrip(b"PING\r\n", PONG).await;
}

/// The value of `key` as read on a fresh connection (RESP2 reply bytes).
async fn get_on_new_conn(t: &Target, key: &str) -> Vec<u8> {
    let mut raw = t.raw().await;
    raw.send(&frame(&[b"GET", key.as_bytes()])).await;
    let head = raw.read_n(3).await;
    if head == b"$-1" {
        raw.expect(b"\r\n").await;
        return head;
    }
    let mut line = head;
    while !line.ends_with(b"\r\n") {
        line.extend(raw.read_n(1).await);
    }
    let len: usize = std::str::from_utf8(&line[1..line.len() - 2])
        .expect("utf8")
        .parse()
        .expect("bulk length");
    let mut data = raw.read_n(len + 2).await;
    data.truncate(len);
    data
}

// ---------------------------------------------------------------------------------------
// Inline commands
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn inline_commands() {
    let t = Target::start();
    let mut r = t.raw().await;
    r.roundtrip(b"PING\r\n", PONG).await;
    r.roundtrip(b"PING\n", PONG).await;
    r.roundtrip(b"  PING   \r\n", PONG).await;
    // Empty lines are skipped without a reply.
    r.roundtrip(b"\r\n\n\r\nPING\r\n", PONG).await;
    // Command names are case-insensitive and may be quoted.
    r.roundtrip(b"ping\r\n", PONG).await;
    r.roundtrip(b"\"PING\"\r\n", PONG).await;
    r.roundtrip(b"'PING'\r\n", PONG).await;
    r.roundtrip(b"PING hello\r\n", &bulk(b"hello")).await;
}

#[tokio::test]
async fn inline_quoted_arguments() {
    let t = Target::start();
    let mut r = t.raw().await;
    // Double quotes: C escapes and \xHH.
    r.roundtrip(b"ECHO \"a b\\x41\\n\\t\\\\\"\r\n", &bulk(b"a bA\n\t\\"))
        .await;
    // Single quotes: only \' is an escape.
    r.roundtrip(b"ECHO 'it\\'s \\n'\r\n", &bulk(b"it's \\n"))
        .await;
    // Invalid \x escapes and unknown escapes keep the character.
    r.roundtrip(b"ECHO \"\\xzz\"\r\n", &bulk(b"xzz")).await;
    r.roundtrip(b"ECHO \"\\q\"\r\n", &bulk(b"q")).await;
    r.roundtrip(b"ECHO \"\"\r\n", &bulk(b"")).await;
    r.roundtrip(b"ECHO \"\\x00\\xff\"\r\n", &bulk(b"\x00\xff"))
        .await;
    // Inline and multibulk arguments are the same to commands.
    let key = "inline:quoted";
    r.roundtrip(format!("SET {key} \"x y\"\r\n").as_bytes(), OK)
        .await;
    assert_eq!(get_on_new_conn(&t, key).await, b"x y");
}

#[tokio::test]
async fn inline_unbalanced_quotes_close_the_connection() {
    let t = Target::start();
    for line in [
        &b"set a \"b\"c\r\n"[..],
        b"set a 'b\r\n",
        b"set a 'b'c\r\n",
        b"ECHO \"a\\\r\n",
    ] {
        let mut r = t.raw().await;
        r.send(line).await;
        r.expect_then_closed(b"-ERR Protocol error: unbalanced quotes in request\r\n")
            .await;
    }
}

#[tokio::test]
async fn inline_too_big_request() {
    let t = Target::start();
    let mut r = t.raw().await;
    // More than 64 KB without a newline.
    r.send(&vec![b'a'; 70_000]).await;
    r.expect_then_closed(b"-ERR Protocol error: too big inline request\r\n")
        .await;
}

#[tokio::test]
async fn inline_nul_byte_hides_the_line_end() {
    // Redis finds the newline with strchr, which stops at NUL: no reply, the line is
    // never complete. Shown by closing our side: no reply comes before the close.
    let t = Target::start();
    let mut r = t.raw().await;
    r.send(b"PING\x00x\r\n").await;
    r.stream.shutdown().await.expect("shutdown");
    r.expect_then_closed(b"").await;
}

// ---------------------------------------------------------------------------------------
// Pipelining
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn pipeline_in_one_write_replies_in_order() {
    let t = Target::start();
    let mut r = t.raw().await;
    let key = unique("pipe:counter");
    let mut req = Vec::new();
    let mut want = Vec::new();
    for i in 1..=1000 {
        // Alternate multibulk and inline frames.
        if i % 2 == 0 {
            req.extend(frame(&[b"INCR", key.as_bytes()]));
        } else {
            req.extend(format!("INCR {key}\r\n").as_bytes());
        }
        want.extend(format!(":{i}\r\n").as_bytes());
        if i % 100 == 0 {
            req.extend(frame(&[b"GET", key.as_bytes()]));
            want.extend(bulk(i.to_string().as_bytes()));
            req.extend(b"PING\r\n");
            want.extend(PONG);
        }
    }
    r.send(&req).await;
    r.expect(&want).await;
    assert_alive(&mut r).await;
}

/// GET's reply in every context it is built in: straight into the connection's buffer
/// (a plain command), or as a reply of its own (inside EXEC and scripts, with replies
/// skipped, for a subscribed RESP3 client whose pushes come first), for stored bytes,
/// integer-encoded values, a missing key and the wrong type.
#[tokio::test]
async fn get_replies_the_same_in_every_context() {
    let t = Target::start();
    let mut r = t.raw().await;
    let (k, n, l) = (unique("get:k"), unique("get:n"), unique("get:l"));
    let (k, n, l) = (k.as_bytes(), n.as_bytes(), l.as_bytes());
    let big = vec![b'x'; 70_000];
    let cmds: Vec<Vec<&[u8]>> = vec![
        vec![b"SET", k, b"value"],
        vec![b"SET", n, b"-12345"],
        vec![b"RPUSH", l, b"a"],
        vec![b"GET", k],
        vec![b"GET", n],
        vec![b"GET", b"get:missing:key"],
        vec![b"GET", l],
        vec![b"MULTI"],
        vec![b"GET", k],
        vec![b"GET", n],
        vec![b"EXEC"],
        vec![b"EVAL", b"return redis.call('GET', KEYS[1])", b"1", n],
        vec![b"CLIENT", b"REPLY", b"SKIP"],
        vec![b"GET", k],
        vec![b"GET", n],
        vec![b"SET", k, &big],
        vec![b"GET", k],
    ];
    let mut want = Vec::new();
    want.extend(OK);
    want.extend(OK);
    want.extend(b":1\r\n");
    want.extend(bulk(b"value"));
    want.extend(bulk(b"-12345"));
    want.extend(b"$-1\r\n");
    want.extend(&b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"[..]);
    want.extend(OK);
    want.extend(b"+QUEUED\r\n+QUEUED\r\n*2\r\n");
    want.extend(bulk(b"value"));
    want.extend(bulk(b"-12345"));
    want.extend(bulk(b"-12345"));
    want.extend(bulk(b"-12345"));
    want.extend(OK);
    want.extend(bulk(&big));
    let req: Vec<u8> = cmds.iter().flat_map(|c| frame(c)).collect();
    r.send(&req).await;
    r.expect(&want).await;
    // RESP3 and subscribed: a message published before GET runs is pushed before its reply.
    let mut r = t.raw().await;
    let mut req = Vec::new();
    for c in [
        &[&b"HELLO"[..], b"3"][..],
        &[b"SUBSCRIBE", b"get:chan"],
        &[b"PUBLISH", b"get:chan", b"m"],
        &[b"GET", n],
        &[b"QUIT"],
    ] {
        req.extend(frame(c));
    }
    r.send(&req).await;
    let got = r.read_to_close().await;
    let tail = b">3\r\n$7\r\nmessage\r\n$8\r\nget:chan\r\n$1\r\nm\r\n:1\r\n$6\r\n-12345\r\n+OK\r\n";
    assert!(got.ends_with(tail), "{}", String::from_utf8_lossy(&got));
}

#[tokio::test]
async fn pipeline_split_at_every_boundary() {
    // The same pipeline cut into pieces of every size from 1 to 13 bytes.
    let t = Target::start();
    let mut req = Vec::new();
    let mut want = Vec::new();
    for i in 0..20 {
        let k = format!("split:{i}");
        let v = format!("value-{i}");
        req.extend(frame(&[b"SET", k.as_bytes(), v.as_bytes()]));
        want.extend(OK);
        req.extend(format!("GET {k}\r\n").as_bytes());
        want.extend(bulk(v.as_bytes()));
    }
    for piece in 1..=13 {
        let mut r = t.raw().await;
        for chunk in req.chunks(piece) {
            r.send(chunk).await;
            tokio::task::yield_now().await;
        }
        r.expect(&want).await;
        assert_alive(&mut r).await;
    }
}

#[tokio::test]
async fn slow_client_sends_a_frame_byte_by_byte() {
    let t = Target::start();
    let mut r = t.raw().await;
    let req = frame(&[b"SET", b"slow:key", b"hello world"]);
    for b in &req {
        r.send(std::slice::from_ref(b)).await;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    r.expect(OK).await;
    for b in b"GET slow:key\r\n" {
        r.send(std::slice::from_ref(b)).await;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    r.expect(&bulk(b"hello world")).await;
}

#[tokio::test]
async fn bulk_payload_is_not_checked_for_crlf() {
    // Redis skips the two bytes after a bulk payload without looking at them.
    let t = Target::start();
    let mut r = t.raw().await;
    r.roundtrip(b"*1\r\n$4\r\nPINGxx", PONG).await;
    r.roundtrip(b"*1\r\n$4\r\nPINGxxPING\r\n", PONG).await;
    r.expect(PONG).await;
}

#[tokio::test]
async fn empty_multibulk_frames_are_ignored() {
    let t = Target::start();
    let mut r = t.raw().await;
    r.roundtrip(b"*0\r\n*-1\r\n*-5\r\nPING\r\n", PONG).await;
}

// ---------------------------------------------------------------------------------------
// Protocol errors: exact text, replies before the error are sent, nothing after runs,
// and the connection is closed.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn malformed_frames_reply_and_close() {
    let t = Target::start();
    let cases: &[(&[u8], &[u8])] = &[
        (b"*x\r\n", b"invalid multibulk length"),
        (b"*\r\n", b"invalid multibulk length"),
        (b"*+1\r\n", b"invalid multibulk length"),
        (b"*01\r\n", b"invalid multibulk length"),
        (b"* 1\r\n", b"invalid multibulk length"),
        (b"*1 \r\n", b"invalid multibulk length"),
        (b"*1\n$4\r\nPING\r\n", b"invalid multibulk length"),
        (b"*3000000000\r\n", b"invalid multibulk length"),
        (b"*1\r\nx3\r\n", b"expected '$', got 'x'"),
        (b"*2\r\n$4\r\nECHO\r\n:1\r\n", b"expected '$', got ':'"),
        (b"*1\r\n\xff3\r\n", b"expected '$', got '\xff'"),
        // CR and LF in error text become spaces.
        (b"*1\r\n\r\n", b"expected '$', got ' '"),
        (b"*1\r\n$-3\r\n", b"invalid bulk length"),
        (b"*1\r\n$-1\r\n", b"invalid bulk length"),
        (b"*1\r\n$-0\r\n", b"invalid bulk length"),
        (b"*1\r\n$abc\r\n", b"invalid bulk length"),
        (b"*1\r\n$\r\n", b"invalid bulk length"),
        (b"*1\r\n$03\r\n", b"invalid bulk length"),
        (b"*1\r\n$ 3\r\n", b"invalid bulk length"),
        (b"*1\r\n$3 \r\n", b"invalid bulk length"),
    ];
    for (req, msg) in cases {
        let mut r = t.raw().await;
        r.send(req).await;
        let mut want = b"-ERR Protocol error: ".to_vec();
        want.extend_from_slice(msg);
        want.extend_from_slice(b"\r\n");
        r.expect_then_closed(&want).await;
    }
}

#[tokio::test]
async fn oversized_count_strings() {
    let t = Target::start();
    let mut r = t.raw().await;
    let mut req = b"*".to_vec();
    req.resize(70_000, b'1');
    r.send(&req).await;
    r.expect_then_closed(b"-ERR Protocol error: too big mbulk count string\r\n")
        .await;

    let mut r = t.raw().await;
    let mut req = b"*1\r\n$".to_vec();
    req.resize(70_000, b'1');
    r.send(&req).await;
    r.expect_then_closed(b"-ERR Protocol error: too big bulk count string\r\n")
        .await;
}

#[tokio::test]
async fn bulk_length_limit_is_512_mb() {
    let t = Target::start();
    for req in [&b"*1\r\n$600000000\r\n"[..], b"*1\r\n$536870913\r\n"] {
        let mut r = t.raw().await;
        r.send(req).await;
        r.expect_then_closed(b"-ERR Protocol error: invalid bulk length\r\n")
            .await;
    }
    // Exactly 512 MB is a valid header: no error, the server waits for the data (shown by
    // closing our side and getting no reply at all).
    let mut r = t.raw().await;
    r.send(b"*1\r\n$536870912\r\n").await;
    r.stream.shutdown().await.expect("shutdown");
    r.expect_then_closed(b"").await;
}

#[tokio::test]
async fn replies_before_a_protocol_error_are_sent_and_nothing_after_runs() {
    let t = Target::start();
    let mut r = t.raw().await;
    let mut req = Vec::new();
    req.extend(frame(&[b"SET", b"perr:before", b"1"]));
    req.extend(b"PING\r\n");
    req.extend(b"*x\r\n");
    req.extend(frame(&[b"SET", b"perr:after", b"1"]));
    r.send(&req).await;
    r.expect_then_closed(b"+OK\r\n+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n")
        .await;
    assert_eq!(get_on_new_conn(&t, "perr:before").await, b"1");
    assert_eq!(get_on_new_conn(&t, "perr:after").await, b"$-1");
}

#[tokio::test]
async fn protocol_errors_are_the_same_under_resp3() {
    let t = Target::start();
    let mut r = t.raw().await;
    r.send(b"HELLO 3\r\n").await;
    // Skip the HELLO map: read until the PING reply that follows it.
    r.send(b"PING\r\n").await;
    let mut seen = Vec::new();
    while !seen.ends_with(PONG) {
        seen.extend(r.read_n(1).await);
    }
    r.send(b"*1\r\n$-3\r\n").await;
    r.expect_then_closed(b"-ERR Protocol error: invalid bulk length\r\n")
        .await;
}

// ---------------------------------------------------------------------------------------
// Large and never-arriving bulk payloads
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn declared_bulk_that_never_arrives_is_not_allocated_up_front() {
    let t = Target::start();
    let Some(server) = &t.server else {
        return; // needs the in-process server's allocations
    };
    watch_server_panics();
    const CONNS: usize = 4;
    const DECLARED: usize = 400 * 1024 * 1024;
    let mut conns = Vec::new();
    for _ in 0..CONNS {
        let mut r = t.raw().await;
        assert_alive(&mut r).await;
        conns.push(r);
    }
    let before = LIVE_BYTES.load(Ordering::Relaxed);
    for r in &mut conns {
        let mut req = frame(&[b"SET", b"big"]);
        req[1] = b'3';
        req.extend(format!("${DECLARED}\r\n").as_bytes());
        req.extend(vec![b'x'; 1000]);
        r.send(&req).await;
    }
    // Wait until the server has read the headers into every connection's buffer.
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        let waiting = server
            .shared()
            .clients
            .all()
            .iter()
            .filter(|h| h.mem.qbuf.load(Ordering::Relaxed) > 0)
            .count();
        if waiting == CONNS {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "headers never read");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let grown = LIVE_BYTES.load(Ordering::Relaxed).saturating_sub(before);
    // Reserving the declared size would be 1.6 GB here.
    assert!(
        grown < 64 * 1024 * 1024,
        "{CONNS} headers of {DECLARED} bytes grew the heap by {grown} bytes"
    );
    drop(conns);
    let mut r = t.raw().await;
    assert_alive(&mut r).await;
    assert_no_server_panics();
}

#[tokio::test]
async fn large_value_arriving_in_pieces_is_stored_intact() {
    let t = Target::start();
    let mut r = t.raw().await;
    let value: Vec<u8> = (0..4 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let req = frame(&[b"SET", b"big:value", &value]);
    for chunk in req.chunks(64 * 1024) {
        r.send(chunk).await;
        tokio::task::yield_now().await;
    }
    r.expect(OK).await;
    assert_eq!(get_on_new_conn(&t, "big:value").await, value);
}

// ---------------------------------------------------------------------------------------
// Command errors keep the connection open
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn unknown_command_text() {
    let t = Target::start();
    let mut r = t.raw().await;
    r.roundtrip(
        b"FOO a b\r\n",
        b"-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n",
    )
    .await;
    r.roundtrip(
        &frame(&[b"foo"]),
        b"-ERR unknown command 'foo', with args beginning with: \r\n",
    )
    .await;
    r.roundtrip(
        b"*1\r\n$0\r\n\r\n",
        b"-ERR unknown command '', with args beginning with: \r\n",
    )
    .await;
    // Newlines in arguments become spaces.
    r.roundtrip(
        b"\"F\\nOO\" \"e\\r\\nf\"\r\n",
        b"-ERR unknown command 'F OO', with args beginning with: 'e  f' \r\n",
    )
    .await;
    assert_alive(&mut r).await;
}

#[tokio::test]
async fn unknown_command_text_is_truncated() {
    let t = Target::start();
    let mut r = t.raw().await;
    // The name is cut at 128 bytes.
    let name = format!("f{}", "o".repeat(200));
    r.send(format!("{name}\r\n").as_bytes()).await;
    r.expect(
        format!(
            "-ERR unknown command '{}', with args beginning with: \r\n",
            &name[..128]
        )
        .as_bytes(),
    )
    .await;
    // The argument preview stops once it reaches 128 bytes, counting the quotes and
    // spaces, and cuts the last argument to fit.
    let long = "a".repeat(200);
    r.send(format!("foo {long} {long}\r\n").as_bytes()).await;
    r.expect(
        format!(
            "-ERR unknown command 'foo', with args beginning with: '{}' \r\n",
            &long[..128]
        )
        .as_bytes(),
    )
    .await;
    let letters: Vec<String> = ('a'..='z').map(|c| c.to_string()).collect();
    r.send(format!("foo {} {long}\r\n", letters.join(" ")).as_bytes())
        .await;
    let preview: String = letters.iter().map(|l| format!("'{l}' ")).collect();
    // 26 * 4 = 104 bytes used, 24 left for the long argument.
    r.expect(
        format!(
            "-ERR unknown command 'foo', with args beginning with: {preview}'{}' \r\n",
            &long[..24]
        )
        .as_bytes(),
    )
    .await;
    assert_alive(&mut r).await;
}

#[tokio::test]
async fn unknown_command_name_stops_at_nul() {
    // Redis formats the name with %.128s: a NUL byte ends it.
    let t = Target::start();
    let mut r = t.raw().await;
    r.roundtrip(
        b"\"F\\x00OO\" x\r\n",
        b"-ERR unknown command 'F', with args beginning with: 'x' \r\n",
    )
    .await;
}

#[tokio::test]
async fn wrong_arity_text() {
    let t = Target::start();
    let mut r = t.raw().await;
    let want = b"-ERR wrong number of arguments for 'get' command\r\n";
    r.roundtrip(b"GET\r\n", want).await;
    r.roundtrip(b"get a b\r\n", want).await;
    r.roundtrip(&frame(&[b"GeT", b"a", b"b", b"c"]), want).await;
    r.roundtrip(
        b"ECHO\r\n",
        b"-ERR wrong number of arguments for 'echo' command\r\n",
    )
    .await;
    r.roundtrip(
        b"SET k\r\n",
        b"-ERR wrong number of arguments for 'set' command\r\n",
    )
    .await;
    assert_alive(&mut r).await;
}

// ---------------------------------------------------------------------------------------
// Authentication
// ---------------------------------------------------------------------------------------

const NOAUTH: &[u8] = b"-NOAUTH Authentication required.\r\n";
const WRONGPASS: &[u8] = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n";

#[tokio::test]
async fn noauth_before_auth() {
    let t = Target::start_with_password();
    let mut r = t.raw().await;
    r.roundtrip(b"PING\r\n", NOAUTH).await;
    r.roundtrip(b"GET a\r\n", NOAUTH).await;
    r.roundtrip(b"MULTI\r\n", NOAUTH).await;
    // Unknown commands and wrong arity are reported before authentication is checked.
    r.roundtrip(
        b"FOO a\r\n",
        b"-ERR unknown command 'FOO', with args beginning with: 'a' \r\n",
    )
    .await;
    r.roundtrip(
        b"GET\r\n",
        b"-ERR wrong number of arguments for 'get' command\r\n",
    )
    .await;
    r.roundtrip(b"AUTH wrong\r\n", WRONGPASS).await;
    r.roundtrip(b"AUTH nobody secret\r\n", WRONGPASS).await;
    r.roundtrip(b"AUTH a b c\r\n", b"-ERR syntax error\r\n")
        .await;
    r.roundtrip(b"GET a\r\n", NOAUTH).await;
    r.roundtrip(format!("AUTH {ORACLE_PASSWORD}\r\n").as_bytes(), OK)
        .await;
    r.roundtrip(b"GET auth:none\r\n", b"$-1\r\n").await;
    r.roundtrip(format!("AUTH default {ORACLE_PASSWORD}\r\n").as_bytes(), OK)
        .await;
    // RESET drops the authentication again.
    r.roundtrip(b"RESET\r\n", b"+RESET\r\n").await;
    r.roundtrip(b"PING\r\n", NOAUTH).await;
    // QUIT works without authentication.
    r.send(b"QUIT\r\n").await;
    r.expect_then_closed(OK).await;
}

#[tokio::test]
async fn exec_rejected_before_auth_is_an_execabort() {
    // Redis turns any rejection of EXEC itself into EXECABORT.
    let t = Target::start_with_password();
    let mut r = t.raw().await;
    r.roundtrip(
        b"EXEC\r\n",
        b"-EXECABORT Transaction discarded because of: NOAUTH Authentication required.\r\n",
    )
    .await;
}

#[tokio::test]
async fn unauthenticated_frame_limits() {
    let t = Target::start_with_password();
    // More than 10 arguments before AUTH is a protocol error.
    let mut r = t.raw().await;
    r.send(b"*11\r\n").await;
    r.expect_then_closed(b"-ERR Protocol error: unauthenticated multibulk length\r\n")
        .await;
    // Bulk strings longer than 16 KB before AUTH too.
    let mut r = t.raw().await;
    r.send(b"*2\r\n$4\r\nECHO\r\n$16385\r\n").await;
    r.expect_then_closed(b"-ERR Protocol error: unauthenticated bulk length\r\n")
        .await;
    // Exactly at the limits is fine (the command is then refused for lack of auth).
    let mut r = t.raw().await;
    let args: Vec<&[u8]> = std::iter::once(&b"FOO"[..])
        .chain(std::iter::repeat_n(&b"x"[..], 9))
        .collect();
    r.send(&frame(&args)).await;
    r.expect(b"-ERR unknown command 'FOO', with args beginning with: 'x' 'x' 'x' 'x' 'x' 'x' 'x' 'x' 'x' \r\n")
        .await;
    let big = vec![b'y'; 16384];
    r.roundtrip(&frame(&[b"ECHO", &big]), NOAUTH).await;
    // After AUTH the limits are the normal ones.
    r.roundtrip(format!("AUTH {ORACLE_PASSWORD}\r\n").as_bytes(), OK)
        .await;
    let args: Vec<&[u8]> = std::iter::once(&b"FOO"[..])
        .chain(std::iter::repeat_n(&b"y"[..], 10))
        .collect();
    r.send(&frame(&args)).await;
    r.expect(b"-ERR unknown command 'FOO', with args beginning with: 'y' 'y' 'y' 'y' 'y' 'y' 'y' 'y' 'y' 'y' \r\n")
        .await;
    let big = vec![b'z'; 20_000];
    r.roundtrip(&frame(&[b"ECHO", &big]), &bulk(&big)).await;
}

#[tokio::test]
async fn hello_with_auth() {
    let t = Target::start_with_password();
    let mut r = t.raw().await;
    let noauth_hello: &[u8] = if t.is_oracle() {
        // Redis 7.0's wording; 7.2 added "<proto>", which respite follows.
        b"-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n"
    } else {
        b"-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n"
    };
    r.roundtrip(b"HELLO 3\r\n", noauth_hello).await;
    r.roundtrip(b"HELLO\r\n", noauth_hello).await;
    r.roundtrip(b"HELLO 3 AUTH default bad\r\n", WRONGPASS)
        .await;
    r.roundtrip(b"PING\r\n", NOAUTH).await;
    r.send(format!("HELLO 3 AUTH default {ORACLE_PASSWORD}\r\n").as_bytes())
        .await;
    // A RESP3 map of 7 entries; its content is checked by the connection tests.
    r.expect(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n").await;
    r.send(b"PING\r\n").await;
    let mut seen = Vec::new();
    while !seen.ends_with(PONG) {
        seen.extend(r.read_n(1).await);
    }
    assert!(
        seen.windows(9).any(|w| w == b"proto\r\n:3"),
        "HELLO reply: {}",
        common::show(&seen)
    );
    // RESP3 is in force: a missing key is `_`.
    r.roundtrip(b"GET hello:none\r\n", b"_\r\n").await;
}

#[tokio::test]
async fn auth_without_a_password_configured() {
    let t = Target::start();
    let mut r = t.raw().await;
    r.roundtrip(
        b"AUTH x\r\n",
        b"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n",
    )
    .await;
    // The default user has no password: any password works for it, other users fail.
    r.roundtrip(b"AUTH default anything\r\n", OK).await;
    r.roundtrip(b"AUTH a b\r\n", WRONGPASS).await;
    assert_alive(&mut r).await;
}

// ---------------------------------------------------------------------------------------
// Badly behaved clients and QUIT
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn client_disconnecting_mid_pipeline_does_not_disturb_others() {
    let t = Target::start();
    watch_server_panics();
    let mut other = t.raw().await;
    assert_alive(&mut other).await;
    let value = vec![b'v'; 100 * 1024];
    for round in 0..5 {
        let mut r = t.raw().await;
        let key = format!("gone:{round}");
        let mut req = frame(&[b"SET", key.as_bytes(), &value]);
        for _ in 0..200 {
            req.extend(frame(&[b"GET", key.as_bytes()]));
        }
        // End on half a frame, then vanish without reading ~20 MB of replies.
        req.extend(b"*2\r\n$3\r\nGET\r\n$10\r\nab");
        r.send(&req).await;
        drop(r);
        assert_alive(&mut other).await;
    }
    let mut fresh = t.raw().await;
    assert_alive(&mut fresh).await;
    other
        .roundtrip(&frame(&[b"SET", b"gone:check", b"1"]), OK)
        .await;
    assert_eq!(get_on_new_conn(&t, "gone:check").await, b"1");
    if !t.is_oracle() {
        assert_no_server_panics();
    }
}

#[tokio::test]
async fn commands_after_quit_are_not_executed() {
    let t = Target::start();
    let mut r = t.raw().await;
    r.send(b"SET quit:before 1\r\nQUIT\r\nSET quit:after 1\r\nPING\r\n")
        .await;
    r.expect_then_closed(b"+OK\r\n+OK\r\n").await;

    let mut r = t.raw().await;
    let mut req = frame(&[b"QUIT"]);
    req.extend(frame(&[b"SET", b"quit:after2", b"1"]));
    r.send(&req).await;
    r.expect_then_closed(OK).await;

    assert_eq!(get_on_new_conn(&t, "quit:before").await, b"1");
    assert_eq!(get_on_new_conn(&t, "quit:after").await, b"$-1");
    assert_eq!(get_on_new_conn(&t, "quit:after2").await, b"$-1");
}

// ---------------------------------------------------------------------------------------
// Connection limits
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn maxclients_refuses_with_redis_error_and_closes() {
    let server = respite::TestServer::builder()
        .param("maxclients", "2")
        .start()
        .expect("start");
    let mut a = Raw::connect(server.addr()).await;
    let mut b = Raw::connect(server.addr()).await;
    a.roundtrip(b"PING\r\n", b"+PONG\r\n").await;
    b.roundtrip(b"PING\r\n", b"+PONG\r\n").await;
    let mut c = Raw::connect(server.addr()).await;
    c.expect_then_closed(b"-ERR max number of clients reached\r\n")
        .await;
    // The two admitted clients are unaffected; once one leaves, a new one gets in.
    a.roundtrip(b"PING\r\n", b"+PONG\r\n").await;
    drop(b);
    let mut d = None;
    for _ in 0..100 {
        let mut r = Raw::connect(server.addr()).await;
        r.send(b"PING\r\n").await;
        let got = r.read_n(1).await;
        if got == b"+" {
            d = Some(r);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(d.is_some(), "a slot freed by a leaving client is reused");
}
