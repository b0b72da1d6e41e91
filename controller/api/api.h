/* api.h — the REST API (/api/v1), /healthz, /readyz and /metrics as plain functions over a
 * parsed request: the lws glue (server.c) collects method, path, query arguments, the
 * Authorization header, the peer address and the body, calls pf_api_handle() and writes the
 * response back. Unit tests call pf_api_handle() directly.
 *
 * Every route is one row of the route table in api.c (pf_api_routes()): method, path
 * pattern, minimum role, audit action, handler. The dispatcher authenticates (401), finds
 * the route (404, 405), checks the role (403) and, for routes with an audit action, writes
 * one audit row per call with the token, the peer, the target, a short detail and the
 * status. docs/api.md lists the table.
 * Tokens: `Authorization: Bearer <token>`, looked up by the SHA-256 of the token; roles
 * viewer < operator < admin; agent tokens only serve OpAMP and profile ingest (403 here). */
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
	bool read_only; /* the store connection is read-only (query pool): no last_used updates */
	/* Called after a token was revoked (server.c closes the OpAMP connections it opened). */
	void (*on_revoke)(const char *token_id, void *ud);
	void *revoke_ud;
	/* Offers the agent a new credential on its live connection (server.c; revoke_ud is
	 * its argument): 0, -ENOTCONN when it is not connected here over WebSocket,
	 * -EOPNOTSUPP when it does not accept OpAMP connection settings. */
	int (*on_rotate)(const uint8_t uid[16], void *ud);
	/* Replicas sharing PostgreSQL (pf_api_refresh_fleet): the newest agent-row stamp read,
	 * and when the rows were last read (monotonic ms). */
	int64_t agents_cursor_ms;
	int64_t agents_read_ms;
};

/* Roles in increasing power; agent is below viewer so agent tokens get 403 on the REST API. */
enum pf_role { PF_ROLE_NONE, PF_ROLE_AGENT, PF_ROLE_VIEWER, PF_ROLE_OPERATOR, PF_ROLE_ADMIN };

/* Who made a request: the token that authenticated it. */
struct pf_api_caller {
	char token_id[17];
	char name[65];
	enum pf_role role;
	int64_t expires_ms; /* 0: never */
	bool agent_bound;      /* a per-agent credential (store.h), for agent_uid only */
	uint8_t agent_uid[16];
	bool first_use;        /* never used before this call */
};

/* Filled by the dispatcher while a route runs (pf_api_audit() stores into it). */
struct pf_api_call {
	struct pf_api_caller caller;
	const char *params[2]; /* the pattern's '*' segments */
	char action[48];
	char target[160];
	char detail[256];
	bool command; /* running a command another replica forwarded (api_forward.h) */
};

struct pf_api_request {
	const char *method; /* "GET", "PUT", ... */
	const char *path;   /* without the query */
	size_t n_args;
	const char *args[PF_API_MAX_ARGS]; /* decoded "key=value" pieces of the query */
	const char *authorization;         /* header value or NULL */
	const char *peer;                  /* the client's address (audit), or NULL */
	struct pf_api_call *call;          /* set by the dispatcher for the handler */
	const uint8_t *body;
	size_t body_len;
	int64_t now_ms;
	/* Receiving routes only (POST /ingest): the body's Content-Type (may be NULL), whether
	 * it came with Content-Encoding gzip, and its bound after decompression (0: default). */
	const char *content_type;
	bool body_gzip;
	size_t max_body_bytes;
};

struct pf_api_response {
	int status;
	const char *content_type;
	char extra_header_name[32];
	char extra_header_value[128];
	struct pf_buf body;
	/* Not answered yet: forwarded to the replica that drives the target (api_forward.h);
	 * the server parks the request until pf_api_forward_outcome() answers it. */
	char forward_id[40];
};

void pf_api_response_init(struct pf_api_response *r);
void pf_api_response_release(struct pf_api_response *r);

/* Replicas sharing PostgreSQL: loads the agents connected to the other replicas from their
 * stored rows into the fleet, so that lists, selectors, rollouts and captures see the whole
 * fleet (fleet/sync.h): only the rows written since the last read, and at most every
 * PF_API_REFRESH_MS. Nothing on an SQLite store. */
#define PF_API_REFRESH_MS 250
void pf_api_refresh_fleet(struct pf_api *api);

/* Handles one request; always fills resp (status, content type, body). */
void pf_api_handle(struct pf_api *api, const struct pf_api_request *req,
		   struct pf_api_response *resp);

/* One route: method, pattern (a segment "*" matches any one path segment, at most 2 per
 * pattern; /api/v1/configs/{name} is written with a star),
 * minimum role (PF_ROLE_NONE: no token), audit action (NULL: not audited), handler. */
typedef void pf_api_route_fn(struct pf_api *api, const struct pf_api_request *req,
			     struct pf_api_response *resp);
typedef pf_api_route_fn *pf_api_handler;
struct pf_api_route {
	const char *method;
	const char *pattern;
	enum pf_role role;
	const char *action;
	pf_api_handler handler;
};
/* The route table (for tests and docs). */
const struct pf_api_route *pf_api_routes(size_t *n);
enum pf_role pf_role_parse(const char *s); /* PF_ROLE_NONE when unknown */
const char *pf_role_name(enum pf_role r);

/* Authenticates a bearer token at now_ms: 0 and *out filled; -EINVAL missing or malformed
 * header, -ENOENT unknown (or revoked), -EKEYEXPIRED expired, other negative errno on store
 * errors. The stored hash is compared with the computed one in constant time. Updates the
 * token's last_used (at most once a minute), so st must be writable. */
int pf_api_authenticate(struct pf_store *st, const char *authorization, int64_t now_ms,
			struct pf_api_caller *out);
/* Role of a bearer token ("admin", "operator", "viewer", "agent") valid now, or NULL when the
 * header is missing, malformed or the token unknown or expired. role must hold 16 bytes. */
const char *pf_api_token_role(struct pf_store *st, const char *authorization, char *role,
			      size_t role_len);
/* The SHA-256 of the bearer token in an Authorization header: 0, or -EINVAL when the header
 * is missing or malformed. */
int pf_api_token_hash(const char *authorization, uint8_t hash[32]);
/* A decoded query argument ("key=value" piece) or NULL. */
const char *pf_api_arg(const struct pf_api_request *req, const char *key);
/* Answers o (consumed; NULL answers 500) as JSON with status. */
void pf_api_respond_json(struct pf_api_response *resp, int status, struct json_t *o);
/* Names the audit row of the running mutation route (the dispatcher writes it with the
 * caller, peer and status when the handler returns). Outside a dispatched route it writes
 * a row at once with actor = role. role is the caller's (unused inside a route). */
void pf_api_audit(struct pf_api *api, const struct pf_api_request *req, const char *role,
		  const char *action, const char *target, const char *detail);
/* {"error":{"code","message","path"}} with status — path names the offending field. */
void pf_api_field_error(struct pf_api_response *resp, int status, const char *code,
			const struct pf_error *err);
/* The request body as a JSON object (the caller owns it; duplicate keys are refused), or NULL
 * with -EINVAL at path "body" in err when it is over max bytes, not JSON or not an object. */
struct json_t *pf_api_body_object(const struct pf_api_request *req, size_t max,
				  struct pf_error *err);
/* Answers the result o of looking up the thing (what: "capture", ...) with this id: o
 * (consumed) with status; when o is NULL, 404 for rc -ENOENT, else 500 with the store's last
 * error. */
void pf_api_respond_lookup(struct pf_api *api, struct pf_api_response *resp, struct json_t *o,
			   int rc, int status, const char *what, const char *id);
/* The name the caller's token was stored with, else its role. */
void pf_api_creator(struct pf_api *api, const struct pf_api_request *req, const char *role,
		    char *out, size_t len);
/* Writes an error body and status. */
void pf_api_error(struct pf_api_response *resp, int status, const char *code, const char *fmt,
		  ...) __attribute__((format(printf, 4, 5)));

#endif
