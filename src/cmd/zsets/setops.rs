//! ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD (`zunionInterDiffGenericCommand`).
//! Plain sets are accepted as inputs, every member scoring 1.
//!
//! A command holds one source borrowed at a time (the keyspace hands out one entry per
//! borrow), so intersection and difference start from the smallest (first) input's elements
//! and filter them one source after another; the results and the order in which scores are
//! aggregated are Redis's.

use super::{finish_new, opt, parse, store, Rows};
use crate::cmd::{errors, Cx};
use crate::protocol::Reply;
use crate::types::set::SetValue;
use crate::types::value::Value;
use crate::types::zset::ZSet;
use bytes::Bytes;
use std::collections::HashMap;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Agg {
    Sum,
    Min,
    Max,
}

/// `zunionInterAggregate`.
#[inline]
fn aggregate(target: &mut f64, val: f64, agg: Agg) {
    match agg {
        Agg::Sum => {
            *target += val;
            // inf + -inf: Redis stores 0 rather than NaN.
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Agg::Min => *target = if val < *target { val } else { *target },
        Agg::Max => *target = if val > *target { val } else { *target },
    }
}

/// One input: a sorted set or a plain set (scores of 1).
enum Src<'a> {
    Zset(&'a ZSet),
    Set(&'a SetValue),
}

impl Src<'_> {
    fn len(&self) -> usize {
        match self {
            Src::Zset(z) => z.len(),
            Src::Set(s) => s.len(),
        }
    }

    fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            Src::Zset(z) => z.score(member),
            Src::Set(s) => s.contains(member).then_some(1.0),
        }
    }

    fn for_each(&self, mut f: impl FnMut(&Bytes, f64)) {
        match self {
            Src::Zset(z) => z.iter().for_each(|it| f(&it.member, it.score)),
            Src::Set(s) => s.iter().for_each(|m| f(&m.to_bytes(), 1.0)),
        }
    }
}

/// The input at `key`: `Ok(None)` if missing, WRONGTYPE unless a sorted set or set. Only
/// the first look at each key counts keyspace hits/misses, as Redis reads each key once.
fn source<'c>(cx: &'c mut Cx, key: &[u8], first_look: bool) -> Result<Option<Src<'c>>, Reply> {
    let entry = if first_look {
        cx.ks.get(key)
    } else {
        cx.ks.peek(key)
    };
    match entry.map(|e| &e.value) {
        None => Ok(None),
        Some(Value::ZSet(z)) => Ok(Some(Src::Zset(z))),
        Some(Value::Set(s)) => Ok(Some(Src::Set(s))),
        Some(_) => Err(errors::wrongtype()),
    }
}

pub fn zunion(cx: &mut Cx) -> Reply {
    generic(cx, false, Op::Union, false)
}

pub fn zinter(cx: &mut Cx) -> Reply {
    generic(cx, false, Op::Inter, false)
}

pub fn zdiff(cx: &mut Cx) -> Reply {
    generic(cx, false, Op::Diff, false)
}

pub fn zintercard(cx: &mut Cx) -> Reply {
    generic(cx, false, Op::Inter, true)
}

pub fn zunionstore(cx: &mut Cx) -> Reply {
    generic(cx, true, Op::Union, false)
}

pub fn zinterstore(cx: &mut Cx) -> Reply {
    generic(cx, true, Op::Inter, false)
}

pub fn zdiffstore(cx: &mut Cx) -> Reply {
    generic(cx, true, Op::Diff, false)
}

/// An input key with its weight and size.
struct Input<'a> {
    key: &'a Bytes,
    weight: f64,
    len: usize,
}

fn generic(cx: &mut Cx, has_dst: bool, op: Op, card_only: bool) -> Reply {
    let args = cx.args;
    let nk = if has_dst { 2 } else { 1 };
    let setnum = match parse::long(&args[nk]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    if setnum < 1 {
        return errors::need_input_key(cx.spec.name);
    }
    let avail = args.len() - (nk + 1);
    if setnum as u64 > avail as u64 {
        return errors::syntax();
    }
    let setnum = setnum as usize;
    let mut inputs = Vec::with_capacity(setnum);
    for key in &args[nk + 1..nk + 1 + setnum] {
        let len = match source(cx, key, true) {
            Ok(s) => s.map_or(0, |s| s.len()),
            Err(e) => return e,
        };
        inputs.push(Input {
            key,
            weight: 1.0,
            len,
        });
    }

    let mut agg = Agg::Sum;
    let mut withscores = false;
    let mut limit = 0usize;
    let mut j = nk + 1 + setnum;
    while j < args.len() {
        let remaining = args.len() - j;
        let a = &args[j][..];
        if op != Op::Diff && !card_only && remaining > setnum && opt(a, "weights") {
            j += 1;
            for input in inputs.iter_mut() {
                match parse::string2d(&args[j]) {
                    Some(w) => input.weight = w,
                    None => return errors::err(errors::WEIGHT_NOT_FLOAT),
                }
                j += 1;
            }
        } else if op != Op::Diff && !card_only && remaining >= 2 && opt(a, "aggregate") {
            let v = &args[j + 1][..];
            agg = if opt(v, "sum") {
                Agg::Sum
            } else if opt(v, "min") {
                Agg::Min
            } else if opt(v, "max") {
                Agg::Max
            } else {
                return errors::syntax();
            };
            j += 2;
        } else if !has_dst && !card_only && opt(a, "withscores") {
            withscores = true;
            j += 1;
        } else if card_only && remaining >= 2 && opt(a, "limit") {
            match crate::num::parse_i64(&args[j + 1]) {
                Some(n) if n >= 0 => limit = usize::try_from(n).unwrap_or(usize::MAX),
                _ => return errors::err(errors::LIMIT_NEGATIVE),
            }
            j += 2;
        } else {
            return errors::syntax();
        }
    }
    if op != Op::Diff {
        // Smallest first (a stable sort, like glibc's merge-sorting qsort).
        inputs.sort_by_key(|i| i.len);
    }

    let result: Vec<(Bytes, f64)> = match op {
        Op::Inter => inter(cx, &inputs, agg),
        Op::Union => union(cx, &inputs, agg),
        Op::Diff => diff(cx, &inputs),
    };
    if card_only {
        let n = result.len();
        return Reply::Int((if limit > 0 { n.min(limit) } else { n }) as i64);
    }
    let mut z = ZSet::new(true);
    for (m, s) in result {
        z.insert(m, s);
    }
    if has_dst {
        let z = finish_new(cx, z);
        let event = match op {
            Op::Inter => "zinterstore",
            Op::Union => "zunionstore",
            Op::Diff => "zdiffstore",
        };
        return store(cx, &args[1], z, event);
    }
    let mut rows = Rows::new(cx.sess.resp3, withscores, z.len());
    for it in z.iter() {
        rows.push(&it.member, it.score);
    }
    rows.reply()
}

/// Runs `f` on the input at `key` (already type-checked); nothing for a missing key.
fn with_source(cx: &mut Cx, key: &[u8], f: impl FnOnce(&Src)) {
    if let Ok(Some(src)) = source(cx, key, false) {
        f(&src);
    }
}

fn weighted(score: f64, weight: f64) -> f64 {
    let s = weight * score;
    if s.is_nan() {
        0.0
    } else {
        s
    }
}

fn inter(cx: &mut Cx, inputs: &[Input], agg: Agg) -> Vec<(Bytes, f64)> {
    let Some(first) = inputs.first().filter(|i| i.len > 0) else {
        return Vec::new();
    };
    let mut acc: Vec<(Bytes, f64)> = Vec::with_capacity(first.len);
    with_source(cx, first.key, |src| {
        src.for_each(|m, s| acc.push((m.clone(), weighted(s, first.weight))))
    });
    for input in &inputs[1..] {
        if acc.is_empty() {
            break;
        }
        with_source(cx, input.key, |src| {
            acc.retain_mut(|(m, score)| match src.score(m) {
                Some(v) => {
                    aggregate(score, v * input.weight, agg);
                    true
                }
                None => false,
            })
        });
    }
    acc
}

fn union(cx: &mut Cx, inputs: &[Input], agg: Agg) -> Vec<(Bytes, f64)> {
    let cap = inputs.last().map_or(0, |i| i.len);
    let mut acc: HashMap<Bytes, f64, ahash::RandomState> =
        HashMap::with_capacity_and_hasher(cap, ahash::RandomState::new());
    for input in inputs.iter().filter(|i| i.len > 0) {
        with_source(cx, input.key, |src| {
            src.for_each(|m, s| {
                let s = weighted(s, input.weight);
                match acc.get_mut(&m[..]) {
                    Some(cur) => aggregate(cur, s, agg),
                    None => {
                        acc.insert(m.clone(), s);
                    }
                }
            })
        });
    }
    acc.into_iter().collect()
}

fn diff(cx: &mut Cx, inputs: &[Input]) -> Vec<(Bytes, f64)> {
    let Some(first) = inputs.first().filter(|i| i.len > 0) else {
        return Vec::new();
    };
    // The first set minus itself is empty (Redis skips the work).
    if inputs[1..].iter().any(|i| i.key == first.key) {
        return Vec::new();
    }
    let mut acc: Vec<(Bytes, f64)> = Vec::with_capacity(first.len);
    with_source(cx, first.key, |src| {
        src.for_each(|m, s| acc.push((m.clone(), s)))
    });
    for input in inputs[1..].iter().filter(|i| i.len > 0) {
        if acc.is_empty() {
            break;
        }
        with_source(cx, input.key, |src| {
            acc.retain(|(m, _)| src.score(m).is_none())
        });
    }
    acc
}
