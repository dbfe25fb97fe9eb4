//! Geo commands (Redis 7.2 `geo.c`) over sorted sets whose scores are 52-bit geohashes
//! (the math lives in [`crate::types::geo`]): GEOADD (a rewritten ZADD, as in Redis),
//! GEODIST, GEOHASH, GEOPOS here; GEOSEARCH[STORE] and the GEORADIUS family in `search`.

mod search;
mod table;

pub use table::COMMANDS;

use super::zsets::{self, string2d};
use super::{errors, Cx};
use crate::protocol::Reply;
use crate::types::geo;
use crate::types::value::Value;
use crate::types::zset::ZSet;
use bytes::Bytes;

/// An option name compared as Redis's `strcasecmp` on a C string (the argument's text ends
/// at its first NUL byte).
fn opt(arg: &[u8], name: &str) -> bool {
    let end = arg.iter().position(|&b| b == 0).unwrap_or(arg.len());
    arg[..end].eq_ignore_ascii_case(name.as_bytes())
}

/// `lookupKeyRead` + `checkType`: `None` if missing, WRONGTYPE for another type.
fn read<'c>(cx: &'c mut Cx, key: &[u8]) -> Result<Option<&'c ZSet>, Reply> {
    match cx.ks.get(key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::ZSet(z) => Ok(Some(z)),
            _ => Err(errors::wrongtype()),
        },
    }
}

/// `extractLongLatOrReply`.
fn lonlat(long: &[u8], lat: &[u8]) -> Result<(f64, f64), Reply> {
    let long = string2d(long).ok_or_else(|| errors::err(errors::NOT_FLOAT))?;
    let lat = string2d(lat).ok_or_else(|| errors::err(errors::NOT_FLOAT))?;
    if !(geo::LONG_MIN..=geo::LONG_MAX).contains(&long)
        || !(geo::LAT_MIN..=geo::LAT_MAX).contains(&lat)
    {
        return Err(errors::geo_lonlat(long, lat));
    }
    Ok((long, lat))
}

/// `extractUnitOrReply`: metres per unit.
fn unit(arg: &[u8]) -> Result<f64, Reply> {
    if opt(arg, "m") {
        Ok(1.0)
    } else if opt(arg, "km") {
        Ok(1000.0)
    } else if opt(arg, "ft") {
        Ok(0.3048)
    } else if opt(arg, "mi") {
        Ok(1609.34)
    } else {
        Err(errors::err(errors::GEO_UNIT))
    }
}

/// A distance reply: a bulk string with 4 decimals in both protocols.
fn distance_reply(d: f64) -> Reply {
    Reply::Bulk(Bytes::from(geo::format_distance(d)))
}

/// `addReplyHumanLongDouble`: a bulk string in RESP2; in RESP3 a `,` double with the same
/// text (17 decimals, not the shortest form), so it is written pre-encoded.
fn coord_reply(resp3: bool, v: f64) -> Reply {
    let s = geo::format_coord(v);
    if resp3 {
        Reply::Raw(Bytes::from(format!(",{s}\r\n")))
    } else {
        Reply::Bulk(Bytes::from(s))
    }
}

fn coords_reply(resp3: bool, (long, lat): (f64, f64)) -> Reply {
    Reply::Array(vec![coord_reply(resp3, long), coord_reply(resp3, lat)])
}

/// GEOADD key [NX|XX] [CH] long lat member [...]: validated here, then run as
/// `ZADD key [options] score member ...` with each score the point's geohash.
fn geoadd(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let (mut nx, mut xx) = (false, false);
    let mut longidx = 2;
    while longidx < args.len() {
        let a = &args[longidx];
        if opt(a, "nx") {
            nx = true;
        } else if opt(a, "xx") {
            xx = true;
        } else if !opt(a, "ch") {
            break;
        }
        longidx += 1;
    }
    let rest = &args[longidx..];
    if !rest.len().is_multiple_of(3) || (xx && nx) {
        return errors::syntax();
    }
    let mut zargs = Vec::with_capacity(longidx + rest.len() / 3 * 2);
    zargs.push(Bytes::from_static(b"zadd"));
    zargs.extend(args[1..longidx].iter().cloned());
    for t in rest.chunks_exact(3) {
        let (long, lat) = match lonlat(&t[0], &t[1]) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let mut digits = itoa::Buffer::new();
        let score = digits.format(geo::score_of(long, lat));
        zargs.push(Bytes::copy_from_slice(score.as_bytes()));
        zargs.push(t[2].clone());
    }
    let mut sub = Cx {
        args: &zargs,
        ks: &mut *cx.ks,
        sess: &mut *cx.sess,
        srv: cx.srv,
        spec: cx.spec,
    };
    zsets::zadd(&mut sub)
}

/// GEODIST key member1 member2 [unit]
fn geodist(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let to_meter = match args.len() {
        5 => match unit(&args[4]) {
            Ok(u) => u,
            Err(e) => return e,
        },
        n if n > 5 => return errors::syntax(),
        _ => 1.0,
    };
    let z = match read(cx, &args[1]) {
        Ok(Some(z)) => z,
        Ok(None) => return Reply::Nil,
        Err(e) => return e,
    };
    let (Some(s1), Some(s2)) = (z.score(&args[2]), z.score(&args[3])) else {
        return Reply::Nil;
    };
    let (a, b) = (geo::decode_score(s1), geo::decode_score(s2));
    distance_reply(geo::distance(a.0, a.1, b.0, b.1) / to_meter)
}

/// GEOHASH key [member ...]
fn geohash(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let z = match read(cx, &args[1]) {
        Ok(z) => z,
        Err(e) => return e,
    };
    let items = args[2..]
        .iter()
        .map(|m| match z.and_then(|z| z.score(m)) {
            Some(s) => Reply::Bulk(Bytes::copy_from_slice(&geo::geohash_string(s))),
            None => Reply::Nil,
        })
        .collect();
    Reply::Array(items)
}

/// GEOPOS key [member ...]
fn geopos(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let resp3 = cx.sess.resp3;
    let z = match read(cx, &args[1]) {
        Ok(z) => z,
        Err(e) => return e,
    };
    let items = args[2..]
        .iter()
        .map(|m| match z.and_then(|z| z.score(m)) {
            Some(s) => coords_reply(resp3, geo::decode_score(s)),
            None => Reply::NilArray,
        })
        .collect();
    Reply::Array(items)
}
