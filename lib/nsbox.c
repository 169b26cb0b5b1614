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
#include "atomic.h"
#include "base64.h"
#include "buf.h"
#include "confine.h"
#include "ipc.h"
#include "json.h"
#include "sbcopy.h"
#include "sandbox.h"
#include "sbjail.h"
#include "sbprov.h"
#include "sbstate.h"
#include "tools.h"
#include "toolsrv.h"
#include "utf8.h"
#include "ws.h"
#include "banned.h"

#define NS_FDS 7
#define NS_FLAGS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | \
		  CLONE_NEWUTS)
#define START_TIMEOUT_MS 10000
#define STOP_TIMEOUT_MS 5000
#define FREEZE_TIMEOUT_MS 2000
#define REPORT_MAX 512
#define TICK_MS 50
#define DISK_EVERY_MS 200
#define GRACE_MS 3000

static const char *const reserved[] = {
	"/proc", "/dev", "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/workspace", "/input", "/output", "/tmp", "/run/box",
};

/* Ancestors of what box mounts: a mount there would hide it. */
static const char *const reserved_exact[] = { "/run", "/usr/local", "/usr/local/bin" };

static const char *const sysdirs[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32" };

static const char *const etc_masked_files[] = {
	"shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "security/opasswd", "machine-id",
	"ssh/ssh_host_rsa_key", "ssh/ssh_host_ecdsa_key", "ssh/ssh_host_ed25519_key",
};

static const char *const etc_masked_dirs[] = { "sudoers.d", "ssl/private", "credstore", "docker" };

static const char *const proc_masked_files[] = {
	"kcore", "sysrq-trigger", "keys", "key-users", "timer_list", "kallsyms", "sched_debug",
	"latency_stats", "kmsg", "kpagecount", "kpageflags", "kpagecgroup", "config.gz", "vmcore",
};

static const char *const proc_ro_dirs[] = { "sys", "irq", "bus", "fs", "sysvipc" };
static const char *const proc_masked_dirs[] = { "acpi", "scsi", "asound", "driver" };

static const char *const devices[] = { "null", "zero", "full", "random", "urandom", "tty" };

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

/* ---- the holder ---- */

/* Reports a failure of the holder's set-up on the report pipe and exits. */
static void __attribute__((noreturn)) die(int rep, const char *what, const char *arg)
{
	char msg[REPORT_MAX];
	int n = box_fmt(msg, sizeof(msg), "E%s %.300s: %s\n", what, arg ? arg : "",
			 strerror(errno));

	if (n > 0)
		(void)!write(rep, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
	_exit(1);
}

/* The flags a remount of the bind at path must keep: the kernel refuses to clear the ones it
 * locked when the mount came from a more privileged namespace. */
static unsigned long kept_flags(const char *path)
{
	struct statvfs sv;
	unsigned long f = 0;

	if (statvfs(path, &sv) < 0)
		return 0;
	if (sv.f_flag & ST_NOEXEC)
		f |= MS_NOEXEC;
	if (sv.f_flag & ST_NOATIME)
		f |= MS_NOATIME;
	if (sv.f_flag & ST_NODIRATIME)
		f |= MS_NODIRATIME;
	if (sv.f_flag & ST_RELATIME)
		f |= MS_RELATIME;
	if (sv.f_flag & ST_RDONLY)
		f |= MS_RDONLY;
	return f;
}

static void bind_at(int rep, const char *src, const char *dst, int ro)
{
	unsigned long f;

	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
		die(rep, "bind", dst);
	f = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | kept_flags(dst) | (ro ? MS_RDONLY : 0);
	if (mount(NULL, dst, NULL, f, NULL) < 0)
		die(rep, "remount", dst);
}

static void mkpath(int rep, const char *path, mode_t mode)
{
	char buf[4096];
	size_t i, n = strlen(path);

	if (n >= sizeof(buf))
		die(rep, "mkdir", path);
	memcpy(buf, path, n + 1);
	for (i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != 0)
			continue;
		buf[i] = 0;
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			die(rep, "mkdir", buf);
		buf[i] = i == n ? 0 : '/';
	}
}

static void touch(int rep, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);

	if (fd < 0)
		die(rep, "create", path);
	close(fd);
}

static void mask_file(int rep, const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	if (mount("/dev/null", path, NULL, MS_BIND, NULL) < 0)
		die(rep, "mask", path);
}

static void mask_dir(int rep, const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return;
	if (mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "size=0,mode=000") < 0)
		die(rep, "mask", path);
}

static void path2(char *out, size_t n, const char *a, const char *b)
{
	box_fmt(out, n, "%s/%s", a, b);
}

static void build_dev(int rep, const char *root)
{
	char p[4096], src[64];
	size_t i;

	path2(p, sizeof(p), root, "dev");
	if (mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=755") < 0)
		die(rep, "mount", "/dev");
	for (i = 0; i < sizeof(devices) / sizeof(devices[0]); i++) {
		box_fmt(p, sizeof(p), "%s/dev/%s", root, devices[i]);
		box_fmt(src, sizeof(src), "/dev/%s", devices[i]);
		touch(rep, p);
		if (mount(src, p, NULL, MS_BIND, NULL) < 0)
			die(rep, "bind", src);
	}
	box_fmt(p, sizeof(p), "%s/dev/fd", root);
	(void)!symlink("/proc/self/fd", p);
	box_fmt(p, sizeof(p), "%s/dev/stdin", root);
	(void)!symlink("/proc/self/fd/0", p);
	box_fmt(p, sizeof(p), "%s/dev/stdout", root);
	(void)!symlink("/proc/self/fd/1", p);
	box_fmt(p, sizeof(p), "%s/dev/stderr", root);
	(void)!symlink("/proc/self/fd/2", p);
	box_fmt(p, sizeof(p), "%s/dev/shm", root);
	mkpath(rep, p, 01777);
	if (mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=16m,mode=1777") < 0)
		die(rep, "mount", "/dev/shm");
	box_fmt(p, sizeof(p), "%s/dev", root);
	if (mount(NULL, p, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, "size=64k,mode=755")
	    < 0)
		die(rep, "remount", "/dev");
}

static void build_proc(int rep, const char *root)
{
	char p[4096];
	size_t i;

	path2(p, sizeof(p), root, "proc");
	if (mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		die(rep, "mount", "/proc");
	for (i = 0; i < sizeof(proc_masked_files) / sizeof(proc_masked_files[0]); i++) {
		box_fmt(p, sizeof(p), "%s/proc/%s", root, proc_masked_files[i]);
		mask_file(rep, p);
	}
	for (i = 0; i < sizeof(proc_masked_dirs) / sizeof(proc_masked_dirs[0]); i++) {
		box_fmt(p, sizeof(p), "%s/proc/%s", root, proc_masked_dirs[i]);
		mask_dir(rep, p);
	}
	for (i = 0; i < sizeof(proc_ro_dirs) / sizeof(proc_ro_dirs[0]); i++) {
		struct stat st;

		box_fmt(p, sizeof(p), "%s/proc/%s", root, proc_ro_dirs[i]);
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
			bind_at(rep, p, p, 1);
	}
}

static void lo_up(int rep)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		die(rep, "socket", "lo");
	memset(&ifr, 0, sizeof(ifr));
	box_fmt(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		die(rep, "ioctl", "lo");
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		die(rep, "ioctl", "lo");
	close(s);
}

static void build_root(int rep, const struct box_nsbox_config *c)
{
	char root[4096], p[4096], src[4096], opts[64];
	size_t i;
	struct stat st;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		die(rep, "mount", "/ private");
	box_fmt(root, sizeof(root), "%s/root", c->dir);
	if (mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755") < 0)
		die(rep, "mount", "root tmpfs");
	for (i = 0; i < sizeof(sysdirs) / sizeof(sysdirs[0]); i++) {
		char target[256];
		ssize_t n;

		box_fmt(src, sizeof(src), "/%s", sysdirs[i]);
		path2(p, sizeof(p), root, sysdirs[i]);
		if (lstat(src, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			n = readlink(src, target, sizeof(target) - 1);
			if (n <= 0)
				continue;
			target[n] = 0;
			if (symlink(target, p) < 0)
				die(rep, "symlink", p);
		} else if (S_ISDIR(st.st_mode)) {
			mkpath(rep, p, 0755);
			bind_at(rep, src, p, 1);
		}
	}
	path2(p, sizeof(p), root, "usr");
	mkpath(rep, p, 0755);
	bind_at(rep, "/usr", p, 1);
	path2(p, sizeof(p), root, "etc");
	mkpath(rep, p, 0755);
	bind_at(rep, "/etc", p, 1);
	for (i = 0; i < sizeof(etc_masked_files) / sizeof(etc_masked_files[0]); i++) {
		box_fmt(p, sizeof(p), "%s/etc/%s", root, etc_masked_files[i]);
		mask_file(rep, p);
	}
	for (i = 0; i < sizeof(etc_masked_dirs) / sizeof(etc_masked_dirs[0]); i++) {
		box_fmt(p, sizeof(p), "%s/etc/%s", root, etc_masked_dirs[i]);
		mask_dir(rep, p);
	}
	path2(p, sizeof(p), root, "tmp");
	mkpath(rep, p, 01777);
	box_fmt(opts, sizeof(opts), "size=%lld,mode=1777",
		 (long long)(c->disk_bytes > 0 ? c->disk_bytes : (int64_t)1 << 30));
	if (mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		die(rep, "mount", "/tmp");
	path2(p, sizeof(p), root, "dev");
	mkpath(rep, p, 0755);
	build_dev(rep, root);
	path2(p, sizeof(p), root, "proc");
	mkpath(rep, p, 0555);
	build_proc(rep, root);
	path2(p, sizeof(p), root, "workspace");
	mkpath(rep, p, 0755);
	path2(src, sizeof(src), c->dir, "workspace");
	bind_at(rep, src, p, 0);
	path2(p, sizeof(p), root, "input");
	mkpath(rep, p, 0755);
	path2(src, sizeof(src), c->dir, "input");
	bind_at(rep, src, p, 1);
	path2(p, sizeof(p), root, "output");
	mkpath(rep, p, 0755);
	path2(src, sizeof(src), c->dir, "output");
	bind_at(rep, src, p, 0);
	path2(p, sizeof(p), root, "run/box");
	mkpath(rep, p, 0755);
	path2(src, sizeof(src), c->dir, "run");
	bind_at(rep, src, p, 1);
	if (c->tool_bin) {
		path2(p, sizeof(p), root, "usr/local/bin");
		if (mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=755") < 0)
			die(rep, "mount", "/usr/local/bin");
		path2(p, sizeof(p), root, "usr/local/bin/box-tool");
		touch(rep, p);
		bind_at(rep, c->tool_bin, p, 1);
		path2(p, sizeof(p), root, "usr/local/bin");
		if (mount(NULL, p, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
			  "size=64k,mode=755") < 0)
			die(rep, "remount", "/usr/local/bin");
	}
	for (i = 0; i < c->nmounts; i++) {
		box_fmt(p, sizeof(p), "%s%s", root, c->mounts[i].guest);
		if (stat(c->mounts[i].host, &st) < 0)
			die(rep, "mount source", c->mounts[i].host);
		if (S_ISDIR(st.st_mode)) {
			mkpath(rep, p, 0755);
		} else {
			char *slash;

			box_fmt(src, sizeof(src), "%s", p);
			slash = strrchr(src, '/');
			*slash = 0;
			mkpath(rep, src, 0755);
			touch(rep, p);
		}
		bind_at(rep, c->mounts[i].host, p, c->mounts[i].ro);
	}
	if (mount(NULL, root, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "size=1m,mode=755")
	    < 0)
		die(rep, "remount", "root");
	if (chdir(root) < 0)
		die(rep, "chdir", root);
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		die(rep, "pivot_root", root);
	if (umount2(".", MNT_DETACH) < 0)
		die(rep, "umount", "old root");
	if (chdir("/") < 0)
		die(rep, "chdir", "/");
}

/* PID 1 of the sandbox: reaps whatever is orphaned inside. Every signal is blocked; those that
 * guests send are taken and dropped, and SIGKILL from the host ends the namespace. */
static void __attribute__((noreturn)) holder_loop(void)
{
	sigset_t all;
	siginfo_t si;

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		if (sigwaitinfo(&all, &si) < 0)
			continue;
		if (si.si_signo == SIGCHLD)
			while (waitpid(-1, NULL, WNOHANG) > 0)
				;
	}
}

static void close_from(int lowfd, int keep)
{
	int fd;

	if (keep < lowfd) {
		if (syscall(SYS_close_range, lowfd, ~0U, 0) == 0)
			return;
	} else {
		if (keep > lowfd)
			(void)syscall(SYS_close_range, lowfd, keep - 1, 0);
		if (syscall(SYS_close_range, keep + 1, ~0U, 0) == 0)
			return;
	}
	for (fd = lowfd; fd < 1024; fd++)
		if (fd != keep)
			close(fd);
}

static const char *const ns_names[NS_FDS] = { "user", "mnt", "pid", "net", "ipc", "uts",
					       "cgroup" };

/* The holder's namespaces as fds, for a keeper that may not open them through the holder's
 * pidfd (an ordinary user: the holder is not dumpable). */
static void send_ns(int rep, int sock)
{
	int fds[NS_FDS], k;
	char p[64];
	struct box_err e;

	box_err_init(&e);
	for (k = 0; k < NS_FDS; k++) {
		box_fmt(p, sizeof(p), "/proc/self/ns/%s", ns_names[k]);
		fds[k] = open(p, O_RDONLY | O_CLOEXEC);
		if (fds[k] < 0)
			die(rep, "open", p);
	}
	if (box_ipc_send_fds(sock, fds, NS_FDS, &e) < 0)
		die(rep, "send", "namespaces");
	for (k = 0; k < NS_FDS; k++)
		close(fds[k]);
	close(sock);
}

static void __attribute__((noreturn)) holder_main(const struct box_nsbox_config *c, int rep,
						  int go, int nssock)
{
	char b;

	if (read(go, &b, 1) != 1)
		_exit(1);
	close(go);
	if (unshare(CLONE_NEWCGROUP) < 0)
		die(rep, "unshare", "cgroup");
	build_root(rep, c);
	if (sethostname("box", 3) < 0)
		die(rep, "sethostname", "box");
	lo_up(rep);
	send_ns(rep, nssock);
	prctl(PR_SET_DUMPABLE, 0);
	(void)!write(rep, "R\n", 2);
	close(rep);
	holder_loop();
}

static int write_proc(pid_t pid, const char *file, const char *val)
{
	char p[64];
	int fd, r;

	box_fmt(p, sizeof(p), "/proc/%d/%s", (int)pid, file);
	fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	r = write(fd, val, strlen(val)) == (ssize_t)strlen(val) ? 0 : -1;
	close(fd);
	return r;
}

static int64_t now_ms(void);
static int ctl_listen(const struct box_nsbox_config *c);
static int keeper_tick_outside(const struct box_nsbox_config *c, enum box_cg_mode cg);
static void keeper_spawn(const struct box_nsbox_config *c, enum box_cg_mode cg, int ctl,
			 int pidfd, const int *nsfds, int serve);

/* The keeper: parent of the holder on the host, off the caller's stdio. It maps the holder's
 * ids, puts it in its groups, then waits for it, running the keeper tick meanwhile. */
static void __attribute__((noreturn)) keeper_main(const struct box_nsbox_config *c,
						  enum box_cg_mode cg, int rep)
{
	int go[2], nsp[2], nsfds[NS_FDS], devnull, pidfd, serve, ctl, k;
	pid_t h;
	char msg[64];
	struct box_err err;

	box_err_init(&err);
	setsid();
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull >= 0) {
		dup2(devnull, 0);
		dup2(devnull, 1);
		dup2(devnull, 2);
	}
	/* keep only the report pipe (fd 3) and the served socket (fd 4) */
	rep = fcntl(rep, F_DUPFD_CLOEXEC, 100);
	serve = c->serve_fd >= 0 ? fcntl(c->serve_fd, F_DUPFD_CLOEXEC, 100) : -1;
	if (rep < 0 || dup3(rep, 3, O_CLOEXEC) < 0)
		_exit(1);
	rep = 3;
	if (serve >= 0) {
		if (dup3(serve, 4, O_CLOEXEC) < 0)
			_exit(1);
		serve = 4;
	}
	close_from(serve >= 0 ? 5 : 4, -1);
	if (pipe2(go, O_CLOEXEC) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, nsp) < 0)
		die(rep, "pipe", "");
	for (k = 0; k < NS_FDS; k++)
		nsfds[k] = -1;
	/* the keeper lives in the sandbox's groups: the holder and every command it spawns
	 * inherit them, so an exec never pays for a cgroup migration */
	if (box_cg_join(cg, c->id, 0, &err) < 0) {
		errno = EIO;
		die(rep, "cgroup", err.message);
	}
	ctl = ctl_listen(c);
	if (ctl < 0)
		die(rep, "listen", "ctl.sock");
	h = (pid_t)syscall(SYS_clone, NS_FLAGS | SIGCHLD, NULL, NULL, NULL, NULL);
	if (h < 0)
		die(rep, "clone", "namespaces");
	if (h == 0) {
		close(go[1]);
		close(nsp[0]);
		holder_main(c, rep, go[0], nsp[1]);
	}
	close(go[0]);
	close(nsp[1]);
	box_fmt(msg, sizeof(msg), "0 %u 1", (unsigned)getuid());
	if (write_proc(h, "setgroups", "deny") < 0 || write_proc(h, "uid_map", msg) < 0)
		die(rep, "uid_map", "");
	box_fmt(msg, sizeof(msg), "0 %u 1", (unsigned)getgid());
	if (write_proc(h, "gid_map", msg) < 0)
		die(rep, "gid_map", "");
	if (box_cg_join(cg, c->id, h, &err) < 0) {
		errno = EIO;
		die(rep, "cgroup", err.message);
	}
	box_fmt(msg, sizeof(msg), "P%d\n", (int)h);
	(void)!write(rep, msg, strlen(msg));
	close(rep);
	(void)!write(go[1], "g", 1);
	close(go[1]);
	if (box_ipc_recv_fds(nsp[0], nsfds, NS_FDS, now_ms() + START_TIMEOUT_MS, &err) < 0)
		for (k = 0; k < NS_FDS; k++)
			nsfds[k] = -1;
	close(nsp[0]);
	pidfd = (int)syscall(SYS_pidfd_open, h, 0);
	{
		int64_t next_tick = 0;

		for (;;) {
			struct pollfd pfd[3] = { { pidfd, POLLIN, 0 }, { ctl, POLLIN, 0 },
						 { serve, POLLIN, 0 } };
			int wait_ms = -1;

			if (c->keeper_tick && next_tick >= 0 && now_ms() >= next_tick) {
				int ms = keeper_tick_outside(c, cg);

				next_tick = ms < 0 ? -1 : now_ms() + ms;
			}
			if (next_tick >= 0 && c->keeper_tick)
				wait_ms = (int)(next_tick - now_ms() > 0 ? next_tick - now_ms() : 0);
			if (pidfd < 0) {
				waitpid(h, NULL, 0);
				break;
			}
			if (poll(pfd, serve >= 0 ? 3 : 2, wait_ms) < 0 && errno != EINTR)
				break;
			if (pfd[0].revents) {
				waitpid(h, NULL, 0);
				break;
			}
			if (pfd[1].revents)
				keeper_spawn(c, cg, ctl, pidfd, nsfds, serve);
			if (serve >= 0 && pfd[2].revents && c->keeper_serve)
				c->keeper_serve(serve, c->keeper_ctx);
			while (waitpid(-1, NULL, WNOHANG) > 0)
				;
		}
	}
	_exit(0);
}

static int64_t proc_start_time(pid_t pid)
{
	char p[64], buf[1024], *s;
	int fd, i;
	ssize_t n;

	box_fmt(p, sizeof(p), "/proc/%d/stat", (int)pid);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	s = strrchr(buf, ')');
	if (!s)
		return -1;
	/* field 3 follows ") "; the start time is field 22 */
	for (i = 2; i < 22 && s; i++)
		s = strchr(s + 1, ' ');
	return s ? strtoll(s + 1, NULL, 10) : -1;
}

static char proc_state(pid_t pid)
{
	char p[64], buf[512], *s;
	int fd;
	ssize_t n;

	box_fmt(p, sizeof(p), "/proc/%d/stat", (int)pid);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	s = strrchr(buf, ')');
	return s && s[1] == ' ' ? s[2] : 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int make_dirs(const char *dir, struct box_err *err)
{
	static const char *const sub[] = { "workspace", "input", "output", "root", "logs", "run" };
	char p[4096];
	size_t i;

	for (i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
		path2(p, sizeof(p), dir, sub[i]);
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return box_err_sys(err, "cannot create %s", p);
	}
	return 0;
}

int box_nsbox_start(const struct box_nsbox_config *c, struct box_nsbox_inst *out,
		    struct box_err *err)
{
	int rep[2];
	pid_t k;
	char buf[REPORT_MAX];
	size_t got = 0;
	int64_t deadline;
	pid_t holder = 0;
	int ready = 0;
	enum box_cg_mode cg;
	struct box_cg_limits lim = { c->memory, c->pids };

	if (!box_nsbox_supported())
		return box_err_set(err, BOX_E_UNSUPPORTED, "this kernel has no user namespaces");
	if (c->dir[0] != '/')
		return box_err_set(err, BOX_E_INTERNAL, "session directory must be absolute");
	if (make_dirs(c->dir, err) < 0)
		return -1;
	cg = box_cg_detect();
	if (box_cg_create(cg, c->id, &lim, err) < 0)
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
		keeper_main(c, cg, rep[1]);
	}
	close(rep[1]);
	deadline = now_ms() + START_TIMEOUT_MS;
	/* "P<pid>" from the keeper, then "R" from the holder, or "E<what>" from either */
	while (!ready) {
		struct pollfd pfd = { rep[0], POLLIN, 0 };
		int64_t left = deadline - now_ms();
		ssize_t n;
		char *nl;

		if (left <= 0) {
			box_err_limit(err, BOX_E_TIMEOUT, "start_ms", START_TIMEOUT_MS, "ms",
				      "the sandbox did not start within %d ms", START_TIMEOUT_MS);
			break;
		}
		if (poll(&pfd, 1, (int)left) <= 0)
			continue;
		n = read(rep[0], buf + got, sizeof(buf) - 1 - got);
		if (n <= 0) {
			box_err_set(err, BOX_E_IO, "the sandbox's holder ended while starting");
			break;
		}
		got += (size_t)n;
		buf[got] = 0;
		while ((nl = strchr(buf, '\n'))) {
			*nl = 0;
			if (buf[0] == 'P')
				holder = (pid_t)strtol(buf + 1, NULL, 10);
			else if (buf[0] == 'R')
				ready = 1;
			else if (buf[0] == 'E')
				box_err_set(err, BOX_E_IO, "cannot build the sandbox: %s", buf + 1);
			memmove(buf, nl + 1, got - (size_t)(nl + 1 - buf) + 1);
			got -= (size_t)(nl + 1 - buf);
			if (err->code != BOX_OK)
				break;
		}
		if (err->code != BOX_OK)
			break;
		if (got >= sizeof(buf) - 1) {
			box_err_set(err, BOX_E_INTERNAL, "garbled report from the holder");
			break;
		}
	}
	close(rep[0]);
	waitpid(k, NULL, WNOHANG);
	if (!ready || holder <= 0) {
		struct box_nsbox_inst dead = { holder, -1, cg };

		if (err->code == BOX_OK)
			box_err_set(err, BOX_E_IO, "the sandbox did not report its holder");
		if (holder > 0)
			kill(holder, SIGKILL);
		(void)box_nsbox_stop(&dead, c->id, &(struct box_err){ 0 });
		return -1;
	}
	out->pid = holder;
	out->start = proc_start_time(holder);
	out->cg = cg;
	if (out->start < 0)
		return box_err_set(err, BOX_E_IO, "the sandbox's holder ended right after starting");
	return 0;
}

/* A pidfd of the instance's holder, checked to be the same process the record names. */
static int holder_pidfd(const struct box_nsbox_inst *i)
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
	int fd = holder_pidfd(i);
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
	char p[64], buf[512], *q;
	int fd;
	ssize_t n;

	box_fmt(p, sizeof(p), "/proc/%ld/stat", pid);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	q = strrchr(buf, ')');
	/* ") S PPID ..." */
	return q && q[1] == ' ' && q[2] && q[3] == ' ' ? (pid_t)strtol(q + 4, NULL, 10) : -1;
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

static int set_frozen(const struct box_nsbox_inst *i, const char *id, int frozen,
		      struct box_err *err)
{
	int fd = holder_pidfd(i);

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
	int fd = holder_pidfd(i);

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

/* ---- exec ---- */

/* What the supervisor (PID 1 of the command's own pid namespace) tells the host. */
struct exec_status {
	int32_t stage;      /* 0: the command ended; >0: set-up failed at this stage */
	int32_t err_no;
	int32_t exited, code, sig;
	int32_t timed_out, killed;  /* killed: the host asked (cpu, disk) */
};

enum { ST_DONE, ST_CGROUP, ST_SETNS, ST_FORK, ST_UNSHARE, ST_SUPERVISE };

static const char *const stage_name[] = {
	"", "join the sandbox's groups", "join the sandbox's namespaces", "fork", "unshare",
	"supervise",
};

struct exec_fds {
	int out[2], errp[2], in[2], status[2], ctl[2];
};

static void send_status(int fd, const struct exec_status *s)
{
	(void)!write(fd, s, sizeof(*s));
}

static void __attribute__((noreturn)) fail_stage(int fd, int stage)
{
	struct exec_status s = { stage, errno, 0, 0, 0, 0, 0 };

	send_status(fd, &s);
	_exit(1);
}

static void __attribute__((noreturn)) command_main(const struct box_nsbox_config *c,
						   const struct box_nsbox_exec *x,
						   const struct exec_fds *f, int nocg)
{
	struct box_sbjail j = { 0 };
	struct box_err err;
	extern char **environ;
	const char *cwd = x->cwd ? x->cwd : "/workspace";

	box_err_init(&err);
	setsid();
	if (dup2(f->in[0], 0) < 0 || dup2(f->out[1], 1) < 0 || dup2(f->errp[1], 2) < 0)
		_exit(126);
	if (chdir(cwd) < 0) {
		dprintf(2, "box-sandbox: cannot enter %s: %s\n", cwd, strerror(errno));
		_exit(126);
	}
	j.fsize_bytes = c->disk_bytes;
	j.cpu_seconds = x->cpu_ms > 0 ? (x->cpu_ms + 999) / 1000 : 0;
	j.nofile = 1024;
	if (nocg) {
		j.as_bytes = c->memory;
		j.nproc = c->pids;
	}
	if (box_sbjail_enter(&j, &err) < 0) {
		dprintf(2, "box-sandbox: %s\n", err.message);
		_exit(126);
	}
	environ = (char **)x->envp;
	execvp(x->argv[0], x->argv);
	dprintf(2, "box-sandbox: cannot run '%.200s': %s\n", x->argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

static int64_t mono_ms(void)
{
	return now_ms();
}

/* Ends everything in the sandbox but its holder and the caller: the exec that owns the
 * sandbox (operations on a session are serialised) leaves nothing running behind it. The
 * caller is a subreaper, so orphans come back to it and are reaped here. */
static void kill_all(int64_t until)
{
	int status, rounds;

	for (rounds = 0; rounds < 10000; rounds++) {
		pid_t w;

		kill(-1, SIGKILL);
		while ((w = waitpid(-1, &status, WNOHANG)) > 0)
			;
		if (w < 0 && errno == ECHILD)
			return;
		if (mono_ms() > until)
			return;
		usleep(200);
	}
}

/* The supervisor: a subreaper in the sandbox's pid namespace that starts the command, waits
 * for it under the deadline, and then kills whatever the command left behind, double-forked
 * daemons included (they are re-parented to it). */
static void __attribute__((noreturn)) supervisor_main(const struct box_nsbox_config *c,
						      const struct box_nsbox_exec *x,
						      const struct exec_fds *f, int64_t deadline,
						      int nocg)
{
	struct exec_status s = { 0 };
	sigset_t chld;
	int sfd, done = 0;
	pid_t cmd;

	prctl(PR_SET_DUMPABLE, 0);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	close(f->ctl[1]);
	close(f->status[0]);
	close(f->out[0]);
	close(f->errp[0]);
	if (f->in[1] >= 0)
		close(f->in[1]);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		fail_stage(f->status[1], ST_SUPERVISE);
	cmd = fork();
	if (cmd < 0)
		fail_stage(f->status[1], ST_FORK);
	if (cmd == 0) {
		sigprocmask(SIG_UNBLOCK, &chld, NULL);
		command_main(c, x, f, nocg);
	}
	close(f->in[0]);
	close(f->out[1]);
	close(f->errp[1]);
	while (!done) {
		struct pollfd p[2] = { { sfd, POLLIN, 0 }, { f->ctl[0], POLLIN, 0 } };
		int64_t left = deadline - mono_ms();
		int status;
		pid_t w;

		if (left <= 0) {
			s.timed_out = 1;
			break;
		}
		if (poll(p, 2, left > 1000 ? 1000 : (int)left) < 0 && errno != EINTR)
			break;
		if (p[1].revents) {
			s.killed = 1;
			break;
		}
		if (p[0].revents) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof(si)) > 0)
				;
		}
		while ((w = waitpid(-1, &status, WNOHANG)) > 0) {
			if (w != cmd)
				continue;
			if (WIFEXITED(status)) {
				s.exited = 1;
				s.code = WEXITSTATUS(status);
			} else {
				s.sig = WTERMSIG(status);
			}
			done = 1;
		}
	}
	kill_all(mono_ms() + 5000);
	send_status(f->status[1], &s);
	_exit(0);
}

/* The first process of an exec: into the sandbox's groups (join_cg; BOX_CG_NONE when it was
 * born in them), into the holder's namespaces through its pidfd, then the supervisor in a
 * child (setns of a pid namespace takes effect for children only). */
static void __attribute__((noreturn)) c1_main(int pidfd, const int *nsfds,
					      const struct box_nsbox_config *c,
					      const struct box_nsbox_exec *x,
					      const struct exec_fds *f, int64_t deadline, int nocg,
					      enum box_cg_mode join_cg)
{
	pid_t c2;
	int k;

	if (box_cg_join(join_cg, c->id, 0, &(struct box_err){ 0 }) < 0)
		fail_stage(f->status[1], ST_CGROUP);
	if (setns(pidfd, NS_FLAGS | CLONE_NEWCGROUP) < 0) {
		/* an ordinary user may not join through the non-dumpable holder's pidfd: the
		 * keeper holds the namespaces the holder handed it at birth; the user
		 * namespace goes first, for the capabilities the others need */
		if (errno != EPERM || !nsfds || nsfds[0] < 0)
			fail_stage(f->status[1], ST_SETNS);
		for (k = 0; k < NS_FDS; k++)
			if (setns(nsfds[k], 0) < 0)
				fail_stage(f->status[1], ST_SETNS);
	}
	close(pidfd);
	for (k = 0; nsfds && k < NS_FDS; k++)
		if (nsfds[k] >= 0)
			close(nsfds[k]);
	c2 = fork();
	if (c2 < 0)
		fail_stage(f->status[1], ST_FORK);
	if (c2 > 0) {
		/* C2's pid lives in the sandbox's pid namespace: orphaned, it would go to the
		 * host's init, and the sandbox could not end until that one reaped it */
		close(f->status[1]);
		close(f->out[1]);
		close(f->errp[1]);
		if (f->in[0] >= 0)
			close(f->in[0]);
		if (f->in[1] >= 0)
			close(f->in[1]);
		if (f->ctl[1] >= 0)
			close(f->ctl[1]);
		while (waitpid(c2, NULL, 0) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	supervisor_main(c, x, f, deadline, nocg);
}

/* ---- the keeper spawns commands ---- */

#define SPAWN_REQUEST_MAX ((size_t)32 << 20)
#define SPAWN_IO_MS 5000
#define SPAWN_FDS 5

static int ctl_path(const struct box_nsbox_config *c, char *out, size_t n)
{
	return box_fmt(out, n, "%s/ctl.sock", c->dir);
}

static int ctl_listen(const struct box_nsbox_config *c)
{
	char p[4096];
	struct box_err e;

	box_err_init(&e);
	if (ctl_path(c, p, sizeof(p)) < 0)
		return -1;
	return box_ipc_listen(p, &e);
}

/* The idle tick pauses the sandbox, whose freezer group holds the keeper: it runs in a child
 * that leaves that group first, and hands back when to look again. */
static int keeper_tick_outside(const struct box_nsbox_config *c, enum box_cg_mode cg)
{
	int p[2], ms = 60000;
	pid_t k;

	if (pipe2(p, O_CLOEXEC) < 0)
		return 60000;
	k = fork();
	if (k < 0) {
		close(p[0]);
		close(p[1]);
		return 60000;
	}
	if (k == 0) {
		struct box_err e;

		box_err_init(&e);
		close(p[0]);
		if (box_cg_leave_freezer(cg, &e) == 0)
			ms = c->keeper_tick(c->keeper_ctx);
		(void)!write(p[1], &ms, sizeof(ms));
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], &ms, sizeof(ms)) != (ssize_t)sizeof(ms))
		ms = 60000;
	close(p[0]);
	waitpid(k, NULL, 0);
	return ms;
}

static char **strings_of(const cJSON *arr)
{
	int n = cJSON_GetArraySize(arr), k = 0;
	char **v;
	const cJSON *e;

	if (n > 65536)
		return NULL;
	v = calloc((size_t)n + 1, sizeof(*v));
	if (!v)
		return NULL;
	cJSON_ArrayForEach(e, arr) {
		if (!cJSON_IsString(e)) {
			free(v);
			return NULL;
		}
		v[k++] = e->valuestring;
	}
	return v;
}

/* One request on the control socket: the command and its descriptors; the keeper forks the
 * first process of the exec chain (it joins the holder's namespaces through the keeper's
 * pidfd, taken when the holder was born) and answers "k", or "e" when it could not. */
static void keeper_spawn(const struct box_nsbox_config *c, enum box_cg_mode cg, int ctl,
			 int pidfd, const int *nsfds, int serve)
{
	int conn = accept4(ctl, NULL, NULL, SOCK_CLOEXEC), fds[SPAWN_FDS], k;
	int64_t deadline = box_now_ms() + SPAWN_IO_MS;
	struct box_ipc_in in = BOX_IPC_IN_INIT;
	struct box_buf payload;
	struct box_err e;
	uint8_t op;
	cJSON *req = NULL;
	char **argv = NULL, **envp = NULL;
	char ack = 'e';

	if (conn < 0)
		return;
	box_err_init(&e);
	box_buf_init(&payload, SPAWN_REQUEST_MAX);
	for (k = 0; k < SPAWN_FDS; k++)
		fds[k] = -1;
	if (box_ipc_recv_fds(conn, fds, SPAWN_FDS, deadline, &e) < 0 ||
	    box_ipc_recv(conn, &in, &op, &payload, deadline, &e) != 1)
		goto out;
	{
		struct box_ipc_field fld[1];

		if (op != 'x' || box_ipc_split(payload.data, payload.len, fld, 1) != 1)
			goto out;
		req = box_json_parse(fld[0].p, fld[0].n, &e);
	}
	argv = req ? strings_of(cJSON_GetObjectItemCaseSensitive(req, "argv")) : NULL;
	envp = req ? strings_of(cJSON_GetObjectItemCaseSensitive(req, "env")) : NULL;
	if (argv && envp && argv[0]) {
		struct box_nsbox_exec x = { 0 };
		struct exec_fds f = { .out = { -1, fds[1] }, .errp = { -1, fds[2] },
				      .in = { fds[0], -1 }, .status = { -1, fds[3] },
				      .ctl = { fds[4], -1 } };
		int64_t until = box_json_get_int(req, "deadline", 0);
		pid_t c1;

		x.argv = argv;
		x.envp = envp;
		x.cwd = box_json_get_str(req, "cwd", NULL);
		x.cpu_ms = box_json_get_int(req, "cpu_ms", 0);
		c1 = fork();
		if (c1 == 0) {
			close(conn);
			close(ctl);
			if (serve >= 0)
				close(serve);
			c1_main(pidfd, nsfds, c, &x, &f, until, cg == BOX_CG_NONE, BOX_CG_NONE);
		}
		if (c1 > 0)
			ack = 'k';
	}
out:
	(void)!write(conn, &ack, 1);
	for (k = 0; k < SPAWN_FDS; k++)
		if (fds[k] >= 0)
			close(fds[k]);
	free(argv);
	free(envp);
	cJSON_Delete(req);
	box_buf_release(&payload);
	close(conn);
}

/* The exec asks the keeper for its processes: 0 when the keeper took them, -1 when it could
 * not be asked (an older keeper, a dead one): the caller then starts them itself. */
static int spawn_via_keeper(const struct box_nsbox_config *c, const struct box_nsbox_exec *x,
			    int64_t deadline, const struct exec_fds *f)
{
	char p[4096], ack = 0;
	int fds[SPAWN_FDS] = { f->in[0], f->out[1], f->errp[1], f->status[1], f->ctl[0] };
	int sock, k, r = -1;
	struct box_err e;
	cJSON *req = cJSON_CreateObject(), *argv = cJSON_CreateArray(), *env = cJSON_CreateArray();
	char *text = NULL;
	size_t len = 0;
	struct pollfd pf;

	box_err_init(&e);
	for (k = 0; x->argv[k]; k++)
		cJSON_AddItemToArray(argv, cJSON_CreateString(x->argv[k]));
	for (k = 0; x->envp[k]; k++)
		cJSON_AddItemToArray(env, cJSON_CreateString(x->envp[k]));
	cJSON_AddItemToObject(req, "argv", argv);
	cJSON_AddItemToObject(req, "env", env);
	if (x->cwd)
		cJSON_AddStringToObject(req, "cwd", x->cwd);
	box_json_add_int64(req, "deadline", deadline);
	box_json_add_int64(req, "cpu_ms", x->cpu_ms);
	text = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	if (!text || ctl_path(c, p, sizeof(p)) < 0)
		goto out;
	len = strlen(text);
	sock = box_ipc_connect(p, &e);
	if (sock < 0)
		goto out;
	if (box_ipc_send_fds(sock, fds, SPAWN_FDS, &e) == 0 &&
	    box_ipc_send(sock, 'x', &(struct box_ipc_field){ text, len }, 1,
			 box_now_ms() + SPAWN_IO_MS, &e) == 0) {
		pf = (struct pollfd){ sock, POLLIN, 0 };
		if (poll(&pf, 1, SPAWN_IO_MS) == 1 && read(sock, &ack, 1) == 1 && ack == 'k')
			r = 0;
	}
	close(sock);
out:
	free(text);
	return r;
}

struct capture {
	struct box_buf head[2];     /* per stream, at most max_output_bytes */
	struct box_buf mem;         /* both streams in order until the log is opened */
	int logfd;
	int64_t logged;
	int truncated, log_cut;
	int64_t lines;
	int partial[2];
	size_t max;
	char logpath[4096];
	const struct box_nsbox_config *c;
};

static int open_log(struct capture *cap)
{
	char name[96];
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	box_fmt(name, sizeof(name), "exec-%lld%03ld-%d.log", (long long)ts.tv_sec,
		 ts.tv_nsec / 1000000, (int)getpid());
	box_fmt(cap->logpath, sizeof(cap->logpath), "%s/logs/%s", cap->c->dir, name);
	cap->logfd = open(cap->logpath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (cap->logfd < 0)
		return -1;
	if (box_write_all(cap->logfd, cap->mem.data, cap->mem.len) < 0)
		return -1;
	cap->logged = (int64_t)cap->mem.len;
	box_buf_release(&cap->mem);
	return 0;
}

static void capture_add(struct capture *cap, int stream, const char *p, size_t n)
{
	struct box_buf *h = &cap->head[stream - 1];
	size_t room = h->len < cap->max ? cap->max - h->len : 0;
	const char *q;
	struct box_err ign;

	for (q = p; (q = memchr(q, '\n', (size_t)(p + n - q))); q++)
		cap->lines++;
	cap->partial[stream - 1] = n > 0 ? p[n - 1] != '\n' : cap->partial[stream - 1];
	if (room)
		box_buf_append(h, p, n < room ? n : room, &ign);
	if (n > room)
		cap->truncated = 1;
	if (cap->logfd < 0 && cap->mem.len + n <= cap->max * 2) {
		box_buf_append(&cap->mem, p, n, &ign);
		return;
	}
	if (cap->logfd < 0 && !cap->log_cut && open_log(cap) < 0) {
		cap->log_cut = 1;
		return;
	}
	if (cap->logfd < 0 || cap->log_cut)
		return;
	if (cap->logged + (int64_t)n > BOX_NSBOX_FULL_OUTPUT_MAX) {
		n = (size_t)(BOX_NSBOX_FULL_OUTPUT_MAX - cap->logged);
		cap->log_cut = 1;
	}
	if (box_write_all(cap->logfd, p, n) < 0)
		cap->log_cut = 1;
	cap->logged += (int64_t)n;
}

/* Bytes in /workspace and /output (box_sbcopy_usage: links not followed, bounded walk). */
static int64_t disk_used(const struct box_nsbox_config *c)
{
	static const char *const dirs[] = { "workspace", "output" };
	struct box_err ign;
	int64_t used = 0;
	size_t k;

	for (k = 0; k < 2; k++) {
		char p[4096];
		int d;

		path2(p, sizeof(p), c->dir, dirs[k]);
		d = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (d >= 0) {
			int64_t u = box_sbcopy_usage(d, 1000000, &ign);

			used += u > 0 ? u : 0;
			close(d);
		}
	}
	return used;
}

static void prune_logs(const char *dir)
{
	char p[4096];
	struct dirent **names;
	int n, k;

	path2(p, sizeof(p), dir, "logs");
	n = scandir(p, &names, NULL, alphasort);
	if (n < 0)
		return;
	for (k = 0; k < n; k++) {
		if (strncmp(names[k]->d_name, "exec-", 5) == 0 &&
		    k < n - BOX_NSBOX_LOGS_KEPT - 2) {
			char f[4096 + 300];

			box_fmt(f, sizeof(f), "%s/%s", p, names[k]->d_name);
			unlink(f);
		}
		free(names[k]);
	}
	free(names);
}

static const char *sig_name(int sig)
{
	static char buf[16];
	const char *abbrev = sigabbrev_np(sig);

	if (!abbrev)
		return "SIGUNKNOWN";
	box_fmt(buf, sizeof(buf), "SIG%s", abbrev);
	return buf;
}

static void close_pair(int p[2])
{
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	p[0] = p[1] = -1;
}

int box_nsbox_exec(const struct box_nsbox_inst *i, const struct box_nsbox_config *c,
		   const struct box_nsbox_exec *x, struct box_sbexec_result *r, struct box_err *err)
{
	struct box_sbexec_facts facts = { 0 };
	enum box_sbexec_limit seen = BOX_SBEXEC_LIMIT_NONE;
	int rc = -1;
	struct exec_fds f = { { -1, -1 }, { -1, -1 }, { -1, -1 }, { -1, -1 }, { -1, -1 } };
	struct exec_status st = { 0 };
	struct box_cg_counters before, after;
	struct capture cap;
	int pidfd, have_status = 0, nocg = i->cg == BOX_CG_NONE;
	int64_t start = mono_ms(), deadline = start + x->timeout_ms, last_disk = start;
	size_t status_got = 0, in_off = 0;
	pid_t c1;

	memset(&cap, 0, sizeof(cap));
	cap.logfd = -1;
	cap.c = c;
	cap.max = x->max_output_bytes > 0 ? (size_t)x->max_output_bytes : 1 << 20;
	box_buf_init(&cap.head[0], cap.max);
	box_buf_init(&cap.head[1], cap.max);
	box_buf_init(&cap.mem, cap.max * 2);
	pidfd = holder_pidfd(i);
	if (pidfd < 0) {
		box_err_set(err, BOX_E_NOT_FOUND, "the sandbox's holder is gone");
		goto out;
	}
	if (pipe2(f.out, O_CLOEXEC) < 0 || pipe2(f.errp, O_CLOEXEC) < 0 ||
	    pipe2(f.status, O_CLOEXEC) < 0 || pipe2(f.ctl, O_CLOEXEC) < 0) {
		box_err_sys(err, "pipe");
		goto out;
	}
	if (x->stdin_data) {
		if (pipe2(f.in, O_CLOEXEC) < 0) {
			box_err_sys(err, "pipe");
			goto out;
		}
	} else {
		f.in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (f.in[0] < 0) {
			box_err_sys(err, "cannot open /dev/null");
			goto out;
		}
	}
	box_cg_counters(i->cg, c->id, &before);
	if (spawn_via_keeper(c, x, deadline, &f) == 0) {
		c1 = 0;
		goto spawned;
	}
	c1 = fork();
	if (c1 < 0) {
		box_err_sys(err, "fork");
		goto out;
	}
	if (c1 == 0)
		c1_main(pidfd, NULL, c, x, &f, deadline, nocg, i->cg);
spawned:
	close(pidfd);
	pidfd = -1;
	close(f.out[1]);
	close(f.errp[1]);
	close(f.status[1]);
	close(f.ctl[0]);
	close(f.in[0]);
	f.out[1] = f.errp[1] = f.status[1] = f.ctl[0] = f.in[0] = -1;
	if (f.in[1] >= 0)
		fcntl(f.in[1], F_SETFL, O_NONBLOCK);
	/* output until both streams close and the supervisor has reported */
	while (f.out[0] >= 0 || f.errp[0] >= 0 || (!have_status && f.status[0] >= 0)) {
		struct pollfd p[4];
		int np = 0, k, wait_ms;
		int64_t now = mono_ms();

		if (now > deadline + GRACE_MS) {
			if (f.ctl[1] >= 0)
				close(f.ctl[1]);
			f.ctl[1] = -1;
			if (now > deadline + 2 * GRACE_MS)
				break;
		}
		p[np++] = (struct pollfd){ f.out[0], POLLIN, 0 };
		p[np++] = (struct pollfd){ f.errp[0], POLLIN, 0 };
		p[np++] = (struct pollfd){ have_status ? -1 : f.status[0], POLLIN, 0 };
		p[np++] = (struct pollfd){ f.in[1], POLLOUT, 0 };
		wait_ms = (x->cpu_ms > 0 && !nocg) || c->disk_bytes > 0 ? TICK_MS : 1000;
		if (poll(p, (nfds_t)np, wait_ms) < 0 && errno != EINTR)
			break;
		for (k = 0; k < 2; k++) {
			char buf[65536];
			ssize_t n;
			int *fd = k == 0 ? &f.out[0] : &f.errp[0];

			if (!p[k].revents || *fd < 0)
				continue;
			n = read(*fd, buf, sizeof(buf));
			if (n > 0) {
				capture_add(&cap, k + 1, buf, (size_t)n);
				if (x->on_output)
					x->on_output(x->ctx, k + 1, buf, (size_t)n);
			} else if (n == 0 || errno != EINTR) {
				close(*fd);
				*fd = -1;
			}
		}
		if (p[2].revents && !have_status) {
			ssize_t n = read(f.status[0], (char *)&st + status_got, sizeof(st) - status_got);

			if (n > 0)
				status_got += (size_t)n;
			if (status_got == sizeof(st))
				have_status = 1;
			if (n <= 0) {
				close(f.status[0]);
				f.status[0] = -1;
			}
		}
		if (p[3].revents && f.in[1] >= 0) {
			ssize_t n = write(f.in[1], (const char *)x->stdin_data + in_off,
					  x->stdin_len - in_off);

			if (n > 0)
				in_off += (size_t)n;
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				in_off = x->stdin_len;
		}
		if (f.in[1] >= 0 && in_off >= x->stdin_len) {
			close(f.in[1]);
			f.in[1] = -1;
		}
		now = mono_ms();
		if (!seen && x->cpu_ms > 0 && !nocg) {
			box_cg_counters(i->cg, c->id, &after);
			if (after.cpu_ns >= 0 && before.cpu_ns >= 0 &&
			    (after.cpu_ns - before.cpu_ns) / 1000000 > x->cpu_ms)
				seen = BOX_SBEXEC_LIMIT_CPU;
		}
		if (!seen && c->disk_bytes > 0 && now - last_disk >= DISK_EVERY_MS) {
			last_disk = now;
			if (disk_used(c) >= c->disk_bytes)
				seen = BOX_SBEXEC_LIMIT_DISK;
		}
		if (seen && f.ctl[1] >= 0) {
			(void)!write(f.ctl[1], "k", 1);
			close(f.ctl[1]);
			f.ctl[1] = -1;
		}
	}
	if (c1 > 0)
		waitpid(c1, NULL, 0);
	if (!have_status) {
		/* kill -1 inside reaches the supervisor too: what it left may still run, so the
		 * instance ends, and the next operation replaces it from the kept workspace */
		(void)box_nsbox_stop(i, c->id, &(struct box_err){ 0 });
		box_err_set(err, BOX_E_GUEST, "the command killed its supervisor; the sandbox's "
			    "processes were ended and the next operation restarts it");
		goto out;
	}
	if (st.stage != ST_DONE) {
		errno = st.err_no;
		if (st.stage == ST_SETNS && (errno == ESRCH || errno == EBADF))
			box_err_set(err, BOX_E_NOT_FOUND, "the sandbox's holder is gone");
		else
			box_err_sys(err, "cannot %s", st.stage < 6 ? stage_name[st.stage] : "start");
		goto out;
	}
	box_cg_counters(i->cg, c->id, &after);
	facts.timed_out = st.timed_out;
	facts.seen = seen;
	/* a fast writer can fill the disk between two looks: look once more at the end */
	facts.disk_full = seen == BOX_SBEXEC_LIMIT_NONE && c->disk_bytes > 0 &&
			  disk_used(c) >= c->disk_bytes;
	facts.exited = st.exited;
	facts.code = st.code;
	facts.sig = st.sig;
	facts.oom_kills = before.oom_kills >= 0 && after.oom_kills >= 0 ?
			  after.oom_kills - before.oom_kills : -1;
	facts.pids_max_hits = before.pids_max_hits >= 0 && after.pids_max_hits >= 0 ?
			      after.pids_max_hits - before.pids_max_hits : -1;
	r->limit = box_sbexec_classify(&facts);
	r->exited = st.exited;
	r->exit_code = st.code;
	if (st.sig)
		box_fmt(r->signal, sizeof(r->signal), "%s", sig_name(st.sig));
	else if (st.timed_out || st.killed)
		box_fmt(r->signal, sizeof(r->signal), "SIGKILL");
	if (box_sbexec_set_output(r, 1, cap.head[0].data, cap.head[0].len, err) < 0 ||
	    box_sbexec_set_output(r, 2, cap.head[1].data, cap.head[1].len, err) < 0)
		goto out;
	r->truncated = cap.truncated;
	r->total_lines = cap.lines + cap.partial[0] + cap.partial[1];
	if (cap.truncated && cap.logfd >= 0) {
		r->full_output_path = strdup(cap.logpath);
		r->full_output_truncated = cap.log_cut;
	}
	r->duration_ms = mono_ms() - start;
	box_fmt(r->limits_enforced_by, sizeof(r->limits_enforced_by), "%s",
		nocg ? "rlimit" : "cgroup");
	rc = 0;
out:
	if (pidfd >= 0)
		close(pidfd);
	close_pair(f.out);
	close_pair(f.errp);
	close_pair(f.in);
	close_pair(f.status);
	close_pair(f.ctl);
	if (cap.logfd >= 0) {
		close(cap.logfd);
		if (!cap.truncated)
			unlink(cap.logpath);
		else
			prune_logs(c->dir);
	}
	box_buf_release(&cap.head[0]);
	box_buf_release(&cap.head[1]);
	box_buf_release(&cap.mem);
	return rc;
}

/* ---- the local provider of box-sandbox's sessions (struct box_sbprov) ---- */

#define HELPER_OUT_MAX ((size_t)16 << 20)
#define HELPER_TIMEOUT_S 600
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

/* box-sbfiles: the helper that links libcrypto and libarchive (box-sandbox itself does not) */
static cJSON *run_sbfiles(const char *libexec, const char *const *args, struct box_err *err)
{
	char path[PATH_MAX];
	const char *argv[8];
	int out[2], status, i;
	pid_t pid;
	struct box_buf b;
	cJSON *res;

	box_fmt(path, sizeof(path), "%s/box-sbfiles", libexec);
	if (access(path, X_OK) < 0)
		return box_err_sys(err, "the helper %s cannot be run (set BOX_LIBEXEC_DIR or "
				   "reinstall box)", path), NULL;
	argv[0] = "box-sbfiles";
	for (i = 0; args[i] && i < 6; i++)
		argv[i + 1] = args[i];
	argv[i + 1] = NULL;
	if (pipe2(out, O_CLOEXEC) < 0)
		return box_err_sys(err, "pipe"), NULL;
	pid = fork();
	if (pid < 0) {
		close(out[0]);
		close(out[1]);
		return box_err_sys(err, "fork"), NULL;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR);

		dup2(devnull, 0);
		dup2(out[1], 1);
		alarm(HELPER_TIMEOUT_S);
		execv(path, (char *const *)argv);
		_exit(127);
	}
	close(out[1]);
	box_buf_init(&b, HELPER_OUT_MAX);
	i = box_buf_read_fd(&b, out[0], err);
	close(out[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (i < 0) {
		box_buf_release(&b);
		return NULL;
	}
	res = box_json_parse(b.data ? b.data : "", b.len, err);
	box_buf_release(&b);
	if (!res)
		return box_err_set(err, BOX_E_INTERNAL, "box-sbfiles printed no JSON"), NULL;
	if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(res, "ok"))) {
		box_err_from_json(err, cJSON_GetObjectItemCaseSensitive(res, "error"));
		cJSON_Delete(res);
		return NULL;
	}
	return res;
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

static void config_of(const struct box_sbprov_session *s, struct box_nsbox_config *c,
		      const struct box_nsbox_mounts *ms, char *tool_bin, size_t tn)
{
	memset(c, 0, sizeof(*c));
	c->dir = s->sdir;
	c->id = s->id;
	c->memory = lim(s, "memory", BOX_SANDBOX_DEFAULT_MEMORY);
	c->pids = lim(s, "pids", BOX_SANDBOX_DEFAULT_PIDS);
	c->disk_bytes = lim(s, "disk_bytes", BOX_SANDBOX_DEFAULT_DISK);
	c->mounts = ms ? ms->m : NULL;
	c->nmounts = ms ? ms->n : 0;
	box_fmt(tool_bin, tn, "%s/box-tool", s->libexec);
	c->tool_bin = box_json_get_str(pdata(s, "config"), "tools", NULL) ? tool_bin : NULL;
	c->serve_fd = -1;
	c->keeper_ctx = s;
	if (lim(s, "idle_pause_after_seconds", BOX_SANDBOX_DEFAULT_IDLE) > 0)
		c->keeper_tick = keeper_tick;
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
	cJSON_AddItemToObject(config, "mounts", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(
				      req, "mount"), 1) ?: cJSON_CreateArray());
	if (tools) {
		char abs[PATH_MAX];
		struct box_toolset *set;

		if (!realpath(tools, abs)) {
			box_err_sys(err, "tools file %.200s", tools);
			err->code = BOX_E_NOT_FOUND;
			box_err_path(err, "$.tools");
			return -1;
		}
		set = box_tools_load(abs, err);
		if (!set)
			return -1;
		box_tools_free(set);
		cJSON_AddStringToObject(config, "tools", abs);
	}
	return 0;
}

/* --input: each file or directory copied into the session's input/ under its base name */
static int copy_inputs(const struct box_sbprov_session *s, const cJSON *inputs,
		       struct box_err *err)
{
	char p[PATH_MAX];
	const cJSON *e;
	int d, idx = 0;

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
		if (box_sbcopy_in(e->valuestring, d, base, NULL, &st, err) < 0) {
			close(d);
			box_err_path(err, path);
			return -1;
		}
	}
	close(d);
	return 0;
}

/* The tool socket the keeper serves, when the session was granted tools. */
static int tool_socket(const struct box_sbprov_session *s, const struct box_nsbox_config *c,
		       struct box_err *err)
{
	char sock[PATH_MAX];

	if (access(c->tool_bin, X_OK) < 0)
		return box_err_sys(err, "box-tool (%s) cannot be run (set BOX_LIBEXEC_DIR or "
				   "reinstall box)", c->tool_bin);
	box_fmt(sock, sizeof(sock), "%s/run", s->sdir);
	if (mkdir(sock, 0755) < 0 && errno != EEXIST)
		return box_err_sys(err, "cannot create %s", sock);
	box_fmt(sock, sizeof(sock), "%s/run/tool.sock", s->sdir);
	return box_toolsrv_listen(sock, err);
}

static int local_start(struct box_sbprov_session *s, const cJSON *create_req,
		       struct box_err *err)
{
	struct box_nsbox_config c;
	struct box_nsbox_inst i;
	struct box_nsbox_mounts ms;
	char tool_bin[PATH_MAX];
	cJSON *h;
	int r = -1;

	if (create_req && copy_inputs(s, cJSON_GetObjectItemCaseSensitive(create_req, "input"),
				      err) < 0)
		return -1;
	if (box_nsbox_parse_mounts(cJSON_GetObjectItemCaseSensitive(pdata(s, "config"), "mounts"),
				   &ms, err) < 0)
		return -1;
	config_of(s, &c, &ms, tool_bin, sizeof(tool_bin));
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
	cJSON_DeleteItemFromObjectCaseSensitive(s->rec->provider_data, "holder");
	cJSON_AddItemToObject(s->rec->provider_data, "holder", h);
	r = 0;
out:
	if (c.serve_fd >= 0)
		close(c.serve_fd);
	box_nsbox_mounts_release(&ms);
	return r;
}

static int local_observe(struct box_sbprov_session *s, struct box_err *err)
{
	struct box_nsbox_inst i;

	(void)err;
	inst_of(s, &i);
	return box_nsbox_observe(&i, s->id);
}

static int local_pause(struct box_sbprov_session *s, struct box_err *err)
{
	struct box_nsbox_inst i;

	inst_of(s, &i);
	return box_nsbox_pause(&i, s->id, err);
}

static int local_resume(struct box_sbprov_session *s, struct box_err *err)
{
	struct box_nsbox_inst i;

	inst_of(s, &i);
	return box_nsbox_resume(&i, s->id, err);
}

static int local_stop(struct box_sbprov_session *s, struct box_err *err)
{
	struct box_nsbox_inst i;

	inst_of(s, &i);
	return box_nsbox_stop(&i, s->id, err);
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
	r = box_sbcopy_empty_dir(d, err);
	close(d);
	return r;
}

/* Files the command left in /output: [{"path","size","sha256"}], listed by box-sbfiles. */
static int collect_outputs(const struct box_sbprov_session *s, struct box_sbexec_result *r,
			   struct box_err *err)
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
		return 0;
	o = run_sbfiles(s->libexec, args, err);
	if (!o)
		return -1;
	files = cJSON_DetachItemFromObjectCaseSensitive(o, "outputs");
	cJSON_Delete(o);
	cJSON_Delete(r->outputs);
	r->outputs = files;
	return 0;
}

static int local_exec(struct box_sbprov_session *s, const struct box_sbexec *e,
		      struct box_sbexec_result *r, struct box_err *err)
{
	struct box_nsbox_config c;
	struct box_nsbox_exec x;
	struct box_nsbox_inst i;
	const char *envp[GUEST_ENV_MAX + 1];
	char sess[BOX_SBSTATE_ID_MAX + 16], tool_bin[PATH_MAX];
	size_t n = 0, k;

	box_fmt(sess, sizeof(sess), "BOX_SESSION=%s", s->id);
	envp[n++] = "PATH=" GUEST_PATH;
	envp[n++] = "HOME=/workspace";
	envp[n++] = "LANG=C.UTF-8";
	envp[n++] = "TERM=dumb";
	envp[n++] = "TMPDIR=/tmp";
	envp[n++] = "USER=root";
	envp[n++] = sess;
	for (k = 0; e->env && e->env[k]; k++)
		env_set(envp, &n, GUEST_ENV_MAX, e->env[k]);
	envp[n] = NULL;
	if (empty_output(s, err) < 0)
		return -1;
	config_of(s, &c, NULL, tool_bin, sizeof(tool_bin));
	inst_of(s, &i);
	memset(&x, 0, sizeof(x));
	x.argv = (char *const *)e->argv;
	x.envp = (char *const *)envp;
	x.cwd = e->cwd;
	x.stdin_data = e->stdin_data;
	x.stdin_len = e->stdin_len;
	x.timeout_ms = e->timeout_ms;
	x.cpu_ms = e->cpu_ms;
	x.max_output_bytes = e->max_output_bytes;
	x.on_output = e->on_output;
	x.ctx = e->ctx;
	if (box_nsbox_exec(&i, &c, &x, r, err) < 0)
		return -1;
	return collect_outputs(s, r, err);
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
	box_err_set(err, BOX_E_POLICY, "the file API reaches /workspace, /input and /output only");
	box_err_path(err, "$.path");
	return -1;
}

static int open_target(const struct box_sbprov_session *s, const char *path, int writing,
		       struct box_ws *ws, const char **rel, struct box_err *err)
{
	char dir[PATH_MAX];

	if (file_target(s, path, dir, sizeof(dir), rel, writing, err) < 0)
		return -1;
	return box_ws_open(ws, dir, writing ? lim(s, "disk_bytes", BOX_SANDBOX_DEFAULT_DISK) : -1,
			   err);
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
	char snaps[PATH_MAX];
	const char *args[6] = { "restore", snaps, digest, s->sdir, "workspace", NULL };
	cJSON *res;

	box_fmt(snaps, sizeof(snaps), "%s/%s/snapshots", s->dir, from);
	res = run_sbfiles(s->libexec, args, err);
	cJSON_Delete(res);
	return res ? 0 : -1;
}

static void local_status(const struct box_sbprov_session *s, cJSON *o)
{
	const cJSON *h = pdata(s, "holder");

	cJSON_AddStringToObject(o, "limits_enforced_by",
				strcmp(box_json_get_str(h, "cgroup", "none"), "none") ?
				"cgroup" : "rlimit");
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
	int lockfd;
	struct box_err e;

	box_err_init(&e);
	idle_ms = lim(k, "idle_pause_after_seconds", BOX_SANDBOX_DEFAULT_IDLE) * 1000;
	box_fmt(p, sizeof(p), "%s/state.json", s.sdir);
	if (stat(p, &st) < 0)
		return -1;
	since = (int64_t)(time(NULL) - st.st_mtime) * 1000;
	if (since < idle_ms)
		return (int)(idle_ms - since + 50 > 3600000 ? 3600000 : idle_ms - since + 50);
	lockfd = box_sbstate_lock(s.dir, s.id, 0, &e);
	if (lockfd < 0)
		return 1000;   /* an operation is running: look again soon */
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
	return (int)(idle_ms > 3600000 ? 3600000 : idle_ms);
}

/* The keeper's tool socket: the tools granted at create, loaded once, answered one
 * connection at a time. Lua tools run in the box-run found in the keeper's environment,
 * which is that of the create or resume that started it. */
static void keeper_serve(int fd, const void *ctx)
{
	static struct box_toolset *set;
	static char box_run[PATH_MAX];
	static int tried;
	static struct box_tool_call_opts o = { .max_timeout_ms = BOX_TOOL_MAX_TIMEOUT_MS };
	const struct box_sbprov_session *s = ctx;
	struct box_toolset none = { NULL, 0 };

	if (!tried) {
		struct box_err e;
		const char *path = box_json_get_str(pdata(s, "config"), "tools", NULL);

		box_err_init(&e);
		tried = 1;
		set = path ? box_tools_load(path, &e) : NULL;
		if (box_tool_find_box_run(box_run, sizeof(box_run), &e) == 0)
			o.box_run = box_run;
	}
	box_toolsrv_serve_one(fd, set ? set : &none, &o);
}

const struct box_sbprov box_nsbox_provider = {
	.name = "local",
	.keeps_state = 1,
	.retry_gone = 1,
	.tools = 1,
	.configure = local_configure,
	.start = local_start,
	.observe = local_observe,
	.pause = local_pause,
	.resume = local_resume,
	.stop = local_stop,
	.exec = local_exec,
	.read = local_read,
	.write = local_write,
	.list = local_list,
	.checkpoint = local_checkpoint,
	.restore = local_restore,
	.status = local_status,
};
