/* otlp_http.h — the `otlp_http` exporter's transport: POST one ExportProfilesServiceRequest
 * (OTLP/HTTP, binary protobuf) to the configured endpoint.
 *
 * Owns one small blocking HTTP/1.1 client (plain TCP or TLS through OpenSSL: system CA store,
 * peer and host name verification, SNI), one connection per request ("Connection: close").
 * The whole request — DNS, connect, TLS handshake, send, response — is bounded by the
 * configured timeout_seconds. Because it blocks, it must run on a worker thread, never on the
 * agent's lws loop: exporter.c runs it on the exporter's own thread.
 *
 * Request: POST <path>, where path is the endpoint's path, or /v1development/profiles when the
 * endpoint has none (or "/"); Content-Type: application/x-protobuf; Content-Encoding: gzip
 * when compression is gzip; the configured headers (names and values must not contain CR, LF
 * or NUL, names no ':'). A 2xx response is success; anything else is an error with the HTTP
 * status and the start of the body in the message. Retries, Retry-After and queueing are the
 * delivery issue's. Not thread-safe (one request at a time). */
#ifndef AGENT_EXPORT_OTLP_HTTP_H
#define AGENT_EXPORT_OTLP_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"
#include "pf/profcfg.h"

#define AGENT_OTLP_HTTP_DEFAULT_PATH "/v1development/profiles"

struct agent_otlp_http;

/* Parses and checks cfg (endpoint URL, headers). NULL + errno, err with the key path. */
struct agent_otlp_http *agent_otlp_http_new(const struct pf_exporter *cfg, struct pf_error *err);
void agent_otlp_http_free(struct agent_otlp_http *h);

/* Sends one request body (uncompressed protobuf; gzip'd here when configured). *http_status
 * (may be NULL) receives the status, 0 when none was received. 0 on 2xx; -EPROTO on another
 * status; -ETIMEDOUT; -ECONNREFUSED and other -errno; -EHOSTUNREACH for DNS failures. */
int agent_otlp_http_post(struct agent_otlp_http *h, const uint8_t *body, size_t len,
			 int *http_status, struct pf_error *err);

/* Host, port and path the exporter posts to (for logs and tests). */
const char *agent_otlp_http_url(const struct agent_otlp_http *h);

#endif
