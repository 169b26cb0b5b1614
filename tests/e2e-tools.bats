#!/usr/bin/env bats
# End to end for tools (issue 5): box-pack packs a tool artifact (a native sh tool and a Lua
# tool) and pushes it to docker-registry (distribution 2.8, htpasswd Basic auth, on
# 127.0.0.1, started and stopped here), box-lock pins it in box.lock, box-pull puts it in the
# store, and its tools are called from box-run (--tools box.lock, tools.NAME(...)) and from
# inside a box-sandbox (create --tools box.lock, box-tool NAME --flag v). In the sandbox the
# tool runs on the host side, from the store: its paths are host paths.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	command -v docker-registry >/dev/null || skip "docker-registry is not installed"
	command -v htpasswd >/dev/null || skip "htpasswd (apache2-utils) is not installed"
	R=$(mktemp -d "${BATS_RUN_TMPDIR:-/tmp}/e2e-tools.XXXXXX")
	PORT=$("$BATS_TEST_DIRNAME/fixtures/registry.sh" start "$R/reg" basic box pw-tools 3>&-)
	export R PORT
}

teardown_file() {
	[ -n "${R:-}" ] || return 0
	"$BATS_TEST_DIRNAME/fixtures/registry.sh" stop "$R/reg"
	rm -rf "$R"
}

setup() {
	box_setup
	unset BOX_TOOL_DEPTH
	export BOX_HOME=$T/home BOX_REGISTRY_AUTH=box:pw-tools HOME=$T BOX_STATE_DIR=$T/state
	REG=http://127.0.0.1:$PORT
	NAME=e2e/texttools-$BATS_TEST_NUMBER
	# the artifact: shout, a native tool (bin/shout.sh), and greet, a Lua tool (the entry)
	mkdir -p "$T/art/bin"
	cat >"$T/art/box-artifact.json" <<-JSON
	{"name": "$NAME", "version": "1.0.0", "kind": "tool", "entry": "greet.lua",
	 "tools": [
	  {"name": "shout", "description": "Upper-cases a text",
	   "input_schema": {"type": "object", "required": ["text"],
	     "properties": {"text": {"type": "string"},
	                    "times": {"type": "integer", "minimum": 1}}},
	   "command": ["bin/shout.sh"], "timeout_ms": 10000},
	  {"name": "greet", "description": "Greets someone",
	   "input_schema": {"type": "object", "required": ["who"],
	     "properties": {"who": {"type": "string"}}},
	   "output_schema": {"type": "object", "required": ["greeting"]}}
	 ]}
	JSON
	cat >"$T/art/bin/shout.sh" <<-'SH'
	#!/bin/sh
	# its working directory (the artifact in the store) and its depth, to show where it ran
	exec jq -c --arg cwd "$(pwd)" --arg depth "${BOX_TOOL_DEPTH:-}" \
		'{shouted: (.text | ascii_upcase), times: (.times // 1), cwd: $cwd, depth: $depth}'
	SH
	chmod 755 "$T/art/bin/shout.sh"
	echo 'return {greeting = "hello " .. input.who}' >"$T/art/greet.lua"
	SESSIONS=()
	cd "$T"
}

teardown() {
	local s
	for s in "${SESSIONS[@]}"; do
		timeout 20 box-sandbox delete "$s" >/dev/null 2>&1 || true
	done
}

# publish: box-pack to the registry, box-lock into box.lock, box-pull into the store; sets
# DIGEST and STORE (the artifact's directory in the store)
publish() {
	run --separate-stderr box-pack --registry "$REG" "$T/art"
	assert_equal "$status" 0
	jqe '.kind == "tool"'
	DIGEST=$(jq -er .digest <<<"$output")
	printf '{"registry":"%s","artifacts":{"%s":"^1.0"}}' "$REG" "$NAME" >box.json
	run --separate-stderr box-lock
	assert_equal "$status" 0
	jq -e --arg n "$NAME" --arg d "$DIGEST" \
		'.artifacts | length == 1 and .[0].name == $n and .[0].digest == $d and
			.[0].kind == "tool"' box.lock
	run --separate-stderr box-pull "$NAME"
	assert_equal "$status" 0
	STORE=$(jq -er .artifacts[0].path <<<"$output")
	[ "$STORE" = "$BOX_HOME/store/sha256/${DIGEST#sha256:}" ]
	[ -x "$STORE/bin/shout.sh" ]
}

@test "pack, lock, pull a tool artifact; box-run calls its native and its Lua tool" {
	run --separate-stderr box-pack --registry "$REG" "$T/art"
	assert_equal "$status" 0
	printf '{"registry":"%s","artifacts":{"%s":"^1.0"}}' "$REG" "$NAME" >box.json
	run --separate-stderr box-lock
	assert_equal "$status" 0
	# pinned but not in the store (box-lock fetched it there; a fresh machine has not):
	# the executors never fetch, they say what to run
	jqe '.artifacts[0].tree_digest | test("^sha256:")' "$(cat box.lock)"
	rm -rf "$BOX_HOME/store"
	run_box --tools box.lock -e 'return 1'
	assert_fail not_found 6 '.error.message | test("box-pull")'
	publish
	run --separate-stderr box-lock verify
	assert_equal "$status" 0
	jqe '.ok and (.problems | length == 0)'
	run_box --tools box.lock -e '
		local s = tools.shout({text = "hi", times = 2})
		local g = tools.greet({who = "ada"})
		return {s = s, g = g.greeting}'
	assert_ok '.result.s.shouted == "HI" and .result.s.times == 2 and
		.result.s.depth == "1" and .result.g == "hello ada" and .stats.host_calls == 2'
	# the native tool ran in its artifact's directory in the store
	one_json_where '.result.s.cwd == $d' --arg d "$STORE"
	# the pulled tools keep their schemas: a bad input is refused before the tool runs
	run_box --tools box.lock -e 'return tools.shout({text = "hi", times = 0})'
	assert_fail invalid_request 2 '.error.message | test("times")'
	run_box --tools box.lock -e 'return tools.greet({})'
	assert_fail invalid_request 2
}

@test "the pulled tool answers box-tool inside a box-sandbox created with --tools box.lock" {
	[ "$(id -u)" = 0 ] || [ -r /proc/self/ns/user ] || skip "no user namespaces"
	publish
	SESSIONS+=(et)
	run -0 --separate-stderr box-sandbox create --session et --tools box.lock
	jqe '.ok == true'
	run -0 --separate-stderr box-sandbox exec et -- box-tool shout --text hi --times 2
	jqe '.exit_code == 0 and (.stdout | fromjson | .ok == true and .result.shouted == "HI" and
		.result.times == 2 and .result.depth == "1")'
	# it ran on the host side, from the store: a host path, not a path of the sandbox
	one_json_where '.stdout | fromjson | .result.cwd == $d' --arg d "$STORE"
	run -0 --separate-stderr box-sandbox exec et -- box-tool shout --json '{"text": "ok"}'
	jqe '.stdout | fromjson | .result.shouted == "OK" and .result.times == 1'
	# the provenance names each tool granted with the store digest box.lock pins (issue 17)
	one_json_where '(.provenance.tools | length) >= 2 and
		(.provenance.tools | all(.digest == $d)) and
		(.provenance.tools | map(.name) | index("shout") != null)' --arg d "$DIGEST"
	# the host validates the input against the pulled schema
	run -1 --separate-stderr box-sandbox exec et -- box-tool shout --text hi --times 0
	jqe '.exit_code == 2 and (.stdout | fromjson | .error.code == "invalid_request")'
	run -1 --separate-stderr box-sandbox exec et -- box-tool shout
	jqe '.exit_code == 2 and (.stdout | fromjson | .error.message | test("--text"))'
	# a Lua tool: the host runs it in a box-run (the build's, first on PATH), flags or --json
	run -0 --separate-stderr box-sandbox exec et -- box-tool greet --who ada
	jqe '.exit_code == 0 and (.stdout | fromjson | .ok == true and
		.result.greeting == "hello ada")'
	run -0 --separate-stderr box-sandbox exec et -- box-tool greet --json '{"who": "bob"}'
	jqe '.exit_code == 0 and (.stdout | fromjson | .result == {"greeting": "hello bob"})'
	# its input schema is enforced by the host before box-run starts
	run -1 --separate-stderr box-sandbox exec et -- box-tool greet --json '{"who": 7}'
	jqe '.exit_code == 2 and (.stdout | fromjson | .error.code == "invalid_request" and
		.error.path == "$.who")'
	run -1 --separate-stderr box-sandbox exec et -- box-tool greet --json '{}'
	jqe '.exit_code == 2 and (.stdout | fromjson | .error.code == "invalid_request")'
}

@test "a Lua tool in a sandbox whose host has no box-run is unsupported, and says so" {
	[ "$(id -u)" = 0 ] || [ -r /proc/self/ns/user ] || skip "no user namespaces"
	local prefix exec_prefix bindir
	# the bindir this build was configured with, where the host looks after PATH
	prefix=$(sed -n 's/^prefix = //p' "$BOX_BUILDDIR/Makefile")
	eval "exec_prefix=$(sed -n 's/^exec_prefix = //p' "$BOX_BUILDDIR/Makefile")"
	eval "bindir=$(sed -n 's/^bindir = //p' "$BOX_BUILDDIR/Makefile")"
	[ -n "$bindir" ] || skip "no bindir in $BOX_BUILDDIR/Makefile"
	[ ! -x "$bindir/box-run" ] || skip "box-run is installed in $bindir"
	publish
	# box-sandbox and box-tool without box-run next to them (a copy: box looks beside the
	# file the binary really is), on a PATH without box-run
	mkdir "$T/bin"
	cp "$BOX_BUILDDIR/box-sandbox" "$T/bin/box-sandbox"
	SESSIONS+=(en)
	PATH="$T/bin:/usr/bin:/bin" run -0 --separate-stderr box-sandbox create --session en \
		--tools box.lock
	run -1 --separate-stderr box-sandbox exec en -- box-tool greet --who ada
	jqe '.exit_code == 8 and (.stdout | fromjson | .error.code == "unsupported" and
		(.error.message | test("no box-run")))'
	# its native tool still works
	run -0 --separate-stderr box-sandbox exec en -- box-tool shout --text hi
	jqe '.stdout | fromjson | .result.shouted == "HI"'
}

@test "box-sandbox --describe --tools box.lock agrees with box-tool list in that sandbox" {
	[ "$(id -u)" = 0 ] || [ -r /proc/self/ns/user ] || skip "no user namespaces"
	publish
	run --separate-stderr box-sandbox --describe --tools box.lock
	assert_equal "$status" 0
	one_json_where '(.tools | map(.name)) == ["shout", "greet"] and .allowed_hosts == [] and
		(.description | test("box-tool NAME") and test("- shout: Upper-cases a text"))'
	rest=${output#*\"tools\":\[}
	described="[${rest%%,\"mounts\":*}"
	SESSIONS+=(ed)
	run -0 --separate-stderr box-sandbox create --session ed --tools box.lock
	run -0 --separate-stderr box-sandbox exec ed -- box-tool list
	assert_equal "$(jq -j .stdout <<<"$output")" "{\"ok\":true,\"tools\":$described}"
	# box-run's --describe offers both to code mode too
	run_box --describe --tools box.lock
	assert_equal "$status" 0
	one_json_where '(.tools | map(.name)) == ["shout", "greet"]'
}
