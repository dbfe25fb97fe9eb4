//! Criterion benchmarks for the hot path: request parsing, reply encoding, keyspace ops.

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, Criterion};
use respite::protocol::{parse_command, write_reply, Limits, Reply};
use std::hint::black_box;

fn codec(c: &mut Criterion) {
    let frame: &[u8] = b"*3\r\n$3\r\nSET\r\n$16\r\nkey:000000012345\r\n$10\r\nvalue12345\r\n";
    let mut batch = Vec::new();
    for _ in 0..16 {
        batch.extend_from_slice(frame);
    }
    c.bench_function("parse_set_x16", |b| {
        b.iter(|| {
            let mut buf = BytesMut::from(&batch[..]);
            let mut n = 0;
            while let Ok(respite::protocol::Parsed::Command(a)) =
                parse_command(&mut buf, Limits::default())
            {
                n += a.len();
                if buf.is_empty() {
                    break;
                }
            }
            black_box(n)
        })
    });
    let reply = Reply::Bulk(bytes::Bytes::from(vec![b'x'; 100]));
    c.bench_function("encode_bulk100_x16", |b| {
        let mut out = BytesMut::with_capacity(4096);
        b.iter(|| {
            out.clear();
            for _ in 0..16 {
                write_reply(&mut out, &reply, false);
            }
            black_box(out.len())
        })
    });
}

criterion_group!(benches, codec);
criterion_main!(benches);
