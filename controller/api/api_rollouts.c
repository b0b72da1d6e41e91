/* api_rollouts.c — see api_rollouts.h. */
#include "api_rollouts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api_forward.h"
#include "fleet/rollout.h"
#include "pf/uuid.h"
#include "store.h"

#define MAX_BODY 16384

/* The body → config, version, selector, strategy; 0 or -EINVAL with err naming the field. */
/* ---------------------------------------------------------------- JSON views */

/* A live rollout shows its per-agent figures between the strategy and the batches. */
static json_t *view_json(const struct pf_rollout_view *v)
{
	json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:s,s:s*,s:I,s:I,s:s,s:O*}", "id", v->id, "config",
			      v->config, "version", (json_int_t)v->version, "selector",
			      v->selector, "state", v->state, "reason",
			      v->reason[0] ? v->reason : NULL, "created",
			      (json_int_t)v->created_ms, "updated", (json_int_t)v->updated_ms,
			      "created_by", v->created_by, "strategy", v->strategy);
	if (o && v->live &&
	    (json_object_set_new(o, "agents", json_integer((json_int_t)v->agents)) < 0 ||
	     json_object_set_new(o, "current_batch", json_integer(v->current_batch)) < 0 ||
	     json_object_set_new(o, "n_batches", json_integer(v->n_batches)) < 0 ||
	     (v->next_batch_ms &&
	      json_object_set_new(o, "next_batch", json_integer(v->next_batch_ms)) < 0))) {
		json_decref(o);
		return NULL;
	}
	if (o && v->batches && json_object_set(o, "batches", v->batches) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int get_cb(const struct pf_rollout_view *v, void *ud)
{
	json_t **o = ud;
	*o = view_json(v);
	return *o ? 0 : -ENOMEM;
}

json_t *pf_api_rollout_json(struct pf_rollouts *rs, const char *id, int *rc)
{
	json_t *o = NULL;
	*rc = pf_rollouts_get(rs, id, get_cb, &o);
	if (*rc < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int list_cb(const struct pf_rollout_view *v, void *ud)
{
	json_t *o = view_json(v);
	if (!o)
		return -ENOMEM;
	json_array_append_new(ud, o);
	return 0;
}

json_t *pf_api_rollouts_list_json(struct pf_rollouts *rs, bool active_only, size_t limit,
				  const char *cursor, int *rc)
{
	json_t *arr = json_array();
	if (!arr) {
		*rc = -ENOMEM;
		return NULL;
	}
	*rc = pf_rollouts_list(rs, active_only, cursor, limit + 1, list_cb, arr);
	if (*rc < 0) {
		json_decref(arr);
		return NULL;
	}
	json_t *next = json_null();
	if (json_array_size(arr) > limit) {
		json_array_remove(arr, limit);
		json_t *last = json_array_get(arr, limit - 1);
		json_decref(next);
		next = json_copy(json_object_get(last, "id"));
	}
	json_t *o = json_pack("{s:o,s:o}", "rollouts", arr, "next_cursor", next);
	*rc = o ? 0 : -ENOMEM;
	return o;
}

/* ---------------------------------------------------------------- routes */

/* Copies the JSON string v of min (0 or 1)..cap-1 bytes into dst; otherwise the error on field
 * says it must be `what` of that length. */
static int copy_string(const json_t *v, size_t min, char *dst, size_t cap, const char *field,
		       const char *what, struct pf_error *err)
{
	if (!json_is_string(v) || json_string_length(v) < min || json_string_length(v) >= cap)
		return pf_error_set(err, -EINVAL, field,
				    min ? "must be %s (1..%zu bytes)" : "must be %s of at most %zu bytes",
				    what, cap - 1);
	memcpy(dst, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

static int parse_body(const struct pf_api_request *req, char *config, size_t config_len,
		      int64_t *version, char *selector, size_t selector_len,
		      struct pf_rollout_strategy *s, struct pf_error *err)
{
	json_t *body = pf_api_body_object(req, MAX_BODY, err);
	if (!body)
		return -EINVAL;
	int rc = 0;
	const char *key;
	json_t *v;
	pf_rollout_strategy_defaults(s);
	*version = 0;
	config[0] = selector[0] = 0;
	json_object_foreach(body, key, v)
	{
		if (strcmp(key, "config") == 0) {
			rc = copy_string(v, 1, config, config_len, "config",
					 "a config name", err);
		} else if (strcmp(key, "version") == 0) {
			if (!json_is_integer(v) || json_integer_value(v) < 1)
				rc = pf_error_set(err, -EINVAL, "version",
						  "must be a positive integer");
			else
				*version = json_integer_value(v);
		} else if (strcmp(key, "selector") == 0) {
			rc = copy_string(v, 0, selector, selector_len, "selector",
					 "a label selector", err);
		} else if (strcmp(key, "strategy") == 0) {
			rc = pf_rollout_strategy_parse(v, s, err);
		} else {
			rc = pf_error_set(err, -EINVAL, key, "unknown field");
		}
		if (rc < 0)
			break;
	}
	json_decref(body);
	if (rc == 0 && !config[0])
		rc = pf_error_set(err, -EINVAL, "config", "is required");
	return rc;
}

static void h_get(struct pf_api *api, struct pf_api_response *resp, const char *id, int status)
{
	int rc;
	json_t *o = pf_api_rollout_json(api->rollouts, id, &rc);
	pf_api_respond_lookup(api, resp, o, rc, status, "rollout", id);
}

static void h_create(struct pf_api *api, const struct pf_api_request *req,
		     struct pf_api_response *resp, const char *role)
{
	struct pf_error err = {0};
	struct pf_rollout_strategy s;
	char config[128], selector[1024], by[128], id[PF_ROLLOUT_ID_MAX + 1];
	int64_t version = 0;
	size_t matched = 0;
	int rc =
	    parse_body(req, config, sizeof(config), &version, selector, sizeof(selector), &s, &err);
	if (rc < 0)
		return pf_api_field_error(resp, 400, "invalid_argument", &err);
	pf_api_creator(api, req, role, by, sizeof(by));
	pf_api_refresh_fleet(api); /* agents of other replicas too */
	rc = pf_rollouts_create(api->rollouts, config, version, selector, &s, by, req->now_ms, id,
				&matched, &err);
	switch (rc) {
	case 0:
		break;
	case -EINVAL:
		return pf_api_field_error(resp, 400,
					  strcmp(err.path, "selector") == 0 ? "invalid_selector"
									    : "invalid_argument",
					  &err);
	case -ENOENT:
		return pf_api_field_error(resp, 422, "no_agents", &err);
	case -EALREADY:
		return pf_api_field_error(resp, 422, "already_on_version", &err);
	case -E2BIG:
		return pf_api_field_error(resp, 422, "too_many_agents", &err);
	case -EEXIST:
		return pf_api_field_error(resp, 409, "rollout_active", &err);
	case -ENOSPC:
		return pf_api_field_error(resp, 409, "too_many_rollouts", &err);
	default:
		return pf_api_error(resp, 500, "internal", "%s",
				    err.msg[0] ? err.msg : strerror(-rc));
	}
	char detail[1400];
	snprintf(detail, sizeof(detail), "%s v%lld to %zu agents, selector '%s'", config,
		 (long long)version, matched, selector);
	pf_api_audit(api, req, role, "rollout.create", id, detail);
	int grc;
	json_t *o = pf_api_rollout_json(api->rollouts, id, &grc);
	if (!o)
		return pf_api_error(resp, 500, "internal", "rollout %s created but unreadable", id);
	json_object_del(o, "batches");
	pf_api_respond_json(resp, 202, o);
}

static void h_list(struct pf_api *api, const struct pf_api_request *req,
		   struct pf_api_response *resp)
{
	const char *cursor = pf_api_arg(req, "cursor");
	const char *ls = pf_api_arg(req, "limit");
	const char *act = pf_api_arg(req, "active");
	long long limit = PF_API_ROLLOUTS_LIST_DEFAULT;
	uint8_t u[16];

	if (ls && *ls) {
		char *end;
		errno = 0;
		limit = strtoll(ls, &end, 10);
		if (errno || *end || limit < 1 || limit > PF_API_ROLLOUTS_LIST_MAX)
			return pf_api_error(resp, 400, "invalid_argument",
					    "limit: must be 1..%d, got '%.20s'",
					    PF_API_ROLLOUTS_LIST_MAX, ls);
	}
	if (cursor && *cursor && pf_uuid_parse(cursor, u) < 0)
		return pf_api_error(resp, 400, "invalid_argument", "cursor: not a rollout id");
	if (act && strcmp(act, "0") != 0 && strcmp(act, "1") != 0)
		return pf_api_error(resp, 400, "invalid_argument", "active: must be 0 or 1");
	int rc;
	json_t *o = pf_api_rollouts_list_json(api->rollouts, act && strcmp(act, "1") == 0,
					  (size_t)limit, cursor, &rc);
	if (!o)
		return pf_api_error(resp, 500, "store_error", "%s",
				    pf_store_last_error(api->store));
	pf_api_respond_json(resp, 200, o);
}

static void h_action(struct pf_api *api, const struct pf_api_request *req,
		     struct pf_api_response *resp, const char *id, const char *action,
		     const char *role)
{
	static const struct {
		const char *name;
		enum pf_rollout_action act;
	} acts[] = {{"pause", PF_ROLLOUT_PAUSE},
		    {"resume", PF_ROLLOUT_RESUME},
		    {"rollback", PF_ROLLOUT_DO_ROLLBACK},
		    {"cancel", PF_ROLLOUT_CANCEL}};
	size_t i = 0;
	while (i < sizeof(acts) / sizeof(acts[0]) && strcmp(acts[i].name, action) != 0)
		i++;
	if (i == sizeof(acts) / sizeof(acts[0]))
		return pf_api_error(resp, 404, "not_found", "no route for %s", req->path);
	struct pf_error err = {0};
	int rc = pf_rollouts_action(api->rollouts, id, acts[i].act, req->now_ms, &err);
	if (rc == -ENOENT) {
		int grc;
		json_t *o = pf_api_rollout_json(api->rollouts, id, &grc);
		if (!o)
			return pf_api_error(resp, 404, "not_found", "no rollout '%.80s'", id);
		const char *st = json_string_value(json_object_get(o, "state"));
		static const char *const active[] = {"running", "paused", "halted", "rolling_back"};
		bool elsewhere = false;
		for (size_t k = 0; st && k < sizeof(active) / sizeof(active[0]); k++)
			elsewhere |= strcmp(st, active[k]) == 0;
		if (elsewhere && pf_api_forward(api, req, resp, "rollout", id, action) != -EOPNOTSUPP)
			; /* replicas sharing PostgreSQL: forwarded to the one that drives it */
		else if (elsewhere) /* active in the store, not loaded by this controller */
			pf_api_error(resp, 409, "rollout_driven_elsewhere",
				     "rollout %s (%s) is not driven by this controller: cannot %s it",
				     id, st, action);
		else
			pf_api_error(resp, 409, "rollout_ended", "rollout %s already ended (%s)",
				     id, st ? st : "?");
		json_decref(o);
		return;
	}
	if (rc == -EALREADY)
		return pf_api_field_error(resp, 409, "invalid_state", &err);
	if (rc < 0)
		return pf_api_error(resp, 500, "store_error", "%s", err.msg);
	char what[32];
	snprintf(what, sizeof(what), "rollout.%s", action);
	pf_api_audit(api, req, role, what, id, NULL);
	h_get(api, resp, id, 200);
}

void pf_api_rollouts_handle(struct pf_api *api, const struct pf_api_request *req,
			    struct pf_api_response *resp, const char (*seg)[160], size_t n,
			    const char *role)
{
	bool get = strcmp(req->method, "GET") == 0, post = strcmp(req->method, "POST") == 0;
	if (!api->rollouts)
		return pf_api_error(resp, 503, "unavailable", "rollouts are not enabled");
	if (n == 1 && post)
		return h_create(api, req, resp, role);
	if (n == 1 && get)
		return h_list(api, req, resp);
	if (n == 2 && get)
		return h_get(api, resp, seg[1], 200);
	if (n == 3 && post)
		return h_action(api, req, resp, seg[1], seg[2], role);
	pf_api_error(resp, 405, "method_not_allowed", "%s is not allowed on %s", req->method,
		     req->path);
}
