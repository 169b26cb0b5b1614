#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef HAVE_LINUX_OPENAT2_H
#include <linux/openat2.h>
#else
#include <linux/types.h>
struct open_how {
	__u64 flags;
	__u64 mode;
	__u64 resolve;
};
#define RESOLVE_NO_MAGICLINKS 0x02
#define RESOLVE_IN_ROOT 0x10
#endif

#include "confine.h"
#include "banned.h"

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

#define ALIAS "workspace"

static const char escape_msg[] = "path escapes the workspace";
static const char enosys_msg[] =
	"openat2 with RESOLVE_IN_ROOT is not available on this kernel (Linux 5.6 or later needed)";

int box_confine_normalize_n(const char *path, size_t len, char *out, size_t outsz,
			    struct box_err *err)
{
	const char *p, *end;
	size_t o = 0, ncomp = 0;

	if (!path || len == 0)
		return box_err_set(err, BOX_E_INVALID, "empty path");
	if (memchr(path, 0, len))
		return box_err_set(err, BOX_E_INVALID, "path contains a NUL byte");
	if (len >= PATH_MAX)
		return box_err_set(err, BOX_E_INVALID, "path is longer than %d bytes", PATH_MAX - 1);
	if (outsz < 2)
		return box_err_set(err, BOX_E_INVALID, "path does not fit in %zu bytes", outsz);

	p = path;
	end = path + len;
	/* the alias is a prefix of the guest's view, so it is taken off before ".." is applied:
	 * "/workspace/../x" means a file next to the workspace, which is an escape */
	if (*p == '/') {
		const char *q = p;

		while (q < end && *q == '/')
			q++;
		if ((size_t)(end - q) >= sizeof(ALIAS) - 1 &&
		    memcmp(q, ALIAS, sizeof(ALIAS) - 1) == 0 &&
		    (q + sizeof(ALIAS) - 1 == end || q[sizeof(ALIAS) - 1] == '/'))
			p = q + sizeof(ALIAS) - 1;
	}

	out[0] = 0;
	while (p < end) {
		const char *seg;
		size_t n;

		while (p < end && *p == '/')
			p++;
		seg = p;
		while (p < end && *p != '/')
			p++;
		n = (size_t)(p - seg);
		if (n == 0 || (n == 1 && seg[0] == '.'))
			continue;
		if (++ncomp > BOX_CONFINE_MAX_COMPONENTS)
			return box_err_set(err, BOX_E_INVALID, "path has more than %d components",
					   BOX_CONFINE_MAX_COMPONENTS);
		if (n == 2 && seg[0] == '.' && seg[1] == '.') {
			if (o == 0)
				return box_err_set(err, BOX_E_POLICY, "%s", escape_msg);
			while (o > 0 && out[o - 1] != '/')
				o--;
			o--;
			out[o] = 0;
			continue;
		}
		if (o + 1 + n + 1 > outsz)
			return box_err_set(err, BOX_E_INVALID, "path does not fit in %zu bytes", outsz);
		out[o++] = '/';
		memcpy(out + o, seg, n);
		o += n;
		out[o] = 0;
	}
	if (o == 0) {
		out[0] = '/';
		out[1] = 0;
	}
	return 0;
}

int box_confine_normalize(const char *path, char *out, size_t outsz, struct box_err *err)
{
	if (!path)
		return box_err_set(err, BOX_E_INVALID, "empty path");
	return box_confine_normalize_n(path, strlen(path), out, outsz, err);
}

static long sys_openat2(int dirfd, const char *path, struct open_how *how)
{
	return syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
}

int box_confine_open(int rootfd, const char *path, int flags, mode_t mode, struct box_err *err)
{
	char norm[PATH_MAX];
	struct open_how how;
	const char *rel;
	long fd;

	if (box_confine_normalize(path, norm, sizeof(norm), err) < 0) {
		if (path)
			box_err_path(err, path);
		return -1;
	}
	rel = norm[1] ? norm + 1 : ".";
	memset(&how, 0, sizeof(how));
	how.flags = (unsigned)flags | O_CLOEXEC;
	if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
		how.mode = mode;
	how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;

	/* EAGAIN: a rename raced with a ".." walk; the kernel asks for a retry */
	for (int tries = 0;; tries++) {
		fd = sys_openat2(rootfd, rel, &how);
		if (fd >= 0)
			return (int)fd;
		if (errno != EINTR && !(errno == EAGAIN && tries < 16))
			break;
	}
	switch (errno) {
	case ENOSYS:
		box_err_set(err, BOX_E_UNSUPPORTED, "%s", enosys_msg);
		err->sys_errno = ENOSYS;
		break;
	case EXDEV:
	case ELOOP:
		box_err_set(err, BOX_E_POLICY, "%s: %s", escape_msg, norm);
		err->sys_errno = errno;
		break;
	default:
		box_err_sys(err, "open %s", norm);
	}
	box_err_path(err, norm);
	return -1;
}

int box_confine_probe(struct box_err *err)
{
	struct open_how how;
	int root;
	long fd;

	root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return box_err_sys(err, "open /");
	memset(&how, 0, sizeof(how));
	how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
	how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
	fd = sys_openat2(root, ".", &how);
	if (fd < 0) {
		int e = errno;

		close(root);
		if (e == ENOSYS) {
			box_err_set(err, BOX_E_UNSUPPORTED, "%s", enosys_msg);
			err->sys_errno = ENOSYS;
			return -1;
		}
		errno = e;
		return box_err_sys(err, "openat2 probe");
	}
	close((int)fd);
	close(root);
	return 0;
}
