//! Bitmap commands (Redis `bitops.c`): SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD and
//! BITFIELD_RO. They work on string values; the pure bit logic lives in [`bits`].

mod bits;
mod field;

use super::args::is_cstr;
use super::errors;
use super::{CommandSpec, Cx, KeySpec};
use crate::engine::change::Change;
use crate::instance::notify;
use crate::num::parse_i64;
use crate::protocol::Reply;
use crate::types::value::sds_reserve;
use crate::types::value::{StrVal, Value};
use bits::BitOp;
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "setbit",
        arity: 4,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "bitmap", "slow"],
        group: "bitmap",
        since: "2.2.0",
        summary: "Sets or clears the bit at offset in the string value stored at key",
        complexity: "O(1)",
        handler: setbit,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "getbit",
        arity: 3,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "bitmap", "fast"],
        group: "bitmap",
        since: "2.2.0",
        summary: "Returns the bit value at offset in the string value stored at key",
        complexity: "O(1)",
        handler: getbit,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "bitcount",
        arity: -2,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "bitmap", "slow"],
        group: "bitmap",
        since: "2.6.0",
        summary: "Count set bits in a string",
        complexity: "O(N)",
        handler: bitcount,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "bitpos",
        arity: -3,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "bitmap", "slow"],
        group: "bitmap",
        since: "2.8.7",
        summary: "Find first bit set or clear in a string",
        complexity: "O(N)",
        handler: bitpos,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "bitop",
        arity: -4,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(2, -1, 1),
        acl: &["write", "bitmap", "slow"],
        group: "bitmap",
        since: "2.6.0",
        summary: "Perform bitwise operations between strings",
        complexity: "O(N)",
        handler: bitop,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "bitfield",
        arity: -2,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "bitmap", "slow"],
        group: "bitmap",
        since: "3.2.0",
        summary: "Perform arbitrary bitfield integer operations on strings",
        complexity: "O(1) for each subcommand specified",
        handler: field::bitfield,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "bitfield_ro",
        arity: -2,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "bitmap", "fast"],
        group: "bitmap",
        since: "6.0.0",
        summary: "Perform arbitrary bitfield integer operations on strings. Read-only variant of BITFIELD",
        complexity: "O(1) for each subcommand specified",
        handler: field::bitfield_ro,
        ..CommandSpec::DEFAULT
    },
];

// ---- helpers ----

/// `proto-max-bulk-len`: bit offsets must address a byte below it.
fn max_bulk(cx: &Cx) -> u64 {
    cx.srv.config.get_i64("proto-max-bulk-len").max(0) as u64
}

fn as_str_mut(v: &mut Value) -> Option<&mut StrVal> {
    match v {
        Value::Str(s) => Some(s),
        _ => None,
    }
}

/// Read lookup (counts hits/misses): the string's bytes, `Ok(None)` if missing.
fn read(cx: &mut Cx, key: &[u8]) -> Result<Option<Bytes>, Reply> {
    match cx.ks.get(key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::Str(s) => Ok(Some(s.to_bytes())),
            _ => Err(errors::wrongtype()),
        },
    }
}

/// Zero-pads `buf` to `len` bytes, growing greedily as `sdsgrowzero` does, so bit-by-bit
/// growth stays amortised O(1).
pub(super) fn grow_zero(buf: &mut Vec<u8>, len: usize) {
    if buf.len() < len {
        sds_reserve(buf, len);
        buf.resize(len, 0);
    }
}

/// Redis's `dbUnshareStringValue` on a value it then leaves unchanged: the string becomes a
/// private `raw` sds (OBJECT ENCODING reports `raw`).
fn unshare(s: &mut StrVal) {
    match s {
        StrVal::Int(_) => *s = StrVal::raw(s.to_bytes()),
        StrVal::Bytes { raw, .. } => *raw = true,
    }
}

/// A range or BYTE|BIT argument of BITCOUNT/BITPOS.
fn unit(arg: &[u8]) -> Result<bool, Reply> {
    if is_cstr(arg, "bit") {
        Ok(true)
    } else if is_cstr(arg, "byte") {
        Ok(false)
    } else {
        Err(errors::syntax())
    }
}

fn int(arg: &[u8]) -> Result<i64, Reply> {
    parse_i64(arg).ok_or_else(errors::not_int)
}

// ---- commands ----

fn setbit(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let key = &args[1];
    let Some(offset) = bits::parse_offset(&args[2], 0, max_bulk(cx)) else {
        return errors::err(errors::BIT_OFFSET);
    };
    let on = match parse_i64(&args[3]) {
        Some(v @ (0 | 1)) => v as u8,
        _ => return errors::err(errors::BIT_VALUE),
    };
    let byte = (offset >> 3) as usize;
    let shift = 7 - (offset & 7) as u32;
    let db = cx.ks.db;
    let old = match cx.ks.lookup_elems_in(db, key) {
        None => {
            // Zeroed allocation (calloc): a far offset costs no page writes.
            let mut buf = vec![0u8; byte + 1];
            buf[byte] = on << shift;
            cx.ks
                .set(key, Value::Str(StrVal::raw(Bytes::from(buf))), None);
            if let Some(ev) = cx.events() {
                ev.created(true, key);
                ev.emit(notify::STRING, "setbit", key);
            }
            return Reply::Int(0);
        }
        Some(e) => {
            let Some(s) = as_str_mut(&mut e.value) else {
                return errors::wrongtype();
            };
            let len = s.len();
            let cur = match s {
                StrVal::Bytes { data, .. } => data.get(byte).copied(),
                StrVal::Int(i) => itoa::Buffer::new().format(*i).as_bytes().get(byte).copied(),
            }
            .map_or(0, |b| (b >> shift) & 1);
            if byte < len && cur == on {
                // Nothing changes: no WATCH signal, no event, nothing to journal, no dirty
                // count (Redis 7).
                unshare(s);
                cx.changes(0);
                return Reply::Int(i64::from(cur));
            }
            let mut buf = s.take_mut();
            grow_zero(&mut buf, byte + 1);
            buf[byte] = (buf[byte] & !(1 << shift)) | (on << shift);
            let written = buf[byte];
            *s = StrVal::raw_vec(buf);
            (cur, written)
        }
    };
    let (old, written) = old;
    // The durable engine records the byte written (the string grows zero-filled).
    cx.ks.signal_in(db, key);
    if cx.ks.journaling() {
        cx.ks.elems(Change::StrPatch {
            db,
            key: Bytes::copy_from_slice(key),
            offset: byte as u64,
            bytes: Bytes::copy_from_slice(&[written]),
        });
    }
    cx.notify(notify::STRING, "setbit", key);
    Reply::Int(i64::from(old))
}

fn getbit(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let Some(offset) = bits::parse_offset(&args[2], 0, max_bulk(cx)) else {
        return errors::err(errors::BIT_OFFSET);
    };
    let data = match read(cx, &args[1]) {
        Ok(Some(d)) => d,
        Ok(None) => return Reply::Int(0),
        Err(e) => return e,
    };
    let bit = data
        .get((offset >> 3) as usize)
        .map_or(0, |b| (b >> (7 - (offset & 7))) & 1);
    Reply::Int(i64::from(bit))
}

fn bitcount(cx: &mut Cx) -> Reply {
    let args = cx.args;
    // Arguments are checked before the key is looked up (Redis 7.2).
    let range = match args.len() {
        2 => None,
        4 | 5 => {
            let (start, end) = match (int(&args[2]), int(&args[3])) {
                (Ok(s), Ok(e)) => (s, e),
                (Err(e), _) | (_, Err(e)) => return e,
            };
            let bit_unit = match args.get(4).map(|a| unit(a)).transpose() {
                Ok(b) => b.unwrap_or(false),
                Err(e) => return e,
            };
            Some((start, end, bit_unit))
        }
        _ => return errors::syntax(),
    };
    let data = match read(cx, &args[1]) {
        Ok(Some(d)) => d,
        Ok(None) => return Reply::Int(0),
        Err(e) => return e,
    };
    let n = match range {
        None => bits::count_all(&data),
        Some((s, e, b)) => bits::count_range(&data, s, e, b),
    };
    Reply::Int(n as i64)
}

fn bitpos(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let bit = match parse_i64(&args[2]) {
        None => return errors::not_int(),
        Some(b @ (0 | 1)) => b == 1,
        Some(_) => return errors::err(errors::BITPOS_BIT),
    };
    if args.len() > 6 {
        return errors::syntax();
    }
    let start = match args.get(3).map(|a| int(a)).transpose() {
        Ok(s) => s,
        Err(e) => return e,
    };
    let bit_unit = match args.get(5).map(|a| unit(a)).transpose() {
        Ok(b) => b.unwrap_or(false),
        Err(e) => return e,
    };
    let end = match args.get(4).map(|a| int(a)).transpose() {
        Ok(e) => e,
        Err(e) => return e,
    };
    let data = match read(cx, &args[1]) {
        Ok(Some(d)) => d,
        // A missing key is an infinite run of zeros.
        Ok(None) => return Reply::Int(if bit { -1 } else { 0 }),
        Err(e) => return e,
    };
    Reply::Int(bits::bitpos(&data, bit, start, end, bit_unit))
}

fn bitop(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let name = &args[1];
    let op = if is_cstr(name, "and") {
        BitOp::And
    } else if is_cstr(name, "or") {
        BitOp::Or
    } else if is_cstr(name, "xor") {
        BitOp::Xor
    } else if is_cstr(name, "not") {
        BitOp::Not
    } else {
        return errors::syntax();
    };
    if op == BitOp::Not && args.len() != 4 {
        return errors::err(errors::BITOP_NOT);
    }
    let mut srcs = Vec::with_capacity(args.len() - 3);
    for key in &args[3..] {
        match read(cx, key) {
            Ok(d) => srcs.push(d.unwrap_or_default()),
            Err(e) => return e,
        }
    }
    let views: Vec<&[u8]> = srcs.iter().map(|b| &b[..]).collect();
    let out = bits::bitop(op, &views);
    let dest = &args[2];
    let len = out.len();
    if len > 0 {
        let created = cx.events().is_some() && !cx.ks.exists(dest);
        cx.ks
            .set(dest, Value::Str(StrVal::raw(Bytes::from(out))), None);
        if let Some(ev) = cx.events() {
            ev.created(created, dest);
            ev.emit(notify::STRING, "set", dest);
        }
    } else if cx.ks.remove(dest).is_some() {
        cx.notify(notify::GENERIC, "del", dest);
    } else {
        // An empty result and no destination to delete: nothing changed.
        cx.changes(0);
    }
    Reply::Int(len as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On the durable engine, in-place string edits journal the bytes they write; a new key
    /// (and anything else) is journaled whole.
    #[test]
    fn string_edits_journal_their_bytes() {
        let (mut c, j) = crate::cmd::testing::Client::durable();
        let taken = || -> Vec<String> {
            let (changes, _) = j.take(std::time::Duration::ZERO);
            changes
                .iter()
                .map(|c| match c {
                    Change::StrPatch { offset, bytes, .. } => format!("patch {offset} {bytes:?}"),
                    Change::StrSet { .. } => "set".into(),
                    other => format!("{other:?}"),
                })
                .collect()
        };
        c.line("APPEND s ab");
        c.line("APPEND s cd");
        c.line("SETRANGE s 1 XY");
        c.line("SETRANGE s 9 z");
        c.line("SETRANGE s 0 ");
        assert_eq!(
            taken(),
            [
                "set",
                "patch 2 b\"cd\"",
                "patch 1 b\"XY\"",
                "patch 9 b\"z\""
            ]
        );
        c.line("SETBIT b 9 1");
        c.line("SETBIT b 9 1");
        c.line("SETBIT b 17 1");
        c.line("BITFIELD b SET u8 0 255 GET u8 0");
        c.line("BITFIELD b GET u8 8");
        c.line("BITFIELD b INCRBY u4 40 1 OVERFLOW FAIL INCRBY u2 0 1");
        assert_eq!(
            taken(),
            [
                "set",
                "patch 2 b\"@\"",
                "patch 0 b\"\\xff\"",
                "patch 5 b\"\\x10\"",
                "patch 0 b\"\\xff\""
            ]
        );
    }

    /// SETBIT's edit path: an unshared buffer is edited and grown in place (no copy per bit),
    /// with sds-like headroom so growing bit by bit reallocates rarely.
    #[test]
    fn setbit_edits_in_place() {
        let mut s = StrVal::raw(Bytes::from(vec![0u8; 4096]));
        let mut reallocs = 0;
        let mut last = std::ptr::null();
        for byte in 4096..200_000usize {
            let mut buf = s.take_mut();
            if buf.as_ptr() != last {
                reallocs += 1;
            }
            grow_zero(&mut buf, byte + 1);
            buf[byte] |= 1;
            last = buf.as_ptr();
            s = StrVal::raw_vec(buf);
        }
        assert!(reallocs < 20, "{reallocs} reallocations");
        assert_eq!(s.len(), 200_000);
        // A shared buffer is copied, never modified under its other owner.
        let other = s.to_bytes();
        let mut buf = s.take_mut();
        buf[0] = 0xff;
        assert_eq!(other[0], 0);
    }

    #[test]
    fn unshare_makes_raw() {
        let mut s = StrVal::Int(42);
        unshare(&mut s);
        assert_eq!(s, StrVal::raw(Bytes::from_static(b"42")));
        let mut s = StrVal::from_set(Bytes::from_static(b"abc"));
        unshare(&mut s);
        assert_eq!(s.encoding(), "raw");
    }
}
