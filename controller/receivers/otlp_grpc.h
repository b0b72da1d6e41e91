/* otlp_grpc.h — the OTLP/gRPC profiles receiver: the unary RPC
 * `opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export` on its own
 * listener (opt-in: `--otlp-grpc-listen HOST:PORT`, `otlp_grpc.listen`; 4317 is the
 * Collector's default), served with gRPC's C core (Debian's libgrpc) through its generic call
 * API (grpc_server_request_call: no generated code), on threads of its own, so the lws event
 * loop never waits for it.
 *
 * Each of `threads` threads owns a completion queue and a writable store connection
 * (synchronous=FULL, the retention set: store.h one connection per thread) and serves one
 * call at a time: the request message (at most max_message_bytes, after gRPC's own
 * decompression too: grpc-encoding gzip is accepted), the metadata `authorization: Bearer
 * <agent token>` checked as the HTTP receiver checks it (an agent token; a per-agent
 * credential names the profiles' agent, opamp/credential.h), then pf_profstore_ingest()
 * exactly as for OTLP/HTTP, so limits, idempotence and partial success are the same. The
 * answer: OK with the ExportProfilesServiceResponse (partial_success when some profiles were
 * rejected), else INVALID_ARGUMENT (undecodable), UNAUTHENTICATED, PERMISSION_DENIED,
 * RESOURCE_EXHAUSTED (too large), UNAVAILABLE (the store cannot write; retryable, with a
 * google.rpc.RetryInfo of PF_OTLP_GRPC_RETRY_MS in grpc-status-details-bin),
 * UNIMPLEMENTED for any other method, DEADLINE_EXCEEDED when the message does not arrive
 * within PF_OTLP_GRPC_RECV_TIMEOUT_S. A status message says why.
 *
 * Owns the gRPC server, its completion queues and threads, and their store connections. */
#ifndef PF_OTLP_GRPC_H
#define PF_OTLP_GRPC_H

#include <stddef.h>

#include "pf/error.h"

struct pf_profile_retention;
struct pf_otlp_grpc;

#define PF_OTLP_GRPC_METHOD                                                                        \
	"/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
#define PF_OTLP_GRPC_THREADS 2
#define PF_OTLP_GRPC_RECV_TIMEOUT_S 30
#define PF_OTLP_GRPC_RETRY_MS 1000 /* as the HTTP receiver's Retry-After: 1 */
/* Bounds on what clients hold: gRPC's memory for every connection, stream and message being
 * read (beyond it gRPC refuses with RESOURCE_EXHAUSTED or stops reading), streams at once per
 * connection, and an idle connection's life. */
#define PF_OTLP_GRPC_MEMORY_QUOTA ((size_t)256 << 20)
#define PF_OTLP_GRPC_MAX_STREAMS 16
#define PF_OTLP_GRPC_IDLE_S 300

struct pf_otlp_grpc_options {
	const char *host; /* as --listen takes it: an address, "0.0.0.0", "::" */
	int port;	  /* 0: any free port (pf_otlp_grpc_port says which) */
	const char *db_path;
	const char *fleet_url; /* postgres:// of the fleet tables (tokens), NULL: SQLite */
	const struct pf_profile_retention *retention;
	size_t max_message_bytes; /* 0: PF_PROFSTORE_DEFAULT_MAX_BYTES */
	unsigned threads;	  /* 0: PF_OTLP_GRPC_THREADS */
	/* PEM files: TLS on the listener when both are set (the controller's certificate). */
	const char *tls_cert, *tls_key;
};

/* Binds and starts serving. NULL with err filled (the address taken, a store that does not
 * open, a bad certificate). */
struct pf_otlp_grpc *pf_otlp_grpc_start(const struct pf_otlp_grpc_options *o, struct pf_error *err);
/* The bound port. */
int pf_otlp_grpc_port(const struct pf_otlp_grpc *g);
/* Cancels the calls in flight, stops the threads, frees everything (NULL: nothing). */
void pf_otlp_grpc_stop(struct pf_otlp_grpc *g);

#endif
