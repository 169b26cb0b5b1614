#include <errno.h>
#include <unistd.h>

#include "sha256.h"
#include "banned.h"

int box_sha256_init(struct box_sha256 *s, struct box_err *err)
{
	if (!s->ctx)
		s->ctx = EVP_MD_CTX_new();
	if (!s->ctx)
		return box_err_set(err, BOX_E_INTERNAL, "sha256: out of memory");
	if (EVP_DigestInit_ex(s->ctx, EVP_sha256(), NULL) != 1) {
		box_sha256_release(s);
		return box_err_set(err, BOX_E_INTERNAL, "sha256: digest init failed");
	}
	return 0;
}

int box_sha256_update(struct box_sha256 *s, const void *data, size_t n, struct box_err *err)
{
	if (!s->ctx || EVP_DigestUpdate(s->ctx, data, n) != 1)
		return box_err_set(err, BOX_E_INTERNAL, "sha256: digest update failed");
	return 0;
}

int box_sha256_final(struct box_sha256 *s, unsigned char out[BOX_SHA256_LEN], struct box_err *err)
{
	unsigned int n = 0;

	if (!s->ctx || EVP_DigestFinal_ex(s->ctx, out, &n) != 1 || n != BOX_SHA256_LEN)
		return box_err_set(err, BOX_E_INTERNAL, "sha256: digest final failed");
	return 0;
}

void box_sha256_release(struct box_sha256 *s)
{
	EVP_MD_CTX_free(s->ctx);
	s->ctx = NULL;
}

void box_sha256_hex(const unsigned char d[BOX_SHA256_LEN], char hex[BOX_SHA256_HEX_LEN + 1])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < BOX_SHA256_LEN; i++) {
		hex[2 * i] = digits[d[i] >> 4];
		hex[2 * i + 1] = digits[d[i] & 15];
	}
	hex[BOX_SHA256_HEX_LEN] = 0;
}

int box_sha256_buf(const void *data, size_t n, char hex[BOX_SHA256_HEX_LEN + 1],
		   struct box_err *err)
{
	struct box_sha256 s = { NULL };
	unsigned char d[BOX_SHA256_LEN];
	int r;

	r = box_sha256_init(&s, err);
	if (r == 0)
		r = box_sha256_update(&s, data, n, err);
	if (r == 0)
		r = box_sha256_final(&s, d, err);
	box_sha256_release(&s);
	if (r == 0)
		box_sha256_hex(d, hex);
	return r;
}

int box_sha256_fd(int fd, char hex[BOX_SHA256_HEX_LEN + 1], int64_t *size, struct box_err *err)
{
	struct box_sha256 s = { NULL };
	unsigned char d[BOX_SHA256_LEN];
	unsigned char chunk[65536];
	int64_t total = 0;
	int r;

	r = box_sha256_init(&s, err);
	while (r == 0) {
		ssize_t n = read(fd, chunk, sizeof(chunk));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = box_err_sys(err, "read");
			break;
		}
		if (n == 0)
			break;
		total += n;
		r = box_sha256_update(&s, chunk, (size_t)n, err);
	}
	if (r == 0)
		r = box_sha256_final(&s, d, err);
	box_sha256_release(&s);
	if (r < 0)
		return -1;
	box_sha256_hex(d, hex);
	if (size)
		*size = total;
	return 0;
}
