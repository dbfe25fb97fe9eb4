//! redis-py's client-side cache (`redis.Redis(protocol=3, cache_config=CacheConfig())`,
//! redis-py ≥ 5.1) against respite: a read is served from the client's cache (the server
//! sees no second GET), and another client's write invalidates it.
//!
//! redis-py comes from a venv: `$RESPITE_PYTHON`, else `target/examples-venv` (what
//! `examples/run.sh` installs) in the repository or in the cargo target directory, else
//! `csc-venv` in the target directory. `scripts/test.sh` installs it.
//!
//! redis-py enables its cache only for servers that report version 7.4 or later in HELLO
//! (`CacheProxyConnection.MIN_ALLOWED_VERSION`): respite reports 7.4, so redis-py runs
//! unchanged.

mod common;

use std::process::Command;

const SCRIPT: &str = r#"
import sys, time
import redis
from redis.cache import CacheConfig

# Unchanged redis-py: its cache is on only if respite passes its version gate.

port = int(sys.argv[1])
cached = redis.Redis(port=port, protocol=3, cache_config=CacheConfig())
plain = redis.Redis(port=port)

def gets():
    return int(plain.info("commandstats").get("cmdstat_get", {}).get("calls", 0))

plain.set("csc:k", "v1")
assert cached.get("csc:k") == b"v1"
seen = gets()
# Served from the local cache: the server runs no GET.
for _ in range(3):
    assert cached.get("csc:k") == b"v1"
assert gets() == seen, (gets(), seen)
tracking = [c for c in plain.client_list() if "t" in c["flags"]]
assert len(tracking) == 1, plain.client_list()

# Another client's write invalidates the cached value: the next reads see v2.
plain.set("csc:k", "v2")
deadline = time.monotonic() + 10
while cached.get("csc:k") != b"v2":
    assert time.monotonic() < deadline, "never invalidated"
    time.sleep(0.01)
fresh = gets()
assert fresh > seen
# And v2 is cached in turn.
assert cached.get("csc:k") == b"v2"
assert gets() == fresh

# A flush invalidates everything.
plain.set("csc:other", "x")
assert cached.get("csc:other") == b"x"
plain.flushall()
deadline = time.monotonic() + 10
while cached.get("csc:other") is not None:
    assert time.monotonic() < deadline, "flush never invalidated"
    time.sleep(0.01)
print("ok")
"#;

#[test]
fn redis_py_client_side_cache_is_invalidated_by_another_clients_write() {
    let py = common::python_with("redis.cache");
    let srv = common::real_server();
    let out = Command::new(&py)
        .args(["-c", SCRIPT, &srv.port().to_string()])
        .output()
        .expect("run python");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok",
        "redis-py script failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
