/* sync.h — keeping this replica's in-memory fleet current with changes other controller
 * replicas commit to the shared PostgreSQL store (docs/internals/store.md "NOTIFY").
 *
 * The server watches a pf_store_listener on its loop and hands every notification to
 * pf_sync_apply(), which re-reads the changed object from the store into the fleet and
 * pushes to this replica's connected agents through the normal path (pf_fleet_reconcile()
 * and the push hook). Nothing here blocks beyond the store calls' statement timeout.
 *
 * Not thread-safe: the loop thread owns it, like the fleet. */
#ifndef PF_FLEET_SYNC_H
#define PF_FLEET_SYNC_H

#include <stddef.h>
#include <stdint.h>

struct pf_store;
struct pf_fleet;
struct pf_rollouts;
struct pf_captures;
struct pf_agent_row;

struct pf_sync {
	struct pf_store *store;
	struct pf_fleet *fleet;
	struct pf_rollouts *rollouts; /* may be NULL */
	struct pf_captures *captures; /* may be NULL */
	/* A token was revoked (or created) elsewhere: close the connections that used it. */
	void (*on_token)(const char *token_id, void *ud);
	void *ud;
	/* Counters for /metrics and tests. */
	size_t applied, failed, pushed;
};

/* One notification: kind "config", "assignment", "token", "rollout" or "capture" and the
 * object's name or id. Unknown kinds are ignored. 0 or the store's negative errno. */
int pf_sync_apply(struct pf_sync *s, const char *kind, const char *name, int64_t now_ms);
/* Everything again (after the listening connection was lost: changes may have been missed),
 * after re-taking the locks of the rollouts this replica drives (pf_rollouts_relock). */
int pf_sync_reload_all(struct pf_sync *s, int64_t now_ms);

/* One stored agent row into the fleet (at start, and for agents of other replicas): the
 * agent is created when unknown; its `elsewhere` bit follows the row's connected column. */
int pf_sync_load_agent(struct pf_fleet *f, const struct pf_agent_row *row);
/* The API on a shared store shows the whole fleet: every stored row of an agent that is not
 * this replica's own and was written since *cursor_ms (0: all; advanced here, see
 * pf_store_agents_foreach_since) is loaded over its copy. */
int pf_sync_refresh_agents(struct pf_store *st, struct pf_fleet *f, int64_t *cursor_ms);
/* The same for one agent: -ENOENT when the store has no row. */
int pf_sync_refresh_agent(struct pf_store *st, struct pf_fleet *f, const uint8_t uid[16]);

#endif
