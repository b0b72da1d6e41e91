/* conn_limits.c — see conn_limits.h. */
#include "conn_limits.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "metrics.h"
#include "pf/list.h"
#include "pf/log.h"

/* One peer address: its open OpAMP WebSockets (keyed by lws' peer string) or its connections
 * still sending request headers (keyed by the accepted socket's address, see peer_of_fd).
 * Freed when both counts are 0 and no struct pf_conn points to it. */
struct pf_conn_src {
	struct pf_conn_src *next;
	uint32_t n;
	uint32_t pending;
	uint32_t refs; /* struct pf_conn pointing here */
	size_t body;   /* request body bytes reserved */
	char addr[64];
};

static struct pf_conn_src **src_slot(struct pf_conn_limits *l, const char *addr)
{
	uint32_t h = 2166136261u;
	for (const char *p = addr; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	struct pf_conn_src **pp = &l->by_source[h % PF_CONN_SRC_BUCKETS];
	while (*pp && strcmp((*pp)->addr, addr) != 0)
		pp = &(*pp)->next;
	return pp;
}

/* addr's counter, made when missing; NULL when out of memory. */
static struct pf_conn_src *src_get(struct pf_conn_limits *l, const char *addr)
{
	struct pf_conn_src **pp = src_slot(l, addr);
	if (!*pp) {
		*pp = calloc(1, sizeof(**pp));
		if (!*pp)
			return NULL;
		snprintf((*pp)->addr, sizeof((*pp)->addr), "%s", addr);
	}
	return *pp;
}

/* Frees addr's counter when nothing counts in it any more. */
static void src_put(struct pf_conn_limits *l, const char *addr)
{
	struct pf_conn_src **pp = src_slot(l, addr);
	if (*pp && (*pp)->n == 0 && (*pp)->pending == 0 && (*pp)->refs == 0) {
		struct pf_conn_src *dead = *pp;
		*pp = dead->next;
		free(dead);
	}
}

uint32_t pf_conn_limits_ws_open(struct pf_conn_limits *l, const char *addr)
{
	struct pf_conn_src *c = *src_slot(l, addr);
	return c ? c->n : 0;
}

int pf_conn_limits_ws_add(struct pf_conn_limits *l, const char *addr, int delta)
{
	if (delta < 0 && !*src_slot(l, addr))
		return 0;
	struct pf_conn_src *c = src_get(l, addr);
	if (!c)
		return -ENOMEM;
	c->n = (uint32_t)((int64_t)c->n + delta);
	src_put(l, addr);
	return 0;
}

/* The peer address of an accepted socket as text ("127.0.0.2", "::1"; IPv4-mapped IPv6
 * addresses as IPv4), "" when unknown. */
static void peer_of_fd(int fd, char *out, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	out[0] = 0;
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
		return;
	if (ss.ss_family == AF_INET) {
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, (socklen_t)len);
	} else if (ss.ss_family == AF_INET6) {
		const struct in6_addr *a6 = &((struct sockaddr_in6 *)&ss)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a6))
			inet_ntop(AF_INET, &a6->s6_addr[12], out, (socklen_t)len);
		else
			inet_ntop(AF_INET6, a6, out, (socklen_t)len);
	}
}

static void pend_unlink(struct pf_conn_limits *l, struct pf_conn *k)
{
	if (!k->pending)
		return;
	k->pending = false;
	PF_DLIST_UNLINK_T(l->pend_head, l->pend_tail, k, prev, next);
	l->n_pending--;
	if (k->src && k->src->pending)
		k->src->pending--;
}

void pf_conn_expect_headers(struct pf_conn_limits *l, struct pf_conn *k, int64_t now_ms)
{
	pend_unlink(l, k);
	k->pending = true;
	k->deadline_ms = now_ms + (int64_t)l->header_timeout_s * 1000;
	PF_DLIST_PUSH_BACK_T(l->pend_head, l->pend_tail, k, prev, next);
	l->n_pending++;
	if (k->src)
		k->src->pending++;
}

bool pf_conn_limits_refuse(struct pf_conn_limits *l, int fd, int64_t now_ms)
{
	if (!l->max_pending_per_source || l->n_pending < PF_PENDING_PRESSURE)
		return false;
	char peer[64];
	peer_of_fd(fd, peer, sizeof(peer));
	struct pf_conn_src *src = *src_slot(l, peer);
	if (!src || src->pending < l->max_pending_per_source)
		return false;
	l->metrics->http_pending_rejected++;
	if (now_ms - l->pending_log_ms >= 10000) {
		l->pending_log_ms = now_ms;
		pf_log_warn("closing new connections from %s: %u of its connections are still "
			    "sending request headers (http.max_pending_per_source)",
			    peer, src->pending);
	}
	return true;
}

struct pf_conn *pf_conn_open(struct pf_conn_limits *l, int fd, void *handle, int64_t now_ms)
{
	struct pf_conn *k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	char peer[64];
	peer_of_fd(fd, peer, sizeof(peer));
	k->src = src_get(l, peer);
	if (!k->src) {
		free(k);
		return NULL;
	}
	k->handle = handle;
	k->src->refs++;
	pf_conn_expect_headers(l, k, now_ms);
	return k;
}

void pf_conn_headers_done(struct pf_conn_limits *l, struct pf_conn *k)
{
	pend_unlink(l, k);
}

int pf_conn_body_begin(struct pf_conn_limits *l, struct pf_conn *k, size_t len, int64_t now_ms)
{
	pf_conn_body_end(l, k);
	size_t src_body = k->src ? k->src->body : 0;
	int rc = 0;
	if (l->max_body_per_source && len > l->max_body_per_source - pf_min(src_body,
									  l->max_body_per_source))
		rc = -EUSERS;
	else if (l->max_body_total &&
		 len > l->max_body_total - pf_min(l->body_total, l->max_body_total))
		rc = -ENOSPC;
	if (rc < 0) {
		if (now_ms - l->body_log_ms >= 10000) {
			l->body_log_ms = now_ms;
			pf_log_warn("refusing a %zu-byte request body from %s: %zu bytes buffered "
				    "for that address, %zu in all (limits %zu, %zu)",
				    len, k->src ? k->src->addr : "?", src_body, l->body_total,
				    l->max_body_per_source, l->max_body_total);
		}
		return rc;
	}
	k->in_body = true;
	k->body_reserved = len;
	k->body_last_ms = now_ms;
	k->body_deadline_ms =
	    now_ms + (int64_t)PF_BODY_STALL_S * 1000 + (int64_t)(len / (PF_BODY_MIN_RATE / 1000));
	if (k->src)
		k->src->body += len;
	l->body_total += len;
	PF_DLIST_PUSH_FRONT(l->body_head, k, bprev, bnext);
	return 0;
}

void pf_conn_body_progress(struct pf_conn *k, int64_t now_ms)
{
	k->body_last_ms = now_ms;
}

void pf_conn_body_end(struct pf_conn_limits *l, struct pf_conn *k)
{
	if (!k->in_body)
		return;
	k->in_body = false;
	PF_DLIST_UNLINK(l->body_head, k, bprev, bnext);
	if (k->src)
		k->src->body -= k->body_reserved;
	l->body_total -= k->body_reserved;
	k->body_reserved = 0;
}

/* Why a body or message last fed at last_ms and due whole by deadline_ms is timed out at
 * now_ms, NULL when it is not. */
static const char *overdue(int64_t now_ms, int64_t last_ms, int64_t deadline_ms)
{
	if (now_ms - last_ms >= (int64_t)PF_BODY_STALL_S * 1000)
		return "stalled";
	return now_ms >= deadline_ms ? "arrives too slowly" : NULL;
}

/* What a sweep does with a connection whose body or message is overdue: ends it (its bytes
 * go), counts it, logs "closing <conn> from <addr>: its <what> <why>" and has it closed. */
struct overdue_kind {
	void (*end)(struct pf_conn_limits *l, struct pf_conn *k);
	enum pf_log_level level;
	const char *conn, *what;
};

static const struct overdue_kind body_overdue = {pf_conn_body_end, PF_LOG_DEBUG, "a connection",
						 "request body"};
static const struct overdue_kind msg_overdue = {pf_conn_msg_end, PF_LOG_INFO, "a WebSocket",
						"fragmented message"};

static void expire(struct pf_conn_limits *l, struct pf_conn *k, const struct overdue_kind *o,
		   uint64_t *timeouts, const char *why, void (*expired)(void *handle))
{
	o->end(l, k);
	(*timeouts)++;
	pf_log(o->level, "closing %s from %s: its %s %s", o->conn, k->src ? k->src->addr : "?",
	       o->what, why);
	expired(k->handle);
}

void pf_conn_body_sweep(struct pf_conn_limits *l, int64_t now_ms, void (*expired)(void *handle))
{
	struct pf_conn *k = l->body_head;
	while (k) {
		struct pf_conn *next = k->bnext;
		const char *why = overdue(now_ms, k->body_last_ms, k->body_deadline_ms);
		if (why)
			expire(l, k, &body_overdue, &l->metrics->http_body_timeouts, why, expired);
		k = next;
	}
}

int pf_conn_msg_hold(struct pf_conn_limits *l, struct pf_conn *k, size_t held, int64_t now_ms)
{
	size_t others = l->msg_total - k->msg_held;
	if (l->max_msg_total && held > l->max_msg_total - pf_min(others, l->max_msg_total)) {
		l->metrics->opamp_reassembly_rejected++;
		if (now_ms - l->msg_log_ms >= 10000) {
			l->msg_log_ms = now_ms;
			pf_log_warn("closing a WebSocket from %s: its unfinished message (%zu bytes) "
				    "would pass the %zu bytes all unfinished messages may hold (%zu "
				    "held by others)",
				    k->src ? k->src->addr : "?", held, l->max_msg_total, others);
		}
		return -ENOSPC;
	}
	if (!k->in_msg) {
		k->in_msg = true;
		k->msg_start_ms = now_ms;
		PF_DLIST_PUSH_FRONT(l->msg_head, k, mprev, mnext);
	}
	k->msg_last_ms = now_ms;
	l->msg_total = others + held;
	k->msg_held = held;
	return 0;
}

void pf_conn_msg_end(struct pf_conn_limits *l, struct pf_conn *k)
{
	if (!k->in_msg)
		return;
	k->in_msg = false;
	PF_DLIST_UNLINK(l->msg_head, k, mprev, mnext);
	l->msg_total -= k->msg_held;
	k->msg_held = 0;
}

void pf_conn_msg_sweep(struct pf_conn_limits *l, int64_t now_ms, void (*expired)(void *handle))
{
	struct pf_conn *k = l->msg_head;
	while (k) {
		struct pf_conn *next = k->mnext;
		int64_t deadline = k->msg_start_ms + (int64_t)PF_BODY_STALL_S * 1000 +
				   (int64_t)(k->msg_held / (PF_BODY_MIN_RATE / 1000));
		const char *why = overdue(now_ms, k->msg_last_ms, deadline);
		if (why)
			expire(l, k, &msg_overdue, &l->metrics->opamp_message_timeouts, why,
			       expired);
		k = next;
	}
}

void pf_conn_close(struct pf_conn_limits *l, struct pf_conn *k)
{
	pend_unlink(l, k);
	pf_conn_body_end(l, k);
	pf_conn_msg_end(l, k);
	if (k->src) {
		k->src->refs--;
		src_put(l, k->src->addr);
	}
	free(k);
}

void pf_conn_limits_sweep(struct pf_conn_limits *l, int64_t now_ms, void (*expired)(void *handle))
{
	while (l->pend_head && l->pend_head->deadline_ms <= now_ms) {
		struct pf_conn *k = l->pend_head;
		pend_unlink(l, k);
		l->metrics->http_header_timeouts++;
		pf_log_debug("closing a connection from %s: no complete request headers in %u s",
			     k->src ? k->src->addr : "?", l->header_timeout_s);
		expired(k->handle);
	}
}

void pf_conn_limits_release(struct pf_conn_limits *l)
{
	for (size_t i = 0; i < PF_CONN_SRC_BUCKETS; i++)
		while (l->by_source[i]) {
			struct pf_conn_src *c = l->by_source[i];
			l->by_source[i] = c->next;
			free(c);
		}
}
