/* api_fixture.h — the controller unit tests' shared helpers: a store and a fleet in a
 * temporary directory, a bearer token stored with a role, one request through pf_api_handle()
 * with its JSON answer, a field of an error body, and the lookups the flame graph tests make
 * in a JSON tree. They fail the running cmocka test on any surprise. */
#ifndef PF_API_FIXTURE_H
#define PF_API_FIXTURE_H

#include <stdint.h>

#include <jansson.h>

#include "api/api.h"

struct pf_fleet;

/* A fresh directory /tmp/pf-test-<tag>-XXXXXX (its path in dir) holding a SQLite store
 * (*store, database file <dir>/db), and a fleet with a 30 s heartbeat (*fleet). */
void api_fixture_open(const char *tag, char dir[64], struct pf_store **store,
		      struct pf_fleet **fleet);
/* Frees the fleet, closes the store and removes the directory. */
void api_fixture_close(const char *dir, struct pf_store *store, struct pf_fleet *fleet);

/* Stores a fresh token with role and name; auth receives "Bearer <token>" (80 bytes). */
void api_fixture_token(struct pf_store *st, const char *role, const char *name, char auth[80]);
/* One request (arg: one "key=value" query argument or NULL); the parsed JSON answer (caller
 * owns it) and *status. */
json_t *api_fixture_call(struct pf_api *api, const char *method, const char *path, const char *auth,
			 const char *body, const char *arg, int *status);
/* error.<field> of an error answer, or NULL. */
const char *api_fixture_err(json_t *j, const char *field);
/* The element of node.children whose "name" is name, or NULL. */
json_t *api_fixture_child(json_t *node, const char *name);
/* The integer o.key (0 when absent). */
int64_t api_fixture_int(json_t *o, const char *key);

#endif
