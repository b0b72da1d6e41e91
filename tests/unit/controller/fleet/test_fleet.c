/* test_fleet.c — the in-memory fleet: config resolution through assignments and selectors,
 * remote-config state, staleness, the summary, effective-config interning, dirty tracking. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <errno.h>
#include <stdlib.h>

#include <cmocka.h>

#include "fleet/fleet.h"
#include "opamp_codec.h"
#include "pf/hash.h"

static void uid_n(uint8_t uid[16], int n)
{
	memset(uid, 0, 16);
	uid[15] = (uint8_t)n;
	uid[14] = (uint8_t)(n >> 8);
	uid[0] = 0x42;
}

static struct pf_agent *add_agent(struct pf_fleet *f, int n, const char *env, const char *team)
{
	uint8_t uid[16];
	uid_n(uid, n);
	struct pf_agent *a = pf_fleet_get_or_add(f, uid, 1000);
	assert_non_null(a);
	const char *k[] = {"service.name", "env", "team"};
	const char *v[] = {"profleet-agent", env, team};
	assert_int_equal(pf_agent_set_attributes(f, a, k, v, 3), 0);
	a->capabilities = PF_AGENT_CAP_REPORTS_STATUS | PF_AGENT_CAP_ACCEPTS_REMOTE_CONFIG |
			  PF_AGENT_CAP_REPORTS_REMOTE_CONFIG | PF_AGENT_CAP_REPORTS_HEARTBEAT;
	return a;
}

static void put_config(struct pf_fleet *f, const char *name, int64_t version, const char *body)
{
	uint8_t h[32];
	pf_sha256(body, strlen(body), h);
	assert_int_equal(pf_fleet_config_set(f, name, version, h, body, strlen(body), 1), 0);
}

static int pushes;
static void count_push(struct pf_agent *a, void *ud)
{
	(void)a;
	(void)ud;
	pushes++;
}

static bool keep_not_t2(const char *name, void *ud)
{
	(void)ud;
	return strcmp(name, "t2") != 0;
}

static void test_resolution(void **state)
{
	(void)state;
	struct pf_fleet_options o = {.heartbeat_interval_s = 30};
	struct pf_fleet *f = pf_fleet_new(&o);
	struct pf_agent *prod = add_agent(f, 1, "prod", "a");
	struct pf_agent *dev = add_agent(f, 2, "dev", "b");
	assert_null(prod->desired);
	assert_int_equal(pf_agent_config_state(prod), PF_CFG_UNSET);

	put_config(f, "default", 1, "profiling: {}\n");
	put_config(f, "prodcfg", 1, "profiling: {enabled: false}\n");
	pf_fleet_reconcile(f);
	assert_string_equal(prod->desired->name, "default");
	assert_string_equal(dev->desired->name, "default");

	struct pf_error err = {0};
	assert_int_equal(pf_fleet_assignment_set(f, "p", "env=prod", "prodcfg", 10, &err), 0);
	pf_fleet_reconcile(f);
	assert_string_equal(prod->desired->name, "prodcfg");
	assert_string_equal(dev->desired->name, "default");

	/* Higher priority wins; ties go by assignment name. */
	put_config(f, "teamb", 1, "profiling: {mode: triggered}\n");
	assert_int_equal(pf_fleet_assignment_set(f, "t", "team in (a,b)", "teamb", 20, &err), 0);
	pf_fleet_reconcile(f);
	assert_string_equal(prod->desired->name, "teamb");
	assert_string_equal(dev->desired->name, "teamb");
	assert_int_equal(pf_fleet_assignment_remove(f, "t"), 0);
	assert_int_equal(pf_fleet_assignment_remove(f, "t"), -ENOENT);
	pf_fleet_reconcile(f);
	assert_string_equal(prod->desired->name, "prodcfg");

	/* An assignment whose config does not exist falls through. */
	assert_int_equal(pf_fleet_assignment_set(f, "ghost", "", "nope", 99, &err), 0);
	pf_fleet_reconcile(f);
	assert_string_equal(prod->desired->name, "prodcfg");

	/* Retain: only the assignments keep() names stay (a reload after missed changes). */
	assert_int_equal(pf_fleet_assignment_set(f, "t2", "team=a", "teamb", 30, &err), 0);
	assert_int_equal(pf_fleet_assignments_retain(f, keep_not_t2, NULL), 1);
	assert_int_equal(pf_fleet_assignment_remove(f, "t2"), -ENOENT);
	assert_int_equal(pf_fleet_assignments_retain(f, keep_not_t2, NULL), 0);
	pf_fleet_reconcile(f);
	assert_string_equal(prod->desired->name, "prodcfg");

	/* A bad selector is refused with a reason. */
	pf_error_clear(&err);
	assert_int_equal(pf_fleet_assignment_set(f, "bad", "env=", "prodcfg", 1, &err), -EINVAL);
	assert_true(strlen(err.msg) > 0);

	/* Attributes changing move the agent to another config. */
	const char *k[] = {"env"};
	const char *v[] = {"prod"};
	assert_int_equal(pf_agent_set_attributes(f, dev, k, v, 1), 0);
	assert_string_equal(dev->desired->name, "prodcfg");
	pf_fleet_free(f);
}

static void test_config_state_and_push(void **state)
{
	(void)state;
	struct pf_fleet_options o = {.heartbeat_interval_s = 30};
	struct pf_fleet *f = pf_fleet_new(&o);
	pf_fleet_set_push_hook(f, count_push, NULL);
	struct pf_agent *a = add_agent(f, 1, "prod", "a");
	struct pf_agent *b = add_agent(f, 2, "prod", "a");
	b->capabilities &= ~(uint64_t)PF_AGENT_CAP_ACCEPTS_REMOTE_CONFIG;
	pf_agent_set_connected(f, a, PF_TRANSPORT_WS, (void *)1, 1000);
	pf_agent_set_connected(f, b, PF_TRANSPORT_WS, (void *)2, 1000);

	pushes = 0;
	put_config(f, "default", 1, "profiling: {}\n");
	assert_int_equal(pf_fleet_reconcile(f), 1); /* b does not accept remote config */
	assert_int_equal(pushes, 1);
	assert_true(pf_agent_needs_config(a));
	assert_false(pf_agent_needs_config(b));
	assert_int_equal(pf_agent_config_state(a), PF_CFG_APPLYING);

	assert_int_equal(pf_agent_set_remote_status(f, a, a->desired->hash, 32, PF_RCS_APPLIED, ""),
			 0);
	assert_false(pf_agent_needs_config(a));
	assert_int_equal(pf_agent_config_state(a), PF_CFG_APPLIED);
	pushes = 0;
	assert_int_equal(pf_fleet_reconcile(f), 0);
	assert_int_equal(pushes, 0);

	/* FAILED on the current hash: no resend loop. */
	assert_int_equal(pf_agent_set_remote_status(f, a, a->desired->hash, 32, PF_RCS_FAILED,
						    "profiling.x: bad"),
			 0);
	assert_false(pf_agent_needs_config(a));
	assert_int_equal(pf_agent_config_state(a), PF_CFG_FAILED);

	/* A new version changes the hash: pushed again. */
	put_config(f, "default", 2, "profiling: {enabled: false}\n");
	pushes = 0;
	assert_int_equal(pf_fleet_reconcile(f), 1);
	assert_int_equal(pf_agent_config_state(a), PF_CFG_APPLYING);

	/* Disconnected agents are not pushed to; they get it on connect. */
	pf_agent_set_disconnected(f, a);
	put_config(f, "default", 3, "profiling: {enabled: true}\n");
	assert_int_equal(pf_fleet_reconcile(f), 0);
	assert_true(pf_agent_needs_config(a));
	pf_fleet_free(f);
}

static void test_stale_and_summary(void **state)
{
	(void)state;
	struct pf_fleet_options o = {.heartbeat_interval_s = 10};
	struct pf_fleet *f = pf_fleet_new(&o);
	struct pf_agent *a = add_agent(f, 1, "prod", "a");
	struct pf_agent *b = add_agent(f, 2, "prod", "a");
	struct pf_agent *c = add_agent(f, 3, "prod", "a");
	c->capabilities &= ~(uint64_t)PF_AGENT_CAP_REPORTS_HEARTBEAT;
	pf_agent_set_connected(f, a, PF_TRANSPORT_WS, (void *)1, 1000);
	pf_agent_set_connected(f, b, PF_TRANSPORT_WS, (void *)2, 1000);
	pf_agent_set_connected(f, c, PF_TRANSPORT_WS, (void *)3, 1000);
	assert_int_equal(pf_agent_set_health(f, b, false, "{\"healthy\":false}"), 0);

	/* 3 missed 10 s heartbeats: stale after 30 s. */
	assert_false(pf_agent_is_stale(f, a, 1000 + 30000));
	assert_true(pf_agent_is_stale(f, a, 1000 + 30001));
	/* Without ReportsHeartbeat no staleness is inferred. */
	assert_false(pf_agent_is_stale(f, c, 1000 + 999999));

	struct pf_fleet_summary s;
	pf_fleet_summary(f, 2000, &s);
	assert_int_equal(s.agents, 3);
	assert_int_equal(s.connected, 3);
	assert_int_equal(s.healthy, 2);
	assert_int_equal(s.stale, 0);
	assert_int_equal(s.by_state[PF_CFG_UNSET], 3);
	pf_fleet_summary(f, 1000 + 40000, &s);
	assert_int_equal(s.stale, 2);
	assert_int_equal(s.healthy, 1);

	pf_agent_set_disconnected(f, a);
	pf_fleet_summary(f, 2000, &s);
	assert_int_equal(s.connected, 2);
	pf_fleet_free(f);
}

static void test_many_agents_and_lookup(void **state)
{
	(void)state;
	struct pf_fleet_options o = {0};
	struct pf_fleet *f = pf_fleet_new(&o);
	assert_int_equal(pf_fleet_heartbeat_s(f), 30);
	for (int i = 0; i < 5000; i++) {
		uint8_t uid[16];
		uid_n(uid, i);
		assert_non_null(pf_fleet_get_or_add(f, uid, 5));
	}
	assert_int_equal(pf_fleet_count(f), 5000);
	for (int i = 0; i < 5000; i += 7) {
		uint8_t uid[16];
		uid_n(uid, i);
		struct pf_agent *a = pf_fleet_find(f, uid);
		assert_non_null(a);
		assert_memory_equal(a->uid, uid, 16);
	}
	uint8_t missing[16];
	uid_n(missing, 9999);
	assert_null(pf_fleet_find(f, missing));
	size_t it = 0, n = 0;
	while (pf_fleet_next(f, &it))
		n++;
	assert_int_equal(n, 5000);
	pf_fleet_free(f);
}

static void test_effective_interning(void **state)
{
	(void)state;
	struct pf_fleet_options o = {0};
	struct pf_fleet *f = pf_fleet_new(&o);
	struct pf_agent *a = add_agent(f, 1, "x", "y");
	struct pf_agent *b = add_agent(f, 2, "x", "y");
	const char *body = "profiling:\n  enabled: true\n";
	assert_int_equal(pf_agent_set_effective(f, a, body, strlen(body)), 0);
	assert_int_equal(pf_agent_set_effective(f, b, body, strlen(body)), 0);
	assert_ptr_equal(a->effective, b->effective);
	assert_int_equal(a->effective->refs, 2);
	assert_int_equal(pf_agent_set_effective(f, b, "other", 5), 0);
	assert_ptr_not_equal(a->effective, b->effective);
	assert_int_equal(a->effective->refs, 1);
	assert_string_equal(b->effective->body, "other");
	pf_fleet_free(f);
}

static int drained;
static void on_drain(struct pf_agent *a, bool full, void *ud)
{
	(void)a;
	(void)full;
	(void)ud;
	drained++;
}

static void test_dirty_drain(void **state)
{
	(void)state;
	struct pf_fleet_options o = {0};
	struct pf_fleet *f = pf_fleet_new(&o);
	for (int i = 0; i < 10; i++)
		add_agent(f, i, "e", "t");
	drained = 0;
	assert_int_equal(pf_fleet_pending(f, false), 10);
	assert_int_equal(pf_fleet_pending(f, true), 0);
	assert_int_equal(pf_fleet_drain_dirty(f, 4, on_drain, NULL), 4);
	assert_int_equal(pf_fleet_pending(f, false), 6);
	assert_int_equal(pf_fleet_drain_dirty(f, 100, on_drain, NULL), 6);
	assert_int_equal(pf_fleet_drain_dirty(f, 100, on_drain, NULL), 0);
	assert_int_equal(pf_fleet_pending(f, false), 0);
	/* Touch twice: listed once. */
	uint8_t uid[16];
	uid_n(uid, 3);
	struct pf_agent *a = pf_fleet_find(f, uid);
	pf_agent_touch(f, a, 5);
	pf_agent_touch(f, a, 6);
	assert_int_equal(pf_fleet_pending(f, true), 1);
	/* Liveness alone waits for the slow sweep. */
	assert_int_equal(pf_fleet_drain_dirty(f, 100, on_drain, NULL), 0);
	assert_int_equal(pf_fleet_drain_seen(f, 100, on_drain, NULL), 1);
	assert_int_equal(pf_fleet_pending(f, true), 0);
	assert_int_equal(pf_fleet_drain_seen(f, 100, on_drain, NULL), 0);
	pf_agent_touch(f, a, 7);
	pf_agent_mark_dirty(f, a);
	/* Flagged both ways: the sweep leaves it to the full write, which clears both. */
	assert_int_equal(pf_fleet_drain_seen(f, 100, on_drain, NULL), 0);
	assert_int_equal(pf_fleet_pending(f, true), 1);
	drained = 0;
	assert_int_equal(pf_fleet_drain_dirty(f, 100, on_drain, NULL), 1);
	assert_int_equal(drained, 1);
	assert_int_equal(pf_fleet_pending(f, true), 0);
	/* The full write covered last_seen too. */
	assert_int_equal(pf_fleet_drain_seen(f, 100, on_drain, NULL), 0);
	/* A sweep cut short by max leaves the rest counted for the next one. */
	for (int i = 0; i < 10; i++) {
		uid_n(uid, i);
		pf_agent_touch(f, pf_fleet_find(f, uid), 8);
	}
	assert_int_equal(pf_fleet_pending(f, true), 10);
	assert_int_equal(pf_fleet_drain_seen(f, 7, on_drain, NULL), 7);
	assert_int_equal(pf_fleet_pending(f, true), 3);
	assert_int_equal(pf_fleet_drain_seen(f, 100, on_drain, NULL), 3);
	assert_int_equal(pf_fleet_pending(f, true), 0);
	/* Taken for dead by other replicas: every agent connected here is written again. */
	for (int i = 1; i <= 2; i++) {
		uid_n(uid, i);
		pf_agent_set_connected(f, pf_fleet_find(f, uid), PF_TRANSPORT_WS, f, 9);
	}
	assert_int_equal(pf_fleet_drain_dirty(f, 100, on_drain, NULL), 2);
	assert_int_equal(pf_fleet_mark_connected_dirty(f), 2);
	assert_int_equal(pf_fleet_pending(f, false), 2);
	assert_int_equal(pf_fleet_drain_dirty(f, 100, on_drain, NULL), 2);
	pf_fleet_free(f);
}

static void test_attr_lookup(void **state)
{
	(void)state;
	struct pf_fleet_options o = {0};
	struct pf_fleet *f = pf_fleet_new(&o);
	struct pf_agent *a = add_agent(f, 1, "prod", "core");
	assert_string_equal(pf_agent_attr(a, "env"), "prod");
	assert_string_equal(pf_agent_attr(a, "team"), "core");
	assert_null(pf_agent_attr(a, "region"));
	struct pf_buf b;
	pf_buf_init(&b, 4096);
	assert_int_equal(pf_agent_attrs_json(a, &b), 0);
	assert_string_equal(pf_buf_str(&b),
			    "{\"env\":\"prod\",\"service.name\":\"profleet-agent\",\"team\":\"core\"}");
	pf_buf_release(&b);
	pf_fleet_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resolution),
		cmocka_unit_test(test_config_state_and_push),
		cmocka_unit_test(test_stale_and_summary),
		cmocka_unit_test(test_many_agents_and_lookup),
		cmocka_unit_test(test_effective_interning),
		cmocka_unit_test(test_dirty_drain),
		cmocka_unit_test(test_attr_lookup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
