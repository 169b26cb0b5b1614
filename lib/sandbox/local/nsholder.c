/* The holder: PID 1 of the sandbox's namespaces, which builds the root and then only reaps. */
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
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nsbox.h"
#include "proc.h"
#include "buf.h"
#include "confine.h"
#include "ipc.h"
#include "nsroles.h"
#include "banned.h"

static const char *const sysdirs[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32" };

static const char *const etc_masked_files[] = {
	"shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "security/opasswd", "machine-id",
	"ssh/ssh_host_rsa_key", "ssh/ssh_host_ecdsa_key", "ssh/ssh_host_ed25519_key",
};

static const char *const etc_masked_dirs[] = { "sudoers.d", "ssl/private", "credstore", "docker" };

static const char *const proc_masked_files[] = {
	"kcore", "sysrq-trigger", "keys", "key-users", "timer_list", "kallsyms", "sched_debug",
	"latency_stats", "kmsg", "kpagecount", "kpageflags", "kpagecgroup", "config.gz", "vmcore",
	"cmdline",
};

static const char *const proc_ro_dirs[] = { "sys", "irq", "bus", "fs", "sysvipc" };
static const char *const proc_masked_dirs[] = { "acpi", "scsi", "asound", "driver" };

static const char *const devices[] = { "null", "zero", "full", "random", "urandom", "tty" };

/* Reports a failure of the holder's set-up on the report pipe and exits. */
void box_nsbox_die(int rep, const char *what, const char *arg)
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
		box_nsbox_die(rep, "bind", dst);
	f = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | kept_flags(dst) | (ro ? MS_RDONLY : 0);
	if (mount(NULL, dst, NULL, f, NULL) < 0)
		box_nsbox_die(rep, "remount", dst);
}

static void mkpath(int rep, const char *path, mode_t mode)
{
	char buf[4096];
	size_t i, n = strlen(path);

	if (n >= sizeof(buf))
		box_nsbox_die(rep, "mkdir", path);
	memcpy(buf, path, n + 1);
	for (i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != 0)
			continue;
		buf[i] = 0;
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			box_nsbox_die(rep, "mkdir", buf);
		buf[i] = i == n ? 0 : '/';
	}
}

static void touch(int rep, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);

	if (fd < 0)
		box_nsbox_die(rep, "create", path);
	close(fd);
}

static void mask_file(int rep, const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	if (mount("/dev/null", path, NULL, MS_BIND, NULL) < 0)
		box_nsbox_die(rep, "mask", path);
}

static void mask_dir(int rep, const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return;
	if (mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "size=0,mode=000") < 0)
		box_nsbox_die(rep, "mask", path);
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
		box_nsbox_die(rep, "mount", "/dev");
	for (i = 0; i < sizeof(devices) / sizeof(devices[0]); i++) {
		box_fmt(p, sizeof(p), "%s/dev/%s", root, devices[i]);
		box_fmt(src, sizeof(src), "/dev/%s", devices[i]);
		touch(rep, p);
		if (mount(src, p, NULL, MS_BIND, NULL) < 0)
			box_nsbox_die(rep, "bind", src);
	}
	box_fmt(p, sizeof(p), "%s/dev/fd", root);
	(void)!symlink("/proc/self/fd", p);
	box_fmt(p, sizeof(p), "%s/dev/stdin", root);
	(void)!symlink("/proc/self/fd/0", p);
	box_fmt(p, sizeof(p), "%s/dev/stdout", root);
	(void)!symlink("/proc/self/fd/1", p);
	box_fmt(p, sizeof(p), "%s/dev/stderr", root);
	(void)!symlink("/proc/self/fd/2", p);
	/* the guest's own terminals (shell, exec --tty): a devpts instance of its own, whose
	 * masters box holds; no host terminal is ever in the guest's reach. A kernel that
	 * refuses it leaves the sandbox without terminals (a terminal exec then fails to open
	 * one), not without a sandbox. */
	box_fmt(p, sizeof(p), "%s/dev/pts", root);
	mkpath(rep, p, 0755);
	if (mount("devpts", p, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,"
		  "mode=0620") == 0) {
		box_fmt(p, sizeof(p), "%s/dev/ptmx", root);
		(void)!symlink("pts/ptmx", p);
	}
	box_fmt(p, sizeof(p), "%s/dev/shm", root);
	mkpath(rep, p, 01777);
	if (mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=16m,mode=1777") < 0)
		box_nsbox_die(rep, "mount", "/dev/shm");
	box_fmt(p, sizeof(p), "%s/dev", root);
	if (mount(NULL, p, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, "size=64k,mode=755")
	    < 0)
		box_nsbox_die(rep, "remount", "/dev");
}

/* The guest's own boot_id: a random version 4 UUID in a file of a tmpfs of its own, mounted
 * for a moment over /tmp, bound over /proc/sys/kernel/random/boot_id, then unmounted (the
 * bind keeps it; nothing is unlinked, which would keep the root from becoming read-only). */
static void own_boot_id(int rep, const char *root)
{
	unsigned char r[16];
	char tmp[4096], p[4096], dst[4096], id[40];
	int fd, n;

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		box_nsbox_die(rep, "getrandom", "boot_id");
	r[6] = (unsigned char)((r[6] & 0x0f) | 0x40);
	r[8] = (unsigned char)((r[8] & 0x3f) | 0x80);
	n = box_fmt(id, sizeof(id), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		    "%02x%02x%02x%02x%02x%02x\n", r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7],
		    r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]);
	path2(tmp, sizeof(tmp), root, "tmp");
	box_fmt(p, sizeof(p), "%s/tmp/boot_id", root);
	box_fmt(dst, sizeof(dst), "%s/proc/sys/kernel/random/boot_id", root);
	if (mount("tmpfs", tmp, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=755") < 0)
		box_nsbox_die(rep, "mount", "boot_id");
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
	if (fd < 0 || n < 0 || write(fd, id, (size_t)n) != n)
		box_nsbox_die(rep, "create", "boot_id");
	close(fd);
	if (mount(p, dst, NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV |
		  MS_NOEXEC, NULL) < 0)
		box_nsbox_die(rep, "bind", "boot_id");
	if (umount2(tmp, 0) < 0)
		box_nsbox_die(rep, "umount", "boot_id");
}

static void build_proc(int rep, const char *root)
{
	char p[4096];
	size_t i;

	path2(p, sizeof(p), root, "proc");
	if (mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		box_nsbox_die(rep, "mount", "/proc");
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
	own_boot_id(rep, root);
}

static void lo_up(int rep)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		box_nsbox_die(rep, "socket", "lo");
	memset(&ifr, 0, sizeof(ifr));
	box_fmt(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		box_nsbox_die(rep, "ioctl", "lo");
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		box_nsbox_die(rep, "ioctl", "lo");
	close(s);
}

/* /bin, /sbin, /lib*: read-only binds, or the same symlinks where the host has them. */
static void build_sysdirs(int rep, const char *root)
{
	char p[4096], src[4096];
	struct stat st;
	size_t i;

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
				box_nsbox_die(rep, "symlink", p);
		} else if (S_ISDIR(st.st_mode)) {
			mkpath(rep, p, 0755);
			bind_at(rep, src, p, 1);
		}
	}
}

/* /usr and /etc read-only, the secrets of /etc masked. */
static void build_usr_etc(int rep, const char *root)
{
	char p[4096];
	size_t i;

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
}

/* What the holder opens while it still has its creator's host ids: what only those may reach
 * (the session directory, the operator's mount sources, box-tool), later bound through
 * /proc/self/fd once the holder is the guest's root. */
struct sources {
	int root;                                   /* the root tmpfs on <dir>/root */
	int sess[4];                                /* workspace input output run */
	int mounts[BOX_NSBOX_MOUNTS_MAX];
	int tool;                                   /* box-tool, -1: none */
};

static const char *const sess_names[4] = { "workspace", "input", "output", "run" };

static int open_path(int rep, int dirfd, const char *path, int flags)
{
	int fd = openat(dirfd, path, O_PATH | O_CLOEXEC | flags);

	if (fd < 0)
		box_nsbox_die(rep, "open", path);
	return fd;
}

static void open_sources(int rep, const struct box_nsbox_config *c, struct sources *src)
{
	char p[4096];
	int dir;
	size_t i;

	box_fmt(p, sizeof(p), "%s/root", c->dir);
	src->root = open_path(rep, AT_FDCWD, p, O_DIRECTORY | O_NOFOLLOW);
	dir = open_path(rep, AT_FDCWD, c->dir, O_DIRECTORY);
	for (i = 0; i < 4; i++)
		src->sess[i] = open_path(rep, dir, sess_names[i], O_DIRECTORY | O_NOFOLLOW);
	close(dir);
	for (i = 0; i < c->nmounts && i < BOX_NSBOX_MOUNTS_MAX; i++)
		src->mounts[i] = open_path(rep, AT_FDCWD, c->mounts[i].host, 0);
	src->tool = c->tool_bin ? open_path(rep, AT_FDCWD, c->tool_bin, 0) : -1;
}

static void close_sources(const struct box_nsbox_config *c, struct sources *src)
{
	size_t i;

	close(src->root);
	for (i = 0; i < 4; i++)
		close(src->sess[i]);
	for (i = 0; i < c->nmounts && i < BOX_NSBOX_MOUNTS_MAX; i++)
		close(src->mounts[i]);
	if (src->tool >= 0)
		close(src->tool);
}

static void fd_path(char *out, size_t n, int fd)
{
	box_fmt(out, n, "/proc/self/fd/%d", fd);
}

/* A directory of the session at a guest path. */
static void bind_session_dir(int rep, const char *root, const struct sources *src,
			     const char *guest, int k, int ro)
{
	char p[4096], from[64];

	path2(p, sizeof(p), root, guest);
	mkpath(rep, p, 0755);
	fd_path(from, sizeof(from), src->sess[k]);
	bind_at(rep, from, p, ro);
}

/* box-tool, alone in a read-only /usr/local/bin. */
static void build_tool_bin(int rep, const char *root, int tool)
{
	char p[4096], tool_bin[64];

	path2(p, sizeof(p), root, "usr/local/bin");
	if (mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=755") < 0)
		box_nsbox_die(rep, "mount", "/usr/local/bin");
	path2(p, sizeof(p), root, "usr/local/bin/box-tool");
	touch(rep, p);
	fd_path(tool_bin, sizeof(tool_bin), tool);
	bind_at(rep, tool_bin, p, 1);
	path2(p, sizeof(p), root, "usr/local/bin");
	if (mount(NULL, p, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
		  "size=64k,mode=755") < 0)
		box_nsbox_die(rep, "remount", "/usr/local/bin");
}

/* The operator's --mount binds, files and directories. */
static void build_mounts(int rep, const char *root, const struct box_nsbox_config *c,
			 const struct sources *srcs)
{
	char p[4096], src[4096], from[64];
	struct stat st;
	size_t i;

	for (i = 0; i < c->nmounts && i < BOX_NSBOX_MOUNTS_MAX; i++) {
		box_fmt(p, sizeof(p), "%s%s", root, c->mounts[i].guest);
		if (fstat(srcs->mounts[i], &st) < 0)
			box_nsbox_die(rep, "mount source", c->mounts[i].host);
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
		fd_path(from, sizeof(from), srcs->mounts[i]);
		bind_at(rep, from, p, c->mounts[i].ro);
	}
}

/* The root read-only, then made / (the host's old root detached). */
static void pivot_into(int rep, const char *root)
{
	if (mount(NULL, root, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "size=1m,mode=755")
	    < 0)
		box_nsbox_die(rep, "remount", "root");
	if (chdir(root) < 0)
		box_nsbox_die(rep, "chdir", root);
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		box_nsbox_die(rep, "pivot_root", root);
	if (umount2(".", MNT_DETACH) < 0)
		box_nsbox_die(rep, "umount", "old root");
	if (chdir("/") < 0)
		box_nsbox_die(rep, "chdir", "/");
}

/* The root is built by the guest's root, not by the holder's creator: what it makes there
 * is the guest's own, and it reaches the host only through what it opened before. */
static void build_root(int rep, const struct box_nsbox_config *c)
{
	char root[64], p[4096], opts[64];
	struct sources src;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		box_nsbox_die(rep, "mount", "/ private");
	box_fmt(p, sizeof(p), "%s/root", c->dir);
	if (mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755,uid=0,gid=0") < 0)
		box_nsbox_die(rep, "mount", "root tmpfs");
	open_sources(rep, c, &src);
	if (box_nsbox_become_guest_root() < 0)
		box_nsbox_die(rep, "become", "the guest's root");
	fd_path(root, sizeof(root), src.root);
	build_sysdirs(rep, root);
	build_usr_etc(rep, root);
	path2(p, sizeof(p), root, "tmp");
	mkpath(rep, p, 01777);
	box_fmt(opts, sizeof(opts), "size=%lld,mode=1777",
		 (long long)(c->disk_bytes > 0 ? c->disk_bytes : (int64_t)1 << 30));
	if (mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		box_nsbox_die(rep, "mount", "/tmp");
	path2(p, sizeof(p), root, "dev");
	mkpath(rep, p, 0755);
	build_dev(rep, root);
	path2(p, sizeof(p), root, "proc");
	mkpath(rep, p, 0555);
	build_proc(rep, root);
	bind_session_dir(rep, root, &src, "workspace", 0, 0);
	bind_session_dir(rep, root, &src, "input", 1, 1);
	bind_session_dir(rep, root, &src, "output", 2, 0);
	bind_session_dir(rep, root, &src, "run/box", 3, 1);
	if (src.tool >= 0)
		build_tool_bin(rep, root, src.tool);
	build_mounts(rep, root, c, &src);
	pivot_into(rep, root);
	close_sources(c, &src);
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
			box_nsbox_die(rep, "open", p);
	}
	if (box_ipc_send_fds(sock, fds, NS_FDS, &e) < 0)
		box_nsbox_die(rep, "send", "namespaces");
	for (k = 0; k < NS_FDS; k++)
		close(fds[k]);
	close(sock);
}

/* Fields 48 and 49 of /proc/self/stat: where the argument strings are. */
static int arg_area(unsigned long *start, unsigned long *end)
{
	char a[32], b[32];

	if (box_proc_stat_field(0, 48, a, sizeof(a)) <= 0 ||
	    box_proc_stat_field(0, 49, b, sizeof(b)) <= 0)
		return -1;
	*start = strtoul(a, NULL, 10);
	*end = strtoul(b, NULL, 10);
	return *start && *end > *start ? 0 : -1;
}

void box_nsbox_set_title(const char *name)
{
	unsigned long a, b;
	size_t n = strlen(name), room;
	char *p;

	prctl(PR_SET_NAME, name);
	if (arg_area(&a, &b) < 0)
		return;
	p = (char *)a;
	room = (size_t)(b - a);
	/* name and a NUL; the area's last byte is made non-zero (when it is not that NUL) so
	 * that the kernel shows only what comes before the first NUL, as after setproctitle,
	 * not the whole area */
	if (n >= room)
		n = room - 1;
	memset(p, 0, room);
	memcpy(p, name, n);
	if (room > n + 1)
		p[room - 1] = ' ';
}

void box_nsbox_holder_main(const struct box_nsbox_config *c, int rep, int go, int nssock)
{
	char b;

	if (read(go, &b, 1) != 1)
		_exit(1);
	close(go);
	if (unshare(CLONE_NEWCGROUP) < 0)
		box_nsbox_die(rep, "unshare", "cgroup");
	build_root(rep, c);
	if (sethostname("box", 3) < 0)
		box_nsbox_die(rep, "sethostname", "box");
	lo_up(rep);
	box_nsbox_set_title("box-init");
	send_ns(rep, nssock);
	prctl(PR_SET_DUMPABLE, 0);
	(void)!write(rep, "R\n", 2);
	close(rep);
	holder_loop();
}
