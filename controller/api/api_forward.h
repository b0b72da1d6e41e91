/* api_forward.h — operator commands that reach a replica which does not drive their target,
 * forwarded through the shared PostgreSQL store to the replica that does (docs/scaling.md
 * "Commands through any replica").
 *
 * A rollout action (POST /api/v1/rollouts/{id}/pause|resume|rollback|cancel) or a capture
 * cancel (DELETE /api/v1/captures/{id}) whose target another replica drives is stored as a
 * command row (store.h "Commands forwarded between replicas") and its handler answers
 * nothing yet: resp->forward_id names the command, and the server parks the request. The
 * driving replica, notified, runs the same handler over the same caller, writes the audit
 * row and stores the answer; the parked request is answered with it, byte for byte what the
 * driver answered. A rollout whose replica died is adopted by another (its advisory lock,
 * at most 5 s later), which then runs the commands waiting for it. A command nobody runs
 * within PF_API_FORWARD_WAIT_MS is withdrawn and answered 503 driver_unavailable: it never
 * runs after that (one whose waiting replica died too is withdrawn by the first replica that
 * sees it 5 s later).
 *
 * Loop thread only, like the fleet, the rollouts and the captures it acts on. */
#ifndef PF_API_FORWARD_H
#define PF_API_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pf_api;
struct pf_api_request;
struct pf_api_response;

#define PF_API_FORWARD_WAIT_MS 8000  /* a parked request waits at most this for the driver */
#define PF_API_FORWARD_MAX 64	     /* requests parked at once per replica (503 past it) */
#define PF_API_COMMANDS_PER_RUN 64   /* pending commands looked at per run */

/* In a handler, for a target this replica does not drive: on a shared store, stores the
 * command and sets resp->forward_id (0). -EOPNOTSUPP on SQLite and -EAGAIN while running a
 * forwarded command (the caller answers as it would without forwarding, and the runner
 * leaves the command for the replica that drives the target); another negative errno with
 * resp answered (500, the store's error) when it could not be stored. */
int pf_api_forward(struct pf_api *api, const struct pf_api_request *req,
		   struct pf_api_response *resp, const char *kind, const char *target,
		   const char *action);

/* Runs the pending commands whose target this replica drives (or that ended, which any
 * replica answers alike): claims each, runs its route's handler, audits it and stores the
 * answer (which notifies the replica that took it). Returns how many ran. */
size_t pf_api_commands_run(struct pf_api *api, int64_t now_ms);

/* The answer of forwarded command id: 1 with resp filled (the driver's status and body), 0
 * while it is pending. give_up (the wait is over): a pending command is withdrawn and
 * answered 503 driver_unavailable, one being run 504 command_running (its outcome shows in
 * the target's GET); then always 1. A negative errno on store errors (resp answered 500). */
int pf_api_forward_outcome(struct pf_api *api, const char *id, bool give_up,
			   struct pf_api_response *resp);

#endif
