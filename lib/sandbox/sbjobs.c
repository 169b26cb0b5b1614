/* The host's records of a session's background commands and schedules (lib/sandbox/sbjobs.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sbjobs.h"
#include "atomic.h"
#include "buf.h"
#include "clock.h"
#include "json.h"
#include "proc.h"
#include "banned.h"

#define RECORD_MAX ((size_t)4 << 20)
#define LIST_MAX 4096

int64_t box_sbjobs_log_cap(int64_t disk_bytes)
{
	if (disk_bytes > 0 && disk_bytes / 64 < BOX_SBJOBS_LOG_MAX)
		return disk_bytes / 64;
	return BOX_SBJOBS_LOG_MAX;
}

int box_sbjobs_dir(const char *sdir, struct box_err *err)
{
	char p[PATH_MAX];
	int fd;

	if (box_fmt(p, sizeof(p), "%s/jobs", sdir) < 0)
		return box_err_set(err, BOX_E_INVALID, "session directory path too long");
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return box_err_sys(err, "mkdir %s", p);
	fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return box_err_sys(err, "open %s", p);
	return fd;
}

/* N of "bg-N" or "sched-N" (kind 'b' or 's'), 0 when name is not one */
static long handle_number(const char *name, char kind, const char *suffix)
{
	const char *pre = kind == 'b' ? "bg-" : "sched-";
	size_t pl = strlen(pre), dl;
	const char *d = name + pl;
	long n = 0;

	if (strncmp(name, pre, pl) != 0 || *d < '1' || *d > '9')
		return 0;
	dl = strspn(d, "0123456789");
	if (dl > 9 || strcmp(d + dl, suffix) != 0)
		return 0;
	for (; dl; dl--, d++)
		n = n * 10 + (*d - '0');
	return n;
}

int box_sbjobs_valid_handle(const char *handle, char kind)
{
	return handle && handle_number(handle, kind, "") > 0;
}

void box_sbjobs_now_text(char *out, size_t n)
{
	struct timespec ts;
	struct tm tm;
	char base[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	box_fmt(out, n, "%s.%03ldZ", base, ts.tv_nsec / 1000000);
}

int box_sbjobs_proc_stat(pid_t pid, pid_t *ppid, int64_t *start)
{
	char p[64], buf[1024], f[32];
	ssize_t n;
	int fd;

	box_fmt(p, sizeof(p), "/proc/%d/stat", (int)pid);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n <= 0)
		return -1;
	/* one read: the parent and the start time are of the same process */
	if (ppid) {
		if (box_proc_stat_parse(buf, (size_t)n, 4, f, sizeof(f)) < 0)
			return -1;
		*ppid = (pid_t)strtol(f, NULL, 10);
	}
	if (box_proc_stat_parse(buf, (size_t)n, 22, f, sizeof(f)) < 0)
		return -1;
	if (start)
		*start = strtoll(f, NULL, 10);
	return 0;
}

static cJSON *read_json(int dfd, const char *name, struct box_err *err)
{
	struct box_buf b;
	cJSON *o = NULL;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0) {
		if (errno == ENOENT)
			return box_err_set(err, BOX_E_NOT_FOUND, "no %s", name), NULL;
		return box_err_sys(err, "open %s", name), NULL;
	}
	box_buf_init(&b, RECORD_MAX);
	if (box_buf_read_fd(&b, fd, err) == 0)
		o = box_json_parse(b.data ? b.data : "", b.len, err);
	close(fd);
	box_buf_release(&b);
	return o;
}

static int write_json(int dfd, const char *name, const cJSON *o, struct box_err *err)
{
	char *text = cJSON_PrintUnformatted(o);
	int rc;

	if (!text)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	rc = box_atomic_replace(dfd, name, text, strlen(text), 0600, err);
	cJSON_free(text);
	return rc;
}

int box_sbjobs_put(int dfd, const char *handle, const cJSON *rec, struct box_err *err)
{
	char name[BOX_SBJOBS_HANDLE_MAX + 8];

	box_fmt(name, sizeof(name), "%s.json", handle);
	return write_json(dfd, name, rec, err);
}

/* 1 when the process the record names by key (its pid) and key_start is alive */
static int named_alive(const cJSON *rec, const char *key, const char *key_start)
{
	pid_t w = (pid_t)box_json_get_int(rec, key, 0);
	int64_t start;

	return w > 0 && box_sbjobs_proc_stat(w, NULL, &start) == 0 &&
	       start == box_json_get_int(rec, key_start, -1);
}

/* 1 when the record's watcher is the process it names */
static int watcher_alive(const cJSON *rec)
{
	return named_alive(rec, "watcher", "watcher_start");
}

/* A running command whose watcher is gone, or a start whose starter died before it had a
 * watcher, is shown as killed. */
static void settle(cJSON *rec)
{
	const char *st = box_json_get_str(rec, "state", "");
	const char *why = NULL;

	if (strcmp(st, "running") == 0 && !watcher_alive(rec))
		why = "its watcher on the host is gone";
	else if (strcmp(st, "starting") == 0 && !cJSON_GetObjectItemCaseSensitive(rec, "watcher") &&
		 !named_alive(rec, "starter", "starter_start"))
		why = "its start was interrupted";
	else if (strcmp(st, "starting") == 0 && cJSON_GetObjectItemCaseSensitive(rec, "watcher") &&
		 !watcher_alive(rec))
		why = "its watcher on the host is gone";
	if (!why)
		return;
	cJSON_DeleteItemFromObjectCaseSensitive(rec, "state");
	cJSON_AddStringToObject(rec, "state", "killed");
	cJSON_DeleteItemFromObjectCaseSensitive(rec, "reason");
	cJSON_AddStringToObject(rec, "reason", why);
}

cJSON *box_sbjobs_get(int dfd, const char *handle, struct box_err *err)
{
	char name[BOX_SBJOBS_HANDLE_MAX + 8];
	cJSON *o;

	if (!box_sbjobs_valid_handle(handle, 'b')) {
		box_err_set(err, BOX_E_INVALID, "invalid handle '%.40s' (want bg-N)",
			    handle ? handle : "");
		box_err_path(err, "$.handle");
		return NULL;
	}
	box_fmt(name, sizeof(name), "%s.json", handle);
	o = read_json(dfd, name, err);
	if (!o && err->code == BOX_E_NOT_FOUND) {
		box_err_set(err, BOX_E_NOT_FOUND, "no background command %s in this session", handle);
		box_err_path(err, "$.handle");
	}
	if (o)
		settle(o);
	return o;
}

/* The numbers of the records of kind in dfd, sorted; *n of them. NULL on OOM or error. */
static long *numbers(int dfd, char kind, size_t *n)
{
	DIR *d;
	struct dirent *de;
	long *v = NULL;
	size_t cap = 0;
	int fd = dup(dfd);

	*n = 0;
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	rewinddir(d);
	while ((de = readdir(d)) && *n < LIST_MAX) {
		long k = handle_number(de->d_name, kind, ".json");

		if (k <= 0)
			continue;
		if (*n == cap) {
			long *nv = realloc(v, (cap = cap ? cap * 2 : 32) * sizeof(*v));

			if (!nv)
				break;
			v = nv;
		}
		v[(*n)++] = k;
	}
	closedir(d);
	if (!v)
		v = calloc(1, sizeof(*v));
	{
		size_t a, b;

		for (a = 1; a < *n; a++)
			for (b = a; b > 0 && v[b - 1] > v[b]; b--) {
				long t = v[b];

				v[b] = v[b - 1];
				v[b - 1] = t;
			}
	}
	return v;
}

static void remove_job(int dfd, long k)
{
	char name[64];

	box_fmt(name, sizeof(name), "bg-%ld.log", k);
	unlinkat(dfd, name, 0);
	box_fmt(name, sizeof(name), "bg-%ld.sig", k);
	unlinkat(dfd, name, 0);
	box_fmt(name, sizeof(name), "bg-%ld.json", k);
	unlinkat(dfd, name, 0);
}

static int is_live(const cJSON *rec)
{
	const char *st = box_json_get_str(rec, "state", "");

	return strcmp(st, "running") == 0 || strcmp(st, "starting") == 0;
}

/* Counts the running commands and removes the oldest ended ones past BOX_SBJOBS_KEPT;
 * *next gets one more than the highest number there. */
static int running_and_prune(int dfd, long *next)
{
	size_t n, k, ended = 0;
	long *v = numbers(dfd, 'b', &n);
	int running = 0;
	char handle[BOX_SBJOBS_HANDLE_MAX];
	struct box_err e;

	*next = 1;
	if (!v)
		return 0;
	for (k = 0; k < n; k++) {
		cJSON *rec;

		box_err_init(&e);
		box_fmt(handle, sizeof(handle), "bg-%ld", v[k]);
		rec = box_sbjobs_get(dfd, handle, &e);
		if (rec && is_live(rec))
			running++;
		else
			ended++;
		cJSON_Delete(rec);
	}
	for (k = 0; k < n && ended > BOX_SBJOBS_KEPT; k++) {
		cJSON *rec;

		box_err_init(&e);
		box_fmt(handle, sizeof(handle), "bg-%ld", v[k]);
		rec = box_sbjobs_get(dfd, handle, &e);
		if (!rec || !is_live(rec)) {
			remove_job(dfd, v[k]);
			ended--;
		}
		cJSON_Delete(rec);
	}
	if (n)
		*next = v[n - 1] + 1;
	free(v);
	return running;
}

int box_sbjobs_reserve(int dfd, const cJSON *argv, const char *schedule, char *handle,
		       struct box_err *err)
{
	char name[64], now[32];
	long next;
	int running = running_and_prune(dfd, &next), fd;
	cJSON *rec;

	if (running >= BOX_SBJOBS_RUNNING_MAX)
		return box_err_set(err, BOX_E_LIMIT, "%d background commands of this session run "
				   "already (at most %d at once)", running, BOX_SBJOBS_RUNNING_MAX);
	for (;; next++) {
		box_fmt(name, sizeof(name), "bg-%ld.json", next);
		fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0)
			break;
		if (errno != EEXIST || next > 999999999)
			return box_err_sys(err, "create %s", name);
	}
	close(fd);
	box_fmt(handle, BOX_SBJOBS_HANDLE_MAX, "bg-%ld", next);
	box_sbjobs_now_text(now, sizeof(now));
	rec = cJSON_CreateObject();
	cJSON_AddStringToObject(rec, "handle", handle);
	cJSON_AddItemToObject(rec, "argv", cJSON_Duplicate(argv, 1));
	cJSON_AddStringToObject(rec, "state", "starting");
	cJSON_AddStringToObject(rec, "started_at", now);
	{
		int64_t start = 0;

		(void)box_sbjobs_proc_stat(getpid(), NULL, &start);
		cJSON_AddNumberToObject(rec, "starter", getpid());
		box_json_add_int64(rec, "starter_start", start);
	}
	if (schedule)
		cJSON_AddStringToObject(rec, "schedule", schedule);
	box_fmt(name, sizeof(name), "bg-%ld.log", next);
	fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	box_fmt(name, sizeof(name), "bg-%ld.sig", next);
	unlinkat(dfd, name, 0);
	if (fd < 0 || mkfifoat(dfd, name, 0600) < 0 || box_sbjobs_put(dfd, handle, rec, err) < 0) {
		if (!err->code)
			box_err_sys(err, "create %s", name);
		cJSON_Delete(rec);
		box_sbjobs_unreserve(dfd, handle);
		return -1;
	}
	cJSON_Delete(rec);
	return 0;
}

void box_sbjobs_unreserve(int dfd, const char *handle)
{
	long k = handle_number(handle, 'b', "");

	if (k > 0)
		remove_job(dfd, k);
}

int box_sbjobs_running(const char *sdir)
{
	struct box_err e;
	long next;
	int dfd, n;
	char p[PATH_MAX];

	box_err_init(&e);
	box_fmt(p, sizeof(p), "%s/jobs", sdir);
	dfd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return 0;
	n = running_and_prune(dfd, &next);
	close(dfd);
	return n;
}

static cJSON *list_kind(int dfd, char kind, struct box_err *err)
{
	size_t n, k;
	long *v = numbers(dfd, kind, &n);
	cJSON *arr = cJSON_CreateArray();

	if (!v || !arr) {
		free(v);
		cJSON_Delete(arr);
		return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	}
	for (k = 0; k < n; k++) {
		char name[64];
		struct box_err e;
		cJSON *rec;

		box_err_init(&e);
		box_fmt(name, sizeof(name), "%s-%ld.json", kind == 'b' ? "bg" : "sched", v[k]);
		rec = read_json(dfd, name, &e);
		if (!rec)
			continue;
		if (kind == 'b')
			settle(rec);
		else {
			int64_t at = box_json_get_int(rec, "next_at", 0) - box_now_ms();

			/* next_at is of the host's monotonic clock: shown as the wait left */
			cJSON_DeleteItemFromObjectCaseSensitive(rec, "env");
			cJSON_DeleteItemFromObjectCaseSensitive(rec, "next_at");
			box_json_add_int64(rec, "next_in_ms", at > 0 ? at : 0);
		}
		cJSON_DeleteItemFromObjectCaseSensitive(rec, "watcher");
		cJSON_DeleteItemFromObjectCaseSensitive(rec, "watcher_start");
		cJSON_DeleteItemFromObjectCaseSensitive(rec, "starter");
		cJSON_DeleteItemFromObjectCaseSensitive(rec, "starter_start");
		cJSON_AddItemToArray(arr, rec);
	}
	free(v);
	return arr;
}

cJSON *box_sbjobs_list(const char *sdir, struct box_err *err)
{
	cJSON *o = cJSON_CreateObject(), *c = NULL, *s = NULL;
	char p[PATH_MAX];
	int dfd;

	box_fmt(p, sizeof(p), "%s/jobs", sdir);
	dfd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		c = cJSON_CreateArray();
		s = cJSON_CreateArray();
	} else {
		c = list_kind(dfd, 'b', err);
		s = c ? list_kind(dfd, 's', err) : NULL;
		close(dfd);
	}
	if (!o || !c || !s) {
		cJSON_Delete(o);
		cJSON_Delete(c);
		cJSON_Delete(s);
		if (!err->code)
			box_err_set(err, BOX_E_INTERNAL, "out of memory");
		return NULL;
	}
	cJSON_AddItemToObject(o, "commands", c);
	cJSON_AddItemToObject(o, "schedules", s);
	return o;
}

int box_sbjobs_signal_of(const char *text)
{
	const char *name = text;
	int k;

	if (!text || !*text)
		return 0;
	if (strspn(text, "0123456789") == strlen(text)) {
		k = strlen(text) <= 2 ? (int)strtol(text, NULL, 10) : 0;
		return k >= 1 && k <= 64 ? k : 0;
	}
	if (strncmp(name, "SIG", 3) == 0)
		name += 3;
	for (k = 1; k < 32; k++) {
		const char *a = sigabbrev_np(k);

		if (a && strcmp(a, name) == 0)
			return k;
	}
	return 0;
}

int box_sbjobs_signal(int dfd, const char *handle, int sig, struct box_err *err)
{
	char name[BOX_SBJOBS_HANDLE_MAX + 8];
	unsigned char b = (unsigned char)sig;
	cJSON *rec = box_sbjobs_get(dfd, handle, err);
	int fd, live;

	if (!rec)
		return -1;
	live = strcmp(box_json_get_str(rec, "state", ""), "running") == 0;
	cJSON_Delete(rec);
	box_fmt(name, sizeof(name), "%s.sig", handle);
	fd = live ? openat(dfd, name, O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC) : -1;
	if (fd < 0) {
		box_err_set(err, BOX_E_CONFLICT, "background command %s is not running", handle);
		box_err_path(err, "$.handle");
		return -1;
	}
	if (write(fd, &b, 1) != 1) {
		close(fd);
		return box_err_sys(err, "signal %s", handle);
	}
	close(fd);
	return 0;
}

ssize_t box_sbjobs_log_read(int dfd, const char *handle, int64_t offset, char *out, size_t max,
			    struct box_err *err)
{
	char name[BOX_SBJOBS_HANDLE_MAX + 8];
	ssize_t n;
	int fd;

	box_fmt(name, sizeof(name), "%s.log", handle);
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return box_err_sys(err, "open the log of %s", handle);
	do
		n = pread(fd, out, max, offset);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n < 0)
		return box_err_sys(err, "read the log of %s", handle);
	return n;
}

void box_sbjobs_stop_watchers(const char *sdir)
{
	char p[PATH_MAX];
	size_t n, k;
	long *v;
	int dfd, round;

	box_fmt(p, sizeof(p), "%s/jobs", sdir);
	dfd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return;
	v = numbers(dfd, 'b', &n);
	for (round = 0; v && round < 200; round++) {
		int left = 0;

		for (k = 0; k < n; k++) {
			char name[64];
			struct box_err e;
			cJSON *rec;

			box_err_init(&e);
			box_fmt(name, sizeof(name), "bg-%ld.json", v[k]);
			rec = read_json(dfd, name, &e);
			if (rec && watcher_alive(rec)) {
				kill((pid_t)box_json_get_int(rec, "watcher", 0), SIGKILL);
				left++;
			}
			cJSON_Delete(rec);
		}
		if (!left)
			break;
		usleep(10000);
	}
	free(v);
	close(dfd);
}

int box_sbjobs_schedule_add(const char *sdir, const cJSON *argv, const char *const *env,
			    const char *cwd, int every, char *handle, struct box_err *err)
{
	int dfd = box_sbjobs_dir(sdir, err), fd, rc = -1;
	size_t n;
	long *v, next;
	char name[64];
	cJSON *rec = NULL, *e;

	if (dfd < 0)
		return -1;
	(void)flock(dfd, LOCK_EX);
	v = numbers(dfd, 's', &n);
	if (!v) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	next = n ? v[n - 1] + 1 : 1;
	free(v);
	/* numbers are never given twice, even after an unschedule: the highest given is kept */
	{
		char seq[24] = { 0 };
		int sfd = openat(dfd, "sched.seq", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

		if (sfd >= 0) {
			long last;

			if (read(sfd, seq, sizeof(seq) - 1) > 0 && (last = strtol(seq, NULL, 10)) >= next)
				next = last + 1;
			close(sfd);
		}
	}
	if (n >= BOX_SBJOBS_SCHEDULES_MAX) {
		box_err_set(err, BOX_E_LIMIT, "the session has %d schedules already (at most %d)",
			    (int)n, BOX_SBJOBS_SCHEDULES_MAX);
		goto out;
	}
	for (;; next++) {
		box_fmt(name, sizeof(name), "sched-%ld.json", next);
		fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0)
			break;
		if (errno != EEXIST || next > 999999999) {
			box_err_sys(err, "create %s", name);
			goto out;
		}
	}
	close(fd);
	box_fmt(handle, BOX_SBJOBS_HANDLE_MAX, "sched-%ld", next);
	{
		char seq[24];

		box_fmt(seq, sizeof(seq), "%ld", next);
		(void)box_atomic_replace(dfd, "sched.seq", seq, strlen(seq), 0600, err);
		box_err_init(err);
	}
	rec = cJSON_CreateObject();
	e = cJSON_CreateArray();
	for (n = 0; env && env[n]; n++)
		cJSON_AddItemToArray(e, cJSON_CreateString(env[n]));
	cJSON_AddStringToObject(rec, "handle", handle);
	cJSON_AddItemToObject(rec, "argv", cJSON_Duplicate(argv, 1));
	cJSON_AddItemToObject(rec, "env", e);
	if (cwd)
		cJSON_AddStringToObject(rec, "cwd", cwd);
	cJSON_AddNumberToObject(rec, "every", every);
	box_json_add_int64(rec, "next_at", box_now_ms() + (int64_t)every * 1000);
	cJSON_AddNumberToObject(rec, "runs", 0);
	cJSON_AddNumberToObject(rec, "skipped", 0);
	rc = write_json(dfd, name, rec, err);
	if (rc < 0)
		unlinkat(dfd, name, 0);
out:
	cJSON_Delete(rec);
	close(dfd);
	return rc;
}

int box_sbjobs_schedule_remove(const char *sdir, const char *handle, struct box_err *err)
{
	char p[PATH_MAX], name[BOX_SBJOBS_HANDLE_MAX + 8];
	int dfd;

	if (!box_sbjobs_valid_handle(handle, 's')) {
		box_err_set(err, BOX_E_INVALID, "invalid schedule '%.40s' (want sched-N)",
			    handle ? handle : "");
		return box_err_path(err, "$.handle"), -1;
	}
	box_fmt(p, sizeof(p), "%s/jobs", sdir);
	box_fmt(name, sizeof(name), "%s.json", handle);
	dfd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd >= 0)
		(void)flock(dfd, LOCK_EX);
	if (dfd < 0 || unlinkat(dfd, name, 0) < 0) {
		if (dfd >= 0)
			close(dfd);
		box_err_set(err, BOX_E_NOT_FOUND, "no schedule %s in this session", handle);
		return box_err_path(err, "$.handle"), -1;
	}
	close(dfd);
	return 0;
}

cJSON *box_sbjobs_schedules_due(int dfd, int64_t now)
{
	size_t n, k;
	long *v;
	cJSON *due = cJSON_CreateArray();

	if (!due || flock(dfd, LOCK_EX) < 0)
		return due;
	v = numbers(dfd, 's', &n);
	for (k = 0; v && k < n; k++) {
		char name[64];
		const char *last;
		struct box_err e;
		cJSON *rec, *job = NULL;
		int64_t every;

		box_err_init(&e);
		box_fmt(name, sizeof(name), "sched-%ld.json", v[k]);
		rec = read_json(dfd, name, &e);
		if (!rec || box_json_get_int(rec, "next_at", 0) > now) {
			cJSON_Delete(rec);
			continue;
		}
		every = box_json_get_int(rec, "every", 60);
		cJSON_DeleteItemFromObjectCaseSensitive(rec, "next_at");
		box_json_add_int64(rec, "next_at", now + every * 1000);
		last = box_json_get_str(rec, "last", NULL);
		if (last)
			job = box_sbjobs_get(dfd, last, &e);
		if (job && is_live(job)) {
			/* its last run still goes: this one is skipped */
			int64_t skipped = box_json_get_int(rec, "skipped", 0) + 1;

			cJSON_DeleteItemFromObjectCaseSensitive(rec, "skipped");
			box_json_add_int64(rec, "skipped", skipped);
			(void)write_json(dfd, name, rec, &e);
			cJSON_Delete(rec);
		} else {
			(void)write_json(dfd, name, rec, &e);
			cJSON_AddItemToArray(due, rec);
		}
		cJSON_Delete(job);
	}
	free(v);
	flock(dfd, LOCK_UN);
	return due;
}

void box_sbjobs_schedule_ran(int dfd, const char *sched, const char *handle)
{
	char name[BOX_SBJOBS_HANDLE_MAX + 8];
	struct box_err e;
	cJSON *rec;

	if (!box_sbjobs_valid_handle(sched, 's') || flock(dfd, LOCK_EX) < 0)
		return;
	box_err_init(&e);
	box_fmt(name, sizeof(name), "%s.json", sched);
	rec = read_json(dfd, name, &e);
	if (rec) {
		int64_t runs = box_json_get_int(rec, "runs", 0) + 1;

		cJSON_DeleteItemFromObjectCaseSensitive(rec, "runs");
		box_json_add_int64(rec, "runs", runs);
		cJSON_DeleteItemFromObjectCaseSensitive(rec, "last");
		cJSON_AddStringToObject(rec, "last", handle);
		(void)write_json(dfd, name, rec, &e);
		cJSON_Delete(rec);
	}
	flock(dfd, LOCK_UN);
}
