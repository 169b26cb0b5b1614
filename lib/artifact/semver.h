/* Semantic versions (semver 2.0.0) and the version ranges of box.json (npm's meaning). */
#ifndef BOX_SEMVER_H
#define BOX_SEMVER_H

#include <stddef.h>
#include <stdint.h>
#include "err.h"

#define BOX_SEMVER_MAX_LEN 128          /* cap on the text of one version */
#define BOX_SEMVER_MAX_NUM 9007199254740991ULL /* 2^53 - 1, as npm: exact in JSON numbers */
#define BOX_RANGE_MAX_LEN 256           /* cap on the text of one range */
#define BOX_RANGE_MAX_ALTS 4            /* "||" alternatives */
#define BOX_RANGE_MAX_CMPS 8            /* comparators of one alternative, after expansion */

/*
 * MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], exactly as semver 2.0.0 writes it: no leading "v",
 * no leading zeros in numbers (nor in numeric prerelease identifiers), identifiers of
 * [0-9A-Za-z-], none empty. pre and build hold the text after '-' and '+' ("" when absent).
 */
struct box_semver {
	uint64_t major, minor, patch;
	char pre[BOX_SEMVER_MAX_LEN + 1];
	char build[BOX_SEMVER_MAX_LEN + 1];
};

/*
 * Parses s (at most BOX_SEMVER_MAX_LEN bytes, each number at most BOX_SEMVER_MAX_NUM).
 * Returns 0, or -1 with invalid_request naming the offending text; *v is then undefined.
 */
int box_semver_parse(const char *s, struct box_semver *v, struct box_err *err);

/* Precedence of semver 2.0.0 section 11: <0, 0 or >0. Build metadata is ignored. */
int box_semver_cmp(const struct box_semver *a, const struct box_semver *b);

enum box_cmp_op {
	BOX_CMP_ANY,    /* "*": every version (prereleases still need the rule below) */
	BOX_CMP_EQ,
	BOX_CMP_LT,
	BOX_CMP_LE,
	BOX_CMP_GT,
	BOX_CMP_GE,
};

struct box_comparator {
	enum box_cmp_op op;
	struct box_semver v;
};

/*
 * A range: alternatives joined by "||", each a list of comparators that must all hold.
 * Accepted forms, as npm reads them (partial versions complete with zeros, wildcards x, X, *):
 *   1.2.3  =1.2.3  1.2  1.2.x  1  *  x      exact, or the x-range of a partial version
 *   ^1.2.3 ^1.2 ^1 ^0.2.3 ^0.0.3           up to the next change of the first non-zero part
 *   ~1.2.3 ~1.2 ~1                         up to the next minor (next major for ~1)
 *   >1.2 >=1.0 <2 <=1.4.0                  comparators; a space means AND
 *   1.2.3 - 2.3                            inclusive hyphen range
 *   ^1.2 || ^2                             alternatives
 * text keeps the range as given (for messages).
 */
struct box_range {
	size_t nalts;
	struct {
		size_t n;
		struct box_comparator c[BOX_RANGE_MAX_CMPS];
	} alt[BOX_RANGE_MAX_ALTS];
	char text[BOX_RANGE_MAX_LEN + 1];
};

/*
 * Parses a range (non-empty, at most BOX_RANGE_MAX_LEN bytes).
 * Returns 0, or -1 with invalid_request naming the offending text.
 */
int box_range_parse(const char *s, struct box_range *r, struct box_err *err);

/*
 * 1 if v satisfies r, 0 if not. A version with a prerelease satisfies an alternative only if
 * one of its comparators names a prerelease of the same MAJOR.MINOR.PATCH (npm's rule:
 * ^1.2.3-beta.1 accepts 1.2.3-beta.2 but not 1.3.0-alpha).
 */
int box_range_match(const struct box_range *r, const struct box_semver *v);

/*
 * Picks among the registry's tags[0..n) the highest version that r accepts; tags that are not
 * versions are skipped. Of tags of equal precedence (differing only in build metadata) the
 * one that sorts first bytewise wins, so the choice does not depend on the order of tags.
 * Returns 0 with *best the index in tags, or -1 with not_found when none matches.
 */
int box_range_best(const struct box_range *r, const char *const *tags, size_t n, size_t *best,
		   struct box_err *err);

#endif
