#!/usr/bin/env bats
# box-sandbox: escape and denial-of-service attempts, each run inside a sandbox, each checking
# that the host is untouched.

load helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root (cgroups and namespaces as set up in CI)"
	sb_setup
}

teardown() {
	sb_teardown
	if [ -n "${HOSTPID:-}" ]; then
		kill "$HOSTPID" 2>/dev/null || true
	fi
}

# mk ID [CREATE-FLAG...]: a sandbox with short timeouts
mk() {
	local id=$1
	shift
	run_sb create --session "$id" --timeout-ms 5000 "$@"
	sb_ok
}

@test "host files outside the mounts are not visible" {
	echo TOPSECRET-CONTENT >"$OUTSIDE/secret.txt"
	mk e1
	run_sb exec e1 -- sh -c "cat '$OUTSIDE/secret.txt'; ls -A /root /home 2>/dev/null; cat /etc/shadow /etc/gshadow 2>/dev/null; find / -xdev -name secret.txt 2>/dev/null; true"
	sb_ok
	refute_output --partial TOPSECRET
	refute_output --partial 'root:'
	run_sb exec e1 -- sh -c "test -e '$OUTSIDE' || test -e '$T'"
	assert_fail guest_error 1
	run_sb exec e1 -- sh -c 'wc -c < /etc/shadow'
	# masked: absent, unreadable or empty
	if [ "$status" = 0 ]; then jqe '.stdout == "0\n"'; fi
}

@test "writing under /input and the read-only system directories fails" {
	echo orig >"$T/in.txt"
	mk e2 --input "$T/in.txt"
	for p in /input/in.txt /input/new /usr/new /etc/passwd /bin/new /new; do
		run_sb exec e2 -- sh -c "echo x >> $p"
		assert_fail guest_error 1
	done
	assert_equal "$(cat "$T/in.txt")" orig
	[ ! -e /usr/new ] && [ ! -e /bin/new ] && [ ! -e /new ]
	run_sb write e2 /input/in.txt --content x
	assert_fail policy_denied 4
}

@test "/output symlinks to host paths are never followed by the collector" {
	echo keep >"$OUTSIDE/target"
	cp /etc/passwd "$T/passwd.before"
	mk e3
	run_sb exec e3 -- sh -c "ln -s /etc/passwd /output/pw; ln -s '$OUTSIDE/target' /output/out; ln -s / /output/root"
	sb_ok '(.outputs | sort_by(.path)) == [{"path": "out", "type": "symlink"},
		{"path": "pw", "type": "symlink"}, {"path": "root", "type": "symlink"}]'
	run_sb exec e3 -- true
	sb_ok '.outputs == []'
	assert_equal "$(cat "$OUTSIDE/target")" keep
	cmp /etc/passwd "$T/passwd.before"
}

@test "file API: .. and symlinks leaving the workspace are refused" {
	mk e4
	run_sb read e4 ../../etc/passwd
	assert_fail policy_denied 4
	run_sb read e4 /workspace/../../etc/passwd
	assert_fail policy_denied 4
	run_sb write e4 ../../tmp/boxescape --content x
	assert_fail policy_denied 4
	[ ! -e /tmp/boxescape ]
	run_sb exec e4 -- sh -c "ln -s / root; ln -s /etc/passwd pw; ln -s '$OUTSIDE' out"
	sb_ok
	# refused, or resolved inside the workspace as if it were / (then not found)
	run_sb read e4 root/etc/passwd
	[[ $status == 4 || $status == 6 ]]
	refute_output --partial 'root:x:0'
	run_sb read e4 pw
	[[ $status == 4 || $status == 6 ]]
	refute_output --partial 'root:x:0'
	run_sb write e4 out/planted --content x
	[[ $status == 4 || $status == 6 ]]
	[ ! -e "$OUTSIDE/planted" ]
	run_sb ls e4 root
	if [ "$status" = 0 ]; then
		jqe '[.entries[].name] | index("etc") | not'
	else
		assert_equal "$status" 4
	fi
}

@test "setuid binaries gain nothing: no capabilities, nosuid mounts" {
	mk e5
	run_sb exec e5 -- sh -c 'cp /bin/cat /tmp/suidcat && chmod u+s /tmp/suidcat; /tmp/suidcat /proc/self/status | grep -E "^Cap(Eff|Prm|Bnd|Amb)"'
	sb_ok '.stdout | split("\n") | map(select(length > 0) | split(":\t")[1]) | length == 4 and all(. == "0000000000000000")'
	run_sb exec e5 -- sh -c 'grep -E "^(NoNewPrivs|Seccomp):" /proc/self/status'
	sb_ok '.stdout | test("NoNewPrivs:\t1") and test("Seccomp:\t2")'
	run_sb exec e5 -- su -c id
	assert_equal "$status" 1
	run_sb exec e5 -- sh -c 'awk "\$2 == \"/workspace\" || \$2 == \"/tmp\" || \$2 == \"/usr\" || \$2 == \"/output\" || \$2 == \"/input\" {print \$4}" /proc/self/mounts'
	sb_ok '.stdout | split("\n") | map(select(length > 0)) | length >= 4 and all(test("(^|,)nosuid(,|$)"))'
}

@test "mount and nested user namespaces fail" {
	mk e6
	run_sb exec e6 -- unshare -U true
	assert_fail guest_error 1
	run_sb exec e6 -- unshare -m true
	assert_fail guest_error 1
	run_sb exec e6 -- sh -c 'mkdir -p /tmp/x && mount -t tmpfs x /tmp/x'
	assert_fail guest_error 1
	run_sb exec e6 -- sh -c 'mount -o remount,rw /usr'
	assert_fail guest_error 1
}

@test "denied syscalls are EPERM" {
	mk e7
	# x86_64 numbers; each called with zero arguments
	run_sb exec e7 -- python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
nrs = {"bpf": 321, "keyctl": 250, "add_key": 248, "userfaultfd": 323,
       "io_uring_setup": 425, "perf_event_open": 298, "kexec_load": 246,
       "init_module": 175, "open_by_handle_at": 304, "pivot_root": 155}
for name, nr in sorted(nrs.items()):
    r = libc.syscall(nr, 0, 0, 0, 0, 0)
    print(name, r, ctypes.get_errno())
'
	sb_ok
	assert_equal "$(jq -r .stdout <<<"$output")" "add_key -1 1
bpf -1 1
init_module -1 1
io_uring_setup -1 1
kexec_load -1 1
keyctl -1 1
open_by_handle_at -1 1
perf_event_open -1 1
pivot_root -1 1
userfaultfd -1 1"
}

@test "TIOCSTI and TIOCLINUX are EPERM" {
	mk e8
	run_sb exec e8 -- python3 -c '
import fcntl, termios, errno
for name, req in (("TIOCSTI", termios.TIOCSTI), ("TIOCLINUX", 0x541C)):
    try:
        fcntl.ioctl(0, req, b"x")
        print(name, "done")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
'
	sb_ok '.stdout == "TIOCSTI EPERM\nTIOCLINUX EPERM\n"'
}

@test "only fds 0-2 inside" {
	mk e9
	run_sb exec e9 -- sh -c 'ls /proc/$$/fd'
	sb_ok '.stdout == "0\n1\n2\n"'
	run_sb exec e9 -- sh -c 'exec ls /proc/self/fd'
	sb_ok '.stdout == "0\n1\n2\n3\n"'
}

@test "/proc/self/exe, /proc/sysrq-trigger and /proc/kcore are out of reach" {
	mk e10
	run_sb exec e10 -- sh -c 'echo x > /proc/self/exe'
	assert_fail guest_error 1
	run_sb exec e10 -- sh -c 'cp /bin/true /proc/self/exe'
	assert_fail guest_error 1
	run_sb exec e10 -- sh -c 'echo h > /proc/sysrq-trigger'
	assert_fail guest_error 1
	run_sb exec e10 -- sh -c 'head -c 1 /proc/kcore | wc -c'
	if [ "$status" = 0 ]; then jqe '.stdout == "0\n"'; fi
	run_sb exec e10 -- sh -c 'echo 1 > /proc/sys/kernel/sysrq'
	assert_fail guest_error 1
}

@test "host PIDs are invisible and cannot be signalled" {
	sleep 100 &
	HOSTPID=$!
	mk e11
	run_sb exec e11 -- sh -c 'ps -e -o pid=,comm='
	sb_ok
	refute_output --partial sleep
	run_sb exec e11 -- sh -c 'ls /proc | grep -c "^[0-9]*$"'
	sb_ok '(.stdout | rtrimstr("\n") | tonumber) < 10'
	run_sb exec e11 -- sh -c "kill -9 $HOSTPID"
	assert_fail guest_error 1
	run_sb exec e11 -- sh -c 'kill -9 -1; true'
	kill -0 "$HOSTPID"
	kill -0 $$
}

@test "no network: host TCP on 127.0.0.1 and ::1, DNS, only lo" {
	python3 -c '
import socket, sys, os
s = socket.socket(socket.AF_INET6); s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::", 0)); s.listen(5)
print(s.getsockname()[1], flush=True)
sys.stdout.close(); os.close(1)
import time; time.sleep(60)
' >"$T/port" &
	HOSTPID=$!
	for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
	port=$(cat "$T/port")
	[ -n "$port" ]
	python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 2).close()"
	mk e12
	run_sb exec e12 -- python3 -c "
import socket
for fam, addr in ((socket.AF_INET, ('127.0.0.1', $port)), (socket.AF_INET6, ('::1', $port))):
    s = socket.socket(fam); s.settimeout(1)
    try:
        s.connect(addr); print('connected')
    except OSError:
        print('refused')
try:
    socket.getaddrinfo('example.com', 80); print('resolved')
except OSError:
    print('no dns')
"
	sb_ok '.stdout == "refused\nrefused\nno dns\n"'
	run_sb exec e12 -- sh -c 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "'
	sb_ok '.stdout == "lo\n"'
}

@test "fork bomb: limited, and the host is fine" {
	sleep 100 &
	HOSTPID=$!
	mk e13 --pids 64 --timeout-ms 3000
	t0=$(now_ms)
	run_sb exec e13 -- bash -c ':(){ :|:& };:; sleep 10'
	t1=$(now_ms)
	assert_equal "$status" 3
	jqe '.ok == false and (.resource_limit == "pids" or .resource_limit == "timeout")
		and (.error.code == "limit_exceeded" or .error.code == "timeout")'
	[ $((t1 - t0)) -lt 10000 ]
	kill -0 "$HOSTPID"
	run_sb exec e13 -- sh -c 'ps -e -o comm= | grep -c bash; true'
	sb_ok '.stdout == "0\n"'
}

@test "memory bomb: resource_limit memory, exit 3" {
	mk e14 --memory 67108864
	run_sb exec e14 -- python3 -c 'b = bytearray(1 << 30); print(len(b))'
	assert_limit limit_exceeded memory 67108864 bytes '.resource_limit == "memory"'
	run_sb exec e14 -- echo alive
	sb_ok '.stdout == "alive\n"'
}

@test "disk fill: one big file is resource_limit disk" {
	mk e15 --disk-bytes 8388608
	run_sb exec e15 -- dd if=/dev/zero of=/workspace/big bs=1M count=64
	assert_equal "$status" 3
	jqe '.resource_limit == "disk" and .error.code == "limit_exceeded" and .error.limit == "disk"'
	[ "$(du -sb "$BOX_STATE_DIR/sandboxes/e15/workspace" | cut -f1)" -le $((9 * 1048576)) ]
}

@test "disk fill: many files past the total are resource_limit disk" {
	mk e16 --disk-bytes 8388608
	run_sb exec e16 -- sh -c 'for i in 1 2 3 4 5 6; do dd if=/dev/zero of=/workspace/f$i bs=1M count=4 2>/dev/null; done'
	assert_equal "$status" 3
	jqe '.resource_limit == "disk" and .error.code == "limit_exceeded"'
}

@test "a double-forked daemon does not outlive its exec" {
	mk e17
	run_sb exec e17 --timeout-ms 1000 -- sh -c 'setsid sh -c "sleep 1000" </dev/null >/dev/null 2>&1 & (sleep 999 &) ; sleep 5'
	assert_fail timeout 3 '.resource_limit == "timeout"'
	run_sb exec e17 -- sh -c 'ps -e -o args= | grep -c "^sleep"; true'
	sb_ok '.stdout == "0\n"'
	run_sb exec e17 -- sh -c 'setsid sh -c "sleep 1000" </dev/null >/dev/null 2>&1 & echo started'
	sb_ok '.stdout == "started\n"'
	run_sb exec e17 -- sh -c 'ps -e -o args= | grep -c "^sleep"; true'
	sb_ok '.stdout == "0\n"'
	run ! pgrep -f 'sleep 1000'
}

@test "endless stdout: bounded memory, truncated, full output capped" {
	mk e18 --max-output-bytes 65536
	# endless, so that only the timeout ends it, however fast the machine relays
	run --separate-stderr /usr/bin/time -f '%M' -o "$T/rss" box-sandbox exec e18 --timeout-ms 3000 -- cat /dev/zero
	assert_equal "$status" 3
	one_json_where '.truncated == true and .resource_limit == "timeout"
		and (.stdout | length) > 65536 and (.stdout | length) < 65536 + 200
		and (.full_output_path | type == "string")'
	full=$(jq -r .full_output_path <<<"$output")
	# min(256 MiB, disk_bytes / 16) of the default 1 GiB
	[ "$(stat -c %s "$full")" -le $((64 * 1048576)) ]
	[ "$(tail -n 1 "$T/rss")" -lt 65536 ]
}

@test "host credentials are absent from the guest's env and /proc/1/environ" {
	export GITHUB_TOKEN=ghp_hostsecret FOO_API_KEY=hostkey AWS_SECRET_ACCESS_KEY=awssecret
	mk e19
	run_sb exec e19 -- sh -c 'env; cat /proc/1/environ 2>/dev/null | tr "\0" "\n"; cat /proc/self/environ | tr "\0" "\n"; true'
	sb_ok
	refute_output --partial hostsecret
	refute_output --partial hostkey
	refute_output --partial awssecret
	refute_output --partial GITHUB_TOKEN
	run_sb exec e19 -- sh -c 'echo "$HOME"'
	sb_ok '.stdout == "/workspace\n"'
}

@test "cpu bomb: busy processes end with resource_limit cpu, exit 3, the wall clock far from spent" {
	mk e20 --cpu-ms 300
	run_sb exec e20 --timeout-ms 20000 -- sh -c 'for i in 1 2 3 4; do (while :; do :; done) & done; wait'
	assert_fail limit_exceeded 3 '.resource_limit == "cpu" and .error.limit == "cpu" and .error.configured == 300 and .error.unit == "ms" and .duration_ms < 10000'
	# nothing of it is left running
	run_sb exec e20 -- sh -c 'ps -e -o args= | grep -c "^sh -c for"; true'
	sb_ok '.stdout == "0\n"'
}
