/* api.c — see api.h. */
#include "api.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>

#include "api_captures.h"
#include "api_profiles.h"
#include "api_rollouts.h"
#include "api_tokens.h"
#include "fleet/fleet.h"
#include "fleet/rollout.h"
#include "fleet/sync.h"
#include "metrics.h"
#include "pf/hash.h"
#include "pf/log.h"
#include "pf/profcfg.h"
#include "pf/selector.h"
#include "pf/uuid.h"
#include "redact.h"
#include "store.h"

#define AGENTS_DEFAULT_LIMIT 1000
#define AGENTS_MAX_LIMIT 10000


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
	if (touch && now_ms - t.last_used_ms >= TOKEN_TOUCH_MS) {
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

static bool valid_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.'))
			return false;
	}
	return true;
}

static json_t *hex_json(const uint8_t *h)
{
	char hex[65];
	pf_hex_encode(h, 32, hex);
	return json_string(hex);
}

/* ---------------------------------------------------------------- agents */

static const char *agent_attr_lookup(const char *key, void *ud)
{
	return pf_agent_attr(ud, key);
}

static int uid_cmp(const void *pa, const void *pb)
{
	const struct pf_agent *a = *(const struct pf_agent *const *)pa;
	const struct pf_agent *b = *(const struct pf_agent *const *)pb;
	return memcmp(a->uid, b->uid, 16);
}

static bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
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

/* An agent's state as the API and the console name it: disconnected, stale, healthy or
 * unhealthy (connected, not stale, root health not healthy). */
static const char *agent_state_name(const struct pf_fleet *f, const struct pf_agent *a,
				    int64_t now_ms)
{
	if (!pf_agent_online(a))
		return "disconnected";
	if (pf_agent_is_stale(f, a, now_ms))
		return "stale";
	return pf_agent_is_healthy(f, a, now_ms) ? "healthy" : "unhealthy";
}

static bool one_of(const char *v, const char *const *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v, set[i]) == 0)
			return true;
	return false;
}

void pf_api_refresh_fleet(struct pf_api *api)
{
	struct timespec ts;
	if (!pf_store_is_shared(api->store))
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	if (api->agents_read_ms && now - api->agents_read_ms < PF_API_REFRESH_MS)
		return;
	api->agents_read_ms = now;
	if (pf_sync_refresh_agents(api->store, api->fleet, &api->agents_cursor_ms) < 0)
		pf_log_warn("api: agents of other replicas not refreshed: %s",
			    pf_store_last_error(api->store));
}

/* What a route handler reads of its call: the first '*' segment of the pattern, the
 * caller's role (its name for the audit log), whether the caller is an admin. */
#define P0(req) ((req)->call->params[0])
#define ROLE(req) pf_role_name((req)->call->caller.role)
#define IS_ADMIN(req) ((req)->call->caller.role >= PF_ROLE_ADMIN)

static void h_agents_list(struct pf_api *api, const struct pf_api_request *req,
			  struct pf_api_response *resp)
{
	static const char *const states[] = {"healthy", "unhealthy", "stale", "disconnected"};
	const char *want_state = pf_api_arg(req, "state");
	const char *want_status = pf_api_arg(req, "config_status");
	if (want_state && *want_state && !one_of(want_state, states, 4)) {
		pf_api_error(resp, 400, "invalid_argument",
			     "state: must be healthy, unhealthy, stale or disconnected, got '%s'",
			     want_state);
		return;
	}
	bool status_ok = false;
	for (int i = PF_CFG_UNSET; i <= PF_CFG_FAILED; i++)
		status_ok |= want_status && strcmp(want_status, pf_config_state_name(i)) == 0;
	if (want_status && *want_status && !status_ok) {
		pf_api_error(resp, 400, "invalid_argument",
			     "config_status: must be UNSET, APPLYING, APPLIED or FAILED, got '%s'",
			     want_status);
		return;
	}
	struct pf_error err = {0};
	struct pf_selector *sel = NULL;
	const char *selsrc = pf_api_arg(req, "selector");
	if (selsrc && *selsrc) {
		sel = pf_selector_compile(selsrc, &err);
		if (!sel) {
			pf_api_error(resp, 400, "invalid_selector", "%s", err.msg);
			return;
		}
	}
	uint64_t limit = AGENTS_DEFAULT_LIMIT;
	const char *ls = pf_api_arg(req, "limit");
	if (ls && !parse_u64(ls, 1, AGENTS_MAX_LIMIT, &limit)) {
		pf_selector_free(sel);
		pf_api_error(resp, 400, "invalid_argument", "limit: must be 1..%d, got '%s'",
			     AGENTS_MAX_LIMIT, ls);
		return;
	}
	uint8_t cursor[16];
	bool has_cursor = false;
	const char *cs = pf_api_arg(req, "cursor");
	if (cs && *cs) {
		if (pf_uuid_parse(cs, cursor) < 0) {
			pf_selector_free(sel);
			pf_api_error(resp, 400, "invalid_argument",
				     "cursor: not an instance_uid: '%s'", cs);
			return;
		}
		has_cursor = true;
	}

	pf_api_refresh_fleet(api);
	size_t n = pf_fleet_count(api->fleet), m = 0;
	struct pf_agent **v = malloc((n ? n : 1) * sizeof(*v));
	if (!v) {
		pf_selector_free(sel);
		pf_api_error(resp, 500, "internal", "out of memory");
		return;
	}
	size_t it = 0;
	struct pf_agent *a;
	while ((a = pf_fleet_next(api->fleet, &it))) {
		if (sel && !pf_selector_match(sel, agent_attr_lookup, a))
			continue;
		if (has_cursor && memcmp(a->uid, cursor, 16) <= 0)
			continue;
		if (want_state && *want_state &&
		    strcmp(agent_state_name(api->fleet, a, req->now_ms), want_state) != 0)
			continue;
		if (want_status && *want_status &&
		    strcmp(pf_config_state_name(pf_agent_config_state(a)), want_status) != 0)
			continue;
		v[m++] = a;
	}
	pf_selector_free(sel);
	qsort(v, m, sizeof(*v), uid_cmp);

	json_t *arr = json_array();
	size_t take = m < limit ? m : (size_t)limit;
	for (size_t i = 0; arr && i < take; i++)
		json_array_append_new(arr, pf_agent_to_json(api->fleet, v[i], req->now_ms, false));
	json_t *next = json_null();
	if (take < m && take > 0) {
		char u[37];
		pf_uuid_format(v[take - 1]->uid, u);
		json_decref(next);
		next = json_string(u);
	}
	free(v);
	pf_api_respond_json(resp, 200,
		     arr ? json_pack("{s:o,s:o,s:I}", "agents", arr, "next_cursor", next, "matched",
				     (json_int_t)(m + 0))
			 : NULL);
}

static void h_agent_get(struct pf_api *api, const struct pf_api_request *req,
			struct pf_api_response *resp)
{
	const char *uidstr = P0(req);
	uint8_t uid[16];
	if (pf_uuid_parse(uidstr, uid) < 0) {
		pf_api_error(resp, 400, "invalid_argument", "not an instance_uid: '%s'", uidstr);
		return;
	}
	struct pf_agent *a = pf_fleet_find(api->fleet, uid);
	if ((!a || !a->local) && pf_store_is_shared(api->store)) {
		int r = pf_sync_refresh_agent(api->store, api->fleet, uid);
		if (r < 0 && r != -ENOENT)
			pf_log_warn("api: agent %s not refreshed: %s", uidstr,
				    pf_store_last_error(api->store));
		a = pf_fleet_find(api->fleet, uid);
	}
	if (!a) {
		pf_api_error(resp, 404, "not_found", "no agent %s", uidstr);
		return;
	}
	json_t *j = pf_agent_to_json(api->fleet, a, req->now_ms, true);
	pf_redact_agent_json(j, IS_ADMIN(req));
	pf_api_respond_json(resp, 200, j);
}

static void h_summary(struct pf_api *api, const struct pf_api_request *req,
		      struct pf_api_response *resp)
{
	struct pf_fleet_summary s;
	pf_api_refresh_fleet(api);
	pf_fleet_summary(api->fleet, req->now_ms, &s);
	pf_api_respond_json(resp, 200,
		     json_pack("{s:I,s:I,s:I,s:I,s:{s:I,s:I,s:I,s:I}}", "agents",
			       (json_int_t)s.agents, "connected", (json_int_t)s.connected,
			       "healthy", (json_int_t)s.healthy, "stale", (json_int_t)s.stale,
			       "config_status", "APPLIED", (json_int_t)s.by_state[PF_CFG_APPLIED],
			       "APPLYING", (json_int_t)s.by_state[PF_CFG_APPLYING], "FAILED",
			       (json_int_t)s.by_state[PF_CFG_FAILED], "UNSET",
			       (json_int_t)s.by_state[PF_CFG_UNSET]));
}

/* ---------------------------------------------------------------- configs */

/* Checks the name and the body; false when resp holds the error. */
static bool config_check(const struct pf_api_request *req, struct pf_api_response *resp,
			 const char *name)
{
	if (!valid_name(name)) {
		pf_api_error(resp, 400, "invalid_argument",
			     "config name must be 1..64 of [A-Za-z0-9._-], got '%s'", name);
		return false;
	}
	struct pf_error err = {0};
	struct pf_profcfg *cfg = NULL;
	int r = pf_profcfg_parse((const char *)req->body, req->body_len, &cfg, &err);
	if (r < 0) {
		if (!err.msg[0])
			snprintf(err.msg, sizeof(err.msg), "invalid config");
		pf_api_field_error(resp, r == -E2BIG ? 413 : 400, "invalid_config", &err);
		return false;
	}
	pf_profcfg_free(cfg);
	return true;
}

/* POST /configs/{name}:validate and PUT ?dry_run=1: the checks of a PUT, nothing stored. */
static void h_config_validate(const struct pf_api_request *req, struct pf_api_response *resp,
			      const char *name)
{
	if (!config_check(req, resp, name))
		return;
	uint8_t hash[32];
	pf_sha256(req->body, req->body_len, hash);
	pf_api_respond_json(resp, 200,
			    json_pack("{s:s,s:b,s:o}", "name", name, "valid", 1, "hash",
				      hex_json(hash)));
}

/* PUT ?stage=1: stores a new version for a rollout without serving it; the served version
 * is recorded so that a restart keeps serving it rather than the (newer) latest. */
static void h_config_stage(struct pf_api *api, const struct pf_api_request *req,
			   struct pf_api_response *resp, const char *name, const char *role,
			   int64_t served)
{
	uint8_t hash[32];
	pf_sha256(req->body, req->body_len, hash);
	int64_t version = 0;
	bool created = false;
	int r = pf_store_config_serving_set(api->store, name, served);
	if (r == 0)
		r = pf_store_config_put(api->store, name, (const char *)req->body, req->body_len,
					hash, req->now_ms, &version, &created);
	if (r < 0) {
		pf_api_error(resp, 500, "store_error", "could not stage config '%s': %s", name,
			     pf_store_last_error(api->store));
		return;
	}
	if (created) {
		char detail[64];
		snprintf(detail, sizeof(detail), "version %lld", (long long)version);
		pf_api_audit(api, req, role, "config.stage", name, detail);
	}
	pf_api_respond_json(resp, created ? 201 : 200,
			    json_pack("{s:s,s:I,s:o,s:b,s:b,s:I,s:I}", "name", name, "version",
				      (json_int_t)version, "hash", hex_json(hash), "created",
				      created, "staged", 1, "served_version", (json_int_t)served,
				      "pushed", (json_int_t)0));
}

static void h_config_put(struct pf_api *api, const struct pf_api_request *req,
			 struct pf_api_response *resp)
{
	const char *name = P0(req), *role = ROLE(req);
	const char *dry = pf_api_arg(req, "dry_run");
	if (dry && (strcmp(dry, "1") == 0 || strcmp(dry, "true") == 0))
		return h_config_validate(req, resp, name);
	if (!config_check(req, resp, name))
		return;
	const char *stage = pf_api_arg(req, "stage");
	if (pf_store_is_shared(api->store)) /* what other replicas did, even if not notified yet */
		pf_rollouts_reload_config(api->store, api->fleet, name);
	struct pf_cfg_slot *served = pf_fleet_config_find(api->fleet, name);
	if (stage && (strcmp(stage, "1") == 0 || strcmp(stage, "true") == 0) && served)
		return h_config_stage(api, req, resp, name, role, served->version);
	char active[PF_ROLLOUT_ID_MAX + 1];
	bool elsewhere = false;
	int r = api->rollouts ? pf_rollouts_find_active(api->rollouts, name, active, &elsewhere)
			      : 0;
	if (r < 0) {
		pf_api_error(resp, 500, "store_error", "could not read rollouts: %s",
			     pf_store_last_error(api->store));
		return;
	}
	if (r == 1) {
		/* The same answer on every replica sharing the store, whichever drives it. */
		pf_api_error(resp, 409, "rollout_active",
			     "rollout %s of config '%s' is active%s: let it finish, or cancel or "
			     "roll it back, before a plain PUT",
			     active, name, elsewhere ? " (driven by another replica)" : "");
		return;
	}

	uint8_t hash[32];
	pf_sha256(req->body, req->body_len, hash);
	int64_t version = 0;
	bool created = false;
	r = pf_store_config_put(api->store, name, (const char *)req->body, req->body_len, hash,
				req->now_ms, &version, &created);
	if (r < 0) {
		pf_api_error(resp, 500, "store_error", "could not store config '%s': %s", name,
			     strerror(-r));
		return;
	}
	size_t pushed = 0;
	/* A plain PUT serves its version to every agent of the config at once: the pins and the
	 * served version a rollout left behind are dropped. */
	r = pf_store_pins_clear(api->store, name, 0);
	if (r == 0)
		r = pf_store_config_serving_set(api->store, name, 0);
	if (r < 0) {
		pf_api_error(resp, 500, "store_error", "could not reset pins of '%s': %s", name,
			     pf_store_last_error(api->store));
		return;
	}
	size_t unpinned = pf_fleet_unpin_config(api->fleet, name, 0);
	if (created || unpinned || !served || served->version != version) {
		r = pf_fleet_config_set(api->fleet, name, version, hash, (const char *)req->body,
					req->body_len, req->now_ms);
		if (r < 0) {
			pf_api_error(resp, 500, "internal", "config stored but not loaded: %s",
				     strerror(-r));
			return;
		}
		pushed = pf_fleet_reconcile(api->fleet);
		char detail[64];
		snprintf(detail, sizeof(detail), "version %lld", (long long)version);
		pf_api_audit(api, req, role, "config.put", name, detail);
	}
	pf_api_respond_json(resp, created ? 201 : 200,
		     json_pack("{s:s,s:I,s:o,s:b,s:I}", "name", name, "version",
			       (json_int_t)version, "hash", hex_json(hash), "created", created,
			       "pushed", (json_int_t)pushed));
}

static void h_config_get(struct pf_api *api, const struct pf_api_request *req,
			 struct pf_api_response *resp)
{
	const char *name = P0(req);
	uint64_t version = 0;
	const char *vs = pf_api_arg(req, "version");
	if (vs && !parse_u64(vs, 1, INT64_MAX, &version)) {
		pf_api_error(resp, 400, "invalid_argument", "version: must be a positive integer");
		return;
	}
	struct pf_config_version cv;
	int r = pf_store_config_get(api->store, name, (int64_t)version, &cv);
	if (r == -ENOENT) {
		if (version)
			pf_api_error(resp, 404, "not_found", "config '%s' has no version %llu",
				     name, (unsigned long long)version);
		else
			pf_api_error(resp, 404, "not_found", "no config '%s'", name);
		return;
	}
	if (r < 0) {
		pf_api_error(resp, 500, "store_error", "reading config '%s': %s", name,
			     strerror(-r));
		return;
	}
	pf_api_respond_json(resp, 200,
			    json_pack("{s:s,s:I,s:o,s:I,s:o}", "name", cv.name, "version",
				      (json_int_t)cv.version, "hash", hex_json(cv.hash), "created",
				      (json_int_t)cv.created_ms, "body",
				      pf_redact_config_body(cv.body, cv.body_len, IS_ADMIN(req))));
	pf_config_version_release(&cv);
}

static int version_cb(const struct pf_config_version *cv, void *ud)
{
	json_t *arr = ud;
	json_array_append_new(arr, json_pack("{s:I,s:o,s:I}", "version", (json_int_t)cv->version,
					     "hash", hex_json(cv->hash), "created",
					     (json_int_t)cv->created_ms));
	return 0;
}

/* The answer to a store call's failure on the thing named name (what: "config", ...): 404 when
 * it does not exist, 500 otherwise. Whether r was a failure. */
static bool store_failed(struct pf_api_response *resp, int r, const char *what, const char *name)
{
	if (r == -ENOENT)
		pf_api_error(resp, 404, "not_found", "no %s '%s'", what, name);
	else if (r < 0)
		pf_api_error(resp, 500, "store_error", "%s", strerror(-r));
	return r < 0;
}

static void h_config_versions(struct pf_api *api, const struct pf_api_request *req,
			      struct pf_api_response *resp)
{
	const char *name = P0(req);
	json_t *arr = json_array();
	int r = pf_store_config_versions(api->store, name, version_cb, arr);
	if (store_failed(resp, r, "config", name)) {
		json_decref(arr);
		return;
	}
	pf_api_respond_json(resp, 200, json_pack("{s:s,s:o}", "name", name, "versions", arr));
}

/* What the list handlers' store callbacks append to. */
struct list_ctx {
	struct pf_api *api;
	json_t *arr;
};

/* Answers {key: arr} for a list the store walked with result r (arr consumed). */
static void respond_list(struct pf_api_response *resp, int r, const char *key, json_t *arr)
{
	if (r < 0) {
		json_decref(arr);
		pf_api_error(resp, 500, "store_error", "%s", strerror(-r));
		return;
	}
	pf_api_respond_json(resp, 200, json_pack("{s:o}", key, arr));
}

static int latest_cb(const struct pf_config_version *cv, void *ud)
{
	struct list_ctx *l = ud;
	const struct pf_cfg_slot *served = pf_fleet_config_find(l->api->fleet, cv->name);
	json_array_append_new(
	    l->arr, json_pack("{s:s,s:I,s:o,s:I,s:o}", "name", cv->name, "version",
			      (json_int_t)cv->version, "hash", hex_json(cv->hash), "created",
			      (json_int_t)cv->created_ms, "served_version",
			      served ? json_integer(served->version) : json_null()));
	return 0;
}

static void h_config_list(struct pf_api *api, const struct pf_api_request *req,
			  struct pf_api_response *resp)
{
	(void)req;
	struct list_ctx l = {.api = api, .arr = json_array()};
	respond_list(resp, pf_store_config_foreach_latest(api->store, latest_cb, &l), "configs",
		     l.arr);
}

/* ---------------------------------------------------------------- assignments */

static json_t *assignment_json(const struct pf_assignment *a)
{
	return json_pack("{s:s,s:s,s:s,s:I,s:I}", "name", a->name, "selector", a->selector,
			 "config", a->config, "priority", (json_int_t)a->priority, "updated",
			 (json_int_t)a->updated_ms);
}

/* The assignment with its match counts: "matched" agents its selector matches, of which
 * "resolved" have its config as their desired config (a higher-priority assignment may win
 * the others). */
static json_t *assignment_counts_json(struct pf_api *api, const struct pf_assignment *a)
{
	json_t *o = assignment_json(a);
	struct pf_selector *sel = pf_selector_compile(a->selector, NULL);
	if (!o || !sel) {
		pf_selector_free(sel);
		return o;
	}
	size_t resolved = 0;
	size_t matched = pf_fleet_count_matching(api->fleet, sel, a->config, &resolved);
	pf_selector_free(sel);
	json_object_set_new(o, "matched", json_integer((json_int_t)matched));
	json_object_set_new(o, "resolved", json_integer((json_int_t)resolved));
	return o;
}

static void h_assignment_put(struct pf_api *api, const struct pf_api_request *req,
			     struct pf_api_response *resp)
{
	const char *name = P0(req), *role = ROLE(req);
	if (!valid_name(name)) {
		pf_api_error(resp, 400, "invalid_argument",
			     "assignment name must be 1..64 of [A-Za-z0-9._-], got '%s'", name);
		return;
	}
	json_error_t jerr;
	json_t *o = json_loadb((const char *)req->body, req->body_len, JSON_REJECT_DUPLICATES,
			       &jerr);
	if (!o || !json_is_object(o)) {
		json_decref(o);
		pf_api_error(resp, 400, "invalid_json", "body: %s (line %d, column %d)",
			     o ? "must be a JSON object" : jerr.text, jerr.line, jerr.column);
		return;
	}
	struct pf_assignment a = {0};
	const char *key;
	json_t *val;
	const char *sel = "", *cfg = NULL;
	json_int_t prio = 0;
	json_object_foreach(o, key, val)
	{
		if (strcmp(key, "selector") == 0 && json_is_string(val)) {
			sel = json_string_value(val);
		} else if (strcmp(key, "config") == 0 && json_is_string(val)) {
			cfg = json_string_value(val);
		} else if (strcmp(key, "priority") == 0 && json_is_integer(val)) {
			prio = json_integer_value(val);
		} else if (strcmp(key, "name") == 0 && json_is_string(val)) {
			/* allowed when equal to the path's name */
			if (strcmp(json_string_value(val), name) != 0) {
				json_decref(o);
				pf_api_error(resp, 400, "invalid_argument",
					     "name: '%s' differs from the URL's '%s'",
					     json_string_value(val), name);
				return;
			}
		} else {
			bool known = !strcmp(key, "selector") || !strcmp(key, "config") ||
				     !strcmp(key, "priority");
			pf_api_error(resp, 400, "invalid_argument", known ? "%s: wrong type"
									 : "%s: unknown field",
				     key);
			json_decref(o);
			return;
		}
	}
	if (!cfg) {
		json_decref(o);
		pf_api_error(resp, 400, "invalid_argument", "config: required");
		return;
	}
	if (prio < -1000000 || prio > 1000000) {
		json_decref(o);
		pf_api_error(resp, 400, "invalid_argument",
			     "priority: must be -1000000..1000000, got %lld", (long long)prio);
		return;
	}
	if (strlen(sel) >= sizeof(a.selector)) {
		json_decref(o);
		pf_api_error(resp, 400, "invalid_argument", "selector: longer than %zu bytes",
			     sizeof(a.selector) - 1);
		return;
	}
	struct pf_error err = {0};
	struct pf_selector *compiled = pf_selector_compile(sel, &err);
	if (!compiled) {
		json_decref(o);
		pf_api_error(resp, 400, "invalid_selector", "%s", err.msg);
		return;
	}
	pf_selector_free(compiled);
	/* A config just PUT through another replica may be in the store before its NOTIFY
	 * arrived here: read it rather than refuse. */
	if (!pf_fleet_config_find(api->fleet, cfg) && pf_store_is_shared(api->store))
		pf_rollouts_reload_config(api->store, api->fleet, cfg);
	if (!pf_fleet_config_find(api->fleet, cfg)) {
		pf_api_error(resp, 400, "invalid_argument", "config: no config named '%s'", cfg);
		json_decref(o);
		return;
	}
	/* Lengths were checked above (valid_name, the selector bound, the fleet lookup). */
	memcpy(a.name, name, strlen(name) + 1);
	memcpy(a.selector, sel, strlen(sel) + 1);
	if (strlen(cfg) >= sizeof(a.config)) {
		pf_api_error(resp, 400, "invalid_argument", "config: name too long");
		json_decref(o);
		return;
	}
	memcpy(a.config, cfg, strlen(cfg) + 1);
	a.priority = prio;
	a.updated_ms = req->now_ms;
	json_decref(o);

	int r = pf_store_assignment_put(api->store, &a);
	if (r < 0) {
		pf_api_error(resp, 500, "store_error", "could not store assignment: %s",
			     strerror(-r));
		return;
	}
	r = pf_fleet_assignment_set(api->fleet, a.name, a.selector, a.config, a.priority, &err);
	if (r < 0) {
		pf_api_error(resp, 500, "internal", "assignment stored but not loaded: %s", err.msg);
		return;
	}
	size_t pushed = pf_fleet_reconcile(api->fleet);
	pf_api_audit(api, req, role, "assignment.put", a.name, a.selector);
	json_t *j = assignment_json(&a);
	if (j)
		json_object_set_new(j, "pushed", json_integer((json_int_t)pushed));
	pf_api_respond_json(resp, 200, j);
}

static void h_assignment_get(struct pf_api *api, const struct pf_api_request *req,
			     struct pf_api_response *resp)
{
	const char *name = P0(req);
	struct pf_assignment a;
	if (store_failed(resp, pf_store_assignment_get(api->store, name, &a), "assignment", name))
		return;
	pf_api_respond_json(resp, 200, assignment_counts_json(api, &a));
}

static void h_assignment_delete(struct pf_api *api, const struct pf_api_request *req,
				struct pf_api_response *resp)
{
	const char *name = P0(req);
	if (store_failed(resp, pf_store_assignment_delete(api->store, name), "assignment", name))
		return;
	pf_fleet_assignment_remove(api->fleet, name);
	size_t pushed = pf_fleet_reconcile(api->fleet);
	pf_api_audit(api, req, ROLE(req), "assignment.delete", name, "");
	pf_api_respond_json(resp, 200, json_pack("{s:s,s:I}", "deleted", name, "pushed", (json_int_t)pushed));
}

static int asg_list_cb(const struct pf_assignment *a, void *ud)
{
	struct list_ctx *l = ud;
	json_array_append_new(l->arr, assignment_counts_json(l->api, a));
	return 0;
}

static void h_assignment_list(struct pf_api *api, const struct pf_api_request *req,
			      struct pf_api_response *resp)
{
	(void)req;
	struct list_ctx l = {.api = api, .arr = json_array()};
	respond_list(resp, pf_store_assignment_foreach(api->store, asg_list_cb, &l), "assignments",
		     l.arr);
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

/* POST /api/v1/configs/{name}:validate: validates, stores nothing. */
static void r_config_post(struct pf_api *api, const struct pf_api_request *req,
			  struct pf_api_response *resp)
{
	(void)api;
	char name[160];
	snprintf(name, sizeof(name), "%s", P0(req));
	size_t n = strlen(name);
	if (n <= 9 || strcmp(name + n - 9, ":validate") != 0) {
		pf_api_error(resp, 405, "method_not_allowed",
			     "POST on a config is only {name}:validate; PUT stores a version");
		snprintf(resp->extra_header_name, sizeof(resp->extra_header_name), "Allow:");
		snprintf(resp->extra_header_value, sizeof(resp->extra_header_value), "GET, PUT");
		return;
	}
	name[n - 9] = 0;
	h_config_validate(req, resp, name);
}

/* POST /api/v1/configs/{name}/validate: the same as {name}:validate. */
static void r_config_validate(struct pf_api *api, const struct pf_api_request *req,
			      struct pf_api_response *resp)
{
	(void)api;
	h_config_validate(req, resp, P0(req));
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
    {"GET", "/api/v1/whoami", PF_ROLE_VIEWER, NULL, h_whoami},
    {"GET", "/api/v1/agents", PF_ROLE_VIEWER, NULL, h_agents_list},
    {"GET", "/api/v1/agents/*", PF_ROLE_VIEWER, NULL, h_agent_get},
    {"GET", "/api/v1/fleet/summary", PF_ROLE_VIEWER, NULL, h_summary},
    {"GET", "/api/v1/configs", PF_ROLE_VIEWER, NULL, h_config_list},
    {"GET", "/api/v1/configs/*", PF_ROLE_VIEWER, NULL, h_config_get},
    {"PUT", "/api/v1/configs/*", PF_ROLE_ADMIN, "config.put", h_config_put},
    {"POST", "/api/v1/configs/*", PF_ROLE_OPERATOR, "config.validate", r_config_post},
    {"GET", "/api/v1/configs/*/versions", PF_ROLE_VIEWER, NULL, h_config_versions},
    {"POST", "/api/v1/configs/*/validate", PF_ROLE_OPERATOR, "config.validate", r_config_validate},
    {"GET", "/api/v1/assignments", PF_ROLE_VIEWER, NULL, h_assignment_list},
    {"GET", "/api/v1/assignments/*", PF_ROLE_VIEWER, NULL, h_assignment_get},
    {"PUT", "/api/v1/assignments/*", PF_ROLE_ADMIN, "assignment.put", h_assignment_put},
    {"DELETE", "/api/v1/assignments/*", PF_ROLE_ADMIN, "assignment.delete", h_assignment_delete},
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
	if (resp->status >= 500 && pf_store_unavailable(api->store))
		store_unavailable(api, resp);
	if (rt->action)
		audit_call(api, req, rt, &call, resp->status);
}

void pf_api_handle(struct pf_api *api, const struct pf_api_request *req,
		   struct pf_api_response *resp)
{
	route(api, req, resp);
	if (api->metrics)
		pf_metrics_api_request(api->metrics, resp->status);
}
