#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "provider.h"
#include "buf.h"
#include "json.h"
#include "sbstate.h"
#include "banned.h"

#define DEFAULT_TIMEOUT_MS 30000
#define TAIL_MAX 400

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

static int has_suffix(const char *s, size_t n, const char *suf)
{
	size_t m = strlen(suf);

	return n >= m && strcasecmp(s + n - m, suf) == 0;
}

int box_provider_env_is_secret(const char *name)
{
	static const char *const inner[] = {
		"SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "API_KEY", "APIKEY", "TOKEN",
		"PRIVATE_KEY", "ACCESS_KEY", "AUTH",
	};
	static const char *const prefix[] = { "AWS_", "AZURE_", "GOOGLE_", "GCP_", "SSH_" };
	size_t i, n = strlen(name);

	if (has_suffix(name, n, "_KEY") || has_suffix(name, n, "_PAT") ||
	    has_suffix(name, n, "_PASS"))
		return 1;
	for (i = 0; i < sizeof(inner) / sizeof(inner[0]); i++)
		if (strcasestr(name, inner[i]))
			return 1;
	for (i = 0; i < sizeof(prefix) / sizeof(prefix[0]); i++)
		if (strncasecmp(name, prefix[i], strlen(prefix[i])) == 0)
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

static int valid_env_name(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > 128 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return 0;
	for (i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
			return 0;
	return 1;
}

struct envv {
	char *v[BOX_PROVIDER_ENV_MAX + 4];
	size_t n;
};

static void envv_release(struct envv *e)
{
	size_t i;

	for (i = 0; i < e->n; i++)
		free(e->v[i]);
	e->n = 0;
}

static int envv_has(const struct envv *e, const char *name)
{
	size_t i, n = strlen(name);

	for (i = 0; i < e->n; i++)
		if (strncmp(e->v[i], name, n) == 0 && e->v[i][n] == '=')
			return 1;
	return 0;
}

static int envv_add(struct envv *e, const char *name, size_t nlen, const char *val,
		    struct box_err *err)
{
	size_t len = nlen + strlen(val) + 2;
	char *s;

	if (e->n >= BOX_PROVIDER_ENV_MAX + 3)
		return box_err_set(err, BOX_E_INVALID, "too many provider variables");
	if (!(s = malloc(len)))
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	snprintf(s, len, "%.*s=%s", (int)nlen, name, val);
	e->v[e->n++] = s;
	e->v[e->n] = NULL;
	return 0;
}

static int build_env(struct envv *e, const char *const *extra, struct box_err *err)
{
	static const char *const base[] = { "PATH", "HOME", "LANG" };
	size_t i;

	e->n = 0;
	e->v[0] = NULL;
	for (i = 0; extra && extra[i]; i++) {
		const char *eq = strchr(extra[i], '=');
		size_t nlen = eq ? (size_t)(eq - extra[i]) : strlen(extra[i]);
		const char *val;
		char name[130];

		if (i >= BOX_PROVIDER_ENV_MAX)
			return box_err_set(err, BOX_E_INVALID, "too many provider variables");
		if (!valid_env_name(extra[i], nlen))
			return box_err_set(err, BOX_E_INVALID, "invalid variable name for a provider");
		snprintf(name, sizeof(name), "%.*s", (int)nlen, extra[i]);
		if (box_provider_env_is_secret(name))
			return box_err_set(err, BOX_E_POLICY,
					   "credential-shaped variable %s is never passed to a provider",
					   name);
		if (envv_has(e, name))
			continue;
		val = eq ? eq + 1 : getenv(name);
		if (val && envv_add(e, name, nlen, val, err))
			return -1;
	}
	for (i = 0; i < sizeof(base) / sizeof(base[0]); i++) {
		const char *val = getenv(base[i]);

		if (envv_has(e, base[i]))
			continue;
		if (i == 0 && (!val || !val[0]))
			val = BOX_PROVIDER_DEFAULT_PATH;
		if (val && envv_add(e, base[i], strlen(base[i]), val, err))
			return -1;
	}
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Keeps the last bytes of stderr: the end of a failure's story is the part worth showing. */
struct tail {
	char *data;
	size_t len, max;
};

static void tail_add(struct tail *t, const char *p, size_t n)
{
	if (!t->data || !t->max)
		return;
	if (n >= t->max) {
		memcpy(t->data, p + n - t->max, t->max);
		t->len = t->max;
		return;
	}
	if (t->len + n > t->max) {
		size_t drop = t->len + n - t->max;

		memmove(t->data, t->data + drop, t->len - drop);
		t->len -= drop;
	}
	memcpy(t->data + t->len, p, n);
	t->len += n;
}

/* The last TAIL_MAX bytes of stderr on one printable line. */
static void tail_text(const struct tail *t, char *out, size_t outsz)
{
	size_t start = t->len > TAIL_MAX ? t->len - TAIL_MAX : 0, i, j = 0;
	size_t end = t->len;

	while (end > start && (t->data[end - 1] == '\n' || t->data[end - 1] == ' '))
		end--;
	for (i = start; i < end && j + 1 < outsz; i++) {
		unsigned char c = (unsigned char)t->data[i];

		out[j++] = c == '\n' ? ' ' : (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	out[j] = 0;
}

struct proc {
	pid_t pid;
	int in, out, errfd;
	int status;
	int exited;
};

static void child_exec(const char *path, int in, int out, int errfd, char *const envp[])
{
	char *argv[2];
	sigset_t none;
	int i;

	setpgid(0, 0);
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(errfd, 2) < 0)
		_exit(127);
	close_range(3, ~0U, 0);
	for (i = 1; i < NSIG; i++)
		if (i != SIGKILL && i != SIGSTOP)
			signal(i, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	argv[0] = (char *)path;
	argv[1] = NULL;
	execve(path, argv, envp);
	_exit(127);
}

static int spawn(struct proc *p, const char *path, char *const envp[], struct box_err *err)
{
	int sv[2], po[2] = { -1, -1 }, pe[2] = { -1, -1 };

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return box_err_sys(err, "socketpair");
	if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC)) {
		box_err_sys(err, "pipe");
		goto fail;
	}
	p->pid = fork();
	if (p->pid < 0) {
		box_err_sys(err, "fork");
		goto fail;
	}
	if (p->pid == 0)
		child_exec(path, sv[1], po[1], pe[1], envp);
	/* both sides set the group so that a kill right after fork already reaches it */
	setpgid(p->pid, p->pid);
	close(sv[1]);
	close(po[1]);
	close(pe[1]);
	p->in = sv[0];
	p->out = po[0];
	p->errfd = pe[0];
	fcntl(p->out, F_SETFL, O_NONBLOCK);
	fcntl(p->errfd, F_SETFL, O_NONBLOCK);
	p->exited = 0;
	return 0;
fail:
	close(sv[0]);
	close(sv[1]);
	if (po[0] >= 0) {
		close(po[0]);
		close(po[1]);
	}
	if (pe[0] >= 0) {
		close(pe[0]);
		close(pe[1]);
	}
	return -1;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Checks for the leader's exit without reaping it: while it is a zombie its pid, and so its
 * process group id, cannot be reused, and killing the group cannot hit a stranger. */
static int leader_exited(struct proc *p)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == p->pid)
		return 1;
	return 0;
}

static void finish(struct proc *p)
{
	kill(-p->pid, SIGKILL);
	while (waitpid(p->pid, &p->status, 0) < 0 && errno == EINTR)
		;
	p->exited = 1;
}

enum run_end { RUN_DONE, RUN_TIMEOUT, RUN_FLOOD, RUN_FAIL };

static enum run_end pump(struct proc *p, const char *in, size_t inlen, struct box_buf *out,
			 struct tail *errt, int timeout_ms, struct box_err *err)
{
	int64_t deadline = now_ms() + timeout_ms;
	size_t off = 0;
	char chunk[65536];
	int gone = 0;

	for (;;) {
		struct pollfd pf[3];
		int64_t left = deadline - now_ms();
		int n = 0, i, r;

		if (p->out < 0 && p->errfd < 0 && gone)
			return RUN_DONE;
		if (left <= 0)
			return RUN_TIMEOUT;
		if (!gone && leader_exited(p)) {
			/* what it left behind in its group goes with it, and the pipes drain */
			kill(-p->pid, SIGKILL);
			gone = 1;
			close_fd(&p->in);
		}
		if (p->in >= 0 && off < inlen)
			pf[n++] = (struct pollfd){ .fd = p->in, .events = POLLOUT };
		if (p->out >= 0)
			pf[n++] = (struct pollfd){ .fd = p->out, .events = POLLIN };
		if (p->errfd >= 0)
			pf[n++] = (struct pollfd){ .fd = p->errfd, .events = POLLIN };
		r = poll(pf, (nfds_t)n, left < 50 ? (int)left : 50);
		if (r < 0 && errno != EINTR) {
			box_err_sys(err, "poll");
			return RUN_FAIL;
		}
		for (i = 0; r > 0 && i < n; i++) {
			ssize_t k;

			if (!pf[i].revents)
				continue;
			if (pf[i].fd == p->in) {
				k = send(p->in, in + off, inlen - off, MSG_NOSIGNAL | MSG_DONTWAIT);
				if (k > 0)
					off += (size_t)k;
				else if (k < 0 && errno != EAGAIN && errno != EINTR)
					off = inlen; /* it stopped reading: its answer will say why */
				if (off >= inlen)
					close_fd(&p->in);
				continue;
			}
			k = read(pf[i].fd, chunk, sizeof(chunk));
			if (k < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (k <= 0) {
				if (pf[i].fd == p->out)
					close_fd(&p->out);
				else
					close_fd(&p->errfd);
				continue;
			}
			if (pf[i].fd == p->errfd) {
				tail_add(errt, chunk, (size_t)k);
			} else if (box_buf_append(out, chunk, (size_t)k, err)) {
				if (err->code != BOX_E_LIMIT)
					return RUN_FAIL;
				return RUN_FLOOD;
			}
		}
		if (p->in >= 0 && off >= inlen)
			close_fd(&p->in);
	}
}

static cJSON *interpret(const char *name, const struct proc *p, const struct box_buf *out,
			const struct tail *errt, struct box_err *err)
{
	struct box_err perr;
	char tailmsg[TAIL_MAX * 2 + 1];
	cJSON *obj = NULL;
	const cJSON *okv;

	tail_text(errt, tailmsg, sizeof(tailmsg));
	box_err_init(&perr);
	if (out->len)
		obj = box_json_parse(out->data, out->len, &perr);
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
	if (WIFSIGNALED(p->status) || !WIFEXITED(p->status) || WEXITSTATUS(p->status) != 0) {
		if (WIFSIGNALED(p->status))
			box_err_set(err, BOX_E_PROVIDER, "provider %s killed by signal %d%s%s", name,
				    WTERMSIG(p->status), tailmsg[0] ? ": " : "", tailmsg);
		else
			box_err_set(err, BOX_E_PROVIDER, "provider %s exited with status %d%s%s", name,
				    WEXITSTATUS(p->status), tailmsg[0] ? ": " : "", tailmsg);
		cJSON_Delete(obj);
		return NULL;
	}
	if (!cJSON_IsObject(obj)) {
		box_err_set(err, BOX_E_PROVIDER, "provider %s did not answer a JSON object%s%s", name,
			    tailmsg[0] ? ": " : "", tailmsg);
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
	struct box_buf out = BOX_BUF_INIT(o->max_stdout ? o->max_stdout : BOX_PROVIDER_STDOUT_MAX);
	struct tail errt = { NULL, 0, o->max_stderr ? o->max_stderr : BOX_PROVIDER_STDERR_MAX };
	int timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
	struct proc p = { .pid = -1, .in = -1, .out = -1, .errfd = -1 };
	struct envv env = { .n = 0 };
	char path[PATH_MAX];
	cJSON *res = NULL;
	char *line = NULL;
	size_t linelen;
	enum run_end end;

	if (check_op(op, err) || box_provider_find(name, o->libexec_dir, path, sizeof(path), err))
		return NULL;
	if (build_env(&env, o->env, err))
		goto out;
	if (!(line = box_json_line(op, &linelen)) || !(errt.data = malloc(errt.max))) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	if (spawn(&p, path, env.v, err))
		goto out;
	end = pump(&p, line, linelen, &out, &errt, timeout_ms, err);
	finish(&p);
	switch (end) {
	case RUN_TIMEOUT:
		box_err_limit(err, BOX_E_TIMEOUT, "timeout_ms", timeout_ms, "ms",
			      "provider %s did not answer within %d ms", name, timeout_ms);
		break;
	case RUN_FLOOD:
		box_err_limit(err, BOX_E_PROVIDER, "provider_stdout_bytes", (int64_t)out.max,
			      "bytes", "provider %s wrote more than %zu bytes", name, out.max);
		break;
	case RUN_DONE:
		res = interpret(name, &p, &out, &errt, err);
		break;
	default:
		break;
	}
out:
	close_fd(&p.in);
	close_fd(&p.out);
	close_fd(&p.errfd);
	free(line);
	free(errt.data);
	box_buf_release(&out);
	envv_release(&env);
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
