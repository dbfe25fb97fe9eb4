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
/// store order, by reference (a change is ~150 bytes; moving them
/// would cost more than applying some of them).
///
/// Store order: by key, keeping every key's changes (and everything relative to a
/// whole-database change) in their original order. Changes to different keys commute, and
/// B-tree inserts in key order touch each page once, while it is hot.
///
/// Sorted first, the coalescing is a scan instead of a hash set (as [`kept`] does): between
/// two whole-database changes a key's changes are adjacent and in order, and the last
/// whole-key change among them makes the earlier ones redundant.
pub fn coalesced_in_key_order(batches: &[Vec<Change>]) -> Vec<&Change> {
    let all: Vec<&Change> = batches.iter().flatten().collect();
    let mut out = Vec::with_capacity(all.len());
    let mut start = 0;
    for i in 0..=all.len() {
        if i == all.len() || all[i].target().is_none() {
            scan(&all[start..i], &mut out);
            out.extend(all.get(i).copied());
            start = i + 1;
        }
    }
    out
}

/// A change and what it sorts by: its database, the 8 bytes of its key that follow the
/// prefix all keys of its segment share (zero-padded, big-endian), then the whole key.
/// Where two windows differ they order the keys as the keys do (a missing byte, 0, is
/// below any byte; a real 0 ties and falls to the whole key), so the order is the keys';
/// most comparisons are then one integer compare instead of a `memcmp` call on keys that
/// mostly start alike (`user:`, `session:0000`).
struct Keyed<'c> {
    db: usize,
    window: u64,
    key: &'c [u8],
    change: &'c Change,
}

/// Sorts a segment between whole-database changes by key and appends what survives
/// coalescing: each key's changes from its last whole-key change on.
fn scan<'c>(segment: &[&'c Change], out: &mut Vec<&'c Change>) {
    fn target(c: &Change) -> (usize, &[u8]) {
        c.target().unwrap_or((0, &[]))
    }
    let Some(first) = segment.first() else {
        return;
    };
    let mut shared = target(first).1;
    for c in &segment[1..] {
        let key = target(c).1;
        if !key.starts_with(shared) {
            let n = shared.iter().zip(key).take_while(|(a, b)| a == b).count();
            shared = &shared[..n];
        }
    }
    let cut = shared.len();
    let mut keyed: Vec<Keyed> = segment
        .iter()
        .map(|&change| {
            let (db, key) = target(change);
            let tail = &key[cut..];
            let mut w = [0u8; 8];
            let n = tail.len().min(8);
            w[..n].copy_from_slice(&tail[..n]);
            Keyed {
                db,
                window: u64::from_be_bytes(w),
                key,
                change,
            }
        })
        .collect();
    // Stable: a key's own changes keep their order.
    keyed.sort_by(|a, b| {
        (a.db, a.window)
            .cmp(&(b.db, b.window))
            .then_with(|| a.key.cmp(b.key))
    });
    for run in keyed.chunk_by(|a, b| a.db == b.db && a.key == b.key) {
        let from = run
            .iter()
            .rposition(|k| replaces_key(k.change))
            .unwrap_or(0);
        out.extend(run[from..].iter().map(|k| k.change));
    }
}

/// A change that sets a key's whole state: earlier changes to that key are redundant.
fn replaces_key(c: &Change) -> bool {
    matches!(
        c,
        Change::Put { .. } | Change::Del { .. } | Change::StrSet { .. }
    )
}

/// For each change (in order), whether it survives coalescing.
fn kept<'c>(changes: impl DoubleEndedIterator<Item = &'c Change>, len: usize) -> Vec<bool> {
    let mut keep = vec![true; len];
    // Sized for the batch up front: growing rehashes every key seen so far, repeatedly.
    let mut replaced: HashSet<(usize, &[u8]), ahash::RandomState> =
        HashSet::with_capacity_and_hasher(len, Default::default());
    for (i, c) in changes.rev().enumerate() {
        let i = len - 1 - i;
        let Some(target) = c.target() else {
            replaced.clear();
            continue;
        };
        if replaced.contains(&target) {
            keep[i] = false;
        } else if replaces_key(c) {
            replaced.insert(target);
        }
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::value::StrVal;
    use bytes::Bytes;

    /// The store order [`coalesced_in_key_order`] gives, on its own (the reference its test
    /// compares with): by key, keeping every key's changes and everything relative to a
    /// whole-database change in their original order.
    fn order_by_key(batch: &mut [Change]) {
        for segment in batch.split_mut(|c| c.target().is_none()) {
            segment.sort_by(|a, b| a.target().cmp(&b.target()));
        }
    }

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

    /// The checkpoint's sort-then-scan gives exactly what coalescing the concatenated
    /// batches with [`coalesce`] and then ordering them gives, on mixed batches of whole-key,
    /// element and whole-database changes.
    #[test]
    fn checkpoint_coalescing_matches_coalesce_then_order() {
        let mut seed = 0x9e3779b97f4a7c15u64;
        let mut next = move |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        // Shared prefixes, keys that are prefixes of others, a real 0 byte, windows past 8.
        const KEYS: [&str; 8] = [
            "a",
            "key:0001",
            "key:0001\0",
            "key:00010",
            "key:000100000002",
            "key:000100000001",
            "key:1",
            "",
        ];
        for _ in 0..500 {
            let batches: Vec<Vec<Change>> = (0..next(4) + 1)
                .map(|_| {
                    (0..next(12))
                        .map(|_| {
                            let (db, key) = (next(2) as usize, KEYS[next(8) as usize]);
                            let key = Bytes::from_static(key.as_bytes());
                            match next(10) {
                                0..=2 => set(db, KEYS[0], next(100) as i64),
                                3..=4 => Change::HashPut {
                                    db,
                                    key,
                                    pairs: vec![],
                                },
                                5 => Change::Del { db, key },
                                6 => Change::Expire { db, key, at: None },
                                7 => Change::FlushDb { db },
                                8 => Change::StrSet {
                                    db,
                                    key,
                                    value: StrVal::Int(next(100) as i64),
                                    expire_at: None,
                                },
                                _ => Change::SetAdd {
                                    db,
                                    key,
                                    members: vec![],
                                },
                            }
                        })
                        .collect()
                })
                .collect();
            let mut want: Vec<Change> = batches.iter().flatten().cloned().collect();
            coalesce(&mut want);
            order_by_key(&mut want);
            let got: Vec<Change> = coalesced_in_key_order(&batches)
                .into_iter()
                .cloned()
                .collect();
            // (Change has no PartialEq: its Debug form shows every field.)
            assert_eq!(
                format!("{got:?}"),
                format!("{want:?}"),
                "batches: {batches:?}"
            );
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
