#!/usr/bin/env bats
# box-sandbox: the guest's root is not the host's. Run as root, guest ids 0-65535 are a range of
# unprivileged host ids (root's range in /etc/subuid and /etc/subgid, else 1879048192 + 65536);
# the guest makes no set-id file; what the host writes for it is its own; PID 1 and /proc show
# nothing of the host's command line or boot.

load helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root (cgroups and namespaces as set up in CI)"
	sb_setup
	GUID=$(guest_base /etc/subuid)
	GGID=$(guest_base /etc/subgid)
	export GUID GGID
}

teardown() {
	sb_teardown
	if [ -n "${HOSTDIR:-}" ]; then rm -rf "$HOSTDIR"; fi
	if [ -n "${ETC_SECRET:-}" ]; then rm -f "$ETC_SECRET" "$ETC_SECRET".*; fi
	if [ -n "${SHARE_SECRET:-}" ]; then rm -rf "$SHARE_SECRET"; fi
	if [ -n "${SHARE_MADE:-}" ]; then rmdir /usr/local/share 2>/dev/null || true; fi
}

# guest_base FILE: the host id of the guest's 0, as box-sandbox chooses it
guest_base() {
	local r=
	if [ -f "$1" ]; then
		r=$(awk -F: '($1 == "root" || $1 == "0") && $3 >= 65536 { print $2; exit }' "$1")
	fi
	echo "${r:-1879048192}"
}

# jqa ARG... FILTER: jq -e with --arg and the like on $output (shown when it does not hold)
jqa() {
	jq -e "$@" <<<"$output" >/dev/null || { echo "does not hold: ${*: -1}"; echo "$output"; return 1; }
}

mk() {
	local id=$1
	shift
	run_sb create --session "$id" --timeout-ms 20000 "$@"
	sb_ok
}

@test "uid_map and gid_map: guest 0-65535 on unprivileged host ids; the holder runs as them, without groups" {
	mk i1
	run_sb exec i1 -- sh -c 'cat /proc/self/uid_map /proc/self/gid_map; id -u; id -G; grep ^Groups: /proc/self/status'
	sb_ok
	jqa --arg u "$GUID" --arg g "$GGID" '.stdout | split("\n") | map(gsub("\\s+"; " ") | ltrimstr(" ")) |
		.[0] == "0 \($u) 65536" and .[1] == "0 \($g) 65536" and .[2] == "0" and .[3] == "0"
		and .[4] == "Groups: "'
	jq -e --argjson u "$GUID" --argjson g "$GGID" \
		'.provider_data.ids == {"uid": $u, "gid": $g, "count": 65536}' \
		"$BOX_STATE_DIR/sandboxes/i1/state.json"
	pid=$(sb_holder i1)
	run grep -E '^(Uid|Gid|Groups):' "/proc/$pid/status"
	assert_line --regexp "^Uid:\s+$GUID\s+$GUID\s+$GUID\s+$GUID\$"
	assert_line --regexp "^Gid:\s+$GGID\s+$GGID\s+$GGID\s+$GGID\$"
	assert_line --regexp '^Groups:\s*$'
	# no process of the session but the keeper is host root
	run sh -c "ps -o uid= --ppid $pid; ps -o uid= -p $pid"
	refute_line --regexp '^\s*0$'
}

@test "no set-id file: every call path, chmod, cp -p, install -m; a host user runs what the guest left as itself" {
	command -v gcc >/dev/null || skip "no C compiler"
	command -v setpriv >/dev/null || skip "no setpriv"
	gcc -O1 -o "$T/setid-calls" "$BOX_SRCDIR/tests/fixtures/setid-calls.c"
	HOSTDIR=$(mktemp -d /tmp/box-ids-mount.XXXXXX)
	chmod 755 "$HOSTDIR"
	chown "$GUID:$GGID" "$HOSTDIR"
	mk i2 --input "$T/setid-calls" --mount "$HOSTDIR:/mnt/host"
	run_sb exec i2 --cwd /mnt/host -- /input/setid-calls
	sb_ok
	for c in chmod chmod-g chmod-hi fchmod fchmodat creat open openat openat-tmpfile mknod mknodat; do
		jqa --arg c "$c" '.stdout | split("\n") | index("\($c)=EPERM") != null'
	done
	jqe '.stdout | split("\n") | (index("fchmodat2=ENOSYS") != null and index("openat2=ENOSYS") != null)'
	# what needs no set-id bit still works
	jqe '.stdout | split("\n") | (index("chmod-plain=OK") != null and index("open-plain=OK") != null
		and index("open-nocreat=OK") != null)'
	run_sb exec i2 --cwd /mnt/host -- sh -c 'cp /usr/bin/id id; chmod 6755 id; echo chmod=$?;
		chmod u+s id; echo chmod-u=$?; python3 -c "import os; os.chmod(\"id\", 0o4755)"; echo py=$?;
		install -m 4755 /usr/bin/id id-install; echo install=$?;
		cp -p /usr/bin/su su 2>/dev/null; echo cp=$?; ls -l'
	sb_ok
	jqe '.stdout | test("chmod=1\nchmod-u=1\npy=1\ninstall=1\ncp=1\n")'
	run find "$HOSTDIR" -perm /6000
	assert_output ""
	[ -x "$HOSTDIR/id" ]
	run stat -c %u:%g "$HOSTDIR/id"
	assert_output "$GUID:$GGID"
	# a host user running what the guest left is itself, nobody else
	run setpriv --reuid 65534 --regid 65534 --clear-groups "$HOSTDIR/id" -u
	assert_success
	assert_output 65534
	run setpriv --reuid 65534 --regid 65534 --clear-groups "$HOSTDIR/id" -g
	assert_output 65534
}

@test "root-only host files under /etc and /usr/local/share are unreadable from the guest" {
	ETC_SECRET=/etc/box-ids-secret-$$
	echo ETC-0600-SECRET >"$ETC_SECRET"
	chmod 600 "$ETC_SECRET"
	echo ETC-0640-SECRET >"$ETC_SECRET.g"
	chmod 640 "$ETC_SECRET.g"
	mkdir "$ETC_SECRET.d"
	echo ETC-0700-SECRET >"$ETC_SECRET.d/f"
	chmod 700 "$ETC_SECRET.d"
	[ -d /usr/local/share ] || { mkdir -p /usr/local/share; SHARE_MADE=1; }
	SHARE_SECRET=/usr/local/share/box-ids-secret-$$
	mkdir -m 755 "$SHARE_SECRET"
	echo SHARE-0600-SECRET >"$SHARE_SECRET/a"
	chmod 600 "$SHARE_SECRET/a"
	mkdir -m 700 "$SHARE_SECRET/d"
	echo SHARE-0700-SECRET >"$SHARE_SECRET/d/b"
	mk i3
	for f in "$ETC_SECRET" "$ETC_SECRET.g" "$ETC_SECRET.d/f" "$SHARE_SECRET/a" "$SHARE_SECRET/d/b"; do
		run_sb exec i3 -- cat "$f"
		assert_fail guest_error 1
		jqe '.stderr | test("Permission denied")'
		refute_output --partial SECRET
	done
	# what is world-readable stays readable
	run_sb exec i3 -- sh -c 'head -c 5 /etc/passwd'
	sb_ok '.stdout == "root:"'
}

@test "what the host writes is the guest's: write, --input, restore; the guest changes it" {
	mkdir -p "$T/in/d"
	echo private >"$T/in/d/f"
	chmod 600 "$T/in/d/f"
	mk i4 --input "$T/in/d"
	run_sb write i4 sub/dir/w.txt --content hello
	sb_ok
	S=$BOX_STATE_DIR/sandboxes/i4
	run stat -c %u:%g "$S/workspace" "$S/workspace/sub" "$S/workspace/sub/dir" \
		"$S/workspace/sub/dir/w.txt" "$S/input/d" "$S/input/d/f" "$S/output"
	assert_equal "$(echo "$output" | sort -u)" "$GUID:$GGID"
	run_sb exec i4 -- sh -c 'cat /input/d/f; echo more >> sub/dir/w.txt; mkdir sub/dir/new; cat sub/dir/w.txt'
	sb_ok '.stdout == "private\nhellomore\n"'
	run_sb snapshot i4
	sb_ok
	digest=$(jq -r .digest <<<"$output")
	run_sb exec i4 -- rm -rf /workspace/sub
	sb_ok
	run_sb restore i4 "$digest"
	sb_ok
	run sh -c "find '$S/workspace' -exec stat -c %u:%g {} + | sort -u"
	assert_output "$GUID:$GGID"
	run_sb exec i4 -- sh -c 'echo again >> sub/dir/w.txt && rmdir sub/dir/new && cat sub/dir/w.txt'
	sb_ok '.stdout == "hellomore\nagain\n"'
	# the host API still reads, lists and writes over what the guest made
	run_sb read i4 sub/dir/w.txt
	sb_ok '.content == "hellomore\nagain\n"'
	run_sb ls i4 sub/dir
	sb_ok '.entries == [{"name": "w.txt", "is_dir": false, "size": 16}]'
	run_sb write i4 sub/dir/w.txt --content replaced
	sb_ok
	run stat -c %u:%g "$S/workspace/sub/dir/w.txt"
	assert_output "$GUID:$GGID"
}

@test "host details: PID 1 is box-init, boot_id is the guest's own, /proc/cmdline is empty, mountinfo shows only what box binds" {
	mkdir -p "$T/m"
	mk i5 --mount "$T/m:/mnt/m:ro"
	run_sb exec i5 -- sh -c 'od -An -c /proc/1/cmdline | tr -s " "; cat /proc/1/comm; wc -c < /proc/cmdline'
	sb_ok '.stdout == " b o x - i n i t \\0\nbox-init\n0\n"'
	run_sb exec i5 -- ps -eo args=
	sb_ok
	refute_output --partial "$BOX_STATE_DIR"
	refute_output --partial 'box-sandbox'
	run_sb exec i5 -- cat /proc/sys/kernel/random/boot_id
	sb_ok
	guest_boot=$(jq -r .stdout <<<"$output")
	[[ "$guest_boot" =~ ^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'\n'?$ ]] ||
		[[ "$guest_boot" =~ ^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12} ]]
	[ "$guest_boot" != "$(cat /proc/sys/kernel/random/boot_id)" ]
	run_sb exec i5 -- sh -c 'echo x > /proc/sys/kernel/random/boot_id'
	assert_fail guest_error 1
	# mountinfo (documented in box-sandbox(1)): the roots of the binds are host paths: the
	# session's directories, the --mount sources and the system directories, nothing else
	run_sb exec i5 -- cat /proc/self/mountinfo
	sb_ok
	jq -r .stdout <<<"$output" | awk '{ print $4 }' | sort -u >"$T/roots"
	while read -r r; do
		case "$r" in
		"" | / | /usr | /etc | /bin | /sbin | /lib | /lib32 | /lib64 | /libx32 | /null | /boot_id) ;;
		/sys | /irq | /bus | /fs | /sysvipc) ;;
		"$BOX_STATE_DIR"/sandboxes/i5/workspace | "$BOX_STATE_DIR"/sandboxes/i5/input) ;;
		"$BOX_STATE_DIR"/sandboxes/i5/output | "$BOX_STATE_DIR"/sandboxes/i5/run) ;;
		"$T/m") ;;
		/null | /zero | /full | /random | /urandom | /tty) ;;
		*) echo "unexpected mount root: $r"; cat "$T/roots"; return 1 ;;
		esac
	done <"$T/roots"
	grep -qx "$BOX_STATE_DIR/sandboxes/i5/workspace" "$T/roots"
}

@test "an ordinary user: its own id is the guest's root, its supplementary groups stay (as documented)" {
	command -v setpriv >/dev/null || skip "no setpriv"
	setpriv --reuid 65534 --regid 65534 --clear-groups test -x "$(command -v box-sandbox)" ||
		skip "the build tree is out of an ordinary user's reach"
	setpriv --reuid 65534 --regid 65534 --clear-groups unshare -U true 2>/dev/null ||
		skip "this kernel gives ordinary users no user namespace"
	HOSTDIR=$(mktemp -d /tmp/box-ids-user.XXXXXX)
	chmod 755 "$HOSTDIR"
	chown 65534:65534 "$HOSTDIR"
	run setpriv --reuid 65534 --regid 65534 --groups 65534,100 \
		env BOX_STATE_DIR="$HOSTDIR/state" timeout 60 box-sandbox exec u1 -- sh -c \
		'cat /proc/self/uid_map /proc/self/gid_map; grep ^Groups: /proc/self/status; touch /workspace/f; cat /proc/1/comm'
	assert_success
	jqe '.stdout | split("\n") | map(gsub("\\s+"; " ") | ltrimstr(" ") | rtrimstr(" ")) |
		.[0] == "0 65534 1" and .[1] == "0 65534 1" and (.[2] | split(" ") | length) == 3
		and .[3] == "box-init"'
	run stat -c %u:%g "$HOSTDIR/state/sandboxes/u1/workspace/f"
	assert_output 65534:65534
	run setpriv --reuid 65534 --regid 65534 --clear-groups \
		env BOX_STATE_DIR="$HOSTDIR/state" timeout 60 box-sandbox delete u1
	assert_success
}
