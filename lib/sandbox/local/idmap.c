#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "idmap.h"
#include "banned.h"

/* A decimal field of [p, p+n): digits only, no leading zero but "0", at most 2^32 - 1. */
static int parse_u32(const char *p, size_t n, uint32_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (n == 0 || n > 10 || (n > 1 && p[0] == '0'))
		return -1;
	for (i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	if (v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* Whether the owner field [p, p+n) names the user name or id. */
static int owner_is(const char *p, size_t n, const char *name, uint32_t id)
{
	uint32_t v;

	if (name && strlen(name) == n && memcmp(p, name, n) == 0)
		return 1;
	return parse_u32(p, n, &v) == 0 && v == id;
}

static int bad_line(struct box_err *err, size_t line, const char *why)
{
	return box_err_set(err, BOX_E_INVALID, "line %zu: %s", line, why);
}

int box_idmap_parse(const char *text, size_t len, const char *name, uint32_t id, uint32_t want,
		    uint32_t *start, struct box_err *err)
{
	const char *p = text, *end = text + len;
	size_t line = 0;
	uint32_t first = 0;
	int found = 0;

	if (memchr(text, 0, len))
		return box_err_set(err, BOX_E_INVALID, "a NUL byte in the file");
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end, *c1, *c2;
		uint32_t s, n;

		line++;
		if (eol == p) {
			p = eol + 1;
			continue;
		}
		c1 = memchr(p, ':', (size_t)(eol - p));
		c2 = c1 ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;
		if (!c2 || memchr(c2 + 1, ':', (size_t)(eol - c2 - 1)))
			return bad_line(err, line, "not exactly three ':'-separated fields");
		if (c1 == p)
			return bad_line(err, line, "an empty owner");
		for (const char *q = p; q < c1; q++)
			if ((unsigned char)*q <= ' ' || *q == 0x7f)
				return bad_line(err, line, "a space or control byte in the owner");
		if (parse_u32(c1 + 1, (size_t)(c2 - c1 - 1), &s) < 0 ||
		    parse_u32(c2 + 1, (size_t)(eol - c2 - 1), &n) < 0)
			return bad_line(err, line, "start and count must be decimal numbers below 2^32");
		if (s == 0)
			return bad_line(err, line, "a range starting at id 0");
		if (n == 0)
			return bad_line(err, line, "an empty range");
		if ((uint64_t)s + n > UINT32_MAX)
			return bad_line(err, line, "the range runs past the largest id");
		if (!found && n >= want && owner_is(p, (size_t)(c1 - p), name, id)) {
			first = s;
			found = 1;
		}
		p = eol + 1;
	}
	if (found)
		*start = first;
	return found;
}

int box_idmap_read(const char *path, const char *name, uint32_t id, uint32_t want,
		   uint32_t *start, struct box_err *err)
{
	static char buf[BOX_IDMAP_FILE_MAX + 1];
	struct stat st;
	size_t got = 0;
	int fd, r;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0 && errno == ELOOP)
		return box_err_set(err, BOX_E_INVALID, "%s is a symlink", path);
	if (fd < 0)
		return box_err_sys(err, "cannot open %s", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > (off_t)BOX_IDMAP_FILE_MAX) {
		close(fd);
		return box_err_set(err, BOX_E_INVALID, "%s is not a regular file of at most %zu "
				   "bytes", path, BOX_IDMAP_FILE_MAX);
	}
	for (;;) {
		ssize_t n = read(fd, buf + got, sizeof(buf) - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			close(fd);
			return box_err_sys(err, "cannot read %s", path);
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (got > BOX_IDMAP_FILE_MAX) {
			close(fd);
			return box_err_set(err, BOX_E_INVALID, "%s is larger than %zu bytes", path,
					   BOX_IDMAP_FILE_MAX);
		}
	}
	close(fd);
	r = box_idmap_parse(buf, got, name, id, want, start, err);
	if (r < 0) {
		char msg[sizeof(err->message)];

		snprintf(msg, sizeof(msg), "%s", err->message);
		box_err_set(err, BOX_E_INVALID, "%s: %s", path, msg);
	}
	return r;
}

int box_idmap_for_guest(struct box_idmap *m, const char *subuid, const char *subgid,
			struct box_err *err)
{
	int r;

	if (geteuid() != 0) {
		m->uid = (uint32_t)getuid();
		m->gid = (uint32_t)getgid();
		m->count = 1;
		return 0;
	}
	m->uid = m->gid = BOX_IDMAP_DEFAULT_START;
	m->count = BOX_IDMAP_COUNT;
	r = box_idmap_read(subuid ? subuid : "/etc/subuid", "root", 0, BOX_IDMAP_COUNT, &m->uid,
			   err);
	if (r >= 0)
		r = box_idmap_read(subgid ? subgid : "/etc/subgid", "root", 0, BOX_IDMAP_COUNT,
				   &m->gid, err);
	return r < 0 ? -1 : 0;
}

int box_idmap_line(const struct box_idmap *m, int gid, char *out, size_t n)
{
	int k = snprintf(out, n, "0 %u %u\n", gid ? m->gid : m->uid, m->count);

	return k < 0 || (size_t)k >= n ? -1 : k;
}
