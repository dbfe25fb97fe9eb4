//! Command-level checks of what the differential suite cannot show: Redis 7.2 behaviour the
//! 7.0 oracle lacks, blocking paths, WATCH signalling, large-set SCAN and random sampling.

use crate::cmd::testing::Client;
use crate::protocol::Reply;
use bytes::Bytes;
use std::collections::HashSet;

fn int(r: Reply) -> i64 {
    match r {
        Reply::Int(n) => n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// The members of an array-of-bulks reply, structured or pre-encoded (`Reply::Raw`).
fn members(c: &mut Client, line: &str) -> Vec<Bytes> {
    match c.line(line) {
        Reply::Raw(b) => match crate::protocol::parse_command(
            &mut bytes::BytesMut::from(&b[..]),
            crate::protocol::Limits::default(),
        ) {
            Ok(crate::protocol::Parsed::Command(v)) => v,
            other => panic!("bad raw reply {b:?}: {other:?}"),
        },
        Reply::Array(v) => v
            .into_iter()
            .map(|r| match r {
                Reply::Bulk(b) => b,
                other => panic!("not a bulk: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

/// `ZADD key 0 m0 1 m1 ... (n-1) m(n-1)` in one command.
fn fill(c: &mut Client, key: &str, n: usize) {
    let mut line = format!("ZADD {key}");
    for i in 0..n {
        line.push_str(&format!(" {i} m{i}"));
    }
    assert_eq!(int(c.line(&line)), n as i64);
}

/// Runs a handler directly, past dispatch's arity check: the command table keeps Redis
/// 7.0's arity for ZRANK/ZREVRANK (see `table.rs`) while the handler speaks 7.2.
fn direct(c: &mut Client, handler: crate::cmd::table::Handler, line: &str) -> Reply {
    let args: Vec<Bytes> = line
        .split(' ')
        .map(|a| Bytes::copy_from_slice(a.as_bytes()))
        .collect();
    let (_, spec) = crate::cmd::registry().lookup(&args[0]).expect("command");
    let now = c.srv.clock.now_ms();
    let mut access = c.srv.ks.shared(0, &[&args[1][..]], now);
    let mut cx = crate::cmd::Cx {
        args: &args,
        ks: &mut access,
        sess: &mut c.sess,
        srv: &c.srv,
        spec,
    };
    handler(&mut cx)
}

#[test]
fn zrank_withscore_is_redis_7_2() {
    use super::basic::{zrank, zrevrank};
    let mut c = Client::new();
    c.line("ZADD z 1.5 a 2 b");
    assert_eq!(
        direct(&mut c, zrank, "ZRANK z b WITHSCORE"),
        Reply::Array(vec![Reply::Int(1), Reply::Double(2.0)])
    );
    assert_eq!(
        direct(&mut c, zrevrank, "ZREVRANK z b withscore"),
        Reply::Array(vec![Reply::Int(0), Reply::Double(2.0)])
    );
    assert_eq!(
        direct(&mut c, zrank, "ZRANK z x WITHSCORE"),
        Reply::NilArray
    );
    assert_eq!(
        direct(&mut c, zrank, "ZRANK nokey x WITHSCORE"),
        Reply::NilArray
    );
    assert_eq!(direct(&mut c, zrank, "ZRANK nokey x"), Reply::Nil);
    assert_eq!(
        direct(&mut c, zrank, "ZRANK z a WITHSCORES"),
        crate::cmd::errors::syntax()
    );
    assert_eq!(
        direct(&mut c, zrank, "ZRANK z a WITHSCORE x"),
        Reply::error("ERR wrong number of arguments for 'zrank' command")
    );
}

#[test]
fn zadd_with_more_pairs_than_the_listpack_limit_converts_at_once() {
    // Redis 7.2 `zsetTypeMaybeConvert`: the pair count is a size hint, even for updates.
    let mut c = Client::new();
    c.line("ZADD z 1 a");
    let mut line = String::from("ZADD z");
    for _ in 0..129 {
        line.push_str(" 1 a");
    }
    c.line(&line);
    assert_eq!(c.line("ZCARD z"), Reply::Int(1));
    assert_eq!(c.encoding("z"), "skiplist");
    // A new key is created by the same hint.
    let mut line = String::from("ZADD y");
    for _ in 0..129 {
        line.push_str(" 1 a");
    }
    c.line(&line);
    assert_eq!(c.encoding("y"), "skiplist");
    // And converted sets never go back.
    c.line("ZREM z a");
    c.line("ZADD z 1 a");
    assert_eq!(c.encoding("z"), "listpack");
}

#[test]
fn listpack_keeps_integral_scores_as_integers() {
    let mut c = Client::new();
    // The reply is the computed score; a listpack stores -0 as the integer 0.
    assert_eq!(c.line("ZADD z INCR -0 a"), Reply::Double(-0.0));
    match c.line("ZSCORE z a") {
        Reply::Double(d) => assert!(d == 0.0 && d.is_sign_positive()),
        other => panic!("{other:?}"),
    }
    c.line("ZADD big 0 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    c.line("ZADD big -0 a");
    match c.line("ZSCORE big a") {
        Reply::Double(d) => assert!(d == 0.0 && d.is_sign_negative()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn blocking_pops_block_and_are_served_by_writers() {
    let mut a = Client::new();
    let mut b = Client::on(a.srv.clone());
    assert_eq!(a.line("BZPOPMIN k other 0"), Reply::NoReply);
    let mut blocked = a.sess.blocked.take().expect("blocked");
    assert_eq!(blocked.waiter.keys, vec!["k", "other"]);
    assert!(blocked.deadline.is_none());
    assert_eq!(blocked.timeout_reply, Reply::NilArray);
    // A ZADD on one of the keys serves the waiter with Redis's reply shape.
    assert_eq!(b.line("ZADD k 1 x 2 y"), Reply::Int(2));
    let served = blocked.rx.try_recv().expect("served");
    let want = vec![
        Reply::Bulk(Bytes::from_static(b"k")),
        Reply::Bulk(Bytes::from_static(b"x")),
        Reply::Double(1.0),
    ];
    assert_eq!(served, Reply::Array(want));
    assert_eq!(b.line("ZCARD k"), Reply::Int(1));

    // BZMPOP blocks with a deadline; a store command's result serves it.
    assert_eq!(a.line("BZMPOP 1.5 2 m n MAX COUNT 5"), Reply::NoReply);
    let mut blocked = a.sess.blocked.take().expect("blocked");
    assert!(blocked.deadline.is_some());
    assert_eq!(b.line("ZUNIONSTORE n 1 k"), Reply::Int(1));
    let served = blocked.rx.try_recv().expect("served");
    let want = vec![
        Reply::Bulk(Bytes::from_static(b"n")),
        Reply::Array(vec![Reply::Array(vec![
            Reply::Bulk(Bytes::from_static(b"y")),
            Reply::Double(2.0),
        ])]),
    ];
    assert_eq!(served, Reply::Array(want));

    // Inside EXEC the timeout reply comes at once.
    a.line("MULTI");
    a.line("BZPOPMAX k2 0");
    a.line("BZMPOP 0 1 k2 MIN");
    assert_eq!(
        a.line("EXEC"),
        Reply::Array(vec![Reply::NilArray, Reply::NilArray])
    );
    assert!(a.sess.blocked.is_none());
    // Redis 7.2 refuses an infinite timeout as out of range.
    assert_eq!(
        a.line("BZPOPMIN k inf"),
        Reply::error("ERR timeout is out of range")
    );
}

#[test]
fn no_op_writes_do_not_touch_watchers() {
    let mut c = Client::new();
    c.line("ZADD z 1 a");
    for noop in [
        "ZADD z 1 a",
        "ZADD z NX 5 a",
        "ZADD z XX 1 b",
        "ZREM z x",
        "ZPOPMIN z 0",
    ] {
        c.line("WATCH z");
        c.line(noop);
        c.line("MULTI");
        c.line("PING");
        assert_ne!(c.line("EXEC"), Reply::NilArray, "{noop} signalled WATCH");
    }
    for change in [
        "ZADD z 2 a",
        "ZINCRBY z 1 a",
        "ZREMRANGEBYSCORE z 100 200",
        "ZADD z 1 b",
    ] {
        c.line("WATCH z");
        c.line(change);
        c.line("MULTI");
        c.line("PING");
        let expect_abort = change != "ZREMRANGEBYSCORE z 100 200";
        assert_eq!(c.line("EXEC") == Reply::NilArray, expect_abort, "{change}");
    }
}

/// ZSCAN over a skiplist set: cursors, COUNT, and no member missed while the set changes.
#[test]
fn zscan_of_a_skiplist_set_covers_every_member() {
    let mut c = Client::new();
    fill(&mut c, "z", 1000);
    assert_eq!(c.encoding("z"), "skiplist");
    let mut seen: HashSet<Bytes> = HashSet::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let Reply::Array(parts) = c.line(&format!("ZSCAN z {cursor} COUNT 25")) else {
            panic!("bad reply");
        };
        let (Reply::Bulk(next), Reply::Array(items)) = (&parts[0], &parts[1]) else {
            panic!("bad reply shape");
        };
        // COUNT members (pairs), a bucket's worth more at most, as Redis's dict walk.
        assert!(items.len() <= 2 * (25 + 8), "COUNT bounds a step");
        for pair in items.chunks(2) {
            if let Reply::Bulk(m) = &pair[0] {
                seen.insert(m.clone());
            }
        }
        calls += 1;
        // Churn that must not hide members present throughout.
        c.line(&format!("ZADD z -1 new{calls}"));
        c.line(&format!("ZREM z new{}", calls.max(2) - 1));
        cursor = String::from_utf8_lossy(next).into_owned();
        if cursor == "0" {
            break;
        }
    }
    assert!(calls >= 1000 / (25 + 8), "the walk took COUNT-sized steps");
    for i in 0..1000 {
        assert!(seen.contains(format!("m{i}").as_bytes()), "m{i} missed");
    }
}

#[test]
fn zrandmember_counts_on_both_encodings() {
    let mut c = Client::new();
    fill(&mut c, "small", 10);
    fill(&mut c, "big", 300);
    for key in ["small", "big"] {
        let n = if key == "small" { 10 } else { 300 };
        for count in [1, 3, n / 2, n - 1] {
            let got = members(&mut c, &format!("ZRANDMEMBER {key} {count}"));
            let distinct: HashSet<_> = got.iter().collect();
            assert_eq!(got.len(), count, "{key} {count}");
            assert_eq!(distinct.len(), count, "{key} {count} repeats");
        }
        let got = members(&mut c, &format!("ZRANDMEMBER {key} -{}", 3 * n));
        assert_eq!(got.len(), 3 * n);
        let Reply::Array(got) = c.line(&format!("ZRANDMEMBER {key} 5 WITHSCORES")) else {
            panic!("not an array");
        };
        assert_eq!(got.len(), 10);
        for pair in got.chunks(2) {
            // Members are m<i> with score i.
            let (Reply::Bulk(m), Reply::Double(s)) = (&pair[0], &pair[1]) else {
                panic!("bad pair {pair:?}");
            };
            assert_eq!(String::from_utf8_lossy(&m[1..]), s.to_string());
        }
    }
    // A listpack's unique sample comes in set order.
    let got = members(&mut c, "ZRANDMEMBER small 5");
    let ranks: Vec<usize> = got
        .iter()
        .map(|m| String::from_utf8_lossy(&m[1..]).parse().unwrap_or(0))
        .collect();
    assert!(ranks.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(
        c.line("ZRANDMEMBER small -20000000"),
        Reply::error("ERR value is out of range")
    );
}

#[test]
fn big_sets_rank_and_range_agree() {
    let mut c = Client::new();
    fill(&mut c, "z", 5000);
    assert_eq!(c.line("ZRANK z m4321"), Reply::Int(4321));
    assert_eq!(c.line("ZREVRANK z m4321"), Reply::Int(678));
    let got = members(&mut c, "ZRANGE z 2500 2502");
    assert_eq!(got, vec!["m2500", "m2501", "m2502"]);
    let got = members(&mut c, "ZRANGE z (100 +inf BYSCORE LIMIT 1000 2");
    assert_eq!(got, vec!["m1101", "m1102"]);
    let got = members(&mut c, "ZRANGE z 4000 -inf BYSCORE REV LIMIT 10 2");
    assert_eq!(got, vec!["m3990", "m3989"]);
    assert_eq!(c.line("ZREMRANGEBYRANK z 100 3999"), Reply::Int(3900));
    assert_eq!(c.line("ZCOUNT z -inf +inf"), Reply::Int(1100));
    assert_eq!(c.line("ZRANK z m4000"), Reply::Int(100));
    assert_eq!(c.encoding("z"), "skiplist");
}

#[test]
fn pre_encoded_rows_match_the_writer() {
    use super::Rows;
    use crate::protocol::write_reply;
    let sets: [&[&[u8]]; 3] = [&[], &[b"a"], &[b"", b"x\r\ny", b"\x00\xff", &[b'z'; 300]]];
    for members in sets {
        for resp3 in [false, true] {
            let mut rows = Rows::new(resp3, false, 2);
            for m in members {
                rows.push(&Bytes::copy_from_slice(m), 1.0);
            }
            let Reply::Raw(raw) = rows.reply() else {
                panic!("members-only rows are pre-encoded");
            };
            let structured = Reply::Array(
                members
                    .iter()
                    .map(|m| Reply::Bulk(Bytes::copy_from_slice(m)))
                    .collect(),
            );
            let mut want = bytes::BytesMut::new();
            write_reply(&mut want, &structured, resp3);
            assert_eq!(&raw[..], &want[..]);
        }
    }
    // 10_000 members: a count with more digits than the room reserved for small replies.
    let mut rows = Rows::new(false, false, 0);
    for _ in 0..10_000 {
        rows.push(&Bytes::from_static(b"m"), 0.0);
    }
    let Reply::Raw(raw) = rows.reply() else {
        panic!("pre-encoded");
    };
    assert!(raw.starts_with(b"*10000\r\n$1\r\nm\r\n"));
}
