/* otlp_http.c — see otlp_http.h. The transfer is http_client.h's (libcurl); this file checks
 * the configuration, builds the request and reads the OTLP response. */
#include "export/otlp_http.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "pb_util.h"
#include "pf/buf.h"
#include "pf/compiler.h"
#include "pf/gzip.h"

static inline void SSL_CTX_freep(SSL_CTX **c)
{
	SSL_CTX_free(*c);
}

struct agent_otlp_http {
	bool https;
	char host[256];
	char port[8];
	char *path;
	char *base_path; /* the endpoint's own path, "" when none or "/" */
	char *url;
	char *origin;    /* "scheme://host:port" as libcurl takes it ([v6] in brackets) */
	bool gzip;
	uint32_t timeout_ms;
	char **headers; /* "Name: value" */
	size_t n_headers;
	struct agent_http_tls tls; /* strings owned here */
	struct agent_http *client; /* one connection pool per exporter */
};

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
		h->https = true;
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
	snprintf(h->port, sizeof(h->port), "%s", h->https ? "443" : "80");
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

static char *dup_or_null(const char *s, int *r)
{
	char *d = s ? strdup(s) : NULL;
	if (s && !d)
		*r = -ENOMEM;
	return d;
}

/* Checks the TLS files of an https:// exporter (cfg->tls, pf/profcfg.h) by loading them into a
 * throwaway OpenSSL context, so a bad file fails the configuration with its key path
 * ("tls.ca_file") and OpenSSL's reason instead of every export; keeps the settings for
 * libcurl. */
static int tls_setup(struct agent_otlp_http *h, const struct pf_exporter_tls *t,
		     struct pf_error *err)
{
	char why[256];
	int r = 0;
	ERR_clear_error();
	_cleanup_(SSL_CTX_freep) SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx)
		return pf_error_set(err, -ENOMEM, "", "cannot set up TLS: %s",
				    ssl_reason(why, sizeof(why)));
	if (t->ca_file) {
		if (SSL_CTX_load_verify_locations(ctx, t->ca_file, NULL) != 1)
			return pf_error_set(err, -EINVAL, "tls.ca_file", "cannot load %s: %s",
					    t->ca_file, ssl_reason(why, sizeof(why)));
	} else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
		return pf_error_set(err, -EINVAL, "", "cannot load the default CA store: %s",
				    ssl_reason(why, sizeof(why)));
	}
	if (t->cert_file || t->key_file) {
		if (!t->cert_file || !t->key_file)
			return pf_error_set(err, -EINVAL, t->cert_file ? "tls.key_file" : "tls.cert_file",
					    "cert_file and key_file go together");
		if (SSL_CTX_use_certificate_chain_file(ctx, t->cert_file) != 1)
			return pf_error_set(err, -EINVAL, "tls.cert_file", "cannot load %s: %s",
					    t->cert_file, ssl_reason(why, sizeof(why)));
		if (SSL_CTX_use_PrivateKey_file(ctx, t->key_file, SSL_FILETYPE_PEM) != 1)
			return pf_error_set(err, -EINVAL, "tls.key_file", "cannot load %s: %s",
					    t->key_file, ssl_reason(why, sizeof(why)));
		if (SSL_CTX_check_private_key(ctx) != 1)
			return pf_error_set(err, -EINVAL, "tls.key_file",
					    "%s does not match the certificate of %s: %s",
					    t->key_file, t->cert_file, ssl_reason(why, sizeof(why)));
	}
	h->tls.ca_file = dup_or_null(t->ca_file, &r);
	h->tls.cert_file = dup_or_null(t->cert_file, &r);
	h->tls.key_file = dup_or_null(t->key_file, &r);
	h->tls.server_name = dup_or_null(t->server_name, &r);
	h->tls.insecure_skip_verify = t->insecure_skip_verify;
	return r;
}

struct agent_otlp_http *agent_otlp_http_new(const struct pf_exporter *cfg, struct pf_error *err)
{
	struct agent_otlp_http *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	int r = cfg->endpoint ? parse_url(h, cfg->endpoint, err)
			      : pf_error_set(err, -EINVAL, "endpoint", "missing");
	h->gzip = cfg->compression == PF_COMPRESSION_GZIP;
	h->timeout_ms = (cfg->timeout_seconds ? cfg->timeout_seconds : 10) * 1000u;
	if (r == 0 && cfg->n_headers && !(h->headers = calloc(cfg->n_headers, sizeof(char *))))
		r = -ENOMEM;
	for (size_t i = 0; r == 0 && i < cfg->n_headers; i++) {
		const struct pf_kv_str *kv = &cfg->headers[i];
		if (!header_ok(kv->key, true) || !header_ok(kv->value, false)) {
			r = pf_error_set(err, -EINVAL, "headers", "header %zu: bad name or value",
					 i);
			break;
		}
		if (asprintf(&h->headers[i], "%s: %s", kv->key, kv->value) < 0) {
			h->headers[i] = NULL;
			r = -ENOMEM;
		} else {
			h->n_headers++;
		}
	}
	bool v6 = strchr(h->host, ':') != NULL;
	if (r == 0 && (asprintf(&h->url, "%s://%s:%s%s", h->https ? "https" : "http", h->host,
				h->port, h->path) < 0 ||
		       asprintf(&h->origin, "%s://%s%s%s:%s", h->https ? "https" : "http",
				v6 ? "[" : "", h->host, v6 ? "]" : "", h->port) < 0))
		r = -ENOMEM;
	if (r == 0 && h->https)
		r = tls_setup(h, &cfg->tls, err);
	else if (r == 0 && cfg->tls.present)
		r = pf_error_set(err, -EINVAL, "tls", "needs an https:// endpoint");
	if (r == 0 && !(h->client = agent_http_new()))
		r = pf_error_set(err, -errno, "", "cannot start the HTTP client");
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
	agent_http_free(h->client);
	for (size_t i = 0; i < h->n_headers; i++)
		free(h->headers[i]);
	free(h->headers);
	free((char *)h->tls.ca_file);
	free((char *)h->tls.cert_file);
	free((char *)h->tls.key_file);
	free((char *)h->tls.server_name);
	free(h->path);
	free(h->base_path);
	free(h->url);
	free(h->origin);
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
	struct pf_buf gz;
	pf_buf_init(&gz, (size_t)256 << 20);
	bool gzip = h->gzip && !content_type;
	int r = 0;
	if (gzip) {
		r = pf_gzip_compress(body, len, 6, &gz);
		body = gz.data;
		len = gz.len;
	}
	char ctype[160];
	snprintf(ctype, sizeof(ctype), "Content-Type: %s",
		 content_type ? content_type : "application/x-protobuf");
	const char **hdrs = calloc(h->n_headers + 2, sizeof(*hdrs));
	char *url = NULL;
	if (r == 0 && (!hdrs || asprintf(&url, "%s%s", h->origin, target ? target : h->path) < 0)) {
		url = NULL;
		r = -ENOMEM;
	}
	if (r < 0) {
		pf_error_set(err, r, "", "cannot build the request: %s", strerror(-r));
		goto out;
	}
	size_t nh = 0;
	hdrs[nh++] = ctype;
	if (gzip)
		hdrs[nh++] = "Content-Encoding: gzip";
	for (size_t i = 0; i < h->n_headers; i++)
		hdrs[nh++] = h->headers[i];
	struct agent_http_request req = {.method = "POST", .url = url, .headers = hdrs,
					 .n_headers = nh, .body = body, .len = len};
	struct agent_http_options opt = {.timeout_ms = h->timeout_ms,
					 .tls = h->https ? &h->tls : NULL};
	r = agent_http_do(h->client, &req, &opt, res, err);
	if (r < 0 || (res->status >= 200 && res->status < 300))
		goto out;
	/* RFC 9110 status; the body (google.rpc.Status or text) is shown in short */
	char snippet[201];
	size_t sl = pf_min(res->body.len, sizeof(snippet) - 1);
	if (sl)
		memcpy(snippet, res->body.data, sl);
	snippet[sl] = 0;
	for (size_t i = 0; i < sl; i++)
		if ((unsigned char)snippet[i] < 0x20 || (unsigned char)snippet[i] >= 0x7f)
			snippet[i] = '.';
	r = pf_error_set(err, -EPROTO, "", "%s: HTTP %d%s%s", h->url, res->status, sl ? ": " : "",
			 snippet);
out:
	free(url);
	free(hdrs);
	pf_buf_release(&gz);
	return r;
}

/* Skips one field of wire type wt. */
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
		if (pb_varint_read(&p, end, &key) < 0)
			return -EBADMSG;
		if ((key >> 3) != 1 || (key & 7) != 2) { /* not partial_success */
			if ((key >> 3) == 0 || pb_field_skip(&p, end, (unsigned)(key & 7)) < 0)
				return -EBADMSG;
			continue;
		}
		uint64_t ml;
		if (pb_varint_read(&p, end, &ml) < 0 || ml > (uint64_t)(end - p))
			return -EBADMSG;
		const uint8_t *q = p, *qend = p + ml;
		p = qend;
		found = 1;
		while (q < qend) {
			uint64_t k2, v;
			if (pb_varint_read(&q, qend, &k2) < 0)
				return -EBADMSG;
			if (k2 == ((1 << 3) | 0)) { /* int64 rejected_profiles */
				if (pb_varint_read(&q, qend, &v) < 0)
					return -EBADMSG;
				*rejected = (int64_t)v;	   /* last one wins (proto3 merge) */
			} else if (k2 == ((2 << 3) | 2)) { /* string error_message */
				if (pb_varint_read(&q, qend, &v) < 0 || v > (uint64_t)(qend - q))
					return -EBADMSG;
				if (msg_cap) {
					size_t n = pf_min((size_t)v, msg_cap - 1);
					memcpy(msg, q, n);
					msg[n] = 0;
				}
				q += v;
			} else if ((k2 >> 3) == 0 || pb_field_skip(&q, qend, (unsigned)(k2 & 7)) < 0) {
				return -EBADMSG;
			}
		}
	}
	return found;
}
