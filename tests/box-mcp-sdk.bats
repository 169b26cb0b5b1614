#!/usr/bin/env bats
# box-mcp with a real client: the official MCP TypeScript SDK (@modelcontextprotocol/sdk from
# npm, run by Debian's nodejs) spawns it over stdio. The SDK is installed once into the build
# tree (tests/mcp-node, never committed); without node and npm, or without the npm registry,
# the suite skips and says why.

load helpers
load mcp-helpers

setup_file() {
	export MCP_NODE_DIR=$BOX_BUILDDIR/tests/mcp-node
	command -v node >/dev/null || { export MCP_SKIP="node is not installed (Debian: nodejs)"; return 0; }
	npm_into "$MCP_NODE_DIR" "@modelcontextprotocol/sdk@1"
}

setup() {
	[ -z "${MCP_SKIP:-}" ] || skip "$MCP_SKIP"
	box_setup
	export BOX_STATE_DIR=$T/state BOX_HOME=$T/home
	unset BOX_POLICY
}

sdk() {
	run --separate-stderr timeout 60 node "$BOX_SRCDIR/tests/fixtures/mcp-sdk-client.mjs" "$1"
	if [ "$status" -ne 0 ]; then
		echo "$output" >&2
		echo "$stderr" >&2
	fi
	assert_success
	assert_line "ok $1" || { echo "stderr: $stderr" >&2; false; }
}

@test "SDK client: initialize, then tools/list gives the five default tools with their schemas" {
	sdk list
}

@test "SDK client: calls each tool; structuredContent passes the SDK's outputSchema check; failures are isError" {
	sdk calls
}

@test "SDK client: onprogress sees the exec's output as it comes" {
	sdk progress
}

@test "SDK client: an aborted call is cancelled and its command killed" {
	sdk cancel
}

@test "SDK client: unknown tool, bad arguments, a session member, an unknown method are JSON-RPC errors" {
	sdk errors
}

@test "SDK client: two connections side by side have two sessions" {
	sdk sessions
	# both were deleted at disconnect
	[ -z "$(ls "$BOX_STATE_DIR/sandboxes" | grep -v '\.lock$')" ]
}
