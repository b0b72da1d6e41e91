/* pf/clock.h — clock reads: the monotonic clock in milliseconds for deadlines and intervals,
 * and any clock (monotonic, realtime, a thread's CPU time) in nanoseconds. Header only. */
#ifndef PF_CLOCK_H
#define PF_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t pf_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline uint64_t pf_clock_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
