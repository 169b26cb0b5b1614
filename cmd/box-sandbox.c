/* box-sandbox: one long-lived Linux sandbox per session. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "buf.h"
#include "sandbox.h"
#include "utf8.h"
#include "banned.h"

extern const char box_sandbox_request_schema[], box_sandbox_result_schema[];

static const struct box_cli cli = {
	.name = "box-sandbox",
	.synopsis = "create [--session ID] [OPTIONS]\n"
		    "exec SESSION [OPTIONS] -- ARGV...\n"
		    "exec SESSION [OPTIONS] --command STRING\n"
		    "read|ls SESSION PATH\n"
		    "write SESSION PATH [--content TEXT] < DATA\n"
		    "pause|resume|status|snapshot|delete SESSION\n"
		    "restore SESSION DIGEST [--from SESSION]\n"
		    "list\n"
		    "--json [OPTIONS] < REQUEST.json",
	.description = "Run commands in one long-lived Linux sandbox per session: create, exec, "
		       "read and write files, pause and resume, snapshot and restore, status, "
		       "delete. The local provider builds the sandbox from namespaces, a read-only "
		       "root, seccomp and cgroups; other providers are box-provider-NAME "
		       "executables.",
	.fields = box_sandbox_fields,
	.request_schema = box_sandbox_request_schema,
	.result_schema = box_sandbox_result_schema,
	.permute = 1,
};

/* exec --events: each chunk of output as one NDJSON line, as it arrives */
static void on_output(void *ctx, int stream, const char *p, size_t n)
{
	struct box_buf clean;
	struct box_err err;
	cJSON *ev = cJSON_CreateObject();

	(void)ctx;
	box_buf_init(&clean, n * 3 + 1);
	box_err_init(&err);
	if (ev && box_utf8_sanitize(p, n, &clean, &err) == 0 &&
	    box_buf_append(&clean, "", 1, &err) == 0) {
		cJSON_AddStringToObject(ev, "event", stream == 1 ? "stdout" : "stderr");
		cJSON_AddStringToObject(ev, "data", clean.data);
		box_cli_emit(ev);
	}
	cJSON_Delete(ev);
	box_buf_release(&clean);
}

static void set_str(cJSON *req, const char *key, const char *val)
{
	cJSON_DeleteItemFromObjectCaseSensitive(req, key);
	cJSON_AddStringToObject(req, key, val);
}

/* --describe with --tools describes what the commands inside a sandbox granted those tools
 * may reach; cli.c's --describe, which knows nothing of a request, answers as soon as it
 * sees the flag, so it is taken out here (as box-run does). */
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

static int describe(cJSON *req, int rest, int argc, char **argv)
{
	struct box_err err;
	cJSON *res = NULL;
	char *schema = NULL;
	int status;

	box_err_init(&err);
	/* it describes what create would make: "create" is the only operation it takes */
	if (rest < argc && strcmp(argv[rest], "create") == 0)
		rest++;
	if (rest < argc)
		box_err_set(&err, BOX_E_USAGE, "--describe describes create: unexpected argument "
			    "'%.64s'", argv[rest]);
	else if ((schema = box_cli_agent_schema_text(&cli, req, &err)))
		res = box_sandbox_describe(req, cli.name, cli.description, schema,
					   box_sandbox_result_schema, &err);
	free(schema);
	cJSON_Delete(req);
	if (!res)
		return box_cli_fail(&cli, &err);
	status = box_cli_emit_tool(&cli, res);
	cJSON_Delete(res);
	return status;
}

int main(int argc, char **argv)
{
	struct box_sandbox_io io = { on_output, NULL, 0 };
	struct box_err err;
	cJSON *req, *res;
	int rest, status, want_describe = describe_with_tools(&argc, argv);
	const char *op, *bound;

	if (!box_cli_start(&cli, argc, argv, &req, &rest, &status))
		return status;
	if (want_describe)
		return describe(req, rest, argc, argv);
	box_err_init(&err);
	/* the command line's session (a flag or the SESSION argument) binds an agent's request */
	bound = box_json_get_str(box_cli_flags(), "session",
				 box_json_get_str(box_cli_trust()->set, "session", NULL));
	if (rest < argc)
		set_str(req, "op", argv[rest++]);
	op = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(req, "op"));
	if (op && strcmp(op, "list") != 0 && rest < argc) {
		bound = argv[rest];
		set_str(req, "session", argv[rest++]);
	}
	if (op && (strcmp(op, "read") == 0 || strcmp(op, "write") == 0 ||
		   strcmp(op, "ls") == 0) && rest < argc)
		set_str(req, "path", argv[rest++]);
	else if (op && strcmp(op, "restore") == 0 && rest < argc)
		set_str(req, "digest", argv[rest++]);
	else if (op && strcmp(op, "exec") == 0 && rest < argc) {
		cJSON_DeleteItemFromObjectCaseSensitive(req, "argv");
		cJSON_AddItemToObject(req, "argv",
				      cJSON_CreateStringArray((const char *const *)argv + rest,
							      argc - rest));
		rest = argc;
	}
	if (rest < argc) {
		box_err_set(&err, BOX_E_USAGE, "unexpected argument '%.64s'", argv[rest]);
		cJSON_Delete(req);
		return box_cli_fail(&cli, &err);
	}
	/* write without --content takes the bytes on stdin */
	if (op && strcmp(op, "write") == 0 && !cJSON_GetObjectItemCaseSensitive(req, "content") &&
	    !cJSON_GetObjectItemCaseSensitive(req, "content_base64")) {
		struct box_buf in;

		box_buf_init(&in, BOX_SANDBOX_READ_MAX);
		if (box_buf_read_fd(&in, 0, &err) < 0 || box_buf_append(&in, "", 1, &err) < 0) {
			box_buf_release(&in);
			cJSON_Delete(req);
			return box_cli_fail(&cli, &err);
		}
		if (memchr(in.data, 0, in.len - 1) || !box_utf8_valid(in.data, in.len - 1)) {
			box_buf_release(&in);
			box_err_set(&err, BOX_E_USAGE, "stdin is not UTF-8 text: use --content-base64");
			cJSON_Delete(req);
			return box_cli_fail(&cli, &err);
		}
		set_str(req, "content", in.data);
		box_buf_release(&in);
	}
	if (box_trust_sessions_check(box_cli_trust(), box_cli_agent(), op, bound, &err) < 0) {
		cJSON_Delete(req);
		return box_cli_fail(&cli, &err);
	}
	io.no_create = box_cli_agent() && !box_trust_may_create(box_cli_trust());
	res = box_sandbox(req, &io, &err);
	if (res && box_cli_agent() && op && strcmp(op, "list") == 0)
		box_trust_filter_sessions(box_cli_trust(), bound,
					  cJSON_GetObjectItemCaseSensitive(res, "sessions"));
	if (res && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "events")))
		cJSON_AddStringToObject(res, "event", "result");
	cJSON_Delete(req);
	if (!res)
		return box_cli_fail(&cli, &err);
	return box_cli_finish(&cli, res);
}
