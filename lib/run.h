/* box-run: one Lua script in a confined child process, brokered by the calling process. */
#ifndef BOX_RUN_H
#define BOX_RUN_H

#include <cjson/cJSON.h>
#include "err.h"
#include "json.h"

/* The members of a box-run request (and so its flags); ends with a zeroed entry. */
extern const struct box_field box_run_fields[];

struct box_run_hooks {
	/* called with each NDJSON event (print output) as it happens, when the request asks for
	 * events; the event is borrowed */
	void (*on_event)(void *ctx, const cJSON *event);
	/* called once with the result as soon as it is known, before the VM process is reaped
	 * (which costs a process teardown); the result is borrowed. Optional. */
	void (*on_result)(void *ctx, const cJSON *result);
	void *ctx;
};

/*
 * Runs the request (checked against box_run_fields by the caller). Returns the result object
 * of DESIGN.md — also when the script failed, hit a limit or timed out: then it has "ok":
 * false and an "error" member — or NULL with err when the run could not start (no script,
 * a bad workspace, a kernel without openat2, ...). The caller owns the result. With events,
 * the result has "event": "result".
 */
cJSON *box_run(const cJSON *req, const struct box_run_hooks *hooks, struct box_err *err);

#endif
