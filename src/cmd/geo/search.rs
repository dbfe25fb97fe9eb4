//! GEOSEARCH, GEOSEARCHSTORE and the deprecated GEORADIUS family: Redis's
//! `georadiusGeneric`, option for option and error for error.

use super::{coords_reply, distance_reply, lonlat, opt, read, unit};
use crate::cmd::zsets::{self, string2d};
use crate::cmd::{errors, Cx};
use crate::protocol::Reply;
use crate::types::geo::{self, Search, Shape};
use crate::types::zset::{ScoreRange, ZSet};
use bytes::Bytes;
use std::cmp::Ordering;

// Redis's command variants (`RADIUS_COORDS`, ...).
const COORDS: u8 = 1;
const MEMBER: u8 = 1 << 1;
const NOSTORE: u8 = 1 << 2;
const SEARCH: u8 = 1 << 3;
const SEARCHSTORE: u8 = 1 << 4;

pub(super) fn georadius(cx: &mut Cx) -> Reply {
    generic(cx, 1, COORDS)
}

pub(super) fn georadiusbymember(cx: &mut Cx) -> Reply {
    generic(cx, 1, MEMBER)
}

pub(super) fn georadius_ro(cx: &mut Cx) -> Reply {
    generic(cx, 1, COORDS | NOSTORE)
}

pub(super) fn georadiusbymember_ro(cx: &mut Cx) -> Reply {
    generic(cx, 1, MEMBER | NOSTORE)
}

pub(super) fn geosearch(cx: &mut Cx) -> Reply {
    generic(cx, 1, SEARCH)
}

pub(super) fn geosearchstore(cx: &mut Cx) -> Reply {
    generic(cx, 2, SEARCH | SEARCHSTORE)
}

/// `georadiusGetKeys`: the source key, plus the last STORE/STOREDIST key.
pub(super) fn georadius_keys(args: &[Bytes]) -> Vec<usize> {
    let mut keys = vec![1];
    let mut stored = None;
    let mut i = 5;
    while i < args.len() {
        if (opt(&args[i], "store") || opt(&args[i], "storedist")) && i + 1 < args.len() {
            stored = Some(i + 1);
            i += 1;
        }
        i += 1;
    }
    keys.extend(stored);
    keys
}

/// `extractDistanceOrReply`: (radius, metres per unit).
fn radius(n: &[u8], u: &[u8]) -> Result<(f64, f64), Reply> {
    let r = string2d(n).ok_or_else(|| errors::err(errors::GEO_NEED_RADIUS))?;
    if r < 0.0 {
        return Err(errors::err(errors::GEO_RADIUS_NEGATIVE));
    }
    Ok((r, unit(u)?))
}

/// `extractBoxOrReply`: (width, height, metres per unit).
fn bbox(w: &[u8], h: &[u8], u: &[u8]) -> Result<(f64, f64, f64), Reply> {
    let w = string2d(w).ok_or_else(|| errors::err(errors::GEO_NEED_WIDTH))?;
    let h = string2d(h).ok_or_else(|| errors::err(errors::GEO_NEED_HEIGHT))?;
    if h < 0.0 || w < 0.0 {
        return Err(errors::err(errors::GEO_BOX_NEGATIVE));
    }
    Ok((w, h, unit(u)?))
}

/// `longLatFromMember`.
fn member_pos(z: &ZSet, member: &[u8]) -> Result<(f64, f64), Reply> {
    z.score(member)
        .map(geo::decode_score)
        .ok_or_else(|| errors::err(errors::GEO_MEMBER))
}

#[derive(Clone, Copy, PartialEq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// The parsed request.
struct Request {
    center: (f64, f64),
    shape: Shape,
    conversion: f64,
    withdist: bool,
    withhash: bool,
    withcoords: bool,
    sort: Sort,
    any: bool,
    /// 0: unlimited.
    count: i64,
    /// Index of the destination key argument.
    store: Option<usize>,
    storedist: bool,
}

/// A point found inside the shape (Redis's `geoPoint`).
struct Point {
    long: f64,
    lat: f64,
    dist: f64,
    score: f64,
    member: Bytes,
}

/// Parses everything after the source key, looking up FROMMEMBER/BYMEMBER centres in
/// `z` (`None`: no source key, whose checks Redis skips).
fn parse(args: &[Bytes], flags: u8, z: Option<&ZSet>) -> Result<Request, Reply> {
    let has = |f: u8| flags & f != 0;
    let mut req = Request {
        center: (0.0, 0.0),
        shape: Shape::Radius(0.0),
        conversion: 0.0,
        withdist: false,
        withhash: false,
        withcoords: false,
        sort: Sort::None,
        any: false,
        count: 0,
        store: None,
        storedist: false,
    };
    let base = if has(COORDS) {
        req.center = lonlat(&args[2], &args[3])?;
        let (r, conv) = radius(&args[4], &args[5])?;
        (req.shape, req.conversion) = (Shape::Radius(r), conv);
        6
    } else if has(MEMBER) {
        if let Some(z) = z {
            req.center = member_pos(z, &args[2])?;
            let (r, conv) = radius(&args[3], &args[4])?;
            (req.shape, req.conversion) = (Shape::Radius(r), conv);
        }
        5
    } else if has(SEARCHSTORE) {
        req.store = Some(1);
        3
    } else {
        2
    };
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let rest = &args[base.min(args.len())..];
    let remaining = rest.len();
    let mut i = 0;
    while i < remaining {
        let a = &rest[i][..];
        if opt(a, "withdist") {
            req.withdist = true;
        } else if opt(a, "withhash") {
            req.withhash = true;
        } else if opt(a, "withcoord") {
            req.withcoords = true;
        } else if opt(a, "any") {
            req.any = true;
        } else if opt(a, "asc") {
            req.sort = Sort::Asc;
        } else if opt(a, "desc") {
            req.sort = Sort::Desc;
        } else if opt(a, "count") && i + 1 < remaining {
            let n = crate::num::parse_i64(&rest[i + 1]).ok_or_else(errors::not_int)?;
            if n <= 0 {
                return Err(errors::err(errors::GEO_COUNT));
            }
            req.count = n;
            i += 1;
        } else if (opt(a, "store") || opt(a, "storedist"))
            && i + 1 < remaining
            && !has(NOSTORE)
            && !has(SEARCH)
        {
            req.store = Some(base + i + 1);
            req.storedist = opt(a, "storedist");
            i += 1;
        } else if opt(a, "storedist") && has(SEARCH) && has(SEARCHSTORE) {
            req.storedist = true;
        } else if opt(a, "frommember") && i + 1 < remaining && has(SEARCH) && !fromloc {
            if let Some(z) = z {
                req.center = member_pos(z, &rest[i + 1])?;
            }
            frommember = true;
            i += 1;
        } else if opt(a, "fromlonlat") && i + 2 < remaining && has(SEARCH) && !frommember {
            req.center = lonlat(&rest[i + 1], &rest[i + 2])?;
            fromloc = true;
            i += 2;
        } else if opt(a, "byradius") && i + 2 < remaining && has(SEARCH) && !bybox {
            let (r, conv) = radius(&rest[i + 1], &rest[i + 2])?;
            (req.shape, req.conversion) = (Shape::Radius(r), conv);
            byradius = true;
            i += 2;
        } else if opt(a, "bybox") && i + 3 < remaining && has(SEARCH) && !byradius {
            let (w, h, conv) = bbox(&rest[i + 1], &rest[i + 2], &rest[i + 3])?;
            (req.shape, req.conversion) = (Shape::Box(w, h), conv);
            bybox = true;
            i += 3;
        } else {
            return Err(errors::syntax());
        }
        i += 1;
    }
    if req.store.is_some() && (req.withdist || req.withhash || req.withcoords) {
        let what = if has(SEARCHSTORE) {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(Reply::error(format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    let name = String::from_utf8_lossy(&args[0]);
    if has(SEARCH) && !(frommember || fromloc) {
        return Err(Reply::error(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if has(SEARCH) && !(byradius || bybox) {
        return Err(Reply::error(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if req.any && req.count == 0 {
        return Err(errors::err(errors::GEO_ANY));
    }
    Ok(req)
}

/// `membersOfAllNeighbors`: the points inside the shape, box by box in Redis's order;
/// `limit` (COUNT with ANY) stops the scan once that many were found.
fn find(z: &ZSet, search: &Search, limit: usize) -> Vec<Point> {
    let boxes = search.boxes();
    let mut out: Vec<Point> = Vec::new();
    let full = |out: &Vec<Point>| limit != 0 && out.len() >= limit;
    // Redis's `last_processed`: 0 (the centre) also means "none yet", so a box equal to the
    // centre is never skipped.
    let mut last = 0usize;
    for (i, b) in boxes.iter().enumerate() {
        if b.is_zero() {
            continue;
        }
        // Huge radii make neighbouring boxes coincide: skip a repeat of the last one.
        if last != 0 && boxes[last] == *b {
            continue;
        }
        if full(&out) {
            break;
        }
        let (min, max) = geo::score_range(*b);
        let range = ScoreRange {
            min: min as f64,
            max: max as f64,
            minex: false,
            maxex: true,
        };
        if range.min <= range.max {
            for item in z.iter_at(z.score_first(&range)) {
                if !range.lte_max(item.score) {
                    break;
                }
                let (long, lat) = geo::decode_score(item.score);
                if let Some(dist) = search.within(long, lat) {
                    out.push(Point {
                        long,
                        lat,
                        dist,
                        score: item.score,
                        member: item.member.clone(),
                    });
                }
                if full(&out) {
                    break;
                }
            }
        }
        last = i;
    }
    out
}

/// C's `(long long)` of a score (x86-64: out of range gives `LLONG_MIN`).
fn score_to_i64(s: f64) -> i64 {
    let two63 = 2f64.powi(63);
    if (-two63..two63).contains(&s) {
        s as i64
    } else {
        i64::MIN
    }
}

fn generic(cx: &mut Cx, src: usize, flags: u8) -> Reply {
    let args = cx.args;
    let resp3 = cx.sess.resp3;
    let z = match read(cx, &args[src]) {
        Ok(z) => z,
        Err(e) => return e,
    };
    let req = match parse(args, flags, z) {
        Ok(r) => r,
        Err(e) => return e,
    };
    // Only the keys the key spec names are locked; the parser and `georadius_keys` agree
    // on every valid command, so this never fires, but it keeps the rule unbreakable.
    if req
        .store
        .is_some_and(|d| d != 1 && georadius_keys(args).last() != Some(&d))
    {
        return errors::syntax();
    }
    let Some(z) = z else {
        return match req.store {
            Some(dst) => zsets::store_result(cx, &args[dst], ZSet::new(true), ""),
            None => Reply::Array(Vec::new()),
        };
    };
    // COUNT without an order means the closest ones (not with ANY).
    let mut sort = req.sort;
    if req.count != 0 && sort == Sort::None && !req.any {
        sort = Sort::Asc;
    }
    let search = Search {
        long: req.center.0,
        lat: req.center.1,
        shape: req.shape,
        conversion: req.conversion,
    };
    let limit = if req.any {
        usize::try_from(req.count).unwrap_or(usize::MAX)
    } else {
        0
    };
    let mut points = find(z, &search, limit);
    if points.is_empty() && req.store.is_none() {
        return Reply::Array(Vec::new());
    }
    let returned = match usize::try_from(req.count) {
        Ok(c) if c > 0 && c < points.len() => c,
        _ => points.len(),
    };
    if sort != Sort::None {
        // `sort_gp_asc`/`sort_gp_desc` (distances are never NaN).
        let desc = sort == Sort::Desc;
        let cmp = |a: &Point, b: &Point| {
            let o = a.dist.partial_cmp(&b.dist).unwrap_or(Ordering::Equal);
            if desc {
                o.reverse()
            } else {
                o
            }
        };
        if returned == points.len() {
            // glibc's `qsort` is a stable merge sort, as `sort_by` is.
            points.sort_by(cmp);
        } else {
            crate::types::pqsort::pqsort(&mut points, 0, returned - 1, &cmp);
        }
    }
    points.truncate(returned);
    for p in &mut points {
        p.dist /= req.conversion;
    }
    if let Some(dst) = req.store {
        let mut out = ZSet::new(true);
        for p in points {
            let score = if req.storedist { p.dist } else { p.score };
            out.upsert(&p.member, score);
        }
        let event = if flags & SEARCH != 0 {
            "geosearchstore"
        } else {
            "georadiusstore"
        };
        let reply = zsets::store_result(cx, &args[dst], out, event);
        // Redis counts each stored member as a change.
        if let Reply::Int(n @ 1..) = reply {
            cx.changes(n as u64);
        }
        return reply;
    }
    let options = [req.withdist, req.withhash, req.withcoords]
        .iter()
        .filter(|&&o| o)
        .count();
    let rows = points
        .into_iter()
        .map(|p| {
            if options == 0 {
                return Reply::Bulk(p.member);
            }
            let mut row = Vec::with_capacity(options + 1);
            row.push(Reply::Bulk(p.member));
            if req.withdist {
                row.push(distance_reply(p.dist));
            }
            if req.withhash {
                row.push(Reply::Int(score_to_i64(p.score)));
            }
            if req.withcoords {
                row.push(coords_reply(resp3, (p.long, p.lat)));
            }
            Reply::Array(row)
        })
        .collect();
    Reply::Array(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<Bytes> {
        s.split(' ')
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    #[test]
    fn radius_keys_take_the_last_store() {
        assert_eq!(georadius_keys(&args("GEORADIUS k 0 0 1 km")), vec![1]);
        assert_eq!(
            georadius_keys(&args("GEORADIUS k 0 0 1 km STORE d")),
            vec![1, 7]
        );
        assert_eq!(
            georadius_keys(&args("GEORADIUS k 0 0 1 km store a STOREDIST b")),
            vec![1, 9]
        );
        assert_eq!(
            georadius_keys(&args("GEORADIUSBYMEMBER k m 1 km STORE")),
            vec![1]
        );
        assert_eq!(
            georadius_keys(&args("GEORADIUSBYMEMBER k m 1 km storedist d")),
            vec![1, 6]
        );
    }

    #[test]
    fn hash_replies_truncate_like_c() {
        assert_eq!(score_to_i64(3479099956230698.0), 3479099956230698);
        assert_eq!(score_to_i64(1.5), 1);
        assert_eq!(score_to_i64(1e300), i64::MIN);
        assert_eq!(score_to_i64(-1e300), i64::MIN);
    }
}
