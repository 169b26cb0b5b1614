#!/usr/bin/env bats
# box-sbfiles, the libexec helper of box-sandbox: /output listing, snapshot, restore, and the
# exit statuses of its errors.

load helpers

setup() {
	box_setup
	mkdir -p "$T/out/sub" "$T/snaps" "$T/sess" "$WS/dir"
	printf 'abc' >"$T/out/a.txt"
	printf '' >"$T/out/sub/empty"
	ln -s /etc/passwd "$T/out/link"
	mkfifo "$T/out/fifo"
	printf 'hello\n' >"$WS/hello.txt"
	printf '#!/bin/sh\n' >"$WS/dir/run.sh"
	chmod 4755 "$WS/dir/run.sh"
}

@test "--help and --version" {
	run -0 box-sbfiles --help
	assert_line --index 0 --partial 'box-sbfiles outputs'
	assert_output --partial 'box-sbfiles restore SNAP_DIR DIGEST DEST_PARENT NAME'
	run -0 box-sbfiles --version
	assert_output --regexp '^box-sbfiles \(box\) [0-9]'
}

@test "outputs lists files sorted with sha256, symlinks as symlinks, FIFOs left out" {
	run -0 --separate-stderr timeout 20 box-sbfiles outputs "$T/out"
	one_json_where '.ok == true and (.outputs | length == 3)
		and .outputs[0] == {"path": "a.txt", "size": 3,
			"sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}
		and .outputs[1] == {"path": "link", "type": "symlink"}
		and .outputs[2].path == "sub/empty" and .outputs[2].size == 0'
	[ -z "$stderr" ]
}

@test "outputs over --max-files is limit_exceeded, exit 3" {
	run -3 --separate-stderr box-sbfiles outputs --max-files 4 "$T/out"
	one_json_where '.ok == false and .error.code == "limit_exceeded" and .error.limit == "files"
		and .error.configured == 4'
	[[ $stderr == "box-sbfiles: limit_exceeded: "* ]]
	run -0 box-sbfiles outputs --max-files 5 "$T/out"
}

@test "outputs of a missing directory is not_found, exit 6" {
	run -6 --separate-stderr box-sbfiles outputs "$T/nope"
	one_json_where '.error.code == "not_found"'
}

@test "usage errors exit 2 with a JSON error" {
	run -2 --separate-stderr box-sbfiles
	one_json_where '.ok == false and .error.code == "usage"'
	run -2 --separate-stderr box-sbfiles frobnicate
	one_json_where '.error.code == "usage"'
	run -2 --separate-stderr box-sbfiles outputs
	one_json_where '.error.code == "usage"'
	run -2 --separate-stderr box-sbfiles outputs --max-files -1 "$T/out"
	one_json_where '.error.code == "usage"'
	run -2 --separate-stderr box-sbfiles snapshot "$WS"
	one_json_where '.error.code == "usage"'
	run -2 --separate-stderr box-sbfiles restore "$T/snaps" sha256:00 "$T/sess"
	one_json_where '.error.code == "usage"'
}

@test "snapshot twice gives one content-addressed archive and the same digest" {
	run -0 --separate-stderr box-sbfiles snapshot "$WS" "$T/snaps"
	one_json_where '.ok == true and (.digest | test("^sha256:[0-9a-f]{64}$")) and .existed == false
		and .files == 2'
	digest=$(jq -r .digest <<<"$output")
	[ -f "$T/snaps/${digest#sha256:}.tar.gz" ]
	[ "$(sha256sum <"$T/snaps/${digest#sha256:}.tar.gz" | cut -d' ' -f1)" = "${digest#sha256:}" ]
	run -0 box-sbfiles snapshot "$WS" "$T/snaps"
	one_json_where '.existed == true and .digest == $d' --arg d "$digest"
	[ "$(ls -A "$T/snaps" | wc -l)" -eq 1 ]
}

@test "restore twice gives identical trees, set-uid dropped, and replaces an existing tree" {
	run -0 box-sbfiles snapshot "$WS" "$T/snaps"
	digest=$(jq -r .digest <<<"$output")
	run -0 box-sbfiles restore "$T/snaps" "$digest" "$T/sess" one
	one_json_where '.ok == true and .digest == $d' --arg d "$digest"
	run -0 box-sbfiles restore "$T/snaps" "$digest" "$T/sess" two
	diff -r "$T/sess/one" "$T/sess/two"
	diff -r "$WS" "$T/sess/one"
	[ "$(stat -c %a "$T/sess/one/dir/run.sh")" = 755 ]
	echo junk >"$T/sess/one/junk"
	run -0 box-sbfiles restore "$T/snaps" "$digest" "$T/sess" one
	[ ! -e "$T/sess/one/junk" ]
	[ "$(ls -A "$T/sess")" = "$(printf 'one\ntwo')" ]
}

@test "restore of a tampered snapshot is integrity_failed, exit 5, old tree kept" {
	run -0 box-sbfiles snapshot "$WS" "$T/snaps"
	digest=$(jq -r .digest <<<"$output")
	run -0 box-sbfiles restore "$T/snaps" "$digest" "$T/sess" one
	echo keep >"$T/sess/one/marker"
	printf 'X' | dd of="$T/snaps/${digest#sha256:}.tar.gz" bs=1 seek=20 conv=notrunc 2>/dev/null
	run -5 --separate-stderr box-sbfiles restore "$T/snaps" "$digest" "$T/sess" one
	one_json_where '.ok == false and .error.code == "integrity_failed"'
	[[ $stderr == "box-sbfiles: integrity_failed: "* ]]
	[ "$(cat "$T/sess/one/marker")" = keep ]
	[ "$(ls -A "$T/sess")" = one ]
}

@test "restore errors: unknown digest exit 6, malformed digest exit 2" {
	run -6 --separate-stderr box-sbfiles restore "$T/snaps" "sha256:$(printf '%064d' 0)" "$T/sess" one
	one_json_where '.error.code == "not_found"'
	run -2 --separate-stderr box-sbfiles restore "$T/snaps" sha256:zz "$T/sess" one
	one_json_where '.error.code == "invalid_request"'
	[ ! -e "$T/sess/one" ]
}

@test "a tree with venv-like symlinks snapshots and restores identically, links kept as links" {
	mkdir -p "$WS/venv/bin" "$WS/venv/lib/python3.11/site-packages"
	printf '#!elf\n' >"$WS/venv/bin/python3.11"
	chmod 755 "$WS/venv/bin/python3.11"
	ln -s python3.11 "$WS/venv/bin/python"
	ln -s python3.11 "$WS/venv/bin/python3"
	ln -s lib "$WS/venv/lib64"
	ln -s ../../../../hello.txt "$WS/venv/lib/python3.11/site-packages/hello"
	ln -s missing "$WS/dangling"
	run -0 --separate-stderr box-sbfiles snapshot "$WS" "$T/snaps"
	one_json_where '.ok == true and .files == 3 and .existed == false'
	digest=$(jq -r .digest <<<"$output")
	run -0 box-sbfiles snapshot "$WS" "$T/snaps"
	one_json_where '.existed == true and .digest == $d' --arg d "$digest"
	run -0 box-sbfiles restore "$T/snaps" "$digest" "$T/sess" one
	run -0 box-sbfiles restore "$T/snaps" "$digest" "$T/sess" two
	diff -r --no-dereference "$WS" "$T/sess/one"
	diff -r --no-dereference "$T/sess/one" "$T/sess/two"
	[ -L "$T/sess/one/venv/bin/python" ]
	[ "$(readlink "$T/sess/one/venv/bin/python")" = python3.11 ]
	[ "$(readlink "$T/sess/one/venv/lib64")" = lib ]
	[ "$(readlink "$T/sess/one/dangling")" = missing ]
	[ "$(cat "$T/sess/one/venv/lib64/python3.11/site-packages/hello")" = hello ]
	[ "$(stat -c %a "$T/sess/one/venv/bin/python3.11")" = 755 ]
}

@test "snapshot keeps escaping and absolute symlinks as links; restore brings them back" {
	mkdir -p "$WS/venv/bin" "$T/sess"
	ln -s python3 "$WS/venv/bin/python"
	ln -s ../../../outside "$WS/venv/bin/esc"
	ln -s /usr/bin/python3 "$WS/venv/bin/python3"
	run --separate-stderr box-sbfiles snapshot "$WS" "$T/snaps"
	assert_success
	one_json_where '.ok == true and .skipped == 0'
	d=$(jq -r .digest <<<"$output")
	run --separate-stderr box-sbfiles restore "$T/snaps" "$d" "$T/sess" ws
	assert_success
	assert_equal "$(readlink "$T/sess/ws/venv/bin/python3")" /usr/bin/python3
	assert_equal "$(readlink "$T/sess/ws/venv/bin/esc")" ../../../outside
}

@test "snapshot leaves FIFOs out and counts them" {
	mkfifo "$WS/fifo"
	echo x >"$WS/f"
	run --separate-stderr timeout 20 box-sbfiles snapshot "$WS" "$T/snaps"
	assert_success
	one_json_where '.ok == true and .skipped == 1'
}

@test "restore with MAX_BYTES refuses a larger snapshot, limit disk, exit 3, nothing replaced" {
	head -c 5000 /dev/zero >"$WS/big"
	mkdir -p "$T/sess/ws"
	echo old >"$T/sess/ws/keep"
	run --separate-stderr box-sbfiles snapshot "$WS" "$T/snaps"
	assert_success
	d=$(jq -r .digest <<<"$output")
	run -3 --separate-stderr box-sbfiles restore "$T/snaps" "$d" "$T/sess" ws 4096
	one_json_where '.error.code == "limit_exceeded" and .error.limit == "disk" and .error.configured == 4096'
	assert_equal "$(cat "$T/sess/ws/keep")" old
	[ -z "$(ls -A "$T/sess" | grep -v '^ws$')" ]
	run -2 --separate-stderr box-sbfiles restore "$T/snaps" "$d" "$T/sess" ws 0
	run --separate-stderr box-sbfiles restore "$T/snaps" "$d" "$T/sess" ws 1000000
	assert_success
	[ -f "$T/sess/ws/big" ] && [ ! -e "$T/sess/ws/keep" ]
}
