/* store_int.h — private to controller/store/: the connection (struct pf_store) and the
 * statement driver every store_*.c file writes its operations against.
 *
 * A store operation is written once, over struct store_q: prepare a statement from its
 * store_stmt definition, bind its parameters in order, step its rows, read their columns,
 * and finish it (a cleanup handler). Transactions are store_tx_begin()/store_tx_end(), and a
 * write that other replicas must see queues store_notify() inside its transaction. Which
 * database runs the statement is the connection's driver (st->drv): SQLite (store_q.c,
 * statements cached per connection) or, once a postgres:// URL attached the fleet tables,
 * PostgreSQL (store_pg.c). The profile store always runs on SQLite and uses st->db directly.
 *
 * Never included outside this directory, so sqlite3.h stays inside the store (the store
 * target is the only one that sees the database client headers). */
#ifndef PF_STORE_INT_H
#define PF_STORE_INT_H

#include <sqlite3.h>
#include <string.h>

#include "pf/compiler.h"
#include "store.h"

struct store_prof;
struct store_pg;
struct store_driver;

/* One statement, written in the store's SQLite form with numbered placeholders (?1, ?2 ...).
 * `pg` is its PostgreSQL text where the dialects differ (casts of untyped parameters,
 * DISTINCT ON, LIMIT without a bound); NULL runs `sqlite` through store_sql_to_pg().
 * `sqlite` NULL is a statement PostgreSQL alone needs (an advisory lock where SQLite's
 * BEGIN IMMEDIATE already serializes the writers, a replica's heartbeat): on SQLite it steps
 * as done at once and changes no row; `pg` "" is one SQLite alone needs (marking every agent
 * disconnected at start, which replicas sharing the tables must not do), likewise on
 * PostgreSQL. The PostgreSQL text may take more parameters than the SQLite one (the replica's
 * id on an agent row): SQLite binds only those its text names. */
struct store_stmt {
	const char *sqlite;
	const char *pg;
};

#define STORE_CACHE_MAX 64
#define STORE_C_STMTS 24
#define STORE_Q_MAX_PARAMS 16

struct pf_store {
	sqlite3 *db;
	int schema_version;
	char last_error[512];
	const struct store_driver *drv; /* the fleet tables' driver: SQLite or PostgreSQL */
	struct store_pg *pg;            /* the PostgreSQL backend, NULL: SQLite */
	struct store_prof *prof;        /* store_profiles.c's statements and settings */
	size_t agent_batch;             /* PostgreSQL: agent rows per statement, 0: default */
	sqlite3_stmt *stmt[STORE_C_STMTS]; /* store.c's statements, prepared at open */
	/* The SQLite statements of the fleet operations, prepared on first use. */
	size_t n_cached;
	struct {
		const struct store_stmt *def;
		sqlite3_stmt *s;
	} cached[STORE_CACHE_MAX];
};

enum store_param { STORE_P_NULL, STORE_P_TEXT, STORE_P_BLOB, STORE_P_I64 };

/* One bound parameter, referenced, not copied: it must outlive the steps. Made with
 * store_v_text()/store_v_blob()/store_v_i64(); NULL text or blob is SQL NULL. */
struct store_arg {
	enum store_param kind;
	const void *v;
	size_t len;
	int64_t i;
};

static inline struct store_arg store_v_text(const char *v)
{
	return (struct store_arg){v ? STORE_P_TEXT : STORE_P_NULL, v, v ? strlen(v) : 0, 0};
}

static inline struct store_arg store_v_blob(const void *v, size_t len)
{
	return (struct store_arg){v ? STORE_P_BLOB : STORE_P_NULL, v, len, 0};
}

static inline struct store_arg store_v_i64(int64_t v)
{
	return (struct store_arg){STORE_P_I64, NULL, 0, v};
}

/* A parameter list in placeholder order, as the two arguments (array, count) that
 * store_q_open(), store_exec() and store_each() take. */
#define STORE_ARGS(...)                                                                            \
	(const struct store_arg[]){__VA_ARGS__},                                                   \
	    sizeof((const struct store_arg[]){__VA_ARGS__}) / sizeof(struct store_arg)

/* A statement being run. Bound values are referenced, not copied: they must outlive the
 * steps. Column values are valid until the next step or store_q_finish(). */
struct store_q {
	struct pf_store *st;
	const struct store_stmt *def;
	const char *what; /* names the operation in errors */
	void *h;          /* the backend's statement (sqlite3_stmt) or result (PGresult) */
	int row, rows;    /* PostgreSQL: the row under the cursor and the result's row count */
	bool started;     /* bound and first stepped */
	bool oom;         /* SQLite could not produce a column's text */
	int n;
	struct store_arg p[STORE_Q_MAX_PARAMS];
};

/* What a backend implements (the SQLite one in store_q.c, the PostgreSQL one in store_pg.c).
 * step runs the statement on its first call; 1 on a row, 0 when there are no more, a store
 * error otherwise (-EEXIST for a unique-key violation, -EAGAIN when PostgreSQL is
 * unreachable). end commits when rc is 0 and rolls back otherwise; it returns rc, or the
 * commit's error. */
struct store_driver {
	int (*prepare)(struct store_q *q);
	int (*step)(struct store_q *q);
	int64_t (*col_i64)(struct store_q *q, int col);
	const char *(*col_text)(struct store_q *q, int col, size_t *len); /* NULL: SQL NULL */
	const void *(*col_blob)(struct store_q *q, int col, size_t *len); /* NULL: SQL NULL */
	int64_t (*changes)(struct store_q *q);
	void (*finish)(struct store_q *q);
	int (*begin)(struct pf_store *st);
	int (*end)(struct pf_store *st, int rc);
	int (*notify)(struct pf_store *st, const char *kind, const char *name);
};

extern const struct store_driver store_sqlite_driver;

/* 0, or a store error (-EBUSY when the SQLite statement is still being stepped by an outer
 * iteration whose callback called back into the store). Declare q with STORE_Q. */
int store_q_prepare(struct store_q *q, struct pf_store *st, const struct store_stmt *def,
		    const char *what);
void store_q_finish(struct store_q *q);
#define STORE_Q(name) _cleanup_(store_q_finish) struct store_q name = {0}
/* store_q_prepare() and the n parameters of args bound in order. */
int store_q_open(struct store_q *q, struct pf_store *st, const struct store_stmt *def,
		 const char *what, const struct store_arg *args, size_t n);

/* Parameters, in placeholder order. NULL text or blob binds SQL NULL. */
void store_q_text(struct store_q *q, const char *v);
void store_q_text_n(struct store_q *q, const char *v, size_t len);
void store_q_blob(struct store_q *q, const void *v, size_t len);
void store_q_i64(struct store_q *q, int64_t v);

int store_q_step(struct store_q *q);
/* Steps a statement that returns no row; *changed (may be NULL) gets the rows it changed. */
int store_q_exec(struct store_q *q, int64_t *changed);

/* Steps every row of q into on_row until it returns nonzero (the call's result) or the rows
 * end (0); a store error otherwise. */
int store_q_rows(struct store_q *q, int (*on_row)(struct store_q *q, void *ud), void *ud);
/* One statement, start to finish: store_q_open() and store_q_exec() (store_exec) or
 * store_q_rows() (store_each). */
int store_exec(struct pf_store *st, const struct store_stmt *def, const char *what,
	       const struct store_arg *args, size_t n, int64_t *changed);
int store_each(struct pf_store *st, const struct store_stmt *def, const char *what,
	       const struct store_arg *args, size_t n,
	       int (*on_row)(struct store_q *q, void *ud), void *ud);

int64_t store_q_col_i64(struct store_q *q, int col);
/* NULL for SQL NULL (and sets q->oom when SQLite could not make the text). */
const char *store_q_col_text(struct store_q *q, int col);
const char *store_q_col_text_n(struct store_q *q, int col, size_t *len);
/* The text, "" for SQL NULL. */
const char *store_q_col_str(struct store_q *q, int col);
const void *store_q_col_blob(struct store_q *q, int col, size_t *len);
/* Copies a blob column of exactly len bytes; false when it is NULL or of another size. */
bool store_q_col_fixed(struct store_q *q, int col, void *dst, size_t len);

/* A row and its children: `parent` (one row, -ENOENT when there is none) and then, when
 * on_child is not NULL, every row of `child`, both selected by id; each row goes to its
 * handler, and a nonzero return from one ends the call with that value. */
struct store_tree {
	const struct store_stmt *parent, *child;
	const char *parent_what, *child_what;
	int (*on_parent)(struct store_q *q, void *ud);
	int (*on_child)(struct store_q *q, void *ud);
};
int store_get_tree(struct pf_store *st, const struct store_tree *t, const char *id,
		   void *parent_ud, void *child_ud);

/* Where a list's rows go: the operation's own callback, of the type its store.h declaration
 * gives, and its argument. The row handler of the operation converts fn back to that type
 * (STORE_SINK_FN) before calling it. */
struct store_sink {
	void (*fn)(void);
	void *ud;
};
#define STORE_SINK(cb, arg) ((struct store_sink){(void (*)(void))(cb), (arg)})
#define STORE_SINK_FN(sink, type) ((type)(sink)->fn)

int store_tx_begin(struct pf_store *st);
/* Runs the prepared and bound write q and store_notify(kind, name) in one transaction, and
 * finishes q. *changed (may be NULL) gets the rows it changed; none changed: no notice. */
int store_write_notify(struct store_q *q, const char *kind, const char *name, int64_t *changed);
int store_tx_end(struct pf_store *st, int rc);
/* Queues "<replica> <kind> <name>" for the other replicas (delivered at commit); nothing
 * to do with one replica on SQLite. */
int store_notify(struct pf_store *st, const char *kind, const char *name);

/* store.c's SQLite transaction helpers for the profile store (BEGIN IMMEDIATE; commit rolls
 * back on failure), its step of a statement that returns no row, and its step of one that
 * returns rows (1 on a row, done when there are no more, a store error otherwise). */
int store_sqlite_begin(struct pf_store *st);
int store_sqlite_commit(struct pf_store *st);
void store_sqlite_rollback(struct pf_store *st);
int store_step_done(struct pf_store *st, sqlite3_stmt *s, const char *what);
int store_step_row(struct pf_store *st, sqlite3_stmt *s, int done, const char *what);
/* Frees store_profiles.c's state (statements included); called by pf_store_close(). */
void store_prof_release(struct store_prof *p);
/* Record the last error ("store: <what>: <sqlite message>") and return -EIO/-ENOMEM
 * (store_fail_sqlite) or rc (store_fail_other). */
int store_fail_sqlite(struct pf_store *st, struct pf_error *err, const char *what);
int store_fail_other(struct pf_store *st, struct pf_error *err, int rc, const char *what);

/* store_stacks.c, for store_profiles.c: the per-connection content state (its slot in
 * struct store_prof), the attribute set of a row before its insert, and its content after
 * (packed samples, rollups), both inside the insert's transaction. */
struct store_stacks;
struct store_stacks **store_prof_stacks(struct pf_store *st);
void store_stacks_release(struct store_stacks *k);
/* Binds id to parameter 1 of s, steps it and appends its blob column 0 to out: 0, -ENOENT
 * when there is no row, -E2BIG past out's cap, -ENOMEM, -EIO. */
int store_read_blob(struct pf_store *st, sqlite3_stmt *s, int64_t id, const char *what,
		    struct pf_buf *out);
/* store_details.c, for store_profiles.c inside the insert's transaction: a detail's row
 * bytes (its locations and stacks stored), and that row. */
int store_details_pack(struct pf_store *st, const struct pf_profile_detail *d,
		       struct pf_buf *out);
int store_details_put(struct pf_store *st, int64_t id, const struct pf_buf *blob);
/* Drops the looked-up content ids (after a rollback: what it stored is gone). */
void store_stacks_forget(struct pf_store *st);
int store_stacks_prepare(struct pf_store *st, struct pf_profile_row *r);
int store_stacks_insert(struct pf_store *st, const struct pf_profile_row *r);

#endif
