#!/usr/bin/env bash
# Proxy overhead (issue 7): redis-benchmark SET/GET straight to one redis-server, through
# `respite proxy` in front of three redis-server nodes, and through twemproxy (Debian package
# `nutcracker`) in front of the same three nodes — all in one run, alternating the targets
# each round. Prints, per test and pipeline, the median throughput of each target, the
# medians of the per-round ratios proxy/direct (1.0 = no overhead) and respite/twemproxy
# (issue 17's target: >= 1.0x at P1, >= 1.5x at P16), and both proxies' CPU per request
# (user + system time of the proxy process / requests) with their ratio (target < 1.0x).
# Instruction and syscall counts per request, which the shared box cannot blur:
# scripts/callgrind_proxy.sh (MODE=callgrind or MODE=strace).
#
# Usage: scripts/bench_proxy.sh   (builds release first unless NO_BUILD=1)
# Environment: ROUNDS [5], REQUESTS [100000] (P1), REQUESTS_PIPELINED [1000000],
#   PIPELINES ["1 16"], TESTS [set,get], CLIENTS [50], DATASIZE [100], KEYSPACE [100000]
#   (random keys, so all three nodes get traffic), PROXY_THREADS [1, the proxy's
#   default: single-threaded; 0 = one per core], OUT [tmp dir].
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-5}
REQUESTS=${REQUESTS:-100000}
REQUESTS_PIPELINED=${REQUESTS_PIPELINED:-1000000}
PIPELINES=${PIPELINES:-"1 16"}
TESTS=${TESTS:-set,get}
CLIENTS=${CLIENTS:-50}
DATASIZE=${DATASIZE:-100}
KEYSPACE=${KEYSPACE:-100000}
PROXY_THREADS=${PROXY_THREADS:-1}
NO_BUILD=${NO_BUILD:-0}
RESPITE_BIN=${RESPITE_BIN:-target/release/respite}
OUT=${OUT:-$(mktemp -d /tmp/respite-bench-proxy.XXXXXX)}
HOST=127.0.0.1

for tool in redis-server redis-benchmark redis-cli nutcracker; do
    command -v "$tool" >/dev/null || {
        echo "bench_proxy.sh: $tool not found (apt-get install redis-server redis-tools nutcracker)" >&2
        exit 1
    }
done
[[ $NO_BUILD == 1 ]] || cargo build --release --quiet
mkdir -p "$OUT"

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
wait_ready() { # port name
    for _ in $(seq 1 100); do
        redis-cli -h $HOST -p "$1" PING 2>/dev/null | grep -q PONG && return 0
        sleep 0.1
    done
    echo "bench_proxy.sh: $2 did not answer PING on port $1 (logs in $OUT)" >&2
    exit 1
}

# Three fleet nodes and one separate redis-server for the direct baseline.
NODE_PORTS=()
for i in 0 1 2 3; do
    p=$(free_port)
    redis-server --port "$p" --bind $HOST --save '' --appendonly no --daemonize no \
        --logfile "$OUT/node$i.log" >/dev/null 2>&1 &
    PIDS+=($!)
    NODE_PORTS+=("$p")
done
DIRECT_PORT=${NODE_PORTS[3]}
for p in "${NODE_PORTS[@]}"; do wait_ready "$p" redis-server; done

PROXY_PORT=$(free_port)
RESPITE_LOG=warn "$RESPITE_BIN" proxy --port "$PROXY_PORT" --bind $HOST --threads "$PROXY_THREADS" \
    --node "node-a=redis://$HOST:${NODE_PORTS[0]}" \
    --node "node-b=redis://$HOST:${NODE_PORTS[1]}" \
    --node "node-c=redis://$HOST:${NODE_PORTS[2]}" >"$OUT/proxy.log" 2>&1 &
PROXY_PID=$!
PIDS+=($PROXY_PID)
wait_ready "$PROXY_PORT" "respite proxy"

TWEM_PORT=$(free_port)
cat >"$OUT/nutcracker.yml" <<EOF
fleet:
  listen: $HOST:$TWEM_PORT
  hash: fnv1a_64
  distribution: ketama
  redis: true
  auto_eject_hosts: false
  servers:
   - $HOST:${NODE_PORTS[0]}:1 node-a
   - $HOST:${NODE_PORTS[1]}:1 node-b
   - $HOST:${NODE_PORTS[2]}:1 node-c
EOF
nutcracker -c "$OUT/nutcracker.yml" -s "$(free_port)" -o "$OUT/nutcracker.log" &
TWEM_PID=$!
PIDS+=($TWEM_PID)
wait_ready "$TWEM_PORT" twemproxy

CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() {
    local rest
    rest=$(<"/proc/$1/stat")
    rest=${rest##*) }
    # shellcheck disable=SC2086
    set -- $rest
    echo $((${12} + ${13}))
}

RESULTS="$OUT/results.tsv"
printf 'round\ttest\tpipeline\ttarget\trps\tcpu_us_per_req\n' >"$RESULTS"
run_one() { # round test pipeline target port pid(or empty)
    local n=$REQUESTS
    [[ $3 -gt 1 ]] && n=$REQUESTS_PIPELINED
    local before=0 after=0 rps cpu=""
    [[ -n $6 ]] && before=$(cpu_ticks "$6")
    rps=$(redis-benchmark -h $HOST -p "$5" -t "$2" -n "$n" -c "$CLIENTS" -P "$3" \
        -d "$DATASIZE" -r "$KEYSPACE" --csv 2>>"$OUT/benchmark.err" |
        awk -F, 'NR==2 {gsub(/"/, "", $2); print $2}')
    if [[ -n $6 ]]; then
        after=$(cpu_ticks "$6")
        cpu=$(awk -v t=$((after - before)) -v hz="$CLK_TCK" -v n="$n" \
            'BEGIN {printf "%.2f", t / hz * 1e6 / n}')
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${rps:-0}" "$cpu" >>"$RESULTS"
}

IFS=, read -ra TEST_LIST <<<"$TESTS"
for round in $(seq 1 "$ROUNDS"); do
    # Rotate the order of the three targets every round.
    targets=("direct $DIRECT_PORT -" "respite $PROXY_PORT $PROXY_PID" "twemproxy $TWEM_PORT $TWEM_PID")
    shift_by=$(((round - 1) % 3))
    targets=("${targets[@]:$shift_by}" "${targets[@]:0:$shift_by}")
    for p in $PIPELINES; do
        for t in "${TEST_LIST[@]}"; do
            for tgt in "${targets[@]}"; do
                read -r name port pid <<<"$tgt"
                [[ $pid == - ]] && pid=""
                run_one "$round" "$t" "$p" "$name" "$port" "$pid"
            done
        done
    done
    echo "round $round/$ROUNDS done" >&2
done

python3 - "$RESULTS" <<'EOF'
import csv, statistics, sys
from collections import defaultdict
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
by = defaultdict(dict)
for r in rows:
    by[(r["test"], int(r["pipeline"]), r["round"])][r["target"]] = r
print(f"{'test':6} {'P':>3} {'direct rps':>11} {'respite rps':>12} {'twem rps':>10} "
      f"{'respite/direct':>15} {'twem/direct':>12} {'respite/twem':>13} "
      f"{'cpu us/req respite':>19} {'twem':>6} {'cpu respite/twem':>17}")
for key in sorted({(t, p) for (t, p, _) in by}):
    rounds = [v for (t, p, _), v in by.items() if (t, p) == key and len(v) == 3]
    med = lambda name, f: statistics.median(float(r[name][f] or 0) for r in rounds)
    # Medians of the per-round ratios (each round's targets ran back to back).
    def ratio(a, b, f="rps"):
        vals = [float(r[a][f] or 0) / float(r[b][f]) for r in rounds if float(r[b][f] or 0) > 0]
        return statistics.median(vals) if vals else float("nan")
    print(f"{key[0]:6} {key[1]:>3} {med('direct','rps'):>11.0f} {med('respite','rps'):>12.0f} "
          f"{med('twemproxy','rps'):>10.0f} {ratio('respite', 'direct'):>14.2f}x "
          f"{ratio('twemproxy', 'direct'):>11.2f}x {ratio('respite', 'twemproxy'):>12.2f}x "
          f"{med('respite','cpu_us_per_req'):>19.2f} {med('twemproxy','cpu_us_per_req'):>6.2f} "
          f"{ratio('respite', 'twemproxy', 'cpu_us_per_req'):>16.2f}x")
EOF
