/* rollout.h — staged config rollouts: the state machine behind /api/v1/rollouts
 * (docs/rollouts.md explains it to users, docs/api.md shows the REST view).
 *
 * A rollout moves the agents whose desired config is `config` (and, optionally, that a label
 * selector matches) from the version each has to `version`, one batch at a time. The agents
 * are fixed at creation (connected ones first, then by instance uid) and cut into batches:
 * initial, then ×multiplier, each capped at max_batch_percent of them. Starting a batch pins
 * its agents to the new version (fleet.h pf_agent_set_pin) and pushes it. An agent of the
 * batch is applied when it reports APPLIED for the new hash, failed when it reports FAILED or
 * is connected and has not applied it apply_timeout_seconds after the batch started, offline
 * when it is not connected then (offline agents do not count in the failure share and get the
 * version when they connect: their pin says so). When the batch's failure share (failed /
 * (agents - offline)) is over max_failure_percent — or is sure to end over it — the rollout
 * halts; with on_failure "rollback" every agent already moved is pinned back to the version
 * it had and the rollout ends rolled_back once they applied it (or the timeout passed).
 * Otherwise the next batch starts pause_seconds after the last one ended; after the last
 * batch the version becomes the config's served version, the rollout's pins are dropped and
 * the state is completed.
 *
 *   running -> paused -> running          pause / resume
 *   running|paused -> halted              the failure share (on_failure halt)
 *   halted -> running                     resume: accepts the failures, goes on
 *   running|paused|halted -> rolling_back -> rolled_back    rollback (or on_failure)
 *   running|paused|halted -> cancelled    cancel: stops; moved agents keep the new version
 *   running -> completed
 *
 * At most PF_ROLLOUTS_MAX_ACTIVE rollouts are active (running, paused, halted, rolling_back)
 * and at most one per config. Durability: creation and every batch start, halt, rollback and
 * end are written to the store (with the pins they set) before the agents are pushed; agent
 * results are written by pf_rollouts_tick(). After a kill -9, pf_rollouts_load() brings the
 * active rollouts back where they were; the current batch's apply timeout starts again.
 *
 * Not thread-safe: the event-loop thread owns it, like the fleet. */
#ifndef PF_FLEET_ROLLOUT_H
#define PF_FLEET_ROLLOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"

struct pf_fleet;
struct pf_store;
struct json_t;

#define PF_ROLLOUTS_MAX_ACTIVE 16     /* active rollouts at once (409 past it) */
#define PF_ROLLOUTS_MAX_AGENTS 100000 /* agents one rollout may move (422 past it) */
#define PF_ROLLOUT_MAX_ERRORS 20      /* errors listed per batch */
#define PF_ROLLOUT_ID_MAX 36

enum pf_rollout_on_failure { PF_ROLLOUT_HALT, PF_ROLLOUT_ROLLBACK };

/* The strategy with its documented defaults (pf_rollout_strategy_defaults). */
struct pf_rollout_strategy {
	uint32_t initial;		       /* 1..100000, default 3 */
	uint32_t multiplier;		       /* 1..100, default 5 */
	uint32_t max_batch_percent;	       /* 1..100, default 100 */
	uint32_t pause_seconds;		       /* 0..86400, default 5 */
	uint32_t max_failure_percent;	       /* 0..100, default 5 */
	uint32_t apply_timeout_seconds;	       /* 1..3600, default 60 */
	enum pf_rollout_on_failure on_failure; /* default halt */
};

void pf_rollout_strategy_defaults(struct pf_rollout_strategy *s);
/* Reads a "strategy" JSON object over the defaults: unknown keys, wrong types and values out
 * of range are -EINVAL with err->path "strategy.<key>". */
int pf_rollout_strategy_parse(const struct json_t *o, struct pf_rollout_strategy *s,
			      struct pf_error *err);
/* Batch sizes for n agents: fills sizes (at most max entries) and returns the number of
 * batches (which may exceed max: then only the first max are written). */
size_t pf_rollout_plan(const struct pf_rollout_strategy *s, size_t n, uint32_t *sizes, size_t max);

struct pf_rollouts;

struct pf_rollouts *pf_rollouts_new(struct pf_fleet *f, struct pf_store *st);
void pf_rollouts_free(struct pf_rollouts *r);
/* At start, after the fleet (and its pins, pf_rollouts_load_pins) is loaded: brings the
 * active rollouts back. With replicas sharing PostgreSQL, only those whose lock this replica
 * gets (pf_store_rollout_lock); called again later it adopts the active rollouts nobody
 * holds any more (their replica died) and skips the ones it already drives. */
int pf_rollouts_load(struct pf_rollouts *r, int64_t now_ms, struct pf_error *err);
/* After the shared database was unreachable (the session's locks may be gone): takes the lock
 * of every rollout this replica drives again and forgets those another replica took over
 * meanwhile. Returns how many were dropped. */
size_t pf_rollouts_relock(struct pf_rollouts *r);
/* At start: the stored pins and served versions into the fleet (before agents connect). */
int pf_rollouts_load_pins(struct pf_store *st, struct pf_fleet *f, struct pf_error *err);
/* Replicas sharing PostgreSQL (fleet/sync.h): re-reads config `name`'s served version (the
 * latest, or its config_serving row) and its pins from the store into the fleet; name NULL:
 * every config. Does not push: the caller runs pf_fleet_reconcile(). 0 or negative errno. */
int pf_rollouts_reload_config(struct pf_store *st, struct pf_fleet *f, const char *name);

/* Creates and starts a rollout of config version `version` (0 = latest) to the agents whose
 * desired config is `config` and that `selector` (NULL or "" = all) matches. Errors (err
 * names the field): -EINVAL bad selector or version not found (path "version"), -ENOENT no
 * agent matches, -E2BIG over PF_ROLLOUTS_MAX_AGENTS, -EEXIST a rollout of that config is
 * active, -ENOSPC PF_ROLLOUTS_MAX_ACTIVE are active, -EALREADY every matched agent already
 * has that version, -EIO store. id is set on success. */
int pf_rollouts_create(struct pf_rollouts *r, const char *config, int64_t version,
		       const char *selector, const struct pf_rollout_strategy *s,
		       const char *created_by, int64_t now_ms, char id[PF_ROLLOUT_ID_MAX + 1],
		       size_t *matched, struct pf_error *err);

enum pf_rollout_action {
	PF_ROLLOUT_PAUSE,
	PF_ROLLOUT_RESUME,
	PF_ROLLOUT_DO_ROLLBACK,
	PF_ROLLOUT_CANCEL,
};
/* Applies an operator action: -ENOENT unknown or not active, -EALREADY not allowed in the
 * current state (err says which state), -EIO store. */
int pf_rollouts_action(struct pf_rollouts *r, const char *id, enum pf_rollout_action act,
		       int64_t now_ms, struct pf_error *err);
/* Whether this replica drives the active rollout id (it holds it in memory). */
bool pf_rollouts_drives(struct pf_rollouts *r, const char *id);
/* The active rollout of a config driven here, or NULL. */
const char *pf_rollouts_active_for(const struct pf_rollouts *r, const char *config);
/* The active rollout of a config, driven here or, per the store, by another replica sharing
 * it (*elsewhere): 1 with its id, 0 when there is none, or the store's negative errno. What
 * refuses a plain PUT of that config (409 rollout_active) and a second rollout of it. */
int pf_rollouts_find_active(struct pf_rollouts *r, const char *config,
			    char id[PF_ROLLOUT_ID_MAX + 1], bool *elsewhere);

/* Evaluates batches, timeouts and pauses, pushes, writes pending changes. Call periodically
 * (the server's persist tick). */
void pf_rollouts_tick(struct pf_rollouts *r, int64_t now_ms);

/* Writes pending agent results now (shutdown): 0 or the store's error. */
int pf_rollouts_flush(struct pf_rollouts *r);

/* A rollout as the API shows it (api/api_rollouts.h renders it), valid during the callback
 * it is handed to. A live one (driven here, or loaded from its rows) has its per-agent
 * figures; a finished one listed from its row only the row's summary. */
struct pf_rollout_view {
	const char *id, *config, *selector, *state, *created_by;
	const char *reason; /* "" when none */
	int64_t version, created_ms, updated_ms;
	bool live;
	/* live only */
	size_t agents;
	uint32_t current_batch, n_batches; /* current_batch 1-based; n_batches when all done */
	int64_t next_batch_ms;		   /* running, between batches; 0 otherwise */
	/* The strategy object and the per-batch progress array (docs/api.md "Rollouts"), with
	 * each batch's first errors when asked; borrowed, NULL when a stored row lacks them. */
	struct json_t *strategy, *batches;
};
/* One rollout, with per-batch errors: cb's value, -ENOENT, -ENOMEM or the store's error. */
int pf_rollouts_get(struct pf_rollouts *r, const char *id,
		    int (*cb)(const struct pf_rollout_view *v, void *ud), void *ud);
/* At most limit stored rollouts (only unfinished ones with active_only), newest first, from
 * after the id cursor (NULL: the newest); without per-batch errors. Returns as
 * pf_store_rollouts_foreach(). */
int pf_rollouts_list(struct pf_rollouts *r, bool active_only, const char *cursor, size_t limit,
		     int (*cb)(const struct pf_rollout_view *v, void *ud), void *ud);
size_t pf_rollouts_active(const struct pf_rollouts *r);

#endif
