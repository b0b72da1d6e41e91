/* config.h — the agent's config engine. It owns the active profiling config (a parsed
 * struct pf_profcfg, see pf/profcfg.h) and where it came from:
 *
 *   local   the --config file (or defaults without one). Its top-level `labels:` plus the
 *           --label flags are the operator labels reported in the AgentDescription.
 *   remote  profiling.yaml from OpAMP (AgentConfigMap key "profiling.yaml"). When present it
 *           wins over the local config; the last one that applied is persisted in the state
 *           directory (state.h) and used at the next start while the controller is away.
 *
 * Applying: the new document is parsed and validated completely, then every
 * registered hook's check() runs (a component may refuse it at apply time: a `file` exporter
 * whose directory cannot be created), then every commit(), then the pointers are swapped. On
 * any failure the old config stays active and the remote status becomes FAILED with a message
 * naming the key ("profiling.exporters[0].path: cannot create directory '/proc/x': ...").
 *
 * Remote config status (opamp RemoteConfigStatus): APPLYING while applying (synchronous, so
 * only seen by hooks), then APPLIED or FAILED, always with the hash that was received. A
 * remote config with the same hash as the last one received is not applied again and changes
 * nothing (no new status report: an agent answers no message that left its status alone).
 *
 * Change detection: agent_config_generation() grows whenever the active config changes and
 * agent_config_status_generation() whenever the remote status changes; the OpAMP session
 * compares them with what it last reported.
 *
 * Not thread-safe: owned by the event-loop thread. */
#ifndef AGENT_CONFIG_H
#define AGENT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "opamp_codec.h"
#include "pf/buf.h"
#include "pf/error.h"
#include "pf/profcfg.h"

#define AGENT_REMOTE_CONFIG_KEY "profiling.yaml"
#define AGENT_MAX_HOOKS 16
#define AGENT_MAX_LABELS 64
#define AGENT_MAX_CONFIG_HASH 64

struct agent_state;
struct agent_config;

/* A component that takes part in applying a config (the eBPF sampler, exporters...).
 * check() may refuse the config (fill err with the key path, return -errno); it must not
 * change anything. commit() makes the component use it and cannot fail. Both get the new
 * config; old is the active one (never NULL in commit, may be NULL in check at first apply). */
struct agent_config_hook {
	const char *name;
	int (*check)(void *ctx, const struct pf_profcfg *cfg, struct pf_error *err);
	void (*commit)(void *ctx, const struct pf_profcfg *cfg, const struct pf_profcfg *old);
	void *ctx;
};

struct agent_remote_status {
	enum pf_remote_config_status status; /* PF_RCS_UNSET until a remote config is seen */
	uint8_t hash[AGENT_MAX_CONFIG_HASH];
	size_t hash_len;
	char message[768]; /* FAILED: the reason, "" otherwise */
};

/* state may be NULL (nothing persisted). */
struct agent_config *agent_config_new(struct agent_state *state);
void agent_config_free(struct agent_config *c);

/* Registers a hook (called in registration order). -ENOSPC past AGENT_MAX_HOOKS. */
int agent_config_add_hook(struct agent_config *c, const struct agent_config_hook *hook);

/* Sets the local config document (may be called once before agent_config_start()). Invalid
 * documents give -EINVAL with err naming the key. Its `labels:` become operator labels. */
int agent_config_set_local(struct agent_config *c, const char *text, size_t len,
			   struct pf_error *err);
/* Adds an operator label "key=value" (--label); overrides a local-config label of the same
 * key. -EINVAL without '=' or with an empty key. */
int agent_config_add_label(struct agent_config *c, const char *kv);

/* First apply: the persisted remote config if any (falling back to the local one when it no
 * longer applies), else the local config, else defaults. 0 or -errno (the local config does
 * not apply: err says why). */
int agent_config_start(struct agent_config *c, struct pf_error *err);

/* The server offered a remote config (ServerToAgent.remote_config). Returns 1 when nothing
 * changed (same hash as the last one received), 0 when it applied, or -errno when it failed
 * (status FAILED, old config kept; err has the message). An empty config map withdraws the
 * remote config: the local one applies again. */
int agent_config_offer_remote(struct agent_config *c, const struct pf_config_map *map,
			      const uint8_t *hash, size_t hash_len, struct pf_error *err);

const struct pf_profcfg *agent_config_active(const struct agent_config *c);
bool agent_config_active_is_remote(const struct agent_config *c);
const struct agent_remote_status *agent_config_remote_status(const struct agent_config *c);
/* The effective config as YAML, secrets redacted (pf_profcfg_emit_yaml_redacted of the
 * active config), followed by the runtime note as "# " comment lines when there is one:
 * what the agent reports. */
int agent_config_effective_yaml(const struct agent_config *c, struct pf_buf *out);
/* A runtime note on the effective config: what runs differs from the document (the overhead
 * guard lowered the sampling frequency). fn copies the note (one line, "" for none) into buf
 * (cap > 0; with buf NULL it only answers the generation) and returns a generation that grows
 * whenever the note changes; it is called on the loop thread and must be safe to call while
 * another thread changes the note. agent_config_generation() includes it. */
typedef uint64_t (*agent_config_note_fn)(void *ctx, char *buf, size_t cap);
void agent_config_set_note_source(struct agent_config *c, agent_config_note_fn fn, void *ctx);
uint64_t agent_config_generation(const struct agent_config *c);
uint64_t agent_config_status_generation(const struct agent_config *c);
/* Operator labels: local-config labels merged with --label flags (flags win). */
const struct pf_kv_str *agent_config_labels(const struct agent_config *c, size_t *n);

/* Built-in apply-time check of the exporters (also registered by agent_config_new as the first
 * hook): a `file` exporter's directory is created (0755) and must be writable. */
int agent_config_check_exporters(const struct pf_profcfg *cfg, struct pf_error *err);

#endif
