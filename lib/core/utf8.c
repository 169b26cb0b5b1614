#include <string.h>

#include "utf8.h"
#include "banned.h"

/* Length of the well-formed sequence at s (1-4), or 0 if ill-formed; *bad gets the number of
 * bytes forming the maximal ill-formed subpart to replace by one U+FFFD. */
static size_t seq_len(const unsigned char *s, size_t n, size_t *bad)
{
	unsigned char c = s[0];
	size_t len, i;
	unsigned char lo = 0x80, hi = 0xBF;

	*bad = 1;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		len = 2;
	else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F;
	} else
		return 0;
	for (i = 1; i < len; i++) {
		if (i >= n)
			break;
		if (s[i] < lo || s[i] > hi)
			break;
		lo = 0x80;
		hi = 0xBF;
	}
	if (i == len)
		return len;
	*bad = i;
	return 0;
}

int box_utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, bad;

	while (i < n) {
		size_t l;

		if (p[i] < 0x80) {
			i++;
			continue;
		}
		l = seq_len(p + i, n - i, &bad);
		if (!l)
			return 0;
		i += l;
	}
	return 1;
}

int box_utf8_sanitize(const char *s, size_t n, struct box_buf *out, struct box_err *err)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, start = 0, bad;
	int lossy = 0;

	while (i < n) {
		size_t l;

		if (p[i] < 0x80) {
			i++;
			continue;
		}
		l = seq_len(p + i, n - i, &bad);
		if (l) {
			i += l;
			continue;
		}
		if (box_buf_append(out, s + start, i - start, err) < 0 ||
		    box_buf_append(out, "\xEF\xBF\xBD", 3, err) < 0)
			return -1;
		lossy = 1;
		i += bad;
		start = i;
	}
	if (box_buf_append(out, s + start, n - start, err) < 0)
		return -1;
	return lossy;
}

size_t box_utf8_cut(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = n, back = 0;

	/* step back over at most three continuation bytes to the lead byte */
	while (i > 0 && back < 4 && (p[i - 1] & 0xC0) == 0x80) {
		i--;
		back++;
	}
	if (i == 0)
		return n;
	{
		unsigned char c = p[i - 1];
		size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;

		if (c >= 0x80 && need > back + 1)
			return i - 1;
	}
	return n;
}
