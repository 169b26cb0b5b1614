/* The process roles of the local provider, private to lib/ns*.c: the holder (lib/sandbox/local/nsholder.c,
 * PID 1 of the namespaces), the keeper (lib/sandbox/local/nskeeper.c, its parent on the host) and the exec
 * chain (lib/sandbox/local/nsexec.c: the first process, the supervisor, the command). lib/sandbox/local/nsbox.c starts,
 * watches and stops an instance; the roles' entries are the *_main functions below. */
#ifndef BOX_NSROLES_H
#define BOX_NSROLES_H

#include <sched.h>
#include <stdint.h>
#include <sys/types.h>
#include "cgroup.h"
#include "nsbox.h"

#define NS_FDS 7   /* user mnt pid net ipc uts cgroup */
#define NS_FLAGS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | \
		  CLONE_NEWUTS)
#define START_TIMEOUT_MS 10000
#define REPORT_MAX 512
#define SPAWN_FDS 5

/* Reports a failure of a role's set-up on the report pipe ("E<what> <arg>: strerror") and
 * exits. */
void box_nsbox_die(int rep, const char *what, const char *arg) __attribute__((noreturn));

/* The holder (in the child of clone(NS_FLAGS)): waits for go, builds the root, sends its
 * namespaces on nssock, reports "R" on rep and reaps until killed. */
void box_nsbox_holder_main(const struct box_nsbox_config *c, int rep, int go, int nssock)
	__attribute__((noreturn));

/* The keeper (in a child of box_nsbox_start): reports "P<holder pid>" on rep, then serves
 * until the holder ends. */
void box_nsbox_keeper_main(const struct box_nsbox_config *c, enum box_cg_mode cg, int rep)
	__attribute__((noreturn));

/* A pidfd of the instance's holder, checked to be the process the record names; -1. */
int box_nsbox_holder_pidfd(const struct box_nsbox_inst *i);

/* The pipes of one exec: [0] the host's end, [1] the chain's (in: [0] the chain's). */
struct box_nsbox_exec_fds {
	int out[2], errp[2], in[2], status[2], ctl[2];
};

/* What the supervisor tells the host at the end, on the status pipe. */
struct box_nsbox_exec_status {
	int32_t stage;      /* 0: the command ended; >0: set-up failed at this stage */
	int32_t err_no;
	int32_t exited, code, sig;
	int32_t timed_out, killed;  /* killed: the host asked (cpu, disk) */
};

enum { BOX_NSBOX_ST_DONE, BOX_NSBOX_ST_CGROUP, BOX_NSBOX_ST_SETNS, BOX_NSBOX_ST_FORK,
       BOX_NSBOX_ST_UNSHARE, BOX_NSBOX_ST_SUPERVISE, BOX_NSBOX_ST_TTY };

/* The stage of the record a background command's supervisor sends when it has forked the
 * command (code: its pid in the guest), before the final one. */
#define BOX_NSBOX_ST_STARTED (-1)

/* Sends sig to every descendant of root (found by their parents in this process's /proc),
 * never to root itself: the end of one exec's own process tree (lib/sandbox/local/nsjobs.c). */
void box_nsbox_kill_tree(pid_t root, int sig);

/* The keeper's look at the session's schedules: starts the runs that are due, each in a
 * child of the keeper. The milliseconds until it wants to look again. */
int box_nsbox_keeper_sched(const struct box_nsbox_config *c);

void box_nsbox_send_status(int fd, const struct box_nsbox_exec_status *s);
void box_nsbox_fail_stage(int fd, int stage) __attribute__((noreturn));

/* The first process of an exec: joins the groups (join_cg) and the holder's namespaces (its
 * pidfd, else the keeper's nsfds), then runs the supervisor in a child. */
void box_nsbox_c1_main(int pidfd, const int *nsfds, const struct box_nsbox_config *c,
		       const struct box_sbexec *x, const struct box_nsbox_exec_fds *f,
		       int64_t deadline, int nocg, enum box_cg_mode join_cg)
	__attribute__((noreturn));

/* Joins the holder's namespaces through its pidfd, else (an ordinary user) the fds the
 * holder sent; closes both. 0, or -1 with errno. */
int box_nsbox_join(int pidfd, const int *nsfds);

/* After joining the sandbox's user namespace (or creating it, once the keeper wrote its
 * maps): drops the supplementary groups (where the namespace allows it: not an ordinary
 * user's) and becomes the guest's uid and gid 0, that is the host ids of the map rather than
 * the creator's. 0, or -1 with errno. */
int box_nsbox_become_guest_root(void);

/* Sets what the guest's ps shows of this process: its comm and its whole command line
 * (/proc/PID/cmdline reads name and a NUL), written over the argument area it inherited,
 * which held the host's command line. */
void box_nsbox_set_title(const char *name);

/* The supervisor, for a process already in the sandbox's namespaces (pid ns as well). */
void box_nsbox_supervisor_main(const struct box_nsbox_config *c, const struct box_sbexec *x,
			       const struct box_nsbox_exec_fds *f, int64_t deadline, int nocg)
	__attribute__((noreturn));

/* Asks the keeper (or its zygote) to start the exec chain with the chain's ends of f, by the
 * protocol at the top of lib/sandbox/local/nskeeper.c: 0 when it started it (*ran 1); -1 with err
 * otherwise: conflict (retryable) when the keeper did not take it in time, io_error when it
 * dropped it, both with *ran 0 (the command did not run and never will), or io_error with
 * *ran 1 when the keeper never said whether it started. */
int box_nsbox_spawn_via_keeper(const struct box_nsbox_config *c, const struct box_sbexec *x,
			       int64_t deadline, const struct box_nsbox_exec_fds *f, int *ran,
			       struct box_err *err);

/* A terminal exec (lib/sandbox/local/nstty.c). In the supervisor: opens a pseudo-terminal
 * of the guest's devpts sized as x says, sends its master on the status socket and gives the
 * slave in *slave; 0, or -1 with errno. */
int box_nsbox_tty_open(const struct box_sbexec *x, int status_fd, int *slave);

/* In the command, after setsid() with the slave as fd 0: makes it the controlling terminal.
 * 0, or -1 with errno. */
int box_nsbox_tty_attach(void);

/* On the host: takes the master from the status socket (or the status of a chain that failed
 * first: *have_status), checks it is the guest's, relays it to the caller's terminal in raw
 * mode until the command's end, and restores the terminal. A signal that ends the relay ends
 * the command (ctl_fd). 0, or -1 with err (the command was then ended). */
int box_nsbox_tty_relay(int status_fd, int ctl_fd, int64_t deadline,
			struct box_nsbox_exec_status *st, int *have_status, struct box_err *err);

#endif
