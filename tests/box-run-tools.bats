#!/usr/bin/env bats
# box-run code mode: tools.<name>(input) against the tool manifest tests/fixtures/tools/
# codemode.json and a box.lock of Lua tools made in the test's own store. Each tool error
# reaches the script as a typed error (uncaught: the run's error and exit status), only the
# tools code mode may offer are offered, and a tool cannot open code mode again.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	box_setup
	FIX=$BATS_TEST_DIRNAME/fixtures/tools
	M=$FIX/codemode.json
	unset BOX_TOOL_DEPTH
}

# lua_tool_lock: a box.lock in $T pinning two tool artifacts in the store of BOX_HOME=$T/home:
# acme/greet, whose Lua tool greet is main.lua, and acme/slow, whose Lua tool slow loops
# (timeout_ms 300). Packed into the local registry and pulled, as a user would: the store
# records their tree digests, which every use of them is checked against.
lua_tool_lock() {
	local dir=$T/art/greet
	export BOX_HOME=$T/home
	mkdir -p "$dir" "$T/art/slow"
	cat >"$dir/box-artifact.json" <<-'JSON'
	{"name": "acme/greet", "version": "1.0.0", "kind": "tool", "entry": "main.lua",
	 "tools": [
	  {"name": "greet", "description": "Greets someone",
	   "input_schema": {"type": "object", "required": ["who"],
	                    "properties": {"who": {"type": "string"}}},
	   "output_schema": {"type": "object", "required": ["greeting"]}}]}
	JSON
	cat >"$dir/main.lua" <<-'LUA'
	if input.who == "err" then error("no greeting for err") end
	if input.who == "none" then return {other = 1} end
	return {greeting = "hello " .. input.who, same = (... == input), big = 9007199254740993,
	        nested = tools == nil and fs == nil and http == nil}
	LUA
	cat >"$T/art/slow/box-artifact.json" <<-'JSON'
	{"name": "acme/slow", "version": "1.0.0", "kind": "tool", "entry": "loop.lua",
	 "tools": [{"name": "slow", "description": "Loops", "timeout_ms": 300,
	            "input_schema": {"type": "object"}}]}
	JSON
	echo 'while true do end' >"$T/art/slow/loop.lua"
	box-pack "$dir" >/dev/null
	box-pack "$T/art/slow" >/dev/null
	echo '{"artifacts": {"acme/greet": "^1.0", "acme/slow": "^1.0"}}' >"$T/box.json"
	(cd "$T" && box-lock >/dev/null && box-pull acme/greet acme/slow >/dev/null)
}

# ======================================================================= calls and answers

@test "tools.echo returns the tool's JSON as Lua values: objects, arrays, exact integers" {
	run_box --tools "$M" -e '
		local r = tools.echo({x = 9007199254740993, list = {1, 2.5, {a = "b"}},
			obj = {k = {deep = true}}, s = "é"})
		local g = r.got
		return {math.type(g.x) == "integer", g.x == 9007199254740993, #g.list,
			math.type(g.list[1]), g.list[2], g.list[3].a, g.obj.k.deep, g.s, g.x}'
	assert_ok '.result[0:8] == [true, true, 3, "integer", 2.5, "b", true, "é"]'
	# jq reads numbers as doubles: the exact integer is checked in the text
	assert_output --partial ',9007199254740993]'
}

@test "tools.NAME() and tools.NAME({}) send an empty object, not an array" {
	run_box --tools "$M" -e 'return {next(tools.echo().got) == nil, next(tools.echo({}).got) == nil}'
	assert_ok '.result == [true, true] and .stats.host_calls == 2'
}

@test "an empty object reaches a tool as {}: json.object(), and what json.decode made" {
	run_box --tools "$M" -e '
		local r = tools.echo({opts = json.object(), list = json.array(), plain = {},
			back = json.decode("{\"e\": {}}")})
		return {json.encode(r.got), json.encode(tools.echo(r.got).got)}'
	assert_ok '.result[0] == "{\"back\":{\"e\":{}},\"list\":[],\"opts\":{},\"plain\":[]}" and
		.result[1] == .result[0]'
}

@test "a tool that times out is a timeout (exit 3) with its timeout_ms" {
	local t0=$(now_ms)
	run_box --tools "$M" -e 'return tools.sleep()'
	assert_limit timeout timeout_ms 300 ms '.error.message | test("tool sleep")'
	[ $(($(now_ms) - t0)) -lt 5000 ]
}

@test "a tool is given at most the time the run has left: the run times out" {
	local t0=$(now_ms)
	run_box --tools "$M" --timeout-ms 150 -e 'return tools.sleep()'
	assert_limit timeout wall 150 ms
	[ $(($(now_ms) - t0)) -lt 3000 ]
}

@test "a tool that prints invalid JSON is a guest_error (exit 1)" {
	run_box --tools "$M" -e 'return tools.garbage()'
	assert_fail guest_error 1 '.error.message | test("tool garbage printed invalid JSON")'
}

@test "a tool that exits non-zero is a guest_error with the tail of its stderr" {
	run_box --tools "$M" -e 'return tools.fail()'
	assert_fail guest_error 1 '.error.message | test("tool fail exited with status 2: .*boom: disk on fire")'
}

@test "a tool that floods its output is limit_exceeded (exit 3) on tool_output_bytes" {
	run_box --tools "$M" -e 'return tools.flood()'
	assert_limit limit_exceeded tool_output_bytes 1048576 bytes
}

@test "an input that violates the schema is invalid_request with its path" {
	run_box --tools "$M" -e 'return tools.echo({x = "seven"})'
	assert_fail invalid_request 2 '(.error.message | test("at \\$\\.x: expected integer, got string")) and
		.error.path == "$.x"'
}

@test "an input that cannot be JSON is a guest_error before any call" {
	run_box --tools "$M" -e 'return tools.echo({f = print})'
	assert_fail guest_error 1 '(.error.message | test("cannot convert a function")) and
		.stats.host_calls == 0'
}

@test "pcall catches a tool error, its code in the message, and the script goes on" {
	run_box --tools "$M" -e '
		local ok, e = pcall(tools.fail)
		local ok2, e2 = pcall(tools.flood)
		local ok3, e3 = pcall(tools.echo, {x = "no"})
		return {ok, e:match("^guest_error: tool fail") ~= nil, ok2,
			e2:match("^limit_exceeded") ~= nil, ok3, e3:match("^invalid_request") ~= nil,
			tools.echo({x = 4}).got.x}'
	assert_ok '.result == [false, true, false, true, false, true, 4]'
}

@test "stats.host_calls counts every tool call, failed ones too" {
	run_box --tools "$M" -e 'tools.echo(); pcall(tools.fail); tools.echo({x = 1}); return 1'
	assert_ok '.stats.host_calls == 3'
}

@test "with --events every tool call is traced as a tool_call event" {
	run_box --events --tools "$M" -e 'pcall(tools.fail); tools.echo(); return 1'
	assert_equal "$status" 0
	jq -s -e 'length == 3 and
		(.[0] | .event == "tool_call" and .name == "fail" and .ok == false and
			.error.code == "guest_error" and (.duration_ms | type == "number")) and
		(.[1] | .event == "tool_call" and .name == "echo" and .ok == true) and
		(.[2] | .event == "result" and .stats.host_calls == 2)' <<<"$output"
}

# ======================================================================= what is offered

@test "destructive, approval-needing and executor tools are absent from tools" {
	run_box --tools "$M" -e '
		local names = {}
		for k in pairs(tools) do names[#names + 1] = k end
		table.sort(names)
		return {names, rawget(tools, "rm") == nil, rawget(tools, "lua") == nil,
			tools.nope == nil}'
	assert_ok '.result == [["echo", "env", "fail", "flood", "garbage", "nested", "sleep"],
		true, true, true]'
}

@test "calling a destructive tool is policy_denied (exit 4)" {
	run_box --tools "$M" -e 'return tools.rm({path = "/"})'
	assert_fail policy_denied 4 '.error.message | test("tool rm is not offered in code mode: destructive")'
}

@test "calling a tool that needs approval is policy_denied" {
	run_box --tools "$M" -e 'return tools.deploy()'
	assert_fail policy_denied 4 '.error.message | test("tool deploy is not offered in code mode: requires approval")'
}

@test "calling an executor (box-run, box-sandbox, executor: true) is policy_denied" {
	local t
	for t in lua sandbox shell; do
		run_box --tools "$M" -e "return tools.$t({script = 'return 1'})"
		assert_fail policy_denied 4 ".error.message | test(\"tool $t is not offered in code mode: executor\")"
	done
}

@test "a refused tool is refused under pcall too, and nothing runs" {
	run_box --tools "$M" -e 'local ok, e = pcall(function() return tools.rm() end)
		return {ok, e}'
	assert_ok '.result[0] == false and (.result[1] | test("policy_denied: tool rm")) and
		.stats.host_calls == 0'
}

@test "recursion: a tool that runs box-run --tools gets policy_denied" {
	run_box --tools "$M" -e 'return tools.nested()'
	assert_fail guest_error 1 '.error.message | test("tool nested (failed|exited).*policy_denied.*code mode cannot be opened from a tool")'
}

@test "recursion: box-run --tools with BOX_TOOL_DEPTH set is refused (exit 4, \$.tools)" {
	BOX_TOOL_DEPTH=1 run --separate-stderr box-run --tools "$M" -e 'return 1'
	assert_fail policy_denied 4 '.error.path == "$.tools" and
		(.error.message | test("code mode cannot be opened from a tool"))'
	BOX_TOOL_DEPTH=1 run --separate-stderr box-run --json <<<"{\"script\": \"return 1\", \"tools\": \"$M\"}"
	assert_fail policy_denied 4 '.error.path == "$.tools"'
	# a tool may still run scripts, without tools
	BOX_TOOL_DEPTH=1 run --separate-stderr box-run -e 'return tools == nil'
	assert_ok '.result == true'
}

@test "credentials in box-run's environment do not reach a tool" {
	GITHUB_TOKEN=ghp-secret AWS_SECRET_ACCESS_KEY=aws-secret MY_API_KEY=k DB_PASSWORD=p \
		run --separate-stderr box-run --tools "$M" -e 'return tools.env()'
	assert_ok '(.result.env | has("GITHUB_TOKEN") or has("AWS_SECRET_ACCESS_KEY") or
			has("MY_API_KEY") or has("DB_PASSWORD") | not) and
		.result.env.BOX_TOOL_DEPTH == "1" and (.result.fds == [])'
	refute_output --partial secret
}

@test "a manifest that does not load fails the run before it starts" {
	echo '{"tools": [{"name": "x", "description": "d", "input_schema": {"type": "object"}, "comand": ["/bin/true"]}]}' >"$T/bad.json"
	run_box --tools "$T/bad.json" -e 'return 1'
	assert_fail invalid_request 2 '.error.path == "$.tools[0].comand" and
		(.error.message | test("bad.json"))'
	run_box --tools "$T/missing.json" -e 'return 1'
	assert_fail not_found 6 '.error.path == "$.tools"'
}

# ======================================================================= Lua tools (box.lock)

@test "a Lua tool of a box.lock runs in a box-run of its own: input, answer, exact integers" {
	lua_tool_lock
	run_box --tools "$T/box.lock" -e 'return tools.greet({who = "ada"})'
	assert_ok '.result.greeting == "hello ada" and .result.same == true and
		.result.nested == true and .stats.host_calls == 1'
	assert_output --partial '"big":9007199254740993'
}

@test "a Lua tool's input is validated, its errors and output schema enforced" {
	lua_tool_lock
	run_box --tools "$T/box.lock" -e 'return tools.greet({})'
	assert_fail invalid_request 2 '.error.message | test("missing required property")'
	run_box --tools "$T/box.lock" -e 'return tools.greet({who = "err"})'
	assert_fail guest_error 1 '.error.message | test("tool greet failed: guest_error: .*no greeting for err")'
	run_box --tools "$T/box.lock" -e 'return tools.greet({who = "none"})'
	assert_fail guest_error 1 '.error.message | test("tool greet returned invalid output")'
}

@test "a Lua tool that runs too long is a timeout with its timeout_ms" {
	lua_tool_lock
	local t0=$(now_ms)
	run_box --tools "$T/box.lock" -e 'return tools.slow()'
	assert_limit timeout timeout_ms 300 ms
	[ $(($(now_ms) - t0)) -lt 5000 ]
}

# ======================================================================= --describe

@test "--describe --tools lists exactly the tools code mode offers" {
	run_box --describe --tools "$M"
	assert_equal "$status" 0
	one_json_where '.name == "box-run" and (.tools | map(.name)) ==
			["echo", "env", "sleep", "garbage", "fail", "flood", "nested"] and
		(.tools[0] | has("input_schema") and has("description")) and
		.input_schema.type == "object" and .output_schema.type == "object" and
		(.description | test("tools\\.NAME\\(input\\)") and test("- echo: Answers its input") and
			test("\"x\":\\{\"type\":\"integer\"\\}") and (test("- rm:|- lua:|- shell:|- deploy:") | not))'
}

@test "--describe --tools names the hosts and methods --allow lets http reach" {
	run_box --tools "$M" -a 'GET,POST https://api.example.com/v1' -a github.com:443 --describe
	assert_equal "$status" 0
	one_json_where '(.allowed_hosts | length == 2) and
		.allowed_hosts[0] == {"host": "api.example.com", "port": 443, "schemes": ["https"],
			"path": "/v1", "methods": ["GET", "POST"]} and
		(.allowed_hosts[1] | .host == "github.com" and (has("methods") | not)) and
		(.description | test("https://api.example.com/v1 \\(GET, POST\\)") and
			test("github.com:443 \\(http or https, any method\\)"))'
}

@test "--describe without --tools is the plain tool definition" {
	run_box --describe
	assert_equal "$status" 0
	one_json_where 'keys == ["description", "input_schema", "name", "output_schema"] and
		(.description | test("tools\\.NAME") | not)'
}

@test "--describe --tools is refused inside a tool, and a bad manifest is an error" {
	BOX_TOOL_DEPTH=1 run --separate-stderr box-run --describe --tools "$M"
	assert_fail policy_denied 4
	run_box --describe --tools "$T/missing.json"
	assert_fail not_found 6
}

# ======================================================================= cost

@test "box-run loads no more shared libraries with code mode: no libcurl, libcrypto, libarchive" {
	command -v ldd >/dev/null || skip "ldd is not installed"
	run ldd "$(command -v box-run)"
	assert_equal "$status" 0
	refute_output --partial libcurl
	refute_output --partial libcrypto
	refute_output --partial libarchive
	refute_output --partial libseccomp
}
