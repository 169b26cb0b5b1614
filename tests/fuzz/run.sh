#!/bin/bash
# Builds the libFuzzer targets of tests/fuzz/ with clang (-fsanitize=fuzzer,address,undefined)
# and runs each for BOX_FUZZ_SECONDS (default 10) seconds.
#
#   run.sh [--check | --build] [TARGET...]
#
# TARGET is sandbox-request, run-request, toolsrv or ipc (default: all). --check only says
# whether this machine can build them (exit 77 and the reason when not); --build builds and
# does not run. Everything it writes goes under $BOX_BUILDDIR/tests/fuzz/build (objects, targets,
# the corpus it grows, crash artifacts, logs): the source tree may be read-only. The seeds
# are tests/fuzz/corpus/TARGET/ of the source tree. Exit 0 when every target ran without a
# finding, 1 when one found something (its artifact and log are named), 77 to skip.
set -eu

: "${BOX_SRCDIR:?set BOX_SRCDIR (make check sets it)}"
: "${BOX_BUILDDIR:?set BOX_BUILDDIR (make check sets it)}"
secs=${BOX_FUZZ_SECONDS:-10}
cc=${BOX_FUZZ_CC:-clang}
out=$BOX_BUILDDIR/tests/fuzz/build
mode=run
case "${1:-}" in
--check) mode=check; shift ;;
--build) mode=build; shift ;;
esac
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(sandbox-request run-request toolsrv ipc)

skip() {
	echo "skip: $*"
	exit 77
}

# clang with libFuzzer's runtime
command -v "$cc" >/dev/null 2>&1 || skip "$cc is not installed"
mkdir -p "$out/obj"
probe=$out/obj/probe
printf '%s\n' '#include <stdint.h>' '#include <stddef.h>' \
	'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
	'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
	>"$probe.c"
"$cc" -fsanitize=fuzzer,address,undefined "$probe.c" -o "$probe" >"$probe.log" 2>&1 ||
	skip "$cc cannot build a libFuzzer target (-fsanitize=fuzzer,address,undefined): $(head -c 300 "$probe.log")"
[ "$mode" = check ] && exit 0

# FUZZ_CPPFLAGS and FUZZ_LIBS: the include paths, definitions and libraries of the build
flags=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$BOX_BUILDDIR" fuzz-flags) || {
	echo "make fuzz-flags failed in $BOX_BUILDDIR" >&2
	exit 1
}
eval "$flags"
eval "cppflags=($FUZZ_CPPFLAGS)"
eval "libs=($FUZZ_LIBS)"
cflags=(-g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined
	-fno-omit-frame-pointer)

# compile SRC OBJ [FLAG...], only when SRC (or the build's Makefile) is newer than OBJ
compile() {
	local src=$1 obj=$2
	shift 2
	if [ ! -e "$obj" ] || [ "$src" -nt "$obj" ] || [ "$BOX_BUILDDIR/Makefile" -nt "$obj" ]; then
		"$cc" "${cflags[@]}" -fsanitize=fuzzer-no-link "${cppflags[@]}" "$@" -c "$src" \
			-o "$obj.tmp" && mv "$obj.tmp" "$obj"
	fi
}

# the library, and the sources the build generates (filters, policy, schemas)
objs=()
pids=()
for src in $(find "$BOX_SRCDIR/lib" -name '*.c' | sort) "$BOX_BUILDDIR"/jail-filter.c "$BOX_BUILDDIR"/sbfilter.c \
	"$BOX_BUILDDIR"/policy-default.c "$BOX_BUILDDIR"/schema-box-sandbox.c \
	"$BOX_BUILDDIR"/schema-box-run.c; do
	case ${src##*/} in
	jail-gen.c | sbfilter-gen.c) continue ;;
	esac
	[ -e "$src" ] || {
		echo "missing $src: run make first" >&2
		exit 1
	}
	obj=$out/obj/$(basename "$src" .c).o
	objs+=("$obj")
	# two at a time: the machine may be small
	compile "$src" "$obj" &
	pids+=($!)
	if [ ${#pids[@]} -ge 2 ]; then
		wait "${pids[0]}" || exit 1
		pids=("${pids[@]:1}")
	fi
done
for p in "${pids[@]}"; do
	wait "$p" || exit 1
done

# build TARGET: its binary, $out/TARGET
build() {
	local t=$1 src extra=()
	case $t in
	sandbox-request) src=fuzz-request.c ;;
	run-request) src=fuzz-request.c extra=(-DFUZZ_BOX_RUN) ;;
	toolsrv) src=fuzz-toolsrv.c ;;
	ipc) src=fuzz-ipc.c ;;
	*)
		echo "unknown target $t" >&2
		return 1
		;;
	esac
	compile "$BOX_SRCDIR/tests/fuzz/$src" "$out/obj/fuzz-$t.o" "${extra[@]}" || return 1
	if [ ! -e "$out/$t" ] || [ -n "$(find "$out/obj" -name '*.o' -newer "$out/$t" | head -1)" ]; then
		"$cc" "${cflags[@]}" -fsanitize=fuzzer "$out/obj/fuzz-$t.o" "${objs[@]}" \
			"${libs[@]}" -o "$out/$t.tmp" && mv "$out/$t.tmp" "$out/$t"
	fi
}

for t in "${targets[@]}"; do
	build "$t"
done
[ "$mode" = build ] && exit 0

# run each: the grown corpus first (libFuzzer writes there), the seeds second
status=0
for t in "${targets[@]}"; do
	mkdir -p "$out/corpus/$t" "$out/artifacts" "$out/tmp"
	log=$out/$t.log
	# what a target makes in TMPDIR (the tool socket's) stays in the build dir
	if (cd "$out" && TMPDIR=$out/tmp "./$t" -max_total_time="$secs" -max_len=65536 -timeout=20 \
		-rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/artifacts/$t-" \
		"$out/corpus/$t" "$BOX_SRCDIR/tests/fuzz/corpus/$t") >"$log" 2>&1; then
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
		echo "$t: ok, ${runs:-?} executions in ${secs} s"
	else
		echo "$t: FOUND something, see $log and $out/artifacts/$t-*"
		grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$log" | head -5
		status=1
	fi
done
exit $status
