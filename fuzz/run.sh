#!/usr/bin/env bash
# Fuzzes one target for a while with the settings used on a shared 2-core box, then
# minimizes its corpus. Usage: fuzz/run.sh <target> [seconds]   (from the repository root)
set -euo pipefail
target=$1
secs=${2:-600}
dir=$(cd "$(dirname "$0")" && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$dir/target}
cargo +nightly fuzz run --fuzz-dir "$dir" --target-dir "$CARGO_TARGET_DIR" "$target" \
    "$dir/corpus/$target" -- \
    -jobs=1 -workers=1 -max_total_time="$secs" -rss_limit_mb=4096 -timeout=10 -max_len=4096 \
    -print_final_stats=1
