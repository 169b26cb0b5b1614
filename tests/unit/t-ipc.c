#include <sys/socket.h>
#include <unistd.h>
#include "ipc.h"
#include "tap.h"

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
	return done_testing();
}
