/* store_rollouts.c — staged rollouts, their per-agent rows, agent pins and served config
 * versions (schema version 5, migration in store.c), on either backend; see store.h
 * ("Staged rollouts"). */
#include <errno.h>
#include <string.h>

#include "pf/compiler.h"
#include "store_int.h"

#define RO_COLS "id, config, version, state, created_ms, updated_ms, created_by, spec, progress"
#define RA_COLS "rollout, uid, batch, from_version, state, revert, error, updated_ms"

static const struct store_stmt ro_upsert = {
    .sqlite = "INSERT INTO rollouts (" RO_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
	      "ON CONFLICT (id) DO UPDATE SET state = excluded.state, "
	      "updated_ms = excluded.updated_ms, progress = excluded.progress"};
static const struct store_stmt ro_agent_upsert = {
    .sqlite = "INSERT INTO rollout_agents (" RA_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
	      "ON CONFLICT (rollout, uid) DO UPDATE SET state = excluded.state, "
	      "revert = excluded.revert, error = excluded.error, updated_ms = excluded.updated_ms"};
static const struct store_stmt pin_set = {
    .sqlite = "INSERT INTO agent_pins (uid, config, version) VALUES (?1, ?2, ?3) "
	      "ON CONFLICT (uid) DO UPDATE SET config = excluded.config, "
	      "version = excluded.version"};
static const struct store_stmt pin_del = {.sqlite = "DELETE FROM agent_pins WHERE uid = ?1"};
static const struct store_stmt ro_get = {.sqlite = "SELECT " RO_COLS " FROM rollouts WHERE id = ?1"};
static const struct store_stmt ro_agents = {
    .sqlite = "SELECT " RA_COLS " FROM rollout_agents WHERE rollout = ?1 ORDER BY batch, uid"};
/* No limit is -1: SQLite's LIMIT takes it, PostgreSQL's wants NULL. */
static const struct store_stmt ro_list = {
    .sqlite = "SELECT " RO_COLS " FROM rollouts WHERE (?1 = 0 OR state IN ('running', "
	      "'paused', 'halted', 'rolling_back')) AND (?2 IS NULL OR id < ?2) "
	      "ORDER BY id DESC LIMIT ?3",
    .pg = "SELECT " RO_COLS " FROM rollouts WHERE (?1::bigint = 0 OR state IN ('running', "
	  "'paused', 'halted', 'rolling_back')) AND (?2::text IS NULL OR id < ?2) "
	  "ORDER BY id DESC LIMIT nullif(?3::bigint, -1)",
};
static const struct store_stmt pins_list = {.sqlite = "SELECT uid, config, version FROM agent_pins"};
static const struct store_stmt pins_clear = {
    .sqlite = "DELETE FROM agent_pins WHERE config = ?1 AND (?2 = 0 OR version = ?2)",
    .pg = "DELETE FROM agent_pins WHERE config = ?1 AND (?2::bigint = 0 OR version = ?2)"};
static const struct store_stmt serve_set = {
    .sqlite = "INSERT INTO config_serving (name, version) VALUES (?1, ?2) "
	      "ON CONFLICT (name) DO UPDATE SET version = excluded.version"};
static const struct store_stmt serve_del = {.sqlite = "DELETE FROM config_serving WHERE name = ?1"};
static const struct store_stmt serve_list = {
    .sqlite = "SELECT name, version FROM config_serving ORDER BY name"};

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

static int save_rollout(struct pf_store *st, const struct pf_rollout_row *r)
{
	if (!r->id || !r->config || !r->state)
		return store_fail_other(st, NULL, -EINVAL, "rollouts: bad row");
	return store_exec(
	    st, &ro_upsert, "rollouts: save",
	    STORE_ARGS(store_v_text(r->id), store_v_text(r->config), store_v_i64(r->version),
		       store_v_text(r->state), store_v_i64(r->created_ms), store_v_i64(r->updated_ms),
		       store_v_text(or_empty(r->created_by)),
		       store_v_text(r->spec_json ? r->spec_json : "{}"),
		       store_v_text(r->progress_json ? r->progress_json : "{}")),
	    NULL);
}

static int save_agent(struct pf_store *st, const struct pf_rollout_agent_row *a)
{
	if (!a->rollout || !a->state)
		return store_fail_other(st, NULL, -EINVAL, "rollouts: bad agent row");
	return store_exec(st, &ro_agent_upsert, "rollouts: save agent",
			  STORE_ARGS(store_v_text(a->rollout), store_v_blob(a->uid, 16),
				     store_v_i64(a->batch), store_v_i64(a->from_version),
				     store_v_text(a->state), store_v_text(or_empty(a->revert)),
				     store_v_text(or_empty(a->error)), store_v_i64(a->updated_ms)),
			  NULL);
}

static int save_pin(struct pf_store *st, const struct pf_pin_row *p)
{
	bool set = p->version > 0;

	if (set && !p->config)
		return store_fail_other(st, NULL, -EINVAL, "pins: bad row");
	const struct store_arg args[] = {store_v_blob(p->uid, 16), store_v_text(p->config),
					 store_v_i64(p->version)};
	return store_exec(st, set ? &pin_set : &pin_del, set ? "pins: set" : "pins: remove", args,
			  set ? 3 : 1, NULL);
}

int pf_store_rollout_save(struct pf_store *st, const struct pf_rollout_row *r,
			  const struct pf_rollout_agent_row *agents, size_t n_agents,
			  const struct pf_pin_row *pins, size_t n_pins)
{
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
	if (rc == 0 && (r || n_pins))
		rc = store_notify(st, "rollout", r ? r->id : "");
	return store_tx_end(st, rc);
}

typedef int (*row_cb)(const struct pf_rollout_row *row, void *ud);
typedef int (*agent_row_cb)(const struct pf_rollout_agent_row *a, void *ud);


/* Text columns are NOT NULL: NULL means SQLite could not produce them (out of memory). */
static int on_rollout(struct store_q *q, void *ud)
{
	const struct store_sink *k = ud;
	struct pf_rollout_row row, *r = &row;
	r->id = store_q_col_text(q, 0);
	r->config = store_q_col_text(q, 1);
	r->version = store_q_col_i64(q, 2);
	r->state = store_q_col_text(q, 3);
	r->created_ms = store_q_col_i64(q, 4);
	r->updated_ms = store_q_col_i64(q, 5);
	r->created_by = store_q_col_text(q, 6);
	r->spec_json = store_q_col_text(q, 7);
	r->progress_json = store_q_col_text(q, 8);
	if (!r->id || !r->config || !r->state || !r->created_by || !r->spec_json ||
	    !r->progress_json)
		return store_fail_other(q->st, NULL, -ENOMEM, "rollouts: out of memory");
	return STORE_SINK_FN(k, row_cb)(r, k->ud);
}

static int on_agent(struct store_q *q, void *ud)
{
	const struct store_sink *k = ud;
	struct pf_rollout_agent_row row, *a = &row;
	memset(a, 0, sizeof(*a));
	a->rollout = store_q_col_text(q, 0);
	a->state = store_q_col_text(q, 4);
	a->revert = store_q_col_text(q, 5);
	a->error = store_q_col_text(q, 6);
	if (!a->rollout || !a->state || !a->revert || !a->error)
		return store_fail_other(q->st, NULL, -ENOMEM, "rollouts: out of memory");
	if (!store_q_col_fixed(q, 1, a->uid, 16))
		return store_fail_other(q->st, NULL, -EIO, "rollouts: bad agent uid");
	a->batch = store_q_col_i64(q, 2);
	a->from_version = store_q_col_i64(q, 3);
	a->updated_ms = store_q_col_i64(q, 7);
	return STORE_SINK_FN(k, agent_row_cb)(a, k->ud);
}

int pf_store_rollout_get(struct pf_store *st, const char *id,
			 int (*r_cb)(const struct pf_rollout_row *r, void *ud),
			 int (*agent_cb)(const struct pf_rollout_agent_row *a, void *ud), void *ud)
{
	struct store_sink p = STORE_SINK(r_cb, ud), a = STORE_SINK(agent_cb, ud);
	const struct store_tree t = {&ro_get, &ro_agents, "rollouts: get", "rollouts: agents",
				     on_rollout, agent_cb ? on_agent : NULL};

	if (!id || !r_cb)
		return -EINVAL;
	return store_get_tree(st, &t, id, &p, &a);
}

int pf_store_rollouts_foreach(struct pf_store *st, bool active_only, const char *before_id,
			      size_t limit, int (*cb)(const struct pf_rollout_row *r, void *ud),
			      void *ud)
{
	struct store_sink k = STORE_SINK(cb, ud);

	if (!cb)
		return -EINVAL;
	return store_each(st, &ro_list, "rollouts: list",
			  STORE_ARGS(store_v_i64(active_only ? 1 : 0),
				     store_v_text(before_id && *before_id ? before_id : NULL),
				     store_v_i64(limit ? (int64_t)pf_min(limit, (size_t)INT64_MAX)
						       : -1)),
			  on_rollout, &k);
}

typedef int (*pin_cb)(const struct pf_pin_row *p, void *ud);

static int on_pin(struct store_q *q, void *ud)
{
	const struct store_sink *k = ud;
	struct pf_pin_row p;

	p.config = store_q_col_text(q, 1);
	if (!store_q_col_fixed(q, 0, p.uid, 16) || !p.config)
		return store_fail_other(q->st, NULL, -EIO, "pins: bad row");
	p.version = store_q_col_i64(q, 2);
	return STORE_SINK_FN(k, pin_cb)(&p, k->ud);
}

int pf_store_pins_foreach(struct pf_store *st, pin_cb cb, void *ud)
{
	struct store_sink k = STORE_SINK(cb, ud);
	return store_each(st, &pins_list, "pins: list", NULL, 0, on_pin, &k);
}

int pf_store_pins_clear(struct pf_store *st, const char *config, int64_t version)
{
	STORE_Q(q);
	int rc;

	if (!config)
		return -EINVAL;
	rc = store_q_open(&q, st, &pins_clear, "pins: clear",
			  STORE_ARGS(store_v_text(config), store_v_i64(version)));
	return rc < 0 ? rc : store_write_notify(&q, "config", config, NULL);
}

int pf_store_config_serving_set(struct pf_store *st, const char *name, int64_t version)
{
	STORE_Q(q);
	int rc;

	if (!name)
		return -EINVAL;
	const struct store_arg args[] = {store_v_text(name), store_v_i64(version)};
	rc = store_q_open(&q, st, version > 0 ? &serve_set : &serve_del, "configs: serving", args,
			  version > 0 ? 2 : 1);
	return rc < 0 ? rc : store_write_notify(&q, "config", name, NULL);
}

int pf_store_config_serving_foreach(struct pf_store *st,
				    int (*cb)(const char *name, int64_t version, void *ud),
				    void *ud)
{
	STORE_Q(q);
	int rc = store_q_prepare(&q, st, &serve_list, "configs: serving list");

	while (rc == 0 && (rc = store_q_step(&q)) > 0) {
		const char *name = store_q_col_text(&q, 0);
		if (!name)
			return store_fail_other(st, NULL, -ENOMEM, "configs: out of memory");
		rc = cb(name, store_q_col_i64(&q, 1), ud);
	}
	return rc;
}

/* ---- Ownership: on PostgreSQL a session-level advisory lock per rollout id, in the key
 * space (class, hashtext(id)) with class "pfr0"; one SQLite replica owns every rollout. */

static const struct store_stmt ro_lock = {
    .pg = "SELECT pg_try_advisory_lock(1885762096, hashtext(?1))::int::bigint"};
static const struct store_stmt ro_unlock = {
    .pg = "SELECT pg_advisory_unlock(1885762096, hashtext(?1))::int::bigint"};

/* Runs lock statement def on id; *res is its answer, or 1 when there is none (SQLite). */
static int lock_call(struct pf_store *st, const struct store_stmt *def, const char *what,
		     const char *id, int64_t *res)
{
	STORE_Q(q);
	int rc = store_q_open(&q, st, def, what, STORE_ARGS(store_v_text(id)));

	if (rc == 0)
		rc = store_q_step(&q);
	if (rc < 0)
		return rc;
	*res = rc > 0 ? store_q_col_i64(&q, 0) : 1;
	return 0;
}

int pf_store_rollout_lock(struct pf_store *st, const char *id, bool *owned)
{
	int64_t got = 0;
	int rc = lock_call(st, &ro_lock, "rollouts: lock", id, &got);

	if (rc == 0)
		*owned = got != 0;
	return rc;
}

int pf_store_rollout_unlock(struct pf_store *st, const char *id)
{
	int64_t held;
	return lock_call(st, &ro_unlock, "rollouts: unlock", id, &held);
}
