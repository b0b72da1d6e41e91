/* fleet.h — the controller's in-memory view of the fleet: every agent ever seen (by
 * instance_uid), the latest version of every config document, and the assignments that map
 * configs onto agents through label selectors.
 *
 * All OpAMP per-message work happens here, in memory, on the event-loop thread: nothing in
 * this module touches the disk. Changes are marked dirty and drained in batches by the
 * persistence writer (fleet/persist.h), so a heartbeat never waits on a disk write.
 *
 * Config resolution: an agent's desired config is a (name, version). The name is that of the
 * highest-priority assignment whose selector matches its attributes (ties: assignment name
 * order); when none matches, the config named "default" when it exists; else none. The
 * version is the agent's pin when it has one for that name (staged rollouts pin agents,
 * fleet/rollout.h), else the name's served version (the latest, unless a finished rollout
 * made another one served). Versions are loaded once and shared by every agent that wants
 * them (struct pf_cfg_slot, one per loaded version). When a config version, an assignment or
 * a pin changes, pf_fleet_reconcile() recomputes every agent and calls the push hook for each
 * connected agent whose desired config hash changed, so the transport can send the new
 * AgentRemoteConfig at once.
 *
 * Not thread-safe: one thread (the lws loop) owns the fleet. */
#ifndef PF_FLEET_H
#define PF_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"
#include "pf/error.h"

struct pf_selector;

/* One loaded version of one named config, shared by every agent that wants it. Stable
 * address for the fleet's lifetime. */
struct pf_cfg_slot {
	char name[128];
	int64_t version;
	bool serving; /* the version unpinned agents of this name get */
	uint8_t hash[32];
	char *body;
	size_t body_len;
	int64_t created_ms;
};

enum pf_agent_transport { PF_TRANSPORT_NONE, PF_TRANSPORT_WS, PF_TRANSPORT_HTTP };
/* The credential the agent last connected with since this controller started
 * (opamp/credential.h): unknown, the shared enrollment token, the enrollment token with an
 * own credential offered, its own credential. */
enum pf_agent_credential {
	PF_CRED_UNKNOWN,
	PF_CRED_ENROLLMENT,
	PF_CRED_OFFERED,
	PF_CRED_OWN,
};

/* One agent. Owned by the fleet; transports keep a pointer while connected. */
struct pf_agent {
	/* What a heartbeat reads and writes comes first (a round trip touches few cache lines). */
	uint8_t uid[16];
	uint64_t capabilities;
	uint64_t last_seq;
	int64_t last_seen_ms;
	void *conn;		     /* transport connection while connected over WebSocket */
	struct pf_cfg_slot *desired; /* NULL: no config applies */
	uint8_t transport;    /* enum pf_agent_transport while connected */
	uint8_t remote_status; /* enum pf_remote_config_status as reported */
	uint8_t credential;    /* enum pf_agent_credential */
	bool connected : 1;
	bool seq_valid : 1;
	bool has_description : 1;
	bool has_health : 1;
	bool healthy : 1;     /* root ComponentHealth.healthy */
	bool has_reported_hash : 1;
	bool dirty : 1;       /* needs a row write soon (on the dirty list) */
	bool dirty_seen : 1;  /* last_seen changed: written by the slow sweep */
	bool capture_capable : 1; /* advertises io.profleet.capture.v1 (custom_capabilities) */
	/* Replicas sharing the store (pf_fleet_set_shared): `local` while this replica owns the
	 * agent's row (connected here, until the disconnect is written); `elsewhere` when the
	 * stored row says it is connected to another replica (fleet/sync.h loads it). */
	bool local : 1;
	bool elsewhere : 1;

	int64_t first_seen_ms;
	/* Attributes, packed "k\0v\0k\0v\0": identifying first, then non-identifying. */
	char *attrs;
	uint32_t attrs_len;
	uint16_t n_attrs;

	char *health_json;    /* the health tree as compact JSON, NULL when none */
	char *remote_error;
	uint8_t reported_hash[32]; /* last_remote_config_hash */

	struct pf_eff_config *effective; /* interned by hash, shared between agents */
	struct pf_cfg_slot *pin;         /* pinned version (applies when its name resolves) */

	uint32_t dirty_next; /* intrusive dirty list (index + 1, 0 = end) */
};

/* An effective config body shared by all agents that report the same hash. */
struct pf_eff_config {
	uint8_t hash[32];
	uint32_t refs;
	size_t len;
	char body[];
};

struct pf_fleet_options {
	uint32_t heartbeat_interval_s; /* offered to agents; stale after 3 missed */
};

enum pf_config_state { PF_CFG_UNSET, PF_CFG_APPLYING, PF_CFG_APPLIED, PF_CFG_FAILED };

struct pf_fleet_summary {
	uint64_t agents, connected, healthy, stale;
	uint64_t connected_here; /* connected to this replica (connected also counts the others') */
	uint64_t by_state[4]; /* enum pf_config_state */
};

struct pf_fleet;

struct pf_fleet *pf_fleet_new(const struct pf_fleet_options *opt);
/* Several replicas share the store: the persistence drains only write the rows of agents
 * connected to this replica (or that just disconnected from it); the others' rows belong to
 * the replica they are connected to. */
void pf_fleet_set_shared(struct pf_fleet *f, bool shared);
/* Connected here or, per the shared store, to another replica. */
static inline bool pf_agent_online(const struct pf_agent *a)
{
	return a->connected || a->elsewhere;
}
void pf_fleet_free(struct pf_fleet *f);

/* Push hook: called by pf_fleet_reconcile() for each connected agent whose desired config
 * changed. */
typedef void (*pf_fleet_push_fn)(struct pf_agent *a, void *ud);
void pf_fleet_set_push_hook(struct pf_fleet *f, pf_fleet_push_fn fn, void *ud);

/* ---- agents */
struct pf_agent *pf_fleet_find(struct pf_fleet *f, const uint8_t uid[16]);
/* Finds or creates; a new agent starts disconnected with first_seen = now_ms. NULL on ENOMEM. */
struct pf_agent *pf_fleet_get_or_add(struct pf_fleet *f, const uint8_t uid[16], int64_t now_ms);
size_t pf_fleet_count(const struct pf_fleet *f);
/* Iteration in no particular order: size_t i = 0; while ((a = pf_fleet_next(f, &i))) ... */
struct pf_agent *pf_fleet_next(struct pf_fleet *f, size_t *iter);

/* Replaces the attributes (from an AgentDescription) and re-resolves the desired config. */
int pf_agent_set_attributes(struct pf_fleet *f, struct pf_agent *a, const char *const *keys,
			    const char *const *values, size_t n);
const char *pf_agent_attr(const struct pf_agent *a, const char *key);
int pf_agent_set_health(struct pf_fleet *f, struct pf_agent *a, bool healthy, const char *json);
int pf_agent_set_effective(struct pf_fleet *f, struct pf_agent *a, const char *body, size_t len);
int pf_agent_set_remote_status(struct pf_fleet *f, struct pf_agent *a, const uint8_t *hash,
			       size_t hash_len, int status, const char *error);
void pf_agent_set_connected(struct pf_fleet *f, struct pf_agent *a, enum pf_agent_transport t,
			    void *conn, int64_t now_ms);
void pf_agent_set_disconnected(struct pf_fleet *f, struct pf_agent *a);
void pf_agent_touch(struct pf_fleet *f, struct pf_agent *a, int64_t now_ms);
void pf_agent_mark_dirty(struct pf_fleet *f, struct pf_agent *a);

/* True when the agent should be (re)sent its desired config: it accepts remote config, one
 * applies, and the hash it last reported differs (OpAMP spec: the server MUST include
 * remote_config whenever the agent's last_remote_config_hash differs). */
bool pf_agent_needs_config(const struct pf_agent *a);
enum pf_config_state pf_agent_config_state(const struct pf_agent *a);
bool pf_agent_is_stale(const struct pf_fleet *f, const struct pf_agent *a, int64_t now_ms);
bool pf_agent_is_healthy(const struct pf_fleet *f, const struct pf_agent *a, int64_t now_ms);
const char *pf_config_state_name(enum pf_config_state s);

void pf_fleet_summary(struct pf_fleet *f, int64_t now_ms, struct pf_fleet_summary *out);
uint32_t pf_fleet_heartbeat_s(const struct pf_fleet *f);

/* ---- configs and assignments (mirrors of the store, kept current by the API) */
/* Loads a version of a config (once; later calls return the loaded slot) and, with serve,
 * makes it the version unpinned agents of that name get. NULL with errno on failure. */
struct pf_cfg_slot *pf_fleet_config_add(struct pf_fleet *f, const char *name, int64_t version,
					const uint8_t hash[32], const char *body, size_t len,
					int64_t created_ms, bool serve);
/* pf_fleet_config_add(..., serve = true), the plain PUT's path: 0 or negative errno. Agents
 * follow at their next resolution (pf_fleet_reconcile(), pf_fleet_resolve_agent()). */
int pf_fleet_config_set(struct pf_fleet *f, const char *name, int64_t version,
			const uint8_t hash[32], const char *body, size_t len, int64_t created_ms);
/* The served version of a config, or NULL. */
struct pf_cfg_slot *pf_fleet_config_find(struct pf_fleet *f, const char *name);
/* A loaded version, or NULL when not loaded. */
struct pf_cfg_slot *pf_fleet_config_version(struct pf_fleet *f, const char *name,
					    int64_t version);
/* Pins the agent to a loaded version (NULL unpins) and re-resolves it; true when its desired
 * config changed. Does not push: call pf_fleet_push_if_needed() or pf_fleet_reconcile(). */
bool pf_agent_set_pin(struct pf_fleet *f, struct pf_agent *a, struct pf_cfg_slot *v);
/* Unpins every agent pinned to config `name` (version 0: any version of it, else only that
 * version). Returns how many were unpinned; does not push. */
size_t pf_fleet_unpin_config(struct pf_fleet *f, const char *name, int64_t version);
/* Calls the push hook when a is connected and needs its desired config; true when it did. */
bool pf_fleet_push_if_needed(struct pf_fleet *f, struct pf_agent *a);
/* Agents that selector matches (all agents for NULL), and of those, how many resolve to the
 * config `config` when config is not NULL (*resolving may be NULL). */
size_t pf_fleet_count_matching(struct pf_fleet *f, const struct pf_selector *sel,
			       const char *config, size_t *resolving);
/* Upserts an assignment; the selector must compile (err says why not). */
int pf_fleet_assignment_set(struct pf_fleet *f, const char *name, const char *selector,
			    const char *config, int64_t priority, struct pf_error *err);
int pf_fleet_assignment_remove(struct pf_fleet *f, const char *name); /* -ENOENT */
/* Removes every assignment keep() returns false for; how many. Does not push. */
size_t pf_fleet_assignments_retain(struct pf_fleet *f, bool (*keep)(const char *name, void *ud),
				   void *ud);
/* Recomputes every agent's desired config; pushes to connected agents whose config
 * changed. Returns how many agents were pushed to. */
size_t pf_fleet_reconcile(struct pf_fleet *f);
/* Recomputes one agent (after its attributes changed); true when the desired config changed. */
bool pf_fleet_resolve_agent(struct pf_fleet *f, struct pf_agent *a);

/* ---- dirty agents for the persistence writer. pf_fleet_drain_dirty() calls cb (full =
 * true) for each agent with a real change and clears its flags; pf_fleet_drain_seen()
 * sweeps agents whose only change is last_seen (full = false). Both return the number
 * drained. */
size_t pf_fleet_drain_dirty(struct pf_fleet *f, size_t max,
			    void (*cb)(struct pf_agent *a, bool full, void *ud), void *ud);
size_t pf_fleet_drain_seen(struct pf_fleet *f, size_t max,
			   void (*cb)(struct pf_agent *a, bool full, void *ud), void *ud);
/* How many agents wait for pf_fleet_drain_dirty() (seen = false) or are flagged for
 * pf_fleet_drain_seen() (seen = true): a bound on what the next drain returns (agents of
 * other replicas are skipped by the drains), 0 when it would return nothing. */
size_t pf_fleet_pending(const struct pf_fleet *f, bool seen);
/* Marks every agent connected here dirty, so that all their rows are written again (replicas
 * sharing the store: the others had taken this one for dead and disconnected its rows).
 * Returns how many. */
size_t pf_fleet_mark_connected_dirty(struct pf_fleet *f);

/* ---- JSON views for the API (jansson objects, caller owns the reference) */
struct json_t;
struct json_t *pf_agent_to_json(const struct pf_fleet *f, const struct pf_agent *a,
				int64_t now_ms, bool with_effective_config);
/* Attributes as a JSON object text {"k":"v",...} (for the store), appended to out. */
int pf_agent_attrs_json(const struct pf_agent *a, struct pf_buf *out);

/* Room for one more element in the array v of *cap elements of `size` bytes, n of them used:
 * v itself while n < *cap, else v grown to twice *cap (16 at first) and *cap updated; NULL
 * when out of memory (v and *cap unchanged). */
void *pf_fleet_grow(void *v, size_t *cap, size_t n, size_t size);

#endif
