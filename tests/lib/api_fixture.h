/* api_fixture.h — the REST API unit tests' shared helpers: a bearer token stored with a role,
 * one request through pf_api_handle() with its JSON answer, and a field of an error body.
 * They fail the running cmocka test on any surprise. */
#ifndef PF_API_FIXTURE_H
#define PF_API_FIXTURE_H

#include <jansson.h>

#include "api/api.h"

/* Stores a fresh token with role and name; auth receives "Bearer <token>" (80 bytes). */
void api_fixture_token(struct pf_store *st, const char *role, const char *name, char auth[80]);
/* One request (arg: one "key=value" query argument or NULL); the parsed JSON answer (caller
 * owns it) and *status. */
json_t *api_fixture_call(struct pf_api *api, const char *method, const char *path, const char *auth,
			 const char *body, const char *arg, int *status);
/* error.<field> of an error answer, or NULL. */
const char *api_fixture_err(json_t *j, const char *field);

#endif
