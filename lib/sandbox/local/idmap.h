/* The host ids a sandbox's guest runs as. Run by root, box-sandbox maps guest ids 0-65535 to a
 * range of unprivileged host ids: root's range in /etc/subuid and /etc/subgid when they have
 * one, else a fixed default range, as rootless container engines do with subordinate ids. An
 * ordinary user can only map its own ids (guest 0 is the caller). */
#ifndef BOX_IDMAP_H
#define BOX_IDMAP_H

#include <stddef.h>
#include <stdint.h>
#include "err.h"

#define BOX_IDMAP_COUNT 65536u                /* guest ids 0..65535 */
#define BOX_IDMAP_DEFAULT_START 1879048192u   /* 0x70000000: used without a subuid range */
#define BOX_IDMAP_FILE_MAX ((size_t)1 << 20)  /* cap on /etc/subuid and /etc/subgid */

/* Guest uid 0 is host uid `uid`, guest gid 0 host gid `gid`; guest ids 0..count-1 are mapped
 * (count 1: an ordinary user's own ids). */
struct box_idmap {
	uint32_t uid, gid, count;
};

/*
 * The first range of a subordinate-id file's text that belongs to the user called name or
 * numbered id ("name:start:count" or "id:start:count", one a line) and holds at least want
 * ids. The text must be well-formed as a whole: every line exactly three ':'-separated fields,
 * a non-empty owner, start and count decimal (no sign, no spaces, no leading zeros but "0",
 * at most 2^32 - 1), count > 0, start + count <= 2^32 - 1 (no wrap, never the invalid id -1),
 * no range starting at 0 (it would map a guest onto host root); blank lines are allowed, NUL
 * bytes are not. Returns 1 with *start set, 0 when the user has no range that large, or -1
 * with invalid_request naming the line.
 */
int box_idmap_parse(const char *text, size_t len, const char *name, uint32_t id, uint32_t want,
		    uint32_t *start, struct box_err *err);

/*
 * box_idmap_parse of the file path, read strictly: opened without following a symlink, a
 * regular file, at most BOX_IDMAP_FILE_MAX bytes. An absent file is 0 (no range). Returns 1,
 * 0, or -1 with invalid_request (a symlink, not a regular file, too large, a bad line) or
 * io_error.
 */
int box_idmap_read(const char *path, const char *name, uint32_t id, uint32_t want,
		   uint32_t *start, struct box_err *err);

/*
 * The guest's ids for this process: as euid 0, root's ranges of subuid and subgid (each file
 * on its own; the default start without a range) with count BOX_IDMAP_COUNT; otherwise the
 * caller's own uid and gid with count 1. subuid/subgid NULL: /etc/subuid, /etc/subgid.
 * Returns 0, or -1 with box_idmap_read's errors.
 */
int box_idmap_for_guest(struct box_idmap *m, const char *subuid, const char *subgid,
			struct box_err *err);

/* The uid_map or gid_map line of m ("0 START COUNT\n"); gid != 0: the gid one. Returns the
 * length, or -1 when n is too small. */
int box_idmap_line(const struct box_idmap *m, int gid, char *out, size_t n);

#endif
