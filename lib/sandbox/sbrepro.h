/* Reproducing a sandbox's execs (issue 17): the provenance of an exec result, the digest of
 * what the guest sees as its root filesystem (cached per host state), and the session's
 * bounded exec history. */
#ifndef BOX_SBREPRO_H
#define BOX_SBREPRO_H

#include <stdint.h>
#include <cjson/cJSON.h>
#include "err.h"

#define BOX_SBREPRO_ROOTFS_MAX_ENTRIES 2000000  /* entries the listing digest covers at most */
#define BOX_SBREPRO_ROOTFS_MAX_DEPTH 64
#define BOX_SBREPRO_HISTORY_MAX 50              /* execs a session's history keeps */
#define BOX_SBREPRO_HISTORY_BYTES (256 << 10)   /* its bytes, and disk_bytes / 16 at most */
#define BOX_SBREPRO_HISTORY_FILE "history.jsonl"

/* The digest of the guest's root filesystem (the host's /bin /sbin /lib* /usr /etc that the
 * local provider binds read-only). */
struct box_sbrepro_rootfs {
	char digest[72];      /* "sha256:" + hex */
	int64_t entries;      /* entries the listing covers */
	int complete;         /* 0: BOX_SBREPRO_ROOTFS_MAX_ENTRIES cut the walk */
	int cached;           /* 1: the session's, no walk */
	int from_cache;       /* 1: taken from the host-wide cache ("source": "cache"), else walked */
	int64_t walk_ms;      /* the walk's time (of the walk that made it when cached) */
	char verified_at[40]; /* RFC 3339: when the full walk that gave this digest ended */
};

/*
 * The digest of the listing (names, types, modes, owners, sizes, mtimes, link targets; no
 * file contents) of the system directories, as a tree of per-directory SHA-256 digests: a
 * full walk (about 160,000 entries and 0.7 s on a Debian host). The roots are /bin /sbin
 * /lib /lib32 /lib64 /libx32 /usr /etc, or the absolute paths of BOX_SBREPRO_ROOTS
 * (':'-separated: a test hook). Returns 0, or -1 with unsupported (no libcrypto) or internal.
 */
int box_sbrepro_rootfs(struct box_sbrepro_rootfs *out, struct box_err *err);

/*
 * The session's rootfs digest: the one in sdir/rootfs.json, else (at the session's first
 * use, its first exec) the host-wide cache's (box_sbrepro_rootfs_cache_path) when its cheap
 * key (the roots, the mounts under them, the stamps of the directories down to two levels)
 * still holds, else a walk (box_sbrepro_rootfs) that also rewrites the cache; the digest is
 * then written to sdir/rootfs.json, and every later exec reads that one small file. A digest
 * taken from the cache starts a background verification walk (box_sbrepro_rootfs_verify, in
 * box-sbfiles rootfs-verify) when none ran in the last BOX_SBREPRO_VERIFY_INTERVAL seconds
 * (60): a file changed in place below the key's directories is seen by sessions started
 * after it completes. A walk under way for the session (sdir/rootfs.lock) is waited for.
 * Returns 0, or -1 with err (conflict when the wait passed 10 minutes).
 */
int box_sbrepro_rootfs_session(const char *sdir, struct box_sbrepro_rootfs *out,
			       struct box_err *err);

/* The path of the host-wide cache: $XDG_CACHE_HOME/box/rootfs.json, else
 * $HOME/.cache/box/rootfs.json, else $BOX_STATE_DIR/cache/rootfs.json; -1 when none is set. */
int box_sbrepro_rootfs_cache_path(char *out, size_t n);

/*
 * The verification walk (box-sbfiles rootfs-verify): at idle priority (nice 19, SCHED_IDLE,
 * idle I/O class), at most one on the host (an flock on rootfs.verify.lock beside the cache;
 * a verifier that finds it held does nothing), bounded by BOX_SBREPRO_ROOTFS_MAX_ENTRIES and
 * BOX_SBREPRO_VERIFY_TIME_S (an alarm ends it; nothing but a temp file of the cache
 * directory, swept by the next verifier, can be left). Walks the roots and replaces the
 * cache (temp file + rename) with the digest, key and verified_at it found. Never touches a
 * session directory. 0, or -1 with err.
 */
#define BOX_SBREPRO_VERIFY_TIME_S 600
int box_sbrepro_rootfs_verify(struct box_err *err);

/*
 * The provenance object of an exec: {"box_version", "kernel", "request_sha256" (of the
 * canonical request, its "events" left out), "policy_sha256" (of policy, the effective
 * policy; omitted when NULL), "tools" (a copy of tools, the session's granted tools, [] when
 * NULL), "rootfs": {"sha256", "entries", "complete", "source" ("walk" or "cache"),
 * "verified_at"}} (the session sdir's digest,
 * box_sbrepro_rootfs_session; a walk of its own when sdir is NULL). NULL with err.
 */
cJSON *box_sbrepro_provenance(const char *sdir, const cJSON *req, const cJSON *policy,
			      const cJSON *tools, struct box_err *err);

/* [{"name", "artifact"?, "digest"?}] of the tools of a manifest or box.lock at path (store
 * digests for the pinned ones), or NULL with box_tools_load's errors. */
cJSON *box_sbrepro_tools(const char *path, struct box_err *err);

/*
 * Appends entry (borrowed) as one line to sdir's history, replacing the file atomically
 * (temp file + rename): the oldest lines are dropped so that at most BOX_SBREPRO_HISTORY_MAX
 * lines and max_bytes bytes are kept. An entry larger than a quarter of max_bytes is kept
 * without its argv, command and stdin (their digests stay). Temp files of the session
 * directory older than a minute (left by a writer killed before its rename) are removed.
 * 0, or -1 with err.
 */
int box_sbrepro_history_add(const char *sdir, const cJSON *entry, int64_t max_bytes,
			    struct box_err *err);

/* The history entry of an exec: {"at", "request" (req without "events"; "stdin" replaced by
 * "stdin_sha256"), "ok", "exit_code", "signal", "duration_ms", "resource_limit",
 * "stdout_sha256", "stderr_sha256", "outputs" (their count), "provenance"}, from the exec's
 * result res. NULL with err. */
cJSON *box_sbrepro_history_entry(const cJSON *req, const cJSON *res, struct box_err *err);

/* The byte cap of the history of a session with the disk limit disk_bytes. */
int64_t box_sbrepro_history_cap(int64_t disk_bytes);

/* The last limit entries (all when limit <= 0) of sdir's history, oldest first; a line that
 * does not parse is skipped. A new array, or NULL with err. */
cJSON *box_sbrepro_history_read(const char *sdir, int64_t limit, struct box_err *err);

/* Runs box-sbfiles with args (NULL-terminated, at most 6): its result object, or NULL with
 * the error it printed (or not_found when it is not installed, timeout, internal). */
cJSON *box_sbrepro_helper(const char *const *args, struct box_err *err);

#endif
