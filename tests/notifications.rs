//! Keyspace notifications through redis-rs pub/sub: a subscriber to `__key*__:*` sees the
//! events of other clients' commands (`set`, `del`, `expire`, `expired` from the active sweep
//! and from lazy expiry, collection events, `new`), only for the enabled classes; and a
//! differential test compares the whole event stream of a command sequence with a real
//! redis-server's. CONFIG SET/GET renderings are in conformance/cases/notify.txt.

#[macro_use]
mod common;

use common::{c, connect, manual_server, q, real_server, Proto, HANG_GUARD};
use redis::aio::MultiplexedConnection;
use std::sync::mpsc;
use std::time::Duration;

/// A channel the listener also subscribes to: published after the commands under test, it
/// marks the end of their events (publications reach a subscriber in order).
const SENTINEL: &str = "notifications:end";

/// A pub/sub connection (redis-rs's sync API on its own thread) subscribed to every
/// keyspace and keyevent channel.
struct Listener {
    rx: mpsc::Receiver<(String, String)>,
}

impl Listener {
    fn start(url: String) -> Listener {
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let client = redis::Client::open(url).expect("url");
            let mut con = client.get_connection().expect("connect");
            con.set_read_timeout(Some(HANG_GUARD)).expect("timeout");
            let mut ps = con.as_pubsub();
            ps.psubscribe("__key*__:*").expect("psubscribe");
            ps.subscribe(SENTINEL).expect("subscribe");
            ready_tx.send(()).expect("ready");
            // Ends when the server goes away (or after HANG_GUARD of silence).
            while let Ok(m) = ps.get_message() {
                let payload = String::from_utf8_lossy(m.get_payload_bytes()).into_owned();
                if tx
                    .send((m.get_channel_name().to_string(), payload))
                    .is_err()
                {
                    break;
                }
            }
        });
        ready_rx
            .recv_timeout(HANG_GUARD)
            .expect("listener subscribed");
        Listener { rx }
    }

    /// The `channel payload` lines received before the sentinel, which `con` publishes now.
    async fn drain(&self, con: &mut MultiplexedConnection) -> Vec<String> {
        let n: i64 = q(con, &c(&["PUBLISH", SENTINEL, "end"])).await;
        assert_eq!(n, 1);
        let mut out = Vec::new();
        loop {
            let (ch, payload) = self
                .rx
                .recv_timeout(HANG_GUARD)
                .expect("sentinel never came");
            if ch == SENTINEL {
                return out;
            }
            out.push(format!("{ch} {payload}"));
        }
    }
}

/// Runs each space-separated line; replies (and errors) are not the point here.
async fn run(con: &mut MultiplexedConnection, lines: &[&str]) {
    for l in lines {
        let args: Vec<&str> = l.split(' ').collect();
        let _ = tokio::time::timeout(HANG_GUARD, c(&args).query_async::<redis::Value>(con))
            .await
            .unwrap_or_else(|_| panic!("{l} hung"));
    }
}

async fn classes(con: &mut MultiplexedConnection, flags: &str) {
    let () = q(con, &c(&["CONFIG", "SET", "notify-keyspace-events", flags])).await;
}

/// Both channels of one event in db 0, as Redis publishes them (keyspace first).
fn both(event: &str, key: &str) -> [String; 2] {
    [
        format!("__keyspace@0__:{key} {event}"),
        format!("__keyevent@0__:{event} {key}"),
    ]
}

fn events(list: &[(&str, &str)]) -> Vec<String> {
    list.iter().flat_map(|(e, k)| both(e, k)).collect()
}

async fn set_del_expire(proto: Proto) {
    let server = real_server();
    let listener = Listener::start(common::url(&server, proto));
    let mut con = connect(&server, Proto::Resp2).await;
    classes(&mut con, "KEA").await;
    run(
        &mut con,
        &[
            "SET k v",
            "EXPIRE k 100",
            "PERSIST k",
            "DEL k missing",
            "SET k v EX 5",
            "EXPIRE k 0",
        ],
    )
    .await;
    let want = events(&[
        ("set", "k"),
        ("expire", "k"),
        ("persist", "k"),
        ("del", "k"),
        ("set", "k"),
        ("expire", "k"),
        ("del", "k"),
    ]);
    assert_eq!(listener.drain(&mut con).await, want);
}

async fn expired_from_sweep_and_lazy_expiry(proto: Proto) {
    let server = manual_server();
    let listener = Listener::start(common::url(&server, proto));
    let mut con = connect(&server, Proto::Resp2).await;
    classes(&mut con, "Ex").await;
    run(
        &mut con,
        &["SET swept v PX 100", "SET lazy v PX 100", "SET kept v"],
    )
    .await;
    // The active sweep (advance_ms sweeps at the new time).
    server.advance_ms(50);
    run(&mut con, &["PEXPIRE lazy 500"]).await;
    server.advance_ms(51);
    assert_eq!(
        listener.drain(&mut con).await,
        vec!["__keyevent@0__:expired swept"]
    );
    // Lazy expiry: the clock moves without a sweep, then a read finds the key dead (the
    // background sweep may get there first: same event; src/cmd/notify_tests.rs
    // pins the lazy path).
    server.clock().advance_ms(1000);
    run(&mut con, &["GET lazy", "GET kept"]).await;
    assert_eq!(
        listener.drain(&mut con).await,
        vec!["__keyevent@0__:expired lazy"]
    );
}

async fn collection_events(proto: Proto) {
    let server = real_server();
    let listener = Listener::start(common::url(&server, proto));
    let mut con = connect(&server, Proto::Resp2).await;
    classes(&mut con, "KEA").await;
    run(
        &mut con,
        &[
            "HSET h f v",
            "HINCRBY h n 2",
            "HDEL h f n",
            "RPUSH l a b",
            "LPOP l 2",
            "ZADD z 1 a 2 b",
            "ZINCRBY z 5 a",
            "ZREM z a",
            "ZPOPMAX z",
            "SADD s x",
            "SREM s x",
        ],
    )
    .await;
    let want = events(&[
        ("hset", "h"),
        ("hincrby", "h"),
        ("hdel", "h"),
        ("del", "h"),
        ("rpush", "l"),
        ("lpop", "l"),
        ("del", "l"),
        ("zadd", "z"),
        ("zincr", "z"),
        ("zrem", "z"),
        ("zpopmax", "z"),
        ("del", "z"),
        ("sadd", "s"),
        ("srem", "s"),
        ("del", "s"),
    ]);
    assert_eq!(listener.drain(&mut con).await, want);
}

async fn new_class_and_disabled_classes(proto: Proto) {
    let server = real_server();
    let listener = Listener::start(common::url(&server, proto));
    let mut con = connect(&server, Proto::Resp2).await;
    // `n` alone: only key creations.
    classes(&mut con, "En").await;
    run(
        &mut con,
        &["SET a 1", "SET a 2", "LPUSH l x", "LPUSH l y", "INCR c"],
    )
    .await;
    assert_eq!(
        listener.drain(&mut con).await,
        vec![
            "__keyevent@0__:new a",
            "__keyevent@0__:new l",
            "__keyevent@0__:new c"
        ]
    );
    // Only lists, keyspace channel only.
    classes(&mut con, "Kl").await;
    run(
        &mut con,
        &[
            "SET b 1",
            "HSET h f v",
            "SADD s m",
            "EXPIRE b 10",
            "RPUSH l z",
            "DEL b",
        ],
    )
    .await;
    assert_eq!(
        listener.drain(&mut con).await,
        vec!["__keyspace@0__:l rpush"]
    );
    // Classes without K or E, then nothing at all.
    for flags in ["A", ""] {
        classes(&mut con, flags).await;
        run(&mut con, &["SET d 1", "RPUSH l w", "DEL d"]).await;
        assert!(listener.drain(&mut con).await.is_empty(), "{flags:?}");
    }
}

/// Redis 7.2 creates (and publishes) the consumer of XREADGROUP, XCLAIM and XAUTOCLAIM up
/// front, whether or not anything is served or claimed; 7.0 (the differential reference)
/// only when it is, so this is checked here alone.
async fn stream_consumers_created_up_front(proto: Proto) {
    let server = real_server();
    let listener = Listener::start(common::url(&server, proto));
    let mut con = connect(&server, Proto::Resp2).await;
    classes(&mut con, "Et").await;
    run(
        &mut con,
        &[
            "XADD s 1-1 f v",
            "XGROUP CREATE s g $",
            "XREADGROUP GROUP g c1 STREAMS s >",
            "XCLAIM s g c2 0 9-9",
            "XAUTOCLAIM s g c3 0 0",
            "XREADGROUP GROUP g c1 STREAMS s >",
            "XCLAIM s g c2 0 9-9",
            "XAUTOCLAIM s g c3 0 0",
        ],
    )
    .await;
    let mut want = vec!["__keyevent@0__:xadd s", "__keyevent@0__:xgroup-create s"];
    want.extend(["__keyevent@0__:xgroup-createconsumer s"; 3]);
    assert_eq!(listener.drain(&mut con).await, want);
    // A blocking XREADGROUP creates its consumer when it blocks, not when served.
    let mut blocked = connect(&server, Proto::Resp2).await;
    let waiter = tokio::spawn(async move {
        let cmd = c(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "c4",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ]);
        let _: redis::Value = cmd.query_async(&mut blocked).await.expect("served");
    });
    common::until_blocked(&mut con, 1).await;
    assert_eq!(
        listener.drain(&mut con).await,
        vec!["__keyevent@0__:xgroup-createconsumer s"]
    );
    run(&mut con, &["XADD s 2-1 f v"]).await;
    tokio::time::timeout(HANG_GUARD, waiter)
        .await
        .expect("blocked client never served")
        .expect("waiter");
    assert_eq!(
        listener.drain(&mut con).await,
        vec!["__keyevent@0__:xadd s"]
    );
}

both_protocols!(
    set_del_expire,
    expired_from_sweep_and_lazy_expiry,
    collection_events,
    new_class_and_disabled_classes,
    stream_consumers_created_up_front
);

/// Commands for the differential test: every family, creation, overwrite, deletion of
/// emptied collections, no-ops that emit nothing, MULTI/EXEC and scripts.
const SEQUENCE: &[&str] = &[
    "SET s 1",
    "SET s 2 EX 100",
    "SET s 3 KEEPTTL",
    "SET s 4 GET",
    "SETNX s 5",
    "SETNX s2 5",
    "SETEX s3 100 v",
    "PSETEX s4 100000 v",
    "GETSET s 7",
    "GETEX s EX 50",
    "GETEX s PERSIST",
    "GETEX s PXAT 1",
    "GETDEL s2",
    "MSET a 1 b 2",
    "MSETNX a 1 c 3",
    "MSETNX c 3 d 4",
    "APPEND a xyz",
    "APPEND newapp x",
    "SETRANGE a 1 QQ",
    "SETRANGE newsr 2 x",
    "INCR i",
    "INCRBY i 5",
    "DECR i",
    "DECRBY i 2",
    "INCRBYFLOAT f 1.5",
    "DEL a b nokey",
    "UNLINK c d",
    "SET e 1",
    "EXPIRE e 100",
    "PEXPIRE e 100000",
    "EXPIREAT e 99999999999",
    "EXPIRE e 100 NX",
    "PERSIST e",
    "EXPIRE e -1",
    "SET r1 v",
    "RENAME r1 r2",
    "SET r3 v",
    "RENAME r2 r3",
    "RENAMENX r3 r4",
    "COPY r4 c1",
    "COPY r4 c1 REPLACE",
    "COPY r4 c1 DB 1",
    "MOVE c1 2",
    "HSET h f v",
    "HSET h f v2 g w",
    "HSETNX h f x",
    "HSETNX h n x",
    "HMSET h a 1",
    "HINCRBY h a 2",
    "HINCRBYFLOAT h a 1.5",
    "HDEL h nof",
    "HDEL h f g n a",
    "LPUSH l a b",
    "RPUSH l c",
    "LPUSHX l d",
    "RPUSHX nol d",
    "LINSERT l BEFORE a z",
    "LINSERT l BEFORE nope z",
    "LSET l 0 q",
    "LREM l 1 z",
    "LTRIM l 0 2",
    "LPOP l",
    "RPOP l 5",
    "RPUSH l a b c d",
    "LMOVE l l2 LEFT RIGHT",
    "RPOPLPUSH l l2",
    "LMOVE l2 l2 LEFT LEFT",
    "LMPOP 2 nol l RIGHT COUNT 5",
    "BLPOP l2 0",
    "BLMOVE l2 l4 LEFT LEFT 1",
    "BLMPOP 1 2 nol l4 LEFT",
    "SADD st a b c",
    "SREM st a x",
    "SPOP st",
    "SPOP st 5",
    "SADD s1 a b",
    "SMOVE s1 s9 a",
    "SMOVE s1 s9 b",
    "SADD x1 a b c",
    "SADD x2 b c d",
    "SINTERSTORE dst x1 x2",
    "SUNIONSTORE dst x1 x2",
    "SDIFFSTORE dst x1 x2",
    "SINTERSTORE dst x1 nokey",
    "ZADD z 1 a 2 b",
    "ZADD z 1 a",
    "ZADD z INCR 2 a",
    "ZADD z XX 5 zz",
    "ZINCRBY z2 1 b",
    "ZREM z b",
    "ZADD z 1 a 2 b 3 c 4 d 5 e",
    "ZREMRANGEBYSCORE z 1 1",
    "ZREMRANGEBYRANK z 0 0",
    "ZADD zl 0 a 0 b 0 c",
    "ZREMRANGEBYLEX zl [a [b",
    "ZPOPMIN z",
    "ZPOPMAX z 10",
    "ZADD z 1 a 2 b 3 c",
    "ZMPOP 1 z MIN COUNT 1",
    "BZPOPMIN z 1",
    "BZMPOP 1 1 z MAX COUNT 5",
    "ZADD za 1 a 2 b",
    "ZADD zb 2 b 3 c",
    "ZUNIONSTORE zd 2 za zb",
    "ZINTERSTORE zd 2 za zb",
    "ZDIFFSTORE zd 2 za zb",
    "ZRANGESTORE zd za 0 -1",
    "ZRANGESTORE zd za 5 10",
    // Errors and no-ops publish nothing; overwrites publish no `new`.
    "SET str x",
    "LPUSH str a",
    "HINCRBY str f 1",
    "INCR str",
    "HSET h f notint",
    "HINCRBY h f 1",
    "HINCRBYFLOAT h f 1",
    "ZADD zn GT 1 a",
    "ZADD z2 +inf a",
    "ZINCRBY z2 -inf a",
    "ZADD z2 NX 1 a",
    "SETRANGE sr 536870912 x",
    "LPUSH src a",
    "RPOPLPUSH src str",
    "SMOVE str s a",
    "SADD s1 a",
    "SMOVE s1 str a",
    "LSET src 5 x",
    "LSET nol 0 x",
    "COPY src str",
    "EXPIRE src 100 XX",
    "GETEX nokey EX 5",
    "SPOP nos",
    "SINTERSTORE str s1 s1",
    "MSETNX str 1 new 2",
    "ZREMRANGEBYRANK zn 5 10",
    "LTRIM src 0 -1",
    "LINSERT nol BEFORE a b",
    "HSETNX h f v",
    "INCRBYFLOAT fl abc",
    "APPEND str more",
    "HDEL h nope",
    "HDEL h f",
    "SREM nos a",
    "ZREM noz a",
    "LREM src 0 nothere",
    "LREM src 0 a",
    "ZADD zz 1 a",
    "ZADD zz CH INCR 1 a",
    "ZADD zz XX 1 b",
    "ZADD zz LT 5 a",
    "ZADD zz GT 0 a",
    "SELECT 1",
    "SET in1 1",
    "LPUSH l1 a",
    "MOVE l1 0",
    "SELECT 0",
    "MULTI",
    "SET t 1",
    "INCR t",
    "DEL t",
    "EXEC",
    "EVAL redis.call('set',KEYS[1],'x');redis.call('lpush',KEYS[2],'y');return(1) 2 sc sl",
    "SELECT 3",
    "SET in3 v",
    "SWAPDB 3 4",
    "SELECT 0",
    "FLUSHALL",
];

/// Stream commands (class `t`): every event, in Redis's order, and the cases that publish
/// nothing. Left out because Redis 7.0 (the reference here) and 7.2 differ: a consumer that
/// XREADGROUP creates without serving it anything, or that XCLAIM/XAUTOCLAIM create
/// without claiming anything (7.2 creates and publishes it up front, 7.0 only when served),
/// and an XREADGROUP that blocks with a new consumer (7.2 publishes at block time).
const STREAM_SEQUENCE: &[&str] = &[
    "XADD xs NOMKSTREAM * f v",
    "XADD xs 1-1 f v",
    "XADD xs 2-1 f v a b",
    "XADD xs MAXLEN 1 3-1 f v",
    "XADD xs MAXLEN 5 4-1 f v",
    "XADD xs NOMKSTREAM 5-1 f v",
    "XADD xs 1-0 f v",
    "XADD xs 0-0 f v",
    "XADD xm MAXLEN 0 1-1 f v",
    "XADD xe 0-0 f v",
    "XADD xe NOMKSTREAM MAXLEN 0 1-1 f v",
    "SET xstr v",
    "XADD xstr 1-1 f v",
    "XTRIM xs MAXLEN 10",
    "XTRIM xs MAXLEN 2",
    "XTRIM nokey MAXLEN 0",
    "XTRIM xs MINID 5-1",
    "XTRIM xs MINID 5-1",
    "XDEL xs 1-1",
    "XDEL xs 5-1",
    "XDEL nokey 1-1",
    "XADD xs 6-1 f v",
    "XADD xs 7-1 f v",
    "XSETID xs 10-1",
    "XSETID xs 1-1",
    "XSETID nokey 1-1",
    "XGROUP CREATE xs g 0",
    "XGROUP CREATE xs g 0",
    "XGROUP CREATE xg g $ MKSTREAM",
    "XGROUP CREATE xg g2 0 MKSTREAM",
    "XGROUP CREATE xn g 0",
    "XGROUP CREATE xn g bad MKSTREAM",
    "XGROUP CREATE xstr g 0 MKSTREAM",
    "XGROUP CREATECONSUMER xs g c1",
    "XGROUP CREATECONSUMER xs g c1",
    "XGROUP CREATECONSUMER xs nog c1",
    "XGROUP SETID xs g $ ENTRIESREAD 1",
    "XGROUP SETID xs g 0",
    "XGROUP SETID xs nog 0",
    "XREADGROUP GROUP g c2 COUNT 1 STREAMS xs >",
    "XREADGROUP GROUP g c2 STREAMS xs >",
    "XREADGROUP GROUP g c2 STREAMS xs >",
    "XREADGROUP GROUP g c1 STREAMS xs 0",
    "XREADGROUP GROUP g c3 STREAMS xs 0",
    "XREADGROUP GROUP nog c9 STREAMS xs >",
    "XREAD STREAMS xs 0",
    "XCLAIM xs g c1 0 6-1",
    "XCLAIM xs g c4 0 7-1",
    "XCLAIM xs g c4 0 7-1 JUSTID",
    "XAUTOCLAIM xs g c5 0 0",
    "XAUTOCLAIM xs g c5 0 0 JUSTID",
    "XACK xs g 6-1",
    "XACK xs g 6-1",
    "XGROUP DELCONSUMER xs g c5",
    "XGROUP DELCONSUMER xs g nope",
    "XGROUP DESTROY xs g",
    "XGROUP DESTROY xs g",
    "XADD xs MAXLEN ~ 1 11-1 f v",
    "DEL xs xm",
    // Set up the blocked XREADGROUP of `event_stream` (its consumer already exists).
    "XGROUP CREATE xbg g $ MKSTREAM",
    "XGROUP CREATECONSUMER xbg g c",
];

/// Runs SEQUENCE and STREAM_SEQUENCE against `port` with notifications on, and returns the
/// events a subscriber saw, including those of blocked clients served by a push.
async fn event_stream(port: u16) -> Vec<String> {
    let url = common::url_for_port(port, Proto::Resp2);
    let listener = Listener::start(url.clone());
    let mut con = common::connect_url(&url).await;
    classes(&mut con, "KEAn").await;
    run(&mut con, SEQUENCE).await;
    run(&mut con, STREAM_SEQUENCE).await;
    // Expiry on access (the key lived 1 ms; either expiry path gives the same event).
    run(&mut con, &["SET ex v PX 1"]).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    run(&mut con, &["GET ex"]).await;
    // Blocked clients served by another client's push.
    for (block, feed) in [
        ("BLPOP bl 0", "RPUSH bl a"),
        ("BLMOVE bl bdst RIGHT LEFT 0", "LPUSH bl b c"),
        ("BZPOPMIN bz 0", "ZADD bz 1 m"),
        ("XREAD BLOCK 0 STREAMS xb $", "XADD xb 1-1 f v"),
        (
            "XREADGROUP GROUP g c BLOCK 0 STREAMS xbg >",
            "XADD xbg 1-1 f v",
        ),
    ] {
        let mut blocked = common::connect_url(&url).await;
        let args: Vec<String> = block.split(' ').map(String::from).collect();
        let waiter = tokio::spawn(async move {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let _: redis::Value = c(&refs).query_async(&mut blocked).await.expect("served");
        });
        common::until_blocked(&mut con, 1).await;
        run(&mut con, &[feed]).await;
        tokio::time::timeout(HANG_GUARD, waiter)
            .await
            .expect("blocked client never served")
            .expect("waiter");
    }
    let events = listener.drain(&mut con).await;
    classes(&mut con, "").await;
    events
}

/// The same commands give the same events, in the same order, as a real redis-server.
#[tokio::test]
async fn event_stream_matches_redis() {
    let redis = common::ServerProcess::redis();
    let server = real_server();
    let want = event_stream(redis.port).await;
    let got = event_stream(server.port()).await;
    assert!(want.len() > 300, "redis emitted only {} events", want.len());
    let first = want.iter().zip(&got).position(|(a, b)| a != b);
    assert_eq!(
        got, want,
        "first difference at {first:?} (respite vs redis-server)"
    );
}
