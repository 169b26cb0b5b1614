#!/usr/bin/env bash
# bench/verify.sh [BUILDDIR]: the cost of checking a store entry before use (issue 9) as a
# fraction of the `box-run --tools box.lock` call it guards, measured side by side in one
# hyperfine run and printed as ratios (the machine is noisy: compare within a run only).
#
#   box-run call   box-run --tools box.lock -e 'return tools.t({})': a trivial native tool of
#                  a pulled artifact, one call (two checks: at load and before the call)
#   warm check     bench/verify-loop: N box_verify_entry of that entry (the stat cache
#                  vouches; no helper runs), minus the same program doing 0, per check
#   cold check     the box-verify helper once with the cache in place (its start, the walk,
#                  every content digest reused, the cache rewritten): the least a call pays
#                  when the warm check cannot vouch (plus reading what changed)
#
# Both are reported for a small artifact (3 files) and a large one (FILES files, default 300).
# Needs a C compiler, hyperfine, python3, pkg-config. BENCH_RUNS (default 20), BENCH_CHECKS
# (default 2000) and BENCH_FILES tune it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
for p in box-run box-pack box-lock box-pull box-verify lib/libbox.a; do
	[ -e "$build/$p" ] || { echo "no $p in $build: build first (make)" >&2; exit 2; }
done
for t in hyperfine python3 cc pkg-config; do
	command -v $t >/dev/null || { echo "bench needs $t (apt-get install hyperfine python3 gcc pkg-config)" >&2; exit 2; }
done
runs=${BENCH_RUNS:-20}
checks=${BENCH_CHECKS:-2000}
files=${BENCH_FILES:-300}
case "$runs$checks$files" in *[!0-9]*) echo "BENCH_RUNS, BENCH_CHECKS and BENCH_FILES must be numbers" >&2; exit 2;; esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/box-bench-verify.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
export BOX_HOME=$tmp/home BOX_LIBEXEC_DIR=$build
cc -O2 -I"$src/lib" -o "$tmp/verify-loop" "$here/verify-loop.c" "$build/lib/libbox.a" \
	$(pkg-config --cflags --libs libcjson)

median() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results'][int(sys.argv[2])]['median'])" "$1" "$2"; }
us() { python3 -c "import sys; print('%.1f' % (float(sys.argv[1]) * 1e6))" "$1"; }
per() { python3 -c "import sys; print('%.2f' % ((float(sys.argv[1]) - float(sys.argv[2])) / int(sys.argv[3]) * 1e6))" "$1" "$2" "$3"; }
pct() { python3 -c "import sys; print('%.2f%%' % (float(sys.argv[1]) / (float(sys.argv[2]) * 1e6) * 100))" "$1" "$2"; }

# one artifact NAME with N extra files besides its tool; pulled into the store
artifact() {
	local name=$1 n=$2 dir=$tmp/art-$1 i=0
	mkdir -p "$dir/bin" "$dir/data"
	printf '#!/bin/sh\nread -r line\necho "{\\"ok\\":true}"\n' >"$dir/bin/t"
	chmod 755 "$dir/bin/t"
	cat >"$dir/box-artifact.json" <<-J
	{"name": "bench/$name", "version": "1.0.0", "kind": "tool",
	 "tools": [{"name": "t", "description": "answers ok", "input_schema": {"type": "object"},
	            "command": ["bin/t"]}]}
	J
	while [ $i -lt "$n" ]; do echo "file $i" >"$dir/data/f$i.txt"; i=$((i + 1)); done
	"$build/box-pack" "$dir" >/dev/null
}

bench() {
	local name=$1 n=$2 d=$tmp/$1 digest hex tree
	mkdir -p "$d"
	artifact "$name" "$n"
	(cd "$d" && echo "{\"artifacts\": {\"bench/$name\": \"^1.0\"}}" >box.json &&
		"$build/box-lock" >/dev/null && "$build/box-pull" "bench/$name" >/dev/null)
	digest=$(jq -r .artifacts[0].digest "$d/box.lock")
	tree=$(jq -r .artifacts[0].tree_digest "$d/box.lock")
	hex=${digest#sha256:}
	# the first use writes the stat cache; a second one, a tick later, makes it not racy
	(cd "$d" && "$build/box-run" --tools box.lock -e 'return 1' >/dev/null && sleep 0.05 &&
		touch "$BOX_HOME/store/sha256/$hex/box-artifact.json" &&
		"$build/box-run" --tools box.lock -e 'return 1' >/dev/null)
	"$tmp/verify-loop" "$BOX_HOME/store" "$digest" 1
	BOX_LIBEXEC_DIR=/nonexistent "$tmp/verify-loop" "$BOX_HOME/store" "$digest" 1 ||
		{ echo "the warm check needed the helper" >&2; exit 1; }
	(cd "$d" && hyperfine -N -w 3 -r "$runs" --export-json "$d/h.json" \
		"$build/box-run --tools box.lock -e 'return tools.t({})'" \
		"$tmp/verify-loop $BOX_HOME/store $digest $checks" \
		"$tmp/verify-loop $BOX_HOME/store $digest 0" \
		"$build/box-verify $BOX_HOME/store $hex $tree" >/dev/null)
	local call warm cold
	call=$(median "$d/h.json" 0)
	warm=$(per "$(median "$d/h.json" 1)" "$(median "$d/h.json" 2)" "$checks")
	cold=$(us "$(median "$d/h.json" 3)")
	echo "== $name artifact ($((n + 2)) files)"
	echo "box-run --tools box.lock, one tool call: $(us "$call") µs"
	echo "warm check: $warm µs each, 2 per call = $(pct "$(python3 -c "print(2 * $warm)")" "$call") of the call   (target < 5%)"
	echo "cold check (box-verify: start, walk, every digest reused, cache rewritten): $cold µs = $(pct "$cold" "$call") of the call"
}

bench small 0
bench large "$files"
