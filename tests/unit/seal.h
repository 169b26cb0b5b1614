/* For unit tests that make store entries by hand: seal one as box-pull and its first verified
 * use would, so that box_verify_entry vouches for it without the box-verify helper (which
 * make check-valgrind does not point to). */
#ifndef BOX_TEST_SEAL_H
#define BOX_TEST_SEAL_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "atomic.h"
#include "boxarchive.h"
#include "rehash.h"

/* Records the tree digest of ROOT/sha256/<hex> (root: a store) in its note, then, past the
 * clock tick of its files, writes its stat cache. Bails out on failure. */
__attribute__((unused)) static void seal_entry(const char *root, const char *hex)
{
	char path[4200], tree[BOX_ARCHIVE_DIGEST_LEN + 1], name[80];
	struct timespec tick = { 0, 30 * 1000 * 1000 };
	struct box_err err;
	int shafd, fd;

	box_err_init(&err);
	snprintf(path, sizeof(path), "%s/sha256", root);
	snprintf(name, sizeof(name), "%.64s.tree", hex);
	shafd = open(path, O_RDONLY | O_DIRECTORY);
	fd = shafd >= 0 ? openat(shafd, hex, O_RDONLY | O_DIRECTORY) : -1;
	if (fd < 0 || box_archive_tree_digest(fd, tree, &err) < 0 ||
	    box_atomic_write(shafd, name, tree, strlen(tree), 0644, &err) < 0) {
		printf("Bail out! cannot seal %s: %s\n", hex, err.message);
		exit(1);
	}
	nanosleep(&tick, NULL);
	if (box_rehash_entry(shafd, hex, tree, NULL, &err) < 0) {
		printf("Bail out! cannot seal %s: %s\n", hex, err.message);
		exit(1);
	}
	nanosleep(&tick, NULL);
	close(fd);
	close(shafd);
}

#endif
