#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "flags.h"
#include "banned.h"

int box_flag_unknown(struct box_err *err, const char *arg)
{
	return box_err_set(err, BOX_E_USAGE, "Unknown flag: %.*s", BOX_FLAG_SHOW, arg);
}

int box_flag_missing_value(struct box_err *err, const char *flag)
{
	return box_err_set(err, BOX_E_USAGE, "Missing value for flag: %.*s", BOX_FLAG_SHOW, flag);
}

int box_flag_takes_no_value(struct box_err *err, const char *arg)
{
	return box_err_set(err, BOX_E_USAGE, "Flag takes no value: %.*s", BOX_FLAG_SHOW, arg);
}

int box_flag_unexpected(struct box_err *err, const char *arg)
{
	return box_err_set(err, BOX_E_USAGE, "Unexpected argument: %.*s", BOX_FLAG_SHOW, arg);
}

int box_flag_invalid(struct box_err *err, const char *kind, const char *flag, const char *text)
{
	return box_err_set(err, BOX_E_USAGE, "Invalid %s for %.*s: %.*s", kind, BOX_FLAG_SHOW,
			   flag, BOX_FLAG_SHOW, text);
}

int box_flag_out_of_range(struct box_err *err, const char *flag, const char *text, long long min,
			  long long max)
{
	return box_err_set(err, BOX_E_USAGE, "Out of range for %.*s: %.*s (expected %lld to %lld)",
			   BOX_FLAG_SHOW, flag, BOX_FLAG_SHOW, text, min, max);
}

int box_flag_int(const char *flag, const char *text, long long min, long long max,
		 long long *out, struct box_err *err)
{
	const char *p = text;
	char *end;
	long long v;

	/* strtoll alone would take leading blanks and a "0x" nowhere: only [+-]digits */
	if (*p == '+' || *p == '-')
		p++;
	if (*p < '0' || *p > '9')
		return box_flag_invalid(err, "integer", flag, text);
	errno = 0;
	v = strtoll(text, &end, 10);
	if (*end)
		return box_flag_invalid(err, "integer", flag, text);
	if (errno == ERANGE || v < min || v > max)
		return box_flag_out_of_range(err, flag, text, min, max);
	*out = v;
	return 0;
}

int box_flag_split(const char *arg, char *name, size_t namelen, const char **value)
{
	const char *eq;
	size_t n;

	if (strncmp(arg, "--", 2) != 0 || arg[2] == 0 || arg[2] == '=' || namelen == 0)
		return -1;
	eq = strchr(arg + 2, '=');
	n = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
	if (n >= namelen)
		n = namelen - 1;
	memcpy(name, arg + 2, n);
	name[n] = 0;
	*value = eq ? eq + 1 : NULL;
	return 0;
}
