/* The background commands and schedules of a session, as the host keeps them: one record
 * (JSON) per command and per schedule in the session's jobs/ directory, beside the command's
 * output log and its signal FIFO, all out of the guest's reach. The provider starts the
 * commands (lib/sandbox/local/nsjobs.c for the local one); this module names, lists, reads,
 * waits for and signals them, and bounds them.
 *
 *   jobs/bg-N.json    the command's record: handle, argv, state (starting, running, exited,
 *                     killed), started_at, pid (in the guest), watcher (the host process that
 *                     keeps its log) and its start time, exit_code, signal, finished_at,
 *                     schedule (the schedule that ran it), log_bytes, log_truncated
 *   jobs/bg-N.log     stdout and stderr in the order written, capped (box_sbjobs_log_cap)
 *   jobs/bg-N.sig     a FIFO the watcher reads: one byte, a signal number, per kill
 *   jobs/sched-N.json a schedule: handle, argv, env, cwd, every, next_at (ms since the
 *                     epoch), last (the handle of its last run), runs, skipped */
#ifndef BOX_SBJOBS_H
#define BOX_SBJOBS_H

#include <stdint.h>
#include <sys/types.h>
#include <cjson/cJSON.h>
#include "err.h"

#define BOX_SBJOBS_RUNNING_MAX 32     /* background commands of a session running at once */
#define BOX_SBJOBS_KEPT 32            /* records of ended commands kept (the oldest go) */
#define BOX_SBJOBS_SCHEDULES_MAX 16   /* schedules of a session */
#define BOX_SBJOBS_LOG_MAX ((int64_t)16 << 20)
#define BOX_SBJOBS_LOGS_CHUNK (1 << 20)  /* bytes one logs answer carries at most */
#define BOX_SBJOBS_EVERY_MAX 86400
#define BOX_SBJOBS_HANDLE_MAX 32

/* The cap of one command's log: min(disk_bytes / 64, 16 MiB), so that the logs of the 32
 * running and the 32 kept commands together stay within the session's disk limit. */
int64_t box_sbjobs_log_cap(int64_t disk_bytes);

/* The session's jobs/ directory (made when missing): an O_DIRECTORY fd, or -1 with err. */
int box_sbjobs_dir(const char *sdir, struct box_err *err);

/* 1 when handle is "bg-N" (kind 'b') or "sched-N" (kind 's') with N a positive integer of
 * at most 9 digits, 0 otherwise. */
int box_sbjobs_valid_handle(const char *handle, char kind);

/* Reserves a new command: fewer than BOX_SBJOBS_RUNNING_MAX running (else limit_exceeded),
 * the oldest ended records past BOX_SBJOBS_KEPT removed, then bg-N.json ("starting"), an
 * empty bg-N.log and the FIFO bg-N.sig made, N one more than any there. handle gets bg-N.
 * 0, or -1 with err. */
int box_sbjobs_reserve(int dfd, const cJSON *argv, const char *schedule, char *handle,
		       struct box_err *err);

/* Removes a reserved command's files (its start failed). */
void box_sbjobs_unreserve(int dfd, const char *handle);

/* The record of handle (not_found when absent), with a running command whose watcher is
 * gone shown as killed. NULL with err. */
cJSON *box_sbjobs_get(int dfd, const char *handle, struct box_err *err);

/* Writes the record of handle (atomically). 0, or -1 with err. */
int box_sbjobs_put(int dfd, const char *handle, const cJSON *rec, struct box_err *err);

/* How many commands of the session in sdir run now (0 when it has none). */
int box_sbjobs_running(const char *sdir);

/* ps: the session's commands and schedules, {"commands": [...], "schedules": [...]}, in
 * the order they were made. NULL with err. */
cJSON *box_sbjobs_list(const char *sdir, struct box_err *err);

/* The signal named by text: "TERM", "SIGTERM" or a number 1-64. 0 when it names none. */
int box_sbjobs_signal_of(const char *text);

/* Sends sig to the running command handle through its watcher: conflict when it has ended.
 * 0, or -1 with err. */
int box_sbjobs_signal(int dfd, const char *handle, int sig, struct box_err *err);

/* Up to max bytes of handle's log from offset into out (a buffer of max bytes): the bytes
 * read (0 at the end), or -1 with err. */
ssize_t box_sbjobs_log_read(int dfd, const char *handle, int64_t offset, char *out, size_t max,
			    struct box_err *err);

/* Ends the watchers of the session's commands (before its files are removed): their
 * commands end with them. */
void box_sbjobs_stop_watchers(const char *sdir);

/* A new schedule (argv, env and cwd of its runs, every seconds; its first run every
 * seconds from now): at most BOX_SBJOBS_SCHEDULES_MAX (limit_exceeded). handle gets
 * sched-N. 0, or -1 with err. */
int box_sbjobs_schedule_add(const char *sdir, const cJSON *argv, const char *const *env,
			    const char *cwd, int every, char *handle, struct box_err *err);

/* Removes schedule handle (not_found when absent). 0, or -1 with err. */
int box_sbjobs_schedule_remove(const char *sdir, const char *handle, struct box_err *err);

/* The keeper's look at the schedules of the jobs directory dfd: those due at now (ms of
 * box_now_ms) get their next_at moved on by every; a schedule whose last run still goes
 * counts one more skipped; the others are returned (an array of their records, env
 * included) to be run now. */
cJSON *box_sbjobs_schedules_due(int dfd, int64_t now);

/* Notes that schedule sched ran as handle (last, runs). */
void box_sbjobs_schedule_ran(int dfd, const char *sched, const char *handle);

/* pid's parent and start time (/proc/PID/stat fields 4 and 22) as this process sees them.
 * 0, or -1 when pid is gone. */
int box_sbjobs_proc_stat(pid_t pid, pid_t *ppid, int64_t *start);

/* The current time as "YYYY-MM-DDTHH:MM:SS.mmmZ" in out (at least 32 bytes). */
void box_sbjobs_now_text(char *out, size_t n);

#endif
