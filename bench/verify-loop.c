/* bench/verify-loop STORE DIGEST N: N store checks (box_verify_entry) of one entry, as box-run
 * and the sandbox's tool socket do before each call; exits 1 if one fails. Built by
 * bench/verify.sh against the build's lib/libbox.a. */
#include <stdio.h>
#include <stdlib.h>

#include "verify.h"

int main(int argc, char **argv)
{
	struct box_verify_pin *pin;
	struct box_err err;
	long i, n;

	if (argc != 4)
		return 2;
	n = strtol(argv[3], NULL, 10);
	box_err_init(&err);
	if (!(pin = box_verify_pin_new(argv[1], argv[2], "", "bench", &err)))
		return 2;
	for (i = 0; i < n; i++)
		if (box_verify_entry(pin, &err) < 0) {
			fprintf(stderr, "verify-loop: %s\n", err.message);
			return 1;
		}
	box_verify_pin_free(pin);
	return 0;
}
