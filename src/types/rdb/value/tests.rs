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
    let v = Value::Hash(h);
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
    let v = Value::Hash(big);
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
        restore(&dump(&Value::Hash(h)), &tight).unwrap().encoding(),
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
    let v = Value::Set(ints);
    assert_eq!(dump(&v)[0], t::SET_INTSET);
    assert_eq!(round_trip(&v).encoding(), "intset");
    let mut strs = SetValue::new_listpack();
    for m in ["a", "b", "7"] {
        strs.add(m.as_bytes(), &mut l);
    }
    let v = Value::Set(strs);
    assert_eq!(dump(&v)[0], t::SET);
    let back = round_trip(&v);
    assert_eq!(back, v);
    assert_eq!(back.encoding(), "listpack");
    let mut big = SetValue::new_intset();
    for i in 0..1000 {
        big.add(format!("m{i}").as_bytes(), &mut l);
    }
    let v = Value::Set(big);
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
    let v = Value::List(l.clone());
    let back = round_trip(&v);
    let Value::List(bl) = back.clone() else {
        panic!()
    };
    assert_eq!(back, v);
    assert_eq!(bl.node_counts(), l.node_counts());
    let mut small = List::new();
    small.push(b("x"), End::Tail);
    let back = round_trip(&Value::List(small));
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
        Value::Hash(h),
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
