//! The proxy under hostile or careless clients (audit 2026-12, findings 11, 12, 14, 16):
//! idle clients holding node connections, huge replies, unbounded input, too many clients,
//! idle timeouts, the dedicated-connection queue, and subscriptions that must behave as
//! with one Redis. Every test runs against real nodes on free loopback ports (killed on
//! drop) behind an in-process `ProxyServer`: redis-server 7, valkey-server 8.1 and respite
//! fleets (the modules at the end).

mod common;
#[macro_use]
mod proxy_fleet;

use common::{wait_until, Wire as Raw};
use proxy_fleet::{Fleet, Node, NodeKind};
use respite::proxy::config::ProxyConfig;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// `n` (one or two) nodes of `kind` without passwords, named `n0`, `n1`, behind a proxy
/// with a generous command timeout, adjusted by `tweak`.
fn fleet(kind: NodeKind, n: usize, tweak: impl FnOnce(&mut ProxyConfig)) -> Fleet {
    Fleet::open(kind, &["n0", "n1"][..n], false, |cfg| {
        cfg.command_timeout = Duration::from_secs(10);
        tweak(cfg)
    })
}

/// A lone node of `kind` without a password.
fn lone_node(kind: NodeKind) -> Node {
    Node::start(kind, "")
}

/// 64 idle WATCH clients, 64 BLPOP 0 clients, 64 subscribers and 64 pattern subscribers,
/// all at defaults: the next client's BLPOP, EXEC, SUBSCRIBE and PSUBSCRIBE still work, and
/// each node sees one subscriber connection, not one per client.
fn audit_11_idle_watch_blpop_and_subscribers_do_not_starve_others(kind: NodeKind) {
    let f = fleet(kind, 2, |_| {});
    let mut held = Vec::new();
    for i in 0..64 {
        let mut c = f.raw();
        assert_eq!(c.call(&["WATCH", &f.key_on(0, &format!("w{i}"))]), "+OK ");
        held.push(c);
    }
    for i in 0..64 {
        let mut c = f.raw();
        c.send(&["BLPOP", &f.key_on(0, &format!("q{i}")), "0"]);
        held.push(c);
    }
    for i in 0..64 {
        let ch = f.key_on(0, &format!("ch{i}"));
        let mut c = f.raw();
        assert_eq!(
            c.call(&["SUBSCRIBE", &ch]),
            format!("*3 $9 subscribe ${} {ch} :1 ", ch.len())
        );
        held.push(c);
        let pat = format!("p{i}.*");
        let mut c = f.raw();
        assert_eq!(
            c.call(&["PSUBSCRIBE", &pat]),
            format!("*3 $10 psubscribe ${} {pat} :1 ", pat.len())
        );
        held.push(c);
    }
    // Every WATCH and BLPOP holds its node connection.
    wait_until("128 dedicated connections on n0", || {
        f.node_field(0, "dedicated") == "128"
    });

    // The 65th client: BLPOP, served by a push.
    let q = f.key_on(0, "q-next");
    let mut b = f.raw();
    b.send(&["BLPOP", &q, "0"]);
    let mut c = f.raw();
    wait_until("the BLPOP to block on the node", || {
        f.node_field(0, "dedicated") == "129"
    });
    assert_eq!(c.call(&["LPUSH", &q, "v"]), ":1 ");
    assert_eq!(b.frame(), format!("*2 ${} {q} $1 v ", q.len()));
    // A transaction.
    let k = f.key_on(0, "tx");
    assert_eq!(c.call(&["WATCH", &k]), "+OK ");
    assert_eq!(c.call(&["MULTI"]), "+OK ");
    assert_eq!(c.call(&["SET", &k, "1"]), "+QUEUED ");
    assert_eq!(c.call(&["INCR", &k]), "+QUEUED ");
    assert_eq!(c.call(&["EXEC"]), "*2 +OK :2 ");
    // Subscriptions, on both nodes, channels and patterns.
    let mut s = f.raw();
    let (c0, c1) = (f.key_on(0, "next"), f.key_on(1, "next"));
    s.send(&["SUBSCRIBE", &c0, &c1]);
    assert_eq!(s.frame(), format!("*3 $9 subscribe ${} {c0} :1 ", c0.len()));
    assert_eq!(s.frame(), format!("*3 $9 subscribe ${} {c1} :2 ", c1.len()));
    assert_eq!(
        s.call(&["PSUBSCRIBE", "next*"]),
        "*3 $10 psubscribe $5 next* :3 "
    );
    assert_eq!(c.call(&["PUBLISH", &c1, "hi"]), ":2 ");
    let got = [s.frame(), s.frame()];
    assert!(
        got.contains(&format!("*3 $7 message ${} {c1} $2 hi ", c1.len())),
        "{got:?}"
    );
    assert!(
        got.contains(&format!(
            "*4 $8 pmessage $5 next* ${} {c1} $2 hi ",
            c1.len()
        )),
        "{got:?}"
    );
    // One of the 64 earlier subscribers still gets its messages.
    let ch5 = f.key_on(0, "ch5");
    assert_eq!(c.call(&["PUBLISH", &ch5, "m"]), ":1 ");
    assert_eq!(
        held[128 + 10].frame(),
        format!("*3 $7 message ${} {ch5} $1 m ", ch5.len())
    );
    // Each node has one subscriber connection for all of them.
    for n in &f.nodes {
        let list = n.raw().call(&["CLIENT", "LIST"]);
        let subscribers = list
            .split('\n')
            .filter(|l| !l.contains(" sub=0 psub=0 ") && l.contains(" sub="))
            .count();
        assert_eq!(subscribers, 1, "{list}");
    }
    drop(held);
}

/// A 70 MiB value goes through the proxy both ways; a reply over `proto-max-bulk-len` is
/// replaced by an error naming the limit, and the connection goes on.
fn audit_12_a_70_mib_value_goes_through_the_proxy(kind: NodeKind) {
    let f = fleet(kind, 1, |_| {});
    let big = String::from_utf8((0..70 << 20).map(|i| b'a' + (i % 26) as u8).collect()).unwrap();
    let mut c = f.raw();
    assert_eq!(c.call(&["SET", "big", &big]), "+OK ");
    c.send(&["GET", "big"]);
    let got = c.frame_bytes();
    let want = respite::proxy::resp::bulk(big.as_bytes());
    assert_eq!(got.len(), want.len());
    assert!(got == want[..], "the value came back changed");
    assert_eq!(c.call(&["STRLEN", "big"]), format!(":{} ", 70 << 20));

    // A proxy allowing 2 MB replies refuses a 3 MB one with an error, and stays usable.
    let small = fleet(kind, 1, |cfg| cfg.proto_max_bulk_len = 2 << 20);
    let three: String = "x".repeat(3 << 20);
    assert_eq!(small.nodes[0].raw().call(&["SET", "v", &three]), "+OK ");
    let mut c = small.raw();
    let e = c.call(&["GET", "v"]);
    assert!(
        e.starts_with("-ERR reply of ") && e.contains("proto-max-bulk-len (2097152)"),
        "{e}"
    );
    assert_eq!(c.call(&["PING"]), "+PONG ");
    assert_eq!(c.call(&["STRLEN", "v"]), format!(":{} ", 3 << 20));
}

/// Writes `bytes` from another thread (the proxy may stop reading at any point).
fn write_in_background(c: &Raw, bytes: Vec<u8>) -> std::thread::JoinHandle<()> {
    let mut s = c.s.try_clone().unwrap();
    std::thread::spawn(move || {
        let _ = s.write_all(&bytes);
    })
}

/// A frame of several bulks, each under proto-max-bulk-len, adding up to `total` bytes.
fn big_frame(total: usize) -> Vec<u8> {
    let part = 600_000;
    let n = total.div_ceil(part);
    let mut out = format!("*{}\r\n$5\r\nRPUSH\r\n$1\r\nk\r\n", n + 2).into_bytes();
    for _ in 0..n {
        out.extend_from_slice(format!("${part}\r\n").as_bytes());
        out.extend(std::iter::repeat_n(b'z', part));
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// `client-query-buffer-limit` bounds a client's input, also a frame made of many bulks
/// each under the bulk limit and a blocked client's pipelined input; `maxclients` refuses
/// the client after the last with Redis's error.
fn audit_14_query_buffer_limit_and_maxclients(kind: NodeKind) {
    let f = fleet(kind, 1, |cfg| {
        cfg.client_query_buffer_limit = 1 << 20;
        cfg.maxclients = 4;
    });
    // Under the limit: fine.
    let mut ok = f.raw();
    ok.s.write_all(&big_frame(500_000)).unwrap();
    assert_eq!(ok.frame(), ":1 ");
    drop(ok);
    // A 3 MB frame: refused with an error naming the limit, then closed.
    let mut c = f.raw();
    let w = write_in_background(&c, big_frame(3 << 20));
    let (closed, seen) = c.closed_after();
    w.join().unwrap();
    assert!(closed, "{seen}");
    assert!(
        seen.contains("client-query-buffer-limit (1048576)"),
        "{seen}"
    );
    // A blocked client's input counts too.
    let mut b = f.raw();
    b.send(&["BLPOP", "q", "0"]);
    wait_until("the BLPOP to block", || f.node_field(0, "dedicated") == "1");
    let w = write_in_background(&b, b"*1\r\n$4\r\nPING\r\n".repeat(200_000));
    let (closed, seen) = b.closed_after();
    w.join().unwrap();
    assert!(closed, "{seen}");
    assert!(seen.contains("client-query-buffer-limit"), "{seen}");
    // Nothing was left in the list by the refused frame.
    let mut c = f.raw();
    assert_eq!(c.call(&["LLEN", "k"]), ":1 ");

    // maxclients 4: c and three more; the fifth is refused.
    // Polled on `c` itself: a new probe connection per poll could still be closing (and
    // counted) when the next ones connect.
    wait_until("closed clients to go", || {
        c.call(&["INFO", "clients"])
            .contains("connected_clients:1 ")
    });
    let mut more: Vec<Raw> = (0..3).map(|_| f.raw()).collect();
    for m in &mut more {
        assert_eq!(m.call(&["PING"]), "+PONG ");
    }
    let mut refused = f.raw();
    let (closed, seen) = refused.closed_after();
    assert!(closed, "{seen}");
    assert_eq!(seen, "-ERR max number of clients reached\r\n");
    assert!(c.call(&["INFO", "stats"]).contains("rejected_connections:"));
    // A slot freed is usable again.
    drop(more.pop());
    wait_until("a slot to free", || {
        let mut n = f.raw();
        n.send(&["PING"]);
        let (_, seen) = n.closed_after_timeout(Duration::from_millis(500));
        seen == "+PONG\r\n"
    });
}

/// AUTH through the proxy after the constant-time comparison: only the exact password of
/// the default user is accepted (no prefix, no extension, no other user).
fn audit_16_proxy_auth_is_still_correct(kind: NodeKind) {
    let f = fleet(kind, 1, |cfg| cfg.requirepass = Some("s3cret-pw".into()));
    let mut c = f.raw();
    assert!(c.call(&["GET", "k"]).starts_with("-NOAUTH "));
    let wrong = "-WRONGPASS invalid username-password pair or user is disabled. ";
    for bad in [
        "",
        "s",
        "s3cret-p",
        "s3cret-pw ",
        "s3cret-pwx",
        "S3CRET-PW",
        "x3cret-pw",
    ] {
        assert_eq!(c.call(&["AUTH", bad]), wrong, "{bad:?}");
    }
    assert_eq!(c.call(&["AUTH", "alice", "s3cret-pw"]), wrong);
    assert!(c.call(&["GET", "k"]).starts_with("-NOAUTH "));
    assert_eq!(c.call(&["AUTH", "s3cret-pw"]), "+OK ");
    assert_eq!(c.call(&["SET", "k", "v"]), "+OK ");
    let mut d = f.raw();
    assert_eq!(d.call(&["AUTH", "default", "s3cret-pw"]), "+OK ");
    let mut h = f.raw();
    assert!(h
        .call(&["HELLO", "3", "AUTH", "default", "nope"])
        .starts_with("-WRONGPASS"));
    assert!(h
        .call(&["HELLO", "3", "AUTH", "default", "s3cret-pw"])
        .starts_with("%7 "));
    assert_eq!(h.call(&["GET", "k"]), "$1 v ");
}

/// `timeout`: an idle client is closed (one in MULTI too), a subscriber and a blocked
/// client are not, as in Redis.
fn idle_timeout_closes_idle_clients_but_not_subscribers_or_blocked(kind: NodeKind) {
    let f = fleet(kind, 1, |cfg| cfg.timeout = Duration::from_secs(1));
    let mut idle = f.raw();
    assert_eq!(idle.call(&["PING"]), "+PONG ");
    let mut multi = f.raw();
    assert_eq!(multi.call(&["MULTI"]), "+OK ");
    let mut sub = f.raw();
    assert_eq!(sub.call(&["SUBSCRIBE", "ch"]), "*3 $9 subscribe $2 ch :1 ");
    let mut blocked = f.raw();
    blocked.send(&["BLPOP", "q", "0"]);
    let (closed, seen) = idle.closed_after();
    assert!(closed && seen.is_empty(), "{seen}");
    let (closed, seen) = multi.closed_after();
    assert!(closed && seen.is_empty(), "{seen}");
    // Well past the timeout, the others still work.
    std::thread::sleep(Duration::from_secs(3));
    let mut c = f.raw();
    assert_eq!(c.call(&["PUBLISH", "ch", "m"]), ":1 ");
    assert_eq!(sub.frame(), "*3 $7 message $2 ch $1 m ");
    assert_eq!(c.call(&["LPUSH", "q", "v"]), ":1 ");
    assert_eq!(blocked.frame(), "*2 $1 q $1 v ");
    // Timeout 0 (the default) never closes anyone.
    let g = fleet(kind, 1, |_| {});
    let mut d = g.raw();
    assert_eq!(d.call(&["PING"]), "+PONG ");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(d.call(&["PING"]), "+PONG ");
}

/// With every dedicated connection taken, blocking and transaction clients queue for one:
/// served when one frees, an error naming the settings when none frees in time.
fn blocking_and_transaction_clients_queue_for_a_dedicated_connection(kind: NodeKind) {
    let f = fleet(kind, 1, |cfg| {
        cfg.max_dedicated_per_node = 1;
        cfg.dedicated_wait = Duration::from_secs(20);
    });
    let mut a = f.raw();
    a.send(&["BLPOP", "qa", "0"]);
    wait_until("A to block", || f.node_field(0, "dedicated") == "1");
    let mut b = f.raw();
    b.send(&["BLPOP", "qb", "0"]);
    let mut t = f.raw();
    assert_eq!(t.call(&["MULTI"]), "+OK ");
    assert_eq!(t.call(&["INCR", "n"]), "+QUEUED ");
    t.send(&["EXEC"]);
    let mut c = f.raw();
    // B and the EXEC wait; A's push frees the connection for one of them.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.call(&["RPUSH", "qb", "vb"]), ":1 ");
    assert_eq!(c.call(&["RPUSH", "qa", "va"]), ":1 ");
    assert_eq!(a.frame(), "*2 $2 qa $2 va ");
    // B's BLPOP is served at once (qb has a value); then the EXEC runs.
    assert_eq!(b.frame(), "*2 $2 qb $2 vb ");
    assert_eq!(t.frame(), "*1 :1 ");

    // Nobody frees it: the wait ends with an error that names the limits.
    let g = fleet(kind, 1, |cfg| {
        cfg.max_dedicated_per_node = 1;
        cfg.dedicated_wait = Duration::from_millis(300);
    });
    let mut a = g.raw();
    a.send(&["BLPOP", "qa", "0"]);
    wait_until("A to block", || g.node_field(0, "dedicated") == "1");
    let mut b = g.raw();
    let e = b.call(&["BLPOP", "qb", "0"]);
    assert!(
        e.starts_with("-ERR too many blocking or transaction clients on node n0")
            && e.contains("max-dedicated-per-node")
            && e.contains("dedicated-wait-ms"),
        "{e}"
    );
    assert_eq!(b.call(&["MULTI"]), "+OK ");
    assert_eq!(b.call(&["SET", "k", "1"]), "+QUEUED ");
    assert!(b.call(&["EXEC"]).starts_with("-ERR too many blocking"));
    assert_eq!(b.call(&["GET", "k"]), "$-1 ");
}

/// The frames a subscriber sees, through the proxy (two nodes) and straight from one
/// redis-server, for the same commands: identical, in RESP2 and RESP3.
fn subscription_replies_match_one_redis(kind: NodeKind) {
    let f = fleet(kind, 2, |_| {});
    let single = lone_node(kind);
    // Channels on both nodes of the fleet.
    let (a, b) = (f.key_on(0, "a"), f.key_on(1, "b"));
    for resp3 in [false, true] {
        let mut via = f.raw();
        let mut direct = single.raw();
        if resp3 {
            assert!(via.call(&["HELLO", "3"]).starts_with("%7 "));
            assert!(direct.call(&["HELLO", "3"]).starts_with("%7 "));
        }
        let mut pub_via = f.raw();
        let mut pub_direct = single.raw();
        let mut pair = [&mut via, &mut direct];
        let mut pubs = [&mut pub_via, &mut pub_direct];
        let frames = |pair: &mut [&mut Raw; 2], cmd: &[&str], replies: usize| {
            pair[0].send(cmd);
            pair[1].send(cmd);
            same_frames(pair, replies, &format!("{cmd:?} resp3={resp3}"));
        };
        // Publishes through both (same receiver count), then compares the messages.
        let publish = |pair: &mut [&mut Raw; 2], pubs: &mut [&mut Raw; 2], cmd, ch, msg, n| {
            let args = [cmd, ch, msg];
            assert_eq!(pubs[0].call(&args), pubs[1].call(&args), "{args:?}");
            same_frames(pair, n, &format!("{args:?} resp3={resp3}"));
        };
        let s = f.key_on(0, "s");
        let p = &mut pair;
        frames(p, &["SUBSCRIBE", &a, &b, &a], 3);
        frames(p, &["PSUBSCRIBE", "a*", "b*"], 2);
        frames(p, &["PING"], 1);
        frames(p, &["PING", "hi"], 1);
        frames(p, &["SSUBSCRIBE", &s], 1);
        publish(p, &mut pubs, "PUBLISH", &a, "m1", 2);
        publish(p, &mut pubs, "PUBLISH", &b, "m2", 2);
        publish(p, &mut pubs, "SPUBLISH", &s, "m3", 1);
        frames(p, &["UNSUBSCRIBE", &b, "nosuch"], 2);
        frames(p, &["PUNSUBSCRIBE", "b*"], 1);
        publish(p, &mut pubs, "PUBLISH", &b, "gone", 0);
        frames(p, &["PING", "x"], 1);
        frames(p, &["PUNSUBSCRIBE"], 1);
        frames(p, &["UNSUBSCRIBE"], 1);
        frames(p, &["UNSUBSCRIBE"], 1);
        frames(p, &["SUNSUBSCRIBE"], 1);
        publish(p, &mut pubs, "PUBLISH", &a, "nobody", 0);
        frames(p, &["PING"], 1);
    }
}

fn same_frames(pair: &mut [&mut Raw; 2], n: usize, what: &str) {
    for _ in 0..n {
        let (v, d) = (pair[0].frame(), pair[1].frame());
        assert_eq!(v, d, "{what}");
    }
}

/// A node that restarts: the proxy subscribes it again, and the subscriber (never
/// disconnected) gets messages published after that.
fn subscriptions_survive_a_node_restart(kind: NodeKind) {
    let mut f = fleet(kind, 2, |_| {});
    let ch = f.key_on(0, "ch");
    let mut sub = f.raw();
    assert_eq!(
        sub.call(&["SUBSCRIBE", &ch]),
        format!("*3 $9 subscribe ${} {ch} :1 ", ch.len())
    );
    assert_eq!(
        sub.call(&["PSUBSCRIBE", "p*"]),
        "*3 $10 psubscribe $2 p* :2 "
    );
    let mut c = f.raw();
    assert_eq!(c.call(&["PUBLISH", &ch, "before"]), ":1 ");
    assert_eq!(
        sub.frame(),
        format!("*3 $7 message ${} {ch} $6 before ", ch.len())
    );
    f.nodes[0].spawn();
    let p0 = f.key_on(0, "p");
    wait_until("the hub to subscribe the restarted node again", || {
        c.call(&["PUBLISH", &ch, "after"]) == ":1 "
    });
    assert_eq!(
        sub.frame(),
        format!("*3 $7 message ${} {ch} $5 after ", ch.len())
    );
    wait_until("the pattern to be back", || {
        c.call(&["PUBLISH", &p0, "x"]) == ":1 "
    });
    assert_eq!(
        sub.frame(),
        format!("*4 $8 pmessage $2 p* ${} {p0} $1 x ", p0.len())
    );
    // The subscriber's own counts are unchanged.
    assert_eq!(
        sub.call(&["UNSUBSCRIBE"]),
        format!("*3 $11 unsubscribe ${} {ch} :1 ", ch.len())
    );
}

/// PUBLISH counts every subscribed client, as one Redis does, although the node sees the
/// proxy's one subscriber connection per name.
fn publish_counts_every_subscriber_of_the_proxy(kind: NodeKind) {
    let f = fleet(kind, 2, |_| {});
    let single = lone_node(kind);
    let ch = f.key_on(1, "ch");
    let s = f.key_on(0, "s");
    let mut via: Vec<Raw> = Vec::new();
    let mut direct: Vec<Raw> = Vec::new();
    for (cmd, name) in [
        ("SUBSCRIBE", ch.as_str()),
        ("SUBSCRIBE", ch.as_str()),
        ("SUBSCRIBE", ch.as_str()),
        ("PSUBSCRIBE", "ch*"),
        ("PSUBSCRIBE", "ch*"),
        ("PSUBSCRIBE", "nomatch*"),
        ("SSUBSCRIBE", s.as_str()),
        ("SSUBSCRIBE", s.as_str()),
    ] {
        for (list, mut c) in [(&mut via, f.raw()), (&mut direct, single.raw())] {
            assert!(c.call(&[cmd, name]).ends_with(":1 "));
            list.push(c);
        }
    }
    let counts = |c: &mut Raw| {
        [
            c.call(&["PUBLISH", &ch, "m"]),
            c.call(&["SPUBLISH", &s, "m"]),
            c.call(&["PUBLISH", "other", "m"]),
        ]
    };
    let (mut pv, mut pd) = (f.raw(), single.raw());
    assert_eq!(counts(&mut pv), [":5 ", ":2 ", ":0 "]);
    assert_eq!(counts(&mut pd), [":5 ", ":2 ", ":0 "]);
    // One channel subscriber and one pattern subscriber leave.
    for list in [&mut via, &mut direct] {
        assert!(list[0].frame().starts_with("*3 $7 message "));
        assert!(list[0].call(&["UNSUBSCRIBE", &ch]).ends_with(":0 "));
        drop(list.remove(3));
    }
    wait_until("the closed subscriber to be forgotten", || {
        pv.call(&["PUBLISH", &ch, "m"]) == ":3 "
    });
    assert_eq!(pd.call(&["PUBLISH", &ch, "m"]), ":3 ");
}

/// Many clients subscribing and unsubscribing the same few channels and patterns at once
/// (the hub's first-in / last-out paths racing): afterwards every client gets exactly the
/// messages of what it holds, and PUBLISH counts them.
fn concurrent_subscribers_share_the_hub_consistently(kind: NodeKind) {
    let f = fleet(kind, 2, |_| {});
    let chans: Vec<String> = (0..4).map(|i| f.key_on(i % 2, &format!("c{i}"))).collect();
    let addr = f.proxy.addr();
    let workers: Vec<_> = (0..12)
        .map(|w| {
            let chans = chans.clone();
            std::thread::spawn(move || {
                let mut c = Raw::connect(addr);
                let mut held: Vec<String> = Vec::new();
                // A small deterministic generator per worker.
                let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ w;
                for _ in 0..60 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let pick = |n: u64| (x >> 8) as usize % n as usize;
                    let name = if x & 1 == 0 {
                        chans[pick(4)].clone()
                    } else {
                        format!("{}*", &chans[pick(4)][..2])
                    };
                    let pattern = name.ends_with('*');
                    let has = held.contains(&name);
                    let cmd = match (pattern, has) {
                        (false, false) => "SUBSCRIBE",
                        (false, true) => "UNSUBSCRIBE",
                        (true, false) => "PSUBSCRIBE",
                        (true, true) => "PUNSUBSCRIBE",
                    };
                    if has {
                        held.retain(|h| h != &name);
                    } else {
                        held.push(name.clone());
                    }
                    let got = c.call(&[cmd, &name]);
                    let want = format!(
                        "*3 ${} {} ${} {name} :{} ",
                        cmd.len(),
                        cmd.to_ascii_lowercase(),
                        name.len(),
                        held.len()
                    );
                    assert_eq!(got, want);
                }
                (c, held)
            })
        })
        .collect();
    let mut subs: Vec<(Raw, Vec<String>)> =
        workers.into_iter().map(|w| w.join().unwrap()).collect();
    let mut p = f.raw();
    for ch in &chans {
        let receivers: Vec<usize> = (0..subs.len())
            .filter(|&i| {
                subs[i]
                    .1
                    .iter()
                    .any(|h| h == ch || (h.ends_with('*') && ch.starts_with(&h[..2])))
            })
            .collect();
        let expected: usize = subs
            .iter()
            .map(|(_, held)| {
                held.iter()
                    .filter(|h| *h == ch || (h.ends_with('*') && ch.starts_with(&h[..2])))
                    .count()
            })
            .sum();
        assert_eq!(
            p.call(&["PUBLISH", ch, "m"]),
            format!(":{expected} "),
            "{ch}"
        );
        for i in receivers {
            let n = subs[i]
                .1
                .iter()
                .filter(|h| *h == ch || (h.ends_with('*') && ch.starts_with(&h[..2])))
                .count();
            for _ in 0..n {
                let m = subs[i].0.frame();
                assert!(m.contains(&format!(" {ch} $1 m ")), "{m}");
            }
        }
    }
    // Nothing else arrived: a PING answers next.
    for (c, held) in &mut subs {
        let pong = if held.is_empty() {
            "+PONG "
        } else {
            "*2 $4 pong $0  "
        };
        assert_eq!(c.call(&["PING"]), pong);
    }
}

/// A subscriber that stops reading is dropped once 32 MB of messages wait for it (Redis's
/// pubsub output limit), even while the proxy's writes to it are stuck; the others on the
/// same channel get everything.
fn a_subscriber_that_does_not_read_is_dropped_at_its_limit(kind: NodeKind) {
    let f = fleet(kind, 1, |_| {});
    let mut stuck = f.raw();
    assert_eq!(
        stuck.call(&["SUBSCRIBE", "ch"]),
        "*3 $9 subscribe $2 ch :1 "
    );
    stuck
        .s
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut live = f.raw();
    assert_eq!(live.call(&["SUBSCRIBE", "ch"]), "*3 $9 subscribe $2 ch :1 ");
    let big = "m".repeat(1 << 20);
    let mut p = f.raw();
    let mut counts = Vec::new();
    // The live subscriber reads each message before the next is published.
    for _ in 0..48 {
        counts.push(p.call(&["PUBLISH", "ch", &big]));
        assert_eq!(live.frame_bytes().len(), (1 << 20) + 37);
    }
    assert_eq!(counts[0], ":2 ");
    wait_until("the stuck subscriber to be dropped", || {
        p.call(&["PUBLISH", "ch", "x"]) == ":1 "
    });
    assert_eq!(live.frame(), "*3 $7 message $2 ch $1 x ");
    // The proxy closed it without it reading anything: live and p remain.
    wait_until("the stuck subscriber's connection to close", || {
        p.call(&["INFO", "clients"])
            .contains("connected_clients:2 ")
    });
    // What it finally reads ends.
    let mut sink = vec![0u8; 1 << 20];
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        match stuck.s.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => assert!(Instant::now() < until, "still open"),
        }
    }
}

mod redis_nodes {
    for_kinds!(Redis:
        audit_11_idle_watch_blpop_and_subscribers_do_not_starve_others,
        audit_12_a_70_mib_value_goes_through_the_proxy,
        audit_14_query_buffer_limit_and_maxclients,
        audit_16_proxy_auth_is_still_correct,
        idle_timeout_closes_idle_clients_but_not_subscribers_or_blocked,
        blocking_and_transaction_clients_queue_for_a_dedicated_connection,
        subscription_replies_match_one_redis,
        subscriptions_survive_a_node_restart,
        publish_counts_every_subscriber_of_the_proxy,
        concurrent_subscribers_share_the_hub_consistently,
        a_subscriber_that_does_not_read_is_dropped_at_its_limit,
    );
}

mod valkey_nodes {
    for_kinds!(Valkey:
        audit_11_idle_watch_blpop_and_subscribers_do_not_starve_others,
        audit_12_a_70_mib_value_goes_through_the_proxy,
        audit_14_query_buffer_limit_and_maxclients,
        audit_16_proxy_auth_is_still_correct,
        idle_timeout_closes_idle_clients_but_not_subscribers_or_blocked,
        blocking_and_transaction_clients_queue_for_a_dedicated_connection,
        subscription_replies_match_one_redis,
        subscriptions_survive_a_node_restart,
        publish_counts_every_subscriber_of_the_proxy,
        concurrent_subscribers_share_the_hub_consistently,
        a_subscriber_that_does_not_read_is_dropped_at_its_limit,
    );
}

mod respite_nodes {
    for_kinds!(Respite:
        audit_11_idle_watch_blpop_and_subscribers_do_not_starve_others,
        audit_12_a_70_mib_value_goes_through_the_proxy,
        audit_14_query_buffer_limit_and_maxclients,
        audit_16_proxy_auth_is_still_correct,
        idle_timeout_closes_idle_clients_but_not_subscribers_or_blocked,
        blocking_and_transaction_clients_queue_for_a_dedicated_connection,
        subscription_replies_match_one_redis,
        subscriptions_survive_a_node_restart,
        publish_counts_every_subscriber_of_the_proxy,
        concurrent_subscribers_share_the_hub_consistently,
        a_subscriber_that_does_not_read_is_dropped_at_its_limit,
    );
}
