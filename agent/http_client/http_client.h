/* http_client.h — the agent's outbound HTTP (exporters, pprof scrapes, the Kubernetes API
 * server), through libcurl.
 *
 * Owns one libcurl easy handle per client: its connection cache is the client's connection
 * pool (keep-alive between requests to the same endpoint), HTTP/2 is negotiated over TLS (ALPN)
 * where the server offers it, HTTP/1.1 otherwise; the proxy comes from the environment as
 * libcurl reads it (HTTPS_PROXY/https_proxy, http_proxy, ALL_PROXY, NO_PROXY/no_proxy). TLS: the
 * system CA store, or ca_file instead; a client certificate (cert_file + key_file);
 * server_name for SNI and the verified name (the connection still goes to the URL's host);
 * insecure_skip_verify. One request at a time per client (not thread-safe); requests block,
 * bounded as a whole (DNS, connect, TLS, send, response) by timeout_ms, so they run on worker
 * threads. Failures are negative errnos with readable messages: -ETIMEDOUT, -ECONNREFUSED
 * ("connect HOST:PORT: ..."), -EHOSTUNREACH (DNS), -ECONNABORTED ("TLS handshake with
 * HOST:PORT: certificate verify failed: <reason>"), -E2BIG (body over its cap when
 * fail_over_cap), -ECANCELED, -EPROTO. */
#ifndef AGENT_HTTP_CLIENT_H
#define AGENT_HTTP_CLIENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"
#include "pf/error.h"

struct agent_http_tls {
	const char *ca_file;     /* NULL: the system store */
	const char *cert_file;   /* with key_file: client certificate */
	const char *key_file;
	const char *server_name; /* NULL: the URL's host */
	bool insecure_skip_verify;
};

struct agent_http_options {
	uint32_t timeout_ms;    /* the whole request; 0 = 10 s */
	const struct agent_http_tls *tls; /* NULL: defaults */
	bool follow_redirects;  /* up to 5, http and https only */
	bool decode_gzip;       /* ask for and undo Content-Encoding gzip */
	bool fail_over_cap;     /* a body over the result's cap fails (-E2BIG); else it is cut */
	bool timeout_plain;     /* a timeout reads "timed out after N ms" */
	const atomic_bool *cancel; /* set: the request ends with -ECANCELED */
	uint32_t connect_timeout_ms; /* the connection alone (DNS, TCP, TLS); 0 = the whole bound */
	uint32_t keepalive_idle_s;   /* TCP keepalive probes after this idle time; 0 = off */
	uint32_t keepalive_intvl_s;  /* and this far apart */
	/* a streamed body (a watch): every piece goes to on_data as it arrives, nothing is kept
	 * in the result's body; on_data returning < 0 ends the request (-EIO) */
	int (*on_data)(void *ctx, const char *data, size_t len);
	void *data_ctx;
};

struct agent_http_request {
	const char *method;      /* "GET", "POST" */
	const char *url;
	const char *const *headers; /* "Name: value", n_headers of them */
	size_t n_headers;
	const uint8_t *body;
	size_t len;
};

/* What came back from one request. Initialise with agent_http_result_init() (max_body caps the
 * body kept: 0 = AGENT_HTTP_MAX_BODY), release with agent_http_result_release(). */
#define AGENT_HTTP_MAX_BODY ((size_t)64 << 10)
struct agent_http_result {
	int status;		/* 0 when no response was received */
	int http_version;	/* 1 or 2 (0 when none) */
	char retry_after[64];	/* the Retry-After header's value, "" when absent */
	char content_type[128]; /* "" when absent */
	struct pf_buf body;	/* cut at its cap unless fail_over_cap */
	bool body_truncated;
	uint64_t content_length; /* announced by the response, 0 when none */
};

void agent_http_result_init(struct agent_http_result *res, size_t max_body);
void agent_http_result_release(struct agent_http_result *res);

struct agent_http;

/* NULL + errno (ENOMEM, or EIO when libcurl cannot start). */
struct agent_http *agent_http_new(void);
void agent_http_free(struct agent_http *c);

/* One request; res is filled as far as the exchange went. 0 when a response was received
 * (whatever its status), else a negative errno with err set. */
int agent_http_do(struct agent_http *c, const struct agent_http_request *req,
		  const struct agent_http_options *opt, struct agent_http_result *res,
		  struct pf_error *err);

/* Connections the client opened so far (a pool reuses them: fewer than requests). */
uint64_t agent_http_connects(const struct agent_http *c);

#endif
