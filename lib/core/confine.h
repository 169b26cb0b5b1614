/* Paths confined to a directory that acts as "/": lexical checks, then openat2 RESOLVE_IN_ROOT. */
#ifndef BOX_CONFINE_H
#define BOX_CONFINE_H

#include <stddef.h>
#include <sys/types.h>
#include "err.h"

/* Most components a path may have (counted in the input, "." and empty ones excluded). */
#define BOX_CONFINE_MAX_COMPONENTS 64

/*
 * Normalises a guest path lexically into out: always absolute ("/" for the root itself,
 * otherwise "/a/b" with no trailing slash). "x" and "/x" are the same file; an absolute
 * "/workspace/x" is an alias of "/x" and "/workspace" of "/". Repeated slashes and "."
 * collapse; ".." removes the previous component.
 * Returns 0, or -1 with:
 *   invalid_request  path NULL or empty, strlen >= PATH_MAX, more than
 *                    BOX_CONFINE_MAX_COMPONENTS components, or the result does not fit outsz;
 *   policy_denied    a ".." that would climb above the root ("path escapes the workspace").
 * Symlinks are not looked at: box_confine_open() is what keeps them inside.
 * Normalising twice is not the identity when a real directory is named "workspace"
 * ("/workspace/workspace/x" gives "/workspace/x", then "/x"): hand a result on relative,
 * as out + 1 (or "." for the root), which the alias never applies to.
 */
int box_confine_normalize(const char *path, char *out, size_t outsz, struct box_err *err);

/* Same, for a counted string that may hold bytes after a NUL (a Lua string): an embedded
 * NUL is invalid_request. */
int box_confine_normalize_n(const char *path, size_t len, char *out, size_t outsz,
			    struct box_err *err);

/*
 * Opens path inside the directory rootfd as if rootfd were "/": the path is normalised with
 * box_confine_normalize(), then opened with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS),
 * so absolute symlink targets and ".." resolve inside rootfd and /proc magic links are refused.
 * flags are open(2) flags (O_CLOEXEC is always added); mode is used with O_CREAT/O_TMPFILE.
 * Returns a new fd (the caller closes it), or -1 with err set (err->path is the normalised
 * path when known):
 *   unsupported    the kernel has no openat2 (Linux 5.6 or later needed);
 *   policy_denied  the normalisation refused it, or resolution met EXDEV/ELOOP (a symlink or
 *                  mount leaving the root, a magic link, O_NOFOLLOW on a symlink);
 *   not_found      ENOENT; io_error for anything else (sys_errno says which).
 */
int box_confine_open(int rootfd, const char *path, int flags, mode_t mode, struct box_err *err);

/* 0 when openat2 with RESOLVE_IN_ROOT works here; -1 with unsupported (or io_error) if not. */
int box_confine_probe(struct box_err *err);

#endif
