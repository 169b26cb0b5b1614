#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "mcp.h"
#include "buf.h"
#include "json.h"
#include "proc.h"
#include "schema.h"
#include "banned.h"

#define META_VERSION "io.modelcontextprotocol/protocolVersion"
#define META_CAPS "io.modelcontextprotocol/clientCapabilities"
#define META_SERVER "io.modelcontextprotocol/serverInfo"
#define READ_CHUNK 65536
#define PROGRESS_TEXT_MAX 1024   /* bytes of output quoted in one progress message */

static const char *const legacy_versions[] = { BOX_MCP_LEGACY, "2025-06-18", NULL };

static const char instructions[] =
	"box runs untrusted work for you: run_lua runs a Lua 5.4 script in a locked-down VM; "
	"the sandbox_* tools work in one Linux sandbox that belongs to this connection "
	"(created on first use, /workspace kept between calls). The operator's policy decides "
	"which tools and limits you get.";

struct box_mcp_call {
	int used;
	cJSON *id;
	cJSON *token;            /* progressToken, or NULL */
	const struct box_mcp_tool *tool;
	struct box_mcp_child ch;
	struct box_buf line;     /* the line being read */
	cJSON *last;             /* the last object printed: the result */
	size_t total;            /* bytes read */
	double progress;
	enum box_mcp_era era;
};

/* ---------------------------------------------------------------- sending */

static void send_msg(struct box_mcp *m, cJSON *msg)
{
	size_t n;
	char *s = msg ? box_json_line(msg, &n) : NULL;

	if (s && !m->gone && m->send(m->ctx, s, n) < 0)
		m->gone = 1;
	free(s);
	cJSON_Delete(msg);
}

static cJSON *envelope(const cJSON *id)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "jsonrpc", "2.0");
	cJSON_AddItemToObject(o, "id", id ? cJSON_Duplicate(id, 1) : cJSON_CreateNull());
	box_json_exact(o);
	return o;
}

static void server_info(cJSON *o)
{
	cJSON *i = cJSON_AddObjectToObject(o, "serverInfo");

	if (i) {
		cJSON_AddStringToObject(i, "name", "box-mcp");
		cJSON_AddStringToObject(i, "title", "box");
		cJSON_AddStringToObject(i, "version", PACKAGE_VERSION);
	}
}

/* Takes ownership of result. 2026-07-28 (basic/index, "Result Responses"): every result
 * carries resultType, and the server names itself in its _meta. */
static void respond(struct box_mcp *m, const cJSON *id, cJSON *result, enum box_mcp_era era)
{
	cJSON *o = envelope(id);

	if (!o || !result) {
		cJSON_Delete(o);
		cJSON_Delete(result);
		return;
	}
	if (era == BOX_MCP_ERA_MODERN) {
		cJSON *meta = cJSON_AddObjectToObject(result, "_meta");

		cJSON_AddStringToObject(result, "resultType", "complete");
		if (meta) {
			cJSON *tmp = cJSON_CreateObject();

			server_info(tmp);
			cJSON_AddItemToObject(meta, META_SERVER,
					      cJSON_DetachItemFromObject(tmp, "serverInfo"));
			cJSON_Delete(tmp);
		}
	}
	cJSON_AddItemToObject(o, "result", result);
	send_msg(m, o);
}

/* data: takes ownership (may be NULL) */
static void rpc_error(struct box_mcp *m, const cJSON *id, int code, const char *message,
		      const char *path, cJSON *data)
{
	cJSON *o = envelope(id), *e = cJSON_CreateObject();

	if (!o || !e) {
		cJSON_Delete(o);
		cJSON_Delete(e);
		cJSON_Delete(data);
		return;
	}
	cJSON_AddNumberToObject(e, "code", code);
	cJSON_AddStringToObject(e, "message", message);
	if (path) {
		if (!data)
			data = cJSON_CreateObject();
		cJSON_AddStringToObject(data, "path", path);
	}
	if (data)
		cJSON_AddItemToObject(e, "data", data);
	cJSON_AddItemToObject(o, "error", e);
	send_msg(m, o);
}

/* ---------------------------------------------------------------- calls */

static int same_id(const cJSON *a, const cJSON *b)
{
	if (cJSON_IsString(a) && cJSON_IsString(b))
		return strcmp(a->valuestring, b->valuestring) == 0;
	if (cJSON_IsNumber(a) && cJSON_IsNumber(b))
		return a->valuedouble == b->valuedouble &&
		       (!a->valuestring || !b->valuestring ||
			strcmp(a->valuestring, b->valuestring) == 0);
	return 0;
}

static void call_free(struct box_mcp_call *c)
{
	cJSON_Delete(c->id);
	cJSON_Delete(c->token);
	cJSON_Delete(c->last);
	box_buf_release(&c->line);
	memset(c, 0, sizeof(*c));
	c->ch.out = -1;
}

/* Answers a call with a tool execution error (isError) made of err. */
static void call_error(struct box_mcp *m, const cJSON *id, enum box_mcp_era era,
		       const struct box_err *err)
{
	respond(m, id, box_mcp_call_result(NULL, err), era);
}

static void progress(struct box_mcp *m, struct box_mcp_call *c, const cJSON *ev)
{
	const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ev, "event"));
	const char *data = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ev, "data"));
	cJSON *o, *p;
	size_t n;

	if (!c->token || !kind || !data)
		return;
	n = strlen(data);
	c->progress += (double)(n ? n : 1);
	o = cJSON_CreateObject();
	if (!o)
		return;
	cJSON_AddStringToObject(o, "jsonrpc", "2.0");
	cJSON_AddStringToObject(o, "method", "notifications/progress");
	p = cJSON_AddObjectToObject(o, "params");
	if (p) {
		char text[PROGRESS_TEXT_MAX + 16];
		size_t k = n < PROGRESS_TEXT_MAX ? n : PROGRESS_TEXT_MAX;

		/* never cut a UTF-8 sequence */
		while (k > 0 && k < n && ((unsigned char)data[k] & 0xC0) == 0x80)
			k--;
		box_fmt(text, sizeof(text), "%s: %.*s", kind, (int)k, data);
		cJSON_AddItemToObject(p, "progressToken", cJSON_Duplicate(c->token, 1));
		cJSON_AddNumberToObject(p, "progress", c->progress);
		cJSON_AddStringToObject(p, "message", text);
	}
	send_msg(m, o);
}

/* One line the command printed: an event (progress) or the result object. */
static void call_line(struct box_mcp *m, struct box_mcp_call *c, const char *s, size_t n)
{
	struct box_err err;
	cJSON *v;
	const char *ev;

	if (n == 0)
		return;
	box_err_init(&err);
	v = box_json_parse(s, n, &err);
	if (!cJSON_IsObject(v)) {
		cJSON_Delete(v);
		return;
	}
	ev = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "event"));
	if (ev && strcmp(ev, "result") != 0) {
		progress(m, c, v);
		cJSON_Delete(v);
		return;
	}
	cJSON_Delete(c->last);
	c->last = v;
}

static cJSON *operator_result(const cJSON *line, struct box_err *err)
{
	const cJSON *answer = cJSON_GetObjectItemCaseSensitive(line, "answer");
	cJSON *r;

	if (answer)
		return box_mcp_tool_result(answer, 0);
	if (box_err_from_json(err, cJSON_GetObjectItemCaseSensitive(line, "error")) < 0)
		box_err_set(err, BOX_E_INTERNAL, "the tool's helper printed no answer");
	r = box_mcp_call_result(NULL, err);
	/* the error object is not what the tool's output schema describes */
	cJSON_DeleteItemFromObjectCaseSensitive(r, "structuredContent");
	return r;
}

static void call_done(struct box_mcp *m, struct box_mcp_call *c)
{
	struct box_err err;
	int status;

	box_err_init(&err);
	if (c->line.len)
		call_line(m, c, c->line.data, c->line.len);
	status = box_mcp_child_finish(&c->ch);
	if (!c->last) {
		if (WIFSIGNALED(status))
			box_err_set(&err, BOX_E_INTERNAL, "%s was killed by signal %d",
				    c->tool->name, WTERMSIG(status));
		else
			box_err_set(&err, BOX_E_INTERNAL, "%s printed no result (exit status %d)",
				    c->tool->name, WEXITSTATUS(status));
		call_error(m, c->id, c->era, &err);
	} else if (c->tool->kind == BOX_MCP_OPERATOR) {
		respond(m, c->id, operator_result(c->last, &err), c->era);
	} else {
		respond(m, c->id, box_mcp_call_result(c->last, &err), c->era);
	}
	call_free(c);
}

static void call_read(struct box_mcp *m, struct box_mcp_call *c)
{
	char chunk[READ_CHUNK];
	struct box_err aerr;
	ssize_t got;
	int rounds;

	/* a bounded number of reads, so that one flooding command cannot starve the others */
	for (rounds = 0; rounds < 16; rounds++) {
		char *nl;

		got = read(c->ch.out, chunk, sizeof(chunk));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && errno == EAGAIN)
			return;
		if (got <= 0) {
			call_done(m, c);
			return;
		}
		c->total += (size_t)got;
		if (c->total > m->cfg->max_output_bytes ||
		    box_buf_append(&c->line, chunk, (size_t)got, &aerr) < 0) {
			struct box_err err;

			box_mcp_child_kill(&c->ch);
			box_err_init(&err);
			box_err_limit(&err, BOX_E_LIMIT, "output_bytes",
				      (int64_t)m->cfg->max_output_bytes, "bytes",
				      "%s printed more than %zu bytes", c->tool->name,
				      m->cfg->max_output_bytes);
			call_error(m, c->id, c->era, &err);
			call_free(c);
			return;
		}
		while ((nl = memchr(c->line.data, '\n', c->line.len))) {
			size_t k = (size_t)(nl - c->line.data);

			call_line(m, c, c->line.data, k);
			memmove(c->line.data, nl + 1, c->line.len - k - 1);
			box_buf_truncate(&c->line, c->line.len - k - 1);
		}
	}
}

size_t box_mcp_pollfds(const struct box_mcp *m, struct pollfd *p, size_t max)
{
	size_t n = 0;
	int i;

	for (i = 0; i < m->cfg->max_concurrent && n < max; i++)
		if (m->calls[i].used && m->calls[i].ch.out >= 0) {
			p[n].fd = m->calls[i].ch.out;
			p[n].events = POLLIN;
			p[n].revents = 0;
			n++;
		}
	return n;
}

void box_mcp_ready(struct box_mcp *m, const struct pollfd *p, size_t n)
{
	size_t k;
	int i;

	for (k = 0; k < n; k++) {
		if (!p[k].revents)
			continue;
		for (i = 0; i < m->cfg->max_concurrent; i++)
			if (m->calls[i].used && m->calls[i].ch.out == p[k].fd) {
				call_read(m, &m->calls[i]);
				break;
			}
	}
}

int box_mcp_busy(const struct box_mcp *m)
{
	int i, n = 0;

	for (i = 0; i < m->cfg->max_concurrent; i++)
		n += m->calls[i].used;
	return n;
}

/* ---------------------------------------------------------------- methods */

static void args_path(char *out, size_t n, const char *schema_path)
{
	/* box_schema_validate's "$.x" of the arguments is "$.params.arguments.x" of the call */
	box_fmt(out, n, "$.params.arguments%s", schema_path[0] == '$' ? schema_path + 1 : "");
}

static void tools_call(struct box_mcp *m, const cJSON *id, const cJSON *params,
		       enum box_mcp_era era)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
	const cJSON *token = cJSON_GetObjectItemCaseSensitive(meta, "progressToken");
	const struct box_mcp_tool *t;
	struct box_mcp_call *c = NULL;
	struct box_err err;
	cJSON *empty = NULL, *req = NULL;
	char **argv = NULL;
	char *in = NULL;
	size_t inlen = 0;
	int i, r;

	box_err_init(&err);
	if (!cJSON_IsString(name)) {
		rpc_error(m, id, BOX_RPC_INVALID_PARAMS, "tools/call needs params.name, a string",
			  "$.params.name", NULL);
		return;
	}
	t = box_mcp_tool_find(m->cfg, name->valuestring);
	if (!t) {
		char msg[200];

		box_fmt(msg, sizeof(msg), "unknown tool: %.128s", name->valuestring);
		rpc_error(m, id, BOX_RPC_INVALID_PARAMS, msg, "$.params.name", NULL);
		return;
	}
	if (args && !cJSON_IsObject(args) && !cJSON_IsNull(args)) {
		rpc_error(m, id, BOX_RPC_INVALID_PARAMS, "params.arguments must be an object",
			  "$.params.arguments", NULL);
		return;
	}
	if (!cJSON_IsObject(args))
		args = empty = cJSON_CreateObject();
	if (box_schema_validate(t->input_schema, args, &err) < 0) {
		char path[BOX_ERR_FIELD_MAX + 32];

		args_path(path, sizeof(path), err.path[0] ? err.path : "$");
		rpc_error(m, id, BOX_RPC_INVALID_PARAMS, err.message, path, NULL);
		goto out;
	}
	for (i = 0; i < m->cfg->max_concurrent; i++) {
		if (m->calls[i].used && same_id(m->calls[i].id, id)) {
			rpc_error(m, id, BOX_RPC_INVALID_REQUEST,
				  "a request with this id is still in flight", "$.id", NULL);
			goto out;
		}
		if (!m->calls[i].used && !c)
			c = &m->calls[i];
	}
	if (!c) {
		box_err_limit(&err, BOX_E_LIMIT, "max_concurrent_calls", m->cfg->max_concurrent,
			      "calls", "%d calls are in flight already: wait for one to end",
			      m->cfg->max_concurrent);
		err.retryable = 1;
		call_error(m, id, era, &err);
		goto out;
	}
	if (box_mcp_call_command(m->cfg, t, args, m->session,
				 cJSON_IsString(token) || cJSON_IsNumber(token), &argv, &req,
				 &err) < 0) {
		call_error(m, id, era, &err);
		goto out;
	}
	if (t->kind == BOX_MCP_SANDBOX)
		m->session_used = 1;
	if (t->kind == BOX_MCP_OPERATOR) {
		r = box_mcp_child_tool(&c->ch, t->tool, req, m->cfg->box_run, &err);
	} else {
		in = box_json_line(req, &inlen);
		r = in ? box_mcp_child_spawn(&c->ch, argv, m->env.v, in, inlen, &err)
		       : box_err_set(&err, BOX_E_INTERNAL, "out of memory");
	}
	if (r < 0) {
		call_error(m, id, era, &err);
		goto out;
	}
	c->used = 1;
	c->id = cJSON_Duplicate(id, 1);
	c->token = cJSON_IsString(token) || cJSON_IsNumber(token) ? cJSON_Duplicate(token, 1) : NULL;
	c->tool = t;
	c->era = era;
	box_buf_init(&c->line, m->cfg->max_output_bytes);
out:
	free(in);
	free(argv);
	cJSON_Delete(req);
	cJSON_Delete(empty);
}

static cJSON *capabilities(void)
{
	cJSON *caps = cJSON_CreateObject(), *tools = cJSON_AddObjectToObject(caps, "tools");

	if (tools)
		cJSON_AddFalseToObject(tools, "listChanged");
	return caps;
}

static void initialize(struct box_mcp *m, const cJSON *id, const cJSON *params)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, "protocolVersion");
	const char *const *l;
	cJSON *r;

	if (m->initialized) {
		rpc_error(m, id, BOX_RPC_INVALID_REQUEST, "initialize was already answered", NULL,
			  NULL);
		return;
	}
	if (!cJSON_IsString(v)) {
		rpc_error(m, id, BOX_RPC_INVALID_PARAMS, "initialize needs params.protocolVersion",
			  "$.params.protocolVersion", NULL);
		return;
	}
	/* 2025-11-25 basic/lifecycle, "Version Negotiation": the same version when supported,
	 * else the latest the server supports */
	box_fmt(m->version, sizeof(m->version), "%s", BOX_MCP_LEGACY);
	for (l = legacy_versions; *l; l++)
		if (strcmp(*l, v->valuestring) == 0)
			box_fmt(m->version, sizeof(m->version), "%s", *l);
	m->era = BOX_MCP_ERA_LEGACY;
	m->initialized = 1;
	r = cJSON_CreateObject();
	if (!r)
		return;
	cJSON_AddStringToObject(r, "protocolVersion", m->version);
	cJSON_AddItemToObject(r, "capabilities", capabilities());
	server_info(r);
	cJSON_AddStringToObject(r, "instructions", instructions);
	respond(m, id, r, BOX_MCP_ERA_LEGACY);
}

static cJSON *supported(void)
{
	cJSON *a = cJSON_CreateArray();
	const char *const *l;

	cJSON_AddItemToArray(a, cJSON_CreateString(BOX_MCP_MODERN));
	for (l = legacy_versions; *l; l++)
		cJSON_AddItemToArray(a, cJSON_CreateString(*l));
	return a;
}

static void discover(struct box_mcp *m, const cJSON *id)
{
	cJSON *r = cJSON_CreateObject();

	if (!r)
		return;
	cJSON_AddItemToObject(r, "supportedVersions", supported());
	cJSON_AddItemToObject(r, "capabilities", capabilities());
	cJSON_AddStringToObject(r, "instructions", instructions);
	/* server/utilities/caching: the answer holds while the process lives */
	cJSON_AddNumberToObject(r, "ttlMs", 3600000);
	cJSON_AddStringToObject(r, "cacheScope", "private");
	respond(m, id, r, BOX_MCP_ERA_MODERN);
}

static void tools_list(struct box_mcp *m, const cJSON *id, enum box_mcp_era era)
{
	cJSON *r = cJSON_CreateObject(), *t = box_mcp_tools_list(m->cfg);

	if (!r || !t) {
		cJSON_Delete(r);
		cJSON_Delete(t);
		rpc_error(m, id, BOX_RPC_INTERNAL, "out of memory", NULL, NULL);
		return;
	}
	cJSON_AddItemToObject(r, "tools", t);
	if (era == BOX_MCP_ERA_MODERN) {
		cJSON_AddNumberToObject(r, "ttlMs", 3600000);
		cJSON_AddStringToObject(r, "cacheScope", "private");
	}
	respond(m, id, r, era);
}

/* 2026-07-28 basic/index, "Per-request protocol fields": the version and the client's
 * capabilities on every request, else -32602; an unknown version is -32022. Returns 1 when
 * the request may go on. */
static int modern_meta(struct box_mcp *m, const cJSON *id, const cJSON *params)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(meta, META_VERSION);
	cJSON *data;

	if (!cJSON_IsString(v)) {
		rpc_error(m, id, BOX_RPC_INVALID_PARAMS, "missing _meta[\"" META_VERSION "\"]",
			  "$.params._meta[\"" META_VERSION "\"]", NULL);
		return 0;
	}
	if (strcmp(v->valuestring, BOX_MCP_MODERN) != 0) {
		data = cJSON_CreateObject();
		if (data) {
			cJSON_AddItemToObject(data, "supported", supported());
			cJSON_AddStringToObject(data, "requested", v->valuestring);
		}
		rpc_error(m, id, BOX_RPC_UNSUPPORTED_VERSION, "Unsupported protocol version", NULL,
			  data);
		return 0;
	}
	if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(meta, META_CAPS))) {
		rpc_error(m, id, BOX_RPC_INVALID_PARAMS, "missing _meta[\"" META_CAPS "\"]",
			  "$.params._meta[\"" META_CAPS "\"]", NULL);
		return 0;
	}
	return 1;
}

int box_mcp_cancel(struct box_mcp *m, const cJSON *id)
{
	int i;

	for (i = 0; id && i < m->cfg->max_concurrent; i++) {
		struct box_mcp_call *c = &m->calls[i];

		if (c->used && same_id(c->id, id)) {
			/* basic/utilities/cancellation: stop the work, send nothing more for it */
			box_mcp_child_kill(&c->ch);
			call_free(c);
			return 1;
		}
	}
	return 0;
}

static void cancelled(struct box_mcp *m, const cJSON *params)
{
	box_mcp_cancel(m, cJSON_GetObjectItemCaseSensitive(params, "requestId"));
}

static int valid_id(const cJSON *id)
{
	if (cJSON_IsString(id))
		return 1;
	return cJSON_IsNumber(id) && box_json_is_int_literal(id);
}

static void request(struct box_mcp *m, const cJSON *id, const char *method,
		    const cJSON *params)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");

	if (m->era == BOX_MCP_ERA_UNKNOWN) {
		if (strcmp(method, "initialize") == 0) {
			initialize(m, id, params);
			return;
		}
		if (cJSON_GetObjectItemCaseSensitive(meta, META_VERSION)) {
			m->era = BOX_MCP_ERA_MODERN;
		} else if (strcmp(method, "ping") == 0) {
			respond(m, id, cJSON_CreateObject(), BOX_MCP_ERA_LEGACY);
			return;
		} else {
			rpc_error(m, id, BOX_RPC_INVALID_REQUEST,
				  "send initialize first, or give _meta[\"" META_VERSION "\"] "
				  "(2026-07-28)", NULL, NULL);
			return;
		}
	}
	if (m->era == BOX_MCP_ERA_MODERN) {
		if (!modern_meta(m, id, params))
			return;
		if (strcmp(method, "server/discover") == 0)
			discover(m, id);
		else if (strcmp(method, "tools/list") == 0)
			tools_list(m, id, BOX_MCP_ERA_MODERN);
		else if (strcmp(method, "tools/call") == 0)
			tools_call(m, id, params, BOX_MCP_ERA_MODERN);
		else
			rpc_error(m, id, BOX_RPC_METHOD_NOT_FOUND, "method not found", "$.method",
				  NULL);
		return;
	}
	if (strcmp(method, "initialize") == 0)
		initialize(m, id, params);
	else if (strcmp(method, "ping") == 0)
		respond(m, id, cJSON_CreateObject(), BOX_MCP_ERA_LEGACY);
	else if (strcmp(method, "tools/list") == 0)
		tools_list(m, id, BOX_MCP_ERA_LEGACY);
	else if (strcmp(method, "tools/call") == 0)
		tools_call(m, id, params, BOX_MCP_ERA_LEGACY);
	else
		rpc_error(m, id, BOX_RPC_METHOD_NOT_FOUND, "method not found", "$.method", NULL);
}

void box_mcp_message(struct box_mcp *m, const char *text, size_t n)
{
	struct box_err err;
	const cJSON *id, *method, *params, *version;
	cJSON *msg;

	box_err_init(&err);
	msg = box_json_parse(text, n, &err);
	if (!msg) {
		rpc_error(m, NULL, BOX_RPC_PARSE_ERROR, err.message, NULL, NULL);
		return;
	}
	if (!cJSON_IsObject(msg)) {
		rpc_error(m, NULL, BOX_RPC_INVALID_REQUEST,
			  "a message is one JSON-RPC object (MCP has no batches)", "$", NULL);
		goto out;
	}
	id = cJSON_GetObjectItemCaseSensitive(msg, "id");
	method = cJSON_GetObjectItemCaseSensitive(msg, "method");
	params = cJSON_GetObjectItemCaseSensitive(msg, "params");
	version = cJSON_GetObjectItemCaseSensitive(msg, "jsonrpc");
	if (id && !valid_id(id)) {
		rpc_error(m, NULL, BOX_RPC_INVALID_REQUEST, "id must be a string or an integer",
			  "$.id", NULL);
		goto out;
	}
	if (!cJSON_IsString(version) || strcmp(version->valuestring, "2.0") != 0) {
		rpc_error(m, id, BOX_RPC_INVALID_REQUEST, "jsonrpc must be \"2.0\"", "$.jsonrpc",
			  NULL);
		goto out;
	}
	if (!method && id && (cJSON_GetObjectItemCaseSensitive(msg, "result") ||
			      cJSON_GetObjectItemCaseSensitive(msg, "error")))
		goto out;  /* a response: box-mcp sends no requests, nothing waits for it */
	if (!cJSON_IsString(method)) {
		rpc_error(m, id, BOX_RPC_INVALID_REQUEST, "method must be a string", "$.method",
			  NULL);
		goto out;
	}
	if (!id) {
		if (strcmp(method->valuestring, "notifications/cancelled") == 0)
			cancelled(m, params);
		goto out;  /* notifications get no answer, whatever they are */
	}
	if (params && !cJSON_IsObject(params)) {
		rpc_error(m, id, BOX_RPC_INVALID_PARAMS, "params must be an object", "$.params",
			  NULL);
		goto out;
	}
	request(m, id, method->valuestring, params);
out:
	cJSON_Delete(msg);
}

void box_mcp_oversized(struct box_mcp *m)
{
	char msg[96];

	box_fmt(msg, sizeof(msg), "message longer than %zu bytes", m->cfg->max_message_bytes);
	rpc_error(m, NULL, BOX_RPC_INVALID_REQUEST, msg, "$", NULL);
}

/* ---------------------------------------------------------------- life */

int box_mcp_init(struct box_mcp *m, struct box_mcp_config *cfg, box_mcp_send_fn *send,
		 void *ctx, struct box_err *err)
{
	int i;

	memset(m, 0, sizeof(*m));
	m->cfg = cfg;
	m->send = send;
	m->ctx = ctx;
	if (box_mcp_session_new(cfg->prefix, m->session, sizeof(m->session), err) < 0)
		return -1;
	m->calls = calloc((size_t)cfg->max_concurrent, sizeof(*m->calls));
	if (!m->calls)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	for (i = 0; i < cfg->max_concurrent; i++)
		m->calls[i].ch.out = -1;
	if (box_mcp_env_init(&m->env, cfg->policy, err) < 0) {
		free(m->calls);
		m->calls = NULL;
		return -1;
	}
	return 0;
}

static void delete_session(struct box_mcp *m)
{
	const char *argv[] = { m->cfg->box_sandbox, "--session", m->session, "delete", NULL };
	struct box_proc_opts o = { 0 };
	struct box_proc_result r = { 0 };
	struct box_err err;

	box_err_init(&err);
	o.argv = argv;
	o.envp = m->env.v;
	o.timeout_ms = 60000;
	box_proc_run(&o, &r, &err);
	box_proc_result_release(&r);
}

void box_mcp_release(struct box_mcp *m)
{
	int i;

	for (i = 0; m->calls && i < m->cfg->max_concurrent; i++)
		if (m->calls[i].used) {
			box_mcp_child_kill(&m->calls[i].ch);
			call_free(&m->calls[i]);
		}
	if (m->session_used && !m->cfg->keep_session && m->calls)
		delete_session(m);
	free(m->calls);
	box_mcp_env_release(&m->env);
	memset(m, 0, sizeof(*m));
}

/* ---------------------------------------------------------------- stdio */

static int write_fd(void *ctx, const char *msg, size_t n)
{
	return box_write_all(*(int *)ctx, msg, n);
}

/* Splits what arrived on stdin into messages; a line past the cap is dropped (answered with
 * one error) up to its newline. */
static void input_lines(struct box_mcp *m, struct box_buf *in, int *skipping)
{
	char *nl;

	while ((nl = memchr(in->data, '\n', in->len))) {
		size_t k = (size_t)(nl - in->data), line = k;

		if (line && in->data[line - 1] == '\r')
			line--;
		if (*skipping)
			*skipping = 0;
		else if (line > m->cfg->max_message_bytes)
			box_mcp_oversized(m);
		else if (line)
			box_mcp_message(m, in->data, line);
		memmove(in->data, nl + 1, in->len - k - 1);
		box_buf_truncate(in, in->len - k - 1);
	}
	if (in->len > m->cfg->max_message_bytes) {
		if (!*skipping)
			box_mcp_oversized(m);
		*skipping = 1;
		box_buf_truncate(in, 0);
	}
}

int box_mcp_serve_stdio(struct box_mcp_config *cfg, int in, int out, struct box_err *err)
{
	struct box_mcp m;
	struct box_buf buf;
	struct box_err aerr;
	struct pollfd *p;
	sigset_t sigs, old;
	int sfd, eof = 0, skipping = 0, r = 0;

	if (box_mcp_init(&m, cfg, write_fd, &out, err) < 0)
		return -1;
	p = calloc((size_t)cfg->max_concurrent + 2, sizeof(*p));
	if (!p) {
		box_mcp_release(&m);
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	}
	/* SIGTERM, SIGINT and SIGHUP end the connection as end of input does */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, &old);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	box_buf_init(&buf, cfg->max_message_bytes + READ_CHUNK + 1);
	/* 2026-07-28 basic/transports/stdio, "Shutdown": exit promptly at end of input; the
	 * calls still running are killed (their answers could not be read) */
	while (!m.gone && !eof) {
		size_t n = 0, calls;

		p[n].fd = in;
		p[n].events = POLLIN;
		p[n++].revents = 0;
		if (sfd >= 0) {
			p[n].fd = sfd;
			p[n].events = POLLIN;
			p[n++].revents = 0;
		}
		calls = box_mcp_pollfds(&m, p + n, (size_t)cfg->max_concurrent);
		if (poll(p, n + calls, -1) < 0) {
			if (errno == EINTR)
				continue;
			r = box_err_sys(err, "poll");
			break;
		}
		if (sfd >= 0 && p[1].revents)
			break;
		if (p[0].revents) {
			char chunk[READ_CHUNK];
			ssize_t got = read(in, chunk, sizeof(chunk));

			if (got < 0 && errno != EINTR && errno != EAGAIN) {
				r = box_err_sys(err, "read stdin");
				break;
			}
			if (got == 0)
				eof = 1;
			else if (got > 0 &&
				   box_buf_append(&buf, chunk, (size_t)got, &aerr) == 0) {
				input_lines(&m, &buf, &skipping);
			}
		}
		box_mcp_ready(&m, p + n, calls);
	}
	box_buf_release(&buf);
	free(p);
	box_mcp_release(&m);
	if (sfd >= 0)
		close(sfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return r;
}
