#!/usr/bin/env bash
# bench/run.sh [BUILDDIR]: box-run against plain lua5.4, side by side in one run of hyperfine
# each, printing ratios (the machine is noisy: compare within a run, never across runs); the
# cold start and fib(30) again interleaved (bench/interleave.py), which keeps a change of load
# from falling on one side, with the ratio of the minima beside that of the medians.
# Needs hyperfine, lua5.4, python3 (apt-get install hyperfine lua5.4 python3).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/..}
BOX_RUN=$(cd "$build" && pwd)/box-run
export BOX_LIBEXEC_DIR=$(cd "$build" && pwd)
[ -x "$BOX_RUN" ] || { echo "no box-run in $build: build first (make)" >&2; exit 2; }
for t in hyperfine lua5.4 python3; do
	command -v $t >/dev/null || { echo "bench needs $t (apt-get install $t)" >&2; exit 2; }
done
runs=${BENCH_RUNS:-300}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# median of command N (0-based) in a hyperfine JSON export, in seconds
median() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results'][int(sys.argv[2])]['median'])" "$1" "$2"; }
ratio() { python3 -c "import sys; print('%.2f' % (float(sys.argv[1]) / float(sys.argv[2])))" "$1" "$2"; }

echo "== cold start: return 1, whole process ($runs runs each, interleaved warm-up)"
hyperfine -N -w 30 -r "$runs" --export-json "$tmp/cold.json" \
	"lua5.4 -e 'return 1'" "$BOX_RUN -e 'return 1'" >/dev/null 2>&1
a=$(median "$tmp/cold.json" 0); b=$(median "$tmp/cold.json" 1)
printf 'lua5.4 %.2f ms, box-run %.2f ms: ratio %s (target <= 1.25)\n' \
	"$(python3 -c "print($a*1000)")" "$(python3 -c "print($b*1000)")" "$(ratio "$b" "$a")"

echo "   interleaved ($runs pairs, bench/interleave.py): $(python3 "$here/interleave.py" "$runs" \
	"lua5.4 -e 'return 1'" "$BOX_RUN -e 'return 1'")"

fib='local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end return fib(30)'
echo "== CPU-bound: fib(30), default limits on, and with an exact instruction budget"
hyperfine -N -w 3 -r "${BENCH_FIB_RUNS:-20}" --export-json "$tmp/fib.json" \
	"lua5.4 -e '$fib'" "$BOX_RUN -e '$fib'" "$BOX_RUN --max-instructions 10000000000 -e '$fib'" \
	>/dev/null 2>&1
a=$(median "$tmp/fib.json" 0); b=$(median "$tmp/fib.json" 1); c=$(median "$tmp/fib.json" 2)
printf 'lua5.4 %.1f ms, box-run %.1f ms: ratio %s (target <= 1.05)\n' \
	"$(python3 -c "print($a*1000)")" "$(python3 -c "print($b*1000)")" "$(ratio "$b" "$a")"
printf 'box-run --max-instructions: %.1f ms: ratio %s against lua5.4\n' \
	"$(python3 -c "print($c*1000)")" "$(ratio "$c" "$a")"
echo "   interleaved (${BENCH_FIB_RUNS:-20} pairs): $(python3 "$here/interleave.py" "${BENCH_FIB_RUNS:-20}" \
	"lua5.4 -e '$fib'" "$BOX_RUN -e '$fib'")"

echo "   CPU time, interleaved: $(python3 - "$BOX_RUN" "$fib" "${BENCH_FIB_RUNS:-20}" <<'PY'
# lua5.4's user+system time (rusage) against the VM's own (stats.cpu_ms): what the script
# costs, without the waits for a CPU that a loaded machine adds to the wall time
import json, os, statistics, subprocess, sys
box, fib, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
lua, vm = [], []
for _ in range(runs):
    pid = os.posix_spawnp("lua5.4", ["lua5.4", "-e", fib], os.environ)
    ru = os.wait4(pid, 0)[2]
    lua.append((ru.ru_utime + ru.ru_stime) * 1000)
    out = subprocess.run([box, "-e", fib], capture_output=True, check=True).stdout
    vm.append(json.loads(out)["stats"]["cpu_ms"])
print("lua5.4 median %.0f ms, box-run VM %.0f ms: ratio of medians %.2f, of minima %.2f" %
      (statistics.median(lua), statistics.median(vm), statistics.median(vm) / statistics.median(lua),
       min(vm) / min(lua)))
PY
)"

echo "== host-call round trip: fs.exists in a loop"
n=20000
mkdir -p "$tmp/ws"
echo x > "$tmp/ws/f"
hyperfine -N -w 3 -r "${BENCH_CALL_RUNS:-20}" --export-json "$tmp/call.json" \
	"$BOX_RUN -w $tmp/ws -e 'for i = 1, $n do local _ = i end'" \
	"$BOX_RUN -w $tmp/ws -e 'for i = 1, $n do fs.exists(\"/f\") end'" >/dev/null 2>&1
a=$(median "$tmp/call.json" 0); b=$(median "$tmp/call.json" 1)
printf '%d calls: %.2f us per call (target <= 20)\n' "$n" "$(python3 -c "print(($b-$a)/$n*1e6)")"

echo "== record and replay: the same fs.exists loop, live, with --record, and replayed"
loop="for i = 1, $n do fs.exists(\"/f\") end"
"$BOX_RUN" -w "$tmp/ws" --record "$tmp/cas.jsonl" -e "$loop" >/dev/null
hyperfine -N -w 3 -r "${BENCH_CALL_RUNS:-20}" --export-json "$tmp/rec.json" \
	"$BOX_RUN -w $tmp/ws -e '$loop'" \
	"$BOX_RUN -w $tmp/ws --record $tmp/rec.jsonl -e '$loop'" \
	"$BOX_RUN --replay $tmp/cas.jsonl -e '$loop'" >/dev/null 2>&1
a=$(median "$tmp/rec.json" 0); b=$(median "$tmp/rec.json" 1); c=$(median "$tmp/rec.json" 2)
printf 'live %.1f ms, --record %.1f ms: ratio %s (target <= 1.3)\n' \
	"$(python3 -c "print($a*1000)")" "$(python3 -c "print($b*1000)")" "$(ratio "$b" "$a")"
printf 'replay of %d recorded calls %.1f ms: ratio %s against live (target < 1)\n' "$n" \
	"$(python3 -c "print($c*1000)")" "$(ratio "$c" "$a")"
# the two processes of a run wait for each other 2 * n times: on a loaded machine the medians
# measure the scheduler, the minima (interleaved, so that load falls on both sides) the code
echo "   --record, interleaved (${BENCH_CALL_RUNS:-20} pairs): $(python3 "$here/interleave.py" \
	"${BENCH_CALL_RUNS:-20}" "$BOX_RUN -w $tmp/ws -e '$loop'" \
	"$BOX_RUN -w $tmp/ws --record $tmp/rec.jsonl -e '$loop'")"
echo "   --replay, interleaved (${BENCH_CALL_RUNS:-20} pairs): $(python3 "$here/interleave.py" \
	"${BENCH_CALL_RUNS:-20}" "$BOX_RUN -w $tmp/ws -e '$loop'" \
	"$BOX_RUN --replay $tmp/cas.jsonl -e '$loop'")"

echo "== peak memory: both processes of a run (VmHWM, sampled while the script runs)"
# the script spins for 300 ms so that both processes can be read; the VM does nothing else
"$BOX_RUN" -e 'local t = os.clock() while os.clock() - t < 0.3 do end return 1' >/dev/null &
parent=$!
sleep 0.15
child=$(pgrep -P "$parent" | head -n 1)
hp=$(awk '/VmHWM/ {print $2}' "/proc/$parent/status")
hc=$(awk '/VmHWM/ {print $2}' "/proc/$child/status")
wait "$parent"
lua5.4 -e 'local t = os.clock() while os.clock() - t < 0.3 do end return 1' &
lpid=$!
sleep 0.15
hl=$(awk '/VmHWM/ {print $2}' "/proc/$lpid/status")
wait "$lpid"
printf 'box-run parent %d KiB + VM child %d KiB = %d KiB (target <= 4096); lua5.4 alone %d KiB: ratio %s\n' \
	"$hp" "$hc" $((hp + hc)) "$hl" "$(ratio $((hp + hc)) "$hl")"
