#!/usr/bin/env bats
# --describe --format mcp|openai|anthropic on every binary: only the members each framework
# allows, a name it accepts, and schemas a real validator (Debian's python3-jsonschema, JSON
# Schema 2020-12) takes with no external $ref; the schemas in share/ are self-contained.

load helpers

CHECK="/usr/bin/python3 $BOX_SRCDIR/tests/fixtures/check-tooldef.py"
RGOOD='{"ok":false,"error":{"code":"usage","message":"m"}}'
RBAD='{"ok":false,"error":{"code":"no_such_code","message":"m"}}'

setup() {
	box_setup
	/usr/bin/python3 -c 'import jsonschema' 2>/dev/null ||
		skip "Debian's python3-jsonschema is not installed"
}

# formats BINARY GOOD BAD: each format of BINARY --describe passes the checks
formats() {
	local bin=$1 good=$2 bad=$3 f
	for f in box mcp openai anthropic; do
		if [ $f = box ]; then
			run --separate-stderr "$bin" --describe
		else
			run --separate-stderr "$bin" --describe --format "$f"
		fi
		assert_success
		run $CHECK "$f" "$good" "$bad" "$RGOOD" "$RBAD" <<<"$output"
		assert_success
	done
}

@test "box-run --describe in every format" {
	formats box-run '{"script":"return 1"}' '{"script":1}'
}

@test "box-sandbox --describe in every format" {
	formats box-sandbox '{"op":"exec","session":"s1","argv":["true"]}' '{"op":"fly"}'
}

@test "box-pack, box-pull and box-lock --describe in every format (their error schema is bundled)" {
	# the built-in policy lets an agent set nothing of box-pack's
	formats box-pack '{}' '{"dir":"."}'
	formats box-pull '{"artifacts":["a@1.0.0"]}' '{"artifacts":"a"}'
	formats box-lock '{"frozen":true}' '{"frozen":"yes"}'
}

@test "--describe --tools keeps its form too: box-run and box-sandbox with a manifest" {
	local f
	for f in mcp openai anthropic; do
		run --separate-stderr box-run --describe --tools "$BOX_SRCDIR/tests/fixtures/tools/tools.json" --format "$f"
		assert_success
		run $CHECK "$f" '{"script":"return 1"}' '{}' "$RGOOD" "$RBAD" <<<"$output"
		assert_success
		run --separate-stderr box-sandbox --describe --format="$f" --tools "$BOX_SRCDIR/tests/fixtures/tools/tools.json"
		assert_success
		run $CHECK "$f" '{"op":"list"}' '{"op":1}' "$RGOOD" "$RBAD" <<<"$output"
		assert_success
		[[ $output != *allowed_hosts* ]]
	done
}

@test "the checks fail where they should: box's own form is no Anthropic tool, a bad request is caught" {
	run --separate-stderr box-run --describe
	run $CHECK anthropic '{"script":"return 1"}' '{"script":1}' <<<"$output"
	assert_failure
	run --separate-stderr box-run --describe --format anthropic
	run $CHECK anthropic '{"script":1}' '{"script":1}' <<<"$output"
	assert_failure
}

@test "--format: an unknown one is a usage error; without --describe it is an unknown option" {
	run --separate-stderr box-run --describe --format xml
	assert_failure 2
	one_json_where '.error.code == "usage" and (.error.message | contains("xml"))'
	run --separate-stderr box-run --format mcp -e 'return 1'
	assert_failure 2
	one_json_where '.error.code == "usage"'
}

@test "every schema in share/ is valid 2020-12 and self-contained; the bundled error schemas are box-run's" {
	local s
	for s in "$BOX_SRCDIR"/share/schema/*.json; do
		run /usr/bin/python3 -c '
import json, sys
from jsonschema import Draft202012Validator
s = json.load(open(sys.argv[1]))
Draft202012Validator.check_schema(s)
def walk(n):
    if isinstance(n, dict):
        for k, v in n.items():
            assert k != "$ref" or v.startswith("#"), "external $ref " + v
            walk(v)
    elif isinstance(n, list):
        for v in n: walk(v)
walk(s)' "$s"
		assert_success
	done
	for s in pack pull lock sandbox; do
		run --separate-stderr $CHECK schema "$RGOOD" "$RBAD" <"$BOX_SRCDIR/share/schema/box-$s.result.json"
		assert_success
		jq -e --slurpfile run "$BOX_SRCDIR/share/schema/box-run.result.json" \
			'."$defs".error == $run[0]."$defs".error' "$BOX_SRCDIR/share/schema/box-$s.result.json"
	done
}
