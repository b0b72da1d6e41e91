/* server_forward.h — API requests parked while a forwarded command runs on the replica that
 * drives its target (api/api_forward.h), and the server's side of the commands of others.
 *
 * Owns the parked requests: at most PF_API_FORWARD_MAX per replica, each for at most
 * PF_API_FORWARD_WAIT_MS. A parked request is answered when the command's "command_done"
 * notification arrives, or when a poll of its row (every second, in case a notification was
 * lost with the listening connection) finds it done, or at its deadline (the command is then
 * withdrawn). A client that goes away drops its entry; the command still runs.
 *
 * Loop thread only. */
#ifndef PF_SERVER_FORWARD_H
#define PF_SERVER_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "api/api_forward.h"

struct lws;
struct http_req;
struct pf_server;

struct pf_server_forwards {
	struct {
		struct http_req *req;
		struct lws *wsi;
		char id[40];
		int64_t deadline_ms, poll_ms;
	} v[PF_API_FORWARD_MAX];
	size_t n;
	int64_t pruned_ms; /* when old command rows were last deleted */
};

/* Parks r (its handler forwarded command id): 0, or -ENOSPC when PF_API_FORWARD_MAX wait
 * already (the command is withdrawn and r answered 503 at once). */
int pf_server_forward_park(struct pf_server *s, struct lws *wsi, struct http_req *r,
			   const char *id);
/* r goes away (its connection closed): forgets its entry. */
void pf_server_forward_drop(struct pf_server *s, struct http_req *r);
/* The sync listener's hook (fleet/sync.h on_command; ud is the server). */
void pf_server_forward_on_command(const char *kind, const char *id, void *ud);
/* Deadlines and polls of the parked requests (the persist tick). */
void pf_server_forward_tick(struct pf_server *s, int64_t now_ms);

#endif
