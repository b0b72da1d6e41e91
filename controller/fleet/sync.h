/* sync.h — keeping this replica's in-memory fleet current with changes other controller
 * replicas commit to the shared PostgreSQL store (docs/internals/store.md "NOTIFY").
 *
 * Owns the LISTEN connection (struct pf_sync_listener): a pf_store_listener watched on the
 * server's event loop, re-made with backoff when the database goes away. Every notification
 * goes to pf_sync_apply(), which re-reads the changed object from the store into the fleet
 * and pushes to this replica's connected agents through the normal path (pf_fleet_reconcile()
 * and the push hook). Nothing here blocks beyond the store calls' statement timeout.
 *
 * Not thread-safe: the loop thread owns it, like the fleet. */
#ifndef PF_FLEET_SYNC_H
#define PF_FLEET_SYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"

struct pf_store;
struct pf_fleet;
struct pf_rollouts;
struct pf_captures;
struct pf_agent_row;
struct uv_loop_s;

struct pf_sync {
	struct pf_store *store;
	struct pf_fleet *fleet;
	struct pf_rollouts *rollouts; /* may be NULL */
	struct pf_captures *captures; /* may be NULL */
	/* A token was revoked (or created) elsewhere: close the connections that used it. */
	void (*on_token)(const char *token_id, void *ud);
	/* Forwarded commands (api/api_forward.h): kind "command" (one was stored: run those
	 * this replica drives), "command_done" (one was answered: id names it), or NULL (the
	 * listener's periodic pass, after adopting the rollouts of dead replicas). */
	void (*on_command)(const char *kind, const char *id, void *ud);
	void *ud;
	/* Counters for /metrics and tests. */
	size_t applied, failed, pushed;
};

/* One notification: kind "config", "assignment", "token", "rollout", "capture", "command" or
 * "command_done" and the
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

/* The LISTEN connection of a replica sharing PostgreSQL. It connects asynchronously and is
 * driven by a watcher on its socket; one loop timer bounds its connect, re-makes it with
 * backoff, reloads what an outage may have hidden (pf_sync_reload_all) and adopts rollouts
 * whose replica died (pf_rollouts_load). While it cannot reach the database, the main store
 * connection makes no reconnect attempt (pf_store_hold_reconnect), so nothing on the loop
 * waits for a connect. */
struct pf_sync_listener;
/* Starts listening on loop for store_url; sync (copied) says what the notifications update.
 * NULL with err set when out of memory. */
struct pf_sync_listener *pf_sync_listener_new(struct uv_loop_s *loop, const char *store_url,
					      const struct pf_sync *sync, struct pf_error *err);
/* Listening now. */
bool pf_sync_listener_ready(const struct pf_sync_listener *l);
/* The notifications' counters (applied, failed, pushed). */
const struct pf_sync *pf_sync_listener_sync(const struct pf_sync_listener *l);
/* The main connection is lost while the listener still looks fine (an idle connection to a
 * server that hangs, or a backend killed alone): probes with a fresh asynchronous connect;
 * once it is listening, reconnects are released. Nothing otherwise. */
void pf_sync_listener_probe(struct pf_sync_listener *l);
/* Stops its watcher and timer; the loop must run once more to close them before
 * pf_sync_listener_free(). */
void pf_sync_listener_stop(struct pf_sync_listener *l);
void pf_sync_listener_free(struct pf_sync_listener *l);

#endif
