#!/usr/bin/env bats
# box-sandbox on the host side: kernel objects named per instance (two state directories,
# one session id), a state directory too long for a unix socket address, and session
# records that cannot be read, which delete still removes with their processes.

load helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root (cgroups and namespaces as set up in CI)"
	sb_setup
	OTHER=$T/other-state
}

teardown() {
	sb_teardown
	if [ -d "$OTHER/sandboxes" ]; then
		BOX_STATE_DIR=$OTHER timeout 20 box-sandbox delete same >/dev/null 2>&1 || true
	fi
	if [ -n "${LONG:-}" ]; then
		BOX_STATE_DIR=$LONG timeout 20 box-sandbox delete long >/dev/null 2>&1 || true
	fi
}

# alive PID: the process exists and is not a zombie (an orphan's zombie may wait for an init
# that does not reap)
alive() {
	local st
	st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# gone PID...: each process ends within 20 s
gone() {
	local p
	for p in "$@"; do
		for _ in $(seq 400); do
			alive "$p" || break
			sleep 0.05
		done
		if alive "$p"; then
			echo "process $p still runs" >&2
			return 1
		fi
	done
}

# cg_of DIR ID: the group name the session's record names
cg_of() {
	jq -r '.provider_data.holder.cgroup_name' "$1/sandboxes/$2/state.json"
}

# cg_dirs NAME: the group directories of NAME that exist (v1: per controller; v2: one)
cg_dirs() {
	find /sys/fs/cgroup -maxdepth 3 -type d -path "*/box/$1" 2>/dev/null
}

@test "sessions of one id under two state directories have groups of their own" {
	run_sb create --session same --memory 104857600
	sb_ok
	BOX_STATE_DIR=$OTHER run --separate-stderr box-sandbox create --session same --memory 209715200
	sb_ok
	a=$(cg_of "$BOX_STATE_DIR" same)
	b=$(cg_of "$OTHER" same)
	[[ $a =~ ^same-[0-9a-f]{16}$ ]]
	[[ $b =~ ^same-[0-9a-f]{16}$ ]]
	[ "$a" != "$b" ]
	# the session's own note names the same instance
	jqe ".cgroup_name == \"$a\"" "$(cat "$BOX_STATE_DIR/sandboxes/same/instance.json")"
	# no group is named after the bare id
	[ -z "$(cg_dirs same)" ]
	if [ -r "/sys/fs/cgroup/memory/box/$a/memory.limit_in_bytes" ]; then
		assert_equal "$(cat "/sys/fs/cgroup/memory/box/$a/memory.limit_in_bytes")" 104857600
		assert_equal "$(cat "/sys/fs/cgroup/memory/box/$b/memory.limit_in_bytes")" 209715200
	elif [ -r "/sys/fs/cgroup/box/$a/memory.max" ]; then
		assert_equal "$(cat "/sys/fs/cgroup/box/$a/memory.max")" 104857600
		assert_equal "$(cat "/sys/fs/cgroup/box/$b/memory.max")" 209715200
	fi
	# a command of the first session outlives the delete of the second
	box-sandbox exec same --timeout-ms 60000 -- sh -c 'echo up > /workspace/up; sleep 30' \
		>/dev/null 2>&1 &
	bg=$!
	for _ in $(seq 200); do
		[ -e "$BOX_STATE_DIR/sandboxes/same/workspace/up" ] && break
		sleep 0.05
	done
	h=$(sb_holder same)
	BOX_STATE_DIR=$OTHER run --separate-stderr box-sandbox delete same
	sb_ok '.deleted == true'
	[ -z "$(cg_dirs "$b")" ]
	alive "$h"
	[ -n "$(cg_dirs "$a")" ]
	run_sb status same
	sb_ok '.observed == "running"'
	kill -9 "$bg" 2>/dev/null || true
	wait "$bg" 2>/dev/null || true
	run_sb delete same
	sb_ok
	[ -z "$(cg_dirs "$a")" ]
	gone "$h"
}

@test "a state directory of 200+ characters: create, exec, a tool call, delete" {
	LONG=$T/$(printf 'd%.0s' $(seq 60))/$(printf 'e%.0s' $(seq 60))/$(printf 'f%.0s' $(seq 60))
	mkdir -p "$LONG"
	[ "${#LONG}" -gt 200 ]
	export BOX_STATE_DIR=$LONG
	run_sb create --session long --tools "$BOX_SRCDIR/tests/fixtures/tools/tools.json"
	sb_ok
	run_sb exec long -- sh -c 'echo hi; box-tool echo --json "{\"items\": [1]}"'
	sb_ok '.ran == true and (.stdout | startswith("hi\n")) and (.stdout | contains("\"got\""))'
	run_sb exec long -- true
	sb_ok
	h=$(sb_holder long)
	run_sb delete long
	sb_ok '.deleted == true'
	gone "$h"
	[ ! -e "$LONG/sandboxes/long" ]
}

# corrupt ID KIND: replaces the record of session ID by one that cannot be read
corrupt() {
	local f=$BOX_STATE_DIR/sandboxes/$1/state.json
	case $2 in
	garbage) printf 'not json at all\n' >"$f" ;;
	truncated) head -c 40 "$f" >"$f.t" && mv "$f.t" "$f" ;;
	empty) : >"$f" ;;
	shape) echo '[1, 2, 3]' >"$f" ;;
	wrong-id) jq -c '.id = "someone-else"' "$f" >"$f.t" && mv "$f.t" "$f" ;;
	null-pdata) jq -c '.provider_data = null' "$f" >"$f.t" && mv "$f.t" "$f" ;;
	no-instance)
		printf 'garbage\n' >"$f"
		rm -f "$BOX_STATE_DIR/sandboxes/$1/instance.json"
		;;
	esac
}

@test "a corrupt record is deleted, and its processes and groups with it" {
	for kind in garbage truncated empty shape wrong-id null-pdata no-instance; do
		id=c-$kind
		run_sb create --session "$id"
		sb_ok
		run_sb exec "$id" -- sh -c 'echo x > /workspace/f'
		sb_ok
		h=$(sb_holder "$id")
		k=$(ps -o ppid= -p "$h" | tr -d ' ')
		cg=$(cg_of "$BOX_STATE_DIR" "$id")
		corrupt "$id" "$kind"
		# status answers, with the reason
		run_sb status "$id"
		[ "$status" -ne 0 ]
		one_json_where '.ok == false and .error.code == "invalid_request"'
		run_sb delete "$id"
		sb_ok '.deleted == true and .record_unreadable == true'
		[ ! -e "$BOX_STATE_DIR/sandboxes/$id" ]
		if [ "$kind" != no-instance ]; then
			gone "$h"
			[ -z "$(cg_dirs "$cg")" ]
		else
			# nothing names its instance any more: it is left, never looked for by id
			run_sb create --session "$id"
			sb_ok
			run_sb delete "$id"
			sb_ok
			alive "$h"
			kill -9 "$h" "$k" 2>/dev/null || true
			gone "$h" "$k"
			for d in $(cg_dirs "$cg"); do
				for _ in $(seq 100); do rmdir "$d" 2>/dev/null && break; sleep 0.05; done
			done
		fi
		# the id is free again, and a new session does not see the old files
		run_sb exec "$id" -- sh -c 'test ! -e /workspace/f && echo clean'
		sb_ok '.stdout == "clean\n"'
		run_sb delete "$id"
		sb_ok
	done
}
