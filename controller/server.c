/* server.c — see server.h. */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <libwebsockets.h>
#include <uv.h>

#include "api/api.h"
#include "api/api_profiles.h"
#include "fleet/capture.h"
#include "fleet/fleet.h"
#include "fleet/persist.h"
#include "fleet/rollout.h"
#include "fleet/sync.h"
#include "metrics.h"
#include "opamp/session.h"
#include "opamp_codec.h"
#include "pf/gzip.h"
#include "pf/log.h"
#include "profstore/profstore.h"
#include "profstore/query_pool.h"
#include "tls.h"
#include "store.h"
#include "ui/static.h"

#define OPAMP_PATH "/v1/opamp"
#define PROFILES_PATH "/v1development/profiles" /* OTLP/HTTP profiles receiver */
#define PERSIST_INTERVAL_US (500 * LWS_US_PER_MS)
#define PERSIST_MAX_ROWS 20000
#define REPLICA_BEAT_MAX_MS 5000 /* replicas sharing PostgreSQL: heartbeat at least this often */
#define HTTP_CHUNK 65536
#define RETRY_AFTER_OVERLOAD_S "30"
#define RETRY_AFTER_QUERY_S "1" /* a pool's queue is full; a merged query takes ~0.3 s */
#define QUERY_CONN_TIMEOUT_S 300 /* bound on a connection waiting on a pool (queue + run) */
#define API_GZIP_MIN 1024 /* smaller JSON answers go as they are */
#define REQ_HEADERS PF_UI_MAX_HEADERS /* extra response headers: the console's are the most */

#define SRC_BUCKETS 1024

/* One peer address: its open OpAMP WebSockets (the per-source cap, keyed by lws' peer
 * string) or its connections still sending request headers (keyed by the accepted socket's
 * address, see peer_of_fd). Freed when both counts are 0 and no struct conn points to it. */
struct src_count {
	struct src_count *next;
	uint32_t n;
	uint32_t pending;
	uint32_t refs; /* struct conn pointing here */
	char addr[64];
};

/* A TCP connection from accept to close (lws' opaque user data of its wsi). While it is still
 * sending a request's headers it is counted in its address's `pending` and sits on the
 * server's deadline list, oldest first (every deadline is "now + header_timeout_s" when
 * set, so appending keeps the order and the sweep stops at the first one not yet due). */
struct conn {
	struct conn *prev, *next;
	struct lws *wsi;
	struct src_count *src;
	int64_t deadline_ms;
	bool pending;
};
#define HEADER_SWEEP_US (250 * LWS_US_PER_MS)
#define HEADER_POOL 256 /* lws max_http_header_pool: connections reading headers at once */
/* The per-address cap on connections still sending headers applies once this many are
 * pending in all: below it a burst from one address (agents behind one NAT reconnecting
 * together) is taken whole; above it no address holds more than its cap, so at least
 * HEADER_POOL - PENDING_PRESSURE header slots stay for everyone else. */
#define PENDING_PRESSURE (HEADER_POOL / 2)
#define LOOP_CLOSE_ROUNDS 1000 /* loop iterations to let closing handles finish at shutdown */

/* One queued WebSocket message: one allocation, LWS_PRE headroom then the frame. */
struct outmsg {
	struct outmsg *next;
	size_t len; /* bytes after the headroom */
	uint8_t data[];
};

struct ws_conn {
	struct pf_opamp_session sess;
	struct lws *wsi;
	struct ws_conn *prev, *next; /* every open OpAMP WebSocket (server's ws_head) */
	char token_id[17];           /* the agent token it authenticated with */
	char peer[64];               /* counted in by_source */
	int64_t token_expires_ms;    /* 0: never */
	bool closing;
	struct outmsg *out_head, *out_tail;
	size_t out_bytes; /* queued in out_head.., bounded by max_send_queue_bytes */
	struct pf_buf rx;
	bool rx_text;
};

struct http_req {
	char method[8];
	char path[512];
	char args_store[2048];
	size_t n_args;
	const char *args[PF_API_MAX_ARGS];
	char auth[1024];
	bool has_auth;
	char peer[64]; /* the client's address (audit) */
	bool body_gzip, accept_gzip;
	bool bad_encoding; /* a Content-Encoding other than identity (or gzip where taken) */
	bool is_opamp;
	bool is_profiles;
	bool is_ui;
	char inm[128];      /* If-None-Match (console files) */
	char ctype_in[128]; /* request Content-Type (profiles receiver) */
	bool dispatched;
	bool body_done; /* the last byte of the answer went to lws */
	bool too_large;
	size_t limit;
	struct pf_buf body;
	/* response */
	int status;
	const char *ctype;
	char hname[REQ_HEADERS][32];
	char hval[REQ_HEADERS][320];
	uint8_t *resp; /* LWS_PRE headroom + body */
	size_t resp_len, resp_off;
	bool headers_sent;
	bool close_after;
	uint64_t job; /* a pool's handle while the answer is computed there, else 0 */
	struct pf_qpool *job_pool;
};

struct pss {
	struct http_req *req;
	struct ws_conn *ws;
};

struct pf_server {
	struct pf_server_options opt;
	/* The one event loop (libuv: epoll underneath, so a wake-up costs O(ready descriptors)).
	 * lws joins it as a foreign loop; the signal watchers live on it too. */
	uv_loop_t loop;
	bool loop_init;
	uv_signal_t sig_int, sig_term, sig_hup;
	bool sig_init;
	struct lws_context *ctx; /* NULL again once lws finished destroying it (pcontext) */
	struct lws_vhost *vh;
	struct lws_vhost *agent_vh; /* the mTLS agent listener, or NULL */
	void *ssl_ctx[2];	    /* the listeners' SSL_CTXs (lws owns them) */
	int n_ssl_ctx;
	volatile sig_atomic_t reload_tls;
	struct pf_fleet *fleet;
	struct pf_store *store;
	struct pf_persist *persist;
	struct pf_metrics *metrics;
	struct pf_api *api;
	struct pf_opamp_ctx opamp;
	lws_sorted_usec_list_t sul_persist;
	lws_sorted_usec_list_t sul_headers; /* the header deadline sweep */
	struct conn *pend_head, *pend_tail;  /* connections still sending headers */
	uint32_t n_pending;
	int64_t pending_log_ms;              /* last "too many pending" log line */
	struct pf_buf scratch; /* replies are encoded here, then copied into one outmsg */
	volatile sig_atomic_t stop;
	size_t n_ws;
	struct ws_conn *ws_head;
	int64_t next_expiry_ms; /* earliest token expiry of an open WebSocket, 0: none */
	int64_t beat_ms;        /* last replica heartbeat (replica_beat), 0: none yet */
	bool beat_ok;           /* one heartbeat has succeeded */
	struct src_count *by_source[SRC_BUCKETS]; /* open OpAMP WebSockets per peer address */
	struct pf_qpool *pool; /* heavy profile queries, or NULL */
	struct pf_qpool *ingest; /* the OTLP receiver's writer, or NULL */
	uint64_t next_job;
	/* Replicas sharing PostgreSQL: the LISTEN connection, watched on the loop, and one timer
	 * that re-makes it with backoff and adopts rollouts whose replica died. */
	struct pf_store_listener *listener;
	uv_poll_t *lpoll; /* NULL while not connected */
	int lpoll_fd;
	uv_timer_t ltimer;
	bool ltimer_init;
	uint64_t lbackoff_ms;
	bool lwarned;        /* the outage was logged (once, until the database is back) */
	bool listen_started; /* LISTEN was in effect once: later ones follow an outage */
	bool need_reload;    /* the listener was re-made: reload what may have been missed */
	struct pf_sync sync;
};

/* A request handed to a pool (profstore/query_pool.h) and, filled on the worker, its answer
 * with LWS_PRE headroom, so the loop only moves pointers. */
struct srv_job {
	struct pf_qjob base;
	/* Loop side only: valid while the pool has not been told to forget base.handle, which
	 * req_free() does before the request (or its connection) goes away. */
	struct http_req *req;
	struct lws *wsi;
	char path[512]; /* for logs */
	bool api; /* counted in the API metrics */
	/* answer */
	int status;
	const char *ctype;
	char hname[32];
	char hval[160];
	uint8_t *resp;
	size_t resp_len;
	char note[256]; /* logged by the loop */
};

/* An API request for the query pool: a copy (the connection may go away while it runs). */
struct api_job {
	struct srv_job sj;
	char method[8];
	char args_store[2048];
	size_t n_args;
	size_t arg_off[PF_API_MAX_ARGS];
	char auth[1024];
	bool has_auth;
	char peer[64];
	int64_t now_ms;
};

/* An OTLP request for the receiver's writer; the body is moved from the request. */
struct ingest_job {
	struct srv_job sj;
	struct pf_buf body;
	bool gzip;
	char ctype_in[128];
	size_t max_bytes;
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct pf_server *server_of(struct lws *wsi)
{
	return lws_context_user(lws_get_context(wsi));
}

/* ------------------------------------------------------------------ output */

/* The shared encode buffer, reset to LWS_PRE headroom + the WebSocket varint header. It
 * lives as long as the server, so replies cost no buffer growth; after an unusually large
 * message its memory is given back. */
static struct pf_buf *scratch_frame(struct pf_server *s)
{
	if (s->scratch.cap > ((size_t)1 << 20)) {
		pf_buf_release(&s->scratch);
		s->scratch.max = 0;
	}
	if (!s->scratch.max)
		pf_buf_init(&s->scratch, s->opt.max_message_bytes + LWS_PRE + 16);
	pf_buf_reset(&s->scratch);
	static const uint8_t pre[LWS_PRE];
	if (pf_buf_append(&s->scratch, pre, LWS_PRE) < 0 ||
	    pf_opamp_ws_frame_header(&s->scratch) < 0)
		return NULL;
	return &s->scratch;
}

static void ws_kill(struct ws_conn *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Copies the frame (headroom included) into one queued message. A connection whose queue
 * would pass max_send_queue_bytes is closed instead (-ENOBUFS): its reader does not keep up,
 * and holding more for it would let one peer grow the controller without bound. */
static int ws_enqueue(struct ws_conn *c, const struct pf_buf *frame)
{
	struct pf_server *s = lws_context_user(lws_get_context(c->wsi));
	size_t len = frame->len - LWS_PRE;
	if (c->out_head && c->out_bytes + len > s->opt.max_send_queue_bytes) {
		s->metrics->opamp_slow_readers_closed++;
		ws_kill(c, "slow reader: %zu bytes already queued, a %zu-byte message would pass "
			   "opamp.max_send_queue_bytes (%zu)",
			c->out_bytes, len, s->opt.max_send_queue_bytes);
		return -ENOBUFS;
	}
	struct outmsg *m = malloc(sizeof(*m) + frame->len);
	if (!m)
		return -ENOMEM;
	memcpy(m->data, frame->data, frame->len);
	m->len = frame->len - LWS_PRE;
	m->next = NULL;
	if (c->out_tail)
		c->out_tail->next = m;
	else
		c->out_head = m;
	c->out_tail = m;
	c->out_bytes += len;
	lws_callback_on_writable(c->wsi);
	return 0;
}

/* A message for an agent: written at once when nothing is queued before it, else queued for
 * WRITEABLE. Used for the reply from the connection's own RECEIVE callback and for config
 * pushes (from the API request that changed the config). An exception to "write only from
 * WRITEABLE", and the reason is cost: asking for WRITEABLE arms POLLOUT and disarms it after
 * the write, two changes of the descriptor's epoll interest (libuv: a DEL and an ADD each) per
 * message, more than the recv() and send() themselves (a push to 15,000 agents: 60,000
 * epoll_ctl calls). It is safe on these plain (HTTP/1 upgraded) WebSocket connections because
 * lws_write() never blocks: what the socket does not take, lws keeps (one message at most,
 * since lws_partial_buffered() sends every later one to our queue) and sends before calling
 * WRITEABLE again. Returns a negative errno when the connection must close. */
static int ws_send(struct ws_conn *c, const struct pf_buf *frame)
{
	if (c->closing)
		return -ECONNRESET;
	if (c->out_head || lws_partial_buffered(c->wsi))
		return ws_enqueue(c, frame);
	if (lws_write(c->wsi, frame->data + LWS_PRE, frame->len - LWS_PRE, LWS_WRITE_BINARY) < 0)
		return -EIO;
	return 0;
}

static void ws_conn_free(struct ws_conn *c)
{
	while (c->out_head) {
		struct outmsg *m = c->out_head;
		c->out_head = m->next;
		free(m);
	}
	pf_buf_release(&c->rx);
	free(c);
}

static void push_hook(struct pf_agent *a, void *ud)
{
	struct pf_server *s = ud;
	struct ws_conn *c = a->conn;
	if (!c || a->transport != PF_TRANSPORT_WS)
		return; /* plain-HTTP agents get it on their next poll */
	struct pf_buf *frame = scratch_frame(s);
	if (frame && pf_opamp_build_push(&s->opamp, &c->sess, a, frame) == 0 &&
	    ws_send(c, frame) < 0)
		lws_set_timeout(c->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC); /* dead socket */
}

/* Capture messages (fleet/capture.h): a server-initiated ServerToAgent with one custom
 * message, queued on the agent's WebSocket. Encoded in its own buffer: this may run while a
 * reply is being encoded in the scratch frame. Plain-HTTP agents get it in their next reply. */
static int send_custom(struct pf_agent *a, const char *type, const uint8_t *data, size_t len,
		       void *ud)
{
	struct pf_server *s = ud;
	struct ws_conn *c = a->conn;
	if (!c || a->transport != PF_TRANSPORT_WS)
		return -EAGAIN;
	struct pf_s2a m = {0};
	memcpy(m.instance_uid, a->uid, 16);
	m.instance_uid_len = 16;
	m.capabilities = pf_opamp_server_caps();
	m.has_custom_message = true;
	m.custom_message.capability = (char *)PF_CAPTURE_CAPABILITY;
	m.custom_message.type = (char *)type;
	m.custom_message.data = (uint8_t *)data;
	m.custom_message.data_len = len;
	struct pf_buf frame;
	pf_buf_init(&frame, s->opt.max_message_bytes + LWS_PRE + 16);
	static const uint8_t pre[LWS_PRE];
	int rc = pf_buf_append(&frame, pre, LWS_PRE);
	if (rc == 0)
		rc = pf_opamp_ws_frame_header(&frame);
	if (rc == 0)
		rc = pf_s2a_encode(&m, &frame);
	if (rc == 0)
		rc = ws_enqueue(c, &frame);
	if (rc == 0)
		s->metrics->opamp_messages_out++;
	pf_buf_release(&frame);
	return rc;
}

/* ------------------------------------------------------------------ HTTP */

static void req_free(struct pf_server *s, struct http_req *r)
{
	if (!r)
		return;
	if (r->job) {
		/* The client went away while its job waits or runs: it completes and is
		 * dropped, never delivered here. */
		pf_log_debug("%s: connection closed before its answer; dropping it", r->path);
		pf_qpool_forget(r->job_pool, r->job);
	}
	pf_buf_release(&r->body);
	free(r->resp);
	free(r);
}

static void req_set_response(struct http_req *r, int status, const char *ctype,
			     const uint8_t *body, size_t len)
{
	r->status = status;
	r->ctype = ctype;
	free(r->resp);
	r->resp = malloc(LWS_PRE + len + 1);
	r->resp_len = r->resp ? len : 0;
	r->resp_off = 0;
	if (r->resp && len)
		memcpy(r->resp + LWS_PRE, body, len);
	if (!r->resp)
		r->status = 500;
}

static void req_set_header(struct http_req *r, const char *name, const char *value)
{
	for (int i = 0; i < REQ_HEADERS; i++) {
		if (!r->hname[i][0]) {
			snprintf(r->hname[i], sizeof(r->hname[i]), "%s", name);
			snprintf(r->hval[i], sizeof(r->hval[i]), "%s", value);
			return;
		}
	}
}

static void req_error(struct http_req *r, int status, const char *code, const char *msg)
{
	struct pf_api_response resp;
	pf_api_response_init(&resp);
	pf_api_error(&resp, status, code, "%s", msg);
	req_set_response(r, status, "application/json", resp.body.data, resp.body.len);
	pf_api_response_release(&resp);
}

/* Writes a whole small response at once: only for rejecting an upgrade, where lws expects
 * the headers to have been sent by the time the callback returns. */
static int write_now(struct lws *wsi, int status, const char *extra_name, const char *extra_val,
		     const char *msg)
{
	uint8_t buf[LWS_PRE + 1024];
	uint8_t *start = buf + LWS_PRE, *p = start, *end = buf + sizeof(buf) - 1;
	char body[256];
	int n = snprintf(body, sizeof(body), "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n",
			 status == 401 ? "unauthenticated"
			 : status == 503 ? "unavailable"
					 : "rejected",
			 msg);
	if (n < 0)
		return -1;
	if (lws_add_http_common_headers(wsi, (unsigned int)status, "application/json",
					(lws_filepos_t)n, &p, end))
		return -1;
	if (extra_name && lws_add_http_header_by_name(wsi, (const unsigned char *)extra_name,
						      (const unsigned char *)extra_val,
						      (int)strlen(extra_val), &p, end))
		return -1;
	if (lws_add_http_header_by_name(wsi, (const unsigned char *)"connection:",
					(const unsigned char *)"close", 5, &p, end))
		return -1;
	if (lws_finalize_http_header(wsi, &p, end))
		return -1;
	if ((size_t)(end - p) < (size_t)n)
		return -1;
	memcpy(p, body, (size_t)n);
	p += n;
	if (lws_write(wsi, start, (size_t)(p - start), LWS_WRITE_HTTP_FINAL) < 0)
		return -1;
	return 0;
}

static const char *method_of(struct lws *wsi)
{
	if (lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI))
		return "GET";
	if (lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI))
		return "POST";
	if (lws_hdr_total_length(wsi, WSI_TOKEN_PUT_URI))
		return "PUT";
	if (lws_hdr_total_length(wsi, WSI_TOKEN_DELETE_URI))
		return "DELETE";
	if (lws_hdr_total_length(wsi, WSI_TOKEN_PATCH_URI))
		return "PATCH";
	if (lws_hdr_total_length(wsi, WSI_TOKEN_OPTIONS_URI))
		return "OPTIONS";
	if (lws_hdr_total_length(wsi, WSI_TOKEN_HEAD_URI))
		return "HEAD";
	return "OTHER";
}

static bool header_has(struct lws *wsi, enum lws_token_indexes t, const char *needle)
{
	char v[256];
	if (lws_hdr_copy(wsi, v, sizeof(v), t) <= 0)
		return false;
	return strcasestr(v, needle) != NULL;
}

/* An agent token valid now; *who (may be NULL) receives it. */
static bool agent_token_who(struct pf_server *s, const char *auth, struct pf_api_caller *who)
{
	struct pf_api_caller c;
	if (pf_api_authenticate(s->store, auth, now_ms(), &c) < 0 || c.role != PF_ROLE_AGENT)
		return false;
	if (who)
		*who = c;
	return true;
}

static bool agent_token_ok(struct pf_server *s, const char *auth)
{
	return agent_token_who(s, auth, NULL);
}

static struct src_count **src_slot(struct pf_server *s, const char *addr)
{
	uint32_t h = 2166136261u;
	for (const char *p = addr; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	struct src_count **pp = &s->by_source[h % SRC_BUCKETS];
	while (*pp && strcmp((*pp)->addr, addr) != 0)
		pp = &(*pp)->next;
	return pp;
}

static uint32_t src_open(struct pf_server *s, const char *addr)
{
	struct src_count *c = *src_slot(s, addr);
	return c ? c->n : 0;
}

/* +1 or -1 for addr; 0, or -ENOMEM. */
static int src_add(struct pf_server *s, const char *addr, int delta)
{
	struct src_count **pp = src_slot(s, addr);
	if (!*pp) {
		if (delta < 0)
			return 0;
		*pp = calloc(1, sizeof(**pp));
		if (!*pp)
			return -ENOMEM;
		snprintf((*pp)->addr, sizeof((*pp)->addr), "%s", addr);
	}
	(*pp)->n = (uint32_t)((int64_t)(*pp)->n + delta);
	if ((*pp)->n == 0 && (*pp)->pending == 0 && (*pp)->refs == 0) {
		struct src_count *dead = *pp;
		*pp = dead->next;
		free(dead);
	}
	return 0;
}

/* Closes the OpAMP WebSocket at once (from outside its callbacks). */
static void ws_kill(struct ws_conn *c, const char *fmt, ...)
{
	if (c->closing)
		return;
	c->closing = true;
	char why[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	pf_log_info("opamp: closing a connection from %s (token %s): %s", c->peer, c->token_id,
		    why);
	lws_set_timeout(c->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
}

/* ---------------------------------------------------------------- connections */

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

static void pend_unlink(struct pf_server *s, struct conn *k)
{
	if (!k->pending)
		return;
	k->pending = false;
	if (k->prev)
		k->prev->next = k->next;
	else
		s->pend_head = k->next;
	if (k->next)
		k->next->prev = k->prev;
	else
		s->pend_tail = k->prev;
	k->prev = k->next = NULL;
	s->n_pending--;
	if (k->src && k->src->pending)
		k->src->pending--;
}

/* The connection now owes (again) a request's headers by header_timeout_s from now. */
static void pend_arm(struct pf_server *s, struct conn *k, int64_t now)
{
	pend_unlink(s, k);
	k->pending = true;
	k->deadline_ms = now + (int64_t)s->opt.header_timeout_s * 1000;
	k->prev = s->pend_tail;
	k->next = NULL;
	if (s->pend_tail)
		s->pend_tail->next = k;
	else
		s->pend_head = k;
	s->pend_tail = k;
	s->n_pending++;
	if (k->src)
		k->src->pending++;
}

/* FILTER_NETWORK_CONNECTION: nonzero closes the accepted socket at once. */
static int conn_filter(struct pf_server *s, int fd)
{
	if (!s->opt.max_pending_per_source || s->n_pending < PENDING_PRESSURE)
		return 0;
	char peer[64];
	peer_of_fd(fd, peer, sizeof(peer));
	struct src_count *src = *src_slot(s, peer);
	if (!src || src->pending < s->opt.max_pending_per_source)
		return 0;
	s->metrics->http_pending_rejected++;
	int64_t now = now_ms();
	if (now - s->pending_log_ms >= 10000) {
		s->pending_log_ms = now;
		pf_log_warn("closing new connections from %s: %u of its connections are still "
			    "sending request headers (http.max_pending_per_source)",
			    peer, src->pending);
	}
	return 1;
}

/* SERVER_NEW_CLIENT_INSTANTIATED: track the connection until WSI_DESTROY. */
static int conn_new(struct pf_server *s, struct lws *wsi)
{
	struct conn *k = calloc(1, sizeof(*k));
	if (!k)
		return -1;
	char peer[64];
	peer_of_fd((int)lws_get_socket_fd(wsi), peer, sizeof(peer));
	struct src_count **pp = src_slot(s, peer);
	if (!*pp) {
		*pp = calloc(1, sizeof(**pp));
		if (!*pp) {
			free(k);
			return -1;
		}
		snprintf((*pp)->addr, sizeof((*pp)->addr), "%s", peer);
	}
	k->wsi = wsi;
	k->src = *pp;
	k->src->refs++;
	pend_arm(s, k, now_ms());
	lws_set_opaque_user_data(wsi, k);
	return 0;
}

/* A request's headers are complete. */
static void conn_headers_done(struct pf_server *s, struct lws *wsi)
{
	struct conn *k = lws_get_opaque_user_data(wsi);
	if (k)
		pend_unlink(s, k);
}

static void conn_gone(struct pf_server *s, struct lws *wsi)
{
	struct conn *k = lws_get_opaque_user_data(wsi);
	if (!k)
		return;
	lws_set_opaque_user_data(wsi, NULL);
	pend_unlink(s, k);
	if (k->src) {
		k->src->refs--;
		src_add(s, k->src->addr, 0); /* frees the entry when nothing counts in it */
	}
	free(k);
}

/* Every HEADER_SWEEP_US: connections past their header deadline are closed. */
static void header_sweep(lws_sorted_usec_list_t *sul)
{
	struct pf_server *s = lws_container_of(sul, struct pf_server, sul_headers);
	int64_t now = now_ms();
	while (s->pend_head && s->pend_head->deadline_ms <= now) {
		struct conn *k = s->pend_head;
		pend_unlink(s, k);
		s->metrics->http_header_timeouts++;
		pf_log_debug("closing a connection from %s: no complete request headers in %u s",
			     k->src ? k->src->addr : "?", s->opt.header_timeout_s);
		lws_set_timeout(k->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
	}
	lws_sul_schedule(s->ctx, 0, &s->sul_headers, header_sweep, HEADER_SWEEP_US);
}

/* api->on_revoke: the OpAMP connections that authenticated with the token go away now. */
static void revoke_hook(const char *token_id, void *ud)
{
	struct pf_server *s = ud;
	for (struct ws_conn *c = s->ws_head; c; c = c->next)
		if (strcmp(c->token_id, token_id) == 0)
			ws_kill(c, "token revoked");
}

/* Every persist tick: connections whose token has expired go away. The connections are walked
 * only once the earliest expiry is due (a fleet on tokens that never expire costs nothing),
 * and the walk finds the next one. */
static void ws_expire(struct pf_server *s, int64_t now)
{
	if (!s->next_expiry_ms || now < s->next_expiry_ms)
		return;
	int64_t next = 0;
	for (struct ws_conn *c = s->ws_head; c; c = c->next) {
		if (!c->token_expires_ms || c->closing)
			continue;
		if (now >= c->token_expires_ms)
			ws_kill(c, "token expired");
		else if (!next || c->token_expires_ms < next)
			next = c->token_expires_ms;
	}
	s->next_expiry_ms = next;
}

static void dispatch_opamp_http(struct pf_server *s, struct http_req *r)
{
	if (strcmp(r->method, "POST") != 0) {
		req_error(r, 405, "method_not_allowed",
			  "OpAMP over plain HTTP takes POST; WebSocket clients send an Upgrade");
		req_set_header(r, "allow:", "POST");
		return;
	}
	if (!agent_token_ok(s, r->has_auth ? r->auth : NULL)) {
		s->metrics->opamp_connections_rejected_auth++;
		req_error(r, 401, "unauthenticated", "agent token missing or rejected");
		req_set_header(r, "www-authenticate:", "Bearer realm=\"profleet\"");
		return;
	}
	if (r->bad_encoding) {
		req_error(r, 415, "unsupported_encoding", "Content-Encoding must be gzip or identity");
		return;
	}
	if (r->too_large) {
		s->metrics->opamp_oversize_rejected++;
		req_error(r, 413, "too_large", "OpAMP message over the inbound size limit");
		r->close_after = true;
		return;
	}
	const uint8_t *data = r->body.data;
	size_t len = r->body.len;
	struct pf_buf plain;
	pf_buf_init(&plain, s->opt.max_message_bytes);
	if (r->body_gzip) {
		int z = pf_gzip_decompress(r->body.data, r->body.len, s->opt.max_message_bytes,
					   &plain);
		if (z == -E2BIG) {
			s->metrics->opamp_oversize_rejected++;
			req_error(r, 413, "too_large",
				  "OpAMP message over the inbound size limit after decompression");
			pf_buf_release(&plain);
			return;
		}
		if (z < 0) {
			req_error(r, 400, "malformed", "body is not valid gzip");
			pf_buf_release(&plain);
			return;
		}
		data = plain.data;
		len = plain.len;
	}
	struct pf_opamp_session sess = {.http = true};
	struct pf_opamp_result res;
	struct pf_buf out;
	pf_buf_init(&out, s->opt.max_message_bytes);
	int e = pf_opamp_session_handle(&s->opamp, &sess, data ? data : (const uint8_t *)"", len,
					now_ms(), &out, &res);
	pf_buf_release(&plain);
	if (e < 0) {
		req_error(r, 500, "internal", "could not encode the reply");
		pf_buf_release(&out);
		return;
	}
	if (r->accept_gzip) {
		struct pf_buf z;
		pf_buf_init(&z, s->opt.max_message_bytes + 1024);
		if (pf_gzip_compress(out.data, out.len, 6, &z) == 0) {
			req_set_response(r, 200, "application/x-protobuf", z.data, z.len);
			req_set_header(r, "content-encoding:", "gzip");
			pf_buf_release(&z);
			pf_buf_release(&out);
			return;
		}
		pf_buf_release(&z);
	}
	req_set_response(r, 200, "application/x-protobuf", out.data, out.len);
	pf_buf_release(&out);
}

/* OTLP error answers carry a google.rpc.Status (OTLP/HTTP "Failures"). */
static void otlp_error(struct http_req *r, int status, int32_t rpc_code, const char *msg)
{
	struct pf_buf b;
	pf_buf_init(&b, 4096);
	pf_profstore_encode_status(rpc_code, msg, &b);
	req_set_response(r, status, "application/x-protobuf", b.data, b.len);
	pf_buf_release(&b);
}

/* The API's extra header name in the lower case lws wants ("Allow:" -> "allow:"). */
static void header_lower(const char *name, char *out, size_t len)
{
	size_t i;
	for (i = 0; name[i] && i < len - 1; i++)
		out[i] = (char)(name[i] | 0x20);
	out[i] = 0;
}

/* ---- Work off the loop (profstore/query_pool.h): heavy profile queries on the query pool,
 * OTLP ingest on the receiver's writer. */

static void srv_job_free(struct pf_qjob *b)
{
	struct srv_job *j = lws_container_of(b, struct srv_job, base);
	free(j->resp);
	free(j);
}

static void ingest_job_free(struct pf_qjob *b)
{
	struct ingest_job *j = lws_container_of(b, struct ingest_job, sj.base);
	pf_buf_release(&j->body);
	free(j->sj.resp);
	free(j);
}

/* On a worker: the answer body with LWS_PRE headroom, so the loop only moves a pointer. */
static void srv_job_answer(struct srv_job *j, int status, const char *ctype, const uint8_t *body,
			   size_t len)
{
	j->status = status;
	j->ctype = ctype; /* string literals */
	j->resp = malloc(LWS_PRE + len + 1);
	if (j->resp) {
		if (len)
			memcpy(j->resp + LWS_PRE, body, len);
		j->resp_len = len;
	} else {
		j->status = 500;
	}
}

/* On a query worker, with its read-only connection: the same pf_api_handle() the loop would
 * call, over a struct pf_api that has only the store (the offloaded routes use no more). */
static void api_job_run(struct pf_qjob *b, struct pf_store *st)
{
	struct api_job *j = lws_container_of(b, struct api_job, sj.base);
	struct pf_api wapi = {.store = st, .ready = true, .read_only = true};
	struct pf_api_request q = {
		.method = j->method,
		.path = j->sj.path,
		.n_args = j->n_args,
		.authorization = j->has_auth ? j->auth : NULL,
		.peer = j->peer,
		.now_ms = j->now_ms,
	};
	for (size_t i = 0; i < j->n_args; i++)
		q.args[i] = j->args_store + j->arg_off[i];
	struct pf_api_response resp;
	pf_api_response_init(&resp);
	if (st)
		pf_api_handle(&wapi, &q, &resp);
	else
		pf_api_error(&resp, 503, "unavailable", "no query connection");
	if (resp.extra_header_name[0]) {
		header_lower(resp.extra_header_name, j->sj.hname, sizeof(j->sj.hname));
		snprintf(j->sj.hval, sizeof(j->sj.hval), "%s", resp.extra_header_value);
	}
	srv_job_answer(&j->sj, resp.status, resp.content_type, resp.body.data, resp.body.len);
	pf_api_response_release(&resp);
}

/* On the receiver's writer, with its synchronous=FULL connection (retention set). */
static void ingest_job_run(struct pf_qjob *b, struct pf_store *st)
{
	struct ingest_job *j = lws_container_of(b, struct ingest_job, sj.base);
	struct pf_profstore_request q = {
		.body = j->body.data,
		.len = j->body.len,
		.gzip = j->gzip,
		.content_type = j->ctype_in[0] ? j->ctype_in : NULL,
		.max_bytes = j->max_bytes,
		.now_ms = now_ms(),
	};
	struct pf_profstore_result res = {0};
	struct pf_buf out;
	pf_buf_init(&out, 1 << 20);
	if (!st) {
		pf_profstore_encode_status(14 /* UNAVAILABLE */, "no store connection", &out);
		srv_job_answer(&j->sj, 503, "application/x-protobuf", out.data, out.len);
	} else if (pf_profstore_ingest(st, &q, &res, &out) < 0) {
		srv_job_answer(&j->sj, 500, "application/x-protobuf", NULL, 0);
	} else {
		srv_job_answer(&j->sj, res.status, "application/x-protobuf", out.data, out.len);
		if (res.status != 200)
			snprintf(j->sj.note, sizeof(j->sj.note), "%s", res.message);
	}
	pf_buf_release(&out);
	pf_buf_release(&j->body); /* early: the answer may wait for the loop */
}

/* Worker thread, pool lock held: only wake the loop. */
static void pool_notify(void *ud)
{
	struct pf_server *s = ud;
	lws_cancel_service(s->ctx);
}

/* Submits j for r to pool. 0 when queued (r waits for drain_jobs()); -EAGAIN when the queue
 * is full, -ENOMEM: the caller answers and frees j. */
static int submit_job(struct pf_server *s, struct pf_qpool *pool, struct lws *wsi,
		      struct http_req *r, struct srv_job *j)
{
	j->base.handle = ++s->next_job;
	j->req = r;
	j->wsi = wsi;
	memcpy(j->path, r->path, sizeof(j->path));
	int rc = pf_qpool_submit(pool, &j->base);
	if (rc < 0)
		return rc;
	r->job = j->base.handle;
	r->job_pool = pool;
	/* The answer may take a while (queue + run): no lws idle timeout meanwhile, but a
	 * bound all the same. */
	lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, QUERY_CONN_TIMEOUT_S);
	return 0;
}

/* Hands an API request to the query pool; see submit_job(). */
static int submit_query(struct pf_server *s, struct lws *wsi, struct http_req *r)
{
	struct api_job *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->sj.base.run = api_job_run;
	j->sj.base.free = srv_job_free;
	j->sj.api = true;
	memcpy(j->method, r->method, sizeof(j->method));
	memcpy(j->args_store, r->args_store, sizeof(j->args_store));
	j->n_args = r->n_args;
	for (size_t i = 0; i < r->n_args; i++)
		j->arg_off[i] = (size_t)(r->args[i] - r->args_store);
	memcpy(j->auth, r->auth, sizeof(j->auth));
	j->has_auth = r->has_auth;
	memcpy(j->peer, r->peer, sizeof(j->peer));
	j->now_ms = now_ms();
	int rc = submit_job(s, s->pool, wsi, r, &j->sj);
	if (rc < 0)
		free(j);
	return rc;
}

/* Hands an OTLP request to the receiver's writer; the body moves into the job (no copy). */
static int submit_ingest(struct pf_server *s, struct lws *wsi, struct http_req *r)
{
	struct ingest_job *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->sj.base.run = ingest_job_run;
	j->sj.base.free = ingest_job_free;
	j->body = r->body;
	j->sj.base.cost = r->body.len;
	j->gzip = r->body_gzip;
	memcpy(j->ctype_in, r->ctype_in, sizeof(j->ctype_in));
	j->max_bytes = s->opt.max_message_bytes;
	int rc = submit_job(s, s->ingest, wsi, r, &j->sj);
	if (rc < 0) {
		free(j); /* the body still belongs to r */
		return rc;
	}
	memset(&r->body, 0, sizeof(r->body));
	return 0;
}

/* Moves every finished answer of pool to its request and asks for WRITEABLE. Jobs whose
 * connection closed were forgotten (req_free) and never come back here. */
static void drain_jobs(struct pf_server *s, struct pf_qpool *pool)
{
	struct pf_qjob *b;

	while (pool && (b = pf_qpool_take(pool))) {
		struct srv_job *j = lws_container_of(b, struct srv_job, base);
		struct http_req *r = j->req;
		if (r->job == b->handle) {
			r->job = 0;
			r->job_pool = NULL;
			r->status = j->status;
			r->ctype = j->ctype;
			free(r->resp);
			r->resp = j->resp;
			r->resp_len = j->resp ? j->resp_len : 0;
			r->resp_off = 0;
			j->resp = NULL;
			if (j->hname[0])
				req_set_header(r, j->hname, j->hval);
			if (j->api && s->metrics)
				pf_metrics_api_request(s->metrics, r->status);
			if (j->note[0])
				pf_log_info("profiles: %d: %s", r->status, j->note);
			pf_log_debug("%s: answered %d after %.1f ms queued + %.1f ms", j->path,
				     r->status, (double)(b->started_us - b->queued_us) / 1e3,
				     (double)(b->done_us - b->started_us) / 1e3);
			/* An answer that waited for a pool closes its connection after it is sent
			 * ("Connection: close"): lws 4.1.6 on the libuv loop spins in its
			 * buffered-input ("ripe rxflow") pass on the next request of a keep-alive
			 * connection whose previous request was parked this way (seen with an
			 * agent's back-to-back profile uploads and with browsers). The client
			 * opens a new connection for its next request. */
			r->close_after = true;
			lws_set_timeout(j->wsi, NO_PENDING_TIMEOUT, 0);
			lws_callback_on_writable(j->wsi);
		}
		b->free(b);
	}
}

/* A viewer (or higher) token: the request may take a pool slot. Anything else runs on the
 * loop, where pf_api_handle() answers 401 at once. */
static bool api_token_ok(struct pf_server *s, const char *auth)
{
	char role[16];
	const char *r = pf_api_token_role(s->store, auth, role, sizeof(role));
	return r && strcmp(r, "agent") != 0;
}

static void dispatch_profiles(struct pf_server *s, struct lws *wsi, struct http_req *r)
{
	if (strcmp(r->method, "POST") != 0) {
		otlp_error(r, 405, 12 /* UNIMPLEMENTED */, "the OTLP profiles receiver takes POST");
		req_set_header(r, "allow:", "POST");
		return;
	}
	if (!agent_token_ok(s, r->has_auth ? r->auth : NULL)) {
		otlp_error(r, 401, 16 /* UNAUTHENTICATED */, "agent token missing or rejected");
		req_set_header(r, "www-authenticate:", "Bearer realm=\"profleet\"");
		return;
	}
	if (r->bad_encoding) {
		otlp_error(r, 415, 3 /* INVALID_ARGUMENT */,
			   "Content-Encoding must be gzip or identity");
		return;
	}
	if (r->too_large) {
		char m[96];
		snprintf(m, sizeof(m), "request body over the %zu byte limit", r->limit);
		otlp_error(r, 413, 8 /* RESOURCE_EXHAUSTED */, m);
		r->close_after = true;
		return;
	}
	if (s->ingest) {
		int rc = submit_ingest(s, wsi, r);
		if (rc == 0)
			return; /* drain_jobs() answers */
		if (rc == -EAGAIN) {
			/* OTLP/HTTP: 503 is retryable; the exporter backs off. */
			otlp_error(r, 503, 14 /* UNAVAILABLE */, "receiver busy; retry later");
			req_set_header(r, "retry-after:", RETRY_AFTER_QUERY_S);
			return;
		}
		/* out of memory for the job: store it here */
	}
	struct pf_profstore_request q = {
		.body = r->body.data,
		.len = r->body.len,
		.gzip = r->body_gzip,
		.content_type = r->ctype_in[0] ? r->ctype_in : NULL,
		.max_bytes = s->opt.max_message_bytes,
		.now_ms = now_ms(),
	};
	struct pf_profstore_result res;
	struct pf_buf out;
	pf_buf_init(&out, 1 << 20);
	if (pf_profstore_ingest(s->store, &q, &res, &out) < 0) {
		pf_buf_release(&out);
		req_error(r, 500, "internal", "out of memory");
		return;
	}
	if (res.status != 200)
		pf_log_info("profiles: %d from a %zu byte request: %s", res.status, r->body.len,
			    res.message);
	req_set_response(r, res.status, "application/x-protobuf", out.data, out.len);
	pf_buf_release(&out);
}

/* A JSON answer of the loop over API_GZIP_MIN bytes, gzip'd (level 1) for a client that
 * accepts it: a page of 100 agents is ~88 KB of JSON, ~8 KB gzip'd, one write instead of two.
 * Returns whether it set the response. */
static bool api_gzip(struct http_req *r, const struct pf_api_response *resp)
{
	if (!r->accept_gzip || resp->body.len < API_GZIP_MIN || !resp->content_type ||
	    strcmp(resp->content_type, "application/json") != 0)
		return false;
	struct pf_buf z;
	pf_buf_init(&z, resp->body.len + 1024);
	bool ok = pf_gzip_compress(resp->body.data, resp->body.len, 1, &z) == 0;
	if (ok) {
		req_set_response(r, resp->status, resp->content_type, z.data, z.len);
		req_set_header(r, "content-encoding:", "gzip");
		req_set_header(r, "vary:", "Accept-Encoding");
	}
	pf_buf_release(&z);
	return ok;
}

static void dispatch_api(struct pf_server *s, struct lws *wsi, struct http_req *r)
{
	struct pf_api_request q = {
		.method = r->method,
		.path = r->path,
		.n_args = r->n_args,
		.authorization = r->has_auth ? r->auth : NULL,
		.peer = r->peer,
		.body = r->body.data,
		.body_len = r->body.len,
		.now_ms = now_ms(),
	};
	memcpy(q.args, r->args, sizeof(q.args));
	struct pf_api_response resp;
	pf_api_response_init(&resp);
	if (r->too_large) {
		pf_api_error(&resp, 413, "too_large", "request body over %zu bytes", r->limit);
	} else if (r->bad_encoding) {
		pf_api_error(&resp, 415, "unsupported_encoding",
			     "API request bodies take no Content-Encoding");
	} else if (s->pool && pf_api_profiles_offload(r->method, r->path) &&
		   api_token_ok(s, r->has_auth ? r->auth : NULL)) {
		int rc = submit_query(s, wsi, r);
		if (rc == 0) {
			pf_api_response_release(&resp);
			return; /* drain_jobs() answers */
		}
		if (rc == -EAGAIN) {
			pf_api_error(&resp, 503, "unavailable",
				     "too many profile queries running; retry shortly");
			snprintf(resp.extra_header_name, sizeof(resp.extra_header_name),
				 "Retry-After:");
			snprintf(resp.extra_header_value, sizeof(resp.extra_header_value), "%s",
				 RETRY_AFTER_QUERY_S);
			if (s->metrics)
				pf_metrics_api_request(s->metrics, 503);
		} else {
			pf_api_handle(s->api, &q, &resp); /* out of memory: answer inline */
		}
	} else {
		pf_api_handle(s->api, &q, &resp);
	}
	if (!api_gzip(r, &resp))
		req_set_response(r, resp.status, resp.content_type, resp.body.data, resp.body.len);
	if (resp.extra_header_name[0]) {
		char lower[32];
		header_lower(resp.extra_header_name, lower, sizeof(lower));
		req_set_header(r, lower, resp.extra_header_value);
	}
	pf_api_response_release(&resp);
}

/* The console's static files (ui/static.h): answered from memory on the loop. */
static void dispatch_ui(struct pf_server *s, struct http_req *r)
{
	struct pf_ui_response out;
	pf_ui_handle(s->opt.ui, r->method, r->path, r->inm[0] ? r->inm : NULL, r->accept_gzip,
		     &out);
	req_set_response(r, out.status, out.content_type, out.body, out.body_len);
	for (size_t i = 0; i < out.n_headers; i++)
		req_set_header(r, out.headers[i].name, out.headers[i].value);
}

static int http_write(struct lws *wsi, struct http_req *r);

static void dispatch(struct pf_server *s, struct lws *wsi, struct http_req *r)
{
	if (r->dispatched)
		return;
	r->dispatched = true;
	if (r->is_opamp)
		dispatch_opamp_http(s, r);
	else if (r->is_profiles)
		dispatch_profiles(s, wsi, r);
	else if (r->is_ui)
		dispatch_ui(s, r);
	else
		dispatch_api(s, wsi, r);
	if (r->job)
		return;
	/* An answer made on the loop is written now, not after a round of the loop; WRITEABLE
	 * then finishes it (the rest of a long body, the end of the transaction). */
	if (http_write(wsi, r) < 0)
		lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
	else
		lws_callback_on_writable(wsi);
}

/* Answers a request at once (before its body) and closes the connection after. */
static void reject_early(struct lws *wsi, struct http_req *r, int status, const char *code,
			 const char *msg)
{
	req_error(r, status, code, msg);
	r->dispatched = true;
	r->close_after = true;
	lws_callback_on_writable(wsi);
}

static int http_begin(struct pf_server *s, struct lws *wsi, struct pss *pss, const char *uri,
		      size_t uri_len)
{
	struct http_req *r = calloc(1, sizeof(*r));
	if (!r)
		return -1;
	req_free(s, pss->req);
	pss->req = r;
	snprintf(r->method, sizeof(r->method), "%s", method_of(wsi));
	snprintf(r->path, sizeof(r->path), "%s", uri ? uri : "/");
	if (uri && uri_len >= sizeof(r->path)) {
		/* kept whole or not at all: a cut path could name another route */
		reject_early(wsi, r, 414, "uri_too_long", "the path is longer than 511 bytes");
		return 0;
	}
	if (uri && strnlen(uri, uri_len) != uri_len) {
		/* lws decoded a %00: the path would end early and name another route */
		reject_early(wsi, r, 400, "invalid_path", "the path holds a NUL byte (%00)");
		return 0;
	}
	r->is_opamp = strcmp(r->path, OPAMP_PATH) == 0;
	r->is_profiles = strcmp(r->path, PROFILES_PATH) == 0;
	r->is_ui = pf_ui_match(r->path);
	if (r->is_ui && lws_hdr_copy(wsi, r->inm, sizeof(r->inm), WSI_TOKEN_HTTP_IF_NONE_MATCH) < 0)
		r->inm[0] = 0;
	r->limit = r->is_opamp || r->is_profiles ? s->opt.max_message_bytes : PF_API_MAX_BODY;
	if (r->is_profiles &&
	    lws_hdr_copy(wsi, r->ctype_in, sizeof(r->ctype_in), WSI_TOKEN_HTTP_CONTENT_TYPE) < 0)
		r->ctype_in[0] = 0;
	pf_buf_init(&r->body, r->limit);

	size_t off = 0;
	for (int i = 0; i < PF_API_MAX_ARGS; i++) {
		if (off >= sizeof(r->args_store) - 1)
			break;
		int n = lws_hdr_copy_fragment(wsi, r->args_store + off,
					      (int)(sizeof(r->args_store) - off),
					      WSI_TOKEN_HTTP_URI_ARGS, i);
		if (n <= 0)
			break;
		r->args[r->n_args++] = r->args_store + off;
		off += (size_t)n + 1;
	}
	r->has_auth = lws_hdr_copy(wsi, r->auth, sizeof(r->auth),
				   WSI_TOKEN_HTTP_AUTHORIZATION) > 0;
	char enc[64];
	int el = lws_hdr_copy(wsi, enc, sizeof(enc), WSI_TOKEN_HTTP_CONTENT_ENCODING);
	if (el != 0) {
		bool gz = el > 0 && !strcasecmp(enc, "gzip");
		r->body_gzip = gz && (r->is_opamp || r->is_profiles);
		r->bad_encoding = !r->body_gzip && !(el > 0 && !strcasecmp(enc, "identity"));
	}
	lws_get_peer_simple(wsi, r->peer, sizeof(r->peer));
	r->accept_gzip = header_has(wsi, WSI_TOKEN_HTTP_ACCEPT_ENCODING, "gzip");

	bool has_body = !strcmp(r->method, "POST") || !strcmp(r->method, "PUT") ||
			!strcmp(r->method, "PATCH");
	if (!has_body) {
		dispatch(s, wsi, r);
		return 0;
	}
	char cl[32];
	if (lws_hdr_copy(wsi, cl, sizeof(cl), WSI_TOKEN_HTTP_CONTENT_LENGTH) <= 0) {
		reject_early(wsi, r, 411, "length_required", "a request body needs Content-Length");
		return 0;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(cl, &end, 10);
	if (errno || *end || cl[0] < '0' || cl[0] > '9') {
		reject_early(wsi, r, 400, "malformed", "bad Content-Length");
		return 0;
	}
	if (v > r->limit) {
		/* Answer at once without reading the body, then close (OpAMP: 413). */
		r->too_large = true;
		r->close_after = true;
		dispatch(s, wsi, r);
		return 0;
	}
	if (v == 0)
		dispatch(s, wsi, r);
	return 0;
}

/* Writes what the answer still owes: the headers and, when the socket took them whole, the
 * body (chunks of HTTP_CHUNK; the rest from WRITEABLE). Returns 1 once the answer is written
 * (the transaction is done), 0 to be called again from WRITEABLE, -1 to close. */
static int http_write(struct lws *wsi, struct http_req *r)
{
	if (!r || !r->dispatched || !r->resp)
		return 0;
	if (r->body_done)
		return 1;
	if (!r->headers_sent) {
		uint8_t buf[LWS_PRE + 1024];
		uint8_t *start = buf + LWS_PRE, *p = start, *end = buf + sizeof(buf) - 1;
		if (lws_add_http_common_headers(wsi, (unsigned int)r->status, r->ctype,
						(lws_filepos_t)r->resp_len, &p, end))
			return -1;
		for (int i = 0; i < REQ_HEADERS; i++)
			if (r->hname[i][0] &&
			    lws_add_http_header_by_name(wsi, (const unsigned char *)r->hname[i],
							(const unsigned char *)r->hval[i],
							(int)strlen(r->hval[i]), &p, end))
				return -1;
		if (r->close_after &&
		    lws_add_http_header_by_name(wsi, (const unsigned char *)"connection:",
						(const unsigned char *)"close", 5, &p, end))
			return -1;
		if (lws_finalize_write_http_header(wsi, start, &p, end))
			return -1;
		r->headers_sent = true;
		if (lws_partial_buffered(wsi)) {
			lws_callback_on_writable(wsi);
			return 0;
		}
		/* The socket took the headers: the body follows in the same turn (one round of
		 * the loop less: under a fleet's load every round waits behind thousands of
		 * ready agent sockets). */
	}
	size_t left = r->resp_len - r->resp_off;
	size_t n = left > HTTP_CHUNK ? HTTP_CHUNK : left;
	bool last = n == left;
	if (lws_write(wsi, r->resp + LWS_PRE + r->resp_off, n,
		      last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) < 0)
		return -1;
	r->resp_off += n;
	if (!last) {
		lws_callback_on_writable(wsi);
		return 0;
	}
	r->body_done = true;
	return 1; /* transaction done */
}

/* ------------------------------------------------------------------ WebSocket */

/* Handles one complete WebSocket message (msg is lws' buffer or the reassembly buffer).
 * Returns a negative errno when the connection must close. */
static int ws_process(struct pf_server *s, struct ws_conn *c, const uint8_t *msg,
		      size_t msg_len, bool text)
{
	struct pf_buf *frame = scratch_frame(s);
	if (!frame)
		return 0;
	const uint8_t *data = NULL;
	size_t len = 0;
	struct pf_opamp_result res = {0};
	if (text || pf_opamp_ws_unframe(msg ? msg : (const uint8_t *)"", msg_len, &data, &len) < 0) {
		/* Rule 4: malformed header (or a text frame): error, keep the connection. */
		struct pf_s2a m = {0};
		s->metrics->opamp_messages_in++;
		s->metrics->opamp_bad_messages++;
		if (c->sess.agent) {
			memcpy(m.instance_uid, c->sess.agent->uid, 16);
			m.instance_uid_len = 16;
		}
		m.has_error = true;
		m.error_type = PF_SERR_BAD_REQUEST;
		m.error_message = text ? (char *)"OpAMP messages are binary WebSocket frames"
				       : (char *)"WebSocket message header must be varint 0";
		if (pf_s2a_encode(&m, frame) == 0) {
			s->metrics->opamp_messages_out++;
			return ws_send(c, frame);
		}
	} else if (pf_opamp_session_handle(&s->opamp, &c->sess, data, len, now_ms(), frame,
					   &res) == 0) {
		return ws_send(c, frame);
	}
	return 0;
}

static void reload_tls(struct pf_server *s);

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		    size_t len)
{
	struct pss *pss = user;
	struct pf_server *s = wsi ? server_of(wsi) : NULL;

	switch (reason) {
	case LWS_CALLBACK_FILTER_NETWORK_CONNECTION:
		return s ? conn_filter(s, (int)(lws_intptr_t)in) : 0;
	case LWS_CALLBACK_SERVER_NEW_CLIENT_INSTANTIATED:
		return s ? conn_new(s, wsi) : 0;
	case LWS_CALLBACK_WSI_DESTROY:
		if (s)
			conn_gone(s, wsi);
		return 0;
	case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE: {
		conn_headers_done(s, wsi);
		char uri[256];
		if (lws_hdr_copy(wsi, uri, sizeof(uri), WSI_TOKEN_GET_URI) <= 0 ||
		    strcmp(uri, OPAMP_PATH) != 0) {
			write_now(wsi, 404, NULL, NULL, "WebSocket upgrades are served at /v1/opamp");
			return 1;
		}
		char auth[1024];
		bool has = lws_hdr_copy(wsi, auth, sizeof(auth), WSI_TOKEN_HTTP_AUTHORIZATION) > 0;
		if (!agent_token_ok(s, has ? auth : NULL)) {
			s->metrics->opamp_connections_rejected_auth++;
			write_now(wsi, 401, "www-authenticate:", "Bearer realm=\"profleet\"",
				  "agent token missing or rejected");
			return 1;
		}
		char peer[64] = "";
		lws_get_peer_simple(wsi, peer, sizeof(peer));
		if (s->opt.max_conns_per_source &&
		    src_open(s, peer) >= s->opt.max_conns_per_source) {
			s->metrics->opamp_connections_rejected_overload++;
			write_now(wsi, 429, "retry-after:", RETRY_AFTER_OVERLOAD_S,
				  "too many OpAMP connections from this address");
			return 1;
		}
		if (s->n_ws >= s->opt.max_agents) {
			s->metrics->opamp_connections_rejected_overload++;
			write_now(wsi, 503, "retry-after:", RETRY_AFTER_OVERLOAD_S,
				  "controller at its connection limit");
			return 1;
		}
		return 0;
	}
	case LWS_CALLBACK_ESTABLISHED: {
		/* Which agent token opened it: revoking or expiring that token closes it. */
		char auth[1024];
		struct pf_api_caller who;
		bool has = lws_hdr_copy(wsi, auth, sizeof(auth), WSI_TOKEN_HTTP_AUTHORIZATION) > 0;
		if (!agent_token_who(s, has ? auth : NULL, &who))
			return -1; /* revoked between the upgrade and now */
		struct ws_conn *c = calloc(1, sizeof(*c));
		if (!c)
			return -1;
		memcpy(c->token_id, who.token_id, sizeof(c->token_id));
		lws_get_peer_simple(wsi, c->peer, sizeof(c->peer));
		if (src_add(s, c->peer, 1) < 0) {
			free(c);
			return -1;
		}
		c->token_expires_ms = who.expires_ms;
		if (who.expires_ms && (!s->next_expiry_ms || who.expires_ms < s->next_expiry_ms))
			s->next_expiry_ms = who.expires_ms;
		c->next = s->ws_head;
		if (s->ws_head)
			s->ws_head->prev = c;
		s->ws_head = c;
		c->wsi = wsi;
		c->sess.conn = c;
		pf_buf_init(&c->rx, s->opt.max_message_bytes);
		pss->ws = c;
		s->n_ws++;
		s->metrics->opamp_connections_total++;
		return 0;
	}
	case LWS_CALLBACK_RECEIVE: {
		struct ws_conn *c = pss->ws;
		if (!c)
			return -1;
		bool first = lws_is_first_fragment(wsi);
		bool last = lws_is_final_fragment(wsi) && !lws_remaining_packet_payload(wsi);
		if (first && last) {
			/* The usual case: the whole message in one callback, no copy. */
			if (len > s->opt.max_message_bytes)
				goto too_large;
			return ws_process(s, c, in, len, !lws_frame_is_binary(wsi)) < 0 ? -1 : 0;
		}
		if (first) {
			pf_buf_reset(&c->rx);
			c->rx_text = !lws_frame_is_binary(wsi);
		}
		if (pf_buf_append(&c->rx, in, len) < 0) {
		too_large:;
			/* Rule 5: over the inbound limit → close 1009. */
			s->metrics->opamp_oversize_rejected++;
			static const char why[] = "OpAMP message over the inbound size limit";
			lws_close_reason(wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE,
					 (unsigned char *)why, sizeof(why) - 1);
			return -1;
		}
		if (last) {
			int r = ws_process(s, c, c->rx.data, c->rx.len, c->rx_text);
			/* Idle connections keep no receive buffer. */
			pf_buf_release(&c->rx);
			c->rx_text = false;
			if (r < 0)
				return -1;
		}
		return 0;
	}
	case LWS_CALLBACK_SERVER_WRITEABLE: {
		struct ws_conn *c = pss->ws;
		if (!c || !c->out_head)
			return 0;
		struct outmsg *m = c->out_head;
		int n = lws_write(wsi, m->data + LWS_PRE, m->len, LWS_WRITE_BINARY);
		c->out_head = m->next;
		c->out_bytes -= m->len;
		if (!c->out_head)
			c->out_tail = NULL;
		free(m);
		if (n < 0)
			return -1;
		if (c->out_head)
			lws_callback_on_writable(wsi);
		return 0;
	}
	case LWS_CALLBACK_CLOSED: {
		struct ws_conn *c = pss->ws;
		if (c) {
			src_add(s, c->peer, -1);
			if (c->prev)
				c->prev->next = c->next;
			else
				s->ws_head = c->next;
			if (c->next)
				c->next->prev = c->prev;
			pf_opamp_session_closed(&s->opamp, &c->sess);
			ws_conn_free(c);
			pss->ws = NULL;
			s->n_ws--;
		}
		return 0;
	}

	case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
		/* lws_cancel_service(): a query finished, pf_server_stop or a TLS reload */
		if (s) {
			drain_jobs(s, s->pool);
			drain_jobs(s, s->ingest);
			if (s->stop)
				uv_stop(&s->loop); /* pf_server_stop() */
			if (s->reload_tls) {
				s->reload_tls = 0;
				reload_tls(s);
			}
		}
		return 0;
	case LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS:
		/* A TLS listener's SSL_CTX (user) was made: the protocol floor, and kept for
		 * reloads. */
		if (s && s->n_ssl_ctx < (int)(sizeof(s->ssl_ctx) / sizeof(s->ssl_ctx[0])))
			s->ssl_ctx[s->n_ssl_ctx++] = user;
		return pf_tls_ctx_harden(user, s ? s->opt.client_ca : NULL) < 0 ? 1 : 0;
	case LWS_CALLBACK_OPENSSL_PERFORM_CLIENT_CERT_VERIFICATION:
		/* lws takes this callback's word over OpenSSL's: answer OpenSSL's verdict
		 * (len), or any client certificate would pass. 0 accepts. */
		return len ? 0 : 1;
	case LWS_CALLBACK_HTTP:
		conn_headers_done(s, wsi);
		return http_begin(s, wsi, pss, in, len) < 0 ? -1 : 0;
	case LWS_CALLBACK_HTTP_BODY: {
		struct http_req *r = pss->req;
		if (!r)
			return -1;
		if (!r->too_large && pf_buf_append(&r->body, in, len) < 0)
			r->too_large = true;
		return 0;
	}
	case LWS_CALLBACK_HTTP_BODY_COMPLETION:
		if (pss->req)
			dispatch(s, wsi, pss->req);
		return 0;
	case LWS_CALLBACK_HTTP_WRITEABLE: {
		struct http_req *r = pss->req;
		int n = http_write(wsi, r);
		if (n < 0)
			return -1;
		if (n == 1) {
			bool close_after = r->close_after;
			req_free(s, r);
			pss->req = NULL;
			if (close_after || lws_http_transaction_completed(wsi))
				return -1;
			/* keep-alive: the next request's headers are owed by the deadline too */
			struct conn *k = lws_get_opaque_user_data(wsi);
			if (k)
				pend_arm(s, k, now_ms());
		}
		return 0;
	}
	case LWS_CALLBACK_CLOSED_HTTP:
		if (pss) {
			req_free(s, pss->req);
			pss->req = NULL;
		}
		return 0;
	default:
		break;
	}
	return lws_callback_http_dummy(wsi, reason, user, in, len);
}

static const struct lws_protocols protocols[] = {
	/* One protocol for HTTP and the OpAMP WebSocket: OpAMP clients send no subprotocol.
	 * A small rx_buffer_size keeps idle connections cheap; larger messages arrive in
	 * pieces and are reassembled into a buffer that lives only while a message does. */
	{"profleet", callback, sizeof(struct pss), 1024, 0, NULL, 0},
	{NULL, NULL, 0, 0, 0, NULL, 0},
};

/* ------------------------------------------------- replicas: LISTEN/NOTIFY on the loop */

/* The listener connects asynchronously and is driven by a uv_poll_t on its socket; one loop
 * timer bounds its connect, re-makes it with backoff, reloads what an outage may have hidden
 * and adopts rollouts whose replica died. While the listener cannot reach the database, the
 * main store connection makes no reconnect attempt (pf_store_hold_reconnect), so nothing on
 * the loop waits for a connect. */
#define LISTEN_RETRY_MIN_MS 250
#define LISTEN_RETRY_MAX_MS 5000
#define LISTEN_CONNECT_MS 3000 /* the asynchronous connect's deadline */
#define ADOPT_EVERY_MS 5000    /* rollouts whose replica died are taken over this often */

static void listen_timer(uv_timer_t *t);
static void listen_io(uv_poll_t *h, int status, int events);

static void lpoll_closed(uv_handle_t *h)
{
	free(h);
}

static void listen_stop_poll(struct pf_server *s)
{
	if (!s->lpoll)
		return;
	uv_poll_stop(s->lpoll);
	uv_close((uv_handle_t *)s->lpoll, lpoll_closed);
	s->lpoll = NULL;
	s->lpoll_fd = -1;
}

static void listen_arm(struct pf_server *s, uint64_t ms)
{
	uv_timer_stop(&s->ltimer);
	uv_timer_start(&s->ltimer, listen_timer, ms, 0);
}

/* Watches the listener's socket for what it wants now (a new socket: a new watcher). */
static int listen_watch(struct pf_server *s)
{
	int fd = pf_store_listener_fd(s->listener), w = pf_store_listener_wants(s->listener);
	if (fd < 0)
		return -EAGAIN;
	if (s->lpoll && s->lpoll_fd != fd)
		listen_stop_poll(s);
	if (!s->lpoll) {
		uv_poll_t *p = malloc(sizeof(*p));
		if (!p || uv_poll_init(&s->loop, p, fd) < 0) {
			free(p);
			return -ENOMEM;
		}
		p->data = s;
		s->lpoll = p;
		s->lpoll_fd = fd;
	}
	int ev = (w & PF_STORE_WANT_READ ? UV_READABLE : 0) |
		 (w & PF_STORE_WANT_WRITE ? UV_WRITABLE : 0);
	return uv_poll_start(s->lpoll, ev ? ev : UV_READABLE, listen_io) < 0 ? -EIO : 0;
}

/* The listener failed or was lost: the store stops reconnecting, the timer retries. */
static void listen_down(struct pf_server *s)
{
	listen_stop_poll(s);
	pf_store_hold_reconnect(s->store, true);
	s->lbackoff_ms = s->lbackoff_ms ? pf_min(s->lbackoff_ms * 2, (uint64_t)LISTEN_RETRY_MAX_MS)
					: LISTEN_RETRY_MIN_MS;
	if (!s->lwarned)
		pf_log_warn("%s; retrying with backoff (writes answer 503 meanwhile)",
			    pf_store_listener_error(s->listener));
	else
		pf_log_debug("%s; next try in %llu ms", pf_store_listener_error(s->listener),
			     (unsigned long long)s->lbackoff_ms);
	s->lwarned = true;
	listen_arm(s, s->lbackoff_ms);
}

static void listen_start(struct pf_server *s)
{
	if (pf_store_listener_connect(s->listener) < 0 || listen_watch(s) < 0)
		listen_down(s);
	else
		listen_arm(s, LISTEN_CONNECT_MS);
}

static void on_notify(const char *kind, const char *name, void *ud)
{
	struct pf_server *s = ud;
	pf_sync_apply(&s->sync, kind, name, now_ms());
}

static void listen_io(uv_poll_t *h, int status, int events)
{
	struct pf_server *s = h->data;
	bool was_ready = pf_store_listener_ready(s->listener);
	(void)events;
	int n = status < 0 ? -EAGAIN : pf_store_listener_step(s->listener, on_notify, s);
	if (n < 0 || listen_watch(s) < 0) {
		listen_down(s);
		return;
	}
	if (!was_ready && pf_store_listener_ready(s->listener)) {
		if (s->lwarned)
			pf_log_info("store: the database is reachable again; listening for other "
				    "replicas' changes");
		s->lwarned = false;
		s->lbackoff_ms = 0;
		pf_store_hold_reconnect(s->store, false);
		s->need_reload = s->listen_started; /* what was missed meanwhile */
		s->listen_started = true;
		listen_arm(s, s->need_reload ? 0 : ADOPT_EVERY_MS);
	}
}

static void listen_timer(uv_timer_t *t)
{
	struct pf_server *s = t->data;
	if (!pf_store_listener_ready(s->listener)) {
		if (s->lpoll) { /* still connecting: the deadline passed */
			pf_store_listener_abort(s->listener, "no answer within 3 s");
			listen_down(s);
			return;
		}
		listen_start(s);
		return;
	}
	if (s->need_reload && pf_sync_reload_all(&s->sync, now_ms()) == 0) {
		s->need_reload = false;
		pf_log_info("store: reloaded configs, assignments and pins after the outage");
	} else if (!s->need_reload && s->opt.rollouts) {
		struct pf_error err = {0};
		if (pf_rollouts_load(s->opt.rollouts, now_ms(), &err) < 0)
			pf_log_debug("rollouts: adopting: %s", err.msg);
	}
	listen_arm(s, s->need_reload ? LISTEN_RETRY_MIN_MS * 2 : ADOPT_EVERY_MS);
}

static int listen_init(struct pf_server *s, struct pf_error *err)
{
	s->sync = (struct pf_sync){.store = s->store, .fleet = s->fleet,
				   .rollouts = s->opt.rollouts, .captures = s->opt.captures,
				   .on_token = revoke_hook, .ud = s};
	s->listener = pf_store_listener_new(s->opt.store_url);
	if (!s->listener)
		return pf_error_set(err, -ENOMEM, NULL, "out of memory");
	s->lpoll_fd = -1;
	pf_store_gate_reconnect(s->store, true);
	uv_timer_init(&s->loop, &s->ltimer);
	s->ltimer.data = s;
	s->ltimer_init = true;
	listen_start(s);
	return 0;
}

/* On the persist tick: the main connection is lost while the listener still looks fine (an
 * idle connection to a server that hangs, or a backend killed alone): probe with a fresh
 * asynchronous connect; once it is listening, reconnects are released. */
static void listen_probe(struct pf_server *s)
{
	if (!s->listener || !pf_store_unavailable(s->store) ||
	    !pf_store_listener_ready(s->listener))
		return;
	listen_stop_poll(s);
	listen_start(s);
}

static void listen_release(struct pf_server *s)
{
	listen_stop_poll(s);
	if (s->ltimer_init) {
		uv_timer_stop(&s->ltimer);
		uv_close((uv_handle_t *)&s->ltimer, NULL);
		s->ltimer_init = false;
	}
}

/* On the persist tick, replicas sharing PostgreSQL: this one's heartbeat, and the agent rows of
 * replicas that stopped beating (killed, hung) disconnected. When the others had taken this
 * one for dead, its connected agents' rows are written again. */
static void replica_beat(struct pf_server *s, int64_t now)
{
	int64_t dead_ms = (int64_t)(s->opt.replica_timeout_s ? s->opt.replica_timeout_s : 30) * 1000;
	int64_t every_ms = pf_min(dead_ms / 3, (int64_t)REPLICA_BEAT_MAX_MS);
	if (!s->listener || pf_store_unavailable(s->store) ||
	    (s->beat_ms && now >= s->beat_ms && now - s->beat_ms < every_ms))
		return;
	s->beat_ms = now;
	size_t marked = 0;
	bool revived = false;
	if (pf_store_replica_beat(s->store, dead_ms, &marked, &revived) < 0) {
		pf_log_warn("store: replica heartbeat: %s", pf_store_last_error(s->store));
		return;
	}
	bool first = !s->beat_ok; /* joining: nobody can have taken this id for dead yet */
	s->beat_ok = true;
	if (marked) {
		pf_log_info("store: %zu agent rows of replicas silent for %lld s marked "
			    "disconnected",
			    marked, (long long)(dead_ms / 1000));
		if (s->api)
			pf_api_refresh_fleet(s->api); /* this replica's view of them, too */
	}
	if (revived && !first && pf_fleet_mark_connected_dirty(s->fleet))
		pf_log_warn("store: this replica had been taken for dead; its agents' rows are "
			    "written again");
}

/* ------------------------------------------------------------------ lifecycle */

static void persist_tick(lws_sorted_usec_list_t *sul)
{
	struct pf_server *s = lws_container_of(sul, struct pf_server, sul_persist);
	if (s->persist) {
		pf_persist_tick(s->persist, s->fleet, now_ms(), PERSIST_MAX_ROWS);
		struct pf_persist_stats st;
		pf_persist_stats(s->persist, &st);
		s->metrics->persist_rows_written = st.rows_written;
		s->metrics->persist_batches = st.batches;
		s->metrics->persist_errors = st.errors;
	}
	if (s->opt.captures)
		pf_captures_tick(s->opt.captures, now_ms());
	if (s->opt.rollouts) {
		/* Replicas sharing PostgreSQL: a rollout this replica drives waits for agents
		 * connected to the others too; their reports reach it through their rows (the
		 * changed ones), read only while a rollout is active. */
		if (s->listener && pf_rollouts_active(s->opt.rollouts) > 0)
			pf_api_refresh_fleet(s->api);
		pf_rollouts_tick(s->opt.rollouts, now_ms());
	}
	ws_expire(s, now_ms());
	listen_probe(s);
	replica_beat(s, now_ms());
	if (s->listener) {
		s->metrics->store_shared = true;
		s->metrics->store_available = !pf_store_unavailable(s->store) &&
					      pf_store_listener_ready(s->listener);
		s->metrics->sync_applied = s->sync.applied;
		s->metrics->sync_failed = s->sync.failed;
	}
	lws_sul_schedule(s->ctx, 0, &s->sul_persist, persist_tick, PERSIST_INTERVAL_US);
}

static void reload_tls(struct pf_server *s)
{
	if (!s->opt.tls_cert) {
		pf_log_warn("SIGHUP: no TLS listener, nothing to reload");
		return;
	}
	for (int i = 0; i < s->n_ssl_ctx; i++) {
		struct pf_error e = {0};
		if (pf_tls_reload(s->ssl_ctx[i], s->opt.tls_cert, s->opt.tls_key, &e) < 0) {
			pf_log_error("TLS reload failed, the previous certificate stays: %s",
				     e.msg);
			return;
		}
	}
	pf_log_info("TLS certificate reloaded from %s (%d listener%s)", s->opt.tls_cert,
		    s->n_ssl_ctx, s->n_ssl_ctx == 1 ? "" : "s");
}

static void lws_log_route(int level, const char *line)
{
	enum pf_log_level l = level & LLL_ERR ? PF_LOG_ERROR
			      : level & LLL_WARN ? PF_LOG_WARN
			      : level & LLL_NOTICE ? PF_LOG_INFO
						   : PF_LOG_DEBUG;
	pf_log_emit_raw(l, "lws", line);
}

/* Where the listener binds. lws 4.1.6 opens an AF_INET6 socket (dual stack, every address of
 * the host) whenever IPv6 is compiled in, unless the vhost disables IPv6: an IPv4 address as
 * iface would otherwise still answer on every other address. So:
 *   "::", "*", ""   every address, IPv4 and IPv6 (iface NULL);
 *   "0.0.0.0"       every IPv4 address only;
 *   an IPv4 literal, "localhost"   exactly that address (IPv6 disabled on the vhost);
 *   an IPv6 literal exactly that address; anything else is an interface name for lws. */
static void listen_iface(const char *host, struct lws_context_creation_info *info)
{
	struct in_addr a4;
	if (!*host || !strcmp(host, "::") || !strcmp(host, "*")) {
		info->iface = NULL;
	} else if (!strcmp(host, "0.0.0.0")) {
		info->iface = NULL;
		info->options |= LWS_SERVER_OPTION_DISABLE_IPV6;
	} else if (!strcmp(host, "localhost")) {
		info->iface = "127.0.0.1";
		info->options |= LWS_SERVER_OPTION_DISABLE_IPV6;
	} else if (inet_pton(AF_INET, host, &a4) == 1) {
		info->iface = host;
		info->options |= LWS_SERVER_OPTION_DISABLE_IPV6;
	} else {
		info->iface = host;
	}
}

/* Runs the loop until every handle is closed (lws' watchers after lws_context_destroy(), our
 * signal watchers), bounded in rounds, then closes it. */
static void loop_close(struct pf_server *s)
{
	if (!s->loop_init)
		return;
	for (int i = 0; i < LOOP_CLOSE_ROUNDS && uv_run(&s->loop, UV_RUN_NOWAIT); i++)
		;
	if (s->ctx) {
		/* lws 4.1.6 on a foreign loop: the first lws_context_destroy() closes the
		 * connections and lws' own handles; once the loop has run their close callbacks, a
		 * second call frees the context (and writes NULL to s->ctx through pcontext). */
		lws_context_destroy(s->ctx);
		for (int i = 0; i < LOOP_CLOSE_ROUNDS && uv_run(&s->loop, UV_RUN_NOWAIT); i++)
			;
	}
	if (s->ctx)
		pf_log_warn("the libwebsockets context was not fully destroyed");
	if (uv_loop_close(&s->loop) < 0)
		pf_log_warn("event loop closed with handles still open");
	s->loop_init = false;
}

/* On the loop: SIGINT/SIGTERM. The loop stops; pf_server_run() returns. */
static void on_signal(uv_signal_t *h, int signum)
{
	struct pf_server *s = h->data;
	if (signum == SIGHUP) {
		reload_tls(s); /* on the loop: no handshake is half-way through a swap */
		return;
	}
	pf_log_info("signal %d: stopping", signum);
	s->stop = 1;
	uv_stop(&s->loop);
}

struct pf_server *pf_server_new(const struct pf_server_options *opt, struct pf_fleet *fleet,
				struct pf_store *store, struct pf_persist *persist,
				struct pf_metrics *metrics, struct pf_api *api,
				struct pf_error *err)
{
	struct pf_server *s = calloc(1, sizeof(*s));
	if (!s) {
		pf_error_set(err, -ENOMEM, NULL, "out of memory");
		return NULL;
	}
	s->opt = *opt;
	s->fleet = fleet;
	s->store = store;
	s->persist = persist;
	s->metrics = metrics;
	s->api = api;
	api->on_revoke = revoke_hook;
	api->revoke_ud = s;
	s->opamp.fleet = fleet;
	s->opamp.metrics = metrics;
	s->opamp.max_message_bytes = opt->max_message_bytes;
	s->opamp.captures = opt->captures;
	if (opt->captures)
		pf_captures_set_sender(opt->captures, send_custom, s);
	s->pool = opt->query_pool;
	s->ingest = opt->ingest_pool;
	pf_fleet_set_push_hook(fleet, push_hook, s);

	lws_set_log_level(pf_log_level_current >= PF_LOG_DEBUG ? LLL_ERR | LLL_WARN | LLL_NOTICE
							       : LLL_ERR | LLL_WARN,
			  lws_log_route);

	if (uv_loop_init(&s->loop) < 0) {
		pf_error_set(err, -ENOMEM, NULL, "cannot create the event loop");
		free(s);
		return NULL;
	}
	s->loop_init = true;
	void *loops[1] = {&s->loop};

	struct lws_context_creation_info info;
	memset(&info, 0, sizeof(info));
	/* lws 4.1.6 loads its libuv support at run time (the libwebsockets-evlib_uv plugin) and
	 * joins our loop: every descriptor is a uv_poll watcher on one epoll set, timers (lws_sul)
	 * are one uv_timer, the cancel pipe (lws_cancel_service) one more watcher. */
	info.options |= LWS_SERVER_OPTION_LIBUV;
	info.foreign_loops = loops;
	info.pcontext = &s->ctx;
	info.port = opt->port;
	listen_iface(opt->listen_host, &info);
	info.protocols = protocols;
	info.user = s;
	info.max_http_header_pool = HEADER_POOL;
	info.max_http_header_data = 4096;
	info.pt_serv_buf_size = 64 * 1024;
	info.timeout_secs = 20;
	/* A request's headers are bounded by header_timeout_s (header_sweep, which logs and
	 * counts); lws' own limit on holding an ah (header table) without a complete request
	 * is the backstop a second later. One address cannot hold more than
	 * max_pending_per_source of the pool's 256 (conn_filter). */
	info.timeout_secs_ah_idle = (opt->header_timeout_s ? opt->header_timeout_s : 5) + 1;
	/* No lws "validity" timer per connection: lws 4.1.6 re-arms it on every message received,
	 * and its timers live in one sorted list, so each re-arm walks the list (O(connections)
	 * per message: the largest user-space cost of a fleet at rest). Dead peers are found by TCP
	 * keepalive below and by the fleet's missed-heartbeat rule; idle HTTP connections by
	 * timeout_secs. */
	static const lws_retry_bo_t no_validity = {.secs_since_valid_ping = 0,
						   .secs_since_valid_hangup = 0};
	info.retry_and_idle_policy = &no_validity;
	info.ka_time = 60;
	info.ka_probes = 3;
	info.ka_interval = 10;
	if (opt->tls_cert) {
		info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
		info.ssl_cert_filepath = opt->tls_cert;
		info.ssl_private_key_filepath = opt->tls_key;
		pf_tls_vhost_policy(&info);
	}
	bool agents = opt->tls_cert && opt->client_ca && opt->agent_listen_host[0];
	if (agents)
		info.options |= LWS_SERVER_OPTION_EXPLICIT_VHOSTS;
	s->ctx = lws_create_context(&info);
	if (s->ctx && agents) {
		info.vhost_name = "default";
		s->vh = lws_create_vhost(s->ctx, &info);
		if (s->vh) {
			/* The agent listener: same routes, a client certificate required. */
			struct lws_context_creation_info ai = info;
			ai.vhost_name = "agents";
			ai.port = opt->agent_port;
			ai.options &= ~(uint64_t)LWS_SERVER_OPTION_DISABLE_IPV6;
			listen_iface(opt->agent_listen_host, &ai);
			ai.ssl_ca_filepath = opt->client_ca;
			ai.options |= LWS_SERVER_OPTION_REQUIRE_VALID_OPENSSL_CLIENT_CERT;
			s->agent_vh = lws_create_vhost(s->ctx, &ai);
		}
		if (!s->vh || !s->agent_vh) {
			pf_error_set(err, -EADDRINUSE, "tls.agent_listen",
				     "cannot listen on %s:%d and %s:%d (address in use, bad "
				     "address or TLS files)",
				     opt->listen_host, opt->port, opt->agent_listen_host,
				     opt->agent_port);
			lws_context_destroy(s->ctx);
			loop_close(s);
			free(s);
			return NULL;
		}
	}
	if (!s->ctx) {
		pf_error_set(err, -EADDRINUSE, NULL,
			     "cannot listen on %s:%d (address in use, bad address, TLS files, or "
			     "libwebsockets' libuv plugin missing)",
			     opt->listen_host, opt->port);
		loop_close(s);
		free(s);
		return NULL;
	}
	if (opt->handle_signals) {
		uv_signal_init(&s->loop, &s->sig_int);
		uv_signal_init(&s->loop, &s->sig_term);
		uv_signal_init(&s->loop, &s->sig_hup);
		s->sig_int.data = s->sig_term.data = s->sig_hup.data = s;
		uv_signal_start(&s->sig_int, on_signal, SIGINT);
		uv_signal_start(&s->sig_term, on_signal, SIGTERM);
		uv_signal_start(&s->sig_hup, on_signal, SIGHUP);
		s->sig_init = true;
	}
	if (!s->vh)
		s->vh = lws_get_vhost_by_name(s->ctx, "default");
	if (s->pool)
		pf_qpool_set_notify(s->pool, pool_notify, s);
	if (s->ingest)
		pf_qpool_set_notify(s->ingest, pool_notify, s);
	lws_sul_schedule(s->ctx, 0, &s->sul_persist, persist_tick, PERSIST_INTERVAL_US);
	lws_sul_schedule(s->ctx, 0, &s->sul_headers, header_sweep, HEADER_SWEEP_US);
	if (opt->store_url && pf_store_is_shared(store) && listen_init(s, err) < 0) {
		pf_server_free(s);
		return NULL;
	}
	return s;
}

int pf_server_port(const struct pf_server *s)
{
	return s->vh ? lws_get_vhost_listen_port(s->vh) : s->opt.port;
}

int pf_server_agent_port(const struct pf_server *s)
{
	return s->agent_vh ? lws_get_vhost_listen_port(s->agent_vh) : -1;
}

void pf_server_reload_tls(struct pf_server *s)
{
	s->reload_tls = 1;
	if (s->ctx)
		lws_cancel_service(s->ctx);
}

int pf_server_run(struct pf_server *s)
{
	s->api->ready = true;
	if (!s->stop)
		uv_run(&s->loop, UV_RUN_DEFAULT); /* until a stop's uv_stop() */
	s->api->ready = false;
	return 0;
}

void pf_server_stop(struct pf_server *s)
{
	s->stop = 1;
	if (s->ctx)
		lws_cancel_service(s->ctx); /* the loop sees stop in EVENT_WAIT_CANCELLED */
}

void pf_server_free(struct pf_server *s)
{
	if (!s)
		return;
	/* After this no worker calls lws_cancel_service() on the context destroyed below; the
	 * connections' close callbacks make the pool forget their queries. */
	if (s->pool)
		pf_qpool_set_notify(s->pool, NULL, NULL);
	if (s->ingest)
		pf_qpool_set_notify(s->ingest, NULL, NULL);
	if (s->opt.captures)
		pf_captures_set_sender(s->opt.captures, NULL, NULL);
	if (s->ctx) {
		lws_sul_cancel(&s->sul_persist);
		lws_sul_cancel(&s->sul_headers);
		/* On a foreign loop lws closes its watchers asynchronously: loop_close() runs the
		 * loop until they are closed and finishes the destroy. */
		lws_context_destroy(s->ctx);
	}
	listen_release(s);
	if (s->sig_init) {
		uv_signal_stop(&s->sig_int);
		uv_signal_stop(&s->sig_term);
		uv_signal_stop(&s->sig_hup);
		uv_close((uv_handle_t *)&s->sig_int, NULL);
		uv_close((uv_handle_t *)&s->sig_term, NULL);
		uv_close((uv_handle_t *)&s->sig_hup, NULL);
	}
	loop_close(s);
	pf_store_listener_free(s->listener);
	pf_buf_release(&s->scratch);
	for (size_t i = 0; i < SRC_BUCKETS; i++)
		while (s->by_source[i]) {
			struct src_count *c = s->by_source[i];
			s->by_source[i] = c->next;
			free(c);
		}
	free(s);
}
