/*
 * Directory trees copied between the host and a sandbox (box-sandbox cp-in and cp-out) as tar
 * streams through box's safe archive code (lib/artifact/boxarchive): run in the box-sbfiles
 * helper, since box-sandbox itself never loads libarchive.
 */
#ifndef BOX_SBCP_H
#define BOX_SBCP_H

#include <stdint.h>
#include <sys/types.h>
#include "err.h"

/* What a copy went through. */
struct box_sbcp_stats {
	int64_t entries;   /* files, directories and symlinks below the source */
	int64_t files;
	int64_t dirs;
	int64_t links;
	int64_t bytes;     /* bytes of file content */
};

/*
 * A look at the source tree below srcfd before a byte is packed, bounded however the tree
 * was built (a hostile guest's): names with a control character (a newline, say) are
 * invalid_request; more than BOX_ARCHIVE_MAX_ENTRIES entries (limit "entries"), a path deeper
 * than BOX_ARCHIVE_MAX_DEPTH components ("depth") or file sizes (st_size: a sparse file
 * counts whole) over max_bytes ("bytes") are limit_exceeded; a symlink whose target could
 * leave the tree is policy_denied (BOX_ARCHIVE_SYMLINKS' rule); devices, FIFOs and sockets
 * are invalid_request. Nothing is followed. err->path names the entry (relative). Returns
 * 0, or -1 with err.
 */
int box_sbcp_check(int srcfd, int64_t max_bytes, struct box_sbcp_stats *st,
		   struct box_err *err);

/*
 * Copies the tree below srcfd to parentfd/name: box_sbcp_check, then packed
 * (box_archive_pack_ex with BOX_ARCHIVE_SYMLINKS) into an unlinked temporary file of
 * parentfd, extracted (box_archive_extract_ex, at most max_bytes) into a new hidden
 * directory of parentfd, given to uid:gid ((uid_t)-1: kept), then renamed to name. name must
 * be absent or an empty directory (which is replaced): anything else is conflict, checked
 * before the copy. On failure nothing is left in parentfd. st may be NULL.
 * Returns 0, or -1 with err: box_sbcp_check's errors, conflict, invalid_request (a bad name),
 * the errors of the pack and the extraction, io_error.
 */
int box_sbcp_copy(int srcfd, int parentfd, const char *name, int64_t max_bytes, uid_t uid,
		  gid_t gid, struct box_sbcp_stats *st, struct box_err *err);

#endif
