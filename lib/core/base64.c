#include <stdint.h>

#include "base64.h"
#include "banned.h"

static const char alphabet[64] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t box_base64_encoded_len(size_t n)
{
	size_t groups = n / 3 + (n % 3 != 0);

	if (groups > SIZE_MAX / 4)
		return 0;
	return groups * 4;
}

int box_base64_encode(const void *in, size_t n, struct box_buf *out, struct box_err *err)
{
	const unsigned char *s = in;
	size_t len = box_base64_encoded_len(n);
	char *d;
	size_t i;

	if (len == 0 && n > 0)
		return box_err_set(err, BOX_E_LIMIT, "base64: input of %zu bytes is too large", n);
	d = box_buf_reserve(out, len, err);
	if (!d)
		return -1;
	for (i = 0; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];

		*d++ = alphabet[v >> 18];
		*d++ = alphabet[(v >> 12) & 63];
		*d++ = alphabet[(v >> 6) & 63];
		*d++ = alphabet[v & 63];
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)s[i] << 16;

		*d++ = alphabet[v >> 18];
		*d++ = alphabet[(v >> 12) & 63];
		*d++ = '=';
		*d++ = '=';
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;

		*d++ = alphabet[v >> 18];
		*d++ = alphabet[(v >> 12) & 63];
		*d++ = alphabet[(v >> 6) & 63];
		*d++ = '=';
	}
	out->len += len;
	out->data[out->len] = 0;
	return 0;
}

static int value_of(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int box_base64_decode(const char *in, size_t n, struct box_buf *out, struct box_err *err)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t data_len = n, outlen, i, o = 0;
	uint32_t acc = 0;
	int bits = 0;
	char *d;

	/* padding: at most two '=' at the very end, and then the length is a multiple of 4 */
	while (data_len > 0 && s[data_len - 1] == '=' && n - data_len < 2)
		data_len--;
	if (data_len < n) {
		if (n % 4 != 0)
			return box_err_set(err, BOX_E_INVALID,
					   "invalid base64 padding at offset %zu", data_len);
		if (data_len % 4 < 2)
			return box_err_set(err, BOX_E_INVALID,
					   "invalid base64 padding at offset %zu", data_len);
		if (n - data_len != 4 - data_len % 4)
			return box_err_set(err, BOX_E_INVALID,
					   "invalid base64 padding at offset %zu", data_len);
	}
	for (i = 0; i < data_len; i++)
		if (value_of(s[i]) < 0)
			return box_err_set(err, BOX_E_INVALID,
					   "invalid base64 byte 0x%02x at offset %zu", s[i], i);
	if (data_len % 4 == 1)
		return box_err_set(err, BOX_E_INVALID, "truncated base64 input at offset %zu",
				   data_len - 1);
	/* a canonical encoder leaves the unused low bits zero; anything else is not base64
	 * of one particular byte string */
	if ((data_len % 4 == 2 && (value_of(s[data_len - 1]) & 15) != 0) ||
	    (data_len % 4 == 3 && (value_of(s[data_len - 1]) & 3) != 0))
		return box_err_set(err, BOX_E_INVALID,
				   "invalid base64: non-zero trailing bits at offset %zu", data_len - 1);
	outlen = data_len / 4 * 3 + (data_len % 4 ? data_len % 4 - 1 : 0);
	d = box_buf_reserve(out, outlen, err);
	if (!d)
		return -1;
	for (i = 0; i < data_len; i++) {
		acc = acc << 6 | (uint32_t)value_of(s[i]);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			d[o++] = (char)(acc >> bits & 0xff);
		}
	}
	out->len += o;
	out->data[out->len] = 0;
	return 0;
}
