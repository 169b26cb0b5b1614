#!/usr/bin/env bats
# box-sandbox: a hostile guest against how an exec's result and its /output listing are made.
# The exec result (exit_code, signal, stdout, stderr) is always printed; a /output the host
# cannot list is an output_error beside it, and the whole call stays within timeout_ms plus
# a fixed overhead whatever the guest leaves in /output.

load helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root (cgroups and namespaces as set up in CI)"
	sb_setup
}

teardown() {
	if [ -n "${NOBODY_DIR:-}" ]; then
		nobody_sb delete n1 >/dev/null 2>&1 || true
		rm -rf "$NOBODY_DIR"
	fi
	sb_teardown
}

# mk ID [CREATE-FLAG...]: a session
mk() {
	local id=$1
	shift
	run_sb create --session "$id" "$@"
	sb_ok
}

# took_ms START: milliseconds since START (now_ms)
took_ms() {
	echo $(($(now_ms) - $1))
}

# output_failed STATUS CODE LIMIT: the command succeeded (exit_code 0, EVIDENCE on stdout),
# the listing did not: ok false, outputs [], output_error and error both CODE (and LIMIT
# when not empty), exit STATUS, one line on stderr naming CODE.
output_failed() {
	local want=$1 code=$2 limit=$3
	assert_equal "$status" "$want"
	one_json_where '.ok == false and .exit_code == 0 and .signal == null
		and .stdout == "EVIDENCE\n" and .outputs == [] and .output_error.code == $code
		and (.output_error.message | length > 0) and .error == .output_error
		and ($limit == "" or .output_error.limit == $limit)' --arg code "$code" --arg limit "$limit"
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "^box-sandbox: $code: ."
}

# nobody_sb ARG...: box-sandbox as uid 65534 (an ordinary user: rlimit mode, the guest's
# root is that user on the host), with a state directory of its own
nobody_sb() {
	(cd / && setpriv --reuid 65534 --regid 65534 --clear-groups env HOME="$NOBODY_DIR" \
		BOX_STATE_DIR="$NOBODY_DIR/state" box-sandbox "$@")
}

@test "a tree 70 and 200 levels deep: the result is printed, output_error depth, exit 3" {
	mk d1
	for n in 70 200; do
		run_sb exec d1 -- sh -c "echo EVIDENCE; mkdir -p /output/\$(seq -s/ $n)"
		output_failed 3 limit_exceeded depth
		jqe '.output_error.configured == 64 and .resource_limit == null'
	done
	# 64 levels are listed
	run_sb exec d1 -- sh -c 'mkdir -p /output/$(seq -s/ 63) && echo x > /output/$(seq -s/ 63)/f'
	sb_ok '.outputs == [{"path": (([range(1; 64) | tostring] | join("/")) + "/f"), "size": 2,
		"sha256": "'"$(printf 'x\n' | sha256sum | cut -d' ' -f1)"'"}]'
	# the next exec empties /output and lists it
	run_sb exec d1 -- sh -c 'echo EVIDENCE; ls -A /output | wc -l'
	sb_ok '.stdout == "EVIDENCE\n0\n" and .outputs == []'
}

@test "the command's own failure comes first: guest_error, timeout; the output_error stays beside it" {
	mk d2
	run_sb exec d2 -- sh -c 'echo EVIDENCE; mkdir -p /output/$(seq -s/ 70); exit 5'
	assert_fail guest_error 1 '.exit_code == 5 and .stdout == "EVIDENCE\n" and .outputs == []
		and .output_error.code == "limit_exceeded" and .output_error.limit == "depth"'
	run_sb exec d2 --timeout-ms 1500 -- sh -c 'echo EVIDENCE; mkdir -p /output/$(seq -s/ 70); sleep 100'
	assert_fail timeout 3 '.signal == "SIGKILL" and .resource_limit == "timeout"
		and .stdout == "EVIDENCE\n" and .output_error.limit == "depth"'
	run_sb exec d2 -- sh -c 'echo EVIDENCE >&2; mkdir -p /output/$(seq -s/ 70); kill -TERM $$'
	assert_fail guest_error 1 '.signal == "SIGTERM" and .stderr == "EVIDENCE\n"
		and .output_error.limit == "depth"'
}

@test "a path over 4096 bytes: output_error path_length, exit 3" {
	mk p1
	# 18 names of 250 bytes and a file: 4519 bytes, more than one system call takes, made
	# in two steps of 9 levels
	run_sb exec p1 -- sh -c 'echo EVIDENCE; d=$(printf "a%.0s" $(seq 250)); p=$d;
		for i in $(seq 8); do p=$p/$d; done; cd /output && mkdir -p $p && cd $p &&
		mkdir -p $p && echo x > $p/f'
	output_failed 3 limit_exceeded path_length
	jqe '.output_error.configured == 4096'
	# 16 levels and a file, 4017 bytes: listed
	run_sb exec p1 -- sh -c 'd=$(printf "a%.0s" $(seq 250)); p=$d;
		for i in $(seq 7); do p=$p/$d; done; cd /output && mkdir -p $p && cd $p &&
		mkdir -p $p && echo x > $p/f'
	sb_ok '(.outputs | length) == 1 and (.outputs[0].path | length) == 4017'
}

@test "10,000 files are listed; 10,001 and 50,000 are output_error files, exit 3" {
	mk f1 --timeout-ms 120000
	run_sb exec f1 -- sh -c 'cd /output && seq 10000 | xargs touch'
	sb_ok '(.outputs | length) == 10000 and all(.outputs[]; .size == 0)'
	for n in 10001 50000; do
		run_sb exec f1 -- sh -c "echo EVIDENCE; cd /output && seq $n | xargs touch"
		output_failed 3 limit_exceeded files
		jqe '.output_error.configured == 10000'
	done
	# a directory counts as an entry too
	run_sb exec f1 -- sh -c 'echo EVIDENCE; mkdir /output/d && cd /output/d && seq 10000 | xargs touch'
	output_failed 3 limit_exceeded files
}

@test "FIFOs and sockets are never opened: left out, the listing ends at once" {
	mk s1 --timeout-ms 30000
	local start
	start=$(now_ms)
	run_sb exec s1 -- sh -c 'mkfifo /output/fifo /output/fifo2; mkdir /output/d; mkfifo /output/d/f;
		python3 -c "import socket; s = socket.socket(socket.AF_UNIX); s.bind(\"/output/sock\")";
		test -p /output/fifo && test -S /output/sock && echo x > /output/file && echo EVIDENCE'
	sb_ok '.stdout == "EVIDENCE\n" and (.outputs | map(.path)) == ["file"]'
	[ "$(took_ms "$start")" -lt 20000 ]
	# a FIFO whose writer is still there when the command ends
	run_sb exec s1 -- sh -c 'mkfifo /output/p; (exec 3>/output/p; sleep 100) & echo x > /output/file'
	sb_ok '(.outputs | map(.path)) == ["file"]'
}

@test "chmod 000 directories and files: listed as root; as uid 65534 output_error io_error beside the result" {
	local x
	x=$(printf 'x\n' | sha256sum | cut -d' ' -f1)
	mk c1
	run_sb exec c1 -- sh -c 'mkdir -p /output/d/e; echo x > /output/d/e/f; echo x > /output/g;
		chmod 000 /output/d/e/f /output/d/e /output/d /output/g; echo EVIDENCE'
	sb_ok '.stdout == "EVIDENCE\n" and (.outputs | map(.path)) == ["d/e/f", "g"]
		and all(.outputs[]; .sha256 == "'"$x"'")'

	NOBODY_DIR=$(mktemp -d /tmp/box-output-nobody.XXXXXX)
	chown 65534:65534 "$NOBODY_DIR"
	local what
	# a file box cannot read: the listing fails, the command's result stays
	run --separate-stderr nobody_sb exec n1 -- sh -c 'echo x > /output/f; chmod 000 /output/f; echo EVIDENCE'
	output_failed 8 io_error ""
	jqe '.limits_enforced_by == "rlimit" and (.output_error.message | test("Permission denied"))'
	# a directory box cannot read: the disk walk cannot measure it either, so the limit fails
	# closed first (exit 3); the listing's io_error is still beside the command's result
	for what in 'mkdir -p /output/d/e; echo x > /output/d/e/f; chmod 000 /output/d' \
		'mkdir -p /output/d/e; echo x > /output/d/e/f; chmod 000 /output/d/e'; do
		run --separate-stderr nobody_sb exec n1 -- sh -c "$what; echo EVIDENCE"
		assert_equal "$status" 3
		one_json_where '.ok == false and .exit_code == 0 and .stdout == "EVIDENCE\n"
			and .resource_limit == "disk" and .error.code == "limit_exceeded"
			and .error.limit == "disk" and (.disk_unmeasured | test("Permission denied"))
			and .outputs == [] and .output_error.code == "io_error"
			and (.output_error.message | test("Permission denied"))'
	done
	# the next exec still runs and lists
	run --separate-stderr nobody_sb exec n1 -- sh -c 'echo x > /output/f'
	sb_ok '.outputs == [{"path": "f", "size": 2, "sha256": "'"$x"'"}]'
}

@test "symlink loops and links out are listed as links, never followed" {
	mk l1
	run_sb exec l1 -- sh -c 'cd /output; ln -s loop loop; ln -s a b; ln -s b a; mkdir d;
		ln -s .. d/up; ln -s /output self; ln -s /proc/self/root root; echo EVIDENCE'
	sb_ok '.stdout == "EVIDENCE\n" and .outputs == ([ "a", "b", "d/up", "loop", "root", "self" ]
		| map({"path": ., "type": "symlink"}))'
}

@test "a 512 MiB sparse file with 60 hard links is hashed once: the call ends well within its bound" {
	# measured on a loaded 2-core machine: 23.5 s before (every name hashed), 2.1 s after
	mk h1 --disk-bytes 1000000000000000
	local start took
	start=$(now_ms)
	run_sb exec h1 --timeout-ms 2000 -- sh -c 'truncate -s 512M /output/big;
		for i in $(seq 60); do ln /output/big /output/l$i; done'
	took=$(took_ms "$start")
	sb_ok '(.outputs | length) == 61 and all(.outputs[]; .size == 536870912)
		and (.outputs | map(.sha256) | unique | length) == 1'
	echo "took $took ms" >&2
	[ "$took" -lt 12000 ]
}

@test "a 60 GiB sparse file with 24 links: output_error bytes from its size alone, at once" {
	mk h2 --disk-bytes 1000000000000000
	local start
	start=$(now_ms)
	run_sb exec h2 --timeout-ms 2000 -- sh -c 'echo EVIDENCE; truncate -s 60G /output/big;
		for i in $(seq 24); do ln /output/big /output/l$i; done'
	output_failed 3 limit_exceeded bytes
	jqe '.output_error.configured == 1073741824 and .output_error.unit == "bytes"'
	[ "$(took_ms "$start")" -lt 18000 ]
	# distinct files count together: two of 600 MiB pass the bound, one alone does not
	run_sb exec h2 -- sh -c 'echo EVIDENCE; truncate -s 600M /output/a /output/b'
	output_failed 3 limit_exceeded bytes
	run_sb exec h2 -- sh -c 'truncate -s 600M /output/a; ln /output/a /output/b'
	sb_ok '(.outputs | length) == 2'
}

@test "a listing helper that never answers is killed after 10 s; the call stays within timeout_ms + 16 s" {
	mk k1
	mkdir "$T/libexec"
	cat >"$T/libexec/box-sbfiles" <<-EOF
		#!/bin/sh
		# a box-sbfiles whose listing never ends
		if [ "\$1" = outputs ]; then
			sleep 600 &
			echo \$! > "$T/sleep.pid"
			wait
		fi
		exec "$BOX_BUILDDIR/box-sbfiles" "\$@"
	EOF
	chmod +x "$T/libexec/box-sbfiles"
	local start took
	start=$(now_ms)
	BOX_LIBEXEC_DIR=$T/libexec run_sb exec k1 --timeout-ms 2000 -- sh -c 'echo EVIDENCE; echo x > /output/f'
	took=$(took_ms "$start")
	output_failed 3 timeout outputs_ms
	jqe '.output_error.configured == 10000 and .output_error.unit == "ms"'
	echo "took $took ms" >&2
	[ "$took" -ge 9500 ] && [ "$took" -lt $((2000 + 16000)) ]
	# the helper's whole process group is gone
	local pid
	pid=$(cat "$T/sleep.pid")
	! kill -0 "$pid" 2>/dev/null
	# the session goes on with the real helper
	run_sb exec k1 -- sh -c 'echo x > /output/f'
	sb_ok '(.outputs | map(.path)) == ["f"]'
}

@test "per-exec cpu_ms and max_output_bytes apply to that exec only" {
	mk x1 --timeout-ms 60000
	local start
	start=$(now_ms)
	run_sb exec x1 --timeout-ms 30000 --cpu-ms 500 -- sh -c 'while :; do :; done'
	assert_limit limit_exceeded cpu 500 ms '.resource_limit == "cpu"'
	[ "$(took_ms "$start")" -lt 20000 ]
	run_sb exec x1 --max-output-bytes 10 -- seq 1000
	sb_ok '(.stdout | startswith("1\n2\n3\n[box-sandbox: ") and endswith("]\n1000\n"))
		and .truncated == true and .total_lines == 1000'
	# the session's own are untouched
	run_sb exec x1 -- sh -c 'seq 1000 | wc -l'
	sb_ok '.stdout == "1000\n" and .truncated == false'
	run_sb exec x1 -- seq 3000
	sb_ok '.truncated == false and (.stdout | length) > 10000'
	# a session's cpu_ms can be raised by one exec
	mk x2 --cpu-ms 200
	run_sb exec x2 --cpu-ms 60000 -- sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo done'
	sb_ok '.stdout == "done\n"'
}

@test "memory, pids, disk_bytes and idle_pause_after_seconds that differ from the session's are invalid_request; nothing runs" {
	mk y1 --memory 268435456 --pids 64 --disk-bytes 33554432 --idle-pause-after-seconds 600
	local flag key
	for flag in '--memory 268435457' '--pids 65' '--disk-bytes 33554433' \
		'--idle-pause-after-seconds 0'; do
		key=${flag%% *}
		key=${key#--}
		# shellcheck disable=SC2086 # the flag and its value
		run_sb exec y1 $flag -- sh -c 'echo ran >> /workspace/ran'
		assert_fail invalid_request 2 ".error.path == \"\$.${key//-/_}\""
		[ ! -e "$BOX_STATE_DIR/sandboxes/y1/workspace/ran" ]
	done
	run --separate-stderr box-sandbox --json --trust-request <<<'{"op": "exec", "session": "y1",
		"memory": 1048576, "argv": ["touch", "/workspace/ran"]}'
	assert_fail invalid_request 2 '.error.path == "$.memory"'
	[ ! -e "$BOX_STATE_DIR/sandboxes/y1/workspace/ran" ]
	# the session's own values are accepted
	run_sb exec y1 --memory 268435456 --pids 64 --disk-bytes 33554432 --idle-pause-after-seconds 600 -- true
	sb_ok
	# an exec that creates its session sets them
	run_sb exec y2 --memory 134217728 -- true
	sb_ok '.created == true'
	run_sb status y2
	sb_ok '.limits.memory == 134217728'
	run_sb exec y2 --memory 134217728 -- true
	sb_ok
}

@test "--events streams at most max_output_bytes of each stream" {
	mk v1 --max-output-bytes 4096
	box-sandbox exec v1 --events -- sh -c 'head -c 20000000 /dev/zero | tr "\0" a;
		head -c 20000000 /dev/zero | tr "\0" b >&2' >"$T/events" 2>"$T/err"
	[ "$(stat -c %s "$T/events")" -lt 100000 ]
	jq -s -e '(map(select(.event == "stdout") | .data) | add) == ("a" * 4096)
		and (map(select(.event == "stderr") | .data) | add) == ("b" * 4096)
		and (last | .event == "result" and .ok == true and .truncated == true)' "$T/events" >/dev/null
	# an exec's own max_output_bytes bounds its events
	run_sb exec v1 --events --max-output-bytes 5 -- sh -c 'seq 100000'
	assert_equal "$status" 0
	jq -s -e '(map(select(.event == "stdout") | .data) | add) == "1\n2\n3"
		and (last | .event == "result" and .ok == true
			and (.stdout | startswith("1\n2\n[box-sandbox: ") and endswith("]\n0\n")))' <<<"$output" >/dev/null
}

@test "full-output logs: exactly 16 kept, each at most min(256 MiB, disk_bytes / 16)" {
	mk g1 --max-output-bytes 10 --disk-bytes 16777216
	local k first last
	for k in $(seq 20); do
		run_sb exec g1 -- seq 100
		sb_ok '.truncated == true and (.full_output_path | type == "string")'
		[ "$k" = 1 ] && first=$(jq -r .full_output_path <<<"$output")
		last=$(jq -r .full_output_path <<<"$output")
	done
	assert_equal "$(find "$BOX_STATE_DIR/sandboxes/g1/logs" -name 'exec-*.log' | wc -l)" 16
	[ ! -e "$first" ] && [ -s "$last" ]
	assert_equal "$(cat "$last")" "$(seq 100)"
	# 5 MiB written, the log holds 1 MiB (16 MiB / 16)
	run_sb exec g1 -- sh -c 'head -c 5242880 /dev/zero'
	sb_ok '.truncated == true and .full_output_truncated == true'
	assert_equal "$(stat -c %s "$(jq -r .full_output_path <<<"$output")")" 1048576
	assert_equal "$(find "$BOX_STATE_DIR/sandboxes/g1/logs" -name 'exec-*.log' | wc -l)" 16
}
