/* api_int.h — private to the REST API's route handlers (controller/api/api*.c): what a
 * handler reads of its call, and the small parsers they share. */
#ifndef PF_API_INT_H
#define PF_API_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"

/* What a route handler reads of its call: the first '*' segment of the pattern, the
 * caller's role (its name for the audit log), whether the caller is an admin. */
#define P0(req) ((req)->call->params[0])
#define ROLE(req) pf_role_name((req)->call->caller.role)
#define IS_ADMIN(req) ((req)->call->caller.role >= PF_ROLE_ADMIN)

/* Runs the route of req's method and path for caller (already authorized where the call was
 * taken) with call->command set, and writes its audit row like the dispatcher: how a
 * forwarded command runs on the replica that drives its target (api_forward.c). */
void pf_api_handle_as(struct pf_api *api, const struct pf_api_request *req,
		      const struct pf_api_caller *caller, struct pf_api_response *resp);

/* A decimal in min..max (no sign, nothing after it) into *out; false otherwise. */
bool pf_api_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

#endif
