/* dataplane.h — the agent's data plane: one worker thread ("dataplane") that owns the eBPF
 * sampler (sampler_bpf.h), the window timer, the pprof sources (sampler_pprof.h), OTLP encoding
 * and the configured exporters (export/exporter.h), steered by the active profiling config
 * through its apply hook. It also runs the captures the capture engine admitted
 * (triggers/capture_run.h), the overhead guard and the profile rate limit (limits/), the
 * high_cpu and span triggers, and keeps its health components and the metrics snapshot
 * (dataplane_metrics.h). Nothing of it runs on the lws loop: the loop posts configs, trigger
 * toggles and the stop request, and waits for the final flush. How the worker schedules its
 * work, and what each health component says: docs/agent.md, "Internals". */
#ifndef AGENT_DATAPLANE_H
#define AGENT_DATAPLANE_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "dataplane_metrics.h"
#include "pf/error.h"

#define AGENT_DATAPLANE_FLUSH_MS 4500
#define AGENT_DATAPLANE_SPAN_QUEUE 64   /* span jobs waiting for the worker */
#define AGENT_DATAPLANE_SPAN_PROCS 2048 /* sampled processes spans are resolved against */
/* The worker's longest sleep: its tick (1 s while the high_cpu trigger runs). Every other
 * deadline (window close, captures, spans, pprof scrapes) shortens it; config, triggers and
 * stop wake it at once. */
#define AGENT_DATAPLANE_POLL_MS 2000

struct agent_health;
struct agent_dataplane;

struct pf_procinfo_source;

struct agent_dataplane_opts {
	struct agent_health *health; /* borrowed; components are registered here */
	void (*wake)(void *ctx);     /* wakes the event loop (any thread) */
	void *wake_ctx;
	bool no_sampler;       /* tests: never load BPF, report "sampler" disabled */
	bool include_self;     /* sample the agent's own process too */
	bool frame_pointers_only; /* the sampler walks user stacks by frame pointers only */
	const char *spill_dir; /* exporters' spill directory (queued exporter API);
				* NULL: memory only */
	const char *unwind_dir; /* the sampler's unwind-table cache (state dir/unwind); NULL:
				 * tables are rebuilt at every start */
	const char *lines_dir;  /* the symbolizer's source-line tables (state dir/lines); NULL:
				 * a private directory, rebuilt at every start */
	const char *agent_token; /* copied; used by exporters with auth: agent_token */
	const char *agent_uid;   /* copied; every exported process carries it as the resource
				  * attribute profleet.agent.uid (the controller's store files
				  * profiles by agent with it) */
	bool metrics; /* keep the agent_dataplane_metrics() snapshot fresh (--metrics-listen) */
	struct agent_captures *captures; /* borrowed, outlives the data plane; NULL: none */
	const char *capture_receiver; /* copied; default receiver of captures (from the OpAMP
				       * URL), NULL when none */
	const char *capture_ca_file;  /* copied; the OpAMP connection's CA file, NULL: system */
	const char *capture_cert_file, *capture_key_file; /* copied; its client certificate */
	/* pod attribution (--k8s): the sampler's extra process attributes; borrowed, must
	 * outlive the data plane. NULL: none. */
	const struct pf_procinfo_source *attr_source;
};

/* The agent's own credential (and uid, NULL: unchanged) took over from --token-file: the
 * worker re-creates the exporters that send it (auth: agent_token) and the capture receiver
 * with them. Copied; any thread. -ENOMEM. */
int agent_dataplane_set_identity(struct agent_dataplane *d, const char *token, const char *uid);
/* Registers the health components and starts the worker thread, which loads the sampler in
 * the background. NULL + errno (err says why) when the thread cannot start. */
struct agent_dataplane *agent_dataplane_new(const struct agent_dataplane_opts *o,
					    struct pf_error *err);
/* The apply hook to register with agent_config_add_hook() before agent_config_start(). */
void agent_dataplane_hook(struct agent_dataplane *d, struct agent_config_hook *out);
/* The effective config's runtime note (agent_config_note_fn): while the overhead guard runs
 * the sampler below the configured frequency, "overhead guard: sampling.frequency_hz in
 * effect: 49 (throttled: 49 Hz of 99 Hz, cpu 1.40% > 1.00%)"; "" otherwise. The generation
 * grows when the frequency in effect changes; the worker wakes the loop then. Any thread. */
uint64_t agent_dataplane_effective_note(void *dataplane, char *buf, size_t cap);
/* Mode triggered: starts a capture of sampling.duration_seconds, or ends the running one
 * (the agent calls it on SIGUSR1). Async-signal-safe. */
void agent_dataplane_toggle_trigger(struct agent_dataplane *d);
/* First call requests the final flush; true once it finished (or timed out). Loop thread. */
bool agent_dataplane_flushed(void *dataplane);
/* Stops the worker (after a flush, or now), frees exporters and the sampler. */
void agent_dataplane_free(struct agent_dataplane *d);
/* The window, export and sampler counters (for logs and tests). */
void agent_dataplane_counters(struct agent_dataplane *d, struct agent_dataplane_counters *out);

#endif
