#!/usr/bin/env bats
# box-sandbox: background commands (exec --background, ps, logs, wait, kill), schedules
# (schedule, unschedule), execs of one session side by side, and the trust boundary around
# work that outlives the call.

load helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root (cgroups and namespaces as set up in CI)"
	sb_setup
	CLIENTS=()
}

teardown() {
	local p
	for p in "${CLIENTS[@]}"; do
		kill -9 "$p" 2>/dev/null || true
	done
	sb_teardown
}

# jobs_dir ID: the host directory of the session's background commands
jobs_dir() {
	echo "$BOX_STATE_DIR/sandboxes/$1/jobs"
}

# until_ok SECONDS CMD...: runs CMD every 0.2 s until it succeeds, at most SECONDS
until_ok() {
	local n=$(($1 * 5))
	shift
	while [ "$n" -gt 0 ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.2
		n=$((n - 1))
	done
	echo "not true after the wait: $*" >&2
	return 1
}

# state_is ID HANDLE STATE: ps shows the command in STATE
state_is() {
	box-sandbox ps "$1" | jq -e --arg h "$2" --arg s "$3" \
		'.commands[] | select(.handle == $h) | .state == $s' >/dev/null
}

# get URL ID PORT: an exec that fetches the guest's 127.0.0.1:PORT
get() {
	box-sandbox exec "$1" --timeout-ms 20000 -- python3 -c \
		"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$2/hello.txt', timeout=5).read().decode())" |
		jq -e '.ok == true and .stdout == "hi there\n"'
}

# cg_file ID FILE: the session's pids group file (cgroup v1 or v2)
cg_file() {
	local d
	for d in /sys/fs/cgroup/pids/box /sys/fs/cgroup/box; do
		for g in "$d/$1"-*; do
			[ -e "$g/$2" ] && { echo "$g/$2"; return 0; }
		done
	done
	return 1
}

@test "a background server answers a later exec, survives pause and resume, and dies at delete" {
	run_sb create --session bg1
	sb_ok
	run_sb write bg1 /workspace/hello.txt --content 'hi there'
	sb_ok
	run_sb exec bg1 --background -- python3 -m http.server 18461 --bind 127.0.0.1
	sb_ok '.handle == "bg-1" and .ran == true and .background == true and
		(.pid | type == "number" and . > 1)'
	until_ok 30 get bg1 18461
	# the server's process on the host, and the watcher that keeps its log
	pid=$(pgrep -f 'http.server 18461' | head -1)
	[ -n "$pid" ]
	watcher=$(jq -r .watcher "$(jobs_dir bg1)/bg-1.json")
	kill -0 "$watcher"
	run_sb ps bg1
	sb_ok '.commands | length == 1 and .[0].handle == "bg-1" and .[0].state == "running" and
		.[0].argv == ["python3", "-m", "http.server", "18461", "--bind", "127.0.0.1"] and
		(.[0].started_at | test("^[0-9-]+T[0-9:.]+Z$")) and (.[0] | has("watcher") | not)'
	run_sb pause bg1
	sb_ok '.state == "paused"'
	run_sb ps bg1
	sb_ok '.commands[0].state == "running"'
	run_sb resume bg1
	sb_ok '.state == "running"'
	until_ok 30 get bg1 18461
	# its log holds the requests
	run_sb logs bg1 bg-1
	sb_ok '.output | test("GET /hello.txt")'
	run_sb delete bg1
	sb_ok '.deleted == true'
	until_ok 20 bash -c "! kill -0 $pid 2>/dev/null"
	until_ok 20 bash -c "! kill -0 $watcher 2>/dev/null"
	run pgrep -f 'http.server 18461'
	assert_failure
	[ ! -e "$BOX_STATE_DIR/sandboxes/bg1" ]
}

@test "8 execs of one session run side by side, each once; the end of one kills only its own tree" {
	run_sb create --session bg2
	sb_ok
	start=$(now_ms)
	pids=()
	for i in 1 2 3 4 5 6 7 8; do
		box-sandbox exec bg2 --timeout-ms 60000 -- sh -c "sleep 2; echo r$i >> /workspace/ran" \
			>"$T/c$i.out" 2>/dev/null &
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		wait "$p"
	done
	took=$(($(now_ms) - start))
	echo "8 x sleep 2 took $took ms" >&3
	[ "$took" -lt 8000 ]
	for i in 1 2 3 4 5 6 7 8; do
		jqe '.ok == true and .ran == true and .exit_code == 0' "$(cat "$T/c$i.out")"
		assert_equal "$(grep -cx "r$i" "$BOX_STATE_DIR/sandboxes/bg2/workspace/ran")" 1
	done
	# a background command, and a long exec, outlive a short exec that leaves a child behind
	run_sb exec bg2 --background -- sleep 300
	sb_ok '.handle == "bg-1"'
	box-sandbox exec bg2 --timeout-ms 60000 -- sh -c 'sleep 6; echo long' >"$T/long.out" 2>&1 &
	long=$!
	sleep 1
	run_sb exec bg2 -- sh -c 'sleep 101 & echo short'
	sb_ok '.stdout == "short\n"'
	run pgrep -fx 'sleep 101'
	assert_failure
	wait "$long"
	jqe '.ok == true and .stdout == "long\n"' "$(cat "$T/long.out")"
	state_is bg2 bg-1 running
}

@test "read, write, ls, ps and logs answer while a long exec runs" {
	run_sb create --session bg3
	sb_ok
	box-sandbox exec bg3 --timeout-ms 60000 -- sleep 15 >"$T/long.out" 2>&1 &
	CLIENTS+=($!)
	sleep 2
	for op in "write bg3 /workspace/f.txt --content hello" "read bg3 /workspace/f.txt" \
		"ls bg3 /workspace" "ps bg3" "status bg3"; do
		start=$(now_ms)
		# shellcheck disable=SC2086 # the words of op
		run_sb $op
		sb_ok
		took=$(($(now_ms) - start))
		echo "$op: $took ms" >&3
		[ "$took" -lt 5000 ]
	done
	# the exec still runs
	run pgrep -f 'sleep 15'
	assert_success
}

@test "logs: --since, --follow, and a killed --follow client leaves the command running" {
	run_sb create --session bg4
	sb_ok
	run_sb exec bg4 --background -- sh -c 'for i in $(seq 1 60); do echo line$i; sleep 0.1; done'
	sb_ok '.handle == "bg-1"'
	box-sandbox logs bg4 bg-1 --follow >"$T/follow.out" 2>&1 &
	p=$!
	CLIENTS+=("$p")
	sleep 1
	kill -9 "$p"
	wait "$p" || true
	run_sb ps bg4
	sb_ok '.commands[0].state == "running"'
	run_sb wait bg4 bg-1 --timeout-ms 60000
	sb_ok '.state == "exited" and .exit_code == 0 and .signal == null and .log_bytes == 411 and
		.log_truncated == false'
	run_sb logs bg4 bg-1
	sb_ok '.offset == 0 and .next_offset == 411 and (.output | startswith("line1\n")) and
		(.output | endswith("line60\n")) and .state == "exited"'
	run_sb logs bg4 bg-1 --since 404
	sb_ok '.output == "line60\n" and .next_offset == 411'
	run_sb logs bg4 bg-1 --since 411
	sb_ok '.output == "" and .next_offset == 411'
	# the log is capped at disk_bytes / 64: 16 KiB of a session of 1 MiB
	run_sb create --session bg4c --disk-bytes 1048576
	sb_ok
	run_sb exec bg4c --background -- sh -c 'head -c 100000 /dev/zero | tr "\\0" x; echo done >&2'
	sb_ok
	run_sb wait bg4c bg-1
	sb_ok '.state == "exited" and .log_bytes == 16384 and .log_truncated == true'
	run_sb logs bg4c bg-1 --since 16000
	sb_ok '.output == ("x" * 384) and .next_offset == 16384'
	# a follow of a command that runs: output events, then the result once it has ended
	run_sb exec bg4 --background -- sh -c 'echo a; sleep 1; echo b >&2; sleep 1; echo c'
	sb_ok '.handle == "bg-2"'
	run_sb logs bg4 bg-2 --follow
	assert_equal "$status" 0
	jqe '[.] | length == 1' "$(tail -n 1 <<<"$output")"
	jqe '.ok == true and .state == "exited" and .next_offset == 6' "$(tail -n 1 <<<"$output")"
	assert_equal "$(head -n -1 <<<"$output" | jq -j 'select(.event == "stdout") | .data')" $'a\nb\nc'
	# a follow of a command that never ends stops at --timeout-ms (an agent's at its cap) with
	# where to go on; the command runs on
	run_sb exec bg4 --background -- sh -c 'echo first; exec sleep 1000'
	sb_ok '.handle == "bg-3"'
	local t0
	t0=$(now_ms)
	run_sb logs bg4 bg-3 --follow --timeout-ms 1500
	assert_equal "$status" 0
	jqe '.ok == true and .state == "running" and .next_offset == 6' "$(tail -n 1 <<<"$output")"
	[ $(($(now_ms) - t0)) -lt 20000 ]
	t0=$(now_ms)
	run --separate-stderr box-sandbox --json --session bg4 <<<'{"op":"logs","session":"bg4","handle":"bg-3","follow":true,"since":6,"timeout_ms":1000}'
	assert_equal "$status" 0
	jqe '.ok == true and .state == "running" and .next_offset == 6' "$(tail -n 1 <<<"$output")"
	[ $(($(now_ms) - t0)) -lt 20000 ]
	run_sb kill bg4 bg-3
	sb_ok
}

@test "a fork bomb in the background stays inside the pids limit, and the session still works" {
	run_sb create --session bg5 --pids 64
	sb_ok
	# every process forks again and again; a fork that fails is tried again
	run_sb exec bg5 --background -- python3 -c '
import os, time
while True:
    try:
        os.fork()
    except OSError:
        time.sleep(0.01)'
	sb_ok '.handle == "bg-1"'
	f=$(cg_file bg5 pids.current)
	max=$(cat "$(cg_file bg5 pids.max)")
	assert_equal "$max" 64
	for i in $(seq 20); do
		[ "$(cat "$f")" -le 64 ]
		sleep 0.2
	done
	run_sb ps bg5
	sb_ok '.commands[0].state == "running"'
	run_sb kill bg5 bg-1 --signal KILL
	sb_ok '.signal == "SIGKILL" and .sent == true'
	run_sb wait bg5 bg-1 --timeout-ms 30000
	sb_ok '.state == "killed" and .signal == "SIGKILL" and .exit_code == null'
	until_ok 30 bash -c "[ \$(cat $f) -lt 10 ]"
	run_sb exec bg5 -- echo still here
	sb_ok '.stdout == "still here\n"'
}

@test "a session whose background command runs is not idle: the idle timer leaves it running" {
	run_sb create --session bg10 --idle-pause-after-seconds 1
	sb_ok
	run_sb exec bg10 --background -- sleep 300
	sb_ok '.handle == "bg-1"'
	sleep 5
	run_sb status bg10
	sb_ok '.state == "running" and .observed == "running"'
	run_sb kill bg10 bg-1 --signal KILL
	sb_ok
	run_sb wait bg10 bg-1
	sb_ok '.state == "killed"'
	# with nothing running it is idle again
	until_ok 30 bash -c "box-sandbox status bg10 | jq -e '.observed == \"paused\"'"
}

@test "wait with a timeout, kill with a signal" {
	run_sb create --session bg6
	sb_ok
	run_sb exec bg6 --background -- sleep 300
	sb_ok '.handle == "bg-1"'
	start=$(now_ms)
	run_sb wait bg6 bg-1 --timeout-ms 500
	assert_fail timeout 3
	took=$(($(now_ms) - start))
	[ "$took" -ge 500 ] && [ "$took" -lt 10000 ]
	state_is bg6 bg-1 running
	run_sb kill bg6 bg-1
	sb_ok '.handle == "bg-1" and .signal == "SIGTERM" and .sent == true'
	run_sb wait bg6 bg-1 --timeout-ms 30000
	sb_ok '.state == "killed" and .signal == "SIGTERM" and .exit_code == null and
		(.finished_at | type == "string")'
	# a command that handles the signal and exits on its own has exited
	run_sb exec bg6 --background -- sh -c 'trap "echo got HUP; exit 7" HUP; while :; do sleep 0.1; done'
	sb_ok '.handle == "bg-2"'
	sleep 1
	run_sb kill bg6 bg-2 --signal 1
	sb_ok '.signal == "SIGHUP"'
	run_sb wait bg6 bg-2 --timeout-ms 30000
	sb_ok '.state == "exited" and .exit_code == 7'
	run_sb logs bg6 bg-2
	sb_ok '.output | endswith("got HUP\n")'
	# an exit of its own, and its status
	run_sb exec bg6 --background --env X=5 -- sh -c 'exit $X'
	sb_ok '.handle == "bg-3"'
	run_sb wait bg6 bg-3
	sb_ok '.state == "exited" and .exit_code == 5'
}

@test "schedule runs while the session runs, skips a run still going; unschedule stops it" {
	run_sb create --session bg7
	sb_ok
	run_sb schedule bg7 --every 1 -- sh -c 'echo tick >> /workspace/ticks'
	sb_ok '.handle == "sched-1" and .every == 1'
	ticks=$BOX_STATE_DIR/sandboxes/bg7/workspace/ticks
	until_ok 30 bash -c "[ \$(cat $ticks 2>/dev/null | wc -l) -ge 2 ]"
	run_sb ps bg7
	sb_ok '.schedules[0].handle == "sched-1" and .schedules[0].runs >= 2 and
		(.schedules[0] | has("env") | not) and
		([.commands[] | select(.schedule == "sched-1")] | length >= 2)'
	# each run has its own log
	h=$(jq -r '[.commands[] | select(.schedule == "sched-1")][0].handle' <<<"$output")
	run_sb logs bg7 "$h"
	sb_ok '.schedule == "sched-1"'
	run_sb unschedule bg7 sched-1
	sb_ok '.unscheduled == true and .handle == "sched-1"'
	sleep 1.5
	n=$(wc -l <"$ticks")
	sleep 3
	assert_equal "$(wc -l <"$ticks")" "$n"
	run_sb ps bg7
	sb_ok '.schedules == []'
	# a run that still goes makes the next ones skipped
	run_sb schedule bg7 --every 1 --command 'sleep 30'
	sb_ok '.handle == "sched-2"'
	until_ok 30 bash -c "box-sandbox ps bg7 | jq -e '.schedules[0].skipped >= 2'"
	run_sb ps bg7
	sb_ok '.schedules[0].runs == 1'
	# paused, nothing runs
	run_sb unschedule bg7 sched-2
	sb_ok
	run_sb schedule bg7 --every 4 -- sh -c 'echo tock >> /workspace/tocks'
	sb_ok '.handle == "sched-3"'
	run_sb pause bg7
	sb_ok
	sleep 6
	[ ! -e "$BOX_STATE_DIR/sandboxes/bg7/workspace/tocks" ]
}

@test "bad input: exact error, exit status, and nothing started or left" {
	run_sb create --session bg8
	sb_ok
	for h in bg-99 sched-99; do
		for op in logs wait kill; do
			[ "$h" = sched-99 ] && continue
			run_sb "$op" bg8 "$h"
			assert_fail not_found 6 '.error.path == "$.handle"'
		done
	done
	for h in foo bg-0 bg- bg-01 ../x bg-1x; do
		run_sb logs bg8 "$h"
		assert_fail invalid_request 2 '.error.path == "$.handle"'
	done
	run_sb unschedule bg8 sched-99
	assert_fail not_found 6 '.error.path == "$.handle"'
	run_sb unschedule bg8 bg-1
	assert_fail invalid_request 2 '.error.path == "$.handle"'
	run_sb logs nosuch bg-1
	assert_fail not_found 6
	run_sb ps nosuch
	assert_fail not_found 6
	[ ! -e "$BOX_STATE_DIR/sandboxes/nosuch" ]
	run_sb exec bg8 --background -- sleep 300
	sb_ok '.handle == "bg-1"'
	for s in FOO 0 65 SIG 99999 KILLX; do
		run_sb kill bg8 bg-1 --signal "$s"
		assert_fail invalid_request 2 '.error.path == "$.signal"'
	done
	state_is bg8 bg-1 running
	for e in 0 -1 86401 abc; do
		run_sb schedule bg8 --every "$e" -- true
		assert_fail usage 2
	done
	run_sb schedule bg8 -- true
	assert_fail usage 2
	run_sb schedule bg8 --every 5
	assert_fail usage 2
	run_sb exec bg8 --background --stdin x -- cat
	assert_fail usage 2 '.ran == false and .error.path == "$.stdin"'
	run_sb exec bg8 --background --events -- true
	assert_fail usage 2 '.ran == false'
	run_sb ps bg8
	sb_ok '(.commands | length) == 1 and .schedules == []'
	# 32 at once, no more
	# (bats' run sets i: the loops that call it count with their own names)
	for nth in $(seq 2 32); do
		run_sb exec bg8 --background -- sleep 300
		sb_ok ".handle == \"bg-$nth\""
	done
	run_sb exec bg8 --background -- touch /workspace/never
	assert_fail limit_exceeded 3 '.ran == false'
	[ ! -e "$(jobs_dir bg8)/bg-33.json" ] && [ ! -e "$(jobs_dir bg8)/bg-33.log" ]
	[ ! -e "$BOX_STATE_DIR/sandboxes/bg8/workspace/never" ]
	run_sb ps bg8
	sb_ok '[.commands[] | select(.state == "running")] | length == 32'
	# one ends: room for one more
	run_sb kill bg8 bg-5 --signal KILL
	sb_ok
	run_sb wait bg8 bg-5
	sb_ok '.state == "killed"'
	run_sb kill bg8 bg-5
	assert_fail conflict 7
	run_sb exec bg8 --background -- true
	sb_ok '.handle == "bg-33"'
	# 16 schedules, no more
	for nth in $(seq 16); do
		run_sb schedule bg8 --every 3600 -- true
		sb_ok ".handle == \"sched-$nth\""
	done
	run_sb schedule bg8 --every 3600 -- true
	assert_fail limit_exceeded 3
	[ ! -e "$(jobs_dir bg8)/sched-17.json" ]
}

@test "background and schedule are the operator's: refused to an agent, offered when granted" {
	BOX_PROG=box-sandbox
	run -0 box-sandbox create --session bg9
	for req in '{"op": "exec", "session": "bg9", "argv": ["touch", "/workspace/pwned"], "background": true}' \
		'{"op": "schedule", "session": "bg9", "argv": ["touch", "/workspace/pwned"], "every": 1}'; do
		run --separate-stderr box-sandbox --json --session bg9 <<<"$req"
		assert_fail policy_denied 4
	done
	run --separate-stderr box-sandbox --json --session bg9 \
		<<<'{"op": "exec", "session": "bg9", "argv": ["true"], "background": true}'
	one_json_where '.error.path == "$.background"'
	sleep 2
	[ ! -e "$BOX_STATE_DIR/sandboxes/bg9/workspace/pwned" ]
	[ ! -e "$(jobs_dir bg9)" ] || [ -z "$(ls -A "$(jobs_dir bg9)")" ]
	# nor may it remove the operator's schedules
	run -0 box-sandbox schedule bg9 --every 3600 -- true
	run --separate-stderr box-sandbox --json --session bg9 \
		<<<'{"op": "unschedule", "session": "bg9", "handle": "sched-1"}'
	assert_fail policy_denied 4
	run_sb ps bg9
	sb_ok '.schedules[0].handle == "sched-1"'
	run -0 box-sandbox --describe
	jqe '.input_schema.properties | has("background") or has("every") | not'
	jqe '.input_schema.properties | has("handle") and has("signal") and has("since") and has("follow")'
	# granted by the policy: offered and accepted
	echo '{"box-sandbox": {"grant": ["background"]}}' >"$T/p.json"
	run -0 box-sandbox --describe --policy "$T/p.json"
	jqe '.input_schema.properties | has("background") and (has("every") | not)'
	run --separate-stderr box-sandbox --json --session bg9 --policy "$T/p.json" \
		<<<'{"op": "exec", "session": "bg9", "argv": ["sleep", "300"], "background": true}'
	sb_ok '.handle == "bg-1" and .ran == true'
	# what the agent may do with it
	run --separate-stderr box-sandbox --json --session bg9 \
		<<<'{"op": "kill", "session": "bg9", "handle": "bg-1", "signal": "KILL"}'
	sb_ok '.sent == true'
	run --separate-stderr box-sandbox --json --session bg9 \
		<<<'{"op": "wait", "session": "bg9", "handle": "bg-1"}'
	sb_ok '.state == "killed"'
}
