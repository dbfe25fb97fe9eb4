//! Conversions between command replies and Lua values, as Redis 7.2's script_lua.c does
//! them (`redisProtocolToLuaType` one way, `luaReplyToRedisReply` the other).

use crate::num::format_double;
use crate::protocol::Reply;
use bytes::Bytes;
use mlua::{Lua, Table, Value};

/// The error-table text Redis builds from an error reply (`luaPushErrorBuff`): a message
/// with no space gets the generic `ERR` code, and trailing newlines are trimmed.
pub fn error_text(msg: &str) -> String {
    let msg = msg.strip_prefix('-').unwrap_or(msg);
    let out = match msg.split_once(' ') {
        Some(_) => msg.to_string(),
        None => format!("ERR {msg}"),
    };
    out.trim_end_matches(['\r', '\n']).to_string()
}

/// `{err = text}` as Redis pushes it for a failed command (with the flag telling the
/// final reply not to count the error twice).
pub fn error_table(lua: &Lua, text: &str) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(text)?)?;
    t.raw_set("ignore_error_stats_update", true)?;
    Ok(t)
}

/// Whether a script's error value is one whose stats were counted when the command
/// that produced it failed (the `ignore_error_stats_update` field Redis sets).
pub fn stats_counted(v: &Value) -> bool {
    match v {
        Value::Table(t) => {
            matches!(t.raw_get::<Value>("err"), Ok(Value::String(_)))
                && !matches!(
                    t.raw_get::<Value>("ignore_error_stats_update"),
                    Ok(Value::Nil | Value::Boolean(false)) | Err(_)
                )
        }
        _ => false,
    }
}

/// A command's reply as the script sees it. `resp3` is the protocol the script chose
/// with `redis.setresp` (RESP2 shapes by default).
pub fn reply_to_lua(lua: &Lua, r: Reply, resp3: bool) -> mlua::Result<Value> {
    Ok(match r {
        Reply::Status(s) => {
            let t = lua.create_table()?;
            t.raw_set("ok", lua.create_string(s.as_bytes())?)?;
            Value::Table(t)
        }
        Reply::Error(e) => Value::Table(error_table(lua, &error_text(&e))?),
        Reply::Int(i) => Value::Number(i as f64),
        Reply::Bulk(b) | Reply::Verbatim(b) if !resp3 => Value::String(lua.create_string(&b)?),
        Reply::Bulk(b) => Value::String(lua.create_string(&b)?),
        Reply::Verbatim(b) => {
            let inner = lua.create_table()?;
            inner.raw_set("format", "txt")?;
            inner.raw_set("string", lua.create_string(&b)?)?;
            let t = lua.create_table()?;
            t.raw_set("verbatim_string", inner)?;
            Value::Table(t)
        }
        Reply::Nil | Reply::NilArray => {
            if resp3 {
                Value::Nil
            } else {
                Value::Boolean(false)
            }
        }
        Reply::Array(items) | Reply::Push(items) => array(lua, items, resp3)?,
        Reply::Set(items) if !resp3 => array(lua, items, resp3)?,
        Reply::Set(items) => {
            let inner = lua.create_table()?;
            for it in items {
                inner.raw_set(reply_to_lua(lua, it, resp3)?, true)?;
            }
            let t = lua.create_table()?;
            t.raw_set("set", inner)?;
            Value::Table(t)
        }
        Reply::Map(pairs) if !resp3 => {
            let t = lua.create_table_with_capacity(pairs.len() * 2, 0)?;
            let mut i = 1;
            for (k, v) in pairs {
                t.raw_set(i, reply_to_lua(lua, k, resp3)?)?;
                t.raw_set(i + 1, reply_to_lua(lua, v, resp3)?)?;
                i += 2;
            }
            Value::Table(t)
        }
        Reply::Map(pairs) => {
            let inner = lua.create_table()?;
            for (k, v) in pairs {
                inner.raw_set(reply_to_lua(lua, k, resp3)?, reply_to_lua(lua, v, resp3)?)?;
            }
            let t = lua.create_table()?;
            t.raw_set("map", inner)?;
            Value::Table(t)
        }
        Reply::Double(d) if !resp3 => Value::String(lua.create_string(format_double(d))?),
        Reply::Double(d) => {
            let t = lua.create_table()?;
            t.raw_set("double", d)?;
            Value::Table(t)
        }
        Reply::Bool(b) if !resp3 => Value::Number(if b { 1.0 } else { 0.0 }),
        Reply::Bool(b) => Value::Boolean(b),
        Reply::Raw(bytes) => match parse_raw(&bytes) {
            Some(r) => reply_to_lua(lua, r, resp3)?,
            None => Value::Boolean(false),
        },
        Reply::NoReply => Value::Boolean(false),
    })
}

fn array(lua: &Lua, items: Vec<Reply>, resp3: bool) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, it) in items.into_iter().enumerate() {
        t.raw_set(i + 1, reply_to_lua(lua, it, resp3)?)?;
    }
    Ok(Value::Table(t))
}

/// Pre-encoded replies (`Reply::Raw`) are arrays of bulk strings or scalars; decode them
/// back so scripts see the same shapes as for structured replies.
fn parse_raw(buf: &[u8]) -> Option<Reply> {
    let mut pos = 0;
    let r = parse_one(buf, &mut pos, 0)?;
    Some(r)
}

fn line<'a>(buf: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let rest = buf.get(*pos..)?;
    let end = rest.windows(2).position(|w| w == b"\r\n")?;
    *pos += end + 2;
    Some(&rest[..end])
}

fn parse_one(buf: &[u8], pos: &mut usize, depth: usize) -> Option<Reply> {
    if depth > 64 {
        return None;
    }
    let l = line(buf, pos)?;
    let (&kind, body) = l.split_first()?;
    let num = || crate::num::parse_i64(body);
    Some(match kind {
        b'+' => Reply::Status(String::from_utf8_lossy(body).into_owned().into()),
        b'-' => Reply::Error(String::from_utf8_lossy(body).into_owned().into()),
        b':' => Reply::Int(num()?),
        b'_' => Reply::Nil,
        // A RESP3 double pre-encoded by a command (GEOPOS coordinates keep Redis's text).
        b',' => Reply::Double(std::str::from_utf8(body).ok()?.parse().ok()?),
        b'$' => {
            let n = num()?;
            if n < 0 {
                return Some(Reply::Nil);
            }
            let n = usize::try_from(n).ok()?;
            let data = buf.get(*pos..pos.checked_add(n)?)?;
            *pos += n + 2;
            Reply::Bulk(Bytes::copy_from_slice(data))
        }
        b'*' => {
            let n = num()?;
            if n < 0 {
                return Some(Reply::NilArray);
            }
            let mut items = Vec::new();
            for _ in 0..n {
                items.push(parse_one(buf, pos, depth + 1)?);
            }
            Reply::Array(items)
        }
        _ => return None,
    })
}

/// Nodes a reply may spend inside tables it already converted once (shared or cyclic
/// tables), beyond `REPEAT_PER_FRESH` per node outside them: `t[1] = t; t[2] = t` would
/// otherwise build 2^1000 nodes, while a table shared by every row of a big reply (say
/// an empty placeholder) stays allowed.
const REPEAT_BUDGET: usize = 1 << 18;
const REPEAT_PER_FRESH: usize = 4;
/// The error that replaces a reply over that budget.
pub const REPLY_TOO_LARGE: &str =
    "ERR Lua reply too large: a table is repeated in it too many times";
/// Redis refuses to descend further than its reply nesting limit.
const MAX_DEPTH: usize = 1000;

/// A table being converted: its kind, the children still to convert and the replies of
/// those done. The walk keeps these on a heap stack, not the thread's stack: a deeply
/// nested reply (up to `MAX_DEPTH`) must not overflow a 2 MiB worker stack.
struct Frame {
    kind: Kind,
    done: Vec<Reply>,
    /// Whether this table had been entered before (it counts against the budget).
    repeat: bool,
}

enum Kind {
    /// A plain table read as an array: the next index to read.
    Array(Table, i64),
    /// `{map = ...}`: its keys and values, flattened, and the next to convert.
    Map(Vec<Value>, usize),
    /// `{set = ...}`: its members and the next to convert.
    Set(Vec<Value>, usize),
}

impl Frame {
    /// The next child to convert, or `None` when the table is done.
    fn next_child(&mut self) -> Option<Value> {
        match &mut self.kind {
            Kind::Array(t, i) => match t.raw_get::<Value>(*i) {
                Ok(Value::Nil) | Err(_) => None,
                Ok(v) => {
                    *i += 1;
                    Some(v)
                }
            },
            Kind::Map(items, i) | Kind::Set(items, i) => {
                let v = items.get(*i).cloned();
                *i += 1;
                v
            }
        }
    }

    fn finish(self) -> Reply {
        match self.kind {
            Kind::Array(..) => Reply::Array(self.done),
            Kind::Set(..) => Reply::Set(self.done),
            Kind::Map(..) => {
                let mut out = Vec::with_capacity(self.done.len() / 2);
                let mut it = self.done.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    out.push((k, v));
                }
                Reply::Map(out)
            }
        }
    }
}

/// A script's return value as the client's reply (`luaReplyToRedisReply`). `resp3` is
/// the script's `redis.setresp` choice: it decides how booleans come back.
pub fn lua_to_reply(v: &Value, resp3: bool) -> Reply {
    if !matches!(v, Value::Table(_)) {
        return scalar(v, resp3);
    }
    let mut seen = std::collections::HashSet::new();
    let mut stack: Vec<Frame> = Vec::new();
    // Repeated tables on the stack, and nodes converted inside them.
    let (mut in_repeat, mut repeated, mut fresh) = (0usize, 0usize, 0usize);
    let mut pending = v.clone();
    loop {
        if in_repeat == 0 {
            fresh += 1;
        } else {
            repeated += 1;
            if repeated > REPEAT_BUDGET + fresh.saturating_mul(REPEAT_PER_FRESH) {
                return Reply::error(REPLY_TOO_LARGE);
            }
        }
        let reply = match pending {
            Value::Table(t) if stack.len() > MAX_DEPTH => {
                drop(t);
                Some(Reply::error("ERR reached lua stack limit"))
            }
            Value::Table(t) => match leaf_or_kind(&t) {
                Ok(r) => Some(r),
                Err(kind) => {
                    let repeat = !seen.insert(t.to_pointer() as usize);
                    in_repeat += usize::from(repeat);
                    stack.push(Frame {
                        kind,
                        done: Vec::new(),
                        repeat,
                    });
                    None
                }
            },
            other => Some(scalar(&other, resp3)),
        };
        if let Some(r) = reply {
            match stack.last_mut() {
                Some(top) => top.done.push(r),
                None => return r,
            }
        }
        // The next child of the innermost unfinished table; finished ones go up.
        pending = loop {
            let top = stack.last_mut().expect("a table is being converted");
            if let Some(child) = top.next_child() {
                break child;
            }
            let done = stack.pop().expect("non-empty");
            in_repeat -= usize::from(done.repeat);
            let r = done.finish();
            match stack.last_mut() {
                Some(parent) => parent.done.push(r),
                None => return r,
            }
        };
    }
}

/// A non-table value's reply.
fn scalar(v: &Value, resp3: bool) -> Reply {
    match v {
        Value::Nil => Reply::Nil,
        Value::Boolean(b) if resp3 => Reply::Bool(*b),
        Value::Boolean(true) => Reply::Int(1),
        Value::Boolean(false) => Reply::Nil,
        Value::Integer(i) => Reply::Int(*i),
        Value::Number(n) => Reply::Int(number_to_int(*n)),
        Value::String(s) => Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        _ => Reply::Nil,
    }
}

/// A table that is a reply by itself (error, status, double, big number), or the kind
/// of container it is.
fn leaf_or_kind(t: &Table) -> Result<Reply, Kind> {
    if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
        let msg = String::from_utf8_lossy(&e.as_bytes()).into_owned();
        return Ok(Reply::Error(sanitize(&msg).into()));
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
        let msg = String::from_utf8_lossy(&s.as_bytes()).into_owned();
        return Ok(Reply::Status(sanitize(&msg).into()));
    }
    match t.raw_get::<Value>("double") {
        Ok(Value::Number(d)) => return Ok(Reply::Double(d)),
        Ok(Value::Integer(d)) => return Ok(Reply::Double(d as f64)),
        _ => {}
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("big_number") {
        return Ok(Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())));
    }
    // `{verbatim_string = {format = ..., string = ...}}`: both fields must be strings.
    // The reply type carries no format: every one is sent as `txt`.
    if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string") {
        if let (Ok(Value::String(_)), Ok(Value::String(s))) =
            (v.raw_get::<Value>("format"), v.raw_get::<Value>("string"))
        {
            return Ok(Reply::Verbatim(Bytes::copy_from_slice(&s.as_bytes())));
        }
    }
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
        let mut items = Vec::new();
        for (k, v) in m.pairs::<Value, Value>().flatten() {
            items.push(k);
            items.push(v);
        }
        return Err(Kind::Map(items, 0));
    }
    if let Ok(Value::Table(s)) = t.raw_get::<Value>("set") {
        let items = s
            .pairs::<Value, Value>()
            .flatten()
            .map(|(k, _)| k)
            .collect();
        return Err(Kind::Set(items, 0));
    }
    Err(Kind::Array(t.clone(), 1))
}

/// C's `(long long)` cast of a Lua number: truncation toward zero (saturating here, where
/// C is undefined).
/// Redis casts with C's `(long long)`: on x86-64 every value outside the i64 range (and
/// NaN) becomes i64::MIN, where Rust's `as` would saturate.
pub fn number_to_int(n: f64) -> i64 {
    if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

/// Error and status lines cannot carry newlines: Redis turns them into spaces.
fn sanitize(s: &str) -> String {
    s.replace(['\r', '\n'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes() {
        assert_eq!(error_text("My"), "ERR My");
        assert_eq!(error_text("-X yz"), "X yz");
        assert_eq!(error_text("-"), "ERR ");
        assert_eq!(error_text("WRONGTYPE Op\r\n"), "WRONGTYPE Op");
    }

    #[test]
    fn truncation() {
        assert_eq!(number_to_int(3.99), 3);
        assert_eq!(number_to_int(-3.99), -3);
        assert_eq!(number_to_int(1e300), i64::MIN);
        assert_eq!(number_to_int(9_223_372_036_854_775_808.0), i64::MIN);
        assert_eq!(number_to_int(-9_223_372_036_854_775_808.0), i64::MIN);
        assert_eq!(number_to_int(f64::NAN), i64::MIN);
    }

    #[test]
    fn raw_arrays() {
        let r = parse_raw(b"*2\r\n$1\r\na\r\n$2\r\nbc\r\n").unwrap();
        assert_eq!(
            r,
            Reply::Array(vec![Reply::bulk_static("a"), Reply::bulk_static("bc")])
        );
    }
}
