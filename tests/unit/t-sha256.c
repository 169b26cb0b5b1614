#include <fcntl.h>
#include <unistd.h>

#include "sha256.h"
#include "tap.h"
#include "banned.h"

#define EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define ABC "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define MILLION_A "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
#define TWO_BLOCKS "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"

static void test_buf(void)
{
	struct box_err err;
	char hex[65];

	box_err_init(&err);
	is_int(box_sha256_buf("", 0, hex, &err), 0, "digest of \"\"");
	is_str(hex, EMPTY, "  FIPS 180 vector");
	is_int(box_sha256_buf("abc", 3, hex, &err), 0, "digest of \"abc\"");
	is_str(hex, ABC, "  FIPS 180 vector");
	box_sha256_buf("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, hex, &err);
	is_str(hex, TWO_BLOCKS, "448-bit message vector");
}

static void test_stream(void)
{
	struct box_sha256 s = { NULL };
	unsigned char d[32];
	struct box_err err;
	char chunk[1000], hex[65];

	memset(chunk, 'a', sizeof(chunk));
	box_err_init(&err);
	is_int(box_sha256_init(&s, &err), 0, "init");
	for (int i = 0; i < 1000; i++)
		if (box_sha256_update(&s, chunk, sizeof(chunk), &err) < 0)
			break;
	is_int(box_sha256_final(&s, d, &err), 0, "final after 1,000,000 'a'");
	box_sha256_hex(d, hex);
	is_str(hex, MILLION_A, "  FIPS 180 vector");

	/* init again restarts the same ctx */
	is_int(box_sha256_init(&s, &err), 0, "init again");
	box_sha256_update(&s, "a", 1, &err);
	box_sha256_update(&s, "bc", 2, &err);
	box_sha256_final(&s, d, &err);
	box_sha256_hex(d, hex);
	is_str(hex, ABC, "  \"a\" + \"bc\" is \"abc\"");
	box_sha256_release(&s);
	ok(s.ctx == NULL, "release empties the struct");
	box_sha256_release(&s);
	ok(1, "release twice is harmless");
	is_int(box_sha256_update(&s, "x", 1, &err), -1, "update without init fails");
	is_int(err.code, BOX_E_INTERNAL, "  internal");

	{
		unsigned char bytes[32];

		for (int i = 0; i < 32; i++)
			bytes[i] = (unsigned char)(i * 8 + 1);
		box_sha256_hex(bytes, hex);
		is_str(hex, "0109111921293139414951596169717981899199a1a9b1b9c1c9d1d9e1e9f1f9",
		       "hex is lowercase, two digits a byte");
	}
}

static void test_fd(void)
{
	char path[] = "/tmp/box-t-sha256-XXXXXX";
	struct box_err err;
	char hex[65], chunk[4096];
	int64_t size = -1;
	int fd;

	fd = mkstemp(path);
	unlink(path);
	memset(chunk, 'a', sizeof(chunk));
	for (int i = 0; i < 244; i++)
		if (write(fd, chunk, sizeof(chunk)) < 0)
			break;
	if (write(fd, chunk, 1000000 - 244 * 4096) < 0)
		printf("# write failed\n");
	lseek(fd, 0, SEEK_SET);
	box_err_init(&err);
	is_int(box_sha256_fd(fd, hex, &size, &err), 0, "digest of a file");
	is_str(hex, MILLION_A, "  1,000,000 'a'");
	is_int(size, 1000000, "  size");
	is_int(box_sha256_fd(fd, hex, &size, &err), 0, "at end of file");
	is_str(hex, EMPTY, "  nothing left: digest of \"\"");
	is_int(size, 0, "  size 0");
	close(fd);
	is_int(box_sha256_fd(fd, hex, NULL, &err), -1, "closed fd");
	is_int(err.code, BOX_E_IO, "  io_error");
}

int main(void)
{
	test_buf();
	test_stream();
	test_fd();
	(void)tap_skip;
	return done_testing();
}
