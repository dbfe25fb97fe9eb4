use super::*;
use crate::types::stream::{NewId, NodeLimits, ParsedId, Trim, TrimBy};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn fields(pairs: &[&str]) -> Vec<Bytes> {
    pairs.iter().map(|s| b(s)).collect()
}

fn add(s: &mut Stream, ms: u64, seq: u64, pairs: &[&str], limits: NodeLimits) {
    let p = ParsedId {
        id: StreamId::new(ms, seq),
        seq_given: true,
    };
    s.append(NewId::Explicit(p), &fields(pairs), 0, limits)
        .expect("append");
}

fn small() -> NodeLimits {
    NodeLimits {
        max_bytes: 4096,
        max_entries: 4,
    }
}

/// A stream over several nodes: same-field and different-field entries, integer and
/// long values (LZF), sequence numbers above the master's.
fn sample() -> Stream {
    let mut s = Stream::new();
    let long = "x".repeat(300);
    for i in 1..=11u64 {
        let v = i.to_string();
        match i % 3 {
            0 => add(&mut s, 1000 + i, i, &["name", "ann", "age", &v], small()),
            1 => add(&mut s, 1000 + i, 0, &["name", &long, "age", "-7"], small()),
            _ => add(&mut s, 1000 + i, 5, &["other", &v], small()),
        }
    }
    s
}

fn with_groups(mut s: Stream) -> Stream {
    let mut g = Group::new(StreamId::new(1005, 5), 5);
    g.create_consumer(b"alice", 111);
    g.create_consumer(b"", 222);
    g.create_consumer(b"idle", 333);
    g.deliver(StreamId::new(1002, 5), &b("alice"), 400);
    g.deliver(StreamId::new(1003, 3), &b(""), 500);
    // A pending entry deleted from the stream since.
    g.deliver(StreamId::new(999, 0), &b("alice"), 600);
    g.pel
        .get_mut(&StreamId::new(1002, 5))
        .unwrap()
        .delivery_count = 7;
    s.groups.insert(b("g1"), g);
    s.groups.insert(b("empty"), Group::new(StreamId::MIN, -1));
    // Type 19 does not carry active times; Redis then takes the seen time.
    for g in s.groups.values_mut() {
        for c in g.consumers.values_mut() {
            c.active_time = c.seen_time;
        }
    }
    s
}

fn dump(s: &Stream, ty: u8) -> Vec<u8> {
    let mut w = Writer { buf: Vec::new() };
    save_as(s, &mut w, ty);
    w.buf
}

fn undump(bytes: &[u8], ty: u8) -> Result<Stream, Bad> {
    let mut r = Reader::new(bytes);
    let s = load(&mut r, ty)?;
    assert!(r.is_empty(), "trailing bytes");
    Ok(s)
}

/// Everything a client can observe (not the node layout).
fn content(s: &Stream) -> impl PartialEq + std::fmt::Debug {
    let entries: Vec<_> = s
        .range(StreamId::MIN, StreamId::MAX, false)
        .map(|(id, f)| (*id, f.to_vec()))
        .collect();
    (
        entries,
        s.last_id,
        s.first_id,
        s.max_deleted,
        s.entries_added,
        s.groups.clone(),
    )
}

#[test]
fn round_trip_keeps_everything() {
    let s = with_groups(sample());
    assert!(s.node_count() >= 3);
    let bytes = dump(&s, STREAM_LISTPACKS_2);
    let back = undump(&bytes, STREAM_LISTPACKS_2).unwrap();
    // Node layout and byte accounting included.
    assert_eq!(back, s);
    assert_eq!(dump(&back, STREAM_LISTPACKS_2), bytes);
}

#[test]
fn round_trip_empty_and_default_limits() {
    let mut s = Stream::new();
    s.groups.insert(b("g"), Group::new(StreamId::MIN, 0));
    assert_eq!(undump(&dump(&s, 19), 19).unwrap(), s);
    let mut s = Stream::new();
    for i in 0..350u64 {
        add(&mut s, i + 1, 0, &["f", "v"], NodeLimits::default());
    }
    assert_eq!(s.node_count(), 4);
    assert_eq!(undump(&dump(&s, 19), 19).unwrap(), s);
}

#[test]
fn round_trip_after_deletes_and_trims() {
    let mut s = with_groups(sample());
    // A node's master entry, a middle entry and a node's only... entries go.
    assert_eq!(
        s.delete(&[StreamId::new(1001, 0), StreamId::new(1006, 6)]),
        2
    );
    s.trim(Trim {
        strategy: TrimBy::MaxLen(8),
        approx: false,
        limit: 0,
    });
    assert_eq!(s.len(), 8);
    assert!(!s.max_deleted.is_zero());
    let back = undump(&dump(&s, 19), 19).unwrap();
    assert_eq!(content(&back), content(&s));
    assert_eq!(back.node_count(), s.node_count());
    // Saving what was loaded gives the same bytes (the tombstones are gone for good).
    let again = dump(&back, 19);
    assert_eq!(again, dump(&s, 19));
}

#[test]
fn all_live_entries_deleted_from_a_node() {
    let mut s = Stream::new();
    for i in 1..=6u64 {
        add(&mut s, i, 0, &["a", "1"], small());
    }
    s.delete(&[StreamId::new(6, 0)]);
    // MINID stops inside the second node whose last (deleted) ID is above the minimum:
    // its live entries are all flagged, the node stays, as in Redis.
    s.trim(Trim {
        strategy: TrimBy::MinId(StreamId::new(6, 0)),
        approx: false,
        limit: 0,
    });
    assert!(s.is_empty());
    assert_eq!(s.node_count(), 1);
    let back = undump(&dump(&s, 19), 19).unwrap();
    assert_eq!(content(&back), content(&s));
    assert_eq!(back.node_count(), 1);
}

#[test]
fn type_21_keeps_active_times() {
    let mut s = with_groups(sample());
    for c in s
        .groups
        .get_mut(&b("g1")[..])
        .unwrap()
        .consumers
        .values_mut()
    {
        c.active_time = -1;
    }
    assert_eq!(undump(&dump(&s, 21), 21).unwrap(), s);
}

#[test]
fn type_15_derives_the_counters() {
    let mut s = with_groups(sample());
    s.delete(&[StreamId::new(1001, 0)]);
    let back = undump(&dump(&s, 15), 15).unwrap();
    assert_eq!(back.len(), s.len());
    assert_eq!(back.entries_added, s.len() as u64);
    assert_eq!(back.first_id, StreamId::new(1002, 5));
    assert!(back.max_deleted.is_zero());
    // Group read counters are estimated: unknown for an ID inside the stream.
    assert_eq!(back.groups[&b("g1")[..]].entries_read, -1);
    assert_eq!(back.groups[&b("empty")[..]].entries_read, 0);
    assert_eq!(back.groups[&b("g1")[..]].pel, s.groups[&b("g1")[..]].pel);
    let empty = undump(&dump(&Stream::new(), 15), 15).unwrap();
    assert_eq!(empty.first_id, StreamId::MAX);
}

#[test]
fn other_types_are_refused() {
    let bytes = dump(&sample(), 19);
    for ty in [0u8, 14, 16, 20, 22] {
        assert!(undump(&bytes, ty).is_err());
    }
}

#[test]
fn every_truncation_is_bad() {
    let s = with_groups(sample());
    for ty in [15, 19, 21] {
        let bytes = dump(&s, ty);
        for n in 0..bytes.len() {
            let mut r = Reader::new(&bytes[..n]);
            assert!(load(&mut r, ty).is_err(), "type {ty} cut at {n}");
        }
    }
}

#[test]
fn flipped_bytes_never_panic_and_what_loads_is_consistent() {
    let s = with_groups(sample());
    let bytes = dump(&s, 19);
    for i in 0..bytes.len() {
        for x in [0x01u8, 0x80, 0xff, 0x10] {
            let mut m = bytes.clone();
            m[i] ^= x;
            let mut r = Reader::new(&m);
            if let Ok(t) = load(&mut r, 19) {
                // Whatever was accepted saves and loads back to itself.
                let again = dump(&t, 19);
                assert_eq!(content(&undump(&again, 19).unwrap()), content(&t));
            }
        }
    }
}

/// Hand-made payloads: `nodes` are (key, listpack) pairs, then the metadata.
fn payload(nodes: &[([u8; 16], Vec<u8>)], length: u64, last: (u64, u64)) -> Writer {
    let mut w = Writer { buf: Vec::new() };
    w.len(nodes.len() as u64);
    for (k, lp) in nodes {
        w.string(k);
        w.string(lp);
    }
    w.len(length);
    w.len(last.0);
    w.len(last.1);
    w.len(0);
    w.len(0);
    w.len(0);
    w.len(0);
    w.len(length);
    w
}

/// A node listpack holding entries (flags, ms delta, seq delta) with fields `a`.
fn node(live: i64, deleted: i64, entries: &[(i64, i64, i64)], lp_count: i64) -> Vec<u8> {
    let mut lp = Builder::new();
    for v in [live, deleted, 1] {
        lp.push_int(v);
    }
    lp.push_bytes(b"a");
    lp.push_int(0);
    for &(flags, ms, seq) in entries {
        lp.push_int(flags);
        lp.push_int(ms);
        lp.push_int(seq);
        lp.push_bytes(b"v");
        lp.push_int(lp_count);
    }
    lp.finish()
}

fn key(ms: u64, seq: u64) -> [u8; 16] {
    StreamId::new(ms, seq).encode()
}

fn groups_none(mut w: Writer) -> Vec<u8> {
    w.len(0);
    w.buf
}

#[test]
fn hand_made_payloads() {
    let ok = node(2, 1, &[(2, 0, 0), (3, 0, 1), (2, 1, 0)], 4);
    let s = undump(
        &groups_none(payload(&[(key(5, 0), ok.clone())], 2, (6, 0))),
        19,
    )
    .unwrap();
    let ids: Vec<_> = s
        .range(StreamId::MIN, StreamId::MAX, false)
        .map(|e| *e.0)
        .collect();
    assert_eq!(ids, [StreamId::new(5, 0), StreamId::new(6, 0)]);
    // Nodes may come in any order.
    let second = node(1, 0, &[(2, 0, 0)], 4);
    let two = [(key(9, 0), second.clone()), (key(5, 0), ok.clone())];
    assert_eq!(
        undump(&groups_none(payload(&two, 3, (9, 0))), 19)
            .unwrap()
            .len(),
        3
    );

    let bad = |nodes: &[([u8; 16], Vec<u8>)], len: u64, last: (u64, u64)| {
        undump(&groups_none(payload(nodes, len, last)), 19).is_err()
    };
    // Length disagrees with the live entries.
    assert!(bad(&[(key(5, 0), ok.clone())], 3, (6, 0)));
    // Last ID below an entry (a tombstone counts too).
    assert!(bad(&[(key(5, 0), ok.clone())], 2, (5, 5)));
    // Duplicate node keys; overlapping nodes.
    assert!(bad(
        &[(key(5, 0), ok.clone()), (key(5, 0), ok.clone())],
        4,
        (6, 0)
    ));
    assert!(bad(
        &[(key(5, 0), ok.clone()), (key(5, 1), second.clone())],
        3,
        (6, 0)
    ));
    // Counts in the master entry not matching the flags.
    assert!(bad(
        &[(key(5, 0), node(3, 0, &[(2, 0, 0), (3, 0, 1), (2, 1, 0)], 4))],
        3,
        (6, 0)
    ));
    assert!(bad(
        &[(key(5, 0), node(1, 1, &[(2, 0, 0), (2, 1, 0)], 4))],
        1,
        (6, 0)
    ));
    // Too few / too many entries for the counts.
    assert!(bad(
        &[(key(5, 0), node(3, 1, &[(2, 0, 0), (3, 0, 1), (2, 1, 0)], 4))],
        3,
        (6, 0)
    ));
    assert!(bad(
        &[(key(5, 0), node(1, 0, &[(2, 0, 0), (2, 1, 0)], 4))],
        1,
        (6, 0)
    ));
    // Wrong lp-count; IDs not increasing; an ID below the master.
    assert!(bad(&[(key(5, 0), node(1, 0, &[(2, 0, 0)], 5))], 1, (6, 0)));
    assert!(bad(
        &[(key(5, 0), node(2, 0, &[(2, 1, 0), (2, 0, 0)], 4))],
        2,
        (6, 0)
    ));
    assert!(bad(
        &[(key(5, 0), node(2, 0, &[(2, 0, 0), (2, 0, 0)], 4))],
        2,
        (6, 0)
    ));
    assert!(bad(&[(key(5, 0), node(1, 0, &[(2, -1, 0)], 4))], 1, (6, 0)));
    // A node key that is not 16 bytes; an empty listpack.
    let mut w = Writer { buf: Vec::new() };
    w.len(1);
    w.string(&[0u8; 15]);
    w.string(&ok);
    assert!(undump(&w.buf, 19).is_err());
    assert!(bad(&[(key(5, 0), Builder::new().finish())], 0, (6, 0)));
    // Entries added below the length.
    let mut w = payload(&[(key(5, 0), ok.clone())], 2, (6, 0));
    let n = w.buf.len();
    w.buf[n - 1] = 1;
    assert!(undump(&groups_none(w), 19).is_err());
}

/// One group `g` with the given PEL IDs and consumers owning IDs.
fn group_payload(pel: &[u64], consumers: &[(&str, &[u64])]) -> Vec<u8> {
    let mut w = payload(&[], 0, (100, 0));
    w.len(1);
    w.string(b"g");
    w.len(0);
    w.len(0);
    w.len(0);
    w.len(pel.len() as u64);
    for &ms in pel {
        w.raw(&key(ms, 0));
        w.millis(77);
        w.len(1);
    }
    w.len(consumers.len() as u64);
    for (name, ids) in consumers {
        w.string(name.as_bytes());
        w.millis(88);
        w.len(ids.len() as u64);
        for &ms in *ids {
            w.raw(&key(ms, 0));
        }
    }
    w.buf
}

#[test]
fn pel_consistency() {
    let s = undump(&group_payload(&[1, 2], &[("a", &[1]), ("b", &[2])]), 19).unwrap();
    let g = &s.groups[&b("g")[..]];
    assert_eq!(g.pel[&StreamId::new(2, 0)].consumer, b("b"));
    assert_eq!(g.consumers[&b("a")[..]].active_time, 88);
    // Owned by nobody; by two consumers; twice by one; not in the group PEL.
    assert!(undump(&group_payload(&[1, 2], &[("a", &[1])]), 19).is_err());
    assert!(undump(&group_payload(&[1], &[("a", &[1]), ("b", &[1])]), 19).is_err());
    assert!(undump(&group_payload(&[1], &[("a", &[1, 1])]), 19).is_err());
    assert!(undump(&group_payload(&[1], &[("a", &[1, 2])]), 19).is_err());
    // Duplicate PEL entries and consumers.
    assert!(undump(&group_payload(&[1, 1], &[("a", &[1])]), 19).is_err());
    assert!(undump(&group_payload(&[1], &[("a", &[1]), ("a", &[])]), 19).is_err());
}
