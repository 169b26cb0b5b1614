#!/usr/bin/env bats
# box-sandbox against a hostile guest's file trees: the disk limit fails closed whatever the
# tree (depth, modes, entries, sparse files, links, unlinked files held open, host writes),
# any tree can be deleted and never comes back, and snapshots keep what a workspace holds.

load helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root (cgroups and namespaces as set up in CI)"
	sb_setup
}

teardown() {
	# an immutable file left by a failed test would keep its session forever
	[ -d "${BOX_STATE_DIR:-/nonexistent}/sandboxes" ] &&
		find "$BOX_STATE_DIR/sandboxes" -name imm -exec chattr -i {} + 2>/dev/null
	sb_teardown
}

MB8=8388608

# mk ID [CREATE-FLAG...]: a sandbox with an 8 MiB disk limit
mk() {
	local id=$1
	shift
	run_sb create --session "$id" --timeout-ms 60000 --disk-bytes $MB8 "$@"
	sb_ok
}

# deep N: shell text that makes a chain of N directories "d" below the current one and ends
# in the deepest
deep() {
	echo "i=0; while [ \$i -lt $1 ]; do mkdir d && cd d || exit 9; i=\$((i + 1)); done"
}

# over: the last exec was stopped at the disk limit, and said what holds it
over() {
	assert_equal "$status" 3
	jqe '.resource_limit == "disk" and .error.code == "limit_exceeded" and
		.error.limit == "disk" and .disk_limit == "walk"'
}

@test "300 and 1000 levels deep: what is written down there counts" {
	mk f1
	for n in 300 1000; do
		run_sb exec f1 -- sh -c "cd /workspace && mkdir t$n && cd t$n && $(deep $n) &&
			for f in a b c; do head -c 4194304 /dev/zero > \$f; done; sleep 1"
		over
		rm -rf "$BOX_STATE_DIR/sandboxes/f1/workspace/t$n"
	done
	run_sb exec f1 -- sh -c "cd /workspace && $(deep 1000) && echo fine"
	sb_ok '.stdout == "fine\n" and .disk_limit == "walk" and (has("disk_unmeasured") | not)'
}

@test "chmod 000 directories at several depths hide nothing" {
	mk f2
	run_sb exec f2 -- sh -c "cd /workspace && $(deep 400) &&
		for f in a b c; do head -c 4194304 /dev/zero > \$f; done &&
		cd /workspace && chmod 000 d/d/d/d/d/d/d/d/d/d d/d/d d && sleep 1"
	over
	run_sb exec f2 -- true
	over
}

@test "more entries than the operator's bound: the walk fails closed and says so" {
	BOX_DISK_WALK_MAX_ENTRIES=100 run_sb create --session f3 --disk-bytes $MB8
	sb_ok
	run_sb exec f3 -- sh -c 'cd /workspace && for i in $(seq 50); do : > f$i; done'
	sb_ok '.disk_limit == "walk"'
	BOX_DISK_WALK_MAX_ENTRIES=100 run_sb exec f3 -- sh -c 'cd /workspace && for i in $(seq 200); do : > f$i; done'
	over
	jqe '.disk_unmeasured | test("more than 100 entries")'
	# the bound is the operator's: without it the same tree is fine
	run_sb exec f3 -- true
	sb_ok
}

@test "sparse files count their blocks and hard links count once" {
	mk f4
	run_sb exec f4 -- sh -c 'cd /workspace && truncate -s 8000000 sparse && head -c 3000000 /dev/zero > a &&
		for i in $(seq 24); do ln a a$i; done && ls | wc -l'
	sb_ok '.stdout == "26\n" and .resource_limit == null'
	run_sb exec f4 -- sh -c 'cd /workspace && head -c 3000000 /dev/zero > b && head -c 3000000 /dev/zero > c && sleep 1'
	over
}

@test "fallocate is refused in the guest" {
	mk f5
	run_sb exec f5 -- sh -c 'fallocate -l 2G /workspace/f; echo "rc=$?"; fallocate -o 0 -l 1M /workspace/g; echo "rc=$?"'
	sb_ok '(.stdout | test("rc=1\nrc=1\n")) and (.stderr | test("not supported"))'
	[ "$(du -sk "$BOX_STATE_DIR/sandboxes/f5/workspace" | cut -f1)" -lt 1024 ]
}

@test "files unlinked but held open count" {
	mk f6
	run_sb exec f6 -- sh -c 'cd /workspace && exec 3>a 4>b && rm a b &&
		head -c 5000000 /dev/zero >&3 && head -c 5000000 /dev/zero >&4 && sleep 5 && echo survived'
	over
	refute_output --partial survived
	# a file unlinked and closed takes nothing
	run_sb exec f6 -- sh -c 'cd /workspace && head -c 5000000 /dev/zero > a && rm a && echo fine'
	sb_ok '.stdout == "fine\n"'
}

@test "host writes count with what is there" {
	mk f7
	run_sb exec f7 -- sh -c 'head -c 7000000 /dev/zero > /workspace/big'
	sb_ok
	head -c 2000000 /dev/zero | tr '\0' x >"$T/two"
	run_sb write f7 /workspace/more <"$T/two"
	assert_limit limit_exceeded disk $MB8 bytes
	[ ! -e "$BOX_STATE_DIR/sandboxes/f7/workspace/more" ]
	run_sb write f7 /workspace/small --content ok
	sb_ok
	# --input: what is copied in counts too, and an over-limit create leaves nothing
	head -c 9000000 /dev/zero >"$T/nine"
	run_sb create --session f7b --disk-bytes $MB8 --input "$T/nine"
	assert_limit limit_exceeded disk $MB8 bytes
	[ ! -e "$BOX_STATE_DIR/sandboxes/f7b" ]
	mkdir "$T/many"
	for i in 1 2 3; do head -c 3000000 /dev/zero >"$T/many/f$i"; done
	run_sb create --session f7c --disk-bytes $MB8 --input "$T/many"
	assert_limit limit_exceeded disk $MB8 bytes
	[ ! -e "$BOX_STATE_DIR/sandboxes/f7c" ]
	# a tree the walk cannot measure refuses host writes
	run_sb exec f7 -- sh -c 'for i in $(seq 20); do : > /workspace/e$i; done'
	sb_ok
	BOX_DISK_WALK_MAX_ENTRIES=10 run_sb write f7 /workspace/x --content x
	assert_limit limit_exceeded disk $MB8 bytes '(.error.message | test("cannot be measured"))'
}

# (devices: t-fswalk, since the guest may not mknod one)
@test "delete removes 1000 levels with FIFOs, sockets and links, and the id is new again" {
	mk f8
	run_sb exec f8 -- sh -c "cd /workspace && i=0; while [ \$i -lt 1000 ]; do mkdir d && cd d || exit 9;
		if [ \$((i % 100)) = 0 ]; then mkfifo p && ln -s /etc/passwd abs && ln -s ../../.. up &&
		echo x > f && ln f hard || exit 8;
		if [ -x /usr/bin/python3 ]; then /usr/bin/python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"s\")' || exit 7; fi; fi;
		i=\$((i + 1)); done;
		cd /workspace && find . -type s | wc -l && chmod 555 d/d/d/d/d && chmod 000 d/d/d d"
	sb_ok
	[ ! -x /usr/bin/python3 ] || jqe '.stdout == "10\n"'
	run_sb delete f8
	sb_ok '.deleted == true'
	[ ! -e "$BOX_STATE_DIR/sandboxes/f8" ]
	[ -s /etc/passwd ]
	mk f8
	run_sb exec f8 -- sh -c 'ls -A /workspace | wc -l'
	sb_ok '.stdout == "0\n"'
}

@test "a locked /output 300 deep fails no later exec, delete or create" {
	mk f9
	run_sb exec f9 -- sh -c 'mkdir -p /output/$(seq -s/ 300) && chmod 000 /output/1/2/3 /output/1'
	run_sb exec f9 -- echo alive
	sb_ok '.stdout == "alive\n"'
	run_sb exec f9 -- sh -c 'mkdir -p /output/$(seq -s/ 300) && chmod 000 /output/1/2/3 /output/1'
	run_sb delete f9
	sb_ok '.deleted == true'
	[ ! -e "$BOX_STATE_DIR/sandboxes/f9" ]
	mk f9
	run_sb exec f9 -- echo again
	sb_ok '.stdout == "again\n"'
}

@test "delete removes thousands of entries" {
	mk f10 --disk-bytes 1073741824
	run_sb exec f10 -- sh -c 'cd /workspace && for d in $(seq 20); do mkdir $d; (cd $d && for f in $(seq 250); do : > $f; done); done; find . | wc -l'
	sb_ok '.stdout == "5021\n"'
	run_sb delete f10
	sb_ok
	[ ! -e "$BOX_STATE_DIR/sandboxes/f10" ]
}

@test "a delete that fails keeps the session, and a retry finishes it" {
	mk f11
	run_sb exec f11 -- sh -c 'echo keep > /workspace/imm && mkdir -p /workspace/a/b && echo x > /workspace/a/b/c'
	sb_ok
	chattr +i "$BOX_STATE_DIR/sandboxes/f11/workspace/imm" 2>/dev/null ||
		skip "the file system of BOX_STATE_DIR has no immutable attribute"
	run_sb delete f11
	assert_fail io_error 8 '(.error.message | test("delete it again")) and (.error.message | test("imm"))'
	[ -f "$BOX_STATE_DIR/sandboxes/f11/state.json" ]
	run_sb status f11
	sb_ok
	chattr -i "$BOX_STATE_DIR/sandboxes/f11/workspace/imm"
	run_sb delete f11
	sb_ok '.deleted == true'
	[ ! -e "$BOX_STATE_DIR/sandboxes/f11" ]
	run_sb status f11
	assert_fail not_found 6
}

@test "a new create never inherits a leftover tree of the same id" {
	mk f12
	run_sb delete f12
	sb_ok
	# what a crash or an old delete left behind: files, no record
	mkdir -p "$BOX_STATE_DIR/sandboxes/f12/workspace/$(seq -s/ 300)" "$BOX_STATE_DIR/sandboxes/f12/output"
	echo OLD >"$BOX_STATE_DIR/sandboxes/f12/workspace/secret"
	chmod 000 "$BOX_STATE_DIR/sandboxes/f12/workspace/1"
	mk f12
	run_sb exec f12 -- sh -c 'find /workspace /output -mindepth 1 | wc -l; cat /workspace/secret 2>/dev/null; true'
	sb_ok '.stdout == "0\n"'
	refute_output --partial OLD
}

@test "snapshots keep every symlink, leave FIFOs out and count them" {
	mk f13
	run_sb exec f13 -- sh -c 'cd /workspace && mkdir -p venv/bin venv/lib &&
		ln -s /usr/bin/python3 venv/bin/python && ln -s python venv/bin/python3 &&
		ln -s ../../../etc/passwd venv/out && ln -s /nonexistent dangling &&
		echo code > venv/lib/m.py && mkfifo fifo && mkfifo venv/fifo2'
	sb_ok
	run_sb snapshot f13
	sb_ok '.skipped == 2 and (.digest | startswith("sha256:"))'
	d=$(jq -r .digest <<<"$output")
	run_sb exec f13 -- sh -c 'rm -rf /workspace/* && echo new > /workspace/new'
	sb_ok
	run_sb restore f13 "$d"
	sb_ok
	run_sb exec f13 -- sh -c 'cd /workspace && readlink venv/bin/python venv/bin/python3 venv/out dangling &&
		cat venv/lib/m.py && ls -A'
	sb_ok '.stdout == "/usr/bin/python3\npython\n../../../etc/passwd\n/nonexistent\ncode\ndangling\nvenv\n"'
	# the links were never followed on the host
	[ ! -e "$BOX_STATE_DIR/sandboxes/f13/workspace/venv/lib/passwd" ]
	[ -s /etc/passwd ]
}

@test "a restore past disk_bytes replaces nothing; a failed removal of the old tree is io_error" {
	mk f14
	run_sb create --session f15 --disk-bytes 67108864
	sb_ok
	run_sb exec f15 -- sh -c 'head -c 12000000 /dev/zero > /workspace/big && echo small > /workspace/s'
	sb_ok
	run_sb snapshot f15
	sb_ok
	big=$(jq -r .digest <<<"$output")
	run_sb exec f14 -- sh -c 'echo mine > /workspace/imm'
	sb_ok
	run_sb restore f14 "$big" --from f15
	assert_limit limit_exceeded disk $MB8 bytes '(.error.message | test("nothing was replaced"))'
	run_sb exec f14 -- cat /workspace/imm
	sb_ok '.stdout == "mine\n"'
	[ -z "$(find "$BOX_STATE_DIR/sandboxes/f14" -name '.sbrestore*')" ]
	# the old tree cannot be removed: said, not hidden
	run_sb snapshot f14
	sb_ok
	mine=$(jq -r .digest <<<"$output")
	chattr +i "$BOX_STATE_DIR/sandboxes/f14/workspace/imm" 2>/dev/null ||
		skip "the file system of BOX_STATE_DIR has no immutable attribute"
	run_sb restore f14 "$mine"
	assert_fail io_error 8 '(.error.message | test("old tree"))'
	find "$BOX_STATE_DIR/sandboxes/f14" -name imm -exec chattr -i {} +
	run_sb delete f14
	sb_ok
	[ ! -e "$BOX_STATE_DIR/sandboxes/f14" ]
}
