/*
 * The rules and words of command-line flags, shared by every binary's parser (cmd/cli.c), the
 * helpers' own small parsers (box-http) and box-tool's flags of a tool (lib/tools/toolargs.c):
 * the same mistake gets the same message and the same error code (usage, exit status 2)
 * wherever it is made.
 *
 *   Unknown flag: --x                   a flag the program does not have
 *   Missing value for flag: --x         the last argument is a flag that needs a value
 *   Flag takes no value: --x=V          a boolean given a value with "="
 *   Invalid integer for --x: V          not a whole decimal number in range of long long
 *   Out of range for --x: V (expected MIN to MAX)
 *   Invalid boolean for --x: V
 *   Invalid JSON for --x: V
 *   Unexpected argument: V              a positional argument where none is taken
 *
 * A value is quoted up to BOX_FLAG_SHOW bytes. The functions set *err and return -1, so that
 * a caller writes "return box_flag_unknown(err, a);".
 */
#ifndef BOX_FLAGS_H
#define BOX_FLAGS_H

#include <stddef.h>
#include "err.h"

#define BOX_FLAG_SHOW 128 /* bytes of a flag or value quoted in a message */

int box_flag_unknown(struct box_err *err, const char *arg);
int box_flag_missing_value(struct box_err *err, const char *flag);
int box_flag_takes_no_value(struct box_err *err, const char *arg);
int box_flag_unexpected(struct box_err *err, const char *arg);
/* "Invalid KIND for FLAG: TEXT", KIND one of "integer", "boolean", "JSON", "number" ... */
int box_flag_invalid(struct box_err *err, const char *kind, const char *flag, const char *text);
int box_flag_out_of_range(struct box_err *err, const char *flag, const char *text, long long min,
			  long long max);

/*
 * Parses TEXT, the value of FLAG ("--max-files"), as a whole decimal integer in [min, max]:
 * an optional sign and digits only, nothing before or after. Returns 0 with *out, or -1 with
 * "Invalid integer" or "Out of range".
 */
int box_flag_int(const char *flag, const char *text, long long min, long long max,
		 long long *out, struct box_err *err);

/*
 * Splits a long flag "--name" or "--name=value": writes "name" (without the dashes, cut to
 * namelen - 1 bytes) to name and points *value at what follows "=", or sets it NULL. Returns
 * 0, or -1 when arg is not a long flag ("--" alone, "-x", a positional).
 */
int box_flag_split(const char *arg, char *name, size_t namelen, const char **value);

#endif
