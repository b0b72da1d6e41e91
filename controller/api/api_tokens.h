/* api_tokens.h — token management and the audit query of the REST API (docs/api.md "Tokens"
 * and "Audit"), all admin routes in api.c's route table. Secrets are shown once, at
 * creation; the store keeps only their SHA-256.
 *
 *   POST   /api/v1/tokens {"name","role","expires_in"?}   201 with "token" (the secret)
 *   GET    /api/v1/tokens                                  no secrets
 *   DELETE /api/v1/tokens/{id}                             revokes at once (api->on_revoke)
 *   GET    /api/v1/audit?from=&to=&actor=&action=&limit=&cursor=   newest first
 *   POST   /api/v1/agents/{uid}/credential/rotate     202: a new credential offered on its
 *                                                      WebSocket (api->on_rotate)
 *   DELETE /api/v1/agents/{uid}/credential             deletes its credentials, closes what
 *                                                      they opened (api->on_revoke) */
#ifndef PF_API_TOKENS_H
#define PF_API_TOKENS_H

#include "api.h"

#define PF_API_AUDIT_LIST_DEFAULT 100
#define PF_API_AUDIT_LIST_MAX 1000
#define PF_API_TOKEN_MAX_TTL_S (10LL * 365 * 86400) /* expires_in at most ten years */

pf_api_route_fn pf_api_tokens_create;
pf_api_route_fn pf_api_tokens_list;
pf_api_route_fn pf_api_tokens_revoke;
pf_api_route_fn pf_api_audit_query;
pf_api_route_fn pf_api_agent_credential_rotate;
pf_api_route_fn pf_api_agent_credential_revoke;
/* "90" (seconds) or a number with one unit s, m, h or d ("24h"): seconds in 1..max_s, or -1. */
long long pf_api_parse_duration(const char *s, long long max_s);

#endif
