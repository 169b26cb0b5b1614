#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "provider.h"
#include "json.h"
#include "proc.h"
#include "sbstate.h"
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

int box_provider_env_is_secret(const char *name)
{
	return box_proc_env_is_secret(name);
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
