#!/usr/bin/env bash
# Proxy cost per request that wall-clock cannot see on a shared box (issue 17): `respite proxy`
# and twemproxy (`nutcracker`) in front of the same three redis-server nodes, under a fixed
# redis-benchmark load (-n REQUESTS -c CLIENTS -d DATASIZE -r KEYSPACE), for each test and
# pipeline depth.
#
#   MODE=callgrind [default]: each proxy runs under `valgrind --tool=callgrind` with counting
#     off while it starts; per test and pipeline, counting is switched on, the load runs, the
#     counters are dumped. Prints user-space instructions per request (exact, repeatable).
#   MODE=strace: each proxy runs under `strace -c -f`; per test and pipeline the load runs
#     against a fresh proxy and the syscall summary is kept. Prints syscalls per request and
#     the busiest calls (the kernel side that callgrind does not count).
#
# Usage: scripts/callgrind_proxy.sh   (builds release first unless NO_BUILD=1)
# Environment (defaults in brackets): MODE [callgrind], TARGETS ["respite twemproxy"],
#   TESTS ["set get"], PIPELINES ["1 16"], REQUESTS [100000], CLIENTS [50], DATASIZE [100],
#   KEYSPACE [100000], PROXY_THREADS [1] (valgrind runs one thread at a time anyway),
#   NO_BUILD [0], RESPITE_BIN [target/release/respite], OUT [tmp dir].
# To see where respite's instructions go:
#   callgrind_annotate --inclusive=no $OUT/callgrind.respite.set.16 | head -60
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${MODE:-callgrind}
TARGETS=${TARGETS:-"respite twemproxy"}
TESTS=${TESTS:-"set get"}
PIPELINES=${PIPELINES:-"1 16"}
REQUESTS=${REQUESTS:-100000}
CLIENTS=${CLIENTS:-50}
DATASIZE=${DATASIZE:-100}
KEYSPACE=${KEYSPACE:-100000}
PROXY_THREADS=${PROXY_THREADS:-1}
NO_BUILD=${NO_BUILD:-0}
RESPITE_BIN=${RESPITE_BIN:-target/release/respite}
OUT=${OUT:-$(mktemp -d /tmp/respite-callgrind-proxy.XXXXXX)}
HOST=127.0.0.1

tools=(redis-server redis-benchmark redis-cli nutcracker)
case $MODE in
callgrind) tools+=(valgrind callgrind_control) ;;
strace) tools+=(strace) ;;
*)
    echo "callgrind_proxy.sh: MODE is callgrind or strace" >&2
    exit 1
    ;;
esac
for tool in "${tools[@]}"; do
    command -v "$tool" >/dev/null || {
        echo "callgrind_proxy.sh: $tool not found" >&2
        exit 1
    }
done
[[ $NO_BUILD == 1 ]] || cargo build --release --quiet --bin respite
mkdir -p "$OUT"

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PIDS=()
PID=""
cleanup() {
    [[ -n $PID ]] && kill "$PID" 2>/dev/null
    for pid in "${PIDS[@]}" $PID; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}" $PID; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
wait_ready() { # port
    for _ in $(seq 1 600); do
        redis-cli -h $HOST -p "$1" PING 2>/dev/null | grep -q PONG && return 0
        sleep 0.2
    done
    echo "callgrind_proxy.sh: nothing answered PING on port $1 (logs in $OUT)" >&2
    exit 1
}

NODE_PORTS=()
for i in 0 1 2; do
    p=$(free_port)
    redis-server --port "$p" --bind $HOST --save '' --appendonly no --daemonize no \
        --logfile "$OUT/node$i.log" >/dev/null 2>&1 &
    PIDS+=($!)
    NODE_PORTS+=("$p")
done
for p in "${NODE_PORTS[@]}"; do wait_ready "$p"; done

# The proxy command for a target on a port (twemproxy's config is written on the way).
proxy_cmd() { # target port
    case $1 in
    respite)
        CMD=("$RESPITE_BIN" proxy --port "$2" --bind $HOST --threads "$PROXY_THREADS"
            --node "node-a=redis://$HOST:${NODE_PORTS[0]}"
            --node "node-b=redis://$HOST:${NODE_PORTS[1]}"
            --node "node-c=redis://$HOST:${NODE_PORTS[2]}")
        ;;
    twemproxy)
        cat >"$OUT/nutcracker.yml" <<EOF
fleet:
  listen: $HOST:$2
  hash: fnv1a_64
  distribution: ketama
  redis: true
  auto_eject_hosts: false
  servers:
   - $HOST:${NODE_PORTS[0]}:1 node-a
   - $HOST:${NODE_PORTS[1]}:1 node-b
   - $HOST:${NODE_PORTS[2]}:1 node-c
EOF
        CMD=(nutcracker -c "$OUT/nutcracker.yml" -s "$(free_port)" -o "$OUT/nutcracker.log")
        ;;
    *)
        echo "callgrind_proxy.sh: unknown target $1" >&2
        exit 1
        ;;
    esac
}
load() { # port test pipeline
    redis-benchmark -h $HOST -p "$1" -t "$2" -n "$REQUESTS" -c "$CLIENTS" -P "$3" \
        -d "$DATASIZE" -r "$KEYSPACE" -q --csv >>"$OUT/benchmark.csv" 2>>"$OUT/benchmark.err"
}
stop() {
    kill -INT "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    PID=""
}

declare -A RES
for target in $TARGETS; do
    if [[ $MODE == callgrind ]]; then
        port=$(free_port)
        proxy_cmd "$target" "$port"
        # valgrind itself becomes the proxy process: $! is the pid callgrind_control needs.
        RESPITE_LOG=warn valgrind --tool=callgrind --instr-atstart=no \
            --callgrind-out-file="$OUT/callgrind.$target.boot" "${CMD[@]}" >"$OUT/$target.log" 2>&1 &
        PID=$!
        wait_ready "$port"
        for p in $PIPELINES; do
            for t in $TESTS; do
                callgrind_control --instr=on "$PID" >/dev/null 2>&1
                callgrind_control --zero "$PID" >/dev/null 2>&1
                load "$port" "$t" "$p"
                callgrind_control --dump="$t.$p" "$PID" >/dev/null 2>&1
                callgrind_control --instr=off "$PID" >/dev/null 2>&1
                dump=$(ls -t "$OUT/callgrind.$target.boot".* | head -1)
                mv "$dump" "$OUT/callgrind.$target.$t.$p"
                ir=$(awk '/^(summary|totals):/ { print $2; exit }' "$OUT/callgrind.$target.$t.$p")
                RES[$target.$t.$p]=$(awk -v ir="$ir" -v n="$REQUESTS" 'BEGIN { printf "%.0f", ir / n }')
                echo "$target $t P$p: ${RES[$target.$t.$p]} Ir/req" >&2
            done
        done
        stop
    else
        for p in $PIPELINES; do
            for t in $TESTS; do
                port=$(free_port)
                proxy_cmd "$target" "$port"
                f="$OUT/strace.$target.$t.$p"
                RESPITE_LOG=warn strace -c -f -o "$f" "${CMD[@]}" >"$OUT/$target.log" 2>&1 &
                PID=$!
                wait_ready "$port"
                load "$port" "$t" "$p"
                # strace blocks fatal signals while it runs a program: stop the proxy itself.
                kill -INT "$(pgrep -P "$PID")" 2>/dev/null || true
                stop
                calls=$(awk '$NF == "total" { print $4 }' "$f") # % time, seconds, usecs/call, calls
                RES[$target.$t.$p]=$(awk -v c="$calls" -v n="$REQUESTS" 'BEGIN { printf "%.2f", c / n }')
                echo "$target $t P$p: ${RES[$target.$t.$p]} syscalls/req; top:" >&2
                awk 'NR > 2 && $NF != "total" && $1 !~ /^-/ { print "   ", $NF, $4 }' "$f" |
                    sort -k2 -nr | head -6 >&2
            done
        done
    fi
done

unit="Ir/req (user space)"
[[ $MODE == strace ]] && unit="syscalls/req"
echo
echo "$unit: -n $REQUESTS -c $CLIENTS -d $DATASIZE -r $KEYSPACE, respite --threads $PROXY_THREADS"
printf '%-5s %3s' test P
for target in $TARGETS; do printf ' %10s' "$target"; done
[[ $TARGETS == "respite twemproxy" ]] && printf ' %14s' "respite/twem"
echo
for p in $PIPELINES; do
    for t in $TESTS; do
        printf '%-5s %3s' "$t" "$p"
        for target in $TARGETS; do printf ' %10s' "${RES[$target.$t.$p]}"; done
        if [[ $TARGETS == "respite twemproxy" ]]; then
            printf ' %13.2fx' "$(awk -v a="${RES[respite.$t.$p]}" -v b="${RES[twemproxy.$t.$p]}" 'BEGIN { print a / b }')"
        fi
        echo
    done
done | tee "$OUT/summary.txt"
echo "dumps: $OUT"
