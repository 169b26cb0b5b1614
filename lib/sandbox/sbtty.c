/* The caller's side of a terminal exec: raw mode and its restoration, and the relay. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>

#include "sbtty.h"
#include "clock.h"
#include "banned.h"

#define CHUNK 65536
#define DRAIN_QUIET_MS 2000   /* after the end was reported: the master's last bytes */
#define DRAIN_MAX_MS 5000     /* the drain's absolute bound after the end is reported */

static struct termios saved;
static volatile sig_atomic_t saved_fd = -1;
static const int fatal[] = { SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL };
static struct sigaction fatal_old[sizeof(fatal) / sizeof(fatal[0])];

void box_sbtty_size(int fd, unsigned short *rows, unsigned short *cols)
{
	struct winsize ws;

	*rows = *cols = 0;
	if (ioctl(fd, TIOCGWINSZ, &ws) == 0) {
		*rows = ws.ws_row;
		*cols = ws.ws_col;
	}
}

void box_sbtty_restore(void)
{
	int fd = saved_fd;
	size_t k;

	if (fd < 0)
		return;
	saved_fd = -1;
	(void)tcsetattr(fd, TCSAFLUSH, &saved);
	for (k = 0; k < sizeof(fatal) / sizeof(fatal[0]); k++)
		sigaction(fatal[k], &fatal_old[k], NULL);
}

static void on_fatal(int sig)
{
	int fd = saved_fd;

	if (fd >= 0)
		(void)tcsetattr(fd, TCSANOW, &saved);
	saved_fd = -1;
	signal(sig, SIG_DFL);
	raise(sig);
}

int box_sbtty_raw(int fd)
{
	struct termios raw;
	struct sigaction sa;
	size_t k;

	if (tcgetattr(fd, &saved) < 0)
		return 1;
	raw = saved;
	cfmakeraw(&raw);
	raw.c_cc[VMIN] = 1;
	raw.c_cc[VTIME] = 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_fatal;
	sa.sa_flags = SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	for (k = 0; k < sizeof(fatal) / sizeof(fatal[0]); k++)
		sigaction(fatal[k], &sa, &fatal_old[k]);
	saved_fd = fd;
	if (tcsetattr(fd, TCSAFLUSH, &raw) < 0) {
		int e = errno;

		box_sbtty_restore();
		errno = e;
		return -1;
	}
	return 0;
}

static void copy_size(int from, int to)
{
	struct winsize ws;

	if (ioctl(from, TIOCGWINSZ, &ws) == 0)
		(void)ioctl(to, TIOCSWINSZ, &ws);
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			struct pollfd q = { fd, POLLOUT, 0 };

			(void)poll(&q, 1, 1000);
			continue;
		}
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The relay's state: input waiting for the master (ib), whether the caller's output still
 * takes bytes. */
struct relay {
	int in, out, master;
	char ib[CHUNK];
	size_t ib_len, ib_off;
	int in_open, eof_sent, out_ok;
};

/* Master to out: 1 when bytes came, 0 when none are there now, -1 on hangup. */
static int from_master(struct relay *r)
{
	char buf[CHUNK];
	ssize_t n = read(r->master, buf, sizeof(buf));

	if (n > 0) {
		if (r->out_ok && write_all(r->out, buf, (size_t)n) < 0)
			r->out_ok = 0;   /* the caller's output is gone: the command still runs */
		return 1;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	return -1;   /* EIO: no slave left open */
}

static void to_master(struct relay *r)
{
	ssize_t n = write(r->master, r->ib + r->ib_off, r->ib_len - r->ib_off);

	if (n > 0)
		r->ib_off += (size_t)n;
	else if (n < 0 && errno != EAGAIN && errno != EINTR)
		r->ib_off = r->ib_len;   /* the terminal is going away: drop it */
	if (r->ib_off >= r->ib_len)
		r->ib_off = r->ib_len = 0;
}

static void from_in(struct relay *r)
{
	ssize_t n = read(r->in, r->ib, sizeof(r->ib));

	if (n > 0) {
		r->ib_len = (size_t)n;
		r->ib_off = 0;
	} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
		struct termios t;

		/* the end of a non-terminal stdin: the guest's terminal gets its EOF character,
		 * once, as a typed ^D would */
		r->in_open = 0;
		if (!r->eof_sent && tcgetattr(r->master, &t) == 0) {
			r->ib[0] = (char)(t.c_cc[VEOF] ? t.c_cc[VEOF] : 4);
			r->ib_len = 1;
			r->ib_off = 0;
		}
		r->eof_sent = 1;
	}
}

/* What the master still holds once the end is reported: the command's writers have gone, so
 * it goes quiet after their last bytes. Any other guest process may hold the terminal open
 * and keep writing, so the drain also ends at an absolute bound (DRAIN_MAX_MS), and at a
 * signal that asks box to stop (sfd: TERM, HUP, INT, QUIT). */
static void drain(struct relay *r, int sfd)
{
	int64_t now = box_now_ms();
	int64_t quiet_until = now + DRAIN_QUIET_MS;
	int64_t hard = now + DRAIN_MAX_MS;

	while ((now = box_now_ms()) < quiet_until && now < hard) {
		struct pollfd q[2] = { { r->master, POLLIN, 0 }, { sfd, POLLIN, 0 } };
		struct signalfd_siginfo si;
		int rc;

		if (poll(q, 2, 100) < 0 && errno != EINTR)
			return;
		if (q[1].revents && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si) &&
		    si.ssi_signo != SIGWINCH)
			return;
		rc = from_master(r);
		if (rc < 0)
			return;
		if (rc > 0)
			quiet_until = box_now_ms() + DRAIN_QUIET_MS;
	}
}

/* Long because it is the one poll loop of the relay: four sources, and how each ends it. */
enum box_sbtty_end box_sbtty_relay(int in, int out, int master, int done, int64_t deadline_ms,
				   int *sig)
{
	static struct relay r;
	sigset_t set, old;
	struct sigaction ign = { .sa_handler = SIG_IGN }, pipe_old;
	enum box_sbtty_end end = BOX_SBTTY_ERROR;
	int sfd, fl = fcntl(master, F_GETFL);

	memset(&r, 0, sizeof(r));
	r.in = in;
	r.out = out;
	r.master = master;
	r.in_open = in >= 0;
	r.out_ok = 1;
	if (sig)
		*sig = 0;
	if (fl >= 0)
		(void)fcntl(master, F_SETFL, fl | O_NONBLOCK);
	sigemptyset(&set);
	sigaddset(&set, SIGWINCH);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGQUIT);
	sigprocmask(SIG_BLOCK, &set, &old);
	sigaction(SIGPIPE, &ign, &pipe_old);
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (in >= 0)
		copy_size(in, master);
	for (;;) {
		struct pollfd p[4] = {
			{ r.in_open && !r.ib_len ? in : -1, POLLIN, 0 },
			{ master, POLLIN | (r.ib_len ? POLLOUT : 0), 0 },
			{ sfd, POLLIN, 0 },
			{ done, POLLIN, 0 },
		};
		int64_t left = deadline_ms - box_now_ms();
		struct signalfd_siginfo si;

		if (left <= 0) {
			end = BOX_SBTTY_DEADLINE;
			break;
		}
		if (poll(p, 4, left > 1000 ? 1000 : (int)left) < 0 && errno != EINTR)
			break;
		if (p[1].revents & POLLOUT)
			to_master(&r);
		if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			if (from_master(&r) < 0) {
				end = BOX_SBTTY_HANGUP;
				break;
			}
		}
		if (p[0].revents)
			from_in(&r);
		if (p[2].revents && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
			if (si.ssi_signo == SIGWINCH) {
				copy_size(in, master);
			} else {
				if (sig)
					*sig = (int)si.ssi_signo;
				end = BOX_SBTTY_SIGNAL;
				break;
			}
		}
		if (p[3].revents) {
			drain(&r, sfd);
			end = BOX_SBTTY_DONE;
			break;
		}
	}
	if (sfd >= 0)
		close(sfd);
	sigaction(SIGPIPE, &pipe_old, NULL);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return end;
}
