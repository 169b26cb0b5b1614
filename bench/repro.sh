#!/usr/bin/env bash
# bench/repro.sh [BUILDDIR [BASEDIR]]: the cost of issue 17's sandbox half.
#
#   exec        box-sandbox exec S -- true of BUILDDIR (provenance, the session's rootfs digest
#               and the history entry) against that of BASEDIR, another build (e.g. a worktree
#               of the commit before), in one hyperfine run; the ratio
#   rootfs      the session's digest removed: taken from the host-wide cache (the time of the
#               whole exec), and with the cache removed too, walked (walk_ms as the session's
#               rootfs.json records it, and the time of the whole exec that made it)
#
# Needs root or unprivileged user namespaces, hyperfine, python3, jq. BENCH_RUNS (default 50)
# and BENCH_WALKS (default 3) tune it. The machine is noisy: compare within a run only.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
base=${2:-}
for p in box-sandbox box-sbfiles; do
	[ -x "$build/$p" ] || { echo "no $p in $build: build first (make)" >&2; exit 2; }
	[ -z "$base" ] || [ -x "$base/$p" ] || { echo "no $p in $base" >&2; exit 2; }
done
for t in hyperfine python3 jq; do
	command -v $t >/dev/null || { echo "bench needs $t (apt-get install hyperfine python3 jq)" >&2; exit 2; }
done
runs=${BENCH_RUNS:-50}
walks=${BENCH_WALKS:-3}
case "$runs$walks" in *[!0-9]*) echo "BENCH_RUNS and BENCH_WALKS must be numbers" >&2; exit 2;; esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/box-bench-repro.XXXXXX")
export BOX_STATE_DIR=$tmp/state XDG_CACHE_HOME=$tmp/cache
sb=$build/box-sandbox
cleanup() {
	BOX_LIBEXEC_DIR=$build "$sb" delete bench-repro >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

median() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results'][int(sys.argv[2])]['median'])" "$1" "$2"; }
ratio() { python3 -c "import sys; print('%.2f' % (float(sys.argv[1]) / float(sys.argv[2])))" "$1" "$2"; }
ms() { python3 -c "import sys; print('%.2f' % (float(sys.argv[1]) * 1000))" "$1"; }
now() { date +%s%N; }

BOX_LIBEXEC_DIR=$build "$sb" create --session bench-repro --idle-pause-after-seconds 0 >/dev/null

sfile=$tmp/state/sandboxes/bench-repro/rootfs.json
echo "== rootfs digest: from the cache, and the session's walk ($walks times)"
BOX_LIBEXEC_DIR=$build "$sb" exec bench-repro -- true >/dev/null   # the first exec's
for i in $(seq 1 "$walks"); do
	rm -f "$sfile"
	t0=$(now)
	BOX_LIBEXEC_DIR=$build "$sb" exec bench-repro -- true >"$tmp/out.json"
	t1=$(now)
	printf 'cache %d: source %s, whole exec %s ms\n' "$i" \
		"$(jq -r .provenance.rootfs.source "$tmp/out.json")" "$(( (t1 - t0) / 1000000 ))"
	rm -f "$sfile" "$XDG_CACHE_HOME/box/rootfs.json"
	t0=$(now)
	BOX_LIBEXEC_DIR=$build "$sb" exec bench-repro -- true >"$tmp/out.json"
	t1=$(now)
	printf 'walk %d: %s entries, walk_ms %s, whole exec %s ms\n' "$i" \
		"$(jq -r .provenance.rootfs.entries "$tmp/out.json")" \
		"$(jq -r .walk_ms "$sfile")" "$(( (t1 - t0) / 1000000 ))"
done

echo "== exec of true: with provenance and history ($runs runs)"
if [ -n "$base" ]; then
	hyperfine -N -w 5 -r "$runs" --export-json "$tmp/exec.json" \
		"env BOX_LIBEXEC_DIR=$build $sb exec bench-repro -- true" \
		"env BOX_LIBEXEC_DIR=$base $base/box-sandbox exec bench-repro -- true" >/dev/null
	e=$(median "$tmp/exec.json" 0); b=$(median "$tmp/exec.json" 1)
	echo "exec $(ms "$e") ms, base $(ms "$b") ms"
	echo "build / base = $(ratio "$e" "$b")"
else
	hyperfine -N -w 5 -r "$runs" --export-json "$tmp/exec.json" \
		"env BOX_LIBEXEC_DIR=$build $sb exec bench-repro -- true" >/dev/null
	echo "exec $(ms "$(median "$tmp/exec.json" 0)") ms (give BASEDIR for the ratio)"
fi
