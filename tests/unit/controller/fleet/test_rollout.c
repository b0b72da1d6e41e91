/* test_rollout.c — the staged-rollout state machine (fleet/rollout.h) with a real store in a
 * temp directory, a real fleet and a push hook that records which agents would be sent a
 * config: batch plans, strategy parsing, batches advancing on APPLIED, the failure threshold
 * (halt, early halt), apply timeouts (failed vs offline), rollback to each agent's old
 * version, operator actions, the plain-PUT contract (served versions, pins), and a reload
 * from the store as after a kill -9. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "api_fixture.h"
#include "fleet/fleet.h"
#include "api/api_rollouts.h"
#include "fleet/rollout.h"
#include "opamp_codec.h"
#include "pf/hash.h"
#include "store.h"

#define T0 1700000000000LL
#define N 20

static const char *const V1 = "profiling:\n  sampling:\n    frequency_hz: 49\n";
static const char *const V2 = "profiling:\n  sampling:\n    frequency_hz: 19\n";

struct fx {
	char dir[64];
	struct pf_store *store;
	struct pf_fleet *fleet;
	struct pf_rollouts *ro;
	struct pf_agent *a[N];
	uint8_t h1[32], h2[32];
	size_t pushes;
};

static void push_hook(struct pf_agent *a, void *ud)
{
	(void)a;
	((struct fx *)ud)->pushes++;
}

static void put_version(struct fx *x, const char *body, uint8_t h[32], bool serve)
{
	int64_t v = 0;
	bool created = false;
	pf_sha256(body, strlen(body), h);
	assert_int_equal(
	    pf_store_config_put(x->store, "default", body, strlen(body), h, T0, &v, &created), 0);
	if (serve) {
		assert_int_equal(
		    pf_fleet_config_set(x->fleet, "default", v, h, body, strlen(body), T0), 0);
		pf_fleet_reconcile(x->fleet);
	}
}

/* N agents with uids 0190…01..N, attributes team (even/odd) and idx. */
static void add_agents(struct fx *x)
{
	for (int i = 0; i < N; i++) {
		uint8_t uid[16] = {0x01, 0x90, [15] = (uint8_t)(i + 1)};
		char idx[8];
		snprintf(idx, sizeof(idx), "%d", i);
		const char *k[] = {"team", "idx"};
		const char *v[] = {i % 2 ? "odd" : "even", idx};
		x->a[i] = pf_fleet_get_or_add(x->fleet, uid, T0);
		assert_int_equal(pf_agent_set_attributes(x->fleet, x->a[i], k, v, 2), 0);
	}
}

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));
	api_fixture_open("rollout", x->dir, &x->store, &x->fleet);
	pf_fleet_set_push_hook(x->fleet, push_hook, x);
	add_agents(x);
	for (int i = 0; i < N; i++) {
		x->a[i]->capabilities = PF_AGENT_CAP_ACCEPTS_REMOTE_CONFIG;
		pf_agent_set_connected(x->fleet, x->a[i], PF_TRANSPORT_WS, x, T0);
	}
	put_version(x, V1, x->h1, true);
	put_version(x, V2, x->h2, false);
	for (int i = 0; i < N; i++)
		pf_agent_set_remote_status(x->fleet, x->a[i], x->h1, 32, PF_RCS_APPLIED, NULL);
	x->ro = pf_rollouts_new(x->fleet, x->store);
	assert_non_null(x->ro);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;
	pf_rollouts_free(x->ro);
	api_fixture_close(x->dir, x->store, x->fleet);
	free(x);
	return 0;
}

/* Every agent pinned to v2 and not yet answering answers: APPLIED, or FAILED when fail. */
static size_t answer(struct fx *x, bool (*refuse)(int i))
{
	size_t n = 0;
	for (int i = 0; i < N; i++) {
		struct pf_agent *a = x->a[i];
		if (!a->desired || a->desired->version != 2 ||
		    (a->has_reported_hash && memcmp(a->reported_hash, x->h2, 32) == 0))
			continue;
		bool f = refuse && refuse(i);
		pf_agent_set_remote_status(x->fleet, a, x->h2, 32,
					   f ? PF_RCS_FAILED : PF_RCS_APPLIED,
					   f ? "exporters[0].endpoint: refused" : NULL);
		n++;
	}
	return n;
}

static json_t *get(struct fx *x, const char *id)
{
	int rc;
	json_t *o = pf_api_rollout_json(x->ro, id, &rc);
	assert_non_null(o);
	return o;
}

static void expect_state(struct fx *x, const char *id, const char *state, int current_batch)
{
	json_t *o = get(x, id);
	assert_string_equal(json_string_value(json_object_get(o, "state")), state);
	if (current_batch)
		assert_int_equal(json_integer_value(json_object_get(o, "current_batch")),
				 current_batch);
	json_decref(o);
}

static json_int_t batch_field(struct fx *x, const char *id, size_t b, const char *key)
{
	json_t *o = get(x, id);
	json_int_t v = json_integer_value(
	    json_object_get(json_array_get(json_object_get(o, "batches"), b), key));
	json_decref(o);
	return v;
}

static size_t on_version(struct fx *x, int64_t v)
{
	size_t n = 0;
	for (int i = 0; i < N; i++)
		n += x->a[i]->desired && x->a[i]->desired->version == v;
	return n;
}

static void strategy(struct pf_rollout_strategy *s, uint32_t initial, uint32_t mult, uint32_t pause,
		     uint32_t fail_pct, bool rollback)
{
	pf_rollout_strategy_defaults(s);
	s->initial = initial;
	s->multiplier = mult;
	s->pause_seconds = pause;
	s->max_failure_percent = fail_pct;
	s->apply_timeout_seconds = 10;
	s->on_failure = rollback ? PF_ROLLOUT_ROLLBACK : PF_ROLLOUT_HALT;
}

static void test_plan(void **state)
{
	(void)state;
	struct pf_rollout_strategy s;
	uint32_t sz[16];
	pf_rollout_strategy_defaults(&s);
	assert_int_equal(pf_rollout_plan(&s, 100, sz, 16), 4);
	assert_int_equal(sz[0], 3);
	assert_int_equal(sz[1], 15);
	assert_int_equal(sz[2], 75);
	assert_int_equal(sz[3], 7);
	s.max_batch_percent = 10; /* capped at 10 of 100 */
	assert_int_equal(pf_rollout_plan(&s, 100, sz, 16), 11);
	assert_int_equal(sz[0], 3);
	assert_int_equal(sz[1], 10);
	assert_int_equal(sz[10], 7);
	s.max_batch_percent = 1; /* 1 % of 5 agents rounds down: batches of one */
	assert_int_equal(pf_rollout_plan(&s, 5, sz, 16), 5);
	pf_rollout_strategy_defaults(&s);
	assert_int_equal(pf_rollout_plan(&s, 2, sz, 16), 1);
	assert_int_equal(sz[0], 2);
	/* More batches than room: the count is still right. */
	s.initial = 1;
	s.multiplier = 1;
	assert_int_equal(pf_rollout_plan(&s, 1000, sz, 16), 1000);
}

static void test_strategy_parse(void **state)
{
	(void)state;
	struct pf_rollout_strategy s;
	struct pf_error err = {0};
	pf_rollout_strategy_defaults(&s);
	json_t *o =
	    json_loads("{\"initial\":7,\"on_failure\":\"rollback\",\"pause_seconds\":0}", 0, NULL);
	assert_int_equal(pf_rollout_strategy_parse(o, &s, &err), 0);
	json_decref(o);
	assert_int_equal(s.initial, 7);
	assert_int_equal(s.pause_seconds, 0);
	assert_int_equal(s.multiplier, 5);
	assert_int_equal(s.on_failure, PF_ROLLOUT_ROLLBACK);
	static const struct {
		const char *json, *path;
	} bad[] = {
	    {"{\"initial\":0}", "strategy.initial"},
	    {"{\"max_failure_percent\":101}", "strategy.max_failure_percent"},
	    {"{\"multiplier\":\"5\"}", "strategy.multiplier"},
	    {"{\"on_failure\":\"retry\"}", "strategy.on_failure"},
	    {"{\"batch\":1}", "strategy.batch"},
	    {"[]", "strategy"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pf_error_clear(&err);
		o = json_loads(bad[i].json, JSON_DECODE_ANY, NULL);
		assert_int_equal(pf_rollout_strategy_parse(o, &s, &err), -EINVAL);
		assert_string_equal(err.path, bad[i].path);
		json_decref(o);
	}
}

static void test_batches_advance_and_complete(void **state)
{
	struct fx *x = *state;
	struct pf_rollout_strategy s;
	struct pf_error err = {0};
	char id[PF_ROLLOUT_ID_MAX + 1];
	size_t matched = 0;
	strategy(&s, 2, 3, 5, 0, false); /* batches 2, 6, 12 */
	x->pushes = 0;
	assert_int_equal(
	    pf_rollouts_create(x->ro, "default", 2, "", &s, "t", T0, id, &matched, &err), 0);
	assert_int_equal(matched, N);
	assert_int_equal(on_version(x, 2), 2);
	assert_int_equal(x->pushes, 2);
	assert_string_equal(pf_rollouts_active_for(x->ro, "default"), id);
	/* A second rollout of the same config is refused. */
	char id2[PF_ROLLOUT_ID_MAX + 1];
	assert_int_equal(pf_rollouts_create(x->ro, "default", 2, "", &s, "t", T0, id2, NULL, &err),
			 -EEXIST);

	pf_rollouts_tick(x->ro, T0 + 100);
	expect_state(x, id, "running", 1);
	assert_int_equal(answer(x, NULL), 2);
	pf_rollouts_tick(x->ro, T0 + 200);
	expect_state(x, id, "running", 2);
	assert_int_equal(on_version(x, 2), 2); /* the pause */
	pf_rollouts_tick(x->ro, T0 + 200 + 4999);
	assert_int_equal(on_version(x, 2), 2);
	pf_rollouts_tick(x->ro, T0 + 200 + 5000);
	assert_int_equal(on_version(x, 2), 8);
	assert_int_equal(batch_field(x, id, 1, "pending"), 6);
	assert_int_equal(answer(x, NULL), 6);
	pf_rollouts_tick(x->ro, T0 + 6000);
	pf_rollouts_tick(x->ro, T0 + 12000);
	assert_int_equal(on_version(x, 2), N);
	assert_int_equal(answer(x, NULL), 12);
	pf_rollouts_tick(x->ro, T0 + 13000);
	expect_state(x, id, "completed", 3);
	assert_int_equal(pf_rollouts_active(x->ro), 0);
	/* v2 is served now: no agent keeps a pin. */
	assert_int_equal(pf_fleet_config_find(x->fleet, "default")->version, 2);
	for (int i = 0; i < N; i++)
		assert_null(x->a[i]->pin);
	assert_int_equal(batch_field(x, id, 2, "applied"), 12);
}

/* Batches 2, 10, 8 in index order; one failure in batch 2 is exactly 10 % (not over), two
 * in batch 3 are over: halt at once, then roll every moved agent back to v1. */
static bool fail_some(int i)
{
	return i == 5 || i == 13 || i == 15;
}

static void test_halt_and_rollback(void **state)
{
	struct fx *x = *state;
	struct pf_rollout_strategy s;
	struct pf_error err = {0};
	char id[PF_ROLLOUT_ID_MAX + 1];
	strategy(&s, 2, 5, 0, 10, true);
	assert_int_equal(pf_rollouts_create(x->ro, "default", 0, NULL, &s, "t", T0, id, NULL, &err),
			 0);
	answer(x, fail_some);
	pf_rollouts_tick(x->ro, T0 + 100);
	assert_int_equal(on_version(x, 2), 12); /* pause 0: batch 2 at once */
	answer(x, fail_some);
	pf_rollouts_tick(x->ro, T0 + 200);
	expect_state(x, id, "running", 3);
	assert_int_equal(batch_field(x, id, 1, "failed"), 1);
	assert_int_equal(on_version(x, 2), N);
	/* One failure of 8 is 12.5 %: over, and sure to stay over whatever the rest do. */
	pf_agent_set_remote_status(x->fleet, x->a[13], x->h2, 32, PF_RCS_FAILED, "refused");
	pf_rollouts_tick(x->ro, T0 + 300);
	json_t *o = get(x, id);
	assert_string_equal(json_string_value(json_object_get(o, "state")), "rolling_back");
	assert_non_null(strstr(json_string_value(json_object_get(o, "reason")), "batch 3: 1 of 8"));
	json_t *b3 = json_array_get(json_object_get(o, "batches"), 2);
	assert_int_equal(json_integer_value(json_object_get(b3, "failed")), 1);
	assert_string_equal(json_string_value(json_object_get(
				json_array_get(json_object_get(b3, "errors"), 0), "error")),
			    "refused");
	json_decref(o);
	/* Every moved agent is pinned back to v1 and pushed. */
	assert_int_equal(on_version(x, 1), N);
	assert_int_equal(pf_rollouts_action(x->ro, id, PF_ROLLOUT_RESUME, T0 + 300, &err),
			 -EALREADY);
	for (int i = 0; i < N; i++)
		pf_agent_set_remote_status(x->fleet, x->a[i], x->h1, 32, PF_RCS_APPLIED, NULL);
	pf_rollouts_tick(x->ro, T0 + 400);
	expect_state(x, id, "rolled_back", 0);
	assert_int_equal(batch_field(x, id, 0, "reverted"), 2);
	assert_int_equal(batch_field(x, id, 2, "reverted"), 8);
	assert_int_equal(batch_field(x, id, 1, "applied"), 9); /* the forward result is kept */
	assert_int_equal(pf_rollouts_active(x->ro), 0);
	for (int i = 0; i < N; i++)
		assert_null(x->a[i]->pin); /* v1 is served: the pins went */
	assert_null(pf_rollouts_active_for(x->ro, "default"));
}

/* An agent that is offline at the batch timeout does not count; a connected one that never
 * answered fails. Cancel stops where it is: moved agents keep v2. */
static void test_timeout_offline_and_cancel(void **state)
{
	struct fx *x = *state;
	struct pf_rollout_strategy s;
	struct pf_error err = {0};
	char id[PF_ROLLOUT_ID_MAX + 1];
	strategy(&s, 4, 2, 30, 50, false);
	assert_int_equal(pf_rollouts_create(x->ro, "default", 2, "", &s, "t", T0, id, NULL, &err),
			 0);
	pf_agent_set_disconnected(x->fleet, x->a[0]);
	pf_agent_set_remote_status(x->fleet, x->a[1], x->h2, 32, PF_RCS_APPLIED, NULL);
	pf_agent_set_remote_status(x->fleet, x->a[3], x->h2, 32, PF_RCS_APPLIED, NULL);
	pf_rollouts_tick(x->ro, T0 + 9999);
	assert_int_equal(batch_field(x, id, 0, "pending"), 2);
	pf_rollouts_tick(x->ro, T0 + 10000);
	assert_int_equal(batch_field(x, id, 0, "offline"), 1);
	assert_int_equal(batch_field(x, id, 0, "failed"), 1);
	assert_int_equal(batch_field(x, id, 0, "applied"), 2);
	expect_state(x, id, "running", 2); /* 1 of 3 = 33 % <= 50 % */
	assert_int_equal(pf_rollouts_action(x->ro, id, PF_ROLLOUT_PAUSE, T0 + 10001, &err), 0);
	assert_int_equal(pf_rollouts_action(x->ro, id, PF_ROLLOUT_PAUSE, T0 + 10002, &err),
			 -EALREADY);
	assert_int_equal(pf_rollouts_action(x->ro, id, PF_ROLLOUT_CANCEL, T0 + 10003, &err), 0);
	expect_state(x, id, "cancelled", 0);
	assert_int_equal(pf_rollouts_action(x->ro, id, PF_ROLLOUT_RESUME, T0 + 10004, &err),
			 -ENOENT);
	assert_int_equal(on_version(x, 2), 4); /* a[0] is offline but pinned too */
	assert_non_null(x->a[0]->pin);
	assert_int_equal(x->a[0]->pin->version, 2);
	/* The plain PUT's reset: every pin of the config goes. */
	assert_int_equal(pf_fleet_unpin_config(x->fleet, "default", 0), 4);
	assert_int_equal(on_version(x, 1), N);
}

static void test_errors(void **state)
{
	struct fx *x = *state;
	struct pf_rollout_strategy s;
	struct pf_error err = {0};
	char id[PF_ROLLOUT_ID_MAX + 1];
	pf_rollout_strategy_defaults(&s);
	assert_int_equal(pf_rollouts_create(x->ro, "default", 7, "", &s, "t", T0, id, NULL, &err),
			 -EINVAL);
	assert_string_equal(err.path, "version");
	pf_error_clear(&err);
	assert_int_equal(pf_rollouts_create(x->ro, "nope", 0, "", &s, "t", T0, id, NULL, &err),
			 -EINVAL);
	assert_string_equal(err.path, "config");
	pf_error_clear(&err);
	assert_int_equal(
	    pf_rollouts_create(x->ro, "default", 2, "team in (", &s, "t", T0, id, NULL, &err),
	    -EINVAL);
	assert_string_equal(err.path, "selector");
	assert_null(strstr(err.msg, "selector: selector:"));
	pf_error_clear(&err);
	assert_int_equal(
	    pf_rollouts_create(x->ro, "default", 2, "team=none", &s, "t", T0, id, NULL, &err),
	    -ENOENT);
	pf_error_clear(&err);
	/* Everyone already has v1. */
	assert_int_equal(pf_rollouts_create(x->ro, "default", 1, "", &s, "t", T0, id, NULL, &err),
			 -EALREADY);
	assert_int_equal(pf_rollouts_active(x->ro), 0);
}

/* PF_ROLLOUTS_MAX_ACTIVE rollouts at once, of configs c0..: the next one is refused until one
 * ends. */
static void test_active_limit(void **state)
{
	struct fx *x = *state;
	struct pf_rollout_strategy s;
	struct pf_error err = {0};
	char id[PF_ROLLOUTS_MAX_ACTIVE + 1][PF_ROLLOUT_ID_MAX + 1];
	pf_rollout_strategy_defaults(&s);
	assert_true(PF_ROLLOUTS_MAX_ACTIVE < N);
	for (int i = 0; i <= PF_ROLLOUTS_MAX_ACTIVE; i++) {
		char name[16], sel[32], body[64];
		uint8_t h[32];
		snprintf(name, sizeof(name), "c%d", i);
		snprintf(sel, sizeof(sel), "idx=%d", i);
		for (int v = 1; v <= 2; v++) {
			int64_t ver;
			bool created;
			snprintf(body, sizeof(body), "profiling:\n  enabled: %s\n",
				 v == 1 ? "true" : "false");
			pf_sha256(body, strlen(body), h);
			assert_int_equal(pf_store_config_put(x->store, name, body, strlen(body), h,
							     T0, &ver, &created),
					 0);
			if (v == 1)
				assert_int_equal(pf_fleet_config_set(x->fleet, name, ver, h, body,
								     strlen(body), T0),
						 0);
		}
		assert_int_equal(pf_fleet_assignment_set(x->fleet, name, sel, name, 1, &err), 0);
	}
	pf_fleet_reconcile(x->fleet);
	for (int i = 0; i <= PF_ROLLOUTS_MAX_ACTIVE; i++) {
		char name[16];
		snprintf(name, sizeof(name), "c%d", i);
		int rc = pf_rollouts_create(x->ro, name, 2, "", &s, "t", T0, id[i], NULL, &err);
		assert_int_equal(rc, i < PF_ROLLOUTS_MAX_ACTIVE ? 0 : -ENOSPC);
	}
	assert_int_equal(pf_rollouts_active(x->ro), PF_ROLLOUTS_MAX_ACTIVE);
	assert_int_equal(pf_rollouts_action(x->ro, id[0], PF_ROLLOUT_CANCEL, T0 + 1, &err), 0);
	char last[16];
	snprintf(last, sizeof(last), "c%d", PF_ROLLOUTS_MAX_ACTIVE);
	assert_int_equal(pf_rollouts_create(x->ro, last, 2, "", &s, "t", T0 + 2,
					    id[PF_ROLLOUTS_MAX_ACTIVE], NULL, &err),
			 0);
}

/* A paused rollout after a kill -9: a new fleet loaded as the controller does (latest version
 * first, then served versions and pins), the rollout resumes paused with its batch, resume
 * starts the next batch at once. */
static void test_reload_after_restart(void **state)
{
	struct fx *x = *state;
	struct pf_rollout_strategy s;
	struct pf_error err = {0};
	char id[PF_ROLLOUT_ID_MAX + 1];
	assert_int_equal(pf_store_config_serving_set(x->store, "default", 1), 0); /* as staging */
	strategy(&s, 3, 2, 60, 0, false);
	assert_int_equal(pf_rollouts_create(x->ro, "default", 2, "", &s, "t", T0, id, NULL, &err),
			 0);
	answer(x, NULL);
	pf_rollouts_tick(x->ro, T0 + 100);
	assert_int_equal(pf_rollouts_action(x->ro, id, PF_ROLLOUT_PAUSE, T0 + 200, &err), 0);

	/* kill -9: nothing is flushed; the state written at each transition is what counts. */
	pf_rollouts_free(x->ro);
	pf_fleet_free(x->fleet);
	struct pf_fleet_options fo = {.heartbeat_interval_s = 30};
	x->fleet = pf_fleet_new(&fo);
	pf_fleet_set_push_hook(x->fleet, push_hook, x);
	assert_int_equal(pf_fleet_config_set(x->fleet, "default", 2, x->h2, V2, strlen(V2), T0), 0);
	add_agents(x);
	assert_int_equal(pf_rollouts_load_pins(x->store, x->fleet, &err), 0);
	pf_fleet_reconcile(x->fleet);
	assert_int_equal(pf_fleet_config_find(x->fleet, "default")->version, 1);
	assert_int_equal(on_version(x, 2), 3);
	x->ro = pf_rollouts_new(x->fleet, x->store);
	assert_int_equal(pf_rollouts_load(x->ro, T0 + 5000, &err), 0);
	assert_int_equal(pf_rollouts_active(x->ro), 1);
	expect_state(x, id, "paused", 2);
	assert_int_equal(batch_field(x, id, 0, "applied"), 3);
	for (int i = 0; i < N; i++)
		x->a[i]->capabilities = PF_AGENT_CAP_ACCEPTS_REMOTE_CONFIG;
	assert_int_equal(pf_rollouts_action(x->ro, id, PF_ROLLOUT_RESUME, T0 + 6000, &err), 0);
	pf_rollouts_tick(x->ro, T0 + 6000);
	assert_int_equal(on_version(x, 2), 9);
	expect_state(x, id, "running", 2);
	/* Listing reads the store. */
	int rc;
	json_t *l = pf_api_rollouts_list_json(x->ro, true, 10, NULL, &rc);
	assert_non_null(l);
	assert_int_equal(json_array_size(json_object_get(l, "rollouts")), 1);
	json_decref(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_plan),	  cmocka_unit_test(test_strategy_parse),
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	    T(test_batches_advance_and_complete), T(test_halt_and_rollback),
	    T(test_timeout_offline_and_cancel),	  T(test_errors),
	    T(test_reload_after_restart),	  T(test_active_limit),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
