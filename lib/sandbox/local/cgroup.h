/* The control groups of one sandbox: cgroup v2 (one directory) or v1 (one directory per
 * controller: memory, pids, freezer, cpuacct), whichever the host lets us write. */
#ifndef BOX_CGROUP_H
#define BOX_CGROUP_H

#include <stdint.h>
#include <sys/types.h>
#include "err.h"

enum box_cg_mode {
	BOX_CG_NONE,   /* not writable here (an ordinary user, a read-only /sys/fs/cgroup) */
	BOX_CG_V1,
	BOX_CG_V2,
};

struct box_cg_limits {
	int64_t memory;   /* bytes; <= 0: none */
	int64_t pids;     /* <= 0: none */
};

/* Counters read from a sandbox's groups; -1 where the host does not tell. */
struct box_cg_counters {
	int64_t oom_kills;
	int64_t pids_max_hits;
	int64_t cpu_ns;
};

#define BOX_CG_NAME_MAX 96   /* a group's name: [a-z0-9][a-z0-9_-]{0,95} */

/* 1 when name may name a group (box/NAME): [a-z0-9][a-z0-9_-]{0,95}; 0 otherwise. */
int box_cg_valid_name(const char *name);

/* "none", "v1", "v2"; box_cg_mode_from_name returns -1 when unknown. */
const char *box_cg_mode_name(enum box_cg_mode m);
int box_cg_mode_from_name(const char *s);

/* What this process can use: v2 when /sys/fs/cgroup is a writable cgroup2 mount with the
 * memory and pids controllers, v1 when the memory, pids and freezer hierarchies are writable,
 * none otherwise. BOX_CGROUP_ROOT (tests) replaces /sys/fs/cgroup. */
enum box_cg_mode box_cg_detect(void);

/*
 * Creates the groups box/<id> (box/<id> under every v1 controller) and applies the limits;
 * id is a group name (box_cg_valid_name), in box-sandbox one of its own per instance
 * ("SESSION-<16 hex>"), never a session id alone. An existing group of the same name is
 * reused. Returns 0, or -1 with io_error, or invalid_request for a bad name.
 */
int box_cg_create(enum box_cg_mode m, const char *id, const struct box_cg_limits *l,
		  struct box_err *err);

/* Moves pid (0: the caller) into the groups. Returns 0 or -1 with io_error. */
int box_cg_join(enum box_cg_mode m, const char *id, pid_t pid, struct box_err *err);

/* Moves the caller out of the freezer's group (v1: to the freezer root; v2: to the root
 * group), so that it can freeze the group it came from without freezing itself. */
int box_cg_leave_freezer(enum box_cg_mode m, struct box_err *err);

/* Freezes (1) or thaws (0) the groups and waits, at most timeout_ms, until the kernel says
 * it is done. Returns 0, or -1 with io_error or timeout. */
int box_cg_freeze(enum box_cg_mode m, const char *id, int frozen, int timeout_ms,
		  struct box_err *err);

/* 1 when the groups are frozen, 0 when not, -1 when they do not exist. */
int box_cg_frozen(enum box_cg_mode m, const char *id);

/* Fills *c (every field -1 when unknown). */
void box_cg_counters(enum box_cg_mode m, const char *id, struct box_cg_counters *c);

/* Kills every process in the groups (freezing them first so none can fork away), then
 * removes the groups, waiting at most timeout_ms for them to empty. Missing groups are not an
 * error. Returns 0 or -1 with io_error. */
int box_cg_destroy(enum box_cg_mode m, const char *id, int timeout_ms, struct box_err *err);

#endif
