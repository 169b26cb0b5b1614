/* The keeper: the holder's parent on the host, which serves the control socket (it starts the
 * exec chain) and the tool socket, and runs the idle tick.
 *
 * The control socket (ctl.sock in the session directory), one exec per connection. An exec
 * runs at most once, and its caller always learns whether it ran:
 *
 *   client                                   server (the zygote, else the keeper)
 *   connect (non-blocking, retried until
 *     READY_WAIT_MS)                         accept, fork a handler for the connection
 *                                            and go back to accepting at once
 *   5 descriptors (stdin, stdout, stderr,
 *     status, control) and a frame 'x'
 *     with the request (JSON)         --->   handler: receives them (SPAWN_IO_MS)
 *                                     <---   'r' (ready): it can run the command
 *   no 'r' within READY_WAIT_MS: gives up,
 *     "ran": false, conflict (retryable);
 *     it closes the connection
 *   'g' (go)                          --->   handler: waits GO_WAIT_MS for 'g'; anything
 *                                            else, or the connection closing, ends the
 *                                            handler: the command never runs
 *                                     <---   'k' (started); only when that byte went out
 *                                            does the handler start the command
 *   'k': "ran": true. The connection closing
 *     without 'k': the command did not run
 *     and never will ("ran": false).
 *
 * Nothing on either side runs the command in any other way: a busy, stopped or dead server
 * costs the caller a "ran": false error, never a second run. A client killed before 'g'
 * leaves nothing to run; one killed after it leaves a command whose output nobody reads,
 * ended by its deadline like any other. The handler in the zygote (already in the sandbox's
 * namespaces) becomes the supervisor itself; the keeper's first joins them (c1). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <grp.h>

#include "nsbox.h"
#include "buf.h"
#include "credenv.h"
#include "ipc.h"
#include "json.h"
#include "netproxy.h"
#include "nsroles.h"
#include "banned.h"

#define SPAWN_REQUEST_MAX ((size_t)32 << 20)
#define SPAWN_IO_MS 10000     /* the handler receives the descriptors and the request */
#define GO_WAIT_MS 20000      /* the handler waits for go after ready */
#define READY_WAIT_MS 20000   /* the client waits for ready */
#define STARTED_WAIT_MS (GO_WAIT_MS + SPAWN_IO_MS + 30000)  /* and for 'k' after go */

static void close_from(int lowfd, int keep)
{
	int fd;

	if (keep < lowfd) {
		if (syscall(SYS_close_range, lowfd, ~0U, 0) == 0)
			return;
	} else {
		if (keep > lowfd)
			(void)syscall(SYS_close_range, lowfd, keep - 1, 0);
		if (syscall(SYS_close_range, keep + 1, ~0U, 0) == 0)
			return;
	}
	for (fd = lowfd; fd < 1024; fd++)
		if (fd != keep)
			close(fd);
}

static int write_proc(pid_t pid, const char *file, const char *val)
{
	char p[64];
	int fd, r;

	box_fmt(p, sizeof(p), "/proc/%d/%s", (int)pid, file);
	fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	r = write(fd, val, strlen(val)) == (ssize_t)strlen(val) ? 0 : -1;
	close(fd);
	return r;
}


static int ctl_path(const struct box_nsbox_config *c, char *out, size_t n)
{
	return box_fmt(out, n, "%s/ctl.sock", c->dir);
}

static int ctl_listen(const struct box_nsbox_config *c)
{
	char p[4096];
	struct box_err e;

	box_err_init(&e);
	if (ctl_path(c, p, sizeof(p)) < 0)
		return -1;
	return box_ipc_listen(p, &e);
}

/* The idle tick pauses the sandbox, whose freezer group holds the keeper: it runs in a child
 * that leaves that group first, and hands back when to look again. */
static int keeper_tick_outside(const struct box_nsbox_config *c, enum box_cg_mode cg)
{
	int p[2], ms = 60000;
	pid_t k;

	if (pipe2(p, O_CLOEXEC) < 0)
		return 60000;
	k = fork();
	if (k < 0) {
		close(p[0]);
		close(p[1]);
		return 60000;
	}
	if (k == 0) {
		struct box_err e;

		box_err_init(&e);
		close(p[0]);
		if (box_cg_leave_freezer(cg, &e) == 0)
			ms = c->keeper_tick(c->keeper_ctx);
		(void)!write(p[1], &ms, sizeof(ms));
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], &ms, sizeof(ms)) != (ssize_t)sizeof(ms))
		ms = 60000;
	close(p[0]);
	waitpid(k, NULL, 0);
	return ms;
}

static char **strings_of(const cJSON *arr)
{
	int n = cJSON_GetArraySize(arr), k = 0;
	char **v;
	const cJSON *e;

	if (n > 65536)
		return NULL;
	v = calloc((size_t)n + 1, sizeof(*v));
	if (!v)
		return NULL;
	cJSON_ArrayForEach(e, arr) {
		if (!cJSON_IsString(e)) {
			free(v);
			return NULL;
		}
		v[k++] = e->valuestring;
	}
	return v;
}

/* Reads one byte from fd before deadline_ms: the byte, -1 when the connection closed (or
 * failed), -2 when the deadline passed. */
static int read_byte(int fd, int64_t deadline_ms)
{
	for (;;) {
		struct pollfd pf = { fd, POLLIN, 0 };
		int64_t left = deadline_ms - box_now_ms();
		unsigned char b;
		ssize_t n;
		int r;

		if (left <= 0)
			return -2;
		r = poll(&pf, 1, left > 1000 ? 1000 : (int)left);
		if (r < 0 && errno != EINTR)
			return -1;
		if (r <= 0)
			continue;
		n = read(fd, &b, 1);
		if (n == 1)
			return b;
		if (n == 0 || (errno != EINTR && errno != EAGAIN))
			return -1;
	}
}

static int send_byte(int fd, char b)
{
	return send(fd, &b, 1, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

/* The handler of one connection (see the top of this file): the request, ready, go, then the
 * command: the zygote's handler is in the sandbox's namespaces already and becomes the
 * supervisor, the keeper's becomes the first process of the chain. Anything short of go ends
 * it without running anything. */
static void __attribute__((noreturn)) ctl_handle(const struct box_nsbox_config *c,
						 enum box_cg_mode cg, int conn, int pidfd,
						 const int *nsfds, int joined)
{
	int fds[SPAWN_FDS], k;
	int64_t deadline = box_now_ms() + SPAWN_IO_MS;
	struct box_ipc_in in = BOX_IPC_IN_INIT;
	struct box_ipc_field fld[1];
	struct box_buf payload;
	struct box_err e;
	struct box_sbexec x = { 0 };
	struct box_nsbox_exec_fds f;
	uint8_t op;
	cJSON *req = NULL;
	char **argv, **envp;

	box_err_init(&e);
	box_buf_init(&payload, SPAWN_REQUEST_MAX);
	for (k = 0; k < SPAWN_FDS; k++)
		fds[k] = -1;
	if (box_ipc_recv_fds(conn, fds, SPAWN_FDS, deadline, &e) < 0 ||
	    box_ipc_recv(conn, &in, &op, &payload, deadline, &e) != 1 || op != 'x' ||
	    box_ipc_split(payload.data, payload.len, fld, 1) != 1 ||
	    !(req = box_json_parse(fld[0].p, fld[0].n, &e)))
		_exit(0);
	argv = strings_of(cJSON_GetObjectItemCaseSensitive(req, "argv"));
	envp = strings_of(cJSON_GetObjectItemCaseSensitive(req, "env"));
	if (!argv || !envp || !argv[0])
		_exit(0);
	x.argv = (const char *const *)argv;
	x.env = (const char *const *)envp;
	x.cwd = box_json_get_str(req, "cwd", NULL);
	x.cpu_ms = box_json_get_int(req, "cpu_ms", 0);
	x.background = box_json_get_bool(req, "background", 0);
	x.tty = box_json_get_bool(req, "tty", 0);
	x.tty_rows = (unsigned short)box_json_get_int(req, "tty_rows", 0);
	x.tty_cols = (unsigned short)box_json_get_int(req, "tty_cols", 0);
	f = (struct box_nsbox_exec_fds){ .out = { -1, fds[1] }, .errp = { -1, fds[2] },
					 .in = { fds[0], -1 }, .status = { -1, fds[3] },
					 .ctl = { fds[4], -1 } };
	if (send_byte(conn, 'r') < 0 || read_byte(conn, box_now_ms() + GO_WAIT_MS) != 'g' ||
	    send_byte(conn, 'k') < 0)
		_exit(0);
	close(conn);
	if (joined)
		box_nsbox_supervisor_main(c, &x, &f, box_json_get_int(req, "deadline", 0),
					  cg == BOX_CG_NONE);
	box_nsbox_c1_main(pidfd, nsfds, c, &x, &f, box_json_get_int(req, "deadline", 0),
			  cg == BOX_CG_NONE, BOX_CG_NONE);
}

/* One connection on the control socket: a handler of its own takes it, and the server is
 * back at once (a slow or stalled client never holds up the next exec). */
static void ctl_accept(const struct box_nsbox_config *c, enum box_cg_mode cg, int ctl,
		       int pidfd, const int *nsfds, int serve, int joined)
{
	int conn = accept4(ctl, NULL, NULL, SOCK_CLOEXEC);
	pid_t h;

	if (conn < 0)
		return;
	h = fork();
	if (h == 0) {
		close(ctl);
		if (serve >= 0)
			close(serve);
		ctl_handle(c, cg, conn, pidfd, nsfds, joined);
	}
	/* no handler: the connection closes before ready, and the caller learns that nothing
	 * ran */
	close(conn);
}

/* The request of an exec as the handler reads it; NULL on OOM. */
static char *spawn_request(const struct box_sbexec *x, int64_t deadline)
{
	cJSON *req = cJSON_CreateObject(), *argv = cJSON_CreateArray(), *env = cJSON_CreateArray();
	char *text;
	int k;

	for (k = 0; x->argv[k]; k++)
		cJSON_AddItemToArray(argv, cJSON_CreateString(x->argv[k]));
	for (k = 0; x->env[k]; k++)
		cJSON_AddItemToArray(env, cJSON_CreateString(x->env[k]));
	cJSON_AddItemToObject(req, "argv", argv);
	cJSON_AddItemToObject(req, "env", env);
	if (x->cwd)
		cJSON_AddStringToObject(req, "cwd", x->cwd);
	box_json_add_int64(req, "deadline", deadline);
	box_json_add_int64(req, "cpu_ms", x->cpu_ms);
	if (x->background)
		cJSON_AddTrueToObject(req, "background");
	if (x->tty) {
		cJSON_AddTrueToObject(req, "tty");
		box_json_add_int64(req, "tty_rows", x->tty_rows);
		box_json_add_int64(req, "tty_cols", x->tty_cols);
	}
	text = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	return text;
}

/* The client's side of the protocol at the top of this file. */
int box_nsbox_spawn_via_keeper(const struct box_nsbox_config *c, const struct box_sbexec *x,
			       int64_t deadline, const struct box_nsbox_exec_fds *f, int *ran,
			       struct box_err *err)
{
	char p[4096];
	int fds[SPAWN_FDS] = { f->in[0], f->out[1], f->errp[1], f->status[1], f->ctl[0] };
	int64_t ready_by = box_now_ms() + READY_WAIT_MS;
	int sock = -1, b, r = -1;
	char *text = spawn_request(x, deadline);

	*ran = 0;
	if (!text)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	if (ctl_path(c, p, sizeof(p)) < 0) {
		box_err_set(err, BOX_E_INVALID, "session directory path too long");
		goto out;
	}
	sock = box_ipc_connect_by(p, ready_by, err);
	if (sock < 0) {
		box_err_set(err, BOX_E_CONFLICT, "the sandbox's keeper cannot be reached (%s); the "
			    "command did not run", err->message);
		err->retryable = 1;
		goto out;
	}
	if (box_ipc_send_fds(sock, fds, SPAWN_FDS, err) < 0 ||
	    box_ipc_send(sock, 'x', &(struct box_ipc_field){ text, strlen(text) }, 1, ready_by,
			 err) < 0 || (b = read_byte(sock, ready_by)) != 'r') {
		box_err_set(err, BOX_E_CONFLICT, "the sandbox's keeper did not take the command "
			    "within %d ms; it did not run", READY_WAIT_MS);
		err->retryable = 1;
		goto out;
	}
	if (send_byte(sock, 'g') < 0) {
		box_err_set(err, BOX_E_IO, "the sandbox's keeper went away; the command did not run");
		goto out;
	}
	b = read_byte(sock, box_now_ms() + STARTED_WAIT_MS);
	if (b == 'k') {
		*ran = 1;
		r = 0;
	} else if (b == -1) {
		/* closed without 'k': the handler never started it, and never will */
		box_err_set(err, BOX_E_IO, "the sandbox's keeper dropped the command; it did not run");
	} else {
		/* a handler that neither started nor dropped it in all that time: it may still */
		*ran = 1;
		box_err_set(err, BOX_E_IO, "the sandbox's keeper did not say whether the command "
			    "started");
	}
out:
	if (sock >= 0)
		close(sock);
	free(text);
	return r;
}

/* What the keeper holds while its holder lives. */
struct keeper {
	const struct box_nsbox_config *c;
	enum box_cg_mode cg;
	int rep;              /* the report pipe to box_nsbox_start, until the holder is born */
	int serve;            /* the tool socket, -1: none */
	int ctl;              /* the control socket execs connect to */
	int go[2], nsp[2];    /* the holder's start signal, its namespaces' channel */
	int nsfds[NS_FDS];    /* the holder's namespaces; -1: not sent */
	int pidfd;            /* of the holder */
	pid_t holder;
};

/* Off the caller's stdio and session; only the report pipe (fd 3) and the served socket
 * (fd 4) stay open. */
static void keeper_detach(struct keeper *k)
{
	int devnull, rep, serve;

	setsid();
	/* orphans of the zygote (a supervisor whose parent died) come back here */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull >= 0) {
		dup2(devnull, 0);
		dup2(devnull, 1);
		dup2(devnull, 2);
	}
	rep = fcntl(k->rep, F_DUPFD_CLOEXEC, 100);
	serve = k->c->serve_fd >= 0 ? fcntl(k->c->serve_fd, F_DUPFD_CLOEXEC, 100) : -1;
	if (rep < 0 || dup3(rep, 3, O_CLOEXEC) < 0)
		_exit(1);
	k->rep = 3;
	k->serve = -1;
	if (serve >= 0) {
		if (dup3(serve, 4, O_CLOEXEC) < 0)
			_exit(1);
		k->serve = 4;
	}
	close_from(k->serve >= 0 ? 5 : 4, -1);
}

/* The keeper lives in the sandbox's groups: the holder and every command it spawns inherit
 * them, so an exec never pays for a cgroup migration. */
static void keeper_join_groups(struct keeper *k, pid_t pid)
{
	struct box_err err;

	box_err_init(&err);
	if (box_cg_join(k->cg, k->c->cgname, pid, &err) < 0) {
		errno = EIO;
		box_nsbox_die(k->rep, "cgroup", err.message);
	}
}

/* The holder, in new namespaces; it waits for go before it builds anything. */
static void keeper_clone_holder(struct keeper *k)
{
	int i;

	if (pipe2(k->go, O_CLOEXEC) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, k->nsp) < 0)
		box_nsbox_die(k->rep, "pipe", "");
	for (i = 0; i < NS_FDS; i++)
		k->nsfds[i] = -1;
	k->holder = (pid_t)syscall(SYS_clone, NS_FLAGS | SIGCHLD, NULL, NULL, NULL, NULL);
	if (k->holder < 0)
		box_nsbox_die(k->rep, "clone", "namespaces");
	if (k->holder == 0) {
		close(k->go[1]);
		close(k->nsp[0]);
		box_nsbox_holder_main(k->c, k->rep, k->go[0], k->nsp[1]);
	}
	close(k->go[0]);
	close(k->nsp[1]);
}

/* The guest's ids (c->ids): run as root, guest 0-65535 on a range of unprivileged host ids,
 * with setgroups allowed so that the holder and the exec chain can drop root's supplementary
 * groups; an ordinary user maps its own ids and must deny setgroups (the kernel requires it
 * of an unprivileged writer of gid_map). */
static void keeper_map_ids(struct keeper *k)
{
	char msg[64];

	if (k->c->ids.count <= 1 && write_proc(k->holder, "setgroups", "deny") < 0)
		box_nsbox_die(k->rep, "setgroups", "");
	if (box_idmap_line(&k->c->ids, 0, msg, sizeof(msg)) < 0 ||
	    write_proc(k->holder, "uid_map", msg) < 0)
		box_nsbox_die(k->rep, "uid_map", "");
	if (box_idmap_line(&k->c->ids, 1, msg, sizeof(msg)) < 0 ||
	    write_proc(k->holder, "gid_map", msg) < 0)
		box_nsbox_die(k->rep, "gid_map", "");
}

/* "P<pid>" to the caller, then the holder may build: it reports "R" itself. */
static void keeper_report_and_go(struct keeper *k)
{
	char msg[64];

	box_fmt(msg, sizeof(msg), "P%d\n", (int)k->holder);
	(void)!write(k->rep, msg, strlen(msg));
	close(k->rep);
	(void)!write(k->go[1], "g", 1);
	close(k->go[1]);
}

/* The namespaces the holder sends once built, and a pidfd of it. */
static void keeper_take_namespaces(struct keeper *k)
{
	struct box_err err;
	int i;

	box_err_init(&err);
	if (box_ipc_recv_fds(k->nsp[0], k->nsfds, NS_FDS, box_now_ms() + START_TIMEOUT_MS,
			     &err) < 0)
		for (i = 0; i < NS_FDS; i++)
			k->nsfds[i] = -1;
	close(k->nsp[0]);
	k->pidfd = (int)syscall(SYS_pidfd_open, k->holder, 0);
}

/* Until the holder ends: the idle tick, execs on the control socket, the tool socket. */
static void keeper_serve(struct keeper *k)
{
	const struct box_nsbox_config *c = k->c;
	int64_t next_tick = 0, next_sched = 0;
	sigset_t chld;
	int sfd;

	/* children (tool calls, handlers, and what they leave: the keeper is a subreaper) are
	 * reaped as soon as they end */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	for (;;) {
		struct pollfd pfd[4] = { { k->pidfd, POLLIN, 0 }, { k->ctl, POLLIN, 0 },
					 { k->serve, POLLIN, 0 }, { sfd, POLLIN, 0 } };
		int wait_ms = -1;

		if (c->keeper_tick && next_tick >= 0 && box_now_ms() >= next_tick) {
			int ms = keeper_tick_outside(c, k->cg);

			next_tick = ms < 0 ? -1 : box_now_ms() + ms;
		}
		if (next_tick >= 0 && c->keeper_tick)
			wait_ms = (int)(next_tick - box_now_ms() > 0 ? next_tick - box_now_ms() : 0);
		/* the session's schedules (lib/sandbox/local/nsjobs.c) */
		if (box_now_ms() >= next_sched)
			next_sched = box_now_ms() + box_nsbox_keeper_sched(c);
		if (wait_ms < 0 || next_sched - box_now_ms() < wait_ms)
			wait_ms = (int)(next_sched - box_now_ms() > 0 ? next_sched - box_now_ms() : 0);
		if (k->pidfd < 0) {
			waitpid(k->holder, NULL, 0);
			return;
		}
		if (poll(pfd, 4, wait_ms) < 0 && errno != EINTR)
			return;
		if (pfd[0].revents) {
			waitpid(k->holder, NULL, 0);
			return;
		}
		if (k->ctl >= 0 && pfd[1].revents)
			ctl_accept(c, k->cg, k->ctl, k->pidfd, k->nsfds, k->serve, 0);
		if (k->serve >= 0 && pfd[2].revents && c->keeper_serve)
			c->keeper_serve(k->serve, c->keeper_ctx);
		if (pfd[3].revents) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof(si)) > 0)
				;
		}
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
}

/* The zygote: a child of the keeper that joined the sandbox's namespaces once, so that an
 * exec costs one fork (its supervisor) instead of a first process that joins them each time.
 * It serves the control socket until the holder or the keeper ends; "z" on ok tells the
 * keeper it took the socket. */
static void __attribute__((noreturn)) zygote_main(struct keeper *k, pid_t keeper, int ok)
{
	sigset_t chld;
	int sfd;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != keeper)
		_exit(0);
	if (k->serve >= 0)
		close(k->serve);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	/* the pidfd goes with the join: one of its own watches the holder */
	if (sfd < 0 || box_nsbox_join(dup(k->pidfd), k->nsfds) < 0)
		_exit(1);
	(void)!write(ok, "z", 1);
	close(ok);
	for (;;) {
		struct pollfd pfd[3] = { { k->ctl, POLLIN, 0 }, { k->pidfd, POLLIN, 0 },
					 { sfd, POLLIN, 0 } };

		if (poll(pfd, 3, -1) < 0 && errno != EINTR)
			_exit(1);
		if (pfd[1].revents)
			_exit(0);
		if (pfd[2].revents) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof(si)) > 0)
				;
		}
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (pfd[0].revents)
			ctl_accept(k->c, k->cg, k->ctl, -1, NULL, -1, 1);
	}
}

/* The zygote, when it can join; the keeper keeps serving the control socket otherwise. */
static void keeper_start_zygote(struct keeper *k)
{
	pid_t self = getpid(), z;
	int ok[2];
	char b;

	if (k->pidfd < 0 || pipe2(ok, O_CLOEXEC) < 0)
		return;
	z = fork();
	if (z == 0) {
		close(ok[0]);
		zygote_main(k, self, ok[1]);
	}
	close(ok[1]);
	if (z > 0 && read(ok[0], &b, 1) == 1 && b == 'z') {
		close(k->ctl);
		k->ctl = -1;
	}
	close(ok[0]);
}

/* The keeper: parent of the holder on the host, off the caller's stdio. */
void box_nsbox_keeper_main(const struct box_nsbox_config *c, enum box_cg_mode cg, int rep)
{
	struct keeper k = { .c = c, .cg = cg, .rep = rep };

	/* the keeper, and the holder and zygote it forks, outlive the caller: none of them keeps
	 * the caller's credentials, in environ nor in /proc/PID/environ */
	box_credenv_scrub_self();
	keeper_detach(&k);
	/* root's supplementary groups reach neither the holder nor any command (an ordinary
	 * user cannot drop its own: see box_nsbox_start) */
	if (geteuid() == 0 && setgroups(0, NULL) < 0)
		box_nsbox_die(k.rep, "setgroups", "");
	keeper_join_groups(&k, 0);
	k.ctl = ctl_listen(c);
	if (k.ctl < 0)
		box_nsbox_die(k.rep, "listen", "ctl.sock");
	keeper_clone_holder(&k);
	keeper_map_ids(&k);
	keeper_join_groups(&k, k.holder);
	keeper_report_and_go(&k);
	keeper_take_namespaces(&k);
	/* the guest's only way out (netproxy.h); without it the guest has no network at all */
	box_netproxy_spawn(c->dir, k.pidfd, k.nsfds);
	keeper_start_zygote(&k);
	keeper_serve(&k);
	_exit(0);
}
