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
