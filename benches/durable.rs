//! The durable engine end to end (issue 6): SET throughput under `appendfsync always` with
//! 1, 8 and 50 concurrent writers (each waits for its reply before the next write, so only
//! group commit lets throughput grow with the writer count), and start-up reload time.
//!
//! Run: `cargo bench --bench durable`. The reload bench uses 100 000 keys, or 1 000 000 with
//! `RESPITE_BENCH_FULL=1` (10 000 in test mode, `cargo test --bench durable`). Each write-throughput run prints writes per durable commit
//! (read from `INFO persistence` before/after) so group commit is visible.

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use respite::TestServer;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const VALUE: &[u8] = b"value-0123456789";

fn resp(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// One command on a fresh blocking connection; returns the reply's text (status, integer or
/// bulk payload). Only for the simple replies these benches need.
fn command(addr: SocketAddr, args: &[&[u8]]) -> String {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.write_all(&resp(args)).expect("write");
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).expect("read");
    let line = line.trim_end();
    match line.as_bytes().first() {
        Some(b'$') => {
            let n: usize = line[1..].parse().expect("bulk length");
            let mut body = vec![0; n + 2];
            r.read_exact(&mut body).expect("bulk body");
            body.truncate(n);
            String::from_utf8(body).expect("utf8")
        }
        Some(b'+' | b':') => line[1..].to_string(),
        _ => panic!("unexpected reply {line:?}"),
    }
}

fn info_field(addr: SocketAddr, field: &str) -> u64 {
    let info = command(addr, &[b"INFO", b"persistence"]);
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("{field} missing from INFO"))
        .trim()
        .parse()
        .expect("counter")
}

/// `n` SETs, one at a time, each waiting for its `+OK`.
async fn write_loop(mut s: TcpStream, writer: usize, start: u64, n: u64) -> TcpStream {
    let mut reply = [0u8; 5];
    for i in start..start + n {
        let key = format!("w{writer}:{}", i % 10_000);
        s.write_all(&resp(&[b"SET", key.as_bytes(), VALUE]))
            .await
            .expect("write");
        s.read_exact(&mut reply).await.expect("read");
        assert_eq!(&reply, b"+OK\r\n");
    }
    s
}

fn write_throughput(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let srv = TestServer::builder()
        .redb(dir.path())
        .param("appendfsync", "always")
        .start()
        .expect("start durable server");
    let addr = srv.addr();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");

    let mut g = c.benchmark_group("durable_set_always");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(1));
    for writers in [1usize, 8, 50] {
        let mut conns: Vec<TcpStream> = rt.block_on(async {
            let mut v = Vec::with_capacity(writers);
            for _ in 0..writers {
                let s = TcpStream::connect(addr).await.expect("connect");
                s.set_nodelay(true).expect("nodelay");
                v.push(s);
            }
            v
        });
        let (mut writes, mut commits, mut elapsed) = (0u64, 0u64, Duration::ZERO);
        let mut next = 0u64;
        g.bench_function(format!("{writers}_writers"), |b| {
            b.iter_custom(|iters| {
                let before = info_field(addr, "respite_durable_commits");
                let start = Instant::now();
                conns = rt.block_on(async {
                    // Split `iters` writes over the writers as evenly as possible.
                    let w = writers as u64;
                    let tasks: Vec<_> = conns
                        .drain(..)
                        .enumerate()
                        .map(|(i, s)| {
                            let n = iters / w + u64::from((i as u64) < iters % w);
                            tokio::spawn(write_loop(s, i, next, n))
                        })
                        .collect();
                    let mut back = Vec::with_capacity(tasks.len());
                    for t in tasks {
                        back.push(t.await.expect("writer task"));
                    }
                    back
                });
                let took = start.elapsed();
                next += iters / writers as u64 + 1;
                commits += info_field(addr, "respite_durable_commits") - before;
                writes += iters;
                elapsed += took;
                took
            })
        });
        let secs = elapsed.as_secs_f64().max(1e-9);
        eprintln!(
            "durable_set_always/{writers}_writers: {writes} writes, {commits} durable commits \
             in {secs:.2}s = {:.0} writes/s, {:.0} commits/s, {:.2} writes per commit",
            writes as f64 / secs,
            commits as f64 / secs,
            writes as f64 / commits.max(1) as f64,
        );
    }
    g.finish();
    drop(srv);
}

/// Fills `dir` with `n` string keys through a durable server (MSET batches), then stops it.
fn fill(dir: &std::path::Path, n: u64) {
    let srv = TestServer::builder()
        .redb(dir)
        .param("appendfsync", "no")
        .start()
        .expect("start fill server");
    let mut s = std::net::TcpStream::connect(srv.addr()).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    const BATCH: u64 = 1000;
    let mut reply = [0u8; 5];
    let mut i = 0;
    while i < n {
        let end = (i + BATCH).min(n);
        let keys: Vec<String> = (i..end).map(|k| format!("key:{k:012}")).collect();
        let mut args: Vec<&[u8]> = vec![b"MSET"];
        for k in &keys {
            args.push(k.as_bytes());
            args.push(VALUE);
        }
        s.write_all(&resp(&args)).expect("write");
        s.read_exact(&mut reply).expect("read");
        assert_eq!(&reply, b"+OK\r\n");
        i = end;
    }
    assert_eq!(command(srv.addr(), &[b"DBSIZE"]), n.to_string());
    // Dropping makes the final durable commit and closes the file.
    drop(srv);
}

fn reload(c: &mut Criterion) {
    let full = std::env::var("RESPITE_BENCH_FULL").is_ok_and(|v| v == "1");
    // `cargo test --all-targets` runs this once without `--bench`: keep that run short.
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let n: u64 = match (full, bench_mode) {
        (true, _) => 1_000_000,
        (false, true) => 100_000,
        (false, false) => 10_000,
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let t = Instant::now();
    fill(dir.path(), n);
    eprintln!(
        "reload: filled {n} keys in {:.2}s",
        t.elapsed().as_secs_f64()
    );
    if let Ok(meta) = std::fs::metadata(dir.path().join("respite.redb")) {
        eprintln!(
            "reload: file {} bytes = {:.1} bytes per key",
            meta.len(),
            meta.len() as f64 / n as f64
        );
    }

    let mut g = c.benchmark_group("durable_reload");
    // Flat: each restart also pays an untimed shutdown, so avoid criterion's linear ramp.
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(if full { 30 } else { 5 }))
        .throughput(Throughput::Elements(n));
    let mut checked = false;
    g.bench_function(format!("{n}_strings"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                // Only start-up (which loads the file) is timed, not the shutdown commit.
                let start = Instant::now();
                let srv = TestServer::builder()
                    .redb(dir.path())
                    .start()
                    .expect("restart");
                total += start.elapsed();
                if !checked {
                    assert_eq!(command(srv.addr(), &[b"DBSIZE"]), n.to_string());
                    checked = true;
                }
                drop(srv);
            }
            total
        })
    });
    g.finish();
}

criterion_group!(benches, write_throughput, reload);
criterion_main!(benches);
