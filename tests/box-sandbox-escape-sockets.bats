#!/usr/bin/env bats
# box-sandbox: a guest opens unix, inet, inet6 and netlink-route sockets only. Every other family
# (vsock shares the host's port space on a VM; packet, can, bluetooth, xdp, alg, key, tipc,
# rds, ... reach host kernel code a sandbox has no use for) is EAFNOSUPPORT for socket and
# socketpair, whatever the type; the filter reads the low 32 bits, as the kernel does.

load helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root (cgroups and namespaces as set up in CI)"
	command -v python3 >/dev/null || skip "no python3"
	sb_setup
	cp "$BOX_SRCDIR/tests/fixtures/socket-families.py" "$T/families.py"
}

teardown() {
	sb_teardown
}

mk() {
	local id=$1
	shift
	run_sb create --session "$id" --timeout-ms 60000 --input "$T/families.py" "$@"
	sb_ok
}

# families LINES: the results of families.py for the "CALL FAMILY TYPE PROTOCOL" lines in the
# guest of session k1, one JSON object a line in $output
families() {
	run_sb exec k1 --stdin "$1" -- python3 /input/families.py
	sb_ok
	output=$(jq -r .stdout <<<"$output")
}

@test "every family but unix, inet, inet6 and netlink is EAFNOSUPPORT, for socket and socketpair" {
	mk k1
	lines=
	for f in 0 $(seq 3 9) $(seq 11 15) $(seq 17 64) 100 255 256 65535 2147483647 4294967295; do
		for t in 1 2 3 5; do
			lines+="socket $f $t 0"$'\n'"socketpair $f $t 0"$'\n'
		done
	done
	# named: vsock, packet (raw and dgram), can, bluetooth, xdp, alg, key, tipc, rds, llc,
	# ax25, x25, appletalk, ipx, netrom, atmpvc, rose, decnet, econet, irda, pppox, smc, mctp
	for n in "40 1 0" "40 2 0" "17 3 768" "17 2 768" "29 3 1" "31 1 3" "44 3 0" "38 5 0" "15 3 2" \
		"30 2 0" "21 5 0" "26 2 0" "3 2 0" "9 5 0" "5 2 0" "4 2 0" "6 5 0" "8 2 0" "11 5 0" \
		"12 5 0" "19 2 0" "23 1 0" "24 1 0" "43 1 0" "45 2 0"; do
		lines+="socket $n"$'\n'
	done
	# the high 32 bits are not looked at, as the kernel ignores them
	lines+="socket $((40 + (1 << 32))) 1 0"$'\n'"socket $((17 + (1 << 32))) 3 768"$'\n'
	families "$lines"
	[ "$(wc -l <<<"$output")" = 563 ]
	run jq -c 'select(.result != "EAFNOSUPPORT")' <<<"$output"
	assert_output ""
}

@test "AF_INET SOCK_PACKET is refused, netlink speaks only NETLINK_ROUTE" {
	mk k1
	lines="socket 2 10 768"$'\n'"socket 2 $((10 | 0x80000)) 768"$'\n'"socket 2 $((10 + (1 << 32))) 768"$'\n'
	for p in $(seq 1 31) 255 65535 4294967295 $((1 << 32 | 9)); do
		lines+="socket 16 3 $p"$'\n'"socket 16 2 $p"$'\n'
	done
	lines+="socket 16 3 0"$'\n'"socket 16 3 $((1 << 32))"$'\n'
	families "$lines"
	run jq -c 'select(.family == 2 and .result != "EAFNOSUPPORT")' <<<"$output"
	assert_output ""
	run jq -c 'select(.family == 16 and (.protocol % 4294967296) != 0 and .result != "EPROTONOSUPPORT")' <<<"$output"
	assert_output ""
	run jq -c 'select(.family == 16 and (.protocol % 4294967296) == 0 and .result != "ok")' <<<"$output"
	assert_output ""
}

@test "what a sandbox needs still works: loopback TCP and UDP on inet and inet6, unix sockets, netlink route" {
	mk k1
	run_sb exec k1 -- python3 -c '
import socket, os
for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    s = socket.socket(fam); s.bind((addr, 0)); s.listen(1)
    c = socket.create_connection(s.getsockname()[:2]); a, _ = s.accept()
    c.sendall(b"tcp"); print(fam.name, a.recv(3).decode())
    u = socket.socket(fam, socket.SOCK_DGRAM); u.bind((addr, 0))
    v = socket.socket(fam, socket.SOCK_DGRAM); v.sendto(b"udp", u.getsockname()[:2])
    print(fam.name, u.recv(3).decode())
x, y = socket.socketpair(); x.send(b"pair"); print("unix", y.recv(4).decode())
p = "/tmp/s.sock"; l = socket.socket(socket.AF_UNIX); l.bind(p); l.listen(1)
c = socket.socket(socket.AF_UNIX); c.connect(p); a, _ = l.accept(); c.send(b"path"); print("unix", a.recv(4).decode())
print(sorted(socket.if_nameindex())[0][1])
'
	sb_ok '.stdout == "AF_INET tcp\nAF_INET udp\nAF_INET6 tcp\nAF_INET6 udp\nunix pair\nunix path\nlo\n"'
	if command -v ip >/dev/null; then
		run_sb exec k1 -- ip -o addr show dev lo
		sb_ok
		jqe '.stdout | test("127\\.0\\.0\\.1")'
	fi
}

@test "x32 system calls and i386 socketcall (int 0x80) are killed, never run" {
	[ "$(uname -m)" = x86_64 ] || skip "x86_64 only"
	command -v gcc >/dev/null || skip "no C compiler"
	cat >"$T/abi.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	long r;
	unsigned long args[3] = { 40, 1, 0 };   /* AF_VSOCK, SOCK_STREAM */

	setvbuf(stdout, NULL, _IONBF, 0);
	printf("start\n");
	if (argc > 1 && strcmp(argv[1], "x32") == 0) {
		r = syscall(0x40000000L | 41, 40L, 1L, 0L);
	} else {
		/* socketcall(SYS_SOCKET, args) through the 32-bit entry */
		__asm__ volatile("int $0x80" : "=a"(r) : "a"(102L), "b"(1L), "c"(args) : "memory");
	}
	printf("returned %ld\n", r);
	return 0;
}
C
	gcc -O1 -o "$T/abi" "$T/abi.c"
	mk k1 --input "$T/abi"
	run_sb exec k1 -- /input/abi x32
	assert_fail guest_error 1
	jqe '.signal == "SIGSYS" and .stdout == "start\n"'
	run_sb exec k1 -- /input/abi i386
	# killed where the kernel has 32-bit emulation; ENOSYS (-38) where it has none
	if [ "$status" = 0 ]; then
		sb_ok '.stdout == "start\nreturned -38\n"'
	else
		assert_fail guest_error 1
		jqe '.signal == "SIGSYS" and .stdout == "start\n"'
	fi
}
