#!/usr/bin/env bats
# One set of flag rules and words (lib/core/flags) across every binary and helper: the same
# mistake gets the same message, the usage code and exit status 2, one JSON object on stdout,
# and nothing is created, run or written.

load helpers

setup() {
	box_setup
	export BOX_STATE_DIR=$T/state BOX_HOME=$T/home
	MARK=$T/ran
}

# bad_flag WORDS ARGV...: the binary refuses ARGV with exactly WORDS, exit 2, nothing left
bad_flag() {
	local words=$1
	shift
	run --separate-stderr "$@" </dev/null
	[ "$status" -eq 2 ] || { echo "exit $status for $*: $output" >&2; return 1; }
	one_json_where '.ok == false and .error.code == "usage" and .error.message == $w' \
		--arg w "$words" || { echo "for: $*" >&2; return 1; }
	[ ! -e "$BOX_STATE_DIR" ] || { echo "$* left $BOX_STATE_DIR" >&2; return 1; }
	[ ! -e "$BOX_HOME" ] || { echo "$* left $BOX_HOME" >&2; return 1; }
	[ ! -e "$MARK" ] || { echo "$* ran something" >&2; return 1; }
}

@test "an unknown flag: the same words from every binary" {
	local b
	for b in box-run box-pack box-pull box-lock box-sandbox box-mcp; do
		bad_flag "Unknown flag: --bogus" "$b" --bogus
		bad_flag "Unknown flag: --bogus=1" "$b" --bogus=1
		bad_flag "Unknown flag: -Z" "$b" -Z
		# kebab-case only
		bad_flag "Unknown flag: --max_timeout_ms" "$b" --max_timeout_ms 5
	done
	bad_flag "Unknown flag: --bogus" "$BOX_LIBEXEC_DIR/box-http" --bogus
	bad_flag "Unknown flag: -x" "$BOX_LIBEXEC_DIR/box-http" -x
	# a hostile flag is quoted, cut short
	bad_flag "Unknown flag: --$(printf 'a%.0s' $(seq 126))" box-run "--$(printf 'a%.0s' $(seq 5000))"
}

@test "a flag without its value, a boolean with one" {
	local b
	for b in box-run box-pack box-pull box-lock box-sandbox box-mcp; do
		bad_flag "Missing value for flag: --policy" "$b" --policy
		bad_flag "Missing value for flag: --policy" "$b" --policy=
	done
	bad_flag "Missing value for flag: --timeout-ms" box-run -e "os.execute('touch $MARK')" --timeout-ms
	bad_flag "Missing value for flag: --max-body-bytes" "$BOX_LIBEXEC_DIR/box-http" --max-body-bytes
	bad_flag "Missing value for flag: --allow" "$BOX_LIBEXEC_DIR/box-http" --allow
	bad_flag "Flag takes no value: --digests=1" box-run --digests=1 -e 'return 1'
	bad_flag "Flag takes no value: --help=1" "$BOX_LIBEXEC_DIR/box-http" --help=1
	bad_flag "Flag takes no value: --allow-private-network=yes" \
		"$BOX_LIBEXEC_DIR/box-http" --allow-private-network=yes
}

@test "integers: not a number, or out of range, with the range" {
	bad_flag "Invalid integer for --timeout-ms: 12abc" box-run --timeout-ms 12abc -e 'return 1'
	bad_flag "Invalid integer for --timeout-ms: 0x10" box-run --timeout-ms 0x10 -e 'return 1'
	bad_flag "Invalid integer for --timeout-ms: " box-run --timeout-ms= -e 'return 1'
	bad_flag "Invalid integer for --timeout-ms: 1.5" box-sandbox exec s --timeout-ms 1.5 -- touch "$MARK"
	bad_flag "Out of range for --memory-bytes: 1 (expected 65536 to 17179869184)" \
		box-run --memory-bytes 1 -e 'return 1'
	bad_flag "Out of range for --timeout-ms: 99999999999999999999 (expected 1 to 86400000)" \
		box-sandbox exec s --timeout-ms 99999999999999999999 -- touch "$MARK"
	bad_flag "Out of range for --timeout-ms: 0 (expected 1 to 86400000)" \
		box-sandbox exec s --timeout-ms 0 -- touch "$MARK"
	bad_flag "Invalid integer for --max-body-bytes: ten" "$BOX_LIBEXEC_DIR/box-http" --max-body-bytes ten
	bad_flag "Out of range for --max-body-bytes: 0 (expected 1 to 1073741824)" \
		"$BOX_LIBEXEC_DIR/box-http" --max-body-bytes 0
	# the path of the member a flag sets is given, as for a request
	run --separate-stderr box-run --timeout-ms x -e 'return 1'
	one_json_where '.error.path == "$.timeout_ms"'
}

@test "an argument where none is taken" {
	bad_flag "Unexpected argument: extra" box-sandbox delete s extra
	bad_flag "Unexpected argument: extra" box-mcp extra
	bad_flag "Unexpected argument: b" box-pack "$T/a" b
	bad_flag "Unexpected argument: extra" "$BOX_LIBEXEC_DIR/box-http" extra
}

@test "the JSON of a JSON-valued flag" {
	bad_flag "Invalid JSON for --args: [1," box-run --args '[1,' -e "os.execute('touch $MARK')"
	bad_flag "Invalid JSON for --args: " box-run --args= -e 'return 1'
}
