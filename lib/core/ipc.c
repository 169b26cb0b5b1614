#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ipc.h"
#include "banned.h"

static void put32(unsigned char *b, uint32_t v)
{
	b[0] = (unsigned char)v;
	b[1] = (unsigned char)(v >> 8);
	b[2] = (unsigned char)(v >> 16);
	b[3] = (unsigned char)(v >> 24);
}

static uint32_t get32(const unsigned char *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Waits until fd is ready for events or the deadline passes; 0 ready, -1 with err. */
static int wait_fd(int fd, short events, int64_t deadline_ms, struct box_err *err)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = events };
		int64_t left = -1;
		int r;

		if (deadline_ms >= 0) {
			left = deadline_ms - box_now_ms();
			if (left <= 0)
				return box_err_set(err, BOX_E_TIMEOUT, "deadline passed during IPC");
		}
		r = poll(&pfd, 1, left > 100000 ? 100000 : (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return box_err_sys(err, "poll");
		if (r > 0)
			return 0;
	}
}

int box_ipc_send(int fd, uint8_t op, const struct box_ipc_field *fields, int nfields,
		 int64_t deadline_ms, struct box_err *err)
{
	unsigned char hdr[5], lens[BOX_IPC_MAX_FIELDS][4];
	struct iovec iov[1 + 2 * BOX_IPC_MAX_FIELDS];
	size_t total = 1;
	int n = 0, i;

	if (nfields > BOX_IPC_MAX_FIELDS)
		return box_err_set(err, BOX_E_INTERNAL, "too many IPC fields");
	iov[n++] = (struct iovec){ hdr, sizeof(hdr) };
	for (i = 0; i < nfields; i++) {
		if (fields[i].n > UINT32_MAX - 64 || total + 4 + fields[i].n > UINT32_MAX)
			return box_err_set(err, BOX_E_LIMIT, "IPC frame too large");
		put32(lens[i], (uint32_t)fields[i].n);
		iov[n++] = (struct iovec){ lens[i], 4 };
		iov[n++] = (struct iovec){ (void *)fields[i].p, fields[i].n };
		total += 4 + fields[i].n;
	}
	put32(hdr, (uint32_t)total);
	hdr[4] = op;
	i = 0;
	while (i < n) {
		struct msghdr mh = { .msg_iov = iov + i, .msg_iovlen = (size_t)(n - i) };
		ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | (deadline_ms >= 0 ? MSG_DONTWAIT : 0));

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (wait_fd(fd, POLLOUT, deadline_ms, err) < 0)
				return -1;
			continue;
		}
		if (w < 0)
			return box_err_sys(err, "send to the VM process");
		while (i < n && (size_t)w >= iov[i].iov_len) {
			w -= (ssize_t)iov[i].iov_len;
			i++;
		}
		if (i < n) {
			iov[i].iov_base = (char *)iov[i].iov_base + w;
			iov[i].iov_len -= (size_t)w;
		}
	}
	return 0;
}

/* How long a receiver polls with non-blocking recv before it goes to sleep. A host call is a
 * round trip; sleeping and being woken costs ~10-20 us on a VM's scheduler, more than the call
 * itself, so both ends spin briefly first. Bounded: at most this much CPU per wait. */
#define SPIN_NS 40000

/* One recv into dst (at most n bytes), waiting for data until the deadline (-1: no deadline).
 * Returns the byte count, 0 at end of stream, -1. */
static ssize_t recv_some(int fd, void *dst, size_t n, int64_t deadline_ms, struct box_err *err)
{
	int64_t spin_end = box_now_ns() + SPIN_NS;

	for (;;) {
		ssize_t r = recv(fd, dst, n, MSG_DONTWAIT);

		if (r >= 0)
			return r;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return box_err_sys(err, "receive from the peer");
		if (box_now_ns() < spin_end)
			continue;
		if (wait_fd(fd, POLLIN, deadline_ms, err) < 0)
			return -1;
	}
}

/* Reads exactly n bytes, first from the read-ahead; returns 1, 0 on end of stream before the
 * first byte, -1 on error. Only reads ahead (into in->buf) when n is smaller than it. */
static int read_exact(int fd, struct box_ipc_in *in, char *dst, size_t n, int64_t deadline_ms,
		      struct box_err *err)
{
	size_t got = 0;

	while (got < n) {
		size_t have = in->len - in->off;
		ssize_t r;

		if (have) {
			size_t take = have < n - got ? have : n - got;

			memcpy(dst + got, in->buf + in->off, take);
			in->off += take;
			got += take;
			continue;
		}
		in->off = in->len = 0;
		if (n - got < sizeof(in->buf)) {
			r = recv_some(fd, in->buf, sizeof(in->buf), deadline_ms, err);
			if (r > 0)
				in->len = (size_t)r;
		} else {
			r = recv_some(fd, dst + got, n - got, deadline_ms, err);
			if (r > 0)
				got += (size_t)r;
		}
		if (r < 0)
			return -1;
		if (r == 0) {
			if (got == 0)
				return 0;
			return box_err_set(err, BOX_E_IO, "peer closed the connection mid-frame");
		}
	}
	return 1;
}

int box_ipc_recv(int fd, struct box_ipc_in *in, uint8_t *op, struct box_buf *payload,
		 int64_t deadline_ms, struct box_err *err)
{
	unsigned char hdr[5];
	uint32_t len;
	char *dst;
	int r;

	box_buf_truncate(payload, 0);
	r = read_exact(fd, in, (char *)hdr, sizeof(hdr), deadline_ms, err);
	if (r <= 0)
		return r;
	len = get32(hdr);
	if (len < 1)
		return box_err_set(err, BOX_E_IO, "malformed IPC frame");
	*op = hdr[4];
	len -= 1;
	dst = box_buf_reserve(payload, len, err);
	if (!dst)
		return -1;
	if (len) {
		r = read_exact(fd, in, dst, len, deadline_ms, err);
		if (r == 0)
			return box_err_set(err, BOX_E_IO, "peer closed the connection mid-frame");
		if (r < 0)
			return -1;
	}
	payload->len = len;
	payload->data[len] = 0;
	return 1;
}

int box_ipc_split(const char *p, size_t n, struct box_ipc_field *fields, int max)
{
	int count = 0;

	while (n) {
		uint32_t len;

		if (n < 4 || count >= max)
			return -1;
		len = get32((const unsigned char *)p);
		p += 4;
		n -= 4;
		if (len > n)
			return -1;
		fields[count].p = p;
		fields[count].n = len;
		count++;
		p += len;
		n -= len;
	}
	return count;
}

/* The address of path. One longer than sun_path (a deep BOX_STATE_DIR) is reached through
 * its directory, opened O_PATH: "/proc/self/fd/N/NAME", *dirfd N (close it after the bind or
 * connect; -1 when not needed). */
static int unix_addr(const char *path, struct sockaddr_un *sa, int *dirfd, struct box_err *err)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];

	*dirfd = -1;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (box_fmt(sa->sun_path, sizeof(sa->sun_path), "%s", path) == 0)
		return 0;
	if (!slash || slash == path || (size_t)(slash - path) >= sizeof(dir) || !slash[1])
		return box_err_set(err, BOX_E_INVALID, "socket path too long: %.200s", path);
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = 0;
	*dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*dirfd < 0)
		return box_err_sys(err, "cannot open %.200s", dir);
	if (box_fmt(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s", *dirfd,
		    slash + 1) < 0) {
		close(*dirfd);
		*dirfd = -1;
		return box_err_set(err, BOX_E_INVALID, "socket name too long: %.200s", slash + 1);
	}
	return 0;
}

static void close_dirfd(int fd)
{
	if (fd >= 0)
		close(fd);
}

int box_ipc_listen(const char *path, struct box_err *err)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd, dfd;

	if (unix_addr(path, &sa, &dfd, err) < 0)
		return -1;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			close_dirfd(dfd);
			return box_err_set(err, BOX_E_CONFLICT, "%.200s exists and is not a socket",
					   path);
		}
		if (unlink(path) < 0) {
			close_dirfd(dfd);
			return box_err_sys(err, "cannot remove %.200s", path);
		}
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		close_dirfd(dfd);
		return box_err_sys(err, "socket");
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(path, 0600) < 0 ||
	    listen(fd, 64) < 0) {
		box_err_sys(err, "cannot listen on %.200s", path);
		close(fd);
		close_dirfd(dfd);
		return -1;
	}
	close_dirfd(dfd);
	return fd;
}

int box_ipc_connect_by(const char *path, int64_t deadline_ms, struct box_err *err)
{
	struct sockaddr_un sa;
	int fd, dfd, r;

	if (unix_addr(path, &sa, &dfd, err) < 0)
		return -1;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (deadline_ms >= 0 ? SOCK_NONBLOCK : 0),
		    0);
	if (fd < 0) {
		close_dirfd(dfd);
		return box_err_sys(err, "socket");
	}
	/* a full backlog (a server that does not accept) is EAGAIN: tried again until the
	 * deadline, never waited on for ever */
	while ((r = connect(fd, (struct sockaddr *)&sa, sizeof(sa))) < 0 &&
	       (errno == EINTR || (errno == EAGAIN && box_now_ms() < deadline_ms)))
		if (errno == EAGAIN)
			usleep(20000);
	if (r < 0) {
		box_err_sys(err, "cannot reach %.200s", path);
		err->code = BOX_E_IO;
		close(fd);
		close_dirfd(dfd);
		return -1;
	}
	close_dirfd(dfd);
	if (deadline_ms >= 0)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

int box_ipc_connect(const char *path, struct box_err *err)
{
	return box_ipc_connect_by(path, -1, err);
}

#define FDS_MAX 8

int box_ipc_send_fds(int sock, const int *fds, int n, struct box_err *err)
{
	char byte = 'F';
	struct iovec iov = { &byte, 1 };
	union {
		char buf[CMSG_SPACE(sizeof(int) * FDS_MAX)];
		struct cmsghdr align;
	} u;
	struct msghdr m = { 0 };
	struct cmsghdr *cm;

	if (n <= 0 || n > FDS_MAX)
		return box_err_set(err, BOX_E_INTERNAL, "bad descriptor count");
	memset(&u, 0, sizeof(u));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = u.buf;
	m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
	cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
	memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)n);
	if (sendmsg(sock, &m, MSG_NOSIGNAL) != 1)
		return box_err_sys(err, "cannot pass descriptors");
	return 0;
}

int box_ipc_recv_fds(int sock, int *fds, int n, int64_t deadline_ms, struct box_err *err)
{
	char byte;
	struct iovec iov = { &byte, 1 };
	union {
		char buf[CMSG_SPACE(sizeof(int) * FDS_MAX)];
		struct cmsghdr align;
	} u;
	struct msghdr m = { 0 };
	struct cmsghdr *cm;
	struct pollfd p = { sock, POLLIN, 0 };
	int64_t left = deadline_ms - box_now_ms();
	ssize_t r;
	int got = 0, k;

	if (n <= 0 || n > FDS_MAX)
		return box_err_set(err, BOX_E_INTERNAL, "bad descriptor count");
	if (left <= 0 || poll(&p, 1, (int)left) <= 0)
		return box_err_set(err, BOX_E_TIMEOUT, "no descriptors came in time");
	memset(&u, 0, sizeof(u));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = u.buf;
	m.msg_controllen = sizeof(u.buf);
	r = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
	if (r != 1)
		return box_err_set(err, BOX_E_IO, "no descriptors came");
	for (cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
		int cnt;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		cnt = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (k = 0; k < cnt; k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + sizeof(int) * (size_t)k, sizeof(int));
			if (got < n)
				fds[got] = fd;
			else
				close(fd);
			got++;
		}
	}
	if (got != n || (m.msg_flags & MSG_CTRUNC)) {
		if (got > n)
			got = n;
		for (k = 0; k < got; k++)
			close(fds[k]);
		return box_err_set(err, BOX_E_IO, "wrong descriptors came");
	}
	return 0;
}
