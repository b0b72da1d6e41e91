/* metrics.c — see metrics.h. */
#include "metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#include "fleet/capture.h"
#include "fleet/fleet.h"
#include "pf/compiler.h"
#include "profstore/query_pool.h"

void pf_metrics_api_request(struct pf_metrics *m, int status)
{
	for (int i = 0; i < PF_METRICS_STATUS_SLOTS; i++) {
		if (m->api_status_code[i] == status) {
			m->api_status_count[i]++;
			return;
		}
		if (m->api_status_code[i] == 0) {
			m->api_status_code[i] = status;
			m->api_status_count[i] = 1;
			return;
		}
	}
}

/* One metric without labels; type is "counter" or "gauge". */
static int metric(struct pf_buf *out, const char *type, const char *name, const char *help,
		  uint64_t v)
{
	return pf_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type,
			     name, (unsigned long long)v);
}

static int counter(struct pf_buf *out, const char *name, const char *help, uint64_t v)
{
	return metric(out, "counter", name, help, v);
}

static int gauge(struct pf_buf *out, const char *name, const char *help, uint64_t v)
{
	return metric(out, "gauge", name, help, v);
}

/* The plain counters of struct pf_metrics, in the order /metrics lists them. */
#define OFF(field) offsetof(struct pf_metrics, field)
static const struct {
	const char *name, *help;
	size_t off; /* of a uint64_t in struct pf_metrics */
} plain_counters[] = {
    {"profleet_opamp_messages_received_total", "AgentToServer messages received.",
     OFF(opamp_messages_in)},
    {"profleet_opamp_messages_sent_total", "ServerToAgent messages sent.", OFF(opamp_messages_out)},
    {"profleet_opamp_bad_messages_total",
     "Undecodable or malformed OpAMP messages (answered BAD_REQUEST).", OFF(opamp_bad_messages)},
    {"profleet_opamp_oversize_rejected_total", "OpAMP messages over the inbound size limit.",
     OFF(opamp_oversize_rejected)},
    {"profleet_opamp_duplicate_uids_total",
     "Connections that claimed an instance_uid already connected.", OFF(opamp_duplicate_uids)},
    {"profleet_opamp_connections_total", "OpAMP WebSocket connections accepted.",
     OFF(opamp_connections_total)},
    {"profleet_opamp_connections_rejected_auth_total",
     "OpAMP requests rejected for a missing or wrong agent token.",
     OFF(opamp_connections_rejected_auth)},
    {"profleet_opamp_connections_rejected_overload_total",
     "OpAMP requests answered 503 because the controller is at capacity.",
     OFF(opamp_connections_rejected_overload)},
    {"profleet_opamp_slow_readers_closed_total",
     "OpAMP WebSockets closed because their send queue passed max_send_queue_bytes.",
     OFF(opamp_slow_readers_closed)},
    {"profleet_opamp_reassembly_rejected_total",
     "OpAMP WebSockets closed (1008): their unfinished message would pass the bytes all "
     "unfinished messages may hold.",
     OFF(opamp_reassembly_rejected)},
    {"profleet_opamp_message_timeouts_total",
     "OpAMP WebSockets closed (1008): a fragmented message stalled or arrived too slowly.",
     OFF(opamp_message_timeouts)},
    {"profleet_http_pending_rejected_total",
     "Connections closed at accept: their address had max_pending_per_source "
     "connections still sending request headers.",
     OFF(http_pending_rejected)},
    {"profleet_http_header_timeouts_total",
     "Connections closed because a request's headers did not arrive within "
     "header_timeout_seconds.",
     OFF(http_header_timeouts)},
    {"profleet_http_body_rejected_total",
     "Requests answered 429 or 503 at the end of their headers: the request body bytes "
     "buffered for their address, or in all, would pass the limit.",
     OFF(http_body_rejected)},
    {"profleet_http_body_timeouts_total",
     "Requests answered 408 and closed: their body stalled or arrived too slowly.",
     OFF(http_body_timeouts)},
    {"profleet_config_pushes_total", "Remote configs sent to agents (on connect or on change).",
     OFF(config_pushes)},
    {"profleet_store_agent_rows_written_total", "Agent rows written to the fleet store.",
     OFF(persist_rows_written)},
    {"profleet_store_batches_total", "Agent row batches committed.", OFF(persist_batches)},
    {"profleet_store_errors_total", "Failed agent row batches.", OFF(persist_errors)},
};
#undef OFF

int pf_metrics_render(const struct pf_metrics *m, struct pf_fleet *fleet, int64_t now_ms,
		      struct pf_buf *out)
{
	struct pf_fleet_summary s;
	pf_fleet_summary(fleet, now_ms, &s);
	int r = 0;
	r |= gauge(out, "profleet_agents", "Agents known to the controller.", s.agents);
	r |= gauge(out, "profleet_agents_connected", "Agents connected now.", s.connected);
	r |= gauge(
	    out, "profleet_agents_connected_here",
	    "Agents connected to this controller (replicas sharing PostgreSQL: sum this one).",
	    s.connected_here);
	r |=
	    gauge(out, "profleet_agents_healthy", "Connected agents reporting healthy.", s.healthy);
	r |= gauge(out, "profleet_agents_stale", "Connected agents that missed 3 heartbeats.",
		   s.stale);
	r |= pf_buf_printf(out, "# HELP profleet_agents_config_status Agents by remote config "
				"status.\n# TYPE profleet_agents_config_status gauge\n");
	for (int i = 0; i < 4; i++)
		r |= pf_buf_printf(out, "profleet_agents_config_status{status=\"%s\"} %llu\n",
				   pf_config_state_name((enum pf_config_state)i),
				   (unsigned long long)s.by_state[i]);
	for (size_t i = 0; i < PF_ARRAY_SIZE(plain_counters); i++)
		r |= counter(out, plain_counters[i].name, plain_counters[i].help,
			     *(const uint64_t *)((const char *)m + plain_counters[i].off));
	if (m->store_shared) {
		r |= gauge(out, "profleet_store_available",
			   "1 while the shared PostgreSQL store answers (writes get 503 at 0).",
			   m->store_available);
		r |= counter(out, "profleet_store_notifications_applied_total",
			     "Changes other replicas made, applied here (LISTEN/NOTIFY).",
			     m->sync_applied);
		r |= counter(out, "profleet_store_notifications_failed_total",
			     "Changes other replicas made that could not be read back here.",
			     m->sync_failed);
		r |= counter(out, "profleet_store_agent_round_trips_total",
			     "Statements the agent-row writer sent to PostgreSQL (each one round "
			     "trip; many rows go in one).",
			     m->persist_round_trips);
	}
	struct {
		const char *name;
		struct pf_qpool *p;
	} pools[] = {{"query", m->query_pool}, {"ingest", m->ingest_pool}};
	/* Per pool, in this order: two gauges by state, three counters by outcome. */
	static const char *const pool_keys[5] = {"waiting", "running", "completed", "rejected",
						 "dropped"};
	static const struct {
		const char *name, *type, *help, *label;
		size_t first, n; /* its series: pool_keys[first, first + n) */
	} pool_families[] = {
	    {"profleet_pool_jobs", "gauge", "Jobs in the worker pools by state.", "state", 0, 2},
	    {"profleet_pool_jobs_total", "counter",
	     "Jobs by outcome (rejected: queue full, answered 503).", "outcome", 2, 3},
	};
	uint64_t v[2][5] = {{0}};
	for (size_t i = 0; i < 2; i++) {
		struct pf_qpool_stats st;
		if (!pools[i].p)
			continue;
		pf_qpool_stats(pools[i].p, &st);
		const uint64_t row[5] = {st.waiting, st.running, st.completed, st.rejected,
					 st.dropped};
		memcpy(v[i], row, sizeof(row));
	}
	for (size_t f = 0; f < PF_ARRAY_SIZE(pool_families); f++) {
		const char *name = pool_families[f].name;
		r |= pf_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, pool_families[f].help,
				   name, pool_families[f].type);
		for (size_t i = 0; i < 2; i++) {
			if (!pools[i].p)
				continue;
			for (size_t k = pool_families[f].first;
			     k < pool_families[f].first + pool_families[f].n; k++)
				r |= pf_buf_printf(out, "%s{pool=\"%s\",%s=\"%s\"} %" PRIu64 "\n",
						   name, pools[i].name, pool_families[f].label,
						   pool_keys[k], v[i][k]);
		}
	}
	if (m->captures) {
		struct pf_captures_stats cs;
		pf_captures_stats(m->captures, &cs);
		r |= gauge(out, "profleet_captures_open", "Incident captures not finished yet.",
			   cs.open);
		r |= counter(out, "profleet_captures_created_total", "Incident captures created.",
			     cs.created);
		r |= pf_buf_printf(out,
				   "# HELP profleet_capture_messages_total Capture messages by type "
				   "(sent: handed to a transport; status: applied or ignored).\n"
				   "# TYPE profleet_capture_messages_total counter\n"
				   "profleet_capture_messages_total{type=\"request\"} %llu\n"
				   "profleet_capture_messages_total{type=\"cancel\"} %llu\n"
				   "profleet_capture_messages_total{type=\"status\"} %llu\n"
				   "profleet_capture_messages_total{type=\"status_ignored\"} %llu\n",
				   (unsigned long long)cs.requests_sent,
				   (unsigned long long)cs.cancels_sent, (unsigned long long)cs.statuses,
				   (unsigned long long)cs.statuses_ignored);
		r |= counter(out, "profleet_capture_agents_timed_out_total",
			     "Agents failed at a capture's deadline without a result.",
			     cs.timed_out);
	}
	r |= pf_buf_printf(out, "# HELP profleet_api_requests_total REST API requests by HTTP "
				"status.\n# TYPE profleet_api_requests_total counter\n");
	for (int i = 0; i < PF_METRICS_STATUS_SLOTS && m->api_status_code[i]; i++)
		r |= pf_buf_printf(out, "profleet_api_requests_total{code=\"%d\"} %llu\n",
				   m->api_status_code[i],
				   (unsigned long long)m->api_status_count[i]);
	return r ? -ENOMEM : 0;
}
