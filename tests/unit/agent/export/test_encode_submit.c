/* test_encode_submit.c — agent/export/encode_submit.c: a window as one OTLP request or one per
 * process (busiest first, at most max), what the sink is handed and when, on the fixture
 * windows of tests/lib/prof_fixture.h (pid 100: 8 samples, thread "worker" among them; pid
 * 200: 3 samples, thread "other"). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "export/encode_submit.h"
#include "prof_fixture.h"
#include "profcheck.h"

struct seen {
	int ready, bytes, windows;
	int ready_rc;
	size_t ready_n;
	bool has_worker[4], has_other[4];
	size_t len[4];
};

static bool contains(const uint8_t *d, size_t n, const char *s)
{
	return memmem(d, n, s, strlen(s)) != NULL;
}

static int on_ready(void *ctx, const struct agent_encoded *e)
{
	struct seen *s = ctx;
	s->ready++;
	s->ready_n = e->n;
	return s->ready_rc;
}

static void on_bytes(void *ctx, const uint8_t *data, size_t len, const uint8_t id[16])
{
	struct seen *s = ctx;
	(void)id;
	struct profcheck_result res = {0};
	assert_int_equal(profcheck_run(data, len, &res), 0);
	profcheck_release(&res);
	if (s->bytes < 4) {
		s->has_worker[s->bytes] = contains(data, len, "worker");
		s->has_other[s->bytes] = contains(data, len, "other");
		s->len[s->bytes] = len;
	}
	s->bytes++;
}

static void on_window(void *ctx, const struct pf_prof_window *w)
{
	struct seen *s = ctx;
	assert_true(pf_prof_window_samples(w) > 0);
	s->windows++;
}

static int run(struct pf_prof_window *w, bool per_process, size_t max, bool bytes, struct seen *s,
	       struct agent_encoded *e)
{
	struct agent_submit_sink sink = {
	    .ready = on_ready, .bytes = bytes ? on_bytes : NULL, .window = on_window, .ctx = s};
	struct pf_error err = {0};
	return agent_encode_submit(w, per_process, max, &sink, e, &err);
}

static void test_whole_window(void **state)
{
	(void)state;
	struct pf_prof_window *w = prof_fixture_window(0);
	struct seen s = {0};
	struct agent_encoded e = {0};
	assert_int_equal(run(w, false, 1, true, &s, &e), 0);
	assert_int_equal(e.n, 1);
	assert_int_equal(s.ready, 1);
	assert_int_equal(s.ready_n, 1);
	assert_int_equal(s.bytes, 1);
	assert_int_equal(s.windows, 1);
	assert_true(s.has_worker[0] && s.has_other[0]); /* both processes in one request */
	assert_int_equal(e.bytes, s.len[0]);
	/* the buffers are kept for the next window */
	memset(&s, 0, sizeof(s));
	assert_int_equal(run(w, false, 1, true, &s, &e), 0);
	assert_int_equal(e.n, 1);
	assert_int_equal(s.bytes, 1);
	agent_encoded_release(&e);
	pf_prof_window_free(w);
}

static void test_per_process_busiest_first(void **state)
{
	(void)state;
	struct pf_prof_window *w = prof_fixture_window(0);
	struct seen s = {0};
	struct agent_encoded e = {0};
	assert_int_equal(run(w, true, 8, true, &s, &e), 0);
	assert_int_equal(e.n, 2);
	assert_int_equal(s.bytes, 2);
	assert_true(s.has_worker[0] && !s.has_other[0]); /* pid 100, 8 samples */
	assert_true(s.has_other[1] && !s.has_worker[1]); /* pid 200, 3 samples */
	assert_int_equal(e.bytes, s.len[0] + s.len[1]);
	assert_int_equal(s.windows, 1);
	agent_encoded_release(&e);

	/* at most max: the busiest only */
	memset(&s, 0, sizeof(s));
	assert_int_equal(run(w, true, 1, true, &s, &e), 0);
	assert_int_equal(e.n, 1);
	assert_true(s.has_worker[0]);
	agent_encoded_release(&e);
	pf_prof_window_free(w);
}

static void test_ready_refuses(void **state)
{
	(void)state;
	struct pf_prof_window *w = prof_fixture_window(0);
	struct seen s = {.ready_rc = -EHOSTUNREACH};
	struct agent_encoded e = {0};
	assert_int_equal(run(w, true, 8, true, &s, &e), -EHOSTUNREACH);
	assert_int_equal(s.ready, 1);
	assert_int_equal(s.ready_n, 2); /* encoded, then refused: nothing handed */
	assert_int_equal(s.bytes, 0);
	assert_int_equal(s.windows, 0);
	agent_encoded_release(&e);
	pf_prof_window_free(w);
}

static void test_no_bytes_sink_no_encoding(void **state)
{
	(void)state;
	struct pf_prof_window *w = prof_fixture_window(0);
	struct seen s = {0};
	struct agent_encoded e = {0};
	assert_int_equal(run(w, false, 1, false, &s, &e), 0);
	assert_int_equal(e.n, 0);
	assert_int_equal(s.ready, 1);
	assert_int_equal(s.windows, 1);
	agent_encoded_release(&e);
	pf_prof_window_free(w);
}

static void test_empty_window(void **state)
{
	(void)state;
	struct pf_prof_window *w = prof_fixture_window(0);
	for (size_t i = 0; i < w->n_processes; i++) /* processes that were not on a CPU */
		((struct pf_prof_process *)&w->processes[i])->n_samples = 0;
	struct seen s = {0};
	struct agent_encoded e = {0};
	assert_int_equal(run(w, false, 1, true, &s, &e), 0);
	assert_int_equal(e.n, 0);
	assert_int_equal(s.ready_n, 0);
	assert_int_equal(s.bytes, 0);
	assert_int_equal(s.windows, 0); /* no samples: the window is not handed either */
	assert_int_equal(run(w, true, 8, true, &s, &e), 0);
	assert_int_equal(e.n, 0);
	agent_encoded_release(&e);
	pf_prof_window_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_whole_window),  cmocka_unit_test(test_per_process_busiest_first),
	    cmocka_unit_test(test_ready_refuses), cmocka_unit_test(test_no_bytes_sink_no_encoding),
	    cmocka_unit_test(test_empty_window),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
