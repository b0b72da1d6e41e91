/* otlp_grpc.h — the `otlp_grpc` exporter's transport: one unary call of
 * `opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export` with an
 * ExportProfilesServiceRequest, through gRPC's C core (a channel per exporter, reconnecting
 * by itself; no generated code).
 *
 * Endpoint: http://HOST[:PORT] (plain text) or https://HOST[:PORT] (TLS), port 4317 by
 * default; a path is not allowed. cfg->tls: ca_file replaces the system roots, cert_file +
 * key_file present a client certificate, server_name is the name verified (and sent as SNI)
 * instead of HOST; insecure_skip_verify is refused (gRPC's C core has no such switch).
 * Headers become request metadata (names in lower case), so `auth: agent_token` sends
 * `authorization: Bearer <token>`. compression gzip: grpc-encoding gzip. The call, from
 * connecting to the status, is bounded by timeout_seconds. gRPC's own retries are off: the
 * exporter's queue retries (exporter.c).
 *
 * The answer: the status code and message, the response message (for its partial success),
 * and the delay of a google.rpc.RetryInfo in the status details (grpc-status-details-bin), as
 * the OTLP specification asks servers to send with UNAVAILABLE and RESOURCE_EXHAUSTED.
 * Blocking: runs on the exporter's thread. Not thread-safe (one call at a time). */
#ifndef AGENT_EXPORT_OTLP_GRPC_H
#define AGENT_EXPORT_OTLP_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"
#include "pf/error.h"
#include "pf/profcfg.h"

#define AGENT_OTLP_GRPC_DEFAULT_PORT 4317

struct agent_otlp_grpc;

struct agent_otlp_grpc_result {
	int code;		/* grpc_status_code; -1 when the call could not be made */
	int64_t retry_delay_ms; /* RetryInfo.retry_delay, -1 when none */
	struct pf_buf response; /* the response message (code 0), at most 64 KiB kept */
};

/* Parses and checks cfg (endpoint, headers, tls files). NULL + errno, err with the key path. */
struct agent_otlp_grpc *agent_otlp_grpc_new(const struct pf_exporter *cfg, struct pf_error *err);
void agent_otlp_grpc_free(struct agent_otlp_grpc *g);

/* One call with body (uncompressed protobuf). 0 when the status is OK; -EPROTO for another
 * status (err says which, with its message), -ENOMEM. res is filled either way (release its
 * response with pf_buf_release). */
int agent_otlp_grpc_export(struct agent_otlp_grpc *g, const uint8_t *body, size_t len,
			   struct agent_otlp_grpc_result *res, struct pf_error *err);

/* Whether the OTLP specification calls a status retryable ("OTLP/gRPC Throttling" and
 * "Failures": CANCELLED, DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE, UNAVAILABLE, DATA_LOSS;
 * RESOURCE_EXHAUSTED only when the server sent a RetryInfo). */
bool agent_otlp_grpc_retryable(int code, bool has_retry_info);

/* "grpc://host:port" or "grpcs://host:port", for logs. */
const char *agent_otlp_grpc_url(const struct agent_otlp_grpc *g);

/* The delay of a google.rpc.RetryInfo inside a serialized google.rpc.Status (its details),
 * in ms; -1 when there is none. Exposed for tests. */
int64_t agent_otlp_grpc_retry_delay(const uint8_t *status, size_t len);

#endif
