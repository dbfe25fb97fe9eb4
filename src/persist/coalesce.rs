//! Coalescing a commit's batch: within one transaction only the final state of a key is
//! visible, so a change that replaces a whole key (`Put`, `Del`, `StrSet`) makes every earlier
//! change to that key in the same batch redundant. Hot keys (counters, rate limiters, locks)
//! then cost one row per commit instead of one per write.
//!
//! Whole-database changes (`FlushDb`, `FlushAll`, `SwapDb`) are barriers: nothing before one
//! is dropped because of a change after it (conservative, and they are rare).

use crate::engine::change::Change;

/// Reusable scratch for coalescing, kept by the committer and the checkpointer across
/// batches. Coalescing sorts indices by key instead of filling a fresh hash set per batch:
/// that set's allocation (page faults, huge pages zeroed by the kernel) cost the committer
/// more than all its hashing, and the checkpointer sorts by key anyway.
#[derive(Default)]
pub struct Coalescer {
    /// (segment, batch, position) of the surviving changes, in store order.
    order: Vec<(u32, u32, u32)>,
    keep: Vec<bool>,
}

impl Coalescer {
    /// Fills `order` with the changes of `batches` (in log order) that survive coalescing,
    /// in store order (see [`order_by_key`]).
    fn plan<B: AsRef<[Change]>>(&mut self, batches: &[B]) {
        let get = |(_, b, p): (u32, u32, u32)| &batches[b as usize].as_ref()[p as usize];
        let order = &mut self.order;
        order.clear();
        // Segments between whole-database changes; each of those is a segment of its own,
        // so sorting by segment first keeps every change on its side of the barrier.
        let mut seg = 0u32;
        for (b, batch) in batches.iter().enumerate() {
            for (p, c) in batch.as_ref().iter().enumerate() {
                let barrier = c.target().is_none();
                seg += u32::from(barrier);
                order.push((seg, b as u32, p as u32));
                seg += u32::from(barrier);
            }
        }
        // Position last: a key's changes keep their log order.
        order.sort_unstable_by(|&x, &y| {
            x.0.cmp(&y.0)
                .then_with(|| get(x).target().cmp(&get(y).target()))
                .then_with(|| (x.1, x.2).cmp(&(y.1, y.2)))
        });
        // In each run of one key's changes, everything before its last whole-key change is
        // overwritten by it: the batch then commits to the same store state.
        let (mut out, mut i, n) = (0, 0, order.len());
        while i < n {
            let run = (order[i].0, get(order[i]).target());
            let mut end = i + 1;
            while end < n && (order[end].0, get(order[end]).target()) == run {
                end += 1;
            }
            let from = (i..end)
                .rev()
                .find(|&k| replaces_key(get(order[k])))
                .unwrap_or(i);
            for k in from..end {
                order[out] = order[k];
                out += 1;
            }
            i = end;
        }
        order.truncate(out);
    }

    /// Drops the changes of `batch` that a later whole-key change in it overwrites, keeping
    /// the order of the rest; returns how many were dropped.
    pub fn coalesce(&mut self, batch: &mut Vec<Change>) -> usize {
        self.plan(std::slice::from_ref(batch));
        let dropped = batch.len() - self.order.len();
        if dropped > 0 {
            self.keep.clear();
            self.keep.resize(batch.len(), false);
            for &(_, _, p) in &self.order {
                self.keep[p as usize] = true;
            }
            let mut i = 0;
            batch.retain(|_| {
                i += 1;
                self.keep[i - 1]
            });
        }
        dropped
    }

    /// A checkpoint's view of several logged batches: the changes that survive coalescing,
    /// in store order, by reference (a change is ~150 bytes; moving them would cost more
    /// than applying some of them).
    pub fn in_key_order<'s, 'c: 's, B: AsRef<[Change]>>(
        &'s mut self,
        batches: &'c [B],
    ) -> impl Iterator<Item = &'c Change> + 's {
        self.plan(batches);
        self.order
            .iter()
            .map(move |&(_, b, p)| &batches[b as usize].as_ref()[p as usize])
    }

    /// Releases the scratch if a huge batch grew it (it is kept between batches otherwise).
    pub fn shrink(&mut self, keep: usize) {
        if self.order.capacity() > keep {
            *self = Coalescer::default();
        }
    }
}

/// Whether `c` replaces its key as a whole (so earlier changes to it in a batch are moot).
fn replaces_key(c: &Change) -> bool {
    matches!(
        c,
        Change::Put { .. } | Change::Del { .. } | Change::StrSet { .. }
    )
}

/// [`Coalescer::coalesce`] with fresh scratch.
#[cfg(test)]
pub fn coalesce(batch: &mut Vec<Change>) -> usize {
    Coalescer::default().coalesce(batch)
}

/// [`Coalescer::in_key_order`] with fresh scratch, collected.
#[cfg(test)]
pub fn coalesced_in_key_order(batches: &[Vec<Change>]) -> Vec<&Change> {
    let mut c = Coalescer::default();
    let v: Vec<&Change> = c.in_key_order(batches).collect();
    v
}

/// Orders a batch by key for the store, keeping every key's changes (and everything
/// relative to a whole-database change) in their original order: changes to different keys
/// commute, and B-tree inserts in key order touch each page once, while it is hot.
/// (What [`Coalescer::in_key_order`] yields, without the coalescing: the tests' reference.)
#[cfg(test)]
pub fn order_by_key<C: std::borrow::Borrow<Change>>(batch: &mut [C]) {
    for segment in batch.split_mut(|c| c.borrow().target().is_none()) {
        // Stable: a key's own changes keep their order.
        segment.sort_by(|a, b| a.borrow().target().cmp(&b.borrow().target()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::value::StrVal;
    use bytes::Bytes;

    fn set(db: usize, k: &'static str, v: i64) -> Change {
        Change::StrSet {
            db,
            key: Bytes::from_static(k.as_bytes()),
            value: StrVal::Int(v),
            expire_at: None,
        }
    }

    fn names(b: &[Change]) -> Vec<String> {
        b.iter()
            .map(|c| match c {
                Change::StrSet { db, key, value, .. } => {
                    format!("{db}:{}={value:?}", String::from_utf8_lossy(key))
                }
                Change::HashPut { key, .. } => format!("h:{}", String::from_utf8_lossy(key)),
                Change::Del { key, .. } => format!("del:{}", String::from_utf8_lossy(key)),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn later_whole_key_changes_win() {
        let mut b = vec![
            set(0, "a", 1),
            set(0, "b", 1),
            set(1, "a", 1),
            set(0, "a", 2),
            Change::HashPut {
                db: 0,
                key: Bytes::from_static(b"h"),
                pairs: vec![],
            },
            Change::Del {
                db: 0,
                key: Bytes::from_static(b"h"),
            },
            Change::HashPut {
                db: 0,
                key: Bytes::from_static(b"h"),
                pairs: vec![],
            },
        ];
        assert_eq!(coalesce(&mut b), 2);
        assert_eq!(
            names(&b),
            ["0:b=Int(1)", "1:a=Int(1)", "0:a=Int(2)", "del:h", "h:h"]
        );
    }

    #[test]
    fn ordering_by_key_keeps_each_keys_order_and_the_barriers() {
        let mut b = vec![
            set(0, "b", 1),
            set(0, "a", 1),
            set(0, "b", 2),
            Change::FlushDb { db: 0 },
            set(1, "a", 1),
            set(0, "z", 1),
            set(0, "a", 2),
        ];
        order_by_key(&mut b);
        assert_eq!(
            names(&b),
            [
                "0:a=Int(1)",
                "0:b=Int(1)",
                "0:b=Int(2)",
                "FlushDb { db: 0 }",
                "0:a=Int(2)",
                "0:z=Int(1)",
                "1:a=Int(1)"
            ]
        );
    }

    #[test]
    fn a_checkpoint_coalesces_across_batches() {
        let batches = vec![
            vec![set(0, "a", 1), set(0, "b", 1)],
            vec![set(0, "a", 2), Change::FlushAll, set(0, "b", 2)],
            vec![set(0, "b", 3)],
        ];
        let got: Vec<Change> = coalesced_in_key_order(&batches)
            .into_iter()
            .cloned()
            .collect();
        assert_eq!(
            names(&got),
            ["0:a=Int(2)", "0:b=Int(1)", "FlushAll", "0:b=Int(3)"]
        );
    }

    /// The definition, quadratically: a change goes if a later whole-key change to the same
    /// key follows it with no whole-database change between them.
    fn reference(batches: &[Vec<Change>]) -> Vec<Change> {
        let all: Vec<&Change> = batches.iter().flatten().collect();
        let mut kept: Vec<&Change> = Vec::new();
        for (i, c) in all.iter().enumerate() {
            let gone = c.target().is_some()
                && all[i + 1..]
                    .iter()
                    .take_while(|d| d.target().is_some())
                    .any(|d| d.target() == c.target() && replaces_key(d));
            if !gone {
                kept.push(c);
            }
        }
        order_by_key(&mut kept);
        kept.into_iter().cloned().collect()
    }

    #[test]
    fn sorting_coalescer_matches_the_definition() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(17);
        let keys = ["a", "b", "c", "d"];
        let mut scratch = Coalescer::default();
        for _ in 0..500 {
            let batches: Vec<Vec<Change>> = (0..rng.gen_range(1..4))
                .map(|_| {
                    (0..rng.gen_range(0..12))
                        .map(|i| {
                            let (db, k) = (rng.gen_range(0..2), keys[rng.gen_range(0..4)]);
                            let key = Bytes::from_static(k.as_bytes());
                            match rng.gen_range(0..10) {
                                0 => Change::FlushDb { db },
                                1 => Change::Del { db, key },
                                2..=4 => Change::HashPut {
                                    db,
                                    key,
                                    pairs: vec![],
                                },
                                _ => set(db, k, i as i64),
                            }
                        })
                        .collect()
                })
                .collect();
            let want = names(&reference(&batches));
            let got: Vec<Change> = scratch.in_key_order(&batches).cloned().collect();
            assert_eq!(names(&got), want, "{batches:?}");
            // One batch, coalesced in place: the survivors in their log order.
            let mut one: Vec<Change> = batches.concat();
            let dropped = scratch.coalesce(&mut one);
            let mut sorted = one.clone();
            order_by_key(&mut sorted);
            assert_eq!(names(&sorted), names(&reference(&[batches.concat()])));
            assert_eq!(dropped, batches.concat().len() - one.len());
        }
    }

    #[test]
    fn database_changes_are_barriers() {
        let mut b = vec![
            set(0, "a", 1),
            Change::SwapDb { a: 0, b: 1 },
            set(0, "a", 2),
        ];
        assert_eq!(coalesce(&mut b), 0);
        assert_eq!(b.len(), 3);
    }
}
