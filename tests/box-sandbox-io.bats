#!/usr/bin/env bats
# box-sandbox: bytes in and out of a session. exec streams the caller's stdin (never ignores
# it), write takes binary stdin, read --output writes raw bytes to a host file, cp-in and
# cp-out copy trees as tar streams through boxarchive (the guest's side hostile), and a
# truncated exec keeps head and tail around a marker naming a log that read takes.

load helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root (cgroups and namespaces as set up in CI)"
	sb_setup
}

teardown() {
	sb_teardown
}

# mk ID [CREATE-FLAG...]: a session
mk() {
	local id=$1
	shift
	run_sb create --session "$id" "$@"
	sb_ok
}

# tree_sum DIR: one digest of a tree's names, types, link targets and file contents
tree_sum() {
	(cd "$1" && find . -mindepth 1 -printf '%P %y %l\n' | LC_ALL=C sort &&
		find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum) | sha256sum | cut -d' ' -f1
}

# no_leftovers DIR: nothing half-written beside a host target
no_leftovers() {
	run find "$1" -maxdepth 1 -name '.box-cp-*'
	assert_output ""
}

@test "exec streams a piped stdin: text, binary bytes, EOF; --stdin wins; a command that stops reading ends; never --json or a terminal" {
	mk i1
	run --separate-stderr box-sandbox exec i1 -- cat < <(echo piped)
	sb_ok '.stdout == "piped\n"'
	head -c 3000000 /dev/urandom >"$T/bin"
	run --separate-stderr box-sandbox exec i1 -- sha256sum <"$T/bin"
	sb_ok ".stdout == \"$(sha "$T/bin")  -\n\""
	# /dev/null is an empty stream: the command sees its end at once
	run --separate-stderr box-sandbox exec i1 -- wc -c </dev/null
	sb_ok '.stdout == "0\n"'
	# --stdin is the command's stdin; the piped one is not read
	run --separate-stderr box-sandbox exec i1 --stdin given -- cat <"$T/bin"
	sb_ok '.stdout == "given"'
	# an endless stdin and a command that reads 5 bytes: the exec ends with it
	run --separate-stderr timeout 60 box-sandbox exec i1 -- head -c 5 < <(yes)
	sb_ok '.stdout == "y\ny\ny"'
	# a --json request came on stdin: its command reads /dev/null
	run --separate-stderr box-sandbox --json --session i1 <<<'{"op": "exec", "session": "i1", "argv": ["wc", "-c"]}'
	sb_ok '.stdout == "0\n"'
	# a terminal is never streamed: the command reads /dev/null (script gives a pty)
	command -v script >/dev/null && script -qec true /dev/null </dev/null >/dev/null 2>&1 ||
		skip "no script(1) or no pseudo-terminal here"
	run timeout 60 script -qec "box-sandbox exec i1 -- sh -c 'wc -c; readlink /proc/self/fd/0'" /dev/null </dev/null
	assert_equal "$status" 0
	assert_equal "$(tr -d '\r' <<<"$output" | jq -r .stdout)" "$(printf '0\n/dev/null')"
}

@test "200 MB of stdin through cat | sha256sum in the guest, with a small peak RSS" {
	mk i2 --timeout-ms 300000
	local want
	want=$(head -c 200000000 /dev/zero | sha256sum | cut -d' ' -f1)
	run --separate-stderr bash -c 'head -c 200000000 /dev/zero |
		/usr/bin/time -f %M -o "$1" box-sandbox exec i2 -- sh -c "cat | sha256sum"' _ "$T/rss"
	sb_ok ".stdout == \"$want  -\n\""
	# one 64 KiB chunk is held: measured about 6 MB; 200 MB would be far over
	[ "$(tail -n 1 "$T/rss")" -lt 40000 ]
}

@test "a 10 MB binary file round trip through write and read --output, by sha256" {
	mk i3
	head -c 10000000 /dev/urandom >"$T/r10"
	run_sb write i3 /workspace/r10 <"$T/r10"
	sb_ok '.size == 10000000'
	run --separate-stderr box-sandbox exec i3 -- sha256sum r10
	sb_ok ".stdout == \"$(sha "$T/r10")  r10\n\""
	run_sb read i3 r10 --output "$T/back"
	sb_ok ".size == 10000000 and .output == \"$T/back\" and (has(\"content\") | not)"
	assert_equal "$(sha "$T/back")" "$(sha "$T/r10")"
	# a symlink at the host file is replaced, never written through
	echo keep >"$T/victim"
	ln -s "$T/victim" "$T/link"
	run_sb read i3 r10 --output "$T/link"
	sb_ok
	[ ! -L "$T/link" ] && assert_equal "$(sha "$T/link")" "$(sha "$T/r10")"
	assert_equal "$(cat "$T/victim")" keep
	# text stdin stays text
	run_sb write i3 t.txt <<<"héllo"
	sb_ok
	run_sb read i3 t.txt
	sb_ok '.content == "héllo\n" and .encoding == "utf-8"'
}

@test "cp-in and cp-out: a 10 MB file and a 2000-file, 40-level tree, compared by sha256" {
	mk i4 --timeout-ms 120000
	local d=$T/src p i
	mkdir -p "$d"
	head -c 10000000 /dev/urandom >"$d/big.bin"
	p=$d/deep
	for ((i = 1; i <= 40; i++)); do p=$p/l$i; done
	mkdir -p "$p"
	echo bottom >"$p/f"
	for ((i = 0; i < 2000; i++)); do
		printf '%d\n' "$i" >"$d/f$((i % 20))-$i"
	done
	chmod 755 "$d/f0-0"
	ln -s big.bin "$d/alias"
	run_sb cp-in i4 "$d" /workspace/tree
	sb_ok '.files == 2002 and .links == 1 and .bytes > 10000000 and .path == "/workspace/tree"'
	run --separate-stderr box-sandbox exec i4 -- sh -c 'sha256sum tree/big.bin; find tree | wc -l; stat -c %u tree/f1-1'
	sb_ok ".stdout == \"$(sha "$d/big.bin")  tree/big.bin\n2045\n0\n\""
	# an empty host directory is a target too
	mkdir "$T/out"
	run_sb cp-out i4 /workspace/tree "$T/out"
	sb_ok '.files == 2002 and .links == 1'
	assert_equal "$(tree_sum "$T/out")" "$(tree_sum "$d")"
	no_leftovers "$T"
	# and an absent one
	run_sb cp-out i4 tree "$T/out2"
	sb_ok
	assert_equal "$(tree_sum "$T/out2")" "$(tree_sum "$d")"
}

@test "cp-out of hostile guest trees: refused with the exact error, nothing left on the host" {
	mk i5 --disk-bytes 67108864
	local c want
	# the list comes on fd 4: the execs in the loop stream their stdin
	while IFS='|' read -r -u 4 c want; do
		run --separate-stderr box-sandbox exec i5 -c "rm -rf /workspace/h; mkdir /workspace/h; cd /workspace/h; $c"
		sb_ok
		run_sb cp-out i5 /workspace/h "$T/got"
		eval "$want"
		[ ! -e "$T/got" ]
		no_leftovers "$T"
	done 4<<'EOF'
ln -s /etc out|assert_fail policy_denied 4 '.error.path == "out"'
mkdir a; ln -s ../../../etc a/up|assert_fail policy_denied 4 '.error.path == "a/up"'
touch "$(printf 'a\nb')"|assert_fail invalid_request 2 '.error.path == "a\nb"'
for i in $(seq 70); do mkdir d; cd d; done|assert_limit limit_exceeded depth 64 levels
truncate -s 60M s1 s2|assert_limit limit_exceeded bytes 67108864 bytes
for i in $(seq 10001); do : > f$i; done|assert_limit limit_exceeded entries 10000 entries
mkfifo p|assert_fail invalid_request 2 '.error.path == "p"'
EOF
	# the named directory itself a symlink out of the workspace
	run --separate-stderr box-sandbox exec i5 -c 'rm -rf /workspace/h; ln -s /etc /workspace/h'
	sb_ok
	run_sb cp-out i5 /workspace/h "$T/got"
	assert_fail policy_denied 4
	[ ! -e "$T/got" ]
}

@test "a truncated exec keeps head and tail around the marker; the full log is read through the session" {
	mk i6 --max-output-bytes 100
	run_sb exec i6 -- sh -c 'seq 1 10000; echo "error: at the end" >&2'
	sb_ok '.truncated == true and (.full_output_log | test("^/logs/exec-[0-9]+-[0-9]+\\.log$"))'
	local log out
	log=$(jq -r .full_output_log <<<"$output")
	out=$(jq -r .stdout <<<"$output")
	# 50 bytes of head, the marker line, 50 bytes of tail
	assert_equal "$(head -c 50 <<<"$out")" "$(seq 1 10000 | head -c 50)"
	assert_equal "$(tail -c 50 <<<"$out")" "$(seq 1 10000 | tail -c 50)"
	run grep -cxF "[box-sandbox: 48794 bytes cut here; the whole output is in $log]" <<<"$out"
	assert_output 1
	run_sb read i6 "$log" --output "$T/full"
	sb_ok
	assert_equal "$(grep -cx '[0-9]*' "$T/full")" 10000
	grep -qx "error: at the end" "$T/full"
	# not a stream that fits: no marker
	run_sb exec i6 -- echo short
	sb_ok '.stdout == "short\n" and .truncated == false and (has("full_output_log") | not)'
	# /logs is read-only, and holds exec logs only
	run_sb write i6 "$log" --content x
	assert_fail policy_denied 4 '.error.path == "$.path"'
	run_sb read i6 /logs/../state.json
	assert_fail policy_denied 4
}

@test "bad input: exact error, exit status, nothing written or left behind" {
	mk i7
	mkdir -p "$T/src" "$T/full"
	echo x >"$T/src/a"
	echo keep >"$T/full/k"
	# no such session: nothing made
	run_sb cp-in nosuch "$T/src" /workspace/t
	assert_fail not_found 6
	run_sb cp-out nosuch /workspace "$T/o1"
	assert_fail not_found 6
	[ ! -e "$BOX_STATE_DIR/sandboxes/nosuch" ] && [ ! -e "$T/o1" ]
	# guest paths outside the file API, and /input is read-only
	run_sb cp-in i7 "$T/src" /etc/t
	assert_fail policy_denied 4 '.error.path == "$.path"'
	run_sb cp-in i7 "$T/src" /input/t
	assert_fail policy_denied 4 '.error.path == "$.path"'
	run_sb cp-in i7 "$T/src" /workspace/../../x
	assert_fail policy_denied 4
	run_sb cp-out i7 /workspace/nothere "$T/o2"
	assert_fail not_found 6
	[ ! -e "$T/o2" ]
	# a host directory that does not exist
	run_sb cp-in i7 "$T/nothere" /workspace/t
	assert_fail not_found 6
	# targets with entries are not merged into
	run_sb cp-in i7 "$T/src" /workspace/t
	sb_ok
	run_sb cp-in i7 "$T/src" /workspace/t
	assert_fail conflict 7
	run_sb cp-out i7 /workspace/t "$T/full"
	assert_fail conflict 7
	assert_equal "$(ls -A "$T/full")" k
	no_leftovers "$T"
	# read --output into a directory that does not exist
	run_sb read i7 t/a --output "$T/nodir/f"
	assert_fail not_found 6 '.error.path == "$.output"'
	[ ! -e "$T/nodir" ]
	# an agent's request names no host path
	for req in '{"op": "read", "session": "i7", "path": "t/a", "output": "'"$T"'/pwned"}' \
		'{"op": "cp-out", "session": "i7", "path": "t", "host_dir": "'"$T"'/pwned"}' \
		'{"op": "cp-in", "session": "i7", "path": "u", "host_dir": "'"$T"'/src"}'; do
		run --separate-stderr box-sandbox --json --session i7 <<<"$req"
		assert_fail policy_denied 4 '(.error.path | test("^\\$\\.(output|host_dir)$"))'
	done
	[ ! -e "$T/pwned" ]
	run --separate-stderr box-sandbox exec i7 -- ls /workspace
	sb_ok '.stdout == "t\n"'
}

@test "a caller with stdin, stdout or stderr closed: box opens /dev/null there, so none of its own files takes fd 0, 1 or 2" {
	local st
	mk c1
	# stdin closed (not through bats' run, whose own pipe would take fd 0): the command reads
	# an empty stdin, and the result is whole
	box-sandbox exec c1 -- sh -c 'wc -c; echo done' 0<&- >"$T/out" 2>"$T/err" || st=$?
	assert_equal "${st:-0}" 0
	run jq -e '.ok == true and .stdout == "0\ndone\n"' "$T/out"
	assert_success
	[ ! -s "$T/err" ]
	# stdout closed: the results go nowhere, never into a file of the session
	box-sandbox exec c1 -- sh -c 'echo hi > /workspace/f' 1>&-
	box-sandbox write c1 /workspace/g --content abc 1>&- 2>&-
	box-sandbox exec c1 --events -- sh -c 'echo one; echo two >&2' 0<&- 1>&- 2>&-
	run_sb read c1 /workspace/g
	sb_ok '.content == "abc"'
	run_sb read c1 /workspace/f
	sb_ok '.content == "hi\n"'
	run_sb status c1
	sb_ok '.state == "running"'
	run find "$BOX_STATE_DIR" -type f -name '*.json' -exec sh -c 'jq -e . "$1" >/dev/null 2>&1 || echo "bad $1"' _ {} \;
	assert_output ""
	run grep -rlE '"stdout":|"event":' "$BOX_STATE_DIR/sandboxes" --include='*.json' --include='*.lock'
	assert_output ""
	# stderr closed: a failure keeps its exit status
	st=0
	box-sandbox status nosuch-c 0<&- >/dev/null 2>&- || st=$?
	assert_equal "$st" 6
	st=0
	box-sandbox exec c1 -- nosuch-command 0<&- >/dev/null 2>&- || st=$?
	assert_equal "$st" 1
	# the other binaries the same, with all three closed
	st=0
	box-run -e 'return 1' 0<&- 1>&- 2>&- || st=$?
	assert_equal "$st" 0
	box-run -e 'error("x")' 0<&- 1>&- 2>&- || st=$?
	assert_equal "$st" 1
	st=0
	box-pack --version 0<&- 1>&- 2>&- || st=$?
	box-sbfiles --help 0<&- 1>&- 2>&- || st=$?
	assert_equal "$st" 0
}
