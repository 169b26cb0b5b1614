/* Confinement of box-run's VM child: rlimits, no_new_privs and a seccomp allow-list. */
#ifndef BOX_JAIL_H
#define BOX_JAIL_H

#include <stdint.h>
#include "err.h"

struct box_jail_limits {
	int64_t cpu_ms;        /* RLIMIT_CPU backstop: SIGXCPU past ceil(cpu_ms/1000)+1 s */
	int64_t memory_bytes;  /* RLIMIT_AS backstop: memory_bytes + 256 MiB (off under ASan) */
};

/*
 * Called in the VM child before any script is loaded, after every file it needs is open:
 * sets rlimits (no core files, no file writes, few fds), makes the process non-dumpable, sets
 * no_new_privs and loads a seccomp filter that kills the process on any system call outside
 * the few the VM needs (read/write on its socket, memory management, clocks, signal return,
 * exit). open/openat, socket, connect, execve, fork/clone, ptrace and mount are not among them,
 * and mmap/mprotect may not make memory executable. The filter is compiled by libseccomp at
 * build time (lib/run/jail-gen.c). Signal handlers must be installed before: rt_sigaction is not
 * allowed afterwards. Returns 0, or -1 with err.
 */
int box_jail_vm(const struct box_jail_limits *l, struct box_err *err);

#endif
