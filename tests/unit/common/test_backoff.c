/* test_backoff.c — pf/backoff.h: full-jitter bounds over many draws, growth to the cap,
 * overflow safety, the Retry-After floor (wins once, even over cap), reset, and the
 * Retry-After parser for delta-seconds, IMF-fixdate and garbage. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pf/backoff.h"

static void test_bounds_over_many_draws(void **state)
{
	struct pf_backoff b;

	for (uint32_t attempt = 0; attempt < 12; attempt++) {
		uint64_t ceiling = 100ull << attempt;
		if (ceiling > 30000)
			ceiling = 30000;
		uint64_t lo = UINT64_MAX, hi = 0, sum = 0;
		const int draws = 5000;
		for (int i = 0; i < draws; i++) {
			pf_backoff_init(&b, 100, 30000);
			b.attempt = attempt;
			uint64_t d = pf_backoff_next(&b);
			assert_int_equal(b.attempt, attempt + 1);
			if (d > ceiling)
				fail_msg("attempt %u: %llu > %llu", attempt, (unsigned long long)d,
					 (unsigned long long)ceiling);
			lo = d < lo ? d : lo;
			hi = d > hi ? d : hi;
			sum += d;
		}
		/* Full jitter spreads over the whole range: near 0, near the ceiling, mean ~half.
		 */
		assert_true(lo <= ceiling / 20);
		assert_true(hi >= ceiling - ceiling / 20);
		uint64_t mean = sum / draws;
		assert_true(mean > ceiling * 4 / 10 && mean < ceiling * 6 / 10);
	}
}

static void test_sequence_reaches_cap(void **state)
{
	struct pf_backoff b;
	uint64_t max_seen = 0;

	pf_backoff_init(&b, 50, 1000);
	for (int i = 0; i < 2000; i++) {
		uint64_t d = pf_backoff_next(&b);
		assert_true(d <= 1000);
		if (i >= 10)
			max_seen = d > max_seen ? d : max_seen;
	}
	assert_true(max_seen > 900);
	assert_int_equal(b.attempt, 2000);
}

static void test_no_overflow(void **state)
{
	struct pf_backoff b;

	pf_backoff_init(&b, UINT64_MAX / 2, UINT64_MAX);
	for (int i = 0; i < 200; i++)
		(void)pf_backoff_next(&b);
	b.attempt = UINT32_MAX;
	(void)pf_backoff_next(&b);
	assert_int_equal(b.attempt, UINT32_MAX);

	pf_backoff_init(&b, 1000, 5000);
	b.attempt = 63;
	assert_true(pf_backoff_next(&b) <= 5000);
	b.attempt = 64;
	assert_true(pf_backoff_next(&b) <= 5000);
	b.attempt = 1000;
	assert_true(pf_backoff_next(&b) <= 5000);

	/* base 0 gives 0; cap 0 gives 0. */
	pf_backoff_init(&b, 0, 1000);
	for (int i = 0; i < 100; i++)
		assert_int_equal(pf_backoff_next(&b), 0);
	pf_backoff_init(&b, 100, 0);
	for (int i = 0; i < 100; i++)
		assert_int_equal(pf_backoff_next(&b), 0);
}

static void test_floor_wins_once(void **state)
{
	struct pf_backoff b;

	pf_backoff_init(&b, 100, 1000);
	pf_backoff_retry_after(&b, 60000); /* larger than cap: the server wins */
	assert_int_equal(pf_backoff_next(&b), 60000);
	assert_true(pf_backoff_next(&b) <= 1000); /* used once */

	/* A small floor only lifts draws below it. */
	int lifted = 0;
	for (int i = 0; i < 1000; i++) {
		pf_backoff_init(&b, 1000, 1000);
		b.attempt = 5;
		pf_backoff_retry_after(&b, 500);
		uint64_t d = pf_backoff_next(&b);
		assert_true(d >= 500 && d <= 1000);
		lifted += d == 500;
	}
	assert_true(lifted > 300); /* about half the draws were below the floor */

	/* Two floors: the larger one wins. */
	pf_backoff_init(&b, 1, 1);
	pf_backoff_retry_after(&b, 7000);
	pf_backoff_retry_after(&b, 3000);
	assert_int_equal(pf_backoff_next(&b), 7000);
}

static void test_reset(void **state)
{
	struct pf_backoff b;

	pf_backoff_init(&b, 10, 100000);
	for (int i = 0; i < 10; i++)
		(void)pf_backoff_next(&b);
	pf_backoff_retry_after(&b, 99999);
	pf_backoff_reset(&b);
	assert_int_equal(b.attempt, 0);
	assert_int_equal(b.floor_ms, 0);
	assert_true(pf_backoff_next(&b) <= 10);
	/* Two fresh generators do not draw the same sequence (seeded from getrandom). */
	struct pf_backoff x, y;
	pf_backoff_init(&x, 1000000, 1000000);
	pf_backoff_init(&y, 1000000, 1000000);
	int same = 0;
	for (int i = 0; i < 8; i++)
		same += pf_backoff_next(&x) == pf_backoff_next(&y);
	assert_true(same < 8);
}

/* 1994-11-06T08:49:37Z */
#define RFC_EXAMPLE_T 784111777LL

static void test_retry_after_delta_seconds(void **state)
{
	assert_int_equal(pf_retry_after_parse("0", 0), 0);
	assert_int_equal(pf_retry_after_parse("120", 0), 120000);
	assert_int_equal(pf_retry_after_parse(" 5 ", 0), 5000);
	assert_int_equal(pf_retry_after_parse("\t07", 0), 7000);
	/* Huge values saturate at 30 days instead of overflowing. */
	assert_int_equal(pf_retry_after_parse("99999999999999999999999999", 0),
			 30LL * 24 * 3600 * 1000);
	assert_int_equal(pf_retry_after_parse("2592001", 0), 30LL * 24 * 3600 * 1000);
}

static void test_retry_after_http_date(void **state)
{
	const int64_t t = RFC_EXAMPLE_T;

	assert_int_equal(pf_retry_after_parse("Sun, 06 Nov 1994 08:49:37 GMT", t - 120), 120000);
	assert_int_equal(pf_retry_after_parse("Sun, 06 Nov 1994 08:49:37 GMT", t), 0);
	/* In the past: retry now. */
	assert_int_equal(pf_retry_after_parse("Sun, 06 Nov 1994 08:49:37 GMT", t + 3600), 0);
	assert_int_equal(pf_retry_after_parse("  Sun, 06 Nov 1994 08:49:37 GMT ", t - 1), 1000);
	/* Leap day, year boundary, epoch. */
	assert_int_equal(pf_retry_after_parse("Thu, 29 Feb 2024 00:00:10 GMT", 1709164800), 10000);
	assert_int_equal(pf_retry_after_parse("Fri, 01 Jan 2027 00:00:00 GMT", 1798761600 - 60),
			 60000);
	assert_int_equal(pf_retry_after_parse("Thu, 01 Jan 1970 00:00:05 GMT", 0), 5000);
	assert_int_equal(pf_retry_after_parse("Sat, 01 Jan 2000 00:00:00 GMT", 946684800 - 1),
			 1000);
	/* Far future saturates. */
	assert_int_equal(pf_retry_after_parse("Fri, 01 Jan 2100 00:00:00 GMT", 0),
			 30LL * 24 * 3600 * 1000);
}

static void test_retry_after_garbage(void **state)
{
	static const char *const bad[] = {
	    "",
	    "   ",
	    "-1",
	    "+5",
	    "1.5",
	    "5s",
	    "12 34",
	    "0x10",
	    "soon",
	    "Sun, 06 Nov 1994 08:49:37 UTC",
	    "Sun, 06 Nov 1994 08:49:37",
	    "Sunday, 06-Nov-94 08:49:37 GMT", /* RFC 850: obsolete, not accepted */
	    "Sun Nov  6 08:49:37 1994",	      /* asctime: obsolete, not accepted */
	    "Sun, 6 Nov 1994 08:49:37 GMT",
	    "Sun, 06 nov 1994 08:49:37 GMT",
	    "Xyz, 06 Nov 1994 08:49:37 GMT",
	    "Sun, 32 Jan 1994 08:49:37 GMT",
	    "Sun, 00 Jan 1994 08:49:37 GMT",
	    "Sun, 29 Feb 2023 08:49:37 GMT",
	    "Sun, 31 Apr 2023 08:49:37 GMT",
	    "Sun, 06 Nov 1994 24:00:00 GMT",
	    "Sun, 06 Nov 1994 08:60:00 GMT",
	    "Sun, 06 Nov 1994 08:49:61 GMT",
	    "Sun, 06 Nov 19x4 08:49:37 GMT",
	    "Sun, 06 Nov 1994 08-49-37 GMT",
	    "Sun, 06 Nov 1994 08:49:37 GMTX",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int64_t r = pf_retry_after_parse(bad[i], RFC_EXAMPLE_T);
		if (r != -EINVAL)
			fail_msg("'%s' gave %lld", bad[i], (long long)r);
	}
	assert_int_equal(pf_retry_after_parse(NULL, 0), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bounds_over_many_draws),
	    cmocka_unit_test(test_sequence_reaches_cap),
	    cmocka_unit_test(test_no_overflow),
	    cmocka_unit_test(test_floor_wins_once),
	    cmocka_unit_test(test_reset),
	    cmocka_unit_test(test_retry_after_delta_seconds),
	    cmocka_unit_test(test_retry_after_http_date),
	    cmocka_unit_test(test_retry_after_garbage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
