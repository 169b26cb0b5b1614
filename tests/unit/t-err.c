#include <errno.h>
#include <stdint.h>
#include "err.h"
#include "tap.h"

int main(void)
{
	struct box_err e;
	cJSON *o, *back;
	static const struct { enum box_code c; const char *name; int status; } table[] = {
		{ BOX_E_GUEST, "guest_error", 1 }, { BOX_E_USAGE, "usage", 2 },
		{ BOX_E_INVALID, "invalid_request", 2 }, { BOX_E_LIMIT, "limit_exceeded", 3 },
		{ BOX_E_TIMEOUT, "timeout", 3 }, { BOX_E_POLICY, "policy_denied", 4 },
		{ BOX_E_INTEGRITY, "integrity_failed", 5 }, { BOX_E_NOT_FOUND, "not_found", 6 },
		{ BOX_E_CONFLICT, "conflict", 7 }, { BOX_E_IO, "io_error", 8 },
		{ BOX_E_PROVIDER, "provider_error", 8 }, { BOX_E_INTERNAL, "internal", 8 },
		{ BOX_E_UNSUPPORTED, "unsupported", 8 }, { BOX_E_REPLAY_DIVERGED, "replay_diverged", 9 },
	};

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		is_str(box_err_code_name(table[i].c), table[i].name, "name of code %d", table[i].c);
		is_int(box_err_exit_status(table[i].c), table[i].status, "%s exits %d", table[i].name,
		       table[i].status);
		is_int(box_err_code_from_name(table[i].name), table[i].c, "%s parses back", table[i].name);
	}
	is_int(box_err_exit_status(BOX_OK), 0, "success exits 0");
	is_int(box_err_code_from_name("nope"), BOX_CODE_COUNT, "unknown name is refused");

	is_int(box_err_set(&e, BOX_E_GUEST, "x %d", 42), -1, "box_err_set returns -1");
	is_str(e.message, "x 42", "message formatted");
	o = box_err_to_json(&e);
	ok(cJSON_GetObjectItem(o, "limit") == NULL && cJSON_GetObjectItem(o, "configured") == NULL &&
	   cJSON_GetObjectItem(o, "path") == NULL, "fields that do not apply are absent");
	cJSON_Delete(o);

	box_err_limit(&e, BOX_E_LIMIT, "instructions", INT64_C(9007199254740993), "instructions",
		      "too many");
	box_err_path(&e, "$.max_instructions");
	o = box_err_to_json(&e);
	{
		char *s = cJSON_PrintUnformatted(o);

		is_str(s, "{\"code\":\"limit_exceeded\",\"message\":\"too many\",\"limit\":\"instructions\","
		       "\"configured\":9007199254740993,\"unit\":\"instructions\",\"retryable\":false,"
		       "\"path\":\"$.max_instructions\"}", "limit error renders exactly, 64-bit exact");
		back = cJSON_Parse(s);
		cJSON_free(s);
	}
	box_err_from_json(&e, back);
	is_int(e.code, BOX_E_LIMIT, "code round trips");
	is_str(e.limit, "instructions", "limit round trips");
	is_str(e.path, "$.max_instructions", "path round trips");
	cJSON_Delete(o);
	cJSON_Delete(back);

	errno = ENOENT;
	box_err_sys(&e, "open %s", "x");
	is_int(e.code, BOX_E_NOT_FOUND, "ENOENT is not_found");
	is_int(e.sys_errno, ENOENT, "errno kept");
	ok(strstr(e.message, "open x: ") == e.message, "message then strerror: %s", e.message);
	errno = EACCES;
	box_err_sys(&e, "open");
	is_int(e.code, BOX_E_IO, "EACCES is io_error");

	o = cJSON_Parse("{\"code\":42}");
	is_int(box_err_from_json(&e, o), -1, "a non-string code is refused");
	cJSON_Delete(o);
	return done_testing();
}
