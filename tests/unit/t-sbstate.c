#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbstate.h"
#include "tap.h"
#include "banned.h"

static char root[64];
static char dir[128];

static void put_file(const char *id, const char *text, size_t len)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, id);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/%s/state.json", dir, id);
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd >= 0) {
		if (write(fd, text, len) != (ssize_t)len)
			printf("# short write\n");
		close(fd);
	}
}

#define GOOD_REC \
	"{\"id\":\"%s\",\"provider\":\"local\",\"state\":\"%s\",\"created_at\":\"2026-01-01T00:00:00Z\"," \
	"\"updated_at\":\"2026-01-01T00:00:00Z\",\"last_used_at\":\"2026-01-01T00:00:00Z\"," \
	"\"init\":[\"echo hi\"],\"init_completed_at\":null,\"last_init_error\":null," \
	"\"limits\":{},\"provider_data\":{}%s,\"version\":3}"

static int read_code(const char *id, const char *state, const char *extra, char *path_out)
{
	char text[2048];
	struct box_sbstate s;
	struct box_err err;
	int rc;

	snprintf(text, sizeof(text), GOOD_REC, id, state, extra);
	put_file(id, text, strlen(text));
	box_err_init(&err);
	rc = box_sbstate_read(dir, id, &s, &err);
	if (path_out)
		snprintf(path_out, 64, "%.60s", err.path);
	box_sbstate_release(&s);
	return rc == 0 ? BOX_OK : (int)err.code;
}

static void test_ids(void)
{
	char long_id[80];

	ok(box_sbstate_valid_id("a"), "id a");
	ok(box_sbstate_valid_id("0abc_def-9"), "id with _ and -");
	ok(!box_sbstate_valid_id(""), "empty id refused");
	ok(!box_sbstate_valid_id(NULL), "NULL id refused");
	ok(!box_sbstate_valid_id("../etc"), "id .. refused");
	ok(!box_sbstate_valid_id("a/b"), "id with / refused");
	ok(!box_sbstate_valid_id("a.b"), "id with . refused");
	ok(!box_sbstate_valid_id("-a"), "id starting with - refused");
	ok(!box_sbstate_valid_id("_a"), "id starting with _ refused");
	ok(!box_sbstate_valid_id("Abc"), "upper case refused");
	memset(long_id, 'a', 64);
	long_id[64] = 0;
	ok(box_sbstate_valid_id(long_id), "64-char id");
	long_id[64] = 'a';
	long_id[65] = 0;
	ok(!box_sbstate_valid_id(long_id), "65-char id refused");
	ok(box_sbstate_valid_provider("local"), "provider local");
	ok(box_sbstate_valid_provider("k8s-pod"), "provider k8s-pod");
	ok(!box_sbstate_valid_provider("../x"), "provider path refused");
	ok(!box_sbstate_valid_provider("a_b"), "provider _ refused");
	ok(!box_sbstate_valid_provider(""), "empty provider refused");
	is_int(box_sbstate_state_from_name("paused"), BOX_SB_PAUSED, "state name paused");
	is_int(box_sbstate_state_from_name("zombie"), -1, "unknown state name");
}

static void test_dir(void)
{
	struct box_err err;
	char out[256];

	box_err_init(&err);
	setenv("BOX_STATE_DIR", "/s", 1);
	setenv("XDG_STATE_HOME", "/x", 1);
	setenv("HOME", "/h", 1);
	is_int(box_sbstate_dir(out, sizeof(out), &err), 0, "dir from BOX_STATE_DIR");
	is_str(out, "/s/sandboxes", "BOX_STATE_DIR/sandboxes");
	unsetenv("BOX_STATE_DIR");
	box_sbstate_dir(out, sizeof(out), &err);
	is_str(out, "/x/box/sandboxes", "XDG_STATE_HOME/box/sandboxes");
	setenv("XDG_STATE_HOME", "", 1);
	box_sbstate_dir(out, sizeof(out), &err);
	is_str(out, "/h/.local/state/box/sandboxes", "HOME/.local/state/box/sandboxes");
	unsetenv("XDG_STATE_HOME");
	unsetenv("HOME");
	is_int(box_sbstate_dir(out, sizeof(out), &err), -1, "no variable at all");
	is_int(err.code, BOX_E_INVALID, "... invalid_request");
	is_int(box_sbstate_dir(out, 8, &err), -1, "too small a buffer");
}

static void test_crud(void)
{
	struct box_sbstate s, r, dup;
	struct box_err err;
	char path[256];
	struct stat st;

	box_err_init(&err);
	is_int(box_sbstate_new(&s, "Bad", "local", &err), -1, "new with bad id");
	is_int(err.code, BOX_E_INVALID, "... invalid_request");
	is_int(box_sbstate_new(&s, "s1", "a/b", &err), -1, "new with bad provider");
	is_int(box_sbstate_new(&s, "s1", "local", &err), 0, "new s1");
	cJSON_AddItemToArray(s.init, cJSON_CreateString("apt-get install -y jq"));
	cJSON_AddNumberToObject(s.limits, "memory", 1048576);
	cJSON_AddStringToObject(s.provider_data, "pod", "p-123");
	is_int(box_sbstate_create(dir, &s, &err), 0, "create s1");
	is_int(s.version, 1, "create sets version 1");
	snprintf(path, sizeof(path), "%s/s1/state.json", dir);
	ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "state.json is 0600");

	box_sbstate_new(&dup, "s1", "local", &err);
	box_err_init(&err);
	is_int(box_sbstate_create(dir, &dup, &err), -1, "create s1 again");
	is_int(err.code, BOX_E_CONFLICT, "... conflict");
	box_sbstate_release(&dup);

	is_int(box_sbstate_read(dir, "s1", &r, &err), 0, "read s1");
	is_str(r.id, "s1", "id");
	is_str(r.provider, "local", "provider");
	is_int(r.state, BOX_SB_RUNNING, "state running");
	is_str(r.created_at, s.created_at, "created_at");
	is_int(r.created_at[4], '-', "created_at is RFC 3339");
	is_int(r.version, 1, "version");
	is_str(r.init_completed_at, "", "init_completed_at null");
	ok(r.last_init_error == NULL, "last_init_error null");
	is_int(cJSON_GetArraySize(r.init), 1, "one init command");
	is_str(cJSON_GetArrayItem(r.init, 0)->valuestring, "apt-get install -y jq", "init command");
	is_int(cJSON_GetObjectItem(r.limits, "memory")->valueint, 1048576, "limits kept");
	is_str(cJSON_GetObjectItem(r.provider_data, "pod")->valuestring, "p-123",
	       "provider_data kept");

	r.state = BOX_SB_PAUSED;
	r.last_init_error = strdup("exit status 2");
	snprintf(r.init_completed_at, sizeof(r.init_completed_at), "2026-11-29T10:00:00Z");
	is_int(box_sbstate_write(dir, &r, &err), 0, "write s1");
	is_int(r.version, 2, "write bumps version");
	box_sbstate_release(&r);
	is_int(box_sbstate_read(dir, "s1", &r, &err), 0, "read s1 again");
	is_int(r.state, BOX_SB_PAUSED, "state paused persisted");
	is_str(r.last_init_error, "exit status 2", "last_init_error persisted");
	is_str(r.init_completed_at, "2026-11-29T10:00:00Z", "init_completed_at persisted");
	is_int(r.version, 2, "version persisted");
	box_sbstate_release(&r);

	box_sbstate_new(&dup, "ghost", "local", &err);
	box_err_init(&err);
	is_int(box_sbstate_write(dir, &dup, &err), -1, "write of a session never created");
	is_int(err.code, BOX_E_NOT_FOUND, "... not_found");
	box_sbstate_release(&dup);

	box_err_init(&err);
	is_int(box_sbstate_read(dir, "nope", &r, &err), -1, "read missing session");
	is_int(err.code, BOX_E_NOT_FOUND, "... not_found");
	box_err_init(&err);
	is_int(box_sbstate_read(dir, "../s1", &r, &err), -1, "read with path trick");
	is_int(err.code, BOX_E_INVALID, "... invalid_request");

	is_int(box_sbstate_delete(dir, "s1", &err), 0, "delete s1");
	snprintf(path, sizeof(path), "%s/s1", dir);
	ok(stat(path, &st) != 0 && errno == ENOENT, "empty session dir removed");
	box_err_init(&err);
	is_int(box_sbstate_read(dir, "s1", &r, &err), -1, "read deleted");
	is_int(err.code, BOX_E_NOT_FOUND, "... not_found");
	box_err_init(&err);
	is_int(box_sbstate_delete(dir, "s1", &err), -1, "delete twice");
	is_int(err.code, BOX_E_NOT_FOUND, "... not_found");
	is_int(box_sbstate_create(dir, &s, &err), 0, "create again after delete");
	box_sbstate_release(&s);
}

static void test_invalid(void)
{
	struct box_sbstate r;
	struct box_err err;
	char p[64], path[256], *big;

	is_int(read_code("v1", "running", "", NULL), BOX_OK, "hand-written record reads");
	is_int(read_code("v2", "zombie", "", p), BOX_E_INVALID, "unknown state: invalid_request");
	is_str(p, "$.state", "... path $.state");
	is_int(read_code("v3", "running", ",\"extra\":1", p), BOX_E_INVALID, "unknown member");
	is_int(read_code("v4", "running", ",\"limits\":[]", NULL), BOX_E_INVALID,
	       "duplicate/array limits refused");
	is_int(read_code("v5", "deleted", "", NULL), BOX_OK, "state deleted reads");

	/* a record copied under another session's name */
	{
		char text[2048];

		snprintf(text, sizeof(text), GOOD_REC, "other", "running", "");
		put_file("v6", text, strlen(text));
		box_err_init(&err);
		is_int(box_sbstate_read(dir, "v6", &r, &err), -1, "record of another id");
		is_int(err.code, BOX_E_INVALID, "... invalid_request");
		is_str(err.path, "$.id", "... path $.id");
	}
	put_file("v7", "not json", 8);
	box_err_init(&err);
	is_int(box_sbstate_read(dir, "v7", &r, &err), -1, "garbage record");
	is_int(err.code, BOX_E_INVALID, "... invalid_request");
	put_file("v8", "[1,2]", 5);
	box_err_init(&err);
	is_int(box_sbstate_read(dir, "v8", &r, &err), -1, "array record");
	is_int(err.code, BOX_E_INVALID, "... invalid_request");

	big = malloc(BOX_SBSTATE_MAX_BYTES + 10);
	memset(big, ' ', BOX_SBSTATE_MAX_BYTES + 10);
	big[0] = '{';
	big[BOX_SBSTATE_MAX_BYTES + 9] = '}';
	put_file("v9", big, BOX_SBSTATE_MAX_BYTES + 10);
	free(big);
	box_err_init(&err);
	is_int(box_sbstate_read(dir, "v9", &r, &err), -1, "oversized record");
	is_int(err.code, BOX_E_LIMIT, "... limit_exceeded");

	snprintf(path, sizeof(path), "%s/v10", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/v10/state.json", dir);
	if (symlink("../v1/state.json", path))
		printf("# symlink failed\n");
	box_err_init(&err);
	is_int(box_sbstate_read(dir, "v10", &r, &err), -1, "symlinked record not followed");
	is_int(err.code, BOX_E_INVALID, "... invalid_request");

	is_int(read_code("v11", "running", ",\"version\":-1", NULL), BOX_E_INVALID,
	       "negative version (duplicate key) refused");
}

static void test_list(void)
{
	struct box_err err;
	char path[256];
	cJSON *a;
	int fd;

	box_err_init(&err);
	a = box_sbstate_list("/nonexistent/box-sbx", 0, &err);
	ok(a && cJSON_GetArraySize(a) == 0, "missing dir lists nothing");
	cJSON_Delete(a);

	snprintf(path, sizeof(path), "%s/emptydir", dir);
	mkdir(path, 0700);
	fd = box_sbstate_lock(dir, "zz", 0, &err);
	ok(fd >= 0, "lock file for zz");
	close(fd);

	a = box_sbstate_list(dir, 0, &err);
	ok(a != NULL, "list");
	/* s1 and v1..v11 hold state.json files; emptydir, zz.lock and v10 (whose state.json
	 * is a symlink) do not count */
	is_int(cJSON_GetArraySize(a), 11, "eleven sessions");
	is_str(cJSON_GetArrayItem(a, 0)->valuestring, "s1", "sorted: s1 first");
	is_str(cJSON_GetArrayItem(a, 1)->valuestring, "v1", "then v1");
	is_str(cJSON_GetArrayItem(a, 2)->valuestring, "v11", "then v11: v10 is a symlink");
	cJSON_Delete(a);

	box_err_init(&err);
	a = box_sbstate_list(dir, 5, &err);
	ok(a == NULL, "list bounded to 5");
	is_int(err.code, BOX_E_LIMIT, "... limit_exceeded");
	is_str(err.limit, "sessions", "... limit sessions");
}

static void test_lock(void)
{
	struct box_err err;
	int a, b;

	box_err_init(&err);
	a = box_sbstate_lock(dir, "s1", 0, &err);
	ok(a >= 0, "lock s1");
	b = box_sbstate_lock(dir, "s1", 100, &err);
	is_int(b, -1, "second lock of s1 waits and fails");
	is_int(err.code, BOX_E_CONFLICT, "... conflict");
	is_int(err.retryable, 1, "... retryable");
	box_err_init(&err);
	b = box_sbstate_lock(dir, "s2", 0, &err);
	ok(b >= 0, "another session locks independently");
	close(b);
	close(a);
	b = box_sbstate_lock(dir, "s1", 0, &err);
	ok(b >= 0, "lock s1 after release");
	close(b);
	box_err_init(&err);
	is_int(box_sbstate_lock(dir, "../x", 0, &err), -1, "lock with bad id");
	is_int(err.code, BOX_E_INVALID, "... invalid_request");

	/* the instance lock is a lock of its own: a running exec holds it while status, read,
	 * write and ls take the record's */
	box_err_init(&err);
	a = box_sbstate_lock_instance(dir, "s1", 0, &err);
	ok(a >= 0, "instance lock of s1");
	b = box_sbstate_lock(dir, "s1", 0, &err);
	ok(b >= 0, "... the record's lock is still free");
	if (b >= 0)
		close(b);
	b = box_sbstate_lock_instance(dir, "s1", 100, &err);
	is_int(b, -1, "a second instance lock of s1 waits and fails");
	is_int(err.code, BOX_E_CONFLICT, "... conflict");
	is_int(err.retryable, 1, "... retryable");
	close(a);
	box_err_init(&err);
	b = box_sbstate_lock_instance(dir, "s1", 0, &err);
	ok(b >= 0, "instance lock of s1 after release");
	if (b >= 0)
		close(b);
	{
		char p[200];
		struct stat st;

		snprintf(p, sizeof(p), "%s/s1.run.lock", dir);
		ok(stat(p, &st) == 0 && S_ISREG(st.st_mode), "... the file s1.run.lock beside the "
		   "session");
	}
	box_err_init(&err);
	is_int(box_sbstate_lock_instance(dir, "../x", 0, &err), -1, "instance lock with bad id");
	is_int(err.code, BOX_E_INVALID, "... invalid_request");
	/* lock files never count as sessions */
	{
		struct box_err e2;
		cJSON *ids;

		const cJSON *id;
		int locks = 0;

		box_err_init(&e2);
		ids = box_sbstate_list(dir, 0, &e2);
		cJSON_ArrayForEach(id, ids)
			locks += strstr(id->valuestring, ".lock") != NULL;
		ok(ids && locks == 0, "list ignores lock files");
		cJSON_Delete(ids);
	}
}

static void test_plan(void)
{
	struct box_sbstate rec;
	struct box_sb_plan p;
	struct box_err err;

	box_err_init(&err);
	is_int(box_sbstate_plan(NULL, "local", BOX_SB_OBS_ABSENT, &p, &err), 0, "no record");
	is_str(box_sb_action_name(p.action), "create", "absent -> create");
	is_int(p.run_init, 1, "create runs init");

	box_sbstate_new(&rec, "p1", "local", &err);
	snprintf(rec.init_completed_at, sizeof(rec.init_completed_at), "2026-11-29T10:00:00Z");

	is_int(box_sbstate_plan(&rec, "local", BOX_SB_OBS_RUNNING, &p, &err), 0, "running");
	is_str(box_sb_action_name(p.action), "none", "running -> none");
	is_int(p.run_init, 0, "completed init not rerun");

	rec.state = BOX_SB_PAUSED;
	box_sbstate_plan(&rec, "local", BOX_SB_OBS_PAUSED, &p, &err);
	is_str(box_sb_action_name(p.action), "resume", "paused -> resume");
	is_int(p.lost, 0, "... not lost");

	rec.state = BOX_SB_RUNNING;
	box_sbstate_plan(&rec, "local", BOX_SB_OBS_PAUSED, &p, &err);
	is_str(box_sb_action_name(p.action), "resume", "drifted to paused -> resume");

	box_sbstate_plan(&rec, "local", BOX_SB_OBS_ABSENT, &p, &err);
	is_str(box_sb_action_name(p.action), "replace", "record running, provider absent -> replace");
	is_int(p.lost, 1, "... marked lost");
	is_int(p.run_init, 0, "... init done before, not rerun");

	rec.state = BOX_SB_LOST;
	box_sbstate_plan(&rec, "local", BOX_SB_OBS_ABSENT, &p, &err);
	is_str(box_sb_action_name(p.action), "replace", "lost -> replace");

	rec.state = BOX_SB_RUNNING;
	rec.init_completed_at[0] = 0;
	box_sbstate_plan(&rec, "local", BOX_SB_OBS_RUNNING, &p, &err);
	is_int(p.run_init, 1, "never completed init -> run");

	snprintf(rec.init_completed_at, sizeof(rec.init_completed_at), "2026-11-29T10:00:00Z");
	rec.last_init_error = strdup("exit status 1");
	box_sbstate_plan(&rec, "local", BOX_SB_OBS_RUNNING, &p, &err);
	is_int(p.run_init, 1, "failed init -> retry");
	box_sbstate_plan(&rec, "local", BOX_SB_OBS_PAUSED, &p, &err);
	ok(p.action == BOX_SB_ACT_RESUME && p.run_init, "resume and retry init");

	box_err_init(&err);
	is_int(box_sbstate_plan(&rec, "k8s", BOX_SB_OBS_RUNNING, &p, &err), -1,
	       "provider mismatch");
	is_int(err.code, BOX_E_CONFLICT, "... conflict");
	ok(strstr(err.message, "k8s") && strstr(err.message, "local"), "... names both");

	box_err_init(&err);
	is_int(box_sbstate_plan(&rec, "../bin/sh", BOX_SB_OBS_RUNNING, &p, &err), -1,
	       "bad provider name");
	is_int(err.code, BOX_E_INVALID, "... invalid_request");

	rec.state = BOX_SB_DELETED;
	is_int(box_sbstate_plan(&rec, "k8s", BOX_SB_OBS_ABSENT, &p, &err), 0, "deleted record");
	is_str(box_sb_action_name(p.action), "create", "deleted -> create");
	box_sbstate_release(&rec);
}

int main(void)
{
	char cmd[200];

	snprintf(root, sizeof(root), "/tmp/t-sbstate.XXXXXX");
	if (!mkdtemp(root))
		return 99;
	snprintf(dir, sizeof(dir), "%s/sandboxes", root);
	test_ids();
	test_dir();
	test_crud();
	test_invalid();
	test_list();
	test_lock();
	test_plan();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd))
		printf("# cleanup failed\n");
	return done_testing();
}
