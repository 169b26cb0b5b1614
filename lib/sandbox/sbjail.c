#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>

#include "sbjail.h"
#include "banned.h"

/* generated at build time by box-sbfilter-gen (lib/sandbox/sbfilter-gen.c) with libseccomp */
extern const struct sock_filter box_sbfilter[];
extern const unsigned short box_sbfilter_len;

/* capability numbers are 0..63 in the kernel's two 32-bit words */
#define CAP_NUM_MAX 63

static int set_limit(int res, const char *name, int64_t value, struct box_err *err)
{
	struct rlimit rl;
	rlim_t v;

	if (value <= 0)
		return 0;
	if (getrlimit(res, &rl) < 0)
		return box_err_sys(err, "getrlimit %s", name);
	v = (rlim_t)value;
	/* raising a hard limit needs CAP_SYS_RESOURCE of the initial namespace: keep the
	 * stricter limit the process already has */
	if (rl.rlim_max != RLIM_INFINITY && v > rl.rlim_max)
		v = rl.rlim_max;
	rl.rlim_cur = v;
	rl.rlim_max = v;
	if (setrlimit(res, &rl) < 0)
		return box_err_sys(err, "setrlimit %s", name);
	return 0;
}

static int set_limits(const struct box_sbjail *j, struct box_err *err)
{
	if (set_limit(RLIMIT_AS, "RLIMIT_AS", j->as_bytes, err) < 0 ||
	    set_limit(RLIMIT_NPROC, "RLIMIT_NPROC", j->nproc, err) < 0 ||
	    set_limit(RLIMIT_CPU, "RLIMIT_CPU", j->cpu_seconds, err) < 0 ||
	    set_limit(RLIMIT_FSIZE, "RLIMIT_FSIZE", j->fsize_bytes, err) < 0 ||
	    set_limit(RLIMIT_NOFILE, "RLIMIT_NOFILE", j->nofile, err) < 0)
		return -1;
	return 0;
}

static int parse_fd(const char *name, int *fd)
{
	long v = 0;
	size_t i;

	for (i = 0; name[i]; i++) {
		if (name[i] < '0' || name[i] > '9' || i >= 10)
			return -1;
		v = v * 10 + (name[i] - '0');
	}
	if (i == 0 || v > 0x7fffffff)
		return -1;
	*fd = (int)v;
	return 0;
}

/*
 * For kernels before 5.9. Raw getdents64 on a stack buffer rather than opendir: no malloc in
 * a child forked from a possibly threaded parent. procfs positions its fd directory by fd
 * number, so closing entries while reading does not skip any.
 */
static int close_fds_proc(struct box_err *err)
{
	char buf[4096] __attribute__((aligned(8)));
	int dfd, fd, rounds;
	long n, off;

	dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return box_err_sys(err, "cannot close inherited fds: open /proc/self/fd");
	/* one entry per open fd, at least 24 bytes each: 1 << 16 rounds of 4 KiB cover
	 * millions of fds, more than RLIMIT_NOFILE allows */
	for (rounds = 0; rounds < (1 << 16); rounds++) {
		n = syscall(SYS_getdents64, dfd, buf, sizeof(buf));
		if (n < 0) {
			box_err_sys(err, "cannot close inherited fds: reading /proc/self/fd");
			close(dfd);
			return -1;
		}
		if (n == 0)
			break;
		for (off = 0; off < n;) {
			const char *name;
			unsigned short reclen;

			if (n - off < 20)
				break;
			memcpy(&reclen, buf + off + 16, sizeof(reclen));
			if (reclen < 20 || reclen > n - off)
				break;
			name = buf + off + 19;
			if (memchr(name, '\0', reclen - 19) && parse_fd(name, &fd) == 0 &&
			    fd > 2 && fd != dfd)
				close(fd);
			off += reclen;
		}
	}
	close(dfd);
	if (rounds == (1 << 16))
		return box_err_set(err, BOX_E_INTERNAL, "cannot close inherited fds: too many");
	return 0;
}

static int close_fds(struct box_err *err)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0)
		return 0;
	if (errno != ENOSYS)
		return box_err_sys(err, "close_range");
#endif
	return close_fds_proc(err);
}

static int read_cap_last(void)
{
	char buf[32], *end;
	ssize_t n;
	long v;
	int fd;

	fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return CAP_NUM_MAX;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return CAP_NUM_MAX;
	buf[n] = '\0';
	errno = 0;
	v = strtol(buf, &end, 10);
	if (errno || end == buf || (*end != '\n' && *end != '\0') || v < 0 || v > CAP_NUM_MAX)
		return CAP_NUM_MAX;
	return (int)v;
}

static int cap_get(struct __user_cap_data_struct data[2], struct box_err *err)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };

	memset(data, 0, 2 * sizeof(*data));
	if (syscall(SYS_capget, &hdr, data) < 0)
		return box_err_sys(err, "capget");
	return 0;
}

static int cap_set(struct __user_cap_data_struct data[2], struct box_err *err)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };

	if (syscall(SYS_capset, &hdr, data) < 0)
		return box_err_sys(err, "capset");
	return 0;
}

static int drop_bounding(struct box_err *err)
{
	int cap, last = read_cap_last();

	for (cap = 0; cap <= last; cap++) {
		if (prctl(PR_CAPBSET_DROP, (unsigned long)cap, 0, 0, 0) == 0)
			continue;
		/* past the kernel's last capability (when /proc could not say which it is) */
		if (errno == EINVAL)
			break;
		return box_err_sys(err, "dropping capability %d from the bounding set", cap);
	}
	return 0;
}

#define BOX_SECBITS (SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | \
		     SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED | \
		     SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED)

static int lock_securebits(struct box_err *err)
{
	int cur = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
	unsigned long want;

	if (cur < 0)
		return box_err_sys(err, "PR_GET_SECUREBITS");
	/* bits already set (perhaps locked) stay: clearing a locked bit fails */
	want = ((unsigned long)cur | BOX_SECBITS) & ~(unsigned long)SECBIT_KEEP_CAPS;
	if (want == (unsigned long)cur)
		return 0;
	if (prctl(PR_SET_SECUREBITS, want, 0, 0, 0) < 0)
		return box_err_sys(err, "PR_SET_SECUREBITS");
	return 0;
}

int box_sbjail_drop_caps(struct box_err *err)
{
	struct __user_cap_data_struct data[2];
	unsigned int setpcap = 1U << CAP_SETPCAP;

	if (cap_get(data, err) < 0)
		return -1;
	if (!(data[0].effective & setpcap) && (data[0].permitted & setpcap)) {
		data[0].effective = data[0].permitted;
		data[1].effective = data[1].permitted;
		if (cap_set(data, err) < 0)
			return -1;
	}
	/* Without CAP_SETPCAP neither the bounding set nor the securebits can change; with
	 * empty permitted sets and no_new_privs an execve cannot raise anything anyway. */
	if (data[0].permitted & setpcap) {
		if (drop_bounding(err) < 0 || lock_securebits(err) < 0)
			return -1;
	}
	/* EINVAL: a kernel before 4.3, without ambient capabilities */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return box_err_sys(err, "clearing the ambient capabilities");
	memset(data, 0, sizeof(data));
	return cap_set(data, err);
}

int box_sbjail_load_filter(struct box_err *err)
{
	struct sock_fprog prog = { box_sbfilter_len, (struct sock_filter *)box_sbfilter };

	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0)
		return 0;
	box_err_sys(err, "loading the seccomp filter");
	/* EINVAL: a kernel built without CONFIG_SECCOMP_FILTER */
	err->code = errno == EINVAL ? BOX_E_UNSUPPORTED : BOX_E_INTERNAL;
	return -1;
}

int box_sbjail_enter(const struct box_sbjail *j, struct box_err *err)
{
	if (set_limits(j, err) < 0 || close_fds(err) < 0)
		return -1;
	if (!j->keep_caps && box_sbjail_drop_caps(err) < 0)
		return -1;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		box_err_sys(err, "PR_SET_NO_NEW_PRIVS");
		err->code = errno == EINVAL ? BOX_E_UNSUPPORTED : BOX_E_INTERNAL;
		return -1;
	}
	return box_sbjail_load_filter(err);
}
