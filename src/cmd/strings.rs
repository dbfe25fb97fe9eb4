//! String commands (Redis `t_string.c` semantics).

use super::args::{self, is};
use super::errors;
use super::{CommandSpec, Cx, KeySpec};
use crate::engine::{StrVal, Value};
use crate::protocol::Reply;
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "get",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "string", "fast"],
        group: "string",
        since: "1.0.0",
        summary: "Get the value of a key",
        complexity: "O(1)",
        handler: get,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "set",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "string", "slow"],
        group: "string",
        since: "1.0.0",
        summary: "Set the string value of a key",
        complexity: "O(1)",
        handler: set,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "incr",
        arity: 2,
        flags: &["write", "denyoom", "fast"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "string", "fast"],
        group: "string",
        since: "1.0.0",
        summary: "Increment the integer value of a key by one",
        complexity: "O(1)",
        handler: incr,
        ..CommandSpec::DEFAULT
    },
];

/// The string value at `key`: `Ok(None)` if missing, WRONGTYPE if another type.
fn read_str(cx: &mut Cx, key: &[u8]) -> Result<Option<Bytes>, Reply> {
    match cx.ks.get(key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::Str(s) => Ok(Some(s.to_bytes())),
            #[allow(unreachable_patterns)]
            _ => Err(errors::wrongtype()),
        },
    }
}

fn get(cx: &mut Cx) -> Reply {
    match read_str(cx, &cx.args[1]) {
        Ok(v) => Reply::opt_bulk(v),
        Err(e) => e,
    }
}

/// Parsed `SET` options.
#[derive(Default)]
struct SetOpts {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    /// Absolute deadline in ms.
    expire_at: Option<u64>,
}

/// Parses EX/PX/EXAT/PXAT values into an absolute deadline, with Redis's checks.
pub fn deadline(
    cmd: &str,
    unit_ms: bool,
    absolute: bool,
    arg: &[u8],
    now: u64,
) -> Result<u64, Reply> {
    let v = args::int(arg)?;
    if v <= 0 {
        return Err(errors::invalid_expire(cmd));
    }
    let ms = if unit_ms {
        v
    } else {
        v.checked_mul(1000)
            .ok_or_else(|| errors::invalid_expire(cmd))?
    };
    if absolute {
        return Ok(ms as u64);
    }
    ms.checked_add(now as i64)
        .map(|t| t as u64)
        .ok_or_else(|| errors::invalid_expire(cmd))
}

fn parse_set_opts(cx: &Cx, rest: &[Bytes]) -> Result<SetOpts, Reply> {
    let mut o = SetOpts::default();
    let mut expire: Option<(bool, bool, &Bytes)> = None;
    let mut i = 0;
    while i < rest.len() {
        let a = &rest[i];
        let has_next = i + 1 < rest.len();
        if is(a, "NX") && !o.xx {
            o.nx = true;
        } else if is(a, "XX") && !o.nx {
            o.xx = true;
        } else if is(a, "GET") {
            o.get = true;
        } else if is(a, "KEEPTTL") && expire.is_none() {
            o.keepttl = true;
        } else if (is(a, "EX") || is(a, "PX") || is(a, "EXAT") || is(a, "PXAT"))
            && !o.keepttl
            && expire.is_none()
            && has_next
        {
            let unit_ms = is(a, "PX") || is(a, "PXAT");
            let absolute = is(a, "EXAT") || is(a, "PXAT");
            expire = Some((unit_ms, absolute, &rest[i + 1]));
            i += 1;
        } else {
            return Err(errors::syntax());
        }
        i += 1;
    }
    if let Some((unit_ms, absolute, v)) = expire {
        o.expire_at = Some(deadline("set", unit_ms, absolute, v, cx.now())?);
    }
    Ok(o)
}

fn set(cx: &mut Cx) -> Reply {
    let args = cx.args;
    let o = match parse_set_opts(cx, &args[3..]) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let key = &args[1];
    let old = if o.get {
        match read_str(cx, key) {
            Ok(v) => Some(v),
            Err(e) => return e,
        }
    } else {
        None
    };
    if o.nx || o.xx {
        let found = cx.ks.exists(key);
        if (o.nx && found) || (o.xx && !found) {
            return match old {
                Some(v) => Reply::opt_bulk(v),
                None => Reply::Nil,
            };
        }
    }
    let value = Value::Str(StrVal::from_set(Bytes::copy_from_slice(&args[2])));
    if o.keepttl {
        cx.ks.set_keep_ttl(key, value);
    } else {
        cx.ks.set(key, value, o.expire_at);
    }
    match old {
        Some(v) => Reply::opt_bulk(v),
        None => Reply::OK,
    }
}

/// Adds `delta` to the integer at `key` (INCR/DECR/INCRBY/DECRBY), keeping its TTL.
pub fn incr_by(cx: &mut Cx, key: &[u8], delta: i64) -> Reply {
    let cur = match cx.ks.peek(key) {
        None => 0,
        Some(e) => match &e.value {
            Value::Str(StrVal::Int(i)) => *i,
            Value::Str(StrVal::Bytes { data, .. }) => {
                match crate::protocol::parse::parse_i64(data) {
                    Some(i) => i,
                    None => return errors::not_int(),
                }
            }
            #[allow(unreachable_patterns)]
            _ => return errors::wrongtype(),
        },
    };
    let Some(new) = cur.checked_add(delta) else {
        return errors::err(errors::OVERFLOW);
    };
    match cx.ks.get_mut(key) {
        Some(e) => e.value = Value::Str(StrVal::Int(new)),
        None => {
            cx.ks.set(key, Value::Str(StrVal::Int(new)), None);
        }
    }
    Reply::Int(new)
}

fn incr(cx: &mut Cx) -> Reply {
    incr_by(cx, &cx.args[1], 1)
}
