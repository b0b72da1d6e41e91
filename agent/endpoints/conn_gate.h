/* conn_gate.h — how much of one local HTTP listener (the metrics endpoint, the span receiver)
 * one peer address may hold: its connections still sending a request's headers, all its
 * connections, and the deadline for a request's headers.
 *
 * Owns a fixed table of the listener's AGENT_HTTP_MAX_CONNS connections, each with its peer
 * address, open time and, while it owes headers, a deadline. Every client of a local listener
 * may share one address (loopback, a node's address), so a new connection is never refused
 * for its address's sake: one of the address's connections that had its chance makes room
 * instead (one that sent part of a request and stalled, else one older than
 * AGENT_HTTP_HEADER_GRACE_MS), so a probe from the address of a client holding half-open
 * connections gets in and is not itself closed before it is read. It knows nothing
 * of libwebsockets: the server reports accepts, complete headers and closes, and closes the
 * connections it is handed.
 *
 * Not thread-safe: the listener's thread owns it. */
#ifndef AGENT_CONN_GATE_H
#define AGENT_CONN_GATE_H

#include <stdbool.h>
#include <stdint.h>

#define AGENT_HTTP_MAX_CONNS 64	 /* lws fd_limit_per_thread: the listener's socket slots */
#define AGENT_HTTP_HEADER_SLOTS 16 /* lws max_http_header_pool: requests read at once */
/* Under this many connections owing headers in all, a burst from one address is taken whole;
 * from it on, no address holds more than AGENT_HTTP_PENDING_PER_SOURCE of them. */
#define AGENT_HTTP_PENDING_PRESSURE (AGENT_HTTP_HEADER_SLOTS / 2)
#define AGENT_HTTP_PENDING_PER_SOURCE 4
#define AGENT_HTTP_CONNS_PER_SOURCE 16 /* open connections of one address, any state */
#define AGENT_HTTP_HEADER_TIMEOUT_S 5  /* from accept, and again after a keep-alive answer */
/* A connection owing headers that sent none of them yet may be closed for a newer one of its
 * address after this long (it may have been waiting for a header slot until now). */
#define AGENT_HTTP_HEADER_GRACE_MS 1000

struct agent_conn {
	void *handle; /* the server's (its wsi) */
	int64_t opened_ms;
	int64_t deadline_ms; /* while pending */
	bool used;
	bool pending; /* owes a request's headers */
	char addr[48];
};

struct agent_conn_gate {
	struct agent_conn conns[AGENT_HTTP_MAX_CONNS];
	uint32_t n_pending;
	uint64_t evicted;	  /* closed to make room for a newer one of their address */
	uint64_t header_timeouts; /* closed at their header deadline */
	int64_t log_ms;		  /* last "making room" log line */
};

/* Whether the connection handle has sent part of a request's headers (and so had its
 * chance to send the rest). */
typedef bool (*agent_conn_started_fn)(void *handle);

/* A new connection from addr, owing a request's headers from now; NULL when every slot is
 * taken (close it). *evict is set to the handle of a connection of the same address to close
 * now (taken off the pending list; it stays in its slot until agent_conn_close()) when addr
 * already holds a cap, NULL otherwise: for the pending cap, its oldest pending connection
 * that started (started()), else its oldest pending one past the grace, else none (the new
 * one is taken over the cap); for the open cap, its oldest connection. */
struct agent_conn *agent_conn_open(struct agent_conn_gate *g, const char *addr, void *handle,
				   int64_t now_ms, agent_conn_started_fn started, void **evict);
/* k owes (again, after a keep-alive answer) a request's headers. */
void agent_conn_expect_headers(struct agent_conn_gate *g, struct agent_conn *k, int64_t now_ms);
/* k's request's headers are complete. */
void agent_conn_headers_done(struct agent_conn_gate *g, struct agent_conn *k);
/* k is gone: its slot is free. */
void agent_conn_close(struct agent_conn_gate *g, struct agent_conn *k);
/* Connections past their header deadline: taken off the pending list, counted, and handed to
 * expired(handle) (which closes them). */
void agent_conn_sweep(struct agent_conn_gate *g, int64_t now_ms, void (*expired)(void *handle));

#endif
