#!/usr/bin/env bash
# bench/sandbox-parts.sh [BUILDDIR]: where the time of one `box-sandbox exec S -- true` goes,
# from a system-wide perf trace of BENCH_RUNS (default 30) execs in a row (median of each
# part, in ms):
#
#   client start     execve of box-sandbox to its connect to the keeper's control socket
#                    (process start, lock, state.json read, observe, /output emptied)
#   keeper trip      that connect to the fork of the supervisor (the zygote's accept, the
#                    request and its descriptors)
#   supervisor       the supervisor's fork to the command's execve (signalfd, fork, rlimits,
#                    capabilities, seccomp)
#   command          the command's execve to its exit (true itself)
#   teardown         the command's exit to box-sandbox's exit (reaping, status, counters,
#                    disk look, outputs, result)
#   state writes     renames of state.json per exec (the use stamp, at most one a second)
#
# Needs root, perf (linux-perf) and python3. The machine's load shows in every part; compare
# parts within one run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
runs=${BENCH_RUNS:-30}
case "$runs" in *[!0-9]*|"") echo "BENCH_RUNS must be a number" >&2; exit 2;; esac
command -v perf >/dev/null || { echo "bench needs perf (apt-get install linux-perf)" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/box-bench-parts.XXXXXX")
export BOX_STATE_DIR=$tmp/state BOX_LIBEXEC_DIR=$build
sb=$build/box-sandbox
trap '"$sb" delete bench-parts >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
"$sb" create --session bench-parts --idle-pause-after-seconds 0 >/dev/null
"$sb" exec bench-parts -- true >/dev/null
perf trace -a -e execve,connect,accept4,clone,clone3,exit_group,rename,renameat,renameat2 \
	-o "$tmp/trace" -- sh -c "sleep 0.2; for i in \$(seq $runs); do '$sb' exec bench-parts -- true >/dev/null; done; sleep 0.2" \
	>/dev/null 2>&1
python3 - "$tmp/trace" "$runs" <<'PY'
import re, statistics, sys
lines = open(sys.argv[1]).read().splitlines()
ev = []
for l in lines:
    m = re.match(r'\s*([0-9.]+) \(\s*[0-9. ]*(?:ms)?\): (\S+?)/(\d+) (\w+)\((.*)', l)
    if m:
        ev.append((float(m.group(1)), m.group(2), int(m.group(3)), m.group(4), l))
    elif '[continued]: clone' in l or '[continued]: execve' in l:
        m = re.match(r'\s*([0-9.?]+) \(.*?\): (\S+?)/(\d+)\s+\.\.\. \[continued\]: (\w+)\(\)\s+= (.*)', l)
        if m and m.group(1) != '?':
            ev.append((float(m.group(1)), m.group(2), int(m.group(3)), m.group(4) + '_done', l))
ev.sort(key=lambda e: e[0])
parts = {k: [] for k in ('client start', 'keeper trip', 'supervisor', 'command', 'teardown')}
renames = 0
clients = [e for e in ev if e[3] == 'connect' and e[1] == 'box-sandbox']
for c in clients:
    t_conn, pid = c[0], c[2]
    start = [e for e in ev if e[2] == pid and e[3] in ('execve', 'execve_done') and e[0] <= t_conn]
    end = [e for e in ev if e[2] == pid and e[3] == 'exit_group' and e[0] > t_conn]
    accept = [e for e in ev if e[3] == 'accept4' and e[0] >= t_conn]
    if not start or not end or not accept:
        continue
    t_start, t_end = start[-1][0], end[0][0]
    forks = [e for e in ev if e[3] in ('clone', 'clone3') and e[0] >= accept[0][0] and e[0] < t_end and e[2] != pid]
    cmd = [e for e in ev if e[3] in ('execve', 'execve_done') and e[1] == 'true' and t_conn < e[0] < t_end]
    cmd_exit = [e for e in ev if e[3] == 'exit_group' and e[1] == 'true' and t_conn < e[0] < t_end]
    if not forks or not cmd or not cmd_exit:
        continue
    parts['client start'].append(t_conn - t_start)
    parts['keeper trip'].append(forks[0][0] - t_conn)
    parts['supervisor'].append(cmd[-1][0] - forks[0][0])
    parts['command'].append(cmd_exit[0][0] - cmd[-1][0])
    parts['teardown'].append(t_end - cmd_exit[0][0])
    renames += len([e for e in ev if e[2] == pid and e[3].startswith('rename')])
n = len(parts['command'])
if n == 0:
    sys.exit("no exec found in the trace")
total = 0
for k, v in parts.items():
    med = statistics.median(v)
    total += med
    print("%-13s %6.2f ms" % (k, med))
print("%-13s %6.2f ms (sum of medians, %d execs)" % ("total", total, n))
print("state writes  %.2f renames of state.json per exec" % (renames / n))
PY
