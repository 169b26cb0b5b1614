#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sbstate.h"
#include "atomic.h"
#include "buf.h"
#include "json.h"
#include "banned.h"

#define STATE_FILE "state.json"

static const char *const state_names[] = {
	[BOX_SB_RUNNING] = "running",
	[BOX_SB_PAUSED] = "paused",
	[BOX_SB_LOST] = "lost",
	[BOX_SB_DELETED] = "deleted",
};

static const char *const action_names[] = {
	[BOX_SB_ACT_NONE] = "none",
	[BOX_SB_ACT_CREATE] = "create",
	[BOX_SB_ACT_RESUME] = "resume",
	[BOX_SB_ACT_REPLACE] = "replace",
};

int box_sbstate_valid_id(const char *id)
{
	size_t i;

	if (!id || !((id[0] >= 'a' && id[0] <= 'z') || (id[0] >= '0' && id[0] <= '9')))
		return 0;
	for (i = 1; id[i]; i++) {
		char c = id[i];

		if (i >= BOX_SBSTATE_ID_MAX)
			return 0;
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

int box_sbstate_valid_provider(const char *name)
{
	size_t i;

	if (!name || !name[0])
		return 0;
	for (i = 0; name[i]; i++) {
		char c = name[i];

		if (i >= BOX_SBSTATE_PROVIDER_MAX)
			return 0;
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
			return 0;
	}
	return 1;
}

const char *box_sbstate_state_name(enum box_sbstate_state s)
{
	if ((unsigned)s >= sizeof(state_names) / sizeof(state_names[0]))
		return "unknown";
	return state_names[s];
}

int box_sbstate_state_from_name(const char *name)
{
	size_t i;

	for (i = 0; name && i < sizeof(state_names) / sizeof(state_names[0]); i++)
		if (strcmp(name, state_names[i]) == 0)
			return (int)i;
	return -1;
}

const char *box_sb_action_name(enum box_sb_action a)
{
	if ((unsigned)a >= sizeof(action_names) / sizeof(action_names[0]))
		return "unknown";
	return action_names[a];
}

void box_sbstate_now(char out[BOX_SBSTATE_TIME_MAX])
{
	struct timespec ts;
	struct tm tm;
	char base[24];
	int ms;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	ms = (int)(ts.tv_nsec / 1000000L) % 1000;
	snprintf(out, BOX_SBSTATE_TIME_MAX, "%.19s.%03dZ", base, ms);
}

static const char *env_nonempty(const char *name)
{
	const char *v = getenv(name);

	return v && v[0] ? v : NULL;
}

int box_sbstate_dir(char *out, size_t outsz, struct box_err *err)
{
	const char *v;
	int n;

	if ((v = env_nonempty("BOX_STATE_DIR")))
		n = snprintf(out, outsz, "%s/sandboxes", v);
	else if ((v = env_nonempty("XDG_STATE_HOME")))
		n = snprintf(out, outsz, "%s/box/sandboxes", v);
	else if ((v = env_nonempty("HOME")))
		n = snprintf(out, outsz, "%s/.local/state/box/sandboxes", v);
	else
		return box_err_set(err, BOX_E_INVALID,
				   "no state directory: set BOX_STATE_DIR or HOME");
	if (n < 0 || (size_t)n >= outsz)
		return box_err_set(err, BOX_E_INVALID, "state directory path too long");
	return 0;
}

void box_sbstate_init(struct box_sbstate *s)
{
	memset(s, 0, sizeof(*s));
}

void box_sbstate_release(struct box_sbstate *s)
{
	free(s->last_init_error);
	cJSON_Delete(s->init);
	cJSON_Delete(s->limits);
	cJSON_Delete(s->provider_data);
	box_sbstate_init(s);
}

static void copy_text(char *dst, size_t n, const char *src)
{
	snprintf(dst, n, "%s", src);
}

int box_sbstate_new(struct box_sbstate *s, const char *id, const char *provider,
		    struct box_err *err)
{
	if (!box_sbstate_valid_id(id))
		return box_err_set(err, BOX_E_INVALID, "invalid session id");
	if (!box_sbstate_valid_provider(provider))
		return box_err_set(err, BOX_E_INVALID, "invalid provider name");
	box_sbstate_init(s);
	copy_text(s->id, sizeof(s->id), id);
	copy_text(s->provider, sizeof(s->provider), provider);
	s->state = BOX_SB_RUNNING;
	box_sbstate_now(s->created_at);
	copy_text(s->updated_at, sizeof(s->updated_at), s->created_at);
	copy_text(s->last_used_at, sizeof(s->last_used_at), s->created_at);
	s->init = cJSON_CreateArray();
	s->limits = cJSON_CreateObject();
	s->provider_data = cJSON_CreateObject();
	if (!s->init || !s->limits || !s->provider_data) {
		box_sbstate_release(s);
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	}
	return 0;
}

static int add_str_or_null(cJSON *o, const char *key, const char *v)
{
	return (v ? cJSON_AddStringToObject(o, key, v) : cJSON_AddNullToObject(o, key)) != NULL;
}

static int add_copy(cJSON *o, const char *key, const cJSON *v, int array)
{
	cJSON *c = v ? cJSON_Duplicate(v, 1) : (array ? cJSON_CreateArray() : cJSON_CreateObject());

	if (!c)
		return 0;
	cJSON_AddItemToObject(o, key, c);
	return 1;
}

cJSON *box_sbstate_to_json(const struct box_sbstate *s)
{
	cJSON *o = cJSON_CreateObject();
	int good;

	if (!o)
		return NULL;
	good = cJSON_AddStringToObject(o, "id", s->id) &&
	       cJSON_AddStringToObject(o, "provider", s->provider) &&
	       cJSON_AddStringToObject(o, "state", box_sbstate_state_name(s->state)) &&
	       cJSON_AddStringToObject(o, "created_at", s->created_at) &&
	       cJSON_AddStringToObject(o, "updated_at", s->updated_at) &&
	       cJSON_AddStringToObject(o, "last_used_at", s->last_used_at) &&
	       add_copy(o, "init", s->init, 1) &&
	       add_str_or_null(o, "init_completed_at",
			       s->init_completed_at[0] ? s->init_completed_at : NULL) &&
	       add_str_or_null(o, "last_init_error", s->last_init_error) &&
	       add_copy(o, "limits", s->limits, 0) &&
	       add_copy(o, "provider_data", s->provider_data, 0) &&
	       box_json_add_int64(o, "version", s->version);
	if (!good) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static int bad(struct box_err *err, const char *path, const char *msg)
{
	box_err_set(err, BOX_E_INVALID, "%s", msg);
	box_err_path(err, path);
	return -1;
}

/* A timestamp is short printable text from an RFC 3339 alphabet; its exact form is ours to
 * write, not to police, but nothing else may ride in it. */
static int valid_time(const char *t)
{
	size_t i;

	if (!t[0])
		return 0;
	for (i = 0; t[i]; i++) {
		if (i >= BOX_SBSTATE_TIME_MAX - 1)
			return 0;
		if (!strchr("0123456789TZ:.+-", t[i]))
			return 0;
	}
	return 1;
}

static int get_time(char *dst, const cJSON *obj, const char *key, int nullable,
		    struct box_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	char path[64];

	snprintf(path, sizeof(path), "$.%s", key);
	if (nullable && cJSON_IsNull(v)) {
		dst[0] = 0;
		return 0;
	}
	if (!cJSON_IsString(v) || !valid_time(v->valuestring))
		return bad(err, path, "a time must be RFC 3339 text");
	copy_text(dst, BOX_SBSTATE_TIME_MAX, v->valuestring);
	return 0;
}

static const char *const known_members[] = {
	"id", "provider", "state", "created_at", "updated_at", "last_used_at", "init",
	"init_completed_at", "last_init_error", "limits", "provider_data", "version",
};
#define N_MEMBERS (sizeof(known_members) / sizeof(known_members[0]))

static int check_members(const cJSON *obj, struct box_err *err)
{
	const cJSON *c;
	size_t i, n = 0;

	cJSON_ArrayForEach(c, obj) {
		int found = 0;

		if (++n > N_MEMBERS)
			return bad(err, "$", "state record has too many members");
		for (i = 0; i < N_MEMBERS; i++)
			if (c->string && strcmp(c->string, known_members[i]) == 0)
				found = 1;
		if (!found)
			return bad(err, "$", "unknown member in state record");
	}
	for (i = 0; i < N_MEMBERS; i++) {
		char path[64];

		if (!cJSON_GetObjectItemCaseSensitive(obj, known_members[i])) {
			snprintf(path, sizeof(path), "$.%s", known_members[i]);
			return bad(err, path, "missing member in state record");
		}
	}
	return 0;
}

static int check_init(const cJSON *init, struct box_err *err)
{
	const cJSON *c;
	int n = 0;

	if (!cJSON_IsArray(init))
		return bad(err, "$.init", "init must be an array of commands");
	cJSON_ArrayForEach(c, init) {
		char path[64];

		snprintf(path, sizeof(path), "$.init[%d]", n);
		if (++n > BOX_SBSTATE_INIT_MAX)
			return bad(err, "$.init", "too many init commands");
		if (!cJSON_IsString(c) || strlen(c->valuestring) > BOX_SBSTATE_INIT_CMD_MAX)
			return bad(err, path, "an init command must be a string of at most 64 KiB");
	}
	return 0;
}

static int fill_from_json(struct box_sbstate *s, const cJSON *obj, const char *want_id,
			  struct box_err *err)
{
	const cJSON *v;
	int64_t ver;
	int st;

	if (!cJSON_IsObject(obj))
		return bad(err, "$", "state record must be an object");
	if (check_members(obj, err))
		return -1;
	v = cJSON_GetObjectItemCaseSensitive(obj, "id");
	if (!cJSON_IsString(v) || !box_sbstate_valid_id(v->valuestring))
		return bad(err, "$.id", "invalid session id in state record");
	if (want_id && strcmp(v->valuestring, want_id) != 0)
		return bad(err, "$.id", "state record belongs to another session");
	copy_text(s->id, sizeof(s->id), v->valuestring);
	v = cJSON_GetObjectItemCaseSensitive(obj, "provider");
	if (!cJSON_IsString(v) || !box_sbstate_valid_provider(v->valuestring))
		return bad(err, "$.provider", "invalid provider name in state record");
	copy_text(s->provider, sizeof(s->provider), v->valuestring);
	v = cJSON_GetObjectItemCaseSensitive(obj, "state");
	st = cJSON_IsString(v) ? box_sbstate_state_from_name(v->valuestring) : -1;
	if (st < 0)
		return bad(err, "$.state", "unknown session state");
	s->state = (enum box_sbstate_state)st;
	if (get_time(s->created_at, obj, "created_at", 0, err) ||
	    get_time(s->updated_at, obj, "updated_at", 0, err) ||
	    get_time(s->last_used_at, obj, "last_used_at", 0, err) ||
	    get_time(s->init_completed_at, obj, "init_completed_at", 1, err))
		return -1;
	v = cJSON_GetObjectItemCaseSensitive(obj, "init");
	if (check_init(v, err))
		return -1;
	if (!(s->init = cJSON_Duplicate(v, 1)))
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	v = cJSON_GetObjectItemCaseSensitive(obj, "last_init_error");
	if (cJSON_IsString(v)) {
		if (strlen(v->valuestring) > BOX_SBSTATE_ERROR_MAX)
			return bad(err, "$.last_init_error", "last_init_error too long");
		if (!(s->last_init_error = strdup(v->valuestring)))
			return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	} else if (!cJSON_IsNull(v)) {
		return bad(err, "$.last_init_error", "last_init_error must be a string or null");
	}
	v = cJSON_GetObjectItemCaseSensitive(obj, "limits");
	if (!cJSON_IsObject(v))
		return bad(err, "$.limits", "limits must be an object");
	if (!(s->limits = cJSON_Duplicate(v, 1)))
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	v = cJSON_GetObjectItemCaseSensitive(obj, "provider_data");
	if (!cJSON_IsObject(v))
		return bad(err, "$.provider_data", "provider_data must be an object");
	if (!(s->provider_data = cJSON_Duplicate(v, 1)))
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	v = cJSON_GetObjectItemCaseSensitive(obj, "version");
	if (!box_json_int64(v, &ver) || ver < 0)
		return bad(err, "$.version", "version must be a non-negative integer");
	s->version = ver;
	return 0;
}

int box_sbstate_from_json(struct box_sbstate *s, const cJSON *obj, const char *want_id,
			  struct box_err *err)
{
	box_sbstate_init(s);
	if (fill_from_json(s, obj, want_id, err)) {
		box_sbstate_release(s);
		return -1;
	}
	return 0;
}

/* Opens dir/<id> as a directory, never through a symlink; create makes it (and dir) first. */
static int open_session(const char *dir, const char *id, int create, struct box_err *err)
{
	int dfd, fd;

	if (!box_sbstate_valid_id(id))
		return box_err_set(err, BOX_E_INVALID, "invalid session id");
	if (create && box_mkdirs(dir, err))
		return -1;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		if (errno == ENOENT)
			return box_err_set(err, BOX_E_NOT_FOUND, "no session %s", id);
		return box_err_sys(err, "open %s", dir);
	}
	if (create && mkdirat(dfd, id, 0700) && errno != EEXIST) {
		box_err_sys(err, "mkdir %s/%s", dir, id);
		close(dfd);
		return -1;
	}
	fd = openat(dfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			box_err_set(err, BOX_E_NOT_FOUND, "no session %s", id);
		else
			box_err_sys(err, "open %s/%s", dir, id);
	}
	close(dfd);
	return fd;
}

static char *serialize(const struct box_sbstate *s, size_t *len, struct box_err *err)
{
	cJSON *o = box_sbstate_to_json(s);
	char *text;

	if (!o) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		return NULL;
	}
	text = box_json_line(o, len);
	cJSON_Delete(o);
	if (!text)
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
	else if (*len > BOX_SBSTATE_MAX_BYTES) {
		free(text);
		text = NULL;
		box_err_limit(err, BOX_E_LIMIT, "state_bytes", BOX_SBSTATE_MAX_BYTES, "bytes",
			      "state record too large");
	}
	return text;
}

int box_sbstate_create(const char *dir, struct box_sbstate *s, struct box_err *err)
{
	char tmp[64];
	char *text;
	size_t len;
	int fd, rc = -1;

	if (!box_sbstate_valid_id(s->id))
		return box_err_set(err, BOX_E_INVALID, "invalid session id");
	fd = open_session(dir, s->id, 1, err);
	if (fd < 0)
		return -1;
	if (faccessat(fd, STATE_FILE, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		box_err_set(err, BOX_E_CONFLICT, "session %s exists", s->id);
		goto out;
	}
	s->version = 1;
	box_sbstate_now(s->updated_at);
	text = serialize(s, &len, err);
	if (!text)
		goto out;
	snprintf(tmp, sizeof(tmp), ".create-%ld-%ld", (long)getpid(), (long)random());
	if (box_atomic_write(fd, tmp, text, len, 0600, err) == 0) {
		/* link(2) publishes the record only if none exists: a racing create loses here */
		if (linkat(fd, tmp, fd, STATE_FILE, 0) == 0)
			rc = 0;
		else if (errno == EEXIST)
			box_err_set(err, BOX_E_CONFLICT, "session %s exists", s->id);
		else
			box_err_sys(err, "link %s/%s/%s", dir, s->id, STATE_FILE);
		unlinkat(fd, tmp, 0);
	}
	free(text);
out:
	close(fd);
	return rc;
}

int box_sbstate_read(const char *dir, const char *id, struct box_sbstate *s,
		     struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_SBSTATE_MAX_BYTES);
	struct stat st;
	cJSON *obj;
	int dfd, fd, rc;

	box_sbstate_init(s);
	dfd = open_session(dir, id, 0, err);
	if (dfd < 0)
		return -1;
	fd = openat(dfd, STATE_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	close(dfd);
	if (fd < 0) {
		if (errno == ENOENT)
			return box_err_set(err, BOX_E_NOT_FOUND, "no session %s", id);
		if (errno == ELOOP)
			return box_err_set(err, BOX_E_INVALID, "state record of %s is a symlink", id);
		return box_err_sys(err, "open state of %s", id);
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return box_err_set(err, BOX_E_INVALID, "state record of %s is not a file", id);
	}
	rc = box_buf_read_fd(&b, fd, err);
	close(fd);
	if (rc) {
		if (err->code == BOX_E_LIMIT)
			box_err_limit(err, BOX_E_LIMIT, "state_bytes", BOX_SBSTATE_MAX_BYTES,
				      "bytes", "state record of %s too large", id);
		box_buf_release(&b);
		return -1;
	}
	obj = box_json_parse(b.data ? b.data : "", b.len, err);
	box_buf_release(&b);
	if (!obj)
		return -1;
	rc = box_sbstate_from_json(s, obj, id, err);
	cJSON_Delete(obj);
	return rc;
}

static int write_record(const char *dir, struct box_sbstate *s, int durable,
			struct box_err *err)
{
	char *text;
	size_t len;
	int fd, rc;

	fd = open_session(dir, s->id, 0, err);
	if (fd < 0)
		return -1;
	if (s->version == INT64_MAX) {
		close(fd);
		return box_err_set(err, BOX_E_INVALID, "state version overflow");
	}
	s->version++;
	box_sbstate_now(s->updated_at);
	text = serialize(s, &len, err);
	if (!text) {
		s->version--;
		close(fd);
		return -1;
	}
	rc = durable ? box_atomic_write(fd, STATE_FILE, text, len, 0600, err) :
		       box_atomic_replace(fd, STATE_FILE, text, len, 0600, err);
	free(text);
	close(fd);
	return rc;
}

int box_sbstate_write(const char *dir, struct box_sbstate *s, struct box_err *err)
{
	return write_record(dir, s, 1, err);
}

int box_sbstate_touch(const char *dir, struct box_sbstate *s, struct box_err *err)
{
	box_sbstate_now(s->last_used_at);
	return write_record(dir, s, 0, err);
}

int box_sbstate_delete(const char *dir, const char *id, struct box_err *err)
{
	int fd, dfd;

	fd = open_session(dir, id, 0, err);
	if (fd < 0)
		return -1;
	if (unlinkat(fd, STATE_FILE, 0)) {
		int e = errno;

		close(fd);
		errno = e;
		if (e == ENOENT)
			return box_err_set(err, BOX_E_NOT_FOUND, "no session %s", id);
		return box_err_sys(err, "remove state of %s", id);
	}
	close(fd);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		/* only an empty directory goes: what else is in it belongs to the caller */
		(void)unlinkat(dfd, id, AT_REMOVEDIR);
		close(dfd);
	}
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

cJSON *box_sbstate_list(const char *dir, size_t max, struct box_err *err)
{
	char **ids = NULL;
	size_t n = 0, seen = 0, i;
	cJSON *arr = NULL;
	struct dirent *de;
	DIR *d;
	int dfd;

	if (!max)
		max = BOX_SBSTATE_LIST_MAX;
	d = opendir(dir);
	if (!d) {
		if (errno == ENOENT)
			goto build;
		box_err_sys(err, "open %s", dir);
		return NULL;
	}
	dfd = dirfd(d);
	if (!(ids = calloc(max, sizeof(*ids)))) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto fail;
	}
	/* lock files and strays share the directory: bound the whole scan, not only the hits */
	while ((de = readdir(d))) {
		if (++seen > 4 * max + 16) {
			box_err_limit(err, BOX_E_LIMIT, "sessions", (int64_t)max, "entries",
				      "too many entries in %s", dir);
			goto fail;
		}
		if (!box_sbstate_valid_id(de->d_name))
			continue;
		{
			char path[300];
			struct stat st;

			snprintf(path, sizeof(path), "%s/%s", de->d_name, STATE_FILE);
			if (fstatat(dfd, path, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
				continue;
		}
		if (n >= max) {
			box_err_limit(err, BOX_E_LIMIT, "sessions", (int64_t)max, "sessions",
				      "more than %zu sessions in %s", max, dir);
			goto fail;
		}
		if (!(ids[n] = strdup(de->d_name))) {
			box_err_set(err, BOX_E_INTERNAL, "out of memory");
			goto fail;
		}
		n++;
	}
	closedir(d);
	d = NULL;
	if (n)
		qsort(ids, n, sizeof(*ids), cmp_str);
build:
	arr = cJSON_CreateArray();
	for (i = 0; arr && i < n; i++) {
		cJSON *s = cJSON_CreateString(ids[i]);

		if (!s) {
			cJSON_Delete(arr);
			arr = NULL;
			break;
		}
		cJSON_AddItemToArray(arr, s);
	}
	if (!arr)
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
fail:
	for (i = 0; ids && i < n; i++)
		free(ids[i]);
	free(ids);
	if (d)
		closedir(d);
	return arr;
}

static int lock_named(const char *dir, const char *id, const char *suffix, int exclusive,
		      int timeout_ms, struct box_err *err)
{
	char name[BOX_SBSTATE_ID_MAX + 16];
	int dfd, fd;

	if (!box_sbstate_valid_id(id))
		return box_err_set(err, BOX_E_INVALID, "invalid session id");
	if (box_mkdirs(dir, err))
		return -1;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return box_err_sys(err, "open %s", dir);
	snprintf(name, sizeof(name), "%s%s", id, suffix);
	fd = box_lock_open(dfd, name, exclusive, timeout_ms, err);
	close(dfd);
	if (fd < 0 && err->code == BOX_E_CONFLICT)
		err->retryable = 1;
	return fd;
}

int box_sbstate_lock(const char *dir, const char *id, int timeout_ms, struct box_err *err)
{
	return lock_named(dir, id, ".lock", 1, timeout_ms, err);
}

int box_sbstate_lock_instance(const char *dir, const char *id, int timeout_ms,
			      struct box_err *err)
{
	return lock_named(dir, id, ".run.lock", 1, timeout_ms, err);
}

int box_sbstate_lock_instance_shared(const char *dir, const char *id, int timeout_ms,
				     struct box_err *err)
{
	return lock_named(dir, id, ".run.lock", 0, timeout_ms, err);
}

int box_sbstate_plan(const struct box_sbstate *rec, const char *provider,
		     enum box_sb_observed observed, struct box_sb_plan *plan,
		     struct box_err *err)
{
	memset(plan, 0, sizeof(*plan));
	if (!box_sbstate_valid_provider(provider))
		return box_err_set(err, BOX_E_INVALID, "invalid provider name");
	if (!rec || rec->state == BOX_SB_DELETED) {
		plan->action = BOX_SB_ACT_CREATE;
		plan->run_init = 1;
		return 0;
	}
	if (strcmp(rec->provider, provider) != 0)
		return box_err_set(err, BOX_E_CONFLICT,
				   "provider mismatch: session %s was made by %s, not %s",
				   rec->id, rec->provider, provider);
	switch (observed) {
	case BOX_SB_OBS_RUNNING:
		plan->action = BOX_SB_ACT_NONE;
		break;
	case BOX_SB_OBS_PAUSED:
		plan->action = BOX_SB_ACT_RESUME;
		break;
	default:
		plan->action = BOX_SB_ACT_REPLACE;
		plan->lost = 1;
		break;
	}
	plan->run_init = !rec->init_completed_at[0] || rec->last_init_error != NULL;
	return 0;
}
