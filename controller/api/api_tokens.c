/* api_tokens.c — see api_tokens.h. */
#include "api_tokens.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "pf/hash.h"
#include "fleet/fleet.h"
#include "pf/log.h"
#include "pf/uuid.h"
#include "store.h"

long long pf_api_parse_duration(const char *s, long long max_s)
{
	if (!s || *s < '0' || *s > '9')
		return -1;
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno)
		return -1;
	long long mul = 1;
	if (*end) {
		if (end[1])
			return -1;
		switch (*end) {
		case 's':
			mul = 1;
			break;
		case 'm':
			mul = 60;
			break;
		case 'h':
			mul = 3600;
			break;
		case 'd':
			mul = 86400;
			break;
		default:
			return -1;
		}
	}
	if (v <= 0 || v > max_s / mul)
		return -1;
	return v * mul;
}

/* Token names: what a file name or a person's handle holds. */
static bool token_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > PF_TOKEN_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.' || c == '@'))
			return false;
	}
	return true;
}

static json_t *ms_or_null(int64_t ms)
{
	return ms ? json_integer((json_int_t)ms) : json_null();
}

static json_t *token_json(const struct pf_token_info *t, int64_t now_ms)
{
	return json_pack("{s:s,s:s,s:s,s:I,s:o,s:o,s:s,s:b}", "id", t->id, "name", t->name, "role",
			 t->role, "created", (json_int_t)t->created_ms, "expires",
			 ms_or_null(t->expires_ms), "last_used", ms_or_null(t->last_used_ms),
			 "created_by", t->created_by, "expired",
			 t->expires_ms && now_ms >= t->expires_ms);
}

struct name_probe {
	const char *name;
	bool found;
	size_t admins; /* live admin tokens */
	const char *skip_id;
	int64_t now_ms;
};

static int probe_cb(const struct pf_token_info *t, void *ud)
{
	struct name_probe *p = ud;
	if (p->name && strcmp(t->name, p->name) == 0)
		p->found = true;
	if (strcmp(t->role, "admin") == 0 && (!p->skip_id || strcmp(t->id, p->skip_id) != 0) &&
	    (!t->expires_ms || p->now_ms < t->expires_ms))
		p->admins++;
	return 0;
}

void pf_api_tokens_create(struct pf_api *api, const struct pf_api_request *req,
			  struct pf_api_response *resp)
{
	json_error_t jerr;
	json_t *o =
	    json_loadb((const char *)req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(o)) {
		pf_api_error(resp, 400, "invalid_json", "body: %s",
			     o ? "must be a JSON object" : jerr.text);
		json_decref(o);
		return;
	}
	struct pf_token_info t = {0};
	const char *key;
	json_t *v;
	bool has_name = false, has_role = false;
	json_object_foreach(o, key, v)
	{
		if (strcmp(key, "name") == 0 && json_is_string(v)) {
			if (!token_name_ok(json_string_value(v))) {
				pf_api_error(resp, 400, "invalid_argument",
					     "name: must be 1..%d of [A-Za-z0-9._@-]",
					     PF_TOKEN_NAME_MAX);
				goto out;
			}
			snprintf(t.name, sizeof(t.name), "%s", json_string_value(v));
			has_name = true;
		} else if (strcmp(key, "role") == 0 && json_is_string(v)) {
			enum pf_role r = pf_role_parse(json_string_value(v));
			if (r == PF_ROLE_NONE) {
				pf_api_error(resp, 400, "invalid_argument",
					     "role: must be admin, operator, viewer or agent");
				goto out;
			}
			snprintf(t.role, sizeof(t.role), "%s", pf_role_name(r));
			has_role = true;
		} else if (strcmp(key, "expires_in") == 0 &&
			   (json_is_string(v) || json_is_integer(v))) {
			char buf[32];
			if (json_is_integer(v))
				snprintf(buf, sizeof(buf), "%lld",
					 (long long)json_integer_value(v));
			else
				snprintf(buf, sizeof(buf), "%s", json_string_value(v));
			long long sec = pf_api_parse_duration(buf, PF_API_TOKEN_MAX_TTL_S);
			if (sec < 0) {
				pf_api_error(resp, 400, "invalid_argument",
					     "expires_in: seconds or a number with s, m, h or d, "
					     "at most %lld s",
					     PF_API_TOKEN_MAX_TTL_S);
				goto out;
			}
			t.expires_ms = req->now_ms + sec * 1000;
		} else {
			bool known = !strcmp(key, "name") || !strcmp(key, "role") ||
				     !strcmp(key, "expires_in");
			pf_api_error(resp, 400, "invalid_argument",
				     known ? "%s: wrong type" : "%s: unknown field", key);
			goto out;
		}
	}
	if (!has_name || !has_role) {
		pf_api_error(resp, 400, "invalid_argument", "%s: required",
			     has_name ? "role" : "name");
		goto out;
	}
	struct name_probe p = {.name = t.name, .now_ms = req->now_ms};
	int r = pf_store_token_foreach(api->store, probe_cb, &p);
	if (r < 0) {
		pf_api_error(resp, 500, "store_error", "reading tokens: %s", strerror(-r));
		goto out;
	}
	if (p.found) {
		pf_api_error(resp, 409, "already_exists", "a token named '%s' exists", t.name);
		goto out;
	}
	char secret[64];
	uint8_t h[32];
	r = pf_token_generate(secret, sizeof(secret));
	if (r < 0) {
		pf_api_error(resp, 500, "internal", "cannot generate a token: %s", strerror(-r));
		goto out;
	}
	pf_sha256(secret, strlen(secret), h);
	t.created_ms = req->now_ms;
	if (req->call)
		snprintf(t.created_by, sizeof(t.created_by), "%s", req->call->caller.name);
	r = pf_store_token_create(api->store, h, &t);
	if (r < 0) {
		pf_api_error(resp, 500, "store_error", "storing the token: %s", strerror(-r));
		goto out;
	}
	char detail[128];
	snprintf(detail, sizeof(detail), "name=%s role=%s expires=%lld", t.name, t.role,
		 (long long)t.expires_ms);
	pf_api_audit(api, req, NULL, "token.create", t.id, detail);
	json_t *j = token_json(&t, req->now_ms);
	if (j)
		json_object_set_new(j, "token", json_string(secret));
	pf_api_respond_json(resp, 201, j);
	memset(secret, 0, sizeof(secret));
out:
	json_decref(o);
}

static int list_cb(const struct pf_token_info *t, void *ud)
{
	json_t **ctx = ud;
	json_array_append_new(ctx[0], token_json(t, (int64_t)json_integer_value(ctx[1])));
	return 0;
}

void pf_api_tokens_list(struct pf_api *api, const struct pf_api_request *req,
			struct pf_api_response *resp)
{
	json_t *ctx[2] = {json_array(), json_integer((json_int_t)req->now_ms)};
	int r = ctx[0] ? pf_store_token_foreach(api->store, list_cb, ctx) : -ENOMEM;
	json_decref(ctx[1]);
	if (r < 0) {
		json_decref(ctx[0]);
		pf_api_error(resp, 500, "store_error", "reading tokens: %s", strerror(-r));
		return;
	}
	pf_api_respond_json(resp, 200, json_pack("{s:o}", "tokens", ctx[0]));
}

void pf_api_tokens_revoke(struct pf_api *api, const struct pf_api_request *req,
			  struct pf_api_response *resp)
{
	const char *id = req->call ? req->call->params[0] : NULL;
	if (!id) {
		pf_api_error(resp, 404, "not_found", "no token id");
		return;
	}
	struct pf_token_info t;
	struct name_probe p = {.skip_id = id, .now_ms = req->now_ms};
	int r = pf_store_token_foreach(api->store, probe_cb, &p);
	if (r < 0) {
		pf_api_error(resp, 500, "store_error", "reading tokens: %s", strerror(-r));
		return;
	}
	if (p.admins == 0) {
		pf_api_error(resp, 409, "last_admin",
			     "token %s is the last valid admin token; create another admin token "
			     "first",
			     id);
		return;
	}
	r = pf_store_token_revoke(api->store, id, &t);
	if (r == -ENOENT) {
		pf_api_error(resp, 404, "not_found", "no token with id '%s'", id);
		return;
	}
	if (r < 0) {
		pf_api_error(resp, 500, "store_error", "revoking the token: %s", strerror(-r));
		return;
	}
	char detail[128];
	snprintf(detail, sizeof(detail), "name=%s role=%s", t.name, t.role);
	pf_api_audit(api, req, NULL, "token.revoke", t.id, detail);
	if (api->on_revoke)
		api->on_revoke(t.id, api->revoke_ud);
	pf_api_respond_json(
	    resp, 200, json_pack("{s:s,s:s,s:s}", "revoked", t.id, "name", t.name, "role", t.role));
}

/* The agent named by the route's uid, or an answer saying why not. */
static bool route_uid(const struct pf_api_request *req, struct pf_api_response *resp,
		      uint8_t uid[16])
{
	const char *u = req->call ? req->call->params[0] : NULL;
	if (!u || pf_uuid_parse(u, uid) < 0) {
		pf_api_error(resp, 400, "invalid_argument", "uid: not a UUID: '%.40s'",
			     u ? u : "");
		return false;
	}
	return true;
}

void pf_api_agent_credential_rotate(struct pf_api *api, const struct pf_api_request *req,
				    struct pf_api_response *resp)
{
	uint8_t uid[16];
	if (!route_uid(req, resp, uid))
		return;
	int r = api->on_rotate ? api->on_rotate(uid, api->revoke_ud) : -ENOTCONN;
	/* the agents a new credential cannot be offered to now: 409 */
	static const struct {
		int r;
		const char *code, *why;
	} refused[] = {
	    {-ENOTCONN, "not_connected",
	     "is not connected to this controller over WebSocket: a new credential is offered on "
	     "its live connection"},
	    {-EOPNOTSUPP, "not_supported",
	     "does not accept OpAMP connection settings; it keeps the enrollment token"},
	};
	for (size_t i = 0; i < PF_ARRAY_SIZE(refused); i++) {
		if (r == refused[i].r) {
			pf_api_error(resp, 409, refused[i].code, "agent %s %s",
				     req->call->params[0], refused[i].why);
			return;
		}
	}
	if (r < 0) {
		pf_api_error(resp, 500, "store_error", "offering a credential: %s", strerror(-r));
		return;
	}
	pf_api_audit(api, req, NULL, "agent.credential.rotate", req->call->params[0], "offered");
	pf_api_respond_json(resp, 202, json_pack("{s:s,s:s}", "instance_uid",
						 req->call->params[0], "credential", "offered"));
}

void pf_api_agent_credential_revoke(struct pf_api *api, const struct pf_api_request *req,
				    struct pf_api_response *resp)
{
	uint8_t uid[16];
	char ids[PF_AGENT_CREDENTIAL_MAX_IDS][PF_TOKEN_ID_LEN + 1];
	if (!route_uid(req, resp, uid))
		return;
	int n = pf_store_agent_credential_revoke(api->store, uid, ids);
	if (n == -ENOENT) {
		pf_api_error(resp, 404, "not_found", "agent %s has no credential of its own",
			     req->call->params[0]);
		return;
	}
	if (n < 0) {
		pf_api_error(resp, 500, "store_error", "revoking the credential: %s",
			     strerror(-n));
		return;
	}
	json_t *arr = json_array();
	for (int i = 0; i < n; i++) {
		if (api->on_revoke)
			api->on_revoke(ids[i], api->revoke_ud);
		json_array_append_new(arr, json_string(ids[i]));
	}
	struct pf_agent *a = api->fleet ? pf_fleet_find(api->fleet, uid) : NULL;
	if (a)
		a->credential = PF_CRED_UNKNOWN;
	pf_api_audit(api, req, NULL, "agent.credential.revoke", req->call->params[0], "revoked");
	pf_api_respond_json(resp, 200, json_pack("{s:s,s:o}", "instance_uid",
						 req->call->params[0], "revoked", arr));
}

struct audit_page {
	json_t *arr;
	int64_t last_id;
	size_t n;
};

static int audit_cb(const struct pf_audit_entry *e, void *ud)
{
	struct audit_page *p = ud;
	json_array_append_new(
	    p->arr, json_pack("{s:I,s:I,s:s,s:s,s:s,s:s,s:s,s:s?,s:i}", "id", (json_int_t)e->id,
			      "time", (json_int_t)e->ts_ms, "actor", e->actor, "actor_id",
			      e->actor_id, "source", e->source, "action", e->action, "target",
			      e->target, "detail", e->detail, "status", e->status));
	p->last_id = e->id;
	p->n++;
	return 0;
}

static bool parse_i64(const char *s, int64_t min, int64_t *out)
{
	if (!s || !*s)
		return false;
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end || v < min)
		return false;
	*out = v;
	return true;
}

void pf_api_audit_query(struct pf_api *api, const struct pf_api_request *req,
			struct pf_api_response *resp)
{
	static const char *const keys[] = {"from", "to", "actor", "action", "limit", "cursor"};
	for (size_t i = 0; i < req->n_args; i++) {
		bool ok = false;
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
			size_t kl = strlen(keys[k]);
			ok |= strncmp(req->args[i], keys[k], kl) == 0 && req->args[i][kl] == '=';
		}
		if (!ok) {
			pf_api_error(resp, 400, "invalid_argument",
				     "unknown query argument '%.64s' (from, to, actor, action, "
				     "limit, cursor)",
				     req->args[i]);
			return;
		}
	}
	struct pf_audit_query q = {.limit = PF_API_AUDIT_LIST_DEFAULT};
	int64_t v;
	const char *s;
	if ((s = pf_api_arg(req, "from")) && *s) {
		if (!parse_i64(s, 0, &q.from_ms)) {
			pf_api_error(resp, 400, "invalid_argument", "from: unix milliseconds");
			return;
		}
	}
	if ((s = pf_api_arg(req, "to")) && *s) {
		if (!parse_i64(s, 0, &q.to_ms)) {
			pf_api_error(resp, 400, "invalid_argument", "to: unix milliseconds");
			return;
		}
	}
	if ((s = pf_api_arg(req, "limit")) && *s) {
		if (!parse_i64(s, 1, &v) || v > PF_API_AUDIT_LIST_MAX) {
			pf_api_error(resp, 400, "invalid_argument", "limit: must be 1..%d",
				     PF_API_AUDIT_LIST_MAX);
			return;
		}
		q.limit = (size_t)v;
	}
	if ((s = pf_api_arg(req, "cursor")) && *s) {
		if (!parse_i64(s, 1, &q.before_id)) {
			pf_api_error(resp, 400, "invalid_argument",
				     "cursor: the next_cursor of the previous page");
			return;
		}
	}
	if ((s = pf_api_arg(req, "actor")) && *s)
		q.actor = s;
	if ((s = pf_api_arg(req, "action")) && *s)
		q.action = s;
	struct audit_page p = {.arr = json_array()};
	int r = p.arr ? pf_store_audit_query(api->store, &q, audit_cb, &p) : -ENOMEM;
	if (r < 0) {
		json_decref(p.arr);
		pf_api_error(resp, 500, "store_error", "reading the audit log: %s", strerror(-r));
		return;
	}
	char cur[32];
	snprintf(cur, sizeof(cur), "%lld", (long long)p.last_id);
	pf_api_respond_json(resp, 200,
			    json_pack("{s:o,s:o}", "entries", p.arr, "next_cursor",
				      p.n == q.limit ? json_string(cur) : json_null()));
}
