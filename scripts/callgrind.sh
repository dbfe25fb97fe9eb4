#!/usr/bin/env bash
# Instructions per request, respite vs redis-server, under valgrind's callgrind
# (user space only; deterministic for the same binary and load, unlike wall-clock numbers on a
# shared 2-core box — DESIGN.md §9).
#
# Each server runs under `valgrind --tool=callgrind` with instrumentation off while it starts.
# For each test (SET, then GET, then INCR by default) the script switches counting on, runs a
# fixed redis-benchmark load (-n REQUESTS -c 50 -P 16 -d 100, loopback only), and dumps the
# counters (`callgrind_control --dump`), so each dump holds exactly one test's work,
# connection set-up of the 50 clients and idle timers included. It prints
# total Ir / requests per test and server, then the top functions (exclusive Ir) of respite.
#
# Usage: scripts/callgrind.sh                (builds release first; ~1-3 minutes)
# Environment (defaults in brackets):
#   REQUESTS [100000]  PIPELINE [16]  CLIENTS [50]  DATASIZE [100]  TESTS ["set get incr"]
#                      (any redis-benchmark -t name: lpush lpop sadd hset zadd ...; plus
#                      xadd = XADD bench:stream MAXLEN ~ 1000 * field value, evalsha_incr
#                      and publish (one subscriber), as in scripts/bench.sh)
#   KEYSPACE []        if set, -r KEYSPACE (random keys); unset = one key
#   THREADS [1]        respite --threads (1 keeps the count free of cross-thread wake-ups;
#                      valgrind runs threads one at a time anyway)
#   RESPITE_ARGS []    extra respite flags, e.g. "--engine redb --appendfsync everysec" (a
#                      fresh --dir in OUT is added with --engine); the count covers every
#                      thread (committer and checkpointer too), and with --engine each dump
#                      waits until INFO shows no pending or unapplied change, so the log
#                      append and checkpoint of all its writes are counted in that test
#   SERVERS ["respite redis"]   which servers to measure
#   TOP [25]           how many functions to list per profile
#   CACHE_SIM [0]      1 = valgrind --cache-sim=yes: also prints D1 and LL (last-level) data
#                      misses per request (read + write) from the simulated caches (exact for the
#                      same binary and load; slower, so keep REQUESTS small)
#   LL []              with CACHE_SIM=1, the simulated last level as size,assoc,line (valgrind
#                      --LL). Valgrind takes this box's as 256 MiB direct-mapped, so its LL misses
#                      are first touches of memory only; LL=1048576,16,64 models the 1 MiB L2 per
#                      core instead, whose misses are what a big collection's lookups pay
#   WARMUP [0]         requests of the same load run before counting starts (e.g. fill the
#                      collection -r KEYSPACE grows, so the count is of the steady state that
#                      scripts/bench.sh's later rounds measure)
#   NO_BUILD [0]  RESPITE_BIN [target/release/respite]  REDIS_SERVER [redis-server]
#   OUT [tmp dir]      callgrind.<server>.<test> dumps and annotations are kept here
#
# Comparing two versions of a hot path (e.g. before/after a change to src/protocol/parse.rs):
#   git worktree add /tmp/respite-old <old-commit>
#   (cd /tmp/respite-old && cargo build --release)
#   SERVERS=respite NO_BUILD=1 RESPITE_BIN=/tmp/respite-old/target/release/respite \
#       OUT=/tmp/cg-old scripts/callgrind.sh
#   SERVERS=respite OUT=/tmp/cg-new scripts/callgrind.sh
# Ir/request is repeatable to well under 1% for an unchanged binary, so a difference of a
# few percent is real. To see where it moved, per function and per source line:
#   callgrind_annotate --inclusive=yes /tmp/cg-new/callgrind.respite.set | head -60
#   callgrind_annotate --auto=yes --show-percs=no /tmp/cg-new/callgrind.respite.set src/protocol/parse.rs
#   callgrind_annotate --diff /tmp/cg-old/callgrind.respite.set /tmp/cg-new/callgrind.respite.set
#     (--diff needs valgrind >= 3.21; on older ones compare the two top lists side by side)
set -euo pipefail

cd "$(dirname "$0")/.."

REQUESTS=${REQUESTS:-100000}
PIPELINE=${PIPELINE:-16}
CLIENTS=${CLIENTS:-50}
DATASIZE=${DATASIZE:-100}
TESTS=${TESTS:-"set get incr"}
KEYSPACE=${KEYSPACE:-}
THREADS=${THREADS:-1}
SERVERS=${SERVERS:-"respite redis"}
RESPITE_ARGS=${RESPITE_ARGS:-}
TOP=${TOP:-25}
NO_BUILD=${NO_BUILD:-0}
CACHE_SIM=${CACHE_SIM:-0}
LL=${LL:-}
WARMUP=${WARMUP:-0}
RESPITE_BIN=${RESPITE_BIN:-target/release/respite}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
OUT=${OUT:-$(mktemp -d /tmp/respite-callgrind.XXXXXX)}
HOST=127.0.0.1

for tool in valgrind callgrind_control callgrind_annotate redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null || {
        echo "callgrind.sh: $tool not found (apt-get install valgrind redis-tools)" >&2
        exit 1
    }
done
if [[ $NO_BUILD != 1 && $SERVERS == *respite* ]]; then
    cargo build --release --quiet
fi
mkdir -p "$OUT"

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

PID=""
cleanup() {
    if [[ -n $PID ]]; then
        kill "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_ready() { # port
    for _ in $(seq 1 600); do
        if redis-cli -h $HOST -p "$1" PING 2>/dev/null | grep -q PONG; then
            return 0
        fi
        kill -0 "$PID" 2>/dev/null || {
            echo "callgrind.sh: server exited; see $OUT/*.log" >&2
            exit 1
        }
        sleep 0.2
    done
    echo "callgrind.sh: server did not answer PING on port $1" >&2
    exit 1
}

# Total instructions of a dump: the "summary:" (or "totals:") line of the callgrind file.
total_ir() {
    awk '/^(summary|totals):/ { print $2; exit }' "$1"
}

declare -A IR
for server in $SERVERS; do
    port=$(free_port)
    case $server in
    respite)
        # shellcheck disable=SC2206 # RESPITE_ARGS is a list of flags
        cmd=("$RESPITE_BIN" --port "$port" --bind $HOST --threads "$THREADS" $RESPITE_ARGS)
        if [[ $RESPITE_ARGS == *--engine* ]]; then
            rm -rf "$OUT/respite-dir" && mkdir -p "$OUT/respite-dir"
            cmd+=(--dir "$OUT/respite-dir")
        fi
        ;;
    redis) cmd=("$REDIS_SERVER" --port "$port" --bind $HOST --save '' --appendonly no --daemonize no) ;;
    *)
        echo "callgrind.sh: unknown server $server" >&2
        exit 1
        ;;
    esac
    # valgrind itself becomes the server process, so $! is the pid callgrind_control needs.
    sim=()
    [[ $CACHE_SIM == 1 ]] && sim=(--cache-sim=yes)
    [[ $CACHE_SIM == 1 && -n $LL ]] && sim+=(--LL="$LL")
    RESPITE_LOG=warn valgrind --tool=callgrind "${sim[@]}" --instr-atstart=no --callgrind-out-file="$OUT/callgrind.$server.boot" \
        "${cmd[@]}" >"$OUT/$server.log" 2>&1 &
    PID=$!
    wait_ready "$port"
    for test in $TESTS; do
        extra=()
        [[ -n $KEYSPACE ]] && extra=(-r "$KEYSPACE")
        # Tests that are not redis-benchmark -t names (same loads as scripts/bench.sh).
        sub=""
        case $test in
        evalsha_incr)
            sha=$(redis-cli -h $HOST -p "$port" SCRIPT LOAD "return redis.call('INCR', KEYS[1])")
            key=bench:counter
            [[ -n $KEYSPACE ]] && key=key:__rand_int__
            what=(EVALSHA "$sha" 1 "$key")
            ;;
        publish)
            python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"*2\r\n$9\r\nSUBSCRIBE\r\n$10\r\nbench:chan\r\n")
while s.recv(1 << 20):
    pass
' "$port" &
            sub=$!
            sleep 0.5
            what=(PUBLISH bench:chan hello-subscriber)
            ;;
        xadd) what=(XADD bench:stream MAXLEN '~' 1000 '*' field value) ;;
        *) what=(-t "$test") ;;
        esac
        if [[ $WARMUP -gt 0 ]]; then
            redis-benchmark -h $HOST -p "$port" -n "$WARMUP" -c "$CLIENTS" -P "$PIPELINE" \
                -d "$DATASIZE" "${extra[@]}" -q --csv "${what[@]}" >/dev/null 2>>"$OUT/benchmark.err"
        fi
        callgrind_control --instr=on "$PID" >/dev/null 2>&1
        callgrind_control --zero "$PID" >/dev/null 2>&1
        redis-benchmark -h $HOST -p "$port" -n "$REQUESTS" -c "$CLIENTS" -P "$PIPELINE" \
            -d "$DATASIZE" "${extra[@]}" -q --csv "${what[@]}" >"$OUT/$server.$test.csv" 2>>"$OUT/benchmark.err"
        if [[ -n $sub ]]; then kill "$sub" 2>/dev/null || true; wait "$sub" 2>/dev/null || true; fi
        if [[ $server == respite && $RESPITE_ARGS == *--engine* ]]; then
            # (Not SAVE: that would force a checkpoint the load alone would not make.)
            while redis-cli -h $HOST -p "$port" INFO persistence |
                grep -Eq '^respite_(pending|unapplied)_changes:[1-9]'; do
                sleep 0.5
            done
        fi
        callgrind_control --dump="$test" "$PID" >/dev/null 2>&1
        callgrind_control --instr=off "$PID" >/dev/null 2>&1
        # The dump lands next to the boot file with a numbered suffix; take the newest.
        dump=$(ls -t "$OUT/callgrind.$server.boot".* | head -1)
        mv "$dump" "$OUT/callgrind.$server.$test"
        IR[$server.$test]=$(total_ir "$OUT/callgrind.$server.$test")
        echo "$server $test: ${IR[$server.$test]} Ir" >&2
    done
    kill "$PID"
    wait "$PID" 2>/dev/null || true
    PID=""
done

echo
echo "instructions per request (user space; -n $REQUESTS -c $CLIENTS -P $PIPELINE -d $DATASIZE, keyspace ${KEYSPACE:-one key}, warm-up $WARMUP, respite --threads $THREADS)"
printf '%-6s' test
for server in $SERVERS; do printf ' %12s' "$server"; done
[[ $SERVERS == "respite redis" ]] && printf ' %14s' "respite/redis"
echo
for test in $TESTS; do
    printf '%-6s' "$test"
    for server in $SERVERS; do
        printf ' %12.0f' "$(awk -v ir="${IR[$server.$test]}" -v n="$REQUESTS" 'BEGIN { print ir / n }')"
    done
    if [[ $SERVERS == "respite redis" ]]; then
        printf ' %13.2fx' "$(awk -v a="${IR[respite.$test]}" -v b="${IR[redis.$test]}" 'BEGIN { print a / b }')"
    fi
    echo
done | tee "$OUT/summary.txt"

if [[ $CACHE_SIM == 1 ]]; then
    # Events of a dump by name: the "events:" line names the columns of "summary:".
    misses() { # file -> "D1 LL" data misses (reads + writes)
        awk '/^events:/ { for (i = 2; i <= NF; i++) col[$i] = i }
             /^(summary|totals):/ { print $col["D1mr"] + $col["D1mw"], $col["DLmr"] + $col["DLmw"]; exit }' "$1"
    }
    echo
    echo "data cache misses per request (simulated D1 and last-level${LL:+ $LL}, reads + writes)"
    printf '%-6s %-8s %10s %10s\n' test server D1 LL
    for test in $TESTS; do
        for server in $SERVERS; do
            read -r d1 ll < <(misses "$OUT/callgrind.$server.$test")
            printf '%-6s %-8s %10.2f %10.2f\n' "$test" "$server" \
                "$(awk -v x="$d1" -v n="$REQUESTS" 'BEGIN { print x / n }')" \
                "$(awk -v x="$ll" -v n="$REQUESTS" 'BEGIN { print x / n }')"
        done
    done | tee -a "$OUT/summary.txt"
fi

for server in $SERVERS; do
    for test in $TESTS; do
        callgrind_annotate --inclusive=no "$OUT/callgrind.$server.$test" >"$OUT/annotate.$server.$test.txt" 2>&1 || true
        callgrind_annotate --inclusive=yes "$OUT/callgrind.$server.$test" >"$OUT/inclusive.$server.$test.txt" 2>&1 || true
    done
done
# (Pipelines ending in `head` may SIGPIPE their writers; `|| true` keeps pipefail quiet.)
# Function lines of a callgrind_annotate listing (after its third dashed rule), paths shortened.
top_lines() {
    awk '/^-+$/ { dashes++; next } dashes >= 4 && NF && !/file:function|PROGRAM TOTALS/ { print }' "$1" |
        sed -e 's#/rustc/[0-9a-f]*/library/#std:#' -e 's#/root/.cargo/registry/src/[^/]*/##' \
            -e 's# \[[^]]*\]$##' -e "s#$PWD/##" | cut -c1-200
}
if [[ $SERVERS == *respite* ]]; then
    for test in $TESTS; do
        echo
        echo "respite $test: top $TOP functions by exclusive Ir (full: $OUT/annotate.respite.$test.txt)"
        top_lines "$OUT/annotate.respite.$test.txt" | head -"$TOP" || true
        echo "respite $test: respite's own functions by inclusive Ir (full: $OUT/inclusive.respite.$test.txt)"
        top_lines "$OUT/inclusive.respite.$test.txt" | grep 'respite::' | head -"$TOP" || true
    done
fi
echo
echo "dumps and annotations: $OUT"
