//! Pub/Sub between clients: delivery to channel and pattern subscribers, ordering, RESP3
//! pushes interleaved with replies, unsubscribe counts, disconnect cleanup and the pub/sub
//! output buffer limit. Single-connection reply shapes are in conformance/cases/pubsub.txt.

#[macro_use]
mod common;

use common::{bulk, c, connect, frame, q, real_server, unique, Proto, Target, HANG_GUARD};
use redis::{PushKind, Value};
use std::time::Duration;

/// Polls `f` until it returns true (a guard against hangs, not a timing assertion).
async fn eventually(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let start = std::time::Instant::now();
    while !f().await {
        assert!(start.elapsed() < HANG_GUARD, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn push_frame(resp3: bool, items: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("{}{}\r\n", if resp3 { '>' } else { '*' }, items.len()).into_bytes();
    for i in items {
        out.extend_from_slice(&bulk(i));
    }
    out
}

fn confirm(resp3: bool, kind: &str, name: &[u8], count: i64) -> Vec<u8> {
    let mut out = push_frame(resp3, &[kind.as_bytes(), name]);
    // Patch the header: three elements, the last an integer.
    out[1] = b'3';
    out.extend_from_slice(format!(":{count}\r\n").as_bytes());
    out
}

/// Byte-exact delivery to two channel subscribers and a pattern subscriber, in both
/// protocols, and the receivers count PUBLISH returns.
#[tokio::test]
async fn raw_delivery_is_byte_exact() {
    let t = Target::start();
    for resp3 in [false, true] {
        let ch = unique("ps:raw");
        let pat = format!("{ch}*");
        let mut subs = Vec::new();
        for _ in 0..2 {
            let mut s = t.raw().await;
            if resp3 {
                s.send(&frame(&[b"HELLO", b"3"])).await;
                let _ = s.read_n(1).await; // '%'
                s.send(&frame(&[b"PING"])).await;
                // Skip the rest of HELLO's map up to PING's reply.
                let mut seen = Vec::new();
                while !seen.ends_with(b"+PONG\r\n") {
                    seen.extend(s.read_n(1).await);
                }
            }
            s.roundtrip(
                &frame(&[b"SUBSCRIBE", ch.as_bytes()]),
                &confirm(resp3, "subscribe", ch.as_bytes(), 1),
            )
            .await;
            subs.push(s);
        }
        let mut p = t.raw().await;
        if resp3 {
            p.send(&frame(&[b"HELLO", b"3"])).await;
            let mut seen = Vec::new();
            p.send(&frame(&[b"PING"])).await;
            while !seen.ends_with(b"+PONG\r\n") {
                seen.extend(p.read_n(1).await);
            }
        }
        subs[1]
            .roundtrip(
                &frame(&[b"PSUBSCRIBE", pat.as_bytes()]),
                &confirm(resp3, "psubscribe", pat.as_bytes(), 2),
            )
            .await;
        p.roundtrip(&frame(&[b"PUBLISH", ch.as_bytes(), b"m1"]), b":3\r\n")
            .await;
        p.roundtrip(
            &frame(&[b"PUBLISH", format!("{ch}x").as_bytes(), b"m2"]),
            b":1\r\n",
        )
        .await;
        let msg = push_frame(resp3, &[b"message", ch.as_bytes(), b"m1"]);
        subs[0].expect(&msg).await;
        subs[1].expect(&msg).await;
        subs[1]
            .expect(&push_frame(
                resp3,
                &[b"pmessage", pat.as_bytes(), ch.as_bytes(), b"m1"],
            ))
            .await;
        let chx = format!("{ch}x");
        subs[1]
            .expect(&push_frame(
                resp3,
                &[b"pmessage", pat.as_bytes(), chx.as_bytes(), b"m2"],
            ))
            .await;
        // Unsubscribe counts: the pattern still counts after the channel is gone.
        subs[1]
            .roundtrip(
                &frame(&[b"UNSUBSCRIBE", ch.as_bytes()]),
                &confirm(resp3, "unsubscribe", ch.as_bytes(), 1),
            )
            .await;
        subs[1]
            .roundtrip(
                &frame(&[b"PUNSUBSCRIBE"]),
                &confirm(resp3, "punsubscribe", pat.as_bytes(), 0),
            )
            .await;
        p.roundtrip(&frame(&[b"PUBLISH", ch.as_bytes(), b"m3"]), b":1\r\n")
            .await;
        subs[0]
            .expect(&push_frame(resp3, &[b"message", ch.as_bytes(), b"m3"]))
            .await;
    }
}

/// RESP3: pushes interleave with ordinary replies on the same connection, and a message a
/// client publishes to itself arrives before PUBLISH's own reply (as Redis writes it).
#[tokio::test]
async fn raw_resp3_self_publish_order() {
    let t = Target::start();
    let ch = unique("ps:self");
    let mut s = t.raw().await;
    s.send(&frame(&[b"HELLO", b"3"])).await;
    s.send(&frame(&[b"PING"])).await;
    let mut seen = Vec::new();
    while !seen.ends_with(b"+PONG\r\n") {
        seen.extend(s.read_n(1).await);
    }
    let mut batch = frame(&[b"SUBSCRIBE", ch.as_bytes()]);
    batch.extend(frame(&[b"SET", ch.as_bytes(), b"v"]));
    batch.extend(frame(&[b"PUBLISH", ch.as_bytes(), b"hello"]));
    batch.extend(frame(&[b"GET", ch.as_bytes()]));
    batch.extend(frame(&[b"DEL", ch.as_bytes()]));
    let mut want = confirm(true, "subscribe", ch.as_bytes(), 1);
    want.extend_from_slice(b"+OK\r\n");
    want.extend(push_frame(true, &[b"message", ch.as_bytes(), b"hello"]));
    want.extend_from_slice(b":1\r\n");
    want.extend(bulk(b"v"));
    want.extend_from_slice(b":1\r\n");
    s.roundtrip(&batch, &want).await;
}

/// Many messages from one publisher arrive in publication order, through redis-rs's RESP3
/// push API, interleaved with ordinary commands on the subscriber's connection.
#[tokio::test]
async fn redis_rs_resp3_push_interleaved() {
    let server = real_server();
    let ch = unique("ps:rs3");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let client = redis::Client::open(common::url(&server, Proto::Resp3)).unwrap();
    let config = redis::AsyncConnectionConfig::new().set_push_sender(tx);
    let mut sub = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap();
    sub.subscribe(&ch).await.unwrap();
    sub.psubscribe(format!("{ch}:*")).await.unwrap();
    let mut publ = connect(&server, Proto::Resp2).await;
    const N: usize = 200;
    for i in 0..N {
        let n: i64 = q(&mut publ, &c(&["PUBLISH", &ch, &i.to_string()])).await;
        assert_eq!(n, 1);
        if i % 20 == 0 {
            // Ordinary replies keep working between pushes.
            let () = q(&mut sub, &c(&["SET", &ch, &i.to_string()])).await;
            let v: String = q(&mut sub, &c(&["GET", &ch])).await;
            assert_eq!(v, i.to_string());
        }
    }
    let n: i64 = q(&mut publ, &c(&["PUBLISH", &format!("{ch}:x"), "p"])).await;
    assert_eq!(n, 1);
    let mut got = Vec::new();
    let mut pmessage = None;
    while pmessage.is_none() {
        let m = tokio::time::timeout(HANG_GUARD, rx.recv())
            .await
            .expect("push hung")
            .expect("push channel open");
        match m.kind {
            PushKind::Message => {
                assert_eq!(m.data[0], Value::BulkString(ch.clone().into_bytes()));
                got.push(redis::from_redis_value_ref::<String>(&m.data[1]).unwrap());
            }
            PushKind::PMessage => pmessage = Some(m.data),
            PushKind::Subscribe | PushKind::PSubscribe => {}
            other => panic!("unexpected push {other:?}"),
        }
    }
    let want: Vec<String> = (0..N).map(|i| i.to_string()).collect();
    assert_eq!(got, want);
    let pm = pmessage.unwrap();
    assert_eq!(pm[0], Value::BulkString(format!("{ch}:*").into_bytes()));
    assert_eq!(pm[1], Value::BulkString(format!("{ch}:x").into_bytes()));
    let _: i64 = q(&mut sub, &c(&["DEL", &ch])).await;
}

/// redis-rs's (sync) PubSub under RESP2 and RESP3: channel and pattern messages in order.
async fn redis_rs_pubsub(proto: Proto) {
    let server = real_server();
    let ch = unique("ps:rs");
    let url = common::url(&server, proto);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let ch2 = ch.clone();
    let reader = std::thread::spawn(move || {
        let client = redis::Client::open(url).unwrap();
        let mut con = client.get_connection().unwrap();
        con.set_read_timeout(Some(HANG_GUARD)).unwrap();
        let mut ps = con.as_pubsub();
        ps.subscribe(&ch2).unwrap();
        ps.psubscribe(format!("{ch2}*")).unwrap();
        ready_tx.send(()).unwrap();
        let mut out = Vec::new();
        for _ in 0..20 {
            let m = ps.get_message().unwrap();
            let pat: Option<String> = m.get_pattern().ok();
            let payload: String = m.get_payload().unwrap();
            out.push((m.get_channel_name().to_string(), pat, payload));
        }
        out
    });
    ready_rx.recv_timeout(HANG_GUARD).unwrap();
    let mut publ = connect(&server, Proto::Resp2).await;
    for i in 0..10 {
        let n: i64 = q(&mut publ, &c(&["PUBLISH", &ch, &format!("m{i}")])).await;
        assert_eq!(n, 2, "channel and pattern subscription both count");
    }
    let got = tokio::task::spawn_blocking(move || reader.join().unwrap())
        .await
        .unwrap();
    let mut want = Vec::new();
    for i in 0..10 {
        want.push((ch.clone(), None, format!("m{i}")));
        want.push((ch.clone(), Some(format!("{ch}*")), format!("m{i}")));
    }
    assert_eq!(got, want);
    // The reader's connection is gone: its subscriptions are dropped.
    eventually("subscriber cleanup", async || {
        let v: Vec<Value> = q(&mut publ, &c(&["PUBSUB", "NUMSUB", &ch])).await;
        let pats: i64 = q(&mut publ, &c(&["PUBSUB", "NUMPAT"])).await;
        v[1] == Value::Int(0) && pats == 0
    })
    .await;
}

both_protocols!(redis_rs_pubsub);

/// Disconnecting drops every subscription: NUMSUB, SHARDNUMSUB, NUMPAT, CHANNELS and INFO
/// go back to zero; CLIENT LIST shows the subscriber's counts while it is connected.
#[tokio::test]
async fn disconnect_cleans_up_and_client_list_counts() {
    let server = real_server();
    let ch = unique("ps:dc");
    let mut s = common::Raw::connect(server.addr()).await;
    let mut batch = frame(&[b"SUBSCRIBE", ch.as_bytes(), b"other"]);
    batch.extend(frame(&[b"PSUBSCRIBE", format!("{ch}*").as_bytes()]));
    batch.extend(frame(&[b"SSUBSCRIBE", ch.as_bytes()]));
    s.send(&batch).await;
    let mut want = confirm(false, "subscribe", ch.as_bytes(), 1);
    want.extend(confirm(false, "subscribe", b"other", 2));
    want.extend(confirm(false, "psubscribe", format!("{ch}*").as_bytes(), 3));
    want.extend(confirm(false, "ssubscribe", ch.as_bytes(), 1));
    s.expect(&want).await;
    let mut con = connect(&server, Proto::Resp2).await;
    let list: String = q(&mut con, &c(&["CLIENT", "LIST"])).await;
    let line = list
        .lines()
        .find(|l| l.contains("sub=2"))
        .unwrap_or_else(|| panic!("no subscriber in {list}"));
    assert!(
        line.contains(" psub=1 ") && line.contains(" ssub=1 "),
        "{line}"
    );
    assert!(line.contains(" flags=P "), "{line}");
    let info: String = q(&mut con, &c(&["INFO", "stats"])).await;
    assert_eq!(common::info_field(&info, "pubsub_channels"), Some(2));
    assert_eq!(common::info_field(&info, "pubsub_patterns"), Some(1));
    assert_eq!(common::info_field(&info, "pubsubshard_channels"), Some(1));
    let v: Vec<Value> = q(&mut con, &c(&["PUBSUB", "NUMSUB", &ch])).await;
    assert_eq!(v[1], Value::Int(1));
    drop(s);
    eventually("subscriptions dropped on disconnect", async || {
        let v: Vec<Value> = q(&mut con, &c(&["PUBSUB", "NUMSUB", &ch])).await;
        let sv: Vec<Value> = q(&mut con, &c(&["PUBSUB", "SHARDNUMSUB", &ch])).await;
        let pats: i64 = q(&mut con, &c(&["PUBSUB", "NUMPAT"])).await;
        let chans: Vec<String> = q(&mut con, &c(&["PUBSUB", "CHANNELS"])).await;
        v[1] == Value::Int(0) && sv[1] == Value::Int(0) && pats == 0 && chans.is_empty()
    })
    .await;
    let info: String = q(&mut con, &c(&["INFO", "stats"])).await;
    assert_eq!(common::info_field(&info, "pubsub_channels"), Some(0));
    let n: i64 = q(&mut con, &c(&["PUBLISH", &ch, "x"])).await;
    assert_eq!(n, 0);
}

/// Two servers: subscriptions are per server, each publish reaches only its own.
#[tokio::test]
async fn servers_are_independent() {
    let a = real_server();
    let b = real_server();
    let ch = unique("ps:two");
    let mut subs = Vec::new();
    for srv in [&a, &b] {
        for _ in 0..3 {
            let mut s = common::Raw::connect(srv.addr()).await;
            s.roundtrip(
                &frame(&[b"SUBSCRIBE", ch.as_bytes()]),
                &confirm(false, "subscribe", ch.as_bytes(), 1),
            )
            .await;
            subs.push(s);
        }
    }
    let mut pa = connect(&a, Proto::Resp2).await;
    let mut pb = connect(&b, Proto::Resp2).await;
    let n: i64 = q(&mut pa, &c(&["PUBLISH", &ch, "from-a"])).await;
    assert_eq!(n, 3);
    let n: i64 = q(&mut pb, &c(&["PUBLISH", &ch, "from-b"])).await;
    assert_eq!(n, 3);
    for (i, s) in subs.iter_mut().enumerate() {
        let payload: &[u8] = if i < 3 { b"from-a" } else { b"from-b" };
        s.expect(&push_frame(false, &[b"message", ch.as_bytes(), payload]))
            .await;
    }
}

/// A subscriber that never reads is disconnected once its backlog passes the pub/sub
/// output buffer hard limit, so the server does not buffer without bound.
#[tokio::test]
async fn slow_subscriber_is_disconnected() {
    let server = real_server();
    let ch = unique("ps:slow");
    let mut admin = connect(&server, Proto::Resp2).await;
    let () = q(
        &mut admin,
        &c(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 1mb 512kb 60",
        ]),
    )
    .await;
    // A raw socket with a tiny receive buffer that never reads after subscribing.
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut stream = sock.connect(server.addr()).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream
        .write_all(&frame(&[b"CLIENT", b"SETNAME", b"slowpoke"]))
        .await
        .unwrap();
    stream
        .write_all(&frame(&[b"SUBSCRIBE", ch.as_bytes()]))
        .await
        .unwrap();
    let want = {
        let mut w = b"+OK\r\n".to_vec();
        w.extend(confirm(false, "subscribe", ch.as_bytes(), 1));
        w
    };
    let mut got = vec![0u8; want.len()];
    tokio::time::timeout(HANG_GUARD, stream.read_exact(&mut got))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, want);
    let payload = "x".repeat(64 * 1024);
    let mut sent = 0usize;
    loop {
        let n: i64 = q(&mut admin, &c(&["PUBLISH", &ch, &payload])).await;
        if n == 0 {
            break;
        }
        sent += 1;
        // Kernel socket buffers absorb some; the limit must kick in well before this.
        assert!(sent < 2000, "subscriber never disconnected");
    }
    eprintln!("slow subscriber dropped after {sent} messages");
    eventually("slow subscriber gone from CLIENT LIST", async || {
        let list: String = q(&mut admin, &c(&["CLIENT", "LIST"])).await;
        !list.contains("name=slowpoke")
    })
    .await;
    let v: Vec<Value> = q(&mut admin, &c(&["PUBSUB", "NUMSUB", &ch])).await;
    assert_eq!(v[1], Value::Int(0));
    // The socket is closed: reading drains what was sent, then ends.
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match tokio::time::timeout(HANG_GUARD, stream.read(&mut buf))
            .await
            .expect("closed connection must not hang")
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
}
