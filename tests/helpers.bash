# Shared setup of the bats suites: bats-support, bats-assert, the binaries of the build tree
# first on PATH, and a fresh temporary directory per test with a workspace in it.
#
# A suite loads it with `load helpers` and calls box_setup from its setup().

# shellcheck disable=SC2154 # status, output, stderr, stderr_lines: set by bats' run

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
bats_require_minimum_version 1.5.0

# CI runs the suites with stdin closed. bats' `run` would then give a command, as its stdin,
# the read end of the very pipe that captures its output (pipe() takes the free fd 0), and
# box-sandbox exec streams a stdin that is not a terminal into the guest: an exec --events
# would read its own event lines back. Every command gets /dev/null unless a test gives it
# another stdin, as any caller without a terminal has; what box does with a closed fd 0, 1 or
# 2 is tested in box-sandbox-io.bats. (Not `true <&0` as a test of a closed fd 0: bash takes
# 0<&0 as a no-op.)
exec </dev/null

# make check puts the build dir first on PATH; a bare `bats tests/x.bats` run from a build dir
# with BOX_BUILDDIR set gets the same
if [ -n "${BOX_BUILDDIR:-}" ]; then
	PATH="$BOX_BUILDDIR:$PATH"
	export PATH
fi

# box_setup: T (the test's own temp dir, removed by bats), WS (an empty workspace inside it)
# and OUTSIDE (a directory next to the workspace that no guest may reach).
box_setup() {
	T=$BATS_TEST_TMPDIR
	WS=$T/ws
	OUTSIDE=$T/outside
	mkdir -p "$WS" "$OUTSIDE"
	export T WS OUTSIDE
	# box-sandbox's rootfs digest walks a small tree of ours, not the host's 160,000 entries
	# at every session (box-sandbox-repro.bats walks the real one where it matters)
	BOX_SBREPRO_ROOTS=${BOX_SBREPRO_ROOTS-$BATS_TEST_DIRNAME/fixtures}
	export BOX_SBREPRO_ROOTS
	cd "$T" || return 1
}

# jqe FILTER [TEXT]: jq -e FILTER on TEXT (default: $output). Unlike jq alone it fails on empty
# input, where jq -e would succeed without evaluating anything; false, null and a parse error
# fail too. On failure it shows the text.
jqe() {
	local text=${2-$output}
	if [ -z "$text" ]; then
		echo "jqe: no JSON to check" >&2
		return 1
	fi
	if ! jq -e "$1" <<<"$text" >/dev/null; then
		echo "jqe: '$1' does not hold for: ${text:0:2000}" >&2
		return 1
	fi
}

# one_json_where FILTER [JQ-ARG...]: $output is exactly one JSON object and FILTER holds on it
# (one jq run: jq's start-up is most of the time of a test).
one_json_where() {
	local filter=$1
	shift
	if [ -z "$output" ]; then
		echo "no JSON on stdout" >&2
		return 1
	fi
	if ! jq -s -e "$@" "length == 1 and (.[0] | type == \"object\") and (.[0] | $filter)" \
		<<<"$output" >/dev/null; then
		echo "stdout is not one JSON object where '$filter' holds: ${output:0:2000}" >&2
		return 1
	fi
}

# assert_one_json: $output is exactly one JSON object.
assert_one_json() {
	one_json_where true
}

# assert_ok [FILTER]: exit 0, one JSON object with ok and success true (and FILTER), nothing
# on stderr.
assert_ok() {
	assert_equal "$status" 0
	one_json_where ".ok == true and .success == true and (has(\"error\") | not) and (${1:-true})"
	assert_equal "$stderr" ""
}

# assert_fail CODE STATUS [FILTER]: exit STATUS, one JSON object with ok false, error.code
# CODE and a message (and FILTER), and exactly one line on stderr, "PROG: CODE: message"
# (PROG is $BOX_PROG, default box-run).
assert_fail() {
	local code=$1 want=$2 extra=${3:-true}
	assert_equal "$status" "$want"
	one_json_where ".ok == false and .error.code == \$code and
		(.error.message | type == \"string\" and length > 0) and ($extra)" --arg code "$code"
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "^${BOX_PROG:-box-run}: $code: ."
}

# assert_limit CODE LIMIT CONFIGURED UNIT [FILTER]: a failure (exit 3) on the named limit,
# with the configured value and unit of DESIGN.md.
assert_limit() {
	assert_fail "$1" 3 ".error.limit == \"$2\" and .error.configured == $3 and
		.error.unit == \"$4\" and (${5:-true})"
}

# run_box ARG...: box-run with ARG..., stdout in $output, stderr in $stderr apart.
run_box() {
	run --separate-stderr box-run "$@"
}

# run_box_json REQUEST [ARG...]: box-run --json with REQUEST on stdin.
run_box_json() {
	local req=$1
	shift
	run --separate-stderr box-run --json "$@" <<<"$req"
}

# now_ms: wall-clock milliseconds.
now_ms() {
	date +%s%3N
}

# sha FILE: its SHA-256, hex.
sha() {
	sha256sum "$1" | cut -d' ' -f1
}

# ---- box-sandbox suites ----

# sb_setup: box_setup plus a private BOX_STATE_DIR ($T/state) and BOX_PROG for assert_fail.
sb_setup() {
	box_setup || return 1
	BOX_STATE_DIR=$T/state
	BOX_PROG=box-sandbox
	export BOX_STATE_DIR BOX_PROG
}

# sb_teardown: deletes every session of this test's state dir (errors ignored), so that no
# holder outlives the test.
sb_teardown() {
	local d
	[ -n "${BOX_STATE_DIR:-}" ] && [ -d "$BOX_STATE_DIR/sandboxes" ] || return 0
	for d in "$BOX_STATE_DIR"/sandboxes/*/; do
		[ -d "$d" ] || continue
		d=${d%/}
		timeout 20 box-sandbox delete "${d##*/}" >/dev/null 2>&1 || true
	done
}

# run_sb ARG...: box-sandbox with ARG..., stdout in $output, stderr in $stderr.
run_sb() {
	run --separate-stderr box-sandbox "$@"
}

# sb_ok [FILTER]: exit 0, one JSON object with ok true (and FILTER), nothing on stderr.
sb_ok() {
	assert_equal "$status" 0
	one_json_where ".ok == true and (has(\"error\") | not) and (${1:-true})"
	assert_equal "$stderr" ""
}

# sb_holder ID: the holder pid that the session's state.json names.
sb_holder() {
	jq -r '.provider_data.holder.pid' "$BOX_STATE_DIR/sandboxes/$1/state.json"
}

# sb_stdout ID ARG...: the stdout of a successful exec of ARG... in ID (fails otherwise).
sb_stdout() {
	local id=$1 out
	shift
	out=$(box-sandbox exec "$id" "$@" 2>/dev/null) || return 1
	jq -j -e '.stdout' <<<"$out"
}

# httpd_start DIR: tests/fixtures/httpd.py on 127.0.0.1, its pid in DIR/pid; sets PORT
httpd_start() {
	python3 "$BATS_TEST_DIRNAME/fixtures/httpd.py" "$1/port" </dev/null >/dev/null 2>&1 3>&- &
	echo $! >"$1/pid"
	for _ in $(seq 200); do
		[ -s "$1/port" ] && break
		sleep 0.05
	done
	PORT=$(cat "$1/port")
}
