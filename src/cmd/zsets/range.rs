//! ZRANGE (BYSCORE, BYLEX, REV, LIMIT, WITHSCORES), ZRANGESTORE, the older
//! Z[REV]RANGE[BYSCORE|BYLEX] forms and ZREMRANGEBYRANK/SCORE/LEX (`zrangeGenericCommand`,
//! `zremrangeGenericCommand`).

use super::{changed, changed_events, finish_new, opt, parse, read, store, write, Rows};
use crate::cmd::{errors, Cx};
use crate::protocol::Reply;
use crate::types::zset::{LexRange, ScoreRange, ZSet};
use bytes::Bytes;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Auto,
    Rank,
    Score,
    Lex,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Auto,
    Fwd,
    Rev,
}

pub fn zrange(cx: &mut Cx) -> Reply {
    generic(cx, 1, false, Kind::Auto, Dir::Auto)
}

pub fn zrangestore(cx: &mut Cx) -> Reply {
    generic(cx, 2, true, Kind::Auto, Dir::Auto)
}

pub fn zrevrange(cx: &mut Cx) -> Reply {
    generic(cx, 1, false, Kind::Rank, Dir::Rev)
}

pub fn zrangebyscore(cx: &mut Cx) -> Reply {
    generic(cx, 1, false, Kind::Score, Dir::Fwd)
}

pub fn zrevrangebyscore(cx: &mut Cx) -> Reply {
    generic(cx, 1, false, Kind::Score, Dir::Rev)
}

pub fn zrangebylex(cx: &mut Cx) -> Reply {
    generic(cx, 1, false, Kind::Lex, Dir::Fwd)
}

pub fn zrevrangebylex(cx: &mut Cx) -> Reply {
    generic(cx, 1, false, Kind::Lex, Dir::Rev)
}

/// A parsed range.
enum Spec {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

/// Where results go: the client's reply, or a new set for ZRANGESTORE.
enum Sink {
    Client(Rows),
    Store(ZSet),
}

impl Sink {
    #[inline]
    fn push(&mut self, member: &Bytes, score: f64) {
        match self {
            Sink::Client(rows) => rows.push(member, score),
            Sink::Store(z) => z.insert(member.clone(), score),
        }
    }
}

/// `zrangeGenericCommand`: `first` is the index of the source key.
fn generic(cx: &mut Cx, first: usize, is_store: bool, mut kind: Kind, mut dir: Dir) -> Reply {
    let args = cx.args;
    let (mut minidx, mut maxidx) = (first + 1, first + 2);
    let mut withscores = false;
    let (mut offset, mut limit) = (0i64, -1i64);
    let mut j = first + 3;
    while j < args.len() {
        let a = &args[j][..];
        let left = args.len() - j - 1;
        if !is_store && opt(a, "withscores") {
            withscores = true;
        } else if opt(a, "limit") && left >= 2 {
            match (parse::long(&args[j + 1]), parse::long(&args[j + 2])) {
                (Ok(o), Ok(l)) => (offset, limit) = (o, l),
                (Err(e), _) | (_, Err(e)) => return e,
            }
            j += 2;
        } else if dir == Dir::Auto && opt(a, "rev") {
            dir = Dir::Rev;
        } else if kind == Kind::Auto && opt(a, "bylex") {
            kind = Kind::Lex;
        } else if kind == Kind::Auto && opt(a, "byscore") {
            kind = Kind::Score;
        } else {
            return errors::syntax();
        }
        j += 1;
    }
    let reverse = dir == Dir::Rev;
    if kind == Kind::Auto {
        kind = Kind::Rank;
    }
    if limit != -1 && kind == Kind::Rank {
        return errors::err(errors::ZRANGE_LIMIT);
    }
    if withscores && kind == Kind::Lex {
        return errors::err(errors::ZRANGE_BYLEX_WITHSCORES);
    }
    if reverse && kind != Kind::Rank {
        // Given as max, min.
        std::mem::swap(&mut minidx, &mut maxidx);
    }
    let spec = match kind {
        Kind::Score => parse::score_range(&args[minidx], &args[maxidx]).map(Spec::Score),
        Kind::Lex => parse::lex_range(&args[minidx], &args[maxidx]).map(Spec::Lex),
        _ => parse::long(&args[minidx])
            .and_then(|s| parse::long(&args[maxidx]).map(|e| Spec::Rank(s, e))),
    };
    let spec = match spec {
        Ok(s) => s,
        Err(e) => return e,
    };
    let resp3 = cx.sess.resp3;
    let mut sink = if is_store {
        Sink::Store(ZSet::new(true))
    } else {
        Sink::Client(Rows::new(resp3, withscores, 16))
    };
    match read(cx, &args[first]) {
        Ok(Some(z)) => match &spec {
            Spec::Rank(s, e) => by_rank(z, *s, *e, reverse, &mut sink),
            Spec::Score(r) => by_score(z, r, offset, limit, reverse, &mut sink),
            Spec::Lex(r) => by_lex(z, r, offset, limit, reverse, &mut sink),
        },
        Ok(None) => {}
        Err(e) => return e,
    }
    match sink {
        Sink::Client(rows) => rows.reply(),
        Sink::Store(z) => {
            let z = finish_new(cx, z);
            store(cx, &args[1], z, "zrangestore")
        }
    }
}

/// `genericZrangebyrankCommand`.
fn by_rank(z: &ZSet, start: i64, end: i64, reverse: bool, sink: &mut Sink) {
    let llen = z.len() as i64;
    let (mut s, mut e) = (start, end);
    if s < 0 {
        s += llen;
    }
    if e < 0 {
        e += llen;
    }
    s = s.max(0);
    if s > e || s >= llen {
        return;
    }
    e = e.min(llen - 1);
    let n = (e - s + 1) as usize;
    if reverse {
        for it in z.iter_rev_from((llen - 1 - s) as usize).take(n) {
            sink.push(&it.member, it.score);
        }
    } else {
        for it in z.iter_from(s as usize).take(n) {
            sink.push(&it.member, it.score);
        }
    }
}

/// A LIMIT count: negative means no limit.
fn take_limit(limit: i64) -> usize {
    usize::try_from(limit).unwrap_or(usize::MAX)
}

/// `genericZrangebyscoreCommand`: the range, then OFFSET items skipped, then up to COUNT.
fn by_score(z: &ZSet, r: &ScoreRange, offset: i64, limit: i64, reverse: bool, sink: &mut Sink) {
    // A negative offset walks off the end in Redis's loop: nothing is returned.
    let Ok(off) = usize::try_from(offset) else {
        return;
    };
    if off >= z.len() {
        return;
    }
    let n = take_limit(limit);
    // One descent to the range's edge; Redis then walks OFFSET items, we seek to them.
    if reverse {
        let end = z.score_end(r);
        let Some(from) = end.rank.checked_sub(off) else {
            return;
        };
        let from = if off > 0 { z.pos_at(from) } else { end };
        for it in z
            .iter_rev_before(from)
            .take_while(|it| r.gte_min(it.score))
            .take(n)
        {
            sink.push(&it.member, it.score);
        }
    } else {
        let start = z.score_first(r);
        let from = if off > 0 {
            z.pos_at(start.rank + off)
        } else {
            start
        };
        for it in z.iter_at(from).take_while(|it| r.lte_max(it.score)).take(n) {
            sink.push(&it.member, it.score);
        }
    }
}

/// `genericZrangebylexCommand`: from the first (last) item in range, OFFSET items skipped,
/// then items while they stay in range, up to COUNT.
fn by_lex(z: &ZSet, r: &LexRange, offset: i64, limit: i64, reverse: bool, sink: &mut Sink) {
    let Ok(off) = usize::try_from(offset) else {
        return;
    };
    let n = take_limit(limit);
    if reverse {
        let Some(last) = z.lex_last(r) else { return };
        let Some(from) = last.checked_sub(off) else {
            return;
        };
        for it in z
            .iter_rev_from(from)
            .take_while(|it| r.gte_min(&it.member))
            .take(n)
        {
            sink.push(&it.member, it.score);
        }
    } else {
        let Some(first) = z.lex_first(r) else { return };
        for it in z
            .iter_from(first.saturating_add(off))
            .take_while(|it| r.lte_max(&it.member))
            .take(n)
        {
            sink.push(&it.member, it.score);
        }
    }
}

pub fn zremrangebyrank(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let spec = parse::long(&args[2]).and_then(|s| parse::long(&args[3]).map(|e| Spec::Rank(s, e)));
    remrange(cx, spec)
}

pub fn zremrangebyscore(cx: &mut Cx) -> Reply {
    let args = cx.args;
    remrange(cx, parse::score_range(&args[2], &args[3]).map(Spec::Score))
}

pub fn zremrangebylex(cx: &mut Cx) -> Reply {
    let args = cx.args;
    remrange(cx, parse::lex_range(&args[2], &args[3]).map(Spec::Lex))
}

/// `zremrangeGenericCommand`; Redis counts one change per member removed.
fn remrange(cx: &mut Cx, spec: Result<Spec, Reply>) -> Reply {
    let reply = remove_range(cx, spec);
    if let Reply::Int(n) = reply {
        cx.changes(n as u64);
    }
    reply
}

fn remove_range(cx: &mut Cx, spec: Result<Spec, Reply>) -> Reply {
    let spec = match spec {
        Ok(s) => s,
        Err(e) => return e,
    };
    let args = cx.args;
    let key = &args[1];
    let journaling = cx.ks.journaling();
    let z = match write(cx, key) {
        Ok(Some(z)) => z,
        Ok(None) => return Reply::Int(0),
        Err(e) => return e,
    };
    let (start, n) = match &spec {
        Spec::Rank(s, e) => {
            let llen = z.len() as i64;
            let (mut s, mut e) = (*s, *e);
            if s < 0 {
                s += llen;
            }
            if e < 0 {
                e += llen;
            }
            s = s.max(0);
            if s > e || s >= llen {
                return Reply::Int(0);
            }
            e = e.min(llen - 1);
            (s as usize, (e - s + 1) as usize)
        }
        Spec::Score(r) => {
            let (s, e) = z.score_span(r);
            (s, e - s)
        }
        Spec::Lex(r) => match z.lex_first(r) {
            Some(first) => {
                let n = z
                    .iter_from(first)
                    .take_while(|it| r.lte_max(&it.member))
                    .count();
                (first, n)
            }
            None => (0, 0),
        },
    };
    if n == 0 {
        return Reply::Int(0);
    }
    // Durable keyspace: the members removed, for a `ZDel`.
    let mut gone = Vec::new();
    if journaling {
        z.remove_range(start, n, |it| gone.push(it.member));
    } else {
        z.remove_range(start, n, |_| {});
    }
    let now_empty = z.is_empty();
    changed(cx, key, now_empty);
    if !now_empty {
        super::basic::record_del(cx, key, gone);
    }
    let event = match spec {
        Spec::Rank(..) => "zremrangebyrank",
        Spec::Score(_) => "zremrangebyscore",
        Spec::Lex(_) => "zremrangebylex",
    };
    changed_events(cx, key, event, now_empty);
    Reply::Int(n as i64)
}
