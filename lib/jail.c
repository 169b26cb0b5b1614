#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <seccomp.h>

#include "jail.h"
#include "banned.h"

#if defined(__SANITIZE_ADDRESS__)
#define BOX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BOX_ASAN 1
#endif
#endif

static int set_limit(int res, rlim_t soft, rlim_t hard, struct box_err *err)
{
	struct rlimit rl = { soft, hard };

	if (setrlimit(res, &rl) < 0)
		return box_err_sys(err, "setrlimit %d", res);
	return 0;
}

static const int allowed[] = {
	SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev),
	SCMP_SYS(recvfrom), SCMP_SYS(sendto), SCMP_SYS(recvmsg), SCMP_SYS(sendmsg),
	SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(close), SCMP_SYS(fstat), SCMP_SYS(lseek),
	SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(madvise), SCMP_SYS(brk),
	SCMP_SYS(rt_sigreturn), SCMP_SYS(rt_sigprocmask), SCMP_SYS(sigaltstack),
	SCMP_SYS(exit), SCMP_SYS(exit_group), SCMP_SYS(restart_syscall),
	SCMP_SYS(clock_gettime), SCMP_SYS(clock_getres), SCMP_SYS(gettimeofday), SCMP_SYS(time),
	SCMP_SYS(getrusage), SCMP_SYS(futex), SCMP_SYS(getpid), SCMP_SYS(gettid),
	SCMP_SYS(sched_yield), SCMP_SYS(getrandom), SCMP_SYS(setitimer), SCMP_SYS(getitimer),
};

int box_jail_vm(const struct box_jail_limits *l, struct box_err *err)
{
	scmp_filter_ctx ctx;
	rlim_t cpu_s = (rlim_t)((l->cpu_ms + 999) / 1000 + 1);
	size_t i;
	int rc = 0;

	if (set_limit(RLIMIT_CORE, 0, 0, err) < 0 || set_limit(RLIMIT_FSIZE, 0, 0, err) < 0 ||
	    set_limit(RLIMIT_NOFILE, 16, 16, err) < 0 || set_limit(RLIMIT_MEMLOCK, 0, 0, err) < 0 ||
	    set_limit(RLIMIT_CPU, cpu_s, cpu_s + 1, err) < 0)
		return -1;
#ifndef BOX_ASAN
	{
		rlim_t as = (rlim_t)l->memory_bytes + ((rlim_t)256 << 20);

		if (set_limit(RLIMIT_AS, as, as, err) < 0)
			return -1;
	}
#endif
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return box_err_sys(err, "prctl");

	ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
	if (!ctx)
		return box_err_set(err, BOX_E_INTERNAL, "seccomp_init failed");
	for (i = 0; i < sizeof(allowed) / sizeof(allowed[0]) && rc == 0; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0);
	/* memory, but never executable memory */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
				      SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
				      SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	/* abort() signals itself, and nothing else */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
				      SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)getpid()));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(rt_sigaction), 0);
	if (rc == 0)
		rc = seccomp_load(ctx);
	seccomp_release(ctx);
	if (rc < 0) {
		errno = -rc;
		return box_err_sys(err, "loading the seccomp filter");
	}
	return 0;
}
