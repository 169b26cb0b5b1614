/* libFuzzer target: the --json request path of box-sandbox (or, with FUZZ_BOX_RUN, of
 * box-run) as cmd/cli.c and cmd/box-sandbox.c walk it: parse, check against the fields, the
 * request schema, the agent's trust check under the built-in policy, the policy's values,
 * the op lookup and the session binding, and the error object of whatever failed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "json.h"
#include "schema.h"
#include "trust.h"
#ifdef FUZZ_BOX_RUN
#include "run.h"
#define FIELDS box_run_fields
#define BINARY "box-run"
#define SCHEMA box_run_request_schema
extern const char box_run_request_schema[];
#else
#include "sandbox.h"
#define FIELDS box_sandbox_fields
#define BINARY "box-sandbox"
#define SCHEMA box_sandbox_request_schema
extern const char box_sandbox_request_schema[];
#endif

static struct box_trust trust, trusting;
static cJSON *schema, *flags;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct box_err err;

	(void)argc;
	(void)argv;
	unsetenv("BOX_POLICY");
	box_err_init(&err);
	box_trust_init(&trust);
	box_trust_init(&trusting);
	if (box_trust_load(&trust, BINARY, FIELDS, NULL, 0, &err) < 0 ||
	    box_trust_load(&trusting, BINARY, FIELDS, NULL, 1, &err) < 0)
		abort();
	schema = box_json_parse(SCHEMA, strlen(SCHEMA), &err);
	flags = cJSON_CreateObject();
	if (!schema || !flags)
		abort();
	return 0;
}

/* One pass as an agent's request (trust) or an operator's (trusting, --trust-request). */
static void one(const struct box_trust *t, const uint8_t *data, size_t size)
{
	struct box_err err;
	cJSON *req, *agent = NULL, *res;

	box_err_init(&err);
	req = box_json_parse((const char *)data, size, &err);
	if (!req)
		goto fail;
	if (!cJSON_IsObject(req)) {
		box_err_set(&err, BOX_E_INVALID, "request must be a JSON object");
		goto fail;
	}
	if (box_json_check(req, FIELDS, &err) < 0)
		goto fail;
	(void)box_schema_validate(schema, req, &(struct box_err){ 0 });
	if (box_trust_check(t, req, flags, &err) < 0)
		goto fail;
	agent = cJSON_Duplicate(req, 1);
	if (box_trust_apply(t, req, &err) < 0 || box_json_check(req, FIELDS, &err) < 0)
		goto fail;
#ifndef FUZZ_BOX_RUN
	{
		const struct box_sandbox_op *op = box_sandbox_op_find(
			cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(req, "op")));

		if (box_trust_sessions_check(t, agent, op ? op->name : NULL, NULL, &err) < 0)
			goto fail;
	}
#endif
fail:
	res = box_err_result(&err);
	if (res) {
		size_t n;
		char *s = box_json_line(res, &n);

		free(s);
		cJSON_Delete(res);
	}
	cJSON_Delete(agent);
	cJSON_Delete(req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	one(&trust, data, size);
	one(&trusting, data, size);
	return 0;
}
