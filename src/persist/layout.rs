//! On-disk layout of `respite.redb`. Everything here is part of the file format: changing
//! any constant, table name or byte layout needs a new [`FORMAT_VERSION`].
//!
//! Tables (all keys compare element-wise; `&[u8]` compares bytewise):
//! - `meta: &str -> u64` — `"format_version"` (= [`FORMAT_VERSION`]), `"next_ns"` (the next
//!   fresh namespace, starting at [`FIRST_FRESH_NS`]) and `"wal_applied"` (the last record of
//!   the write-ahead log, `<dir>/wal/`, that the tables hold: see `persist::wal`; version 2).
//!
//! Version history: 1 — tables only, every commit straight to redb; 2 — adds the write-ahead
//! log and `wal_applied`; 3 — the same tables and rows in a redb 3+ file (redb file format 3,
//! redb 3's encoding of the tuple keys). Versions 1 and 2 are redb 2 files: on open they are
//! copied into a version-3 file (`persist::upgrade`), which builds before version 3 refuse;
//! 4 — a hash element row may carry its field's deadline (hash-field expiration, below). A
//! version-3 file is a version-4 file without such rows: it is relabelled 4 on open (builds
//! that know only 3 then refuse it rather than misread a deadline as part of a value).
//! 5 — adds the `functions` table (FUNCTION libraries) and chunked strings (string
//! encoding 3, below), and the log's changes 28-31. A version-3 or 4 file is a version-5
//! file without them: it opens as one and is relabelled 5 at once, so a build that would
//! drop the libraries or misread a chunked string refuses it from then on.
//! - `dbs: u32 -> u32` — logical db → namespace. A db with no row uses namespace = db index.
//!   SWAPDB swaps two rows (O(1)); FLUSHDB points the db at a fresh namespace and deletes the
//!   old namespace's rows in the same transaction (O(rows of that db)).
//! - `keys: (ns u32, key &[u8]) -> &[u8]` — one row per key:
//!   `[type tag u8][expire_at_ms u64 BE, 0 = none][per-type header]`, headers:
//!   - string: `[encoding u8: 0 int, 1 embstr, 2 raw][bytes]` (the value lives in the row),
//!     or `[3 chunked][length u64 BE]` (version 5), its bytes in `elems` rows: a string an
//!     in-place edit (APPEND, SETRANGE, SETBIT, BITFIELD) left longer than [`STR_CHUNK`],
//!     so that the next edits rewrite the chunks they touch, not the whole string;
//!   - list: `[head seq i64 BE][tail seq i64 BE]` — elements occupy `head..tail`;
//!   - hash, set: `[next insertion seq u64 BE]`;
//!   - zset: empty;
//!   - stream: `[last id 16][first id 16][max deleted id 16][entries added u64 BE]`.
//! - `elems: (ns u32, key &[u8], sub &[u8]) -> &[u8]` — one row per element:
//!   - chunked string: sub = chunk number (u64 BE), value = bytes `n * STR_CHUNK ..` of the
//!     string, [`STR_CHUNK`] of them in every chunk but the last;
//!   - hash: sub = field, value = `[insertion seq u64 BE][value]`, or for a field with a
//!     deadline (version 4) `[insertion seq | 1 << 63, u64 BE][deadline ms u64 BE][value]`;
//!   - set: sub = member, value = `[insertion seq u64 BE]`;
//!   - zset: sub = member, value = score as `f64::to_bits` 8 bytes BE (keeps -0.0, ±inf);
//!   - list: sub = [`list_sub`] of the element's sequence number (order-preserving), value =
//!     the element; pushes take `head - 1` / `tail`, so push/pop at either end is one row and
//!     the element at index i is at `head + i`;
//!   - stream: sub = `'e'` + ID (16 bytes BE) → [`encode_fields`] of the field/value list;
//!     `'g'` + group name → `[last delivered id 16][entries read i64 BE]`;
//!     `'p'` + [`group_prefix`] + ID → `[delivery time i64 BE][delivery count u64 BE]
//!     [consumer name]`; `'c'` + [`group_prefix`] + consumer name → `[seen time i64 BE]
//!     [active time i64 BE]`.
//! - `functions: u64 -> &[u8]` — FUNCTION libraries (version 5): row i holds one library's
//!   whole code (its `#!lua name=...` line included), rows `0..n` with no gap. The set is
//!   rewritten whole by every FUNCTION LOAD / DELETE / FLUSH / RESTORE (as Redis's RDB keeps
//!   them); FLUSHALL and FLUSHDB leave it alone. A missing table means no libraries.
//! - `access: (db u32, key &[u8]) -> u64` — each key's LRU idle seconds or LFU counter at the
//!   last clean shutdown, SAVE or DEBUG RELOAD under an LRU or LFU policy, as Redis's RDB
//!   keeps `IDLE`/`FREQ` (`persist::access`): `[kind u32][value u32]` packed high to low, kind
//!   1 = idle seconds, 2 = LFU counter. Replaced whole on each save; optional (a file without
//!   it, or a key without a row, loads with fresh access data), so it needs no new version.

use redb::TableDefinition;

/// Version of this layout. Bump it for any incompatible change; files with another version
/// are refused (after `persist::upgrade` has copied a version 1 or 2 file to this one).
pub const FORMAT_VERSION: u64 = 5;

/// Earlier versions whose files this one opens as they are, relabelled (see the history
/// above): 3 (no field deadlines, libraries or chunked strings) and 4 (no libraries or
/// chunked strings).
pub const COMPATIBLE_VERSIONS: [u64; 2] = [3, 4];

/// The top bit of a hash row's sequence number: a field deadline follows it.
const HASH_TTL_FLAG: u64 = 1 << 63;

/// A hash element row: insertion sequence number, optional field deadline, value.
pub fn hash_row(seq: u64, ttl: Option<u64>, value: &[u8]) -> Vec<u8> {
    let mut row = Vec::with_capacity(16 + value.len());
    match ttl {
        None => row.extend_from_slice(&seq.to_be_bytes()),
        Some(t) => {
            row.extend_from_slice(&(seq | HASH_TTL_FLAG).to_be_bytes());
            row.extend_from_slice(&t.to_be_bytes());
        }
    }
    row.extend_from_slice(value);
    row
}

/// Splits a hash element row into (sequence number, deadline, value).
pub fn split_hash_row(row: &[u8]) -> Option<(u64, Option<u64>, &[u8])> {
    let seq = read_u64(row)?;
    if seq & HASH_TTL_FLAG == 0 {
        return Some((seq, None, &row[8..]));
    }
    let t = read_u64(&row[8..])?;
    Some((seq & !HASH_TTL_FLAG, Some(t), &row[16..]))
}

/// Namespaces below this are the implicit "namespace = db index" ones.
pub const FIRST_FRESH_NS: u32 = 1 << 20;

/// Table names (also `persist::upgrade`'s, which reads them with redb 2).
pub(super) mod table {
    pub const META: &str = "meta";
    pub const DBS: &str = "dbs";
    pub const KEYS: &str = "keys";
    pub const ELEMS: &str = "elems";
    pub const FUNCTIONS: &str = "functions";
    pub const ACCESS: &str = "access";
}

pub(super) const META: TableDefinition<&str, u64> = TableDefinition::new(table::META);
pub(super) const DBS: TableDefinition<u32, u32> = TableDefinition::new(table::DBS);
pub(super) const KEYS: TableDefinition<(u32, &[u8]), &[u8]> = TableDefinition::new(table::KEYS);
/// (namespace, key, sub-key).
pub(super) type ElemKey = (u32, &'static [u8], &'static [u8]);
pub(super) const ELEMS: TableDefinition<ElemKey, &[u8]> = TableDefinition::new(table::ELEMS);
pub(super) const FUNCTIONS: TableDefinition<u64, &[u8]> = TableDefinition::new(table::FUNCTIONS);

pub(super) const ACCESS: TableDefinition<(u32, &[u8]), u64> = TableDefinition::new(table::ACCESS);

pub(super) const META_VERSION: &str = "format_version";
pub(super) const META_NEXT_NS: &str = "next_ns";
/// The last write-ahead log record the tables hold (version 2; absent = 0).
pub(super) const META_WAL_APPLIED: &str = "wal_applied";

/// Stable type tags. APPEND-ONLY: never renumber or reuse a value.
pub mod tag {
    pub const STRING: u8 = 1;
    pub const LIST: u8 = 2;
    pub const HASH: u8 = 3;
    pub const SET: u8 = 4;
    pub const ZSET: u8 = 5;
    pub const STREAM: u8 = 6;
}

/// String encodings inside a string row. APPEND-ONLY.
pub mod str_enc {
    pub const INT: u8 = 0;
    pub const EMBSTR: u8 = 1;
    pub const RAW: u8 = 2;
    /// Version 5: the bytes are in `elems` rows (see the layout above).
    pub const CHUNKED: u8 = 3;
}

/// Bytes per chunk of a chunked string; an edited string longer than this is chunked.
pub const STR_CHUNK: usize = 4096;

/// Whether a key row's key has `elems` rows (collections and chunked strings): what
/// deleting or replacing the key must wipe.
pub fn owns_elems(row: &[u8]) -> bool {
    row.first() != Some(&tag::STRING) || row.get(KEY_FIXED) == Some(&str_enc::CHUNKED)
}

/// Stream sub-key kinds. APPEND-ONLY.
pub mod xsub {
    pub const CONSUMER: u8 = b'c';
    pub const ENTRY: u8 = b'e';
    pub const GROUP: u8 = b'g';
    pub const PEL: u8 = b'p';
}

/// Size of the fixed part of a key row (tag + expiry).
pub const KEY_FIXED: usize = 9;
/// Size of a stream header.
pub const STREAM_HEADER: usize = 56;

/// A key row: tag, expiry and per-type header.
pub fn key_row(tag: u8, expire_at: Option<u64>, header: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(KEY_FIXED + header.len());
    key_row_start(tag, expire_at, &mut v);
    v.extend_from_slice(header);
    v
}

/// The fixed part of a key row (the header is appended after it), into `out`.
pub fn key_row_start(tag: u8, expire_at: Option<u64>, out: &mut Vec<u8>) {
    out.push(tag);
    out.extend_from_slice(&expire_at.unwrap_or(0).to_be_bytes());
}

/// Splits a key row into (tag, expiry, header); `None` if too short.
pub fn split_key_row(row: &[u8]) -> Option<(u8, Option<u64>, &[u8])> {
    if row.len() < KEY_FIXED {
        return None;
    }
    let at = u64::from_be_bytes(row[1..9].try_into().ok()?);
    Some((row[0], (at != 0).then_some(at), &row[KEY_FIXED..]))
}

/// Order-preserving encoding of a list sequence number.
pub fn list_sub(seq: i64) -> [u8; 8] {
    ((seq as u64) ^ (1 << 63)).to_be_bytes()
}

pub fn id_bytes(id: (u64, u64)) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&id.0.to_be_bytes());
    b[8..].copy_from_slice(&id.1.to_be_bytes());
    b
}

pub fn read_id(b: &[u8]) -> Option<(u64, u64)> {
    Some((read_u64(b.get(..8)?)?, read_u64(b.get(8..16)?)?))
}

pub fn read_u64(b: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(..8)?.try_into().ok()?))
}

pub fn read_i64(b: &[u8]) -> Option<i64> {
    read_u64(b).map(|v| v as i64)
}

/// `[len u32 BE][group]`: keeps one group's PEL/consumer rows contiguous whatever bytes
/// group names contain.
pub fn group_prefix(kind: u8, group: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(5 + group.len() + 16);
    v.push(kind);
    v.extend_from_slice(&(group.len() as u32).to_be_bytes());
    v.extend_from_slice(group);
    v
}

/// Splits a `'p'`/`'c'` sub-key after its kind byte into (group, rest).
pub fn split_group(rest: &[u8]) -> Option<(&[u8], &[u8])> {
    let n = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let g = rest.get(4..4 + n)?;
    Some((g, &rest[4 + n..]))
}

/// A field/value list as `[count u32 BE]` then `[len u32 BE][bytes]` per item.
pub fn encode_fields(fields: &[bytes::Bytes]) -> Vec<u8> {
    let total: usize = fields.iter().map(|f| f.len() + 4).sum();
    let mut v = Vec::with_capacity(4 + total);
    v.extend_from_slice(&(fields.len() as u32).to_be_bytes());
    for f in fields {
        v.extend_from_slice(&(f.len() as u32).to_be_bytes());
        v.extend_from_slice(f);
    }
    v
}

pub fn decode_fields(b: &[u8]) -> Option<Vec<bytes::Bytes>> {
    let n = u32::from_be_bytes(b.get(..4)?.try_into().ok()?) as usize;
    let mut out = Vec::with_capacity(n.min(b.len() / 4));
    let mut at = 4;
    for _ in 0..n {
        let len = u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize;
        at += 4;
        out.push(bytes::Bytes::copy_from_slice(b.get(at..at + len)?));
        at += len;
    }
    (at == b.len()).then_some(out)
}

/// The smallest byte string greater than every string starting with `prefix`, if any
/// (`None` when the prefix is all 0xff: then the range is open-ended).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut v = prefix.to_vec();
    while let Some(last) = v.pop() {
        if last < 0xff {
            v.push(last + 1);
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tags are written to disk: these values must never change.
    #[test]
    fn type_tags_are_pinned() {
        assert_eq!(
            [
                tag::STRING,
                tag::LIST,
                tag::HASH,
                tag::SET,
                tag::ZSET,
                tag::STREAM
            ],
            [1, 2, 3, 4, 5, 6]
        );
        assert_eq!(
            [
                str_enc::INT,
                str_enc::EMBSTR,
                str_enc::RAW,
                str_enc::CHUNKED
            ],
            [0, 1, 2, 3]
        );
        assert_eq!(STR_CHUNK, 4096);
        assert_eq!(
            [xsub::CONSUMER, xsub::ENTRY, xsub::GROUP, xsub::PEL],
            [b'c', b'e', b'g', b'p']
        );
        assert_eq!((FORMAT_VERSION, COMPATIBLE_VERSIONS), (5, [3, 4]));
        assert_eq!(table::FUNCTIONS, "functions");
    }

    #[test]
    fn hash_rows_with_and_without_deadlines() {
        let plain = hash_row(7, None, b"value");
        assert_eq!(plain, [&7u64.to_be_bytes()[..], b"value"].concat());
        assert_eq!(split_hash_row(&plain), Some((7, None, &b"value"[..])));
        let timed = hash_row(7, Some(1_700_000_000_000), b"value");
        assert_eq!(timed.len(), 16 + 5);
        assert_eq!(timed[0] & 0x80, 0x80);
        assert_eq!(
            split_hash_row(&timed),
            Some((7, Some(1_700_000_000_000), &b"value"[..]))
        );
        assert_eq!(split_hash_row(&timed[..12]), None);
        assert_eq!(split_hash_row(&[0; 7]), None);
    }

    #[test]
    fn list_subs_sort_like_numbers() {
        let seqs = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        for w in seqs.windows(2) {
            assert!(list_sub(w[0]) < list_sub(w[1]));
        }
    }

    #[test]
    fn fields_round_trip() {
        let f = vec![
            bytes::Bytes::from_static(b""),
            bytes::Bytes::from_static(b"\x00\xff"),
        ];
        assert_eq!(decode_fields(&encode_fields(&f)), Some(f));
        assert_eq!(decode_fields(&[0, 0, 0, 1]), None);
    }

    #[test]
    fn prefix_ends() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff"), None);
    }
}
