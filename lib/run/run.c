#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/random.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run.h"
#include "libexec.h"
#include "buf.h"
#include "credenv.h"
#include "cassette.h"
#include "ipc.h"
#include "jail.h"
#include "policy.h"
#include "proc.h"
#include "provenance.h"
#include "schema.h"
#include "lockfile.h"
#include "tools.h"
#include "utf8.h"
#include "vm.h"
#include "ws.h"
#include "banned.h"

#define MiB (1024LL * 1024)

const struct box_field box_run_fields[] = {
	{ "script", BOX_F_STRING, 0, 16 * MiB, 'e',
	  "the Lua source to run, instead of a SCRIPT file", "CODE" },
	{ "args", BOX_F_ARRAY, 0, 0, 0,
	  "arguments as a JSON array, seen as ... and arg (or ARG... after SCRIPT)", "JSON" },
	{ "workspace", BOX_F_STRING, 0, 4096, 'w',
	  "directory that fs.* sees as / (default: none, fs is nil)", "DIR" },
	{ "timeout_ms", BOX_F_INT, 1, 86400000, 't',
	  "wall-clock limit (default 30000, capped by max_timeout_ms)", "MS" },
	{ "max_timeout_ms", BOX_F_INT, 1, 86400000, 0,
	  "cap on timeout_ms (default 60000); a flag only, never taken from --json", "MS", 1 },
	{ "cpu_ms", BOX_F_INT, 1, 86400000, 0, "CPU time limit (default: the timeout)", "MS" },
	{ "memory_bytes", BOX_F_INT, 65536, 16384 * MiB, 'm',
	  "memory limit of the VM: Lua heap and JSON (default 33554432)", "BYTES" },
	{ "max_instructions", BOX_F_INT, 0, 1LL << 53, 0,
	  "exact VM instruction budget (default 0: not counted)", "N" },
	{ "max_output_bytes", BOX_F_INT, 0, 256 * MiB, 0,
	  "printed output kept in the result (default 65536)", "BYTES" },
	{ "max_write_bytes", BOX_F_INT, 0, 1LL << 40, 0,
	  "bytes fs.write and fs.append may write in all (default 67108864)", "BYTES" },
	{ "max_result_bytes", BOX_F_INT, 0, 256 * MiB, 0,
	  "size cap of the returned value as JSON (default 1048576)", "BYTES" },
	{ "allow", BOX_F_STRINGS, 0, 256, 'a',
	  "let http reach RULE: [METHOD,...] https://host[:port][/path] or host:port (repeatable)",
	  "RULE" },
	{ "allow_private_network", BOX_F_BOOL, 0, 0, 0,
	  "let http reach loopback, private, link-local and metadata addresses", NULL },
	{ "tools", BOX_F_STRING, 0, 4096, 0,
	  "tool manifest or box.lock: offers tools.<name>(input) to the script (code mode) "
	  "and require(name) of the Lua libraries a box.lock pins",
	  "FILE" },
	{ "events", BOX_F_BOOL, 0, 0, 0,
	  "stream print output as NDJSON events as it happens; the result comes last", NULL },
	{ "seed", BOX_F_INT, 0, (1LL << 53) - 1, 0,
	  "seed of math.random (default: from getrandom); the result reports it", "N" },
	{ "digests", BOX_F_BOOL, 0, 0, 0,
	  "add the sha256 of the request, the script and the policy to the provenance", NULL },
	{ "record", BOX_F_STRING, 0, 4096, 0,
	  "write a cassette of the run (request, seed, clock readings, host calls) to FILE",
	  "FILE", 1 },
	{ "replay", BOX_F_STRING, 0, 4096, 0,
	  "answer every host call from the cassette FILE: no workspace, network or tools",
	  "FILE", 1 },
	{ "trace", BOX_F_STRING, 0, 4096, 0,
	  "append each host call to FILE as a JSON line as it happens, with its timing",
	  "FILE", 1 },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0 },
};

struct run {
	const char *script;
	const cJSON *args;
	const cJSON *allow;
	int64_t timeout_ms, cpu_ms, memory_bytes, max_instructions, max_output_bytes;
	int64_t max_write_bytes, max_result_bytes;
	int allow_private, events;
	const struct box_run_hooks *hooks;
	struct box_toolset *tools;   /* NULL: no tools table */
	const char *tools_path;      /* the manifest or box.lock given, or NULL */
	struct box_vm_tool *vmtools; /* what the VM offers: one per tool of the set */

	struct box_ws ws;
	int has_ws;
	struct box_vm_shm *shm;
	size_t shm_size;
	int sock;
	struct box_ipc_in in;
	pid_t pid;
	int64_t start, deadline;
	int64_t host_calls;

	pid_t hpid;              /* box-http, started on the first http call */
	int hin, hout;
	struct box_buf hline;

	struct box_buf meta;     /* FINAL: the error/lossy object, then the result text */
	struct box_buf result;
	int got_final;
	int timed_out;
	int64_t child_cpu_ms;    /* the VM's CPU time as it reported it, -1 if not */

	int64_t seed;
	int digests;             /* the provenance carries the sha256 digests */
	const cJSON *req;        /* the request as run (in a replay: the recorded one) */
	const cJSON *policy;     /* the policy in force, or NULL */
	cJSON *tool_info;        /* [{"name", "refused"?, "artifact"?, "digest"?}] */
	unsigned char *tool_used;
	struct box_cassette cas;
	int recording, replaying;
	int replay_fs;           /* a replay of a run that had a workspace */
	int trace;               /* --trace: the file's descriptor, or -1 */
	uint8_t cur_op;          /* the call being served, for the cassette */
	const struct box_ipc_field *cur_f;
	int cur_n;
	uint8_t last_rop;
};

/* ------------------------------------------------------------------ the VM child */

static void child(struct run *r, int sock) __attribute__((noreturn));

/* A replay's calls, answered in the VM child from its copy of the cassette (no round trip);
 * tool calls go to the broker, which notes the tools used. */
static int local_replay(void *ctx, uint8_t op, const struct box_ipc_field *f, int n,
			uint8_t *rop, struct box_ipc_field *out, int maxout)
{
	if (op == BOX_OP_TOOL)
		return -1;
	return box_cassette_try(ctx, op, f, n, rop, out, maxout);
}

/* The broker answered a call from its copy: this one moves on with it. */
static void remote_replayed(void *ctx)
{
	((struct box_cassette *)ctx)->next++;
}

/* Never returns: the forked child ends with _exit, whatever happens, so that no code of the
 * caller runs twice. */
static void child(struct run *r, int sock)
{
	struct box_vm_config c = {
		.sock = 3,
		.shm = r->shm,
		.script = r->script,
		.script_len = strlen(r->script),
		.chunkname = "=script",
		.args = r->args,
		.memory_bytes = r->memory_bytes,
		.cpu_ms = r->cpu_ms,
		.max_instructions = r->max_instructions,
		.max_result_bytes = r->max_result_bytes,
		.has_fs = r->has_ws || r->replay_fs,
		.has_http = r->allow != NULL && cJSON_GetArraySize(r->allow) > 0,
		/* a replay has no workspace open, but the script sees the fs it had */
		.events = r->events,
		.tools = r->vmtools,
		.ntools = (size_t)cJSON_GetArraySize(r->tool_info),
		.has_tools = r->tools != NULL || r->vmtools != NULL,
		.has_require = r->tools != NULL || r->vmtools != NULL,
		.seed = r->seed,
		.clock_host = r->recording || r->replaying,
		/* a traced replay goes through the broker: it times and numbers every call */
		.local_call = r->replaying && r->trace < 0 ? local_replay : NULL,
		.remote_done = r->replaying && r->trace < 0 ? remote_replayed : NULL,
		.local_ctx = &r->cas,
	};
	struct box_jail_limits lim = { r->cpu_ms, r->memory_bytes };
	struct box_err err;
	time_t t = 0;
	struct tm tm;
	int null;

	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(sock, 3) < 0)
		_exit(127);
	close_range(4, UINT_MAX, 0);
	/* the script runs in this process: nothing of the caller's environment stays, in environ
	 * nor in the block /proc/PID/environ shows */
	box_credenv_wipe_self();
	/* scripts see UTC wherever they run; loading the zone now keeps os.date from opening
	 * files once the filter is in place */
	setenv("TZ", "UTC0", 1);
	tzset();
	localtime_r(&t, &tm);
	box_vm_prepare();
	if (box_jail_vm(&lim, &err) < 0)
		_exit(126);
	box_vm_run(&c);
	/* the answer is sent: this process ends when the broker is done with it (it closes the
	 * socket, kills it, or exits: PDEATHSIG), so that tearing it down never delays the
	 * answer */
	for (;;) {
		char byte;
		ssize_t got = read(3, &byte, 1);

		if (got == 0 || (got < 0 && errno != EINTR))
			break;
	}
	_exit(0);
}

/* ------------------------------------------------------------------ box-http */

#define HTTP_ENV_MAX 5

/* The variables of the caller's environment box-http gets, into out (NULL-terminated). */
static void http_env(const char *out[HTTP_ENV_MAX + 1])
{
	static const char *const names[HTTP_ENV_MAX] = {
		"SSL_CERT_FILE", "SSL_CERT_DIR", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
	};
	size_t i, k = 0, n;

	for (i = 0; environ && environ[i]; i++)
		for (n = 0; n < HTTP_ENV_MAX; n++) {
			size_t len = strlen(names[n]);

			if (strncmp(environ[i], names[n], len) == 0 && environ[i][len] == '=') {
				out[k++] = environ[i];
				break;
			}
		}
	out[k] = NULL;
}

static int http_start(struct run *r, struct box_err *err)
{
	char path[PATH_MAX], maxbody[32];
	const char **argv, *envp[HTTP_ENV_MAX + 1];
	const cJSON *rule;
	struct box_proc_opts o = { 0 };
	struct box_proc_child child;
	int n = 0, rc;

	if (box_libexec_find("box-http", path, sizeof(path), err) < 0)
		return -1;
	argv = calloc((size_t)cJSON_GetArraySize(r->allow) * 2 + 6, sizeof(*argv));
	if (!argv)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	argv[n++] = path;
	cJSON_ArrayForEach(rule, r->allow) {
		argv[n++] = "--allow";
		argv[n++] = rule->valuestring;
	}
	if (r->allow_private)
		argv[n++] = "--allow-private-network";
	snprintf(maxbody, sizeof(maxbody), "%lld", (long long)r->memory_bytes);
	argv[n++] = "--max-body-bytes";
	argv[n++] = maxbody;
	argv[n] = NULL;
	/* like every helper: its own process group, only fds 0-2, killed whole by http_stop; of
	 * the caller's environment only what TLS and a sanitizer build read */
	http_env(envp);
	o.argv = argv;
	o.envp = (char *const *)envp;
	o.stderr_inherit = 1;
	rc = box_proc_spawn(&o, &child, err);
	free(argv);
	if (rc < 0)
		return -1;
	r->hpid = child.pid;
	r->hin = child.in;
	r->hout = child.out;
	if (child.pidfd >= 0)
		close(child.pidfd);
	fcntl(r->hin, F_SETFL, O_NONBLOCK);
	box_buf_init(&r->hline, (size_t)(r->memory_bytes / 3 * 4 + 4 * MiB));
	return 0;
}

static void http_stop(struct run *r)
{
	if (r->hpid <= 0)
		return;
	box_proc_stop(&(struct box_proc_child){ .pid = r->hpid, .in = r->hin, .out = r->hout,
						 .errfd = -1, .pidfd = -1 });
	r->hpid = 0;
	box_buf_release(&r->hline);
}

static int wait_io(int fd, short ev, int64_t deadline, struct box_err *err)
{
	struct pollfd p = { .fd = fd, .events = ev };
	int64_t left = deadline - box_now_ms();
	int rc;

	if (left <= 0)
		return box_err_set(err, BOX_E_TIMEOUT, "http request ran out of time");
	rc = poll(&p, 1, (int)left);
	if (rc < 0 && errno != EINTR)
		return box_err_sys(err, "poll");
	return 0;
}

/* One request line to box-http, one answer line back, within the run's deadline. */
static int http_call(struct run *r, const char *req, size_t n, struct box_err *err)
{
	struct box_err perr;
	cJSON *o = box_json_parse(req, n, &perr);
	int64_t left = r->deadline - box_now_ms(), t;
	char *line = NULL;
	size_t len, off = 0;
	char *nl;

	if (!o || !cJSON_IsObject(o)) {
		cJSON_Delete(o);
		return box_err_set(err, BOX_E_INVALID, "malformed http request");
	}
	/* the request may ask for less time, never for more than the script has left */
	t = box_json_get_int(o, "timeout_ms", left);
	if (t > left || t <= 0)
		t = left;
	cJSON_DeleteItemFromObjectCaseSensitive(o, "timeout_ms");
	box_json_add_int64(o, "timeout_ms", t > 0 ? t : 1);
	box_json_exact(o);
	line = box_json_line(o, &len);
	cJSON_Delete(o);
	if (!line)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	if (r->hpid == 0 && http_start(r, err) < 0) {
		free(line);
		return -1;
	}
	while (off < len) {
		ssize_t w = write(r->hin, line + off, len - off);

		if (w < 0 && errno == EAGAIN) {
			if (wait_io(r->hin, POLLOUT, r->deadline, err) < 0) {
				free(line);
				return -1;
			}
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			free(line);
			http_stop(r);
			return box_err_sys(err, "writing to box-http");
		}
		off += (size_t)w;
	}
	free(line);
	box_buf_truncate(&r->hline, 0);
	for (;;) {
		char *dst = box_buf_reserve(&r->hline, 65536, err);
		ssize_t got;

		if (!dst) {
			http_stop(r);
			return -1;
		}
		got = read(r->hout, dst, 65536);
		if (got < 0 && errno == EAGAIN) {
			if (wait_io(r->hout, POLLIN, r->deadline, err) < 0) {
				/* a helper that is late is killed: the next call starts a fresh one */
				http_stop(r);
				return -1;
			}
			continue;
		}
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			http_stop(r);
			return box_err_set(err, BOX_E_INTERNAL, "box-http ended without an answer");
		}
		r->hline.len += (size_t)got;
		r->hline.data[r->hline.len] = 0;
		nl = memchr(r->hline.data, '\n', r->hline.len);
		if (nl) {
			box_buf_truncate(&r->hline, (size_t)(nl - r->hline.data));
			return 0;
		}
	}
}

/* ------------------------------------------------------------------ host calls */

static int answer(struct run *r, uint8_t op, const struct box_ipc_field *f, int n,
		  struct box_err *err)
{
	r->last_rop = op;
	if (r->recording && box_cassette_add(&r->cas, r->cur_op, r->cur_f, r->cur_n, op, f, n,
					     err) < 0)
		return -1;
	return box_ipc_send(r->sock, op, f, n, r->deadline, err);
}

/* Sends one JSON field with op; takes ownership of o (NULL: out of memory). */
static int answer_json(struct run *r, uint8_t op, cJSON *o, struct box_err *err)
{
	char *s = o ? cJSON_PrintUnformatted(o) : NULL;
	struct box_ipc_field f;
	int rc;

	cJSON_Delete(o);
	if (!s)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	f.p = s;
	f.n = strlen(s);
	rc = answer(r, op, &f, 1, err);
	cJSON_free(s);
	return rc;
}

static int answer_err(struct run *r, const struct box_err *e, struct box_err *err)
{
	return answer_json(r, BOX_OP_ERR, box_err_to_json(e), err);
}

/* guest paths arrive as bytes; the ws layer wants a C string without NUL */
static int path_arg(const struct box_ipc_field *f, char *out, size_t size, struct box_err *e)
{
	if (f->n >= size || memchr(f->p, 0, f->n))
		return box_err_set(e, BOX_E_INVALID, "bad path");
	memcpy(out, f->p, f->n);
	out[f->n] = 0;
	return 0;
}

/* ------------------------------------------------------------------ tools */

/* Why code mode does not offer t, or NULL when it does. */
static const char *refusal(const struct box_tool *t)
{
	if (box_tool_code_mode_eligible(t))
		return NULL;
	if (t->destructive)
		return "destructive";
	if (t->requires_approval)
		return "requires approval";
	return "executor";
}

static int load_tools(struct run *r, const char *path, struct box_err *err)
{
	size_t i;

	if (box_tools_nested()) {
		box_err_set(err, BOX_E_POLICY, "code mode cannot be opened from a tool (%s is set)",
			    BOX_TOOL_DEPTH_ENV);
		box_err_path(err, "$.tools");
		return -1;
	}
	r->tools_path = path;
	r->tools = box_tools_load(path, err);
	if (!r->tools) {
		if (!err->path[0]) {
			box_err_path(err, "$.tools");
		} else if (err->code == BOX_E_INVALID) {
			/* err->path is a path in the manifest: say which file it is in */
			struct box_err e = *err;

			box_err_set(err, BOX_E_INVALID, "tool manifest %.200s: %.280s", path,
				    e.message);
			box_err_path(err, e.path);
		}
		return -1;
	}
	r->vmtools = calloc(r->tools->n + 1, sizeof(*r->vmtools));
	if (!r->vmtools)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	r->tool_info = cJSON_CreateArray();
	r->tool_used = calloc(r->tools->n + 1, 1);
	if (!r->tool_info || !r->tool_used)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	for (i = 0; i < r->tools->n; i++) {
		const struct box_tool *t = &r->tools->tools[i];
		cJSON *o = cJSON_CreateObject();

		r->vmtools[i].name = t->name;
		r->vmtools[i].refused = refusal(t);
		if (!o || !cJSON_AddItemToArray(r->tool_info, o))
			return cJSON_Delete(o), box_err_set(err, BOX_E_INTERNAL, "out of memory");
		cJSON_AddStringToObject(o, "name", t->name);
		if (refusal(t))
			cJSON_AddStringToObject(o, "refused", refusal(t));
		if (t->artifact)
			cJSON_AddStringToObject(o, "artifact", t->artifact);
		if (t->pin)
			cJSON_AddStringToObject(o, "digest", t->pin->digest);
	}
	return 0;
}

static int tool_timeout(const struct box_tool *t)
{
	return t->timeout_ms > 0 ? t->timeout_ms : BOX_TOOL_DEFAULT_TIMEOUT_MS;
}

/* One line of the trace, when the request asks for events. */
static void trace_tool(struct run *r, const char *name, int64_t start, const struct box_err *e)
{
	cJSON *ev;

	if (!r->events || !r->hooks || !r->hooks->on_event)
		return;
	ev = cJSON_CreateObject();
	if (!ev)
		return;
	cJSON_AddStringToObject(ev, "event", "tool_call");
	cJSON_AddStringToObject(ev, "name", name);
	cJSON_AddBoolToObject(ev, "ok", e == NULL);
	box_json_add_int64(ev, "duration_ms", box_now_ms() - start);
	if (e)
		cJSON_AddItemToObject(ev, "error", box_err_to_json(e));
	r->hooks->on_event(r->hooks->ctx, ev);
	cJSON_Delete(ev);
}

/* Fields: the tool's name, its input as JSON. The name is only ever looked up in the set. */
static int tool_host_call(struct run *r, const struct box_ipc_field *f, int n, struct box_err *err)
{
	char name[BOX_TOOL_NAME_MAX + 1];
	const struct box_tool *t = NULL;
	const char *why;
	struct box_err e;
	int64_t start = box_now_ms(), left = r->deadline - start;
	int timeout, capped;
	cJSON *input = NULL, *out = NULL;

	box_err_init(&e);
	if (n >= 2 && f[0].n <= BOX_TOOL_NAME_MAX && !memchr(f[0].p, 0, f[0].n)) {
		memcpy(name, f[0].p, f[0].n);
		name[f[0].n] = 0;
		if (box_tool_name_valid(name))
			t = r->tools ? box_tools_find(r->tools, name) : NULL;
	} else {
		name[0] = 0;
	}
	if (!r->tools) {
		box_err_set(&e, BOX_E_POLICY, "no tools are given");
		return answer_err(r, &e, err);
	}
	if (!t) {
		box_err_set(&e, BOX_E_NOT_FOUND, "no tool %s",
			    box_tool_name_valid(name) ? name : "of that name");
		return answer_err(r, &e, err);
	}
	why = refusal(t);
	if (why) {
		box_err_set(&e, BOX_E_POLICY, "tool %s is not offered in code mode: %s", t->name,
			    why);
		trace_tool(r, t->name, start, &e);
		return answer_err(r, &e, err);
	}
	if (left <= 0)
		return box_err_set(err, BOX_E_TIMEOUT, "deadline passed before a tool call");
	timeout = tool_timeout(t);
	capped = left < timeout;
	if (capped)
		timeout = (int)left;
	input = box_json_parse(f[1].p, f[1].n, &e);
	if (!input) {
		e.code = BOX_E_INVALID;
	} else if (t->lua_entry) {
		/* in a box-run of its own (this very executable), under the memory limit and
		 * the instruction budget of the calling script */
		out = box_tool_call_lua(t, input, "/proc/self/exe", timeout, r->memory_bytes,
					r->max_instructions, &e);
	} else {
		struct box_tool_call_opts o = { .max_timeout_ms = timeout };

		out = box_tool_call(t, input, &o, &e);
	}
	cJSON_Delete(input);
	if (!out && e.code == BOX_E_INTEGRITY) {
		/* the store changed under the run: no script may go on with its tools */
		trace_tool(r, t->name, start, &e);
		*err = e;
		return -1;
	}
	if (!out && e.code == BOX_E_TIMEOUT && capped) {
		/* the tool had the rest of the script's time and used it up: the run timed out */
		trace_tool(r, t->name, start, &e);
		return box_err_set(err, BOX_E_TIMEOUT, "deadline passed in tool %s", t->name);
	}
	trace_tool(r, t->name, start, out ? NULL : &e);
	if (!out)
		return answer_err(r, &e, err);
	/* provenance names the tools that answered (a replay knows only those) */
	r->tool_used[t - r->tools->tools] = 1;
	box_json_exact(out);
	return answer_json(r, BOX_OP_OK, out, err);
}

/* The fs.* host calls: each a workspace operation on the path of f[0]. */
static int fs_host_call(struct run *r, uint8_t op, const struct box_ipc_field *f, int n,
			struct box_err *err)
{
	struct box_ipc_field res;
	char path[PATH_MAX];
	struct box_err e;
	int rc = 0;

	box_err_init(&e);
	if (!r->has_ws) {
		box_err_set(&e, BOX_E_POLICY, "no workspace");
		return answer_err(r, &e, err);
	}
	if (path_arg(&f[0], path, sizeof(path), &e) < 0)
		return answer_err(r, &e, err);
	switch (op) {
	case BOX_OP_FS_READ: {
		struct box_buf b = BOX_BUF_INIT((size_t)r->memory_bytes);

		if (box_ws_read(&r->ws, path, &b, &e) < 0) {
			box_buf_release(&b);
			return answer_err(r, &e, err);
		}
		res.p = b.data ? b.data : "";
		res.n = b.len;
		rc = answer(r, BOX_OP_OK, &res, 1, err);
		box_buf_release(&b);
		return rc;
	}
	case BOX_OP_FS_WRITE:
	case BOX_OP_FS_APPEND:
		if (n < 2) {
			box_err_set(&e, BOX_E_INVALID, "missing data");
			return answer_err(r, &e, err);
		}
		if (box_ws_write(&r->ws, path, f[1].p, f[1].n, op == BOX_OP_FS_APPEND, &e) < 0)
			return answer_err(r, &e, err);
		return answer(r, BOX_OP_OK, NULL, 0, err);
	case BOX_OP_FS_EXISTS:
		rc = box_ws_exists(&r->ws, path, &e);
		if (rc < 0)
			return answer_err(r, &e, err);
		res.p = rc ? "1" : "0";
		res.n = 1;
		return answer(r, BOX_OP_OK, &res, 1, err);
	case BOX_OP_FS_STAT: {
		cJSON *o = box_ws_stat(&r->ws, path, &e);

		if (!o && e.code == BOX_E_NOT_FOUND)
			return answer(r, BOX_OP_OK, NULL, 0, err);
		if (!o)
			return answer_err(r, &e, err);
		return answer_json(r, BOX_OP_OK, o, err);
	}
	case BOX_OP_FS_LIST: {
		cJSON *o = box_ws_list(&r->ws, path, 100000, &e);

		return o ? answer_json(r, BOX_OP_OK, o, err) : answer_err(r, &e, err);
	}
	case BOX_OP_FS_WALK: {
		cJSON *o = box_ws_walk(&r->ws, path, 10000, &e);

		return o ? answer_json(r, BOX_OP_OK, o, err) : answer_err(r, &e, err);
	}
	case BOX_OP_FS_REMOVE:
		rc = box_ws_remove(&r->ws, path, n > 1 && f[1].n == 1 && *(const char *)f[1].p == '1',
				   &e);
		if (rc < 0)
			return answer_err(r, &e, err);
		res.p = rc ? "1" : "0";
		res.n = 1;
		return answer(r, BOX_OP_OK, &res, 1, err);
	case BOX_OP_FS_MKDIR:
		if (box_ws_mkdir(&r->ws, path, &e) < 0)
			return answer_err(r, &e, err);
		return answer(r, BOX_OP_OK, NULL, 0, err);
	default:
		return box_err_set(err, BOX_E_INTERNAL, "unknown host call %u from the VM", op);
	}
}

/* Field: the library's name; the answer: its source and "NAME@VERSION" (box_tools_library). */
static int require_host_call(struct run *r, const struct box_ipc_field *f, struct box_err *err)
{
	struct box_buf src = BOX_BUF_INIT(BOX_LUA_LIBRARY_MAX);
	char name[BOX_LOCK_NAME_MAX + 1], label[BOX_LOCK_NAME_MAX + BOX_SEMVER_MAX_LEN + 2];
	struct box_ipc_field res[2];
	struct box_err e;
	int rc;

	box_err_init(&e);
	if (f[0].n == 0 || f[0].n > BOX_LOCK_NAME_MAX || memchr(f[0].p, 0, f[0].n)) {
		box_err_set(&e, BOX_E_NOT_FOUND, "no Lua library of that name");
		return answer_err(r, &e, err);
	}
	memcpy(name, f[0].p, f[0].n);
	name[f[0].n] = 0;
	if (!r->tools_path) {
		box_err_set(&e, BOX_E_NOT_FOUND, "no Lua library %s: no box.lock is given", name);
		return answer_err(r, &e, err);
	}
	if (box_tools_library(r->tools_path, name, &src, label, sizeof(label), &e) < 0) {
		box_buf_release(&src);
		/* the store changed under the run: nothing more of it runs */
		if (e.code == BOX_E_INTEGRITY) {
			*err = e;
			return -1;
		}
		return answer_err(r, &e, err);
	}
	res[0].p = src.data ? src.data : "";
	res[0].n = src.len;
	res[1].p = label;
	res[1].n = strlen(label);
	rc = answer(r, BOX_OP_OK, res, 2, err);
	box_buf_release(&src);
	return rc;
}

static int host_call(struct run *r, uint8_t op, const struct box_buf *payload, struct box_err *err)
{
	struct box_ipc_field f[BOX_IPC_MAX_FIELDS], res;
	struct box_err e;
	int n;

	box_err_init(&e);
	r->host_calls++;
	n = box_ipc_split(payload->data ? payload->data : "", payload->len, f, BOX_IPC_MAX_FIELDS);
	if (n < 1)
		return box_err_set(err, BOX_E_INTERNAL, "malformed host call from the VM");
	if (op == BOX_OP_TOOL)
		return tool_host_call(r, f, n, err);
	if (op == BOX_OP_REQUIRE)
		return require_host_call(r, f, err);
	if (op == BOX_OP_CLOCK) {
		/* live, the VM's own reading stands; the call exists to be recorded */
		if (n < 2)
			return box_err_set(err, BOX_E_INTERNAL, "malformed clock call from the VM");
		return answer(r, BOX_OP_OK, &f[1], 1, err);
	}
	if (op == BOX_OP_HTTP) {
		if (!r->allow || cJSON_GetArraySize(r->allow) == 0) {
			box_err_set(&e, BOX_E_POLICY, "http is not enabled");
			return answer_err(r, &e, err);
		}
		if (http_call(r, f[0].p, f[0].n, &e) < 0) {
			/* the run's own deadline passed during the call: the run timed out */
			if (e.code == BOX_E_TIMEOUT && box_now_ms() >= r->deadline)
				return box_err_set(err, BOX_E_TIMEOUT, "deadline passed in http");
			return answer_err(r, &e, err);
		}
		res.p = r->hline.data;
		res.n = r->hline.len;
		return answer(r, BOX_OP_OK, &res, 1, err);
	}
	return fs_host_call(r, op, f, n, err);
}

/* ------------------------------------------------------------------ record, replay, trace */

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* In a replay the recording answers, in order; nothing of the host is reached. */
static int replay_call(struct run *r, uint8_t op, const struct box_ipc_field *f, int n,
		       struct box_err *err)
{
	struct box_ipc_field out[BOX_IPC_MAX_FIELDS];
	uint8_t rop = BOX_OP_ERR;
	int aborted, k;

	r->host_calls++;
	k = box_cassette_next(&r->cas, op, f, n, &rop, out, &aborted, err);
	if (k < 0)
		return -1;
	if (op == BOX_OP_TOOL && rop == BOX_OP_OK && n >= 1) {
		const cJSON *t;
		int i = 0;

		cJSON_ArrayForEach(t, r->tool_info) {
			const char *name = box_json_get_str(t, "name", "");

			if (strlen(name) == f[0].n && !memcmp(name, f[0].p, f[0].n))
				r->tool_used[i] = 1;
			i++;
		}
	}
	r->last_rop = rop;
	return box_ipc_send(r->sock, rop, out, k, r->deadline, err);
}

static void trace_line(struct run *r, uint8_t op, const struct box_ipc_field *f, int n,
		       int64_t t0, int64_t t1, const struct box_err *failed)
{
	cJSON *o = box_cassette_describe(op, f, n);
	char *line;
	size_t len;

	if (!o)
		return;
	box_json_add_int64(o, "n", r->host_calls);
	box_json_add_int64(o, "start_us", t0 - r->start * 1000);
	box_json_add_int64(o, "duration_us", t1 - t0);
	cJSON_AddBoolToObject(o, "ok", !failed && r->last_rop == BOX_OP_OK);
	if (failed)
		cJSON_AddItemToObject(o, "error", box_err_to_json(failed));
	line = box_json_line(o, &len);
	cJSON_Delete(o);
	/* the trace is a log of what happens, not state: a failed write loses a line, no more */
	if (line && box_write_all(r->trace, line, len) < 0)
		r->trace = -1;
	free(line);
}

/* One host call, live (recorded with --record) or replayed, traced with --trace. */
static int served_call(struct run *r, uint8_t op, const struct box_buf *payload,
		       struct box_err *err)
{
	struct box_ipc_field f[BOX_IPC_MAX_FIELDS];
	int64_t t0 = r->trace >= 0 ? now_us() : 0;
	int n = box_ipc_split(payload->data ? payload->data : "", payload->len, f,
			      BOX_IPC_MAX_FIELDS);
	int rc;

	if (n < 0)
		return box_err_set(err, BOX_E_INTERNAL, "malformed host call from the VM");
	r->cur_op = op;
	r->cur_f = f;
	r->cur_n = n;
	r->last_rop = BOX_OP_ERR;
	if (r->replaying) {
		rc = replay_call(r, op, f, n, err);
	} else {
		size_t at = r->cas.lines.len, calls = r->cas.ncalls;

		rc = host_call(r, op, payload, err);
		if (rc < 0 && r->recording && err->code != BOX_E_LIMIT) {
			/* the run ends in this call: a replay ends there the same way (a call
			 * already recorded, then a send that failed, is taken back first) */
			struct box_err e = *err;

			box_buf_truncate(&r->cas.lines, at);
			r->cas.ncalls = calls;
			if (box_cassette_abort(&r->cas, op, f, n, &e, err) == 0)
				*err = e;
		}
	}
	if (r->trace >= 0)
		trace_line(r, op, f, n, t0, now_us(), rc < 0 ? err : NULL);
	return rc;
}

/* ------------------------------------------------------------------ the broker loop */

static void emit_print(struct run *r, const struct box_buf *payload)
{
	struct box_ipc_field f;
	struct box_buf clean = BOX_BUF_INIT((size_t)r->max_output_bytes * 3 + 16);
	struct box_err e;
	cJSON *ev;

	if (!r->hooks || !r->hooks->on_event)
		return;
	if (box_ipc_split(payload->data ? payload->data : "", payload->len, &f, 1) != 1)
		return;
	if (box_utf8_sanitize(f.p, f.n, &clean, &e) < 0) {
		box_buf_release(&clean);
		return;
	}
	ev = cJSON_CreateObject();
	if (ev) {
		cJSON_AddStringToObject(ev, "event", "stdout");
		cJSON_AddItemToObject(ev, "data", box_json_string_n(clean.data ? clean.data : "",
								      clean.len));
		r->hooks->on_event(r->hooks->ctx, ev);
	}
	cJSON_Delete(ev);
	box_buf_release(&clean);
}

/* BOX_OP_REPLAYED: the VM child answered that many calls of the replay itself. */
static int replayed_here(struct run *r, const struct box_buf *payload, struct box_err *err)
{
	struct box_ipc_field f;
	char num[24];
	long long k;
	char *end;

	if (!r->replaying || box_ipc_split(payload->data ? payload->data : "", payload->len, &f,
					   1) != 1 || f.n == 0 || f.n >= sizeof(num))
		return box_err_set(err, BOX_E_INTERNAL, "malformed replay count from the VM");
	memcpy(num, f.p, f.n);
	num[f.n] = 0;
	k = strtoll(num, &end, 10);
	if (*end || k <= 0 || (size_t)k > r->cas.ncalls - r->cas.next)
		return box_err_set(err, BOX_E_INTERNAL, "malformed replay count from the VM");
	r->cas.next += (size_t)k;
	r->host_calls += k;
	return 0;
}

/* Serves the child until it sends FINAL, dies, or the deadline passes. Returns -1 only when
 * the broker itself failed (err); the child is then killed. */
static int serve(struct run *r, struct box_err *err)
{
	struct box_buf payload = BOX_BUF_INIT((size_t)(r->max_write_bytes + r->max_result_bytes +
							4 * MiB));
	uint8_t op;
	int rc = 0;

	for (;;) {
		int got = box_ipc_recv(r->sock, &r->in, &op, &payload, r->deadline, err);

		if (got < 0 && err->code == BOX_E_TIMEOUT) {
			r->timed_out = 1;
			break;
		}
		if (got < 0 && err->code == BOX_E_IO) {
			/* the child died mid-frame: what it died of is told by waitpid */
			break;
		}
		if (got < 0) {
			rc = -1;
			break;
		}
		if (got == 0)
			break;
		if (op == BOX_OP_FINAL) {
			struct box_ipc_field f[2];
			int n = box_ipc_split(payload.data ? payload.data : "", payload.len, f, 2);

			if (n >= 1 && box_buf_append(&r->meta, f[0].p, f[0].n, err) == 0 &&
			    (n < 2 || box_buf_append(&r->result, f[1].p, f[1].n, err) == 0))
				r->got_final = 1;
			if (r->replaying && r->cas.next < r->cas.ncalls) {
				box_err_set(err, BOX_E_REPLAY_DIVERGED, "the script ended after %zu "
					    "calls, the recording has %zu", r->cas.next,
					    r->cas.ncalls);
				rc = -1;
			}
			break;
		}
		if (op == BOX_OP_PRINT) {
			emit_print(r, &payload);
			continue;
		}
		if (op == BOX_OP_REPLAYED) {
			if (replayed_here(r, &payload, err) < 0) {
				rc = -1;
				break;
			}
			continue;
		}
		if (served_call(r, op, &payload, err) < 0) {
			if (err->code == BOX_E_TIMEOUT) {
				r->timed_out = 1;
				break;
			}
			if (err->code == BOX_E_IO)
				break;
			rc = -1;
			break;
		}
	}
	box_buf_release(&payload);
	if (rc == 0)
		box_err_init(err);
	return rc;
}

/* ------------------------------------------------------------------ the result */

static int64_t cpu_of(const struct rusage *ru)
{
	return (int64_t)ru->ru_utime.tv_sec * 1000 + ru->ru_utime.tv_usec / 1000 +
		(int64_t)ru->ru_stime.tv_sec * 1000 + ru->ru_stime.tv_usec / 1000;
}

static void add_stats(struct run *r, cJSON *res, const struct rusage *ru, int64_t wall)
{
	cJSON *s = cJSON_AddObjectToObject(res, "stats");
	int64_t cpu = ru ? cpu_of(ru) : r->child_cpu_ms;

	if (!s)
		return;
	if (r->shm->counted)
		box_json_add_int64(s, "instructions", r->shm->instructions);
	box_json_add_int64(s, "memory_peak_bytes", r->shm->mem_peak);
	box_json_add_int64(s, "wall_ms", wall);
	box_json_add_int64(s, "cpu_ms", cpu);
	box_json_add_int64(s, "output_bytes", r->shm->output_bytes);
	box_json_add_int64(s, "host_calls", r->host_calls);
}

/* The result text the child sent, checked before it is embedded as it is: cJSON cannot hold
 * a string with NUL bytes, so the text itself is kept. */
static cJSON *checked_result(const struct box_buf *b)
{
	const char *end = NULL;
	cJSON *parsed;
	size_t i;

	if (!b->len || !box_utf8_valid(b->data, b->len))
		return NULL;
	for (i = 0; i < b->len; i++)
		if ((unsigned char)b->data[i] < 0x20)
			return NULL;
	parsed = cJSON_ParseWithLengthOpts(b->data, b->len, &end, 0);
	if (!parsed)
		return NULL;
	cJSON_Delete(parsed);
	if (end != b->data + b->len)
		return NULL;
	return cJSON_CreateRaw(b->data);
}

/* The request as a cassette keeps it and as its digest covers it: without the operator's
 * files of this invocation (record, replay, trace). */
static cJSON *request_as_run(const cJSON *req)
{
	cJSON *c = cJSON_Duplicate(req, 1);

	cJSON_DeleteItemFromObjectCaseSensitive(c, "record");
	cJSON_DeleteItemFromObjectCaseSensitive(c, "replay");
	cJSON_DeleteItemFromObjectCaseSensitive(c, "trace");
	return c;
}

/* {"box_version", "kernel", "seed", "tools"?, "request_sha256"?, "script_sha256"?,
 * "policy_sha256"?}: the digests only when asked, since they load libcrypto */
static cJSON *provenance(struct run *r, struct box_err *err)
{
	cJSON *o = cJSON_CreateObject(), *used, *req;
	const cJSON *t;
	struct utsname u;
	char d[72];
	int i = 0, rc = 0;

	if (!o)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	cJSON_AddStringToObject(o, "box_version", PACKAGE_VERSION);
	cJSON_AddStringToObject(o, "kernel", uname(&u) == 0 ? u.release : "unknown");
	box_json_add_int64(o, "seed", r->seed);
	if (r->tool_info) {
		used = cJSON_AddArrayToObject(o, "tools");
		cJSON_ArrayForEach(t, r->tool_info) {
			cJSON *c;

			if (!r->tool_used[i++])
				continue;
			c = cJSON_Duplicate(t, 1);
			cJSON_DeleteItemFromObjectCaseSensitive(c, "refused");
			cJSON_AddItemToArray(used, c);
		}
	}
	if (r->digests) {
		req = request_as_run(r->req);
		rc = req ? box_digest_json(req, d, err) : box_err_set(err, BOX_E_INTERNAL, "oom");
		cJSON_Delete(req);
		if (rc == 0)
			cJSON_AddStringToObject(o, "request_sha256", d);
		if (rc == 0 && (rc = box_digest_sha256(r->script, strlen(r->script), d, err)) == 0)
			cJSON_AddStringToObject(o, "script_sha256", d);
		if (rc == 0 && r->policy && (rc = box_digest_json(r->policy, d, err)) == 0)
			cJSON_AddStringToObject(o, "policy_sha256", d);
	}
	if (rc < 0) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static cJSON *build_result(struct run *r, int status, const struct rusage *ru, int64_t wall,
			   struct box_err *err)
{
	struct box_buf out = BOX_BUF_INIT((size_t)r->max_output_bytes * 3 + 16);
	cJSON *res = cJSON_CreateObject(), *meta = NULL, *val = NULL, *prov;
	struct box_err e;
	uint32_t len = r->shm->out_len;
	int lossy, failed = 0;

	box_err_init(&e);
	if (!res)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	if (len > r->shm->out_cap)
		len = r->shm->out_cap;
	lossy = box_utf8_sanitize(r->shm->out, len, &out, &e);
	if (lossy < 0)
		lossy = 0;
	if (r->timed_out) {
		failed = 1;
		box_err_limit(&e, BOX_E_TIMEOUT, "wall", r->timeout_ms, "ms",
			      "wall-clock limit of %lld ms exceeded", (long long)r->timeout_ms);
	} else if (r->got_final) {
		const cJSON *eo;

		meta = cJSON_ParseWithLength(r->meta.data, r->meta.len);
		eo = cJSON_GetObjectItemCaseSensitive(meta, "error");
		if (!cJSON_IsObject(meta)) {
			failed = 1;
			box_err_set(&e, BOX_E_INTERNAL, "malformed final message from the VM");
		} else if (eo) {
			failed = 1;
			if (box_err_from_json(&e, eo) < 0)
				box_err_set(&e, BOX_E_INTERNAL, "malformed error from the VM");
		} else if (r->result.len) {
			val = checked_result(&r->result);
			if (!val) {
				failed = 1;
				box_err_set(&e, BOX_E_INTERNAL, "malformed result from the VM");
			}
		}
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(meta, "lossy")))
			lossy = 1;
		r->child_cpu_ms = box_json_get_int(meta, "cpu_ms", -1);
		if (r->child_cpu_ms < 0 || r->child_cpu_ms > 86400000LL * 2)
			r->child_cpu_ms = 0;
		cJSON_Delete(meta);
	} else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS) {
		failed = 1;
		box_err_set(&e, BOX_E_POLICY,
			    "the VM process made a forbidden system call and was killed");
	} else if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGXCPU ||
		   (WTERMSIG(status) == SIGKILL && ru && cpu_of(ru) >= r->cpu_ms))) {
		/* the RLIMIT_CPU backstop: SIGXCPU at the soft limit, SIGKILL at the hard one */
		failed = 1;
		box_err_limit(&e, BOX_E_LIMIT, "cpu", r->cpu_ms, "ms",
			      "CPU time limit of %lld ms exceeded", (long long)r->cpu_ms);
	} else {
		failed = 1;
		if (WIFSIGNALED(status))
			box_err_set(&e, BOX_E_INTERNAL, "the VM process died of signal %d",
				    WTERMSIG(status));
		else
			box_err_set(&e, BOX_E_INTERNAL, "the VM process ended with status %d early",
				    WEXITSTATUS(status));
	}
	/* a CPU limit no tighter than the timeout (cpu_ms defaults to it) is passed only when the
	 * wall clock has passed the timeout too: the VM's own CPU timer and box-run's deadline
	 * race to notice, and the limit the caller set is the timeout */
	if (failed && e.code == BOX_E_LIMIT && strcmp(e.limit, "cpu") == 0 &&
	    r->cpu_ms >= r->timeout_ms && wall >= r->timeout_ms)
		box_err_limit(&e, BOX_E_TIMEOUT, "wall", r->timeout_ms, "ms",
			      "wall-clock limit of %lld ms exceeded", (long long)r->timeout_ms);
	cJSON_AddBoolToObject(res, "ok", !failed);
	cJSON_AddBoolToObject(res, "success", !failed);
	/* printed NUL bytes stay: a cJSON string would end at the first one */
	cJSON_AddItemToObject(res, "stdout", box_json_string_n(out.data ? out.data : "", out.len));
	if (val)
		cJSON_AddItemToObject(res, "result", val);
	cJSON_AddBoolToObject(res, "truncated", r->shm->truncated != 0);
	box_json_add_int64(res, "total_lines", r->shm->total_lines);
	cJSON_AddBoolToObject(res, "lossy", lossy != 0);
	if (failed)
		cJSON_AddItemToObject(res, "error", box_err_to_json(&e));
	prov = provenance(r, err);
	if (!prov) {
		cJSON_Delete(res);
		box_buf_release(&out);
		return NULL;
	}
	cJSON_AddItemToObject(res, "provenance", prov);
	add_stats(r, res, ru, wall);
	if (r->events)
		cJSON_AddStringToObject(res, "event", "result");
	box_buf_release(&out);
	return res;
}

/* ------------------------------------------------------------------ box_run */

/* Rules are checked now, so that a bad one is a bad request and not a surprise at the first
 * http call; box-http, which does the requests, checks them again. */
static int check_rules(const cJSON *allow, struct box_err *err)
{
	struct box_policy *p = calloc(1, sizeof(*p));
	const cJSON *rule;
	int i = 0, rc = 0;

	if (!p)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	box_policy_init(p);
	cJSON_ArrayForEach(rule, allow) {
		if (box_policy_add(p, rule->valuestring, err) < 0) {
			char path[64];

			snprintf(path, sizeof(path), "$.allow[%d]", i);
			box_err_path(err, path);
			rc = -1;
			break;
		}
		i++;
	}
	box_policy_release(p);
	free(p);
	return rc;
}

/* A replay offers the tools table the recorded run had, from the cassette: no tool runs. */
static int replay_tools(struct run *r, struct box_err *err)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(r->cas.head, "tools"), *t;
	size_t n = (size_t)cJSON_GetArraySize(list), i = 0;

	if (!list)
		return 0;
	r->tool_info = cJSON_Duplicate(list, 1);
	r->vmtools = calloc(n + 1, sizeof(*r->vmtools));
	r->tool_used = calloc(n + 1, 1);
	if (!r->tool_info || !r->vmtools || !r->tool_used)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	cJSON_ArrayForEach(t, r->tool_info) {
		r->vmtools[i].name = box_json_get_str(t, "name", "");
		r->vmtools[i].refused = box_json_get_str(t, "refused", NULL);
		i++;
	}
	return 0;
}

static int read_opts(struct run *r, const cJSON *req, struct box_err *err)
{
	int64_t cap = box_json_get_int(req, "max_timeout_ms", 60000);
	const char *tools = box_json_get_str(req, "tools", NULL);

	r->script = box_json_get_str(req, "script", NULL);
	if (!r->script) {
		box_err_set(err, BOX_E_INVALID, "no script: give a SCRIPT file, -e CODE or \"script\"");
		box_err_path(err, "$.script");
		return -1;
	}
	r->args = cJSON_GetObjectItemCaseSensitive(req, "args");
	if (cJSON_IsNull(r->args))
		r->args = NULL;
	r->allow = cJSON_GetObjectItemCaseSensitive(req, "allow");
	if (cJSON_IsNull(r->allow))
		r->allow = NULL;
	if (r->allow && check_rules(r->allow, err) < 0)
		return -1;
	/* the http helper is looked for before the script runs, not at its first call */
	if (r->allow && !r->replaying) {
		char helper[PATH_MAX];

		if (box_libexec_find("box-http", helper, sizeof(helper), err) < 0)
			return -1;
	}
	r->timeout_ms = box_json_get_int(req, "timeout_ms", 30000);
	if (r->timeout_ms > cap)
		r->timeout_ms = cap;
	r->cpu_ms = box_json_get_int(req, "cpu_ms", r->timeout_ms);
	r->memory_bytes = box_json_get_int(req, "memory_bytes", 32 * MiB);
	r->max_instructions = box_json_get_int(req, "max_instructions", 0);
	r->max_output_bytes = box_json_get_int(req, "max_output_bytes", 64 * 1024);
	r->max_write_bytes = box_json_get_int(req, "max_write_bytes", 64 * MiB);
	r->max_result_bytes = box_json_get_int(req, "max_result_bytes", MiB);
	r->allow_private = box_json_get_bool(req, "allow_private_network", 0);
	r->events = box_json_get_bool(req, "events", 0);
	r->digests = box_json_get_bool(req, "digests", 0) || r->recording || r->replaying;
	if (r->replaying)
		return replay_tools(r, err);
	/* last: the only option that allocates */
	if (tools && load_tools(r, tools, err) < 0)
		return -1;
	return 0;
}

static void tools_release(struct run *r)
{
	box_tools_free(r->tools);
	r->tools = NULL;
	free(r->vmtools);
	r->vmtools = NULL;
	cJSON_Delete(r->tool_info);
	r->tool_info = NULL;
	free(r->tool_used);
	r->tool_used = NULL;
}

/* The recorded request, with the script and args of this invocation when it gives them
 * (a changed script is what a replay checks), checked as any request is. */
static cJSON *replay_request(struct run *r, const cJSON *req, const char *path,
			     struct box_err *err)
{
	cJSON *m = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(r->cas.head, "request"), 1);
	const char *keys[] = { "script", "args" };

	if (!m)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	for (size_t i = 0; i < 2; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, keys[i]);

		if (!v)
			continue;
		cJSON_DeleteItemFromObjectCaseSensitive(m, keys[i]);
		cJSON_AddItemToObject(m, keys[i], cJSON_Duplicate(v, 1));
	}
	if (cJSON_GetObjectItemCaseSensitive(m, "record") ||
	    cJSON_GetObjectItemCaseSensitive(m, "replay") ||
	    cJSON_GetObjectItemCaseSensitive(m, "trace") || box_json_check(m, box_run_fields,
									     err) < 0) {
		struct box_err e = *err;

		if (e.code == BOX_OK)
			box_err_set(&e, BOX_E_INVALID, "record, replay or trace in the request");
		box_err_set(err, BOX_E_INVALID, "cassette %.200s: request: %.250s", path,
			    e.message);
		box_err_path(err, e.path);
		cJSON_Delete(m);
		return NULL;
	}
	return m;
}

static int64_t choose_seed(struct run *r, const cJSON *req)
{
	uint64_t v = 0;

	if (r->replaying)
		return box_json_get_int(r->cas.head, "seed", 0);
	if (cJSON_GetObjectItemCaseSensitive(req, "seed"))
		return box_json_get_int(req, "seed", 0);
	/* getrandom does not fail for 8 bytes once the pool is ready; the time is a fallback */
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
		v = (uint64_t)box_now_ms() * 2654435761u;
	return (int64_t)(v & ((1ULL << 53) - 1));
}

/* --record: the cassette goes out before the result does (box-run exits on the result) */
static int write_cassette(struct run *r, const cJSON *res, struct box_err *err)
{
	const char *path = box_json_get_str(r->req, "record", NULL);
	cJSON *head;
	int rc;

	(void)res;
	if (!r->recording)
		return 0;
	head = cJSON_CreateObject();
	if (!head)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	box_json_add_int64(head, "cassette", 1);
	cJSON_AddStringToObject(head, "box_version", PACKAGE_VERSION);
	cJSON_AddItemToObject(head, "request", request_as_run(r->req));
	box_json_add_int64(head, "seed", r->seed);
	if (r->tool_info)
		cJSON_AddItemToObject(head, "tools", cJSON_Duplicate(r->tool_info, 1));
	box_json_exact(head);
	rc = box_cassette_write(&r->cas, head, path, err);
	if (rc < 0 && !err->path[0])
		box_err_path(err, "$.record");
	cJSON_Delete(head);
	return rc;
}

/* --record and --replay: a replay runs the recorded request (*req becomes *merged, which the
 * caller frees) with the cassette loaded into r->cas. */
static int record_replay_setup(struct run *r, const cJSON **req, cJSON **merged,
			       struct box_err *err)
{
	const char *replay = box_json_get_str(*req, "replay", NULL);

	r->recording = box_json_get_str(*req, "record", NULL) != NULL;
	if (replay && r->recording) {
		box_err_set(err, BOX_E_USAGE, "--record and --replay exclude each other");
		box_err_path(err, "$.replay");
		return -1;
	}
	if (!replay)
		return 0;
	if (box_cassette_load(&r->cas, replay, err) < 0) {
		if (!err->path[0])
			box_err_path(err, "$.replay");
		return -1;
	}
	r->replaying = 1;
	*merged = replay_request(r, *req, replay, err);
	if (!*merged)
		return -1;
	*req = *merged;
	r->replay_fs = box_json_get_str(*req, "workspace", NULL) != NULL;
	return 0;
}

/* The output area shared with the VM child, the socket to it and the child itself; r->shm
 * stays NULL when it could not be mapped. */
static int start_vm(struct run *r, struct box_err *err)
{
	int sv[2];

	r->shm_size = box_vm_shm_size(r->max_output_bytes);
	r->shm = mmap(NULL, r->shm_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (r->shm == MAP_FAILED) {
		r->shm = NULL;
		return box_err_sys(err, "mmap");
	}
	r->shm->out_cap = (uint32_t)r->max_output_bytes;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return box_err_sys(err, "socketpair");
	r->start = box_now_ms();
	r->deadline = r->start + r->timeout_ms;
	r->pid = fork();
	if (r->pid == 0) {
		close(sv[0]);
		child(r, sv[1]);
	}
	close(sv[1]);
	if (r->pid < 0) {
		close(sv[0]);
		return box_err_sys(err, "fork");
	}
	r->sock = sv[0];
	return 0;
}

cJSON *box_run(const cJSON *req, const struct box_run_hooks *hooks, struct box_err *err)
{
	struct run r;
	int status = 0, tried = 0;
	struct rusage ru;
	cJSON *res = NULL, *merged = NULL;
	const char *ws, *trace = box_json_get_str(req, "trace", NULL);

	memset(&r, 0, sizeof(r));
	r.hooks = hooks;
	r.ws.rootfd = -1;
	r.trace = -1;
	r.policy = hooks ? hooks->policy : NULL;
	box_buf_init(&r.meta, 64 * 1024);
	box_cassette_init(&r.cas, (size_t)BOX_CASSETTE_MAX_BYTES);
	if (record_replay_setup(&r, &req, &merged, err) < 0)
		goto out_early;
	r.req = req;
	if (read_opts(&r, req, err) < 0)
		goto out_early;
	r.seed = choose_seed(&r, req);
	if (trace) {
		r.trace = open(trace, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
		if (r.trace < 0) {
			box_err_sys(err, "trace: %.200s", trace);
			box_err_path(err, "$.trace");
			goto out_early;
		}
	}
	box_buf_init(&r.result, (size_t)r.max_result_bytes + 16);
	ws = r.replaying ? NULL : box_json_get_str(req, "workspace", NULL);
	if (ws) {
		if (box_ws_open(&r.ws, ws, r.max_write_bytes, err) < 0) {
			if (!err->path[0])
				box_err_path(err, "$.workspace");
			goto out_early;
		}
		r.has_ws = 1;
	}
	if (start_vm(&r, err) < 0) {
		if (r.shm)
			goto out_shm;
		goto out_ws;
	}
	if (serve(&r, err) < 0) {
		kill(r.pid, SIGKILL);
		wait4(r.pid, &status, 0, &ru);
		close(r.sock);
		http_stop(&r);
		goto out_shm;
	}
	if (r.got_final && !r.timed_out) {
		/* the answer is complete: hand it over first (a caller that exits there leaves the
		 * child to PDEATHSIG), then end the child and wait for its teardown */
		res = build_result(&r, 0, NULL, box_now_ms() - r.start, err);
		tried = 1;
		if (res && write_cassette(&r, res, err) < 0) {
			cJSON_Delete(res);
			res = NULL;
		}
		if (res && hooks && hooks->on_result)
			hooks->on_result(hooks->ctx, res);
	}
	/* done, timed out or dead: in every case nothing of the child may outlive the run */
	kill(r.pid, SIGKILL);
	while (wait4(r.pid, &status, 0, &ru) < 0 && errno == EINTR)
		;
	close(r.sock);
	http_stop(&r);
	if (!res && !tried) {
		res = build_result(&r, status, &ru, box_now_ms() - r.start, err);
		if (res && write_cassette(&r, res, err) < 0) {
			cJSON_Delete(res);
			res = NULL;
		}
	}
out_shm:
	munmap(r.shm, r.shm_size);
out_ws:
	if (r.has_ws)
		box_ws_release(&r.ws);
out_early:
	if (r.trace >= 0)
		close(r.trace);
	box_buf_release(&r.meta);
	box_buf_release(&r.result);
	box_cassette_release(&r.cas);
	tools_release(&r);
	cJSON_Delete(merged);
	return res;
}

/* ------------------------------------------------------------------ --describe */

static const char *const method_names[] = {
	"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", NULL
};

/* One allow rule for an agent: {"host", "port", "schemes", "path"?, "methods"?} and the same
 * as one line of text. */
static int describe_rule(const struct box_policy_rule *pr, cJSON *hosts, struct box_buf *text,
			 struct box_err *err)
{
	cJSON *h = cJSON_CreateObject(), *a;
	char host[BOX_HOST_MAX + 3];
	int i, any = pr->methods == 0;

	if (!h || !cJSON_AddItemToArray(hosts, h))
		return cJSON_Delete(h), box_err_set(err, BOX_E_INTERNAL, "out of memory");
	snprintf(host, sizeof(host), "%s%s", pr->wildcard ? "*." : "", pr->host);
	cJSON_AddStringToObject(h, "host", host);
	box_json_add_int64(h, "port", pr->port);
	a = cJSON_AddArrayToObject(h, "schemes");
	if (pr->schemes & BOX_SCHEME_HTTP)
		cJSON_AddItemToArray(a, cJSON_CreateString("http"));
	if (pr->schemes & BOX_SCHEME_HTTPS)
		cJSON_AddItemToArray(a, cJSON_CreateString("https"));
	if (pr->path && pr->path[0])
		cJSON_AddStringToObject(h, "path", pr->path);
	if (pr->schemes == (BOX_SCHEME_HTTP | BOX_SCHEME_HTTPS))
		box_buf_printf(text, err, "\n- %s:%d (http or https", host, pr->port);
	else if ((pr->schemes == BOX_SCHEME_HTTPS && pr->port == 443) ||
		 (pr->schemes == BOX_SCHEME_HTTP && pr->port == 80))
		box_buf_printf(text, err, "\n- %s://%s%s (", pr->schemes == BOX_SCHEME_HTTPS ?
			       "https" : "http", host, pr->path ? pr->path : "");
	else
		box_buf_printf(text, err, "\n- %s://%s:%d%s (", pr->schemes == BOX_SCHEME_HTTPS ?
			       "https" : "http", host, pr->port, pr->path ? pr->path : "");
	if (pr->schemes == (BOX_SCHEME_HTTP | BOX_SCHEME_HTTPS))
		box_buf_puts(text, ", ", err);
	if (any) {
		box_buf_puts(text, "any method)", err);
		return 0;
	}
	a = cJSON_AddArrayToObject(h, "methods");
	for (i = 0; method_names[i]; i++) {
		if (!(pr->methods & box_policy_method_bit(method_names[i])))
			continue;
		cJSON_AddItemToArray(a, cJSON_CreateString(method_names[i]));
		box_buf_printf(text, err, "%s%s", cJSON_GetArraySize(a) > 1 ? ", " : "",
			       method_names[i]);
	}
	return box_buf_puts(text, ")", err);
}

static int describe_tools(const struct box_toolset *set, cJSON *o, struct box_buf *text,
			  struct box_err *err)
{
	cJSON *list = box_tools_describe(set, BOX_TOOLS_CODE_MODE);
	const cJSON *t;

	if (!list)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	cJSON_AddItemToObject(o, "tools", list);
	if (cJSON_GetArraySize(list) == 0)
		return box_buf_puts(text, "\n\nTools: none is offered (tools is an empty table).",
				    err);
	box_buf_puts(text, "\n\nTools: the script calls a tool as tools.NAME(input), input a table "
		     "that matches the tool's input schema (nil for {}). The tool's JSON answer "
		     "comes back as Lua values; a failed call raises an error (pcall catches it). "
		     "The tools:", err);
	cJSON_ArrayForEach(t, list) {
		const char *name = box_json_get_str(t, "name", "");
		const char *what = box_json_get_str(t, "description", "");
		const cJSON *in = cJSON_GetObjectItemCaseSensitive(t, "input_schema");
		char *schema = cJSON_PrintUnformatted(in);

		box_buf_printf(text, err, "\n- %s: %s\n  input schema: %s", name, what,
			       schema ? schema : "{}");
		cJSON_free(schema);
	}
	return 0;
}

static int describe_hosts(const cJSON *allow, int allow_private, cJSON *o, struct box_buf *text,
			  struct box_err *err)
{
	struct box_policy *p = calloc(1, sizeof(*p));
	cJSON *hosts = cJSON_AddArrayToObject(o, "allowed_hosts");
	const cJSON *rule;
	size_t i;
	int rc = 0, k = 0;

	if (!p || !hosts) {
		free(p);
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	}
	box_policy_init(p);
	cJSON_ArrayForEach(rule, allow) {
		if (box_policy_add(p, rule->valuestring, err) < 0) {
			char path[64];

			snprintf(path, sizeof(path), "$.allow[%d]", k);
			box_err_path(err, path);
			rc = -1;
			goto out;
		}
		k++;
	}
	if (p->n == 0) {
		rc = box_buf_puts(text, "\n\nNetwork: none (http is nil).", err);
		goto out;
	}
	box_buf_puts(text, "\n\nNetwork: http.get(url[, opts]) and http.post(url, body[, opts]) "
		     "reach only these hosts (allowed domains), with these methods:", err);
	for (i = 0; i < p->n && rc == 0; i++)
		rc = describe_rule(&p->rules[i], hosts, text, err);
	if (rc == 0 && !allow_private)
		rc = box_buf_puts(text, "\nLoopback, private, link-local and metadata addresses "
				  "are refused.", err);
out:
	box_policy_release(p);
	free(p);
	return rc;
}

cJSON *box_run_describe(const cJSON *req, const char *name, const char *description,
			const char *request_schema, const char *result_schema,
			struct box_err *err)
{
	struct run r;
	struct box_buf text = BOX_BUF_INIT(64 * MiB);
	cJSON *o = cJSON_CreateObject(), *extra = cJSON_CreateObject(), *in, *out, *it;
	const char *tools = box_json_get_str(req, "tools", NULL);
	const cJSON *allow = cJSON_GetObjectItemCaseSensitive(req, "allow");

	memset(&r, 0, sizeof(r));
	in = box_json_parse(request_schema, strlen(request_schema), err);
	out = box_json_parse(result_schema, strlen(result_schema), err);
	if (!o || !extra || !in || !out) {
		box_err_set(err, BOX_E_INTERNAL, "built-in schema does not parse");
		goto fail;
	}
	cJSON_AddStringToObject(o, "name", name);
	box_buf_puts(&text, description, err);
	if (tools) {
		if (load_tools(&r, tools, err) < 0 ||
		    describe_tools(r.tools, extra, &text, err) < 0)
			goto fail;
	}
	if (describe_hosts(cJSON_IsArray(allow) ? allow : NULL,
			   box_json_get_bool(req, "allow_private_network", 0), extra, &text,
			   err) < 0)
		goto fail;
	box_buf_puts(&text, box_json_get_str(req, "workspace", NULL) ?
		     "\n\nFiles: fs.read, fs.write, fs.append, fs.exists, fs.list, fs.stat, "
		     "fs.remove, fs.mkdir and fs.grep work in a workspace that they see as /." :
		     "\n\nFiles: none (fs is nil).", err);
	if (!text.data) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto fail;
	}
	cJSON_AddStringToObject(o, "description", text.data);
	cJSON_AddItemToObject(o, "input_schema", in);
	cJSON_AddItemToObject(o, "output_schema", out);
	/* what the script can reach, after what every definition has */
	while ((it = extra->child)) {
		cJSON_DetachItemViaPointer(extra, it);
		cJSON_AddItemToObject(o, it->string, it);
	}
	cJSON_Delete(extra);
	tools_release(&r);
	box_buf_release(&text);
	return o;
fail:
	tools_release(&r);
	box_buf_release(&text);
	cJSON_Delete(extra);
	cJSON_Delete(o);
	cJSON_Delete(in);
	cJSON_Delete(out);
	return NULL;
}
