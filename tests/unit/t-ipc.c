#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ipc.h"
#include "tap.h"

static char tmp[64];

/* The open descriptors of this process (the directory stream's own fd included, the same
 * each time). */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static int cloexec(int fd)
{
	int f = fcntl(fd, F_GETFD);

	return f >= 0 && (f & FD_CLOEXEC);
}

static int same_file(int a, int b)
{
	struct stat sa, sb;

	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_ino == sb.st_ino &&
	       sa.st_dev == sb.st_dev;
}

/* A connection to lfd is waiting to be accepted within ms. */
static int acceptable(int lfd, int ms)
{
	struct pollfd p = { lfd, POLLIN, 0 };
	int fd;

	if (poll(&p, 1, ms) != 1)
		return 0;
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

static void test_listen_connect(void)
{
	char path[PATH_MAX], file[PATH_MAX + 256], deep[PATH_MAX], lng[200];
	struct box_err e;
	struct stat st;
	int lfd, lfd2, c, before;
	size_t dl;

	snprintf(path, sizeof(path), "%s/s", tmp);
	box_err_init(&e);
	lfd = box_ipc_listen(path, &e);
	ok(lfd >= 0, "listen: %s", lfd >= 0 ? "ok" : e.message);
	ok(lstat(path, &st) == 0 && S_ISSOCK(st.st_mode), "a socket at the path");
	is_int(st.st_mode & 07777, 0600, "mode 0600");
	ok(cloexec(lfd), "listening fd is close-on-exec");
	c = box_ipc_connect(path, &e);
	ok(c >= 0, "connect to it");
	ok(c >= 0 && cloexec(c), "connected fd is close-on-exec");
	ok(acceptable(lfd, 1000), "the connection arrives");
	if (c >= 0)
		close(c);

	/* a second listen at the same path replaces the old socket */
	lfd2 = box_ipc_listen(path, &e);
	ok(lfd2 >= 0, "an old socket is replaced: %s", lfd2 >= 0 ? "ok" : e.message);
	c = box_ipc_connect(path, &e);
	ok(c >= 0 && acceptable(lfd2, 1000), "connections go to the new socket");
	ok(!acceptable(lfd, 0), "and not to the old one");
	if (c >= 0)
		close(c);
	close(lfd);
	close(lfd2);

	/* nobody listens on the socket file any more */
	c = box_ipc_connect(path, &e);
	is_int(c, -1, "connect with nobody listening");
	is_int(e.code, BOX_E_IO, "... io_error");
	if (c >= 0)
		close(c);
	snprintf(file, sizeof(file), "%s/none", tmp);
	box_err_init(&e);
	c = box_ipc_connect(file, &e);
	is_int(c, -1, "connect to a missing path");
	is_int(e.code, BOX_E_IO, "... io_error");
	if (c >= 0)
		close(c);

	snprintf(file, sizeof(file), "%s/regular", tmp);
	close(open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	box_err_init(&e);
	lfd = box_ipc_listen(file, &e);
	is_int(lfd, -1, "a regular file at the path");
	is_int(e.code, BOX_E_CONFLICT, "... conflict");
	ok(lstat(file, &st) == 0 && S_ISREG(st.st_mode), "... and the file is left alone");
	if (lfd >= 0)
		close(lfd);
	unlink(file);

	/* sun_path holds 107 bytes and a NUL */
	dl = strlen(tmp) + 1;
	memset(lng, 'a', sizeof(lng));
	snprintf(file, sizeof(file), "%s/%.*s", tmp, (int)(107 - dl), lng);
	is_int(strlen(file), 107, "path of 107 bytes");
	lfd = box_ipc_listen(file, &e);
	ok(lfd >= 0, "... fits: %s", lfd >= 0 ? "ok" : e.message);
	if (lfd >= 0)
		close(lfd);
	unlink(file);
	/* longer paths (a deep BOX_STATE_DIR) go through their directory: 108 bytes, and a
	 * directory of 300 */
	snprintf(file, sizeof(file), "%s/%.*s", tmp, (int)(108 - dl), lng);
	box_err_init(&e);
	before = count_fds();
	lfd = box_ipc_listen(file, &e);
	ok(lfd >= 0, "path of 108 bytes: listen: %s", lfd >= 0 ? "ok" : e.message);
	ok(lstat(file, &st) == 0 && S_ISSOCK(st.st_mode), "... the socket is at that path");
	is_int(st.st_mode & 07777, 0600, "... mode 0600");
	c = box_ipc_connect_by(file, box_now_ms() + 5000, &e);
	ok(c >= 0 && acceptable(lfd, 1000), "... connect reaches it");
	if (c >= 0)
		close(c);
	if (lfd >= 0)
		close(lfd);
	is_int(count_fds(), before, "... and no directory fd is left open");
	unlink(file);
	snprintf(deep, sizeof(deep), "%s/%.180s", tmp, lng);
	ok(mkdir(deep, 0700) == 0, "a directory whose path is over 180 bytes");
	snprintf(file, sizeof(file), "%s/%.60s", deep, lng);
	box_err_init(&e);
	lfd = box_ipc_listen(file, &e);
	ok(lfd >= 0, "listen at %zu bytes: %s", strlen(file), lfd >= 0 ? "ok" : e.message);
	c = box_ipc_connect(file, &e);
	ok(c >= 0 && acceptable(lfd, 1000), "... connect reaches it");
	if (c >= 0)
		close(c);
	if (lfd >= 0)
		close(lfd);
	unlink(file);
	/* a file name alone longer than an address holds is still refused */
	snprintf(file, sizeof(file), "%s/%.150s", tmp, lng);
	box_err_init(&e);
	lfd = box_ipc_listen(file, &e);
	is_int(lfd, -1, "a socket name of 150 bytes is too long");
	is_int(e.code, BOX_E_INVALID, "... invalid_request");
	ok(access(file, F_OK) < 0, "... and nothing was created");
	if (lfd >= 0)
		close(lfd);
	box_err_init(&e);
	is_int(box_ipc_connect(file, &e), -1, "connect with too long a name");
	is_int(e.code, BOX_E_INVALID, "... invalid_request");
	rmdir(deep);

	/* a server that accepts nothing: once its backlog is full, connect_by gives up at its
	 * deadline instead of waiting for ever */
	snprintf(file, sizeof(file), "%s/full", tmp);
	lfd = box_ipc_listen(file, &e);
	ok(lfd >= 0, "a server that never accepts");
	{
		int conns[200], n = 0, k;
		int64_t t0;

		box_err_init(&e);
		t0 = box_now_ms();
		while (n < 200 && (conns[n] = box_ipc_connect_by(file, box_now_ms() + 300, &e)) >= 0)
			n++;
		ok(n < 200 && box_now_ms() - t0 < 30000, "... connect_by fails after %d connections, "
		   "at its deadline", n);
		is_int(e.code, BOX_E_IO, "... io_error");
		for (k = 0; k < n; k++)
			close(conns[k]);
	}
	if (lfd >= 0)
		close(lfd);
	unlink(file);
	unlink(path);
}

static void test_fds(void)
{
	char file[PATH_MAX];
	struct box_err e;
	int sv[2], pp[2], in[3], out[4] = { -1, -1, -1, -1 }, before, k, r;

	snprintf(file, sizeof(file), "%s/f", tmp);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
	    pipe2(pp, O_CLOEXEC) < 0)
		return;
	in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	in[1] = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	in[2] = pp[1];
	/* descriptors that come without close-on-exec would leak into children */
	fcntl(in[0], F_SETFD, 0);
	fcntl(in[1], F_SETFD, 0);

	box_err_init(&e);
	is_int(box_ipc_send_fds(sv[0], in, 3, &e), 0, "send 3 descriptors");
	r = box_ipc_recv_fds(sv[1], out, 3, box_now_ms() + 1000, &e);
	is_int(r, 0, "receive 3 descriptors: %s", r == 0 ? "ok" : e.message);
	if (r == 0) {
		for (k = 0; k < 3; k++) {
			ok(out[k] != in[k] && same_file(out[k], in[k]),
			   "descriptor %d refers to the same file", k);
			ok(cloexec(out[k]), "descriptor %d is close-on-exec", k);
		}
		ok(write(out[2], "z", 1) == 1 && read(pp[0], &(char){ 0 }, 1) == 1,
		   "the received pipe end works");
		for (k = 0; k < 3; k++)
			close(out[k]);
	}

	before = count_fds();
	is_int(box_ipc_send_fds(sv[0], in, 2, &e), 0, "send 2 descriptors");
	box_err_init(&e);
	is_int(box_ipc_recv_fds(sv[1], out, 3, box_now_ms() + 1000, &e), -1,
	       "fewer descriptors than expected");
	is_int(e.code, BOX_E_IO, "... io_error");
	is_int(count_fds(), before, "... and none of them left open");

	is_int(box_ipc_send_fds(sv[0], in, 3, &e), 0, "send 3 descriptors");
	box_err_init(&e);
	r = box_ipc_recv_fds(sv[1], out, 2, box_now_ms() + 1000, &e);
	is_int(r, -1, "more descriptors than expected");
	is_int(e.code, BOX_E_IO, "... io_error");
	is_int(count_fds(), before, "... and none of them left open");
	/* keep the counts below meaningful should the call wrongly succeed */
	if (r == 0) {
		close(out[0]);
		close(out[1]);
	}

	ok(write(sv[0], "F", 1) == 1, "a byte without descriptors");
	box_err_init(&e);
	is_int(box_ipc_recv_fds(sv[1], out, 1, box_now_ms() + 1000, &e), -1, "... refused");
	is_int(e.code, BOX_E_IO, "... io_error");
	is_int(count_fds(), before, "... nothing left open");

	box_err_init(&e);
	is_int(box_ipc_recv_fds(sv[1], out, 1, box_now_ms() + 50, &e), -1,
	       "nothing sent before the deadline");
	is_int(e.code, BOX_E_TIMEOUT, "... timeout");
	box_err_init(&e);
	is_int(box_ipc_recv_fds(sv[1], out, 1, box_now_ms() - 1, &e), -1,
	       "a deadline already past");
	is_int(e.code, BOX_E_TIMEOUT, "... timeout");

	box_err_init(&e);
	is_int(box_ipc_send_fds(sv[0], in, 0, &e), -1, "send 0 descriptors");
	is_int(e.code, BOX_E_INTERNAL, "... internal");
	box_err_init(&e);
	is_int(box_ipc_send_fds(sv[0], in, 9, &e), -1, "send 9 descriptors");
	is_int(e.code, BOX_E_INTERNAL, "... internal");
	box_err_init(&e);
	is_int(box_ipc_recv_fds(sv[1], out, 0, box_now_ms() + 50, &e), -1, "receive 0");
	is_int(e.code, BOX_E_INTERNAL, "... internal");
	box_err_init(&e);
	is_int(box_ipc_recv_fds(sv[1], out, 9, box_now_ms() + 50, &e), -1, "receive 9");
	is_int(e.code, BOX_E_INTERNAL, "... internal");

	close(sv[0]);
	box_err_init(&e);
	is_int(box_ipc_recv_fds(sv[1], out, 1, box_now_ms() + 1000, &e), -1,
	       "the peer closed");
	is_int(e.code, BOX_E_IO, "... io_error");
	box_err_init(&e);
	is_int(box_ipc_send_fds(sv[1], in, 1, &e), -1, "send to a closed peer");
	is_int(e.code, BOX_E_IO, "... io_error");
	is_int(count_fds(), before - 1, "no descriptor leaked in all of this");
	close(sv[1]);
	for (k = 0; k < 3; k++)
		close(in[k]);
	close(pp[0]);
	unlink(file);
}

int main(void)
{
	struct box_buf p = BOX_BUF_INIT(64);
	struct box_ipc_field f[3], got[4];
	struct box_err e;
	struct box_ipc_in in = BOX_IPC_IN_INIT, in2 = BOX_IPC_IN_INIT;
	uint8_t op;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return 1;
	f[0] = (struct box_ipc_field){ "path", 4 };
	f[1] = (struct box_ipc_field){ "a\0b", 3 };
	f[2] = (struct box_ipc_field){ "", 0 };
	is_int(box_ipc_send(sv[0], 42, f, 3, -1, &e), 0, "send three fields");
	is_int(box_ipc_recv(sv[1], &in, &op, &p, box_now_ms() + 1000, &e), 1, "receive the frame");
	is_int(op, 42, "op kept");
	is_int(box_ipc_split(p.data, p.len, got, 4), 3, "three fields back");
	ok(got[1].n == 3 && memcmp(got[1].p, "a\0b", 3) == 0, "binary field intact");
	is_int(got[2].n, 0, "empty field intact");

	box_ipc_send(sv[0], 7, f, 1, -1, &e);
	box_ipc_send(sv[0], 8, f + 1, 1, -1, &e);
	ok(box_ipc_recv(sv[1], &in, &op, &p, box_now_ms() + 1000, &e) == 1 && op == 7,
	   "first of two frames read ahead together");
	ok(box_ipc_recv(sv[1], &in, &op, &p, box_now_ms() + 1000, &e) == 1 && op == 8 &&
	   box_ipc_split(p.data, p.len, got, 4) == 1 && got[0].n == 3, "second from the read-ahead");
	is_int(box_ipc_recv(sv[1], &in, &op, &p, box_now_ms() + 50, &e), -1, "nothing to read");
	is_int(e.code, BOX_E_TIMEOUT, "times out at the deadline");

	{
		char big[100];

		memset(big, 'x', sizeof(big));
		f[0] = (struct box_ipc_field){ big, sizeof(big) };
		box_ipc_send(sv[0], 1, f, 1, -1, &e);
		is_int(box_ipc_recv(sv[1], &in, &op, &p, box_now_ms() + 1000, &e), -1,
		       "a frame past the payload cap is refused");
		is_int(e.code, BOX_E_LIMIT, "with limit_exceeded");
	}
	{
		/* a header announcing 1000 bytes, then the peer goes away */
		unsigned char hdr[5] = { 0xe8, 0x03, 0, 0, 7 };
		struct box_buf big = BOX_BUF_INIT(4096);
		int sv2[2];

		socketpair(AF_UNIX, SOCK_STREAM, 0, sv2);
		if (write(sv2[0], hdr, 5) != 5)
			return 1;
		close(sv2[0]);
		is_int(box_ipc_recv(sv2[1], &in2, &op, &big, box_now_ms() + 1000, &e), -1, "short frame");
		is_int(e.code, BOX_E_IO, "is an io_error");
		close(sv2[1]);
		box_buf_release(&big);
	}
	is_int(box_ipc_split("\5\0\0\0ab", 6, got, 4), -1, "field longer than the payload refused");
	close(sv[0]);
	close(sv[1]);
	/* after a refused frame the stream is unusable; a fresh one shows a clean end */
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	in = (struct box_ipc_in)BOX_IPC_IN_INIT;
	close(sv[0]);
	is_int(box_ipc_recv(sv[1], &in, &op, &p, box_now_ms() + 1000, &e), 0, "clean end of stream");
	close(sv[1]);
	box_buf_release(&p);

	snprintf(tmp, sizeof(tmp), "/tmp/t-ipc.XXXXXX");
	if (!mkdtemp(tmp))
		return 99;
	test_listen_connect();
	test_fds();
	rmdir(tmp);
	return done_testing();
}
