//! Cluster-mode clients, unchanged, against respite presenting one node that owns every
//! slot: redis-py's `RedisCluster` (tests/cluster_clients/redis_py_cluster.py) and
//! ioredis's `Cluster` (tests/cluster_clients/ioredis_cluster.mjs) run a subset of the seed
//! workloads (S1 TTL'd state and GETDEL tokens, S3 a fenced lock, S5 a stream with a
//! consumer group, S6 EVAL and MULTI on a `{tag}` group, S7 a counter) against
//! (a) `respite --cluster-mode emulated` and the test double's `cluster_emulated()`, and
//! (b) a proxy in front of three redis-server or respite nodes.
//!
//! redis-py comes from a venv: `$RESPITE_PYTHON`, else `target/examples-venv` in the
//! repository or in the cargo target directory (scripts/test.sh installs it); ioredis from
//! tests/cluster_clients/node_modules (`npm ci` there; scripts/test.sh does it), run by
//! `$RESPITE_NODE` or `node`.

mod common;
mod proxy_fleet;

use common::ServerProcess;
use proxy_fleet::{Fleet, NodeKind};
use std::path::{Path, PathBuf};
use std::process::Command;

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cluster_clients")
}

/// `node`, with ioredis installed next to the script.
fn node() -> PathBuf {
    assert!(
        scripts().join("node_modules/ioredis/package.json").exists(),
        "ioredis is not installed: run `npm ci` in tests/cluster_clients (scripts/test.sh does it)"
    );
    std::env::var_os("RESPITE_NODE").map_or_else(|| PathBuf::from("node"), PathBuf::from)
}

/// Runs a client script against `port`; it prints "ok" when every check passed.
fn run(program: PathBuf, script: &str, port: u16, mode: &str) {
    let out = Command::new(&program)
        .arg(scripts().join(script))
        .args(["127.0.0.1", &port.to_string(), mode])
        .current_dir(scripts())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "{script} against {mode} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn redis_py_against_an_emulated_cluster_server() {
    let srv = ServerProcess::respite(&["--cluster-mode", "emulated"]);
    run(
        common::python_with("redis.cluster"),
        "redis_py_cluster.py",
        srv.port,
        "emulated",
    );
}

#[test]
fn redis_py_against_the_test_double() {
    let srv = respite::TestServer::builder()
        .cluster_emulated()
        .start()
        .unwrap();
    run(
        common::python_with("redis.cluster"),
        "redis_py_cluster.py",
        srv.port(),
        "emulated",
    );
}

#[test]
fn redis_py_through_the_proxy() {
    let fleet = Fleet::open(NodeKind::Redis, &proxy_fleet::IDS, false, |_| {});
    run(
        common::python_with("redis.cluster"),
        "redis_py_cluster.py",
        fleet.proxy.addr().port(),
        "proxy",
    );
}

#[test]
fn ioredis_against_an_emulated_cluster_server() {
    let srv = ServerProcess::respite(&["--cluster-mode", "emulated"]);
    run(node(), "ioredis_cluster.mjs", srv.port, "emulated");
}

#[test]
fn ioredis_against_the_test_double() {
    let srv = respite::TestServer::builder()
        .cluster_emulated()
        .start()
        .unwrap();
    run(node(), "ioredis_cluster.mjs", srv.port(), "emulated");
}

#[test]
fn ioredis_through_the_proxy() {
    let fleet = Fleet::open(NodeKind::Redis, &proxy_fleet::IDS, false, |_| {});
    run(
        node(),
        "ioredis_cluster.mjs",
        fleet.proxy.addr().port(),
        "proxy",
    );
}

#[test]
fn ioredis_through_a_proxy_over_respite_nodes() {
    let fleet = Fleet::open(NodeKind::Respite, &proxy_fleet::IDS, false, |_| {});
    run(
        node(),
        "ioredis_cluster.mjs",
        fleet.proxy.addr().port(),
        "proxy",
    );
}
