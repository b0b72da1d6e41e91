/* store_pg.h — private to controller/store/: the PostgreSQL backend of the fleet tables.
 *
 * store_pg_attach() connects, migrates and switches the connection's statement driver
 * (store_int.h) to PostgreSQL, so every fleet operation, written once over that driver, runs
 * here too (where the statements differ, a store_stmt carries both texts). The profile store
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

/* Connects (connect_timeout, statement_timeout), migrates the fleet tables under a
 * transaction-level advisory lock and attaches the backend to st. */
int store_pg_attach(struct pf_store *st, const char *url, struct pf_error *err);
void store_pg_detach(struct pf_store *st);
bool store_pg_down(const struct pf_store *st);

#endif
