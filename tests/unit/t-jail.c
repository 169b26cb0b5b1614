/* The VM child's confinement: every forbidden system call kills the process with SIGSYS. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "jail.h"
#include "tap.h"

enum what { OPENAT, OPEN, SOCKET, CONNECT, EXECVE, FORK, CLONE, PTRACE, MOUNT, MMAP_EXEC,
	    MPROTECT_EXEC, ALLOWED };

static int try(enum what w)
{
	struct box_jail_limits l = { 1000, 64 << 20 };
	struct box_err e;
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		if (box_jail_vm(&l, &e) < 0)
			_exit(100);
		switch (w) {
		case OPENAT: syscall(SYS_openat, AT_FDCWD, "/etc/passwd", O_RDONLY); break;
		case OPEN: syscall(SYS_open, "/etc/passwd", O_RDONLY); break;
		case SOCKET: syscall(SYS_socket, AF_INET, SOCK_STREAM, 0); break;
		case CONNECT: syscall(SYS_connect, 0, NULL, 0); break;
		case EXECVE: syscall(SYS_execve, "/bin/true", NULL, NULL); break;
		case FORK: syscall(SYS_fork); break;
		case CLONE: syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0); break;
		case PTRACE: syscall(SYS_ptrace, 0, 0, 0, 0); break;
		case MOUNT: syscall(SYS_mount, "none", "/mnt", "tmpfs", 0, NULL); break;
		case MMAP_EXEC: syscall(SYS_mmap, NULL, 4096, PROT_READ | PROT_EXEC,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); break;
		case MPROTECT_EXEC: {
			void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			syscall(SYS_mprotect, p, 4096, PROT_READ | PROT_EXEC);
			break;
		}
		case ALLOWED: {
			char *p = malloc(1 << 20);
			p[0] = 1;
			free(p);
			if (write(2, "", 0) < 0)
				_exit(3);
			break;
		}
		}
		syscall(SYS_exit_group, 0);
	}
	if (waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFSIGNALED(st) ? WTERMSIG(st) : 1000 + WEXITSTATUS(st);
}

int main(void)
{
	static const char *names[] = { "openat", "open", "socket", "connect", "execve", "fork",
				       "clone", "ptrace", "mount", "mmap PROT_EXEC",
				       "mprotect PROT_EXEC" };

	if (getenv("BOX_UNDER_VALGRIND")) {
		/* valgrind makes its own system calls, which the filter rightly kills */
		tap_skip("seccomp under valgrind");
		return done_testing();
	}
	for (int w = OPENAT; w < ALLOWED; w++)
		is_int(try((enum what)w), SIGSYS, "%s kills the jailed process with SIGSYS", names[w]);
	is_int(try(ALLOWED), 1000, "memory and writes to an open fd are allowed");
	return done_testing();
}
