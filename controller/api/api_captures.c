/* api_captures.c — see api_captures.h. */
#include "api_captures.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api_forward.h"
#include "fleet/capture.h"
#include "pf/capture_msg.h"
#include "pf/uuid.h"
#include "store.h"

#define DEFAULT_DURATION_S 30
#define DEFAULT_FREQUENCY_HZ 99

static const char *const top_keys[] = {
    "agents", "processes", "duration_seconds", "frequency_hz", "profile_type", "trace_id", "note"};

static bool known(const char *key, const char *const *keys, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(key, keys[i]) == 0)
			return true;
	return false;
}

/* Checks what the wire decoder does not (it ignores unknown keys so that agents can grow):
 * unknown keys at the top and in process rules, and types; fills defaults. *selector points
 * into body. 0 or -EINVAL with err set. */
static int check_body(json_t *body, const char **selector, struct pf_error *err)
{
	const char *key;
	json_t *v;

	json_object_foreach(body, key, v)
	{
		if (!known(key, top_keys, sizeof(top_keys) / sizeof(top_keys[0])))
			return pf_error_set(err, -EINVAL, key, "unknown field");
	}
	v = json_object_get(body, "agents");
	if (!v)
		return pf_error_set(err, -EINVAL, "agents",
				    "is required: a label selector (\"\" selects every agent)");
	if (!json_is_string(v))
		return pf_error_set(err, -EINVAL, "agents", "must be a selector string");
	*selector = json_string_value(v);
	json_t *procs = json_object_get(body, "processes");
	if (procs && !json_is_array(procs) && !json_is_null(procs))
		return pf_error_set(err, -EINVAL, "processes", "must be an array of rules");
	for (size_t i = 0; procs && i < json_array_size(procs); i++) {
		json_t *p = json_array_get(procs, i);
		char path[64];
		snprintf(path, sizeof(path), "processes[%zu]", i);
		if (!json_is_object(p))
			return pf_error_set(err, -EINVAL, path, "must be an object");
		json_object_foreach(p, key, v)
		{
			static const char *const rule_keys[] = {"key", "match", "value"};
			if (!known(key, rule_keys, 3)) {
				char fp[128];
				snprintf(fp, sizeof(fp), "%s.%.60s", path, key);
				return pf_error_set(err, -EINVAL, fp, "unknown field");
			}
		}
	}
	static const char *const ints[] = {"duration_seconds", "frequency_hz"};
	static const int defaults[] = {DEFAULT_DURATION_S, DEFAULT_FREQUENCY_HZ};
	for (size_t i = 0; i < 2; i++) {
		v = json_object_get(body, ints[i]);
		if (!v) {
			json_object_set_new(body, ints[i], json_integer(defaults[i]));
			continue;
		}
		if (!json_is_integer(v))
			return pf_error_set(err, -EINVAL, ints[i], "must be an integer");
		if (json_integer_value(v) < 1)
			return pf_error_set(err, -EINVAL, ints[i], "must be at least 1, got %lld",
					    (long long)json_integer_value(v));
	}
	static const char *const strs[] = {"profile_type", "trace_id", "note"};
	for (size_t i = 0; i < 3; i++) {
		v = json_object_get(body, strs[i]);
		if (v && !json_is_string(v))
			return pf_error_set(err, -EINVAL, strs[i], "must be a string");
	}
	return 0;
}

/* The body → a checked request (through the wire decoder, so that API and agents accept
 * exactly the same requests) and the normalized request JSON for GET. */
static int parse_request(const struct pf_api_request *req, struct pf_capture_request *out,
			 char **selector, char **normalized, struct pf_error *err)
{
	const char *sel = NULL;
	*selector = *normalized = NULL;
	memset(out, 0, sizeof(*out));
	json_t *body = pf_api_body_object(req, PF_CAPTURE_MAX_MSG, err);
	if (!body)
		return -EINVAL;
	int rc = check_body(body, &sel, err);
	if (rc == 0 && !(*selector = strdup(sel)))
		rc = -ENOMEM;
	if (rc == 0) {
		json_object_del(body, "agents");
		json_object_set_new(body, "id", json_string("new"));
		char *wire = json_dumps(body, JSON_COMPACT);
		rc = wire ? pf_capture_request_decode((const uint8_t *)wire, strlen(wire), out, err)
			  : -ENOMEM;
		free(wire);
		if (rc == -EBADMSG)
			rc = -EINVAL;
	}
	json_decref(body);
	if (rc < 0)
		return rc;
	/* Normalized: what the decoder understood, without id and receiver, plus the selector. */
	struct pf_buf b;
	pf_buf_init(&b, PF_CAPTURE_MAX_MSG + 1);
	rc = pf_capture_request_encode(out, &b);
	json_t *n = rc == 0 ? json_loadb((const char *)b.data, b.len, 0, NULL) : NULL;
	pf_buf_release(&b);
	if (!n)
		return rc < 0 ? rc : -ENOMEM;
	json_object_del(n, "id");
	json_object_del(n, "receiver");
	json_object_set_new(n, "agents", json_string(*selector));
	*normalized = json_dumps(n, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(n);
	return *normalized ? 0 : -ENOMEM;
}

static void h_create(struct pf_api *api, const struct pf_api_request *req,
		     struct pf_api_response *resp, const char *role)
{
	struct pf_error err = {0};
	struct pf_capture_request r;
	char *selector = NULL, *normalized = NULL;
	int rc = parse_request(req, &r, &selector, &normalized, &err);
	if (rc < 0) {
		if (rc == -ENOMEM)
			pf_api_error(resp, 500, "internal", "out of memory");
		else
			pf_api_field_error(resp, 400, "invalid_argument", &err);
		goto out;
	}
	char by[128], id[PF_CAPTURE_ID_MAX + 1];
	size_t matched = 0;
	pf_api_creator(api, req, role, by, sizeof(by));
	pf_api_refresh_fleet(api); /* agents of other replicas too */
	rc = pf_captures_create(api->captures, &r, selector, normalized, by, req->now_ms, id,
				&matched, &err);
	switch (rc) {
	case 0:
		break;
	case -EINVAL:
	case -E2BIG:
		if (!err.path[0])
			snprintf(err.path, sizeof(err.path), "agents");
		pf_api_field_error(resp, 400, rc == -EINVAL ? "invalid_selector" : "invalid_argument",
			    &err);
		goto out;
	case -ENOENT:
		pf_api_field_error(resp, 422, "no_agents", &err);
		goto out;
	case -EBUSY:
		pf_api_field_error(resp, 409, "too_many_captures", &err);
		goto out;
	case -ENOSPC:
		pf_api_field_error(resp, 503, "unavailable", &err);
		goto out;
	default:
		pf_api_error(resp, 500, "internal", "%s", err.msg[0] ? err.msg : strerror(-rc));
		goto out;
	}
	pf_api_audit(api, req, role, "capture.create", id, normalized);
	int grc;
	json_t *o = pf_api_capture_json(api->captures, api->store, id, &grc);
	const char *state = o ? json_string_value(json_object_get(o, "state")) : NULL;
	pf_api_respond_json(resp, 202,
			    json_pack("{s:s,s:s,s:I}", "id", id, "state", state ? state : "pending",
				      "agents_matched", (json_int_t)matched));
	json_decref(o);
out:
	pf_capture_request_release(&r);
	free(selector);
	free(normalized);
}

/* ---------------------------------------------------------------- JSON views */

static json_t *ms_or_null(int64_t ms)
{
	return ms ? json_integer((json_int_t)ms) : json_null();
}

static json_t *cap_json(const struct pf_capture_row *r)
{
	json_t *req = json_loads(r->request_json, 0, NULL);
	return json_pack("{s:s,s:s,s:o,s:o,s:o,s:I,s:s,s:o,s:I}", "id", r->id, "state", r->state,
			 "created_at", ms_or_null(r->created_ms), "started_at",
			 ms_or_null(r->started_ms), "finished_at", ms_or_null(r->finished_ms),
			 "deadline_at", (json_int_t)r->deadline_ms, "created_by", r->created_by,
			 "request", req ? req : json_object(), "agents_matched",
			 (json_int_t)r->agents_matched);
}

struct json_ctx {
	struct pf_store *store;
	json_t *obj, *agents;
};

static int json_agent_cb(const struct pf_capture_agent_row *r, void *ud)
{
	struct json_ctx *x = ud;
	char u[PF_UUID_STR_LEN + 1];
	json_t *ids = json_array(), *otlp = json_array();
	pf_uuid_format(r->uid, u);
	for (size_t i = 0; ids && otlp && i < r->n_profile_ids; i++) {
		char hex[33];
		int64_t sid;
		pf_capture_hex16(r->profile_ids + 16 * i, hex);
		json_array_append_new(otlp, json_string(hex));
		if (pf_store_profile_find(x->store, r->profile_ids + 16 * i, &sid) == 0)
			json_array_append_new(ids, json_integer((json_int_t)sid));
	}
	json_t *o = json_pack(
	    "{s:s,s:s,s:I,s:I,s:o,s:o,s:s?,s:s?}", "instance_uid", u, "state", r->state, "samples",
	    (json_int_t)r->samples, "bytes", (json_int_t)r->bytes, "profile_ids",
	    ids ? ids : json_array(), "otlp_profile_ids", otlp ? otlp : json_array(), "error_code",
	    *r->error_code ? r->error_code : NULL, "error", *r->error ? r->error : NULL);
	if (!o || json_array_append_new(x->agents, o) < 0)
		return -ENOMEM;
	return 0;
}

static int json_cap_cb(const struct pf_capture_row *r, void *ud)
{
	struct json_ctx *x = ud;
	x->obj = cap_json(r);
	return x->obj ? 0 : -ENOMEM;
}

json_t *pf_api_capture_json(struct pf_captures *c, struct pf_store *st, const char *id, int *rc)
{
	struct json_ctx x = {.store = st, .agents = json_array()};
	if (!x.agents) {
		*rc = -ENOMEM;
		return NULL;
	}
	*rc = pf_captures_get(c, id, json_cap_cb, json_agent_cb, &x);
	if (*rc < 0 || !x.obj) {
		json_decref(x.obj);
		json_decref(x.agents);
		if (*rc == 0)
			*rc = -ENOMEM;
		return NULL;
	}
	/* each agent's result says what it profiled: the capture's type (an agent captures it
	 * or fails) */
	const char *type = json_string_value(
	    json_object_get(json_object_get(x.obj, "request"), "profile_type"));
	size_t i;
	json_t *a;
	json_array_foreach(x.agents, i, a)
	{
		json_object_set_new(a, "profile_type", json_string(type ? type : "cpu"));
	}
	json_object_set_new(x.obj, "agents", x.agents);
	return x.obj;
}

struct cap_list_ctx {
	json_t *arr;
	char last[PF_CAPTURE_ID_MAX + 1];
};

static int list_cb(const struct pf_capture_row *r, void *ud)
{
	struct cap_list_ctx *l = ud;
	json_t *o = cap_json(r);
	if (!o || json_array_append_new(l->arr, o) < 0)
		return -ENOMEM;
	snprintf(l->last, sizeof(l->last), "%s", r->id);
	return 0;
}

json_t *pf_api_captures_list_json(struct pf_captures *c, const char *state, size_t limit,
				  const char *cursor, int *rc)
{
	struct cap_list_ctx l = {.arr = json_array()};
	struct pf_capture_query q = {.state = state, .before_id = cursor, .limit = limit};
	if (!l.arr) {
		*rc = -ENOMEM;
		return NULL;
	}
	*rc = pf_captures_list(c, &q, list_cb, &l);
	if (*rc < 0) {
		json_decref(l.arr);
		return NULL;
	}
	bool more = limit && json_array_size(l.arr) == limit;
	return json_pack("{s:o,s:o}", "captures", l.arr, "next_cursor",
			 more ? json_string(l.last) : json_null());
}

/* ---------------------------------------------------------------- routes */

static void h_list(struct pf_api *api, const struct pf_api_request *req,
		   struct pf_api_response *resp)
{
	const char *state = pf_api_arg(req, "state");
	const char *cursor = pf_api_arg(req, "cursor");
	const char *ls = pf_api_arg(req, "limit");
	enum pf_capture_overall st;
	long long limit = PF_API_CAPTURES_LIST_DEFAULT;

	if (state && *state && pf_capture_overall_parse(state, &st) < 0) {
		pf_api_error(resp, 400, "invalid_argument",
			     "state: must be pending, running, done, partial, failed or cancelled, "
			     "got '%.40s'",
			     state);
		return;
	}
	if (ls && *ls) {
		char *end;
		errno = 0;
		limit = strtoll(ls, &end, 10);
		if (errno || *end || limit < 1 || limit > PF_API_CAPTURES_LIST_MAX) {
			pf_api_error(resp, 400, "invalid_argument",
				     "limit: must be 1..%d, got '%.20s'", PF_API_CAPTURES_LIST_MAX,
				     ls);
			return;
		}
	}
	if (cursor && *cursor && !pf_capture_id_valid(cursor)) {
		pf_api_error(resp, 400, "invalid_argument", "cursor: not a capture id");
		return;
	}
	int rc;
	json_t *o = pf_api_captures_list_json(api->captures, state, (size_t)limit, cursor, &rc);
	if (!o) {
		pf_api_error(resp, 500, "store_error", "%s", pf_store_last_error(api->store));
		return;
	}
	pf_api_respond_json(resp, 200, o);
}

static void h_get(struct pf_api *api, struct pf_api_response *resp, const char *id, int status)
{
	int rc;
	json_t *o = pf_api_capture_json(api->captures, api->store, id, &rc);
	pf_api_respond_lookup(api, resp, o, rc, status, "capture", id);
}

static void h_cancel(struct pf_api *api, const struct pf_api_request *req,
		     struct pf_api_response *resp, const char *id, const char *role)
{
	struct pf_error err = {0};
	int rc = pf_captures_cancel(api->captures, id, req->now_ms, &err);
	if (rc == -ENOENT || rc == -EALREADY) {
		/* Not in memory: finished long ago, or no such capture. */
		int grc;
		json_t *o = pf_api_capture_json(api->captures, api->store, id, &grc);
		if (!o) {
			pf_api_error(resp, 404, "not_found", "no capture '%.80s'", id);
			return;
		}
		const char *st = json_string_value(json_object_get(o, "state"));
		bool open = st && (strcmp(st, "pending") == 0 || strcmp(st, "running") == 0);
		if (open && pf_api_forward(api, req, resp, "capture", id, "cancel") != -EOPNOTSUPP)
			; /* replicas sharing PostgreSQL: forwarded to its creator */
		else if (open) /* open in the store, not loaded by this controller */
			pf_api_error(resp, 409, "capture_driven_elsewhere",
				     "capture %s (%s) is not run by this controller: cannot cancel it",
				     id, st);
		else
			pf_api_error(resp, 409, "already_ended", "capture %s already ended (%s)",
				     id, st ? st : "?");
		json_decref(o);
		return;
	}
	if (rc < 0) {
		pf_api_error(resp, 500, "store_error", "%s", err.msg);
		return;
	}
	pf_api_audit(api, req, role, "capture.cancel", id, NULL);
	h_get(api, resp, id, 200);
}

void pf_api_captures_handle(struct pf_api *api, const struct pf_api_request *req,
			    struct pf_api_response *resp, const char *id, const char *role)
{
	const char *m = req->method;
	if (!api->captures) {
		pf_api_error(resp, 503, "unavailable", "captures are not enabled");
		return;
	}
	if (!id && strcmp(m, "POST") == 0)
		return h_create(api, req, resp, role);
	if (!id && strcmp(m, "GET") == 0)
		return h_list(api, req, resp);
	if (id && strcmp(m, "GET") == 0)
		return h_get(api, resp, id, 200);
	if (id && strcmp(m, "DELETE") == 0)
		return h_cancel(api, req, resp, id, role);
	pf_api_error(resp, 405, "method_not_allowed", "%s is not allowed on %s", m, req->path);
}
