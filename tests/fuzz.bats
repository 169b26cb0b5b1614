#!/usr/bin/env bats
# The libFuzzer targets of tests/fuzz/ (box-sandbox's and box-run's --json request path, the
# tool socket's server, the ipc frames), each built with clang and run for a bounded time:
# BOX_FUZZ_SECONDS, 10 s by default. Skipped, with the reason, where clang cannot build a
# libFuzzer target.

load helpers

setup() {
	run "$BOX_SRCDIR/tests/fuzz/run.sh" --check
	[ "$status" -ne 77 ] || skip "${output#skip: }"
	[ "$status" -eq 0 ]
}

# fuzz TARGET: builds and runs it, fails with libFuzzer's report when it finds something
fuzz() {
	run "$BOX_SRCDIR/tests/fuzz/run.sh" "$1"
	echo "$output"
	if [ "$status" -ne 0 ]; then
		tail -n 60 "$BOX_BUILDDIR/tests/fuzz/build/$1.log" || true
	fi
	[ "$status" -eq 0 ]
	[[ "$output" == "$1: ok, "*" executions in "* ]]
	# it did run: at least one input went through
	[[ "$output" =~ ok,\ ([0-9]+)\ executions ]] && [ "${BASH_REMATCH[1]}" -gt 0 ]
}

@test "fuzz: box-sandbox's --json request (parse, fields, schema, trust, op, sessions)" {
	fuzz sandbox-request
}

@test "fuzz: box-run's --json request (parse, fields, schema, trust)" {
	fuzz run-request
}

@test "fuzz: the tool socket's server, one connection per input" {
	fuzz toolsrv
}

@test "fuzz: the ipc frames and their fields" {
	fuzz ipc
}
