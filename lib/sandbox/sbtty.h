/* The caller's side of a terminal exec (box-sandbox shell, exec --tty): the caller's terminal
 * in raw mode and back on every way out but SIGKILL, and the relay between it and the master
 * of a pseudo-terminal whose other end the command holds. Provider-neutral: the local
 * provider's master comes from the sandbox's own devpts (lib/sandbox/local/nsexec.c). */
#ifndef BOX_SBTTY_H
#define BOX_SBTTY_H

#include <stdint.h>

/* The size of the terminal on fd, or 0 for both when fd is no terminal. */
void box_sbtty_size(int fd, unsigned short *rows, unsigned short *cols);

/*
 * Puts the terminal on fd in raw mode (no echo, no line editing, no signals from keys, no
 * output processing: the guest's own terminal does all that) and remembers its modes for
 * box_sbtty_restore. Until then, a fatal signal (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL)
 * restores them before the process dies. 0; 1 when fd is no terminal (nothing changed);
 * -1 with errno when tcsetattr failed.
 */
int box_sbtty_raw(int fd);

/* Puts back the modes box_sbtty_raw saved (async-signal-safe); nothing when none are. */
void box_sbtty_restore(void);

/* What ended a relay. */
enum box_sbtty_end {
	BOX_SBTTY_DONE,      /* `done` became readable (the command's end was reported) */
	BOX_SBTTY_HANGUP,    /* the master hung up: every holder of the terminal is gone */
	BOX_SBTTY_SIGNAL,    /* SIGTERM, SIGHUP, SIGINT or SIGQUIT reached this process */
	BOX_SBTTY_DEADLINE,  /* deadline_ms passed */
	BOX_SBTTY_ERROR,     /* poll failed */
};

/*
 * Relays until one of enum box_sbtty_end: bytes of in (the caller's terminal, or whatever
 * stdin is with --force-tty) to master, bytes of master to out, each in chunks of at most
 * 64 KiB, blocking on a slow writer rather than holding more. A SIGWINCH of this process
 * copies in's window size to master (the kernel then signals the terminal's foreground
 * process group). in reaching its end stops reading it and sends the terminal's EOF
 * character (^D) once. done (-1: none) is polled, never read. The master is drained of what
 * it holds before returning on DONE or HANGUP. The signals named above are blocked while it
 * runs and restored after; sig (may be NULL) gets the one that ended it.
 */
enum box_sbtty_end box_sbtty_relay(int in, int out, int master, int done, int64_t deadline_ms,
				   int *sig);

#endif
