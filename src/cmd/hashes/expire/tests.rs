//! Redis's tests/unit/type/hash-field-expire.tcl (7.4 and 8.0), ported: each case runs on a
//! listpack and on a hashtable hash, with a manual clock in place of `after`, and with no
//! active expiry unless a case runs the sweep itself (Redis's `debug set-active-expire 0`).

use crate::clock::Clock;
use crate::cmd::testing::Client;
use crate::config::Config;
use crate::protocol::Reply;
use std::sync::Arc;

/// A fixed start (2023-11-14T22:13:20Z), so deadlines in tests are exact.
const T0: u64 = 1_700_000_000_000;
const T0_S: u64 = T0 / 1000;

fn client() -> Client {
    let clock = Clock::manual();
    clock.set_ms(T0);
    Client::on(Arc::new(crate::cmd::new_shared(Config::default(), clock)))
}

/// One client per encoding: listpack(ex) and hashtable.
fn both() -> [(Client, &'static str); 2] {
    let lp = client();
    let mut ht = client();
    assert_eq!(ht.line("CONFIG SET hash-max-listpack-entries 0"), Reply::OK);
    [(lp, "listpack"), (ht, "hashtable")]
}

fn ints(r: Reply) -> Vec<i64> {
    match r {
        Reply::Array(v) => v
            .into_iter()
            .map(|r| match r {
                Reply::Int(n) => n,
                other => panic!("not an integer: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

/// An array of bulks and nils as strings ("" for nil).
fn strs(r: Reply) -> Vec<String> {
    match r {
        Reply::Array(v) => v
            .into_iter()
            .map(|r| match r {
                Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
                Reply::Nil => String::new(),
                other => panic!("not a bulk: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

fn sorted(c: &mut Client, line: &str) -> Vec<String> {
    let mut v: Vec<String> = match c.line(line) {
        Reply::Map(m) => m
            .into_iter()
            .flat_map(|(k, v)| [k, v])
            .map(|r| match r {
                Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
                other => panic!("{other:?}"),
            })
            .collect(),
        r => strs(r),
    };
    v.sort();
    v
}

fn err(r: Reply) -> String {
    match r {
        Reply::Error(e) => e.into_owned(),
        other => panic!("not an error: {other:?}"),
    }
}

fn advance(c: &Client, ms: u64) {
    c.srv.clock.advance_ms(ms);
}

/// The active cycle, as the server's timer runs it.
fn sweep(c: &Client) {
    let now = c.srv.clock.now_ms();
    c.srv.ks.sweep(now, usize::MAX);
}

#[test]
fn missing_key_replies_arrays() {
    for (mut c, _) in both() {
        assert_eq!(ints(c.line("HEXPIRE myhash 1000 FIELDS 1 a")), [-2]);
        assert_eq!(ints(c.line("HEXPIREAT myhash 1000 FIELDS 1 a")), [-2]);
        assert_eq!(ints(c.line("HPEXPIRE myhash 1000 FIELDS 2 a b")), [-2, -2]);
        assert_eq!(
            ints(c.line("HPEXPIREAT myhash 1000 FIELDS 2 a b")),
            [-2, -2]
        );
        assert_eq!(ints(c.line("HTTL myhash FIELDS 1 a")), [-2]);
        assert_eq!(ints(c.line("HPTTL myhash FIELDS 2 a b")), [-2, -2]);
        assert_eq!(ints(c.line("HEXPIRETIME myhash FIELDS 1 a")), [-2]);
        assert_eq!(ints(c.line("HPEXPIRETIME myhash FIELDS 2 a b")), [-2, -2]);
        assert_eq!(ints(c.line("HPERSIST myhash FIELDS 2 a b")), [-2, -2]);
        assert_eq!(strs(c.line("HGETEX myhash EX 10 FIELDS 2 a b")), ["", ""]);
        assert_eq!(strs(c.line("HGETDEL myhash FIELDS 1 a")), [""]);
        assert_eq!(c.line("EXISTS myhash"), Reply::Int(0));
    }
}

#[test]
fn expire_time_bounds_and_errors() {
    for (mut c, _) in both() {
        c.line("HSET myhash f1 v1");
        let e = |c: &mut Client, l: &str| err(c.line(l));
        assert_eq!(
            e(&mut c, "HEXPIRE myhash -1 FIELDS 1 f1"),
            "ERR invalid expire time, must be >= 0"
        );
        assert_eq!(
            e(&mut c, "HEXPIRE myhash -9223372036854775808 FIELDS 1 f1"),
            "ERR invalid expire time, must be >= 0"
        );
        assert_eq!(
            e(
                &mut c,
                &format!("HEXPIRE myhash {} FIELDS 1 f1", (1u64 << 48) / 1000)
            ),
            "ERR invalid expire time in 'hexpire' command"
        );
        assert_eq!(
            e(
                &mut c,
                &format!(
                    "HEXPIREAT myhash {} FIELDS 1 f1",
                    (1u64 << 48) / 1000 + T0_S + 100
                )
            ),
            "ERR invalid expire time in 'hexpireat' command"
        );
        assert_eq!(
            e(
                &mut c,
                &format!("HPEXPIRE myhash {} FIELDS 1 f1", 1u64 << 48)
            ),
            "ERR invalid expire time in 'hpexpire' command"
        );
        assert_eq!(
            e(
                &mut c,
                &format!("HPEXPIREAT myhash {} FIELDS 1 f1", (1u64 << 48) + T0)
            ),
            "ERR invalid expire time in 'hpexpireat' command"
        );
        // Near 2^46 ms: just below is accepted, just above is not.
        let below = (1u64 << 46) - T0 - 1000;
        assert_eq!(
            ints(c.line(&format!("HPEXPIRE myhash {below} FIELDS 1 f1"))),
            [1]
        );
        assert!(e(
            &mut c,
            &format!("HPEXPIRE myhash {} FIELDS 1 f1", below + 1100)
        )
        .contains("invalid expire time"));
        assert_eq!(
            e(&mut c, "HPEXPIRE myhash x FIELDS 1 f1"),
            "ERR value is not an integer or out of range"
        );
    }
}

#[test]
fn numfields_and_fields_errors() {
    for (mut c, _) in both() {
        c.line("HSET myhash f1 v1");
        let e = |c: &mut Client, l: &str| err(c.line(l));
        assert_eq!(
            e(&mut c, "HPEXPIRE myhash 1000 NX FIELDS 0 f1 f2 f3"),
            "ERR Parameter `numFields` should be greater than 0"
        );
        assert_eq!(
            e(&mut c, "HPEXPIRE myhash 1000 NX FIELDS 4 f1 f2 f3"),
            "ERR The `numfields` parameter must match the number of arguments"
        );
        assert_eq!(
            e(&mut c, "HPEXPIRE myhash 1000 NX FIELDS 2 f1 f2 f3"),
            "ERR The `numfields` parameter must match the number of arguments"
        );
        assert_eq!(
            e(&mut c, "HPEXPIRE myhash 1000 NX FIELDX 1 f1"),
            "ERR Mandatory argument FIELDS is missing or not at the right position"
        );
        for cmd in ["HTTL", "HPTTL", "HEXPIRETIME", "HPEXPIRETIME", "HPERSIST"] {
            assert_eq!(
                e(&mut c, &format!("{cmd} myhash FIELDS 1 a b")),
                "ERR The `numfields` parameter must match the number of arguments"
            );
            assert_eq!(
                e(&mut c, &format!("{cmd} myhash FIELDS 3 a b")),
                "ERR The `numfields` parameter must match the number of arguments"
            );
            assert_eq!(
                e(&mut c, &format!("{cmd} myhash FIELDS 0 a")),
                "ERR Number of fields must be a positive integer"
            );
            assert_eq!(
                e(&mut c, &format!("{cmd} myhash 1 1 a")),
                "ERR Mandatory argument FIELDS is missing or not at the right position"
            );
        }
        assert_eq!(
            e(&mut c, "HPERSIST myhash"),
            "ERR wrong number of arguments for 'hpersist' command"
        );
        assert_eq!(
            e(&mut c, "HPERSIST myhash FIELDS 1"),
            "ERR wrong number of arguments for 'hpersist' command"
        );
    }
}

#[test]
fn nx_xx_gt_lt() {
    for (mut c, _) in both() {
        c.line("HSET myhash field1 value1 field2 value2 field3 value3");
        assert_eq!(ints(c.line("HPEXPIRE myhash 1000 NX FIELDS 1 field1")), [1]);
        assert_eq!(
            ints(c.line("HPEXPIRE myhash 1000 NX FIELDS 2 field1 field2")),
            [0, 1]
        );
        c.line("DEL myhash");
        c.line("HSET myhash field1 value1 field2 value2 field3 value3");
        assert_eq!(
            ints(c.line("HPEXPIRE myhash 1000 NX FIELDS 2 field1 field2")),
            [1, 1]
        );
        assert_eq!(
            ints(c.line("HPEXPIRE myhash 1000 XX FIELDS 2 field1 field3")),
            [1, 0]
        );
        c.line("DEL myhash");
        c.line("HSET myhash field1 value1 field2 value2");
        assert_eq!(ints(c.line("HPEXPIRE myhash 1000 NX FIELDS 1 field1")), [1]);
        assert_eq!(ints(c.line("HPEXPIRE myhash 2000 NX FIELDS 1 field2")), [1]);
        assert_eq!(
            ints(c.line("HPEXPIRE myhash 1500 GT FIELDS 2 field1 field2")),
            [1, 0]
        );
        c.line("DEL myhash");
        c.line("HSET myhash field1 value1 field2 value2 field3 value3");
        assert_eq!(ints(c.line("HPEXPIRE myhash 1000 NX FIELDS 1 field1")), [1]);
        assert_eq!(ints(c.line("HPEXPIRE myhash 2000 NX FIELDS 1 field2")), [1]);
        // LT: a field without a deadline takes any.
        assert_eq!(
            ints(c.line("HPEXPIRE myhash 1500 LT FIELDS 3 field1 field2 field3")),
            [0, 1, 1]
        );
        let at = (T0_S + 1500) * 1000;
        assert_eq!(
            ints(c.line("HPEXPIRETIME myhash FIELDS 3 field1 field2 field3")),
            [T0 as i64 + 1000, T0 as i64 + 1500, T0 as i64 + 1500]
        );
        // Absolute forms.
        assert_eq!(
            ints(c.line(&format!("HPEXPIREAT myhash {at} GT FIELDS 1 field1"))),
            [1]
        );
        assert_eq!(
            ints(c.line(&format!("HEXPIREAT myhash {} XX FIELDS 1 field1", T0_S + 5))),
            [1]
        );
        assert_eq!(ints(c.line("HTTL myhash FIELDS 1 field1")), [5]);
    }
}

#[test]
fn past_deadlines_delete_fields_and_the_key() {
    for (mut c, _) in both() {
        c.line("HSET myhash f1 v1 f2 v2 f4 v4");
        c.line("HEXPIRE myhash 1000 NX FIELDS 1 f4");
        let past = (T0_S - 1) * 1000;
        assert_eq!(
            ints(c.line(&format!("HPEXPIREAT myhash {past} NX FIELDS 4 f1 f2 f3 f4"))),
            [2, 2, -2, 0]
        );
        assert_eq!(c.line("HEXISTS myhash f1"), Reply::Int(0));
        assert_eq!(c.line("HLEN myhash"), Reply::Int(1));
        // A deadline equal to now is in the past too (Redis `checkAlreadyExpired`).
        assert_eq!(
            ints(c.line(&format!("HPEXPIREAT myhash {T0} FIELDS 1 f4"))),
            [2]
        );
        assert_eq!(c.line("EXISTS myhash"), Reply::Int(0));
        c.line("HSET myhash field1 value1");
        assert_eq!(
            ints(c.line(&format!("HEXPIREAT myhash {} NX FIELDS 1 field1", T0_S - 1))),
            [2]
        );
        assert_eq!(c.line("EXISTS myhash"), Reply::Int(0));
    }
}

#[test]
fn lazy_expiry_on_access_and_hlen_counts_expired() {
    for (mut c, _) in both() {
        c.line("CONFIG RESETSTAT");
        c.line("HSET myhash f1 v1 f2 v2 f3 v3");
        c.line("HPEXPIRE myhash 1 NX FIELDS 3 f1 f2 f3");
        advance(&c, 5);
        assert_eq!(c.line("EXISTS myhash"), Reply::Int(1));
        assert_eq!(c.line("HLEN myhash"), Reply::Int(3));
        assert_eq!(c.line("HEXISTS myhash f1"), Reply::Int(0));
        assert_eq!(c.line("HLEN myhash"), Reply::Int(2));
        assert_eq!(c.line("HGET myhash f2"), Reply::Nil);
        assert_eq!(c.line("HLEN myhash"), Reply::Int(1));
        assert_eq!(c.line("HSTRLEN myhash f3"), Reply::Int(0));
        assert_eq!(c.line("HLEN myhash"), Reply::Int(0));
        assert_eq!(c.line("EXISTS myhash"), Reply::Int(0));
        assert_eq!(
            c.srv
                .ks
                .stats
                .expired_subkeys
                .load(std::sync::atomic::Ordering::Relaxed),
            3
        );
    }
}

#[test]
fn various_commands_skip_or_remove_expired_fields() {
    for (mut c, _) in both() {
        c.line("HSET h1 01 01");
        c.line("HSET h2 01 01 02 02");
        c.line("HSET h3 01 01 02 02 03 03");
        c.line("HSET h4 1 99 2 99 3 99 4 99");
        c.line("HSET h5 1 1 2 22 3 333 4 4444 5 55555");
        c.line("HSET h6 01 01 02 02 03 03 04 04 05 05 06 06");
        c.line("HPEXPIRE h1 1 NX FIELDS 1 01");
        c.line("HPEXPIRE h2 1 NX FIELDS 2 01 02");
        c.line("HPEXPIRE h3 1 NX FIELDS 1 01");
        c.line("HPEXPIRE h4 1 NX FIELDS 1 2");
        c.line("HPEXPIRE h5 1 NX FIELDS 1 3");
        c.line("HPEXPIRE h6 1 NX FIELDS 1 05");
        advance(&c, 5);
        let sub = |c: &Client| {
            c.srv
                .ks
                .stats
                .expired_subkeys
                .load(std::sync::atomic::Ordering::Relaxed)
        };
        // HDEL does not look at deadlines.
        assert_eq!(c.line("HDEL h1 01"), Reply::Int(1));
        assert_eq!(c.line("HGET h2 01"), Reply::Nil);
        assert_eq!(sub(&c), 1);
        assert_eq!(c.line("HGET h3 01"), Reply::Nil);
        assert_eq!(c.line("HGET h3 02"), Reply::bulk_static("02"));
        assert_eq!(c.line("HINCRBY h4 2 1"), Reply::Int(1));
        assert_eq!(c.line("HINCRBY h4 3 1"), Reply::Int(100));
        assert_eq!(c.line("HSTRLEN h5 3"), Reply::Int(0));
        assert_eq!(c.line("HSTRLEN h5 4"), Reply::Int(4));
        assert_eq!(sub(&c), 4);
        assert_eq!(sorted(&mut c, "HKEYS h6"), ["01", "02", "03", "04", "06"]);
        assert_eq!(sorted(&mut c, "HVALS h6").len(), 5);
        assert_eq!(sorted(&mut c, "HGETALL h6").len(), 10);
        let Reply::Array(scan) = c.line("HSCAN h6 0 COUNT 100") else {
            panic!("hscan");
        };
        assert_eq!(
            strs(scan[1].clone()).len(),
            10,
            "HSCAN skips the expired field"
        );
        assert_eq!(sub(&c), 4, "reads of the whole hash remove nothing");
        assert_eq!(c.line("HLEN h6"), Reply::Int(6));
        // HMGET: one pass, expired ones read as nil.
        c.line("HSET m f1 v1 f2 v2 f3 v3");
        c.line("HPEXPIRE m 10000000 NX FIELDS 1 f1");
        c.line("HPEXPIRE m 1 NX FIELDS 2 f2 f3");
        c.line("HSET m2 f1 v1 f2 v2 f3 v3");
        c.line("HPEXPIRE m2 1 NX FIELDS 3 f1 f2 f3");
        advance(&c, 5);
        assert_eq!(strs(c.line("HMGET m f1 f2 f3")), ["v1", "", ""]);
        assert_eq!(strs(c.line("HMGET m2 f1 f2 f3")), ["", "", ""]);
        assert_eq!(c.line("EXISTS m2"), Reply::Int(0));
    }
}

#[test]
fn hrandfield_removes_every_expired_field_first() {
    for (mut c, _) in both() {
        c.line("HSET myhash f1 v1 f2 v2 f3 v3 f4 v4 f5 v5");
        c.line("HPEXPIRE myhash 1 FIELDS 2 f1 f2");
        advance(&c, 5);
        assert_eq!(sorted(&mut c, "HRANDFIELD myhash 5"), ["f3", "f4", "f5"]);
        assert_eq!(c.line("HLEN myhash"), Reply::Int(3));
        c.line("HPEXPIRE myhash 1 FIELDS 3 f3 f4 f5");
        advance(&c, 5);
        assert!(sorted(&mut c, "HRANDFIELD myhash 5").is_empty());
        assert_eq!(c.line("EXISTS myhash"), Reply::Int(0));
        c.line("HSET myhash f1 v1 f2 v2 f3 v3");
        c.line("HPEXPIRE myhash 1 FIELDS 1 f1");
        advance(&c, 5);
        for _ in 0..20 {
            let r = c.line("HRANDFIELD myhash");
            assert!(r == Reply::bulk_static("f2") || r == Reply::bulk_static("f3"));
        }
        c.line("HPEXPIRE myhash 1 FIELDS 2 f2 f3");
        advance(&c, 5);
        assert_eq!(c.line("HRANDFIELD myhash"), Reply::Nil);
    }
}

#[test]
fn ttl_readers_round_and_report() {
    for (mut c, enc) in both() {
        c.line("HSET myhash field1 value1 field2 value2");
        c.line("HPEXPIRE myhash 2000 NX FIELDS 1 field1");
        assert_eq!(
            ints(c.line("HTTL myhash FIELDS 3 field1 field2 nofield")),
            [2, -1, -2]
        );
        assert_eq!(ints(c.line("HPTTL myhash FIELDS 1 field1")), [2000]);
        advance(&c, 1);
        // Seconds round up, as Redis's `(t + 999 - now) / 1000`.
        assert_eq!(ints(c.line("HTTL myhash FIELDS 1 field1")), [2]);
        assert_eq!(ints(c.line("HPTTL myhash FIELDS 1 field1")), [1999]);
        assert_eq!(
            ints(c.line("HEXPIRETIME myhash FIELDS 1 field1")),
            [T0_S as i64 + 2]
        );
        assert_eq!(
            ints(c.line("HPEXPIRETIME myhash FIELDS 2 field1 field2")),
            [T0 as i64 + 2000, -1]
        );
        advance(&c, 1999);
        // At the deadline: a listpackex reads the field as gone, a hashtable not yet.
        let at = if enc == "listpack" { -2 } else { 0 };
        assert_eq!(ints(c.line("HPTTL myhash FIELDS 1 field1")), [at]);
        advance(&c, 1);
        assert_eq!(ints(c.line("HPTTL myhash FIELDS 1 field1")), [-2]);
        assert_eq!(ints(c.line("HTTL myhash FIELDS 1 field1")), [-2]);
        // The readers remove nothing.
        assert_eq!(c.line("HLEN myhash"), Reply::Int(2));
    }
}

#[test]
fn hpersist_clears_deadlines() {
    for (mut c, _) in both() {
        c.line("HSET myhash f1 v1 f2 v2");
        c.line("HEXPIRE myhash 1000 NX FIELDS 1 f1");
        assert_eq!(
            ints(c.line("HPERSIST myhash FIELDS 2 f1 not-exists-field")),
            [1, -2]
        );
        assert_eq!(ints(c.line("HPERSIST myhash FIELDS 1 f2")), [-1]);
        assert_eq!(ints(c.line("HTTL myhash FIELDS 2 f1 f2")), [-1, -1]);
        c.line("HEXPIRE myhash 20 NX FIELDS 2 f1 f2");
        assert_eq!(ints(c.line("HPERSIST myhash FIELDS 2 f1 f2")), [1, 1]);
        advance(&c, 25_000);
        sweep(&c);
        assert_eq!(c.line("HGET myhash f1"), Reply::bulk_static("v1"));
        // An expired field reads as missing.
        c.line("HPEXPIRE myhash 1 FIELDS 1 f2");
        advance(&c, 2);
        assert_eq!(ints(c.line("HPERSIST myhash FIELDS 1 f2")), [-2]);
        // A plain hash: -1 / -2 without becoming a listpackex.
        c.line("HSET plain a 1");
        assert_eq!(ints(c.line("HPERSIST plain FIELDS 2 a b")), [-1, -2]);
        assert_eq!(ints(c.line("HTTL plain FIELDS 2 a b")), [-1, -2]);
    }
}

#[test]
fn hset_clears_a_deadline_hincrby_keeps_it() {
    for (mut c, _) in both() {
        c.line("HSET myhash field1 value1 field2 value2 field3 value3");
        c.line("HPEXPIRE myhash 10000 NX FIELDS 1 field1");
        c.line("HPEXPIRE myhash 1 NX FIELDS 1 field2");
        c.line("HSET myhash field2 value4");
        advance(&c, 5);
        assert_eq!(c.line("HGET myhash field2"), Reply::bulk_static("value4"));
        assert_eq!(ints(c.line("HTTL myhash FIELDS 2 field2 field3")), [-1, -1]);
        assert_ne!(ints(c.line("HTTL myhash FIELDS 1 field1")), [-1]);
        // HSET's reply counts a present field as old, deadline or not.
        c.line("DEL myhash");
        c.line("HSET myhash f1 v1 f2 v2");
        c.line("HEXPIRE myhash 100000 FIELDS 1 f1");
        assert_eq!(c.line("HSET myhash f2 v2"), Reply::Int(0));
        assert_eq!(c.line("HSET myhash f3 v3"), Reply::Int(1));
        assert_eq!(c.line("HSET myhash f3 v3 f5 v5 f6 v6"), Reply::Int(2));
        // HINCRBY and HINCRBYFLOAT keep the deadline, and restart an expired field.
        c.line("HSET h1 f1 10");
        c.line("HPEXPIRE h1 20 FIELDS 1 f1");
        assert_eq!(c.line("HINCRBY h1 f1 2"), Reply::Int(12));
        assert_eq!(ints(c.line("HPTTL h1 FIELDS 1 f1")), [20]);
        assert_eq!(c.line("HINCRBYFLOAT h1 f1 2.5"), Reply::bulk_static("14.5"));
        assert_eq!(ints(c.line("HPTTL h1 FIELDS 1 f1")), [20]);
        advance(&c, 25);
        assert_eq!(c.line("HINCRBY h1 f1 1"), Reply::Int(1));
        assert_eq!(ints(c.line("HPTTL h1 FIELDS 1 f1")), [-1]);
        c.line("HPEXPIRE h1 10 FIELDS 1 f1");
        advance(&c, 15);
        assert_eq!(c.line("HINCRBYFLOAT h1 f1 1"), Reply::bulk_static("1"));
        // HSETNX on an expired field sets it.
        c.line("HSET n f v");
        c.line("HPEXPIRE n 1 FIELDS 1 f");
        advance(&c, 2);
        assert_eq!(c.line("HSETNX n f w"), Reply::Int(1));
        assert_eq!(c.line("HGET n f"), Reply::bulk_static("w"));
        assert_eq!(ints(c.line("HTTL n FIELDS 1 f")), [-1]);
    }
}

#[test]
fn listpackex_encoding_and_order() {
    let mut c = client();
    c.line("HSET myhash f1 v1 f2 v2 f3 v3 f4 v4 f5 v5");
    assert_eq!(c.encoding("myhash"), "listpack");
    // The conversion happens even when no field takes a deadline.
    c.line("HPEXPIRE myhash 5000 FIELDS 1 nosuch");
    assert_eq!(c.encoding("myhash"), "listpackex");
    // Fields with deadlines first, earliest first; a cleared one goes last.
    c.line("HPEXPIRE myhash 5000 FIELDS 1 f4");
    c.line("HPEXPIRE myhash 3000 FIELDS 1 f2");
    let keys = |c: &mut Client| -> Vec<String> { strs(c.line("HKEYS myhash")) };
    assert_eq!(keys(&mut c), ["f2", "f4", "f1", "f3", "f5"]);
    c.line("HPERSIST myhash FIELDS 1 f2");
    assert_eq!(keys(&mut c), ["f4", "f1", "f3", "f5", "f2"]);
    c.line("HSET myhash f4 new");
    assert_eq!(keys(&mut c), ["f1", "f3", "f5", "f2", "f4"]);
    assert_eq!(c.encoding("myhash"), "listpackex");
    // Past the entry limit it becomes a hashtable, deadlines kept.
    c.line("CONFIG SET hash-max-listpack-entries 6");
    c.line("HPEXPIRE myhash 5000 FIELDS 1 f1");
    c.line("HSET myhash f6 v6 f7 v7");
    assert_eq!(c.encoding("myhash"), "hashtable");
    assert_eq!(ints(c.line("HPTTL myhash FIELDS 2 f1 f6")), [5000, -1]);
    advance(&c, 6000);
    assert_eq!(sorted(&mut c, "HKEYS myhash").len(), 6);
}

#[test]
fn rename_copy_move_keep_deadlines() {
    let mut c = client();
    c.line("HSET myhash field1 value1");
    c.line("HPEXPIRE myhash 20 NX FIELDS 1 field1");
    c.line("RENAME myhash myhash2");
    assert_eq!(c.line("EXISTS myhash"), Reply::Int(0));
    assert_eq!(ints(c.line("HPTTL myhash2 FIELDS 1 field1")), [20]);
    c.line("HSET h1 f1 v1 f2 v2");
    c.line("HPEXPIRE h1 100 NX FIELDS 1 f1");
    c.line("COPY h1 h1copy");
    assert_eq!(ints(c.line("HPTTL h1copy FIELDS 2 f1 f2")), [100, -1]);
    c.line("HSET mv f1 v1");
    c.line("HPEXPIRE mv 100 FIELDS 1 f1");
    assert_eq!(c.line("MOVE mv 9"), Reply::Int(1));
    c.line("SELECT 9");
    assert_eq!(ints(c.line("HPTTL mv FIELDS 1 f1")), [100]);
    c.line("SELECT 0");
    advance(&c, 105);
    // Only the active cycle removes what nobody reads: the renamed key, the copy's sibling
    // and the moved key all go with their last field.
    assert_eq!(c.line("EXISTS myhash2"), Reply::Int(1));
    sweep(&c);
    assert_eq!(c.line("EXISTS myhash2"), Reply::Int(0));
    assert_eq!(sorted(&mut c, "HGETALL h1"), ["f2", "v2"]);
    assert_eq!(sorted(&mut c, "HGETALL h1copy"), ["f2", "v2"]);
    c.line("SELECT 9");
    assert_eq!(c.line("EXISTS mv"), Reply::Int(0));
}

#[test]
fn wrong_type() {
    let mut c = client();
    c.line("SET wrongtype somevalue");
    for l in [
        "HEXPIRE wrongtype 10 FIELDS 1 f1",
        "HEXPIREAT wrongtype 10 FIELDS 1 f1",
        "HPEXPIRE wrongtype 10 FIELDS 1 f1",
        "HPEXPIREAT wrongtype 10 FIELDS 1 f1",
        "HEXPIRETIME wrongtype FIELDS 1 f1",
        "HPEXPIRETIME wrongtype FIELDS 1 f1",
        "HTTL wrongtype FIELDS 1 f1",
        "HPTTL wrongtype FIELDS 1 f1",
        "HPERSIST wrongtype FIELDS 1 f1",
        "HGETEX wrongtype FIELDS 1 f1",
        "HSETEX wrongtype FIELDS 1 f1 v1",
        "HGETDEL wrongtype FIELDS 1 f1",
        // The type is checked before the arguments, as Redis does.
        "HEXPIRE wrongtype -1 FIELDS 1 f1",
    ] {
        assert!(err(c.line(l)).starts_with("WRONGTYPE"), "{l}");
    }
}

// ---- HGETEX ----

#[test]
fn hgetex_validation() {
    let mut c = client();
    let e = |c: &mut Client, l: &str| err(c.line(l));
    assert!(e(&mut c, "HGETEX h1").contains("wrong number of arguments"));
    assert!(e(&mut c, "HGETEX h1 FIELDS").contains("wrong number of arguments"));
    assert!(e(&mut c, "HGETEX h1 FIELDS 1").contains("wrong number of arguments"));
    for l in [
        "HGETEX h1 XFIELDX 1 a",
        "HGETEX h1 PXAT 1 1",
        "HGETEX h1 PERSIST 1 FIELDS 1 a",
    ] {
        assert_eq!(
            e(&mut c, l),
            "ERR Mandatory argument FIELDS is missing or not at the right position"
        );
    }
    assert_eq!(
        e(&mut c, "HGETEX h1 FIELDS 2 a"),
        "ERR The `numfields` parameter must match the number of arguments"
    );
    for n in ["0", "-1", "9223372036854775808"] {
        assert_eq!(
            e(&mut c, &format!("HGETEX h1 FIELDS {n} a")),
            "ERR Number of fields must be a positive integer"
        );
    }
    for l in [
        "HGETEX h1 EX bla FIELDS 1 a",
        "HGETEX h1 EX 9223372036854775808 FIELDS 1 a",
        "HGETEX h1 EXAT 9223372036854775808 FIELDS 1 a",
    ] {
        assert_eq!(e(&mut c, l), "ERR value is not an integer or out of range");
    }
    for l in [
        "HGETEX h1 PX -1 FIELDS 1 a",
        "HGETEX h1 PXAT -1 FIELDS 1 a",
        "HGETEX h1 EX -1 FIELDS 1 a",
    ] {
        assert_eq!(e(&mut c, l), "ERR invalid expire time, must be >= 0");
    }
    for l in [
        format!("HGETEX h1 EX {} FIELDS 1 a", 1u64 << 48),
        format!(
            "HGETEX h1 EX {} FIELDS 1 a",
            (1u64 << 46) / 1000 - T0_S + 100
        ),
        format!("HGETEX h1 EXAT {} FIELDS 1 a", (1u64 << 46) + 100),
        format!("HGETEX h1 PX {} FIELDS 1 a", (1u64 << 46) - T0 + 100),
        format!("HGETEX h1 PXAT {} FIELDS 1 a", (1u64 << 46) + 100),
    ] {
        assert_eq!(e(&mut c, &l), "ERR invalid expire time in 'hgetex' command");
    }
}

#[test]
fn hgetex_reads_and_sets_deadlines() {
    for (mut c, _) in both() {
        c.line("HSET h1 a 1 b 2 c strval");
        assert_eq!(
            strs(c.line("HGETEX h1 FIELDS 3 a b c")),
            ["1", "2", "strval"]
        );
        assert_eq!(ints(c.line("HTTL h1 FIELDS 3 a b c")), [-1, -1, -1]);
        assert_eq!(
            strs(c.line("HGETEX h1 EX 10000 FIELDS 2 a nosuch")),
            ["1", ""]
        );
        assert_eq!(ints(c.line("HTTL h1 FIELDS 1 a")), [10000]);
        assert_eq!(strs(c.line("HGETEX h1 PX 5000 FIELDS 1 b")), ["2"]);
        assert_eq!(ints(c.line("HPTTL h1 FIELDS 1 b")), [5000]);
        let exat = T0_S + 10;
        assert_eq!(
            strs(c.line(&format!("HGETEX h1 EXAT {exat} FIELDS 1 c"))),
            ["strval"]
        );
        assert_eq!(ints(c.line("HEXPIRETIME h1 FIELDS 1 c")), [exat as i64]);
        let pxat = T0 + 7000;
        c.line(&format!("HGETEX h1 PXAT {pxat} FIELDS 1 c"));
        assert_eq!(ints(c.line("HPEXPIRETIME h1 FIELDS 1 c")), [pxat as i64]);
        // PERSIST, then again as a no-op.
        assert_eq!(strs(c.line("HGETEX h1 PERSIST FIELDS 2 a b")), ["1", "2"]);
        assert_eq!(ints(c.line("HTTL h1 FIELDS 2 a b")), [-1, -1]);
        assert_eq!(strs(c.line("HGETEX h1 PERSIST FIELDS 2 a b")), ["1", "2"]);
        // HSET discards a deadline HGETEX set.
        c.line("HSET h1 c v22");
        assert_eq!(ints(c.line("HTTL h1 FIELDS 1 c")), [-1]);
        // A deadline in the past deletes the fields, and the key with the last.
        assert_eq!(
            strs(c.line("HGETEX h1 PXAT 1 FIELDS 3 a b c")),
            ["1", "2", "v22"]
        );
        assert_eq!(c.line("EXISTS h1"), Reply::Int(0));
        // Lazy expiry: expired fields read as nil and the emptied key goes.
        c.line("HSETEX h2 PX 1 FIELDS 2 f1 v1 f2 v2");
        advance(&c, 5);
        assert_eq!(strs(c.line("HGETEX h2 FIELDS 2 f1 f2")), ["", ""]);
        assert_eq!(c.line("EXISTS h2"), Reply::Int(0));
        // Active expiry of deadlines HGETEX set.
        c.line("HSET h3 f1 v1 f2 v2");
        c.line("HGETEX h3 PX 10 FIELDS 2 f1 f2");
        advance(&c, 11);
        sweep(&c);
        assert_eq!(c.line("EXISTS h3"), Reply::Int(0));
    }
}

// ---- HSETEX ----

#[test]
fn hsetex_validation() {
    let mut c = client();
    let e = |c: &mut Client, l: &str| err(c.line(l));
    for l in [
        "HSETEX myhash",
        "HSETEX myhash fields",
        "HSETEX myhash fields 1",
        "HSETEX myhash fields 2 a b",
        "HSETEX myhash fields 2 a b c",
        "HSETEX myhash fields 2 a b c d e",
        "HSETEX myhash fields 3 a b c d",
        "HSETEX myhash fields 3 a b c d e",
        "HSETEX myhash fields 3 a b c d e f g",
        "HSETEX myhash fields 3 a b",
        "HSETEX myhash fields 1 a b unknown",
    ] {
        assert_eq!(
            e(&mut c, l),
            "ERR wrong number of arguments for 'hsetex' command",
            "{l}"
        );
    }
    assert_eq!(
        e(&mut c, "HSETEX myhash nx fields 1 a b"),
        "ERR unknown argument: nx"
    );
    assert_eq!(
        e(&mut c, "HSETEX myhash 1 fields 1 a b"),
        "ERR unknown argument: 1"
    );
    for l in [
        "fxx fxx",
        "fxx fnx",
        "fnx fxx",
        "fnx fnx",
        "fxx fnx fxx",
        "fnx fxx fnx",
    ] {
        assert_eq!(
            e(&mut c, &format!("HSETEX myhash {l} EX 100 fields 1 a b")),
            "ERR Only one of FXX or FNX arguments can be specified"
        );
    }
    for l in [
        "EX 100 PX 1000",
        "EX 100 EXAT 100",
        "EXAT 100 EX 1000",
        "EXAT 100 PX 1000",
        "PX 100 EXAT 100",
        "PX 100 PXAT 100",
        "PXAT 100 EX 100",
        "PXAT 100 EXAT 100",
        "EX 100 KEEPTTL",
        "KEEPTTL EX 100",
        "EX 100 EX 100",
        "KEEPTTL KEEPTTL",
    ] {
        assert_eq!(
            e(&mut c, &format!("HSETEX myhash {l} fields 1 a b")),
            "ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified"
        );
    }
    for o in ["ex", "px", "exat", "pxat"] {
        assert_eq!(
            e(&mut c, &format!("HSETEX myhash {o} fields 1 a b")),
            "ERR value is not an integer or out of range"
        );
    }
    for l in [
        format!("EXAT {} 1 a b", 1u64 << 48),
        format!("PXAT {} 1 a b", 1u64 << 48),
        format!("EX {} 1 a b", (1u64 << 48) - T0_S + 1000),
        format!("PX {} 1 a b", (1u64 << 48) - T0 + 1000),
    ] {
        assert_eq!(
            e(&mut c, &format!("HSETEX myhash {l}")),
            "ERR invalid expire time in 'hsetex' command"
        );
    }
    assert_eq!(
        e(&mut c, "HSETEX myhash EXAT -1 1 a b"),
        "ERR invalid expire time, must be >= 0"
    );
    for n in ["x", "9223372036854775808", "0", "-1"] {
        assert_eq!(
            e(&mut c, &format!("HSETEX myhash fields {n} a b")),
            "ERR invalid number of fields"
        );
    }
    assert_eq!(c.line("EXISTS myhash"), Reply::Int(0));
}

#[test]
fn hsetex_sets_fields_and_deadlines() {
    for (mut c, _) in both() {
        assert_eq!(c.line("HSETEX myhash FIELDS 1 f1 v1"), Reply::Int(1));
        assert_eq!(c.line("HGET myhash f1"), Reply::bulk_static("v1"));
        assert_eq!(c.line("HSETEX myhash FIELDS 2 f1 v11 f2 v2"), Reply::Int(1));
        assert_eq!(sorted(&mut c, "HGETALL myhash"), ["f1", "f2", "v11", "v2"]);
        // FXX: every field must exist; FNX: none may.
        c.line("DEL myhash");
        assert_eq!(
            c.line("HSETEX myhash FXX FIELDS 2 f1 v1 f2 v2"),
            Reply::Int(0)
        );
        assert_eq!(c.line("EXISTS myhash"), Reply::Int(0));
        c.line("HSET myhash f1 v1");
        assert_eq!(
            c.line("HSETEX myhash FXX FIELDS 2 f1 v1 f2 v2"),
            Reply::Int(0)
        );
        assert_eq!(c.line("HSETEX myhash FXX FIELDS 1 f1 v11"), Reply::Int(1));
        assert_eq!(
            c.line("HSETEX myhash FXX EX 100 FIELDS 1 f1 v1"),
            Reply::Int(1)
        );
        assert_eq!(ints(c.line("HTTL myhash FIELDS 1 f1")), [100]);
        assert_eq!(
            c.line("HSETEX myhash PX 5000 FXX FIELDS 1 f1 v1"),
            Reply::Int(1)
        );
        assert_eq!(ints(c.line("HPTTL myhash FIELDS 1 f1")), [5000]);
        assert_eq!(
            c.line("HSETEX myhash FNX FIELDS 2 f1 v1 f2 v2"),
            Reply::Int(0)
        );
        assert_eq!(
            c.line("HSETEX myhash FNX FIELDS 2 f2 v2 f3 v3"),
            Reply::Int(1)
        );
        // KEEPTTL keeps, no option clears.
        assert_eq!(
            c.line("HSETEX myhash KEEPTTL FIELDS 1 f1 v22"),
            Reply::Int(1)
        );
        assert_eq!(ints(c.line("HPTTL myhash FIELDS 1 f1")), [5000]);
        assert_eq!(c.line("HSETEX myhash FIELDS 1 f1 v1"), Reply::Int(1));
        assert_eq!(ints(c.line("HPTTL myhash FIELDS 1 f1")), [-1]);
        let at = T0_S + 10;
        c.line(&format!("HSETEX myhash EXAT {at} FIELDS 1 f3 v3"));
        assert_eq!(ints(c.line("HEXPIRETIME myhash FIELDS 1 f3")), [at as i64]);
        c.line(&format!(
            "HSETEX myhash PXAT {} FIELDS 1 f3 v3",
            T0 + 10_000
        ));
        assert_eq!(ints(c.line("HTTL myhash FIELDS 1 f3")), [10]);
        // FXX after lazy expiry: the emptied key goes.
        c.line("DEL h");
        c.line("HSETEX h PX 10 FIELDS 1 f1 v1");
        advance(&c, 15);
        assert_eq!(c.line("HSETEX h FXX FIELDS 1 f1 v11"), Reply::Int(0));
        assert_eq!(c.line("EXISTS h"), Reply::Int(0));
        // A deadline in the past: set, then deleted (the key too), reply still 1.
        let past = T0_S - 1;
        assert_eq!(
            c.line(&format!("HSETEX h EXAT {past} FIELDS 2 f1 v1 f2 v2")),
            Reply::Int(1)
        );
        assert_eq!(c.line("EXISTS h"), Reply::Int(0));
        c.line("HSET h f1 v1 f2 v2 f3 v3");
        assert_eq!(
            c.line(&format!("HSETEX h EXAT {past} FIELDS 2 f1 v1 f2 v2")),
            Reply::Int(1)
        );
        assert_eq!(sorted(&mut c, "HGETALL h"), ["f3", "v3"]);
        // Active expiry.
        c.line("HSETEX a PX 10 FIELDS 5 f1 v1 f2 v2 f3 v3 f4 v4 f5 v5");
        advance(&c, 11);
        sweep(&c);
        assert_eq!(c.line("EXISTS a"), Reply::Int(0));
    }
}

// ---- HGETDEL ----

#[test]
fn hgetdel_gets_and_deletes() {
    for (mut c, _) in both() {
        let e = |c: &mut Client, l: &str| err(c.line(l));
        assert_eq!(
            e(&mut c, "HGETDEL h1 FIELD 1 a"),
            "ERR Mandatory argument FIELDS is missing or not at the right position"
        );
        assert_eq!(
            e(&mut c, "HGETDEL h1 FIELDS 0 a"),
            "ERR Number of fields must be a positive integer"
        );
        assert_eq!(
            e(&mut c, "HGETDEL h1 FIELDS 2 a"),
            "ERR The `numfields` parameter must match the number of arguments"
        );
        c.line("HSETEX h1 PX 5 FIELDS 1 f1 10");
        advance(&c, 15);
        assert_eq!(strs(c.line("HGETDEL h1 FIELDS 1 f1")), [""]);
        assert_eq!(c.line("EXISTS h1"), Reply::Int(0));
        c.line("HSETEX h1 FIELDS 3 f1 10 f2 20 f3 value3");
        c.line("HPEXPIRE h1 5 FIELDS 1 f2");
        advance(&c, 15);
        assert_eq!(strs(c.line("HGETDEL h1 FIELDS 2 f2 f3")), ["", "value3"]);
        assert_eq!(sorted(&mut c, "HGETALL h1"), ["10", "f1"]);
        assert_eq!(
            strs(c.line("HGETDEL h1 FIELDS 4 f1 f2 f3 f4")),
            ["10", "", "", ""]
        );
        assert_eq!(c.line("EXISTS h1"), Reply::Int(0));
    }
}

#[test]
fn command_info_and_docs() {
    let mut c = client();
    for (name, arity) in [
        ("hexpire", -6),
        ("hpexpire", -6),
        ("hexpireat", -6),
        ("hpexpireat", -6),
        ("httl", -5),
        ("hpttl", -5),
        ("hexpiretime", -5),
        ("hpexpiretime", -5),
        ("hpersist", -5),
        ("hgetex", -5),
        ("hsetex", -6),
        ("hgetdel", -5),
    ] {
        // COMMAND DOCS carries the argument tree (from command/meta.txt).
        let Reply::Map(docs) = c.line(&format!("COMMAND DOCS {name}")) else {
            panic!("COMMAND DOCS {name}");
        };
        let Reply::Map(doc) = &docs[0].1 else {
            panic!("{name} has no docs");
        };
        assert!(
            doc.iter()
                .any(|(k, _)| *k == Reply::bulk_static("arguments")),
            "{name} has arguments"
        );
        let Reply::Array(v) = c.line(&format!("COMMAND INFO {name}")) else {
            panic!("COMMAND INFO {name}");
        };
        let Reply::Array(info) = &v[0] else {
            panic!("{name} unknown");
        };
        assert_eq!(info[1], Reply::Int(arity), "{name}");
        // Key specs present (the 9th element).
        assert!(
            matches!(&info[8], Reply::Array(k) | Reply::Set(k) if k.len() == 1),
            "{name}: {:?}",
            info[8]
        );
    }
    let Reply::Array(v) = c.line("COMMAND INFO hgetex") else {
        panic!()
    };
    let Reply::Array(info) = &v[0] else { panic!() };
    let flags: Vec<Reply> = match &info[2] {
        Reply::Set(f) | Reply::Array(f) => f.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        flags,
        [Reply::Status("write".into()), Reply::Status("fast".into())]
    );
}

// ---- events and WATCH ----

/// `event key` for each keyevent message since the last call.
fn events(w: &crate::cmd::notify_tests::Watch) -> Vec<String> {
    w.events()
        .into_iter()
        .filter_map(|l| {
            let (ch, key) = l.split_once('\t')?;
            let ev = ch.strip_prefix("__keyevent@0__:")?;
            Some(format!("{ev} {key}"))
        })
        .collect()
}

#[test]
fn keyspace_events() {
    let mut w = crate::cmd::notify_tests::Watch::new("EAn");
    let now = w.c.srv.clock.now_ms();
    w.run("HSET h a 1 b 2 c 3");
    w.run("HPEXPIRE h 100 FIELDS 2 a nosuch");
    assert_eq!(events(&w), ["new h", "hset h", "hexpire h"]);
    // Nothing changed: no event.
    w.run("HPEXPIRE h 100 NX FIELDS 1 a");
    w.run("HPERSIST h FIELDS 1 b");
    assert!(events(&w).is_empty());
    w.run("HPERSIST h FIELDS 1 a");
    assert_eq!(events(&w), ["hpersist h"]);
    // A deadline in the past deletes: `hdel`, then `del` with the last field.
    w.run(&format!("HPEXPIREAT h {} FIELDS 1 a", now - 1));
    assert_eq!(events(&w), ["hdel h"]);
    w.run(&format!("HPEXPIREAT h {} FIELDS 2 b c", now - 1));
    assert_eq!(events(&w), ["hdel h", "del h"]);
    // Lazy expiry: one `hexpired` per access (HMGET: one for all), `del` with the last.
    w.run("HSET h a 1 b 2 c 3");
    w.run("HPEXPIRE h 10 FIELDS 3 a b c");
    events(&w);
    w.c.srv.clock.advance_ms(11);
    w.run("HGET h a");
    assert_eq!(events(&w), ["hexpired h"]);
    w.run("HMGET h b c");
    assert_eq!(events(&w), ["hexpired h", "del h"]);
    // Active expiry.
    w.run("HSET h a 1 b 2");
    w.run("HPEXPIRE h 10 FIELDS 1 a");
    w.run("HSET g a 1");
    w.run("HPEXPIRE g 10 FIELDS 1 a");
    events(&w);
    w.c.srv.clock.advance_ms(11);
    let now = w.c.srv.clock.now_ms();
    w.c.srv.ks.sweep(now, usize::MAX);
    let mut got = events(&w);
    got.sort();
    assert_eq!(got, ["del g", "hexpired g", "hexpired h"]);
    // HINCRBY of the expired last field: the hash goes and a new one comes.
    w.run("HPEXPIRE h 10 FIELDS 1 b");
    w.c.srv.clock.advance_ms(11);
    events(&w);
    w.run("HINCRBY h b 1");
    assert_eq!(events(&w), ["hexpired h", "del h", "new h", "hincrby h"]);
    // HGETEX, HSETEX, HGETDEL.
    w.run("HGETEX h EX 100 FIELDS 1 b");
    assert_eq!(events(&w), ["hexpire h"]);
    w.run("HGETEX h PERSIST FIELDS 1 b");
    assert_eq!(events(&w), ["hpersist h"]);
    w.run("HGETEX h FIELDS 1 b");
    assert!(events(&w).is_empty());
    w.run("HSETEX s EX 100 FIELDS 1 a 1");
    assert_eq!(events(&w), ["new s", "hset s", "hexpire s"]);
    w.run("HSETEX s FNX FIELDS 1 a 2");
    assert!(events(&w).is_empty());
    w.run("HSETEX s FIELDS 1 b 2");
    assert_eq!(events(&w), ["hset s"]);
    w.run("HGETDEL s FIELDS 2 a nosuch");
    assert_eq!(events(&w), ["hdel s"]);
    w.run("HGETDEL s FIELDS 1 b");
    assert_eq!(events(&w), ["hdel s", "del s"]);
}

#[test]
fn watch_sees_field_expiry() {
    let a_srv = client().srv;
    let mut a = Client::on(a_srv.clone());
    let mut b = Client::on(a_srv);
    let exec = |a: &mut Client, b: &mut Client, cmd: &str| {
        a.line("WATCH h");
        b.line(cmd);
        a.line("MULTI");
        a.line("PING");
        a.line("EXEC")
    };
    a.line("HSET h f v g w");
    assert_eq!(
        exec(&mut a, &mut b, "HPEXPIRE h 10 FIELDS 1 f"),
        Reply::NilArray
    );
    // No change, no touch.
    assert_ne!(
        exec(&mut a, &mut b, "HPEXPIRE h 10 NX FIELDS 1 f"),
        Reply::NilArray
    );
    assert_ne!(exec(&mut a, &mut b, "HTTL h FIELDS 1 f"), Reply::NilArray);
    advance(&a, 11);
    // A read that expires the field touches the key (Redis `signalModifiedKey`).
    assert_eq!(exec(&mut a, &mut b, "HGET h f"), Reply::NilArray);
    b.line("HPEXPIRE h 10 FIELDS 1 g");
    advance(&a, 11);
    a.line("WATCH h");
    sweep(&a);
    a.line("MULTI");
    a.line("PING");
    assert_eq!(
        a.line("EXEC"),
        Reply::NilArray,
        "the active cycle touches it too"
    );
}

#[test]
fn dump_restore_keeps_deadlines() {
    for (mut c, enc) in both() {
        c.line("HMSET myhash a 1 b 2 c 3");
        c.line("HEXPIREAT myhash 2524600800 FIELDS 1 a");
        c.line("HEXPIREAT myhash 2524600801 FIELDS 1 b");
        let Reply::Bulk(p) = c.line("DUMP myhash") else {
            panic!("dump");
        };
        c.line("DEL myhash");
        assert_eq!(c.run(&[b"RESTORE", b"myhash", b"0", &p]), Reply::OK);
        assert_eq!(
            sorted(&mut c, "HGETALL myhash"),
            ["1", "2", "3", "a", "b", "c"]
        );
        assert_eq!(
            ints(c.line("HEXPIRETIME myhash FIELDS 3 a b c")),
            [2524600800, 2524600801, -1]
        );
        let want = if enc == "listpack" {
            "listpackex"
        } else {
            "hashtable"
        };
        assert_eq!(c.encoding("myhash"), want);
        // Deadlines all cleared: still restorable, none come back.
        c.line("HPERSIST myhash FIELDS 2 a b");
        let Reply::Bulk(p) = c.line("DUMP myhash") else {
            panic!("dump");
        };
        c.line("DEL myhash");
        assert_eq!(c.run(&[b"RESTORE", b"myhash", b"0", &p]), Reply::OK);
        assert_eq!(
            ints(c.line("HEXPIRETIME myhash FIELDS 3 a b c")),
            [-1, -1, -1]
        );
        // A restored deadline is honoured by the active cycle.
        c.line("HPEXPIRE myhash 10 FIELDS 3 a b c");
        let Reply::Bulk(p) = c.line("DUMP myhash") else {
            panic!("dump");
        };
        c.line("DEL myhash");
        c.run(&[b"RESTORE", b"myhash", b"0", &p]);
        advance(&c, 11);
        sweep(&c);
        assert_eq!(c.line("EXISTS myhash"), Reply::Int(0));
    }
}

#[test]
fn sort_get_and_by_see_expired_fields_as_missing() {
    let mut c = client();
    c.line("RPUSH l 1 2");
    c.line("HSET h_1 f 10");
    c.line("HSET h_2 f 20 g 1");
    c.line("HPEXPIRE h_1 1 FIELDS 1 f");
    c.line("HPEXPIRE h_2 1 FIELDS 1 f");
    advance(&c, 5);
    // redis-server 7.4.1: both nil, h_1 deleted with its last field, h_2 left with g.
    assert_eq!(strs(c.line("SORT l GET h_*->f")), ["", ""]);
    assert_eq!(c.line("EXISTS h_1"), Reply::Int(0));
    assert_eq!(c.line("HLEN h_2"), Reply::Int(1));
}
