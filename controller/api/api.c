/* api.c — see api.h. */
#include "api.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "api_agents.h"
#include "api_captures.h"
#include "api_configs.h"
#include "api_ingest.h"
#include "api_int.h"
#include "api_profiles.h"
#include "api_rollouts.h"
#include "api_tokens.h"
#include "metrics.h"
#include "pf/hash.h"
#include "pf/log.h"
#include "store.h"


void pf_api_response_init(struct pf_api_response *r)
{
	memset(r, 0, sizeof(*r));
	r->status = 500;
	r->content_type = "application/json";
	pf_buf_init(&r->body, (size_t)256 << 20);
}

void pf_api_response_release(struct pf_api_response *r)
{
	pf_buf_release(&r->body);
}

void pf_api_error(struct pf_api_response *resp, int status, const char *code, const char *fmt,
		  ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_t *o = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	resp->status = status;
	resp->content_type = "application/json";
	pf_buf_reset(&resp->body);
	if (s) {
		pf_buf_append_str(&resp->body, s);
		pf_buf_putc(&resp->body, '\n');
	}
	free(s);
}

void pf_api_respond_json(struct pf_api_response *resp, int status, json_t *o)
{
	if (!o) {
		pf_api_error(resp, 500, "internal", "out of memory building the response");
		return;
	}
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!s) {
		pf_api_error(resp, 500, "internal", "out of memory building the response");
		return;
	}
	resp->status = status;
	resp->content_type = "application/json";
	pf_buf_reset(&resp->body);
	if (pf_buf_append_str(&resp->body, s) < 0 || pf_buf_putc(&resp->body, '\n') < 0)
		pf_api_error(resp, 500, "internal", "response too large");
	free(s);
}

const char *pf_api_arg(const struct pf_api_request *req, const char *key)
{
	size_t kl = strlen(key);
	for (size_t i = 0; i < req->n_args; i++)
		if (strncmp(req->args[i], key, kl) == 0 && req->args[i][kl] == '=')
			return req->args[i] + kl + 1;
	return NULL;
}

bool pf_api_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	if (!s || !*s)
		return false;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || s[0] == '-' || v < min || v > max)
		return false;
	*out = v;
	return true;
}

enum pf_role pf_role_parse(const char *s)
{
	if (!s)
		return PF_ROLE_NONE;
	if (strcmp(s, "admin") == 0)
		return PF_ROLE_ADMIN;
	if (strcmp(s, "operator") == 0)
		return PF_ROLE_OPERATOR;
	if (strcmp(s, "viewer") == 0)
		return PF_ROLE_VIEWER;
	if (strcmp(s, "agent") == 0)
		return PF_ROLE_AGENT;
	return PF_ROLE_NONE;
}

const char *pf_role_name(enum pf_role r)
{
	switch (r) {
	case PF_ROLE_ADMIN:
		return "admin";
	case PF_ROLE_OPERATOR:
		return "operator";
	case PF_ROLE_VIEWER:
		return "viewer";
	case PF_ROLE_AGENT:
		return "agent";
	default:
		return "none";
	}
}

int pf_api_token_hash(const char *authorization, uint8_t h[32])
{
	if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
		return -EINVAL;
	const char *tok = authorization + 7;
	while (*tok == ' ')
		tok++;
	size_t n = strlen(tok);
	while (n && (tok[n - 1] == ' ' || tok[n - 1] == '\r' || tok[n - 1] == '\n'))
		n--;
	if (!n || n > 512)
		return -EINVAL;
	pf_sha256(tok, n, h);
	return 0;
}

/* last_used_ms is written at most this often per token (a write per request would not do). */
#define TOKEN_TOUCH_MS 60000

static int authenticate(struct pf_store *st, const char *authorization, int64_t now_ms,
			bool touch, struct pf_api_caller *out)
{
	uint8_t h[32];
	if (pf_api_token_hash(authorization, h) < 0)
		return -EINVAL;
	struct pf_token_info t;
	int r = pf_store_token_find(st, h, &t);
	if (r < 0)
		return r;
	if (!pf_ct_memeq(t.hash, h, sizeof(h)))
		return -ENOENT;
	if (t.expires_ms && now_ms >= t.expires_ms)
		return -EKEYEXPIRED;
	/* A per-agent credential's first use is what counts (it confirms the credential); a
	 * write per agent and minute would cost a reconnecting fleet one write per agent. */
	if (touch && now_ms - t.last_used_ms >= TOKEN_TOUCH_MS &&
	    !(t.agent_bound && t.last_used_ms)) {
		r = pf_store_token_touch(st, t.id, now_ms);
		if (r < 0)
			pf_log_debug("api: last_used of token %s not updated: %s", t.id,
				     strerror(-r));
	}
	memset(out, 0, sizeof(*out));
	snprintf(out->token_id, sizeof(out->token_id), "%s", t.id);
	snprintf(out->name, sizeof(out->name), "%s", t.name);
	out->role = pf_role_parse(t.role);
	out->expires_ms = t.expires_ms;
	out->agent_bound = t.agent_bound;
	memcpy(out->agent_uid, t.agent_uid, sizeof(out->agent_uid));
	out->first_use = t.last_used_ms == 0;
	return out->role == PF_ROLE_NONE ? -ENOENT : 0;
}

void pf_api_field_error(struct pf_api_response *resp, int status, const char *code,
			const struct pf_error *err)
{
	pf_api_respond_json(resp, status,
			    json_pack("{s:{s:s,s:s,s:s}}", "error", "code", code, "message",
				      err->msg[0] ? err->msg : "invalid request", "path",
				      err->path));
	resp->status = status;
}

json_t *pf_api_body_object(const struct pf_api_request *req, size_t max, struct pf_error *err)
{
	json_error_t jerr;
	if (req->body_len > max) {
		pf_error_set(err, -EINVAL, "body", "%zu bytes; at most %zu", req->body_len, max);
		return NULL;
	}
	json_t *body = json_loadb(req->body ? (const char *)req->body : "", req->body_len,
				  JSON_REJECT_DUPLICATES, &jerr);
	if (!body || !json_is_object(body)) {
		pf_error_set(err, -EINVAL, "body", "%s", body ? "must be a JSON object" : jerr.text);
		json_decref(body);
		return NULL;
	}
	return body;
}

void pf_api_respond_lookup(struct pf_api *api, struct pf_api_response *resp, json_t *o, int rc,
			   int status, const char *what, const char *id)
{
	if (o)
		pf_api_respond_json(resp, status, o);
	else if (rc == -ENOENT)
		pf_api_error(resp, 404, "not_found", "no %s '%.80s'", what, id);
	else
		pf_api_error(resp, 500, "store_error", "%s", pf_store_last_error(api->store));
}

void pf_api_creator(struct pf_api *api, const struct pf_api_request *req, const char *role,
		    char *out, size_t len)
{
	uint8_t h[32];
	if (req->call && req->call->caller.name[0])
		snprintf(out, len, "%s", req->call->caller.name);
	else if (pf_api_token_hash(req->authorization, h) < 0 ||
		 pf_store_token_name(api->store, h, out, len) < 0 || !*out)
		snprintf(out, len, "%s", role ? role : "");
}

int pf_api_authenticate(struct pf_store *st, const char *authorization, int64_t now_ms,
			struct pf_api_caller *out)
{
	return authenticate(st, authorization, now_ms, true, out);
}

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *pf_api_token_role(struct pf_store *st, const char *authorization, char *role,
			      size_t role_len)
{
	struct pf_api_caller c;
	if (pf_api_authenticate(st, authorization, wall_ms(), &c) < 0)
		return NULL;
	snprintf(role, role_len, "%s", pf_role_name(c.role));
	return role;
}

void pf_api_audit(struct pf_api *api, const struct pf_api_request *req, const char *role,
		  const char *action, const char *target, const char *detail)
{
	struct pf_api_call *call = req->call;
	if (call) {
		snprintf(call->action, sizeof(call->action), "%s", action);
		snprintf(call->target, sizeof(call->target), "%s", target ? target : "");
		snprintf(call->detail, sizeof(call->detail), "%s", detail ? detail : "");
		return;
	}
	struct pf_audit_entry e = {.ts_ms = req->now_ms,
				   .actor = role ? role : "anonymous",
				   .action = action,
				   .target = target,
				   .detail = detail,
				   .source = req->peer};
	int r = pf_store_audit_write(api->store, &e);
	if (r < 0)
		pf_log_warn("api: audit write failed for %s %s: %s", action, target, strerror(-r));
}

/* The dispatcher's row for a mutation route: what the handler named, else the route's
 * action and the path's first parameter. */
static void audit_call(struct pf_api *api, const struct pf_api_request *req,
		       const struct pf_api_route *rt, const struct pf_api_call *call, int status)
{
	struct pf_audit_entry e = {
	    .ts_ms = req->now_ms,
	    .actor = call->caller.name[0] ? call->caller.name : pf_role_name(call->caller.role),
	    .actor_id = call->caller.token_id,
	    .action = call->action[0] ? call->action : rt->action,
	    .target = call->target[0] ? call->target : call->params[0] ? call->params[0] : "",
	    .detail = call->detail,
	    .source = req->peer,
	    .status = status,
	};
	int r = pf_store_audit_write(api->store, &e);
	if (r < 0)
		pf_log_warn("api: audit write failed for %s %s: %s", e.action, e.target,
			    strerror(-r));
}

/* Who the caller is: the console shows the role and hides what the role may not do. */
/* The caller's token: what the console shows and which controls it offers. */
static void h_whoami(struct pf_api *api, const struct pf_api_request *req,
		     struct pf_api_response *resp)
{
	(void)api;
	const struct pf_api_caller *c = &req->call->caller;
	pf_api_respond_json(resp, 200,
			    json_pack("{s:s, s:s, s:s, s:o, s:b, s:b}", "role", pf_role_name(c->role),
				      "name", c->name, "id", c->token_id, "expires",
				      c->expires_ms ? json_integer((json_int_t)c->expires_ms)
						    : json_null(),
				      "can_write", c->role >= PF_ROLE_OPERATOR, "can_admin",
				      c->role >= PF_ROLE_ADMIN));
}

/* ---------------------------------------------------------------- routing */

static void r_healthz(struct pf_api *api, const struct pf_api_request *req,
		      struct pf_api_response *resp)
{
	(void)api, (void)req;
	resp->status = 200;
	resp->content_type = "text/plain";
	pf_buf_append_str(&resp->body, "ok\n");
}

static void r_readyz(struct pf_api *api, const struct pf_api_request *req,
		     struct pf_api_response *resp)
{
	(void)req;
	resp->status = api->ready ? 200 : 503;
	resp->content_type = "text/plain";
	pf_buf_append_str(&resp->body, api->ready ? "ready\n" : "starting\n");
}

static void r_metrics(struct pf_api *api, const struct pf_api_request *req,
		      struct pf_api_response *resp)
{
	resp->status = 200;
	resp->content_type = "text/plain; version=0.0.4";
	if (pf_metrics_render(api->metrics, api->fleet, req->now_ms, &resp->body) < 0)
		pf_api_error(resp, 500, "internal", "metrics too large");
}

static void r_captures(struct pf_api *api, const struct pf_api_request *req,
		       struct pf_api_response *resp)
{
	pf_api_captures_handle(api, req, resp, P0(req), ROLE(req));
}

/* Splits a path into at most 6 segments of < 160 bytes: the count, or 7 when it does not
 * fit (no route has such a path). */
#define MAX_SEGS 6
static size_t split_path(const char *path, char seg[MAX_SEGS][160])
{
	size_t n = 0;
	const char *p = path;
	while (*p == '/')
		p++;
	while (*p) {
		const char *e = strchr(p, '/');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (n == MAX_SEGS || l >= 160)
			return MAX_SEGS + 1;
		memcpy(seg[n], p, l);
		seg[n][l] = 0;
		n++;
		p += l;
		while (*p == '/')
			p++;
	}
	return n;
}

static void r_rollouts(struct pf_api *api, const struct pf_api_request *req,
		       struct pf_api_response *resp)
{
	char seg[MAX_SEGS][160];
	size_t n = split_path(req->path, seg);
	/* the table matched /api/v1/rollouts[/{id}[/{action}]] */
	pf_api_rollouts_handle(api, req, resp, (const char(*)[160])seg + 2, n - 2, ROLE(req));
}

static void r_profiles(struct pf_api *api, const struct pf_api_request *req,
		       struct pf_api_response *resp)
{
	char seg[MAX_SEGS][160];
	size_t n = split_path(req->path, seg);
	/* the table matched /api/v1/<1..3 segments> */
	pf_api_profiles_handle(api, req, resp, (const char(*)[160])seg + 2, n - 2);
}

/* The route table: the one place that says who may call what. Keep docs/api.md in step. */
static const struct pf_api_route routes[] = {
    {"GET", "/healthz", PF_ROLE_NONE, NULL, r_healthz},
    {"GET", "/readyz", PF_ROLE_NONE, NULL, r_readyz},
    {"GET", "/metrics", PF_ROLE_NONE, NULL, r_metrics},
    {"POST", "/ingest", PF_ROLE_AGENT, NULL, pf_api_pyroscope_ingest},
    {"GET", "/api/v1/whoami", PF_ROLE_VIEWER, NULL, h_whoami},
    {"GET", "/api/v1/agents", PF_ROLE_VIEWER, NULL, pf_api_agents_list},
    {"GET", "/api/v1/agents/*", PF_ROLE_VIEWER, NULL, pf_api_agent_get},
    {"POST", "/api/v1/agents/*/credential/rotate", PF_ROLE_ADMIN, "agent.credential.rotate", pf_api_agent_credential_rotate},
    {"DELETE", "/api/v1/agents/*/credential", PF_ROLE_ADMIN, "agent.credential.revoke", pf_api_agent_credential_revoke},
    {"GET", "/api/v1/fleet/summary", PF_ROLE_VIEWER, NULL, pf_api_fleet_summary},
    {"GET", "/api/v1/configs", PF_ROLE_VIEWER, NULL, pf_api_configs_list},
    {"GET", "/api/v1/configs/*", PF_ROLE_VIEWER, NULL, pf_api_config_get},
    {"PUT", "/api/v1/configs/*", PF_ROLE_ADMIN, "config.put", pf_api_config_put},
    {"POST", "/api/v1/configs/*", PF_ROLE_OPERATOR, "config.validate", pf_api_config_post},
    {"GET", "/api/v1/configs/*/versions", PF_ROLE_VIEWER, NULL, pf_api_config_versions},
    {"POST", "/api/v1/configs/*/validate", PF_ROLE_OPERATOR, "config.validate", pf_api_config_validate},
    {"GET", "/api/v1/assignments", PF_ROLE_VIEWER, NULL, pf_api_assignments_list},
    {"GET", "/api/v1/assignments/*", PF_ROLE_VIEWER, NULL, pf_api_assignment_get},
    {"PUT", "/api/v1/assignments/*", PF_ROLE_ADMIN, "assignment.put", pf_api_assignment_put},
    {"DELETE", "/api/v1/assignments/*", PF_ROLE_ADMIN, "assignment.delete", pf_api_assignment_delete},
    {"GET", "/api/v1/captures", PF_ROLE_VIEWER, NULL, r_captures},
    {"POST", "/api/v1/captures", PF_ROLE_OPERATOR, "capture.create", r_captures},
    {"GET", "/api/v1/captures/*", PF_ROLE_VIEWER, NULL, r_captures},
    {"DELETE", "/api/v1/captures/*", PF_ROLE_OPERATOR, "capture.cancel", r_captures},
    {"GET", "/api/v1/rollouts", PF_ROLE_VIEWER, NULL, r_rollouts},
    {"POST", "/api/v1/rollouts", PF_ROLE_OPERATOR, "rollout.create", r_rollouts},
    {"GET", "/api/v1/rollouts/*", PF_ROLE_VIEWER, NULL, r_rollouts},
    {"POST", "/api/v1/rollouts/*/pause", PF_ROLE_OPERATOR, "rollout.pause", r_rollouts},
    {"POST", "/api/v1/rollouts/*/resume", PF_ROLE_OPERATOR, "rollout.resume", r_rollouts},
    {"POST", "/api/v1/rollouts/*/rollback", PF_ROLE_OPERATOR, "rollout.rollback", r_rollouts},
    {"POST", "/api/v1/rollouts/*/cancel", PF_ROLE_OPERATOR, "rollout.cancel", r_rollouts},
    {"GET", "/api/v1/profiles", PF_ROLE_VIEWER, NULL, r_profiles},
    {"GET", "/api/v1/profiles/*", PF_ROLE_VIEWER, NULL, r_profiles},
    {"GET", "/api/v1/profiles/*/pprof", PF_ROLE_VIEWER, NULL, r_profiles},
    {"GET", "/api/v1/profiles/*/flamegraph", PF_ROLE_VIEWER, NULL, r_profiles},
    {"GET", "/api/v1/flamegraph", PF_ROLE_VIEWER, NULL, r_profiles},
    {"GET", "/api/v1/flamegraph/diff", PF_ROLE_VIEWER, NULL, r_profiles},
    {"GET", "/api/v1/top", PF_ROLE_VIEWER, NULL, r_profiles},
    {"GET", "/api/v1/timeline", PF_ROLE_VIEWER, NULL, r_profiles},
    {"GET", "/api/v1/labels", PF_ROLE_VIEWER, NULL, r_profiles},
    {"GET", "/api/v1/labels/*/values", PF_ROLE_VIEWER, NULL, r_profiles},
    {"GET", "/api/v1/profile_types", PF_ROLE_VIEWER, NULL, r_profiles},
    {"GET", "/api/v1/tokens", PF_ROLE_ADMIN, NULL, pf_api_tokens_list},
    {"POST", "/api/v1/tokens", PF_ROLE_ADMIN, "token.create", pf_api_tokens_create},
    {"DELETE", "/api/v1/tokens/*", PF_ROLE_ADMIN, "token.revoke", pf_api_tokens_revoke},
    {"GET", "/api/v1/audit", PF_ROLE_ADMIN, NULL, pf_api_audit_query},
};

const struct pf_api_route *pf_api_routes(size_t *n)
{
	*n = PF_ARRAY_SIZE(routes);
	return routes;
}

/* Whether the path's segments fit the pattern's; the '*' segments go to params. */
static bool pattern_match(const char *pattern, char seg[MAX_SEGS][160], size_t n,
			  const char *params[2])
{
	char pat[MAX_SEGS][160];
	size_t pn = split_path(pattern, pat), np = 0;
	if (pn != n)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(pat[i], "*") == 0) {
			if (np < 2)
				params[np++] = seg[i];
		} else if (strcmp(pat[i], seg[i]) != 0) {
			return false;
		}
	}
	return true;
}

/* Bytes a path must not hold even once decoded (a %00 cut short by the glue shows up as a
 * control byte or not at all; server.c rejects the cut): control bytes. */
static bool path_ok(const char *p)
{
	for (; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

static void unauthenticated(struct pf_api_response *resp, const char *why)
{
	pf_api_error(resp, 401, "unauthenticated", "%s", why);
	snprintf(resp->extra_header_name, sizeof(resp->extra_header_name), "WWW-Authenticate:");
	snprintf(resp->extra_header_value, sizeof(resp->extra_header_value),
		 "Bearer realm=\"profleet\"");
}

/* The shared database is unreachable: 503 with the store's reason and a Retry-After, in
 * place of whatever the handler answered (a 500 "store_error", or 401 when the token could
 * not be read). The connection is re-made with backoff (store.h). */
static void store_unavailable(struct pf_api *api, struct pf_api_response *resp)
{
	const char *why = pf_store_last_error(api->store);
	pf_api_error(resp, 503, "store_unavailable", "%s", why && *why ? why : "store unavailable");
	snprintf(resp->extra_header_name, sizeof(resp->extra_header_name), "Retry-After:");
	snprintf(resp->extra_header_value, sizeof(resp->extra_header_value), "2");
}

static void route(struct pf_api *api, const struct pf_api_request *req,
		  struct pf_api_response *resp)
{
	const char *path = req->path;
	if (!path_ok(path) || path[0] != '/') {
		pf_api_error(resp, 400, "invalid_path", "the path holds a control byte");
		return;
	}
	char seg[MAX_SEGS][160];
	size_t n = split_path(path, seg);
	struct pf_api_call call = {0};
	const struct pf_api_route *rt = NULL;
	char allow[64] = "";
	bool path_known = false;
	for (size_t i = 0; i < PF_ARRAY_SIZE(routes); i++) {
		const char *params[2] = {NULL, NULL};
		if (!pattern_match(routes[i].pattern, seg, n, params))
			continue;
		path_known = true;
		size_t al = strlen(allow);
		snprintf(allow + al, sizeof(allow) - al, "%s%s", al ? ", " : "", routes[i].method);
		if (!rt && strcmp(routes[i].method, req->method) == 0) {
			rt = &routes[i];
			call.params[0] = params[0];
			call.params[1] = params[1];
		}
	}
	bool public = rt ? rt->role == PF_ROLE_NONE : strncmp(path, "/api/", 5) != 0;
	if (!public) {
		int r = authenticate(api->store, req->authorization, req->now_ms, !api->read_only,
				     &call.caller);
		if (r == -EAGAIN) {
			store_unavailable(api, resp);
			return;
		}
		if (r < 0) {
			unauthenticated(resp, !req->authorization ? "missing 'Authorization: Bearer <token>'"
					      : r == -EKEYEXPIRED ? "the token has expired"
								  : "the token is not valid for the API");
			return;
		}
	}
	if (!rt) {
		if (path_known) {
			pf_api_error(resp, 405, "method_not_allowed", "%s is not allowed on %s",
				     req->method, path);
			snprintf(resp->extra_header_name, sizeof(resp->extra_header_name),
				 "Allow:");
			snprintf(resp->extra_header_value, sizeof(resp->extra_header_value), "%s",
				 allow);
		} else {
			pf_api_error(resp, 404, "not_found", "no route for %s", path);
		}
		return;
	}
	if (call.caller.role < rt->role) {
		pf_api_error(resp, 403, "permission_denied", "%s %s needs the %s role; this token is %s",
			     req->method, rt->pattern, pf_role_name(rt->role),
			     pf_role_name(call.caller.role));
		if (rt->action)
			audit_call(api, req, rt, &call, resp->status);
		return;
	}
	struct pf_api_request q = *req;
	q.call = &call;
	rt->handler(api, &q, resp);
	if (resp->forward_id[0])
		return; /* the driving replica runs it and writes its audit row */
	if (resp->status >= 500 && pf_store_unavailable(api->store))
		store_unavailable(api, resp);
	if (rt->action)
		audit_call(api, req, rt, &call, resp->status);
}

void pf_api_handle(struct pf_api *api, const struct pf_api_request *req,
		   struct pf_api_response *resp)
{
	route(api, req, resp);
	if (api->metrics && !resp->forward_id[0]) /* counted when it is answered */
		pf_metrics_api_request(api->metrics, resp->status);
}

void pf_api_handle_as(struct pf_api *api, const struct pf_api_request *req,
		      const struct pf_api_caller *caller, struct pf_api_response *resp)
{
	char seg[MAX_SEGS][160];
	size_t n = split_path(req->path, seg);
	struct pf_api_call call = {.caller = *caller, .command = true};
	const struct pf_api_route *rt = NULL;
	for (size_t i = 0; !rt && i < PF_ARRAY_SIZE(routes); i++) {
		const char *params[2] = {NULL, NULL};
		if (strcmp(routes[i].method, req->method) == 0 &&
		    pattern_match(routes[i].pattern, seg, n, params)) {
			rt = &routes[i];
			call.params[0] = params[0];
			call.params[1] = params[1];
		}
	}
	if (!rt) {
		pf_api_error(resp, 404, "not_found", "no route for %s", req->path);
		return;
	}
	struct pf_api_request q = *req;
	q.call = &call;
	rt->handler(api, &q, resp);
	if (resp->forward_id[0] || resp->status == 0)
		return; /* not driven here after all: left for the replica that drives it */
	if (resp->status >= 500 && pf_store_unavailable(api->store))
		store_unavailable(api, resp);
	if (rt->action)
		audit_call(api, req, rt, &call, resp->status);
}
