/* box-lock: resolve box.json into box.lock, verify the store, check a lockfile in CI. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "lock.h"
#include "banned.h"

extern const char box_lock_request_schema[], box_lock_result_schema[];

static const struct box_cli cli = {
	.name = "box-lock",
	.synopsis = "[OPTIONS] [resolve]\n"
		    "[OPTIONS] update [NAME...]\n"
		    "[OPTIONS] verify\n"
		    "[OPTIONS] check --frozen\n"
		    "[OPTIONS] gc [LOCKFILE...]\n"
		    "--json [OPTIONS] < REQUEST.json",
	.description = "Resolve the version ranges of box.json into exact versions and digests in "
		       "box.lock; verify the store against the lockfile; check the lockfile "
		       "against box.json without a registry; remove store entries no lockfile "
		       "pins.",
	.fields = box_resolve_fields,
	.request_schema = box_lock_request_schema,
	.result_schema = box_lock_result_schema,
};

int main(int argc, char **argv)
{
	struct box_err err;
	cJSON *req, *res;
	int rest, status;
	const char *command = NULL;

	/* the command word comes first and the flags after it (box-lock check --frozen) */
	if (argc > 1 && argv[1][0] != '-') {
		command = argv[1];
		argv[1] = argv[0];
		argv++;
		argc--;
	}
	if (!box_cli_start(&cli, argc, argv, &req, &rest, &status))
		return status;
	box_err_init(&err);
	if (!command && rest < argc)
		command = argv[rest++];
	if (command) {
		cJSON_DeleteItemFromObjectCaseSensitive(req, "command");
		cJSON_AddStringToObject(req, "command", command);
	}
	if (rest < argc) {
		/* gc LOCKFILE...: the lockfiles to keep; update NAME...: the pins to move */
		const char *key = command && strcmp(command, "gc") == 0 ? "locks" : "names";

		cJSON_DeleteItemFromObjectCaseSensitive(req, key);
		cJSON_AddItemToObject(req, key,
				      cJSON_CreateStringArray((const char *const *)argv + rest,
							      argc - rest));
	}
	res = box_resolve(req, &err);
	cJSON_Delete(req);
	if (!res)
		return box_cli_fail(&cli, &err);
	return box_cli_finish(&cli, res);
}
