/* lib/sandbox/sbjobs: handles, signals, the log cap, the running cap and the pruning of
 * ended records, schedules (bound, numbers never given twice, due, skipped, removal), the
 * listing and a watcher that is gone. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "fswalk.h"
#include "json.h"
#include "sbjobs.h"
#include "tap.h"
#include "banned.h"

static char root[] = "/tmp/t-sbjobs.XXXXXX";

static void test_names(void)
{
	static const struct {
		const char *h;
		char kind;
		int want;
	} cases[] = {
		{ "bg-1", 'b', 1 }, { "bg-123456789", 'b', 1 }, { "bg-1234567890", 'b', 0 },
		{ "bg-0", 'b', 0 }, { "bg-01", 'b', 0 }, { "bg-", 'b', 0 }, { "bg-1x", 'b', 0 },
		{ "../bg-1", 'b', 0 }, { "bg-1/..", 'b', 0 }, { "sched-1", 'b', 0 },
		{ "sched-7", 's', 1 }, { "bg-7", 's', 0 }, { "", 'b', 0 },
	};
	size_t k;

	for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
		is_int(box_sbjobs_valid_handle(cases[k].h, cases[k].kind), cases[k].want,
		       "handle '%s' (%c)", cases[k].h, cases[k].kind);
	ok(!box_sbjobs_valid_handle(NULL, 'b'), "no handle");
	is_int(box_sbjobs_signal_of("TERM"), SIGTERM, "TERM");
	is_int(box_sbjobs_signal_of("SIGKILL"), SIGKILL, "SIGKILL");
	is_int(box_sbjobs_signal_of("9"), 9, "9");
	is_int(box_sbjobs_signal_of("64"), 64, "64");
	is_int(box_sbjobs_signal_of("65"), 0, "65 is none");
	is_int(box_sbjobs_signal_of("0"), 0, "0 is none");
	is_int(box_sbjobs_signal_of("009"), 0, "three digits are none");
	is_int(box_sbjobs_signal_of("-9"), 0, "-9 is none");
	is_int(box_sbjobs_signal_of("SIG"), 0, "SIG is none");
	is_int(box_sbjobs_signal_of("term"), 0, "names are upper case");
	is_int(box_sbjobs_signal_of(""), 0, "empty is none");
	is_int(box_sbjobs_log_cap(1 << 20), (1 << 20) / 64, "the cap of 1 MiB of disk");
	is_int(box_sbjobs_log_cap((int64_t)1 << 40), BOX_SBJOBS_LOG_MAX, "at most 16 MiB");
	is_int(box_sbjobs_log_cap(0), BOX_SBJOBS_LOG_MAX, "no disk limit");
}

/* a record of handle in state, its watcher this process (alive) or pid 0 (gone) */
static void set_state(int dfd, const char *handle, const char *state, int alive)
{
	struct box_err e;
	cJSON *rec;
	int64_t start = 0;

	box_err_init(&e);
	rec = box_sbjobs_get(dfd, handle, &e);
	cJSON_DeleteItemFromObjectCaseSensitive(rec, "state");
	cJSON_AddStringToObject(rec, "state", state);
	cJSON_DeleteItemFromObjectCaseSensitive(rec, "watcher");
	cJSON_DeleteItemFromObjectCaseSensitive(rec, "watcher_start");
	if (alive && box_sbjobs_proc_stat(getpid(), NULL, &start) == 0) {
		cJSON_AddNumberToObject(rec, "watcher", getpid());
		box_json_add_int64(rec, "watcher_start", start);
	} else {
		cJSON_AddNumberToObject(rec, "watcher", 0);
	}
	box_sbjobs_put(dfd, handle, rec, &e);
	cJSON_Delete(rec);
}

static void test_commands(void)
{
	char sdir[64], handle[BOX_SBJOBS_HANDLE_MAX], p[128];
	struct box_err e;
	cJSON *argv = cJSON_CreateArray(), *rec, *list;
	struct stat st;
	int dfd, k, rc;

	box_fmt(sdir, sizeof(sdir), "%s/s1", root);
	mkdir(sdir, 0700);
	box_err_init(&e);
	is_int(box_sbjobs_running(sdir), 0, "no jobs directory: none runs");
	list = box_sbjobs_list(sdir, &e);
	ok(list && cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(list, "commands")) == 0,
	   "no jobs directory: an empty listing");
	cJSON_Delete(list);
	dfd = box_sbjobs_dir(sdir, &e);
	ok(dfd >= 0, "the jobs directory");
	box_fmt(p, sizeof(p), "%s/jobs", sdir);
	ok(stat(p, &st) == 0 && (st.st_mode & 0777) == 0700, "... mode 0700");
	cJSON_AddItemToArray(argv, cJSON_CreateString("sleep"));
	for (k = 1; k <= BOX_SBJOBS_RUNNING_MAX; k++) {
		char want[16];

		rc = box_sbjobs_reserve(dfd, argv, NULL, handle, &e);
		box_fmt(want, sizeof(want), "bg-%d", k);
		if (rc < 0 || strcmp(handle, want) != 0)
			break;
		set_state(dfd, handle, "running", 1);
	}
	is_int(k, BOX_SBJOBS_RUNNING_MAX + 1, "32 reserved, bg-1 to bg-32");
	ok(box_sbjobs_reserve(dfd, argv, NULL, handle, &e) < 0 && e.code == BOX_E_LIMIT,
	   "the 33rd is limit_exceeded");
	box_fmt(p, sizeof(p), "%s/jobs/bg-33.json", sdir);
	ok(access(p, F_OK) < 0, "... and leaves no record");
	is_int(box_sbjobs_running(sdir), 32, "32 run");
	/* a watcher that is gone: the command shows as killed and takes no room */
	set_state(dfd, "bg-3", "running", 0);
	box_err_init(&e);
	rec = box_sbjobs_get(dfd, "bg-3", &e);
	is_str(box_json_get_str(rec, "state", ""), "killed", "a running command without its "
	       "watcher is killed");
	cJSON_Delete(rec);
	ok(box_sbjobs_signal(dfd, "bg-3", SIGTERM, &e) < 0 && e.code == BOX_E_CONFLICT,
	   "... and cannot be signalled");
	box_err_init(&e);
	ok(box_sbjobs_reserve(dfd, argv, NULL, handle, &e) == 0 && strcmp(handle, "bg-33") == 0,
	   "then bg-33 has room");
	box_sbjobs_unreserve(dfd, handle);
	ok(access(p, F_OK) < 0, "unreserve removes its record");
	box_fmt(p, sizeof(p), "%s/jobs/bg-33.sig", sdir);
	ok(access(p, F_OK) < 0, "... and its FIFO");
	/* a live command takes the byte on its FIFO */
	{
		char fifo[128];
		int r, w;
		unsigned char b = 0;

		box_fmt(fifo, sizeof(fifo), "%s/jobs/bg-1.sig", sdir);
		r = open(fifo, O_RDWR | O_NONBLOCK);
		box_err_init(&e);
		ok(box_sbjobs_signal(dfd, "bg-1", SIGINT, &e) == 0, "signal a running command");
		w = (int)read(r, &b, 1);
		ok(w == 1 && b == SIGINT, "... its watcher reads the signal number");
		close(r);
		ok(box_sbjobs_signal(dfd, "bg-1", SIGINT, &e) < 0 && e.code == BOX_E_CONFLICT,
		   "no reader on the FIFO: conflict");
	}
	/* a start whose starter died before its watcher came: killed, and no room taken */
	box_err_init(&e);
	ok(box_sbjobs_reserve(dfd, argv, NULL, handle, &e) == 0, "reserve %s", handle);
	rec = box_sbjobs_get(dfd, handle, &e);
	is_str(box_json_get_str(rec, "state", ""), "starting", "... starting while its starter lives");
	cJSON_DeleteItemFromObjectCaseSensitive(rec, "starter");
	cJSON_AddNumberToObject(rec, "starter", 0);
	box_sbjobs_put(dfd, handle, rec, &e);
	cJSON_Delete(rec);
	rec = box_sbjobs_get(dfd, handle, &e);
	is_str(box_json_get_str(rec, "state", ""), "killed", "... killed once it is gone");
	is_str(box_json_get_str(rec, "reason", ""), "its start was interrupted", "... and why");
	cJSON_Delete(rec);
	box_sbjobs_unreserve(dfd, handle);
	box_err_init(&e);
	ok(!box_sbjobs_get(dfd, "bg-99", &e) && e.code == BOX_E_NOT_FOUND, "bg-99: not_found");
	box_err_init(&e);
	ok(!box_sbjobs_get(dfd, "../x", &e) && e.code == BOX_E_INVALID, "../x: invalid_request");
	/* ended ones: the oldest beyond 64 go */
	for (k = 1; k <= 32; k++) {
		char h[16];

		box_fmt(h, sizeof(h), "bg-%d", k);
		set_state(dfd, h, "exited", 0);
	}
	for (k = 0; k < 40; k++) {
		box_err_init(&e);
		if (box_sbjobs_reserve(dfd, argv, NULL, handle, &e) < 0)
			break;
		set_state(dfd, handle, "exited", 0);
	}
	is_int(k, 40, "40 more");
	box_err_init(&e);
	box_sbjobs_reserve(dfd, argv, NULL, handle, &e);
	set_state(dfd, handle, "exited", 0);
	list = box_sbjobs_list(sdir, &e);
	is_int(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(list, "commands")),
	       BOX_SBJOBS_KEPT + 1, "32 ended kept (and the newest)");
	is_str(box_json_get_str(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(list, "commands"),
						   0), "handle", ""), "bg-41", "the oldest went");
	ok(!cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(
		cJSON_GetObjectItemCaseSensitive(list, "commands"), 0), "watcher"),
	   "the listing shows no watcher");
	cJSON_Delete(list);
	close(dfd);
	cJSON_Delete(argv);
}

static void test_schedules(void)
{
	char sdir[64], handle[BOX_SBJOBS_HANDLE_MAX], job[BOX_SBJOBS_HANDLE_MAX];
	const char *env[] = { "A=1", NULL };
	struct box_err e;
	cJSON *argv = cJSON_CreateArray(), *due, *list;
	int k, dfd;

	box_fmt(sdir, sizeof(sdir), "%s/s2", root);
	mkdir(sdir, 0700);
	cJSON_AddItemToArray(argv, cJSON_CreateString("true"));
	box_err_init(&e);
	for (k = 1; k <= BOX_SBJOBS_SCHEDULES_MAX; k++)
		if (box_sbjobs_schedule_add(sdir, argv, env, NULL, 1, handle, &e) < 0)
			break;
	is_int(k, BOX_SBJOBS_SCHEDULES_MAX + 1, "16 schedules");
	is_str(handle, "sched-16", "... the last sched-16");
	ok(box_sbjobs_schedule_add(sdir, argv, env, NULL, 1, handle, &e) < 0 &&
	   e.code == BOX_E_LIMIT, "the 17th is limit_exceeded");
	box_err_init(&e);
	ok(box_sbjobs_schedule_remove(sdir, "sched-16", &e) == 0, "unschedule sched-16");
	ok(box_sbjobs_schedule_remove(sdir, "sched-16", &e) < 0 && e.code == BOX_E_NOT_FOUND,
	   "... twice: not_found");
	box_err_init(&e);
	ok(box_sbjobs_schedule_remove(sdir, "bg-1", &e) < 0 && e.code == BOX_E_INVALID,
	   "bg-1 is no schedule");
	box_err_init(&e);
	ok(box_sbjobs_schedule_add(sdir, argv, env, NULL, 1, handle, &e) == 0 &&
	   strcmp(handle, "sched-17") == 0, "the next is sched-17, never sched-16 again");
	for (k = 1; k <= 17; k++) {
		char h[16];

		box_fmt(h, sizeof(h), "sched-%d", k);
		box_sbjobs_schedule_remove(sdir, h, &e);
	}
	box_err_init(&e);
	box_sbjobs_schedule_add(sdir, argv, env, "/tmp", 2, handle, &e);
	is_str(handle, "sched-18", "all removed: still sched-18");
	dfd = box_sbjobs_dir(sdir, &e);
	due = box_sbjobs_schedules_due(dfd, box_now_ms());
	is_int(cJSON_GetArraySize(due), 0, "nothing due before every");
	cJSON_Delete(due);
	due = box_sbjobs_schedules_due(dfd, box_now_ms() + 2500);
	is_int(cJSON_GetArraySize(due), 1, "due after every");
	ok(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(due, 0), "env")) == 1,
	   "... with the environment of its runs");
	cJSON_Delete(due);
	due = box_sbjobs_schedules_due(dfd, box_now_ms() + 2600);
	is_int(cJSON_GetArraySize(due), 0, "not again before the next every");
	cJSON_Delete(due);
	box_sbjobs_reserve(dfd, argv, "sched-18", job, &e);
	set_state(dfd, job, "running", 1);
	box_sbjobs_schedule_ran(dfd, "sched-18", job);
	due = box_sbjobs_schedules_due(dfd, box_now_ms() + 10000);
	is_int(cJSON_GetArraySize(due), 0, "its last run still goes: skipped");
	cJSON_Delete(due);
	list = box_sbjobs_list(sdir, &e);
	{
		const cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(list, "schedules"), 0);

		is_int(box_json_get_int(s, "runs", -1), 1, "one run");
		is_int(box_json_get_int(s, "skipped", -1), 1, "one skipped");
		is_str(box_json_get_str(s, "last", ""), job, "its last run");
		ok(!cJSON_GetObjectItemCaseSensitive(s, "env") &&
		   !cJSON_GetObjectItemCaseSensitive(s, "next_at") &&
		   cJSON_GetObjectItemCaseSensitive(s, "next_in_ms"),
		   "the listing shows neither env nor the host's clock");
	}
	cJSON_Delete(list);
	set_state(dfd, job, "exited", 0);
	due = box_sbjobs_schedules_due(dfd, box_now_ms() + 20000);
	is_int(cJSON_GetArraySize(due), 1, "its last run ended: due again");
	cJSON_Delete(due);
	close(dfd);
	cJSON_Delete(argv);
}

int main(void)
{
	struct box_err e;

	if (!mkdtemp(root))
		return 1;
	test_names();
	test_commands();
	test_schedules();
	box_err_init(&e);
	ok(chdir("/tmp") == 0 && box_fswalk_remove(AT_FDCWD, root + 5, &e) == 0, "cleaned up");
	return done_testing();
}
