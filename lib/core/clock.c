#include <time.h>

#include "clock.h"
#include "banned.h"

int64_t box_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t box_now_ms(void)
{
	return box_now_ns() / 1000000;
}
