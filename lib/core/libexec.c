#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libexec.h"
#include "box-paths.h"
#include "banned.h"

const char *box_libexec_bindir(void)
{
	return BOX_BINDIR;
}

const char *box_libexec_pkgdir(void)
{
	return BOX_PKGLIBEXECDIR;
}

int box_libexec_is_program(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

const char *box_libexec_self_dir(void)
{
	static char dir[PATH_MAX];
	static int done;
	char *slash;
	ssize_t k;

	if (done)
		return dir;
	done = 1;
	k = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	if (k <= 0) {
		dir[0] = 0;
		return dir;
	}
	dir[k] = 0;
	slash = strrchr(dir, '/');
	if (!slash)
		dir[0] = 0;
	else
		*(slash == dir ? slash + 1 : slash) = 0;
	return dir;
}

/* 1 if the running binary lives in the installed bindir (the same directory, by inode) */
static int installed(const char *self)
{
	struct stat a, b;

	return stat(self, &a) == 0 && stat(BOX_BINDIR, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

static int try_dir(const char *dir, const char *name, char *out, size_t n)
{
	int k = snprintf(out, n, "%s/%s", dir, name);

	return k > 0 && (size_t)k < n && box_libexec_is_program(out);
}

int box_libexec_find(const char *name, char *out, size_t n, struct box_err *err)
{
	const char *env = getenv("BOX_LIBEXEC_DIR"), *self = box_libexec_self_dir();

	if (!name[0] || strchr(name, '/') || n < 2)
		return box_err_set(err, BOX_E_INVALID, "bad helper name '%.64s'", name);
	/* the operator's directory, when given, is the only place: no quiet fallback */
	if (env && env[0]) {
		if (try_dir(env, name, out, n))
			return 0;
		out[0] = 0;
		return box_err_set(err, BOX_E_NOT_FOUND, "box's helper %s is not installed: looked in "
				   "%.1024s (BOX_LIBEXEC_DIR)", name, env);
	}
	if (self[0] && !installed(self) && try_dir(self, name, out, n))
		return 0;
	if (try_dir(BOX_PKGLIBEXECDIR, name, out, n))
		return 0;
	out[0] = 0;
	return box_err_set(err, BOX_E_NOT_FOUND, "box's helper %s is not installed: looked in "
			   "%s%s%s (reinstall box, or set BOX_LIBEXEC_DIR)", name,
			   self[0] && !installed(self) ? self : "",
			   self[0] && !installed(self) ? ", " : "", BOX_PKGLIBEXECDIR);
}
