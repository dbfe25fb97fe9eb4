#!/usr/bin/env bash
# Prints who imports whom: module → the top-level modules its non-test code names through
# `crate::` paths, `super::` paths that climb to the root, and exported macros, with each
# module's rank in src/lib.rs's module map. Upward arrows are marked "(up)"; the arrows
# test (tests/arrows.rs, the same code) fails on any of them.
#     scripts/deps.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --quiet --test arrows -- --ignored --exact dependency_table --nocapture \
    | grep '^|'
