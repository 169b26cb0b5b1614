#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "banned.h"

static const struct {
	const char *name;
	int status;
} codes[BOX_CODE_COUNT] = {
	[BOX_OK] = { "ok", 0 },
	[BOX_E_GUEST] = { "guest_error", 1 },
	[BOX_E_USAGE] = { "usage", 2 },
	[BOX_E_INVALID] = { "invalid_request", 2 },
	[BOX_E_LIMIT] = { "limit_exceeded", 3 },
	[BOX_E_TIMEOUT] = { "timeout", 3 },
	[BOX_E_POLICY] = { "policy_denied", 4 },
	[BOX_E_INTEGRITY] = { "integrity_failed", 5 },
	[BOX_E_NOT_FOUND] = { "not_found", 6 },
	[BOX_E_CONFLICT] = { "conflict", 7 },
	[BOX_E_IO] = { "io_error", 8 },
	[BOX_E_PROVIDER] = { "provider_error", 8 },
	[BOX_E_INTERNAL] = { "internal", 8 },
	[BOX_E_UNSUPPORTED] = { "unsupported", 8 },
	[BOX_E_REPLAY_DIVERGED] = { "replay_diverged", 9 },
};

void box_err_init(struct box_err *err)
{
	memset(err, 0, sizeof(*err));
}

static void set_message(struct box_err *err, const char *fmt, va_list ap)
{
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
}

int box_err_set(struct box_err *err, enum box_code code, const char *fmt, ...)
{
	va_list ap;

	box_err_init(err);
	err->code = code;
	va_start(ap, fmt);
	set_message(err, fmt, ap);
	va_end(ap);
	return -1;
}

int box_err_sys(struct box_err *err, const char *fmt, ...)
{
	int e = errno;
	va_list ap;
	size_t n;

	box_err_init(err);
	switch (e) {
	case ENOENT:
		err->code = BOX_E_NOT_FOUND;
		break;
	case ENOSYS:
	case EOPNOTSUPP:
		err->code = BOX_E_UNSUPPORTED;
		break;
	case EDQUOT:
		err->code = BOX_E_LIMIT;
		break;
	default:
		err->code = BOX_E_IO;
	}
	err->sys_errno = e;
	va_start(ap, fmt);
	set_message(err, fmt, ap);
	va_end(ap);
	n = strlen(err->message);
	snprintf(err->message + n, sizeof(err->message) - n, ": %s", strerror(e));
	errno = e;
	return -1;
}

int box_err_limit(struct box_err *err, enum box_code code, const char *limit,
		  int64_t configured, const char *unit, const char *fmt, ...)
{
	va_list ap;

	box_err_init(err);
	err->code = code;
	snprintf(err->limit, sizeof(err->limit), "%s", limit);
	snprintf(err->unit, sizeof(err->unit), "%s", unit);
	err->has_configured = 1;
	err->configured = configured;
	va_start(ap, fmt);
	set_message(err, fmt, ap);
	va_end(ap);
	return -1;
}

void box_err_path(struct box_err *err, const char *path)
{
	snprintf(err->path, sizeof(err->path), "%s", path);
}

const char *box_err_code_name(enum box_code code)
{
	if ((unsigned)code >= BOX_CODE_COUNT)
		return "internal";
	return codes[code].name;
}

enum box_code box_err_code_from_name(const char *name)
{
	for (int i = 1; i < BOX_CODE_COUNT; i++)
		if (strcmp(codes[i].name, name) == 0)
			return (enum box_code)i;
	return BOX_CODE_COUNT;
}

int box_err_exit_status(enum box_code code)
{
	if ((unsigned)code >= BOX_CODE_COUNT)
		return 8;
	return codes[code].status;
}

cJSON *box_err_to_json(const struct box_err *err)
{
	cJSON *o = cJSON_CreateObject();
	char num[32];

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "code", box_err_code_name(err->code));
	cJSON_AddStringToObject(o, "message", err->message);
	if (err->limit[0])
		cJSON_AddStringToObject(o, "limit", err->limit);
	if (err->has_configured) {
		/* raw, so that 64-bit values stay exact */
		snprintf(num, sizeof(num), "%lld", (long long)err->configured);
		cJSON_AddRawToObject(o, "configured", num);
	}
	if (err->unit[0])
		cJSON_AddStringToObject(o, "unit", err->unit);
	cJSON_AddBoolToObject(o, "retryable", err->retryable != 0);
	if (err->path[0])
		cJSON_AddStringToObject(o, "path", err->path);
	return o;
}

cJSON *box_err_result(const struct box_err *err)
{
	cJSON *r = cJSON_CreateObject(), *e = box_err_to_json(err);

	if (r && e && cJSON_AddFalseToObject(r, "ok") && cJSON_AddItemToObject(r, "error", e))
		return r;
	cJSON_Delete(e);
	cJSON_Delete(r);
	return NULL;
}

static void copy_str(char *dst, size_t size, const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (cJSON_IsString(v) && v->valuestring)
		snprintf(dst, size, "%s", v->valuestring);
}

int box_err_from_json(struct box_err *err, const cJSON *obj)
{
	const cJSON *code, *v;

	box_err_init(err);
	code = cJSON_GetObjectItemCaseSensitive(obj, "code");
	if (!cJSON_IsObject(obj) || !cJSON_IsString(code))
		return -1;
	err->code = box_err_code_from_name(code->valuestring);
	if (err->code == BOX_CODE_COUNT)
		err->code = BOX_E_INTERNAL;
	copy_str(err->message, sizeof(err->message), obj, "message");
	copy_str(err->limit, sizeof(err->limit), obj, "limit");
	copy_str(err->unit, sizeof(err->unit), obj, "unit");
	copy_str(err->path, sizeof(err->path), obj, "path");
	v = cJSON_GetObjectItemCaseSensitive(obj, "configured");
	if (cJSON_IsNumber(v) && v->valuedouble >= -9.2e18 && v->valuedouble <= 9.2e18) {
		err->has_configured = 1;
		err->configured = (int64_t)v->valuedouble;
	}
	err->retryable = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, "retryable"));
	return 0;
}
