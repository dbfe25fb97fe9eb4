//! Reading redis-rs `Value` replies: text, integers, arrays and field maps the same way
//! under RESP2 and RESP3. Not re-exported at the top (the names are short): use
//! `common::values::{text, int, …}`.

use super::HANG_GUARD;
use redis::aio::MultiplexedConnection;
use redis::Value;
use std::collections::HashMap;

/// Text of a bulk, status or integer reply; anything else panics.
pub fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Okay => "OK".into(),
        other => panic!("not text: {other:?}"),
    }
}

/// Text of any reply: [`text`]'s, an error as `ERROR …`, anything else in debug form (for
/// replies compared as a whole).
pub fn any_text(v: &Value) -> String {
    match v {
        Value::BulkString(_) | Value::SimpleString(_) | Value::Int(_) | Value::Okay => text(v),
        Value::ServerError(e) => format!("ERROR {e:?}"),
        other => format!("{other:?}"),
    }
}

/// [`any_text`] of each element.
pub fn texts(r: &[Value]) -> Vec<String> {
    r.iter().map(any_text).collect()
}

/// An integer reply; anything else panics.
pub fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("not an integer: {other:?}"),
    }
}

/// An integer reply, or a text reply holding one (a field of XINFO, a script's string).
pub fn int_or_text(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => any_text(other).parse().expect("integer"),
    }
}

/// The elements of an array or set reply (a map's keys and values, flattened, as RESP2
/// sends them; nil as none).
pub fn items(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(a) | Value::Set(a) => a.clone(),
        Value::Map(m) => m.iter().flat_map(|(k, v)| [k.clone(), v.clone()]).collect(),
        Value::Nil => Vec::new(),
        other => panic!("not an array: {other:?}"),
    }
}

/// A reply map (flat array in RESP2, map in RESP3) by field name.
pub fn fields(v: &Value) -> HashMap<String, Value> {
    items(v)
        .chunks(2)
        .map(|p| (text(&p[0]), p[1].clone()))
        .collect()
}

/// `[[id, [f, v, ...]], ...]` → ids.
pub fn entry_ids(v: &Value) -> Vec<String> {
    items(v).iter().map(|e| text(&items(e)[0])).collect()
}

/// XREAD/XREADGROUP reply → (stream, ids) pairs.
pub fn read_reply(v: &Value) -> Vec<(String, Vec<String>)> {
    match v {
        Value::Map(m) => m.iter().map(|(k, v)| (text(k), entry_ids(v))).collect(),
        Value::Array(a) => a
            .iter()
            .map(|kv| {
                let kv = items(kv);
                (text(&kv[0]), entry_ids(&kv[1]))
            })
            .collect(),
        other => panic!("unexpected read reply {other:?}"),
    }
}

/// Any reply; an error comes back as a status `ERROR <message>`.
pub async fn any_reply(con: &mut MultiplexedConnection, cmd: &redis::Cmd) -> Value {
    match tokio::time::timeout(HANG_GUARD, cmd.query_async::<Value>(con)).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => Value::SimpleString(format!("ERROR {e}")),
        Err(_) => panic!("command hung"),
    }
}
