/* box-sandbox's operations on sessions: the state machine of DESIGN.md over the local
 * provider (lib/nsbox) or a plug-in provider (lib/provider). */
#ifndef BOX_SANDBOX_H
#define BOX_SANDBOX_H

#include <cjson/cJSON.h>
#include "err.h"
#include "json.h"

#define BOX_SANDBOX_LOCK_WAIT_MS 60000   /* an operation waits this long for another */
#define BOX_SANDBOX_DEFAULT_IDLE 180
#define BOX_SANDBOX_DEFAULT_TIMEOUT_MS 60000
#define BOX_SANDBOX_DEFAULT_OUTPUT (1 << 20)
#define BOX_SANDBOX_DEFAULT_MEMORY ((int64_t)512 << 20)
#define BOX_SANDBOX_DEFAULT_PIDS 256
#define BOX_SANDBOX_DEFAULT_DISK ((int64_t)1 << 30)
#define BOX_SANDBOX_READ_MAX ((int64_t)16 << 20)
#define BOX_SANDBOX_ENV_MAX 64
#define BOX_SANDBOX_STDIN_MAX ((size_t)16 << 20)

/* The request fields (flags and --json members) of box-sandbox. */
extern const struct box_field box_sandbox_fields[];

struct box_sandbox_io {
	/* exec --events: called with each chunk as it arrives (stream 1 stdout, 2 stderr) */
	void (*on_output)(void *ctx, int stream, const char *p, size_t n);
	void *ctx;
};

/*
 * Runs one operation: req holds "op" (create exec read write ls pause resume status snapshot
 * restore delete list) and its fields, already checked against box_sandbox_fields. Returns
 * the result object; an exec whose command failed or hit a limit returns its full result
 * with "ok": false and an "error" member. NULL with err when the operation itself failed.
 */
cJSON *box_sandbox(const cJSON *req, const struct box_sandbox_io *io, struct box_err *err);

#endif
