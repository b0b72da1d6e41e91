/* store_captures.c — incident captures and their per-agent rows (schema version 4, migration
 * in store.c); see store.h ("Incident captures"). Statements are prepared on first use and
 * cached per connection in struct store_cap. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pf/compiler.h"
#include "store_int.h"
#include "store_pg.h"

#define CAP_COLS                                                                                   \
	"id, state, created_ms, started_ms, finished_ms, deadline_ms, created_by, request, "       \
	"agents_matched"
#define AGENT_COLS "capture, uid, state, samples, bytes, profile_ids, error_code, error, updated_ms"

enum cap_stmt { C_UPSERT, C_AGENT_UPSERT, C_GET, C_AGENTS, C_LIST, C_FIND_PROFILE, C__COUNT };

static const char *const cap_sql[C__COUNT] = {
    [C_UPSERT] = "INSERT INTO captures (" CAP_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
		 "ON CONFLICT (id) DO UPDATE SET state = excluded.state, "
		 "started_ms = excluded.started_ms, finished_ms = excluded.finished_ms, "
		 "deadline_ms = excluded.deadline_ms",
    [C_AGENT_UPSERT] = "INSERT INTO capture_agents (" AGENT_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, "
		       "?6, ?7, ?8, ?9) ON CONFLICT (capture, uid) DO UPDATE SET "
		       "state = excluded.state, samples = excluded.samples, "
		       "bytes = excluded.bytes, profile_ids = excluded.profile_ids, "
		       "error_code = excluded.error_code, error = excluded.error, "
		       "updated_ms = excluded.updated_ms",
    [C_GET] = "SELECT " CAP_COLS " FROM captures WHERE id = ?1",
    [C_AGENTS] = "SELECT " AGENT_COLS " FROM capture_agents WHERE capture = ?1 ORDER BY uid",
    [C_LIST] = "SELECT " CAP_COLS " FROM captures WHERE (?1 IS NULL OR state = ?1) "
	       "AND (?2 = 0 OR state IN ('pending', 'running')) AND (?3 IS NULL OR id < ?3) "
	       "ORDER BY id DESC LIMIT ?4",
    [C_FIND_PROFILE] = "SELECT id FROM profiles WHERE profile_id = ?1 ORDER BY id DESC LIMIT 1",
};

struct store_cap {
	sqlite3_stmt *stmt[C__COUNT];
};

void store_cap_release(struct store_cap *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < C__COUNT; i++)
		sqlite3_finalize(c->stmt[i]);
	free(c);
}

/* A cached statement, prepared on first use; NULL with *rc set on failure. */
static sqlite3_stmt *cstmt(struct pf_store *st, enum cap_stmt id, int *rc)
{
	struct store_cap **slot = store_cap_slot(st);

	if (!*slot && !(*slot = calloc(1, sizeof(**slot)))) {
		*rc = store_fail_other(st, NULL, -ENOMEM, "captures: out of memory");
		return NULL;
	}
	return store_stmt_cached(st, &(*slot)->stmt[id], cap_sql[id], rc);
}

#define CSTMT(name, st, id, rc) _cleanup_(store_stmt_resetp) sqlite3_stmt *name = cstmt((st), (id), (rc))

static int bind_text(sqlite3_stmt *s, int i, const char *v)
{
	return sqlite3_bind_text(s, i, v ? v : "", -1, SQLITE_STATIC);
}

static int save_one(struct pf_store *st, const struct pf_capture_row *c)
{
	int rc;
	CSTMT(s, st, C_UPSERT, &rc);

	if (!s)
		return rc;
	if (!c->id || !c->state || bind_text(s, 1, c->id) || bind_text(s, 2, c->state) ||
	    sqlite3_bind_int64(s, 3, c->created_ms) || sqlite3_bind_int64(s, 4, c->started_ms) ||
	    sqlite3_bind_int64(s, 5, c->finished_ms) || sqlite3_bind_int64(s, 6, c->deadline_ms) ||
	    bind_text(s, 7, c->created_by) || bind_text(s, 8, c->request_json) ||
	    sqlite3_bind_int64(s, 9, c->agents_matched))
		return c->id && c->state ? store_fail_sqlite(st, NULL, "captures: bind")
					 : store_fail_other(st, NULL, -EINVAL, "captures: bad row");
	return store_step_done(st, s, "captures: save");
}

static int save_agent(struct pf_store *st, const struct pf_capture_agent_row *a)
{
	int rc;
	CSTMT(s, st, C_AGENT_UPSERT, &rc);

	if (!s)
		return rc;
	if (!a->capture || !a->state || a->n_profile_ids > 4096 ||
	    (a->n_profile_ids && !a->profile_ids))
		return store_fail_other(st, NULL, -EINVAL, "captures: bad agent row");
	if (bind_text(s, 1, a->capture) || sqlite3_bind_blob(s, 2, a->uid, 16, SQLITE_STATIC) ||
	    bind_text(s, 3, a->state) || sqlite3_bind_int64(s, 4, a->samples) ||
	    sqlite3_bind_int64(s, 5, a->bytes) ||
	    sqlite3_bind_blob(s, 6, a->n_profile_ids ? (const void *)a->profile_ids : "",
			      (int)(a->n_profile_ids * 16), SQLITE_STATIC) ||
	    bind_text(s, 7, a->error_code) || bind_text(s, 8, a->error) ||
	    sqlite3_bind_int64(s, 9, a->updated_ms))
		return store_fail_sqlite(st, NULL, "captures: bind");
	return store_step_done(st, s, "captures: save agent");
}

int pf_store_captures_save(struct pf_store *st, const struct pf_capture_row *caps, size_t n_caps,
			   const struct pf_capture_agent_row *agents, size_t n_agents)
{
	STORE_PG_DISPATCH(st, store_pg_captures_save(st, caps, n_caps, agents, n_agents));
	if ((n_caps && !caps) || (n_agents && !agents))
		return -EINVAL;
	if (!n_caps && !n_agents)
		return 0;
	int rc = store_tx_begin(st);
	for (size_t i = 0; rc == 0 && i < n_caps; i++)
		rc = save_one(st, &caps[i]);
	for (size_t i = 0; rc == 0 && i < n_agents; i++)
		rc = save_agent(st, &agents[i]);
	if (rc < 0) {
		store_tx_rollback(st);
		return rc;
	}
	return store_tx_commit(st);
}

/* Text columns read as "" when SQLite cannot produce them only on out of memory. */
static int read_cap(struct pf_store *st, sqlite3_stmt *s, struct pf_capture_row *c)
{
	const char *t[4];
	static const int cols[4] = {0, 1, 6, 7};

	for (int i = 0; i < 4; i++)
		if (!(t[i] = (const char *)sqlite3_column_text(s, cols[i])))
			return store_fail_other(st, NULL, -ENOMEM, "captures: out of memory");
	c->id = t[0];
	c->state = t[1];
	c->created_ms = sqlite3_column_int64(s, 2);
	c->started_ms = sqlite3_column_int64(s, 3);
	c->finished_ms = sqlite3_column_int64(s, 4);
	c->deadline_ms = sqlite3_column_int64(s, 5);
	c->created_by = t[2];
	c->request_json = t[3];
	c->agents_matched = sqlite3_column_int64(s, 8);
	return 0;
}

static int read_agent(struct pf_store *st, sqlite3_stmt *s, struct pf_capture_agent_row *a)
{
	const char *t[4];
	static const int cols[4] = {0, 2, 6, 7};

	memset(a, 0, sizeof(*a));
	for (int i = 0; i < 4; i++)
		if (!(t[i] = (const char *)sqlite3_column_text(s, cols[i])))
			return store_fail_other(st, NULL, -ENOMEM, "captures: out of memory");
	const void *uid = sqlite3_column_blob(s, 1);
	if (!uid || sqlite3_column_bytes(s, 1) != 16)
		return store_fail_other(st, NULL, -EIO, "captures: bad agent uid");
	memcpy(a->uid, uid, 16);
	a->capture = t[0];
	a->state = t[1];
	a->samples = sqlite3_column_int64(s, 3);
	a->bytes = sqlite3_column_int64(s, 4);
	a->profile_ids = sqlite3_column_blob(s, 5);
	a->n_profile_ids = (size_t)sqlite3_column_bytes(s, 5) / 16;
	if (!a->profile_ids)
		a->n_profile_ids = 0;
	a->error_code = t[2];
	a->error = t[3];
	a->updated_ms = sqlite3_column_int64(s, 8);
	return 0;
}

int pf_store_capture_get(struct pf_store *st, const char *id,
			 int (*cap_cb)(const struct pf_capture_row *c, void *ud),
			 int (*agent_cb)(const struct pf_capture_agent_row *a, void *ud), void *ud)
{
	STORE_PG_DISPATCH(st, store_pg_capture_get(st, id, cap_cb, agent_cb, ud));
	int rc;

	if (!id || !cap_cb)
		return -EINVAL;
	{
		CSTMT(s, st, C_GET, &rc);
		struct pf_capture_row c;
		if (!s)
			return rc;
		if (bind_text(s, 1, id))
			return store_fail_sqlite(st, NULL, "captures: get: bind");
		rc = store_step_row(st, s, -ENOENT, "captures: get");
		if (rc <= 0)
			return rc;
		rc = read_cap(st, s, &c);
		if (rc == 0)
			rc = cap_cb(&c, ud);
		if (rc)
			return rc;
	}
	if (!agent_cb)
		return 0;
	CSTMT(s, st, C_AGENTS, &rc);
	if (!s)
		return rc;
	if (bind_text(s, 1, id))
		return store_fail_sqlite(st, NULL, "captures: agents: bind");
	for (;;) {
		struct pf_capture_agent_row a;
		rc = store_step_row(st, s, 0, "captures: agents");
		if (rc <= 0)
			return rc;
		rc = read_agent(st, s, &a);
		if (rc == 0)
			rc = agent_cb(&a, ud);
		if (rc)
			return rc;
	}
}

int pf_store_captures_foreach(struct pf_store *st, const struct pf_capture_query *q,
			      int (*cb)(const struct pf_capture_row *c, void *ud), void *ud)
{
	STORE_PG_DISPATCH(st, store_pg_captures_foreach(st, q, cb, ud));
	int rc;

	if (!q || !cb)
		return -EINVAL;
	CSTMT(s, st, C_LIST, &rc);
	if (!s)
		return rc;
	if ((q->state && *q->state ? bind_text(s, 1, q->state) : sqlite3_bind_null(s, 1)) ||
	    sqlite3_bind_int(s, 2, q->unfinished) ||
	    (q->before_id && *q->before_id ? bind_text(s, 3, q->before_id)
					   : sqlite3_bind_null(s, 3)) ||
	    sqlite3_bind_int64(s, 4, q->limit ? (int64_t)pf_min(q->limit, (size_t)INT64_MAX) : -1))
		return store_fail_sqlite(st, NULL, "captures: list: bind");
	for (;;) {
		struct pf_capture_row c;
		rc = store_step_row(st, s, 0, "captures: list");
		if (rc <= 0)
			return rc;
		rc = read_cap(st, s, &c);
		if (rc == 0)
			rc = cb(&c, ud);
		if (rc)
			return rc;
	}
}

int pf_store_profile_find(struct pf_store *st, const uint8_t profile_id[16], int64_t *id)
{
	int rc;
	CSTMT(s, st, C_FIND_PROFILE, &rc);

	if (!s)
		return rc;
	if (!profile_id || !id)
		return -EINVAL;
	if (sqlite3_bind_blob(s, 1, profile_id, 16, SQLITE_STATIC))
		return store_fail_sqlite(st, NULL, "profiles: find: bind");
	rc = store_step_row(st, s, -ENOENT, "profiles: find");
	if (rc <= 0)
		return rc;
	*id = sqlite3_column_int64(s, 0);
	return 0;
}
