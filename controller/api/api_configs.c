/* api_configs.c — see api_configs.h. */
#include "api_configs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api_int.h"
#include "fleet/fleet.h"
#include "fleet/rollout.h"
#include "pf/hash.h"
#include "pf/log.h"
#include "pf/profcfg.h"
#include "pf/selector.h"
#include "pf/uuid.h"
#include "redact.h"
#include "store.h"

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

void pf_api_config_put(struct pf_api *api, const struct pf_api_request *req,
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
		/* The same answer on every replica sharing the store, whichever drives it: a
		 * client cannot tell (nor needs to) which replica it reached. */
		pf_api_error(resp, 409, "rollout_active",
			     "rollout %s of config '%s' is active: let it finish, or cancel or "
			     "roll it back, before a plain PUT",
			     active, name);
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

void pf_api_config_get(struct pf_api *api, const struct pf_api_request *req,
			 struct pf_api_response *resp)
{
	const char *name = P0(req);
	uint64_t version = 0;
	const char *vs = pf_api_arg(req, "version");
	if (vs && !pf_api_parse_u64(vs, 1, INT64_MAX, &version)) {
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

void pf_api_config_versions(struct pf_api *api, const struct pf_api_request *req,
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

void pf_api_configs_list(struct pf_api *api, const struct pf_api_request *req,
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

void pf_api_assignment_put(struct pf_api *api, const struct pf_api_request *req,
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

void pf_api_assignment_get(struct pf_api *api, const struct pf_api_request *req,
			     struct pf_api_response *resp)
{
	const char *name = P0(req);
	struct pf_assignment a;
	if (store_failed(resp, pf_store_assignment_get(api->store, name, &a), "assignment", name))
		return;
	pf_api_respond_json(resp, 200, assignment_counts_json(api, &a));
}

void pf_api_assignment_delete(struct pf_api *api, const struct pf_api_request *req,
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

void pf_api_assignments_list(struct pf_api *api, const struct pf_api_request *req,
			      struct pf_api_response *resp)
{
	(void)req;
	struct list_ctx l = {.api = api, .arr = json_array()};
	respond_list(resp, pf_store_assignment_foreach(api->store, asg_list_cb, &l), "assignments",
		     l.arr);
}

/* POST /api/v1/configs/{name}:validate: validates, stores nothing. */
void pf_api_config_post(struct pf_api *api, const struct pf_api_request *req,
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
void pf_api_config_validate(struct pf_api *api, const struct pf_api_request *req,
			      struct pf_api_response *resp)
{
	(void)api;
	h_config_validate(req, resp, P0(req));
}
