#!/usr/bin/env bash
# Tail latency while the server does something big in the background (issue 17): the worst
# request of a steady P1 load (redis-benchmark, 50 clients, random keys) while
#   del        a DEL of a 1 M-member set, then of a 1 M-field hash
#   expire     1 M keys sharing one deadline expire together (the active sweep)
#   checkpoint (--engine redb) writes that keep the checkpointer busy
# runs. For each scenario it prints redis-benchmark's p99 and max latency of the load,
# respite beside redis-server (same scenario, same load; redis-server's checkpoint
# counterpart is an AOF rewrite, BGREWRITEAOF, started during the load).
# The target (issue 17) is no request slower than 10 ms.
#
# Usage: scripts/bench_tail.sh   (builds release first unless NO_BUILD=1)
# Environment: SCENARIOS [del expire checkpoint], MEMBERS [1000000], LOAD_REQUESTS [300000],
#   TESTS [get,set], NO_BUILD [0], RESPITE_BIN [target/release/respite],
#   RESPITE_ARGS [extra server flags, e.g. "--set lazyfree-lazy-user-del=yes"],
#   SERVERS [respite redis] (repeated runs of respite alone: SERVERS=respite),
#   REDIS_SERVER [redis-server], OUT [tmp dir].
set -euo pipefail
cd "$(dirname "$0")/.."

SCENARIOS=${SCENARIOS:-"del expire checkpoint"}
MEMBERS=${MEMBERS:-1000000}
LOAD_REQUESTS=${LOAD_REQUESTS:-300000}
TESTS=${TESTS:-get,set}
SERVERS=${SERVERS:-"respite redis"}
RESPITE_ARGS=${RESPITE_ARGS:-}
NO_BUILD=${NO_BUILD:-0}
RESPITE_BIN=${RESPITE_BIN:-target/release/respite}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
OUT=${OUT:-$(mktemp -d /tmp/respite-tail.XXXXXX)}
HOST=127.0.0.1

tools=(redis-benchmark redis-cli python3)
[[ " $SERVERS " == *" redis "* ]] && tools+=("$REDIS_SERVER")
for tool in "${tools[@]}"; do
    command -v "$tool" >/dev/null || {
        echo "bench_tail.sh: $tool not found" >&2
        exit 1
    }
done
[[ $NO_BUILD == 1 ]] || cargo build --release --quiet
mkdir -p "$OUT"

PID=""
cleanup() {
    [[ -n $PID ]] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    return 0
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() { # server scenario -> sets PORT, PID
    PORT=$(free_port)
    local dir="$OUT/$1-$2"
    rm -rf "$dir"
    mkdir -p "$dir"
    if [[ $1 == respite ]]; then
        local durable=()
        [[ $2 == checkpoint ]] && durable=(--engine redb --dir "$dir" --appendfsync everysec)
        # shellcheck disable=SC2086 # RESPITE_ARGS is a list of flags
        RESPITE_LOG=warn "$RESPITE_BIN" --port "$PORT" --bind $HOST "${durable[@]}" \
            $RESPITE_ARGS >"$dir/log" 2>&1 &
    else
        local durable=(--appendonly no)
        [[ $2 == checkpoint ]] && durable=(--appendonly yes --appendfsync everysec)
        "$REDIS_SERVER" --port "$PORT" --bind $HOST --save '' --dir "$dir" "${durable[@]}" \
            --daemonize no --logfile "$dir/log" >/dev/null 2>&1 &
    fi
    PID=$!
    for _ in $(seq 1 100); do
        redis-cli -h $HOST -p "$PORT" PING 2>/dev/null | grep -q PONG && return 0
        sleep 0.1
    done
    echo "bench_tail.sh: $1 did not start (log in $dir)" >&2
    exit 1
}

stop() {
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    PID=""
}

# RESP for `CMD key a1 a2 ...` batches, piped through redis-cli --pipe.
load() { # python-expression-yielding-commands
    python3 -c '
import sys
def cmd(*a):
    out = [b"*%d\r\n" % len(a)]
    for x in a:
        x = x if isinstance(x, bytes) else str(x).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(x), x))
    return b"".join(out)
w = sys.stdout.buffer
n = int(sys.argv[1]); kind = sys.argv[2]; deadline = int(sys.argv[3])
step = 1000
for base in range(0, n, step):
    r = range(base, min(n, base + step))
    if kind == "set":
        w.write(cmd("SADD", "big:set", *("member:%d" % i for i in r)))
    elif kind == "hash":
        args = []
        for i in r:
            args += ["field:%d" % i, "v"]
        w.write(cmd("HSET", "big:hash", *args))
    elif kind == "expire":
        for i in r:
            w.write(cmd("SET", "ttl:%d" % i, "v", "PXAT", deadline))
' "$MEMBERS" "$1" "${2:-0}" | redis-cli -h $HOST -p "$PORT" --pipe >/dev/null
}

# Runs the load in the background; its CSV lines go to $1.
load_start() {
    redis-benchmark -h $HOST -p "$PORT" -c 50 -P 1 -n "$LOAD_REQUESTS" -r 100000 -d 100 \
        -t "$TESTS" -q --csv >"$1" 2>/dev/null &
    LOAD_PID=$!
}

printf '%-10s %-8s %-4s %10s %10s %10s\n' scenario server test rps "p99 ms" "max ms" |
    tee "$OUT/summary.txt"
for scenario in $SCENARIOS; do
    for server in $SERVERS; do
        start "$server" "$scenario"
        csv="$OUT/$server-$scenario.csv"
        case $scenario in
        del)
            load set
            load hash
            load_start "$csv"
            sleep 1
            redis-cli -h $HOST -p "$PORT" DEL big:set >/dev/null
            sleep 1
            redis-cli -h $HOST -p "$PORT" DEL big:hash >/dev/null
            ;;
        expire)
            now_ms=$(python3 -c 'import time; print(int(time.time() * 1000))')
            # A deadline after the load is written and the benchmark is running.
            deadline=$((now_ms + 15000))
            load expire "$deadline"
            left=$((deadline - $(python3 -c 'import time; print(int(time.time() * 1000))')))
            if ((left < 1000)); then
                echo "bench_tail.sh: loading took too long; raise the deadline" >&2
                exit 1
            fi
            sleep "$(awk -v l="$left" 'BEGIN { printf "%.3f", (l - 1000) / 1000 }')"
            load_start "$csv"
            ;;
        checkpoint)
            load set
            load hash
            load_start "$csv"
            if [[ $server == redis ]]; then
                sleep 1
                redis-cli -h $HOST -p "$PORT" BGREWRITEAOF >/dev/null
            fi
            ;;
        esac
        wait "$LOAD_PID"
        if [[ $server == respite && $scenario == checkpoint ]]; then
            redis-cli -h $HOST -p "$PORT" INFO persistence | grep -E 'checkpoints' | tr -d '\r' \
                >>"$OUT/summary.txt" || true
        fi
        grep -v '^"test"' "$csv" | while IFS=, read -r t rps _ _ _ _ p99 max; do
            printf '%-10s %-8s %-4s %10s %10s %10s\n' "$scenario" "$server" "${t//\"/}" \
                "${rps//\"/}" "${p99//\"/}" "${max//\"/}"
        done | tee -a "$OUT/summary.txt"
        stop
    done
done
echo "raw results in $OUT"
