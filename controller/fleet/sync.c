/* sync.c — see sync.h. */
#include "sync.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "capture.h"
#include "fleet.h"
#include "pf/log.h"
#include "rollout.h"
#include "store.h"

static int sync_assignment(struct pf_sync *s, const char *name)
{
	struct pf_assignment a;
	struct pf_error err = {0};
	int rc = pf_store_assignment_get(s->store, name, &a);

	if (rc == -ENOENT) {
		pf_fleet_assignment_remove(s->fleet, name);
		return 0;
	}
	if (rc < 0)
		return rc;
	rc = pf_fleet_assignment_set(s->fleet, a.name, a.selector, a.config, a.priority, &err);
	if (rc < 0)
		pf_log_warn("sync: assignment %s: %s", name, err.msg);
	return rc;
}

/* The store's assignment names, while reloading them all. */
struct asg_names {
	struct pf_sync *s;
	char (*names)[128];
	size_t n, cap;
	bool oom;
};

static int asg_one(const struct pf_assignment *a, void *ud)
{
	struct asg_names *l = ud;
	struct pf_error err = {0};
	if (pf_fleet_assignment_set(l->s->fleet, a->name, a->selector, a->config, a->priority,
				    &err) < 0)
		pf_log_warn("sync: assignment %s: %s", a->name, err.msg);
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 16;
		void *nv = realloc(l->names, nc * sizeof(*l->names));
		if (!nv) {
			l->oom = true;
			return 0;
		}
		l->names = nv;
		l->cap = nc;
	}
	memcpy(l->names[l->n++], a->name, sizeof(a->name));
	return 0;
}

static bool asg_stored(const char *name, void *ud)
{
	struct asg_names *l = ud;
	if (l->oom)
		return true; /* unsure: keep */
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->names[i], name) == 0)
			return true;
	return false;
}

int pf_sync_apply(struct pf_sync *s, const char *kind, const char *name, int64_t now_ms)
{
	int rc = 0;

	if (strcmp(kind, "config") == 0) {
		rc = pf_rollouts_reload_config(s->store, s->fleet, name);
	} else if (strcmp(kind, "assignment") == 0) {
		rc = sync_assignment(s, name);
	} else if (strcmp(kind, "token") == 0) {
		/* Tokens are read from the store at every request: a revoked one is already
		 * refused here. What is left is the connections that authenticated with it. */
		if (s->on_token)
			s->on_token(name, s->ud);
		s->applied++;
		return 0;
	} else if (strcmp(kind, "rollout") == 0) {
		/* Its pins and served version moved; a rollout whose replica died is adopted. */
		rc = pf_rollouts_reload_config(s->store, s->fleet, NULL);
		if (rc == 0 && s->rollouts) {
			struct pf_error err = {0};
			rc = pf_rollouts_load(s->rollouts, now_ms, &err);
		}
	} else if (strcmp(kind, "capture") == 0) {
		/* Its creator drives it; this replica serves the agents connected here. */
		if (s->captures)
			rc = pf_captures_adopt(s->captures, name, now_ms);
		if (rc == 0) {
			s->applied++;
			return 0; /* nothing to reconcile */
		}
	} else {
		return 0;
	}
	if (rc < 0) {
		s->failed++;
		pf_log_warn("sync: %s %s: %s", kind, name, pf_store_last_error(s->store));
		return rc;
	}
	s->applied++;
	s->pushed += pf_fleet_reconcile(s->fleet);
	pf_log_debug("sync: %s %s applied", kind, name);
	return 0;
}

int pf_sync_reload_all(struct pf_sync *s, int64_t now_ms)
{
	if (s->rollouts)
		pf_rollouts_relock(s->rollouts);
	int rc = pf_rollouts_reload_config(s->store, s->fleet, NULL);
	struct asg_names l = {.s = s};
	if (rc == 0)
		rc = pf_store_assignment_foreach(s->store, asg_one, &l);
	if (rc == 0) /* deleted meanwhile through another replica */
		pf_fleet_assignments_retain(s->fleet, asg_stored, &l);
	free(l.names);
	if (rc == 0 && s->rollouts) {
		struct pf_error err = {0};
		rc = pf_rollouts_load(s->rollouts, now_ms, &err);
	}
	if (rc < 0) {
		s->failed++;
		pf_log_warn("sync: reload: %s", pf_store_last_error(s->store));
		return rc;
	}
	s->pushed += pf_fleet_reconcile(s->fleet);
	return 0;
}

int pf_sync_load_agent(struct pf_fleet *f, const struct pf_agent_row *row)
{
	struct pf_agent *a = pf_fleet_get_or_add(f, row->uid, row->first_seen_ms);
	if (!a)
		return -ENOMEM;
	a->first_seen_ms = row->first_seen_ms;
	a->last_seen_ms = row->last_seen_ms;
	a->capabilities = row->capabilities;
	json_t *o = row->attributes_json ? json_loads(row->attributes_json, 0, NULL) : NULL;
	if (json_is_object(o)) {
		size_t n = json_object_size(o), i = 0;
		const char **k = calloc(n + 1, sizeof(*k)), **v = calloc(n + 1, sizeof(*v));
		const char *key;
		json_t *val;
		if (k && v) {
			json_object_foreach(o, key, val)
			{
				if (!json_is_string(val))
					continue;
				k[i] = key;
				v[i] = json_string_value(val);
				i++;
			}
			pf_agent_set_attributes(f, a, k, v, i);
		}
		free(k);
		free(v);
	}
	json_decref(o);
	if (row->health_json) {
		json_t *h = json_loads(row->health_json, 0, NULL);
		bool healthy = json_is_true(json_object_get(h, "healthy"));
		json_decref(h);
		pf_agent_set_health(f, a, healthy, row->health_json);
	}
	if (row->effective_config)
		pf_agent_set_effective(f, a, row->effective_config, strlen(row->effective_config));
	if (row->has_remote_hash)
		pf_agent_set_remote_status(f, a, row->remote_hash, 32, row->remote_status,
					   row->remote_error);
	/* Connected to another replica, per its row (this replica's own agents are never
	 * loaded over: pf_sync_refresh_agents skips them). */
	a->elsewhere = row->connected && !a->connected;
	return 0;
}

static int refresh_one(const struct pf_agent_row *row, void *ud)
{
	struct pf_fleet *f = ud;
	struct pf_agent *a = pf_fleet_find(f, row->uid);
	if (a && a->local)
		return 0; /* this replica's own: memory is newer than the row */
	return pf_sync_load_agent(f, row);
}

int pf_sync_refresh_agents(struct pf_store *st, struct pf_fleet *f, int64_t *cursor_ms)
{
	return pf_store_agents_foreach_since(st, cursor_ms, refresh_one, f);
}

int pf_sync_refresh_agent(struct pf_store *st, struct pf_fleet *f, const uint8_t uid[16])
{
	return pf_store_agent_get(st, uid, refresh_one, f);
}
