//! Stored values. Keys and values are bytes, never `String`.

use bytes::{Bytes, BytesMut};

/// A string value. Integers are kept as integers (Redis's `int` encoding) so `INCR` works in
/// place; `raw` marks strings Redis would report as `raw` rather than `embstr`.
#[derive(Debug, Clone, PartialEq)]
pub enum StrVal {
    Int(i64),
    Bytes { data: Bytes, raw: bool },
}

/// Longest string Redis keeps as `embstr`.
const EMBSTR_MAX: usize = 44;

impl StrVal {
    /// Builds a value the way `SET` stores it: integer-encoded when it round-trips.
    pub fn from_set(data: Bytes) -> StrVal {
        if data.len() <= 20 {
            if let Some(i) = crate::num::parse_i64(&data) {
                return StrVal::Int(i);
            }
        }
        let raw = data.len() > EMBSTR_MAX;
        StrVal::Bytes { data, raw }
    }

    /// A value produced by in-place edits (`APPEND`, `SETRANGE`): always `raw`.
    pub fn raw(data: Bytes) -> StrVal {
        StrVal::Bytes { data, raw: true }
    }

    pub fn to_bytes(&self) -> Bytes {
        match self {
            StrVal::Int(i) => Bytes::copy_from_slice(itoa::Buffer::new().format(*i).as_bytes()),
            StrVal::Bytes { data, .. } => data.clone(),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            StrVal::Int(i) => itoa::Buffer::new().format(*i).len(),
            StrVal::Bytes { data, .. } => data.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            StrVal::Int(_) => "int",
            StrVal::Bytes { raw: true, .. } => "raw",
            StrVal::Bytes { .. } => "embstr",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(StrVal),
    List(crate::types::list::List),
    Hash(crate::types::hash::HashValue),
    Set(crate::types::set::SetValue),
    ZSet(Box<crate::types::zset::ZSet>),
    Stream(Box<crate::types::stream::Stream>),
}

impl Value {
    /// Types blocked clients wait for (BLPOP & co. on lists, BZPOP* on sorted sets): storing
    /// one under a key marks the key ready.
    pub fn wakes_waiters(&self) -> bool {
        matches!(self, Value::List(_) | Value::ZSet(_) | Value::Stream(_))
    }

    /// Deleting or replacing a stream wakes its blocked XREADGROUP clients (with an error).
    pub fn is_stream(&self) -> bool {
        matches!(self, Value::Stream(_))
    }

    /// The name `TYPE` reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::List(_) => "list",
            Value::Hash(_) => "hash",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Str(s) => s.encoding(),
            Value::List(l) => l.encoding(),
            Value::Hash(h) => h.encoding(),
            Value::Set(s) => s.encoding(),
            Value::ZSet(z) => z.encoding(),
            Value::Stream(_) => "stream",
        }
    }

    /// Rough heap footprint, for `used_memory` accounting.
    pub fn approx_size(&self) -> usize {
        match self {
            Value::Str(StrVal::Int(_)) => 8,
            Value::Str(StrVal::Bytes { data, .. }) => data.len(),
            Value::List(l) => l.approx_size(),
            Value::Hash(h) => h.approx_size(),
            Value::Set(s) => s.approx_size(),
            // Per element: the map entry, the tree item and the member's buffer header.
            Value::ZSet(z) => z.member_bytes() + z.len() * 112,
            Value::Stream(s) => s.approx_size(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub value: Value,
    /// Absolute deadline in Unix milliseconds; maintained only through `Shard`, which keeps
    /// the expiry index in step.
    pub(crate) expire_at: Option<u64>,
    /// Last access (Unix ms), for `OBJECT IDLETIME`.
    pub lru_ms: u64,
}

impl Entry {
    pub fn expire_at(&self) -> Option<u64> {
        self.expire_at
    }

    /// Logically expired: Redis's rule is `now > deadline`.
    #[inline]
    pub fn is_expired(&self, now: u64) -> bool {
        self.expire_at.is_some_and(|t| now > t)
    }
}

impl StrVal {
    /// A value built from text a command produced (`INCRBYFLOAT`): never integer-encoded,
    /// `embstr` or `raw` by length, as Redis's `createStringObject`.
    pub fn text(data: Bytes) -> StrVal {
        let raw = data.len() > EMBSTR_MAX;
        StrVal::Bytes { data, raw }
    }
}

impl StrVal {
    /// Takes the string's bytes for in-place editing (APPEND, SETRANGE, SETBIT, BITFIELD):
    /// no copy when the buffer is not shared, so repeated edits stay amortised O(1) like
    /// Redis's sds. Leaves `Int(0)` behind; the caller stores the edited bytes back.
    pub fn take_mut(&mut self) -> BytesMut {
        match std::mem::replace(self, StrVal::Int(0)) {
            StrVal::Int(i) => BytesMut::from(itoa::Buffer::new().format(i).as_bytes()),
            StrVal::Bytes { data, .. } => data
                .try_into_mut()
                .unwrap_or_else(|shared| BytesMut::from(&shared[..])),
        }
    }
}

/// Makes room for `need` bytes the way sds does (`sdsMakeRoomFor`): double while small, then
/// 1 MB of headroom at most, so a huge string never reserves as much again.
pub fn sds_reserve(buf: &mut BytesMut, need: usize) {
    const MAX_PREALLOC: usize = 1 << 20;
    if buf.capacity() >= need {
        return;
    }
    if need < MAX_PREALLOC {
        buf.reserve(need * 2 - buf.len());
    } else {
        let mut grown = BytesMut::with_capacity(need + MAX_PREALLOC);
        grown.extend_from_slice(buf);
        *buf = grown;
    }
}
