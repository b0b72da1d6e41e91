/* store.h — the controller's fleet store. The only module that includes sqlite3.h
 * (STYLE.md rule 3), so a PostgreSQL store can slot in behind this header.
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
 * with the SQLite message in err when given). */
#ifndef PF_STORE_H
#define PF_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"

struct pf_store;

enum pf_store_sync { PF_STORE_SYNC_FULL, PF_STORE_SYNC_NORMAL };

/* Opens (creating if needed) the database file and migrates it to the latest schema. */
struct pf_store *pf_store_open(const char *path, enum pf_store_sync sync, struct pf_error *err);
void pf_store_close(struct pf_store *st);
/* Schema version after migrations (for tests and /readyz). */
int pf_store_schema_version(struct pf_store *st);

/* ---- API tokens: only SHA-256 hashes are stored. role: "admin", "operator", "viewer" or
 * "agent". */
int pf_store_token_add(struct pf_store *st, const uint8_t hash[32], const char *role,
		       const char *name, int64_t created_ms);
/* 0 and role copied (NUL-terminated) when the hash is known, -ENOENT otherwise. */
int pf_store_token_lookup(struct pf_store *st, const uint8_t hash[32], char *role,
			  size_t role_len);
int pf_store_token_count(struct pf_store *st, int64_t *count);

/* ---- Config documents with immutable versions. */
struct pf_config_version {
	char name[128];
	int64_t version; /* 1, 2, ... per name */
	uint8_t hash[32]; /* SHA-256 of body */
	char *body;       /* NUL-terminated, heap */
	size_t body_len;
	int64_t created_ms;
};
void pf_config_version_release(struct pf_config_version *cv);

/* Adds a version unless the latest version of `name` already has this hash, in which case
 * nothing is written and the existing version is returned with *created = false. Durable
 * (committed) when it returns 0. */
int pf_store_config_put(struct pf_store *st, const char *name, const char *body, size_t len,
			const uint8_t hash[32], int64_t now_ms, int64_t *version, bool *created);
/* version 0 = latest. -ENOENT when the name or version does not exist. */
int pf_store_config_get(struct pf_store *st, const char *name, int64_t version,
			struct pf_config_version *out);
/* Calls cb for each version of name, newest first, body not loaded (body NULL).
 * -ENOENT when the name has no version. A non-zero return from cb stops and is returned. */
int pf_store_config_versions(struct pf_store *st, const char *name,
			     int (*cb)(const struct pf_config_version *cv, void *ud), void *ud);
/* Calls cb with the latest version (body loaded) of every config name, in name order. */
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
int pf_store_assignment_put(struct pf_store *st, const struct pf_assignment *a); /* upsert */
int pf_store_assignment_get(struct pf_store *st, const char *name, struct pf_assignment *out);
int pf_store_assignment_delete(struct pf_store *st, const char *name); /* -ENOENT */
int pf_store_assignment_foreach(struct pf_store *st,
				int (*cb)(const struct pf_assignment *a, void *ud), void *ud);

/* ---- Agents: written in batches by the writer thread, read once at start. */
struct pf_agent_row {
	uint8_t uid[16];
	const char *attributes_json; /* {"k":"v",...} identifying + non-identifying */
	uint64_t capabilities;
	const char *health_json;     /* health tree as JSON, may be NULL */
	const char *effective_config; /* body, may be NULL */
	uint8_t effective_hash[32];
	bool has_effective_hash;
	const char *config_name;     /* assigned config, may be NULL */
	int64_t config_version;
	uint8_t remote_hash[32];     /* last_remote_config_hash reported */
	bool has_remote_hash;
	int remote_status;           /* enum pf_remote_config_status */
	const char *remote_error;
	bool connected;
	int64_t first_seen_ms;
	int64_t last_seen_ms;
};
/* Upserts all rows in one BEGIN IMMEDIATE transaction. */
int pf_store_agents_upsert(struct pf_store *st, const struct pf_agent_row *rows, size_t n);
/* Calls cb for every stored agent (strings valid only during the call). */
int pf_store_agents_foreach(struct pf_store *st,
			    int (*cb)(const struct pf_agent_row *row, void *ud), void *ud);
/* At controller start: nothing is connected yet. */
int pf_store_agents_mark_all_disconnected(struct pf_store *st);
int pf_store_agent_delete(struct pf_store *st, const uint8_t uid[16]);

/* ---- Audit log of every mutation. */
int pf_store_audit(struct pf_store *st, int64_t ts_ms, const char *actor, const char *action,
		   const char *target, const char *detail);

#endif
