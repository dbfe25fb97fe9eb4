//! Element-level journaling of in-place list edits (durable engine only: callers check
//! `Access::journaling` first, so the memory engine does no extra work).
//!
//! Pushes and pops are not idempotent, so they are recorded *before* the edit is made: if
//! the key was also written whole earlier in the same `Access` (MULTI/EXEC, a script),
//! `Access::elems` first records its state so far, which must not contain the edit yet.
//! So are inserts and removals in the middle (`ListInsert`, `ListRemove`). `ListSet` is
//! idempotent and is recorded after the edit. Keys that are created (`set`) or emptied
//! (`remove`) go through the generic whole-key path.

use super::write_list;
use crate::engine::change::Change;
use crate::engine::Access;
use crate::types::list::End;
use bytes::Bytes;

/// The length of the list at `key` (`None`: missing or another type).
pub(super) fn len(ks: &mut Access<'_>, key: &[u8]) -> Option<usize> {
    write_list(ks, key).ok().flatten().map(|l| l.len())
}

pub(super) fn push(ks: &mut Access<'_>, key: &[u8], end: End, values: Vec<Bytes>) {
    let db = ks.db;
    ks.elems(Change::ListPush {
        db,
        key: Bytes::copy_from_slice(key),
        front: end == End::Head,
        values,
    });
}

pub(super) fn pop(ks: &mut Access<'_>, key: &[u8], end: End, n: usize) {
    if n == 0 {
        return;
    }
    let db = ks.db;
    ks.elems(Change::ListPop {
        db,
        key: Bytes::copy_from_slice(key),
        front: end == End::Head,
        n,
    });
}

/// Before popping up to `n` elements from an existing list: records the pop unless it
/// empties the list (the key's removal is recorded instead).
pub(super) fn before_pop(ks: &mut Access<'_>, key: &[u8], end: End, n: usize) {
    if let Some(len) = len(ks, key) {
        if n < len {
            pop(ks, key, end, n);
        }
    }
}

/// Before pushing `values` to `key`: records the push if the list exists (a new list is
/// stored whole when it is created).
pub(super) fn before_push(ks: &mut Access<'_>, key: &[u8], end: End, values: &[Bytes]) {
    if len(ks, key).is_some() {
        let values = values.iter().map(|v| Bytes::copy_from_slice(v)).collect();
        push(ks, key, end, values);
    }
}

/// Before LINSERT puts `value` at `index`, strictly inside the list.
pub(super) fn insert(ks: &mut Access<'_>, key: &[u8], index: usize, value: Bytes) {
    let db = ks.db;
    ks.elems(Change::ListInsert {
        db,
        key: Bytes::copy_from_slice(key),
        index: index as u64,
        value,
    });
}

/// Before LREM `count` `value`: records which elements go, unless that empties the list
/// (the key's removal is recorded instead) or none does.
pub(super) fn before_remove(ks: &mut Access<'_>, key: &[u8], count: i64, value: &[u8]) {
    let Some((mut indexes, len)) = write_list(ks, key).ok().flatten().map(|l| {
        let limit = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
        let rank = if count < 0 { -1 } else { 1 };
        (l.positions(value, rank, limit, 0), l.len())
    }) else {
        return;
    };
    if indexes.is_empty() || indexes.len() == len {
        return;
    }
    indexes.sort_unstable();
    let db = ks.db;
    ks.elems(Change::ListRemove {
        db,
        key: Bytes::copy_from_slice(key),
        indexes: indexes.into_iter().map(|i| i as u64).collect(),
    });
}

/// After LSET: the element now at `index`.
pub(super) fn set(ks: &mut Access<'_>, key: &[u8], index: usize, value: Bytes) {
    let db = ks.db;
    ks.elems(Change::ListSet {
        db,
        key: Bytes::copy_from_slice(key),
        index: index as u64,
        value,
    });
}

#[cfg(test)]
mod tests {
    use crate::cmd::testing::Client;
    use crate::engine::change::Change;
    use crate::engine::journal::Journal;
    use std::sync::Arc;
    use std::time::Duration;

    fn durable() -> (Client, Arc<Journal>) {
        Client::durable()
    }

    /// Short names of the changes journaled since the last call.
    fn kinds(j: &Journal) -> Vec<String> {
        let (changes, _) = j.take(Duration::ZERO);
        changes
            .iter()
            .map(|c| match c {
                Change::ListPush { front, values, .. } => format!("push {front} {}", values.len()),
                Change::ListPop { front, n, .. } => format!("pop {front} {n}"),
                Change::ListSet { index, .. } => format!("set {index}"),
                Change::ListRewrite { values, .. } => format!("rewrite {}", values.len()),
                Change::ListInsert { index, .. } => format!("insert {index}"),
                Change::ListRemove { indexes, .. } => format!("remove {indexes:?}"),
                Change::Put { .. } => "put".into(),
                Change::Del { .. } => "del".into(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn in_place_edits_journal_elements() {
        let (mut c, j) = durable();
        c.line("RPUSH l a b c d e");
        assert_eq!(kinds(&j), ["put"], "a new list is stored whole");
        c.line("LPUSH l x y");
        c.line("RPUSH l z");
        assert_eq!(kinds(&j), ["push true 2", "push false 1"]);
        c.line("LPOP l 2");
        c.line("RPOP l");
        c.line("LPOP l 0");
        assert_eq!(kinds(&j), ["pop true 2", "pop false 1"]);
        c.line("LSET l -1 E");
        c.line("LINSERT l BEFORE a first");
        c.line("LINSERT l AFTER E last");
        c.line("LINSERT l AFTER b mid");
        c.line("LINSERT l AFTER nope x");
        assert_eq!(
            kinds(&j),
            ["set 4", "push true 1", "push false 1", "insert 3"]
        );
        c.line("LREM l 1 mid");
        c.line("LREM l 1 nope");
        c.line("LTRIM l 1 -2");
        assert_eq!(kinds(&j), ["remove [3]", "pop true 1", "pop false 1"]);
        c.line("RPUSH r x a x b x");
        c.line("LREM r -2 x");
        c.line("LREM r 0 x");
        c.line("RPUSH r2 x x");
        c.line("LREM r2 0 x");
        assert_eq!(
            kinds(&j),
            ["put", "remove [2, 4]", "remove [0]", "put", "del"],
            "LREM from the tail; an emptied list is deleted"
        );
        c.line("LMOVE l l LEFT RIGHT");
        c.line("LMOVE l m RIGHT LEFT");
        c.line("LMOVE l m RIGHT LEFT");
        assert_eq!(
            kinds(&j),
            [
                "pop true 1",
                "push false 1",
                "pop false 1",
                "put",
                "pop false 1",
                "push true 1"
            ]
        );
        c.line("LMPOP 1 m LEFT COUNT 5");
        assert_eq!(kinds(&j), ["del"], "an emptied list is deleted");
        c.line("BLPOP l 0");
        assert_eq!(kinds(&j), ["pop true 1"]);
    }

    #[test]
    fn transaction_records_whole_state_before_element_edits() {
        let (mut c, j) = durable();
        c.line("MULTI");
        c.line("RPUSH n 1");
        c.line("RPUSH n 2");
        c.line("LPOP n");
        c.line("EXEC");
        // The state after the first push, then the edits made on top of it.
        let (changes, _) = j.take(Duration::ZERO);
        match &changes[..] {
            [Change::Put { value, .. }, Change::ListPush { values, .. }, Change::ListPop { .. }] => {
                assert_eq!(
                    format!("{value:?}").matches("b\"1\"").count(),
                    1,
                    "{value:?}"
                );
                assert_eq!(values.len(), 1);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn memory_engine_journals_nothing() {
        let mut c = Client::new();
        c.line("RPUSH l a b");
        c.line("LPUSH l z");
        assert!(c.srv.ks.journal().is_none());
    }
}
