/* store_dialect.h — private to controller/store/: what differs between the SQLite and the
 * PostgreSQL text of the same statement, and the one migration list both backends run.
 *
 * Statements are written once, in the store's SQLite form with numbered placeholders (?1,
 * ?2, ...); the PostgreSQL backend runs them through store_sql_to_pg(). Where the two
 * dialects really differ (types in DDL, INSERT ... RETURNING of a generated id, ON CONFLICT
 * on SQLite-only syntax) the statement is written twice, next to each other. */
#ifndef PF_STORE_DIALECT_H
#define PF_STORE_DIALECT_H

#include <stddef.h>

/* One schema step: migrations[i] takes version i to i + 1. `sqlite` is the step as it
 * shipped (never edited); `pg` is the same step for the fleet tables in PostgreSQL, "" when
 * the step only touches the embedded profile store (which stays in SQLite per replica). */
struct store_migration {
	const char *sqlite;
	const char *pg;
};

/* The list (store.c) and its length. */
const struct store_migration *store_migrations(size_t *n);

/* Rewrites ?N placeholders to $N outside quoted strings. The length written, -ENOSPC when
 * out (cap bytes, NUL included) is too small, -EINVAL for an unnumbered '?' or an
 * unterminated quote. */
int store_sql_to_pg(const char *in, char *out, size_t cap);

/* The first SQLite-only word of sql outside string literals (STRICT, WITHOUT ROWID, BLOB,
 * AUTOINCREMENT, PRAGMA, randomblob, hex, INSERT OR REPLACE, a '?' placeholder ...), or NULL
 * when there is none. The migration check (unit test) runs it on every PostgreSQL step. */
const char *store_sql_pg_unportable(const char *sql);

#endif
