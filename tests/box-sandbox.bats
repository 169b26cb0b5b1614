#!/usr/bin/env bats
# box-sandbox: the session lifecycle (create, exec, pause/resume, lost and replaced, init,
# snapshot/restore, delete, list), the exec result (outputs, caps, events), inputs, mounts,
# environment and the file API, with real namespaces.

load helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root (cgroups and namespaces as set up in CI)"
	sb_setup
}

teardown() {
	sb_teardown
}

@test "create, exec, status: running" {
	run_sb create --session s1 --timeout-ms 5000
	sb_ok '.session == "s1" and .provider == "local" and .state == "running" and .created == true
		and .limits.timeout_ms == 5000'
	[ -f "$BOX_STATE_DIR/sandboxes/s1/state.json" ]
	kill -0 "$(sb_holder s1)"
	run_sb exec s1 -- sh -c 'echo out; echo err >&2; exit 0'
	sb_ok '.exit_code == 0 and .signal == null and .stdout == "out\n" and .stderr == "err\n"
		and .truncated == false and .total_lines == 2 and .resource_limit == null
		and .session == "s1" and (.duration_ms | type == "number")'
	run_sb exec s1 --command 'echo hi; exit 3'
	assert_fail guest_error 1 '.exit_code == 3 and .stdout == "hi\n"'
	run_sb status s1
	sb_ok '.state == "running" and .observed == "running"'
}

@test "create with an existing id is conflict, exit 7" {
	run_sb create --session s1
	sb_ok
	run_sb create --session s1
	assert_fail conflict 7
}

@test "create without --session generates an id" {
	run_sb create
	sb_ok '.session | test("^[a-z0-9][a-z0-9_-]{0,63}$")'
	id=$(jq -r .session <<<"$output")
	[ -f "$BOX_STATE_DIR/sandboxes/$id/state.json" ]
	run_sb status "$id"
	sb_ok '.observed == "running"'
}

@test "exec on an absent session creates it" {
	run_sb exec n1 -- echo made
	sb_ok '.stdout == "made\n" and .created == true'
	run_sb status n1
	sb_ok '.state == "running" and .observed == "running"'
}

@test "pause: status paused; exec on the paused sandbox resumes it" {
	run_sb create --session p1
	sb_ok
	run_sb pause p1
	sb_ok '.state == "paused"'
	run_sb status p1
	sb_ok '.state == "paused" and .observed == "paused"'
	run_sb exec p1 -- echo back
	sb_ok '.stdout == "back\n" and .resumed == true'
	run_sb status p1
	sb_ok '.state == "running" and .observed == "running"'
	run_sb resume p1
	sb_ok '.state == "running"'
}

@test "idle pause: an idle sandbox pauses by itself" {
	run_sb create --session i1 --idle-pause-after-seconds 1
	sb_ok '.limits.idle_pause_after_seconds == 1'
	sleep 3.5
	run_sb status i1
	sb_ok '.state == "paused" and .observed == "paused"'
	run_sb exec i1 -- true
	sb_ok '.resumed == true'
}

@test "holder killed: status lost, next exec replaces it keeping the workspace" {
	run_sb create --session l1
	sb_ok
	run_sb write l1 keep.txt --content kept
	sb_ok
	h=$(sb_holder l1)
	kill -9 "$h"
	for _ in $(seq 50); do kill -0 "$h" 2>/dev/null || break; sleep 0.1; done
	run_sb status l1
	sb_ok '.state == "lost" and .observed == "absent"'
	run_sb exec l1 -- cat keep.txt
	sb_ok '.stdout == "kept" and .replaced == true'
	[ "$(sb_holder l1)" != "$h" ]
	run_sb status l1
	sb_ok '.state == "running" and .observed == "running"'
}

@test "init commands run once and init_completed_at is set" {
	run_sb create --session c1 --init 'echo x >> /workspace/count' --init 'echo y >> /workspace/count'
	sb_ok '.init_completed_at != null and .last_init_error == null'
	run_sb exec c1 -- cat count
	sb_ok '.stdout == "x\ny\n"'
	run_sb exec c1 -- cat count
	sb_ok '.stdout == "x\ny\n"'
	run_sb status c1
	sb_ok '.init_completed_at | type == "string"'
}

@test "a failing init records last_init_error and is retried on the next exec" {
	mkdir "$T/flag"
	run_sb create --session c2 --mount "$T/flag:/flag:ro" \
		--init 'echo x >> /workspace/count' --init 'test -f /flag/ok'
	assert_fail guest_error 1 '.error.message | contains("init command 2")'
	run_sb status c2
	sb_ok '.init_completed_at == null and (.last_init_error | contains("init command 2"))'
	touch "$T/flag/ok"
	run_sb exec c2 -- cat count
	sb_ok '.stdout == "x\nx\n"'
	run_sb status c2
	sb_ok '(.init_completed_at | type == "string") and .last_init_error == null'
	run_sb exec c2 -- cat count
	sb_ok '.stdout == "x\nx\n"'
}

@test "another provider than the session's is conflict, exit 7" {
	run_sb create --session m1
	sb_ok
	run_sb exec m1 --provider other -- true
	assert_fail conflict 7
	run_sb status m1
	sb_ok '.provider == "local"'
}

@test "concurrent execs on one session run side by side; pause waits for them" {
	run_sb create --session k1
	sb_ok
	cmd='echo "$0 start $(date +%s%N)" >> /workspace/log; sleep 3; echo "$0 end $(date +%s%N)" >> /workspace/log'
	box-sandbox exec k1 -- sh -c "$cmd" A >"$T/a.json" 2>&1 &
	pa=$!
	box-sandbox exec k1 -- sh -c "$cmd" B >"$T/b.json" 2>&1 &
	pb=$!
	wait "$pa"
	wait "$pb"
	jqe '.ok == true' "$(cat "$T/a.json")"
	jqe '.ok == true' "$(cat "$T/b.json")"
	run -0 box-sandbox read k1 log
	# side by side: both started before either ended
	jqe '.content | split("\n") | map(select(length > 0) | split(" ")) |
		length == 4 and .[0][1] == "start" and .[1][1] == "start" and .[0][0] != .[1][0]
		and .[2][1] == "end" and .[3][1] == "end"'
	# pause takes the session's instance lock exclusive: it waits for the running exec
	box-sandbox exec k1 -- sh -c 'sleep 3; echo done > /workspace/done; echo done' >"$T/c.json" 2>&1 &
	pc=$!
	sleep 1
	[ ! -e "$BOX_STATE_DIR/sandboxes/k1/workspace/done" ]
	run_sb pause k1
	sb_ok '.state == "paused"'
	[ -e "$BOX_STATE_DIR/sandboxes/k1/workspace/done" ]
	wait "$pc"
	jqe '.ok == true and .stdout == "done\n"' "$(cat "$T/c.json")"
}

@test "snapshot, change, restore brings the old content back" {
	run_sb create --session r1
	sb_ok
	run_sb write r1 f.txt --content old
	sb_ok
	run_sb snapshot r1
	sb_ok '.digest | test("^sha256:[0-9a-f]{64}$")'
	digest=$(jq -r .digest <<<"$output")
	run_sb write r1 f.txt --content new
	sb_ok
	run_sb exec r1 -- sh -c 'echo extra > extra.txt'
	sb_ok
	run_sb restore r1 "$digest"
	sb_ok
	run_sb read r1 f.txt
	sb_ok '.content == "old"'
	run_sb exec r1 -- sh -c 'test ! -e extra.txt'
	sb_ok
}

@test "restoring one snapshot into two sessions gives identical trees" {
	run_sb create --session r1
	sb_ok
	run_sb exec r1 -- sh -c 'mkdir -p d/e; echo 1 > a; echo 2 > d/b; echo 3 > d/e/c; ln -s a d/ln'
	sb_ok
	run_sb snapshot r1
	sb_ok
	digest=$(jq -r .digest <<<"$output")
	run_sb create --session r2
	sb_ok
	run_sb restore r2 "$digest" --from r1
	sb_ok
	tree='find . | sort; find . -type f | sort | xargs sha256sum; find . -type l | sort | xargs readlink'
	a=$(sb_stdout r1 --command "$tree")
	b=$(sb_stdout r2 --command "$tree")
	[ -n "$a" ]
	assert_equal "$b" "$a"
	[[ $a == *./d/e/c* ]]
}

@test "delete removes the state dir and ends the holder" {
	run_sb create --session d1
	sb_ok
	h=$(sb_holder d1)
	kill -0 "$h"
	run_sb delete d1
	sb_ok
	[ ! -e "$BOX_STATE_DIR/sandboxes/d1" ]
	for _ in $(seq 30); do kill -0 "$h" 2>/dev/null || break; sleep 0.1; done
	run ! kill -0 "$h"
	run_sb status d1
	assert_fail not_found 6
}

@test "delete while paused works" {
	run_sb create --session d2
	sb_ok
	h=$(sb_holder d2)
	run_sb pause d2
	sb_ok
	run_sb delete d2
	sb_ok
	[ ! -e "$BOX_STATE_DIR/sandboxes/d2" ]
	for _ in $(seq 30); do kill -0 "$h" 2>/dev/null || break; sleep 0.1; done
	run ! kill -0 "$h"
}

@test "exec into a faked state file never touches the host process it names" {
	run_sb create --session fk
	sb_ok
	sleep 100 &
	victim=$!
	f=$BOX_STATE_DIR/sandboxes/fk/state.json
	kill -9 "$(sb_holder fk)"
	jq --argjson p "$victim" '.provider_data.holder.pid = $p | .provider_data.holder.start = 12345
		| .state = "running"' "$f" >"$T/st.json"
	cp "$T/st.json" "$f"
	run_sb exec fk -- sh -c 'readlink /proc/self/ns/pid /proc/self/ns/mnt; ps -e -o comm'
	kill -0 "$victim"
	if [ "$status" = 0 ]; then
		refute_output --partial "$(readlink /proc/$victim/ns/pid)"
		refute_output --partial "$(readlink /proc/$victim/ns/mnt)"
		jqe '(.stdout | contains("sleep") | not) and (.replaced == true or .created == true)'
	else
		one_json_where '.ok == false and (.error.code | IN("not_found", "conflict", "provider_error", "io_error"))'
	fi
	run_sb delete fk
	kill -0 "$victim"
	kill "$victim"
}

@test "exec into a garbage state file is a clean error or a fresh sandbox" {
	mkdir -p "$BOX_STATE_DIR/sandboxes/gb"
	printf '{"id": "gb", "provider": "local", "garbage' >"$BOX_STATE_DIR/sandboxes/gb/state.json"
	run_sb exec gb -- echo hi
	if [ "$status" = 0 ]; then
		sb_ok '.stdout == "hi\n"'
	else
		one_json_where '.ok == false and (.error.code | IN("io_error", "internal", "invalid_request",
			"conflict", "not_found"))'
		[ "${#stderr_lines[@]}" = 1 ]
		[[ $stderr == "box-sandbox: "* ]]
	fi
}

@test "list shows the sessions" {
	run_sb list
	sb_ok '.sessions == []'
	run_sb create --session la
	run_sb create --session lb
	run_sb pause lb
	run_sb list
	sb_ok '[.sessions[] | {session, state}] | sort_by(.session) ==
		[{"session": "la", "state": "running"}, {"session": "lb", "state": "paused"}]'
}

@test "--json requests" {
	# the command line (--session) binds the agent's requests to one session
	run --separate-stderr box-sandbox --json --session j1 <<<'{"op": "create", "session": "j1", "timeout_ms": 4000}'
	sb_ok '.session == "j1" and .limits.timeout_ms == 4000'
	run --separate-stderr box-sandbox --json --session j1 <<<'{"op": "exec", "session": "j1", "argv": ["echo", "a b"]}'
	sb_ok '.stdout == "a b\n"'
	run --separate-stderr box-sandbox --json --session j1 <<<'{"op": "exec", "command": "cat", "stdin": "in put"}'
	sb_ok '.stdout == "in put"'
	run --separate-stderr box-sandbox --json --trust-request <<<'{"op": "exec", "session": "j1", "argv": ["true"]}'
	sb_ok
	run --separate-stderr box-sandbox --json --session j1 <<<'{"op": "exec", "session": "j1", "bogus": 1}'
	assert_equal "$status" 2
	one_json_where '.error.code == "invalid_request" or .error.code == "usage"'
}

@test "--events streams output events then the result" {
	run_sb create --session ev
	sb_ok
	run_sb exec ev --events -- sh -c 'echo a; sleep 0.3; echo b >&2; echo c'
	assert_equal "$status" 0
	run -0 jq -s -c '[.[] | if .event == "result" then {event, stdout, stderr, ok} else . end]' <<<"$output"
	jqe '(.[-1] == {"event": "result", "stdout": "a\nc\n", "stderr": "b\n", "ok": true})
		and ([.[:-1][] | select(.event == "stdout") | .data] | add == "a\nc\n")
		and ([.[:-1][] | select(.event == "stderr") | .data] | add == "b\n")
		and (.[0] == {"event": "stdout", "data": "a\n"})'
}

@test "stdout cap: truncated, exact total_lines, the full output kept in a file" {
	run_sb create --session o1 --max-output-bytes 100
	sb_ok
	run_sb exec o1 -- seq 1 10000
	# 50 bytes of head and 50 of tail around the marker line
	sb_ok '.truncated == true and .total_lines == 10000
		and (.stdout | startswith("1\n2\n") and endswith("9999\n10000\n"))
		and (.stdout | split("\n") | map(select(test("^\\[box-sandbox: [0-9]+ bytes cut here; "))) | length == 1)
		and (.stdout | length) < 100 + 200 and (.full_output_path | type == "string")'
	full=$(jq -r .full_output_path <<<"$output")
	seq 1 10000 >"$T/want"
	run -0 grep -c . "$full"
	# the kept file holds the whole stdout (and maybe stderr, here empty)
	cmp "$full" "$T/want" || { grep -qx 10000 "$full" && [ "$(grep -cx '[0-9]*' "$full")" -ge 10000 ]; }
	run_sb exec o1 -- seq 1 3
	sb_ok '.truncated == false and .stdout == "1\n2\n3\n" and (has("full_output_path") | not)'
}

@test "/output files are listed with size and sha256 and emptied before each exec" {
	run_sb create --session o2
	sb_ok
	run_sb exec o2 -- sh -c 'mkdir -p /output/d; printf abc > /output/a.txt; seq 1 1000 > /output/d/n.txt'
	seq 1 1000 >"$T/n.txt"
	sb_ok ".outputs == [
		{\"path\": \"a.txt\", \"size\": 3, \"sha256\": \"$(printf abc | sha256sum | cut -d' ' -f1)\"},
		{\"path\": \"d/n.txt\", \"size\": $(stat -c %s "$T/n.txt"), \"sha256\": \"$(sha "$T/n.txt")\"}]"
	run_sb exec o2 -- sh -c 'ls -A /output | wc -l'
	sb_ok '.stdout == "0\n" and .outputs == []'
}

@test "--input copies a file and a directory into a read-only /input" {
	mkdir -p "$T/in/dir/sub"
	echo file >"$T/in/one.txt"
	echo deep >"$T/in/dir/sub/deep.txt"
	run_sb create --session in1 --input "$T/in/one.txt" --input "$T/in/dir"
	sb_ok
	run_sb exec in1 -- sh -c 'cat /input/one.txt /input/dir/sub/deep.txt'
	sb_ok '.stdout == "file\ndeep\n"'
	run_sb exec in1 -- sh -c 'echo x > /input/new'
	assert_fail guest_error 1
	run_sb exec in1 -- sh -c 'echo x >> /input/one.txt'
	assert_fail guest_error 1
	assert_equal "$(cat "$T/in/one.txt")" file
	[ ! -e "$T/in/new" ]
}

@test "--mount HOST:GUEST:ro is visible and read-only" {
	mkdir "$T/m"
	echo host >"$T/m/h.txt"
	run_sb create --session mt --mount "$T/m:/mnt/m:ro"
	sb_ok
	run_sb exec mt -- cat /mnt/m/h.txt
	sb_ok '.stdout == "host\n"'
	run_sb exec mt -- sh -c 'echo x > /mnt/m/new'
	assert_fail guest_error 1
	run_sb exec mt -- sh -c 'echo x >> /mnt/m/h.txt'
	assert_fail guest_error 1
	[ ! -e "$T/m/new" ]
	assert_equal "$(cat "$T/m/h.txt")" host
}

@test "--env NAME=VALUE and NAME reach the guest" {
	export BOX_T_FROM_HOST=hostval
	run_sb create --session en --env FOO=bar --env BOX_T_FROM_HOST
	sb_ok
	run_sb exec en --env ONE=1 -- sh -c 'echo "$FOO $BOX_T_FROM_HOST $ONE $HOME"'
	sb_ok '.stdout == "bar hostval 1 /workspace\n"'
	run_sb exec en -- sh -c 'echo "${ONE-unset}"'
	sb_ok '.stdout == "unset\n"'
}

@test "credential-shaped --env is policy_denied, exit 4, and nothing is created" {
	export GITHUB_TOKEN=ghp_secret
	run_sb create --session cr --env GITHUB_TOKEN
	assert_fail policy_denied 4
	run_sb create --session cr --env OPENAI_API_KEY=sk-x
	assert_fail policy_denied 4
	[ ! -e "$BOX_STATE_DIR/sandboxes/cr/state.json" ]
	run_sb exec cr --env GITHUB_TOKEN=x -- true
	assert_fail policy_denied 4
	[ ! -e "$BOX_STATE_DIR/sandboxes/cr/state.json" ]
	run_sb create --session cr
	sb_ok
	run_sb exec cr --env FOO_API_KEY=x -- true
	assert_fail policy_denied 4
}

@test "file API: write, read and ls under /workspace, relative and absolute" {
	run_sb write fa notes/a.txt --content 'hello'
	sb_ok '.size == 5'
	run_sb read fa /workspace/notes/a.txt
	sb_ok '.content == "hello" and .encoding == "utf-8" and .size == 5'
	run --separate-stderr box-sandbox write fa b.txt <<<'from stdin'
	sb_ok
	run_sb exec fa -- cat notes/a.txt b.txt
	sb_ok '.stdout == "hellofrom stdin\n"'
	run_sb ls fa .
	sb_ok '[.entries[] | {name, is_dir}] | sort_by(.name) ==
		[{"name": "b.txt", "is_dir": false}, {"name": "notes", "is_dir": true}]'
	run_sb ls fa notes
	sb_ok '.entries == [{"name": "a.txt", "is_dir": false, "size": 5}]'
	run_sb read fa nope.txt
	assert_fail not_found 6
}

@test "file API: write to /input is refused, exit 4" {
	run_sb write fb /input/x --content y
	assert_fail policy_denied 4
}

@test "file API: a non-UTF-8 file reads as base64" {
	run_sb create --session fc
	sb_ok
	run_sb exec fc -- sh -c 'printf "\377\376\000a" > bin'
	sb_ok
	run_sb read fc bin
	sb_ok '.encoding == "base64" and .size == 4 and .content_base64 == "//4AYQ=="
		or (.encoding == "base64" and .content == "//4AYQ==")'
	run_sb write fc back --content-base64 //4AYQ==
	sb_ok
	run_sb exec fc -- cmp bin back
	sb_ok
}

@test "usage errors exit 2, a bad session id exit 2" {
	run_sb frobnicate s1
	assert_fail usage 2
	run_sb exec s1
	assert_fail usage 2
	run_sb exec s1 --command 'true' -- true
	assert_fail usage 2
	run_sb status 'Bad/Id'
	assert_fail invalid_request 2 '.error.path == "$.session"'
	run_sb create --session '../x'
	assert_fail invalid_request 2
	[ ! -e "$BOX_STATE_DIR/x" ]
	run_sb create --memory lots
	assert_equal "$status" 2
	run -0 box-sandbox --help
	assert_output --partial 'box-sandbox create'
}

@test "only the operations that may create make an absent session, and a refused one makes none" {
	for op in pause resume status delete; do
		run_sb $op absent1
		assert_fail not_found 6
	done
	run_sb restore absent1 "sha256:$(printf '%064d' 0)"
	assert_fail not_found 6
	# exec may create, but not before its request is found good
	run_sb exec absent1
	assert_fail usage 2
	run_sb exec absent1 --command true -- true
	assert_fail usage 2
	run_sb write absent1 f.txt --content x --content-base64 eA==
	assert_fail usage 2
	[ ! -e "$BOX_STATE_DIR/sandboxes/absent1" ]
	run_sb ls absent1
	sb_ok '.session == "absent1" and .created == null and .entries == []'
	[ -f "$BOX_STATE_DIR/sandboxes/absent1/state.json" ]
}

@test "a limit past 2^53 stays exact in the record across execs and saves" {
	run_sb create --session big1 --disk-bytes 9000000000000000001 --memory 9007199254740993
	sb_ok
	local i
	for i in 1 2 3; do
		run_sb exec big1 -- true
		sb_ok
	done
	# jq reads numbers as doubles: look at the text itself
	run box-sandbox status big1
	assert_output --partial '"disk_bytes":9000000000000000001'
	assert_output --partial '"memory":9007199254740993'
	run grep -c '"disk_bytes":9000000000000000001' "$BOX_STATE_DIR/sandboxes/big1/state.json"
	assert_output 1
	run grep -c 'e+' "$BOX_STATE_DIR/sandboxes/big1/state.json"
	assert_output 0
	run_sb delete big1
	sb_ok
}
