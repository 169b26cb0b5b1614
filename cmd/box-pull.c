/* box-pull: fetch artifacts, verify them, extract them safely into the store, pin them. */
#include <stdio.h>
#include <unistd.h>

#include "cli.h"
#include "pull.h"
#include "banned.h"

extern const char box_pull_request_schema[], box_pull_result_schema[];

static const struct box_cli cli = {
	.name = "box-pull",
	.synopsis = "[OPTIONS] NAME[@VERSION|@sha256:HEX]...\n"
		    "--json [OPTIONS] < REQUEST.json",
	.description = "Fetch artifacts from a registry, verify their digests, extract them safely "
		       "into the content-addressed store and pin them in box.lock.",
	.fields = box_pull_fields,
	.request_schema = box_pull_request_schema,
	.result_schema = box_pull_result_schema,
};

/* A progress line on stderr, only when stderr is a terminal: never in JSON, never in logs. */
static void progress(void *ctx, const char *name, int64_t done, int64_t total)
{
	int *last = ctx;
	int pct = total > 0 ? (int)(done * 100 / total) : 100;

	if (pct == *last)
		return;
	*last = pct;
	fprintf(stderr, "\rbox-pull: %s %.1f/%.1f MB %3d%%%s", name, (double)done / 1e6,
		(double)total / 1e6, pct, done >= total ? "\n" : "");
}

int main(int argc, char **argv)
{
	int last = -1;
	struct box_pull_hooks hooks = { isatty(2) ? progress : NULL, &last };
	struct box_err err;
	cJSON *req, *res;
	int rest, status;

	if (!box_cli_start(&cli, argc, argv, &req, &rest, &status))
		return status;
	box_err_init(&err);
	if (rest < argc) {
		cJSON_DeleteItemFromObjectCaseSensitive(req, "artifacts");
		cJSON_AddItemToObject(req, "artifacts",
				      cJSON_CreateStringArray((const char *const *)argv + rest,
							      argc - rest));
	}
	res = box_pull(req, &hooks, &err);
	cJSON_Delete(req);
	if (!res)
		return box_cli_fail(&cli, &err);
	return box_cli_finish(&cli, res);
}
