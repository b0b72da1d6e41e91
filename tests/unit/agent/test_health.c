/* test_health.c — agent/health.c: tree building and change detection. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "health.h"

static void test_tree(void **unused)
{
	struct agent_health *h = agent_health_new(1234);
	struct pf_health t;

	assert_non_null(h);
	assert_int_equal(agent_health_build(h, &t), 0);
	assert_true(t.healthy);
	assert_int_equal(t.n_children, 0);
	assert_int_equal(t.start_time_unix_nano, 1234);
	agent_health_tree_release(&t);

	assert_int_equal(agent_health_register(h, "config"), 0);
	assert_int_equal(agent_health_register(h, "opamp"), 0);
	assert_int_equal(agent_health_register(h, "opamp"), 0); /* idempotent */
	assert_int_equal(agent_health_set(h, "config", true, "local config applied", NULL), 0);
	assert_int_equal(agent_health_set(h, "opamp", false, "disconnected", "connection refused"),
			 0);
	assert_int_equal(agent_health_set(h, "nope", true, "x", NULL), -ENOENT);

	assert_int_equal(agent_health_build(h, &t), 0);
	assert_false(t.healthy);
	assert_string_equal(t.status, "degraded: opamp");
	assert_string_equal(t.last_error, "opamp: connection refused");
	assert_int_equal(t.n_children, 2);
	const struct pf_health *c = NULL, *o = NULL;
	for (size_t i = 0; i < t.n_children; i++) {
		if (strcmp(t.children[i].name, "config") == 0)
			c = &t.children[i].health;
		if (strcmp(t.children[i].name, "opamp") == 0)
			o = &t.children[i].health;
	}
	assert_non_null(c);
	assert_non_null(o);
	assert_true(c->healthy);
	assert_string_equal(c->status, "local config applied");
	assert_null(c->last_error);
	assert_false(o->healthy);
	assert_string_equal(o->last_error, "connection refused");
	assert_true(o->start_time_unix_nano > 0);
	assert_true(o->status_time_unix_nano >= o->start_time_unix_nano);
	agent_health_tree_release(&t);

	assert_int_equal(agent_health_set(h, "opamp", true, "connected", NULL), 0);
	assert_int_equal(agent_health_build(h, &t), 0);
	assert_true(t.healthy);
	assert_string_equal(t.status, "running");
	assert_null(t.last_error);
	agent_health_tree_release(&t);

	assert_int_equal(agent_health_unregister(h, "opamp"), 0);
	assert_int_equal(agent_health_unregister(h, "opamp"), -ENOENT);
	assert_int_equal(agent_health_build(h, &t), 0);
	assert_int_equal(t.n_children, 1);
	agent_health_tree_release(&t);
	agent_health_free(h);
}

static void test_change_detection(void **unused)
{
	struct agent_health *h = agent_health_new(1);
	uint64_t g0 = agent_health_generation(h);

	assert_int_equal(agent_health_register(h, "sampler"), 0);
	uint64_t g1 = agent_health_generation(h);
	assert_true(g1 > g0);

	assert_int_equal(agent_health_set(h, "sampler", true, "running", NULL), 0);
	uint64_t g2 = agent_health_generation(h);
	assert_true(g2 > g1);
	/* Same values again: no change. "" and NULL errors are the same. */
	assert_int_equal(agent_health_set(h, "sampler", true, "running", ""), 0);
	assert_int_equal(agent_health_generation(h), g2);
	assert_int_equal(agent_health_set(h, "sampler", true, "running", "boom"), 0);
	assert_true(agent_health_generation(h) > g2);
	agent_health_free(h);
}

static void count_notify(void *ctx)
{
	(*(int *)ctx)++;
}

/* The notify hook runs once per state change (register, set, unregister), never for a set of
 * the same values, of other figures in the same words, or an unknown name, and not once
 * removed. */
static void test_notify(void **unused)
{
	struct agent_health *h = agent_health_new(1);
	int n = 0;
	agent_health_set_notify(h, count_notify, &n);
	assert_int_equal(agent_health_register(h, "exporter/0"), 0);
	assert_int_equal(n, 1);
	assert_int_equal(agent_health_register(h, "exporter/0"), 0); /* already there */
	assert_int_equal(n, 1);
	assert_int_equal(agent_health_set(h, "exporter/0", true, "ok: 1 export", NULL), 0);
	assert_int_equal(n, 2);
	assert_int_equal(agent_health_set(h, "exporter/0", true, "ok: 1 export", ""), 0);
	assert_int_equal(n, 2);
	assert_int_equal(agent_health_set(h, "exporter/0", true, "ok: 17 export", ""), 0);
	assert_int_equal(n, 2);
	assert_int_equal(agent_health_set(h, "exporter/0", true, "ok: 17 exports", ""), 0);
	assert_int_equal(n, 3);
	assert_int_equal(agent_health_set(h, "exporter/0", true, "ok: 18 exports", "e"), 0);
	assert_int_equal(n, 4);
	assert_int_equal(agent_health_set(h, "exporter/0", false, "ok: 18 exports", "e"), 0);
	assert_int_equal(n, 5);
	assert_int_equal(agent_health_set(h, "nope", false, "x", NULL), -ENOENT);
	assert_int_equal(n, 5);
	assert_int_equal(agent_health_unregister(h, "exporter/0"), 0);
	assert_int_equal(n, 6);
	agent_health_set_notify(h, NULL, NULL);
	assert_int_equal(agent_health_register(h, "sampler"), 0);
	assert_int_equal(n, 6);
	agent_health_free(h);
}

/* Figures are digits, with '.' between digits; everything else is words. */
static void test_same_words(void **unused)
{
	assert_true(agent_health_same_words("samples 10, 0.25%", "samples 9, 12.5%"));
	assert_true(agent_health_same_words("at 99 Hz", "at 19 Hz"));
	assert_true(agent_health_same_words("v1.2.3 ok", "v1.20.3 ok"));
	assert_true(agent_health_same_words(NULL, ""));
	assert_true(agent_health_same_words("end.", "end."));
	assert_false(agent_health_same_words("end 1.", "end 1"));
	assert_false(agent_health_same_words("loading", "sampling"));
	assert_false(agent_health_same_words("captures 0", "captures 1 sampling"));
	assert_false(agent_health_same_words("1 capture", "capture"));
	assert_false(agent_health_same_words("x", NULL));
}

/* A figures-only change moves the generation, not the state generation; a change of words,
 * healthy or last_error moves both. */
static void test_state_generation(void **unused)
{
	struct agent_health *h = agent_health_new(1);
	assert_int_equal(agent_health_register(h, "sampler"), 0);
	uint64_t g = agent_health_generation(h), sg = agent_health_state_generation(h);
	assert_int_equal(agent_health_set(h, "sampler", true, "starting", NULL), 0);
	assert_int_equal(agent_health_set(h, "sampler", true, "samples 10", NULL), 0);
	assert_true(agent_health_state_generation(h) > sg);
	g = agent_health_generation(h);
	sg = agent_health_state_generation(h);
	assert_int_equal(agent_health_set(h, "sampler", true, "samples 12", NULL), 0);
	assert_true(agent_health_generation(h) > g);
	assert_int_equal(agent_health_state_generation(h), sg);
	assert_int_equal(agent_health_set(h, "sampler", true, "samples 12", "ring full"), 0);
	assert_true(agent_health_state_generation(h) > sg);
	agent_health_free(h);
}

static void test_capacity(void **unused)
{
	struct agent_health *h = agent_health_new(1);
	char name[16];
	for (int i = 0; i < AGENT_HEALTH_MAX_COMPONENTS; i++) {
		snprintf(name, sizeof(name), "c%d", i);
		assert_int_equal(agent_health_register(h, name), 0);
	}
	assert_int_equal(agent_health_register(h, "one-too-many"), -ENOSPC);
	agent_health_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tree),
	    cmocka_unit_test(test_change_detection),
	    cmocka_unit_test(test_notify),
	    cmocka_unit_test(test_same_words),
	    cmocka_unit_test(test_state_generation),
	    cmocka_unit_test(test_capacity),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
