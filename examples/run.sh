#!/usr/bin/env bash
# Runs the Python and Node examples against a respite binary (default target/debug/respite;
# override with RESPITE_BIN). Installs redis-py + pytest into a venv under target/ and the
# `redis` npm package (as locked in package-lock.json) under examples/node. A missing python3
# or node is reported and skipped, unless EXAMPLES_REQUIRE_ALL=1 (CI), where it fails.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${RESPITE_BIN:-$root/target/debug/respite}"
case "$bin" in /*) ;; *) bin="$root/$bin" ;; esac
[ -x "$bin" ] || { echo "no respite binary at $bin (run cargo build)" >&2; exit 1; }
export RESPITE_BIN="$bin"
ran=0

if command -v python3 >/dev/null; then
  venv="$root/target/examples-venv"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --retries 5 redis pytest
  "$venv/bin/python" -m pytest -q "$root/examples/python/test_respite.py"
  ran=$((ran + 1))
else
  echo "python3 not found: skipping the Python example" >&2
fi

if command -v node >/dev/null && command -v npm >/dev/null; then
  (cd "$root/examples/node" && npm ci --silent --no-audit --no-fund --fetch-retries 5)
  node --test "$root/examples/node/respite.test.mjs"
  ran=$((ran + 1))
else
  echo "node/npm not found: skipping the Node example" >&2
fi

[ "$ran" -gt 0 ] || { echo "neither python3 nor node found" >&2; exit 1; }
if [ "${EXAMPLES_REQUIRE_ALL:-0}" = 1 ] && [ "$ran" -lt 2 ]; then
  echo "EXAMPLES_REQUIRE_ALL=1 but only $ran of 2 languages ran" >&2
  exit 1
fi
echo "examples passed ($ran languages)"
