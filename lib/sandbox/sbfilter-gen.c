/*
 * Build-time generator of the seccomp deny-list that box-sandbox puts on every command it runs
 * in a sandbox: libseccomp compiles the rules below to BPF once, here, and lib/sandbox/sbjail.c loads
 * the result with one prctl(), so box-sandbox neither links libseccomp nor compiles a filter on
 * every exec. The output (sbfilter.c) holds the program for the build machine's architecture;
 * system calls of any other architecture, x32 on x86_64 among them, kill the process.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <seccomp.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
/* fchmodat2 (Linux 6.6) has the same number on every architecture; older headers lack it */
#ifdef __NR_fchmodat2
#define NR_FCHMODAT2 __NR_fchmodat2
#else
#define NR_FCHMODAT2 452
#endif
#ifndef __O_TMPFILE
#define __O_TMPFILE 020000000
#endif
#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif

/*
 * Denied outright with EPERM: kernel attack surface a guest has no use for (bpf, perf,
 * keyrings, userfaultfd, io_uring), anything that changes the mount tree, the namespaces or
 * the host's clock, modules and kexec, handles that bypass the mount tree, other processes'
 * memory, and legacy or host-wide administration calls. Names the build machine's
 * architecture lacks are skipped: there is nothing to deny there.
 */
static const char *const denied[] = {
	"bpf", "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
	"fsmount", "fsconfig", "fspick", "mount_setattr", "setns", "unshare",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"open_by_handle_at", "name_to_handle_at",
	"ptrace", "process_vm_readv", "process_vm_writev",
	"acct", "swapon", "swapoff", "reboot",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"syslog", "quotactl", "lookup_dcookie", "vhangup", "nfsservctl", "uselib",
	"iopl", "ioperm",
};

/* A guest needs no namespace of its own; clone() with any of these flags is refused. */
static const unsigned long clone_new[] = {
	CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS,
	CLONE_NEWCGROUP, CLONE_NEWTIME,
};

/*
 * Only PER_LINUX (0) and the 0xffffffff query are allowed: other personalities turn off ASLR
 * (ADDR_NO_RANDOMIZE) or map page zero (MMAP_PAGE_ZERO). libseccomp takes one comparison per
 * argument in a rule, and rules for one system call are OR-ed, so "neither 0 nor 0xffffffff"
 * is spelt as a union: anything above 32 bits, or a 32-bit value with some bit set whose
 * cyclic neighbour is clear (every value but all-zeros and all-ones has such a pair).
 */
static int deny_personality(scmp_filter_ctx ctx)
{
	unsigned long mask, one;
	unsigned int i;
	int rc;

	rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
			      SCMP_A0(SCMP_CMP_GT, 0xffffffffUL));
	for (i = 0; i < 32 && rc == 0; i++) {
		one = 1UL << i;
		mask = one | (1UL << ((i + 1) % 32));
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
				      SCMP_A0(SCMP_CMP_MASKED_EQ, mask, one));
	}
	return rc;
}

/* The socket families a guest may open (the kernel reads the family as an int). */
static const uint32_t families[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK };
static const uint32_t netlink_protocols[] = { NETLINK_ROUTE };

/*
 * Adds rules "(argument & mask) == value" with action act, on the low 32 bits of the
 * argument only (as the kernel reads an int), that together match every 32-bit value outside
 * allowed[0..n) and none inside: the sub-cubes of the complement, found on the binary trie of
 * the allowed values from the top bit down (at most 32 per allowed value). extra, when not
 * NULL, is a further condition on another argument every rule carries.
 */
static int deny_outside(scmp_filter_ctx ctx, int nr, unsigned arg, const uint32_t *allowed,
			size_t n, uint32_t act, const struct scmp_arg_cmp *extra, uint32_t prefix,
			uint32_t mask, int bit)
{
	int b, rc = 0;

	for (b = 0; b < 2 && rc == 0; b++) {
		uint32_t m = mask | (1u << bit), v = prefix | ((uint32_t)b << bit);
		size_t i, hits = 0;

		for (i = 0; i < n; i++)
			hits += (allowed[i] & m) == v;
		if (hits == 0) {
			struct scmp_arg_cmp c = SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, m, v);

			rc = extra ? seccomp_rule_add(ctx, act, nr, 2, c, *extra) :
				     seccomp_rule_add(ctx, act, nr, 1, c);
		} else if (bit > 0) {
			rc = deny_outside(ctx, nr, arg, allowed, n, act, extra, v, m, bit - 1);
		}
	}
	return rc;
}

/*
 * socket and socketpair: only the families above; AF_INET with SOCK_PACKET (a packet socket
 * under another name) is refused as well, and netlink speaks only NETLINK_ROUTE (what ip(8)
 * and getaddrinfo's AI_ADDRCONFIG need). vsock (the host's port space on a VM), packet, can,
 * bluetooth, xdp, alg, key, tipc, rds and every family to come get EAFNOSUPPORT.
 */
static int limit_sockets(scmp_filter_ctx ctx)
{
	static const char *const calls[] = { "socket", "socketpair" };
	struct scmp_arg_cmp inet = SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffUL, AF_INET);
	struct scmp_arg_cmp netlink = SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffUL, AF_NETLINK);
	size_t i;
	int rc = 0;

	for (i = 0; i < 2 && rc == 0; i++) {
		int nr = seccomp_syscall_resolve_name(calls[i]);

		if (nr < 0)
			continue;
		rc = deny_outside(ctx, nr, 0, families, sizeof(families) / sizeof(families[0]),
				  SCMP_ACT_ERRNO(EAFNOSUPPORT), NULL, 0, 0, 31);
		if (rc == 0)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), nr, 2, inet,
					      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_PACKET));
		if (rc == 0)
			rc = deny_outside(ctx, nr, 2, netlink_protocols, 1,
					  SCMP_ACT_ERRNO(EPROTONOSUPPORT), &netlink, 0, 0, 31);
	}
	return rc;
}

/* Set-user-id and set-group-id bits in the mode argument of a call that sets a mode. */
struct mode_call {
	const char *name;
	unsigned mode_arg;
	int flags_arg;        /* open, openat: the mode counts with O_CREAT or O_TMPFILE; -1: always */
};

static const struct mode_call mode_calls[] = {
	{ "chmod", 1, -1 }, { "fchmod", 1, -1 }, { "fchmodat", 2, -1 }, { "creat", 1, -1 },
	{ "mknod", 1, -1 }, { "mknodat", 2, -1 }, { "open", 2, 1 }, { "openat", 3, 2 },
};

/*
 * No set-id file from a guest: every guest's files belong to the same range of host ids, so a
 * set-id program one guest left on a mount would let any host user act as every guest (and
 * reach the others' files). The calls above fail with EPERM when the mode has S_ISUID or
 * S_ISGID; openat2 and fchmodat2 take their mode where the filter cannot see it (a struct, or
 * next to flags it would have to read as well) and fail with ENOSYS, so libc falls back on
 * openat and fchmodat.
 */
static int deny_setid_modes(scmp_filter_ctx ctx)
{
	static const unsigned long bits[] = { S_ISUID, S_ISGID };
	static const unsigned long creating[] = { O_CREAT, __O_TMPFILE };
	size_t i, b, f;
	int rc = 0;

	for (i = 0; i < sizeof(mode_calls) / sizeof(mode_calls[0]) && rc == 0; i++) {
		const struct mode_call *m = &mode_calls[i];
		int nr = seccomp_syscall_resolve_name(m->name);

		if (nr < 0)
			continue;
		for (b = 0; b < 2 && rc == 0; b++) {
			struct scmp_arg_cmp c = SCMP_CMP(m->mode_arg, SCMP_CMP_MASKED_EQ, bits[b],
							 bits[b]);

			if (m->flags_arg < 0) {
				rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1, c);
				continue;
			}
			for (f = 0; f < 2 && rc == 0; f++)
				rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 2, c,
						      SCMP_CMP((unsigned)m->flags_arg,
							       SCMP_CMP_MASKED_EQ, creating[f],
							       creating[f]));
		}
	}
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0);
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), NR_FCHMODAT2, 0);
	return rc;
}

static int add_rules(scmp_filter_ctx ctx)
{
	size_t i;
	int rc, nr;

	for (i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
		nr = seccomp_syscall_resolve_name(denied[i]);
		if (nr < 0)
			continue;
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
		if (rc < 0)
			return rc;
	}
	/* clone3 passes its flags in memory, out of the filter's sight: ENOSYS makes libc fall
	 * back to clone(), whose flags are checked below. */
	rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	for (i = 0; i < sizeof(clone_new) / sizeof(clone_new[0]) && rc == 0; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				      SCMP_A0(SCMP_CMP_MASKED_EQ, clone_new[i], clone_new[i]));
	if (rc == 0)
		rc = deny_personality(ctx);
	/* The kernel reads ioctl's request as 32 bits: compare only those, or garbage in the
	 * upper half would slip TIOCSTI past the filter. TIOCSTI pushes input into the
	 * controlling terminal, TIOCLINUX can read and paste the console. */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, TIOCSTI));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, TIOCLINUX));
	/* fallocate reserves blocks in one call, faster than any look at the disk can see:
	 * it put 2 GiB under an 8 MiB disk_bytes. EOPNOTSUPP makes libc and tools write. */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EOPNOTSUPP), SCMP_SYS(fallocate), 0);
	if (rc == 0)
		rc = limit_sockets(ctx);
	if (rc == 0)
		rc = deny_setid_modes(ctx);
	return rc;
}

int main(void)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	char path[] = "/tmp/box-sbfilter-gen.XXXXXX";
	struct sock_filter *prog;
	size_t i, n;
	long size;
	int rc, fd;
	FILE *f;

	if (!ctx)
		return 1;
	rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	/* lib/sandbox/sbjail.c sets no_new_privs itself, before loading the program */
	if (rc == 0)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
	/* a binary tree of system call numbers: every call of the guest pays for the filter */
	if (rc == 0)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (rc == 0)
		rc = add_rules(ctx);
	fd = mkstemp(path);
	if (rc < 0 || fd < 0 || seccomp_export_bpf(ctx, fd) < 0) {
		fprintf(stderr, "box-sbfilter-gen: cannot build the filter: %s\n",
			strerror(rc < 0 ? -rc : errno));
		return 1;
	}
	seccomp_release(ctx);
	size = lseek(fd, 0, SEEK_END);
	if (size <= 0 || size % (long)sizeof(*prog) || lseek(fd, 0, SEEK_SET) < 0)
		return 1;
	prog = malloc((size_t)size);
	if (!prog || read(fd, prog, (size_t)size) != size)
		return 1;
	close(fd);
	unlink(path);
	n = (size_t)size / sizeof(*prog);
	if (n > 0xffff)
		return 1;
	f = stdout;
	fprintf(f, "/* generated by box-sbfilter-gen from lib/sandbox/sbfilter-gen.c; do not edit */\n"
		   "#include <linux/filter.h>\n\n"
		   "extern const struct sock_filter box_sbfilter[];\n"
		   "extern const unsigned short box_sbfilter_len;\n\n"
		   "const struct sock_filter box_sbfilter[] = {\n");
	for (i = 0; i < n; i++)
		fprintf(f, "\t{ 0x%04x, %u, %u, 0x%08x },\n", prog[i].code, prog[i].jt, prog[i].jf,
			prog[i].k);
	fprintf(f, "};\nconst unsigned short box_sbfilter_len = %zu;\n", n);
	free(prog);
	return fflush(f) == 0 ? 0 : 1;
}
