#include <string.h>

#include "semver.h"
#include "tap.h"
#include "banned.h"

static void test_parse(void)
{
	static const char *const good[] = {
		"0.0.0", "1.2.3", "10.20.30", "1.0.0-alpha", "1.0.0-0.3.7", "1.0.0-x.7.z.92",
		"1.0.0-x-y-z.--", "1.0.0-alpha+001", "1.0.0+20130313144700",
		"1.0.0-beta+exp.sha.5114f85", "1.0.0+21AF26D3----117B344092BD",
		"9007199254740991.0.0", "1.2.3-0", "1.2.3-0a", "1.2.3+01",
	};
	static const char *const bad[] = {
		"", "1", "1.2", "1.2.3.4", "01.2.3", "1.02.3", "1.2.03", "1.2.3-", "1.2.3+",
		"1.2.3-01", "1.2.3-a..b", "v1.2.3", " 1.2.3", "1.2.3 ", "1.2.3-alpha_beta",
		"9007199254740992.0.0", "99999999999999999999.0.0", "-1.2.3", "1.2.3+b+c",
		"1.2.3-beta.", "1..3", "a.b.c", "1.2.3\n",
	};
	struct box_semver v;
	struct box_err err;
	char longv[200];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		box_err_init(&err);
		is_int(box_semver_parse(good[i], &v, &err), 0, "valid: %s", good[i]);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		box_err_init(&err);
		ok(box_semver_parse(bad[i], &v, &err) == -1 && err.code == BOX_E_INVALID,
		   "invalid: '%s' (%s)", bad[i], err.message);
	}
	box_err_init(&err);
	box_semver_parse("01.2.3", &v, &err);
	ok(strstr(err.message, "'01.2.3'") && strstr(err.message, "leading zero"),
	   "the message names the text and the reason: %s", err.message);

	box_err_init(&err);
	is_int(box_semver_parse("1.0.0-beta.11+exp.sha", &v, &err), 0, "parse with pre and build");
	ok(v.major == 1 && v.minor == 0 && v.patch == 0, "  numbers");
	is_str(v.pre, "beta.11", "  prerelease");
	is_str(v.build, "exp.sha", "  build");

	/* exactly 128 bytes is accepted, 129 is not */
	memset(longv, 0, sizeof(longv));
	memcpy(longv, "1.2.3-", 6);
	memset(longv + 6, 'a', 122);
	box_err_init(&err);
	is_int(box_semver_parse(longv, &v, &err), 0, "128 bytes accepted");
	longv[128] = 'a';
	box_err_init(&err);
	ok(box_semver_parse(longv, &v, &err) == -1 && err.code == BOX_E_INVALID &&
	   strstr(err.message, "128"), "129 bytes refused: %s", err.message);
}

static int cmp(const char *a, const char *b)
{
	struct box_semver x, y;
	struct box_err err;

	box_err_init(&err);
	if (box_semver_parse(a, &x, &err) < 0 || box_semver_parse(b, &y, &err) < 0)
		return 99;
	return box_semver_cmp(&x, &y);
}

static void test_precedence(void)
{
	/* semver 2.0.0, section 11, in increasing order */
	static const char *const order[] = {
		"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
		"1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "2.0.0", "2.1.0",
		"2.1.1", "10.0.0", "9007199254740991.0.0",
	};
	size_t n = sizeof(order) / sizeof(order[0]);

	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++) {
			int want = i < j ? -1 : i > j, got = cmp(order[i], order[j]);

			if (got != want)
				ok(0, "%s vs %s: got %d, want %d", order[i], order[j], got, want);
		}
	ok(1, "precedence table of the semver spec (%zu x %zu pairs)", n, n);
	is_int(cmp("1.0.0+build.1", "1.0.0+build.2"), 0, "build metadata ignored");
	is_int(cmp("1.0.0-alpha+x", "1.0.0-alpha"), 0, "build metadata ignored with a prerelease");
	is_int(cmp("1.0.0-2", "1.0.0-10"), -1, "numeric identifiers compare numerically");
	is_int(cmp("1.0.0-a10", "1.0.0-a2"), -1, "alphanumeric ones compare in ASCII order");
	is_int(cmp("1.0.0-99999999999999999999999", "1.0.0-100000000000000000000000"), -1,
	       "numeric identifiers beyond 64 bits");
	is_int(cmp("1.0.0-Z", "1.0.0-a"), -1, "ASCII: uppercase first");
	is_int(cmp("1.0.0-1", "1.0.0-a"), -1, "numeric below alphanumeric");
	is_int(cmp("1.0.0-a.b", "1.0.0-a"), 1, "a longer list is higher");
	is_int(cmp("1.10.0", "1.9.0"), 1, "minor compares numerically");
	is_int(cmp("1.0.10", "1.0.9"), 1, "patch compares numerically");
}

struct mcase {
	const char *range, *version;
	int want;
};

static void test_ranges(void)
{
	static const struct mcase cases[] = {
		/* exact */
		{ "1.2.3", "1.2.3", 1 }, { "1.2.3", "1.2.4", 0 }, { "1.2.3", "1.2.3+b", 1 },
		{ "=1.2.3", "1.2.3", 1 }, { "=1.2.3", "1.2.2", 0 },
		{ "1.2.3-beta.1", "1.2.3-beta.1", 1 }, { "1.2.3-beta.1", "1.2.3", 0 },
		/* partial = x-range */
		{ "1.2", "1.2.0", 1 }, { "1.2", "1.2.99", 1 }, { "1.2", "1.3.0", 0 },
		{ "1.2.x", "1.2.7", 1 }, { "1.x", "1.9.0", 1 }, { "1.x", "2.0.0", 0 },
		{ "1", "1.0.0", 1 }, { "1", "1.99.0", 1 }, { "1", "0.9.0", 0 },
		{ "*", "0.0.1", 1 }, { "*", "99.0.0", 1 }, { "x", "3.1.4", 1 },
		{ "*", "1.0.0-beta", 0 },
		/* caret */
		{ "^1.2.3", "1.2.3", 1 }, { "^1.2.3", "1.9.9", 1 }, { "^1.2.3", "2.0.0", 0 },
		{ "^1.2.3", "1.2.2", 0 }, { "^1.2", "1.2.0", 1 }, { "^1.2", "1.99.0", 1 },
		{ "^1.2", "1.1.9", 0 }, { "^1.2", "2.0.0", 0 }, { "^1", "1.0.0", 1 },
		{ "^1", "2.0.0", 0 },
		{ "^0.2.3", "0.2.3", 1 }, { "^0.2.3", "0.2.9", 1 }, { "^0.2.3", "0.3.0", 0 },
		{ "^0.2.3", "0.2.2", 0 }, { "^0.0.3", "0.0.3", 1 }, { "^0.0.3", "0.0.4", 0 },
		{ "^0.2", "0.2.5", 1 }, { "^0.2", "0.3.0", 0 }, { "^0.0", "0.0.9", 1 },
		{ "^0.0", "0.1.0", 0 }, { "^0", "0.9.9", 1 }, { "^0", "1.0.0", 0 },
		{ "^1.2.3-beta.2", "1.2.3-beta.4", 1 }, { "^1.2.3-beta.2", "1.2.3-beta.1", 0 },
		{ "^1.2.3-beta.2", "1.2.4-beta.9", 0 }, { "^1.2.3-beta.2", "1.5.0", 1 },
		{ "^1.2.3", "1.2.4-beta", 0 }, { "^1.2.3", "2.0.0-rc.1", 0 },
		/* tilde */
		{ "~1.2.3", "1.2.3", 1 }, { "~1.2.3", "1.2.9", 1 }, { "~1.2.3", "1.3.0", 0 },
		{ "~1.2.3", "1.2.2", 0 }, { "~1.2", "1.2.0", 1 }, { "~1.2", "1.3.0", 0 },
		{ "~1", "1.5.0", 1 }, { "~1", "2.0.0", 0 }, { "~0.2.3", "0.2.4", 1 },
		{ "~0.2.3", "0.3.0", 0 },
		/* comparators, space = AND */
		{ ">=1.0 <2", "1.0.0", 1 }, { ">=1.0 <2", "1.9.9", 1 }, { ">=1.0 <2", "2.0.0", 0 },
		{ ">=1.0 <2", "0.9.9", 0 }, { ">=1.0 <2", "2.0.0-alpha", 0 },
		{ ">1.2.3", "1.2.4", 1 }, { ">1.2.3", "1.2.3", 0 }, { ">1.2", "1.2.9", 0 },
		{ ">1.2", "1.3.0", 1 }, { ">1", "1.9.0", 0 }, { ">1", "2.0.0", 1 },
		{ "<=1.2.3", "1.2.3", 1 }, { "<=1.2.3", "1.2.4", 0 }, { "<=1.2", "1.2.9", 1 },
		{ "<=1.2", "1.3.0", 0 }, { "<1.2.3", "1.2.2", 1 }, { "<1.2.3", "1.2.3", 0 },
		{ "<1.2.3", "1.2.3-beta", 0 }, { "<1.2.3-rc", "1.2.3-beta", 1 },
		{ ">= 1.0.0  < 1.5", "1.4.0", 1 }, { ">= 1.0.0  < 1.5", "1.5.0", 0 },
		{ ">=1.2.3-alpha <1.2.4", "1.2.3-beta", 1 }, { ">=*", "5.0.0", 1 },
		/* hyphen */
		{ "1.2.3 - 2.3.4", "1.2.3", 1 }, { "1.2.3 - 2.3.4", "2.3.4", 1 },
		{ "1.2.3 - 2.3.4", "2.3.5", 0 }, { "1.2 - 2.3", "2.3.9", 1 },
		{ "1.2 - 2.3", "2.4.0", 0 }, { "1.2 - 2.3", "1.1.9", 0 },
		/* alternatives */
		{ "^1.2 || ^3", "1.5.0", 1 }, { "^1.2 || ^3", "3.1.0", 1 },
		{ "^1.2 || ^3", "2.0.0", 0 }, { "1.0.0||2.0.0", "2.0.0", 1 },
	};
	static const char *const bad[] = {
		"", " ", "^", ">=", "^1.2.3.4", "1.2.3.4", "01.2", "^a", ">>1", "=>1", "!1",
		"1.x.3", "^1 ||", "|| ^1", "^1 | ^2", ">*", "<x", "1.2-beta", "1.2.3 -",
		">1 - 2", "^1 || ^2 || ^3 || ^4 || ^5", "~1\001", "1.2.3-01",
		">=1 <2 >=1 <2 >=1 <2 >=1 <2 >=1",
	};
	struct box_range r;
	struct box_semver v;
	struct box_err err;
	char longr[300];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct mcase *c = &cases[i];

		box_err_init(&err);
		if (box_range_parse(c->range, &r, &err) < 0 ||
		    box_semver_parse(c->version, &v, &err) < 0) {
			ok(0, "'%s' vs %s: %s", c->range, c->version, err.message);
			continue;
		}
		is_int(box_range_match(&r, &v), c->want, "'%s' %s %s", c->range,
		       c->want ? "matches" : "does not match", c->version);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		box_err_init(&err);
		ok(box_range_parse(bad[i], &r, &err) == -1 && err.code == BOX_E_INVALID,
		   "invalid range '%s' (%s)", bad[i], err.message);
	}
	box_err_init(&err);
	box_range_parse(">=1.0 <2.x.3", &r, &err);
	ok(strstr(err.message, "'>=1.0 <2.x.3'") != NULL, "the message names the range: %s",
	   err.message);
	box_err_init(&err);
	is_int(box_range_parse("  ^1.2  ", &r, &err), 0, "surrounding spaces allowed");
	is_str(r.text, "  ^1.2  ", "  text kept as written");
	memset(longr, 0, sizeof(longr));
	memset(longr, '1', 257);
	box_err_init(&err);
	ok(box_range_parse(longr, &r, &err) == -1 && err.code == BOX_E_INVALID,
	   "a range longer than 256 bytes is refused");
}

static void test_best(void)
{
	static const char *const tags[] = {
		"latest", "1.0.0", "v1.5.0", "1.2.0", "1.10.0", "2.0.0-rc.1", "1.11.0-beta",
		"2.0.0", "01.0.0", "sha256-abc", "1.9.0+build", "", NULL, "3.0.0-alpha",
		"1.10.0+b", "1.10.0+a",
	};
	size_t n = sizeof(tags) / sizeof(tags[0]), best = 999;
	struct box_range r;
	struct box_err err;

	box_err_init(&err);
	box_range_parse("^1.0", &r, &err);
	is_int(box_range_best(&r, tags, n, &best, &err), 0, "^1.0 finds a version");
	is_str(tags[best], "1.10.0", "  the highest 1.x, junk, v-prefixed and prereleases skipped; "
	       "of equal precedence the bytewise first tag wins");

	box_range_parse("~1.2", &r, &err);
	box_range_best(&r, tags, n, &best, &err);
	is_str(tags[best], "1.2.0", "~1.2 picks 1.2.0");

	box_range_parse("*", &r, &err);
	box_range_best(&r, tags, n, &best, &err);
	is_str(tags[best], "2.0.0", "* picks the highest release, not 3.0.0-alpha");

	box_range_parse(">=2.0.0-rc.0 <2.0.0", &r, &err);
	box_range_best(&r, tags, n, &best, &err);
	is_str(tags[best], "2.0.0-rc.1", "a range naming a prerelease of 2.0.0 picks 2.0.0-rc.1");

	box_range_parse("^1.11.0-alpha", &r, &err);
	box_range_best(&r, tags, n, &best, &err);
	is_str(tags[best], "1.11.0-beta", "^1.11.0-alpha accepts 1.11.0-beta");

	box_range_parse("^1.9.0 <1.10", &r, &err);
	box_range_best(&r, tags, n, &best, &err);
	is_str(tags[best], "1.9.0+build", "the tag text is returned, build metadata and all");

	box_range_parse("^4", &r, &err);
	best = 777;
	box_err_init(&err);
	ok(box_range_best(&r, tags, n, &best, &err) == -1 && err.code == BOX_E_NOT_FOUND &&
	   best == 777 && strstr(err.message, "'^4'"), "nothing matches ^4: not_found (%s)",
	   err.message);
	box_err_init(&err);
	is_int(box_range_best(&r, tags, 0, &best, &err), -1, "no tags at all: not found");
	is_int(err.code, BOX_E_NOT_FOUND, "  not_found");
}

int main(void)
{
	test_parse();
	test_precedence();
	test_ranges();
	test_best();
	return done_testing();
}
