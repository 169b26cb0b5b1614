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
	/* the policy in force (box_trust_effective), borrowed; its digest is policy_sha256 of
	 * the provenance. Optional. */
	const cJSON *policy;
};

/*
 * Runs the request (checked against box_run_fields by the caller). With "tools" (a manifest
 * or a box.lock, box_tools_load) the script gets a tools table: tools.NAME(input) for each
 * tool that box_tool_code_mode_eligible() accepts; naming a declared tool it refuses raises
 * policy_denied. The broker validates and runs each call (box_tool_call, its timeout capped by
 * the time the run has left; a Lua tool in a box-run of its own, found at /proc/self/exe, so
 * only box-run itself may run a box.lock's Lua tools). Each call is one of stats.host_calls
 * and, with events, a "tool_call" event. Refused with policy_denied (path "$.tools") when
 * this process runs as a tool (box_tools_nested()). Returns the result object
 * of DESIGN.md — also when the script failed, hit a limit or timed out: then it has "ok":
 * false and an "error" member — or NULL with err when the run could not start (no script,
 * a bad workspace, a kernel without openat2, ...). The caller owns the result. With events,
 * the result has "event": "result".
 */
cJSON *box_run(const cJSON *req, const struct box_run_hooks *hooks, struct box_err *err);

/*
 * The tool definition `box-run --describe` prints for a request that gives tools: name,
 * description (description, then what the script may reach: the code-mode tools with their
 * input schemas, the hosts and methods the allow rules let http reach, whether fs exists),
 * input_schema and output_schema (request_schema and result_schema, JSON texts), "tools"
 * (box_tools_describe with BOX_TOOLS_CODE_MODE) when req has tools, and "allowed_hosts"
 * ([{"host", "port", "schemes", "path"?, "methods"?}], methods absent for any). Returns a new
 * object, or NULL with err: the errors of box_tools_load and of the allow rules (path
 * "$.allow[i]"), policy_denied when nested as in box_run, internal.
 */
cJSON *box_run_describe(const cJSON *req, const char *name, const char *description,
			const char *request_schema, const char *result_schema,
			struct box_err *err);

#endif
