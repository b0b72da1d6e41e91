/* http_server.c — see http_server.h. */
#include "http_server.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf/log.h"

struct agent_http_server {
	struct lws_context *ctx;
	struct lws_vhost *vh;
	struct agent_listen_addr listen;
	char where[96];
	pthread_t thread;
	bool started;
	atomic_bool stop;
};

struct agent_http_server *agent_http_server_new(const struct agent_listen_addr *l,
						const char *vhost_name,
						const struct lws_protocols *protocols, void *user,
						const char *key, struct pf_error *err)
{
	struct agent_http_server *s = calloc(1, sizeof(*s));
	if (!s) {
		pf_error_set(err, -ENOMEM, "", "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	s->listen = *l;
	atomic_init(&s->stop, false);
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
	info.protocols = protocols;
	info.user = user;
	info.gid = -1;
	info.uid = -1;
	info.fd_limit_per_thread = 64;
	info.max_http_header_pool = 16;
	info.pt_serv_buf_size = AGENT_HTTP_CHUNK + 1024;
	info.timeout_secs = 10;
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
	return close_after || lws_http_transaction_completed(wsi) ? -1 : 0;
}
