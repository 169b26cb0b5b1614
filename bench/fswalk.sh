#!/usr/bin/env bash
# bench/fswalk.sh [BUILDDIR]: the time of one look at a session's disk (box_fswalk_usage_add,
# the walk the disk limit takes every 200 ms while a command runs, and before each host write)
# on a workspace of FILES files (default 10000) spread over 100 directories, warm cache.
# Needs a C compiler and pkg-config. BENCH_RUNS (default 30) and BENCH_FILES tune it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
[ -e "$build/lib/libbox.a" ] || { echo "no lib/libbox.a in $build: build first (make)" >&2; exit 2; }
runs=${BENCH_RUNS:-30}
files=${BENCH_FILES:-10000}
case "$runs$files" in *[!0-9]*) echo "BENCH_RUNS and BENCH_FILES must be numbers" >&2; exit 2;; esac
tmp=$(mktemp -d "${TMPDIR:-/tmp}/box-bench-fswalk.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cc -O2 -I"$src/lib/core" -o "$tmp/fswalk-usage" "$here/fswalk-usage.c" "$build/lib/libbox.a" \
	$(pkg-config --cflags --libs libcjson)
mkdir "$tmp/ws"
(cd "$tmp/ws" && for d in $(seq 100); do
	mkdir "$d" && (cd "$d" && for f in $(seq $((files / 100))); do echo "$f" >"$f"; done)
done)
echo "workspace: $files files in 100 directories, $runs walks"
"$tmp/fswalk-usage" "$tmp/ws" "$runs"
