/* test_api_rollouts.c — /api/v1/rollouts, the configs' :validate, ?dry_run and ?stage, the
 * plain PUT's 409 during a rollout (driven here or by another replica sharing the store) and
 * the assignments' match counts, through pf_api_handle()
 * with a real store, fleet and rollout module: roles, 400 with field paths, 422, 409, 202,
 * actions, the audit entries, and 503 when rollouts are off. */
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

#include "api/api.h"
#include "api_fixture.h"
#include "fleet/fleet.h"
#include "fleet/rollout.h"
#include "opamp_codec.h"
#include "pf/hash.h"
#include "store.h"

#define call(x, ...) api_fixture_call(&(x)->api, __VA_ARGS__)
#define token(x, ...) api_fixture_token((x)->store, __VA_ARGS__)
#define err_field api_fixture_err

#define V1 "profiling:\n  sampling:\n    frequency_hz: 49\n"
#define V2 "profiling:\n  sampling:\n    frequency_hz: 19\n"

struct fx {
	char dir[64];
	struct pf_store *store;
	struct pf_fleet *fleet;
	struct pf_rollouts *ro;
	struct pf_api api;
	char op[80], viewer[80], admin[80]; /* configs and assignments need admin */
};

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));
	api_fixture_open("apiro", x->dir, &x->store, &x->fleet);
	x->ro = pf_rollouts_new(x->fleet, x->store);
	x->api =
	    (struct pf_api){.fleet = x->fleet, .store = x->store, .rollouts = x->ro, .ready = true};
	token(x, "operator", "release-bot", x->op);
	token(x, "admin", "platform-admin", x->admin);
	token(x, "viewer", "dashboard", x->viewer);
	for (int i = 0; i < 6; i++) {
		uint8_t uid[16] = {1, [15] = (uint8_t)(i + 1)};
		struct pf_agent *a = pf_fleet_get_or_add(x->fleet, uid, 1);
		const char *k[] = {"env"}, *v[] = {i < 4 ? "prod" : "dev"};
		assert_int_equal(pf_agent_set_attributes(x->fleet, a, k, v, 1), 0);
		a->capabilities = PF_AGENT_CAP_ACCEPTS_REMOTE_CONFIG;
		pf_agent_set_connected(x->fleet, a, PF_TRANSPORT_WS, x, 1);
	}
	int st;
	json_decref(call(x, "PUT", "/api/v1/configs/default", x->admin, V1, NULL, &st));
	assert_int_equal(st, 201);
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

/* The actions that succeeded (refused attempts are audited too, with their status). */
static int audit_cb(const struct pf_audit_entry *e, void *ud)
{
	char *out = ud;
	size_t n = strlen(out);
	if (e->status >= 200 && e->status < 300)
		snprintf(out + n, 256 - n, "%s ", e->action);
	return 0;
}

static int versions(struct fx *x)
{
	int st;
	json_t *j = call(x, "GET", "/api/v1/configs/default/versions", x->viewer, NULL, NULL, &st);
	int n = (int)json_array_size(json_object_get(j, "versions"));
	json_decref(j);
	return n;
}

static void test_validate_dry_run_stage(void **state)
{
	struct fx *x = *state;
	int st;
	const char *bad = "profiling:\n  sampling:\n    frequency_hz: 5000\n";
	json_t *j = call(x, "POST", "/api/v1/configs/default:validate", x->op, bad, NULL, &st);
	assert_int_equal(st, 400);
	assert_string_equal(err_field(j, "path"), "profiling.sampling.frequency_hz");
	json_decref(j);
	j = call(x, "POST", "/api/v1/configs/default:validate", x->op, V2, NULL, &st);
	assert_int_equal(st, 200);
	assert_true(json_is_true(json_object_get(j, "valid")));
	json_decref(j);
	j = call(x, "PUT", "/api/v1/configs/default", x->admin, bad, "dry_run=1", &st);
	assert_int_equal(st, 400);
	json_decref(j);
	j = call(x, "PUT", "/api/v1/configs/default", x->admin, V2, "dry_run=1", &st);
	assert_int_equal(st, 200);
	json_decref(j);
	assert_int_equal(versions(x), 1);
	j = call(x, "POST", "/api/v1/configs/default:validate", x->viewer, V2, NULL, &st);
	assert_int_equal(st, 403);
	json_decref(j);

	/* Staged: stored, not served, not pushed. */
	j = call(x, "PUT", "/api/v1/configs/default", x->admin, V2, "stage=1", &st);
	assert_int_equal(st, 201);
	assert_int_equal(json_integer_value(json_object_get(j, "version")), 2);
	assert_int_equal(json_integer_value(json_object_get(j, "served_version")), 1);
	json_decref(j);
	assert_int_equal(versions(x), 2);
	assert_int_equal(pf_fleet_config_find(x->fleet, "default")->version, 1);
	j = call(x, "GET", "/api/v1/configs", x->viewer, NULL, NULL, &st);
	json_t *c = json_array_get(json_object_get(j, "configs"), 0);
	assert_int_equal(json_integer_value(json_object_get(c, "version")), 2);
	assert_int_equal(json_integer_value(json_object_get(c, "served_version")), 1);
	json_decref(j);
}

static void test_rollout_routes(void **state)
{
	struct fx *x = *state;
	int st;
	json_decref(call(x, "PUT", "/api/v1/configs/default", x->admin, V2, "stage=1", &st));
	static const struct {
		const char *body, *path;
		int status;
	} bad[] = {
	    {"{\"config\":\"default\",\"version\":2,\"strategy\":{\"initial\":0}}",
	     "strategy.initial", 400},
	    {"{\"config\":\"default\",\"version\":2,\"strategy\":{\"speed\":1}}", "strategy.speed",
	     400},
	    {"{\"config\":\"default\",\"version\":\"2\"}", "version", 400},
	    {"{\"config\":\"default\",\"version\":3}", "version", 400},
	    {"{\"config\":\"nope\"}", "config", 400},
	    {"{\"version\":2}", "config", 400},
	    {"{\"config\":\"default\",\"when\":1}", "when", 400},
	    {"[1]", "body", 400},
	    {"{\"config\":\"default\",\"selector\":\"env in (\"}", "selector", 400},
	    {"{\"config\":\"default\",\"selector\":\"env=stage\"}", "selector", 422},
	    {"{\"config\":\"default\",\"version\":1}", "version", 422},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *j = call(x, "POST", "/api/v1/rollouts", x->op, bad[i].body, NULL, &st);
		if (st != bad[i].status || strcmp(err_field(j, "path"), bad[i].path) != 0)
			print_message("case %zu: %d %s\n", i, st, err_field(j, "message"));
		assert_int_equal(st, bad[i].status);
		assert_string_equal(err_field(j, "path"), bad[i].path);
		json_decref(j);
	}
	const char *body = "{\"config\":\"default\",\"selector\":\"env=prod\",\"strategy\":"
			   "{\"initial\":1,\"multiplier\":2,\"pause_seconds\":60}}";
	json_t *j = call(x, "POST", "/api/v1/rollouts", x->viewer, body, NULL, &st);
	assert_int_equal(st, 403);
	json_decref(j);
	j = call(x, "POST", "/api/v1/rollouts", x->op, body, NULL, &st);
	assert_int_equal(st, 202);
	char id[PF_ROLLOUT_ID_MAX + 1];
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(j, "id")));
	assert_int_equal(json_integer_value(json_object_get(j, "agents")), 4);
	assert_int_equal(json_integer_value(json_object_get(j, "version")), 2);
	assert_string_equal(json_string_value(json_object_get(j, "created_by")), "release-bot");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "strategy"),
							    "max_failure_percent")),
			 5);
	json_decref(j);

	j = call(x, "POST", "/api/v1/rollouts", x->op, body, NULL, &st);
	assert_int_equal(st, 409);
	assert_string_equal(err_field(j, "code"), "rollout_active");
	json_decref(j);
	j = call(x, "PUT", "/api/v1/configs/default", x->admin, V1 "# new\n", NULL, &st);
	assert_int_equal(st, 409);
	json_decref(j);

	char path[128];
	snprintf(path, sizeof(path), "/api/v1/rollouts/%s", id);
	j = call(x, "GET", path, x->viewer, NULL, NULL, &st);
	assert_int_equal(st, 200);
	json_t *b = json_object_get(j, "batches");
	assert_int_equal(json_array_size(b), 3); /* 1, 2, 1 */
	assert_int_equal(json_integer_value(json_object_get(json_array_get(b, 0), "pending")), 1);
	json_decref(j);
	snprintf(path, sizeof(path), "/api/v1/rollouts/%s/jump", id);
	j = call(x, "POST", path, x->op, "{}", NULL, &st);
	assert_int_equal(st, 404);
	json_decref(j);
	snprintf(path, sizeof(path), "/api/v1/rollouts/%s/resume", id);
	j = call(x, "POST", path, x->op, "{}", NULL, &st);
	assert_int_equal(st, 409);
	assert_string_equal(err_field(j, "code"), "invalid_state");
	json_decref(j);
	snprintf(path, sizeof(path), "/api/v1/rollouts/%s/pause", id);
	j = call(x, "POST", path, x->viewer, "{}", NULL, &st);
	assert_int_equal(st, 403);
	json_decref(j);
	j = call(x, "POST", path, x->op, "{}", NULL, &st);
	assert_int_equal(st, 200);
	assert_string_equal(json_string_value(json_object_get(j, "state")), "paused");
	json_decref(j);
	snprintf(path, sizeof(path), "/api/v1/rollouts/%s/rollback", id);
	j = call(x, "POST", path, x->op, "{}", NULL, &st);
	assert_int_equal(st, 200);
	assert_string_equal(json_string_value(json_object_get(j, "state")), "rolling_back");
	json_decref(j);
	snprintf(path, sizeof(path), "/api/v1/rollouts/%s/cancel", id);
	j = call(x, "POST", path, x->op, "{}", NULL, &st);
	assert_int_equal(st, 409);
	json_decref(j);
	j = call(x, "GET", "/api/v1/rollouts/01900000-0000-7000-8000-000000000000", x->viewer, NULL,
		 NULL, &st);
	assert_int_equal(st, 404);
	json_decref(j);
	j = call(x, "GET", "/api/v1/rollouts", x->viewer, NULL, "limit=0", &st);
	assert_int_equal(st, 400);
	json_decref(j);
	j = call(x, "GET", "/api/v1/rollouts", x->viewer, NULL, "active=1", &st);
	assert_int_equal(st, 200);
	assert_int_equal(json_array_size(json_object_get(j, "rollouts")), 1);
	json_decref(j);

	/* Every mutation is audited. */
	char actions[256] = "";
	struct pf_audit_query q = {.limit = 1000};
	assert_int_equal(pf_store_audit_query(x->store, &q, audit_cb, actions), 0);
	assert_string_equal(actions, "rollout.rollback rollout.pause rollout.create config.stage "
				     "config.put ");
}

static void test_match_counts_and_disabled(void **state)
{
	struct fx *x = *state;
	int st;
	json_decref(call(x, "PUT", "/api/v1/configs/other", x->admin, V2, NULL, &st));
	json_t *j =
	    call(x, "PUT", "/api/v1/assignments/dev", x->admin,
		 "{\"selector\":\"env=dev\",\"config\":\"other\",\"priority\":5}", NULL, &st);
	assert_int_equal(st, 200);
	json_decref(j);
	j = call(x, "PUT", "/api/v1/assignments/all", x->admin,
		 "{\"selector\":\"\",\"config\":\"default\"}", NULL, &st);
	assert_int_equal(st, 200);
	json_decref(j);
	j = call(x, "GET", "/api/v1/assignments", x->viewer, NULL, NULL, &st);
	assert_int_equal(st, 200);
	json_t *arr = json_object_get(j, "assignments");
	assert_int_equal(json_array_size(arr), 2);
	for (size_t i = 0; i < 2; i++) {
		json_t *a = json_array_get(arr, i);
		bool dev = strcmp(json_string_value(json_object_get(a, "name")), "dev") == 0;
		assert_int_equal(json_integer_value(json_object_get(a, "matched")), dev ? 2 : 6);
		assert_int_equal(json_integer_value(json_object_get(a, "resolved")), dev ? 2 : 4);
	}
	json_decref(j);
	j = call(x, "GET", "/api/v1/assignments/dev", x->viewer, NULL, NULL, &st);
	assert_int_equal(json_integer_value(json_object_get(j, "matched")), 2);
	json_decref(j);

	x->api.rollouts = NULL;
	j = call(x, "GET", "/api/v1/rollouts", x->viewer, NULL, NULL, &st);
	assert_int_equal(st, 503);
	json_decref(j);
}

/* Replicas sharing the store: a rollout another replica drives is only a row here. A plain
 * PUT of its config is refused like on the driving replica (same status and code), and so is
 * a second rollout of it; once the row is final the PUT goes through. */
static void test_put_refused_for_rollout_driven_elsewhere(void **state)
{
	struct fx *x = *state;
	struct pf_rollout_row r = {.id = "01900000-0000-7000-8000-0000000000aa",
				   .config = "default",
				   .version = 1,
				   .state = "running",
				   .created_ms = 1,
				   .updated_ms = 1,
				   .created_by = "other-replica",
				   .spec_json = "{}",
				   .progress_json = "{}"};
	assert_int_equal(pf_store_rollout_save(x->store, &r, NULL, 0, NULL, 0), 0);
	assert_null(pf_rollouts_active_for(x->ro, "default")); /* not driven here */
	char id[PF_ROLLOUT_ID_MAX + 1];
	bool elsewhere = false;
	assert_int_equal(pf_rollouts_find_active(x->ro, "default", id, &elsewhere), 1);
	assert_string_equal(id, r.id);
	assert_true(elsewhere);
	assert_int_equal(pf_rollouts_find_active(x->ro, "other", id, &elsewhere), 0);

	int st;
	json_t *j = call(x, "PUT", "/api/v1/configs/default", x->admin, V2, NULL, &st);
	assert_int_equal(st, 409);
	assert_string_equal(err_field(j, "code"), "rollout_active");
	assert_non_null(strstr(err_field(j, "message"), r.id));
	json_decref(j);
	assert_int_equal(versions(x), 1);
	j = call(x, "POST", "/api/v1/rollouts", x->op, "{\"config\":\"default\"}", NULL, &st);
	assert_int_equal(st, 409);
	assert_string_equal(err_field(j, "code"), "rollout_active");
	json_decref(j);

	r.state = "completed";
	assert_int_equal(pf_store_rollout_save(x->store, &r, NULL, 0, NULL, 0), 0);
	j = call(x, "PUT", "/api/v1/configs/default", x->admin, V2, NULL, &st);
	assert_int_equal(st, 201);
	json_decref(j);
	assert_int_equal(versions(x), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	    T(test_validate_dry_run_stage),
	    T(test_rollout_routes),
	    T(test_match_counts_and_disabled),
	    T(test_put_refused_for_rollout_driven_elsewhere),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
