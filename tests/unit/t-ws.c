#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "confine.h"
#include "ws.h"
#include "tap.h"
#include "banned.h"

static char base[64], wsdir[128], outside[128], outdir[128];

static void bail(const char *what)
{
	printf("Bail out! %s: %s\n", what, strerror(errno));
	exit(1);
}

static void host_write(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		bail(path);
	close(fd);
}

/* Content of a host file ("" if absent). */
static const char *host_read(const char *path)
{
	static char buf[256];
	int fd = open(path, O_RDONLY);
	ssize_t r = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : 0;

	if (fd >= 0)
		close(fd);
	buf[r > 0 ? r : 0] = 0;
	return buf;
}

static const char *in_ws(const char *rel)
{
	static char p[256];

	snprintf(p, sizeof(p), "%s/%s", wsdir, rel);
	return p;
}

static int host_exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static void host_symlink(const char *target, const char *rel)
{
	if (symlink(target, in_ws(rel)) < 0)
		bail("symlink");
}

static void code_is(const struct box_err *err, enum box_code code, const char *what)
{
	is_str(box_err_code_name(err->code), box_err_code_name(code), "  %s: %s (%s)", what,
	       box_err_code_name(code), err->message);
}

/* Reads path through ws into a fresh buffer; returns its text or NULL (err set). */
static char *ws_read(struct box_ws *ws, const char *path, size_t max, size_t *len,
		     struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(max);

	box_err_init(err);
	if (box_ws_read(ws, path, &b, err) < 0) {
		box_buf_release(&b);
		return NULL;
	}
	return box_buf_detach(&b, len);
}

static void read_is(struct box_ws *ws, const char *path, const char *want)
{
	struct box_err err;
	char *s = ws_read(ws, path, 1024, NULL, &err);

	is_str(s, want, "read '%s' is '%s'", path, want);
	if (!s)
		printf("# %s\n", err.message);
	free(s);
}

static void read_fails(struct box_ws *ws, const char *path, enum box_code code)
{
	struct box_err err;
	char *s = ws_read(ws, path, 1024, NULL, &err);

	ok(s == NULL, "read '%s' fails", path);
	code_is(&err, code, "read");
	free(s);
}

static void write_fails(struct box_ws *ws, const char *path, int append, enum box_code code)
{
	struct box_err err;

	box_err_init(&err);
	is_int(box_ws_write(ws, path, "EVIL", 4, append, &err), -1, "%s '%s' fails",
	       append ? "append" : "write", path);
	code_is(&err, code, append ? "append" : "write");
}

static void setup(void)
{
	snprintf(base, sizeof(base), "/tmp/box-t-ws-XXXXXX");
	if (!mkdtemp(base))
		bail("mkdtemp");
	snprintf(wsdir, sizeof(wsdir), "%s/ws", base);
	snprintf(outside, sizeof(outside), "%s/outside.txt", base);
	snprintf(outdir, sizeof(outdir), "%s/outdir", base);
	if (mkdir(wsdir, 0755) < 0 || mkdir(outdir, 0755) < 0)
		bail("mkdir");
	host_write(outside, "OUTSIDE");
}

static void test_open(void)
{
	struct box_ws ws;
	struct box_err err;
	char p[512];

	box_err_init(&err);
	snprintf(p, sizeof(p), "%s/missing", base);
	is_int(box_ws_open(&ws, p, 10, &err), -1, "open a missing workspace");
	code_is(&err, BOX_E_NOT_FOUND, "open");
	is_int(ws.rootfd, -1, "  rootfd -1");
	box_ws_release(&ws);
	is_int(box_ws_open(&ws, outside, 10, &err), -1, "open a file as workspace");
	box_ws_release(&ws);
}

static void test_read_write(struct box_ws *ws)
{
	static const char bin[] = { 'a', 0, 'b', 0, (char)0xff };
	struct box_err err;
	char *s;
	size_t len = 0;

	box_err_init(&err);
	is_int(box_ws_write(ws, "a.txt", "hello", 5, 0, &err), 0, "write a.txt");
	is_str(host_read(in_ws("a.txt")), "hello", "  lands in the workspace");
	read_is(ws, "a.txt", "hello");
	read_is(ws, "/a.txt", "hello");
	read_is(ws, "/workspace/a.txt", "hello");
	read_is(ws, "./x/../a.txt", "hello");
	is_int(ws->written, 5, "  written counts 5");

	is_int(box_ws_write(ws, "bin", bin, sizeof(bin), 0, &err), 0, "write binary data");
	s = ws_read(ws, "bin", 1024, &len, &err);
	ok(s && len == sizeof(bin) && memcmp(s, bin, len) == 0, "  read back byte for byte");
	free(s);

	is_int(box_ws_write(ws, "deep/er/file.txt", "d", 1, 0, &err), 0, "write creates parents");
	is_str(host_read(in_ws("deep/er/file.txt")), "d", "  file there");
	is_int(box_ws_write(ws, "a.txt", "bye", 3, 0, &err), 0, "replace a.txt");
	read_is(ws, "a.txt", "bye");

	is_int(box_ws_write(ws, "log", "a", 1, 1, &err), 0, "append creates");
	is_int(box_ws_write(ws, "log", "b\0c", 3, 1, &err), 0, "append adds");
	s = ws_read(ws, "log", 1024, &len, &err);
	ok(s && len == 4 && memcmp(s, "ab\0c", 4) == 0, "  log is \"ab\\0c\"");
	free(s);

	/* caps and kinds of file */
	s = ws_read(ws, "a.txt", 2, NULL, &err);
	ok(!s, "read past out->max fails");
	code_is(&err, BOX_E_LIMIT, "read");
	is_str(err.limit, "read_bytes", "  limit read_bytes");
	is_int(err.configured, 2, "  configured 2");
	s = ws_read(ws, "a.txt", 3, NULL, &err);
	is_str(s, "bye", "read of exactly out->max bytes");
	free(s);
	{
		struct box_buf b = BOX_BUF_INIT(6);

		box_buf_puts(&b, "pre", &err);
		is_int(box_ws_read(ws, "a.txt", &b, &err), 0, "read appends to out");
		is_str(b.data, "prebye", "  'prebye'");
		is_int(box_ws_read(ws, "a.txt", &b, &err), -1, "  no room left: fails");
		is_str(b.data, "prebye", "  out unchanged");
		box_buf_release(&b);
	}
	read_fails(ws, "deep", BOX_E_INVALID);
	read_fails(ws, "missing", BOX_E_NOT_FOUND);
	s = ws_read(ws, "/workspace/./missing", 1024, NULL, &err);
	is_str(err.path, "/missing", "  error path is the normalised guest path");
	free(s);
	if (mkfifo(in_ws("fifo"), 0644) < 0)
		bail("mkfifo");
	read_fails(ws, "fifo", BOX_E_POLICY);
	write_fails(ws, "fifo", 1, BOX_E_POLICY);

	/* the root and names that normalise to it */
	write_fails(ws, "/", 0, BOX_E_POLICY);
	write_fails(ws, ".", 0, BOX_E_POLICY);
	write_fails(ws, "x/..", 1, BOX_E_POLICY);
	write_fails(ws, "/workspace", 0, BOX_E_POLICY);
	write_fails(ws, "", 0, BOX_E_INVALID);
	write_fails(ws, "deep", 0, BOX_E_IO);
	ok(host_exists(in_ws("deep/er/file.txt")), "  the directory is intact");
}

static void test_escapes(struct box_ws *ws)
{
	struct box_err err;
	char p[512];

	read_fails(ws, "../outside.txt", BOX_E_POLICY);
	read_fails(ws, "/../outside.txt", BOX_E_POLICY);
	write_fails(ws, "../escaped", 0, BOX_E_POLICY);
	snprintf(p, sizeof(p), "%s/escaped", base);
	ok(!host_exists(p), "  nothing written next to the workspace");

	/* absolute paths are the workspace's */
	read_fails(ws, "/etc/passwd", BOX_E_NOT_FOUND);
	box_err_init(&err);
	is_int(box_ws_write(ws, "/etc/passwd", "WSPASSWD", 8, 0, &err), 0, "write /etc/passwd");
	is_str(host_read(in_ws("etc/passwd")), "WSPASSWD", "  it is the workspace's etc/passwd");
	ok(strcmp(host_read("/etc/passwd"), "WSPASSWD") != 0, "  the host's is untouched");

	/* symlinks pointing at host files resolve inside the workspace */
	host_symlink(outside, "hostlink");
	host_symlink("../outside.txt", "hostrel");
	host_symlink("/etc/passwd", "abslink");
	host_symlink("a.txt", "inlink");
	read_fails(ws, "hostlink", BOX_E_NOT_FOUND);
	read_fails(ws, "hostrel", BOX_E_NOT_FOUND);
	read_is(ws, "abslink", "WSPASSWD");
	read_is(ws, "inlink", "bye");
	/* an append, like a write, replaces the name: the symlink becomes a file, nothing else
	 * is written */
	is_int(box_ws_write(ws, "hostlink", "EVIL", 4, 1, &err), 0, "append over a symlink");
	is_str(host_read(outside), "OUTSIDE", "  append over a symlink: host file untouched");
	is_str(host_read(in_ws("hostlink")), "EVIL", "  the symlink was replaced by a file");
	if (unlink(in_ws("hostlink")) < 0)
		bail("unlink");
	host_symlink(outside, "hostlink");
	is_int(box_ws_write(ws, "hostrel", "NEW", 3, 0, &err), 0, "write over a symlink");
	is_str(host_read(outside), "OUTSIDE", "  host file untouched");
	ok(host_exists(in_ws("hostrel")) && strcmp(host_read(in_ws("hostrel")), "NEW") == 0,
	   "  the symlink was replaced by a file");

	/* a hard link to a file outside */
	snprintf(p, sizeof(p), "%s", in_ws("hard"));
	if (link(outside, p) < 0)
		bail("link");
	read_fails(ws, "hard", BOX_E_POLICY);
	{
		struct box_err e2;
		char *s = ws_read(ws, "hard", 1024, NULL, &e2);

		ok(!s && strstr(e2.message, "hard-linked file"), "  message says hard-linked file");
		free(s);
	}
	write_fails(ws, "hard", 1, BOX_E_POLICY);
	is_str(host_read(outside), "OUTSIDE", "  append refused: host file untouched");
	is_int(box_ws_write(ws, "hard", "REPLACED", 8, 0, &err), 0, "write replaces the hard link");
	is_str(host_read(outside), "OUTSIDE", "  host file untouched");
	read_is(ws, "hard", "REPLACED");

	/* a directory swapped for a symlink between two calls */
	is_int(box_ws_write(ws, "sw/f", "one", 3, 0, &err), 0, "write sw/f");
	snprintf(p, sizeof(p), "%s", in_ws("sw.old"));
	if (rename(in_ws("sw"), p) < 0)
		bail("rename");
	host_symlink(outdir, "sw");
	write_fails(ws, "sw/f", 0, BOX_E_NOT_FOUND);
	write_fails(ws, "sw/f", 1, BOX_E_NOT_FOUND);
	read_fails(ws, "sw/f", BOX_E_NOT_FOUND);
	write_fails(ws, "sw/new/deeper", 0, BOX_E_NOT_FOUND);
	snprintf(p, sizeof(p), "%s/f", outdir);
	ok(!host_exists(p), "  nothing written in the host directory");
	snprintf(p, sizeof(p), "%s/new", outdir);
	ok(!host_exists(p), "  no directory made in the host directory");
	unlink(in_ws("sw"));
	host_symlink("../../../../../..", "sw");
	is_int(box_ws_write(ws, "sw/f", "two", 3, 0, &err), 0,
	       "a symlink to ../../.. is the workspace root");
	is_str(host_read(in_ws("f")), "two", "  written at the root");

	/* /proc magic links are not reachable either */
	host_symlink("/proc/self/root/etc/passwd", "magic");
	read_fails(ws, "magic", BOX_E_NOT_FOUND);
}

static void test_quota(void)
{
	struct box_ws ws;
	struct box_err err;

	box_err_init(&err);
	if (box_ws_open(&ws, wsdir, 10, &err) < 0)
		bail("box_ws_open");
	is_int(box_ws_write(&ws, "q", "0123", 4, 0, &err), 0, "quota 10: write 4");
	is_int(box_ws_write(&ws, "q", "456789", 6, 1, &err), 0, "  append 6: exactly the quota");
	is_int(ws.written, 10, "  written 10");
	is_int(box_ws_write(&ws, "q", "", 0, 1, &err), 0, "  an empty append is fine");
	is_int(box_ws_write(&ws, "q", "x", 1, 1, &err), -1, "  one byte more fails");
	code_is(&err, BOX_E_LIMIT, "quota");
	is_str(err.limit, "write_bytes", "  limit write_bytes");
	is_int(err.configured, 10, "  configured 10");
	is_str(err.unit, "bytes", "  unit bytes");
	is_int(box_ws_write(&ws, "q", "x", 1, 0, &err), -1, "  a replacing write fails too");
	is_int(box_ws_write(&ws, "other", "x", 1, 0, &err), -1, "  so does a new file");
	is_str(host_read(in_ws("q")), "0123456789", "  file untouched");
	ok(!host_exists(in_ws("other")), "  no new file");
	is_int(ws.written, 10, "  written still 10");
	box_ws_release(&ws);

	if (box_ws_open(&ws, wsdir, 5, &err) < 0)
		bail("box_ws_open");
	is_int(box_ws_write(&ws, "q", "abcdef", 6, 0, &err), -1, "quota 5: write 6 fails");
	is_str(host_read(in_ws("q")), "0123456789", "  file untouched");
	is_int(box_ws_write(&ws, "q", "abcde", 5, 0, &err), 0, "  write 5 is fine");
	is_str(host_read(in_ws("q")), "abcde", "  replaced");
	box_ws_release(&ws);
	box_ws_release(&ws);
	ok(1, "release twice is harmless");
}

static void test_exists_stat(struct box_ws *ws)
{
	struct box_err err;
	cJSON *o;

	box_err_init(&err);
	is_int(box_ws_exists(ws, "a.txt", &err), 1, "exists a.txt");
	is_int(box_ws_exists(ws, "/workspace/deep", &err), 1, "exists /workspace/deep");
	is_int(box_ws_exists(ws, "/", &err), 1, "exists /");
	is_int(box_ws_exists(ws, "nope", &err), 0, "missing: 0");
	is_int(box_ws_exists(ws, "nope/deeper", &err), 0, "missing parent: 0");
	is_int(box_ws_exists(ws, "a.txt/x", &err), 0, "parent is a file: 0");
	is_int(box_ws_exists(ws, "hostlink", &err), 0, "symlink to a host file: 0");
	is_int(box_ws_exists(ws, "../outside.txt", &err), -1, "escape: -1");
	code_is(&err, BOX_E_POLICY, "exists");

	o = box_ws_stat(ws, "/workspace/a.txt", &err);
	ok(o != NULL, "stat a.txt");
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(o, "name")), "a.txt", "  name");
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(o, "path")), "/a.txt", "  path");
	ok(cJSON_IsFalse(cJSON_GetObjectItem(o, "is_dir")), "  is_dir false");
	is_int(cJSON_GetNumberValue(cJSON_GetObjectItem(o, "size")), 3, "  size 3");
	ok(cJSON_GetNumberValue(cJSON_GetObjectItem(o, "mtime")) > 1600000000, "  mtime");
	cJSON_Delete(o);
	o = box_ws_stat(ws, "deep/er", &err);
	ok(o && cJSON_IsTrue(cJSON_GetObjectItem(o, "is_dir")), "stat a directory: is_dir");
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(o, "name")), "er", "  name");
	cJSON_Delete(o);
	o = box_ws_stat(ws, "/", &err);
	is_str(o ? cJSON_GetStringValue(cJSON_GetObjectItem(o, "name")) : NULL, "/", "stat /: name /");
	cJSON_Delete(o);
	o = box_ws_stat(ws, "nope", &err);
	ok(o == NULL, "stat a missing file");
	code_is(&err, BOX_E_NOT_FOUND, "stat");
	is_str(err.path, "/nope", "  path");
	o = box_ws_stat(ws, "hostlink", &err);
	ok(o == NULL, "stat of a symlink to a host file");
	code_is(&err, BOX_E_NOT_FOUND, "stat");
	o = box_ws_stat(ws, "/../etc", &err);
	ok(o == NULL, "stat of an escape");
	code_is(&err, BOX_E_POLICY, "stat");
}

static void test_list(struct box_ws *ws)
{
	struct box_err err;
	cJSON *a, *e;

	box_err_init(&err);
	if (mkdir(in_ws("l"), 0755) < 0 || mkdir(in_ws("l/sub"), 0755) < 0)
		bail("mkdir");
	host_write(in_ws("l/b.txt"), "bb");
	host_write(in_ws("l/a.txt"), "a");
	host_write(in_ws("l/C"), "");
	host_symlink(outdir, "l/zlink");
	a = box_ws_list(ws, "/workspace/l", 10, &err);
	is_int(cJSON_GetArraySize(a), 5, "list l: 5 entries");
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(a, 0), "name")), "C",
	       "  sorted by bytes: C first");
	e = cJSON_GetArrayItem(a, 1);
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(e, "name")), "a.txt", "  then a.txt");
	is_int(cJSON_GetNumberValue(cJSON_GetObjectItem(e, "size")), 1, "  size 1");
	ok(cJSON_IsFalse(cJSON_GetObjectItem(e, "is_dir")), "  not a dir");
	e = cJSON_GetArrayItem(a, 3);
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(e, "name")), "sub", "  sub");
	ok(cJSON_IsTrue(cJSON_GetObjectItem(e, "is_dir")), "  is a dir");
	e = cJSON_GetArrayItem(a, 4);
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(e, "name")), "zlink", "  zlink");
	ok(cJSON_IsFalse(cJSON_GetObjectItem(e, "is_dir")), "  a symlink is not followed");
	cJSON_Delete(a);

	a = box_ws_list(ws, "l", 5, &err);
	ok(a != NULL, "exactly max_entries is fine");
	cJSON_Delete(a);
	a = box_ws_list(ws, "l", 4, &err);
	ok(a == NULL, "one more than max_entries fails");
	code_is(&err, BOX_E_LIMIT, "list");
	is_str(err.limit, "list_entries", "  limit list_entries");
	is_int(err.configured, 4, "  configured 4");
	a = box_ws_list(ws, "l/sub", 5, &err);
	is_int(cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1, 0, "empty directory: []");
	cJSON_Delete(a);
	a = box_ws_list(ws, "l/zlink", 5, &err);
	ok(a == NULL, "list a symlink to a host directory");
	code_is(&err, BOX_E_NOT_FOUND, "list");
	a = box_ws_list(ws, "nope", 5, &err);
	ok(a == NULL, "list a missing directory");
	code_is(&err, BOX_E_NOT_FOUND, "list");
	a = box_ws_list(ws, "l/a.txt", 5, &err);
	ok(a == NULL, "list a file fails");
	a = box_ws_list(ws, "..", 5, &err);
	ok(a == NULL, "list .. fails");
	code_is(&err, BOX_E_POLICY, "list");
}

static void make_chain(const char *top, int levels)
{
	char p[1024];
	size_t n = (size_t)snprintf(p, sizeof(p), "%s", in_ws(top));

	if (mkdir(p, 0755) < 0)
		bail("mkdir chain");
	for (int i = 0; i < levels; i++) {
		n += (size_t)snprintf(p + n, sizeof(p) - n, "/d");
		if (mkdir(p, 0755) < 0)
			bail("mkdir chain");
	}
	snprintf(p + n, sizeof(p) - n, "/leaf");
	host_write(p, "x");
}

static void test_remove_mkdir(struct box_ws *ws)
{
	struct box_err err;
	char p[512];

	box_err_init(&err);
	is_int(box_ws_mkdir(ws, "m/n/o", &err), 0, "mkdir -p m/n/o");
	ok(host_exists(in_ws("m/n/o")), "  made");
	is_int(box_ws_mkdir(ws, "/workspace/m/n", &err), 0, "mkdir of an existing directory");
	is_int(box_ws_mkdir(ws, "/", &err), 0, "mkdir /");
	is_int(box_ws_mkdir(ws, "a.txt/sub", &err), -1, "mkdir under a file fails");
	is_int(err.sys_errno, ENOTDIR, "  ENOTDIR");
	is_int(box_ws_mkdir(ws, "l/zlink/sub", &err), -1, "mkdir through a symlink to a host dir");
	code_is(&err, BOX_E_NOT_FOUND, "mkdir");
	snprintf(p, sizeof(p), "%s/sub", outdir);
	ok(!host_exists(p), "  nothing made on the host");
	is_int(box_ws_mkdir(ws, "../m", &err), -1, "mkdir ../m fails");
	code_is(&err, BOX_E_POLICY, "mkdir");

	is_int(box_ws_remove(ws, "log", 0, &err), 1, "remove a file");
	ok(!host_exists(in_ws("log")), "  gone");
	is_int(box_ws_remove(ws, "log", 0, &err), 0, "remove it again: 0");
	is_int(box_ws_remove(ws, "nope/x", 0, &err), 0, "missing parent: 0");
	is_int(box_ws_remove(ws, "m", 0, &err), -1, "non-empty directory without recursive");
	code_is(&err, BOX_E_CONFLICT, "remove");
	is_int(box_ws_remove(ws, "m/n/o", 0, &err), 1, "remove an empty directory");
	is_int(box_ws_remove(ws, "/", 1, &err), -1, "remove the root");
	code_is(&err, BOX_E_POLICY, "remove");
	is_int(box_ws_remove(ws, "/workspace", 1, &err), -1, "remove /workspace");
	code_is(&err, BOX_E_POLICY, "remove");
	is_int(box_ws_remove(ws, "x/..", 1, &err), -1, "remove x/..");
	code_is(&err, BOX_E_POLICY, "remove");
	is_int(box_ws_remove(ws, "../outside.txt", 0, &err), -1, "remove ../outside.txt");
	code_is(&err, BOX_E_POLICY, "remove");

	/* symlinks are removed, never followed */
	snprintf(p, sizeof(p), "%s/keep", outdir);
	host_write(p, "KEEP");
	is_int(box_ws_remove(ws, "hostlink", 0, &err), 1, "remove a symlink to a host file");
	is_str(host_read(outside), "OUTSIDE", "  the host file is still there");
	if (mkdir(in_ws("tree"), 0755) < 0 || mkdir(in_ws("tree/sub"), 0755) < 0)
		bail("mkdir");
	host_symlink(outdir, "tree/sub/hostdir");
	host_symlink(outdir, "tree/hostdir2");
	host_write(in_ws("tree/sub/f"), "f");
	is_int(box_ws_remove(ws, "tree", 1, &err), 1, "recursive remove of a tree with symlinks");
	ok(!host_exists(in_ws("tree")), "  tree gone");
	is_str(host_read(p), "KEEP", "  the host directory's file is still there");
	host_symlink(outdir, "dirlink");
	is_int(box_ws_remove(ws, "dirlink", 1, &err), 1, "recursive remove of a symlink to a dir");
	is_str(host_read(p), "KEEP", "  only the link went");

	make_chain("chain64", 64);
	is_int(box_ws_remove(ws, "chain64", 1, &err), 1, "recursive remove 64 levels deep");
	/* removal has no depth bound (lib/core/fswalk.c): 300 levels, one of them mode 000 */
	make_chain("chain300", 300);
	if (chmod(in_ws("chain300/d/d"), 0) < 0)
		bail("chmod");
	is_int(box_ws_remove(ws, "chain300", 1, &err), 1, "recursive remove 300 levels deep");
	ok(!host_exists(in_ws("chain300")), "  gone, a mode 000 directory included");
}

static void test_walk(struct box_ws *ws)
{
	struct box_err err;
	cJSON *a;
	char *s;

	box_err_init(&err);
	if (mkdir(in_ws("w"), 0755) < 0 || mkdir(in_ws("w/b"), 0755) < 0 ||
	    mkdir(in_ws("w/b/d"), 0755) < 0 || mkdir(in_ws("w/empty"), 0755) < 0)
		bail("mkdir");
	host_write(in_ws("w/z.txt"), "z");
	host_write(in_ws("w/b/c.txt"), "c");
	host_write(in_ws("w/b/d/e.txt"), "e");
	host_symlink(outdir, "w/hostdir");
	host_symlink("z.txt", "w/flink");
	if (mkfifo(in_ws("w/fifo"), 0644) < 0)
		bail("mkfifo");
	a = box_ws_walk(ws, "/workspace/w", 10, &err);
	s = a ? cJSON_PrintUnformatted(a) : NULL;
	is_str(s, "[\"/w/b/c.txt\",\"/w/b/d/e.txt\",\"/w/z.txt\"]",
	       "walk: sorted regular files, symlinks and fifos left out");
	free(s);
	cJSON_Delete(a);
	a = box_ws_walk(ws, "w/z.txt", 10, &err);
	s = a ? cJSON_PrintUnformatted(a) : NULL;
	is_str(s, "[\"/w/z.txt\"]", "walk of a file is the file");
	free(s);
	cJSON_Delete(a);
	a = box_ws_walk(ws, "w", 3, &err);
	ok(a != NULL, "exactly max_files is fine");
	cJSON_Delete(a);
	a = box_ws_walk(ws, "w", 2, &err);
	ok(a == NULL, "one more file than max_files");
	code_is(&err, BOX_E_LIMIT, "walk");
	is_str(err.limit, "walk_files", "  limit walk_files");
	a = box_ws_walk(ws, "w/hostdir", 10, &err);
	ok(a == NULL, "walk of a symlink to a host directory");
	code_is(&err, BOX_E_NOT_FOUND, "walk");
	a = box_ws_walk(ws, "..", 10, &err);
	ok(a == NULL, "walk ..");
	code_is(&err, BOX_E_POLICY, "walk");
	a = box_ws_walk(ws, "/", 1000, &err);
	ok(a && cJSON_GetArraySize(a) > 3, "walk of the root");
	s = a ? cJSON_PrintUnformatted(a) : NULL;
	ok(s && strstr(s, "\"/a.txt\"") && !strstr(s, "//"), "  paths like /a.txt");
	free(s);
	cJSON_Delete(a);

	make_chain("wchain", 64);
	a = box_ws_walk(ws, "wchain", 10, &err);
	is_int(a ? cJSON_GetArraySize(a) : -1, 1, "walk 64 levels deep");
	cJSON_Delete(a);
	make_chain("wchain65", 65);
	a = box_ws_walk(ws, "wchain65", 10, &err);
	ok(a == NULL, "walk 65 levels deep fails");
	is_str(err.limit, "depth", "  limit depth");
}

/* valgrind 3.19 (Debian 12) does not know openat2 and answers ENOSYS itself */
static int under_valgrind(void)
{
	const char *p = getenv("LD_PRELOAD");

	return getenv("BOX_UNDER_VALGRIND") || (p && strstr(p, "vgpreload"));
}


static ino_t host_ino(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 ? st.st_ino : 0;
}

static void append_ok(struct box_ws *ws, const char *path, const char *text, const char *what)
{
	struct box_err err;

	box_err_init(&err);
	if (!is_int(box_ws_write(ws, path, text, strlen(text), 1, &err), 0, "%s", what))
		printf("# %s\n", err.message);
}

/* Appends after the first write only their bytes, into the file the first one made, and only
 * while the name still leads to it. */
static void test_append_in_place(void)
{
	struct box_ws ws;
	struct box_err err;
	struct rlimit old, small;
	ino_t ino;
	char p[256];

	box_err_init(&err);
	if (box_ws_open(&ws, wsdir, 1 << 20, &err) < 0)
		bail("box_ws_open");
	host_write(in_ws("ap"), "OLD\n");
	append_ok(&ws, "ap", "one\n", "first append: old content and the bytes, a new file");
	ino = host_ino(in_ws("ap"));
	append_ok(&ws, "/ap", "two\n", "second append");
	append_ok(&ws, "/workspace/ap", "three\n", "third append, by another name of the same path");
	is_str(host_read(in_ws("ap")), "OLD\none\ntwo\nthree\n", "  content in order");
	ok(host_ino(in_ws("ap")) == ino, "  written in place: the same inode");
	is_int(ws.written, 14, "  the quota counts the appended bytes only");

	/* another process appends too: both ends are kept */
	{
		int fd = open(in_ws("ap"), O_WRONLY | O_APPEND);

		if (fd < 0 || write(fd, "host\n", 5) != 5)
			bail("host append");
		close(fd);
	}
	append_ok(&ws, "ap", "four\n", "append after a host append");
	is_str(host_read(in_ws("ap")), "OLD\none\ntwo\nthree\nhost\nfour\n", "  at the real end");

	/* the name replaced by another file: start over from that file */
	host_write(in_ws("ap.new"), "NEW\n");
	snprintf(p, sizeof(p), "%s", in_ws("ap.new"));
	if (rename(p, in_ws("ap")) < 0)
		bail("rename");
	ino = host_ino(in_ws("ap"));
	append_ok(&ws, "ap", "five\n", "append after the name was replaced");
	is_str(host_read(in_ws("ap")), "NEW\nfive\n", "  the new file's content, then the bytes");
	ok(host_ino(in_ws("ap")) != ino, "  in a new file: the one renamed in is not written");
	ino = host_ino(in_ws("ap"));
	append_ok(&ws, "ap", "six\n", "and in place again");
	ok(host_ino(in_ws("ap")) == ino, "  same inode");

	/* a hard link to an outside file renamed over the name: refused, outside untouched */
	snprintf(p, sizeof(p), "%s", in_ws("ap.hard"));
	if (link(outside, p) < 0 || rename(p, in_ws("ap")) < 0)
		bail("link");
	write_fails(&ws, "ap", 1, BOX_E_POLICY);
	is_str(host_read(outside), "OUTSIDE", "  hard link renamed over: outside untouched");
	if (unlink(in_ws("ap")) < 0)
		bail("unlink");

	/* a hard link made to the kept file: no longer written in place (refused as any
	 * hard-linked file) */
	append_ok(&ws, "ap2", "a\n", "new file ap2");
	snprintf(p, sizeof(p), "%s/ap2.link", outdir);
	if (link(in_ws("ap2"), p) < 0)
		bail("link ap2");
	write_fails(&ws, "ap2", 1, BOX_E_POLICY);
	is_str(host_read(p), "a\n", "  the other name sees nothing new");
	unlink(p);

	/* a symlink put at the name: replaced by a file, as a first append does */
	append_ok(&ws, "ap3", "a\n", "new file ap3");
	if (unlink(in_ws("ap3")) < 0)
		bail("unlink ap3");
	host_symlink(outside, "ap3");
	append_ok(&ws, "ap3", "b\n", "append after a symlink replaced the name");
	is_str(host_read(outside), "OUTSIDE", "  symlink target untouched");
	is_str(host_read(in_ws("ap3")), "b\n", "  the name is a file again");

	/* more files than are kept open: each still right */
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < BOX_WS_APPEND_FILES + 2; i++) {
			char name[32];

			snprintf(name, sizeof(name), "many%d", i);
			append_ok(&ws, name, "x", "append to one of many files");
		}
	is_str(host_read(in_ws("many0")), "xx", "  many0 has both");
	is_str(host_read(in_ws("many5")), "xx", "  many5 has both");

	/* a failing in-place append leaves the file as it was */
	append_ok(&ws, "big", "0123456789", "file for the size limit");
	if (getrlimit(RLIMIT_FSIZE, &old) < 0)
		bail("getrlimit");
	small = old;
	small.rlim_cur = 16;
	signal(SIGXFSZ, SIG_IGN);
	if (setrlimit(RLIMIT_FSIZE, &small) < 0)
		bail("setrlimit");
	is_int(box_ws_write(&ws, "big", "ABCDEFGHIJ", 10, 1, &err), -1,
	       "an append that fails half-way fails");
	code_is(&err, BOX_E_IO, "append past RLIMIT_FSIZE");
	setrlimit(RLIMIT_FSIZE, &old);
	signal(SIGXFSZ, SIG_DFL);
	is_str(host_read(in_ws("big")), "0123456789", "  cut back to what it was");
	box_ws_release(&ws);
}

/* own: what write, append and mkdir create is given to the guest's ids; what was there stays
 * as it was. */
static void test_owned(void)
{
	struct box_ws ws;
	struct box_err err;
	struct stat st;
	const char *const made[] = { "own", "own/a", "own/a/f", "own/g", "own/m/n" };
	size_t i;

	if (geteuid() != 0) {
		tap_skip("chown to other ids needs root");
		return;
	}
	box_err_init(&err);
	if (box_ws_open(&ws, wsdir, 1 << 20, &err) < 0)
		bail("box_ws_open");
	is_int(ws.own, 0, "box_ws_open gives nothing away");
	host_write(in_ws("kept"), "x");
	ws.own = 1;
	ws.uid = 123457;
	ws.gid = 123458;
	ok(box_ws_write(&ws, "own/a/f", "1", 1, 0, &err) == 0, "write, its parents made");
	ok(box_ws_write(&ws, "own/g", "2", 1, 1, &err) == 0, "append to a new file");
	ok(box_ws_write(&ws, "own/g", "3", 1, 1, &err) == 0, "append again");
	ok(box_ws_mkdir(&ws, "own/m/n", &err) == 0, "mkdir -p");
	ok(box_ws_write(&ws, "kept", "y", 1, 0, &err) == 0, "replace a file the host made");
	for (i = 0; i < sizeof(made) / sizeof(made[0]); i++)
		ok(stat(in_ws(made[i]), &st) == 0 && st.st_uid == 123457 && st.st_gid == 123458,
		   "  %s is the guest's", made[i]);
	ok(stat(in_ws("kept"), &st) == 0 && st.st_uid == 123457, "  a replaced file is a new one, "
	   "the guest's");
	ok(stat(wsdir, &st) == 0 && st.st_uid == 0, "  the root stays as it was");
	box_ws_release(&ws);
}

int main(void)
{
	struct box_ws ws;
	struct box_err err;
	char cmd[128];

	/* a blocking open of a FIFO would hang: fail instead */
	alarm(120);
	box_err_init(&err);
	if (under_valgrind() && box_confine_probe(&err) < 0) {
		tap_skip("valgrind lacks openat2: the workspace API is not testable under it");
		return done_testing();
	}
	setup();
	test_open();
	if (box_ws_open(&ws, wsdir, 1 << 20, &err) < 0) {
		printf("Bail out! box_ws_open: %s\n", err.message);
		return 1;
	}
	test_read_write(&ws);
	test_escapes(&ws);
	test_exists_stat(&ws);
	test_list(&ws);
	test_remove_mkdir(&ws);
	test_walk(&ws);
	box_ws_release(&ws);
	test_quota();
	test_append_in_place();
	test_owned();

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	if (system(cmd) != 0)
		printf("# cleanup failed\n");
	return done_testing();
}
