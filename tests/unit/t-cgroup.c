#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cgroup.h"
#include "tap.h"
#include "banned.h"

/* A fake cgroup v1 tree of plain directories: BOX_CGROUP_ROOT points at it. Plain
 * directories have no control files, so the tests create the ones the library writes. */
static char root[64];

static void path_of(char *out, size_t n, const char *rel)
{
	snprintf(out, n, "%s/%s", root, rel);
}

static int mk(const char *rel)
{
	char p[PATH_MAX];

	path_of(p, sizeof(p), rel);
	return mkdir(p, 0755);
}

/* Creates (or empties) rel with text. */
static void put(const char *rel, const char *text)
{
	char p[PATH_MAX];
	int fd;

	path_of(p, sizeof(p), rel);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		printf("# short write to %s\n", p);
	close(fd);
}

/* The contents of rel, "(absent)" when it cannot be read. */
static const char *get(const char *rel)
{
	static char buf[256];
	char p[PATH_MAX];
	ssize_t n;
	int fd;

	path_of(p, sizeof(p), rel);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return "(absent)";
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n < 0 ? 0 : n] = 0;
	return buf;
}

static int exists(const char *rel)
{
	char p[PATH_MAX];

	path_of(p, sizeof(p), rel);
	return access(p, F_OK) == 0;
}

static void test_names(void)
{
	is_str(box_cg_mode_name(BOX_CG_NONE), "none", "mode name none");
	is_str(box_cg_mode_name(BOX_CG_V1), "v1", "mode name v1");
	is_str(box_cg_mode_name(BOX_CG_V2), "v2", "mode name v2");
	is_int(box_cg_mode_from_name("none"), BOX_CG_NONE, "from name none");
	is_int(box_cg_mode_from_name("v1"), BOX_CG_V1, "from name v1");
	is_int(box_cg_mode_from_name("v2"), BOX_CG_V2, "from name v2");
	is_int(box_cg_mode_from_name("V1"), -1, "names are case-sensitive");
	is_int(box_cg_mode_from_name(""), -1, "empty name");
	is_int(box_cg_mode_from_name("v3"), -1, "unknown name");
	is_int(box_cg_mode_from_name(NULL), -1, "NULL name");
}

static void test_detect(void)
{
	mk("memory");
	mk("pids");
	mk("freezer");
	mk("cpuacct");
	is_int(box_cg_detect(), BOX_CG_V1, "a writable v1 tree is v1");
	ok(exists("memory/box") && exists("pids/box") && exists("freezer/box"),
	   "detect creates box/ under memory, pids and freezer");
	is_int(box_cg_detect(), BOX_CG_V1, "detect again (box/ exists) is still v1");
}

static void test_create(void)
{
	struct box_cg_limits lim = { 64 << 20, 64 }, none = { 0, 0 };
	struct box_err e;
	static const char *const bad[] = { "", "../x", "a/b", "A", "-a", "a b", ".", NULL };
	int i;

	for (i = 0; bad[i]; i++) {
		box_err_init(&e);
		is_int(box_cg_create(BOX_CG_V1, bad[i], &lim, &e), -1, "id '%s' refused", bad[i]);
		is_int(e.code, BOX_E_INVALID, "... invalid_request");
	}
	box_err_init(&e);
	is_int(box_cg_create(BOX_CG_V1, NULL, &lim, &e), -1, "NULL id refused");
	is_int(e.code, BOX_E_INVALID, "... invalid_request");
	box_err_init(&e);
	is_int(box_cg_create(BOX_CG_NONE, "../x", &lim, &e), -1, "a bad id is refused without groups too");
	is_int(e.code, BOX_E_INVALID, "... invalid_request");
	ok(!exists("x") && !exists("memory/x"), "nothing made for a bad id");

	mk("memory/box/s1");
	mk("pids/box/s1");
	put("memory/box/s1/memory.limit_in_bytes", "");
	put("memory/box/s1/memory.swappiness", "");
	put("pids/box/s1/pids.max", "");
	box_err_init(&e);
	is_int(box_cg_create(BOX_CG_V1, "s1", &lim, &e), 0, "create with limits: %s", e.message);
	is_str(get("memory/box/s1/memory.limit_in_bytes"), "67108864", "memory limit written");
	is_str(get("memory/box/s1/memory.swappiness"), "0", "swappiness 0");
	is_str(get("pids/box/s1/pids.max"), "64", "pids limit written");
	ok(!exists("memory/box/s1/memory.memsw.limit_in_bytes"),
	   "no memsw file is made where the kernel has none");
	ok(exists("freezer/box/s1") && exists("cpuacct/box/s1"),
	   "the group exists under freezer and cpuacct");

	put("memory/box/s1/memory.limit_in_bytes", "");
	put("memory/box/s1/memory.memsw.limit_in_bytes", "");
	put("pids/box/s1/pids.max", "");
	box_err_init(&e);
	is_int(box_cg_create(BOX_CG_V1, "s1", &lim, &e), 0, "an existing group is reused");
	is_str(get("memory/box/s1/memory.memsw.limit_in_bytes"), "67108864",
	       "memsw limit written where the kernel has it");
	is_str(get("memory/box/s1/memory.limit_in_bytes"), "67108864", "memory limit again");

	box_err_init(&e);
	is_int(box_cg_create(BOX_CG_V1, "s2", &none, &e), 0, "create without limits");
	ok(exists("memory/box/s2") && exists("pids/box/s2") && exists("freezer/box/s2") &&
	   exists("cpuacct/box/s2"), "... makes the group under every controller");
	ok(!exists("memory/box/s2/memory.limit_in_bytes") && !exists("pids/box/s2/pids.max"),
	   "... and writes no limit");

	/* a control file the kernel would not let us write */
	mk("memory/box/s3");
	mk("memory/box/s3/memory.limit_in_bytes");
	box_err_init(&e);
	is_int(box_cg_create(BOX_CG_V1, "s3", &lim, &e), -1, "a limit that cannot be written");
	is_int(e.code, BOX_E_IO, "... io_error");
	mk("pids/box/s4");
	mk("pids/box/s4/pids.max");
	box_err_init(&e);
	is_int(box_cg_create(BOX_CG_V1, "s4", &(struct box_cg_limits){ 0, 10 }, &e), -1,
	       "a pids limit that cannot be written");
	is_int(e.code, BOX_E_IO, "... io_error");

	box_err_init(&e);
	is_int(box_cg_create(BOX_CG_NONE, "s9", &lim, &e), 0, "create without groups is a no-op");
	ok(!exists("memory/box/s9"), "... making nothing");
}

static void test_join(void)
{
	static const char *const procs[] = {
		"memory/box/s1/cgroup.procs", "pids/box/s1/cgroup.procs",
		"freezer/box/s1/cgroup.procs", "cpuacct/box/s1/cgroup.procs",
	};
	struct box_err e;
	char self[24];
	int i;

	for (i = 0; i < 4; i++)
		put(procs[i], "");
	box_err_init(&e);
	is_int(box_cg_join(BOX_CG_V1, "s1", 4321, &e), 0, "join a pid");
	for (i = 0; i < 4; i++)
		is_str(get(procs[i]), "4321", "pid written to %s", procs[i]);
	for (i = 0; i < 4; i++)
		put(procs[i], "");
	snprintf(self, sizeof(self), "%d", (int)getpid());
	is_int(box_cg_join(BOX_CG_V1, "s1", 0, &e), 0, "join with pid 0");
	for (i = 0; i < 4; i++)
		is_str(get(procs[i]), self, "the caller's pid written to %s", procs[i]);

	/* cpuacct is optional: s2 has no cgroup.procs there */
	put("memory/box/s2/cgroup.procs", "");
	put("pids/box/s2/cgroup.procs", "");
	put("freezer/box/s2/cgroup.procs", "");
	is_int(box_cg_join(BOX_CG_V1, "s2", 77, &e), 0, "join without the optional cpuacct");
	is_str(get("freezer/box/s2/cgroup.procs"), "77", "... the freezer group joined");

	mk("memory/box/s5");
	mk("memory/box/s5/cgroup.procs");
	box_err_init(&e);
	is_int(box_cg_join(BOX_CG_V1, "s5", 77, &e), -1, "a group that cannot be joined");
	is_int(e.code, BOX_E_IO, "... io_error");
	is_int(box_cg_join(BOX_CG_NONE, "s5", 77, &e), 0, "join without groups is a no-op");
}

static void test_counters(void)
{
	struct box_cg_counters c;

	put("memory/box/s1/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
	put("pids/box/s1/pids.events", "max 7\n");
	put("cpuacct/box/s1/cpuacct.usage", "123456789\n");
	memset(&c, 0x55, sizeof(c));
	box_cg_counters(BOX_CG_V1, "s1", &c);
	is_int(c.oom_kills, 3, "oom kills from memory.oom_control (not oom_kill_disable)");
	is_int(c.pids_max_hits, 7, "pids max hits from pids.events");
	is_int(c.cpu_ns, 123456789, "cpu ns from cpuacct.usage");

	memset(&c, 0x55, sizeof(c));
	box_cg_counters(BOX_CG_V1, "s2", &c);
	is_int(c.oom_kills, -1, "absent memory.oom_control: -1");
	is_int(c.pids_max_hits, -1, "absent pids.events: -1");
	is_int(c.cpu_ns, -1, "absent cpuacct.usage: -1");

	put("memory/box/s2/memory.oom_control", "oom_kill_disable 1\nunder_oom 0\n");
	box_cg_counters(BOX_CG_V1, "s2", &c);
	is_int(c.oom_kills, -1, "no oom_kill line: -1");

	memset(&c, 0x55, sizeof(c));
	box_cg_counters(BOX_CG_NONE, "s1", &c);
	ok(c.oom_kills == -1 && c.pids_max_hits == -1 && c.cpu_ns == -1,
	   "no groups: every counter -1");
}

static void test_freeze(void)
{
	char p[PATH_MAX];
	struct box_err e;
	int fd;

	put("freezer/box/s1/freezer.state", "THAWED");
	is_int(box_cg_frozen(BOX_CG_V1, "s1"), 0, "THAWED is not frozen");
	box_err_init(&e);
	is_int(box_cg_freeze(BOX_CG_V1, "s1", 1, 100, &e), 0, "freeze: %s", e.message);
	is_str(get("freezer/box/s1/freezer.state"), "FROZEN", "FROZEN written");
	is_int(box_cg_frozen(BOX_CG_V1, "s1"), 1, "frozen");
	is_int(box_cg_freeze(BOX_CG_V1, "s1", 0, 100, &e), 0, "thaw");
	is_str(get("freezer/box/s1/freezer.state"), "THAWED", "THAWED written");
	is_int(box_cg_frozen(BOX_CG_V1, "s1"), 0, "thawed");
	put("freezer/box/s1/freezer.state", "FREEZING");
	is_int(box_cg_frozen(BOX_CG_V1, "s1"), 0, "FREEZING is not frozen yet");

	is_int(box_cg_frozen(BOX_CG_V1, "s2"), -1, "no freezer.state: -1");
	mk("freezer/box/s6");
	mk("freezer/box/s6/freezer.state");
	box_err_init(&e);
	is_int(box_cg_freeze(BOX_CG_V1, "s6", 1, 100, &e), -1, "a freezer that cannot be written");
	is_int(e.code, BOX_E_IO, "... io_error");

	/* a state file that swallows writes and reads back empty never says FROZEN */
	path_of(p, sizeof(p), "freezer/box/s2/freezer.state");
	fd = -1;
	if (geteuid() == 0 && mknod(p, S_IFCHR | 0600, makedev(1, 3)) == 0)
		fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		box_err_init(&e);
		is_int(box_cg_freeze(BOX_CG_V1, "s2", 1, 50, &e), -1, "a freezer that never freezes");
		is_int(e.code, BOX_E_TIMEOUT, "... timeout");
		is_str(e.limit, "freeze_ms", "... limit freeze_ms");
		is_int(e.configured, 50, "... configured 50");
	} else {
		tap_skip("cannot make a /dev/null node here (not root, or nodev)");
	}
	unlink(p);

	box_err_init(&e);
	is_int(box_cg_freeze(BOX_CG_NONE, "s1", 1, 100, &e), -1, "freeze without groups");
	is_int(e.code, BOX_E_UNSUPPORTED, "... unsupported");
	is_int(box_cg_frozen(BOX_CG_NONE, "s1"), -1, "frozen without groups: -1");

	put("freezer/cgroup.procs", "");
	box_err_init(&e);
	is_int(box_cg_leave_freezer(BOX_CG_V1, &e), 0, "leave the freezer group");
	is_str(get("freezer/cgroup.procs"), "0", "0 written to the freezer root");
	path_of(p, sizeof(p), "freezer/cgroup.procs");
	unlink(p);
	mk("freezer/cgroup.procs");
	box_err_init(&e);
	is_int(box_cg_leave_freezer(BOX_CG_V1, &e), -1, "a freezer root that cannot be written");
	is_int(e.code, BOX_E_IO, "... io_error");
	is_int(box_cg_leave_freezer(BOX_CG_NONE, &e), 0, "leave without groups is a no-op");
}

int main(void)
{
	char cmd[128];

	snprintf(root, sizeof(root), "/tmp/t-cgroup.XXXXXX");
	if (!mkdtemp(root))
		return 99;
	setenv("BOX_CGROUP_ROOT", root, 1);
	test_names();
	test_detect();
	test_create();
	test_join();
	test_counters();
	test_freeze();

	/* a tree without a freezer hierarchy */
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd))
		printf("# cleanup failed\n");
	if (mkdir(root, 0700) == 0) {
		mk("memory");
		mk("pids");
		mk("cpuacct");
		is_int(box_cg_detect(), BOX_CG_NONE, "no freezer hierarchy: none");
		ok(!exists("freezer"), "... and no freezer made");
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd))
		printf("# cleanup failed\n");
	return done_testing();
}
