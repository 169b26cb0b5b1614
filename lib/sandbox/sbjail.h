/* Last-step hardening of a command box-sandbox runs in a sandbox, right before its execve. */
#ifndef BOX_SBJAIL_H
#define BOX_SBJAIL_H

#include <stdint.h>
#include "err.h"

/*
 * Resource limits for the command (each <= 0 leaves that limit as it is; soft and hard limits
 * are both set to the value, never above the current hard limit, which a process without
 * CAP_SYS_RESOURCE in the initial namespace cannot raise), and whether to keep capabilities.
 */
struct box_sbjail {
	int64_t as_bytes;     /* RLIMIT_AS */
	int64_t nproc;        /* RLIMIT_NPROC (counted per uid) */
	int64_t cpu_seconds;  /* RLIMIT_CPU */
	int64_t fsize_bytes;  /* RLIMIT_FSIZE */
	int64_t nofile;       /* RLIMIT_NOFILE */
	int keep_caps;        /* nonzero: skip box_sbjail_drop_caps (tests, callers that drop later) */
};

/*
 * Called in the single-threaded child right before execve, after it has joined the sandbox's
 * namespaces (typically as uid 0 of the sandbox's user namespace). In order: sets the rlimits
 * of *j; closes every fd above 2 (close_range, or /proc/self/fd where that is missing); drops
 * every capability (box_sbjail_drop_caps) unless j->keep_caps; sets no_new_privs; loads the
 * seccomp deny-list (box_sbjail_load_filter). The process stays dumpable, so the command can
 * read its own /proc/self. On failure the process is partly hardened and must not exec:
 * returns -1 with err (io_error or internal with the errno text; unsupported when the kernel
 * lacks seccomp filters). Returns 0 on success.
 */
int box_sbjail_enter(const struct box_sbjail *j, struct box_err *err);

/*
 * Drops every capability for good: empties the bounding set (0 .. /proc/sys/kernel/cap_last_cap,
 * numbers the kernel does not know are skipped) and the ambient set, locks the securebits
 * NOROOT, NO_SETUID_FIXUP, KEEP_CAPS (off) and NO_CAP_AMBIENT_RAISE so that no later execve, of
 * a set-uid-root binary or by uid 0, regains capabilities, then zeroes the effective,
 * permitted and inheritable sets. A process without CAP_SETPCAP in its permitted set (an
 * ordinary user) cannot touch the bounding set or the securebits; they are then left alone,
 * since with empty sets and no_new_privs (which the caller sets, as box_sbjail_enter does) an
 * execve cannot raise anything. Returns 0, or -1 with err (io_error with the errno text).
 */
int box_sbjail_drop_caps(struct box_err *err);

/*
 * Loads the deny-list compiled at build time by lib/sandbox/sbfilter-gen.c (default: allow): bpf,
 * perf_event_open, keyrings, userfaultfd, kexec, modules, the mount API, setns, unshare,
 * clone with any CLONE_NEW* flag, io_uring, open_by_handle_at, ptrace, process_vm_*, clock
 * setting, reboot, swap, acct, syslog and other host administration fail with EPERM; clone3
 * fails with ENOSYS (libc falls back to clone); personality only accepts 0 and 0xffffffff;
 * ioctl TIOCSTI and TIOCLINUX fail with EPERM; socket and socketpair accept only AF_UNIX,
 * AF_INET, AF_INET6 and AF_NETLINK (every other family, and AF_INET with SOCK_PACKET, is
 * EAFNOSUPPORT; a netlink protocol other than NETLINK_ROUTE EPROTONOSUPPORT); chmod, fchmod,
 * fchmodat, creat, open and openat (creating), mknod and mknodat with S_ISUID or S_ISGID in
 * the mode fail with EPERM, openat2 and fchmodat2 with ENOSYS (libc falls back); arguments
 * are compared on their low 32 bits, as the kernel reads them; a system call of any other
 * architecture (i386 int 0x80 and its socketcall, x32) kills the process. The caller must have set no_new_privs or hold
 * CAP_SYS_ADMIN. Returns 0, or -1 with err (unsupported when seccomp filters are missing).
 */
int box_sbjail_load_filter(struct box_err *err);

#endif
