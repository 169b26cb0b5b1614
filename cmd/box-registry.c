/* box-registry: the remote registry helper of box-pack, box-pull and box-lock, installed in
 * $(libexecdir)/box. It serves lib/net/regserve.h's protocol on its standard input, a socket the
 * caller made; it is the only binary of the three jobs that loads libcurl. */
#include <stdio.h>
#include <string.h>

#include "regserve.h"
#include "banned.h"
#include "proc.h"

int main(int argc, char **argv)
{
	struct box_err err;

	if (box_proc_std_fds() < 0)
		return 8;
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		puts("box-registry (box) " PACKAGE_VERSION);
		return fflush(stdout) == 0 ? 0 : 8;
	}
	if (argc != 1) {
		fprintf(stderr, "usage: box-registry (started by box-pack, box-pull and box-lock)\n");
		return 2;
	}
	box_err_init(&err);
	if (box_regserve(0, &err) < 0) {
		fprintf(stderr, "box-registry: %s\n", err.message);
		return 8;
	}
	return 0;
}
