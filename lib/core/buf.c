#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "banned.h"

void box_buf_init(struct box_buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max;
}

void box_buf_release(struct box_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

char *box_buf_detach(struct box_buf *b, size_t *len)
{
	char *p = b->data;

	if (!p)
		p = calloc(1, 1);
	if (len)
		*len = b->len;
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	return p;
}

char *box_buf_reserve(struct box_buf *b, size_t n, struct box_err *err)
{
	size_t need, cap;
	char *p;

	if (n > b->max || b->len > b->max - n) {
		box_err_limit(err, BOX_E_LIMIT, "bytes", (int64_t)b->max, "bytes",
			      "buffer limit of %zu bytes exceeded", b->max);
		return NULL;
	}
	need = b->len + n + 1;
	if (need > b->cap) {
		cap = b->cap ? b->cap : 64;
		while (cap < need)
			cap = cap > ((size_t)-1) / 2 ? need : cap * 2;
		p = realloc(b->data, cap);
		if (!p) {
			box_err_set(err, BOX_E_INTERNAL, "out of memory growing a buffer to %zu bytes", cap);
			return NULL;
		}
		b->data = p;
		b->cap = cap;
	}
	return b->data + b->len;
}

int box_buf_append(struct box_buf *b, const void *p, size_t n, struct box_err *err)
{
	char *dst = box_buf_reserve(b, n, err);

	if (!dst)
		return -1;
	if (n)
		memcpy(dst, p, n);
	b->len += n;
	b->data[b->len] = 0;
	return 0;
}

int box_buf_puts(struct box_buf *b, const char *s, struct box_err *err)
{
	return box_buf_append(b, s, strlen(s), err);
}

int box_buf_printf(struct box_buf *b, struct box_err *err, const char *fmt, ...)
{
	va_list ap;
	int n;
	char *dst;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return box_err_set(err, BOX_E_INTERNAL, "bad format");
	dst = box_buf_reserve(b, (size_t)n, err);
	if (!dst)
		return -1;
	va_start(ap, fmt);
	vsnprintf(dst, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

void box_buf_truncate(struct box_buf *b, size_t len)
{
	if (len < b->len) {
		b->len = len;
		b->data[len] = 0;
	}
}

int box_buf_read_fd(struct box_buf *b, int fd, struct box_err *err)
{
	for (;;) {
		size_t room = b->max - b->len;
		size_t want = room < 65536 ? room : 65536;
		char *dst;
		ssize_t r;

		/* one byte past the cap tells "exactly max" from "more than max" */
		if (room == 0) {
			char c;

			r = read(fd, &c, 1);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				return box_err_sys(err, "read");
			if (r == 0)
				return 0;
			return box_err_limit(err, BOX_E_LIMIT, "input_bytes", (int64_t)b->max, "bytes",
					     "input is larger than %zu bytes", b->max);
		}
		dst = box_buf_reserve(b, want, err);
		if (!dst)
			return -1;
		r = read(fd, dst, want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return box_err_sys(err, "read");
		if (r == 0)
			return 0;
		b->len += (size_t)r;
		b->data[b->len] = 0;
	}
}

int box_buf_read_file(struct box_buf *b, int dirfd, const char *path, struct box_err *err)
{
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	int r;

	if (fd < 0)
		return box_err_sys(err, "open %s", path);
	r = box_buf_read_fd(b, fd, err);
	close(fd);
	if (r < 0 && !err->path[0])
		box_err_path(err, path);
	return r;
}

int box_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

int box_fmt(char *out, size_t n, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vsnprintf(out, n, fmt, ap);
	va_end(ap);
	return r < 0 || (size_t)r >= n ? -1 : r;
}
