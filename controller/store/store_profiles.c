/* store_profiles.c — the embedded profile store's tables (schema version 2, migration in
 * store.c; version 3 adds profile_flames, the compact flame form of each profile); see
 * store.h ("Profiles") and docs/api.md ("Profiles").
 *
 * Bodies live in SQLite (profile_bodies), not in files next to the database: a profile is a
 * few KiB to a few hundred KiB gzip'd, where SQLite reads and writes blobs as fast as the file
 * system or faster, and one transaction then covers metadata, body and links — retention can
 * never leave an orphan file or a row without its body, a crash loses nothing half-written,
 * and a backup is one file. Free pages left by retention are reused by later inserts, so the
 * file stays near its high-water mark (max_bytes plus metadata) rather than growing.
 *
 * Statements are prepared on first use and cached per connection in struct store_prof (the
 * list query has one variant per combination of filters, so each is a plain indexed query). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "pf/compiler.h"
#include "store_int.h"

#define PROF_COLS                                                                                  \
	"id, profile_id, agent, service, host, pid, exe, type, start_ns, duration_ns, samples, "   \
	"n_links, received_ms, body_bytes, raw_bytes, capture_id, trigger_name, k8s_namespace, "  \
	"k8s_pod, k8s_container, attrset"
#define RETAIN_BATCH 64

enum prof_stmt {
	P_BEGIN,
	P_COMMIT,
	P_ROLLBACK,
	P_INSERT,
	P_INSERT_BODY,
	P_INSERT_LINK,
	P_TOTALS,
	P_OLDEST,
	P_DELETE_UPTO,
	P_DELETE_EXPIRED,
	P_GET,
	P_GET_LINKS,
	P_BODY,
	P_INSERT_FLAME,
	P_FLAME,
	P_COUNT_FLAME,
	P_UNCOUNT_UPTO,
	P_UNCOUNT_EXPIRED,
	P_FIND_PROFILE,
	P_FIND_DUP,
	P_EXPIRE_ROLLUPS,
	P_SAVEPOINT,
	P_RELEASE,
	P_ROLLBACK_TO,
	P__COUNT
};

/* The profiles age retention deletes next (a deterministic order: the totals are adjusted
 * for exactly the rows then deleted). */
#define EXPIRED_IDS                                                                                \
	"SELECT id FROM profiles WHERE received_ms < ?1 ORDER BY received_ms, id LIMIT ?2"

static const char *const prof_sql[P__COUNT] = {
    [P_BEGIN] = "BEGIN IMMEDIATE",
    [P_COMMIT] = "COMMIT",
    [P_ROLLBACK] = "ROLLBACK",
    [P_INSERT] = "INSERT INTO profiles (profile_id, agent, service, host, pid, exe, type, "
		 "start_ns, duration_ns, samples, n_links, received_ms, body_bytes, raw_bytes, "
		 "capture_id, trigger_name, k8s_namespace, k8s_pod, k8s_container, attrset, unit) "
		 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, "
		 "?17, ?18, ?19, ?20, ?21)",
    [P_INSERT_BODY] = "INSERT INTO profile_bodies (id, body) VALUES (?1, ?2)",
    [P_INSERT_LINK] = "INSERT OR IGNORE INTO profile_links (trace_id, profile, span_id) "
		      "VALUES (?1, ?2, ?3)",
    [P_TOTALS] = "SELECT n, bytes FROM profile_totals WHERE k = 0",
    [P_OLDEST] = "SELECT p.id, p.body_bytes + coalesce(length(f.flame), 0) + "
		 "coalesce(length(s.data), 0) + (SELECT coalesce(sum(length(data)), 0) FROM "
		 "profile_series WHERE id = p.id) FROM profiles p LEFT JOIN profile_flames f ON "
		 "f.id = p.id LEFT JOIN profile_samples s ON s.id = p.id ORDER BY p.id LIMIT ?1",
    [P_DELETE_UPTO] = "DELETE FROM profiles WHERE id <= ?1",
    [P_DELETE_EXPIRED] = "DELETE FROM profiles WHERE id IN (" EXPIRED_IDS ")",
    [P_GET] = "SELECT " PROF_COLS " FROM profiles WHERE id = ?1",
    [P_GET_LINKS] = "SELECT trace_id, span_id FROM profile_links WHERE profile = ?1 LIMIT 256",
    [P_BODY] = "SELECT body FROM profile_bodies WHERE id = ?1",
    [P_INSERT_FLAME] = "INSERT INTO profile_flames (id, flame) VALUES (?1, ?2)",
    [P_FLAME] = "SELECT flame FROM profile_flames WHERE id = ?1",
    [P_FIND_PROFILE] = "SELECT id FROM profiles WHERE profile_id = ?1 ORDER BY id DESC LIMIT 1",
    /* Compact forms and packed samples count toward the totals; run before the matching
     * delete, in its transaction (the cascade then removes the rows). */
    [P_COUNT_FLAME] = "UPDATE profile_totals SET bytes = bytes + ?1 WHERE k = 0",
    [P_UNCOUNT_UPTO] = "UPDATE profile_totals SET bytes = bytes - (SELECT "
		       "coalesce(sum(length(flame)), 0) FROM profile_flames WHERE id <= ?1) - "
		       "(SELECT coalesce(sum(length(data)), 0) FROM profile_samples WHERE id <= "
		       "?1) - (SELECT coalesce(sum(length(data)), 0) FROM profile_series WHERE id "
		       "<= ?1) WHERE k = 0",
    [P_UNCOUNT_EXPIRED] =
	"UPDATE profile_totals SET bytes = bytes - (SELECT "
	"coalesce(sum(length(flame)), 0) FROM profile_flames WHERE id IN (" EXPIRED_IDS
	")) - (SELECT coalesce(sum(length(data)), 0) FROM "
	"profile_samples WHERE id IN (" EXPIRED_IDS ")) - (SELECT "
	"coalesce(sum(length(data)), 0) FROM profile_series WHERE id IN (" EXPIRED_IDS
	")) WHERE k = 0",
    /* Rollups go by their slot, profiles by when they were received: a profile that
     * arrived late (an old start) must keep its rollups while it is stored, so no slot at or
     * after the hour of the oldest stored start is expired. */
    [P_EXPIRE_ROLLUPS] = "DELETE FROM profile_rollups WHERE id IN (SELECT id FROM "
			 "profile_rollups WHERE slot < MIN(?1, COALESCE((SELECT MIN(start_ns) "
			 "FROM profiles) / 3600000000000 * 3600000, ?1)) LIMIT ?2)",
    /* Ingest is idempotent per (agent, OTLP profile_id): profiles_profile_id narrows it. */
    [P_FIND_DUP] = "SELECT id FROM profiles WHERE profile_id = ?1 AND agent = ?2 LIMIT 1",
    /* One insert call of a batch (pf_store_profiles_batch_begin): all or nothing inside the
     * batch's transaction. */
    [P_SAVEPOINT] = "SAVEPOINT profiles_insert",
    [P_RELEASE] = "RELEASE profiles_insert",
    [P_ROLLBACK_TO] = "ROLLBACK TO profiles_insert",
};

/* List-query variants: bit set = that filter present. */
enum {
	F_SERVICE = 1,
	F_AGENT = 2,
	F_TYPE = 4,
	F_TRACE = 8,
	F_CAPTURE = 16,
	F_TRIGGER = 32,
	F_NAMESPACE = 64,
	F_POD = 128,
	F_CONTAINER = 256,
	F__VARIANTS = 512
};

struct store_prof {
	sqlite3_stmt *stmt[P__COUNT];
	sqlite3_stmt *list[F__VARIANTS];
	struct pf_profile_retention ret;
	struct store_stacks *stacks; /* store_stacks.c's */
	bool batch;                  /* inside pf_store_profiles_batch_begin/end */
};


void store_prof_release(struct store_prof *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < P__COUNT; i++)
		sqlite3_finalize(p->stmt[i]);
	for (size_t i = 0; i < F__VARIANTS; i++)
		sqlite3_finalize(p->list[i]);
	store_stacks_release(p->stacks);
	free(p);
}

static struct store_prof *prof_of(struct pf_store *st)
{
	if (!st->prof)
		st->prof = calloc(1, sizeof(*st->prof));
	return st->prof;
}

struct store_stacks **store_prof_stacks(struct pf_store *st)
{
	struct store_prof *p = prof_of(st);
	return p ? &p->stacks : NULL;
}

static int prepare(struct pf_store *st, const char *sql, sqlite3_stmt **out)
{
	if (*out)
		return 0;
	if (sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, out, NULL) !=
	    SQLITE_OK)
		return store_fail_sqlite(st, NULL, "profiles: prepare");
	return 0;
}

/* A cached statement, prepared on first use; NULL with *rc set on failure. */
static sqlite3_stmt *pstmt(struct pf_store *st, enum prof_stmt id, int *rc)
{
	struct store_prof *p = prof_of(st);

	if (!p) {
		*rc = store_fail_other(st, NULL, -ENOMEM, "profiles: out of memory");
		return NULL;
	}
	*rc = prepare(st, prof_sql[id], &p->stmt[id]);
	return *rc < 0 ? NULL : p->stmt[id];
}

static void stmt_resetp(sqlite3_stmt **s)
{
	if (*s) {
		sqlite3_reset(*s);
		sqlite3_clear_bindings(*s);
	}
}

#define PSTMT(name, st, id, rc) _cleanup_(stmt_resetp) sqlite3_stmt *name = pstmt((st), (id), (rc))

static int run(struct pf_store *st, enum prof_stmt id, const char *what)
{
	int rc;
	PSTMT(s, st, id, &rc);

	if (!s)
		return rc;
	return store_step_done(st, s, what);
}

/* Content ids looked up or stored in a transaction that is rolled back may be gone: the
 * connection forgets them (store_stacks.c looks them up again). */
static void rollback(struct pf_store *st)
{
	if (!sqlite3_get_autocommit(st->db))
		run(st, P_ROLLBACK, "profiles: rollback");
	store_stacks_forget(st);
	if (st->prof)
		st->prof->batch = false;
}

static int commit(struct pf_store *st)
{
	int rc = run(st, P_COMMIT, "profiles: commit");

	if (rc < 0)
		rollback(st);
	return rc;
}

static int bind_str(sqlite3_stmt *s, int i, const char *v)
{
	return sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
}

/* ---- Insert and retention. */

int pf_store_profiles_set_retention(struct pf_store *st, const struct pf_profile_retention *ret)
{
	struct store_prof *p = prof_of(st);

	if (!p)
		return -ENOMEM;
	if (!ret || ret->max_age_ms < 0 || ret->max_bytes < 0)
		return -EINVAL;
	p->ret = *ret;
	return 0;
}

void pf_store_profiles_get_retention(struct pf_store *st, struct pf_profile_retention *ret)
{
	struct store_prof *p = prof_of(st);

	memset(ret, 0, sizeof(*ret));
	if (p)
		*ret = p->ret;
}

static int totals(struct pf_store *st, int64_t *count, int64_t *bytes)
{
	int rc;
	PSTMT(s, st, P_TOTALS, &rc);

	if (!s)
		return rc;
	if (sqlite3_step(s) != SQLITE_ROW)
		return store_fail_sqlite(st, NULL, "profiles: totals");
	if (count)
		*count = sqlite3_column_int64(s, 0);
	if (bytes)
		*bytes = sqlite3_column_int64(s, 1);
	return 0;
}

/* Runs statement sid, which returns no row, with its n integer parameters (1 or 2: a, b);
 * *changed (may be NULL) gets the rows it changed. */
static int run_ints(struct pf_store *st, enum prof_stmt sid, const char *what, int n, int64_t a,
		    int64_t b, size_t *changed)
{
	int rc;
	PSTMT(s, st, sid, &rc);

	if (!s)
		return rc;
	if (sqlite3_bind_int64(s, 1, a) || (n > 1 && sqlite3_bind_int64(s, 2, b)))
		return store_fail_sqlite(st, NULL, "profiles: retain: bind");
	rc = store_step_done(st, s, what);
	if (rc == 0 && changed)
		*changed = (size_t)sqlite3_changes(st->db);
	return rc;
}

/* Inside a transaction: deletes the oldest profiles until `excess` body bytes are gone, at
 * most max_rows of them. */
static int delete_oldest_bytes(struct pf_store *st, int64_t excess, size_t max_rows,
			       size_t *deleted)
{
	int64_t last = -1, freed = 0;
	size_t n = 0;
	int rc;

	{
		PSTMT(s, st, P_OLDEST, &rc);
		if (!s)
			return rc;
		if (sqlite3_bind_int64(s, 1, (int64_t)max_rows))
			return store_fail_sqlite(st, NULL, "profiles: retain: bind");
		while (freed < excess && n < max_rows) {
			rc = sqlite3_step(s);
			if (rc == SQLITE_DONE)
				break;
			if (rc != SQLITE_ROW)
				return store_fail_sqlite(st, NULL, "profiles: retain: oldest");
			last = sqlite3_column_int64(s, 0);
			freed += sqlite3_column_int64(s, 1);
			n++;
		}
	}
	if (last < 0)
		return 0;
	size_t gone = 0;
	rc = run_ints(st, P_UNCOUNT_UPTO, "profiles: retain: uncount", 1, last, 0, NULL);
	if (rc == 0)
		rc = run_ints(st, P_DELETE_UPTO, "profiles: retain: delete", 1, last, 0, &gone);
	if (rc == 0 && deleted)
		*deleted += gone;
	return rc;
}

static int delete_expired(struct pf_store *st, int64_t cutoff_ms, size_t max_rows,
			  size_t *deleted, size_t *n)
{
	*n = 0;
	int rc = run_ints(st, P_UNCOUNT_EXPIRED, "profiles: retain: uncount", 2, cutoff_ms,
			  (int64_t)max_rows, NULL);
	if (rc == 0)
		rc = run_ints(st, P_DELETE_EXPIRED, "profiles: retain: expire", 2, cutoff_ms,
			      (int64_t)max_rows, n);
	if (rc == 0 && deleted)
		*deleted += *n;
	return rc;
}

/* Inside a transaction: age first (at most max_rows), then bytes over the cap. *more is set
 * when the row budget ran out before the store was within both limits. */
static int retain_tx(struct pf_store *st, const struct pf_profile_retention *ret, int64_t now_ms,
		     size_t max_rows, size_t *deleted, bool *more)
{
	size_t n = 0;
	int64_t bytes = 0;
	int rc;

	*more = false;
	{
		int64_t keep = ret->max_age_ms > 0 ? ret->max_age_ms * PF_PROFILE_ROLLUP_AGE_FACTOR
						   : PF_PROFILE_ROLLUP_DEFAULT_AGE_MS;
		rc = run_ints(st, P_EXPIRE_ROLLUPS, "profiles: retain: rollups", 2, now_ms - keep,
			      (int64_t)max_rows, &n);
		if (rc < 0)
			return rc;
		if (n >= max_rows) {
			*more = true;
			return 0;
		}
		n = 0;
	}
	if (ret->max_age_ms > 0) {
		rc = delete_expired(st, now_ms - ret->max_age_ms, max_rows, deleted, &n);
		if (rc < 0)
			return rc;
		if (n >= max_rows) {
			*more = true;
			return 0;
		}
	}
	if (ret->max_bytes <= 0)
		return 0;
	rc = totals(st, NULL, &bytes);
	if (rc < 0 || bytes <= ret->max_bytes)
		return rc;
	rc = delete_oldest_bytes(st, bytes - ret->max_bytes, max_rows - n, deleted);
	if (rc < 0)
		return rc;
	rc = totals(st, NULL, &bytes);
	if (rc == 0 && bytes > ret->max_bytes)
		*more = true;
	return rc;
}

static bool profile_id_set(const uint8_t id[16])
{
	for (int i = 0; i < 16; i++)
		if (id[i])
			return true;
	return false;
}

/* Sets r->id and r->duplicate when a profile with r's (agent, profile_id) is stored already
 * (a retry of a request whose answer was lost, or the same profile sent by two paths). */
static int find_duplicate(struct pf_store *st, struct pf_profile_row *r)
{
	int rc;

	r->duplicate = false;
	if (!profile_id_set(r->profile_id))
		return 0;
	PSTMT(s, st, P_FIND_DUP, &rc);
	if (!s)
		return rc;
	if (sqlite3_bind_blob(s, 1, r->profile_id, 16, SQLITE_STATIC) || bind_str(s, 2, r->agent))
		return store_fail_sqlite(st, NULL, "profiles: find duplicate: bind");
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		r->id = sqlite3_column_int64(s, 0);
		r->duplicate = true;
		return 0;
	}
	if (rc == SQLITE_DONE)
		return 0;
	return store_fail_sqlite(st, NULL, "profiles: find duplicate");
}

static int insert_one(struct pf_store *st, struct pf_profile_row *r)
{
	int rc = find_duplicate(st, r);
	if (rc < 0 || r->duplicate)
		return rc;
	rc = store_stacks_prepare(st, r);
	if (rc < 0)
		return rc;
	_cleanup_(pf_buf_release) struct pf_buf detail;
	pf_buf_init(&detail, 0);
	if (r->detail) {
		rc = store_details_pack(st, r->detail, &detail);
		if (rc < 0)
			return rc;
	}
	int64_t body_bytes = r->detail ? (int64_t)detail.len : (int64_t)r->body_len;
	{
		PSTMT(s, st, P_INSERT, &rc);
		if (!s)
			return rc;
		if (sqlite3_bind_blob(s, 1, r->profile_id, 16, SQLITE_STATIC) ||
		    bind_str(s, 2, r->agent) || bind_str(s, 3, r->service) ||
		    bind_str(s, 4, r->host) || sqlite3_bind_int64(s, 5, r->pid) ||
		    bind_str(s, 6, r->exe) || bind_str(s, 7, r->type) ||
		    sqlite3_bind_int64(s, 8, r->start_ns) ||
		    sqlite3_bind_int64(s, 9, r->duration_ns) ||
		    sqlite3_bind_int64(s, 10, r->samples) || sqlite3_bind_int64(s, 11, r->n_links) ||
		    sqlite3_bind_int64(s, 12, r->received_ms) ||
		    sqlite3_bind_int64(s, 13, body_bytes) ||
		    sqlite3_bind_int64(s, 14, r->raw_bytes) ||
		    bind_str(s, 15, r->capture_id ? r->capture_id : "") ||
		    bind_str(s, 16, r->trigger ? r->trigger : "") ||
		    bind_str(s, 17, r->namespace_name ? r->namespace_name : "") ||
		    bind_str(s, 18, r->pod ? r->pod : "") ||
		    bind_str(s, 19, r->container ? r->container : "") ||
		    sqlite3_bind_int64(s, 20, r->attrset) || bind_str(s, 21, r->unit ? r->unit : ""))
			return store_fail_sqlite(st, NULL, "profiles: insert: bind");
		rc = store_step_done(st, s, "profiles: insert");
		if (rc < 0)
			return rc;
		r->id = sqlite3_last_insert_rowid(st->db);
		r->body_bytes = body_bytes;
	}
	rc = store_stacks_insert(st, r);
	if (rc < 0)
		return rc;
	if (r->detail) {
		rc = store_details_put(st, r->id, &detail);
		if (rc < 0)
			return rc;
	} else {
		PSTMT(s, st, P_INSERT_BODY, &rc);
		if (!s)
			return rc;
		if (sqlite3_bind_int64(s, 1, r->id) ||
		    sqlite3_bind_blob64(s, 2, r->body ? r->body : "", r->body_len, SQLITE_STATIC))
			return store_fail_sqlite(st, NULL, "profiles: insert body: bind");
		rc = store_step_done(st, s, "profiles: insert body");
		if (rc < 0)
			return rc;
	}
	if (r->flame && r->flame_len) {
		PSTMT(s, st, P_INSERT_FLAME, &rc);
		if (!s)
			return rc;
		if (sqlite3_bind_int64(s, 1, r->id) ||
		    sqlite3_bind_blob64(s, 2, r->flame, r->flame_len, SQLITE_STATIC))
			return store_fail_sqlite(st, NULL, "profiles: insert flame: bind");
		rc = store_step_done(st, s, "profiles: insert flame");
		if (rc < 0)
			return rc;
		PSTMT(c, st, P_COUNT_FLAME, &rc);
		if (!c)
			return rc;
		if (sqlite3_bind_int64(c, 1, (int64_t)r->flame_len))
			return store_fail_sqlite(st, NULL, "profiles: count flame: bind");
		rc = store_step_done(st, c, "profiles: count flame");
		if (rc < 0)
			return rc;
	}
	size_t nl = pf_min(r->n_link_entries, (size_t)PF_STORE_PROFILE_MAX_LINKS);
	if (!nl)
		return 0;
	PSTMT(s, st, P_INSERT_LINK, &rc);
	if (!s)
		return rc;
	for (size_t i = 0; i < nl; i++) {
		if (sqlite3_bind_blob(s, 1, r->links[i].trace_id, 16, SQLITE_STATIC) ||
		    sqlite3_bind_int64(s, 2, r->id) ||
		    sqlite3_bind_blob(s, 3, r->links[i].span_id, 8, SQLITE_STATIC))
			return store_fail_sqlite(st, NULL, "profiles: insert link: bind");
		rc = store_step_done(st, s, "profiles: insert link");
		if (rc < 0)
			return rc;
		sqlite3_reset(s);
	}
	return 0;
}

static bool row_valid(const struct pf_profile_row *r)
{
	return r->agent && r->service && r->host && r->exe && r->type && (r->body || !r->body_len) &&
	       (r->links || !r->n_link_entries) && r->body_len <= INT64_MAX &&
	       (r->flame || !r->flame_len) && r->flame_len <= INT64_MAX;
}

/* Inside the insert's transaction: bytes over the cap go now whatever their number, so the
 * store never stays over it; the age limit is trimmed RETAIN_BATCH rows at a time (the timer
 * does the rest). */
static int retain_after_insert(struct pf_store *st, const struct pf_profile_retention *ret,
			       int64_t now_ms, size_t *del, bool *more)
{
	int rc = 0;

	if (ret && ret->max_age_ms > 0) {
		size_t k;
		rc = delete_expired(st, now_ms - ret->max_age_ms, RETAIN_BATCH, del, &k);
	}
	if (rc == 0 && ret && ret->max_bytes > 0) {
		struct pf_profile_retention bytes_only = {.max_bytes = ret->max_bytes};
		rc = retain_tx(st, &bytes_only, now_ms, SIZE_MAX / 2, del, more);
	}
	return rc;
}

int pf_store_profiles_insert(struct pf_store *st, struct pf_profile_row *rows, size_t n,
			     const struct pf_profile_retention *ret, int64_t now_ms,
			     size_t *deleted)
{
	struct store_prof *p = prof_of(st);
	size_t del = 0;
	bool more = false;
	int rc;

	if (deleted)
		*deleted = 0;
	if (n == 0)
		return 0;
	if (!rows)
		return -EINVAL;
	if (!p)
		return store_fail_other(st, NULL, -ENOMEM, "profiles: out of memory");
	for (size_t i = 0; i < n; i++)
		if (!row_valid(&rows[i]))
			return store_fail_other(st, NULL, -EINVAL, "profiles: insert: bad row");
	if (p->batch) {
		/* In a batch: this call's rows in a savepoint; retention at the batch's end. */
		if (sqlite3_get_autocommit(st->db))
			return store_fail_other(st, NULL, -EIO,
						"profiles: the batch's transaction ended");
		rc = run(st, P_SAVEPOINT, "profiles: savepoint");
		for (size_t i = 0; i < n && rc == 0; i++)
			rc = insert_one(st, &rows[i]);
		if (rc == 0)
			return run(st, P_RELEASE, "profiles: release");
		if (!sqlite3_get_autocommit(st->db)) {
			run(st, P_ROLLBACK_TO, "profiles: rollback to");
			run(st, P_RELEASE, "profiles: release");
			store_stacks_forget(st);
		} else {
			rollback(st); /* SQLite ended the whole transaction (IOERR, FULL...) */
		}
		return rc;
	}
	rc = run(st, P_BEGIN, "profiles: begin");
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = insert_one(st, &rows[i]);
	if (rc == 0)
		rc = retain_after_insert(st, ret, now_ms, &del, &more);
	if (rc < 0) {
		rollback(st);
		return rc;
	}
	rc = commit(st);
	if (rc == 0 && deleted)
		*deleted = del;
	return rc;
}

int pf_store_profiles_batch_begin(struct pf_store *st)
{
	struct store_prof *p = prof_of(st);

	if (!p)
		return store_fail_other(st, NULL, -ENOMEM, "profiles: out of memory");
	if (p->batch)
		return store_fail_other(st, NULL, -EBUSY, "profiles: a batch is open already");
	int rc = run(st, P_BEGIN, "profiles: begin");
	if (rc == 0)
		p->batch = true;
	return rc;
}

bool pf_store_profiles_batch_open(struct pf_store *st)
{
	return st->prof && st->prof->batch && !sqlite3_get_autocommit(st->db);
}

int pf_store_profiles_batch_end(struct pf_store *st, const struct pf_profile_retention *ret,
				int64_t now_ms, size_t *deleted)
{
	struct store_prof *p = prof_of(st);
	size_t del = 0;
	bool more = false;
	int rc;

	if (deleted)
		*deleted = 0;
	if (!p || !p->batch)
		return store_fail_other(st, NULL, -EINVAL, "profiles: no batch is open");
	if (sqlite3_get_autocommit(st->db)) { /* SQLite ended it on an error */
		rollback(st);
		return store_fail_other(st, NULL, -EIO, "profiles: the batch's transaction ended");
	}
	rc = retain_after_insert(st, ret, now_ms, &del, &more);
	if (rc < 0) {
		rollback(st);
		return rc;
	}
	p->batch = false;
	rc = commit(st);
	if (rc < 0) {
		store_stacks_forget(st);
		return rc;
	}
	if (deleted)
		*deleted = del;
	return 0;
}

int pf_store_profiles_retain(struct pf_store *st, const struct pf_profile_retention *ret,
			     int64_t now_ms, size_t max_rows, size_t *deleted)
{
	bool more = false;
	int rc;

	if (deleted)
		*deleted = 0;
	if (!ret || max_rows == 0)
		return -EINVAL;
	if (ret->max_age_ms <= 0 && ret->max_bytes <= 0)
		return 0;
	rc = run(st, P_BEGIN, "profiles: begin");
	if (rc < 0)
		return rc;
	rc = retain_tx(st, ret, now_ms, max_rows, deleted, &more);
	if (rc < 0) {
		rollback(st);
		return rc;
	}
	rc = commit(st);
	if (rc < 0)
		return rc;
	return more ? 1 : 0;
}

int pf_store_profiles_totals(struct pf_store *st, int64_t *count, int64_t *bytes)
{
	return totals(st, count, bytes);
}

/* ---- Queries. */

/* Fills r from a PROF_COLS row; strings point into the statement. */
static int read_row(struct pf_store *st, sqlite3_stmt *s, struct pf_profile_row *r)
{
	const void *pid = sqlite3_column_blob(s, 1);
	const char *txt[10];
	static const int cols[10] = {2, 3, 4, 6, 7, 15, 16, 17, 18, 19};

	memset(r, 0, sizeof(*r));
	r->id = sqlite3_column_int64(s, 0);
	if (pid && sqlite3_column_bytes(s, 1) == 16)
		memcpy(r->profile_id, pid, 16);
	for (int i = 0; i < 10; i++) {
		txt[i] = (const char *)sqlite3_column_text(s, cols[i]);
		if (!txt[i])
			return store_fail_other(st, NULL, -ENOMEM, "profiles: out of memory");
	}
	r->agent = txt[0];
	r->service = txt[1];
	r->host = txt[2];
	r->exe = txt[3];
	r->type = txt[4];
	r->capture_id = txt[5];
	r->trigger = txt[6];
	r->namespace_name = txt[7];
	r->pod = txt[8];
	r->container = txt[9];
	r->pid = sqlite3_column_int64(s, 5);
	r->start_ns = sqlite3_column_int64(s, 8);
	r->duration_ns = sqlite3_column_int64(s, 9);
	r->samples = sqlite3_column_int64(s, 10);
	r->n_links = sqlite3_column_int64(s, 11);
	r->received_ms = sqlite3_column_int64(s, 12);
	r->body_bytes = sqlite3_column_int64(s, 13);
	r->raw_bytes = sqlite3_column_int64(s, 14);
	r->attrset = sqlite3_column_int64(s, 20);
	return 0;
}

/* The list filters: filters[i] is the variant bit 1 << i, in the order their clauses stand in
 * the statement. The text ones compare a column with the field at `off` of struct
 * pf_profile_filter (present when not NULL or empty); F_TRACE matches the trace_id blob. */
#define TEXT_FILTER(col, param, field)                                                             \
	{" AND " col " = " param, param, offsetof(struct pf_profile_filter, field)}
static const struct {
	const char *clause, *param;
	size_t off;
} filters[] = {
    TEXT_FILTER("service", ":service", service),
    TEXT_FILTER("agent", ":agent", agent),
    {" AND (type = :type OR id IN (SELECT id FROM profile_series WHERE type = :type AND "
     "start_ns >= :from AND start_ns < :to))",
     ":type", offsetof(struct pf_profile_filter, type)},
    {" AND id IN (SELECT profile FROM profile_links WHERE trace_id = :trace)", ":trace", 0},
    TEXT_FILTER("capture_id", ":capture", capture_id),
    TEXT_FILTER("trigger_name", ":trigger", trigger),
    TEXT_FILTER("k8s_namespace", ":namespace", namespace_name),
    TEXT_FILTER("k8s_pod", ":pod", pod),
    TEXT_FILTER("k8s_container", ":container", container),
};
_Static_assert(1u << PF_ARRAY_SIZE(filters) == F__VARIANTS, "one filter per variant bit");

static const char *filter_text(const struct pf_profile_filter *f, size_t i)
{
	return *(const char *const *)((const char *)f + filters[i].off);
}

static sqlite3_stmt *list_stmt(struct pf_store *st, unsigned mask, int *rc)
{
	struct store_prof *p = prof_of(st);
	char sql[2048];
	size_t n;

	if (!p) {
		*rc = store_fail_other(st, NULL, -ENOMEM, "profiles: out of memory");
		return NULL;
	}
	if (p->list[mask]) {
		*rc = 0;
		return p->list[mask];
	}
	n = (size_t)snprintf(sql, sizeof(sql),
			     "SELECT " PROF_COLS " FROM profiles WHERE start_ns >= :from AND "
			     "start_ns < :to");
	for (size_t i = 0; i < PF_ARRAY_SIZE(filters); i++)
		if (mask & (1u << i))
			n += (size_t)snprintf(sql + n, sizeof(sql) - n, "%s", filters[i].clause);
	snprintf(sql + n, sizeof(sql) - n, " ORDER BY start_ns DESC, id DESC LIMIT :limit");
	*rc = prepare(st, sql, &p->list[mask]);
	return *rc < 0 ? NULL : p->list[mask];
}

/* Binds the filters of mask to their named parameters. */
static int bind_filters(sqlite3_stmt *s, const struct pf_profile_filter *f, unsigned mask)
{
	for (size_t i = 0; i < PF_ARRAY_SIZE(filters); i++) {
		int k = sqlite3_bind_parameter_index(s, filters[i].param);
		if (!(mask & (1u << i)))
			continue;
		if (1u << i == F_TRACE ? sqlite3_bind_blob(s, k, f->trace_id, 16, SQLITE_STATIC)
				       : bind_str(s, k, filter_text(f, i)))
			return -1;
	}
	return 0;
}

int pf_store_profiles_foreach(struct pf_store *st, const struct pf_profile_filter *f,
			      int (*cb)(const struct pf_profile_row *row, void *ud), void *ud)
{
	unsigned mask = 0;
	int rc;

	if (!f || !cb)
		return -EINVAL;
	for (size_t i = 0; i < PF_ARRAY_SIZE(filters); i++) {
		const char *v = 1u << i == F_TRACE ? NULL : filter_text(f, i);
		if (1u << i == F_TRACE ? f->has_trace : v && *v)
			mask |= 1u << i;
	}
	_cleanup_(stmt_resetp) sqlite3_stmt *s = list_stmt(st, mask, &rc);
	if (!s)
		return rc;
	if (sqlite3_stmt_busy(s)) {
		s = NULL; /* in use by an outer call: leave it alone */
		return -EBUSY;
	}
	if (sqlite3_bind_int64(s, sqlite3_bind_parameter_index(s, ":from"), f->from_ns) ||
	    sqlite3_bind_int64(s, sqlite3_bind_parameter_index(s, ":to"),
			       f->to_ns > 0 ? f->to_ns : INT64_MAX) ||
	    sqlite3_bind_int64(s, sqlite3_bind_parameter_index(s, ":limit"),
			       f->limit ? (int64_t)pf_min(f->limit, (size_t)INT64_MAX) : -1) ||
	    bind_filters(s, f, mask))
		return store_fail_sqlite(st, NULL, "profiles: list: bind");
	for (;;) {
		struct pf_profile_row r;

		rc = store_step_row(st, s, 0, "profiles: list");
		if (rc <= 0)
			return rc;
		rc = read_row(st, s, &r);
		if (rc == 0)
			rc = cb(&r, ud);
		if (rc)
			return rc;
	}
}

int pf_store_profile_get(struct pf_store *st, int64_t id,
			 int (*cb)(const struct pf_profile_row *row, void *ud), void *ud)
{
	struct pf_profile_link links[PF_STORE_PROFILE_MAX_LINKS];
	struct pf_profile_row r;
	size_t nl = 0;
	int rc;

	if (!cb)
		return -EINVAL;
	{
		PSTMT(l, st, P_GET_LINKS, &rc);
		if (!l)
			return rc;
		if (sqlite3_bind_int64(l, 1, id))
			return store_fail_sqlite(st, NULL, "profiles: get: bind");
		while ((rc = sqlite3_step(l)) == SQLITE_ROW && nl < PF_ARRAY_SIZE(links)) {
			const void *t = sqlite3_column_blob(l, 0), *sp = sqlite3_column_blob(l, 1);
			if (!t || !sp || sqlite3_column_bytes(l, 0) != 16 ||
			    sqlite3_column_bytes(l, 1) != 8)
				continue;
			memcpy(links[nl].trace_id, t, 16);
			memcpy(links[nl].span_id, sp, 8);
			nl++;
		}
		if (rc != SQLITE_ROW && rc != SQLITE_DONE)
			return store_fail_sqlite(st, NULL, "profiles: get links");
	}
	PSTMT(s, st, P_GET, &rc);
	if (!s)
		return rc;
	if (sqlite3_bind_int64(s, 1, id))
		return store_fail_sqlite(st, NULL, "profiles: get: bind");
	rc = store_step_row(st, s, -ENOENT, "profiles: get");
	if (rc <= 0)
		return rc;
	rc = read_row(st, s, &r);
	if (rc < 0)
		return rc;
	r.links = nl ? links : NULL;
	r.n_link_entries = nl;
	return cb(&r, ud);
}

/* Appends the one blob column that statement sid selects for profile id to out. */
static int profile_blob(struct pf_store *st, enum prof_stmt sid, const char *what, int64_t id,
			struct pf_buf *out)
{
	int rc;
	PSTMT(s, st, sid, &rc);

	if (!s)
		return rc;
	if (!out)
		return -EINVAL;
	return store_read_blob(st, s, id, what, out);
}

int pf_store_profile_body(struct pf_store *st, int64_t id, struct pf_buf *out)
{
	return profile_blob(st, P_BODY, "profiles: body", id, out);
}

int pf_store_profile_flame(struct pf_store *st, int64_t id, struct pf_buf *out)
{
	return profile_blob(st, P_FLAME, "profiles: flame", id, out);
}

int pf_store_profile_find(struct pf_store *st, const uint8_t profile_id[16], int64_t *id)
{
	int rc;
	PSTMT(s, st, P_FIND_PROFILE, &rc);

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

int pf_store_set_read_only(struct pf_store *st)
{
	if (sqlite3_exec(st->db, "PRAGMA query_only = 1", NULL, NULL, NULL) != SQLITE_OK)
		return store_fail_sqlite(st, NULL, "query_only");
	return 0;
}
