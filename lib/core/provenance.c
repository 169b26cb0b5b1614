#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "provenance.h"
#include "json.h"
#include "banned.h"

/* Debian 12's libssl3 package; the soname changes only with libcrypto's ABI. */
#define CRYPTO_SONAME "libcrypto.so.3"

static int by_name(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;

	return strcmp(x->string, y->string);
}

/* Sorts the members of every object in place; bounded by the tree cJSON already holds. */
static int sort_tree(cJSON *v)
{
	cJSON *it, **items;
	size_t n = 0, i;

	for (it = v->child; it; it = it->next)
		if (sort_tree(it) < 0)
			return -1;
	if (!cJSON_IsObject(v) || !v->child)
		return 0;
	for (it = v->child; it; it = it->next)
		n++;
	items = calloc(n, sizeof(*items));
	if (!items)
		return -1;
	for (i = 0, it = v->child; it; it = it->next)
		items[i++] = it;
	qsort(items, n, sizeof(*items), by_name);
	for (i = 0; i < n; i++) {
		items[i]->prev = i ? items[i - 1] : items[n - 1];
		items[i]->next = i + 1 < n ? items[i + 1] : NULL;
	}
	v->child = items[0];
	free(items);
	return 0;
}

char *box_canonical_json(const cJSON *v)
{
	cJSON *c = cJSON_Duplicate(v, 1);
	char *s = NULL;

	if (c && sort_tree(c) == 0) {
		box_json_exact(c);
		s = cJSON_PrintUnformatted(c);
	}
	cJSON_Delete(c);
	return s;
}

/* libcrypto's SHA256_Init/Update/Final (no EVP fetch: OpenSSL 3's first EVP digest loads its
 * default provider, about 0.9 ms, where these take microseconds), else EVP_Digest. */
struct crypto {
	int tried;
	void *lib;
	int (*init)(void *ctx);
	int (*update)(void *ctx, const void *data, size_t n);
	int (*final)(unsigned char *md, void *ctx);
	const void *(*sha256)(void);
	int (*digest)(const void *data, size_t n, unsigned char *md, unsigned int *len,
		      const void *type, void *engine);
};

static struct crypto crypto;

/* SHA256_CTX is 112 bytes; room and alignment to spare */
union sha256_ctx {
	unsigned char bytes[256];
	long long align;
};

static int digest_of(const void *data, size_t n, unsigned char md[32])
{
	union sha256_ctx ctx;
	unsigned int len = 0;

	if (crypto.init && crypto.update && crypto.final)
		return crypto.init(&ctx) == 1 && crypto.update(&ctx, data, n) == 1 &&
		       crypto.final(md, &ctx) == 1 ? 0 : -1;
	return crypto.digest(data, n, md, &len, crypto.sha256(), NULL) == 1 && len == 32 ? 0 : -1;
}

int box_digest_sha256(const void *data, size_t n, char out[72], struct box_err *err)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[32];
	unsigned int i;

	if (!crypto.tried) {
		crypto.tried = 1;
		crypto.lib = dlopen(CRYPTO_SONAME, RTLD_NOW | RTLD_LOCAL);
		if (crypto.lib) {
			*(void **)&crypto.init = dlsym(crypto.lib, "SHA256_Init");
			*(void **)&crypto.update = dlsym(crypto.lib, "SHA256_Update");
			*(void **)&crypto.final = dlsym(crypto.lib, "SHA256_Final");
			*(void **)&crypto.sha256 = dlsym(crypto.lib, "EVP_sha256");
			*(void **)&crypto.digest = dlsym(crypto.lib, "EVP_Digest");
		}
	}
	if (!(crypto.init && crypto.update && crypto.final) && !(crypto.sha256 && crypto.digest))
		return box_err_set(err, BOX_E_UNSUPPORTED, "sha256: cannot load %s",
				   CRYPTO_SONAME);
	if (digest_of(data, n, md) < 0)
		return box_err_set(err, BOX_E_INTERNAL, "sha256: digest failed");
	memcpy(out, "sha256:", 7);
	for (i = 0; i < 32; i++) {
		out[7 + 2 * i] = hex[md[i] >> 4];
		out[8 + 2 * i] = hex[md[i] & 15];
	}
	out[71] = 0;
	return 0;
}

int box_digest_json(const cJSON *v, char out[72], struct box_err *err)
{
	char *s = box_canonical_json(v);
	int r;

	if (!s)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	r = box_digest_sha256(s, strlen(s), out, err);
	cJSON_free(s);
	return r;
}
