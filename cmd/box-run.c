/* box-run: run a Lua 5.4 script in a locked-down VM and print one JSON result. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "buf.h"
#include "run.h"
#include "trust.h"
#include "banned.h"

extern const char box_run_request_schema[], box_run_result_schema[];

static const struct box_cli cli = {
	.name = "box-run",
	.synopsis = "[OPTIONS] SCRIPT [ARG...]\n"
		    "[OPTIONS] -e CODE [ARG...]\n"
		    "--json [OPTIONS] < REQUEST.json",
	.description = "Run a Lua 5.4 script in a locked-down VM (bounded memory, CPU, wall time, "
		       "output and workspace writes; no files, network or processes unless granted) "
		       "and print one JSON result: stdout, the returned value, stats.",
	.fields = box_run_fields,
	.request_schema = box_run_request_schema,
	.result_schema = box_run_result_schema,
};

struct printed {
	int done;
	int status;
};

static void on_event(void *ctx, const cJSON *ev)
{
	(void)ctx;
	box_cli_emit(ev);
}

/*
 * The result goes out as soon as it is known, and box-run ends there: the VM process is
 * already killed, and waiting for the kernel to tear it down would only delay the caller
 * (init reaps it). stdout is flushed by then; _exit skips freeing what the OS frees anyway.
 */
static void on_result(void *ctx, const cJSON *res)
{
	struct printed *p = ctx;

	p->status = box_cli_print_result(&cli, res);
	p->done = 1;
	_exit(p->status);
}

/* SCRIPT and ARG... from the command line into the request */
static int positional(cJSON *req, int argc, char **argv, int i, struct box_err *err)
{
	cJSON *args;

	if (i >= argc)
		return 0;
	/* SCRIPT on the command line is the operator's: an agent's script does not replace it
	 * (nor turn it into an argument) */
	if (box_cli_agent() && !box_cli_trust()->trust_request &&
	    cJSON_GetObjectItemCaseSensitive(box_cli_agent(), "script")) {
		box_err_set(err, BOX_E_POLICY, "script: the command line gives the SCRIPT (%.64s), "
			    "not the request", argv[i]);
		box_err_path(err, "$.script");
		return -1;
	}
	if (!cJSON_GetObjectItemCaseSensitive(req, "script")) {
		struct box_buf b = BOX_BUF_INIT(BOX_MAX_REQUEST_BYTES);
		int r = strcmp(argv[i], "-") == 0 ? box_buf_read_fd(&b, 0, err) :
			box_buf_read_file(&b, AT_FDCWD, argv[i], err);

		if (r < 0) {
			box_buf_release(&b);
			return -1;
		}
		cJSON_AddItemToObject(req, "script", cJSON_CreateString(b.data ? b.data : ""));
		box_buf_release(&b);
		i++;
	}
	if (i < argc) {
		args = cJSON_CreateStringArray((const char *const *)argv + i, argc - i);
		cJSON_DeleteItemFromObjectCaseSensitive(req, "args");
		cJSON_AddItemToObject(req, "args", args);
	}
	return 0;
}

/* --describe with --tools describes what the script may reach; cli.c's --describe, which
 * knows nothing of a request, answers as soon as it sees the flag, so it is taken out here. */
static int describe_with_tools(int *argc, char **argv)
{
	int i, at = 0, tools = 0;

	box_cli_take_format(argc, argv);
	for (i = 1; i < *argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--describe") == 0 && !at)
			at = i;
		if (strcmp(argv[i], "--tools") == 0 || strncmp(argv[i], "--tools=", 8) == 0)
			tools = 1;
	}
	if (!at || !tools)
		return 0;
	memmove(argv + at, argv + at + 1, (size_t)(*argc - at) * sizeof(*argv));
	(*argc)--;
	return 1;
}

int main(int argc, char **argv)
{
	struct printed printed = { 0, 0 };
	struct box_run_hooks hooks = { on_event, on_result, &printed };
	struct box_err err;
	cJSON *req, *res, *policy;
	int rest, status, describe = describe_with_tools(&argc, argv);

	if (!box_cli_start(&cli, argc, argv, &req, &rest, &status))
		return status;
	box_err_init(&err);
	if (describe) {
		char *schema = box_cli_agent_schema_text(&cli, req, &err);

		res = schema ? box_run_describe(req, cli.name, cli.description, schema,
						box_run_result_schema, &err) : NULL;
		free(schema);
		cJSON_Delete(req);
		if (!res)
			return box_cli_fail(&cli, &err);
		status = box_cli_emit_tool(&cli, res);
		cJSON_Delete(res);
		return status;
	}
	if (positional(req, argc, argv, rest, &err) < 0) {
		cJSON_Delete(req);
		return box_cli_fail(&cli, &err);
	}
	hooks.policy = policy = box_trust_effective(box_cli_trust());
	res = box_run(req, &hooks, &err);
	cJSON_Delete(policy);
	cJSON_Delete(req);
	if (!res)
		return box_cli_fail(&cli, &err);
	if (printed.done) {
		cJSON_Delete(res);
		return printed.status;
	}
	return box_cli_finish(&cli, res);
}
