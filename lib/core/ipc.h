/* Framed messages between box-run's broker and its VM child over a stream socket.
 * A frame is a 4-byte little-endian length, a 1-byte op and a payload of fields, each field a
 * 4-byte little-endian length and its bytes. Both ends treat the other as hostile: lengths are
 * capped and every read of the broker is bounded by a deadline. */
#ifndef BOX_IPC_H
#define BOX_IPC_H

#include <stddef.h>
#include <stdint.h>
#include "buf.h"
#include "clock.h"

#define BOX_IPC_MAX_FIELDS 8

struct box_ipc_field {
	const void *p;
	size_t n;
};

/*
 * Sends one frame with op and the fields. deadline_ms is a CLOCK_MONOTONIC time in ms after
 * which a blocked send fails with timeout; -1 waits for ever (the VM child, which is killed
 * if it hangs). Returns 0 or -1 (io_error when the peer is gone).
 */
int box_ipc_send(int fd, uint8_t op, const struct box_ipc_field *fields, int nfields,
		 int64_t deadline_ms, struct box_err *err);

/* Read-ahead of one receiving end: a small frame (a header and a short payload) then comes in
 * with a single system call. Start with BOX_IPC_IN_INIT; one per connection. */
struct box_ipc_in {
	size_t off, len;
	char buf[4096];
};
#define BOX_IPC_IN_INIT { 0, 0, { 0 } }

/*
 * Receives one frame: *op and its payload into payload (payload->max caps the size: a larger
 * frame is limit_exceeded and the connection is unusable). Returns 1, 0 at a clean end of
 * stream before any byte, or -1 (timeout past deadline_ms, io_error on a short frame).
 */
int box_ipc_recv(int fd, struct box_ipc_in *in, uint8_t *op, struct box_buf *payload,
		 int64_t deadline_ms, struct box_err *err);

/* Splits a payload into at most max fields; returns the count, or -1 if malformed. */
int box_ipc_split(const char *p, size_t n, struct box_ipc_field *fields, int max);

/* A listening unix stream socket bound at path (mode 0600; an old socket there is replaced,
 * anything else is conflict). Returns the fd (close-on-exec) or -1 with err. */
int box_ipc_listen(const char *path, struct box_err *err);

/* A unix stream socket connected to path; -1 with io_error when nobody listens there. */
int box_ipc_connect(const char *path, struct box_err *err);

/* The same, but a server whose backlog is full is tried again only until deadline_ms (a
 * CLOCK_MONOTONIC time in ms; -1: box_ipc_connect). The socket comes back blocking.
 *
 * Both, and box_ipc_listen, take paths longer than a unix address holds (108 bytes): the
 * socket is then reached through its directory, opened O_PATH, as /proc/self/fd/N/NAME. */
int box_ipc_connect_by(const char *path, int64_t deadline_ms, struct box_err *err);

/* Sends n (at most 8) file descriptors with one byte. 0 or -1 with io_error. */
int box_ipc_send_fds(int sock, const int *fds, int n, struct box_err *err);

/* Receives exactly n descriptors sent by box_ipc_send_fds before deadline_ms (close-on-exec);
 * anything else (fewer, more, none) closes what came and fails. 0 or -1 with err. */
int box_ipc_recv_fds(int sock, int *fds, int n, int64_t deadline_ms, struct box_err *err);


#endif
