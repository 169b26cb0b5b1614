#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "provider.h"
#include "base64.h"
#include "buf.h"
#include "json.h"
#include "proc.h"
#include "sbprov.h"
#include "sbstate.h"
#include "utf8.h"
#include "banned.h"

#define DEFAULT_TIMEOUT_MS 30000

static const char *const ops[] = {
	"create", "resume", "pause", "delete", "exec", "read_file", "write_file", "checkpoint",
	"status",
};

int box_provider_valid_name(const char *name)
{
	return box_sbstate_valid_provider(name);
}

int box_provider_valid_op(const char *op)
{
	size_t i;

	for (i = 0; op && i < sizeof(ops) / sizeof(ops[0]); i++)
		if (strcmp(op, ops[i]) == 0)
			return 1;
	return 0;
}

static int is_exec_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int box_provider_find(const char *name, const char *libexec_dir, char *out, size_t outsz,
		      struct box_err *err)
{
	const char *path, *p;
	int n, i;

	if (!box_provider_valid_name(name))
		return box_err_set(err, BOX_E_INVALID, "invalid provider name");
	if (libexec_dir && libexec_dir[0]) {
		n = snprintf(out, outsz, "%s/box-provider-%s", libexec_dir, name);
		if (n < 0 || (size_t)n >= outsz)
			return box_err_set(err, BOX_E_INVALID, "provider path too long");
		if (is_exec_file(out))
			return 0;
	}
	path = getenv("PATH");
	if (!path || !path[0])
		path = BOX_PROVIDER_DEFAULT_PATH;
	/* PATH is the host's own; still bounded, and relative entries are skipped since they
	 * would resolve against whatever the cwd happens to be */
	for (p = path, i = 0; *p && i < 256; i++) {
		const char *end = strchr(p, ':');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len > 0 && p[0] == '/') {
			n = snprintf(out, outsz, "%.*s/box-provider-%s", (int)len, p, name);
			if (n > 0 && (size_t)n < outsz && is_exec_file(out))
				return 0;
		}
		if (!end)
			break;
		p = end + 1;
	}
	if (outsz)
		out[0] = 0;
	return box_err_set(err, BOX_E_NOT_FOUND, "no provider %s (box-provider-%s)", name, name);
}

static cJSON *interpret(const char *name, const struct box_proc_result *r, struct box_err *err)
{
	const char *sep = r->err_tail[0] ? ": " : "";
	struct box_err perr;
	cJSON *obj = NULL;
	const cJSON *okv;

	box_err_init(&perr);
	if (r->out.len)
		obj = box_json_parse(r->out.data, r->out.len, &perr);
	okv = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, "ok") : NULL;
	if (cJSON_IsFalse(okv)) {
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(obj, "error");
		struct box_err typed;

		if (box_err_from_json(&typed, e) == 0 && typed.code != BOX_OK) {
			*err = typed;
		} else {
			box_err_set(err, BOX_E_PROVIDER, "provider %s failed without a valid error object",
				    name);
		}
		cJSON_Delete(obj);
		return NULL;
	}
	if (!r->exited || r->exit_code != 0) {
		if (!r->exited)
			box_err_set(err, BOX_E_PROVIDER, "provider %s killed by signal %d%s%s", name,
				    r->signal, sep, r->err_tail);
		else
			box_err_set(err, BOX_E_PROVIDER, "provider %s exited with status %d%s%s", name,
				    r->exit_code, sep, r->err_tail);
		cJSON_Delete(obj);
		return NULL;
	}
	if (!cJSON_IsObject(obj)) {
		box_err_set(err, BOX_E_PROVIDER, "provider %s did not answer a JSON object%s%s", name,
			    sep, r->err_tail);
		cJSON_Delete(obj);
		return NULL;
	}
	return obj;
}

static int check_op(const cJSON *op, struct box_err *err)
{
	const cJSON *v;

	if (!cJSON_IsObject(op))
		return box_err_set(err, BOX_E_INVALID, "provider operation must be an object");
	v = cJSON_GetObjectItemCaseSensitive(op, "op");
	if (!cJSON_IsString(v) || !box_provider_valid_op(v->valuestring)) {
		box_err_set(err, BOX_E_INVALID, "unknown provider operation");
		box_err_path(err, "$.op");
		return -1;
	}
	v = cJSON_GetObjectItemCaseSensitive(op, "session");
	if (!cJSON_IsString(v) || !box_sbstate_valid_id(v->valuestring)) {
		box_err_set(err, BOX_E_INVALID, "invalid session id in provider operation");
		box_err_path(err, "$.session");
		return -1;
	}
	return 0;
}

cJSON *box_provider_run(const char *name, const cJSON *op, const struct box_provider_opts *o,
			struct box_err *err)
{
	struct box_proc_env env = { .n = 0 };
	struct box_proc_result r = { .out = BOX_BUF_INIT(0) };
	struct box_proc_opts po = { 0 };
	char path[PATH_MAX];
	const char *argv[2] = { path, NULL };
	cJSON *res = NULL;
	char *line = NULL;
	size_t linelen;

	if (check_op(op, err) || box_provider_find(name, o->libexec_dir, path, sizeof(path), err))
		return NULL;
	if (box_proc_env_build(&env, o->env, "provider", err))
		goto out;
	if (!(line = box_json_line(op, &linelen))) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	po.argv = argv;
	po.envp = env.v;
	po.in = line;
	po.inlen = linelen;
	po.timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
	po.max_stdout = o->max_stdout ? o->max_stdout : BOX_PROVIDER_STDOUT_MAX;
	po.max_stderr = o->max_stderr ? o->max_stderr : BOX_PROVIDER_STDERR_MAX;
	if (box_proc_run(&po, &r, err))
		goto out;
	if (r.timed_out)
		box_err_limit(err, BOX_E_TIMEOUT, "timeout_ms", po.timeout_ms, "ms",
			      "provider %s did not answer within %d ms", name, po.timeout_ms);
	else if (r.stdout_overflow)
		box_err_limit(err, BOX_E_PROVIDER, "provider_stdout_bytes", (int64_t)po.max_stdout,
			      "bytes", "provider %s wrote more than %zu bytes", name, po.max_stdout);
	else
		res = interpret(name, &r, err);
out:
	free(line);
	box_proc_result_release(&r);
	box_proc_env_release(&env);
	return res;
}

cJSON *box_provider_call(const char *name, const char *libexec_dir, const cJSON *op,
			 int timeout_ms, struct box_err *err)
{
	struct box_provider_opts o = {
		.libexec_dir = libexec_dir,
		.timeout_ms = timeout_ms,
	};

	return box_provider_run(name, op, &o, err);
}

/* ---- the plug-in provider of box-sandbox's sessions (struct box_sbprov) ---- */

/* One operation on the session's instance; extra (taken) holds its members. */
static cJSON *plugin_op(struct box_sbprov_session *s, const char *op, cJSON *extra,
			int timeout_ms, struct box_err *err)
{
	cJSON *o = extra ? extra : cJSON_CreateObject(), *res;

	cJSON_AddStringToObject(o, "op", op);
	cJSON_AddStringToObject(o, "session", s->id);
	cJSON_AddItemToObject(o, "provider_data",
			      cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(s->rec->provider_data,
									       "remote"), 1));
	res = box_provider_call(s->rec->provider, s->libexec, o, timeout_ms, err);
	cJSON_Delete(o);
	return res;
}

static int plugin_simple(struct box_sbprov_session *s, const char *op, struct box_err *err)
{
	cJSON *res = plugin_op(s, op, NULL, 0, err);

	cJSON_Delete(res);
	return res ? 0 : -1;
}

/* A plug-in's instance is the provider's: box keeps no files of its own for it. */
static int plugin_configure(const cJSON *req, const char *provider, const char *libexec,
			    cJSON *config, struct box_err *err)
{
	char path[PATH_MAX];

	(void)config;
	if (box_provider_find(provider, libexec, path, sizeof(path), err) < 0)
		return -1;
	if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(req, "mount")) ||
	    cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(req, "input")))
		return box_err_set(err, BOX_E_UNSUPPORTED, "--mount and --input are local "
				   "provider features");
	if (box_json_get_str(req, "tools", NULL))
		return box_err_set(err, BOX_E_UNSUPPORTED, "--tools is a local provider feature");
	return 0;
}

static int plugin_start(struct box_sbprov_session *s, const cJSON *create_req,
			struct box_err *err)
{
	cJSON *o = cJSON_CreateObject(), *res, *remote, *env = cJSON_CreateArray();
	size_t k;

	(void)create_req;
	for (k = 0; s->env && s->env[k]; k++)
		cJSON_AddItemToArray(env, cJSON_CreateString(s->env[k]));
	cJSON_AddItemToObject(o, "limits", cJSON_Duplicate(s->rec->limits, 1));
	cJSON_AddItemToObject(o, "env", env);
	res = plugin_op(s, "create", o, 0, err);
	if (!res)
		return -1;
	remote = cJSON_DetachItemFromObjectCaseSensitive(res, "provider_data");
	cJSON_Delete(res);
	cJSON_DeleteItemFromObjectCaseSensitive(s->rec->provider_data, "remote");
	cJSON_AddItemToObject(s->rec->provider_data, "remote", remote ? remote :
			      cJSON_CreateObject());
	return 0;
}

static int plugin_observe(struct box_sbprov_session *s, struct box_err *err)
{
	cJSON *res = plugin_op(s, "status", NULL, 0, err);
	const char *st;
	int obs;

	if (!res)
		return -1;
	st = box_json_get_str(res, "state", "");
	obs = strcmp(st, "running") == 0 ? BOX_SB_OBS_RUNNING :
	      strcmp(st, "paused") == 0 ? BOX_SB_OBS_PAUSED : BOX_SB_OBS_ABSENT;
	cJSON_Delete(res);
	return obs;
}

static int plugin_pause(struct box_sbprov_session *s, struct box_err *err)
{
	return plugin_simple(s, "pause", err);
}

static int plugin_resume(struct box_sbprov_session *s, struct box_err *err)
{
	return plugin_simple(s, "resume", err);
}

static int plugin_stop(struct box_sbprov_session *s, struct box_err *err)
{
	return plugin_simple(s, "delete", err);
}

/* A streamed stdin for a plug-in, whose protocol carries stdin as text in the exec request:
 * at most BOX_PROVIDER_STDIN_MAX bytes of UTF-8 become its "stdin" member; more is
 * limit_exceeded, bytes that are not UTF-8 text are unsupported; never silently dropped. */
static int plugin_stdin(int fd, cJSON *o, struct box_err *err)
{
	struct box_buf b;
	int rc = -1;

	box_buf_init(&b, BOX_PROVIDER_STDIN_MAX);
	if (box_buf_read_fd(&b, fd, err) < 0) {
		if (err->code == BOX_E_LIMIT)
			box_err_set(err, BOX_E_LIMIT, "stdin is over %d MiB: a plug-in provider takes "
				    "stdin whole, in its exec request", (int)(BOX_PROVIDER_STDIN_MAX >> 20));
		goto out;
	}
	if (box_buf_append(&b, "", 1, err) < 0)
		goto out;
	if (memchr(b.data, 0, b.len - 1) || !box_utf8_valid(b.data, b.len - 1)) {
		box_err_set(err, BOX_E_UNSUPPORTED, "stdin is not UTF-8 text: a plug-in provider "
			    "takes stdin as text (use the local provider for bytes)");
		goto out;
	}
	/* an empty stream (/dev/null, say) is no stdin, as without one */
	if (b.len > 1 && !cJSON_AddStringToObject(o, "stdin", b.data)) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	rc = 0;
out:
	box_buf_release(&b);
	return rc;
}

static int plugin_exec(struct box_sbprov_session *s, const struct box_sbexec *x,
		       struct box_sbexec_result *r, struct box_err *err)
{
	cJSON *o = cJSON_CreateObject(), *res;
	size_t k;
	int rc;

	cJSON_AddItemToObject(o, "argv", cJSON_CreateArray());
	for (k = 0; x->argv[k]; k++)
		cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(o, "argv"),
				     cJSON_CreateString(x->argv[k]));
	cJSON_AddItemToObject(o, "env", cJSON_CreateArray());
	for (k = 0; x->env && x->env[k]; k++)
		cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(o, "env"),
				     cJSON_CreateString(x->env[k]));
	cJSON_AddStringToObject(o, "cwd", x->cwd ? x->cwd : "/workspace");
	if (x->stdin_data)
		cJSON_AddStringToObject(o, "stdin", x->stdin_data);
	else if (x->stdin_stream && plugin_stdin(x->stdin_fd, o, err) < 0) {
		cJSON_Delete(o);
		r->ran = 0;
		return -1;
	}
	box_json_add_int64(o, "timeout_ms", x->timeout_ms);
	box_json_add_int64(o, "max_output_bytes", x->max_output_bytes);
	res = plugin_op(s, "exec", o, x->timeout_ms + 30000, err);
	/* once asked, the plug-in may have run it whatever came back: box cannot tell */
	r->ran = 1;
	if (!res)
		return -1;
	rc = box_sbexec_from_json(r, res, err);
	r->ran = 1;
	cJSON_Delete(res);
	return rc;
}

/* read and write: read_file / write_file with the bytes in base64 */
static cJSON *plugin_file(struct box_sbprov_session *s, const char *path, cJSON *o,
			  int writing, struct box_err *err)
{
	cJSON *res;

	cJSON_AddStringToObject(o, "path", path);
	res = plugin_op(s, writing ? "write_file" : "read_file", o, 0, err);
	if (res && !cJSON_GetObjectItemCaseSensitive(res, "path"))
		cJSON_AddStringToObject(res, "path", path);
	return res;
}

static cJSON *plugin_read(struct box_sbprov_session *s, const char *path, struct box_err *err)
{
	return plugin_file(s, path, cJSON_CreateObject(), 0, err);
}

static cJSON *plugin_write(struct box_sbprov_session *s, const char *path, const void *data,
			   size_t n, struct box_err *err)
{
	struct box_buf enc;
	cJSON *o;

	box_buf_init(&enc, box_base64_encoded_len(n) + 1);
	if (box_base64_encode(data, n, &enc, err) < 0 || box_buf_append(&enc, "", 1, err) < 0) {
		box_buf_release(&enc);
		return NULL;
	}
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "content_base64", enc.data);
	box_buf_release(&enc);
	return plugin_file(s, path, o, 1, err);
}

static cJSON *plugin_checkpoint(struct box_sbprov_session *s, struct box_err *err)
{
	return plugin_op(s, "checkpoint", NULL, 0, err);
}

const struct box_sbprov box_provider_plugin = {
	.name = NULL,
	.keeps_state = 0,
	.retry_gone = 0,
	.tools = 0,
	.configure = plugin_configure,
	.start = plugin_start,
	.observe = plugin_observe,
	.pause = plugin_pause,
	.resume = plugin_resume,
	.stop = plugin_stop,
	.exec = plugin_exec,
	.read = plugin_read,
	.write = plugin_write,
	.list = NULL,
	.checkpoint = plugin_checkpoint,
	.restore = NULL,
	.status = NULL,
};
