/*
 * The official JSON-Schema-Test-Suite (Debian's json-schema-test-suite package, draft-07
 * groups under /usr/share/json-schema-test-suite/tests/draft7) and box's own groups in the same
 * format for the draft 2020-12 keywords that package lacks (tests/fixtures/schema/2020-12).
 * One test point per group: its schema passes box_schema_check_in and every test's verdict is
 * the suite's. A group whose schema box refuses fails, unless the refusal is a remote $ref
 * (not supported by design); those are counted and listed. BOX_SCHEMA_SUITE overrides the
 * package directory; without it the draft-07 part is skipped with a message.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"
#include "schema.h"
#include "tap.h"
#include "banned.h"

struct tally {
	int groups, run, passed, remote;
};

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_group(const char *file, const cJSON *g, enum box_schema_dialect d,
		      struct tally *t)
{
	const cJSON *schema = cJSON_GetObjectItemCaseSensitive(g, "schema");
	const cJSON *tests = cJSON_GetObjectItemCaseSensitive(g, "tests"), *it;
	const char *desc = box_json_get_str(g, "description", "?");
	struct box_err err;
	int bad = 0;

	t->groups++;
	box_err_init(&err);
	if (box_schema_check_in(schema, d, &err) < 0) {
		if (strstr(err.message, "remote $ref")) {
			t->remote++;
			printf("# not run (remote $ref): %s: %s\n", file, desc);
			return;
		}
		ok(0, "%s: %s", file, desc);
		printf("#   schema refused: %s\n", err.message);
		return;
	}
	t->run++;
	cJSON_ArrayForEach(it, tests) {
		const cJSON *data = cJSON_GetObjectItemCaseSensitive(it, "data");
		int want = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "valid"));
		int got;

		box_err_init(&err);
		got = box_schema_validate_in(schema, d, data, &err) == 0;
		if (got != want) {
			if (!bad)
				printf("# in %s: %s\n", file, desc);
			printf("#   \"%s\": expected %s, got %s%s%s\n",
			       box_json_get_str(it, "description", "?"), want ? "valid" : "invalid",
			       got ? "valid" : "invalid", got ? "" : ": ", got ? "" : err.message);
			bad = 1;
		}
	}
	if (!bad)
		t->passed++;
	ok(!bad, "%s: %s", file, desc);
}

static void run_dir(const char *dir, const char *label, enum box_schema_dialect d)
{
	struct tally t = { 0, 0, 0, 0 };
	char *names[256], path[4096];
	struct dirent *e;
	size_t n = 0, i;
	DIR *dp = opendir(dir);

	if (!dp) {
		ok(0, "%s: cannot open %s", label, dir);
		return;
	}
	while ((e = readdir(dp)) && n < sizeof(names) / sizeof(names[0])) {
		size_t l = strlen(e->d_name);

		if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0)
			names[n++] = strdup(e->d_name);
	}
	closedir(dp);
	qsort(names, n, sizeof(names[0]), by_name);
	for (i = 0; i < n; i++) {
		struct box_buf b;
		struct box_err err;
		cJSON *doc, *g;
		char file[300];

		box_err_init(&err);
		box_buf_init(&b, 16 << 20);
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		snprintf(file, sizeof(file), "%s/%s", label, names[i]);
		doc = box_buf_read_file(&b, AT_FDCWD, path, &err) == 0 ?
		      box_json_parse(b.data, b.len, &err) : NULL;
		box_buf_release(&b);
		if (!ok(doc != NULL, "%s parses", file))
			printf("#   %s\n", err.message);
		cJSON_ArrayForEach(g, doc)
			run_group(file, g, d, &t);
		cJSON_Delete(doc);
		free(names[i]);
	}
	printf("# %s: %d groups, %d run, %d passed, %d not run (remote $ref)\n", label, t.groups,
	       t.run, t.passed, t.remote);
}

int main(void)
{
	const char *suite = getenv("BOX_SCHEMA_SUITE");
	const char *src = getenv("BOX_SRCDIR");
	char dir[4096];
	DIR *probe;

	if (!suite)
		suite = "/usr/share/json-schema-test-suite";
	snprintf(dir, sizeof(dir), "%s/tests/draft7", suite);
	probe = opendir(dir);
	if (probe)
		closedir(probe);
	if (!probe)
		printf("# SKIP draft-07: %s not found (install Debian's json-schema-test-suite)\n",
		       dir);
	else
		run_dir(dir, "draft7", BOX_SCHEMA_DRAFT7);
	snprintf(dir, sizeof(dir), "%s/tests/fixtures/schema/2020-12", src ? src : BOX_TEST_SRCDIR);
	run_dir(dir, "2020-12", BOX_SCHEMA_2020_12);
	return done_testing();
}
