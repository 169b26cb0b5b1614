/* libFuzzer target: one connection to the tool socket's server (lib/tools/toolsrv.c) carrying the
 * input as the guest's request, answered from a set of tools whose commands do not exist (a
 * call that passes the input schema fails to start, nothing runs), the reply read back. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "err.h"
#include "ipc.h"
#include "tools.h"
#include "toolsrv.h"

static struct box_toolset *set;
static char dir[4096], sock[4200];
static int lfd = -1;

static void cleanup(void)
{
	unlink(sock);
	rmdir(dir);
}

static const char manifest[] =
	"{\"tools\": ["
	"{\"name\": \"echo\", \"description\": \"d\", \"command\": [\"box-fuzz-no-such-tool\"],"
	" \"input_schema\": {\"type\": \"object\", \"required\": [\"items\"],"
	"  \"properties\": {\"items\": {\"type\": \"array\", \"maxItems\": 4,"
	"   \"items\": {\"type\": \"integer\", \"minimum\": 0}},"
	"   \"name\": {\"type\": \"string\", \"pattern\": \"^[a-z]+$\", \"maxLength\": 8},"
	"   \"mode\": {\"enum\": [\"a\", \"b\", null]}},"
	"  \"additionalProperties\": false}},"
	"{\"name\": \"deploy\", \"description\": \"d\", \"requires_approval\": true,"
	" \"command\": [\"box-fuzz-no-such-tool\"], \"input_schema\": {\"type\": \"object\","
	"  \"properties\": {\"x\": {\"oneOf\": [{\"type\": \"string\"}, {\"type\": \"number\"}]}}}}"
	"]}";

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");
	char path[4200];
	struct box_err err;
	FILE *f;

	(void)argc;
	(void)argv;
	box_err_init(&err);
	snprintf(dir, sizeof(dir), "%s/box-fuzz-toolsrv.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
	if (!mkdtemp(dir))
		abort();
	snprintf(path, sizeof(path), "%s/tools.json", dir);
	f = fopen(path, "w");
	if (!f || fputs(manifest, f) < 0 || fclose(f) != 0)
		abort();
	set = box_tools_load(path, &err);
	snprintf(sock, sizeof(sock), "%s/t.sock", dir);
	lfd = box_toolsrv_listen(sock, &err);
	if (!set || lfd < 0)
		abort();
	unlink(path);
	atexit(cleanup);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct box_err err;
	char reply[65536];
	size_t off = 0;
	int fd;

	box_err_init(&err);
	fd = box_ipc_connect(sock, &err);
	if (fd < 0)
		abort();
	/* the request fits the socket's buffer (libFuzzer's -max_len is smaller) */
	while (off < size) {
		ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);

		if (n <= 0)
			break;
		off += (size_t)n;
	}
	shutdown(fd, SHUT_WR);
	box_toolsrv_serve_one(lfd, set, NULL);
	while (read(fd, reply, sizeof(reply)) > 0)
		;
	close(fd);
	return 0;
}
