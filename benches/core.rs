//! Criterion micro-benchmarks for the hot path (DESIGN.md §9): request parsing, reply
//! encoding, keyspace operations through the engine, and one full `cmd::dispatch`.
//!
//! Run: `cargo bench --bench core` (all), or filter: `cargo bench --bench core -- keyspace`.
//! Measurement times are short on purpose (2-core box shared with builds); compare two
//! versions with `--save-baseline before` then `--baseline before`, or use
//! scripts/callgrind.sh for a deterministic instruction count.

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use respite::engine::Keyspace;
use respite::protocol::{parse_command, write_reply, Limits, Parsed, Reply};
use respite::types::value::{StrVal, Value};
use std::hint::black_box;
use std::time::Duration;

/// Keys shaped like redis-benchmark's `-r` keys (DESIGN.md §9: a hash without a final mix
/// made these collide, so always bench on this shape).
fn bench_key(i: usize) -> Vec<u8> {
    format!("key:{i:012}").into_bytes()
}

/// How many distinct keys the keyspace benches cycle over.
const NKEYS: usize = 100_000;

fn resp_command(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// Parses every command in `batch`, returning the argument count (kept alive for black_box).
fn parse_all(batch: &[u8]) -> usize {
    let mut buf = BytesMut::from(batch);
    let mut n = 0;
    while !buf.is_empty() {
        match parse_command(&mut buf, Limits::default()) {
            Ok(Parsed::Command(a)) => n += black_box(a).len(),
            _ => break,
        }
    }
    n
}

fn parse(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));

    let value = vec![b'x'; 100];
    let set = resp_command(&[b"SET", &bench_key(12345), &value]);
    let set16: Vec<u8> = set.repeat(16);
    g.throughput(Throughput::Elements(16));
    g.bench_function("set_d100_x16", |b| b.iter(|| parse_all(black_box(&set16))));

    let get = resp_command(&[b"GET", &bench_key(12345)]);
    g.throughput(Throughput::Elements(1));
    g.bench_function("get", |b| b.iter(|| parse_all(black_box(&get))));

    let get16 = get.repeat(16);
    g.throughput(Throughput::Elements(16));
    g.bench_function("get_x16", |b| b.iter(|| parse_all(black_box(&get16))));

    let inline = b"SET key:000000012345 \"hello world\"\r\n".to_vec();
    g.throughput(Throughput::Elements(1));
    g.bench_function("inline_set", |b| b.iter(|| parse_all(black_box(&inline))));
    g.bench_function("inline_ping", |b| {
        b.iter(|| parse_all(black_box(b"PING\r\n")))
    });
    g.finish();
}

fn encode(c: &mut Criterion) {
    let mut g = c.benchmark_group("encode");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));

    let bulk = Reply::Bulk(Bytes::from(vec![b'x'; 100]));
    let mut out = BytesMut::with_capacity(64 * 1024);
    g.throughput(Throughput::Elements(16));
    g.bench_function("bulk100_x16", |b| {
        b.iter(|| {
            out.clear();
            for _ in 0..16 {
                write_reply(&mut out, black_box(&bulk), false);
            }
            black_box(out.len())
        })
    });
    g.bench_function("ok_x16", |b| {
        b.iter(|| {
            out.clear();
            for _ in 0..16 {
                write_reply(&mut out, black_box(&Reply::OK), false);
            }
            black_box(out.len())
        })
    });
    g.bench_function("int_x16", |b| {
        b.iter(|| {
            out.clear();
            for i in 0..16 {
                write_reply(&mut out, &Reply::Int(black_box(1_000_000 + i)), false);
            }
            black_box(out.len())
        })
    });

    // MGET-style reply: 16 bulk strings, one missing.
    let array = Reply::Array(
        (0..16)
            .map(|i| {
                if i == 7 {
                    Reply::Nil
                } else {
                    Reply::Bulk(Bytes::from(vec![b'v'; 10]))
                }
            })
            .collect(),
    );
    g.throughput(Throughput::Elements(1));
    g.bench_function("array16", |b| {
        b.iter(|| {
            out.clear();
            write_reply(&mut out, black_box(&array), false);
            black_box(out.len())
        })
    });

    // HGETALL/HELLO-style reply: 8 field/value pairs, encoded in both protocols.
    let map = Reply::Map(
        (0..8)
            .map(|i| {
                (
                    Reply::bulk_str(&format!("field{i}")),
                    if i % 2 == 0 {
                        Reply::Int(i)
                    } else {
                        Reply::bulk_static("value")
                    },
                )
            })
            .collect(),
    );
    for (name, resp3) in [("map8_resp2", false), ("map8_resp3", true)] {
        g.bench_function(name, |b| {
            b.iter(|| {
                out.clear();
                write_reply(&mut out, black_box(&map), resp3);
                black_box(out.len())
            })
        });
    }
    g.bench_function("double_resp3", |b| {
        b.iter(|| {
            out.clear();
            write_reply(&mut out, &Reply::Double(black_box(1.234_567_8)), true);
            black_box(out.len())
        })
    });
    g.finish();
}

/// The engine alone: lock the key's shard, then read or write, as a `Lock::Keys` command does.
fn keyspace(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyspace");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(1));

    let keys: Vec<Vec<u8>> = (0..NKEYS).map(bench_key).collect();
    let value = vec![b'x'; 100];
    let now = 1_700_000_000_000u64;
    let ks = Keyspace::new(16);
    for k in &keys {
        let mut a = ks.shared(0, &[k], now);
        let v = Value::Str(StrVal::from_set(Bytes::copy_from_slice(&value)));
        a.set(k, v, None);
    }

    let mut i = 0usize;
    let mut next = || {
        i = (i + 1) % NKEYS;
        &keys[i]
    };
    g.bench_function("get_hit", |b| {
        b.iter(|| {
            let k = next();
            let mut a = ks.shared(0, &[k], now);
            black_box(a.get(k).is_some())
        })
    });
    g.bench_function("get_miss", |b| {
        b.iter(|| {
            let k = b"key:999999999999";
            let mut a = ks.shared(0, &[k], now);
            black_box(a.get(k).is_some())
        })
    });
    // SET over an existing key (the steady state of `redis-benchmark -t set -r N`).
    g.bench_function("set_overwrite_d100", |b| {
        b.iter(|| {
            let k = next();
            let mut a = ks.shared(0, &[k], now);
            let v = Value::Str(StrVal::from_set(Bytes::copy_from_slice(&value)));
            black_box(a.set(k, v, None).is_some())
        })
    });
    // SET of new keys into an initially empty db (insert + growth).
    g.throughput(Throughput::Elements(1000));
    g.bench_function("set_insert_d100_x1000", |b| {
        b.iter_batched(
            || Keyspace::new(1),
            |ks| {
                for k in &keys[..1000] {
                    let mut a = ks.shared(0, &[k], now);
                    let v = Value::Str(StrVal::from_set(Bytes::copy_from_slice(&value)));
                    a.set(k, v, None);
                }
                ks
            },
            BatchSize::LargeInput,
        )
    });
    g.throughput(Throughput::Elements(1));
    // INCR as strings.rs does it: peek, then modify in place (get_mut) or insert.
    let counters = Keyspace::new(1);
    g.bench_function("incr", |b| {
        b.iter(|| {
            let k = next();
            let mut a = counters.shared(0, &[k], now);
            let cur = match a.peek(k).map(|e| &e.value) {
                Some(Value::Str(StrVal::Int(n))) => *n,
                _ => 0,
            };
            match a.get_mut(k) {
                Some(e) => e.value = Value::Str(StrVal::Int(cur + 1)),
                None => {
                    a.set(k, Value::Str(StrVal::Int(cur + 1)), None);
                }
            }
            black_box(cur)
        })
    });
    // MSET-style: 10 keys in one command, shards locked in ascending order.
    g.throughput(Throughput::Elements(10));
    g.bench_function("mset10_lock_and_set", |b| {
        b.iter(|| {
            let ks10: Vec<&[u8]> = (0..10).map(|_| &next()[..]).collect();
            let mut a = ks.shared(0, &ks10, now);
            for k in &ks10 {
                let v = Value::Str(StrVal::from_set(Bytes::copy_from_slice(&value)));
                a.set(k, v, None);
            }
        })
    });
    g.finish();
}

/// One command through `cmd::dispatch` (registry lookup, arity, locking, handler, stats),
/// without the network: what each request costs above the engine.
fn dispatch(c: &mut Criterion) {
    use respite::instance::session::Session;
    use std::sync::Arc;

    let mut g = c.benchmark_group("dispatch");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(1));

    let srv = Arc::new(respite::cmd::new_shared(
        respite::Config::default(),
        respite::Clock::system(),
    ));
    let addr: std::net::SocketAddr = "127.0.0.1:1".parse().expect("addr");
    let handle = srv.clients.register(addr, addr, srv.clock.now_ms());
    let mut sess = Session::new(handle, true);
    let keys: Vec<Bytes> = (0..NKEYS).map(|i| Bytes::from(bench_key(i))).collect();
    // INCR needs integer values: give it its own key range.
    let counters: Vec<Bytes> = (NKEYS..2 * NKEYS)
        .map(|i| Bytes::from(bench_key(i)))
        .collect();
    let value = Bytes::from(vec![b'x'; 100]);
    let mut out = BytesMut::with_capacity(4096);

    let mut i = 0usize;
    for (name, cmd) in [("set_d100", "SET"), ("get", "GET"), ("incr", "INCR")] {
        let ring = if cmd == "INCR" { &counters } else { &keys };
        g.bench_function(name, |b| {
            b.iter(|| {
                i = (i + 1) % NKEYS;
                let mut args = vec![Bytes::from_static(cmd.as_bytes()), ring[i].clone()];
                if cmd == "SET" {
                    args.push(value.clone());
                }
                let r = respite::cmd::dispatch(&srv, &mut sess, args);
                out.clear();
                write_reply(&mut out, &r, false);
                black_box(out.len())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, parse, encode, keyspace, dispatch);
criterion_main!(benches);
