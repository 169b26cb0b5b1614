#include <openssl/evp.h>
#include <sys/random.h>

#include "base64.h"
#include "tap.h"
#include "banned.h"

static const char *rfc[][2] = {
	{ "", "" },
	{ "f", "Zg==" },
	{ "fo", "Zm8=" },
	{ "foo", "Zm9v" },
	{ "foob", "Zm9vYg==" },
	{ "fooba", "Zm9vYmE=" },
	{ "foobar", "Zm9vYmFy" },
};

static void test_vectors(void)
{
	struct box_buf b = BOX_BUF_INIT(1024);
	struct box_err err;

	box_err_init(&err);
	for (size_t i = 0; i < sizeof(rfc) / sizeof(rfc[0]); i++) {
		size_t n = strlen(rfc[i][0]);

		box_buf_truncate(&b, 0);
		is_int(box_base64_encoded_len(n), strlen(rfc[i][1]), "encoded_len(%zu)", n);
		is_int(box_base64_encode(rfc[i][0], n, &b, &err), 0, "encode \"%s\"", rfc[i][0]);
		is_str(b.data, rfc[i][1], "  is \"%s\"", rfc[i][1]);
		box_buf_truncate(&b, 0);
		is_int(box_base64_decode(rfc[i][1], strlen(rfc[i][1]), &b, &err), 0,
		       "decode \"%s\"", rfc[i][1]);
		ok(b.len == n && memcmp(b.data, rfc[i][0], n) == 0, "  is \"%s\"", rfc[i][0]);
	}
	/* padding may be left out */
	box_buf_truncate(&b, 0);
	is_int(box_base64_decode("Zm9vYg", 6, &b, &err), 0, "unpadded \"Zm9vYg\"");
	is_str(b.data, "foob", "  is \"foob\"");
	box_buf_truncate(&b, 0);
	is_int(box_base64_decode("Zm9vYmE", 7, &b, &err), 0, "unpadded \"Zm9vYmE\"");
	is_str(b.data, "fooba", "  is \"fooba\"");
	/* appends */
	box_buf_truncate(&b, 0);
	box_buf_puts(&b, "x:", &err);
	box_base64_encode("foo", 3, &b, &err);
	is_str(b.data, "x:Zm9v", "encode appends");
	box_base64_decode("YmFy", 4, &b, &err);
	is_str(b.data, "x:Zm9vbar", "decode appends");
	is_int(box_base64_encoded_len((size_t)-1), 0, "encoded_len overflow is 0");
	box_buf_release(&b);
}

static void bad(const char *in, const char *msg)
{
	struct box_buf b = BOX_BUF_INIT(1024);
	struct box_err err;
	char name[32];
	size_t i;

	/* TAP names are one line of text */
	for (i = 0; in[i] && i < sizeof(name) - 1; i++)
		name[i] = in[i] >= 0x20 && in[i] < 0x7f ? in[i] : '?';
	name[i] = 0;
	box_err_init(&err);
	box_buf_puts(&b, "keep", &err);
	is_int(box_base64_decode(in, strlen(in), &b, &err), -1, "\"%s\" refused", name);
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	is_str(err.message, msg, "  '%s'", msg);
	ok(b.len == 4 && strcmp(b.data, "keep") == 0, "  buffer unchanged");
	box_buf_release(&b);
}

static void test_strict(void)
{
	struct box_buf b = BOX_BUF_INIT(4);
	struct box_err err;

	bad("Zm9v YmFy", "invalid base64 byte 0x20 at offset 4");
	bad("Zm9v\nYmFy", "invalid base64 byte 0x0a at offset 4");
	bad("Zm9vYmFy\n", "invalid base64 byte 0x0a at offset 8");
	bad("Zm-v", "invalid base64 byte 0x2d at offset 2");
	bad("Zm_v", "invalid base64 byte 0x5f at offset 2");
	bad("Zm9\xff", "invalid base64 byte 0xff at offset 3");
	bad("Zm=v", "invalid base64 byte 0x3d at offset 2");
	bad("Zg=", "invalid base64 padding at offset 2");
	bad("Zg===", "invalid base64 padding at offset 3");
	bad("Zm8==", "invalid base64 padding at offset 3");
	bad("Zm9v=", "invalid base64 padding at offset 4");
	bad("Z===", "invalid base64 byte 0x3d at offset 1");
	bad("====", "invalid base64 byte 0x3d at offset 0");
	bad("=", "invalid base64 padding at offset 0");
	bad("Zm9vY", "truncated base64 input at offset 4");
	bad("Zh==", "invalid base64: non-zero trailing bits at offset 1");
	bad("Zm9=", "invalid base64: non-zero trailing bits at offset 2");

	box_err_init(&err);
	is_int(box_base64_decode("Zm9vYmE=", 8, &b, &err), -1, "decoded output past the cap");
	is_int(err.code, BOX_E_LIMIT, "  limit_exceeded");
	is_int(b.len, 0, "  buffer unchanged");
	is_int(box_base64_encode("abcd", 4, &b, &err), -1, "encoded output past the cap");
	is_int(err.code, BOX_E_LIMIT, "  limit_exceeded");
	box_buf_release(&b);
}

static void test_all_bytes(void)
{
	struct box_buf enc = BOX_BUF_INIT(4096), dec = BOX_BUF_INIT(4096);
	unsigned char all[256];
	struct box_err err;
	int good = 1;

	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	box_err_init(&err);
	/* every byte value in every position of a 3-byte group */
	for (size_t off = 0; off < 3; off++) {
		box_buf_truncate(&enc, 0);
		box_buf_truncate(&dec, 0);
		if (box_base64_encode(all + off, 256 - off, &enc, &err) < 0 ||
		    box_base64_decode(enc.data, enc.len, &dec, &err) < 0 ||
		    dec.len != 256 - off || memcmp(dec.data, all + off, 256 - off) != 0)
			good = 0;
	}
	ok(good, "every byte value round-trips");
	box_buf_release(&enc);
	box_buf_release(&dec);
}

static void test_against_libcrypto(void)
{
	struct box_buf enc = BOX_BUF_INIT(8192), dec = BOX_BUF_INIT(8192);
	unsigned char in[3000], ref[4100], back[3100];
	struct box_err err;
	int enc_good = 1, dec_good = 1, round_good = 1;

	box_err_init(&err);
	for (int i = 0; i < 1000; i++) {
		uint16_t r16;
		size_t n;
		int rn, rd;

		if (getrandom(&r16, sizeof(r16), 0) != sizeof(r16))
			break;
		n = r16 % sizeof(in);
		if (n && getrandom(in, n, 0) != (ssize_t)n)
			break;
		box_buf_truncate(&enc, 0);
		box_buf_truncate(&dec, 0);
		if (box_base64_encode(in, n, &enc, &err) < 0) {
			enc_good = 0;
			continue;
		}
		rn = EVP_EncodeBlock(ref, in, (int)n);
		if (rn < 0 || (size_t)rn != enc.len || memcmp(ref, enc.data, enc.len) != 0)
			enc_good = 0;
		/* EVP_DecodeBlock counts the padding as zero bytes: 3 per 4 characters */
		rd = EVP_DecodeBlock(back, (const unsigned char *)enc.data, (int)enc.len);
		if (box_base64_decode(enc.data, enc.len, &dec, &err) < 0 || rd < 0 ||
		    (size_t)rd != enc.len / 4 * 3 || dec.len != n || memcmp(back, dec.data, n) != 0)
			dec_good = 0;
		if (dec.len != n || memcmp(dec.data, in, n) != 0)
			round_good = 0;
	}
	ok(enc_good, "1000 random buffers: encoding equals EVP_EncodeBlock");
	ok(dec_good, "1000 random buffers: decoding equals EVP_DecodeBlock");
	ok(round_good, "1000 random buffers round-trip");
	box_buf_release(&enc);
	box_buf_release(&dec);
}

int main(void)
{
	test_vectors();
	test_strict();
	test_all_bytes();
	test_against_libcrypto();
	(void)tap_skip;
	return done_testing();
}
