/* box-tool: inside a sandbox, call the tools the host granted to it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "json.h"
#include "toolargs.h"
#include "toolsrv.h"
#include "banned.h"
#include "proc.h"

#ifdef __SANITIZE_ADDRESS__
/* box-tool runs inside a sandbox whose seccomp filter denies ptrace, which LeakSanitizer needs
 * to stop the world at exit: a sanitizer build checks everything but leaks there. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "detect_leaks=0";
}
#endif

static const char usage[] =
	"usage: box-tool list\n"
	"       box-tool NAME [--FLAG VALUE...]\n"
	"       box-tool NAME --json JSON\n"
	"       box-tool NAME --json-file PATH\n"
	"       box-tool NAME --help\n"
	"\n"
	"Calls a tool that the host granted to this sandbox (box-sandbox create --tools) and\n"
	"prints its result as one JSON object. Flags come from the tool's input schema\n"
	"(box-tool NAME --help lists them). Exit status: 0 success, 1 the tool failed,\n"
	"2 bad arguments, 3 a limit or timeout, 4 a tool not granted, 5 its store entry\n"
	"changed on the host, 8 no tool socket.\n"
	"The socket is $BOX_TOOL_SOCKET, default " BOX_TOOLSRV_GUEST_PATH ".\n";

static int emit(cJSON *obj)
{
	char *text;

	box_json_exact(obj);
	text = cJSON_PrintUnformatted(obj);

	if (!text)
		return -1;
	printf("%s\n", text);
	free(text);
	return fflush(stdout) == 0 ? 0 : -1;
}

static int fail(const struct box_err *err)
{
	cJSON *res = box_err_result(err);

	if (res)
		emit(res);
	cJSON_Delete(res);
	fprintf(stderr, "box-tool: %s: %s\n", box_err_code_name(err->code), err->message);
	return box_err_exit_status(err->code);
}

/* The exit status of a reply: 0 for ok, the status of its error's code otherwise. */
static int reply_status(const cJSON *res)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(res, "error");
	struct box_err err;

	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "ok")))
		return 0;
	box_err_init(&err);
	if (box_err_from_json(&err, e) < 0)
		return 8;
	fprintf(stderr, "box-tool: %s: %s\n", box_err_code_name(err.code), err.message);
	return box_err_exit_status(err.code);
}

/* Calls tool name with input (taken) and prints the reply; the exit status. */
static int call(const char *sock, const char *name, cJSON *input)
{
	struct box_err err;
	cJSON *req = cJSON_CreateObject(), *res;
	int status;

	box_err_init(&err);
	cJSON_AddStringToObject(req, "op", "call");
	cJSON_AddStringToObject(req, "tool", name);
	cJSON_AddItemToObject(req, "input", input);
	res = box_toolsrv_request(sock, req, 0, &err);
	cJSON_Delete(req);
	if (!res)
		return fail(&err);
	status = emit(res) < 0 ? 8 : reply_status(res);
	cJSON_Delete(res);
	return status;
}

int main(int argc, char **argv)
{
	const char *sock = getenv("BOX_TOOL_SOCKET");
	struct box_err err;
	cJSON *req, *list, *input;
	const cJSON *tool = NULL, *t;
	int want_help = 0, status;

	if (box_proc_std_fds() < 0)
		return 8;
	box_err_init(&err);
	if (!sock || !*sock)
		sock = BOX_TOOLSRV_GUEST_PATH;
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("box-tool (box) %s\n", PACKAGE_VERSION);
		return 0;
	}
	/* --json VALUE needs no schema here (the host validates): one round trip, not two */
	if (argc == 4 && strcmp(argv[2], "--json") == 0 && strcmp(argv[1], "list") != 0 &&
	    argv[1][0] != '-') {
		input = box_json_parse(argv[3], strlen(argv[3]), &err);
		if (!input)
			return fail(&err);
		if (!cJSON_IsObject(input)) {
			cJSON_Delete(input);
			box_err_set(&err, BOX_E_USAGE, "--json must be a JSON object");
			return fail(&err);
		}
		return call(sock, argv[1], input);
	}
	req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "op", "list");
	list = box_toolsrv_request(sock, req, 0, &err);
	cJSON_Delete(req);
	if (!list)
		return fail(&err);
	if (strcmp(argv[1], "list") == 0) {
		if (argc > 2) {
			cJSON_Delete(list);
			box_err_set(&err, BOX_E_USAGE, "list takes no arguments");
			return fail(&err);
		}
		status = emit(list) < 0 ? 8 : reply_status(list);
		cJSON_Delete(list);
		return status;
	}
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(list, "ok"))) {
		/* the host has no tools to offer, and says why (a store entry that changed) */
		status = emit(list) < 0 ? 8 : reply_status(list);
		cJSON_Delete(list);
		return status;
	}
	cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(list, "tools"))
		if (strcmp(box_json_get_str(t, "name", ""), argv[1]) == 0)
			tool = t;
	if (!tool) {
		box_err_set(&err, BOX_E_POLICY, "tool %.64s is not granted to this sandbox", argv[1]);
		cJSON_Delete(list);
		return fail(&err);
	}
	input = box_toolargs_parse(cJSON_GetObjectItemCaseSensitive(tool, "input_schema"),
				   argc - 2, argv + 2, &want_help, &err);
	if (want_help) {
		char *help = box_toolargs_help(argv[1], box_json_get_str(tool, "description", NULL),
					       cJSON_GetObjectItemCaseSensitive(tool, "input_schema"));

		cJSON_Delete(list);
		if (!help)
			return 8;
		fputs(help, stdout);
		free(help);
		return 0;
	}
	cJSON_Delete(list);
	if (!input)
		return fail(&err);
	return call(sock, argv[1], input);
}
