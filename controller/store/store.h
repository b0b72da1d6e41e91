/* store.h — the controller's fleet store. The only module that includes sqlite3.h and
 * libpq-fe.h: no database type crosses this header.
 *
 * Two backends behind this one header: SQLite (the default, one file in the data dir) and,
 * for the fleet tables (tokens, audit, configs, assignments, agents, captures, rollouts,
 * pins, served versions), PostgreSQL when pf_store_open_url() is given a postgres:// URL, so
 * that several controller replicas share them. The embedded profile store (the profiles
 * calls below) always stays in the SQLite file: per replica. With PostgreSQL, a call that
 * finds the database unreachable fails fast with -EAGAIN (pf_store_unavailable() is then
 * true; the API answers 503) and the connection is re-made with backoff on a later call.
 *
 * One struct pf_store is one database connection, used by one thread at a time. The
 * controller opens two: the main loop's (configs, assignments, tokens: small synchronous
 * writes, committed before the API answers, synchronous=FULL), and the agent writer
 * thread's (batched agent rows, synchronous=NORMAL), so a heartbeat never waits on disk.
 *
 * Schema: numbered migrations run at open inside one transaction each; the database is in
 * WAL mode with a busy_timeout. Writes use BEGIN IMMEDIATE. Statements are prepared once and
 * cached per connection.
 *
 * All functions return 0 or a negative errno (-ENOENT not found, -EIO for SQLite failures,
 * with the SQLite message in err when given; -ENOMEM when SQLite or malloc ran out of memory;
 * -EINVAL for bad arguments). Functions without an err argument log nothing; the message of
 * their last failure is available from pf_store_last_error().
 *
 * Iterators (the _foreach/_versions calls) hand out rows valid only during the callback. A
 * callback may call other store functions, including writes, but not the same iterator again
 * (that returns -EBUSY). See docs/internals/store.md for the schema and migrations. */
#ifndef PF_STORE_H
#define PF_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"
#include "pf/error.h"

struct pf_store;

enum pf_store_sync { PF_STORE_SYNC_FULL, PF_STORE_SYNC_NORMAL };

/* Opens (creating if needed) the database file and migrates it to the latest schema.
 * NULL with errno set and err filled on failure: EIO for a file that is not a (sane) SQLite
 * database or any SQLite error, ENOTSUP for a database whose schema version is newer than
 * this build knows (it is left untouched). ":memory:" works (no WAL) for quick tests. */
struct pf_store *pf_store_open(const char *path, enum pf_store_sync sync, struct pf_error *err);
/* pf_store_open(), and with fleet_url (NULL: none) a postgres:// or postgresql:// URL (libpq
 * connection URI) for the fleet tables: connected with a connect and a statement timeout,
 * migrated under an advisory lock. NULL with errno and err ("store: postgres: connect to
 * HOST:PORT: <why>") on failure; ENOTSUP for a schema newer than this build. */
struct pf_store *pf_store_open_url(const char *path, const char *fleet_url, enum pf_store_sync sync,
				   struct pf_error *err);
/* Whether url names a PostgreSQL database (postgres:// or postgresql://). */
bool pf_store_url_is_postgres(const char *url);
/* True when the fleet tables are in PostgreSQL (shared with other replicas). */
bool pf_store_is_shared(const struct pf_store *st);
/* Statements this connection sent to PostgreSQL, each one round trip (transaction begin
 * and commit included); 0 on SQLite. For benchmarks and tests. */
uint64_t pf_store_round_trips(const struct pf_store *st);
/* PostgreSQL: agent rows written per statement (pf_store_agents_upsert/_set_seen), default
 * PF_STORE_AGENT_BATCH; 1 writes one statement per row, the baseline benchmarks compare
 * with. Nothing on SQLite (one statement per row, a local call each). */
#define PF_STORE_AGENT_BATCH 256
void pf_store_set_agent_batch(struct pf_store *st, size_t rows);
/* True while the shared database is unreachable (calls fail with -EAGAIN). */
bool pf_store_unavailable(const struct pf_store *st);
/* This process's replica id (16 hex digits, random per start), in NOTIFY payloads. */
const char *pf_store_replica_id(void);
/* Closes the connection (the last one checkpoints the WAL). NULL is allowed. */
void pf_store_close(struct pf_store *st);
/* Schema version after migrations (for tests and /readyz). */
int pf_store_schema_version(struct pf_store *st);
/* The newest schema version this build knows. */
int pf_store_schema_latest(void);
/* "store: <what>: <sqlite message>" of the last failure on this connection, "" if none yet.
 * Not cleared by later successes. */
const char *pf_store_last_error(const struct pf_store *st);

/* ---- API tokens: only SHA-256 hashes are stored. role: "admin", "operator", "viewer" or
 * "agent". */
/* -EEXIST when the hash is already stored. */
int pf_store_token_add(struct pf_store *st, const uint8_t hash[32], const char *role,
		       const char *name, int64_t created_ms);
/* 0 and role copied (NUL-terminated) when the hash is known, -ENOENT otherwise, -ENOSPC when
 * role_len is too small. */
int pf_store_token_lookup(struct pf_store *st, const uint8_t hash[32], char *role, size_t role_len);
int pf_store_token_count(struct pf_store *st, int64_t *count);
/* The name the token was stored with (copied, NUL-terminated): -ENOENT, -ENOSPC. */
int pf_store_token_name(struct pf_store *st, const uint8_t hash[32], char *name, size_t name_len);

/* ---- Token management (store_tokens.c, schema 5). A token's public id is 16 lower-case hex
 * digits made by the store; its secret is never stored, only the SHA-256 of it. */
#define PF_TOKEN_ID_LEN 16
#define PF_TOKEN_NAME_MAX 64

struct pf_token_info {
	char id[PF_TOKEN_ID_LEN + 1];
	char name[PF_TOKEN_NAME_MAX + 1];
	char role[16];
	char created_by[PF_TOKEN_NAME_MAX + 1]; /* the creating token's name, "" at bootstrap */
	int64_t created_ms;
	int64_t expires_ms; /* 0: never */
	int64_t last_used_ms; /* 0: never; updated at most once a minute */
	uint8_t hash[32];     /* SHA-256 of the secret (read back for a constant-time compare) */
	bool agent_bound;     /* a per-agent credential (schema 11): the agent below */
	uint8_t agent_uid[16];
};
/* Stores a new token: t->name, role, created_by, created_ms, expires_ms are read, t->id is
 * filled. -EEXIST when the hash is already stored. */
int pf_store_token_create(struct pf_store *st, const uint8_t hash[32], struct pf_token_info *t);
/* The token whose hash this is (expired ones too: the caller compares expires_ms), -ENOENT. */
int pf_store_token_find(struct pf_store *st, const uint8_t hash[32], struct pf_token_info *t);
/* Every token but the per-agent credentials, oldest first (within one millisecond, in the
 * order they were created). A non-zero return of cb stops and is returned. */
int pf_store_token_foreach(struct pf_store *st,
			   int (*cb)(const struct pf_token_info *t, void *ud), void *ud);
/* Deletes the token (revocation): 0, -ENOENT. t (may be NULL) receives what was deleted. */
int pf_store_token_revoke(struct pf_store *st, const char *id, struct pf_token_info *t);
/* last_used_ms := now_ms for the token. */
int pf_store_token_touch(struct pf_store *st, const char *id, int64_t now_ms);

/* ---- Per-agent credentials (store_tokens.c, schema 11): agent tokens bound to one agent's
 * instance_uid, offered to it over OpAMP (ConnectionSettingsOffers). An agent has at most one
 * credential in use (last_used_ms != 0) and one offered but not yet used. */
#define PF_AGENT_CREDENTIAL_MAX_IDS 4 /* ids one confirm or revoke reports */
/* Stores a new credential for uid (role "agent", name "agent:<uuid>", created_ms now_ms) in
 * place of any of its credentials never used; t receives it. */
int pf_store_agent_credential_issue(struct pf_store *st, const uint8_t uid[16],
				    const uint8_t hash[32], int64_t now_ms, struct pf_token_info *t);
/* The credential token_id of uid was used: uid's credentials made before it are deleted; their
 * ids (at most PF_AGENT_CREDENTIAL_MAX_IDS) go to ids[], their count is returned. */
int pf_store_agent_credential_confirm(struct pf_store *st, const uint8_t uid[16],
				      const char *token_id,
				      char ids[][PF_TOKEN_ID_LEN + 1]);
/* uid's credential: the one in use if any, else the newest offered; -ENOENT when none. */
int pf_store_agent_credential_get(struct pf_store *st, const uint8_t uid[16],
				  struct pf_token_info *t);
/* Deletes every credential of uid; their ids as above; -ENOENT when it had none. */
int pf_store_agent_credential_revoke(struct pf_store *st, const uint8_t uid[16],
				     char ids[][PF_TOKEN_ID_LEN + 1]);

/* ---- Config documents with immutable versions. */
struct pf_config_version {
	char name[128];
	int64_t version;  /* 1, 2, ... per name */
	uint8_t hash[32]; /* SHA-256 of body */
	char *body;	  /* NUL-terminated, heap */
	size_t body_len;
	int64_t created_ms;
};
void pf_config_version_release(struct pf_config_version *cv);

/* Adds a version unless the latest version of `name` already has this hash, in which case
 * nothing is written and the existing version is returned with *created = false. Durable
 * (committed) when it returns 0. The new version is max + 1, chosen inside the same
 * BEGIN IMMEDIATE transaction as the insert, so concurrent writers never collide. Existing
 * versions are never modified. name must be 1..127 bytes (-EINVAL otherwise); version and
 * created may be NULL. */
int pf_store_config_put(struct pf_store *st, const char *name, const char *body, size_t len,
			const uint8_t hash[32], int64_t now_ms, int64_t *version, bool *created);
/* version 0 = latest. -ENOENT when the name or version does not exist. */
int pf_store_config_get(struct pf_store *st, const char *name, int64_t version,
			struct pf_config_version *out);
/* Calls cb for each version of name, newest first, body not loaded (body NULL).
 * -ENOENT when the name has no version. A non-zero return from cb stops and is returned. */
int pf_store_config_versions(struct pf_store *st, const char *name,
			     int (*cb)(const struct pf_config_version *cv, void *ud), void *ud);
/* Calls cb with the latest version (body loaded, valid only during the call: do not release
 * it) of every config name, in name order. 0 when there is none. */
int pf_store_config_foreach_latest(struct pf_store *st,
				   int (*cb)(const struct pf_config_version *cv, void *ud),
				   void *ud);

/* ---- Assignments: a config applied to the agents a selector matches, with a priority
 * (higher wins). */
struct pf_assignment {
	char name[128];
	char selector[1024];
	char config[128];
	int64_t priority;
	int64_t updated_ms;
};
/* Upsert by name. The strings must be NUL-terminated within their arrays (-EINVAL). */
int pf_store_assignment_put(struct pf_store *st, const struct pf_assignment *a);
int pf_store_assignment_get(struct pf_store *st, const char *name, struct pf_assignment *out);
int pf_store_assignment_delete(struct pf_store *st, const char *name); /* -ENOENT */
int pf_store_assignment_foreach(struct pf_store *st,
				int (*cb)(const struct pf_assignment *a, void *ud), void *ud);

/* ---- Agents: written in batches by the writer thread, read once at start. */
struct pf_agent_row {
	uint8_t uid[16];
	const char *attributes_json; /* {"k":"v",...} identifying + non-identifying */
	uint64_t capabilities;
	const char *health_json;      /* health tree as JSON, may be NULL */
	const char *effective_config; /* body, may be NULL */
	uint8_t effective_hash[32];
	bool has_effective_hash;
	const char *config_name; /* assigned config, may be NULL */
	int64_t config_version;
	uint8_t remote_hash[32]; /* last_remote_config_hash reported */
	bool has_remote_hash;
	int remote_status; /* enum pf_remote_config_status */
	const char *remote_error;
	bool connected;
	int64_t first_seen_ms;
	int64_t last_seen_ms;
};
/* Upserts all rows in one BEGIN IMMEDIATE transaction (all or nothing). An existing row keeps
 * its stored first_seen_ms; every other column is replaced. A NULL attributes_json is stored
 * as "{}". On PostgreSQL up to PF_STORE_AGENT_BATCH rows go in one statement (one round
 * trip); give each uid once per call (of a repeated one only the last row is written). */
int pf_store_agents_upsert(struct pf_store *st, const struct pf_agent_row *rows, size_t n);
/* Sets last_seen_ms of the stored rows with these uids (only uid and last_seen_ms of each row
 * are read; a uid not stored is skipped), in one transaction: the cheap write of a fleet whose
 * only change is that it is alive. */
int pf_store_agents_set_seen(struct pf_store *st, const struct pf_agent_row *rows, size_t n);
/* Calls cb for every stored agent (strings valid only during the call). */
int pf_store_agents_foreach(struct pf_store *st,
			    int (*cb)(const struct pf_agent_row *row, void *ud), void *ud);
/* Replicas sharing PostgreSQL: the rows written since *since_ms (the database's clock; 0:
 * every row), minus a margin for transactions that committed late; *since_ms is advanced to
 * the newest stamp seen. On SQLite: every row (*since_ms untouched). */
int pf_store_agents_foreach_since(struct pf_store *st, int64_t *since_ms,
				  int (*cb)(const struct pf_agent_row *row, void *ud), void *ud);
/* At controller start: nothing is connected yet. */
int pf_store_agents_mark_all_disconnected(struct pf_store *st);
/* Replicas sharing PostgreSQL: this replica (pf_store_replica_id(), which the agent rows it
 * writes carry) is alive, stamped on the database's clock; then the rows still connected
 * through a replica not heard from for dead_after_ms are marked disconnected (and stamped
 * written, so the others read them) and that replica is forgotten, in one transaction.
 * *marked: rows marked. *revived: this replica had been forgotten (at its first beat, or
 * after a stall longer than dead_after_ms, when others may have disconnected its agents'
 * rows: the caller writes its connected agents again). On SQLite: 0, nothing to do. */
int pf_store_replica_beat(struct pf_store *st, int64_t dead_after_ms, size_t *marked,
			  bool *revived);
int pf_store_agent_delete(struct pf_store *st, const uint8_t uid[16]); /* -ENOENT */
/* Calls cb with the stored row of one agent: -ENOENT when there is none. */
int pf_store_agent_get(struct pf_store *st, const uint8_t uid[16],
		       int (*cb)(const struct pf_agent_row *row, void *ud), void *ud);

/* ---- Audit log of every mutation. */

struct pf_audit_entry {
	int64_t id; /* increasing */
	int64_t ts_ms;
	const char *actor;    /* the token's name (or a role, in rows from before schema 5) */
	const char *action;
	const char *target;
	const char *detail;   /* may be NULL */
	const char *actor_id; /* the token's id, "" when unknown */
	const char *source;   /* the client's address, "" when unknown */
	int status;           /* the HTTP status answered, 0 when unknown */
};
/* Writes one entry (store_tokens.c): actor and action required; target, actor_id and source
 * NULL are stored as "", detail may be NULL. */
int pf_store_audit_write(struct pf_store *st, const struct pf_audit_entry *e);
/* Entries newest first matching q (zero fields match everything): ts_ms in [from_ms, to_ms],
 * actor equal to the token's name or id, action equal or its prefix before a '.' ("token"
 * matches "token.create"), id < before_id; at most limit (1..). */
struct pf_audit_query {
	int64_t from_ms, to_ms; /* to_ms 0: no upper bound */
	const char *actor;      /* NULL: any */
	const char *action;     /* NULL: any */
	int64_t before_id;      /* 0: from the newest */
	size_t limit;
};
int pf_store_audit_query(struct pf_store *st, const struct pf_audit_query *q,
			 int (*cb)(const struct pf_audit_entry *e, void *ud), void *ud);

/* ---- Profiles: the embedded profile store (store_profiles.c; docs/api.md "Profiles").
 * One row per received profile (one OTLP Profile = one process of one window): metadata,
 * the trace links it carries, and its body (opaque bytes, gzip'd by the caller) and its
 * compact flame form (opaque bytes, optional) in separate tables. Retention deletes oldest
 * first (by id, i.e. arrival order). */
#define PF_STORE_PROFILE_MAX_LINKS 256 /* links kept per profile; more are counted, not stored */

struct pf_profile_link {
	uint8_t trace_id[16];
	uint8_t span_id[8];
};

struct pf_profile_kv {
	const char *key;
	const char *value;
};

/* One frame of a profile's stacks: its display name (the flame graph's) and its kind (enum
 * pf_frame_kind, pf/profile.h). */
struct pf_profile_frame {
	const char *name;
	uint8_t kind;
};

/* One distinct stack of a profile: indices into the row's frames, root first. */
struct pf_profile_stack {
	const uint32_t *frames;
	uint32_t n_frames;
	uint64_t weight;
};

/* Another sample type of a profile (insert only): its name (not the row's type, each name
 * once), its unit, and the weight of each of the row's stacks in it (n_stacks, 0: none). */
struct pf_profile_series {
	const char *type;
	const char *unit;
	const uint64_t *weights;
};

/* A profile's exact content without its body (profstore/detail.h makes and reads it): the
 * locations of its frames (bytes, each stored once, keyed by content), its stacks as
 * indices into them (each sequence of location ids stored once), and its samples part
 * (stored per profile, after the ids of its stacks). */
struct pf_profile_span {
	uint32_t off, len;
};
struct pf_profile_detail {
	const uint8_t *locs;              /* the location keys, back to back */
	const struct pf_profile_span *loc; /* n_locs, into locs */
	size_t n_locs;
	const uint32_t *stack_locs;         /* indices into loc */
	const struct pf_profile_span *stack; /* n_stacks, into stack_locs */
	size_t n_stacks;
	const void *samples;
	size_t samples_len;
};
/* One stack as pf_store_profile_detail() gives it back: its locations' keys, leaf first. */
struct pf_profile_dstack {
	size_t n;
	const uint8_t *const *key;
	const size_t *key_len;
};

#define PF_PROFILE_MAX_ATTRS 128       /* resource attributes kept per profile */
#define PF_PROFILE_ATTR_MAX_BYTES 1024 /* longer keys or values are cut */

struct pf_profile_row {
	int64_t id;            /* assigned by the store (increasing) */
	uint8_t profile_id[16]; /* OTLP profile_id, zero when none */
	const char *agent;     /* agent instance uid (text), "" when unknown */
	const char *service;   /* service.name, "" when unknown */
	const char *host;      /* host.name, "" when unknown */
	int64_t pid;           /* process.pid, 0 when unknown */
	const char *exe;       /* process.executable.name, "" when unknown */
	const char *type;      /* profile type: "cpu", "alloc_space", ... */
	int64_t start_ns;      /* unix ns */
	int64_t duration_ns;
	int64_t samples;       /* sum of sample counts */
	int64_t n_links;       /* distinct (trace, span) links in the profile */
	int64_t received_ms;
	int64_t body_bytes;    /* stored body size */
	int64_t raw_bytes;     /* body size before compression */
	const char *capture_id; /* resource profleet.capture.id, "" (or NULL at insert) if none */
	const char *trigger;    /* resource profleet.trigger, "" (or NULL at insert) if none */
	/* resource k8s.namespace.name, k8s.pod.name, k8s.container.name: "" (or NULL at
	 * insert) when the profile does not come from a pod */
	const char *namespace_name;
	const char *pod;
	const char *container;
	/* insert: links to index (at most PF_STORE_PROFILE_MAX_LINKS are stored);
	 * pf_store_profile_get: the stored links; iterators: NULL. */
	size_t n_link_entries;
	const struct pf_profile_link *links;
	/* insert only: the body to store, and the profile's compact flame form
	 * (profstore/flame.h; NULL/0 = none, the views then decode the body). */
	const void *body;
	size_t body_len;
	const void *flame;
	size_t flame_len;
	/* insert, out: a profile with the same agent and non-zero profile_id was stored
	 * already; id is that profile's and nothing was written for this row. */
	bool duplicate;
	/* insert only, the profile's content (store_stacks.c): its resource attributes (the
	 * attribute set, stored once), the unit of its weights ("samples", "bytes",
	 * "nanoseconds", "count"; NULL = ""), and its distinct frame paths with their summed
	 * weights. Frames and stacks are stored once, keyed by content; the profile keeps
	 * (stack id, weight) pairs and is added to the per-minute and per-hour rollups of its
	 * (type, attribute set). n_stacks 0: nothing but the metadata and body. */
	size_t n_attrs;
	const struct pf_profile_kv *attrs;
	const char *unit;
	size_t n_frames;
	const struct pf_profile_frame *frames;
	size_t n_stacks;
	const struct pf_profile_stack *stacks;
	/* insert only: the profile's other sample types, each kept as a series of its own
	 * (profile_series: its packed pairs, in the rollups and the types of its name), which a
	 * selection of that type reads like profiles of that type. */
	size_t n_series;
	const struct pf_profile_series *series;
	/* iterators: the profile's attribute set (0: stored before schema 12, not converted
	 * yet: no packed samples, read its body) */
	int64_t attrset;
	/* insert only: the profile's detail, stored instead of a body (body_len 0; body_bytes
	 * is then the bytes the profile's own detail row takes). NULL: none. */
	const struct pf_profile_detail *detail;
};

/* Retention applied by pf_store_profiles_insert() (after the insert, same transaction) and by
 * pf_store_profiles_retain(). 0 = no limit. */
struct pf_profile_retention {
	int64_t max_age_ms;
	int64_t max_bytes; /* sum of body_bytes and compact flame form sizes */
};

/* Rollups (store_stacks.c) outlive the profiles they sum: pf_store_profiles_retain deletes
 * those whose slot started more than FACTOR x max_age_ms ago (DEFAULT_AGE_MS without an age
 * limit). The byte cap counts profiles only. */
#define PF_PROFILE_ROLLUP_AGE_FACTOR 8
#define PF_PROFILE_ROLLUP_DEFAULT_AGE_MS (30LL * 24 * 3600 * 1000)

/* The retention this connection's users (the receiver) apply at insert; both 0 until set. */
int pf_store_profiles_set_retention(struct pf_store *st, const struct pf_profile_retention *ret);
void pf_store_profiles_get_retention(struct pf_store *st, struct pf_profile_retention *ret);

/* Inserts the rows (and their bodies, compact flame forms and links) in one BEGIN IMMEDIATE
 * transaction, all or nothing; ids are written back into rows[i].id. Idempotent: a row whose
 * non-zero profile_id and agent match a stored profile (or an earlier row of the same call)
 * is not stored again; rows[i].duplicate is set and rows[i].id names the stored one. With
 * ret, then deletes
 * the oldest profiles while the total stored bytes (bodies + compact flame forms) exceed
 * ret->max_bytes (so the store never stays over the cap; a single profile larger than the
 * cap is itself deleted) and at most 64 profiles older than ret->max_age_ms, in the same transaction; *deleted (may be NULL) counts them. Strings
 * must be non-NULL (-EINVAL). */
int pf_store_profiles_insert(struct pf_store *st, struct pf_profile_row *rows, size_t n,
			     const struct pf_profile_retention *ret, int64_t now_ms,
			     size_t *deleted);

/* Group commit: between batch_begin and batch_end every pf_store_profiles_insert() call on
 * this connection runs in one BEGIN IMMEDIATE transaction, each call all or nothing inside it
 * (a savepoint: a call that fails leaves the others in), without its retention; batch_end
 * applies ret once (as an insert would) and commits: one commit, one fsync for the batch.
 * Nothing of the batch is durable or visible to other connections before batch_end returns
 * 0; when it fails, nothing of the batch is stored. batch_open says whether a batch is open
 * (false too once SQLite ended its transaction on an error: end it, it fails). */
int pf_store_profiles_batch_begin(struct pf_store *st);
bool pf_store_profiles_batch_open(struct pf_store *st);
int pf_store_profiles_batch_end(struct pf_store *st, const struct pf_profile_retention *ret,
				int64_t now_ms, size_t *deleted);

/* Deletes, oldest first, profiles received before now_ms - max_age_ms and then while the
 * total exceeds max_bytes, at most max_rows of them in one transaction (bounded work: call
 * again while it returns 1). 0 when nothing more is due, 1 when it stopped at max_rows. */
int pf_store_profiles_retain(struct pf_store *st, const struct pf_profile_retention *ret,
			     int64_t now_ms, size_t max_rows, size_t *deleted);

/* The detail of profile id (stored since schema 14 instead of a body): cb gets its samples
 * part and its stacks (valid during the call); its return is returned. -ENOENT when the
 * profile has none (stored before: read its body), -EBADMSG when the stored bytes or ids
 * do not check out, -E2BIG past max_bytes of locations, -ENOMEM, -EIO. */
int pf_store_profile_detail(struct pf_store *st, int64_t id, size_t max_bytes,
			    int (*cb)(const void *samples, size_t len,
				      const struct pf_profile_dstack *stacks, size_t n_stacks,
				      void *ud),
			    void *ud);

/* Number of stored profiles and the sum of their body and compact flame form bytes. */
int pf_store_profiles_totals(struct pf_store *st, int64_t *count, int64_t *bytes);

struct pf_profile_filter {
	const char *service;     /* NULL or "" = any */
	const char *agent;
	const char *type;
	bool has_trace;
	uint8_t trace_id[16];
	const char *capture_id;  /* NULL or "" = any */
	const char *trigger;     /* NULL or "" = any */
	const char *namespace_name; /* k8s.namespace.name; NULL or "" = any */
	const char *pod;            /* k8s.pod.name */
	const char *container;      /* k8s.container.name */
	int64_t from_ns;         /* start_ns >= from_ns (0 = no bound) */
	int64_t to_ns;           /* start_ns < to_ns (0 = no bound) */
	size_t limit;            /* 0 = no limit */
	/* Exact matches on resource attributes, AND-ed (pf_store_profiles_select only). */
	size_t n_match;
	const struct pf_profile_kv *match;
};
#define PF_PROFILE_MATCH_MAX 16

/* Calls cb for the profiles matching f, newest start first (ties: highest id first); strings
 * valid only during the call, links NULL. f->type matches a profile's type or any of its
 * series. A non-zero return from cb stops and is returned. */
int pf_store_profiles_foreach(struct pf_store *st, const struct pf_profile_filter *f,
			      int (*cb)(const struct pf_profile_row *row, void *ud), void *ud);

/* ---- Profile content (store_stacks.c). A selection (pf_store_profiles_select) is the
 * profiles a filter matches, delivered in parts: whole rollups (an hour or a minute of one
 * type and attribute set) where the range covers them and no filter needs single profiles
 * (trace_id does), and single profiles for the rest. Service, agent, namespace, pod,
 * container, capture and trigger filters and `match` test the attribute set. Profiles stored
 * before schema 12 and not converted yet come as `legacy` parts (read their bodies); with
 * `match` they are left out (their attributes are not indexed). */
struct pf_profile_part {
	int64_t start_ms; /* the rollup's slot, or the profile's start */
	int64_t res_ms;   /* 3600000 or 60000: a rollup; 0: one profile */
	int64_t attrset;
	int64_t profile;  /* res_ms 0: the profile's id */
	int64_t profiles; /* profiles in the part */
	int64_t total;    /* the sum of their weights */
	const char *type;
	const char *unit; /* "" when unknown */
	bool legacy;
};

#define PF_PROFSEL_PAIRS 1u /* also call pair_cb with the part's (stack id, weight) pairs */
/* Parts of at most this resolution (0: profiles only). Rollups are used where the range
 * covers whole slots of their resolution. */
struct pf_profile_select {
	unsigned flags;
	int64_t max_res_ms;
	int (*part_cb)(const struct pf_profile_part *part, void *ud);
	int (*pair_cb)(int64_t stack, uint64_t weight, void *ud); /* after its part_cb */
	void *ud;
};

/* In one read transaction (a consistent snapshot). A non-zero callback return stops and is
 * returned. f->limit is ignored. */
int pf_store_profiles_select(struct pf_store *st, const struct pf_profile_filter *f,
			     const struct pf_profile_select *sel);

/* A stored stack: its frame ids, root first (valid until the next call on st), or -ENOENT.
 * Frames: name (valid while st is open) and kind. Both cached per connection. */
int pf_store_stack_get(struct pf_store *st, int64_t id, const uint32_t **frames, size_t *n);
int pf_store_frame_get(struct pf_store *st, uint32_t id, const char **name, uint8_t *kind);
/* Calls cb with each (key, value) of attribute set id (sorted by key). -ENOENT. */
int pf_store_attrset_foreach(struct pf_store *st, int64_t id,
			     int (*cb)(const char *key, const char *value, void *ud), void *ud);
/* The profile types stored (cb per type with its unit, "" when unknown), sorted. */
int pf_store_profile_types(struct pf_store *st, int (*cb)(const char *type, const char *unit,
							   void *ud), void *ud);

/* Rewrites up to max_rows profiles stored before schema 12 (attrset 0, oldest first), each
 * in its own transaction: fill(ud, id, row) fills row's content fields (attrs, unit, frames,
 * stacks, series) and its type and samples (the summed weight of that type) from the
 * profile's body, and the store keeps them as for a new profile (packed samples, series,
 * rollups; the profile takes that type and samples); done(ud, row) then frees what fill made. A
 * fill of -EBADMSG (a body that no longer decodes) marks the profile as having no content (attrset
 * -1: no view reads it); any other error stops. *converted counts them. 1 while more wait, 0 when
 * none is left. */
struct pf_profile_converter {
	int (*fill)(void *ud, struct pf_store *st, int64_t id, struct pf_profile_row *row);
	void (*done)(void *ud, struct pf_profile_row *row);
	void *ud;
};
int pf_store_profiles_convert(struct pf_store *st, size_t max_rows,
			      const struct pf_profile_converter *c, size_t *converted);

/* Calls cb once with the profile `id`, its links loaded (row valid only during the call).
 * -ENOENT when there is no such profile. */
int pf_store_profile_get(struct pf_store *st, int64_t id,
			 int (*cb)(const struct pf_profile_row *row, void *ud), void *ud);

/* Appends the stored body of profile `id` to out. -ENOENT, -E2BIG from out's cap. */
int pf_store_profile_body(struct pf_store *st, int64_t id, struct pf_buf *out);

/* Appends the stored compact flame form of profile `id` to out (schema 3; its size counts
 * toward the totals and retention's max_bytes, not toward body_bytes). -ENOENT when the profile has none (stored before
 * schema 3, or too large to keep one) or does not exist, -E2BIG from out's cap. */
int pf_store_profile_flame(struct pf_store *st, int64_t id, struct pf_buf *out);

/* The store id of the newest profile with this OTLP profile_id: 0 and *id, or -ENOENT. */
int pf_store_profile_find(struct pf_store *st, const uint8_t profile_id[16], int64_t *id);

/* Makes this connection read-only for good (PRAGMA query_only): every later write on it
 * fails with -EIO. For the query pool's reader connections (profstore/query_pool.h). */
int pf_store_set_read_only(struct pf_store *st);

/* ---- Incident captures (store_captures.c; fleet/capture.h owns their meaning). One row per
 * capture, one per (capture, agent). Strings are copied by SQLite; rows handed to callbacks
 * are valid only during the call. */
struct pf_capture_row {
	const char *id;
	const char *state;
	int64_t created_ms, started_ms, finished_ms, deadline_ms; /* 0 = not yet */
	const char *created_by;
	const char *request_json;
	int64_t agents_matched;
};

struct pf_capture_agent_row {
	const char *capture;
	uint8_t uid[16];
	const char *state;
	int64_t samples, bytes;
	size_t n_profile_ids;
	const uint8_t *profile_ids; /* n_profile_ids * 16 bytes (OTLP profile ids) */
	const char *error_code;     /* "" when none */
	const char *error;          /* "" when none */
	int64_t updated_ms;
};

/* Upserts the captures and then the agent rows (whose captures must exist, in the store or
 * in caps) in one BEGIN IMMEDIATE transaction, all or nothing. */
int pf_store_captures_save(struct pf_store *st, const struct pf_capture_row *caps, size_t n_caps,
			   const struct pf_capture_agent_row *agents, size_t n_agents);

/* Calls cap_cb with capture `id`, then agent_cb (may be NULL) for each of its agents in uid
 * order. -ENOENT when there is no such capture; a non-zero callback return stops and is
 * returned. */
int pf_store_capture_get(struct pf_store *st, const char *id,
			 int (*cap_cb)(const struct pf_capture_row *c, void *ud),
			 int (*agent_cb)(const struct pf_capture_agent_row *a, void *ud), void *ud);

struct pf_capture_query {
	const char *state;     /* NULL or "" = any */
	bool unfinished;       /* only pending and running captures */
	const char *before_id; /* NULL or "": from the newest; else ids < before_id */
	size_t limit;          /* 0 = no limit */
};
/* Calls cb for the matching captures, newest (highest id) first. */
int pf_store_captures_foreach(struct pf_store *st, const struct pf_capture_query *q,
			      int (*cb)(const struct pf_capture_row *c, void *ud), void *ud);

/* ---- Staged rollouts (store_rollouts.c; fleet/rollout.h owns their meaning). One row per
 * rollout (its spec and batch progress as JSON text), one per (rollout, agent), plus the
 * per-agent pinned config versions and the version of a config served to unpinned agents
 * when it is not the latest. Rows handed to callbacks are valid only during the call. */
struct pf_rollout_row {
	const char *id;
	const char *config;
	int64_t version;
	const char *state;
	int64_t created_ms, updated_ms;
	const char *created_by;
	const char *spec_json;
	const char *progress_json;
};

struct pf_rollout_agent_row {
	const char *rollout;
	uint8_t uid[16];
	int64_t batch;
	int64_t from_version;
	const char *state;
	const char *revert; /* "" when none */
	const char *error;  /* "" when none */
	int64_t updated_ms;
};

struct pf_pin_row {
	uint8_t uid[16];
	const char *config;
	int64_t version; /* 0 at save: remove the agent's pin */
};

/* Upserts the rollout (may be NULL), then its agent rows (whose rollouts must exist), then
 * sets or removes the pins, in one BEGIN IMMEDIATE transaction, all or nothing. */
int pf_store_rollout_save(struct pf_store *st, const struct pf_rollout_row *r,
			  const struct pf_rollout_agent_row *agents, size_t n_agents,
			  const struct pf_pin_row *pins, size_t n_pins);
/* Calls r_cb with rollout `id`, then agent_cb (may be NULL) for each of its agents in
 * (batch, uid) order. -ENOENT when there is no such rollout. */
int pf_store_rollout_get(struct pf_store *st, const char *id,
			 int (*r_cb)(const struct pf_rollout_row *r, void *ud),
			 int (*agent_cb)(const struct pf_rollout_agent_row *a, void *ud), void *ud);
/* Calls cb for rollouts newest first: only those in a non-final state when active_only,
 * ids < before_id when before_id is non-empty, at most limit (0 = no limit). */
int pf_store_rollouts_foreach(struct pf_store *st, bool active_only, const char *before_id,
			      size_t limit, int (*cb)(const struct pf_rollout_row *r, void *ud),
			      void *ud);
/* Every stored pin. */
int pf_store_pins_foreach(struct pf_store *st, int (*cb)(const struct pf_pin_row *p, void *ud),
			  void *ud);
/* Removes the pins to `config` (version 0: to any of its versions, else to that version). */
int pf_store_pins_clear(struct pf_store *st, const char *config, int64_t version);
/* The version served to unpinned agents: version 0 = the latest (the row is removed). */
int pf_store_config_serving_set(struct pf_store *st, const char *name, int64_t version);
int pf_store_config_serving_foreach(struct pf_store *st,
				    int (*cb)(const char *name, int64_t version, void *ud),
				    void *ud);

/* Ownership of a rollout between replicas sharing PostgreSQL: a session-level advisory lock
 * per rollout id, held by the replica that drives it until it finishes or the replica's
 * connection ends (a replica that dies releases it; another takes over at its next load).
 * On SQLite (one replica) *owned is always true. */
int pf_store_rollout_lock(struct pf_store *st, const char *id, bool *owned);
int pf_store_rollout_unlock(struct pf_store *st, const char *id);

/* ---- Commands forwarded between replicas sharing PostgreSQL (store_commands.c). A rollout
 * action or a capture cancel that reaches a replica which does not drive its target is
 * stored as a command row and notified ("command" <id>); the replica that drives the target
 * runs it, stores the answer the API gave (status and JSON body) and notifies
 * ("command_done" <id>); the replica that took the call answers with it. A command nobody
 * runs within the caller's wait is withdrawn, so it never runs after its caller was told it
 * did not. On SQLite (one replica) every call is -EOPNOTSUPP. */
enum pf_command_state {
	PF_COMMAND_PENDING,
	PF_COMMAND_DONE,
	PF_COMMAND_WITHDRAWN,
	PF_COMMAND_RUNNING, /* claimed by the replica that runs it */
};
struct pf_command_row {
	const char *id;     /* a UUID, made by the replica that took the call */
	const char *kind;   /* "rollout" or "capture" */
	const char *target; /* the rollout's or capture's id */
	const char *action; /* "pause", "resume", "rollback", "cancel" */
	const char *actor, *actor_id, *source; /* who asked (the audit row's) */
	int64_t created_ms;
	enum pf_command_state state;
	int status;	  /* done: the HTTP status answered */
	const char *body; /* done: the JSON answer, "" before */
	const char *done_by; /* done: the replica that ran it */
};
/* Stores a pending command and notifies it (state, status, body, done_by are ignored). */
int pf_store_command_add(struct pf_store *st, const struct pf_command_row *c);
/* The pending commands, oldest first, at most limit: cb per row until it returns nonzero. */
int pf_store_commands_pending(struct pf_store *st, size_t limit,
			      int (*cb)(const struct pf_command_row *c, void *ud), void *ud);
/* Moves a command from state `from` to `to` (claim: pending -> running; withdraw: pending ->
 * withdrawn; release: running -> pending): 0, or -EALREADY when it is not in `from`. */
int pf_store_command_move(struct pf_store *st, const char *id, enum pf_command_state from,
			  enum pf_command_state to);
/* Stores the answer of a running command and notifies it: -EALREADY when it is not
 * running. */
int pf_store_command_finish(struct pf_store *st, const char *id, int status, const char *body);
/* Calls cb with one command: -ENOENT when there is none. */
int pf_store_command_get(struct pf_store *st, const char *id,
			 int (*cb)(const struct pf_command_row *c, void *ud), void *ud);
/* Deletes the commands created before before_ms that are no longer pending. */
int pf_store_commands_prune(struct pf_store *st, int64_t before_ms);

/* ---- Change notifications between replicas (PostgreSQL LISTEN/NOTIFY). Every fleet write
 * through a shared store notifies "<kind> <name>" at commit: kind "config" (name: the config),
 * "assignment", "token" (id), "capture" (id), "rollout" (id), "command" and "command_done"
 * (id). A listener is one more
 * connection that only LISTENs, driven entirely by the caller's event loop: it connects with
 * libpq's asynchronous connect, sends LISTEN without waiting and reads notifications as they
 * come, each step when its descriptor is ready for what pf_store_listener_wants(); nothing in
 * it blocks. The caller bounds the connect (a deadline of its own: libpq's connect_timeout
 * does not apply to asynchronous connects). */
struct pf_store_listener;
struct pf_store_listener *pf_store_listener_new(const char *url); /* NULL on ENOMEM */
void pf_store_listener_free(struct pf_store_listener *l);
/* Starts connecting (drops a previous connection): 0, or -EAGAIN (pf_store_listener_error()
 * says why). Then watch pf_store_listener_fd() for pf_store_listener_wants(). */
int pf_store_listener_connect(struct pf_store_listener *l);
/* The socket to watch, -1 while not connected (it may change while connecting). */
int pf_store_listener_fd(const struct pf_store_listener *l);
#define PF_STORE_WANT_READ 1
#define PF_STORE_WANT_WRITE 2
int pf_store_listener_wants(const struct pf_store_listener *l);
/* True once LISTEN is in effect (from then on every notification is delivered). */
bool pf_store_listener_ready(const struct pf_store_listener *l);
/* One step on readiness: advances the connect and the LISTEN, then reads what arrived and
 * calls cb for each notification from another replica. The count (0 while connecting), or
 * -EAGAIN when the connection failed or was lost (connect again; changes in between were
 * missed, so reload everything). */
int pf_store_listener_step(struct pf_store_listener *l,
			   void (*cb)(const char *kind, const char *name, void *ud), void *ud);
const char *pf_store_listener_error(const struct pf_store_listener *l);
/* Gives up the connection (the caller's connect deadline passed): why goes to the error. */
void pf_store_listener_abort(struct pf_store_listener *l, const char *why);
/* While held, a lost connection of st is not re-made (calls fail at once with -EAGAIN): the
 * server holds it while its listener cannot reach the database, so no call on the event
 * loop waits for a connect that cannot succeed. */
void pf_store_hold_reconnect(struct pf_store *st, bool hold);
/* Gated: whenever st's connection is lost (or a call got no answer in time), reconnects are
 * held until the caller releases them with pf_store_hold_reconnect(st, false) — the server
 * does once its asynchronous listener connected again, i.e. the database answers. */
void pf_store_gate_reconnect(struct pf_store *st, bool gated);

#endif
