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
            // Per element, as measured (`used_memory` growth over a 632 k-member ZADD fill,
            // 125 B with ~20 B members): the map slot (32 B at ~1.2x) and the tree item
            // (40 B at ~70% leaf fill), plus the member buffer's allocation overhead.
            Value::ZSet(z) => z.member_bytes() + z.len() * 100,
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
    /// Redis's `lru` field. Under LRU policies (the default): the last access in Unix
    /// seconds, for `OBJECT IDLETIME` and eviction (Redis's LRU clock has seconds'
    /// resolution too; u32 seconds last until 2106). Under LFU policies, Redis's 24-bit LFU
    /// layout: the last decrement time in minutes (16 bits, wrapping) << 8 | a logarithmic
    /// access counter (8 bits). Switching policies reinterprets the field, as in Redis.
    lru_s: u32,
}

/// The LFU counter of a new key (Redis `LFU_INIT_VAL`): new keys are not evicted at once.
pub const LFU_INIT_VAL: u8 = 5;

/// The LFU policy's parameters (`lfu-log-factor`, `lfu-decay-time` in minutes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lfu {
    pub log_factor: u32,
    pub decay_min: u32,
}

/// Redis `LFUGetTimeInMinutes`: Unix minutes, wrapping at 16 bits.
#[inline]
fn lfu_minutes(now_ms: u64) -> u32 {
    ((now_ms / 60_000) & 0xFFFF) as u32
}

/// Redis `LFULogIncr`: the higher the counter, the less likely an access increments it
/// (`r` uniform in [0, 1)). With log factor 0 every access counts.
pub fn lfu_log_incr(counter: u8, log_factor: u32, r: f64) -> u8 {
    if counter == u8::MAX {
        return counter;
    }
    let base = f64::from(counter.saturating_sub(LFU_INIT_VAL));
    let p = 1.0 / (base * f64::from(log_factor) + 1.0);
    if r < p {
        counter + 1
    } else {
        counter
    }
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

    /// Records an access at `now_ms` (LRU policies).
    #[inline]
    pub fn touch(&mut self, now_ms: u64) {
        self.lru_s = secs(now_ms);
    }

    /// The raw access field (see the field's note), for eviction scores and copies.
    #[inline]
    pub fn lru_raw(&self) -> u32 {
        self.lru_s
    }

    #[inline]
    pub fn set_lru_raw(&mut self, raw: u32) {
        self.lru_s = raw;
    }

    /// Seconds since the last access (LRU policies), at least 0.
    #[inline]
    pub fn idle_secs(&self, now_ms: u64) -> u64 {
        (now_ms / 1000).saturating_sub(u64::from(self.lru_s))
    }

    /// Starts the key's LFU data as Redis's `createObject` does under an LFU policy.
    #[inline]
    pub fn lfu_init(&mut self, now_ms: u64, counter: u8) {
        self.lru_s = (lfu_minutes(now_ms) << 8) | u32::from(counter);
    }

    /// Redis `LFUDecrAndReturn`: the counter less one per `decay_min` minutes since the
    /// field's time (not stored: a read leaves the key as it is).
    pub fn lfu_counter(&self, now_ms: u64, decay_min: u32) -> u8 {
        let ldt = (self.lru_s >> 8) & 0xFFFF;
        let counter = (self.lru_s & 0xFF) as u8;
        let now = lfu_minutes(now_ms);
        // Redis `LFUTimeElapsed`: the 16-bit minute clock wraps.
        let elapsed = if now >= ldt {
            now - ldt
        } else {
            65535 - ldt + now
        };
        if decay_min == 0 {
            return counter;
        }
        let periods = elapsed / decay_min;
        counter.saturating_sub(u8::try_from(periods).unwrap_or(u8::MAX))
    }

    /// Records an access under an LFU policy (Redis `updateLFU`): decay, then a
    /// logarithmic increment drawn with `r` (uniform in [0, 1)).
    #[inline]
    pub fn touch_lfu(&mut self, now_ms: u64, lfu: Lfu, r: f64) {
        let c = lfu_log_incr(self.lfu_counter(now_ms, lfu.decay_min), lfu.log_factor, r);
        self.lfu_init(now_ms, c);
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

#[cfg(test)]
mod lfu_tests {
    use super::*;

    fn entry(now_ms: u64) -> Entry {
        Entry::new(Value::Str(StrVal::Int(1)), None, now_ms)
    }

    #[test]
    fn log_increment_as_redis() {
        // Below and at LFU_INIT_VAL every access counts; 255 saturates.
        assert_eq!(lfu_log_incr(0, 10, 0.999), 1);
        assert_eq!(lfu_log_incr(5, 10, 0.999), 6);
        assert_eq!(lfu_log_incr(255, 0, 0.0), 255);
        // At 15 with factor 10: p = 1 / (10 * 10 + 1).
        assert_eq!(lfu_log_incr(15, 10, 0.0098), 16);
        assert_eq!(lfu_log_incr(15, 10, 0.0100), 15);
        // Factor 0: always.
        assert_eq!(lfu_log_incr(200, 0, 0.999_999), 201);
    }

    #[test]
    fn counter_decays_per_period_and_wraps_the_minute_clock() {
        let t0 = 28_333_333 * 60_000u64; // on a minute boundary
        let mut e = entry(t0);
        e.lfu_init(t0, 20);
        assert_eq!(e.lfu_counter(t0, 1), 20);
        assert_eq!(e.lfu_counter(t0 + 59_999, 1), 20);
        assert_eq!(e.lfu_counter(t0 + 5 * 60_000, 1), 15);
        assert_eq!(e.lfu_counter(t0 + 5 * 60_000, 2), 18);
        assert_eq!(e.lfu_counter(t0 + 5 * 60_000, 0), 20);
        assert_eq!(e.lfu_counter(t0 + 500 * 60_000, 1), 0);
        // The 16-bit minute clock wraps (Redis LFUTimeElapsed: 65535 - ldt + now).
        let wrap_at = ((t0 / 60_000) | 0xFFFF) * 60_000;
        e.lfu_init(wrap_at, 10);
        assert_eq!(e.lfu_counter(wrap_at + 3 * 60_000, 1), 8);
        // An access decays first, then increments.
        let mut e = entry(t0);
        e.lfu_init(t0, 9);
        let lfu = Lfu {
            log_factor: 0,
            decay_min: 1,
        };
        e.touch_lfu(t0 + 4 * 60_000, lfu, 0.5);
        assert_eq!(e.lfu_counter(t0 + 4 * 60_000, 1), 6);
    }

    #[test]
    fn idle_seconds_from_the_lru_clock() {
        let e = entry(10_500);
        assert_eq!(e.idle_secs(10_999), 0);
        assert_eq!(e.idle_secs(15_000), 5);
        assert_eq!(e.idle_secs(0), 0);
    }
}
