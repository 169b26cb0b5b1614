/* box-mcp: box-run, the session sandbox and the operator's tools as a Model Context Protocol
 * server on stdio. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "flags.h"
#include "buf.h"
#include "mcp.h"
#include "mcphttp.h"
#include "banned.h"

static const struct box_field fields[] = {
	{ "http_port", BOX_F_INT, 0, 65535, 0,
	  "serve Streamable HTTP at http://127.0.0.1:PORT/mcp instead of stdio (0: any free port, "
	  "printed on stderr)", "PORT", 1 },
	{ "token_file", BOX_F_STRING, 0, 4096, 0,
	  "with --http-port: the bearer token every request must carry, read from FILE", "FILE", 1 },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0 },
};

static const struct box_cli cli = {
	.name = "box-mcp",
	.synopsis = "[--policy FILE]\n"
		    "--http-port PORT [--token-file FILE] [--policy FILE]\n"
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

/* The policy file cli.c read (--policy or $BOX_POLICY, already checked as a whole), whose
 * "box-mcp" section box_mcp_config_load reads; NULL for the built-in policy. */
static const char *policy_file(void)
{
	const char *s = box_cli_trust()->source;

	return strcmp(s, "built-in") == 0 ? NULL : s;
}

static void listening(void *ctx, int port)
{
	(void)ctx;
	fprintf(stderr, "box-mcp: listening on http://127.0.0.1:%d/mcp\n", port);
}

/* --token-file: its first line, not empty */
static int read_token(const char *path, struct box_buf *b, struct box_err *err)
{
	if (box_buf_read_file(b, AT_FDCWD, path, err) < 0)
		return -1;
	while (b->len && (b->data[b->len - 1] == '\n' || b->data[b->len - 1] == '\r'))
		box_buf_truncate(b, b->len - 1);
	if (!b->len || memchr(b->data, '\n', b->len))
		return box_err_set(err, BOX_E_USAGE, "--token-file %.200s: one line of text expected",
				   path);
	return 0;
}

static int serve(struct box_mcp_config *cfg, const cJSON *req, struct box_err *err)
{
	struct box_mcp_http_opts o = { 0 };
	struct box_buf token = BOX_BUF_INIT(4096);
	const char *file = box_json_get_str(req, "token_file", NULL);
	int r;

	if (!cJSON_GetObjectItemCaseSensitive(req, "http_port")) {
		if (file)
			return box_err_set(err, BOX_E_USAGE, "--token-file goes with --http-port");
		return box_mcp_serve_stdio(cfg, 0, 1, err);
	}
	if (file && read_token(file, &token, err) < 0) {
		box_buf_release(&token);
		return -1;
	}
	o.port = (int)box_json_get_int(req, "http_port", 0);
	o.token = file ? token.data : NULL;
	o.on_listen = listening;
	r = box_mcp_serve_http(cfg, &o, err);
	box_buf_release(&token);
	return r;
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
	if (rest < argc || box_cli_agent()) {
		cJSON_Delete(req);
		if (rest < argc)
			box_flag_unexpected(&err, argv[rest]);
		else
			box_err_set(&err, BOX_E_USAGE, "--json: box-mcp reads MCP messages, not a request");
		return box_cli_fail(&cli, &err);
	}
	if (box_mcp_find_binary("box-run", run, sizeof(run), &err) < 0 ||
	    box_mcp_find_binary("box-sandbox", sandbox, sizeof(sandbox), &err) < 0 ||
	    box_mcp_config_load(&cfg, policy_file(), run, sandbox, &err) < 0) {
		cJSON_Delete(req);
		return box_cli_fail(&cli, &err);
	}
	if (describe) {
		out = cJSON_CreateObject();
		if (out)
			cJSON_AddItemToObject(out, "tools", box_mcp_tools_list(&cfg));
		status = box_cli_emit(out) < 0 ? 8 : 0;
		cJSON_Delete(out);
	} else if (serve(&cfg, req, &err) < 0) {
		status = box_cli_fail(&cli, &err);
	}
	cJSON_Delete(req);
	box_mcp_config_release(&cfg);
	return status;
}
