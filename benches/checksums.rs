//! The checksums and compression respite computes, on its real input sizes: each crate it
//! uses against the hand-written code the crate replaced (kept below, in this bench only,
//! so the choice can be re-measured), and respite's own LZF, which it keeps because no crate
//! compresses byte for byte as Redis's liblzf does (DUMP payloads must equal Redis's).
//!
//! `cargo bench --bench checksums -- --warm-up-time 1 --measurement-time 3`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use respite::types::rdb::lzf;
use std::hint::black_box;

/// Deterministic filler (checksum cost does not depend on the bytes).
fn bytes(n: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A Lua script body of about `n` bytes, as EVAL sends it.
fn script(n: usize) -> Vec<u8> {
    let line = b"local v = redis.call('GET', KEYS[1]) or 0\n";
    let mut s = Vec::with_capacity(n + line.len());
    while s.len() < n {
        s.extend_from_slice(line);
    }
    s.truncate(n);
    s
}

/// A compressible string value: log-like text with counters, `n` bytes.
fn text(n: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(n + 64);
    let mut i = 0u32;
    while v.len() < n {
        v.extend_from_slice(
            format!(
                "user:{i} logged in from 10.0.0.{} at step {};",
                i % 7,
                i * 3
            )
            .as_bytes(),
        );
        i += 1;
    }
    v.truncate(n);
    v
}

fn sha1(c: &mut Criterion) {
    let mut g = c.benchmark_group("sha1");
    for n in [40usize, 1024] {
        let d = script(n);
        assert_eq!(hand_written::sha1(&d), respite::script::sha1::sha1(&d));
        g.throughput(Throughput::Bytes(n as u64));
        g.bench_function(format!("hand_written/{n}"), |b| {
            b.iter(|| hand_written::sha1(black_box(&d)))
        });
        g.bench_function(format!("sha1_crate/{n}"), |b| {
            b.iter(|| respite::script::sha1::sha1(black_box(&d)))
        });
    }
}

fn crc32(c: &mut Criterion) {
    let mut g = c.benchmark_group("crc32_wal_record");
    for n in [64usize, 4096] {
        let d = bytes(n);
        assert_eq!(hand_written::crc32(&d), crc32fast::hash(&d));
        g.throughput(Throughput::Bytes(n as u64));
        g.bench_function(format!("hand_written/{n}"), |b| {
            b.iter(|| hand_written::crc32(black_box(&d)))
        });
        g.bench_function(format!("crc32fast/{n}"), |b| {
            b.iter(|| crc32fast::hash(black_box(&d)))
        });
    }
}

fn crc64(c: &mut Criterion) {
    let mut g = c.benchmark_group("crc64_dump_payload");
    for n in [100usize, 65536] {
        let d = bytes(n);
        assert_eq!(
            hand_written::crc64(0, &d),
            respite::types::rdb::crc64(0, &d)
        );
        g.throughput(Throughput::Bytes(n as u64));
        g.bench_function(format!("hand_written/{n}"), |b| {
            b.iter(|| hand_written::crc64(0, black_box(&d)))
        });
        g.bench_function(format!("crc_crate/{n}"), |b| {
            b.iter(|| respite::types::rdb::crc64(0, black_box(&d)))
        });
    }
}

/// What RDB does with a long string: compress with Redis's bound (4 bytes saved), then load.
fn lzf(c: &mut Criterion) {
    let mut g = c.benchmark_group("lzf_round_trip");
    for n in [100usize, 4096, 65536] {
        let d = text(n);
        g.throughput(Throughput::Bytes(n as u64));
        g.bench_function(format!("respite/{n}"), |b| {
            b.iter(|| {
                let z = lzf::compress(black_box(&d), n - 4).expect("compressible");
                lzf::decompress(&z, n).expect("round trip")
            })
        });
    }
}

criterion_group!(benches, sha1, crc32, crc64, lzf);
criterion_main!(benches);

/// respite's digests before it took the crates (removed from src/): the baseline.
mod hand_written {
    pub fn sha1(data: &[u8]) -> [u8; 20] {
        let mut h: [u32; 5] = [
            0x6745_2301,
            0xEFCD_AB89,
            0x98BA_DCFE,
            0x1032_5476,
            0xC3D2_E1F0,
        ];
        let bit_len = (data.len() as u64).wrapping_mul(8);
        let mut msg = Vec::with_capacity(data.len() + 72);
        msg.extend_from_slice(data);
        msg.push(0x80);
        while msg.len() % 64 != 56 {
            msg.push(0);
        }
        msg.extend_from_slice(&bit_len.to_be_bytes());
        let mut w = [0u32; 80];
        for block in msg.chunks_exact(64) {
            for (i, word) in block.chunks_exact(4).enumerate() {
                w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
            }
            for i in 16..80 {
                w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
            }
            let [mut a, mut b, mut c, mut d, mut e] = h;
            for (i, wi) in w.iter().enumerate() {
                let (f, k) = match i {
                    0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                    20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                    40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                    _ => (b ^ c ^ d, 0xCA62_C1D6),
                };
                let t = a
                    .rotate_left(5)
                    .wrapping_add(f)
                    .wrapping_add(e)
                    .wrapping_add(k)
                    .wrapping_add(*wi);
                e = d;
                d = c;
                c = b.rotate_left(30);
                b = a;
                a = t;
            }
            for (x, v) in h.iter_mut().zip([a, b, c, d, e]) {
                *x = x.wrapping_add(v);
            }
        }
        let mut out = [0u8; 20];
        for (i, x) in h.iter().enumerate() {
            out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
        }
        out
    }

    pub fn crc32(data: &[u8]) -> u32 {
        static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
        let t = TABLE.get_or_init(|| {
            let mut t = [0u32; 256];
            for (i, e) in t.iter_mut().enumerate() {
                let mut c = i as u32;
                for _ in 0..8 {
                    c = if c & 1 != 0 {
                        0xEDB8_8320 ^ (c >> 1)
                    } else {
                        c >> 1
                    };
                }
                *e = c;
            }
            t
        });
        let mut c = !0u32;
        for &b in data {
            c = t[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
        }
        !c
    }

    pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
        for &b in data {
            crc = CRC_TABLE[((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8);
        }
        crc
    }

    /// The polynomial bit-reversed, as a reflected CRC shifts right.
    const CRC_POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

    static CRC_TABLE: [u64; 256] = {
        let mut t = [0u64; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u64;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 == 1 {
                    (c >> 1) ^ CRC_POLY_REFLECTED
                } else {
                    c >> 1
                };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
}
