/* The processes box-mcp runs for tool calls: started without waiting, read as they print,
 * killed with everything they started when a call is cancelled. */
#ifndef BOX_MCPCHILD_H
#define BOX_MCPCHILD_H

#include <stddef.h>
#include <sys/types.h>
#include <cjson/cJSON.h>
#include "err.h"

struct box_tool;

/* The environment of the commands: box-mcp's own, with BOX_POLICY set to the operator's
 * policy (or removed when there is none). */
struct box_mcp_env {
	char **v;   /* NULL-terminated; the strings of the added variable are owned */
	char *policy_var;
};

/*
 * The one place where the operator's policy passes to the binaries box-mcp runs: every
 * command gets BOX_POLICY=policy (absolute path), so each binary enforces its own section of
 * the same file. Returns 0, or -1 with internal.
 */
int box_mcp_env_init(struct box_mcp_env *e, const char *policy, struct box_err *err);
void box_mcp_env_release(struct box_mcp_env *e);

struct box_mcp_child {
	pid_t pid;     /* leader of its own process group; 0 when none */
	int out;       /* read end of its stdout (non-blocking, close-on-exec); -1 when closed */
	int helper;    /* an operator tool's helper: cancelled with SIGTERM first */
};

/*
 * Starts argv[0] (a path, no PATH search) in a new process group with envp, in on its stdin
 * (written whole, then closed: the binaries read their request before anything else), stdout
 * a pipe (ch->out), stderr box-mcp's own (logs), signal dispositions reset.
 * Returns 0, or -1 with err (not_found when argv[0] cannot be run, io_error).
 */
int box_mcp_child_spawn(struct box_mcp_child *ch, char *const argv[], char *const envp[],
			const char *in, size_t inlen, struct box_err *err);

/*
 * Starts a helper process that calls the operator's tool t with input (box_tool_call, Lua
 * tools through box_run) and prints one line: {"answer": OBJECT} or {"error": {...}}.
 * Returns 0, or -1 with err.
 */
int box_mcp_child_tool(struct box_mcp_child *ch, const struct box_tool *t, const cJSON *input,
		       const char *box_run, struct box_err *err);

/* Ends the child and every process of its group (a helper's tool too), reaps it, closes its
 * pipe. Nothing it started is left running. */
void box_mcp_child_kill(struct box_mcp_child *ch);

/* After its stdout reached end of file: kills what is left of its group, reaps it and closes
 * the pipe. Returns its wait status. */
int box_mcp_child_finish(struct box_mcp_child *ch);

#endif
