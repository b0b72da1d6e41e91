/* metrics.h — the controller's self-metrics, rendered as Prometheus text at /metrics.
 * Plain counters owned by the event-loop thread (no atomics needed: one thread writes and
 * reads them). */
#ifndef PF_CONTROLLER_METRICS_H
#define PF_CONTROLLER_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "pf/buf.h"

struct pf_fleet;
struct pf_qpool;
struct pf_captures;

#define PF_METRICS_STATUS_SLOTS 16

struct pf_metrics {
	uint64_t opamp_messages_in;
	uint64_t opamp_messages_out;
	uint64_t opamp_bad_messages;
	uint64_t opamp_oversize_rejected;
	uint64_t opamp_duplicate_uids;
	uint64_t opamp_connections_total;
	uint64_t opamp_connections_rejected_auth;
	uint64_t opamp_connections_rejected_overload;
	uint64_t opamp_slow_readers_closed;    /* send queue past max_send_queue_bytes */
	uint64_t opamp_reassembly_rejected;    /* 1008: the unfinished messages' budget is spent */
	uint64_t opamp_message_timeouts;       /* 1008: a message stalled or trickled */
	uint64_t http_pending_rejected;        /* closed at accept: max_pending_per_source */
	uint64_t http_header_timeouts;         /* closed: headers not complete in time */
	uint64_t http_body_rejected;           /* 429/503: the body budget is spent */
	uint64_t http_body_timeouts;           /* 408: a body stalled or trickled */
	uint64_t config_pushes;
	uint64_t persist_rows_written;
	uint64_t persist_batches;
	uint64_t persist_round_trips; /* the writer's PostgreSQL statements (shown when shared) */
	uint64_t persist_errors;
	/* replicas sharing PostgreSQL (set by the server on its persist tick; shown when shared) */
	bool store_shared;
	bool store_available;
	uint64_t sync_applied, sync_failed;
	/* worker pools (NULL when absent): profile queries, OTLP ingest */
	struct pf_qpool *query_pool;
	struct pf_qpool *ingest_pool;
	struct pf_captures *captures; /* incident captures, NULL when absent */
	/* API requests by HTTP status */
	int api_status_code[PF_METRICS_STATUS_SLOTS];
	uint64_t api_status_count[PF_METRICS_STATUS_SLOTS];
};

void pf_metrics_api_request(struct pf_metrics *m, int status);
/* Appends the Prometheus text exposition (version 0.0.4) of m and the fleet gauges. */
int pf_metrics_render(const struct pf_metrics *m, struct pf_fleet *fleet, int64_t now_ms,
		      struct pf_buf *out);

#endif
