/* test_api_tokens.c — the route table walked against every role, token management (create,
 * list without secrets, revoke with the revocation hook, expiry, the last admin) and the
 * audit query (actor, action prefix, time range, pages), through pf_api_handle() with a real
 * store in a temp directory and a real fleet. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
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
#include "api/api_tokens.h"
#include "fleet/fleet.h"
#include "metrics.h"
#include "pf/hash.h"
#include "store.h"

#define NOW 1700000000000LL

struct fx {
	char dir[64];
	struct pf_store *store;
	struct pf_fleet *fleet;
	struct pf_metrics metrics;
	struct pf_api api;
	char auth[5][80]; /* by enum pf_role; [PF_ROLE_NONE] unused */
	char revoked[17];
	int n_revoked;
};

static void on_revoke(const char *id, void *ud)
{
	struct fx *x = ud;
	snprintf(x->revoked, sizeof(x->revoked), "%s", id);
	x->n_revoked++;
}

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));
	api_fixture_open("apitok", x->dir, &x->store, &x->fleet);
	x->api = (struct pf_api){.fleet = x->fleet,
				 .store = x->store,
				 .metrics = &x->metrics,
				 .ready = true,
				 .on_revoke = on_revoke,
				 .revoke_ud = x};
	for (enum pf_role r = PF_ROLE_AGENT; r <= PF_ROLE_ADMIN; r++)
		api_fixture_token(x->store, pf_role_name(r), pf_role_name(r), x->auth[r]);
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

static json_t *call_at(struct fx *x, int64_t now, const char *method, const char *path,
		       const char *auth, const char *body, int *status, const char **args,
		       size_t n_args)
{
	struct pf_api_request q = {
	    .method = method,
	    .path = path,
	    .authorization = auth,
	    .peer = "127.0.0.1",
	    .body = (const uint8_t *)body,
	    .body_len = body ? strlen(body) : 0,
	    .now_ms = now,
	};
	for (size_t i = 0; i < n_args; i++)
		q.args[q.n_args++] = args[i];
	struct pf_api_response r;
	pf_api_response_init(&r);
	pf_api_handle(&x->api, &q, &r);
	*status = r.status;
	json_t *j = NULL;
	if (strcmp(r.content_type, "application/json") == 0)
		j = json_loadb((const char *)r.body.data, r.body.len, 0, NULL);
	pf_api_response_release(&r);
	return j;
}

static json_t *call(struct fx *x, const char *method, const char *path, const char *auth,
		    const char *body, int *status)
{
	return call_at(x, NOW, method, path, auth, body, status, NULL, 0);
}

/* The pattern with every '*' replaced by a value that names nothing. */
static void concrete(const char *pattern, char *out, size_t len)
{
	size_t o = 0;
	for (const char *p = pattern; *p && o + 8 < len; p++) {
		if (*p == '*') {
			memcpy(out + o, "nothing7", 8);
			o += 8;
		} else {
			out[o++] = *p;
		}
	}
	out[o] = 0;
}

/* Every route × no token, a bad token and every role: 401, 401, 403 below the route's
 * minimum role, neither 401 nor 403 at or above it. Public routes answer without a token. */
static void test_route_table_roles(void **state)
{
	struct fx *x = *state;
	size_t n;
	const struct pf_api_route *rt = pf_api_routes(&n);
	assert_true(n >= 25);
	size_t checked = 0;
	for (size_t i = 0; i < n; i++) {
		char path[256];
		int st;
		concrete(rt[i].pattern, path, sizeof(path));
		const char *body =
		    strcmp(rt[i].method, "GET") && strcmp(rt[i].method, "DELETE") ? "{}" : NULL;
		/* mutations are audited, reads are not, nor are the receiving routes (role
		 * agent: profile uploads, like the OTLP receiver's) */
		assert_true((rt[i].action != NULL) ==
			    (strcmp(rt[i].method, "GET") != 0 && rt[i].role != PF_ROLE_AGENT));
		if (rt[i].role == PF_ROLE_NONE) {
			json_decref(call(x, rt[i].method, path, NULL, body, &st));
			if (st == 401 || st == 403)
				fail_msg("%s %s is public but answered %d", rt[i].method, path, st);
			checked++;
			continue;
		}
		json_decref(call(x, rt[i].method, path, NULL, body, &st));
		if (st != 401)
			fail_msg("%s %s without a token: %d", rt[i].method, path, st);
		json_decref(call(x, rt[i].method, path, "Bearer pf_not-a-token-at-all", body, &st));
		if (st != 401)
			fail_msg("%s %s with a bad token: %d", rt[i].method, path, st);
		for (enum pf_role r = PF_ROLE_AGENT; r <= PF_ROLE_ADMIN; r++) {
			json_decref(call(x, rt[i].method, path, x->auth[r], body, &st));
			/* a receiving route takes agent tokens only */
			bool allowed =
			    rt[i].role == PF_ROLE_AGENT ? r == PF_ROLE_AGENT : r >= rt[i].role;
			if (!allowed && st != 403)
				fail_msg("%s %s as %s: %d, want 403", rt[i].method, path,
					 pf_role_name(r), st);
			if (allowed && (st == 401 || st == 403))
				fail_msg("%s %s as %s: %d, want it allowed", rt[i].method, path,
					 pf_role_name(r), st);
			checked++;
		}
	}
	assert_true(checked >= n * 4 - 12);
	/* agents get 403 everywhere on the REST API; admin-only routes as the brief lists */
	int st;
	json_decref(call(x, "GET", "/api/v1/fleet/summary", x->auth[PF_ROLE_AGENT], NULL, &st));
	assert_int_equal(st, 403);
	json_decref(call(x, "PUT", "/api/v1/configs/c1", x->auth[PF_ROLE_OPERATOR], "x: 1\n", &st));
	assert_int_equal(st, 403);
	json_decref(call(x, "GET", "/api/v1/audit", x->auth[PF_ROLE_OPERATOR], NULL, &st));
	assert_int_equal(st, 403);
	/* unknown path and wrong method with a valid token */
	json_t *j = call(x, "PATCH", "/api/v1/configs/c1", x->auth[PF_ROLE_ADMIN], NULL, &st);
	assert_int_equal(st, 405);
	json_decref(j);
	json_decref(call(x, "GET", "/api/v1/nope", x->auth[PF_ROLE_ADMIN], NULL, &st));
	assert_int_equal(st, 404);
	/* a control byte in the path (a decoded %01) is a bad request, not a route */
	json_decref(call(x, "GET", "/api/v1/agents\x01", x->auth[PF_ROLE_ADMIN], NULL, &st));
	assert_int_equal(st, 400);
}

static const char *str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static void test_tokens_create_list_revoke(void **state)
{
	struct fx *x = *state;
	int st;
	const char *admin = x->auth[PF_ROLE_ADMIN];
	json_t *j = call(x, "POST", "/api/v1/tokens", admin,
			 "{\"name\":\"ci-bot\",\"role\":\"operator\",\"expires_in\":\"1h\"}", &st);
	assert_int_equal(st, 201);
	char secret[80], id[17], auth[100];
	snprintf(secret, sizeof(secret), "%s", str(j, "token"));
	snprintf(id, sizeof(id), "%s", str(j, "id"));
	assert_int_equal(strlen(id), 16);
	assert_true(strncmp(secret, "pf_", 3) == 0);
	assert_string_equal(str(j, "role"), "operator");
	assert_string_equal(str(j, "created_by"), "admin");
	assert_int_equal(json_integer_value(json_object_get(j, "expires")), NOW + 3600 * 1000);
	json_decref(j);
	snprintf(auth, sizeof(auth), "Bearer %s", secret);

	/* it works at once, with its role */
	json_decref(call(x, "GET", "/api/v1/agents", auth, NULL, &st));
	assert_int_equal(st, 200);
	json_decref(call(x, "GET", "/api/v1/tokens", auth, NULL, &st));
	assert_int_equal(st, 403);

	/* the list shows it, never a secret */
	j = call(x, "GET", "/api/v1/tokens", admin, NULL, &st);
	assert_int_equal(st, 200);
	char *dump = json_dumps(j, 0);
	assert_null(strstr(dump, secret + 3));
	assert_null(strstr(dump, "\"token\""));
	free(dump);
	json_t *arr = json_object_get(j, "tokens"), *t;
	size_t i, found = 0;
	json_array_foreach(arr, i, t)
	{
		if (strcmp(str(t, "id"), id) == 0) {
			found++;
			assert_string_equal(str(t, "name"), "ci-bot");
			/* used once above: last_used set (at most once a minute) */
			assert_int_equal(json_integer_value(json_object_get(t, "last_used")), NOW);
		}
	}
	assert_int_equal(found, 1);
	assert_int_equal(json_array_size(arr), 5);
	json_decref(j);

	/* bad requests */
	static const char *const bad[] = {
	    "{\"name\":\"ci-bot\",\"role\":\"viewer\"}",	     /* 409: name taken */
	    "{\"name\":\"a b\",\"role\":\"viewer\"}",		     /* bad name */
	    "{\"name\":\"x\",\"role\":\"root\"}",		     /* bad role */
	    "{\"name\":\"x\"}",					     /* no role */
	    "{\"name\":\"x\",\"role\":\"viewer\",\"expires_in\":0}", /* zero */
	    "{\"name\":\"x\",\"role\":\"viewer\",\"expires_in\":\"5y\"}",
	    "{\"name\":\"x\",\"role\":\"viewer\",\"secret\":\"mine\"}",
	    "[]",
	};
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		j = call(x, "POST", "/api/v1/tokens", admin, bad[i], &st);
		if (st != (i == 0 ? 409 : 400))
			fail_msg("%s: %d", bad[i], st);
		json_decref(j);
	}

	/* revocation: immediate, the hook hears of it, a second time is 404 */
	char path[64];
	snprintf(path, sizeof(path), "/api/v1/tokens/%s", id);
	j = call(x, "DELETE", path, admin, NULL, &st);
	assert_int_equal(st, 200);
	assert_string_equal(str(j, "revoked"), id);
	json_decref(j);
	assert_int_equal(x->n_revoked, 1);
	assert_string_equal(x->revoked, id);
	j = call(x, "GET", "/api/v1/agents", auth, NULL, &st);
	assert_int_equal(st, 401);
	json_decref(j);
	json_decref(call(x, "DELETE", path, admin, NULL, &st));
	assert_int_equal(st, 404);
	assert_int_equal(x->n_revoked, 1);
}

static void test_tokens_expiry_and_last_admin(void **state)
{
	struct fx *x = *state;
	int st;
	const char *admin = x->auth[PF_ROLE_ADMIN];
	json_t *j = call(x, "POST", "/api/v1/tokens", admin,
			 "{\"name\":\"short\",\"role\":\"admin\",\"expires_in\":2}", &st);
	assert_int_equal(st, 201);
	char auth[100], id2[17];
	snprintf(auth, sizeof(auth), "Bearer %s", str(j, "token"));
	snprintf(id2, sizeof(id2), "%s", str(j, "id"));
	json_decref(j);
	json_decref(call_at(x, NOW + 1999, "GET", "/api/v1/tokens", auth, NULL, &st, NULL, 0));
	assert_int_equal(st, 200);
	j = call_at(x, NOW + 2000, "GET", "/api/v1/tokens", auth, NULL, &st, NULL, 0);
	assert_int_equal(st, 401);
	assert_non_null(strstr(
	    json_string_value(json_object_get(json_object_get(j, "error"), "message")), "expired"));
	json_decref(j);
	/* listed as expired */
	j = call_at(x, NOW + 5000, "GET", "/api/v1/tokens", admin, NULL, &st, NULL, 0);
	json_t *t;
	size_t i;
	json_array_foreach(json_object_get(j, "tokens"), i, t)
	{
		if (!strcmp(str(t, "name"), "short"))
			assert_true(json_is_true(json_object_get(t, "expired")));
	}
	json_decref(j);

	/* the bootstrap admin is the last valid admin token once "short" has expired */
	char *id = NULL;
	j = call_at(x, NOW + 5000, "GET", "/api/v1/tokens", admin, NULL, &st, NULL, 0);
	json_array_foreach(json_object_get(j, "tokens"), i, t)
	{
		if (!strcmp(str(t, "name"), "admin"))
			id = strdup(str(t, "id"));
	}
	json_decref(j);
	assert_non_null(id);
	char path[64];
	snprintf(path, sizeof(path), "/api/v1/tokens/%s", id);
	j = call_at(x, NOW + 5000, "DELETE", path, admin, NULL, &st, NULL, 0);
	assert_int_equal(st, 409);
	json_decref(j);
	/* while "short" is valid, the admin may revoke its own token */
	j = call_at(x, NOW + 1000, "DELETE", path, admin, NULL, &st, NULL, 0);
	assert_int_equal(st, 200);
	json_decref(j);
	json_decref(call_at(x, NOW + 1000, "GET", "/api/v1/tokens", admin, NULL, &st, NULL, 0));
	assert_int_equal(st, 401);
	free(id);

	assert_int_equal(pf_api_parse_duration("90", 100), 90);
	assert_int_equal(pf_api_parse_duration("2m", 1000), 120);
	assert_int_equal(pf_api_parse_duration("1d", 86400), 86400);
	assert_int_equal(pf_api_parse_duration("2d", 86400), -1);
	assert_int_equal(pf_api_parse_duration("-1", 100), -1);
	assert_int_equal(pf_api_parse_duration("1hh", 100000), -1);
	assert_int_equal(pf_api_parse_duration("", 100), -1);
	assert_int_equal(pf_api_parse_duration("99999999999999999999", 100), -1);
}

static void test_audit_query(void **state)
{
	struct fx *x = *state;
	int st;
	const char *admin = x->auth[PF_ROLE_ADMIN], *op = x->auth[PF_ROLE_OPERATOR];
	/* three mutations at different times: two by admin (one refused for a bad body), one
	 * refused for the operator's role */
	json_decref(call_at(x, NOW + 10, "POST", "/api/v1/tokens", admin,
			    "{\"name\":\"t1\",\"role\":\"viewer\"}", &st, NULL, 0));
	assert_int_equal(st, 201);
	json_decref(
	    call_at(x, NOW + 20, "PUT", "/api/v1/assignments/a1", admin, "{", &st, NULL, 0));
	assert_int_equal(st, 400);
	json_decref(call_at(x, NOW + 30, "POST", "/api/v1/tokens", op,
			    "{\"name\":\"t2\",\"role\":\"admin\"}", &st, NULL, 0));
	assert_int_equal(st, 403);

	const char *all[] = {"limit=10"};
	json_t *j = call(x, "GET", "/api/v1/audit", admin, NULL, &st);
	assert_int_equal(st, 200);
	json_decref(j);
	j = call_at(x, NOW, "GET", "/api/v1/audit", admin, NULL, &st, all, 1);
	json_t *e = json_object_get(j, "entries");
	assert_int_equal(json_array_size(e), 3);
	json_t *newest = json_array_get(e, 0), *oldest = json_array_get(e, 2);
	assert_string_equal(str(newest, "actor"), "operator");
	assert_string_equal(str(newest, "action"), "token.create");
	assert_int_equal(json_integer_value(json_object_get(newest, "status")), 403);
	assert_string_equal(str(newest, "source"), "127.0.0.1");
	assert_int_equal(strlen(str(newest, "actor_id")), 16);
	assert_string_equal(str(oldest, "actor"), "admin");
	assert_int_equal(json_integer_value(json_object_get(oldest, "status")), 201);
	assert_int_equal(strlen(str(oldest, "target")), 16); /* the new token's id */
	assert_non_null(strstr(str(oldest, "detail"), "name=t1"));
	assert_string_equal(str(json_array_get(e, 1), "target"), "a1");
	assert_true(json_is_null(json_object_get(j, "next_cursor")));
	json_decref(j);

	const char *by_actor[] = {"actor=admin"};
	j = call_at(x, NOW, "GET", "/api/v1/audit", admin, NULL, &st, by_actor, 1);
	assert_int_equal(json_array_size(json_object_get(j, "entries")), 2);
	json_decref(j);
	const char *by_action[] = {"action=token"};
	j = call_at(x, NOW, "GET", "/api/v1/audit", admin, NULL, &st, by_action, 1);
	assert_int_equal(json_array_size(json_object_get(j, "entries")), 2);
	json_decref(j);
	const char *by_time[] = {"from=1700000000015", "to=1700000000025"};
	j = call_at(x, NOW, "GET", "/api/v1/audit", admin, NULL, &st, by_time, 2);
	assert_int_equal(json_array_size(json_object_get(j, "entries")), 1);
	json_decref(j);
	/* pages of 2 */
	const char *page[] = {"limit=2", NULL};
	j = call_at(x, NOW, "GET", "/api/v1/audit", admin, NULL, &st, page, 1);
	assert_int_equal(json_array_size(json_object_get(j, "entries")), 2);
	char cur[64];
	snprintf(cur, sizeof(cur), "cursor=%s", str(j, "next_cursor"));
	json_decref(j);
	page[1] = cur;
	j = call_at(x, NOW, "GET", "/api/v1/audit", admin, NULL, &st, page, 2);
	assert_int_equal(json_array_size(json_object_get(j, "entries")), 1);
	assert_string_equal(str(json_array_get(json_object_get(j, "entries"), 0), "action"),
			    "token.create");
	json_decref(j);
	/* bad arguments */
	static const char *const bad[] = {"limit=0", "limit=1001", "from=x", "cursor=-1",
					  "sort=asc"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *a[] = {bad[i]};
		json_decref(call_at(x, NOW, "GET", "/api/v1/audit", admin, NULL, &st, a, 1));
		if (st != 400)
			fail_msg("%s: %d", bad[i], st);
	}
}

/* docs/api.md holds the route table between two markers, row for row as rendered here. */
static void test_docs_route_table(void **state)
{
	(void)state;
	const char *src = getenv("PF_SOURCE_DIR");
	if (!src)
		skip();
	char path[4096];
	snprintf(path, sizeof(path), "%s/docs/api.md", src);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	static char doc[1 << 18];
	size_t n = fread(doc, 1, sizeof(doc) - 1, f);
	fclose(f);
	doc[n] = 0;
	const char *b = strstr(doc, "<!-- routes:begin -->\n"),
		   *e = strstr(doc, "<!-- routes:end -->");
	assert_non_null(b);
	assert_non_null(e);
	b += strlen("<!-- routes:begin -->\n");
	static char want[1 << 16];
	size_t o = (size_t)snprintf(want, sizeof(want),
				    "| method | path | minimum role | audit action |\n"
				    "| --- | --- | --- | --- |\n");
	size_t nr;
	const struct pf_api_route *rt = pf_api_routes(&nr);
	for (size_t i = 0; i < nr && o < sizeof(want); i++)
		o += (size_t)snprintf(want + o, sizeof(want) - o, "| `%s` | `%s` | %s | %s |\n",
				      rt[i].method, rt[i].pattern,
				      rt[i].role == PF_ROLE_NONE ? "none (no token)"
								 : pf_role_name(rt[i].role),
				      rt[i].action ? rt[i].action : "");
	if ((size_t)(e - b) != o || memcmp(b, want, o) != 0)
		fail_msg(
		    "docs/api.md's route table is stale; between the markers it should be:\n%s",
		    want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_route_table_roles, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tokens_create_list_revoke, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tokens_expiry_and_last_admin, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_audit_query, setup, teardown),
	    cmocka_unit_test(test_docs_route_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
