/* test_api.c — the REST API through pf_api_handle() with a real store in a temp directory
 * and a real fleet: authentication and roles, config validation with key paths, immutable
 * versions, assignments, agent listing with selectors and pages, errors as JSON. */
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
#include "metrics.h"
#include "pf/hash.h"
#include "pf/profcfg.h"
#include "pf/uuid.h"
#include "store.h"

struct fx {
	char dir[64];
	struct pf_store *store;
	struct pf_fleet *fleet;
	struct pf_metrics metrics;
	struct pf_api api;
	char admin[80], viewer[80], agent[80];
};

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));
	api_fixture_open("api", x->dir, &x->store, &x->fleet);
	x->api.fleet = x->fleet;
	x->api.store = x->store;
	x->api.metrics = &x->metrics;
	x->api.ready = true;
	api_fixture_token(x->store, "admin", "admin", x->admin);
	api_fixture_token(x->store, "viewer", "viewer", x->viewer);
	api_fixture_token(x->store, "agent", "agent", x->agent);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;
	api_fixture_close(x->dir, x->store, x->fleet);
	free(x);
	return 0;
}

/* Runs one request; returns the parsed JSON body (or NULL for non-JSON) and the status. */
static json_t *call(struct fx *x, const char *method, const char *path, const char *auth,
		    const char *body, int *status, const char *arg0, const char *arg1)
{
	struct pf_api_request q = {
		.method = method,
		.path = path,
		.authorization = auth,
		.body = (const uint8_t *)body,
		.body_len = body ? strlen(body) : 0,
		.now_ms = 10000,
	};
	if (arg0)
		q.args[q.n_args++] = arg0;
	if (arg1)
		q.args[q.n_args++] = arg1;
	struct pf_api_response r;
	pf_api_response_init(&r);
	pf_api_handle(&x->api, &q, &r);
	*status = r.status;
	json_t *j = NULL;
	if (strcmp(r.content_type, "application/json") == 0) {
		json_error_t e;
		j = json_loadb((const char *)r.body.data, r.body.len, 0, &e);
		if (!j)
			fail_msg("invalid JSON from %s %s: %s", method, path, pf_buf_str(&r.body));
	}
	pf_api_response_release(&r);
	return j;
}

static const char *err_code(json_t *j)
{
	return json_string_value(json_object_get(json_object_get(j, "error"), "code"));
}

static void test_auth_and_roles(void **state)
{
	struct fx *x = *state;
	int st;
	json_t *j = call(x, "GET", "/api/v1/agents", NULL, NULL, &st, NULL, NULL);
	assert_int_equal(st, 401);
	assert_string_equal(err_code(j), "unauthenticated");
	json_decref(j);
	j = call(x, "GET", "/api/v1/agents", "Bearer nope", NULL, &st, NULL, NULL);
	assert_int_equal(st, 401);
	json_decref(j);
	/* An agent token is not an API token: authenticated, but below every API role. */
	j = call(x, "GET", "/api/v1/agents", x->agent, NULL, &st, NULL, NULL);
	assert_int_equal(st, 403);
	json_decref(j);
	j = call(x, "GET", "/api/v1/agents", x->viewer, NULL, &st, NULL, NULL);
	assert_int_equal(st, 200);
	json_decref(j);
	j = call(x, "PUT", "/api/v1/configs/default", x->viewer, "profiling: {}\n", &st, NULL,
		 NULL);
	assert_int_equal(st, 403);
	assert_string_equal(err_code(j), "permission_denied");
	json_decref(j);
	/* Health endpoints need no token. */
	json_decref(call(x, "GET", "/healthz", NULL, NULL, &st, NULL, NULL));
	assert_int_equal(st, 200);
	json_decref(call(x, "GET", "/readyz", NULL, NULL, &st, NULL, NULL));
	assert_int_equal(st, 200);
	json_decref(call(x, "GET", "/metrics", NULL, NULL, &st, NULL, NULL));
	assert_int_equal(st, 200);
}

static void test_routes_404_405(void **state)
{
	struct fx *x = *state;
	int st;
	json_t *j = call(x, "GET", "/api/v1/nothing", x->admin, NULL, &st, NULL, NULL);
	assert_int_equal(st, 404);
	json_decref(j);
	j = call(x, "DELETE", "/api/v1/configs/default", x->admin, NULL, &st, NULL, NULL);
	assert_int_equal(st, 405);
	assert_string_equal(err_code(j), "method_not_allowed");
	json_decref(j);
	j = call(x, "GET", "/nope", x->admin, NULL, &st, NULL, NULL);
	assert_int_equal(st, 404);
	json_decref(j);
}

/* whoami tells the console the caller's role; validate is PUT without storing anything. */
static void test_whoami_and_validate(void **state)
{
	struct fx *x = *state;
	int st;
	json_t *j = call(x, "GET", "/api/v1/whoami", x->viewer, NULL, &st, NULL, NULL);
	assert_int_equal(st, 200);
	assert_string_equal(json_string_value(json_object_get(j, "role")), "viewer");
	assert_string_equal(json_string_value(json_object_get(j, "name")), "viewer");
	assert_false(json_boolean_value(json_object_get(j, "can_write")));
	json_decref(j);
	j = call(x, "GET", "/api/v1/whoami", x->admin, NULL, &st, NULL, NULL);
	assert_int_equal(st, 200);
	assert_string_equal(json_string_value(json_object_get(j, "role")), "admin");
	assert_true(json_boolean_value(json_object_get(j, "can_write")));
	assert_true(json_boolean_value(json_object_get(j, "can_admin")));
	json_decref(j);
	/* an agent token is known but below every API role */
	j = call(x, "GET", "/api/v1/whoami", x->agent, NULL, &st, NULL, NULL);
	assert_int_equal(st, 403);
	json_decref(j);

	j = call(x, "POST", "/api/v1/configs/default/validate", x->admin,
		 "profiling:\n  exporters:\n    - {type: file, path: /tmp/x}\n    - {type: nope}\n",
		 &st, NULL, NULL);
	assert_int_equal(st, 400);
	assert_string_equal(err_code(j), "invalid_config");
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(j, "error"), "path")),
		"profiling.exporters[1].type");
	json_decref(j);
	j = call(x, "POST", "/api/v1/configs/default/validate", x->admin,
		 "profiling: {sampling: {frequency_hz: 49}}\n", &st, NULL, NULL);
	assert_int_equal(st, 200);
	assert_true(json_boolean_value(json_object_get(j, "valid")));
	assert_int_equal(strlen(json_string_value(json_object_get(j, "hash"))), 64);
	json_decref(j);
	/* a dry run: nothing stored */
	j = call(x, "GET", "/api/v1/configs/default", x->admin, NULL, &st, NULL, NULL);
	assert_int_equal(st, 404);
	json_decref(j);
	/* it takes the operator role (PUT takes admin) */
	j = call(x, "POST", "/api/v1/configs/default/validate", x->viewer, "profiling: {}\n", &st,
		 NULL, NULL);
	assert_int_equal(st, 403);
	json_decref(j);
	j = call(x, "POST", "/api/v1/configs/bad name/validate", x->admin, "profiling: {}\n", &st,
		 NULL, NULL);
	assert_int_equal(st, 400);
	json_decref(j);
}

static void test_config_versions(void **state)
{
	struct fx *x = *state;
	int st;
	/* Validation error names the key path. */
	json_t *j = call(x, "PUT", "/api/v1/configs/default", x->admin,
			 "profiling:\n  sampling:\n    frequency_hz: 5000\n", &st, NULL, NULL);
	assert_int_equal(st, 400);
	assert_string_equal(err_code(j), "invalid_config");
	json_t *e = json_object_get(j, "error");
	assert_string_equal(json_string_value(json_object_get(e, "path")),
			    "profiling.sampling.frequency_hz");
	assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "1..1000"));
	json_decref(j);
	j = call(x, "PUT", "/api/v1/configs/default", x->admin, "profiling:\n  bogus: 1\n", &st,
		 NULL, NULL);
	assert_int_equal(st, 400);
	json_decref(j);
	j = call(x, "PUT", "/api/v1/configs/bad name", x->admin, "profiling: {}\n", &st, NULL,
		 NULL);
	assert_int_equal(st, 400);
	json_decref(j);
	/* Nothing was stored by the failures. */
	j = call(x, "GET", "/api/v1/configs/default", x->admin, NULL, &st, NULL, NULL);
	assert_int_equal(st, 404);
	json_decref(j);

	j = call(x, "PUT", "/api/v1/configs/default", x->admin, "profiling: {}\n", &st, NULL,
		 NULL);
	assert_int_equal(st, 201);
	assert_int_equal(json_integer_value(json_object_get(j, "version")), 1);
	assert_int_equal(strlen(json_string_value(json_object_get(j, "hash"))), 64);
	json_decref(j);
	/* Same body: same version, 200. */
	j = call(x, "PUT", "/api/v1/configs/default", x->admin, "profiling: {}\n", &st, NULL,
		 NULL);
	assert_int_equal(st, 200);
	assert_int_equal(json_integer_value(json_object_get(j, "version")), 1);
	json_decref(j);
	j = call(x, "PUT", "/api/v1/configs/default", x->admin,
		 "profiling:\n  sampling: {frequency_hz: 49}\n", &st, NULL, NULL);
	assert_int_equal(st, 201);
	assert_int_equal(json_integer_value(json_object_get(j, "version")), 2);
	json_decref(j);

	j = call(x, "GET", "/api/v1/configs/default", x->viewer, NULL, &st, NULL, NULL);
	assert_int_equal(st, 200);
	assert_int_equal(json_integer_value(json_object_get(j, "version")), 2);
	assert_non_null(strstr(json_string_value(json_object_get(j, "body")), "49"));
	json_decref(j);
	j = call(x, "GET", "/api/v1/configs/default", x->viewer, NULL, &st, "version=1", NULL);
	assert_int_equal(st, 200);
	assert_string_equal(json_string_value(json_object_get(j, "body")), "profiling: {}\n");
	json_decref(j);
	j = call(x, "GET", "/api/v1/configs/default", x->viewer, NULL, &st, "version=9", NULL);
	assert_int_equal(st, 404);
	json_decref(j);
	j = call(x, "GET", "/api/v1/configs/default", x->viewer, NULL, &st, "version=abc", NULL);
	assert_int_equal(st, 400);
	json_decref(j);
	j = call(x, "GET", "/api/v1/configs/default/versions", x->viewer, NULL, &st, NULL, NULL);
	assert_int_equal(st, 200);
	json_t *v = json_object_get(j, "versions");
	assert_int_equal(json_array_size(v), 2);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(v, 0), "version")), 2);
	json_decref(j);
	j = call(x, "GET", "/api/v1/configs", x->viewer, NULL, &st, NULL, NULL);
	assert_int_equal(json_array_size(json_object_get(j, "configs")), 1);
	json_decref(j);
	/* The fleet mirrors the newest version. */
	assert_int_equal(pf_fleet_config_find(x->fleet, "default")->version, 2);

	/* Header values are secrets: viewers see them redacted, admins as stored. */
	static const char secret[] = "profiling:\n  exporters:\n    - type: otlp_http\n"
				     "      endpoint: 'https://h'\n"
				     "      headers: {X-Api-Key: s3cr3t-value}\n";
	j = call(x, "PUT", "/api/v1/configs/withkey", x->admin, secret, &st, NULL, NULL);
	assert_int_equal(st, 201);
	json_decref(j);
	j = call(x, "GET", "/api/v1/configs/withkey", x->viewer, NULL, &st, NULL, NULL);
	assert_int_equal(st, 200);
	assert_null(strstr(json_string_value(json_object_get(j, "body")), "s3cr3t"));
	assert_non_null(strstr(json_string_value(json_object_get(j, "body")),
			       "\"X-Api-Key\": \"" PF_PROFCFG_REDACTED "\""));
	json_decref(j);
	j = call(x, "GET", "/api/v1/configs/withkey", x->admin, NULL, &st, NULL, NULL);
	assert_int_equal(st, 200);
	assert_string_equal(json_string_value(json_object_get(j, "body")), secret);
	json_decref(j);
	/* A redacted view sent back is refused, naming the header. */
	static const char view[] = "profiling:\n  exporters:\n    - type: otlp_http\n"
				   "      endpoint: 'https://h'\n"
				   "      headers: {X-Api-Key: '" PF_PROFCFG_REDACTED "'}\n";
	j = call(x, "PUT", "/api/v1/configs/withkey", x->admin, view, &st, NULL, NULL);
	assert_int_equal(st, 400);
	char *dump = json_dumps(j, 0);
	assert_non_null(strstr(dump, "placeholder of a redacted secret"));
	free(dump);
	json_decref(j);
}

static void test_assignments(void **state)
{
	struct fx *x = *state;
	int st;
	json_t *j = call(x, "PUT", "/api/v1/assignments/prod", x->admin,
			 "{\"selector\":\"env=prod\",\"config\":\"missing\",\"priority\":1}", &st,
			 NULL, NULL);
	assert_int_equal(st, 400); /* config does not exist */
	json_decref(j);
	json_decref(call(x, "PUT", "/api/v1/configs/fast", x->admin, "profiling: {}\n", &st, NULL, NULL));
	assert_int_equal(st, 201);
	j = call(x, "PUT", "/api/v1/assignments/prod", x->admin,
		 "{\"selector\":\"env=\",\"config\":\"fast\"}", &st, NULL, NULL);
	assert_int_equal(st, 400);
	assert_string_equal(err_code(j), "invalid_selector");
	json_decref(j);
	j = call(x, "PUT", "/api/v1/assignments/prod", x->admin, "{not json", &st, NULL, NULL);
	assert_int_equal(st, 400);
	assert_string_equal(err_code(j), "invalid_json");
	json_decref(j);
	j = call(x, "PUT", "/api/v1/assignments/prod", x->admin,
		 "{\"selector\":\"env=prod\",\"config\":\"fast\",\"colour\":1}", &st, NULL, NULL);
	assert_int_equal(st, 400);
	json_decref(j);
	j = call(x, "PUT", "/api/v1/assignments/prod", x->admin,
		 "{\"selector\":\"env=prod,team in (a,b)\",\"config\":\"fast\",\"priority\":7}",
		 &st, NULL, NULL);
	assert_int_equal(st, 200);
	json_decref(j);
	j = call(x, "GET", "/api/v1/assignments/prod", x->viewer, NULL, &st, NULL, NULL);
	assert_int_equal(st, 200);
	assert_int_equal(json_integer_value(json_object_get(j, "priority")), 7);
	assert_string_equal(json_string_value(json_object_get(j, "config")), "fast");
	json_decref(j);
	j = call(x, "GET", "/api/v1/assignments", x->viewer, NULL, &st, NULL, NULL);
	assert_int_equal(json_array_size(json_object_get(j, "assignments")), 1);
	json_decref(j);
	j = call(x, "DELETE", "/api/v1/assignments/prod", x->admin, NULL, &st, NULL, NULL);
	assert_int_equal(st, 200);
	json_decref(j);
	j = call(x, "DELETE", "/api/v1/assignments/prod", x->admin, NULL, &st, NULL, NULL);
	assert_int_equal(st, 404);
	json_decref(j);
}

static void add_agent(struct fx *x, int i, const char *env)
{
	uint8_t uid[16];
	assert_int_equal(pf_uuid_v7(uid), 0);
	struct pf_agent *a = pf_fleet_get_or_add(x->fleet, uid, 1000);
	const char *k[] = {"env", "idx"};
	char idx[16];
	snprintf(idx, sizeof(idx), "%d", i);
	const char *v[] = {env, idx};
	pf_agent_set_attributes(x->fleet, a, k, v, 2);
	pf_agent_set_connected(x->fleet, a, PF_TRANSPORT_WS, (void *)(intptr_t)(i + 1), 9000);
}

/* Counts the agents a query lists (one page of up to 1000). */
static int listed(struct fx *x, const char *arg0, const char *arg1, int *status)
{
	json_t *j = call(x, "GET", "/api/v1/agents", x->viewer, NULL, status, arg0, arg1);
	int n = j && json_object_get(j, "agents") ? (int)json_array_size(json_object_get(j, "agents"))
						 : -1;
	json_decref(j);
	return n;
}

/* state= and config_status= filter like the selector, after it; bad values are 400. */
static void test_agents_list_state_filters(void **state)
{
	struct fx *x = *state;
	int st;
	for (int i = 0; i < 12; i++)
		add_agent(x, i, i % 2 ? "prod" : "dev");
	size_t it = 0;
	struct pf_agent *a;
	int k = 0;
	while ((a = pf_fleet_next(x->fleet, &it))) {
		if (k < 3)
			pf_agent_set_disconnected(x->fleet, a);
		else if (k < 5)
			assert_int_equal(pf_agent_set_health(x->fleet, a, false, "{}"), 0);
		else
			assert_int_equal(pf_agent_set_health(x->fleet, a, true, "{}"), 0);
		k++;
	}
	assert_int_equal(listed(x, "state=disconnected", NULL, &st), 3);
	assert_int_equal(st, 200);
	assert_int_equal(listed(x, "state=unhealthy", NULL, &st), 2);
	assert_int_equal(listed(x, "state=healthy", NULL, &st), 7);
	assert_int_equal(listed(x, "state=stale", NULL, &st), 0);
	int prod_healthy = listed(x, "state=healthy", "selector=env=prod", &st);
	int dev_healthy = listed(x, "state=healthy", "selector=env=dev", &st);
	assert_int_equal(prod_healthy + dev_healthy, 7);
	assert_int_equal(listed(x, "config_status=UNSET", NULL, &st), 12);
	assert_int_equal(listed(x, "config_status=FAILED", NULL, &st), 0);
	assert_int_equal(listed(x, "state=", NULL, &st), 12); /* empty: no filter */
	assert_int_equal(listed(x, "state=sick", NULL, &st), -1);
	assert_int_equal(st, 400);
	assert_int_equal(listed(x, "config_status=applied", NULL, &st), -1);
	assert_int_equal(st, 400);
}

static void test_agents_list_pages_summary(void **state)
{
	struct fx *x = *state;
	int st;
	for (int i = 0; i < 25; i++)
		add_agent(x, i, i % 5 == 0 ? "prod" : "dev");
	json_t *j = call(x, "GET", "/api/v1/agents", x->viewer, NULL, &st, "selector=env=prod",
			 NULL);
	assert_int_equal(st, 200);
	assert_int_equal(json_array_size(json_object_get(j, "agents")), 5);
	json_t *a0 = json_array_get(json_object_get(j, "agents"), 0);
	assert_true(json_is_true(json_object_get(a0, "connected")));
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(a0, "attributes"), "env")),
		"prod");
	assert_string_equal(json_string_value(json_object_get(json_object_get(a0, "config"),
							       "status")),
			    "UNSET");
	json_decref(j);

	/* Pages of 10 cover all 25 once. */
	char cursor[80] = "";
	int seen = 0;
	for (int page = 0; page < 5; page++) {
		char carg[96];
		snprintf(carg, sizeof(carg), "cursor=%s", cursor);
		j = call(x, "GET", "/api/v1/agents", x->viewer, NULL, &st, "limit=10",
			 cursor[0] ? carg : NULL);
		assert_int_equal(st, 200);
		seen += (int)json_array_size(json_object_get(j, "agents"));
		json_t *next = json_object_get(j, "next_cursor");
		if (json_is_null(next)) {
			json_decref(j);
			break;
		}
		snprintf(cursor, sizeof(cursor), "%s", json_string_value(next));
		json_decref(j);
	}
	assert_int_equal(seen, 25);

	j = call(x, "GET", "/api/v1/agents", x->viewer, NULL, &st, "limit=0", NULL);
	assert_int_equal(st, 400);
	json_decref(j);
	j = call(x, "GET", "/api/v1/agents", x->viewer, NULL, &st, "selector=env in (", NULL);
	assert_int_equal(st, 400);
	assert_string_equal(err_code(j), "invalid_selector");
	json_decref(j);

	j = call(x, "GET", "/api/v1/fleet/summary", x->viewer, NULL, &st, NULL, NULL);
	assert_int_equal(st, 200);
	assert_int_equal(json_integer_value(json_object_get(j, "agents")), 25);
	assert_int_equal(json_integer_value(json_object_get(j, "connected")), 25);
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(j, "config_status"), "UNSET")),
			 25);
	json_decref(j);

	/* One agent by uid; bad and unknown uids. */
	size_t it = 0;
	struct pf_agent *a = pf_fleet_next(x->fleet, &it);
	char path[128], u[37];
	pf_uuid_format(a->uid, u);
	snprintf(path, sizeof(path), "/api/v1/agents/%s", u);
	j = call(x, "GET", path, x->viewer, NULL, &st, NULL, NULL);
	assert_int_equal(st, 200);
	assert_string_equal(json_string_value(json_object_get(j, "instance_uid")), u);
	json_decref(j);
	j = call(x, "GET", "/api/v1/agents/zzz", x->viewer, NULL, &st, NULL, NULL);
	assert_int_equal(st, 400);
	json_decref(j);
	j = call(x, "GET", "/api/v1/agents/00000000-0000-7000-8000-000000000000", x->viewer, NULL,
		 &st, NULL, NULL);
	assert_int_equal(st, 404);
	json_decref(j);
	/* Requests were counted by status for /metrics. */
	assert_true(x->metrics.api_status_count[0] > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_auth_and_roles, setup, teardown),
		cmocka_unit_test_setup_teardown(test_routes_404_405, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_versions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_whoami_and_validate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_assignments, setup, teardown),
		cmocka_unit_test_setup_teardown(test_agents_list_pages_summary, setup, teardown),
		cmocka_unit_test_setup_teardown(test_agents_list_state_filters, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
