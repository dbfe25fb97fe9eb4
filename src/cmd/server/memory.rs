//! MEMORY: USAGE (a key's footprint in respite's structures, sampled as Redis samples),
//! MALLOC-STATS, PURGE and HELP. DOCTOR and STATS are not offered (their reports are
//! built from allocator and server statistics respite does not keep the way Redis does).

use super::super::args::{self, is};
use super::super::{errors, Cx};
use crate::num::parse_i64;
use crate::protocol::Reply;
use crate::types::set::Member;
use crate::types::value::{Entry, StrVal, Value};
use bytes::Bytes;

pub fn help(_cx: &mut Cx) -> Reply {
    args::help(
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    )
}

/// Redis's `OBJ_COMPUTE_SIZE_DEF_SAMPLES`.
const DEFAULT_SAMPLES: usize = 5;

/// `MEMORY USAGE key [SAMPLES count]` (Redis `memoryCommand` + `objectComputeSize`): the
/// key's footprint in respite's own structures. As in Redis, a collection's elements are
/// sampled (the first `count`, default 5, 0 for all) and their average stands for every
/// element, so a huge value is never walked unless asked; what does not depend on the
/// elements (the headers, the per-element slots of respite's tables) is counted exactly.
/// Options are checked before the key is looked up, as Redis does.
pub fn usage(cx: &mut Cx) -> Reply {
    let a = cx.args;
    let mut samples = DEFAULT_SAMPLES;
    let mut j = 3;
    while j < a.len() {
        if is(&a[j], "SAMPLES") && j + 1 < a.len() {
            match parse_i64(&a[j + 1]) {
                None => return errors::not_int(),
                Some(n) if n < 0 => return errors::syntax(),
                Some(0) => samples = usize::MAX,
                Some(n) => samples = usize::try_from(n).unwrap_or(usize::MAX),
            }
            j += 2;
        } else {
            return errors::syntax();
        }
    }
    let key_len = a[2].len();
    match cx.ks.get_notouch(&a[2]) {
        None => Reply::Nil,
        Some(e) => {
            // The key's buffer and its slot in the shard's map (the entry holds the value
            // header inline).
            let key = std::mem::size_of::<Bytes>() + alloc_size(key_len);
            let n = key + std::mem::size_of::<Entry>() + value_size(&e.value, samples);
            Reply::Int(i64::try_from(n).unwrap_or(i64::MAX))
        }
    }
}

/// What the allocator hands out for a request of `n` bytes: mimalloc's size classes, in
/// 8-byte steps up to 64 bytes, then four classes per power of two.
pub(crate) fn alloc_size(n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    if n <= 64 {
        return (n + 7) & !7;
    }
    let step = 1usize << (usize::BITS - 1 - n.leading_zeros() - 2);
    (n + step - 1) & !(step - 1)
}

/// A stored element: its `Bytes` handle plus its buffer.
fn bytes_cost(b: &[u8]) -> usize {
    std::mem::size_of::<Bytes>() + alloc_size(b.len())
}

/// Redis's extrapolation: the average of `cost` over the first `samples` items, times
/// `len`.
fn sampled<T>(
    items: impl Iterator<Item = T>,
    len: usize,
    samples: usize,
    cost: impl Fn(T) -> usize,
) -> usize {
    let (mut total, mut n) = (0usize, 0usize);
    for item in items.take(samples) {
        total += cost(item);
        n += 1;
    }
    if n == 0 {
        0
    } else if n == len {
        total
    } else {
        (total as f64 / n as f64 * len as f64) as usize
    }
}

/// Per-element bookkeeping of respite's hash tables beyond the element's own buffers (the
/// slot, its index entry; the figures the engine's accounting uses).
const SET_TABLE_SLOT: usize = 56 + 8;
const HASH_TABLE_SLOT: usize = 16 + 16;
/// Sorted set member: its map entry, tree node and score.
const ZSET_SLOT: usize = 112 - 32;

fn value_size(v: &Value, samples: usize) -> usize {
    use std::mem::size_of;
    match v {
        Value::Str(StrVal::Int(_)) => 0,
        Value::Str(StrVal::Bytes { data, .. }) => alloc_size(data.capacity()),
        Value::List(l) => {
            size_of::<crate::types::list::List>()
                + sampled(l.iter(), l.len(), samples, |b| bytes_cost(b))
        }
        Value::Set(s) => {
            let head = size_of::<crate::types::set::SetValue>();
            let per = |m: Member| match m {
                Member::Int(_) => 8,
                Member::Str(b) => bytes_cost(b),
            };
            if s.is_intset() {
                head + s.len() * 8
            } else if s.encoding() == "hashtable" {
                head + s.len() * SET_TABLE_SLOT + sampled(s.iter(), s.len(), samples, per)
            } else {
                head + sampled(s.iter(), s.len(), samples, per)
            }
        }
        Value::Hash(h) => {
            let head = size_of::<crate::types::hash::HashValue>();
            let slots = if h.is_listpack() {
                0
            } else {
                h.len() * HASH_TABLE_SLOT
            };
            head + slots
                + sampled(h.iter(), h.len(), samples, |(f, v)| {
                    bytes_cost(f) + bytes_cost(v)
                })
        }
        Value::ZSet(z) => {
            size_of::<crate::types::zset::ZSet>()
                + sampled(z.iter(), z.len(), samples, |it| {
                    ZSET_SLOT + bytes_cost(&it.member)
                })
        }
        // The engine keeps the stream's listpack bytes as it goes (no walk), and groups
        // are few.
        Value::Stream(s) => size_of::<crate::types::stream::Stream>() + s.approx_size(),
    }
}

/// Redis answers this for any allocator but jemalloc; respite's is mimalloc.
pub fn malloc_stats(_cx: &mut Cx) -> Reply {
    Reply::bulk_static("Stats not supported for the current allocator")
}

/// Redis answers OK whatever the allocator could give back.
pub fn purge(_cx: &mut Cx) -> Reply {
    Reply::OK
}

#[cfg(test)]
mod usage_tests {
    use super::*;
    use crate::instance::session::Session;
    use crate::TestServer;

    fn run(srv: &TestServer, sess: &mut Session, line: &[&str]) -> Reply {
        let args = line
            .iter()
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect();
        crate::cmd::dispatch(&srv.shared(), sess, args)
    }

    fn usage_of(srv: &TestServer, sess: &mut Session, line: &[&str]) -> i64 {
        match run(srv, sess, line) {
            Reply::Int(n) => n,
            other => panic!("{line:?}: {other:?}"),
        }
    }

    #[test]
    fn allocator_classes_round_up() {
        assert_eq!(alloc_size(0), 0);
        assert_eq!(alloc_size(1), 8);
        assert_eq!(alloc_size(64), 64);
        assert_eq!(alloc_size(65), 80);
        assert_eq!(alloc_size(1000), 1024);
        let mut last = 0;
        for n in 0..5000 {
            let a = alloc_size(n);
            assert!(a >= n && a >= last, "{n}: {a}");
            last = a;
        }
    }

    #[test]
    fn bigger_values_estimate_bigger() {
        let srv = TestServer::start().expect("server");
        let addr = "127.0.0.1:1".parse().expect("addr");
        let mut sess = Session::new(srv.shared().clients.register(addr, addr, 0), true);
        run(&srv, &mut sess, &["SET", "int", "12345"]);
        let long = "x".repeat(1000);
        run(&srv, &mut sess, &["SET", "long", &long]);
        let int = usage_of(&srv, &mut sess, &["MEMORY", "USAGE", "int"]);
        let big = usage_of(&srv, &mut sess, &["MEMORY", "USAGE", "long"]);
        assert!(int > 0 && big >= int + 1000, "{int} {big}");
        let mut sizes = Vec::new();
        for (kind, n) in [("small", 10), ("large", 2000)] {
            let key = format!("s-{kind}");
            let mut line = vec!["SADD".to_string(), key.clone()];
            line.extend((0..n).map(|i| format!("member:{i}")));
            let line: Vec<&str> = line.iter().map(String::as_str).collect();
            run(&srv, &mut sess, &line);
            sizes.push(usage_of(&srv, &mut sess, &["MEMORY", "USAGE", &key]));
        }
        assert!(sizes[1] > sizes[0] * 50, "{sizes:?}");
        let mut line = vec!["ZADD".to_string(), "z".to_string()];
        for i in 0..500 {
            line.push(i.to_string());
            line.push(format!("m{i}"));
        }
        let line: Vec<&str> = line.iter().map(String::as_str).collect();
        run(&srv, &mut sess, &line);
        assert!(usage_of(&srv, &mut sess, &["MEMORY", "USAGE", "z"]) > 500 * 8);
    }

    /// The first elements stand for all of them unless SAMPLES 0 asks for every one.
    #[test]
    fn samples_extrapolate_from_the_first_elements() {
        let srv = TestServer::start().expect("server");
        let addr = "127.0.0.1:1".parse().expect("addr");
        let mut sess = Session::new(srv.shared().clients.register(addr, addr, 0), true);
        let huge = "v".repeat(10_000);
        run(&srv, &mut sess, &["HSET", "h", "first", &huge]);
        for i in 0..999 {
            run(&srv, &mut sess, &["HSET", "h", &format!("f{i}"), "1"]);
        }
        let one = usage_of(&srv, &mut sess, &["MEMORY", "USAGE", "h", "SAMPLES", "1"]);
        let all = usage_of(&srv, &mut sess, &["MEMORY", "USAGE", "h", "SAMPLES", "0"]);
        let default = usage_of(&srv, &mut sess, &["MEMORY", "USAGE", "h"]);
        assert!(one > 1000 * 10_000, "{one}");
        assert!(all > 10_000 && all < 200_000, "{all}");
        assert!(default < one && default > all, "{default}");
        // SAMPLES past the size is every element.
        let many = usage_of(
            &srv,
            &mut sess,
            &["MEMORY", "USAGE", "h", "SAMPLES", "5000"],
        );
        assert_eq!(many, all);
    }

    #[test]
    fn options_are_checked_like_redis() {
        let srv = TestServer::start().expect("server");
        let addr = "127.0.0.1:1".parse().expect("addr");
        let mut sess = Session::new(srv.shared().clients.register(addr, addr, 0), true);
        assert_eq!(
            run(&srv, &mut sess, &["MEMORY", "USAGE", "nokey"]),
            Reply::Nil
        );
        let err = |r: Reply| match r {
            Reply::Error(e) => e.to_string(),
            other => panic!("expected an error: {other:?}"),
        };
        assert!(err(run(
            &srv,
            &mut sess,
            &["MEMORY", "USAGE", "k", "SAMPLES", "-1"]
        ))
        .starts_with("ERR syntax error"));
        assert!(err(run(
            &srv,
            &mut sess,
            &["MEMORY", "USAGE", "k", "SAMPLES", "x"]
        ))
        .starts_with("ERR value is not an integer"));
        assert!(
            err(run(&srv, &mut sess, &["MEMORY", "USAGE", "k", "SAMPLES"]))
                .starts_with("ERR syntax error")
        );
    }
}
