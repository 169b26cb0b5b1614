#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox.h"
#include "libexec.h"
#include "atomic.h"
#include "base64.h"
#include "buf.h"
#include "confine.h"
#include "nsbox.h"
#include "provider.h"
#include "sbcopy.h"
#include "sbstate.h"
#include "tools.h"
#include "toolsrv.h"
#include "utf8.h"
#include "ws.h"
#include "banned.h"

#define HELPER_OUT_MAX ((size_t)16 << 20)
#define HELPER_TIMEOUT_S 600
#define LIST_MAX 1000
#define GUEST_PATH "/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin"

const struct box_field box_sandbox_fields[] = {
	{ "op", BOX_F_STRING, 0, 16, 0, "the operation (the first word: create exec read write ls "
	  "pause resume status snapshot restore delete list)", "OP", 0 },
	{ "session", BOX_F_STRING, 0, BOX_SBSTATE_ID_MAX, 's', "the session id (create makes one when "
	  "absent)", "ID", 0 },
	{ "provider", BOX_F_STRING, 0, BOX_SBSTATE_PROVIDER_MAX, 0, "provider of a new session: local "
	  "(default) or NAME for box-provider-NAME", "NAME", 0 },
	{ "init", BOX_F_STRINGS, 0, BOX_SBSTATE_INIT_MAX, 0, "shell command run once when the "
	  "sandbox is first made ready (repeatable)", "CMD", 0 },
	{ "idle_pause_after_seconds", BOX_F_INT, 0, 7 * 86400, 0, "pause the sandbox after this "
	  "many idle seconds (0: never; default 180)", "SECS", 0 },
	{ "mount", BOX_F_STRINGS, 0, BOX_NSBOX_MOUNTS_MAX, 0, "bind HOST_PATH at GUEST_PATH "
	  "(repeatable; :ro for read-only)", "HOST:GUEST[:ro]", 0 },
	{ "input", BOX_F_STRINGS, 0, 64, 0, "copy a host file or directory into /input "
	  "(repeatable)", "PATH", 0 },
	{ "memory", BOX_F_INT, 1 << 20, INT64_MAX, 0, "memory of the sandbox in bytes "
	  "(default 512 MiB)", "BYTES", 0 },
	{ "pids", BOX_F_INT, 1, 1 << 22, 0, "processes of the sandbox (default 256)", "N", 0 },
	{ "cpu_ms", BOX_F_INT, 1, INT64_MAX, 0, "CPU time of one exec in milliseconds", "MS", 0 },
	{ "timeout_ms", BOX_F_INT, 1, 86400000, 0, "wall time of one exec (default 60000)", "MS", 0 },
	{ "max_output_bytes", BOX_F_INT, 0, (int64_t)64 << 20, 0, "bytes of stdout and of stderr "
	  "kept in the result (default 1 MiB)", "BYTES", 0 },
	{ "disk_bytes", BOX_F_INT, 1 << 20, INT64_MAX, 0, "bytes of /workspace + /output, and the "
	  "size of /tmp (default 1 GiB)", "BYTES", 0 },
	{ "env", BOX_F_STRINGS, 0, BOX_SANDBOX_ENV_MAX, 'e', "pass NAME=VALUE, or the host's NAME, "
	  "to the guest (repeatable)", "NAME[=VALUE]", 0 },
	{ "argv", BOX_F_STRINGS, 0, 4096, 0, "exec: the command and its arguments (after --)",
	  "ARG", 0 },
	{ "command", BOX_F_STRING, 0, 1 << 20, 'c', "exec: a shell command run by /bin/sh -c",
	  "STRING", 0 },
	{ "cwd", BOX_F_STRING, 0, 4096, 0, "exec: working directory in the guest (default "
	  "/workspace)", "PATH", 0 },
	{ "stdin", BOX_F_STRING, 0, BOX_SANDBOX_STDIN_MAX, 0, "exec: text given to the command's "
	  "stdin", "TEXT", 0 },
	{ "events", BOX_F_BOOL, 0, 0, 0, "exec: stream stdout and stderr as NDJSON events",
	  NULL, 0 },
	{ "path", BOX_F_STRING, 0, 4096, 0, "read, write, ls: a path under /workspace, /input or "
	  "/output", "PATH", 0 },
	{ "content", BOX_F_STRING, 0, BOX_SANDBOX_READ_MAX, 0, "write: the text to write (default: "
	  "stdin)", "TEXT", 0 },
	{ "content_base64", BOX_F_STRING, 0, BOX_SANDBOX_READ_MAX * 2, 0, "write: the bytes to "
	  "write, in base64", "B64", 0 },
	{ "digest", BOX_F_STRING, 0, 80, 0, "restore: the snapshot's digest", "sha256:HEX", 0 },
	{ "from", BOX_F_STRING, 0, BOX_SBSTATE_ID_MAX, 0, "restore: take the snapshot from this "
	  "session", "ID", 0 },
	{ "tools", BOX_F_STRING, 0, 4096, 0, "create: grant the tools of this manifest or box.lock "
	  "to box-tool inside the sandbox", "FILE", 0 },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0 },
};

struct sb {
	char dir[PATH_MAX];     /* $BOX_STATE_DIR/sandboxes */
	char sdir[PATH_MAX];    /* .../<id> */
	char id[BOX_SBSTATE_ID_MAX + 1];
	const cJSON *req;
	const struct box_sandbox_io *io;
	struct box_sbstate rec;
	int have_rec;
	int lockfd;
	int created, resumed, replaced, init_ran;
};

/* ---- small helpers ---- */

static int is_local(const char *provider)
{
	return strcmp(provider, "local") == 0;
}

static const char *libexec_dir(void)
{
	const char *d = getenv("BOX_LIBEXEC_DIR");

	return d && *d ? d : box_libexec_pkgdir();
}

static const cJSON *pdata(const struct sb *s, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(s->rec.provider_data, key);
}

static int64_t lim(const struct sb *s, const char *key, int64_t def)
{
	return box_json_int_value(cJSON_GetObjectItemCaseSensitive(s->rec.limits, key), def);
}

static void gen_id(char out[BOX_SBSTATE_ID_MAX + 1])
{
	unsigned char r[6];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	size_t i;

	if (fd < 0 || read(fd, r, sizeof(r)) != (ssize_t)sizeof(r)) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		for (i = 0; i < sizeof(r); i++)
			r[i] = (unsigned char)((ts.tv_nsec >> (i * 5)) ^ getpid());
	}
	if (fd >= 0)
		close(fd);
	box_fmt(out, BOX_SBSTATE_ID_MAX + 1, "sb-%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3],
		 r[4], r[5]);
}

/* The guest environment of a session: the synthetic base, then the session's --env, then the
 * exec's. Credential-shaped names are refused, whoever asks. */
static int check_env(const cJSON *env, struct box_err *err)
{
	const cJSON *e;
	int i = 0;

	cJSON_ArrayForEach(e, env) {
		const char *s = e->valuestring, *eq = strchr(s, '=');
		size_t n = eq ? (size_t)(eq - s) : strlen(s), k;
		char name[256], path[32];

		box_fmt(path, sizeof(path), "$.env[%d]", i++);
		if (n == 0 || n >= sizeof(name)) {
			box_err_set(err, BOX_E_INVALID, "bad variable name in --env '%.64s'", s);
			box_err_path(err, path);
			return -1;
		}
		for (k = 0; k < n; k++)
			if (!(s[k] == '_' || (s[k] >= 'A' && s[k] <= 'Z') || (s[k] >= 'a' && s[k] <= 'z') ||
			      (k > 0 && s[k] >= '0' && s[k] <= '9'))) {
				box_err_set(err, BOX_E_INVALID, "bad variable name in --env '%.64s'", s);
				box_err_path(err, path);
				return -1;
			}
		memcpy(name, s, n);
		name[n] = 0;
		if (box_provider_env_is_secret(name)) {
			box_err_set(err, BOX_E_POLICY, "%s looks like a credential: box never passes "
				    "credentials into a sandbox", name);
			box_err_path(err, path);
			return -1;
		}
	}
	return 0;
}

/* The resolved "NAME=VALUE" strings of env (host values looked up now) as a JSON array. */
static cJSON *resolve_env(const cJSON *env)
{
	cJSON *out = cJSON_CreateArray();
	const cJSON *e;

	cJSON_ArrayForEach(e, env) {
		char buf[8192];
		const char *s = e->valuestring;

		if (!strchr(s, '=')) {
			const char *v = getenv(s);

			if (!v)
				continue;
			box_fmt(buf, sizeof(buf), "%s=%s", s, v);
			s = buf;
		}
		cJSON_AddItemToArray(out, cJSON_CreateString(s));
	}
	return out;
}

static void env_set(char **envp, size_t *n, size_t max, const char *kv)
{
	size_t i, klen = strcspn(kv, "=");

	for (i = 0; i < *n; i++)
		if (strncmp(envp[i], kv, klen) == 0 && envp[i][klen] == '=') {
			envp[i] = (char *)kv;
			return;
		}
	if (*n < max)
		envp[(*n)++] = (char *)kv;
}

/* ---- the plug-in helper box-sbfiles ---- */

static cJSON *run_sbfiles(const char *const *args, struct box_err *err)
{
	char path[PATH_MAX];
	const char *argv[8];
	int out[2], status, i;
	pid_t pid;
	struct box_buf b;
	cJSON *res;

	if (box_libexec_find("box-sbfiles", path, sizeof(path), err) < 0)
		return NULL;
	argv[0] = "box-sbfiles";
	for (i = 0; args[i] && i < 6; i++)
		argv[i + 1] = args[i];
	argv[i + 1] = NULL;
	if (pipe2(out, O_CLOEXEC) < 0)
		return box_err_sys(err, "pipe"), NULL;
	pid = fork();
	if (pid < 0) {
		close(out[0]);
		close(out[1]);
		return box_err_sys(err, "fork"), NULL;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR);

		dup2(devnull, 0);
		dup2(out[1], 1);
		alarm(HELPER_TIMEOUT_S);
		execv(path, (char *const *)argv);
		_exit(127);
	}
	close(out[1]);
	box_buf_init(&b, HELPER_OUT_MAX);
	i = box_buf_read_fd(&b, out[0], err);
	close(out[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (i < 0) {
		box_buf_release(&b);
		return NULL;
	}
	res = box_json_parse(b.data ? b.data : "", b.len, err);
	box_buf_release(&b);
	if (!res)
		return box_err_set(err, BOX_E_INTERNAL, "box-sbfiles printed no JSON"), NULL;
	if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(res, "ok"))) {
		box_err_from_json(err, cJSON_GetObjectItemCaseSensitive(res, "error"));
		cJSON_Delete(res);
		return NULL;
	}
	return res;
}

/* ---- the instance, whichever the provider ---- */

static void inst_of(const struct sb *s, struct box_nsbox_inst *i)
{
	const cJSON *h = pdata(s, "holder");
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(h, "pid");
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(h, "start");
	int cg = box_cg_mode_from_name(box_json_get_str(h, "cgroup", "none"));

	i->pid = (pid_t)box_json_int_value(pid, 0);
	i->start = box_json_int_value(st, -1);
	i->cg = cg < 0 ? BOX_CG_NONE : (enum box_cg_mode)cg;
}

struct mounts {
	struct box_nsbox_mount m[BOX_NSBOX_MOUNTS_MAX];
	char *buf[BOX_NSBOX_MOUNTS_MAX];
	size_t n;
};

static void mounts_release(struct mounts *ms)
{
	size_t k;

	for (k = 0; k < ms->n; k++)
		free(ms->buf[k]);
	ms->n = 0;
}

/* "HOST:GUEST[:ro]" into ms; the host path must exist and be absolute. */
static int parse_mounts(const cJSON *arr, struct mounts *ms, struct box_err *err)
{
	const cJSON *e;
	int idx = 0;

	ms->n = 0;
	cJSON_ArrayForEach(e, arr) {
		char path[32], *s, *g, *ro;
		struct stat st;

		box_fmt(path, sizeof(path), "$.mount[%d]", idx++);
		if (ms->n >= BOX_NSBOX_MOUNTS_MAX) {
			mounts_release(ms);
			return box_err_set(err, BOX_E_INVALID, "too many mounts");
		}
		s = strdup(e->valuestring);
		if (!s)
			return box_err_set(err, BOX_E_INTERNAL, "out of memory");
		ms->buf[ms->n] = s;
		g = strchr(s, ':');
		if (!g || s[0] != '/') {
			free(s);
			mounts_release(ms);
			box_err_set(err, BOX_E_INVALID, "mount '%.200s' is not HOST_PATH:GUEST_PATH[:ro] "
				    "with absolute paths", e->valuestring);
			box_err_path(err, path);
			return -1;
		}
		*g++ = 0;
		ro = strchr(g, ':');
		if (ro) {
			*ro++ = 0;
			if (strcmp(ro, "ro") != 0 && strcmp(ro, "rw") != 0) {
				free(s);
				mounts_release(ms);
				box_err_set(err, BOX_E_INVALID, "mount option must be ro or rw");
				box_err_path(err, path);
				return -1;
			}
		}
		if (box_nsbox_check_guest_path(g, err) < 0) {
			free(s);
			mounts_release(ms);
			box_err_path(err, path);
			return -1;
		}
		if (stat(s, &st) < 0 || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
			box_err_sys(err, "mount source %.200s", s);
			err->code = BOX_E_NOT_FOUND;
			free(s);
			mounts_release(ms);
			box_err_path(err, path);
			return -1;
		}
		ms->m[ms->n].host = s;
		ms->m[ms->n].guest = g;
		ms->m[ms->n].ro = ro && strcmp(ro, "ro") == 0;
		ms->n++;
	}
	return 0;
}

static void config_of(const struct sb *s, struct box_nsbox_config *c, struct mounts *ms);

static int keeper_tick(const void *ctx);
static void keeper_serve(int fd, const void *ctx);

static int local_start(struct sb *s, struct box_err *err)
{
	struct box_nsbox_config c;
	struct box_nsbox_inst i;
	struct mounts ms;
	cJSON *h;

	if (parse_mounts(cJSON_GetObjectItemCaseSensitive(pdata(s, "config"), "mounts"), &ms,
			 err) < 0)
		return -1;
	config_of(s, &c, &ms);
	if (c.tool_bin) {
		char sock[PATH_MAX];

		if (access(c.tool_bin, X_OK) < 0) {
			mounts_release(&ms);
			return box_err_sys(err, "box-tool (%s) cannot be run (set BOX_LIBEXEC_DIR or "
					   "reinstall box)", c.tool_bin);
		}
		box_fmt(sock, sizeof(sock), "%s/run", s->sdir);
		if (mkdir(sock, 0755) < 0 && errno != EEXIST) {
			mounts_release(&ms);
			return box_err_sys(err, "cannot create %s", sock);
		}
		box_fmt(sock, sizeof(sock), "%s/run/tool.sock", s->sdir);
		c.serve_fd = box_toolsrv_listen(sock, err);
		if (c.serve_fd < 0) {
			mounts_release(&ms);
			return -1;
		}
		c.keeper_serve = keeper_serve;
	}
	if (box_nsbox_start(&c, &i, err) < 0) {
		if (c.serve_fd >= 0)
			close(c.serve_fd);
		mounts_release(&ms);
		return -1;
	}
	if (c.serve_fd >= 0)
		close(c.serve_fd);
	mounts_release(&ms);
	h = cJSON_CreateObject();
	box_json_add_int64(h, "pid", i.pid);
	box_json_add_int64(h, "start", i.start);
	cJSON_AddStringToObject(h, "cgroup", box_cg_mode_name(i.cg));
	cJSON_DeleteItemFromObjectCaseSensitive(s->rec.provider_data, "holder");
	cJSON_AddItemToObject(s->rec.provider_data, "holder", h);
	return 0;
}

static cJSON *plugin_op(struct sb *s, const char *op, cJSON *extra, int timeout_ms,
			struct box_err *err)
{
	cJSON *o = extra ? extra : cJSON_CreateObject(), *res;

	cJSON_AddStringToObject(o, "op", op);
	cJSON_AddStringToObject(o, "session", s->id);
	cJSON_AddItemToObject(o, "provider_data",
			      cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(s->rec.provider_data,
									       "remote"), 1));
	res = box_provider_call(s->rec.provider, libexec_dir(), o, timeout_ms, err);
	cJSON_Delete(o);
	return res;
}

static int observe(struct sb *s, struct box_err *err)
{
	cJSON *res;
	const char *st;
	int obs;

	if (is_local(s->rec.provider)) {
		struct box_nsbox_inst i;

		inst_of(s, &i);
		return box_nsbox_observe(&i, s->id);
	}
	res = plugin_op(s, "status", NULL, 0, err);
	if (!res)
		return -1;
	st = box_json_get_str(res, "state", "");
	obs = strcmp(st, "running") == 0 ? BOX_SB_OBS_RUNNING :
	      strcmp(st, "paused") == 0 ? BOX_SB_OBS_PAUSED : BOX_SB_OBS_ABSENT;
	cJSON_Delete(res);
	return obs;
}

static int start(struct sb *s, struct box_err *err)
{
	cJSON *o, *res, *remote;

	if (is_local(s->rec.provider))
		return local_start(s, err);
	o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "limits", cJSON_Duplicate(s->rec.limits, 1));
	cJSON_AddItemToObject(o, "env", resolve_env(cJSON_GetObjectItemCaseSensitive(
						pdata(s, "config"), "env")));
	res = plugin_op(s, "create", o, 0, err);
	if (!res)
		return -1;
	remote = cJSON_DetachItemFromObjectCaseSensitive(res, "provider_data");
	cJSON_Delete(res);
	cJSON_DeleteItemFromObjectCaseSensitive(s->rec.provider_data, "remote");
	cJSON_AddItemToObject(s->rec.provider_data, "remote", remote ? remote :
			      cJSON_CreateObject());
	return 0;
}

static int simple_op(struct sb *s, const char *op, struct box_err *err)
{
	cJSON *res;

	if (is_local(s->rec.provider)) {
		struct box_nsbox_inst i;

		inst_of(s, &i);
		if (strcmp(op, "pause") == 0)
			return box_nsbox_pause(&i, s->id, err);
		if (strcmp(op, "resume") == 0)
			return box_nsbox_resume(&i, s->id, err);
		return box_nsbox_stop(&i, s->id, err);
	}
	res = plugin_op(s, op, NULL, 0, err);
	if (!res)
		return -1;
	cJSON_Delete(res);
	return 0;
}

/* ---- exec ---- */

static void config_of(const struct sb *s, struct box_nsbox_config *c, struct mounts *ms)
{
	static char tool_bin[PATH_MAX];

	memset(c, 0, sizeof(*c));
	c->dir = s->sdir;
	c->id = s->id;
	c->memory = lim(s, "memory", BOX_SANDBOX_DEFAULT_MEMORY);
	c->pids = lim(s, "pids", BOX_SANDBOX_DEFAULT_PIDS);
	c->disk_bytes = lim(s, "disk_bytes", BOX_SANDBOX_DEFAULT_DISK);
	c->mounts = ms ? ms->m : NULL;
	c->nmounts = ms ? ms->n : 0;
	if (box_libexec_find("box-tool", tool_bin, sizeof(tool_bin), &(struct box_err){ 0 }) < 0)
		box_fmt(tool_bin, sizeof(tool_bin), "%s/box-tool", box_libexec_pkgdir());
	c->tool_bin = box_json_get_str(pdata(s, "config"), "tools", NULL) ? tool_bin : NULL;
	c->serve_fd = -1;
	c->keeper_ctx = s;
	if (lim(s, "idle_pause_after_seconds", BOX_SANDBOX_DEFAULT_IDLE) > 0)
		c->keeper_tick = keeper_tick;
}

struct exec_spec {
	cJSON *argv;           /* array of strings */
	const cJSON *env;      /* extra --env of this exec */
	const char *cwd;
	const char *stdin_data;
	int timeout_ms;
	int events;
};

static cJSON *exec_local(struct sb *s, const struct exec_spec *e, struct box_err *err)
{
	struct box_nsbox_config c;
	struct box_nsbox_exec x;
	struct box_nsbox_inst i;
	char **argv = NULL, *envp[BOX_SANDBOX_ENV_MAX * 2 + 16], home[] = "HOME=/workspace";
	char sess[BOX_SBSTATE_ID_MAX + 16];
	size_t n = 0, k = 0;
	cJSON *senv, *xenv, *res = NULL, *v;
	int argc = cJSON_GetArraySize(e->argv);

	senv = resolve_env(cJSON_GetObjectItemCaseSensitive(pdata(s, "config"), "env"));
	xenv = resolve_env(e->env);
	argv = calloc((size_t)argc + 1, sizeof(*argv));
	if (!argv || !senv || !xenv) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(v, e->argv)
		argv[k++] = v->valuestring;
	box_fmt(sess, sizeof(sess), "BOX_SESSION=%s", s->id);
	envp[n++] = "PATH=" GUEST_PATH;
	envp[n++] = home;
	envp[n++] = "LANG=C.UTF-8";
	envp[n++] = "TERM=dumb";
	envp[n++] = "TMPDIR=/tmp";
	envp[n++] = "USER=root";
	envp[n++] = sess;
	cJSON_ArrayForEach(v, senv)
		env_set(envp, &n, sizeof(envp) / sizeof(envp[0]) - 1, v->valuestring);
	cJSON_ArrayForEach(v, xenv)
		env_set(envp, &n, sizeof(envp) / sizeof(envp[0]) - 1, v->valuestring);
	envp[n] = NULL;
	config_of(s, &c, NULL);
	inst_of(s, &i);
	memset(&x, 0, sizeof(x));
	x.argv = argv;
	x.envp = envp;
	x.cwd = e->cwd;
	x.stdin_data = e->stdin_data;
	x.stdin_len = e->stdin_data ? strlen(e->stdin_data) : 0;
	x.timeout_ms = e->timeout_ms;
	x.cpu_ms = lim(s, "cpu_ms", 0);
	x.max_output_bytes = lim(s, "max_output_bytes", BOX_SANDBOX_DEFAULT_OUTPUT);
	if (e->events && s->io) {
		x.on_output = s->io->on_output;
		x.ctx = s->io->ctx;
	}
	res = box_nsbox_exec(&i, &c, &x, err);
out:
	free(argv);
	cJSON_Delete(senv);
	cJSON_Delete(xenv);
	return res;
}

static cJSON *exec_plugin(struct sb *s, const struct exec_spec *e, struct box_err *err)
{
	cJSON *o = cJSON_CreateObject(), *env = cJSON_CreateArray(), *v, *tmp;

	tmp = resolve_env(cJSON_GetObjectItemCaseSensitive(pdata(s, "config"), "env"));
	cJSON_ArrayForEach(v, tmp)
		cJSON_AddItemToArray(env, cJSON_CreateString(v->valuestring));
	cJSON_Delete(tmp);
	tmp = resolve_env(e->env);
	cJSON_ArrayForEach(v, tmp)
		cJSON_AddItemToArray(env, cJSON_CreateString(v->valuestring));
	cJSON_Delete(tmp);
	cJSON_AddItemToObject(o, "argv", cJSON_Duplicate(e->argv, 1));
	cJSON_AddItemToObject(o, "env", env);
	cJSON_AddStringToObject(o, "cwd", e->cwd ? e->cwd : "/workspace");
	if (e->stdin_data)
		cJSON_AddStringToObject(o, "stdin", e->stdin_data);
	box_json_add_int64(o, "timeout_ms", e->timeout_ms);
	box_json_add_int64(o, "max_output_bytes", lim(s, "max_output_bytes",
						       BOX_SANDBOX_DEFAULT_OUTPUT));
	return plugin_op(s, "exec", o, e->timeout_ms + 30000, err);
}

/* Turns an exec result into an error result when the command failed or hit a limit. */
static void judge(const struct sb *s, cJSON *res)
{
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(res, "exit_code");
	const char *limit = box_json_get_str(res, "resource_limit", NULL);
	const char *sig = box_json_get_str(res, "signal", NULL);
	struct box_err e;

	box_err_init(&e);
	if (limit && strcmp(limit, "timeout") == 0)
		box_err_set(&e, BOX_E_TIMEOUT, "the command ran out of time");
	else if (limit)
		box_err_set(&e, BOX_E_LIMIT, "the command hit the %s limit", limit);
	else if (sig)
		box_err_set(&e, BOX_E_GUEST, "the command was killed by %s", sig);
	else if (cJSON_IsNumber(code) && code->valuedouble != 0)
		box_err_set(&e, BOX_E_GUEST, "the command exited with status %d",
			    (int)code->valuedouble);
	if (limit) {
		static const struct {
			const char *name, *key, *unit;
			int64_t def;
		} lims[] = {
			{ "timeout", "timeout_ms", "ms", BOX_SANDBOX_DEFAULT_TIMEOUT_MS },
			{ "memory", "memory", "bytes", BOX_SANDBOX_DEFAULT_MEMORY },
			{ "pids", "pids", "processes", BOX_SANDBOX_DEFAULT_PIDS },
			{ "cpu", "cpu_ms", "ms", 0 },
			{ "disk", "disk_bytes", "bytes", BOX_SANDBOX_DEFAULT_DISK },
		};
		size_t k;

		for (k = 0; k < sizeof(lims) / sizeof(lims[0]); k++)
			if (strcmp(limit, lims[k].name) == 0) {
				int64_t conf = lim(s, lims[k].key, lims[k].def);

				if (k == 0)
					conf = box_json_get_int(s->req, "timeout_ms", conf);
				box_fmt(e.limit, sizeof(e.limit), "%s",
					k == 0 ? "timeout_ms" : lims[k].name);
				box_fmt(e.unit, sizeof(e.unit), "%s", lims[k].unit);
				e.configured = conf;
				e.has_configured = 1;
			}
	}
	cJSON_DeleteItemFromObjectCaseSensitive(res, "ok");
	if (e.code == BOX_OK) {
		cJSON_AddTrueToObject(res, "ok");
		return;
	}
	cJSON_AddFalseToObject(res, "ok");
	cJSON_AddItemToObject(res, "error", box_err_to_json(&e));
}

static int run_exec(struct sb *s, const struct exec_spec *e, cJSON **out, struct box_err *err)
{
	cJSON *res;

	if (is_local(s->rec.provider)) {
		char p[PATH_MAX];
		int d;

		box_fmt(p, sizeof(p), "%s/output", s->sdir);
		d = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (d < 0)
			return box_err_sys(err, "cannot open %s", p);
		if (box_sbcopy_empty_dir(d, err) < 0) {
			close(d);
			return -1;
		}
		close(d);
		res = exec_local(s, e, err);
	} else {
		res = exec_plugin(s, e, err);
	}
	if (!res)
		return -1;
	*out = res;
	return 0;
}

/* Files the command left in /output: [{"path","size","sha256"}], listed by the helper that
 * has libcrypto (box-sandbox itself starts without it). */
static int collect_outputs(struct sb *s, cJSON *res, struct box_err *err)
{
	char p[PATH_MAX];
	const char *args[3] = { "outputs", p, NULL };
	cJSON *o, *files;
	int d, empty = 1;

	if (!is_local(s->rec.provider)) {
		if (!cJSON_GetObjectItemCaseSensitive(res, "outputs"))
			cJSON_AddItemToObject(res, "outputs", cJSON_CreateArray());
		return 0;
	}
	box_fmt(p, sizeof(p), "%s/output", s->sdir);
	d = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (d >= 0) {
		DIR *dir = fdopendir(d);
		struct dirent *de;

		while (dir && (de = readdir(dir)))
			if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
				empty = 0;
				break;
			}
		if (dir)
			closedir(dir);
		else
			close(d);
	}
	if (empty) {
		cJSON_AddItemToObject(res, "outputs", cJSON_CreateArray());
		return 0;
	}
	o = run_sbfiles(args, err);
	if (!o)
		return -1;
	files = cJSON_DetachItemFromObjectCaseSensitive(o, "outputs");
	cJSON_Delete(o);
	cJSON_AddItemToObject(res, "outputs", files ? files : cJSON_CreateArray());
	return 0;
}

/* ---- the record ---- */

/* A change of state, made durable. */
static int save(struct sb *s, struct box_err *err)
{
	box_sbstate_now(s->rec.last_used_at);
	return box_sbstate_write(s->dir, &s->rec, err);
}

/* Runtime state (the holder, running/paused/lost): replaced atomically but not fsynced. A
 * crash can lose it, and the next operation's observation of the provider corrects any drift
 * (DESIGN.md's state machine); what must survive (the record's birth, init) uses save(). */
static int save_runtime(struct sb *s, struct box_err *err)
{
	return box_sbstate_touch(s->dir, &s->rec, err);
}

/* The use stamp of an operation that changed nothing else (the keeper's idle clock). */
static void touch(struct sb *s)
{
	struct box_err e;
	char now[BOX_SBSTATE_TIME_MAX];

	/* the idle clock counts seconds: one stamp a second is enough */
	box_sbstate_now(now);
	if (strncmp(now, s->rec.last_used_at, 19) == 0)
		return;
	box_err_init(&e);
	(void)box_sbstate_touch(s->dir, &s->rec, &e);
}

static int run_init(struct sb *s, struct box_err *err)
{
	const cJSON *cmd;
	int idx = 0;

	cJSON_ArrayForEach(cmd, s->rec.init) {
		struct exec_spec e = { 0 };
		cJSON *res = NULL;
		const cJSON *ok;

		e.argv = cJSON_CreateArray();
		cJSON_AddItemToArray(e.argv, cJSON_CreateString("/bin/sh"));
		cJSON_AddItemToArray(e.argv, cJSON_CreateString("-c"));
		cJSON_AddItemToArray(e.argv, cJSON_CreateString(cmd->valuestring));
		e.timeout_ms = (int)lim(s, "timeout_ms", BOX_SANDBOX_DEFAULT_TIMEOUT_MS);
		if (run_exec(s, &e, &res, err) < 0) {
			cJSON_Delete(e.argv);
			goto failed;
		}
		cJSON_Delete(e.argv);
		judge(s, res);
		ok = cJSON_GetObjectItemCaseSensitive(res, "ok");
		if (!cJSON_IsTrue(ok)) {
			box_err_set(err, BOX_E_GUEST, "init command %d (%.200s) failed: %s; stderr: %.1000s",
				    idx + 1, cmd->valuestring,
				    box_json_get_str(cJSON_GetObjectItemCaseSensitive(res, "error"),
						     "message", ""),
				    box_json_get_str(res, "stderr", ""));
			cJSON_Delete(res);
			goto failed;
		}
		cJSON_Delete(res);
		idx++;
	}
	free(s->rec.last_init_error);
	s->rec.last_init_error = NULL;
	box_sbstate_now(s->rec.init_completed_at);
	s->init_ran = 1;
	return save(s, err);
failed:
	free(s->rec.last_init_error);
	s->rec.last_init_error = strdup(err->message);
	s->rec.init_completed_at[0] = 0;
	{
		struct box_err e2;

		box_err_init(&e2);
		(void)save(s, &e2);
	}
	return -1;
}

/* Reads the session's record under its lock; not_found when there is none. */
static int load(struct sb *s, struct box_err *err)
{
	if (box_sbstate_read(s->dir, s->id, &s->rec, err) < 0)
		return -1;
	s->have_rec = 1;
	return 0;
}

/* DESIGN.md's state machine: create when absent (only for ops that may), resume when paused,
 * replace when lost, init once (retried after a failure). */
static int ensure(struct sb *s, int may_create, struct box_err *err)
{
	struct box_sb_plan plan;
	const char *want;
	int obs;

	(void)may_create;
	if (!s->have_rec)
		return box_err_set(err, BOX_E_NOT_FOUND, "no session %s", s->id);
	want = box_json_get_str(s->req, "provider", s->rec.provider);
	obs = observe(s, err);
	if (obs < 0)
		return -1;
	if (box_sbstate_plan(&s->rec, want, (enum box_sb_observed)obs, &plan, err) < 0)
		return -1;
	switch (plan.action) {
	case BOX_SB_ACT_RESUME:
		if (simple_op(s, "resume", err) < 0)
			return -1;
		s->resumed = 1;
		/* a holder killed while frozen dies only once thawed */
		if (observe(s, err) == BOX_SB_OBS_ABSENT) {
			s->rec.state = BOX_SB_LOST;
			(void)simple_op(s, "delete", &(struct box_err){ 0 });
			if (start(s, err) < 0)
				return -1;
			s->replaced = 1;
		}
		break;
	case BOX_SB_ACT_REPLACE:
		s->rec.state = BOX_SB_LOST;
		if (save_runtime(s, err) < 0)
			return -1;
		/* whatever is left of the old instance (its groups) goes first */
		(void)simple_op(s, "delete", &(struct box_err){ 0 });
		if (start(s, err) < 0)
			return -1;
		s->replaced = 1;
		/* a plug-in's new instance starts blank: init runs again (the local one keeps
		 * its workspace, where init's effects live) */
		if (!is_local(s->rec.provider))
			plan.run_init = 1;
		break;
	default:
		break;
	}
	if (s->rec.state != BOX_SB_RUNNING || plan.action != BOX_SB_ACT_NONE) {
		s->rec.state = BOX_SB_RUNNING;
		if (save_runtime(s, err) < 0)
			return -1;
	}
	if (plan.run_init && cJSON_GetArraySize(s->rec.init) > 0)
		return run_init(s, err);
	if (plan.run_init && !s->rec.init_completed_at[0]) {
		box_sbstate_now(s->rec.init_completed_at);
		return save(s, err);
	}
	return 0;
}

static cJSON *status_json(struct sb *s, const char *observed)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddTrueToObject(o, "ok");
	cJSON_AddStringToObject(o, "session", s->id);
	cJSON_AddStringToObject(o, "provider", s->rec.provider);
	cJSON_AddStringToObject(o, "state", box_sbstate_state_name(s->rec.state));
	if (observed)
		cJSON_AddStringToObject(o, "observed", observed);
	cJSON_AddStringToObject(o, "created_at", s->rec.created_at);
	cJSON_AddStringToObject(o, "last_used_at", s->rec.last_used_at);
	if (s->rec.init_completed_at[0])
		cJSON_AddStringToObject(o, "init_completed_at", s->rec.init_completed_at);
	else
		cJSON_AddNullToObject(o, "init_completed_at");
	if (s->rec.last_init_error)
		cJSON_AddStringToObject(o, "last_init_error", s->rec.last_init_error);
	else
		cJSON_AddNullToObject(o, "last_init_error");
	cJSON_AddItemToObject(o, "limits", cJSON_Duplicate(s->rec.limits, 1));
	if (is_local(s->rec.provider)) {
		const cJSON *h = pdata(s, "holder");

		cJSON_AddStringToObject(o, "limits_enforced_by",
					strcmp(box_json_get_str(h, "cgroup", "none"), "none") ?
					"cgroup" : "rlimit");
	}
	if (s->created)
		cJSON_AddTrueToObject(o, "created");
	if (s->resumed)
		cJSON_AddTrueToObject(o, "resumed");
	if (s->replaced)
		cJSON_AddTrueToObject(o, "replaced");
	if (s->init_ran)
		cJSON_AddTrueToObject(o, "init_ran");
	return o;
}

/* ---- operations ---- */

static int limits_from_req(const cJSON *req, cJSON *limits)
{
	static const char *const keys[] = { "memory", "pids", "cpu_ms", "timeout_ms",
		"max_output_bytes", "disk_bytes", "idle_pause_after_seconds" };
	size_t k;

	for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, keys[k]);

		if (cJSON_IsNumber(v))
			box_json_add_int64(limits, keys[k], box_json_get_int(req, keys[k], 0));
	}
	return 0;
}

static int copy_inputs(struct sb *s, const cJSON *inputs, struct box_err *err)
{
	char p[PATH_MAX];
	const cJSON *e;
	int d, idx = 0;

	box_fmt(p, sizeof(p), "%s/input", s->sdir);
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		return box_err_sys(err, "cannot create %s", p);
	d = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (d < 0)
		return box_err_sys(err, "cannot open %s", p);
	cJSON_ArrayForEach(e, inputs) {
		const char *base = strrchr(e->valuestring, '/');
		char path[32];
		struct box_sbcopy_stats st;

		base = base ? base + 1 : e->valuestring;
		box_fmt(path, sizeof(path), "$.input[%d]", idx++);
		if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
			close(d);
			box_err_set(err, BOX_E_INVALID, "input '%.200s' has no file name", e->valuestring);
			box_err_path(err, path);
			return -1;
		}
		memset(&st, 0, sizeof(st));
		if (box_sbcopy_in(e->valuestring, d, base, NULL, &st, err) < 0) {
			close(d);
			box_err_path(err, path);
			return -1;
		}
	}
	close(d);
	return 0;
}

static int remove_session_dir(struct sb *s, struct box_err *err)
{
	int d = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int sd, r;

	if (d < 0)
		return box_err_sys(err, "cannot open %s", s->dir);
	sd = openat(d, s->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (sd < 0) {
		close(d);
		return errno == ENOENT ? 0 : box_err_sys(err, "cannot open %s", s->sdir);
	}
	r = box_sbcopy_empty_dir(sd, err);
	close(sd);
	if (r == 0 && unlinkat(d, s->id, AT_REMOVEDIR) < 0 && errno != ENOENT)
		r = box_err_sys(err, "cannot remove %s", s->sdir);
	close(d);
	return r;
}

static int create_session(struct sb *s, struct box_err *err)
{
	const cJSON *req = s->req, *v;
	const char *provider = box_json_get_str(req, "provider", "local");
	cJSON *config;
	struct mounts ms;

	if (!box_sbstate_valid_provider(provider))
		return box_err_set(err, BOX_E_INVALID, "invalid provider name '%.40s'", provider),
		       box_err_path(err, "$.provider"), -1;
	if (check_env(cJSON_GetObjectItemCaseSensitive(req, "env"), err) < 0)
		return -1;
	if (parse_mounts(cJSON_GetObjectItemCaseSensitive(req, "mount"), &ms, err) < 0)
		return -1;
	mounts_release(&ms);
	if (!is_local(provider)) {
		char path[PATH_MAX];

		if (box_provider_find(provider, libexec_dir(), path, sizeof(path), err) < 0)
			return -1;
		if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(req, "mount")) ||
		    cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(req, "input")))
			return box_err_set(err, BOX_E_UNSUPPORTED, "--mount and --input are local "
					   "provider features");
	}
	if (box_sbstate_new(&s->rec, s->id, provider, err) < 0)
		return -1;
	limits_from_req(req, s->rec.limits);
	cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(req, "init"))
		cJSON_AddItemToArray(s->rec.init, cJSON_CreateString(v->valuestring));
	config = cJSON_CreateObject();
	cJSON_AddItemToObject(config, "env", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(req,
							  "env"), 1) ?: cJSON_CreateArray());
	cJSON_AddItemToObject(config, "mounts", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(req,
							     "mount"), 1) ?: cJSON_CreateArray());
	if (box_json_get_str(req, "tools", NULL)) {
		char abs[PATH_MAX];
		struct box_toolset *set;

		if (!is_local(provider))
			return box_err_set(err, BOX_E_UNSUPPORTED, "--tools is a local provider "
					   "feature"), cJSON_Delete(config), -1;
		if (!realpath(box_json_get_str(req, "tools", ""), abs)) {
			cJSON_Delete(config);
			box_err_sys(err, "tools file %.200s", box_json_get_str(req, "tools", ""));
			err->code = BOX_E_NOT_FOUND;
			box_err_path(err, "$.tools");
			return -1;
		}
		set = box_tools_load(abs, err);
		if (!set) {
			cJSON_Delete(config);
			return -1;
		}
		box_tools_free(set);
		cJSON_AddStringToObject(config, "tools", abs);
	}
	cJSON_AddItemToObject(s->rec.provider_data, "config", config);
	if (cJSON_GetArraySize(s->rec.init) == 0)
		box_sbstate_now(s->rec.init_completed_at);
	if (box_sbstate_create(s->dir, &s->rec, err) < 0)
		return -1;
	s->have_rec = 1;
	if (copy_inputs(s, cJSON_GetObjectItemCaseSensitive(req, "input"), err) < 0)
		goto undo;
	if (start(s, err) < 0)
		goto undo;
	s->created = 1;
	if (save_runtime(s, err) < 0)
		goto undo;
	if (cJSON_GetArraySize(s->rec.init) > 0)
		return run_init(s, err);   /* on failure the session stays: the next operation
					    * retries init */
	return 0;
undo:
	{
		struct box_err e2;

		box_err_init(&e2);
		(void)simple_op(s, "delete", &e2);
		(void)box_sbstate_delete(s->dir, s->id, &e2);
		(void)remove_session_dir(s, &e2);
		s->have_rec = 0;
	}
	return -1;
}

static cJSON *op_create(struct sb *s, struct box_err *err)
{
	if (create_session(s, err) < 0)
		return NULL;
	return status_json(s, NULL);
}

static cJSON *op_exec(struct sb *s, struct box_err *err)
{
	struct exec_spec e = { 0 };
	const cJSON *argv = cJSON_GetObjectItemCaseSensitive(s->req, "argv");
	const char *cmd = box_json_get_str(s->req, "command", NULL);
	cJSON *res = NULL;

	if (cmd && cJSON_GetArraySize(argv) > 0)
		return box_err_set(err, BOX_E_USAGE, "give either --command or ARGV, not both"), NULL;
	if (!cmd && cJSON_GetArraySize(argv) == 0)
		return box_err_set(err, BOX_E_USAGE, "exec needs ARGV after -- or --command"), NULL;
	if (check_env(cJSON_GetObjectItemCaseSensitive(s->req, "env"), err) < 0)
		return NULL;
	if (ensure(s, 1, err) < 0)
		return NULL;
	if (cmd) {
		e.argv = cJSON_CreateArray();
		cJSON_AddItemToArray(e.argv, cJSON_CreateString("/bin/sh"));
		cJSON_AddItemToArray(e.argv, cJSON_CreateString("-c"));
		cJSON_AddItemToArray(e.argv, cJSON_CreateString(cmd));
	} else {
		e.argv = cJSON_Duplicate(argv, 1);
	}
	e.env = cJSON_GetObjectItemCaseSensitive(s->req, "env");
	e.cwd = box_json_get_str(s->req, "cwd", NULL);
	e.stdin_data = box_json_get_str(s->req, "stdin", NULL);
	e.timeout_ms = (int)box_json_get_int(s->req, "timeout_ms",
					     lim(s, "timeout_ms", BOX_SANDBOX_DEFAULT_TIMEOUT_MS));
	e.events = box_json_get_bool(s->req, "events", 0);
	if (run_exec(s, &e, &res, err) < 0) {
		/* the instance died between the check and the exec: replace it, once */
		if (err->code != BOX_E_NOT_FOUND || !is_local(s->rec.provider))
			goto out;
		box_err_init(err);
		if (ensure(s, 1, err) < 0 || run_exec(s, &e, &res, err) < 0)
			goto out;
	}
	if (collect_outputs(s, res, err) < 0) {
		cJSON_Delete(res);
		res = NULL;
		goto out;
	}
	cJSON_AddStringToObject(res, "session", s->id);
	if (s->created)
		cJSON_AddTrueToObject(res, "created");
	if (s->resumed)
		cJSON_AddTrueToObject(res, "resumed");
	if (s->replaced)
		cJSON_AddTrueToObject(res, "replaced");
	if (s->init_ran)
		cJSON_AddTrueToObject(res, "init_ran");
	judge(s, res);
	touch(s);
out:
	cJSON_Delete(e.argv);
	return res;
}

/* The host directory and the path inside it of a guest path of the file API. */
static int file_target(struct sb *s, const char *path, char *dir, size_t dn, const char **rel,
		       int writing, struct box_err *err)
{
	static const char *const roots[] = { "/workspace", "/input", "/output" };
	size_t k;

	if (!path || !*path)
		return box_err_set(err, BOX_E_USAGE, "a path is needed"), box_err_path(err, "$.path"),
		       -1;
	if (path[0] != '/') {
		box_fmt(dir, dn, "%s/workspace", s->sdir);
		*rel = path;
		return 0;
	}
	for (k = 0; k < sizeof(roots) / sizeof(roots[0]); k++) {
		size_t n = strlen(roots[k]);

		if (strncmp(path, roots[k], n) == 0 && (path[n] == 0 || path[n] == '/')) {
			if (writing && k == 1)
				return box_err_set(err, BOX_E_POLICY, "/input is read-only"),
				       box_err_path(err, "$.path"), -1;
			box_fmt(dir, dn, "%s%s", s->sdir, roots[k]);
			*rel = path[n] ? path + n : "/";
			return 0;
		}
	}
	box_err_set(err, BOX_E_POLICY, "the file API reaches /workspace, /input and /output only");
	box_err_path(err, "$.path");
	return -1;
}

/* read and write on a plug-in's instance: read_file / write_file with the bytes in base64 */
static cJSON *plugin_file(struct sb *s, int writing, struct box_err *err)
{
	cJSON *o = cJSON_CreateObject(), *res;
	const char *path = box_json_get_str(s->req, "path", NULL);

	if (!path || !*path) {
		cJSON_Delete(o);
		return box_err_set(err, BOX_E_USAGE, "a path is needed"), box_err_path(err, "$.path"),
		       NULL;
	}
	cJSON_AddStringToObject(o, "path", path);
	if (writing) {
		const char *text = box_json_get_str(s->req, "content", NULL);
		const char *b64 = box_json_get_str(s->req, "content_base64", NULL);
		struct box_buf enc;

		box_buf_init(&enc, box_base64_encoded_len(text ? strlen(text) : 0) + 1);
		if (text && (box_base64_encode(text, strlen(text), &enc, err) < 0 ||
			     box_buf_append(&enc, "", 1, err) < 0)) {
			box_buf_release(&enc);
			cJSON_Delete(o);
			return NULL;
		}
		cJSON_AddStringToObject(o, "content_base64", text ? enc.data : b64 ? b64 : "");
		box_buf_release(&enc);
	}
	res = plugin_op(s, writing ? "write_file" : "read_file", o, 0, err);
	if (!res)
		return NULL;
	cJSON_DeleteItemFromObjectCaseSensitive(res, "ok");
	cJSON_AddTrueToObject(res, "ok");
	cJSON_DeleteItemFromObjectCaseSensitive(res, "session");
	cJSON_AddStringToObject(res, "session", s->id);
	if (!cJSON_GetObjectItemCaseSensitive(res, "path"))
		cJSON_AddStringToObject(res, "path", path);
	touch(s);
	return res;
}

static cJSON *op_read(struct sb *s, struct box_err *err)
{
	char dir[PATH_MAX];
	const char *rel;
	struct box_ws ws;
	struct box_buf b;
	cJSON *o;

	if (!is_local(s->rec.provider))
		return ensure(s, 1, err) < 0 ? NULL : plugin_file(s, 0, err);
	if (ensure(s, 1, err) < 0 ||
	    file_target(s, box_json_get_str(s->req, "path", NULL), dir, sizeof(dir), &rel, 0,
			err) < 0)
		return NULL;
	if (box_ws_open(&ws, dir, -1, err) < 0)
		return NULL;
	box_buf_init(&b, (size_t)BOX_SANDBOX_READ_MAX);
	if (box_ws_read(&ws, rel, &b, err) < 0) {
		box_ws_release(&ws);
		box_buf_release(&b);
		return NULL;
	}
	box_ws_release(&ws);
	o = cJSON_CreateObject();
	cJSON_AddTrueToObject(o, "ok");
	cJSON_AddStringToObject(o, "session", s->id);
	cJSON_AddStringToObject(o, "path", box_json_get_str(s->req, "path", ""));
	box_json_add_int64(o, "size", (int64_t)b.len);
	if (box_utf8_valid(b.data ? b.data : "", b.len) && !memchr(b.data ? b.data : "", 0, b.len)) {
		box_buf_append(&b, "", 1, err);
		cJSON_AddStringToObject(o, "content", b.data);
		cJSON_AddStringToObject(o, "encoding", "utf-8");
	} else {
		struct box_buf enc;

		box_buf_init(&enc, box_base64_encoded_len(b.len) + 1);
		if (box_base64_encode(b.data, b.len, &enc, err) < 0 ||
		    box_buf_append(&enc, "", 1, err) < 0) {
			box_buf_release(&enc);
			box_buf_release(&b);
			cJSON_Delete(o);
			return NULL;
		}
		cJSON_AddStringToObject(o, "content", enc.data);
		cJSON_AddStringToObject(o, "encoding", "base64");
		box_buf_release(&enc);
	}
	box_buf_release(&b);
	touch(s);
	return o;
}

static cJSON *op_write(struct sb *s, struct box_err *err)
{
	char dir[PATH_MAX];
	const char *rel, *text = box_json_get_str(s->req, "content", NULL);
	const char *b64 = box_json_get_str(s->req, "content_base64", NULL);
	struct box_ws ws;
	struct box_buf dec;
	const void *data = NULL;
	size_t n;
	cJSON *o;

	if (!text && !b64)
		return box_err_set(err, BOX_E_USAGE, "write needs content"), NULL;
	if (text && b64)
		return box_err_set(err, BOX_E_USAGE, "give content or content_base64, not both"), NULL;
	if (!is_local(s->rec.provider))
		return ensure(s, 1, err) < 0 ? NULL : plugin_file(s, 1, err);
	box_buf_init(&dec, (size_t)BOX_SANDBOX_READ_MAX);
	if (b64) {
		if (box_base64_decode(b64, strlen(b64), &dec, err) < 0) {
			box_buf_release(&dec);
			box_err_path(err, "$.content_base64");
			return NULL;
		}
		data = dec.data ? dec.data : "";
		n = dec.len;
	} else {
		data = text;
		n = strlen(text);
	}
	if (ensure(s, 1, err) < 0 ||
	    file_target(s, box_json_get_str(s->req, "path", NULL), dir, sizeof(dir), &rel, 1,
			err) < 0 ||
	    box_ws_open(&ws, dir, lim(s, "disk_bytes", BOX_SANDBOX_DEFAULT_DISK), err) < 0) {
		box_buf_release(&dec);
		return NULL;
	}
	if (box_ws_write(&ws, rel, data, n, 0, err) < 0) {
		box_ws_release(&ws);
		box_buf_release(&dec);
		return NULL;
	}
	box_ws_release(&ws);
	box_buf_release(&dec);
	o = cJSON_CreateObject();
	cJSON_AddTrueToObject(o, "ok");
	cJSON_AddStringToObject(o, "session", s->id);
	cJSON_AddStringToObject(o, "path", box_json_get_str(s->req, "path", ""));
	box_json_add_int64(o, "size", (int64_t)n);
	touch(s);
	return o;
}

static cJSON *op_ls(struct sb *s, struct box_err *err)
{
	char dir[PATH_MAX];
	const char *rel;
	struct box_ws ws;
	cJSON *o, *list;

	if (!is_local(s->rec.provider))
		return box_err_set(err, BOX_E_UNSUPPORTED, "ls is not part of the provider protocol: "
				   "exec ls instead"), NULL;
	if (ensure(s, 1, err) < 0 ||
	    file_target(s, box_json_get_str(s->req, "path", "/workspace"), dir, sizeof(dir), &rel, 0,
			err) < 0 ||
	    box_ws_open(&ws, dir, -1, err) < 0)
		return NULL;
	list = box_ws_list(&ws, rel, 10000, err);
	box_ws_release(&ws);
	if (!list)
		return NULL;
	o = cJSON_CreateObject();
	cJSON_AddTrueToObject(o, "ok");
	cJSON_AddStringToObject(o, "session", s->id);
	cJSON_AddStringToObject(o, "path", box_json_get_str(s->req, "path", "/workspace"));
	cJSON_AddItemToObject(o, "entries", list);
	touch(s);
	return o;
}

static cJSON *op_pause_resume(struct sb *s, int pause, struct box_err *err)
{
	int obs = observe(s, err);

	if (obs < 0)
		return NULL;
	if (pause) {
		if (obs == BOX_SB_OBS_ABSENT) {
			if (ensure(s, 0, err) < 0)
				return NULL;
			obs = BOX_SB_OBS_RUNNING;
		}
		if (obs == BOX_SB_OBS_RUNNING && simple_op(s, "pause", err) < 0)
			return NULL;
		s->rec.state = BOX_SB_PAUSED;
		if (save_runtime(s, err) < 0)
			return NULL;
		return status_json(s, NULL);
	}
	if (ensure(s, 0, err) < 0)
		return NULL;
	return status_json(s, NULL);
}

static cJSON *op_status(struct sb *s, struct box_err *err)
{
	int obs = observe(s, err);
	const char *seen;

	if (obs < 0)
		return NULL;
	seen = obs == BOX_SB_OBS_RUNNING ? "running" : obs == BOX_SB_OBS_PAUSED ? "paused" :
	       "absent";
	/* drift: the record is corrected, the instance is left for the next operation */
	if (obs == BOX_SB_OBS_ABSENT && s->rec.state != BOX_SB_LOST) {
		s->rec.state = BOX_SB_LOST;
		(void)save_runtime(s, err);
	} else if (obs == BOX_SB_OBS_PAUSED && s->rec.state != BOX_SB_PAUSED) {
		s->rec.state = BOX_SB_PAUSED;
		(void)save_runtime(s, err);
	} else if (obs == BOX_SB_OBS_RUNNING && s->rec.state != BOX_SB_RUNNING) {
		s->rec.state = BOX_SB_RUNNING;
		(void)save_runtime(s, err);
	}
	return status_json(s, seen);
}

static cJSON *op_delete(struct sb *s, struct box_err *err)
{
	cJSON *o;

	if (simple_op(s, "delete", err) < 0 && err->code != BOX_E_NOT_FOUND)
		return NULL;
	box_err_init(err);
	if (box_sbstate_delete(s->dir, s->id, err) < 0 || remove_session_dir(s, err) < 0)
		return NULL;
	o = cJSON_CreateObject();
	cJSON_AddTrueToObject(o, "ok");
	cJSON_AddStringToObject(o, "session", s->id);
	cJSON_AddTrueToObject(o, "deleted");
	return o;
}

static cJSON *op_snapshot(struct sb *s, struct box_err *err)
{
	char ws[PATH_MAX], snaps[PATH_MAX];
	const char *args[4] = { "snapshot", ws, snaps, NULL };
	cJSON *res;
	int paused = 0;

	if (!is_local(s->rec.provider)) {
		if (ensure(s, 1, err) < 0)
			return NULL;
		res = plugin_op(s, "checkpoint", NULL, 0, err);
		if (res) {
			cJSON_DeleteItemFromObjectCaseSensitive(res, "ok");
			cJSON_AddTrueToObject(res, "ok");
			cJSON_AddStringToObject(res, "session", s->id);
		}
		return res;
	}
	if (ensure(s, 1, err) < 0)
		return NULL;
	box_fmt(ws, sizeof(ws), "%s/workspace", s->sdir);
	box_fmt(snaps, sizeof(snaps), "%s/snapshots", s->sdir);
	if (mkdir(snaps, 0755) < 0 && errno != EEXIST)
		return box_err_sys(err, "cannot create %s", snaps), NULL;
	/* a still workspace: nothing in the sandbox writes while it is read */
	if (simple_op(s, "pause", err) == 0)
		paused = 1;
	box_err_init(err);
	res = run_sbfiles(args, err);
	if (paused)
		(void)simple_op(s, "resume", &(struct box_err){ 0 });
	if (!res)
		return NULL;
	cJSON_AddStringToObject(res, "session", s->id);
	touch(s);
	return res;
}

static cJSON *op_restore(struct sb *s, struct box_err *err)
{
	const char *digest = box_json_get_str(s->req, "digest", NULL);
	const char *from = box_json_get_str(s->req, "from", s->id);
	char snaps[PATH_MAX];
	const char *args[6] = { "restore", snaps, digest, s->sdir, "workspace", NULL };
	cJSON *res;

	if (!digest)
		return box_err_set(err, BOX_E_USAGE, "restore needs a DIGEST"), NULL;
	if (!box_sbstate_valid_id(from))
		return box_err_set(err, BOX_E_INVALID, "invalid session id in --from"),
		       box_err_path(err, "$.from"), NULL;
	if (!is_local(s->rec.provider))
		return box_err_set(err, BOX_E_UNSUPPORTED, "restore is a local provider feature"),
		       NULL;
	box_fmt(snaps, sizeof(snaps), "%s/%s/snapshots", s->dir, from);
	/* the holder binds the workspace directory itself: a new one needs a new holder */
	if (simple_op(s, "delete", err) < 0)
		return NULL;
	res = run_sbfiles(args, err);
	if (!res) {
		struct box_err e2;

		box_err_init(&e2);
		(void)ensure(s, 0, &e2);
		return NULL;
	}
	cJSON_Delete(res);
	if (ensure(s, 0, err) < 0)
		return NULL;
	res = status_json(s, NULL);
	cJSON_AddStringToObject(res, "digest", digest);
	cJSON_AddTrueToObject(res, "restored");
	return res;
}

static cJSON *op_list(struct sb *s, struct box_err *err)
{
	cJSON *ids = box_sbstate_list(s->dir, LIST_MAX, err), *out, *arr, *id;

	if (!ids)
		return NULL;
	out = cJSON_CreateObject();
	arr = cJSON_CreateArray();
	cJSON_AddTrueToObject(out, "ok");
	cJSON_ArrayForEach(id, ids) {
		struct box_sbstate r;
		struct box_err e2;
		cJSON *o = cJSON_CreateObject();

		box_sbstate_init(&r);
		box_err_init(&e2);
		cJSON_AddStringToObject(o, "session", id->valuestring);
		if (box_sbstate_read(s->dir, id->valuestring, &r, &e2) == 0) {
			cJSON_AddStringToObject(o, "provider", r.provider);
			cJSON_AddStringToObject(o, "state", box_sbstate_state_name(r.state));
			cJSON_AddStringToObject(o, "last_used_at", r.last_used_at);
		} else {
			cJSON_AddStringToObject(o, "state", "unreadable");
		}
		box_sbstate_release(&r);
		cJSON_AddItemToArray(arr, o);
	}
	cJSON_Delete(ids);
	cJSON_AddItemToObject(out, "sessions", arr);
	return out;
}

/* The keeper's idle check: pause a sandbox nobody used for idle_pause_after_seconds. Runs in
 * the keeper process on the host, never holding the lock while sleeping. */
static int keeper_tick(const void *ctx)
{
	const struct sb *k = ctx;
	struct sb s;
	struct stat st;
	char p[PATH_MAX];
	int64_t idle_ms, since, lockfd;
	struct box_err e;

	box_err_init(&e);
	memset(&s, 0, sizeof(s));
	memcpy(s.dir, k->dir, sizeof(s.dir));
	memcpy(s.sdir, k->sdir, sizeof(s.sdir));
	memcpy(s.id, k->id, sizeof(s.id));
	idle_ms = lim(k, "idle_pause_after_seconds", BOX_SANDBOX_DEFAULT_IDLE) * 1000;
	box_fmt(p, sizeof(p), "%s/state.json", s.sdir);
	if (stat(p, &st) < 0)
		return -1;
	since = (int64_t)(time(NULL) - st.st_mtime) * 1000;
	if (since < idle_ms)
		return (int)(idle_ms - since + 50 > 3600000 ? 3600000 : idle_ms - since + 50);
	lockfd = box_sbstate_lock(s.dir, s.id, 0, &e);
	if (lockfd < 0)
		return 1000;   /* an operation is running: look again soon */
	box_sbstate_init(&s.rec);
	if (box_sbstate_read(s.dir, s.id, &s.rec, &e) == 0 && s.rec.state == BOX_SB_RUNNING &&
	    stat(p, &st) == 0 && (time(NULL) - st.st_mtime) * 1000 >= idle_ms) {
		struct box_nsbox_inst i;

		inst_of(&s, &i);
		if (box_nsbox_pause(&i, s.id, &e) == 0) {
			s.rec.state = BOX_SB_PAUSED;
			(void)box_sbstate_write(s.dir, &s.rec, &e);
		}
	}
	box_sbstate_release(&s.rec);
	close((int)lockfd);
	return (int)(idle_ms > 3600000 ? 3600000 : idle_ms);
}

/* The keeper's tool socket: the tools granted at create, loaded once, answered one
 * connection at a time. Lua tools run in the box-run found in the keeper's environment,
 * which is that of the create or resume that started it. */
static void keeper_serve(int fd, const void *ctx)
{
	static struct box_toolset *set;
	static char box_run[PATH_MAX];
	static int tried;
	static struct box_tool_call_opts o = { .max_timeout_ms = BOX_TOOL_MAX_TIMEOUT_MS };
	const struct sb *s = ctx;
	const char *path = box_json_get_str(pdata(s, "config"), "tools", NULL);
	struct box_err e;

	box_err_init(&e);
	if (!tried) {
		tried = 1;
		if (box_tool_find_box_run(box_run, sizeof(box_run), &e) == 0)
			o.box_run = box_run;
	}
	/* a set that failed to load (a store entry changed since create) is tried again at
	 * the next call, and meanwhile every call gets the reason */
	if (!set && path && !(set = box_tools_load(path, &e))) {
		box_toolsrv_serve_error(fd, &e);
		return;
	}
	if (!set) {
		struct box_toolset none = { NULL, 0 };

		box_toolsrv_serve_one(fd, &none, &o);
		return;
	}
	box_toolsrv_serve_one(fd, set, &o);
}

static int known_op(const char *op)
{
	static const char *const ops[] = { "create", "exec", "read", "write", "ls", "pause",
		"resume", "status", "snapshot", "restore", "delete", "list" };
	size_t k;

	for (k = 0; k < sizeof(ops) / sizeof(ops[0]); k++)
		if (strcmp(op, ops[k]) == 0)
			return 1;
	return 0;
}

/* 1 (err set) when the session is absent and the agent's policy lets it create none */
static int no_create(const struct sb *s, struct box_err *err)
{
	if (!s->io || !s->io->no_create)
		return 0;
	box_err_set(err, BOX_E_POLICY, "session %s does not exist, and the policy does not let "
		    "a request create one", s->id);
	box_err_path(err, "$.session");
	return 1;
}

cJSON *box_sandbox(const cJSON *req, const struct box_sandbox_io *io, struct box_err *err)
{
	const char *op = box_json_get_str(req, "op", NULL);
	const char *id = box_json_get_str(req, "session", NULL);
	struct sb *s;
	cJSON *res = NULL;
	int need_rec;

	if (!op)
		return box_err_set(err, BOX_E_USAGE, "an operation is needed (create exec read write "
				   "ls pause resume status snapshot restore delete list)"), NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	s->req = req;
	s->io = io;
	s->lockfd = -1;
	box_sbstate_init(&s->rec);
	if (box_sbstate_dir(s->dir, sizeof(s->dir), err) < 0)
		goto out;
	if (strcmp(op, "list") == 0) {
		res = op_list(s, err);
		goto out;
	}
	if (!known_op(op)) {
		box_err_set(err, BOX_E_USAGE, "unknown operation '%.32s'", op);
		box_err_path(err, "$.op");
		goto out;
	}
	/* the helper that lists /output after a command (and snapshots) is looked for before
	 * anything is created or run: an exec that ran must never answer not_found, for its
	 * caller would run it again */
	if (strcmp(op, "exec") == 0 || strcmp(op, "snapshot") == 0 || strcmp(op, "restore") == 0) {
		char helper[PATH_MAX];

		if (box_libexec_find("box-sbfiles", helper, sizeof(helper), err) < 0)
			goto out;
	}
	if (!id && strcmp(op, "create") == 0) {
		gen_id(s->id);
	} else if (!id) {
		box_err_set(err, BOX_E_USAGE, "%s needs a SESSION", op);
		goto out;
	} else if (!box_sbstate_valid_id(id)) {
		box_err_set(err, BOX_E_INVALID, "invalid session id '%.80s' (want [a-z0-9][a-z0-9_-]*)",
			    id);
		box_err_path(err, "$.session");
		goto out;
	} else {
		box_fmt(s->id, sizeof(s->id), "%s", id);
	}
	box_fmt(s->sdir, sizeof(s->sdir), "%s/%s", s->dir, s->id);
	if (s->sdir[0] != '/') {
		box_err_set(err, BOX_E_INVALID, "BOX_STATE_DIR must be an absolute path");
		goto out;
	}
	/* an agent that may create nothing leaves nothing behind, not even a lock file: an
	 * absent session is refused before the lock (and again under it, for a race) */
	if (io && io->no_create) {
		struct stat st;
		char rec[PATH_MAX + 16];

		box_fmt(rec, sizeof(rec), "%s/state.json", s->sdir);
		if ((strcmp(op, "create") == 0 || lstat(rec, &st) < 0) && no_create(s, err))
			goto out;
	}
	/* box_sbstate_lock makes the sessions directory when it is missing */
	s->lockfd = box_sbstate_lock(s->dir, s->id, BOX_SANDBOX_LOCK_WAIT_MS, err);
	if (s->lockfd < 0)
		goto out;
	need_rec = strcmp(op, "create") != 0;
	if (need_rec) {
		if (load(s, err) < 0) {
			/* DESIGN.md: an operation on an absent session creates it first */
			if (err->code != BOX_E_NOT_FOUND || !(strcmp(op, "exec") == 0 ||
			    strcmp(op, "read") == 0 || strcmp(op, "write") == 0 ||
			    strcmp(op, "ls") == 0 || strcmp(op, "snapshot") == 0))
				goto out;
			if (no_create(s, err))
				goto out;
			box_err_init(err);
			box_sbstate_release(&s->rec);
			if (create_session(s, err) < 0)
				goto out;
		}
	} else if (box_sbstate_read(s->dir, s->id, &s->rec, err) == 0) {
		box_err_set(err, BOX_E_CONFLICT, "session %s exists", s->id);
		goto out;
	} else if (err->code != BOX_E_NOT_FOUND || no_create(s, err)) {
		goto out;
	} else {
		box_err_init(err);
		box_sbstate_release(&s->rec);
	}
	if (s->have_rec && box_json_get_str(req, "provider", NULL) &&
	    strcmp(box_json_get_str(req, "provider", ""), s->rec.provider) != 0) {
		box_err_set(err, BOX_E_CONFLICT, "provider mismatch: session %s was made by %s, not %s",
			    s->id, s->rec.provider, box_json_get_str(req, "provider", ""));
		box_err_path(err, "$.provider");
		goto out;
	}
	if (strcmp(op, "create") == 0)
		res = op_create(s, err);
	else if (strcmp(op, "exec") == 0)
		res = op_exec(s, err);
	else if (strcmp(op, "read") == 0)
		res = op_read(s, err);
	else if (strcmp(op, "write") == 0)
		res = op_write(s, err);
	else if (strcmp(op, "ls") == 0)
		res = op_ls(s, err);
	else if (strcmp(op, "pause") == 0)
		res = op_pause_resume(s, 1, err);
	else if (strcmp(op, "resume") == 0)
		res = op_pause_resume(s, 0, err);
	else if (strcmp(op, "status") == 0)
		res = op_status(s, err);
	else if (strcmp(op, "snapshot") == 0)
		res = op_snapshot(s, err);
	else if (strcmp(op, "restore") == 0)
		res = op_restore(s, err);
	else if (strcmp(op, "delete") == 0)
		res = op_delete(s, err);
	else
		box_err_set(err, BOX_E_USAGE, "unknown operation '%.32s'", op);
out:
	if (s->lockfd >= 0)
		close(s->lockfd);
	box_sbstate_release(&s->rec);
	free(s);
	return res;
}

/* ---- --describe --tools ---- */

static const char tools_intro[] =
	"\n\nTools: a command inside the sandbox calls a granted tool with "
	"`box-tool NAME --FLAG VALUE...` (flags from the tool's input schema: kebab-case names, "
	"--flag/--no-flag for booleans, one flag per array item) or `box-tool NAME --json '{...}'`; "
	"`box-tool list` lists the tools and `box-tool NAME --help` their flags. box-tool prints "
	"one JSON object, {\"ok\": true, \"result\": {...}}, or {\"ok\": false, \"error\": {...}} "
	"with a non-zero exit status. The tools run outside the sandbox, each under its own "
	"timeout. The tools:";

static int describe_tools(const char *file, cJSON *o, struct box_buf *text, struct box_err *err)
{
	char abs[PATH_MAX];
	struct box_toolset *set;
	cJSON *list;
	const cJSON *t;
	int rc;

	/* found and loaded exactly as create does, so that both fail alike */
	if (!realpath(file, abs)) {
		box_err_sys(err, "tools file %.200s", file);
		err->code = BOX_E_NOT_FOUND;
		box_err_path(err, "$.tools");
		return -1;
	}
	set = box_tools_load(abs, err);
	if (!set)
		return -1;
	list = box_tools_describe(set, 0);
	box_tools_free(set);
	if (!list || !cJSON_AddItemToObject(o, "tools", list)) {
		cJSON_Delete(list);
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	}
	/* integers printed as written, as the tool socket prints them to box-tool list */
	box_json_exact(list);
	if (cJSON_GetArraySize(list) == 0)
		return box_buf_puts(text, "\n\nTools: none is granted (box-tool list is empty).", err);
	rc = box_buf_puts(text, tools_intro, err);
	cJSON_ArrayForEach(t, list) {
		const cJSON *in = cJSON_GetObjectItemCaseSensitive(t, "input_schema");
		char *schema = cJSON_PrintUnformatted(in);
		int destructive = box_json_get_bool(t, "destructive", 0);
		int approval = box_json_get_bool(t, "requires_approval", 0);

		rc |= box_buf_printf(text, err, "\n- %s%s%s: %s\n  input schema: %s",
				     box_json_get_str(t, "name", ""),
				     destructive ? " (destructive)" : "",
				     approval ? " (requires approval)" : "",
				     box_json_get_str(t, "description", ""), schema ? schema : "{}");
		cJSON_free(schema);
	}
	return rc ? -1 : 0;
}

/* 1 if an earlier entry of files ("/input/NAME" or "/input/NAME/") is called base. */
static int input_taken(const cJSON *files, const char *base)
{
	const cJSON *f;
	size_t n = strlen(base);

	cJSON_ArrayForEach(f, files) {
		const char *name = f->valuestring + strlen("/input/");

		if (strncmp(name, base, n) == 0 && (name[n] == 0 || strcmp(name + n, "/") == 0))
			return 1;
	}
	return 0;
}

/* The names create's copy_inputs gives the inputs in /input, after the same checks. */
static int describe_inputs(const cJSON *req, cJSON *files, struct box_buf *text,
			   struct box_err *err)
{
	const cJSON *e;
	int idx = 0, rc = 0;

	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(req, "input")) {
		const char *base = strrchr(e->valuestring, '/');
		char path[32], guest[NAME_MAX + 16];
		struct stat st;

		base = base ? base + 1 : e->valuestring;
		box_fmt(path, sizeof(path), "$.input[%d]", idx++);
		if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0 ||
		    strlen(base) > NAME_MAX) {
			box_err_set(err, BOX_E_INVALID, "input '%.200s' has no file name", e->valuestring);
			box_err_path(err, path);
			return -1;
		}
		if (stat(e->valuestring, &st) < 0) {
			if (errno == ENOENT || errno == ENOTDIR)
				box_err_set(err, BOX_E_NOT_FOUND, "%.200s does not exist", e->valuestring);
			else
				box_err_sys(err, "cannot stat %.200s", e->valuestring);
			box_err_path(err, path);
			return -1;
		}
		if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
			box_err_set(err, BOX_E_INVALID, "%.200s is neither a regular file nor a directory",
				    e->valuestring);
			box_err_path(err, path);
			return -1;
		}
		if (input_taken(files, base)) {
			box_err_set(err, BOX_E_CONFLICT, "%s already exists", base);
			box_err_path(err, path);
			return -1;
		}
		box_fmt(guest, sizeof(guest), "/input/%s%s", base, S_ISDIR(st.st_mode) ? "/" : "");
		if (!cJSON_AddItemToArray(files, cJSON_CreateString(guest)))
			return box_err_set(err, BOX_E_INTERNAL, "out of memory");
		rc |= box_buf_printf(text, err, "%s%s", idx > 1 ? ", " : " It holds ", guest);
	}
	rc |= box_buf_puts(text, idx ? "." : " It is empty.", err);
	return rc ? -1 : 0;
}

static int describe_mounts(const cJSON *req, cJSON *arr, struct box_buf *text,
			   struct box_err *err)
{
	struct mounts ms;
	size_t k;
	int rc = 0;

	if (parse_mounts(cJSON_GetObjectItemCaseSensitive(req, "mount"), &ms, err) < 0)
		return -1;
	for (k = 0; k < ms.n && rc == 0; k++) {
		cJSON *m = cJSON_CreateObject();

		if (!m || !cJSON_AddStringToObject(m, "path", ms.m[k].guest) ||
		    !cJSON_AddStringToObject(m, "mode", ms.m[k].ro ? "ro" : "rw") ||
		    !cJSON_AddItemToArray(arr, m)) {
			cJSON_Delete(m);
			rc = box_err_set(err, BOX_E_INTERNAL, "out of memory");
			break;
		}
		rc = box_buf_printf(text, err, "%s%s (%s)", k ? ", " : " Mounted: ", ms.m[k].guest,
				    ms.m[k].ro ? "read-only" : "read-write");
	}
	if (rc == 0 && ms.n)
		rc = box_buf_puts(text, ".", err);
	mounts_release(&ms);
	return rc ? -1 : 0;
}

cJSON *box_sandbox_describe(const cJSON *req, const char *name, const char *description,
			    const char *request_schema, const char *result_schema,
			    struct box_err *err)
{
	struct box_buf text = BOX_BUF_INIT((size_t)64 << 20);
	cJSON *o = cJSON_CreateObject(), *extra = cJSON_CreateObject(), *in, *out, *it;
	cJSON *mounts = NULL, *files = NULL;

	in = box_json_parse(request_schema, strlen(request_schema), err);
	out = box_json_parse(result_schema, strlen(result_schema), err);
	if (!o || !extra || !in || !out) {
		box_err_set(err, BOX_E_INTERNAL, "built-in schema does not parse");
		goto fail;
	}
	if (!is_local(box_json_get_str(req, "provider", "local"))) {
		box_err_set(err, BOX_E_UNSUPPORTED, "--tools is a local provider feature");
		box_err_path(err, "$.provider");
		goto fail;
	}
	if (box_buf_puts(&text, description, err) < 0 ||
	    describe_tools(box_json_get_str(req, "tools", ""), extra, &text, err) < 0)
		goto fail;
	mounts = cJSON_AddArrayToObject(extra, "mounts");
	files = cJSON_AddArrayToObject(extra, "input_files");
	if (!mounts || !files || !cJSON_AddArrayToObject(extra, "allowed_hosts")) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto fail;
	}
	if (box_buf_puts(&text, "\n\nFiles: /workspace is persistent and writable (the working "
			 "directory of exec). /input is read-only.", err) < 0 ||
	    describe_inputs(req, files, &text, err) < 0 ||
	    box_buf_puts(&text, " /output is emptied before each exec, and the files written "
			 "there are listed (path, size, sha256) in its result. /tmp is private.",
			 err) < 0 ||
	    describe_mounts(req, mounts, &text, err) < 0 ||
	    box_buf_puts(&text, "\n\nNetwork: none (no allowed hosts): nothing inside the sandbox "
			 "reaches the network; the tool socket of box-tool is its only way out.",
			 err) < 0)
		goto fail;
	if (!cJSON_AddStringToObject(o, "name", name) ||
	    !cJSON_AddStringToObject(o, "description", text.data)) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto fail;
	}
	cJSON_AddItemToObject(o, "input_schema", in);
	cJSON_AddItemToObject(o, "output_schema", out);
	/* what the commands inside can reach, after what every definition has */
	while ((it = extra->child)) {
		cJSON_DetachItemViaPointer(extra, it);
		cJSON_AddItemToObject(o, it->string, it);
	}
	cJSON_Delete(extra);
	box_buf_release(&text);
	return o;
fail:
	box_buf_release(&text);
	cJSON_Delete(extra);
	cJSON_Delete(o);
	cJSON_Delete(in);
	cJSON_Delete(out);
	return NULL;
}
