//! The test double's costs: in-process start-to-first-PING time, and the resident memory
//! of an idle test server (VmRSS growth over 10 servers, divided by 10).

use criterion::{criterion_group, criterion_main, Criterion};
use respite::TestServer;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

fn start_and_ping() -> TestServer {
    let srv = TestServer::start().expect("start");
    ping(&srv);
    srv
}

fn ping(srv: &TestServer) {
    let mut s = std::net::TcpStream::connect(srv.addr()).expect("connect");
    s.write_all(b"PING\r\n").expect("write");
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf).expect("read");
    assert_eq!(&buf, b"+PONG\r\n");
}

fn vm_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn bench(c: &mut Criterion) {
    // Warm-up (command table, allocator) so the measurements are of a server, not of the
    // process's first use of the crate.
    drop(start_and_ping());
    let t = Instant::now();
    for _ in 0..20 {
        drop(start_and_ping());
    }
    println!(
        "start-to-first-PING: {:?} per server (mean of 20)",
        t.elapsed() / 20
    );

    // A restart keeping 10 000 keys, without the default 100 ms of downtime.
    let srv = start_and_ping();
    for i in 0..10_000 {
        srv.set(&format!("key:{i}"), "value");
    }
    let t = Instant::now();
    for _ in 0..10 {
        srv.restart_after(true, Duration::ZERO);
        ping(&srv);
    }
    println!(
        "restart keeping 10 000 keys, to first PING: {:?} (mean of 10)",
        t.elapsed() / 10
    );
    assert_eq!(srv.keys("*").len(), 10_000);
    drop(srv);

    let before = vm_rss_kb();
    let servers: Vec<TestServer> = (0..10).map(|_| start_and_ping()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let after = vm_rss_kb();
    println!(
        "idle test server resident memory: {} KiB each ({} -> {} KiB for 10)",
        after.saturating_sub(before) / 10,
        before,
        after
    );
    drop(servers);

    c.bench_function("testdouble_start_to_first_ping", |b| {
        b.iter(|| drop(start_and_ping()))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
