//! Element-level journaling of in-place list edits (durable engine only: callers check
//! `Access::journaling` first, so the memory engine does no extra work).
//!
//! Pushes and pops are not idempotent, so they are recorded *before* the edit is made: if
//! the key was also written whole earlier in the same `Access` (MULTI/EXEC, a script),
//! `Access::elems` first records its state so far, which must not contain the edit yet.
//! `ListSet` and `ListRewrite` are idempotent and are recorded after the edit. Keys that
//! are created (`set`) or emptied (`remove`) go through the generic whole-key path.

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

/// After an edit in the middle (LINSERT, LREM): the list's whole new content.
pub(super) fn rewrite(ks: &mut Access<'_>, key: &[u8]) {
    let Some(values) = write_list(ks, key)
        .ok()
        .flatten()
        .map(|l| l.iter().cloned().collect::<Vec<Bytes>>())
    else {
        return;
    };
    let db = ks.db;
    ks.elems(Change::ListRewrite {
        db,
        key: Bytes::copy_from_slice(key),
        values,
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
