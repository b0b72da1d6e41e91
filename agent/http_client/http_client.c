/* http_client.c — see http_client.h. */
#include "http_client/http_client.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "pf/compiler.h"

#define MAX_REDIRECTS 5

struct agent_http {
	CURL *curl;
	struct agent_http_result *cur;
	const struct agent_http_options *opt;
	bool over_cap;
	bool cert_requested; /* the TLS server asked for a client certificate */
	char alert[64];      /* the last TLS alert received, "" when none */
	char verify_host[256]; /* the name OpenSSL verifies (server_name or the URL's host) */
	uint64_t connects;
	char errbuf[CURL_ERROR_SIZE];
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
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

struct agent_http *agent_http_new(void)
{
	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK) {
		errno = EIO;
		return NULL;
	}
	struct agent_http *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->curl = curl_easy_init();
	if (!c->curl) {
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	return c;
}

void agent_http_free(struct agent_http *c)
{
	if (!c)
		return;
	curl_easy_cleanup(c->curl);
	free(c);
}

uint64_t agent_http_connects(const struct agent_http *c)
{
	return c->connects;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct agent_http *c = ud;
	size_t len = size * n;
	struct agent_http_result *res = c->cur;
	if (c->opt->on_data)
		return c->opt->on_data(c->opt->data_ctx, p, len) < 0 ? 0 : len;
	if (res->body_truncated)
		return c->opt->fail_over_cap ? 0 : len;
	if (pf_buf_append(&res->body, p, len) < 0) {
		size_t room = res->body.max > res->body.len ? res->body.max - res->body.len : 0;
		if (room && pf_buf_append(&res->body, p, room) < 0)
			room = 0;
		res->body_truncated = true;
		c->over_cap = true;
		return c->opt->fail_over_cap ? 0 : len; /* 0: curl ends with CURLE_WRITE_ERROR */
	}
	return len;
}

/* Copies the value of header line p (len bytes) into dst when its name is `name`. */
static void header_copy(const char *p, size_t len, const char *name, char *dst, size_t cap)
{
	size_t nl = strlen(name);
	if (len <= nl || strncasecmp(p, name, nl) != 0 || p[nl] != ':')
		return;
	const char *v = p + nl + 1;
	size_t vl = len - nl - 1;
	while (vl && (*v == ' ' || *v == '\t'))
		v++, vl--;
	while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
		vl--;
	snprintf(dst, cap, "%.*s", (int)pf_min(vl, (size_t)cap - 1), v);
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	struct agent_http *c = ud;
	size_t len = size * n;
	struct agent_http_result *res = c->cur;
	if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		/* a new response (after a 1xx or a redirect): forget the previous one's headers */
		res->retry_after[0] = 0;
		res->content_type[0] = 0;
		res->content_length = 0;
		return len;
	}
	char cl[24] = "";
	header_copy(p, len, "Content-Length", cl, sizeof(cl));
	if (cl[0])
		res->content_length = strtoull(cl, NULL, 10);
	header_copy(p, len, "Retry-After", res->retry_after, sizeof(res->retry_after));
	header_copy(p, len, "Content-Type", res->content_type, sizeof(res->content_type));
	return len;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	(void)dt, (void)dn, (void)ut, (void)un;
	struct agent_http *c = ud;
	return c->opt->cancel && atomic_load(c->opt->cancel) ? 1 : 0;
}

/* "host:port" of the URL, for messages. */
static void url_authority(const char *url, char *out, size_t cap)
{
	CURLU *u = curl_url();
	char *host = NULL, *port = NULL;
	if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
		size_t hl = strlen(host);
		if (hl > 2 && host[0] == '[') /* "[::1]" as "::1", as the old messages had it */
			snprintf(out, cap, "%.*s:%s", (int)(hl - 2), host + 1, port);
		else
			snprintf(out, cap, "%s:%s", host, port);
	} else {
		snprintf(out, cap, "%s", url);
	}
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
}

/* The name TLS verifies: server_name, else the URL's host (IPv6 without brackets). */
static void verify_host_set(struct agent_http *c, const char *url, const char *server_name)
{
	c->verify_host[0] = 0;
	if (server_name) {
		snprintf(c->verify_host, sizeof(c->verify_host), "%s", server_name);
		return;
	}
	CURLU *u = curl_url();
	char *host = NULL;
	if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
		size_t hl = strlen(host);
		if (hl > 2 && host[0] == '[')
			snprintf(c->verify_host, sizeof(c->verify_host), "%.*s", (int)(hl - 2),
				 host + 1);
		else
			snprintf(c->verify_host, sizeof(c->verify_host), "%s", host);
	}
	curl_free(host);
	curl_url_cleanup(u);
}

/* With tls.server_name: the request goes to the URL's host and port, while TLS (SNI, the name
 * verified) uses server_name — the URL is rewritten to server_name and CURLOPT_CONNECT_TO sends
 * the connection to the real host; Host stays the real authority. */
static int server_name_setup(CURL *curl, const char *url, const char *server_name,
			     char **new_url, struct curl_slist **hdrs, struct curl_slist **connect_to)
{
	CURLU *u = curl_url();
	char *host = NULL, *port = NULL, *out = NULL;
	int r = -ENOMEM;
	if (!u)
		return r;
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
		r = -EINVAL;
		goto out;
	}
	char line[600];
	snprintf(line, sizeof(line), "%s:%s:%s:%s", server_name, port, host, port);
	struct curl_slist *ct = curl_slist_append(NULL, line);
	if (!ct)
		goto out;
	*connect_to = ct;
	snprintf(line, sizeof(line), "Host: %s:%s", host, port);
	struct curl_slist *h2 = curl_slist_append(*hdrs, line);
	if (!h2)
		goto out;
	*hdrs = h2;
	if (curl_url_set(u, CURLUPART_HOST, server_name, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_URL, &out, 0) != CURLUE_OK) {
		r = -EINVAL;
		goto out;
	}
	*new_url = strdup(out);
	r = *new_url ? 0 : -ENOMEM;
	curl_easy_setopt(curl, CURLOPT_CONNECT_TO, ct);
out:
	curl_free(out);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	return r;
}

/* OpenSSL's view of the handshake (libcurl's OpenSSL backend): whether the server asked for a
 * client certificate, and the alerts it sent, so that a server that drops the connection for
 * want of a certificate is named as such. */
static void on_tls_msg(int write_p, int version, int content_type, const void *buf, size_t len,
		       SSL *ssl, void *arg)
{
	(void)version, (void)ssl;
	struct agent_http *c = arg;
	const uint8_t *b = buf;
	if (write_p || !len)
		return;
	if (content_type == SSL3_RT_HANDSHAKE && b[0] == SSL3_MT_CERTIFICATE_REQUEST)
		c->cert_requested = true;
	else if (content_type == SSL3_RT_ALERT && len == 2)
		snprintf(c->alert, sizeof(c->alert), "%s",
			 b[1] == 116 ? "certificate required" /* TLS 1.3; OpenSSL 3.0 has no name */
				     : SSL_alert_desc_string_long(b[1]));
}

static CURLcode on_ssl_ctx(CURL *curl, void *ctx, void *ud)
{
	(void)curl;
	struct agent_http *c = ud;
	SSL_CTX_set_msg_callback(ctx, on_tls_msg);
	SSL_CTX_set_msg_callback_arg(ctx, ud);
	/* Servers that close without close_notify (Python's ssl, many proxies) would otherwise fail
	 * a response read until close with "unexpected eof"; the framing tells a cut body. */
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	/* The system store as OpenSSL knows it, SSL_CERT_FILE / SSL_CERT_DIR included, unless a
	 * ca_file replaces it. */
	if (!(c->opt && c->opt->tls && c->opt->tls->ca_file) &&
	    SSL_CTX_set_default_verify_paths(ctx) != 1)
		return CURLE_SSL_CACERT_BADFILE;
	/* OpenSSL checks the name too (libcurl does as well), so that a mismatch reads as its
	 * verdict: "IP address mismatch", "hostname mismatch". */
	if (c->verify_host[0] && !(c->opt && c->opt->tls && c->opt->tls->insecure_skip_verify)) {
		X509_VERIFY_PARAM *vp = SSL_CTX_get0_param(ctx);
		if (X509_VERIFY_PARAM_set1_ip_asc(vp, c->verify_host) != 1 &&
		    X509_VERIFY_PARAM_set1_host(vp, c->verify_host, 0) != 1)
			return CURLE_SSL_CONNECT_ERROR;
	}
	return CURLE_OK;
}

/* What the TLS layer knows about a connection that broke: "" when nothing. */
static const char *tls_why(const struct agent_http *c, const struct agent_http_tls *tls,
			   char *buf, size_t cap)
{
	buf[0] = 0;
	if (c->alert[0])
		snprintf(buf, cap, "TLS alert %s", c->alert);
	else if (c->cert_requested && !tls->cert_file)
		snprintf(buf, cap, "the server asked for a client certificate and none is "
				   "configured (tls.cert_file, tls.key_file): certificate required");
	return buf;
}

/* The readable error of a failed transfer. */
static int transfer_error(struct agent_http *c, CURLcode cc, const char *url,
			  const struct agent_http_options *opt, struct pf_error *err)
{
	char auth[300], tw[200], both[CURL_ERROR_SIZE + 220];
	url_authority(url, auth, sizeof(auth));
	const char *why = c->errbuf[0] ? c->errbuf : curl_easy_strerror(cc);
	if (*tls_why(c, opt->tls ? opt->tls : &(struct agent_http_tls){0}, tw, sizeof(tw)) &&
	    !strstr(why, "alert")) {
		snprintf(both, sizeof(both), "%s (%s)", tw, why);
		why = both;
	}
	curl_off_t connected = 0;
	curl_easy_getinfo(c->curl, CURLINFO_PRETRANSFER_TIME_T, &connected);
	switch (cc) {
	case CURLE_OPERATION_TIMEDOUT:
		if (opt->timeout_plain)
			return pf_error_set(err, -ETIMEDOUT, "", "timed out after %" PRIu32 " ms",
					    opt->timeout_ms);
		if (connected)
			return pf_error_set(err, -ETIMEDOUT, "", "reading the response of %s: %s",
					    url, why);
		return pf_error_set(err, -ETIMEDOUT, "", "connect %s: %s", auth, why);
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return pf_error_set(err, -EHOSTUNREACH, "", "%s: %s", auth, why);
	case CURLE_COULDNT_CONNECT:
		return pf_error_set(err, -ECONNREFUSED, "", "connect %s: %s", auth, why);
	case CURLE_ABORTED_BY_CALLBACK:
		return pf_error_set(err, -ECANCELED, "", "cancelled");
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE: {
		long v = X509_V_OK;
		curl_easy_getinfo(c->curl, CURLINFO_SSL_VERIFYRESULT, &v);
		if (v != X509_V_OK)
			return pf_error_set(err, -ECONNABORTED, "",
					    "TLS handshake with %s: certificate verify failed: %s",
					    auth, X509_verify_cert_error_string(v));
		return pf_error_set(err, -ECONNABORTED, "", "TLS handshake with %s: %s", auth, why);
	}
	case CURLE_WRITE_ERROR:
	case CURLE_FILESIZE_EXCEEDED:
		if (c->over_cap || cc == CURLE_FILESIZE_EXCEEDED) {
			if (c->cur->content_length > c->cur->body.max)
				return pf_error_set(err, -E2BIG, "",
						    "response of %" PRIu64
						    " bytes over the %zu byte limit",
						    c->cur->content_length, c->cur->body.max);
			return pf_error_set(err, -E2BIG, "", "response over %zu bytes",
					    c->cur->body.max);
		}
		return pf_error_set(err, -EIO, "", "%s: %s", url, why);
	case CURLE_PARTIAL_FILE:
		return pf_error_set(err, -EPROTO, "", "truncated response from %s: %s", url, why);
	case CURLE_SEND_ERROR:
		return pf_error_set(err, -ECONNRESET, "", "sending to %s: %s", url, why);
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
		return pf_error_set(err, -ECONNRESET, "", "reading the response of %s: %s", url,
				    why);
	case CURLE_OUT_OF_MEMORY:
		return pf_error_set(err, -ENOMEM, "", "%s: out of memory", url);
	case CURLE_TOO_MANY_REDIRECTS:
		return pf_error_set(err, -ELOOP, "", "%s: more than %d redirects", url,
				    MAX_REDIRECTS);
	default:
		return pf_error_set(err, -EPROTO, "", "%s: %s", url, why);
	}
}

static int on_sockopt(void *ud, curl_socket_t fd, curlsocktype purpose)
{
	(void)fd;
	struct agent_http *c = ud;
	if (purpose == CURLSOCKTYPE_IPCXN)
		c->connects++;
	return CURL_SOCKOPT_OK;
}

int agent_http_do(struct agent_http *c, const struct agent_http_request *req,
		  const struct agent_http_options *opt, struct agent_http_result *res,
		  struct pf_error *err)
{
	static const struct agent_http_tls no_tls = {0};
	const struct agent_http_tls *tls = opt->tls ? opt->tls : &no_tls;
	CURL *curl = c->curl;
	struct curl_slist *hdrs = NULL, *connect_to = NULL;
	char *url = NULL;
	int r = 0;

	res->status = 0;
	res->http_version = 0;
	res->retry_after[0] = 0;
	res->content_type[0] = 0;
	res->body_truncated = false;
	res->content_length = 0;
	pf_buf_reset(&res->body);
	c->cur = res;
	c->opt = opt;
	c->over_cap = false;
	c->cert_requested = false;
	c->alert[0] = 0;
	c->errbuf[0] = 0;

	curl_easy_reset(curl); /* options only: the connection cache stays */
	for (size_t i = 0; i < req->n_headers; i++) {
		struct curl_slist *n = curl_slist_append(hdrs, req->headers[i]);
		if (!n) {
			r = pf_error_set(err, -ENOMEM, "", "out of memory");
			goto out;
		}
		hdrs = n;
	}
	if (tls->server_name && (r = server_name_setup(curl, req->url, tls->server_name, &url,
						       &hdrs, &connect_to)) < 0) {
		r = pf_error_set(err, r, "", "%s: cannot use server_name %s", req->url,
				 tls->server_name);
		goto out;
	}
	verify_host_set(c, req->url, tls->server_name);
	curl_easy_setopt(curl, CURLOPT_URL, url ? url : req->url);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_USERAGENT, "profleet-agent");
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, c->errbuf);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)(opt->timeout_ms ? opt->timeout_ms : 10000));
	curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	curl_easy_setopt(curl, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(curl, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(curl, CURLOPT_SOCKOPTFUNCTION, on_sockopt);
	curl_easy_setopt(curl, CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx);
	curl_easy_setopt(curl, CURLOPT_SSL_CTX_DATA, c);
	curl_easy_setopt(curl, CURLOPT_SOCKOPTDATA, c);
	if (opt->cancel) {
		curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(curl, CURLOPT_XFERINFODATA, c);
		curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
	}
	if (opt->connect_timeout_ms)
		curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, (long)opt->connect_timeout_ms);
	if (opt->keepalive_idle_s) {
		curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
		curl_easy_setopt(curl, CURLOPT_TCP_KEEPIDLE, (long)opt->keepalive_idle_s);
		curl_easy_setopt(curl, CURLOPT_TCP_KEEPINTVL,
				 (long)(opt->keepalive_intvl_s ? opt->keepalive_intvl_s
							       : opt->keepalive_idle_s));
	}
	if (opt->follow_redirects) {
		curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
		curl_easy_setopt(curl, CURLOPT_MAXREDIRS, (long)MAX_REDIRECTS);
		curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	}
	if (opt->decode_gzip)
		curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "gzip");
	if (opt->fail_over_cap)
		curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)res->body.max);
	if (tls->ca_file)
		curl_easy_setopt(curl, CURLOPT_CAINFO, tls->ca_file);
	if (tls->cert_file && tls->key_file) {
		curl_easy_setopt(curl, CURLOPT_SSLCERT, tls->cert_file);
		curl_easy_setopt(curl, CURLOPT_SSLKEY, tls->key_file);
	}
	if (tls->insecure_skip_verify) {
		curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (!strcmp(req->method, "POST")) {
		curl_easy_setopt(curl, CURLOPT_POST, 1L);
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, req->body ? (const char *)req->body : "");
		curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->len);
	} else if (strcmp(req->method, "GET")) {
		curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req->method);
	}

	CURLcode cc = curl_easy_perform(curl);
	long status = 0, version = 0;
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(curl, CURLINFO_HTTP_VERSION, &version);
	res->status = (int)status;
	res->http_version = version == CURL_HTTP_VERSION_2_0 ? 2 : status ? 1 : 0;
	if (cc != CURLE_OK)
		r = transfer_error(c, cc, req->url, opt, err);
out:
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(curl, CURLOPT_CONNECT_TO, NULL);
	curl_slist_free_all(hdrs);
	curl_slist_free_all(connect_to);
	free(url);
	c->cur = NULL;
	c->opt = NULL;
	return r;
}
