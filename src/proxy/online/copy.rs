//! Copying a tag's keys from their old owner to their new one: DUMP + PTTL → RESTORE
//! REPLACE, or, for a value over `move-chunk-bytes`, element by element into a temporary
//! key that is then renamed over it. Deleting from the old owner comes last.

use super::Move;
use crate::proxy::node::Node;
use crate::proxy::resp::{self, Frame};
use bytes::Bytes;
use std::sync::atomic::Ordering::Relaxed;

/// Elements per command when a big collection is copied in chunks (halved while a
/// chunk's reply is over `move-chunk-bytes`).
const CHUNK_ELEMENTS: usize = 1024;
/// The sticky id the mover's requests use on the nodes' shared connections.
const MOVER_ID: u64 = u64::MAX;

impl Move {
    /// Copies `keys` from `src` to `dst`, then deletes them from `src` (only after every
    /// copy succeeded: interrupted, the keys are still on `src` and copied again).
    pub(super) async fn copy_keys(
        &self,
        src: &Node,
        dst: &Node,
        keys: &[Bytes],
    ) -> Result<(), String> {
        let reads: Vec<_> = keys
            .iter()
            .map(|k| {
                (
                    src.send(false, MOVER_ID, resp::command(&[&b"DUMP"[..], k])),
                    src.send(false, MOVER_ID, resp::command(&[&b"PTTL"[..], k])),
                )
            })
            .collect();
        let mut found = Vec::with_capacity(keys.len());
        for (key, (dump, pttl)) in keys.iter().zip(reads) {
            let dump = frame(dump.await)?;
            let pttl = frame(pttl.await)?;
            let Frame::Bulk(payload) = dump else {
                continue; // gone (deleted or expired) since it was listed
            };
            let ttl = match pttl {
                Frame::Int(-2) => continue,
                Frame::Int(t) if t > 0 => t,
                _ => 0,
            };
            found.push((key, payload, ttl));
        }
        for (key, payload, ttl) in &found {
            if payload.len() > self.chunk_bytes && self.copy_chunked(src, dst, key, *ttl).await? {
                self.keys_chunked.fetch_add(1, Relaxed);
                self.bytes_moved.fetch_add(payload.len() as u64, Relaxed);
                continue;
            }
            let ttl = ttl.to_string();
            let args: [&[u8]; 5] = [b"RESTORE", key, ttl.as_bytes(), payload, b"REPLACE"];
            ok(call(dst, &args).await, "RESTORE")?;
            self.bytes_moved.fetch_add(payload.len() as u64, Relaxed);
        }
        if !found.is_empty() {
            let mut del: Vec<&[u8]> = vec![b"DEL"];
            del.extend(found.iter().map(|(k, _, _)| &k[..]));
            frame(src.send(false, MOVER_ID, resp::command(&del)).await)?;
            self.keys_moved.fetch_add(found.len() as u64, Relaxed);
        }
        Ok(())
    }

    /// Copies a big collection element by element into a temporary key on `dst`, then
    /// renames it over `key` and sets its TTL: no request to `dst` holds more than about
    /// `chunk_bytes`. False for a type it does not chunk (streams: their consumer groups'
    /// pending entries cannot be rebuilt by commands), which then goes as one RESTORE.
    async fn copy_chunked(
        &self,
        src: &Node,
        dst: &Node,
        key: &Bytes,
        ttl: i64,
    ) -> Result<bool, String> {
        let kind = match frame(call(src, &[&b"TYPE"[..], key]).await)? {
            Frame::Status(s) => s,
            _ => return Err("unexpected TYPE reply".into()),
        };
        let mut tmp = b"__respite_move__:".to_vec();
        tmp.extend_from_slice(key);
        let tmp = &tmp[..];
        let chunk = self.chunk_bytes;
        let mut n = CHUNK_ELEMENTS;
        match &kind[..] {
            b"string" => {
                ok(call(dst, &[&b"DEL"[..], tmp]).await, "DEL")?;
                let mut off = 0usize;
                loop {
                    let (a, b) = (off.to_string(), (off + chunk - 1).to_string());
                    let part = match frame(
                        call(src, &[&b"GETRANGE"[..], key, a.as_bytes(), b.as_bytes()]).await,
                    )? {
                        Frame::Bulk(p) => p,
                        _ => return Err("unexpected GETRANGE reply".into()),
                    };
                    if part.is_empty() {
                        break;
                    }
                    ok(call(dst, &[&b"APPEND"[..], tmp, &part]).await, "APPEND")?;
                    off += part.len();
                    if part.len() < chunk {
                        break;
                    }
                }
            }
            b"list" | b"zset" => {
                ok(call(dst, &[&b"DEL"[..], tmp]).await, "DEL")?;
                let zset = &kind[..] == b"zset";
                let mut at = 0usize;
                loop {
                    let (a, b) = (at.to_string(), (at + n - 1).to_string());
                    let mut args: Vec<&[u8]> = vec![
                        if zset { b"ZRANGE" } else { b"LRANGE" },
                        key,
                        a.as_bytes(),
                        b.as_bytes(),
                    ];
                    if zset {
                        args.push(b"WITHSCORES");
                    }
                    let (items, size) = bulks(call(src, &args).await)?;
                    if items.is_empty() {
                        break;
                    }
                    let got = if zset { items.len() / 2 } else { items.len() };
                    let mut put: Vec<&[u8]> = vec![if zset { b"ZADD" } else { b"RPUSH" }, tmp];
                    if zset {
                        // The reply is member, score pairs; ZADD wants score, member.
                        for pair in items.chunks(2) {
                            if let [m, s] = pair {
                                put.push(s);
                                put.push(m);
                            }
                        }
                    } else {
                        put.extend(items.iter().map(|i| &i[..]));
                    }
                    ok(call(dst, &put).await, "RPUSH/ZADD")?;
                    at += got;
                    if got < n {
                        break;
                    }
                    n = next_count(n, size, chunk);
                }
            }
            b"set" | b"hash" => {
                ok(call(dst, &[&b"DEL"[..], tmp]).await, "DEL")?;
                let set = &kind[..] == b"set";
                let mut cursor = Bytes::from_static(b"0");
                loop {
                    let count = n.to_string();
                    let cmd: &[u8] = if set { b"SSCAN" } else { b"HSCAN" };
                    let args: [&[u8]; 5] = [cmd, key, &cursor, b"COUNT", count.as_bytes()];
                    let Frame::Array(parts) = frame(call(src, &args).await)? else {
                        return Err("unexpected SSCAN/HSCAN reply".into());
                    };
                    let [next, items] = &parts[..] else {
                        return Err("unexpected SSCAN/HSCAN reply".into());
                    };
                    let Ok(Frame::Bulk(next)) = resp::decode(next) else {
                        return Err("unexpected SSCAN/HSCAN cursor".into());
                    };
                    let (items, size) = bulks(Ok(Ok(items.clone())))?;
                    if !items.is_empty() {
                        let mut put: Vec<&[u8]> = vec![if set { b"SADD" } else { b"HSET" }, tmp];
                        put.extend(items.iter().map(|i| &i[..]));
                        ok(call(dst, &put).await, "SADD/HSET")?;
                    }
                    n = next_count(n, size, chunk);
                    if &next[..] == b"0" {
                        break;
                    }
                    cursor = next;
                }
            }
            _ => return Ok(false),
        }
        ok(call(dst, &[&b"RENAME"[..], tmp, key]).await, "RENAME")?;
        if ttl > 0 {
            let t = ttl.to_string();
            frame(call(dst, &[&b"PEXPIRE"[..], key, t.as_bytes()]).await)?;
        }
        Ok(true)
    }
}

/// Elements for the next chunk: halved while replies come back over the byte budget.
pub(super) fn next_count(n: usize, reply_bytes: usize, chunk: usize) -> usize {
    if reply_bytes > chunk {
        (n / 2).max(1)
    } else {
        n
    }
}

pub(super) async fn call<A: AsRef<[u8]>>(node: &Node, args: &[A]) -> NodeReply {
    node.send(false, MOVER_ID, resp::command(args)).await
}

pub(super) type NodeReply =
    Result<crate::proxy::node::NodeResult, tokio::sync::oneshot::error::RecvError>;

/// A node's reply decoded; errors (its own, or the connection's) as text naming the node.
pub(super) fn frame(r: NodeReply) -> Result<Frame, String> {
    let b = match r {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err("the proxy lost the node connection".into()),
    };
    match resp::decode(&b) {
        Ok(Frame::Error(e)) => Err(String::from_utf8_lossy(&e).into_owned()),
        Ok(f) => Ok(f),
        Err(_) => Err("unexpected reply from a node".into()),
    }
}

fn ok(r: NodeReply, what: &str) -> Result<(), String> {
    frame(r).map(drop).map_err(|e| format!("{what}: {e}"))
}

/// An array of bulk strings, and its size on the wire.
pub(super) fn bulks(
    r: Result<crate::proxy::node::NodeResult, tokio::sync::oneshot::error::RecvError>,
) -> Result<(Vec<Bytes>, usize), String> {
    let raw = match &r {
        Ok(Ok(b)) => b.len(),
        _ => 0,
    };
    let Frame::Array(kids) = frame(r)? else {
        return Err("unexpected reply: not an array".into());
    };
    let mut out = Vec::with_capacity(kids.len());
    for k in &kids {
        match resp::decode(k) {
            Ok(Frame::Bulk(b)) => out.push(b),
            _ => return Err("unexpected reply: not a bulk string".into()),
        }
    }
    Ok((out, raw))
}
