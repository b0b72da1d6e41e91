/* store_q.c — the statement driver's front (store_int.h) and its SQLite backend.
 *
 * The front checks nothing the backends do not: it keeps the bound parameters in order and
 * hands every call to the connection's driver. The SQLite backend prepares each statement
 * once per connection (SQLITE_PREPARE_PERSISTENT) and keeps it in st->cached; finishing a
 * query resets it and clears its bindings, so no path leaves a statement half-stepped. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store_int.h"

/* ---- The front. */

int store_q_prepare(struct store_q *q, struct pf_store *st, const struct store_stmt *def,
		    const char *what)
{
	memset(q, 0, sizeof(*q));
	q->st = st;
	q->def = def;
	q->what = what;
	return st->drv->prepare(q);
}

void store_q_finish(struct store_q *q)
{
	if (q->st && q->h)
		q->st->drv->finish(q);
	q->h = NULL;
}

static void param(struct store_q *q, struct store_arg a)
{
	if (q->n >= STORE_Q_MAX_PARAMS)
		return; /* the statements are ours: never more than STORE_Q_MAX_PARAMS */
	q->p[q->n++] = a;
}

int store_q_open(struct store_q *q, struct pf_store *st, const struct store_stmt *def,
		 const char *what, const struct store_arg *args, size_t n)
{
	int rc = store_q_prepare(q, st, def, what);

	for (size_t i = 0; rc == 0 && i < n; i++)
		param(q, args[i]);
	return rc;
}

void store_q_text(struct store_q *q, const char *v)
{
	param(q, store_v_text(v));
}

void store_q_text_n(struct store_q *q, const char *v, size_t len)
{
	param(q, (struct store_arg){v ? STORE_P_TEXT : STORE_P_NULL, v, len, 0});
}

void store_q_blob(struct store_q *q, const void *v, size_t len)
{
	param(q, store_v_blob(v, len));
}

void store_q_i64(struct store_q *q, int64_t v)
{
	param(q, store_v_i64(v));
}

int store_q_step(struct store_q *q)
{
	int rc = q->st->drv->step(q);
	q->started = true;
	return rc;
}

int store_q_exec(struct store_q *q, int64_t *changed)
{
	int rc = store_q_step(q);

	if (rc > 0)
		return store_fail_other(q->st, NULL, -EIO, q->what);
	if (rc == 0 && changed)
		*changed = q->st->drv->changes(q);
	return rc;
}

int store_q_rows(struct store_q *q, int (*on_row)(struct store_q *q, void *ud), void *ud)
{
	int rc;

	while ((rc = store_q_step(q)) > 0 && (rc = on_row(q, ud)) == 0)
		;
	return rc;
}

int store_exec(struct pf_store *st, const struct store_stmt *def, const char *what,
	       const struct store_arg *args, size_t n, int64_t *changed)
{
	STORE_Q(q);
	int rc = store_q_open(&q, st, def, what, args, n);

	return rc < 0 ? rc : store_q_exec(&q, changed);
}

int store_each(struct pf_store *st, const struct store_stmt *def, const char *what,
	       const struct store_arg *args, size_t n,
	       int (*on_row)(struct store_q *q, void *ud), void *ud)
{
	STORE_Q(q);
	int rc = store_q_open(&q, st, def, what, args, n);

	return rc < 0 ? rc : store_q_rows(&q, on_row, ud);
}

int64_t store_q_col_i64(struct store_q *q, int col)
{
	return q->st->drv->col_i64(q, col);
}

const char *store_q_col_text(struct store_q *q, int col)
{
	size_t len;
	return q->st->drv->col_text(q, col, &len);
}

const char *store_q_col_text_n(struct store_q *q, int col, size_t *len)
{
	return q->st->drv->col_text(q, col, len);
}

const char *store_q_col_str(struct store_q *q, int col)
{
	const char *t = store_q_col_text(q, col);
	return t ? t : "";
}

const void *store_q_col_blob(struct store_q *q, int col, size_t *len)
{
	return q->st->drv->col_blob(q, col, len);
}

bool store_q_col_fixed(struct store_q *q, int col, void *dst, size_t len)
{
	size_t n = 0;
	const void *b = store_q_col_blob(q, col, &n);

	if (!b || n != len)
		return false;
	memcpy(dst, b, len);
	return true;
}

int store_get_tree(struct pf_store *st, const struct store_tree *t, const char *id,
		   void *parent_ud, void *child_ud)
{
	int rc;
	{
		STORE_Q(q);
		rc = store_q_open(&q, st, t->parent, t->parent_what, STORE_ARGS(store_v_text(id)));
		if (rc == 0)
			rc = store_q_step(&q);
		if (rc <= 0)
			return rc ? rc : -ENOENT;
		rc = t->on_parent(&q, parent_ud);
		if (rc || !t->on_child)
			return rc;
	}
	return store_each(st, t->child, t->child_what, STORE_ARGS(store_v_text(id)), t->on_child,
			  child_ud);
}

int store_write_notify(struct store_q *q, const char *kind, const char *name, int64_t *changed)
{
	struct pf_store *st = q->st;
	int rc = store_tx_begin(st);

	if (rc == 0)
		rc = store_q_exec(q, changed);
	if (rc == 0 && (!changed || *changed > 0))
		rc = store_notify(st, kind, name);
	store_q_finish(q);
	return store_tx_end(st, rc);
}

int store_tx_begin(struct pf_store *st)
{
	return st->drv->begin(st);
}

int store_tx_end(struct pf_store *st, int rc)
{
	return st->drv->end(st, rc);
}

int store_notify(struct pf_store *st, const char *kind, const char *name)
{
	return st->drv->notify(st, kind, name);
}

/* ---- SQLite. */

static int lite_prepare(struct store_q *q)
{
	struct pf_store *st = q->st;
	size_t i;

	if (!q->def->sqlite)
		return 0; /* nothing to run: step says done */
	for (i = 0; i < st->n_cached && st->cached[i].def != q->def; i++)
		;
	if (i == st->n_cached) {
		sqlite3_stmt *s = NULL;
		if (i == STORE_CACHE_MAX)
			return store_fail_other(st, NULL, -ENOSPC, "prepare: statement cache full");
		if (sqlite3_prepare_v3(st->db, q->def->sqlite, -1, SQLITE_PREPARE_PERSISTENT, &s,
				       NULL) != SQLITE_OK) {
			int rc = store_fail_sqlite(st, NULL, "prepare");
			sqlite3_finalize(s);
			return rc;
		}
		st->cached[i].def = q->def;
		st->cached[i].s = s;
		st->n_cached++;
	}
	if (sqlite3_stmt_busy(st->cached[i].s))
		return -EBUSY; /* an outer iteration is using it */
	q->h = st->cached[i].s;
	return 0;
}

static int lite_bind(struct store_q *q)
{
	sqlite3_stmt *s = q->h;
	int n = pf_min(q->n, sqlite3_bind_parameter_count(s));

	for (int i = 0; i < n; i++) {
		int rc = SQLITE_OK;
		switch (q->p[i].kind) {
		case STORE_P_NULL:
			rc = sqlite3_bind_null(s, i + 1);
			break;
		case STORE_P_TEXT:
			rc = sqlite3_bind_text64(s, i + 1, q->p[i].v, q->p[i].len, SQLITE_STATIC,
						 SQLITE_UTF8);
			break;
		case STORE_P_BLOB:
			rc = sqlite3_bind_blob64(s, i + 1, q->p[i].v, q->p[i].len, SQLITE_STATIC);
			break;
		case STORE_P_I64:
			rc = sqlite3_bind_int64(s, i + 1, q->p[i].i);
			break;
		}
		if (rc != SQLITE_OK)
			return rc;
	}
	return SQLITE_OK;
}

static int lite_step(struct store_q *q)
{
	struct pf_store *st = q->st;
	int rc;

	if (!q->h)
		return 0;
	if (!q->started && lite_bind(q) != SQLITE_OK) {
		char what[160];
		snprintf(what, sizeof(what), "%s: bind", q->what);
		return store_fail_sqlite(st, NULL, what);
	}
	rc = sqlite3_step(q->h);
	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	rc = sqlite3_extended_errcode(st->db);
	if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
		store_fail_sqlite(st, NULL, q->what);
		return -EEXIST;
	}
	return store_fail_sqlite(st, NULL, q->what);
}

static int64_t lite_col_i64(struct store_q *q, int col)
{
	return sqlite3_column_int64(q->h, col);
}

static const char *lite_col_text(struct store_q *q, int col, size_t *len)
{
	const char *t = (const char *)sqlite3_column_text(q->h, col);

	if (!t && sqlite3_column_type(q->h, col) != SQLITE_NULL)
		q->oom = true;
	*len = t ? (size_t)sqlite3_column_bytes(q->h, col) : 0;
	return t;
}

static const void *lite_col_blob(struct store_q *q, int col, size_t *len)
{
	const void *b = sqlite3_column_blob(q->h, col);
	*len = b ? (size_t)sqlite3_column_bytes(q->h, col) : 0;
	return b;
}

static int64_t lite_changes(struct store_q *q)
{
	return q->h ? sqlite3_changes(q->st->db) : 0;
}

static void lite_finish(struct store_q *q)
{
	sqlite3_reset(q->h);
	sqlite3_clear_bindings(q->h);
}

static int lite_end(struct pf_store *st, int rc)
{
	if (rc == 0)
		return store_sqlite_commit(st);
	store_sqlite_rollback(st);
	return rc;
}

static int lite_notify(struct pf_store *st, const char *kind, const char *name)
{
	(void)st;
	(void)kind;
	(void)name;
	return 0; /* one replica: nobody to tell */
}

const struct store_driver store_sqlite_driver = {
    .prepare = lite_prepare,
    .step = lite_step,
    .col_i64 = lite_col_i64,
    .col_text = lite_col_text,
    .col_blob = lite_col_blob,
    .changes = lite_changes,
    .finish = lite_finish,
    .begin = store_sqlite_begin,
    .end = lite_end,
    .notify = lite_notify,
};
