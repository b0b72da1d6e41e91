/* server.c — see server.h. */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <libwebsockets.h>
#include <uv.h>

#include "api/api.h"
#include "config.h"
#include "fleet/capture.h"
#include "fleet/fleet.h"
#include "fleet/persist.h"
#include "fleet/rollout.h"
#include "fleet/sync.h"
#include "metrics.h"
#include "opamp/credential.h"
#include "opamp/session.h"
#include "opamp_codec.h"
#include "pf/list.h"
#include "pf/log.h"
#include "profstore/query_pool.h"
#include "server_int.h"
#include "tls.h"
#include "store.h"

#define PERSIST_INTERVAL_US (500 * LWS_US_PER_MS)
#define PERSIST_MAX_ROWS 20000
#define REPLICA_BEAT_MAX_MS 5000 /* replicas sharing PostgreSQL: heartbeat at least this often */
#define RETRY_AFTER_OVERLOAD_S "30"

#define HEADER_SWEEP_US (250 * LWS_US_PER_MS)
#define LOOP_CLOSE_ROUNDS 1000 /* loop iterations to let closing handles finish at shutdown */

/* One queued WebSocket message: one allocation, LWS_PRE headroom then the frame. */
struct outmsg {
	struct outmsg *next;
	size_t len; /* bytes after the headroom */
	uint8_t data[];
};

/* What every message reads comes first (the receive and send paths, then the session's first
 * fields), within the first 64 bytes: a round trip touches one cache line of it. */
struct ws_conn {
	struct lws *wsi;
	int fd; /* the socket when plain TCP (replies are sent on it directly), -1 with TLS */
	bool closing;
	bool rx_text;
	bool rx_expired; /* its unfinished message timed out: closing (1008) */
	struct outmsg *out_head, *out_tail;
	size_t out_bytes; /* queued in out_head.., bounded by max_send_queue_bytes */
	struct pf_opamp_session sess;
	struct pf_buf rx;
	struct ws_conn *prev, *next; /* every open OpAMP WebSocket (server's ws_head) */
	char token_id[17];	     /* the agent token it authenticated with */
	char peer[64];		     /* counted in the per-address limits */
	int64_t token_expires_ms;    /* 0: never */
};

static struct pf_server *server_of(struct lws *wsi)
{
	return lws_context_user(lws_get_context(wsi));
}

/* ------------------------------------------------------------------ output */

/* The shared encode buffer, reset to LWS_PRE headroom + the WebSocket varint header. It
 * lives as long as the server, so replies cost no buffer growth; after an unusually large
 * message its memory is given back. The headroom's bytes are left as they are: they are where
 * the WebSocket frame header is written before the frame goes out. */
static struct pf_buf *scratch_frame(struct pf_server *s)
{
	struct pf_buf *b = &s->scratch;
	if (b->cap > ((size_t)1 << 20)) {
		pf_buf_release(b);
		b->max = 0;
	}
	if (!b->max)
		pf_buf_init(b, s->opt.max_message_bytes + LWS_PRE + 16);
	pf_buf_reset(b);
	if (pf_buf_reserve(b, LWS_PRE + 1) < 0)
		return NULL;
	b->data[LWS_PRE] = 0; /* the OpAMP varint header (pf_opamp_ws_frame_header) */
	b->len = LWS_PRE + 1;
	b->data[b->len] = 0;
	return b;
}

static void ws_kill(struct ws_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Copies the frame (headroom included) into one queued message. A connection whose queue
 * would pass max_send_queue_bytes is closed instead (-ENOBUFS): its reader does not keep up,
 * and holding more for it would let one peer grow the controller without bound. */
static int ws_enqueue(struct ws_conn *c, const struct pf_buf *frame)
{
	struct pf_server *s = lws_context_user(lws_get_context(c->wsi));
	size_t len = frame->len - LWS_PRE;
	if (c->out_head && c->out_bytes + len > s->opt.max_send_queue_bytes) {
		s->metrics->opamp_slow_readers_closed++;
		ws_kill(c,
			"slow reader: %zu bytes already queued, a %zu-byte message would pass "
			"opamp.max_send_queue_bytes (%zu)",
			c->out_bytes, len, s->opt.max_send_queue_bytes);
		return -ENOBUFS;
	}
	struct outmsg *m = malloc(sizeof(*m) + frame->len);
	if (!m)
		return -ENOMEM;
	memcpy(m->data, frame->data, frame->len);
	m->len = frame->len - LWS_PRE;
	PF_QUEUE_APPEND(c->out_head, c->out_tail, m, next);
	c->out_bytes += len;
	lws_callback_on_writable(c->wsi);
	return 0;
}

/* Writes the header of one unfragmented, unmasked binary frame of len payload bytes (RFC 6455
 * section 5.2: FIN + opcode 2, then the length in 7 bits, or 126 and 16 bits, or 127 and 64
 * bits, in network byte order; a server does not mask) into the LWS_PRE bytes before payload.
 * Returns where the frame starts. */
static uint8_t *ws_binary_header(uint8_t *payload, size_t len)
{
	_Static_assert(LWS_PRE >= 10, "the headroom holds the longest frame header");
	uint8_t *h;
	if (len < 126) {
		h = payload - 2;
		h[1] = (uint8_t)len;
	} else if (len <= 0xffff) {
		h = payload - 4;
		h[1] = 126;
		h[2] = (uint8_t)(len >> 8);
		h[3] = (uint8_t)len;
	} else {
		h = payload - 10;
		h[1] = 127;
		for (int i = 0; i < 8; i++)
			h[2 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
	}
	h[0] = 0x82;
	return h;
}

/* A frame on a plain-TCP connection with nothing queued: framed here and given to the socket
 * in one send(), which is what lws_write() ends in, less its per-write framing and
 * bookkeeping (a few hundred instructions a message). What the socket does not take goes to
 * lws as raw bytes (LWS_WRITE_HTTP is lws' unframed write): lws keeps them ahead of anything
 * it writes later (a pong, a close) and sends them first when the socket is writable, as it
 * does with the rest of a partial lws_write(). */
static int ws_send_plain(struct ws_conn *c, uint8_t *payload, size_t len)
{
	uint8_t *h = ws_binary_header(payload, len);
	size_t n = len + (size_t)(payload - h), sent = 0;
	ssize_t w = send(c->fd, h, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		return -EIO;
	if (w > 0)
		sent = (size_t)w;
	if (sent == n)
		return 0;
	return lws_write(c->wsi, h + sent, n - sent, LWS_WRITE_HTTP) < 0 ? -EIO : 0;
}

/* A message for an agent: written at once when nothing is queued before it, else queued for
 * WRITEABLE. Used for the reply from the connection's own RECEIVE callback and for config
 * pushes (from the API request that changed the config). An exception to "write only from
 * WRITEABLE", and the reason is cost: asking for WRITEABLE arms POLLOUT and disarms it after
 * the write, two changes of the descriptor's epoll interest (libuv: a DEL and an ADD each) per
 * message, more than the recv() and send() themselves (a push to 15,000 agents: 60,000
 * epoll_ctl calls). It is safe on these plain (HTTP/1 upgraded) WebSocket connections because
 * neither write blocks: what the socket does not take, lws keeps (one message at most, since
 * lws_partial_buffered() sends every later one to our queue) and sends before calling
 * WRITEABLE again. On plain TCP the frame goes out through ws_send_plain(), with TLS through
 * lws_write(). Returns a negative errno when the connection must close. */
static int ws_send(struct ws_conn *c, const struct pf_buf *frame)
{
	if (c->closing)
		return -ECONNRESET;
	if (c->out_head || lws_partial_buffered(c->wsi))
		return ws_enqueue(c, frame);
	uint8_t *payload = frame->data + LWS_PRE;
	size_t len = frame->len - LWS_PRE;
	if (c->fd < 0) /* TLS: lws frames and encrypts */
		return lws_write(c->wsi, payload, len, LWS_WRITE_BINARY) < 0 ? -EIO : 0;
	return ws_send_plain(c, payload, len);
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
		lws_set_timeout(c->wsi, PENDING_TIMEOUT_USER_OK,
				LWS_TO_KILL_ASYNC); /* dead socket */
}

/* A frame buffer of its own (for messages made outside a reply, which may be under way in the
 * scratch frame): LWS_PRE headroom and the WebSocket varint header. 0 or -ENOMEM; release it. */
static int own_frame(struct pf_server *s, struct pf_buf *frame)
{
	static const uint8_t pre[LWS_PRE];
	pf_buf_init(frame, s->opt.max_message_bytes + LWS_PRE + 16);
	int rc = pf_buf_append(frame, pre, LWS_PRE);
	return rc < 0 ? rc : pf_opamp_ws_frame_header(frame);
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
	int rc = own_frame(s, &frame);
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

/* Writes a whole small response at once: only for rejecting an upgrade, where lws expects
 * the headers to have been sent by the time the callback returns. */
static int write_now(struct lws *wsi, int status, const char *extra_name, const char *extra_val,
		     const char *msg)
{
	uint8_t buf[LWS_PRE + 1024];
	uint8_t *start = buf + LWS_PRE, *p = start, *end = buf + sizeof(buf) - 1;
	char body[256];
	int n = snprintf(body, sizeof(body), "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n",
			 status == 401	 ? "unauthenticated"
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

/* SERVER_NEW_CLIENT_INSTANTIATED: track the connection until WSI_DESTROY. */
static int conn_new(struct pf_server *s, struct lws *wsi)
{
	struct pf_conn *k =
	    pf_conn_open(&s->limits, (int)lws_get_socket_fd(wsi), wsi, pf_server_now_ms());
	if (!k)
		return -1;
	lws_set_opaque_user_data(wsi, k);
	return 0;
}

/* A request's headers are complete. */
static void conn_headers_done(struct pf_server *s, struct lws *wsi)
{
	struct pf_conn *k = lws_get_opaque_user_data(wsi);
	if (k)
		pf_conn_headers_done(&s->limits, k);
}

static void conn_gone(struct pf_server *s, struct lws *wsi)
{
	struct pf_conn *k = lws_get_opaque_user_data(wsi);
	if (!k)
		return;
	lws_set_opaque_user_data(wsi, NULL);
	pf_conn_close(&s->limits, k);
}

static void conn_kill(void *wsi)
{
	lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
}

/* A request body stalled or trickles: 408 and closed; the connection goes in any case. */
static void body_expired(void *wsi)
{
	struct pss *pss = lws_wsi_user(wsi);
	struct http_req *r = pss ? pss->req : NULL;
	if (r && !r->dispatched)
		pf_http_refuse_body(server_of(wsi), wsi, r, 408,
				    "the request body did not arrive in time");
	/* backstop for a peer that does not read the answer */
	lws_set_timeout(wsi, PENDING_TIMEOUT_HTTP_CONTENT, 1);
}

#define WHY_MSG_TIMEOUT "OpAMP message not finished in time"

/* An unfinished WebSocket message stalled or trickles: its bytes are freed now, and the
 * connection is closed with 1008 from WRITEABLE (a close reason is sent from a callback). */
static void msg_expired(void *wsi)
{
	struct pss *pss = lws_wsi_user(wsi);
	struct ws_conn *c = pss ? pss->ws : NULL;
	if (c) {
		c->rx_expired = true;
		pf_buf_release(&c->rx);
		lws_callback_on_writable(wsi);
	}
	/* backstop for a peer whose socket takes nothing more */
	lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, 2);
}

/* lws 4.1's frame type for a close frame: its header leaves the value out (lws_close_reason()
 * is the documented way), but a close asked for from WRITEABLE that way goes out as a bare TCP
 * close, without the frame; written here directly, the peer gets the code and reason. */
#define WS_WRITE_CLOSE ((enum lws_write_protocol)4)

/* From WRITEABLE: a close frame with code and why, then the connection closes (-1). */
static int close_frame_now(struct lws *wsi, unsigned code, const char *why)
{
	uint8_t buf[LWS_PRE + 125];
	size_t n = pf_min(strlen(why), sizeof(buf) - LWS_PRE - 2);
	buf[LWS_PRE] = (uint8_t)(code >> 8);
	buf[LWS_PRE + 1] = (uint8_t)code;
	memcpy(buf + LWS_PRE + 2, why, n);
	lws_write(wsi, buf + LWS_PRE, n + 2, WS_WRITE_CLOSE);
	return -1;
}

static int close_1008(struct lws *wsi, const char *why)
{
	lws_close_reason(wsi, LWS_CLOSE_STATUS_POLICY_VIOLATION, (unsigned char *)why,
			 strlen(why));
	return -1;
}

/* Every HEADER_SWEEP_US: connections past their header, body or message deadline are closed. */
static void header_sweep(lws_sorted_usec_list_t *sul)
{
	struct pf_server *s = lws_container_of(sul, struct pf_server, sul_headers);
	pf_conn_limits_sweep(&s->limits, pf_server_now_ms(), conn_kill);
	pf_conn_body_sweep(&s->limits, pf_server_now_ms(), body_expired);
	pf_conn_msg_sweep(&s->limits, pf_server_now_ms(), msg_expired);
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

void pf_server_bind_credential(struct pf_server *s, struct pf_opamp_session *sess,
			       const struct pf_api_caller *who, const char *auth, bool ws)
{
	if (!who->agent_bound || pf_api_token_hash(auth, sess->cred_hash) < 0)
		return;
	sess->cred_bound = true;
	memcpy(sess->cred_uid, who->agent_uid, 16);
	int r = pf_credential_confirm(s->store, who, ws, revoke_hook, s);
	if (r < 0)
		pf_log_warn("opamp: older credentials of token %s not removed: %s", who->token_id,
			    strerror(-r));
}

/* api->on_rotate: a new credential offered on the agent's WebSocket. */
static int rotate_hook(const uint8_t uid[16], void *ud)
{
	struct pf_server *s = ud;
	struct pf_agent *a = pf_fleet_find(s->fleet, uid);
	struct ws_conn *c = a && a->connected && a->transport == PF_TRANSPORT_WS ? a->conn : NULL;
	if (!c)
		return -ENOTCONN;
	struct pf_buf frame;
	int r = own_frame(s, &frame);
	if (r == 0)
		r = pf_opamp_build_offer(&s->opamp, a, pf_server_now_ms(), &frame);
	if (r == 0)
		r = ws_send(c, &frame);
	explicit_bzero(frame.data, frame.len);
	pf_buf_release(&frame);
	return r;
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

/* Worker thread, pool lock held: only wake the loop. */
static void pool_notify(void *ud)
{
	struct pf_server *s = ud;
	lws_cancel_service(s->ctx);
}

/* ------------------------------------------------------------------ WebSocket */

/* Handles one complete WebSocket message (msg is lws' buffer or the reassembly buffer).
 * Returns a negative errno when the connection must close. */
static int ws_process(struct pf_server *s, struct ws_conn *c, const uint8_t *msg, size_t msg_len,
		      bool text)
{
	struct pf_buf *frame = scratch_frame(s);
	if (!frame)
		return 0;
	const uint8_t *data = NULL;
	size_t len = 0;
	struct pf_opamp_result res = {0};
	if (text ||
	    pf_opamp_ws_unframe(msg ? msg : (const uint8_t *)"", msg_len, &data, &len) < 0) {
		/* A malformed frame header (or a text frame): an error reply, the connection stays. */
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
	} else if (pf_opamp_session_handle(&s->opamp, &c->sess, data, len, pf_server_now_ms(),
					   frame, &res) == 0) {
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
		return s ? pf_conn_limits_refuse(&s->limits, (int)(lws_intptr_t)in,
						 pf_server_now_ms())
			 : 0;
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
			write_now(wsi, 404, NULL, NULL,
				  "WebSocket upgrades are served at /v1/opamp");
			return 1;
		}
		char auth[1024];
		bool has = lws_hdr_copy(wsi, auth, sizeof(auth), WSI_TOKEN_HTTP_AUTHORIZATION) > 0;
		bool too_long =
		    lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_AUTHORIZATION) >= (int)sizeof(auth);
		if (too_long || !pf_server_agent_token(s, has ? auth : NULL, NULL)) {
			s->metrics->opamp_connections_rejected_auth++;
			write_now(wsi, 401, "www-authenticate:", "Bearer realm=\"profleet\"",
				  too_long ? PF_SERVER_AUTH_TOO_LONG : "agent token missing or rejected");
			return 1;
		}
		char peer[64] = "";
		lws_get_peer_simple(wsi, peer, sizeof(peer));
		if (s->opt.max_conns_per_source &&
		    pf_conn_limits_ws_open(&s->limits, peer) >= s->opt.max_conns_per_source) {
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
		if (!pf_server_agent_token(s, has ? auth : NULL, &who))
			return -1; /* revoked between the upgrade and now */
		/* On a cache line of its own: its first fields are all a message reads of it. */
		size_t csize = (sizeof(struct ws_conn) + 63) & ~(size_t)63;
		struct ws_conn *c = aligned_alloc(64, csize);
		if (!c)
			return -1;
		memset(c, 0, csize);
		memcpy(c->token_id, who.token_id, sizeof(c->token_id));
		pf_server_bind_credential(s, &c->sess, &who, has ? auth : NULL, true);
		lws_get_peer_simple(wsi, c->peer, sizeof(c->peer));
		if (pf_conn_limits_ws_add(&s->limits, c->peer, 1) < 0) {
			free(c);
			return -1;
		}
		c->token_expires_ms = who.expires_ms;
		if (who.expires_ms && (!s->next_expiry_ms || who.expires_ms < s->next_expiry_ms))
			s->next_expiry_ms = who.expires_ms;
		PF_DLIST_PUSH_FRONT(s->ws_head, c, prev, next);
		c->wsi = wsi;
		c->fd = lws_is_ssl(wsi) ? -1 : lws_get_socket_fd(wsi);
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
		if (c->rx_expired)
			return close_1008(wsi, WHY_MSG_TIMEOUT);
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
			/* Over the inbound size limit (after reassembly): close with 1009. */
			s->metrics->opamp_oversize_rejected++;
			static const char why[] = "OpAMP message over the inbound size limit";
			lws_close_reason(wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE,
					 (unsigned char *)why, sizeof(why) - 1);
			return -1;
		}
		/* Unfinished messages are bounded in all and timed out (conn_limits). */
		struct pf_conn *k = lws_get_opaque_user_data(wsi);
		if (!last && k && pf_conn_msg_hold(&s->limits, k, c->rx.cap, pf_server_now_ms()) < 0) {
			pf_buf_release(&c->rx);
			return close_1008(wsi, "the controller holds as many unfinished OpAMP "
					       "messages as it may; try again later");
		}
		if (last) {
			if (k)
				pf_conn_msg_end(&s->limits, k);
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
		if (c && c->rx_expired)
			return close_frame_now(wsi, LWS_CLOSE_STATUS_POLICY_VIOLATION,
					       WHY_MSG_TIMEOUT);
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
			pf_conn_limits_ws_add(&s->limits, c->peer, -1);
			PF_DLIST_UNLINK(s->ws_head, c, prev, next);
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
			pf_server_jobs_drain(&s->jobs, s->pool);
			pf_server_jobs_drain(&s->jobs, s->ingest);
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
		return pf_http_begin(s, wsi, pss, in, len) < 0 ? -1 : 0;
	case LWS_CALLBACK_HTTP_BODY: {
		struct http_req *r = pss->req;
		if (!r)
			return -1;
		if (r->dispatched)
			return 0; /* answered before its body (refused): the rest is dropped */
		struct pf_conn *k = lws_get_opaque_user_data(wsi);
		if (k)
			pf_conn_body_progress(k, pf_server_now_ms());
		if (!r->too_large && pf_buf_append(&r->body, in, len) < 0)
			r->too_large = true;
		return 0;
	}
	case LWS_CALLBACK_HTTP_BODY_COMPLETION:
		if (pss->req)
			pf_http_dispatch(s, wsi, pss->req);
		return 0;
	case LWS_CALLBACK_HTTP_WRITEABLE: {
		struct http_req *r = pss->req;
		int n = pf_http_write(wsi, r);
		if (n < 0)
			return -1;
		if (n == 1) {
			bool close_after = r->close_after;
			pf_http_req_free(s, r);
			pss->req = NULL;
			if (close_after || lws_http_transaction_completed(wsi))
				return -1;
			/* keep-alive: the next request's headers are owed by the deadline too */
			struct pf_conn *k = lws_get_opaque_user_data(wsi);
			if (k)
				pf_conn_expect_headers(&s->limits, k, pf_server_now_ms());
		}
		return 0;
	}
	case LWS_CALLBACK_CLOSED_HTTP:
		if (pss) {
			pf_http_req_free(s, pss->req);
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

/* ------------------------------------------------------------------ replicas */

/* On the persist tick, replicas sharing PostgreSQL: this one's heartbeat, and the agent rows of
 * replicas that stopped beating (killed, hung) disconnected. When the others had taken this
 * one for dead, its connected agents' rows are written again. */
static void replica_beat(struct pf_server *s, int64_t now)
{
	int64_t dead_ms =
	    (int64_t)(s->opt.replica_timeout_s ? s->opt.replica_timeout_s
					       : PF_REPLICA_TIMEOUT_DEFAULT_S) * 1000;
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
		pf_persist_tick(s->persist, s->fleet, pf_server_now_ms(), PERSIST_MAX_ROWS);
		struct pf_persist_stats st;
		pf_persist_stats(s->persist, &st);
		s->metrics->persist_rows_written = st.rows_written;
		s->metrics->persist_batches = st.batches;
		s->metrics->persist_errors = st.errors;
		s->metrics->persist_round_trips = st.round_trips;
	}
	if (s->opt.captures)
		pf_captures_tick(s->opt.captures, pf_server_now_ms());
	if (s->opt.rollouts) {
		/* Replicas sharing PostgreSQL: a rollout this replica drives waits for agents
		 * connected to the others too; their reports reach it through their rows (the
		 * changed ones), read only while a rollout is active. */
		if (s->listener && pf_rollouts_active(s->opt.rollouts) > 0)
			pf_api_refresh_fleet(s->api);
		pf_rollouts_tick(s->opt.rollouts, pf_server_now_ms());
	}
	ws_expire(s, pf_server_now_ms());
	if (s->listener)
		pf_sync_listener_probe(s->listener);
	replica_beat(s, pf_server_now_ms());
	pf_server_forward_tick(s, pf_server_now_ms());
	if (s->listener) {
		s->metrics->store_shared = true;
		s->metrics->store_available =
		    !pf_store_unavailable(s->store) && pf_sync_listener_ready(s->listener);
		s->metrics->sync_applied = pf_sync_listener_sync(s->listener)->applied;
		s->metrics->sync_failed = pf_sync_listener_sync(s->listener)->failed;
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
	enum pf_log_level l = level & LLL_ERR	   ? PF_LOG_ERROR
			      : level & LLL_WARN   ? PF_LOG_WARN
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
	api->on_rotate = rotate_hook;
	s->opamp.store = store;
	s->opamp.fleet = fleet;
	s->opamp.metrics = metrics;
	s->opamp.max_message_bytes = opt->max_message_bytes;
	s->opamp.captures = opt->captures;
	if (opt->captures)
		pf_captures_set_sender(opt->captures, send_custom, s);
	s->pool = opt->query_pool;
	s->ingest = opt->ingest_pool;
	s->jobs = (struct pf_server_jobs){.metrics = metrics,
					  .max_message_bytes = opt->max_message_bytes};
	/* the largest body one request may have: an OpAMP or OTLP message, or an API body */
	size_t body_max = pf_max(opt->max_message_bytes, (size_t)PF_API_MAX_BODY);
	s->limits = (struct pf_conn_limits){.max_pending_per_source = opt->max_pending_per_source,
					    .header_timeout_s = opt->header_timeout_s,
					    .max_body_per_source = PF_BODY_SOURCE_FACTOR * body_max,
					    .max_body_total = PF_BODY_TOTAL_FACTOR * body_max,
					    .max_msg_total =
						PF_WS_MSG_TOTAL_FACTOR * opt->max_message_bytes,
					    .metrics = metrics};
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
	info.max_http_header_pool = PF_HEADER_POOL;
	info.max_http_header_data = 4096;
	info.pt_serv_buf_size = 64 * 1024;
	info.timeout_secs = 20;
	/* A request's headers are bounded by header_timeout_s (header_sweep, which logs and
	 * counts); lws' own limit on holding an ah (header table) without a complete request
	 * is the backstop a second later. One address cannot hold more than
	 * max_pending_per_source of the pool's 256 (pf_conn_limits_refuse). */
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
	if (opt->store_url && pf_store_is_shared(store)) {
		struct pf_sync sync = {.store = store,
				       .fleet = fleet,
				       .rollouts = opt->rollouts,
				       .captures = opt->captures,
				       .on_token = revoke_hook,
				       .on_command = pf_server_forward_on_command,
				       .ud = s};
		s->listener = pf_sync_listener_new(&s->loop, opt->store_url, &sync, err);
		if (!s->listener) {
			pf_server_free(s);
			return NULL;
		}
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
	pf_sync_listener_stop(s->listener);
	if (s->sig_init) {
		uv_signal_stop(&s->sig_int);
		uv_signal_stop(&s->sig_term);
		uv_signal_stop(&s->sig_hup);
		uv_close((uv_handle_t *)&s->sig_int, NULL);
		uv_close((uv_handle_t *)&s->sig_term, NULL);
		uv_close((uv_handle_t *)&s->sig_hup, NULL);
	}
	loop_close(s);
	pf_sync_listener_free(s->listener);
	pf_buf_release(&s->scratch);
	pf_conn_limits_release(&s->limits);
	free(s);
}
