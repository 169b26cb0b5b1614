#!/usr/bin/env bats
# box-tool inside a box-sandbox: the tools granted at create --tools, and nothing else,
# reached through the sandbox's tool socket; the socket survives pause/resume.

load helpers

setup() {
	[ "$(id -u)" = 0 ] || [ -r /proc/self/ns/user ] || skip "no user namespaces"
	box_setup
	export BOX_STATE_DIR=$T/state
	TOOLS=$BOX_SRCDIR/tests/fixtures/tools/tools.json
	SESSIONS=()
}

teardown() {
	local s
	for s in "${SESSIONS[@]}"; do
		box-sandbox delete "$s" >/dev/null 2>&1 || true
	done
}

# mk ID [FLAGS...]: create a sandbox with the fixture tools granted
mk() {
	local id=$1
	shift
	SESSIONS+=("$id")
	run -0 --separate-stderr box-sandbox create --session "$id" --tools "$TOOLS" "$@"
	jqe '.ok == true'
}

@test "box-tool list inside the sandbox shows exactly the granted tools" {
	mk tl
	run -0 --separate-stderr box-sandbox exec tl -- box-tool list
	jqe '.ok == true and .exit_code == 0'
	names=$(jq -r '.stdout | fromjson | [.tools[].name] | join(",")' <<<"$output")
	want=$(jq -r '[.tools[].name] | join(",")' "$TOOLS")
	assert_equal "$names" "$want"
}

@test "a granted tool answers through flags and --json, with exact integers" {
	mk tg
	run -0 --separate-stderr box-sandbox exec tg -- box-tool echo --items 1 --items 9007199254740993
	jqe '.stdout | fromjson | .ok == true'
	[[ "$(jq -r .stdout <<<"$output")" == *'"items":[1,9007199254740993]'* ]]
	run -0 --separate-stderr box-sandbox exec tg -- box-tool echo --json '{"items":[3]}'
	jqe '.stdout | fromjson | .result.got.items == [3]'
}

@test "box-tool NAME --help lists the flags from the input schema" {
	mk th
	run -0 --separate-stderr box-sandbox exec th -- box-tool echo --help
	jqe '.stdout | test("--items <integer\\[\\]>")'
}

@test "an ungranted tool is refused with policy_denied, exit 4, by box-tool and by the host" {
	mk tu
	run -1 --separate-stderr box-sandbox exec tu -- box-tool nope
	jqe '.exit_code == 4 and (.stdout | fromjson | .error.code == "policy_denied")'
	# the host refuses too, whatever the guest sends on the socket
	run -0 --separate-stderr box-sandbox exec tu -- python3 -c '
import socket, json
s = socket.socket(socket.AF_UNIX); s.connect("/run/box/tool.sock")
s.sendall(json.dumps({"op": "call", "tool": "nope", "input": {}}).encode() + b"\n")
print(s.makefile().readline())'
	jqe '.stdout | fromjson | .ok == false and .error.code == "policy_denied"'
}

@test "an input shaped like another tool's command runs only the authorized tool" {
	mk ts
	marker=$T/outside/pwned
	input="{\"items\":[1],\"command\":[\"/bin/sh\",\"-c\",\"touch $marker\"],\"tool\":\"shell\"}"
	run -0 --separate-stderr box-sandbox exec ts -- python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect("/run/box/tool.sock")
s.sendall(b"{\"op\":\"call\",\"tool\":\"echo\",\"input\":" + sys.argv[1].encode() + b"}\n")
print(s.makefile().readline())' "$input"
	# echo's schema has no such members but allows them: echo ran and answered its input
	jqe '.stdout | fromjson | .ok == true and .result.got.tool == "shell"'
	[ ! -e "$marker" ]
}

@test "tool errors keep their codes: timeout 3, failure 1, bad flag 2" {
	mk te
	run -1 --separate-stderr box-sandbox exec te -- box-tool sleep
	jqe '.exit_code == 3 and (.stdout | fromjson | .error.code == "timeout")'
	run -1 --separate-stderr box-sandbox exec te -- box-tool fail
	jqe '.exit_code == 1 and (.stdout | fromjson | .error.code == "guest_error")'
	run -1 --separate-stderr box-sandbox exec te -- box-tool echo --items x
	jqe '.exit_code == 2 and (.stdout | fromjson | .error.code == "usage")'
	run -1 --separate-stderr box-sandbox exec te -- box-tool echo --json '{"items":["a"]}'
	jqe '.exit_code == 2 and (.stdout | fromjson | .error.message | test("at \\$.items\\[0\\]: expected integer, got string"))'
}

@test "the tool socket survives pause and resume" {
	mk tp
	run -0 --separate-stderr box-sandbox pause tp
	jqe '.state == "paused"'
	run -0 --separate-stderr box-sandbox exec tp -- box-tool echo --items 7
	jqe '.resumed == true or true'
	jqe '.stdout | fromjson | .result.got.items == [7]'
	run -0 --separate-stderr box-sandbox pause tp
	run -0 --separate-stderr box-sandbox resume tp
	run -0 --separate-stderr box-sandbox exec tp -- box-tool echo --items 8
	jqe '.stdout | fromjson | .result.got.items == [8]'
}

@test "a tool sees no credential from the caller's environment" {
	GITHUB_TOKEN=ghp_secret OPENAI_API_KEY=sk-secret mk tc
	run -0 --separate-stderr box-sandbox exec tc -- box-tool env
	jqe '.stdout | test("ghp_secret|sk-secret") | not'
	jqe '.stdout | fromjson | .ok == true'
}

@test "a sandbox without --tools has no box-tool socket" {
	SESSIONS+=(tn)
	run -0 --separate-stderr box-sandbox create --session tn
	run -1 --separate-stderr box-sandbox exec tn -- box-tool list
	jqe '.exit_code != 0'
}

@test "create --tools with a bad manifest fails and leaves no session" {
	echo '{"tools":[{"name":"x"}]}' > "$T/bad.json"
	SESSIONS+=(tb)
	run -2 --separate-stderr box-sandbox create --session tb --tools "$T/bad.json"
	jqe '.ok == false and .error.code == "invalid_request"'
	[ ! -e "$BOX_STATE_DIR/sandboxes/tb/state.json" ]
	run -6 --separate-stderr box-sandbox create --session tb2 --tools "$T/missing.json"
	[ ! -e "$BOX_STATE_DIR/sandboxes/tb2" ]
}
