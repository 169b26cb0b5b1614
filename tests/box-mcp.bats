#!/usr/bin/env bats
# box-mcp over raw stdio: the JSON-RPC framing and errors, both protocol eras, the tools and
# their results, progress, cancellation, the session, the policy's box-mcp section, bounds.
# Driven by tests/fixtures/mcp-raw.py, which sends lines (garbage too) and collects answers.

load helpers

INIT='{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bats","version":"1"}}}'
META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'

setup() {
	box_setup
	export BOX_STATE_DIR=$T/state BOX_HOME=$T/home
	unset BOX_POLICY
	MARK=mark-$$-$RANDOM-$BATS_TEST_NUMBER
}

# mcp N [BOX-MCP-ARGS...] < LINES: runs box-mcp under the driver until N responses came
mcp() {
	local wait=$1
	shift
	run --separate-stderr env BOX_MCP_TEST_MARK="$MARK" \
		python3 "$BOX_SRCDIR/tests/fixtures/mcp-raw.py" --wait "$wait" -- box-mcp "$@"
}

# where FILTER: FILTER holds on the array of every message box-mcp printed
where() {
	if ! jq -s -e "$1" <<<"$output" >/dev/null; then
		echo "does not hold: $1" >&2
		echo "${output:0:3000}" >&2
		return 1
	fi
}

# reply ID FILTER: the response to request ID exists and FILTER holds on it
reply() {
	where "[.[] | select(.id == $1 and .method == null)] | length == 1 and (.[0] | $2)"
}

call() { # call ID TOOL ARGS-JSON [EXTRA-PARAMS]
	printf '{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"%s","arguments":%s%s}}' \
		"$1" "$2" "$3" "${4:+,$4}"
}

# no process started by this test's box-mcp is left (they all carry its mark)
nothing_left() {
	local left
	left=$(grep -las "BOX_MCP_TEST_MARK=$MARK" /proc/[0-9]*/environ || true)
	if [ -n "$left" ]; then
		echo "left running: $left" >&2
		return 1
	fi
}

policy() {
	printf '%s\n' "$1" >"$T/policy.json"
}

@test "initialize: the client's version when box-mcp has it, else 2025-11-25; serverInfo, tools capability" {
	mcp 2 <<-EOF
	{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"a","version":"1"}}}
	{"jsonrpc":"2.0","id":2,"method":"ping"}
	EOF
	assert_success
	reply 1 '.result.protocolVersion == "2025-06-18" and .result.serverInfo.name == "box-mcp" and .result.capabilities.tools.listChanged == false and (.result.resultType == null)'
	reply 2 '.result == {}'
	mcp 1 <<-EOF
	{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-01-01","capabilities":{}}}
	EOF
	reply 1 '.result.protocolVersion == "2025-11-25"'
}

@test "initialize twice, or without protocolVersion, is an error; requests before it are refused" {
	mcp 4 <<-EOF
	{"jsonrpc":"2.0","id":1,"method":"tools/list"}
	{"jsonrpc":"2.0","id":2,"method":"initialize","params":{}}
	$INIT
	{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}
	EOF
	assert_success
	reply 1 '.error.code == -32600'
	reply 2 '.error.code == -32602 and .error.data.path == "$.params.protocolVersion"'
	reply 0 '.result.protocolVersion == "2025-11-25"'
	reply 3 '.error.code == -32600'
}

@test "2026-07-28: server/discover, resultType and serverInfo in _meta on every result, tools/list cacheable" {
	mcp 2 <<-EOF
	{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{$META}}
	{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{$META}}
	EOF
	assert_success
	reply '"d"' '.result.resultType == "complete" and (.result.supportedVersions | index("2026-07-28") and index("2025-11-25")) and .result.capabilities.tools != null and .result._meta["io.modelcontextprotocol/serverInfo"].name == "box-mcp" and .result.ttlMs > 0 and .result.cacheScope == "private"'
	reply 2 '.result.resultType == "complete" and (.result.tools | length) == 5 and .result.ttlMs > 0 and (.result.cacheScope | type) == "string"'
}

@test "2026-07-28: every request needs its _meta; an unknown version is -32022 with the supported list; ping and initialize are gone" {
	mcp 5 <<-EOF
	{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{$META}}
	{"jsonrpc":"2.0","id":2,"method":"tools/list"}
	{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}
	{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}
	{"jsonrpc":"2.0","id":5,"method":"ping","params":{$META}}
	EOF
	assert_success
	reply 2 '.error.code == -32602 and (.error.data.path | contains("protocolVersion"))'
	reply 3 '.error.code == -32022 and .error.data.requested == "1900-01-01" and (.error.data.supported | index("2026-07-28"))'
	reply 4 '.error.code == -32602 and (.error.data.path | contains("clientCapabilities"))'
	reply 5 '.error.code == -32601'
}

@test "garbage: -32700 and -32600 with id null, and the connection goes on" {
	mcp 9 <<-EOF
	not json
	{"jsonrpc":"2.0","id":1,
	[{"jsonrpc":"2.0","id":1,"method":"ping"}]
	{"jsonrpc":"1.0","id":2,"method":"ping"}
	{"jsonrpc":"2.0","id":null,"method":"ping"}
	{"jsonrpc":"2.0","id":1.5,"method":"ping"}
	{"jsonrpc":"2.0","id":3,"method":7}
	{"jsonrpc":"2.0","id":4,"method":"ping","params":[1]}
	{"jsonrpc":"2.0","id":5,"method":"ping"}
	EOF
	assert_success
	where '[.[] | select(.error.code == -32700 and .id == null)] | length == 2'
	where '[.[] | select(.error.code == -32600 and .id == null)] | length == 3'
	reply 2 '.error.code == -32600 and .error.data.path == "$.jsonrpc"'
	reply 3 '.error.code == -32600 and .error.data.path == "$.method"'
	reply 4 '.error.code == -32602 and .error.data.path == "$.params"'
	reply 5 '.result == {}'
}

@test "unknown methods are -32601; notifications and responses get no answer" {
	mcp 2 <<-EOF
	$INIT
	{"jsonrpc":"2.0","method":"notifications/initialized"}
	{"jsonrpc":"2.0","method":"notifications/whatever","params":{}}
	{"jsonrpc":"2.0","id":77,"result":{}}
	{"jsonrpc":"2.0","id":1,"method":"resources/list"}
	EOF
	assert_success
	where 'length == 2'
	reply 1 '.error.code == -32601 and .error.data.path == "$.method"'
}

@test "tools/list: the default tools, input schemas from the binaries with what box-mcp sets left out" {
	mcp 2 <<-EOF
	$INIT
	{"jsonrpc":"2.0","id":1,"method":"tools/list"}
	EOF
	assert_success
	reply 1 '[.result.tools[].name] == ["run_lua","sandbox_exec","sandbox_read_file","sandbox_write_file","sandbox_list_files"]'
	reply 1 '.result.tools | all(.inputSchema.type == "object" and .inputSchema.additionalProperties == false and .outputSchema.type == "object" and (.name | test("^[a-zA-Z0-9_.-]{1,128}$")))'
	reply 1 '.result.tools[0].inputSchema.required == ["script"] and (.result.tools[0].inputSchema.properties | has("events") or has("workspace") or has("max_timeout_ms") | not)'
	# what the built-in policy lets an agent set for an exec
	reply 1 '.result.tools[1].inputSchema.properties | keys == ["argv","command","cwd","stdin","timeout_ms"]'
	reply 1 '.result.tools[1].inputSchema.properties.timeout_ms.maximum == 60000'
	reply 1 '.result.tools[2].inputSchema.required == ["path"] and (.result.tools | all(.inputSchema.properties | has("session") or has("op") | not))'
}

@test "tools/call errors: -32602 with the JSON path, nothing run" {
	mcp 7 <<-EOF
	$INIT
	{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}
	$(call 2 nope '{}')
	$(call 3 run_lua '"x"')
	$(call 4 run_lua '{"script":"return 1","timeout_ms":"soon"}')
	$(call 5 sandbox_exec '{"command":"touch /workspace/x","session":"other"}')
	$(call 6 run_lua '{"script":"return 1","workspace":"/"}')
	EOF
	assert_success
	reply 1 '.error.code == -32602 and .error.data.path == "$.params.name"'
	reply 2 '.error.code == -32602 and .error.data.path == "$.params.name" and (.error.message | contains("nope"))'
	reply 3 '.error.code == -32602 and .error.data.path == "$.params.arguments"'
	reply 4 '.error.code == -32602 and .error.data.path == "$.params.arguments.timeout_ms" and (.error.message | contains("expected integer"))'
	reply 5 '.error.code == -32602 and .error.data.path == "$.params.arguments.session"'
	reply 6 '.error.code == -32602 and .error.data.path == "$.params.arguments.workspace"'
	[ ! -e "$BOX_STATE_DIR/sandboxes" ] || [ -z "$(ls "$BOX_STATE_DIR/sandboxes" | grep -v '\.lock$')" ]
}

@test "run_lua: structuredContent is box-run's result, text its JSON; a script error is isError" {
	mcp 4 <<-EOF
	$INIT
	$(call 1 run_lua '{"script":"print(\"hi\") return {n = 1 + 1}"}')
	$(call 2 run_lua '{"script":"error(\"boom\")"}')
	$(call 3 run_lua '{"script":"while true do end","timeout_ms":200}')
	EOF
	assert_success
	reply 1 '.result.isError == false and .result.structuredContent.result == {"n":2} and .result.structuredContent.stdout == "hi\n" and (.result.content[0].text | fromjson) == .result.structuredContent'
	reply 2 '.result.isError == true and .result.structuredContent.error.code == "guest_error" and (.result.structuredContent.error.message | contains("boom"))'
	reply 3 '.result.isError == true and .result.structuredContent.error.code == "timeout"'
}

@test "sandbox tools: one session per connection, bound by box-mcp, deleted at disconnect" {
	mcp 6 <<-EOF
	$INIT
	$(call 1 sandbox_write_file '{"path":"notes.txt","content":"hello mcp\n"}')
	#wait 2
	$(call 2 sandbox_read_file '{"path":"/workspace/notes.txt"}')
	$(call 3 sandbox_list_files '{}')
	$(call 4 sandbox_exec '{"argv":["sh","-c","cat notes.txt; exit 3"]}')
	#wait 5
	$(call 5 sandbox_exec '{"command":"echo ok"}')
	EOF
	assert_success
	reply 1 '.result.isError == false'
	reply 2 '.result.structuredContent.content == "hello mcp\n"'
	reply 3 '[.result.structuredContent.entries[].name] | index("notes.txt")'
	reply 4 '.result.isError == true and .result.structuredContent.exit_code == 3 and .result.structuredContent.stdout == "hello mcp\n"'
	reply 5 '.result.isError == false and (.result.structuredContent.session | test("^mcp-[0-9a-f]{16}$"))'
	session=$(jq -rs '.[] | select(.id == 5) | .result.structuredContent.session' <<<"$output")
	[ ! -e "$BOX_STATE_DIR/sandboxes/$session" ]
	nothing_left
}

@test "progress: with a progressToken each chunk of an exec's output is a notifications/progress, rising" {
	mcp 3 <<-EOF
	$INIT
	$(call 1 sandbox_exec '{"command":"echo one; sleep 0.3; echo two >&2; sleep 0.3; echo three"}' '"_meta":{"progressToken":"p1"}')
	$(call 2 sandbox_exec '{"command":"echo quiet"}')
	EOF
	assert_success
	where '[.[] | select(.method == "notifications/progress")] | length >= 3 and all(.params.progressToken == "p1") and ([.[].params.progress] | . == sort and (unique | length) == length)'
	where '[.[] | select(.method == "notifications/progress") | .params.message] | (index("stdout: one\n") != null) and (index("stderr: two\n") != null)'
	# the result comes after its progress, and without "event"
	where '(map(.method == "notifications/progress" or .id == 1) | rindex(true)) as $last | .[$last].id == 1'
	reply 1 '.result.structuredContent.stdout == "one\nthree\n" and (.result.structuredContent | has("event") | not)'
	reply 2 '.result.structuredContent.stdout == "quiet\n"'
}

@test "notifications/cancelled kills the exec: no answer for it, nothing left running, the connection goes on" {
	local nap=31.$RANDOM
	mcp 2 <<-EOF
	$INIT
	$(call 5 sandbox_exec "{\"command\":\"sleep $nap\"}")
	#sleep 1.5
	#cancel 5
	#sleep 0.5
	{"jsonrpc":"2.0","id":6,"method":"ping"}
	EOF
	assert_success
	where '[.[] | select(.id == 5)] | length == 0'
	reply 6 '.result == {}'
	run pgrep -f "sleep $nap"
	assert_failure
}

@test "notifications/cancelled kills a running script and its VM" {
	mcp 2 <<-EOF
	$INIT
	$(call '"r"' run_lua '{"script":"while true do end","timeout_ms":60000}')
	#sleep 1
	#cancel "r"
	#sleep 0.3
	{"jsonrpc":"2.0","id":2,"method":"ping"}
	EOF
	assert_success
	where '[.[] | select(.id == "r")] | length == 0'
	nothing_left
}

@test "end of input kills what still runs and ends box-mcp at once" {
	local nap=32.$RANDOM
	mcp 1 <<-EOF
	$INIT
	$(call 1 sandbox_exec "{\"command\":\"sleep $nap\"}")
	$(call 2 run_lua '{"script":"while true do end","timeout_ms":60000}')
	#sleep 1
	EOF
	assert_success
	[[ $stderr == *"exit 0"* ]]
	run pgrep -f "sleep $nap"
	assert_failure
	nothing_left
}

@test "bounds: a message past max_message_bytes, output past max_output_bytes, calls past max_concurrent_calls" {
	policy '{"box-mcp": {"max_message_bytes": 1024, "max_output_bytes": 4096, "max_concurrent_calls": 1}}'
	big=$(head -c 3000 /dev/zero | tr '\0' a)
	mcp 5 --policy "$T/policy.json" <<-EOF
	$INIT
	{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"$big"}}
	$(call 2 sandbox_exec '{"command":"yes | head -c 100000"}')
	#wait 3
	$(call 3 run_lua '{"script":"local t = os.time() while os.time() - t < 2 do end"}')
	$(call 4 run_lua '{"script":"return 4"}')
	EOF
	assert_success
	where '[.[] | select(.error.code == -32600 and .id == null and (.error.message | contains("1024")))] | length == 1'
	where '[.[] | select(.id == 1)] | length == 0'
	reply 2 '.result.isError == true and .result.structuredContent.error.limit == "output_bytes"'
	reply 4 '.result.isError == true and .result.structuredContent.error.limit == "max_concurrent_calls" and .result.structuredContent.error.retryable == true'
	reply 3 '.result.isError == false'
}

@test "a request id still in flight is refused" {
	mcp 3 <<-EOF
	$INIT
	$(call 1 run_lua '{"script":"local t = os.time() while os.time() - t < 1 do end return 1"}')
	$(call 1 run_lua '{"script":"return 2"}')
	EOF
	assert_success
	where '[.[] | select(.id == 1)] | length == 2'
	where '[.[] | select(.id == 1 and .error.code == -32600)] | length == 1'
	where '[.[] | select(.id == 1 and .result.structuredContent.result == 1)] | length == 1'
}

@test "request ids come back exactly: big integers and strings" {
	mcp 3 <<-EOF
	$INIT
	{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}
	{"jsonrpc":"2.0","id":"s-1","method":"ping"}
	EOF
	assert_success
	[[ $output == *'"id":9007199254740993,'* ]]
	reply '"s-1"' '.result == {}'
}

@test "policy: the tools granted, the session prefix, a session kept at disconnect" {
	policy '{"box-mcp": {"tools": ["sandbox_exec", "sandbox_status"], "session": {"prefix": "agent-", "at_disconnect": "keep"}}}'
	BOX_POLICY=$T/policy.json mcp 4 <<-EOF
	$INIT
	{"jsonrpc":"2.0","id":1,"method":"tools/list"}
	$(call 2 sandbox_exec '{"command":"echo kept > kept.txt"}')
	$(call 3 run_lua '{"script":"return 1"}')
	EOF
	assert_success
	reply 1 '[.result.tools[].name] == ["sandbox_exec","sandbox_status"]'
	reply 3 '.error.code == -32602'
	session=$(jq -rs '.[] | select(.id == 2) | .result.structuredContent.session' <<<"$output")
	[[ $session == agent-* ]]
	[ -f "$BOX_STATE_DIR/sandboxes/$session/state.json" ]
	box-sandbox delete "$session" >/dev/null
}

@test "policy: unknown members and tools are refused with their path, before anything runs" {
	policy '{"box-mcp": {"tools": ["run_lua", "rm_rf"]}}'
	run --separate-stderr box-mcp --policy "$T/policy.json" </dev/null
	assert_failure 2
	one_json_where '.error.code == "invalid_request" and .error.path == "$[\"box-mcp\"].tools[1]"'
	policy '{"box-mcp": {"sesion": {}}}'
	run --separate-stderr box-mcp --policy "$T/policy.json" </dev/null
	assert_failure 2
	one_json_where '.error.path == "$[\"box-mcp\"].sesion"'
	policy '{"box-mcp": {"session": {"prefix": "../x"}}}'
	run --separate-stderr box-mcp --policy "$T/policy.json" </dev/null
	assert_failure 2
	one_json_where '.error.path == "$[\"box-mcp\"].session.prefix"'
	run --separate-stderr box-mcp --policy "$T/none.json" </dev/null
	assert_failure 6
	[[ $stderr == "box-mcp: not_found: "* ]]
}

@test "the operator's tools from a manifest: first-class tools with their schemas, results and errors" {
	cp -r "$BOX_SRCDIR/tests/fixtures/tools" "$T/tools"
	policy '{"box-mcp": {"tools": [], "manifest": "tools/tools.json"}}'
	mcp 5 --policy "$T/policy.json" <<-EOF
	$INIT
	{"jsonrpc":"2.0","id":1,"method":"tools/list"}
	$(call 2 echo '{"items":[1,2]}')
	$(call 3 echo '{"items":["x"]}')
	$(call 4 fail '{}')
	EOF
	assert_success
	reply 1 '[.result.tools[].name] | index("echo") and index("count") and (index("deploy") | not)'
	reply 1 '.result.tools[] | select(.name == "count") | .outputSchema.required == ["count"]'
	reply 1 '.result.tools[] | select(.name == "rm") | .annotations.destructiveHint == true'
	reply 2 '.result.isError == false and .result.structuredContent.got.items == [1,2]'
	reply 3 '.error.code == -32602 and .error.data.path == "$.params.arguments.items[0]"'
	reply 4 '.result.isError == true and (.result | has("structuredContent") | not) and (.result.content[0].text | contains("guest_error"))'
}

@test "cancelling an operator's tool kills the tool's process group" {
	cp -r "$BOX_SRCDIR/tests/fixtures/tools" "$T/tools"
	cat >"$T/tools/mcp.json" <<-EOF
	{"tools": [{"name": "nap", "description": "sleeps", "input_schema": {"type": "object"},
	  "command": ["/bin/sh", "-c", "sleep 33.$$; echo '{}'"], "timeout_ms": 60000}]}
	EOF
	policy '{"box-mcp": {"tools": [], "manifest": "tools/mcp.json"}}'
	mcp 2 --policy "$T/policy.json" <<-EOF
	$INIT
	$(call 1 nap '{}')
	#sleep 1
	#cancel 1
	#sleep 0.3
	{"jsonrpc":"2.0","id":2,"method":"ping"}
	EOF
	assert_success
	where '[.[] | select(.id == 1)] | length == 0'
	run pgrep -f "sleep 33.$$"
	assert_failure
}

@test "stdout carries only MCP messages; --help and --version" {
	run --separate-stderr box-mcp --help
	assert_success
	[[ $output == usage:* ]]
	run box-mcp --version
	assert_output "box-mcp (box) 0.1.0"
	run --separate-stderr box-mcp --describe
	assert_success
	one_json_where '[.tools[].name] | length == 5'
	run --separate-stderr box-mcp --json <<<'{}'
	assert_failure 2
	one_json_where '.error.code == "usage"'
	run --separate-stderr box-mcp stray
	assert_failure 2
}

@test "a flood of garbage and requests gets an answer each and box-mcp goes on" {
	{
		echo "$INIT"
		for i in $(seq 1500); do
			echo 'garbage {'
			echo '[1,2,3]'
			echo "{\"jsonrpc\":\"2.0\",\"id\":$i,\"method\":\"ping\"}"
		done
		echo "$(call '"last"' run_lua '{"script":"return 9"}')"
	} >"$T/flood"
	mcp 4502 <"$T/flood"
	assert_success
	where '[.[] | select(.error.code == -32700)] | length == 1500'
	where '[.[] | select(.error.code == -32600)] | length == 1500'
	where '[.[] | select(.result == {})] | length == 1500'
	reply '"last"' '.result.structuredContent.result == 9'
}

@test "the operator's policy reaches every binary box-mcp runs, as BOX_POLICY with an absolute path" {
	policy '{"box-mcp": {}}'
	local nap=35.$RANDOM
	(cd "$T" && mcp 1 --policy policy.json <<-EOF
	$INIT
	$(call 1 sandbox_exec "{\"command\":\"sleep $nap\"}")
	#sleep 1.5
	EOF
	) &
	local driver=$! pid="" i
	for i in $(seq 60); do
		pid=$(grep -las "BOX_MCP_TEST_MARK=$MARK" /proc/[0-9]*/environ |
			while read -r f; do d=${f%/environ}; grep -qa box-sandbox "$d/cmdline" && echo "${d#/proc/}"; done | head -1)
		[ -n "$pid" ] && break
		sleep 0.05
	done
	[ -n "$pid" ]
	tr '\0' '\n' <"/proc/$pid/environ" | grep -qx "BOX_POLICY=$T/policy.json"
	tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qx -- "--session"
	wait "$driver"
	nothing_left
}

@test "the tools' input schemas follow the policy's sections of box-run and box-sandbox" {
	policy '{"policy_version": 1, "box-run": {"agent": ["script", "workspace"]}, "box-sandbox": {"agent": ["op", "session", "command"]}, "box-mcp": {"tools": ["run_lua", "sandbox_exec"]}}'
	mcp 3 --policy "$T/policy.json" <<-EOF
	$INIT
	{"jsonrpc":"2.0","id":1,"method":"tools/list"}
	$(call 2 sandbox_exec '{"argv":["true"]}')
	EOF
	assert_success
	reply 1 '.result.tools[0].inputSchema.properties | keys == ["script","workspace"]'
	reply 1 '.result.tools[1].inputSchema.properties | keys == ["command"]'
	reply 2 '.error.code == -32602 and .error.data.path == "$.params.arguments.argv"'
}
