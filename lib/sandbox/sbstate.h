/* Session records of box-sandbox: $BOX_STATE_DIR/sandboxes/<id>/state.json, and the pure
 * "ensure running" decision taken from a record and what its provider reports. */
#ifndef BOX_SBSTATE_H
#define BOX_SBSTATE_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "err.h"

#define BOX_SBSTATE_ID_MAX 64            /* [a-z0-9][a-z0-9_-]{0,63} */
#define BOX_SBSTATE_PROVIDER_MAX 32      /* [a-z0-9-]{1,32} */
#define BOX_SBSTATE_TIME_MAX 40          /* RFC 3339 text, NUL included */
#define BOX_SBSTATE_MAX_BYTES (1 << 20)  /* cap on state.json */
#define BOX_SBSTATE_INIT_MAX 64          /* init commands */
#define BOX_SBSTATE_INIT_CMD_MAX 65536   /* bytes of one init command */
#define BOX_SBSTATE_ERROR_MAX 4096       /* bytes of last_init_error */
#define BOX_SBSTATE_LIST_MAX 4096        /* default bound on box_sbstate_list */

enum box_sbstate_state {
	BOX_SB_RUNNING,
	BOX_SB_PAUSED,
	BOX_SB_LOST,      /* the record said running but the provider had nothing */
	BOX_SB_DELETED,
};

/*
 * One session record. The cJSON members and last_init_error are owned by the record and freed
 * by box_sbstate_release(). Empty strings stand for JSON null (init_completed_at).
 */
struct box_sbstate {
	char id[BOX_SBSTATE_ID_MAX + 1];
	char provider[BOX_SBSTATE_PROVIDER_MAX + 1];
	enum box_sbstate_state state;
	char created_at[BOX_SBSTATE_TIME_MAX];
	char updated_at[BOX_SBSTATE_TIME_MAX];
	char last_used_at[BOX_SBSTATE_TIME_MAX];
	char init_completed_at[BOX_SBSTATE_TIME_MAX]; /* "" = null: init never completed */
	char *last_init_error;   /* NULL = null */
	cJSON *init;             /* array of strings (commands), never NULL after _new/_read */
	cJSON *limits;           /* object */
	cJSON *provider_data;    /* object, opaque to box: what the provider needs back */
	int64_t version;         /* bumped by every box_sbstate_write */
};

/* 1 if id matches [a-z0-9][a-z0-9_-]{0,63}, 0 otherwise (NULL included). */
int box_sbstate_valid_id(const char *id);

/* 1 if name matches [a-z0-9-]{1,32} (provider names), 0 otherwise. */
int box_sbstate_valid_provider(const char *name);

/* "running", "paused", "lost", "deleted"; box_sbstate_state_from_name returns -1 when unknown. */
const char *box_sbstate_state_name(enum box_sbstate_state s);
int box_sbstate_state_from_name(const char *name);

/* The current UTC time as RFC 3339 ("2026-11-29T17:13:48.123Z") in out. */
void box_sbstate_now(char out[BOX_SBSTATE_TIME_MAX]);

/*
 * The sandboxes directory: $BOX_STATE_DIR/sandboxes, else
 * ${XDG_STATE_HOME:-$HOME/.local/state}/box/sandboxes (empty variables count as unset).
 * Does not create it. Returns 0, or -1 with invalid_request (no usable variable, or the
 * path does not fit outsz).
 */
int box_sbstate_dir(char *out, size_t outsz, struct box_err *err);

/* Empties *s; allocates nothing. */
void box_sbstate_init(struct box_sbstate *s);

/* Frees the owned members; *s is empty afterwards (as after box_sbstate_init). */
void box_sbstate_release(struct box_sbstate *s);

/*
 * Fills an emptied *s for a new session: id and provider (both checked), state running, all
 * three times now, empty init, limits and provider_data, version 0.
 * Returns 0, or -1 with invalid_request (bad id or provider name) or internal (OOM).
 */
int box_sbstate_new(struct box_sbstate *s, const char *id, const char *provider,
		    struct box_err *err);

/* The record as a JSON object (every field, nulls included); NULL on OOM. */
cJSON *box_sbstate_to_json(const struct box_sbstate *s);

/*
 * Fills an emptied *s from obj with strict checks: an object with exactly the known members,
 * each of its type and size (unknown state, bad id or provider, too many init commands, a
 * non-object limits ...). When want_id is not NULL the record's id must equal it (a record
 * copied under another session's name is refused). Returns 0, or -1 with invalid_request and
 * err->path ("$.state"); *s is left empty on failure.
 */
int box_sbstate_from_json(struct box_sbstate *s, const cJSON *obj, const char *want_id,
			  struct box_err *err);

/*
 * Creates the session: dir/<id>/ (and dir itself when missing) and dir/<id>/state.json with
 * the contents of *s, written atomically and published with link(2) so that an existing
 * state.json is never replaced, even by a concurrent create. Sets s->version to 1 and
 * s->updated_at to now.
 * Returns 0, or -1 with conflict (the session exists), invalid_request (bad id) or io_error.
 */
int box_sbstate_create(const char *dir, struct box_sbstate *s, struct box_err *err);

/*
 * Reads and checks dir/<id>/state.json (never following a symlink, at most
 * BOX_SBSTATE_MAX_BYTES) into an emptied *s. Returns 0, or -1 with not_found (no such
 * session), invalid_request (bad id, malformed or invalid record), limit_exceeded (too big)
 * or io_error.
 */
int box_sbstate_read(const char *dir, const char *id, struct box_sbstate *s,
		     struct box_err *err);

/*
 * Replaces dir/<s->id>/state.json atomically (box_atomic_write) after bumping s->version and
 * setting s->updated_at to now. The session directory must exist. Hold the session lock
 * around a read-modify-write. Returns 0, or -1 with not_found, invalid_request or io_error.
 */
int box_sbstate_write(const char *dir, struct box_sbstate *s, struct box_err *err);

/*
 * Sets s->last_used_at to now and replaces the record like box_sbstate_write, atomically but
 * without fsync: for the use stamp every operation leaves, which need not survive a crash.
 */
int box_sbstate_touch(const char *dir, struct box_sbstate *s, struct box_err *err);

/*
 * Removes dir/<id>/state.json, then the session directory when it is empty (other contents,
 * workspace/ and such, are the caller's). Returns 0, or -1 with not_found (no record),
 * invalid_request (bad id) or io_error.
 */
int box_sbstate_delete(const char *dir, const char *id, struct box_err *err);

/*
 * The ids of the sessions in dir (directories with a valid id as name that hold a
 * state.json), sorted, as a JSON array of strings; a missing dir gives an empty array. At most
 * max ids (0: BOX_SBSTATE_LIST_MAX): more is limit_exceeded ("limit": "sessions"). NULL with
 * err set on failure.
 */
cJSON *box_sbstate_list(const char *dir, size_t max, struct box_err *err);

/*
 * Takes the exclusive lock of session id: the file dir/<id>.lock (beside the session
 * directory, so it outlives a delete and a waiter never holds a lock on a removed file),
 * creating dir when missing. Waits at most timeout_ms (0: one try, negative: no limit).
 * Returns the locked fd (close it to release), or -1 with conflict (retryable) when the wait
 * ran out, invalid_request (bad id) or io_error.
 */
int box_sbstate_lock(const char *dir, const char *id, int timeout_ms, struct box_err *err);

/*
 * The instance lock of session id: dir/<id>.run.lock, taken like box_sbstate_lock. An exec
 * holds it for its whole run, and so do the operations that change the instance (create,
 * pause, resume, snapshot, restore, delete), each taking it before the record's lock; the
 * record's lock is held only while the record is read and written. So status, read, write
 * and ls (record lock only) answer while a command runs, and an exec never overlaps a pause
 * or delete. Execs take it shared (box_sbstate_lock_instance_shared): they run side by side.
 */
int box_sbstate_lock_instance(const char *dir, const char *id, int timeout_ms,
			      struct box_err *err);

/* The instance lock shared: what an exec takes for its run, so that execs of one session run
 * side by side while pause, snapshot, restore and delete (exclusive) wait for them all. */
int box_sbstate_lock_instance_shared(const char *dir, const char *id, int timeout_ms,
				     struct box_err *err);

/* What the provider reports about a session's instance. */
enum box_sb_observed {
	BOX_SB_OBS_ABSENT,
	BOX_SB_OBS_RUNNING,
	BOX_SB_OBS_PAUSED,
};

enum box_sb_action {
	BOX_SB_ACT_NONE,     /* running already */
	BOX_SB_ACT_CREATE,   /* no record (or a deleted one): create a new instance */
	BOX_SB_ACT_RESUME,   /* the provider holds a paused instance */
	BOX_SB_ACT_REPLACE,  /* a record but no instance (lost): build one from the kept state */
};

struct box_sb_plan {
	enum box_sb_action action;
	int run_init;        /* 1: run the init commands (never completed, or the last run failed) */
	int lost;            /* 1: the record must be marked lost before the replace */
};

/* "none", "create", "resume", "replace". */
const char *box_sb_action_name(enum box_sb_action a);

/*
 * The "ensure running" decision, a pure function. rec is the session's record or NULL when
 * there is none; provider the provider the request names; observed what that provider
 * reports. Returns 0 with *plan filled, or -1 with conflict when rec was made by another
 * provider (rec->provider != provider) or invalid_request for a bad provider name.
 */
int box_sbstate_plan(const struct box_sbstate *rec, const char *provider,
		     enum box_sb_observed observed, struct box_sb_plan *plan,
		     struct box_err *err);

#endif
