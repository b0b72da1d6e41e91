/* test_array.c — pf/array.h: growth from empty by doubling from the first capacity, a need
 * past one doubling, no change when the capacity holds, the contents kept across growth, and
 * sizes that overflow refused with the array and capacity unchanged; pf_array_grow_fill():
 * twice the capacity or the need, whichever is larger, new bytes set and old ones kept. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pf/array.h"

struct item {
	uint64_t a, b;
};

static void grows_from_empty_and_keeps_contents(void **state)
{
	(void)state;
	struct item *v = NULL;
	size_t cap = 0;
	assert_int_equal(PF_ARRAY_GROW(v, cap, 1, 4), 0);
	assert_non_null(v);
	assert_int_equal(cap, 4);
	for (size_t i = 0; i < 4; i++)
		v[i] = (struct item){i, i * 3};
	assert_int_equal(PF_ARRAY_GROW(v, cap, 4, 4), 0); /* holds: unchanged */
	assert_int_equal(cap, 4);
	assert_int_equal(PF_ARRAY_GROW(v, cap, 5, 4), 0);
	assert_int_equal(cap, 8);
	assert_int_equal(PF_ARRAY_GROW(v, cap, 33, 4), 0); /* several doublings at once */
	assert_int_equal(cap, 64);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(v[i].a, i);
		assert_int_equal(v[i].b, i * 3);
	}
	free(v);
}

static void first_zero_starts_at_one(void **state)
{
	(void)state;
	char *s = NULL;
	size_t cap = 0;
	assert_int_equal(PF_ARRAY_GROW(s, cap, 3, 0), 0);
	assert_int_equal(cap, 4);
	free(s);
}

static void overflow_refused_unchanged(void **state)
{
	(void)state;
	struct item *v = NULL;
	size_t cap = 0;
	assert_int_equal(PF_ARRAY_GROW(v, cap, 2, 2), 0);
	struct item *before = v;
	assert_int_equal(PF_ARRAY_GROW(v, cap, SIZE_MAX / sizeof(*v) + 1, 2), -ENOMEM);
	assert_ptr_equal(v, before);
	assert_int_equal(cap, 2);
	assert_int_equal(PF_ARRAY_GROW(v, cap, SIZE_MAX, 2), -ENOMEM);
	assert_int_equal(cap, 2);
	free(v);
}

static void grow_fill_doubles_or_takes_need(void **state)
{
	(void)state;
	uint32_t *v = NULL;
	size_t cap = 0;
	assert_int_equal(pf_array_grow_fill(&v, &cap, 3, sizeof(*v), 0xff), 0);
	assert_int_equal(cap, 3); /* twice 0 is less than the need */
	for (size_t i = 0; i < cap; i++)
		assert_int_equal(v[i], UINT32_MAX);
	v[0] = 7;
	assert_int_equal(pf_array_grow_fill(&v, &cap, 3, sizeof(*v), 0), 0); /* holds */
	assert_int_equal(cap, 3);
	assert_int_equal(pf_array_grow_fill(&v, &cap, 4, sizeof(*v), 0), 0);
	assert_int_equal(cap, 6); /* twice 3 */
	assert_int_equal(v[0], 7);
	assert_int_equal(v[2], UINT32_MAX);
	for (size_t i = 3; i < cap; i++)
		assert_int_equal(v[i], 0);
	assert_int_equal(pf_array_grow_fill(&v, &cap, 100, sizeof(*v), 0), 0);
	assert_int_equal(cap, 100); /* the need past twice */
	uint32_t *keep = v;
	assert_int_equal(pf_array_grow_fill(&v, &cap, SIZE_MAX, sizeof(*v), 0), -ENOMEM);
	assert_ptr_equal(v, keep);
	assert_int_equal(cap, 100);
	free(v);
}

/* Every key 0..n-1 is indexed; all hash to the same start, so each lookup probes past the
 * others: the index finds every element after each rebuild. */
static size_t same_hash(const void *ctx, size_t i)
{
	(void)ctx;
	(void)i;
	return 5;
}

static void index_reserve_rebuilds_and_finds(void **state)
{
	(void)state;
	size_t *slot = NULL, n_slot = 0;
	for (size_t n = 0; n < 40; n++) {
		assert_int_equal(pf_array_index_reserve(&slot, &n_slot, n, 4, same_hash, NULL), 0);
		assert_true(n_slot >= (n + 1) * 2);
		assert_int_equal(n_slot & (n_slot - 1), 0);
		size_t j = 5 & (n_slot - 1);
		while (slot[j])
			j = (j + 1) & (n_slot - 1);
		slot[j] = n + 1; /* the caller's insert */
		size_t seen = 0;
		for (size_t k = 0; k < n_slot; k++)
			seen += slot[k] != 0;
		assert_int_equal(seen, n + 1);
	}
	assert_int_equal(n_slot, 128); /* 4 doubled while 40 elements fit at half full */
	size_t *keep = slot;
	assert_int_equal(pf_array_index_reserve(&slot, &n_slot, 40, 4, same_hash, NULL), 0);
	assert_ptr_equal(slot, keep); /* room already: unchanged */
	free(slot);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(grows_from_empty_and_keeps_contents),
	    cmocka_unit_test(first_zero_starts_at_one),
	    cmocka_unit_test(overflow_refused_unchanged),
	    cmocka_unit_test(grow_fill_doubles_or_takes_need),
	    cmocka_unit_test(index_reserve_rebuilds_and_finds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
