#!/usr/bin/env bash
# bench/sandbox.sh [BUILDDIR]: box-sandbox against its anchors, side by side in one hyperfine
# run each, printing ratios (the machine is noisy: compare within a run, never across runs).
#
#   exec        box-sandbox exec S -- true          vs  nsenter -t HOLDER -U -m -p -n -i -u true
#                                                   and bwrap --unshare-all --ro-bind / / ... true
#   lifecycle   create + first exec + delete        vs  the same bwrap command
#   pause       pause + resume, the pair, in ms     (hyperfine of a script doing both)
#   snapshot    snapshot and restore of a 100 MB workspace, MB/s
#   background  box-sandbox exec S --background -- true  vs  box-sandbox exec S -- true
#   typing      echo of one key typed into box-sandbox shell (bash), in ms, vs the same bash
#               on a local pseudo-terminal (bench/tty-echo.py; target <= 2 ms)
#
# bench/sandbox-parts.sh splits one exec into its parts (client, keeper, supervisor, command,
# teardown) from a perf trace.
#
# Needs root or unprivileged user namespaces, hyperfine, nsenter (util-linux), bwrap
# (bubblewrap), python3, jq. BENCH_RUNS (default 100), BENCH_SNAP_MB (default 100) and
# BENCH_KEYS (keys typed, default 300) tune it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
for p in box-sandbox box-sbfiles; do
	[ -x "$build/$p" ] || { echo "no $p in $build: build first (make)" >&2; exit 2; }
done
for t in hyperfine nsenter bwrap python3 jq; do
	command -v $t >/dev/null || { echo "bench needs $t (apt-get install hyperfine util-linux bubblewrap python3 jq)" >&2; exit 2; }
done
runs=${BENCH_RUNS:-100}
mb=${BENCH_SNAP_MB:-100}
keys=${BENCH_KEYS:-300}
case "$runs$mb$keys" in *[!0-9]*) echo "BENCH_RUNS, BENCH_SNAP_MB and BENCH_KEYS must be numbers" >&2; exit 2;; esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/box-bench-sandbox.XXXXXX")
export BOX_STATE_DIR=$tmp/state BOX_LIBEXEC_DIR=$build
sb=$build/box-sandbox
cleanup() {
	for s in bench-exec bench-bg bench-pause bench-snap bench-life bench-tty; do
		"$sb" delete "$s" >/dev/null 2>&1 || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

median() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results'][int(sys.argv[2])]['median'])" "$1" "$2"; }
ratio() { python3 -c "import sys; print('%.2f' % (float(sys.argv[1]) / float(sys.argv[2])))" "$1" "$2"; }
ms() { python3 -c "import sys; print('%.2f' % (float(sys.argv[1]) * 1000))" "$1"; }
bwrap_cmd="bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc true"

echo "== exec of true into a running sandbox"
"$sb" create --session bench-exec --idle-pause-after-seconds 0 >/dev/null
"$sb" exec bench-exec -- true >/dev/null
holder=$(jq -r .provider_data.holder.pid "$BOX_STATE_DIR/sandboxes/bench-exec/state.json")
hyperfine -N -w 10 -r "$runs" --export-json "$tmp/exec.json" \
	"$sb exec bench-exec -- true" \
	"nsenter -t $holder -U -m -p -n -i -u true" \
	"$bwrap_cmd" >/dev/null
e=$(median "$tmp/exec.json" 0); n=$(median "$tmp/exec.json" 1); b=$(median "$tmp/exec.json" 2)
echo "box-sandbox exec $(ms "$e") ms, nsenter $(ms "$n") ms, bwrap $(ms "$b") ms"
echo "exec / nsenter = $(ratio "$e" "$n")   (target <= 1.0)"
echo "bwrap / exec   = $(ratio "$b" "$e")   (target >= 2.0)"

echo "== background start vs foreground exec of the same command"
"$sb" create --session bench-bg --idle-pause-after-seconds 0 >/dev/null
"$sb" exec bench-bg --background -- true >/dev/null
hyperfine -N -w 10 -r "$runs" --export-json "$tmp/bg.json" \
	"$sb exec bench-bg --background -- true" \
	"$sb exec bench-bg -- true" >/dev/null
g=$(median "$tmp/bg.json" 0); f=$(median "$tmp/bg.json" 1)
echo "exec --background $(ms "$g") ms, exec $(ms "$f") ms"
echo "background / foreground = $(ratio "$g" "$f")   (target <= 1.2)"

echo "== create + first exec + delete"
cat > "$tmp/life.sh" <<EOS
#!/bin/sh
"$sb" create --session bench-life --idle-pause-after-seconds 0 >/dev/null &&
"$sb" exec bench-life -- true >/dev/null &&
"$sb" delete bench-life >/dev/null
EOS
chmod +x "$tmp/life.sh"
hyperfine -N -w 3 -r $((runs / 4 + 2)) --export-json "$tmp/life.json" "$tmp/life.sh" "$bwrap_cmd" >/dev/null
l=$(median "$tmp/life.json" 0); b=$(median "$tmp/life.json" 1)
echo "create+exec+delete $(ms "$l") ms, bwrap $(ms "$b") ms, ratio $(ratio "$l" "$b")   (target <= 2.0)"

echo "== pause + resume"
"$sb" create --session bench-pause --idle-pause-after-seconds 0 >/dev/null
cat > "$tmp/pause.sh" <<EOS
#!/bin/sh
"$sb" pause bench-pause >/dev/null && "$sb" resume bench-pause >/dev/null
EOS
chmod +x "$tmp/pause.sh"
hyperfine -N -w 3 -r $((runs / 2 + 2)) --export-json "$tmp/pause.json" "$tmp/pause.sh" "$sb status bench-pause" >/dev/null
p=$(median "$tmp/pause.json" 0); s=$(median "$tmp/pause.json" 1)
echo "pause + resume $(ms "$p") ms for both processes (target <= 3 ms); one status call $(ms "$s") ms"

echo "== snapshot and restore of a ${mb} MB workspace"
"$sb" create --session bench-snap --idle-pause-after-seconds 0 --disk-bytes $(( (mb * 3 + 64) << 20 )) >/dev/null
python3 - "$BOX_STATE_DIR/sandboxes/bench-snap/workspace" "$mb" <<'PY'
import os, random, sys
root, mb = sys.argv[1], int(sys.argv[2])
rng = random.Random(20261129)
left, i = mb * 1000 * 1000, 0
while left > 0:
    n = min(left, rng.randint(64 << 10, 4 << 20))
    d = os.path.join(root, 'd%02d' % (i % 16))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'f%04d' % i), 'wb') as f:
        # half random, half text: a workspace is part source, part data
        f.write(rng.randbytes(n // 2) + (b'lorem ipsum dolor sit amet ' * (n // 54 + 1))[: n - n // 2])
    left -= n
    i += 1
PY
t0=$(date +%s%N)
digest=$("$sb" snapshot bench-snap | jq -r .digest)
t1=$(date +%s%N)
"$sb" restore bench-snap "$digest" >/dev/null
t2=$(date +%s%N)
python3 - "$mb" "$t0" "$t1" "$t2" <<'PY'
import sys
mb, t0, t1, t2 = int(sys.argv[1]), *map(int, sys.argv[2:])
print("snapshot %.0f MB/s (%.2f s), restore %.0f MB/s (%.2f s)" % (
    mb / ((t1 - t0) / 1e9), (t1 - t0) / 1e9, mb / ((t2 - t1) / 1e9), (t2 - t1) / 1e9))
PY

echo "== typing into shell: the echo of one key ($keys keys)"
"$sb" create --session bench-tty --idle-pause-after-seconds 0 >/dev/null
bash_cmd="bash --norc --noprofile -i"
read -r tl tl90 < <(python3 "$here/tty-echo.py" "$keys" -- $bash_cmd)
read -r tb tb90 < <(python3 "$here/tty-echo.py" "$keys" -- "$sb" exec bench-tty --tty -- $bash_cmd)
echo "box-sandbox exec --tty (as shell) $tb ms (p90 $tb90), local pty $tl ms (p90 $tl90), ratio $(ratio "$tb" "$tl")   (target <= 2 ms)"
