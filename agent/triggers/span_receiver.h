/* span_receiver.h — the agent's OTLP/HTTP traces receiver for the span triggers (slow_span,
 * error_span): `POST /v1/traces` on profiling.triggers.slow_span.listen.
 *
 * Owns the receiver's HTTP server (its own libwebsockets context, bound exactly to the
 * configured address — an IPv4 address never gets a `::` socket — and served by one thread of
 * its own, "spans", so neither the OpAMP loop nor the sampler ever waits for a client), the
 * trigger rules' verdict per span and their per-minute caps, and the receiver's counters.
 *
 * A span is acted on when it is slow (end - start >= slow_span.threshold_ms, slow_span enabled)
 * or has status ERROR (error_span enabled); a span that is both counts as slow. Such a span is
 * rejected (OTLP partial_success, rejected_spans + a message naming the first reason of each
 * kind) when its process cannot be found (hooks->resolve: no process.pid / service.name of a
 * sampled process), when it started before now - lookback_seconds (its samples are gone), when
 * it ends more than AGENT_SPAN_MAX_FUTURE_MS in the future, when its rule's max_per_minute is
 * used up (a sliding minute), or when the data plane's queue is full (hooks->submit -EAGAIN).
 * Otherwise it becomes a job for the data plane (hooks->submit), which cuts the profile.
 * Spans that trigger nothing are accepted and dropped.
 *
 * HTTP: POST /v1/traces with Content-Type application/x-protobuf or application/json (another
 * type: 415), Content-Encoding gzip or none (another: 415); body over AGENT_SPAN_MAX_BODY (by
 * Content-Length or while reading, or after gunzip): 413; undecodable: 400 with a google.rpc.Status
 * whose message says why (pf_otlp_traces_decode's error); otherwise 200 with an
 * ExportTraceServiceResponse in the request's encoding. Bodies being received on all connections
 * together are bounded by AGENT_SPAN_MAX_INFLIGHT: a request that would pass it gets 503 (retryable
 * in OTLP/HTTP). Decoding runs on the receiver's thread, one request at a time (an OTLP/JSON body's
 * parse tree is a few times its size, transiently). Other paths 404, other methods 405. Keep-alive
 * is supported.
 *
 * Threads: agent_span_receiver_set_rules() and _counters() from any thread; the hooks are
 * called on the receiver's thread. */
#ifndef AGENT_SPAN_RECEIVER_H
#define AGENT_SPAN_RECEIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "otlp_traces.h"
#include "pf/buf.h"
#include "pf/error.h"

#define AGENT_SPAN_MAX_BODY_MIB 4
#define AGENT_SPAN_MAX_BODY ((size_t)AGENT_SPAN_MAX_BODY_MIB << 20)
#define AGENT_SPAN_MAX_INFLIGHT ((size_t)16 << 20) /* bodies buffered, all connections */
#define AGENT_SPAN_MAX_SPANS 16384
#define AGENT_SPAN_MAX_FUTURE_MS 5000
#define AGENT_SPAN_MAX_PER_MINUTE 600

enum agent_span_trigger { AGENT_SPAN_SLOW = 0, AGENT_SPAN_ERROR = 1 };

struct agent_span_rules {
	bool slow_enabled;
	uint32_t threshold_ms;
	uint32_t slow_max_per_minute;
	bool error_enabled;
	uint32_t error_max_per_minute;
	uint32_t lookback_seconds;
};

/* What the data plane gets for one triggering span. */
struct agent_span_job {
	struct pf_span span;
	uint32_t pid; /* resolved */
	enum agent_span_trigger trigger;
	uint64_t received_unix_ns;
};

struct agent_span_hooks {
	/* The span's process: 0 and *pid, or a negative errno with why (a sentence). */
	int (*resolve)(void *ctx, const struct pf_span *s, uint32_t *pid, char *why, size_t n);
	/* Hands a job over (copied): 0, or -EAGAIN when the queue is full. */
	int (*submit)(void *ctx, const struct agent_span_job *job);
	void *ctx;
};

struct agent_span_counters {
	uint64_t requests;	   /* POST /v1/traces answered 200 */
	uint64_t bad_requests;	   /* 400 */
	uint64_t too_large;	   /* 413 */
	uint64_t busy;		   /* 503: over AGENT_SPAN_MAX_INFLIGHT */
	uint64_t spans;		   /* spans decoded */
	uint64_t triggered[2];	   /* jobs handed over, by enum agent_span_trigger */
	uint64_t rejected_unknown; /* process not found */
	uint64_t rejected_old;	   /* outside the lookback (or too far in the future) */
	uint64_t rejected_rate;	   /* over max_per_minute */
	uint64_t rejected_queue;   /* data plane queue full */
};

struct agent_span_receiver;

/* The decision for a batch of decoded spans, without HTTP (the receiver's core, unit-tested):
 * jobs go to hooks->submit, *rejected and message (appended, "; "-separated, one entry per
 * reason) say what was refused. now_unix_ns is the receive time. */
void agent_span_receiver_process(struct agent_span_receiver *r, const struct pf_span *spans,
				 size_t n, uint64_t now_unix_ns, int64_t *rejected,
				 struct pf_buf *message);

/* Creates the receiver and binds listen ("HOST:PORT" as profiling.triggers.slow_span.listen
 * allows); serve = false makes one without a socket or thread (tests of _process).
 * NULL + errno with err ("profiling.triggers.slow_span.listen: cannot listen on ...: Address
 * already in use"). */
struct agent_span_receiver *agent_span_receiver_new(const char *listen, bool serve,
						    const struct agent_span_rules *rules,
						    const struct agent_span_hooks *hooks,
						    struct pf_error *err);
void agent_span_receiver_set_rules(struct agent_span_receiver *r,
				   const struct agent_span_rules *rules);
void agent_span_receiver_counters(struct agent_span_receiver *r, struct agent_span_counters *out);
/* The bound port. */
int agent_span_receiver_port(const struct agent_span_receiver *r);
/* Stops the thread and closes the socket. NULL is allowed. */
void agent_span_receiver_free(struct agent_span_receiver *r);

#endif
