#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/nsfs.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nsbox.h"
#include "sbjobs.h"
#include "libexec.h"
#include "atomic.h"
#include "base64.h"
#include "buf.h"
#include "confine.h"
#include "credenv.h"
#include "fswalk.h"
#include "ipc.h"
#include "json.h"
#include "netproxy.h"
#include "nsroles.h"
#include "proc.h"
#include "sandbox.h"
#include "sbcopy.h"
#include "sbprov.h"
#include "sbstate.h"
#include "tools.h"
#include "toolsrv.h"
#include "utf8.h"
#include "ws.h"
#include "banned.h"

#define STOP_TIMEOUT_MS 5000
#define FREEZE_TIMEOUT_MS 2000
static const char *const reserved[] = {
	"/proc", "/dev", "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/workspace", "/input", "/output", "/tmp", "/run/box",
};

/* Ancestors of what box mounts: a mount there would hide it. */
static const char *const reserved_exact[] = { "/run", "/usr/local", "/usr/local/bin" };

int box_nsbox_check_guest_path(const char *guest, struct box_err *err)
{
	char norm[4096];
	size_t i, n;

	if (!guest || guest[0] != '/')
		return box_err_set(err, BOX_E_INVALID, "mount target must be an absolute path");
	if (box_confine_normalize(guest, norm, sizeof(norm), err) < 0) {
		err->code = BOX_E_INVALID;
		return -1;
	}
	if (strcmp(norm + 1, guest + 1) != 0 || norm[1] == 0 || strcmp(norm, ".") == 0)
		return box_err_set(err, BOX_E_INVALID, "mount target '%.200s' is not a normal path",
				   guest);
	for (i = 0; i < sizeof(reserved_exact) / sizeof(reserved_exact[0]); i++)
		if (strcmp(guest, reserved_exact[i]) == 0)
			return box_err_set(err, BOX_E_INVALID,
					   "mount target '%.200s' would hide what box mounts", guest);
	for (i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
		n = strlen(reserved[i]);
		if (strncmp(guest, reserved[i], n) == 0 && (guest[n] == 0 || guest[n] == '/'))
			return box_err_set(err, BOX_E_INVALID,
					   "mount target '%.200s' is under %s, which box owns",
					   guest, reserved[i]);
	}
	return 0;
}

int box_nsbox_supported(void)
{
	return access("/proc/self/ns/user", F_OK) == 0;
}

static int64_t proc_start_time(pid_t pid)
{
	char f[32];

	return box_proc_stat_field(pid, 22, f, sizeof(f)) > 0 ? strtoll(f, NULL, 10) : -1;
}

static char proc_state(pid_t pid)
{
	char f[8];

	return box_proc_stat_field(pid, 3, f, sizeof(f)) == 1 ? f[0] : 0;
}

static int make_dirs(const char *dir, struct box_err *err)
{
	static const char *const sub[] = { "workspace", "input", "output", "root", "logs", "run" };
	char p[4096];
	size_t i;

	for (i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
		box_fmt(p, sizeof(p), "%s/%s", dir, sub[i]);
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return box_err_sys(err, "cannot create %s", p);
	}
	return 0;
}

/* The reports of a starting instance on rep until it is ready: "P<pid>" from the keeper,
 * then "R" from the holder, or "E<what>" from either. 1 when ready (*holder set if the
 * keeper reported it), 0 with err otherwise. */
static int read_reports(int rep, pid_t *holder, struct box_err *err)
{
	char buf[REPORT_MAX];
	size_t got = 0;
	int64_t deadline = box_now_ms() + START_TIMEOUT_MS;

	for (;;) {
		struct pollfd pfd = { rep, POLLIN, 0 };
		int64_t left = deadline - box_now_ms();
		ssize_t n;
		char *nl;

		if (left <= 0)
			return box_err_limit(err, BOX_E_TIMEOUT, "start_ms", START_TIMEOUT_MS, "ms",
					     "the sandbox did not start within %d ms",
					     START_TIMEOUT_MS), 0;
		if (poll(&pfd, 1, (int)left) <= 0)
			continue;
		n = read(rep, buf + got, sizeof(buf) - 1 - got);
		if (n <= 0)
			return box_err_set(err, BOX_E_IO, "the sandbox's holder ended while starting"),
			       0;
		got += (size_t)n;
		buf[got] = 0;
		while ((nl = strchr(buf, '\n'))) {
			*nl = 0;
			if (buf[0] == 'P')
				*holder = (pid_t)strtol(buf + 1, NULL, 10);
			else if (buf[0] == 'R')
				return 1;
			else if (buf[0] == 'E')
				return box_err_set(err, BOX_E_IO, "cannot build the sandbox: %s",
						   buf + 1), 0;
			memmove(buf, nl + 1, got - (size_t)(nl + 1 - buf) + 1);
			got -= (size_t)(nl + 1 - buf);
		}
		if (got >= sizeof(buf) - 1)
			return box_err_set(err, BOX_E_INTERNAL, "garbled report from the holder"), 0;
	}
}

/* The session's workspace/, input/ and output/ belong to the guest's root (not what is in
 * them: the host API gives what it writes there to the guest itself). */
static int give_dirs(const char *dir, const struct box_idmap *ids, struct box_err *err)
{
	static const char *const sub[] = { "workspace", "input", "output" };
	char p[4096];
	size_t i;

	if (ids->uid == (uint32_t)geteuid() && ids->gid == (uint32_t)getegid())
		return 0;
	for (i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
		box_fmt(p, sizeof(p), "%s/%s", dir, sub[i]);
		if (fchownat(AT_FDCWD, p, (uid_t)ids->uid, (gid_t)ids->gid, AT_SYMLINK_NOFOLLOW) < 0)
			return box_err_sys(err, "cannot give %s to the guest", p);
	}
	return 0;
}

int box_nsbox_start(const struct box_nsbox_config *config, struct box_nsbox_inst *out,
		    struct box_err *err)
{
	struct box_nsbox_config cc = *config, *c = &cc;
	int rep[2], ready;
	pid_t k, holder = 0;
	enum box_cg_mode cg;
	struct box_cg_limits lim = { c->memory, c->pids };

	if (!box_nsbox_supported())
		return box_err_set(err, BOX_E_UNSUPPORTED, "this kernel has no user namespaces");
	if (c->dir[0] != '/')
		return box_err_set(err, BOX_E_INTERNAL, "session directory must be absolute");
	if (c->ids.count == 0 && box_idmap_for_guest(&c->ids, NULL, NULL, err) < 0)
		return -1;
	if (make_dirs(c->dir, err) < 0 || give_dirs(c->dir, &c->ids, err) < 0)
		return -1;
	cg = box_cg_detect();
	if (box_cg_create(cg, c->cgname, &lim, err) < 0)
		return -1;
	if (pipe2(rep, O_CLOEXEC) < 0)
		return box_err_sys(err, "pipe");
	k = fork();
	if (k < 0) {
		close(rep[0]);
		close(rep[1]);
		return box_err_sys(err, "fork");
	}
	if (k == 0) {
		close(rep[0]);
		box_nsbox_keeper_main(c, cg, rep[1]);
	}
	close(rep[1]);
	ready = read_reports(rep[0], &holder, err);
	close(rep[0]);
	waitpid(k, NULL, WNOHANG);
	if (!ready || holder <= 0) {
		struct box_nsbox_inst dead = { holder, -1, cg, c->ids };

		if (err->code == BOX_OK)
			box_err_set(err, BOX_E_IO, "the sandbox did not report its holder");
		if (holder > 0)
			kill(holder, SIGKILL);
		(void)box_nsbox_stop(&dead, c->cgname, &(struct box_err){ 0 });
		return -1;
	}
	out->pid = holder;
	out->start = proc_start_time(holder);
	out->cg = cg;
	out->ids = c->ids;
	if (out->start < 0)
		return box_err_set(err, BOX_E_IO, "the sandbox's holder ended right after starting");
	return 0;
}

/* A pidfd of the instance's holder, checked to be the same process the record names. */
int box_nsbox_holder_pidfd(const struct box_nsbox_inst *i)
{
	int fd;

	if (i->pid <= 0)
		return -1;
	fd = (int)syscall(SYS_pidfd_open, i->pid, 0);
	if (fd < 0)
		return -1;
	if (proc_start_time(i->pid) != i->start) {
		close(fd);
		errno = ESRCH;
		return -1;
	}
	return fd;
}

int box_nsbox_observe(const struct box_nsbox_inst *i, const char *id)
{
	int fd = box_nsbox_holder_pidfd(i);
	char st;

	if (fd < 0)
		return BOX_SB_OBS_ABSENT;
	close(fd);
	st = proc_state(i->pid);
	if (st == 0 || st == 'Z' || st == 'X')
		return BOX_SB_OBS_ABSENT;
	if (i->cg != BOX_CG_NONE) {
		int f = box_cg_frozen(i->cg, id);

		if (f == 1)
			return BOX_SB_OBS_PAUSED;
		if (f == 0)
			return BOX_SB_OBS_RUNNING;
	}
	return st == 'T' || st == 't' ? BOX_SB_OBS_PAUSED : BOX_SB_OBS_RUNNING;
}

/* Without a freezer: SIGSTOP/SIGCONT every process whose pid namespace is the holder's. */
static pid_t proc_ppid(long pid)
{
	char f[32];

	return box_proc_stat_field((pid_t)pid, 4, f, sizeof(f)) > 0 ? (pid_t)strtol(f, NULL, 10) :
	       -1;
}

#define TREE_MAX 65536

/* The index of v in the ascending array a[0..n) (/proc lists pids in order), n if absent. */
static size_t find_pid(const pid_t *a, size_t n, pid_t v)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a[mid] == v)
			return mid;
		if (a[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return n;
}

/* Without a freezer: SIGSTOP/SIGCONT the holder and its descendants (every process of the
 * sandbox descends from it: commands are re-parented to it), found through the parent pids
 * in /proc, which an ordinary user may read even of the non-dumpable holder. */
static int signal_tree(const struct box_nsbox_inst *i, int sig, struct box_err *err)
{
	DIR *d;
	struct dirent *e;
	size_t n = 0, k, seen = 0;
	pid_t *pid, *ppid;
	char *in;
	int grew = 1, rounds = 0;

	pid = calloc(TREE_MAX, sizeof(*pid));
	ppid = calloc(TREE_MAX, sizeof(*ppid));
	in = calloc(TREE_MAX, 1);
	d = opendir("/proc");
	if (!pid || !ppid || !in || !d) {
		free(pid);
		free(ppid);
		free(in);
		if (d)
			closedir(d);
		return box_err_sys(err, "cannot read /proc");
	}
	while ((e = readdir(d)) && n < TREE_MAX && seen++ < 4u << 20) {
		long v = strtol(e->d_name, NULL, 10);

		if (v <= 0)
			continue;
		pid[n] = (pid_t)v;
		ppid[n] = proc_ppid(v);
		in[n] = pid[n] == i->pid;
		n++;
	}
	closedir(d);
	while (grew && rounds++ < 1000) {
		grew = 0;
		for (k = 0; k < n; k++) {
			size_t j;

			if (in[k])
				continue;
			j = find_pid(pid, n, ppid[k]);
			if (j < n && in[j]) {
				in[k] = 1;
				grew = 1;
			}
		}
	}
	for (k = 0; k < n; k++)
		if (in[k])
			kill(pid[k], sig);
	free(pid);
	free(ppid);
	free(in);
	return 0;
}

/* ------------------------------------------------------------------ disk */

#define HELD_MAX_FDS 65536   /* descriptors looked at in one pass over the processes */

/* 1 when pid's pid namespace is ns or one below it (an exec's command has its own, under the
 * holder's): climbed with NS_GET_PARENT, at most 32 levels as the kernel allows. */
static int in_ns_below(long pid, const struct stat *ns)
{
	char p[64];
	int fd, depth;

	box_fmt(p, sizeof(p), "/proc/%ld/ns/pid", pid);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	for (depth = 0; fd >= 0 && depth < 33; depth++) {
		struct stat sb;
		int up;

		if (fstat(fd, &sb) == 0 && sb.st_ino == ns->st_ino && sb.st_dev == ns->st_dev) {
			close(fd);
			return 1;
		}
		up = ioctl(fd, NS_GET_PARENT);
		close(fd);
		fd = up;
	}
	if (fd >= 0)
		close(fd);
	return 0;
}

/* Regular files on devs[0..ndev) held open, unlinked, by processes in holder's pid
 * namespace or below: a guest can write as much as it likes to a file it unlinked at once. */
static void count_held(struct box_fswalk_usage *u, pid_t holder, const dev_t *devs,
		       size_t ndev)
{
	struct stat ns, sb;
	char p[64];
	struct dirent *e;
	size_t seen = 0, fds = 0;
	DIR *d;

	box_fmt(p, sizeof(p), "/proc/%ld/ns/pid", (long)holder);
	if (stat(p, &ns) < 0 || stat("/proc/self/ns/pid", &sb) < 0)
		return;
	/* a holder pid reused by a host process: the host's files are not the session's */
	if (ns.st_ino == sb.st_ino && ns.st_dev == sb.st_dev)
		return;
	if (!(d = opendir("/proc")))
		return;
	while ((e = readdir(d)) && seen++ < TREE_MAX && fds < HELD_MAX_FDS) {
		long v = strtol(e->d_name, NULL, 10);
		struct dirent *f;
		DIR *fd_dir;
		int dfd;

		if (v <= 0 || !in_ns_below(v, &ns))
			continue;
		box_fmt(p, sizeof(p), "/proc/%ld/fd", v);
		dfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0 || !(fd_dir = fdopendir(dfd))) {
			if (dfd >= 0)
				close(dfd);
			continue;
		}
		while ((f = readdir(fd_dir)) && fds++ < HELD_MAX_FDS) {
			size_t k;

			if (f->d_name[0] == '.' || fstatat(dirfd(fd_dir), f->d_name, &sb, 0) < 0 ||
			    !S_ISREG(sb.st_mode) || sb.st_nlink != 0)
				continue;
			for (k = 0; k < ndev && devs[k] != sb.st_dev; k++)
				;
			if (k < ndev)
				box_fswalk_usage_count(u, &sb);
		}
		closedir(fd_dir);
	}
	closedir(d);
}

int64_t box_nsbox_disk_used(const char *sdir, pid_t holder, int64_t deadline_ms,
			    struct box_err *err)
{
	static const char *const dirs[] = { "workspace", "output", "input" };
	struct box_fswalk_usage u;
	dev_t devs[3];
	size_t ndev = 0;
	int64_t r;

	box_fswalk_usage_init(&u, 0, deadline_ms);
	for (size_t k = 0; k < sizeof(dirs) / sizeof(dirs[0]) && u.complete; k++) {
		char p[PATH_MAX];
		struct stat sb;
		int d;

		box_fmt(p, sizeof(p), "%s/%s", sdir, dirs[k]);
		d = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (d < 0) {
			if (errno == ENOENT)
				continue;
			box_err_sys(err, "cannot open %s to measure it", p);
			u.complete = 0;
			break;
		}
		if (fstat(d, &sb) == 0)
			devs[ndev++] = sb.st_dev;
		(void)box_fswalk_usage_add(&u, d, err);
		close(d);
	}
	if (u.complete && holder > 0)
		count_held(&u, holder, devs, ndev);
	r = u.complete ? u.bytes : -1;
	box_fswalk_usage_release(&u);
	return r;
}

static int set_frozen(const struct box_nsbox_inst *i, const char *id, int frozen,
		      struct box_err *err)
{
	int fd = box_nsbox_holder_pidfd(i);

	if (fd < 0)
		return box_err_set(err, BOX_E_NOT_FOUND, "the sandbox's holder is gone");
	close(fd);
	if (i->cg != BOX_CG_NONE)
		return box_cg_freeze(i->cg, id, frozen, FREEZE_TIMEOUT_MS, err);
	return signal_tree(i, frozen ? SIGSTOP : SIGCONT, err);
}

int box_nsbox_pause(const struct box_nsbox_inst *i, const char *id, struct box_err *err)
{
	return set_frozen(i, id, 1, err);
}

int box_nsbox_resume(const struct box_nsbox_inst *i, const char *id, struct box_err *err)
{
	return set_frozen(i, id, 0, err);
}

int box_nsbox_stop(const struct box_nsbox_inst *i, const char *id, struct box_err *err)
{
	int fd = box_nsbox_holder_pidfd(i);

	if (fd >= 0) {
		/* SIGKILL to PID 1 of a pid namespace ends everything in it, frozen or not */
		(void)syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
		if (i->cg != BOX_CG_NONE)
			(void)box_cg_freeze(i->cg, id, 0, FREEZE_TIMEOUT_MS, &(struct box_err){ 0 });
		else
			(void)signal_tree(i, SIGCONT, &(struct box_err){ 0 });
		{
			struct pollfd pfd = { fd, POLLIN, 0 };

			(void)poll(&pfd, 1, STOP_TIMEOUT_MS);
		}
		close(fd);
	}
	return box_cg_destroy(i->cg, id, STOP_TIMEOUT_MS, err);
}

/* ---- the local provider of box-sandbox's sessions (struct box_sbprov) ---- */

#define HELPER_OUT_MAX ((size_t)16 << 20)
#define HELPER_TIMEOUT_MS 600000
#define HELPER_ENV_MAX 4096
/* the listing of /output: a JSON of at most about 6 times BOX_SBFILES_MAX_PATH_BYTES */
#define OUTPUTS_OUT_MAX ((size_t)32 << 20)
#define GUEST_PATH "/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin"
#define GUEST_ENV_MAX 160

static const cJSON *pdata(const struct box_sbprov_session *s, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(s->rec->provider_data, key);
}

static int64_t lim(const struct box_sbprov_session *s, const char *key, int64_t def)
{
	return box_json_int_value(cJSON_GetObjectItemCaseSensitive(s->rec->limits, key), def);
}

/* box-sbfiles: the helper that links libcrypto and libarchive (box-sandbox itself does not),
 * run like every helper by box_proc_run: its own process group, killed whole at the end or
 * when it passes timeout_ms (timeout, limit "what"). */
cJSON *box_nsbox_sbfiles_run(const char *const *args, int timeout_ms, const char *what,
			    size_t out_max, struct box_err *err)
{
	extern char **environ;
	char path[PATH_MAX];
	const char *argv[10], **envp;
	struct box_proc_opts o = { 0 };
	struct box_proc_result r;
	cJSON *res = NULL;
	int i;

	if (box_libexec_find("box-sbfiles", path, sizeof(path), err) < 0)
		return NULL;
	argv[0] = path;
	for (i = 0; args[i] && i < 8; i++)
		argv[i + 1] = args[i];
	argv[i + 1] = NULL;
	envp = calloc(HELPER_ENV_MAX, sizeof(*envp));
	if (!envp) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		return NULL;
	}
	/* the helper reads the state dir and sanitizer settings, never a credential */
	box_credenv_filter(environ, envp, HELPER_ENV_MAX);
	o.argv = argv;
	o.envp = (char *const *)envp;
	o.timeout_ms = timeout_ms;
	o.max_stdout = out_max;
	/* a box-sandbox killed mid-restore must not leave a box-sbfiles that swaps the tree
	 * under the next operation */
	o.die_with_parent = 1;
	if (box_proc_run(&o, &r, err) < 0)
		goto out;
	if (r.timed_out) {
		box_err_limit(err, BOX_E_TIMEOUT, what, timeout_ms, "ms",
			      "box-sbfiles %s did not finish within %d ms", args[0], timeout_ms);
		goto out;
	}
	res = r.stdout_overflow ? NULL : box_json_parse(r.out.data ? r.out.data : "", r.out.len, err);
	if (!res) {
		box_err_set(err, BOX_E_INTERNAL, "box-sbfiles printed no JSON%s%s",
			    r.err_tail[0] ? ": " : "", r.err_tail);
		goto out;
	}
	if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(res, "ok"))) {
		if (box_err_from_json(err, cJSON_GetObjectItemCaseSensitive(res, "error")) < 0)
			box_err_set(err, BOX_E_INTERNAL, "box-sbfiles failed without an error");
		cJSON_Delete(res);
		res = NULL;
	}
out:
	box_proc_result_release(&r);
	free(envp);
	return res;
}

static cJSON *run_sbfiles(const char *libexec, const char *const *args, struct box_err *err)
{
	(void)libexec;
	return box_nsbox_sbfiles_run(args, HELPER_TIMEOUT_MS, "timeout_ms", HELPER_OUT_MAX, err);
}

/* The name of the groups of the session's instance: the record's; a record from before names
 * were per instance has the session id; none before the first start (NULL: no group). */
static const char *cg_of(const struct box_sbprov_session *s)
{
	const cJSON *h = pdata(s, "holder");

	return h ? box_json_get_str(h, "cgroup_name", s->id) : NULL;
}

static void inst_of(const struct box_sbprov_session *s, struct box_nsbox_inst *i)
{
	const cJSON *h = pdata(s, "holder");
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(h, "pid");
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(h, "start");
	int cg = box_cg_mode_from_name(box_json_get_str(h, "cgroup", "none"));

	i->pid = (pid_t)box_json_int_value(pid, 0);
	i->start = box_json_int_value(st, -1);
	i->cg = cg < 0 ? BOX_CG_NONE : (enum box_cg_mode)cg;
}

/* The host ids of the session's guest root: those its instance was started with (recorded
 * at start), else those a start would use now. */
static int session_ids(const struct box_sbprov_session *s, struct box_idmap *m,
		       struct box_err *err)
{
	const cJSON *o = pdata(s, "ids");
	int64_t uid = box_json_get_int(o, "uid", -1), gid = box_json_get_int(o, "gid", -1);
	int64_t n = box_json_get_int(o, "count", -1);

	if (o && uid > 0 && gid > 0 && (n == 1 || n == BOX_IDMAP_COUNT) &&
	    uid + n <= (int64_t)UINT32_MAX && gid + n <= (int64_t)UINT32_MAX) {
		m->uid = (uint32_t)uid;
		m->gid = (uint32_t)gid;
		m->count = (uint32_t)n;
		return 0;
	}
	return box_idmap_for_guest(m, NULL, NULL, err);
}

static int ids_are_mine(const struct box_idmap *m)
{
	return m->uid == (uint32_t)geteuid() && m->gid == (uint32_t)getegid();
}

void box_nsbox_mounts_release(struct box_nsbox_mounts *ms)
{
	size_t k;

	for (k = 0; k < ms->n; k++)
		free(ms->buf[k]);
	ms->n = 0;
}

/* Ends a failed parse: frees the entry being parsed and those kept. */
static int mount_fail(struct box_nsbox_mounts *ms, char *s)
{
	free(s);
	box_nsbox_mounts_release(ms);
	return -1;
}

int box_nsbox_parse_mounts(const cJSON *arr, struct box_nsbox_mounts *ms, struct box_err *err)
{
	const cJSON *e;
	int idx = 0;

	ms->n = 0;
	cJSON_ArrayForEach(e, arr) {
		char path[32], *s, *g, *ro;
		struct stat st;

		box_fmt(path, sizeof(path), "$.mount[%d]", idx++);
		if (ms->n >= BOX_NSBOX_MOUNTS_MAX) {
			box_nsbox_mounts_release(ms);
			return box_err_set(err, BOX_E_INVALID, "too many mounts");
		}
		s = strdup(e->valuestring);
		if (!s)
			return box_err_set(err, BOX_E_INTERNAL, "out of memory");
		g = strchr(s, ':');
		if (!g || s[0] != '/') {
			box_err_set(err, BOX_E_INVALID, "mount '%.200s' is not HOST_PATH:GUEST_PATH[:ro] "
				    "with absolute paths", e->valuestring);
			box_err_path(err, path);
			return mount_fail(ms, s);
		}
		*g++ = 0;
		ro = strchr(g, ':');
		if (ro) {
			*ro++ = 0;
			if (strcmp(ro, "ro") != 0 && strcmp(ro, "rw") != 0) {
				box_err_set(err, BOX_E_INVALID, "mount option must be ro or rw");
				box_err_path(err, path);
				return mount_fail(ms, s);
			}
		}
		if (box_nsbox_check_guest_path(g, err) < 0) {
			box_err_path(err, path);
			return mount_fail(ms, s);
		}
		if (stat(s, &st) < 0 || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
			box_err_sys(err, "mount source %.200s", s);
			err->code = BOX_E_NOT_FOUND;
			box_err_path(err, path);
			return mount_fail(ms, s);
		}
		ms->buf[ms->n] = s;
		ms->m[ms->n].host = s;
		ms->m[ms->n].guest = g;
		ms->m[ms->n].ro = ro && strcmp(ro, "ro") == 0;
		ms->n++;
	}
	return 0;
}

static int keeper_tick(const void *ctx);
static void keeper_serve(int fd, const void *ctx);
static int stop_noted(const char *sdir, struct box_err *err);

static void config_of(const struct box_sbprov_session *s, struct box_nsbox_config *c,
		      const struct box_nsbox_mounts *ms, char *tool_bin, size_t tn)
{
	memset(c, 0, sizeof(*c));
	c->dir = s->sdir;
	c->id = s->id;
	c->cgname = cg_of(s);
	c->memory = lim(s, "memory", BOX_SANDBOX_DEFAULT_MEMORY);
	c->pids = lim(s, "pids", BOX_SANDBOX_DEFAULT_PIDS);
	c->disk_bytes = lim(s, "disk_bytes", BOX_SANDBOX_DEFAULT_DISK);
	c->mounts = ms ? ms->m : NULL;
	c->nmounts = ms ? ms->n : 0;
	if (box_libexec_find("box-tool", tool_bin, tn, &(struct box_err){ 0 }) < 0)
		box_fmt(tool_bin, tn, "%s/box-tool", s->libexec);
	c->tool_bin = box_json_get_str(pdata(s, "config"), "tools", NULL) ? tool_bin : NULL;
	c->serve_fd = -1;
	c->keeper_ctx = s;
	if (lim(s, "idle_pause_after_seconds", BOX_SANDBOX_DEFAULT_IDLE) > 0)
		c->keeper_tick = keeper_tick;
}

struct box_toolset *box_nsbox_load_tools(const char *file, char *abs, size_t n,
					 struct box_err *err)
{
	char real[PATH_MAX];

	if (!realpath(file, real)) {
		box_err_sys(err, "tools file %.200s", file);
		err->code = BOX_E_NOT_FOUND;
		box_err_path(err, "$.tools");
		return NULL;
	}
	if (box_fmt(abs, n, "%s", real) < 0)
		return box_err_set(err, BOX_E_INVALID, "tools file path too long"), NULL;
	return box_tools_load(abs, err);
}

/* create: the network rules must parse; kept in config as "net": {"allow", "deny"} */
static int local_configure_net(const cJSON *req, cJSON *config, struct box_err *err)
{
	const cJSON *allow = cJSON_GetObjectItemCaseSensitive(req, "allow_host");
	const cJSON *deny = cJSON_GetObjectItemCaseSensitive(req, "deny_host");
	cJSON *net;

	if (box_netproxy_check_rules(allow, deny, err) < 0)
		return -1;
	net = cJSON_AddObjectToObject(config, "net");
	if (!net)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	cJSON_AddItemToObject(net, "allow", allow ? cJSON_Duplicate(allow, 1) : cJSON_CreateArray());
	cJSON_AddItemToObject(net, "deny", deny ? cJSON_Duplicate(deny, 1) : cJSON_CreateArray());
	return 0;
}

/* create: the mounts must parse, the tools file load; both are kept in config */
static int local_configure(const cJSON *req, const char *provider, const char *libexec,
			   cJSON *config, struct box_err *err)
{
	struct box_nsbox_mounts ms;
	const char *tools = box_json_get_str(req, "tools", NULL);

	(void)provider;
	(void)libexec;
	if (box_nsbox_parse_mounts(cJSON_GetObjectItemCaseSensitive(req, "mount"), &ms, err) < 0)
		return -1;
	box_nsbox_mounts_release(&ms);
	if (local_configure_net(req, config, err) < 0)
		return -1;
	cJSON_AddItemToObject(config, "mounts", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(
				      req, "mount"), 1) ?: cJSON_CreateArray());
	if (tools) {
		char abs[PATH_MAX];
		struct box_toolset *set = box_nsbox_load_tools(tools, abs, sizeof(abs), err);

		if (!set)
			return -1;
		box_tools_free(set);
		cJSON_AddStringToObject(config, "tools", abs);
	}
	return 0;
}

/* Host writes (write, --input, restore) count against disk_bytes together with what the
 * session's files take already; files that cannot be measured refuse the write (fail closed). */
static int host_room(const struct box_sbprov_session *s, int64_t n, struct box_err *err)
{
	int64_t disk = lim(s, "disk_bytes", BOX_SANDBOX_DEFAULT_DISK), used;
	struct box_nsbox_inst i;
	struct box_err e;

	if (disk <= 0)
		return 0;
	inst_of(s, &i);
	box_err_init(&e);
	used = box_nsbox_disk_used(s->sdir, i.pid, box_now_ms() + BOX_NSBOX_DISK_WALK_MS, &e);
	if (used < 0)
		return box_err_limit(err, BOX_E_LIMIT, "disk", disk, "bytes", "the session's files "
				     "cannot be measured, so nothing more is written: %.300s",
				     e.message);
	if (n > disk - used)
		return box_err_limit(err, BOX_E_LIMIT, "disk", disk, "bytes", "%lld more bytes "
				     "would pass disk_bytes (%lld of %lld bytes in use)", (long long)n,
				     (long long)used, (long long)disk);
	return 0;
}

/* --input: each file or directory copied into the session's input/ under its base name */
static int copy_inputs(const struct box_sbprov_session *s, const cJSON *inputs,
		       const struct box_idmap *ids, struct box_err *err)
{
	struct box_sbcopy_limits lim_in = { 0, 0, 0 };
	char p[PATH_MAX];
	const cJSON *e;
	int d, idx = 0;

	/* no copy goes much past disk_bytes before the measure below refuses it */
	if (lim(s, "disk_bytes", BOX_SANDBOX_DEFAULT_DISK) < BOX_SBCOPY_MAX_BYTES)
		lim_in.max_bytes = (uint64_t)lim(s, "disk_bytes", BOX_SANDBOX_DEFAULT_DISK) + 1;
	box_fmt(p, sizeof(p), "%s/input", s->sdir);
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		return box_err_sys(err, "cannot create %s", p);
	d = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (d < 0)
		return box_err_sys(err, "cannot open %s", p);
	cJSON_ArrayForEach(e, inputs) {
		const char *base = strrchr(e->valuestring, '/');
		char path[32];
		struct box_sbcopy_stats st;

		base = base ? base + 1 : e->valuestring;
		box_fmt(path, sizeof(path), "$.input[%d]", idx++);
		if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
			close(d);
			box_err_set(err, BOX_E_INVALID, "input '%.200s' has no file name", e->valuestring);
			box_err_path(err, path);
			return -1;
		}
		memset(&st, 0, sizeof(st));
		if (box_sbcopy_in(e->valuestring, d, base, &lim_in, &st, err) < 0 ||
		    (!ids_are_mine(ids) &&
		     box_sbcopy_chown_tree(d, base, (uid_t)ids->uid, (gid_t)ids->gid, err) < 0)) {
			close(d);
			if (err->code == BOX_E_LIMIT && !strcmp(err->limit, "bytes") &&
			    lim_in.max_bytes)
				box_err_limit(err, BOX_E_LIMIT, "disk", (int64_t)lim_in.max_bytes - 1,
					      "bytes", "input '%.200s' is larger than disk_bytes",
					      e->valuestring);
			box_err_path(err, path);
			return -1;
		}
	}
	close(d);
	return host_room(s, 0, err);
}

/* The tool socket the keeper serves, when the session was granted tools. */
static int tool_socket(const struct box_sbprov_session *s, const struct box_nsbox_config *c,
		       struct box_err *err)
{
	char sock[PATH_MAX];
	int fd;

	if (access(c->tool_bin, X_OK) < 0)
		return box_err_sys(err, "box-tool (%s) cannot be run (set BOX_LIBEXEC_DIR or "
				   "reinstall box)", c->tool_bin);
	box_fmt(sock, sizeof(sock), "%s/run", s->sdir);
	if (mkdir(sock, 0755) < 0 && errno != EEXIST)
		return box_err_sys(err, "cannot create %s", sock);
	box_fmt(sock, sizeof(sock), "%s/run/tool.sock", s->sdir);
	fd = box_toolsrv_listen(sock, err);
	/* the guest's root connects to it: its own, still 0600 */
	if (fd >= 0 && !ids_are_mine(&c->ids) &&
	    fchownat(AT_FDCWD, sock, (uid_t)c->ids.uid, (gid_t)c->ids.gid, AT_SYMLINK_NOFOLLOW) < 0) {
		box_err_sys(err, "cannot give %s to the guest", sock);
		close(fd);
		return -1;
	}
	return fd;
}

#define INSTANCE_FILE "instance.json"
#define INSTANCE_MAX 4096

/* A new instance's group name: "<id>-<16 hex>", random. */
static void new_cgname(const char *id, char out[BOX_CG_NAME_MAX + 1])
{
	unsigned char r[8] = { 0 };
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	struct timespec ts;
	size_t k;

	if (fd < 0 || read(fd, r, sizeof(r)) != (ssize_t)sizeof(r)) {
		clock_gettime(CLOCK_REALTIME, &ts);
		for (k = 0; k < sizeof(r); k++)
			r[k] ^= (unsigned char)((ts.tv_nsec >> (k * 3)) ^ (getpid() >> k));
	}
	if (fd >= 0)
		close(fd);
	box_fmt(out, BOX_CG_NAME_MAX + 1, "%s-%02x%02x%02x%02x%02x%02x%02x%02x", id, r[0], r[1],
		r[2], r[3], r[4], r[5], r[6], r[7]);
}

/* The session directory's own note of its instance, instance.json: the group name (written
 * before any group or process exists), then its holder. An operation that finds no usable
 * record (a corrupt state.json, a start whose caller was killed) finds the instance through
 * it, never through the session id. i NULL: the name alone. */
static int write_instance(const char *sdir, const char *cgname, const struct box_nsbox_inst *i,
			  struct box_err *err)
{
	cJSON *o = cJSON_CreateObject();
	char *text;
	int d, r = -1;

	cJSON_AddStringToObject(o, "cgroup_name", cgname);
	if (i) {
		box_json_add_int64(o, "pid", i->pid);
		box_json_add_int64(o, "start", i->start);
		cJSON_AddStringToObject(o, "cgroup", box_cg_mode_name(i->cg));
	}
	text = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	d = open(sdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (!text || d < 0)
		box_err_sys(err, "cannot write %s/" INSTANCE_FILE, sdir);
	else
		r = box_atomic_write(d, INSTANCE_FILE, text, strlen(text), 0600, err);
	if (d >= 0)
		close(d);
	free(text);
	return r;
}

/* Ends the instance that the session directory's instance.json names (if any), and removes
 * its groups. 0, or -1 with io_error. */
static int stop_noted(const char *sdir, struct box_err *err)
{
	char p[PATH_MAX], buf[INSTANCE_MAX];
	struct box_nsbox_inst i = { 0, -1, BOX_CG_NONE };
	const char *name;
	cJSON *o;
	ssize_t n;
	int fd, mode, r;

	box_fmt(p, sizeof(p), "%s/" INSTANCE_FILE, sdir);
	fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT ? 0 : box_err_sys(err, "cannot read %s", p);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	o = n > 0 ? box_json_parse(buf, (size_t)n, &(struct box_err){ 0 }) : NULL;
	name = box_json_get_str(o, "cgroup_name", NULL);
	if (!name || !box_cg_valid_name(name)) {
		cJSON_Delete(o);
		return 0;
	}
	i.pid = (pid_t)box_json_get_int(o, "pid", 0);
	i.start = box_json_get_int(o, "start", -1);
	mode = box_cg_mode_from_name(box_json_get_str(o, "cgroup", NULL));
	i.cg = mode >= 0 ? (enum box_cg_mode)mode : box_cg_detect();
	r = box_nsbox_stop(&i, name, err);
	cJSON_Delete(o);
	return r;
}

static int local_start(struct box_sbprov_session *s, const cJSON *create_req,
		       struct box_err *err)
{
	struct box_nsbox_config c;
	struct box_nsbox_inst i;
	struct box_nsbox_mounts ms;
	char tool_bin[PATH_MAX], cgname[BOX_CG_NAME_MAX + 1];
	struct box_idmap ids;
	cJSON *h, *o;
	int r = -1;

	/* a start takes the ids the host's files give now */
	if (box_idmap_for_guest(&ids, NULL, NULL, err) < 0)
		return -1;
	if (create_req && copy_inputs(s, cJSON_GetObjectItemCaseSensitive(create_req, "input"),
				      &ids, err) < 0)
		return -1;
	if (box_nsbox_parse_mounts(cJSON_GetObjectItemCaseSensitive(pdata(s, "config"), "mounts"),
				   &ms, err) < 0)
		return -1;
	config_of(s, &c, &ms, tool_bin, sizeof(tool_bin));
	/* what a start killed half-way left behind goes first; then the new instance's name is
	 * noted before any of it exists */
	(void)stop_noted(s->sdir, &(struct box_err){ 0 });
	new_cgname(s->id, cgname);
	c.cgname = cgname;
	if (write_instance(s->sdir, cgname, NULL, err) < 0)
		goto out;
	c.ids = ids;
	{
		const cJSON *net = cJSON_GetObjectItemCaseSensitive(pdata(s, "config"), "net");

		/* the proxy of the instance reads them: none is "deny everything" */
		if (box_netproxy_save_rules(s->sdir, cJSON_GetObjectItemCaseSensitive(net, "allow"),
					    cJSON_GetObjectItemCaseSensitive(net, "deny"), err) < 0)
			goto out;
	}
	if (c.tool_bin) {
		c.serve_fd = tool_socket(s, &c, err);
		if (c.serve_fd < 0)
			goto out;
		c.keeper_serve = keeper_serve;
	}
	if (box_nsbox_start(&c, &i, err) < 0)
		goto out;
	h = cJSON_CreateObject();
	box_json_add_int64(h, "pid", i.pid);
	box_json_add_int64(h, "start", i.start);
	cJSON_AddStringToObject(h, "cgroup", box_cg_mode_name(i.cg));
	cJSON_AddStringToObject(h, "cgroup_name", cgname);
	(void)write_instance(s->sdir, cgname, &i, &(struct box_err){ 0 });
	cJSON_DeleteItemFromObjectCaseSensitive(s->rec->provider_data, "holder");
	cJSON_AddItemToObject(s->rec->provider_data, "holder", h);
	o = cJSON_CreateObject();
	box_json_add_int64(o, "uid", i.ids.uid);
	box_json_add_int64(o, "gid", i.ids.gid);
	box_json_add_int64(o, "count", i.ids.count);
	cJSON_DeleteItemFromObjectCaseSensitive(s->rec->provider_data, "ids");
	cJSON_AddItemToObject(s->rec->provider_data, "ids", o);
	r = 0;
out:
	if (c.serve_fd >= 0)
		close(c.serve_fd);
	box_nsbox_mounts_release(&ms);
	return r;
}

/* A session whose record cannot be read: what its directory notes is ended. */
static int local_stop_noted(struct box_sbprov_session *s, struct box_err *err)
{
	return stop_noted(s->sdir, err);
}

static int local_observe(struct box_sbprov_session *s, struct box_err *err)
{
	struct box_nsbox_inst i;

	(void)err;
	inst_of(s, &i);
	return box_nsbox_observe(&i, cg_of(s));
}

static int local_pause(struct box_sbprov_session *s, struct box_err *err)
{
	struct box_nsbox_inst i;

	/* exposed ports close at pause: a frozen proxy would hold their connections */
	(void)box_netproxy_control(s->sdir, 0, 0, NULL, &(struct box_err){ 0 });
	inst_of(s, &i);
	return box_nsbox_pause(&i, cg_of(s), err);
}

static int local_resume(struct box_sbprov_session *s, struct box_err *err)
{
	struct box_nsbox_inst i;

	inst_of(s, &i);
	return box_nsbox_resume(&i, cg_of(s), err);
}

static int local_stop(struct box_sbprov_session *s, struct box_err *err)
{
	struct box_nsbox_inst i;

	inst_of(s, &i);
	if (box_nsbox_stop(&i, cg_of(s), err) < 0)
		return -1;
	/* and a newer instance that a start killed half-way left unrecorded */
	return stop_noted(s->sdir, err);
}

static void env_set(const char **envp, size_t *n, size_t max, const char *kv)
{
	size_t i, klen = strcspn(kv, "=");

	for (i = 0; i < *n; i++)
		if (strncmp(envp[i], kv, klen) == 0 && envp[i][klen] == '=') {
			envp[i] = kv;
			return;
		}
	if (*n < max)
		envp[(*n)++] = kv;
}

static int empty_output(const struct box_sbprov_session *s, struct box_err *err)
{
	char p[PATH_MAX];
	int d, r;

	box_fmt(p, sizeof(p), "%s/output", s->sdir);
	d = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (d < 0)
		return box_err_sys(err, "cannot open %s", p);
	r = box_fswalk_empty(d, err);
	close(d);
	return r;
}

/* Files the command left in /output: [{"path","size","sha256"}], listed by box-sbfiles
 * within BOX_NSBOX_OUTPUTS_TIMEOUT_MS. A listing that fails is r->output_error, beside the
 * command's result, never in its place: a guest must not hide how its command ended. */
static void collect_outputs(const struct box_sbprov_session *s, struct box_sbexec_result *r)
{
	char p[PATH_MAX];
	const char *args[3] = { "outputs", p, NULL };
	cJSON *o, *files;
	int d, empty = 1;

	box_fmt(p, sizeof(p), "%s/output", s->sdir);
	d = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (d >= 0) {
		DIR *dir = fdopendir(d);
		struct dirent *de;

		while (dir && (de = readdir(dir)))
			if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
				empty = 0;
				break;
			}
		if (dir)
			closedir(dir);
		else
			close(d);
	}
	if (empty)
		return;
	o = box_nsbox_sbfiles_run(args, BOX_NSBOX_OUTPUTS_TIMEOUT_MS, "outputs_ms", OUTPUTS_OUT_MAX,
			       &r->output_error);
	if (!o)
		return;
	files = cJSON_DetachItemFromObjectCaseSensitive(o, "outputs");
	cJSON_Delete(o);
	cJSON_Delete(r->outputs);
	r->outputs = files;
	if (!cJSON_IsArray(files))
		box_err_set(&r->output_error, BOX_E_INTERNAL, "box-sbfiles listed no outputs");
}

static cJSON *limit_scopes(int cgroup);
/* What a guest with network rules gets: the proxy for every client that reads them, at the
 * exec's own port (the shared one, BOX_NETPROXY_PORT, when the proxy gave none). */
struct proxy_env {
	int own;                /* 1: the exec gets its own port; 0: the shared one (a background
				 * command or a schedule outlives the call that would hold it) */
	int fd;                 /* holds the exec's listeners, or -1 */
	char tag[24];
	char v[8][64];
};

static void proxy_env_add(const struct box_sbprov_session *s, struct proxy_env *pe,
			  const char **envp, size_t *n)
{
	static const char *const names[] = { "HTTP_PROXY=http", "HTTPS_PROXY=http",
					     "ALL_PROXY=socks5h", "http_proxy=http",
					     "https_proxy=http", "all_proxy=socks5h" };
	int port = BOX_NETPROXY_PORT;
	size_t k;

	if (pe->own)
		pe->fd = box_netproxy_exec_open(s->sdir, &port, pe->tag, sizeof(pe->tag),
						&(struct box_err){ 0 });
	if (pe->fd < 0)
		port = BOX_NETPROXY_PORT;
	for (k = 0; k < 6; k++) {
		box_fmt(pe->v[k], sizeof(pe->v[k]), "%s://127.0.0.1:%d", names[k], port);
		envp[(*n)++] = pe->v[k];
	}
	envp[(*n)++] = "NO_PROXY=localhost,127.0.0.1,::1";
	envp[(*n)++] = "no_proxy=localhost,127.0.0.1,::1";
}

/* --events network lines while the command runs: each attempt once it has ended, in the
 * order of the result's array (one still open holds back those after it). */
struct net_live {
	const struct box_sbprov_session *s;
	const struct box_sbexec *e;
	const struct proxy_env *pe;
	int64_t mark, last_ms;
	int emitted;
};

static void net_emit(struct net_live *nl, const cJSON *arr, int all)
{
	const cJSON *it;
	int k = 0;

	cJSON_ArrayForEach(it, arr) {
		if (k++ < nl->emitted)
			continue;
		if (!all && cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(it, "bytes_sent")))
			break;
		nl->e->on_network(nl->e->ctx, it);
		nl->emitted = k;
	}
}

static void net_tick(void *ctx)
{
	struct net_live *nl = ctx;
	cJSON *arr;

	if (box_now_ms() - nl->last_ms < 500)
		return;
	nl->last_ms = box_now_ms();
	arr = box_netproxy_attempts(nl->s->sdir, nl->mark, nl->pe->fd >= 0 ? nl->pe->tag : NULL, 0);
	net_emit(nl, arr, 0);
	cJSON_Delete(arr);
}

/* The exec's network attempts (the proxy's log since mark): the result's "network", and one
 * --events line each (those net_tick has not given yet). */
static void add_network(const struct box_sbprov_session *s, const struct box_sbexec *e,
			struct box_sbexec_result *r, struct net_live *nl, const struct proxy_env *pe)
{
	cJSON *arr = box_netproxy_attempts(s->sdir, nl->mark, pe->fd >= 0 ? pe->tag : NULL, 1000);

	if (!arr)
		arr = cJSON_CreateArray();
	if (!arr)
		return;
	if (e->on_network)
		net_emit(nl, arr, 1);
	if (!r->extra)
		r->extra = cJSON_CreateObject();
	if (!r->extra || !cJSON_AddItemToObject(r->extra, "network", arr))
		cJSON_Delete(arr);
}

/* The whole environment of a command: the base, then the session's and the exec's (sess
 * holds BOX_SESSION=ID). */
static void guest_env(struct box_sbprov_session *s, const struct box_sbexec *e,
		      struct proxy_env *pe, const char **envp, char *sess, size_t sessn)
{
	size_t n = 0, k;

	box_fmt(sess, sessn, "BOX_SESSION=%s", s->id);
	envp[n++] = "PATH=" GUEST_PATH;
	envp[n++] = "HOME=/workspace";
	envp[n++] = "LANG=C.UTF-8";
	envp[n++] = "TERM=dumb";
	envp[n++] = "TMPDIR=/tmp";
	envp[n++] = "USER=root";
	envp[n++] = sess;
	if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(
				       pdata(s, "config"), "net"), "allow")) > 0)
		proxy_env_add(s, pe, envp, &n);
	for (k = 0; e->env && e->env[k]; k++)
		env_set(envp, &n, GUEST_ENV_MAX, e->env[k]);
	envp[n] = NULL;
}

/* exec --background (lib/sandbox/local/nsjobs.c) */
static int local_background(struct box_sbprov_session *s, const struct box_sbexec *e, int dfd,
			    const char *handle, int *pid, int *ran, struct box_err *err)
{
	struct box_nsbox_config c;
	struct box_sbexec x = *e;
	struct proxy_env pe = { .own = 0, .fd = -1 };
	const char *envp[GUEST_ENV_MAX + 1];
	char sess[BOX_SBSTATE_ID_MAX + 16], tool_bin[PATH_MAX];

	guest_env(s, e, &pe, envp, sess, sizeof(sess));
	config_of(s, &c, NULL, tool_bin, sizeof(tool_bin));
	x.env = envp;
	return box_nsbox_background(&c, &x, dfd, handle, pid, ran, err);
}

/* schedule: the runs get the environment as it is now */
static int local_schedule(struct box_sbprov_session *s, const struct box_sbexec *e,
			  const cJSON *argv, int every, char *handle, struct box_err *err)
{
	struct proxy_env pe = { .own = 0, .fd = -1 };
	const char *envp[GUEST_ENV_MAX + 1];
	char sess[BOX_SBSTATE_ID_MAX + 16];

	guest_env(s, e, &pe, envp, sess, sizeof(sess));
	return box_sbjobs_schedule_add(s->sdir, argv, envp, e->cwd, every, handle, err);
}

static int local_exec(struct box_sbprov_session *s, const struct box_sbexec *e,
		      struct box_sbexec_result *r, struct box_err *err)
{
	struct box_nsbox_config c;
	struct box_sbexec x;
	struct box_nsbox_inst i;
	struct proxy_env pe = { .own = 1, .fd = -1 };
	struct net_live nl;
	const char *envp[GUEST_ENV_MAX + 1];
	char sess[BOX_SBSTATE_ID_MAX + 16], tool_bin[PATH_MAX];

	guest_env(s, e, &pe, envp, sess, sizeof(sess));
	if (empty_output(s, err) < 0) {
		if (pe.fd >= 0)
			close(pe.fd);
		return -1;
	}
	config_of(s, &c, NULL, tool_bin, sizeof(tool_bin));
	inst_of(s, &i);
	/* the command gets the whole environment: the base, then the session's and the exec's */
	x = *e;
	x.env = envp;
	nl = (struct net_live){ s, e, &pe, box_netproxy_log_mark(s->sdir), 0, 0 };
	if (e->on_network) {
		x.on_tick = net_tick;
		x.tick_ctx = &nl;
	}
	if (box_nsbox_exec(&i, &c, &x, r, err) < 0) {
		if (pe.fd >= 0)
			close(pe.fd);
		return -1;
	}
	/* the exec's processes have all ended: its listeners go */
	if (pe.fd >= 0)
		close(pe.fd);
	if ((r->extra || (r->extra = cJSON_CreateObject())))
		cJSON_AddItemToObject(r->extra, "limit_scopes",
				      limit_scopes(strcmp(r->limits_enforced_by, "cgroup") == 0));
	add_network(s, e, r, &nl, &pe);
	collect_outputs(s, r);
	return 0;
}

/* The host directory and the path inside it of a guest path of the file API. */
static int file_target(const struct box_sbprov_session *s, const char *path, char *dir,
		       size_t dn, const char **rel, int writing, struct box_err *err)
{
	static const char *const roots[] = { "/workspace", "/input", "/output" };
	size_t k;

	if (path[0] != '/') {
		box_fmt(dir, dn, "%s/workspace", s->sdir);
		*rel = path;
		return 0;
	}
	/* /logs: the full-output logs of truncated execs (full_output_log), to read only */
	if (strncmp(path, "/logs/", 6) == 0) {
		const char *name = path + 6;

		if (writing)
			return box_err_set(err, BOX_E_POLICY, "/logs is read-only"),
			       box_err_path(err, "$.path"), -1;
		if (strncmp(name, "exec-", 5) != 0 || strchr(name, '/') ||
		    strlen(name) < 9 || strcmp(name + strlen(name) - 4, ".log") != 0)
			return box_err_set(err, BOX_E_POLICY, "/logs holds the full-output logs "
					   "of execs only (/logs/exec-....log)"),
			       box_err_path(err, "$.path"), -1;
		box_fmt(dir, dn, "%s/logs", s->sdir);
		*rel = name;
		return 0;
	}
	for (k = 0; k < sizeof(roots) / sizeof(roots[0]); k++) {
		size_t n = strlen(roots[k]);

		if (strncmp(path, roots[k], n) == 0 && (path[n] == 0 || path[n] == '/')) {
			if (writing && k == 1)
				return box_err_set(err, BOX_E_POLICY, "/input is read-only"),
				       box_err_path(err, "$.path"), -1;
			box_fmt(dir, dn, "%s%s", s->sdir, roots[k]);
			*rel = path[n] ? path + n : "/";
			return 0;
		}
	}
	box_err_set(err, BOX_E_POLICY, "the file API reaches /workspace, /input and /output "
		    "only (and reads the exec logs of /logs)");
	box_err_path(err, "$.path");
	return -1;
}

static int open_target(const struct box_sbprov_session *s, const char *path, int writing,
		       struct box_ws *ws, const char **rel, struct box_err *err)
{
	char dir[PATH_MAX];

	struct box_idmap ids;

	if (file_target(s, path, dir, sizeof(dir), rel, writing, err) < 0)
		return -1;
	if (writing && session_ids(s, &ids, err) < 0)
		return -1;
	if (box_ws_open(ws, dir, writing ? lim(s, "disk_bytes", BOX_SANDBOX_DEFAULT_DISK) : -1,
			err) < 0)
		return -1;
	/* what the host writes for the guest is the guest's */
	if (writing && !ids_are_mine(&ids)) {
		ws->own = 1;
		ws->uid = (uid_t)ids.uid;
		ws->gid = (gid_t)ids.gid;
	}
	return 0;
}

static cJSON *local_read(struct box_sbprov_session *s, const char *path, struct box_err *err)
{
	const char *rel;
	struct box_ws ws;
	struct box_buf b, enc;
	cJSON *o;
	int text;

	if (open_target(s, path, 0, &ws, &rel, err) < 0)
		return NULL;
	box_buf_init(&b, (size_t)BOX_SANDBOX_READ_MAX);
	if (box_ws_read(&ws, rel, &b, err) < 0) {
		box_ws_release(&ws);
		box_buf_release(&b);
		return NULL;
	}
	box_ws_release(&ws);
	text = box_utf8_valid(b.data ? b.data : "", b.len) && !memchr(b.data ? b.data : "", 0, b.len);
	box_buf_init(&enc, text ? b.len + 1 : box_base64_encoded_len(b.len) + 1);
	if ((text ? box_buf_append(&enc, b.data ? b.data : "", b.len, err) :
	     box_base64_encode(b.data, b.len, &enc, err)) < 0 ||
	    box_buf_append(&enc, "", 1, err) < 0) {
		box_buf_release(&enc);
		box_buf_release(&b);
		return NULL;
	}
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "path", path);
	box_json_add_int64(o, "size", (int64_t)b.len);
	cJSON_AddStringToObject(o, "content", enc.data);
	cJSON_AddStringToObject(o, "encoding", text ? "utf-8" : "base64");
	box_buf_release(&enc);
	box_buf_release(&b);
	return o;
}

static cJSON *local_write(struct box_sbprov_session *s, const char *path, const void *data,
			  size_t n, struct box_err *err)
{
	const char *rel;
	struct box_ws ws;
	cJSON *o;

	if (open_target(s, path, 1, &ws, &rel, err) < 0)
		return NULL;
	if (host_room(s, (int64_t)n, err) < 0) {
		box_err_path(err, "$.content");
		box_ws_release(&ws);
		return NULL;
	}
	if (box_ws_write(&ws, rel, data, n, 0, err) < 0) {
		box_ws_release(&ws);
		return NULL;
	}
	box_ws_release(&ws);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "path", path);
	box_json_add_int64(o, "size", (int64_t)n);
	return o;
}

/* cp-in (in: the host's tree host to the guest's directory path, at most the room left under
 * disk_bytes, given to the guest's root) and cp-out (the guest's path to the host's host, at
 * most disk_bytes): box-sbfiles does the work, the guest's side resolved inside its root. */
static cJSON *local_copy(struct box_sbprov_session *s, int in, const char *host,
			 const char *path, struct box_err *err)
{
	int64_t disk = lim(s, "disk_bytes", BOX_SANDBOX_DEFAULT_DISK), max = disk;
	char dir[PATH_MAX], maxs[32], owner[64] = "";
	const char *rel, *args[8];
	struct box_idmap ids;

	if (file_target(s, path, dir, sizeof(dir), &rel, in, err) < 0)
		return NULL;
	if (in) {
		struct box_nsbox_inst i;
		struct box_err e;
		int64_t used;

		inst_of(s, &i);
		box_err_init(&e);
		used = box_nsbox_disk_used(s->sdir, i.pid, box_now_ms() + BOX_NSBOX_DISK_WALK_MS,
					   &e);
		if (used < 0)
			return box_err_limit(err, BOX_E_LIMIT, "disk", disk, "bytes", "the session's "
					     "files cannot be measured, so nothing more is written: "
					     "%.300s", e.message), NULL;
		max = disk - used;
		if (max <= 0)
			return box_err_limit(err, BOX_E_LIMIT, "disk", disk, "bytes", "the session's "
					     "files fill disk_bytes (%lld bytes)", (long long)disk),
			       NULL;
		if (session_ids(s, &ids, err) < 0)
			return NULL;
		if (!ids_are_mine(&ids))
			box_fmt(owner, sizeof(owner), "%u:%u", ids.uid, ids.gid);
	}
	box_fmt(maxs, sizeof(maxs), "%lld", (long long)max);
	if (in) {
		const char *a[] = { "cp-in", host, dir, rel, maxs, owner[0] ? owner : NULL, NULL };

		memcpy(args, a, sizeof(a));
	} else {
		const char *a[] = { "cp-out", dir, rel, host, maxs, NULL };

		memcpy(args, a, sizeof(a));
	}
	return box_nsbox_sbfiles_run(args, HELPER_TIMEOUT_MS, "timeout_ms", HELPER_OUT_MAX, err);
}

static cJSON *local_list(struct box_sbprov_session *s, const char *path, struct box_err *err)
{
	const char *rel;
	struct box_ws ws;
	cJSON *o, *list;

	if (open_target(s, path, 0, &ws, &rel, err) < 0)
		return NULL;
	list = box_ws_list(&ws, rel, 10000, err);
	box_ws_release(&ws);
	if (!list)
		return NULL;
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "path", path);
	cJSON_AddItemToObject(o, "entries", list);
	return o;
}

static cJSON *local_checkpoint(struct box_sbprov_session *s, struct box_err *err)
{
	char ws[PATH_MAX], snaps[PATH_MAX];
	const char *args[4] = { "snapshot", ws, snaps, NULL };
	cJSON *res;
	int paused = 0;

	box_fmt(ws, sizeof(ws), "%s/workspace", s->sdir);
	box_fmt(snaps, sizeof(snaps), "%s/snapshots", s->sdir);
	if (mkdir(snaps, 0755) < 0 && errno != EEXIST)
		return box_err_sys(err, "cannot create %s", snaps), NULL;
	/* a still workspace: nothing in the sandbox writes while it is read */
	if (local_pause(s, err) == 0)
		paused = 1;
	box_err_init(err);
	res = run_sbfiles(s->libexec, args, err);
	if (paused)
		(void)local_resume(s, &(struct box_err){ 0 });
	return res;
}

static int local_restore(struct box_sbprov_session *s, const char *from, const char *digest,
			 struct box_err *err)
{
	char snaps[PATH_MAX], max[32], owner[32];
	const char *args[8] = { "restore", snaps, digest, s->sdir, "workspace", max, NULL, NULL };
	int64_t disk = lim(s, "disk_bytes", BOX_SANDBOX_DEFAULT_DISK);
	struct box_idmap ids;
	cJSON *res;

	if (session_ids(s, &ids, err) < 0)
		return -1;
	/* a snapshot whose files hold more than disk_bytes is refused before anything is
	 * replaced (box-sbfiles extracts aside, then swaps) */
	box_fmt(max, sizeof(max), "%lld", (long long)(disk > 0 ? disk : INT64_MAX));
	/* the restored tree is the guest's before it takes the workspace's place */
	if (!ids_are_mine(&ids)) {
		box_fmt(owner, sizeof(owner), "%u:%u", ids.uid, ids.gid);
		args[6] = owner;
	}
	box_fmt(snaps, sizeof(snaps), "%s/%s/snapshots", s->dir, from);
	res = run_sbfiles(s->libexec, args, err);
	cJSON_Delete(res);
	return res ? 0 : -1;
}

/* One member of limit_scopes: what the limit bounds and what holds it. */
static void add_scope(cJSON *o, const char *limit, const char *scope, const char *by)
{
	cJSON *m = cJSON_AddObjectToObject(o, limit);

	if (m) {
		cJSON_AddStringToObject(m, "scope", scope);
		cJSON_AddStringToObject(m, "by", by);
	}
}

/* What each limit bounds, by what (box-sandbox(1), "Limits"). With the sandbox's own cgroups
 * memory and pids bound the whole session (tmpfs pages in /tmp included) and cpu_ms the sum
 * over an exec's processes; without them (an ordinary user, rlimit mode) memory and cpu_ms
 * bound each process on its own (RLIMIT_AS, whose count leaves out tmpfs pages; RLIMIT_CPU in
 * whole seconds), and pids every process of the host user the guest runs as (RLIMIT_NPROC). */
static cJSON *limit_scopes(int cgroup)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	add_scope(o, "memory", cgroup ? "session" : "process", cgroup ? "cgroup" : "rlimit");
	add_scope(o, "pids", cgroup ? "session" : "user", cgroup ? "cgroup" : "rlimit");
	add_scope(o, "cpu_ms", cgroup ? "exec" : "process", cgroup ? "cgroup" : "rlimit");
	add_scope(o, "disk_bytes", "session", "walk");
	add_scope(o, "timeout_ms", "exec", "clock");
	add_scope(o, "max_output_bytes", "exec", "box");
	return o;
}

static void local_status(const struct box_sbprov_session *s, cJSON *o)
{
	const cJSON *h = pdata(s, "holder");
	int cgroup = strcmp(box_json_get_str(h, "cgroup", "none"), "none") != 0;

	cJSON_AddStringToObject(o, "limits_enforced_by", cgroup ? "cgroup" : "rlimit");
	cJSON_AddItemToObject(o, "limit_scopes", limit_scopes(cgroup));
}

/* The keeper's idle check: pause a sandbox nobody used for idle_pause_after_seconds. Runs in
 * the keeper process on the host, never holding the lock while sleeping. */
static int keeper_tick(const void *ctx)
{
	const struct box_sbprov_session *k = ctx;
	struct box_sbstate rec;
	struct box_sbprov_session s = *k;
	struct stat st;
	char p[PATH_MAX];
	int64_t idle_ms, since;
	int lockfd, runlockfd;
	struct box_err e;

	box_err_init(&e);
	idle_ms = lim(k, "idle_pause_after_seconds", BOX_SANDBOX_DEFAULT_IDLE) * 1000;
	box_fmt(p, sizeof(p), "%s/state.json", s.sdir);
	if (stat(p, &st) < 0)
		return -1;
	since = (int64_t)(time(NULL) - st.st_mtime) * 1000;
	if (since < idle_ms)
		return (int)(idle_ms - since + 50 > 3600000 ? 3600000 : idle_ms - since + 50);
	/* a background command that runs (a server, say) keeps the session from being idle */
	if (box_sbjobs_running(s.sdir) > 0)
		return 10000;
	/* an exec holds the instance lock for its whole run: a session running a command is
	 * not idle */
	runlockfd = box_sbstate_lock_instance(s.dir, s.id, 0, &e);
	if (runlockfd < 0)
		return 1000;   /* an operation is running: look again soon */
	lockfd = box_sbstate_lock(s.dir, s.id, 0, &e);
	if (lockfd < 0) {
		close(runlockfd);
		return 1000;
	}
	box_sbstate_init(&rec);
	s.rec = &rec;
	if (box_sbstate_read(s.dir, s.id, &rec, &e) == 0 && rec.state == BOX_SB_RUNNING &&
	    stat(p, &st) == 0 && (time(NULL) - st.st_mtime) * 1000 >= idle_ms &&
	    local_pause(&s, &e) == 0) {
		rec.state = BOX_SB_PAUSED;
		(void)box_sbstate_write(s.dir, &rec, &e);
	}
	box_sbstate_release(&rec);
	close(lockfd);
	close(runlockfd);
	return (int)(idle_ms > 3600000 ? 3600000 : idle_ms);
}

/* The keeper's tool socket: the tools granted at create, loaded once in the keeper. Each
 * call is answered in a child of its own, so that a slow tool never stalls the keeper (nor the
 * next call); the call ends, its tool's process group killed, when its caller hangs up (the
 * exec that made it ended) or the keeper dies. Lua tools run in the box-run found in the
 * keeper's environment, which is that of the create or resume that started it. */
static void keeper_serve(int fd, const void *ctx)
{
	static struct box_toolset *set;
	static char box_run[PATH_MAX];
	static int tried;
	static struct box_tool_call_opts o = { .max_timeout_ms = BOX_TOOL_MAX_TIMEOUT_MS };
	const struct box_sbprov_session *s = ctx;
	const char *path = box_json_get_str(pdata(s, "config"), "tools", NULL);
	struct box_toolset none = { NULL, 0 };
	struct box_err e;
	pid_t keeper = getpid(), child;
	int conn = accept4(fd, NULL, NULL, SOCK_CLOEXEC);

	if (conn < 0)
		return;
	box_err_init(&e);
	if (!tried) {
		tried = 1;
		if (box_tool_find_box_run(box_run, sizeof(box_run), &e) == 0)
			o.box_run = box_run;
		box_err_init(&e);
	}
	/* a set that failed to load (a store entry changed since create) is tried again at
	 * the next call, and meanwhile every call gets the reason */
	if (!set && path)
		set = box_tools_load(path, &e);
	child = fork();
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != keeper)
			_exit(0);
		close(fd);
		box_proc_cancel_on_hangup(conn);
		box_toolsrv_serve_conn(conn, set ? set : &none, &o,
				       !set && path ? &e : NULL);
		_exit(0);
	}
	if (child < 0) {
		box_err_sys(&e, "the keeper cannot fork for a tool call");
		box_toolsrv_serve_conn(conn, NULL, NULL, &e);
	} else {
		close(conn);
	}
}

static int local_net_rules(struct box_sbprov_session *s, const cJSON *allow, const cJSON *deny,
			   struct box_err *err)
{
	if (box_netproxy_check_rules(allow, deny, err) < 0)
		return -1;
	return s ? box_netproxy_save_rules(s->sdir, allow, deny, err) : 0;
}

static int local_expose(struct box_sbprov_session *s, int on, int guest_port, int *host_port,
			struct box_err *err)
{
	return box_netproxy_control(s->sdir, on, guest_port, host_port, err);
}

const struct box_sbprov box_nsbox_provider = {
	.name = "local",
	.keeps_state = 1,
	.retry_gone = 1,
	.tools = 1,
	.tty = 1,
	.configure = local_configure,
	.start = local_start,
	.observe = local_observe,
	.pause = local_pause,
	.resume = local_resume,
	.stop = local_stop,
	.stop_noted = local_stop_noted,
	.exec = local_exec,
	.read = local_read,
	.copy = local_copy,
	.write = local_write,
	.list = local_list,
	.checkpoint = local_checkpoint,
	.restore = local_restore,
	.status = local_status,
	.net_rules = local_net_rules,
	.expose = local_expose,
	.background = local_background,
	.schedule = local_schedule,
};
