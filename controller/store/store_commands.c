/* store_commands.c — operator commands forwarded between replicas sharing PostgreSQL (schema
 * version 13, migration in store.c); see store.h ("Commands forwarded between replicas").
 *
 * Every statement is PostgreSQL's alone: one SQLite replica drives everything it is asked
 * to, so nothing is ever forwarded there and every call answers -EOPNOTSUPP. A command moves
 * from pending to running (claimed) and done, or to withdrawn, once: every update names the
 * state it leaves in its WHERE, so the replica that runs it and the one that gives up
 * waiting cannot both win. */
#include <errno.h>
#include <string.h>

#include "pf/compiler.h"
#include "store_int.h"

#define CMD_COLS                                                                                   \
	"id, kind, target, action, actor, actor_id, source, created_ms, state, status, body, "     \
	"done_by"

static const struct store_stmt cmd_insert = {
    .pg = "INSERT INTO commands (" CMD_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 0, 0, "
	  "'', '')"};
static const struct store_stmt cmd_pending = {
    .pg = "SELECT " CMD_COLS " FROM commands WHERE state = 0 ORDER BY created_ms, id "
	  "LIMIT ?1::bigint"};
static const struct store_stmt cmd_finish = {
    .pg = "UPDATE commands SET state = 1, status = ?2::bigint, body = ?3, done_by = ?4 "
	  "WHERE id = ?1 AND state = 3"};
static const struct store_stmt cmd_move = {
    .pg = "UPDATE commands SET state = ?3::bigint WHERE id = ?1 AND state = ?2::bigint"};
static const struct store_stmt cmd_get = {
    .pg = "SELECT " CMD_COLS " FROM commands WHERE id = ?1"};
/* Done and withdrawn ones, and running ones whose replica died while running them. */
static const struct store_stmt cmd_prune = {
    .pg = "DELETE FROM commands WHERE state <> 0 AND created_ms < ?1::bigint"};

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

int pf_store_command_add(struct pf_store *st, const struct pf_command_row *c)
{
	if (!pf_store_is_shared(st))
		return -EOPNOTSUPP;
	if (!c || !c->id || !c->kind || !c->target || !c->action)
		return store_fail_other(st, NULL, -EINVAL, "commands: bad row");
	int rc = store_tx_begin(st);
	if (rc == 0)
		rc = store_exec(st, &cmd_insert, "commands: add",
				STORE_ARGS(store_v_text(c->id), store_v_text(c->kind),
					   store_v_text(c->target), store_v_text(c->action),
					   store_v_text(or_empty(c->actor)),
					   store_v_text(or_empty(c->actor_id)),
					   store_v_text(or_empty(c->source)),
					   store_v_i64(c->created_ms)),
				NULL);
	if (rc == 0)
		rc = store_notify(st, "command", c->id);
	return store_tx_end(st, rc);
}

struct cmd_iter {
	int (*cb)(const struct pf_command_row *c, void *ud);
	void *ud;
};

static int on_cmd(struct store_q *q, void *ud)
{
	struct cmd_iter *it = ud;
	struct pf_command_row c = {
	    .id = store_q_col_str(q, 0),
	    .kind = store_q_col_str(q, 1),
	    .target = store_q_col_str(q, 2),
	    .action = store_q_col_str(q, 3),
	    .actor = store_q_col_str(q, 4),
	    .actor_id = store_q_col_str(q, 5),
	    .source = store_q_col_str(q, 6),
	    .created_ms = store_q_col_i64(q, 7),
	    .state = (enum pf_command_state)store_q_col_i64(q, 8),
	    .status = (int)store_q_col_i64(q, 9),
	    .body = store_q_col_str(q, 10),
	    .done_by = store_q_col_str(q, 11),
	};
	return it->cb(&c, it->ud);
}

int pf_store_commands_pending(struct pf_store *st, size_t limit,
			      int (*cb)(const struct pf_command_row *c, void *ud), void *ud)
{
	struct cmd_iter it = {.cb = cb, .ud = ud};
	if (!pf_store_is_shared(st))
		return -EOPNOTSUPP;
	if (!cb)
		return -EINVAL;
	return store_each(st, &cmd_pending, "commands: pending",
			  STORE_ARGS(store_v_i64((int64_t)limit)), on_cmd, &it);
}

int pf_store_command_get(struct pf_store *st, const char *id,
			 int (*cb)(const struct pf_command_row *c, void *ud), void *ud)
{
	STORE_Q(q);
	struct cmd_iter it = {.cb = cb, .ud = ud};
	if (!pf_store_is_shared(st))
		return -EOPNOTSUPP;
	if (!id || !cb)
		return -EINVAL;
	int rc = store_q_open(&q, st, &cmd_get, "commands: get", STORE_ARGS(store_v_text(id)));
	if (rc == 0)
		rc = store_q_step(&q);
	if (rc <= 0)
		return rc ? rc : -ENOENT;
	return on_cmd(&q, &it);
}

int pf_store_command_finish(struct pf_store *st, const char *id, int status, const char *body)
{
	int64_t n = 0;
	if (!pf_store_is_shared(st))
		return -EOPNOTSUPP;
	if (!id)
		return -EINVAL;
	int rc = store_tx_begin(st);
	if (rc == 0)
		rc = store_exec(st, &cmd_finish, "commands: finish",
				STORE_ARGS(store_v_text(id), store_v_i64(status),
					   store_v_text(or_empty(body)),
					   store_v_text(pf_store_replica_id())),
				&n);
	if (rc == 0 && n == 0)
		rc = -EALREADY;
	if (rc == 0)
		rc = store_notify(st, "command_done", id);
	return store_tx_end(st, rc);
}

int pf_store_command_move(struct pf_store *st, const char *id, enum pf_command_state from,
			  enum pf_command_state to)
{
	int64_t n = 0;
	if (!pf_store_is_shared(st))
		return -EOPNOTSUPP;
	if (!id)
		return -EINVAL;
	int rc = store_exec(st, &cmd_move, "commands: move",
			    STORE_ARGS(store_v_text(id), store_v_i64(from), store_v_i64(to)), &n);
	if (rc == 0 && n == 0)
		rc = -EALREADY;
	return rc;
}

int pf_store_commands_prune(struct pf_store *st, int64_t before_ms)
{
	if (!pf_store_is_shared(st))
		return -EOPNOTSUPP;
	return store_exec(st, &cmd_prune, "commands: prune", STORE_ARGS(store_v_i64(before_ms)),
			  NULL);
}
