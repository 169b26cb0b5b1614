/* lib/core/trust: the built-in policy, policy files laid over it, the agent's request checked,
 * caps, the agent's schema and the session binding. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "run.h"
#include "sandbox.h"
#include "trust.h"
#include "tap.h"
#include "banned.h"

/* the real tables: the built-in policy names their members */
#define fields box_run_fields

static char dir[] = "/tmp/t-trust-XXXXXX";

static const char *policy_file(const char *name, const char *text)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
	return path;
}

/* checks req under the policy (NULL: built-in) as "box-run"; returns the rc, err filled */
static int check(const char *policy, const char *req, const char *flags, struct box_err *err)
{
	struct box_trust t;
	cJSON *r = box_json_parse(req, strlen(req), err);
	cJSON *f = flags ? box_json_parse(flags, strlen(flags), err) : NULL;
	int rc;

	box_trust_init(&t);
	box_err_init(err);
	rc = box_trust_load(&t, "box-run", fields, policy, 0, err);
	if (rc == 0)
		rc = box_trust_check(&t, r, f, err);
	box_trust_release(&t);
	cJSON_Delete(r);
	cJSON_Delete(f);
	return rc;
}

static void test_check(void)
{
	struct box_err err;

	is_int(check(NULL, "{\"script\":\"x\",\"timeout_ms\":60000,\"events\":true}", NULL, &err),
	       0, "the built-in policy lets the agent set script, timeout_ms up to 60000, events");
	is_int(check(NULL, "{\"script\":\"x\",\"timeout_ms\":60001}", NULL, &err), -1,
	       "one ms past the cap is refused");
	is_int(err.code, BOX_E_POLICY, "... policy_denied");
	is_str(err.path, "$.timeout_ms", "... at $.timeout_ms");
	ok(err.has_configured && err.configured == 60000, "... configured is the cap");
	is_str(err.unit, "ms", "... in ms");
	is_int(check(NULL, "{\"workspace\":\"/\"}", NULL, &err), -1, "workspace is the operator's");
	is_str(err.path, "$.workspace", "... at $.workspace");
	is_int(check(NULL, "{\"workspace\":null}", NULL, &err), 0, "null asks for the default");
	is_int(check(NULL, "{\"max_timeout_ms\":5}", NULL, &err), -1, "a flag-only cap is refused");
	is_int(check(NULL, "{\"memory_bytes\":268435456}", NULL, &err), 0, "memory_bytes at its cap");
	is_int(check(NULL, "{\"memory_bytes\":268435457}", NULL, &err), -1, "... one past it");
	is_str(err.unit, "bytes", "... in bytes");
	is_int(check(NULL, "{\"timeout_ms\":300}", "{\"max_timeout_ms\":250}", &err), -1,
	       "the operator's max_timeout_ms flag is the cap");
	ok(err.configured == 250, "... 250");
	is_int(check(NULL, "{\"timeout_ms\":100000}", "{\"max_timeout_ms\":100000}", &err), 0,
	       "... also when it raises it");
}

static void test_files(void)
{
	struct box_err err;
	const char *p;

	p = policy_file("g.json", "{\"box-run\": {\"grant\": [\"workspace\"], \"deny\": [\"events\"],"
			" \"max\": {\"timeout_ms\": 10}}}");
	is_int(check(p, "{\"workspace\":\"/w\",\"timeout_ms\":10}", NULL, &err), 0,
	       "grant adds a member, max lowers a cap");
	is_int(check(p, "{\"timeout_ms\":11}", NULL, &err), -1, "... to 10");
	is_int(check(p, "{\"events\":false}", NULL, &err), -1, "deny takes a member away");
	p = policy_file("a.json", "{\"box-run\": {\"agent\": [\"script\"], \"grant\": [\"events\"],"
			" \"deny\": [\"events\"]}}");
	is_int(check(p, "{\"timeout_ms\":1}", NULL, &err), -1, "agent replaces the list");
	is_int(check(p, "{\"events\":true}", NULL, &err), -1, "deny wins over grant");
	is_int(check(p, "{\"script\":\"x\"}", NULL, &err), 0, "... script stays");
	p = policy_file("other.json", "{\"box-sandbox\": {\"grant\": [\"anything\"]}}");
	is_int(check(p, "{\"script\":\"x\"}", NULL, &err), 0,
	       "another binary's member names are that binary's to check");

	static const struct { const char *text, *path; } bad[] = {
		{ "{\"box_run\":{}}", "$.box_run" },
		{ "{\"box-run\":{\"grant\":[\"nope\"]}}", "$.box-run.grant[0]" },
		{ "{\"box-run\":{\"grant\":[\"max_timeout_ms\"]}}", "$.box-run.grant[0]" },
		{ "{\"box-run\":{\"grant\":\"script\"}}", "$.box-run.grant" },
		{ "{\"box-run\":{\"max\":{\"timeout_ms\":0}}}", "$.box-run.max.timeout_ms" },
		{ "{\"box-run\":{\"max\":{\"events\":1}}}", "$.box-run.max.events" },
		{ "{\"box-run\":{\"set\":{\"timeout_ms\":\"x\"}}}", "$.box-run.set" },
		{ "{\"box-run\":{\"set\":{\"nope\":1}}}", "$.box-run.set.nope" },
		{ "{\"box-run\":{\"x\":1}}", "$.box-run.x" },
		{ "{\"box-sandbox\":{\"x\":1}}", "$.box-sandbox.x" },
		{ "{\"box-sandbox\":{\"sessions\":{\"any\":1}}}", "$.box-sandbox.sessions.any" },
		{ "{\"policy_version\":7}", "$.policy_version" },
		{ "[]", "$" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p = policy_file("bad.json", bad[i].text);
		is_int(check(p, "{}", NULL, &err), -1, "bad policy %s", bad[i].text);
		ok(err.code == BOX_E_USAGE && strcmp(err.path, bad[i].path) == 0,
		   "... usage at %s (got %s: %s)", bad[i].path, err.path, err.message);
	}
	{
		char missing[256];

		snprintf(missing, sizeof(missing), "%s/missing.json", dir);
		is_int(check(missing, "{}", NULL, &err), -1, "a missing policy file fails");
	}
	is_int(err.code, BOX_E_NOT_FOUND, "... not_found");
	setenv("BOX_POLICY", policy_file("env.json", "{\"box-run\":{\"deny\":[\"script\"]}}"), 1);
	is_int(check(NULL, "{\"script\":\"x\"}", NULL, &err), -1, "BOX_POLICY is read");
	setenv("BOX_POLICY", "", 1);
	is_int(check(NULL, "{\"script\":\"x\"}", NULL, &err), 0, "... an empty one is none");
	unsetenv("BOX_POLICY");
}

static void test_schema(void)
{
	static const char full[] = "{\"type\":\"object\",\"required\":[\"script\",\"workspace\"],"
		"\"properties\":{\"script\":{\"type\":\"string\"},\"workspace\":{\"type\":\"string\"},"
		"\"timeout_ms\":{\"type\":\"integer\",\"maximum\":86400000,\"default\":90000},"
		"\"max_timeout_ms\":{\"type\":\"integer\"}}}";
	struct box_trust t;
	struct box_err err;
	cJSON *in = box_json_parse(full, strlen(full), &err), *s;
	char *text;

	box_trust_init(&t);
	box_trust_load(&t, "box-run", fields, NULL, 0, &err);
	s = box_trust_schema(&t, in, NULL, &err);
	text = cJSON_PrintUnformatted(s);
	is_str(text, "{\"type\":\"object\",\"required\":[\"script\"],\"properties\":{\"script\":"
	       "{\"type\":\"string\"},\"timeout_ms\":{\"type\":\"integer\",\"maximum\":60000}}}",
	       "the agent's schema: operator members gone, the cap as maximum, a default past it "
	       "dropped");
	free(text);
	cJSON_Delete(s);
	box_trust_release(&t);
	box_trust_load(&t, "box-run", fields, NULL, 1, &err);
	s = box_trust_schema(&t, in, NULL, &err);
	ok(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s, "properties"),
					    "workspace") &&
	   !cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s, "properties"),
					     "max_timeout_ms"),
	   "--trust-request: everything but the flag-only caps");
	cJSON_Delete(s);
	box_trust_release(&t);
	cJSON_Delete(in);
}

static int sess(const char *policy, const char *req, const char *bound, struct box_err *err)
{
	struct box_trust t;
	cJSON *r = box_json_parse(req, strlen(req), err);
	int rc;

	box_trust_init(&t);
	box_err_init(err);
	rc = box_trust_load(&t, "box-sandbox", box_sandbox_fields, policy, 0, err);
	if (rc == 0)
		rc = box_trust_sessions_check(&t, r, box_json_get_str(r, "op", NULL), bound, err);
	box_trust_release(&t);
	cJSON_Delete(r);
	return rc;
}

static void test_sessions(void)
{
	struct box_err err;
	const char *p;

	is_int(sess(NULL, "{\"session\":\"a\"}", "a", &err), 0, "the operator's session");
	is_int(sess(NULL, "{\"session\":\"b\"}", "a", &err), -1, "another one");
	is_str(err.path, "$.session", "... at $.session");
	is_int(sess(NULL, "{\"session\":\"a\"}", NULL, &err), -1, "none bound: none reachable");
	is_int(sess(NULL, "{\"op\":\"create\"}", NULL, &err), -1, "... and no new id");
	is_int(sess(NULL, "{\"op\":\"create\"}", "a", &err), 0, "a bound create");
	is_int(sess(NULL, "{\"from\":\"b\"}", "a", &err), -1, "from another session");
	is_str(err.path, "$.from", "... at $.from");
	p = policy_file("s.json", "{\"box-sandbox\":{\"sessions\":{\"names\":[\"n1\"],"
			"\"prefix\":\"ag-\"}}}");
	is_int(sess(p, "{\"session\":\"n1\"}", NULL, &err), 0, "a name of the policy");
	is_int(sess(p, "{\"session\":\"ag-7\"}", NULL, &err), 0, "the prefix");
	is_int(sess(p, "{\"session\":\"ag\"}", NULL, &err), -1, "the prefix less one character");
	is_int(sess(p, "{\"session\":\"n1\"}", "x", &err), -1, "a bound command line wins");
	p = policy_file("any.json", "{\"box-sandbox\":{\"sessions\":{\"any\":true}}}");
	is_int(sess(p, "{\"op\":\"create\"}", NULL, &err), 0, "any: a new id");
	is_int(sess(p, "{\"session\":\"zz\"}", NULL, &err), 0, "any: any name");
	{
		struct box_trust t;

		box_trust_init(&t);
		box_trust_load(&t, "box-sandbox", box_sandbox_fields, NULL, 0, &err);
		is_int(box_trust_sessions_check(&t, NULL, "exec", NULL, &err), 0,
		       "no --json request: the command line is the operator's");
		box_trust_release(&t);
	}
}

int main(void)
{
	struct box_err err;

	if (!mkdtemp(dir))
		return 1;
	test_check();
	test_files();
	test_schema();
	test_sessions();
	box_err_init(&err);
	is_int(sess(NULL, "{}", NULL, &err), 0, "a request naming nothing passes");
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			ok(0, "cleanup");
	}
	return done_testing();
}
