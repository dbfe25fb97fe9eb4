#!/bin/sh
# Builds the lexer fuzzer with ASan into $OUT (default /tmp/lualex-fuzz); output stays out of the tree.
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
SRC="$HERE/../lua-5.1.5"
OUT=${OUT:-/tmp/lualex-fuzz}
mkdir -p "$OUT/obj"
for f in "$SRC"/*.c; do
  clang -c -g -O1 -fsanitize=fuzzer-no-link,address -DLUA_USE_LINUX -I"$SRC" "$f" -o "$OUT/obj/$(basename "$f" .c).o"
done
clang -g -O1 -fsanitize=fuzzer,address -I"$SRC" "$HERE/lex_fuzz.c" "$OUT"/obj/*.o -lm -o "$OUT/lex_fuzz"
echo "$OUT/lex_fuzz"
