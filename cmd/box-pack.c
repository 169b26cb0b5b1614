/* box-pack: pack a directory into a content-addressed artifact and put it in a registry. */
#include <stdio.h>

#include "cli.h"
#include "flags.h"
#include "pack.h"
#include "banned.h"

extern const char box_pack_request_schema[], box_pack_result_schema[];

static const struct box_cli cli = {
	.name = "box-pack",
	.synopsis = "[OPTIONS] DIR\n"
		    "--json [OPTIONS] < REQUEST.json",
	.description = "Pack DIR (with its box-artifact.json) into a reproducible tar.gz and store it "
		       "in a registry as an OCI artifact tagged NAME:VERSION; print its digest.",
	.fields = box_pack_fields,
	.request_schema = box_pack_request_schema,
	.result_schema = box_pack_result_schema,
};

int main(int argc, char **argv)
{
	struct box_err err;
	cJSON *req, *res;
	int rest, status;

	if (!box_cli_start(&cli, argc, argv, &req, &rest, &status))
		return status;
	box_err_init(&err);
	if (rest < argc) {
		if (rest + 1 < argc || cJSON_GetObjectItemCaseSensitive(req, "dir")) {
			cJSON_Delete(req);
			box_flag_unexpected(&err, argv[rest + 1 < argc ? rest + 1 : rest]);
			return box_cli_fail(&cli, &err);
		}
		cJSON_AddStringToObject(req, "dir", argv[rest]);
	}
	res = box_pack(req, &err);
	cJSON_Delete(req);
	if (!res)
		return box_cli_fail(&cli, &err);
	return box_cli_finish(&cli, res);
}
