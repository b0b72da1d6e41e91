/* test_heap.c — pf/heap.h: the give-back decision over a run of units (steady churn is kept,
 * a burst goes back, the mark follows the free heap down), and a real burst freed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pf/heap.h"

#define MIB ((size_t)1 << 20)

static void test_decision(void **state)
{
	(void)state;
	struct pf_heap_trim t = {0};
	const size_t R = 20 * MIB; /* resident: steady */
	assert_false(pf_heap_trim_due(&t, 5 * MIB, R, MIB)); /* the first reading sets the marks */
	assert_false(pf_heap_trim_due(&t, 5 * MIB + MIB / 2, R, MIB)); /* churn within the slack */
	assert_false(pf_heap_trim_due(&t, 4 * MIB, R, MIB));	     /* the mark goes down */
	assert_false(pf_heap_trim_due(&t, 5 * MIB, R, MIB));	     /* exactly the slack: kept */
	assert_true(pf_heap_trim_due(&t, 5 * MIB + 1, R, MIB));	     /* a burst freed */
	assert_false(pf_heap_trim_due(&t, 5 * MIB + 1, R, MIB));     /* already given back */
	assert_false(pf_heap_trim_due(&t, 6 * MIB, R, MIB));
	assert_true(pf_heap_trim_due(&t, 7 * MIB, R, MIB));
	assert_int_equal(t.trims, 2);
	assert_int_equal(t.skipped, 6);
}

/* The free heap stays as large (the burst reused the chunks a trim gave back, and freed
 * them again), the resident memory grew: due; the mark is what the trim left. */
static void test_decision_refaulted(void **state)
{
	(void)state;
	struct pf_heap_trim t = {0};
	assert_false(pf_heap_trim_due(&t, 1 * MIB, 10 * MIB, MIB));
	assert_true(pf_heap_trim_due(&t, 8 * MIB, 18 * MIB, MIB)); /* a burst freed */
	pf_heap_trimmed(&t, 11 * MIB);				   /* what the trim left */
	assert_false(pf_heap_trim_due(&t, 8 * MIB, 11 * MIB + MIB / 2, MIB)); /* churn */
	assert_true(pf_heap_trim_due(&t, 8 * MIB, 18 * MIB, MIB)); /* the next burst */
	pf_heap_trimmed(&t, 11 * MIB);
	assert_false(pf_heap_trim_due(&t, 8 * MIB, 11 * MIB, MIB));
	pf_heap_trimmed(&t, 0); /* unreadable: the mark stays */
	assert_false(pf_heap_trim_due(&t, 8 * MIB, 12 * MIB, MIB));
	assert_int_equal(t.trims, 2);
}

/* Many small blocks (under the mmap threshold: from the arena) freed at once, below a block
 * still in use (so that free() cannot shrink the heap's top itself), grow the free heap past
 * the slack: the give-back trims; right after, nothing more is due. */
static void test_burst_freed(void **state)
{
	(void)state;
#if defined(__SANITIZE_ADDRESS__)
	skip(); /* ASan's allocator is not glibc's: mallinfo2() does not see its heap */
#endif
	struct pf_heap_trim t = {0};
	pf_heap_give_back(&t, MIB); /* the mark */
	enum { N = 2048 };
	void **p = calloc(N, sizeof(*p));
	assert_non_null(p);
	for (int i = 0; i < N; i++) {
		p[i] = malloc(4000);
		assert_non_null(p[i]);
	}
	void *fence = malloc(4000);
	assert_non_null(fence);
	pf_heap_give_back(&t, MIB); /* in use: the mark follows the free heap down */
	for (int i = 0; i < N; i++)
		free(p[i]);
	assert_true(pf_heap_give_back(&t, MIB));
	assert_false(pf_heap_give_back(&t, MIB));
	free(fence);
	free(p);
}

/* The same burst again, in the chunks the trim gave back: the free heap ends as large as
 * before, the pages came back; the give-back sees them and they go again. */
static void test_burst_refaulted(void **state)
{
	(void)state;
#if defined(__SANITIZE_ADDRESS__)
	skip();
#endif
	enum { N = 2048 };
	void **p = calloc(N, sizeof(*p));
	assert_non_null(p);
	void *fence = NULL;
	struct pf_heap_trim t = {0};
	pf_heap_give_back(&t, MIB);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < N; i++) {
			p[i] = malloc(4000);
			assert_non_null(p[i]);
			memset(p[i], round + 1, 4000);
		}
		if (!fence)
			assert_non_null(fence = malloc(4000));
		size_t in_use = pf_heap_resident_anon();
		for (int i = 0; i < N; i++)
			free(p[i]);
		assert_true(pf_heap_give_back(&t, MIB));
		size_t after = pf_heap_resident_anon();
		print_message("round %d: resident anonymous %zu kB in use, %zu kB after the give-back\n",
			      round, in_use >> 10, after >> 10);
		assert_true(after + 4 * MIB < in_use);
	}
	free(fence);
	free(p);
}

/* A large block freed goes back at once, also after a larger one was freed (which raises
 * glibc's own bound past it when the bound is not fixed). */
static void test_map_large(void **state)
{
	(void)state;
#if defined(__SANITIZE_ADDRESS__)
	skip(); /* ASan's allocator ignores mallopt */
#endif
	assert_int_equal(pf_heap_map_large(PF_HEAP_MAP_LARGE), 0);
	char *big = malloc(8 * MIB);
	assert_non_null(big);
	memset(big, 1, 8 * MIB);
	free(big);
	size_t base = pf_heap_resident_anon();
	char *p = malloc(3 * MIB);
	assert_non_null(p);
	memset(p, 2, 3 * MIB);
	size_t in_use = pf_heap_resident_anon();
	free(p);
	size_t after = pf_heap_resident_anon();
	print_message("resident anonymous: %zu kB before, %zu kB in use, %zu kB after the free\n",
		      base >> 10, in_use >> 10, after >> 10);
	assert_true(in_use >= base + 2 * MIB);
	assert_true(after + 2 * MIB <= in_use);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_decision),
	    cmocka_unit_test(test_decision_refaulted),
	    cmocka_unit_test(test_burst_refaulted),
	    cmocka_unit_test(test_burst_freed),
	    cmocka_unit_test(test_map_large),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
