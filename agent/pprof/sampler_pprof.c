/* sampler_pprof.c — see sampler_pprof.h.
 *
 * The HTTP client: one non-blocking socket driven with poll(2) against one deadline, in slices
 * of at most 100 ms so a cancel request is noticed; HTTP/1.1 per RFC 9112 ("Connection:
 * close"; the body framed by Content-Length, chunked transfer coding (section 7.1) or the
 * end of the connection). Threads: the loop thread owns the schedule; each scrape runs on its
 * own thread with a private copy of its target and touches shared state only under the mutex,
 * at its end. */
#include "sampler_pprof.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "pf/buf.h"
#include "pf/compiler.h"
#include "pf/gzip.h"
#include "pprof_codec.h"

#define MAX_HEADERS ((size_t)64 << 10)
#define SLICE_MS 100
#define GO_DEFAULT_CPU_SECONDS 30 /* net/http/pprof's Profile handler without seconds= */

uint64_t pf_pprof_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------------------------------- */
/* URLs.                                                                                     */

struct url {
	bool tls;
	bool ip_literal;
	char host[256];
	char port[8];
	char target[4096]; /* path and query, starts with '/' */
};

static int url_parse(const char *s, struct url *u, struct pf_error *err, const char *path)
{
	memset(u, 0, sizeof(*u));
	if (!s)
		return pf_error_set(err, -EINVAL, path, "missing URL");
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7f)
			return pf_error_set(err, -EINVAL, path,
					    "URL contains a space or control "
					    "character");
	const char *p;
	if (strncasecmp(s, "http://", 7) == 0) {
		p = s + 7;
	} else if (strncasecmp(s, "https://", 8) == 0) {
		p = s + 8;
		u->tls = true;
	} else {
		return pf_error_set(err, -EINVAL, path, "not an http:// or https:// URL: %s", s);
	}
	size_t alen = strcspn(p, "/?#");
	const char *rest = p + alen;
	if (memchr(p, '@', alen))
		return pf_error_set(err, -EINVAL, path, "user info in URLs is not supported");
	const char *hs = p, *he, *port = NULL;
	if (*p == '[') {
		const char *rb = memchr(p, ']', alen);
		if (!rb)
			return pf_error_set(err, -EINVAL, path, "bad IPv6 address in %s", s);
		hs = p + 1;
		he = rb;
		if (rb + 1 < rest) {
			if (rb[1] != ':')
				return pf_error_set(err, -EINVAL, path, "bad authority in %s", s);
			port = rb + 2;
		}
		u->ip_literal = true;
	} else {
		const char *colon = memchr(p, ':', alen);
		he = colon ? colon : rest;
		port = colon ? colon + 1 : NULL;
	}
	size_t hlen = (size_t)(he - hs);
	if (!hlen || hlen >= sizeof(u->host))
		return pf_error_set(err, -EINVAL, path, "bad host in %s", s);
	memcpy(u->host, hs, hlen);
	if (port) {
		size_t plen = (size_t)(rest - port);
		char *end;
		char tmp[8];
		if (!plen || plen >= sizeof(tmp))
			return pf_error_set(err, -EINVAL, path, "bad port in %s", s);
		memcpy(tmp, port, plen);
		tmp[plen] = 0;
		long v = strtol(tmp, &end, 10);
		if (*end || v < 1 || v > 65535)
			return pf_error_set(err, -EINVAL, path, "bad port in %s", s);
		snprintf(u->port, sizeof(u->port), "%ld", v);
	} else {
		snprintf(u->port, sizeof(u->port), "%s", u->tls ? "443" : "80");
	}
	if (!u->ip_literal) {
		struct in6_addr a6;
		u->ip_literal =
		    inet_pton(AF_INET6, u->host, &a6) == 1 || inet_pton(AF_INET, u->host, &a6) == 1;
	}
	size_t tlen = strcspn(rest, "#");
	if (tlen + 2 > sizeof(u->target))
		return pf_error_set(err, -EINVAL, path, "URL too long");
	size_t o = 0;
	if (*rest != '/')
		u->target[o++] = '/';
	memcpy(u->target + o, rest, tlen);
	u->target[o + tlen] = 0;
	return 0;
}

/* The seconds= query parameter of the target, or `def` when absent or not a number. */
static uint32_t url_seconds(const struct url *u, uint32_t def)
{
	const char *q = strchr(u->target, '?');
	while (q) {
		q++;
		if (strncmp(q, "seconds=", 8) == 0) {
			char *end;
			long v = strtol(q + 8, &end, 10);
			if (end != q + 8 && (*end == 0 || *end == '&') && v >= 0 && v <= 86400)
				return (uint32_t)v;
			return def;
		}
		q = strchr(q, '&');
	}
	return def;
}

/* Sets seconds=N in the target's query (replacing an existing one). */
static int url_set_seconds(struct url *u, uint32_t secs)
{
	char out[sizeof(u->target)];
	const char *q = strchr(u->target, '?');
	size_t plen = q ? (size_t)(q - u->target) : strlen(u->target);
	struct pf_buf b;
	pf_buf_init(&b, sizeof(out) - 1);
	int r = pf_buf_append(&b, u->target, plen);
	char sep = '?';
	while (r == 0 && q && *q) {
		const char *param = q + 1;
		size_t n = strcspn(param, "&");
		if (n && strncmp(param, "seconds=", 8) != 0) {
			r = pf_buf_putc(&b, (uint8_t)sep);
			if (r == 0)
				r = pf_buf_append(&b, param, n);
			sep = '&';
		}
		q = param[n] ? param + n : NULL;
	}
	if (r == 0)
		r = pf_buf_printf(&b, "%cseconds=%" PRIu32, sep, secs);
	if (r == 0) {
		memcpy(u->target, b.data, b.len);
		u->target[b.len] = 0;
	}
	pf_buf_release(&b);
	return r < 0 ? -E2BIG : 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Connection.                                                                               */

struct conn {
	int fd;
	SSL *ssl;
	uint64_t deadline;
	uint32_t timeout_ms;
	const atomic_bool *cancel;
	struct pf_error *err;
};

static int conn_wait(struct conn *c, short events)
{
	for (;;) {
		if (c->cancel && atomic_load(c->cancel))
			return pf_error_set(c->err, -ECANCELED, "", "scrape cancelled");
		uint64_t now = pf_pprof_now_ms();
		if (now >= c->deadline)
			return pf_error_set(c->err, -ETIMEDOUT, "",
					    "timed out after %" PRIu32 " ms", c->timeout_ms);
		uint64_t left = c->deadline - now;
		struct pollfd pfd = {.fd = c->fd, .events = events};
		int n = poll(&pfd, 1, (int)(left < SLICE_MS ? left : SLICE_MS));
		if (n < 0 && errno != EINTR)
			return pf_error_set(c->err, -errno, "", "poll: %s", strerror(errno));
		if (n > 0)
			return 0;
	}
}

static int tls_error(struct conn *c, const char *what)
{
	unsigned long e = ERR_get_error();
	char buf[256] = "";
	if (e)
		ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	long v = SSL_get_verify_result(c->ssl);
	if (v != X509_V_OK)
		return pf_error_set(c->err, -EPROTO, "",
				    "TLS %s: certificate verification failed: "
				    "%s",
				    what, X509_verify_cert_error_string(v));
	return pf_error_set(c->err, -EPROTO, "", "TLS %s failed%s%s", what, *buf ? ": " : "", buf);
}

/* Waits as an SSL call asked: 0 to retry, < 0 error. */
static int tls_retry(struct conn *c, int ret, const char *what)
{
	int e = SSL_get_error(c->ssl, ret);
	if (e == SSL_ERROR_WANT_READ)
		return conn_wait(c, POLLIN);
	if (e == SSL_ERROR_WANT_WRITE)
		return conn_wait(c, POLLOUT);
	return tls_error(c, what);
}

static int conn_open(struct conn *c, const struct url *u, SSL_CTX *ctx)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct addrinfo *ai = NULL;
	int g = getaddrinfo(u->host, u->port, &hints, &ai);
	if (g)
		return pf_error_set(c->err, -EHOSTUNREACH, "", "resolve %s: %s", u->host,
				    gai_strerror(g));
	int r = -ECONNREFUSED;
	for (struct addrinfo *a = ai; a; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
				a->ai_protocol);
		if (fd < 0) {
			r = -errno;
			continue;
		}
		c->fd = fd;
		if (connect(fd, a->ai_addr, a->ai_addrlen) < 0 && errno != EINPROGRESS) {
			r = -errno;
		} else if ((r = conn_wait(c, POLLOUT)) == 0) {
			int soerr = 0;
			socklen_t sl = sizeof(soerr);
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
			r = -soerr;
		}
		if (r == 0)
			break;
		close(fd);
		c->fd = -1;
		if (r == -ETIMEDOUT || r == -ECANCELED)
			break;
	}
	freeaddrinfo(ai);
	if (r < 0)
		return pf_error_set(c->err, r, "", "connect %s:%s: %s", u->host, u->port,
				    strerror(-r));
	if (!u->tls)
		return 0;
	c->ssl = SSL_new(ctx);
	if (!c->ssl || !SSL_set_fd(c->ssl, c->fd))
		return tls_error(c, "setup");
	if (!u->ip_literal)
		SSL_set_tlsext_host_name(c->ssl, u->host);
	if (!SSL_set1_host(c->ssl, u->host))
		return tls_error(c, "setup");
	for (;;) {
		int ret = SSL_connect(c->ssl);
		if (ret == 1)
			return 0;
		if ((r = tls_retry(c, ret, "handshake")) < 0)
			return r;
	}
}

static void conn_close(struct conn *c)
{
	if (c->ssl)
		SSL_free(c->ssl);
	if (c->fd >= 0)
		close(c->fd);
	c->ssl = NULL;
	c->fd = -1;
}

static int conn_write(struct conn *c, const char *p, size_t n)
{
	while (n) {
		ssize_t w;
		if (c->ssl) {
			size_t done = 0;
			int ret = SSL_write_ex(c->ssl, p, n, &done);
			if (ret <= 0) {
				int r = tls_retry(c, ret, "write");
				if (r < 0)
					return r;
				continue;
			}
			w = (ssize_t)done;
		} else {
			w = send(c->fd, p, n, MSG_NOSIGNAL);
			if (w < 0) {
				if (errno == EINTR)
					continue;
				if (errno != EAGAIN && errno != EWOULDBLOCK)
					return pf_error_set(c->err, -errno, "", "send: %s",
							    strerror(errno));
				int r = conn_wait(c, POLLOUT);
				if (r < 0)
					return r;
				continue;
			}
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* > 0 bytes read, 0 at the end of the stream, < 0 error. */
static ssize_t conn_read(struct conn *c, void *buf, size_t n)
{
	for (;;) {
		if (c->ssl) {
			size_t got = 0;
			int ret = SSL_read_ex(c->ssl, buf, n, &got);
			if (ret > 0)
				return (ssize_t)got;
			int e = SSL_get_error(c->ssl, ret);
			if (e == SSL_ERROR_ZERO_RETURN)
				return 0;
			if (e == SSL_ERROR_SYSCALL && !ERR_peek_error())
				return 0; /* closed without close_notify: framing decides */
			int r = tls_retry(c, ret, "read");
			if (r < 0)
				return r;
			continue;
		}
		ssize_t got = recv(c->fd, buf, n, 0);
		if (got >= 0)
			return got;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return pf_error_set(c->err, -errno, "", "recv: %s", strerror(errno));
		int r = conn_wait(c, POLLIN);
		if (r < 0)
			return r;
	}
}

/* ---------------------------------------------------------------------------------------- */
/* HTTP GET.                                                                                 */

struct http_resp {
	int status;
	bool chunked, gzip, have_length;
	uint64_t length;
	struct pf_buf body;
};

/* The value of header `name` in the header block [h, e), NULL when absent. */
static const char *header_value(const char *h, const char *e, const char *name, size_t *len)
{
	size_t nl = strlen(name);
	const char *line = memchr(h, '\n', (size_t)(e - h)); /* skip the status line */
	while (line && line < e) {
		line++;
		const char *eol = memchr(line, '\n', (size_t)(e - line));
		if (!eol)
			eol = e;
		if ((size_t)(eol - line) > nl && strncasecmp(line, name, nl) == 0 &&
		    line[nl] == ':') {
			const char *v = line + nl + 1;
			while (v < eol && (*v == ' ' || *v == '\t'))
				v++;
			const char *ve = eol;
			while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			*len = (size_t)(ve - v);
			return v;
		}
		line = eol;
	}
	return NULL;
}

static int parse_head(const char *h, size_t n, struct http_resp *resp, struct pf_error *err)
{
	const char *e = h + n;
	if (n < 12 || strncmp(h, "HTTP/1.", 7) != 0 || h[8] != ' ' ||
	    !isdigit((unsigned char)h[9]) || !isdigit((unsigned char)h[10]) ||
	    !isdigit((unsigned char)h[11]))
		return pf_error_set(err, -EPROTO, "", "not an HTTP/1.x response");
	resp->status = (h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0');
	size_t vl;
	const char *v = header_value(h, e, "Transfer-Encoding", &vl);
	if (v) {
		if (vl < 7 || strncasecmp(v + vl - 7, "chunked", 7) != 0)
			return pf_error_set(err, -EPROTO, "", "unsupported Transfer-Encoding");
		resp->chunked = true;
	}
	v = header_value(h, e, "Content-Length", &vl);
	if (v && !resp->chunked) {
		char tmp[24];
		char *end;
		if (!vl || vl >= sizeof(tmp))
			return pf_error_set(err, -EPROTO, "", "bad Content-Length");
		memcpy(tmp, v, vl);
		tmp[vl] = 0;
		errno = 0;
		unsigned long long len = strtoull(tmp, &end, 10);
		if (*end || errno || tmp[0] == '-')
			return pf_error_set(err, -EPROTO, "", "bad Content-Length");
		resp->have_length = true;
		resp->length = len;
	}
	v = header_value(h, e, "Content-Encoding", &vl);
	if (v && vl) {
		if ((vl == 4 && strncasecmp(v, "gzip", 4) == 0) ||
		    (vl == 6 && strncasecmp(v, "x-gzip", 6) == 0))
			resp->gzip = true;
		else if (!(vl == 8 && strncasecmp(v, "identity", 8) == 0))
			return pf_error_set(err, -EPROTO, "", "unsupported Content-Encoding %.*s",
					    (int)(vl > 32 ? 32 : vl), v);
	}
	return 0;
}

/* Undoes the chunked transfer coding of raw into out (RFC 9112 section 7.1). */
static int dechunk(const uint8_t *p, size_t n, size_t max, struct pf_buf *out, struct pf_error *err)
{
	size_t i = 0;
	for (;;) {
		uint64_t size = 0;
		size_t digits = 0;
		while (i < n && isxdigit(p[i])) {
			if (size >> 60)
				return pf_error_set(err, -EPROTO, "", "bad chunk size");
			int d = isdigit(p[i]) ? p[i] - '0' : (tolower(p[i]) - 'a' + 10);
			size = size * 16 + (uint64_t)d;
			i++;
			digits++;
		}
		if (!digits)
			return pf_error_set(err, -EPROTO, "", "bad or truncated chunked body");
		while (i < n && p[i] != '\n') /* chunk extensions */
			i++;
		if (i >= n)
			return pf_error_set(err, -EPROTO, "", "truncated chunked body");
		i++;
		if (!size)
			return 0; /* trailers ignored */
		if (size > n - i)
			return pf_error_set(err, -EPROTO, "", "truncated chunked body");
		if (out->len + size > max)
			return pf_error_set(err, -E2BIG, "", "response over %zu bytes", max);
		int r = pf_buf_append(out, p + i, (size_t)size);
		if (r < 0)
			return r;
		i += (size_t)size;
		if (i < n && p[i] == '\r')
			i++;
		if (i >= n || p[i] != '\n')
			return pf_error_set(err, -EPROTO, "", "bad chunk framing");
		i++;
	}
}

static int http_get(const struct url *u, SSL_CTX *ctx, uint32_t timeout_ms, size_t max_body,
		    const atomic_bool *cancel, struct http_resp *resp, struct pf_error *err)
{
	struct conn c = {.fd = -1,
			 .deadline = pf_pprof_now_ms() + timeout_ms,
			 .timeout_ms = timeout_ms,
			 .cancel = cancel,
			 .err = err};
	struct pf_buf raw;
	/* chunk framing adds a few bytes per chunk; a generous allowance over max_body */
	size_t raw_max = MAX_HEADERS + max_body + max_body / 8 + 4096;
	pf_buf_init(&raw, raw_max);
	memset(resp, 0, sizeof(*resp));
	pf_buf_init(&resp->body, max_body);
	int r = conn_open(&c, u, ctx);
	if (r < 0)
		goto out;
	char req[sizeof(u->target) + 512];
	bool v6 = strchr(u->host, ':') != NULL;
	bool def_port = strcmp(u->port, u->tls ? "443" : "80") == 0;
	int n = snprintf(req, sizeof(req),
			 "GET %s HTTP/1.1\r\nHost: %s%s%s%s%s\r\nUser-Agent: profleet-agent\r\n"
			 "Accept: */*\r\nConnection: close\r\n\r\n",
			 u->target, v6 ? "[" : "", u->host, v6 ? "]" : "", def_port ? "" : ":",
			 def_port ? "" : u->port);
	if (n < 0 || (size_t)n >= sizeof(req)) {
		r = pf_error_set(err, -E2BIG, "", "request too long");
		goto out;
	}
	if ((r = conn_write(&c, req, (size_t)n)) < 0)
		goto out;

	size_t head_len = 0;
	for (;;) {
		if (resp->have_length && head_len && raw.len - head_len >= resp->length)
			break;
		r = pf_buf_reserve(&raw, 16384);
		if (r == -E2BIG) {
			/* past the cap: a slightly smaller read, else the response is too big */
			size_t room = raw.max > raw.len ? raw.max - raw.len : 0;
			if (!room || pf_buf_reserve(&raw, room) < 0) {
				r = pf_error_set(err, -E2BIG, "", "response over %zu bytes",
						 max_body);
				goto out;
			}
		} else if (r < 0) {
			goto out;
		}
		size_t room = raw.cap - raw.len - 1;
		if (room > 16384)
			room = 16384;
		ssize_t got = conn_read(&c, raw.data + raw.len, room);
		if (got < 0) {
			r = (int)got;
			goto out;
		}
		if (got == 0)
			break;
		raw.len += (size_t)got;
		if (!head_len) {
			size_t scan = raw.len < MAX_HEADERS ? raw.len : MAX_HEADERS;
			for (size_t i = 3; i < scan; i++)
				if (memcmp(raw.data + i - 3, "\r\n\r\n", 4) == 0) {
					head_len = i + 1;
					break;
				}
			if (!head_len && raw.len >= MAX_HEADERS) {
				r = pf_error_set(err, -EPROTO, "",
						 "response headers over %zu bytes", MAX_HEADERS);
				goto out;
			}
			if (head_len) {
				r = parse_head((const char *)raw.data, head_len, resp, err);
				if (r < 0)
					goto out;
				if (resp->have_length && resp->length > max_body) {
					r = pf_error_set(err, -E2BIG, "",
							 "response of %" PRIu64
							 " bytes over the %zu byte limit",
							 resp->length, max_body);
					goto out;
				}
			}
		}
		if (head_len && !resp->chunked && raw.len - head_len > max_body) {
			r = pf_error_set(err, -E2BIG, "", "response over %zu bytes", max_body);
			goto out;
		}
	}
	if (!head_len) {
		r = pf_error_set(err, -EPROTO, "",
				 raw.len ? "truncated response headers" : "empty response");
		goto out;
	}
	const uint8_t *body = raw.data + head_len;
	size_t blen = raw.len - head_len;
	if (resp->chunked) {
		r = dechunk(body, blen, max_body, &resp->body, err);
	} else if (resp->have_length) {
		if (blen < resp->length)
			r = pf_error_set(err, -EPROTO, "",
					 "truncated response: %zu of %" PRIu64 " bytes", blen,
					 resp->length);
		else
			r = pf_buf_append(&resp->body, body, (size_t)resp->length);
	} else {
		r = pf_buf_append(&resp->body, body, blen);
	}
	if (r == 0 && resp->gzip) {
		struct pf_buf plain;
		pf_buf_init(&plain, max_body);
		r = pf_gzip_decompress(resp->body.data, resp->body.len, max_body, &plain);
		if (r < 0) {
			pf_buf_release(&plain);
			r = pf_error_set(err, r, "",
					 r == -E2BIG ? "response over %zu bytes "
						       "after Content-Encoding gzip"
						     : "bad Content-Encoding gzip body "
						       "(limit %zu)",
					 max_body);
		} else {
			pf_buf_release(&resp->body);
			resp->body = plain;
		}
	}
out:
	conn_close(&c);
	pf_buf_release(&raw);
	if (r < 0)
		pf_buf_release(&resp->body);
	return r;
}

static SSL_CTX *tls_ctx_new(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx)
		return NULL;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
	if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

/* ---------------------------------------------------------------------------------------- */
/* Conversion.                                                                               */

static void opts_defaults(const struct pf_pprof_options *in, struct pf_pprof_options *o)
{
	if (in)
		*o = *in;
	else
		memset(o, 0, sizeof(*o));
	if (!o->timeout_ms)
		o->timeout_ms = PF_PPROF_DEFAULT_TIMEOUT_MS;
	if (!o->max_response_bytes)
		o->max_response_bytes = PF_PPROF_DEFAULT_MAX_RESPONSE;
	if (!o->max_decoded_bytes)
		o->max_decoded_bytes = PF_PPROF_DEFAULT_MAX_DECODED;
}

int pf_pprof_convert(const uint8_t *data, size_t len, const struct pf_pprof_target *t,
		     const struct pf_pprof_options *opts_in, uint64_t now_unix_ns,
		     struct pf_prof_window **out, struct pf_error *err)
{
	struct pf_pprof_options opts;
	opts_defaults(opts_in, &opts);
	struct pf_error derr = {0};
	struct pf_prof_window *w = NULL;
	int r = pf_pprof_decode(data, len, opts.max_decoded_bytes, &w, &derr);
	if (r < 0)
		return pf_error_set(err, r, "", "%s pprof: %s",
				    r == -E2BIG ? "oversized" : "malformed", derr.msg);
	r = -ENOMEM;
	if (opts.host_name && *opts.host_name &&
	    !(w->host_name = pf_prof_strdup(w, opts.host_name)))
		goto fail;
	if (!w->start_unix_ns) {
		w->start_unix_ns = now_unix_ns;
		w->end_unix_ns = now_unix_ns;
	}
	const uint8_t *orig = NULL;
	if (t->keep_original && len) {
		uint8_t *c = pf_prof_alloc(w, len);
		if (!c)
			goto fail;
		memcpy(c, data, len);
		orig = c;
	}
	bool have_service = false;
	for (size_t i = 0; i < t->n_attributes; i++)
		have_service |=
		    t->attributes[i].key && strcmp(t->attributes[i].key, "service.name") == 0;
	size_t na = t->n_attributes + !have_service;
	struct pf_prof_attr *attrs = pf_prof_alloc(w, (na ? na : 1) * sizeof(*attrs));
	if (!attrs)
		goto fail;
	size_t n = 0;
	if (!have_service)
		attrs[n++] = (struct pf_prof_attr){"service.name", "unknown_service"};
	for (size_t i = 0; i < t->n_attributes; i++) {
		if (!t->attributes[i].key || !t->attributes[i].value)
			continue;
		attrs[n].key = pf_prof_strdup(w, t->attributes[i].key);
		attrs[n].value = pf_prof_strdup(w, t->attributes[i].value);
		if (!attrs[n].key || !attrs[n].value)
			goto fail;
		n++;
	}
	struct pf_prof_process *procs = (struct pf_prof_process *)w->processes;
	for (size_t i = 0; i < w->n_processes; i++) {
		procs[i].attrs = attrs;
		procs[i].n_attrs = n;
		if (orig) {
			procs[i].original_payload = orig;
			procs[i].original_payload_len = len;
			procs[i].original_payload_format = "pprof";
		}
	}
	*out = w;
	return 0;
fail:
	pf_prof_window_free(w);
	return r;
}

/* Timeout of a scrape: the configured one, plus the profile's duration for cpu. */
static uint32_t scrape_timeout(const struct pf_pprof_target *t, const struct url *u,
			       uint32_t timeout_ms)
{
	if (t->type != PF_PPROF_CPU)
		return timeout_ms;
	uint64_t ms = (uint64_t)url_seconds(u, GO_DEFAULT_CPU_SECONDS) * 1000u + timeout_ms;
	return ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
}

static int scrape(const struct pf_pprof_target *t, const struct pf_pprof_options *opts,
		  uint32_t cpu_seconds, SSL_CTX *ctx, const atomic_bool *cancel,
		  struct pf_prof_window **out, size_t *bytes, int *status, struct pf_error *err)
{
	struct url u;
	*status = 0;
	*bytes = 0;
	int r = url_parse(t->url, &u, err, "");
	if (r < 0)
		return r;
	if (t->type == PF_PPROF_CPU && cpu_seconds && url_set_seconds(&u, cpu_seconds) < 0)
		return pf_error_set(err, -E2BIG, "", "URL too long");
	if (u.tls && !ctx)
		return pf_error_set(err, -EPROTO, "", "TLS unavailable");
	uint64_t t0 = wall_ns();
	struct http_resp resp;
	r = http_get(&u, ctx, scrape_timeout(t, &u, opts->timeout_ms), opts->max_response_bytes,
		     cancel, &resp, err);
	if (r < 0)
		return r;
	*status = resp.status;
	*bytes = resp.body.len;
	if (resp.status != 200) {
		char snippet[121];
		size_t k = 0;
		for (size_t i = 0; i < resp.body.len && k < sizeof(snippet) - 1; i++) {
			uint8_t ch = resp.body.data[i];
			if (ch == '\n' || ch == '\r' || ch == '\t')
				ch = ' ';
			snippet[k++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
		}
		while (k && snippet[k - 1] == ' ')
			k--;
		snippet[k] = 0;
		pf_buf_release(&resp.body);
		return pf_error_set(err, -EPROTO, "", "HTTP %d%s%s", resp.status, k ? ": " : "",
				    snippet);
	}
	if (!resp.body.len) {
		pf_buf_release(&resp.body);
		return pf_error_set(err, -EBADMSG, "", "empty response body");
	}
	r = pf_pprof_convert(resp.body.data, resp.body.len, t, opts, t0, out, err);
	pf_buf_release(&resp.body);
	return r;
}

int pf_pprof_scrape_once(const struct pf_pprof_target *t, const struct pf_pprof_options *opts_in,
			 uint32_t cpu_seconds, struct pf_prof_window **out, int *http_status,
			 struct pf_error *err)
{
	struct pf_pprof_options opts;
	opts_defaults(opts_in, &opts);
	struct url u;
	int r = url_parse(t->url, &u, err, "");
	if (r < 0)
		return r;
	SSL_CTX *ctx = NULL;
	if (u.tls && !(ctx = tls_ctx_new()))
		return pf_error_set(err, -ENOMEM, "", "TLS context");
	int status;
	size_t bytes;
	r = scrape(t, &opts, cpu_seconds, ctx, NULL, out, &bytes, &status, err);
	if (http_status)
		*http_status = status;
	SSL_CTX_free(ctx);
	return r;
}

/* ---------------------------------------------------------------------------------------- */
/* Sources.                                                                                  */

struct target {
	struct pf_pprof_target cfg;
	struct pf_pprof_sources *owner;
	size_t index;
	bool removed; /* no longer configured; freed once its worker is joined */
	bool started_once;
	uint64_t last_start_ms;
	bool trigger_pending;
	uint32_t trigger_seconds;
	/* the worker */
	bool running;  /* in flight */
	bool joinable; /* a thread exists that was not joined yet */
	pthread_t thr;
	atomic_bool cancel;
	struct pf_pprof_target job; /* the worker's private copy */
	uint32_t job_seconds;
	struct pf_pprof_health health;
};

struct pf_pprof_sources {
	pthread_mutex_t mu;
	struct pf_pprof_options opts;
	char *host_name;
	struct target **t;
	size_t n;
	struct target **gone; /* removed targets whose worker is not joined yet */
	size_t n_gone;
	size_t running;
	struct pf_pprof_result **q;
	size_t q_head, q_len, q_cap;
	int efd;
	SSL_CTX *ssl;
};

static void cfg_release(struct pf_pprof_target *c)
{
	free(c->url);
	for (size_t i = 0; i < c->n_attributes; i++) {
		free(c->attributes[i].key);
		free(c->attributes[i].value);
	}
	free(c->attributes);
	memset(c, 0, sizeof(*c));
}

static int cfg_copy(struct pf_pprof_target *d, const struct pf_pprof_target *s)
{
	memset(d, 0, sizeof(*d));
	d->type = s->type;
	d->interval_seconds = s->interval_seconds;
	d->keep_original = s->keep_original;
	d->url = strdup(s->url ? s->url : "");
	d->attributes = calloc(s->n_attributes + 1, sizeof(*d->attributes));
	if (!d->url || !d->attributes)
		goto fail;
	for (size_t i = 0; i < s->n_attributes; i++) {
		d->attributes[i].key = strdup(s->attributes[i].key ? s->attributes[i].key : "");
		d->attributes[i].value =
		    strdup(s->attributes[i].value ? s->attributes[i].value : "");
		d->n_attributes = i + 1;
		if (!d->attributes[i].key || !d->attributes[i].value)
			goto fail;
	}
	return 0;
fail:
	cfg_release(d);
	return -ENOMEM;
}

static void target_free(struct target *t)
{
	if (!t)
		return;
	cfg_release(&t->cfg);
	cfg_release(&t->job);
	free(t);
}

static int check_targets(const struct pf_pprof_target *targets, size_t n, struct pf_error *err)
{
	for (size_t i = 0; i < n; i++) {
		char path[64];
		struct url u;
		snprintf(path, sizeof(path), "profiling.pprof.targets[%zu].url", i);
		int r = url_parse(targets[i].url, &u, err, path);
		if (r < 0)
			return r;
		if ((unsigned)targets[i].type > PF_PPROF_THREADCREATE)
			return pf_error_set(err, -EINVAL, "",
					    "profiling.pprof.targets[%zu].type: "
					    "unknown type",
					    i);
	}
	return 0;
}

static void wake(struct pf_pprof_sources *s)
{
	uint64_t one = 1;
	ssize_t w = write(s->efd, &one, sizeof(one));
	(void)w;
	if (s->opts.on_ready)
		s->opts.on_ready(s->opts.on_ready_arg);
}

/* Under the lock. */
static int q_push(struct pf_pprof_sources *s, struct pf_pprof_result *r)
{
	if (s->q_len == s->q_cap) {
		size_t cap = s->q_cap ? s->q_cap * 2 : 8;
		struct pf_pprof_result **q = malloc(cap * sizeof(*q));
		if (!q)
			return -ENOMEM;
		for (size_t i = 0; i < s->q_len; i++)
			q[i] = s->q[(s->q_head + i) % s->q_cap];
		free(s->q);
		s->q = q;
		s->q_cap = cap;
		s->q_head = 0;
	}
	s->q[(s->q_head + s->q_len++) % s->q_cap] = r;
	return 0;
}

static void *worker(void *arg)
{
	struct target *t = arg;
	struct pf_pprof_sources *s = t->owner;
	struct pf_error err = {0};
	struct pf_prof_window *w = NULL;
	size_t bytes = 0;
	int status = 0;
	uint64_t t0 = pf_pprof_now_ms();
	int r = scrape(&t->job, &s->opts, t->job_seconds, s->ssl, &t->cancel, &w, &bytes, &status,
		       &err);
	uint64_t dur = pf_pprof_now_ms() - t0;
	struct pf_pprof_result *res = NULL;
	if (r == 0) {
		res = calloc(1, sizeof(*res));
		if (res)
			res->url = strdup(t->job.url);
		if (!res || !res->url) {
			pf_error_set(&err, -ENOMEM, "", "out of memory");
			r = -ENOMEM;
		}
	}
	bool queued = false;
	pthread_mutex_lock(&s->mu);
	struct pf_pprof_health *h = &t->health;
	h->last_duration_ms = dur > UINT32_MAX ? UINT32_MAX : (uint32_t)dur;
	h->last_http_status = status;
	if (r == 0 && !t->removed) {
		res->target = t->index;
		res->type = t->job.type;
		res->bytes = bytes;
		res->window = w;
		if (q_push(s, res) == 0) {
			queued = true;
			h->healthy = true;
			h->scrapes_ok++;
			h->last_ok_unix_ns = wall_ns();
			h->last_errno = 0;
			h->last_bytes = bytes;
			h->last_samples = pf_prof_window_samples(w);
			h->last_error[0] = 0;
		} else {
			r = pf_error_set(&err, -ENOMEM, "", "out of memory");
		}
	}
	if (r < 0 && !t->removed) {
		h->healthy = false;
		h->scrapes_failed++;
		h->last_errno = r;
		snprintf(h->last_error, sizeof(h->last_error), "%s",
			 err.msg[0] ? err.msg : strerror(-r));
	}
	pthread_mutex_unlock(&s->mu);
	if (queued) {
		wake(s);
	} else {
		if (res)
			free(res->url);
		free(res);
		pf_prof_window_free(w);
	}
	/* Only now "not running": once busy() is false, every wake-up has been delivered. */
	pthread_mutex_lock(&s->mu);
	t->running = false;
	s->running--;
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* Under the lock: starts t's scrape. */
/* now_ms: the caller's clock reading, the start of the target's interval (so a slow start
 * does not push the schedule) */
static int start(struct pf_pprof_sources *s, struct target *t, uint32_t seconds, uint64_t now_ms)
{
	cfg_release(&t->job);
	int r = cfg_copy(&t->job, &t->cfg);
	struct url u;
	if (r == 0 && url_parse(t->cfg.url, &u, NULL, "") == 0 && u.tls && !s->ssl) {
		s->ssl = tls_ctx_new();
		if (!s->ssl)
			r = -ENOMEM;
	}
	if (r == 0 && t->joinable) {
		/* finished but not reaped yet: reap now (it no longer runs) */
		pthread_join(t->thr, NULL);
		t->joinable = false;
	}
	t->last_start_ms = now_ms;
	t->started_once = true;
	t->trigger_pending = false;
	t->health.last_attempt_unix_ns = wall_ns();
	if (r == 0) {
		t->job_seconds = seconds;
		atomic_store(&t->cancel, false);
		t->running = true;
		s->running++;
		r = -pthread_create(&t->thr, NULL, worker, t);
		if (r < 0) {
			t->running = false;
			s->running--;
		} else {
			t->joinable = true;
		}
	}
	if (r < 0) {
		t->health.healthy = false;
		t->health.scrapes_failed++;
		t->health.last_errno = r;
		snprintf(t->health.last_error, sizeof(t->health.last_error),
			 "cannot start scrape: %s", strerror(-r));
	}
	return r;
}

static void health_init(struct pf_pprof_health *h)
{
	memset(h, 0, sizeof(*h));
	h->healthy = true;
}

static struct target *target_new(struct pf_pprof_sources *s, const struct pf_pprof_target *c,
				 size_t index)
{
	struct target *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	if (cfg_copy(&t->cfg, c) < 0) {
		free(t);
		return NULL;
	}
	t->owner = s;
	t->index = index;
	atomic_init(&t->cancel, false);
	health_init(&t->health);
	return t;
}

struct pf_pprof_sources *pf_pprof_sources_new(const struct pf_pprof_target *targets, size_t n,
					      const struct pf_pprof_options *opts,
					      struct pf_error *err)
{
	int r = check_targets(targets, n, err);
	if (r < 0) {
		errno = -r;
		return NULL;
	}
	struct pf_pprof_sources *s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->efd = -1;
	pthread_mutex_init(&s->mu, NULL);
	opts_defaults(opts, &s->opts);
	if (s->opts.host_name) {
		s->host_name = strdup(s->opts.host_name);
		if (!s->host_name)
			goto nomem;
		s->opts.host_name = s->host_name;
	}
	s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->efd < 0) {
		r = errno;
		pf_pprof_sources_free(s);
		pf_error_set(err, -r, "", "eventfd: %s", strerror(r));
		errno = r;
		return NULL;
	}
	s->t = calloc(n + 1, sizeof(*s->t));
	if (!s->t)
		goto nomem;
	for (size_t i = 0; i < n; i++) {
		s->t[i] = target_new(s, &targets[i], i);
		if (!s->t[i])
			goto nomem;
		s->n = i + 1;
	}
	return s;
nomem:
	pf_pprof_sources_free(s);
	pf_error_set(err, -ENOMEM, "", "out of memory");
	errno = ENOMEM;
	return NULL;
}

int pf_pprof_sources_update(struct pf_pprof_sources *s, const struct pf_pprof_target *targets,
			    size_t n, struct pf_error *err)
{
	int r = check_targets(targets, n, err);
	if (r < 0)
		return r;
	pthread_mutex_lock(&s->mu);
	/* Everything is allocated before anything changes. */
	struct target **nt = calloc(n + 1, sizeof(*nt));
	struct pf_pprof_target *copies = calloc(n + 1, sizeof(*copies));
	bool *reused = calloc(s->n + 1, sizeof(*reused));
	bool *fresh = calloc(n + 1, sizeof(*fresh));
	struct target **gone = realloc(s->gone, (s->n_gone + s->n + 1) * sizeof(*gone));
	if (gone)
		s->gone = gone;
	r = nt && copies && reused && fresh && gone ? 0 : -ENOMEM;
	for (size_t i = 0; i < n && r == 0; i++) {
		size_t j = 0;
		while (j < s->n && (reused[j] || s->t[j]->cfg.type != targets[i].type ||
				    strcmp(s->t[j]->cfg.url, targets[i].url) != 0))
			j++;
		if (j < s->n) {
			reused[j] = true;
			nt[i] = s->t[j];
			r = cfg_copy(&copies[i], &targets[i]);
		} else {
			nt[i] = target_new(s, &targets[i], i);
			fresh[i] = true;
			r = nt[i] ? 0 : -ENOMEM;
		}
	}
	if (r < 0) {
		for (size_t i = 0; i < n && copies && fresh && nt; i++) {
			cfg_release(&copies[i]);
			if (fresh[i])
				target_free(nt[i]);
		}
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (!fresh[i]) {
			cfg_release(&nt[i]->cfg);
			nt[i]->cfg = copies[i];
		}
		nt[i]->index = i;
	}
	for (size_t j = 0; j < s->n; j++) {
		if (reused[j])
			continue;
		struct target *t = s->t[j];
		t->removed = true;
		atomic_store(&t->cancel, true);
		if (t->joinable)
			s->gone[s->n_gone++] = t;
		else
			target_free(t);
	}
	free(s->t);
	s->t = nt;
	s->n = n;
	nt = NULL;
out:
	pthread_mutex_unlock(&s->mu);
	free(nt);
	free(copies);
	free(reused);
	free(fresh);
	return r < 0 ? pf_error_set(err, r, "", "out of memory") : 0;
}

/* Joins finished workers (also of removed targets). Collects under the lock, joins outside:
 * a finished worker only has its wake-up left to do. */
static void reap(struct pf_pprof_sources *s)
{
	pthread_t thr[PF_PPROF_MAX_INFLIGHT * 2 + 64];
	size_t nthr = 0;
	struct target *dead[64];
	size_t ndead = 0;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->n && nthr < PF_ARRAY_SIZE(thr); i++) {
		struct target *t = s->t[i];
		if (t->joinable && !t->running) {
			thr[nthr++] = t->thr;
			t->joinable = false;
		}
	}
	for (size_t i = 0;
	     i < s->n_gone && nthr < PF_ARRAY_SIZE(thr) && ndead < PF_ARRAY_SIZE(dead);) {
		struct target *t = s->gone[i];
		if (!t->running) {
			thr[nthr++] = t->thr;
			dead[ndead++] = t;
			s->gone[i] = s->gone[--s->n_gone];
		} else {
			i++;
		}
	}
	pthread_mutex_unlock(&s->mu);
	for (size_t i = 0; i < nthr; i++)
		pthread_join(thr[i], NULL);
	for (size_t i = 0; i < ndead; i++)
		target_free(dead[i]);
}

int pf_pprof_sources_poll(struct pf_pprof_sources *s, uint64_t now_ms, int64_t *next_ms)
{
	reap(s);
	int started = 0, err = 0;
	int64_t next = -1;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->n; i++) {
		struct target *t = s->t[i];
		if (t->running)
			continue;
		uint64_t due = UINT64_MAX;
		if (t->trigger_pending)
			due = 0;
		else if (t->cfg.interval_seconds)
			due = t->started_once ? t->last_start_ms + t->cfg.interval_seconds * 1000ull
					      : 0;
		if (due <= now_ms && s->running < PF_PPROF_MAX_INFLIGHT) {
			int r = start(s, t, t->trigger_pending ? t->trigger_seconds : 0, now_ms);
			if (r < 0)
				err = r;
			else
				started++;
			if (t->cfg.interval_seconds)
				due = t->last_start_ms + t->cfg.interval_seconds * 1000ull;
			else
				continue;
		}
		if (due == UINT64_MAX)
			continue;
		int64_t in = due > now_ms ? (int64_t)(due - now_ms) : 0;
		if (next < 0 || in < next)
			next = in;
	}
	pthread_mutex_unlock(&s->mu);
	if (next_ms)
		*next_ms = next;
	return started ? started : err;
}

int pf_pprof_sources_trigger(struct pf_pprof_sources *s, long index, uint32_t seconds)
{
	reap(s);
	int r = 0, started = 0;
	pthread_mutex_lock(&s->mu);
	if (index != PF_PPROF_ALL_TARGETS && (index < 0 || (size_t)index >= s->n)) {
		r = -ENOENT;
		goto out;
	}
	size_t lo = index == PF_PPROF_ALL_TARGETS ? 0 : (size_t)index;
	size_t hi = index == PF_PPROF_ALL_TARGETS ? s->n : (size_t)index + 1;
	for (size_t i = lo; i < hi; i++) {
		struct target *t = s->t[i];
		if (t->running) {
			if (index != PF_PPROF_ALL_TARGETS)
				r = -EBUSY;
			continue;
		}
		if (s->running >= PF_PPROF_MAX_INFLIGHT) {
			/* started by the next poll */
			t->trigger_pending = true;
			t->trigger_seconds = seconds;
			continue;
		}
		int e = start(s, t, seconds, pf_pprof_now_ms());
		if (e < 0)
			r = e;
		else
			started++;
	}
	if (r == 0 && index == PF_PPROF_ALL_TARGETS)
		r = started;
out:
	pthread_mutex_unlock(&s->mu);
	return r;
}

struct pf_pprof_result *pf_pprof_sources_pop(struct pf_pprof_sources *s)
{
	struct pf_pprof_result *r = NULL;
	pthread_mutex_lock(&s->mu);
	if (s->q_len) {
		r = s->q[s->q_head];
		s->q_head = (s->q_head + 1) % s->q_cap;
		s->q_len--;
	}
	if (!s->q_len) {
		uint64_t v;
		ssize_t n = read(s->efd, &v, sizeof(v));
		(void)n;
	}
	pthread_mutex_unlock(&s->mu);
	return r;
}

void pf_pprof_result_free(struct pf_pprof_result *r)
{
	if (!r)
		return;
	pf_prof_window_free(r->window);
	free(r->url);
	free(r);
}

int pf_pprof_sources_wake_fd(const struct pf_pprof_sources *s)
{
	return s->efd;
}

size_t pf_pprof_sources_count(const struct pf_pprof_sources *s)
{
	return s->n;
}

int pf_pprof_sources_health(struct pf_pprof_sources *s, size_t index, struct pf_pprof_health *out)
{
	int r = -ENOENT;
	pthread_mutex_lock(&s->mu);
	if (index < s->n) {
		*out = s->t[index]->health;
		out->running = s->t[index]->running;
		r = 0;
	}
	pthread_mutex_unlock(&s->mu);
	return r;
}

bool pf_pprof_sources_busy(struct pf_pprof_sources *s)
{
	pthread_mutex_lock(&s->mu);
	bool b = s->running > 0;
	pthread_mutex_unlock(&s->mu);
	return b;
}

void pf_pprof_sources_free(struct pf_pprof_sources *s)
{
	if (!s)
		return;
	if (s->t || s->gone) {
		pthread_mutex_lock(&s->mu);
		for (size_t i = 0; i < s->n; i++) {
			atomic_store(&s->t[i]->cancel, true);
			s->t[i]->removed = true;
		}
		pthread_mutex_unlock(&s->mu);
		for (size_t i = 0; i < s->n; i++) {
			if (s->t[i]->joinable)
				pthread_join(s->t[i]->thr, NULL);
			target_free(s->t[i]);
		}
		for (size_t i = 0; i < s->n_gone; i++) {
			pthread_join(s->gone[i]->thr, NULL);
			target_free(s->gone[i]);
		}
	}
	while (s->q_len) {
		pf_pprof_result_free(s->q[s->q_head]);
		s->q_head = (s->q_head + 1) % s->q_cap;
		s->q_len--;
	}
	free(s->q);
	free(s->t);
	free(s->gone);
	if (s->efd >= 0)
		close(s->efd);
	pthread_mutex_destroy(&s->mu);
	SSL_CTX_free(s->ssl);
	free(s->host_name);
	free(s);
}
