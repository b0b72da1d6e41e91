/* offcpu_workload.c — the off-CPU test's workload (test_offcpu.c builds it with -O0
 * -fno-omit-frame-pointer -g -pthread): for argv[1] seconds, per loop ~100 ms of computing in
 * compute() and ~300 ms blocked in wait_lock() (pthread_cond_timedwait on a condition nobody
 * signals). Each wait is written to stdout as "wait <end unix ns> <duration ns>", measured
 * around the call, so the test can sum exactly the waits a window holds. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static volatile uint64_t sink;

static uint64_t ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void compute(void)
{
	uint64_t end = ns(CLOCK_MONOTONIC) + 100000000ull;
	while (ns(CLOCK_MONOTONIC) < end)
		for (int i = 0; i < 10000; i++)
			sink += (uint64_t)i * i;
}

__attribute__((noinline)) static void wait_lock(void)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_nsec += 300000000;
	if (dl.tv_nsec >= 1000000000) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000;
	}
	uint64_t t0 = ns(CLOCK_REALTIME);
	pthread_mutex_lock(&lock);
	while (pthread_cond_timedwait(&cond, &lock, &dl) == 0)
		;
	pthread_mutex_unlock(&lock);
	uint64_t t1 = ns(CLOCK_REALTIME);
	printf("wait %llu %llu\n", (unsigned long long)t1, (unsigned long long)(t1 - t0));
	fflush(stdout);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? strtod(argv[1], NULL) : 3;
	uint64_t end = ns(CLOCK_MONOTONIC) + (uint64_t)(seconds * 1e9);
	while (ns(CLOCK_MONOTONIC) < end) {
		compute();
		wait_lock();
	}
	return 0;
}
