//! Stored values. Keys and values are bytes, never `String`.
//!
//! Layout matters here: a key's [`Entry`] lives inline in its shard's slot array
//! (`engine::shard`), so `Value` is kept at 32 bytes (string bytes in one exact-size
//! allocation, collections boxed) and `Entry` at 48.

use bytes::Bytes;

/// A string value. Integers are kept as integers (Redis's `int` encoding) so `INCR` works in
/// place; `raw` marks strings Redis would report as `raw` rather than `embstr`.
///
/// The bytes are an owned `Vec`, not a `Bytes`: no shared header to allocate, and a value
/// never pins the read buffer it was parsed from. Values built by `SET` are exact-size;
/// in-place edits keep their spare capacity (see [`sds_reserve`]).
#[derive(Debug, Clone, PartialEq)]
pub enum StrVal {
    Int(i64),
    Bytes { data: Vec<u8>, raw: bool },
}

/// Longest string Redis keeps as `embstr`.
const EMBSTR_MAX: usize = 44;

/// The bytes of a fresh value, exact-size: a `Bytes` sliced from a larger buffer is copied
/// rather than reused with its whole capacity.
fn exact(data: Bytes) -> Vec<u8> {
    let mut v = Vec::from(data);
    v.shrink_to_fit();
    v
}

impl StrVal {
    /// Builds a value the way `SET` stores it: integer-encoded when it round-trips.
    pub fn from_set(data: Bytes) -> StrVal {
        StrVal::from_set_slice(&data)
    }

    /// As [`StrVal::from_set`], copying `data` (one exact-size allocation, none for
    /// integers).
    pub fn from_set_slice(data: &[u8]) -> StrVal {
        if data.len() <= 20 {
            if let Some(i) = crate::num::parse_i64(data) {
                return StrVal::Int(i);
            }
        }
        let raw = data.len() > EMBSTR_MAX;
        StrVal::Bytes {
            data: data.to_vec(),
            raw,
        }
    }

    /// A value produced by in-place edits (`APPEND`, `SETRANGE`): always `raw`.
    pub fn raw(data: Bytes) -> StrVal {
        StrVal::Bytes {
            data: Vec::from(data),
            raw: true,
        }
    }

    /// As [`StrVal::raw`], keeping `data`'s spare capacity for the next edit.
    pub fn raw_vec(data: Vec<u8>) -> StrVal {
        StrVal::Bytes { data, raw: true }
    }

    /// The value as a reply's bytes (a copy: the stored bytes stay owned by the keyspace).
    pub fn to_bytes(&self) -> Bytes {
        match self {
            StrVal::Int(i) => Bytes::copy_from_slice(itoa::Buffer::new().format(*i).as_bytes()),
            StrVal::Bytes { data, .. } => Bytes::copy_from_slice(data),
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
    // Boxed, as the sorted set and the stream: keeps `Value` (and every key's slot) small.
    List(Box<crate::types::list::List>),
    Hash(Box<crate::types::hash::HashValue>),
    Set(Box<crate::types::set::SetValue>),
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

/// No deadline, in [`Entry`]'s packed field (deadlines come from `i64` milliseconds).
const NO_DEADLINE: u64 = u64::MAX;

#[derive(Debug, Clone)]
pub struct Entry {
    pub value: Value,
    /// Absolute deadline in Unix milliseconds, `NO_DEADLINE` for none; maintained only
    /// through `Shard`, which keeps the expiry index in step.
    deadline: u64,
    /// Last access in Unix seconds, for `OBJECT IDLETIME` (Redis's LRU clock has seconds'
    /// resolution too; u32 seconds last until 2106).
    lru_s: u32,
}

impl Entry {
    pub fn new(value: Value, expire_at: Option<u64>, now_ms: u64) -> Entry {
        Entry {
            value,
            deadline: pack_deadline(expire_at),
            lru_s: secs(now_ms),
        }
    }

    #[inline]
    pub fn expire_at(&self) -> Option<u64> {
        (self.deadline != NO_DEADLINE).then_some(self.deadline)
    }

    /// Only `Shard` may move a deadline (its expiry index must follow).
    #[inline]
    pub(crate) fn set_expire_at(&mut self, at: Option<u64>) {
        self.deadline = pack_deadline(at);
    }

    /// Logically expired: Redis's rule is `now > deadline`.
    #[inline]
    pub fn is_expired(&self, now: u64) -> bool {
        self.deadline != NO_DEADLINE && now > self.deadline
    }

    /// Last access in Unix milliseconds, at whole-second resolution.
    #[inline]
    pub fn lru_ms(&self) -> u64 {
        u64::from(self.lru_s) * 1000
    }

    /// Records an access at `now_ms`.
    #[inline]
    pub fn touch(&mut self, now_ms: u64) {
        self.lru_s = secs(now_ms);
    }
}

#[inline]
fn pack_deadline(at: Option<u64>) -> u64 {
    // `u64::MAX` cannot come from a command (deadlines are i64 ms); clamp it to stay a
    // deadline rather than become "none".
    at.map_or(NO_DEADLINE, |t| t.min(NO_DEADLINE - 1))
}

#[inline]
fn secs(ms: u64) -> u32 {
    u32::try_from(ms / 1000).unwrap_or(u32::MAX)
}

// The slot array's footprint depends on these; grow them only with a measurement.
const _: () = assert!(std::mem::size_of::<Value>() <= 32);
const _: () = assert!(std::mem::size_of::<Entry>() <= 48);

impl StrVal {
    /// A value built from text a command produced (`INCRBYFLOAT`): never integer-encoded,
    /// `embstr` or `raw` by length, as Redis's `createStringObject`.
    pub fn text(data: Bytes) -> StrVal {
        let raw = data.len() > EMBSTR_MAX;
        StrVal::Bytes {
            data: exact(data),
            raw,
        }
    }
}

impl StrVal {
    /// Takes the string's bytes for in-place editing (APPEND, SETRANGE, SETBIT, BITFIELD):
    /// no copy, spare capacity kept, so repeated edits stay amortised O(1) like Redis's sds.
    /// Leaves `Int(0)` behind; the caller stores the edited bytes back (`raw_vec`).
    pub fn take_mut(&mut self) -> Vec<u8> {
        match std::mem::replace(self, StrVal::Int(0)) {
            StrVal::Int(i) => itoa::Buffer::new().format(i).as_bytes().to_vec(),
            StrVal::Bytes { data, .. } => data,
        }
    }
}

/// Makes room for `need` bytes the way sds does (`sdsMakeRoomFor`): double while small, then
/// 1 MB of headroom at most, so a huge string never reserves as much again.
pub fn sds_reserve(buf: &mut Vec<u8>, need: usize) {
    const MAX_PREALLOC: usize = 1 << 20;
    if buf.capacity() >= need {
        return;
    }
    if need < MAX_PREALLOC {
        buf.reserve_exact(need * 2 - buf.len());
    } else {
        buf.reserve_exact(need + MAX_PREALLOC - buf.len());
    }
}
