#!/usr/bin/env bats
# box-sandbox under crashes and concurrency: tests/sb-crash.py kills box-sandbox at random
# points of every operation that changes a session; tests/sb-soak.py runs 8 clients on 4
# sessions. Both print their seed; BOX_CRASH_ITERATIONS, BOX_CRASH_SEED, BOX_SOAK_SECONDS and
# BOX_SOAK_SEED run them longer or again by hand.

load helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root (cgroups and namespaces as set up in CI)"
	sb_setup
}

teardown() {
	sb_teardown
}

@test "crash safety: SIGKILL at random points of create, exec, pause, resume, snapshot, restore, delete" {
	run timeout 600 python3 "$BATS_TEST_DIRNAME/sb-crash.py" "$BOX_STATE_DIR" \
		"${BOX_CRASH_ITERATIONS:-100}"
	echo "$output"
	assert_success
	assert_line --regexp '^ok: [0-9]+ operations'
}

@test "concurrency: 8 clients on 4 sessions, every exec once, every answer one JSON object" {
	run timeout 900 python3 "$BATS_TEST_DIRNAME/sb-soak.py" "$BOX_STATE_DIR" \
		"${BOX_SOAK_SECONDS:-15}"
	echo "$output"
	assert_success
	assert_line ok
}

@test "a restore killed while box-sbfiles extracts leaves no helper behind to swap the tree" {
	run_sb create --session rk
	sb_ok
	run_sb exec rk -- sh -c 'head -c 30000000 /dev/urandom > /workspace/big; echo one > /workspace/f'
	sb_ok
	run_sb snapshot rk
	sb_ok
	d=$(jq -r .digest <<<"$output")
	run_sb exec rk -- sh -c 'echo two > /workspace/f'
	sb_ok
	box-sandbox restore rk "$d" >/dev/null 2>&1 &
	p=$!
	for _ in $(seq 400); do
		pgrep -f "box-sbfiles restore" >/dev/null && break
		sleep 0.01
	done
	kill -9 "$p"
	wait "$p" || true
	# no box-sbfiles of this state directory outlives its caller
	for _ in $(seq 100); do
		pgrep -f "box-sbfiles restore .*$BOX_STATE_DIR" >/dev/null || break
		sleep 0.05
	done
	run pgrep -f "box-sbfiles restore .*$BOX_STATE_DIR"
	assert_failure
	# the session works, and what it holds does not change behind its back
	run_sb exec rk -- cat /workspace/f
	sb_ok
	before=$output
	sleep 2
	run_sb exec rk -- cat /workspace/f
	sb_ok
	assert_equal "$(jq -r .stdout <<<"$output")" "$(jq -r .stdout <<<"$before")"
}
