#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "ipc.h"
#include "credenv.h"
#include "banned.h"

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

void box_proc_env_release(struct box_proc_env *e)
{
	size_t i;

	for (i = 0; i < e->n; i++)
		free(e->v[i]);
	e->n = 0;
	e->v[0] = NULL;
}

static int env_has(const struct box_proc_env *e, const char *name)
{
	size_t i, n = strlen(name);

	for (i = 0; i < e->n; i++)
		if (strncmp(e->v[i], name, n) == 0 && e->v[i][n] == '=')
			return 1;
	return 0;
}

static int env_add(struct box_proc_env *e, const char *name, size_t nlen, const char *val,
		   const char *what, struct box_err *err)
{
	size_t len = nlen + strlen(val) + 2;
	char *s;

	if (e->n >= BOX_PROC_ENV_MAX + 3)
		return box_err_set(err, BOX_E_INVALID, "too many %s variables", what);
	if (!(s = malloc(len)))
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	snprintf(s, len, "%.*s=%s", (int)nlen, name, val);
	e->v[e->n++] = s;
	e->v[e->n] = NULL;
	return 0;
}

int box_proc_env_build(struct box_proc_env *e, const char *const *extra, const char *what,
		       struct box_err *err)
{
	static const char *const base[] = { "PATH", "HOME", "LANG" };
	size_t i;

	e->n = 0;
	e->v[0] = NULL;
	for (i = 0; extra && extra[i]; i++) {
		const char *eq = strchr(extra[i], '=');
		size_t nlen = eq ? (size_t)(eq - extra[i]) : strlen(extra[i]);
		const char *val, *rule;
		char name[130];

		if (i >= BOX_PROC_ENV_MAX)
			return box_err_set(err, BOX_E_INVALID, "too many %s variables", what);
		if (!valid_env_name(extra[i], nlen))
			return box_err_set(err, BOX_E_INVALID, "invalid variable name for a %s", what);
		snprintf(name, sizeof(name), "%.*s", (int)nlen, extra[i]);
		val = eq ? eq + 1 : getenv(name);
		if ((rule = box_credenv_name_rule(name)) ||
		    (val && (rule = box_credenv_value_rule(val))))
			return box_err_set(err, BOX_E_POLICY,
					   "credential-shaped variable %s is never passed to a %s (%s)",
					   name, what, rule);
		if (env_has(e, name))
			continue;
		if (val && env_add(e, name, nlen, val, what, err))
			return -1;
	}
	for (i = 0; i < sizeof(base) / sizeof(base[0]); i++) {
		const char *val = getenv(base[i]);

		if (env_has(e, base[i]))
			continue;
		if (i == 0 && (!val || !val[0]))
			val = BOX_PROC_DEFAULT_PATH;
		if (val && env_add(e, base[i], strlen(base[i]), val, what, err))
			return -1;
	}
	return 0;
}

/* Keeps the last bytes of stderr: the end of a failure's story is the part worth showing. */
struct tail {
	char data[BOX_PROC_TAIL_MAX];
	size_t len, max;
};

static void tail_add(struct tail *t, const char *p, size_t n)
{
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

static void tail_text(const struct tail *t, char *out, size_t outsz)
{
	size_t i, j = 0, end = t->len;

	while (end > 0 && (t->data[end - 1] == '\n' || t->data[end - 1] == ' '))
		end--;
	for (i = 0; i < end && j + 1 < outsz; i++) {
		unsigned char c = (unsigned char)t->data[i];

		out[j++] = c == '\n' ? ' ' : (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	out[j] = 0;
}

/* Every descriptor is first moved to 3 or above, so that the dup2 onto 0-2 below can never
 * overwrite one still to be moved, and always clears close-on-exec. */
static int high(int fd)
{
	return fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

static void child_exec(const struct box_proc_opts *o, int in, int out, int errfd, int st,
		       pid_t parent)
{
	sigset_t none;
	int e, i;

	setpgid(0, 0);
	if (o->die_with_parent && (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent))
		_exit(127);
	st = high(st);
	in = high(in);
	out = high(out);
	errfd = high(errfd);
	if (st < 0 || in < 0 || out < 0 || errfd < 0 ||
	    dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(errfd, 2) < 0)
		goto fail;
	if (st > 3)
		close_range(3, (unsigned)st - 1, 0);
	close_range((unsigned)st + 1, ~0U, 0);
	for (i = 1; i < NSIG; i++)
		if (i != SIGKILL && i != SIGSTOP)
			signal(i, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (o->cwd && chdir(o->cwd) < 0)
		goto fail;
	execve(o->argv[0], (char *const *)o->argv, o->envp ? o->envp : (char *const[]){ NULL });
fail:
	e = errno;
	if (st >= 0 && write(st, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int spawn(struct box_proc_child *p, const struct box_proc_opts *o, struct box_err *err)
{
	int sv[2], po[2] = { -1, -1 }, pe[2] = { -1, -1 }, ps[2] = { -1, -1 }, e = 0;
	pid_t self;
	ssize_t k;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return box_err_sys(err, "socketpair");
	if (pipe2(po, O_CLOEXEC) || pipe2(ps, O_CLOEXEC) ||
	    (o->stderr_inherit ? (pe[1] = fcntl(2, F_DUPFD_CLOEXEC, 3)) < 0 :
	     pipe2(pe, O_CLOEXEC) != 0)) {
		box_err_sys(err, "pipe");
		goto fail;
	}
	self = getpid();
	p->pid = fork();
	if (p->pid < 0) {
		box_err_sys(err, "fork");
		goto fail;
	}
	if (p->pid == 0)
		child_exec(o, sv[1], po[1], pe[1], ps[1], self);
	/* both sides set the group so that a kill right after fork already reaches it */
	setpgid(p->pid, p->pid);
	close(sv[1]);
	close(po[1]);
	close(pe[1]);
	close(ps[1]);
	p->in = sv[0];
	p->out = po[0];
	p->errfd = pe[0];
	fcntl(p->out, F_SETFL, O_NONBLOCK);
	if (p->errfd >= 0)
		fcntl(p->errfd, F_SETFL, O_NONBLOCK);
	/* the status pipe closes on a successful execve, or carries the errno of the failure */
	do
		k = read(ps[0], &e, sizeof(e));
	while (k < 0 && errno == EINTR);
	close(ps[0]);
	if (k == (ssize_t)sizeof(e)) {
		errno = e;
		return box_err_sys(err, "cannot run %s", o->argv[0]);
	}
	/* a pidfd wakes the poll below when the child exits; without one it polls every 50 ms */
	p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	return 0;
fail:
	close(sv[0]);
	close(sv[1]);
	if (po[0] >= 0) {
		close(po[0]);
		close(po[1]);
	}
	if (pe[0] >= 0)
		close(pe[0]);
	if (pe[1] >= 0)
		close(pe[1]);
	if (ps[0] >= 0) {
		close(ps[0]);
		close(ps[1]);
	}
	p->pid = -1;
	return -1;
}

/* Checks for the leader's exit without reaping it: while it is a zombie its pid, and so its
 * process group id, cannot be reused, and killing the group cannot hit a stranger. */
static int leader_exited(struct box_proc_child *p)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == p->pid)
		return 1;
	return 0;
}

static void finish(struct box_proc_child *p)
{
	if (p->pid <= 0)
		return;
	kill(-p->pid, SIGKILL);
	while (waitpid(p->pid, &p->status, 0) < 0 && errno == EINTR)
		;
	p->pid = -1;
}

enum run_end { RUN_DONE, RUN_TIMEOUT, RUN_FLOOD, RUN_FAIL };

static int hangup_fd = -1;

void box_proc_cancel_on_hangup(int fd)
{
	hangup_fd = fd;
}

static enum run_end pump(struct box_proc_child *p, const struct box_proc_opts *o, struct box_buf *out,
			 struct tail *errt, size_t *errbytes, int timeout_ms, struct box_err *err)
{
	int64_t deadline = box_now_ms() + timeout_ms;
	const char *in = o->in;
	size_t off = 0, inlen = o->in ? o->inlen : 0;
	char chunk[65536];
	int gone = 0;

	for (;;) {
		struct pollfd pf[5];
		int64_t left = deadline - box_now_ms();
		int n = 0, i, r, wait_ms;

		if (p->out < 0 && p->errfd < 0 && gone)
			return RUN_DONE;
		if (left <= 0)
			return RUN_TIMEOUT;
		if (!gone && leader_exited(p)) {
			/* what it left behind in its group goes with it, and the pipes drain */
			kill(-p->pid, SIGKILL);
			gone = 1;
			close_fd(&p->in);
			close_fd(&p->pidfd);
			continue;
		}
		if (p->in >= 0 && off < inlen)
			pf[n++] = (struct pollfd){ .fd = p->in, .events = POLLOUT };
		if (p->out >= 0)
			pf[n++] = (struct pollfd){ .fd = p->out, .events = POLLIN };
		if (p->errfd >= 0)
			pf[n++] = (struct pollfd){ .fd = p->errfd, .events = POLLIN };
		if (p->pidfd >= 0)
			pf[n++] = (struct pollfd){ .fd = p->pidfd, .events = POLLIN };
		if (hangup_fd >= 0)
			pf[n++] = (struct pollfd){ .fd = hangup_fd, .events = POLLRDHUP };
		wait_ms = p->pidfd >= 0 || gone ? (left > 1000 ? 1000 : (int)left) :
			  (left < 50 ? (int)left : 50);
		r = poll(pf, (nfds_t)n, wait_ms);
		if (r < 0 && errno != EINTR) {
			box_err_sys(err, "poll");
			return RUN_FAIL;
		}
		for (i = 0; r > 0 && i < n; i++) {
			ssize_t k;

			if (!pf[i].revents || pf[i].fd == p->pidfd)
				continue;
			if (pf[i].fd == hangup_fd)
				return RUN_TIMEOUT;   /* the client is gone: nobody waits for this */
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
				*errbytes += (size_t)k;
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

int box_proc_spawn(const struct box_proc_opts *o, struct box_proc_child *c, struct box_err *err)
{
	*c = (struct box_proc_child){ .pid = -1, .in = -1, .out = -1, .errfd = -1, .pidfd = -1 };
	if (!o->argv || !o->argv[0] || !o->argv[0][0])
		return box_err_set(err, BOX_E_INVALID, "no command to run");
	if (spawn(c, o, err) == 0)
		return 0;
	box_proc_stop(c);
	return -1;
}

void box_proc_stop(struct box_proc_child *c)
{
	finish(c);
	close_fd(&c->in);
	close_fd(&c->out);
	close_fd(&c->errfd);
	close_fd(&c->pidfd);
}

void box_proc_result_release(struct box_proc_result *r)
{
	box_buf_release(&r->out);
}

int box_proc_run(const struct box_proc_opts *o, struct box_proc_result *r, struct box_err *err)
{
	int timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : BOX_PROC_DEFAULT_TIMEOUT_MS;
	struct box_proc_child p = { .pid = -1, .in = -1, .out = -1, .errfd = -1, .pidfd = -1 };
	struct tail errt = { .len = 0 };
	struct box_err perr;
	int64_t t0 = box_now_ms();
	enum run_end end;

	memset(r, 0, sizeof(*r));
	box_buf_init(&r->out, o->max_stdout ? o->max_stdout : BOX_PROC_STDOUT_MAX);
	errt.max = o->max_stderr && o->max_stderr < BOX_PROC_TAIL_MAX ? o->max_stderr :
		   BOX_PROC_TAIL_MAX;
	if (!o->argv || !o->argv[0] || !o->argv[0][0])
		return box_err_set(err, BOX_E_INVALID, "no command to run");
	if (spawn(&p, o, err)) {
		finish(&p);
		goto fail;
	}
	box_err_init(&perr);
	end = pump(&p, o, &r->out, &errt, &r->stderr_bytes, timeout_ms, &perr);
	finish(&p);
	r->duration_ms = box_now_ms() - t0;
	tail_text(&errt, r->err_tail, sizeof(r->err_tail));
	if (WIFEXITED(p.status)) {
		r->exited = 1;
		r->exit_code = WEXITSTATUS(p.status);
	} else if (WIFSIGNALED(p.status)) {
		r->signal = WTERMSIG(p.status);
	}
	r->timed_out = end == RUN_TIMEOUT;
	r->stdout_overflow = end == RUN_FLOOD;
	if (end == RUN_FAIL) {
		*err = perr;
		goto fail;
	}
	close_fd(&p.in);
	close_fd(&p.out);
	close_fd(&p.errfd);
	close_fd(&p.pidfd);
	return 0;
fail:
	close_fd(&p.in);
	close_fd(&p.out);
	close_fd(&p.errfd);
	close_fd(&p.pidfd);
	return -1;
}

#define STAT_TEXT_MAX 4096   /* a stat line is about 300 bytes; 52 fields of 20 digits fit */

int box_proc_stat_parse(const char *text, size_t len, int n, char *out, size_t size)
{
	const char *end = text + len, *open = memchr(text, '(', len), *close = NULL, *p, *q;
	size_t k;
	int i;

	for (p = end; p > text; p--)
		if (p[-1] == ')') {
			close = p - 1;
			break;
		}
	if (n < 1 || !open || !close || close < open || size == 0)
		return -1;
	if (n <= 2) {
		p = n == 1 ? text : open + 1;
		q = n == 1 ? open : close;
		if (n == 1)
			while (q > p && q[-1] == ' ')
				q--;
	} else {
		/* ") " then field 3 */
		if (end - close < 3 || close[1] != ' ')
			return -1;
		p = close + 2;
		for (i = 3; i < n; i++) {
			p = memchr(p, ' ', (size_t)(end - p));
			if (!p)
				return -1;
			p++;
		}
		for (q = p; q < end && *q != ' ' && *q != '\n'; q++)
			;
		if (q == p)
			return -1;
	}
	k = (size_t)(q - p);
	if (k >= size)
		return -1;
	memcpy(out, p, k);
	out[k] = 0;
	return (int)k;
}

int box_proc_stat_field(pid_t pid, int n, char *out, size_t size)
{
	char path[64], buf[STAT_TEXT_MAX];
	ssize_t got;
	int fd;

	if (pid > 0)
		box_fmt(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	else
		box_fmt(path, sizeof(path), "/proc/self/stat");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	do
		got = read(fd, buf, sizeof(buf));
	while (got < 0 && errno == EINTR);
	close(fd);
	return got > 0 ? box_proc_stat_parse(buf, (size_t)got, n, out, size) : -1;
}

int box_proc_std_fds(void)
{
	int fd;

	for (fd = 0; fd <= 2; fd++) {
		int got;

		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		/* the lowest free number is fd itself: 0..fd-1 are open by now */
		got = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
		if (got != fd) {
			if (got >= 0)
				close(got);
			return -1;
		}
	}
	return 0;
}
