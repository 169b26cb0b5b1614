/* Typed errors shared by every binary: a code, a message and the optional fields of DESIGN.md. */
#ifndef BOX_ERR_H
#define BOX_ERR_H

#include <stdint.h>
#include <cjson/cJSON.h>

enum box_code {
	BOX_OK = 0,
	BOX_E_GUEST,         /* guest_error, exit 1 */
	BOX_E_USAGE,         /* usage, exit 2 */
	BOX_E_INVALID,       /* invalid_request, exit 2 */
	BOX_E_LIMIT,         /* limit_exceeded, exit 3 */
	BOX_E_TIMEOUT,       /* timeout, exit 3 */
	BOX_E_POLICY,        /* policy_denied, exit 4 */
	BOX_E_INTEGRITY,     /* integrity_failed, exit 5 */
	BOX_E_NOT_FOUND,     /* not_found, exit 6 */
	BOX_E_CONFLICT,      /* conflict, exit 7 */
	BOX_E_IO,            /* io_error, exit 8 */
	BOX_E_PROVIDER,      /* provider_error, exit 8 */
	BOX_E_INTERNAL,      /* internal, exit 8 */
	BOX_E_UNSUPPORTED,   /* unsupported, exit 8 */
	BOX_E_REPLAY_DIVERGED, /* replay_diverged, exit 9: a replay met a call not recorded */
	BOX_CODE_COUNT
};

#define BOX_ERR_MSG_MAX 512
#define BOX_ERR_FIELD_MAX 256

/*
 * An error as the library reports it. Plain data, no heap: it can be filled in a child
 * process or a signal-free context and copied around. Optional fields are empty strings,
 * or has_configured == 0, when they do not apply.
 */
struct box_err {
	enum box_code code;
	char message[BOX_ERR_MSG_MAX];
	char limit[64];              /* which limit: "memory", "instructions", "cpu", ... */
	char unit[32];               /* "bytes", "ms", "instructions" */
	char path[BOX_ERR_FIELD_MAX]; /* JSON path of the offending field, or a file path */
	int has_configured;
	int64_t configured;
	int retryable;
	int sys_errno;               /* errno behind an io_error, 0 if none */
};

/* Empties *err (code BOX_OK). */
void box_err_init(struct box_err *err);

/* Sets code and a printf-style message; always returns -1 so callers can `return box_err_set(...)`. */
int box_err_set(struct box_err *err, enum box_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Like box_err_set for a failed system call: the message gets ": strerror(errno)" appended
 * and sys_errno is recorded. The code is io_error unless errno says otherwise. */
int box_err_sys(struct box_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Records a limit: which one, its configured value and unit. Returns -1. */
int box_err_limit(struct box_err *err, enum box_code code, const char *limit,
		  int64_t configured, const char *unit, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

/* Sets the JSON path (or file path) of an already set error. */
void box_err_path(struct box_err *err, const char *path);

/* "guest_error", "limit_exceeded", ... */
const char *box_err_code_name(enum box_code code);

/* Looks a code up by its name; returns BOX_CODE_COUNT when unknown. */
enum box_code box_err_code_from_name(const char *name);

/* Process exit status of DESIGN.md for a code (0 for BOX_OK). */
int box_err_exit_status(enum box_code code);

/* The error object {"code", "message", ...} with only the fields that apply; NULL on OOM. */
cJSON *box_err_to_json(const struct box_err *err);

/* The failure result {"ok": false, "error": {...}} every binary prints; NULL on OOM. */
cJSON *box_err_result(const struct box_err *err);

/* Fills *err from an error object made by box_err_to_json (hostile input: every field is
 * checked and bounded). Returns 0, or -1 when obj is not such an object. */
int box_err_from_json(struct box_err *err, const cJSON *obj);

#endif
