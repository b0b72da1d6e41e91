/* store_pg.h — private to controller/store/: the PostgreSQL backend of the fleet tables.
 *
 * store_pg_attach() connects, migrates and switches the connection's statement driver
 * (store_int.h) to PostgreSQL, so the operations written once over it run here. The agent
 * calls, which on PostgreSQL carry the replica's id and the database's clock on every row,
 * keep a twin here: their store.h function starts with STORE_PG_DISPATCH(), which hands the
 * call to the store_pg_<same name>() below when the backend is attached. The profile store
 * never comes here: it stays in the replica's own SQLite file. Only store_pg.c includes
 * libpq-fe.h.
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
