/* state.h — the agent's state directory (default ./profleet-agent-state, mode 0700).
 *
 * Owns the files in it:
 *   instance_uid    the OpAMP instance_uid, canonical UUID text + "\n". A UUIDv7 made at first
 *                   start (opamp spec: 16 bytes, SHOULD be v7); replaced when the server assigns
 *                   a new one (new_instance_uid).
 *   remote_config   the last remote profiling config that applied (APPLIED), so the agent
 *                   restarts with it while the controller is away. A YAML comment line carrying
 *                   the config hash as hex ("# profleet-remote-config hash=<hex>\n") followed
 *                   by the body exactly as received: the file stays a valid YAML document.
 *   credential      the agent's own credential, offered by the controller over OpAMP
 *                   (ConnectionSettingsOffers): "# profleet-credential hash=<hex>\n" with the
 *                   offer's connection_settings.hash, then the token and "\n". Mode 0600.
 *                   While present it replaces --token-file for OpAMP and for uploads to the
 *                   controller; removing it makes the agent enroll again.
 * Every write goes to "<name>.tmp", is fsync'ed, then renamed over the old file (atomic on
 * POSIX), so a crash leaves either the old or the new file, never half of one.
 *
 *   struct agent_state *st;
 *   if (agent_state_open("/var/lib/x", &st, &err) < 0) ...
 *   pf_uuid_format(agent_state_uid(st), text);
 *
 * Not thread-safe: used from the event-loop thread. */
#ifndef AGENT_STATE_H
#define AGENT_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"

#define AGENT_STATE_MAX_HASH 64			 /* longest config hash kept */
#define AGENT_STATE_MAX_CONFIG ((size_t)1 << 20) /* = PF_PROFCFG_MAX_DOC */

struct agent_state;

/* Creates the directory (and missing parents, 0700) when needed, loads or creates
 * instance_uid, loads remote_config if present and well-formed (a damaged one is ignored
 * with a warning in the log). 0, or -errno with err filled. */
int agent_state_open(const char *dir, struct agent_state **out, struct pf_error *err);
void agent_state_free(struct agent_state *st);

const char *agent_state_dir(const struct agent_state *st);
const uint8_t *agent_state_uid(const struct agent_state *st); /* 16 bytes */
/* Adopts and persists a new uid (server-assigned). 0 or -errno. */
int agent_state_set_uid(struct agent_state *st, const uint8_t uid[16], struct pf_error *err);

/* The persisted remote config; false when there is none. Pointers stay valid until the next
 * save/clear or free. */
bool agent_state_remote_config(const struct agent_state *st, const uint8_t **body, size_t *len,
			       const uint8_t **hash, size_t *hash_len);
/* Persists body + hash atomically (hash_len <= AGENT_STATE_MAX_HASH, len <=
 * AGENT_STATE_MAX_CONFIG). 0 or -errno. */
int agent_state_save_remote_config(struct agent_state *st, const uint8_t *body, size_t len,
				   const uint8_t *hash, size_t hash_len, struct pf_error *err);
/* Removes the persisted remote config (the server withdrew it). 0 or -errno. */
int agent_state_clear_remote_config(struct agent_state *st, struct pf_error *err);

#define AGENT_STATE_MAX_TOKEN 512 /* longest credential kept (the controller's limit) */
/* The persisted credential (token without "Bearer ") and its settings hash; false when there
 * is none. Valid until the next save or free. */
bool agent_state_credential(const struct agent_state *st, const char **token,
			    const uint8_t **hash, size_t *hash_len);
/* Persists a credential atomically (a token of 1..AGENT_STATE_MAX_TOKEN printable characters,
 * hash_len <= AGENT_STATE_MAX_HASH). 0 or -errno with err. */
int agent_state_save_credential(struct agent_state *st, const char *token, const uint8_t *hash,
				size_t hash_len, struct pf_error *err);

/* Helpers shared with other agent modules. */
/* mkdir -p with the given mode for created components. 0 or -errno. */
int agent_mkdir_p(const char *path, unsigned mode);
/* Writes a whole file atomically (tmp + fsync + rename + fsync of the directory). */
int agent_write_file_atomic(const char *path, const void *data, size_t len, unsigned mode);
/* Reads a whole file of at most max bytes into a NUL-terminated heap buffer. -EFBIG when
 * larger. */
int agent_read_file(const char *path, size_t max, char **out, size_t *len);

#endif
