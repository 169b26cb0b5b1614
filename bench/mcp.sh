#!/usr/bin/env bash
# bench/mcp.sh [BUILDDIR]: what box-mcp adds to a call, against running the plain binary for
# the same request, both measured side by side in one run (interleaved rounds), printed in
# ms per call and as the difference (target: box-mcp adds <= 0.5 ms per call).
#
#   run_lua       tools/call run_lua {"script": "return 1"} over one box-mcp connection
#                 vs   box-run --json < {"script": "return 1"}, spawned per call
#   sandbox_exec  tools/call sandbox_exec {"argv": ["true"]} (the connection's session)
#                 vs   box-sandbox --json --session S < {"op":"exec","argv":["true"]}
#
# Both sides are driven by the same python3 client: the plain binary is started with
# os.posix_spawn (the way box-mcp starts it), its request written to its stdin and its
# result read to end of file; through box-mcp one request line is written and its answer
# line read. BENCH_CALLS (default 200 per side, in rounds of 20) tunes it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
for p in box-run box-sandbox box-mcp; do
	[ -x "$build/$p" ] || { echo "no $p in $build: build first (make)" >&2; exit 2; }
done
command -v python3 >/dev/null || { echo "bench needs python3" >&2; exit 2; }
n=${BENCH_CALLS:-200}
case "$n" in ''|*[!0-9]*) echo "BENCH_CALLS must be a number" >&2; exit 2;; esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/box-bench-mcp.XXXXXX")
export BOX_STATE_DIR=$tmp/state
unset BOX_POLICY
# box-mcp deletes its session when its input ends
cleanup() {
	rm -rf "$tmp"
}
trap cleanup EXIT

python3 - "$build" "$n" <<'PY'
import json, os, subprocess, sys, time

build, n = sys.argv[1], int(sys.argv[2])
rounds, per = max(1, n // 20), min(n, 20)

def plain(argv, req):
    data = (json.dumps(req) + "\n").encode()
    r0, w0 = os.pipe()
    r1, w1 = os.pipe()
    pid = os.posix_spawn(argv[0], argv, os.environ,
                         file_actions=[(os.POSIX_SPAWN_DUP2, r0, 0), (os.POSIX_SPAWN_DUP2, w1, 1),
                                       (os.POSIX_SPAWN_CLOSE, r0), (os.POSIX_SPAWN_CLOSE, w1),
                                       (os.POSIX_SPAWN_CLOSE, w0), (os.POSIX_SPAWN_CLOSE, r1)])
    os.close(r0); os.close(w1)
    os.write(w0, data); os.close(w0)
    out = b""
    while True:
        c = os.read(r1, 65536)
        if not c:
            break
        out += c
    os.close(r1)
    os.waitpid(pid, 0)
    res = json.loads(out.splitlines()[-1])
    assert res.get("ok") is True, res

mcp = subprocess.Popen([build + "/box-mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
ids = iter(range(1, 10**9))
def rpc(method, params):
    i = next(ids)
    mcp.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode())
    mcp.stdin.flush()
    while True:
        msg = json.loads(mcp.stdout.readline())
        if msg.get("id") == i:
            return msg
rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})

def via_mcp(tool, args):
    r = rpc("tools/call", {"name": tool, "arguments": args})
    assert r["result"]["isError"] is False, r

session = rpc("tools/call", {"name": "sandbox_exec", "arguments": {"argv": ["true"]}})["result"]["structuredContent"]["session"]
cases = [
    ("run_lua", lambda: via_mcp("run_lua", {"script": "return 1"}),
     lambda: plain([build + "/box-run", "--json"], {"script": "return 1"})),
    ("sandbox_exec", lambda: via_mcp("sandbox_exec", {"argv": ["true"]}),
     lambda: plain([build + "/box-sandbox", "--json", "--session", session], {"op": "exec", "argv": ["true"]})),
]
print("%-14s %12s %12s %12s %8s" % ("call", "plain ms", "box-mcp ms", "added ms", "ratio"))
for name, m, p in cases:
    for _ in range(3):  # warm up both
        m(); p()
    tm = tp = 0.0
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(per):
            p()
        tp += time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(per):
            m()
        tm += time.perf_counter() - t
    k = rounds * per
    pm, mm = tp / k * 1000, tm / k * 1000
    print("%-14s %12.3f %12.3f %12.3f %8.3f" % (name, pm, mm, mm - pm, mm / pm))
mcp.stdin.close()
mcp.wait()
PY
