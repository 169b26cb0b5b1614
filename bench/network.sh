#!/usr/bin/env bash
# bench/network.sh [BUILDDIR]: a sandbox's network through its proxy against the same requests
# on the host, printed as ratios (compare within a run, never across runs).
#
#   throughput  a 100 MB download (BENCH_NET_MB) from a server on the host's 127.0.0.1, by
#               curl on the host and by curl in a sandbox through the proxy: plain HTTP
#               forwarding and a CONNECT tunnel; the best of BENCH_NET_RUNS (default 5) each
#               (target: proxy/host >= 0.8)
#   latency     one small request (curl's time_total), the median of BENCH_NET_REQS (default
#               200) each way: the added latency in ms (target <= 1 ms)
#
# curl measures its own transfer (-w), so the exec's start is not counted. The server is
# tests/netlab.py (python's threaded http.server), the same for both sides.
# Needs root or unprivileged user namespaces, curl, python3, jq.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
[ -x "$build/box-sandbox" ] || { echo "no box-sandbox in $build: build first (make)" >&2; exit 2; }
for t in curl python3 jq; do
	command -v $t >/dev/null || { echo "bench needs $t" >&2; exit 2; }
done
mb=${BENCH_NET_MB:-100}
runs=${BENCH_NET_RUNS:-5}
reqs=${BENCH_NET_REQS:-200}
case "$mb$runs$reqs" in *[!0-9]*) echo "BENCH_NET_* must be numbers" >&2; exit 2;; esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/box-bench-net.XXXXXX")
export BOX_STATE_DIR=$tmp/state BOX_LIBEXEC_DIR=$build
sb=$build/box-sandbox
srv=
cleanup() {
	[ -n "${BENCH_NET_DEBUG:-}" ] && cat "$tmp/last.json" >&2
	"$sb" delete bench-net >/dev/null 2>&1 || true
	[ -n "$srv" ] && kill "$srv" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$tmp/www"
head -c "$((mb << 20))" /dev/urandom >"$tmp/www/big"
echo x >"$tmp/www/small"
python3 "$src/tests/netlab.py" http "$tmp/www" "$tmp/port" 127.0.0.1 0 >/dev/null 2>&1 &
srv=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(cat "$tmp/port")
"$sb" create --session bench-net --timeout-ms 600000 --allow-host "127.0.0.1:$port" >/dev/null

# guest CMD: CMD's stdout in the sandbox (proxy variables set; 127.0.0.1 is not in NO_PROXY
# for these curls)
guest() {
	"$sb" exec bench-net -- sh -c "$1" >"$tmp/last.json" || true
	jq -r .stdout "$tmp/last.json"
}
best() { grep . | sort -g | head -1; }
median() { grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

url=http://127.0.0.1:$port
host_t=$(for _ in $(seq "$runs"); do curl -s -o /dev/null -w '%{time_total}\n' "$url/big"; done | best)
http_t=$(guest "for i in \$(seq $runs); do curl -s --noproxy '' -x http://127.0.0.1:3128 -o /dev/null -w '%{time_total}\n' $url/big; done" | best)
tun_t=$(guest "for i in \$(seq $runs); do curl -s --noproxy '' -p -x http://127.0.0.1:3128 -o /dev/null -w '%{time_total}\n' $url/big; done" | best)
host_l=$(for _ in $(seq "$reqs"); do curl -s -o /dev/null -w '%{time_total}\n' "$url/small"; done | median)
prox_l=$(guest "for i in \$(seq $reqs); do curl -s --noproxy '' -x http://127.0.0.1:3128 -o /dev/null -w '%{time_total}\n' $url/small; done" | tee "$tmp/prox_l" | median)
host_lmin=$(for _ in $(seq "$reqs"); do curl -s -o /dev/null -w '%{time_total}\n' "$url/small"; done | best)
prox_lmin=$(best <"$tmp/prox_l")

awk -v mb="$mb" -v h="$host_t" -v p="$http_t" -v t="$tun_t" -v hl="$host_l" -v pl="$prox_l" \
	-v hm="$host_lmin" -v pm="$prox_lmin" 'BEGIN {
	printf "throughput  host %.0f MB/s, proxy http %.0f MB/s (%.2fx), proxy CONNECT %.0f MB/s (%.2fx)  (target >= 0.8x)\n",
		mb / h, mb / p, h / p, mb / t, h / t
	printf "latency     medians: host %.3f ms, proxy %.3f ms: +%.3f ms; minima: %.3f ms, %.3f ms: +%.3f ms  (target <= 1 ms)\n",
		hl * 1000, pl * 1000, (pl - hl) * 1000, hm * 1000, pm * 1000, (pm - hm) * 1000
}'
