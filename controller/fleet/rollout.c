/* rollout.c — see rollout.h. */
#include "rollout.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fleet.h"
#include "rollout_int.h"
#include "opamp_codec.h"
#include "pf/compiler.h"
#include "pf/log.h"
#include "pf/selector.h"
#include "pf/uuid.h"
#include "store.h"

const char *const pf_ro_state_names[] = {"running",	    "paused",	 "halted",   "rolling_back",
					     "rolled_back", "completed", "cancelled"};

static const char *const ra_state_names[] = {"waiting", "applying", "applied", "failed", "offline"};
const char *const pf_rv_state_names[4] = {"", "reverting", "reverted", "failed"};

/* ---------------------------------------------------------------- strategy */

void pf_rollout_strategy_defaults(struct pf_rollout_strategy *s)
{
	*s = (struct pf_rollout_strategy){.initial = 3,
					  .multiplier = 5,
					  .max_batch_percent = 100,
					  .pause_seconds = 5,
					  .max_failure_percent = 5,
					  .apply_timeout_seconds = 60,
					  .on_failure = PF_ROLLOUT_HALT};
}

static const struct {
	const char *key;
	size_t off;
	uint32_t min, max;
} strategy_fields[] = {
    {"initial", offsetof(struct pf_rollout_strategy, initial), 1, PF_ROLLOUTS_MAX_AGENTS},
    {"multiplier", offsetof(struct pf_rollout_strategy, multiplier), 1, 100},
    {"max_batch_percent", offsetof(struct pf_rollout_strategy, max_batch_percent), 1, 100},
    {"pause_seconds", offsetof(struct pf_rollout_strategy, pause_seconds), 0, 86400},
    {"max_failure_percent", offsetof(struct pf_rollout_strategy, max_failure_percent), 0, 100},
    {"apply_timeout_seconds", offsetof(struct pf_rollout_strategy, apply_timeout_seconds), 1, 3600},
};

int pf_rollout_strategy_parse(const json_t *o, struct pf_rollout_strategy *s, struct pf_error *err)
{
	char path[96];
	const char *key;
	json_t *val;

	if (!json_is_object(o))
		return pf_error_set(err, -EINVAL, "strategy", "must be an object");
	json_object_foreach((json_t *)o, key, val)
	{
		snprintf(path, sizeof(path), "strategy.%.64s", key);
		if (strcmp(key, "on_failure") == 0) {
			const char *v = json_string_value(val);
			if (v && strcmp(v, "halt") == 0)
				s->on_failure = PF_ROLLOUT_HALT;
			else if (v && strcmp(v, "rollback") == 0)
				s->on_failure = PF_ROLLOUT_ROLLBACK;
			else
				return pf_error_set(err, -EINVAL, path,
						    "must be \"halt\" or \"rollback\"");
			continue;
		}
		size_t i = 0;
		while (i < PF_ARRAY_SIZE(strategy_fields) && strcmp(strategy_fields[i].key, key))
			i++;
		if (i == PF_ARRAY_SIZE(strategy_fields))
			return pf_error_set(err, -EINVAL, path, "unknown field");
		if (!json_is_integer(val) || json_integer_value(val) < strategy_fields[i].min ||
		    json_integer_value(val) > strategy_fields[i].max)
			return pf_error_set(err, -EINVAL, path, "must be an integer %u..%u",
					    strategy_fields[i].min, strategy_fields[i].max);
		*(uint32_t *)((char *)s + strategy_fields[i].off) =
		    (uint32_t)json_integer_value(val);
	}
	return 0;
}

json_t *pf_ro_strategy_json(const struct pf_rollout_strategy *s)
{
	json_t *o = json_object();
	for (size_t i = 0; o && i < PF_ARRAY_SIZE(strategy_fields); i++)
		json_object_set_new(
		    o, strategy_fields[i].key,
		    json_integer(*(const uint32_t *)((const char *)s + strategy_fields[i].off)));
	if (o)
		json_object_set_new(
		    o, "on_failure",
		    json_string(s->on_failure == PF_ROLLOUT_ROLLBACK ? "rollback" : "halt"));
	return o;
}

size_t pf_rollout_plan(const struct pf_rollout_strategy *s, size_t n, uint32_t *sizes, size_t max)
{
	uint64_t cap = (uint64_t)n * s->max_batch_percent / 100;
	if (cap < 1)
		cap = 1;
	uint64_t size = s->initial < cap ? s->initial : cap;
	size_t nb = 0;
	for (size_t done = 0; done < n; nb++) {
		uint64_t take = size < n - done ? size : n - done;
		if (nb < max)
			sizes[nb] = (uint32_t)take;
		done += take;
		size = size * s->multiplier;
		if (size > cap)
			size = cap;
	}
	return nb;
}

/* ---------------------------------------------------------------- helpers */

void pf_ro_free(struct rollout *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		free(r->agents[i].error);
	free(r->agents);
	free(r->first);
	free(r);
}

static bool ro_active(enum ro_state s)
{
	return s <= RO_ROLLING_BACK;
}

int pf_ro_state_parse(const char *s)
{
	for (size_t i = 0; i < PF_ARRAY_SIZE(pf_ro_state_names); i++)
		if (strcmp(s, pf_ro_state_names[i]) == 0)
			return (int)i;
	return -1;
}

int pf_ra_state_parse(const char *s)
{
	for (size_t i = 0; i < PF_ARRAY_SIZE(ra_state_names); i++)
		if (strcmp(s, ra_state_names[i]) == 0)
			return (int)i;
	return -1;
}

/* Sets the forward state (st >= 0) or the rollback state (rv >= 0) and, when given, the
 * error (a rollback error does not replace the forward one). */
static void agent_set(struct ro_agent *a, int st, int rv, const char *error)
{
	if (st >= 0 && a->state != st) {
		a->state = (uint8_t)st;
		a->dirty = true;
	}
	if (rv >= 0 && a->revert != rv) {
		a->revert = (uint8_t)rv;
		a->dirty = true;
	}
	if (error && *error && (st >= 0 || !a->error)) {
		free(a->error);
		a->error = strdup(error);
		a->dirty = true;
	}
}

/* A loaded version of the config (loaded from the store when needed), or NULL. */
struct pf_cfg_slot *pf_ro_version_slot(struct pf_rollouts *rs, const char *config, int64_t version)
{
	struct pf_cfg_slot *v = pf_fleet_config_version(rs->fleet, config, version);
	if (v)
		return v;
	struct pf_config_version cv;
	if (pf_store_config_get(rs->store, config, version, &cv) < 0)
		return NULL;
	v = pf_fleet_config_add(rs->fleet, cv.name, cv.version, cv.hash, cv.body, cv.body_len,
				cv.created_ms, false);
	pf_config_version_release(&cv);
	return v;
}

struct batch_count {
	size_t agents, applied, failed, offline, pending, reverted;
};

static void count_batch(const struct rollout *r, uint32_t b, struct batch_count *c)
{
	memset(c, 0, sizeof(*c));
	for (uint32_t i = r->first[b]; i < r->first[b + 1]; i++) {
		c->agents++;
		switch (r->agents[i].state) {
		case RA_APPLIED:
			c->applied++;
			break;
		case RA_FAILED:
			c->failed++;
			break;
		case RA_OFFLINE:
			c->offline++;
			break;
		default:
			c->pending++;
		}
		c->reverted += r->agents[i].revert == RV_REVERTED;
	}
}

/* ---------------------------------------------------------------- persistence */

/* Per-batch progress (docs/api.md "Rollouts"), with each batch's first errors or not. */
json_t *pf_ro_batches_json(const struct rollout *r, bool with_errors)
{
	json_t *batches = json_array();
	for (uint32_t b = 0; batches && b < r->n_batches; b++) {
		struct batch_count c;
		count_batch(r, b, &c);
		const char *st = b < r->batch		       ? "done"
				 : b == r->batch && r->started ? "in_progress"
							       : "waiting";
		json_t *o = json_pack(
		    "{s:I,s:s,s:I,s:I,s:I,s:I,s:I,s:I}", "number", (json_int_t)b + 1, "state", st,
		    "agents", (json_int_t)c.agents, "applied", (json_int_t)c.applied, "failed",
		    (json_int_t)c.failed, "offline", (json_int_t)c.offline, "pending",
		    (json_int_t)c.pending, "reverted", (json_int_t)c.reverted);
		if (o && with_errors) {
			json_t *errs = json_array();
			for (uint32_t i = r->first[b];
			     errs && i < r->first[b + 1] &&
			     json_array_size(errs) < PF_ROLLOUT_MAX_ERRORS;
			     i++) {
				if (!r->agents[i].error)
					continue;
				char u[PF_UUID_STR_LEN + 1];
				pf_uuid_format(r->agents[i].uid, u);
				json_array_append_new(errs, json_pack("{s:s,s:s}", "agent", u,
								      "error", r->agents[i].error));
			}
			json_object_set_new(o, "errors", errs ? errs : json_array());
		}
		json_array_append_new(batches, o);
	}
	return batches ? batches : json_array();
}

static json_t *progress_json(const struct rollout *r)
{
	return json_pack("{s:I,s:b,s:I,s:I,s:s,s:o}", "batch", (json_int_t)r->batch, "started",
			 r->started, "batch_started", (json_int_t)r->batch_started_ms, "next_batch",
			 (json_int_t)r->next_batch_ms, "reason", r->reason, "batches",
			 pf_ro_batches_json(r, false));
}

static char *spec_text(const struct rollout *r)
{
	json_t *o =
	    json_pack("{s:s,s:I,s:s,s:o}", "config", r->config, "version", (json_int_t)r->version,
		      "selector", r->selector, "strategy", pf_ro_strategy_json(&r->strategy));
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return s;
}

/* Writes the rollout row, its dirty agents (all with all_agents) and the pins given. */
static int save(struct pf_rollouts *rs, struct rollout *r, bool all_agents,
		const struct pf_pin_row *pins, size_t n_pins)
{
	char *spec = spec_text(r);
	json_t *pj = progress_json(r);
	char *progress = pj ? json_dumps(pj, JSON_COMPACT) : NULL;
	json_decref(pj);
	size_t n = 0;
	struct pf_rollout_agent_row *rows = malloc((r->n ? r->n : 1) * sizeof(*rows));
	int rc = -ENOMEM;
	if (spec && progress && rows) {
		for (size_t i = 0; i < r->n; i++) {
			struct ro_agent *a = &r->agents[i];
			if (!all_agents && !a->dirty)
				continue;
			rows[n] = (struct pf_rollout_agent_row){
			    .rollout = r->id,
			    .batch = a->batch,
			    .from_version = a->from_version,
			    .state = ra_state_names[a->state],
			    .revert = pf_rv_state_names[a->revert],
			    .error = a->error ? a->error : "",
			    .updated_ms = r->updated_ms,
			};
			memcpy(rows[n].uid, a->uid, 16);
			n++;
		}
		struct pf_rollout_row row = {
		    .id = r->id,
		    .config = r->config,
		    .version = r->version,
		    .state = pf_ro_state_names[r->state],
		    .created_ms = r->created_ms,
		    .updated_ms = r->updated_ms,
		    .created_by = r->created_by,
		    .spec_json = spec,
		    .progress_json = progress,
		};
		rc = pf_store_rollout_save(rs->store, &row, rows, n, pins, n_pins);
	}
	if (rc == 0) {
		r->dirty = false;
		for (size_t i = 0; i < r->n; i++)
			r->agents[i].dirty = false;
	} else {
		pf_log_warn("rollout %s: store write failed: %s", r->id,
			    rc == -ENOMEM ? "out of memory" : pf_store_last_error(rs->store));
	}
	free(rows);
	free(spec);
	free(progress);
	return rc;
}

/* Pins agents [lo, hi) of r that pass `want` to a version (forward: r->version, they become
 * applying; else each agent's from_version, they become reverting), stores that, then
 * re-resolves and pushes. */
static int pin_range(struct pf_rollouts *rs, struct rollout *r, uint32_t lo, uint32_t hi,
		     bool (*want)(const struct ro_agent *a), bool to_target, int64_t now_ms)
{
	struct pf_pin_row *pins = calloc((size_t)(hi - lo) + 1, sizeof(*pins));
	struct pf_cfg_slot **slots = malloc(((size_t)(hi - lo) + 1) * sizeof(*slots));
	if (!pins || !slots) {
		free(pins);
		free(slots);
		return -ENOMEM;
	}
	size_t n = 0;
	for (uint32_t i = lo; i < hi; i++) {
		struct ro_agent *a = &r->agents[i];
		if (!want(a))
			continue;
		int64_t v = to_target ? r->version : a->from_version;
		struct pf_cfg_slot *slot = pf_ro_version_slot(rs, r->config, v);
		if (!slot) {
			/* The old version is gone from the store: unpin (served version). */
			v = 0;
		}
		memcpy(pins[n].uid, a->uid, 16);
		pins[n].config = r->config;
		pins[n].version = v;
		slots[n] = slot;
		agent_set(a, to_target ? RA_APPLYING : -1, to_target ? -1 : RV_REVERTING, NULL);
		n++;
	}
	r->updated_ms = now_ms;
	int rc = save(rs, r, false, pins, n);
	if (rc == 0) {
		for (size_t k = 0; k < n; k++) {
			struct pf_agent *fa = pf_fleet_find(rs->fleet, pins[k].uid);
			if (!fa)
				continue;
			pf_agent_set_pin(rs->fleet, fa, slots[k]);
			pf_fleet_push_if_needed(rs->fleet, fa);
		}
	}
	free(pins);
	free(slots);
	return rc;
}

static bool want_all(const struct ro_agent *a)
{
	(void)a;
	return true;
}

static bool want_moved(const struct ro_agent *a)
{
	return a->state != RA_WAITING && a->revert == RV_NONE;
}

static void ro_remove(struct pf_rollouts *rs, struct rollout *r)
{
	for (size_t i = 0; i < rs->n_active; i++) {
		if (rs->active[i] == r) {
			rs->active[i] = rs->active[--rs->n_active];
			break;
		}
	}
	pf_store_rollout_unlock(rs->store, r->id);
	pf_ro_free(r);
}

/* Drops the pins of `config` to `version` (now what unpinned agents get anyway). */
static void drop_pins_to(struct pf_rollouts *rs, const char *config, int64_t version)
{
	if (pf_store_pins_clear(rs->store, config, version) < 0) {
		pf_log_warn("rollouts: clearing pins of %s v%lld failed: %s", config,
			    (long long)version, pf_store_last_error(rs->store));
		return;
	}
	pf_fleet_unpin_config(rs->fleet, config, version);
}

/* ---------------------------------------------------------------- transitions */

static int start_batch(struct pf_rollouts *rs, struct rollout *r, int64_t now_ms)
{
	r->started = true;
	r->next_batch_ms = 0;
	r->batch_started_ms = now_ms;
	r->dirty = true;
	pf_log_info("rollout %s: batch %u of %u (%u agents) to %s v%lld", r->id, r->batch + 1,
		    r->n_batches, r->first[r->batch + 1] - r->first[r->batch], r->config,
		    (long long)r->version);
	return pin_range(rs, r, r->first[r->batch], r->first[r->batch + 1], want_all, true, now_ms);
}

static void complete(struct pf_rollouts *rs, struct rollout *r, int64_t now_ms)
{
	struct pf_cfg_slot *v = pf_ro_version_slot(rs, r->config, r->version);
	if (!v || pf_store_config_serving_set(rs->store, r->config, r->version) < 0) {
		pf_log_warn("rollout %s: cannot make v%lld the served version: %s", r->id,
			    (long long)r->version, pf_store_last_error(rs->store));
		return; /* tried again on the next tick */
	}
	pf_fleet_config_add(rs->fleet, v->name, v->version, v->hash, v->body, v->body_len,
			    v->created_ms, true);
	r->state = RO_COMPLETED;
	r->updated_ms = now_ms;
	save(rs, r, false, NULL, 0);
	drop_pins_to(rs, r->config, r->version);
	/* Agents that joined the config during the rollout get the version now. */
	pf_fleet_reconcile(rs->fleet);
	pf_log_info("rollout %s: completed, %s v%lld is served", r->id, r->config,
		    (long long)r->version);
}

static int begin_rollback(struct pf_rollouts *rs, struct rollout *r, int64_t now_ms)
{
	r->state = RO_ROLLING_BACK;
	r->batch_started_ms = now_ms;
	r->next_batch_ms = 0;
	r->dirty = true;
	pf_log_info("rollout %s: rolling back", r->id);
	return pin_range(rs, r, 0, (uint32_t)r->n, want_moved, false, now_ms);
}

static void halt(struct pf_rollouts *rs, struct rollout *r, const struct batch_count *c,
		 int64_t now_ms)
{
	snprintf(r->reason, sizeof(r->reason),
		 "batch %u: %zu of %zu agents failed (over max_failure_percent %u)", r->batch + 1,
		 c->failed, c->agents - c->offline, r->strategy.max_failure_percent);
	pf_log_warn("rollout %s: halted: %s", r->id, r->reason);
	r->state = RO_HALTED;
	r->updated_ms = now_ms;
	r->dirty = true;
	if (r->strategy.on_failure == PF_ROLLOUT_ROLLBACK)
		begin_rollback(rs, r, now_ms);
	else
		save(rs, r, false, NULL, 0);
}

/* The current batch is over (or accepted by resume): the next one, or the end. */
static void batch_done(struct pf_rollouts *rs, struct rollout *r, int64_t now_ms)
{
	r->batch++;
	r->started = false;
	r->dirty = true;
	if (r->batch >= r->n_batches) {
		complete(rs, r, now_ms);
		return;
	}
	r->next_batch_ms = now_ms + (int64_t)r->strategy.pause_seconds * 1000;
	if (r->strategy.pause_seconds == 0)
		start_batch(rs, r, now_ms);
}

/* Looks at the agents of the current batch (or, rolling back, at every reverting agent). */
static void evaluate(struct pf_rollouts *rs, struct rollout *r, int64_t now_ms)
{
	bool reverting = r->state == RO_ROLLING_BACK;
	uint32_t lo = reverting ? 0 : r->first[r->batch];
	uint32_t hi = reverting ? (uint32_t)r->n : r->first[r->batch + 1];
	bool timed_out =
	    now_ms - r->batch_started_ms >= (int64_t)r->strategy.apply_timeout_seconds * 1000;
	struct pf_cfg_slot *target = pf_fleet_config_version(rs->fleet, r->config, r->version);
	size_t open = 0;

	for (uint32_t i = lo; i < hi; i++) {
		struct ro_agent *a = &r->agents[i];
		if (reverting ? a->revert != RV_REVERTING : a->state != RA_APPLYING)
			continue;
		struct pf_agent *fa = pf_fleet_find(rs->fleet, a->uid);
		const struct pf_cfg_slot *want = reverting ? (fa ? fa->desired : NULL) : target;
		bool reported = fa && want && fa->has_reported_hash &&
				memcmp(fa->reported_hash, want->hash, 32) == 0;
		int fwd = reverting ? -1 : RA_FAILED, back = reverting ? RV_FAILED : -1;
		if (reported && fa->remote_status == PF_RCS_APPLIED) {
			agent_set(a, reverting ? -1 : RA_APPLIED, reverting ? RV_REVERTED : -1,
				  NULL);
		} else if (reported && fa->remote_status == PF_RCS_FAILED) {
			agent_set(a, fwd, back,
				  fa->remote_error ? fa->remote_error : "FAILED without a message");
		} else if (timed_out && (!fa || !pf_agent_online(fa))) {
			agent_set(a, reverting ? -1 : RA_OFFLINE, back,
				  reverting ? "offline: the old version is pinned for its next "
					      "connection"
					    : NULL);
		} else if (timed_out) {
			char msg[128];
			snprintf(msg, sizeof(msg), "not %s within %u s",
				 reverting ? "back on its old version" : "applied",
				 r->strategy.apply_timeout_seconds);
			agent_set(a, fwd, back, msg);
		} else {
			open++;
		}
	}
	if (reverting) {
		if (!open) {
			r->state = RO_ROLLED_BACK;
			r->updated_ms = now_ms;
			r->dirty = true;
			save(rs, r, false, NULL, 0);
			struct pf_cfg_slot *served = pf_fleet_config_find(rs->fleet, r->config);
			if (served)
				drop_pins_to(rs, r->config, served->version);
			pf_log_info("rollout %s: rolled back", r->id);
		}
		return;
	}
	struct batch_count c;
	count_batch(r, r->batch, &c);
	uint64_t pct = r->strategy.max_failure_percent;
	/* Over the threshold now, or sure to end over it whatever the rest do. */
	if ((uint64_t)c.failed * 100 > pct * (c.agents - c.offline)) {
		if (!open || (uint64_t)c.failed * 100 > pct * c.agents) {
			halt(rs, r, &c, now_ms);
			return;
		}
	}
	if (!open)
		batch_done(rs, r, now_ms);
}

/* ---------------------------------------------------------------- lifecycle */

struct pf_rollouts *pf_rollouts_new(struct pf_fleet *f, struct pf_store *st)
{
	struct pf_rollouts *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->fleet = f;
	r->store = st;
	return r;
}

void pf_rollouts_free(struct pf_rollouts *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_active; i++)
		pf_ro_free(r->active[i]);
	free(r);
}

size_t pf_rollouts_active(const struct pf_rollouts *r)
{
	return r->n_active;
}

const char *pf_rollouts_active_for(const struct pf_rollouts *r, const char *config)
{
	for (size_t i = 0; i < r->n_active; i++)
		if (strcmp(r->active[i]->config, config) == 0)
			return r->active[i]->id;
	return NULL;
}

bool pf_rollouts_drives(struct pf_rollouts *r, const char *id)
{
	return r && id && pf_ro_find_active(r, id) != NULL;
}

struct rollout *pf_ro_find_active(struct pf_rollouts *rs, const char *id)
{
	for (size_t i = 0; i < rs->n_active; i++)
		if (strcmp(rs->active[i]->id, id) == 0)
			return rs->active[i];
	return NULL;
}

int pf_ro_agent_order(const void *pa, const void *pb)
{
	const struct ro_agent *a = pa, *b = pb;
	if (a->batch != b->batch)
		return a->batch < b->batch ? -1 : 1;
	return memcmp(a->uid, b->uid, 16);
}

/* Batch boundaries from the agents' batch numbers (agents sorted by batch). */
int pf_ro_index_batches(struct rollout *r)
{
	r->n_batches = r->n ? r->agents[r->n - 1].batch + 1 : 0;
	r->first = calloc((size_t)r->n_batches + 1, sizeof(*r->first));
	if (!r->first)
		return -ENOMEM;
	size_t i = 0;
	for (uint32_t b = 0; b <= r->n_batches; b++) {
		while (i < r->n && r->agents[i].batch < b)
			i++;
		r->first[b] = (uint32_t)i;
	}
	return 0;
}

static const char *attr_lookup(const char *key, void *ud)
{
	return pf_agent_attr(ud, key);
}

struct active_cfg {
	const char *config;
	char id[PF_ROLLOUT_ID_MAX + 1];
};

static int active_cfg_cb(const struct pf_rollout_row *row, void *ud)
{
	struct active_cfg *c = ud;
	if (strcmp(row->config, c->config) != 0)
		return 0;
	snprintf(c->id, sizeof(c->id), "%s", row->id);
	return 1;
}

int pf_rollouts_find_active(struct pf_rollouts *rs, const char *config,
			    char id[PF_ROLLOUT_ID_MAX + 1], bool *elsewhere)
{
	const char *here = pf_rollouts_active_for(rs, config);
	*elsewhere = false;
	if (here) {
		snprintf(id, PF_ROLLOUT_ID_MAX + 1, "%s", here);
		return 1;
	}
	/* Replicas sharing PostgreSQL: one driven by another replica counts too (on a store of
	 * one's own every active rollout is driven here, and the store says the same). */
	struct active_cfg other = {.config = config};
	int rc = pf_store_rollouts_foreach(rs->store, true, NULL, 0, active_cfg_cb, &other);
	if (rc < 0)
		return rc;
	if (rc != 1)
		return 0;
	snprintf(id, PF_ROLLOUT_ID_MAX + 1, "%s", other.id);
	*elsewhere = true;
	return 1;
}

int pf_rollouts_create(struct pf_rollouts *rs, const char *config, int64_t version,
		       const char *selector, const struct pf_rollout_strategy *s,
		       const char *created_by, int64_t now_ms, char id[PF_ROLLOUT_ID_MAX + 1],
		       size_t *matched, struct pf_error *err)
{
	if (strlen(config) >= sizeof(((struct rollout *)0)->config))
		return pf_error_set(err, -EINVAL, "config", "longer than 127 bytes");
	if (selector && strlen(selector) >= sizeof(((struct rollout *)0)->selector))
		return pf_error_set(err, -EINVAL, "selector", "longer than 1023 bytes");
	char active[PF_ROLLOUT_ID_MAX + 1];
	bool elsewhere;
	int rc = pf_rollouts_find_active(rs, config, active, &elsewhere);
	if (rc < 0)
		return pf_error_set(err, -EIO, NULL, "%s", pf_store_last_error(rs->store));
	if (rc == 1)
		return pf_error_set(err, -EEXIST, "config", "rollout %s of '%s' is active%s", active,
				    config, elsewhere ? " (driven by another replica)" : "");
	if (rs->n_active >= PF_ROLLOUTS_MAX_ACTIVE)
		return pf_error_set(err, -ENOSPC, NULL, "%d rollouts are active already",
				    PF_ROLLOUTS_MAX_ACTIVE);
	struct pf_config_version cv;
	rc = pf_store_config_get(rs->store, config, version, &cv);
	if (rc == -ENOENT)
		return version ? pf_error_set(err, -EINVAL, "version",
					      "config '%s' has no version %lld", config,
					      (long long)version)
			       : pf_error_set(err, -EINVAL, "config", "no config '%s'", config);
	if (rc < 0)
		return pf_error_set(err, -EIO, NULL, "%s", pf_store_last_error(rs->store));
	version = cv.version;
	pf_config_version_release(&cv);
	if (!pf_ro_version_slot(rs, config, version))
		return pf_error_set(err, -ENOMEM, NULL, "cannot load %s v%lld", config,
				    (long long)version);

	struct pf_selector *sel = NULL;
	if (selector && *selector) {
		struct pf_error serr = {0};
		sel = pf_selector_compile(selector, &serr);
		if (!sel) {
			/* The selector's message already names it ("selector: ..."). */
			if (err && !err->code) {
				*err = serr;
				snprintf(err->path, sizeof(err->path), "selector");
			}
			return -EINVAL;
		}
	}
	struct rollout *r = calloc(1, sizeof(*r));
	size_t cap = pf_fleet_count(rs->fleet);
	if (r)
		r->agents = calloc(cap ? cap : 1, sizeof(*r->agents));
	if (!r || !r->agents) {
		pf_selector_free(sel);
		pf_ro_free(r);
		return pf_error_set(err, -ENOMEM, NULL, "out of memory");
	}
	size_t it = 0, already = 0;
	struct pf_agent *a;
	while ((a = pf_fleet_next(rs->fleet, &it))) {
		if (!a->desired || strcmp(a->desired->name, config) != 0)
			continue;
		if (sel && !pf_selector_match(sel, attr_lookup, a))
			continue;
		if (a->desired->version == version) {
			already++;
			continue;
		}
		struct ro_agent *ra = &r->agents[r->n++];
		memcpy(ra->uid, a->uid, 16);
		ra->from_version = a->desired->version;
		ra->batch = pf_agent_online(a) ? 0 : 1; /* here or at another replica */
	}
	pf_selector_free(sel);
	if (!r->n) {
		pf_ro_free(r);
		if (already)
			return pf_error_set(err, -EALREADY, "version",
					    "all %zu matching agents already have %s v%lld",
					    already, config, (long long)version);
		return pf_error_set(err, -ENOENT, "selector", "no agent has config '%s'%s%s",
				    config, selector && *selector ? " and matches " : "",
				    selector && *selector ? selector : "");
	}
	if (r->n > PF_ROLLOUTS_MAX_AGENTS) {
		size_t n = r->n;
		pf_ro_free(r);
		return pf_error_set(err, -E2BIG, "selector", "%zu agents match, at most %d", n,
				    PF_ROLLOUTS_MAX_AGENTS);
	}
	/* batch holds 0 for connected agents, 1 for the others, until the plan is applied */
	qsort(r->agents, r->n, sizeof(*r->agents), pf_ro_agent_order);
	/* Batch numbers follow the plan over that order. */
	size_t nb = pf_rollout_plan(s, r->n, NULL, 0);
	uint32_t *sizes = malloc(nb * sizeof(*sizes));
	if (!sizes) {
		pf_ro_free(r);
		return pf_error_set(err, -ENOMEM, NULL, "out of memory");
	}
	pf_rollout_plan(s, r->n, sizes, nb);
	for (size_t i = 0, b = 0, in_batch = 0; i < r->n; i++) {
		r->agents[i].batch = (uint32_t)b;
		if (++in_batch == sizes[b]) {
			b++;
			in_batch = 0;
		}
	}
	free(sizes);
	qsort(r->agents, r->n, sizeof(*r->agents), pf_ro_agent_order);
	if (pf_ro_index_batches(r) < 0) {
		pf_ro_free(r);
		return pf_error_set(err, -ENOMEM, NULL, "out of memory");
	}
	uint8_t uid[16];
	rc = pf_uuid_v7(uid);
	if (rc < 0) {
		pf_ro_free(r);
		return pf_error_set(err, rc, NULL, "cannot make a rollout id");
	}
	pf_uuid_format(uid, r->id);
	snprintf(r->config, sizeof(r->config), "%s", config);
	snprintf(r->selector, sizeof(r->selector), "%s", selector ? selector : "");
	snprintf(r->created_by, sizeof(r->created_by), "%s", created_by ? created_by : "");
	r->version = version;
	r->strategy = *s;
	r->state = RO_RUNNING;
	r->created_ms = r->updated_ms = now_ms;
	for (size_t i = 0; i < r->n; i++)
		r->agents[i].dirty = true;
	/* Replicas sharing PostgreSQL: this one drives the rollout; the lock is taken before the
	 * row exists, so a replica notified of the row never finds it free. */
	bool owned = false;
	rc = pf_store_rollout_lock(rs->store, r->id, &owned);
	if (rc < 0 || !owned) {
		pf_ro_free(r);
		return pf_error_set(err, rc < 0 ? rc : -EBUSY, NULL, "%s",
				    rc < 0 ? pf_store_last_error(rs->store)
					   : "the new rollout's lock is taken");
	}
	rc = save(rs, r, true, NULL, 0);
	if (rc < 0) {
		pf_store_rollout_unlock(rs->store, r->id);
		pf_ro_free(r);
		return pf_error_set(err, -EIO, NULL, "%s", pf_store_last_error(rs->store));
	}
	rs->active[rs->n_active++] = r;
	memcpy(id, r->id, sizeof(r->id));
	if (matched)
		*matched = r->n;
	start_batch(rs, r, now_ms);
	return 0;
}

int pf_rollouts_action(struct pf_rollouts *rs, const char *id, enum pf_rollout_action act,
		       int64_t now_ms, struct pf_error *err)
{
	static const char *const act_names[] = {"pause", "resume", "rollback", "cancel"};
	struct rollout *r = pf_ro_find_active(rs, id);
	if (!r)
		return pf_error_set(err, -ENOENT, NULL, "no active rollout %s", id);
	enum ro_state st = r->state;
	bool ok = false;
	switch (act) {
	case PF_ROLLOUT_PAUSE:
		ok = st == RO_RUNNING;
		break;
	case PF_ROLLOUT_RESUME:
		ok = st == RO_PAUSED || st == RO_HALTED;
		break;
	case PF_ROLLOUT_DO_ROLLBACK:
	case PF_ROLLOUT_CANCEL:
		ok = st == RO_RUNNING || st == RO_PAUSED || st == RO_HALTED;
		break;
	}
	if (!ok)
		return pf_error_set(err, -EALREADY, NULL, "cannot %s a rollout that is %s",
				    act_names[act], pf_ro_state_names[st]);
	r->updated_ms = now_ms;
	r->dirty = true;
	int rc = 0;
	switch (act) {
	case PF_ROLLOUT_PAUSE:
		r->state = RO_PAUSED;
		rc = save(rs, r, false, NULL, 0);
		break;
	case PF_ROLLOUT_RESUME:
		r->state = RO_RUNNING;
		if (st == RO_HALTED) {
			r->reason[0] = 0;
			batch_done(rs, r, now_ms);
		} else if (r->started) {
			r->batch_started_ms = now_ms; /* a fresh apply timeout */
		} else {
			r->next_batch_ms = now_ms; /* the operator said go: the next batch now */
		}
		rc = r->dirty ? save(rs, r, false, NULL, 0) : 0;
		break;
	case PF_ROLLOUT_DO_ROLLBACK:
		snprintf(r->reason, sizeof(r->reason), "rolled back by an operator");
		rc = begin_rollback(rs, r, now_ms);
		break;
	case PF_ROLLOUT_CANCEL:
		r->state = RO_CANCELLED;
		snprintf(r->reason, sizeof(r->reason), "cancelled by an operator");
		rc = save(rs, r, false, NULL, 0);
		break;
	}
	if (rc < 0)
		return pf_error_set(err, -EIO, NULL, "%s", pf_store_last_error(rs->store));
	if (!ro_active(r->state))
		ro_remove(rs, r);
	return 0;
}

void pf_rollouts_tick(struct pf_rollouts *rs, int64_t now_ms)
{
	for (size_t i = 0; i < rs->n_active;) {
		struct rollout *r = rs->active[i];
		if (r->state == RO_RUNNING && r->batch >= r->n_batches)
			complete(rs, r, now_ms); /* its store write failed last time */
		else if (r->state == RO_RUNNING && !r->started && r->next_batch_ms &&
			 now_ms >= r->next_batch_ms)
			start_batch(rs, r, now_ms);
		else if ((r->state == RO_RUNNING && r->started) || r->state == RO_ROLLING_BACK)
			evaluate(rs, r, now_ms);
		bool dirty = r->dirty;
		for (size_t k = 0; !dirty && k < r->n; k++)
			dirty = r->agents[k].dirty;
		if (dirty) {
			r->updated_ms = now_ms;
			save(rs, r, false, NULL, 0);
		}
		if (!ro_active(r->state) && !r->dirty) {
			ro_remove(rs, r);
			continue;
		}
		i++;
	}
}

int pf_rollouts_flush(struct pf_rollouts *rs)
{
	int rc = 0;
	for (size_t i = 0; i < rs->n_active; i++) {
		int r = save(rs, rs->active[i], false, NULL, 0);
		if (r < 0)
			rc = r;
	}
	return rc;
}

