/* store_agents.c — the agent rows and the replicas' heartbeat, on either backend; see store.h
 * ("Agents") and docs/internals/store.md ("Agents of other replicas").
 *
 * On PostgreSQL every agent-row write also stamps written_ms with the database's clock and
 * names the replica that wrote it, so that replicas sharing the tables read only the rows
 * that changed and can disconnect the rows of a replica that died; SQLite (one replica)
 * keeps written_ms at 0 and replica at ''. Those differences live in the statements'
 * two texts: the code is the same for both. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pf/buf.h"
#include "pf/compiler.h"
#include "pf/uuid.h"
#include "store_int.h"

#define AGENT_COLS                                                                                 \
	"uid, attributes_json, capabilities, health_json, effective_config, effective_hash, "      \
	"config_name, config_version, remote_hash, remote_status, remote_error, connected, "       \
	"first_seen_ms, last_seen_ms"
#define AGENT_VALUES "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14"
#define AGENT_SET                                                                                  \
	"attributes_json = excluded.attributes_json, capabilities = excluded.capabilities, "      \
	"health_json = excluded.health_json, effective_config = excluded.effective_config, "      \
	"effective_hash = excluded.effective_hash, config_name = excluded.config_name, "          \
	"config_version = excluded.config_version, remote_hash = excluded.remote_hash, "          \
	"remote_status = excluded.remote_status, remote_error = excluded.remote_error, "          \
	"connected = excluded.connected, last_seen_ms = excluded.last_seen_ms"
/* The database's clock in ms: one clock for every replica's stamps. */
#define PG_NOW_MS "(extract(epoch from clock_timestamp()) * 1000)::bigint"
/* Rows written this long before the newest stamp seen are read again: a transaction stamps
 * its rows before it commits (each statement within the PostgreSQL call bound). */
#define SINCE_MARGIN_MS 10000

/* ?15, the writing replica's id, is PostgreSQL's alone (SQLite binds ?1..?14). */
static const struct store_stmt agent_upsert = {
    .sqlite = "INSERT INTO agents (" AGENT_COLS ") VALUES (" AGENT_VALUES ") "
	      "ON CONFLICT (uid) DO UPDATE SET " AGENT_SET,
    .pg = "INSERT INTO agents (" AGENT_COLS ", written_ms, replica) "
	  "VALUES (" AGENT_VALUES ", " PG_NOW_MS ", ?15) ON CONFLICT (uid) DO UPDATE SET " AGENT_SET
	  ", written_ms = excluded.written_ms, replica = excluded.replica"};
static const struct store_stmt agent_set_seen = {
    .sqlite = "UPDATE agents SET last_seen_ms = ?2 WHERE uid = ?1",
    .pg = "UPDATE agents SET last_seen_ms = ?2, written_ms = " PG_NOW_MS " WHERE uid = ?1"};
static const struct store_stmt agent_foreach = {.sqlite = "SELECT " AGENT_COLS " FROM agents"};
/* SQLite keeps no stamp (every written_ms is 0): every row, and the cursor stays. */
static const struct store_stmt agent_since = {
    .sqlite = "SELECT " AGENT_COLS ", written_ms FROM agents",
    .pg = "SELECT " AGENT_COLS ", written_ms FROM agents WHERE written_ms >= ?1::bigint"};
static const struct store_stmt agent_get = {
    .sqlite = "SELECT " AGENT_COLS " FROM agents WHERE uid = ?1"};
/* At start, on SQLite only: replicas sharing PostgreSQL leave the others' agents connected (a
 * replica that died is found by the survivors' heartbeat instead). */
static const struct store_stmt agent_disconnect_all = {
    .sqlite = "UPDATE agents SET connected = 0 WHERE connected != 0", .pg = ""};
static const struct store_stmt agent_delete = {.sqlite = "DELETE FROM agents WHERE uid = ?1"};

/* The heartbeat: PostgreSQL's alone (one SQLite replica has nobody to watch). */
static const struct store_stmt beat_update = {
    .pg = "UPDATE replicas SET last_seen_ms = " PG_NOW_MS " WHERE id = ?1"};
static const struct store_stmt beat_join = {
    .pg = "INSERT INTO replicas (id, last_seen_ms) VALUES (?1, " PG_NOW_MS ")"};
static const struct store_stmt beat_disconnect = {
    .pg = "UPDATE agents SET connected = 0, written_ms = " PG_NOW_MS
	  " WHERE connected <> 0 AND replica IN (SELECT id FROM replicas"
	  " WHERE last_seen_ms < " PG_NOW_MS " - ?1::bigint)"};
static const struct store_stmt beat_forget = {
    .pg = "DELETE FROM replicas WHERE last_seen_ms < " PG_NOW_MS " - ?1::bigint"};

/* PostgreSQL, many rows per statement: every column is one array parameter (an array
 * literal: text[] or bigint[], blobs as hex text), unnested on the server. A uid twice in
 * one statement keeps its last row (ON CONFLICT may touch a row only once per statement). */
#define UNNEST_COLS                                                                                \
	"unnest(?1::text[], ?2::text[], ?3::bigint[], ?4::text[], ?5::text[], ?6::text[], "        \
	"?7::text[], ?8::bigint[], ?9::text[], ?10::bigint[], ?11::text[], ?12::bigint[], "        \
	"?13::bigint[], ?14::bigint[]) WITH ORDINALITY AS u(uid, attrs, caps, health, eff, effh, " \
	"cname, cver, rh, rs, rerr, conn, fs, ls, ord)"
static const struct store_stmt agent_upsert_many = {
    .pg = "INSERT INTO agents (" AGENT_COLS ", written_ms, replica) "
	  "SELECT DISTINCT ON (u.uid) decode(u.uid, 'hex'), u.attrs, u.caps, u.health, u.eff, "
	  "decode(u.effh, 'hex'), u.cname, u.cver, decode(u.rh, 'hex'), u.rs, u.rerr, u.conn, "
	  "u.fs, u.ls, " PG_NOW_MS ", ?15 FROM " UNNEST_COLS " ORDER BY u.uid, u.ord DESC "
	  "ON CONFLICT (uid) DO UPDATE SET " AGENT_SET
	  ", written_ms = excluded.written_ms, replica = excluded.replica"};
static const struct store_stmt agent_set_seen_many = {
    .pg = "UPDATE agents AS a SET last_seen_ms = u.ls, written_ms = " PG_NOW_MS
	  " FROM unnest(?1::text[], ?2::bigint[]) AS u(uid, ls) WHERE a.uid = decode(u.uid, 'hex')"};
#define MANY_COLS 14
/* A statement's array literals together stay under this (a batch is cut before it). */
#define MANY_MAX_BYTES ((size_t)8 << 20)

void pf_store_set_agent_batch(struct pf_store *st, size_t rows)
{
	st->agent_batch = rows;
}

/* One element of an array literal: NULL, a decimal, or a double-quoted string with '"' and
 * '\' escaped (PostgreSQL's array input syntax). */
static int arr_sep(struct pf_buf *b)
{
	return pf_buf_append(b, b->len > 1 ? "," : "", b->len > 1);
}

static int arr_text(struct pf_buf *b, const char *s)
{
	int rc = arr_sep(b);
	if (rc < 0 || !s)
		return rc < 0 ? rc : pf_buf_append_str(b, "NULL");
	rc = pf_buf_append(b, "\"", 1);
	for (const char *p = s; rc == 0 && *p;) {
		size_t run = strcspn(p, "\"\\");
		rc = pf_buf_append(b, p, run);
		p += run;
		if (rc == 0 && *p) {
			char esc[2] = {'\\', *p++};
			rc = pf_buf_append(b, esc, 2);
		}
	}
	return rc < 0 ? rc : pf_buf_append(b, "\"", 1);
}

static int arr_hex(struct pf_buf *b, const uint8_t *v, size_t n)
{
	char hex[65];
	if (!v)
		return arr_text(b, NULL);
	pf_hex_encode(v, n, hex);
	return arr_text(b, hex);
}

static int arr_i64(struct pf_buf *b, int64_t v)
{
	char num[24];
	snprintf(num, sizeof(num), "%lld", (long long)v);
	int rc = arr_sep(b);
	return rc < 0 ? rc : pf_buf_append_str(b, num);
}

/* Appends row r to the column arrays (seen: uid and last_seen_ms only): 0, or -ENOMEM when
 * a column's buffer could not grow (out of memory, or past its cap), which fails the
 * whole batch. */
static int many_row(struct pf_buf *c, const struct pf_agent_row *r, bool seen)
{
	int rc = arr_hex(&c[0], r->uid, 16);
	if (seen)
		return (rc | arr_i64(&c[1], r->last_seen_ms)) < 0 ? -ENOMEM : 0;
	rc |= arr_text(&c[1], r->attributes_json ? r->attributes_json : "{}");
	rc |= arr_i64(&c[2], (int64_t)r->capabilities);
	rc |= arr_text(&c[3], r->health_json);
	rc |= arr_text(&c[4], r->effective_config);
	rc |= arr_hex(&c[5], r->has_effective_hash ? r->effective_hash : NULL, 32);
	rc |= arr_text(&c[6], r->config_name);
	rc |= arr_i64(&c[7], r->config_version);
	rc |= arr_hex(&c[8], r->has_remote_hash ? r->remote_hash : NULL, 32);
	rc |= arr_i64(&c[9], r->remote_status);
	rc |= arr_text(&c[10], r->remote_error);
	rc |= arr_i64(&c[11], r->connected ? 1 : 0);
	rc |= arr_i64(&c[12], r->first_seen_ms);
	rc |= arr_i64(&c[13], r->last_seen_ms);
	return rc < 0 ? -ENOMEM : 0;
}

/* Writes rows[0..n) with the many-row statement, at most `batch` rows (and MANY_MAX_BYTES of
 * literals) per statement, inside the caller's transaction. */
static int agents_write_many(struct pf_store *st, const char *what, const struct pf_agent_row *rows,
			     size_t n, bool seen, size_t batch)
{
	struct pf_buf c[MANY_COLS];
	size_t ncol = seen ? 2 : MANY_COLS;
	int rc = 0;

	for (size_t k = 0; k < ncol; k++)
		pf_buf_init(&c[k], MANY_MAX_BYTES * 8); /* a cap: one huge row still fits */
	for (size_t i = 0; rc == 0 && i < n;) {
		size_t in = 0, bytes = 0;
		for (size_t k = 0; k < ncol; k++) {
			pf_buf_reset(&c[k]);
			rc = rc < 0 ? rc : pf_buf_append(&c[k], "{", 1);
		}
		for (; rc == 0 && i < n && in < batch && bytes < MANY_MAX_BYTES; i++, in++) {
			rc = many_row(c, &rows[i], seen);
			bytes = 0;
			for (size_t k = 0; k < ncol; k++)
				bytes += c[k].len;
		}
		for (size_t k = 0; rc == 0 && k < ncol; k++)
			rc = pf_buf_append(&c[k], "}", 2); /* with its NUL */
		if (rc < 0) {
			rc = store_fail_other(st, NULL, rc, what);
			break;
		}
		const char *v[MANY_COLS];
		for (size_t k = 0; k < ncol; k++)
			v[k] = (const char *)c[k].data;
		if (seen)
			rc = store_exec(st, &agent_set_seen_many, what,
					STORE_ARGS(store_v_text(v[0]), store_v_text(v[1])), NULL);
		else
			rc = store_exec(
			    st, &agent_upsert_many, what,
			    STORE_ARGS(store_v_text(v[0]), store_v_text(v[1]), store_v_text(v[2]),
				       store_v_text(v[3]), store_v_text(v[4]), store_v_text(v[5]),
				       store_v_text(v[6]), store_v_text(v[7]), store_v_text(v[8]),
				       store_v_text(v[9]), store_v_text(v[10]), store_v_text(v[11]),
				       store_v_text(v[12]), store_v_text(v[13]),
				       store_v_text(pf_store_replica_id())),
			    NULL);
	}
	for (size_t k = 0; k < ncol; k++)
		pf_buf_release(&c[k]);
	return rc;
}

/* Runs def once per row in one transaction, the upsert's parameters or (seen) the uid and
 * last_seen_ms; on PostgreSQL, many rows per statement (agents_write_many) unless the
 * batch is set to 1. */
static int agents_write(struct pf_store *st, const struct store_stmt *def, const char *what,
			const struct pf_agent_row *rows, size_t n, bool seen)
{
	if (n == 0)
		return 0;
	if (!rows)
		return -EINVAL;
	int rc = store_tx_begin(st);
	size_t batch = st->agent_batch ? st->agent_batch : PF_STORE_AGENT_BATCH;
	if (rc == 0 && pf_store_is_shared(st) && batch > 1)
		return store_tx_end(st, agents_write_many(st, what, rows, n, seen, batch));
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const struct pf_agent_row *r = &rows[i];
		if (seen) {
			rc = store_exec(st, def, what,
					STORE_ARGS(store_v_blob(r->uid, 16), store_v_i64(r->last_seen_ms)),
					NULL);
			continue;
		}
		rc = store_exec(
		    st, def, what,
		    STORE_ARGS(store_v_blob(r->uid, 16),
			       store_v_text(r->attributes_json ? r->attributes_json : "{}"),
			       store_v_i64((int64_t)r->capabilities), store_v_text(r->health_json),
			       store_v_text(r->effective_config),
			       store_v_blob(r->has_effective_hash ? r->effective_hash : NULL, 32),
			       store_v_text(r->config_name), store_v_i64(r->config_version),
			       store_v_blob(r->has_remote_hash ? r->remote_hash : NULL, 32),
			       store_v_i64(r->remote_status), store_v_text(r->remote_error),
			       store_v_i64(r->connected ? 1 : 0), store_v_i64(r->first_seen_ms),
			       store_v_i64(r->last_seen_ms), store_v_text(pf_store_replica_id())),
		    NULL);
	}
	return store_tx_end(st, rc);
}

int pf_store_agents_upsert(struct pf_store *st, const struct pf_agent_row *rows, size_t n)
{
	return agents_write(st, &agent_upsert, "agents_upsert", rows, n, false);
}

int pf_store_agents_set_seen(struct pf_store *st, const struct pf_agent_row *rows, size_t n)
{
	return agents_write(st, &agent_set_seen, "agents_set_seen", rows, n, true);
}

struct agent_iter {
	int (*cb)(const struct pf_agent_row *row, void *ud);
	void *ud;
	int64_t newest; /* agent_since: the newest written_ms read */
	bool stamped;
};

/* Hands one row (AGENT_COLS, then written_ms when it->stamped) to the caller's callback. */
static int on_agent(struct store_q *q, void *ud)
{
	struct agent_iter *it = ud;
	struct pf_agent_row r;

	memset(&r, 0, sizeof(r));
	if (!store_q_col_fixed(q, 0, r.uid, sizeof(r.uid)))
		return store_fail_other(q->st, NULL, -EIO, "agents_foreach: bad stored uid");
	r.attributes_json = store_q_col_text(q, 1);
	r.capabilities = (uint64_t)store_q_col_i64(q, 2);
	r.health_json = store_q_col_text(q, 3);
	r.effective_config = store_q_col_text(q, 4);
	r.has_effective_hash = store_q_col_fixed(q, 5, r.effective_hash, 32);
	r.config_name = store_q_col_text(q, 6);
	r.config_version = store_q_col_i64(q, 7);
	r.has_remote_hash = store_q_col_fixed(q, 8, r.remote_hash, 32);
	r.remote_status = (int)store_q_col_i64(q, 9);
	r.remote_error = store_q_col_text(q, 10);
	r.connected = store_q_col_i64(q, 11) != 0;
	r.first_seen_ms = store_q_col_i64(q, 12);
	r.last_seen_ms = store_q_col_i64(q, 13);
	if (q->oom)
		return store_fail_other(q->st, NULL, -ENOMEM, "agents_foreach: out of memory");
	if (!r.attributes_json)
		r.attributes_json = "{}";
	if (it->stamped)
		it->newest = pf_max(it->newest, store_q_col_i64(q, 14));
	return it->cb(&r, it->ud);
}

int pf_store_agents_foreach(struct pf_store *st,
			    int (*cb)(const struct pf_agent_row *row, void *ud), void *ud)
{
	struct agent_iter it = {.cb = cb, .ud = ud};

	if (!cb)
		return -EINVAL;
	return store_each(st, &agent_foreach, "agents_foreach", NULL, 0, on_agent, &it);
}

int pf_store_agents_foreach_since(struct pf_store *st, int64_t *since_ms,
				  int (*cb)(const struct pf_agent_row *row, void *ud), void *ud)
{
	if (!cb || !since_ms)
		return -EINVAL;
	struct agent_iter it = {.cb = cb, .ud = ud, .newest = *since_ms, .stamped = true};
	int64_t from = *since_ms > SINCE_MARGIN_MS ? *since_ms - SINCE_MARGIN_MS : 0;
	int rc = store_each(st, &agent_since, "agents_foreach_since",
			    STORE_ARGS(store_v_i64(from)), on_agent, &it);
	if (rc == 0)
		*since_ms = it.newest;
	return rc;
}

int pf_store_agent_get(struct pf_store *st, const uint8_t uid[16],
		       int (*cb)(const struct pf_agent_row *row, void *ud), void *ud)
{
	STORE_Q(q);
	struct agent_iter it = {.cb = cb, .ud = ud};
	int rc = store_q_open(&q, st, &agent_get, "agent_get", STORE_ARGS(store_v_blob(uid, 16)));

	if (rc == 0)
		rc = store_q_step(&q);
	if (rc <= 0)
		return rc ? rc : -ENOENT;
	return on_agent(&q, &it);
}

int pf_store_agents_mark_all_disconnected(struct pf_store *st)
{
	return store_exec(st, &agent_disconnect_all, "agents_mark_all_disconnected", NULL, 0, NULL);
}

int pf_store_agent_delete(struct pf_store *st, const uint8_t uid[16])
{
	int64_t n = 0;
	int rc;

	if (!uid)
		return -EINVAL;
	rc = store_exec(st, &agent_delete, "agent_delete", STORE_ARGS(store_v_blob(uid, 16)), &n);
	if (rc < 0)
		return rc;
	return n > 0 ? 0 : -ENOENT;
}

int pf_store_replica_beat(struct pf_store *st, int64_t dead_after_ms, size_t *marked,
			  bool *revived)
{
	int64_t n = 0;

	*marked = 0;
	*revived = false;
	if (!pf_store_is_shared(st))
		return 0; /* one replica: nobody else to watch */
	int rc = store_tx_begin(st);
	if (rc == 0)
		rc = store_exec(st, &beat_update, "replicas: beat",
				STORE_ARGS(store_v_text(pf_store_replica_id())), &n);
	if (rc == 0 && n == 0) {
		*revived = true;
		rc = store_exec(st, &beat_join, "replicas: join",
				STORE_ARGS(store_v_text(pf_store_replica_id())), NULL);
	}
	n = 0;
	if (rc == 0)
		rc = store_exec(st, &beat_disconnect, "replicas: disconnect the agents of dead ones",
				STORE_ARGS(store_v_i64(dead_after_ms)), &n);
	if (rc == 0)
		rc = store_exec(st, &beat_forget, "replicas: forget dead ones",
				STORE_ARGS(store_v_i64(dead_after_ms)), NULL);
	rc = store_tx_end(st, rc);
	if (rc == 0)
		*marked = (size_t)n;
	else
		*revived = false;
	return rc;
}
