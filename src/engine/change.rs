//! Element-level mutations, in respite's vocabulary. Each costs O(log n) rows in the size of
//! the collection it touches, except `Put`, `Del`, `ListRewrite`, `XGroupDel` and `FlushDb`
//! (O(size)), `FlushAll` (O(pages)) and `Functions` (O(libraries)).
//!
//! Collection changes on a key that does not exist create it (no expiry); on a key of
//! another type they replace it. Emptying a collection does not delete the key: emit `Del`
//! (empty collections are skipped on load anyway).

use crate::types::value::{StrVal, Value};
use bytes::Bytes;

/// A stream entry ID (ms, seq).
pub type Id = (u64, u64);

#[derive(Debug, Clone)]
pub enum Change {
    /// A whole key, new or replaced: writes its header and every element.
    Put {
        db: usize,
        key: Bytes,
        value: Box<Value>,
        expire_at: Option<u64>,
    },
    Del {
        db: usize,
        key: Bytes,
    },
    /// Sets or clears a key's deadline (absolute Unix ms).
    Expire {
        db: usize,
        key: Bytes,
        at: Option<u64>,
    },
    /// A string value with its deadline (callers pass the old deadline for KEEPTTL).
    StrSet {
        db: usize,
        key: Bytes,
        value: StrVal,
        expire_at: Option<u64>,
    },
    HashPut {
        db: usize,
        key: Bytes,
        pairs: Vec<(Bytes, Bytes)>,
    },
    HashDel {
        db: usize,
        key: Bytes,
        fields: Vec<Bytes>,
    },
    /// Sets (`Some`, absolute Unix ms) or clears the deadlines of existing hash fields
    /// (hash-field expiration); a field that is not there is skipped. A `HashPut` of a
    /// field clears its deadline, so commands that keep one (HINCRBY) follow it with this.
    HashTtl {
        db: usize,
        key: Bytes,
        fields: Vec<(Bytes, Option<u64>)>,
    },
    SetAdd {
        db: usize,
        key: Bytes,
        members: Vec<Bytes>,
    },
    SetRem {
        db: usize,
        key: Bytes,
        members: Vec<Bytes>,
    },
    /// Adds or rescores members.
    ZPut {
        db: usize,
        key: Bytes,
        members: Vec<(Bytes, f64)>,
    },
    ZDel {
        db: usize,
        key: Bytes,
        members: Vec<Bytes>,
    },
    /// Pushes `values` one by one at the head (`front`) or the tail, as LPUSH/RPUSH do:
    /// `ListPush{front: true, values: [a, b]}` leaves `b a ...`.
    ListPush {
        db: usize,
        key: Bytes,
        front: bool,
        values: Vec<Bytes>,
    },
    ListPop {
        db: usize,
        key: Bytes,
        front: bool,
        n: usize,
    },
    /// LSET: replaces the element at 0-based `index` (one row).
    ListSet {
        db: usize,
        key: Bytes,
        index: u64,
        value: Bytes,
    },
    /// LINSERT in the middle: `value` becomes the element at 0-based `index`, the elements
    /// from there on moving one place towards the tail. O(min(index, len - index)) rows.
    ListInsert {
        db: usize,
        key: Bytes,
        index: u64,
        value: Bytes,
    },
    /// LREM: the elements at these 0-based indexes (ascending) go. O(rows moved).
    ListRemove {
        db: usize,
        key: Bytes,
        indexes: Vec<u64>,
    },
    /// APPEND, SETRANGE, SETBIT, BITFIELD on an existing string: `bytes` overwrite it from
    /// `offset` on; a shorter string is first zero-filled up to `offset`. The deadline
    /// stays. Idempotent.
    StrPatch {
        db: usize,
        key: Bytes,
        offset: u64,
        bytes: Bytes,
    },
    /// A list's whole new content (written by builds before `ListInsert` and `ListRemove`;
    /// still read from their logs).
    ListRewrite {
        db: usize,
        key: Bytes,
        values: Vec<Bytes>,
    },
    /// Appends one entry; `fields` is `f1 v1 f2 v2 ...`. Stream counters come with `XMeta`.
    XAdd {
        db: usize,
        key: Bytes,
        id: Id,
        fields: Vec<Bytes>,
    },
    XDel {
        db: usize,
        key: Bytes,
        ids: Vec<Id>,
    },
    /// The stream's counters after a command (XADD, XDEL, XTRIM, XSETID).
    XMeta {
        db: usize,
        key: Bytes,
        last_id: Id,
        entries_added: u64,
        max_deleted: Id,
        first_id: Id,
    },
    /// Creates or updates a group (last delivered ID, read counter).
    XGroupPut {
        db: usize,
        key: Bytes,
        group: Bytes,
        last_id: Id,
        entries_read: i64,
    },
    /// Destroys a group with its PEL and consumers.
    XGroupDel {
        db: usize,
        key: Bytes,
        group: Bytes,
    },
    XPelPut {
        db: usize,
        key: Bytes,
        group: Bytes,
        id: Id,
        consumer: Bytes,
        delivery_time: i64,
        delivery_count: u64,
    },
    XPelDel {
        db: usize,
        key: Bytes,
        group: Bytes,
        id: Id,
    },
    XConsumerPut {
        db: usize,
        key: Bytes,
        group: Bytes,
        consumer: Bytes,
        seen_time: i64,
        active_time: i64,
    },
    /// Deletes the consumer row only: emit `XPelDel` for the entries it owned.
    XConsumerDel {
        db: usize,
        key: Bytes,
        group: Bytes,
        consumer: Bytes,
    },
    FlushDb {
        db: usize,
    },
    FlushAll,
    SwapDb {
        a: usize,
        b: usize,
    },
    /// The server's FUNCTION libraries after FUNCTION LOAD / DELETE / FLUSH / RESTORE: every
    /// library's code, the whole set (libraries are few and small; Redis's RDB and AOF keep
    /// them whole too). Not a keyspace change: FLUSHALL leaves libraries alone.
    Functions {
        codes: Vec<Bytes>,
    },
}

impl Change {
    /// The key a change is about (`None` for the whole-database ones).
    pub fn target(&self) -> Option<(usize, &[u8])> {
        use Change::*;
        match self {
            Put { db, key, .. }
            | Del { db, key }
            | Expire { db, key, .. }
            | StrSet { db, key, .. }
            | HashPut { db, key, .. }
            | HashDel { db, key, .. }
            | HashTtl { db, key, .. }
            | SetAdd { db, key, .. }
            | SetRem { db, key, .. }
            | ZPut { db, key, .. }
            | ZDel { db, key, .. }
            | ListPush { db, key, .. }
            | ListPop { db, key, .. }
            | ListSet { db, key, .. }
            | ListRewrite { db, key, .. }
            | ListInsert { db, key, .. }
            | ListRemove { db, key, .. }
            | StrPatch { db, key, .. }
            | XAdd { db, key, .. }
            | XDel { db, key, .. }
            | XMeta { db, key, .. }
            | XGroupPut { db, key, .. }
            | XGroupDel { db, key, .. }
            | XPelPut { db, key, .. }
            | XPelDel { db, key, .. }
            | XConsumerPut { db, key, .. }
            | XConsumerDel { db, key, .. } => Some((*db, key)),
            FlushDb { .. } | FlushAll | SwapDb { .. } | Functions { .. } => None,
        }
    }
}
