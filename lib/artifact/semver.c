#include <string.h>

#include "semver.h"
#include "banned.h"

/* Offending text goes into messages: printable ASCII only, and short enough to fit. */
static void shown(char *out, size_t outsz, const char *s, size_t n)
{
	size_t i, j = 0;

	for (i = 0; i < n && s[i] && j + 4 < outsz; i++)
		out[j++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	if (i < n && s[i] && j + 4 >= outsz) {
		memcpy(out + j, "...", 3);
		j += 3;
	}
	out[j] = 0;
}

static int bad_version(struct box_err *err, const char *s, size_t n, const char *why)
{
	char t[160];

	shown(t, sizeof(t), s, n);
	return box_err_set(err, BOX_E_INVALID, "invalid version '%s': %s", t, why);
}

static int bad_range(struct box_err *err, const char *s, const char *why)
{
	char t[160];

	shown(t, sizeof(t), s, BOX_RANGE_MAX_LEN + 1);
	return box_err_set(err, BOX_E_INVALID, "invalid range '%s': %s", t, why);
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int is_ident_char(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
}

/* A number of s[*i..n): digits, no leading zero, at most BOX_SEMVER_MAX_NUM. */
static const char *parse_num(const char *s, size_t n, size_t *i, uint64_t *out)
{
	size_t start = *i;
	uint64_t v = 0;

	while (*i < n && is_digit(s[*i])) {
		if (*i - start >= 16)
			return "number too large";
		v = v * 10 + (uint64_t)(s[*i] - '0');
		(*i)++;
	}
	if (*i == start)
		return "expected a number";
	if (s[start] == '0' && *i - start > 1)
		return "number with a leading zero";
	if (v > BOX_SEMVER_MAX_NUM)
		return "number too large";
	*out = v;
	return NULL;
}

/* Dot-separated identifiers of s[*i..n) up to a char not in them; copied into out. */
static const char *parse_idents(const char *s, size_t n, size_t *i, int numeric_rule,
				char *out, size_t outsz)
{
	size_t start = *i;

	for (;;) {
		size_t id = *i;
		int all_digits = 1;

		while (*i < n && is_ident_char(s[*i])) {
			if (!is_digit(s[*i]))
				all_digits = 0;
			(*i)++;
		}
		if (*i == id)
			return "empty identifier";
		if (numeric_rule && all_digits && s[id] == '0' && *i - id > 1)
			return "numeric identifier with a leading zero";
		if (*i < n && s[*i] == '.') {
			(*i)++;
			continue;
		}
		break;
	}
	if (*i - start >= outsz)
		return "too long";
	memcpy(out, s + start, *i - start);
	out[*i - start] = 0;
	return NULL;
}

static int parse_full(const char *s, size_t n, struct box_semver *v, struct box_err *err)
{
	const char *why = NULL;
	size_t i = 0;

	memset(v, 0, sizeof(*v));
	if (n == 0)
		return bad_version(err, s, n, "empty");
	if (n > BOX_SEMVER_MAX_LEN)
		return bad_version(err, s, n, "longer than 128 bytes");
	if ((why = parse_num(s, n, &i, &v->major)))
		return bad_version(err, s, n, why);
	if (i >= n || s[i++] != '.')
		return bad_version(err, s, n, "expected MAJOR.MINOR.PATCH");
	if ((why = parse_num(s, n, &i, &v->minor)))
		return bad_version(err, s, n, why);
	if (i >= n || s[i++] != '.')
		return bad_version(err, s, n, "expected MAJOR.MINOR.PATCH");
	if ((why = parse_num(s, n, &i, &v->patch)))
		return bad_version(err, s, n, why);
	if (i < n && s[i] == '-') {
		i++;
		if ((why = parse_idents(s, n, &i, 1, v->pre, sizeof(v->pre))))
			return bad_version(err, s, n, why);
	}
	if (i < n && s[i] == '+') {
		i++;
		if ((why = parse_idents(s, n, &i, 0, v->build, sizeof(v->build))))
			return bad_version(err, s, n, why);
	}
	if (i != n)
		return bad_version(err, s, n, "unexpected character");
	return 0;
}

int box_semver_parse(const char *s, struct box_semver *v, struct box_err *err)
{
	if (!s)
		return box_err_set(err, BOX_E_INVALID, "invalid version: missing");
	return parse_full(s, strnlen(s, BOX_SEMVER_MAX_LEN + 1), v, err);
}

static int cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

static int all_digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!is_digit(s[i]))
			return 0;
	return 1;
}

/* Prerelease precedence: identifier by identifier, numeric ones numerically and below
 * alphanumeric ones, a shorter list first when it is a prefix of the other. */
static int cmp_pre(const char *a, const char *b)
{
	for (;;) {
		size_t la = strcspn(a, "."), lb = strcspn(b, ".");
		int da = all_digits(a, la), db = all_digits(b, lb);
		int c;

		if (da && db) {
			/* no leading zeros: the longer number is the larger one */
			c = la != lb ? (la < lb ? -1 : 1) : memcmp(a, b, la);
		} else if (da != db) {
			c = da ? -1 : 1;
		} else {
			c = memcmp(a, b, la < lb ? la : lb);
			if (c == 0)
				c = la < lb ? -1 : la > lb;
		}
		if (c)
			return c < 0 ? -1 : 1;
		a += la;
		b += lb;
		if (!*a || !*b)
			return !*a && !*b ? 0 : (!*a ? -1 : 1);
		a++;
		b++;
	}
}

int box_semver_cmp(const struct box_semver *a, const struct box_semver *b)
{
	int c;

	if ((c = cmp_u64(a->major, b->major)) || (c = cmp_u64(a->minor, b->minor)) ||
	    (c = cmp_u64(a->patch, b->patch)))
		return c;
	if (!a->pre[0] || !b->pre[0])
		return !a->pre[0] && !b->pre[0] ? 0 : (!a->pre[0] ? 1 : -1);
	return cmp_pre(a->pre, b->pre);
}

/* A version as a range writes it: 1, 1.2, 1.2.x, *, or a full version. */
struct partial {
	int parts;       /* numeric parts before the first wildcard or the end: 0..3 */
	struct box_semver v;
};

static int is_wild(const char *s, size_t n)
{
	return n == 1 && (s[0] == 'x' || s[0] == 'X' || s[0] == '*');
}

static int parse_partial(const char *range, const char *s, size_t n, struct partial *p,
			 struct box_err *err)
{
	uint64_t *num[3];
	size_t i = 0;
	int k, wild = 0;

	memset(p, 0, sizeof(*p));
	num[0] = &p->v.major;
	num[1] = &p->v.minor;
	num[2] = &p->v.patch;
	for (k = 0; k < 3; k++) {
		size_t end = i;

		while (end < n && s[end] != '.' && s[end] != '-' && s[end] != '+')
			end++;
		if (is_wild(s + i, end - i)) {
			wild = 1;
		} else if (wild) {
			return bad_range(err, range, "a number after a wildcard");
		} else {
			const char *why;
			size_t j = i;

			if ((why = parse_num(s, end, &j, num[k])) || j != end)
				return bad_range(err, range, why ? why : "not a version");
			p->parts = k + 1;
		}
		i = end;
		if (i >= n || s[i] != '.')
			break;
		i++;
		if (k == 2)
			return bad_range(err, range, "more than three version parts");
	}
	if (i < n) {
		if (p->parts != 3)
			return bad_range(err, range, "a prerelease or build needs MAJOR.MINOR.PATCH");
		if (parse_full(s, n, &p->v, err) < 0) {
			char why[BOX_ERR_MSG_MAX];

			memcpy(why, err->message, sizeof(why));
			return bad_range(err, range, why);
		}
	}
	return 0;
}

struct alt {
	size_t n;
	struct box_comparator *c;
};

static int add(const char *range, struct alt *a, enum box_cmp_op op, uint64_t ma, uint64_t mi,
	       uint64_t pa, const char *pre, struct box_err *err)
{
	struct box_comparator *c;

	if (a->n >= BOX_RANGE_MAX_CMPS)
		return bad_range(err, range, "too many comparators");
	c = &a->c[a->n++];
	memset(c, 0, sizeof(*c));
	c->op = op;
	c->v.major = ma;
	c->v.minor = mi;
	c->v.patch = pa;
	if (pre)
		memcpy(c->v.pre, pre, strlen(pre) + 1);
	return 0;
}

/* The lower bound a partial version gives: its zero-completed value (with a prerelease). */
static int add_lower(const char *range, struct alt *a, const struct partial *p,
		     struct box_err *err)
{
	if (p->parts == 0)
		return add(range, a, BOX_CMP_ANY, 0, 0, 0, NULL, err);
	return add(range, a, BOX_CMP_GE, p->v.major, p->v.minor, p->v.patch, p->v.pre, err);
}

/* "< next" where next bumps the last given part: 1.2 -> <1.3.0, 1 -> <2.0.0. */
static int add_upper_after(const char *range, struct alt *a, const struct partial *p,
			   struct box_err *err)
{
	if (p->parts == 2)
		return add(range, a, BOX_CMP_LT, p->v.major, p->v.minor + 1, 0, NULL, err);
	return add(range, a, BOX_CMP_LT, p->v.major + 1, 0, 0, NULL, err);
}

static int expand(const char *range, struct alt *a, const char *op, const struct partial *p,
		  struct box_err *err)
{
	const struct box_semver *v = &p->v;

	if (!op[0] || strcmp(op, "=") == 0) {
		if (p->parts == 3)
			return add(range, a, BOX_CMP_EQ, v->major, v->minor, v->patch, v->pre, err);
		if (add_lower(range, a, p, err) < 0)
			return -1;
		return p->parts ? add_upper_after(range, a, p, err) : 0;
	}
	if (p->parts == 0) {
		if (strcmp(op, ">=") == 0 || strcmp(op, "<=") == 0 || strcmp(op, "^") == 0 ||
		    strcmp(op, "~") == 0)
			return add(range, a, BOX_CMP_ANY, 0, 0, 0, NULL, err);
		return bad_range(err, range, "a wildcard after < or >");
	}
	if (strcmp(op, "^") == 0) {
		if (add_lower(range, a, p, err) < 0)
			return -1;
		if (v->major > 0 || p->parts == 1)
			return add(range, a, BOX_CMP_LT, v->major + 1, 0, 0, NULL, err);
		if (v->minor > 0 || p->parts == 2)
			return add(range, a, BOX_CMP_LT, 0, v->minor + 1, 0, NULL, err);
		return add(range, a, BOX_CMP_LT, 0, 0, v->patch + 1, NULL, err);
	}
	if (strcmp(op, "~") == 0) {
		if (add_lower(range, a, p, err) < 0)
			return -1;
		if (p->parts == 1)
			return add(range, a, BOX_CMP_LT, v->major + 1, 0, 0, NULL, err);
		return add(range, a, BOX_CMP_LT, v->major, v->minor + 1, 0, NULL, err);
	}
	if (strcmp(op, ">=") == 0)
		return add_lower(range, a, p, err);
	if (strcmp(op, "<") == 0)
		return add(range, a, BOX_CMP_LT, v->major, v->minor, v->patch, v->pre, err);
	if (strcmp(op, ">") == 0) {
		if (p->parts == 3)
			return add(range, a, BOX_CMP_GT, v->major, v->minor, v->patch, v->pre, err);
		if (p->parts == 2)
			return add(range, a, BOX_CMP_GE, v->major, v->minor + 1, 0, NULL, err);
		return add(range, a, BOX_CMP_GE, v->major + 1, 0, 0, NULL, err);
	}
	if (strcmp(op, "<=") == 0) {
		if (p->parts == 3)
			return add(range, a, BOX_CMP_LE, v->major, v->minor, v->patch, v->pre, err);
		return add_upper_after(range, a, p, err);
	}
	return bad_range(err, range, "unknown operator");
}

static int is_space(char c)
{
	return c == ' ' || c == '\t';
}

/* One token of s[*i..n): an optional operator, optional spaces, a version. */
static int next_token(const char *range, const char *s, size_t n, size_t *i, char *op,
		      const char **ver, size_t *vlen, struct box_err *err)
{
	size_t k = 0;

	while (*i < n && k < 2 && strchr("<>=^~", s[*i])) {
		op[k++] = s[*i];
		(*i)++;
	}
	op[k] = 0;
	if (*i < n && strchr("<>=^~", s[*i]))
		return bad_range(err, range, "unknown operator");
	if (k && strcmp(op, "<") && strcmp(op, "<=") && strcmp(op, ">") && strcmp(op, ">=") &&
	    strcmp(op, "=") && strcmp(op, "^") && strcmp(op, "~"))
		return bad_range(err, range, "unknown operator");
	while (*i < n && is_space(s[*i]))
		(*i)++;
	*ver = s + *i;
	while (*i < n && !is_space(s[*i]))
		(*i)++;
	*vlen = (size_t)(s + *i - *ver);
	if (*vlen == 0)
		return bad_range(err, range, "an operator without a version");
	return 0;
}

static int parse_alt(const char *range, const char *s, size_t n, struct alt *a,
		     struct box_err *err)
{
	size_t i = 0;
	int tokens = 0;

	for (;;) {
		char op[3];
		const char *ver;
		size_t vlen, j;
		struct partial p;

		while (i < n && is_space(s[i]))
			i++;
		if (i >= n)
			break;
		if (next_token(range, s, n, &i, op, &ver, &vlen, err) < 0)
			return -1;
		if (parse_partial(range, ver, vlen, &p, err) < 0)
			return -1;
		tokens++;
		j = i;
		while (j < n && is_space(s[j]))
			j++;
		if (j + 1 < n && s[j] == '-' && is_space(s[j + 1])) {
			struct partial hi;

			if (op[0])
				return bad_range(err, range, "an operator in a hyphen range");
			i = j + 1;
			while (i < n && is_space(s[i]))
				i++;
			if (next_token(range, s, n, &i, op, &ver, &vlen, err) < 0)
				return -1;
			if (op[0])
				return bad_range(err, range, "an operator in a hyphen range");
			if (parse_partial(range, ver, vlen, &hi, err) < 0)
				return -1;
			if (add_lower(range, a, &p, err) < 0)
				return -1;
			if (hi.parts == 3) {
				if (add(range, a, BOX_CMP_LE, hi.v.major, hi.v.minor, hi.v.patch,
					hi.v.pre, err) < 0)
					return -1;
			} else if (hi.parts && add_upper_after(range, a, &hi, err) < 0) {
				return -1;
			}
			continue;
		}
		if (expand(range, a, op, &p, err) < 0)
			return -1;
	}
	if (!tokens)
		return bad_range(err, range, "empty alternative");
	return 0;
}

int box_range_parse(const char *s, struct box_range *r, struct box_err *err)
{
	size_t n, start = 0;

	memset(r, 0, sizeof(*r));
	if (!s)
		return box_err_set(err, BOX_E_INVALID, "invalid range: missing");
	n = strnlen(s, BOX_RANGE_MAX_LEN + 1);
	if (n > BOX_RANGE_MAX_LEN)
		return bad_range(err, s, "longer than 256 bytes");
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			if (s[i] != '\t')
				return bad_range(err, s, "a control or non-ASCII character");
	memcpy(r->text, s, n);
	r->text[n] = 0;
	for (;;) {
		const char *bar = strstr(s + start, "||");
		size_t end = bar ? (size_t)(bar - s) : n;
		struct alt a;

		if (r->nalts >= BOX_RANGE_MAX_ALTS)
			return bad_range(err, s, "too many alternatives");
		a.n = 0;
		a.c = r->alt[r->nalts].c;
		if (parse_alt(s, s + start, end - start, &a, err) < 0)
			return -1;
		r->alt[r->nalts++].n = a.n;
		if (!bar)
			break;
		start = end + 2;
	}
	return 0;
}

static int cmp_holds(const struct box_comparator *c, const struct box_semver *v)
{
	int d;

	if (c->op == BOX_CMP_ANY)
		return 1;
	d = box_semver_cmp(v, &c->v);
	switch (c->op) {
	case BOX_CMP_EQ:
		return d == 0;
	case BOX_CMP_LT:
		return d < 0;
	case BOX_CMP_LE:
		return d <= 0;
	case BOX_CMP_GT:
		return d > 0;
	case BOX_CMP_GE:
		return d >= 0;
	case BOX_CMP_ANY:
		break;
	}
	return 1;
}

int box_range_match(const struct box_range *r, const struct box_semver *v)
{
	for (size_t i = 0; i < r->nalts; i++) {
		size_t k, n = r->alt[i].n;
		const struct box_comparator *c = r->alt[i].c;
		int pre_ok = !v->pre[0];

		for (k = 0; k < n; k++) {
			if (!cmp_holds(&c[k], v))
				break;
			if (c[k].op != BOX_CMP_ANY && c[k].v.pre[0] && c[k].v.major == v->major &&
			    c[k].v.minor == v->minor && c[k].v.patch == v->patch)
				pre_ok = 1;
		}
		if (k == n && pre_ok)
			return 1;
	}
	return 0;
}

int box_range_best(const struct box_range *r, const char *const *tags, size_t n, size_t *best,
		   struct box_err *err)
{
	struct box_semver v, top;
	struct box_err ignored;
	size_t found = n;
	char t[160];

	for (size_t i = 0; i < n; i++) {
		int c;

		if (!tags[i])
			continue;
		box_err_init(&ignored);
		if (box_semver_parse(tags[i], &v, &ignored) < 0 || !box_range_match(r, &v))
			continue;
		if (found < n) {
			c = box_semver_cmp(&v, &top);
			if (c < 0 || (c == 0 && strcmp(tags[i], tags[found]) >= 0))
				continue;
		}
		found = i;
		top = v;
	}
	if (found == n) {
		shown(t, sizeof(t), r->text, sizeof(r->text));
		return box_err_set(err, BOX_E_NOT_FOUND, "no version matches '%s'", t);
	}
	*best = found;
	return 0;
}
