/* store_tokens.c — token management and the audit query (schema version 5, migration in
 * store.c); see store.h ("Token management", "Audit log"). These run once per API request at
 * most, so statements are prepared per call instead of cached. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "store_int.h"
#include "store_pg.h"

#define TOKEN_COLS "id, name, role, created_by, created_ms, expires_ms, last_used_ms, hash"

static sqlite3_stmt *prep(struct pf_store *st, const char *sql, const char *what, int *rc)
{
	sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(store_db(st), sql, -1, &s, NULL) != SQLITE_OK) {
		*rc = store_fail_sqlite(st, NULL, what);
		sqlite3_finalize(s);
		return NULL;
	}
	*rc = 0;
	return s;
}

static void copy_col(sqlite3_stmt *s, int i, char *dst, size_t len)
{
	const unsigned char *t = sqlite3_column_text(s, i);
	snprintf(dst, len, "%s", t ? (const char *)t : "");
}

static void token_row(sqlite3_stmt *s, struct pf_token_info *t)
{
	copy_col(s, 0, t->id, sizeof(t->id));
	copy_col(s, 1, t->name, sizeof(t->name));
	copy_col(s, 2, t->role, sizeof(t->role));
	copy_col(s, 3, t->created_by, sizeof(t->created_by));
	t->created_ms = sqlite3_column_int64(s, 4);
	t->expires_ms = sqlite3_column_int64(s, 5);
	t->last_used_ms = sqlite3_column_int64(s, 6);
	memset(t->hash, 0, sizeof(t->hash));
	if (sqlite3_column_bytes(s, 7) == 32)
		memcpy(t->hash, sqlite3_column_blob(s, 7), 32);
}

static int bind_str(sqlite3_stmt *s, int i, const char *v)
{
	return v ? sqlite3_bind_text(s, i, v, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(s, i);
}

int pf_store_token_create(struct pf_store *st, const uint8_t hash[32], struct pf_token_info *t)
{
	STORE_PG_DISPATCH(st, store_pg_token_create(st, hash, t));
	int rc;
	if (!hash || !t || !t->name[0] || !t->role[0])
		return store_fail_other(st, NULL, -EINVAL, "token_create: missing argument");
	sqlite3_stmt *s = prep(st,
			       "INSERT INTO tokens (hash, role, name, created_ms, id, expires_ms, "
			       "last_used_ms, created_by, seq) VALUES (?1, ?2, ?3, ?4, "
			       "lower(hex(randomblob(8))), ?5, 0, ?6, "
			       "(SELECT coalesce(max(seq), 0) + 1 FROM tokens)) RETURNING id",
			       "token_create: prepare", &rc);
	if (!s)
		return rc;
	if (sqlite3_bind_blob(s, 1, hash, 32, SQLITE_TRANSIENT) || bind_str(s, 2, t->role) ||
	    bind_str(s, 3, t->name) || sqlite3_bind_int64(s, 4, t->created_ms) ||
	    sqlite3_bind_int64(s, 5, t->expires_ms) || bind_str(s, 6, t->created_by)) {
		rc = store_fail_sqlite(st, NULL, "token_create: bind");
		sqlite3_finalize(s);
		return rc;
	}
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		copy_col(s, 0, t->id, sizeof(t->id));
		rc = sqlite3_step(s);
	}
	if (rc != SQLITE_DONE) {
		rc = rc == SQLITE_CONSTRAINT
			 ? store_fail_other(st, NULL, -EEXIST, "token_create: token already exists")
			 : store_fail_sqlite(st, NULL, "token_create");
		sqlite3_finalize(s);
		return rc;
	}
	sqlite3_finalize(s);
	t->last_used_ms = 0;
	return 0;
}

int pf_store_token_find(struct pf_store *st, const uint8_t hash[32], struct pf_token_info *t)
{
	STORE_PG_DISPATCH(st, store_pg_token_find(st, hash, t));
	int rc;
	sqlite3_stmt *s = prep(st, "SELECT " TOKEN_COLS " FROM tokens WHERE hash = ?1",
			       "token_find: prepare", &rc);
	if (!s)
		return rc;
	if (sqlite3_bind_blob(s, 1, hash, 32, SQLITE_TRANSIENT)) {
		rc = store_fail_sqlite(st, NULL, "token_find: bind");
	} else {
		rc = sqlite3_step(s);
		if (rc == SQLITE_ROW) {
			token_row(s, t);
			rc = 0;
		} else {
			rc =
			    rc == SQLITE_DONE ? -ENOENT : store_fail_sqlite(st, NULL, "token_find");
		}
	}
	sqlite3_finalize(s);
	return rc;
}

int pf_store_token_foreach(struct pf_store *st, int (*cb)(const struct pf_token_info *t, void *ud),
			   void *ud)
{
	STORE_PG_DISPATCH(st, store_pg_token_foreach(st, cb, ud));
	int rc;
	sqlite3_stmt *s = prep(st, "SELECT " TOKEN_COLS " FROM tokens ORDER BY created_ms, seq",
			       "token_foreach: prepare", &rc);
	if (!s)
		return rc;
	for (;;) {
		rc = store_step_row(st, s, 0, "token_foreach");
		if (rc <= 0)
			break;
		struct pf_token_info t;
		token_row(s, &t);
		rc = cb(&t, ud);
		if (rc)
			break;
	}
	sqlite3_finalize(s);
	return rc;
}

int pf_store_token_revoke(struct pf_store *st, const char *id, struct pf_token_info *t)
{
	STORE_PG_DISPATCH(st, store_pg_token_revoke(st, id, t));
	int rc;
	if (!id)
		return -EINVAL;
	sqlite3_stmt *s = prep(st, "DELETE FROM tokens WHERE id = ?1 RETURNING " TOKEN_COLS,
			       "token_revoke: prepare", &rc);
	if (!s)
		return rc;
	if (bind_str(s, 1, id)) {
		rc = store_fail_sqlite(st, NULL, "token_revoke: bind");
	} else {
		rc = sqlite3_step(s);
		bool found = rc == SQLITE_ROW;
		if (found && t)
			token_row(s, t);
		while (rc == SQLITE_ROW)
			rc = sqlite3_step(s);
		if (rc != SQLITE_DONE)
			rc = store_fail_sqlite(st, NULL, "token_revoke");
		else
			rc = found ? 0 : -ENOENT;
	}
	sqlite3_finalize(s);
	return rc;
}

int pf_store_token_touch(struct pf_store *st, const char *id, int64_t now_ms)
{
	STORE_PG_DISPATCH(st, store_pg_token_touch(st, id, now_ms));
	int rc;
	sqlite3_stmt *s = prep(st, "UPDATE tokens SET last_used_ms = ?2 WHERE id = ?1",
			       "token_touch: prepare", &rc);
	if (!s)
		return rc;
	if (bind_str(s, 1, id) || sqlite3_bind_int64(s, 2, now_ms))
		rc = store_fail_sqlite(st, NULL, "token_touch: bind");
	else
		rc = store_step_done(st, s, "token_touch");
	sqlite3_finalize(s);
	return rc;
}

/* ---- Audit. */

int pf_store_audit_write(struct pf_store *st, const struct pf_audit_entry *e)
{
	STORE_PG_DISPATCH(st, store_pg_audit_write(st, e));
	int rc;
	if (!e || !e->actor || !e->action)
		return store_fail_other(st, NULL, -EINVAL, "audit: missing actor or action");
	sqlite3_stmt *s = prep(st,
			       "INSERT INTO audit (ts_ms, actor, action, target, detail, actor_id, "
			       "source, status) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
			       "audit: prepare", &rc);
	if (!s)
		return rc;
	if (sqlite3_bind_int64(s, 1, e->ts_ms) || bind_str(s, 2, e->actor) ||
	    bind_str(s, 3, e->action) || bind_str(s, 4, e->target ? e->target : "") ||
	    bind_str(s, 5, e->detail) || bind_str(s, 6, e->actor_id ? e->actor_id : "") ||
	    bind_str(s, 7, e->source ? e->source : "") || sqlite3_bind_int(s, 8, e->status))
		rc = store_fail_sqlite(st, NULL, "audit: bind");
	else
		rc = store_step_done(st, s, "audit");
	sqlite3_finalize(s);
	return rc;
}

static const char *col_str(sqlite3_stmt *s, int i)
{
	const unsigned char *t = sqlite3_column_text(s, i);
	return t ? (const char *)t : "";
}

int pf_store_audit_query(struct pf_store *st, const struct pf_audit_query *q,
			 int (*cb)(const struct pf_audit_entry *e, void *ud), void *ud)
{
	STORE_PG_DISPATCH(st, store_pg_audit_query(st, q, cb, ud));
	int rc;
	if (!q || !cb || q->before_id < 0 || q->limit == 0)
		return -EINVAL;
	sqlite3_stmt *s = prep(
	    st,
	    "SELECT id, ts_ms, actor, action, target, detail, actor_id, source, status FROM audit "
	    "WHERE id < ?1 AND ts_ms >= ?2 AND ts_ms <= ?3 "
	    "AND (?4 IS NULL OR actor = ?4 OR actor_id = ?4) "
	    "AND (?5 IS NULL OR action = ?5 OR substr(action, 1, length(?5) + 1) = ?5 || '.') "
	    "ORDER BY id DESC LIMIT ?6",
	    "audit_query: prepare", &rc);
	if (!s)
		return rc;
	if (sqlite3_bind_int64(s, 1, q->before_id > 0 ? q->before_id : INT64_MAX) ||
	    sqlite3_bind_int64(s, 2, q->from_ms) ||
	    sqlite3_bind_int64(s, 3, q->to_ms > 0 ? q->to_ms : INT64_MAX) ||
	    bind_str(s, 4, q->actor) || bind_str(s, 5, q->action) ||
	    sqlite3_bind_int64(s, 6,
			       q->limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)q->limit)) {
		rc = store_fail_sqlite(st, NULL, "audit_query: bind");
		sqlite3_finalize(s);
		return rc;
	}
	for (;;) {
		rc = store_step_row(st, s, 0, "audit_query");
		if (rc <= 0)
			break;
		struct pf_audit_entry e = {
		    .id = sqlite3_column_int64(s, 0),
		    .ts_ms = sqlite3_column_int64(s, 1),
		    .actor = col_str(s, 2),
		    .action = col_str(s, 3),
		    .target = col_str(s, 4),
		    .detail = sqlite3_column_type(s, 5) == SQLITE_NULL ? NULL : col_str(s, 5),
		    .actor_id = col_str(s, 6),
		    .source = col_str(s, 7),
		    .status = sqlite3_column_int(s, 8),
		};
		rc = cb(&e, ud);
		if (rc)
			break;
	}
	sqlite3_finalize(s);
	return rc;
}
