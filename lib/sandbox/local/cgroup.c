#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>
#include <linux/magic.h>

#include "cgroup.h"
#include "buf.h"
#include "banned.h"

#define KILL_ROUNDS 200

/* v1 controllers, the first three required */
static const char *const v1_ctrl[] = { "memory", "pids", "freezer", "cpuacct" };
#define V1_REQUIRED 3
#define V1_N (sizeof(v1_ctrl) / sizeof(v1_ctrl[0]))

int box_cg_valid_name(const char *name)
{
	size_t i;

	if (!name || !((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= '0' && name[0] <= '9')))
		return 0;
	for (i = 1; name[i]; i++) {
		char c = name[i];

		if (i >= BOX_CG_NAME_MAX)
			return 0;
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

/* box_err_sys, always io_error: a missing control file is the host's setup, not a lookup */
static int io_err(struct box_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int io_err(struct box_err *err, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	int e = errno;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	box_err_set(err, BOX_E_IO, "%s: %s", msg, strerror(e));
	return -1;
}

static const char *cg_root(void)
{
	const char *r = getenv("BOX_CGROUP_ROOT");

	return r && *r ? r : "/sys/fs/cgroup";
}

const char *box_cg_mode_name(enum box_cg_mode m)
{
	return m == BOX_CG_V1 ? "v1" : m == BOX_CG_V2 ? "v2" : "none";
}

int box_cg_mode_from_name(const char *s)
{
	if (!s)
		return -1;
	if (strcmp(s, "none") == 0)
		return BOX_CG_NONE;
	if (strcmp(s, "v1") == 0)
		return BOX_CG_V1;
	if (strcmp(s, "v2") == 0)
		return BOX_CG_V2;
	return -1;
}

/* The directory of a group: ctrl NULL for v2; id NULL for the box/ parent. */
static int cg_path(char *out, size_t n, const char *ctrl, const char *id, const char *file)
{
	int r = snprintf(out, n, "%s%s%s/box%s%s%s%s", cg_root(), ctrl ? "/" : "", ctrl ? ctrl : "",
			 id ? "/" : "", id ? id : "", file ? "/" : "", file ? file : "");

	return r < 0 || (size_t)r >= n ? -1 : 0;
}

static int write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t w;
	int e;

	if (fd < 0)
		return -1;
	w = write(fd, val, strlen(val));
	e = errno;
	close(fd);
	errno = e;
	return w == (ssize_t)strlen(val) ? 0 : -1;
}

static ssize_t read_small(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t r;

	if (fd < 0)
		return -1;
	r = read(fd, buf, n - 1);
	close(fd);
	if (r < 0)
		return -1;
	buf[r] = 0;
	return r;
}

/* The value of "key N" in a flat keyed file (memory.events, pids.events ...), -1 if absent. */
static int64_t keyed_value(const char *path, const char *key)
{
	char buf[4096], *p;
	size_t kl = strlen(key);

	if (read_small(path, buf, sizeof(buf)) < 0)
		return -1;
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, key, kl) == 0 && p[kl] == ' ')
			return strtoll(p + kl + 1, NULL, 10);
	return -1;
}

static int64_t plain_value(const char *path)
{
	char buf[64];

	if (read_small(path, buf, sizeof(buf)) < 0)
		return -1;
	return strtoll(buf, NULL, 10);
}

static int is_cgroup2(const char *path)
{
	struct statfs sf;

	return statfs(path, &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;
}

enum box_cg_mode box_cg_detect(void)
{
	char p[512];
	size_t i;

	if (is_cgroup2(cg_root())) {
		char ctl[600];

		if (cg_path(p, sizeof(p), NULL, NULL, NULL) < 0)
			return BOX_CG_NONE;
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return BOX_CG_NONE;
		snprintf(ctl, sizeof(ctl), "%s/cgroup.subtree_control", cg_root());
		if (write_file(ctl, "+memory +pids") < 0)
			return BOX_CG_NONE;
		snprintf(ctl, sizeof(ctl), "%s/cgroup.subtree_control", p);
		if (write_file(ctl, "+memory +pids") < 0)
			return BOX_CG_NONE;
		return BOX_CG_V2;
	}
	for (i = 0; i < V1_REQUIRED; i++) {
		if (cg_path(p, sizeof(p), v1_ctrl[i], NULL, NULL) < 0)
			return BOX_CG_NONE;
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return BOX_CG_NONE;
		if (access(p, W_OK) < 0)
			return BOX_CG_NONE;
	}
	return BOX_CG_V1;
}

static int set_limits_v1(const char *id, const struct box_cg_limits *l, struct box_err *err)
{
	char p[512], v[32];

	if (l->memory > 0) {
		snprintf(v, sizeof(v), "%lld", (long long)l->memory);
		cg_path(p, sizeof(p), "memory", id, "memory.limit_in_bytes");
		if (write_file(p, v) < 0)
			return io_err(err, "cannot set %s", p);
		/* no swap beyond the limit where the kernel accounts it */
		cg_path(p, sizeof(p), "memory", id, "memory.memsw.limit_in_bytes");
		if (access(p, F_OK) == 0)
			(void)write_file(p, v);
		cg_path(p, sizeof(p), "memory", id, "memory.swappiness");
		(void)write_file(p, "0");
	}
	if (l->pids > 0) {
		snprintf(v, sizeof(v), "%lld", (long long)l->pids);
		cg_path(p, sizeof(p), "pids", id, "pids.max");
		if (write_file(p, v) < 0)
			return io_err(err, "cannot set %s", p);
	}
	return 0;
}

static int set_limits_v2(const char *id, const struct box_cg_limits *l, struct box_err *err)
{
	char p[512], v[32];

	if (l->memory > 0) {
		snprintf(v, sizeof(v), "%lld", (long long)l->memory);
		cg_path(p, sizeof(p), NULL, id, "memory.max");
		if (write_file(p, v) < 0)
			return io_err(err, "cannot set %s", p);
		cg_path(p, sizeof(p), NULL, id, "memory.swap.max");
		(void)write_file(p, "0");
	}
	if (l->pids > 0) {
		snprintf(v, sizeof(v), "%lld", (long long)l->pids);
		cg_path(p, sizeof(p), NULL, id, "pids.max");
		if (write_file(p, v) < 0)
			return io_err(err, "cannot set %s", p);
	}
	return 0;
}

int box_cg_create(enum box_cg_mode m, const char *id, const struct box_cg_limits *l,
		  struct box_err *err)
{
	char p[512];
	size_t i;

	if (!box_cg_valid_name(id))
		return box_err_set(err, BOX_E_INVALID, "invalid group name");
	if (m == BOX_CG_NONE)
		return 0;
	if (m == BOX_CG_V2) {
		if (cg_path(p, sizeof(p), NULL, id, NULL) < 0)
			return box_err_set(err, BOX_E_IO, "cgroup path too long");
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return io_err(err, "cannot create %s", p);
		return set_limits_v2(id, l, err);
	}
	for (i = 0; i < V1_N; i++) {
		if (cg_path(p, sizeof(p), v1_ctrl[i], NULL, NULL) < 0)
			return box_err_set(err, BOX_E_IO, "cgroup path too long");
		if (i >= V1_REQUIRED && access(p, F_OK) < 0 && mkdir(p, 0755) < 0)
			continue;
		if (cg_path(p, sizeof(p), v1_ctrl[i], id, NULL) < 0)
			return box_err_set(err, BOX_E_IO, "cgroup path too long");
		if (mkdir(p, 0755) < 0 && errno != EEXIST) {
			if (i >= V1_REQUIRED)
				continue;
			return io_err(err, "cannot create %s", p);
		}
	}
	return set_limits_v1(id, l, err);
}

int box_cg_join(enum box_cg_mode m, const char *id, pid_t pid, struct box_err *err)
{
	char p[512], v[24];
	size_t i;

	snprintf(v, sizeof(v), "%d", (int)(pid ? pid : getpid()));
	if (m == BOX_CG_NONE)
		return 0;
	if (!box_cg_valid_name(id))
		return box_err_set(err, BOX_E_INVALID, "invalid group name");
	if (m == BOX_CG_V2) {
		cg_path(p, sizeof(p), NULL, id, "cgroup.procs");
		if (write_file(p, v) < 0)
			return io_err(err, "cannot join %s", p);
		return 0;
	}
	for (i = 0; i < V1_N; i++) {
		cg_path(p, sizeof(p), v1_ctrl[i], id, "cgroup.procs");
		if (write_file(p, v) < 0 && i < V1_REQUIRED)
			return io_err(err, "cannot join %s", p);
	}
	return 0;
}

int box_cg_leave_freezer(enum box_cg_mode m, struct box_err *err)
{
	char p[512];

	if (m == BOX_CG_NONE)
		return 0;
	if (box_fmt(p, sizeof(p), m == BOX_CG_V2 ? "%s/cgroup.procs" : "%s/freezer/cgroup.procs",
		    cg_root()) < 0)
		return box_err_set(err, BOX_E_IO, "cgroup path too long");
	if (write_file(p, "0") < 0)
		return io_err(err, "cannot leave the sandbox's freezer group");
	return 0;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

int box_cg_frozen(enum box_cg_mode m, const char *id)
{
	char p[512], buf[64];

	if (!box_cg_valid_name(id))
		return -1;
	if (m == BOX_CG_V2) {
		int64_t v;

		cg_path(p, sizeof(p), NULL, id, "cgroup.events");
		v = keyed_value(p, "frozen");
		return v < 0 ? -1 : v > 0;
	}
	if (m == BOX_CG_V1) {
		cg_path(p, sizeof(p), "freezer", id, "freezer.state");
		if (read_small(p, buf, sizeof(buf)) < 0)
			return -1;
		return strncmp(buf, "FROZEN", 6) == 0;
	}
	return -1;
}

int box_cg_freeze(enum box_cg_mode m, const char *id, int frozen, int timeout_ms,
		  struct box_err *err)
{
	char p[512];
	int64_t waited_us = 0;
	long step_us = 25;

	if (m == BOX_CG_NONE)
		return box_err_set(err, BOX_E_UNSUPPORTED, "no writable freezer");
	if (!box_cg_valid_name(id))
		return box_err_set(err, BOX_E_INVALID, "invalid group name");
	if (m == BOX_CG_V2)
		cg_path(p, sizeof(p), NULL, id, "cgroup.freeze");
	else
		cg_path(p, sizeof(p), "freezer", id, "freezer.state");
	if (write_file(p, m == BOX_CG_V2 ? (frozen ? "1" : "0") : (frozen ? "FROZEN" : "THAWED")) < 0)
		return io_err(err, "cannot write %s", p);
	/* v1 reports FREEZING until every task stopped; v2 flips "frozen" in cgroup.events. It
	 * usually takes well under a millisecond: look often at first. */
	for (;;) {
		int f = box_cg_frozen(m, id);
		struct timespec ts;

		if (f == frozen)
			return 0;
		if (f < 0)
			return io_err(err, "cannot read the freezer state of %s", id);
		if (waited_us >= (int64_t)timeout_ms * 1000)
			return box_err_limit(err, BOX_E_TIMEOUT, "freeze_ms", timeout_ms, "ms",
					     "the sandbox did not %s within %d ms",
					     frozen ? "freeze" : "thaw", timeout_ms);
		step_us = step_us < 4000 ? step_us * 2 : 4000;
		ts.tv_sec = 0;
		ts.tv_nsec = step_us * 1000;
		nanosleep(&ts, NULL);
		waited_us += step_us;
	}
}

void box_cg_counters(enum box_cg_mode m, const char *id, struct box_cg_counters *c)
{
	char p[512];

	c->oom_kills = c->pids_max_hits = c->cpu_ns = -1;
	if (!box_cg_valid_name(id))
		return;
	if (m == BOX_CG_V2) {
		int64_t us;

		cg_path(p, sizeof(p), NULL, id, "memory.events");
		c->oom_kills = keyed_value(p, "oom_kill");
		cg_path(p, sizeof(p), NULL, id, "pids.events");
		c->pids_max_hits = keyed_value(p, "max");
		cg_path(p, sizeof(p), NULL, id, "cpu.stat");
		us = keyed_value(p, "usage_usec");
		c->cpu_ns = us < 0 ? -1 : us * 1000;
	} else if (m == BOX_CG_V1) {
		cg_path(p, sizeof(p), "memory", id, "memory.oom_control");
		c->oom_kills = keyed_value(p, "oom_kill");
		cg_path(p, sizeof(p), "pids", id, "pids.events");
		c->pids_max_hits = keyed_value(p, "max");
		cg_path(p, sizeof(p), "cpuacct", id, "cpuacct.usage");
		c->cpu_ns = plain_value(p);
	}
}

/* Sends SIGKILL to every pid listed in procs; the number of pids seen, -1 if unreadable. */
static int kill_listed(const char *procs)
{
	char buf[65536], *p, *end;
	int n = 0;

	if (read_small(procs, buf, sizeof(buf)) < 0)
		return -1;
	for (p = buf; *p; p = end) {
		long pid = strtol(p, &end, 10);

		if (end == p)
			break;
		if (pid > 0) {
			kill((pid_t)pid, SIGKILL);
			n++;
		}
		while (*end == '\n')
			end++;
	}
	return n;
}

int box_cg_destroy(enum box_cg_mode m, const char *id, int timeout_ms, struct box_err *err)
{
	char p[512], procs[512];
	size_t i;
	int round;
	struct box_err ignored;

	if (m == BOX_CG_NONE || !box_cg_valid_name(id))
		return 0;
	box_err_init(&ignored);
	if (m == BOX_CG_V2) {
		cg_path(p, sizeof(p), NULL, id, NULL);
		if (access(p, F_OK) < 0)
			return 0;
		cg_path(procs, sizeof(procs), NULL, id, "cgroup.kill");
		if (write_file(procs, "1") < 0) {
			(void)box_cg_freeze(m, id, 1, 200, &ignored);
			cg_path(procs, sizeof(procs), NULL, id, "cgroup.procs");
			(void)kill_listed(procs);
			(void)box_cg_freeze(m, id, 0, 200, &ignored);
		}
		cg_path(procs, sizeof(procs), NULL, id, "cgroup.procs");
	} else {
		/* frozen tasks cannot fork; SIGKILL reaches them once thawed */
		(void)box_cg_freeze(m, id, 1, 200, &ignored);
		cg_path(procs, sizeof(procs), "freezer", id, "cgroup.procs");
		(void)kill_listed(procs);
		(void)box_cg_freeze(m, id, 0, 200, &ignored);
		cg_path(procs, sizeof(procs), "pids", id, "cgroup.procs");
	}
	for (round = 0; round < KILL_ROUNDS; round++) {
		int n = kill_listed(procs);

		if (n <= 0)
			break;
		if (round * 5 >= timeout_ms)
			return box_err_set(err, BOX_E_IO, "the processes of %s did not end", id);
		sleep_ms(5);
	}
	if (m == BOX_CG_V2) {
		cg_path(p, sizeof(p), NULL, id, NULL);
		if (rmdir(p) < 0 && errno != ENOENT)
			return io_err(err, "cannot remove %s", p);
		return 0;
	}
	for (i = 0; i < V1_N; i++) {
		cg_path(p, sizeof(p), v1_ctrl[i], id, NULL);
		/* a group empties a moment after its last task is reaped */
		for (round = 0; round < KILL_ROUNDS && rmdir(p) < 0 && errno == EBUSY; round++)
			sleep_ms(5);
	}
	return 0;
}
