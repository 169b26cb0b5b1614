#!/usr/bin/env bats
# box-sandbox, reproducing an agent's execs (issue 17): the provenance of every exec result,
# the cached digest of the guest's root filesystem, the bounded exec history.

load helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root (cgroups and namespaces as set up in CI)"
	sb_setup
}

teardown() {
	sb_teardown
}

# hist ID: the lines of ID's history file
hist() {
	cat "$BOX_STATE_DIR/sandboxes/$1/history.jsonl"
}

@test "every exec result carries a provenance, the same for the same request" {
	# the host's own system directories, walked for real
	unset BOX_SBREPRO_ROOTS
	run_sb exec r1 -- echo same
	sb_ok '.provenance | (.box_version | length > 0) and (.kernel | length > 0)
		and (.request_sha256 | test("^sha256:[0-9a-f]{64}$"))
		and (.policy_sha256 | test("^sha256:[0-9a-f]{64}$")) and .tools == []
		and (.rootfs.sha256 | test("^sha256:[0-9a-f]{64}$")) and .rootfs.entries > 100
		and .rootfs.complete == true'
	local first
	first=$(jq -c .provenance <<<"$output")
	# the second exec of the same request (the first created the session): the same object
	run_sb exec r1 -- echo same
	sb_ok
	assert_equal "$(jq -c .provenance <<<"$output")" "$first"
	run_sb exec r1 -- echo same
	sb_ok
	assert_equal "$(jq -c .provenance <<<"$output")" "$first"
	# another request: another request digest, the same system
	run_sb exec r1 -- echo other
	sb_ok
	jq -e --argjson f "$first" '.provenance | .request_sha256 != $f.request_sha256
		and .rootfs == $f.rootfs and .policy_sha256 == $f.policy_sha256
		and .box_version == $f.box_version' <<<"$output"
	# the request digest is that of the canonical request: members sorted, no whitespace
	run_sb --json --session r1 <<<'{"session": "r1", "argv": ["echo", "same"], "op": "exec"}'
	sb_ok
	jq -e --argjson f "$first" '.provenance.request_sha256 == $f.request_sha256' <<<"$output"
	local canon
	canon=$(printf '%s' '{"argv":["echo","same"],"op":"exec","session":"r1"}' | sha256sum | cut -d' ' -f1)
	jq -e --arg c "sha256:$canon" '.provenance.request_sha256 == $c' <<<"$output"
	# how the result is delivered is not part of the request
	run_sb exec r1 --events -- echo same
	assert_equal "$status" 0
	tail -n 1 <<<"$output" | jq -e --argjson f "$first" '.provenance == $f'
	# another policy: another policy digest
	echo '{"box-sandbox": {"max": {"timeout_ms": 1000}}}' >"$T/policy.json"
	run_sb exec r1 --policy "$T/policy.json" -- echo same
	sb_ok
	jq -e --argjson f "$first" '.provenance.policy_sha256 != $f.policy_sha256' <<<"$output"
	# a failed command has one as well
	run_sb exec r1 --command 'exit 3'
	assert_fail guest_error 1 '.provenance.rootfs.sha256 | test("^sha256:")'
}

@test "the provenance lists the tools the session was given" {
	run_sb create --session t1 --tools "$BATS_TEST_DIRNAME/fixtures/tools/tools.json"
	sb_ok
	run_sb exec t1 -- true
	sb_ok '(.provenance.tools | length) > 0 and (.provenance.tools | all(.name | length > 0))'
	local names
	names=$(jq -c '[.provenance.tools[].name]' <<<"$output")
	assert_equal "$names" "$(jq -c '[.tools[].name]' "$BATS_TEST_DIRNAME/fixtures/tools/tools.json")"
}

# fake_rootfs: a small tree as the guest's root filesystem, and a host-wide cache of this test
fake_rootfs() {
	fake=$T/fake
	cf=$T/xdg/box/rootfs.json
	mkdir -p "$fake/usr/lib/x/y" "$fake/etc"
	echo one >"$fake/usr/lib/x/y/f"
	echo conf >"$fake/etc/c"
	BOX_SBREPRO_ROOTS=$fake/usr:$fake/etc
	XDG_CACHE_HOME=$T/xdg
	export BOX_SBREPRO_ROOTS XDG_CACHE_HOME
}

# change_in_place: a file three levels down changed, same size, its directories' times put back
change_in_place() {
	local t
	t=$(stat -c %y "$fake/usr/lib/x" "$fake/usr/lib/x/y")
	sleep 0.05
	echo two >"$fake/usr/lib/x/y/f"
	touch -d "$(sed -n 1p <<<"$t")" "$fake/usr/lib/x"
	touch -d "$(sed -n 2p <<<"$t")" "$fake/usr/lib/x/y"
	assert_equal "$(stat -c %y "$fake/usr/lib/x" "$fake/usr/lib/x/y")" "$t"
}

# verifier_done: waits (bounded) until a verification walk has run and ended
verifier_done() {
	local lk=$T/xdg/box/rootfs.verify.lock i pid
	for ((i = 0; i < 600; i++)); do
		[ -s "$lk" ] && break
		sleep 0.2
	done
	pid=$(cat "$lk")
	[ -n "$pid" ]
	for ((i = 0; i < 600; i++)); do
		! kill -0 "$pid" 2>/dev/null && flock -n "$lk" true && break
		sleep 0.2
	done
	run ! kill -0 "$pid"
	flock -n "$lk" true
}

@test "the rootfs digest: the first session walks, the next take the host-wide cache; a file changed in place deep down is seen after a verification walk" {
	local fake cf d1 d2 v1 ino sf=$BOX_STATE_DIR/sandboxes/c1/rootfs.json bad i
	fake_rootfs
	BOX_SBREPRO_VERIFY_INTERVAL=3600
	export BOX_SBREPRO_VERIFY_INTERVAL
	# the first exec walks, and keeps the digest in the session's directory and the cache
	run_sb exec c1 -- true
	sb_ok
	jq -e '.version == 3 and (.digest | test("^sha256:[0-9a-f]{64}$")) and .entries == 5
		and .complete == true and .walk_ms >= 0 and .source == "walk"' "$sf"
	d1=$(jq -r .digest "$sf")
	ino=$(stat -c %i "$sf")
	jqe '.provenance.rootfs | .sha256 == "'"$d1"'" and .entries == 5 and .complete == true
		and .source == "walk" and (.verified_at | test("^[0-9]{4}-"))'
	v1=$(jq -r .provenance.rootfs.verified_at <<<"$output")
	jq -e --arg d "$d1" --arg v "$v1" --arg u "$fake/usr" '.version == 3 and .digest == $d
		and .verified_at == $v and (.dirs | index([$u]) != null)' "$cf"
	# the next execs read it: nothing is walked or written again
	run_sb exec c1 -- true
	sb_ok '.provenance.rootfs.sha256 == "'"$d1"'" and .provenance.rootfs.source == "walk"'
	assert_equal "$(stat -c %i "$sf")" "$ino"
	change_in_place
	# a new session takes the cache, no walk: the digest from before the change, which no
	# walk now gives; within the interval no verification starts (no lock file even)
	run_sb exec c2 -- true
	sb_ok '.provenance.rootfs | .sha256 == "'"$d1"'" and .source == "cache"
		and .verified_at == "'"$v1"'" and .entries == 5'
	jq -e --arg d "$d1" '.source == "cache" and .digest == $d' "$BOX_STATE_DIR/sandboxes/c2/rootfs.json"
	[ ! -e "$T/xdg/box/rootfs.verify.lock" ]
	# the interval passed: the next hit starts a verification, which rewrites the cache
	BOX_SBREPRO_VERIFY_INTERVAL=0 run_sb exec c3 -- true
	sb_ok '.provenance.rootfs.sha256 == "'"$d1"'" and .provenance.rootfs.source == "cache"'
	for ((i = 0; i < 600; i++)); do
		[ "$(jq -r .digest "$cf" 2>/dev/null)" != "$d1" ] && break
		sleep 0.2
	done
	d2=$(jq -r .digest "$cf")
	[ "$d2" != "$d1" ]
	verifier_done
	# sessions started after it see the change, in this state dir or another
	run_sb exec c4 -- true
	sb_ok '.provenance.rootfs | .sha256 == "'"$d2"'" and .source == "cache" and .entries == 5'
	BOX_STATE_DIR=$T/state2 run_sb exec c5 -- true
	sb_ok '.provenance.rootfs.sha256 == "'"$d2"'"'
	BOX_STATE_DIR=$T/state2 box-sandbox delete c5 >/dev/null
	# the sessions from before keep theirs
	for i in c1 c2 c3; do
		run_sb exec $i -- true
		sb_ok '.provenance.rootfs.sha256 == "'"$d1"'"'
	done
	# a session file that is garbage, or of the wrong form, is done again (from the cache)
	for bad in 'garbage' '{"version": 3, "digest": "sha256:zz"}' \
		"$(jq -c '.version = 2' "$sf")" "$(jq -c '.source = "x"' "$sf")"; do
		printf '%s' "$bad" >"$sf"
		run_sb exec c1 -- true
		sb_ok '.provenance.rootfs.sha256 == "'"$d2"'"'
		jq -e --arg d "$d2" '.digest == $d' "$sf"
	done
	# no temp file is left beside it
	assert_equal "$(ls -A "$BOX_STATE_DIR/sandboxes/c1" | grep -c '\.tmp$')" 0
	assert_equal "$(ls "$BOX_STATE_DIR/sandboxes/c1" | grep rootfs | tr '\n' ' ')" "rootfs.json rootfs.lock "
}

@test "the rootfs cache: a hostile cache file is walked over and replaced; a session's delete leaves no verifier and no file behind" {
	local fake cf d1 bad i n
	fake_rootfs
	BOX_SBREPRO_VERIFY_INTERVAL=3600
	export BOX_SBREPRO_VERIFY_INTERVAL
	run_sb exec h0 -- true
	sb_ok '.provenance.rootfs.source == "walk"'
	d1=$(jq -r .provenance.rootfs.sha256 <<<"$output")
	cp "$cf" "$T/good.json"
	cp "$cf" "$T/target.json"
	# truncated, huge, wrong types, a symlink: never trusted, never followed, rewritten
	n=0
	for bad in 'head -c 60 "$T/good.json"' 'head -c 6000000 /dev/zero | tr "\0" " "' \
		'jq -c ".entries = \"5\"" "$T/good.json"' 'jq -c ".dirs = {}" "$T/good.json"' \
		'jq -c ".key = 7" "$T/good.json"' 'jq -c ".dirs = [\"relative\"]" "$T/good.json"' \
		'jq -c ".verify_started_s = \"x\"" "$T/good.json"' symlink; do
		rm -f "$cf"
		if [ "$bad" = symlink ]; then
			ln -s "$T/target.json" "$cf"
		else
			eval "$bad" >"$cf"
		fi
		n=$((n + 1))
		run_sb exec "h$n" -- true
		sb_ok '.provenance.rootfs | .sha256 == "'"$d1"'" and .source == "walk"'
		[ -f "$cf" ] && [ ! -L "$cf" ]
		jq -e --arg d "$d1" '.version == 3 and .digest == $d' "$cf"
	done
	cmp "$T/good.json" "$T/target.json"
	# a hit that starts a verification, and the session deleted at once: the verifier never
	# writes into a session directory and ends by itself (bounded), leaving the cache whole
	BOX_SBREPRO_VERIFY_INTERVAL=0 run_sb exec v1 -- true
	sb_ok '.provenance.rootfs.source == "cache"'
	box-sandbox delete v1 >/dev/null
	[ ! -e "$BOX_STATE_DIR/sandboxes/v1" ]
	verifier_done
	[ ! -e "$BOX_STATE_DIR/sandboxes/v1" ]
	assert_equal "$(ls -A "$T/xdg/box" | tr '\n' ' ')" "rootfs.json rootfs.verify.lock "
	jq -e --arg d "$d1" '.version == 3 and .digest == $d' "$cf"
	for ((i = 0; i <= n; i++)); do
		box-sandbox delete "h$i" >/dev/null
	done
	assert_equal "$(find "$BOX_STATE_DIR/sandboxes" -mindepth 1 -type d | wc -l)" 0
}

@test "history keeps the last 50 execs, oldest first, atomically replaced" {
	local i
	for i in $(seq 1 55); do
		box-sandbox exec h1 -- echo "$i" >/dev/null || true
	done
	run_sb history h1
	sb_ok '(.history | length) == 50 and .history[0].request.argv == ["echo", "6"]
		and .history[49].request.argv == ["echo", "55"]
		and (.history | all(.exit_code == 0 and .ok == true and .signal == null
			and (.provenance.request_sha256 | test("^sha256:"))
			and (.stdout_sha256 | test("^sha256:[0-9a-f]{64}$")) and .duration_ms >= 0))'
	# the stdout digest is that of the kept stdout
	jq -e --arg d "sha256:$(echo 55 | sha256sum | cut -d' ' -f1)" \
		'.history[49].stdout_sha256 == $d' <<<"$output"
	run_sb history h1 --limit 3
	sb_ok '(.history | map(.request.argv[1])) == ["53", "54", "55"]'
	# every line is a whole JSON object, and no temp file is left
	assert_equal "$(hist h1 | wc -l)" 50
	hist h1 | jq -e -c 'type == "object"' >/dev/null
	assert_equal "$(find "$BOX_STATE_DIR/sandboxes/h1" -maxdepth 1 -name '*history*' | wc -l)" 1
	# a torn last line (a crash of some writer) is skipped by the reader and dropped by the next
	# exec
	printf '{"at": "torn' >>"$BOX_STATE_DIR/sandboxes/h1/history.jsonl"
	run_sb history h1
	sb_ok '(.history | length) == 50'
	run_sb exec h1 -- echo 56
	sb_ok
	hist h1 | jq -e -c 'type == "object"' >/dev/null
	assert_equal "$(hist h1 | wc -l)" 50
	run_sb history h1 --limit 1
	sb_ok '.history[0].request.argv == ["echo", "56"]'
}

# history_whole FILE: FILE is absent, or whole lines each a JSON object
history_whole() {
	[ -e "$1" ] || return 0
	[ ! -s "$1" ] || [ "$(tail -c 1 "$1" | od -An -tx1 | tr -d ' ')" = 0a ]
	jq -e -s 'all(type == "object")' "$1" >/dev/null
}

@test "history survives its writer killed at any moment: whole JSON lines, the session usable" {
	# BOX_HISTORY_KILLS=500 for a longer run by hand
	local i n=${BOX_HISTORY_KILLS:-30} pid t0 ms f=$BOX_STATE_DIR/sandboxes/k1/history.jsonl
	local pad
	pad=$(head -c 3000 /dev/zero | tr '\0' p)
	run_sb exec k1 -- echo start
	sb_ok
	# the kills are spread over the time of a whole exec (entries of 3 kB make the history's
	# rewrite a good part of it)
	t0=$(date +%s%N)
	box-sandbox exec k1 --command "echo 0 # $pad" >/dev/null
	ms=$(( ($(date +%s%N) - t0) / 1000000 + 5 ))
	for i in $(seq 1 "$n"); do
		box-sandbox exec k1 --command "echo $i # $pad" >/dev/null 2>&1 &
		pid=$!
		sleep "$(awk -v r="$RANDOM" -v ms="$ms" 'BEGIN { printf "%.4f", r / 32768 * ms / 1000 }')"
		kill -9 "$pid" 2>/dev/null || true
		wait "$pid" || true
		history_whole "$f"
		run_sb history k1
		sb_ok
	done
	# the session runs on, and its history takes the next exec
	run_sb exec k1 -- echo final
	sb_ok
	history_whole "$f"
	run_sb history k1 --limit 1
	sb_ok '.history[0].request.argv == ["echo", "final"]'
	# what a writer killed before its rename left is swept by the next exec once a minute old
	# (a young one may be a live writer's)
	local d=${f%/*}
	echo "# temp files left by the kills: $(find "$d" -maxdepth 1 -name '.box-*.tmp' | wc -l)" >&3
	echo x >"$d/.box-0000000000000000.tmp"
	find "$d" -maxdepth 1 -name '.box-*.tmp' -exec touch -d '2 minutes ago' {} +
	echo y >"$d/.box-1111111111111111.tmp"
	run_sb exec k1 -- true
	sb_ok
	assert_equal "$(find "$d" -maxdepth 1 -name '.box-*.tmp' -printf '%f ')" ".box-1111111111111111.tmp "
}

@test "history keeps within its byte cap (disk_bytes / 16); large requests keep only digests" {
	local i big
	run_sb create --session b1 --disk-bytes 1048576
	sb_ok
	big=$(head -c 6000 /dev/zero | tr '\0' x)
	for i in $(seq 1 20); do
		box-sandbox exec b1 --command "echo $i # $big" >/dev/null
	done
	# 64 KiB at most: of twenty 6 kB entries, the newest that fit
	[ "$(stat -c %s "$BOX_STATE_DIR/sandboxes/b1/history.jsonl")" -le 65536 ]
	run_sb history b1
	sb_ok '(.history | length) >= 5 and (.history | length) < 20
		and (.history[-1].request.command | startswith("echo 20 #"))'
	# an entry over a quarter of the cap keeps the digests of its command and stdin
	big=$(head -c 20000 /dev/zero | tr '\0' y)
	run_sb exec b1 --stdin "$big" --command "cat >/dev/null # $big"
	sb_ok
	run_sb history b1 --limit 1
	sb_ok '.history[0].trimmed == true and (.history[0].request | has("command") | not)
		and (.history[0].request.command_sha256 | test("^sha256:"))
		and (.history[0].request.stdin_sha256 | test("^sha256:"))'
	[ "$(stat -c %s "$BOX_STATE_DIR/sandboxes/b1/history.jsonl")" -le 65536 ]
}

@test "history: stdin is kept as its digest; absent sessions and bad limits are refused" {
	run_sb exec s1 --stdin 'secret input' -- cat
	sb_ok
	run_sb history s1
	sb_ok '(.history[0].request | has("stdin") | not)
		and .history[0].request.stdin_sha256 == "sha256:'"$(printf 'secret input' | sha256sum | cut -d' ' -f1)"'"'
	refute_output --partial 'secret input'
	run_sb history nosuch
	assert_fail not_found 6
	[ ! -e "$BOX_STATE_DIR/sandboxes/nosuch" ]
	run_sb history s1 --limit 0
	assert_fail usage 2 '.error.path == "$.limit"'
	run_sb history s1 --limit 51
	assert_fail usage 2 '.error.path == "$.limit"'
	run --separate-stderr box-sandbox --json --session s1 <<<'{"op": "history", "limit": "3"}'
	assert_fail invalid_request 2 '.error.path == "$.limit"'
	# a session without execs has an empty history
	run_sb create --session e1
	sb_ok
	run_sb history e1
	sb_ok '.history == []'
}

@test "an agent reads the history of its session, and its execs carry a provenance" {
	run_sb exec a1 -- echo one
	sb_ok
	run --separate-stderr box-sandbox --json --session a1 <<<'{"op": "exec", "argv": ["echo", "two"]}'
	sb_ok '.provenance.request_sha256 | test("^sha256:")'
	run --separate-stderr box-sandbox --json --session a1 <<<'{"op": "history", "limit": 1}'
	sb_ok '.history[0].request.argv == ["echo", "two"]'
	# an agent bound to a1 reads no other session's
	run --separate-stderr box-sandbox --json --session a1 <<<'{"op": "history", "session": "a2"}'
	assert_fail policy_denied 4
}

# no_import_left: no session and no extracted files in the state dir, nothing written outside
no_import_left() {
	if [ -d "$BOX_STATE_DIR/sandboxes" ]; then
		assert_equal "$(find "$BOX_STATE_DIR/sandboxes" -mindepth 1 -maxdepth 1 -type d | wc -l)" 0
	fi
	[ ! -e "$T/evil" ] && [ ! -e "$T/state/evil" ] && [ ! -e /tmp/box-repro-evil ]
}

# mkexport OUT [PY...]: a hand-made exported snapshot, built by python's tarfile; PY is run
# with t (the open tarfile) and helpers add(name, data), link(name, target), meta(obj)
mkexport() {
	local out=$1
	shift
	python3 - "$out" "$@" <<'PY'
import io, json, sys, tarfile
out = sys.argv[1]
t = tarfile.open(out, "w:gz")
def add(name, data, typ=tarfile.REGTYPE):
    i = tarfile.TarInfo(name); i.type = typ; i.size = len(data) if typ == tarfile.REGTYPE else 0
    i.mode = 0o755 if typ == tarfile.DIRTYPE else 0o644
    t.addfile(i, io.BytesIO(data) if typ == tarfile.REGTYPE else None)
def link(name, target, typ=tarfile.SYMTYPE):
    i = tarfile.TarInfo(name); i.type = typ; i.linkname = target; t.addfile(i)
def meta(obj):
    add("box-snapshot.json", json.dumps(obj).encode())
good = {"version": 1, "session": "x", "limits": {"timeout_ms": 5000}, "provenance": {}}
for code in sys.argv[2:]:
    exec(code)
t.close()
PY
}

@test "an exported snapshot recreated in another state dir gives the same workspace" {
	run_sb create --session e1 --timeout-ms 7000 --disk-bytes 50000000
	sb_ok
	run_sb exec e1 -- sh -c 'mkdir -p /workspace/d/e && echo hello >/workspace/d/f &&
		ln -s d/f /workspace/l && head -c 300000 /dev/urandom >/workspace/d/e/bin &&
		chmod 755 /workspace/d/e/bin && printf "" >/workspace/empty'
	sb_ok
	run_sb snapshot e1 --export "$T/e1.tar.gz"
	sb_ok '.export == "'"$T/e1.tar.gz"'" and .export_bytes > 300000 and (.digest | test("^sha256:"))'
	local digest
	digest=$(jq -r .digest <<<"$output")
	[ -f "$T/e1.tar.gz" ]
	# the archive: the meta and the workspace tree, nothing else
	tar tzf "$T/e1.tar.gz" | grep -vE '^(box-snapshot.json|workspace/.*)$' && false
	tar xzOf "$T/e1.tar.gz" box-snapshot.json | jq -e --arg d "$digest" '.version == 1
		and .session == "e1" and .snapshot == $d and .limits.timeout_ms == 7000
		and (.provenance.rootfs.sha256 | test("^sha256:"))'
	# no staging directory or temporary file is left
	assert_equal "$(ls -A "$BOX_STATE_DIR/sandboxes/e1/snapshots" | grep -vc '\.tar\.gz$')" 0
	assert_equal "$(ls -A "$T" | grep -c sbexport)" 0
	# another machine: another state dir and cache
	BOX_STATE_DIR=$T/other run_sb create --session e2 --from-snapshot "$T/e1.tar.gz" --memory 268435456
	sb_ok '.from_snapshot.digest == "'"$digest"'" and .from_snapshot.meta.session == "e1"
		and .limits.timeout_ms == 7000 and .limits.memory == 268435456
		and .limits.disk_bytes == 50000000'
	BOX_STATE_DIR=$T/other run_sb snapshot e2
	sb_ok '.digest == "'"$digest"'"'
	BOX_STATE_DIR=$T/other run_sb exec e2 -- sh -c 'cat /workspace/l; stat -c %a /workspace/d/e/bin'
	sb_ok '.stdout == "hello\n755\n"'
	assert_equal "$(ls -A "$T/other/sandboxes" | grep -c sbimport)" 0
	BOX_STATE_DIR=$T/other box-sandbox delete e2 >/dev/null
	# the request's limits win over the archive's
	run_sb create --session e3 --from-snapshot "$T/e1.tar.gz" --timeout-ms 3000
	sb_ok '.limits.timeout_ms == 3000'
	# an existing session is a conflict, and the file is left alone
	run_sb create --session e3 --from-snapshot "$T/e1.tar.gz"
	assert_fail conflict 7
}

@test "hostile exported snapshots are refused, and leave nothing behind" {
	BOX_STATE_DIR=$T/state
	mkexport "$T/trav.tgz" 'meta(good); add("workspace/", b"", tarfile.DIRTYPE); add("workspace/../../evil", b"x")'
	mkexport "$T/trav2.tgz" 'meta(good); add("../evil", b"x")'
	mkexport "$T/abs.tgz" 'meta(good); add("/tmp/box-repro-evil", b"x")'
	mkexport "$T/linkout.tgz" 'meta(good); add("workspace/", b"", tarfile.DIRTYPE); link("workspace/l", "/etc/passwd")'
	mkexport "$T/linkup.tgz" 'meta(good); add("workspace/", b"", tarfile.DIRTYPE); link("workspace/l", "../../../evil")'
	mkexport "$T/through.tgz" 'meta(good); link("workspace", "/tmp"); add("workspace/box-repro-evil", b"x")'
	mkexport "$T/hard.tgz" 'meta(good); add("workspace/", b"", tarfile.DIRTYPE); add("workspace/a", b"x"); link("workspace/b", "workspace/a", tarfile.LNKTYPE)'
	mkexport "$T/dev.tgz" 'meta(good); add("workspace/", b"", tarfile.DIRTYPE); add("workspace/null", b"", tarfile.CHRTYPE)'
	local f
	for f in trav trav2 abs linkout linkup through hard dev; do
		run_sb create --session h1 --from-snapshot "$T/$f.tgz"
		assert_fail integrity_failed 5
		no_import_left
	done
	# huge: content past disk_bytes (a 2 MiB file of zeros compresses to little)
	mkexport "$T/huge.tgz" 'meta(good); add("workspace/", b"", tarfile.DIRTYPE); add("workspace/z", b"\0" * (2 << 20))'
	run_sb create --session h1 --disk-bytes 1048576 --from-snapshot "$T/huge.tgz"
	assert_fail limit_exceeded 3
	no_import_left
	# and a file larger than twice disk_bytes is not read at all
	head -c 3500000 /dev/urandom >"$T/big.tgz"
	run_sb create --session h1 --disk-bytes 1048576 --from-snapshot "$T/big.tgz"
	assert_fail limit_exceeded 3
	no_import_left
	# truncated, and not an archive
	mkexport "$T/ok.tgz" 'meta(good); add("workspace/", b"", tarfile.DIRTYPE); import os; add("workspace/r", os.urandom(200000))'
	head -c 100000 "$T/ok.tgz" >"$T/trunc.tgz"
	echo 'not an archive' >"$T/text.tgz"
	for f in trunc text; do
		run_sb create --session h1 --from-snapshot "$T/$f.tgz"
		assert_fail integrity_failed 5
		no_import_left
	done
	# the hand-made good one is fine
	run_sb create --session h1 --from-snapshot "$T/ok.tgz"
	sb_ok '.limits.timeout_ms == 5000'
	box-sandbox delete h1 >/dev/null
	no_import_left
}

@test "exported snapshots with a wrong configuration are invalid_request, and leave nothing" {
	local i=0 code
	for code in 'meta(dict(good, limits={"memory": "lots"}))' \
		'meta(dict(good, limits={"memory": 1.5}))' \
		'meta(dict(good, limits={"pids": 0}))' \
		'meta(dict(good, limits={"mount": ["/:/host"]}))' \
		'meta(dict(good, limits=[1]))' \
		'meta(dict(good, version="1"))' \
		'meta(dict(good, version=2))' \
		'meta(dict(good, session=3))' \
		'meta(dict(good, provenance="x"))' \
		'meta([good])' \
		'add("box-snapshot.json", b"{\"version\": 1, ")' \
		'add("box-snapshot.json/", b"", tarfile.DIRTYPE)' \
		'meta(good)' \
		'meta(good); add("workspace", b"a file")' \
		'meta(good); add("workspace/", b"", tarfile.DIRTYPE); add("extra", b"")'; do
		i=$((i + 1))
		mkexport "$T/c$i.tgz" "$code"
		case $code in
		'meta(good)' | *'"workspace", b"a file"'* | *extra* | *box-snapshot.json/*) ;;
		*) python3 - "$T/c$i.tgz" <<'PY'
import sys, tarfile, io
# every case but those about the tree has a workspace
t = tarfile.open(sys.argv[1], "r:gz"); m = [(i, t.extractfile(i).read() if i.isfile() else None) for i in t.getmembers()]; t.close()
t = tarfile.open(sys.argv[1], "w:gz")
for i, d in m: t.addfile(i, io.BytesIO(d) if d is not None else None)
w = tarfile.TarInfo("workspace/"); w.type = tarfile.DIRTYPE; w.mode = 0o755; t.addfile(w); t.close()
PY
		;;
		esac
		run_sb create --session w1 --from-snapshot "$T/c$i.tgz"
		assert_fail invalid_request 2 '.error.path == "$.from_snapshot"' || {
			echo "case $i: $code" >&2; false; }
		no_import_left
	done
	# a meta file past 64 KiB is not read
	mkexport "$T/bigmeta.tgz" 'add("box-snapshot.json", b" " * 70000 + b"{}"); add("workspace/", b"", tarfile.DIRTYPE)'
	run_sb create --session w1 --from-snapshot "$T/bigmeta.tgz"
	assert_fail limit_exceeded 3 '.error.path == "$.from_snapshot"'
	no_import_left
	# a missing file is not_found
	run_sb create --session w1 --from-snapshot "$T/none.tgz"
	assert_fail not_found 6 '.error.path == "$.from_snapshot"'
	no_import_left
}

@test "export: a bad destination fails cleanly; an agent sets no export or import path (exit 4)" {
	run_sb exec x1 -- sh -c 'echo a >/workspace/a'
	sb_ok
	run_sb snapshot x1 --export "$T/no/such/dir/x.tgz"
	assert_fail not_found 6
	run_sb snapshot x1 --export "$T"
	assert_equal "$status" 8
	[ -z "$(find "$T" -maxdepth 1 -name '*sbexport*')" ]
	assert_equal "$(ls -A "$BOX_STATE_DIR/sandboxes/x1/snapshots" | grep -vc '\.tar\.gz$')" 0
	# the agent: policy_denied, nothing written, nothing created
	run --separate-stderr box-sandbox --json --session x1 <<<"{\"op\": \"snapshot\", \"export\": \"$T/agent.tgz\"}"
	assert_fail policy_denied 4 '.error.path == "$.export"'
	[ ! -e "$T/agent.tgz" ]
	run_sb snapshot x1 --export "$T/x1.tgz"
	sb_ok
	run --separate-stderr box-sandbox --json --session x2 <<<"{\"op\": \"create\", \"session\": \"x2\", \"from_snapshot\": \"$T/x1.tgz\"}"
	assert_fail policy_denied 4 '.error.path == "$.from_snapshot"'
	[ ! -e "$BOX_STATE_DIR/sandboxes/x2" ]
	# --describe offers neither to the agent
	run -0 box-sandbox --describe
	jq -e '.input_schema.properties | has("export") or has("from_snapshot") | not' <<<"$output"
}
