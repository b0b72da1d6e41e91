/* otlp_traces.h — OTLP/HTTP trace export requests in, plain span records out; and the
 * ExportTraceServiceResponse back (opentelemetry-proto v1.x `opentelemetry.proto.collector.
 * trace.v1`, OTLP/HTTP spec "Binary Protobuf Encoding" and "JSON Protobuf Encoding").
 *
 * Owns the reading of untrusted trace bodies for the agent's span triggers. Only what the
 * triggers use is kept per span: trace and span id, name (truncated), start and end
 * (unix ns), status code, and from the span's resource service.name and process.pid, and
 * thread.id from the span's attributes (else its resource's).
 *
 * Bodies: protobuf (application/x-protobuf) or OTLP/JSON (application/json: lowerCamelCase
 * keys, trace/span ids in hex (either case), 64-bit integers as decimal strings or JSON
 * numbers, status.code as an integer or its enum name), optionally gzip (Content-Encoding).
 * Bounds: the body as received and after gunzip is at most opts.max_bytes (else -E2BIG),
 * protobuf is unpacked through an allocator capped at 8 * max_bytes + 4 KiB and scanned for nesting
 * depth first, at most opts.max_spans spans (else -E2BIG).
 *
 * Malformed input is -EBADMSG with err naming the place, e.g.
 *   "resourceSpans[0].scopeSpans[1].spans[3].traceId: must be 32 hex digits"
 *   "resourceSpans[0].scopeSpans[0].spans[0].endTimeUnixNano: before startTimeUnixNano"
 * (protobuf paths use the same names). A span needs a non-zero trace id (16 bytes) and span id
 * (8 bytes) and a non-zero start time not after its end time. */
#ifndef PF_OTLP_TRACES_H
#define PF_OTLP_TRACES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"
#include "pf/error.h"

#define PF_OTLP_TRACES_MAX_BYTES_DEFAULT ((size_t)4 << 20)
#define PF_OTLP_TRACES_MAX_SPANS_DEFAULT 16384
#define PF_SPAN_NAME_LEN 64
#define PF_SPAN_SERVICE_LEN 128

enum pf_span_status { PF_SPAN_STATUS_UNSET = 0, PF_SPAN_STATUS_OK = 1, PF_SPAN_STATUS_ERROR = 2 };

/* One decoded span: a plain value (no pointers). */
struct pf_span {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint64_t start_unix_ns, end_unix_ns;
	int status;   /* enum pf_span_status; unknown codes are kept as sent */
	uint32_t pid; /* resource process.pid, 0 when absent or not 1..2^31-1 */
	uint32_t tid; /* thread.id (span, else resource), 0 when absent or out of range */
	char name[PF_SPAN_NAME_LEN]; /* truncated */
	/* resource service.name, "" when absent; service_name_long when it did not fit (then it
	 * matches no process) */
	char service_name[PF_SPAN_SERVICE_LEN];
	bool service_name_long;
};

struct pf_otlp_traces_opts {
	bool json;	  /* OTLP/JSON, else protobuf */
	bool gzip;	  /* body is gzip (Content-Encoding: gzip) */
	size_t max_bytes; /* 0 = PF_OTLP_TRACES_MAX_BYTES_DEFAULT */
	size_t max_spans; /* 0 = PF_OTLP_TRACES_MAX_SPANS_DEFAULT */
};

/* Decodes one ExportTraceServiceRequest. 0 with *spans (calloc'd, caller frees; NULL when
 * *n == 0) and *n; -EBADMSG (malformed: bad gzip, bad protobuf/JSON, bad ids or times),
 * -E2BIG (over max_bytes or max_spans), -ENOMEM; err says which and where. */
int pf_otlp_traces_decode(const uint8_t *body, size_t len, const struct pf_otlp_traces_opts *o,
			  struct pf_span **spans, size_t *n, struct pf_error *err);

/* Appends an ExportTraceServiceRequest (protobuf, or OTLP/JSON when json) holding spans, one
 * ResourceSpans per span with its service.name (when set) and process.pid (when non-zero),
 * thread.id as a span attribute (when non-zero): tests, fuzz seeds and benchmarks send what the
 * decoder reads back. 0, -ENOMEM, -E2BIG (out's cap). */
int pf_otlp_traces_encode(const struct pf_span *spans, size_t n, bool json, struct pf_buf *out);

/* Appends an ExportTraceServiceResponse: partial_success {rejected_spans, error_message} when
 * rejected > 0 or message is non-empty, else the empty response. json: OTLP/JSON
 * ({"partialSuccess":{"rejectedSpans":"2","errorMessage":"..."}}), else protobuf.
 * 0, -ENOMEM, -E2BIG (out's cap). */
int pf_otlp_traces_response(int64_t rejected, const char *message, bool json, struct pf_buf *out);

/* Appends a google.rpc.Status {code, message}: the body of an OTLP/HTTP 4xx/5xx answer, in
 * protobuf or (json) {"code":3,"message":"..."}; the one Status encoder, also the profile
 * store's (protobuf). Nothing is appended on failure. 0, -ENOMEM, -E2BIG. */
int pf_otlp_status_encode(int32_t code, const char *message, bool json, struct pf_buf *out);

/* Appends to a protobuf Status that pf_otlp_status_encode() just wrote a details entry: an
 * Any holding a google.rpc.RetryInfo whose retry_delay is delay_ms (0 to 86,400,000), the
 * hint OTLP clients honour for UNAVAILABLE and RESOURCE_EXHAUSTED. Nothing is appended on
 * failure. 0, -EINVAL (delay out of range), -ENOMEM, -E2BIG. */
#define PF_OTLP_RETRY_INFO_TYPE "type.googleapis.com/google.rpc.RetryInfo"
int pf_otlp_status_append_retry(struct pf_buf *out, int64_t delay_ms);

#endif
