/*
 * File trees of box-sandbox without libarchive or libcrypto (box-sandbox links this and must
 * start fast): copying a host path into /input.
 * Nothing here ever follows a symlink below the directory it was given.
 */
#ifndef BOX_SBCOPY_H
#define BOX_SBCOPY_H

#include <stdint.h>
#include <sys/types.h>
#include "err.h"

#define BOX_SBCOPY_MAX_FILES 100000
#define BOX_SBCOPY_MAX_BYTES (INT64_C(1) << 30)
#define BOX_SBCOPY_MAX_DEPTH 64
#define BOX_SBCOPY_DEPTH_CEILING 256      /* largest max_depth a caller may ask for */
#define BOX_SBCOPY_CHOWN_MAX_ENTRIES 1000000 /* bound of box_sbcopy_chown_tree */

/* Caps on a copy; a 0 member means its default (BOX_SBCOPY_MAX_*). */
struct box_sbcopy_limits {
	uint64_t max_files;  /* entries met below src, of any type, skipped ones included */
	uint64_t max_bytes;  /* bytes of regular-file content copied, as actually read */
	unsigned max_depth;  /* components of an entry's path below src: "a/b" has depth 2 */
};

/* What a copy went through (the root itself counts as a file or a directory). */
struct box_sbcopy_stats {
	uint64_t files;          /* regular files copied */
	uint64_t dirs;           /* directories created */
	uint64_t links;          /* symlinks recreated */
	uint64_t bytes;          /* file content bytes copied */
	uint64_t skipped_links;  /* symlinks left out: absolute, or able to leave the tree */
	uint64_t skipped_other;  /* FIFOs, sockets, devices left out */
};

/*
 * Copies the host file or directory src (a path; src itself is followed if it is a symlink,
 * since the caller named it) to destdirfd/name (one path component). Below src nothing is
 * ever followed: directories are opened with O_NOFOLLOW|O_DIRECTORY, files with O_NOFOLLOW
 * and checked by fstat after the open.
 *   - regular files are copied with mode 0755 if they had any execute bit, else 0644
 *     (set-id and sticky bits dropped); directories get 0755;
 *   - a symlink is recreated, target unchanged, only if its target is relative and made of
 *     ".." components followed by components that are neither ".." nor empty, with no more
 *     ".." than the link's own depth below src ("../x" in "a/l" is fine, "a/../../x" is
 *     not). Such a target cannot leave the tree however other links in it resolve, whereas
 *     a merely lexical check can ("s/.." where s points at the root). Others are skipped and
 *     counted in st->skipped_links;
 *   - FIFOs, sockets and devices are skipped and counted in st->skipped_other.
 * The copy is made under a temporary name in destdirfd and renamed to name at the end
 * (RENAME_NOREPLACE); on failure it is removed, so nothing partial is ever left at name.
 * lim and st may be NULL (defaults; no stats). st is filled on failure too.
 * Returns 0, or -1 with err set:
 *   invalid_request  a bad name, src neither a regular file nor a directory, max_depth above
 *                    BOX_SBCOPY_DEPTH_CEILING;
 *   not_found        src does not exist (or a component of it);
 *   conflict         destdirfd/name already exists (also when it appears during the copy);
 *   limit_exceeded   more than max_files entries (limit "files"), max_bytes bytes ("bytes")
 *                    or an entry deeper than max_depth ("depth");
 *   io_error         reading src or writing the copy failed (EDQUOT/ENOSPC: limit_exceeded
 *                    with limit "disk"); internal for memory.
 */
int box_sbcopy_in(const char *src, int destdirfd, const char *name,
		  const struct box_sbcopy_limits *lim, struct box_sbcopy_stats *st,
		  struct box_err *err);

/* Trees are removed and measured by lib/core/fswalk.h. */

/* A fresh hidden temporary name ".TAG-<16 hex>.tmp" for a file or directory made beside its
 * final place. Returns 0, or -1 with io_error when no randomness could be had. */
int box_sbcopy_tmp_name(char *out, size_t outsz, const char *tag, struct box_err *err);

/*
 * Gives dirfd/name (name "." for dirfd itself) and everything below it to uid:gid, fd-relative,
 * never following a symlink (a symlink itself is chowned), at most
 * BOX_SBCOPY_CHOWN_MAX_ENTRIES entries and BOX_SBCOPY_DEPTH_CEILING levels. For trees the host made for a guest (its /input, a restored
 * workspace). Returns 0, or -1 with err: limit_exceeded ("entries", "depth"; what was
 * chowned stays so), not_found (name absent), io_error.
 */
int box_sbcopy_chown_tree(int dirfd, const char *name, uid_t uid, gid_t gid,
			  struct box_err *err);

#endif
