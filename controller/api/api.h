/* api.h — the REST API (/api/v1), /healthz, /readyz and /metrics as plain functions over a
 * parsed request: the lws glue (server.c) collects method, path, query arguments, the
 * Authorization header and the body, calls pf_api_handle() and writes the response back.
 * Unit tests call pf_api_handle() directly.
 *
 * Routes (JSON; errors are {"error":{"code","message"}} with the right status):
 *   GET    /api/v1/agents[?selector=&limit=&cursor=]   viewer
 *   GET    /api/v1/agents/{uid}                        viewer
 *   GET    /api/v1/fleet/summary                       viewer
 *   GET    /api/v1/configs                             viewer
 *   PUT    /api/v1/configs/{name}[?dry_run=1] (YAML)  operator (409 while a rollout of it
 *                                                      is active)
 *   POST   /api/v1/configs/{name}:validate (YAML)     operator (validates, stores nothing)
 *   GET    /api/v1/configs/{name}[?version=N]          viewer
 *   GET    /api/v1/configs/{name}/versions             viewer
 *   GET    /api/v1/assignments                         viewer (with match counts)
 *   PUT    /api/v1/assignments/{name} (JSON body)      operator
 *   GET    /api/v1/assignments/{name}                  viewer
 *   DELETE /api/v1/assignments/{name}                  operator
 *   POST   /api/v1/captures, DELETE /api/v1/captures/{id}   operator (api_captures.h)
 *   GET    /api/v1/captures[/{id}]                     viewer
 *   POST   /api/v1/rollouts, /rollouts/{id}/{action}   operator (api_rollouts.h)
 *   GET    /api/v1/rollouts[/{id}]                     viewer
 *   GET    /api/v1/profiles..., /flamegraph, /top      viewer (api_profiles.h)
 *   GET    /healthz /readyz /metrics                   no token
 * Tokens: `Authorization: Bearer <token>`; roles viewer < operator < admin, looked up by the
 * SHA-256 of the token. Every mutation is written to the audit log. */
#ifndef PF_API_H
#define PF_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"
#include "pf/error.h"

struct pf_fleet;
struct pf_store;
struct pf_metrics;
struct pf_captures;
struct pf_rollouts;
struct json_t;

#define PF_API_MAX_ARGS 16
#define PF_API_MAX_BODY ((size_t)1 << 20)

struct pf_api {
	struct pf_fleet *fleet;
	struct pf_store *store;
	struct pf_metrics *metrics;
	struct pf_captures *captures; /* NULL: the capture routes answer 503 */
	struct pf_rollouts *rollouts; /* NULL: the rollout routes answer 503 */
	bool ready;
};

struct pf_api_request {
	const char *method; /* "GET", "PUT", ... */
	const char *path;   /* without the query */
	size_t n_args;
	const char *args[PF_API_MAX_ARGS]; /* decoded "key=value" pieces of the query */
	const char *authorization;         /* header value or NULL */
	const uint8_t *body;
	size_t body_len;
	int64_t now_ms;
};

struct pf_api_response {
	int status;
	const char *content_type;
	char extra_header_name[32];
	char extra_header_value[128];
	struct pf_buf body;
};

void pf_api_response_init(struct pf_api_response *r);
void pf_api_response_release(struct pf_api_response *r);

/* Handles one request; always fills resp (status, content type, body). */
void pf_api_handle(struct pf_api *api, const struct pf_api_request *req,
		   struct pf_api_response *resp);

/* Role of a bearer token ("admin", "operator", "viewer", "agent"), or NULL when the header is
 * missing, malformed or the token unknown. role must hold 16 bytes. */
const char *pf_api_token_role(struct pf_store *st, const char *authorization, char *role,
			      size_t role_len);
/* The SHA-256 of the bearer token in an Authorization header: 0, or -EINVAL when the header
 * is missing or malformed. */
int pf_api_token_hash(const char *authorization, uint8_t hash[32]);
/* A decoded query argument ("key=value" piece) or NULL. */
const char *pf_api_arg(const struct pf_api_request *req, const char *key);
/* Answers o (consumed; NULL answers 500) as JSON with status. */
void pf_api_respond_json(struct pf_api_response *resp, int status, struct json_t *o);
/* Writes an audit entry for a mutation (actor = the caller's role); failures are logged. */
void pf_api_audit(struct pf_api *api, const struct pf_api_request *req, const char *role,
		  const char *action, const char *target, const char *detail);
/* {"error":{"code","message","path"}} with status — path names the offending field. */
void pf_api_field_error(struct pf_api_response *resp, int status, const char *code,
			const struct pf_error *err);
/* The name the caller's token was stored with, else its role. */
void pf_api_creator(struct pf_api *api, const struct pf_api_request *req, const char *role,
		    char *out, size_t len);
/* Writes an error body and status. */
void pf_api_error(struct pf_api_response *resp, int status, const char *code, const char *fmt,
		  ...) __attribute__((format(printf, 4, 5)));

#endif
