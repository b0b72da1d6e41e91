/* store_pg.h — private to controller/store/: the PostgreSQL backend of the fleet tables.
 *
 * The backend interface is the fleet half of store.h itself: every fleet function there
 * (tokens, configs, assignments, agents, audit, captures, rollouts, pins, served versions)
 * starts with STORE_PG_DISPATCH(), which hands the call to the store_pg_<same name>() below
 * with the same arguments when the connection has a PostgreSQL backend attached
 * (pf_store_open_url() with a postgres:// URL), and otherwise runs the SQLite code. The
 * profile store (profiles, bodies, flame forms, links) never dispatches: it stays in the
 * replica's own SQLite file. Only store_pg.c includes libpq-fe.h.
 *
 * Every write that other replicas must see ends with pg_notify() on PF_STORE_PG_CHANNEL in
 * the same transaction ("<replica> <kind> <name>", docs/internals/store.md "NOTIFY"). */
#ifndef PF_STORE_PG_H
#define PF_STORE_PG_H

#include "store.h"

struct store_pg;

#define PF_STORE_PG_CHANNEL "profleet_fleet"

/* The backend of st, NULL when the fleet tables are in SQLite. */
struct store_pg *store_pg_of(const struct pf_store *st);

#define STORE_PG_DISPATCH(st, call)                                                                \
	do {                                                                                       \
		if ((st) && store_pg_of(st))                                                       \
			return call;                                                               \
	} while (0)

/* Connects (connect_timeout, statement_timeout), migrates the fleet tables under a
 * transaction-level advisory lock and attaches the backend to st. */
int store_pg_attach(struct pf_store *st, const char *url, struct pf_error *err);
void store_pg_detach(struct pf_store *st);
bool store_pg_down(const struct pf_store *st);

int store_pg_config_put(struct pf_store *st, const char *name, const char *body, size_t len,
			const uint8_t hash[32], int64_t now_ms, int64_t *version, bool *created);
int store_pg_config_get(struct pf_store *st, const char *name, int64_t version,
			struct pf_config_version *out);
int store_pg_config_versions(struct pf_store *st, const char *name,
			     int (*cb)(const struct pf_config_version *cv, void *ud), void *ud);
int store_pg_config_foreach_latest(struct pf_store *st,
				   int (*cb)(const struct pf_config_version *cv, void *ud),
				   void *ud);
int store_pg_assignment_put(struct pf_store *st, const struct pf_assignment *a);
int store_pg_assignment_get(struct pf_store *st, const char *name, struct pf_assignment *out);
int store_pg_assignment_delete(struct pf_store *st, const char *name);
int store_pg_assignment_foreach(struct pf_store *st,
				int (*cb)(const struct pf_assignment *a, void *ud), void *ud);
int store_pg_agents_upsert(struct pf_store *st, const struct pf_agent_row *rows, size_t n);
int store_pg_agents_set_seen(struct pf_store *st, const struct pf_agent_row *rows, size_t n);
int store_pg_agents_foreach(struct pf_store *st,
			    int (*cb)(const struct pf_agent_row *row, void *ud), void *ud);
int store_pg_agents_foreach_since(struct pf_store *st, int64_t *since_ms,
				  int (*cb)(const struct pf_agent_row *row, void *ud), void *ud);
int store_pg_agent_get(struct pf_store *st, const uint8_t uid[16],
		       int (*cb)(const struct pf_agent_row *row, void *ud), void *ud);
int store_pg_agents_mark_all_disconnected(struct pf_store *st);
int store_pg_replica_beat(struct pf_store *st, int64_t dead_after_ms, size_t *marked,
			  bool *revived);
int store_pg_agent_delete(struct pf_store *st, const uint8_t uid[16]);
int store_pg_rollout_lock(struct pf_store *st, const char *id, bool *owned);
int store_pg_rollout_unlock(struct pf_store *st, const char *id);

#endif
