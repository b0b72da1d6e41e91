/* sample_ring_bench.c — memory and speed of the slow-span sample ring
 * (agent/sampler/sample_ring.h; a benchmark, not a test).
 *
 *   sample-ring-bench [--hz 99] [--cpus 2] [--lookback 60]
 *
 * Feeds one lookback of samples at hz x cpus (every CPU busy all the time: the worst rate the
 * sampler produces) into a ring sized generously (so nothing is evicted early), for three
 * stack mixes: "hot" (a CPU-bound service: 64 distinct stacks, 24 frames), "service" (a web
 * service: 4,000 distinct stacks, 10 kernel + 30 user frames, Zipf-like reuse) and "unique"
 * (no stack ever repeats, 48 frames: the bound). Prints per mix the bytes held for one minute of
 * lookback, ns per add, and the time to cut one 1-second span of one thread out of it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sampler/sample_ring.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int count_cb(void *ctx, const struct pf_agg_sample *s, uint32_t hz)
{
	(void)s;
	(void)hz;
	(*(size_t *)ctx)++;
	return 0;
}

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

struct mix {
	const char *name;
	uint32_t distinct; /* 0 = every stack distinct */
	uint32_t nk, nu;
	int zipf;
};

int main(int argc, char **argv)
{
	unsigned hz = 99, cpus = 2, lookback = 60;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--hz"))
			hz = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--cpus"))
			cpus = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--lookback"))
			lookback = (unsigned)strtoul(argv[i + 1], NULL, 10);
	}
	if (!hz || !cpus || !lookback) {
		fprintf(stderr, "usage: %s [--hz N] [--cpus N] [--lookback S]\n", argv[0]);
		return 2;
	}
	static const struct mix mixes[] = {
	    {"hot", 64, 0, 24, 0},
	    {"service", 4000, 10, 30, 1},
	    {"unique", 0, 8, 40, 0},
	};
	uint64_t per_s = (uint64_t)hz * cpus;
	uint64_t n = per_s * lookback;
	uint64_t t0 = 1764000000ull * 1000000000ull;
	printf("rate: %u Hz x %u CPUs, lookback %u s, %llu samples\n", hz, cpus, lookback,
	       (unsigned long long)n);
	for (size_t m = 0; m < sizeof(mixes) / sizeof(mixes[0]); m++) {
		const struct mix *x = &mixes[m];
		struct pf_sample_ring *r = pf_sample_ring_new(lookback, (size_t)1 << 30);
		if (!r)
			return 1;
		uint64_t ips[64], seed = 88172645463325252ull;
		double a = now_s();
		for (uint64_t i = 0; i < n; i++) {
			uint64_t id;
			if (!x->distinct) {
				id = i;
			} else if (x->zipf) { /* min of two uniforms: low ids much more often */
				uint64_t u = xorshift(&seed) % x->distinct,
					 v = xorshift(&seed) % x->distinct;
				id = u < v ? u : v;
			} else {
				id = xorshift(&seed) % x->distinct;
			}
			for (uint32_t k = 0; k < x->nk + x->nu; k++)
				ips[k] = 0x7f0000000000ull + id * 0x10000 + k * 0x40;
			struct pf_agg_sample s = {.ts_unix_ns = t0 + i * (1000000000ull / per_s),
						  .pid = 1000 + (uint32_t)(i % 4),
						  .tid = 2000 + (uint32_t)(i % 16),
						  .cpu = (uint32_t)(i % cpus),
						  .comm = "worker",
						  .kstack = ips,
						  .n_kstack = x->nk,
						  .ustack = ips + x->nk,
						  .n_ustack = x->nu};
			if (pf_sample_ring_add(r, &s, 99) < 0)
				return 1;
		}
		double add_s = now_s() - a;
		struct pf_sample_ring_stats st;
		pf_sample_ring_stats(r, &st);
		/* one 1 s span of one thread, in the middle of the lookback */
		size_t got = 0;
		uint64_t mid = t0 + (uint64_t)lookback * 1000000000ull / 2;
		a = now_s();
		int reps = 100;
		for (int k = 0; k < reps; k++) {
			got = 0;
			pf_sample_ring_cut(r, 1001, 2005, mid, mid + 1000000000ull, count_cb, &got);
		}
		double cut_us = (now_s() - a) / reps * 1e6;
		double per_min = (double)st.bytes * 60.0 / lookback;
		printf("mix: %s\n  samples: %llu\n  stacks: %llu\n  bytes: %llu\n"
		       "  bytes_per_minute_lookback: %.0f (%.2f MiB)\n  add_ns: %.0f\n"
		       "  cut_1s_span_us: %.0f (%zu samples)\n",
		       x->name, (unsigned long long)st.samples, (unsigned long long)st.stacks,
		       (unsigned long long)st.bytes, per_min, per_min / 1048576.0,
		       add_s / (double)n * 1e9, cut_us, got);
		pf_sample_ring_free(r);
	}
	return 0;
}
