//! List structure at 1 k / 100 k / 1 M elements: push/pop at the ends, index in the middle
//! and a 10-element range must stay flat as the list grows (issue 3).

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use respite::types::list::{End, List};
use std::hint::black_box;
use std::time::Duration;

fn build(n: usize) -> List {
    let mut l = List::new();
    l.before_add(n * 16, n, || -2);
    for i in 0..n {
        l.push(Bytes::from(format!("element:{i:08}")), End::Tail);
    }
    l
}

fn lists(c: &mut Criterion) {
    let mut g = c.benchmark_group("list");
    g.measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(300));
    for n in [1_000usize, 100_000, 1_000_000] {
        let mut l = build(n);
        let v = Bytes::from_static(b"new-element-0001");
        g.bench_with_input(BenchmarkId::new("lpush_rpop", n), &n, |b, _| {
            b.iter(|| {
                l.before_add(v.len(), 1, || -2);
                l.push(v.clone(), End::Head);
                black_box(l.pop(End::Tail))
            })
        });
        g.bench_with_input(BenchmarkId::new("lindex_middle", n), &n, |b, _| {
            b.iter(|| black_box(l.get(n / 2).map(|e| e.len())))
        });
        g.bench_with_input(BenchmarkId::new("lrange_0_9", n), &n, |b, _| {
            b.iter(|| {
                let (from, to) = l.range(0, 9).expect("non-empty");
                black_box(l.slice(from, to).map(|e| e.len()).sum::<usize>())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, lists);
criterion_main!(benches);
