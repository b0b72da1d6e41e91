/* store_pg.c — the fleet tables in PostgreSQL through libpq; see store_pg.h and
 * docs/internals/store.md ("PostgreSQL backend").
 *
 * One PGconn per struct pf_store, used by one thread at a time like the SQLite handle.
 * Statements are the SQLite texts with ?N placeholders (rewritten to $N by
 * store_sql_to_pg()); parameters go as text (numbers, strings) or binary (bytea), results
 * come back binary (int8 as 8 big-endian bytes, bytea raw, text NUL-terminated), so nothing
 * is parsed from text. Every connection has connect_timeout and statement_timeout, so a
 * store call on the event loop is bounded. A lost connection makes calls fail fast with
 * -EAGAIN ("unavailable", the API answers 503) and is re-made on a later call, at most once
 * per backoff step (250 ms doubling to 5 s). */
#include "store_pg.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "pf/compiler.h"
#include "pf/hash.h"
#include "store_dialect.h"
#include "store_int.h"

#define PG_CONNECT_TIMEOUT_S "3"
/* idle_in_transaction_session_timeout: a replica stopped inside a transaction (SIGSTOP, a
 * paused VM) would hold its row locks for as long as it is stopped, and the others could
 * never mark its agents disconnected; the server ends such a session after 3 s instead (a
 * running controller never waits between the statements of one transaction). */
#define PG_STATEMENT_TIMEOUT                                                                    \
	"-c statement_timeout=3000 -c idle_in_transaction_session_timeout=3000 "                 \
	"-c client_min_messages=warning"
/* A call waits at most this long for its answer (the statement_timeout is the server's: a
 * hung server or a stalled path would never send it); then the connection is dropped. */
#define PG_CALL_TIMEOUT_MS 4000
#define PG_BACKOFF_MIN_MS 250
#define PG_BACKOFF_MAX_MS 5000
#define PG_MAX_PARAMS 16
#define PG_SQL_MAX 4096
/* pg_advisory_xact_lock key of the migrations ("pflt" "migr" in ASCII). */
#define PG_MIGRATE_LOCK 0x70666c746d696772LL

struct store_pg {
	PGconn *conn;
	char *url;
	bool down;  /* the connection is lost: re-made at next_try_ms at the earliest */
	bool hold;  /* pf_store_hold_reconnect(): no reconnect attempt at all */
	bool gated; /* pf_store_gate_reconnect(): a lost connection sets hold */
	int64_t next_try_ms;
	int64_t backoff_ms;
	uint64_t round_trips; /* statements sent and answered (pf_store_round_trips) */
};

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One id per process: NOTIFY payloads carry it, so a replica skips its own, and so do the
 * agent rows it writes (pf_store_replica_beat). Made once, whichever thread asks first (the
 * loop and the agent-row writer both do). */
static char replica_id[20];
static pthread_once_t replica_id_once = PTHREAD_ONCE_INIT;

static void replica_id_make(void)
{
	uint8_t b[8] = {0};
	pf_random_bytes(b, sizeof(b));
	for (int i = 0; i < 8; i++)
		snprintf(replica_id + 2 * i, 3, "%02x", b[i]);
}

const char *pf_store_replica_id(void)
{
	pthread_once(&replica_id_once, replica_id_make);
	return replica_id;
}

/* The connection is lost: the next call reconnects, unless reconnects are gated (then the
 * caller's probe releases them, pf_store_hold_reconnect). */
static void pg_mark_down(struct store_pg *g)
{
	g->down = true;
	g->next_try_ms = mono_ms();
	if (g->gated)
		g->hold = true;
}

/* ---- Errors. */

/* libpq messages end with a newline and may continue on more lines ("Is the server
 * running..."): the first line is the one worth a log line. */
static void first_line(const char *msg, char *out, size_t cap)
{
	size_t n = strcspn(msg ? msg : "", "\n");
	if (n >= cap)
		n = cap - 1;
	memcpy(out, msg ? msg : "", n);
	out[n] = '\0';
}

static int pg_fail_msg(struct pf_store *st, struct pf_error *err, int rc, const char *what,
		       const char *msg)
{
	char line[300], m[620];
	first_line(msg, line, sizeof(line));
	snprintf(m, sizeof(m), "postgres: %.300s: %s", what, line);
	return store_fail_other(st, err, rc, m);
}

/* A failed result: -EAGAIN when the database is unreachable or shutting down or the
 * statement timed out (the caller answers 503), -EEXIST for a unique violation, else -EIO. */
static int pg_fail(struct pf_store *st, const char *what, PGresult *r)
{
	struct store_pg *g = store_pg_of(st);
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = r ? PQresultErrorMessage(r) : NULL;
	int rc = -EIO;

	if (!msg || !*msg)
		msg = PQerrorMessage(g->conn);
	if (PQstatus(g->conn) != CONNECTION_OK) {
		pg_mark_down(g);
		rc = -EAGAIN;
	} else if (state && (strncmp(state, "08", 2) == 0 || strcmp(state, "57014") == 0 ||
			     strncmp(state, "57P", 3) == 0)) {
		rc = -EAGAIN;
	} else if (state && strcmp(state, "23505") == 0) {
		rc = -EEXIST;
	}
	return pg_fail_msg(st, NULL, rc, what, msg);
}

/* ---- Connections. */

/* The store logs nothing (library layers return errors and leave logging to the caller):
 * server notices are dropped, errors come back through results. */
static void pg_no_notice(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

/* Later keywords override earlier ones: the URL may set its own. Besides the connect and
 * statement timeouts, TCP keepalives and tcp_user_timeout bound a call to a database that
 * vanished from the network (no RST): the statement_timeout is the server's and would never
 * come back then. */
static const char *const pg_kw[] = {
    "connect_timeout",	   "options",	       "application_name", "keepalives", "keepalives_idle",
    "keepalives_interval", "keepalives_count", "tcp_user_timeout", "dbname",	 NULL};
#define PG_VALUES(url)                                                                             \
	{                                                                                          \
		PG_CONNECT_TIMEOUT_S, PG_STATEMENT_TIMEOUT, "profleet-controller", "1", "5", "2",  \
		    "2", "5000", (url), NULL                                                       \
	}

static PGconn *pg_connect(const char *url)
{
	const char *const val[] = PG_VALUES(url);
	PGconn *c = PQconnectdbParams(pg_kw, val, 1);
	if (c)
		PQsetNoticeProcessor(c, pg_no_notice, NULL);
	return c;
}

/* "store: postgres: connect to HOST:PORT: <libpq's first line>" */
static int pg_connect_fail(struct pf_store *st, struct pf_error *err, PGconn *c)
{
	char what[300];
	const char *host = c ? PQhost(c) : NULL;
	const char *port = c ? PQport(c) : NULL;
	snprintf(what, sizeof(what), "connect to %s:%s", host && *host ? host : "?",
		 port && *port ? port : "5432");
	return pg_fail_msg(st, err, -EAGAIN, what, c ? PQerrorMessage(c) : "out of memory");
}

/* Makes sure the connection is up: 0, or -EAGAIN without waiting while the backoff runs. */
static int pg_ready(struct pf_store *st)
{
	struct store_pg *g = store_pg_of(st);
	int64_t now = mono_ms();

	if (!g->down && PQstatus(g->conn) == CONNECTION_OK)
		return 0;
	if (now < g->next_try_ms || g->hold)
		return -EAGAIN; /* last_error still says why */
	PQfinish(g->conn);
	g->conn = pg_connect(g->url);
	if (!g->conn || PQstatus(g->conn) != CONNECTION_OK) {
		pg_mark_down(g);
		g->backoff_ms = g->backoff_ms
				    ? pf_min(g->backoff_ms * 2, (int64_t)PG_BACKOFF_MAX_MS)
				    : PG_BACKOFF_MIN_MS;
		g->next_try_ms = mono_ms() + g->backoff_ms;
		return pg_connect_fail(st, NULL, g->conn);
	}
	PQsetnonblocking(g->conn, 1);
	g->down = false;
	g->backoff_ms = 0;
	return 0;
}

void pf_store_hold_reconnect(struct pf_store *st, bool hold)
{
	struct store_pg *g = st ? store_pg_of(st) : NULL;
	if (g)
		g->hold = hold;
}

void pf_store_gate_reconnect(struct pf_store *st, bool gated)
{
	struct store_pg *g = st ? store_pg_of(st) : NULL;
	if (g)
		g->gated = gated;
}

uint64_t pf_store_round_trips(const struct pf_store *st)
{
	const struct store_pg *g = store_pg_of(st);
	return g ? g->round_trips : 0;
}

bool store_pg_down(const struct pf_store *st)
{
	struct store_pg *g = store_pg_of(st);
	return g && (g->down || PQstatus(g->conn) != CONNECTION_OK);
}

/* ---- Parameters and results. */

struct pgp {
	int n;
	const char *v[PG_MAX_PARAMS];
	int len[PG_MAX_PARAMS];
	int fmt[PG_MAX_PARAMS];
	char num[PG_MAX_PARAMS][24];
};

static void p_text(struct pgp *p, const char *s) /* NULL: SQL NULL */
{
	p->v[p->n] = s;
	p->len[p->n] = 0;
	p->fmt[p->n++] = 0;
}

static void p_i64(struct pgp *p, int64_t x)
{
	snprintf(p->num[p->n], sizeof(p->num[0]), "%lld", (long long)x);
	p_text(p, p->num[p->n]);
}

static void p_blob(struct pgp *p, const void *b, size_t len) /* NULL: SQL NULL */
{
	p->v[p->n] = b;
	p->len[p->n] = (int)len;
	p->fmt[p->n++] = 1;
}

/* Sends what is queued and waits for the last result of the command just sent, until
 * deadline (CLOCK_MONOTONIC ms): NULL on a lost connection or at the deadline (*timed_out). */
static PGresult *pg_wait(PGconn *c, int64_t deadline, bool *timed_out)
{
	PGresult *last = NULL;

	*timed_out = false;
	for (;;) {
		int f = PQflush(c);
		if (f < 0)
			break;
		if (f == 0 && !PQisBusy(c)) {
			PGresult *r = PQgetResult(c);
			if (!r)
				return last;
			PQclear(last);
			last = r;
			continue;
		}
		int64_t left = deadline - mono_ms();
		if (left <= 0) {
			*timed_out = true;
			break;
		}
		struct pollfd pfd = {.fd = PQsocket(c), .events = POLLIN | (f == 1 ? POLLOUT : 0)};
		int n = poll(&pfd, 1, (int)left);
		if (n < 0 && errno != EINTR)
			break;
		if (n > 0 && (pfd.revents & (POLLIN | POLLERR | POLLHUP)) && !PQconsumeInput(c))
			break;
	}
	PQclear(last);
	return NULL;
}

/* PQexecParams with a client-side bound: NULL with the connection dropped (it is unusable
 * in the middle of a command) when no answer came in PG_CALL_TIMEOUT_MS. */
static PGresult *pg_exec(struct pf_store *st, const char *what, const char *sql,
			 const struct pgp *p, int *rc)
{
	struct store_pg *g = store_pg_of(st);
	bool timed_out = false;
	PGresult *r = NULL;

	g->round_trips++;
	if (PQsendQueryParams(g->conn, sql, p ? p->n : 0, NULL, p ? p->v : NULL, p ? p->len : NULL,
			      p ? p->fmt : NULL, 1))
		r = pg_wait(g->conn, mono_ms() + PG_CALL_TIMEOUT_MS, &timed_out);
	if (timed_out) {
		char m[200];
		snprintf(m, sizeof(m), "no answer within %d ms (connection dropped)",
			 PG_CALL_TIMEOUT_MS);
		PQfinish(g->conn);
		g->conn = NULL;
		pg_mark_down(g);
		*rc = pg_fail_msg(st, NULL, -EAGAIN, what, m);
		return NULL;
	}
	if (!r) {
		*rc = pg_fail(st, what, NULL);
		return NULL;
	}
	*rc = 0;
	return r;
}

/* Runs sql (?N placeholders) with p; the result (binary columns) or NULL with *rc set. */
static PGresult *pg_query(struct pf_store *st, const char *what, const char *sql, const struct pgp *p,
		   int *rc)
{
	char text[PG_SQL_MAX];
	PGresult *r;

	*rc = pg_ready(st);
	if (*rc < 0)
		return NULL;
	if (store_sql_to_pg(sql, text, sizeof(text)) < 0) {
		*rc = store_fail_other(st, NULL, -EINVAL, "postgres: statement too long");
		return NULL;
	}
	r = pg_exec(st, what, text, p, rc);
	if (!r)
		return NULL;
	switch (PQresultStatus(r)) {
	case PGRES_COMMAND_OK:
	case PGRES_TUPLES_OK:
		*rc = 0;
		return r;
	default:
		*rc = pg_fail(st, what, r);
		PQclear(r);
		return NULL;
	}
}

/* q() for a statement whose rows do not matter; *changed (may be NULL) gets the row count. */
static int q_exec(struct pf_store *st, const char *what, const char *sql, const struct pgp *p,
		  int64_t *changed)
{
	int rc;
	PGresult *r = pg_query(st, what, sql, p, &rc);
	if (!r)
		return rc;
	if (changed)
		*changed = strtoll(PQcmdTuples(r), NULL, 10);
	PQclear(r);
	return 0;
}

static int64_t col_i64(const PGresult *r, int row, int col)
{
	const unsigned char *b = (const unsigned char *)PQgetvalue(r, row, col);
	uint64_t v = 0;
	if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != 8)
		return 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | b[i];
	return (int64_t)v;
}

/* ---- Transactions and NOTIFY. */

static int tx_begin(struct pf_store *st)
{
	return q_exec(st, "begin", "BEGIN", NULL, NULL);
}

static void tx_rollback(struct pf_store *st)
{
	struct store_pg *g = store_pg_of(st);
	int rc;
	if (!g->down && PQstatus(g->conn) == CONNECTION_OK &&
	    PQtransactionStatus(g->conn) != PQTRANS_IDLE)
		PQclear(pg_exec(st, "rollback", "ROLLBACK", NULL, &rc));
}

static int tx_commit(struct pf_store *st, int rc)
{
	if (rc == 0)
		rc = q_exec(st, "commit", "COMMIT", NULL, NULL);
	if (rc < 0)
		tx_rollback(st);
	return rc;
}

/* Queues "<replica> <kind> <name>" on the channel; delivered at COMMIT, not at all on
 * ROLLBACK (PostgreSQL's NOTIFY semantics). */
static int notify(struct pf_store *st, const char *kind, const char *name)
{
	char payload[400];
	struct pgp p = {0};
	snprintf(payload, sizeof(payload), "%s %s %s", pf_store_replica_id(), kind, name);
	p_text(&p, payload);
	return q_exec(st, "notify", "SELECT pg_notify('" PF_STORE_PG_CHANNEL "', ?1)", &p, NULL);
}

/* ---- The driver (store_int.h): a statement runs at its first step, with every parameter
 * bound, and its rows are then read from the result. */

static int pgd_prepare(struct store_q *q)
{
	(void)q;
	return 0;
}

static int pgd_run(struct store_q *q)
{
	struct pgp p = {0};
	const char *sql = q->def->pg ? q->def->pg : q->def->sqlite;
	int rc;

	if (!*sql)
		return 0; /* a statement only SQLite needs: no rows, nothing changed */
	for (int i = 0; i < q->n; i++) {
		switch (q->p[i].kind) {
		case STORE_P_NULL:
			p_text(&p, NULL);
			break;
		case STORE_P_TEXT:
			p_text(&p, q->p[i].v);
			break;
		case STORE_P_BLOB:
			p_blob(&p, q->p[i].v, q->p[i].len);
			break;
		case STORE_P_I64:
			p_i64(&p, q->p[i].i);
			break;
		}
	}
	q->h = pg_query(q->st, q->what, sql, &p, &rc);
	if (!q->h)
		return rc;
	q->rows = PQntuples(q->h);
	q->row = -1;
	return 0;
}

static int pgd_step(struct store_q *q)
{
	if (!q->started) {
		int rc = pgd_run(q);
		if (rc < 0)
			return rc;
	}
	if (q->row + 1 >= q->rows)
		return 0;
	q->row++;
	return 1;
}

static int64_t pgd_col_i64(struct store_q *q, int col)
{
	return col_i64(q->h, q->row, col);
}

static const char *pgd_col_text(struct store_q *q, int col, size_t *len)
{
	if (PQgetisnull(q->h, q->row, col)) {
		*len = 0;
		return NULL;
	}
	*len = (size_t)PQgetlength(q->h, q->row, col);
	return PQgetvalue(q->h, q->row, col);
}

static const void *pgd_col_blob(struct store_q *q, int col, size_t *len)
{
	return pgd_col_text(q, col, len);
}

static int64_t pgd_changes(struct store_q *q)
{
	return q->h ? strtoll(PQcmdTuples(q->h), NULL, 10) : 0;
}

static void pgd_finish(struct store_q *q)
{
	PQclear(q->h);
}

static int pgd_begin(struct pf_store *st)
{
	return tx_begin(st);
}

static const struct store_driver store_pg_driver = {
    .prepare = pgd_prepare,
    .step = pgd_step,
    .col_i64 = pgd_col_i64,
    .col_text = pgd_col_text,
    .col_blob = pgd_col_blob,
    .changes = pgd_changes,
    .finish = pgd_finish,
    .begin = pgd_begin,
    .end = tx_commit,
    .notify = notify,
};

/* ---- Open and migrate. */

static int exec_simple(struct pf_store *st, struct pf_error *err, const char *what, const char *sql)
{
	struct store_pg *g = store_pg_of(st);
	PGresult *r = PQexec(g->conn, sql);
	int rc = 0;
	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
		rc = pg_fail_msg(st, err, PQstatus(g->conn) == CONNECTION_OK ? -EIO : -EAGAIN, what,
				 PQresultErrorMessage(r));
	PQclear(r);
	return rc;
}

/* All pending steps in one transaction under a transaction-level advisory lock: a second
 * replica starting at the same moment waits for the lock, then finds the version bumped. */
static int pg_migrate(struct pf_store *st, struct pf_error *err)
{
	struct store_pg *g = store_pg_of(st);
	size_t n;
	const struct store_migration *m = store_migrations(&n);
	char sql[160];
	int64_t v;
	int rc;

	rc = exec_simple(st, err, "migrate: begin", "BEGIN");
	if (rc < 0)
		return rc;
	snprintf(sql, sizeof(sql), "SELECT pg_advisory_xact_lock(%lld)",
		 (long long)PG_MIGRATE_LOCK);
	rc = exec_simple(st, err, "migrate: lock", sql);
	if (rc == 0)
		rc =
		    exec_simple(st, err, "migrate: version table",
				"CREATE TABLE IF NOT EXISTS profleet_schema (k INTEGER PRIMARY KEY "
				"CHECK (k = 0), version BIGINT NOT NULL);"
				"INSERT INTO profleet_schema VALUES (0, 0) ON CONFLICT DO NOTHING");
	if (rc < 0)
		goto fail;
	PGresult *r = PQexec(g->conn, "SELECT version FROM profleet_schema WHERE k = 0");
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		rc = pg_fail_msg(st, err, -EIO, "migrate: version", PQresultErrorMessage(r));
		PQclear(r);
		goto fail;
	}
	v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	if (v > (int64_t)n) {
		char msg[200];
		snprintf(msg, sizeof(msg),
			 "postgres: database schema version %lld is newer than this controller "
			 "knows (%zu); refusing to open it (upgrade the controller)",
			 (long long)v, n);
		rc = store_fail_other(st, err, -ENOTSUP, msg);
		goto fail;
	}
	for (; v < (int64_t)n; v++) {
		if (m[v].pg[0]) {
			snprintf(sql, sizeof(sql), "migrate: step %lld", (long long)v + 1);
			rc = exec_simple(st, err, sql, m[v].pg);
			if (rc < 0)
				goto fail;
		}
		snprintf(sql, sizeof(sql), "UPDATE profleet_schema SET version = %lld",
			 (long long)v + 1);
		rc = exec_simple(st, err, "migrate: version", sql);
		if (rc < 0)
			goto fail;
	}
	return exec_simple(st, err, "migrate: commit", "COMMIT");
fail:
	PQclear(PQexec(g->conn, "ROLLBACK"));
	return rc;
}

int store_pg_attach(struct pf_store *st, const char *url, struct pf_error *err)
{
	struct store_pg *g = calloc(1, sizeof(*g));
	if (!g || !(g->url = strdup(url))) {
		free(g);
		return pf_error_set(err, -ENOMEM, NULL, "store: out of memory");
	}
	st->pg = g;
	st->drv = &store_pg_driver;
	g->conn = pg_connect(url);
	if (!g->conn || PQstatus(g->conn) != CONNECTION_OK)
		return pg_connect_fail(st, err, g->conn);
	int rc = pg_migrate(st, err);
	PQsetnonblocking(g->conn, 1); /* from now on every call is bounded (pg_exec) */
	return rc;
}

void store_pg_detach(struct pf_store *st)
{
	if (!st->pg)
		return;
	PQfinish(st->pg->conn);
	free(st->pg->url);
	free(st->pg);
	st->pg = NULL;
	st->drv = &store_sqlite_driver;
}

/* ---- The listening connection (pf_store_listener, store.h): libpq's asynchronous connect,
 * then LISTEN sent without waiting, then notifications; every step on readiness only. */

enum listener_state { L_IDLE, L_CONNECTING, L_LISTEN_SENT, L_READY };

struct pf_store_listener {
	PGconn *conn;
	char *url;
	enum listener_state state;
	int wants;
	char error[400];
};

struct pf_store_listener *pf_store_listener_new(const char *url)
{
	struct pf_store_listener *l = calloc(1, sizeof(*l));
	if (!l || !(l->url = strdup(url))) {
		free(l);
		return NULL;
	}
	return l;
}

static void listener_drop(struct pf_store_listener *l)
{
	PQfinish(l->conn);
	l->conn = NULL;
	l->state = L_IDLE;
	l->wants = 0;
}

void pf_store_listener_free(struct pf_store_listener *l)
{
	if (!l)
		return;
	listener_drop(l);
	free(l->url);
	free(l);
}

/* Records "store: postgres: listen: <what>: <libpq's first line>", drops the connection and
 * returns -EAGAIN. */
static int listener_fail(struct pf_store_listener *l, const char *what, const char *msg)
{
	char line[300];
	first_line(msg && *msg ? msg : "connection lost", line, sizeof(line));
	if (l->state == L_CONNECTING && l->conn)
		snprintf(l->error, sizeof(l->error),
			 "store: postgres: listen: connect to %s:%s: %s",
			 PQhost(l->conn) ? PQhost(l->conn) : "?",
			 PQport(l->conn) && *PQport(l->conn) ? PQport(l->conn) : "5432", line);
	else
		snprintf(l->error, sizeof(l->error), "store: postgres: listen: %s: %s", what, line);
	listener_drop(l);
	return -EAGAIN;
}

void pf_store_listener_abort(struct pf_store_listener *l, const char *why)
{
	listener_fail(l, "connect", why);
}

int pf_store_listener_connect(struct pf_store_listener *l)
{
	const char *const val[] = PG_VALUES(l->url);
	listener_drop(l);
	l->conn = PQconnectStartParams(pg_kw, val, 1);
	if (!l->conn || PQstatus(l->conn) == CONNECTION_BAD)
		return listener_fail(l, "connect",
				     l->conn ? PQerrorMessage(l->conn) : "out of memory");
	PQsetNoticeProcessor(l->conn, pg_no_notice, NULL);
	PQsetnonblocking(l->conn, 1);
	l->state = L_CONNECTING;
	l->wants = PF_STORE_WANT_WRITE; /* libpq: as if PQconnectPoll said PGRES_POLLING_WRITING */
	return 0;
}

int pf_store_listener_fd(const struct pf_store_listener *l)
{
	return l->conn ? PQsocket(l->conn) : -1;
}

int pf_store_listener_wants(const struct pf_store_listener *l)
{
	return l->wants;
}

bool pf_store_listener_ready(const struct pf_store_listener *l)
{
	return l->state == L_READY;
}

const char *pf_store_listener_error(const struct pf_store_listener *l)
{
	return l->error;
}

static int listener_connecting(struct pf_store_listener *l)
{
	switch (PQconnectPoll(l->conn)) {
	case PGRES_POLLING_READING:
		l->wants = PF_STORE_WANT_READ;
		return 0;
	case PGRES_POLLING_WRITING:
		l->wants = PF_STORE_WANT_WRITE;
		return 0;
	case PGRES_POLLING_OK:
		break;
	default:
		return listener_fail(l, "connect", PQerrorMessage(l->conn));
	}
	if (!PQsendQuery(l->conn, "LISTEN " PF_STORE_PG_CHANNEL))
		return listener_fail(l, "LISTEN", PQerrorMessage(l->conn));
	l->state = L_LISTEN_SENT;
	l->wants = PF_STORE_WANT_READ | (PQflush(l->conn) == 1 ? PF_STORE_WANT_WRITE : 0);
	return 0;
}

/* The LISTEN's answer: 0 while it has not come, -EAGAIN on failure; L_READY once it has. */
static int listener_listen_sent(struct pf_store_listener *l)
{
	if (PQflush(l->conn) < 0 || !PQconsumeInput(l->conn))
		return listener_fail(l, "LISTEN", PQerrorMessage(l->conn));
	l->wants = PF_STORE_WANT_READ | (PQflush(l->conn) == 1 ? PF_STORE_WANT_WRITE : 0);
	while (!PQisBusy(l->conn)) {
		PGresult *r = PQgetResult(l->conn);
		if (!r) {
			l->state = L_READY;
			l->wants = PF_STORE_WANT_READ;
			return 0;
		}
		bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
		char msg[300];
		first_line(PQresultErrorMessage(r), msg, sizeof(msg));
		PQclear(r);
		if (!ok)
			return listener_fail(l, "LISTEN", msg);
	}
	return 0;
}

int pf_store_listener_step(struct pf_store_listener *l,
			   void (*cb)(const char *kind, const char *name, void *ud), void *ud)
{
	PGnotify *n;
	int count = 0, rc;

	switch (l->state) {
	case L_IDLE:
		return -EAGAIN;
	case L_CONNECTING:
		return listener_connecting(l);
	case L_LISTEN_SENT:
		rc = listener_listen_sent(l);
		if (rc < 0 || l->state != L_READY)
			return rc;
		break; /* notifications may have come with the answer */
	case L_READY:
		if (!PQconsumeInput(l->conn) || PQstatus(l->conn) != CONNECTION_OK)
			return listener_fail(l, "listen", PQerrorMessage(l->conn));
		break;
	}
	while ((n = PQnotifies(l->conn))) {
		/* "<replica> <kind> <name>": our own are skipped (we applied them already). */
		char *p = n->extra, *kind, *name;
		size_t rl = strcspn(p, " ");
		if (p[rl] == ' ' && (rl != strlen(pf_store_replica_id()) ||
				     strncmp(p, pf_store_replica_id(), rl) != 0)) {
			kind = p + rl + 1;
			name = kind + strcspn(kind, " ");
			if (*name)
				*name++ = '\0';
			cb(kind, name, ud);
			count++;
		}
		PQfreemem(n);
	}
	return count;
}
