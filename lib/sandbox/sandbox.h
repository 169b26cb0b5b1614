/* box-sandbox's operations on sessions: the state machine of DESIGN.md over the local
 * provider (lib/sandbox/local/nsbox) or a plug-in provider (lib/sandbox/provider). */
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
	/* the request is an agent's whose policy lets it create no session: an absent session
	 * is policy_denied, never created */
	int no_create;
	/* the policy in force (box_trust_effective), borrowed: its digest is the provenance's
	 * policy_sha256; NULL: none reported */
	const cJSON *policy;
	/* exec --events: called with each network attempt of the command (after it ended) */
	void (*on_network)(void *ctx, const cJSON *attempt);
	/* 1: an exec without a "stdin" member streams stdin_fd to its command (the caller's
	 * stdin that is not a terminal, on the command line only: a --json request came on
	 * stdin); 0: the command's stdin is /dev/null */
	int stream_stdin;
	int stdin_fd;
	/* the request is an agent's whose policy does not grant every: it may not remove the
	 * operator's schedules either (unschedule is policy_denied) */
	int no_schedule;
};

struct box_sandbox_ctx;   /* one operation on one session, private to lib/sandbox/sandbox.c */

enum box_sandbox_session_arg {
	BOX_SANDBOX_SESSION_NONE,      /* list: no session */
	BOX_SANDBOX_SESSION_NEEDED,    /* the word after the operation is the session */
	BOX_SANDBOX_SESSION_OPTIONAL,  /* create: --session, or a new id */
};

/* One operation of box-sandbox: what the driver, the dispatcher, --help and the completion
 * all read. */
struct box_sandbox_op {
	const char *name;
	cJSON *(*run)(struct box_sandbox_ctx *s, struct box_err *err);
	/* the request members the words after the session fill, in order; "argv" takes every
	 * word left */
	const char *args[2];
	enum box_sandbox_session_arg session;
	int may_create;   /* 1: the operation creates an absent session first */
	int content_from_stdin;  /* 1: without content or content_base64, the driver reads
				  * content from stdin */
	int operator_only;  /* 1: an agent's request (--json) may not name it (shell: an agent
			     * has no terminal) */
	int beside_exec;  /* 1: it takes the record's lock only, and answers while an exec of
			   * the session runs (box_sbstate_lock_instance) */
	int shares_run;   /* 1: it takes the instance lock shared (exec: execs of one session run
			   * side by side; pause, snapshot, restore and delete wait for them) */
	/* what follows the name on each usage line of --help (lines split by "\n"); operations
	 * with the same text share a line */
	const char *usage;
};

/* The operations, in the order of --help; ended by an entry whose name is NULL. */
extern const struct box_sandbox_op box_sandbox_ops[];

/* The entry of name, or NULL. */
const struct box_sandbox_op *box_sandbox_op_find(const char *name);

/*
 * Runs one operation: req holds "op" (create exec read write ls pause resume status snapshot
 * restore delete list) and its fields, already checked against box_sandbox_fields. Returns
 * the result object; an exec whose command failed or hit a limit returns its full result
 * with "ok": false and an "error" member. NULL with err when the operation itself failed,
 * except for exec: every exec answers an object with "ran" (true: the command was started,
 * false: it did not run and never will), a failure with "ok": false and "error" (err is set
 * too).
 */
cJSON *box_sandbox(const cJSON *req, const struct box_sandbox_io *io, struct box_err *err);

/*
 * The tool definition `box-sandbox --describe --tools FILE` prints: what a sandbox created
 * with the same req (its members tools, mount, input and provider; the others are ignored)
 * offers to the commands inside it. Members, in this order: "name", "description"
 * (description, then how to call the tools with box-tool and each tool with its input
 * schema, the files of /workspace, /input (with the names the inputs get there) and
 * /output, the mounts, and that there is no network), "input_schema" and "output_schema"
 * (request_schema and result_schema, JSON texts), "tools" (box_tools_describe(set, 0) with
 * exact integers: what `box-tool list` prints inside such a sandbox), "mounts"
 * ([{"path": GUEST_PATH, "mode": "ro"|"rw"}]), "input_files" (["/input/NAME", ...], a
 * directory's with a trailing "/"), "allowed_hosts" ([]: no network).
 * Nothing is created. Returns a new object, or NULL with err, the errors of create for the
 * same members: not_found (no tools file, path "$.tools"; a missing mount source or input,
 * "$.mount[i]" / "$.input[i]"), box_tools_load's errors for a bad tools file, invalid_request
 * (a bad mount or input, with its path), conflict (two inputs with one name), unsupported
 * (a provider other than local), internal.
 */
cJSON *box_sandbox_describe(const cJSON *req, const char *name, const char *description,
			    const char *request_schema, const char *result_schema,
			    struct box_err *err);

#endif
