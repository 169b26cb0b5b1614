/* lib/sandbox/sbtty: the caller's terminal in raw mode and back (also when the process
 * crashes), and the relay between it and a pseudo-terminal's master: bytes both ways, the
 * end of a non-terminal stdin, SIGWINCH, the signals that end it, the deadline, and megabytes
 * arriving whole. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "tap.h"
#include "sbtty.h"
#include "clock.h"

/* a pseudo-terminal pair: m the master, s the slave */
static void pty_pair(int *m, int *s)
{
	*m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*m < 0 || grantpt(*m) < 0 || unlockpt(*m) < 0) {
		perror("posix_openpt");
		exit(99);
	}
	*s = open(ptsname(*m), O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*s < 0) {
		perror("open slave");
		exit(99);
	}
}

static int same_modes(const struct termios *a, const struct termios *b)
{
	return a->c_iflag == b->c_iflag && a->c_oflag == b->c_oflag &&
	       a->c_cflag == b->c_cflag && a->c_lflag == b->c_lflag &&
	       memcmp(a->c_cc, b->c_cc, sizeof(a->c_cc)) == 0;
}

/* a command on the slave s as its controlling terminal, in a session of its own */
static pid_t on_terminal(int s, const char *script)
{
	pid_t p = fork();

	if (p == 0) {
		setsid();
		ioctl(s, TIOCSCTTY, 0);
		dup2(s, 0);
		dup2(s, 1);
		dup2(s, 2);
		execl("/bin/sh", "sh", "-c", script, (char *)NULL);
		_exit(127);
	}
	return p;
}

static void test_size_and_raw(void)
{
	struct winsize ws = { .ws_row = 33, .ws_col = 111 };
	struct termios before, during, after;
	unsigned short r, c;
	int m, s, nul = open("/dev/null", O_RDONLY);

	pty_pair(&m, &s);
	ioctl(s, TIOCSWINSZ, &ws);
	box_sbtty_size(s, &r, &c);
	ok(r == 33 && c == 111, "size: the terminal's rows and columns");
	box_sbtty_size(nul, &r, &c);
	ok(r == 0 && c == 0, "size: 0 and 0 for no terminal");
	is_int(box_sbtty_raw(nul), 1, "raw: 1 and nothing changed for no terminal");
	box_sbtty_restore();   /* nothing saved: nothing done */
	close(nul);

	tcgetattr(s, &before);
	is_int(box_sbtty_raw(s), 0, "raw: 0 on a terminal");
	tcgetattr(s, &during);
	ok(!(during.c_lflag & (ICANON | ECHO | ISIG)) && !(during.c_oflag & OPOST) &&
	   !(during.c_iflag & ICRNL), "raw: no line editing, echo, key signals or output processing");
	box_sbtty_restore();
	tcgetattr(s, &after);
	ok(same_modes(&before, &after), "restore: the modes of before, exactly");
	box_sbtty_restore();
	tcgetattr(s, &after);
	ok(same_modes(&before, &after), "restore: a second restore changes nothing");
	close(m);
	close(s);
}

static void test_crash_restores(void)
{
	static const int sigs[] = { SIGSEGV, SIGABRT, SIGBUS };
	size_t k;

	for (k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++) {
		struct termios before, after;
		int m, s, st = 0;
		pid_t p;

		pty_pair(&m, &s);
		tcgetattr(s, &before);
		p = fork();
		if (p == 0) {
			if (box_sbtty_raw(s) != 0)
				_exit(3);
			raise(sigs[k]);
			_exit(4);
		}
		waitpid(p, &st, 0);
		tcgetattr(s, &after);
		ok(WIFSIGNALED(st) && WTERMSIG(st) == sigs[k] && same_modes(&before, &after),
		   "a process dying of signal %d in raw mode puts the modes back and still dies of it",
		   sigs[k]);
		close(m);
		close(s);
	}
}

/* reads what is in a file, at most n-1 bytes, NUL-terminated */
static size_t slurp(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY);
	ssize_t got = fd >= 0 ? read(fd, buf, n - 1) : -1;

	if (fd >= 0)
		close(fd);
	buf[got > 0 ? got : 0] = 0;
	return got > 0 ? (size_t)got : 0;
}

static void test_relay_both_ways(const char *dir)
{
	char path[4096], buf[4096];
	int m, s, in[2], out, rc, sig = -1;
	enum box_sbtty_end end;
	pid_t p;

	snprintf(path, sizeof(path), "%s/both", dir);
	pty_pair(&m, &s);
	if (pipe2(in, O_CLOEXEC) < 0)
		exit(99);
	out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	p = on_terminal(s, "read a; echo \"got:$a\"; cat >/dev/null; echo eof-seen");
	close(s);
	rc = (int)write(in[1], "hello\n", 6);
	close(in[1]);
	end = box_sbtty_relay(in[0], out, m, -1, box_now_ms() + 20000, &sig);
	waitpid(p, NULL, 0);
	close(out);
	close(in[0]);
	close(m);
	slurp(path, buf, sizeof(buf));
	ok(rc == 6 && end == BOX_SBTTY_HANGUP && sig == 0,
	   "relay: ends when the terminal's last holder is gone (end %d)", (int)end);
	ok(strstr(buf, "got:hello") != NULL, "relay: typed input reaches the command, its output "
	   "comes back");
	ok(strstr(buf, "eof-seen") != NULL, "relay: the end of a non-terminal stdin is the "
	   "terminal's EOF");
}

static void test_relay_megabytes(const char *dir)
{
	char path[4096], cmd[8192];
	int m, s, out, st = 0;
	enum box_sbtty_end end;
	pid_t p;

	snprintf(path, sizeof(path), "%s/big", dir);
	pty_pair(&m, &s);
	out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	p = on_terminal(s, "stty raw -echo; seq 1 500000");
	close(s);
	end = box_sbtty_relay(-1, out, m, -1, box_now_ms() + 60000, NULL);
	waitpid(p, NULL, 0);
	close(out);
	close(m);
	snprintf(cmd, sizeof(cmd), "seq 1 500000 | cmp -s - '%s'", path);
	st = system(cmd);
	ok(end == BOX_SBTTY_HANGUP && st == 0, "relay: 3.4 MB of output arrive whole and in order");
}

static void test_relay_winch_done(void)
{
	struct winsize ws = { .ws_row = 20, .ws_col = 70 }, got;
	int cm, cs, m, s, done[2];
	enum box_sbtty_end end;
	pid_t p;

	pty_pair(&cm, &cs);   /* the caller's terminal: cs is what the relay reads */
	pty_pair(&m, &s);     /* the guest's */
	ioctl(cs, TIOCSWINSZ, &ws);
	if (pipe(done) < 0)
		exit(99);
	p = fork();
	if (p == 0) {
		struct winsize w2 = { .ws_row = 51, .ws_col = 163 };

		usleep(300000);
		ioctl(cs, TIOCSWINSZ, &w2);
		kill(getppid(), SIGWINCH);
		usleep(300000);
		(void)!write(done[1], "d", 1);
		_exit(0);
	}
	close(done[1]);
	end = box_sbtty_relay(cs, open("/dev/null", O_WRONLY | O_CLOEXEC), m, done[0],
			      box_now_ms() + 20000, NULL);
	waitpid(p, NULL, 0);
	ioctl(s, TIOCGWINSZ, &got);
	ok(end == BOX_SBTTY_DONE, "relay: ends when done becomes readable");
	ok(got.ws_row == 51 && got.ws_col == 163, "relay: a SIGWINCH copies the caller's size "
	   "to the terminal (%u x %u)", got.ws_row, got.ws_col);
	close(done[0]);
	close(cm);
	close(cs);
	close(m);
	close(s);
}

static void test_relay_signals_deadline(void)
{
	static const int sigs[] = { SIGTERM, SIGHUP, SIGINT, SIGQUIT };
	size_t k;
	int m, s, sig;
	int64_t t0;
	enum box_sbtty_end end;
	sigset_t block, before, now;

	/* blocked from before the fork: a signal sent early waits for the relay */
	sigemptyset(&block);
	for (k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++)
		sigaddset(&block, sigs[k]);
	sigprocmask(SIG_BLOCK, &block, &before);
	for (k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++) {
		pid_t p;

		pty_pair(&m, &s);
		p = fork();
		if (p == 0) {
			usleep(200000);
			kill(getppid(), sigs[k]);
			_exit(0);
		}
		end = box_sbtty_relay(-1, -1, m, -1, box_now_ms() + 30000, &sig);
		waitpid(p, NULL, 0);
		sigprocmask(SIG_SETMASK, NULL, &now);
		ok(end == BOX_SBTTY_SIGNAL && sig == sigs[k] && sigismember(&now, sigs[k]) &&
		   !sigismember(&now, SIGWINCH), "relay: signal %d ends it; the mask is as before "
		   "after", sigs[k]);
		close(m);
		close(s);
	}
	pty_pair(&m, &s);
	t0 = box_now_ms();
	end = box_sbtty_relay(-1, -1, m, -1, t0 + 300, NULL);
	ok(end == BOX_SBTTY_DEADLINE && box_now_ms() - t0 >= 300, "relay: the deadline ends it");
	close(m);
	close(s);
	sigprocmask(SIG_SETMASK, &before, NULL);
}

int main(void)
{
	char dir[] = "/tmp/t-sbtty-XXXXXX";
	char cmd[128];

	if (!mkdtemp(dir))
		return 99;
	test_size_and_raw();
	test_crash_restores();
	test_relay_both_ways(dir);
	test_relay_megabytes(dir);
	test_relay_winch_done();
	test_relay_signals_deadline();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		return 99;
	return done_testing();
}
