#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "mcptools.h"
#include "buf.h"
#include "json.h"
#include "libexec.h"
#include "mcpchild.h"
#include "proc.h"
#include "tools.h"
#include "banned.h"

/* The built-in tools: which binary, which box-sandbox operation, which request members. */
struct builtin {
	const char *name;
	enum box_mcp_kind kind;
	const char *op;
	int granted;                  /* without a "tools" list in the policy */
	int streams;
	const char *const *members;   /* NULL: all of the binary's, less the ones box-mcp sets */
	const char *const *required;
	const char *description;
	int read_only, destructive;
};

static const char *const exec_members[] = { "argv", "command", "cwd", "stdin", "env",
					    "timeout_ms", NULL };
static const char *const path_member[] = { "path", NULL };
static const char *const write_members[] = { "path", "content", "content_base64", NULL };
static const char *const digest_member[] = { "digest", NULL };
static const char *const none[] = { NULL };

static const struct builtin builtins[] = {
	{ "run_lua", BOX_MCP_RUN, NULL, 1, 1, NULL, NULL,
	  "Run a Lua 5.4 script in a locked-down VM (bounded memory, CPU, wall time and output; "
	  "no files, network or processes unless the operator granted them). The result has the "
	  "captured print output (stdout), the script's return value (result) and stats.", 1, 0 },
	{ "sandbox_exec", BOX_MCP_SANDBOX, "exec", 1, 1, exec_members, NULL,
	  "Run a command in this connection's Linux sandbox (created on first use; /workspace "
	  "persists between calls). Give argv (the command and its arguments) or command (a "
	  "shell command line). The result has exit_code, stdout, stderr and the files left in "
	  "/output.", 0, 1 },
	{ "sandbox_read_file", BOX_MCP_SANDBOX, "read", 1, 0, path_member, path_member,
	  "Read a file of the sandbox: a path under /workspace (relative paths too), /input or "
	  "/output. UTF-8 text comes back as content, other bytes in base64.", 1, 0 },
	{ "sandbox_write_file", BOX_MCP_SANDBOX, "write", 1, 0, write_members, path_member,
	  "Write a file under /workspace of the sandbox, atomically: content (UTF-8 text) or "
	  "content_base64 (bytes).", 0, 1 },
	{ "sandbox_list_files", BOX_MCP_SANDBOX, "ls", 1, 0, path_member, NULL,
	  "List a directory of the sandbox (default /workspace): name, type and size of each "
	  "entry.", 1, 0 },
	{ "sandbox_status", BOX_MCP_SANDBOX, "status", 0, 0, none, NULL,
	  "The state of this connection's sandbox: running, paused, lost or absent, its limits "
	  "and when it was last used.", 1, 0 },
	{ "sandbox_pause", BOX_MCP_SANDBOX, "pause", 0, 0, none, NULL,
	  "Freeze every process of the sandbox until the next operation resumes it.", 0, 0 },
	{ "sandbox_resume", BOX_MCP_SANDBOX, "resume", 0, 0, none, NULL,
	  "Resume a paused or lost sandbox.", 0, 0 },
	{ "sandbox_snapshot", BOX_MCP_SANDBOX, "snapshot", 0, 0, none, NULL,
	  "Snapshot /workspace of the sandbox; the result's digest restores it later.", 0, 0 },
	{ "sandbox_restore", BOX_MCP_SANDBOX, "restore", 0, 0, digest_member, digest_member,
	  "Bring /workspace of the sandbox back to a snapshot (its sha256 digest).", 0, 1 },
	{ "sandbox_delete", BOX_MCP_SANDBOX, "delete", 0, 0, none, NULL,
	  "Delete the sandbox and its files; the next operation starts a new one.", 0, 1 },
};

#define NBUILTINS (sizeof(builtins) / sizeof(builtins[0]))

const char *const box_mcp_builtin_names[] = {
	"run_lua", "sandbox_exec", "sandbox_read_file", "sandbox_write_file",
	"sandbox_list_files", "sandbox_status", "sandbox_pause", "sandbox_resume",
	"sandbox_snapshot", "sandbox_restore", "sandbox_delete", NULL,
};

/*
 * Members box-mcp sets itself, never the agent: the output mode, the operation and the session
 * (the command line binds it). Everything else is what the binary's --describe offers, which
 * follows the operator's policy: what the agent may set, caps as maximums.
 */
static const char *const own_members[] = { "events", "op", "session", NULL };

static int in_list(const char *const *list, const char *s)
{
	for (; *list; list++)
		if (strcmp(*list, s) == 0)
			return 1;
	return 0;
}

static int bad(struct box_err *err, const char *path, const char *what)
{
	box_err_set(err, BOX_E_INVALID, "policy: at %s: %s", path, what);
	box_err_path(err, path);
	return -1;
}

static int size_member(const cJSON *v, const char *key, int64_t min, int64_t max, size_t *out,
		       struct box_err *err)
{
	char path[96];
	int64_t n;

	if (!v)
		return 0;
	box_fmt(path, sizeof(path), "$[\"box-mcp\"].%s", key);
	if (!box_json_int64(v, &n) || n < min || n > max) {
		char what[96];

		box_fmt(what, sizeof(what), "expected an integer from %lld to %lld",
			(long long)min, (long long)max);
		return bad(err, path, what);
	}
	*out = (size_t)n;
	return 0;
}

/* The "session" member: prefix (a valid start of a session id) and at_disconnect. */
static int session_member(struct box_mcp_config *c, const cJSON *s, struct box_err *err)
{
	const cJSON *m;

	if (!s)
		return 0;
	if (!cJSON_IsObject(s))
		return bad(err, "$[\"box-mcp\"].session", "expected object");
	cJSON_ArrayForEach(m, s) {
		char path[128];

		box_fmt(path, sizeof(path), "$[\"box-mcp\"].session.%.64s", m->string);
		if (strcmp(m->string, "prefix") == 0) {
			const char *p = cJSON_GetStringValue(m);
			size_t i, n = p ? strlen(p) : 0;

			if (!p || n > BOX_MCP_PREFIX_MAX)
				return bad(err, path, "expected a string of at most 40 characters");
			for (i = 0; i < n; i++)
				if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') ||
				      (i > 0 && (p[i] == '-' || p[i] == '_'))))
					return bad(err, path, "expected [a-z0-9][a-z0-9_-]*");
			memcpy(c->prefix, p, n + 1);
		} else if (strcmp(m->string, "at_disconnect") == 0) {
			const char *v = cJSON_GetStringValue(m);

			if (!v || (strcmp(v, "delete") != 0 && strcmp(v, "keep") != 0))
				return bad(err, path, "expected \"delete\" or \"keep\"");
			c->keep_session = strcmp(v, "keep") == 0;
		} else {
			return bad(err, path, "unknown member");
		}
	}
	return 0;
}

static char *dir_join(const char *policy, const char *file)
{
	const char *slash = policy ? strrchr(policy, '/') : NULL;
	size_t n;
	char *s;

	if (file[0] == '/' || !slash)
		return strdup(file);
	n = (size_t)(slash - policy) + 1 + strlen(file) + 1;
	s = malloc(n);
	if (s)
		box_fmt(s, n, "%.*s/%s", (int)(slash - policy), policy, file);
	return s;
}

/* Applies the "box-mcp" section; *grant gets the built-in tools granted, *manifest the path
 * of the operator's tools (malloc'd) or NULL. */
static int section(struct box_mcp_config *c, const cJSON *sec, int *grant, char **manifest,
		   struct box_err *err)
{
	const cJSON *m;
	size_t i;

	if (!cJSON_IsObject(sec))
		return bad(err, "$[\"box-mcp\"]", "expected object");
	cJSON_ArrayForEach(m, sec) {
		char path[128];

		box_fmt(path, sizeof(path), "$[\"box-mcp\"].%.64s", m->string);
		if (strcmp(m->string, "tools") == 0) {
			const cJSON *t;
			int k = 0;

			if (!cJSON_IsArray(m))
				return bad(err, path, "expected array");
			for (i = 0; i < NBUILTINS; i++)
				grant[i] = 0;
			cJSON_ArrayForEach(t, m) {
				char ipath[160];
				const char *name = cJSON_GetStringValue(t);

				box_fmt(ipath, sizeof(ipath), "%s[%d]", path, k++);
				for (i = 0; name && i < NBUILTINS; i++)
					if (strcmp(builtins[i].name, name) == 0)
						break;
				if (!name || i == NBUILTINS)
					return bad(err, ipath, "not a tool of box-mcp");
				grant[i] = 1;
			}
		} else if (strcmp(m->string, "manifest") == 0) {
			if (!cJSON_IsString(m) || !m->valuestring[0])
				return bad(err, path, "expected a file name");
			*manifest = dir_join(c->policy, m->valuestring);
			if (!*manifest)
				return box_err_set(err, BOX_E_INTERNAL, "out of memory");
		} else if (strcmp(m->string, "session") == 0) {
			if (session_member(c, m, err) < 0)
				return -1;
		} else if (strcmp(m->string, "max_message_bytes") == 0) {
			if (size_member(m, m->string, 1024, (int64_t)256 << 20, &c->max_message_bytes,
					err) < 0)
				return -1;
		} else if (strcmp(m->string, "max_output_bytes") == 0) {
			if (size_member(m, m->string, 1024, (int64_t)256 << 20, &c->max_output_bytes,
					err) < 0)
				return -1;
		} else if (strcmp(m->string, "max_concurrent_calls") == 0) {
			size_t n = 0;

			if (size_member(m, m->string, 1, BOX_MCP_CONCURRENT_MAX, &n, err) < 0)
				return -1;
			c->max_concurrent = (int)n;
		} else {
			return bad(err, path, "unknown member");
		}
	}
	return 0;
}

static int read_policy(struct box_mcp_config *c, int *grant, char **manifest,
		       struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_MCP_POLICY_MAX);
	cJSON *doc;
	const cJSON *sec;
	int r;

	if (box_buf_read_file(&b, AT_FDCWD, c->policy, err) < 0) {
		box_buf_release(&b);
		return -1;
	}
	doc = box_json_parse(b.data ? b.data : "", b.len, err);
	box_buf_release(&b);
	if (!doc) {
		box_err_path(err, c->policy);
		return -1;
	}
	if (!cJSON_IsObject(doc)) {
		cJSON_Delete(doc);
		return bad(err, "$", "expected object");
	}
	sec = cJSON_GetObjectItemCaseSensitive(doc, "box-mcp");
	r = sec ? section(c, sec, grant, manifest, err) : 0;
	cJSON_Delete(doc);
	return r;
}

/* The input schema of one tool: the binary's request schema, with only the members it takes. */
static cJSON *input_schema(const struct builtin *b, const cJSON *request)
{
	const cJSON *props = cJSON_GetObjectItemCaseSensitive(request, "properties"), *p;
	cJSON *s = cJSON_CreateObject(), *out = cJSON_AddObjectToObject(s, "properties");
	cJSON *req = NULL;
	const char *const *r;

	if (!s || !out)
		goto oom;
	cJSON_AddStringToObject(s, "type", "object");
	cJSON_ArrayForEach(p, props) {
		if (in_list(own_members, p->string))
			continue;
		if (b->members && !in_list(b->members, p->string))
			continue;
		if (!cJSON_AddItemToObject(out, p->string, cJSON_Duplicate(p, 1)))
			goto oom;
	}
	for (r = b->required ? b->required : none; *r; r++) {
		if (!cJSON_GetObjectItemCaseSensitive(out, *r))
			continue;
		if (!req && !(req = cJSON_AddArrayToObject(s, "required")))
			goto oom;
		cJSON_AddItemToArray(req, cJSON_CreateString(*r));
	}
	if (!b->members) {
		/* run_lua: the binary's own required members, as far as they are offered */
		const cJSON *q;

		cJSON_ArrayForEach(q, cJSON_GetObjectItemCaseSensitive(request, "required")) {
			if (!cJSON_IsString(q) ||
			    !cJSON_GetObjectItemCaseSensitive(out, q->valuestring))
				continue;
			if (!req && !(req = cJSON_AddArrayToObject(s, "required")))
				goto oom;
			cJSON_AddItemToArray(req, cJSON_CreateString(q->valuestring));
		}
	}
	cJSON_AddFalseToObject(s, "additionalProperties");
	return s;
oom:
	cJSON_Delete(s);
	return NULL;
}

static cJSON *tool_def(const char *name, const char *description, cJSON *in, cJSON *out,
		       int read_only, int destructive)
{
	cJSON *d = cJSON_CreateObject(), *a;

	if (!d || !in) {
		cJSON_Delete(d);
		cJSON_Delete(in);
		cJSON_Delete(out);
		return NULL;
	}
	cJSON_AddStringToObject(d, "name", name);
	cJSON_AddStringToObject(d, "description", description);
	cJSON_AddItemToObject(d, "inputSchema", in);
	if (out)
		cJSON_AddItemToObject(d, "outputSchema", out);
	a = cJSON_AddObjectToObject(d, "annotations");
	if (a) {
		cJSON_AddBoolToObject(a, "readOnlyHint", read_only);
		cJSON_AddBoolToObject(a, "destructiveHint", destructive);
		cJSON_AddBoolToObject(a, "openWorldHint", 0);
	}
	return d;
}

/* An output schema fit for an MCP Tool: the result schema, an object at its root. */
static cJSON *output_schema(const cJSON *result)
{
	cJSON *s = cJSON_Duplicate(result, 1);

	if (s) {
		/* the default dialect of MCP is 2020-12, the one the schema names; its $id is a
		 * name, not a place to fetch */
		cJSON_DeleteItemFromObjectCaseSensitive(s, "$id");
		cJSON_DeleteItemFromObjectCaseSensitive(s, "$schema");
	}
	return s;
}

static int add_tool(struct box_mcp_config *c, struct box_mcp_tool *t, struct box_err *err)
{
	struct box_mcp_tool *n = realloc(c->tools, (c->ntools + 1) * sizeof(*n));

	if (!n) {
		cJSON_Delete(t->def);
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	}
	c->tools = n;
	t->name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t->def, "name"));
	t->input_schema = cJSON_GetObjectItemCaseSensitive(t->def, "inputSchema");
	c->tools[c->ntools++] = *t;
	return 0;
}

/* What `BINARY --describe` prints, run with the policy passed through. */
static cJSON *describe(const struct box_mcp_config *c, const char *binary, struct box_err *err)
{
	const char *argv[] = { binary, "--describe", NULL };
	struct box_mcp_env env;
	struct box_proc_opts o = { 0 };
	struct box_proc_result r = { 0 };
	cJSON *d = NULL;

	if (box_mcp_env_init(&env, c->policy, err) < 0)
		return NULL;
	o.argv = argv;
	o.envp = env.v;
	o.timeout_ms = 10000;
	if (box_proc_run(&o, &r, err) == 0) {
		if (r.exited && r.exit_code == 0)
			d = box_json_parse(r.out.data ? r.out.data : "", r.out.len, err);
		else
			box_err_set(err, BOX_E_IO, "%s --describe failed: %s", binary, r.err_tail);
		if (d && !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(d, "input_schema"))) {
			box_err_set(err, BOX_E_IO, "%s --describe printed no input_schema", binary);
			cJSON_Delete(d);
			d = NULL;
		}
	}
	box_proc_result_release(&r);
	box_mcp_env_release(&env);
	return d;
}

static int add_builtins(struct box_mcp_config *c, const int *grant, struct box_err *err)
{
	cJSON *run = NULL, *sb = NULL;
	size_t i;
	int r = 0;

	for (i = 0; i < NBUILTINS && r == 0; i++) {
		const struct builtin *b = &builtins[i];
		cJSON **d = b->kind == BOX_MCP_RUN ? &run : &sb;
		struct box_mcp_tool t = { 0 };

		if (!grant[i])
			continue;
		if (!*d && !(*d = describe(c, b->kind == BOX_MCP_RUN ? c->box_run : c->box_sandbox,
					   err))) {
			r = -1;
			break;
		}
		t.kind = b->kind;
		t.op = b->op;
		t.streams = b->streams;
		t.def = tool_def(b->name, b->description,
				 input_schema(b, cJSON_GetObjectItemCaseSensitive(*d, "input_schema")),
				 output_schema(cJSON_GetObjectItemCaseSensitive(*d, "output_schema")),
				 b->read_only, b->destructive);
		if (!t.def)
			r = box_err_set(err, BOX_E_INTERNAL, "out of memory");
		else
			r = add_tool(c, &t, err);
	}
	cJSON_Delete(run);
	cJSON_Delete(sb);
	return r;
}

static int add_operator_tools(struct box_mcp_config *c, const char *manifest,
			      struct box_err *err)
{
	size_t i;

	c->toolset = box_tools_load(manifest, err);
	if (!c->toolset)
		return -1;
	for (i = 0; i < c->toolset->n; i++) {
		const struct box_tool *bt = &c->toolset->tools[i];
		struct box_mcp_tool t = { 0 };

		/* box-mcp cannot see a person approve a call: such tools stay with box-tool */
		if (bt->requires_approval)
			continue;
		if (box_mcp_tool_find(c, bt->name)) {
			box_err_set(err, BOX_E_CONFLICT, "operator tool %s has the name of a tool of "
				    "box-mcp", bt->name);
			return -1;
		}
		t.kind = BOX_MCP_OPERATOR;
		t.tool = bt;
		t.def = tool_def(bt->name, bt->description, cJSON_Duplicate(bt->input_schema, 1),
				 bt->output_schema ? output_schema(bt->output_schema) : NULL,
				 0, bt->destructive);
		if (!t.def)
			return box_err_set(err, BOX_E_INTERNAL, "out of memory");
		if (add_tool(c, &t, err) < 0)
			return -1;
	}
	return 0;
}

int box_mcp_config_load(struct box_mcp_config *c, const char *policy_path, const char *box_run,
			const char *box_sandbox, struct box_err *err)
{
	int grant[NBUILTINS];
	char *manifest = NULL;
	size_t i;
	int r = -1;

	memset(c, 0, sizeof(*c));
	memcpy(c->prefix, "mcp-", 5);
	c->max_message_bytes = BOX_MCP_DEFAULT_MESSAGE_MAX;
	c->max_output_bytes = BOX_MCP_DEFAULT_OUTPUT_MAX;
	c->max_concurrent = BOX_MCP_DEFAULT_CONCURRENT;
	for (i = 0; i < NBUILTINS; i++)
		grant[i] = builtins[i].granted;
	if (!policy_path || !policy_path[0])
		policy_path = getenv("BOX_POLICY");
	if (policy_path && policy_path[0]) {
		c->policy = realpath(policy_path, NULL);
		if (!c->policy) {
			box_err_set(err, errno == ENOENT ? BOX_E_NOT_FOUND : BOX_E_IO,
				    "policy %.200s: %s", policy_path, strerror(errno));
			box_err_path(err, policy_path);
			return -1;
		}
	}
	c->box_run = strdup(box_run);
	c->box_sandbox = strdup(box_sandbox);
	if (!c->box_run || !c->box_sandbox) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	if (c->policy && read_policy(c, grant, &manifest, err) < 0)
		goto out;
	if (add_builtins(c, grant, err) < 0)
		goto out;
	if (manifest && add_operator_tools(c, manifest, err) < 0)
		goto out;
	r = 0;
out:
	free(manifest);
	if (r < 0)
		box_mcp_config_release(c);
	return r;
}

void box_mcp_config_release(struct box_mcp_config *c)
{
	size_t i;

	for (i = 0; i < c->ntools; i++)
		cJSON_Delete(c->tools[i].def);
	free(c->tools);
	box_tools_free(c->toolset);
	free(c->policy);
	free(c->box_run);
	free(c->box_sandbox);
	memset(c, 0, sizeof(*c));
}

const struct box_mcp_tool *box_mcp_tool_find(const struct box_mcp_config *c, const char *name)
{
	size_t i;

	for (i = 0; name && i < c->ntools; i++)
		if (strcmp(c->tools[i].name, name) == 0)
			return &c->tools[i];
	return NULL;
}

cJSON *box_mcp_tools_list(const struct box_mcp_config *c)
{
	cJSON *a = cJSON_CreateArray();
	size_t i;

	for (i = 0; a && i < c->ntools; i++) {
		cJSON *d = cJSON_Duplicate(c->tools[i].def, 1);

		if (d)
			box_json_exact(d);
		if (!d || !cJSON_AddItemToArray(a, d)) {
			cJSON_Delete(d);
			cJSON_Delete(a);
			return NULL;
		}
	}
	return a;
}

int box_mcp_call_command(const struct box_mcp_config *c, const struct box_mcp_tool *t,
			 const cJSON *args, const char *session, int events, char ***argv,
			 cJSON **req, struct box_err *err)
{
	char **v = NULL;
	int n = 0;

	*argv = NULL;
	*req = cJSON_Duplicate(args, 1);
	if (!*req)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	if (t->kind == BOX_MCP_OPERATOR)
		return 0;
	v = calloc(6, sizeof(*v));
	if (!v)
		goto oom;
	if (t->kind == BOX_MCP_RUN) {
		v[n++] = c->box_run;
		v[n++] = (char *)"--json";
	} else {
		v[n++] = c->box_sandbox;
		v[n++] = (char *)"--json";
		/* the session is the operator's: the command line binds it, over any request */
		v[n++] = (char *)"--session";
		v[n++] = (char *)session;
		if (!cJSON_AddStringToObject(*req, "op", t->op))
			goto oom;
	}
	if (events && t->streams && !cJSON_AddTrueToObject(*req, "events"))
		goto oom;
	*argv = v;
	return 0;
oom:
	free(v);
	cJSON_Delete(*req);
	*req = NULL;
	return box_err_set(err, BOX_E_INTERNAL, "out of memory");
}

cJSON *box_mcp_tool_result(const cJSON *structured, int is_error)
{
	cJSON *r = cJSON_CreateObject(), *sc = cJSON_Duplicate(structured, 1), *content, *text;
	char *s = NULL;

	if (sc) {
		cJSON_DeleteItemFromObjectCaseSensitive(sc, "event");
		box_json_exact(sc);
		s = cJSON_PrintUnformatted(sc);
	}
	content = r ? cJSON_AddArrayToObject(r, "content") : NULL;
	text = cJSON_CreateObject();
	if (!s || !content || !text || !cJSON_AddItemToArray(content, text)) {
		free(s);
		cJSON_Delete(text);
		cJSON_Delete(sc);
		cJSON_Delete(r);
		return NULL;
	}
	cJSON_AddStringToObject(text, "type", "text");
	cJSON_AddStringToObject(text, "text", s);
	free(s);
	cJSON_AddItemToObject(r, "structuredContent", sc);
	cJSON_AddBoolToObject(r, "isError", is_error);
	return r;
}

cJSON *box_mcp_call_result(const cJSON *result, const struct box_err *err)
{
	cJSON *e = result ? NULL : box_err_result(err), *r;
	const cJSON *sc = result ? result : e;

	r = sc ? box_mcp_tool_result(sc, !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sc, "ok")))
	       : NULL;
	cJSON_Delete(e);
	return r;
}

int box_mcp_session_new(const char *prefix, char *out, size_t n, struct box_err *err)
{
	unsigned char r[8];
	size_t i, len = strlen(prefix);

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return box_err_sys(err, "getrandom");
	if (len + 2 * sizeof(r) + 1 > n)
		return box_err_set(err, BOX_E_INTERNAL, "session id too long");
	memcpy(out, prefix, len);
	for (i = 0; i < sizeof(r); i++)
		box_fmt(out + len + 2 * i, 3, "%02x", r[i]);
	return 0;
}

int box_mcp_find_binary(const char *name, char *out, size_t n, struct box_err *err)
{
	const char *self = box_libexec_self_dir();

	if (self[0]) {
		box_fmt(out, n, "%s/%s", self, name);
		if (box_libexec_is_program(out))
			return 0;
	}
	box_fmt(out, n, "%s/%s", box_libexec_bindir(), name);
	if (box_libexec_is_program(out))
		return 0;
	return box_err_set(err, BOX_E_NOT_FOUND, "%s not found next to box-mcp nor in %s", name,
			   box_libexec_bindir());
}
