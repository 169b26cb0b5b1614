#!/usr/bin/env bats
# box-mcp --http-port: Streamable HTTP on 127.0.0.1, driven with curl: sessions, the bearer
# token, Host and Origin (DNS rebinding), the methods and bounds of the transport.

load helpers
load mcp-helpers

INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}'

setup() {
	box_setup
	export BOX_STATE_DIR=$T/state BOX_HOME=$T/home
	unset BOX_POLICY
	PID=
}

teardown() {
	http_stop
}

start() {
	http_start "$@"
}

# post BODY [CURL-ARGS...]: $status is the HTTP status, $output the body, $T/headers the headers
post() {
	local body=$1
	shift
	run curl -s -o "$T/body" -D "$T/headers" -w '%{http_code}' -X POST "$URL" \
		-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
		"$@" --data-binary "$body"
	code=$output
	output=$(cat "$T/body")
}

session_of() {
	tr -d '\r' <"$T/headers" | sed -n 's/^Mcp-Session-Id: //p'
}

@test "a session: initialize names it, its calls run in one sandbox, DELETE ends it and deletes the sandbox" {
	start
	post "$INIT"
	[ "$code" = 200 ]
	jqe '.result.protocolVersion == "2025-11-25"'
	S=$(session_of)
	[[ $S =~ ^[0-9a-f]{16}$ ]]
	post '{"jsonrpc":"2.0","method":"notifications/initialized"}' -H "Mcp-Session-Id: $S"
	[ "$code" = 202 ] && [ -z "$output" ]
	post '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sandbox_exec","arguments":{"command":"echo over http > f; cat f"}}}' -H "Mcp-Session-Id: $S"
	[ "$code" = 200 ]
	jqe '.result.structuredContent.stdout == "over http\n"'
	sb=$(jq -r .result.structuredContent.session <<<"$output")
	[ -f "$BOX_STATE_DIR/sandboxes/$sb/state.json" ]
	run curl -s -o /dev/null -w '%{http_code}' -X DELETE "$URL" -H "Mcp-Session-Id: $S"
	[ "$output" = 200 ]
	[ ! -e "$BOX_STATE_DIR/sandboxes/$sb" ]
	post '{"jsonrpc":"2.0","id":3,"method":"tools/list"}' -H "Mcp-Session-Id: $S"
	[ "$code" = 404 ]
}

@test "two sessions side by side have two sandboxes" {
	start
	post "$INIT"
	A=$(session_of)
	post "$INIT"
	B=$(session_of)
	[ "$A" != "$B" ]
	post '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sandbox_write_file","arguments":{"path":"who","content":"a"}}}' -H "Mcp-Session-Id: $A"
	post '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sandbox_read_file","arguments":{"path":"who"}}}' -H "Mcp-Session-Id: $B"
	jqe '.result.isError == true and .result.structuredContent.error.code == "not_found"'
}

@test "without a session only initialize, ping and 2026-07-28 requests are served" {
	start
	post '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
	[ "$code" = 400 ]
	post '{"jsonrpc":"2.0","id":1,"method":"ping"}'
	[ "$code" = 200 ]
	jqe '.result == {}'
	post '{"jsonrpc":"2.0","id":"m","method":"tools/call","params":{"name":"run_lua","arguments":{"script":"return 3"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
	[ "$code" = 200 ]
	jqe '.result.resultType == "complete" and .result.structuredContent.result == 3'
	[ -z "$(session_of)" ]
	post 'not json'
	[ "$code" = 200 ]
	jqe '.error.code == -32700'
	post '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}'
	jqe '.error.code == -32602'
	[ -z "$(session_of)" ]
}

@test "DNS rebinding: a foreign Host or Origin is 403 before anything runs; loopback names pass" {
	start
	port=$PORT
	post "$INIT" -H 'Host: evil.example.com'
	[ "$code" = 403 ]
	post "$INIT" -H 'Origin: http://evil.example.com'
	[ "$code" = 403 ]
	post "$INIT" -H "Origin: https://localhost:$port"
	[ "$code" = 403 ]
	post "$INIT" -H "Host: localhost:$port" -H "Origin: http://localhost:$port"
	[ "$code" = 200 ]
	post "$INIT" -H "Origin: http://[::1]:$port"
	[ "$code" = 200 ]
}

@test "a bearer token when the operator gives one: 401 without it or with another" {
	printf 's3cret-token\n' >"$T/token"
	start --token-file "$T/token"
	post "$INIT"
	[ "$code" = 401 ]
	grep -qi '^WWW-Authenticate: Bearer' "$T/headers"
	post "$INIT" -H 'Authorization: Bearer s3cret-tokem'
	[ "$code" = 401 ]
	post "$INIT" -H 'Authorization: Bearer s3cret-token-and-more'
	[ "$code" = 401 ]
	post "$INIT" -H 'Authorization: Bearer s3cret-token'
	[ "$code" = 200 ]
}

@test "GET is 405, other paths 404, a body past max_message_bytes 413" {
	printf '{"box-mcp": {"max_message_bytes": 1024}}\n' >"$T/policy.json"
	start --policy "$T/policy.json"
	run curl -s -o /dev/null -w '%{http_code}' "$URL"
	[ "$output" = 405 ]
	run curl -s -o /dev/null -w '%{http_code}' -X POST "${URL%/mcp}/other" -d '{}'
	[ "$output" = 404 ]
	post "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"pad\":\"$(head -c 2000 /dev/zero | tr '\0' a)\"}}"
	[ "$code" = 413 ]
}

@test "--token-file goes with --http-port; a bad token file is a usage error" {
	printf 'x\n' >"$T/token"
	run --separate-stderr box-mcp --token-file "$T/token" </dev/null
	assert_failure 2
	one_json_where '.error.code == "usage"'
	: >"$T/empty"
	run --separate-stderr box-mcp --http-port 0 --token-file "$T/empty"
	assert_failure 2
}

@test "SIGTERM ends the server and the sessions' sandboxes" {
	start
	post "$INIT"
	S=$(session_of)
	post '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sandbox_exec","arguments":{"command":"true"}}}' -H "Mcp-Session-Id: $S"
	sb=$(jq -r .result.structuredContent.session <<<"$output")
	[ -f "$BOX_STATE_DIR/sandboxes/$sb/state.json" ]
	kill -TERM "$PID"
	wait "$PID"
	PID=
	[ ! -e "$BOX_STATE_DIR/sandboxes/$sb" ]
}

@test "a call with a progressToken is answered as an event stream: its progress, then its response" {
	start
	post "$INIT"
	S=$(session_of)
	run curl -s -N -D "$T/headers" -X POST "$URL" -H "Mcp-Session-Id: $S" \
		-H 'Accept: application/json, text/event-stream' \
		--data-binary '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sandbox_exec","arguments":{"command":"echo one; sleep 0.3; echo two"},"_meta":{"progressToken":"p"}}}'
	assert_success
	grep -qi '^Content-Type: text/event-stream' "$T/headers"
	events=$(sed -n 's/^data: //p' <<<"$output")
	jq -s -e 'length == 3 and .[0].method == "notifications/progress" and .[0].params.message == "stdout: one\n" and .[1].params.progress > .[0].params.progress and .[2].id == 2 and .[2].result.structuredContent.stdout == "one\ntwo\n"' <<<"$events"
	# without the token, or without text/event-stream in Accept, one JSON body
	run curl -s -X POST "$URL" -H "Mcp-Session-Id: $S" -H 'Accept: application/json' \
		--data-binary '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sandbox_exec","arguments":{"command":"echo x"},"_meta":{"progressToken":"q"}}}'
	jqe '.id == 3 and .result.structuredContent.stdout == "x\n"'
}

@test "a client that leaves an event stream cancels its call: the command is killed" {
	local nap=37.$RANDOM
	start
	post "$INIT"
	S=$(session_of)
	run curl -s -N --max-time 1 -X POST "$URL" -H "Mcp-Session-Id: $S" \
		-H 'Accept: application/json, text/event-stream' \
		--data-binary "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"sandbox_exec\",\"arguments\":{\"command\":\"sleep $nap\"},\"_meta\":{\"progressToken\":1}}}"
	pgrep -f "sleep $nap" >/dev/null
	local i
	for i in $(seq 50); do
		pgrep -f "sleep $nap" >/dev/null || break
		sleep 0.1
	done
	run pgrep -f "sleep $nap"
	assert_failure
	post '{"jsonrpc":"2.0","id":3,"method":"ping"}' -H "Mcp-Session-Id: $S"
	[ "$code" = 200 ]
}
