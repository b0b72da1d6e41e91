/* store_captures.c — incident captures and their per-agent rows (schema version 4, migration
 * in store.c), on either backend; see store.h ("Incident captures"). */
#include <errno.h>
#include <string.h>

#include "pf/compiler.h"
#include "store_int.h"

#define CAP_COLS                                                                                   \
	"id, state, created_ms, started_ms, finished_ms, deadline_ms, created_by, request, "       \
	"agents_matched"
#define AGENT_COLS "capture, uid, state, samples, bytes, profile_ids, error_code, error, updated_ms"

static const struct store_stmt cap_upsert = {
    .sqlite = "INSERT INTO captures (" CAP_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
	      "ON CONFLICT (id) DO UPDATE SET state = excluded.state, "
	      "started_ms = excluded.started_ms, finished_ms = excluded.finished_ms, "
	      "deadline_ms = excluded.deadline_ms"};
static const struct store_stmt cap_agent_upsert = {
    .sqlite = "INSERT INTO capture_agents (" AGENT_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
	      "?8, ?9) ON CONFLICT (capture, uid) DO UPDATE SET state = excluded.state, "
	      "samples = excluded.samples, bytes = excluded.bytes, "
	      "profile_ids = excluded.profile_ids, error_code = excluded.error_code, "
	      "error = excluded.error, updated_ms = excluded.updated_ms"};
static const struct store_stmt cap_get = {.sqlite = "SELECT " CAP_COLS " FROM captures WHERE id = ?1"};
static const struct store_stmt cap_agents = {
    .sqlite = "SELECT " AGENT_COLS " FROM capture_agents WHERE capture = ?1 ORDER BY uid"};
/* No limit is -1: SQLite's LIMIT takes it, PostgreSQL's wants NULL. */
static const struct store_stmt cap_list = {
    .sqlite = "SELECT " CAP_COLS " FROM captures WHERE (?1 IS NULL OR state = ?1) "
	      "AND (?2 = 0 OR state IN ('pending', 'running')) AND (?3 IS NULL OR id < ?3) "
	      "ORDER BY id DESC LIMIT ?4",
    .pg = "SELECT " CAP_COLS " FROM captures WHERE (?1::text IS NULL OR state = ?1) "
	  "AND (?2::bigint = 0 OR state IN ('pending', 'running')) "
	  "AND (?3::text IS NULL OR id < ?3) ORDER BY id DESC LIMIT nullif(?4::bigint, -1)",
};

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

static int save_one(struct pf_store *st, const struct pf_capture_row *c)
{
	if (!c->id || !c->state)
		return store_fail_other(st, NULL, -EINVAL, "captures: bad row");
	int rc = store_exec(
	    st, &cap_upsert, "captures: save",
	    STORE_ARGS(store_v_text(c->id), store_v_text(c->state), store_v_i64(c->created_ms),
		       store_v_i64(c->started_ms), store_v_i64(c->finished_ms),
		       store_v_i64(c->deadline_ms), store_v_text(or_empty(c->created_by)),
		       store_v_text(or_empty(c->request_json)), store_v_i64(c->agents_matched)),
	    NULL);
	return rc < 0 ? rc : store_notify(st, "capture", c->id);
}

static int save_agent(struct pf_store *st, const struct pf_capture_agent_row *a)
{
	if (!a->capture || !a->state || a->n_profile_ids > 4096 ||
	    (a->n_profile_ids && !a->profile_ids))
		return store_fail_other(st, NULL, -EINVAL, "captures: bad agent row");
	return store_exec(st, &cap_agent_upsert, "captures: save agent",
			  STORE_ARGS(store_v_text(a->capture), store_v_blob(a->uid, 16),
				     store_v_text(a->state), store_v_i64(a->samples),
				     store_v_i64(a->bytes),
				     store_v_blob(a->n_profile_ids ? (const void *)a->profile_ids : "",
						  a->n_profile_ids * 16),
				     store_v_text(or_empty(a->error_code)),
				     store_v_text(or_empty(a->error)), store_v_i64(a->updated_ms)),
			  NULL);
}

int pf_store_captures_save(struct pf_store *st, const struct pf_capture_row *caps, size_t n_caps,
			   const struct pf_capture_agent_row *agents, size_t n_agents)
{
	if ((n_caps && !caps) || (n_agents && !agents))
		return -EINVAL;
	if (!n_caps && !n_agents)
		return 0;
	int rc = store_tx_begin(st);
	for (size_t i = 0; rc == 0 && i < n_caps; i++)
		rc = save_one(st, &caps[i]);
	for (size_t i = 0; rc == 0 && i < n_agents; i++)
		rc = save_agent(st, &agents[i]);
	return store_tx_end(st, rc);
}

typedef int (*row_cb)(const struct pf_capture_row *row, void *ud);
typedef int (*agent_row_cb)(const struct pf_capture_agent_row *a, void *ud);


/* Text columns are NOT NULL: NULL means SQLite could not produce them (out of memory). */
static int on_cap(struct store_q *q, void *ud)
{
	const struct store_sink *k = ud;
	struct pf_capture_row row, *c = &row;
	c->id = store_q_col_text(q, 0);
	c->state = store_q_col_text(q, 1);
	c->created_ms = store_q_col_i64(q, 2);
	c->started_ms = store_q_col_i64(q, 3);
	c->finished_ms = store_q_col_i64(q, 4);
	c->deadline_ms = store_q_col_i64(q, 5);
	c->created_by = store_q_col_text(q, 6);
	c->request_json = store_q_col_text(q, 7);
	c->agents_matched = store_q_col_i64(q, 8);
	if (!c->id || !c->state || !c->created_by || !c->request_json)
		return store_fail_other(q->st, NULL, -ENOMEM, "captures: out of memory");
	return STORE_SINK_FN(k, row_cb)(c, k->ud);
}

static int on_agent(struct store_q *q, void *ud)
{
	const struct store_sink *k = ud;
	struct pf_capture_agent_row row, *a = &row;
	size_t n = 0;

	memset(a, 0, sizeof(*a));
	a->capture = store_q_col_text(q, 0);
	a->state = store_q_col_text(q, 2);
	a->error_code = store_q_col_text(q, 6);
	a->error = store_q_col_text(q, 7);
	if (!a->capture || !a->state || !a->error_code || !a->error)
		return store_fail_other(q->st, NULL, -ENOMEM, "captures: out of memory");
	if (!store_q_col_fixed(q, 1, a->uid, 16))
		return store_fail_other(q->st, NULL, -EIO, "captures: bad agent uid");
	a->samples = store_q_col_i64(q, 3);
	a->bytes = store_q_col_i64(q, 4);
	a->profile_ids = store_q_col_blob(q, 5, &n);
	a->n_profile_ids = a->profile_ids ? n / 16 : 0;
	if (!a->n_profile_ids)
		a->profile_ids = NULL;
	a->updated_ms = store_q_col_i64(q, 8);
	return STORE_SINK_FN(k, agent_row_cb)(a, k->ud);
}

int pf_store_capture_get(struct pf_store *st, const char *id,
			 int (*cap_cb)(const struct pf_capture_row *c, void *ud),
			 int (*agent_cb)(const struct pf_capture_agent_row *a, void *ud), void *ud)
{
	struct store_sink p = STORE_SINK(cap_cb, ud), a = STORE_SINK(agent_cb, ud);
	const struct store_tree t = {&cap_get, &cap_agents, "captures: get", "captures: agents",
				     on_cap, agent_cb ? on_agent : NULL};

	if (!id || !cap_cb)
		return -EINVAL;
	return store_get_tree(st, &t, id, &p, &a);
}

int pf_store_captures_foreach(struct pf_store *st, const struct pf_capture_query *cq,
			      int (*cb)(const struct pf_capture_row *c, void *ud), void *ud)
{
	struct store_sink k = STORE_SINK(cb, ud);

	if (!cq || !cb)
		return -EINVAL;
	return store_each(
	    st, &cap_list, "captures: list",
	    STORE_ARGS(store_v_text(cq->state && *cq->state ? cq->state : NULL),
		       store_v_i64(cq->unfinished ? 1 : 0),
		       store_v_text(cq->before_id && *cq->before_id ? cq->before_id : NULL),
		       store_v_i64(cq->limit ? (int64_t)pf_min(cq->limit, (size_t)INT64_MAX) : -1)),
	    on_cap, &k);
}
