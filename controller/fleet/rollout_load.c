/* rollout_load.c — rollouts and config pins read back from the store (at start, after an
 * outage, when another replica dies) and the views of rollouts the API renders; see
 * rollout.h and rollout_int.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fleet.h"
#include "pf/array.h"
#include "pf/log.h"
#include "pf/uuid.h"
#include "rollout_int.h"
#include "store.h"

/* ---------------------------------------------------------------- loading */

struct load_ctx {
	struct rollout *r;
	size_t cap;
	int rc;
};

static int load_row(const struct pf_rollout_row *row, void *ud)
{
	struct load_ctx *l = ud;
	struct rollout *r = l->r;
	snprintf(r->id, sizeof(r->id), "%s", row->id);
	snprintf(r->config, sizeof(r->config), "%s", row->config);
	snprintf(r->created_by, sizeof(r->created_by), "%s", row->created_by);
	r->version = row->version;
	r->created_ms = row->created_ms;
	r->updated_ms = row->updated_ms;
	int st = pf_ro_state_parse(row->state);
	r->state = st < 0 ? RO_CANCELLED : (enum ro_state)st;
	pf_rollout_strategy_defaults(&r->strategy);
	json_t *spec = json_loads(row->spec_json, 0, NULL);
	json_t *prog = json_loads(row->progress_json, 0, NULL);
	const char *sel = json_string_value(json_object_get(spec, "selector"));
	snprintf(r->selector, sizeof(r->selector), "%s", sel ? sel : "");
	pf_rollout_strategy_parse(json_object_get(spec, "strategy"), &r->strategy, NULL);
	r->batch = (uint32_t)json_integer_value(json_object_get(prog, "batch"));
	r->started = json_is_true(json_object_get(prog, "started"));
	r->batch_started_ms = json_integer_value(json_object_get(prog, "batch_started"));
	r->next_batch_ms = json_integer_value(json_object_get(prog, "next_batch"));
	const char *reason = json_string_value(json_object_get(prog, "reason"));
	snprintf(r->reason, sizeof(r->reason), "%s", reason ? reason : "");
	json_decref(spec);
	json_decref(prog);
	return 0;
}

static int load_agent(const struct pf_rollout_agent_row *row, void *ud)
{
	struct load_ctx *l = ud;
	struct rollout *r = l->r;
	if (r->n == PF_ROLLOUTS_MAX_AGENTS || row->batch < 0 || row->batch >= UINT32_MAX)
		return 0;
	if (PF_ARRAY_GROW(r->agents, l->cap, r->n + 1, 64) < 0)
		return -ENOMEM;
	struct ro_agent *a = &r->agents[r->n++];
	memset(a, 0, sizeof(*a));
	memcpy(a->uid, row->uid, 16);
	a->batch = (uint32_t)row->batch;
	a->from_version = row->from_version;
	int st = pf_ra_state_parse(row->state);
	a->state = (uint8_t)(st < 0 ? RA_FAILED : st);
	for (size_t i = 0; i < PF_ARRAY_SIZE(pf_rv_state_names); i++)
		if (strcmp(row->revert, pf_rv_state_names[i]) == 0)
			a->revert = (uint8_t)i;
	a->error = row->error[0] ? strdup(row->error) : NULL;
	return 0;
}

/* A rollout from the store (active or not). */
static struct rollout *load_one(struct pf_rollouts *rs, const char *id, int *rc)
{
	struct load_ctx l = {.r = calloc(1, sizeof(struct rollout))};
	if (!l.r) {
		*rc = -ENOMEM;
		return NULL;
	}
	*rc = pf_store_rollout_get(rs->store, id, load_row, load_agent, &l);
	if (*rc == 0) {
		qsort(l.r->agents, l.r->n, sizeof(*l.r->agents), pf_ro_agent_order);
		*rc = pf_ro_index_batches(l.r);
	}
	if (*rc < 0) {
		pf_ro_free(l.r);
		return NULL;
	}
	if (l.r->batch > l.r->n_batches)
		l.r->batch = l.r->n_batches;
	return l.r;
}

struct id_list {
	char ids[PF_ROLLOUTS_MAX_ACTIVE][PF_ROLLOUT_ID_MAX + 1];
	size_t n;
};

static int collect_id(const struct pf_rollout_row *row, void *ud)
{
	struct id_list *l = ud;
	if (l->n < PF_ROLLOUTS_MAX_ACTIVE)
		snprintf(l->ids[l->n++], PF_ROLLOUT_ID_MAX + 1, "%s", row->id);
	return 0;
}

size_t pf_rollouts_relock(struct pf_rollouts *rs)
{
	size_t dropped = 0;
	for (size_t i = 0; i < rs->n_active;) {
		struct rollout *r = rs->active[i];
		bool owned = false;
		if (pf_store_rollout_lock(rs->store, r->id, &owned) < 0 || owned) {
			i++; /* kept (on an error: try again at the next reconnect) */
			continue;
		}
		pf_log_warn("rollout %s: another replica took it over while the database was "
			    "unreachable; it drives it now",
			    r->id);
		rs->active[i] = rs->active[--rs->n_active];
		pf_ro_free(r);
		dropped++;
	}
	return dropped;
}

int pf_rollouts_load(struct pf_rollouts *rs, int64_t now_ms, struct pf_error *err)
{
	struct id_list l = {.n = 0};
	int rc = pf_store_rollouts_foreach(rs->store, true, NULL, PF_ROLLOUTS_MAX_ACTIVE,
					   collect_id, &l);
	if (rc < 0)
		return pf_error_set(err, rc, NULL, "loading rollouts: %s",
				    pf_store_last_error(rs->store));
	for (size_t i = 0; i < l.n; i++) {
		bool owned = false;
		if (pf_ro_find_active(rs, l.ids[i]))
			continue;
		/* Replicas sharing PostgreSQL: only the holder of the rollout's lock drives it; a
		 * replica that dies releases it and the next pf_rollouts_load() elsewhere takes over. */
		rc = pf_store_rollout_lock(rs->store, l.ids[i], &owned);
		if (rc < 0)
			return pf_error_set(err, rc, NULL, "locking rollout %s: %s", l.ids[i],
					    pf_store_last_error(rs->store));
		if (!owned)
			continue;
		struct rollout *r = load_one(rs, l.ids[i], &rc);
		if (!r)
			return pf_error_set(err, rc, NULL, "loading rollout %s: %s", l.ids[i],
					    pf_store_last_error(rs->store));
		/* The agents reconnect after a restart: their timeout starts again. */
		if (r->started || r->state == RO_ROLLING_BACK)
			r->batch_started_ms = now_ms;
		pf_ro_version_slot(rs, r->config, r->version);
		rs->active[rs->n_active++] = r;
		pf_log_info("rollout %s of %s v%lld resumes: %s, batch %u of %u", r->id, r->config,
			    (long long)r->version, pf_ro_state_names[r->state], r->batch + 1,
			    r->n_batches);
	}
	return 0;
}

struct pins_ctx {
	struct pf_store *st;
	struct pf_fleet *f;
};

static struct pf_cfg_slot *load_version(struct pins_ctx *c, const char *name, int64_t version,
					bool serve)
{
	struct pf_cfg_slot *v = pf_fleet_config_version(c->f, name, version);
	if (!v) {
		struct pf_config_version cv;
		if (pf_store_config_get(c->st, name, version, &cv) < 0)
			return NULL;
		v = pf_fleet_config_add(c->f, cv.name, cv.version, cv.hash, cv.body, cv.body_len,
					cv.created_ms, false);
		pf_config_version_release(&cv);
	}
	if (v && serve)
		pf_fleet_config_add(c->f, v->name, v->version, v->hash, v->body, v->body_len,
				    v->created_ms, true);
	return v;
}

static int load_serving(const char *name, int64_t version, void *ud)
{
	if (!load_version(ud, name, version, true))
		pf_log_warn("config %s: served version %lld not found", name, (long long)version);
	return 0;
}

static int load_pin(const struct pf_pin_row *p, void *ud)
{
	struct pins_ctx *c = ud;
	struct pf_cfg_slot *v = load_version(c, p->config, p->version, false);
	struct pf_agent *a = pf_fleet_get_or_add(c->f, p->uid, 0);
	if (!a)
		return -ENOMEM;
	if (v)
		pf_agent_set_pin(c->f, a, v);
	return 0;
}

int pf_rollouts_load_pins(struct pf_store *st, struct pf_fleet *f, struct pf_error *err)
{
	struct pins_ctx c = {.st = st, .f = f};
	int rc = pf_store_config_serving_foreach(st, load_serving, &c);
	if (rc == 0)
		rc = pf_store_pins_foreach(st, load_pin, &c);
	if (rc < 0)
		return pf_error_set(err, rc, NULL, "loading pinned versions: %s",
				    pf_store_last_error(st));
	return 0;
}

static int serve_latest(const struct pf_config_version *cv, void *ud)
{
	struct pins_ctx *c = ud;
	pf_fleet_config_add(c->f, cv->name, cv->version, cv->hash, cv->body, cv->body_len,
			    cv->created_ms, true);
	return 0;
}

struct reload_ctx {
	struct pins_ctx c;
	const char *name; /* NULL: every config */
};

static int reload_serving(const char *name, int64_t version, void *ud)
{
	struct reload_ctx *r = ud;
	return !r->name || strcmp(r->name, name) == 0 ? load_serving(name, version, &r->c) : 0;
}

static int reload_pin(const struct pf_pin_row *p, void *ud)
{
	struct reload_ctx *r = ud;
	return !r->name || strcmp(r->name, p->config) == 0 ? load_pin(p, &r->c) : 0;
}

int pf_rollouts_reload_config(struct pf_store *st, struct pf_fleet *f, const char *name)
{
	struct reload_ctx r = {.c = {.st = st, .f = f}, .name = name};
	struct pf_config_version cv;
	int rc;

	/* The served version: the latest unless a config_serving row says otherwise. */
	if (name) {
		rc = pf_store_config_get(st, name, 0, &cv);
		if (rc == 0) {
			rc = serve_latest(&cv, &r.c);
			pf_config_version_release(&cv);
		} else if (rc == -ENOENT) {
			rc = 0;
		}
	} else {
		rc = pf_store_config_foreach_latest(st, serve_latest, &r.c);
	}
	if (rc == 0)
		rc = pf_store_config_serving_foreach(st, reload_serving, &r);
	if (rc < 0)
		return rc;
	/* The pins: dropped, then read back (both without a push: the caller reconciles). */
	if (name) {
		pf_fleet_unpin_config(f, name, 0);
	} else {
		struct pf_agent *a;
		size_t it = 0;
		while ((a = pf_fleet_next(f, &it)))
			if (a->pin)
				pf_agent_set_pin(f, a, NULL);
	}
	return pf_store_pins_foreach(st, reload_pin, &r);
}

/* ---------------------------------------------------------------- reading */

/* The view of an active (or loaded) rollout; the caller releases strategy and batches. */
static void live_view(const struct rollout *r, bool with_errors, struct pf_rollout_view *v)
{
	*v = (struct pf_rollout_view){
	    .id = r->id,
	    .config = r->config,
	    .selector = r->selector,
	    .state = pf_ro_state_names[r->state],
	    .reason = r->reason,
	    .created_by = r->created_by,
	    .version = r->version,
	    .created_ms = r->created_ms,
	    .updated_ms = r->updated_ms,
	    .live = true,
	    .agents = r->n,
	    .current_batch = r->batch < r->n_batches ? r->batch + 1 : r->n_batches,
	    .n_batches = r->n_batches,
	    .next_batch_ms =
		r->state == RO_RUNNING && !r->started && r->next_batch_ms ? r->next_batch_ms : 0,
	    .strategy = pf_ro_strategy_json(&r->strategy),
	    .batches = pf_ro_batches_json(r, with_errors),
	};
}

static int live_cb(const struct rollout *r, bool with_errors,
		   int (*cb)(const struct pf_rollout_view *v, void *ud), void *ud)
{
	struct pf_rollout_view v;
	live_view(r, with_errors, &v);
	int rc = cb(&v, ud);
	json_decref(v.strategy);
	json_decref(v.batches);
	return rc;
}

int pf_rollouts_get(struct pf_rollouts *rs, const char *id,
		    int (*cb)(const struct pf_rollout_view *v, void *ud), void *ud)
{
	struct rollout *r = pf_ro_find_active(rs, id);
	if (r)
		return live_cb(r, true, cb, ud);
	int rc;
	r = load_one(rs, id, &rc);
	if (!r)
		return rc;
	rc = live_cb(r, true, cb, ud);
	pf_ro_free(r);
	return rc;
}

struct list_ctx {
	struct pf_rollouts *rs;
	int (*cb)(const struct pf_rollout_view *v, void *ud);
	void *ud;
};

static int list_row(const struct pf_rollout_row *row, void *ud)
{
	struct list_ctx *l = ud;
	struct rollout *r = pf_ro_find_active(l->rs, row->id);
	if (r)
		return live_cb(r, false, l->cb, l->ud);
	/* Finished: the row's own summary, without per-agent work. */
	json_t *spec = json_loads(row->spec_json, 0, NULL);
	json_t *prog = json_loads(row->progress_json, 0, NULL);
	const char *sel = json_string_value(json_object_get(spec, "selector"));
	const char *reason = json_string_value(json_object_get(prog, "reason"));
	struct pf_rollout_view v = {
	    .id = row->id,
	    .config = row->config,
	    .selector = sel ? sel : "",
	    .state = row->state,
	    .reason = reason ? reason : "",
	    .created_by = row->created_by,
	    .version = row->version,
	    .created_ms = row->created_ms,
	    .updated_ms = row->updated_ms,
	    .strategy = json_object_get(spec, "strategy"),
	    .batches = json_object_get(prog, "batches"),
	};
	int rc = l->cb(&v, l->ud);
	json_decref(spec);
	json_decref(prog);
	return rc;
}

int pf_rollouts_list(struct pf_rollouts *rs, bool active_only, const char *cursor, size_t limit,
		     int (*cb)(const struct pf_rollout_view *v, void *ud), void *ud)
{
	struct list_ctx l = {.rs = rs, .cb = cb, .ud = ud};
	return pf_store_rollouts_foreach(rs->store, active_only, cursor, limit, list_row, &l);
}
