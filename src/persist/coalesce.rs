//! Coalescing a commit's batch: within one transaction only the final state of a key is
//! visible, so a change that replaces a whole key (`Put`, `Del`, `StrSet`) makes every earlier
//! change to that key in the same batch redundant. Hot keys (counters, rate limiters, locks)
//! then cost one row per commit instead of one per write.
//!
//! Whole-database changes (`FlushDb`, `FlushAll`, `SwapDb`) are barriers: nothing before one
//! is dropped because of a change after it (conservative, and they are rare).

use crate::engine::change::Change;
use std::collections::HashSet;

/// Drops the changes of `batch` that a later whole-key change in it overwrites; the batch
/// then commits to the same store state. Returns how many were dropped.
pub fn coalesce(batch: &mut Vec<Change>) -> usize {
    let keep = kept(batch.iter(), batch.len());
    let dropped = batch.len() - keep.iter().filter(|k| **k).count();
    if dropped > 0 {
        let mut i = 0;
        batch.retain(|_| {
            i += 1;
            keep[i - 1]
        });
    }
    dropped
}

/// A checkpoint's view of several logged batches: the changes that survive coalescing, in
/// store order (see [`order_by_key`]), by reference (a change is ~150 bytes; moving them
/// would cost more than applying some of them).
pub fn coalesced_in_key_order(batches: &[Vec<Change>]) -> Vec<&Change> {
    let all = || batches.iter().flatten();
    let keep = kept(all(), batches.iter().map(Vec::len).sum());
    let mut out: Vec<&Change> = all()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(c, _)| c)
        .collect();
    order_by_key(&mut out);
    out
}

/// For each change (in order), whether it survives coalescing.
fn kept<'c>(changes: impl DoubleEndedIterator<Item = &'c Change>, len: usize) -> Vec<bool> {
    let mut keep = vec![true; len];
    let mut replaced: HashSet<(usize, &[u8]), ahash::RandomState> = HashSet::default();
    for (i, c) in changes.rev().enumerate() {
        let i = len - 1 - i;
        let Some(target) = c.target() else {
            replaced.clear();
            continue;
        };
        if replaced.contains(&target) {
            keep[i] = false;
        } else if matches!(
            c,
            Change::Put { .. } | Change::Del { .. } | Change::StrSet { .. }
        ) {
            replaced.insert(target);
        }
    }
    keep
}

/// Orders a batch by key for the store, keeping every key's changes (and everything
/// relative to a whole-database change) in their original order: changes to different keys
/// commute, and B-tree inserts in key order touch each page once, while it is hot.
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
