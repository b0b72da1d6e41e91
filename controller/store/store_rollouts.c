/* store_rollouts.c — staged rollouts, their per-agent rows, agent pins and served config
 * versions (schema version 5, migration in store.c); see store.h ("Staged rollouts").
 * Statements are prepared on first use and cached per connection in struct store_roll. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pf/compiler.h"
#include "store_int.h"
#include "store_pg.h"

#define RO_COLS "id, config, version, state, created_ms, updated_ms, created_by, spec, progress"
#define RA_COLS "rollout, uid, batch, from_version, state, revert, error, updated_ms"

enum roll_stmt {
	R_UPSERT,
	R_AGENT_UPSERT,
	R_PIN_SET,
	R_PIN_DEL,
	R_GET,
	R_AGENTS,
	R_LIST,
	R_PINS,
	R_PINS_CLEAR,
	R_SERVE_SET,
	R_SERVE_DEL,
	R_SERVE_LIST,
	R__COUNT
};

static const char *const roll_sql[R__COUNT] = {
    [R_UPSERT] = "INSERT INTO rollouts (" RO_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
		 "ON CONFLICT (id) DO UPDATE SET state = excluded.state, "
		 "updated_ms = excluded.updated_ms, progress = excluded.progress",
    [R_AGENT_UPSERT] = "INSERT INTO rollout_agents (" RA_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
		       "?7, ?8) ON CONFLICT (rollout, uid) DO UPDATE SET state = excluded.state, "
		       "revert = excluded.revert, error = excluded.error, "
		       "updated_ms = excluded.updated_ms",
    [R_PIN_SET] = "INSERT INTO agent_pins (uid, config, version) VALUES (?1, ?2, ?3) "
		  "ON CONFLICT (uid) DO UPDATE SET config = excluded.config, "
		  "version = excluded.version",
    [R_PIN_DEL] = "DELETE FROM agent_pins WHERE uid = ?1",
    [R_GET] = "SELECT " RO_COLS " FROM rollouts WHERE id = ?1",
    [R_AGENTS] = "SELECT " RA_COLS " FROM rollout_agents WHERE rollout = ?1 ORDER BY batch, uid",
    [R_LIST] = "SELECT " RO_COLS " FROM rollouts WHERE (?1 = 0 OR state IN ('running', "
	       "'paused', 'halted', 'rolling_back')) AND (?2 IS NULL OR id < ?2) "
	       "ORDER BY id DESC LIMIT ?3",
    [R_PINS] = "SELECT uid, config, version FROM agent_pins",
    [R_PINS_CLEAR] = "DELETE FROM agent_pins WHERE config = ?1 AND (?2 = 0 OR version = ?2)",
    [R_SERVE_SET] = "INSERT INTO config_serving (name, version) VALUES (?1, ?2) "
		    "ON CONFLICT (name) DO UPDATE SET version = excluded.version",
    [R_SERVE_DEL] = "DELETE FROM config_serving WHERE name = ?1",
    [R_SERVE_LIST] = "SELECT name, version FROM config_serving ORDER BY name",
};

struct store_roll {
	sqlite3_stmt *stmt[R__COUNT];
};

void store_roll_release(struct store_roll *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < R__COUNT; i++)
		sqlite3_finalize(r->stmt[i]);
	free(r);
}

/* A cached statement, prepared on first use; NULL with *rc set on failure. */
static sqlite3_stmt *rstmt(struct pf_store *st, enum roll_stmt id, int *rc)
{
	struct store_roll **slot = store_roll_slot(st);

	if (!*slot && !(*slot = calloc(1, sizeof(**slot)))) {
		*rc = store_fail_other(st, NULL, -ENOMEM, "rollouts: out of memory");
		return NULL;
	}
	return store_stmt_cached(st, &(*slot)->stmt[id], roll_sql[id], rc);
}

#define RSTMT(name, st, id, rc)                                                                    \
	_cleanup_(store_stmt_resetp) sqlite3_stmt *name = rstmt((st), (id), (rc))

static int bind_text(sqlite3_stmt *s, int i, const char *v)
{
	return sqlite3_bind_text(s, i, v ? v : "", -1, SQLITE_STATIC);
}

static int save_rollout(struct pf_store *st, const struct pf_rollout_row *r)
{
	int rc;
	RSTMT(s, st, R_UPSERT, &rc);

	if (!s)
		return rc;
	if (!r->id || !r->config || !r->state)
		return store_fail_other(st, NULL, -EINVAL, "rollouts: bad row");
	if (bind_text(s, 1, r->id) || bind_text(s, 2, r->config) ||
	    sqlite3_bind_int64(s, 3, r->version) || bind_text(s, 4, r->state) ||
	    sqlite3_bind_int64(s, 5, r->created_ms) || sqlite3_bind_int64(s, 6, r->updated_ms) ||
	    bind_text(s, 7, r->created_by) || bind_text(s, 8, r->spec_json ? r->spec_json : "{}") ||
	    bind_text(s, 9, r->progress_json ? r->progress_json : "{}"))
		return store_fail_sqlite(st, NULL, "rollouts: bind");
	return store_step_done(st, s, "rollouts: save");
}

static int save_agent(struct pf_store *st, const struct pf_rollout_agent_row *a)
{
	int rc;
	RSTMT(s, st, R_AGENT_UPSERT, &rc);

	if (!s)
		return rc;
	if (!a->rollout || !a->state)
		return store_fail_other(st, NULL, -EINVAL, "rollouts: bad agent row");
	if (bind_text(s, 1, a->rollout) || sqlite3_bind_blob(s, 2, a->uid, 16, SQLITE_STATIC) ||
	    sqlite3_bind_int64(s, 3, a->batch) || sqlite3_bind_int64(s, 4, a->from_version) ||
	    bind_text(s, 5, a->state) || bind_text(s, 6, a->revert) || bind_text(s, 7, a->error) ||
	    sqlite3_bind_int64(s, 8, a->updated_ms))
		return store_fail_sqlite(st, NULL, "rollouts: bind agent");
	return store_step_done(st, s, "rollouts: save agent");
}

static int save_pin(struct pf_store *st, const struct pf_pin_row *p)
{
	int rc;

	if (p->version > 0) {
		RSTMT(s, st, R_PIN_SET, &rc);
		if (!s)
			return rc;
		if (!p->config)
			return store_fail_other(st, NULL, -EINVAL, "pins: bad row");
		if (sqlite3_bind_blob(s, 1, p->uid, 16, SQLITE_STATIC) ||
		    bind_text(s, 2, p->config) || sqlite3_bind_int64(s, 3, p->version))
			return store_fail_sqlite(st, NULL, "pins: bind");
		return store_step_done(st, s, "pins: set");
	}
	RSTMT(s, st, R_PIN_DEL, &rc);
	if (!s)
		return rc;
	if (sqlite3_bind_blob(s, 1, p->uid, 16, SQLITE_STATIC))
		return store_fail_sqlite(st, NULL, "pins: bind");
	return store_step_done(st, s, "pins: remove");
}

int pf_store_rollout_save(struct pf_store *st, const struct pf_rollout_row *r,
			  const struct pf_rollout_agent_row *agents, size_t n_agents,
			  const struct pf_pin_row *pins, size_t n_pins)
{
	STORE_PG_DISPATCH(st, store_pg_rollout_save(st, r, agents, n_agents, pins, n_pins));
	if ((n_agents && !agents) || (n_pins && !pins))
		return -EINVAL;
	if (!r && !n_agents && !n_pins)
		return 0;
	int rc = store_tx_begin(st);
	if (rc == 0 && r)
		rc = save_rollout(st, r);
	for (size_t i = 0; rc == 0 && i < n_agents; i++)
		rc = save_agent(st, &agents[i]);
	for (size_t i = 0; rc == 0 && i < n_pins; i++)
		rc = save_pin(st, &pins[i]);
	if (rc < 0) {
		store_tx_rollback(st);
		return rc;
	}
	return store_tx_commit(st);
}

static int read_rollout(struct pf_store *st, sqlite3_stmt *s, struct pf_rollout_row *r)
{
	const char *t[6];
	static const int cols[6] = {0, 1, 3, 6, 7, 8};

	for (int i = 0; i < 6; i++)
		if (!(t[i] = (const char *)sqlite3_column_text(s, cols[i])))
			return store_fail_other(st, NULL, -ENOMEM, "rollouts: out of memory");
	r->id = t[0];
	r->config = t[1];
	r->version = sqlite3_column_int64(s, 2);
	r->state = t[2];
	r->created_ms = sqlite3_column_int64(s, 4);
	r->updated_ms = sqlite3_column_int64(s, 5);
	r->created_by = t[3];
	r->spec_json = t[4];
	r->progress_json = t[5];
	return 0;
}

static int read_agent(struct pf_store *st, sqlite3_stmt *s, struct pf_rollout_agent_row *a)
{
	const char *t[4];
	static const int cols[4] = {0, 4, 5, 6};

	for (int i = 0; i < 4; i++)
		if (!(t[i] = (const char *)sqlite3_column_text(s, cols[i])))
			return store_fail_other(st, NULL, -ENOMEM, "rollouts: out of memory");
	const void *uid = sqlite3_column_blob(s, 1);
	if (!uid || sqlite3_column_bytes(s, 1) != 16)
		return store_fail_other(st, NULL, -EIO, "rollouts: bad agent uid");
	memcpy(a->uid, uid, 16);
	a->rollout = t[0];
	a->batch = sqlite3_column_int64(s, 2);
	a->from_version = sqlite3_column_int64(s, 3);
	a->state = t[1];
	a->revert = t[2];
	a->error = t[3];
	a->updated_ms = sqlite3_column_int64(s, 7);
	return 0;
}

int pf_store_rollout_get(struct pf_store *st, const char *id,
			 int (*r_cb)(const struct pf_rollout_row *r, void *ud),
			 int (*agent_cb)(const struct pf_rollout_agent_row *a, void *ud), void *ud)
{
	STORE_PG_DISPATCH(st, store_pg_rollout_get(st, id, r_cb, agent_cb, ud));
	int rc;

	if (!id || !r_cb)
		return -EINVAL;
	{
		RSTMT(s, st, R_GET, &rc);
		struct pf_rollout_row r;
		if (!s)
			return rc;
		if (bind_text(s, 1, id))
			return store_fail_sqlite(st, NULL, "rollouts: get: bind");
		rc = store_step_row(st, s, -ENOENT, "rollouts: get");
		if (rc <= 0)
			return rc;
		rc = read_rollout(st, s, &r);
		if (rc == 0)
			rc = r_cb(&r, ud);
		if (rc)
			return rc;
	}
	if (!agent_cb)
		return 0;
	RSTMT(s, st, R_AGENTS, &rc);
	if (!s)
		return rc;
	if (bind_text(s, 1, id))
		return store_fail_sqlite(st, NULL, "rollouts: agents: bind");
	for (;;) {
		struct pf_rollout_agent_row a;
		rc = store_step_row(st, s, 0, "rollouts: agents");
		if (rc <= 0)
			return rc;
		rc = read_agent(st, s, &a);
		if (rc == 0)
			rc = agent_cb(&a, ud);
		if (rc)
			return rc;
	}
}

int pf_store_rollouts_foreach(struct pf_store *st, bool active_only, const char *before_id,
			      size_t limit, int (*cb)(const struct pf_rollout_row *r, void *ud),
			      void *ud)
{
	STORE_PG_DISPATCH(st, store_pg_rollouts_foreach(st, active_only, before_id, limit, cb, ud));
	int rc;

	if (!cb)
		return -EINVAL;
	RSTMT(s, st, R_LIST, &rc);
	if (!s)
		return rc;
	if (sqlite3_bind_int(s, 1, active_only) ||
	    (before_id && *before_id ? bind_text(s, 2, before_id) : sqlite3_bind_null(s, 2)) ||
	    sqlite3_bind_int64(s, 3, limit ? (int64_t)pf_min(limit, (size_t)INT64_MAX) : -1))
		return store_fail_sqlite(st, NULL, "rollouts: list: bind");
	for (;;) {
		struct pf_rollout_row r;
		rc = store_step_row(st, s, 0, "rollouts: list");
		if (rc <= 0)
			return rc;
		rc = read_rollout(st, s, &r);
		if (rc == 0)
			rc = cb(&r, ud);
		if (rc)
			return rc;
	}
}

int pf_store_pins_foreach(struct pf_store *st, int (*cb)(const struct pf_pin_row *p, void *ud),
			  void *ud)
{
	STORE_PG_DISPATCH(st, store_pg_pins_foreach(st, cb, ud));
	int rc;
	RSTMT(s, st, R_PINS, &rc);

	if (!s)
		return rc;
	for (;;) {
		struct pf_pin_row p;
		rc = store_step_row(st, s, 0, "pins: list");
		if (rc <= 0)
			return rc;
		const void *uid = sqlite3_column_blob(s, 0);
		p.config = (const char *)sqlite3_column_text(s, 1);
		if (!uid || sqlite3_column_bytes(s, 0) != 16 || !p.config)
			return store_fail_other(st, NULL, -EIO, "pins: bad row");
		memcpy(p.uid, uid, 16);
		p.version = sqlite3_column_int64(s, 2);
		rc = cb(&p, ud);
		if (rc)
			return rc;
	}
}

int pf_store_pins_clear(struct pf_store *st, const char *config, int64_t version)
{
	STORE_PG_DISPATCH(st, store_pg_pins_clear(st, config, version));
	int rc;
	RSTMT(s, st, R_PINS_CLEAR, &rc);

	if (!s)
		return rc;
	if (!config)
		return -EINVAL;
	if (bind_text(s, 1, config) || sqlite3_bind_int64(s, 2, version))
		return store_fail_sqlite(st, NULL, "pins: clear: bind");
	return store_step_done(st, s, "pins: clear");
}

int pf_store_config_serving_set(struct pf_store *st, const char *name, int64_t version)
{
	STORE_PG_DISPATCH(st, store_pg_config_serving_set(st, name, version));
	int rc;
	RSTMT(s, st, version > 0 ? R_SERVE_SET : R_SERVE_DEL, &rc);

	if (!s)
		return rc;
	if (!name)
		return -EINVAL;
	if (bind_text(s, 1, name) || (version > 0 && sqlite3_bind_int64(s, 2, version)))
		return store_fail_sqlite(st, NULL, "configs: serving: bind");
	return store_step_done(st, s, "configs: serving");
}

int pf_store_config_serving_foreach(struct pf_store *st,
				    int (*cb)(const char *name, int64_t version, void *ud),
				    void *ud)
{
	STORE_PG_DISPATCH(st, store_pg_config_serving_foreach(st, cb, ud));
	int rc;
	RSTMT(s, st, R_SERVE_LIST, &rc);

	if (!s)
		return rc;
	for (;;) {
		rc = store_step_row(st, s, 0, "configs: serving list");
		if (rc <= 0)
			return rc;
		const char *name = (const char *)sqlite3_column_text(s, 0);
		if (!name)
			return store_fail_other(st, NULL, -ENOMEM, "configs: out of memory");
		rc = cb(name, sqlite3_column_int64(s, 1), ud);
		if (rc)
			return rc;
	}
}
