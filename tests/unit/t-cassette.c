/* lib/run/cassette.c and lib/core/provenance.c: canonical JSON, digests, a cassette's round trip, its
 * divergences and the hostile files it refuses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cassette.h"
#include "json.h"
#include "provenance.h"
#include "sha256.h"
#include "vm.h"
#include "tap.h"

#define CANON_SHA "ba30f906bd2b261d0775b14c4ea6afee7b964fd29b6ce031f735191c2f087f96"

static struct box_ipc_field fld(const char *s)
{
	struct box_ipc_field f = { s, strlen(s) };

	return f;
}

static int write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

static enum box_code load_code(const char *path, const char *text)
{
	struct box_cassette c;
	struct box_err e;
	enum box_code code;

	box_err_init(&e);
	write_text(path, text);
	code = box_cassette_load(&c, path, &e) < 0 ? e.code : BOX_OK;
	box_cassette_release(&c);
	return code;
}

int main(void)
{
	char dir[] = "/tmp/t-cassette.XXXXXX", path[256], d[72];
	struct box_cassette c;
	struct box_ipc_field in[2], out[BOX_IPC_MAX_FIELDS];
	struct box_err e;
	cJSON *v, *head;
	char *s;
	const char *text;
	uint8_t rop;
	int n, aborted;
	static const char *head_line =
		"{\"cassette\":1,\"request\":{\"script\":\"x\"},\"seed\":5}\n";

	box_err_init(&e);
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/c.jsonl", dir);

	/* canonical JSON: sorted members at every depth, no whitespace, exact integers */
	text = "{\"b\": [1, {\"z\": 1, \"a\": 2}], \"a\": 9007199254740993}";
	v = box_json_parse(text, strlen(text), &e);
	s = v ? box_canonical_json(v) : NULL;
	is_str(s, "{\"a\":9007199254740993,\"b\":[1,{\"a\":2,\"z\":1}]}", "canonical JSON");
	cJSON_free(s);
	/* printf '{"a":9007199254740993,"b":[1,{"a":2,"z":1}]}' | sha256sum */
	ok(box_digest_json(v, d, &e) == 0, "a digest of JSON");
	is_str(d, "sha256:" CANON_SHA, "the digest of the canonical text");
	cJSON_Delete(v);
	ok(box_digest_sha256("abc", 3, d, &e) == 0, "sha256 through libcrypto loaded on demand");
	is_str(d, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	       "sha256 of abc");
	/* every length around the block edges, and one of several MiB, as libcrypto's EVP says */
	{
		size_t lens[] = { 0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 1000, (size_t)5 << 20 };
		char *big = malloc((size_t)5 << 20), hex[BOX_SHA256_HEX_LEN + 1];
		int same = 1;

		for (size_t i = 0; big && i < ((size_t)5 << 20); i++)
			big[i] = (char)(i * 31 + 7);
		for (size_t i = 0; big && i < sizeof(lens) / sizeof(lens[0]); i++)
			same &= box_digest_sha256(big, lens[i], d, &e) == 0 &&
				box_sha256_buf(big, lens[i], hex, &e) == 0 && !strcmp(d + 7, hex);
		ok(big && same, "sha256 of 12 lengths up to 5 MiB equals EVP's");
		free(big);
	}

	/* a recording, written and read back */
	box_cassette_init(&c, 1 << 20);
	in[0] = fld("/a.txt");
	out[0] = fld("hello");
	ok(box_cassette_add(&c, BOX_OP_FS_READ, in, 1, BOX_OP_OK, out, 1, &e) == 0, "add a read");
	in[0] = fld("time");
	in[1] = fld("1700000000");
	ok(box_cassette_add(&c, BOX_OP_CLOCK, in, 2, BOX_OP_OK, &in[1], 1, &e) == 0, "add a clock");
	in[0] = fld("/b");
	box_err_set(&e, BOX_E_TIMEOUT, "late");
	ok(box_cassette_abort(&c, BOX_OP_FS_READ, in, 1, &e, &e) == 0, "add an abort");
	head = box_json_parse(head_line, strlen(head_line), &e);
	ok(box_cassette_write(&c, head, path, &e) == 0, "write");
	cJSON_Delete(head);
	box_cassette_release(&c);

	ok(box_cassette_load(&c, path, &e) == 0, "load");
	is_int(c.ncalls, 3, "three calls");
	in[0] = fld("/a.txt");
	n = box_cassette_next(&c, BOX_OP_FS_READ, in, 1, &rop, out, &aborted, &e);
	ok(n == 1 && rop == BOX_OP_OK && out[0].n == 5 && !memcmp(out[0].p, "hello", 5),
	   "the read is answered from the recording");
	/* a clock reading is matched by its kind; the recorded value is the answer */
	in[0] = fld("time");
	in[1] = fld("1800000000");
	n = box_cassette_next(&c, BOX_OP_CLOCK, in, 2, &rop, out, &aborted, &e);
	ok(n == 1 && out[0].n == 10 && !memcmp(out[0].p, "1700000000", 10), "the recorded time");
	in[0] = fld("/c");
	n = box_cassette_next(&c, BOX_OP_FS_READ, in, 1, &rop, out, &aborted, &e);
	ok(n < 0 && e.code == BOX_E_REPLAY_DIVERGED && strstr(e.message, "call 3") &&
	   strstr(e.message, "/c") && strstr(e.message, "/b"), "another path diverges: %s",
	   e.message);
	box_cassette_release(&c);

	ok(box_cassette_load(&c, path, &e) == 0, "load again");
	c.next = 2;
	in[0] = fld("/b");
	n = box_cassette_next(&c, BOX_OP_FS_READ, in, 1, &rop, out, &aborted, &e);
	ok(n < 0 && aborted && e.code == BOX_E_TIMEOUT, "the recorded abort comes back");
	n = box_cassette_next(&c, BOX_OP_FS_READ, in, 1, &rop, out, &aborted, &e);
	ok(n < 0 && e.code == BOX_E_REPLAY_DIVERGED && strstr(e.message, "no more calls"),
	   "past the end diverges");
	box_cassette_release(&c);

	/* box_cassette_try: the VM's own answers; anything else is left, unconsumed, to
	 * box_cassette_next */
	ok(box_cassette_load(&c, path, &e) == 0, "load for try");
	in[0] = fld("/other");
	ok(box_cassette_try(&c, BOX_OP_FS_READ, in, 1, &rop, out, 2) < 0 && c.next == 0,
	   "try: another path is not consumed");
	in[0] = fld("/a.txt");
	ok(box_cassette_try(&c, BOX_OP_FS_EXISTS, in, 1, &rop, out, 2) < 0 && c.next == 0,
	   "try: another call is not consumed");
	ok(box_cassette_try(&c, BOX_OP_FS_READ, in, 1, &rop, out, 0) < 0 && c.next == 0,
	   "try: an answer of more fields than asked is not consumed");
	n = box_cassette_try(&c, BOX_OP_FS_READ, in, 1, &rop, out, 2);
	ok(n == 1 && rop == BOX_OP_OK && out[0].n == 5 && !memcmp(out[0].p, "hello", 5) &&
	   c.next == 1, "try: the recorded call is answered and consumed");
	in[0] = fld("time");
	in[1] = fld("1900000000");
	n = box_cassette_try(&c, BOX_OP_CLOCK, in, 2, &rop, out, 2);
	ok(n == 1 && out[0].n == 10 && !memcmp(out[0].p, "1700000000", 10) && c.next == 2,
	   "try: a clock reading by its kind");
	in[0] = fld("/b");
	ok(box_cassette_try(&c, BOX_OP_FS_READ, in, 1, &rop, out, 2) < 0 && c.next == 2,
	   "try: the call the run ended in is left to the broker");
	n = box_cassette_next(&c, BOX_OP_FS_READ, in, 1, &rop, out, &aborted, &e);
	ok(n < 0 && aborted && e.code == BOX_E_TIMEOUT, "... which gives its abort");
	ok(box_cassette_try(&c, BOX_OP_FS_READ, in, 1, &rop, out, 2) < 0, "try: past the end");
	box_cassette_release(&c);

	/* the cap of a recording */
	box_cassette_init(&c, 64);
	in[0] = fld("/a-long-path-that-fills-the-cassette-beyond-its-small-cap");
	ok(box_cassette_add(&c, BOX_OP_FS_READ, in, 1, BOX_OP_OK, in, 1, &e) < 0 &&
	   e.code == BOX_E_LIMIT && strcmp(e.limit, "cassette_bytes") == 0, "a cassette is capped");
	is_int(c.lines.len, 0, "nothing of the refused call stays");
	box_cassette_release(&c);

	/* hostile files */
	is_int(load_code(path, ""), BOX_E_INVALID, "empty");
	is_int(load_code(path, head_line), BOX_E_INVALID, "no end line");
	is_int(load_code(path, "{\"cassette\":1,\"request\":{},\"seed\":5}\n{\"end\":true,\"calls\":0}"),
	       BOX_E_INVALID, "a last line cut short");
	is_int(load_code(path, "{\"cassette\":1,\"request\":{},\"seed\":-1}\n{\"end\":true,\"calls\":0}\n"),
	       BOX_E_INVALID, "a negative seed");
	is_int(load_code(path, "{\"cassette\":1,\"request\":[],\"seed\":1}\n{\"end\":true,\"calls\":0}\n"),
	       BOX_E_INVALID, "a request that is not an object");
	is_int(load_code(path, "{\"cassette\":1,\"request\":{},\"seed\":1,\"tools\":[{\"name\":1}]}\n"
			 "{\"end\":true,\"calls\":0}\n"), BOX_E_INVALID, "a tool without a name");
	is_int(load_code(path, "{\"cassette\":1,\"request\":{},\"seed\":1}\n"
			 "{\"call\":\"fs.read\",\"args\":[1],\"reply\":\"ok\",\"answer\":[]}\n"
			 "{\"end\":true,\"calls\":1}\n"), BOX_E_INVALID, "an argument of the wrong type");
	is_int(load_code(path, "{\"cassette\":1,\"request\":{},\"seed\":1}\n"
			 "{\"call\":\"exec\",\"args\":[],\"reply\":\"ok\",\"answer\":[]}\n"
			 "{\"end\":true,\"calls\":1}\n"), BOX_E_INVALID, "an unknown call");
	is_int(load_code(path, "{\"cassette\":1,\"request\":{},\"seed\":1}\n"
			 "{\"end\":true,\"calls\":2}\n"), BOX_E_INVALID, "a count that lies");
	is_int(load_code(path, "{\"cassette\":1,\"request\":{},\"seed\":1}\n"
			 "{\"end\":true,\"calls\":0}\n{}\n"), BOX_E_INVALID, "a line after the end");
	is_int(load_code(path, "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
			 "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
			 "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
			 "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n"),
	       BOX_E_INVALID, "nesting past the cap");
	unlink(path);
	is_int(load_code(path, "") == BOX_E_INVALID, 1, "(rewritten)");
	unlink(path);
	{
		struct box_cassette c2;

		ok(box_cassette_load(&c2, path, &e) < 0 && e.code == BOX_E_NOT_FOUND, "no such file");
		box_cassette_release(&c2);
	}
	rmdir(dir);
	return done_testing();
}
