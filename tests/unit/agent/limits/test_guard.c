/* test_guard.c — agent/limits/guard.c: the overhead guard's steps, floor, hysteresis and window, with
 * injected readings; set-up work judged on its own budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "limits/guard.h"

#define S 1000000000ULL
#define MS 1000000ULL

/* A fake agent: each second it uses cpu_ms of CPU in its process and bpf_ms in BPF. */
struct fake {
	struct agent_guard *g;
	struct agent_guard_sample s;
};

static uint32_t run(struct fake *f, unsigned seconds, uint64_t cpu_ms, uint64_t bpf_ms,
		    uint64_t rss_mib)
{
	uint32_t hz = 0;
	for (unsigned i = 0; i < seconds; i++) {
		f->s.mono_ns += S;
		f->s.cpu_ns += cpu_ms * MS;
		f->s.bpf_ns += bpf_ms * MS;
		f->s.rss_bytes = rss_mib << 20;
		hz = agent_guard_update(f->g, &f->s);
	}
	return hz;
}

/* Readings 2 s apart (the worker's tick without the high_cpu trigger): the verdict is on the
 * last 10 s, not on the 20 s the ring could hold. A burst 12-20 s ago is forgotten. */
static void test_two_second_readings(void **unused)
{
	(void)unused;
	struct agent_guard_budget b = {
	    .max_cpu_percent = 1.0, .max_memory_mb = 64, .frequency_hz = 99};
	struct fake f = {.g = agent_guard_new(&b), .s = {.mono_ns = 1000 * S}};
	struct agent_guard_state st;
	assert_non_null(f.g);
	assert_int_equal(agent_guard_update(f.g, &f.s), 99);
	for (int i = 0; i < 4; i++) { /* 8 s at 0.5% */
		f.s.mono_ns += 2 * S;
		f.s.cpu_ns += 10 * MS;
		assert_int_equal(agent_guard_update(f.g, &f.s), 99);
	}
	/* 1.5 s later: under 0.9 s of the next would be ignored, this one counts; the window
	 * (9.5 s) is full */
	f.s.mono_ns += 1500 * MS;
	f.s.cpu_ns += 7 * MS;
	assert_int_equal(agent_guard_update(f.g, &f.s), 99);
	agent_guard_state(f.g, &st);
	assert_true(st.measured);
	assert_true(st.cpu_percent > 0.49 && st.cpu_percent < 0.51);
	for (int i = 0; i < 5; i++) { /* 10 s at 0.2%: the 0.5% readings leave the window */
		f.s.mono_ns += 2 * S;
		f.s.cpu_ns += 4 * MS;
		assert_int_equal(agent_guard_update(f.g, &f.s), 99);
	}
	agent_guard_state(f.g, &st);
	assert_true(st.cpu_percent > 0.19 && st.cpu_percent < 0.21);
	/* readings under 0.9 s apart are ignored */
	f.s.mono_ns += 500 * MS;
	f.s.cpu_ns += 500 * MS;
	assert_int_equal(agent_guard_update(f.g, &f.s), 99);
	agent_guard_state(f.g, &st);
	assert_true(st.cpu_percent > 0.19 && st.cpu_percent < 0.21);
	agent_guard_free(f.g);
}

static void test_steps_down_to_the_floor(void **unused)
{
	(void)unused;
	struct agent_guard_budget b = {
	    .max_cpu_percent = 1.0, .max_memory_mb = 64, .frequency_hz = 99};
	struct fake f = {.g = agent_guard_new(&b), .s = {.mono_ns = 1000 * S}};
	struct agent_guard_state st;
	char line[160];
	assert_non_null(f.g);
	/* first reading: the window starts */
	assert_int_equal(run(&f, 1, 10, 10, 20), 99);
	agent_guard_state(f.g, &st);
	assert_false(st.measured);
	agent_guard_status(&st, line, sizeof(line));
	assert_string_equal(line, "99 Hz of 99 Hz, measuring (window 10 s)");
	/* 2% of one CPU (1% process + 1% BPF): the window must fill before a verdict */
	assert_int_equal(run(&f, 9, 10, 10, 20), 99);
	assert_int_equal(run(&f, 1, 10, 10, 20), 49);
	agent_guard_state(f.g, &st);
	assert_true(st.throttled);
	assert_true(st.over_cpu);
	assert_false(st.over_memory);
	assert_true(st.cpu_percent > 1.99 && st.cpu_percent < 2.01);
	agent_guard_status(&st, line, sizeof(line));
	assert_string_equal(line, "throttled: 49 Hz of 99 Hz, cpu 2.00% > 1.00%");
	/* one step per window: the new frequency is measured for a full window first */
	assert_int_equal(run(&f, 9, 10, 10, 20), 49);
	assert_int_equal(run(&f, 1, 10, 10, 20), 24);
	assert_int_equal(run(&f, 10, 10, 10, 20), 12);
	assert_int_equal(run(&f, 10, 10, 10, 20), 9);
	/* the floor holds however long it stays over budget */
	assert_int_equal(run(&f, 60, 10, 10, 20), 9);
	agent_guard_state(f.g, &st);
	assert_int_equal(st.level, 4);
	assert_int_equal(st.steps_down, 4);
	agent_guard_status(&st, line, sizeof(line));
	assert_string_equal(line, "throttled: 9 Hz of 99 Hz (floor), cpu 2.00% > 1.00%");

	/* back under budget: the last change is long past, so the sliding window decides: 8 s
	 * in, it holds 0.48% (0.64% projected at 12 Hz, under 80% of the budget); then one step
	 * per hold time, along the same steps */
	assert_int_equal(run(&f, 7, 1, 0, 20), 9);
	assert_int_equal(run(&f, 1, 1, 0, 20), 12);
	agent_guard_state(f.g, &st);
	agent_guard_status(&st, line, sizeof(line));
	assert_string_equal(line, "throttled: 12 Hz of 99 Hz, cpu 0.48% of 1.00%, memory 20 of 64 "
				  "MiB, restoring step by step");
	assert_int_equal(run(&f, 29, 1, 0, 20), 12);
	assert_int_equal(run(&f, 1, 1, 0, 20), 24);
	assert_int_equal(run(&f, 30, 1, 0, 20), 49);
	assert_int_equal(run(&f, 30, 1, 0, 20), 99);
	agent_guard_state(f.g, &st);
	assert_false(st.throttled);
	assert_int_equal(st.steps_up, 4);
	agent_guard_status(&st, line, sizeof(line));
	assert_string_equal(line, "99 Hz, cpu 0.10% of 1.00%, memory 20 of 64 MiB");
	agent_guard_free(f.g);
}

/* Under budget but not by the margin once scaled to the next step: it stays throttled. */
static void test_hysteresis(void **unused)
{
	(void)unused;
	struct agent_guard_budget b = {
	    .max_cpu_percent = 1.0, .max_memory_mb = 64, .frequency_hz = 100};
	struct fake f = {.g = agent_guard_new(&b), .s = {.mono_ns = 5 * S}};
	assert_non_null(f.g);
	assert_int_equal(run(&f, 11, 15, 0, 10), 50); /* 1.5% */
	/* 0.5% at 50 Hz projects to 1.0% at 100 Hz: over 80% of the budget, no restore */
	assert_int_equal(run(&f, 120, 5, 0, 10), 50);
	char line[160];
	struct agent_guard_state st;
	agent_guard_state(f.g, &st);
	agent_guard_status(&st, line, sizeof(line));
	assert_string_equal(line, "throttled: 50 Hz of 100 Hz, cpu 0.50% of 1.00%, memory 10 of "
				  "64 MiB, restoring step by step");
	/* use drops to 0.1%: the sliding window follows second by second; 2 s in it holds
	 * 0.42% (0.84% projected, over the margin), 3 s in 0.38% (0.76%): restored */
	assert_int_equal(run(&f, 2, 1, 0, 10), 50);
	assert_int_equal(run(&f, 1, 1, 0, 10), 100);
	agent_guard_free(f.g);
}

static void test_memory(void **unused)
{
	(void)unused;
	struct agent_guard_budget b = {
	    .max_cpu_percent = 5.0, .max_memory_mb = 64, .frequency_hz = 99};
	struct fake f = {.g = agent_guard_new(&b), .s = {.mono_ns = S}};
	assert_non_null(f.g);
	/* one spike over the budget within the window: not sustained, no step */
	assert_int_equal(run(&f, 6, 1, 0, 30), 99);
	assert_int_equal(run(&f, 1, 1, 0, 100), 99);
	assert_int_equal(run(&f, 10, 1, 0, 30), 99);
	/* above it for a whole window: one step down */
	assert_int_equal(run(&f, 10, 1, 0, 80), 99);
	assert_int_equal(run(&f, 1, 1, 0, 80), 49);
	struct agent_guard_state st;
	char line[160];
	agent_guard_state(f.g, &st);
	assert_true(st.over_memory);
	assert_false(st.over_cpu);
	agent_guard_status(&st, line, sizeof(line));
	assert_string_equal(line, "throttled: 49 Hz of 99 Hz, memory 80 MiB > 64 MiB");
	/* 60 MiB: under the budget but over 80% of it: held */
	assert_int_equal(run(&f, 60, 1, 0, 60), 49);
	assert_int_equal(run(&f, 31, 1, 0, 40), 99);
	/* RSS that is not the agent's own (sanitizer builds): never over budget */
	b.ignore_memory = true;
	assert_true(agent_guard_set_budget(f.g, &b));
	assert_int_equal(run(&f, 40, 1, 0, 500), 99);
	agent_guard_state(f.g, &st);
	assert_true(st.measured);
	assert_false(st.over_memory);
	agent_guard_status(&st, line, sizeof(line));
	assert_string_equal(line, "99 Hz, cpu 0.10% of 5.00%, memory 500 MiB (not enforced)");
	agent_guard_free(f.g);
}

static void test_budget_change_and_edges(void **unused)
{
	(void)unused;
	struct agent_guard_budget b = {
	    .max_cpu_percent = 0.01, .max_memory_mb = 64, .frequency_hz = 999};
	struct fake f = {.g = agent_guard_new(&b), .s = {.mono_ns = S}};
	assert_non_null(f.g);
	assert_int_equal(run(&f, 11, 5, 0, 10), 499);
	assert_int_equal(run(&f, 10, 5, 0, 10), 249);
	/* the same budget again changes nothing */
	assert_false(agent_guard_set_budget(f.g, &b));
	struct agent_guard_state st;
	agent_guard_state(f.g, &st);
	assert_int_equal(st.hz, 249);
	/* a raised budget starts over at the configured frequency */
	b.max_cpu_percent = 5;
	assert_true(agent_guard_set_budget(f.g, &b));
	agent_guard_state(f.g, &st);
	assert_int_equal(st.hz, 999);
	assert_false(st.throttled);
	assert_false(st.measured);
	assert_int_equal(run(&f, 30, 5, 0, 10), 999);
	/* readings less than 0.9 s apart are ignored (no window from them) */
	for (int i = 0; i < 50; i++) {
		f.s.mono_ns += 100 * MS;
		f.s.cpu_ns += 100 * MS; /* 100% of a CPU */
		agent_guard_update(f.g, &f.s);
	}
	agent_guard_state(f.g, &st);
	assert_int_equal(st.hz, 499); /* 5 s of 100% pushed the window's mean over 5% */

	/* a configured frequency at the floor is never lowered; a counter that goes back
	 * (BPF stats reset) counts as zero */
	struct agent_guard_budget low = {
	    .max_cpu_percent = 0.01, .max_memory_mb = 8, .frequency_hz = 9};
	struct agent_guard *g = agent_guard_new(&low);
	assert_non_null(g);
	struct agent_guard_sample s = {.mono_ns = S, .bpf_ns = 1000 * S, .rss_bytes = 100 << 20};
	for (int i = 0; i < 40; i++) {
		s.mono_ns += S;
		s.cpu_ns += 50 * MS;
		s.bpf_ns = i == 0 ? 0 : s.bpf_ns;
		assert_int_equal(agent_guard_update(g, &s), 9);
	}
	agent_guard_state(g, &st);
	assert_true(st.over_cpu);
	assert_true(st.cpu_percent > 4.99 && st.cpu_percent < 5.01);
	char line[160];
	agent_guard_status(&st, line, sizeof(line));
	assert_string_equal(line, "over budget: 9 Hz of 9 Hz (floor), cpu 5.00% > 0.01%");
	agent_guard_free(g);

	/* fixed (nothing to slow down): measured and reported, never stepped */
	struct agent_guard_budget fixed = {
	    .max_cpu_percent = 1, .max_memory_mb = 64, .frequency_hz = 99, .fixed = true};
	g = agent_guard_new(&fixed);
	assert_non_null(g);
	s = (struct agent_guard_sample){.mono_ns = S};
	for (int i = 0; i < 40; i++) {
		s.mono_ns += S;
		s.cpu_ns += 30 * MS;
		assert_int_equal(agent_guard_update(g, &s), 99);
	}
	agent_guard_state(g, &st);
	agent_guard_status(&st, line, sizeof(line));
	assert_string_equal(line, "over budget: 99 Hz of 99 Hz, cpu 3.00% > 1.00%");
	fixed.fixed = false; /* a sampler appeared: a new start */
	assert_true(agent_guard_set_budget(g, &fixed));
	agent_guard_free(g);
	agent_guard_free(f.g);
}

/* A start meets every process of the host: set-up work within its own budget does not lower
 * the frequency, even when the agent's whole cost is several times max_cpu_percent; set-up
 * past its budget counts with its excess only. */
static void test_setup_own_budget(void **unused)
{
	(void)unused;
	struct agent_guard_budget b = {
	    .max_cpu_percent = 1.0, .max_memory_mb = 64, .frequency_hz = 99};
	struct fake f = {.g = agent_guard_new(&b), .s = {.mono_ns = 1000 * S}};
	struct agent_guard_state st;
	char line[256];
	assert_non_null(f.g);
	agent_guard_update(f.g, &f.s);
	/* 30 s: 4.5% of a CPU in all, 4% of it set-up (under its 5%): sampling costs 0.5% */
	for (unsigned i = 0; i < 30; i++) {
		f.s.setup_ns += 40 * MS;
		assert_int_equal(run(&f, 1, 45, 0, 10), 99);
	}
	agent_guard_state(f.g, &st);
	assert_false(st.throttled);
	assert_false(st.over_cpu);
	assert_true(st.cpu_percent > 0.49 && st.cpu_percent < 0.51);
	assert_true(st.setup_percent > 3.99 && st.setup_percent < 4.01);
	agent_guard_status(&st, line, sizeof(line));
	assert_string_equal(line, "99 Hz, cpu 0.50% of 1.00%, set-up 4.00% of 5.00%, "
				  "memory 10 of 64 MiB");
	/* set-up at 6%: its 1% excess plus 0.5% of sampling is over the budget */
	for (unsigned i = 0; i < 10; i++) {
		f.s.setup_ns += 60 * MS;
		run(&f, 1, 65, 0, 10);
	}
	agent_guard_state(f.g, &st);
	assert_true(st.throttled);
	assert_true(st.over_cpu && st.cpu_percent > 1.0 && st.cpu_percent < 1.51);
	/* a counter that claims more set-up than the whole cost is capped at it */
	struct fake h = {.g = agent_guard_new(&b), .s = {.mono_ns = 1000 * S}};
	agent_guard_update(h.g, &h.s);
	for (unsigned i = 0; i < 10; i++) {
		h.s.setup_ns += 100 * MS;
		run(&h, 1, 2, 0, 10);
	}
	agent_guard_state(h.g, &st);
	assert_true(st.cpu_percent >= 0 && st.cpu_percent < 0.01);
	assert_false(st.throttled);
	agent_guard_free(h.g);
	agent_guard_free(f.g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_steps_down_to_the_floor),
	    cmocka_unit_test(test_two_second_readings),
	    cmocka_unit_test(test_hysteresis),
	    cmocka_unit_test(test_memory),
	    cmocka_unit_test(test_budget_change_and_edges),
	    cmocka_unit_test(test_setup_own_budget),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
