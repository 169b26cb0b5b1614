/* The subordinate-id files box-sandbox maps a root-run guest to: strict parsing of the text
 * (every malformed line refuses the whole file), strict reading of the file (no symlink,
 * regular, at most 1 MiB) and the map chosen for the guest. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "idmap.h"
#include "tap.h"

static char dir[] = "/tmp/t-idmap.XXXXXX";

/* box_idmap_parse of text for root (name "root", id 0) wanting 65536 ids. */
static int parse(const char *text, uint32_t *start, struct box_err *err)
{
	box_err_init(err);
	*start = 0;
	return box_idmap_parse(text, strlen(text), "root", 0, BOX_IDMAP_COUNT, start, err);
}

static void test_good(void)
{
	struct box_err e;
	uint32_t s;

	is_int(parse("root:100000:65536\n", &s, &e), 1, "a root range");
	is_int(s, 100000, "its start");
	is_int(parse("0:200000:65536", &s, &e), 1, "root by uid, no final newline");
	is_int(s, 200000, "its start");
	is_int(parse("alice:100000:65536\nroot:165536:65536\n", &s, &e), 1, "after another user");
	is_int(s, 165536, "root's, not alice's");
	is_int(parse("root:100000:1000\nroot:300000:70000\nroot:500000:65536\n", &s, &e), 1,
	       "several ranges of root");
	is_int(s, 300000, "the first that holds 65536 ids");
	is_int(parse("\nroot:100000:65536\n\n", &s, &e), 1, "blank lines");
	is_int(parse("alice:100000:65536\n", &s, &e), 0, "no range of root");
	is_int(parse("root:100000:65535\n", &s, &e), 0, "root's range too small: none");
	is_int(parse("rootx:100000:65536\nroo:1:65536\n00:1:65536\n", &s, &e), 0,
	       "names that only look like root");
	is_int(parse("", &s, &e), 0, "an empty file");
	is_int(parse("root:4294901759:65536\n", &s, &e), 1, "a range ending at 2^32 - 2");
	is_int(s, 4294901759u, "its start");
}

static void test_bad(void)
{
	static const char *const bad[] = {
		"root:100000\n", "root:100000:65536:x\n", "root\n", ":100000:65536\n",
		"root::65536\n", "root:100000:\n", "root:-1:65536\n", "root:+100000:65536\n",
		"root: 100000:65536\n", "root:100000 :65536\n", "root:100000:65536 \n",
		"root:100000:65536\r\n", "root:0x10:65536\n", "root:0100000:65536\n",
		"root:0:65536\n", "root:100000:0\n", "root:4294967296:65536\n",
		"root:100000:4294967296\n", "root:99999999999:1\n", "root:4294901760:65536\n",
		"root:4294967295:1\n", "alice:0:65536\nroot:100000:65536\n",
		"root:100000:65536\nalice:1:x\n", "# a comment\nroot:100000:65536\n",
		" root:100000:65536\n", "ro\tot:100000:65536\n",
	};
	struct box_err e;
	uint32_t s;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = parse(bad[i], &s, &e);

		ok(r == -1 && e.code == BOX_E_INVALID && strstr(e.message, "line "),
		   "refused: %.*s (%s)", (int)strcspn(bad[i], "\n"), bad[i], e.message);
		is_int(s, 0, "nothing taken from it");
	}
	box_err_init(&e);
	is_int(box_idmap_parse("root:1:65536\0x\n", 15, "root", 0, 65536, &s, &e), -1,
	       "a NUL byte");
}

static void write_file(const char *path, const char *text, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0 || write(fd, text, len) != (ssize_t)len)
		abort();
	close(fd);
}

static void test_read(void)
{
	char p[256], l[256], big[256], fifo[256];
	struct box_err e;
	uint32_t s = 0;
	char *buf;

	snprintf(p, sizeof(p), "%s/subuid", dir);
	write_file(p, "root:300000:65536\n", 18);
	box_err_init(&e);
	is_int(box_idmap_read(p, "root", 0, 65536, &s, &e), 1, "a file read");
	is_int(s, 300000, "its start");
	snprintf(l, sizeof(l), "%s/link", dir);
	if (symlink(p, l) < 0)
		abort();
	box_err_init(&e);
	ok(box_idmap_read(l, "root", 0, 65536, &s, &e) == -1 && e.code == BOX_E_INVALID &&
	   strstr(e.message, "symlink"), "a symlink is refused: %s", e.message);
	box_err_init(&e);
	ok(box_idmap_read(dir, "root", 0, 65536, &s, &e) == -1 && e.code == BOX_E_INVALID,
	   "a directory is refused: %s", e.message);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	if (mkfifo(fifo, 0644) < 0)
		abort();
	box_err_init(&e);
	ok(box_idmap_read(fifo, "root", 0, 65536, &s, &e) == -1 && e.code == BOX_E_INVALID,
	   "a FIFO is refused without blocking: %s", e.message);
	snprintf(big, sizeof(big), "%s/big", dir);
	buf = malloc(BOX_IDMAP_FILE_MAX + 1);
	if (!buf)
		abort();
	memset(buf, '\n', BOX_IDMAP_FILE_MAX + 1);
	memcpy(buf, "root:400000:65536\n", 18);
	write_file(big, buf, BOX_IDMAP_FILE_MAX);
	box_err_init(&e);
	is_int(box_idmap_read(big, "root", 0, 65536, &s, &e), 1, "exactly 1 MiB is read");
	is_int(s, 400000, "its start");
	write_file(big, buf, BOX_IDMAP_FILE_MAX + 1);
	box_err_init(&e);
	ok(box_idmap_read(big, "root", 0, 65536, &s, &e) == -1 && e.code == BOX_E_INVALID,
	   "one byte more is refused: %s", e.message);
	free(buf);
	write_file(p, "root:300000:65536\nbob:1\n", 24);
	box_err_init(&e);
	ok(box_idmap_read(p, "root", 0, 65536, &s, &e) == -1 && strstr(e.message, p) &&
	   strstr(e.message, "line 2"), "a bad line names the file and the line: %s", e.message);
	snprintf(p, sizeof(p), "%s/absent", dir);
	box_err_init(&e);
	is_int(box_idmap_read(p, "root", 0, 65536, &s, &e), 0, "an absent file: no range");
}

static void test_for_guest(void)
{
	char su[256], sg[256], none[256];
	struct box_idmap m;
	struct box_err e;
	char line[64];

	snprintf(su, sizeof(su), "%s/su", dir);
	snprintf(sg, sizeof(sg), "%s/sg", dir);
	snprintf(none, sizeof(none), "%s/none", dir);
	write_file(su, "root:500000:65536\n", 18);
	write_file(sg, "root:600000:65536\n", 18);
	box_err_init(&e);
	if (geteuid() != 0) {
		is_int(box_idmap_for_guest(&m, su, sg, &e), 0, "an ordinary user's map");
		ok(m.uid == getuid() && m.gid == getgid() && m.count == 1, "its own ids, one each");
		return;
	}
	is_int(box_idmap_for_guest(&m, su, sg, &e), 0, "root's map from the files");
	ok(m.uid == 500000 && m.gid == 600000 && m.count == 65536, "subuid and subgid ranges");
	is_int(box_idmap_line(&m, 0, line, sizeof(line)), 15, "uid_map line");
	is_str(line, "0 500000 65536\n", "uid_map text");
	box_idmap_line(&m, 1, line, sizeof(line));
	is_str(line, "0 600000 65536\n", "gid_map text");
	is_int(box_idmap_line(&m, 0, line, 8), -1, "a buffer too small");
	is_int(box_idmap_for_guest(&m, none, sg, &e), 0, "no subuid file");
	ok(m.uid == BOX_IDMAP_DEFAULT_START && m.gid == 600000, "default uid range, subgid's gid");
	write_file(sg, "root:0:65536\n", 13);
	ok(box_idmap_for_guest(&m, su, sg, &e) == -1 && e.code == BOX_E_INVALID,
	   "a bad subgid refuses the map: %s", e.message);
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	test_good();
	test_bad();
	test_read();
	test_for_guest();
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			return 1;
	}
	return done_testing();
}
