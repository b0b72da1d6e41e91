/* metrics.h — the agent's metrics endpoint (--metrics-listen ADDR:PORT): the
 * Prometheus text exposition format 0.0.4 at GET /metrics, and GET /healthz.
 *
 * Owns the --metrics-listen syntax, the rendering of the metrics (a plain function over values,
 * unit-tested on its own) and a small HTTP server: its own libwebsockets context (lws 4.1.6)
 * with one listening vhost, serviced by one thread of its own ("metrics"), so a slow scraper
 * never delays the OpAMP loop and the OpAMP loop never delays a scrape. Every answer is built
 * on that thread from copies: agent_dataplane_metrics() (the worker's snapshot, refreshed
 * on its tick, every 2 s or every second), agent_health_build() (thread-safe) and the
 * process' own getrusage() and /proc/self/statm. Nothing here touches the sampler or an exporter.
 *
 * HTTP: GET /metrics -> 200 text/plain; version=0.0.4; GET /healthz -> 200 "ok" while the
 * process serves (component health is in /metrics); any other path 404; any other method on a
 * known path 405 with Allow: GET (a request with a body is answered without reading it, then
 * the connection closes). Query strings are ignored. Keep-alive is supported.
 *
 * Metric names (all profleet_agent_*; counters end in _total, units in the name) are listed
 * in docs/agent.md "Metrics"; a family whose source is absent (no eBPF sampler, no exporter,
 * no pprof target) is left out.
 *
 * Lifecycle: agent_metrics_new() binds at once (so a taken port is a startup error with the
 * reason), agent_metrics_start() starts serving once the data plane exists,
 * agent_metrics_free() stops the thread and closes the socket. */
#ifndef AGENT_METRICS_H
#define AGENT_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "dataplane_metrics.h"
#include "endpoints/listen_addr.h"
#include "limits/self_usage.h"
#include "opamp_codec.h"
#include "pf/buf.h"
#include "pf/error.h"

#define AGENT_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define AGENT_METRICS_MAX_BYTES ((size_t)8 << 20) /* cap of one /metrics answer */

struct agent_health;
struct agent_metrics;

/* What one /metrics answer shows; any pointer may be NULL (its families are left out). */
struct agent_metrics_input {
	const char *version; /* profleet_agent_info{version} */
	const struct agent_self_usage *proc;
	const struct agent_dataplane_metrics *dp;
	const struct pf_health *health; /* agent_health_build() tree */
};

/* Appends the exposition text of in to out. 0, or the pf_buf error (-ENOMEM, -E2BIG). */
int agent_metrics_render(const struct agent_metrics_input *in, struct pf_buf *out);

/* Escapes a label value (backslash, double quote, newline) into out (always terminated;
 * truncated to cap). Returns the length written. */
size_t agent_metrics_escape_label(char *out, size_t cap, const char *value);

/* Binds the listening socket (a new lws context). health is borrowed (may be NULL). NULL +
 * errno with err ("--metrics-listen: cannot listen on 127.0.0.1:9464: Address already in use")
 * when the address cannot be bound. */
struct agent_metrics *agent_metrics_new(const struct agent_listen_addr *l,
					struct agent_health *health, struct pf_error *err);
/* Starts the serving thread; dataplane is borrowed (may be NULL: no data plane families) and
 * must outlive agent_metrics_free(). 0 or -errno with err. */
int agent_metrics_start(struct agent_metrics *m, struct agent_dataplane *dataplane,
			struct pf_error *err);
/* The bound port (the real one when 0 was asked). */
int agent_metrics_port(const struct agent_metrics *m);
/* Stops serving (joins the thread) and closes the socket. NULL is allowed. */
void agent_metrics_free(struct agent_metrics *m);

#endif
