/* switch_workload.c — a context-switch-heavy workload for bench/bpf_sample_cost.sh (variant
 * offcpu): pairs of threads ping-pong one byte over pipes, so each round trip is two blocking
 * reads (two switch-outs and two switch-ins). Every 100 ms it writes the round trips so far to
 * argv[2] (a new file renamed over it, so a reader never sees it half written), so a run's
 * throughput is the difference over its duration.
 *   switch_workload SECONDS COUNT_FILE [PAIRS (default 2)] */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static atomic_ullong trips;

struct pair {
	int ab[2], ba[2];
};

static void *pong(void *arg)
{
	struct pair *p = arg;
	char c;
	while (read(p->ab[0], &c, 1) == 1)
		if (write(p->ba[1], &c, 1) != 1)
			break;
	return NULL;
}

static void *ping(void *arg)
{
	struct pair *p = arg;
	char c = 'x';
	for (;;) {
		if (write(p->ab[1], &c, 1) != 1 || read(p->ba[0], &c, 1) != 1)
			break;
		atomic_fetch_add_explicit(&trips, 1, memory_order_relaxed);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	double seconds = strtod(argv[1], NULL);
	int pairs = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 2;
	if (pairs < 1 || pairs > 64)
		return 2;
	for (int i = 0; i < pairs; i++) {
		struct pair *p = calloc(1, sizeof(*p));
		pthread_t t;
		if (!p || pipe(p->ab) || pipe(p->ba) || pthread_create(&t, NULL, pong, p) ||
		    pthread_create(&t, NULL, ping, p))
			return 1;
	}
	struct timespec ts = {0, 100000000};
	char tmp[PATH_MAX];
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", argv[2]) >= sizeof(tmp))
		return 2;
	for (double t = 0; t < seconds; t += 0.1) {
		nanosleep(&ts, NULL);
		FILE *f = fopen(tmp, "w");
		if (!f)
			continue;
		fprintf(f, "%llu\n", (unsigned long long)atomic_load(&trips));
		if (fclose(f) == 0)
			rename(tmp, argv[2]);
	}
	return 0;
}
