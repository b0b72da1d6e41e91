/* test_ratelimit.c — agent/limits/ratelimit.c: the shared max_profiles_per_minute limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "limits/ratelimit.h"
#include "triggers/capture.h"

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

/* The capture engine admits captures against the same limit as the data plane's windows: a
 * capture takes one place under its trigger's source, a full minute refuses it. */
static void test_shared_with_capture_engine(void **unused)
{
	(void)unused;
	struct agent_ratelimit *rl = agent_ratelimit_new(3);
	struct agent_captures *c = agent_captures_new(NULL);
	assert_non_null(rl);
	assert_non_null(c);
	agent_captures_set_ratelimit(c, rl);
	struct pf_capture_request r;
	struct pf_capture_status st;
	memset(&r, 0, sizeof(r));
	snprintf(r.profile_type, sizeof(r.profile_type), "cpu");
	r.duration_seconds = 5;
	r.frequency_hz = 99;
	/* a window (data plane), an on-demand capture, a high_cpu capture: 3 of 3 */
	assert_true(agent_ratelimit_take(rl, AGENT_SRC_WINDOW, 1000));
	snprintf(r.id, sizeof(r.id), "od-1");
	assert_int_equal(agent_captures_request(c, &r, "on_demand", 1100, &st), 0);
	snprintf(r.id, sizeof(r.id), "hc-1");
	assert_int_equal(agent_captures_request(c, &r, "high_cpu", 1200, &st), 0);
	/* the next capture and the next window are over the limit */
	snprintf(r.id, sizeof(r.id), "hc-2");
	assert_int_equal(agent_captures_request(c, &r, "high_cpu", 1300, &st), -EPERM);
	assert_string_equal(st.error_code, "rate_limited");
	assert_non_null(strstr(st.error, "max_profiles_per_minute is 3"));
	assert_false(agent_ratelimit_take(rl, AGENT_SRC_WINDOW, 1400));
	struct agent_ratelimit_stats rs;
	agent_ratelimit_stats(rl, 1400, &rs);
	assert_int_equal(rs.allowed[AGENT_SRC_CAPTURE], 1);
	assert_int_equal(rs.allowed[AGENT_SRC_HIGH_CPU], 1);
	assert_int_equal(rs.refused[AGENT_SRC_HIGH_CPU], 1);
	assert_int_equal(rs.refused[AGENT_SRC_WINDOW], 1);
	/* a minute after the first: room for one again */
	snprintf(r.id, sizeof(r.id), "od-2");
	assert_int_equal(agent_captures_request(c, &r, "on_demand", 61000, &st), 0);
	agent_captures_set_ratelimit(c, NULL);
	agent_captures_free(c);
	agent_ratelimit_free(rl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_limit_holds_per_minute),
	    cmocka_unit_test(test_sliding_window_never_exceeds),
	    cmocka_unit_test(test_set_limit_keeps_history),
	    cmocka_unit_test(test_shared_with_capture_engine),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
