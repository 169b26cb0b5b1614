/* libFuzzer target: the frames of lib/core/ipc.c (the VM child's and the sandbox's control
 * channel) as a receiver reads them from a stream: header, payload cap, read-ahead, then the
 * payload split into its fields. */
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "err.h"
#include "ipc.h"

#define FRAMES_MAX 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct box_ipc_in in = BOX_IPC_IN_INIT;
	struct box_buf payload = BOX_BUF_INIT(64 * 1024);
	struct box_ipc_field fields[64];
	struct box_err err;
	size_t off = 0;
	int sv[2], i;
	uint8_t op;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	while (off < size) {
		ssize_t n = send(sv[0], data + off, size - off, MSG_NOSIGNAL);

		if (n <= 0)
			break;
		off += (size_t)n;
	}
	shutdown(sv[0], SHUT_WR);
	for (i = 0; i < FRAMES_MAX; i++) {
		box_err_init(&err);
		if (box_ipc_recv(sv[1], &in, &op, &payload, box_now_ms() + 1000, &err) <= 0)
			break;
		(void)box_ipc_split(payload.data, payload.len, fields, 64);
		(void)box_ipc_split(payload.data, payload.len, fields, 2);
	}
	box_buf_release(&payload);
	close(sv[0]);
	close(sv[1]);
	return 0;
}
