use super::*;

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn lim() -> Limits {
    Limits::default()
}

fn round_trip(v: &Value) -> Value {
    restore(&dump(v), &lim()).expect("restores")
}

#[test]
fn strings() {
    for s in [
        "",
        "hello",
        "12",
        "-5",
        "99999999999",
        "007",
        &"x".repeat(50),
        &"ab".repeat(300),
    ] {
        let v = Value::Str(StrVal::from_set(b(s)));
        let back = round_trip(&v);
        assert_eq!(back, v, "{s}");
        assert_eq!(back.encoding(), v.encoding());
    }
    // redis-server 7.0: SET k hello; DUMP k.
    assert_eq!(
        dump(&Value::Str(StrVal::from_set(b("hello")))),
        b"\x00\x05hello\x0a\x00cr\xdfve4 \x0a"
    );
}

#[test]
fn hashes_keep_encoding() {
    let mut h = HashValue::new();
    h.set(b"a", b"1", lim().hash);
    h.set(b"b", b"hello", lim().hash);
    let v = Value::Hash(Box::new(h));
    // redis-server 7.0: HSET h a 1 b hello; DUMP h.
    assert_eq!(
        dump(&v),
        b"\x10\x16\x16\x00\x00\x00\x04\x00\x81a\x02\x01\x01\x81b\x02\x85hello\x06\xff\x0a\x00\xe8\xc5\xfe\x99\xee\x07\x95]"
    );
    assert_eq!(round_trip(&v).encoding(), "listpack");
    let mut big = HashValue::new();
    for i in 0..600 {
        big.set(format!("f{i}").as_bytes(), b"v", lim().hash);
    }
    let v = Value::Hash(Box::new(big));
    let back = round_trip(&v);
    assert_eq!(back, v);
    assert_eq!(back.encoding(), "hashtable");
    // A listpack payload over the entries limit converts on load.
    let tight = Limits {
        hash: hash::Limits {
            max_entries: 1,
            max_value: 64,
        },
        ..lim()
    };
    let mut h = HashValue::new();
    h.set(b"a", b"1", lim().hash);
    h.set(b"b", b"2", lim().hash);
    assert_eq!(
        restore(&dump(&Value::Hash(Box::new(h))), &tight)
            .unwrap()
            .encoding(),
        "hashtable"
    );
}

#[test]
fn sets_keep_encoding() {
    let mut l = lim().set;
    let mut ints = SetValue::new_intset();
    for i in [3, 1, 2, -70000] {
        ints.add(i.to_string().as_bytes(), &mut l);
    }
    let v = Value::Set(Box::new(ints));
    assert_eq!(dump(&v)[0], t::SET_INTSET);
    assert_eq!(round_trip(&v).encoding(), "intset");
    let mut strs = SetValue::new_listpack();
    for m in ["a", "b", "7"] {
        strs.add(m.as_bytes(), &mut l);
    }
    let v = Value::Set(Box::new(strs));
    assert_eq!(dump(&v)[0], t::SET);
    let back = round_trip(&v);
    assert_eq!(back, v);
    assert_eq!(back.encoding(), "listpack");
    let mut big = SetValue::new_intset();
    for i in 0..1000 {
        big.add(format!("m{i}").as_bytes(), &mut l);
    }
    let v = Value::Set(Box::new(big));
    let back = round_trip(&v);
    assert_eq!(back, v);
    assert_eq!(back.encoding(), "hashtable");
}

#[test]
fn zsets_keep_encoding() {
    let mut z = ZSet::new(false);
    z.insert(b("a"), 1.0);
    z.insert(b("b"), 2.5);
    z.insert(b("c"), f64::INFINITY);
    z.insert(b("d"), -3.0);
    let v = Value::ZSet(Box::new(z));
    assert_eq!(dump(&v)[0], t::ZSET_LISTPACK);
    let back = round_trip(&v);
    assert_eq!(back, v);
    assert_eq!(back.encoding(), "listpack");
    let mut z = ZSet::new(true);
    for i in 0..200 {
        z.insert(Bytes::from(format!("m{i}")), f64::from(i) / 3.0);
    }
    let v = Value::ZSet(Box::new(z));
    assert_eq!(dump(&v)[0], t::ZSET_2);
    let back = round_trip(&v);
    assert_eq!(back, v);
    assert_eq!(back.encoding(), "skiplist");
}

#[test]
fn lists_keep_nodes() {
    use crate::types::list::End;
    let mut l = List::new();
    for i in 0..5000 {
        l.before_add(6, 1, || -2);
        l.push(Bytes::from(format!("e{i}")), End::Tail);
    }
    assert_eq!(l.encoding(), "quicklist");
    let v = Value::List(Box::new(l.clone()));
    let back = round_trip(&v);
    let Value::List(bl) = back.clone() else {
        panic!()
    };
    assert_eq!(back, v);
    assert_eq!(bl.node_counts(), l.node_counts());
    let mut small = List::new();
    small.push(b("x"), End::Tail);
    let back = round_trip(&Value::List(Box::new(small)));
    assert_eq!(back.encoding(), "listpack");
}

#[test]
fn empty_and_malformed_are_bad() {
    // An empty hash (listpack with no entries).
    let empty = listpack::Builder::new().finish();
    let mut w = Writer::new();
    w.string(&empty);
    let p = super::super::payload(t::HASH_LISTPACK, &w.buf);
    assert_eq!(restore(&p, &lim()), Err(RestoreError::Bad));
    assert_eq!(
        restore(&super::super::payload(99, b""), &lim()),
        Err(RestoreError::Bad)
    );
    let mut p = dump(&Value::Str(StrVal::from_set(b("hello"))));
    let n = p.len();
    p[n - 1] ^= 1;
    assert_eq!(restore(&p, &lim()), Err(RestoreError::VersionOrChecksum));
    // Duplicate hash field.
    let mut w = Writer::new();
    w.len(2);
    for s in ["f", "1", "f", "2"] {
        w.string(s.as_bytes());
    }
    assert_eq!(
        restore(&super::super::payload(t::HASH, &w.buf), &lim()),
        Err(RestoreError::Bad)
    );
}

#[test]
fn truncations_never_panic() {
    let mut z = ZSet::new(true);
    for i in 0..50 {
        z.insert(Bytes::from(format!("member-{i}")), f64::from(i));
    }
    let mut h = HashValue::new();
    for i in 0..20 {
        h.set(format!("f{i}").as_bytes(), &[b'v'; 30], lim().hash);
    }
    let values = [
        Value::ZSet(Box::new(z)),
        Value::Hash(Box::new(h)),
        Value::Str(StrVal::from_set(b(&"q".repeat(300)))),
    ];
    for v in &values {
        let p = dump(v);
        let (ty, body) = super::super::verify(&p).unwrap();
        for cut in 0..body.len() {
            let _ = restore(&super::super::payload(ty, &body[..cut]), &lim());
        }
        for i in 0..body.len() {
            for bit in [1u8, 0x80] {
                let mut m = body.to_vec();
                m[i] ^= bit;
                let _ = restore(&super::super::payload(ty, &m), &lim());
            }
        }
    }
}

/// Payloads of the pre-7.0 encodings (ziplists, the old list and zset types) still load.
#[test]
fn legacy_types_load() {
    use super::super::payload;
    let wrap = |ty: u8, blob: &[u8]| {
        let mut w = Writer::new();
        w.string(blob);
        payload(ty, &w.buf)
    };
    let l = lim();
    let v = restore(
        &wrap(t::LIST_ZIPLIST, &ziplist::build(&[b"a", b"7", b"-300"])),
        &l,
    )
    .unwrap();
    let Value::List(list) = &v else {
        panic!("{v:?}")
    };
    assert_eq!(
        list.iter().cloned().collect::<Vec<_>>(),
        vec![b("a"), b("7"), b("-300")]
    );
    assert_eq!(v.encoding(), "listpack");

    let v = restore(
        &wrap(t::HASH_ZIPLIST, &ziplist::build(&[b"f", b"1", b"g", b"x"])),
        &l,
    )
    .unwrap();
    let Value::Hash(h) = &v else { panic!() };
    assert_eq!(h.get(b"g"), Some(&b"x"[..]));
    assert_eq!(v.encoding(), "listpack");
    let odd = wrap(t::HASH_ZIPLIST, &ziplist::build(&[b"f", b"1", b"g"]));
    assert_eq!(restore(&odd, &l), Err(RestoreError::Bad));

    let v = restore(
        &wrap(
            t::ZSET_ZIPLIST,
            &ziplist::build(&[b"a", b"2", b"b", b"1.5"]),
        ),
        &l,
    )
    .unwrap();
    let Value::ZSet(z) = &v else { panic!() };
    assert_eq!((z.score(b"a"), z.score(b"b")), (Some(2.0), Some(1.5)));

    // LIST_QUICKLIST: a node count, then ziplists.
    let mut w = Writer::new();
    w.len(2);
    w.string(&ziplist::build(&[b"a", b"b"]));
    w.string(&ziplist::build(&[b"c"]));
    let v = restore(&payload(t::LIST_QUICKLIST, &w.buf), &l).unwrap();
    let Value::List(list) = &v else { panic!() };
    assert_eq!(list.len(), 3);

    // LIST (linked list of strings) and ZSET (text scores).
    let mut w = Writer::new();
    w.len(2);
    w.string(b"x");
    w.string(b"12");
    let v = restore(&payload(t::LIST, &w.buf), &l).unwrap();
    assert_eq!(v.encoding(), "listpack");
    let mut w = Writer::new();
    w.len(3);
    for (m, sc) in [
        (&b"a"[..], &b"\x031.5"[..]),
        (b"b", b"\xfe"),
        (b"c", b"\x02-2"),
    ] {
        w.string(m);
        w.raw(sc);
    }
    let v = restore(&payload(t::ZSET, &w.buf), &l).unwrap();
    let Value::ZSet(z) = &v else { panic!() };
    assert_eq!(z.score(b"b"), Some(f64::INFINITY));
    assert_eq!(z.score(b"c"), Some(-2.0));
    assert_eq!(v.encoding(), "listpack");

    // HASH_ZIPMAP (Redis 2.4); a value over hash-max-listpack-value converts.
    let v = restore(&wrap(t::HASH_ZIPMAP, b"\x01\x01f\x02\x00vv\xff"), &l).unwrap();
    assert_eq!(v.encoding(), "listpack");
    let long = [&b"\x01\x01f\x50\x00"[..], &[b'v'; 80], b"\xff"].concat();
    assert_eq!(
        restore(&wrap(t::HASH_ZIPMAP, &long), &l)
            .unwrap()
            .encoding(),
        "hashtable"
    );
    let dup = b"\x02\x01f\x01\x00a\x01f\x01\x00b\xff";
    assert_eq!(
        restore(&wrap(t::HASH_ZIPMAP, dup), &l),
        Err(RestoreError::Bad)
    );

    // SET_LISTPACK (Redis 7.2).
    let mut lp = listpack::Builder::new();
    lp.push_bytes(b"a");
    lp.push_bytes(b"5");
    let v = restore(&wrap(t::SET_LISTPACK, &lp.finish()), &l).unwrap();
    let Value::Set(s) = &v else { panic!() };
    assert!(s.contains(b"a") && s.contains(b"5"));
    assert_eq!(v.encoding(), "listpack");
}

/// A hash with fields `f0..n` and deadlines on every third one.
fn hash_with_deadlines(n: usize, table: bool) -> HashValue {
    let mut h = HashValue::new();
    let l = if table {
        hash::Limits {
            max_entries: 0,
            max_value: 64,
        }
    } else {
        lim().hash
    };
    for i in 0..n {
        h.set(format!("f{i}").as_bytes(), format!("v{i}").as_bytes(), l);
    }
    h.enable_ttls();
    for i in (0..n).step_by(3) {
        h.set_ttl(
            format!("f{i}").as_bytes(),
            Some(1_700_000_000_000 + 1000 * i as u64),
        );
    }
    h
}

#[test]
fn hashes_with_field_deadlines() {
    for table in [false, true] {
        let h = hash_with_deadlines(10, table);
        let v = Value::Hash(Box::new(h.clone()));
        let p = dump(&v);
        // Redis 7.4's types and RDB version.
        let want = if table {
            t::HASH_METADATA
        } else {
            t::HASH_LISTPACK_EX
        };
        assert_eq!(p[0], want);
        let n = p.len();
        assert_eq!(u16::from_le_bytes([p[n - 10], p[n - 9]]), 12);
        let Value::Hash(back) = restore(&p, &lim()).expect("restores") else {
            panic!("not a hash");
        };
        assert_eq!(*back, h, "fields, values and deadlines");
        // Few enough fields for a listpackex whichever form they were dumped in, as Redis
        // loads a metadata hash.
        assert_eq!(back.encoding(), "listpackex");
        assert_eq!(back.ttl(b"f3"), Some(1_700_000_003_000));
        assert_eq!(back.ttl(b"f1"), None);
        // The listpackex keeps Redis's order: fields with deadlines first, earliest first.
        if !table {
            let order: Vec<Vec<u8>> = back.iter().map(|(f, _)| f.to_vec()).collect();
            assert_eq!(
                &order[..4],
                [
                    b"f0".to_vec(),
                    b"f3".to_vec(),
                    b"f6".to_vec(),
                    b"f9".to_vec()
                ]
            );
        }
    }
    // A listpackex whose deadlines all went stays one (Redis saves it as type 25).
    let mut h = hash_with_deadlines(2, false);
    h.set_ttl(b"f0", None);
    let p = dump(&Value::Hash(Box::new(h)));
    assert_eq!(p[0], t::HASH_LISTPACK_EX);
    let Value::Hash(back) = restore(&p, &lim()).expect("restores") else {
        panic!();
    };
    assert_eq!(back.encoding(), "listpackex");
    assert!(!back.has_ttls());
    // A hashtable without deadlines is a plain hash (type 4, version 10).
    let mut h = hash_with_deadlines(4, true);
    for i in 0..4 {
        h.set_ttl(format!("f{i}").as_bytes(), None);
    }
    let p = dump(&Value::Hash(Box::new(h)));
    assert_eq!(p[0], t::HASH);
    // Many fields: a metadata hash past the entry limit loads as a hashtable.
    let h = hash_with_deadlines(600, true);
    let Value::Hash(back) = round_trip(&Value::Hash(Box::new(h.clone()))) else {
        panic!();
    };
    assert_eq!(*back, h);
    assert_eq!(back.encoding(), "hashtable");
}

#[test]
fn hostile_field_deadline_payloads() {
    // Deadline past 2^48 - 1, relative to the minimum.
    let mut w = Writer::new();
    w.millis(FIELD_DEADLINE_MAX);
    w.len(1);
    w.len(2);
    w.string(b"f");
    w.string(b"v");
    let p = super::super::payload(t::HASH_METADATA, &w.buf);
    assert_eq!(restore(&p, &lim()), Err(RestoreError::Bad));
    // Duplicate fields; an empty hash; a length that overflows.
    for (ttl_a, ttl_b, dup) in [(0, 0, true), (1, 0, true)] {
        let mut w = Writer::new();
        w.millis(5);
        w.len(2);
        for t in [ttl_a, ttl_b] {
            w.len(t);
            w.string(if dup { b"f" } else { b"g" });
            w.string(b"v");
        }
        let p = super::super::payload(t::HASH_METADATA, &w.buf);
        assert_eq!(restore(&p, &lim()), Err(RestoreError::Bad));
    }
    let mut w = Writer::new();
    w.millis(5);
    w.len(0);
    let p = super::super::payload(t::HASH_METADATA, &w.buf);
    assert_eq!(restore(&p, &lim()), Err(RestoreError::Bad));
    let mut w = Writer::new();
    w.millis(5);
    w.len(1);
    w.len(u64::MAX);
    w.string(b"f");
    w.string(b"v");
    let p = super::super::payload(t::HASH_METADATA, &w.buf);
    assert_eq!(restore(&p, &lim()), Err(RestoreError::Bad));
    // A listpackex whose deadline is a string, negative, or missing.
    for third in [&b"x"[..], b"-1"] {
        let mut b = listpack::Builder::new();
        b.push_bytes(b"f");
        b.push_bytes(b"v");
        b.push_bytes(third);
        let mut w = Writer::new();
        w.millis(0);
        w.string(&b.finish());
        let p = super::super::payload(t::HASH_LISTPACK_EX, &w.buf);
        assert_eq!(restore(&p, &lim()), Err(RestoreError::Bad), "{third:?}");
    }
    let mut b = listpack::Builder::new();
    b.push_bytes(b"f");
    b.push_bytes(b"v");
    let mut w = Writer::new();
    w.millis(0);
    w.string(&b.finish());
    let p = super::super::payload(t::HASH_LISTPACK_EX, &w.buf);
    assert_eq!(restore(&p, &lim()), Err(RestoreError::Bad));
    // The release candidates' listpackex: no leading minimum, same triples.
    let mut b = listpack::Builder::new();
    b.push_bytes(b"f");
    b.push_bytes(b"v");
    b.push_int(1_700_000_000_000);
    let mut w = Writer::new();
    w.string(&b.finish());
    let p = super::super::payload(t::HASH_LISTPACK_EX_PRE_GA, &w.buf);
    let Ok(Value::Hash(h)) = restore(&p, &lim()) else {
        panic!("pre-GA listpackex");
    };
    assert_eq!(h.ttl(b"f"), Some(1_700_000_000_000));
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Payloads DUMPed by redis-server 7.4.1: `HSET d a 1 b hello c 3`, then `HPEXPIREAT d
/// 2524600800123 FIELDS 1 b` and `HPEXPIREAT d 2524600900000 FIELDS 1 c`, as a listpackex
/// (`LP`) and, with `hash-max-listpack-entries 0`, as a hashtable (`HT`, dict order c b a).
const REDIS_74_LP: &str = "197b13efcd4b020000313100000009008162028568656c6c6f06f47b13efcd4b0200\
    00098163020301f4a099f0cd4b0200000981610201010001ff0c00e807903c987809ef";
const REDIS_74_HT: &str =
    "187b13efcd4b0200000380000186260163c0030101620568656c6c6f000161c0010c00e25c6dfcc671532f";

#[test]
fn restores_redis_74_payloads_and_dumps_its_listpackex_bytes() {
    for (hex, enc) in [(REDIS_74_LP, "listpackex"), (REDIS_74_HT, "listpackex")] {
        let Value::Hash(h) = restore(&unhex(hex), &lim()).expect("restores") else {
            panic!("not a hash");
        };
        // Three fields are few enough for a listpackex whichever form they came in.
        assert_eq!(h.encoding(), enc);
        assert_eq!(h.get(b"a"), Some(&b"1"[..]));
        assert_eq!(h.get(b"b"), Some(&b"hello"[..]));
        assert_eq!(h.get(b"c"), Some(&b"3"[..]));
        assert_eq!(
            [h.ttl(b"a"), h.ttl(b"b"), h.ttl(b"c")],
            [None, Some(2524600800123), Some(2524600900000)]
        );
    }
    // The same hash made our way dumps to Redis's bytes.
    let mut h = HashValue::new();
    for (f, v) in [("a", "1"), ("b", "hello"), ("c", "3")] {
        h.set(f.as_bytes(), v.as_bytes(), lim().hash);
    }
    h.enable_ttls();
    h.set_ttl(b"b", Some(2524600800123));
    h.set_ttl(b"c", Some(2524600900000));
    assert_eq!(dump(&Value::Hash(Box::new(h))), unhex(REDIS_74_LP));
    // redis-server 7.4.1: `HSET e a 1 b 2 c 3`, `HPEXPIREAT e 2524600800000 FIELDS 2 a b`
    // (equal deadlines: b went before a). RESTORE keeps that order, so DUMP gives it back.
    let tie = unhex(
        "190013efcd4b020000c3252c112c00000009008162020201f40013efcd4b02200f0381610201e0030e\
         06630203010001ff0c003247ed7c79b96b6d",
    );
    let v = restore(&tie, &lim()).expect("restores");
    assert_eq!(dump(&v), tie);
}
