/* bench/fswalk-usage DIR N: measures the tree under DIR N times with box_fswalk_usage_add (the
 * disk limit's look at a session) and prints the bytes, the entries and the median time of one
 * walk in ms. Built by bench/fswalk.sh against the build's lib/libbox.a. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "clock.h"
#include "fswalk.h"

static int cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct box_fswalk_usage u;
	struct box_err err;
	int64_t *t;
	long i, n;
	int fd;

	if (argc != 3 || (n = strtol(argv[2], NULL, 10)) < 1 || n > 100000)
		return 2;
	fd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(t = calloc((size_t)n, sizeof(*t))))
		return 2;
	box_err_init(&err);
	for (i = 0; i < n; i++) {
		int64_t start = box_now_ns();

		box_fswalk_usage_init(&u, 0, 0);
		if (box_fswalk_usage_add(&u, fd, &err) < 0) {
			fprintf(stderr, "fswalk-usage: %s\n", err.message);
			return 1;
		}
		t[i] = box_now_ns() - start;
		if (i + 1 < n)
			box_fswalk_usage_release(&u);
	}
	qsort(t, (size_t)n, sizeof(*t), cmp);
	printf("bytes %lld entries %llu median_ms %.2f min_ms %.2f\n", (long long)u.bytes,
	       (unsigned long long)u.entries, (double)t[n / 2] / 1e6, (double)t[0] / 1e6);
	box_fswalk_usage_release(&u);
	free(t);
	close(fd);
	return 0;
}
