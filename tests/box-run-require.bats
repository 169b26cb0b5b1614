#!/usr/bin/env bats
# box-run require(name): the kind-lua artifacts the operator's box.lock (--tools) pins, packed,
# locked and pulled into the test's own store as a user would. Each library is verified
# against its tree digest before any of it is read, loaded as text in the script's own
# environment, once per run; anything else is a typed error naming the library.

load helpers
bats_require_minimum_version 1.5.0

# lib DIR NAME ENTRY-SOURCE: a kind-lua artifact NAME in $T/art/DIR whose entry is init.lua
lib() {
	mkdir -p "$T/art/$1"
	printf '{"name": "%s", "version": "1.0.0", "kind": "lua", "entry": "init.lua"}\n' "$2" \
		>"$T/art/$1/box-artifact.json"
	printf '%s\n' "$3" >"$T/art/$1/init.lua"
	run --separate-stderr box-pack "$T/art/$1"
	assert_equal "$status" 0
}

setup() {
	box_setup
	unset BOX_TOOL_DEPTH
	export BOX_HOME=$T/home
	# the example library of the README, as shipped
	run --separate-stderr box-pack "$BATS_TEST_DIRNAME/../share/examples/strutil"
	assert_equal "$status" 0
	# counts its loads in a global of the script's environment; fs.write marks that it ran
	lib count acme/count 'LOADS = (LOADS or 0) + 1
if fs then fs.write("ran", "yes") end
return {name = ..., loads = LOADS, up = string.upper("x")}'
	lib bad acme/bad 'error("the library refuses")'
	lib cyca cyc-a 'return {b = require "cyc-b"}'
	lib cycb cyc-b 'return {a = require "cyc-a"}'
	lib none acme/none 'X_SET = true'
	lib absent acme/absent 'return 1'
	# a binary chunk (luac's output) in place of source text
	mkdir -p "$T/art/bin"
	printf '{"name": "acme/bin", "version": "1.0.0", "kind": "lua", "entry": "init.lua"}\n' \
		>"$T/art/bin/box-artifact.json"
	echo 'return {binary = true}' >"$T/src.lua"
	luac5.4 -o "$T/art/bin/init.lua" "$T/src.lua"
	run --separate-stderr box-pack "$T/art/bin"
	assert_equal "$status" 0
	mkdir -p "$T/art/tool"
	cat >"$T/art/tool/box-artifact.json" <<-'JSON'
	{"name": "acme/tool", "version": "1.0.0", "kind": "tool", "entry": "main.lua",
	 "tools": [{"name": "hi", "description": "Says hi", "input_schema": {"type": "object"}}]}
	JSON
	echo 'return {hi = true}' >"$T/art/tool/main.lua"
	run --separate-stderr box-pack "$T/art/tool"
	assert_equal "$status" 0
	cat >"$T/box.json" <<-'JSON'
	{"artifacts": {"strutil": "^1.0", "acme/count": "^1.0", "acme/bad": "^1.0",
	 "cyc-a": "^1.0", "cyc-b": "^1.0", "acme/none": "^1.0", "acme/absent": "^1.0",
	 "acme/bin": "^1.0", "acme/tool": "^1.0"}}
	JSON
	run --separate-stderr box-lock
	assert_equal "$status" 0
	run --separate-stderr box-pull strutil acme/count acme/bad cyc-a cyc-b acme/none acme/bin \
		acme/tool acme/absent
	assert_equal "$status" 0
	COUNT=$BOX_HOME/store/sha256/$(jq -er '.artifacts[] | select(.name == "acme/count") |
		.digest | ltrimstr("sha256:")' box.lock)
	[ -f "$COUNT/init.lua" ]
}

@test "require returns the library's table, strutil as the README shows it" {
	run_box --tools box.lock -e '
		local s = require "strutil"
		return {s.trim("  hi  "), table.concat(s.split("a,b,,c", ","), "|")}'
	assert_ok '.result == ["hi", "a|b||c"] and .stats.host_calls == 1'
}

@test "a library is loaded once per run, in the script's environment, called with its name" {
	run_box --tools box.lock -e '
		local a = require "acme/count"
		local b = require("acme/count")
		return {a == b, a.loads, LOADS, a.name, a.up, rawequal(require "acme/count", a)}'
	# one host call: the second and third require are answered inside the VM
	assert_ok '.result == [true, 1, 1, "acme/count", "X", true] and .stats.host_calls == 1'
	# each run loads it afresh
	run_box --tools box.lock -e 'return require("acme/count").loads'
	assert_ok '.result == 1'
}

@test "a library that returns nothing is true, and its globals are the script's" {
	run_box --tools box.lock -e 'return {require "acme/none", X_SET}'
	assert_ok '.result == [true, true]'
}

@test "require of a name box.lock does not pin is not_found naming it, exit 6" {
	run_box --tools box.lock -e 'return require "acme/nope"'
	assert_fail not_found 6 '.error.message | test("no Lua library acme/nope is pinned in box.lock")'
	# a script may catch it, as any host error
	run_box --tools box.lock -e 'local ok, e = pcall(require, "nope") return {ok, e}'
	assert_ok '.result[0] == false and (.result[1] | test("not_found: no Lua library nope"))'
	# a name box.lock could never hold
	run_box --tools box.lock -e 'return require ""'
	assert_fail not_found 6 '.error.message | test("no Lua library of that name")'
	run_box --tools box.lock -e 'return require "a\0b"'
	assert_fail not_found 6 '.error.message | test("no Lua library of that name")'
}

@test "require of a tool artifact is not_found: box.lock pins it with kind tool" {
	run_box --tools box.lock -e 'return require "acme/tool"'
	assert_fail not_found 6 '.error.message | test("no Lua library acme/tool: box.lock pins it as an artifact of kind tool")'
}

@test "require of a library pinned but not in the store is not_found: run box-pull" {
	local hex
	hex=$(jq -er '.artifacts[] | select(.name == "acme/absent") | .digest | ltrimstr("sha256:")' \
		box.lock)
	# box-pack left it in the store: take it out, as a store without it would be
	chmod -R u+w "$BOX_HOME/store/sha256/$hex"
	rm -rf "$BOX_HOME/store/sha256/$hex"*
	run_box --tools box.lock -e 'return require "acme/absent"'
	assert_fail not_found 6 '.error.message | test("artifact acme/absent@1.0.0 .* is not in the store .*run box-pull")'
}

# assert_refused PATTERN: exit 5, integrity_failed naming acme/count, and it did not run
assert_refused() {
	assert_fail integrity_failed 5 \
		"(.error.message | test(\"artifact acme/count@1.0.0: .*$1.*box-pull\"))"
	[ ! -e "$WS/ran" ]
}

@test "a tampered library (same size, mtime restored) is integrity_failed, exit 5, and not run" {
	run_box --tools box.lock -w "$WS" -e 'return require("acme/count").loads'
	assert_ok '.result == 1'
	rm "$WS/ran"
	local f=$COUNT/init.lua before
	before=$(stat -c '%s %i %.9Y' "$f")
	touch -r "$f" "$T/stamp"
	chmod u+w "$COUNT" "$f" 2>/dev/null || true
	sed 's/LOADS or 0/LOADS or 9/' "$T/art/count/init.lua" | dd of="$f" conv=notrunc status=none
	touch -r "$T/stamp" "$f"
	[ "$(stat -c '%s %i %.9Y' "$f")" = "$before" ]
	run_box --tools box.lock -w "$WS" -e 'return require("acme/count").loads'
	assert_refused 'init.lua changed'
	# pcall does not catch it: the run ends there
	run_box --tools box.lock -w "$WS" -e 'pcall(require, "acme/count") return 1'
	assert_refused 'init.lua changed'
}

@test "an added and a removed library file are integrity_failed, exit 5, and not run" {
	chmod u+w "$COUNT" 2>/dev/null || true
	echo 'return 1' >"$COUNT/extra.lua"
	run_box --tools box.lock -w "$WS" -e 'return require "acme/count"'
	assert_refused 'extra.lua was added|does not match'
	rm "$COUNT/extra.lua"
	mv "$COUNT/box-artifact.json" "$T/moved.json"
	run_box --tools box.lock -w "$WS" -e 'return require "acme/count"'
	assert_refused 'box-artifact.json|does not match'
}

@test "a binary chunk is refused: text only" {
	head -c 4 "$T/art/bin/init.lua" | od -c | grep -q 'L   u   a'
	run_box --tools box.lock -e 'return require "acme/bin"'
	assert_fail guest_error 1 '.error.message | test("require acme/bin: .*binary chunk")'
}

@test "a library that raises: its error ends the run, and a later require tries it again" {
	run_box --tools box.lock -e 'return require "acme/bad"'
	assert_fail guest_error 1 '.error.message | test("acme/bad@1.0.0:1: the library refuses")'
	run_box --tools box.lock -e '
		local a, e1 = pcall(require, "acme/bad")
		local b, e2 = pcall(require, "acme/bad")
		return {a, b, e1 == e2}'
	assert_ok '.result == [false, false, true] and .stats.host_calls == 2'
}

@test "a require cycle is an error naming the library, not a hang or a half-loaded table" {
	run_box --tools box.lock -e 'return require "cyc-a"'
	assert_fail guest_error 1 '.error.message | test("require cyc-a: a require cycle \\(cyc-a is still loading\\)")'
}

@test "without --tools require is absent; with a tool manifest it finds no library" {
	run_box -e 'return require == nil'
	assert_ok '.result == true'
	echo '{"tools": []}' >"$T/manifest.json"
	run_box --tools "$T/manifest.json" -e 'return require "strutil"'
	assert_fail not_found 6 '.error.message | test("no Lua library strutil: .*manifest.json is a tool manifest, not a box.lock")'
}

@test "the agent cannot name the lockfile: tools is the operator's" {
	run_box_json '{"script": "return require \"strutil\"", "tools": "box.lock"}'
	assert_fail policy_denied 4 '.error.path == "$.tools"'
}

@test "a recorded require replays without the store, and --trace names the library" {
	run_box --tools box.lock --record "$T/c.jsonl" -e 'return require("strutil").trim(" r ")'
	assert_ok '.result == "r"'
	chmod -R u+w "$BOX_HOME"
	rm -rf "$BOX_HOME"
	run_box --replay "$T/c.jsonl"
	assert_ok '.result == "r" and .stats.host_calls == 1'
	run_box --replay "$T/c.jsonl" --trace "$T/trace"
	jqe '.call == "require" and .name == "strutil" and .ok == true' "$(cat "$T/trace")"
}
