/* api_rollouts.h — the staged-rollout routes of the REST API (docs/api.md "Rollouts"),
 * dispatched from api.c's route() after authentication and the role check (GET viewer, POST
 * operator). Plain functions over the parsed request; the state machine is fleet/rollout.h.
 *
 *   POST /api/v1/rollouts                    202 {"id","state","agents","batches"}
 *   GET  /api/v1/rollouts[?active=1&limit=&cursor=]  newest first, next_cursor
 *   GET  /api/v1/rollouts/{id}               the rollout with per-batch progress and errors
 *   POST /api/v1/rollouts/{id}/pause|resume|rollback|cancel   200 with the rollout
 * Bad input answers 400 with the field path in error.path (unknown keys, types, strategy
 * values out of range, a bad selector, an unknown config or version); no agent to move, all
 * already on the version, or over PF_ROLLOUTS_MAX_AGENTS 422;
 * a rollout of that config already active, or PF_ROLLOUTS_MAX_ACTIVE active, 409; an action
 * the rollout's state does not allow 409. Every mutation is audited. */
#ifndef PF_API_ROLLOUTS_H
#define PF_API_ROLLOUTS_H

#include "api.h"

#define PF_API_ROLLOUTS_LIST_DEFAULT 100
#define PF_API_ROLLOUTS_LIST_MAX 1000

/* seg/n: the path segments after /api/v1/ (seg[0] is "rollouts"). role: the caller's. */
void pf_api_rollouts_handle(struct pf_api *api, const struct pf_api_request *req,
			    struct pf_api_response *resp, const char (*seg)[160], size_t n,
			    const char *role);

struct json_t;
struct pf_rollouts;
/* JSON views (docs/api.md "Rollouts"); caller owns the reference. NULL with *rc: -ENOENT,
 * -ENOMEM, -EIO. */
struct json_t *pf_api_rollout_json(struct pf_rollouts *r, const char *id, int *rc);
/* {"rollouts":[...without per-batch errors...],"next_cursor":id|null}. */
struct json_t *pf_api_rollouts_list_json(struct pf_rollouts *r, bool active_only, size_t limit,
					 const char *cursor, int *rc);

#endif
