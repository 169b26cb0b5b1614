/* The VM of box-run without the jail: each case runs box_vm_run in a forked child (as box-run
 * does, so that under valgrind or the sanitizers a memory error in the VM fails the child's
 * exit status), then checks the output in the shared buffer and the FINAL frame. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "ipc.h"
#include "vm.h"
#include "tap.h"
#include "banned.h"

#define OUT_CAP (4 << 20)

struct outcome {
	int status;            /* the child's wait status */
	char *meta;            /* the FINAL frame's first field: {"error"?, "lossy", "cpu_ms"} */
	char *result;          /* its second field, the return value as JSON, or NULL */
	struct box_vm_shm *shm;
};

static struct box_vm_shm *shm;

static void bail(const char *what)
{
	printf("Bail out! %s: %s\n", what, strerror(errno));
	exit(1);
}

static char *dup_n(const void *p, size_t n)
{
	char *s = malloc(n + 1);

	if (!s)
		bail("malloc");
	memcpy(s, p, n);
	s[n] = 0;
	return s;
}

/* Runs script with args (a JSON array text or NULL) in a child; fills *o. */
static void run(const char *script, const char *args, struct outcome *o)
{
	cJSON *a = args ? cJSON_Parse(args) : NULL;
	struct box_ipc_in in = BOX_IPC_IN_INIT;
	struct box_buf payload = BOX_BUF_INIT(64 << 20);
	struct box_err err;
	uint8_t op;
	int sv[2];
	pid_t pid;

	memset(o, 0, sizeof(*o));
	memset(shm, 0, sizeof(*shm));
	shm->out_cap = OUT_CAP;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		bail("socketpair");
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		bail("fork");
	if (pid == 0) {
		struct box_vm_config c = {
			.sock = sv[1], .shm = shm, .script = script, .script_len = strlen(script),
			.chunkname = "=script", .args = a, .memory_bytes = 64 << 20, .cpu_ms = 60000,
			.max_result_bytes = 1 << 20,
		};

		close(sv[0]);
		box_vm_prepare();
		box_vm_run(&c);
		_exit(0);
	}
	close(sv[1]);
	box_err_init(&err);
	while (box_ipc_recv(sv[0], &in, &op, &payload, -1, &err) == 1) {
		struct box_ipc_field f[2];
		int n;

		if (op != BOX_OP_FINAL)
			continue;
		n = box_ipc_split(payload.data ? payload.data : "", payload.len, f, 2);
		if (n >= 1)
			o->meta = dup_n(f[0].p, f[0].n);
		if (n >= 2)
			o->result = dup_n(f[1].p, f[1].n);
		break;
	}
	close(sv[0]);
	while (waitpid(pid, &o->status, 0) < 0 && errno == EINTR)
		;
	box_buf_release(&payload);
	cJSON_Delete(a);
	o->shm = shm;
}

static void outcome_release(struct outcome *o)
{
	free(o->meta);
	free(o->result);
}

static int clean_exit(const struct outcome *o)
{
	return WIFEXITED(o->status) && WEXITSTATUS(o->status) == 0;
}

static int out_is(const struct outcome *o, const char *want, size_t n)
{
	return o->shm->out_len == n && memcmp(o->shm->out, want, n) == 0;
}

static void test_print_sizes(void)
{
	static const size_t sizes[] = { 1, 1000, 1024, 3000, 8000, 8192, 65536, 1 << 20 };
	char script[128];

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct outcome o;
		char *want = malloc(sizes[i] + 1);

		if (!want)
			bail("malloc");
		memset(want, 'x', sizes[i]);
		want[sizes[i]] = '\n';
		snprintf(script, sizeof(script), "print(string.rep('x', %zu))", sizes[i]);
		run(script, NULL, &o);
		ok(clean_exit(&o), "print of %zu bytes: the VM ends cleanly", sizes[i]);
		ok(out_is(&o, want, sizes[i] + 1), "  the output is the string and a newline");
		is_int(o.shm->output_bytes, (long long)sizes[i] + 1, "  output_bytes");
		is_int(o.shm->total_lines, 1, "  one line");
		ok(o.meta && strncmp(o.meta, "{\"lossy\":false,", 15) == 0, "  no error: %s", o.meta ? o.meta : "no FINAL");
		free(want);
		outcome_release(&o);
	}
}

static void test_print_many(void)
{
	struct outcome o;
	struct box_buf want = BOX_BUF_INIT(1 << 20);
	struct box_err err;

	run("local t = {}\n"
	    "for i = 1, 200 do t[i] = (i % 2 == 0) and ('y'):rep(i * 37) or i end\n"
	    "print(table.unpack(t))\n"
	    "print(('a'):rep(600), ('b'):rep(600), nil, 1.5, {}, setmetatable({}, {__tostring = "
	    "function() return ('w'):rep(3000) end}))", NULL, &o);
	for (int i = 1; i <= 200; i++) {
		if (i > 1)
			box_buf_puts(&want, "\t", &err);
		if (i % 2 == 0)
			for (int k = 0; k < i * 37; k++)
				box_buf_puts(&want, "y", &err);
		else
			box_buf_printf(&want, &err, "%d", i);
	}
	box_buf_puts(&want, "\n", &err);
	for (int k = 0; k < 600; k++)
		box_buf_puts(&want, "a", &err);
	box_buf_puts(&want, "\t", &err);
	for (int k = 0; k < 600; k++)
		box_buf_puts(&want, "b", &err);
	box_buf_puts(&want, "\tnil\t1.5\ttable: 0x1\t", &err);
	for (int k = 0; k < 3000; k++)
		box_buf_puts(&want, "w", &err);
	box_buf_puts(&want, "\n", &err);
	ok(clean_exit(&o), "print of 200 mixed arguments: the VM ends cleanly");
	ok(want.data && out_is(&o, want.data, want.len), "  every argument whole, in order");
	box_buf_release(&want);
	outcome_release(&o);
}

static void test_values(void)
{
	static const struct {
		const char *script, *result, *what;
	} cases[] = {
		{ "local t = {} return {tostring(t), tostring(print), tostring(t), tostring({})}",
		  "[\"table: 0x1\",\"function: 0x2\",\"table: 0x1\",\"table: 0x3\"]",
		  "tostring numbers objects as it first shows them" },
		{ "return {json.encode(json.decode('{\"a\":{},\"b\":[]}')), json.encode(json.object()),"
		  " json.encode(json.array()), json.encode({})}",
		  "[\"{\\\"a\\\":{},\\\"b\\\":[]}\",\"{}\",\"[]\",\"[]\"]",
		  "json: {} stays {}; json.object and json.array mark empty tables" },
		{ "return {pcall(function() return string.format('%d', 'x') end)}",
		  "[false,\"script:1: bad argument #2 to 'format' (number expected, got string)\"]",
		  "string.format errors keep the line and the name" },
		{ "return select('#', ...) + #arg", NULL, "100000 arguments" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct outcome o;
		char *args = NULL;

		if (!cases[i].result) {
			struct box_buf b = BOX_BUF_INIT(1 << 20);
			struct box_err err;

			box_buf_puts(&b, "[", &err);
			for (int k = 0; k < 100000; k++)
				box_buf_printf(&b, &err, "%s%d", k ? "," : "", k);
			box_buf_puts(&b, "]", &err);
			args = box_buf_detach(&b, NULL);
		}
		run(cases[i].script, args, &o);
		ok(clean_exit(&o), "%s: the VM ends cleanly", cases[i].what);
		is_str(o.result, cases[i].result ? cases[i].result : "200000", "  %s", cases[i].what);
		free(args);
		outcome_release(&o);
	}
}

int main(void)
{
	shm = mmap(NULL, box_vm_shm_size(OUT_CAP), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED)
		bail("mmap");
	test_print_sizes();
	test_print_many();
	test_values();
	munmap(shm, box_vm_shm_size(OUT_CAP));
	return done_testing();
}
