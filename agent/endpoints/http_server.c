/* http_server.c — see http_server.h. */
#include "endpoints/http_server.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "endpoints/conn_gate.h"
#include "pf/log.h"

#define AGENT_HTTP_MAX_PROTOCOLS 4
#define HEADER_SWEEP_US (250 * LWS_US_PER_MS)

struct agent_http_server {
	struct lws_context *ctx;
	struct lws_vhost *vh;
	struct agent_listen_addr listen;
	char where[96];
	pthread_t thread;
	bool started;
	atomic_bool stop;
	void *user; /* the caller's */
	/* the caller's protocols, each with gate_callback in front (user: the caller's entry) */
	struct lws_protocols protocols[AGENT_HTTP_MAX_PROTOCOLS + 1];
	struct agent_conn_gate gate; /* the serving thread's */
	lws_sorted_usec_list_t sul_headers;
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct agent_http_server *server_of(struct lws *wsi)
{
	return lws_context_user(lws_get_context(wsi));
}

void *agent_http_user(struct lws *wsi)
{
	return server_of(wsi)->user;
}

static void conn_kill(void *wsi)
{
	lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
}

/* Whether lws has read a request line on wsi (it holds a header slot and got that far). */
static bool conn_started(void *wsi)
{
	static const enum lws_token_indexes methods[] = {
	    WSI_TOKEN_GET_URI, WSI_TOKEN_POST_URI, WSI_TOKEN_HEAD_URI, WSI_TOKEN_OPTIONS_URI,
#if defined(LWS_WITH_HTTP_UNCOMMON_HEADERS) || defined(LWS_HTTP_HEADERS_ALL)
	    WSI_TOKEN_PUT_URI, WSI_TOKEN_PATCH_URI, WSI_TOKEN_DELETE_URI,
#endif
	};
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (lws_hdr_total_length(wsi, methods[i]) > 0)
			return true;
	return false;
}

/* SERVER_NEW_CLIENT_INSTANTIATED: tracked until WSI_DESTROY; an older connection of its
 * address may have to make room. */
static int conn_new(struct agent_http_server *s, struct lws *wsi)
{
	char peer[64] = "";
	lws_get_peer_simple(wsi, peer, sizeof(peer));
	void *evict = NULL;
	struct agent_conn *k = agent_conn_open(&s->gate, peer, wsi, now_ms(), conn_started, &evict);
	if (evict)
		conn_kill(evict);
	if (!k) {
		pf_log_warn("%s: closing a connection from %s: all %d connection slots are taken",
			    s->where, peer, AGENT_HTTP_MAX_CONNS);
		return -1;
	}
	lws_set_opaque_user_data(wsi, k);
	return 0;
}

static void conn_gone(struct agent_http_server *s, struct lws *wsi)
{
	struct agent_conn *k = lws_get_opaque_user_data(wsi);
	if (!k)
		return;
	lws_set_opaque_user_data(wsi, NULL);
	agent_conn_close(&s->gate, k);
}

/* Every HEADER_SWEEP_US on the serving thread: connections past their header deadline go. */
static void header_sweep(lws_sorted_usec_list_t *sul)
{
	struct agent_http_server *s = lws_container_of(sul, struct agent_http_server, sul_headers);
	agent_conn_sweep(&s->gate, now_ms(), conn_kill);
	lws_sul_schedule(s->ctx, 0, &s->sul_headers, header_sweep, HEADER_SWEEP_US);
}

/* In front of every protocol's callback: the connection's place in the gate. */
static int gate_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user,
			 void *in, size_t len)
{
	struct agent_http_server *s = wsi ? server_of(wsi) : NULL;
	const struct lws_protocols *p = wsi ? lws_get_protocol(wsi) : NULL;
	const struct lws_protocols *orig = p && p->user ? p->user : NULL;
	if (!s || !orig)
		return lws_callback_http_dummy(wsi, reason, user, in, len);
	switch (reason) {
	case LWS_CALLBACK_SERVER_NEW_CLIENT_INSTANTIATED:
		if (conn_new(s, wsi) < 0)
			return -1;
		break;
	case LWS_CALLBACK_WSI_DESTROY:
		conn_gone(s, wsi);
		break;
	case LWS_CALLBACK_HTTP: {
		struct agent_conn *k = lws_get_opaque_user_data(wsi);
		if (k)
			agent_conn_headers_done(&s->gate, k);
		break;
	}
	default:
		break;
	}
	return orig->callback(wsi, reason, user, in, len);
}

struct agent_http_server *agent_http_server_new(const struct agent_listen_addr *l,
						const char *vhost_name,
						const struct lws_protocols *protocols, void *user,
						const char *key, struct pf_error *err)
{
	struct agent_http_server *s = calloc(1, sizeof(*s));
	if (!s) {
		return pf_error_oom(err);
	}
	s->listen = *l;
	s->user = user;
	atomic_init(&s->stop, false);
	for (size_t i = 0; protocols[i].name; i++) {
		if (i == AGENT_HTTP_MAX_PROTOCOLS) {
			pf_error_set(err, -EINVAL, key, "more than %d protocols",
				     AGENT_HTTP_MAX_PROTOCOLS);
			free(s);
			errno = EINVAL;
			return NULL;
		}
		s->protocols[i] = protocols[i];
		s->protocols[i].callback = gate_callback;
		s->protocols[i].user = (void *)&protocols[i];
	}
	const char *h = l->host[0] ? l->host : (l->v6 ? "::" : "*");
	snprintf(s->where, sizeof(s->where), l->v6 ? "[%s]:%d" : "%s:%d", h, l->port);
	int rc = agent_listen_addr_probe(l);
	if (rc < 0) {
		pf_error_set(err, rc, key, "cannot listen on %s: %s", s->where, strerror(-rc));
		free(s);
		errno = -rc;
		return NULL;
	}
	struct lws_context_creation_info info;
	memset(&info, 0, sizeof(info));
	info.port = l->port;
	info.iface = l->host[0] ? s->listen.host : NULL;
	if (!l->v6 && l->host[0])
		info.options |= LWS_SERVER_OPTION_DISABLE_IPV6;
	info.protocols = s->protocols;
	info.user = s;
	info.gid = -1;
	info.uid = -1;
	info.fd_limit_per_thread = AGENT_HTTP_MAX_CONNS;
	info.max_http_header_pool = AGENT_HTTP_HEADER_SLOTS;
	info.pt_serv_buf_size = AGENT_HTTP_CHUNK + 1024;
	info.timeout_secs = 10;
	/* A request's headers are bounded by AGENT_HTTP_HEADER_TIMEOUT_S (header_sweep); lws'
	 * own limit on holding a header slot without a complete request is the backstop. */
	info.timeout_secs_ah_idle = AGENT_HTTP_HEADER_TIMEOUT_S + 1;
	info.vhost_name = vhost_name;
	s->ctx = lws_create_context(&info);
	if (!s->ctx) {
		pf_error_set(err, -EADDRNOTAVAIL, key,
			     "cannot listen on %s (see the lws log line above)", s->where);
		free(s);
		errno = EADDRNOTAVAIL;
		return NULL;
	}
	s->vh = lws_get_vhost_by_name(s->ctx, vhost_name);
	if (!s->vh)
		s->vh = lws_get_vhost_by_name(s->ctx, "default");
	lws_sul_schedule(s->ctx, 0, &s->sul_headers, header_sweep, HEADER_SWEEP_US);
	return s;
}

static void *serve_main(void *arg)
{
	struct agent_http_server *s = arg;
	while (!atomic_load(&s->stop))
		if (lws_service(s->ctx, 0) < 0)
			break;
	return NULL;
}

int agent_http_server_start(struct agent_http_server *s, struct pf_error *err)
{
	int rc = pthread_create(&s->thread, NULL, serve_main, s);
	if (rc != 0)
		return pf_error_set(err, -rc, "", "cannot start the HTTP server thread: %s",
				    strerror(rc));
	s->started = true;
	return 0;
}

int agent_http_server_port(const struct agent_http_server *s)
{
	return s->vh ? lws_get_vhost_listen_port(s->vh) : s->listen.port;
}

const char *agent_http_server_where(const struct agent_http_server *s)
{
	return s->where;
}

void agent_http_server_free(struct agent_http_server *s)
{
	if (!s)
		return;
	if (s->started) {
		atomic_store(&s->stop, true);
		lws_cancel_service(s->ctx);
		pthread_join(s->thread, NULL);
	}
	lws_context_destroy(s->ctx);
	free(s);
}

/* ---- answers -------------------------------------------------------------------------------- */

int agent_http_answer_init(struct agent_http_answer *a, size_t max)
{
	agent_http_answer_release(a);
	pf_buf_init(&a->resp, max + LWS_PRE);
	if (pf_buf_reserve(&a->resp, LWS_PRE + 4096) < 0)
		return -ENOMEM;
	a->resp.len = LWS_PRE;
	return 0;
}

void agent_http_answer_release(struct agent_http_answer *a)
{
	pf_buf_release(&a->resp);
	memset(a, 0, sizeof(*a));
}

void agent_http_answer_text(struct lws *wsi, struct agent_http_answer *a, int status,
			    const char *body)
{
	a->status = status;
	a->ctype = "text/plain; charset=utf-8";
	a->resp.len = LWS_PRE;
	pf_buf_append_str(&a->resp, body);
	a->ready = true;
	lws_callback_on_writable(wsi);
}

int agent_http_answer_write(struct lws *wsi, struct agent_http_answer *a)
{
	if (!a->ready)
		return 0;
	size_t body_len = a->resp.len - LWS_PRE;
	if (!a->headers_sent) {
		uint8_t buf[LWS_PRE + 512];
		uint8_t *start = buf + LWS_PRE, *q = start, *end = buf + sizeof(buf) - 1;
		if (lws_add_http_common_headers(wsi, (unsigned int)a->status,
						a->ctype ? a->ctype : "text/plain",
						(lws_filepos_t)body_len, &q, end))
			return -1;
		if (a->allow && lws_add_http_header_by_name(wsi, (const unsigned char *)"allow:",
							    (const unsigned char *)a->allow,
							    (int)strlen(a->allow), &q, end))
			return -1;
		if (a->close_after &&
		    lws_add_http_header_by_name(wsi, (const unsigned char *)"connection:",
						(const unsigned char *)"close", 5, &q, end))
			return -1;
		if (lws_finalize_write_http_header(wsi, start, &q, end))
			return -1;
		a->headers_sent = true;
		if (!body_len)
			return 1;
		lws_callback_on_writable(wsi);
		return 0;
	}
	size_t left = body_len - a->off;
	size_t n = left > AGENT_HTTP_CHUNK ? AGENT_HTTP_CHUNK : left;
	bool last = n == left;
	/* lws_write() needs LWS_PRE writable bytes before the data: the body's first chunk has
	 * the headroom reserved in front of it, later chunks have the bytes already sent */
	if (lws_write(wsi, a->resp.data + LWS_PRE + a->off, n,
		      last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) < 0)
		return -1;
	a->off += n;
	if (!last) {
		lws_callback_on_writable(wsi);
		return 0;
	}
	return 1;
}

bool agent_http_header_has(struct lws *wsi, enum lws_token_indexes t, const char *needle)
{
	char v[256];
	if (lws_hdr_copy(wsi, v, sizeof(v), t) <= 0)
		return false;
	return strcasestr(v, needle) != NULL;
}

int agent_http_answer_writeable(struct lws *wsi, struct agent_http_answer *a,
				void (*done)(void *ctx), void *ctx)
{
	int n = agent_http_answer_write(wsi, a);
	if (n <= 0)
		return n;
	bool close_after = a->close_after;
	done(ctx);
	if (close_after || lws_http_transaction_completed(wsi))
		return -1;
	/* keep-alive: the next request's headers are owed by the deadline too */
	struct agent_conn *k = lws_get_opaque_user_data(wsi);
	if (k)
		agent_conn_expect_headers(&server_of(wsi)->gate, k, now_ms());
	return 0;
}
