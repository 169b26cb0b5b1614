#!/usr/bin/env bats
# box-sandbox --describe: the plain tool definition, and with --tools what a sandbox created
# with the same --tools, --mount and --input offers inside: the granted tools (exactly what
# box-tool list prints there), the mounts, the files of /input, and no network.

load helpers

setup() {
	sb_setup
	FIX=$BOX_SRCDIR/tests/fixtures/tools
	# a schema with an integer past 2^53: it must come out as written on both sides
	cat >"$T/tools.json" <<-JSON
	{"tools": [
	 {"name": "echo", "description": "Answers its input",
	  "input_schema": {"type": "object", "properties": {"items": {"type": "array",
	   "items": {"type": "integer", "maximum": 9007199254740993}}}},
	  "command": ["$FIX/echo.sh"]},
	 {"name": "count", "description": "Answers a count", "input_schema": {"type": "object"},
	  "output_schema": {"type": "object", "properties": {"count": {"type": "integer"}}},
	  "command": ["$FIX/count.sh"]},
	 {"name": "wipe", "description": "Deletes things", "input_schema": {"type": "object"},
	  "command": ["/bin/true"], "destructive": true},
	 {"name": "ship", "description": "Needs a person", "input_schema": {"type": "object"},
	  "command": ["/bin/true"], "requires_approval": true}
	]}
	JSON
}

teardown() {
	sb_teardown
}

# tools_text: the bytes of the "tools" array in $output, a describe object whose "tools" is
# the first member holding an array (the request schema's "tools" is an object) and is
# followed by "mounts" (as box_sandbox_describe orders them)
tools_text() {
	local rest=${output#*\"tools\":\[}
	rest=${rest%%,\"mounts\":*}
	printf '[%s' "$rest"
}

@test "--describe without --tools is the plain tool definition" {
	run_sb --describe
	assert_equal "$status" 0
	one_json_where 'keys == ["description", "input_schema", "name", "output_schema"] and
		.name == "box-sandbox" and .input_schema.type == "object" and
		(.description | test("box-tool") | not)'
	# --mount and --input alone change nothing either
	local plain=$output
	run_sb --describe --mount "$T:/data" --input "$T/tools.json"
	assert_equal "$status" 0
	assert_equal "$output" "$plain"
}

@test "--describe --tools lists every granted tool, the destructive ones too, and no network" {
	run_sb --describe --tools "$T/tools.json"
	assert_equal "$status" 0
	assert_equal "$stderr" ""
	one_json_where '.name == "box-sandbox" and .input_schema.type == "object" and
		.output_schema.type == "object" and
		(.tools | map(.name)) == ["echo", "count", "wipe", "ship"] and
		.tools[0] == {"name": "echo", "description": "Answers its input",
			"input_schema": .tools[0].input_schema, "destructive": false,
			"requires_approval": false} and
		(.tools[1] | has("output_schema")) and (.tools[0] | has("output_schema") | not) and
		.tools[2].destructive and .tools[3].requires_approval and
		.mounts == [] and .input_files == [] and .allowed_hosts == [] and
		(.description | test("box-tool NAME --FLAG VALUE") and test("box-tool list") and
			test("--json") and test("\n- echo: Answers its input\n  input schema: ") and
			test("- wipe \\(destructive\\): Deletes things") and
			test("- ship \\(requires approval\\): Needs a person") and
			test("/workspace") and test("/output") and
			test("/input is read-only. It is empty.") and
			test("Network: none"))'
	# integers keep their exact value, in the array and in the text
	[[ "$(tools_text)" == *'"maximum":9007199254740993'* ]]
	[[ "$output" == *'\"maximum\":9007199254740993'* ]]
}

@test "--describe --tools agrees byte for byte with box-tool list in a sandbox granted the file" {
	[ "$(id -u)" = 0 ] || [ -r /proc/self/ns/user ] || skip "no user namespaces"
	run_sb --describe --tools "$T/tools.json"
	assert_equal "$status" 0
	described=$(tools_text)
	[ -n "$described" ]
	run -0 --separate-stderr box-sandbox create --session d1 --tools "$T/tools.json"
	run -0 --separate-stderr box-sandbox exec d1 -- box-tool list
	listed=$(jq -j .stdout <<<"$output")
	# box-tool list prints {"ok":true,"tools":[...]}
	assert_equal "$listed" "{\"ok\":true,\"tools\":$described}"
	# a tool that the description names is callable as it says
	run -0 --separate-stderr box-sandbox exec d1 -- box-tool echo --items 1 --items 2
	jqe '.stdout | fromjson | .ok == true and .result.got.items == [1, 2]'
}

@test "--describe --tools shows the guest paths of --mount and the /input names of --input" {
	mkdir -p "$T/data" "$T/docs"
	echo hi >"$T/docs/notes.txt"
	run_sb --describe --tools "$T/tools.json" --mount "$T/data:/data:ro" \
		--mount "$T/docs:/srv/docs" --input "$T/docs/notes.txt" --input "$T/data"
	assert_equal "$status" 0
	one_json_where '.mounts == [{"path": "/data", "mode": "ro"}, {"path": "/srv/docs", "mode": "rw"}] and
		.input_files == ["/input/notes.txt", "/input/data/"] and
		(.description | test("It holds /input/notes.txt, /input/data/\\.") and
			test("Mounted: /data \\(read-only\\), /srv/docs \\(read-write\\)\\.")) and
		(tostring | contains($t) | not)' --arg t "$T/"
	# the same flags create a sandbox that has those files
	[ "$(id -u)" = 0 ] || [ -r /proc/self/ns/user ] || return 0
	run -0 --separate-stderr box-sandbox create --session d2 --tools "$T/tools.json" \
		--mount "$T/data:/data:ro" --mount "$T/docs:/srv/docs" --input "$T/docs/notes.txt" \
		--input "$T/data"
	run -0 --separate-stderr box-sandbox exec d2 -- sh -c 'ls -d /input/notes.txt /input/data /data /srv/docs'
	jqe '.exit_code == 0'
}

@test "a bad --tools file fails as create fails: invalid_request 2, not_found 6" {
	echo '{"tools":[{"name":"x"}]}' >"$T/bad.json"
	run_sb --describe --tools "$T/bad.json"
	assert_fail invalid_request 2 '.error.path == "$.tools[0].description"'
	run_sb --describe --tools "$T/missing.json"
	assert_fail not_found 6 '.error.path == "$.tools"'
	echo 'not json' >"$T/garbage.json"
	run_sb --describe --tools "$T/garbage.json"
	assert_fail invalid_request 2
	# a box.lock whose tool artifact was never pulled
	printf '{"lock_version": 1, "artifacts": [{"name": "a/t", "version": "1.0.0", "digest": "sha256:%s", "kind": "tool", "source": "oci:/r"}]}' \
		"$(printf '1%.0s' {1..64})" >"$T/box.lock"
	BOX_HOME=$T/home run --separate-stderr box-sandbox --describe --tools "$T/box.lock"
	assert_fail not_found 6 '.error.message | test("box-pull")'
	[ ! -e "$BOX_STATE_DIR/sandboxes" ] || [ -z "$(ls -A "$BOX_STATE_DIR/sandboxes")" ]
}

@test "bad --mount and --input fail as create fails, with their paths" {
	run_sb --describe --tools "$T/tools.json" --mount "$T/missing:/x"
	assert_fail not_found 6 '.error.path == "$.mount[0]"'
	run_sb --describe --tools "$T/tools.json" --mount "$T:/x" --mount "relative:/y"
	assert_fail invalid_request 2 '.error.path == "$.mount[1]"'
	run_sb --describe --tools "$T/tools.json" --input "$T/tools.json" --input "$T/missing"
	assert_fail not_found 6 '.error.path == "$.input[1]"'
	run_sb --describe --tools "$T/tools.json" --input "$T/"
	assert_fail invalid_request 2 '.error.path == "$.input[0]"'
	mkdir -p "$T/other"
	cp "$T/tools.json" "$T/other/tools.json"
	run_sb --describe --tools "$T/tools.json" --input "$T/tools.json" --input "$T/other/tools.json"
	assert_fail conflict 7 '.error.path == "$.input[1]"'
}

@test "--describe describes create only, and tools need the local provider" {
	run_sb exec s1 --describe --tools "$T/tools.json"
	assert_fail usage 2
	run_sb create --describe --tools "$T/tools.json"
	assert_equal "$status" 0
	one_json_where '(.tools | length) == 4'
	run_sb --describe --tools "$T/tools.json" --provider nosuch
	assert_fail unsupported 8 '.error.path == "$.provider"'
}
