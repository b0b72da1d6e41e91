/* test_alloc_track.c — agent/sampler/alloc_track.h and alloc_syms.h: the gaps' mean and
 * spread, the unbiased weight (a simulation of the kernel's sampling estimates the bytes and
 * objects allocated), the live table (full, replace, take, deletion keeping every chain), and
 * the allocator entry points found in this process's own libc. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sampler/alloc_syms.h"
#include "sampler/alloc_track.h"
#include "sampler/bpf/cpu_sampler.h"

static void test_gaps(void **state)
{
	(void)state;
	static uint64_t g[PF_ALLOC_GAPS];
	pf_alloc_gaps(524288, g, PF_ALLOC_GAPS);
	double sum = 0;
	for (size_t i = 0; i < PF_ALLOC_GAPS; i++) {
		assert_true(g[i] >= 1);
		if (i)
			assert_true(g[i] >= g[i - 1]); /* quantile slices, ascending */
		sum += (double)g[i];
	}
	double mean = sum / PF_ALLOC_GAPS;
	assert_true(fabs(mean - 524288) < 524288 * 0.001);
	/* the median of an exponential is m ln 2 */
	assert_true(fabs((double)g[PF_ALLOC_GAPS / 2] - 524288 * log(2)) < 524288 * 0.01);
	pf_alloc_gaps(1, g, 4);
	for (size_t i = 0; i < 4; i++)
		assert_true(g[i] >= 1);
}

static uint64_t rng = 1;
/* splitmix64 */
static uint64_t next(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The kernel's sampler in user space: the same gaps, the same rule; the weighted samples
 * estimate what was allocated, for small and large sizes alike. */
static void test_weight_unbiased(void **state)
{
	(void)state;
	static uint64_t g[PF_ALLOC_GAPS];
	const uint64_t mean = 65536;
	pf_alloc_gaps(mean, g, PF_ALLOC_GAPS);
	uint64_t left = g[next() % PF_ALLOC_GAPS];
	double est_b = 0, est_o = 0, true_b = 0, true_o = 0;
	for (int i = 0; i < 400000; i++) {
		uint64_t size = i % 10 == 0 ? 100000 + next() % 400000 : 16 + next() % 4096;
		true_b += (double)size;
		true_o += 1;
		if (size < left) {
			left -= size;
			continue;
		}
		left = g[next() % PF_ALLOC_GAPS];
		double b, o;
		pf_alloc_weight(size, mean, &b, &o);
		est_b += b;
		est_o += o;
	}
	assert_true(fabs(est_b / true_b - 1) < 0.03);
	assert_true(fabs(est_o / true_o - 1) < 0.05);
	double b, o;
	pf_alloc_weight(0, mean, &b, &o);
	assert_true(o == 0);
	pf_alloc_weight(mean * 100, mean, &b, &o);
	assert_true(fabs(o - 1) < 1e-9 && fabs(b - (double)mean * 100) < 1);
}

static void test_table(void **state)
{
	(void)state;
	assert_null(pf_alloc_track_new(0));
	struct pf_alloc_track *t = pf_alloc_track_new(1000);
	assert_non_null(t);
	size_t idx;
	assert_int_equal(pf_alloc_track_put(t, 0, 1), -EINVAL);
	for (uint64_t i = 1; i <= 1000; i++)
		assert_int_equal(pf_alloc_track_put(t, i * 4096, i), 0);
	assert_int_equal(pf_alloc_track_put(t, 5, 1), -ENOSPC);
	assert_int_equal(pf_alloc_track_put(t, 4096, 77), 0); /* replaces */
	assert_int_equal(pf_alloc_track_count(t), 1000);
	/* take every other: the rest stay reachable */
	for (uint64_t i = 2; i <= 1000; i += 2) {
		assert_int_equal(pf_alloc_track_take(t, i * 4096, &idx), 0);
		assert_int_equal(idx, i);
	}
	assert_int_equal(pf_alloc_track_take(t, 2 * 4096, &idx), -ENOENT);
	for (uint64_t i = 1; i <= 1000; i += 2) {
		assert_int_equal(pf_alloc_track_take(t, i * 4096, &idx), 0);
		assert_int_equal(idx, i == 1 ? 77 : i);
	}
	assert_int_equal(pf_alloc_track_count(t), 0);
	pf_alloc_track_free(t);
}

/* This process maps glibc's libc: malloc, calloc, realloc and free are found in it, with
 * distinct offsets; the dynamic loader is not an allocator. */
static void test_syms_self(void **state)
{
	(void)state;
	struct pf_alloc_file f[PF_ALLOC_FILES_MAX];
	size_t n = 0;
	struct pf_error err = {0};
	assert_int_equal(pf_alloc_syms_find((uint32_t)getpid(), f, PF_ALLOC_FILES_MAX, &n, &err), 0);
	assert_true(n >= 1);
	bool libc = false;
	for (size_t i = 0; i < n; i++) {
		assert_null(strstr(f[i].base, "ld-linux"));
		if (strncmp(f[i].base, "libc.so", 7) && strncmp(f[i].base, "libc-", 5))
			continue;
		libc = true;
		unsigned seen = 0;
		for (size_t k = 0; k < f[i].n; k++) {
			assert_true(f[i].off[k] > 0);
			assert_true(f[i].kind[k] >= 1 && f[i].kind[k] <= PF_ALLOC_FN_MAX);
			for (size_t j = 0; j < k; j++)
				assert_true(f[i].off[j] != f[i].off[k]);
			seen |= 1u << f[i].kind[k];
		}
		assert_true(seen & (1u << PF_ALLOC_FN_MALLOC));
		assert_true(seen & (1u << PF_ALLOC_FN_CALLOC));
		assert_true(seen & (1u << PF_ALLOC_FN_REALLOC));
		assert_true(seen & (1u << PF_ALLOC_FN_FREE));
		assert_true(seen & (1u << PF_ALLOC_FN_POSIX_ALIGN));
	}
	assert_true(libc);
	assert_int_equal(pf_alloc_syms_find(999999999u, f, PF_ALLOC_FILES_MAX, &n, &err), -ESRCH);
	assert_int_equal(pf_alloc_syms_file("/proc/self/status", f, &err), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gaps),
		cmocka_unit_test(test_weight_unbiased),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_syms_self),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
