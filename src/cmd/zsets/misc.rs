//! ZRANDMEMBER and ZSCAN.

use super::{opt, read, Rows};
use crate::cmd::{args, errors, Cx};
use crate::num::dtoa::{d2string, g17};
use crate::num::parse_i64;
use crate::protocol::Reply;
use crate::types::glob::glob_match;
use crate::types::zset::ZSet;
use bytes::Bytes;
use rand::seq::SliceRandom;
use rand::Rng;
use std::collections::HashSet;

/// Largest reply ZRANDMEMBER builds: Redis streams any count to the client, we build the
/// reply in memory first, so absurd counts are refused instead of exhausting memory.
const RANDMEMBER_MAX: u64 = 1 << 24;

/// ZRANDMEMBER key [count [WITHSCORES]].
pub fn zrandmember(cx: &mut Cx) -> Reply {
    let args = cx.args;
    if args.len() >= 3 {
        let l = match parse_i64(&args[2]) {
            None => return errors::not_int(),
            Some(i64::MIN) => return errors::err(errors::COUNT_RANGE),
            Some(l) => l,
        };
        if args.len() > 4 || (args.len() == 4 && !opt(&args[3], "withscores")) {
            return errors::syntax();
        }
        let withscores = args.len() == 4;
        if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
            return errors::err(errors::OUT_OF_RANGE);
        }
        return with_count(cx, l, withscores);
    }
    let srv = cx.srv;
    match read(cx, &args[1]) {
        Ok(Some(z)) => {
            let r = srv.rng.lock().gen_range(0..z.len());
            z.get(r)
                .map_or(Reply::Nil, |it| Reply::Bulk(it.member.clone()))
        }
        Ok(None) => Reply::Nil,
        Err(e) => e,
    }
}

/// `zrandmemberWithCountCommand`.
fn with_count(cx: &mut Cx, l: i64, withscores: bool) -> Reply {
    let resp3 = cx.sess.resp3;
    let args = cx.args;
    let srv = cx.srv;
    let z = match read(cx, &args[1]) {
        Ok(Some(z)) => z,
        Ok(None) => return Reply::Array(Vec::new()),
        Err(e) => return e,
    };
    let count = l.unsigned_abs();
    let unique = l >= 0;
    if count == 0 {
        return Reply::Array(Vec::new());
    }
    let size = z.len();
    let mut guard = srv.rng.lock();
    let mut rng = &mut *guard;
    // Negative count: independent picks, repeats allowed.
    if !unique || count == 1 {
        let limit = super::super::refusals::reply_limit(srv);
        if count > RANDMEMBER_MAX && limit == usize::MAX {
            return errors::err(errors::OUT_OF_RANGE);
        }
        let mut bytes = 0usize;
        let mut rows = Rows::new(resp3, withscores, count.min(1 << 16) as usize);
        for _ in 0..count {
            if let Some(it) = z.get(rng.gen_range(0..size)) {
                // At most the encoded size (a score adds at least 5 more).
                bytes += it.member.len() + if withscores { 10 } else { 5 };
                rows.push(&it.member, it.score);
            }
            // Over the output limit: the client is closed unsent, as Redis stops the loop.
            if bytes > limit {
                break;
            }
        }
        return rows.reply();
    }
    let mut rows = Rows::new(resp3, withscores, size.min(count as usize));
    // Asking for at least the whole set returns it, walked from the highest score as
    // Redis's iterator does.
    if count >= size as u64 {
        for it in z.iter_rev_from(size - 1) {
            rows.push(&it.member, it.score);
        }
        return rows.reply();
    }
    let picked = sample(z, count as usize, &mut rng);
    for r in picked {
        if let Some(it) = z.get(r) {
            rows.push(&it.member, it.score);
        }
    }
    rows.reply()
}

/// `count` distinct ranks (Floyd's algorithm). A listpack answers them in set order (Redis's
/// `lpRandomPairsUnique`), a skiplist in random order.
fn sample(z: &ZSet, count: usize, rng: &mut impl Rng) -> Vec<usize> {
    let size = z.len();
    let mut chosen: HashSet<usize> = HashSet::with_capacity(count);
    let mut out = Vec::with_capacity(count);
    for j in size - count..size {
        let t = rng.gen_range(0..=j);
        let pick = if chosen.insert(t) { t } else { j };
        if pick == j {
            chosen.insert(j);
        }
        out.push(pick);
    }
    if z.is_skiplist() {
        out.shuffle(rng);
    } else {
        out.sort_unstable();
    }
    out
}

/// A score as ZSCAN prints it in Redis 7.2: a listpack holds the `d2string` text written
/// on insertion; a skiplist's dict entry is printed with `ld2string(.., LD_STR_AUTO)`, that
/// is `%.17Lg` (so `0.1` comes back as `0.10000000000000001`).
fn score_text(d: f64, skiplist: bool) -> Bytes {
    Bytes::from(if skiplist { g17(d) } else { d2string(d) })
}

/// ZSCAN key cursor [MATCH pattern] [COUNT count].
pub fn zscan(cx: &mut Cx) -> Reply {
    let argv = cx.args;
    let cursor = match args::scan_cursor(&argv[2]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    // Options are checked after the key, as Redis does (a missing key scans empty).
    let opts = scan_options(&argv[3..]);
    let z = match read(cx, &argv[1]) {
        Ok(Some(z)) => z,
        Ok(None) => return Reply::Array(vec![Reply::bulk_static("0"), Reply::Array(Vec::new())]),
        Err(e) => return e,
    };
    let (pattern, count) = match opts {
        Ok(o) => o,
        Err(e) => return e,
    };
    let skiplist = z.is_skiplist();
    let mut items: Vec<(Bytes, f64)> = Vec::new();
    let next = if skiplist {
        z.scan(cursor, count, &mut items)
    } else {
        // A listpack is returned whole in one call.
        items.extend(z.iter().map(|it| (it.member.clone(), it.score)));
        0
    };
    let mut out = Vec::with_capacity(items.len() * 2);
    for (member, score) in items {
        if pattern.is_some_and(|p| !glob_match(p, &member, false)) {
            continue;
        }
        out.push(Reply::Bulk(member));
        out.push(Reply::Bulk(score_text(score, skiplist)));
    }
    Reply::Array(vec![
        Reply::Bulk(Bytes::copy_from_slice(
            itoa::Buffer::new().format(next).as_bytes(),
        )),
        Reply::Array(out),
    ])
}

/// MATCH (None when it matches everything) and COUNT of a ZSCAN.
fn scan_options(rest: &[Bytes]) -> Result<(Option<&[u8]>, usize), Reply> {
    let mut pattern = None;
    let mut count = 10usize;
    let mut i = 0;
    while i < rest.len() {
        let left = rest.len() - i;
        if opt(&rest[i], "count") && left >= 2 {
            let n = parse_i64(&rest[i + 1]).ok_or_else(errors::not_int)?;
            if n < 1 {
                return Err(errors::syntax());
            }
            count = usize::try_from(n).unwrap_or(usize::MAX);
            i += 2;
        } else if opt(&rest[i], "match") && left >= 2 {
            let p = &rest[i + 1][..];
            pattern = (p != b"*").then_some(p);
            i += 2;
        } else if opt(&rest[i], "novalues") {
            return Err(errors::err(errors::NOVALUES_HSCAN_ONLY));
        } else {
            return Err(errors::syntax());
        }
    }
    Ok((pattern, count))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_text_follows_the_encoding() {
        assert_eq!(&score_text(1.0, false)[..], b"1");
        assert_eq!(&score_text(-0.0, false)[..], b"-0");
        assert_eq!(&score_text(0.1, false)[..], b"0.1");
        assert_eq!(&score_text(1e17, false)[..], b"100000000000000000");
        assert_eq!(&score_text(f64::INFINITY, false)[..], b"inf");
        assert_eq!(&score_text(1.0, true)[..], b"1");
        assert_eq!(&score_text(0.1, true)[..], b"0.10000000000000001");
        assert_eq!(&score_text(1e17, true)[..], b"1e+17");
        assert_eq!(&score_text(f64::NEG_INFINITY, true)[..], b"-inf");
    }

    #[test]
    fn sample_is_distinct() {
        let mut z = ZSet::new(false);
        for i in 0..50u32 {
            z.insert(Bytes::from(format!("m{i}")), f64::from(i));
        }
        let mut rng = rand::thread_rng();
        for count in [1, 10, 49] {
            let s = sample(&z, count, &mut rng);
            let set: HashSet<_> = s.iter().collect();
            assert_eq!(set.len(), count);
            assert!(s.iter().all(|&r| r < 50));
            assert!(s.windows(2).all(|w| w[0] < w[1]), "listpack order");
        }
    }
}
