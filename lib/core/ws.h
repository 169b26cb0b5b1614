/*
 * The workspace file API that box-run's parent process runs for a script's fs.* calls.
 * Every path is a guest path: normalised by box_confine_normalize() ("x", "/x" and
 * "/workspace/x" are one file; ".." above the root is policy_denied) and opened with
 * box_confine_open() on the workspace root, so absolute paths, ".." and symlinks never leave
 * it. Recursive walks never follow symlinks. A regular file with more than one hard link is
 * refused for read and append (policy_denied "hard-linked file"): its other name may be
 * outside the workspace. Names in results are the raw bytes the filesystem holds; making
 * them UTF-8 is the caller's job.
 * On failure every function fills err, with err->path the normalised guest path when known.
 */
#ifndef BOX_WS_H
#define BOX_WS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <cjson/cJSON.h>
#include "buf.h"
#include "err.h"

#define BOX_WS_MAX_DEPTH 64
#define BOX_WS_MAX_VISIT 100000    /* entries one walk may look at */
#define BOX_WS_MAX_APPEND (256 << 20) /* size of a file append may grow */

#define BOX_WS_APPEND_FILES 4        /* files an append keeps open to write on in place */

/* A file that an append of this box_ws made itself and keeps open (owned fd), under its
 * normalised path (owned); path NULL: the slot is free. */
struct box_ws_appended {
	char *path;
	int fd;
};

/* rootfd is owned. quota: total bytes write and append may write in this box_ws's life
 * (negative: no quota); written: bytes written so far. appended: the files later appends
 * write to in place (zeroed memory is a valid, empty list). */
struct box_ws {
	int rootfd;
	int64_t quota;
	int64_t written;
	struct box_ws_appended appended[BOX_WS_APPEND_FILES];
	/* own != 0: the files and directories write, append and mkdir create are given to
	 * uid:gid (the host ids of a sandbox's root) before they have their names; box_ws_open
	 * sets 0 */
	int own;
	uid_t uid;
	gid_t gid;
};

/* Opens the directory dir as the workspace root (dir itself is trusted: the host chose it).
 * Fails with unsupported when the kernel has no openat2. Returns 0 or -1; *ws is then
 * released (rootfd -1). */
int box_ws_open(struct box_ws *ws, const char *dir, int64_t quota, struct box_err *err);

/* Closes the root; safe to call twice. */
void box_ws_release(struct box_ws *ws);

/* Appends the content of the regular file path to out. More than out->max - out->len bytes
 * is limit_exceeded ("read_bytes", configured out->max); a directory is invalid_request,
 * another non-regular file or a hard-linked one policy_denied, absence not_found.
 * out is unchanged on failure. */
int box_ws_read(struct box_ws *ws, const char *path, struct box_buf *out, struct box_err *err);

/*
 * Writes n bytes (binary-safe) to path, creating missing parent directories (0755).
 * append == 0: the file is replaced atomically (box_atomic_replace: no fsync, mode 0644); a symlink or
 * hard link at path is replaced, never written through. append != 0: the first append to path
 * writes the old content and the bytes to a new file that replaces path atomically (created
 * 0644 if missing), so a symlink at path is replaced as a write replaces it; a hard-linked file
 * is refused, one larger than BOX_WS_MAX_APPEND is limit_exceeded ("append_bytes"). The new
 * file stays open (ws->appended): the next appends write only their bytes to it, in place, as
 * long as path still names that very inode with one link; otherwise they start over as the
 * first one did. No inode that this box_ws did not create is ever written. A failed in-place
 * append is cut back to the old size.
 * A write that would take ws->written past ws->quota fails with limit_exceeded ("write_bytes",
 * configured the quota) and writes nothing. The root itself is policy_denied.
 * Returns 0 (ws->written grows by n) or -1.
 */
int box_ws_write(struct box_ws *ws, const char *path, const void *data, size_t n, int append,
		 struct box_err *err);

/* 1 if path exists (symlinks followed inside the workspace), 0 if not (also when a parent is
 * not a directory), -1 with err for anything else (an escape, a bad path). */
int box_ws_exists(struct box_ws *ws, const char *path, struct box_err *err);

/* {"name", "path" (normalised), "is_dir", "size", "mtime" (seconds since the epoch)} of path,
 * symlinks followed inside the workspace; the root's name is "/". NULL with not_found when
 * absent, or another error. The caller frees the object with cJSON_Delete. */
cJSON *box_ws_stat(struct box_ws *ws, const char *path, struct box_err *err);

/* The entries of the directory path (without "." and "..") as an array of {"name", "is_dir",
 * "size"} sorted by name (byte order); symlinks are reported as themselves (is_dir false).
 * More than max_entries entries is limit_exceeded ("list_entries"). Caller frees. */
cJSON *box_ws_list(struct box_ws *ws, const char *path, size_t max_entries, struct box_err *err);

/*
 * Removes path: a file or symlink (never its target), an empty directory, or with recursive a
 * whole tree (box_fswalk_remove: any depth, width, mode and file type; symlinks inside are
 * removed, never followed). A non-empty directory without recursive is conflict; the root is
 * policy_denied. Returns 1 removed, 0 absent, -1 error.
 */
int box_ws_remove(struct box_ws *ws, const char *path, int recursive, struct box_err *err);

/* mkdir -p path (0755); existing directories are fine, the root included. Returns 0 or -1
 * (io_error ENOTDIR when a component is a file). */
int box_ws_mkdir(struct box_ws *ws, const char *path, struct box_err *err);

/*
 * The regular files under path as a sorted array of normalised guest paths ("/src/a.c");
 * path itself when it is a regular file. Symlinks are never followed or listed. More than
 * max_files files is limit_exceeded ("walk_files"); deeper than BOX_WS_MAX_DEPTH levels
 * "depth"; more than BOX_WS_MAX_VISIT entries looked at "walk_entries". Caller frees.
 */
cJSON *box_ws_walk(struct box_ws *ws, const char *path, size_t max_files, struct box_err *err);

#endif
