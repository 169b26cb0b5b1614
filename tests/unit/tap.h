/* A few TAP helpers for the unit tests of lib/: one "ok N - name" line per check. Each check
 * flushes what it printed, so that a test's fork() never hands a child buffered lines that
 * its exit would print a second time. */
#ifndef BOX_TAP_H
#define BOX_TAP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>

__attribute__((unused)) static int tap_n, tap_failed;

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is_int(got, want, ...) tap_is_int((long long)(got), (long long)(want), __FILE__, __LINE__, __VA_ARGS__)
#define is_str(got, want, ...) tap_is_str((got), (want), __FILE__, __LINE__, __VA_ARGS__)

__attribute__((unused)) static void tap_line(int pass, const char *name)
{
	tap_n++;
	if (!pass)
		tap_failed++;
	printf("%sok %d - %s\n", pass ? "" : "not ", tap_n, name);
}

__attribute__((format(printf, 4, 5)))
__attribute__((unused)) static int tap_ok(int pass, const char *file, int line, const char *fmt, ...)
{
	char name[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	tap_line(pass, name);
	if (!pass)
		printf("#   failed at %s:%d\n", file, line);
	fflush(stdout);
	return pass;
}

__attribute__((format(printf, 5, 6)))
__attribute__((unused)) static int tap_is_int(long long got, long long want, const char *file, int line, const char *fmt, ...)
{
	char name[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	tap_line(got == want, name);
	if (got != want)
		printf("#   failed at %s:%d\n#   got: %lld\n#   expected: %lld\n", file, line, got, want);
	fflush(stdout);
	return got == want;
}

__attribute__((format(printf, 5, 6)))
__attribute__((unused)) static int tap_is_str(const char *got, const char *want, const char *file, int line, const char *fmt, ...)
{
	char name[512];
	va_list ap;
	int pass = got && want ? strcmp(got, want) == 0 : got == want;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	tap_line(pass, name);
	if (!pass)
		printf("#   failed at %s:%d\n#   got: '%s'\n#   expected: '%s'\n", file, line,
		       got ? got : "(null)", want ? want : "(null)");
	fflush(stdout);
	return pass;
}

__attribute__((unused)) static void tap_skip(const char *why)
{
	tap_n++;
	printf("ok %d # skip %s\n", tap_n, why);
	fflush(stdout);
}

/* Prints the plan; the exit status says whether everything passed. */
__attribute__((unused)) static int done_testing(void)
{
	printf("1..%d\n", tap_n);
	fflush(stdout);
	return tap_failed ? 1 : 0;
}

#endif
