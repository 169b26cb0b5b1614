/* The one monotonic clock of box: deadlines, timeouts and durations. */
#ifndef BOX_CLOCK_H
#define BOX_CLOCK_H

#include <stdint.h>

/* Milliseconds of CLOCK_MONOTONIC. */
int64_t box_now_ms(void);

/* Nanoseconds of CLOCK_MONOTONIC. */
int64_t box_now_ns(void);

#endif
