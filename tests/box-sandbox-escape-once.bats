#!/usr/bin/env bats
# box-sandbox: an exec runs at most once, and its caller learns whether it ran ("ran"), with
# slow host tools, killed clients, concurrent execs and a stopped keeper; tool calls end with
# the exec that made them; status, read, write and ls answer while a command runs.

load helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root (cgroups and namespaces as set up in CI)"
	sb_setup
	SLOW=$BOX_SRCDIR/tests/fixtures/tools/slow.json
	BG=()
	STOPPED=()
}

teardown() {
	local p
	for p in "${BG[@]}"; do
		kill -9 "$p" 2>/dev/null || true
	done
	for p in "${STOPPED[@]}"; do
		kill -CONT "$p" 2>/dev/null || true
	done
	sb_teardown
}

# mk ID [FLAGS...]: a session with the slow tool granted
mk() {
	local id=$1
	shift
	run_sb create --session "$id" --tools "$SLOW" "$@"
	sb_ok
}

# wait_file PATH [SECONDS]: until PATH exists and is not empty (default 60 s)
wait_file() {
	local i
	for i in $(seq $((${2:-60} * 20))); do
		[ -s "$1" ] && return 0
		sleep 0.05
	done
	echo "no $1 after ${2:-60} s" >&2
	return 1
}

# count ID TOKEN: how many lines of the session's /workspace/counter are TOKEN
count() {
	local f=$BOX_STATE_DIR/sandboxes/$1/workspace/counter
	[ -e "$f" ] || { echo 0; return; }
	grep -cx -- "$2" "$f" || true
}

# append ID TOKEN [FLAGS...]: an exec that appends TOKEN to /workspace/counter
append() {
	local id=$1 tok=$2
	shift 2
	box-sandbox exec "$id" "$@" -- sh -c "echo $tok >> /workspace/counter; wc -l < /workspace/counter"
}

# keeper_pids ID: the keeper of the session's holder, and the keeper's other children (the
# zygote)
keeper_pids() {
	local h k
	h=$(sb_holder "$1")
	k=$(ps -o ppid= -p "$h" | tr -d ' ')
	echo "$k"
	pgrep -P "$k" | grep -vx "$h" || true
}

@test "an exec during a 12 s tool call runs exactly once, after it, with ran true" {
	mk o1
	box-sandbox exec o1 --timeout-ms 120000 -- box-tool slow --json \
		"{\"seconds\": 12, \"pidfile\": \"$T/pids\"}" >"$T/a.out" 2>/dev/null &
	BG+=($!)
	wait_file "$T/pids"
	run_sb exec o1 -- sh -c 'echo b >> /workspace/counter; wc -l < /workspace/counter'
	sb_ok '.ran == true and .stdout == "1\n"'
	wait "${BG[0]}"
	jqe '.ok == true and .ran == true and (.stdout | fromjson | .result.slept == 12)' "$(cat "$T/a.out")"
	# nothing runs it a second time later
	sleep 3
	assert_equal "$(count o1 b)" 1
	run_sb exec o1 -- cat /workspace/counter
	sb_ok '.stdout == "b\n"'
}

@test "an exec whose caller gave up on a 12 s tool call leaves nothing to run twice" {
	mk o2
	# the exec ends at its timeout while the tool would go on for 12 s
	run_sb exec o2 --timeout-ms 2000 -- box-tool slow --json "{\"seconds\": 12, \"pidfile\": \"$T/pids\"}"
	assert_equal "$status" 3
	one_json_where '.ok == false and .ran == true and .error.code == "timeout"'
	start=$(now_ms)
	run_sb exec o2 -- sh -c 'echo c >> /workspace/counter; wc -l < /workspace/counter'
	sb_ok '.ran == true and .stdout == "1\n"'
	# it did not wait for the tool
	[ $(($(now_ms) - start)) -lt 10000 ]
	sleep 12
	assert_equal "$(count o2 c)" 1
}

@test "a tool and its child are gone after the exec that called it timed out" {
	mk o3
	run_sb exec o3 --timeout-ms 3000 -- box-tool slow --json "{\"seconds\": 300, \"pidfile\": \"$T/pids\"}"
	assert_equal "$status" 3
	one_json_where '.ran == true and .error.code == "timeout"'
	wait_file "$T/pids" 5
	read -r tool child <"$T/pids"
	for _ in $(seq 200); do
		kill -0 "$tool" 2>/dev/null || kill -0 "$child" 2>/dev/null || break
		sleep 0.05
	done
	run kill -0 "$tool"
	assert_failure
	run kill -0 "$child"
	assert_failure
	# and the keeper still answers the next call
	run_sb exec o3 --timeout-ms 60000 -- box-tool slow --json '{"seconds": 0}'
	sb_ok '.ran == true and (.stdout | fromjson | .result.slept == 0)'
}

@test "status, read, write and ls answer while a slow tool call runs" {
	mk o4
	box-sandbox exec o4 --timeout-ms 200000 -- box-tool slow --json \
		"{\"seconds\": 150, \"pidfile\": \"$T/pids\"}" >/dev/null 2>&1 &
	BG+=($!)
	wait_file "$T/pids"
	for op in "status o4" "write o4 f.txt --content hello" "read o4 f.txt" "ls o4 /workspace"; do
		start=$(now_ms)
		# shellcheck disable=SC2086 # the words of op are the arguments
		run --separate-stderr timeout 60 box-sandbox $op
		sb_ok
		took=$(($(now_ms) - start))
		# it answers at once (about 10 ms here); the bound only has to tell waiting from
		# not waiting (an exec holds the session for its whole run)
		[ "$took" -lt 15000 ] || { echo "$op took $took ms" >&2; false; }
	done
	run_sb status o4
	sb_ok '.state == "running" and .observed == "running"'
	run_sb read o4 f.txt
	sb_ok '.content == "hello"'
	kill -9 "${BG[0]}"
}

@test "2 and 4 concurrent execs each run exactly once" {
	mk o5
	for n in 2 4; do
		pids=()
		for i in $(seq "$n"); do
			append o5 "n$n-$i" --timeout-ms 60000 >"$T/c$n-$i.out" 2>/dev/null &
			pids+=($!)
		done
		for i in $(seq "$n"); do
			wait "${pids[$((i - 1))]}"
			jqe '.ok == true and .ran == true' "$(cat "$T/c$n-$i.out")"
		done
		for i in $(seq "$n"); do
			assert_equal "$(count o5 "n$n-$i")" 1
		done
	done
	run_sb exec o5 -- sh -c 'wc -l < /workspace/counter'
	sb_ok '.stdout == "6\n"'
}

@test "clients SIGKILLed at any point never make a command run twice" {
	mk o6
	# a tool call in the sandbox keeps the keeper busy meanwhile
	box-sandbox exec o6 --timeout-ms 60000 -- box-tool slow --json '{"seconds": 3}' >/dev/null 2>&1
	for d in 0 0.005 0.01 0.02 0.05 0.1 0.2 0.3 0.5 1; do
		# a simple command: $! is box-sandbox itself
		box-sandbox exec o6 --timeout-ms 60000 -- sh -c "echo k$d >> /workspace/counter" \
			>/dev/null 2>&1 &
		p=$!
		sleep "$d"
		kill -9 "$p" 2>/dev/null || true
		wait "$p" || true
	done
	# whatever was started has ended by now; the session still works
	run_sb exec o6 -- sh -c 'echo done >> /workspace/counter'
	sb_ok '.ran == true'
	sleep 2
	for d in 0 0.005 0.01 0.02 0.05 0.1 0.2 0.3 0.5 1; do
		n=$(count o6 "k$d")
		[ "$n" -le 1 ] || { echo "k$d ran $n times" >&2; false; }
	done
	assert_equal "$(count o6 done)" 1
}

@test "a stopped keeper: conflict with ran false, and the command never runs later" {
	mk o7
	mapfile -t STOPPED < <(keeper_pids o7)
	[ "${#STOPPED[@]}" -ge 1 ]
	kill -STOP "${STOPPED[@]}"
	start=$(now_ms)
	run --separate-stderr append o7 never
	assert_equal "$status" 7
	one_json_where '.ok == false and .ran == false and .error.code == "conflict" and
		.error.retryable == true and .session == "o7"'
	[ $(($(now_ms) - start)) -lt 60000 ]
	# a client killed while it waits for the keeper leaves nothing behind either
	box-sandbox exec o7 -- sh -c 'echo killed >> /workspace/counter' >/dev/null 2>&1 &
	p=$!
	sleep 1
	kill -9 "$p"
	wait "$p" || true
	kill -CONT "${STOPPED[@]}"
	STOPPED=()
	sleep 3
	run_sb exec o7 -- sh -c 'cat /workspace/counter 2>/dev/null; echo end'
	sb_ok '.ran == true and .stdout == "end\n"'
	assert_equal "$(count o7 never)" 0
	assert_equal "$(count o7 killed)" 0
}

@test "every exec answers ran: true when it ran, false when nothing was started" {
	run_sb exec o8 -- true
	sb_ok '.ran == true and .created == true'
	run_sb exec o8 -- false
	assert_equal "$status" 1
	one_json_where '.ran == true and .error.code == "guest_error"'
	run_sb exec o8 -- /no/such/command
	one_json_where '.ran == true and .ok == false'
	run_sb exec o8
	assert_equal "$status" 2
	one_json_where '.ran == false and .error.code == "usage"'
	run_sb exec o8 --env GITHUB_TOKEN=x -- true
	assert_equal "$status" 4
	one_json_where '.ran == false and .error.code == "policy_denied"'
	run_sb exec 'Bad!' -- true
	one_json_where '.ran == false and .error.code == "invalid_request"'
	# refused by the policy before anything is looked at
	echo '{"box-sandbox": {"sessions": {"prefix": "v-", "any": true, "create": false}}}' >"$T/p.json"
	run --separate-stderr box-sandbox --json --policy "$T/p.json" \
		<<<'{"op": "exec", "session": "o8-absent", "argv": ["true"]}'
	assert_equal "$status" 4
	one_json_where '.ran == false and .error.code == "policy_denied"'
	run --separate-stderr box-sandbox --json --session v-x --policy "$T/p.json" \
		<<<'{"op": "exec", "session": "v-y", "argv": ["true"]}'
	[ "$status" -ne 0 ]
	one_json_where '.ran == false and .ok == false'
}
