/* http_server.h — the agent's small local HTTP servers (the metrics endpoint, the span
 * receiver): one libwebsockets context (lws 4.1.6) with one vhost bound exactly to one address
 * (an IPv4 address gets no `::` socket: IPv6 is disabled on its vhost), served by one thread of
 * its own; and the writer of one buffered answer per HTTP transaction.
 *
 * Owns the context's lifecycle (bind check with the reason, context, thread, stop) and the
 * answer's wire form (status, Content-Type, Content-Length, optional Allow, Connection: close
 * when asked, the body in chunks of AGENT_HTTP_CHUNK), and each connection's place in its
 * listener's per-address caps and header deadline (conn_gate.h), kept by a callback in front
 * of the caller's. The protocols, and so what is answered, belong to the caller;
 * agent_http_user() of a wsi is the caller's user pointer. */
#ifndef AGENT_HTTP_SERVER_H
#define AGENT_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include <libwebsockets.h>

#include "endpoints/listen_addr.h"
#include "pf/buf.h"
#include "pf/error.h"

#define AGENT_HTTP_CHUNK 16384

struct agent_http_server;

/* Checks that l can be bound (err: "<key>: cannot listen on ADDR: <reason>"), then creates the
 * context with protocols (at most 4; kept by the caller while the server lives) and user
 * (agent_http_user). Not serving until _start(). NULL + errno. */
struct agent_http_server *agent_http_server_new(const struct agent_listen_addr *l,
						const char *vhost_name,
						const struct lws_protocols *protocols, void *user,
						const char *key, struct pf_error *err);
/* The user pointer given to agent_http_server_new(), from any callback's wsi. */
void *agent_http_user(struct lws *wsi);
/* Starts the serving thread. 0 or -errno with err. */
int agent_http_server_start(struct agent_http_server *s, struct pf_error *err);
/* The bound port (the real one when 0 was asked). */
int agent_http_server_port(const struct agent_http_server *s);
/* "ADDR:PORT" as configured, for logs. */
const char *agent_http_server_where(const struct agent_http_server *s);
/* Stops the thread (no callback runs after it returns) and closes the socket. NULL is ok. */
void agent_http_server_free(struct agent_http_server *s);

/* One answer; zero it, then agent_http_answer_init() before filling resp after LWS_PRE. */
struct agent_http_answer {
	struct pf_buf resp; /* LWS_PRE headroom, then the body */
	int status;
	const char *ctype; /* NULL: text/plain */
	const char *allow; /* Allow: header value (405), NULL: none */
	bool close_after;  /* Connection: close, and close once written */
	bool ready;	   /* complete: write when writeable */
	bool headers_sent;
	size_t off; /* body bytes written */
};

/* Sets up resp with the headroom (max: the body's cap). 0 or -ENOMEM. */
int agent_http_answer_init(struct agent_http_answer *a, size_t max);
void agent_http_answer_release(struct agent_http_answer *a);
/* Body text (replacing any), status and text/plain; marks it ready and asks for WRITEABLE. */
void agent_http_answer_text(struct lws *wsi, struct agent_http_answer *a, int status,
			    const char *body);
/* From LWS_CALLBACK_HTTP_WRITEABLE: one lws_write(). 0: more to write, 1: the transaction is
 * done (release the answer; close when close_after or lws_http_transaction_completed()),
 * -1: close. */
int agent_http_answer_write(struct lws *wsi, struct agent_http_answer *a);
/* The whole of LWS_CALLBACK_HTTP_WRITEABLE: agent_http_answer_write(); once the answer is all
 * written, done(ctx) releases the transaction's state (the answer included), and the
 * connection closes when the answer asked for it or the transaction cannot be completed.
 * Returns the callback's return value. */
int agent_http_answer_writeable(struct lws *wsi, struct agent_http_answer *a,
				void (*done)(void *ctx), void *ctx);

/* Whether header t contains needle (case-insensitive). */
bool agent_http_header_has(struct lws *wsi, enum lws_token_indexes t, const char *needle);

#endif
