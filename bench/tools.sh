#!/usr/bin/env bash
# bench/tools.sh [BUILDDIR]: the round trip of a trivial native tool, called from box-run code
# mode and from box-tool inside a box-sandbox, against running the same tool directly from
# the shell; each measured side by side in one hyperfine run, printed in µs per call and as
# ratios (the machine is noisy: compare within a run, never across runs).
#
#   direct      sh loop:  printf '{}' | ./tool            N times     (the anchor)
#   code mode   box-run:  for i = 1, N do tools.t({}) end  minus the same script with no call
#   box-tool    sh loop inside the sandbox: box-tool t --json '{}'   N times, minus an empty loop
#
# Needs a C compiler, hyperfine, python3, root or unprivileged user namespaces.
# BENCH_CALLS (default 200) and BENCH_RUNS (default 10) tune it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
for p in box-run box-sandbox box-tool; do
	[ -x "$build/$p" ] || { echo "no $p in $build: build first (make)" >&2; exit 2; }
done
for t in hyperfine python3 cc; do
	command -v $t >/dev/null || { echo "bench needs $t (apt-get install hyperfine python3 gcc)" >&2; exit 2; }
done
n=${BENCH_CALLS:-200}
runs=${BENCH_RUNS:-10}
case "$n$runs" in *[!0-9]*) echo "BENCH_CALLS and BENCH_RUNS must be numbers" >&2; exit 2;; esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/box-bench-tools.XXXXXX")
export BOX_STATE_DIR=$tmp/state BOX_LIBEXEC_DIR=$build
cleanup() {
	"$build/box-sandbox" delete bench-tools >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# the trivial native tool: reads its input line, answers {"ok":true}
cat > "$tmp/tool.c" <<'C'
#include <stdio.h>
int main(void)
{
	char line[4096];

	if (!fgets(line, sizeof(line), stdin))
		return 1;
	fputs("{\"ok\":true}\n", stdout);
	return 0;
}
C
cc -O2 -o "$tmp/tool" "$tmp/tool.c"
cat > "$tmp/tools.json" <<J
{"tools": [{"name": "t", "description": "answers ok", "input_schema": {"type": "object"},
            "command": ["$tmp/tool"]}]}
J
median() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results'][int(sys.argv[2])]['median'])" "$1" "$2"; }
percall() { python3 -c "import sys; print('%.1f' % ((float(sys.argv[1]) - float(sys.argv[2])) / int(sys.argv[3]) * 1e6))" "$1" "$2" "$3"; }
ratio() { python3 -c "import sys; print('%.2f' % (float(sys.argv[1]) / float(sys.argv[2])))" "$1" "$2"; }

printf 'for i = 1, %d do tools.t({}) end\nreturn 1\n' "$n" > "$tmp/calls.lua"
printf 'for i = 1, %d do end\nreturn 1\n' "$n" > "$tmp/none.lua"
cat > "$tmp/direct.sh" <<S
#!/bin/sh
i=0
while [ \$i -lt $n ]; do printf '{}' | "$tmp/tool" >/dev/null; i=\$((i + 1)); done
S
cat > "$tmp/empty.sh" <<S
#!/bin/sh
i=0
while [ \$i -lt $n ]; do printf '{}' >/dev/null; i=\$((i + 1)); done
S
chmod +x "$tmp/direct.sh" "$tmp/empty.sh"

echo "== code mode: $n calls of a trivial native tool"
hyperfine -N -w 2 -r "$runs" --export-json "$tmp/code.json" \
	"$build/box-run --tools $tmp/tools.json --timeout-ms 600000 $tmp/calls.lua" \
	"$build/box-run --tools $tmp/tools.json --timeout-ms 600000 $tmp/none.lua" \
	"$tmp/direct.sh" "$tmp/empty.sh" >/dev/null
c=$(percall "$(median "$tmp/code.json" 0)" "$(median "$tmp/code.json" 1)" "$n")
d=$(percall "$(median "$tmp/code.json" 2)" "$(median "$tmp/code.json" 3)" "$n")
echo "code mode $c µs per call, direct from the shell $d µs per call, ratio $(ratio "$c" "$d")   (target <= 1.5)"

echo "== box-tool inside a sandbox: $n calls"
"$build/box-sandbox" create --session bench-tools --tools "$tmp/tools.json" \
	--idle-pause-after-seconds 0 --timeout-ms 600000 >/dev/null
loop='i=0; while [ $i -lt '$n' ]; do box-tool t --json "{}" >/dev/null; i=$((i + 1)); done'
empty='i=0; while [ $i -lt '$n' ]; do printf "{}" >/dev/null; i=$((i + 1)); done'
hyperfine -N -w 2 -r "$runs" --export-json "$tmp/box.json" \
	"$build/box-sandbox exec bench-tools -- sh -c '$loop'" \
	"$build/box-sandbox exec bench-tools -- sh -c '$empty'" \
	"$tmp/direct.sh" "$tmp/empty.sh" >/dev/null
b=$(percall "$(median "$tmp/box.json" 0)" "$(median "$tmp/box.json" 1)" "$n")
d=$(percall "$(median "$tmp/box.json" 2)" "$(median "$tmp/box.json" 3)" "$n")
echo "box-tool $b µs per call, direct from the shell $d µs per call, ratio $(ratio "$b" "$d")   (target <= 1.5)"
