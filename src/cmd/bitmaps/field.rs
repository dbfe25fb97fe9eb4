//! BITFIELD and BITFIELD_RO (Redis `bitfieldGeneric`): every subcommand is parsed before
//! anything runs, then the operations run in order on one buffer.

use super::bits::{self, Overflow};
use super::{as_str_mut, grow_zero, int, max_bulk, read};
use crate::cmd::args::is_cstr;
use crate::cmd::errors;
use crate::cmd::Cx;
use crate::engine::change::Change;
use crate::instance::notify;
use crate::protocol::Reply;
use crate::types::value::{StrVal, Value};
use bytes::Bytes;

#[derive(Clone, Copy)]
enum Kind {
    Get,
    Set(i64),
    Incr(i64),
}

struct Op {
    kind: Kind,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

/// Parses the subcommands; `Err` is the reply. Also returns the highest bit a write reaches.
fn parse(cx: &Cx) -> Result<(Vec<Op>, Option<u64>), Reply> {
    let args = &cx.args[2..];
    let max = max_bulk(cx);
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut highest: Option<u64> = None;
    let mut j = 0;
    while j < args.len() {
        let (sub, remaining) = (&args[j], args.len() - j - 1);
        let name = if is_cstr(sub, "get") && remaining >= 2 {
            0
        } else if is_cstr(sub, "set") && remaining >= 3 {
            1
        } else if is_cstr(sub, "incrby") && remaining >= 3 {
            2
        } else if is_cstr(sub, "overflow") && remaining >= 1 {
            let ty = &args[j + 1];
            overflow = if is_cstr(ty, "wrap") {
                Overflow::Wrap
            } else if is_cstr(ty, "sat") {
                Overflow::Sat
            } else if is_cstr(ty, "fail") {
                Overflow::Fail
            } else {
                return Err(errors::err(errors::BITFIELD_OVERFLOW));
            };
            j += 2;
            continue;
        } else {
            return Err(errors::syntax());
        };
        let (signed, nbits) =
            bits::parse_type(&args[j + 1]).ok_or_else(|| errors::err(errors::BITFIELD_TYPE))?;
        let offset = bits::parse_offset(&args[j + 2], nbits, max)
            .ok_or_else(|| errors::err(errors::BIT_OFFSET))?;
        let kind = if name == 0 {
            Kind::Get
        } else {
            let last = offset + u64::from(nbits) - 1;
            highest = Some(highest.map_or(last, |h| h.max(last)));
            let v = int(&args[j + 3])?;
            if name == 1 {
                Kind::Set(v)
            } else {
                Kind::Incr(v)
            }
        };
        ops.push(Op {
            kind,
            signed,
            bits: nbits,
            offset,
            overflow,
        });
        j += if name == 0 { 3 } else { 4 };
    }
    Ok((ops, highest))
}

/// A GET: bytes past the end read as zeros.
fn get(op: &Op, buf: &[u8]) -> Reply {
    if op.signed {
        Reply::Int(bits::get_signed(buf, op.offset, op.bits))
    } else {
        Reply::Int(bits::get_unsigned(buf, op.offset, op.bits) as i64)
    }
}

/// Runs one operation on `buf` (already grown to cover every write); also says whether the
/// stored bits changed.
fn run(op: &Op, buf: &mut [u8]) -> (Reply, bool) {
    let (off, n, ow) = (op.offset, op.bits, op.overflow);
    if let Kind::Get = op.kind {
        return (get(op, buf), false);
    }
    if op.signed {
        let old = bits::get_signed(buf, off, n);
        let (new, ret) = match op.kind {
            Kind::Get => return (Reply::Int(old), false),
            Kind::Set(v) => match bits::signed_overflow(v, 0, n, ow) {
                None => (Some(v), old),
                Some(w) => (w, old),
            },
            Kind::Incr(d) => match bits::signed_overflow(old, d, n, ow) {
                // No overflow: the sum fits in `n` bits.
                None => (Some(old.wrapping_add(d)), old.wrapping_add(d)),
                Some(w) => (w, w.unwrap_or(0)),
            },
        };
        let Some(new) = new else {
            return (Reply::Nil, false);
        };
        bits::set_unsigned(buf, off, n, new as u64);
        (Reply::Int(ret), new != old)
    } else {
        let old = bits::get_unsigned(buf, off, n);
        let (new, ret) = match op.kind {
            Kind::Get => return (Reply::Int(old as i64), false),
            Kind::Set(v) => match bits::unsigned_overflow(v as u64, 0, n, ow) {
                None => (Some(v as u64), old),
                Some(w) => (w, old),
            },
            Kind::Incr(d) => match bits::unsigned_overflow(old, d, n, ow) {
                None => {
                    let s = old.wrapping_add(d as u64);
                    (Some(s), s)
                }
                Some(w) => (w, w.unwrap_or(0)),
            },
        };
        let Some(new) = new else {
            return (Reply::Nil, false);
        };
        bits::set_unsigned(buf, off, n, new);
        (Reply::Int(ret as i64), new != old)
    }
}

fn generic(cx: &mut Cx, read_only: bool) -> Reply {
    let (ops, highest) = match parse(cx) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let key = &cx.args[1];
    let Some(highest) = highest else {
        // Only GETs: a read lookup, missing keys read as zeros.
        let data = match read(cx, key) {
            Ok(d) => d.unwrap_or_default(),
            Err(e) => return e,
        };
        if !read_only {
            // A BITFIELD of GETs is a write call that changes nothing.
            cx.changes(0);
        }
        return Reply::Array(ops.iter().map(|op| get(op, &data)).collect());
    };
    if read_only {
        return errors::err(errors::BITFIELD_RO);
    }
    let need = (highest >> 3) as usize + 1;
    let db = cx.ks.db;
    // Type check first, so a wrong-type key is not journaled (no access counted: the
    // write lookup below is the command's one).
    if let Some(e) = cx.ks.get_in(db, key) {
        if !matches!(e.value, Value::Str(_)) {
            return errors::wrongtype();
        }
    }
    // Redis 7 counts a SET/INCRBY as a change if it altered the bits, or if the key was
    // created or grown (`dirty`) and it did not fail on overflow. Without changes: no WATCH
    // signal, no `setbit` event, nothing for the dirty counter. The durable engine records
    // the bytes of every write (even a failed one: the string may have been zero-padded).
    let run_all = |buf: &mut [u8], dirty: bool| -> (Vec<Reply>, u64) {
        let mut changes = 0;
        let replies = ops
            .iter()
            .map(|op| {
                let (r, altered) = run(op, buf);
                let wrote = !matches!(op.kind, Kind::Get) && !matches!(r, Reply::Nil);
                changes += u64::from(altered || (dirty && wrote));
                r
            })
            .collect();
        (replies, changes)
    };
    let (replies, changes, patched) = match cx.ks.lookup_elems_in(db, key) {
        None => {
            let mut buf = vec![0u8; need];
            let (replies, changes) = run_all(&mut buf, true);
            // A new key is recorded whole.
            cx.ks
                .set(key, Value::Str(StrVal::raw(Bytes::from(buf))), None);
            cx.notify(notify::NEW, "new", key);
            (replies, changes, false)
        }
        Some(e) => {
            let Some(s) = as_str_mut(&mut e.value) else {
                return errors::wrongtype();
            };
            let mut buf = s.take_mut();
            let grown = buf.len() < need;
            grow_zero(&mut buf, need);
            let (replies, changes) = run_all(&mut buf, grown);
            *s = StrVal::raw_vec(buf);
            (replies, changes, grown || changes > 0)
        }
    };
    if changes > 0 {
        cx.ks.signal_in(db, key);
        cx.notify(notify::STRING, "setbit", key);
    }
    if patched && cx.ks.journaling() {
        let patches: Vec<Change> = match cx.ks.get_in(db, key).map(|e| &e.value) {
            Some(Value::Str(StrVal::Bytes { data, .. })) => ops
                .iter()
                .filter(|op| !matches!(op.kind, Kind::Get))
                .map(|op| {
                    let lo = (op.offset >> 3) as usize;
                    let hi = ((op.offset + u64::from(op.bits) - 1) >> 3) as usize + 1;
                    Change::StrPatch {
                        db,
                        key: Bytes::copy_from_slice(key),
                        offset: lo as u64,
                        bytes: Bytes::copy_from_slice(&data[lo..hi.min(data.len())]),
                    }
                })
                .collect(),
            _ => Vec::new(),
        };
        for p in patches {
            cx.ks.elems(p);
        }
    }
    cx.changes(changes);
    Reply::Array(replies)
}

pub fn bitfield(cx: &mut Cx) -> Reply {
    generic(cx, false)
}

pub fn bitfield_ro(cx: &mut Cx) -> Reply {
    generic(cx, true)
}
