/* One exec of the local provider: the processes of the exec chain (the first process, which
 * joins the sandbox, the supervisor, the command) and the host side that pumps its output
 * and classifies how it ended. */
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
#include "atomic.h"
#include "buf.h"
#include "ipc.h"
#include "sbcopy.h"
#include "sbjail.h"
#include "nsroles.h"
#include "banned.h"

#define TICK_MS 50
#define DISK_EVERY_MS 200
#define GRACE_MS 3000
#define FEED_CHUNK 65536   /* what a streamed stdin holds at once */

static const char *const stage_name[] = {
	"", "join the sandbox's groups", "join the sandbox's namespaces", "fork", "unshare",
	"supervise", "open the guest's terminal",
};

void box_nsbox_send_status(int fd, const struct box_nsbox_exec_status *s)
{
	(void)!write(fd, s, sizeof(*s));
}

void box_nsbox_fail_stage(int fd, int stage)
{
	struct box_nsbox_exec_status s = { stage, errno, 0, 0, 0, 0, 0 };

	box_nsbox_send_status(fd, &s);
	_exit(1);
}

/* What a command starts with: every signal's default action (SIGPIPE included) and none
 * blocked, whatever the chain's processes ignore, block or handle. */
static void default_signals(void)
{
	sigset_t none;
	int k;

	for (k = 1; k < NSIG; k++)
		if (k != SIGKILL && k != SIGSTOP)
			signal(k, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

static void __attribute__((noreturn)) command_main(const struct box_nsbox_config *c,
						   const struct box_sbexec *x,
						   const struct box_nsbox_exec_fds *f, int nocg)
{
	struct box_sbjail j = { 0 };
	struct box_err err;
	extern char **environ;
	const char *cwd = x->cwd ? x->cwd : "/workspace";

	box_err_init(&err);
	setsid();
	if (dup2(f->in[0], 0) < 0 || dup2(f->out[1], 1) < 0 || dup2(f->errp[1], 2) < 0)
		_exit(126);
	if (x->tty && box_nsbox_tty_attach() < 0)
		_exit(126);
	default_signals();
	if (chdir(cwd) < 0) {
		dprintf(2, "box-sandbox: cannot enter %s: %s\n", cwd, strerror(errno));
		_exit(126);
	}
	j.fsize_bytes = c->disk_bytes;
	j.cpu_seconds = x->cpu_ms > 0 ? (x->cpu_ms + 999) / 1000 : 0;
	j.nofile = 1024;
	if (nocg) {
		j.as_bytes = c->memory;
		j.nproc = c->pids;
	}
	if (box_sbjail_enter(&j, &err) < 0) {
		dprintf(2, "box-sandbox: %s\n", err.message);
		_exit(126);
	}
	environ = (char **)x->env;
	execvp(x->argv[0], (char *const *)x->argv);
	dprintf(2, "box-sandbox: cannot run '%.200s': %s\n", x->argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* Ends the supervisor's own process tree, never the rest of the sandbox (other execs and
 * background commands run beside it): its descendants, found by their parents in the
 * guest's /proc (box_nsbox_kill_tree), are killed until none is left. The supervisor is a
 * subreaper, so orphans (double-forked daemons) come back to it and are reaped here. */
static void kill_own_tree(int64_t until)
{
	int status, rounds;

	for (rounds = 0; rounds < 10000; rounds++) {
		pid_t w;

		box_nsbox_kill_tree(getpid(), SIGKILL);
		while ((w = waitpid(-1, &status, WNOHANG)) > 0)
			;
		if (w < 0 && errno == ECHILD)
			return;
		if (box_now_ms() > until)
			return;
		usleep(200);
	}
}

/* The host's word on the control pipe: 'k' or its end: kill the command; 's' and a signal
 * number: send that signal to the command's process group (kill of a background command).
 * 1 when the command is to be killed. */
static int supervisor_ctl(int fd, pid_t cmd)
{
	unsigned char b[2];
	ssize_t n = read(fd, b, 1);

	if (n == 1 && b[0] == 's') {
		if (read(fd, b + 1, 1) == 1 && b[1] > 0 && b[1] < 65) {
			kill(-cmd, b[1]);
			kill(cmd, b[1]);
		}
		return 0;
	}
	if (n < 0 && errno == EINTR)
		return 0;
	return 1;
}

/* The supervisor: a subreaper in the sandbox's pid namespace that starts the command, waits
 * for it under the deadline, and then kills whatever the command left behind, double-forked
 * daemons included (they are re-parented to it). */
static void __attribute__((noreturn)) supervisor_main(const struct box_nsbox_config *c,
						      const struct box_sbexec *x,
						      const struct box_nsbox_exec_fds *f, int64_t deadline,
						      int nocg)
{
	struct box_nsbox_exec_status s = { 0 };
	struct box_nsbox_exec_fds tf;
	sigset_t chld;
	int sfd, done = 0, slave = -1;
	pid_t cmd;

	prctl(PR_SET_DUMPABLE, 0);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	box_nsbox_set_title("box-supervisor");
	close(f->ctl[1]);
	close(f->status[0]);
	close(f->out[0]);
	close(f->errp[0]);
	if (f->in[1] >= 0)
		close(f->in[1]);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		box_nsbox_fail_stage(f->status[1], BOX_NSBOX_ST_SUPERVISE);
	/* a terminal exec: the command's stdin, stdout and stderr are a terminal of the guest */
	if (x->tty && box_nsbox_tty_open(x, f->status[1], &slave) < 0)
		box_nsbox_fail_stage(f->status[1], BOX_NSBOX_ST_TTY);
	tf = *f;
	if (slave >= 0)
		tf.in[0] = tf.out[1] = tf.errp[1] = slave;
	cmd = fork();
	if (cmd < 0)
		box_nsbox_fail_stage(f->status[1], BOX_NSBOX_ST_FORK);
	if (cmd == 0) {
		sigprocmask(SIG_UNBLOCK, &chld, NULL);
		command_main(c, x, &tf, nocg);
	}
	if (slave >= 0)
		close(slave);
	if (x->background) {
		/* a background command's starter learns its pid in the guest */
		struct box_nsbox_exec_status started = { BOX_NSBOX_ST_STARTED, 0, 0, (int32_t)cmd,
							 0, 0, 0 };

		box_nsbox_send_status(f->status[1], &started);
	}
	close(f->in[0]);
	close(f->out[1]);
	close(f->errp[1]);
	while (!done) {
		struct pollfd p[2] = { { sfd, POLLIN, 0 }, { f->ctl[0], POLLIN, 0 } };
		int64_t left = deadline - box_now_ms();
		int status;
		pid_t w;

		if (left <= 0) {
			s.timed_out = 1;
			break;
		}
		if (poll(p, 2, left > 1000 ? 1000 : (int)left) < 0 && errno != EINTR)
			break;
		if (p[1].revents && supervisor_ctl(f->ctl[0], cmd)) {
			s.killed = 1;
			break;
		}
		if (p[0].revents) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof(si)) > 0)
				;
		}
		while ((w = waitpid(-1, &status, WNOHANG)) > 0) {
			if (w != cmd)
				continue;
			if (WIFEXITED(status)) {
				s.exited = 1;
				s.code = WEXITSTATUS(status);
			} else {
				s.sig = WTERMSIG(status);
			}
			done = 1;
		}
	}
	kill_own_tree(box_now_ms() + 5000);
	box_nsbox_send_status(f->status[1], &s);
	_exit(0);
}

/* The first process of an exec: into the sandbox's groups (join_cg; BOX_CG_NONE when it was
 * born in them), into the holder's namespaces through its pidfd, then the supervisor in a
 * child (setns of a pid namespace takes effect for children only). */
int box_nsbox_join(int pidfd, const int *nsfds)
{
	int k;

	if (setns(pidfd, NS_FLAGS | CLONE_NEWCGROUP) < 0) {
		/* an ordinary user may not join through the non-dumpable holder's pidfd: the
		 * keeper holds the namespaces the holder handed it at birth; the user
		 * namespace goes first, for the capabilities the others need */
		if (errno != EPERM || !nsfds || nsfds[0] < 0)
			return -1;
		for (k = 0; k < NS_FDS; k++)
			if (setns(nsfds[k], 0) < 0)
				return -1;
	}
	close(pidfd);
	for (k = 0; nsfds && k < NS_FDS; k++)
		if (nsfds[k] >= 0)
			close(nsfds[k]);
	return box_nsbox_become_guest_root();
}

int box_nsbox_become_guest_root(void)
{
	/* EPERM: an ordinary user's namespace denies setgroups; its groups stay (documented) */
	if (setgroups(0, NULL) < 0 && errno != EPERM)
		return -1;
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
		return -1;
	return 0;
}

void box_nsbox_supervisor_main(const struct box_nsbox_config *c, const struct box_sbexec *x,
			       const struct box_nsbox_exec_fds *f, int64_t deadline, int nocg)
{
	supervisor_main(c, x, f, deadline, nocg);
}

void box_nsbox_c1_main(int pidfd, const int *nsfds, const struct box_nsbox_config *c,
		       const struct box_sbexec *x, const struct box_nsbox_exec_fds *f,
		       int64_t deadline, int nocg, enum box_cg_mode join_cg)
{
	pid_t c2;

	if (box_cg_join(join_cg, c->cgname, 0, &(struct box_err){ 0 }) < 0)
		box_nsbox_fail_stage(f->status[1], BOX_NSBOX_ST_CGROUP);
	/* started by box-sandbox run as root rather than by the keeper: root's groups go first */
	if (geteuid() == 0 && setgroups(0, NULL) < 0)
		box_nsbox_fail_stage(f->status[1], BOX_NSBOX_ST_SETNS);
	if (box_nsbox_join(pidfd, nsfds) < 0)
		box_nsbox_fail_stage(f->status[1], BOX_NSBOX_ST_SETNS);
	c2 = fork();
	if (c2 < 0)
		box_nsbox_fail_stage(f->status[1], BOX_NSBOX_ST_FORK);
	if (c2 > 0) {
		/* C2's pid lives in the sandbox's pid namespace: orphaned, it would go to the
		 * host's init, and the sandbox could not end until that one reaped it */
		close(f->status[1]);
		close(f->out[1]);
		close(f->errp[1]);
		if (f->in[0] >= 0)
			close(f->in[0]);
		if (f->in[1] >= 0)
			close(f->in[1]);
		if (f->ctl[1] >= 0)
			close(f->ctl[1]);
		while (waitpid(c2, NULL, 0) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	supervisor_main(c, x, f, deadline, nocg);
}

struct capture {
	struct box_buf head[2];     /* per stream, at most max_output_bytes */
	/* per stream past max_output_bytes: the last tail_max bytes, a ring made when the
	 * stream first goes over (tail_at: where the next byte goes) */
	char *tail[2];
	size_t tail_max, tail_at[2];
	int64_t seen[2];            /* bytes of each stream */
	struct box_buf mem;         /* both streams in order until the log is opened */
	int logfd;
	int64_t logged;
	int truncated, log_cut;
	int64_t lines;
	int partial[2];
	size_t max;
	int64_t log_max;            /* the full-output log's cap: min(256 MiB, disk_bytes / 16) */
	char logpath[4096];
	const struct box_nsbox_config *c;
};

static int open_log(struct capture *cap)
{
	char name[96];
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	box_fmt(name, sizeof(name), "exec-%lld%03ld-%d.log", (long long)ts.tv_sec,
		 ts.tv_nsec / 1000000, (int)getpid());
	box_fmt(cap->logpath, sizeof(cap->logpath), "%s/logs/%s", cap->c->dir, name);
	cap->logfd = open(cap->logpath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (cap->logfd < 0)
		return -1;
	cap->logged = (int64_t)cap->mem.len < cap->log_max ? (int64_t)cap->mem.len : cap->log_max;
	if (cap->logged < (int64_t)cap->mem.len)
		cap->log_cut = 1;
	if (box_write_all(cap->logfd, cap->mem.data, (size_t)cap->logged) < 0)
		return -1;
	box_buf_release(&cap->mem);
	return 0;
}

/* Adds n bytes to a ring of size max that keeps the last max bytes; *at is where the next
 * byte goes. */
static void ring_add(char *ring, size_t max, size_t *at, const char *p, size_t n)
{
	size_t first;

	if (!ring || !max)
		return;
	if (n >= max) {
		memcpy(ring, p + n - max, max);
		*at = 0;
		return;
	}
	first = max - *at < n ? max - *at : n;
	memcpy(ring + *at, p, first);
	memcpy(ring, p + first, n - first);
	*at = (*at + n) % max;
}

/* The tail of a stream that went over max_output_bytes: its ring, made when it first went
 * over from the end of the head (which holds max bytes then), then fed every byte after. */
static void capture_tail(struct capture *cap, int s, const char *p, size_t n, size_t room)
{
	const struct box_buf *h = &cap->head[s];

	if (!cap->tail[s]) {
		if (!cap->tail_max || !(cap->tail[s] = malloc(cap->tail_max)))
			return;
		ring_add(cap->tail[s], cap->tail_max, &cap->tail_at[s],
			 h->data + h->len - cap->tail_max, cap->tail_max);
		p += room;
		n -= room;
	}
	ring_add(cap->tail[s], cap->tail_max, &cap->tail_at[s], p, n);
}

static void capture_add(struct capture *cap, int stream, const char *p, size_t n)
{
	struct box_buf *h = &cap->head[stream - 1];
	size_t room = h->len < cap->max ? cap->max - h->len : 0;
	const char *q;
	struct box_err ign;

	for (q = p; (q = memchr(q, '\n', (size_t)(p + n - q))); q++)
		cap->lines++;
	cap->partial[stream - 1] = n > 0 ? p[n - 1] != '\n' : cap->partial[stream - 1];
	cap->seen[stream - 1] += (int64_t)n;
	if (room)
		box_buf_append(h, p, n < room ? n : room, &ign);
	if (n > room) {
		cap->truncated = 1;
		if (h->len == cap->max)
			capture_tail(cap, stream - 1, p, n, room);
	}
	if (cap->logfd < 0 && cap->mem.len + n <= cap->max * 2) {
		box_buf_append(&cap->mem, p, n, &ign);
		return;
	}
	if (cap->logfd < 0 && !cap->log_cut && open_log(cap) < 0) {
		cap->log_cut = 1;
		return;
	}
	if (cap->logfd < 0 || cap->log_cut)
		return;
	if (cap->logged + (int64_t)n > cap->log_max) {
		n = (size_t)(cap->log_max - cap->logged);
		cap->log_cut = 1;
	}
	if (box_write_all(cap->logfd, p, n) < 0)
		cap->log_cut = 1;
	cap->logged += (int64_t)n;
}

/* 1 when the session's files reach disk_bytes, or cannot be measured (the limit fails
 * closed: a tree the walk cannot finish counts as over it, and why goes to r->disk_why). */
static int disk_over(const struct box_nsbox_inst *i, const struct box_nsbox_config *c,
		     char *why, size_t whyn)
{
	struct box_err e;
	int64_t used;

	box_err_init(&e);
	used = box_nsbox_disk_used(c->dir, i->pid, box_now_ms() + BOX_NSBOX_DISK_WALK_MS, &e);
	if (used < 0) {
		box_fmt(why, whyn, "%s", e.message);
		return 1;
	}
	return used >= c->disk_bytes;
}

static int is_exec_log(const struct dirent *de)
{
	return strncmp(de->d_name, "exec-", 5) == 0;
}

/* Keeps the BOX_NSBOX_LOGS_KEPT newest full-output logs: their names sort by time. */
static void prune_logs(const char *dir)
{
	char p[4096];
	struct dirent **names;
	int n, k;

	box_fmt(p, sizeof(p), "%s/logs", dir);
	n = scandir(p, &names, is_exec_log, alphasort);
	if (n < 0)
		return;
	for (k = 0; k < n; k++) {
		if (k < n - BOX_NSBOX_LOGS_KEPT) {
			char f[4096 + 300];

			box_fmt(f, sizeof(f), "%s/%s", p, names[k]->d_name);
			unlink(f);
		}
		free(names[k]);
	}
	free(names);
}

static const char *sig_name(int sig)
{
	static char buf[16];
	const char *abbrev = sigabbrev_np(sig);

	if (!abbrev)
		return "SIGUNKNOWN";
	box_fmt(buf, sizeof(buf), "SIG%s", abbrev);
	return buf;
}

static void close_pair(int p[2])
{
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	p[0] = p[1] = -1;
}

/* One exec on the host side. */
struct run {
	const struct box_nsbox_inst *i;
	const struct box_nsbox_config *c;
	const struct box_sbexec *x;
	struct box_nsbox_exec_fds f;
	struct box_nsbox_exec_status st;
	struct box_cg_counters before, after;
	struct capture cap;
	int pidfd, have_status, nocg;
	int64_t start, deadline, last_disk;
	char disk_why[200];           /* why the disk could not be measured ("": it could) */
	size_t status_got;
	/* the command's stdin: the text of stdin_data, or one chunk of a streamed stdin at a
	 * time (in_chunk); in_off..in_len is what is still to be written */
	const char *in_src;
	char *in_chunk;
	size_t in_off, in_len;
	int in_eof;                   /* nothing more comes from the source */
	enum box_sbexec_limit seen;   /* what the host saw while the command ran */
	int ran;                      /* the keeper started the command */
};

static void run_init(struct run *r, const struct box_nsbox_inst *i,
		     const struct box_nsbox_config *c, const struct box_sbexec *x)
{
	memset(r, 0, sizeof(*r));
	r->f = (struct box_nsbox_exec_fds){ { -1, -1 }, { -1, -1 }, { -1, -1 }, { -1, -1 },
					    { -1, -1 } };
	r->i = i;
	r->c = c;
	r->x = x;
	r->nocg = i->cg == BOX_CG_NONE;
	r->start = box_now_ms();
	r->deadline = r->start + x->timeout_ms;
	r->last_disk = r->start;
	r->cap.logfd = -1;
	r->cap.c = c;
	r->cap.max = x->max_output_bytes >= 0 ? (size_t)x->max_output_bytes : 1 << 20;
	r->cap.tail_max = r->cap.max / 2;
	r->cap.log_max = BOX_NSBOX_FULL_OUTPUT_MAX;
	if (c->disk_bytes > 0 && c->disk_bytes / BOX_NSBOX_LOGS_KEPT < r->cap.log_max)
		r->cap.log_max = c->disk_bytes / BOX_NSBOX_LOGS_KEPT;
	box_buf_init(&r->cap.head[0], r->cap.max);
	box_buf_init(&r->cap.head[1], r->cap.max);
	box_buf_init(&r->cap.mem, r->cap.max * 2);
	r->pidfd = -1;
	r->in_src = x->stdin_data;
	r->in_len = x->stdin_data ? x->stdin_len : 0;
	r->in_eof = !x->stdin_stream || x->stdin_data;
}

/* The holder (checked by its start time) and the pipes of the chain. */
static int run_open(struct run *r, struct box_err *err)
{
	struct box_nsbox_exec_fds *f = &r->f;

	r->pidfd = box_nsbox_holder_pidfd(r->i);
	if (r->pidfd < 0)
		return box_err_set(err, BOX_E_NOT_FOUND, "the sandbox's holder is gone");
	/* a terminal exec's status is a socket: its first message carries the master */
	if (pipe2(f->out, O_CLOEXEC) < 0 || pipe2(f->errp, O_CLOEXEC) < 0 ||
	    (r->x->tty ? socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, f->status) :
	     pipe2(f->status, O_CLOEXEC)) < 0 || pipe2(f->ctl, O_CLOEXEC) < 0 ||
	    ((r->x->stdin_data || !r->in_eof) && pipe2(f->in, O_CLOEXEC) < 0))
		return box_err_sys(err, "pipe");
	if (f->in[0] < 0 && (f->in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
		return box_err_sys(err, "cannot open /dev/null");
	if (!r->in_eof && !(r->in_src = r->in_chunk = malloc(FEED_CHUNK)))
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	return 0;
}

/* The chain, started by the keeper (already in the sandbox's groups) or its zygote, never by
 * this process: a keeper that does not take it means it did not run (lib/sandbox/local/nskeeper.c). The
 * host keeps only its own ends of the pipes. */
static int run_spawn(struct run *r, struct box_err *err)
{
	struct box_nsbox_exec_fds *f = &r->f;
	int rc;

	box_cg_counters(r->i->cg, r->c->cgname, &r->before);
	rc = box_nsbox_spawn_via_keeper(r->c, r->x, r->deadline, f, &r->ran, err);
	close(r->pidfd);
	r->pidfd = -1;
	close(f->out[1]);
	close(f->errp[1]);
	close(f->status[1]);
	close(f->ctl[0]);
	close(f->in[0]);
	f->out[1] = f->errp[1] = f->status[1] = f->ctl[0] = f->in[0] = -1;
	if (rc < 0 && r->ran) {
		/* it may have started: its output is read as if it had */
		box_err_init(err);
		rc = 0;
	}
	if (f->in[1] >= 0)
		fcntl(f->in[1], F_SETFL, O_NONBLOCK);
	return rc;
}

/* Feeds the command's stdin from what is left of the text, or from the streamed source one
 * chunk at a time: a chunk is read (src ready) only when the last one is written (dst
 * ready), so memory stays at one chunk whatever the size. The pipe is closed at the
 * source's end, or when the command stops reading (EPIPE: SIGPIPE is ignored here). */
static void run_feed(struct run *r, const struct pollfd *src, const struct pollfd *dst)
{
	int *in = &r->f.in[1];
	ssize_t n;

	if (*in < 0)
		return;
	if (r->in_off == r->in_len && !r->in_eof && src->revents) {
		n = read(r->x->stdin_fd, r->in_chunk, FEED_CHUNK);
		if (n > 0) {
			r->in_off = 0;
			r->in_len = (size_t)n;
		} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
			r->in_eof = 1;
		}
	}
	if (r->in_off < r->in_len && dst->revents) {
		n = write(*in, r->in_src + r->in_off, r->in_len - r->in_off);
		if (n > 0) {
			r->in_off += (size_t)n;
		} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
			r->in_off = r->in_len;
			r->in_eof = 1;
		}
	}
	if (r->in_eof && r->in_off >= r->in_len) {
		close(*in);
		*in = -1;
	}
}

/* Reads what is ready of stdout, stderr and the status; feeds stdin. */
static void run_io(struct run *r, const struct pollfd *p)
{
	struct box_nsbox_exec_fds *f = &r->f;
	const struct box_sbexec *x = r->x;
	int k;

	for (k = 0; k < 2; k++) {
		char buf[65536];
		ssize_t n;
		int *fd = k == 0 ? &f->out[0] : &f->errp[0];

		if (!p[k].revents || *fd < 0)
			continue;
		n = read(*fd, buf, sizeof(buf));
		if (n > 0) {
			capture_add(&r->cap, k + 1, buf, (size_t)n);
			if (x->on_output)
				x->on_output(x->ctx, k + 1, buf, (size_t)n);
		} else if (n == 0 || errno != EINTR) {
			close(*fd);
			*fd = -1;
		}
	}
	if (p[2].revents && !r->have_status) {
		ssize_t n = read(f->status[0], (char *)&r->st + r->status_got,
				 sizeof(r->st) - r->status_got);

		if (n > 0)
			r->status_got += (size_t)n;
		if (r->status_got == sizeof(r->st))
			r->have_status = 1;
		if (n <= 0) {
			close(f->status[0]);
			f->status[0] = -1;
		}
	}
	run_feed(r, &p[4], &p[3]);
}

/* The limits the host watches while the command runs (CPU time in its groups, the disk);
 * one passed ends the command through the supervisor's control pipe. */
static void run_watch(struct run *r)
{
	int64_t now = box_now_ms();

	if (!r->seen && r->x->cpu_ms > 0 && !r->nocg) {
		box_cg_counters(r->i->cg, r->c->cgname, &r->after);
		if (r->after.cpu_ns >= 0 && r->before.cpu_ns >= 0 &&
		    (r->after.cpu_ns - r->before.cpu_ns) / 1000000 > r->x->cpu_ms)
			r->seen = BOX_SBEXEC_LIMIT_CPU;
	}
	if (!r->seen && r->c->disk_bytes > 0 && now - r->last_disk >= DISK_EVERY_MS) {
		r->last_disk = now;
		if (disk_over(r->i, r->c, r->disk_why, sizeof(r->disk_why)))
			r->seen = BOX_SBEXEC_LIMIT_DISK;
	}
	if (r->seen && r->f.ctl[1] >= 0) {
		(void)!write(r->f.ctl[1], "k", 1);
		close(r->f.ctl[1]);
		r->f.ctl[1] = -1;
	}
}

/* Output until both streams close and the supervisor has reported (a supervisor past its
 * deadline is asked to stop, then given up on). */
static void run_pump(struct run *r)
{
	struct box_nsbox_exec_fds *f = &r->f;
	int wait_ms = (r->x->cpu_ms > 0 && !r->nocg) || r->c->disk_bytes > 0 ? TICK_MS : 1000;

	while (f->out[0] >= 0 || f->errp[0] >= 0 || (!r->have_status && f->status[0] >= 0)) {
		int feed = f->in[1] >= 0 && r->in_off < r->in_len;
		int more = f->in[1] >= 0 && r->in_off == r->in_len && !r->in_eof;
		struct pollfd p[5] = {
			{ f->out[0], POLLIN, 0 }, { f->errp[0], POLLIN, 0 },
			{ r->have_status ? -1 : f->status[0], POLLIN, 0 },
			{ feed ? f->in[1] : -1, POLLOUT, 0 }, { more ? r->x->stdin_fd : -1, POLLIN, 0 },
		};
		int64_t now = box_now_ms();

		if (now > r->deadline + GRACE_MS) {
			if (f->ctl[1] >= 0)
				close(f->ctl[1]);
			f->ctl[1] = -1;
			if (now > r->deadline + 2 * GRACE_MS)
				break;
		}
		if (poll(p, 5, wait_ms) < 0 && errno != EINTR)
			break;
		run_io(r, p);
		run_watch(r);
		if (r->x->on_tick)
			r->x->on_tick(r->x->tick_ctx);
	}
}

/* 0 when the supervisor reported a command that ran, -1 with err otherwise. */
static int run_status(struct run *r, struct box_err *err)
{
	if (!r->have_status) {
		/* kill -1 inside reaches the supervisor too: what it left may still run, so the
		 * instance ends, and the next operation replaces it from the kept workspace */
		(void)box_nsbox_stop(r->i, r->c->cgname, &(struct box_err){ 0 });
		return box_err_set(err, BOX_E_GUEST, "the command killed its supervisor; the "
				   "sandbox's processes were ended and the next operation restarts it");
	}
	if (r->st.stage != BOX_NSBOX_ST_DONE) {
		/* the chain failed before it forked the command: nothing of it ran */
		r->ran = 0;
		errno = r->st.err_no;
		if (r->st.stage == BOX_NSBOX_ST_SETNS && (errno == ESRCH || errno == EBADF))
			return box_err_set(err, BOX_E_NOT_FOUND, "the sandbox's holder is gone");
		return box_err_sys(err, "cannot %s", r->st.stage < 7 ? stage_name[r->st.stage] :
				   "start");
	}
	return 0;
}

/* A stream in the result: whole when it fit max_output_bytes; else its head and its tail
 * around the marker line, which names the full log as `read` takes it. */
static int run_keep(struct run *r, struct box_sbexec_result *res, int stream,
		    struct box_err *err)
{
	const struct capture *cap = &r->cap;
	const struct box_buf *h = &cap->head[stream - 1];
	size_t at = cap->tail_at[stream - 1], tm = cap->tail_max;
	const char *ring = cap->tail[stream - 1];
	char *tail;
	int rc;

	if (cap->seen[stream - 1] <= (int64_t)cap->max)
		return box_sbexec_set_output(res, stream, h->data, h->len, err);
	if (!(tail = malloc(tm + 1)))
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	if (ring) {
		memcpy(tail, ring + at, tm - at);
		memcpy(tail + tm - at, ring, at);
	}
	rc = box_sbexec_set_cut_output(res, stream, h->data, cap->max - tm, tail, ring ? tm : 0,
				       cap->seen[stream - 1], res->full_output_log, err);
	free(tail);
	return rc;
}

/* The result: how the command ended, the limit that ended it, what it wrote. */
static int run_result(struct run *r, struct box_sbexec_result *res, struct box_err *err)
{
	struct box_sbexec_facts facts = { 0 };
	const struct box_nsbox_exec_status *st = &r->st;
	const struct capture *cap = &r->cap;

	box_cg_counters(r->i->cg, r->c->cgname, &r->after);
	facts.timed_out = st->timed_out;
	facts.seen = r->seen;
	/* a fast writer can fill the disk between two looks: look once more at the end */
	facts.disk_full = r->seen == BOX_SBEXEC_LIMIT_NONE && r->c->disk_bytes > 0 &&
			  disk_over(r->i, r->c, r->disk_why, sizeof(r->disk_why));
	facts.exited = st->exited;
	facts.code = st->code;
	facts.sig = st->sig;
	facts.oom_kills = r->before.oom_kills >= 0 && r->after.oom_kills >= 0 ?
			  r->after.oom_kills - r->before.oom_kills : -1;
	facts.pids_max_hits = r->before.pids_max_hits >= 0 && r->after.pids_max_hits >= 0 ?
			      r->after.pids_max_hits - r->before.pids_max_hits : -1;
	res->limit = box_sbexec_classify(&facts);
	res->exited = st->exited;
	res->exit_code = st->code;
	if (st->sig)
		box_fmt(res->signal, sizeof(res->signal), "%s", sig_name(st->sig));
	else if (st->timed_out || st->killed)
		box_fmt(res->signal, sizeof(res->signal), "SIGKILL");
	if (cap->truncated && cap->logfd >= 0) {
		const char *name = strrchr(cap->logpath, '/') + 1;

		res->full_output_path = strdup(cap->logpath);
		if ((res->full_output_log = malloc(strlen(name) + 7)))
			box_fmt(res->full_output_log, strlen(name) + 7, "/logs/%s", name);
		res->full_output_truncated = cap->log_cut;
	}
	if (run_keep(r, res, 1, err) < 0 || run_keep(r, res, 2, err) < 0)
		return -1;
	res->truncated = cap->truncated;
	res->total_lines = cap->lines + cap->partial[0] + cap->partial[1];
	res->duration_ms = box_now_ms() - r->start;
	box_fmt(res->limits_enforced_by, sizeof(res->limits_enforced_by), "%s",
		r->nocg ? "rlimit" : "cgroup");
	if (r->c->disk_bytes > 0)
		box_fmt(res->disk_limit, sizeof(res->disk_limit), "walk");
	box_fmt(res->disk_unmeasured, sizeof(res->disk_unmeasured), "%s", r->disk_why);
	return 0;
}

static void run_release(struct run *r)
{
	if (r->pidfd >= 0)
		close(r->pidfd);
	close_pair(r->f.out);
	close_pair(r->f.errp);
	close_pair(r->f.in);
	close_pair(r->f.status);
	close_pair(r->f.ctl);
	if (r->cap.logfd >= 0) {
		close(r->cap.logfd);
		if (!r->cap.truncated)
			unlink(r->cap.logpath);
		else
			prune_logs(r->c->dir);
	}
	box_buf_release(&r->cap.head[0]);
	box_buf_release(&r->cap.head[1]);
	box_buf_release(&r->cap.mem);
	free(r->cap.tail[0]);
	free(r->cap.tail[1]);
	free(r->in_chunk);
}

int box_nsbox_exec(const struct box_nsbox_inst *i, const struct box_nsbox_config *c,
		   const struct box_sbexec *x, struct box_sbexec_result *res,
		   struct box_err *err)
{
	struct run r;
	int rc = -1;

	run_init(&r, i, c, x);
	if (run_open(&r, err) == 0 && run_spawn(&r, err) == 0 &&
	    (!x->tty || box_nsbox_tty_relay(r.f.status[0], r.f.ctl[1], r.deadline, &r.st,
					    &r.have_status, err) == 0)) {
		run_pump(&r);
		rc = run_status(&r, err) < 0 ? -1 : run_result(&r, res, err);
	}
	res->ran = r.ran;
	run_release(&r);
	return rc;
}
