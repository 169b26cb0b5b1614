/* Background commands of the local provider (lib/sandbox/sbjobs.h keeps their records): the
 * start (the exec chain through the keeper, as for any exec, with a deadline that never
 * comes), the watcher that outlives the caller and keeps the command's log and its end, the
 * keeper's runs of the session's schedules, and the end of one exec's own process tree.
 *
 * The watcher is a host process of its own session, started by whoever starts the command
 * (box-sandbox, or the keeper for a schedule). It holds the host's ends of the command's
 * output pipe (stdout and stderr both), its status pipe and its control pipe: it appends the
 * output to jobs/bg-N.log up to the cap, passes each signal number written to the FIFO
 * jobs/bg-N.sig to the supervisor ('s' and the number on the control pipe), and writes the
 * record's end when the supervisor reports it, or "killed" when the instance ended under it.
 * Its own end closes the control pipe, which ends the command: delete stops the watchers
 * before it removes the session's files. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nsbox.h"
#include "clock.h"
#include "credenv.h"
#include "json.h"
#include "nsroles.h"
#include "sbjobs.h"
#include "banned.h"

#define STARTED_WAIT_MS 30000
#define FOREVER_MS ((int64_t)100 * 365 * 86400 * 1000)
#define TREE_MAX 65536

void box_nsbox_kill_tree(pid_t root, int sig)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t *pid = NULL, *ppid = NULL;
	char *mark = NULL;
	size_t n = 0, cap = 0, k;
	int changed = 1;

	if (!d)
		return;
	while ((de = readdir(d)) && n < TREE_MAX) {
		pid_t p = (pid_t)strtol(de->d_name, NULL, 10), pp;

		if (p <= 1 || p == root || box_sbjobs_proc_stat(p, &pp, NULL) < 0)
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 256;
			pid_t *a = realloc(pid, nc * sizeof(*a)), *b;

			if (!a)
				break;
			pid = a;
			b = realloc(ppid, nc * sizeof(*b));
			if (!b)
				break;
			ppid = b;
			cap = nc;
		}
		pid[n] = p;
		ppid[n++] = pp;
	}
	closedir(d);
	mark = calloc(n + 1, 1);
	/* the descendants of root: marked until a pass marks no more */
	while (mark && changed) {
		changed = 0;
		for (k = 0; k < n; k++) {
			size_t j;

			if (mark[k])
				continue;
			if (ppid[k] == root) {
				mark[k] = changed = 1;
				continue;
			}
			for (j = 0; j < n; j++)
				if (mark[j] && pid[j] == ppid[k]) {
					mark[k] = changed = 1;
					break;
				}
		}
	}
	for (k = 0; mark && k < n; k++)
		if (mark[k])
			kill(pid[k], sig);
	free(mark);
	free(pid);
	free(ppid);
}

/* What the watcher holds. */
struct watch {
	int dfd, out, status, ctl, fifo, logfd;
	const char *handle;
	int64_t cap, logged;
	int truncated, signalled;
	struct box_nsbox_exec_status st;
	size_t got;
};

static void watch_output(struct watch *w)
{
	char buf[65536];
	ssize_t n = read(w->out, buf, sizeof(buf));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		close(w->out);
		w->out = -1;
		return;
	}
	if (w->logged + n > w->cap) {
		w->truncated = 1;
		n = (ssize_t)(w->cap - w->logged);
	}
	if (n > 0 && w->logfd >= 0 && write(w->logfd, buf, (size_t)n) == n)
		w->logged += n;
}

static void watch_status(struct watch *w)
{
	ssize_t n = read(w->status, (char *)&w->st + w->got, sizeof(w->st) - w->got);

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n > 0)
		w->got += (size_t)n;
	if (n <= 0 || w->got == sizeof(w->st)) {
		close(w->status);
		w->status = -1;
	}
}

static void watch_signal(struct watch *w)
{
	unsigned char sig[16];
	ssize_t n = read(w->fifo, sig, sizeof(sig)), k;

	for (k = 0; k < n; k++) {
		unsigned char m[2] = { 's', sig[k] };

		if (w->ctl >= 0 && write(w->ctl, m, 2) == 2)
			w->signalled = 1;
	}
}

/* The record's end: how the command ended, when, what its log holds. */
static void watch_finish(struct watch *w)
{
	struct box_err e;
	cJSON *rec;
	char now[32];

	box_err_init(&e);
	rec = box_sbjobs_get(w->dfd, w->handle, &e);
	if (!rec)
		return;
	box_sbjobs_now_text(now, sizeof(now));
	cJSON_DeleteItemFromObjectCaseSensitive(rec, "state");
	if (w->got == sizeof(w->st) && w->st.stage == BOX_NSBOX_ST_DONE &&
	    !(w->st.sig && w->signalled) && !w->st.killed) {
		cJSON_AddStringToObject(rec, "state", "exited");
	} else {
		cJSON_AddStringToObject(rec, "state", "killed");
		if (w->got != sizeof(w->st))
			cJSON_AddStringToObject(rec, "reason", "the sandbox's instance ended");
	}
	if (w->got == sizeof(w->st) && w->st.exited)
		cJSON_AddNumberToObject(rec, "exit_code", w->st.code);
	else
		cJSON_AddNullToObject(rec, "exit_code");
	if (w->got == sizeof(w->st) && w->st.sig) {
		char name[24];
		const char *a = sigabbrev_np(w->st.sig);

		box_fmt(name, sizeof(name), "SIG%s", a ? a : "UNKNOWN");
		cJSON_AddStringToObject(rec, "signal", name);
	} else if (w->got != sizeof(w->st) || w->st.killed) {
		cJSON_AddStringToObject(rec, "signal", "SIGKILL");
	} else {
		cJSON_AddNullToObject(rec, "signal");
	}
	cJSON_AddStringToObject(rec, "finished_at", now);
	box_json_add_int64(rec, "log_bytes", w->logged);
	cJSON_AddBoolToObject(rec, "log_truncated", w->truncated);
	(void)box_sbjobs_put(w->dfd, w->handle, rec, &e);
	cJSON_Delete(rec);
}

/* The watcher's loop (see the top of this file), until the output and the status end. */
static void __attribute__((noreturn)) watch_main(struct watch *w)
{
	char name[BOX_SBJOBS_HANDLE_MAX + 8];

	box_fmt(name, sizeof(name), "%s.sig", w->handle);
	w->fifo = openat(w->dfd, name, O_RDWR | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	box_fmt(name, sizeof(name), "%s.log", w->handle);
	w->logfd = openat(w->dfd, name, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
	while (w->out >= 0 || w->status >= 0) {
		struct pollfd p[3] = { { w->out, POLLIN, 0 }, { w->status, POLLIN, 0 },
				       { w->fifo, POLLIN, 0 } };

		if (poll(p, 3, -1) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			watch_output(w);
		if (p[1].revents)
			watch_status(w);
		if (p[2].revents)
			watch_signal(w);
	}
	watch_finish(w);
	box_fmt(name, sizeof(name), "%s.sig", w->handle);
	unlinkat(w->dfd, name, 0);
	_exit(0);
}

/* Moves fd to to (closing what was there); -1 stays -1. */
static int move_fd(int fd, int to)
{
	if (fd < 0)
		return -1;
	if (fd != to && dup2(fd, to) < 0)
		_exit(1);
	return to;
}

/* The watcher, in a process of its own session that the caller does not wait for; its pid
 * and start time go into the record (state running) before it reads anything. */
static int start_watcher(struct watch *w, struct box_err *err)
{
	int rep[2], go[2], devnull;
	pid_t c1, me;
	int64_t start = 0;
	struct box_err e;
	cJSON *rec;

	if (pipe2(rep, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0)
		return box_err_sys(err, "pipe");
	c1 = fork();
	if (c1 < 0)
		return box_err_sys(err, "fork");
	if (c1 == 0) {
		setsid();
		if (fork() != 0)
			_exit(0);
		signal(SIGPIPE, SIG_IGN);
		box_credenv_scrub_self();
		devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (devnull < 0)
			_exit(1);
		/* only what it needs, at 3..8: never the caller's locks nor its stdio */
		w->dfd = move_fd(fcntl(w->dfd, F_DUPFD_CLOEXEC, 100), 3);
		w->out = move_fd(fcntl(w->out, F_DUPFD_CLOEXEC, 100), 4);
		w->status = move_fd(fcntl(w->status, F_DUPFD_CLOEXEC, 100), 5);
		w->ctl = move_fd(fcntl(w->ctl, F_DUPFD_CLOEXEC, 100), 6);
		rep[1] = move_fd(fcntl(rep[1], F_DUPFD_CLOEXEC, 100), 7);
		go[0] = move_fd(fcntl(go[0], F_DUPFD_CLOEXEC, 100), 8);
		dup2(devnull, 0);
		dup2(devnull, 1);
		dup2(devnull, 2);
		if (syscall(SYS_close_range, 9, ~0U, 0) < 0)
			for (devnull = 9; devnull < 1024; devnull++)
				close(devnull);
		me = getpid();
		(void)!write(rep[1], &me, sizeof(me));
		close(rep[1]);
		while (read(go[0], &me, 1) < 0 && errno == EINTR)
			;
		close(go[0]);
		watch_main(w);
	}
	close(rep[1]);
	close(go[0]);
	waitpid(c1, NULL, 0);
	if (read(rep[0], &me, sizeof(me)) != (ssize_t)sizeof(me) ||
	    box_sbjobs_proc_stat(me, NULL, &start) < 0) {
		close(rep[0]);
		close(go[1]);
		return box_err_set(err, BOX_E_IO, "the watcher of %s did not start", w->handle);
	}
	close(rep[0]);
	box_err_init(&e);
	rec = box_sbjobs_get(w->dfd, w->handle, &e);
	if (rec) {
		cJSON_DeleteItemFromObjectCaseSensitive(rec, "state");
		cJSON_AddStringToObject(rec, "state", "running");
		cJSON_AddNumberToObject(rec, "pid", w->st.code);
		cJSON_AddNumberToObject(rec, "watcher", me);
		box_json_add_int64(rec, "watcher_start", start);
		(void)box_sbjobs_put(w->dfd, w->handle, rec, &e);
		cJSON_Delete(rec);
	}
	close(go[1]);
	return 0;
}

/* The started record (the command's pid in the guest) from the status pipe: 0; -1 with err
 * and *ran 0 when the chain failed before the command. */
static int read_started(struct watch *w, int *ran, struct box_err *err)
{
	int64_t until = box_now_ms() + STARTED_WAIT_MS;

	while (w->got < sizeof(w->st)) {
		struct pollfd p = { w->status, POLLIN, 0 };
		int64_t left = until - box_now_ms();
		ssize_t n;

		if (left <= 0)
			return box_err_set(err, BOX_E_IO, "the background command did not report "
					   "its start");
		if (poll(&p, 1, (int)(left > 1000 ? 1000 : left)) <= 0)
			continue;
		n = read(w->status, (char *)&w->st + w->got, sizeof(w->st) - w->got);
		if (n == 0 || (n < 0 && errno != EINTR))
			return box_err_set(err, BOX_E_IO, "the background command's supervisor "
					   "ended before it started");
		if (n > 0)
			w->got += (size_t)n;
	}
	w->got = 0;
	if (w->st.stage != BOX_NSBOX_ST_STARTED) {
		*ran = 0;
		errno = w->st.err_no;
		return box_err_sys(err, "cannot start the background command (stage %d)",
				   (int)w->st.stage);
	}
	return 0;
}

int box_nsbox_background(const struct box_nsbox_config *c, const struct box_sbexec *x,
			 int dfd, const char *handle, int *pid, int *ran, struct box_err *err)
{
	struct box_nsbox_exec_fds f = { { -1, -1 }, { -1, -1 }, { -1, -1 }, { -1, -1 },
					{ -1, -1 } };
	struct box_sbexec bx = *x;
	struct watch w = { .dfd = dfd, .handle = handle, .cap = box_sbjobs_log_cap(c->disk_bytes),
			   .ctl = -1, .out = -1, .status = -1, .fifo = -1, .logfd = -1 };
	int rc = -1;

	*ran = 0;
	bx.background = 1;
	if (pipe2(f.out, O_CLOEXEC) < 0 || pipe2(f.status, O_CLOEXEC) < 0 ||
	    pipe2(f.ctl, O_CLOEXEC) < 0 ||
	    (f.in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
		box_err_sys(err, "pipe");
		goto out;
	}
	f.errp[1] = f.out[1];
	if (box_nsbox_spawn_via_keeper(c, &bx, box_now_ms() + FOREVER_MS, &f, ran, err) < 0 &&
	    !*ran)
		goto out;
	box_err_init(err);
	close(f.out[1]);
	close(f.status[1]);
	close(f.ctl[0]);
	close(f.in[0]);
	f.out[1] = f.errp[1] = f.status[1] = f.ctl[0] = f.in[0] = -1;
	w.out = f.out[0];
	w.status = f.status[0];
	w.ctl = f.ctl[1];
	if (read_started(&w, ran, err) < 0 || start_watcher(&w, err) < 0)
		goto out;
	*pid = w.st.code;
	rc = 0;
out:
	if (f.out[0] >= 0)
		close(f.out[0]);
	if (f.out[1] >= 0)
		close(f.out[1]);
	if (f.status[0] >= 0)
		close(f.status[0]);
	if (f.status[1] >= 0)
		close(f.status[1]);
	if (f.ctl[0] >= 0)
		close(f.ctl[0]);
	if (f.ctl[1] >= 0)
		close(f.ctl[1]);
	if (f.in[0] >= 0)
		close(f.in[0]);
	return rc;
}

/* One run of schedule rec (already reserved as handle): in a child of the keeper, which
 * reaps it; the watcher it starts lives on. */
static void sched_run(const struct box_nsbox_config *c, int dfd, const cJSON *rec,
		      const char *handle)
{
	const cJSON *argv = cJSON_GetObjectItemCaseSensitive(rec, "argv");
	const cJSON *env = cJSON_GetObjectItemCaseSensitive(rec, "env"), *e;
	const char **av, **ev;
	struct box_sbexec x = { 0 };
	struct box_err err;
	int k = 0, pid, ran;
	pid_t child = fork();

	if (child != 0)
		return;
	box_err_init(&err);
	av = calloc((size_t)cJSON_GetArraySize(argv) + 1, sizeof(*av));
	ev = calloc((size_t)cJSON_GetArraySize(env) + 1, sizeof(*ev));
	if (!av || !ev)
		_exit(1);
	cJSON_ArrayForEach(e, argv)
		av[k++] = cJSON_GetStringValue(e);
	k = 0;
	cJSON_ArrayForEach(e, env)
		ev[k++] = cJSON_GetStringValue(e);
	x.argv = av;
	x.env = ev;
	x.cwd = box_json_get_str(rec, "cwd", NULL);
	if (!av[0] || box_nsbox_background(c, &x, dfd, handle, &pid, &ran, &err) < 0) {
		if (!ran)
			box_sbjobs_unreserve(dfd, handle);
		_exit(1);
	}
	_exit(0);
}

int box_nsbox_keeper_sched(const struct box_nsbox_config *c)
{
	struct box_err e;
	cJSON *due, *rec;
	int dfd, wait_ms = 1000;
	char p[PATH_MAX];

	box_fmt(p, sizeof(p), "%s/jobs", c->dir);
	dfd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return wait_ms;
	box_err_init(&e);
	due = box_sbjobs_schedules_due(dfd, box_now_ms());
	cJSON_ArrayForEach(rec, due) {
		char handle[BOX_SBJOBS_HANDLE_MAX];

		box_err_init(&e);
		if (box_sbjobs_reserve(dfd, cJSON_GetObjectItemCaseSensitive(rec, "argv"),
				       box_json_get_str(rec, "handle", NULL), handle, &e) < 0)
			continue;
		box_sbjobs_schedule_ran(dfd, box_json_get_str(rec, "handle", ""), handle);
		sched_run(c, dfd, rec, handle);
	}
	cJSON_Delete(due);
	close(dfd);
	return wait_ms;
}
