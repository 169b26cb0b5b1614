/* lib/core/flags: the words and rules every binary's flags share. */
#include <limits.h>
#include <string.h>

#include "flags.h"
#include "tap.h"
#include "banned.h"

static void int_ok(const char *text, long long min, long long max, long long want)
{
	struct box_err err;
	long long v = -7;

	box_err_init(&err);
	is_int(box_flag_int("--n", text, min, max, &v, &err), 0, "\"%s\" in [%lld, %lld]", text,
	       min, max);
	is_int(v, want, "  is %lld", want);
}

static void int_bad(const char *text, long long min, long long max, const char *msg)
{
	struct box_err err;
	long long v = -7;

	box_err_init(&err);
	is_int(box_flag_int("--n", text, min, max, &v, &err), -1, "\"%s\" refused", text);
	is_int(err.code, BOX_E_USAGE, "  usage");
	is_str(err.message, msg, "  %s", msg);
	is_int(v, -7, "  nothing written");
}

static void test_int(void)
{
	int_ok("0", 0, 10, 0);
	int_ok("10", 0, 10, 10);
	int_ok("-5", -10, 10, -5);
	int_ok("+5", 0, 10, 5);
	int_ok("007", 0, 10, 7);
	int_ok("9223372036854775807", 0, LLONG_MAX, LLONG_MAX);
	int_bad("", 0, 10, "Invalid integer for --n: ");
	int_bad("x", 0, 10, "Invalid integer for --n: x");
	int_bad("1.5", 0, 10, "Invalid integer for --n: 1.5");
	int_bad("12abc", 0, 100, "Invalid integer for --n: 12abc");
	int_bad(" 1", 0, 10, "Invalid integer for --n:  1");
	int_bad("1 ", 0, 10, "Invalid integer for --n: 1 ");
	int_bad("0x10", 0, 100, "Invalid integer for --n: 0x10");
	int_bad("1e3", 0, 10000, "Invalid integer for --n: 1e3");
	int_bad("-", 0, 10, "Invalid integer for --n: -");
	int_bad("+", 0, 10, "Invalid integer for --n: +");
	int_bad("11", 0, 10, "Out of range for --n: 11 (expected 0 to 10)");
	int_bad("-1", 0, 10, "Out of range for --n: -1 (expected 0 to 10)");
	int_bad("99999999999999999999", 0, LLONG_MAX,
		"Out of range for --n: 99999999999999999999 (expected 0 to 9223372036854775807)");
	int_bad("-99999999999999999999", LLONG_MIN, 0,
		"Out of range for --n: -99999999999999999999 (expected -9223372036854775808 to 0)");
}

static void test_words(void)
{
	struct box_err err;
	char long_arg[400];

	box_err_init(&err);
	is_int(box_flag_unknown(&err, "--bogus"), -1, "unknown returns -1");
	is_str(err.message, "Unknown flag: --bogus", "  Unknown flag");
	is_int(err.code, BOX_E_USAGE, "  usage");
	box_flag_missing_value(&err, "--x");
	is_str(err.message, "Missing value for flag: --x", "Missing value");
	box_flag_takes_no_value(&err, "--quiet=1");
	is_str(err.message, "Flag takes no value: --quiet=1", "Flag takes no value");
	box_flag_unexpected(&err, "extra");
	is_str(err.message, "Unexpected argument: extra", "Unexpected argument");
	box_flag_invalid(&err, "boolean", "--b", "yes");
	is_str(err.message, "Invalid boolean for --b: yes", "Invalid boolean");
	box_flag_invalid(&err, "JSON", "--j", "{");
	is_str(err.message, "Invalid JSON for --j: {", "Invalid JSON");
	/* a hostile argument is quoted, cut at BOX_FLAG_SHOW bytes */
	memset(long_arg, 'a', sizeof(long_arg) - 1);
	long_arg[0] = long_arg[1] = '-';
	long_arg[sizeof(long_arg) - 1] = 0;
	box_flag_unknown(&err, long_arg);
	is_int(strlen(err.message), strlen("Unknown flag: ") + BOX_FLAG_SHOW, "quoted up to %d bytes",
	       BOX_FLAG_SHOW);
}

static void split_ok(const char *arg, const char *name, const char *value)
{
	char n[16];
	const char *v = "unset";

	is_int(box_flag_split(arg, n, sizeof(n), &v), 0, "split \"%s\"", arg);
	is_str(n, name, "  name \"%s\"", name);
	if (value)
		is_str(v, value, "  value \"%s\"", value);
	else
		ok(v == NULL, "  no value");
}

static void test_split(void)
{
	char n[16];
	const char *v;

	split_ok("--timeout-ms", "timeout-ms", NULL);
	split_ok("--timeout-ms=5", "timeout-ms", "5");
	split_ok("--x=", "x", "");
	split_ok("--a=b=c", "a", "b=c");
	split_ok("--a-very-long-flag-name=1", "a-very-long-fla", "1");
	is_int(box_flag_split("--", n, sizeof(n), &v), -1, "\"--\" is no flag");
	is_int(box_flag_split("--=1", n, sizeof(n), &v), -1, "\"--=1\" is no flag");
	is_int(box_flag_split("-x", n, sizeof(n), &v), -1, "\"-x\" is no long flag");
	is_int(box_flag_split("pos", n, sizeof(n), &v), -1, "a positional is no flag");
	is_int(box_flag_split("--x", n, 0, &v), -1, "no room for the name");
}

int main(void)
{
	test_int();
	test_words();
	test_split();
	return done_testing();
}
