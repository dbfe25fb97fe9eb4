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
    if batch.len() < 2 {
        return 0;
    }
    let mut keep = vec![true; batch.len()];
    let mut dropped = 0;
    {
        let mut replaced: HashSet<(usize, &[u8]), ahash::RandomState> = HashSet::default();
        for (i, c) in batch.iter().enumerate().rev() {
            let Some(target) = c.target() else {
                replaced.clear();
                continue;
            };
            if replaced.contains(&target) {
                keep[i] = false;
                dropped += 1;
            } else if matches!(
                c,
                Change::Put { .. } | Change::Del { .. } | Change::StrSet { .. }
            ) {
                replaced.insert(target);
            }
        }
    }
    if dropped > 0 {
        let mut i = 0;
        batch.retain(|_| {
            i += 1;
            keep[i - 1]
        });
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::value::StrVal;
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
