#include <fcntl.h>
#include <unistd.h>
#include "buf.h"
#include "tap.h"

static int pipe_with(const char *data, size_t n)
{
	int p[2];

	if (pipe(p) < 0)
		return -1;
	if (write(p[1], data, n) != (ssize_t)n)
		return -1;
	close(p[1]);
	return p[0];
}

int main(void)
{
	struct box_buf b = BOX_BUF_INIT(8);
	struct box_err e;
	char *d;
	size_t n;
	int fd;

	is_int(box_buf_append(&b, "abcd", 4, &e), 0, "append within cap");
	is_int(box_buf_append(&b, "efgh", 4, &e), 0, "append up to the cap exactly");
	is_int(box_buf_append(&b, "i", 1, &e), -1, "one byte past the cap fails");
	is_int(e.code, BOX_E_LIMIT, "with limit_exceeded");
	is_int(b.len, 8, "and leaves the buffer unchanged");
	is_str(b.data, "abcdefgh", "NUL-terminated contents");
	box_buf_truncate(&b, 2);
	is_str(b.data, "ab", "truncate");
	d = box_buf_detach(&b, &n);
	is_str(d, "ab", "detach hands the bytes over");
	is_int(n, 2, "with their length");
	ok(b.data == NULL && b.len == 0, "buffer empty after detach");
	free(d);

	box_buf_init(&b, 100);
	is_int(box_buf_printf(&b, &e, "%d-%s", 7, "x"), 0, "printf");
	is_str(b.data, "7-x", "printf output");
	box_buf_release(&b);

	box_buf_init(&b, 5);
	fd = pipe_with("12345", 5);
	is_int(box_buf_read_fd(&b, fd, &e), 0, "read exactly max bytes");
	is_int(b.len, 5, "all five");
	close(fd);
	box_buf_release(&b);

	box_buf_init(&b, 5);
	fd = pipe_with("123456", 6);
	is_int(box_buf_read_fd(&b, fd, &e), -1, "input past the cap is an error, not cut");
	is_int(e.code, BOX_E_LIMIT, "limit_exceeded");
	is_str(e.limit, "input_bytes", "limit input_bytes");
	close(fd);
	box_buf_release(&b);

	box_buf_init(&b, 1 << 20);
	fd = open("/dev/null", O_RDONLY);
	is_int(box_buf_read_fd(&b, fd, &e), 0, "empty input");
	is_int(b.len, 0, "zero bytes");
	close(fd);
	is_int(box_buf_read_file(&b, AT_FDCWD, "/nonexistent/x", &e), -1, "missing file");
	is_int(e.code, BOX_E_NOT_FOUND, "not_found");
	box_buf_release(&b);

	{
		char out[8];

		is_int(box_fmt(out, sizeof(out), "%s-%d", "ab", 5), 4, "box_fmt: length when it fits");
		is_str(out, "ab-5", "... the text");
		is_int(box_fmt(out, sizeof(out), "%s", "abcdefg"), 7, "exactly n-1 bytes fit");
		is_str(out, "abcdefg", "... the text");
		memset(out, 'x', sizeof(out));
		is_int(box_fmt(out, sizeof(out), "%s", "abcdefgh"), -1, "one byte too long");
		is_str(out, "abcdefg", "... cut and NUL-terminated");
		is_int(box_fmt(out, sizeof(out), "%s%s", "abcdefgh", "ijk"), -1, "far too long");
		is_str(out, "abcdefg", "... cut and NUL-terminated");
		is_int(box_fmt(out, sizeof(out), "%s", ""), 0, "empty text");
		is_str(out, "", "... empty");
		memset(out, 'x', sizeof(out));
		is_int(box_fmt(out, 0, "%s", ""), -1, "no room at all");
		is_int(out[0], 'x', "... and nothing written");
	}
	return done_testing();
}
