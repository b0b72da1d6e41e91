/* otlp_http.c — see otlp_http.h. One non-blocking socket driven with poll(2) against a single
 * deadline, so every step (connect, TLS handshake, write, read) shares the timeout. HTTP/1.1
 * per RFC 9112: request line, Host, Content-Length framing; the response is read until the
 * peer closes (we send "Connection: close") or Content-Length bytes arrived. */
#include "otlp_http.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "pf/buf.h"
#include "pf/compiler.h"
#include "pf/gzip.h"

#define MAX_RESPONSE ((size_t)1 << 20)

struct agent_otlp_http {
	bool tls;
	char host[256];
	char port[8];
	char *path;
	char *base_path; /* the endpoint's own path, "" when none or "/" */
	char *url;
	bool gzip;
	uint32_t timeout_ms;
	struct pf_buf extra_headers; /* "Name: value\r\n"... */
	SSL_CTX *ctx;
	char *server_name; /* tls.server_name: SNI and the verified name; NULL: host */
	bool verify;	   /* false with tls.insecure_skip_verify */
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static bool header_ok(const char *s, bool name)
{
	if (!s || (name && !*s))
		return false;
	for (; *s; s++)
		if (*s == '\r' || *s == '\n' || (name && (*s == ':' || *s == ' ')))
			return false;
	return true;
}

/* http[s]://host[:port][/path]; host may be [v6]. */
static int parse_url(struct agent_otlp_http *h, const char *url, struct pf_error *err)
{
	const char *p;
	if (strncasecmp(url, "http://", 7) == 0) { /* RFC 3986 §3.1: case-insensitive */
		p = url + 7;
	} else if (strncasecmp(url, "https://", 8) == 0) {
		p = url + 8;
		h->tls = true;
	} else {
		return pf_error_set(err, -EINVAL, "endpoint",
				    "must start with http:// or https://");
	}
	const char *host_end, *after;
	if (*p == '[') {
		host_end = strchr(p, ']');
		if (!host_end)
			return pf_error_set(err, -EINVAL, "endpoint", "unterminated [IPv6] host");
		p++;
		after = host_end + 1;
	} else {
		host_end = p + strcspn(p, ":/?#");
		after = host_end;
	}
	size_t hl = (size_t)(host_end - p);
	if (!hl || hl >= sizeof(h->host))
		return pf_error_set(err, -EINVAL, "endpoint", "bad host");
	memcpy(h->host, p, hl);
	h->host[hl] = 0;
	snprintf(h->port, sizeof(h->port), "%s", h->tls ? "443" : "80");
	if (*after == ':') {
		char *end;
		long port = strtol(after + 1, &end, 10);
		if (end == after + 1 || port < 1 || port > 65535 || (*end && *end != '/'))
			return pf_error_set(err, -EINVAL, "endpoint", "bad port");
		snprintf(h->port, sizeof(h->port), "%ld", port);
		after = end;
	}
	if (*after && *after != '/')
		return pf_error_set(err, -EINVAL, "endpoint", "unexpected '%c' after host", *after);
	const char *path = *after && strcmp(after, "/") != 0 ? after : AGENT_OTLP_HTTP_DEFAULT_PATH;
	for (const char *c = path; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7f)
			return pf_error_set(err, -EINVAL, "endpoint", "bad character in path");
	h->path = strdup(path);
	/* the base for targets of our own (pyroscope's /ingest): no trailing '/' */
	size_t bl = *after && strcmp(after, "/") != 0 ? strlen(after) : 0;
	while (bl && after[bl - 1] == '/')
		bl--;
	h->base_path = strndup(after, bl);
	return h->path && h->base_path ? 0 : -ENOMEM;
}

/* The reason of the first (root) OpenSSL error queued, e.g. "No such file or directory", "no
 * certificate or crl found", "no start line", "key values mismatch"; the queue is cleared. */
static const char *ssl_reason(char *buf, size_t n)
{
	unsigned long first = ERR_get_error();
	const char *r = NULL;
	if (first && ERR_SYSTEM_ERROR(first))
		r = strerror(ERR_GET_REASON(first));
	else if (first)
		r = ERR_reason_error_string(first);
	ERR_clear_error();
	snprintf(buf, n, "%s", r ? r : "unknown OpenSSL error");
	return buf;
}

/* The TLS context of an https:// exporter, from cfg->tls (pf/profcfg.h): trusted CAs (ca_file
 * replaces the default store), the client certificate, verification on unless
 * insecure_skip_verify. A file that does not load fails with its key path ("tls.ca_file") and
 * OpenSSL's reason. */
static int tls_setup(struct agent_otlp_http *h, const struct pf_exporter_tls *t,
		     struct pf_error *err)
{
	char why[256];
	ERR_clear_error();
	h->ctx = SSL_CTX_new(TLS_client_method());
	if (!h->ctx)
		return pf_error_set(err, -ENOMEM, "", "cannot set up TLS: %s",
				    ssl_reason(why, sizeof(why)));
	SSL_CTX_set_min_proto_version(h->ctx, TLS1_2_VERSION);
	/* Servers that close without close_notify (Python's ssl, many proxies) would otherwise
	 * fail a response read until close with "unexpected eof"; the framing (Content-Length,
	 * last chunk) tells a cut body. */
	SSL_CTX_set_options(h->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	if (t->ca_file) {
		if (SSL_CTX_load_verify_locations(h->ctx, t->ca_file, NULL) != 1)
			return pf_error_set(err, -EINVAL, "tls.ca_file", "cannot load %s: %s",
					    t->ca_file, ssl_reason(why, sizeof(why)));
	} else if (SSL_CTX_set_default_verify_paths(h->ctx) != 1) {
		return pf_error_set(err, -EINVAL, "", "cannot load the default CA store: %s",
				    ssl_reason(why, sizeof(why)));
	}
	if (t->cert_file || t->key_file) {
		if (!t->cert_file || !t->key_file)
			return pf_error_set(err, -EINVAL, t->cert_file ? "tls.key_file" : "tls.cert_file",
					    "cert_file and key_file go together");
		if (SSL_CTX_use_certificate_chain_file(h->ctx, t->cert_file) != 1)
			return pf_error_set(err, -EINVAL, "tls.cert_file", "cannot load %s: %s",
					    t->cert_file, ssl_reason(why, sizeof(why)));
		if (SSL_CTX_use_PrivateKey_file(h->ctx, t->key_file, SSL_FILETYPE_PEM) != 1)
			return pf_error_set(err, -EINVAL, "tls.key_file", "cannot load %s: %s",
					    t->key_file, ssl_reason(why, sizeof(why)));
		if (SSL_CTX_check_private_key(h->ctx) != 1)
			return pf_error_set(err, -EINVAL, "tls.key_file",
					    "%s does not match the certificate of %s: %s",
					    t->key_file, t->cert_file, ssl_reason(why, sizeof(why)));
	}
	h->verify = !t->insecure_skip_verify;
	SSL_CTX_set_verify(h->ctx, h->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
	if (t->server_name && !(h->server_name = strdup(t->server_name)))
		return -ENOMEM;
	return 0;
}

struct agent_otlp_http *agent_otlp_http_new(const struct pf_exporter *cfg, struct pf_error *err)
{
	struct agent_otlp_http *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	pf_buf_init(&h->extra_headers, 64 << 10);
	int r = cfg->endpoint ? parse_url(h, cfg->endpoint, err)
			      : pf_error_set(err, -EINVAL, "endpoint", "missing");
	h->gzip = cfg->compression == PF_COMPRESSION_GZIP;
	h->timeout_ms = (cfg->timeout_seconds ? cfg->timeout_seconds : 10) * 1000u;
	for (size_t i = 0; r == 0 && i < cfg->n_headers; i++) {
		const struct pf_kv_str *kv = &cfg->headers[i];
		if (!header_ok(kv->key, true) || !header_ok(kv->value, false)) {
			r = pf_error_set(err, -EINVAL, "headers", "header %zu: bad name or value",
					 i);
			break;
		}
		r = pf_buf_printf(&h->extra_headers, "%s: %s\r\n", kv->key, kv->value);
	}
	if (r == 0) {
		h->url = malloc(strlen(h->host) + strlen(h->path) + 32);
		if (!h->url)
			r = -ENOMEM;
		else
			snprintf(h->url, strlen(h->host) + strlen(h->path) + 32, "%s://%s:%s%s",
				 h->tls ? "https" : "http", h->host, h->port, h->path);
	}
	if (r == 0 && h->tls)
		r = tls_setup(h, &cfg->tls, err);
	else if (r == 0 && cfg->tls.present)
		r = pf_error_set(err, -EINVAL, "tls", "needs an https:// endpoint");
	if (r < 0) {
		agent_otlp_http_free(h);
		errno = -r;
		return NULL;
	}
	return h;
}

void agent_otlp_http_free(struct agent_otlp_http *h)
{
	if (!h)
		return;
	if (h->ctx)
		SSL_CTX_free(h->ctx);
	free(h->server_name);
	pf_buf_release(&h->extra_headers);
	free(h->path);
	free(h->base_path);
	free(h->url);
	free(h);
}

const char *agent_otlp_http_url(const struct agent_otlp_http *h)
{
	return h->url;
}

const char *agent_otlp_http_base_path(const struct agent_otlp_http *h)
{
	return h->base_path;
}

struct conn {
	int fd;
	SSL *ssl;
	uint64_t deadline;
	char why[160]; /* OpenSSL's reason for a failed read or write after the handshake, e.g.
			* "tlsv13 alert certificate required" from a server that wants mTLS */
};

/* Waits for fd to become ready for `events` before the deadline. */
static int wait_fd(struct conn *c, short events)
{
	for (;;) {
		uint64_t now = now_ms();
		if (now >= c->deadline)
			return -ETIMEDOUT;
		struct pollfd pfd = {.fd = c->fd, .events = events};
		int n = poll(&pfd, 1, (int)pf_min(c->deadline - now, (uint64_t)INT32_MAX));
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* The reason a handshake failed, for last_error: the certificate check's verdict when it
 * failed ("certificate verify failed: unable to get local issuer certificate", "...: IP
 * address mismatch"), else OpenSSL's reason, else the socket's. */
static int tls_handshake_error(struct agent_otlp_http *h, struct conn *c, int e,
			       struct pf_error *err)
{
	int saved = errno;
	unsigned long code = ERR_peek_last_error();
	long v = SSL_get_verify_result(c->ssl);
	const char *reason = code ? ERR_reason_error_string(code) : NULL;
	if (v != X509_V_OK)
		return pf_error_set(err, -ECONNABORTED, "", "TLS handshake with %s:%s: %s: %s",
				    h->host, h->port, reason ? reason : "certificate verify failed",
				    X509_verify_cert_error_string(v));
	if (reason)
		return pf_error_set(err, -ECONNABORTED, "", "TLS handshake with %s:%s: %s", h->host,
				    h->port, reason);
	if (e == SSL_ERROR_SYSCALL && saved)
		return pf_error_set(err, -saved, "", "TLS handshake with %s:%s: %s", h->host,
				    h->port, strerror(saved));
	return pf_error_set(err, -ECONNRESET, "", "TLS handshake with %s:%s: connection closed",
			    h->host, h->port);
}

static int conn_open(struct agent_otlp_http *h, struct conn *c, struct pf_error *err)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct addrinfo *ai = NULL;
	int g = getaddrinfo(h->host, h->port, &hints, &ai);
	if (g != 0)
		return pf_error_set(err, -EHOSTUNREACH, "", "%s: %s", h->host, gai_strerror(g));
	int r = -ECONNREFUSED;
	for (struct addrinfo *a = ai; a; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
				a->ai_protocol);
		if (fd < 0) {
			r = -errno;
			continue;
		}
		c->fd = fd;
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
			r = 0;
		} else if (errno == EINPROGRESS) {
			r = wait_fd(c, POLLOUT);
			int so = 0;
			socklen_t sl = sizeof(so);
			if (r == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl) == 0 && so)
				r = -so;
		} else {
			r = -errno;
		}
		if (r == 0)
			break;
		close(fd);
		c->fd = -1;
		if (r == -ETIMEDOUT)
			break;
	}
	freeaddrinfo(ai);
	if (r < 0)
		return pf_error_set(err, r, "", "connect %s:%s: %s", h->host, h->port,
				    strerror(-r));
	if (!h->tls)
		return 0;

	c->ssl = SSL_new(h->ctx);
	/* RFC 6066 §3: no IP literal in server_name; SSL_set1_host() checks an IP literal
	 * against the certificate's iPAddress SANs, a name against its DNS SANs (RFC 6125).
	 * tls.server_name replaces the endpoint's host in both; with insecure_skip_verify no
	 * name is checked (SNI is still sent). */
	const char *name = h->server_name ? h->server_name : h->host;
	unsigned char ip[sizeof(struct in6_addr)];
	bool literal = inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
	if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1 ||
	    (!literal && SSL_set_tlsext_host_name(c->ssl, name) != 1) ||
	    (h->verify && SSL_set1_host(c->ssl, name) != 1))
		return pf_error_set(err, -ENOMEM, "", "TLS setup failed");
	for (;;) {
		ERR_clear_error();
		errno = 0;
		int rc = SSL_connect(c->ssl);
		if (rc == 1)
			return 0;
		int e = SSL_get_error(c->ssl, rc);
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
			r = wait_fd(c, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT);
			if (r < 0)
				return pf_error_set(err, r, "", "TLS handshake with %s:%s: %s",
						    h->host, h->port,
						    r == -ETIMEDOUT ? "timed out" : strerror(-r));
			continue;
		}
		return tls_handshake_error(h, c, e, err);
	}
}

static void conn_close(struct conn *c)
{
	if (c->ssl) {
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* A TLS write failed without a TLS reason (the peer closed: EPIPE, ECONNRESET). The peer
 * may have said why in an alert that is waiting unread — TLS 1.3 servers refuse a missing
 * client certificate after the handshake, while the client is already sending. Read it
 * briefly (at most ~200 ms) so the error names the cause instead of "Broken pipe". */
static void tls_read_alert(struct conn *c)
{
	uint8_t b[512];
	for (int i = 0; i < 8 && !c->why[0]; i++) {
		ERR_clear_error();
		int rc = SSL_read(c->ssl, b, (int)sizeof(b));
		if (rc > 0)
			continue; /* a response before the close: skip it, look for the alert */
		int e = SSL_get_error(c->ssl, rc);
		if (e == SSL_ERROR_SSL) {
			ssl_reason(c->why, sizeof(c->why));
			return;
		}
		if (e != SSL_ERROR_WANT_READ)
			return;
		struct pollfd pf = {.fd = c->fd, .events = POLLIN};
		if (poll(&pf, 1, 25) <= 0)
			return;
	}
}

static int conn_write(struct conn *c, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w;
		short ev = POLLOUT;
		if (c->ssl) {
			ERR_clear_error();
			int rc = SSL_write(c->ssl, p, (int)pf_min(n, (size_t)INT32_MAX));
			if (rc > 0) {
				w = rc;
			} else {
				int e = SSL_get_error(c->ssl, rc);
				if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
					if (e == SSL_ERROR_SSL)
						ssl_reason(c->why, sizeof(c->why));
					else
						tls_read_alert(c);
					return -EPIPE;
				}
				ev = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
				w = -1;
				errno = EAGAIN;
			}
		} else {
			w = send(c->fd, p, n, MSG_NOSIGNAL);
		}
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		int r = wait_fd(c, ev);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Reads what is available (at least one byte); 0 at end of stream. */
static ssize_t conn_read(struct conn *c, uint8_t *p, size_t n)
{
	for (;;) {
		ssize_t rd;
		short ev = POLLIN;
		if (c->ssl) {
			ERR_clear_error();
			int rc = SSL_read(c->ssl, p, (int)pf_min(n, (size_t)INT32_MAX));
			if (rc > 0)
				return rc;
			int e = SSL_get_error(c->ssl, rc);
			if (e == SSL_ERROR_ZERO_RETURN)
				return 0;
			if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
				return 0; /* peer closed without close_notify: treat as end */
			if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
				if (e == SSL_ERROR_SSL)
					ssl_reason(c->why, sizeof(c->why));
				return -EIO;
			}
			ev = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
			rd = -1;
			errno = EAGAIN;
		} else {
			rd = recv(c->fd, p, n, 0);
			if (rd >= 0)
				return rd;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		int r = wait_fd(c, ev);
		if (r < 0)
			return r;
	}
}

/* A header's value from the header block (first occurrence, surrounding spaces trimmed) into
 * dst; false when absent. */
static bool find_header(const char *head, const char *name, char *dst, size_t cap)
{
	size_t nl = strlen(name);
	for (const char *l = strstr(head, "\r\n"); l && l[2]; l = strstr(l + 2, "\r\n")) {
		if (strncasecmp(l + 2, name, nl) != 0 || l[2 + nl] != ':')
			continue;
		const char *v = l + 3 + nl;
		while (*v == ' ' || *v == '\t')
			v++;
		const char *e = strstr(v, "\r\n");
		size_t vl = e ? (size_t)(e - v) : strlen(v);
		while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
			vl--;
		vl = pf_min(vl, cap - 1);
		memcpy(dst, v, vl);
		dst[vl] = 0;
		return true;
	}
	return false;
}

/* Status from "HTTP/1.x NNN ...", Content-Length (or -1) and chunked framing from the header
 * block (NUL-terminated after its last CRLF). */
static int parse_head(const char *head, int *status, long long *clen, bool *chunked)
{
	if (strncmp(head, "HTTP/1.", 7) != 0 || !head[7] || head[8] != ' ')
		return -EBADMSG;
	char *end;
	long st = strtol(head + 9, &end, 10);
	if (end != head + 12 || st < 100 || st > 599)
		return -EBADMSG;
	*status = (int)st;
	*clen = -1;
	char v[64];
	if (find_header(head, "Content-Length", v, sizeof(v))) {
		long long n = strtoll(v, &end, 10);
		if (end == v || *end || n < 0)
			return -EBADMSG;
		*clen = n;
	}
	*chunked = find_header(head, "Transfer-Encoding", v, sizeof(v)) && strcasestr(v, "chunked");
	return 0;
}

/* Decodes a chunked body (RFC 9112 §7.1) in place; returns the decoded length, or -EBADMSG /
 * -EAGAIN when the last chunk has not arrived yet. Chunk extensions and trailers ignored. */
static ssize_t dechunk(uint8_t *p, size_t len, bool complete_needed)
{
	size_t in = 0, out = 0;
	for (;;) {
		const uint8_t *crlf = memmem(p + in, len - in, "\r\n", 2);
		if (!crlf)
			return complete_needed ? -EAGAIN : (ssize_t)out;
		char num[20];
		size_t nlen = pf_min((size_t)(crlf - (p + in)), sizeof(num) - 1);
		memcpy(num, p + in, nlen);
		num[nlen] = 0;
		char *end;
		unsigned long long n = strtoull(num, &end, 16);
		if (end == num || n > len)
			return -EBADMSG;
		in = (size_t)(crlf - p) + 2;
		if (n == 0)
			return (ssize_t)out;
		if (len - in < n + 2)
			return complete_needed ? -EAGAIN : (ssize_t)out;
		memmove(p + out, p + in, n);
		out += n;
		in += n + 2;
	}
}

void agent_http_result_init(struct agent_http_result *res, size_t max_body)
{
	memset(res, 0, sizeof(*res));
	pf_buf_init(&res->body, max_body ? max_body : AGENT_HTTP_MAX_BODY);
}

void agent_http_result_release(struct agent_http_result *res)
{
	pf_buf_release(&res->body);
}

int agent_otlp_http_post(struct agent_otlp_http *h, const uint8_t *body, size_t len,
			 int *http_status, struct pf_error *err)
{
	struct agent_http_result res;
	agent_http_result_init(&res, 4096);
	int r = agent_otlp_http_send(h, NULL, NULL, body, len, &res, err);
	if (http_status)
		*http_status = res.status;
	agent_http_result_release(&res);
	return r;
}

int agent_otlp_http_send(struct agent_otlp_http *h, const char *target, const char *content_type,
			 const uint8_t *body, size_t len, struct agent_http_result *res,
			 struct pf_error *err)
{
	struct conn c = {.fd = -1, .deadline = now_ms() + h->timeout_ms};
	struct pf_buf req, resp, gz;
	pf_buf_init(&req, (size_t)256 << 20);
	pf_buf_init(&resp, MAX_RESPONSE);
	pf_buf_init(&gz, (size_t)256 << 20);
	res->status = 0;
	res->retry_after[0] = 0;
	res->content_type[0] = 0;
	pf_buf_reset(&res->body);
	bool gzip = h->gzip && !content_type;
	int r = 0;
	if (gzip) {
		r = pf_gzip_compress(body, len, 6, &gz);
		body = gz.data;
		len = gz.len;
	}
	if (r == 0)
		r = pf_buf_printf(&req,
				  "POST %s HTTP/1.1\r\n"
				  "Host: %s%s%s%s%s\r\n"
				  "User-Agent: profleet-agent\r\n"
				  "Content-Type: %s\r\n"
				  "%s"
				  "Content-Length: %zu\r\n"
				  "Connection: close\r\n"
				  "%s\r\n",
				  target ? target : h->path, strchr(h->host, ':') ? "[" : "",
				  h->host, strchr(h->host, ':') ? "]" : "",
				  strcmp(h->port, h->tls ? "443" : "80") ? ":" : "",
				  strcmp(h->port, h->tls ? "443" : "80") ? h->port : "",
				  content_type ? content_type : "application/x-protobuf",
				  gzip ? "Content-Encoding: gzip\r\n" : "", len,
				  pf_buf_str(&h->extra_headers));
	if (r == 0)
		r = pf_buf_append(&req, body, len);
	if (r < 0) {
		pf_error_set(err, r, "", "cannot build the request: %s", strerror(-r));
		goto out;
	}
	r = conn_open(h, &c, err);
	if (r < 0)
		goto out;
	r = conn_write(&c, req.data, req.len);
	if (r < 0) {
		pf_error_set(err, r, "", "sending to %s: %s", h->url,
			     c.why[0] ? c.why : strerror(-r));
		goto out;
	}
	/* Read the response: the header block, then Content-Length bytes, the last chunk, or
	 * until close. A body past MAX_RESPONSE is cut (we only need its start). */
	size_t head_len = 0;
	int status = 0;
	long long clen = -1;
	bool chunked = false, truncated = false;
	for (;;) {
		uint8_t tmp[4096];
		ssize_t n = conn_read(&c, tmp, sizeof(tmp));
		if (n < 0) {
			r = (int)n;
			pf_error_set(err, r, "", "reading the response of %s: %s", h->url,
				     c.why[0] ? c.why : strerror(-r));
			goto out;
		}
		if (n > 0 && (r = pf_buf_append(&resp, tmp, (size_t)n)) < 0) {
			if (!head_len) {
				pf_error_set(err, -EBADMSG, "", "%s: response header too large",
					     h->url);
				r = -EBADMSG;
				goto out;
			}
			r = 0;
			truncated = true;
			break; /* enough of the body for a message */
		}
		if (!head_len) {
			char *e = strstr(pf_buf_str(&resp), "\r\n\r\n");
			if (e) {
				head_len = (size_t)(e - (char *)resp.data) + 4;
				resp.data[head_len - 2] = 0;
				r = parse_head((char *)resp.data, &status, &clen, &chunked);
				if (r == 0) {
					find_header((char *)resp.data, "Retry-After",
						    res->retry_after, sizeof(res->retry_after));
					find_header((char *)resp.data, "Content-Type",
						    res->content_type, sizeof(res->content_type));
				}
				resp.data[head_len - 2] = '\r';
				if (r < 0) {
					pf_error_set(err, r, "", "%s: malformed HTTP response",
						     h->url);
					goto out;
				}
				if (status < 200 && status >= 100) {
					/* 1xx interim response: drop it, read the final one */
					memmove(resp.data, resp.data + head_len,
						resp.len - head_len);
					resp.len -= head_len;
					resp.data[resp.len] = 0;
					head_len = 0;
					continue;
				}
			}
		}
		if (n == 0)
			break;
		if (head_len && clen >= 0 && !chunked &&
		    resp.len - head_len >= (unsigned long long)clen)
			break;
		if (head_len && chunked && resp.len > head_len + 4 &&
		    memmem(resp.data + head_len, resp.len - head_len, "0\r\n", 3)) {
			/* maybe the last chunk: try decoding a copy */
			size_t bl = resp.len - head_len;
			uint8_t *copy = malloc(bl);
			if (!copy)
				break;
			memcpy(copy, resp.data + head_len, bl);
			ssize_t d = dechunk(copy, bl, true);
			free(copy);
			if (d != -EAGAIN)
				break;
		}
	}
	if (!head_len) {
		r = pf_error_set(err, -EBADMSG, "", "%s: connection closed before a response",
				 h->url);
		goto out;
	}
	res->status = status;
	size_t bl = resp.len - head_len;
	if (chunked) {
		ssize_t d = dechunk(resp.data + head_len, bl, false);
		bl = d < 0 ? 0 : (size_t)d;
	} else if (clen >= 0) {
		bl = pf_min(bl, (size_t)clen);
	}
	res->body_truncated = truncated;
	r = pf_buf_append(&res->body, resp.data + head_len, pf_min(bl, res->body.max));
	if (r < 0) { /* the caller's cap: keep what fits */
		res->body_truncated = true;
		r = 0;
	}
	if (status >= 200 && status < 300) {
		r = 0;
	} else {
		/* RFC 9110 status; the body (google.rpc.Status or text) is shown in short */
		char snippet[201];
		size_t sl = pf_min(bl, sizeof(snippet) - 1);
		memcpy(snippet, resp.data + head_len, sl);
		snippet[sl] = 0;
		for (size_t i = 0; i < sl; i++)
			if ((unsigned char)snippet[i] < 0x20 || (unsigned char)snippet[i] >= 0x7f)
				snippet[i] = '.';
		r = pf_error_set(err, -EPROTO, "", "%s: HTTP %d%s%s", h->url, status,
				 sl ? ": " : "", snippet);
	}
out:
	conn_close(&c);
	pf_buf_release(&req);
	pf_buf_release(&resp);
	pf_buf_release(&gz);
	return r;
}

/* Protobuf wire format (protobuf.dev/programming-guides/encoding): a base-128 varint. */
static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (*p >= end)
			return -EBADMSG;
		uint8_t b = *(*p)++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -EBADMSG;
}

/* Skips one field of wire type wt. */
static int skip_field(const uint8_t **p, const uint8_t *end, unsigned wt)
{
	uint64_t v;
	switch (wt) {
	case 0:
		return read_varint(p, end, &v);
	case 1:
		if (end - *p < 8)
			return -EBADMSG;
		*p += 8;
		return 0;
	case 2:
		if (read_varint(p, end, &v) < 0 || v > (uint64_t)(end - *p))
			return -EBADMSG;
		*p += v;
		return 0;
	case 5:
		if (end - *p < 4)
			return -EBADMSG;
		*p += 4;
		return 0;
	default:
		return -EBADMSG; /* groups (3, 4) are not in proto3 messages */
	}
}

int agent_otlp_partial_success_parse(const uint8_t *data, size_t len, int64_t *rejected, char *msg,
				     size_t msg_cap)
{
	*rejected = 0;
	if (msg_cap)
		msg[0] = 0;
	const uint8_t *p = data, *end = data + len;
	int found = 0;
	while (p < end) {
		uint64_t key;
		if (read_varint(&p, end, &key) < 0)
			return -EBADMSG;
		if ((key >> 3) != 1 || (key & 7) != 2) { /* not partial_success */
			if ((key >> 3) == 0 || skip_field(&p, end, (unsigned)(key & 7)) < 0)
				return -EBADMSG;
			continue;
		}
		uint64_t ml;
		if (read_varint(&p, end, &ml) < 0 || ml > (uint64_t)(end - p))
			return -EBADMSG;
		const uint8_t *q = p, *qend = p + ml;
		p = qend;
		found = 1;
		while (q < qend) {
			uint64_t k2, v;
			if (read_varint(&q, qend, &k2) < 0)
				return -EBADMSG;
			if (k2 == ((1 << 3) | 0)) { /* int64 rejected_profiles */
				if (read_varint(&q, qend, &v) < 0)
					return -EBADMSG;
				*rejected = (int64_t)v;	   /* last one wins (proto3 merge) */
			} else if (k2 == ((2 << 3) | 2)) { /* string error_message */
				if (read_varint(&q, qend, &v) < 0 || v > (uint64_t)(qend - q))
					return -EBADMSG;
				if (msg_cap) {
					size_t n = pf_min((size_t)v, msg_cap - 1);
					memcpy(msg, q, n);
					msg[n] = 0;
				}
				q += v;
			} else if ((k2 >> 3) == 0 || skip_field(&q, qend, (unsigned)(k2 & 7)) < 0) {
				return -EBADMSG;
			}
		}
	}
	return found;
}
