/* box-sandbox: one long-lived Linux sandbox per session. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "cli.h"
#include "flags.h"
#include "base64.h"
#include "buf.h"
#include "sandbox.h"
#include "utf8.h"
#include "banned.h"

extern const char box_sandbox_request_schema[], box_sandbox_result_schema[];

/* the usage lines of --help, made from the operation table in main() */
static char synopsis[2048];

static struct box_cli cli = {
	.name = "box-sandbox",
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

static void set_str(cJSON *req, const char *key, const char *val)
{
	cJSON_DeleteItemFromObjectCaseSensitive(req, key);
	cJSON_AddStringToObject(req, key, val);
}

/* One usage line per distinct usage text of the operation table, the operations that share
 * it joined by |, in the table's order; then the --json form. */
static const char *make_synopsis(void)
{
	const struct box_sandbox_op *o, *p;
	size_t at = 0;

	for (o = box_sandbox_ops; o->name; o++) {
		const char *u = o->usage, *nl;
		char names[256];
		size_t n = 0;

		for (p = box_sandbox_ops; p < o && strcmp(p->usage, u) != 0; p++)
			;
		if (p < o)
			continue;   /* on an earlier line */
		for (p = o; p->name; p++)
			if (strcmp(p->usage, u) == 0)
				n += (size_t)box_fmt(names + n, sizeof(names) - n, "%s%s", n ? "|" : "",
						     p->name);
		do {
			nl = strchr(u, '\n');
			at += (size_t)box_fmt(synopsis + at, sizeof(synopsis) - at, "%s%s%.*s\n", names,
					      *u ? " " : "", nl ? (int)(nl - u) : (int)strlen(u), u);
			u = nl ? nl + 1 : NULL;
		} while (u);
	}
	box_fmt(synopsis + at, sizeof(synopsis) - at, "--json [OPTIONS] < REQUEST.json");
	return synopsis;
}

/* The words after the operation: its session, then the members its table entry names. */
static int positional(cJSON *req, int rest, int argc, char **argv, const char **session)
{
	const struct box_sandbox_op *op = box_sandbox_op_find(cJSON_GetStringValue(
		cJSON_GetObjectItemCaseSensitive(req, "op")));
	size_t k;

	if (!op)
		return rest;
	if (op->session != BOX_SANDBOX_SESSION_NONE && rest < argc) {
		*session = argv[rest];
		set_str(req, "session", argv[rest++]);
	}
	for (k = 0; k < sizeof(op->args) / sizeof(op->args[0]) && op->args[k] && rest < argc; k++) {
		if (strcmp(op->args[k], "argv") == 0) {
			cJSON_DeleteItemFromObjectCaseSensitive(req, "argv");
			cJSON_AddItemToObject(req, "argv", cJSON_CreateStringArray(
				(const char *const *)argv + rest, argc - rest));
			return argc;
		}
		if (strcmp(op->args[k], "guest_port") == 0 && argv[rest][0] >= '1' &&
		    argv[rest][0] <= '9' && strspn(argv[rest], "0123456789") == strlen(argv[rest]) &&
		    strlen(argv[rest]) <= 5) {
			/* a port is a number; anything else stays text for the operation to refuse */
			cJSON_DeleteItemFromObjectCaseSensitive(req, "guest_port");
			cJSON_AddNumberToObject(req, "guest_port", strtol(argv[rest++], NULL, 10));
			continue;
		}
		set_str(req, op->args[k], argv[rest++]);
	}
	return rest;
}

/* The content member from stdin (content_base64 when it is not UTF-8 text), unless the
 * request has one. */
static int read_content(cJSON *req, struct box_err *err)
{
	struct box_buf in;

	if (cJSON_GetObjectItemCaseSensitive(req, "content") ||
	    cJSON_GetObjectItemCaseSensitive(req, "content_base64"))
		return 0;
	box_buf_init(&in, BOX_SANDBOX_READ_MAX);
	if (box_buf_read_fd(&in, 0, err) < 0 || box_buf_append(&in, "", 1, err) < 0) {
		box_buf_release(&in);
		return -1;
	}
	if (memchr(in.data, 0, in.len - 1) || !box_utf8_valid(in.data, in.len - 1)) {
		/* bytes: carried as content_base64 */
		struct box_buf b64;
		int rc;

		box_buf_init(&b64, box_base64_encoded_len(in.len - 1) + 1);
		rc = box_base64_encode(in.data, in.len - 1, &b64, err) < 0 ||
		     box_buf_append(&b64, "", 1, err) < 0 ? -1 : 0;
		if (rc == 0)
			set_str(req, "content_base64", b64.data);
		box_buf_release(&b64);
		box_buf_release(&in);
		return rc;
	}
	set_str(req, "content", in.data);
	box_buf_release(&in);
	return 0;
}

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

/* exec --events: each network attempt as one NDJSON line */
static void on_network(void *ctx, const cJSON *attempt)
{
	cJSON *ev = cJSON_Duplicate(attempt, 1);

	(void)ctx;
	if (ev) {
		cJSON_AddItemToObject(ev, "event", cJSON_CreateString("network"));
		box_cli_emit(ev);
	}
	cJSON_Delete(ev);
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

/* A failure before the operation ran: an exec's says that its command did not run. */
static int fail_op(const struct box_sandbox_op *op, const struct box_err *err)
{
	cJSON *o;

	if (!op || (strcmp(op->name, "exec") != 0 && strcmp(op->name, "shell") != 0) ||
	    !(o = box_err_result(err)))
		return box_cli_fail(&cli, err);
	cJSON_AddBoolToObject(o, "ran", 0);
	return box_cli_finish(&cli, o);
}

int main(int argc, char **argv)
{
	struct box_sandbox_io io = { .on_output = on_output, .on_network = on_network };
	struct box_err err;
	cJSON *req, *res, *policy;
	int rest, status, want_describe = describe_with_tools(&argc, argv);
	const struct box_sandbox_op *op;
	const char *bound;

	cli.synopsis = make_synopsis();
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
	rest = positional(req, rest, argc, argv, &bound);
	op = box_sandbox_op_find(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(req, "op")));
	if (rest < argc) {
		box_flag_unexpected(&err, argv[rest]);
		cJSON_Delete(req);
		return fail_op(op, &err);
	}
	if (op && op->operator_only && box_cli_agent() && !box_cli_trust()->trust_request) {
		box_err_set(&err, BOX_E_POLICY, "%s is the operator's: an agent's request has no "
			    "terminal", op->name);
		box_err_path(&err, "$.op");
		cJSON_Delete(req);
		return fail_op(op, &err);
	}
	if (op && op->content_from_stdin && read_content(req, &err) < 0) {
		cJSON_Delete(req);
		return fail_op(op, &err);
	}
	if (box_trust_sessions_check(box_cli_trust(), box_cli_agent(), op ? op->name : NULL, bound,
				     &err) < 0) {
		cJSON_Delete(req);
		return fail_op(op, &err);
	}
	/* exec streams the caller's stdin when it is not a terminal; a --json request came on
	 * stdin, so it never streams */
	io.stream_stdin = op && strcmp(op->name, "exec") == 0 && !box_cli_agent() &&
			  fcntl(0, F_GETFD) >= 0 && !isatty(0);
	io.stdin_fd = 0;
	io.no_create = box_cli_agent() && !box_trust_may_create(box_cli_trust());
	io.no_schedule = box_cli_agent() && !box_trust_may_set(box_cli_trust(), "every");
	io.policy = policy = box_trust_effective(box_cli_trust());
	res = box_sandbox(req, &io, &err);
	cJSON_Delete(policy);
	if (res && box_cli_agent() && op && strcmp(op->name, "list") == 0)
		box_trust_filter_sessions(box_cli_trust(), bound,
					  cJSON_GetObjectItemCaseSensitive(res, "sessions"));
	if (res && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "events")))
		cJSON_AddStringToObject(res, "event", "result");
	cJSON_Delete(req);
	if (!res)
		return box_cli_fail(&cli, &err);
	return box_cli_finish(&cli, res);
}
