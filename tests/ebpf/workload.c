/* workload.c — the known busy program of the eBPF tests, compiled by the test itself with
 * -O0 -fno-omit-frame-pointer -g. hot_a does twice the work of hot_b; each has its own caller,
 * so a profile must show hot_a <- caller_a at 2/3 and hot_b <- caller_b at 1/3 of the samples.
 *
 *   workload SECONDS        (prints "ready" once running, exits 0 after SECONDS, printing
 *                            "iterations N" first: bench/agent_overhead.sh's throughput) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define UNIT 400000UL

static volatile unsigned long sink;

__attribute__((noinline)) void hot_a(void)
{
	for (unsigned long i = 0; i < 2 * UNIT; i++)
		sink += i * i;
}

__attribute__((noinline)) void hot_b(void)
{
	for (unsigned long i = 0; i < UNIT; i++)
		sink += i * i;
}

__attribute__((noinline)) void caller_a(void)
{
	hot_a();
}

__attribute__((noinline)) void caller_b(void)
{
	hot_b();
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? strtod(argv[1], NULL) : 5.0;
	double end = now() + secs;
	printf("ready\n");
	fflush(stdout);
	unsigned long iterations = 0;
	while (now() < end) {
		caller_a();
		caller_b();
		iterations++;
	}
	printf("iterations %lu\n", iterations);
	return 0;
}
