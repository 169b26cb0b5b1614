#!/usr/bin/env bats
# Verified before use (issue 9): a tool artifact packed into the local registry, pinned by
# box-lock and pulled into the store runs from box-run --tools box.lock, from box-tool in a
# sandbox created with --tools box.lock, only while its store entry matches its tree digest.
# A changed, added or removed file is integrity_failed (exit 5) and nothing runs: the tool
# appends a line to $T/marks whenever it runs, so an empty marks file proves it did not.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	box_setup
	unset BOX_TOOL_DEPTH
	export BOX_HOME=$T/home BOX_STATE_DIR=$T/state HOME=$T
	mkdir -p "$T/art/bin"
	cat >"$T/art/box-artifact.json" <<-JSON
	{"name": "acme/mark", "version": "1.0.0", "kind": "tool", "entry": "greet.lua",
	 "tools": [
	  {"name": "mark", "description": "Notes that it ran",
	   "input_schema": {"type": "object", "properties": {"tamper": {"type": "boolean"}}},
	   "command": ["bin/mark.sh"]},
	  {"name": "greet", "description": "Greets", "input_schema": {"type": "object"}}
	 ]}
	JSON
	# it runs in its directory in the store; asked to, it changes that directory
	cat >"$T/art/bin/mark.sh" <<-SH
	#!/bin/sh
	echo ran >>'$T/marks'
	grep -q tamper && echo -- changed >>greet.lua
	echo '{"ran": true}'
	SH
	chmod 755 "$T/art/bin/mark.sh"
	echo 'return {greeting = "hello"}' >"$T/art/greet.lua"
	: >"$T/marks"
	run --separate-stderr box-pack "$T/art"
	assert_equal "$status" 0
	DIGEST=$(jq -er .digest <<<"$output")
	HEX=${DIGEST#sha256:}
	STORE=$BOX_HOME/store/sha256/$HEX
	echo '{"artifacts": {"acme/mark": "^1.0"}}' >box.json
	run --separate-stderr box-lock
	assert_equal "$status" 0
	run --separate-stderr box-pull acme/mark
	assert_equal "$status" 0
	[ -x "$STORE/bin/mark.sh" ]
	SESSIONS=()
}

teardown() {
	local s
	for s in "${SESSIONS[@]}"; do
		timeout 20 box-sandbox delete "$s" >/dev/null 2>&1 || true
	done
}

# runs: how many times the tool ran
runs() {
	wc -l <"$T/marks"
}

# edit_same_size: rewrites bin/mark.sh in place with other bytes of the same size, its mtime
# (to the nanosecond) and inode restored as they were
edit_same_size() {
	local f=$STORE/bin/mark.sh before
	before=$(stat -c '%s %i %.9Y' "$f")
	touch -r "$f" "$T/stamp"
	# in place, so that the inode stays: dd over the file without truncating it
	sed 's/echo ran/echo RAN/' "$T/art/bin/mark.sh" | dd of="$f" conv=notrunc status=none
	touch -r "$T/stamp" "$f"
	[ "$(stat -c '%s %i %.9Y' "$f")" = "$before" ]
	! cmp -s "$f" "$T/art/bin/mark.sh"
}

# assert_refused PROG FILE_PATTERN: exit 5, integrity_failed naming what changed, nothing ran
assert_refused() {
	BOX_PROG=$1 assert_fail integrity_failed 5 \
		"(.error.message | test(\"artifact acme/mark@1.0.0: .*$2.*box-pull\"))"
	assert_equal "$(runs)" 0
}

@test "box-run --tools box.lock runs a pulled tool whose store entry is as pulled" {
	run_box --tools box.lock -e 'return {tools.mark({}), tools.greet({})}'
	assert_ok '.result[0].ran == true and .result[1].greeting == "hello"'
	assert_equal "$(runs)" 1
	# the first use wrote the stat cache beside the entry; after it the check is stat-only,
	# and needs no helper at all
	[ -f "$BOX_HOME/store/sha256/$HEX.stat" ]
	BOX_LIBEXEC_DIR=/nonexistent run_box --tools box.lock -e 'return tools.mark({})'
	assert_ok '.result.ran == true'
	assert_equal "$(runs)" 2
}

@test "box-run: a tampered store file (same size, mtime restored) is integrity_failed, exit 5" {
	run_box --tools box.lock -e 'return 1'
	assert_ok
	edit_same_size
	run_box --tools box.lock -e 'return tools.mark({})'
	assert_refused box-run 'bin/mark.sh changed'
	# the cache never learns to vouch for a refused tree
	run_box --tools box.lock -e 'return tools.mark({})'
	assert_refused box-run 'bin/mark.sh changed'
	# the build's box-run finds its box-verify beside itself, as every helper
	BOX_LIBEXEC_DIR= run_box --tools box.lock -e 'return tools.mark({})'
	assert_refused box-run 'bin/mark.sh changed'
}

@test "box-run: an added and a removed store file are integrity_failed, exit 5" {
	echo 'os.exit()' >"$STORE/extra.lua"
	run_box --tools box.lock -e 'return tools.mark({})'
	assert_refused box-run 'extra.lua was added|does not match'
	rm "$STORE/extra.lua"
	run_box --tools box.lock -e 'return tools.mark({})'
	assert_ok '.result.ran == true'
	: >"$T/marks"
	rm "$STORE/greet.lua"
	run_box --tools box.lock -e 'return tools.mark({})'
	assert_refused box-run 'greet.lua was removed'
	# a Lua tool of an entry that changed is refused as well
	echo 'return {greeting = "hello"}' >"$STORE/greet.lua"
	echo '-- more' >>"$STORE/greet.lua"
	run_box --tools box.lock -e 'return tools.greet({})'
	assert_refused box-run 'greet.lua changed|does not match'
}

@test "box-run: every call is checked, not only the load: a change between calls stops the next" {
	run_box --tools box.lock -e 'tools.mark({tamper = true}) return tools.mark({})'
	assert_fail integrity_failed 5 '.error.message | test("greet.lua changed")'
	# the first call ran (and changed the store), the second did not
	assert_equal "$(runs)" 1
}

@test "box-run: chmod -x of a store file is integrity_failed; a mode the digest ignores is not" {
	chmod 700 "$STORE/bin/mark.sh"
	run_box --tools box.lock -e 'return tools.mark({})'
	assert_ok '.result.ran == true'
	: >"$T/marks"
	chmod 644 "$STORE/bin/mark.sh"
	run_box --tools box.lock -e 'return 1'
	assert_refused box-run 'bin/mark.sh changed'
}

@test "box-run: without tree_digest in box.lock the store's note is used; with neither, re-pull" {
	jq 'del(.artifacts[].tree_digest)' box.lock >lock.tmp && mv lock.tmp box.lock
	run_box --tools box.lock -e 'return tools.mark({})'
	assert_ok
	edit_same_size
	: >"$T/marks"
	run_box --tools box.lock -e 'return tools.mark({})'
	assert_refused box-run 'bin/mark.sh changed'
	rm "$BOX_HOME/store/sha256/$HEX.tree"
	run_box --tools box.lock -e 'return tools.mark({})'
	assert_refused box-run 'no tree digest is recorded'
}

@test "box-sandbox create --tools box.lock refuses a changed store entry, creates nothing" {
	[ "$(id -u)" = 0 ] || [ -r /proc/self/ns/user ] || skip "no user namespaces"
	edit_same_size
	SESSIONS+=(vc)
	run --separate-stderr box-sandbox create --session vc --tools box.lock
	# never verified before, the entry has no stat cache to tell which file changed
	assert_refused box-sandbox 'does not match its tree digest'
	[ ! -e "$BOX_STATE_DIR/sandboxes/vc" ]
	run --separate-stderr box-sandbox --describe --tools box.lock
	assert_refused box-sandbox 'does not match its tree digest'
}

@test "box-tool in a sandbox: a store file changed, added or removed after create is refused" {
	[ "$(id -u)" = 0 ] || [ -r /proc/self/ns/user ] || skip "no user namespaces"
	SESSIONS+=(vt)
	run -0 --separate-stderr box-sandbox create --session vt --tools box.lock
	run -0 --separate-stderr box-sandbox exec vt -- box-tool mark
	jqe '.exit_code == 0 and (.stdout | fromjson | .result.ran == true)'
	assert_equal "$(runs)" 1
	: >"$T/marks"
	edit_same_size
	run -1 --separate-stderr box-sandbox exec vt -- box-tool mark
	jqe '.exit_code == 5 and (.stdout | fromjson | .error.code == "integrity_failed" and
		(.error.message | test("bin/mark.sh changed")))'
	assert_equal "$(runs)" 0
	# put back as pulled (same content, new ctime): it runs again
	dd if="$T/art/bin/mark.sh" of="$STORE/bin/mark.sh" conv=notrunc status=none
	run -0 --separate-stderr box-sandbox exec vt -- box-tool mark
	jqe '.exit_code == 0'
	assert_equal "$(runs)" 1
	: >"$T/marks"
	echo x >"$STORE/bin/extra"
	run -1 --separate-stderr box-sandbox exec vt -- box-tool mark
	jqe '.exit_code == 5 and (.stdout | fromjson | .error.message | test("bin/extra was added"))'
	rm "$STORE/bin/extra" "$STORE/greet.lua"
	run -1 --separate-stderr box-sandbox exec vt -- box-tool greet
	jqe '.exit_code == 5 and (.stdout | fromjson | .error.message | test("greet.lua was removed"))'
	assert_equal "$(runs)" 0
}

@test "box-tool: a sandbox whose keeper first loads its tools after the store changed says why" {
	[ "$(id -u)" = 0 ] || [ -r /proc/self/ns/user ] || skip "no user namespaces"
	SESSIONS+=(vk)
	run -0 --separate-stderr box-sandbox create --session vk --tools box.lock
	# the keeper loads the tools at the first box-tool call, after this change
	edit_same_size
	run -1 --separate-stderr box-sandbox exec vk -- box-tool mark
	jqe '.exit_code == 5 and (.stdout | fromjson | .error.code == "integrity_failed")'
	assert_equal "$(runs)" 0
}
