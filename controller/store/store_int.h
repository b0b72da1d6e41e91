/* store_int.h — private to controller/store/: what store.c shares with the other store_*.c
 * files of the module (store_profiles.c). Never included outside this directory, so sqlite3.h
 * stays inside the store (STYLE.md rule 3). */
#ifndef PF_STORE_INT_H
#define PF_STORE_INT_H

#include <sqlite3.h>

#include "store.h"

struct store_prof;
struct store_cap;
struct store_roll;

/* The connection's handle. */
sqlite3 *store_db(struct pf_store *st);
/* The slot where store_profiles.c keeps its per-connection state (NULL until first use). */
struct store_prof **store_prof_slot(struct pf_store *st);
/* Frees that state (statements included); called by pf_store_close(). NULL is allowed. */
void store_prof_release(struct store_prof *p);
/* The same for store_captures.c. */
struct store_cap **store_cap_slot(struct pf_store *st);
void store_cap_release(struct store_cap *c);
/* The same for store_rollouts.c. */
struct store_roll **store_roll_slot(struct pf_store *st);
void store_roll_release(struct store_roll *r);
/* The slot of the PostgreSQL backend (store_pg.c), NULL when the fleet tables are in SQLite. */
struct store_pg;
struct store_pg **store_pg_slot(struct pf_store *st);
/* store.c's transaction helpers (BEGIN IMMEDIATE; commit rolls back on failure), its step
 * of a statement that returns no row, and its step of one that returns rows (1 on a row,
 * done when there are no more, a store error otherwise). */
int store_tx_begin(struct pf_store *st);
int store_tx_commit(struct pf_store *st);
void store_tx_rollback(struct pf_store *st);
int store_step_done(struct pf_store *st, sqlite3_stmt *s, const char *what);
int store_step_row(struct pf_store *st, sqlite3_stmt *s, int done, const char *what);
/* The statement cached in *slot, prepared from sql on first use (SQLITE_PREPARE_PERSISTENT);
 * NULL with *rc set when preparing fails or when it is in use by an outer iteration
 * (-EBUSY). Pair it with store_stmt_resetp() as a cleanup handler. */
sqlite3_stmt *store_stmt_cached(struct pf_store *st, sqlite3_stmt **slot, const char *sql,
			       int *rc);
void store_stmt_resetp(sqlite3_stmt **s);
/* Record the last error like store.c does ("store: <what>: <sqlite message>") and return
 * -EIO/-ENOMEM (store_fail_sqlite) or rc (store_fail_other). */
int store_fail_sqlite(struct pf_store *st, struct pf_error *err, const char *what);
int store_fail_other(struct pf_store *st, struct pf_error *err, int rc, const char *what);

#endif
