#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sandbox.h"
#include "credenv.h"
#include "libexec.h"
#include "atomic.h"
#include "base64.h"
#include "buf.h"
#include "confine.h"
#include "nsbox.h"
#include "netproxy.h"
#include "provider.h"
#include "fswalk.h"
#include "sbcopy.h"
#include "sbjobs.h"
#include "clock.h"
#include "utf8.h"
#include "policy.h"
#include "sbprov.h"
#include "sbrepro.h"
#include "sbstate.h"
#include "sbtty.h"
#include "tools.h"
#include "banned.h"

#define LIST_MAX 1000
#define TTY_TIMEOUT_MS 86400000   /* a terminal exec's default wall time */

const struct box_field box_sandbox_fields[] = {
	{ "op", BOX_F_STRING, 0, 16, 0, "the operation (the first word: create exec shell read write "
	  "cp-in cp-out ls pause resume status snapshot restore history delete ps logs wait kill "
	  "schedule unschedule list network expose unexpose)", "OP", 0 },
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
	{ "timeout_ms", BOX_F_INT, 1, 86400000, 0, "exec: wall time of one exec; wait, logs --follow: how long to wait "
	  "(default 60000)", "MS", 0 },
	{ "max_output_bytes", BOX_F_INT, 0, (int64_t)64 << 20, 0, "bytes of stdout and of stderr "
	  "kept in the result (default 1 MiB)", "BYTES", 0 },
	{ "disk_bytes", BOX_F_INT, 1 << 20, INT64_MAX, 0, "bytes of /workspace + /output + /input, "
	  "host writes included, and the size of /tmp (default 1 GiB)", "BYTES", 0 },
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
	{ "tty", BOX_F_BOOL, 0, 0, 0, "exec: run the command on a terminal of the sandbox's, "
	  "relayed to the caller's (shell implies it)", NULL, 0 },
	{ "force_tty", BOX_F_BOOL, 0, 0, 0, "exec --tty, shell: relay a stdin that is no "
	  "terminal all the same", NULL, 0 },
	{ "path", BOX_F_STRING, 0, 4096, 0, "read, write, ls: a path under /workspace, /input or "
	  "/output", "PATH", 0 },
	{ "host_dir", BOX_F_STRING, 1, 4096, 0, "cp-in, cp-out: the host directory (cp-out: "
	  "absent or empty)", "DIR", 0 },
	{ "output", BOX_F_STRING, 1, 4096, 0, "read: write the file's bytes to the host FILE "
	  "(replaced atomically) instead of into the result", "FILE", 0 },
	{ "content", BOX_F_STRING, 0, BOX_SANDBOX_READ_MAX, 0, "write: the text to write (default: "
	  "stdin)", "TEXT", 0 },
	{ "content_base64", BOX_F_STRING, 0, BOX_SANDBOX_READ_MAX * 2, 0, "write: the bytes to "
	  "write, in base64", "B64", 0 },
	{ "digest", BOX_F_STRING, 0, 80, 0, "restore: the snapshot's digest", "sha256:HEX", 0 },
	{ "from", BOX_F_STRING, 0, BOX_SBSTATE_ID_MAX, 0, "restore: take the snapshot from this "
	  "session", "ID", 0 },
	{ "tools", BOX_F_STRING, 0, 4096, 0, "create: grant the tools of this manifest or box.lock "
	  "to box-tool inside the sandbox", "FILE", 0 },
	{ "limit", BOX_F_INT, 1, BOX_SBREPRO_HISTORY_MAX, 0, "history: the last N execs only",
	  "N", 0 },
	{ "export", BOX_F_STRING, 1, 4096, 0, "snapshot: also write it as a self-contained archive "
	  "to FILE", "FILE", 0 },
	{ "from_snapshot", BOX_F_STRING, 1, 4096, 0, "create: make the session from an archive "
	  "of snapshot --export", "FILE", 0 },
	{ "allow_host", BOX_F_STRINGS, 0, BOX_POLICY_MAX_RULES, 0, "create, network: let the "
	  "guest reach HOST:PORT or [METHODS ]http[s]://HOST[:PORT][/PATH] (*.DOMAIN: the names "
	  "under it) through the session's proxy (repeatable)", "RULE", 0 },
	{ "deny_host", BOX_F_STRINGS, 0, BOX_NETPROXY_DENY_MAX, 0, "create, network: refuse "
	  "HOST or *.DOMAIN (optionally :PORT) whatever allows it (repeatable)", "PATTERN", 0 },
	{ "guest_port", BOX_F_INT, 1, 65535, 0, "expose, unexpose: the port of a server on the "
	  "guest's 127.0.0.1", "PORT", 0 },
	{ "background", BOX_F_BOOL, 0, 0, 0, "exec: start the command and return its handle at "
	  "once; it runs until it ends, is killed or the session is deleted", NULL, 0 },
	{ "every", BOX_F_INT, 1, BOX_SBJOBS_EVERY_MAX, 0, "schedule: run the command every this "
	  "many seconds while the session runs", "SECONDS", 0 },
	{ "handle", BOX_F_STRING, 0, BOX_SBJOBS_HANDLE_MAX, 0, "logs, wait, kill: a background "
	  "command (bg-N); unschedule: a schedule (sched-N)", "HANDLE", 0 },
	{ "signal", BOX_F_STRING, 0, 16, 0, "kill: the signal, a name (TERM, SIGKILL) or number "
	  "(default TERM)", "SIG", 0 },
	{ "since", BOX_F_INT, 0, INT64_MAX, 0, "logs: the byte offset of the log to read from "
	  "(default 0)", "OFFSET", 0 },
	{ "follow", BOX_F_BOOL, 0, 0, 0, "logs: stream the log as output events until the "
	  "command ends", NULL, 0 },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0 },
};

struct box_sandbox_ctx {
	char dir[PATH_MAX];     /* $BOX_STATE_DIR/sandboxes */
	char sdir[PATH_MAX];    /* .../<id> */
	char id[BOX_SBSTATE_ID_MAX + 1];
	const cJSON *req;
	const struct box_sandbox_io *io;
	const struct box_sandbox_op *op;
	const struct box_sbprov *p;    /* the session's provider */
	struct box_sbprov_session ps;  /* what the provider sees of the session */
	struct box_sbstate rec;
	cJSON *env;                    /* the session's --env resolved, for start */
	const char **envv;             /* its strings, for ps.env */
	int have_rec;
	int corrupt;                   /* delete: a record there that cannot be read */
	int lockfd;                    /* the record's lock */
	int runlockfd;                 /* the instance lock (not for beside_exec operations) */
	int created, resumed, replaced, init_ran;
};

/* ---- small helpers ---- */

/* The providers built in; any other name is a plug-in, box-provider-NAME. */
static const struct box_sbprov *provider_of(const char *name)
{
	static const struct box_sbprov *const builtin[] = { &box_nsbox_provider };
	size_t k;

	for (k = 0; k < sizeof(builtin) / sizeof(builtin[0]); k++)
		if (strcmp(name, builtin[k]->name) == 0)
			return builtin[k];
	return &box_provider_plugin;
}

static const char *libexec_dir(void)
{
	const char *d = getenv("BOX_LIBEXEC_DIR");

	return d && *d ? d : box_libexec_pkgdir();
}

static int64_t lim(const struct box_sandbox_ctx *s, const char *key, int64_t def)
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
		const char *s = e->valuestring, *eq = strchr(s, '='), *val, *rule;
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
		val = eq ? eq + 1 : getenv(name);
		if ((rule = box_credenv_name_rule(name)) ||
		    (val && (rule = box_credenv_value_rule(val)))) {
			box_err_set(err, BOX_E_POLICY, "%s looks like a credential (%s): box never "
				    "passes credentials into a sandbox", name, rule);
			box_err_path(err, path);
			return -1;
		}
	}
	return 0;
}

/* Appends the "NAME=VALUE" strings of env (host values looked up now) to out. */
static void resolve_env(const cJSON *env, cJSON *out)
{
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
}

/* The strings of arr as a NULL-terminated vector pointing into arr (which must outlive it). */
static const char **strv_of(const cJSON *arr)
{
	const char **v = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(*v));
	const cJSON *e;
	size_t k = 0;

	if (!v)
		return NULL;
	cJSON_ArrayForEach(e, arr)
		v[k++] = e->valuestring;
	return v;
}

/* A result of the session: {"ok": true, "session": ID} then the members of m (taken). */
static cJSON *result_of(const struct box_sandbox_ctx *s, cJSON *m)
{
	cJSON *o = cJSON_CreateObject(), *it;

	cJSON_AddTrueToObject(o, "ok");
	cJSON_AddStringToObject(o, "session", s->id);
	while (m && (it = m->child)) {
		cJSON_DetachItemViaPointer(m, it);
		if (strcmp(it->string, "ok") == 0 || strcmp(it->string, "session") == 0)
			cJSON_Delete(it);
		else
			cJSON_AddItemToObject(o, it->string, it);
	}
	cJSON_Delete(m);
	return o;
}

/* ---- the record ---- */

/* A change of state, made durable. */
static int save(struct box_sandbox_ctx *s, struct box_err *err)
{
	box_sbstate_now(s->rec.last_used_at);
	return box_sbstate_write(s->dir, &s->rec, err);
}

/* Runtime state (the holder, running/paused/lost): replaced atomically but not fsynced. A
 * crash can lose it, and the next operation's observation of the provider corrects any drift
 * (DESIGN.md's state machine); what must survive (the record's birth, init) uses save(). */
static int save_runtime(struct box_sandbox_ctx *s, struct box_err *err)
{
	return box_sbstate_touch(s->dir, &s->rec, err);
}

/* The use stamp of an operation that changed nothing else (the keeper's idle clock). */
static void touch(struct box_sandbox_ctx *s)
{
	struct box_err e;
	char now[BOX_SBSTATE_TIME_MAX];

	if (s->lockfd < 0)
		return;
	/* the idle clock counts seconds: one stamp a second is enough */
	box_sbstate_now(now);
	if (strncmp(now, s->rec.last_used_at, 19) == 0)
		return;
	box_err_init(&e);
	(void)box_sbstate_touch(s->dir, &s->rec, &e);
}

/* ---- exec ---- */

struct exec_spec {
	const cJSON *argv;     /* array of strings */
	const cJSON *env;      /* extra --env of this exec */
	const char *cwd;
	const char *stdin_data;
	int stream_stdin;      /* stdin_data NULL: the caller's stdin_fd is streamed */
	int timeout_ms;
	int64_t cpu_ms;        /* this exec's, else the session's; <= 0: none */
	int64_t max_output_bytes;
	int events;
	int tty;               /* on a terminal of the guest's, relayed to the caller's */
};

/* The limits one exec may set for itself; the others are the session's, fixed at create. */
static void exec_limits(const struct box_sandbox_ctx *s, struct exec_spec *e)
{
	e->timeout_ms = (int)box_json_get_int(s->req, "timeout_ms",
					      lim(s, "timeout_ms", BOX_SANDBOX_DEFAULT_TIMEOUT_MS));
	e->cpu_ms = box_json_get_int(s->req, "cpu_ms", lim(s, "cpu_ms", 0));
	e->max_output_bytes = box_json_get_int(s->req, "max_output_bytes",
					       lim(s, "max_output_bytes",
						   BOX_SANDBOX_DEFAULT_OUTPUT));
}

/* A limit of the session's instance given on an exec of an existing session: the same value
 * is accepted, another one is invalid_request (it would not apply), before anything runs. */
static int session_limits_match(const struct box_sandbox_ctx *s, struct box_err *err)
{
	static const struct {
		const char *key;
		int64_t def;
	} keys[] = {
		{ "memory", BOX_SANDBOX_DEFAULT_MEMORY }, { "pids", BOX_SANDBOX_DEFAULT_PIDS },
		{ "disk_bytes", BOX_SANDBOX_DEFAULT_DISK },
		{ "idle_pause_after_seconds", BOX_SANDBOX_DEFAULT_IDLE },
	};
	size_t k;

	if (!s->have_rec)
		return 0;   /* the exec creates the session with them */
	for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(s->req, keys[k].key);
		int64_t have = lim(s, keys[k].key, keys[k].def);
		char path[64];

		if (!cJSON_IsNumber(v) || box_json_get_int(s->req, keys[k].key, 0) == have)
			continue;
		box_err_set(err, BOX_E_INVALID, "%s is the session's, set when it was created "
			    "(%lld); an exec cannot change it", keys[k].key, (long long)have);
		box_fmt(path, sizeof(path), "$.%s", keys[k].key);
		box_err_path(err, path);
		return -1;
	}
	return 0;
}

/* The configured limits of an exec of the session, for its error object. */
static struct box_sbexec_conf conf_of(const struct box_sandbox_ctx *s, const struct exec_spec *e)
{
	struct box_sbexec_conf c = {
		.timeout_ms = e->timeout_ms,
		.memory = lim(s, "memory", BOX_SANDBOX_DEFAULT_MEMORY),
		.pids = lim(s, "pids", BOX_SANDBOX_DEFAULT_PIDS),
		.cpu_ms = e->cpu_ms,
		.disk_bytes = lim(s, "disk_bytes", BOX_SANDBOX_DEFAULT_DISK),
	};

	return c;
}

/* exec --events: the caller's callback, given at most max bytes of each stream (the rest is
 * in the result's full_output_path, as for the result itself). */
struct events_cap {
	const struct box_sandbox_io *io;
	int64_t max, sent[2];
};

static void events_capped(void *ctx, int stream, const char *p, size_t n)
{
	struct events_cap *c = ctx;
	int64_t *sent = &c->sent[stream == 1 ? 0 : 1];
	size_t room = *sent < c->max ? (size_t)(c->max - *sent) : 0;

	if (n > room)
		n = room;
	if (n == 0)
		return;
	*sent += (int64_t)n;
	c->io->on_output(c->io->ctx, stream, p, n);
}

/* exec --events: each network attempt, to the caller's callback */
static void network_event(void *ctx, const cJSON *attempt)
{
	struct events_cap *c = ctx;

	c->io->on_network(c->io->ctx, attempt);
}

/* Runs the command of e through the provider: 0 with *r filled (release it), or -1. */
static int run_exec(struct box_sandbox_ctx *s, const struct exec_spec *e,
		    struct box_sbexec_result *r, struct box_err *err)
{
	struct box_sbexec x = { 0 };
	struct events_cap cap = { s->io, e->max_output_bytes, { 0, 0 } };
	cJSON *env = cJSON_CreateArray();
	const char **argv = strv_of(e->argv), **envp = NULL;
	int rc = -1;

	box_sbexec_result_init(r);
	if (env) {
		resolve_env(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(
				    s->rec.provider_data, "config"), "env"), env);
		resolve_env(e->env, env);
		envp = strv_of(env);
	}
	if (!argv || !envp) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	x.argv = argv;
	x.env = envp;
	x.cwd = e->cwd;
	x.stdin_data = e->stdin_data;
	x.stdin_len = e->stdin_data ? strlen(e->stdin_data) : 0;
	x.stdin_stream = !e->stdin_data && e->stream_stdin && s->io && s->io->stream_stdin;
	x.stdin_fd = x.stdin_stream ? s->io->stdin_fd : -1;
	x.timeout_ms = e->timeout_ms;
	x.cpu_ms = e->cpu_ms;
	x.max_output_bytes = e->max_output_bytes;
	x.tty = e->tty;
	if (e->tty)
		box_sbtty_size(0, &x.tty_rows, &x.tty_cols);
	if (e->events && s->io && s->io->on_output) {
		x.on_output = events_capped;
		x.ctx = &cap;
		if (s->io->on_network)
			x.on_network = network_event;
	}
	rc = s->p->exec(&s->ps, &x, r, err);
out:
	free(argv);
	free(envp);
	cJSON_Delete(env);
	return rc;
}

static int run_init(struct box_sandbox_ctx *s, struct box_err *err)
{
	const cJSON *cmd;
	int idx = 0;

	cJSON_ArrayForEach(cmd, s->rec.init) {
		struct exec_spec e = { 0 };
		struct box_sbexec_result r;
		struct box_sbexec_conf conf;
		struct box_err why;
		cJSON *argv = cJSON_CreateArray();

		cJSON_AddItemToArray(argv, cJSON_CreateString("/bin/sh"));
		cJSON_AddItemToArray(argv, cJSON_CreateString("-c"));
		cJSON_AddItemToArray(argv, cJSON_CreateString(cmd->valuestring));
		e.argv = argv;
		e.timeout_ms = (int)lim(s, "timeout_ms", BOX_SANDBOX_DEFAULT_TIMEOUT_MS);
		e.cpu_ms = lim(s, "cpu_ms", 0);
		e.max_output_bytes = lim(s, "max_output_bytes", BOX_SANDBOX_DEFAULT_OUTPUT);
		conf = conf_of(s, &e);
		if (run_exec(s, &e, &r, err) < 0) {
			box_sbexec_result_release(&r);
			cJSON_Delete(argv);
			goto failed;
		}
		cJSON_Delete(argv);
		box_sbexec_judge(&r, &conf, &why);
		if (why.code != BOX_OK) {
			box_err_set(err, BOX_E_GUEST, "init command %d (%.200s) failed: %s; stderr: %.1000s",
				    idx + 1, cmd->valuestring, why.message,
				    r.err.data ? r.err.data : "");
			box_sbexec_result_release(&r);
			goto failed;
		}
		box_sbexec_result_release(&r);
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

/* ---- creating and ensuring ---- */

static void limits_from_req(const cJSON *req, cJSON *limits)
{
	static const char *const keys[] = { "memory", "pids", "cpu_ms", "timeout_ms",
		"max_output_bytes", "disk_bytes", "idle_pause_after_seconds" };
	size_t k;

	for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, keys[k]);

		if (cJSON_IsNumber(v))
			box_json_add_int64(limits, keys[k], box_json_get_int(req, keys[k], 0));
	}
}

/*
 * Removes the session's files but its record (state.json): the tree goes first, so that a
 * delete that fails keeps the session, and running delete again finishes it. Every tree goes
 * through box_fswalk_remove: any depth, mode, width and file type.
 */
static int remove_session_files(struct box_sandbox_ctx *s, struct box_err *err)
{
	int d = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int sd, r = 0;

	if (d < 0)
		return errno == ENOENT ? 0 : box_err_sys(err, "cannot open %s", s->dir);
	sd = openat(d, s->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	close(d);
	if (sd < 0)
		return errno == ENOENT ? 0 : box_err_sys(err, "cannot open %s", s->sdir);
	/* a few passes: what is removed cannot come back, but a name read after a removal
	 * may be missed by the stream */
	for (int pass = 0, left = 1; left && pass < 4 && r == 0; pass++) {
		int fd = dup(sd);
		DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
		struct dirent *de;

		if (!dir) {
			if (fd >= 0)
				close(fd);
			r = box_err_sys(err, "cannot read %s", s->sdir);
			break;
		}
		left = 0;
		while (r == 0 && (de = readdir(dir))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
			    !strcmp(de->d_name, "state.json"))
				continue;
			left = 1;
			r = box_fswalk_remove(sd, de->d_name, err);
		}
		closedir(dir);
	}
	close(sd);
	return r;
}

/* Removes dir/<id> whole, record included: a leftover of a session that has no record. */
static int remove_session_dir(struct box_sandbox_ctx *s, struct box_err *err)
{
	int d = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r;

	if (d < 0)
		return errno == ENOENT ? 0 : box_err_sys(err, "cannot open %s", s->dir);
	r = box_fswalk_remove(d, s->id, err);
	close(d);
	return r;
}

/* A leftover tree of the id with no record (a delete that failed before this code, a crash
 * between the two): removed under the lock before a new record is written, so that a new
 * session never inherits an old workspace. A record that exists is left for the conflict. */
static int remove_leftover(struct box_sandbox_ctx *s, struct box_err *err)
{
	char p[PATH_MAX];
	struct stat sb;

	if (box_fmt(p, sizeof(p), "%s/state.json", s->sdir) < 0)
		return box_err_set(err, BOX_E_INVALID, "session path too long");
	if (lstat(p, &sb) == 0)
		return 0;
	if (remove_session_dir(s, err) < 0) {
		char why[sizeof(err->message)];

		snprintf(why, sizeof(why), "%s", err->message);
		box_err_set(err, err->code, "cannot remove what is left of an earlier session %s: "
			    "%.800s", s->id, why);
		return -1;
	}
	return 0;
}

/* Tree first, then the record: 0, or -1 with err and the session kept. */
static int delete_session(struct box_sandbox_ctx *s, struct box_err *err)
{
	if (remove_session_files(s, err) < 0) {
		char why[sizeof(err->message)];

		snprintf(why, sizeof(why), "%s", err->message);
		box_err_set(err, err->code, "cannot remove the files of session %s: %.800s; the "
			    "session is kept: delete it again", s->id, why);
		return -1;
	}
	return box_sbstate_delete(s->dir, s->id, err);
}

/* The provenance of the tools granted at create (config's "tools" file), kept in the
 * record's config as "tools_granted": the execs report them without loading them again. */
static int granted_tools(cJSON *config, struct box_err *err)
{
	const char *path = box_json_get_str(config, "tools", NULL);
	cJSON *t;

	if (!path)
		return 0;
	if (!(t = box_sbrepro_tools(path, err)))
		return -1;
	cJSON_AddItemToObject(config, "tools_granted", t);
	return 0;
}

/* The record of a new session from the request, checked by its provider first: nothing is
 * created when the request asks for what the provider does not offer. */
static int new_record(struct box_sandbox_ctx *s, const char *provider, struct box_err *err)
{
	const cJSON *req = s->req, *v;
	cJSON *config = cJSON_CreateObject();

	cJSON_AddItemToObject(config, "env", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(req,
							  "env"), 1) ?: cJSON_CreateArray());
	if (s->p->configure(req, provider, libexec_dir(), config, err) < 0 ||
	    granted_tools(config, err) < 0 || box_sbstate_new(&s->rec, s->id, provider, err) < 0) {
		cJSON_Delete(config);
		return -1;
	}
	limits_from_req(req, s->rec.limits);
	cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(req, "init"))
		cJSON_AddItemToArray(s->rec.init, cJSON_CreateString(v->valuestring));
	cJSON_AddItemToObject(s->rec.provider_data, "config", config);
	if (cJSON_GetArraySize(s->rec.init) == 0)
		box_sbstate_now(s->rec.init_completed_at);
	return 0;
}

static int start(struct box_sandbox_ctx *s, const cJSON *create_req, struct box_err *err);

/* 1 (err set) when the session is absent and the agent's policy lets it create none */
static int no_create(const struct box_sandbox_ctx *s, struct box_err *err)
{
	if (!s->io || !s->io->no_create)
		return 0;
	box_err_set(err, BOX_E_POLICY, "session %s does not exist, and the policy does not let "
		    "a request create one", s->id);
	box_err_path(err, "$.session");
	return 1;
}

static int create_session(struct box_sandbox_ctx *s, struct box_err *err)
{
	const char *provider = box_json_get_str(s->req, "provider", "local");

	if (no_create(s, err))
		return -1;
	if (!box_sbstate_valid_provider(provider))
		return box_err_set(err, BOX_E_INVALID, "invalid provider name '%.40s'", provider),
		       box_err_path(err, "$.provider"), -1;
	if (check_env(cJSON_GetObjectItemCaseSensitive(s->req, "env"), err) < 0)
		return -1;
	s->p = provider_of(provider);
	box_sbstate_release(&s->rec);
	if (new_record(s, provider, err) < 0 || remove_leftover(s, err) < 0 ||
	    box_sbstate_create(s->dir, &s->rec, err) < 0)
		return -1;
	s->have_rec = 1;
	if (start(s, s->req, err) < 0)
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
		(void)s->p->stop(&s->ps, &e2);
		(void)delete_session(s, &e2);
		s->have_rec = 0;
	}
	return -1;
}

static int need_rec(const struct box_sandbox_ctx *s, struct box_err *err)
{
	return s->have_rec ? 0 : box_err_set(err, BOX_E_NOT_FOUND, "no session %s", s->id);
}

/* Starts a new instance of the session: the provider gets the session's --env resolved. */
static int start(struct box_sandbox_ctx *s, const cJSON *create_req, struct box_err *err)
{
	cJSON_Delete(s->env);
	free(s->envv);
	s->env = cJSON_CreateArray();
	s->envv = NULL;
	if (s->env)
		resolve_env(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(
				    s->rec.provider_data, "config"), "env"), s->env);
	if (!s->env || !(s->envv = strv_of(s->env)))
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	s->ps.env = s->envv;
	return s->p->start(&s->ps, create_req, err);
}

/* A new instance in place of one that is gone (its remains are stopped first). */
static int replace(struct box_sandbox_ctx *s, struct box_err *err)
{
	(void)s->p->stop(&s->ps, &(struct box_err){ 0 });
	if (start(s, NULL, err) < 0)
		return -1;
	s->replaced = 1;
	return 0;
}

/* DESIGN.md's state machine: create when absent (only for operations that may), resume when
 * paused, replace when lost, init once (retried after a failure). */
static int ensure(struct box_sandbox_ctx *s, int may_create, struct box_err *err)
{
	struct box_sb_plan plan;
	int obs;

	if (!s->have_rec)
		return may_create ? create_session(s, err) : need_rec(s, err);
	obs = s->p->observe(&s->ps, err);
	if (obs < 0)
		return -1;
	if (box_sbstate_plan(&s->rec, box_json_get_str(s->req, "provider", s->rec.provider),
			     (enum box_sb_observed)obs, &plan, err) < 0)
		return -1;
	switch (plan.action) {
	case BOX_SB_ACT_RESUME:
		if (s->p->resume(&s->ps, err) < 0)
			return -1;
		s->resumed = 1;
		/* a holder killed while frozen dies only once thawed */
		if (s->p->observe(&s->ps, err) == BOX_SB_OBS_ABSENT) {
			s->rec.state = BOX_SB_LOST;
			if (replace(s, err) < 0)
				return -1;
		}
		break;
	case BOX_SB_ACT_REPLACE:
		s->rec.state = BOX_SB_LOST;
		if (save_runtime(s, err) < 0 || replace(s, err) < 0)
			return -1;
		/* a new instance that starts blank runs init again */
		if (!s->p->keeps_state)
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

/* The operation's own ensure: may it create the session? (the operation table says) */
static int ready(struct box_sandbox_ctx *s, struct box_err *err)
{
	return ensure(s, s->op->may_create, err);
}

static void add_flags(const struct box_sandbox_ctx *s, cJSON *o)
{
	if (s->created)
		cJSON_AddTrueToObject(o, "created");
	if (s->resumed)
		cJSON_AddTrueToObject(o, "resumed");
	if (s->replaced)
		cJSON_AddTrueToObject(o, "replaced");
	if (s->init_ran)
		cJSON_AddTrueToObject(o, "init_ran");
}

static cJSON *status_json(struct box_sandbox_ctx *s, const char *observed)
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
	if (s->p->status)
		s->p->status(&s->ps, o);
	add_flags(s, o);
	return o;
}

/* ---- operations ---- */

static cJSON *create_from_snapshot(struct box_sandbox_ctx *s, const char *file,
				   struct box_err *err);

static cJSON *op_create(struct box_sandbox_ctx *s, struct box_err *err)
{
	const char *file = box_json_get_str(s->req, "from_snapshot", NULL);

	if (file)
		return create_from_snapshot(s, file, err);
	if (create_session(s, err) < 0)
		return NULL;
	return status_json(s, NULL);
}

/* An exec that failed: {"ok": false, "session", "ran", "error"}; err stays set. */
static cJSON *exec_failure(const char *id, int ran, const struct box_err *err)
{
	cJSON *o = box_err_result(err);

	if (!o)
		return NULL;
	if (id && id[0])
		cJSON_AddStringToObject(o, "session", id);
	cJSON_AddBoolToObject(o, "ran", ran);
	return o;
}

/* Takes the record's lock again after a run and reads the record again (status may have
 * written it meanwhile). -1 when either fails: nothing more is saved then. */
static int relock(struct box_sandbox_ctx *s)
{
	struct box_sbstate fresh;
	struct box_err e;

	box_err_init(&e);
	s->lockfd = box_sbstate_lock(s->dir, s->id, BOX_SANDBOX_LOCK_WAIT_MS, &e);
	if (s->lockfd < 0)
		return -1;
	if (box_sbstate_read(s->dir, s->id, &fresh, &e) < 0) {
		close(s->lockfd);
		s->lockfd = -1;
		return -1;
	}
	box_sbstate_release(&s->rec);
	s->rec = fresh;
	return 0;
}

/* The run of an exec without the record's lock (the instance lock stays held: no other exec,
 * pause, snapshot, restore or delete comes between), so that status, read, write and ls
 * answer while it runs. */
static int run_exec_unlocked(struct box_sandbox_ctx *s, const struct exec_spec *e,
			     struct box_sbexec_result *r, struct box_err *err)
{
	int rc;

	if (s->lockfd >= 0)
		close(s->lockfd);
	s->lockfd = -1;
	rc = run_exec(s, e, r, err);
	(void)relock(s);
	return rc;
}

/* The exec's entry in the session's history. The command ran: a history that cannot be
 * written loses the entry, never the result. */
static void remember(struct box_sandbox_ctx *s, const cJSON *res)
{
	struct box_err e;
	cJSON *entry;

	box_err_init(&e);
	entry = box_sbrepro_history_entry(s->req, res, &e);
	if (entry)
		(void)box_sbrepro_history_add(s->sdir, entry, box_sbrepro_history_cap(
			lim(s, "disk_bytes", BOX_SANDBOX_DEFAULT_DISK)), &e);
	cJSON_Delete(entry);
}

/* The argv of --command STRING: /bin/sh -c STRING (NULL when out of memory: the caller's
 * argv check then fails). */
static cJSON *shell_argv(const char *cmd)
{
	cJSON *a = cJSON_CreateArray();

	if (a && (!cJSON_AddItemToArray(a, cJSON_CreateString("/bin/sh")) ||
		  !cJSON_AddItemToArray(a, cJSON_CreateString("-c")) ||
		  !cJSON_AddItemToArray(a, cJSON_CreateString(cmd)))) {
		cJSON_Delete(a);
		a = NULL;
	}
	return a;
}

/* ---- background commands and schedules (lib/sandbox/sbjobs.h) ---- */

/* What a background command (or a schedule) cannot have, refused before anything runs. */
static int background_refused(const struct box_sandbox_ctx *s, struct box_err *err)
{
	if (!box_json_get_bool(s->req, "background", 0) && strcmp(s->op->name, "schedule") != 0)
		return 0;
	if (cJSON_GetObjectItemCaseSensitive(s->req, "stdin"))
		return box_err_set(err, BOX_E_USAGE, "a background command reads no stdin: leave "
				   "out --stdin"), box_err_path(err, "$.stdin"), -1;
	if (box_json_get_bool(s->req, "events", 0))
		return box_err_set(err, BOX_E_USAGE, "a background command's output is read with "
				   "logs, not --events"), box_err_path(err, "$.events"), -1;
	if (strcmp(s->op->name, "schedule") == 0 ? !s->p->schedule : !s->p->background)
		return box_err_set(err, BOX_E_UNSUPPORTED, "the %s provider has no background "
				   "commands", s->p->name ? s->p->name : "plug-in"), -1;
	return 0;
}

/* The command of e as the provider takes it (argv and the session's and exec's env): 0 with
 * x filled (free x->argv and x->env), or -1. */
static int exec_command(struct box_sandbox_ctx *s, const struct exec_spec *e,
			struct box_sbexec *x, cJSON *env, struct box_err *err)
{
	memset(x, 0, sizeof(*x));
	resolve_env(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(
			    s->rec.provider_data, "config"), "env"), env);
	resolve_env(e->env, env);
	x->argv = strv_of(e->argv);
	x->env = strv_of(env);
	x->cwd = e->cwd;
	if (!x->argv || !x->env)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	return 0;
}

/* exec --background: the handle, the pid in the guest and ran. */
static cJSON *exec_background(struct box_sandbox_ctx *s, const struct exec_spec *e,
			      struct box_err *err)
{
	struct box_sbexec x = { 0 };
	char handle[BOX_SBJOBS_HANDLE_MAX];
	int dfd, pid = 0, ran = 0;
	cJSON *env = cJSON_CreateArray(), *res = NULL;

	dfd = box_sbjobs_dir(s->sdir, err);
	if (dfd < 0 || !env || exec_command(s, e, &x, env, err) < 0 ||
	    box_sbjobs_reserve(dfd, e->argv, NULL, handle, err) < 0)
		goto out;
	if (s->p->background(&s->ps, &x, dfd, handle, &pid, &ran, err) < 0) {
		if (!ran)
			box_sbjobs_unreserve(dfd, handle);
		res = exec_failure(s->id, ran, err);
		goto out;
	}
	res = result_of(s, NULL);
	cJSON_AddStringToObject(res, "handle", handle);
	cJSON_AddNumberToObject(res, "pid", pid);
	cJSON_AddTrueToObject(res, "background");
	cJSON_AddTrueToObject(res, "ran");
	add_flags(s, res);
	touch(s);
out:
	free((void *)x.argv);
	free((void *)x.env);
	if (dfd >= 0)
		close(dfd);
	cJSON_Delete(env);
	return res ? res : exec_failure(s->id, 0, err);
}

static cJSON *op_ps(struct box_sandbox_ctx *s, struct box_err *err)
{
	if (need_rec(s, err) < 0)
		return NULL;
	return result_of(s, box_sbjobs_list(s->sdir, err));
}

/* The record of the request's handle, the record's lock given up first: logs, wait and
 * kill never hold up the session. NULL with err. */
static cJSON *job_of(struct box_sandbox_ctx *s, int *dfd, struct box_err *err)
{
	cJSON *rec;

	*dfd = -1;
	if (need_rec(s, err) < 0)
		return NULL;
	if (s->lockfd >= 0)
		close(s->lockfd);
	s->lockfd = -1;
	*dfd = box_sbjobs_dir(s->sdir, err);
	if (*dfd < 0)
		return NULL;
	rec = box_sbjobs_get(*dfd, box_json_get_str(s->req, "handle", ""), err);
	if (!rec) {
		close(*dfd);
		*dfd = -1;
	}
	return rec;
}

/* The job's record as a result: its state and end, without the host's details. */
static cJSON *job_result(struct box_sandbox_ctx *s, cJSON *rec)
{
	cJSON_DeleteItemFromObjectCaseSensitive(rec, "watcher");
	cJSON_DeleteItemFromObjectCaseSensitive(rec, "watcher_start");
	cJSON_DeleteItemFromObjectCaseSensitive(rec, "starter");
	cJSON_DeleteItemFromObjectCaseSensitive(rec, "starter_start");
	return result_of(s, rec);
}

static int job_live(const cJSON *rec)
{
	const char *st = box_json_get_str(rec, "state", "");

	return strcmp(st, "running") == 0 || strcmp(st, "starting") == 0;
}

/* logs: the log from --since (at most BOX_SBJOBS_LOGS_CHUNK bytes); --follow streams it as
 * output events until the command has ended and all of it is read, or --timeout-ms (default
 * a minute) has passed: then the answer's next_offset is where a next --follow goes on. */
static cJSON *op_logs(struct box_sandbox_ctx *s, struct box_err *err)
{
	int64_t until = box_now_ms() + box_json_get_int(s->req, "timeout_ms",
							BOX_SANDBOX_DEFAULT_TIMEOUT_MS);
	int64_t since = box_json_get_int(s->req, "since", 0), at;
	int follow = box_json_get_bool(s->req, "follow", 0) && s->io && s->io->on_output, dfd;
	char *chunk = NULL;
	ssize_t n = 0;
	struct box_buf text;
	cJSON *rec = job_of(s, &dfd, err), *res = NULL;

	box_buf_init(&text, (size_t)BOX_SBJOBS_LOGS_CHUNK * 3 + 1);
	if (!rec || !(chunk = malloc(BOX_SBJOBS_LOGS_CHUNK)))
		goto out;
	for (at = since;; at += n) {
		int live = job_live(rec);

		n = box_sbjobs_log_read(dfd, box_json_get_str(rec, "handle", ""), at, chunk,
					BOX_SBJOBS_LOGS_CHUNK, err);
		if (n < 0)
			goto out;
		if (!follow)
			break;
		if (n > 0) {
			s->io->on_output(s->io->ctx, 1, chunk, (size_t)n);
			continue;
		}
		if (!live || box_now_ms() >= until)
			break;
		usleep(100000);
		cJSON_Delete(rec);
		if (!(rec = box_sbjobs_get(dfd, box_json_get_str(s->req, "handle", ""), err)))
			goto out;
	}
	if (box_utf8_sanitize(chunk, (size_t)n, &text, err) < 0 ||
	    box_buf_append(&text, "", 1, err) < 0)
		goto out;
	cJSON_AddItemToObject(rec, "offset", cJSON_CreateNumber((double)since));
	cJSON_AddItemToObject(rec, "next_offset", cJSON_CreateNumber((double)(at + n)));
	cJSON_AddStringToObject(rec, "output", follow ? "" : text.data);
	res = job_result(s, rec);
	rec = NULL;
out:
	if (dfd >= 0)
		close(dfd);
	free(chunk);
	box_buf_release(&text);
	cJSON_Delete(rec);
	return res;
}

/* wait: until the command ends, or timeout after --timeout-ms (default 60 s). */
static cJSON *op_wait(struct box_sandbox_ctx *s, struct box_err *err)
{
	int64_t ms = box_json_get_int(s->req, "timeout_ms", BOX_SANDBOX_DEFAULT_TIMEOUT_MS);
	int64_t until = box_now_ms() + ms;
	int dfd;
	cJSON *rec = job_of(s, &dfd, err);

	while (rec && job_live(rec)) {
		if (box_now_ms() >= until) {
			box_err_set(err, BOX_E_TIMEOUT, "%s still runs after %lld ms",
				    box_json_get_str(rec, "handle", ""), (long long)ms);
			cJSON_Delete(rec);
			rec = NULL;
			break;
		}
		usleep(50000);
		cJSON_Delete(rec);
		rec = box_sbjobs_get(dfd, box_json_get_str(s->req, "handle", ""), err);
	}
	if (dfd >= 0)
		close(dfd);
	return rec ? job_result(s, rec) : NULL;
}

/* kill: --signal (default SIGTERM) to the command's process group. */
static cJSON *op_kill(struct box_sandbox_ctx *s, struct box_err *err)
{
	const char *name = box_json_get_str(s->req, "signal", "TERM");
	int sig = box_sbjobs_signal_of(name), dfd;
	cJSON *rec, *res;
	char text[24];

	if (!sig) {
		box_err_set(err, BOX_E_INVALID, "unknown signal '%.16s' (a name such as TERM or "
			    "SIGKILL, or a number 1-64)", name);
		return box_err_path(err, "$.signal"), NULL;
	}
	rec = job_of(s, &dfd, err);
	if (!rec)
		return NULL;
	cJSON_Delete(rec);
	if (box_sbjobs_signal(dfd, box_json_get_str(s->req, "handle", ""), sig, err) < 0) {
		close(dfd);
		return NULL;
	}
	close(dfd);
	res = result_of(s, NULL);
	cJSON_AddStringToObject(res, "handle", box_json_get_str(s->req, "handle", ""));
	box_fmt(text, sizeof(text), "SIG%s", sigabbrev_np(sig) ? sigabbrev_np(sig) : "RT");
	cJSON_AddStringToObject(res, "signal", sig < 32 ? text : name);
	cJSON_AddTrueToObject(res, "sent");
	return res;
}

/* schedule: ARGV (or --command) every --every seconds while the session runs. */
static cJSON *op_schedule(struct box_sandbox_ctx *s, struct box_err *err)
{
	struct exec_spec e = { 0 };
	struct box_sbexec x = { 0 };
	char handle[BOX_SBJOBS_HANDLE_MAX];
	const cJSON *argv = cJSON_GetObjectItemCaseSensitive(s->req, "argv");
	const char *cmd = box_json_get_str(s->req, "command", NULL);
	int every = (int)box_json_get_int(s->req, "every", 0), rc = -1;
	cJSON *env = NULL, *shell = NULL, *res = NULL;

	if (!every)
		return box_err_set(err, BOX_E_USAGE, "schedule needs --every SECONDS"), NULL;
	if (cmd && cJSON_GetArraySize(argv) > 0)
		return box_err_set(err, BOX_E_USAGE, "give either --command or ARGV, not both"), NULL;
	if (!cmd && cJSON_GetArraySize(argv) == 0)
		return box_err_set(err, BOX_E_USAGE, "schedule needs ARGV after -- or --command"),
		       NULL;
	if (need_rec(s, err) < 0 || background_refused(s, err) < 0 ||
	    check_env(cJSON_GetObjectItemCaseSensitive(s->req, "env"), err) < 0 ||
	    ready(s, err) < 0)
		return NULL;
	if (cmd)
		shell = shell_argv(cmd);
	e.argv = cmd ? shell : argv;
	e.env = cJSON_GetObjectItemCaseSensitive(s->req, "env");
	e.cwd = box_json_get_str(s->req, "cwd", NULL);
	env = cJSON_CreateArray();
	if (env && exec_command(s, &e, &x, env, err) == 0)
		rc = s->p->schedule(&s->ps, &x, e.argv, every, handle, err);
	if (rc == 0) {
		res = result_of(s, NULL);
		cJSON_AddStringToObject(res, "handle", handle);
		cJSON_AddNumberToObject(res, "every", every);
		cJSON_AddItemToObject(res, "argv", cJSON_Duplicate(e.argv, 1));
	}
	free((void *)x.argv);
	free((void *)x.env);
	cJSON_Delete(env);
	cJSON_Delete(shell);
	return res;
}

static cJSON *op_unschedule(struct box_sandbox_ctx *s, struct box_err *err)
{
	const char *h = box_json_get_str(s->req, "handle", NULL);
	cJSON *res;

	if (s->io && s->io->no_schedule)
		return box_err_set(err, BOX_E_POLICY, "schedules are the operator's: the policy "
				   "does not grant every"), NULL;
	if (need_rec(s, err) < 0 || box_sbjobs_schedule_remove(s->sdir, h, err) < 0)
		return NULL;
	res = result_of(s, NULL);
	cJSON_AddStringToObject(res, "handle", h);
	cJSON_AddTrueToObject(res, "unscheduled");
	return res;
}

/* What a terminal exec refuses before anything runs: a stdin that is no terminal (unless
 * force_tty), --stdin and --events (the terminal is both). */
static int tty_check(const struct box_sandbox_ctx *s, const struct exec_spec *e,
		     struct box_err *err)
{
	if (e->stdin_data) {
		box_err_set(err, BOX_E_USAGE, "a terminal exec reads the terminal: give --tty or "
			    "--stdin, not both");
		box_err_path(err, "$.stdin");
		return -1;
	}
	if (e->events) {
		box_err_set(err, BOX_E_USAGE, "a terminal exec writes to the terminal: give --tty or "
			    "--events, not both");
		box_err_path(err, "$.events");
		return -1;
	}
	if (!isatty(0) && !box_json_get_bool(s->req, "force_tty", 0))
		return box_err_set(err, BOX_E_USAGE, "%s needs a terminal on stdin (give --force-tty "
				   "to relay a stdin that is none)", s->op->name);
	return 0;
}

static cJSON *op_exec(struct box_sandbox_ctx *s, struct box_err *err)
{
	struct exec_spec e = { 0 };
	struct box_sbexec_result r;
	struct box_sbexec_conf conf;
	struct box_err why;
	const cJSON *argv = cJSON_GetObjectItemCaseSensitive(s->req, "argv");
	const char *cmd = box_json_get_str(s->req, "command", NULL);
	cJSON *res = NULL, *shell = NULL, *prov = NULL;

	if (cmd && cJSON_GetArraySize(argv) > 0)
		return box_err_set(err, BOX_E_USAGE, "give either --command or ARGV, not both"), NULL;
	if (!cmd && cJSON_GetArraySize(argv) == 0)
		return box_err_set(err, BOX_E_USAGE, "exec needs ARGV after -- or --command"), NULL;
	e.tty = box_json_get_bool(s->req, "tty", 0) || strcmp(s->op->name, "shell") == 0;
	e.stdin_data = box_json_get_str(s->req, "stdin", NULL);
	e.events = box_json_get_bool(s->req, "events", 0);
	if (e.tty && box_json_get_bool(s->req, "background", 0))
		return box_err_set(err, BOX_E_USAGE, "a terminal exec cannot go to the background: "
				   "give --tty or --background, not both"),
		       box_err_path(err, "$.background"), NULL;
	if (background_refused(s, err) < 0 ||
	    check_env(cJSON_GetObjectItemCaseSensitive(s->req, "env"), err) < 0 ||
	    session_limits_match(s, err) < 0 || (e.tty && tty_check(s, &e, err) < 0) ||
	    ready(s, err) < 0)
		return NULL;
	if (e.tty && !s->p->tty)
		return box_err_set(err, BOX_E_UNSUPPORTED, "the %s provider has no terminals",
				   s->rec.provider), NULL;
	if (cmd)
		shell = shell_argv(cmd);
	e.argv = cmd ? shell : argv;
	e.env = cJSON_GetObjectItemCaseSensitive(s->req, "env");
	e.cwd = box_json_get_str(s->req, "cwd", NULL);
	/* a terminal exec's relay reads stdin itself (--force-tty types a piped one) */
	e.stream_stdin = !e.tty;
	exec_limits(s, &e);
	/* a person at the terminal: unless the request or the session says otherwise, the wall
	 * time is the field's bound (24 h), not an agent's minute */
	if (e.tty && !cJSON_GetObjectItemCaseSensitive(s->req, "timeout_ms") &&
	    lim(s, "timeout_ms", -1) < 0)
		e.timeout_ms = TTY_TIMEOUT_MS;
	if (box_json_get_bool(s->req, "background", 0)) {
		box_sbexec_result_init(&r);
		res = exec_background(s, &e, err);
		goto out;
	}
	/* before the command runs: a provenance that cannot be made fails an exec that ran not */
	prov = box_sbrepro_provenance(s->sdir, s->req, s->io ? s->io->policy : NULL,
				      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(
					      s->rec.provider_data, "config"), "tools_granted"), err);
	if (!prov) {
		box_sbexec_result_init(&r);
		res = exec_failure(s->id, 0, err);
		goto out;
	}
	if (run_exec_unlocked(s, &e, &r, err) < 0) {
		/* the instance died between the check and the exec: replace it, once (only when
		 * the command did not run, and with the record's lock again; never with a streamed
		 * stdin, which may have been read already and cannot be given again) */
		if (r.ran || err->code != BOX_E_NOT_FOUND || !s->p->retry_gone || s->lockfd < 0 ||
		    (!e.stdin_data && s->io && s->io->stream_stdin)) {
			res = exec_failure(s->id, r.ran, err);
			goto out;
		}
		box_sbexec_result_release(&r);
		box_err_init(err);
		if (ensure(s, 0, err) < 0 || run_exec_unlocked(s, &e, &r, err) < 0) {
			res = exec_failure(s->id, r.ran, err);
			goto out;
		}
	}
	/* the one rendering of the result, and what the session adds to it */
	conf = conf_of(s, &e);
	box_sbexec_judge(&r, &conf, &why);
	res = box_sbexec_to_json(&r);
	if (!res) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		res = exec_failure(s->id, 1, err);
		goto out;
	}
	cJSON_AddStringToObject(res, "session", s->id);
	cJSON_AddTrueToObject(res, "ran");
	add_flags(s, res);
	cJSON_AddBoolToObject(res, "ok", why.code == BOX_OK);
	if (why.code != BOX_OK)
		cJSON_AddItemToObject(res, "error", box_err_to_json(&why));
	cJSON_AddItemToObject(res, "provenance", prov);
	prov = NULL;
	remember(s, res);
	touch(s);
out:
	box_sbexec_result_release(&r);
	cJSON_Delete(shell);
	cJSON_Delete(prov);
	return res;
}

/* shell SESSION: an interactive shell on a terminal of the sandbox's: exec --tty of bash -l,
 * or sh -l where the guest has no bash, when no ARGV is given. */
static cJSON *op_shell(struct box_sandbox_ctx *s, struct box_err *err)
{
	static const char *const login[] = {
		"/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; fi; "
		"exec sh -l",
	};
	const cJSON *orig = s->req;
	cJSON *req, *res;

	if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(s->req, "argv")) > 0 ||
	    box_json_get_str(s->req, "command", NULL))
		return op_exec(s, err);
	req = cJSON_Duplicate(s->req, 1);
	if (!req)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	cJSON_DeleteItemFromObjectCaseSensitive(req, "argv");
	cJSON_AddItemToObject(req, "argv", cJSON_CreateStringArray(login, 3));
	s->req = req;
	res = op_exec(s, err);
	s->req = orig;
	cJSON_Delete(req);
	return res;
}

/* The path of the file API, or NULL with usage. */
static const char *req_path(const struct box_sandbox_ctx *s, const char *def, struct box_err *err)
{
	const char *path = box_json_get_str(s->req, "path", def);

	if (!path || !*path)
		return box_err_set(err, BOX_E_USAGE, "a path is needed"), box_err_path(err, "$.path"),
		       NULL;
	return path;
}

/* read --output FILE: the bytes of a read's result (content, in its encoding) replace the
 * host's FILE atomically (a temp file beside it, renamed; a symlink at FILE is replaced, never
 * followed); the result keeps path and size and names output instead of the content. */
static int read_to_host(cJSON *res, const char *file, struct box_err *err)
{
	const char *content = box_json_get_str(res, "content", "");
	const char *slash = strrchr(file, '/'), *name = slash ? slash + 1 : file;
	struct box_buf dec;
	char dir[PATH_MAX];
	int dfd, rc = -1;

	if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return box_err_set(err, BOX_E_INVALID, "--output names a directory, not a file: "
				   "'%.200s'", file), box_err_path(err, "$.output"), -1;
	box_fmt(dir, sizeof(dir), "%.*s", slash ? (int)(slash - file) + (slash == file) : 1,
		slash ? file : ".");
	box_buf_init(&dec, (size_t)BOX_SANDBOX_READ_MAX);
	if (strcmp(box_json_get_str(res, "encoding", "utf-8"), "base64") == 0) {
		if (box_base64_decode(content, strlen(content), &dec, err) < 0)
			goto out;
	} else if (box_buf_append(&dec, content, strlen(content), err) < 0) {
		goto out;
	}
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		box_err_sys(err, "cannot open the directory of --output %.200s", file);
		box_err_path(err, "$.output");
		goto out;
	}
	rc = box_atomic_write(dfd, name, dec.data ? dec.data : "", dec.len, 0644, err);
	close(dfd);
	if (rc < 0) {
		box_err_path(err, "$.output");
		goto out;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(res, "content");
	cJSON_DeleteItemFromObjectCaseSensitive(res, "encoding");
	cJSON_AddStringToObject(res, "output", file);
out:
	box_buf_release(&dec);
	return rc;
}

static cJSON *op_read(struct box_sandbox_ctx *s, struct box_err *err)
{
	const char *path, *output = box_json_get_str(s->req, "output", NULL);
	cJSON *res;

	if (ready(s, err) < 0 || !(path = req_path(s, NULL, err)))
		return NULL;
	res = s->p->read(&s->ps, path, err);
	if (!res)
		return NULL;
	if (output && read_to_host(res, output, err) < 0) {
		cJSON_Delete(res);
		return NULL;
	}
	touch(s);
	return result_of(s, res);
}

static cJSON *op_write(struct box_sandbox_ctx *s, struct box_err *err)
{
	const char *text = box_json_get_str(s->req, "content", NULL);
	const char *b64 = box_json_get_str(s->req, "content_base64", NULL);
	const char *path;
	struct box_buf dec;
	cJSON *res = NULL;

	if (!text && !b64)
		return box_err_set(err, BOX_E_USAGE, "write needs content"), NULL;
	if (text && b64)
		return box_err_set(err, BOX_E_USAGE, "give content or content_base64, not both"), NULL;
	box_buf_init(&dec, (size_t)BOX_SANDBOX_READ_MAX);
	if (b64 && box_base64_decode(b64, strlen(b64), &dec, err) < 0) {
		box_err_path(err, "$.content_base64");
		goto out;
	}
	if (ready(s, err) < 0 || !(path = req_path(s, NULL, err)))
		goto out;
	res = s->p->write(&s->ps, path, b64 ? (dec.data ? dec.data : "") : text,
			  b64 ? dec.len : strlen(text), err);
	if (res) {
		touch(s);
		res = result_of(s, res);
	}
out:
	box_buf_release(&dec);
	return res;
}

/* cp-in and cp-out: the host directory made absolute (box-sbfiles runs elsewhere). */
static cJSON *op_cp(struct box_sandbox_ctx *s, struct box_err *err)
{
	int in = strcmp(s->op->name, "cp-in") == 0;
	const char *host = box_json_get_str(s->req, "host_dir", NULL), *path;
	char abs[PATH_MAX], cwd[PATH_MAX];
	cJSON *res;

	if (!s->p->copy)
		return box_err_set(err, BOX_E_UNSUPPORTED, "provider %s cannot copy trees: %s is "
				   "the local provider's", s->rec.provider, s->op->name), NULL;
	if (!host || !*host)
		return box_err_set(err, BOX_E_USAGE, "%s needs a HOST_DIR", s->op->name),
		       box_err_path(err, "$.host_dir"), NULL;
	if (host[0] != '/') {
		if (!getcwd(cwd, sizeof(cwd)) ||
		    box_fmt(abs, sizeof(abs), "%s/%s", cwd, host) < 0)
			return box_err_set(err, BOX_E_INVALID, "HOST_DIR is too long"),
			       box_err_path(err, "$.host_dir"), NULL;
		host = abs;
	}
	if (ready(s, err) < 0 || !(path = req_path(s, NULL, err)))
		return NULL;
	res = s->p->copy(&s->ps, in, host, path, err);
	if (!res)
		return NULL;
	cJSON_DeleteItemFromObjectCaseSensitive(res, "ok");
	cJSON_AddStringToObject(res, "path", path);
	cJSON_AddStringToObject(res, "host_dir", box_json_get_str(s->req, "host_dir", ""));
	touch(s);
	return result_of(s, res);
}

static cJSON *op_ls(struct box_sandbox_ctx *s, struct box_err *err)
{
	const char *path;
	cJSON *res;

	if (!s->p->list)
		return box_err_set(err, BOX_E_UNSUPPORTED, "ls is not part of the provider protocol: "
				   "exec ls instead"), NULL;
	if (ready(s, err) < 0 || !(path = req_path(s, "/workspace", err)))
		return NULL;
	res = s->p->list(&s->ps, path, err);
	if (!res)
		return NULL;
	touch(s);
	return result_of(s, res);
}

static cJSON *op_pause(struct box_sandbox_ctx *s, struct box_err *err)
{
	int obs;

	if (need_rec(s, err) < 0 || (obs = s->p->observe(&s->ps, err)) < 0)
		return NULL;
	if (obs == BOX_SB_OBS_ABSENT) {
		if (ensure(s, 0, err) < 0)
			return NULL;
		obs = BOX_SB_OBS_RUNNING;
	}
	if (obs == BOX_SB_OBS_RUNNING && s->p->pause(&s->ps, err) < 0)
		return NULL;
	s->rec.state = BOX_SB_PAUSED;
	if (save_runtime(s, err) < 0)
		return NULL;
	return status_json(s, NULL);
}

static cJSON *op_resume(struct box_sandbox_ctx *s, struct box_err *err)
{
	if (ready(s, err) < 0)
		return NULL;
	return status_json(s, NULL);
}

static cJSON *op_status(struct box_sandbox_ctx *s, struct box_err *err)
{
	static const enum box_sbstate_state state_of[] = {
		[BOX_SB_OBS_ABSENT] = BOX_SB_LOST, [BOX_SB_OBS_RUNNING] = BOX_SB_RUNNING,
		[BOX_SB_OBS_PAUSED] = BOX_SB_PAUSED,
	};
	static const char *const seen[] = {
		[BOX_SB_OBS_ABSENT] = "absent", [BOX_SB_OBS_RUNNING] = "running",
		[BOX_SB_OBS_PAUSED] = "paused",
	};
	int obs;

	if (need_rec(s, err) < 0 || (obs = s->p->observe(&s->ps, err)) < 0)
		return NULL;
	/* drift: the record is corrected, the instance is left for the next operation */
	if (s->rec.state != state_of[obs]) {
		s->rec.state = state_of[obs];
		(void)save_runtime(s, err);
	}
	return status_json(s, seen[obs]);
}

/* delete of a session whose record cannot be read (garbage, truncated, empty, of another
 * shape or id): the instance its directory notes is ended, then its files go. */
static cJSON *delete_corrupt(struct box_sandbox_ctx *s, struct box_err *err)
{
	cJSON *o;

	if (s->p->stop_noted && s->p->stop_noted(&s->ps, err) < 0)
		return NULL;
	if (remove_session_dir(s, err) < 0)
		return NULL;
	o = result_of(s, NULL);
	cJSON_AddTrueToObject(o, "deleted");
	cJSON_AddTrueToObject(o, "record_unreadable");
	return o;
}

static cJSON *op_delete(struct box_sandbox_ctx *s, struct box_err *err)
{
	cJSON *o;

	if (s->corrupt)
		return delete_corrupt(s, err);
	if (need_rec(s, err) < 0)
		return NULL;
	/* the background commands' watchers first: none writes into the files removed below */
	box_sbjobs_stop_watchers(s->sdir);
	if (s->p->stop(&s->ps, err) < 0 && err->code != BOX_E_NOT_FOUND)
		return NULL;
	box_err_init(err);
	if (delete_session(s, err) < 0)
		return NULL;
	o = result_of(s, NULL);
	cJSON_AddTrueToObject(o, "deleted");
	return o;
}

/* snapshot --export FILE: the snapshot just taken (res), its session's limits and the
 * provenance, written to FILE by box-sbfiles. */
static int export_snapshot(struct box_sandbox_ctx *s, cJSON *res, const char *file,
			   struct box_err *err)
{
	cJSON *meta = cJSON_CreateObject(), *prov, *out;
	char snaps[PATH_MAX], *text = NULL;
	const char *args[] = { "export", snaps, box_json_get_str(res, "digest", ""), NULL, file,
			       NULL };
	int rc = -1;

	if (!meta)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	prov = box_sbrepro_provenance(s->sdir, s->req, s->io ? s->io->policy : NULL,
				      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(
					      s->rec.provider_data, "config"), "tools_granted"), err);
	if (!prov)
		goto out;
	box_json_add_int64(meta, "version", 1);
	cJSON_AddStringToObject(meta, "session", s->id);
	cJSON_AddStringToObject(meta, "snapshot", args[2]);
	cJSON_AddStringToObject(meta, "created_at", s->rec.created_at);
	cJSON_AddItemToObject(meta, "limits", cJSON_Duplicate(s->rec.limits, 1));
	cJSON_AddItemToObject(meta, "provenance", prov);
	box_fmt(snaps, sizeof(snaps), "%s/snapshots", s->sdir);
	if (!(text = cJSON_PrintUnformatted(meta))) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	args[3] = text;
	if (!(out = box_sbrepro_helper(args, err)))
		goto out;
	cJSON_AddStringToObject(res, "export", file);
	cJSON_AddItemToObject(res, "export_bytes", cJSON_Duplicate(
		cJSON_GetObjectItemCaseSensitive(out, "export_bytes"), 1));
	cJSON_Delete(out);
	rc = 0;
out:
	cJSON_free(text);
	cJSON_Delete(meta);
	return rc;
}

/* network SESSION [--allow-host RULE...] [--deny-host PATTERN...]: each list given replaces
 * the session's; the running proxy takes them at its next connection. Answers the rules. */
static cJSON *op_network(struct box_sandbox_ctx *s, struct box_err *err)
{
	const cJSON *allow = cJSON_GetObjectItemCaseSensitive(s->req, "allow_host");
	const cJSON *deny = cJSON_GetObjectItemCaseSensitive(s->req, "deny_host");
	cJSON *config, *net, *o;

	if (need_rec(s, err) < 0)
		return NULL;
	if (!s->p->net_rules)
		return box_err_set(err, BOX_E_UNSUPPORTED, "provider %s has no network rules",
				   s->rec.provider), NULL;
	config = cJSON_GetObjectItemCaseSensitive(s->rec.provider_data, "config");
	net = cJSON_GetObjectItemCaseSensitive(config, "net");
	if (!net && config)
		net = cJSON_AddObjectToObject(config, "net");
	if (!net)
		return box_err_set(err, BOX_E_INTERNAL, "the session's record has no config"), NULL;
	if (allow || deny) {
		if (s->p->net_rules(NULL, allow ? allow : cJSON_GetObjectItemCaseSensitive(net, "allow"),
				    deny ? deny : cJSON_GetObjectItemCaseSensitive(net, "deny"), err) < 0)
			return NULL;
		if (allow) {
			cJSON_DeleteItemFromObjectCaseSensitive(net, "allow");
			cJSON_AddItemToObject(net, "allow", cJSON_Duplicate(allow, 1));
		}
		if (deny) {
			cJSON_DeleteItemFromObjectCaseSensitive(net, "deny");
			cJSON_AddItemToObject(net, "deny", cJSON_Duplicate(deny, 1));
		}
		if (save(s, err) < 0 ||
		    s->p->net_rules(&s->ps, cJSON_GetObjectItemCaseSensitive(net, "allow"),
				    cJSON_GetObjectItemCaseSensitive(net, "deny"), err) < 0)
			return NULL;
	}
	o = result_of(s, NULL);
	if (!o)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	cJSON_AddItemToObject(o, "allow_host", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(
				      net, "allow"), 1) ?: cJSON_CreateArray());
	cJSON_AddItemToObject(o, "deny_host", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(
				      net, "deny"), 1) ?: cJSON_CreateArray());
	return o;
}

static int guest_port_of(const struct box_sandbox_ctx *s, int *port, struct box_err *err)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(s->req, "guest_port");

	if (!p)
		return box_err_set(err, BOX_E_USAGE, "%s needs a GUEST_PORT", s->op->name);
	if (!cJSON_IsNumber(p) || p->valuedouble < 1 || p->valuedouble > 65535 ||
	    p->valuedouble != (double)(int)p->valuedouble) {
		box_err_set(err, BOX_E_USAGE, "GUEST_PORT must be a port number (1 to 65535)");
		box_err_path(err, "$.guest_port");
		return -1;
	}
	*port = (int)p->valuedouble;
	return 0;
}

/* expose SESSION GUEST_PORT: a port of the host's loopback forwarded by the session's proxy
 * to a server of the guest, until unexpose, pause or delete. */
static cJSON *op_expose(struct box_sandbox_ctx *s, struct box_err *err)
{
	int port, host_port = 0;
	char url[64];
	cJSON *o;

	if (guest_port_of(s, &port, err) < 0)
		return NULL;
	if (need_rec(s, err) < 0)
		return NULL;
	if (!s->p->expose)
		return box_err_set(err, BOX_E_UNSUPPORTED, "provider %s cannot expose ports",
				   s->rec.provider), NULL;
	if (ready(s, err) < 0 || s->p->expose(&s->ps, 1, port, &host_port, err) < 0)
		return NULL;
	o = result_of(s, NULL);
	box_json_add_int64(o, "guest_port", port);
	box_json_add_int64(o, "host_port", host_port);
	box_fmt(url, sizeof(url), "http://127.0.0.1:%d/", host_port);
	cJSON_AddStringToObject(o, "url", url);
	return o;
}

static cJSON *op_unexpose(struct box_sandbox_ctx *s, struct box_err *err)
{
	int port;
	cJSON *o;

	if (guest_port_of(s, &port, err) < 0)
		return NULL;
	if (need_rec(s, err) < 0)
		return NULL;
	/* a sandbox that is not running exposes nothing: there is nothing to close */
	if (s->rec.state == BOX_SB_RUNNING && s->p->expose &&
	    s->p->expose(&s->ps, 0, port, NULL, err) < 0 && err->code != BOX_E_IO)
		return NULL;
	box_err_init(err);
	o = result_of(s, NULL);
	box_json_add_int64(o, "guest_port", port);
	cJSON_AddTrueToObject(o, "unexposed");
	return o;
}

static cJSON *op_snapshot(struct box_sandbox_ctx *s, struct box_err *err)
{
	const char *file = box_json_get_str(s->req, "export", NULL);
	cJSON *res;

	if (file && !s->p->restore)
		return box_err_set(err, BOX_E_UNSUPPORTED, "snapshot --export is a local provider "
				   "feature"), NULL;
	if (ready(s, err) < 0 || !(res = s->p->checkpoint(&s->ps, err)))
		return NULL;
	touch(s);
	if (file && export_snapshot(s, res, file, err) < 0) {
		cJSON_Delete(res);
		return NULL;
	}
	return result_of(s, res);
}

/* The meta of an imported snapshot checked, and its limits added to req where req has none:
 * only integer limits in their ranges, a string session and an object provenance. */
static int take_meta(const cJSON *meta, cJSON *req, struct box_err *err)
{
	static const char *const keys[] = { "memory", "pids", "cpu_ms", "timeout_ms",
		"max_output_bytes", "disk_bytes", "idle_pause_after_seconds" };
	const cJSON *limits = cJSON_GetObjectItemCaseSensitive(meta, "limits"), *v;
	cJSON *check = cJSON_CreateObject();
	struct box_err why;
	size_t k;
	int rc = 0;

	box_err_init(&why);
	if (!box_json_is_int_literal(cJSON_GetObjectItemCaseSensitive(meta, "version")) ||
	    box_json_get_int(meta, "version", 0) != 1)
		rc = box_err_set(&why, BOX_E_INVALID, "version is not 1");
	else if (limits && !cJSON_IsObject(limits))
		rc = box_err_set(&why, BOX_E_INVALID, "limits is not an object");
	else if ((v = cJSON_GetObjectItemCaseSensitive(meta, "provenance")) && !cJSON_IsObject(v))
		rc = box_err_set(&why, BOX_E_INVALID, "provenance is not an object");
	else if ((v = cJSON_GetObjectItemCaseSensitive(meta, "session")) && !cJSON_IsString(v))
		rc = box_err_set(&why, BOX_E_INVALID, "session is not a string");
	cJSON_ArrayForEach(v, limits) {
		if (rc < 0)
			break;
		for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			if (strcmp(v->string, keys[k]) == 0)
				break;
		if (k == sizeof(keys) / sizeof(keys[0]))
			rc = box_err_set(&why, BOX_E_INVALID, "unknown limit '%.40s'", v->string);
		else
			cJSON_AddItemToObject(check, v->string, cJSON_Duplicate(v, 1));
	}
	if (rc == 0 && box_json_check(check, box_sandbox_fields, &why) < 0)
		rc = -1;
	cJSON_ArrayForEach(v, check)
		if (rc == 0 && !cJSON_GetObjectItemCaseSensitive(req, v->string))
			cJSON_AddItemToObject(req, v->string, cJSON_Duplicate(v, 1));
	cJSON_Delete(check);
	if (rc < 0) {
		box_err_set(err, BOX_E_INVALID, "exported snapshot: %s%s%s", why.message,
			    why.path[0] ? " at limits" : "", why.path[0] ? why.path + 1 : "");
		box_err_path(err, "$.from_snapshot");
	}
	return rc;
}

/* create --from-snapshot FILE: the archive is extracted and checked by box-sbfiles (bounded
 * by the new session's disk_bytes) before anything of the session exists; the session is
 * then created as any other, and its workspace restored from the imported snapshot. A failure
 * leaves neither the session nor the extracted files. */
static cJSON *create_from_snapshot(struct box_sandbox_ctx *s, const char *file,
				   struct box_err *err)
{
	char max[32], from[PATH_MAX], to[PATH_MAX];
	const char *args[] = { "import", file, s->dir, max, NULL };
	const char *dir, *digest;
	const cJSON *orig = s->req;
	cJSON *imp, *req = NULL, *res = NULL, *o;
	int dfd;

	if (no_create(s, err))
		return NULL;
	if (strcmp(box_json_get_str(s->req, "provider", "local"), "local") != 0)
		return box_err_set(err, BOX_E_UNSUPPORTED, "create --from-snapshot is a local "
				   "provider feature"), NULL;
	box_fmt(max, sizeof(max), "%lld", (long long)box_json_get_int(s->req, "disk_bytes",
									BOX_SANDBOX_DEFAULT_DISK));
	if (!(imp = box_sbrepro_helper(args, err))) {
		if (!err->path[0])
			box_err_path(err, "$.from_snapshot");
		return NULL;
	}
	dir = box_json_get_str(imp, "dir", "");
	digest = box_json_get_str(imp, "digest", "");
	req = cJSON_Duplicate(s->req, 1);
	if (!req || take_meta(cJSON_GetObjectItemCaseSensitive(imp, "meta"), req, err) < 0)
		goto out;
	s->req = req;
	if (create_session(s, err) < 0)
		goto out;
	box_fmt(from, sizeof(from), "%s/%s/snapshots", s->dir, dir);
	box_fmt(to, sizeof(to), "%s/snapshots", s->sdir);
	if (rename(from, to) < 0) {
		box_err_sys(err, "cannot move the imported snapshot into %s", s->sdir);
		goto undo;
	}
	if (s->p->stop(&s->ps, err) < 0 || s->p->restore(&s->ps, s->id, digest, err) < 0 ||
	    ensure(s, 0, err) < 0)
		goto undo;
	res = status_json(s, NULL);
	o = cJSON_AddObjectToObject(res, "from_snapshot");
	cJSON_AddStringToObject(o, "digest", digest);
	cJSON_AddItemToObject(o, "meta", cJSON_DetachItemFromObjectCaseSensitive(imp, "meta"));
	goto out;
undo:
	{
		struct box_err e2;

		box_err_init(&e2);
		(void)s->p->stop(&s->ps, &e2);
		(void)box_sbstate_delete(s->dir, s->id, &e2);
		(void)remove_session_dir(s, &e2);
		s->have_rec = 0;
	}
out:
	dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0 && *dir) {
		(void)box_fswalk_remove(dfd, dir, &(struct box_err){ 0 });
	}
	if (dfd >= 0)
		close(dfd);
	s->req = orig;
	cJSON_Delete(req);
	cJSON_Delete(imp);
	return res;
}

static cJSON *op_restore(struct box_sandbox_ctx *s, struct box_err *err)
{
	const char *digest = box_json_get_str(s->req, "digest", NULL);
	const char *from = box_json_get_str(s->req, "from", s->id);
	cJSON *res;

	if (!digest)
		return box_err_set(err, BOX_E_USAGE, "restore needs a DIGEST"), NULL;
	if (!box_sbstate_valid_id(from))
		return box_err_set(err, BOX_E_INVALID, "invalid session id in --from"),
		       box_err_path(err, "$.from"), NULL;
	if (need_rec(s, err) < 0)
		return NULL;
	if (!s->p->restore)
		return box_err_set(err, BOX_E_UNSUPPORTED, "restore is a local provider feature"),
		       NULL;
	/* the instance holds the kept state itself: a new one is made from the restored state */
	if (s->p->stop(&s->ps, err) < 0)
		return NULL;
	if (s->p->restore(&s->ps, from, digest, err) < 0) {
		struct box_err e2;

		box_err_init(&e2);
		(void)ensure(s, 0, &e2);
		return NULL;
	}
	if (ensure(s, 0, err) < 0)
		return NULL;
	res = status_json(s, NULL);
	cJSON_AddStringToObject(res, "digest", digest);
	cJSON_AddTrueToObject(res, "restored");
	return res;
}

static cJSON *op_history(struct box_sandbox_ctx *s, struct box_err *err)
{
	cJSON *h, *o;

	if (need_rec(s, err) < 0 ||
	    !(h = box_sbrepro_history_read(s->sdir, box_json_get_int(s->req, "limit", 0), err)))
		return NULL;
	o = result_of(s, NULL);
	cJSON_AddItemToObject(o, "history", h);
	return o;
}

static cJSON *op_list(struct box_sandbox_ctx *s, struct box_err *err)
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

/* ---- the operation table ---- */

const struct box_sandbox_op box_sandbox_ops[] = {
	{ .name = "create", .may_create = 1, .session = BOX_SANDBOX_SESSION_OPTIONAL,
	  .run = op_create, .usage = "[--session ID] [OPTIONS]" },
	{ .name = "exec", .may_create = 1, .shares_run = 1, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_exec, .args = { "argv" },
	  .usage = "SESSION [OPTIONS] -- ARGV...\nSESSION [OPTIONS] --command STRING" },
	{ .name = "shell", .may_create = 1, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_shell, .args = { "argv" }, .operator_only = 1,
	  .usage = "SESSION [OPTIONS] [-- ARGV...]" },
	{ .name = "read", .beside_exec = 1, .may_create = 1, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_read, .args = { "path" }, .usage = "SESSION PATH [--output FILE]" },
	{ .name = "write", .beside_exec = 1, .may_create = 1, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_write, .args = { "path" }, .content_from_stdin = 1,
	  .usage = "SESSION PATH [--content TEXT] < DATA" },
	{ .name = "cp-in", .may_create = 0, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_cp, .args = { "host_dir", "path" }, .usage = "SESSION HOST_DIR GUEST_DIR" },
	{ .name = "cp-out", .may_create = 0, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_cp, .args = { "path", "host_dir" }, .usage = "SESSION GUEST_DIR HOST_DIR" },
	{ .name = "ls", .beside_exec = 1, .may_create = 1, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_ls, .args = { "path" }, .usage = "SESSION PATH" },
	{ .name = "pause", .may_create = 0, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_pause, .usage = "SESSION" },
	{ .name = "resume", .may_create = 0, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_resume, .usage = "SESSION" },
	{ .name = "status", .beside_exec = 1, .may_create = 0, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_status, .usage = "SESSION" },
	{ .name = "snapshot", .may_create = 1, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_snapshot, .usage = "SESSION" },
	{ .name = "restore", .may_create = 0, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_restore, .args = { "digest" }, .usage = "SESSION DIGEST [--from SESSION]" },
	{ .name = "history", .may_create = 0, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_history, .usage = "SESSION [--limit N]" },
	{ .name = "delete", .may_create = 0, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_delete, .usage = "SESSION" },
	{ .name = "ps", .beside_exec = 1, .may_create = 0, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_ps, .usage = "SESSION" },
	{ .name = "logs", .beside_exec = 1, .may_create = 0, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_logs, .args = { "handle" }, .usage = "SESSION HANDLE [--follow] [--since OFFSET]" },
	{ .name = "wait", .beside_exec = 1, .may_create = 0, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_wait, .args = { "handle" }, .usage = "SESSION HANDLE [--timeout-ms N]" },
	{ .name = "kill", .beside_exec = 1, .may_create = 0, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_kill, .args = { "handle" }, .usage = "SESSION HANDLE [--signal SIG]" },
	{ .name = "schedule", .shares_run = 1, .may_create = 0,
	  .session = BOX_SANDBOX_SESSION_NEEDED, .run = op_schedule, .args = { "argv" },
	  .usage = "SESSION --every SECONDS -- ARGV..." },
	{ .name = "unschedule", .beside_exec = 1, .may_create = 0,
	  .session = BOX_SANDBOX_SESSION_NEEDED, .run = op_unschedule, .args = { "handle" },
	  .usage = "SESSION ID" },
	{ .name = "list", .may_create = 0, .session = BOX_SANDBOX_SESSION_NONE,
	  .run = op_list, .usage = "" },
	{ .name = "network", .may_create = 0, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_network, .usage = "SESSION [--allow-host RULE]... [--deny-host PATTERN]..." },
	{ .name = "expose", .may_create = 0, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_expose, .args = { "guest_port" }, .usage = "SESSION GUEST_PORT" },
	{ .name = "unexpose", .may_create = 0, .session = BOX_SANDBOX_SESSION_NEEDED,
	  .run = op_unexpose, .args = { "guest_port" }, .usage = "SESSION GUEST_PORT" },
	{ .name = NULL },
};

const struct box_sandbox_op *box_sandbox_op_find(const char *name)
{
	const struct box_sandbox_op *o;

	for (o = box_sandbox_ops; name && o->name; o++)
		if (strcmp(o->name, name) == 0)
			return o;
	return NULL;
}

/* "create exec ... list": the names of the table, for messages */
static void op_names(char *out, size_t n)
{
	const struct box_sandbox_op *o;
	size_t at = 0;

	out[0] = 0;
	for (o = box_sandbox_ops; o->name && at < n; o++)
		at += (size_t)box_fmt(out + at, n - at, "%s%s", at ? " " : "", o->name);
}

/* The session id of the request (made up for create without one) and the paths of it. */
static int session_of(struct box_sandbox_ctx *s, struct box_err *err)
{
	const char *id = box_json_get_str(s->req, "session", NULL);

	if (!id && s->op->session == BOX_SANDBOX_SESSION_OPTIONAL) {
		gen_id(s->id);
	} else if (!id) {
		return box_err_set(err, BOX_E_USAGE, "%s needs a SESSION", s->op->name);
	} else if (!box_sbstate_valid_id(id)) {
		box_err_set(err, BOX_E_INVALID, "invalid session id '%.80s' (want [a-z0-9][a-z0-9_-]*)",
			    id);
		box_err_path(err, "$.session");
		return -1;
	} else {
		box_fmt(s->id, sizeof(s->id), "%s", id);
	}
	box_fmt(s->sdir, sizeof(s->sdir), "%s/%s", s->dir, s->id);
	if (s->sdir[0] != '/')
		return box_err_set(err, BOX_E_INVALID, "BOX_STATE_DIR must be an absolute path");
	s->ps = (struct box_sbprov_session){ s->dir, s->sdir, s->id, libexec_dir(), &s->rec, NULL };
	return 0;
}

/* 1 when the session's directory holds something at state.json (readable or not). */
static int record_exists(const struct box_sandbox_ctx *s)
{
	char rec[PATH_MAX + 16];
	struct stat st;

	box_fmt(rec, sizeof(rec), "%s/state.json", s->sdir);
	return lstat(rec, &st) == 0;
}

/* The session's record under its lock: absent is no error here (the operation decides), a
 * record made by another provider than the request names is a conflict. */
static int lock_and_load(struct box_sandbox_ctx *s, struct box_err *err)
{
	const char *want = box_json_get_str(s->req, "provider", NULL);

	/* an agent that may create nothing leaves nothing behind, not even a lock file: an
	 * absent session is refused before the lock (and again by create_session under it) */
	if (s->io && s->io->no_create) {
		struct stat st;
		char rec[PATH_MAX + 16];

		box_fmt(rec, sizeof(rec), "%s/state.json", s->sdir);
		if ((s->op->session == BOX_SANDBOX_SESSION_OPTIONAL || lstat(rec, &st) < 0) &&
		    no_create(s, err))
			return -1;
	}
	/* the instance lock first, then the record's (box_sbstate_lock_instance); both make the
	 * sessions directory when it is missing */
	if (!s->op->beside_exec) {
		s->runlockfd = (s->op->shares_run ? box_sbstate_lock_instance_shared :
				box_sbstate_lock_instance)(s->dir, s->id, BOX_SANDBOX_LOCK_WAIT_MS, err);
		if (s->runlockfd < 0)
			return -1;
	}
	s->lockfd = box_sbstate_lock(s->dir, s->id, BOX_SANDBOX_LOCK_WAIT_MS, err);
	if (s->lockfd < 0)
		return -1;
	/* the provider a new session gets (create_session checks the name) */
	s->p = provider_of(want ? want : "local");
	if (box_sbstate_read(s->dir, s->id, &s->rec, err) < 0) {
		/* a record that cannot be read can still be deleted (op_delete) */
		if (err->code != BOX_E_NOT_FOUND && s->op->run == op_delete &&
		    record_exists(s)) {
			s->corrupt = 1;
			box_err_init(err);
			box_sbstate_release(&s->rec);
			return 0;
		}
		if (err->code != BOX_E_NOT_FOUND)
			return -1;
		box_err_init(err);
		box_sbstate_release(&s->rec);
		return 0;
	}
	s->have_rec = 1;
	s->p = provider_of(s->rec.provider);
	if (s->op->session == BOX_SANDBOX_SESSION_OPTIONAL)
		return box_err_set(err, BOX_E_CONFLICT, "session %s exists", s->id);
	if (want && strcmp(want, s->rec.provider) != 0) {
		box_err_set(err, BOX_E_CONFLICT, "provider mismatch: session %s was made by %s, not %s",
			    s->id, s->rec.provider, want);
		box_err_path(err, "$.provider");
		return -1;
	}
	return 0;
}

cJSON *box_sandbox(const cJSON *req, const struct box_sandbox_io *io, struct box_err *err)
{
	const char *op = box_json_get_str(req, "op", NULL);
	char names[256];
	struct box_sandbox_ctx *s;
	cJSON *res = NULL;

	op_names(names, sizeof(names));
	if (!op)
		return box_err_set(err, BOX_E_USAGE, "an operation is needed (%s)", names), NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	s->req = req;
	s->io = io;
	s->lockfd = -1;
	s->runlockfd = -1;
	s->op = box_sandbox_op_find(op);
	box_sbstate_init(&s->rec);
	if (box_sbstate_dir(s->dir, sizeof(s->dir), err) < 0)
		goto out;
	if (!s->op) {
		box_err_set(err, BOX_E_USAGE, "unknown operation '%.32s'", op);
		box_err_path(err, "$.op");
		goto out;
	}
	if (s->op->session == BOX_SANDBOX_SESSION_NONE) {
		res = s->op->run(s, err);
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
	if (session_of(s, err) < 0 || lock_and_load(s, err) < 0)
		goto out;
	res = s->op->run(s, err);
out:
	/* every exec answers whether its command ran */
	if (!res && s->op && (s->op->run == op_exec || s->op->run == op_shell))
		res = exec_failure(s->id, 0, err);
	if (s->lockfd >= 0)
		close(s->lockfd);
	if (s->runlockfd >= 0)
		close(s->runlockfd);
	box_sbstate_release(&s->rec);
	cJSON_Delete(s->env);
	free(s->envv);
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
	set = box_nsbox_load_tools(file, abs, sizeof(abs), err);
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
	struct box_nsbox_mounts ms;
	size_t k;
	int rc = 0;

	if (box_nsbox_parse_mounts(cJSON_GetObjectItemCaseSensitive(req, "mount"), &ms, err) < 0)
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
	box_nsbox_mounts_release(&ms);
	return rc ? -1 : 0;
}

/* The network an agent's commands get: none, or the proxy and the operator's rules. */
static int describe_network(const cJSON *req, struct box_buf *text, struct box_err *err)
{
	const cJSON *allow = cJSON_GetObjectItemCaseSensitive(req, "allow_host"), *e;
	int rc, k = 0;

	if (cJSON_GetArraySize(allow) == 0)
		return box_buf_puts(text, "\n\nNetwork: none (no allowed hosts): nothing inside the "
				    "sandbox reaches the network; the tool socket of box-tool is its "
				    "only way out.", err);
	rc = box_buf_puts(text, "\n\nNetwork: only through the proxy that HTTP_PROXY, HTTPS_PROXY "
			  "and ALL_PROXY name (127.0.0.1:3128: HTTP, CONNECT, SOCKS5 with host "
			  "names), and only to:", err);
	cJSON_ArrayForEach(e, allow)
		if (rc == 0)
			rc = box_buf_printf(text, err, "%s %s", k++ ? "," : "", e->valuestring);
	if (rc == 0)
		rc = box_buf_puts(text, ". Anything else is refused, and a program that ignores "
				  "the proxy variables gets no connection. Each attempt is listed "
				  "in the exec result's network member.", err);
	return rc;
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
	if (!provider_of(box_json_get_str(req, "provider", "local"))->tools) {
		box_err_set(err, BOX_E_UNSUPPORTED, "--tools is a local provider feature");
		box_err_path(err, "$.provider");
		goto fail;
	}
	if (box_buf_puts(&text, description, err) < 0 ||
	    describe_tools(box_json_get_str(req, "tools", ""), extra, &text, err) < 0)
		goto fail;
	mounts = cJSON_AddArrayToObject(extra, "mounts");
	files = cJSON_AddArrayToObject(extra, "input_files");
	if (provider_of(box_json_get_str(req, "provider", "local"))->net_rules &&
	    provider_of(box_json_get_str(req, "provider", "local"))->net_rules(
		    NULL, cJSON_GetObjectItemCaseSensitive(req, "allow_host"),
		    cJSON_GetObjectItemCaseSensitive(req, "deny_host"), err) < 0)
		goto fail;
	if (!mounts || !files || !cJSON_AddItemToObject(extra, "allowed_hosts", cJSON_Duplicate(
				cJSON_GetObjectItemCaseSensitive(req, "allow_host"), 1) ?:
				cJSON_CreateArray())) {
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
	    describe_network(req, &text, err) < 0)
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
