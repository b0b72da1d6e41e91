/* api_fixture.c — see api_fixture.h. */
#include "api_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fleet/fleet.h"
#include "pf/hash.h"
#include "store.h"

void api_fixture_open(const char *tag, char dir[64], struct pf_store **store,
		      struct pf_fleet **fleet)
{
	char db[128];
	snprintf(dir, 64, "/tmp/pf-test-%s-XXXXXX", tag);
	assert_non_null(mkdtemp(dir));
	snprintf(db, sizeof(db), "%s/db", dir);
	*store = pf_store_open(db, PF_STORE_SYNC_NORMAL, NULL);
	assert_non_null(*store);
	struct pf_fleet_options fo = {.heartbeat_interval_s = 30};
	*fleet = pf_fleet_new(&fo);
	assert_non_null(*fleet);
}

void api_fixture_close(const char *dir, struct pf_store *store, struct pf_fleet *fleet)
{
	char cmd[128];
	pf_fleet_free(fleet);
	pf_store_close(store);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

void api_fixture_token(struct pf_store *st, const char *role, const char *name, char auth[80])
{
	char tok[64];
	uint8_t h[32];
	assert_int_equal(pf_token_generate(tok, sizeof(tok)), 0);
	pf_sha256(tok, strlen(tok), h);
	assert_int_equal(pf_store_token_add(st, h, role, name, 1), 0);
	snprintf(auth, 80, "Bearer %s", tok);
}

json_t *api_fixture_call(struct pf_api *api, const char *method, const char *path, const char *auth,
			 const char *body, const char *arg, int *status)
{
	struct pf_api_request q = {.method = method,
				   .path = path,
				   .authorization = auth,
				   .body = (const uint8_t *)body,
				   .body_len = body ? strlen(body) : 0,
				   .now_ms = 1700000000000};
	if (arg)
		q.args[q.n_args++] = arg;
	struct pf_api_response r;
	pf_api_response_init(&r);
	pf_api_handle(api, &q, &r);
	*status = r.status;
	json_t *j = json_loadb((const char *)r.body.data, r.body.len, 0, NULL);
	assert_non_null(j);
	pf_api_response_release(&r);
	return j;
}

const char *api_fixture_err(json_t *j, const char *field)
{
	return json_string_value(json_object_get(json_object_get(j, "error"), field));
}

json_t *api_fixture_child(json_t *node, const char *name)
{
	json_t *kids = json_object_get(node, "children");
	for (size_t i = 0; i < json_array_size(kids); i++) {
		json_t *c = json_array_get(kids, i);
		if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0)
			return c;
	}
	return NULL;
}

int64_t api_fixture_int(json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}
