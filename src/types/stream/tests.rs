use super::*;

fn f(pairs: &[&str]) -> Vec<Bytes> {
    pairs
        .iter()
        .map(|s| Bytes::copy_from_slice(s.as_bytes()))
        .collect()
}

fn add(s: &mut Stream, ms: u64, seq: u64) -> Result<StreamId, AppendError> {
    let p = ParsedId {
        id: StreamId::new(ms, seq),
        seq_given: true,
    };
    s.append(
        NewId::Explicit(p),
        &f(&["a", "1"]),
        0,
        NodeLimits::default(),
    )
}

#[test]
fn ids_must_grow() {
    let mut s = Stream::new();
    assert_eq!(add(&mut s, 1, 1), Ok(StreamId::new(1, 1)));
    assert_eq!(add(&mut s, 1, 1), Err(AppendError::NotGreater));
    let star = ParsedId {
        id: StreamId::new(1, 0),
        seq_given: false,
    };
    let id = s.append(
        NewId::Explicit(star),
        &f(&["x", "y"]),
        0,
        NodeLimits::default(),
    );
    assert_eq!(id, Ok(StreamId::new(1, 2)));
    assert_eq!(
        s.append(NewId::Auto, &f(&["x", "y"]), 0, NodeLimits::default()),
        Ok(StreamId::new(1, 3))
    );
    assert_eq!(
        s.append(NewId::Auto, &f(&["x", "y"]), 9, NodeLimits::default()),
        Ok(StreamId::new(9, 0))
    );
    assert_eq!(s.entries_added, 4);
    assert_eq!(s.first_id, StreamId::new(1, 1));
}

#[test]
fn nodes_hold_100_entries_and_approx_trim_drops_whole_nodes() {
    let mut s = Stream::new();
    for i in 1..=250 {
        add(&mut s, i, 0).unwrap();
    }
    assert_eq!(s.node_count(), 3);
    let t = Trim {
        strategy: TrimBy::MaxLen(120),
        approx: true,
        limit: 10_000,
    };
    assert_eq!(s.trim(t), 100);
    assert_eq!(s.len(), 150);
    assert_eq!(s.first_id, StreamId::new(101, 0));
    let exact = Trim {
        strategy: TrimBy::MaxLen(120),
        approx: false,
        limit: 0,
    };
    assert_eq!(s.trim(exact), 30);
    assert_eq!(s.len(), 120);
    // The partly trimmed node still counts its tombstones towards its size.
    let min = Trim {
        strategy: TrimBy::MinId(StreamId::new(240, 0)),
        approx: true,
        limit: 0,
    };
    assert_eq!(s.trim(min), 70);
    assert_eq!(s.len(), 50);
}

#[test]
fn delete_tracks_first_and_max_deleted() {
    let mut s = Stream::new();
    for i in 1..=3 {
        add(&mut s, i, 0).unwrap();
    }
    assert_eq!(s.delete(&[StreamId::new(1, 0), StreamId::new(7, 0)]), 1);
    assert_eq!(s.first_id, StreamId::new(2, 0));
    assert_eq!(s.max_deleted, StreamId::new(1, 0));
    assert_eq!(s.delete(&[StreamId::new(2, 0), StreamId::new(3, 0)]), 2);
    assert_eq!(s.node_count(), 0);
    assert_eq!(s.first_id, StreamId::MIN);
    assert_eq!(s.estimate_distance(StreamId::new(3, 0)), Some(3));
}

#[test]
fn lag_and_read_counter() {
    let mut s = Stream::new();
    for i in 1..=5 {
        add(&mut s, i, 0).unwrap();
    }
    s.groups
        .insert(Bytes::from_static(b"g"), Group::new(StreamId::MIN, 0));
    s.advance_group(b"g", StreamId::new(1, 0));
    s.advance_group(b"g", StreamId::new(2, 0));
    let g = &s.groups[&b"g"[..]];
    assert_eq!(g.entries_read, 2);
    assert_eq!(s.lag(g), Some(3));
    s.delete(&[StreamId::new(4, 0)]);
    let g = &s.groups[&b"g"[..]];
    assert_eq!(s.lag(g), None);
}

#[test]
fn radix_nodes() {
    let mut s = Stream::new();
    assert_eq!(s.radix_tree_nodes(), 1);
    add(&mut s, 1, 0).unwrap();
    assert_eq!(s.radix_tree_nodes(), 2);
}
