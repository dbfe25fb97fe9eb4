//! ZADD, ZINCRBY, ZREM, ZCARD, ZSCORE, ZMSCORE, ZRANK, ZREVRANK, ZCOUNT, ZLEXCOUNT.

use super::{changed, changed_events, grew, limits, opt, parse, read, write, Limits};
use crate::cmd::{errors, Cx};
use crate::engine::change::Change;
use crate::instance::notify;
use crate::instance::state::Shared;
use crate::protocol::Reply;
use crate::types::value::Value;
use crate::types::zset::ZSet;
use bytes::Bytes;

// ZADD's input flags (Redis's ZADD_IN_*).
const NX: u8 = 1;
const XX: u8 = 1 << 1;
const GT: u8 = 1 << 2;
const LT: u8 = 1 << 3;
const INCR: u8 = 1 << 4;

pub fn zadd(cx: &mut Cx) -> Reply {
    zadd_generic(cx, 0)
}

/// ZINCRBY is ZADD with INCR (Redis parses it the same way, options included).
pub fn zincrby(cx: &mut Cx) -> Reply {
    zadd_generic(cx, INCR)
}

/// What a ZADD did (Redis's `added`, `updated`, `processed` and the last new score).
#[derive(Default)]
struct Added {
    added: usize,
    updated: usize,
    processed: usize,
    score: f64,
}

fn zadd_generic(cx: &mut Cx, mut flags: u8) -> Reply {
    let args = cx.args;
    let mut ch = false;
    let mut i = 2;
    while i < args.len() {
        // Redis compares C strings ("nx\0..." is NX). Option names have at most 4 bytes, so
        // a score fails after looking at 5.
        let a = &args[i][..];
        let end = a.iter().take(5).position(|&b| b == 0).unwrap_or(a.len());
        if end > 4 {
            break;
        }
        let a = &a[..end];
        let is = |o: &str| a.eq_ignore_ascii_case(o.as_bytes());
        if is("nx") {
            flags |= NX;
        } else if is("xx") {
            flags |= XX;
        } else if is("ch") {
            ch = true;
        } else if is("incr") {
            flags |= INCR;
        } else if is("gt") {
            flags |= GT;
        } else if is("lt") {
            flags |= LT;
        } else {
            break;
        }
        i += 1;
    }
    let pairs = &args[i..];
    if pairs.is_empty() || pairs.len() % 2 == 1 {
        return errors::syntax();
    }
    let has = |f: u8| flags & f != 0;
    if has(NX) && has(XX) {
        return errors::err(errors::ZADD_XX_NX);
    }
    if (has(GT) && has(NX)) || (has(LT) && has(NX)) || (has(GT) && has(LT)) {
        return errors::err(errors::ZADD_GT_LT_NX);
    }
    let n = pairs.len() / 2;
    if has(INCR) && n > 1 {
        return errors::err(errors::ZADD_INCR_PAIR);
    }
    // Every score is checked before anything changes (all or nothing).
    let mut small = [0f64; 4];
    let mut big = Vec::new();
    let scores: &mut [f64] = if n <= small.len() {
        &mut small[..n]
    } else {
        big.resize(n, 0.0);
        &mut big
    };
    for (j, s) in scores.iter_mut().enumerate() {
        match parse::score(&pairs[2 * j]) {
            Ok(v) => *s = v,
            Err(e) => return e,
        }
    }

    let key = &args[1];
    let db = cx.ks.db;
    let srv: &Shared = cx.srv;
    // Durable keyspace: the members added or rescored, with their new scores.
    let mut rec = cx.ks.journaling().then(Vec::new);
    let out = match cx.ks.lookup_elems_in(db, key) {
        Some(e) => {
            let Value::ZSet(z) = &mut e.value else {
                return errors::wrongtype();
            };
            // Redis 7.2 `zsetTypeMaybeConvert`: a listpack that may outgrow its limit.
            if !z.is_skiplist() && n > limits(srv).entries {
                z.convert_to_skiplist();
            }
            let out = apply(z, scores, pairs, flags, srv, rec.as_mut());
            let now_empty = z.is_empty();
            match out {
                Ok(o) if o.added + o.updated > 0 => {
                    changed(cx, key, now_empty);
                    if let Some(members) = rec {
                        record_put(cx, key, members);
                    }
                    Ok(o)
                }
                other => other,
            }
        }
        None if has(XX) => Ok(Added::default()),
        None => {
            // Redis 7.2 `zsetTypeCreate(elements, len(first member))`.
            let lim = limits(srv);
            let skiplist = n > lim.entries || pairs[1].len() > lim.value;
            let mut z = ZSet::new(skiplist);
            let out = apply(&mut z, scores, pairs, flags, srv, None);
            if !z.is_empty() {
                cx.ks.set(key, Value::ZSet(Box::new(z)), None);
                grew(cx, key);
                cx.notify(notify::NEW, "new", key);
            }
            out
        }
    };
    if let Ok(o) = &out {
        if o.added + o.updated > 0 {
            let event = if has(INCR) { "zincr" } else { "zadd" };
            cx.notify(notify::ZSET, event, key);
        }
        cx.changes((o.added + o.updated) as u64);
    }
    match out {
        Err(e) => e,
        Ok(o) if has(INCR) => {
            if o.processed > 0 {
                Reply::Double(o.score)
            } else {
                Reply::Nil
            }
        }
        Ok(o) => Reply::Int((if ch { o.added + o.updated } else { o.added }) as i64),
    }
}

/// Durable keyspace: records members added to or rescored in the sorted set at `key`.
fn record_put(cx: &mut Cx, key: &[u8], members: Vec<(Bytes, f64)>) {
    if !members.is_empty() {
        cx.ks.elems(Change::ZPut {
            db: cx.ks.db,
            key: Bytes::copy_from_slice(key),
            members,
        });
    }
}

/// Durable keyspace: records members removed from the sorted set at `key`, which stays
/// non-empty (an emptied set is removed whole instead).
pub(super) fn record_del(cx: &mut Cx, key: &[u8], members: Vec<Bytes>) {
    if !members.is_empty() {
        cx.ks.elems(Change::ZDel {
            db: cx.ks.db,
            key: Bytes::copy_from_slice(key),
            members,
        });
    }
}

/// Redis's `zsetAdd` over every pair; `rec` (durable keyspace) collects the members it
/// added or rescored, with their stored scores.
fn apply(
    z: &mut ZSet,
    scores: &[f64],
    pairs: &[Bytes],
    flags: u8,
    srv: &Shared,
    mut rec: Option<&mut Vec<(Bytes, f64)>>,
) -> Result<Added, Reply> {
    let has = |f: u8| flags & f != 0;
    let mut lim: Option<Limits> = None;
    let mut out = Added::default();
    for (j, &score) in scores.iter().enumerate() {
        let member = &pairs[2 * j + 1][..];
        match z.lookup(member) {
            Ok(_) if has(NX) => {}
            Ok((place, cur)) => {
                let mut s = score;
                if has(INCR) {
                    s += cur;
                    if s.is_nan() {
                        return Err(errors::err(errors::ZSET_NAN));
                    }
                }
                if (has(LT) && s >= cur) || (has(GT) && s <= cur) {
                    continue;
                }
                out.processed += 1;
                out.score = s;
                if s != cur {
                    z.rescore_at(place, member, cur, s);
                    out.updated += 1;
                    if let Some(r) = rec.as_deref_mut() {
                        let stored = z.score(member).unwrap_or(s);
                        r.push((Bytes::copy_from_slice(member), stored));
                    }
                }
            }
            Err(_) if has(XX) => {}
            Err(place) => {
                if !z.is_skiplist() {
                    let l = *lim.get_or_insert_with(|| limits(srv));
                    if z.len() + 1 > l.entries || member.len() > l.value {
                        z.convert_to_skiplist();
                    }
                }
                let m = Bytes::copy_from_slice(member);
                match rec.as_deref_mut() {
                    Some(r) => {
                        z.insert_at(place, m.clone(), score);
                        // What it kept (a listpack stores -0 as 0).
                        r.push((m, z.score(member).unwrap_or(score)));
                    }
                    None => z.insert_at(place, m, score),
                }
                out.added += 1;
                out.processed += 1;
                out.score = score;
            }
        }
    }
    Ok(out)
}

pub fn zrem(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let key = &args[1];
    let journaling = cx.ks.journaling();
    let z = match write(cx, key) {
        Ok(Some(z)) => z,
        Ok(None) => {
            cx.changes(0);
            return Reply::Int(0);
        }
        Err(e) => return e,
    };
    // Durable keyspace: the members removed, for a `ZDel`.
    let mut gone = Vec::new();
    let mut deleted = 0;
    for m in &args[2..] {
        if z.remove(m).is_some() {
            deleted += 1;
            if journaling {
                gone.push(Bytes::copy_from_slice(m));
            }
        }
        if z.is_empty() {
            break;
        }
    }
    let now_empty = z.is_empty();
    if deleted > 0 {
        changed(cx, key, now_empty);
        if !now_empty {
            record_del(cx, key, gone);
        }
        changed_events(cx, key, "zrem", now_empty);
    }
    cx.changes(deleted as u64);
    Reply::Int(deleted)
}

pub fn zcard(cx: &mut Cx) -> Reply {
    let args = cx.args;
    match read(cx, &args[1]) {
        Ok(Some(z)) => Reply::Int(z.len() as i64),
        Ok(None) => Reply::Int(0),
        Err(e) => e,
    }
}

pub fn zscore(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let member = &args[2];
    match read(cx, &args[1]) {
        Ok(z) => z
            .and_then(|z| z.score(member))
            .map_or(Reply::Nil, Reply::Double),
        Err(e) => e,
    }
}

pub fn zmscore(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let members = &args[2..];
    match read(cx, &args[1]) {
        Ok(z) => Reply::Array(
            members
                .iter()
                .map(|m| z.and_then(|z| z.score(m)).map_or(Reply::Nil, Reply::Double))
                .collect(),
        ),
        Err(e) => e,
    }
}

pub fn zrank(cx: &mut Cx) -> Reply {
    rank_generic(cx, false)
}

pub fn zrevrank(cx: &mut Cx) -> Reply {
    rank_generic(cx, true)
}

/// ZRANK/ZREVRANK key member [WITHSCORE] (WITHSCORE is Redis 7.2).
fn rank_generic(cx: &mut Cx, reverse: bool) -> Reply {
    let args = cx.args;
    if args.len() > 4 {
        return errors::wrong_args(cx.spec.name);
    }
    let withscore = match args.get(3) {
        Some(a) if opt(a, "withscore") => true,
        Some(_) => return errors::syntax(),
        None => false,
    };
    let z = match read(cx, &args[1]) {
        Ok(Some(z)) => z,
        Ok(None) if withscore => return Reply::NilArray,
        Ok(None) => return Reply::Nil,
        Err(e) => return e,
    };
    match z.rank(&args[2]) {
        Some((r, score)) => {
            let r = if reverse { z.len() - 1 - r } else { r } as i64;
            if withscore {
                Reply::Array(vec![Reply::Int(r), Reply::Double(score)])
            } else {
                Reply::Int(r)
            }
        }
        None if withscore => Reply::NilArray,
        None => Reply::Nil,
    }
}

pub fn zcount(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let range = match parse::score_range(&args[2], &args[3]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    match read(cx, &args[1]) {
        Ok(Some(z)) => {
            let (start, end) = z.score_span(&range);
            Reply::Int((end - start) as i64)
        }
        Ok(None) => Reply::Int(0),
        Err(e) => e,
    }
}

pub fn zlexcount(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let range = match parse::lex_range(&args[2], &args[3]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let z = match read(cx, &args[1]) {
        Ok(Some(z)) => z,
        Ok(None) => return Reply::Int(0),
        Err(e) => return e,
    };
    let Some(first) = z.lex_first(&range) else {
        return Reply::Int(0);
    };
    let count = if z.is_skiplist() {
        // By ranks, as Redis does for a skiplist.
        match z.lex_last(&range) {
            Some(last) => last + 1 - first.min(last + 1),
            None => z.len() - first,
        }
    } else {
        // A listpack is walked from the first match while members stay at or below max.
        z.iter_from(first)
            .take_while(|it| range.lte_max(&it.member))
            .count()
    };
    Reply::Int(count as i64)
}
