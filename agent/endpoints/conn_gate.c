/* conn_gate.c — see conn_gate.h. */
#include "endpoints/conn_gate.h"

#include <stdio.h>
#include <string.h>

#include "pf/log.h"

static void pend_off(struct agent_conn_gate *g, struct agent_conn *k)
{
	if (!k->pending)
		return;
	k->pending = false;
	g->n_pending--;
}

void agent_conn_expect_headers(struct agent_conn_gate *g, struct agent_conn *k, int64_t now_ms)
{
	if (!k->pending)
		g->n_pending++;
	k->pending = true;
	k->deadline_ms = now_ms + AGENT_HTTP_HEADER_TIMEOUT_S * 1000;
}

void agent_conn_headers_done(struct agent_conn_gate *g, struct agent_conn *k)
{
	pend_off(g, k);
}

void agent_conn_close(struct agent_conn_gate *g, struct agent_conn *k)
{
	pend_off(g, k);
	memset(k, 0, sizeof(*k));
}

/* The connection of addr to close for a new one, NULL when none: see agent_conn_open(). */
static struct agent_conn *victim(struct agent_conn_gate *g, const char *addr, int64_t now_ms,
				 agent_conn_started_fn started)
{
	struct agent_conn *stalled = NULL, *graced = NULL, *old_any = NULL;
	uint32_t pending = 0, open = 0;
	for (size_t i = 0; i < AGENT_HTTP_MAX_CONNS; i++) {
		struct agent_conn *k = &g->conns[i];
		if (!k->used || !k->handle || strcmp(k->addr, addr) != 0)
			continue;
		open++;
		if (!old_any || k->opened_ms < old_any->opened_ms)
			old_any = k;
		if (!k->pending)
			continue;
		pending++;
		if (started(k->handle)) {
			if (!stalled || k->deadline_ms < stalled->deadline_ms)
				stalled = k;
		} else if (k->opened_ms + AGENT_HTTP_HEADER_GRACE_MS <= now_ms) {
			if (!graced || k->deadline_ms < graced->deadline_ms)
				graced = k;
		}
	}
	if (open >= AGENT_HTTP_CONNS_PER_SOURCE)
		return old_any;
	if (g->n_pending < AGENT_HTTP_PENDING_PRESSURE || pending < AGENT_HTTP_PENDING_PER_SOURCE)
		return NULL;
	return stalled ? stalled : graced;
}

struct agent_conn *agent_conn_open(struct agent_conn_gate *g, const char *addr, void *handle,
				   int64_t now_ms, agent_conn_started_fn started, void **evict)
{
	*evict = NULL;
	struct agent_conn *v = victim(g, addr, now_ms, started);
	if (v) {
		g->evicted++;
		*evict = v->handle;
		pend_off(g, v);
		v->handle = NULL; /* being closed: no longer counts for its address */
		if (now_ms - g->log_ms >= 10000) {
			g->log_ms = now_ms;
			pf_log_warn("closing an older connection from %s for a new one: the address "
				    "holds its cap of connections (%d still sending headers, or %d)",
				    addr, AGENT_HTTP_PENDING_PER_SOURCE,
				    AGENT_HTTP_CONNS_PER_SOURCE);
		}
	}
	for (size_t i = 0; i < AGENT_HTTP_MAX_CONNS; i++) {
		struct agent_conn *k = &g->conns[i];
		if (k->used)
			continue;
		*k = (struct agent_conn){.handle = handle, .opened_ms = now_ms, .used = true};
		snprintf(k->addr, sizeof(k->addr), "%s", addr);
		agent_conn_expect_headers(g, k, now_ms);
		return k;
	}
	return NULL;
}

void agent_conn_sweep(struct agent_conn_gate *g, int64_t now_ms, void (*expired)(void *handle))
{
	for (size_t i = 0; i < AGENT_HTTP_MAX_CONNS && g->n_pending; i++) {
		struct agent_conn *k = &g->conns[i];
		if (!k->used || !k->pending || k->deadline_ms > now_ms)
			continue;
		pend_off(g, k);
		g->header_timeouts++;
		pf_log_debug("closing a connection from %s: no complete request headers in %d s",
			     k->addr, AGENT_HTTP_HEADER_TIMEOUT_S);
		if (k->handle)
			expired(k->handle);
	}
}
