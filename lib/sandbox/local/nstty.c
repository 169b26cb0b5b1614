/* A terminal exec of the local provider (shell, exec --tty). The supervisor, inside the
 * sandbox, opens a pseudo-terminal on the guest's own devpts (/dev/pts/ptmx, an instance the
 * holder mounted), gives the slave to the command as its controlling terminal and sends the
 * master to the host over the status socket (SOCK_SEQPACKET: a one-byte message 'T' with the
 * master, later the status message). The host checks it is a master of another devpts than
 * its own and relays it to the caller's terminal (lib/sandbox/sbtty.c). No descriptor of the
 * caller's terminal ever crosses into the sandbox. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "nsroles.h"
#include "sbtty.h"
#include "banned.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

#define TTY_MASTER_WAIT_MS 30000   /* the chain's set-up, on a loaded machine */

int box_nsbox_tty_open(const struct box_sbexec *x, int status_fd, int *slave)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { (void *)"T", 1 };
	struct msghdr m = { 0 };
	struct cmsghdr *cm;
	int master, unlock = 0;

	*slave = -1;
	master = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0)
		return -1;
	if (ioctl(master, TIOCSPTLCK, &unlock) < 0 ||
	    (*slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY)) < 0)
		goto fail;
	if (x->tty_rows && x->tty_cols) {
		struct winsize ws = { .ws_row = x->tty_rows, .ws_col = x->tty_cols };

		(void)ioctl(*slave, TIOCSWINSZ, &ws);
	}
	memset(&u, 0, sizeof(u));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = u.buf;
	m.msg_controllen = sizeof(u.buf);
	cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &master, sizeof(int));
	if (sendmsg(status_fd, &m, MSG_NOSIGNAL) != 1)
		goto fail;
	close(master);
	return 0;
fail:
	{
		int e = errno;

		if (*slave >= 0)
			close(*slave);
		*slave = -1;
		close(master);
		errno = e;
	}
	return -1;
}

int box_nsbox_tty_attach(void)
{
	return ioctl(0, TIOCSCTTY, 0);
}

/* The first message of the status socket: the master (1), or the status of a chain that
 * failed before it had one (0, *have_status set), or -1 (gone, or the wait ran out). */
static int recv_master(int sock, int *master, struct box_nsbox_exec_status *st,
		       int *have_status)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} u;
	char data[sizeof(*st)];
	struct iovec iov = { data, sizeof(data) };
	struct msghdr m = { 0 };
	struct cmsghdr *cm;
	struct pollfd p = { sock, POLLIN, 0 };
	ssize_t n;

	*master = -1;
	if (poll(&p, 1, TTY_MASTER_WAIT_MS) <= 0)
		return -1;
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = u.buf;
	m.msg_controllen = sizeof(u.buf);
	n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	for (cm = n >= 0 ? CMSG_FIRSTHDR(&m) : NULL; cm; cm = CMSG_NXTHDR(&m, cm)) {
		size_t k, nfd;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (k = 0; k < nfd; k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + k * sizeof(int), sizeof(int));
			if (*master < 0 && n == 1 && data[0] == 'T')
				*master = fd;
			else
				close(fd);
		}
	}
	if (*master >= 0)
		return 1;
	if (n == (ssize_t)sizeof(*st)) {
		memcpy(st, data, sizeof(*st));
		*have_status = 1;
		return 0;
	}
	return -1;
}

/* 0 when fd is the master of a pseudo-terminal (TIOCGPTN answers) of a devpts other than the
 * host's /dev/pts: the guest's own. */
static int guest_master(int fd)
{
	struct stat a, b;
	unsigned int n;

	if (ioctl(fd, TIOCGPTN, &n) < 0 || fstat(fd, &a) < 0 || !S_ISCHR(a.st_mode))
		return -1;
	if (stat("/dev/pts/ptmx", &b) == 0 && a.st_dev == b.st_dev)
		return -1;
	return 0;
}

#define TTY_GRACE_MS 3000

int box_nsbox_tty_relay(int status_fd, int ctl_fd, int64_t deadline,
			struct box_nsbox_exec_status *st, int *have_status, struct box_err *err)
{
	int master, rc, sig = 0, raw;
	enum box_sbtty_end end;

	rc = recv_master(status_fd, &master, st, have_status);
	if (rc == 0)
		return 0;   /* the chain failed before its terminal: the status says how */
	if (rc < 0 || guest_master(master) < 0) {
		if (master >= 0)
			close(master);
		if (ctl_fd >= 0)
			(void)!write(ctl_fd, "k", 1);
		return box_err_set(err, BOX_E_IO, "the sandbox gave no terminal of its own; the "
				   "command was ended");
	}
	raw = box_sbtty_raw(0);
	/* the supervisor ends the command at the deadline and reports the timeout; the relay's
	 * own end comes TTY_GRACE_MS later, as a backstop: ending first, it would close the
	 * master and the command would die of the hangup, not of the timeout */
	end = box_sbtty_relay(0, 1, master, status_fd, deadline + TTY_GRACE_MS, &sig);
	if (raw == 0)
		box_sbtty_restore();
	close(master);
	if ((end == BOX_SBTTY_SIGNAL || end == BOX_SBTTY_ERROR) && ctl_fd >= 0)
		(void)!write(ctl_fd, "k", 1);
	return 0;
}
