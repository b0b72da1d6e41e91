/* dataplane_metrics.h — the data plane's counters and its metrics snapshot (endpoints/metrics.c
 * renders it). With opts.metrics the worker copies its counters, the sampler's stats, every
 * exporter's agent_exporter_status() and every pprof target's health into a snapshot under
 * its lock on its tick (no work per sample; only the worker reads the sampler), and once more
 * after the final flush: reading the sampler's counters and its programs' statistics is a few
 * system calls, and a scrape comes every 15-60 s. agent_dataplane_metrics() copies the last
 * snapshot: any thread, never waits for the worker beyond that copy. */
#ifndef AGENT_DATAPLANE_METRICS_H
#define AGENT_DATAPLANE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "export/exporter.h"
#include "limits/guard.h"
#include "limits/ratelimit.h"
#include "pf/profcfg.h"
#include "sampler/sampler_bpf.h"
#include "triggers/high_cpu.h"
#include "triggers/span_receiver.h"

struct agent_dataplane;

/* The window, export and sampler counters (for logs and tests). */
struct agent_dataplane_counters {
	uint64_t windows;	/* windows closed with samples (eBPF sampler) */
	uint64_t pprof_windows; /* scraped pprof profiles encoded and submitted */
	uint64_t exports;	/* submits accepted (all exporters) */
	uint64_t dropped;	/* submits refused (exporter busy or failing to start) */
	uint64_t encode_errors;
	uint64_t profile_bytes;	     /* OTLP bytes encoded, all windows */
	uint64_t last_profile_bytes; /* size of the last encoded window */
	uint64_t rate_limited;	     /* profiles dropped by limits.max_profiles_per_minute */
	uint64_t high_cpu_fired;     /* high_cpu firings (one per process) */
	uint64_t high_cpu_captures;  /* captures they started */
};
#define AGENT_DATAPLANE_NAME_LEN 32

struct agent_dataplane_exporter_metrics {
	unsigned index; /* position in profiling.exporters */
	char type[16];	/* "file", "otlp_http", "pyroscope" */
	bool running;	/* false: it could not be created (its health component says why) */
	struct agent_exporter_status st; /* zeros when not running */
};

struct agent_dataplane_target_metrics {
	unsigned index; /* position in profiling.pprof.targets */
	char type[16];	/* "cpu", "heap", ... */
	bool active;	/* scraped (profiling enabled, sources running); else zeros */
	bool healthy;	/* its last scrape succeeded (and could be encoded) */
	uint64_t scrapes_ok, scrapes_failed;
	uint32_t last_duration_ms;
	uint64_t last_bytes, last_samples;
	uint64_t last_ok_unix_ns;
};

struct agent_dataplane_prog_metrics {
	char name[AGENT_DATAPLANE_NAME_LEN]; /* BPF program name */
	uint64_t run_time_ns, run_cnt;
};

/* Span triggers (slow_span, error_span): profiles cut by the worker. */
struct agent_dataplane_span_metrics {
	uint64_t profiles[2]; /* exported, by enum agent_span_trigger */
	uint64_t empty;	      /* jobs whose process had no samples in the span's range */
	uint64_t failed;      /* cuts that failed (out of memory) */
	uint64_t last_latency_ns, max_latency_ns; /* span received -> profile submitted */
};

struct agent_dataplane_metrics {
	uint64_t refreshed_unix_ns; /* when the worker took it; 0 = not yet */
	struct agent_dataplane_counters counters;
	double overhead_pct; /* agent process + BPF CPU, % of one CPU over the overhead guard's
			      * window (the sampler health's figure); < 0 = none yet */
	struct agent_guard_state guard;	   /* the overhead guard */
	struct agent_ratelimit_stats rate; /* limits.max_profiles_per_minute */
	bool has_high_cpu;		   /* the high_cpu trigger runs: high_cpu is valid */
	struct agent_high_cpu_stats high_cpu;
	bool has_sampler; /* the eBPF sampler is loaded: sampler and progs are valid */
	struct pf_sampler_stats sampler; /* progs[].name are NULL here: use progs below */
	struct agent_dataplane_prog_metrics progs[PF_SAMPLER_N_PROGS];
	size_t n_exporters;
	struct agent_dataplane_exporter_metrics ex[PF_PROFCFG_MAX_EXPORTERS];
	size_t n_targets;
	struct agent_dataplane_target_metrics pt[PF_PROFCFG_MAX_TARGETS];
	bool has_spans; /* the span receiver runs: the fields below are valid */
	struct agent_span_counters span_rx;
	struct agent_dataplane_span_metrics span;
	uint64_t ring_bytes, ring_max_bytes, ring_samples, ring_evicted_memory;
};

/* Copies the last snapshot into *out (about 30 KiB: allocate it). 0, or -ENOTSUP when the
 * data plane was created without opts.metrics. */
int agent_dataplane_metrics(struct agent_dataplane *d, struct agent_dataplane_metrics *out);

/* Worker thread: takes the snapshot (on its tick, and after the final flush). */
void dp_metrics_refresh(struct agent_dataplane *d);

#endif
