#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

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

/* generated at build time by box-jail-gen (lib/run/jail-gen.c) with libseccomp */
extern const struct sock_filter box_jail_filter[];
extern const unsigned short box_jail_filter_len;

int box_jail_vm(const struct box_jail_limits *l, struct box_err *err)
{
	rlim_t cpu_s = (rlim_t)((l->cpu_ms + 999) / 1000 + 1);

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

	{
		struct sock_fprog prog = { box_jail_filter_len,
					   (struct sock_filter *)box_jail_filter };

		if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
			return box_err_sys(err, "loading the seccomp filter");
	}
	return 0;
}
