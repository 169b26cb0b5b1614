/* box-mcp's tools: the "box-mcp" section of the operator's policy, the catalog of MCP tools it
 * grants (run_lua, the session sandbox's operations, the operator's own tools), the command
 * and request each call runs, and the CallToolResult made of what the command printed. */
#ifndef BOX_MCPTOOLS_H
#define BOX_MCPTOOLS_H

#include <stddef.h>
#include <cjson/cJSON.h>
#include "err.h"

#define BOX_MCP_POLICY_MAX ((size_t)1 << 20)          /* bytes of a policy file */
#define BOX_MCP_DEFAULT_MESSAGE_MAX ((size_t)4 << 20) /* bytes of one JSON-RPC message */
#define BOX_MCP_DEFAULT_OUTPUT_MAX ((size_t)4 << 20)  /* bytes a call's command may print */
#define BOX_MCP_DEFAULT_CONCURRENT 4                  /* tools/call requests in flight */
#define BOX_MCP_CONCURRENT_MAX 64
#define BOX_MCP_PREFIX_MAX 40                         /* the session id is PREFIX + 16 hex */
#define BOX_MCP_SESSION_MAX (BOX_MCP_PREFIX_MAX + 17)

enum box_mcp_kind {
	BOX_MCP_RUN,       /* box-run --json */
	BOX_MCP_SANDBOX,   /* box-sandbox --json --session ID, one operation */
	BOX_MCP_OPERATOR,  /* a tool of the operator's manifest or box.lock */
};

struct box_mcp_tool {
	enum box_mcp_kind kind;
	const char *name;           /* the MCP name (owned by def) */
	const char *op;             /* BOX_MCP_SANDBOX: the box-sandbox operation */
	int streams;                /* output can be streamed as notifications/progress */
	cJSON *def;                 /* the MCP Tool object of tools/list (owned) */
	const cJSON *input_schema;  /* inside def */
	const struct box_tool *tool; /* BOX_MCP_OPERATOR: in the config's toolset */
};

struct box_mcp_config {
	char *policy;               /* absolute path of the operator's policy file, or NULL */
	char *box_run;              /* executables the calls run */
	char *box_sandbox;
	char prefix[BOX_MCP_PREFIX_MAX + 1];
	int keep_session;           /* at_disconnect "keep" */
	size_t max_message_bytes, max_output_bytes;
	int max_concurrent;
	struct box_toolset *toolset; /* the operator's tools, or NULL */
	struct box_mcp_tool *tools;
	size_t ntools;
};

/* The names of every tool box-mcp can offer other than the operator's, in tools/list order;
 * NULL-terminated. */
extern const char *const box_mcp_builtin_names[];

/*
 * Reads the operator's policy (policy_path, else $BOX_POLICY, else none) and builds the tool
 * catalog: for run_lua the input schema box-run --describe prints and for the sandbox tools
 * the members of box-sandbox --describe's that the operation takes (both run with the
 * policy passed through, so they describe what the agent may set under it), less the members
 * box-mcp itself sets (events, op, session). box_run and box_sandbox are the executables to run.
 *
 * The "box-mcp" section of the policy (all optional; any other member is refused):
 *   "tools": [NAME...]   the built-in tools granted (default run_lua, sandbox_exec,
 *                        sandbox_read_file, sandbox_write_file, sandbox_list_files)
 *   "manifest": FILE     a tool manifest or box.lock whose tools are offered too (relative
 *                        to the policy's directory)
 *   "session": {"prefix": "mcp-", "at_disconnect": "delete"|"keep"}
 *   "max_message_bytes", "max_output_bytes", "max_concurrent_calls": bounds
 * Returns 0, or -1 with err: not_found (policy, manifest or executable missing), invalid_request
 * with err->path ("$[\"box-mcp\"].tools[2]") for a bad section, box_tools_load's errors,
 * io_error or internal when a --describe fails; *c is then released (zeroed).
 */
int box_mcp_config_load(struct box_mcp_config *c, const char *policy_path, const char *box_run,
			const char *box_sandbox, struct box_err *err);

/* Frees what box_mcp_config_load made; *c may be zeroed. */
void box_mcp_config_release(struct box_mcp_config *c);

/* The granted tool named name, or NULL. */
const struct box_mcp_tool *box_mcp_tool_find(const struct box_mcp_config *c, const char *name);

/* The tools/list "tools" array (new; cJSON_Delete it), NULL on OOM. */
cJSON *box_mcp_tools_list(const struct box_mcp_config *c);

/*
 * What a call of t with args (already valid against its input schema) runs: a NULL-terminated
 * argv (*argv, free() the array; its strings point into c, t and session) and the request for
 * its stdin (*req, new). session is the connection's session id; events asks for the output
 * as NDJSON events as it arrives. Operator tools have no command line: *argv is NULL.
 * Returns 0, or -1 with internal.
 */
int box_mcp_call_command(const struct box_mcp_config *c, const struct box_mcp_tool *t,
			 const cJSON *args, const char *session, int events, char ***argv,
			 cJSON **req, struct box_err *err);

/*
 * The CallToolResult of a call whose command printed result (a box result object: "ok",
 * "error"...; borrowed; NULL when there was none, then err says why): structuredContent the
 * result (less the "event" member), content one text block with its JSON text, isError when
 * it is not ok. New object, NULL on OOM.
 */
cJSON *box_mcp_call_result(const cJSON *result, const struct box_err *err);

/* A CallToolResult of structured (borrowed; its "event" member left out) and its JSON text,
 * with isError as given. New object, NULL on OOM. */
cJSON *box_mcp_tool_result(const cJSON *structured, int is_error);

/* Finds the executable name (box-run, box-sandbox) that box-mcp runs: next to box-mcp's own
 * executable, else BOX_BINDIR. Writes its path to out (n bytes); 0, or -1 with not_found. */
int box_mcp_find_binary(const char *name, char *out, size_t n, struct box_err *err);

/* A fresh session id: prefix + 16 lowercase hex digits from getrandom. 0 or -1 with err. */
int box_mcp_session_new(const char *prefix, char *out, size_t n, struct box_err *err);

#endif
