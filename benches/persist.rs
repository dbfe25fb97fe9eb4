//! The redb store: apply throughput of small batches (durable vs not) and load time.
//! Kept short: `cargo bench --bench persist`.

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use respite::persist::{Change, LoadOptions, Store};
use respite::types::value::{StrVal, Value};
use std::time::Duration;

fn set(i: u64) -> Change {
    Change::StrSet {
        db: 0,
        key: Bytes::from(format!("key:{i}")),
        value: StrVal::from_set(Bytes::from_static(b"value-0123456789")),
        expire_at: None,
    }
}

fn apply(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let mut g = c.benchmark_group("apply_batch_of_16");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    let mut n = 0u64;
    for durable in [false, true] {
        let name = if durable { "durable" } else { "non_durable" };
        g.bench_function(name, |b| {
            b.iter_batched(
                || {
                    n += 16;
                    (n - 16..n).map(set).collect::<Vec<_>>()
                },
                |batch| store.apply(&batch, durable).expect("apply"),
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

fn load(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let batch: Vec<Change> = (0..100_000).map(set).collect();
    store.apply(&batch, true).expect("fill");
    let mut g = c.benchmark_group("load");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    g.bench_function("100k_strings", |b| {
        b.iter(|| {
            let mut n = 0usize;
            let opts = LoadOptions::new(0);
            store
                .load(&opts, |_, _, v: Value, _| {
                    n += usize::from(matches!(v, Value::Str(_)))
                })
                .expect("load");
            assert_eq!(n, 100_000);
        })
    });
    g.finish();
}

criterion_group!(benches, apply, load);
criterion_main!(benches);
