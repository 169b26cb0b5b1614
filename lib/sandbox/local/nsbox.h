/* The local provider of box-sandbox: a holder process that is PID 1 of new user, mount, pid,
 * net, ipc, uts and cgroup namespaces around a read-only root, and commands run inside it.
 * lib/sandbox/local/nsbox.c starts, watches, pauses and stops an instance and is the provider table of
 * lib/sandbox/sbprov.h (box_nsbox_provider); each process role has its own file (lib/sandbox/local/nsroles.h):
 * the holder lib/sandbox/local/nsholder.c, the keeper lib/sandbox/local/nskeeper.c, the exec chain lib/sandbox/local/nsexec.c. */
#ifndef BOX_NSBOX_H
#define BOX_NSBOX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <cjson/cJSON.h>
#include "cgroup.h"
#include "err.h"
#include "idmap.h"
#include "sbexec.h"

#define BOX_NSBOX_MOUNTS_MAX 32
#define BOX_NSBOX_FULL_OUTPUT_MAX ((int64_t)256 << 20)  /* cap on the full-output log */
#define BOX_NSBOX_LOGS_KEPT 16                          /* full-output logs kept per session */
#define BOX_NSBOX_OUTPUTS_TIMEOUT_MS 10000              /* the listing of /output after an exec */

struct box_nsbox_mount {
	const char *host;    /* absolute host path (file or directory) */
	const char *guest;   /* absolute guest path, checked by box_nsbox_check_guest_path */
	int ro;
};

/* Mounts parsed from "HOST:GUEST[:ro]" texts; the strings are owned. */
struct box_nsbox_mounts {
	struct box_nsbox_mount m[BOX_NSBOX_MOUNTS_MAX];
	char *buf[BOX_NSBOX_MOUNTS_MAX];
	size_t n;
};

/* Parses arr (an array of "HOST:GUEST[:ro|:rw]" strings) into an emptied *ms: absolute paths,
 * the host path an existing file or directory, the guest path allowed by
 * box_nsbox_check_guest_path. Returns 0, or -1 with invalid_request or not_found (a missing
 * source), path "$.mount[i]"; *ms is left empty on failure. */
int box_nsbox_parse_mounts(const cJSON *arr, struct box_nsbox_mounts *ms, struct box_err *err);

struct box_toolset;

/* The tools file of --tools, found (its absolute path, symlinks resolved, in abs) and
 * loaded as a session granted it uses it. NULL with not_found (path "$.tools") or
 * box_tools_load's errors. */
struct box_toolset *box_nsbox_load_tools(const char *file, char *abs, size_t n,
					 struct box_err *err);

/* Frees the strings of *ms; it is empty afterwards. */
void box_nsbox_mounts_release(struct box_nsbox_mounts *ms);

struct box_nsbox_config {
	const char *dir;       /* the session directory, absolute: workspace/ input/ output/
				* root/ logs/ run/ live there */
	const char *id;
	const char *cgname;    /* the instance's groups: box/<cgname> (box_cg_valid_name); one
				* of its own per instance, so that sessions of one id under two
				* state directories never share them */
	int64_t memory;        /* bytes, <= 0: none */
	int64_t pids;          /* <= 0: none */
	int64_t disk_bytes;    /* bound of /workspace + /output and size of /tmp */
	const struct box_nsbox_mount *mounts;
	size_t nmounts;
	const char *tool_bin;  /* host path mounted read-only at /usr/local/bin/box-tool; NULL: none */
	/* Run by the keeper (the holder's parent on the host) while the holder lives: returns the
	 * milliseconds until it wants to run again, or < 0 to stop being called. NULL: never. */
	int (*keeper_tick)(const void *ctx);
	const void *keeper_ctx;
	/* A listening socket the keeper serves while the holder lives (the tool socket):
	 * keeper_serve(fd, keeper_ctx) is called when it is readable. -1: none. */
	int serve_fd;
	void (*keeper_serve)(int fd, const void *ctx);
	/* The host ids of the guest's root (lib/sandbox/local/idmap.h); count 0: box_idmap_for_guest's. */
	struct box_idmap ids;
};

struct box_nsbox_inst {
	pid_t pid;              /* the holder, in the host's pid namespace */
	int64_t start;          /* its start time (/proc/PID/stat field 22) */
	enum box_cg_mode cg;
	struct box_idmap ids;   /* what the guest's ids are on the host (box_nsbox_start) */
};

/* 0 if guest is an absolute, normalised path that may receive a mount (not /, not under
 * /proc, /dev, /usr, /etc, /bin, /lib*, /sbin, /workspace, /input, /output, /tmp, /run/box);
 * -1 with invalid_request otherwise. */
int box_nsbox_check_guest_path(const char *guest, struct box_err *err);

/* 1 when the host can build a sandbox here (user namespaces), 0 otherwise. */
int box_nsbox_supported(void);

/*
 * Starts a holder for the session and waits (at most 10 s) until its root is built. The
 * session directory's workspace/, input/, output/, root/, logs/ and run/ are created when
 * missing; workspace/, input/ and output/ (the directories, not what is in them) are given to
 * the guest's root (c->ids, or box_idmap_for_guest's when its count is 0). The guest's uid and
 * gid 0 are c->ids' host ids: run as root, a range of unprivileged ids with no supplementary
 * group; as an ordinary user the caller's own ids, its supplementary groups kept (an
 * unprivileged user namespace cannot drop them). Returns 0 with *out filled (out->ids the map
 * used), or -1 with unsupported (no user namespaces), invalid_request (a bad /etc/subuid or
 * /etc/subgid), io_error (a mount failed: the message names it) or timeout.
 */
int box_nsbox_start(const struct box_nsbox_config *c, struct box_nsbox_inst *out,
		    struct box_err *err);

/* What the host sees of an instance: BOX_SB_OBS_ABSENT (no such process, or a recycled
 * pid), BOX_SB_OBS_RUNNING or BOX_SB_OBS_PAUSED (as enum box_sb_observed values). Here and
 * below, id is the instance's group name (box_nsbox_config.cgname). */
int box_nsbox_observe(const struct box_nsbox_inst *i, const char *id);

/* Freezes / thaws every process of the instance (the cgroup freezer, SIGSTOP/SIGCONT of the
 * instance's processes where no freezer is writable). 0, or -1 with err. */
int box_nsbox_pause(const struct box_nsbox_inst *i, const char *id, struct box_err *err);
int box_nsbox_resume(const struct box_nsbox_inst *i, const char *id, struct box_err *err);

/* Kills the instance (its whole pid namespace) and removes its groups. An absent instance is
 * not an error. 0, or -1 with io_error. */
int box_nsbox_stop(const struct box_nsbox_inst *i, const char *id, struct box_err *err);

#define BOX_NSBOX_DISK_WALK_MS 10000   /* a look at the disk that takes longer fails closed */

/*
 * The bytes the session in sdir takes against disk_bytes: its /workspace, /output and /input
 * walked (lib/core/fswalk.h: st_blocks, each inode once, bounded by BOX_DISK_WALK_MAX_ENTRIES and
 * deadline_ms, 0: none), plus the regular files on the same file systems that processes of
 * the instance whose holder is holder (0: none) hold open after unlinking them.
 * Returns the total, or -1 with err when it could not be measured (a walk that did not
 * finish: callers count that as over the limit).
 */
int64_t box_nsbox_disk_used(const char *sdir, pid_t holder, int64_t deadline_ms,
			    struct box_err *err);

/*
 * Runs one command in the instance (x->env is its whole environment): it joins the holder's namespaces through a pidfd (a
 * recycled pid is never joined), gets its own pid namespace under the sandbox's (so that
 * everything it starts ends with it), its own session, the sandbox's groups, rlimits, no
 * capabilities, no_new_privs, the seccomp deny-list and only fds 0-2.
 *
 * Returns 0 with *r (emptied by the caller) filled: exit_code, signal, stdout and stderr
 * (each at most max_output_bytes, see box_sbexec_set_output), truncated, total_lines,
 * full_output_path (only when truncated: both streams in arrival order, at most
 * BOX_NSBOX_FULL_OUTPUT_MAX bytes), duration_ms, the limit (box_sbexec_classify) and
 * limits_enforced_by ("cgroup" or "rlimit"); outputs are left to the caller. -1 with err
 * when the command could not be started (not_found: the instance is gone; io_error).
 */
int box_nsbox_exec(const struct box_nsbox_inst *i, const struct box_nsbox_config *c,
		   const struct box_sbexec *x, struct box_sbexec_result *r, struct box_err *err);

/*
 * Starts x (its whole environment in x->env) in the instance as the background command
 * handle, reserved in the jobs directory dfd (lib/sandbox/sbjobs.h), and leaves a watcher
 * that keeps its log and its end (lib/sandbox/local/nsjobs.c). Returns 0 with *pid its pid
 * in the guest, or -1 with err; *ran says whether it was started, as for an exec.
 */
int box_nsbox_background(const struct box_nsbox_config *c, const struct box_sbexec *x,
			 int dfd, const char *handle, int *pid, int *ran, struct box_err *err);

/*
 * Runs the helper box-sbfiles with args (at most 8, NULL-terminated) as every helper runs:
 * its own process group, an environment without credentials, killed with the caller and
 * when it passes timeout_ms (timeout, limit "what"), at most out_max bytes of output read.
 * Returns its JSON result when it says ok, else NULL with its error.
 */
cJSON *box_nsbox_sbfiles_run(const char *const *args, int timeout_ms, const char *what,
			    size_t out_max, struct box_err *err);

#endif
