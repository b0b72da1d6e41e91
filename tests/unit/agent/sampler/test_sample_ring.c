/* Unit tests of agent/sampler/sample_ring.c: cuts by pid, thread and [start, end) with the
 * stacks intact, eviction past lookback, the memory bound (never exceeded, oldest evicted
 * first, stacks freed with their last sample), refusals, the pid list, and a randomized run
 * against a plain list of every sample. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sampler/sample_ring.h"

#define SEC 1000000000ull
#define T0 (1764000000ull * SEC)

static uint64_t ips[300];

static struct pf_agg_sample mk(uint64_t ts, uint32_t pid, uint32_t tid, uint32_t stack,
			       uint32_t depth)
{
	for (uint32_t i = 0; i < depth && i < 300; i++)
		ips[i] = 0x400000 + stack * 0x1000 + i;
	return (struct pf_agg_sample){.ts_unix_ns = ts,
				      .pid = pid,
				      .tid = tid,
				      .cpu = 1,
				      .comm = "worker-thread-name-too-long",
				      .kstack = ips,
				      .n_kstack = depth > 2 ? 2 : 0,
				      .ustack = ips + (depth > 2 ? 2 : 0),
				      .n_ustack = depth > 2 ? depth - 2 : depth};
}

struct got {
	size_t n;
	uint64_t ts[4096];
	uint32_t tid[4096];
	uint64_t first_user_ip[4096];
	uint32_t depth[4096];
	uint32_t hz[4096];
};

static int collect(void *ctx, const struct pf_agg_sample *s, uint32_t hz)
{
	struct got *g = ctx;
	g->hz[g->n] = hz;
	assert_true(g->n < 4096);
	assert_string_equal(s->comm, "worker-thread-n"); /* 15 bytes kept */
	g->ts[g->n] = s->ts_unix_ns;
	g->tid[g->n] = s->tid;
	g->first_user_ip[g->n] = s->n_ustack ? s->ustack[0] : 0;
	g->depth[g->n] = s->n_kstack + s->n_ustack;
	g->n++;
	return 0;
}

static void test_cut(void **state)
{
	(void)state;
	struct pf_sample_ring *r = pf_sample_ring_new(60, 1 << 20);
	assert_non_null(r);
	/* pid 10 threads 11 and 12, pid 20; one sample every 10 ms for 1 s */
	for (unsigned i = 0; i < 100; i++) {
		struct pf_agg_sample s = mk(T0 + i * 10000000ull, i % 3 == 2 ? 20 : 10,
					    i % 3 == 0	 ? 11
					    : i % 3 == 1 ? 12
							 : 21,
					    i % 5, 8 + i % 5);
		/* a frequency change at 150 ms: each sample keeps its own */
		assert_int_equal(pf_sample_ring_add(r, &s, i < 15 ? 99 : 199), 0);
	}
	struct pf_sample_ring_stats st;
	pf_sample_ring_stats(r, &st);
	assert_int_equal(st.samples, 100);
	assert_int_equal(st.stacks, 5);
	assert_true(st.oldest_unix_ns == T0 && st.newest_unix_ns == T0 + 990000000ull);
	assert_true(st.bytes <= st.max_bytes);

	static struct got g;
	/* [T0 + 100 ms, T0 + 200 ms) of pid 10, any thread: i = 10..19 without i % 3 == 2 */
	memset(&g, 0, sizeof(g));
	int n = pf_sample_ring_cut(r, 10, 0, T0 + 100000000ull, T0 + 200000000ull, collect, &g);
	assert_int_equal(n, 7); /* 10 11 12 13 15 16 18 */
	assert_int_equal(g.n, 7);
	for (size_t i = 0; i < g.n; i++) {
		assert_true(g.ts[i] >= T0 + 100000000ull && g.ts[i] < T0 + 200000000ull);
		if (i)
			assert_true(g.ts[i] > g.ts[i - 1]); /* oldest first */
		unsigned k = (unsigned)((g.ts[i] - T0) / 10000000ull);
		assert_int_equal(g.depth[i], 8 + k % 5); /* the stack that sample had */
		assert_int_equal(g.hz[i], k < 15 ? 99 : 199);
		assert_true(g.first_user_ip[i] == 0x400000 + (k % 5) * 0x1000 + 2);
	}
	/* thread 12 only */
	memset(&g, 0, sizeof(g));
	n = pf_sample_ring_cut(r, 10, 12, T0, T0 + SEC, collect, &g);
	assert_int_equal(n, 33);
	for (size_t i = 0; i < g.n; i++)
		assert_int_equal(g.tid[i], 12);
	/* end is exclusive, start inclusive */
	memset(&g, 0, sizeof(g));
	assert_int_equal(pf_sample_ring_cut(r, 10, 0, T0, T0 + 1, collect, &g), 1);
	assert_int_equal(pf_sample_ring_cut(r, 10, 0, T0 + 1, T0 + 10000000ull, collect, &g), 0);
	assert_int_equal(pf_sample_ring_cut(r, 99, 0, T0, T0 + SEC, collect, &g), 0);

	uint32_t pids[4];
	assert_int_equal(pf_sample_ring_pids(r, pids, 4), 2);
	assert_int_equal(pids[0], 10);
	assert_int_equal(pids[1], 20);
	assert_int_equal(pf_sample_ring_pids(r, pids, 1), 1);
	pf_sample_ring_free(r);
}

static int fail_at_3(void *ctx, const struct pf_agg_sample *s, uint32_t hz)
{
	(void)s;
	(void)hz;
	return ++*(int *)ctx == 3 ? -EINTR : 0;
}

static void test_lookback(void **state)
{
	(void)state;
	struct pf_sample_ring *r = pf_sample_ring_new(1, 1 << 20);
	for (unsigned i = 0; i <= 30; i++) { /* 0 .. 3 s, every 100 ms */
		struct pf_agg_sample s = mk(T0 + i * (SEC / 10), 7, 7, i, 4);
		assert_int_equal(pf_sample_ring_add(r, &s, 99), 0);
	}
	struct pf_sample_ring_stats st;
	pf_sample_ring_stats(r, &st);
	/* newest at 3.0 s: everything before 2.0 s is gone */
	assert_int_equal(st.samples, 11);
	assert_int_equal(st.evicted_age, 20);
	assert_int_equal(st.evicted_memory, 0);
	assert_int_equal(st.stacks, 11); /* every stack was distinct: freed with its sample */
	assert_true(st.oldest_unix_ns == T0 + 2 * SEC);
	int calls = 0;
	assert_int_equal(pf_sample_ring_cut(r, 7, 0, 0, UINT64_MAX, fail_at_3, &calls), -EINTR);
	/* shrinking the budget evicts at once */
	pf_sample_ring_set_limits(r, 1, 0);
	pf_sample_ring_stats(r, &st);
	assert_int_equal(st.max_bytes, PF_SAMPLE_RING_MIN_BYTES);
	assert_true(st.bytes <= st.max_bytes);
	pf_sample_ring_free(r);
}

static void test_memory_bound(void **state)
{
	(void)state;
	size_t max = 256 << 10;
	struct pf_sample_ring *r = pf_sample_ring_new(600, max);
	struct pf_sample_ring_stats st;
	/* deep, all-distinct stacks: about 1 KiB each */
	for (unsigned i = 0; i < 5000; i++) {
		struct pf_agg_sample s = mk(T0 + i * 1000000ull, 1 + i % 4, 1, i, 120);
		assert_int_equal(pf_sample_ring_add(r, &s, 99), 0);
		pf_sample_ring_stats(r, &st);
		assert_true(st.bytes <= max);
	}
	assert_true(st.evicted_memory > 4000);
	assert_int_equal(st.evicted_age, 0);
	assert_int_equal(st.samples, st.stacks);
	assert_int_equal(st.samples + st.evicted_memory, 5000);
	/* what is held is the newest */
	assert_true(st.newest_unix_ns == T0 + 4999 * 1000000ull);
	assert_true(st.oldest_unix_ns == T0 + (5000 - st.samples) * 1000000ull);
	/* a stack that alone takes over a quarter of the budget is refused */
	static uint64_t big[9000];
	struct pf_agg_sample s = {.ts_unix_ns = T0 + 5000 * 1000000ull,
				  .pid = 1,
				  .tid = 1,
				  .ustack = big,
				  .n_ustack = 9000};
	assert_int_equal(pf_sample_ring_add(r, &s, 99), -ENOSPC);
	pf_sample_ring_stats(r, &st);
	assert_int_equal(st.refused, 1);
	pf_sample_ring_free(r);
}

/* Random pids, threads, stacks and slightly out-of-order times; every cut equals the filter of
 * a plain list of what lookback keeps. */
static void test_random_vs_list(void **state)
{
	(void)state;
	enum { N = 20000 };
	static struct {
		uint64_t ts;
		uint32_t pid, tid, stack;
	} all[N];
	struct pf_sample_ring *r = pf_sample_ring_new(2, 64 << 20);
	uint64_t newest = 0;
	srand(7);
	for (unsigned i = 0; i < N; i++) {
		uint64_t ts = T0 + i * 500000ull - (uint64_t)(rand() % 3) * 100000ull;
		all[i].ts = ts;
		all[i].pid = 100 + (uint32_t)(rand() % 5);
		all[i].tid = all[i].pid * 10 + (uint32_t)(rand() % 3);
		all[i].stack = (uint32_t)(rand() % 300);
		struct pf_agg_sample s =
		    mk(ts, all[i].pid, all[i].tid, all[i].stack, 3 + all[i].stack % 40);
		assert_int_equal(pf_sample_ring_add(r, &s, 99), 0);
		newest = ts > newest ? ts : newest;
	}
	/* what eviction keeps: everything from the first sample at or after the cutoff on
	 * (eviction pops the oldest while it is older than newest - lookback) */
	uint64_t cutoff = newest - 2 * SEC;
	unsigned first = 0;
	while (first < N && all[first].ts < cutoff)
		first++;
	static struct got g;
	for (int q = 0; q < 50; q++) {
		uint32_t pid = 100 + (uint32_t)(rand() % 6);
		uint32_t tid = rand() % 2 ? 0 : pid * 10 + (uint32_t)(rand() % 3);
		uint64_t a = T0 + (uint64_t)(rand() % 10000) * 1000000ull;
		uint64_t b = a + (uint64_t)(rand() % 3000) * 1000000ull;
		memset(&g, 0, sizeof(g));
		int n = pf_sample_ring_cut(r, pid, tid, a, b, collect, &g);
		size_t want = 0;
		for (unsigned i = first; i < N; i++) {
			if (all[i].pid != pid || (tid && all[i].tid != tid) || all[i].ts < a ||
			    all[i].ts >= b)
				continue;
			assert_true(want < g.n);
			assert_true(g.ts[want] == all[i].ts);
			assert_int_equal(g.tid[want], all[i].tid);
			assert_int_equal(g.depth[want], 3 + all[i].stack % 40);
			assert_int_equal(g.hz[want], 99);
			want++;
		}
		assert_int_equal(n, (int)want);
	}
	pf_sample_ring_free(r);
}

/* The pid list follows additions and evictions (hundreds of pids: the table grows, and
 * deletions shift clusters). */
static void test_pids(void **state)
{
	(void)state;
	enum { N = 6000, P = 700 };
	static uint32_t pid_of[N];
	static uint8_t want[P + 2];
	static uint32_t got[P + 2];
	struct pf_sample_ring *r = pf_sample_ring_new(1, 64 << 20);
	for (unsigned i = 0; i < N; i++) {
		/* pid 0 (the idle task) now and then, pids 1..P in a scrambled order */
		pid_of[i] = i % 97 == 0 ? 0 : 1 + (i * 7919u) % (i < N / 2 ? P : P / 7);
		struct pf_agg_sample s = mk(T0 + i * 1000000ull, pid_of[i], 1, i % 13, 5);
		assert_int_equal(pf_sample_ring_add(r, &s, 99), 0);
		if (i % 250)
			continue;
		/* held: the last second, i.e. samples i-1000 .. i */
		memset(want, 0, sizeof(want));
		size_t nw = 0;
		for (unsigned k = i >= 1000 ? i - 1000 : 0; k <= i; k++)
			if (!want[pid_of[k]]++)
				nw++;
		size_t n = pf_sample_ring_pids(r, got, P + 2);
		assert_int_equal(n, nw);
		for (size_t k = 0; k < n; k++) {
			assert_true(want[got[k]]);
			if (k)
				assert_true(got[k] > got[k - 1]);
		}
	}
	pf_sample_ring_free(r);
}

/* Off-CPU waits (hz 0) come back with their weight (microsecond precision, clamped at
 * 2^30 - 1 us) and reason, beside the ticks. */
static int collect_off(void *ctx, const struct pf_agg_sample *s, uint32_t hz)
{
	uint64_t *v = ctx;
	if (hz) {
		v[0]++;
		return 0;
	}
	v[1] += s->weight;
	v[2] += s->reason == PF_AGG_OFF_PREEMPTED;
	return 0;
}

static void test_off_cpu(void **state)
{
	struct pf_sample_ring *r = pf_sample_ring_new(60, 1u << 20);
	assert_non_null(r);
	struct pf_agg_sample s = mk(T0, 10, 11, 1, 4);
	assert_int_equal(pf_sample_ring_add(r, &s, 99), 0);
	s = mk(T0 + 1, 10, 11, 2, 4);
	s.weight = 300123456; /* kept as 300123 us */
	assert_int_equal(pf_sample_ring_add(r, &s, 0), 0);
	s = mk(T0 + 2, 10, 11, 2, 4);
	s.weight = 5000000;
	s.reason = PF_AGG_OFF_PREEMPTED;
	assert_int_equal(pf_sample_ring_add(r, &s, 0), 0);
	s = mk(T0 + 3, 10, 12, 3, 4);
	s.weight = 5000ull * SEC; /* past the bound */
	assert_int_equal(pf_sample_ring_add(r, &s, 0), 0);
	uint64_t v[3] = {0};
	assert_int_equal(pf_sample_ring_cut(r, 10, 11, T0, T0 + SEC, collect_off, v), 3);
	assert_int_equal(v[0], 1);
	assert_int_equal(v[1], 300123000ull + 5000000ull);
	assert_int_equal(v[2], 1);
	memset(v, 0, sizeof(v));
	assert_int_equal(pf_sample_ring_cut(r, 10, 12, T0, T0 + SEC, collect_off, v), 1);
	assert_int_equal(v[1], ((1ull << 30) - 1) * 1000);
	pf_sample_ring_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cut),		 cmocka_unit_test(test_lookback),
	    cmocka_unit_test(test_memory_bound), cmocka_unit_test(test_random_vs_list),
	    cmocka_unit_test(test_pids),	 cmocka_unit_test(test_off_cpu),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
