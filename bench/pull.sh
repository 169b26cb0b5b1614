#!/usr/bin/env bash
# bench/pull.sh [BUILDDIR]: box-pull and box-lock against their anchors, side by side in one
# run of hyperfine each, printing ratios (the machine is noisy: compare within a run, never
# across runs). Needs hyperfine, python3, sha256sum, openssl, tar; skopeo and docker-registry
# for the registry comparison (apt-get install hyperfine python3 skopeo docker-registry).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
for p in box-pack box-pull box-lock; do
	[ -x "$build/$p" ] || { echo "no $p in $build: build first (make)" >&2; exit 2; }
done
for t in hyperfine python3 sha256sum openssl tar; do
	command -v $t >/dev/null || { echo "bench needs $t (apt-get install $t)" >&2; exit 2; }
done
mb=${BENCH_PULL_MB:-200}            # size of the big artifact, in 10^6 bytes before packing
runs=${BENCH_PULL_RUNS:-5}
nlock=${BENCH_LOCK_N:-500}          # artifacts in the box-lock layout (two versions each)
lock_runs=${BENCH_LOCK_RUNS:-10}
case "$mb$runs$nlock$lock_runs" in *[!0-9]*) echo "BENCH_* must be numbers" >&2; exit 2;; esac
if [ "$mb" -lt 1 ] || [ "$mb" -gt 900 ] || [ "$nlock" -lt 1 ] || [ "$nlock" -gt 5000 ] ||
	[ "$runs" -lt 2 ] || [ "$lock_runs" -lt 2 ]; then
	echo "BENCH_PULL_MB 1..900, BENCH_LOCK_N 1..5000, BENCH_*_RUNS at least 2" >&2
	exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/box-bench-pull.XXXXXX")
reg=""
cleanup() {
	if [ -n "$reg" ]; then
		"$src/tests/fixtures/registry.sh" stop "$reg" >/dev/null 2>&1 || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export BOX_HOME="$tmp/home"
unset BOX_REGISTRY BOX_REGISTRY_AUTH

# median of command N (0-based) in a hyperfine JSON export, in seconds
median() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results'][int(sys.argv[2])]['median'])" "$1" "$2"; }
ratio() { python3 -c "import sys; print('%.2f' % (float(sys.argv[1]) / float(sys.argv[2])))" "$1" "$2"; }
# a member of a JSON object read from stdin, by a dotted path
jget() { python3 -c "import json,sys
v = json.load(sys.stdin)
for k in sys.argv[1].split('.'): v = v[k]
print(v)" "$1"; }

echo "== start-up: box-pull and box-lock of a small, cached artifact in a local layout vs cat"
# a local layout loads no libcurl (the remote client is the box-registry helper): whole-process
# time of a pull that finds everything in the store, against cat of its box-artifact.json
su=$tmp/startup
mkdir -p "$su/art"
echo hello >"$su/art/README"
printf '{"name":"tiny","version":"1.0.0","kind":"skill"}\n' >"$su/art/box-artifact.json"
"$build/box-pack" --registry "oci:$su/layout" "$su/art" >/dev/null
printf '{"registry":"oci:%s","artifacts":{"tiny":"^1"}}\n' "$su/layout" >"$su/box.json"
"$build/box-lock" --manifest "$su/box.json" --lock "$su/box.lock" >/dev/null
"$build/box-pull" --frozen --lock "$su/box.lock" >/dev/null
hyperfine -N -w 5 -r "${BENCH_STARTUP_RUNS:-200}" --export-json "$tmp/startup.json" \
	"'$build/box-pull' --frozen --lock '$su/box.lock'" \
	"'$build/box-lock' verify --lock '$su/box.lock'" \
	"'$build/box-pull' --version" \
	"cat '$su/art/box-artifact.json'" \
	"'$build/box-registry' --version" \
	>/dev/null 2>&1 || { echo "hyperfine failed (start-up)" >&2; exit 1; }
p=$(median "$tmp/startup.json" 0); v=$(median "$tmp/startup.json" 1)
w=$(median "$tmp/startup.json" 2); c=$(median "$tmp/startup.json" 3)
h=$(median "$tmp/startup.json" 4)
printf 'shared libraries: box-pull %d, box-lock %d, box-pack %d (box-registry %d)\n' \
	"$(ldd "$build/box-pull" | wc -l)" "$(ldd "$build/box-lock" | wc -l)" \
	"$(ldd "$build/box-pack" | wc -l)" "$(ldd "$build/box-registry" | wc -l)"
printf 'box-pull --frozen, cached, oci: %.2f ms; cat %.2f ms: ratio %s\n' \
	"$(python3 -c "print($p*1000)")" "$(python3 -c "print($c*1000)")" "$(ratio "$p" "$c")"
printf 'box-lock verify, oci: %.2f ms: ratio %s to cat\n' "$(python3 -c "print($v*1000)")" \
	"$(ratio "$v" "$c")"
printf 'box-pull --version: %.2f ms: ratio %s to cat\n' "$(python3 -c "print($w*1000)")" \
	"$(ratio "$w" "$c")"
# what every start-up paid before: the helper alone (stdin at its end) loads libcurl
printf 'box-registry --version (libcurl): %.2f ms: ratio %s to cat\n' \
	"$(python3 -c "print($h*1000)")" "$(ratio "$h" "$c")"
rm -rf "$BOX_HOME/store"
if [ -n "${BENCH_STARTUP_ONLY:-}" ]; then
	exit 0
fi

echo "== making a ${mb} MB artifact (seeded, the same tree on every run)"
art=$tmp/art
python3 - "$art" "$mb" <<'EOF'
import json, os, random, sys
root, mb = sys.argv[1], int(sys.argv[2])
rng = random.Random(20261129)
total = mb * 1000 * 1000
text_total = total // 20                        # 5% compressible text, the rest random
words = [''.join(rng.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(rng.randint(2, 9)))
         for _ in range(2000)]
os.makedirs(os.path.join(root, 'text'))
os.makedirs(os.path.join(root, 'data'))
n = 0
written = 0
while written < text_total and n < 100000:
    size = min(rng.randint(1000, 30000), text_total - written)
    out = []
    length = 0
    while length < size:
        w = rng.choice(words)
        out.append(w)
        length += len(w) + 1
    body = (' '.join(out)[:size] + '\n').encode()
    d = os.path.join(root, 'text', '%02d' % (n % 32))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'f%05d.txt' % n), 'wb') as f:
        f.write(body)
    written += len(body)
    n += 1
i = 0
while written < total and i < 100000:
    size = min(rng.randint(256 * 1024, 8 * 1024 * 1024), total - written)
    with open(os.path.join(root, 'data', 'blob%04d.bin' % i), 'wb') as f:
        f.write(rng.randbytes(size))
    written += size
    i += 1
with open(os.path.join(root, 'box-artifact.json'), 'w') as f:
    json.dump({'name': 'bench-big', 'version': '1.0.0', 'kind': 'skill',
               'description': 'box-pull benchmark artifact'}, f)
EOF
layout=$tmp/layout
packed=$("$build/box-pack" --registry "oci:$layout" "$art")
layer=$(printf '%s' "$packed" | jget layer.digest)
blob=$layout/blobs/sha256/${layer#sha256:}
size=$(stat -c %s "$blob")
rm -rf "$art"
printf 'artifact: %d tar entries, layer %s, %.1f MB compressed\n' \
	"$(tar -tzf "$blob" | wc -l)" "$layer" "$(python3 -c "print($size/1e6)")"

echo "== pull from a local OCI layout: box-pull (verify + extract) vs sha256sum + tar -xzf ($runs runs each)"
# every run starts from an empty store (and no box.lock); sync first so that no run pays for
# the writeback of the one before (box-pull syncfs()es the store before it commits)
work=$tmp/work
x=$tmp/x
mkdir -p "$work" "$x"
hyperfine -w 1 -r "$runs" --export-json "$tmp/local.json" \
	-p "rm -rf '$BOX_HOME/store' '$work/box.lock'; sync" \
	-p "rm -rf '$x'; mkdir '$x'; sync" \
	-p "rm -rf '$x'; mkdir '$x'; sync" \
	-p "rm -rf '$x'; mkdir '$x'; sync" \
	"'$build/box-pull' --registry 'oci:$layout' --lock '$work/box.lock' bench-big@1.0.0 >/dev/null" \
	"sha256sum '$blob' >/dev/null && tar -xzf '$blob' -C '$x'" \
	"sha256sum '$blob' >/dev/null && tar -xzf '$blob' -C '$x' && sync -f '$x'" \
	"openssl dgst -sha256 '$blob' >/dev/null && tar -xzf '$blob' -C '$x'" \
	>/dev/null 2>&1 || { echo "hyperfine failed: is box-pull working? try it by hand" >&2; exit 1; }
b=$(median "$tmp/local.json" 0); a=$(median "$tmp/local.json" 1); s=$(median "$tmp/local.json" 2)
o=$(median "$tmp/local.json" 3)
printf 'box-pull oci: %.0f MB/s (%.2f s); sha256sum + tar -xzf %.2f s: ratio %s (target <= 1.0)\n' \
	"$(python3 -c "print($size/1e6/$b)")" "$b" "$a" "$(ratio "$b" "$a")"
printf 'box-pull oci against sha256sum + tar -xzf + sync -f (both durable) %.2f s: ratio %s\n' \
	"$s" "$(ratio "$b" "$s")"
# coreutils' sha256sum has no SHA-NI code; libcrypto (what box-pull uses) has
printf 'box-pull oci against openssl dgst -sha256 + tar -xzf (a hash as fast as box-pull'"'"'s) %.2f s: ratio %s\n' \
	"$o" "$(ratio "$b" "$o")"

echo "== pull from docker-registry on 127.0.0.1: box-pull vs skopeo copy + tar -xzf"
if ! command -v skopeo >/dev/null || ! [ -x /usr/bin/docker-registry ]; then
	echo "remote: needs skopeo and docker-registry (apt-get install skopeo docker-registry): skipped"
else
	reg=$tmp/reg
	port=$("$src/tests/fixtures/registry.sh" start "$reg" none)
	skopeo copy -q --preserve-digests --dest-tls-verify=false \
		"oci:$layout:bench-big:1.0.0" "docker://127.0.0.1:$port/bench-big:1.0.0" >/dev/null
	rm -rf "$BOX_HOME/store" "$work/box.lock"
	st=0
	out=$("$build/box-pull" --registry "http://127.0.0.1:$port" --lock "$work/box.lock" \
		bench-big@1.0.0 2>/dev/null) || st=$?
	if [ "$st" -eq 8 ] && printf '%s' "$out" | grep -q '"unsupported"'; then
		echo "remote: box-pull has no remote registry support in this build: skipped"
	elif [ "$st" -ne 0 ]; then
		echo "remote: box-pull failed (exit $st): $out: skipped"
	else
		sk=$tmp/sk
		hyperfine -w 1 -r "$runs" --export-json "$tmp/remote.json" \
			-p "rm -rf '$BOX_HOME/store' '$work/box.lock'; sync" \
			-p "rm -rf '$sk' '$x'; mkdir '$x'; sync" \
			"'$build/box-pull' --registry 'http://127.0.0.1:$port' --lock '$work/box.lock' bench-big@1.0.0 >/dev/null" \
			"skopeo copy -q --src-tls-verify=false 'docker://127.0.0.1:$port/bench-big:1.0.0' 'oci:$sk:1.0.0' >/dev/null && tar -xzf '$sk/blobs/sha256/${layer#sha256:}' -C '$x'" \
			>/dev/null 2>&1 || { echo "hyperfine failed (remote)" >&2; exit 1; }
		b=$(median "$tmp/remote.json" 0); a=$(median "$tmp/remote.json" 1)
		printf 'box-pull remote: %.0f MB/s (%.2f s); skopeo copy + tar -xzf %.2f s: ratio %s (target <= 1.0)\n' \
			"$(python3 -c "print($size/1e6/$b)")" "$b" "$a" "$(ratio "$b" "$a")"
	fi
	"$src/tests/fixtures/registry.sh" stop "$reg" >/dev/null 2>&1 || true
	reg=""
fi
rm -rf "$BOX_HOME/store" "$x" "$tmp/sk" "$layout"

echo "== box-lock resolving $nlock artifacts (two versions each) in a local layout ($lock_runs runs)"
small=$tmp/small
ll=$tmp/locklayout
mkdir -p "$small"
echo hello >"$small/README"
t0=$(date +%s.%N)
for i in $(seq 0 $((nlock - 1))); do
	name=$(printf 'a-%03d' "$i")
	for v in 1.0.0 1.1.0; do
		printf '{"name":"%s","version":"%s","kind":"skill"}\n' "$name" "$v" \
			>"$small/box-artifact.json"
		"$build/box-pack" --registry "oci:$ll" "$small" >/dev/null
	done
done
printf 'packed %d artifacts in %.1f s\n' $((nlock * 2)) "$(python3 -c "print($(date +%s.%N) - $t0)")"
python3 - "$tmp/box.json" "$ll" "$nlock" <<'EOF'
import json, sys
path, layout, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(path, 'w') as f:
    json.dump({'registry': 'oci:' + layout,
               'artifacts': {'a-%03d' % i: '^1.0' for i in range(n)}}, f)
EOF
"$build/box-lock" --manifest "$tmp/box.json" --lock "$tmp/box.lock" >/dev/null ||
	{ echo "box-lock failed" >&2; exit 1; }
pinned=$(python3 -c "import json,sys; a=json.load(open(sys.argv[1]))['artifacts']; print('%d pinned, %d at 1.1.0' % (len(a), sum(e['version'] == '1.1.0' for e in a)))" "$tmp/box.lock")
hyperfine -w 1 -r "$lock_runs" --export-json "$tmp/lock.json" -p "rm -f '$tmp/box.lock'" \
	"'$build/box-lock' --manifest '$tmp/box.json' --lock '$tmp/box.lock' >/dev/null" \
	>/dev/null 2>&1 || { echo "hyperfine failed (box-lock)" >&2; exit 1; }
printf 'box-lock resolve %d artifacts (%s): %.0f ms (target < 1000)\n' \
	"$nlock" "$pinned" "$(python3 -c "print($(median "$tmp/lock.json" 0)*1000)")"
