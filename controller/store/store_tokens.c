/* store_tokens.c — API tokens and the audit log, on either backend; see store.h ("Tokens",
 * "Token management", "Audit log"). A token's public id is made here (16 hex digits from
 * the random source, never derived from the secret), so both backends store the same. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "pf/hash.h"
#include "pf/uuid.h"
#include "store_int.h"

#define TOKEN_COLS                                                                                 \
	"id, name, role, created_by, created_ms, expires_ms, last_used_ms, hash, agent_uid"

/* SQLite numbers the rows itself (seq); PostgreSQL's column is a BIGSERIAL. */
static const struct store_stmt token_insert_sql = {
    .sqlite = "INSERT INTO tokens (hash, role, name, created_ms, id, expires_ms, last_used_ms, "
	      "created_by, agent_uid, seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7, ?8, "
	      "(SELECT coalesce(max(seq), 0) + 1 FROM tokens))",
    .pg = "INSERT INTO tokens (hash, role, name, created_ms, id, expires_ms, last_used_ms, "
	  "created_by, agent_uid) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7, ?8)",
};
static const struct store_stmt token_find_sql = {
    .sqlite = "SELECT " TOKEN_COLS " FROM tokens WHERE hash = ?1"};
static const struct store_stmt token_count_sql = {.sqlite = "SELECT count(*) FROM tokens"};
static const struct store_stmt token_foreach_sql = {
    .sqlite = "SELECT " TOKEN_COLS " FROM tokens WHERE agent_uid IS NULL ORDER BY created_ms, seq"};
static const struct store_stmt cred_drop_unused_sql = {
    .sqlite = "DELETE FROM tokens WHERE agent_uid = ?1 AND last_used_ms = 0"};
static const struct store_stmt cred_confirm_sql = {
    .sqlite = "DELETE FROM tokens WHERE agent_uid = ?1 AND id <> ?2 AND "
	      "seq < (SELECT seq FROM tokens WHERE id = ?2) RETURNING id"};
static const struct store_stmt cred_older_sql = {
    .sqlite = "SELECT 1 FROM tokens WHERE agent_uid = ?1 AND id <> ?2 AND "
	      "seq < (SELECT seq FROM tokens WHERE id = ?2) LIMIT 1"};
static const struct store_stmt cred_get_sql = {
    .sqlite = "SELECT " TOKEN_COLS " FROM tokens WHERE agent_uid = ?1 "
	      "ORDER BY last_used_ms <> 0 DESC, seq DESC LIMIT 1"};
static const struct store_stmt cred_revoke_sql = {
    .sqlite = "DELETE FROM tokens WHERE agent_uid = ?1 RETURNING id"};
static const struct store_stmt token_revoke_sql = {
    .sqlite = "DELETE FROM tokens WHERE id = ?1 RETURNING " TOKEN_COLS};
static const struct store_stmt token_touch_sql = {
    .sqlite = "UPDATE tokens SET last_used_ms = ?2 WHERE id = ?1"};
static const struct store_stmt audit_write_sql = {
    .sqlite = "INSERT INTO audit (ts_ms, actor, action, target, detail, actor_id, source, status) "
	      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"};
static const struct store_stmt audit_query_sql = {
    .sqlite =
	"SELECT id, ts_ms, actor, action, target, detail, actor_id, source, status FROM audit "
	"WHERE id < ?1 AND ts_ms >= ?2 AND ts_ms <= ?3 "
	"AND (?4 IS NULL OR actor = ?4 OR actor_id = ?4) "
	"AND (?5 IS NULL OR action = ?5 OR substr(action, 1, length(?5) + 1) = ?5 || '.') "
	"ORDER BY id DESC LIMIT ?6",
    .pg = "SELECT id, ts_ms, actor, action, target, detail, actor_id, source, status FROM audit "
	  "WHERE id < ?1::bigint AND ts_ms >= ?2::bigint AND ts_ms <= ?3::bigint "
	  "AND (?4::text IS NULL OR actor = ?4 OR actor_id = ?4) "
	  "AND (?5::text IS NULL OR action = ?5 OR substr(action, 1, length(?5) + 1) = ?5 || '.') "
	  "ORDER BY id DESC LIMIT ?6::bigint",
};

static void token_row(struct store_q *q, struct pf_token_info *t)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->id, sizeof(t->id), "%s", store_q_col_str(q, 0));
	snprintf(t->name, sizeof(t->name), "%s", store_q_col_str(q, 1));
	snprintf(t->role, sizeof(t->role), "%s", store_q_col_str(q, 2));
	snprintf(t->created_by, sizeof(t->created_by), "%s", store_q_col_str(q, 3));
	t->created_ms = store_q_col_i64(q, 4);
	t->expires_ms = store_q_col_i64(q, 5);
	t->last_used_ms = store_q_col_i64(q, 6);
	store_q_col_fixed(q, 7, t->hash, 32);
	t->agent_bound = store_q_col_fixed(q, 8, t->agent_uid, 16);
}

static void new_token_id(char id[PF_TOKEN_ID_LEN + 1])
{
	uint8_t b[PF_TOKEN_ID_LEN / 2] = {0};
	pf_random_bytes(b, sizeof(b));
	for (size_t i = 0; i < sizeof(b); i++)
		snprintf(id + 2 * i, 3, "%02x", b[i]);
}

/* Inserts a token row with a new id (written to id) and notifies; `what` names the call in
 * errors. -EEXIST: the hash is already stored. */
struct token_new {
	const uint8_t *hash;
	const char *role, *name, *created_by;
	int64_t created_ms, expires_ms;
	const uint8_t *agent_uid; /* NULL: not a per-agent credential */
};

/* Inserts a token row with a new id (written to id) and notifies; `what` names the call in
 * errors. -EEXIST: the hash is already stored. With drop_unused, the agent's unused
 * credentials are deleted first, in the same transaction. */
static int token_insert(struct pf_store *st, const struct token_new *n, bool drop_unused,
			char id[PF_TOKEN_ID_LEN + 1], const char *what)
{
	char dup[96];
	int rc;

	new_token_id(id);
	rc = store_tx_begin(st);
	if (rc == 0 && drop_unused)
		rc = store_exec(st, &cred_drop_unused_sql, what,
				STORE_ARGS(store_v_blob(n->agent_uid, 16)), NULL);
	if (rc == 0) {
		STORE_Q(q);
		rc = store_q_prepare(&q, st, &token_insert_sql, what);
		if (rc == 0) {
			store_q_blob(&q, n->hash, 32);
			store_q_text(&q, n->role);
			store_q_text(&q, n->name);
			store_q_i64(&q, n->created_ms);
			store_q_text(&q, id);
			store_q_i64(&q, n->expires_ms);
			store_q_text(&q, n->created_by ? n->created_by : "");
			store_q_blob(&q, n->agent_uid, n->agent_uid ? 16 : 0);
			rc = store_q_exec(&q, NULL);
		}
	}
	if (rc == 0)
		rc = store_notify(st, "token", id);
	rc = store_tx_end(st, rc);
	if (rc != -EEXIST)
		return rc;
	snprintf(dup, sizeof(dup), "%s: token already exists", what);
	return store_fail_other(st, NULL, -EEXIST, dup);
}

int pf_store_token_add(struct pf_store *st, const uint8_t hash[32], const char *role,
		       const char *name, int64_t created_ms)
{
	char id[PF_TOKEN_ID_LEN + 1];

	if (!hash || !role || !name)
		return store_fail_other(st, NULL, -EINVAL, "token_add: missing argument");
	struct token_new n = {
	    .hash = hash, .role = role, .name = name, .created_by = "", .created_ms = created_ms};
	return token_insert(st, &n, false, id, "token_add");
}

int pf_store_token_create(struct pf_store *st, const uint8_t hash[32], struct pf_token_info *t)
{
	char id[PF_TOKEN_ID_LEN + 1];
	int rc;

	if (!hash || !t || !t->name[0] || !t->role[0])
		return store_fail_other(st, NULL, -EINVAL, "token_create: missing argument");
	struct token_new n = {.hash = hash,
			      .role = t->role,
			      .name = t->name,
			      .created_by = t->created_by,
			      .created_ms = t->created_ms,
			      .expires_ms = t->expires_ms};
	rc = token_insert(st, &n, false, id, "token_create");
	if (rc < 0)
		return rc;
	snprintf(t->id, sizeof(t->id), "%s", id);
	t->last_used_ms = 0;
	return 0;
}

/* The one token row def selects by a blob key of len bytes: 0, -ENOENT or a store error. */
static int token_one(struct pf_store *st, const struct store_stmt *def, const char *what,
		     const uint8_t *key, size_t len, struct pf_token_info *t)
{
	STORE_Q(q);
	int rc = store_q_prepare(&q, st, def, what);

	if (rc < 0)
		return rc;
	store_q_blob(&q, key, len);
	rc = store_q_step(&q);
	if (rc <= 0)
		return rc ? rc : -ENOENT;
	token_row(&q, t);
	return 0;
}

int pf_store_token_find(struct pf_store *st, const uint8_t hash[32], struct pf_token_info *t)
{
	return token_one(st, &token_find_sql, "token_find", hash, 32, t);
}

/* One field of the token with this hash, copied to out: 0, -ENOENT, -ENOSPC or a store
 * error. */
static int token_field(struct pf_store *st, const uint8_t hash[32], bool role, char *out,
		       size_t out_len)
{
	struct pf_token_info t;
	int rc;

	if (!hash || !out || out_len == 0)
		return -EINVAL;
	rc = pf_store_token_find(st, hash, &t);
	if (rc < 0)
		return rc;
	return (size_t)snprintf(out, out_len, "%s", role ? t.role : t.name) >= out_len ? -ENOSPC
										       : 0;
}

int pf_store_token_lookup(struct pf_store *st, const uint8_t hash[32], char *role, size_t role_len)
{
	return token_field(st, hash, true, role, role_len);
}

int pf_store_token_name(struct pf_store *st, const uint8_t hash[32], char *name, size_t name_len)
{
	return token_field(st, hash, false, name, name_len);
}

int pf_store_token_count(struct pf_store *st, int64_t *count)
{
	STORE_Q(q);
	int rc = store_q_prepare(&q, st, &token_count_sql, "token_count");

	if (rc == 0)
		rc = store_q_step(&q);
	if (rc == 0)
		rc = store_fail_other(st, NULL, -EIO, "token_count");
	if (rc < 0)
		return rc;
	*count = store_q_col_i64(&q, 0);
	return 0;
}

typedef int (*token_cb)(const struct pf_token_info *t, void *ud);

static int on_token(struct store_q *q, void *ud)
{
	const struct store_sink *k = ud;
	struct pf_token_info t;

	token_row(q, &t);
	return STORE_SINK_FN(k, token_cb)(&t, k->ud);
}

int pf_store_token_foreach(struct pf_store *st, token_cb cb, void *ud)
{
	struct store_sink k = STORE_SINK(cb, ud);
	return store_each(st, &token_foreach_sql, "token_foreach", NULL, 0, on_token, &k);
}

int pf_store_token_revoke(struct pf_store *st, const char *id, struct pf_token_info *t)
{
	bool found = false;
	int rc;

	if (!id)
		return -EINVAL;
	rc = store_tx_begin(st);
	if (rc == 0) {
		STORE_Q(q);
		rc = store_q_prepare(&q, st, &token_revoke_sql, "token_revoke");
		if (rc == 0) {
			store_q_text(&q, id);
			rc = store_q_step(&q);
		}
		found = rc > 0;
		if (found && t)
			token_row(&q, t);
		while (rc > 0)
			rc = store_q_step(&q);
	}
	if (rc == 0 && !found)
		rc = -ENOENT;
	if (rc == 0)
		rc = store_notify(st, "token", id);
	return store_tx_end(st, rc);
}

int pf_store_token_touch(struct pf_store *st, const char *id, int64_t now_ms)
{
	STORE_Q(q);
	int rc = store_q_prepare(&q, st, &token_touch_sql, "token_touch");

	if (rc < 0)
		return rc;
	store_q_text(&q, id);
	store_q_i64(&q, now_ms);
	return store_q_exec(&q, NULL);
}

/* ---- Per-agent credentials. */

int pf_store_agent_credential_issue(struct pf_store *st, const uint8_t uid[16],
				    const uint8_t hash[32], int64_t now_ms, struct pf_token_info *t)
{
	char name[PF_TOKEN_NAME_MAX + 1];
	int rc;

	if (!uid || !hash || !t)
		return store_fail_other(st, NULL, -EINVAL, "credential_issue: missing argument");
	memcpy(name, "agent:", 6);
	pf_uuid_format(uid, name + 6);
	struct token_new n = {.hash = hash,
			      .role = "agent",
			      .name = name,
			      .created_by = "opamp",
			      .created_ms = now_ms,
			      .agent_uid = uid};
	memset(t, 0, sizeof(*t));
	rc = token_insert(st, &n, true, t->id, "credential_issue");
	if (rc < 0)
		return rc;
	snprintf(t->name, sizeof(t->name), "%s", name);
	snprintf(t->role, sizeof(t->role), "agent");
	snprintf(t->created_by, sizeof(t->created_by), "opamp");
	t->created_ms = now_ms;
	memcpy(t->hash, hash, 32);
	t->agent_bound = true;
	memcpy(t->agent_uid, uid, 16);
	return 0;
}

/* Runs a DELETE ... RETURNING id over uid's credentials in a transaction with a "token"
 * notice per deleted id; the ids go to ids[], their count is returned. */
static int cred_delete(struct pf_store *st, const struct store_stmt *def, const char *what,
		       const uint8_t uid[16], const char *token_id,
		       char ids[][PF_TOKEN_ID_LEN + 1])
{
	int n = 0, rc = store_tx_begin(st);
	if (rc == 0) {
		STORE_Q(q);
		rc = store_q_prepare(&q, st, def, what);
		if (rc == 0) {
			store_q_blob(&q, uid, 16);
			if (token_id)
				store_q_text(&q, token_id);
		}
		while (rc == 0 && (rc = store_q_step(&q)) > 0) {
			if (n < PF_AGENT_CREDENTIAL_MAX_IDS)
				snprintf(ids[n++], PF_TOKEN_ID_LEN + 1, "%s",
					 store_q_col_str(&q, 0));
			rc = 0;
		}
	}
	for (int i = 0; rc == 0 && i < n; i++)
		rc = store_notify(st, "token", ids[i]);
	rc = store_tx_end(st, rc);
	return rc < 0 ? rc : n;
}

int pf_store_agent_credential_confirm(struct pf_store *st, const uint8_t uid[16],
				      const char *token_id, char ids[][PF_TOKEN_ID_LEN + 1])
{
	if (!uid || !token_id || !ids)
		return -EINVAL;
	/* Read first: every connection of an agent confirms, and almost never finds any. */
	STORE_Q(q);
	int rc = store_q_open(&q, st, &cred_older_sql, "credential_confirm",
			      STORE_ARGS(store_v_blob(uid, 16), store_v_text(token_id)));
	if (rc == 0)
		rc = store_q_step(&q);
	store_q_finish(&q);
	if (rc <= 0)
		return rc;
	return cred_delete(st, &cred_confirm_sql, "credential_confirm", uid, token_id, ids);
}

int pf_store_agent_credential_get(struct pf_store *st, const uint8_t uid[16],
				  struct pf_token_info *t)
{
	return token_one(st, &cred_get_sql, "credential_get", uid, 16, t);
}

int pf_store_agent_credential_revoke(struct pf_store *st, const uint8_t uid[16],
				     char ids[][PF_TOKEN_ID_LEN + 1])
{
	if (!uid || !ids)
		return -EINVAL;
	int n = cred_delete(st, &cred_revoke_sql, "credential_revoke", uid, NULL, ids);
	return n == 0 ? -ENOENT : n;
}

/* ---- Audit. */

int pf_store_audit_write(struct pf_store *st, const struct pf_audit_entry *e)
{
	STORE_Q(q);
	int rc;

	if (!e || !e->actor || !e->action)
		return store_fail_other(st, NULL, -EINVAL, "audit: missing actor or action");
	rc = store_q_prepare(&q, st, &audit_write_sql, "audit");
	if (rc < 0)
		return rc;
	store_q_i64(&q, e->ts_ms);
	store_q_text(&q, e->actor);
	store_q_text(&q, e->action);
	store_q_text(&q, e->target ? e->target : "");
	store_q_text(&q, e->detail);
	store_q_text(&q, e->actor_id ? e->actor_id : "");
	store_q_text(&q, e->source ? e->source : "");
	store_q_i64(&q, e->status);
	return store_q_exec(&q, NULL);
}

int pf_store_audit_query(struct pf_store *st, const struct pf_audit_query *aq,
			 int (*cb)(const struct pf_audit_entry *e, void *ud), void *ud)
{
	STORE_Q(q);
	int rc;

	if (!aq || !cb || aq->before_id < 0 || aq->limit == 0)
		return -EINVAL;
	rc = store_q_prepare(&q, st, &audit_query_sql, "audit_query");
	if (rc < 0)
		return rc;
	store_q_i64(&q, aq->before_id > 0 ? aq->before_id : INT64_MAX);
	store_q_i64(&q, aq->from_ms);
	store_q_i64(&q, aq->to_ms > 0 ? aq->to_ms : INT64_MAX);
	store_q_text(&q, aq->actor);
	store_q_text(&q, aq->action);
	store_q_i64(&q, aq->limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)aq->limit);
	while ((rc = store_q_step(&q)) > 0) {
		struct pf_audit_entry e = {
		    .id = store_q_col_i64(&q, 0),
		    .ts_ms = store_q_col_i64(&q, 1),
		    .actor = store_q_col_str(&q, 2),
		    .action = store_q_col_str(&q, 3),
		    .target = store_q_col_str(&q, 4),
		    .detail = store_q_col_text(&q, 5),
		    .actor_id = store_q_col_str(&q, 6),
		    .source = store_q_col_str(&q, 7),
		    .status = (int)store_q_col_i64(&q, 8),
		};
		rc = cb(&e, ud);
		if (rc)
			break;
	}
	return rc;
}
