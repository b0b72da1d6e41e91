/* test_persist.c — the agent-row writer's periodic tick: real changes at every tick, rows whose
 * only change is last_seen once per period (a store of one's own: PF_PERSIST_SEEN_SOLO_MS),
 * continued on the next ticks when max_rows cuts a sweep short; nothing queued for a fleet at
 * rest. Runs against a SQLite file in a temporary directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "fleet/fleet.h"
#include "fleet/persist.h"
#include "store.h"

#define N 5
#define T0 1000000

struct fx {
	char dir[64];
	char db[96];
	struct pf_fleet *fleet;
	struct pf_persist *p;
	struct pf_agent *a[N];
};

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));
	assert_non_null(x);
	snprintf(x->dir, sizeof(x->dir), "/tmp/pf-test-persist-XXXXXX");
	assert_non_null(mkdtemp(x->dir));
	snprintf(x->db, sizeof(x->db), "%s/db", x->dir);
	struct pf_error err = {0};
	x->p = pf_persist_start(x->db, NULL, &err);
	assert_non_null(x->p);
	struct pf_fleet_options fo = {.heartbeat_interval_s = 30};
	x->fleet = pf_fleet_new(&fo);
	assert_non_null(x->fleet);
	for (int i = 0; i < N; i++) {
		uint8_t uid[16] = {0x42, [15] = (uint8_t)i};
		x->a[i] = pf_fleet_get_or_add(x->fleet, uid, T0);
		assert_non_null(x->a[i]);
	}
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;
	pf_persist_stop(x->p);
	pf_fleet_free(x->fleet);
	char path[128];
	const char *sfx[] = {"", "-wal", "-shm"};
	for (size_t i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s%s", x->db, sfx[i]);
		unlink(path);
	}
	rmdir(x->dir);
	free(x);
	return 0;
}

struct seen_count {
	int64_t ms;
	int rows, at_ms;
};

static int count_row(const struct pf_agent_row *row, void *ud)
{
	struct seen_count *c = ud;
	c->rows++;
	c->at_ms += row->last_seen_ms == c->ms;
	return 0;
}

/* Stored rows whose last_seen_ms is ms, once everything queued is committed. */
static int stored_seen_at(struct fx *x, int64_t ms)
{
	pf_persist_sync(x->p);
	struct pf_store *st = pf_store_open(x->db, PF_STORE_SYNC_NORMAL, NULL);
	assert_non_null(st);
	struct seen_count c = {.ms = ms};
	assert_int_equal(pf_store_agents_foreach(st, count_row, &c), 0);
	pf_store_close(st);
	assert_int_equal(c.rows, N);
	return c.at_ms;
}

static void touch_all(struct fx *x, int64_t ms)
{
	for (int i = 0; i < N; i++)
		pf_agent_touch(x->fleet, x->a[i], ms);
}

static void test_seen_once_per_period(void **state)
{
	struct fx *x = *state;
	/* New agents are real changes: written at the first tick. */
	assert_int_equal(pf_persist_tick(x->p, x->fleet, T0, 100), N);
	assert_int_equal(stored_seen_at(x, T0), N);
	/* A fleet at rest: nothing queued, tick after tick. */
	assert_int_equal(pf_persist_tick(x->p, x->fleet, T0 + 500, 100), 0);
	/* Heartbeats only: last_seen waits for the end of the period. */
	touch_all(x, T0 + 1000);
	assert_int_equal(pf_persist_tick(x->p, x->fleet, T0 + 1500, 100), 0);
	assert_int_equal(pf_persist_tick(x->p, x->fleet, T0 + PF_PERSIST_SEEN_SHARED_MS, 100), 0);
	assert_int_equal(pf_persist_tick(x->p, x->fleet, T0 + PF_PERSIST_SEEN_SOLO_MS - 1, 100), 0);
	assert_int_equal(stored_seen_at(x, T0), N);
	assert_int_equal(pf_persist_tick(x->p, x->fleet, T0 + PF_PERSIST_SEEN_SOLO_MS, 100), N);
	assert_int_equal(stored_seen_at(x, T0 + 1000), N);
	/* A real change (the agent connects) does not wait. */
	pf_agent_set_connected(x->fleet, x->a[0], PF_TRANSPORT_WS, x, T0 + PF_PERSIST_SEEN_SOLO_MS);
	assert_int_equal(pf_persist_tick(x->p, x->fleet, T0 + PF_PERSIST_SEEN_SOLO_MS + 500, 100),
			 1);
	assert_int_equal(stored_seen_at(x, T0 + PF_PERSIST_SEEN_SOLO_MS), 1);
	struct pf_persist_stats st;
	pf_persist_stats(x->p, &st);
	assert_int_equal(st.rows_written, 2 * N + 1);
	assert_int_equal(st.errors, 0);
}

static void test_seen_sweep_cut_short(void **state)
{
	struct fx *x = *state;
	assert_int_equal(pf_persist_tick(x->p, x->fleet, T0, 100), N);
	touch_all(x, T0 + 1000);
	const int64_t end = T0 + PF_PERSIST_SEEN_SOLO_MS;
	/* max_rows 2: 2 + 2 + 1 over three ticks, then the period starts over. */
	assert_int_equal(pf_persist_tick(x->p, x->fleet, end, 2), 2);
	assert_int_equal(pf_persist_tick(x->p, x->fleet, end + 500, 2), 2);
	assert_int_equal(pf_persist_tick(x->p, x->fleet, end + 1000, 2), 1);
	touch_all(x, end + 1200);
	assert_int_equal(pf_persist_tick(x->p, x->fleet, end + 1500, 2), 0);
	assert_int_equal(stored_seen_at(x, T0 + 1000), N);
	assert_int_equal(pf_persist_tick(x->p, x->fleet, 2 * end - T0, 100), N);
	assert_int_equal(stored_seen_at(x, end + 1200), N);
}

static void test_clock_step_back(void **state)
{
	struct fx *x = *state;
	assert_int_equal(pf_persist_tick(x->p, x->fleet, T0, 100), N);
	touch_all(x, T0 + 1000);
	/* The clock steps back an hour: the period restarts from there rather than waiting
	 * for the old start to come round again. */
	const int64_t back = T0 - 3600 * 1000;
	assert_int_equal(pf_persist_tick(x->p, x->fleet, back, 100), 0);
	assert_int_equal(pf_persist_tick(x->p, x->fleet, back + PF_PERSIST_SEEN_SOLO_MS, 100), N);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_seen_once_per_period, setup, teardown),
		cmocka_unit_test_setup_teardown(test_seen_sweep_cut_short, setup, teardown),
		cmocka_unit_test_setup_teardown(test_clock_step_back, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
