/* test_capture.c — the capture state machine (fleet/capture.h) with a real store in a temp
 * directory, a real fleet and a send hook that records what would go over OpAMP: per-agent
 * states at creation, the capture state table, statuses (order, finality, strangers), the
 * per-agent limit, cancel, deadlines, resend on a new connection, plain-HTTP delivery in the
 * reply, and a reload from the store as after a restart. */
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
#include "api/api_captures.h"
#include "fleet/capture.h"
#include "fleet/fleet.h"
#include "store.h"

#define T0 1700000000000LL

struct sent {
	uint8_t uid[16];
	char type[32];
	char id[PF_CAPTURE_ID_MAX + 1];
};

struct fx {
	char dir[64];
	struct pf_store *store;
	struct pf_fleet *fleet;
	struct pf_captures *caps;
	struct sent sent[64];
	size_t n_sent;
	int send_rc; /* what the hook answers */
	struct pf_agent *a[4];
};

static int send_hook(struct pf_agent *a, const char *type, const uint8_t *data, size_t len,
		     void *ud)
{
	struct fx *x = ud;
	struct sent *s = &x->sent[x->n_sent % 64];
	if (x->send_rc)
		return x->send_rc;
	memcpy(s->uid, a->uid, 16);
	snprintf(s->type, sizeof(s->type), "%s", type);
	json_t *o = json_loadb((const char *)data, len, 0, NULL);
	assert_non_null(o);
	snprintf(s->id, sizeof(s->id), "%s", json_string_value(json_object_get(o, "id")));
	json_decref(o);
	x->n_sent++;
	return 0;
}

static struct pf_agent *agent(struct fx *x, int i, bool connected, bool capable, const char *team)
{
	uint8_t uid[16] = {0x01, 0x90, [15] = (uint8_t)(i + 1)};
	struct pf_agent *a = pf_fleet_get_or_add(x->fleet, uid, T0);
	const char *k[] = {"team", "idx"};
	char idx[8];
	snprintf(idx, sizeof(idx), "%d", i);
	const char *v[] = {team, idx};
	assert_int_equal(pf_agent_set_attributes(x->fleet, a, k, v, 2), 0);
	if (connected)
		pf_agent_set_connected(x->fleet, a, PF_TRANSPORT_WS, x, T0);
	a->capture_capable = capable;
	return a;
}

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));
	api_fixture_open("capture", x->dir, &x->store, &x->fleet);
	struct pf_captures_options co = {.grace_s = 10};
	x->caps = pf_captures_new(&co, x->fleet, x->store, send_hook, x);
	assert_non_null(x->caps);
	x->a[0] = agent(x, 0, true, true, "a");
	x->a[1] = agent(x, 1, true, false, "a");
	x->a[2] = agent(x, 2, false, true, "a");
	x->a[3] = agent(x, 3, true, true, "b");
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;
	pf_captures_free(x->caps);
	api_fixture_close(x->dir, x->store, x->fleet);
	free(x);
	return 0;
}

/* Creates a capture of `selector` for `duration` s; returns 0 or the error. */
static int create(struct fx *x, const char *selector, uint32_t duration, int64_t now,
		  char id[PF_CAPTURE_ID_MAX + 1], struct pf_error *err)
{
	struct pf_capture_request r = {
	    .profile_type = "cpu", .duration_seconds = duration, .frequency_hz = 99};
	size_t matched = 0;
	char json[128];
	/* the normalized form api_captures.c stores (the reload rebuilds the request from it) */
	snprintf(json, sizeof(json),
		 "{\"agents\":\"%s\",\"duration_seconds\":%u,\"frequency_hz\":99,"
		 "\"processes\":[],\"profile_type\":\"cpu\"}",
		 selector, duration);
	int rc = pf_captures_create(x->caps, &r, selector, json, "tester", now, id, &matched, err);
	pf_capture_request_release(&r);
	return rc;
}

static void status(struct fx *x, int agent_i, const char *id, const char *st, const char *extra,
		   int64_t now)
{
	char json[512];
	snprintf(json, sizeof(json), "{\"id\":\"%s\",\"state\":\"%s\"%s}", id, st,
		 extra ? extra : "");
	pf_captures_on_custom(x->caps, x->a[agent_i], PF_CAPTURE_CAPABILITY, PF_CAPTURE_TYPE_STATUS,
			      (const uint8_t *)json, strlen(json), now);
}

/* The capture's state and agent i's state (agents are listed in uid order = index order). */
static void expect(struct fx *x, const char *id, const char *cap_state, int agent_i,
		   const char *agent_state)
{
	int rc;
	json_t *o = pf_api_capture_json(x->caps, x->store, id, &rc);
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(o, "state")), cap_state);
	if (agent_i >= 0) {
		json_t *agents = json_object_get(o, "agents");
		json_t *ag = NULL;
		char want[16];
		snprintf(want, sizeof(want), "%02x", agent_i + 1);
		for (size_t i = 0; i < json_array_size(agents); i++) {
			const char *u = json_string_value(
			    json_object_get(json_array_get(agents, i), "instance_uid"));
			if (strcmp(u + strlen(u) - 2, want) == 0)
				ag = json_array_get(agents, i);
		}
		assert_non_null(ag);
		assert_string_equal(json_string_value(json_object_get(ag, "state")), agent_state);
	}
	json_decref(o);
}

static void test_overall_table(void **state)
{
	(void)state;
	static const struct {
		uint8_t st[3];
		size_t n;
		bool cancelled;
		enum pf_capture_overall want;
	} t[] = {
	    {{PF_CA_PENDING, PF_CA_PENDING}, 2, false, PF_CO_PENDING},
	    {{PF_CA_PENDING, PF_CA_UNREACHABLE}, 2, false, PF_CO_PENDING},
	    {{PF_CA_ACCEPTED, PF_CA_PENDING}, 2, false, PF_CO_RUNNING},
	    {{PF_CA_DONE, PF_CA_RUNNING}, 2, false, PF_CO_RUNNING},
	    {{PF_CA_DONE, PF_CA_DONE}, 2, false, PF_CO_DONE},
	    {{PF_CA_DONE, PF_CA_UNREACHABLE}, 2, false, PF_CO_PARTIAL},
	    {{PF_CA_DONE, PF_CA_UNSUPPORTED}, 2, false, PF_CO_PARTIAL},
	    {{PF_CA_DONE, PF_CA_FAILED, PF_CA_DONE}, 3, false, PF_CO_PARTIAL},
	    {{PF_CA_FAILED, PF_CA_UNREACHABLE}, 2, false, PF_CO_FAILED},
	    {{PF_CA_UNREACHABLE, PF_CA_UNSUPPORTED}, 2, false, PF_CO_FAILED},
	    {{PF_CA_CANCELLED}, 1, false, PF_CO_FAILED},
	    {{PF_CA_RUNNING, PF_CA_DONE}, 2, true, PF_CO_CANCELLED},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		assert_int_equal(pf_capture_overall_of(t[i].st, t[i].n, t[i].cancelled), t[i].want);
	enum pf_capture_overall o;
	assert_int_equal(pf_capture_overall_parse("partial", &o), 0);
	assert_int_equal(o, PF_CO_PARTIAL);
	assert_int_equal(pf_capture_overall_parse("nope", &o), -EINVAL);
}

static void test_create_and_statuses(void **state)
{
	struct fx *x = *state;
	struct pf_error err = {0};
	char id[PF_CAPTURE_ID_MAX + 1];

	assert_int_equal(create(x, "team=a", 5, T0, id, &err), 0);
	/* Only the connected agent with the capability got the request. */
	assert_int_equal(x->n_sent, 1);
	assert_memory_equal(x->sent[0].uid, x->a[0]->uid, 16);
	assert_string_equal(x->sent[0].type, PF_CAPTURE_TYPE_REQUEST);
	assert_string_equal(x->sent[0].id, id);
	expect(x, id, "pending", 0, "pending");
	expect(x, id, "pending", 1, "unsupported");
	expect(x, id, "pending", 2, "unreachable");

	status(x, 0, id, "running", ",\"samples\":3", T0 + 100);
	expect(x, id, "running", 0, "running");
	status(x, 0, id, "accepted", NULL, T0 + 200); /* never backwards */
	expect(x, id, "running", 0, "running");
	status(x, 3, id, "done", NULL, T0 + 200); /* not part of it: ignored */
	expect(x, id, "running", -1, NULL);
	status(x, 0, "no-such-capture", "done", NULL, T0 + 200);
	status(x, 0, id, "bogus", NULL, T0 + 200); /* undecodable: ignored */
	expect(x, id, "running", 0, "running");
	pf_captures_on_custom(x->caps, x->a[0], "other.capability", PF_CAPTURE_TYPE_STATUS,
			      (const uint8_t *)"{}", 2, T0);
	status(x, 0, id, "done",
	       ",\"samples\":100,\"profile_ids\":[\"0102030405060708090a0b0c0d0e0f10\"]", T0 + 300);
	expect(x, id, "partial", 0, "done");
	status(x, 0, id, "failed", NULL, T0 + 400); /* final stays final */
	expect(x, id, "partial", 0, "done");
	struct pf_captures_stats cs;
	pf_captures_stats(x->caps, &cs);
	assert_int_equal(cs.created, 1);
	assert_int_equal(cs.requests_sent, 1);
	assert_int_equal(cs.statuses, 2);	  /* running, done */
	assert_int_equal(cs.statuses_ignored, 5); /* backwards, stranger, unknown, bad, late */
	assert_int_equal(cs.open, 0);

	int rc;
	json_t *o = pf_api_capture_json(x->caps, x->store, id, &rc);
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(o, "created_by")), "tester");
	assert_int_equal(json_integer_value(json_object_get(o, "created_at")), T0);
	assert_int_equal(json_integer_value(json_object_get(o, "started_at")), T0 + 100);
	assert_int_equal(json_integer_value(json_object_get(o, "finished_at")), T0 + 300);
	json_t *ag0 = json_array_get(json_object_get(o, "agents"), 0);
	assert_int_equal(json_integer_value(json_object_get(ag0, "samples")), 100);
	assert_string_equal(
	    json_string_value(json_array_get(json_object_get(ag0, "otlp_profile_ids"), 0)),
	    "0102030405060708090a0b0c0d0e0f10");
	/* not in the store: no store id to give */
	assert_int_equal(json_array_size(json_object_get(ag0, "profile_ids")), 0);
	json_decref(o);

	/* Everything reached the store: after the deadline only the store has it. */
	pf_captures_tick(x->caps, T0 + 16000);
	assert_int_equal(pf_captures_open(x->caps), 0);
	expect(x, id, "partial", 0, "done");
	expect(x, id, "partial", 2, "unreachable");
}

static void test_errors_and_limit(void **state)
{
	struct fx *x = *state;
	struct pf_error err = {0};
	char id[PF_CAPTURE_ID_MAX + 1];

	assert_int_equal(create(x, "team=nobody", 5, T0, id, &err), -ENOENT);
	assert_string_equal(err.path, "agents");
	pf_error_clear(&err);
	assert_int_equal(create(x, "team in (", 5, T0, id, &err), -EINVAL);
	pf_error_clear(&err);
	assert_int_equal(create(x, "team=b", 0, T0, id, &err), -EINVAL);
	assert_string_equal(err.path, "duration_seconds");
	pf_error_clear(&err);
	for (int i = 0; i < PF_CAPTURES_MAX_PER_AGENT; i++)
		assert_int_equal(create(x, "team=b", 60, T0, id, &err), 0);
	assert_int_equal(create(x, "team=b", 60, T0, id, &err), -EBUSY);
	assert_string_equal(err.path, "agents");
	assert_non_null(strstr(err.msg, "unfinished captures"));
	pf_error_clear(&err);
	/* The agent finishing one frees a slot. */
	status(x, 3, id, "failed", ",\"error_code\":\"busy\",\"error\":\"busy\"", T0 + 10);
	expect(x, id, "failed", 3, "failed");
	assert_int_equal(create(x, "team=b", 60, T0 + 20, id, &err), 0);
}

static void test_cancel_and_deadline(void **state)
{
	struct fx *x = *state;
	struct pf_error err = {0};
	char id1[PF_CAPTURE_ID_MAX + 1], id2[PF_CAPTURE_ID_MAX + 1];

	assert_int_equal(create(x, "idx in (0,3)", 5, T0, id1, &err), 0);
	assert_int_equal(create(x, "idx in (0,3)", 5, T0, id2, &err), 0);
	assert_int_equal(x->n_sent, 4);
	status(x, 0, id1, "running", NULL, T0 + 100);
	x->n_sent = 0;
	assert_int_equal(pf_captures_cancel(x->caps, id1, T0 + 200, &err), 0);
	/* both had the request: both are told */
	assert_int_equal(x->n_sent, 2);
	assert_string_equal(x->sent[0].type, PF_CAPTURE_TYPE_CANCEL);
	assert_string_equal(x->sent[0].id, id1);
	expect(x, id1, "cancelled", 0, "cancelled");
	assert_int_equal(pf_captures_cancel(x->caps, id1, T0 + 300, &err), -EALREADY);
	assert_int_equal(pf_captures_cancel(x->caps, "nope", T0 + 300, &err), -ENOENT);
	/* the agent's last word after a cancel still counts (its partial profile) */
	status(x, 0, id1, "cancelled", ",\"samples\":7", T0 + 400);
	expect(x, id1, "cancelled", 0, "cancelled");

	/* id2: agent 0 delivers, agent 3 stays silent → failed at the deadline (5 + 10 s) */
	status(x, 0, id2, "done", NULL, T0 + 500);
	pf_captures_tick(x->caps, T0 + 14999);
	expect(x, id2, "running", 3, "pending");
	pf_captures_tick(x->caps, T0 + 15000);
	expect(x, id2, "partial", 3, "failed");
	struct pf_captures_stats cs;
	pf_captures_stats(x->caps, &cs);
	assert_int_equal(cs.timed_out, 1);
	assert_int_equal(cs.cancels_sent, 2);
	int rc;
	json_t *o = pf_api_capture_json(x->caps, x->store, id2, &rc);
	json_t *ag3 = json_array_get(json_object_get(o, "agents"), 1);
	assert_string_equal(json_string_value(json_object_get(ag3, "error_code")), "timeout");
	json_decref(o);
}

static void test_resend_http_and_reload(void **state)
{
	struct fx *x = *state;
	struct pf_error err = {0};
	char id[PF_CAPTURE_ID_MAX + 1];
	const char *type;
	const uint8_t *data;
	size_t len;

	/* A plain-HTTP transport cannot send: the request waits for the agent's next reply. */
	x->send_rc = -EAGAIN;
	assert_int_equal(create(x, "idx in (0,3)", 5, T0, id, &err), 0);
	assert_int_equal(x->n_sent, 0);
	assert_true(pf_captures_owed(x->caps, x->a[3], T0 + 10, &type, &data, &len));
	assert_string_equal(type, PF_CAPTURE_TYPE_REQUEST);
	assert_non_null(memmem(data, len, id, strlen(id)));
	assert_false(pf_captures_owed(x->caps, x->a[3], T0 + 20, &type, &data, &len));
	x->send_rc = 0;

	/* Agent 0 accepts, agent 3 (request delivered) never answers. Restart: a new module
	 * over the same store. */
	status(x, 0, id, "accepted", NULL, T0 + 100);
	pf_captures_tick(x->caps, T0 + 200);
	pf_captures_free(x->caps);
	struct pf_captures_options co = {.grace_s = 10};
	x->caps = pf_captures_new(&co, x->fleet, x->store, send_hook, x);
	assert_int_equal(pf_captures_load(x->caps, T0 + 1000, &err), 0);
	assert_int_equal(pf_captures_open(x->caps), 1);
	expect(x, id, "running", 0, "accepted");
	/* What was in flight may have died with the old process: the pending agent is sent
	 * the request again when next heard from, once, and again on a new connection; the one
	 * that accepted is not; and not once the deadline leaves less than the duration. */
	x->n_sent = 0;
	pf_captures_agent_seen(x->caps, x->a[0], true, T0 + 1100);
	assert_int_equal(x->n_sent, 0);
	pf_captures_agent_seen(x->caps, x->a[3], false, T0 + 1100);
	assert_int_equal(x->n_sent, 1);
	assert_string_equal(x->sent[0].id, id);
	pf_captures_agent_seen(x->caps, x->a[3], false, T0 + 1200);
	assert_int_equal(x->n_sent, 1);
	pf_captures_agent_seen(x->caps, x->a[3], true, T0 + 1300);
	assert_int_equal(x->n_sent, 2);
	pf_captures_agent_seen(x->caps, x->a[3], true, T0 + 10500);
	assert_int_equal(x->n_sent, 2);
	status(x, 0, id, "done", NULL, T0 + 2000);
	status(x, 3, id, "done", NULL, T0 + 2000);
	expect(x, id, "done", 3, "done");

	/* Finished captures are not resumed after another restart, but stay queryable. */
	pf_captures_tick(x->caps, T0 + 2100);
	pf_captures_free(x->caps);
	x->caps = pf_captures_new(&co, x->fleet, x->store, send_hook, x);
	assert_int_equal(pf_captures_load(x->caps, T0 + 3000, &err), 0);
	assert_int_equal(pf_captures_open(x->caps), 0);
	expect(x, id, "done", 0, "done");
	int rc;
	json_t *l = pf_api_captures_list_json(x->caps, "done", 10, NULL, &rc);
	assert_non_null(l);
	assert_int_equal(json_array_size(json_object_get(l, "captures")), 1);
	json_decref(l);
	assert_null(pf_api_capture_json(x->caps, x->store, "missing", &rc));
	assert_int_equal(rc, -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_overall_table),
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	    T(test_create_and_statuses),	  T(test_errors_and_limit),
	    T(test_cancel_and_deadline),	  T(test_resend_http_and_reload),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
