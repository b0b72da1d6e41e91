/* test_buf.c — pf/buf.h: caps, -E2BIG leaves the buffer intact, printf growth, detach. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pf/buf.h"

static void test_init_empty(void **state)
{
	struct pf_buf b;

	pf_buf_init(&b, 0);
	assert_int_equal(b.max, PF_BUF_MAX_DEFAULT);
	assert_int_equal(b.len, 0);
	assert_null(b.data);
	assert_string_equal(pf_buf_str(&b), "");
	pf_buf_release(&b);
}

static void test_append_nul_terminated(void **state)
{
	struct pf_buf b;

	pf_buf_init(&b, 100);
	assert_int_equal(pf_buf_append(&b, "abc", 3), 0);
	assert_int_equal(pf_buf_append_str(&b, "def"), 0);
	assert_int_equal(pf_buf_putc(&b, 'g'), 0);
	assert_int_equal(b.len, 7);
	assert_string_equal(pf_buf_str(&b), "abcdefg");
	assert_int_equal(b.data[b.len], 0);
	assert_int_equal(pf_buf_append(&b, NULL, 0), 0);
	assert_int_equal(b.len, 7);
	pf_buf_release(&b);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
}

static void test_cap_exact_and_over(void **state)
{
	struct pf_buf b;
	char big[17];

	memset(big, 'x', sizeof(big));
	pf_buf_init(&b, 16);
	assert_int_equal(pf_buf_append(&b, big, 16), 0); /* exactly max is fine */
	assert_int_equal(b.len, 16);
	assert_true(b.cap <= 17); /* never allocates past max + NUL */
	assert_int_equal(pf_buf_putc(&b, 'y'), -E2BIG);
	pf_buf_reset(&b);
	assert_int_equal(b.len, 0);
	assert_string_equal(pf_buf_str(&b), "");
	assert_int_equal(pf_buf_append(&b, big, 17), -E2BIG);
	pf_buf_release(&b);
}

static void test_e2big_leaves_buffer_intact(void **state)
{
	struct pf_buf b;
	char big[64];

	memset(big, 'z', sizeof(big));
	pf_buf_init(&b, 10);
	assert_int_equal(pf_buf_append_str(&b, "hello"), 0);
	assert_int_equal(pf_buf_append(&b, big, 6), -E2BIG);
	assert_int_equal(b.len, 5);
	assert_string_equal(pf_buf_str(&b), "hello");
	assert_int_equal(pf_buf_printf(&b, "%s", "123456"), -E2BIG);
	assert_int_equal(b.len, 5);
	assert_string_equal(pf_buf_str(&b), "hello");
	/* A huge size must not overflow the length check. */
	assert_int_equal(pf_buf_reserve(&b, SIZE_MAX), -E2BIG);
	assert_int_equal(pf_buf_reserve(&b, SIZE_MAX - 2), -E2BIG);
	assert_string_equal(pf_buf_str(&b), "hello");
	assert_int_equal(pf_buf_append_str(&b, "world"), 0);
	assert_string_equal(pf_buf_str(&b), "helloworld");
	pf_buf_release(&b);
}

static void test_printf_growth(void **state)
{
	struct pf_buf b;

	pf_buf_init(&b, 1 << 20);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(pf_buf_printf(&b, "%04d,", i), 0);
	assert_int_equal(b.len, 5000);
	assert_int_equal(strlen(pf_buf_str(&b)), 5000);
	assert_memory_equal(b.data, "0000,0001,", 10);
	assert_memory_equal(b.data + 4995, "0999,", 5);
	/* One printf bigger than the initial 64-byte allocation. */
	pf_buf_reset(&b);
	assert_int_equal(pf_buf_printf(&b, "%0300d", 7), 0);
	assert_int_equal(b.len, 300);
	assert_int_equal(b.data[299], '7');
	assert_int_equal(b.data[300], 0);
	pf_buf_release(&b);
}

static void test_detach(void **state)
{
	struct pf_buf b;
	size_t n = 0;

	pf_buf_init(&b, 0);
	assert_int_equal(pf_buf_append_str(&b, "take me"), 0);
	uint8_t *p = pf_buf_detach(&b, &n);
	assert_non_null(p);
	assert_int_equal(n, 7);
	assert_string_equal((char *)p, "take me");
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	/* Reusable after detach. */
	assert_int_equal(pf_buf_append_str(&b, "again"), 0);
	assert_string_equal(pf_buf_str(&b), "again");
	free(p);
	pf_buf_release(&b);
}

static void test_uvarint(void **state)
{
	(void)state;
	struct pf_buf b;
	pf_buf_init(&b, 64);
	assert_int_equal(pf_buf_append_uvarint(&b, 0), 0);
	assert_int_equal(pf_buf_append_uvarint(&b, 127), 0);
	assert_int_equal(pf_buf_append_uvarint(&b, 300), 0);
	assert_int_equal(pf_buf_append_uvarint(&b, UINT64_MAX), 0);
	const uint8_t want[] = {0x00, 0x7f, 0xac, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff,
				0xff, 0xff, 0xff, 0xff, 0x01};
	assert_int_equal(b.len, sizeof(want));
	assert_memory_equal(b.data, want, sizeof(want));
	pf_buf_release(&b);
	/* over the cap: refused, buffer unchanged */
	pf_buf_init(&b, 4);
	assert_int_equal(pf_buf_append_uvarint(&b, 1), 0);
	assert_int_equal(pf_buf_append_uvarint(&b, UINT64_MAX), -E2BIG);
	assert_int_equal(b.len, 1);
	pf_buf_release(&b);
	/* written in place while there is room (NUL after it), up to the cap and not past it */
	pf_buf_init(&b, 12);
	assert_int_equal(pf_buf_append_uvarint(&b, 300), 0);
	assert_int_equal(pf_buf_append_uvarint(&b, UINT64_MAX), 0);
	assert_int_equal(b.len, 12);
	assert_int_equal(b.data[12], 0);
	assert_memory_equal(b.data, want + 2, 12);
	assert_int_equal(pf_buf_append_uvarint(&b, 0), -E2BIG);
	assert_int_equal(b.len, 12);
	pf_buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_init_empty),
	    cmocka_unit_test(test_append_nul_terminated),
	    cmocka_unit_test(test_cap_exact_and_over),
	    cmocka_unit_test(test_e2big_leaves_buffer_intact),
	    cmocka_unit_test(test_printf_growth),
	    cmocka_unit_test(test_detach),
	    cmocka_unit_test(test_uvarint),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
