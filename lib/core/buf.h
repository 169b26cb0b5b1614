/* Size-capped growable byte buffers: the one owner of heap bytes read from the outside. */
#ifndef BOX_BUF_H
#define BOX_BUF_H

#include <stddef.h>
#include "err.h"

/*
 * data is always NUL-terminated (data[len] == 0) once anything was appended, so text can be
 * handed to C string functions; len does not count that NUL. max is the cap on len: an append
 * that would pass it fails with limit_exceeded and leaves the buffer unchanged.
 */
struct box_buf {
	char *data;
	size_t len;
	size_t cap;
	size_t max;
};

#define BOX_BUF_INIT(maxlen) { NULL, 0, 0, (maxlen) }

/* Empties *b with cap on its length; allocates nothing. */
void box_buf_init(struct box_buf *b, size_t max);

/* Frees the contents; *b is empty afterwards with the same cap. */
void box_buf_release(struct box_buf *b);

/* Hands the bytes to the caller (free() them); *b is empty afterwards. Never NULL unless OOM. */
char *box_buf_detach(struct box_buf *b, size_t *len);

/* Appends n bytes. Returns 0, or -1 with limit_exceeded ("limit": what) or internal (OOM). */
int box_buf_append(struct box_buf *b, const void *p, size_t n, struct box_err *err);
int box_buf_puts(struct box_buf *b, const char *s, struct box_err *err);
int box_buf_printf(struct box_buf *b, struct box_err *err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Makes room for n more bytes without changing len; returns data + len or NULL (err set). */
char *box_buf_reserve(struct box_buf *b, size_t n, struct box_err *err);

/* Drops everything from offset len on. */
void box_buf_truncate(struct box_buf *b, size_t len);

/*
 * Reads fd to end of file into b, at most b->max bytes in all. Input that does not fit is an
 * error (limit_exceeded with limit "input_bytes"), never silently cut; EINTR is retried.
 */
int box_buf_read_fd(struct box_buf *b, int fd, struct box_err *err);

/* Reads a whole file (at most b->max bytes) relative to dirfd (AT_FDCWD for the cwd). */
int box_buf_read_file(struct box_buf *b, int dirfd, const char *path, struct box_err *err);

/* Writes all n bytes to fd, retrying short writes and EINTR; -1 with errno on failure. */
int box_write_all(int fd, const void *p, size_t n);

/* snprintf into a fixed buffer (paths, mostly): returns the length, or -1 when out was too
 * small (out then holds the cut text). */
int box_fmt(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
