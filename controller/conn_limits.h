/* conn_limits.h — how many connections one peer address may hold: its open OpAMP WebSockets
 * (http.max_conns_per_source, checked at the upgrade), its connections still sending a
 * request's headers (http.max_pending_per_source, checked at accept, and
 * http.header_timeout_s, the deadline for those headers), the request body bytes it may
 * have buffered (reserved from Content-Length at the end of the headers, per address and in
 * all), with the deadlines of those bodies (PF_BODY_STALL_S, PF_BODY_MIN_RATE), and the bytes
 * of unfinished WebSocket messages being reassembled (in all, with the same deadlines).
 *
 * Owns: one counter per peer address (freed when nothing counts in it), one struct pf_conn per
 * accepted TCP connection, and the list of connections owing headers, oldest deadline first
 * (every deadline is "now + header_timeout_s", so appending keeps the order and a sweep stops
 * at the first one not yet due), and the list of connections receiving a body (unordered:
 * each has its own deadline; it is as long as the bodies in flight, which the budgets bound in
 * bytes), and the list of connections holding an unfinished WebSocket message (unordered,
 * bounded the same way). It knows nothing of libwebsockets: the server calls it from
 * its callbacks and closes what it is told to.
 *
 * Not thread-safe: the loop thread owns it. */
#ifndef PF_CONN_LIMITS_H
#define PF_CONN_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pf_metrics;

/* The per-address cap on connections still sending headers applies once this many are
 * pending in all: below it a burst from one address (agents behind one NAT reconnecting
 * together) is taken whole; above it no address holds more than its cap, so at least
 * PF_HEADER_POOL - PF_PENDING_PRESSURE header slots stay for everyone else. */
#define PF_HEADER_POOL 256 /* lws max_http_header_pool: connections reading headers at once */
#define PF_PENDING_PRESSURE (PF_HEADER_POOL / 2)

#define PF_CONN_SRC_BUCKETS 1024

/* A request body that gets no byte for PF_BODY_STALL_S seconds, or that has not arrived
 * whole PF_BODY_STALL_S seconds plus one second per PF_BODY_MIN_RATE bytes after its headers
 * (a trickle), is timed out. */
#define PF_BODY_STALL_S 10
#define PF_BODY_MIN_RATE (64 * 1024)
/* Request body bytes buffered at once, per address and in all, in units of the largest body
 * one request may have (the server's max(max_message_bytes, API body limit)). */
#define PF_BODY_SOURCE_FACTOR 4
#define PF_BODY_TOTAL_FACTOR 16
/* Bytes held by unfinished WebSocket messages in all connections, in units of
 * max_message_bytes (one message's limit). */
#define PF_WS_MSG_TOTAL_FACTOR 4

struct pf_conn_src;

/* One accepted TCP connection, from accept to close. */
struct pf_conn {
	struct pf_conn *prev, *next; /* on the pending list while it owes headers */
	void *handle;		     /* the caller's (the server's wsi) */
	struct pf_conn_src *src;
	int64_t deadline_ms;
	bool pending;
	/* while a request body is arriving: on the body list, its reserved bytes */
	struct pf_conn *bprev, *bnext;
	size_t body_reserved;
	int64_t body_last_ms, body_deadline_ms;
	bool in_body;
	/* while a WebSocket message is reassembled: on the message list, the bytes it holds */
	struct pf_conn *mprev, *mnext;
	size_t msg_held;
	int64_t msg_start_ms, msg_last_ms;
	bool in_msg;
};

struct pf_conn_limits {
	uint32_t max_pending_per_source; /* 0: no cap */
	uint32_t header_timeout_s;
	size_t max_body_per_source, max_body_total; /* request body bytes buffered */
	struct pf_metrics *metrics; /* http_pending_rejected, http_header_timeouts */
	struct pf_conn_src *by_source[PF_CONN_SRC_BUCKETS];
	struct pf_conn *pend_head, *pend_tail;
	uint32_t n_pending;
	int64_t pending_log_ms; /* last "too many pending" log line */
	struct pf_conn *body_head;
	size_t body_total;
	int64_t body_log_ms; /* last "body budget" log line */
	size_t max_msg_total; /* WebSocket reassembly bytes in all; 0: no cap */
	struct pf_conn *msg_head;
	size_t msg_total;
	int64_t msg_log_ms; /* last "reassembly budget" log line */
};

/* At accept, before anything is read: true when the socket must be closed at once (its
 * address holds its cap of connections still sending headers while the pool is under
 * pressure). */
bool pf_conn_limits_refuse(struct pf_conn_limits *l, int fd, int64_t now_ms);
/* A new connection on socket fd, owing a request's headers from now; NULL when out of
 * memory. */
struct pf_conn *pf_conn_open(struct pf_conn_limits *l, int fd, void *handle, int64_t now_ms);
/* The connection owes (again, after a keep-alive answer) a request's headers. */
void pf_conn_expect_headers(struct pf_conn_limits *l, struct pf_conn *k, int64_t now_ms);
/* Its request's headers are complete. */
void pf_conn_headers_done(struct pf_conn_limits *l, struct pf_conn *k);
/* A request body of len bytes is owed from now: 0 (its bytes reserved, its deadlines set),
 * -EUSERS when its address holds max_body_per_source already (429), -ENOSPC when every
 * address together holds max_body_total (503). */
int pf_conn_body_begin(struct pf_conn_limits *l, struct pf_conn *k, size_t len, int64_t now_ms);
/* Bytes of the body arrived. */
void pf_conn_body_progress(struct pf_conn *k, int64_t now_ms);
/* The body is no longer buffered (handled, refused, or the connection closes): its
 * reservation is given back. Does nothing when none is held. */
void pf_conn_body_end(struct pf_conn_limits *l, struct pf_conn *k);
/* The connection is gone; k is freed. */
void pf_conn_close(struct pf_conn_limits *l, struct pf_conn *k);
/* Connections past their header deadline: taken off the list, counted, and handed to
 * expired (which closes them; they stay valid until pf_conn_close()). */
void pf_conn_limits_sweep(struct pf_conn_limits *l, int64_t now_ms, void (*expired)(void *handle));
/* Bodies past a deadline: their reservation given back, handed to expired (which answers
 * 408 and closes). */
void pf_conn_body_sweep(struct pf_conn_limits *l, int64_t now_ms, void (*expired)(void *handle));

/* The unfinished WebSocket message on k holds `held` bytes now (its buffer's allocation),
 * a fragment having just arrived: 0, or -ENOSPC when every connection's unfinished messages
 * together would pass max_msg_total (nothing is charged then; the caller closes it). The
 * first call starts the message's deadlines: it is timed out when no fragment arrives for
 * PF_BODY_STALL_S seconds, or when it is still unfinished PF_BODY_STALL_S seconds plus one
 * second per PF_BODY_MIN_RATE bytes it holds after its first fragment. */
int pf_conn_msg_hold(struct pf_conn_limits *l, struct pf_conn *k, size_t held, int64_t now_ms);
/* The message is complete or dropped: its bytes are given back. Does nothing without one. */
void pf_conn_msg_end(struct pf_conn_limits *l, struct pf_conn *k);
/* Unfinished messages past a deadline: their bytes given back (the caller frees the buffer
 * when it closes), counted, handed to expired (which closes the connection). */
void pf_conn_msg_sweep(struct pf_conn_limits *l, int64_t now_ms, void (*expired)(void *handle));

/* OpAMP WebSockets open from addr (lws' peer string). */
uint32_t pf_conn_limits_ws_open(struct pf_conn_limits *l, const char *addr);
/* One more (+1) or one fewer (-1) for addr: 0, or -ENOMEM. */
int pf_conn_limits_ws_add(struct pf_conn_limits *l, const char *addr, int delta);

/* Frees every counter (the connections are gone by then). */
void pf_conn_limits_release(struct pf_conn_limits *l);

#endif
