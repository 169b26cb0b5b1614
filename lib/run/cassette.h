/* A cassette: the host calls of one box-run, recorded as JSON lines, replayed in order.
 *
 * The file is one JSON object a line:
 *   {"cassette": 1, "box_version": V, "request": {...}, "seed": N, "tools"?: [...], ...}
 *   (tools: [{"name", "refused"?, "artifact"?, "digest"?}], present when the run had tools)
 *   {"call": "fs.read", "args": [B64...], "reply": "ok"|"err", "answer": [B64...]}
 *   {"call": ..., "args": [...], "abort": ERROR}   (the run ended in this call)
 *   ...
 *   {"end": true, "calls": N}
 * args and answer are the fields of the frames (lib/core/ipc.h) in base64, since a file read or an
 * http body may be any bytes. A file without its last line is truncated, and refused.
 */
#ifndef BOX_CASSETTE_H
#define BOX_CASSETTE_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "buf.h"
#include "err.h"
#include "ipc.h"

#define BOX_CASSETTE_MAX_BYTES (256LL * 1024 * 1024)
#define BOX_CASSETTE_MAX_CALLS 1000000

struct box_cassette {
	cJSON *head;          /* owned: the first line */
	struct box_buf lines; /* recording: the call lines so far */
	cJSON **calls;        /* replay: owned, one per call line */
	size_t ncalls, next;
	struct box_buf field[BOX_IPC_MAX_FIELDS]; /* replay: the decoded answer of the last call */
};

/* Zeroes c for recording: at most max bytes in all (lines past it fail with limit_exceeded). */
void box_cassette_init(struct box_cassette *c, size_t max);

void box_cassette_release(struct box_cassette *c);

/* "fs.read", "http", "tool", "clock", ... for an op of lib/run/vm.h; "?" for an unknown one. */
const char *box_cassette_op_name(uint8_t op);

/* Records one call: its op and fields, the answer's op (BOX_OP_OK or BOX_OP_ERR) and fields.
 * Returns 0, or -1 with limit_exceeded (limit "cassette_bytes") or internal. */
int box_cassette_add(struct box_cassette *c, uint8_t op, const struct box_ipc_field *in, int nin,
		     uint8_t rop, const struct box_ipc_field *out, int nout, struct box_err *err);

/* Records that the run ended in a call with e (a timeout, a store that changed). */
int box_cassette_abort(struct box_cassette *c, uint8_t op, const struct box_ipc_field *in,
		       int nin, const struct box_err *e, struct box_err *err);

/* Writes head (borrowed), the calls and the end line to path atomically (temp file, fsync,
 * rename). Returns 0, or -1 with limit_exceeded, io_error or internal. */
int box_cassette_write(struct box_cassette *c, const cJSON *head, const char *path,
		       struct box_err *err);

/* Reads path (at most BOX_CASSETTE_MAX_BYTES) into c. Returns 0, or -1 with not_found,
 * io_error, limit_exceeded (too large, too many calls) or invalid_request (a line that does
 * not parse or has a member of the wrong type, a truncated file: the message gives the
 * line). c->head is then the head line. */
int box_cassette_load(struct box_cassette *c, const char *path, struct box_err *err);

/*
 * Answers the next call from the recording: the script's call (op, fields) must be the
 * recorded one (for a clock reading, only its kind). Fills *rop and out[] (fields of
 * c->field, valid until the next call) and returns their count; or returns -1 with
 * replay_diverged (message: the call's number, what the script called, what the recording
 * has), or with the recorded error of a call the run ended in (*aborted set to 1).
 */
int box_cassette_next(struct box_cassette *c, uint8_t op, const struct box_ipc_field *in, int nin,
		      uint8_t *rop, struct box_ipc_field *out, int *aborted, struct box_err *err);

/*
 * box_cassette_next for the VM child of a replay, which answers calls without a round trip to
 * the broker: only a call that is the recorded one and was answered (not the call the run
 * ended in) with at most maxout fields. Returns their count, with *rop and out[] as
 * box_cassette_next fills them; or -1 with nothing consumed, for the broker's
 * box_cassette_next to answer or to tell what differs.
 */
int box_cassette_try(struct box_cassette *c, uint8_t op, const struct box_ipc_field *in, int nin,
		     uint8_t *rop, struct box_ipc_field *out, int maxout);

/* For the trace and the messages: {"call": NAME, and "path", "tool", "url"... as they apply}.
 * Returns a new object or NULL on OOM. */
cJSON *box_cassette_describe(uint8_t op, const struct box_ipc_field *in, int nin);

#endif
