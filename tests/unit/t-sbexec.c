/* lib/sandbox/sbexec: the limit classification and the judgement of an exec result (pure
 * functions), its one rendering as JSON and the reading of a plug-in's answer. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "sbexec.h"
#include "tap.h"
#include "banned.h"

/* the facts of a command that exited 0, nothing seen, counters at zero */
static struct box_sbexec_facts clean(void)
{
	struct box_sbexec_facts f = { 0 };

	f.exited = 1;
	return f;
}

static void test_classify(void)
{
	static const struct {
		const char *what;
		int timed_out, seen, disk_full, exited, code, sig;
		int64_t oom, pids;
		enum box_sbexec_limit want;
	} cases[] = {
		{ "a clean exit", 0, 0, 0, 1, 0, 0, 0, 0, BOX_SBEXEC_LIMIT_NONE },
		{ "a failing exit is no limit", 0, 0, 0, 1, 3, 0, 0, 0, BOX_SBEXEC_LIMIT_NONE },
		{ "SIGKILL alone is no limit", 0, 0, 0, 0, 0, SIGKILL, 0, 0, BOX_SBEXEC_LIMIT_NONE },
		{ "the deadline", 1, 0, 0, 0, 0, SIGKILL, 0, 0, BOX_SBEXEC_LIMIT_TIMEOUT },
		{ "the deadline beats what was seen", 1, BOX_SBEXEC_LIMIT_CPU, 1, 0, 0, SIGXCPU, 1, 1,
		  BOX_SBEXEC_LIMIT_TIMEOUT },
		{ "cpu seen by the host", 0, BOX_SBEXEC_LIMIT_CPU, 0, 0, 0, SIGKILL, 0, 0,
		  BOX_SBEXEC_LIMIT_CPU },
		{ "disk seen beats an OOM kill", 0, BOX_SBEXEC_LIMIT_DISK, 0, 0, 0, SIGKILL, 1, 0,
		  BOX_SBEXEC_LIMIT_DISK },
		{ "a full disk at the end", 0, 0, 1, 1, 1, 0, 0, 0, BOX_SBEXEC_LIMIT_DISK },
		{ "SIGXCPU (the rlimit)", 0, 0, 0, 0, 0, SIGXCPU, 0, 0, BOX_SBEXEC_LIMIT_CPU },
		{ "SIGXFSZ (the rlimit)", 0, 0, 0, 0, 0, SIGXFSZ, 0, 0, BOX_SBEXEC_LIMIT_DISK },
		{ "an OOM kill", 0, 0, 0, 0, 0, SIGKILL, 1, 0, BOX_SBEXEC_LIMIT_MEMORY },
		{ "OOM counters unknown", 0, 0, 0, 0, 0, SIGKILL, -1, -1, BOX_SBEXEC_LIMIT_NONE },
		{ "a refused fork of a failing command", 0, 0, 0, 1, 1, 0, 0, 2, BOX_SBEXEC_LIMIT_PIDS },
		{ "a refused fork of a killed command", 0, 0, 0, 0, 0, SIGKILL, 0, 1,
		  BOX_SBEXEC_LIMIT_PIDS },
		{ "a refused fork of a command that succeeded", 0, 0, 0, 1, 0, 0, 0, 5,
		  BOX_SBEXEC_LIMIT_NONE },
		{ "memory before pids", 0, 0, 0, 1, 1, 0, 1, 1, BOX_SBEXEC_LIMIT_MEMORY },
	};
	size_t k;

	for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct box_sbexec_facts f = clean();

		f.timed_out = cases[k].timed_out;
		f.seen = (enum box_sbexec_limit)cases[k].seen;
		f.disk_full = cases[k].disk_full;
		f.exited = cases[k].exited;
		f.code = cases[k].code;
		f.sig = cases[k].sig;
		f.oom_kills = cases[k].oom;
		f.pids_max_hits = cases[k].pids;
		is_int(box_sbexec_classify(&f), cases[k].want, "classify: %s", cases[k].what);
	}
}

static void test_judge(void)
{
	struct box_sbexec_conf c = { 500, 1 << 20, 16, 2000, 4 << 20 };
	struct box_sbexec_result r;
	struct box_err e;

	box_sbexec_result_init(&r);
	r.exited = 1;
	box_sbexec_judge(&r, &c, &e);
	is_int(e.code, BOX_OK, "exit 0 is no error");
	r.exit_code = 3;
	box_sbexec_judge(&r, &c, &e);
	ok(e.code == BOX_E_GUEST && strstr(e.message, "status 3") && !e.has_configured,
	   "exit 3 is guest_error naming the status");
	r.exited = 0;
	box_fmt(r.signal, sizeof(r.signal), "SIGSEGV");
	box_sbexec_judge(&r, &c, &e);
	ok(e.code == BOX_E_GUEST && strstr(e.message, "SIGSEGV"), "a signal is guest_error");
	r.limit = BOX_SBEXEC_LIMIT_TIMEOUT;
	box_sbexec_judge(&r, &c, &e);
	ok(e.code == BOX_E_TIMEOUT && strcmp(e.limit, "timeout_ms") == 0 &&
	   e.has_configured && e.configured == 500 && strcmp(e.unit, "ms") == 0,
	   "timeout: limit timeout_ms, configured 500 ms");
	r.limit = BOX_SBEXEC_LIMIT_PIDS;
	box_sbexec_judge(&r, &c, &e);
	ok(e.code == BOX_E_LIMIT && strcmp(e.limit, "pids") == 0 && e.configured == 16 &&
	   strcmp(e.unit, "processes") == 0, "pids: limit_exceeded with 16 processes");
	r.limit = BOX_SBEXEC_LIMIT_DISK;
	box_sbexec_judge(&r, &c, &e);
	ok(e.code == BOX_E_LIMIT && strcmp(e.limit, "disk") == 0 && e.configured == 4 << 20,
	   "disk: limit_exceeded with the disk bytes");
	r.limit = BOX_SBEXEC_LIMIT_OTHER;
	box_fmt(r.limit_name, sizeof(r.limit_name), "gpu_hours");
	box_sbexec_judge(&r, &c, &e);
	ok(e.code == BOX_E_LIMIT && strstr(e.message, "gpu_hours") && !e.has_configured &&
	   !e.limit[0], "a plug-in's own limit: limit_exceeded without a configured value");
	box_sbexec_result_release(&r);
}

static void test_render(void)
{
	struct box_sbexec_result r;
	struct box_err e;
	cJSON *o;
	char *text;

	box_err_init(&e);
	box_sbexec_result_init(&r);
	o = box_sbexec_to_json(&r);
	text = cJSON_PrintUnformatted(o);
	is_str(text, "{\"exit_code\":null,\"signal\":null,\"stdout\":\"\",\"stderr\":\"\","
	       "\"truncated\":false,\"resource_limit\":null,\"outputs\":[]}",
	       "an empty result renders the members every result has");
	cJSON_free(text);
	cJSON_Delete(o);
	r.exited = 1;
	r.exit_code = 2;
	ok(box_sbexec_set_output(&r, 1, "ok\xff\n\xe2\x82", 6, &e) == 0 && r.lossy,
	   "invalid UTF-8 and a cut character make the result lossy");
	is_str(r.out.data, "ok\xef\xbf\xbd\n", "the bad byte is U+FFFD, the cut character dropped");
	r.total_lines = 1;
	r.duration_ms = 7;
	r.limit = BOX_SBEXEC_LIMIT_MEMORY;
	box_fmt(r.limits_enforced_by, sizeof(r.limits_enforced_by), "cgroup");
	box_fmt(r.disk_limit, sizeof(r.disk_limit), "walk");
	box_fmt(r.disk_unmeasured, sizeof(r.disk_unmeasured), "too many entries");
	r.full_output_path = strdup("/x/logs/exec-1.log");
	r.truncated = 1;
	o = box_sbexec_to_json(&r);
	/* as printed (box's 64-bit integers are raw numbers until then) */
	text = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	o = box_json_parse(text, strlen(text), &e);
	cJSON_free(text);
	is_int(box_json_get_int(o, "exit_code", -1), 2, "exit_code is rendered");
	is_int(box_json_get_int(o, "duration_ms", -1), 7, "duration_ms is rendered");
	is_int(box_json_get_int(o, "total_lines", -1), 1, "total_lines is rendered");
	is_str(box_json_get_str(o, "resource_limit", ""), "memory", "resource_limit is rendered");
	is_str(box_json_get_str(o, "limits_enforced_by", ""), "cgroup",
	       "limits_enforced_by is rendered");
	is_str(box_json_get_str(o, "full_output_path", ""), "/x/logs/exec-1.log",
	       "full_output_path is rendered");
	is_str(box_json_get_str(o, "disk_limit", ""), "walk", "disk_limit is rendered");
	is_str(box_json_get_str(o, "disk_unmeasured", ""), "too many entries",
	       "disk_unmeasured is rendered");
	ok(box_json_get_bool(o, "lossy", 0) && box_json_get_bool(o, "truncated", 0),
	   "lossy and truncated are rendered");
	cJSON_Delete(o);
	box_sbexec_result_release(&r);
}

static void test_from_json(void)
{
	static const char *const bad[] = {
		"{\"exit_code\": \"0\"}", "{\"exit_code\": 1.5}", "{\"signal\": 9}",
		"{\"stdout\": null}", "{\"truncated\": 1}", "{\"total_lines\": -1}",
		"{\"resource_limit\": 3}", "{\"resource_limit\": \"\"}", "{\"outputs\": {}}",
		"{\"limits_enforced_by\": \"a-name-far-too-long-to-keep\"}", "[]",
		"{\"output_error\": \"io_error\"}", "{\"output_error\": {\"message\": \"x\"}}",
	};
	const char *good = "{\"ok\": true, \"session\": \"x\", \"exit_code\": 0, \"signal\": null,"
			   "\"stdout\": \"hi\\n\", \"stderr\": \"\", \"truncated\": false,"
			   "\"total_lines\": 1, \"duration_ms\": 4, \"resource_limit\": \"gpu\","
			   "\"outputs\": [{\"path\": \"a\"}], \"node\": \"n1\", \"error\": {}}";
	struct box_sbexec_result r;
	struct box_err e;
	cJSON *in, *o;
	size_t k;

	box_err_init(&e);
	in = box_json_parse(good, strlen(good), &e);
	box_sbexec_result_init(&r);
	ok(box_sbexec_from_json(&r, in, &e) == 0, "a plug-in's answer is read");
	ok(r.exited && r.exit_code == 0 && strcmp(r.out.data, "hi\n") == 0 && r.total_lines == 1 &&
	   r.duration_ms == 4 && r.limit == BOX_SBEXEC_LIMIT_OTHER &&
	   strcmp(box_sbexec_limit_name(&r), "gpu") == 0, "its members are typed");
	o = box_sbexec_to_json(&r);
	ok(strcmp(box_json_get_str(o, "node", ""), "n1") == 0 &&
	   !cJSON_GetObjectItemCaseSensitive(o, "ok") &&
	   !cJSON_GetObjectItemCaseSensitive(o, "session") &&
	   !cJSON_GetObjectItemCaseSensitive(o, "error") &&
	   cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, "outputs")) == 1,
	   "a member box does not know is passed on; ok, session and error are box's to say");
	cJSON_Delete(o);
	cJSON_Delete(in);
	box_sbexec_result_release(&r);
	for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		box_err_init(&e);
		in = box_json_parse(bad[k], strlen(bad[k]), &e);
		box_sbexec_result_init(&r);
		is_int(box_sbexec_from_json(&r, in, &e), -1, "refused: %s", bad[k]);
		is_int(e.code, BOX_E_PROVIDER, "as provider_error: %s", bad[k]);
		box_sbexec_result_release(&r);
		cJSON_Delete(in);
	}
}

/* A /output that could not be listed: reported beside the command's result, never in place
 * of it, and the error of the exec only when the command itself succeeded. */
static void test_output_error(void)
{
	struct box_sbexec_conf c = { 500, 1 << 20, 16, 2000, 4 << 20 };
	struct box_sbexec_result r;
	struct box_err e;
	cJSON *o, *in;
	char *text;
	const char *plugin = "{\"exit_code\": 0, \"outputs\": [{\"path\": \"a\"}], "
			     "\"output_error\": {\"code\": \"io_error\", \"message\": \"gone\"}}";

	box_sbexec_result_init(&r);
	r.exited = 1;
	box_err_limit(&r.output_error, BOX_E_LIMIT, "depth", 64, "components", "too deep");
	box_sbexec_judge(&r, &c, &e);
	ok(e.code == BOX_E_LIMIT && strcmp(e.limit, "depth") == 0 && e.configured == 64 &&
	   strcmp(e.message, "too deep") == 0, "a command that succeeded: the output error is the "
	   "exec's (limit_exceeded, exit 3)");
	is_int(box_err_exit_status(e.code), 3, "... exit 3 for a bound");
	r.exit_code = 4;
	box_sbexec_judge(&r, &c, &e);
	ok(e.code == BOX_E_GUEST && strstr(e.message, "status 4"),
	   "a command that failed: its own failure comes first");
	r.exit_code = 0;
	r.limit = BOX_SBEXEC_LIMIT_TIMEOUT;
	box_fmt(r.signal, sizeof(r.signal), "SIGKILL");
	r.exited = 0;
	box_sbexec_judge(&r, &c, &e);
	ok(e.code == BOX_E_TIMEOUT && strcmp(e.limit, "timeout_ms") == 0,
	   "a command that ran out of time: timeout comes first");
	r.limit = BOX_SBEXEC_LIMIT_NONE;
	r.signal[0] = 0;
	r.exited = 1;
	box_err_init(&r.output_error);
	box_err_set(&r.output_error, BOX_E_IO, "cannot open d: Permission denied");
	box_sbexec_judge(&r, &c, &e);
	ok(e.code == BOX_E_IO && box_err_exit_status(e.code) == 8,
	   "an output io_error of a command that succeeded: exit 8");

	ok(box_sbexec_set_output(&r, 1, "EVIDENCE\n", 9, &e) == 0, "stdout kept");
	r.outputs = cJSON_CreateArray();
	cJSON_AddItemToArray(r.outputs, cJSON_CreateString("part"));
	o = box_sbexec_to_json(&r);
	text = cJSON_PrintUnformatted(o);
	is_str(text, "{\"exit_code\":0,\"signal\":null,\"stdout\":\"EVIDENCE\\n\",\"stderr\":\"\","
	       "\"truncated\":false,\"resource_limit\":null,\"outputs\":[],\"output_error\":"
	       "{\"code\":\"io_error\",\"message\":\"cannot open d: Permission denied\","
	       "\"retryable\":false}}",
	       "rendered: the result, outputs [] (never a part of the listing), output_error beside");
	cJSON_free(text);
	cJSON_Delete(o);
	box_sbexec_result_release(&r);
	ok(r.output_error.code == BOX_OK && !r.outputs, "release empties output_error");

	box_sbexec_result_init(&r);
	in = box_json_parse(plugin, strlen(plugin), &e);
	ok(box_sbexec_from_json(&r, in, &e) == 0 && r.output_error.code == BOX_E_IO &&
	   strcmp(r.output_error.message, "gone") == 0, "a plug-in's output_error is read");
	box_sbexec_judge(&r, &c, &e);
	is_int(e.code, BOX_E_IO, "... and judged");
	o = box_sbexec_to_json(&r);
	ok(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, "outputs")) == 0 &&
	   cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "output_error")),
	   "... its outputs rendered as []");
	cJSON_Delete(o);
	cJSON_Delete(in);
	box_sbexec_result_release(&r);
}

/* box_sbexec_set_cut_output: head, the marker line, tail; character boundaries kept */
static void test_cut_output(void)
{
	struct box_sbexec_result r;
	struct box_err e;
	cJSON *o, *in;

	box_sbexec_result_init(&r);
	box_err_init(&e);
	ok(box_sbexec_set_cut_output(&r, 1, "head", 4, "tail\n", 5, 100, "/logs/exec-1-2.log",
				     &e) == 0, "a cut stream is kept");
	is_str(r.out.data, "head\n[box-sandbox: 91 bytes cut here; the whole output is in "
	       "/logs/exec-1-2.log]\ntail\n", "head, a newline, the marker with the bytes left out, "
	       "tail");
	ok(!r.lossy, "... and nothing is lossy");
	ok(box_sbexec_set_cut_output(&r, 2, "a\n", 2, "b", 1, 10, NULL, &e) == 0, "stderr too");
	is_str(r.err.data, "a\n[box-sandbox: 7 bytes cut here; the whole output is in nowhere]\nb",
	       "a head ending in a newline gets none more; no log is \"nowhere\"");
	/* "é" is c3 a9: the head ends inside one, the tail starts inside another */
	ok(box_sbexec_set_cut_output(&r, 1, "x\xc3\xa9y\xc3", 5, "\xa9z", 2, 20, "/l", &e) == 0,
	   "characters split at either cut");
	is_str(r.out.data, "x\xc3\xa9y\n[box-sandbox: 15 bytes cut here; the whole output is in "
	       "/l]\nz", "... are dropped whole, counted among the bytes cut, never made U+FFFD");
	ok(!r.lossy, "... and nothing is lossy");
	ok(box_sbexec_set_cut_output(&r, 1, NULL, 0, NULL, 0, 5, NULL, &e) == 0,
	   "max_output_bytes 0");
	is_str(r.out.data, "[box-sandbox: 5 bytes cut here; the whole output is in nowhere]\n",
	       "... keeps the marker alone");
	r.full_output_path = strdup("/s/logs/exec-1-2.log");
	r.full_output_log = strdup("/logs/exec-1-2.log");
	o = box_sbexec_to_json(&r);
	is_str(box_json_get_str(o, "full_output_log", ""), "/logs/exec-1-2.log",
	       "full_output_log is rendered");
	box_sbexec_result_release(&r);
	box_sbexec_result_init(&r);
	{
		/* as printed (the streams are rendered raw until then) */
		char *text = cJSON_PrintUnformatted(o);

		in = box_json_parse(text, strlen(text), &e);
		cJSON_free(text);
	}
	ok(box_sbexec_from_json(&r, in, &e) == 0 && r.full_output_log &&
	   strcmp(r.full_output_log, "/logs/exec-1-2.log") == 0, "... and read back from a plug-in");
	cJSON_Delete(in);
	cJSON_Delete(o);
	box_sbexec_result_release(&r);
}

int main(void)
{
	test_cut_output();
	test_classify();
	test_judge();
	test_render();
	test_from_json();
	test_output_error();
	return done_testing();
}
