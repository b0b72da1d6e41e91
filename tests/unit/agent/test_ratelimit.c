/* test_ratelimit.c — agent/ratelimit.c: the shared max_profiles_per_minute limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ratelimit.h"

static void test_limit_holds_per_minute(void **unused)
{
	(void)unused;
	struct agent_ratelimit *rl = agent_ratelimit_new(3);
	assert_non_null(rl);
	uint64_t t0 = 1000000;
	assert_int_equal(agent_ratelimit_available(rl, t0), 3);
	assert_true(agent_ratelimit_take(rl, AGENT_SRC_WINDOW, t0));
	assert_true(agent_ratelimit_take(rl, AGENT_SRC_PPROF, t0 + 10000));
	assert_true(agent_ratelimit_take(rl, AGENT_SRC_HIGH_CPU, t0 + 20000));
	/* the fourth within the minute: refused, whatever the source */
	assert_false(agent_ratelimit_take(rl, AGENT_SRC_CAPTURE, t0 + 30000));
	assert_false(agent_ratelimit_take(rl, AGENT_SRC_WINDOW, t0 + 59999));
	assert_int_equal(agent_ratelimit_available(rl, t0 + 59999), 0);
	/* the first ages out exactly 60 s after it was allowed */
	assert_int_equal(agent_ratelimit_available(rl, t0 + 60000), 1);
	assert_true(agent_ratelimit_take(rl, AGENT_SRC_SLOW_SPAN, t0 + 60000));
	assert_false(agent_ratelimit_take(rl, AGENT_SRC_SLOW_SPAN, t0 + 60001));

	struct agent_ratelimit_stats st;
	agent_ratelimit_stats(rl, t0 + 60001, &st);
	assert_int_equal(st.limit, 3);
	assert_int_equal(st.used, 3);
	assert_int_equal(st.allowed[AGENT_SRC_WINDOW], 1);
	assert_int_equal(st.allowed[AGENT_SRC_PPROF], 1);
	assert_int_equal(st.allowed[AGENT_SRC_HIGH_CPU], 1);
	assert_int_equal(st.allowed[AGENT_SRC_SLOW_SPAN], 1);
	assert_int_equal(st.refused[AGENT_SRC_CAPTURE], 1);
	assert_int_equal(st.refused[AGENT_SRC_WINDOW], 1);
	assert_int_equal(st.refused[AGENT_SRC_SLOW_SPAN], 1);
	agent_ratelimit_free(rl);
}

/* A steady stream at twice the limit: no 60 s interval ever sees more than the limit. */
static void test_sliding_window_never_exceeds(void **unused)
{
	(void)unused;
	const uint32_t limit = 10;
	struct agent_ratelimit *rl = agent_ratelimit_new(limit);
	assert_non_null(rl);
	uint64_t allowed_at[64];
	size_t n = 0;
	for (uint64_t t = 0; t < 300000; t += 3000) /* 20 per minute offered */
		if (agent_ratelimit_take(rl, AGENT_SRC_WINDOW, 5000 + t)) {
			assert_true(n < 64);
			allowed_at[n++] = 5000 + t;
		}
	/* 5 minutes at 10 per minute: 50 allowed */
	assert_int_equal(n, 50);
	for (size_t i = 0; i + limit < n; i++)
		assert_true(allowed_at[i + limit] - allowed_at[i] >= AGENT_RATELIMIT_WINDOW_MS);
	agent_ratelimit_free(rl);
}

static void test_set_limit_keeps_history(void **unused)
{
	(void)unused;
	struct agent_ratelimit *rl = agent_ratelimit_new(5);
	assert_non_null(rl);
	for (int i = 0; i < 5; i++)
		assert_true(agent_ratelimit_take(rl, AGENT_SRC_WINDOW, 100 + (uint64_t)i));
	/* lowered to 2: the 5 of the last minute count, nothing until they age out */
	assert_int_equal(agent_ratelimit_set_limit(rl, 2), 0);
	assert_false(agent_ratelimit_take(rl, AGENT_SRC_WINDOW, 200));
	/* the newest two (t=103, 104) are kept: room again once t=103 ages out */
	assert_false(agent_ratelimit_take(rl, AGENT_SRC_WINDOW, 60102));
	assert_true(agent_ratelimit_take(rl, AGENT_SRC_WINDOW, 60103));
	/* raised: room at once (t=104 aged out, 60103 counts) */
	assert_int_equal(agent_ratelimit_set_limit(rl, 4), 0);
	assert_int_equal(agent_ratelimit_available(rl, 60105), 3);
	/* out-of-range limits are clamped */
	assert_int_equal(agent_ratelimit_set_limit(rl, 0), 0);
	struct agent_ratelimit_stats st;
	agent_ratelimit_stats(rl, 60105, &st);
	assert_int_equal(st.limit, 1);
	assert_int_equal(agent_ratelimit_set_limit(rl, 50000), 0);
	agent_ratelimit_stats(rl, 60105, &st);
	assert_int_equal(st.limit, AGENT_RATELIMIT_MAX);
	assert_string_equal(agent_profile_source_name(AGENT_SRC_HIGH_CPU), "high_cpu");
	agent_ratelimit_free(rl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_limit_holds_per_minute),
	    cmocka_unit_test(test_sliding_window_never_exceeds),
	    cmocka_unit_test(test_set_limit_keeps_history),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
