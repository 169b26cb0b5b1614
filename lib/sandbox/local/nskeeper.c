/* The keeper: the holder's parent on the host, which serves the control socket (it starts the
 * exec chain) and the tool socket, and runs the idle tick. */
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

#include "nsbox.h"
#include "buf.h"
#include "ipc.h"
#include "json.h"
#include "netproxy.h"
#include "nsroles.h"
#include "banned.h"

#define SPAWN_REQUEST_MAX ((size_t)32 << 20)
#define SPAWN_IO_MS 5000

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

/* One request on the control socket: the command and its descriptors; the keeper forks the
 * first process of the exec chain (it joins the holder's namespaces through the keeper's
 * pidfd, taken when the holder was born) and answers "k", or "e" when it could not. */
static void keeper_spawn(const struct box_nsbox_config *c, enum box_cg_mode cg, int ctl,
			 int pidfd, const int *nsfds, int serve, int joined)
{
	int conn = accept4(ctl, NULL, NULL, SOCK_CLOEXEC), fds[SPAWN_FDS], k;
	int64_t deadline = box_now_ms() + SPAWN_IO_MS;
	struct box_ipc_in in = BOX_IPC_IN_INIT;
	struct box_buf payload;
	struct box_err e;
	uint8_t op;
	cJSON *req = NULL;
	char **argv = NULL, **envp = NULL;
	char ack = 'e';

	if (conn < 0)
		return;
	box_err_init(&e);
	box_buf_init(&payload, SPAWN_REQUEST_MAX);
	for (k = 0; k < SPAWN_FDS; k++)
		fds[k] = -1;
	if (box_ipc_recv_fds(conn, fds, SPAWN_FDS, deadline, &e) < 0 ||
	    box_ipc_recv(conn, &in, &op, &payload, deadline, &e) != 1)
		goto out;
	{
		struct box_ipc_field fld[1];

		if (op != 'x' || box_ipc_split(payload.data, payload.len, fld, 1) != 1)
			goto out;
		req = box_json_parse(fld[0].p, fld[0].n, &e);
	}
	argv = req ? strings_of(cJSON_GetObjectItemCaseSensitive(req, "argv")) : NULL;
	envp = req ? strings_of(cJSON_GetObjectItemCaseSensitive(req, "env")) : NULL;
	if (argv && envp && argv[0]) {
		struct box_sbexec x = { 0 };
		struct box_nsbox_exec_fds f = { .out = { -1, fds[1] }, .errp = { -1, fds[2] },
				      .in = { fds[0], -1 }, .status = { -1, fds[3] },
				      .ctl = { fds[4], -1 } };
		int64_t until = box_json_get_int(req, "deadline", 0);
		pid_t c1;

		x.argv = (const char *const *)argv;
		x.env = (const char *const *)envp;
		x.cwd = box_json_get_str(req, "cwd", NULL);
		x.cpu_ms = box_json_get_int(req, "cpu_ms", 0);
		c1 = fork();
		if (c1 == 0) {
			close(conn);
			close(ctl);
			if (serve >= 0)
				close(serve);
			/* the zygote is in the sandbox already: its child is the supervisor */
			if (joined)
				box_nsbox_supervisor_main(c, &x, &f, until, cg == BOX_CG_NONE);
			box_nsbox_c1_main(pidfd, nsfds, c, &x, &f, until, cg == BOX_CG_NONE, BOX_CG_NONE);
		}
		if (c1 > 0)
			ack = 'k';
	}
out:
	(void)!write(conn, &ack, 1);
	for (k = 0; k < SPAWN_FDS; k++)
		if (fds[k] >= 0)
			close(fds[k]);
	free(argv);
	free(envp);
	cJSON_Delete(req);
	box_buf_release(&payload);
	close(conn);
}

/* The exec asks the keeper for its processes: 0 when the keeper took them, -1 when it could
 * not be asked (an older keeper, a dead one): the caller then starts them itself. */
int box_nsbox_spawn_via_keeper(const struct box_nsbox_config *c, const struct box_sbexec *x,
			    int64_t deadline, const struct box_nsbox_exec_fds *f)
{
	char p[4096], ack = 0;
	int fds[SPAWN_FDS] = { f->in[0], f->out[1], f->errp[1], f->status[1], f->ctl[0] };
	int sock, k, r = -1;
	struct box_err e;
	cJSON *req = cJSON_CreateObject(), *argv = cJSON_CreateArray(), *env = cJSON_CreateArray();
	char *text = NULL;
	size_t len = 0;
	struct pollfd pf;

	box_err_init(&e);
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
	text = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	if (!text || ctl_path(c, p, sizeof(p)) < 0)
		goto out;
	len = strlen(text);
	sock = box_ipc_connect(p, &e);
	if (sock < 0)
		goto out;
	if (box_ipc_send_fds(sock, fds, SPAWN_FDS, &e) == 0 &&
	    box_ipc_send(sock, 'x', &(struct box_ipc_field){ text, len }, 1,
			 box_now_ms() + SPAWN_IO_MS, &e) == 0) {
		pf = (struct pollfd){ sock, POLLIN, 0 };
		if (poll(&pf, 1, SPAWN_IO_MS) == 1 && read(sock, &ack, 1) == 1 && ack == 'k')
			r = 0;
	}
	close(sock);
out:
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
	if (box_cg_join(k->cg, k->c->id, pid, &err) < 0) {
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

/* The holder's uid and gid 0 are the caller's ids, nothing else. */
static void keeper_map_ids(struct keeper *k)
{
	char msg[64];

	box_fmt(msg, sizeof(msg), "0 %u 1", (unsigned)getuid());
	if (write_proc(k->holder, "setgroups", "deny") < 0 ||
	    write_proc(k->holder, "uid_map", msg) < 0)
		box_nsbox_die(k->rep, "uid_map", "");
	box_fmt(msg, sizeof(msg), "0 %u 1", (unsigned)getgid());
	if (write_proc(k->holder, "gid_map", msg) < 0)
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
	int64_t next_tick = 0;

	for (;;) {
		struct pollfd pfd[3] = { { k->pidfd, POLLIN, 0 }, { k->ctl, POLLIN, 0 },
					 { k->serve, POLLIN, 0 } };
		int wait_ms = -1;

		if (c->keeper_tick && next_tick >= 0 && box_now_ms() >= next_tick) {
			int ms = keeper_tick_outside(c, k->cg);

			next_tick = ms < 0 ? -1 : box_now_ms() + ms;
		}
		if (next_tick >= 0 && c->keeper_tick)
			wait_ms = (int)(next_tick - box_now_ms() > 0 ? next_tick - box_now_ms() : 0);
		if (k->pidfd < 0) {
			waitpid(k->holder, NULL, 0);
			return;
		}
		if (poll(pfd, k->serve >= 0 ? 3 : 2, wait_ms) < 0 && errno != EINTR)
			return;
		if (pfd[0].revents) {
			waitpid(k->holder, NULL, 0);
			return;
		}
		if (pfd[1].revents)
			keeper_spawn(c, k->cg, k->ctl, k->pidfd, k->nsfds, k->serve, 0);
		if (k->serve >= 0 && pfd[2].revents && c->keeper_serve)
			c->keeper_serve(k->serve, c->keeper_ctx);
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
			keeper_spawn(k->c, k->cg, k->ctl, -1, NULL, -1, 1);
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

	keeper_detach(&k);
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
