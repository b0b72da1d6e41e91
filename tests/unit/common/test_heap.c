/* test_heap.c — pf/heap.h: the give-back decision over a run of units (steady churn is kept,
 * a burst goes back, the mark follows the free heap down), and a real burst freed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "pf/heap.h"

#define MIB ((size_t)1 << 20)

static void test_decision(void **state)
{
	(void)state;
	struct pf_heap_trim t = {0};
	assert_false(pf_heap_trim_due(&t, 5 * MIB, MIB)); /* the first reading sets the mark */
	assert_false(pf_heap_trim_due(&t, 5 * MIB + MIB / 2, MIB)); /* churn within the slack */
	assert_false(pf_heap_trim_due(&t, 4 * MIB, MIB));	     /* the mark goes down */
	assert_false(pf_heap_trim_due(&t, 5 * MIB, MIB));	     /* exactly the slack: kept */
	assert_true(pf_heap_trim_due(&t, 5 * MIB + 1, MIB));	     /* a burst */
	assert_false(pf_heap_trim_due(&t, 5 * MIB + 1, MIB));	     /* already given back */
	assert_false(pf_heap_trim_due(&t, 6 * MIB, MIB));
	assert_true(pf_heap_trim_due(&t, 7 * MIB, MIB));
	assert_int_equal(t.trims, 2);
	assert_int_equal(t.skipped, 6);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_decision),
	    cmocka_unit_test(test_burst_freed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
