/* otlp_http.h — the `otlp_http` exporter's transport: POST one ExportProfilesServiceRequest
 * (OTLP/HTTP, binary protobuf) to the configured endpoint.
 *
 * Owns the exporter's HTTP client (http_client.h, libcurl: one connection pool per exporter,
 * kept alive between exports, HTTP/2 where the endpoint offers it, HTTPS_PROXY / NO_PROXY from
 * the environment). cfg->tls (pf/profcfg.h) changes the TLS side: ca_file replaces the system
 * store, cert_file + key_file present a client certificate, server_name replaces the
 * endpoint's host for SNI and name verification, insecure_skip_verify turns verification off.
 * Its files are checked by agent_otlp_http_new(), which fails with err->path "tls.ca_file" /
 * "tls.cert_file" / "tls.key_file" and "cannot load <file>: <OpenSSL's reason>".
 * The whole request — DNS, connect, TLS handshake, send, response — is bounded by the
 * configured timeout_seconds. Because it blocks, it must run on a worker thread, never on the
 * agent's lws loop: exporter.c runs it on the exporter's own thread.
 *
 * Request: POST <path>, where path is the endpoint's path, or /v1development/profiles when the
 * endpoint has none (or "/"); Content-Type: application/x-protobuf; Content-Encoding: gzip
 * when compression is gzip; the configured headers (names and values must not contain CR, LF
 * or NUL, names no ':'). A 2xx response is success; anything else is an error with the HTTP
 * status and the start of the body in the message. The response's status, Retry-After and
 * Content-Type headers and the start of its body are handed back by
 * agent_otlp_http_send(), which the pyroscope exporter also uses with its own request target
 * and content type. Retries and queueing are exporter.c's. Not thread-safe (one request at a
 * time).
 *
 * Also here: a minimal reader of the OTLP ExportProfilesServiceResponse (two fields of
 * partial_success), so the exporter does not need the generated codec. */
#ifndef AGENT_EXPORT_OTLP_HTTP_H
#define AGENT_EXPORT_OTLP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http_client/http_client.h"
#include "pf/buf.h"
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
/* The endpoint URL's own path without a trailing '/', "" when it has none: the base that
 * pyroscope's "/ingest?..." target is appended to. */
const char *agent_otlp_http_base_path(const struct agent_otlp_http *h);

/* One POST of body to target (NULL: the endpoint's path) with the given Content-Type. When
 * content_type is NULL the body is an OTLP request: application/x-protobuf, gzip'd when the
 * exporter is configured so; with a content_type the body is sent as is. res is filled as far
 * as the exchange went. Returns as agent_otlp_http_post(). */
int agent_otlp_http_send(struct agent_otlp_http *h, const char *target, const char *content_type,
			 const uint8_t *body, size_t len, struct agent_http_result *res,
			 struct pf_error *err);

/* Reads ExportProfilesServiceResponse{partial_success = 1 {rejected_profiles = 1 (int64),
 * error_message = 2 (string)}} from untrusted bytes; other fields are skipped. *rejected and
 * msg (NUL-terminated, cut to msg_cap) are zero/"" when absent. Returns 1 when partial_success
 * was present, 0 when not (an empty body is a full success), -EBADMSG on malformed input. */
int agent_otlp_partial_success_parse(const uint8_t *data, size_t len, int64_t *rejected, char *msg,
				     size_t msg_cap);

#endif
