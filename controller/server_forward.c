/* server_forward.c — see server_forward.h. */
#include "server_forward.h"

#include <errno.h>
#include <string.h>

#include <libwebsockets.h>

#include "api/api.h"
#include "metrics.h"
#include "pf/log.h"
#include "server_int.h"
#include "store.h"

#define FORWARD_POLL_MS 1000
#define COMMANDS_KEEP_MS (10 * 60 * 1000) /* answered command rows are deleted after this */
#define COMMANDS_PRUNE_EVERY_MS 60000

static void unpark(struct pf_server_forwards *f, size_t i)
{
	f->v[i].req->fwd = false;
	f->v[i] = f->v[--f->n];
}

/* Answers entry i when its command is done (or give_up); true when it was answered. */
static bool answer(struct pf_server *s, size_t i, bool give_up)
{
	struct pf_server_forwards *f = &s->forwards;
	struct pf_api_response resp;
	pf_api_response_init(&resp);
	int rc = pf_api_forward_outcome(s->api, f->v[i].id, give_up, &resp);
	if (rc == 0 || (rc < 0 && !give_up)) { /* not yet, or try again at the next poll */
		pf_api_response_release(&resp);
		return false;
	}
	struct http_req *r = f->v[i].req;
	struct lws *wsi = f->v[i].wsi;
	pf_http_req_set_api_response(r, &resp);
	if (s->metrics)
		pf_metrics_api_request(s->metrics, resp.status);
	pf_log_debug("%s: answered %d for the replica that drives it (command %s)", r->path,
		     resp.status, f->v[i].id);
	pf_api_response_release(&resp);
	unpark(f, i);
	/* Like an answer that waited for a pool (server_jobs.c): the connection closes after
	 * it, so lws never resumes a keep-alive connection whose request was parked. */
	r->close_after = true;
	lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0);
	lws_callback_on_writable(wsi);
	return true;
}

int pf_server_forward_park(struct pf_server *s, struct lws *wsi, struct http_req *r,
			   const char *id)
{
	struct pf_server_forwards *f = &s->forwards;
	if (f->n == PF_API_FORWARD_MAX) {
		struct pf_api_response resp;
		pf_api_response_init(&resp);
		int rc = pf_api_forward_outcome(s->api, id, true, &resp);
		if (rc == 1 && resp.status == 503) /* withdrawn: keeps its Retry-After */
			pf_api_error(&resp, 503, "unavailable",
				     "%d commands already wait for other replicas here; nothing "
				     "was done: retry",
				     PF_API_FORWARD_MAX);
		pf_http_req_set_api_response(r, &resp);
		if (s->metrics)
			pf_metrics_api_request(s->metrics, resp.status);
		pf_api_response_release(&resp);
		return -ENOSPC;
	}
	int64_t now = pf_server_now_ms();
	f->v[f->n].req = r;
	f->v[f->n].wsi = wsi;
	snprintf(f->v[f->n].id, sizeof(f->v[f->n].id), "%s", id);
	f->v[f->n].deadline_ms = now + PF_API_FORWARD_WAIT_MS;
	f->v[f->n].poll_ms = now + FORWARD_POLL_MS;
	f->n++;
	r->fwd = true;
	/* lws's own bound on the connection, past ours */
	lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, PF_API_FORWARD_WAIT_MS / 1000 + 10);
	return 0;
}

void pf_server_forward_drop(struct pf_server *s, struct http_req *r)
{
	struct pf_server_forwards *f = &s->forwards;
	for (size_t i = 0; i < f->n; i++) {
		if (f->v[i].req == r) {
			pf_log_debug("%s: connection closed before its forwarded command was "
				     "answered (command %s)",
				     r->path, f->v[i].id);
			unpark(f, i);
			return;
		}
	}
}

void pf_server_forward_on_command(const char *kind, const char *id, void *ud)
{
	struct pf_server *s = ud;
	struct pf_server_forwards *f = &s->forwards;
	int64_t now = pf_server_now_ms();
	if (!s->api)
		return;
	if (kind && strcmp(kind, "command_done") == 0) {
		for (size_t i = 0; id && i < f->n; i++)
			if (strcmp(f->v[i].id, id) == 0) {
				answer(s, i, false);
				return;
			}
		return;
	}
	pf_api_commands_run(s->api, now);
	if (!kind && now - f->pruned_ms >= COMMANDS_PRUNE_EVERY_MS) {
		f->pruned_ms = now;
		if (pf_store_commands_prune(s->store, now - COMMANDS_KEEP_MS) < 0)
			pf_log_debug("store: old commands: %s", pf_store_last_error(s->store));
	}
}

void pf_server_forward_tick(struct pf_server *s, int64_t now_ms)
{
	struct pf_server_forwards *f = &s->forwards;
	for (size_t i = 0; i < f->n;) {
		bool late = now_ms >= f->v[i].deadline_ms;
		if ((late || now_ms >= f->v[i].poll_ms) && answer(s, i, late))
			continue; /* entry i is another one now */
		if (now_ms >= f->v[i].poll_ms)
			f->v[i].poll_ms = now_ms + FORWARD_POLL_MS;
		i++;
	}
}
