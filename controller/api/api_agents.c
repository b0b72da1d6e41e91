/* api_agents.c — see api_agents.h. */
#include "api_agents.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "api_int.h"
#include "fleet/fleet.h"
#include "fleet/sync.h"
#include "pf/log.h"
#include "pf/selector.h"
#include "pf/uuid.h"
#include "redact.h"
#include "store.h"

#define AGENTS_DEFAULT_LIMIT 1000
#define AGENTS_MAX_LIMIT 10000

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

void pf_api_agents_list(struct pf_api *api, const struct pf_api_request *req,
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
	if (ls && !pf_api_parse_u64(ls, 1, AGENTS_MAX_LIMIT, &limit)) {
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

void pf_api_agent_get(struct pf_api *api, const struct pf_api_request *req,
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

void pf_api_fleet_summary(struct pf_api *api, const struct pf_api_request *req,
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
