/* box-mcp: box-run, the session sandbox and the operator's tools as a Model Context Protocol
 * server on stdio. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mcp.h"
#include "banned.h"

static const struct box_field fields[] = {
	{ "policy", BOX_F_STRING, 0, 4096, 0,
	  "the operator's policy file (default $BOX_POLICY); its \"box-mcp\" section decides the "
	  "tools", "FILE", 1 },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0 },
};

static const struct box_cli cli = {
	.name = "box-mcp",
	.synopsis = "[--policy FILE]\n"
		    "--describe [--policy FILE]",
	.description = "Serve box-run, this connection's sandbox and the operator's tools to an "
		       "agent over the Model Context Protocol: JSON-RPC 2.0 messages, one per line, "
		       "on standard input and output (protocol versions 2025-06-18, 2025-11-25 "
		       "and 2026-07-28).",
	.fields = fields,
	.request_schema = "{}",
	.result_schema = "{}",
};

/* --describe: the tools an agent would get, as tools/list lists them */
static int take_describe(int *argc, char **argv)
{
	int i;

	for (i = 1; i < *argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--describe") == 0) {
			memmove(argv + i, argv + i + 1, (size_t)(*argc - i) * sizeof(*argv));
			(*argc)--;
			return 1;
		}
	return 0;
}

int main(int argc, char **argv)
{
	struct box_mcp_config cfg;
	struct box_err err;
	char run[PATH_MAX], sandbox[PATH_MAX];
	int rest, status, describe = take_describe(&argc, argv);
	cJSON *req, *out;

	if (!box_cli_start(&cli, argc, argv, &req, &rest, &status))
		return status;
	box_err_init(&err);
	if (rest < argc) {
		cJSON_Delete(req);
		box_err_set(&err, BOX_E_USAGE, "unexpected argument '%.64s'", argv[rest]);
		return box_cli_fail(&cli, &err);
	}
	if (box_mcp_find_binary("box-run", run, sizeof(run), &err) < 0 ||
	    box_mcp_find_binary("box-sandbox", sandbox, sizeof(sandbox), &err) < 0 ||
	    box_mcp_config_load(&cfg, box_json_get_str(req, "policy", NULL), run, sandbox,
				&err) < 0) {
		cJSON_Delete(req);
		return box_cli_fail(&cli, &err);
	}
	cJSON_Delete(req);
	if (describe) {
		out = cJSON_CreateObject();
		if (out)
			cJSON_AddItemToObject(out, "tools", box_mcp_tools_list(&cfg));
		status = box_cli_emit(out) < 0 ? 8 : 0;
		cJSON_Delete(out);
	} else if (box_mcp_serve_stdio(&cfg, 0, 1, &err) < 0) {
		fprintf(stderr, "box-mcp: %s: %s\n", box_err_code_name(err.code), err.message);
		status = box_err_exit_status(err.code);
	}
	box_mcp_config_release(&cfg);
	return status;
}
