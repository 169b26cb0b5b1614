/* The Lua 5.4 VM of box-run, as it runs inside the confined child process. */
#ifndef BOX_VM_H
#define BOX_VM_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "ipc.h"
#include "err.h"

/* Frames between the VM child and the broker (lib/core/ipc.h). Host calls carry their arguments as
 * fields; the broker answers each with BOX_OP_OK (result fields) or BOX_OP_ERR (one field: an
 * error object made by box_err_to_json). */
enum box_op {
	BOX_OP_OK = 0,
	BOX_OP_ERR = 1,
	BOX_OP_FS_READ = 10,    /* path → bytes */
	BOX_OP_FS_WRITE,        /* path, data */
	BOX_OP_FS_APPEND,       /* path, data */
	BOX_OP_FS_EXISTS,       /* path → "1" | "0" */
	BOX_OP_FS_STAT,         /* path → JSON object, or no field when absent */
	BOX_OP_FS_LIST,         /* path → JSON array */
	BOX_OP_FS_REMOVE,       /* path, "1" recursive | "0" → "1" | "0" */
	BOX_OP_FS_MKDIR,        /* path */
	BOX_OP_FS_WALK,         /* path → JSON array of file paths */
	BOX_OP_HTTP,            /* JSON request of box-http → JSON response */
	BOX_OP_TOOL,            /* tool name, JSON input object → JSON output object */
	BOX_OP_CLOCK,           /* "time" | "clock", the VM's reading → the reading to use
				 * (only with clock_host: a recorded or replayed run) */
	BOX_OP_REQUIRE,         /* library name → its Lua source, "NAME@VERSION" (has_require) */
	BOX_OP_PRINT = 40,      /* text printed (only with events) */
	BOX_OP_FINAL,           /* JSON: {"result"?, "error"?, "lossy"} */
	BOX_OP_REPLAYED,        /* a replay: the count (decimal) of the calls the VM answered
				 * itself since the last one (box_vm_config.local_call); sent
				 * before any call the broker answers, and before FINAL */
};

/* Written by the child, read by the broker after the child is gone: the numbers survive a kill. */
struct box_vm_shm {
	int64_t mem_peak;
	int64_t instructions;
	int64_t output_bytes;  /* bytes print produced, kept or dropped */
	int64_t total_lines;
	int32_t truncated;
	int32_t counted;       /* 1 when instructions were counted */
	uint32_t out_len;      /* bytes of out[] in use (the broker clamps it to out_cap) */
	uint32_t out_cap;
	char out[];
};

/* A tool as the VM sees it: its name, and why code mode does not offer it (NULL when it
 * does). The broker decides again on every call; this only shapes the tools table. */
struct box_vm_tool {
	const char *name;
	const char *refused;   /* "destructive", "requires approval", "executor" or NULL */
};

/* Bytes to map for a shm with room for max_output bytes of output. */
size_t box_vm_shm_size(int64_t max_output);

struct box_vm_config {
	int sock;                    /* the stream socket to the broker */
	struct box_vm_shm *shm;
	const char *script;
	size_t script_len;
	const char *chunkname;       /* "=script" or "@file.lua" */
	const cJSON *args;           /* array of JSON values, or NULL */
	int64_t memory_bytes;
	int64_t cpu_ms;
	int64_t max_instructions;    /* 0: not counted */
	int64_t max_result_bytes;
	int has_fs, has_http, events;
	const struct box_vm_tool *tools;  /* has_tools: the tools table, with ntools entries */
	size_t ntools;
	int has_tools;
	int has_require;             /* require(name) asks the broker for a locked Lua library */
	int64_t seed;                /* math.random is seeded with it (math.randomseed(seed)) */
	int clock_host;              /* os.time, os.clock and os.date ask the broker (BOX_OP_CLOCK) */
	/* A replay answered in this process, without a round trip (NULL: the broker answers
	 * every call): the answer's field count (at most maxout) with *rop, or -1 when the
	 * broker must answer; remote_done is told when the broker has answered one. */
	int (*local_call)(void *ctx, uint8_t op, const struct box_ipc_field *f, int n,
			  uint8_t *rop, struct box_ipc_field *out, int maxout);
	void (*remote_done)(void *ctx);
	void *local_ctx;
};

/* Installs the VM's signal handler; called in the child before box_jail_vm(), after which
 * rt_sigaction is no longer allowed. */
void box_vm_prepare(void);

/*
 * Builds the sandboxed Lua state, runs the script and sends the FINAL frame; returns when done
 * (the caller then _exits). Runs only in the VM child, after box_jail_vm().
 */
void box_vm_run(const struct box_vm_config *c);

#endif
