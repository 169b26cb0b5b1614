#include "utf8.h"
#include "tap.h"

static void sanitized(const char *in, size_t n, const char *want, int want_lossy, const char *name)
{
	struct box_buf b = BOX_BUF_INIT(1024);
	struct box_err e;
	int r = box_utf8_sanitize(in, n, &b, &e);

	is_int(r, want_lossy, "%s: lossy flag", name);
	is_str(b.data ? b.data : "", want, "%s: text", name);
	box_buf_release(&b);
}

int main(void)
{
	ok(box_utf8_valid("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15), "valid multi-byte text");
	ok(!box_utf8_valid("\xc0\xaf", 2), "overlong refused");
	ok(!box_utf8_valid("\xed\xa0\x80", 3), "surrogate refused");
	ok(!box_utf8_valid("\xf4\x90\x80\x80", 4), "past U+10FFFF refused");
	ok(!box_utf8_valid("\xe2\x82", 2), "truncated sequence refused");
	ok(box_utf8_valid("a\0b", 3), "NUL is valid UTF-8");

	sanitized("abc", 3, "abc", 0, "ascii");
	sanitized("a\xffz", 3, "a\xef\xbf\xbdz", 1, "one bad byte");
	sanitized("\xe2\x82", 2, "\xef\xbf\xbd", 1, "truncated 3-byte sequence is one U+FFFD");
	sanitized("\xf0\x9f\x98", 3, "\xef\xbf\xbd", 1, "truncated 4-byte sequence is one U+FFFD");
	sanitized("\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd", 1, "overlong: two replacements");

	is_int(box_utf8_cut("ab\xe2\x82\xac", 5), 5, "cut keeps a whole character");
	is_int(box_utf8_cut("ab\xe2\x82\xac", 4), 2, "cut drops a split character");
	is_int(box_utf8_cut("ab\xe2", 3), 2, "cut drops a lone lead byte");
	is_int(box_utf8_cut("abc", 2), 2, "ascii cut");
	return done_testing();
}
