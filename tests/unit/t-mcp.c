/* lib/mcp/mcp.c and lib/mcp/mcptools.c: the protocol without a transport (messages in, captured
 * messages out), the policy's box-mcp section, and calls of the operator's tools. */
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "json.h"
#include "mcp.h"
#include "tap.h"
#include "banned.h"

static char dir[64];
static char fixtures[PATH_MAX];
static cJSON *sent[64];
static int nsent;

static int capture(void *ctx, const char *msg, size_t n)
{
	struct box_err err;

	(void)ctx;
	box_err_init(&err);
	if (nsent < 64)
		sent[nsent++] = box_json_parse(msg, n, &err);
	return 0;
}

static void clear(void)
{
	while (nsent > 0)
		cJSON_Delete(sent[--nsent]);
}

static const cJSON *last(void)
{
	return nsent ? sent[nsent - 1] : NULL;
}

static void say(struct box_mcp *m, const char *msg)
{
	box_mcp_message(m, msg, strlen(msg));
}

static int code_of(const cJSON *msg)
{
	return (int)cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(msg, "error"),
							     "code"));
}

static const char *path_of(const cJSON *msg)
{
	return cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(
		msg, "error"), "data"), "path"));
}

/* Runs the calls until n messages were sent or 5 s passed. */
static void pump(struct box_mcp *m, int n)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (nsent < n) {
		struct pollfd p[8];
		size_t k = box_mcp_pollfds(m, p, 8);

		if (k == 0 || poll(p, k, 100) < 0)
			break;
		box_mcp_ready(m, p, k);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 5)
			break;
	}
}

static char *policy(const char *text)
{
	static char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/policy.json", dir);
	f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
	return path;
}

static void policy_errors(void)
{
	struct box_mcp_config c;
	struct box_err err;
	static const struct { const char *text, *path; } bad[] = {
		{ "{\"box-mcp\": {\"tols\": []}}", "$[\"box-mcp\"].tols" },
		{ "{\"box-mcp\": {\"tools\": [\"run_lua\", 3]}}", "$[\"box-mcp\"].tools[1]" },
		{ "{\"box-mcp\": {\"tools\": \"run_lua\"}}", "$[\"box-mcp\"].tools" },
		{ "{\"box-mcp\": {\"session\": {\"prefix\": \"A\"}}}", "$[\"box-mcp\"].session.prefix" },
		{ "{\"box-mcp\": {\"session\": {\"at_disconnect\": \"never\"}}}",
		  "$[\"box-mcp\"].session.at_disconnect" },
		{ "{\"box-mcp\": {\"max_concurrent_calls\": 0}}", "$[\"box-mcp\"].max_concurrent_calls" },
		{ "{\"box-mcp\": {\"max_output_bytes\": \"big\"}}", "$[\"box-mcp\"].max_output_bytes" },
		{ "{\"box-mcp\": []}", "$[\"box-mcp\"]" },
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		box_err_init(&err);
		ok(box_mcp_config_load(&c, policy(bad[i].text), "/nonexistent", "/nonexistent",
				       &err) < 0 && err.code == BOX_E_INVALID,
		   "policy %s is refused", bad[i].text);
		is_str(err.path, bad[i].path, "at %s", bad[i].path);
		box_mcp_config_release(&c);
	}
	box_err_init(&err);
	ok(box_mcp_config_load(&c, "/nonexistent/policy.json", "/x", "/x", &err) < 0 &&
	   err.code == BOX_E_NOT_FOUND, "a missing policy is not_found");
	box_mcp_config_release(&c);
}

int main(void)
{
	struct box_mcp_config c;
	struct box_mcp m;
	struct box_err err;
	char text[PATH_MAX + 128], sid[64];
	const char *src = getenv("BOX_SRCDIR");
	const cJSON *r;

	snprintf(dir, sizeof(dir), "/tmp/t-mcp.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	/* BOX_SRCDIR under make check; the configured source tree otherwise (check-valgrind) */
	snprintf(fixtures, sizeof(fixtures), "%s/tests/fixtures/tools/tools.json",
		 src && src[0] ? src : BOX_TEST_SRCDIR);
	policy_errors();

	snprintf(text, sizeof(text), "{\"box-mcp\": {\"tools\": [], \"manifest\": \"%s\", "
		 "\"max_concurrent_calls\": 2, \"session\": {\"prefix\": \"t-\"}}}", fixtures);
	box_err_init(&err);
	ok(box_mcp_config_load(&c, policy(text), "/nonexistent", "/nonexistent", &err) == 0,
	   "a policy with the operator's tools only: %s", err.message);
	is_int(c.ntools, 13, "every tool of the manifest but the one that needs approval");
	ok(!box_mcp_tool_find(&c, "deploy") && box_mcp_tool_find(&c, "echo"),
	   "deploy (requires_approval) is not offered");
	ok(box_mcp_init(&m, &c, capture, NULL, &err) == 0, "init");
	ok(strncmp(m.session, "t-", 2) == 0 && strlen(m.session) == 18, "session id: prefix + 16 hex");

	say(&m, "{\"jsonrpc\":\"2.0\",\"id\":1,");
	is_int(code_of(last()), -32700, "not JSON: -32700");
	ok(cJSON_IsNull(cJSON_GetObjectItem(last(), "id")), "with id null");
	say(&m, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
	is_int(code_of(last()), -32600, "tools/list before initialize: -32600");
	say(&m, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":"
		"{\"protocolVersion\":\"2025-06-18\"}}");
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(last(), "result"),
							"protocolVersion")), "2025-06-18",
	       "initialize agrees on 2025-06-18");
	say(&m, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
	r = cJSON_GetObjectItem(cJSON_GetObjectItem(last(), "result"), "tools");
	is_int(cJSON_GetArraySize(r), 13, "tools/list lists them");
	ok(!cJSON_GetObjectItem(cJSON_GetObjectItem(last(), "result"), "resultType"),
	   "no resultType before 2026-07-28");

	clear();
	say(&m, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
		"\"arguments\":{\"items\":[7]}}}");
	is_int(nsent, 0, "a call answers later");
	is_int(box_mcp_busy(&m), 1, "one call in flight");
	pump(&m, 1);
	r = cJSON_GetObjectItem(last(), "result");
	ok(cJSON_IsFalse(cJSON_GetObjectItem(r, "isError")), "the tool answered");
	is_int(cJSON_GetNumberValue(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(
		cJSON_GetObjectItem(r, "structuredContent"), "got"), "items"), 0)), 7,
	       "structuredContent is its answer");
	is_int(box_mcp_busy(&m), 0, "and the call is over");

	say(&m, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
		"\"arguments\":{\"items\":[\"x\"]}}}");
	is_int(code_of(last()), -32602, "arguments the schema refuses: -32602");
	is_str(path_of(last()), "$.params.arguments.items[0]", "with their path");

	clear();
	say(&m, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":\"fail\"}}");
	say(&m, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"cat\","
		"\"arguments\":{}}}");
	say(&m, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"}}");
	r = cJSON_GetObjectItem(last(), "result");
	ok(cJSON_GetObjectItem(last(), "id")->valueint == 8 && cJSON_IsTrue(cJSON_GetObjectItem(r, "isError")),
	   "a third call past max_concurrent_calls 2 is an isError result at once");
	pump(&m, 3);
	is_int(nsent, 3, "the two others answered");
	is_int(box_mcp_busy(&m), 0, "nothing in flight");

	clear();
	say(&m, "{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"tools/call\",\"params\":{\"name\":\"sleep\"}}");
	is_int(box_mcp_busy(&m), 1, "a call that never answers runs");
	say(&m, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"x\"}}");
	is_int(box_mcp_busy(&m), 1, "cancelling another id changes nothing");
	say(&m, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"s\"}}");
	is_int(box_mcp_busy(&m), 0, "cancelled: the call is gone");
	is_int(nsent, 0, "and never answered");
	box_mcp_release(&m);

	ok(box_mcp_init(&m, &c, capture, NULL, &err) == 0, "a second connection");
	say(&m, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":"
		"{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
		"\"io.modelcontextprotocol/clientCapabilities\":{}}}}");
	r = cJSON_GetObjectItem(last(), "result");
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(r, "resultType")), "complete",
	       "2026-07-28 from the first message: resultType");
	ok(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "_meta"), "io.modelcontextprotocol/serverInfo") != NULL,
	   "and serverInfo in _meta");
	say(&m, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\"}}");
	is_int(code_of(last()), -32602, "initialize without _meta in the 2026-07-28 era is refused");
	box_mcp_oversized(&m);
	is_int(code_of(last()), -32600, "an oversized message: -32600");
	box_mcp_release(&m);
	clear();

	ok(box_mcp_session_new("p-", sid, sizeof(sid), &err) == 0 && strlen(sid) == 18 &&
	   strspn(sid + 2, "0123456789abcdef") == 16, "box_mcp_session_new: prefix + 16 hex");
	box_mcp_config_release(&c);
	snprintf(text, sizeof(text), "rm -rf %s", dir);
	if (system(text))
		return 1;
	return done_testing();
}
