//! Sorted-set benchmarks: `ZADD` and `ZRANGE … LIMIT 0 10` (by rank and by score) through
//! `cmd::dispatch` on sets of 1 k, 100 k and 1 M members, to show they stay flat (O(log n)
//! per operation, plus the 10 returned items), and the bare structure's insert/rank/seek.
//!
//! Run: `cargo bench --bench zset` (or filter: `cargo bench --bench zset -- zrange`). Each
//! size's set is built once, outside the timed loops; measurement times are short.

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use respite::instance::session::Session;
use respite::protocol::write_reply;
use respite::types::value::Value;
use respite::types::zset::ZSet;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

const SIZES: [usize; 3] = [1_000, 100_000, 1_000_000];

fn member(i: usize) -> Bytes {
    Bytes::from(format!("member:{i:012}"))
}

/// A skiplist-encoded set of `n` members with distinct random scores in [0, n).
fn build(n: usize, rng: &mut SmallRng) -> ZSet {
    let mut z = ZSet::new(true);
    for i in 0..n {
        z.insert(member(i), rng.gen::<f64>() * n as f64);
    }
    z
}

fn dispatch_benches(c: &mut Criterion) {
    let srv = Arc::new(respite::cmd::new_shared(
        respite::Config::default(),
        respite::Clock::system(),
    ));
    let addr: std::net::SocketAddr = "127.0.0.1:1".parse().expect("addr");
    let handle = srv.clients.register(addr, addr, srv.clock.now_ms());
    let mut sess = Session::new(handle, true);
    let mut out = BytesMut::with_capacity(4096);
    let mut rng = SmallRng::seed_from_u64(7);

    let mut g = c.benchmark_group("zset");
    g.warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(30)
        .throughput(Throughput::Elements(1));

    for n in SIZES {
        let key = Bytes::from(format!("zset:{n}"));
        {
            let z = build(n, &mut rng);
            let mut access = srv.ks.shared(0, &[&key[..]], srv.clock.now_ms());
            access.set(&key, Value::ZSet(Box::new(z)), None);
        }
        let mut run = |args: Vec<Bytes>| {
            let r = respite::cmd::dispatch(&srv, &mut sess, args);
            out.clear();
            write_reply(&mut out, &r, false);
            black_box(out.len())
        };
        let b = |s: &'static str| Bytes::from_static(s.as_bytes());
        let num = |x: f64| Bytes::from(x.to_string());

        // ZADD of an existing member with a new score: the leaderboard update.
        g.bench_function(format!("zadd_update/{n}"), |bch| {
            bch.iter(|| {
                let i = rng.gen_range(0..n);
                let s = rng.gen::<f64>() * n as f64;
                run(vec![b("ZADD"), key.clone(), num(s), member(i)])
            })
        });
        // ZADD of a new member, then ZREM of it, so the size stays put.
        g.bench_function(format!("zadd_new_zrem/{n}"), |bch| {
            bch.iter(|| {
                let s = rng.gen::<f64>() * n as f64;
                run(vec![b("ZADD"), key.clone(), num(s), b("fresh")]);
                run(vec![b("ZREM"), key.clone(), b("fresh")])
            })
        });
        g.bench_function(format!("zrange_first10/{n}"), |bch| {
            bch.iter(|| run(vec![b("ZRANGE"), key.clone(), b("0"), b("9")]))
        });
        g.bench_function(format!("zrange_rank_mid10/{n}"), |bch| {
            let start = Bytes::from((n / 2).to_string());
            let end = Bytes::from((n / 2 + 9).to_string());
            bch.iter(|| run(vec![b("ZRANGE"), key.clone(), start.clone(), end.clone()]))
        });
        g.bench_function(format!("zrange_byscore_limit10/{n}"), |bch| {
            bch.iter(|| {
                let min = num(rng.gen::<f64>() * n as f64 * 0.9);
                run(vec![
                    b("ZRANGE"),
                    key.clone(),
                    min,
                    b("+inf"),
                    b("BYSCORE"),
                    b("LIMIT"),
                    b("0"),
                    b("10"),
                ])
            })
        });
        g.bench_function(format!("zrank/{n}"), |bch| {
            bch.iter(|| {
                let i = rng.gen_range(0..n);
                run(vec![b("ZRANK"), key.clone(), member(i)])
            })
        });
        // Free the big set before building the next one.
        let mut access = srv.ks.shared(0, &[&key[..]], srv.clock.now_ms());
        access.remove(&key);
    }
    g.finish();
}

/// The data structure alone (no command layer).
fn structure_benches(c: &mut Criterion) {
    let mut rng = SmallRng::seed_from_u64(11);
    let mut g = c.benchmark_group("zset_struct");
    g.warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(30)
        .throughput(Throughput::Elements(1));
    for n in SIZES {
        let mut z = build(n, &mut rng);
        let fresh = Bytes::from_static(b"fresh");
        g.bench_function(format!("insert_remove/{n}"), |bch| {
            bch.iter(|| {
                z.insert(fresh.clone(), rng.gen::<f64>() * n as f64);
                black_box(z.remove(&fresh))
            })
        });
        g.bench_function(format!("rank/{n}"), |bch| {
            bch.iter(|| black_box(z.rank(&member(rng.gen_range(0..n)))))
        });
        g.bench_function(format!("seek_take10/{n}"), |bch| {
            bch.iter(|| {
                let r = rng.gen_range(0..n);
                black_box(z.iter_from(r).take(10).count())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, dispatch_benches, structure_benches);
criterion_main!(benches);
