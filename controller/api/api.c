/* api.c — see api.h. */
#include "api.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "api_captures.h"
#include "api_profiles.h"
#include "api_rollouts.h"
#include "fleet/fleet.h"
#include "fleet/rollout.h"
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

enum role { ROLE_NONE, ROLE_VIEWER, ROLE_OPERATOR, ROLE_ADMIN };

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

static enum role role_parse(const char *s)
{
	if (!s)
		return ROLE_NONE;
	if (strcmp(s, "admin") == 0)
		return ROLE_ADMIN;
	if (strcmp(s, "operator") == 0)
		return ROLE_OPERATOR;
	if (strcmp(s, "viewer") == 0)
		return ROLE_VIEWER;
	return ROLE_NONE;
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

const char *pf_api_token_role(struct pf_store *st, const char *authorization, char *role,
			      size_t role_len)
{
	uint8_t h[32];
	if (pf_api_token_hash(authorization, h) < 0)
		return NULL;
	if (pf_store_token_lookup(st, h, role, role_len) < 0)
		return NULL;
	return role;
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

void pf_api_creator(struct pf_api *api, const struct pf_api_request *req, const char *role,
		    char *out, size_t len)
{
	uint8_t h[32];
	if (pf_api_token_hash(req->authorization, h) < 0 ||
	    pf_store_token_name(api->store, h, out, len) < 0 || !*out)
		snprintf(out, len, "%s", role ? role : "");
}

static const char *actor_of(const char *role)
{
	return role ? role : "anonymous";
}

void pf_api_audit(struct pf_api *api, const struct pf_api_request *req, const char *role,
		  const char *action, const char *target, const char *detail)
{
	int r = pf_store_audit(api->store, req->now_ms, actor_of(role), action, target, detail);
	if (r < 0)
		pf_log_warn("api: audit write failed for %s %s: %s", action, target, strerror(-r));
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
	if (!a->connected)
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
			struct pf_api_response *resp, const char *uidstr, bool admin)
{
	uint8_t uid[16];
	if (pf_uuid_parse(uidstr, uid) < 0) {
		pf_api_error(resp, 400, "invalid_argument", "not an instance_uid: '%s'", uidstr);
		return;
	}
	struct pf_agent *a = pf_fleet_find(api->fleet, uid);
	if (!a) {
		pf_api_error(resp, 404, "not_found", "no agent %s", uidstr);
		return;
	}
	json_t *j = pf_agent_to_json(api->fleet, a, req->now_ms, true);
	pf_redact_agent_json(j, admin);
	pf_api_respond_json(resp, 200, j);
}

static void h_summary(struct pf_api *api, const struct pf_api_request *req,
		      struct pf_api_response *resp)
{
	struct pf_fleet_summary s;
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
			 struct pf_api_response *resp, const char *name, const char *role)
{
	const char *dry = pf_api_arg(req, "dry_run");
	if (dry && (strcmp(dry, "1") == 0 || strcmp(dry, "true") == 0))
		return h_config_validate(req, resp, name);
	if (!config_check(req, resp, name))
		return;
	const char *stage = pf_api_arg(req, "stage");
	struct pf_cfg_slot *served = pf_fleet_config_find(api->fleet, name);
	if (stage && (strcmp(stage, "1") == 0 || strcmp(stage, "true") == 0) && served)
		return h_config_stage(api, req, resp, name, role, served->version);
	const char *active = api->rollouts ? pf_rollouts_active_for(api->rollouts, name) : NULL;
	if (active) {
		pf_api_error(resp, 409, "rollout_active",
			     "rollout %s of config '%s' is active: let it finish, or cancel or roll "
			     "it back, before a plain PUT",
			     active, name);
		return;
	}

	uint8_t hash[32];
	pf_sha256(req->body, req->body_len, hash);
	int64_t version = 0;
	bool created = false;
	int r = pf_store_config_put(api->store, name, (const char *)req->body, req->body_len, hash,
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
			 struct pf_api_response *resp, const char *name, bool admin)
{
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
				      pf_redact_config_body(cv.body, cv.body_len, admin)));
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

static void h_config_versions(struct pf_api *api, struct pf_api_response *resp,
			      const char *name)
{
	json_t *arr = json_array();
	int r = pf_store_config_versions(api->store, name, version_cb, arr);
	if (r == -ENOENT) {
		json_decref(arr);
		pf_api_error(resp, 404, "not_found", "no config '%s'", name);
		return;
	}
	if (r < 0) {
		json_decref(arr);
		pf_api_error(resp, 500, "store_error", "%s", strerror(-r));
		return;
	}
	pf_api_respond_json(resp, 200, json_pack("{s:s,s:o}", "name", name, "versions", arr));
}

struct cfg_list {
	struct pf_api *api;
	json_t *arr;
};

static int latest_cb(const struct pf_config_version *cv, void *ud)
{
	struct cfg_list *l = ud;
	const struct pf_cfg_slot *served = pf_fleet_config_find(l->api->fleet, cv->name);
	json_array_append_new(
	    l->arr, json_pack("{s:s,s:I,s:o,s:I,s:o}", "name", cv->name, "version",
			      (json_int_t)cv->version, "hash", hex_json(cv->hash), "created",
			      (json_int_t)cv->created_ms, "served_version",
			      served ? json_integer(served->version) : json_null()));
	return 0;
}

static void h_config_list(struct pf_api *api, struct pf_api_response *resp)
{
	json_t *arr = json_array();
	struct cfg_list l = {.api = api, .arr = arr};
	int r = pf_store_config_foreach_latest(api->store, latest_cb, &l);
	if (r < 0) {
		json_decref(arr);
		pf_api_error(resp, 500, "store_error", "%s", strerror(-r));
		return;
	}
	pf_api_respond_json(resp, 200, json_pack("{s:o}", "configs", arr));
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
			     struct pf_api_response *resp, const char *name, const char *role)
{
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
		pf_api_error(resp, 400, "invalid_selector", "selector: %s", err.msg);
		return;
	}
	pf_selector_free(compiled);
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

static void h_assignment_get(struct pf_api *api, struct pf_api_response *resp,
			     const char *name)
{
	struct pf_assignment a;
	int r = pf_store_assignment_get(api->store, name, &a);
	if (r == -ENOENT) {
		pf_api_error(resp, 404, "not_found", "no assignment '%s'", name);
		return;
	}
	if (r < 0) {
		pf_api_error(resp, 500, "store_error", "%s", strerror(-r));
		return;
	}
	pf_api_respond_json(resp, 200, assignment_counts_json(api, &a));
}

static void h_assignment_delete(struct pf_api *api, const struct pf_api_request *req,
				struct pf_api_response *resp, const char *name, const char *role)
{
	int r = pf_store_assignment_delete(api->store, name);
	if (r == -ENOENT) {
		pf_api_error(resp, 404, "not_found", "no assignment '%s'", name);
		return;
	}
	if (r < 0) {
		pf_api_error(resp, 500, "store_error", "%s", strerror(-r));
		return;
	}
	pf_fleet_assignment_remove(api->fleet, name);
	size_t pushed = pf_fleet_reconcile(api->fleet);
	pf_api_audit(api, req, role, "assignment.delete", name, "");
	pf_api_respond_json(resp, 200, json_pack("{s:s,s:I}", "deleted", name, "pushed", (json_int_t)pushed));
}

struct asg_list {
	struct pf_api *api;
	json_t *arr;
};

static int asg_list_cb(const struct pf_assignment *a, void *ud)
{
	struct asg_list *l = ud;
	json_array_append_new(l->arr, assignment_counts_json(l->api, a));
	return 0;
}

static void h_assignment_list(struct pf_api *api, struct pf_api_response *resp)
{
	json_t *arr = json_array();
	struct asg_list l = {.api = api, .arr = arr};
	int r = pf_store_assignment_foreach(api->store, asg_list_cb, &l);
	if (r < 0) {
		json_decref(arr);
		pf_api_error(resp, 500, "store_error", "%s", strerror(-r));
		return;
	}
	pf_api_respond_json(resp, 200, json_pack("{s:o}", "assignments", arr));
}

/* Who the caller is: the console shows the role and hides what the role may not do. */
static void h_whoami(struct pf_api *api, const struct pf_api_request *req,
		     struct pf_api_response *resp, const char *role)
{
	uint8_t h[32];
	char name[128] = "";
	if (pf_api_token_hash(req->authorization, h) == 0 &&
	    pf_store_token_name(api->store, h, name, sizeof(name)) < 0)
		name[0] = 0;
	enum role r = role_parse(role);
	pf_api_respond_json(resp, 200,
			    json_pack("{s:s, s:s, s:b, s:b}", "role", role, "name", name,
				      "can_write", r >= ROLE_OPERATOR, "can_admin",
				      r >= ROLE_ADMIN));
}

/* ---------------------------------------------------------------- routing */

/* Splits "/api/v1/x/y" after the prefix into at most 3 segments. */
static size_t split_path(const char *path, char seg[3][160])
{
	size_t n = 0;
	const char *p = path;
	while (*p == '/')
		p++;
	while (*p && n < 4) {
		const char *e = strchr(p, '/');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (n == 3 || l >= 160)
			return 4; /* too many or too long: no route */
		memcpy(seg[n], p, l);
		seg[n][l] = 0;
		n++;
		p += l;
		while (*p == '/')
			p++;
	}
	return n;
}

static void route(struct pf_api *api, const struct pf_api_request *req,
		  struct pf_api_response *resp)
{
	const char *path = req->path;
	const char *m = req->method;
	bool get = strcmp(m, "GET") == 0, put = strcmp(m, "PUT") == 0,
	     del = strcmp(m, "DELETE") == 0, post = strcmp(m, "POST") == 0;

	if (strcmp(path, "/healthz") == 0) {
		resp->status = 200;
		resp->content_type = "text/plain";
		pf_buf_append_str(&resp->body, "ok\n");
		return;
	}
	if (strcmp(path, "/readyz") == 0) {
		resp->status = api->ready ? 200 : 503;
		resp->content_type = "text/plain";
		pf_buf_append_str(&resp->body, api->ready ? "ready\n" : "starting\n");
		return;
	}
	if (strcmp(path, "/metrics") == 0) {
		resp->status = 200;
		resp->content_type = "text/plain; version=0.0.4";
		if (pf_metrics_render(api->metrics, api->fleet, req->now_ms, &resp->body) < 0)
			pf_api_error(resp, 500, "internal", "metrics too large");
		return;
	}
	if (strncmp(path, "/api/v1/", 8) != 0) {
		pf_api_error(resp, 404, "not_found", "no route for %s", path);
		return;
	}

	char rolebuf[16];
	const char *role = pf_api_token_role(api->store, req->authorization, rolebuf,
					     sizeof(rolebuf));
	enum role have = role_parse(role);
	if (have == ROLE_NONE) {
		pf_api_error(resp, 401, "unauthenticated",
			     req->authorization ? "the token is not valid for the API"
						: "missing 'Authorization: Bearer <token>'");
		snprintf(resp->extra_header_name, sizeof(resp->extra_header_name),
			 "WWW-Authenticate:");
		snprintf(resp->extra_header_value, sizeof(resp->extra_header_value),
			 "Bearer realm=\"profleet\"");
		return;
	}
	enum role need = get ? ROLE_VIEWER : ROLE_OPERATOR;
	if (have < need) {
		pf_api_error(resp, 403, "permission_denied", "%s %s needs the operator role", m,
			     path);
		return;
	}

	char seg[3][160];
	size_t n = split_path(path + 8, seg);
	bool known = true;
	if (n == 1 && strcmp(seg[0], "whoami") == 0) {
		if (get)
			return h_whoami(api, req, resp, role);
	} else if (n == 1 && strcmp(seg[0], "agents") == 0) {
		if (get)
			return h_agents_list(api, req, resp);
	} else if (n == 2 && strcmp(seg[0], "agents") == 0) {
		if (get)
			return h_agent_get(api, req, resp, seg[1], have == ROLE_ADMIN);
	} else if (n == 2 && strcmp(seg[0], "fleet") == 0 && strcmp(seg[1], "summary") == 0) {
		if (get)
			return h_summary(api, req, resp);
	} else if (n == 1 && strcmp(seg[0], "configs") == 0) {
		if (get)
			return h_config_list(api, resp);
	} else if (n == 2 && strcmp(seg[0], "configs") == 0 && post &&
		   strlen(seg[1]) > 9 && strcmp(seg[1] + strlen(seg[1]) - 9, ":validate") == 0) {
		seg[1][strlen(seg[1]) - 9] = 0;
		return h_config_validate(req, resp, seg[1]);
	} else if (n == 2 && strcmp(seg[0], "configs") == 0) {
		if (get)
			return h_config_get(api, req, resp, seg[1], have == ROLE_ADMIN);
		if (put)
			return h_config_put(api, req, resp, seg[1], role);
	} else if (n == 3 && strcmp(seg[0], "configs") == 0 && strcmp(seg[2], "versions") == 0) {
		if (get)
			return h_config_versions(api, resp, seg[1]);
	} else if (n == 3 && strcmp(seg[0], "configs") == 0 && strcmp(seg[2], "validate") == 0) {
		if (post) /* the same as POST /configs/{name}:validate */
			return h_config_validate(req, resp, seg[1]);
	} else if (n == 1 && strcmp(seg[0], "assignments") == 0) {
		if (get)
			return h_assignment_list(api, resp);
	} else if (n == 2 && strcmp(seg[0], "assignments") == 0) {
		if (get)
			return h_assignment_get(api, resp, seg[1]);
		if (put)
			return h_assignment_put(api, req, resp, seg[1], role);
		if (del)
			return h_assignment_delete(api, req, resp, seg[1], role);
	} else if (n >= 1 && n <= 2 && strcmp(seg[0], "captures") == 0) {
		if (get || post || del)
			return pf_api_captures_handle(api, req, resp, n == 2 ? seg[1] : NULL,
						      role);
	} else if (n >= 1 && strcmp(seg[0], "rollouts") == 0) {
		return pf_api_rollouts_handle(api, req, resp, (const char(*)[160])seg, n, role);
	} else if (pf_api_profiles_match((const char(*)[160])seg, n)) {
		return pf_api_profiles_handle(api, req, resp, (const char(*)[160])seg, n);
	} else {
		known = false;
	}
	if (known)
		pf_api_error(resp, 405, "method_not_allowed", "%s is not allowed on %s", m, path);
	else
		pf_api_error(resp, 404, "not_found", "no route for %s", path);
}

void pf_api_handle(struct pf_api *api, const struct pf_api_request *req,
		   struct pf_api_response *resp)
{
	route(api, req, resp);
	if (api->metrics)
		pf_metrics_api_request(api->metrics, resp->status);
}
