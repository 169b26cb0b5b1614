/*
 * Build-time generator of the seccomp deny-list that box-sandbox puts on every command it runs
 * in a sandbox: libseccomp compiles the rules below to BPF once, here, and lib/sandbox/sbjail.c loads
 * the result with one prctl(), so box-sandbox neither links libseccomp nor compiles a filter on
 * every exec. The output (sbfilter.c) holds the program for the build machine's architecture;
 * system calls of any other architecture, x32 on x86_64 among them, kill the process.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/filter.h>
#include <seccomp.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
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
