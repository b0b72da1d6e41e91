/* store_configs.c — versioned agent configs and the assignments that select them, on either
 * backend; see store.h ("Configs", "Assignments"). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

#define CFG_COLS "name, version, hash, body, created_ms"
#define ASG_COLS "name, selector, config, priority, updated_ms"

/* Two replicas putting the same name wait for each other here; SQLite's BEGIN IMMEDIATE
 * already does. */
static const struct store_stmt cfg_lock = {
    .pg = "SELECT pg_advisory_xact_lock(hashtext('config:' || ?1))"};
static const struct store_stmt cfg_latest_hash = {
    .sqlite = "SELECT version, hash FROM configs WHERE name = ?1 ORDER BY version DESC LIMIT 1"};
static const struct store_stmt cfg_insert = {
    .sqlite = "INSERT INTO configs (" CFG_COLS ") VALUES (?1, ?2, ?3, ?4, ?5)"};
static const struct store_stmt cfg_get = {
    .sqlite = "SELECT " CFG_COLS " FROM configs WHERE name = ?1 AND version = ?2"};
static const struct store_stmt cfg_get_latest = {
    .sqlite = "SELECT " CFG_COLS " FROM configs WHERE name = ?1 ORDER BY version DESC LIMIT 1"};
static const struct store_stmt cfg_versions = {
    .sqlite = "SELECT name, version, hash, NULL, created_ms FROM configs WHERE name = ?1 "
	      "ORDER BY version DESC"};
static const struct store_stmt cfg_foreach_latest = {
    .sqlite = "SELECT c.name, c.version, c.hash, c.body, c.created_ms FROM configs c "
	      "WHERE c.version = (SELECT max(version) FROM configs WHERE name = c.name) "
	      "ORDER BY c.name",
    .pg = "SELECT DISTINCT ON (name) " CFG_COLS " FROM configs ORDER BY name, version DESC"};
static const struct store_stmt asg_put = {
    .sqlite = "INSERT INTO assignments (" ASG_COLS ") VALUES (?1, ?2, ?3, ?4, ?5) "
	      "ON CONFLICT (name) DO UPDATE SET selector = excluded.selector, "
	      "config = excluded.config, priority = excluded.priority, "
	      "updated_ms = excluded.updated_ms"};
static const struct store_stmt asg_get = {
    .sqlite = "SELECT " ASG_COLS " FROM assignments WHERE name = ?1"};
static const struct store_stmt asg_delete = {
    .sqlite = "DELETE FROM assignments WHERE name = ?1"};
static const struct store_stmt asg_foreach = {
    .sqlite = "SELECT " ASG_COLS " FROM assignments ORDER BY name"};

/* A C string argument that must fit a fixed field of `cap` bytes (NUL included). */
static bool str_fits(const char *v, size_t cap)
{
	return v && strnlen(v, cap) < cap;
}

/* Copies a text column into a fixed buffer: -ENOSPC when it does not fit, -ENOMEM when
 * SQLite could not produce it. */
static int col_copy(struct store_q *q, int col, char *dst, size_t cap)
{
	const char *t = store_q_col_text(q, col);
	size_t n;

	if (q->oom)
		return -ENOMEM;
	n = t ? strlen(t) : 0;
	if (n >= cap)
		return -ENOSPC;
	memcpy(dst, t ? t : "", n + 1);
	return 0;
}

void pf_config_version_release(struct pf_config_version *cv)
{
	if (!cv)
		return;
	free(cv->body);
	cv->body = NULL;
	cv->body_len = 0;
}

/* Fills cv from a row (name, version, hash, body-or-NULL, created_ms). With copy_body the
 * body is duplicated on the heap; otherwise cv->body points into the row (or is NULL) and
 * is valid until the next step. */
static int read_config_row(struct store_q *q, struct pf_config_version *cv, bool copy_body)
{
	const char *body;
	int rc;

	memset(cv, 0, sizeof(*cv));
	rc = col_copy(q, 0, cv->name, sizeof(cv->name));
	if (rc < 0)
		return store_fail_other(q->st, NULL, rc, "config: bad stored name");
	cv->version = store_q_col_i64(q, 1);
	if (!store_q_col_fixed(q, 2, cv->hash, sizeof(cv->hash)))
		return store_fail_other(q->st, NULL, -EIO, "config: bad stored hash");
	cv->created_ms = store_q_col_i64(q, 4);
	body = store_q_col_text_n(q, 3, &cv->body_len);
	if (q->oom)
		return store_fail_other(q->st, NULL, -ENOMEM, "config: out of memory");
	if (!body)
		return 0;
	if (!copy_body) {
		cv->body = (char *)body;
		return 0;
	}
	cv->body = malloc(cv->body_len + 1);
	if (!cv->body)
		return store_fail_other(q->st, NULL, -ENOMEM, "config: out of memory");
	memcpy(cv->body, body, cv->body_len);
	cv->body[cv->body_len] = '\0';
	return 0;
}

/* Inside the put transaction: the lock on name, then version and hash of its latest
 * version (0 when there is none). */
static int config_latest(struct pf_store *st, const char *name, int64_t *version,
			 uint8_t hash[32])
{
	int rc;
	{
		STORE_Q(q);
		rc = store_q_open(&q, st, &cfg_lock, "config_put: lock", STORE_ARGS(store_v_text(name)));
		while (rc == 0 && (rc = store_q_step(&q)) > 0)
			;
		if (rc < 0)
			return rc;
	}
	STORE_Q(q);
	rc = store_q_open(&q, st, &cfg_latest_hash, "config_put: latest",
			  STORE_ARGS(store_v_text(name)));
	if (rc < 0)
		return rc;
	rc = store_q_step(&q);
	*version = 0;
	if (rc <= 0)
		return rc;
	*version = store_q_col_i64(&q, 0);
	if (!store_q_col_fixed(&q, 1, hash, 32))
		return store_fail_other(st, NULL, -EIO, "config_put: bad stored hash");
	return 0;
}

static int config_insert(struct pf_store *st, const char *name, int64_t version,
			 const uint8_t hash[32], const char *body, size_t len, int64_t now_ms)
{
	STORE_Q(q);
	/* The body as text: it must be NUL-free, and PostgreSQL wants a terminated string. */
	char *copy = malloc(len + 1);
	int rc;

	if (!copy)
		return store_fail_other(st, NULL, -ENOMEM, "config_put: out of memory");
	if (len)
		memcpy(copy, body, len);
	copy[len] = '\0';
	rc = store_q_prepare(&q, st, &cfg_insert, "config_put: insert");
	if (rc == 0) {
		store_q_text(&q, name);
		store_q_i64(&q, version);
		store_q_blob(&q, hash, 32);
		store_q_text_n(&q, copy, len);
		store_q_i64(&q, now_ms);
		rc = store_q_exec(&q, NULL);
	}
	store_q_finish(&q);
	free(copy);
	return rc;
}

int pf_store_config_put(struct pf_store *st, const char *name, const char *body, size_t len,
			const uint8_t hash[32], int64_t now_ms, int64_t *version, bool *created)
{
	uint8_t latest_hash[32];
	int64_t latest = 0;
	int rc;

	if (!str_fits(name, sizeof(((struct pf_config_version *)0)->name)) || !*name || !hash ||
	    (!body && len))
		return store_fail_other(st, NULL, -EINVAL, "config_put: bad name or body");
	rc = store_tx_begin(st);
	if (rc < 0)
		return rc;
	rc = config_latest(st, name, &latest, latest_hash);
	if (rc == 0 && latest > 0 && memcmp(latest_hash, hash, 32) == 0) {
		store_tx_end(st, -ECANCELED); /* nothing written: roll back */
		if (version)
			*version = latest;
		if (created)
			*created = false;
		return 0;
	}
	if (rc == 0)
		rc = config_insert(st, name, latest + 1, hash, body, len, now_ms);
	if (rc == 0)
		rc = store_notify(st, "config", name);
	rc = store_tx_end(st, rc);
	if (rc < 0)
		return rc;
	if (version)
		*version = latest + 1;
	if (created)
		*created = true;
	return 0;
}

int pf_store_config_get(struct pf_store *st, const char *name, int64_t version,
			struct pf_config_version *out)
{
	STORE_Q(q);
	int rc;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!name || version < 0)
		return -EINVAL;
	const struct store_arg args[] = {store_v_text(name), store_v_i64(version)};
	rc = store_q_open(&q, st, version > 0 ? &cfg_get : &cfg_get_latest, "config_get", args,
			  version > 0 ? 2 : 1);
	if (rc == 0)
		rc = store_q_step(&q);
	if (rc <= 0)
		return rc ? rc : -ENOENT;
	rc = read_config_row(&q, out, true);
	if (rc < 0)
		pf_config_version_release(out);
	return rc;
}

/* Shared loop of the config iterators: `empty` is returned when there was no row. The body
 * is handed out in place: valid during the callback, like the agent rows. */
static int config_iterate(struct store_q *q,
			  int (*cb)(const struct pf_config_version *cv, void *ud), void *ud,
			  int empty)
{
	int n = 0, rc;

	while ((rc = store_q_step(q)) > 0) {
		struct pf_config_version cv;
		n = 1;
		rc = read_config_row(q, &cv, false);
		if (rc == 0)
			rc = cb(&cv, ud);
		if (rc)
			return rc;
	}
	return rc == 0 && !n ? empty : rc;
}

int pf_store_config_versions(struct pf_store *st, const char *name,
			     int (*cb)(const struct pf_config_version *cv, void *ud), void *ud)
{
	STORE_Q(q);
	int rc;

	if (!name || !cb)
		return -EINVAL;
	rc = store_q_open(&q, st, &cfg_versions, "config_versions", STORE_ARGS(store_v_text(name)));
	return rc < 0 ? rc : config_iterate(&q, cb, ud, -ENOENT);
}

int pf_store_config_foreach_latest(struct pf_store *st,
				   int (*cb)(const struct pf_config_version *cv, void *ud),
				   void *ud)
{
	STORE_Q(q);
	int rc;

	if (!cb)
		return -EINVAL;
	rc = store_q_prepare(&q, st, &cfg_foreach_latest, "config_foreach_latest");
	return rc < 0 ? rc : config_iterate(&q, cb, ud, 0);
}

/* ---- Assignments. */

int pf_store_assignment_put(struct pf_store *st, const struct pf_assignment *a)
{
	STORE_Q(q);
	int rc;

	if (!a || !str_fits(a->name, sizeof(a->name)) || !a->name[0] ||
	    !str_fits(a->selector, sizeof(a->selector)) || !str_fits(a->config, sizeof(a->config)))
		return store_fail_other(st, NULL, -EINVAL, "assignment_put: bad assignment");
	rc = store_q_open(&q, st, &asg_put, "assignment_put",
			  STORE_ARGS(store_v_text(a->name), store_v_text(a->selector),
				     store_v_text(a->config), store_v_i64(a->priority),
				     store_v_i64(a->updated_ms)));
	return rc < 0 ? rc : store_write_notify(&q, "assignment", a->name, NULL);
}

static int read_assignment_row(struct store_q *q, struct pf_assignment *a)
{
	memset(a, 0, sizeof(*a));
	if (col_copy(q, 0, a->name, sizeof(a->name)) ||
	    col_copy(q, 1, a->selector, sizeof(a->selector)) ||
	    col_copy(q, 2, a->config, sizeof(a->config)))
		return store_fail_other(q->st, NULL, -EIO, "assignment: bad stored row");
	a->priority = store_q_col_i64(q, 3);
	a->updated_ms = store_q_col_i64(q, 4);
	return 0;
}

int pf_store_assignment_get(struct pf_store *st, const char *name, struct pf_assignment *out)
{
	STORE_Q(q);
	int rc;

	if (!name || !out)
		return -EINVAL;
	rc = store_q_open(&q, st, &asg_get, "assignment_get", STORE_ARGS(store_v_text(name)));
	if (rc == 0)
		rc = store_q_step(&q);
	if (rc <= 0)
		return rc ? rc : -ENOENT;
	return read_assignment_row(&q, out);
}

int pf_store_assignment_delete(struct pf_store *st, const char *name)
{
	STORE_Q(q);
	int64_t n = 0;
	int rc;

	if (!name)
		return -EINVAL;
	rc = store_q_open(&q, st, &asg_delete, "assignment_delete", STORE_ARGS(store_v_text(name)));
	if (rc == 0)
		rc = store_write_notify(&q, "assignment", name, &n);
	if (rc < 0)
		return rc;
	return n > 0 ? 0 : -ENOENT;
}

int pf_store_assignment_foreach(struct pf_store *st,
				int (*cb)(const struct pf_assignment *a, void *ud), void *ud)
{
	STORE_Q(q);
	int rc;

	if (!cb)
		return -EINVAL;
	rc = store_q_prepare(&q, st, &asg_foreach, "assignment_foreach");
	while (rc == 0 && (rc = store_q_step(&q)) > 0) {
		struct pf_assignment a;
		rc = read_assignment_row(&q, &a);
		if (rc == 0)
			rc = cb(&a, ud);
	}
	return rc;
}
