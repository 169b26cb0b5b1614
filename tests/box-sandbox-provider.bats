#!/usr/bin/env bats
# box-sandbox with a plug-in provider: the orchestration of DESIGN.md (ensure running: create,
# resume a drifted remote, replace a lost one, init once with retry, provider mismatch) driven
# through tests/fixtures/fake-provider, which runs nothing, keeps its instances in
# $HOME/fake-provider/state.json and logs every operation it receives in ops.log.

load helpers

setup() {
	box_setup
	SRC=${BOX_SRCDIR:-$BATS_TEST_DIRNAME/..}
	mkdir -p "$T/provider-bin" "$T/home"
	cp "$SRC/tests/fixtures/fake-provider" "$T/provider-bin/box-provider-fake"
	chmod 755 "$T/provider-bin/box-provider-fake"
	# box-sandbox finds providers in BOX_LIBEXEC_DIR, then PATH; the fake lives on PATH and
	# keeps its state under HOME, which box-sandbox passes to providers
	PATH="$T/provider-bin:$PATH"
	HOME=$T/home
	BOX_STATE_DIR=$T/state
	FAKE=$HOME/fake-provider
	export PATH HOME BOX_STATE_DIR FAKE
}

# fake_set PYTHON: runs PYTHON on the fake's state as the dict s, and saves it
fake_set() {
	python3 - "$FAKE/state.json" "$1" <<'EOF'
import json, sys
p = sys.argv[1]
s = json.load(open(p))
exec(sys.argv[2])
json.dump(s, open(p, "w"))
EOF
}

# ops: the operations the fake received since the last clear_log, space-separated
ops() {
	awk '{print $1}' "$FAKE/ops.log" | paste -sd' '
}

clear_log() {
	: >"$FAKE/ops.log"
}

# request N: the JSON request of the Nth logged operation (1-based)
request() {
	sed -n "${1}p" "$FAKE/ops.log" | cut -d' ' -f3- | jq -c .request
}

# record ID: the session's state.json
record() {
	cat "$BOX_STATE_DIR/sandboxes/$1/state.json"
}

make_session() {
	run --separate-stderr box-sandbox create --provider fake --session "$1" "${@:2}"
	assert_success
	clear_log
}

@test "create --provider fake sends create with the limits and env, and records the provider" {
	run --separate-stderr box-sandbox create --provider fake --session s1 --memory 2097152 --pids 9 \
		--timeout-ms 1234 -e FOO=bar
	assert_success
	one_json_where '.ok and .session == "s1" and .provider == "fake" and .state == "running"
		and .created == true and .limits.memory == 2097152 and .init_completed_at != null
		and (has("limits_enforced_by") | not)'
	[ "$(ops)" = create ]
	jqe '.op == "create" and .session == "s1" and .provider_data == null
		and .limits == {"memory": 2097152, "pids": 9, "timeout_ms": 1234}
		and .env == ["FOO=bar"]' "$(request 1)"
	jqe '.provider == "fake" and .state == "running"
		and .provider_data.remote == {"instance": "fake-1"}' "$(record s1)"
	jqe '.instances.s1.state == "running"' "$(cat "$FAKE/state.json")"
}

@test "exec passes argv, env, cwd, stdin, timeout and output cap through, with provider_data" {
	make_session s1 -e FOO=bar --max-output-bytes 4096
	run --separate-stderr box-sandbox exec s1 --cwd /tmp --stdin 'in put' -e X=1 --timeout-ms 777 -- echo hi there
	assert_success
	one_json_where '.ok and .exit_code == 0 and .stdout == "echo hi there\n"
		and .session == "s1" and .outputs == [] and (has("error") | not)'
	[ "$(ops)" = "status exec" ]
	jqe '.op == "exec" and .argv == ["echo", "hi", "there"] and .env == ["FOO=bar", "X=1"]
		and .cwd == "/tmp" and .stdin == "in put" and .timeout_ms == 777
		and .max_output_bytes == 4096 and .provider_data == {"instance": "fake-1"}' \
		"$(request 2)"
	clear_log
	run --separate-stderr box-sandbox exec s1 --command 'echo a; echo b'
	assert_success
	jqe '.argv == ["/bin/sh", "-c", "echo a; echo b"] and .cwd == "/workspace"
		and (has("stdin") | not) and .timeout_ms == 60000' "$(request 2)"
}

@test "exec of a command that exits non-zero is guest_error with the whole result" {
	make_session s1
	fake_set 's["exec_fail"] = {"contains": "boom", "exit_code": 3, "stderr": "bad\n"}'
	run --separate-stderr box-sandbox exec s1 -- boom
	[ "$status" -eq 1 ]
	one_json_where '.ok == false and .error.code == "guest_error" and .exit_code == 3
		and .stderr == "bad\n" and .stdout == "boom\n"'
}

@test "a plug-in provider has no terminals: exec --tty and shell are unsupported, nothing runs" {
	make_session s1
	for op in "exec s1 --tty --force-tty -- touch ran" "shell s1 --force-tty"; do
		# shellcheck disable=SC2086
		run --separate-stderr box-sandbox $op </dev/null
		BOX_PROG=box-sandbox assert_fail unsupported 8 '.ran == false and .error.message == "the fake provider has no terminals"'
		[[ " $(ops) " != *" exec "* ]]
	done
}

@test "a remote that drifted to paused is resumed before the exec" {
	make_session s1
	fake_set 's["instances"]["s1"]["state"] = "paused"'
	run --separate-stderr box-sandbox exec s1 -- true
	assert_success
	one_json_where '.ok and .resumed == true and (has("replaced") | not)'
	# after the resume, box looks again: a remote that died while frozen would be replaced
	[ "$(ops)" = "status resume status exec" ]
	jqe '.instances.s1.state == "running"' "$(cat "$FAKE/state.json")"
	jqe '.state == "running"' "$(record s1)"
}

@test "status reports a drifted pause and records it, without repairing" {
	make_session s1
	fake_set 's["instances"]["s1"]["state"] = "paused"'
	run --separate-stderr box-sandbox status s1
	assert_success
	one_json_where '.state == "paused" and .observed == "paused"'
	[ "$(ops)" = status ]
	jqe '.state == "paused"' "$(record s1)"
}

@test "a lost remote is reported lost by status, then replaced by the next operation" {
	make_session s1 --init 'echo once'
	fake_set 'del s["instances"]["s1"]'
	run --separate-stderr box-sandbox status s1
	assert_success
	one_json_where '.state == "lost" and .observed == "absent"'
	[ "$(ops)" = status ]
	jqe '.state == "lost"' "$(record s1)"
	clear_log
	run --separate-stderr box-sandbox exec s1 -- echo back
	assert_success
	one_json_where '.ok and .replaced == true and .stdout == "echo back\n" and .init_ran == true'
	# the leftovers are deleted first; the new remote instance is blank, so init runs again
	[ "$(ops)" = "status delete create exec exec" ]
	jqe '.provider_data == {"instance": "fake-1"}' "$(request 3)"
	jqe '.argv == ["/bin/sh", "-c", "echo once"] and .provider_data == {"instance": "fake-2"}' "$(request 4)"
	jqe '.provider_data == {"instance": "fake-2"}' "$(request 5)"
	jqe '.state == "running" and .provider_data.remote.instance == "fake-2"' "$(record s1)"
}

@test "pause and resume reach the provider and the record" {
	make_session s1
	run --separate-stderr box-sandbox pause s1
	assert_success
	one_json_where '.state == "paused"'
	[ "$(ops)" = "status pause" ]
	jqe '.instances.s1.state == "paused"' "$(cat "$FAKE/state.json")"
	clear_log
	run --separate-stderr box-sandbox resume s1
	assert_success
	one_json_where '.state == "running" and .resumed == true'
	[[ "$(ops)" == status* ]]
	[ "$(ops | tr ' ' '\n' | grep -c '^resume$')" -eq 1 ]
}

@test "an init that fails is recorded, retried by the next operation, then completed once" {
	mkdir -p "$FAKE"
	echo '{"instances": {}, "next": 1, "exec_fail": {"contains": "setup-step",
		"exit_code": 5, "stderr": "no mirror\n"}}' >"$FAKE/state.json"
	run --separate-stderr box-sandbox create --provider fake --session s1 --init 'echo setup-step'
	[ "$status" -eq 1 ]
	one_json_where '.ok == false and .error.code == "guest_error"
		and (.error.message | contains("setup-step") and contains("no mirror"))'
	[ "$(ops)" = "create exec" ]
	jqe '.argv == ["/bin/sh", "-c", "echo setup-step"]' "$(request 2)"
	run --separate-stderr box-sandbox status s1
	assert_success
	one_json_where '.init_completed_at == null and (.last_init_error | contains("status 5"))'

	clear_log
	run --separate-stderr box-sandbox exec s1 -- work
	[ "$status" -eq 1 ]
	one_json_where '.error.code == "guest_error" and (.error.message | contains("init command"))'
	# the init ran again and the command did not run
	[ "$(ops)" = "status exec" ]
	jqe '.argv == ["/bin/sh", "-c", "echo setup-step"]' "$(request 2)"

	fake_set 'del s["exec_fail"]'
	clear_log
	run --separate-stderr box-sandbox exec s1 -- work
	assert_success
	one_json_where '.ok and .stdout == "work\n" and .init_ran == true'
	[ "$(ops)" = "status exec exec" ]
	jqe '.init_completed_at != null and .last_init_error == null' "$(record s1)"

	clear_log
	run --separate-stderr box-sandbox exec s1 -- again
	assert_success
	one_json_where '.ok and (has("init_ran") | not)'
	[ "$(ops)" = "status exec" ]
}

@test "an init retried and completed within an operation that saved the record is kept" {
	mkdir -p "$FAKE"
	echo '{"instances": {}, "next": 1, "exec_fail": {"contains": "setup-step"}}' \
		>"$FAKE/state.json"
	run --separate-stderr box-sandbox create --provider fake --session s1 --init 'echo setup-step'
	[ "$status" -eq 1 ]
	# the resume makes ensure-running save the record just before the init runs
	fake_set 'del s["exec_fail"]; s["instances"]["s1"]["state"] = "paused"'
	run --separate-stderr box-sandbox exec s1 -- work
	assert_success
	one_json_where '.ok and .resumed == true and .init_ran == true'
	jqe '.init_completed_at != null and .last_init_error == null' "$(record s1)"
	clear_log
	run --separate-stderr box-sandbox exec s1 -- again
	assert_success
	[ "$(ops)" = "status exec" ]
}

@test "an operation naming another provider than the session's is a conflict" {
	make_session s1
	run --separate-stderr box-sandbox exec s1 --provider local -- true
	[ "$status" -eq 7 ]
	one_json_where '.ok == false and .error.code == "conflict" and .error.path == "$.provider"
		and (.error.message | contains("fake"))'
	[[ "$stderr" == "box-sandbox: conflict: provider mismatch"* ]]
	run --separate-stderr box-sandbox exec s1 --provider other -- true
	[ "$status" -eq 7 ]
	one_json_where '.error.code == "conflict"'
	for op in status pause resume snapshot delete; do
		run --separate-stderr box-sandbox "$op" s1 --provider local
		[ "$status" -eq 7 ] || { echo "$op: $status $output" >&2; false; }
	done
	# nothing reached the provider, and the session is as it was
	[ "$(ops)" = "" ]
	jqe '.provider == "fake" and .state == "running"' "$(record s1)"
	jqe '.instances.s1.state == "running"' "$(cat "$FAKE/state.json")"
}

@test "create with an unknown provider is not_found and leaves no session" {
	run --separate-stderr box-sandbox create --provider nosuch --session s1
	[ "$status" -eq 6 ]
	one_json_where '.ok == false and .error.code == "not_found"
		and (.error.message | contains("box-provider-nosuch"))'
	[ ! -e "$BOX_STATE_DIR/sandboxes/s1" ]
	run --separate-stderr box-sandbox create --provider 'No/Such' --session s1
	[ "$status" -eq 2 ]
	one_json_where '.error.code == "invalid_request" and .error.path == "$.provider"'
	run --separate-stderr box-sandbox list
	assert_success
	one_json_where '.sessions == []'
}

@test "a typed provider error reaches the caller with its code, limit and exit status" {
	make_session s1
	fake_set 's["fail"] = {"exec": {"code": "limit_exceeded", "message": "quota used up",
		"limit": "instances", "configured": 4, "retryable": True}}'
	run --separate-stderr box-sandbox exec s1 -- true
	[ "$status" -eq 3 ]
	one_json_where '.ok == false and .error.code == "limit_exceeded"
		and .error.message == "quota used up" and .error.limit == "instances"
		and .error.configured == 4 and .error.retryable == true'
	fake_set 's["fail"] = {"status": {"code": "not_found", "message": "no such zone"}}'
	run --separate-stderr box-sandbox status s1
	[ "$status" -eq 6 ]
	one_json_where '.error.code == "not_found" and .error.message == "no such zone"'
}

@test "a provider that crashes or answers garbage is provider_error" {
	make_session s1
	fake_set 's["crash"] = {"pause": 5}; s["garbage"] = ["checkpoint"]'
	run --separate-stderr box-sandbox pause s1
	[ "$status" -eq 8 ]
	one_json_where '.error.code == "provider_error"
		and (.error.message | contains("status 5") and contains("crashed on purpose"))'
	jqe '.state == "running"' "$(record s1)"
	run --separate-stderr box-sandbox snapshot s1
	[ "$status" -eq 8 ]
	one_json_where '.error.code == "provider_error"
		and (.error.message | contains("did not answer a JSON object"))'
	fake_set 's["fail"] = {"exec": {"message": "no code"}}'
	run --separate-stderr box-sandbox exec s1 -- true
	[ "$status" -eq 8 ]
	one_json_where '.error.code == "provider_error"'
}

@test "credential-shaped variables of the caller never reach the provider" {
	export GITHUB_TOKEN=ghp_leak1 OPENAI_API_KEY=sk-leak2 AWS_SECRET_ACCESS_KEY=leak3
	export DB_PASSWORD=leak4 PLAIN_HOST_VAR=leak5
	make_session s1 -e GREETING=hello
	run --separate-stderr box-sandbox exec s1 -e MODE=fast -- env
	assert_success
	run --separate-stderr box-sandbox status s1
	assert_success
	# every run saw PATH, HOME and LANG and none of the caller's variables
	local n
	n=$(wc -l <"$FAKE/ops.log")
	[ "$n" -ge 3 ]
	run jq -sce '[.[] | .environ] | all(has("PATH") and has("HOME") and .HOME == env.HOME)
		and all(keys | all(test("TOKEN|KEY|SECRET|PASSWORD|PLAIN_HOST") | not))' \
		< <(cut -d' ' -f3- "$FAKE/ops.log")
	assert_success
	run grep -c 'leak[1-5]' "$FAKE/ops.log"
	assert_output 0
	# an explicit --env of a credential is refused before any provider runs
	clear_log
	run --separate-stderr box-sandbox exec s1 -e GITHUB_TOKEN -- env
	[ "$status" -eq 4 ]
	one_json_where '.error.code == "policy_denied" and .error.path == "$.env[0]"'
	[ "$(ops)" = "" ]
	run --separate-stderr box-sandbox create --provider fake --session s2 -e OPENAI_API_KEY=x
	[ "$status" -eq 4 ]
	[ ! -e "$BOX_STATE_DIR/sandboxes/s2" ]
}

@test "snapshot is the provider's checkpoint; restore and local features are unsupported" {
	make_session s1
	run --separate-stderr box-sandbox snapshot s1
	assert_success
	one_json_where '.ok and .session == "s1" and (.digest | test("^sha256:[0-9a-f]{64}$"))'
	[ "$(ops)" = "status checkpoint" ]
	run --separate-stderr box-sandbox restore s1 "sha256:$(printf '%064d' 0)"
	[ "$status" -eq 8 ]
	one_json_where '.error.code == "unsupported"'
	run --separate-stderr box-sandbox create --provider fake --session s2 --input "$WS"
	[ "$status" -eq 8 ]
	one_json_where '.error.code == "unsupported"'
	run --separate-stderr box-sandbox create --provider fake --session s3 --mount "$WS:/data"
	[ "$status" -eq 8 ]
	one_json_where '.error.code == "unsupported"'
}

@test "delete removes the remote instance and the session, even when the remote is gone" {
	make_session s1
	make_session s2
	run --separate-stderr box-sandbox delete s1
	assert_success
	one_json_where '.ok and .deleted == true'
	[ "$(ops)" = delete ]
	jqe '(.instances | has("s1") | not) and (.instances | has("s2"))' "$(cat "$FAKE/state.json")"
	[ ! -e "$BOX_STATE_DIR/sandboxes/s1" ]
	fake_set 'del s["instances"]["s2"]'
	run --separate-stderr box-sandbox delete s2
	assert_success
	run --separate-stderr box-sandbox status s2
	[ "$status" -eq 6 ]
	one_json_where '.error.code == "not_found"'
}

@test "a session made by the fake is listed with its provider" {
	make_session s1
	run --separate-stderr box-sandbox list
	assert_success
	one_json_where '.sessions == [{"session": "s1", "provider": "fake", "state": "running",
		"last_used_at": .sessions[0].last_used_at}]'
}

@test "read and write go to the provider as read_file and write_file, in base64; ls is unsupported" {
	make_session s1
	run --separate-stderr box-sandbox write s1 notes.txt --content 'héllo'
	assert_success
	one_json_where '.ok and .session == "s1" and .path == "notes.txt"'
	[ "$(ops)" = "status write_file" ]
	jqe '.content_base64 == "aMOpbGxv"' "$(request 2)"
	run --separate-stderr box-sandbox read s1 notes.txt
	assert_success
	one_json_where '.ok and .content_base64 == "aMOpbGxv"'
	run --separate-stderr box-sandbox read s1 missing.txt
	[ "$status" -eq 6 ]
	one_json_where '.error.code == "not_found"'
	run --separate-stderr box-sandbox ls s1
	[ "$status" -eq 8 ]
	one_json_where '.error.code == "unsupported"'
}

@test "a streamed stdin reaches a plug-in as its stdin text, bounded; bytes or too much are refused, never dropped" {
	make_session s1
	run --separate-stderr box-sandbox exec s1 -- cat < <(printf 'piped\ntext\n')
	assert_success
	jqe '.op == "exec" and .stdin == "piped\ntext\n"' "$(request 2)"
	# bytes that are not UTF-8 text: unsupported, the command not sent
	clear_log
	head -c 1000 /dev/urandom | { printf '\377'; cat; } >"$T/bin"
	run --separate-stderr box-sandbox exec s1 -- cat <"$T/bin"
	[ "$status" -eq 8 ]
	one_json_where '.ok == false and .ran == false and .error.code == "unsupported"
		and (.error.message | test("not UTF-8"))'
	[ "$(ops)" = "status" ]
	# over 16 MiB: limit_exceeded, the command not sent
	clear_log
	run --separate-stderr box-sandbox exec s1 -- cat < <(head -c $((16 * 1048576 + 1)) /dev/zero | tr '\0' a)
	[ "$status" -eq 3 ]
	one_json_where '.ok == false and .ran == false and .error.code == "limit_exceeded"
		and (.error.message | test("16 MiB"))'
	[ "$(ops)" = "status" ]
	# --json never streams: its request came on stdin
	clear_log
	run --separate-stderr box-sandbox --json --session s1 <<<'{"op": "exec", "session": "s1", "argv": ["cat"]}'
	assert_success
	jqe '.op == "exec" and (has("stdin") | not)' "$(request 2)"
}
