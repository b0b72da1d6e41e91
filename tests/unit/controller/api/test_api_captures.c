/* test_api_captures.c — /api/v1/captures through pf_api_handle() with a real store, fleet and
 * capture module: roles, 400 with the field path, 422, 202 and the capture's JSON, the list,
 * cancel with its 409/404, the audit entries, and 503 when captures are off. */
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
#include "fleet/capture.h"
#include "fleet/fleet.h"
#include "pf/hash.h"
#include "pf/uuid.h"
#include "store.h"

#define call(x, ...) api_fixture_call(&(x)->api, __VA_ARGS__)
#define token(x, ...) api_fixture_token((x)->store, __VA_ARGS__)
#define err_field api_fixture_err

struct fx {
	char dir[64];
	struct pf_store *store;
	struct pf_fleet *fleet;
	struct pf_captures *caps;
	struct pf_api api;
	char op[80], viewer[80];
	int sent;
	char last[PF_CAPTURE_MAX_MSG + 1]; /* the last payload sent */
};

static int count_send(struct pf_agent *a, const char *type, const uint8_t *d, size_t n, void *ud)
{
	(void)a, (void)type;
	struct fx *x = ud;
	x->sent++;
	snprintf(x->last, sizeof(x->last), "%.*s", (int)n, (const char *)d);
	return 0;
}

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));
	api_fixture_open("apicap", x->dir, &x->store, &x->fleet);
	x->caps = pf_captures_new(NULL, x->fleet, x->store, count_send, x);
	assert_non_null(x->caps);
	x->api = (struct pf_api){
	    .fleet = x->fleet, .store = x->store, .captures = x->caps, .ready = true};
	token(x, "operator", "oncall-bot", x->op);
	token(x, "viewer", "dashboard", x->viewer);
	for (int i = 0; i < 2; i++) {
		uint8_t uid[16] = {1, [15] = (uint8_t)(i + 1)};
		struct pf_agent *a = pf_fleet_get_or_add(x->fleet, uid, 1);
		const char *k[] = {"env"}, *v[] = {"prod"};
		assert_int_equal(pf_agent_set_attributes(x->fleet, a, k, v, 1), 0);
		pf_agent_set_connected(x->fleet, a, PF_TRANSPORT_WS, x, 1);
		a->capture_capable = i == 0;
	}
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

static void test_validation_and_roles(void **state)
{
	struct fx *x = *state;
	int st;
	static const struct {
		const char *body, *path;
	} bad[] = {
	    {"{\"agents\":\"env=prod\",\"extra\":true}", "extra"},
	    {"{\"agents\":\"env=prod\",\"duration_seconds\":0}", "duration_seconds"},
	    {"{\"agents\":\"env=prod\",\"duration_seconds\":3601}", "duration_seconds"},
	    {"{\"agents\":\"env=prod\",\"duration_seconds\":\"30s\"}", "duration_seconds"},
	    {"{\"agents\":\"env=prod\",\"frequency_hz\":1001}", "frequency_hz"},
	    {"{\"agents\":\"env in (a\"}", "agents"},
	    {"{\"agents\":7}", "agents"},
	    {"{}", "agents"},
	    {"[]", "body"},
	    {"{\"agents\":\"env=prod\",\"processes\":[{\"key\":\"pod\",\"value\":\"x\"}]}",
	     "processes[0].key"},
	    {"{\"agents\":\"env=prod\",\"processes\":[{\"key\":\"service.name\",\"match\":"
	     "\"regexp\",\"value\":\"[\"}]}",
	     "processes[0].value"},
	    {"{\"agents\":\"env=prod\",\"processes\":[{\"key\":\"service.name\",\"value\":\"x\","
	     "\"mode\":1}]}",
	     "processes[0].mode"},
	};
	/* a type nobody knows: a clear 400 naming it */
	json_t *ja = call(x, "POST", "/api/v1/captures", x->op,
			  "{\"agents\":\"env=prod\",\"profile_type\":\"heap\"}", NULL, &st);
	assert_int_equal(st, 400);
	assert_non_null(strstr(err_field(ja, "message"), "heap"));
	json_decref(ja);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *j = call(x, "POST", "/api/v1/captures", x->op, bad[i].body, NULL, &st);
		if (st != 400 || strcmp(err_field(j, "path"), bad[i].path) != 0)
			print_message("case %zu: %d %s\n", i, st, err_field(j, "message"));
		assert_int_equal(st, 400);
		assert_string_equal(err_field(j, "path"), bad[i].path);
		json_decref(j);
	}
	/* body over the payload cap */
	size_t n = PF_CAPTURE_MAX_MSG + 100;
	char *big = malloc(n + 1);
	memset(big, ' ', n);
	memcpy(big, "{\"agents\":\"env=prod\"}", 21);
	big[n] = 0;
	json_t *j = call(x, "POST", "/api/v1/captures", x->op, big, NULL, &st);
	assert_int_equal(st, 400);
	assert_string_equal(err_field(j, "path"), "body");
	json_decref(j);
	free(big);

	j = call(x, "POST", "/api/v1/captures", x->op, "{\"agents\":\"env=dev\"}", NULL, &st);
	assert_int_equal(st, 422);
	assert_string_equal(err_field(j, "code"), "no_agents");
	json_decref(j);
	j = call(x, "POST", "/api/v1/captures", x->viewer, "{\"agents\":\"env=prod\"}", NULL, &st);
	assert_int_equal(st, 403);
	json_decref(j);
	j = call(x, "POST", "/api/v1/captures", NULL, "{\"agents\":\"env=prod\"}", NULL, &st);
	assert_int_equal(st, 401);
	json_decref(j);
	j = call(x, "PUT", "/api/v1/captures", x->op, "{}", NULL, &st);
	assert_int_equal(st, 405);
	json_decref(j);
	j = call(x, "GET", "/api/v1/captures", x->viewer, NULL, "state=nope", &st);
	assert_int_equal(st, 400);
	json_decref(j);
	j = call(x, "GET", "/api/v1/captures", x->viewer, NULL, "limit=0", &st);
	assert_int_equal(st, 400);
	json_decref(j);
	assert_int_equal(x->sent, 0);
}

/* counts[0]: capture.create entries, counts[1]: capture.cancel entries (by an operator). */
static int audit_cb(const struct pf_audit_entry *e, void *ud)
{
	int *counts = ud;
	if (strcmp(e->actor, "oncall-bot") != 0 || !e->actor_id[0]) /* the token, not a role */
		return 0;
	bool ok = e->status >= 200 && e->status < 300;
	counts[0] += ok && strcmp(e->action, "capture.create") == 0;
	counts[1] += ok && strcmp(e->action, "capture.cancel") == 0;
	counts[2] += !ok && strcmp(e->action, "capture.cancel") == 0; /* 409, 404 */
	return 0;
}

static void test_create_get_list_cancel(void **state)
{
	struct fx *x = *state;
	int st;
	json_t *j = call(x, "POST", "/api/v1/captures", x->op,
			 "{\"agents\":\"env=prod\",\"duration_seconds\":10,\"processes\":[{\"key\":"
			 "\"service.name\",\"value\":\"checkout\"}],\"note\":\"n\"}",
			 NULL, &st);
	assert_int_equal(st, 202);
	assert_int_equal(json_integer_value(json_object_get(j, "agents_matched")), 2);
	assert_string_equal(json_string_value(json_object_get(j, "state")), "pending");
	assert_non_null(strstr(x->last, "\"profile_type\":\"cpu\""));
	char id[PF_CAPTURE_ID_MAX + 1], path[128];
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(j, "id")));
	json_decref(j);
	assert_int_equal(x->sent, 1);

	/* the viewer reads it: defaults filled, the selector kept, the creator's token name */
	snprintf(path, sizeof(path), "/api/v1/captures/%s", id);
	j = call(x, "GET", path, x->viewer, NULL, NULL, &st);
	assert_int_equal(st, 200);
	json_t *req = json_object_get(j, "request");
	assert_string_equal(json_string_value(json_object_get(req, "agents")), "env=prod");
	assert_int_equal(json_integer_value(json_object_get(req, "frequency_hz")), 99);
	assert_string_equal(json_string_value(json_object_get(req, "profile_type")), "cpu");
	assert_string_equal(json_string_value(json_object_get(
				json_array_get(json_object_get(req, "processes"), 0), "match")),
			    "strict");
	assert_string_equal(json_string_value(json_object_get(j, "created_by")), "oncall-bot");
	assert_int_equal(json_array_size(json_object_get(j, "agents")), 2);
	assert_string_equal(json_string_value(json_object_get(
				json_array_get(json_object_get(j, "agents"), 0), "profile_type")),
			    "cpu");
	assert_true(json_is_null(json_object_get(j, "finished_at")));
	json_decref(j);

	j = call(x, "GET", "/api/v1/captures", x->viewer, NULL, "state=pending", &st);
	assert_int_equal(st, 200);
	assert_int_equal(json_array_size(json_object_get(j, "captures")), 1);
	assert_true(json_is_null(json_object_get(j, "next_cursor")));
	json_decref(j);

	j = call(x, "DELETE", path, x->viewer, NULL, NULL, &st);
	assert_int_equal(st, 403);
	json_decref(j);
	j = call(x, "DELETE", path, x->op, NULL, NULL, &st);
	assert_int_equal(st, 200);
	assert_string_equal(json_string_value(json_object_get(j, "state")), "cancelled");
	json_decref(j);
	j = call(x, "DELETE", path, x->op, NULL, NULL, &st);
	assert_int_equal(st, 409);
	json_decref(j);
	j = call(x, "DELETE", "/api/v1/captures/nope", x->op, NULL, NULL, &st);
	assert_int_equal(st, 404);
	json_decref(j);
	j = call(x, "GET", "/api/v1/captures/bad%2Fid", x->viewer, NULL, NULL, &st);
	assert_int_equal(st, 404);
	json_decref(j);

	/* both mutations are in the audit log, by the operator's token, and so are the two
	 * refused cancels with their status */
	int counts[3] = {0, 0, 0};
	struct pf_audit_query q = {.limit = 100};
	assert_int_equal(pf_store_audit_query(x->store, &q, audit_cb, counts), 0);
	assert_int_equal(counts[0], 1);
	assert_int_equal(counts[1], 1);
	assert_int_equal(counts[2], 2);

	/* a wall capture: the type goes to the agents and into every agent's result */
	j = call(x, "POST", "/api/v1/captures", x->op,
		 "{\"agents\":\"env=prod\",\"duration_seconds\":5,\"profile_type\":\"wall\"}",
		 NULL, &st);
	assert_int_equal(st, 202);
	assert_non_null(strstr(x->last, "\"profile_type\":\"wall\""));
	snprintf(path, sizeof(path), "/api/v1/captures/%s",
		 json_string_value(json_object_get(j, "id")));
	json_decref(j);
	j = call(x, "GET", path, x->viewer, NULL, NULL, &st);
	assert_int_equal(st, 200);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(j, "request"), "profile_type")),
	    "wall");
	size_t i;
	json_t *a;
	json_array_foreach(json_object_get(j, "agents"), i, a)
	{
		assert_string_equal(json_string_value(json_object_get(a, "profile_type")), "wall");
	}
	json_decref(j);
}

static void test_disabled(void **state)
{
	struct fx *x = *state;
	int st;
	x->api.captures = NULL;
	json_t *j = call(x, "GET", "/api/v1/captures", x->viewer, NULL, NULL, &st);
	assert_int_equal(st, 503);
	json_decref(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	    T(test_validation_and_roles),
	    T(test_create_get_list_cancel),
	    T(test_disabled),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
