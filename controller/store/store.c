/* store.c — opening, migrating and closing the store and the one migration list of both
 * backends; see store.h and docs/internals/store.md.
 *
 * The SQLite transaction helpers here serve the driver (store_q.c) and the profile store.
 * Their statements are listed once in stmt_sql[], prepared at open
 * (SQLITE_PREPARE_PERSISTENT) and kept in struct pf_store. A user takes one with
 * STMT(), which resets it and clears its bindings when the variable goes out of scope, so
 * no path can leave a statement half-stepped. Writes go through tx_begin()/tx_commit()
 * (BEGIN IMMEDIATE), so a writer takes the write lock up front and never dead-locks on a
 * read-to-write upgrade; busy_timeout covers the wait for the other connection. */
#include "store.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <sqlite3.h>

#include "pf/compiler.h"
#include "store_dialect.h"
#include "store_int.h"
#include "store_pg.h"

#define STORE_BUSY_TIMEOUT_MS 5000

/* ---- Schema: numbered migrations, ONE list for both backends (store_dialect.h).
 * migrations[i] takes the version from i to i + 1. In SQLite (user_version) each step runs in
 * its own BEGIN IMMEDIATE transaction together with the version bump; in PostgreSQL
 * (profleet_schema.version) the pending steps run in one transaction under an advisory lock
 * (store_pg.c). Never edit a released step: append a new one, with both forms. */
/* The PostgreSQL form of each step, for the fleet tables only (the profile store stays in
 * the replica's SQLite file, so its steps are "" here). Same tables, columns and keys; types
 * spelled the PostgreSQL way: BLOB -> BYTEA, INTEGER -> BIGINT (so every integer column reads
 * back as int8), the rowid -> BIGSERIAL, length() of a blob -> octet_length(), text keys
 * COLLATE "C" (SQLite compares bytes: ids and names sort the same way in both). */
#define PG_STEP_1                                                                                  \
	"CREATE TABLE tokens (hash BYTEA PRIMARY KEY CHECK (octet_length(hash) = 32),"             \
	" role TEXT NOT NULL, name TEXT NOT NULL, created_ms BIGINT NOT NULL);"                    \
	"CREATE TABLE configs (name TEXT COLLATE \"C\" NOT NULL,"                                  \
	" version BIGINT NOT NULL CHECK (version >= 1),"                                           \
	" hash BYTEA NOT NULL CHECK (octet_length(hash) = 32), body TEXT NOT NULL,"                \
	" created_ms BIGINT NOT NULL, PRIMARY KEY (name, version));"                               \
	"CREATE TABLE assignments (name TEXT COLLATE \"C\" PRIMARY KEY, selector TEXT NOT NULL,"   \
	" config TEXT NOT NULL, priority BIGINT NOT NULL, updated_ms BIGINT NOT NULL);"            \
	"CREATE TABLE agents (uid BYTEA PRIMARY KEY CHECK (octet_length(uid) = 16),"               \
	" attributes_json TEXT NOT NULL, capabilities BIGINT NOT NULL, health_json TEXT,"          \
	" effective_config TEXT, effective_hash BYTEA, config_name TEXT,"                          \
	" config_version BIGINT NOT NULL, remote_hash BYTEA, remote_status BIGINT NOT NULL,"       \
	" remote_error TEXT, connected BIGINT NOT NULL, first_seen_ms BIGINT NOT NULL,"            \
	" last_seen_ms BIGINT NOT NULL);"                                                          \
	"CREATE TABLE audit (id BIGSERIAL PRIMARY KEY, ts_ms BIGINT NOT NULL,"                     \
	" actor TEXT NOT NULL, action TEXT NOT NULL, target TEXT NOT NULL, detail TEXT);"          \
	"CREATE INDEX audit_ts ON audit (ts_ms);"                                                  \
	"CREATE INDEX audit_target ON audit (target, id);"                                         \
	"CREATE INDEX assignments_config ON assignments (config);"
#define PG_STEP_2 ""
#define PG_STEP_3 ""
#define PG_STEP_4                                                                                  \
	"CREATE TABLE captures (id TEXT COLLATE \"C\" PRIMARY KEY, state TEXT NOT NULL,"           \
	" created_ms BIGINT NOT NULL, started_ms BIGINT NOT NULL, finished_ms BIGINT NOT NULL,"    \
	" deadline_ms BIGINT NOT NULL, created_by TEXT NOT NULL, request TEXT NOT NULL,"           \
	" agents_matched BIGINT NOT NULL);"                                                        \
	"CREATE INDEX captures_state ON captures (state, id);"                                     \
	"CREATE TABLE capture_agents (capture TEXT COLLATE \"C\" NOT NULL REFERENCES captures (id)" \
	" ON DELETE CASCADE, uid BYTEA NOT NULL CHECK (octet_length(uid) = 16),"                   \
	" state TEXT NOT NULL, samples BIGINT NOT NULL, bytes BIGINT NOT NULL,"                    \
	" profile_ids BYTEA NOT NULL, error_code TEXT NOT NULL, error TEXT NOT NULL,"              \
	" updated_ms BIGINT NOT NULL, PRIMARY KEY (capture, uid));"
#define PG_STEP_5                                                                                  \
	"CREATE TABLE rollouts (id TEXT COLLATE \"C\" PRIMARY KEY, config TEXT NOT NULL,"          \
	" version BIGINT NOT NULL, state TEXT NOT NULL, created_ms BIGINT NOT NULL,"               \
	" updated_ms BIGINT NOT NULL, created_by TEXT NOT NULL, spec TEXT NOT NULL,"               \
	" progress TEXT NOT NULL);"                                                                \
	"CREATE INDEX rollouts_state ON rollouts (state, id);"                                     \
	"CREATE TABLE rollout_agents (rollout TEXT COLLATE \"C\" NOT NULL REFERENCES rollouts (id)" \
	" ON DELETE CASCADE, uid BYTEA NOT NULL CHECK (octet_length(uid) = 16),"                   \
	" batch BIGINT NOT NULL, from_version BIGINT NOT NULL, state TEXT NOT NULL,"               \
	" revert TEXT NOT NULL, error TEXT NOT NULL, updated_ms BIGINT NOT NULL,"                  \
	" PRIMARY KEY (rollout, uid));"                                                            \
	"CREATE TABLE agent_pins (uid BYTEA PRIMARY KEY CHECK (octet_length(uid) = 16),"           \
	" config TEXT NOT NULL, version BIGINT NOT NULL CHECK (version >= 1));"                    \
	"CREATE TABLE config_serving (name TEXT COLLATE \"C\" PRIMARY KEY,"                        \
	" version BIGINT NOT NULL CHECK (version >= 1));"
#define PG_STEP_6 ""
#define PG_STEP_8                                                                                  \
	"ALTER TABLE agents ADD COLUMN written_ms BIGINT NOT NULL DEFAULT 0;"                      \
	"CREATE INDEX agents_written ON agents (written_ms);"
#define PG_STEP_9                                                                                  \
	"CREATE TABLE replicas (id TEXT COLLATE \"C\" PRIMARY KEY, last_seen_ms BIGINT NOT NULL);"    \
	"ALTER TABLE agents ADD COLUMN replica TEXT COLLATE \"C\" NOT NULL DEFAULT '';"             \
	"CREATE INDEX agents_replica ON agents (replica);"
#define PG_STEP_10 "ALTER TABLE tokens ADD COLUMN seq BIGSERIAL;"
#define PG_STEP_13                                                                                 \
	"CREATE TABLE commands (id TEXT COLLATE \"C\" PRIMARY KEY, kind TEXT NOT NULL,"            \
	" target TEXT NOT NULL, action TEXT NOT NULL, actor TEXT NOT NULL,"                        \
	" actor_id TEXT NOT NULL, source TEXT NOT NULL, created_ms BIGINT NOT NULL,"               \
	" state BIGINT NOT NULL, status BIGINT NOT NULL, body TEXT NOT NULL,"                      \
	" done_by TEXT NOT NULL);"                                                                 \
	"CREATE INDEX commands_state ON commands (state, created_ms);"
#define PG_STEP_11                                                                                 \
	"ALTER TABLE tokens ADD COLUMN agent_uid BYTEA CHECK (octet_length(agent_uid) = 16);"       \
	"CREATE INDEX tokens_agent ON tokens (agent_uid);"
#define PG_STEP_7                                                                                  \
	"ALTER TABLE tokens ADD COLUMN id TEXT COLLATE \"C\" NOT NULL DEFAULT '';"                 \
	"ALTER TABLE tokens ADD COLUMN expires_ms BIGINT NOT NULL DEFAULT 0;"                      \
	"ALTER TABLE tokens ADD COLUMN last_used_ms BIGINT NOT NULL DEFAULT 0;"                    \
	"ALTER TABLE tokens ADD COLUMN created_by TEXT NOT NULL DEFAULT '';"                       \
	"UPDATE tokens SET id = substr(md5(random()::text || encode(hash, 'base64')), 1, 16);"     \
	"CREATE UNIQUE INDEX tokens_id ON tokens (id);"                                            \
	"ALTER TABLE audit ADD COLUMN actor_id TEXT NOT NULL DEFAULT '';"                          \
	"ALTER TABLE audit ADD COLUMN source TEXT NOT NULL DEFAULT '';"                            \
	"ALTER TABLE audit ADD COLUMN status BIGINT NOT NULL DEFAULT 0;"


/* clang-format off */
static const struct store_migration migrations[] = {
	/* 0 -> 1: initial schema. */
	{.sqlite =
		"CREATE TABLE tokens ("
		"  hash BLOB PRIMARY KEY NOT NULL CHECK (length(hash) = 32),"
		"  role TEXT NOT NULL,"
		"  name TEXT NOT NULL,"
		"  created_ms INTEGER NOT NULL"
		") STRICT;"
		"CREATE TABLE configs ("
		"  name TEXT NOT NULL,"
		"  version INTEGER NOT NULL CHECK (version >= 1),"
		"  hash BLOB NOT NULL CHECK (length(hash) = 32),"
		"  body TEXT NOT NULL,"
		"  created_ms INTEGER NOT NULL,"
		"  PRIMARY KEY (name, version)"
		") STRICT, WITHOUT ROWID;"
		"CREATE TABLE assignments ("
		"  name TEXT PRIMARY KEY NOT NULL,"
		"  selector TEXT NOT NULL,"
		"  config TEXT NOT NULL,"
		"  priority INTEGER NOT NULL,"
		"  updated_ms INTEGER NOT NULL"
		") STRICT;"
		"CREATE TABLE agents ("
		"  uid BLOB PRIMARY KEY NOT NULL CHECK (length(uid) = 16),"
		"  attributes_json TEXT NOT NULL,"
		"  capabilities INTEGER NOT NULL,"
		"  health_json TEXT,"
		"  effective_config TEXT,"
		"  effective_hash BLOB,"
		"  config_name TEXT,"
		"  config_version INTEGER NOT NULL,"
		"  remote_hash BLOB,"
		"  remote_status INTEGER NOT NULL,"
		"  remote_error TEXT,"
		"  connected INTEGER NOT NULL,"
		"  first_seen_ms INTEGER NOT NULL,"
		"  last_seen_ms INTEGER NOT NULL"
		") STRICT;"
		"CREATE TABLE audit ("
		"  id INTEGER PRIMARY KEY,"
		"  ts_ms INTEGER NOT NULL,"
		"  actor TEXT NOT NULL,"
		"  action TEXT NOT NULL,"
		"  target TEXT NOT NULL,"
		"  detail TEXT"
		") STRICT;"
		"CREATE INDEX audit_ts ON audit (ts_ms);"
		"CREATE INDEX audit_target ON audit (target, id);"
		"CREATE INDEX assignments_config ON assignments (config);",
	 .pg = PG_STEP_1},
	/* 1 -> 2: the embedded profile store (store_profiles.c). Metadata in profiles, the
	 * gzip'd body in its own table so that metadata scans never page through blobs; totals
	 * kept by triggers so retention reads one row; trace links for ?trace_id=. */
	{.sqlite =
		"CREATE TABLE profiles ("
		"  id INTEGER PRIMARY KEY,"
		"  profile_id BLOB NOT NULL CHECK (length(profile_id) = 16),"
		"  agent TEXT NOT NULL,"
		"  service TEXT NOT NULL,"
		"  host TEXT NOT NULL,"
		"  pid INTEGER NOT NULL,"
		"  exe TEXT NOT NULL,"
		"  type TEXT NOT NULL,"
		"  start_ns INTEGER NOT NULL,"
		"  duration_ns INTEGER NOT NULL,"
		"  samples INTEGER NOT NULL,"
		"  n_links INTEGER NOT NULL,"
		"  received_ms INTEGER NOT NULL,"
		"  body_bytes INTEGER NOT NULL,"
		"  raw_bytes INTEGER NOT NULL"
		") STRICT;"
		"CREATE TABLE profile_bodies ("
		"  id INTEGER PRIMARY KEY REFERENCES profiles (id) ON DELETE CASCADE,"
		"  body BLOB NOT NULL"
		") STRICT;"
		"CREATE TABLE profile_links ("
		"  trace_id BLOB NOT NULL CHECK (length(trace_id) = 16),"
		"  profile INTEGER NOT NULL REFERENCES profiles (id) ON DELETE CASCADE,"
		"  span_id BLOB NOT NULL CHECK (length(span_id) = 8),"
		"  PRIMARY KEY (trace_id, profile, span_id)"
		") STRICT, WITHOUT ROWID;"
		"CREATE TABLE profile_totals ("
		"  k INTEGER PRIMARY KEY CHECK (k = 0),"
		"  n INTEGER NOT NULL,"
		"  bytes INTEGER NOT NULL"
		") STRICT;"
		"INSERT INTO profile_totals (k, n, bytes) VALUES (0, 0, 0);"
		"CREATE TRIGGER profiles_count_ins AFTER INSERT ON profiles BEGIN"
		"  UPDATE profile_totals SET n = n + 1, bytes = bytes + NEW.body_bytes WHERE k = 0;"
		" END;"
		"CREATE TRIGGER profiles_count_del AFTER DELETE ON profiles BEGIN"
		"  UPDATE profile_totals SET n = n - 1, bytes = bytes - OLD.body_bytes WHERE k = 0;"
		" END;"
		"CREATE INDEX profiles_start ON profiles (start_ns);"
		"CREATE INDEX profiles_service ON profiles (service, start_ns);"
		"CREATE INDEX profiles_agent ON profiles (agent, start_ns);"
		"CREATE INDEX profiles_received ON profiles (received_ms);"
		"CREATE INDEX profile_links_profile ON profile_links (profile);",
	 .pg = PG_STEP_2},
	/* 2 -> 3: the compact flame form of each profile (profstore/flame.h "Compact form"),
	 * written at ingest next to the body so merged flame graphs skip gunzip + OTLP decode.
	 * Its own table: profiles stored before this step simply have no row here. Its bytes
	 * are added to profile_totals by store_profiles.c (not by triggers: the schema has to
	 * stay on the database's first page, which test_store's corrupt-page test relies on). */
	{.sqlite =
		"CREATE TABLE profile_flames (id INTEGER PRIMARY KEY REFERENCES profiles (id) ON DELETE "
		"CASCADE, flame BLOB NOT NULL) STRICT;",
	 .pg = PG_STEP_3},
	/* 3 -> 4: incident captures (store_captures.c) and the profile columns that find a
	 * capture's profiles: profleet.capture.id and profleet.trigger from the resource, and
	 * the OTLP profile_id, by which agents report what they produced. */
	{.sqlite =
		"ALTER TABLE profiles ADD COLUMN capture_id TEXT NOT NULL DEFAULT '';"
		"ALTER TABLE profiles ADD COLUMN trigger_name TEXT NOT NULL DEFAULT '';"
		"CREATE INDEX profiles_capture ON profiles (capture_id, start_ns);"
		"CREATE INDEX profiles_trigger ON profiles (trigger_name, start_ns);"
		"CREATE INDEX profiles_profile_id ON profiles (profile_id);"
		"CREATE TABLE captures (id TEXT PRIMARY KEY NOT NULL, state TEXT NOT NULL,"
		" created_ms INTEGER NOT NULL, started_ms INTEGER NOT NULL, finished_ms INTEGER NOT NULL,"
		" deadline_ms INTEGER NOT NULL, created_by TEXT NOT NULL, request TEXT NOT NULL,"
		" agents_matched INTEGER NOT NULL) STRICT, WITHOUT ROWID;"
		"CREATE INDEX captures_state ON captures (state, id);"
		"CREATE TABLE capture_agents (capture TEXT NOT NULL REFERENCES captures (id) ON DELETE"
		" CASCADE, uid BLOB NOT NULL CHECK (length(uid) = 16), state TEXT NOT NULL,"
		" samples INTEGER NOT NULL, bytes INTEGER NOT NULL, profile_ids BLOB NOT NULL,"
		" error_code TEXT NOT NULL, error TEXT NOT NULL, updated_ms INTEGER NOT NULL,"
		" PRIMARY KEY (capture, uid)) STRICT, WITHOUT ROWID;",
	 .pg = PG_STEP_4},
	/* 4 -> 5: staged rollouts (store_rollouts.c): the rollout, its agents with their batch
	 * and the version they had, the per-agent pinned config versions, and the version of a
	 * config served to unpinned agents when it is not the latest. */
	{.sqlite =
		"CREATE TABLE rollouts (id TEXT PRIMARY KEY NOT NULL, config TEXT NOT NULL,"
		" version INTEGER NOT NULL, state TEXT NOT NULL, created_ms INTEGER NOT NULL,"
		" updated_ms INTEGER NOT NULL, created_by TEXT NOT NULL, spec TEXT NOT NULL,"
		" progress TEXT NOT NULL) STRICT, WITHOUT ROWID;"
		"CREATE INDEX rollouts_state ON rollouts (state, id);"
		"CREATE TABLE rollout_agents (rollout TEXT NOT NULL REFERENCES rollouts (id) ON DELETE"
		" CASCADE, uid BLOB NOT NULL CHECK (length(uid) = 16), batch INTEGER NOT NULL,"
		" from_version INTEGER NOT NULL, state TEXT NOT NULL, revert TEXT NOT NULL,"
		" error TEXT NOT NULL,"
		" updated_ms INTEGER NOT NULL, PRIMARY KEY (rollout, uid)) STRICT, WITHOUT ROWID;"
		"CREATE TABLE agent_pins (uid BLOB PRIMARY KEY NOT NULL CHECK (length(uid) = 16),"
		" config TEXT NOT NULL, version INTEGER NOT NULL CHECK (version >= 1)) STRICT;"
		"CREATE TABLE config_serving (name TEXT PRIMARY KEY NOT NULL,"
		" version INTEGER NOT NULL CHECK (version >= 1)) STRICT;",
	 .pg = PG_STEP_5},
	/* 5 -> 6: the Kubernetes place of a profile (resource k8s.namespace.name, k8s.pod.name,
	 * k8s.container.name from the agent's pod attribution), for ?namespace=&pod=&container=. */
	{.sqlite =
		"ALTER TABLE profiles ADD COLUMN k8s_namespace TEXT NOT NULL DEFAULT '';"
		"ALTER TABLE profiles ADD COLUMN k8s_pod TEXT NOT NULL DEFAULT '';"
		"ALTER TABLE profiles ADD COLUMN k8s_container TEXT NOT NULL DEFAULT '';"
		"CREATE INDEX profiles_k8s ON profiles (k8s_namespace, k8s_pod, start_ns);",
	 .pg = PG_STEP_6},
	/* 6 -> 7: token management and a readable audit (store_tokens.c): every token gets a
	 * public id (16 hex digits, never the secret), an expiry (0 = never), the last use and
	 * who made it; audit rows name the token (id), the source address and the outcome. */
	{.sqlite =
		"ALTER TABLE tokens ADD COLUMN id TEXT NOT NULL DEFAULT '';"
		"ALTER TABLE tokens ADD COLUMN expires_ms INTEGER NOT NULL DEFAULT 0;"
		"ALTER TABLE tokens ADD COLUMN last_used_ms INTEGER NOT NULL DEFAULT 0;"
		"ALTER TABLE tokens ADD COLUMN created_by TEXT NOT NULL DEFAULT '';"
		"UPDATE tokens SET id = lower(hex(randomblob(8)));"
		"CREATE UNIQUE INDEX tokens_id ON tokens (id);"
		"ALTER TABLE audit ADD COLUMN actor_id TEXT NOT NULL DEFAULT '';"
		"ALTER TABLE audit ADD COLUMN source TEXT NOT NULL DEFAULT '';"
		"ALTER TABLE audit ADD COLUMN status INTEGER NOT NULL DEFAULT 0;",
	 .pg = PG_STEP_7},
	/* 7 -> 8: when an agent row was last written, on the database's clock, so that replicas
	 * sharing PostgreSQL read only the rows that changed (pf_store_agents_foreach_since).
	 * SQLite (one replica) keeps the column at 0. */
	{.sqlite =
		"ALTER TABLE agents ADD COLUMN written_ms INTEGER NOT NULL DEFAULT 0;",
	 .pg = PG_STEP_8},
	/* 8 -> 9: replica liveness (pf_store_replica_beat): each replica's heartbeat on the
	 * database's clock, and on every agent row the replica that wrote it, so that the
	 * survivors disconnect the rows of a replica that died without closing them. SQLite
	 * (one replica) has the same tables and leaves them empty. */
	{.sqlite =
		"CREATE TABLE replicas (id TEXT PRIMARY KEY NOT NULL, last_seen_ms INTEGER NOT NULL)"
		" STRICT, WITHOUT ROWID;"
		"ALTER TABLE agents ADD COLUMN replica TEXT NOT NULL DEFAULT '';",
	 .pg = PG_STEP_9},
	/* 9 -> 10: tokens created in one millisecond list in the order they were made
	 * (pf_store_token_foreach): a creation number, the rowid's order for the rows there. */
	{.sqlite =
		"ALTER TABLE tokens ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;"
		"UPDATE tokens SET seq = rowid;",
	 .pg = PG_STEP_10},
	/* 10 -> 11: per-agent credentials (pf_store_agent_credential_*): an agent token bound to
	 * one agent's instance_uid; NULL for every other token. */
	{.sqlite =
		"ALTER TABLE tokens ADD COLUMN agent_uid BLOB CHECK (length(agent_uid) = 16);"
		"CREATE INDEX tokens_agent ON tokens (agent_uid);",
	 .pg = PG_STEP_11},
	/* 11 -> 12: the profile store keyed by content (store_stacks.c): frames (display name
	 * and kind), stacks (frame ids root first) and resource attribute sets stored once,
	 * each keyed by a SHA-256 of its content; per profile its attribute set, unit and a
	 * packed (stack id, value) array; per-minute and per-hour rollups per (type, attribute
	 * set) kept at ingest. Profiles stored before this step keep attrset 0 until retention's
	 * conversion pass rewrites them (their bodies stay readable meanwhile). */
	{.sqlite =
		"CREATE TABLE prof_frames (id INTEGER PRIMARY KEY, hash BLOB NOT NULL UNIQUE,"
		" kind INTEGER NOT NULL, name TEXT NOT NULL) STRICT;"
		"CREATE TABLE prof_stacks (id INTEGER PRIMARY KEY, hash BLOB NOT NULL UNIQUE,"
		" frames BLOB NOT NULL) STRICT;"
		"CREATE TABLE prof_attrsets (id INTEGER PRIMARY KEY, hash BLOB NOT NULL UNIQUE,"
		" attrs BLOB NOT NULL) STRICT;"
		"CREATE TABLE profile_samples (id INTEGER PRIMARY KEY REFERENCES profiles (id)"
		" ON DELETE CASCADE, data BLOB NOT NULL) STRICT;"
		"CREATE TABLE profile_rollups (id INTEGER PRIMARY KEY, res INTEGER NOT NULL,"
		" slot INTEGER NOT NULL, type TEXT NOT NULL, attrset INTEGER NOT NULL,"
		" profiles INTEGER NOT NULL, total INTEGER NOT NULL, data BLOB NOT NULL) STRICT;"
		"CREATE UNIQUE INDEX profile_rollups_key ON profile_rollups (res, type, slot, attrset);"
		"CREATE INDEX profile_rollups_slot ON profile_rollups (slot);"
		"CREATE INDEX profile_rollups_totals ON profile_rollups"
		" (res, type, slot, attrset, profiles, total);"
		"CREATE TABLE profile_types (type TEXT PRIMARY KEY, unit TEXT NOT NULL) STRICT;"
		"INSERT OR IGNORE INTO profile_types (type, unit) SELECT DISTINCT type, '' FROM profiles;"
		"ALTER TABLE profiles ADD COLUMN attrset INTEGER NOT NULL DEFAULT 0;"
		"ALTER TABLE profiles ADD COLUMN unit TEXT NOT NULL DEFAULT '';"
		"CREATE INDEX profiles_type_start ON profiles (type, start_ns, attrset, samples);"
		"CREATE INDEX profiles_legacy ON profiles (start_ns) WHERE attrset = 0;",
	 .pg = ""},
	/* 12 -> 13: operator commands forwarded between replicas (store_commands.c): a rollout
	 * action or capture cancel taken by one replica for the replica that drives it, with
	 * the caller for the audit row and, once run, the answer. SQLite (one replica) has the
	 * same table and leaves it empty. */
	{.sqlite =
		"CREATE TABLE commands (id TEXT PRIMARY KEY NOT NULL, kind TEXT NOT NULL,"
		" target TEXT NOT NULL, action TEXT NOT NULL, actor TEXT NOT NULL,"
		" actor_id TEXT NOT NULL, source TEXT NOT NULL, created_ms INTEGER NOT NULL,"
		" state INTEGER NOT NULL, status INTEGER NOT NULL, body TEXT NOT NULL,"
		" done_by TEXT NOT NULL) STRICT, WITHOUT ROWID;"
		"CREATE INDEX commands_state ON commands (state, created_ms);",
	 .pg = PG_STEP_13},
	/* 13 -> 14: profiles without their OTLP body (store_details.c): each frame's whole
	 * location (with its mapping) and each stack as location ids stored once, keyed by a
	 * SHA-256 of their bytes; per profile its samples part. Profiles stored before this
	 * step keep their bodies. */
	{.sqlite =
		"CREATE TABLE prof_locations (id INTEGER PRIMARY KEY, hash BLOB NOT NULL UNIQUE,"
		" data BLOB NOT NULL) STRICT;"
		"CREATE TABLE prof_lstacks (id INTEGER PRIMARY KEY, hash BLOB NOT NULL UNIQUE,"
		" locs BLOB NOT NULL) STRICT;"
		"CREATE TABLE profile_details (id INTEGER PRIMARY KEY REFERENCES profiles (id)"
		" ON DELETE CASCADE, data BLOB NOT NULL) STRICT;",
	 .pg = ""},
	/* 14 -> 15: profiles with several sample types (store_stacks.c): each type other than
	 * the profile's own as a series of its own, with its packed pairs, selected by type
	 * and start like profiles. Profiles stored before this step keep their one type. */
	{.sqlite =
		"CREATE TABLE profile_series (id INTEGER NOT NULL REFERENCES profiles (id)"
		" ON DELETE CASCADE, type TEXT NOT NULL, unit TEXT NOT NULL,"
		" start_ns INTEGER NOT NULL, attrset INTEGER NOT NULL, total INTEGER NOT NULL,"
		" data BLOB NOT NULL, PRIMARY KEY (id, type)) STRICT, WITHOUT ROWID;"
		"CREATE INDEX profile_series_type ON profile_series (type, start_ns);",
	 .pg = ""},
};
/* clang-format on */

#define STORE_SCHEMA_LATEST ((int)PF_ARRAY_SIZE(migrations))

const struct store_migration *store_migrations(size_t *n)
{
	*n = PF_ARRAY_SIZE(migrations);
	return migrations;
}

/* ---- The statement cache. */
enum stmt_id {
	S_BEGIN,
	S_COMMIT,
	S_ROLLBACK,
	S__COUNT
};

_Static_assert(S__COUNT <= STORE_C_STMTS, "struct pf_store holds store.c's statements");

static const char *const stmt_sql[S__COUNT] = {
    [S_BEGIN] = "BEGIN IMMEDIATE",
    [S_COMMIT] = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
};

struct store_pg *store_pg_of(const struct pf_store *st)
{
	return st->pg;
}


/* Resets a cached statement and drops its bindings (cleanup handler for STMT()). */
static void store_stmt_resetp(sqlite3_stmt **s)
{
	if (*s) {
		sqlite3_reset(*s);
		sqlite3_clear_bindings(*s);
	}
}

#define STMT(name, st, id) _cleanup_(store_stmt_resetp) sqlite3_stmt *name = (st)->stmt[(id)]
/* Records the connection's current SQLite error (call before any reset/rollback, which
 * would replace it) and returns -EIO, or -ENOMEM when SQLite ran out of memory. */
static int store_fail(struct pf_store *st, struct pf_error *err, const char *what)
{
	int code = sqlite3_errcode(st->db);
	int rc = code == SQLITE_NOMEM ? -ENOMEM : -EIO;

	snprintf(st->last_error, sizeof(st->last_error), "store: %s: %s", what,
		 sqlite3_errmsg(st->db));
	return pf_error_set(err, rc, NULL, "%s", st->last_error);
}

/* Records a failure that is not an SQLite error (bad argument, bad stored data). */
static int store_fail_code(struct pf_store *st, struct pf_error *err, int rc, const char *what)
{
	snprintf(st->last_error, sizeof(st->last_error), "store: %s", what);
	return pf_error_set(err, rc, NULL, "%s", st->last_error);
}

int store_fail_sqlite(struct pf_store *st, struct pf_error *err, const char *what)
{
	return store_fail(st, err, what);
}

int store_fail_other(struct pf_store *st, struct pf_error *err, int rc, const char *what)
{
	return store_fail_code(st, err, rc, what);
}

/* Steps a statement that returns no row (INSERT/UPDATE/DELETE, transaction control). */
static int step_done(struct pf_store *st, sqlite3_stmt *s, const char *what)
{
	int rc = sqlite3_step(s);

	if (rc == SQLITE_DONE)
		return 0;
	if (rc == SQLITE_ROW)
		return store_fail_code(st, NULL, -EIO, what);
	return store_fail(st, NULL, what);
}

int store_step_row(struct pf_store *st, sqlite3_stmt *s, int done, const char *what)
{
	int rc = sqlite3_step(s);

	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return done;
	return store_fail(st, NULL, what);
}

int store_read_blob(struct pf_store *st, sqlite3_stmt *s, int64_t id, const char *what,
		    struct pf_buf *out)
{
	if (sqlite3_bind_int64(s, 1, id))
		return store_fail(st, NULL, what);
	int rc = store_step_row(st, s, -ENOENT, what);
	if (rc <= 0)
		return rc;
	const void *b = sqlite3_column_blob(s, 0);
	size_t n = (size_t)sqlite3_column_bytes(s, 0);
	if (!b && n)
		return store_fail_code(st, NULL, -ENOMEM, "out of memory");
	return pf_buf_append(out, b ? b : "", n);
}

static int tx_begin(struct pf_store *st)
{
	STMT(s, st, S_BEGIN);
	return step_done(st, s, "begin");
}

static void tx_rollback(struct pf_store *st)
{
	/* Some errors (SQLITE_FULL, IOERR, NOMEM...) already rolled the transaction back. */
	if (!sqlite3_get_autocommit(st->db)) {
		STMT(s, st, S_ROLLBACK);
		sqlite3_step(s);
	}
}

static int tx_commit(struct pf_store *st)
{
	int rc;
	{
		STMT(s, st, S_COMMIT);
		rc = step_done(st, s, "commit");
	}
	if (rc < 0)
		tx_rollback(st);
	return rc;
}

int store_sqlite_begin(struct pf_store *st)
{
	return tx_begin(st);
}

int store_sqlite_commit(struct pf_store *st)
{
	return tx_commit(st);
}

void store_sqlite_rollback(struct pf_store *st)
{
	tx_rollback(st);
}

int store_step_done(struct pf_store *st, sqlite3_stmt *s, const char *what)
{
	return step_done(st, s, what);
}

/* ---- Open, migrate, close. */

static int exec_sql(struct pf_store *st, const char *sql, const char *what, struct pf_error *err)
{
	char *msg = NULL;
	int rc = sqlite3_exec(st->db, sql, NULL, NULL, &msg);

	if (rc == SQLITE_OK)
		return 0;
	snprintf(st->last_error, sizeof(st->last_error), "store: %s: %s", what,
		 msg ? msg : sqlite3_errstr(rc));
	sqlite3_free(msg);
	return pf_error_set(err, rc == SQLITE_NOMEM ? -ENOMEM : -EIO, NULL, "%s", st->last_error);
}

/* Runs a one-row, one-column query (PRAGMAs) and returns the integer in *out. */
static int query_int(struct pf_store *st, const char *sql, int64_t *out, struct pf_error *err)
{
	sqlite3_stmt *s = NULL;
	int rc;

	if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK)
		return store_fail(st, err, sql);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*out = sqlite3_column_int64(s, 0);
		rc = 0;
	} else {
		rc = store_fail(st, err, sql);
	}
	sqlite3_finalize(s);
	return rc;
}

static int check_too_new(struct pf_store *st, int64_t v, struct pf_error *err)
{
	if (v > STORE_SCHEMA_LATEST) {
		char m[160];
		snprintf(m, sizeof(m),
			 "database schema version %lld is newer than this controller knows (%d); "
			 "refusing to open it (upgrade the controller)",
			 (long long)v, STORE_SCHEMA_LATEST);
		return store_fail_code(st, err, -ENOTSUP, m);
	}
	if (v < 0)
		return store_fail_code(st, err, -EIO, "database schema version is negative");
	return 0;
}

/* Applies pending migrations one transaction each. user_version is re-read inside every
 * transaction, so two connections opening at once never run a step twice. */
static int migrate(struct pf_store *st, struct pf_error *err)
{
	for (;;) {
		int64_t v = 0;
		char bump[64];
		int rc = exec_sql(st, "BEGIN IMMEDIATE", "migrate: begin", err);

		if (rc < 0)
			return rc;
		rc = query_int(st, "PRAGMA user_version", &v, err);
		if (rc == 0)
			rc = check_too_new(st, v, err);
		if (rc < 0)
			goto fail;
		if (v == STORE_SCHEMA_LATEST) {
			st->schema_version = (int)v;
			return exec_sql(st, "COMMIT", "migrate: commit", err);
		}
		rc = exec_sql(st, migrations[v].sqlite, "migrate: step", err);
		if (rc < 0)
			goto fail;
		snprintf(bump, sizeof(bump), "PRAGMA user_version = %lld", (long long)v + 1);
		rc = exec_sql(st, bump, "migrate: user_version", err);
		if (rc < 0)
			goto fail;
		rc = exec_sql(st, "COMMIT", "migrate: commit", err);
		if (rc < 0)
			goto fail;
		continue;
	fail:
		if (!sqlite3_get_autocommit(st->db))
			sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
}

static int configure(struct pf_store *st, const char *path, enum pf_store_sync sync,
		     struct pf_error *err)
{
	int64_t v = 0;
	int rc;

	/* Read the version first: a file that is not a database fails here ("file is not a
	 * database"), and a too-new database is refused before we write anything to it. */
	rc = query_int(st, "PRAGMA user_version", &v, err);
	if (rc < 0)
		return rc;
	rc = check_too_new(st, v, err);
	if (rc < 0)
		return rc;

	if (strcmp(path, ":memory:") != 0) {
		sqlite3_stmt *s = NULL;
		const char *mode;

		if (sqlite3_prepare_v2(st->db, "PRAGMA journal_mode = WAL", -1, &s, NULL) !=
		    SQLITE_OK)
			return store_fail(st, err, "journal_mode");
		if (sqlite3_step(s) != SQLITE_ROW) {
			rc = store_fail(st, err, "journal_mode");
		} else {
			mode = (const char *)sqlite3_column_text(s, 0);
			if (!mode || strcmp(mode, "wal") != 0)
				rc = store_fail_code(st, err, -EIO,
						     "journal_mode: could not enable WAL");
		}
		sqlite3_finalize(s);
		if (rc < 0)
			return rc;
	}
	rc = exec_sql(st, "PRAGMA foreign_keys = ON", "foreign_keys", err);
	if (rc < 0)
		return rc;
	return exec_sql(st,
			sync == PF_STORE_SYNC_FULL ? "PRAGMA synchronous = FULL"
						   : "PRAGMA synchronous = NORMAL",
			"synchronous", err);
}

static int prepare_all(struct pf_store *st, struct pf_error *err)
{
	for (size_t i = 0; i < S__COUNT; i++) {
		if (sqlite3_prepare_v3(st->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
				       &st->stmt[i], NULL) != SQLITE_OK)
			return store_fail(st, err, "prepare");
	}
	return 0;
}

struct pf_store *pf_store_open(const char *path, enum pf_store_sync sync, struct pf_error *err)
{
	return pf_store_open_url(path, NULL, sync, err);
}

bool pf_store_url_is_postgres(const char *url)
{
	return url && (strncmp(url, "postgres://", 11) == 0 || strncmp(url, "postgresql://", 13) == 0);
}

struct pf_store *pf_store_open_url(const char *path, const char *fleet_url, enum pf_store_sync sync,
				   struct pf_error *err)
{
	struct pf_store *st;
	int rc;

	if (!path || !*path) {
		pf_error_set(err, -EINVAL, NULL, "store: empty database path");
		errno = EINVAL;
		return NULL;
	}
	st = calloc(1, sizeof(*st));
	if (!st) {
		pf_error_set(err, -ENOMEM, NULL, "store: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	rc = sqlite3_open_v2(
	    path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		if (st->db) {
			rc = store_fail(st, err, path);
		} else {
			pf_error_set(err, -ENOMEM, NULL, "store: %s: out of memory", path);
			rc = -ENOMEM;
		}
		goto fail;
	}
	st->drv = &store_sqlite_driver;
	sqlite3_extended_result_codes(st->db, 0);
	sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);

	rc = configure(st, path, sync, err);
	if (rc == 0)
		rc = migrate(st, err);
	if (rc == 0)
		rc = prepare_all(st, err);
	if (rc == 0 && fleet_url) {
		if (!pf_store_url_is_postgres(fleet_url))
			rc = pf_error_set(err, -EINVAL, "store",
					  "store: expected a postgres:// or postgresql:// URL");
		else
			rc = store_pg_attach(st, fleet_url, err);
	}
	if (rc < 0)
		goto fail;
	return st;

fail:
	pf_store_close(st);
	errno = -rc;
	return NULL;
}

void pf_store_close(struct pf_store *st)
{
	if (!st)
		return;
	store_prof_release(st->prof);
	store_pg_detach(st);
	for (size_t i = 0; i < S__COUNT; i++)
		sqlite3_finalize(st->stmt[i]);
	for (size_t i = 0; i < st->n_cached; i++)
		sqlite3_finalize(st->cached[i].s);
	/* Closing the last connection checkpoints the WAL into the main file. */
	sqlite3_close(st->db);
	free(st);
}

int pf_store_schema_version(struct pf_store *st)
{
	return st->schema_version;
}

int pf_store_schema_latest(void)
{
	return STORE_SCHEMA_LATEST;
}

const char *pf_store_last_error(const struct pf_store *st)
{
	return st->last_error;
}

bool pf_store_is_shared(const struct pf_store *st)
{
	return st && st->pg;
}

bool pf_store_unavailable(const struct pf_store *st)
{
	return st && st->pg && store_pg_down(st);
}
