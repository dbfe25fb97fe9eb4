//! The sorted set against a naive model (a sorted Vec) on random operations.

use super::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::cmp::Ordering;

/// Sorted (score, member) pairs: the obviously correct reference.
#[derive(Default)]
struct Model(Vec<(f64, Vec<u8>)>);

impl Model {
    fn pos(&self, m: &[u8]) -> Option<usize> {
        self.0.iter().position(|(_, x)| x == m)
    }
    fn insert(&mut self, m: &[u8], s: f64) {
        if let Some(p) = self.pos(m) {
            self.0.remove(p);
        }
        let at = self
            .0
            .partition_point(|(xs, xm)| cmp_key(*xs, xm, s, m) == Ordering::Less);
        self.0.insert(at, (s, m.to_vec()));
    }
    fn remove(&mut self, m: &[u8]) -> Option<f64> {
        let p = self.pos(m)?;
        Some(self.0.remove(p).0)
    }
}

fn member(rng: &mut SmallRng, space: u32) -> Vec<u8> {
    format!("m{}", rng.gen_range(0..space)).into_bytes()
}

fn score(rng: &mut SmallRng) -> f64 {
    // Few distinct scores, so ties (ordered by member) are common.
    match rng.gen_range(0..10) {
        0 => f64::INFINITY,
        1 => f64::NEG_INFINITY,
        _ => f64::from(rng.gen_range(-20i32..20)) / 2.0,
    }
}

fn same(z: &ZSet, m: &Model) {
    z.tree.check();
    assert_eq!(z.len(), m.0.len());
    let got: Vec<(f64, Vec<u8>)> = z.iter().map(|i| (i.score, i.member.to_vec())).collect();
    assert_eq!(got, m.0);
}

fn run(seed: u64, steps: usize, space: u32) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut z = ZSet::new(true);
    let mut m = Model::default();
    for step in 0..steps {
        match rng.gen_range(0..100) {
            0..=44 => {
                let (k, s) = (member(&mut rng, space), score(&mut rng));
                z.upsert(&k, s);
                m.insert(&k, s);
            }
            45..=64 => {
                let k = member(&mut rng, space);
                assert_eq!(z.remove(&k), m.remove(&k));
            }
            65..=74 => {
                let k = member(&mut rng, space);
                let want = m.pos(&k).map(|p| (p, m.0[p].0));
                assert_eq!(z.rank(&k), want);
            }
            75..=79 if !m.0.is_empty() => {
                let start = rng.gen_range(0..m.0.len());
                let n = rng.gen_range(1..=(m.0.len() - start).min(150));
                let mut got = Vec::new();
                z.remove_range(start, n, |it| got.push((it.score, it.member.to_vec())));
                let want: Vec<_> = m.0.drain(start..start + n).collect();
                assert_eq!(got, want);
            }
            80..=89 => {
                let (a, b) = (score(&mut rng), score(&mut rng));
                let r = ScoreRange {
                    min: a.min(b),
                    max: a.max(b),
                    minex: rng.gen(),
                    maxex: rng.gen(),
                };
                let want: Vec<usize> = (0..m.0.len())
                    .filter(|&i| r.gte_min(m.0[i].0) && r.lte_max(m.0[i].0))
                    .collect();
                let (s, e) = z.score_span(&r);
                assert_eq!((s..e).collect::<Vec<_>>(), want, "range {r:?}");
                // Walking from the range's edges gives the same items both ways.
                let fwd: Vec<Vec<u8>> = z
                    .iter_at(z.score_first(&r))
                    .take_while(|it| r.lte_max(it.score))
                    .map(|it| it.member.to_vec())
                    .collect();
                let mut back: Vec<Vec<u8>> = z
                    .iter_rev_before(z.score_end(&r))
                    .take_while(|it| r.gte_min(it.score))
                    .map(|it| it.member.to_vec())
                    .collect();
                back.reverse();
                let names: Vec<Vec<u8>> = want.iter().map(|&i| m.0[i].1.clone()).collect();
                assert_eq!(fwd, names);
                assert_eq!(back, names);
                let p = z.pos_at(s);
                assert_eq!(p.rank, s);
                assert_eq!(
                    z.iter_at(p).next().map(|i| i.member.to_vec()),
                    m.0.get(s).map(|x| x.1.clone())
                );
            }
            _ if !m.0.is_empty() => {
                let r = rng.gen_range(0..m.0.len());
                let fwd: Vec<_> = z.iter_from(r).take(12).map(|i| i.member.to_vec()).collect();
                let want: Vec<_> = m.0[r..].iter().take(12).map(|x| x.1.clone()).collect();
                assert_eq!(fwd, want);
                let back: Vec<_> = z
                    .iter_rev_from(r)
                    .take(12)
                    .map(|i| i.member.to_vec())
                    .collect();
                let want: Vec<_> = m.0[..=r]
                    .iter()
                    .rev()
                    .take(12)
                    .map(|x| x.1.clone())
                    .collect();
                assert_eq!(back, want);
                assert_eq!(z.get(r).map(|i| i.member.to_vec()), Some(m.0[r].1.clone()));
            }
            _ => {}
        }
        if step % 97 == 0 {
            same(&z, &m);
        }
    }
    same(&z, &m);
}

#[test]
fn random_ops_small_sets() {
    for seed in 0..20 {
        run(seed, 2_000, 40);
    }
}

#[test]
fn random_ops_large_sets() {
    // Enough members for several tree levels (leaves hold 64, inner nodes 48 children).
    for seed in 100..103 {
        run(seed, 40_000, 6_000);
    }
}

#[test]
fn grow_then_drain_keeps_structure() {
    let mut z = ZSet::new(true);
    for i in 0..20_000u32 {
        z.insert(Bytes::from(format!("k{i:05}")), f64::from(i % 7));
    }
    z.tree.check();
    // Remove from the middle in big chunks, then pop from both ends.
    z.remove_range(5_000, 9_000, |_| {});
    z.tree.check();
    assert_eq!(z.len(), 11_000);
    while z.len() > 1 {
        let first = z.first().map(|i| i.member.clone()).unwrap_or_default();
        z.remove(&first);
        let last = z.last().map(|i| i.member.clone()).unwrap_or_default();
        z.remove(&last);
    }
    z.tree.check();
    assert!(z.len() <= 1);
}

#[test]
fn listpack_stores_negative_zero_as_zero() {
    let mut lp = ZSet::new(false);
    lp.insert(Bytes::from_static(b"a"), -0.0);
    assert!(lp.score(b"a").is_some_and(|s| s.is_sign_positive()));
    let mut sl = ZSet::new(true);
    sl.insert(Bytes::from_static(b"a"), -0.0);
    assert!(sl.score(b"a").is_some_and(|s| s.is_sign_negative()));
    sl.convert_to_listpack();
    assert!(sl.score(b"a").is_some_and(|s| s.is_sign_positive()));
    assert!(sl.first().is_some_and(|i| i.score.is_sign_positive()));
}

#[test]
fn lex_ranges() {
    let mut z = ZSet::new(false);
    for m in ["a", "b", "c", "d", "e"] {
        z.insert(Bytes::from(m), 0.0);
    }
    let r = |min: LexBound, max: LexBound| LexRange { min, max };
    let incl = |s: &'static str| LexBound::Incl(Bytes::from(s));
    let excl = |s: &'static str| LexBound::Excl(Bytes::from(s));
    let both = |z: &ZSet, rr: &LexRange| (z.lex_first(rr), z.lex_last(rr));
    for skip in [false, true] {
        if skip {
            z.convert_to_skiplist();
        }
        assert_eq!(
            both(&z, &r(LexBound::NegInf, LexBound::PosInf)),
            (Some(0), Some(4))
        );
        assert_eq!(both(&z, &r(incl("b"), excl("d"))), (Some(1), Some(2)));
        assert_eq!(both(&z, &r(excl("b"), incl("d"))), (Some(2), Some(3)));
        assert_eq!(both(&z, &r(incl("x"), LexBound::PosInf)), (None, None));
        assert_eq!(both(&z, &r(incl("c"), excl("c"))), (None, None));
        assert_eq!(both(&z, &r(incl("c"), incl("c"))), (Some(2), Some(2)));
        assert_eq!(
            both(&z, &r(LexBound::PosInf, LexBound::NegInf)),
            (None, None)
        );
        assert_eq!(
            both(&z, &r(LexBound::NegInf, LexBound::NegInf)),
            (None, None)
        );
        assert_eq!(both(&z, &r(incl("bb"), incl("bc"))), (None, None));
    }
}

#[test]
fn scan_cursor_visits_everything_once_in_count_sized_steps() {
    let mut z = ZSet::new(true);
    for i in 0..1_000u32 {
        // Runs of equal scores (a run of 500 too): the dict walk ignores scores.
        let score = if i < 500 {
            0.0
        } else {
            f64::from(i / 10) - 50.0
        };
        z.insert(Bytes::from(format!("m{i}")), score);
    }
    let mut seen = std::collections::HashMap::new();
    let mut cursor = 0;
    loop {
        let mut items = Vec::new();
        let next = z.scan(cursor, 7, &mut items);
        if next != 0 {
            // At least COUNT, and at most a bucket (a short chain) more.
            assert!((7..=16).contains(&items.len()), "{} items", items.len());
        }
        for (m, s) in items {
            assert_eq!(z.score(&m), Some(s));
            assert!(seen.insert(m, s).is_none(), "duplicate");
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), 1_000);
}

#[test]
fn scan_covers_members_present_throughout_under_churn() {
    let mut z = ZSet::new(true);
    for i in 0..2_000u32 {
        z.insert(Bytes::from(format!("stable{i}")), 1.0);
        z.insert(Bytes::from(format!("temp{i}")), 1.0);
    }
    let mut seen = std::collections::HashSet::new();
    let (mut cursor, mut step) = (0, 0u32);
    loop {
        let mut items = Vec::new();
        cursor = z.scan(cursor, 20, &mut items);
        seen.extend(items.into_iter().map(|(m, _)| m));
        if cursor == 0 {
            break;
        }
        // Between calls: shrink the dict (deletions) and grow it again (additions).
        for j in 0..30 {
            z.remove(format!("temp{}", (step * 30 + j) % 2_000).as_bytes());
        }
        for j in 0..5 {
            z.insert(Bytes::from(format!("new{step}_{j}")), 2.0);
        }
        step += 1;
    }
    for i in 0..2_000u32 {
        assert!(
            seen.contains(format!("stable{i}").as_bytes()),
            "stable{i} missed"
        );
    }
}

#[test]
fn rescore_moves_or_stays() {
    let mut z = ZSet::new(true);
    for i in 0..500u32 {
        z.insert(Bytes::from(format!("m{i:03}")), f64::from(i));
    }
    z.rescore(b"m250", 250.0, 250.5);
    z.rescore(b"m010", 10.0, 1e9);
    z.rescore(b"m499", 499.0, -1.0);
    z.tree.check();
    assert_eq!(z.rank(b"m499"), Some((0, -1.0)));
    assert_eq!(z.rank(b"m010"), Some((499, 1e9)));
    assert_eq!(z.rank(b"m250").map(|r| r.0), Some(250));
}

#[test]
fn members_are_stored_once_and_clones_stay_valid() {
    let mut z = ZSet::new(true);
    for i in 0..1000 {
        z.insert(Bytes::from(format!("member:{i}")), f64::from(i % 7));
    }
    // The table aliases the tree's bytes: the tree's handle is the only one (no second
    // handle, so no shared header), apart from the few copies kept as inner separators.
    let unique = z.iter().filter(|it| it.member.is_unique()).count();
    assert!(unique >= 900, "{unique}");
    assert_eq!(std::mem::size_of::<Alias>(), 16);
    let copy = z.clone();
    for i in (0..1000).step_by(2) {
        assert!(z.remove(format!("member:{i}").as_bytes()).is_some());
    }
    for i in (0..1000).step_by(3) {
        z.upsert(format!("member:{i}").as_bytes(), -1.0);
    }
    z.remove_range(0, 100, |_| {});
    assert_eq!(z.len(), 500 + 167 - 100);
    drop(z);
    // The clone's table reads bytes its own tree keeps alive.
    for i in 0..1000 {
        let m = format!("member:{i}");
        assert_eq!(copy.score(m.as_bytes()), Some(f64::from(i % 7)), "{m}");
    }
    let (mut out, mut c) = (Vec::new(), 0);
    loop {
        c = copy.scan(c, 100, &mut out);
        if c == 0 {
            break;
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup_by(|a, b| a.0 == b.0);
    assert_eq!(out.len(), 1000);
}
