/* Where box finds its own programs: the helpers of $(libexecdir)/box (box-http, box-sbfiles,
 * box-tool, box-provider-NAME) and its sibling binaries (box-run). */
#ifndef BOX_LIBEXEC_H
#define BOX_LIBEXEC_H

#include <stddef.h>
#include "err.h"

/*
 * The helper name: in $BOX_LIBEXEC_DIR alone when it is set and not empty; else in the
 * directory of the running binary when that is not the installed $(bindir), that is a build
 * tree, where the helpers are built beside the binaries, then in the installed
 * $(libexecdir)/box.
 * The first executable regular file wins. Writes its path into out. Returns 0, or -1 with
 * not_found naming the places looked in, or invalid_request (out too short).
 */
int box_libexec_find(const char *name, char *out, size_t n, struct box_err *err);

/* The directory the running binary lives in (from /proc/self/exe), "" when unknown. */
const char *box_libexec_self_dir(void);

/* The installed $(bindir) and $(libexecdir)/box, as configured. */
const char *box_libexec_bindir(void);
const char *box_libexec_pkgdir(void);

/* 1 if path is an executable regular file. */
int box_libexec_is_program(const char *path);

#endif
