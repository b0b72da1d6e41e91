/* rollout_int.h — private to the staged-rollout engine (fleet/rollout.c: strategy, batches,
 * transitions, persistence) and its store readers (fleet/rollout_load.c: rollouts and pins
 * loaded from their rows, the views the API renders). The in-memory rollout, its agents and
 * the helpers both sides use. Nothing outside fleet/rollout*.c includes it. */
#ifndef PF_FLEET_ROLLOUT_INT_H
#define PF_FLEET_ROLLOUT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "rollout.h"

struct pf_cfg_slot;

enum ro_state {
	RO_RUNNING,
	RO_PAUSED,
	RO_HALTED,
	RO_ROLLING_BACK,
	RO_ROLLED_BACK,
	RO_COMPLETED,
	RO_CANCELLED,
};
extern const char *const pf_ro_state_names[]; /* by enum ro_state */

/* Per-agent states. */
enum ra_state {
	RA_WAITING,  /* its batch has not started */
	RA_APPLYING, /* pinned to the new version, no result yet */
	RA_APPLIED,
	RA_FAILED,
	RA_OFFLINE, /* not connected when its batch timed out */
};

/* Per-agent rollback states (the forward result above is kept). */
enum rv_state {
	RV_NONE,
	RV_REVERTING, /* pinned back to its old version */
	RV_REVERTED,
	RV_FAILED,
};
extern const char *const pf_rv_state_names[4]; /* by enum rv_state */

struct ro_agent {
	uint8_t uid[16];
	uint32_t batch;
	uint8_t state;	/* enum ra_state */
	uint8_t revert; /* enum rv_state */
	bool dirty;
	int64_t from_version;
	char *error;
};

struct rollout {
	char id[PF_ROLLOUT_ID_MAX + 1];
	char config[128];
	char selector[1024];
	char created_by[64];
	int64_t version;
	int64_t created_ms, updated_ms;
	struct pf_rollout_strategy strategy;
	enum ro_state state;
	uint32_t batch; /* current batch (0-based); n_batches when none left */
	uint32_t n_batches;
	bool started;		  /* the current batch has started */
	int64_t batch_started_ms; /* the current batch's (or the rollback's) timeout clock */
	int64_t next_batch_ms;	  /* running and between batches: when the next one starts */
	char reason[256];
	bool dirty;
	struct ro_agent *agents; /* by (batch, uid) */
	size_t n;
	uint32_t *first; /* first[b] = index of batch b's first agent; first[n_batches] = n */
};

struct pf_rollouts {
	struct pf_fleet *fleet;
	struct pf_store *store;
	struct rollout *active[PF_ROLLOUTS_MAX_ACTIVE];
	size_t n_active;
};

void pf_ro_free(struct rollout *r);
int pf_ro_state_parse(const char *s);
int pf_ra_state_parse(const char *s);
struct pf_cfg_slot *pf_ro_version_slot(struct pf_rollouts *rs, const char *config, int64_t version);
struct rollout *pf_ro_find_active(struct pf_rollouts *rs, const char *id);
int pf_ro_index_batches(struct rollout *r);
/* qsort order of a rollout's agents: by batch, then uid. */
int pf_ro_agent_order(const void *pa, const void *pb);
json_t *pf_ro_strategy_json(const struct pf_rollout_strategy *s);
json_t *pf_ro_batches_json(const struct rollout *r, bool with_errors);

#endif
